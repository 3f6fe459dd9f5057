/* CPU kernels of Cast (any supported dtype to any other), CastLike, BitCast and Where.
 *
 * Cast rules: float to float rounds to nearest even once (float64 to float16/bfloat16 goes
 * through a round-to-odd float32, which makes the second rounding exact, so the result is the
 * correctly rounded one; NaN stays NaN and overflow becomes infinity). Integer to integer wraps
 * like a C cast (numpy's astype). Float to integer truncates toward zero and saturates at the
 * target's range, with NaN giving 0 (C leaves those cases undefined; ONNX does not specify
 * them). Anything to bool is "not zero" (NaN is true). The narrow floats (float8*, float4e2m1)
 * read as their exact float values; writing one rounds to nearest even once from double with
 * the op's `saturate` rule (common/float8.h), float8e8m0 with its round_mode. Sub-byte integer
 * targets keep the low bits of the truncated value, from floats too (as ONNX's reference does).
 * Common pairs (float32 <-> 16-bit floats,
 * float32 <-> float64, int64 <-> int32, int to float32) have their own loops; the rest go
 * element by element through double or int64.
 *
 * Where walks the three-way broadcast with one row function per element size, since picking
 * an element is a copy of its bytes. */
#include <string.h>

#include "graph/ops/elementwise_params.h"
#include "kernels/elementwise_impl.h"

/* --- Cast ----------------------------------------------------------------------------------- */

/* How values are written into a narrow float target. */
typedef struct narrow_rule {
  bool saturate;
  int e8m0_mode; /* MX__E8M0_UP / DOWN / NEAREST */
} narrow_rule;

/* Stores v into a narrow float buffer under the op's rule. */
static void store_narrow(void *p, mx_dtype dt, int64_t i, double v, const narrow_rule *r) {
  if (dt == MX_FLOAT8E8M0)
    ((uint8_t *)p)[i] = mx__e8m0_encode((float)v, r->e8m0_mode, r->saturate);
  else
    ((uint8_t *)p)[i] = mx__f8_encode(mx__f8_format_of(dt), v, r->saturate);
}

/* Stores a float source value (as double) into any dtype. `from_f32` marks float32 and 16-bit
 * sources, which convert to 16-bit floats without the round-to-odd step. */
static void store_from_float(void *p, mx_dtype dt, int64_t i, double v, bool from_f32, const narrow_rule *r) {
  if (mx_dtype_is_narrow_float(dt)) {
    store_narrow(p, dt, i, v, r);
    return;
  }
  switch (dt) {
    case MX_FLOAT16:
    case MX_BFLOAT16:
      ((uint16_t *)p)[i] = from_f32
                               ? (dt == MX_FLOAT16 ? mx__f32_to_f16((float)v) : mx__f32_to_bf16((float)v))
                               : mx__ew_f64_to_half(v, dt);
      break;
    case MX_BOOL: ((uint8_t *)p)[i] = v != 0.0; break;
    default: mx__ew_store_sat(p, dt, i, v); break;
  }
}

/* Stores an integer source value into any dtype (`src_unsigned`: v holds a uint64 pattern). */
static void store_from_int(void *p, mx_dtype dt, int64_t i, int64_t v, bool src_unsigned,
                           const narrow_rule *r) {
  if (src_unsigned && v < 0) { /* a uint64 past INT64_MAX: only its float value differs */
    double d = (double)(uint64_t)v;
    if (mx_dtype_is_float(dt) || mx_dtype_is_narrow_float(dt)) {
      store_from_float(p, dt, i, d, false, r);
      return;
    }
  }
  if (mx_dtype_is_narrow_float(dt)) {
    store_narrow(p, dt, i, (double)v, r);
    return;
  }
  switch (dt) {
    case MX_FLOAT32: ((float *)p)[i] = (float)v; break;
    case MX_FLOAT64: ((double *)p)[i] = (double)v; break;
    case MX_FLOAT16:
    case MX_BFLOAT16: ((uint16_t *)p)[i] = mx__ew_f64_to_half((double)v, dt); break;
    default: mx__kset_i64(p, dt, i, v); break;
  }
}

