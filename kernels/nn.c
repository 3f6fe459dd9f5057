/* CPU kernels of Softmax, LogSoftmax, LayerNormalization and RMSNormalization (Attention is in
 * nn_attention.c, RotaryEmbedding in nn_rotary.c); this file exports the group's array.
 *
 * All are numerically stable: softmax subtracts the row max before exponentiating, the norms
 * take two passes (mean, then squared deviations). float32 is the fast path (vectorizable exp
 * and lane-split reductions); float16/bfloat16 are widened to float32 per row in the workspace
 * and rounded once on store; float64 computes in double. */
#include <math.h>
#include <string.h>

#include "graph/ops/nn_params.h"
#include "kernels/groups.h"
#include "kernels/kutil.h"
#include "kernels/linalg_impl.h"
#include "kernels/nn_impl.h"

/* --- Softmax / LogSoftmax ----------------------------------------------------------------------- */

/* The input seen as [outer, n, inner] with the softmax over n. */
typedef struct sm_dims {
  int64_t outer, n, inner;
} sm_dims;

static mx_status sm_make_dims(mx_kernel_call *call, sm_dims *d) {
  const mx_softmax_params *p = call->params;
  const mx_ktensor *x = &call->t[0];
  int64_t axis = p->axis < 0 ? p->axis + x->rank : p->axis;
  if (axis < 0 || axis >= x->rank) {
    call->why = "Softmax: axis out of range";
    return MX_ERR_KERNEL;
  }
  if (call->t[call->n_in].dtype != x->dtype) {
    call->why = "Softmax: Y must have X's dtype";
    return MX_ERR_KERNEL;
  }
  d->outer = d->n = d->inner = 1;
  for (int32_t i = 0; i < x->rank; i++) {
    if (i < axis)
      d->outer *= x->dims[i];
    else if (i == axis || p->flatten)
      d->n *= x->dims[i];
    else
      d->inner *= x->dims[i];
  }
  return MX_OK;
}

/* Softmax over a contiguous row (y may alias x). The exp loop is the hot spot of attention and
 * softmax layers, hence a second copy for AVX2/FMA machines (MX_KHOT). */
MX_KHOT static void sm_row_f32(const float *x, float *y, int64_t n, bool want_log) {
  float m = mx__kmax_f32(x, n);
  if (want_log) {
    float a[MX_KLANES] = {0};
    int64_t i = 0;
    for (; i + MX_KLANES <= n; i += MX_KLANES)
      for (int j = 0; j < MX_KLANES; j++) a[j] += mx__kexpf_ftz(x[i + j] - m);
    double s = 0.0;
    for (; i < n; i++) s += mx__kexpf_ftz(x[i] - m);
    for (int j = 0; j < MX_KLANES; j++) s += a[j];
    float shift = m + (float)log(s);
    for (i = 0; i < n; i++) y[i] = x[i] - shift;
    return;
  }
  float inv = (float)(1.0 / mx__kexp_sum_f32(x, y, n, m));
  for (int64_t i = 0; i < n; i++) y[i] *= inv;
}

/* Softmax over n rows of `inner` contiguous columns each (column-wise), with scratch m, s. */
MX_KHOT static void sm_cols_f32(const float *x, float *y, int64_t n, int64_t inner, bool want_log, float *m,
                                float *s) {
  for (int64_t j = 0; j < inner; j++) {
    m[j] = -INFINITY;
    s[j] = 0.0f;
  }
  for (int64_t k = 0; k < n; k++) {
    const float *xr = x + k * inner;
    for (int64_t j = 0; j < inner; j++) {
      int32_t a = mx__kfkey(xr[j]), b = mx__kfkey(m[j]);
      m[j] = mx__kfunkey(a > b ? a : b);
    }
  }
  for (int64_t k = 0; k < n; k++) {
    const float *xr = x + k * inner;
    float *yr = y + k * inner;
    if (want_log) {
      for (int64_t j = 0; j < inner; j++) s[j] += mx__kexpf_ftz(xr[j] - m[j]);
    } else {
      for (int64_t j = 0; j < inner; j++) {
        float e = mx__kexpf_ftz(xr[j] - m[j]);
        yr[j] = e;
        s[j] += e;
      }
    }
  }
  if (want_log) {
    for (int64_t j = 0; j < inner; j++) m[j] += logf(s[j]);
    for (int64_t k = 0; k < n; k++)
      for (int64_t j = 0; j < inner; j++) y[k * inner + j] = x[k * inner + j] - m[j];
  } else {
    for (int64_t j = 0; j < inner; j++) s[j] = 1.0f / s[j];
    for (int64_t k = 0; k < n; k++)
      for (int64_t j = 0; j < inner; j++) y[k * inner + j] *= s[j];
  }
}

