/* CPU kernels of ArgMax, ArgMin and CumSum.
 *
 * Both see the input as [outer, n, inner] around their axis. ArgMax/ArgMin keep, per output
 * element, the index of the best element so far and compare against the input at that index,
 * so they need no scratch; the scan runs over n with the inner elements contiguous. NaN counts
 * as the extreme (the first NaN wins, or the last with select_last_index), like numpy. CumSum
 * accumulates row by row (out[k] = out[k-1] + x[k], contiguous over the inner elements) in the
 * input's own type; float16/bfloat16 keep the running sums in a float32 workspace row and
 * round each output once. */
#include <string.h>

#include "graph/ops/reduce_params.h"
#include "kernels/kutil.h"
#include "kernels/reduce_impl.h"

/* Outer, axis and inner sizes of x around `axis` (already normalized). */
static void split(const mx_ktensor *x, int32_t axis, int64_t *outer, int64_t *n, int64_t *inner) {
  *outer = 1;
  *inner = 1;
  for (int32_t k = 0; k < axis; k++) *outer *= x->dims[k];
  *n = x->dims[axis];
  for (int32_t k = axis + 1; k < x->rank; k++) *inner *= x->dims[k];
}

/* --- ArgMax / ArgMin ------------------------------------------------------------------------ */

