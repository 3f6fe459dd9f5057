/* CPU kernels of the binary elementwise ops (Add, Sub, Mul, Div, Pow, Mod, And, Or, Xor, Equal,
 * Less, LessOrEqual, Greater, GreaterOrEqual) and the variadic Sum, Mean, Max, Min.
 *
 * Each op has one row function per native dtype (float32, float64, int8..int64, uint8..uint64,
 * and bool where ONNX allows it), stamped out by macros as four loops: both operands
 * contiguous, either one broadcast along the row, or general strides. The contiguous loops
 * are what gcc -O3 vectorizes. float16/bfloat16 reuse the float32 row through the converting
 * adapter. Integer arithmetic wraps like numpy (it is done in unsigned types, so overflow is
 * defined); integer Div truncates toward zero and Mod follows the divisor's sign unless fmod
 * is set; a zero divisor fails the kernel instead of trapping. Max/Min propagate NaN. */
#include <math.h>
#include <string.h>

#include "graph/ops/elementwise_params.h"
#include "kernels/elementwise_impl.h"

/* --- row functions -------------------------------------------------------------------------- */

/* A row function NAME computing o[i] = EXPR from x = a[i*sa] (type TA) and y = b[i*sb] (TB). */
#define ROW2(NAME, TA, TB, TO, EXPR)                                                              \
  static bool NAME(int64_t n, const void *pa, int64_t sa, const void *pb, int64_t sb, void *po) { \
    const TA *restrict a = pa;                                                                    \
    const TB *restrict b = pb;                                                                    \
    TO *restrict o = po;                                                                          \
    if (sa == 1 && sb == 1) {                                                                     \
      for (int64_t i = 0; i < n; i++) {                                                           \
        const TA x = a[i];                                                                        \
        const TB y = b[i];                                                                        \
        o[i] = (TO)(EXPR);                                                                        \
      }                                                                                           \
    } else if (sa == 0 && sb == 1) {                                                              \
      const TA x = a[0];                                                                          \
      for (int64_t i = 0; i < n; i++) {                                                           \
        const TB y = b[i];                                                                        \
        o[i] = (TO)(EXPR);                                                                        \
      }                                                                                           \
    } else if (sa == 1 && sb == 0) {                                                              \
      const TB y = b[0];                                                                          \
      for (int64_t i = 0; i < n; i++) {                                                           \
        const TA x = a[i];                                                                        \
        o[i] = (TO)(EXPR);                                                                        \
      }                                                                                           \
    } else {                                                                                      \
      for (int64_t i = 0; i < n; i++) {                                                           \
        const TA x = a[i * sa];                                                                   \
        const TB y = b[i * sb];                                                                   \
        o[i] = (TO)(EXPR);                                                                        \
      }                                                                                           \
    }                                                                                             \
    return true;                                                                                  \
  }

/* Same-type ops over the native types; U is the type arithmetic wraps in. */
/* (the formatter packs such lists unevenly: one entry per line) */
// clang-format off
#define NATIVE_TYPES(X, OP)       \
  X(OP, f32, float, float)        \
  X(OP, f64, double, double)      \
  X(OP, i8, int8_t, uint32_t)     \
  X(OP, u8, uint8_t, uint32_t)    \
  X(OP, i16, int16_t, uint32_t)   \
  X(OP, i32, int32_t, uint32_t)   \
  X(OP, i64, int64_t, uint64_t)   \
  X(OP, u16, uint16_t, uint32_t)  \
  X(OP, u32, uint32_t, uint32_t)  \
  X(OP, u64, uint64_t, uint64_t)
// clang-format on

#define TABLE_ENTRIES(OP)                                                                      \
  [MX_FLOAT32] = OP##_f32, [MX_FLOAT64] = OP##_f64, [MX_INT8] = OP##_i8, [MX_UINT8] = OP##_u8, \
  [MX_INT16] = OP##_i16, [MX_INT32] = OP##_i32, [MX_INT64] = OP##_i64, [MX_UINT16] = OP##_u16, \
  [MX_UINT32] = OP##_u32, [MX_UINT64] = OP##_u64

