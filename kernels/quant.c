/* CPU kernels of the quantization group: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear,
 * MatMulInteger and QLinearMatMul.
 *
 * QuantizeLinear computes y = saturate(round_half_even(x / scale) + zero_point) for integer
 * targets (int4/int2 included: their one-per-byte form holds the clamped value), and for float8 /
 * float4 targets rounds x / scale to the format once (common/float8.h) with the `saturate` rule.
 * DequantizeLinear computes (x - zero_point) * scale. Both do the arithmetic in float32 unless
 * the scale (or the precision attribute) is float64, as the ONNX reference does, and read the
 * scale / zero point per tensor, per axis or per block (graph/ops/quant.c checked the shapes).
 *
 * The integer matrix products accumulate exactly in int32 (the ONNX output type) over
 * broadcast batch dims; QLinearMatMul then scales by a_scale * b_scale / y_scale computed in
 * the scales' own precision, rounds half to even, adds y_zero_point and saturates. */
#include <math.h>
#include <string.h>

#include "common/float8.h"
#include "graph/ops/quant_params.h"
#include "kernels/groups.h"
#include "kernels/kutil.h"

/* Range of an integer quantized type; false for the float targets. */
static bool int_range(mx_dtype dt, int64_t *lo, int64_t *hi) {
  switch (dt) {
    case MX_INT8: *lo = INT8_MIN, *hi = INT8_MAX; return true;
    case MX_UINT8: *lo = 0, *hi = UINT8_MAX; return true;
    case MX_INT16: *lo = INT16_MIN, *hi = INT16_MAX; return true;
    case MX_UINT16: *lo = 0, *hi = UINT16_MAX; return true;
    case MX_INT32: *lo = INT32_MIN, *hi = INT32_MAX; return true;
    case MX_INT4: *lo = -8, *hi = 7; return true;
    case MX_UINT4: *lo = 0, *hi = 15; return true;
    case MX_INT2: *lo = -2, *hi = 1; return true;
    case MX_UINT2: *lo = 0, *hi = 3; return true;
    default: return false;
  }
}

/* Element i of a quantized (or zero-point) buffer as a double: integers exactly, narrow floats
 * decoded. */
static inline double q_value(const void *p, mx_dtype dt, int64_t i) {
  if (mx_dtype_is_narrow_float(dt)) return mx__narrow_to_f32(dt, ((const uint8_t *)p)[i]);
  return (double)mx__kget_i64(p, dt, i);
}

/* Where the scale entry of element i of x is: per tensor, per axis or per block. */
typedef struct qmap {
  int mode;          /* 0 per tensor, 1 per axis, 2 blocked */
  int64_t n, inner;  /* dim of the axis, elements after it */
  int64_t nb, block; /* blocked: blocks along the axis, block size */
} qmap;

static inline int64_t qmap_index(const qmap *m, int64_t i) {
  if (m->mode == 0) return 0;
  int64_t j = (i / m->inner) % m->n;
  if (m->mode == 1) return j;
  int64_t o = i / (m->inner * m->n), k = i % m->inner;
  return (o * m->nb + j / m->block) * m->inner + k;
}

static mx_status qmap_make(mx_kernel_call *c, const mx_quant_params *p, const mx_ktensor *x,
                           const mx_ktensor *s, qmap *m) {
  memset(m, 0, sizeof *m);
  m->n = m->inner = 1;
  int64_t ns = mx__ktensor_numel(s);
  int32_t block = p ? p->block_size : 0;
  if (ns == 1 && block == 0) return MX_OK;
  int32_t axis = p ? p->axis : 1;
  if (axis < 0) axis += x->rank;
  if (axis < 0 || axis >= x->rank) {
    c->why = "quantization axis out of range";
    return MX_ERR_KERNEL;
  }
  m->n = x->dims[axis];
  for (int32_t k = axis + 1; k < x->rank; k++) m->inner *= x->dims[k];
  if (block == 0) {
    if (ns != m->n) {
      c->why = "per-axis scale length differs from the axis dim";
      return MX_ERR_KERNEL;
    }
    m->mode = 1;
    return MX_OK;
  }
  m->mode = 2;
  m->block = block;
  m->nb = (m->n + block - 1) / block;
  if (s->rank != x->rank || s->dims[axis] != m->nb) {
    c->why = "blocked scale shape does not match the input";
    return MX_ERR_KERNEL;
  }
  return MX_OK;
}

