/* CPU kernels of the pointwise activations and math ops (Elu, Selu, Celu, LeakyRelu,
 * HardSigmoid, HardSwish, ThresholdedRelu, Softplus, Softsign, Shrink, Mish, Swish, Tan, Asin,
 * Acos, Atan, Sinh, Cosh, Asinh, Acosh, Atanh, Round, BitwiseNot, IsNaN, IsInf) and the
 * activation group's kernel list (the broadcasting ops live in activation_binary.c, the ones
 * with an axis or a matrix in activation_axis.c).
 *
 * Each op is a float32 and a float64 row (integer rows for Shrink and BitwiseNot) run by the
 * elementwise group's unary runner, which also takes float16/bfloat16 through the float32 row
 * in chunks and rounds once. The float32 rows of the exp-based activations use kmath.h's
 * branch-free exp / expm1 / sigmoid / tanh so their loops vectorize; NaN propagates wherever
 * the op's formula lets it (ThresholdedRelu's "x > alpha" is false for NaN and gives 0, as
 * ONNX's definition does). */
#include <math.h>

#include "graph/ops/activation_params.h"
#include "kernels/activation_impl.h"
#include "kernels/elementwise_impl.h"
#include "kernels/groups.h"
#include "kernels/kmath.h"

/* --- float rows --------------------------------------------------------------------------- */

/* NAME_f32 and NAME_f64: o[i] = EXPR of x = a[i], with the params' alpha, beta, gamma at hand
 * (0 when the op has none) in the row's type T. */
#define ACT_ROW(NAME, T, EXPR)                                             \
  static void NAME(int64_t n, const void *px, void *po, const void *ctx) { \
    const mx_activation_params *prm = ctx;                                 \
    const T alpha = prm ? (T)prm->alpha : (T)0;                            \
    const T beta = prm ? (T)prm->beta : (T)0;                              \
    const T gamma = prm ? (T)prm->gamma : (T)0;                            \
    (void)alpha, (void)beta, (void)gamma;                                  \
    const T *a = px;                                                       \
    T *o = po;                                                             \
    for (int64_t i = 0; i < n; i++) {                                      \
      const T x = a[i];                                                    \
      o[i] = (EXPR);                                                       \
    }                                                                      \
  }