/* The fast loops; false when the pair has none. */
static bool cast_fast(const void *src, mx_dtype from, void *dst, mx_dtype to, int64_t n) {
  if (from == MX_FLOAT32 && mx__ew_is_half(to)) {
    mx__kf32_to_half(src, to, dst, n);
  } else if (mx__ew_is_half(from) && to == MX_FLOAT32) {
    mx__khalf_to_f32(src, from, dst, n);
  } else if (from == MX_FLOAT32 && to == MX_FLOAT64) {
    const float *restrict s = src;
    double *restrict d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = s[i];
  } else if (from == MX_FLOAT64 && to == MX_FLOAT32) {
    const double *restrict s = src;
    float *restrict d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = (float)s[i];
  } else if (from == MX_INT64 && to == MX_INT32) {
    const int64_t *restrict s = src;
    int32_t *restrict d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = (int32_t)(uint32_t)(uint64_t)s[i];
  } else if (from == MX_INT32 && to == MX_INT64) {
    const int32_t *restrict s = src;
    int64_t *restrict d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = s[i];
  } else if (from == MX_INT32 && to == MX_FLOAT32) {
    const int32_t *restrict s = src;
    float *restrict d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = (float)s[i];
  } else if (from == MX_INT64 && to == MX_FLOAT32) {
    const int64_t *restrict s = src;
    float *restrict d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = (float)s[i];
  } else {
    return false;
  }
  return true;
}

static mx_status run_Cast(mx_kernel_call *c) {
  const mx_ktensor *x = mx__kin(c, 0);
  mx_ktensor *o = mx__kout(c, 0);
  const mx_cast_params *p = c->params;
  mx_dtype from = x->dtype, to = o->dtype;
  if (!mx_dtype_size(from) || !mx_dtype_size(to) || (p && p->to != 0 && p->to != (int32_t)to)) {
    c->why = "Cast: unsupported dtypes or output dtype differs from 'to'";
    return MX_ERR_UNSUPPORTED;
  }
  int64_t n = mx__ktensor_numel(x);
  if (mx__ktensor_numel(o) != n) {
    c->why = "Cast: input and output sizes differ";
    return MX_ERR_KERNEL;
  }
  if (n == 0) return MX_OK;
  if (from == to) {
    if (o->data != x->data) mx__kcopy(o->data, x->data, (size_t)n * mx_dtype_size(from));
    return MX_OK;
  }
  if (cast_fast(x->data, from, o->data, to, n)) return MX_OK;
  narrow_rule rule = {p ? p->saturate != 0 : true, p ? p->round_mode : MX__E8M0_UP};
  if (mx_dtype_is_float(from) || mx_dtype_is_narrow_float(from)) {
    bool f32 = from != MX_FLOAT64;
    for (int64_t i = 0; i < n; i++)
      store_from_float(o->data, to, i, mx__kget_f64(x->data, from, i), f32, &rule);
  } else {
    bool u64 = from == MX_UINT64;
    for (int64_t i = 0; i < n; i++)
      store_from_int(o->data, to, i, mx__kget_i64(x->data, from, i), u64, &rule);
  }
  return MX_OK;
}

/* CastLike: Cast to the output's dtype (input 1's), with Cast's params (`to` 0). */
static mx_status run_CastLike(mx_kernel_call *c) { return run_Cast(c); }

/* BitCast: a byte copy, except that sub-byte targets take the source's low bits in their own
 * one-per-byte form (sign-extended for int4/int2) and bool targets become 0 or 1. */
