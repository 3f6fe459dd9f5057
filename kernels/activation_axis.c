/* CPU kernels of the activation group's ops that work along an axis or on matrices: Hardmax
 * (one-hot of the first maximum; before opset 13 over each row of the 2-D view), CumProd
 * (running products, optionally exclusive and/or reversed), Det (LU decomposition with partial
 * pivoting, in double). */
#include <math.h>
#include <string.h>

#include "graph/ops/activation_params.h"
#include "kernels/activation_impl.h"
#include "kernels/elementwise_impl.h"
#include "kernels/kutil.h"

static mx_status fail(mx_kernel_call *c, mx_status st, const char *why) {
  c->why = why;
  return st;
}

/* outer / n / inner element counts around dims [lo, hi) of t. */
static void split_dims(const mx_ktensor *t, int32_t lo, int32_t hi, int64_t *outer, int64_t *n,
                       int64_t *inner) {
  *outer = *n = *inner = 1;
  for (int32_t k = 0; k < t->rank; k++) *(k < lo ? outer : k < hi ? n : inner) *= t->dims[k];
}

/* --- Hardmax ------------------------------------------------------------------------------ */

static mx_status run_Hardmax(mx_kernel_call *c) {
  const mx_hardmax_params *p = c->params;
  const mx_ktensor *x = mx__kin(c, 0);
  mx_ktensor *y = mx__kout(c, 0);
  if (!p) return fail(c, MX_ERR_KERNEL, "Hardmax: params missing");
  if (y->dtype != x->dtype || mx__ktensor_numel(y) != mx__ktensor_numel(x))
    return fail(c, MX_ERR_KERNEL, "Hardmax: output differs from the input in dtype or size");
  if (!(MX_KDT(x->dtype) & MX_KDT_FLOATS)) return fail(c, MX_ERR_UNSUPPORTED, "Hardmax: dtype not supported");
  int32_t r = x->rank, axis = p->axis < 0 ? p->axis + r : p->axis;
  if (axis < 0 || axis > r || (axis == r && !p->coerce_2d))
    return fail(c, MX_ERR_KERNEL, "Hardmax: axis out of range");
  int64_t outer, n, inner;
  split_dims(x, axis, p->coerce_2d ? r : axis + 1, &outer, &n, &inner);
  int64_t total = outer * n * inner;
  if (total == 0) return MX_OK;
  mx__kzero(y->data, (size_t)total * mx_dtype_size(y->dtype)); /* all-zero bits are 0.0 */
  for (int64_t o = 0; o < outer; o++) {
    for (int64_t j = 0; j < inner; j++) {
      int64_t base = o * n * inner + j, best = 0;
      double bv = mx__kget_f64(x->data, x->dtype, base);
      /* The first maximum; a NaN counts as the maximum, like numpy's argmax. */
      for (int64_t k = 1; k < n && bv == bv; k++) {
        double v = mx__kget_f64(x->data, x->dtype, base + k * inner);
        if (v > bv || v != v) bv = v, best = k;
      }
      mx__kset_f64(y->data, y->dtype, base + best * inner, 1.0);
    }
  }
  return MX_OK;
}
const mx_kernel_def mx__kdef_Hardmax = {"Hardmax", NULL, MX_KDT_FLOATS, 0, run_Hardmax, NULL};

/* --- CumProd ------------------------------------------------------------------------------ */

/* Running products along the axis for a native type T, multiplying in U (unsigned for
 * integers: wraps like numpy). Output rows are visited in scan order; each is the previous
 * output row times the current (inclusive) or previous (exclusive) input row. */
