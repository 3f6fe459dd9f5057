/* Op definitions of the activations and the remaining math group: the pointwise activations
 * (Elu, Selu, Celu, LeakyRelu, HardSigmoid, HardSwish, ThresholdedRelu, Softplus, Softsign,
 * Shrink, Mish, Swish), the trigonometric and hyperbolic functions (Tan, Asin, Acos, Atan, Sinh,
 * Cosh, Asinh, Acosh, Atanh), Round, IsNaN, IsInf, BitwiseNot, the broadcasting PRelu,
 * BitwiseAnd/Or/Xor and BitShift, and the ops with an axis or a matrix: Hardmax, CumProd and
 * Det.
 *
 * Pointwise ops keep the input's shape (output dtype: the input's, bool for IsNaN/IsInf);
 * binary ones broadcast like numpy, PRelu only its slope towards X. Dtype sets are the union
 * over the opsets mixrt accepts. */
#include <math.h>
#include <string.h>

#include "graph/ops/activation_params.h"
#include "graph/ops/elementwise_impl.h"
#include "graph/ops/groups.h"
#include "graph/ops/reduce_params.h"

#define FLT      MX__EW_FLOATS
#define UINTS    (MX__EW_DT(MX_UINT8) | MX__EW_DT(MX_UINT16) | MX__EW_DT(MX_UINT32) | MX__EW_DT(MX_UINT64))
#define ALL_INTS (MX__EW_SINTS | UINTS)
/* The 8-bit floats IsNaN and IsInf take from opset 20. */
#define FLOAT8                                                                            \
  (MX__EW_DT(MX_FLOAT8E4M3FN) | MX__EW_DT(MX_FLOAT8E4M3FNUZ) | MX__EW_DT(MX_FLOAT8E5M2) | \
   MX__EW_DT(MX_FLOAT8E5M2FNUZ))
#define END_ATTRS \
  { NULL, MX_ATTR_UNDEFINED, false, 0, 0.0f, NULL }
#define FLOAT_ATTR(NAME, DEF) \
  { NAME, MX_ATTR_FLOAT, false, 0, DEF, NULL }
/* Opset 1 versions carried a 'consumed_inputs' hint without effect. */
#define CONSUMED_ATTR \
  { "consumed_inputs", MX_ATTR_INTS, false, 0, 0.0f, NULL }

/* --- pointwise ---------------------------------------------------------------------------- */

static const mx_attr_spec elu_attrs[] = {FLOAT_ATTR("alpha", 1.0f), CONSUMED_ATTR, END_ATTRS};
static const mx_attr_spec celu_attrs[] = {FLOAT_ATTR("alpha", 1.0f), END_ATTRS};
static const mx_attr_spec leaky_attrs[] = {FLOAT_ATTR("alpha", 0.01f), CONSUMED_ATTR, END_ATTRS};
static const mx_attr_spec thresholded_attrs[] = {FLOAT_ATTR("alpha", 1.0f), END_ATTRS};
static const mx_attr_spec swish_attrs[] = {FLOAT_ATTR("alpha", 1.0f), END_ATTRS};
static const mx_attr_spec selu_attrs[] = {FLOAT_ATTR("alpha", 1.67326319217681884765625f),
                                          FLOAT_ATTR("gamma", 1.05070102214813232421875f), CONSUMED_ATTR,
                                          END_ATTRS};
static const mx_attr_spec hardsigmoid_attrs[] = {FLOAT_ATTR("alpha", 0.2f), FLOAT_ATTR("beta", 0.5f),
                                                 CONSUMED_ATTR, END_ATTRS};
static const mx_attr_spec shrink_attrs[] = {FLOAT_ATTR("lambd", 0.5f), FLOAT_ATTR("bias", 0.0f), END_ATTRS};
static const mx_attr_spec isinf_attrs[] = {{"detect_positive", MX_ATTR_INT, false, 1, 0.0f, NULL},
                                           {"detect_negative", MX_ATTR_INT, false, 1, 0.0f, NULL},
                                           END_ATTRS};