static void sm_block_f64(const double *x, double *y, int64_t n, int64_t inner, bool want_log) {
  for (int64_t j = 0; j < inner; j++) {
    double m = -INFINITY, s = 0.0;
    for (int64_t k = 0; k < n; k++) m = x[k * inner + j] > m ? x[k * inner + j] : m;
    for (int64_t k = 0; k < n; k++) {
      double e = exp(x[k * inner + j] - m);
      if (!want_log) y[k * inner + j] = e;
      s += e;
    }
    if (want_log) {
      double shift = m + log(s);
      for (int64_t k = 0; k < n; k++) y[k * inner + j] = x[k * inner + j] - shift;
    } else {
      for (int64_t k = 0; k < n; k++) y[k * inner + j] /= s;
    }
  }
}

static size_t softmax_workspace(const mx_kernel_call *call) {
  const mx_softmax_params *p = call->params;
  const mx_ktensor *x = &call->t[0];
  int64_t axis = p->axis < 0 ? p->axis + x->rank : p->axis;
  if (axis < 0 || axis >= x->rank) return 0;
  int64_t n = 1, inner = 1;
  for (int32_t i = (int32_t)axis; i < x->rank; i++) {
    if (i == axis || p->flatten)
      n *= x->dims[i];
    else
      inner *= x->dims[i];
  }
  size_t block = x->dtype == MX_FLOAT16 || x->dtype == MX_BFLOAT16 ? (size_t)(n * inner) * 4 : 0;
  return mx__kalign64(block) + 2 * mx__kalign64((size_t)inner * 4);
}

static mx_status softmax_run(mx_kernel_call *call) {
  const mx_softmax_params *p = call->params;
  sm_dims d;
  mx_status st = sm_make_dims(call, &d);
  if (st != MX_OK) return st;
  const mx_ktensor *x = &call->t[0];
  mx_ktensor *y = mx__kout(call, 0);
  int64_t block = d.n * d.inner;
  if (block == 0 || d.outer == 0) return MX_OK;
  bool log = p->log != 0;
  if (x->dtype == MX_FLOAT64) {
    for (int64_t o = 0; o < d.outer; o++)
      sm_block_f64((const double *)x->data + o * block, (double *)y->data + o * block, d.n, d.inner, log);
    return MX_OK;
  }
  bool half = x->dtype == MX_FLOAT16 || x->dtype == MX_BFLOAT16;
  if (!half && x->dtype != MX_FLOAT32) return MX_ERR_UNSUPPORTED;
  char *w = call->workspace;
  float *buf = half ? (float *)w : NULL;
  float *m = (float *)(w + mx__kalign64(half ? (size_t)block * 4 : 0));
  float *s = (float *)((char *)m + mx__kalign64((size_t)d.inner * 4));
  for (int64_t o = 0; o < d.outer; o++) {
    const float *xb;
    float *yb;
    if (half) {
      mx__khalf_to_f32((const uint16_t *)x->data + o * block, x->dtype, buf, block);
      xb = yb = buf;
    } else {
      xb = (const float *)x->data + o * block;
      yb = (float *)y->data + o * block;
    }
    if (d.inner == 1)
      sm_row_f32(xb, yb, d.n, log);
    else
      sm_cols_f32(xb, yb, d.n, d.inner, log, m, s);
    if (half) mx__kf32_to_half(buf, y->dtype, (uint16_t *)y->data + o * block, block);
  }
  return MX_OK;
}