#define CUMPROD_KERNEL(NAME, T, U)                                                                           \
  static void NAME(const void *px, void *py, int64_t outer, int64_t n, int64_t inner, bool excl, bool rev) { \
    const T *x = px;                                                                                         \
    T *y = py;                                                                                               \
    for (int64_t o = 0; o < outer; o++) {                                                                    \
      const T *xo = x + o * n * inner;                                                                       \
      T *yo = y + o * n * inner;                                                                             \
      for (int64_t t = 0; t < n; t++) {                                                                      \
        int64_t k = rev ? n - 1 - t : t, prev = rev ? k + 1 : k - 1;                                         \
        T *row = yo + k * inner;                                                                             \
        if (t == 0) {                                                                                        \
          for (int64_t j = 0; j < inner; j++) row[j] = excl ? (T)1 : xo[k * inner + j];                      \
          continue;                                                                                          \
        }                                                                                                    \
        const T *before = yo + prev * inner, *mul = xo + (excl ? prev : k) * inner;                          \
        for (int64_t j = 0; j < inner; j++) row[j] = (T)((U)before[j] * (U)mul[j]);                          \
      }                                                                                                      \
    }                                                                                                        \
  }
CUMPROD_KERNEL(cumprod_f32, float, float)
CUMPROD_KERNEL(cumprod_f64, double, double)
CUMPROD_KERNEL(cumprod_i32, int32_t, uint32_t)
CUMPROD_KERNEL(cumprod_u32, uint32_t, uint32_t)
CUMPROD_KERNEL(cumprod_i64, int64_t, uint64_t)
CUMPROD_KERNEL(cumprod_u64, uint64_t, uint64_t)

/* 16-bit floats: running products in a float32 row (acc, inner entries), one rounding each. */
static void cumprod_half(const uint16_t *x, uint16_t *y, mx_dtype dt, int64_t outer, int64_t n, int64_t inner,
                         bool excl, bool rev, float *acc) {
  for (int64_t o = 0; o < outer; o++) {
    for (int64_t j = 0; j < inner; j++) acc[j] = 1.0f;
    for (int64_t t = 0; t < n; t++) {
      int64_t k = rev ? n - 1 - t : t;
      const uint16_t *xr = x + (o * n + k) * inner;
      uint16_t *yr = y + (o * n + k) * inner;
      for (int64_t j = 0; j < inner; j++) {
        float v = dt == MX_FLOAT16 ? mx__f16_to_f32(xr[j]) : mx__bf16_to_f32(xr[j]);
        if (!excl) acc[j] *= v;
        yr[j] = dt == MX_FLOAT16 ? mx__f32_to_f16(acc[j]) : mx__f32_to_bf16(acc[j]);
        if (excl) acc[j] *= v;
      }
    }
  }
}

static size_t cumprod_workspace(const mx_kernel_call *c) {
  const mx_ktensor *x = &c->t[0];
  if (!mx__ew_is_half(x->dtype)) return 0;
  /* The inner size depends on the axis value, unknown here: the whole tensor bounds it. */
  return (size_t)mx__ktensor_numel(x) * sizeof(float) + sizeof(float);
}

static mx_status run_CumProd(mx_kernel_call *c) {
  const mx_cumprod_params *p = c->params;
  const mx_ktensor *x = mx__kin(c, 0), *ax = mx__kin(c, 1);
  mx_ktensor *y = mx__kout(c, 0);
  if (y->dtype != x->dtype || mx__ktensor_numel(y) != mx__ktensor_numel(x))
    return fail(c, MX_ERR_KERNEL, "CumProd: output differs from the input in dtype or size");
  if ((ax->dtype != MX_INT32 && ax->dtype != MX_INT64) || mx__ktensor_numel(ax) != 1 || !ax->data)
    return fail(c, MX_ERR_KERNEL, "CumProd: the axis must be one int32 or int64 value");
  int64_t axis = mx__kget_i64(ax->data, ax->dtype, 0);
  if (axis < 0) axis += x->rank;
  if (axis < 0 || axis >= x->rank) return fail(c, MX_ERR_KERNEL, "CumProd: axis out of range");
  int64_t outer, n, inner;
  split_dims(x, (int32_t)axis, (int32_t)axis + 1, &outer, &n, &inner);
  if (outer * n * inner == 0) return MX_OK;
  bool excl = p && p->exclusive, rev = p && p->reverse;
  void (*fn)(const void *, void *, int64_t, int64_t, int64_t, bool, bool) = NULL;
  switch (x->dtype) {
    case MX_FLOAT32: fn = cumprod_f32; break;
    case MX_FLOAT64: fn = cumprod_f64; break;
    case MX_INT32: fn = cumprod_i32; break;
    case MX_UINT32: fn = cumprod_u32; break;
    case MX_INT64: fn = cumprod_i64; break;
    case MX_UINT64: fn = cumprod_u64; break;
    case MX_FLOAT16:
    case MX_BFLOAT16:
      if (!c->workspace || c->workspace_size < (size_t)inner * sizeof(float))
        return fail(c, MX_ERR_KERNEL, "CumProd: workspace too small");
      cumprod_half(x->data, y->data, x->dtype, outer, n, inner, excl, rev, c->workspace);
      return MX_OK;
    default: return fail(c, MX_ERR_UNSUPPORTED, "CumProd: dtype not supported");
  }
  fn(x->data, y->data, outer, n, inner, excl, rev);
  return MX_OK;
}
const mx_kernel_def mx__kdef_CumProd = {
    "CumProd",
    NULL,
    MX_KDT_FLOATS | MX_KDT(MX_INT32) | MX_KDT(MX_INT64) | MX_KDT(MX_UINT32) | MX_KDT(MX_UINT64),
    0,
    run_CumProd,
    cumprod_workspace};

