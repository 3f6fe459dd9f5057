/* Op definitions of the collective ops of domain "mixrt", the ops a tensor-parallel model uses
 * to exchange tensors between ranks: AllReduce, AllGather, ReduceScatter, Broadcast, Send and
 * Recv. Every one carries `world_size`, the number of ranks the model was cut for, so
 * inference is exact: AllGather multiplies its axis by it, ReduceScatter divides (a symbolic
 * dim stays symbolic as a floordiv). A session whose communicator has another size refuses the
 * model (v2runtime/session_comm.c); with world_size 1 the four collectives are identities, which
 * is what the reference interpreter computes for one rank. The kernels are kernels/collective.c. */
#include <string.h>

#include "graph/ops/collective_params.h"
#include "graph/ops/groups.h"
#include "graph/ops/op.h"

/* --- parse ------------------------------------------------------------------------------------ */

static const mx_attr_spec allreduce_attrs[] = {
    {.name = "world_size", .type = MX_ATTR_INT, .required = true},
    {.name = "reduce", .type = MX_ATTR_STRING, .def_s = "sum"},
    {0},
};
static const mx_attr_spec allgather_attrs[] = {
    {.name = "world_size", .type = MX_ATTR_INT, .required = true},
    {.name = "axis", .type = MX_ATTR_INT, .def_i = 0},
    {0},
};
static const mx_attr_spec reducescatter_attrs[] = {
    {.name = "world_size", .type = MX_ATTR_INT, .required = true},
    {.name = "axis", .type = MX_ATTR_INT, .def_i = 0},
    {.name = "reduce", .type = MX_ATTR_STRING, .def_s = "sum"},
    {0},
};
static const mx_attr_spec broadcast_attrs[] = {
    {.name = "world_size", .type = MX_ATTR_INT, .required = true},
    {.name = "root", .type = MX_ATTR_INT, .def_i = 0},
    {0},
};
static const mx_attr_spec send_attrs[] = {
    {.name = "world_size", .type = MX_ATTR_INT, .required = true},
    {.name = "peer", .type = MX_ATTR_INT, .required = true},
    {.name = "tag", .type = MX_ATTR_INT, .def_i = 0},
    {0},
};
static const mx_attr_spec recv_attrs[] = {
    {.name = "world_size", .type = MX_ATTR_INT, .required = true},
    {.name = "peer", .type = MX_ATTR_INT, .required = true},
    {.name = "tag", .type = MX_ATTR_INT, .def_i = 0},
    {.name = "dtype", .type = MX_ATTR_INT, .required = true},
    {.name = "shape", .type = MX_ATTR_INTS, .required = true},
    {0},
};

/* The collective an op name stands for. */
static int32_t kind_of(const char *name) {
  static const struct {
    const char *name;
    int32_t kind;
  } kinds[] = {
      {"AllReduce", MX_COLL_ALLREDUCE},
      {"AllGather", MX_COLL_ALLGATHER},
      {"ReduceScatter", MX_COLL_REDUCESCATTER},
      {"Broadcast", MX_COLL_BROADCAST},
      {"Send", MX_COLL_SEND},
      {"Recv", MX_COLL_RECV},
  };
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    if (strcmp(kinds[i].name, name) == 0) return kinds[i].kind;
  return 0;
}

static bool has_attr(const mx_attr_spec *spec, const char *name) {
  for (; spec->name; spec++)
    if (strcmp(spec->name, name) == 0) return true;
  return false;
}

/* A rank attribute (root, peer) must name one of world_size ranks. */
static mx_status parse_rank(const mx_parse_ctx *pc, const char *name, int64_t world, int64_t *out) {
  *out = mx__parse_int(pc, name);
  if (*out < 0 || *out >= world)
    return mx__parse_fail(pc, "attribute '%s' is %lld, not a rank of world_size %lld", name, (long long)*out,
                          (long long)world);
  return MX_OK;
}