static const mx_kernel_def k_softmax = {
    .op = "Softmax", .dtypes = MX_KDT_FLOATS, .key = 0, .run = softmax_run, .workspace = softmax_workspace};
static const mx_kernel_def k_logsoftmax = {.op = "LogSoftmax",
                                           .dtypes = MX_KDT_FLOATS,
                                           .key = 0,
                                           .run = softmax_run,
                                           .workspace = softmax_workspace};

/* --- LayerNormalization / RMSNormalization ------------------------------------------------------ */

/* X seen as [rows, n] with the normalization over n, plus how scale/bias broadcast onto it. */
typedef struct norm_plan {
  int32_t axis;
  int64_t rows, n;
  bool rms; /* RMSNormalization (no mean, no bias) */
  const mx_ktensor *scale, *bias;
  int64_t sc_str[MX_MAX_RANK]; /* scale strides broadcast to X's rank */
  int64_t b_str[MX_MAX_RANK];  /* bias strides broadcast to X's rank */
  bool sc_per_row, b_per_row;  /* the tensor varies along the leading (row) dims */
  bool sc_dense, b_dense;      /* the tensor holds the n normalized elements of a row contiguously
                                   (no broadcast inside the row): rows can be read in place */
} norm_plan;

static mx_status norm_make_plan(mx_kernel_call *call, bool rms, norm_plan *p) {
  const mx_norm_params *prm = call->params;
  const mx_ktensor *x = &call->t[0];
  memset(p, 0, sizeof *p);
  int64_t axis = prm->axis < 0 ? prm->axis + x->rank : prm->axis;
  if (axis < 0 || axis >= x->rank) {
    call->why = "normalization axis out of range";
    return MX_ERR_KERNEL;
  }
  p->axis = (int32_t)axis;
  p->rms = rms;
  p->rows = p->n = 1;
  for (int32_t i = 0; i < x->rank; i++) {
    if (i < axis)
      p->rows *= x->dims[i];
    else
      p->n *= x->dims[i];
  }
  p->scale = &call->t[1];
  p->bias = !rms && call->n_in > 2 && call->t[2].dtype != MX_DTYPE_UNDEFINED ? &call->t[2] : NULL;
  const mx_ktensor *ts[2] = {p->scale, p->bias};
  int64_t *strs[2] = {p->sc_str, p->b_str};
  bool *per_row[2] = {&p->sc_per_row, &p->b_per_row};
  bool *dense[2] = {&p->sc_dense, &p->b_dense};
  for (int k = 0; k < 2; k++) {
    const mx_ktensor *t = ts[k];
    if (!t) continue;
    if (t->rank > x->rank) goto bad;
    for (int32_t i = 0; i < t->rank; i++) {
      int64_t td = t->dims[i], xd = x->dims[x->rank - t->rank + i];
      if (td != xd && td != 1) goto bad;
    }
    mx__kbroadcast_strides(t, x->rank, strs[k]);
    for (int32_t i = 0; i < axis; i++) *per_row[k] |= strs[k][i] != 0;
    /* Dense: over the normalized dims the strides are X's own row-major ones (a size-1 dim of
     * X may have any stride). */
    bool d = true;
    int64_t want = 1;
    for (int32_t i = x->rank - 1; i >= axis && d; i--) {
      d = x->dims[i] == 1 || strs[k][i] == want;
      want *= x->dims[i];
    }
    *dense[k] = d;
  }
  return MX_OK;
bad:
  call->why = "normalization scale or bias does not broadcast to the input";
  return MX_ERR_KERNEL;
}