/* A float attribute that must be finite: NaN or infinite constants make every output NaN. */
static mx_status parse_finite(const mx_parse_ctx *pc, const char *name, float *out) {
  *out = mx__parse_float(pc, name);
  if (!isfinite(*out)) return mx__parse_fail(pc, "attribute '%s' must be a finite number", name);
  return MX_OK;
}

static mx_status parse_alpha(const mx_parse_ctx *pc, void *params) {
  mx_activation_params *p = params;
  memset(p, 0, sizeof *p);
  return parse_finite(pc, "alpha", &p->alpha);
}

static mx_status parse_celu(const mx_parse_ctx *pc, void *params) {
  mx_activation_params *p = params;
  mx_status st = parse_alpha(pc, params);
  if (st == MX_OK && p->alpha == 0.0f)
    return mx__parse_fail(pc, "attribute 'alpha' must not be 0 (Celu divides by it)");
  return st;
}

static mx_status parse_selu(const mx_parse_ctx *pc, void *params) {
  mx_activation_params *p = params;
  memset(p, 0, sizeof *p);
  mx_status st = parse_finite(pc, "alpha", &p->alpha);
  return st == MX_OK ? parse_finite(pc, "gamma", &p->gamma) : st;
}

static mx_status parse_hardsigmoid(const mx_parse_ctx *pc, void *params) {
  mx_activation_params *p = params;
  memset(p, 0, sizeof *p);
  mx_status st = parse_finite(pc, "alpha", &p->alpha);
  return st == MX_OK ? parse_finite(pc, "beta", &p->beta) : st;
}

static mx_status parse_shrink(const mx_parse_ctx *pc, void *params) {
  mx_activation_params *p = params;
  memset(p, 0, sizeof *p);
  mx_status st = parse_finite(pc, "lambd", &p->alpha);
  if (st == MX_OK) st = parse_finite(pc, "bias", &p->beta);
  if (st == MX_OK && p->alpha < 0.0f) return mx__parse_fail(pc, "attribute 'lambd' must not be negative");
  return st;
}

static mx_status parse_isinf(const mx_parse_ctx *pc, void *params) {
  mx_isinf_params *p = params;
  memset(p, 0, sizeof *p);
  p->detect_positive = mx__parse_int(pc, "detect_positive") != 0;
  p->detect_negative = mx__parse_int(pc, "detect_negative") != 0;
  return MX_OK;
}

static mx_status infer_pointwise(mx_infer_ctx *ctx, uint32_t types, bool out_bool) {
  mx_status st = mx__ew_check_dtype(ctx, 0, types);
  if (st != MX_OK) return st;
  ctx->out[0].dtype = out_bool ? MX_BOOL : ctx->in[0].dtype;
  ctx->out[0].shape = ctx->in[0].shape;
  return MX_OK;
}

/* One pointwise op: NAME, schema (or NULL), params size and parse (or 0, NULL), dtypes, bool out. */
#define POINTWISE(NAME, ATTRS, PSIZE, PARSE, TYPES, OUT_BOOL)                                        \
  static mx_status infer_##NAME(mx_infer_ctx *ctx) { return infer_pointwise(ctx, TYPES, OUT_BOOL); } \
  static const mx_op_def def_##NAME = {.name = #NAME,                                                \
                                       .domain = "",                                                 \
                                       .min_inputs = 1,                                              \
                                       .max_inputs = 1,                                              \
                                       .min_outputs = 1,                                             \
                                       .max_outputs = 1,                                             \
                                       .flags = MX_OP_ELEMENTWISE,                                   \
                                       .attrs = ATTRS,                                               \
                                       .params_size = PSIZE,                                         \
                                       .parse = PARSE,                                               \
                                       .infer = infer_##NAME};
#define ACT_PARAMS         sizeof(mx_activation_params)
#define PLAIN(NAME, TYPES) POINTWISE(NAME, NULL, 0, NULL, TYPES, false)