#define ACT_ROWS(OP, F32_EXPR, F64_EXPR) \
  ACT_ROW(OP##_f32, float, F32_EXPR)     \
  ACT_ROW(OP##_f64, double, F64_EXPR)

/* exp(x) - 1 for x <= 0 (kmath's contract); positive x never reaches it. */
static inline float expm1_nonpos(float x) { return mx__kexpm1_neg(x > 0.0f ? 0.0f : x); }
/* log(1 + exp(x)) without overflow: max(x, 0) + log1p(exp(-|x|)). */
static inline float softplus_f(float x) { return (x > 0.0f ? x : 0.0f) + log1pf(mx__kexpf(-fabsf(x))); }
static inline double softplus_d(double x) { return (x > 0.0 ? x : 0.0) + log1p(exp(-fabs(x))); }
static inline double sigmoid_d(double x) {
  if (x >= 0.0) return 1.0 / (1.0 + exp(-x));
  double e = exp(x);
  return e / (1.0 + e);
}
/* max(0, min(1, v)) that lets NaN through. */
#define UNIT_CLAMP(v) ((v) > 1 ? 1 : (v) < 0 ? 0 : (v))

ACT_ROWS(elu, x > 0.0f ? x : alpha * expm1_nonpos(x), x > 0.0 ? x : alpha * expm1(x))
ACT_ROWS(selu, gamma *(x > 0.0f ? x : alpha * expm1_nonpos(x)), gamma *(x > 0.0 ? x : alpha * expm1(x)))
/* max(0, x) + min(0, alpha (exp(x / alpha) - 1)): for x > 0 the second term is 0 whatever
 * alpha's sign, for x <= 0 the first is 0 and the second is <= 0. */
ACT_ROWS(celu, x > 0.0f ? x : alpha * expm1f(x / alpha), x > 0.0 ? x : alpha * expm1(x / alpha))
ACT_ROWS(leaky, x < 0.0f ? alpha * x : x, x < 0.0 ? alpha * x : x)
ACT_ROWS(hardsigmoid, UNIT_CLAMP(alpha *x + beta), UNIT_CLAMP(alpha *x + beta))
/* HardSwish: HardSigmoid's formula with alpha = 1/6 and beta = 0.5 fixed. */
ACT_ROWS(hardswish, x *UNIT_CLAMP(x *(1.0f / 6.0f) + 0.5f), x *UNIT_CLAMP(x *(1.0 / 6.0) + 0.5))
ACT_ROWS(thresholded, x > alpha ? x : 0.0f, x > alpha ? x : 0.0)
ACT_ROWS(softplus, softplus_f(x), softplus_d(x))
ACT_ROWS(softsign, x / (1.0f + fabsf(x)), x / (1.0 + fabs(x)))
ACT_ROWS(mish, x *mx__ktanhf(softplus_f(x)), x *tanh(softplus_d(x)))
ACT_ROWS(swish, x *mx__ksigmoidf(alpha *x), x *sigmoid_d(alpha *x))
/* Shrink: alpha is lambd, beta the bias. */
ACT_ROWS(shrink, x<-alpha ? x + beta : x> alpha ? x - beta : 0.0f,
         x<-alpha ? x + beta : x> alpha ? x - beta : 0.0)
ACT_ROWS(tan, tanf(x), tan(x))
ACT_ROWS(asin, asinf(x), asin(x))
ACT_ROWS(acos, acosf(x), acos(x))
ACT_ROWS(atan, atanf(x), atan(x))
ACT_ROWS(sinh, sinhf(x), sinh(x))
ACT_ROWS(cosh, coshf(x), cosh(x))
ACT_ROWS(asinh, asinhf(x), asinh(x))
ACT_ROWS(acosh, acoshf(x), acosh(x))
ACT_ROWS(atanh, atanhf(x), atanh(x))
/* rint rounds halves to even in the default rounding mode, which mixrt never changes. */
ACT_ROWS(round, rintf(x), rint(x))

/* --- integer rows ------------------------------------------------------------------------- */

/* Shrink on integers: computed in double and truncated back (in range: |result| <= |x| + |bias|
 * only overflows for a bias as large as the type, which the cast then wraps like numpy). */
#define SHRINK_INT(NAME, T)                                                       \
  static void NAME(int64_t n, const void *px, void *po, const void *ctx) {        \
    const mx_activation_params *prm = ctx;                                        \
    const double lambd = prm->alpha, bias = prm->beta;                            \
    const T *a = px;                                                              \
    T *o = po;                                                                    \
    for (int64_t i = 0; i < n; i++) {                                             \
      double x = (double)a[i];                                                    \
      double y = x < -lambd ? x + bias : x > lambd ? x - bias : 0.0;              \
      o[i] = (T)mx__ew_sat_i64(y, -9223372036854775808.0, 9223372036854775807.0); \
    }                                                                             \
  }
SHRINK_INT(shrink_i8, int8_t)
SHRINK_INT(shrink_u8, uint8_t)
SHRINK_INT(shrink_i16, int16_t)
SHRINK_INT(shrink_u16, uint16_t)
SHRINK_INT(shrink_i32, int32_t)
SHRINK_INT(shrink_u32, uint32_t)
SHRINK_INT(shrink_i64, int64_t)
SHRINK_INT(shrink_u64, uint64_t)

/* BitwiseNot by element width (signed and unsigned alike). */
#define NOT_ROW(NAME, T)                                                   \
  static void NAME(int64_t n, const void *px, void *po, const void *ctx) { \
    (void)ctx;                                                             \
    const T *a = px;                                                       \
    T *o = po;                                                             \
    for (int64_t i = 0; i < n; i++) o[i] = (T)~a[i];                       \
  }
NOT_ROW(not_8, uint8_t)
NOT_ROW(not_16, uint16_t)
NOT_ROW(not_32, uint32_t)
NOT_ROW(not_64, uint64_t)

/* --- kernels ------------------------------------------------------------------------------ */

typedef mx__ew_un_fn un_table[MX__EW_UN_TABLE_SIZE];
#define FLT(OP) [MX_FLOAT32] = OP##_f32, [MX_FLOAT64] = OP##_f64

/* One kernel over a float table; ctx is the node's params (NULL for ops without any). */
#define FLOAT_KERNEL(NAME, OP, CTX)                \
  static mx_status run_##NAME(mx_kernel_call *c) { \
    static const un_table t = {FLT(OP)};           \
    return mx__ew_unary_apply(c, t, CTX);          \
  }                                                \
  static const mx_kernel_def kdef_##NAME = {#NAME, NULL, MX_KDT_FLOATS, 0, run_##NAME, NULL};

/* A call built by hand without params reads zeros instead of crashing. */
static const mx_activation_params no_params = {0.0f, 0.0f, 0.0f, 0};
#define PRM (c->params ? c->params : (const void *)&no_params)

FLOAT_KERNEL(Elu, elu, PRM)
FLOAT_KERNEL(Selu, selu, PRM)
FLOAT_KERNEL(Celu, celu, PRM)
FLOAT_KERNEL(LeakyRelu, leaky, PRM)
FLOAT_KERNEL(HardSigmoid, hardsigmoid, PRM)
FLOAT_KERNEL(HardSwish, hardswish, NULL)
FLOAT_KERNEL(ThresholdedRelu, thresholded, PRM)
FLOAT_KERNEL(Softplus, softplus, NULL)
FLOAT_KERNEL(Softsign, softsign, NULL)
FLOAT_KERNEL(Mish, mish, NULL)
FLOAT_KERNEL(Swish, swish, PRM)
FLOAT_KERNEL(Tan, tan, NULL)
FLOAT_KERNEL(Asin, asin, NULL)
FLOAT_KERNEL(Acos, acos, NULL)
FLOAT_KERNEL(Atan, atan, NULL)
FLOAT_KERNEL(Sinh, sinh, NULL)
FLOAT_KERNEL(Cosh, cosh, NULL)
FLOAT_KERNEL(Asinh, asinh, NULL)
FLOAT_KERNEL(Acosh, acosh, NULL)
FLOAT_KERNEL(Atanh, atanh, NULL)
FLOAT_KERNEL(Round, round, NULL)

static mx_status run_Shrink(mx_kernel_call *c) {
  static const un_table t = {FLT(shrink),
                             [MX_INT8] = shrink_i8,
                             [MX_UINT8] = shrink_u8,
                             [MX_INT16] = shrink_i16,
                             [MX_UINT16] = shrink_u16,
                             [MX_INT32] = shrink_i32,
                             [MX_UINT32] = shrink_u32,
                             [MX_INT64] = shrink_i64,
                             [MX_UINT64] = shrink_u64};
  return mx__ew_unary_apply(c, t, PRM);
}
static const mx_kernel_def kdef_Shrink = {"Shrink", NULL, MX_KDT_FLOATS | MX_KDT_INTS, 0, run_Shrink, NULL};

static mx_status run_BitwiseNot(mx_kernel_call *c) {
  static const un_table t = {
      [MX_INT8] = not_8,   [MX_UINT8] = not_8,   [MX_INT16] = not_16, [MX_UINT16] = not_16,
      [MX_INT32] = not_32, [MX_UINT32] = not_32, [MX_INT64] = not_64, [MX_UINT64] = not_64};
  return mx__ew_unary_apply(c, t, NULL);
}
static const mx_kernel_def kdef_BitwiseNot = {"BitwiseNot", NULL, MX_KDT_INTS, 0, run_BitwiseNot, NULL};

/* The float types IsNaN and IsInf take: the 8-bit floats from opset 20 (read through kutil.h). */
#define CLASSIFY_KDT                                                                             \
  (MX_KDT_FLOATS | MX_KDT(MX_FLOAT8E4M3FN) | MX_KDT(MX_FLOAT8E4M3FNUZ) | MX_KDT(MX_FLOAT8E5M2) | \
   MX_KDT(MX_FLOAT8E5M2FNUZ))

/* IsNaN / IsInf: float in, bool out, so not through the same-dtype runner. detect[0] and
 * detect[1] say whether +inf and -inf count (IsInf); NULL detects NaN. */
static mx_status run_classify(mx_kernel_call *c, const int32_t *detect) {
  const mx_ktensor *x = mx__kin(c, 0);
  mx_ktensor *o = mx__kout(c, 0);
  int64_t n = mx__ktensor_numel(x);
  if (o->dtype != MX_BOOL || mx__ktensor_numel(o) != n) {
    c->why = "the output must be bool with as many elements as the input";
    return MX_ERR_KERNEL;
  }
  if (!(MX_KDT(x->dtype) & CLASSIFY_KDT)) {
    c->why = "dtype not supported by this kernel";
    return MX_ERR_UNSUPPORTED;
  }
  uint8_t *out = o->data;
  const bool pos = detect && detect[0], neg = detect && detect[1];
  if (x->dtype == MX_FLOAT32) {
    const float *a = x->data;
    for (int64_t i = 0; i < n; i++)
      out[i] = detect ? (uint8_t)((pos && a[i] == INFINITY) || (neg && a[i] == -INFINITY))
                      : (uint8_t)(a[i] != a[i]);
    return MX_OK;
  }
  for (int64_t i = 0; i < n; i++) {
    double v = mx__kget_f64(x->data, x->dtype, i); /* float64, or narrower floats widened exactly */
    out[i] = detect ? (uint8_t)((pos && v == INFINITY) || (neg && v == -INFINITY)) : (uint8_t)(v != v);
  }
  return MX_OK;
}

static mx_status run_IsNaN(mx_kernel_call *c) { return run_classify(c, NULL); }
static mx_status run_IsInf(mx_kernel_call *c) {
  const mx_isinf_params *p = c->params;
  static const int32_t both[2] = {1, 1};
  return run_classify(c, p ? &p->detect_positive : both);
}
static const mx_kernel_def kdef_IsNaN = {"IsNaN", NULL, CLASSIFY_KDT, 0, run_IsNaN, NULL};
static const mx_kernel_def kdef_IsInf = {"IsInf", NULL, CLASSIFY_KDT, 0, run_IsInf, NULL};

const mx_kernel_def *const mx__kernels_activation[] = {
    &kdef_Elu,           &kdef_Selu,
    &kdef_Celu,          &kdef_LeakyRelu,
    &mx__kdef_PRelu,     &kdef_HardSigmoid,
    &kdef_HardSwish,     &kdef_ThresholdedRelu,
    &kdef_Softplus,      &kdef_Softsign,
    &kdef_Shrink,        &kdef_Mish,
    &kdef_Swish,         &mx__kdef_Hardmax,
    &kdef_Tan,           &kdef_Asin,
    &kdef_Acos,          &kdef_Atan,
    &kdef_Sinh,          &kdef_Cosh,
    &kdef_Asinh,         &kdef_Acosh,
    &kdef_Atanh,         &kdef_Round,
    &kdef_IsNaN,         &kdef_IsInf,
    &mx__kdef_BitShift,  &mx__kdef_BitwiseAnd,
    &mx__kdef_BitwiseOr, &mx__kdef_BitwiseXor,
    &kdef_BitwiseNot,    &mx__kdef_Det,
    &mx__kdef_CumProd,   NULL,
};