static mx_status parse_recv_shape(const mx_parse_ctx *pc, mx_collective_params *p) {
  int64_t code = mx__parse_int(pc, "dtype");
  if (code <= 0 || code > MX_DTYPE_MAX_CODE || !mx_dtype_is_supported((int)code) || code == MX_STRING)
    return mx__parse_fail(pc, "attribute 'dtype' is %lld, not a tensor element type mixrt sends",
                          (long long)code);
  p->dtype = (int32_t)code;
  size_t n = 0;
  mx_status st = mx__parse_ints(pc, "shape", p->shape, MX_MAX_RANK, &n);
  if (st != MX_OK) return mx__parse_fail(pc, "attribute 'shape' has more than %d dims", MX_MAX_RANK);
  for (size_t i = 0; i < n; i++)
    if (p->shape[i] < 0)
      return mx__parse_fail(pc, "attribute 'shape' has dim %zu = %lld; Recv takes concrete dims", i,
                            (long long)p->shape[i]);
  p->rank = (int32_t)n;
  return MX_OK;
}

static mx_status collective_parse(const mx_parse_ctx *pc, void *params) {
  mx_collective_params *p = params;
  memset(p, 0, sizeof *p);
  const mx_attr_spec *spec = pc->def->attrs;
  p->kind = kind_of(pc->def->name);
  p->world_size = mx__parse_int(pc, "world_size");
  if (p->world_size < 1 || p->world_size > (1 << 20))
    return mx__parse_fail(pc, "attribute 'world_size' is %lld; it must be at least 1",
                          (long long)p->world_size);
  if (has_attr(spec, "reduce")) {
    char mode[16];
    if (mx__parse_string(pc, "reduce", mode, sizeof mode) != MX_OK)
      return mx__parse_fail(pc, "attribute 'reduce' must be \"sum\" or \"max\"");
    if (strcmp(mode, "sum") == 0)
      p->reduce = MX_COLL_REDUCE_SUM;
    else if (strcmp(mode, "max") == 0)
      p->reduce = MX_COLL_REDUCE_MAX;
    else
      return mx__parse_fail(pc, "attribute 'reduce' is \"%s\"; it must be \"sum\" or \"max\"", mode);
  }
  if (has_attr(spec, "axis")) p->axis = mx__parse_int(pc, "axis");
  mx_status st = MX_OK;
  if (has_attr(spec, "root")) st = parse_rank(pc, "root", p->world_size, &p->root);
  if (st == MX_OK && has_attr(spec, "peer")) {
    st = parse_rank(pc, "peer", p->world_size, &p->peer);
    p->tag = mx__parse_int(pc, "tag");
    if (st == MX_OK && (p->tag < 0 || p->tag > 32767))
      return mx__parse_fail(pc, "attribute 'tag' is %lld; it must lie in 0..32767", (long long)p->tag);
  }
  if (st == MX_OK && p->kind == MX_COLL_RECV) st = parse_recv_shape(pc, p);
  return st;
}

/* --- infer ------------------------------------------------------------------------------------ */

/* Whether dtype can travel: the reducing ops take the types they can add and compare, the
 * moving ops any fixed-size type. */
static mx_status check_dtype(mx_infer_ctx *ctx, const mx_collective_params *p) {
  mx_dtype dt = ctx->in[0].dtype;
  if (dt == MX_DTYPE_UNDEFINED) return MX_OK;
  bool reduces = p->kind == MX_COLL_ALLREDUCE || p->kind == MX_COLL_REDUCESCATTER;
  if (reduces && !(mx_dtype_is_float(dt) || dt == MX_INT32 || dt == MX_INT64))
    return mx__infer_fail(
        ctx, MX_ERR_DTYPE,
        "input 0 has dtype %s; the reduction takes float16, bfloat16, float32, float64, int32 "
        "or int64",
        mx_dtype_name(dt));
  if (dt == MX_STRING) return mx__infer_fail(ctx, MX_ERR_DTYPE, "input 0 holds strings, which do not travel");
  return MX_OK;
}