/* The arithmetic is float64 when the scale or the precision attribute says so. */
static bool use_f64(const mx_quant_params *p, mx_dtype scale) {
  mx_dtype prec = p && p->precision ? (mx_dtype)p->precision : scale;
  return prec == MX_FLOAT64;
}

/* --- QuantizeLinear ------------------------------------------------------------------------- */

static mx_status run_quantize(mx_kernel_call *c) {
  const mx_quant_params *p = c->params;
  const mx_ktensor *x = mx__kin(c, 0), *s = mx__kin(c, 1);
  const mx_ktensor *zp = c->n_in > 2 && mx__kin(c, 2)->dtype != MX_DTYPE_UNDEFINED ? mx__kin(c, 2) : NULL;
  mx_ktensor *y = mx__kout(c, 0);
  int64_t n = mx__ktensor_numel(x);
  if (mx__ktensor_numel(y) != n || (zp && mx__ktensor_numel(zp) != mx__ktensor_numel(s))) {
    c->why = "QuantizeLinear: output, scale and zero point sizes do not match";
    return MX_ERR_KERNEL;
  }
  qmap m;
  mx_status st = qmap_make(c, p, x, s, &m);
  if (st != MX_OK || n == 0) return st;
  bool f64 = use_f64(p, s->dtype);
  bool saturate = p ? p->saturate != 0 : true;
  int64_t lo = 0, hi = 0;
  bool is_int = int_range(y->dtype, &lo, &hi);
  if (!is_int && !mx_dtype_is_narrow_float(y->dtype)) {
    c->why = "QuantizeLinear: unsupported output dtype";
    return MX_ERR_UNSUPPORTED;
  }
  if (m.mode == 0 && !f64 && x->dtype == MX_FLOAT32 && s->dtype == MX_FLOAT32 &&
      (y->dtype == MX_UINT8 || y->dtype == MX_INT8)) { /* the common case, without per-element dispatch */
    const float *restrict xs = x->data;
    float sv = *(const float *)s->data, zv = zp ? (float)q_value(zp->data, zp->dtype, 0) : 0.0f;
    float flo = (float)lo, fhi = (float)hi;
    for (int64_t i = 0; i < n; i++) {
      float r = rintf(xs[i] / sv) + zv;
      r = !(r == r) ? 0.0f : r < flo ? flo : r > fhi ? fhi : r;
      if (y->dtype == MX_UINT8)
        ((uint8_t *)y->data)[i] = (uint8_t)r;
      else
        ((int8_t *)y->data)[i] = (int8_t)r;
    }
    return MX_OK;
  }
  for (int64_t i = 0; i < n; i++) {
    int64_t k = qmap_index(&m, i);
    double xv = mx__kget_f64(x->data, x->dtype, i), sv = mx__kget_f64(s->data, s->dtype, k);
    double zv = zp ? q_value(zp->data, zp->dtype, k) : 0.0;
    double v = f64 ? xv / sv : (double)((float)xv / (float)sv);
    if (!is_int) {
      ((uint8_t *)y->data)[i] = mx__narrow_from_f64(y->dtype, v + zv, saturate);
      continue;
    }
    double r = rint(v) + zv; /* rint rounds half to even in the default rounding mode */
    int64_t q = !(r == r) ? 0 : r <= (double)lo ? lo : r >= (double)hi ? hi : (int64_t)r;
    mx__kset_i64(y->data, y->dtype, i, q);
  }
  return MX_OK;
}

/* --- DequantizeLinear ----------------------------------------------------------------------- */