#define ARITH_ROW(OP, SUF, T, U) ROW2(OP##_##SUF, T, T, T, OP##_EXPR(T, U))
#define add_EXPR(T, U)           (T)((U)x + (U)y)
#define sub_EXPR(T, U)           (T)((U)x - (U)y)
#define mul_EXPR(T, U)           (T)((U)x * (U)y)
#define max_EXPR(T, U)           (x > y ? x : y)
#define min_EXPR(T, U)           (x < y ? x : y)
NATIVE_TYPES(ARITH_ROW, add)
NATIVE_TYPES(ARITH_ROW, sub)
NATIVE_TYPES(ARITH_ROW, mul)

/* Integer max/min; the float ones return a NaN operand like numpy (x != x only for NaN). */
/* (the formatter packs such lists unevenly: one entry per line) */
// clang-format off
#define INT_TYPES(X, OP)          \
  X(OP, i8, int8_t, uint32_t)     \
  X(OP, u8, uint8_t, uint32_t)    \
  X(OP, i16, int16_t, uint32_t)   \
  X(OP, i32, int32_t, uint32_t)   \
  X(OP, i64, int64_t, uint64_t)   \
  X(OP, u16, uint16_t, uint32_t)  \
  X(OP, u32, uint32_t, uint32_t)  \
  X(OP, u64, uint64_t, uint64_t)
// clang-format on
INT_TYPES(ARITH_ROW, max)
INT_TYPES(ARITH_ROW, min)
ROW2(max_f32, float, float, float, (x > y || x != x) ? x : y)
ROW2(max_f64, double, double, double, (x > y || x != x) ? x : y)
ROW2(min_f32, float, float, float, (x < y || x != x) ? x : y)
ROW2(min_f64, double, double, double, (x < y || x != x) ? x : y)

#define CMP_ROW(OP, SUF, T, U) ROW2(OP##_##SUF, T, T, uint8_t, OP##_EXPR)
#define eq_EXPR                (x == y)
#define lt_EXPR                (x < y)
#define le_EXPR                (x <= y)
#define gt_EXPR                (x > y)
#define ge_EXPR                (x >= y)
NATIVE_TYPES(CMP_ROW, eq)
NATIVE_TYPES(CMP_ROW, lt)
NATIVE_TYPES(CMP_ROW, le)
NATIVE_TYPES(CMP_ROW, gt)
NATIVE_TYPES(CMP_ROW, ge)
ROW2(eq_b, uint8_t, uint8_t, uint8_t, (x != 0) == (y != 0))
ROW2(and_b, uint8_t, uint8_t, uint8_t, (x != 0) & (y != 0))
ROW2(or_b, uint8_t, uint8_t, uint8_t, (x != 0) | (y != 0))
ROW2(xor_b, uint8_t, uint8_t, uint8_t, (x != 0) ^ (y != 0))

ROW2(div_f32, float, float, float, x / y)
ROW2(div_f64, double, double, double, x / y)
ROW2(pow_f32, float, float, float, powf(x, y))
ROW2(pow_f64, double, double, double, pow(x, y))
ROW2(fmod_f32, float, float, float, fmodf(x, y))
ROW2(fmod_f64, double, double, double, fmod(x, y))

/* Python-style float modulo (sign of the divisor), as numpy's mod. */
static inline float pymod_f(float x, float y) {
  float r = fmodf(x, y);
  return (r != 0.0f && ((r < 0.0f) != (y < 0.0f))) ? r + y : r;
}
static inline double pymod_d(double x, double y) {
  double r = fmod(x, y);
  return (r != 0.0 && ((r < 0.0) != (y < 0.0))) ? r + y : r;
}
ROW2(mod_f32, float, float, float, pymod_f(x, y))
ROW2(mod_f64, double, double, double, pymod_d(x, y))

/* Integer division and modulo: checked per element, so written as plain loops. MODE 0 is
 * truncating division, 1 the modulo with the divisor's sign, 2 the C remainder (fmod=1). */