POINTWISE(Elu, elu_attrs, ACT_PARAMS, parse_alpha, FLT, false)
POINTWISE(Selu, selu_attrs, ACT_PARAMS, parse_selu, FLT, false)
POINTWISE(Celu, celu_attrs, ACT_PARAMS, parse_celu, FLT, false)
POINTWISE(LeakyRelu, leaky_attrs, ACT_PARAMS, parse_alpha, FLT, false)
POINTWISE(HardSigmoid, hardsigmoid_attrs, ACT_PARAMS, parse_hardsigmoid, FLT, false)
POINTWISE(ThresholdedRelu, thresholded_attrs, ACT_PARAMS, parse_alpha, FLT, false)
POINTWISE(Shrink, shrink_attrs, ACT_PARAMS, parse_shrink, FLT | ALL_INTS, false)
POINTWISE(Swish, swish_attrs, ACT_PARAMS, parse_alpha, FLT, false)
POINTWISE(IsInf, isinf_attrs, sizeof(mx_isinf_params), parse_isinf, FLT | FLOAT8, true)
POINTWISE(IsNaN, NULL, 0, NULL, FLT | FLOAT8, true)
PLAIN(HardSwish, FLT)
PLAIN(Softplus, FLT)
PLAIN(Softsign, FLT)
PLAIN(Mish, FLT)
PLAIN(Tan, FLT)
PLAIN(Asin, FLT)
PLAIN(Acos, FLT)
PLAIN(Atan, FLT)
PLAIN(Sinh, FLT)
PLAIN(Cosh, FLT)
PLAIN(Asinh, FLT)
PLAIN(Acosh, FLT)
PLAIN(Atanh, FLT)
PLAIN(Round, FLT)
PLAIN(BitwiseNot, ALL_INTS)

/* --- binary ------------------------------------------------------------------------------- */

static const mx_attr_spec prelu_attrs[] = {CONSUMED_ATTR, END_ATTRS};
static const mx_attr_spec bitshift_attrs[] = {{"direction", MX_ATTR_STRING, true, 0, 0.0f, NULL}, END_ATTRS};

static mx_status parse_bitshift(const mx_parse_ctx *pc, void *params) {
  mx_bitshift_params *p = params;
  memset(p, 0, sizeof *p);
  char dir[16];
  mx_status st = mx__parse_string(pc, "direction", dir, sizeof dir);
  if (st != MX_OK) return mx__parse_fail(pc, "attribute 'direction' must be LEFT or RIGHT");
  if (strcmp(dir, "LEFT") == 0)
    p->left = 1;
  else if (strcmp(dir, "RIGHT") != 0)
    return mx__parse_fail(pc, "attribute 'direction' must be LEFT or RIGHT, not '%s'", dir);
  return MX_OK;
}

static mx_status infer_broadcasting(mx_infer_ctx *ctx, uint32_t types) {
  mx_status st = mx__ew_check_dtype(ctx, 0, types);
  if (st == MX_OK) st = mx__ew_check_same(ctx, 1, 0);
  if (st == MX_OK) st = mx__broadcast_shapes(ctx, &ctx->in[0].shape, &ctx->in[1].shape, &ctx->out[0].shape);
  if (st != MX_OK) return st;
  ctx->out[0].dtype = ctx->in[0].dtype;
  return MX_OK;
}

/* PRelu: the slope broadcasts towards X (unidirectionally); Y has X's shape. */
static mx_status infer_PRelu(mx_infer_ctx *ctx) {
  mx_status st = mx__ew_check_dtype(
      ctx, 0, FLT | MX__EW_DT(MX_INT32) | MX__EW_DT(MX_INT64) | MX__EW_DT(MX_UINT32) | MX__EW_DT(MX_UINT64));
  if (st == MX_OK) st = mx__ew_check_same(ctx, 1, 0);
  if (st != MX_OK) return st;
  const mx_shape *x = &ctx->in[0].shape, *s = &ctx->in[1].shape;
  if (x->rank >= 0 && s->rank >= 0) {
    if (s->rank > x->rank)
      return mx__infer_fail(ctx, MX_ERR_SHAPE, "slope (rank %d) has more dims than X (rank %d)", (int)s->rank,
                            (int)x->rank);
    int32_t off = x->rank - s->rank;
    for (int32_t k = 0; k < s->rank; k++) {
      if (s->dims[k] == 1) continue;
      st = mx__check_same_dim(ctx, x->dims[k + off], s->dims[k], "a dim of X and the slope's dim it meets");
      if (st != MX_OK) return st;
    }
  }
  ctx->out[0].dtype = ctx->in[0].dtype;
  ctx->out[0].shape = *x;
  return MX_OK;
}