/* Element offset in t (strides str over X's dims) of the first element that meets row `row`. */
static int64_t norm_row_base(const norm_plan *p, const mx_ktensor *x, const int64_t *str, int64_t row) {
  int64_t base = 0, r = row;
  for (int32_t i = p->axis - 1; i >= 0; i--) {
    base += (r % x->dims[i]) * str[i];
    r /= x->dims[i];
  }
  return base;
}

/* Walks the n elements of t that meet a row (strides str over X's normalized dims, from
 * offset `off`) with an odometer, storing LOAD(off) as element j of the typed buffer. The
 * dtype is dispatched once per call, outside the loop. */
#define NORM_GATHER_LOOP(BUF_T, LOAD)                    \
  do {                                                   \
    int64_t coord[MX_MAX_RANK] = {0};                    \
    for (int64_t j = 0; j < p->n; j++) {                 \
      ((BUF_T *)buf)[j] = (BUF_T)(LOAD);                 \
      for (int32_t i = x->rank - 1; i >= p->axis; i--) { \
        off += str[i];                                   \
        if (++coord[i] < x->dims[i]) break;              \
        off -= str[i] * coord[i];                        \
        coord[i] = 0;                                    \
      }                                                  \
    }                                                    \
  } while (0)

/* Writes the elements of t (strides str over X's dims) that meet row `row` into buf[0..n) as
 * float (or double when dbl). Typed loops for float32 and float64 tensors; the generic
 * accessor for the other dtypes. */
static void norm_gather(const norm_plan *p, const mx_ktensor *x, const mx_ktensor *t, const int64_t *str,
                        int64_t row, void *buf, bool dbl) {
  int64_t off = norm_row_base(p, x, str, row);
  if (t->dtype == MX_FLOAT32 && !dbl)
    NORM_GATHER_LOOP(float, ((const float *)t->data)[off]);
  else if (t->dtype == MX_FLOAT32)
    NORM_GATHER_LOOP(double, ((const float *)t->data)[off]);
  else if (t->dtype == MX_FLOAT64 && dbl)
    NORM_GATHER_LOOP(double, ((const double *)t->data)[off]);
  else if (dbl)
    NORM_GATHER_LOOP(double, mx__kget_f64(t->data, t->dtype, off));
  else
    NORM_GATHER_LOOP(float, mx__kget_f64(t->data, t->dtype, off));
}
#undef NORM_GATHER_LOOP

/* The scale or bias values of row `row` as n floats: in place when t is a dense float32 tensor
 * (no copy at all), else gathered into buf. */
static const float *norm_vec_f32(const norm_plan *p, const mx_ktensor *x, const mx_ktensor *t,
                                 const int64_t *str, bool dense, int64_t row, float *buf) {
  if (dense && t->dtype == MX_FLOAT32) return (const float *)t->data + norm_row_base(p, x, str, row);
  norm_gather(p, x, t, str, row, buf, false);
  return buf;
}
static const double *norm_vec_f64(const norm_plan *p, const mx_ktensor *x, const mx_ktensor *t,
                                  const int64_t *str, bool dense, int64_t row, double *buf) {
  if (dense && t->dtype == MX_FLOAT64) return (const double *)t->data + norm_row_base(p, x, str, row);
  norm_gather(p, x, t, str, row, buf, true);
  return buf;
}

/* Statistics outputs (Mean, InvStdDev) of LayerNormalization, if the node has them. */
static void norm_store_stats(mx_kernel_call *call, int64_t row, double mean, double inv) {
  if (call->n_out > 1 && call->t[call->n_in + 1].data)
    mx__kset_f64(call->t[call->n_in + 1].data, call->t[call->n_in + 1].dtype, row, mean);
  if (call->n_out > 2 && call->t[call->n_in + 2].data)
    mx__kset_f64(call->t[call->n_in + 2].data, call->t[call->n_in + 2].dtype, row, inv);
}

/* The float32 path: X float32/float16/bfloat16, Y any float type, statistics in float32. Hot
 * in every transformer layer, hence the AVX2 copy (same bits: the lanes are explicit). */
