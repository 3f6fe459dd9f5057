/* Op definitions of the reduce group: the nine Reduce* ops, ArgMax/ArgMin and CumSum.
 *
 * Reduce* take their axes as an attribute up to opset 17 (ReduceSum: up to 12) and as the
 * optional input 1 from opset 18 (ReduceSum: 13), where noop_with_empty_axes decides whether
 * "no axes" means "every axis" or "copy the input". When the axes input's values are unknown
 * at compile time, inference still gives what it can: the rank (kept dims, or rank minus the
 * number of axes) with unknown dims where a dim may or may not be reduced. ReduceSum/Prod/Max/
 * Min carry symbolic values (the element count of a shape is ReduceProd of Shape). */
#include <string.h>

#include "graph/ops/elementwise_impl.h"
#include "graph/ops/groups.h"
#include "graph/ops/reduce_params.h"

/* --- Reduce* ------------------------------------------------------------------------------ */

typedef struct reduce_spec {
  uint32_t types;          /* accepted input dtypes */
  int64_t axes_input_from; /* first opset with the axes as input 1 */
  mx__sv_op sv;            /* how values combine (MX__SV_NONE: no values tracked) */
} reduce_spec;

static const mx_attr_spec reduce_attrs[] = {
    {"axes", MX_ATTR_INTS, false, 0, 0.0f, NULL},
    {"keepdims", MX_ATTR_INT, false, 1, 0.0f, NULL},
    {"noop_with_empty_axes", MX_ATTR_INT, false, 0, 0.0f, NULL},
    {NULL, MX_ATTR_UNDEFINED, false, 0, 0.0f, NULL},
};

static mx_status parse_reduce(const mx_parse_ctx *pc, void *params, const reduce_spec *s) {
  mx_reduce_params *p = params;
  memset(p, 0, sizeof *p);
  size_t n;
  mx_status st = mx__parse_ints(pc, "axes", p->axes, MX_MAX_RANK, &n);
  if (st != MX_OK) return st;
  p->n_axes = (int32_t)n;
  p->axes_from_input = pc->opset >= s->axes_input_from;
  p->keepdims = mx__parse_int(pc, "keepdims") != 0;
  p->noop_with_empty_axes = mx__parse_int(pc, "noop_with_empty_axes") != 0;
  if (p->axes_from_input && n > 0 && pc->n_inputs > 1)
    return mx__parse_fail(pc, "axes are given both as an attribute and as input 1");
  if (!p->axes_from_input && pc->n_inputs > 1)
    return mx__parse_fail(pc, "this opset takes the axes as an attribute, not as input 1");
  return MX_OK;
}

/* Values of the reduced elements' combination, for small concrete int tensors. */
static void reduce_sv(mx_infer_ctx *ctx, const reduce_spec *s, const bool *reduced) {
  const mx_value_info *in = &ctx->in[0];
  mx_value_info *out = &ctx->out[0];
  if (s->sv == MX__SV_NONE || !mx__sv_dtype(in->dtype) || in->dtype == MX_BOOL || !in->sv || in->sv_len < 0)
    return;
  int64_t n_in = mx__sv_numel(&in->shape), n_out = mx__sv_numel(&out->shape);
  if (n_in != in->sv_len || n_out < 0 || n_out > MX_SV_MAX || n_in == 0) return;
  mx_dim *sv = mx__infer_out_sv(ctx, 0);
  bool seen[MX_SV_MAX] = {false};
  for (int64_t i = 0; i < n_in; i++) {
    /* Output flat index of input element i: drop the reduced coordinates. */
    int64_t rem = i, o = 0, stride = 1;
    for (int32_t k = in->shape.rank - 1; k >= 0; k--) {
      int64_t pos = rem % in->shape.dims[k];
      rem /= in->shape.dims[k];
      if (reduced[k]) continue;
      o += pos * stride;
      stride *= in->shape.dims[k];
    }
    sv[o] = seen[o] ? mx__sv_binary(ctx->syms, s->sv, sv[o], in->sv[i]) : in->sv[i];
    seen[o] = true;
  }
  for (int64_t o = 0; o < n_out; o++) {
    if (!seen[o]) return; /* an empty reduction: leave the value unknown */
    sv[o] = mx__sv_fit(ctx->syms, sv[o], out->dtype);
  }
  out->sv = sv;
  out->sv_len = (int32_t)n_out;
}

