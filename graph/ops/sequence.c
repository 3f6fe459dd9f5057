/* Sequence and optional ops: SequenceConstruct, SequenceEmpty, SequenceInsert, SequenceAt,
 * SequenceErase, SequenceLength, SplitToSequence, ConcatFromSequence, Optional,
 * OptionalHasElement, OptionalGetElement.
 *
 * A sequence value's dtype is its tensors' element type and its shape their common shape (dims
 * where the tensors may differ are unknown; an unknown rank when even that may differ), so
 * SequenceAt can give a useful shape. These ops have no kernels: reference/control.c runs them
 * on the mx_value_list values of mixrt/sequence.h. Their definitions are in control.c's group. */
#include <string.h>

#include "graph/ops/control_impl.h"
#include "graph/ops/control_params.h"

/* Common shape of a and b: equal dims kept, others unknown; different ranks: unknown rank. */
static mx_shape merge_shape(const mx_shape *a, const mx_shape *b) {
  mx_shape s = {.rank = MX_RANK_UNKNOWN};
  if (a->rank < 0 || a->rank != b->rank) return s;
  s = *a;
  for (int32_t k = 0; k < a->rank; k++)
    if (a->dims[k] != b->dims[k]) s.dims[k] = MX_DIM_UNKNOWN;
  return s;
}

static mx_status need_kind(mx_infer_ctx *ctx, uint32_t i, bool seq) {
  bool ok = seq ? ctx->in[i].kind == MX_KIND_SEQUENCE : ctx->in[i].kind == MX_KIND_TENSOR;
  if (!ok) return mx__infer_fail(ctx, MX_ERR_DTYPE, "input %u must be a %s", i, seq ? "sequence" : "tensor");
  return MX_OK;
}

static mx_status need_int_position(mx_infer_ctx *ctx, uint32_t i) {
  if (!mx__in_present(ctx, i)) return MX_OK;
  mx_status st = need_kind(ctx, i, false);
  if (st != MX_OK) return st;
  if (ctx->in[i].dtype != MX_INT64 && ctx->in[i].dtype != MX_INT32)
    return mx__infer_fail(ctx, MX_ERR_DTYPE, "input %u (position) must be int32 or int64, not %s", i,
                          mx_dtype_name(ctx->in[i].dtype));
  return MX_OK;
}

static void out_seq(mx_infer_ctx *ctx, mx_dtype dtype, mx_shape shape) {
  ctx->out[0].kind = MX_KIND_SEQUENCE;
  ctx->out[0].dtype = dtype;
  ctx->out[0].shape = shape;
}

static mx_status construct_infer(mx_infer_ctx *ctx) {
  mx_shape s = ctx->in[0].shape;
  for (uint32_t i = 0; i < ctx->n_in; i++) {
    mx_status st = need_kind(ctx, i, false);
    if (st == MX_OK) st = mx__infer_same_dtype(ctx, i, 0);
    if (st != MX_OK) return st;
    s = merge_shape(&s, &ctx->in[i].shape);
  }
  out_seq(ctx, ctx->in[0].dtype, s);
  return MX_OK;
}

static mx_status empty_infer(mx_infer_ctx *ctx) {
  const mx_seq_params *p = ctx->params;
  mx_dtype dt = p->has_type ? MX_TYPE_CODE_DTYPE(p->type_code) : MX_FLOAT32;
  if (!mx_dtype_size(dt))
    return mx__infer_fail(ctx, MX_ERR_UNSUPPORTED, "attribute 'dtype' %d is not a supported element type",
                          (int)dt);
  out_seq(ctx, dt, (mx_shape){.rank = MX_RANK_UNKNOWN});
  return MX_OK;
}

static mx_status insert_infer(mx_infer_ctx *ctx) {
  mx_status st = need_kind(ctx, 0, true);
  if (st == MX_OK) st = need_kind(ctx, 1, false);
  if (st == MX_OK) st = need_int_position(ctx, 2);
  if (st != MX_OK) return st;
  if (ctx->in[1].dtype != ctx->in[0].dtype)
    return mx__infer_fail(ctx, MX_ERR_DTYPE, "tensor of type %s inserted into a sequence of %s",
                          mx_dtype_name(ctx->in[1].dtype), mx_dtype_name(ctx->in[0].dtype));
  out_seq(ctx, ctx->in[0].dtype, merge_shape(&ctx->in[0].shape, &ctx->in[1].shape));
  return MX_OK;
}

static mx_status at_infer(mx_infer_ctx *ctx) {
  mx_status st = need_kind(ctx, 0, true);
  if (st == MX_OK) st = need_int_position(ctx, 1);
  if (st != MX_OK) return st;
  ctx->out[0].dtype = ctx->in[0].dtype;
  ctx->out[0].shape = ctx->in[0].shape;
  return MX_OK;
}