MX_KHOT static void norm_run_f32(mx_kernel_call *call, const norm_plan *p, float eps) {
  const mx_ktensor *x = &call->t[0];
  mx_ktensor *y = mx__kout(call, 0);
  int64_t n = p->n;
  char *w = call->workspace;
  float *xbuf = (float *)w;
  float *ybuf = (float *)(w + mx__kalign64((size_t)n * 4));
  float *sws = (float *)((char *)ybuf + mx__kalign64((size_t)n * 4));
  float *bws = (float *)((char *)sws + mx__kalign64((size_t)n * 4));
  /* Row-independent scale/bias are resolved once (in place when dense float32). */
  const float *sbuf = NULL, *bbuf = NULL;
  if (!p->sc_per_row) sbuf = norm_vec_f32(p, x, p->scale, p->sc_str, p->sc_dense, 0, sws);
  if (p->bias && !p->b_per_row) bbuf = norm_vec_f32(p, x, p->bias, p->b_str, p->b_dense, 0, bws);
  for (int64_t r = 0; r < p->rows; r++) {
    const float *xr;
    if (x->dtype == MX_FLOAT32) {
      xr = (const float *)x->data + r * n;
    } else {
      mx__khalf_to_f32((const uint16_t *)x->data + r * n, x->dtype, xbuf, n);
      xr = xbuf;
    }
    float *yr = y->dtype == MX_FLOAT32 ? (float *)y->data + r * n : ybuf;
    if (p->sc_per_row) sbuf = norm_vec_f32(p, x, p->scale, p->sc_str, p->sc_dense, r, sws);
    if (p->bias && p->b_per_row) bbuf = norm_vec_f32(p, x, p->bias, p->b_str, p->b_dense, r, bws);
    double mean = 0.0, inv;
    if (p->rms) {
      float a[MX_KLANES] = {0};
      int64_t i = 0;
      for (; i + MX_KLANES <= n; i += MX_KLANES)
        for (int j = 0; j < MX_KLANES; j++) a[j] += xr[i + j] * xr[i + j];
      double ss = 0.0;
      for (; i < n; i++) ss += (double)xr[i] * xr[i];
      for (int j = 0; j < MX_KLANES; j++) ss += a[j];
      inv = 1.0 / sqrt(ss / (double)n + (double)eps);
      float fi = (float)inv;
      for (i = 0; i < n; i++) yr[i] = xr[i] * fi * sbuf[i];
    } else {
      mean = mx__ksum_f32(xr, n) / (double)n;
      float fm = (float)mean;
      float a[MX_KLANES] = {0};
      int64_t i = 0;
      for (; i + MX_KLANES <= n; i += MX_KLANES)
        for (int j = 0; j < MX_KLANES; j++) {
          float dlt = xr[i + j] - fm;
          a[j] += dlt * dlt;
        }
      double ss = 0.0;
      for (; i < n; i++) ss += (double)(xr[i] - fm) * (xr[i] - fm);
      for (int j = 0; j < MX_KLANES; j++) ss += a[j];
      inv = 1.0 / sqrt(ss / (double)n + (double)eps);
      float fi = (float)inv;
      if (p->bias)
        for (i = 0; i < n; i++) yr[i] = (xr[i] - fm) * fi * sbuf[i] + bbuf[i];
      else
        for (i = 0; i < n; i++) yr[i] = (xr[i] - fm) * fi * sbuf[i];
      norm_store_stats(call, r, mean, inv);
    }
    if (y->dtype == MX_FLOAT16 || y->dtype == MX_BFLOAT16)
      mx__kf32_to_half(ybuf, y->dtype, (uint16_t *)y->data + r * n, n);
    else if (y->dtype == MX_FLOAT64)
      for (int64_t i = 0; i < n; i++) ((double *)y->data)[r * n + i] = ybuf[i];
  }
}