#define BROADCASTING(NAME, ATTRS, PSIZE, PARSE, TYPES)                                        \
  static mx_status infer_##NAME(mx_infer_ctx *ctx) { return infer_broadcasting(ctx, TYPES); } \
  static const mx_op_def def_##NAME = {.name = #NAME,                                         \
                                       .domain = "",                                          \
                                       .min_inputs = 2,                                       \
                                       .max_inputs = 2,                                       \
                                       .min_outputs = 1,                                      \
                                       .max_outputs = 1,                                      \
                                       .flags = MX_OP_ELEMENTWISE,                            \
                                       .attrs = ATTRS,                                        \
                                       .params_size = PSIZE,                                  \
                                       .parse = PARSE,                                        \
                                       .infer = infer_##NAME};

BROADCASTING(BitwiseAnd, NULL, 0, NULL, ALL_INTS)
BROADCASTING(BitwiseOr, NULL, 0, NULL, ALL_INTS)
BROADCASTING(BitwiseXor, NULL, 0, NULL, ALL_INTS)
BROADCASTING(BitShift, bitshift_attrs, sizeof(mx_bitshift_params), parse_bitshift, UINTS)

static const mx_op_def def_PRelu = {
    .name = "PRelu",
    .domain = "",
    .min_inputs = 2,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .flags = MX_OP_ELEMENTWISE,
    .attrs = prelu_attrs,
    .infer = infer_PRelu,
};

/* --- Hardmax ------------------------------------------------------------------------------ */

static const mx_attr_spec hardmax_attrs[] = {{"axis", MX_ATTR_INT, false, -1, 0.0f, NULL}, END_ATTRS};

static mx_status parse_hardmax(const mx_parse_ctx *pc, void *params) {
  mx_hardmax_params *p = params;
  memset(p, 0, sizeof *p);
  p->coerce_2d = pc->opset < 13;
  /* The default axis was 1 before opset 13. */
  int64_t axis = mx__parse_attr(pc, "axis") ? mx__parse_int(pc, "axis") : p->coerce_2d ? 1 : -1;
  if (axis < -MX_MAX_RANK || axis >= MX_MAX_RANK)
    return mx__parse_fail(pc, "attribute 'axis' = %lld is out of range", (long long)axis);
  p->axis = (int32_t)axis;
  return MX_OK;
}

static mx_status infer_hardmax(mx_infer_ctx *ctx) {
  const mx_hardmax_params *p = ctx->params;
  mx_status st = mx__ew_check_dtype(ctx, 0, FLT);
  if (st != MX_OK) return st;
  const mx_shape *s = &ctx->in[0].shape;
  int32_t axis;
  /* Before opset 13 the axis may also equal the rank (the 2-D view's second factor is 1). */
  bool ok = p->coerce_2d ? p->axis >= -s->rank && p->axis <= s->rank : mx__norm_axis(p->axis, s->rank, &axis);
  if (s->rank >= 0 && !ok)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "axis %d is out of range for rank %d", (int)p->axis,
                          (int)s->rank);
  ctx->out[0].dtype = ctx->in[0].dtype;
  ctx->out[0].shape = *s;
  return MX_OK;
}

static const mx_op_def def_Hardmax = {
    .name = "Hardmax",
    .domain = "",
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = hardmax_attrs,
    .params_size = sizeof(mx_hardmax_params),
    .parse = parse_hardmax,
    .infer = infer_hardmax,
};

/* --- CumProd ------------------------------------------------------------------------------ */

static const mx_attr_spec cumprod_attrs[] = {{"exclusive", MX_ATTR_INT, false, 0, 0.0f, NULL},
                                             {"reverse", MX_ATTR_INT, false, 0, 0.0f, NULL},
                                             END_ATTRS};