static mx_status erase_infer(mx_infer_ctx *ctx) {
  mx_status st = need_kind(ctx, 0, true);
  if (st == MX_OK) st = need_int_position(ctx, 1);
  if (st != MX_OK) return st;
  out_seq(ctx, ctx->in[0].dtype, ctx->in[0].shape);
  return MX_OK;
}

static mx_status length_infer(mx_infer_ctx *ctx) {
  mx_status st = need_kind(ctx, 0, true);
  if (st != MX_OK) return st;
  ctx->out[0].dtype = MX_INT64;
  ctx->out[0].shape.rank = 0;
  return MX_OK;
}

static mx_status split_infer(mx_infer_ctx *ctx) {
  const mx_seq_params *p = ctx->params;
  mx_status st = need_kind(ctx, 0, false);
  if (st != MX_OK) return st;
  const mx_shape *in = &ctx->in[0].shape;
  mx_shape s = {.rank = MX_RANK_UNKNOWN};
  if (in->rank >= 0) {
    int32_t axis;
    if (!mx__norm_axis(p->axis, in->rank, &axis))
      return mx__infer_fail(ctx, MX_ERR_INVALID_GRAPH, "attribute 'axis' %lld is out of range for rank %d",
                            (long long)p->axis, (int)in->rank);
    bool scalar_split = false;
    if (mx__in_present(ctx, 1)) {
      if (ctx->in[1].dtype != MX_INT64 && ctx->in[1].dtype != MX_INT32)
        return mx__infer_fail(ctx, MX_ERR_DTYPE, "input 'split' must be int32 or int64");
      scalar_split = ctx->in[1].shape.rank == 0;
    }
    s = *in;
    if (!mx__in_present(ctx, 1) && !p->keepdims) {
      for (int32_t k = axis; k + 1 < s.rank; k++) s.dims[k] = s.dims[k + 1];
      s.rank--;
    } else if (mx__in_present(ctx, 1)) {
      /* Pieces may differ in length along the axis (the last one of a scalar split). */
      s.dims[axis] = MX_DIM_UNKNOWN;
      (void)scalar_split;
    } else {
      s.dims[axis] = 1;
    }
  }
  out_seq(ctx, ctx->in[0].dtype, s);
  return MX_OK;
}

static mx_status concat_infer(mx_infer_ctx *ctx) {
  const mx_seq_params *p = ctx->params;
  mx_status st = need_kind(ctx, 0, true);
  if (st != MX_OK) return st;
  const mx_shape *e = &ctx->in[0].shape;
  mx_value_info *o = &ctx->out[0];
  o->dtype = ctx->in[0].dtype;
  o->shape.rank = MX_RANK_UNKNOWN;
  if (e->rank < 0) return MX_OK;
  int32_t rank = e->rank + (p->new_axis ? 1 : 0), axis;
  if (!mx__norm_axis(p->axis, rank, &axis))
    return mx__infer_fail(ctx, MX_ERR_INVALID_GRAPH, "attribute 'axis' %lld is out of range for rank %d",
                          (long long)p->axis, (int)rank);
  o->shape.rank = rank;
  for (int32_t k = 0, j = 0; k < rank; k++) {
    if (k == axis) {
      o->shape.dims[k] = mx__infer_fresh(ctx, "concat");
      if (!p->new_axis) j++;
      continue;
    }
    o->shape.dims[k] = e->dims[j++];
  }
  return MX_OK;
}

static mx_status optional_infer(mx_infer_ctx *ctx) {
  const mx_seq_params *p = ctx->params;
  mx_value_info *o = &ctx->out[0];
  if (mx__in_present(ctx, 0)) {
    const mx_value_info *in = &ctx->in[0];
    if (in->kind != MX_KIND_TENSOR && in->kind != MX_KIND_SEQUENCE)
      return mx__infer_fail(ctx, MX_ERR_DTYPE, "input must be a tensor or a sequence");
    o->kind = in->kind == MX_KIND_SEQUENCE ? MX_KIND_OPTIONAL_SEQUENCE : MX_KIND_OPTIONAL;
    o->dtype = in->dtype;
    o->shape = in->shape;
    return MX_OK;
  }
  if (!p->has_type)
    return mx__infer_fail(ctx, MX_ERR_INVALID_GRAPH, "an Optional without input needs attribute 'type'");
  mx_value_kind k = MX_TYPE_CODE_KIND(p->type_code);
  if (k != MX_KIND_TENSOR && k != MX_KIND_SEQUENCE)
    return mx__infer_fail(ctx, MX_ERR_UNSUPPORTED, "attribute 'type' must be a tensor or a sequence type");
  o->kind = k == MX_KIND_SEQUENCE ? MX_KIND_OPTIONAL_SEQUENCE : MX_KIND_OPTIONAL;
  o->dtype = MX_TYPE_CODE_DTYPE(p->type_code);
  o->shape.rank = MX_RANK_UNKNOWN;
  return MX_OK;
}