static mx_status run_dequantize(mx_kernel_call *c) {
  const mx_quant_params *p = c->params;
  const mx_ktensor *x = mx__kin(c, 0), *s = mx__kin(c, 1);
  const mx_ktensor *zp = c->n_in > 2 && mx__kin(c, 2)->dtype != MX_DTYPE_UNDEFINED ? mx__kin(c, 2) : NULL;
  mx_ktensor *y = mx__kout(c, 0);
  int64_t n = mx__ktensor_numel(x);
  if (mx__ktensor_numel(y) != n || (zp && mx__ktensor_numel(zp) != mx__ktensor_numel(s))) {
    c->why = "DequantizeLinear: output, scale and zero point sizes do not match";
    return MX_ERR_KERNEL;
  }
  if (!mx_dtype_is_float(y->dtype)) {
    c->why = "DequantizeLinear: unsupported output dtype";
    return MX_ERR_UNSUPPORTED;
  }
  qmap m;
  mx_status st = qmap_make(c, p, x, s, &m);
  if (st != MX_OK || n == 0) return st;
  bool f64 = use_f64(p, s->dtype) || y->dtype == MX_FLOAT64;
  if (m.mode == 0 && !f64 && y->dtype == MX_FLOAT32 && s->dtype == MX_FLOAT32 &&
      (x->dtype == MX_UINT8 || x->dtype == MX_INT8)) { /* the common case, without per-element dispatch */
    float sv = *(const float *)s->data, zv = zp ? (float)q_value(zp->data, zp->dtype, 0) : 0.0f;
    float *restrict ys = y->data;
    if (x->dtype == MX_UINT8)
      for (int64_t i = 0; i < n; i++) ys[i] = ((float)((const uint8_t *)x->data)[i] - zv) * sv;
    else
      for (int64_t i = 0; i < n; i++) ys[i] = ((float)((const int8_t *)x->data)[i] - zv) * sv;
    return MX_OK;
  }
  for (int64_t i = 0; i < n; i++) {
    int64_t k = qmap_index(&m, i);
    double d = q_value(x->data, x->dtype, i) - (zp ? q_value(zp->data, zp->dtype, k) : 0.0);
    double sv = mx__kget_f64(s->data, s->dtype, k);
    double v = f64 ? d * sv : (double)((float)d * (float)sv);
    mx__kset_f64(y->data, y->dtype, i, v);
  }
  return MX_OK;
}

/* --- DynamicQuantizeLinear ------------------------------------------------------------------ */

/* uint8 quantization with a scale and zero point that make the range of x (widened to
 * include 0) span 0..255; float32 arithmetic throughout. */
static mx_status run_dynamic(mx_kernel_call *c) {
  const mx_ktensor *x = mx__kin(c, 0);
  mx_ktensor *y = mx__kout(c, 0), *ys = mx__kout(c, 1), *yz = c->n_out > 2 ? mx__kout(c, 2) : NULL;
  int64_t n = mx__ktensor_numel(x);
  if (x->dtype != MX_FLOAT32 || mx__ktensor_numel(y) != n || !ys->data) {
    c->why = "DynamicQuantizeLinear: float32 input and matching outputs expected";
    return MX_ERR_KERNEL;
  }
  const float *xv = x->data;
  float lo = 0.0f, hi = 0.0f;
  for (int64_t i = 0; i < n; i++) {
    if (xv[i] < lo) lo = xv[i];
    if (xv[i] > hi) hi = xv[i];
  }
  float scale = (hi - lo) / 255.0f;
  float zpf = scale != 0.0f ? rintf(0.0f - lo / scale) : 0.0f;
  uint8_t zp = (uint8_t)(zpf < 0.0f ? 0.0f : zpf > 255.0f ? 255.0f : zpf);
  uint8_t *q = y->data;
  for (int64_t i = 0; i < n; i++) {
    float r = scale != 0.0f ? rintf(xv[i] / scale) + (float)zp : (float)zp;
    q[i] = (uint8_t)(!(r == r) || r < 0.0f ? 0.0f : r > 255.0f ? 255.0f : r);
  }
  *(float *)ys->data = scale;
  if (yz && yz->data) *(uint8_t *)yz->data = zp;
  return MX_OK;
}

/* --- integer matrix products ---------------------------------------------------------------- */

/* Batched A[.., M, K] x B[.., K, N] with numpy broadcasting of the batch dims. */
typedef struct mm_plan {
  int64_t M, K, N, batches;
  int32_t ob;                                   /* output batch rank */
  int64_t odims[MX_MAX_RANK];                   /* output batch dims */
  int64_t astr[MX_MAX_RANK], bstr[MX_MAX_RANK]; /* batch strides (elements), 0 when broadcast */
} mm_plan;