static mx_status infer_reduce(mx_infer_ctx *ctx, const reduce_spec *s) {
  const mx_reduce_params *p = ctx->params;
  mx_status st = mx__ew_check_dtype(ctx, 0, s->types);
  if (st != MX_OK) return st;
  const mx_value_info *in = &ctx->in[0];
  mx_value_info *out = &ctx->out[0];
  out->dtype = in->dtype;
  int32_t rank = in->shape.rank;

  int64_t axes[MX_MAX_RANK];
  int32_t n_axes = 0;
  bool axes_known = true;
  if (p->axes_from_input && mx__in_present(ctx, 1)) {
    st = mx__ew_check_dtype(ctx, 1, MX__EW_DT(MX_INT64));
    if (st != MX_OK) return st;
    if (ctx->in[1].shape.rank > 1) return mx__infer_fail(ctx, MX_ERR_SHAPE, "the axes input must be 1-D");
    const mx_shape *as = &ctx->in[1].shape;
    if (as->rank == 1 && as->dims[0] == 0) {
      n_axes = 0; /* an empty axes tensor needs no values */
    } else if (!mx__in_const_ints(ctx, 1, axes, MX_MAX_RANK, &n_axes)) {
      axes_known = false;
      /* Too many known values (duplicates) is an error, not an unknown. */
      int32_t len;
      if (mx__in_values(ctx, 1, &len) && len > MX_MAX_RANK)
        return mx__infer_fail(ctx, MX_ERR_SHAPE, "%d axes given for at most %d dims", (int)len, MX_MAX_RANK);
    }
  } else if (!p->axes_from_input) {
    n_axes = p->n_axes;
    memcpy(axes, p->axes, sizeof axes);
  }

  if (!axes_known) {
    /* Which dims go is only known at run time. */
    out->shape.rank = MX_RANK_UNKNOWN;
    if (rank < 0) return MX_OK;
    if (p->keepdims) {
      out->shape.rank = rank;
      for (int32_t k = 0; k < rank; k++) out->shape.dims[k] = in->shape.dims[k] == 1 ? 1 : MX_DIM_UNKNOWN;
    } else {
      const mx_shape *as = &ctx->in[1].shape;
      if (as->rank == 1 && mx_dim_is_concrete(as->dims[0]) && as->dims[0] > 0 && as->dims[0] <= rank) {
        out->shape.rank = rank - (int32_t)as->dims[0];
        for (int32_t k = 0; k < out->shape.rank; k++) out->shape.dims[k] = MX_DIM_UNKNOWN;
      }
    }
    return MX_OK;
  }

  if (n_axes == 0 && p->noop_with_empty_axes) {
    out->shape = in->shape;
    if (in->sv && in->sv_len >= 0) {
      memcpy(mx__infer_out_sv(ctx, 0), in->sv, (size_t)in->sv_len * sizeof *in->sv);
      out->sv = mx__infer_out_sv(ctx, 0);
      out->sv_len = in->sv_len;
    }
    return MX_OK;
  }
  if (rank < 0) {
    /* Reducing everything without keepdims gives a scalar whatever the rank. */
    out->shape.rank = n_axes == 0 && !p->keepdims ? 0 : MX_RANK_UNKNOWN;
    return MX_OK;
  }
  bool reduced[MX_MAX_RANK] = {false};
  for (int32_t i = 0; i < n_axes; i++) {
    int32_t a;
    if (!mx__norm_axis(axes[i], rank, &a))
      return mx__infer_fail(ctx, MX_ERR_SHAPE, "axis %lld is out of range for rank %d", (long long)axes[i],
                            (int)rank);
    if (reduced[a]) return mx__infer_fail(ctx, MX_ERR_SHAPE, "axis %lld is given twice", (long long)axes[i]);
    reduced[a] = true;
  }
  if (n_axes == 0)
    for (int32_t k = 0; k < rank; k++) reduced[k] = true;
  out->shape.rank = 0;
  for (int32_t k = 0; k < rank; k++) {
    if (!reduced[k])
      out->shape.dims[out->shape.rank++] = in->shape.dims[k];
    else if (p->keepdims)
      out->shape.dims[out->shape.rank++] = 1;
  }
  reduce_sv(ctx, s, reduced);
  return MX_OK;
}

