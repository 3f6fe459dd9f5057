/* Index group, part 3: Trilu, TopK and NonZero.
 *
 * TopK's output size along its axis is the value of K (an attribute before opset 10, a 1-element
 * input from 10), which may be symbolic. NonZero is the one data-dependent op: at compile time
 * its output is [rank, fresh symbol]; its upper bound is [rank, numel(input)] and its kernel
 * writes the actual count into its output tensor. */
#include <string.h>

#include "graph/ops/index_params.h"
#include "graph/ops/shape_impl.h"

/* --- Trilu ------------------------------------------------------------------------------------ */

static const mx_attr_spec trilu_attrs[] = {
    {.name = "upper", .type = MX_ATTR_INT, .def_i = 1},
    {0},
};

static mx_status trilu_parse(const mx_parse_ctx *pc, void *params) {
  mx_trilu_params *p = params;
  p->upper = mx__parse_int(pc, "upper") != 0;
  return MX_OK;
}

static mx_status trilu_infer(mx_infer_ctx *ctx) {
  mx_status st = mx__shp_want_dtype(ctx, 1, MX_INT64, "k");
  if (st != MX_OK) return st;
  const mx_shape *s = &ctx->in[0].shape;
  if (s->rank != MX_RANK_UNKNOWN && s->rank < 2)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "input must have rank >= 2, not %d", (int)s->rank);
  const mx_shape *k = mx__in_present(ctx, 1) ? &ctx->in[1].shape : NULL;
  if (k && k->rank > 1) return mx__infer_fail(ctx, MX_ERR_SHAPE, "k must be a scalar");
  ctx->out[0].dtype = ctx->in[0].dtype;
  ctx->out[0].shape = *s;
  return MX_OK;
}

const mx_op_def mx__op_trilu = {
    .name = "Trilu",
    .min_inputs = 1,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = trilu_attrs,
    .params_size = sizeof(mx_trilu_params),
    .parse = trilu_parse,
    .infer = trilu_infer,
};

/* --- TopK ------------------------------------------------------------------------------------- */

static const mx_attr_spec topk_attrs[] = {
    {.name = "axis", .type = MX_ATTR_INT, .def_i = -1},
    {.name = "largest", .type = MX_ATTR_INT, .def_i = 1},
    {.name = "sorted", .type = MX_ATTR_INT, .def_i = 1},
    {.name = "k", .type = MX_ATTR_INT},
    {0},
};

static mx_status topk_parse(const mx_parse_ctx *pc, void *params) {
  mx_topk_params *p = params;
  memset(p, 0, sizeof *p);
  p->axis = mx__parse_int(pc, "axis");
  p->largest = mx__parse_int(pc, "largest") != 0;
  p->sorted = mx__parse_int(pc, "sorted") != 0;
  if (pc->opset < 10) {
    const mx_attr *k = mx__parse_attr(pc, "k");
    if (!k) return mx__parse_fail(pc, "attribute k is required before opset 10");
    if (k->i < 0) return mx__parse_fail(pc, "k must be >= 0");
    if (pc->n_inputs != 1) return mx__parse_fail(pc, "TopK takes one input before opset 10");
    p->k = k->i;
    p->k_from_attr = 1;
  } else {
    if (mx__parse_attr(pc, "k")) return mx__parse_fail(pc, "k is an input from opset 10, not an attribute");
    if (pc->n_inputs != 2) return mx__parse_fail(pc, "TopK takes X and K inputs from opset 10");
  }
  return MX_OK;
}

static mx_status topk_infer(mx_infer_ctx *ctx) {
  const mx_topk_params *p = ctx->params;
  const mx_value_info *x = &ctx->in[0];
  mx_status st = mx__shp_want_dtype(ctx, 1, MX_INT64, "K");
  if (st != MX_OK) return st;
  ctx->out[0].dtype = x->dtype;
  if (ctx->n_out > 1) ctx->out[1].dtype = MX_INT64;
  if (mx_dtype_size(x->dtype) == 0 || x->dtype == MX_BOOL)
    return mx__infer_fail(ctx, MX_ERR_DTYPE, "input 0 (X) must be numeric, not %s", mx_dtype_name(x->dtype));
  int32_t r = x->shape.rank, axis;
  if (r == MX_RANK_UNKNOWN) return MX_OK;
  if (!mx__norm_axis(p->axis, r, &axis))
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "axis %lld is out of range for rank %d", (long long)p->axis,
                          (int)r);
  mx_dim k = MX_DIM_UNKNOWN;
  if (p->k_from_attr) {
    k = p->k;
  } else {
    mx_dim v[1];
    int32_t n;
    if (mx__shp_values(ctx, 1, v, 1, &n) && n == 1 && !mx_dim_is_unknown(v[0])) {
      st = mx__shp_dim_of_value(ctx, v[0], &k, "K");
      if (st != MX_OK) return st;
    } else {
      k = mx__infer_fresh(ctx, "k");
    }
  }
  mx_dim d = x->shape.dims[axis];
  if (mx_dim_is_concrete(k) && mx_dim_is_concrete(d) && k > d)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "K = %lld exceeds axis %d of size %lld", (long long)k, (int)axis,
                          (long long)d);
  for (uint32_t i = 0; i < ctx->n_out; i++) {
    ctx->out[i].shape = x->shape;
    ctx->out[i].shape.dims[axis] = k;
  }
  return MX_OK;
}

const mx_op_def mx__op_topk = {
    .name = "TopK",
    .min_inputs = 1,
    .max_inputs = 2,
    .min_outputs = 2,
    .max_outputs = 2,
    .value_inputs = 1u << 1,
    .attrs = topk_attrs,
    .params_size = sizeof(mx_topk_params),
    .parse = topk_parse,
    .infer = topk_infer,
};

/* --- NonZero ---------------------------------------------------------------------------------- */

static const mx_attr_spec no_attrs[] = {{0}};

static mx_status nonzero_infer(mx_infer_ctx *ctx) {
  const mx_shape *s = &ctx->in[0].shape;
  mx_value_info *o = &ctx->out[0];
  o->dtype = MX_INT64;
  o->shape.rank = 2;
  /* A scalar counts as a 1-D tensor of one element. */
  o->shape.dims[0] = s->rank == MX_RANK_UNKNOWN ? MX_DIM_UNKNOWN : s->rank == 0 ? 1 : s->rank;
  int64_t n;
  o->shape.dims[1] = mx__shp_concrete_numel(s, &n) && n == 0 ? 0 : mx__infer_fresh(ctx, "nonzero");
  return MX_OK;
}

static mx_status nonzero_upper_bound(mx_infer_ctx *ctx, uint32_t index, mx_shape *bound) {
  const mx_shape *s = &ctx->in[0].shape;
  int64_t n;
  if (index != 0 || !mx__shp_concrete_numel(s, &n))
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "NonZero's upper bound needs a concrete input shape");
  memset(bound, 0, sizeof *bound);
  bound->rank = 2;
  bound->dims[0] = s->rank == 0 ? 1 : s->rank;
  bound->dims[1] = n;
  return MX_OK;
}

const mx_op_def mx__op_nonzero = {
    .name = "NonZero",
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .flags = MX_OP_DATA_DEPENDENT,
    .attrs = no_attrs,
    .infer = nonzero_infer,
    .upper_bound = nonzero_upper_bound,
};