static mx_status parse_cumprod(const mx_parse_ctx *pc, void *params) {
  mx_cumprod_params *p = params;
  memset(p, 0, sizeof *p);
  p->exclusive = mx__parse_int(pc, "exclusive") != 0;
  p->reverse = mx__parse_int(pc, "reverse") != 0;
  return MX_OK;
}

static mx_status infer_cumprod(mx_infer_ctx *ctx) {
  mx_status st = mx__ew_check_dtype(
      ctx, 0, FLT | MX__EW_DT(MX_INT32) | MX__EW_DT(MX_INT64) | MX__EW_DT(MX_UINT32) | MX__EW_DT(MX_UINT64));
  if (st == MX_OK) st = mx__ew_check_dtype(ctx, 1, MX__EW_DT(MX_INT32) | MX__EW_DT(MX_INT64));
  if (st != MX_OK) return st;
  const mx_shape *as = &ctx->in[1].shape;
  int64_t n = mx__sv_numel(as);
  if (as->rank > 1 || (n >= 0 && n != 1))
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "the axis input must be a scalar");
  const mx_shape *s = &ctx->in[0].shape;
  int64_t axis;
  int32_t cnt, norm;
  if (s->rank >= 0 && mx__in_const_ints(ctx, 1, &axis, 1, &cnt) && cnt == 1 &&
      !mx__norm_axis(axis, s->rank, &norm))
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "axis %lld is out of range for rank %d", (long long)axis,
                          (int)s->rank);
  ctx->out[0].dtype = ctx->in[0].dtype;
  ctx->out[0].shape = *s;
  return MX_OK;
}

static const mx_op_def def_CumProd = {
    .name = "CumProd",
    .domain = "",
    .min_inputs = 2,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = cumprod_attrs,
    .params_size = sizeof(mx_cumprod_params),
    .parse = parse_cumprod,
    .infer = infer_cumprod,
};

/* --- Det ---------------------------------------------------------------------------------- */

/* [*, M, M] -> [*]. */
static mx_status infer_det(mx_infer_ctx *ctx) {
  mx_status st = mx__ew_check_dtype(ctx, 0, FLT);
  if (st != MX_OK) return st;
  const mx_shape *s = &ctx->in[0].shape;
  ctx->out[0].dtype = ctx->in[0].dtype;
  if (s->rank < 0) {
    ctx->out[0].shape.rank = MX_RANK_UNKNOWN;
    return MX_OK;
  }
  if (s->rank < 2)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "the input must have rank 2 or more, not %d", (int)s->rank);
  st = mx__check_same_dim(ctx, s->dims[s->rank - 2], s->dims[s->rank - 1], "the matrix rows and columns");
  if (st != MX_OK) return st;
  ctx->out[0].shape.rank = s->rank - 2;
  for (int32_t k = 0; k < s->rank - 2; k++) ctx->out[0].shape.dims[k] = s->dims[k];
  return MX_OK;
}

static const mx_op_def def_Det = {
    .name = "Det",
    .domain = "",
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .infer = infer_det,
};

const mx_op_def *const mx__ops_activation[] = {
    &def_Elu,        &def_Selu,
    &def_Celu,       &def_LeakyRelu,
    &def_PRelu,      &def_HardSigmoid,
    &def_HardSwish,  &def_ThresholdedRelu,
    &def_Softplus,   &def_Softsign,
    &def_Shrink,     &def_Mish,
    &def_Swish,      &def_Hardmax,
    &def_Tan,        &def_Asin,
    &def_Acos,       &def_Atan,
    &def_Sinh,       &def_Cosh,
    &def_Asinh,      &def_Acosh,
    &def_Atanh,      &def_Round,
    &def_IsNaN,      &def_IsInf,
    &def_BitShift,   &def_BitwiseAnd,
    &def_BitwiseOr,  &def_BitwiseXor,
    &def_BitwiseNot, &def_Det,
    &def_CumProd,    NULL,
};