static mx_status mm_plan_make(mx_kernel_call *c, const mx_ktensor *a, const mx_ktensor *b,
                              const mx_ktensor *o, mm_plan *p) {
  memset(p, 0, sizeof *p);
  if (a->rank < 1 || b->rank < 1) {
    c->why = "matrix product of a scalar";
    return MX_ERR_KERNEL;
  }
  p->M = a->rank >= 2 ? a->dims[a->rank - 2] : 1;
  p->K = a->dims[a->rank - 1];
  p->N = b->rank >= 2 ? b->dims[b->rank - 1] : 1;
  int64_t kb = b->rank >= 2 ? b->dims[b->rank - 2] : b->dims[0];
  int32_t ab = a->rank > 2 ? a->rank - 2 : 0, bb = b->rank > 2 ? b->rank - 2 : 0;
  p->ob = o->rank - (a->rank >= 2) - (b->rank >= 2);
  if (kb != p->K || p->ob < ab || p->ob < bb || p->ob < 0) {
    c->why = "matrix product: operand shapes do not match the output";
    return MX_ERR_KERNEL;
  }
  int64_t sa = p->M * p->K, sb = p->K * p->N;
  p->batches = 1;
  for (int32_t d = p->ob - 1; d >= 0; d--) {
    p->odims[d] = o->dims[d];
    p->batches *= o->dims[d];
    int32_t da = d - (p->ob - ab), db = d - (p->ob - bb);
    p->astr[d] = da >= 0 && a->dims[da] != 1 ? sa : 0;
    p->bstr[d] = db >= 0 && b->dims[db] != 1 ? sb : 0;
    if (da >= 0) sa *= a->dims[da];
    if (db >= 0) sb *= b->dims[db];
  }
  return MX_OK;
}

/* Element offsets of batch t's A and B matrices. */
static void mm_batch(const mm_plan *p, int64_t t, int64_t *ao, int64_t *bo) {
  *ao = *bo = 0;
  for (int32_t d = p->ob - 1; d >= 0; d--) {
    int64_t i = t % p->odims[d];
    t /= p->odims[d];
    *ao += i * p->astr[d];
    *bo += i * p->bstr[d];
  }
}

/* A zero point (or scale) entry: per tensor when it has one element, else per row / column. */
static inline int64_t vec_at(const mx_ktensor *v, int64_t i) { return mx__ktensor_numel(v) == 1 ? 0 : i; }

/* acc[M x N] (row `m` only) = sum_k (A[m,k] - azp) * (B[k,n] - bzp) for batch offsets ao, bo. */
static void int_row(const mm_plan *p, const mx_ktensor *a, const mx_ktensor *b, const mx_ktensor *azp,
                    const mx_ktensor *bzp, int64_t ao, int64_t bo, int64_t m, int32_t *acc) {
  int32_t za = azp ? (int32_t)mx__kget_i64(azp->data, azp->dtype, vec_at(azp, m)) : 0;
  for (int64_t j = 0; j < p->N; j++) acc[j] = 0;
  bool a_u8 = a->dtype == MX_UINT8, b_u8 = b->dtype == MX_UINT8;
  int32_t zb1 = bzp && mx__ktensor_numel(bzp) == 1 ? (int32_t)mx__kget_i64(bzp->data, bzp->dtype, 0) : 0;
  for (int64_t k = 0; k < p->K; k++) {
    int64_t ai = ao + m * p->K + k;
    int32_t av = (a_u8 ? ((const uint8_t *)a->data)[ai] : ((const int8_t *)a->data)[ai]) - za;
    if (av == 0) continue;
    const void *brow = (const char *)b->data + (size_t)(bo + k * p->N);
    for (int64_t j = 0; j < p->N; j++) {
      int32_t bv = b_u8 ? ((const uint8_t *)brow)[j] : ((const int8_t *)brow)[j];
      int32_t zb = !bzp                          ? 0
                   : mx__ktensor_numel(bzp) == 1 ? zb1
                                                 : (int32_t)mx__kget_i64(bzp->data, bzp->dtype, j);
      acc[j] += av * (bv - zb);
    }
  }
}

static mx_status run_matmulinteger(mx_kernel_call *c) {
  const mx_ktensor *a = mx__kin(c, 0), *b = mx__kin(c, 1);
  const mx_ktensor *azp = c->n_in > 2 && mx__kin(c, 2)->dtype != MX_DTYPE_UNDEFINED ? mx__kin(c, 2) : NULL;
  const mx_ktensor *bzp = c->n_in > 3 && mx__kin(c, 3)->dtype != MX_DTYPE_UNDEFINED ? mx__kin(c, 3) : NULL;
  mx_ktensor *o = mx__kout(c, 0);
  if (o->dtype != MX_INT32) {
    c->why = "MatMulInteger: the output must be int32";
    return MX_ERR_KERNEL;
  }
  mm_plan p;
  mx_status st = mm_plan_make(c, a, b, o, &p);
  if (st != MX_OK) return st;
  int32_t *out = o->data;
  for (int64_t t = 0; t < p.batches; t++) {
    int64_t ao, bo;
    mm_batch(&p, t, &ao, &bo);
    for (int64_t m = 0; m < p.M; m++) int_row(&p, a, b, azp, bzp, ao, bo, m, out + (t * p.M + m) * p.N);
  }
  return MX_OK;
}