/* BETTER(v, b) is true when candidate v replaces the best b. */
#define ARG_KERNEL(NAME, T, BETTER)                                                                \
  static void NAME(const T *x, int64_t outer, int64_t n, int64_t inner, int64_t *out, bool last) { \
    for (int64_t o = 0; o < outer; o++) {                                                          \
      const T *xo = x + o * n * inner;                                                             \
      int64_t *io = out + o * inner;                                                               \
      for (int64_t j = 0; j < inner; j++) io[j] = 0;                                               \
      for (int64_t k = 1; k < n; k++) {                                                            \
        const T *row = xo + k * inner;                                                             \
        for (int64_t j = 0; j < inner; j++) {                                                      \
          const T v = row[j], b = xo[io[j] * inner + j];                                           \
          if (BETTER(v, b)) io[j] = k;                                                             \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
  }

/* Floats: NaN is the extreme; among equal candidates the first (or last) wins. */
#define F_MAX_BETTER(v, b) (last ? ((v) >= (b) || (v) != (v)) : ((v) > (b) || ((v) != (v) && (b) == (b))))
#define F_MIN_BETTER(v, b) (last ? ((v) <= (b) || (v) != (v)) : ((v) < (b) || ((v) != (v) && (b) == (b))))
#define I_MAX_BETTER(v, b) (last ? (v) >= (b) : (v) > (b))
#define I_MIN_BETTER(v, b) (last ? (v) <= (b) : (v) < (b))

ARG_KERNEL(argmax_f32, float, F_MAX_BETTER)
ARG_KERNEL(argmax_f64, double, F_MAX_BETTER)
ARG_KERNEL(argmax_i8, int8_t, I_MAX_BETTER)
ARG_KERNEL(argmax_u8, uint8_t, I_MAX_BETTER)
ARG_KERNEL(argmax_i16, int16_t, I_MAX_BETTER)
ARG_KERNEL(argmax_i32, int32_t, I_MAX_BETTER)
ARG_KERNEL(argmax_i64, int64_t, I_MAX_BETTER)
ARG_KERNEL(argmax_u16, uint16_t, I_MAX_BETTER)
ARG_KERNEL(argmax_u32, uint32_t, I_MAX_BETTER)
ARG_KERNEL(argmax_u64, uint64_t, I_MAX_BETTER)
ARG_KERNEL(argmin_f32, float, F_MIN_BETTER)
ARG_KERNEL(argmin_f64, double, F_MIN_BETTER)
ARG_KERNEL(argmin_i8, int8_t, I_MIN_BETTER)
ARG_KERNEL(argmin_u8, uint8_t, I_MIN_BETTER)
ARG_KERNEL(argmin_i16, int16_t, I_MIN_BETTER)
ARG_KERNEL(argmin_i32, int32_t, I_MIN_BETTER)
ARG_KERNEL(argmin_i64, int64_t, I_MIN_BETTER)
ARG_KERNEL(argmin_u16, uint16_t, I_MIN_BETTER)
ARG_KERNEL(argmin_u32, uint32_t, I_MIN_BETTER)
ARG_KERNEL(argmin_u64, uint64_t, I_MIN_BETTER)

/* 16-bit floats: compared after conversion, one element at a time. */
static void arg_half(const uint16_t *x, mx_dtype dt, int64_t outer, int64_t n, int64_t inner, int64_t *out,
                     bool last, bool is_max) {
  for (int64_t o = 0; o < outer; o++) {
    const uint16_t *xo = x + o * n * inner;
    int64_t *io = out + o * inner;
    for (int64_t j = 0; j < inner; j++) io[j] = 0;
    for (int64_t k = 1; k < n; k++) {
      for (int64_t j = 0; j < inner; j++) {
        double v = mx__kget_f64(xo, dt, k * inner + j), b = mx__kget_f64(xo, dt, io[j] * inner + j);
        bool better = is_max ? F_MAX_BETTER(v, b) : F_MIN_BETTER(v, b);
        if (better) io[j] = k;
      }
    }
  }
}

static mx_status run_arg(mx_kernel_call *c, bool is_max) {
  const mx_argreduce_params *p = c->params;
  const mx_ktensor *x = mx__kin(c, 0);
  mx_ktensor *out = mx__kout(c, 0);
  int32_t axis = p ? p->axis : 0;
  bool last = p && p->select_last_index;
  if (axis < 0) axis += x->rank;
  if (out->dtype != MX_INT64 || axis < 0 || axis >= x->rank) {
    c->why = "ArgMax/ArgMin: bad axis or output dtype";
    return MX_ERR_KERNEL;
  }
  int64_t outer, n, inner;
  split(x, axis, &outer, &n, &inner);
  if (mx__ktensor_numel(out) != outer * inner) {
    c->why = "ArgMax/ArgMin: output size does not match the input";
    return MX_ERR_KERNEL;
  }
  if (outer * inner == 0) return MX_OK;
  if (n == 0) {
    c->why = "ArgMax/ArgMin: the axis is empty";
    return MX_ERR_KERNEL;
  }
  int64_t *o = out->data;
  switch (x->dtype) {
    case MX_FLOAT32: (is_max ? argmax_f32 : argmin_f32)(x->data, outer, n, inner, o, last); break;
    case MX_FLOAT64: (is_max ? argmax_f64 : argmin_f64)(x->data, outer, n, inner, o, last); break;
    case MX_INT8: (is_max ? argmax_i8 : argmin_i8)(x->data, outer, n, inner, o, last); break;
    case MX_UINT8: (is_max ? argmax_u8 : argmin_u8)(x->data, outer, n, inner, o, last); break;
    case MX_INT16: (is_max ? argmax_i16 : argmin_i16)(x->data, outer, n, inner, o, last); break;
    case MX_INT32: (is_max ? argmax_i32 : argmin_i32)(x->data, outer, n, inner, o, last); break;
    case MX_INT64: (is_max ? argmax_i64 : argmin_i64)(x->data, outer, n, inner, o, last); break;
    case MX_UINT16: (is_max ? argmax_u16 : argmin_u16)(x->data, outer, n, inner, o, last); break;
    case MX_UINT32: (is_max ? argmax_u32 : argmin_u32)(x->data, outer, n, inner, o, last); break;
    case MX_UINT64: (is_max ? argmax_u64 : argmin_u64)(x->data, outer, n, inner, o, last); break;
    case MX_FLOAT16:
    case MX_BFLOAT16: arg_half(x->data, x->dtype, outer, n, inner, o, last, is_max); break;
    default: c->why = "ArgMax/ArgMin: dtype not supported"; return MX_ERR_UNSUPPORTED;
  }
  return MX_OK;
}

static mx_status run_ArgMax(mx_kernel_call *c) { return run_arg(c, true); }
static mx_status run_ArgMin(mx_kernel_call *c) { return run_arg(c, false); }

/* --- CumSum --------------------------------------------------------------------------------- */

/* Running sums along the axis for a native type T, wrapping in U for integers. Rows of the
 * output are visited in scan order (backwards when reversed); each row adds the previous
 * output row and the current (inclusive) or previous (exclusive) input row. */
#define CUMSUM_KERNEL(NAME, T, U)                                                                    \
  static void NAME(const T *x, T *y, int64_t outer, int64_t n, int64_t inner, bool excl, bool rev) { \
    for (int64_t o = 0; o < outer; o++) {                                                            \
      const T *xo = x + o * n * inner;                                                               \
      T *yo = y + o * n * inner;                                                                     \
      for (int64_t t = 0; t < n; t++) {                                                              \
        int64_t k = rev ? n - 1 - t : t, prev = rev ? k + 1 : k - 1;                                 \
        T *restrict row = yo + k * inner;                                                            \
        if (t == 0) {                                                                                \
          for (int64_t j = 0; j < inner; j++) row[j] = excl ? (T)0 : xo[k * inner + j];              \
          continue;                                                                                  \
        }                                                                                            \
        const T *restrict before = yo + prev * inner;                                                \
        const T *restrict add = xo + (excl ? prev : k) * inner;                                      \
        for (int64_t j = 0; j < inner; j++) row[j] = (T)((U)before[j] + (U)add[j]);                  \
      }                                                                                              \
    }                                                                                                \
  }
CUMSUM_KERNEL(cumsum_f32, float, float)
CUMSUM_KERNEL(cumsum_f64, double, double)
CUMSUM_KERNEL(cumsum_i8, int8_t, uint32_t)
CUMSUM_KERNEL(cumsum_u8, uint8_t, uint32_t)
CUMSUM_KERNEL(cumsum_i16, int16_t, uint32_t)
CUMSUM_KERNEL(cumsum_i32, int32_t, uint32_t)
CUMSUM_KERNEL(cumsum_i64, int64_t, uint64_t)
CUMSUM_KERNEL(cumsum_u16, uint16_t, uint32_t)
CUMSUM_KERNEL(cumsum_u32, uint32_t, uint32_t)
CUMSUM_KERNEL(cumsum_u64, uint64_t, uint64_t)

/* 16-bit floats: running sums in a float32 row (acc, inner entries), one rounding per output. */
static void cumsum_half(const uint16_t *x, uint16_t *y, mx_dtype dt, int64_t outer, int64_t n, int64_t inner,
                        bool excl, bool rev, float *acc) {
  for (int64_t o = 0; o < outer; o++) {
    for (int64_t j = 0; j < inner; j++) acc[j] = 0.0f;
    for (int64_t t = 0; t < n; t++) {
      int64_t k = rev ? n - 1 - t : t;
      const uint16_t *xr = x + (o * n + k) * inner;
      uint16_t *yr = y + (o * n + k) * inner;
      for (int64_t j = 0; j < inner; j++) {
        float v = dt == MX_FLOAT16 ? mx__f16_to_f32(xr[j]) : mx__bf16_to_f32(xr[j]);
        if (!excl) acc[j] += v;
        yr[j] = dt == MX_FLOAT16 ? mx__f32_to_f16(acc[j]) : mx__f32_to_bf16(acc[j]);
        if (excl) acc[j] += v;
      }
    }
  }
}

static size_t cumsum_workspace(const mx_kernel_call *c) {
  const mx_ktensor *x = &c->t[0];
  if (x->dtype != MX_FLOAT16 && x->dtype != MX_BFLOAT16) return 0;
  /* The inner size depends on the axis value, unknown here: the whole tensor bounds it. */
  return (size_t)mx__ktensor_numel(x) * sizeof(float) + sizeof(float);
}

static mx_status run_CumSum(mx_kernel_call *c) {
  const mx_cumsum_params *p = c->params;
  const mx_ktensor *x = mx__kin(c, 0), *ax = mx__kin(c, 1);
  mx_ktensor *y = mx__kout(c, 0);
  if (y->dtype != x->dtype || mx__ktensor_numel(y) != mx__ktensor_numel(x)) {
    c->why = "CumSum: output differs from the input in dtype or size";
    return MX_ERR_KERNEL;
  }
  if ((ax->dtype != MX_INT32 && ax->dtype != MX_INT64) || mx__ktensor_numel(ax) != 1 || !ax->data) {
    c->why = "CumSum: the axis must be one int32 or int64 value";
    return MX_ERR_KERNEL;
  }
  int64_t axis = mx__kget_i64(ax->data, ax->dtype, 0);
  if (axis < 0) axis += x->rank;
  if (axis < 0 || axis >= x->rank) {
    c->why = "CumSum: axis out of range";
    return MX_ERR_KERNEL;
  }
  int64_t outer, n, inner;
  split(x, (int32_t)axis, &outer, &n, &inner);
  if (outer * n * inner == 0) return MX_OK;
  bool excl = p && p->exclusive, rev = p && p->reverse;
  switch (x->dtype) {
    case MX_FLOAT32: cumsum_f32(x->data, y->data, outer, n, inner, excl, rev); break;
    case MX_FLOAT64: cumsum_f64(x->data, y->data, outer, n, inner, excl, rev); break;
    case MX_INT8: cumsum_i8(x->data, y->data, outer, n, inner, excl, rev); break;
    case MX_UINT8: cumsum_u8(x->data, y->data, outer, n, inner, excl, rev); break;
    case MX_INT16: cumsum_i16(x->data, y->data, outer, n, inner, excl, rev); break;
    case MX_INT32: cumsum_i32(x->data, y->data, outer, n, inner, excl, rev); break;
    case MX_INT64: cumsum_i64(x->data, y->data, outer, n, inner, excl, rev); break;
    case MX_UINT16: cumsum_u16(x->data, y->data, outer, n, inner, excl, rev); break;
    case MX_UINT32: cumsum_u32(x->data, y->data, outer, n, inner, excl, rev); break;
    case MX_UINT64: cumsum_u64(x->data, y->data, outer, n, inner, excl, rev); break;
    case MX_FLOAT16:
    case MX_BFLOAT16:
      if (!c->workspace || c->workspace_size < (size_t)inner * sizeof(float)) {
        c->why = "CumSum: workspace too small";
        return MX_ERR_KERNEL;
      }
      cumsum_half(x->data, y->data, x->dtype, outer, n, inner, excl, rev, c->workspace);
      break;
    default: c->why = "CumSum: dtype not supported"; return MX_ERR_UNSUPPORTED;
  }
  return MX_OK;
}

#define NUMERIC (MX_KDT_FLOATS | MX_KDT_INTS)
const mx_kernel_def mx__kdef_ArgMax = {"ArgMax", NULL, NUMERIC, 0, run_ArgMax, NULL};
const mx_kernel_def mx__kdef_ArgMin = {"ArgMin", NULL, NUMERIC, 0, run_ArgMin, NULL};
const mx_kernel_def mx__kdef_CumSum = {"CumSum", NULL, NUMERIC, 0, run_CumSum, cumsum_workspace};