/* The double path: X float64 (any float scale/bias/output types). */
static void norm_run_f64(mx_kernel_call *call, const norm_plan *p, double eps) {
  const mx_ktensor *x = &call->t[0];
  mx_ktensor *y = mx__kout(call, 0);
  int64_t n = p->n;
  char *w = call->workspace;
  double *sws = (double *)w;
  double *bws = (double *)(w + mx__kalign64((size_t)n * 8));
  const double *sbuf = NULL, *bbuf = NULL;
  if (!p->sc_per_row) sbuf = norm_vec_f64(p, x, p->scale, p->sc_str, p->sc_dense, 0, sws);
  if (p->bias && !p->b_per_row) bbuf = norm_vec_f64(p, x, p->bias, p->b_str, p->b_dense, 0, bws);
  for (int64_t r = 0; r < p->rows; r++) {
    const double *xr = (const double *)x->data + r * n;
    if (p->sc_per_row) sbuf = norm_vec_f64(p, x, p->scale, p->sc_str, p->sc_dense, r, sws);
    if (p->bias && p->b_per_row) bbuf = norm_vec_f64(p, x, p->bias, p->b_str, p->b_dense, r, bws);
    double mean = 0.0, ss = 0.0;
    if (!p->rms) {
      for (int64_t i = 0; i < n; i++) mean += xr[i];
      mean /= (double)n;
    }
    for (int64_t i = 0; i < n; i++) ss += (xr[i] - mean) * (xr[i] - mean);
    double inv = 1.0 / sqrt(ss / (double)n + eps);
    for (int64_t i = 0; i < n; i++) {
      double v = (xr[i] - mean) * inv * sbuf[i];
      if (p->bias) v += bbuf[i];
      mx__kset_f64(y->data, y->dtype, r * n + i, v);
    }
    if (!p->rms) norm_store_stats(call, r, mean, inv);
  }
}

static size_t norm_workspace(const mx_kernel_call *call) {
  const mx_ktensor *x = &call->t[0];
  const mx_norm_params *prm = call->params;
  int64_t axis = prm->axis < 0 ? prm->axis + x->rank : prm->axis;
  int64_t n = 1;
  for (int32_t i = axis < 0 ? 0 : (int32_t)axis; i < x->rank; i++) n *= x->dims[i];
  return 4 * mx__kalign64((size_t)n * 8);
}

static mx_status norm_run(mx_kernel_call *call, bool rms) {
  norm_plan p;
  mx_status st = norm_make_plan(call, rms, &p);
  if (st != MX_OK) return st;
  const mx_norm_params *prm = call->params;
  if (p.rows == 0 || p.n == 0) return MX_OK;
  mx_dtype xd = call->t[0].dtype;
  if (xd == MX_FLOAT64)
    norm_run_f64(call, &p, (double)prm->epsilon);
  else if (xd == MX_FLOAT32 || xd == MX_FLOAT16 || xd == MX_BFLOAT16)
    norm_run_f32(call, &p, prm->epsilon);
  else
    return MX_ERR_UNSUPPORTED;
  return MX_OK;
}

static mx_status layernorm_run(mx_kernel_call *call) { return norm_run(call, false); }
static mx_status rmsnorm_run(mx_kernel_call *call) { return norm_run(call, true); }

static const mx_kernel_def k_layernorm = {.op = "LayerNormalization",
                                          .dtypes = MX_KDT_FLOATS,
                                          .key = 0,
                                          .run = layernorm_run,
                                          .workspace = norm_workspace};
static const mx_kernel_def k_rmsnorm = {.op = "RMSNormalization",
                                        .dtypes = MX_KDT_FLOATS,
                                        .key = 0,
                                        .run = rmsnorm_run,
                                        .workspace = norm_workspace};

const mx_kernel_def *const mx__kernels_nn[] = {
    &k_softmax,
    &k_logsoftmax,
    &k_layernorm,
    &k_rmsnorm,
    &mx__kernel_attention_float,
    &mx__kernel_attention_f64,
    &mx__kernel_rotary,
    NULL,
};