/* Rounds a product of scales to the scales' precision, like arithmetic in that type. */
static double in_precision(double v, mx_dtype dt) {
  switch (dt) {
    case MX_FLOAT16: return mx__f16_to_f32(mx__f32_to_f16((float)v));
    case MX_BFLOAT16: return mx__bf16_to_f32(mx__f32_to_bf16((float)v));
    case MX_FLOAT64: return v;
    default: return (float)v;
  }
}

static size_t qlinear_workspace(const mx_kernel_call *c) {
  const mx_ktensor *b = &c->t[3];
  int64_t n = b->rank >= 2 ? b->dims[b->rank - 1] : 1;
  return (size_t)n * sizeof(int32_t);
}

/* Inputs: a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point. */
static mx_status run_qlinearmatmul(mx_kernel_call *c) {
  const mx_ktensor *a = mx__kin(c, 0), *as = mx__kin(c, 1), *azp = mx__kin(c, 2);
  const mx_ktensor *b = mx__kin(c, 3), *bs = mx__kin(c, 4), *bzp = mx__kin(c, 5);
  const mx_ktensor *ys = mx__kin(c, 6), *yzp = mx__kin(c, 7);
  mx_ktensor *o = mx__kout(c, 0);
  int64_t lo = 0, hi = 0;
  if (!int_range(o->dtype, &lo, &hi) || !yzp->data || !ys->data) {
    c->why = "QLinearMatMul: int8/uint8 output with a y_scale and y_zero_point expected";
    return MX_ERR_KERNEL;
  }
  mm_plan p;
  mx_status st = mm_plan_make(c, a, b, o, &p);
  if (st != MX_OK) return st;
  if (c->workspace_size < (size_t)p.N * sizeof(int32_t) || (p.N && !c->workspace)) {
    c->why = "QLinearMatMul: workspace too small";
    return MX_ERR_KERNEL;
  }
  int32_t *acc = c->workspace;
  double ysv = mx__kget_f64(ys->data, ys->dtype, 0);
  double yz = (double)mx__kget_i64(yzp->data, yzp->dtype, 0);
  for (int64_t t = 0; t < p.batches; t++) {
    int64_t ao, bo;
    mm_batch(&p, t, &ao, &bo);
    for (int64_t m = 0; m < p.M; m++) {
      int_row(&p, a, b, azp, bzp, ao, bo, m, acc);
      double asv = mx__kget_f64(as->data, as->dtype, vec_at(as, m));
      for (int64_t j = 0; j < p.N; j++) {
        double bsv = mx__kget_f64(bs->data, bs->dtype, vec_at(bs, j));
        double mult = in_precision(in_precision(asv * bsv, as->dtype) / ysv, as->dtype);
        double r = rint((double)acc[j] * mult) + yz;
        int64_t q = !(r == r) ? 0 : r <= (double)lo ? lo : r >= (double)hi ? hi : (int64_t)r;
        mx__kset_i64(o->data, o->dtype, (t * p.M + m) * p.N + j, q);
      }
    }
  }
  return MX_OK;
}

/* --- definitions ---------------------------------------------------------------------------- */

#define F_KDT (MX_KDT_FLOATS | MX_KDT(MX_INT32))
#define Q_KDT                                                                                     \
  (MX_KDT(MX_INT8) | MX_KDT(MX_UINT8) | MX_KDT(MX_INT16) | MX_KDT(MX_UINT16) | MX_KDT(MX_INT32) | \
   MX_KDT_NARROW)
#define I8_KDT (MX_KDT(MX_INT8) | MX_KDT(MX_UINT8))

static const mx_kernel_def k_quantize = {"QuantizeLinear", NULL, F_KDT, 0, run_quantize, NULL};
static const mx_kernel_def k_dequantize = {"DequantizeLinear", NULL, Q_KDT, 0, run_dequantize, NULL};
static const mx_kernel_def k_dynamic = {
    "DynamicQuantizeLinear", NULL, MX_KDT(MX_FLOAT32), 0, run_dynamic, NULL};
static const mx_kernel_def k_matmulinteger = {"MatMulInteger", NULL, I8_KDT, 0, run_matmulinteger, NULL};
static const mx_kernel_def k_qlinearmatmul = {"QLinearMatMul",  NULL, I8_KDT, 0, run_qlinearmatmul,
                                              qlinear_workspace};

const mx_kernel_def *const mx__kernels_quant[] = {
    &k_quantize, &k_dequantize, &k_dynamic, &k_matmulinteger, &k_qlinearmatmul, NULL,
};