#define NUM MX__EW_NUMERIC

#define REDUCE_OP(NAME, FLAGS, TYPES, AXES_FROM, SV)                                           \
  static const reduce_spec spec_##NAME = {TYPES, AXES_FROM, SV};                               \
  static mx_status parse_##NAME(const mx_parse_ctx *pc, void *params) {                        \
    return parse_reduce(pc, params, &spec_##NAME);                                             \
  }                                                                                            \
  static mx_status infer_##NAME(mx_infer_ctx *ctx) { return infer_reduce(ctx, &spec_##NAME); } \
  static const mx_op_def def_##NAME = {.name = #NAME,                                          \
                                       .domain = "",                                           \
                                       .min_inputs = 1,                                        \
                                       .max_inputs = 2,                                        \
                                       .min_outputs = 1,                                       \
                                       .max_outputs = 1,                                       \
                                       .flags = (FLAGS),                                       \
                                       .value_inputs = 1u << 1,                                \
                                       .attrs = reduce_attrs,                                  \
                                       .params_size = sizeof(mx_reduce_params),                \
                                       .parse = parse_##NAME,                                  \
                                       .infer = infer_##NAME};

REDUCE_OP(ReduceSum, MX_OP_HOST_PREFERRED, NUM, 13, MX__SV_ADD)
REDUCE_OP(ReduceProd, MX_OP_HOST_PREFERRED, NUM, 18, MX__SV_MUL)
REDUCE_OP(ReduceMax, 0, NUM | MX__EW_BOOL, 18, MX__SV_MAX)
REDUCE_OP(ReduceMin, 0, NUM | MX__EW_BOOL, 18, MX__SV_MIN)
REDUCE_OP(ReduceMean, 0, NUM, 18, MX__SV_NONE)
REDUCE_OP(ReduceSumSquare, 0, NUM, 18, MX__SV_NONE)
REDUCE_OP(ReduceL1, 0, NUM, 18, MX__SV_NONE)
REDUCE_OP(ReduceL2, 0, NUM, 18, MX__SV_NONE)
REDUCE_OP(ReduceLogSumExp, 0, NUM, 18, MX__SV_NONE)
REDUCE_OP(ReduceLogSum, 0, NUM, 18, MX__SV_NONE)

/* --- ArgMax / ArgMin ---------------------------------------------------------------------- */

static const mx_attr_spec arg_attrs[] = {
    {"axis", MX_ATTR_INT, false, 0, 0.0f, NULL},
    {"keepdims", MX_ATTR_INT, false, 1, 0.0f, NULL},
    {"select_last_index", MX_ATTR_INT, false, 0, 0.0f, NULL}, /* opset 12 */
    {NULL, MX_ATTR_UNDEFINED, false, 0, 0.0f, NULL},
};

static mx_status parse_arg(const mx_parse_ctx *pc, void *params) {
  mx_argreduce_params *p = params;
  memset(p, 0, sizeof *p);
  int64_t axis = mx__parse_int(pc, "axis");
  if (axis < -MX_MAX_RANK || axis >= MX_MAX_RANK)
    return mx__parse_fail(pc, "attribute 'axis' = %lld is out of range", (long long)axis);
  p->axis = (int32_t)axis;
  p->keepdims = mx__parse_int(pc, "keepdims") != 0;
  p->select_last_index = mx__parse_int(pc, "select_last_index") != 0;
  return MX_OK;
}