/* --- Det ---------------------------------------------------------------------------------- */

/* Determinant of the m x m matrix in a (row-major, overwritten): Gaussian elimination with
 * partial pivoting; each row swap flips the sign. */
static double det_lu(double *a, int64_t m) {
  double det = 1.0;
  for (int64_t k = 0; k < m; k++) {
    int64_t piv = k;
    for (int64_t i = k + 1; i < m; i++)
      if (fabs(a[i * m + k]) > fabs(a[piv * m + k])) piv = i;
    if (a[piv * m + k] == 0.0) return 0.0;
    if (piv != k) {
      for (int64_t j = 0; j < m; j++) {
        double t = a[k * m + j];
        a[k * m + j] = a[piv * m + j];
        a[piv * m + j] = t;
      }
      det = -det;
    }
    double d = a[k * m + k];
    det *= d;
    for (int64_t i = k + 1; i < m; i++) {
      double f = a[i * m + k] / d;
      if (f == 0.0) continue;
      for (int64_t j = k + 1; j < m; j++) a[i * m + j] -= f * a[k * m + j];
    }
  }
  return det;
}

static size_t det_workspace(const mx_kernel_call *c) {
  const mx_ktensor *x = &c->t[0];
  if (x->rank < 2) return 0;
  int64_t m = x->dims[x->rank - 1];
  return (size_t)(m * m) * sizeof(double);
}

static mx_status run_Det(mx_kernel_call *c) {
  const mx_ktensor *x = mx__kin(c, 0);
  mx_ktensor *y = mx__kout(c, 0);
  if (!(MX_KDT(x->dtype) & MX_KDT_FLOATS) || y->dtype != x->dtype)
    return fail(c, MX_ERR_UNSUPPORTED, "Det: dtype not supported");
  if (x->rank < 2 || x->dims[x->rank - 1] != x->dims[x->rank - 2])
    return fail(c, MX_ERR_KERNEL, "Det: the input is not a batch of square matrices");
  int64_t m = x->dims[x->rank - 1], mm = m * m;
  int64_t batch = mx__ktensor_numel(y);
  if (mm > 0 && batch * mm != mx__ktensor_numel(x))
    return fail(c, MX_ERR_KERNEL, "Det: output size does not match");
  double *a = c->workspace;
  if (mm > 0 && (!a || c->workspace_size < (size_t)mm * sizeof(double)))
    return fail(c, MX_ERR_KERNEL, "Det: workspace too small");
  for (int64_t b = 0; b < batch; b++) {
    for (int64_t i = 0; i < mm; i++) a[i] = mx__kget_f64(x->data, x->dtype, b * mm + i);
    mx__kset_f64(y->data, y->dtype, b, det_lu(a, m)); /* m = 0: the empty product, 1 */
  }
  return MX_OK;
}
const mx_kernel_def mx__kdef_Det = {"Det", NULL, MX_KDT_FLOATS, 0, run_Det, det_workspace};