#define INT_DIVMOD(NAME, T, U, MODE)                                                              \
  static bool NAME(int64_t n, const void *pa, int64_t sa, const void *pb, int64_t sb, void *po) { \
    const T *a = pa, *b = pb;                                                                     \
    T *o = po;                                                                                    \
    for (int64_t i = 0; i < n; i++) {                                                             \
      T x = a[i * sa], y = b[i * sb];                                                             \
      if (y == 0) return false;                                                                   \
      if (y == -1) { /* avoids the MIN / -1 trap */                                               \
        o[i] = MODE == 0 ? (T)(0 - (U)x) : (T)0;                                                  \
        continue;                                                                                 \
      }                                                                                           \
      if (MODE == 0) {                                                                            \
        o[i] = (T)(x / y);                                                                        \
      } else {                                                                                    \
        T r = (T)(x % y);                                                                         \
        if (MODE == 1 && r != 0 && ((r < 0) != (y < 0))) r = (T)(r + y);                          \
        o[i] = r;                                                                                 \
      }                                                                                           \
    }                                                                                             \
    return true;                                                                                  \
  }
/* Unsigned types: no sign to fix and no trap. */
#define U_DIVMOD(NAME, T, MODE)                                                                   \
  static bool NAME(int64_t n, const void *pa, int64_t sa, const void *pb, int64_t sb, void *po) { \
    const T *a = pa, *b = pb;                                                                     \
    T *o = po;                                                                                    \
    for (int64_t i = 0; i < n; i++) {                                                             \
      T x = a[i * sa], y = b[i * sb];                                                             \
      if (y == 0) return false;                                                                   \
      o[i] = (T)(MODE == 0 ? x / y : x % y);                                                      \
    }                                                                                             \
    return true;                                                                                  \
  }