static mx_status has_element_infer(mx_infer_ctx *ctx) {
  ctx->out[0].dtype = MX_BOOL;
  ctx->out[0].shape.rank = 0;
  return MX_OK;
}

static mx_status get_element_infer(mx_infer_ctx *ctx) {
  const mx_value_info *in = &ctx->in[0];
  mx_value_info *o = &ctx->out[0];
  o->dtype = in->dtype;
  o->shape = in->shape;
  o->kind = in->kind == MX_KIND_OPTIONAL_SEQUENCE || in->kind == MX_KIND_SEQUENCE ? MX_KIND_SEQUENCE
                                                                                  : MX_KIND_TENSOR;
  if (in->kind == MX_KIND_TENSOR || in->kind == MX_KIND_SEQUENCE) {
    if (ctx->opset < 18)
      return mx__infer_fail(ctx, MX_ERR_DTYPE, "input must be an optional (a plain value needs opset 18)");
  }
  return MX_OK;
}

/* --- parse ------------------------------------------------------------------------------------ */

static mx_status seq_parse(const mx_parse_ctx *pc, void *params) {
  mx_seq_params *p = params;
  memset(p, 0, sizeof *p);
  const mx_attr *a;
  if ((a = mx__parse_attr(pc, "axis"))) p->axis = a->i;
  p->keepdims = 1;
  if ((a = mx__parse_attr(pc, "keepdims"))) p->keepdims = a->i;
  if ((a = mx__parse_attr(pc, "new_axis"))) p->new_axis = a->i;
  if (p->new_axis != 0 && p->new_axis != 1)
    return mx__parse_fail(pc, "attribute 'new_axis' must be 0 or 1, not %lld", (long long)p->new_axis);
  if ((a = mx__parse_attr(pc, "type"))) {
    p->type_code = a->i;
    p->has_type = 1;
  }
  if ((a = mx__parse_attr(pc, "dtype"))) {
    if (!mx_dtype_is_supported((int)a->i))
      return mx__parse_fail(pc, "attribute 'dtype' %lld is not a supported element type", (long long)a->i);
    p->type_code = MX_TYPE_CODE(MX_KIND_TENSOR, a->i);
    p->has_type = 1;
  }
  return MX_OK;
}

static const mx_attr_spec no_attrs[] = {{0}};
static const mx_attr_spec empty_attrs[] = {{.name = "dtype", .type = MX_ATTR_INT}, {0}};
static const mx_attr_spec split_attrs[] = {
    {.name = "axis", .type = MX_ATTR_INT}, {.name = "keepdims", .type = MX_ATTR_INT, .def_i = 1}, {0}};
static const mx_attr_spec concat_attrs[] = {
    {.name = "axis", .type = MX_ATTR_INT, .required = true}, {.name = "new_axis", .type = MX_ATTR_INT}, {0}};
static const mx_attr_spec optional_attrs[] = {{.name = "type", .type = MX_ATTR_TYPE_PROTO}, {0}};

#define SEQ_OP(sym, nm, mi, ma, at, inf)                       \
  const mx_op_def sym = {.name = nm,                           \
                         .min_inputs = mi,                     \
                         .max_inputs = ma,                     \
                         .min_outputs = 1,                     \
                         .max_outputs = 1,                     \
                         .flags = MX_OP_ANY_KIND,              \
                         .attrs = at,                          \
                         .params_size = sizeof(mx_seq_params), \
                         .parse = seq_parse,                   \
                         .infer = inf}

SEQ_OP(mx__op_sequence_construct, "SequenceConstruct", 1, MX_VARIADIC, no_attrs, construct_infer);
SEQ_OP(mx__op_sequence_empty, "SequenceEmpty", 0, 0, empty_attrs, empty_infer);
SEQ_OP(mx__op_sequence_insert, "SequenceInsert", 2, 3, no_attrs, insert_infer);
SEQ_OP(mx__op_sequence_at, "SequenceAt", 2, 2, no_attrs, at_infer);
SEQ_OP(mx__op_sequence_erase, "SequenceErase", 1, 2, no_attrs, erase_infer);
SEQ_OP(mx__op_sequence_length, "SequenceLength", 1, 1, no_attrs, length_infer);
SEQ_OP(mx__op_split_to_sequence, "SplitToSequence", 1, 2, split_attrs, split_infer);
SEQ_OP(mx__op_concat_from_sequence, "ConcatFromSequence", 1, 1, concat_attrs, concat_infer);
SEQ_OP(mx__op_optional, "Optional", 0, 1, optional_attrs, optional_infer);
SEQ_OP(mx__op_optional_has_element, "OptionalHasElement", 0, 1, no_attrs, has_element_infer);
SEQ_OP(mx__op_optional_get_element, "OptionalGetElement", 1, 1, no_attrs, get_element_infer);