/* Output dim `axis` of AllGather (x's times world_size) or ReduceScatter (x's / world_size). */
static mx_status scale_axis(mx_infer_ctx *ctx, const mx_collective_params *p) {
  const mx_shape *in = &ctx->in[0].shape;
  if (in->rank == MX_RANK_UNKNOWN) return MX_OK;
  int32_t axis;
  if (!mx__norm_axis(p->axis, in->rank, &axis))
    return mx__infer_fail(ctx, MX_ERR_INVALID_GRAPH, "attribute 'axis' %lld is out of range for rank %d",
                          (long long)p->axis, (int)in->rank);
  mx_dim d = in->dims[axis];
  mx_dim ws = mx_sym_const(ctx->syms, p->world_size);
  if (p->kind == MX_COLL_ALLGATHER) {
    ctx->out[0].shape.dims[axis] = mx_sym_mul(ctx->syms, d, ws);
    return MX_OK;
  }
  if (mx_dim_is_concrete(d) && d % p->world_size != 0)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "dim %d of input 0 is %lld, not a multiple of world_size %lld",
                          (int)axis, (long long)d, (long long)p->world_size);
  ctx->out[0].shape.dims[axis] = mx_sym_floordiv(ctx->syms, d, ws);
  return MX_OK;
}

static mx_status collective_infer(mx_infer_ctx *ctx) {
  const mx_collective_params *p = ctx->params;
  if (p->kind == MX_COLL_RECV) {
    ctx->out[0].dtype = (mx_dtype)p->dtype;
    ctx->out[0].shape.rank = p->rank;
    for (int32_t i = 0; i < p->rank; i++) ctx->out[0].shape.dims[i] = p->shape[i];
    return MX_OK;
  }
  mx_status st = check_dtype(ctx, p);
  if (st != MX_OK || p->kind == MX_COLL_SEND) return st;
  ctx->out[0].dtype = ctx->in[0].dtype;
  ctx->out[0].shape = ctx->in[0].shape;
  /* The values differ per rank (that is the point), so no symbolic value passes through. */
  ctx->out[0].sv_len = -1;
  if (p->kind == MX_COLL_ALLGATHER || p->kind == MX_COLL_REDUCESCATTER) return scale_axis(ctx, p);
  return MX_OK;
}

/* --- definitions ------------------------------------------------------------------------------ */

#define COLLECTIVE_DEF(var, op, n_in, n_out, schema) \
  static const mx_op_def var = {                     \
      .name = op,                                    \
      .domain = "mixrt",                             \
      .min_inputs = n_in,                            \
      .max_inputs = n_in,                            \
      .min_outputs = n_out,                          \
      .max_outputs = n_out,                          \
      .flags = MX_OP_COMMUNICATES,                   \
      .attrs = schema,                               \
      .params_size = sizeof(mx_collective_params),   \
      .parse = collective_parse,                     \
      .infer = collective_infer,                     \
  }

COLLECTIVE_DEF(op_allreduce, "AllReduce", 1, 1, allreduce_attrs);
COLLECTIVE_DEF(op_allgather, "AllGather", 1, 1, allgather_attrs);
COLLECTIVE_DEF(op_reducescatter, "ReduceScatter", 1, 1, reducescatter_attrs);
COLLECTIVE_DEF(op_broadcast, "Broadcast", 1, 1, broadcast_attrs);
COLLECTIVE_DEF(op_send, "Send", 1, 0, send_attrs);
COLLECTIVE_DEF(op_recv, "Recv", 0, 1, recv_attrs);

const mx_op_def *const mx__ops_collective[] = {
    &op_allreduce, &op_allgather, &op_reducescatter, &op_broadcast, &op_send, &op_recv, NULL,
};