#define INT_DIVMOD_ALL(OP, MODE)                \
  INT_DIVMOD(OP##_i8, int8_t, uint32_t, MODE)   \
  U_DIVMOD(OP##_u8, uint8_t, MODE)              \
  INT_DIVMOD(OP##_i16, int16_t, uint32_t, MODE) \
  INT_DIVMOD(OP##_i32, int32_t, uint32_t, MODE) \
  INT_DIVMOD(OP##_i64, int64_t, uint64_t, MODE) \
  U_DIVMOD(OP##_u16, uint16_t, MODE)            \
  U_DIVMOD(OP##_u32, uint32_t, MODE)            \
  U_DIVMOD(OP##_u64, uint64_t, MODE)
INT_DIVMOD_ALL(div, 0)
INT_DIVMOD_ALL(mod, 1)
INT_DIVMOD_ALL(fmod, 2)

/* x**y for integers, wrapping; a negative exponent gives the truncated real result. */
static int64_t ipow(int64_t x, int64_t y) {
  if (y < 0) return x == 1 ? 1 : x == -1 ? ((y & 1) ? -1 : 1) : 0;
  uint64_t r = 1, b = (uint64_t)x;
  while (y) {
    if (y & 1) r *= b;
    b *= b;
    y >>= 1;
  }
  return (int64_t)r;
}
ROW2(pow_i32, int32_t, int32_t, int32_t, (int32_t)(uint32_t)(uint64_t)ipow(x, y))
ROW2(pow_i64, int64_t, int64_t, int64_t, ipow(x, y))

/* --- tables --------------------------------------------------------------------------------- */

#define N_DT (MX_BFLOAT16 + 1)
typedef mx__ew_bin_fn bin_table[N_DT];

static const bin_table t_add = {TABLE_ENTRIES(add)};
static const bin_table t_sub = {TABLE_ENTRIES(sub)};
static const bin_table t_mul = {TABLE_ENTRIES(mul)};
static const bin_table t_max = {TABLE_ENTRIES(max)};
static const bin_table t_min = {TABLE_ENTRIES(min)};
static const bin_table t_div = {TABLE_ENTRIES(div)};
static const bin_table t_mod = {TABLE_ENTRIES(mod)};
static const bin_table t_fmod = {TABLE_ENTRIES(fmod)};
static const bin_table t_pow = {
    [MX_FLOAT32] = pow_f32, [MX_FLOAT64] = pow_f64, [MX_INT32] = pow_i32, [MX_INT64] = pow_i64};
static const bin_table t_eq = {TABLE_ENTRIES(eq), [MX_BOOL] = eq_b};
static const bin_table t_lt = {TABLE_ENTRIES(lt)};
static const bin_table t_le = {TABLE_ENTRIES(le)};
static const bin_table t_gt = {TABLE_ENTRIES(gt)};
static const bin_table t_ge = {TABLE_ENTRIES(ge)};
static const bin_table t_and = {[MX_BOOL] = and_b};
static const bin_table t_or = {[MX_BOOL] = or_b};
static const bin_table t_xor = {[MX_BOOL] = xor_b};

/* The row function of `t` for dtype dt (the float32 one for 16-bit floats), or NULL. */
static mx__ew_bin_fn pick(const bin_table t, mx_dtype dt) {
  if ((unsigned)dt >= N_DT) return NULL;
  return t[mx__ew_is_half(dt) ? MX_FLOAT32 : dt];
}

static mx_status unsupported(mx_kernel_call *c) {
  c->why = "dtype not supported by this kernel";
  return MX_ERR_UNSUPPORTED;
}

/* --- binary kernels ------------------------------------------------------------------------- */

/* out = f(a, b) with the op's legacy broadcasting applied when `legacy` params say so. */
static mx_status run_binary(mx_kernel_call *c, const bin_table t, const mx_binary_params *p) {
  const mx_ktensor *a = mx__kin(c, 0), *b = mx__kin(c, 1);
  mx_ktensor *o = mx__kout(c, 0);
  if (a->dtype != b->dtype) return unsupported(c);
  mx__ew_bin_fn fn = pick(t, a->dtype);
  if (!fn) return unsupported(c);
  mx_ktensor bb; /* B reshaped for legacy broadcasting (only then copied: the struct is large) */
  if (p && p->legacy) {
    bb = *b;
    /* B's dims start at A's dim `axis`: pad B with trailing size-1 dims. */
    int32_t axis = p->axis < 0 ? p->axis + a->rank : p->axis;
    if (axis < 0 || axis + b->rank > a->rank) {
      c->why = "legacy broadcast axis out of range";
      return MX_ERR_KERNEL;
    }
    int64_t dims[MX_MAX_RANK];
    for (int32_t k = 0; k < a->rank - axis; k++) dims[k] = k < b->rank ? b->dims[k] : 1;
    mx__ktensor_set_dims(&bb, a->rank - axis, dims);
    b = &bb;
  }
  return mx__ew_binary_apply(c, fn, o, a, b);
}

#define BINARY_KERNEL(NAME, TABLE) \
  static mx_status run_##NAME(mx_kernel_call *c) { return run_binary(c, TABLE, c->params); }
BINARY_KERNEL(Add, t_add)
BINARY_KERNEL(Sub, t_sub)
BINARY_KERNEL(Mul, t_mul)
BINARY_KERNEL(Div, t_div)
BINARY_KERNEL(And, t_and)
BINARY_KERNEL(Or, t_or)
BINARY_KERNEL(Xor, t_xor)
BINARY_KERNEL(Equal, t_eq)
BINARY_KERNEL(Less, t_lt)
BINARY_KERNEL(LessOrEqual, t_le)
BINARY_KERNEL(Greater, t_gt)
BINARY_KERNEL(GreaterOrEqual, t_ge)

static mx_status run_Mod(mx_kernel_call *c) {
  const mx_mod_params *p = c->params;
  return run_binary(c, p && p->fmod ? t_fmod : t_mod, NULL);
}

/* Pow with base and exponent of different dtypes: one element at a time through int64 (both
 * integers) or double, stored into the base's dtype (saturating for integers). */
typedef struct pow_ctx {
  mx_dtype out, base, exp;
} pow_ctx;

static bool pow_mixed_row(void *ctx, int64_t n, char *const *p, const int64_t *s) {
  const pow_ctx *c = ctx;
  bool ints = mx_dtype_is_integer(c->base) && mx_dtype_is_integer(c->exp);
  for (int64_t i = 0; i < n; i++) {
    if (ints) {
      int64_t v = ipow(mx__kget_i64(p[1], c->base, i * s[1]), mx__kget_i64(p[2], c->exp, i * s[2]));
      mx__kset_i64(p[0], c->out, i, v);
    } else {
      double v = pow(mx__kget_f64(p[1], c->base, i * s[1]), mx__kget_f64(p[2], c->exp, i * s[2]));
      mx__ew_store_sat(p[0], c->out, i, v);
    }
  }
  return true;
}

static mx_status run_Pow(mx_kernel_call *c) {
  const mx_ktensor *a = mx__kin(c, 0), *b = mx__kin(c, 1);
  mx_ktensor *o = mx__kout(c, 0);
  if (a->dtype == b->dtype) return run_binary(c, t_pow, c->params);
  if (!(MX_KDT(a->dtype) & (MX_KDT_FLOATS | MX_KDT(MX_INT32) | MX_KDT(MX_INT64))) ||
      !(MX_KDT(b->dtype) & (MX_KDT_FLOATS | MX_KDT_INTS)))
    return unsupported(c);
  if (mx__ktensor_numel(o) == 0) return MX_OK;
  const mx_ktensor *ins[2] = {a, b};
  mx__ew_plan plan;
  mx_status st = mx__ew_plan_make(c, o, ins, 2, &plan);
  if (st != MX_OK) return st;
  pow_ctx ctx = {o->dtype, a->dtype, b->dtype};
  void *base[3] = {o->data, a->data, b->data};
  mx__ew_run(&plan, base, pow_mixed_row, &ctx);
  return MX_OK;
}

/* --- variadic kernels ----------------------------------------------------------------------- */

/* Copies the broadcast input into the output (same dtype). */
static bool copy_row(void *ctx, int64_t n, char *const *p, const int64_t *s) {
  int64_t es = *(const int64_t *)ctx;
  if (s[1] == 1) {
    memmove(p[0], p[1], (size_t)(n * es));
  } else {
    for (int64_t i = 0; i < n; i++) memcpy(p[0] + i * es, p[1] + i * s[1] * es, (size_t)es);
  }
  return true;
}

static size_t variadic_workspace(const mx_kernel_call *c) {
  const mx_ktensor *o = &c->t[c->n_in];
  mx_dtype dt = c->t[0].dtype;
  if (!mx__ew_is_half(dt) && c->n_in < 3) return 0;
  size_t es = mx__ew_is_half(dt) ? 4 : mx_dtype_size(dt);
  return (size_t)mx__ktensor_numel(o) * es;
}

/* out = in0 (op) in1 (op) ... ; Mean divides the sum by the input count. The accumulator is
 * the output itself, or a float32 workspace for 16-bit floats (one rounding at the end), or
 * a workspace when the output shares memory with an input that is not read first. */
static mx_status run_variadic(mx_kernel_call *c, const bin_table t, bool mean) {
  mx_ktensor *o = mx__kout(c, 0);
  uint32_t n = c->n_in;
  mx_dtype dt = o->dtype;
  for (uint32_t i = 0; i < n; i++)
    if (mx__kin(c, i)->dtype != dt) return unsupported(c);
  mx__ew_bin_fn fn = pick(t, dt);
  if (!fn) return unsupported(c);
  int64_t numel = mx__ktensor_numel(o);
  if (numel == 0) return MX_OK;
  mx_status st;
  mx__ew_plan plan;
  if (n == 1) {
    const mx_ktensor *in = mx__kin(c, 0);
    st = mx__ew_plan_make(c, o, &in, 1, &plan);
    if (st != MX_OK) return st;
    int64_t es = (int64_t)mx_dtype_size(dt);
    void *base[2] = {o->data, in->data};
    mx__ew_run(&plan, base, copy_row, &es);
    return MX_OK;
  }
  /* Read order: an input sharing the output's memory goes first. */
  uint32_t order[256] = {0}, n_alias = 0;
  if (n > 256) {
    c->why = "more than 256 inputs";
    return MX_ERR_KERNEL;
  }
  for (uint32_t i = 0; i < n; i++) order[i] = i;
  for (uint32_t i = 0; i < n; i++) {
    if (mx__kin(c, i)->data != o->data) continue;
    if (n_alias++ == 0) {
      order[i] = order[0];
      order[0] = i;
    }
  }
  bool half = mx__ew_is_half(dt);
  mx_ktensor acc = *o;
  if (half || (n_alias > 1 && n >= 3)) {
    acc.data = c->workspace;
    if (half) acc.dtype = MX_FLOAT32;
    if (!acc.data || c->workspace_size < (size_t)numel * mx_dtype_size(acc.dtype)) {
      c->why = "workspace too small";
      return MX_ERR_KERNEL;
    }
  }
  st = mx__ew_binary_apply(c, fn, &acc, mx__kin(c, order[0]), mx__kin(c, order[1]));
  for (uint32_t k = 2; k < n && st == MX_OK; k++)
    st = mx__ew_binary_apply(c, fn, &acc, &acc, mx__kin(c, order[k]));
  if (st != MX_OK) return st;
  if (mean) {
    if (acc.dtype == MX_FLOAT64) {
      double *d = acc.data;
      for (int64_t i = 0; i < numel; i++) d[i] /= (double)n;
    } else {
      float *f = acc.data;
      for (int64_t i = 0; i < numel; i++) f[i] /= (float)n;
    }
  }
  if (half)
    mx__kf32_to_half(acc.data, dt, o->data, numel);
  else if (acc.data != o->data)
    mx__kcopy(o->data, acc.data, (size_t)numel * mx_dtype_size(dt));
  return MX_OK;
}

static mx_status run_Sum(mx_kernel_call *c) { return run_variadic(c, t_add, false); }
static mx_status run_Mean(mx_kernel_call *c) { return run_variadic(c, t_add, true); }
static mx_status run_Max(mx_kernel_call *c) { return run_variadic(c, t_max, false); }
static mx_status run_Min(mx_kernel_call *c) { return run_variadic(c, t_min, false); }

/* --- definitions ---------------------------------------------------------------------------- */

#define NUMERIC                (MX_KDT_FLOATS | MX_KDT_INTS)
#define KDEF(NAME, DTYPES, WS) const mx_kernel_def mx__kdef_##NAME = {#NAME, NULL, DTYPES, 0, run_##NAME, WS};

KDEF(Add, NUMERIC, NULL)
KDEF(Sub, NUMERIC, NULL)
KDEF(Mul, NUMERIC, NULL)
KDEF(Div, NUMERIC, NULL)
KDEF(Pow, MX_KDT_FLOATS | MX_KDT(MX_INT32) | MX_KDT(MX_INT64), NULL)
KDEF(Mod, NUMERIC, NULL)
KDEF(And, MX_KDT(MX_BOOL), NULL)
KDEF(Or, MX_KDT(MX_BOOL), NULL)
KDEF(Xor, MX_KDT(MX_BOOL), NULL)
KDEF(Equal, MX_KDT_ALL, NULL)
KDEF(Less, NUMERIC, NULL)
KDEF(LessOrEqual, NUMERIC, NULL)
KDEF(Greater, NUMERIC, NULL)
KDEF(GreaterOrEqual, NUMERIC, NULL)
KDEF(Sum, MX_KDT_FLOATS, variadic_workspace)
KDEF(Mean, MX_KDT_FLOATS, variadic_workspace)
KDEF(Max, NUMERIC, variadic_workspace)
KDEF(Min, NUMERIC, variadic_workspace)
