/* CPU kernels of the unary elementwise ops (Abs, Neg, Exp, Log, Sqrt, Sin, Cos, Tanh, Sigmoid,
 * Relu, Erf, Floor, Ceil, Reciprocal, Sign, Not), Gelu and Clip.
 *
 * Input and output have the same number of elements and are contiguous, so every op is one
 * loop over numel elements, written per dtype (float32, float64, the integer types where ONNX
 * allows them, bool for Not). float16/bfloat16 are converted to float32 in chunks on the
 * stack, run through the float32 loop and rounded once on store. NaN propagates (Relu and
 * Clip test with comparisons that are false for NaN; Sign of NaN is NaN, like numpy).
 *
 * float32 Exp, Sigmoid, Tanh, Erf and Gelu (both forms) use the branch-free exp / sigmoid /
 * tanh / erf of kmath.h instead of libm's scalar calls, so their loops vectorize (and get an AVX2 copy);
 * they stay within 1.5-3 ulp of the exact values (see kmath.h). */
#include <float.h>
#include <math.h>

#include "graph/ops/elementwise_params.h"
#include "kernels/elementwise_impl.h"
#include "kernels/kmath.h"

/* A row: o[i] = f(x[i]) for n contiguous elements; ctx carries op data (Gelu, Clip). */
typedef mx__ew_un_fn un_fn;

#define ROW1(NAME, TI, TO, EXPR)                                           \
  static void NAME(int64_t n, const void *px, void *po, const void *ctx) { \
    (void)ctx;                                                             \
    const TI *restrict a = px;                                             \
    TO *restrict o = po;                                                   \
    for (int64_t i = 0; i < n; i++) {                                      \
      const TI x = a[i];                                                   \
      o[i] = (TO)(EXPR);                                                   \
    }                                                                      \
  }