static mx_status run_BitCast(mx_kernel_call *c) {
  const mx_ktensor *x = mx__kin(c, 0);
  mx_ktensor *o = mx__kout(c, 0);
  mx_dtype from = x->dtype, to = o->dtype;
  int64_t n = mx__ktensor_numel(x);
  if (mx_dtype_bits(from) != mx_dtype_bits(to) || !mx_dtype_bits(from) || mx__ktensor_numel(o) != n) {
    c->why = "BitCast: input and output differ in element width or count";
    return MX_ERR_KERNEL;
  }
  if (n == 0) return MX_OK;
  if (o->data != x->data) mx__kcopy(o->data, x->data, (size_t)n * mx_dtype_size(from));
  uint8_t *b = o->data;
  if (to == MX_FLOAT4E2M1) {
    for (int64_t i = 0; i < n; i++) b[i] &= 0x0F;
  } else if (mx_dtype_bits(to) < 8) {
    for (int64_t i = 0; i < n; i++) mx__kset_sub_byte(b, to, i, b[i]);
  } else if (to == MX_BOOL) {
    for (int64_t i = 0; i < n; i++) b[i] = b[i] != 0;
  }
  return MX_OK;
}

/* --- Where ---------------------------------------------------------------------------------- */

#define WHERE_ROW(NAME, T)                                                               \
  static bool NAME(void *ctx, int64_t n, char *const *p, const int64_t *s) {             \
    (void)ctx;                                                                           \
    const uint8_t *restrict cond = (const uint8_t *)p[1];                                \
    const T *restrict x = (const T *)p[2];                                               \
    const T *restrict y = (const T *)p[3];                                               \
    T *restrict o = (T *)p[0];                                                           \
    if (s[1] == 1 && s[2] == 1 && s[3] == 1) {                                           \
      for (int64_t i = 0; i < n; i++) o[i] = cond[i] ? x[i] : y[i];                      \
    } else if (s[1] == 1 && s[2] == 0 && s[3] == 0) {                                    \
      const T xv = x[0], yv = y[0];                                                      \
      for (int64_t i = 0; i < n; i++) o[i] = cond[i] ? xv : yv;                          \
    } else {                                                                             \
      for (int64_t i = 0; i < n; i++) o[i] = cond[i * s[1]] ? x[i * s[2]] : y[i * s[3]]; \
    }                                                                                    \
    return true;                                                                         \
  }
WHERE_ROW(where_1, uint8_t)
WHERE_ROW(where_2, uint16_t)
WHERE_ROW(where_4, uint32_t)
WHERE_ROW(where_8, uint64_t)

static mx_status run_Where(mx_kernel_call *c) {
  const mx_ktensor *cond = mx__kin(c, 0), *x = mx__kin(c, 1), *y = mx__kin(c, 2);
  mx_ktensor *o = mx__kout(c, 0);
  if (cond->dtype != MX_BOOL || x->dtype != y->dtype || x->dtype != o->dtype) {
    c->why = "Where: the condition must be bool and X, Y and the output share a dtype";
    return MX_ERR_UNSUPPORTED;
  }
  if (mx__ktensor_numel(o) == 0) return MX_OK;
  const mx_ktensor *ins[3] = {cond, x, y};
  mx__ew_plan plan;
  mx_status st = mx__ew_plan_make(c, o, ins, 3, &plan);
  if (st != MX_OK) return st;
  mx__ew_row_fn fn;
  switch (mx_dtype_size(o->dtype)) {
    case 1: fn = where_1; break;
    case 2: fn = where_2; break;
    case 4: fn = where_4; break;
    case 8: fn = where_8; break;
    default: c->why = "Where: unsupported element size"; return MX_ERR_UNSUPPORTED;
  }
  void *base[4] = {o->data, cond->data, x->data, y->data};
  mx__ew_run(&plan, base, fn, NULL);
  return MX_OK;
}

const mx_kernel_def mx__kdef_Cast = {"Cast", NULL, MX_KDT_ALL | MX_KDT_NARROW, 0, run_Cast, NULL};
const mx_kernel_def mx__kdef_CastLike = {"CastLike", NULL, MX_KDT_ALL | MX_KDT_NARROW, 0, run_CastLike, NULL};
const mx_kernel_def mx__kdef_BitCast = {"BitCast", NULL, MX_KDT_ALL | MX_KDT_NARROW, 0, run_BitCast, NULL};
const mx_kernel_def mx__kdef_Where = {"Where", NULL, MX_KDT_ALL, 1, run_Where, NULL};