static mx_status infer_arg(mx_infer_ctx *ctx) {
  const mx_argreduce_params *p = ctx->params;
  mx_status st = mx__ew_check_dtype(ctx, 0, NUM);
  if (st != MX_OK) return st;
  const mx_shape *s = &ctx->in[0].shape;
  mx_value_info *out = &ctx->out[0];
  out->dtype = MX_INT64;
  if (s->rank < 0) {
    out->shape.rank = MX_RANK_UNKNOWN;
    return MX_OK;
  }
  int32_t axis;
  if (!mx__norm_axis(p->axis, s->rank, &axis))
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "axis %d is out of range for rank %d", (int)p->axis,
                          (int)s->rank);
  if (mx_dim_is_concrete(s->dims[axis]) && s->dims[axis] == 0)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "axis %d has size 0: there is no element to pick", (int)p->axis);
  out->shape.rank = 0;
  for (int32_t k = 0; k < s->rank; k++) {
    if (k != axis)
      out->shape.dims[out->shape.rank++] = s->dims[k];
    else if (p->keepdims)
      out->shape.dims[out->shape.rank++] = 1;
  }
  return MX_OK;
}

static const mx_op_def def_ArgMax = {
    .name = "ArgMax",
    .domain = "",
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = arg_attrs,
    .params_size = sizeof(mx_argreduce_params),
    .parse = parse_arg,
    .infer = infer_arg,
};
static const mx_op_def def_ArgMin = {
    .name = "ArgMin",
    .domain = "",
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = arg_attrs,
    .params_size = sizeof(mx_argreduce_params),
    .parse = parse_arg,
    .infer = infer_arg,
};

/* --- CumSum ------------------------------------------------------------------------------- */

static const mx_attr_spec cumsum_attrs[] = {
    {"exclusive", MX_ATTR_INT, false, 0, 0.0f, NULL},
    {"reverse", MX_ATTR_INT, false, 0, 0.0f, NULL},
    {NULL, MX_ATTR_UNDEFINED, false, 0, 0.0f, NULL},
};

static mx_status parse_cumsum(const mx_parse_ctx *pc, void *params) {
  mx_cumsum_params *p = params;
  memset(p, 0, sizeof *p);
  p->exclusive = mx__parse_int(pc, "exclusive") != 0;
  p->reverse = mx__parse_int(pc, "reverse") != 0;
  return MX_OK;
}

static mx_status infer_cumsum(mx_infer_ctx *ctx) {
  mx_status st = mx__ew_check_dtype(ctx, 0, NUM);
  if (st == MX_OK) st = mx__ew_check_dtype(ctx, 1, MX__EW_DT(MX_INT32) | MX__EW_DT(MX_INT64));
  if (st != MX_OK) return st;
  const mx_shape *as = &ctx->in[1].shape;
  int64_t n = mx__sv_numel(as);
  if (as->rank > 1 || (n >= 0 && n != 1))
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "the axis input must be a scalar");
  int64_t axis;
  int32_t cnt, norm;
  const mx_shape *s = &ctx->in[0].shape;
  if (s->rank >= 0 && mx__in_const_ints(ctx, 1, &axis, 1, &cnt) && cnt == 1 &&
      !mx__norm_axis(axis, s->rank, &norm))
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "axis %lld is out of range for rank %d", (long long)axis,
                          (int)s->rank);
  ctx->out[0].dtype = ctx->in[0].dtype;
  ctx->out[0].shape = *s;
  return MX_OK;
}

static const mx_op_def def_CumSum = {
    .name = "CumSum",
    .domain = "",
    .min_inputs = 2,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = cumsum_attrs,
    .params_size = sizeof(mx_cumsum_params),
    .parse = parse_cumsum,
    .infer = infer_cumsum,
};

const mx_op_def *const mx__ops_reduce[] = {
    &def_ReduceSum,       &def_ReduceProd,
    &def_ReduceMax,       &def_ReduceMin,
    &def_ReduceMean,      &def_ReduceSumSquare,
    &def_ReduceL1,        &def_ReduceL2,
    &def_ReduceLogSumExp, &def_ReduceLogSum,
    &def_ArgMax,          &def_ArgMin,
    &def_CumSum,          NULL,
};