/* Float math over float32 and float64 (F: the float32 libm function, D: the double one). */
#define FLOAT_ROWS(OP, F32EXPR, F64EXPR) \
  ROW1(OP##_f32, float, float, F32EXPR)  \
  ROW1(OP##_f64, double, double, F64EXPR)

/* float32 rows over a kmath.h function, in a vectorized AVX2 copy and a baseline copy. */
#define VEC_ROW_F32(NAME, FN)                                                      \
  MX_KHOT static void NAME(int64_t n, const void *px, void *po, const void *ctx) { \
    (void)ctx;                                                                     \
    const float *restrict a = px;                                                  \
    float *restrict o = po;                                                        \
    for (int64_t i = 0; i < n; i++) o[i] = FN(a[i]);                               \
  }

VEC_ROW_F32(exp_f32, mx__kexpf)
ROW1(exp_f64, double, double, exp(x))
FLOAT_ROWS(log, logf(x), log(x))
FLOAT_ROWS(sqrt, sqrtf(x), sqrt(x))
FLOAT_ROWS(sin, sinf(x), sin(x))
FLOAT_ROWS(cos, cosf(x), cos(x))
VEC_ROW_F32(tanh_f32, mx__ktanhf)
VEC_ROW_F32(erf_f32, mx__kerff)
ROW1(erf_f64, double, double, erf(x))
ROW1(tanh_f64, double, double, tanh(x))
FLOAT_ROWS(floor, floorf(x), floor(x))
FLOAT_ROWS(ceil, ceilf(x), ceil(x))
FLOAT_ROWS(recip, 1.0f / x, 1.0 / x)
FLOAT_ROWS(abs, fabsf(x), fabs(x))
FLOAT_ROWS(neg, -x, -x)
FLOAT_ROWS(relu, x < 0.0f ? 0.0f : x, x < 0.0 ? 0.0 : x)
FLOAT_ROWS(sign, x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : x), x > 0.0 ? 1.0 : (x < 0.0 ? -1.0 : x))

/* Sigmoid without overflow: exp of a non-positive argument only (float32: mx__ksigmoidf does
 * the same without branches). */
static inline double sigmoid_d(double x) {
  if (x >= 0.0) return 1.0 / (1.0 + exp(-x));
  double e = exp(x);
  return e / (1.0 + e);
}
VEC_ROW_F32(sigmoid_f32, mx__ksigmoidf)
ROW1(sigmoid_f64, double, double, sigmoid_d(x))

/* Integer rows: T the type, U its unsigned counterpart for wrapping negation. */
#define SINT_ROWS(OP, EXPR)                                 \
  ROW1(OP##_i8, int8_t, int8_t, EXPR(int8_t, uint32_t))     \
  ROW1(OP##_i16, int16_t, int16_t, EXPR(int16_t, uint32_t)) \
  ROW1(OP##_i32, int32_t, int32_t, EXPR(int32_t, uint32_t)) \
  ROW1(OP##_i64, int64_t, int64_t, EXPR(int64_t, uint64_t))
#define ABS_I(T, U)  (x < 0 ? (T)(0 - (U)x) : x)
#define NEG_I(T, U)  (T)(0 - (U)x)
#define RELU_I(T, U) (x < 0 ? 0 : x)
#define SIGN_I(T, U) ((x > 0) - (x < 0))
#define ERF_I(T, U)  (T) erf((double)x)
SINT_ROWS(abs, ABS_I)
SINT_ROWS(neg, NEG_I)
SINT_ROWS(relu, RELU_I)
SINT_ROWS(sign, SIGN_I)
SINT_ROWS(erf, ERF_I)
ROW1(abs_u8, uint8_t, uint8_t, x)
ROW1(sign_u8, uint8_t, uint8_t, x > 0)
ROW1(erf_u8, uint8_t, uint8_t, erf((double)x))
ROW1(abs_u16, uint16_t, uint16_t, x)
ROW1(abs_u32, uint32_t, uint32_t, x)
ROW1(abs_u64, uint64_t, uint64_t, x)
ROW1(sign_u16, uint16_t, uint16_t, x > 0)
ROW1(sign_u32, uint32_t, uint32_t, x > 0)
ROW1(sign_u64, uint64_t, uint64_t, x > 0)
ROW1(erf_u16, uint16_t, uint16_t, erf((double)x))
ROW1(erf_u32, uint32_t, uint32_t, erf((double)x))
ROW1(erf_u64, uint64_t, uint64_t, erf((double)x))
ROW1(not_b, uint8_t, uint8_t, x == 0)

/* Gelu: 0.5 x (1 + erf(x / sqrt 2)), or with tanh(sqrt(2/pi) (x + 0.044715 x^3)). */
MX_KHOT static void gelu_f32(int64_t n, const void *px, void *po, const void *ctx) {
  const mx_gelu_params *p = ctx;
  const float *restrict a = px;
  float *restrict o = po;
  if (p && p->tanh_approx) {
    for (int64_t i = 0; i < n; i++) {
      float x = a[i];
      o[i] = 0.5f * x * (1.0f + mx__ktanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
    }
  } else {
    for (int64_t i = 0; i < n; i++) o[i] = 0.5f * a[i] * (1.0f + mx__kerff(a[i] * 0.7071067811865476f));
  }
}
static void gelu_f64(int64_t n, const void *px, void *po, const void *ctx) {
  const mx_gelu_params *p = ctx;
  const double *restrict a = px;
  double *restrict o = po;
  if (p && p->tanh_approx) {
    for (int64_t i = 0; i < n; i++) {
      double x = a[i];
      o[i] = 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    }
  } else {
    for (int64_t i = 0; i < n; i++) o[i] = 0.5 * a[i] * (1.0 + erf(a[i] * 0.7071067811865476));
  }
}

/* Clip bounds, resolved once per call in every representation a row may need. */
typedef struct clip_bounds {
  float lo_f, hi_f;
  double lo_d, hi_d;
  int64_t lo_i, hi_i;
} clip_bounds;

static void clip_f32(int64_t n, const void *px, void *po, const void *ctx) {
  const clip_bounds *b = ctx;
  const float *restrict a = px;
  float *restrict o = po;
  const float lo = b->lo_f, hi = b->hi_f;
  for (int64_t i = 0; i < n; i++) {
    float v = a[i] < lo ? lo : a[i];
    o[i] = v > hi ? hi : v;
  }
}
static void clip_f64(int64_t n, const void *px, void *po, const void *ctx) {
  const clip_bounds *b = ctx;
  const double *restrict a = px;
  double *restrict o = po;
  for (int64_t i = 0; i < n; i++) {
    double v = a[i] < b->lo_d ? b->lo_d : a[i];
    o[i] = v > b->hi_d ? b->hi_d : v;
  }
}
#define CLIP_INT(NAME, T)                                                  \
  static void NAME(int64_t n, const void *px, void *po, const void *ctx) { \
    const clip_bounds *b = ctx;                                            \
    const T *restrict a = px;                                              \
    T *restrict o = po;                                                    \
    for (int64_t i = 0; i < n; i++) {                                      \
      int64_t v = a[i] < b->lo_i ? b->lo_i : a[i];                         \
      o[i] = (T)(v > b->hi_i ? b->hi_i : v);                               \
    }                                                                      \
  }
CLIP_INT(clip_i8, int8_t)
CLIP_INT(clip_u8, uint8_t)
CLIP_INT(clip_i16, int16_t)
CLIP_INT(clip_i32, int32_t)
CLIP_INT(clip_i64, int64_t)
CLIP_INT(clip_u16, uint16_t)
CLIP_INT(clip_u32, uint32_t)

/* uint64 compares unsigned; bounds below 0 clamp to 0 (they come from int64 reads of uint64). */
static void clip_u64(int64_t n, const void *px, void *po, const void *ctx) {
  const clip_bounds *b = ctx;
  const uint64_t *restrict a = px;
  uint64_t *restrict o = po;
  uint64_t lo = b->lo_i == INT64_MIN ? 0 : (uint64_t)b->lo_i;
  uint64_t hi = b->hi_i == INT64_MAX ? UINT64_MAX : (uint64_t)b->hi_i;
  for (int64_t i = 0; i < n; i++) o[i] = a[i] < lo ? lo : a[i] > hi ? hi : a[i];
}

/* --- tables and the shared runner ----------------------------------------------------------- */

#define N_DT MX__EW_UN_TABLE_SIZE
typedef un_fn un_table[N_DT];

#define FLT(OP)  [MX_FLOAT32] = OP##_f32, [MX_FLOAT64] = OP##_f64
#define SINT(OP) [MX_INT8] = OP##_i8, [MX_INT16] = OP##_i16, [MX_INT32] = OP##_i32, [MX_INT64] = OP##_i64
#define UINT(OP) [MX_UINT8] = OP##_u8, [MX_UINT16] = OP##_u16, [MX_UINT32] = OP##_u32, [MX_UINT64] = OP##_u64

static const un_table t_abs = {FLT(abs), SINT(abs), UINT(abs)};
static const un_table t_neg = {FLT(neg), SINT(neg)};
static const un_table t_exp = {FLT(exp)};
static const un_table t_log = {FLT(log)};
static const un_table t_sqrt = {FLT(sqrt)};
static const un_table t_sin = {FLT(sin)};
static const un_table t_cos = {FLT(cos)};
static const un_table t_tanh = {FLT(tanh)};
static const un_table t_sigmoid = {FLT(sigmoid)};
static const un_table t_relu = {FLT(relu), SINT(relu)};
static const un_table t_erf = {FLT(erf), SINT(erf), UINT(erf)};
static const un_table t_floor = {FLT(floor)};
static const un_table t_ceil = {FLT(ceil)};
static const un_table t_recip = {FLT(recip)};
static const un_table t_sign = {FLT(sign), SINT(sign), UINT(sign)};
static const un_table t_not = {[MX_BOOL] = not_b};
static const un_table t_gelu = {FLT(gelu)};
static const un_table t_clip = {FLT(clip), SINT(clip), UINT(clip)};

static mx_status run_unary(mx_kernel_call *c, const un_table t, const void *ctx) {
  const mx_ktensor *x = mx__kin(c, 0);
  mx_ktensor *o = mx__kout(c, 0);
  mx_dtype dt = x->dtype;
  if ((unsigned)dt >= N_DT || o->dtype != dt || !t[mx__ew_is_half(dt) ? MX_FLOAT32 : dt]) {
    c->why = "dtype not supported by this kernel";
    return MX_ERR_UNSUPPORTED;
  }
  int64_t n = mx__ktensor_numel(x);
  if (mx__ktensor_numel(o) != n) {
    c->why = "input and output sizes differ";
    return MX_ERR_KERNEL;
  }
  if (!mx__ew_is_half(dt)) {
    if (n) t[dt](n, x->data, o->data, ctx);
    return MX_OK;
  }
  const uint16_t *src = x->data;
  uint16_t *dst = o->data;
  float buf[MX__EW_CHUNK], res[MX__EW_CHUNK];
  for (int64_t off = 0; off < n; off += MX__EW_CHUNK) {
    int64_t m = n - off < MX__EW_CHUNK ? n - off : MX__EW_CHUNK;
    mx__khalf_to_f32(src + off, dt, buf, m);
    t[MX_FLOAT32](m, buf, res, ctx);
    mx__kf32_to_half(res, dt, dst + off, m);
  }
  return MX_OK;
}

mx_status mx__ew_unary_apply(mx_kernel_call *c, const mx__ew_un_fn *table, const void *ctx) {
  return run_unary(c, table, ctx);
}

#define UNARY_KERNEL(NAME, TABLE) \
  static mx_status run_##NAME(mx_kernel_call *c) { return run_unary(c, TABLE, NULL); }
UNARY_KERNEL(Abs, t_abs)
UNARY_KERNEL(Neg, t_neg)
UNARY_KERNEL(Exp, t_exp)
UNARY_KERNEL(Log, t_log)
UNARY_KERNEL(Sqrt, t_sqrt)
UNARY_KERNEL(Sin, t_sin)
UNARY_KERNEL(Cos, t_cos)
UNARY_KERNEL(Tanh, t_tanh)
UNARY_KERNEL(Sigmoid, t_sigmoid)
UNARY_KERNEL(Relu, t_relu)
UNARY_KERNEL(Erf, t_erf)
UNARY_KERNEL(Floor, t_floor)
UNARY_KERNEL(Ceil, t_ceil)
UNARY_KERNEL(Reciprocal, t_recip)
UNARY_KERNEL(Sign, t_sign)
UNARY_KERNEL(Not, t_not)

static mx_status run_Gelu(mx_kernel_call *c) { return run_unary(c, t_gelu, c->params); }

/* Reads the scalar bound input i (absent: false). */
static mx_status clip_input(mx_kernel_call *c, uint32_t i, bool *present, double *d, int64_t *v) {
  *present = false;
  if (i >= c->n_in) return MX_OK;
  const mx_ktensor *b = mx__kin(c, i);
  if (b->dtype == MX_DTYPE_UNDEFINED) return MX_OK;
  if (mx__ktensor_numel(b) != 1 || !b->data) {
    c->why = "Clip: a bound is not a scalar";
    return MX_ERR_KERNEL;
  }
  if (b->dtype != mx__kin(c, 0)->dtype) {
    c->why = "Clip: a bound's dtype differs from the input's";
    return MX_ERR_UNSUPPORTED;
  }
  *present = true;
  *d = mx__kget_f64(b->data, b->dtype, 0);
  *v = mx__kget_i64(b->data, b->dtype, 0);
  return MX_OK;
}

static mx_status run_Clip(mx_kernel_call *c) {
  const mx_clip_params *p = c->params;
  clip_bounds b = {-INFINITY, INFINITY, -INFINITY, INFINITY, INT64_MIN, INT64_MAX};
  if (p && p->from_attrs) {
    b.lo_f = p->min;
    b.hi_f = p->max;
    b.lo_d = p->min;
    b.hi_d = p->max;
    b.lo_i = mx__ew_sat_i64(p->min, -9223372036854775808.0, 9223372036854775807.0);
    b.hi_i = mx__ew_sat_i64(p->max, -9223372036854775808.0, 9223372036854775807.0);
  } else {
    bool has;
    double d;
    int64_t v;
    mx_status st = clip_input(c, 1, &has, &d, &v);
    if (st != MX_OK) return st;
    if (has) b.lo_f = (float)d, b.lo_d = d, b.lo_i = v;
    st = clip_input(c, 2, &has, &d, &v);
    if (st != MX_OK) return st;
    if (has) b.hi_f = (float)d, b.hi_d = d, b.hi_i = v;
  }
  return run_unary(c, t_clip, &b);
}

#define KDEF(NAME, DTYPES) const mx_kernel_def mx__kdef_##NAME = {#NAME, NULL, DTYPES, 0, run_##NAME, NULL};
#define SINTS              (MX_KDT(MX_INT8) | MX_KDT(MX_INT16) | MX_KDT(MX_INT32) | MX_KDT(MX_INT64))

KDEF(Abs, MX_KDT_FLOATS | MX_KDT_INTS)
KDEF(Neg, MX_KDT_FLOATS | SINTS)
KDEF(Exp, MX_KDT_FLOATS)
KDEF(Log, MX_KDT_FLOATS)
KDEF(Sqrt, MX_KDT_FLOATS)
KDEF(Sin, MX_KDT_FLOATS)
KDEF(Cos, MX_KDT_FLOATS)
KDEF(Tanh, MX_KDT_FLOATS)
KDEF(Sigmoid, MX_KDT_FLOATS)
KDEF(Relu, MX_KDT_FLOATS | SINTS)
KDEF(Erf, MX_KDT_FLOATS | MX_KDT_INTS)
KDEF(Floor, MX_KDT_FLOATS)
KDEF(Ceil, MX_KDT_FLOATS)
KDEF(Reciprocal, MX_KDT_FLOATS)
KDEF(Sign, MX_KDT_FLOATS | MX_KDT_INTS)
KDEF(Not, MX_KDT(MX_BOOL))
KDEF(Gelu, MX_KDT_FLOATS)
KDEF(Clip, MX_KDT_FLOATS | MX_KDT_INTS)
