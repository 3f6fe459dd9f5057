/* CPU kernels of the normalizations group: BatchNormalization (inference and training mode),
 * InstanceNormalization and GroupNormalization (one kernel: instance norm is one group per
 * channel), LRN, LpNormalization and MeanVarianceNormalization.
 *
 * Every kernel works on X seen through an nk_buf: float32 and float64 tensors in place,
 * float16/bfloat16 widened once into a float32 copy in the workspace (and the float32 result
 * rounded once on the way back). The loops are small primitives over contiguous runs of
 * elements, written once for float and once for double (NK_PRIMS); statistics accumulate in
 * double (two passes: the mean, then squared deviations) whatever the element type. Per-channel
 * inputs (scale, bias, mean, var) of any float type are read once into double arrays. */
#include <math.h>
#include <string.h>

#include "graph/ops/norm_params.h"
#include "kernels/groups.h"
#include "kernels/kutil.h"
#include "kernels/linalg_impl.h"

/* --- primitives over a contiguous run of n elements, for T = float and T = double ------------- */

/* Lanes of the float sums: independent accumulators vectorize without -ffast-math. */
#define NK_LANES 8

#define NK_PRIMS(SUF, T)                                                                           \
  /* sum of x[0..n) */                                                                             \
  static double nk_sum_##SUF(const T *x, int64_t n) {                                              \
    T a[NK_LANES] = {0};                                                                           \
    int64_t i = 0;                                                                                 \
    for (; i + NK_LANES <= n; i += NK_LANES)                                                       \
      for (int j = 0; j < NK_LANES; j++) a[j] += x[i + j];                                         \
    double s = 0.0;                                                                                \
    for (; i < n; i++) s += x[i];                                                                  \
    for (int j = 0; j < NK_LANES; j++) s += a[j];                                                  \
    return s;                                                                                      \
  }                                                                                                \
  /* sum of (x - mean)^2 over x[0..n) */                                                           \
  static double nk_sqdev_##SUF(const T *x, int64_t n, double mean) {                               \
    T a[NK_LANES] = {0}, m = (T)mean;                                                              \
    int64_t i = 0;                                                                                 \
    for (; i + NK_LANES <= n; i += NK_LANES)                                                       \
      for (int j = 0; j < NK_LANES; j++) a[j] += (x[i + j] - m) * (x[i + j] - m);                  \
    double s = 0.0;                                                                                \
    for (; i < n; i++) s += ((double)x[i] - mean) * ((double)x[i] - mean);                         \
    for (int j = 0; j < NK_LANES; j++) s += a[j];                                                  \
    return s;                                                                                      \
  }                                                                                                \
  /* y = x * a + b */                                                                              \
  static void nk_affine_##SUF(const T *x, T *y, int64_t n, double a, double b) {                   \
    T ta = (T)a, tb = (T)b;                                                                        \
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * ta + tb;                                         \
  }                                                                                                \
  /* y[i] = x[i] * a[i] + b[i] (b may be NULL: no shift) */                                        \
  static void nk_affine_vec_##SUF(const T *x, T *y, int64_t n, const double *a, const double *b) { \
    if (b)                                                                                         \
      for (int64_t i = 0; i < n; i++) y[i] = (T)(x[i] * a[i] + b[i]);                              \
    else                                                                                           \
      for (int64_t i = 0; i < n; i++) y[i] = (T)(x[i] * a[i]);                                     \
  }                                                                                                \
  /* acc[i] += f(x[i]) with f chosen by `what`: 0 x, 1 |x|, 2 x^2, 3 (x - m[i])^2 */               \
  static void nk_accum_##SUF(const T *x, int64_t n, int what, const double *m, double *acc) {      \
    switch (what) {                                                                                \
      case 0:                                                                                      \
        for (int64_t i = 0; i < n; i++) acc[i] += x[i];                                            \
        break;                                                                                     \
      case 1:                                                                                      \
        for (int64_t i = 0; i < n; i++) acc[i] += fabs((double)x[i]);                              \
        break;                                                                                     \
      case 2:                                                                                      \
        for (int64_t i = 0; i < n; i++) acc[i] += (double)x[i] * x[i];                             \
        break;                                                                                     \
      default:                                                                                     \
        for (int64_t i = 0; i < n; i++) acc[i] += (x[i] - m[i]) * (x[i] - m[i]);                   \
        break;                                                                                     \
    }                                                                                              \
  }

NK_PRIMS(f32, float)
NK_PRIMS(f64, double)
#undef NK_PRIMS

/* --- X and Y as float or double ------------------------------------------------------------------ */

/* X and Y of a kernel as float (float32/float16/bfloat16) or double (float64) elements. */
typedef struct nk_buf {
  bool dbl;
  const void *x;
  void *y;
  float *half_y; /* 16-bit Y: the float32 result, rounded into Y by nk_close; else NULL */
  char *rest;    /* workspace after the 16-bit conversion buffers (64-byte aligned) */
} nk_buf;

static bool nk_is_half(mx_dtype dt) { return dt == MX_FLOAT16 || dt == MX_BFLOAT16; }

/* Workspace bytes of the 16-bit conversion buffers of X (and Y, same shape). */
static size_t nk_half_ws(const mx_ktensor *x) {
  return nk_is_half(x->dtype) ? 2 * mx__kalign64((size_t)mx__ktensor_numel(x) * 4) : 0;
}

static mx_status nk_open(mx_kernel_call *call, const char *op, nk_buf *b) {
  const mx_ktensor *x = &call->t[0];
  mx_ktensor *y = mx__kout(call, 0);
  memset(b, 0, sizeof *b);
  if (y->dtype != x->dtype) {
    call->why = op;
    return MX_ERR_KERNEL;
  }
  b->dbl = x->dtype == MX_FLOAT64;
  b->x = x->data;
  b->y = y->data;
  b->rest = call->workspace;
  if (nk_is_half(x->dtype)) {
    int64_t n = mx__ktensor_numel(x);
    float *xf = (float *)call->workspace;
    b->half_y = (float *)((char *)call->workspace + mx__kalign64((size_t)n * 4));
    mx__khalf_to_f32((const uint16_t *)x->data, x->dtype, xf, n);
    b->x = xf;
    b->y = b->half_y;
    b->rest = (char *)call->workspace + nk_half_ws(x);
  } else if (x->dtype != MX_FLOAT32 && x->dtype != MX_FLOAT64) {
    return MX_ERR_UNSUPPORTED;
  }
  return MX_OK;
}

static void nk_close(mx_kernel_call *call, const nk_buf *b) {
  mx_ktensor *y = mx__kout(call, 0);
  if (b->half_y) mx__kf32_to_half(b->half_y, y->dtype, (uint16_t *)y->data, mx__ktensor_numel(y));
}

/* Dispatchers: the primitive on the run of n elements starting at element off. */
static double nk_sum(const nk_buf *b, int64_t off, int64_t n) {
  return b->dbl ? nk_sum_f64((const double *)b->x + off, n) : nk_sum_f32((const float *)b->x + off, n);
}
static double nk_sqdev(const nk_buf *b, int64_t off, int64_t n, double mean) {
  return b->dbl ? nk_sqdev_f64((const double *)b->x + off, n, mean)
                : nk_sqdev_f32((const float *)b->x + off, n, mean);
}
static void nk_affine(const nk_buf *b, int64_t off, int64_t n, double a, double s) {
  if (b->dbl)
    nk_affine_f64((const double *)b->x + off, (double *)b->y + off, n, a, s);
  else
    nk_affine_f32((const float *)b->x + off, (float *)b->y + off, n, a, s);
}
static void nk_affine_vec(const nk_buf *b, int64_t off, int64_t n, const double *a, const double *s) {
  if (b->dbl)
    nk_affine_vec_f64((const double *)b->x + off, (double *)b->y + off, n, a, s);
  else
    nk_affine_vec_f32((const float *)b->x + off, (float *)b->y + off, n, a, s);
}
static void nk_accum(const nk_buf *b, int64_t off, int64_t n, int what, const double *m, double *acc) {
  if (b->dbl)
    nk_accum_f64((const double *)b->x + off, n, what, m, acc);
  else
    nk_accum_f32((const float *)b->x + off, n, what, m, acc);
}

/* Reads n elements of a float tensor of any float type into dst. */
static void nk_load(const mx_ktensor *t, double *dst, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] = mx__kget_f64(t->data, t->dtype, i);
}

/* X as [N, C, inner]. */
static void nk_nci(const mx_ktensor *x, int64_t *n, int64_t *c, int64_t *inner) {
  *n = x->rank > 0 ? x->dims[0] : 1;
  *c = x->rank > 1 ? x->dims[1] : 1;
  *inner = 1;
  for (int32_t i = 2; i < x->rank; i++) *inner *= x->dims[i];
}

/* --- BatchNormalization ---------------------------------------------------------------------------- */

/* Values per statistics tensor: C, or C * inner with spatial 0. */
static int64_t bn_count(const mx_kernel_call *call) {
  const mx_batchnorm_params *p = call->params;
  int64_t n, c, inner;
  nk_nci(&call->t[0], &n, &c, &inner);
  return p->spatial ? c : c * inner;
}

static size_t batchnorm_workspace(const mx_kernel_call *call) {
  return nk_half_ws(&call->t[0]) + 6 * mx__kalign64((size_t)bn_count(call) * 8);
}

static mx_status batchnorm_run(mx_kernel_call *call) {
  const mx_batchnorm_params *p = call->params;
  const mx_ktensor *x = &call->t[0];
  int64_t n, c, inner, cnt = bn_count(call);
  nk_nci(x, &n, &c, &inner);
  if (x->rank < 2) {
    call->why = "BatchNormalization: X must have rank >= 2";
    return MX_ERR_KERNEL;
  }
  for (uint32_t i = 1; i < 5; i++)
    if (mx__ktensor_numel(&call->t[i]) != cnt) {
      call->why = "BatchNormalization: scale, B, mean and var must have one value per channel";
      return MX_ERR_KERNEL;
    }
  if (mx__ktensor_numel(x) == 0) return MX_OK;
  nk_buf b;
  mx_status st = nk_open(call, "BatchNormalization: Y must have X's dtype", &b);
  if (st != MX_OK) return st;
  size_t vec = mx__kalign64((size_t)cnt * 8);
  double *sc = (double *)b.rest, *bias = (double *)(b.rest + vec), *mean = (double *)(b.rest + 2 * vec);
  double *var = (double *)(b.rest + 3 * vec), *a = (double *)(b.rest + 4 * vec),
         *s = (double *)(b.rest + 5 * vec);
  nk_load(&call->t[1], sc, cnt);
  nk_load(&call->t[2], bias, cnt);
  nk_load(&call->t[3], mean, cnt);
  nk_load(&call->t[4], var, cnt);
  /* Statistics outputs: 1 running_mean, 2 running_var, 3 saved_mean, 4 saved_var (3 and 4
   * before opset 14 only). In inference mode (is_test before opset 7) they pass the given
   * statistics through. */
  mx_ktensor *stat_out[5] = {0};
  for (uint32_t i = 1; i < call->n_out && i < 5; i++)
    if (mx__kout(call, i)->data) {
      stat_out[i] = mx__kout(call, i);
      if (mx__ktensor_numel(stat_out[i]) != cnt) {
        call->why = "BatchNormalization: a statistics output must have one value per channel";
        return MX_ERR_KERNEL;
      }
    }
  for (int64_t ch = 0; ch < cnt; ch++) {
    double rm = mean[ch], rv = var[ch];
    if (p->training_mode) {
      /* The batch's own statistics (population variance over N and the spatial dims)
       * normalize Y; the running ones are blended with the given ones by momentum. */
      double count = (double)(n * inner), mom = (double)p->momentum, sum = 0.0, ss = 0.0;
      for (int64_t k = 0; k < n; k++) sum += nk_sum(&b, (k * c + ch) * inner, inner);
      double bm = sum / count;
      for (int64_t k = 0; k < n; k++) ss += nk_sqdev(&b, (k * c + ch) * inner, inner, bm);
      double bv = ss / count;
      rm = mean[ch] * mom + bm * (1.0 - mom);
      rv = var[ch] * mom + bv * (1.0 - mom);
      mean[ch] = bm;
      var[ch] = bv;
    }
    double stat[5] = {0.0, rm, rv, mean[ch], var[ch]};
    for (int i = 1; i < 5; i++)
      if (stat_out[i]) mx__kset_f64(stat_out[i]->data, stat_out[i]->dtype, ch, stat[i]);
  }
  for (int64_t i = 0; i < cnt; i++) {
    a[i] = sc[i] / sqrt(var[i] + (double)p->epsilon);
    s[i] = bias[i] - mean[i] * a[i];
  }
  for (int64_t k = 0; k < n; k++)
    for (int64_t ch = 0; ch < c; ch++) {
      int64_t off = (k * c + ch) * inner;
      if (p->spatial)
        nk_affine(&b, off, inner, a[ch], s[ch]);
      else
        nk_affine_vec(&b, off, inner, a + ch * inner, s + ch * inner);
    }
  nk_close(call, &b);
  return MX_OK;
}

/* --- InstanceNormalization / GroupNormalization ------------------------------------------------------ */

/* Values of scale and bias: one per group (GroupNormalization opset 18) or per channel. */
static int64_t gn_affine_count(const mx_kernel_call *call) {
  const mx_groupnorm_params *p = call->params;
  int64_t n, c, inner;
  nk_nci(&call->t[0], &n, &c, &inner);
  return p->num_groups && p->per_group_affine ? p->num_groups : c;
}

static size_t groupnorm_workspace(const mx_kernel_call *call) {
  return nk_half_ws(&call->t[0]) + 2 * mx__kalign64((size_t)gn_affine_count(call) * 8);
}

static mx_status groupnorm_run(mx_kernel_call *call) {
  const mx_groupnorm_params *p = call->params;
  const mx_ktensor *x = &call->t[0];
  int64_t n, c, inner, cnt = gn_affine_count(call);
  nk_nci(x, &n, &c, &inner);
  int64_t groups = p->num_groups ? p->num_groups : c;
  if (x->rank < 2 || (groups > 0 && c % groups != 0)) {
    call->why = "GroupNormalization: X must be (N x C x ...) with num_groups dividing C";
    return MX_ERR_KERNEL;
  }
  if (mx__ktensor_numel(&call->t[1]) != cnt || mx__ktensor_numel(&call->t[2]) != cnt) {
    call->why =
        "Instance/GroupNormalization: scale and bias must have one value per channel (per group in opset 18)";
    return MX_ERR_KERNEL;
  }
  if (mx__ktensor_numel(x) == 0) return MX_OK;
  nk_buf b;
  mx_status st = nk_open(call, "Instance/GroupNormalization: Y must have X's dtype", &b);
  if (st != MX_OK) return st;
  double *sc = (double *)b.rest, *bias = (double *)(b.rest + mx__kalign64((size_t)cnt * 8));
  nk_load(&call->t[1], sc, cnt);
  nk_load(&call->t[2], bias, cnt);
  int64_t per = c / groups, len = per * inner;
  for (int64_t k = 0; k < n; k++)
    for (int64_t g = 0; g < groups; g++) {
      int64_t off = (k * c + g * per) * inner;
      double mean = nk_sum(&b, off, len) / (double)len;
      double inv = 1.0 / sqrt(nk_sqdev(&b, off, len, mean) / (double)len + (double)p->epsilon);
      for (int64_t j = 0; j < per; j++) {
        int64_t idx = cnt == c ? g * per + j : g;
        double a = sc[idx] * inv;
        nk_affine(&b, off + j * inner, inner, a, bias[idx] - mean * a);
      }
    }
  nk_close(call, &b);
  return MX_OK;
}

/* --- LRN ------------------------------------------------------------------------------------------------ */

static size_t lrn_workspace(const mx_kernel_call *call) {
  int64_t n, c, inner;
  nk_nci(&call->t[0], &n, &c, &inner);
  return nk_half_ws(&call->t[0]) + mx__kalign64((size_t)inner * 8);
}

static mx_status lrn_run(mx_kernel_call *call) {
  const mx_lrn_params *p = call->params;
  const mx_ktensor *x = &call->t[0];
  int64_t n, c, inner;
  nk_nci(x, &n, &c, &inner);
  if (x->rank < 2) {
    call->why = "LRN: X must have rank >= 2";
    return MX_ERR_KERNEL;
  }
  if (mx__ktensor_numel(x) == 0) return MX_OK;
  nk_buf b;
  mx_status st = nk_open(call, "LRN: Y must have X's dtype", &b);
  if (st != MX_OK) return st;
  double *sq = (double *)b.rest;
  /* The window of channel ch: [ch - floor((size-1)/2), ch + ceil((size-1)/2)], clipped to C. */
  int64_t before = (p->size - 1) / 2, after = p->size - 1 - before;
  double k = (double)p->alpha / (double)p->size, bias = p->bias, beta = p->beta;
  for (int64_t s = 0; s < n; s++)
    for (int64_t ch = 0; ch < c; ch++) {
      memset(sq, 0, (size_t)inner * sizeof *sq);
      int64_t lo = ch - before < 0 ? 0 : ch - before, hi = ch + after >= c ? c - 1 : ch + after;
      for (int64_t w = lo; w <= hi; w++) nk_accum(&b, (s * c + w) * inner, inner, 2, NULL, sq);
      if (beta == 0.75) {
        /* The default beta: t^-0.75 = 1 / (sqrt(t) * sqrt(sqrt(t))), cheaper than pow. */
        for (int64_t i = 0; i < inner; i++) {
          double r = sqrt(bias + k * sq[i]);
          sq[i] = 1.0 / (r * sqrt(r));
        }
      } else {
        for (int64_t i = 0; i < inner; i++) sq[i] = pow(bias + k * sq[i], -beta);
      }
      nk_affine_vec(&b, (s * c + ch) * inner, inner, sq, NULL);
    }
  nk_close(call, &b);
  return MX_OK;
}

/* --- LpNormalization ------------------------------------------------------------------------------------ */

/* X as [outer, len, inner] around the axis. */
static bool lp_dims(const mx_kernel_call *call, int64_t *outer, int64_t *len, int64_t *inner) {
  const mx_lpnorm_params *p = call->params;
  const mx_ktensor *x = &call->t[0];
  int64_t axis = p->axis < 0 ? p->axis + x->rank : p->axis;
  if (axis < 0 || axis >= x->rank) return false;
  *outer = *len = *inner = 1;
  for (int32_t i = 0; i < x->rank; i++) {
    if (i < axis)
      *outer *= x->dims[i];
    else if (i == axis)
      *len = x->dims[i];
    else
      *inner *= x->dims[i];
  }
  return true;
}

static size_t lpnorm_workspace(const mx_kernel_call *call) {
  int64_t outer, len, inner;
  if (!lp_dims(call, &outer, &len, &inner)) return 0;
  return nk_half_ws(&call->t[0]) + mx__kalign64((size_t)inner * 8);
}

static mx_status lpnorm_run(mx_kernel_call *call) {
  const mx_lpnorm_params *p = call->params;
  int64_t outer, len, inner;
  if (!lp_dims(call, &outer, &len, &inner)) {
    call->why = "LpNormalization: axis out of range";
    return MX_ERR_KERNEL;
  }
  if (mx__ktensor_numel(&call->t[0]) == 0) return MX_OK;
  nk_buf b;
  mx_status st = nk_open(call, "LpNormalization: Y must have X's dtype", &b);
  if (st != MX_OK) return st;
  double *acc = (double *)b.rest;
  for (int64_t o = 0; o < outer; o++) {
    int64_t base = o * len * inner;
    /* Norms of the `inner` columns, accumulated row by row so the reads stay contiguous. */
    memset(acc, 0, (size_t)inner * sizeof *acc);
    for (int64_t k = 0; k < len; k++) nk_accum(&b, base + k * inner, inner, p->p == 1 ? 1 : 2, NULL, acc);
    /* y = x / norm; a zero norm (an all-zero column) gives zeros, as ONNX's definition says,
     * not the NaNs of 0/0. */
    for (int64_t j = 0; j < inner; j++) {
      double norm = p->p == 1 ? acc[j] : sqrt(acc[j]);
      acc[j] = norm == 0.0 ? 0.0 : 1.0 / norm;
    }
    for (int64_t k = 0; k < len; k++) nk_affine_vec(&b, base + k * inner, inner, acc, NULL);
  }
  nk_close(call, &b);
  return MX_OK;
}

/* --- MeanVarianceNormalization ---------------------------------------------------------------------- */

/* The statistics groups of MVN: one per combination of the kept (not reduced) coordinates. */
typedef struct mvn_plan {
  int32_t rank;
  int64_t dims[MX_MAX_RANK];
  int64_t gstride[MX_MAX_RANK]; /* stride of each dim in group space (0 for reduced dims) */
  int64_t groups;               /* product of the kept dims */
  int64_t per_group;            /* product of the reduced dims */
} mvn_plan;

static bool mvn_make_plan(const mx_kernel_call *call, mvn_plan *pl) {
  const mx_mvn_params *p = call->params;
  const mx_ktensor *x = &call->t[0];
  uint32_t reduced = 0;
  for (int32_t k = 0; k < p->n_axes; k++) {
    int64_t a = p->axes[k] < 0 ? p->axes[k] + x->rank : p->axes[k];
    if (a < 0 || a >= x->rank) return false;
    reduced |= 1u << a;
  }
  pl->rank = x->rank;
  pl->groups = pl->per_group = 1;
  for (int32_t i = x->rank - 1; i >= 0; i--) {
    pl->dims[i] = x->dims[i];
    if (reduced & (1u << i)) {
      pl->gstride[i] = 0;
      pl->per_group *= x->dims[i];
    } else {
      pl->gstride[i] = pl->groups;
      pl->groups *= x->dims[i];
    }
  }
  return true;
}

static size_t mvn_workspace(const mx_kernel_call *call) {
  mvn_plan pl;
  if (!mvn_make_plan(call, &pl)) return 0;
  return nk_half_ws(&call->t[0]) + 3 * mx__kalign64((size_t)pl.groups * 8);
}

/* Walks X in rows of its last dim; for each row calls `what` (0: sums into acc, 3: squared
 * deviations from mean into acc, -1: y = x * a + s) with the row's group offset. */
static void mvn_pass(const nk_buf *b, const mvn_plan *pl, int what, const double *mean, double *acc,
                     const double *a, const double *s) {
  int32_t last = pl->rank - 1;
  int64_t row = pl->rank > 0 ? pl->dims[last] : 1;
  int64_t rows = row > 0 ? (pl->groups * pl->per_group) / row : 0;
  bool last_kept = pl->rank > 0 && pl->gstride[last] != 0;
  int64_t coord[MX_MAX_RANK] = {0};
  int64_t g = 0;
  for (int64_t r = 0; r < rows; r++) {
    int64_t off = r * row;
    if (last_kept) {
      /* The row's elements belong to consecutive groups g, g+1, ... */
      if (what >= 0)
        nk_accum(b, off, row, what, mean ? mean + g : NULL, acc + g);
      else
        nk_affine_vec(b, off, row, a + g, s + g);
    } else if (what == 0) {
      acc[g] += nk_sum(b, off, row);
    } else if (what == 3) {
      acc[g] += nk_sqdev(b, off, row, mean[g]);
    } else {
      nk_affine(b, off, row, a[g], s[g]);
    }
    for (int32_t i = last - 1; i >= 0; i--) {
      g += pl->gstride[i];
      if (++coord[i] < pl->dims[i]) break;
      g -= pl->gstride[i] * coord[i];
      coord[i] = 0;
    }
  }
}

static mx_status mvn_run(mx_kernel_call *call) {
  mvn_plan pl;
  if (!mvn_make_plan(call, &pl)) {
    call->why = "MeanVarianceNormalization: axes out of range";
    return MX_ERR_KERNEL;
  }
  if (mx__ktensor_numel(&call->t[0]) == 0) return MX_OK;
  nk_buf b;
  mx_status st = nk_open(call, "MeanVarianceNormalization: Y must have X's dtype", &b);
  if (st != MX_OK) return st;
  size_t vec = mx__kalign64((size_t)pl.groups * 8);
  double *mean = (double *)b.rest, *a = (double *)(b.rest + vec), *s = (double *)(b.rest + 2 * vec);
  memset(mean, 0, (size_t)pl.groups * 8);
  memset(a, 0, (size_t)pl.groups * 8);
  mvn_pass(&b, &pl, 0, NULL, mean, NULL, NULL);
  for (int64_t g = 0; g < pl.groups; g++) mean[g] /= (double)pl.per_group;
  mvn_pass(&b, &pl, 3, mean, a, NULL, NULL);
  /* y = (x - mean) / (sqrt(variance) + 1e-9), the epsilon ONNX's definition fixes. */
  for (int64_t g = 0; g < pl.groups; g++) {
    a[g] = 1.0 / (sqrt(a[g] / (double)pl.per_group) + 1e-9);
    s[g] = -mean[g] * a[g];
  }
  mvn_pass(&b, &pl, -1, NULL, NULL, a, s);
  nk_close(call, &b);
  return MX_OK;
}

/* --- the group ------------------------------------------------------------------------------------------ */

static const mx_kernel_def k_batchnorm = {.op = "BatchNormalization",
                                          .dtypes = MX_KDT_FLOATS,
                                          .key = 0,
                                          .run = batchnorm_run,
                                          .workspace = batchnorm_workspace};
static const mx_kernel_def k_instancenorm = {.op = "InstanceNormalization",
                                             .dtypes = MX_KDT_FLOATS,
                                             .key = 0,
                                             .run = groupnorm_run,
                                             .workspace = groupnorm_workspace};
static const mx_kernel_def k_groupnorm = {.op = "GroupNormalization",
                                          .dtypes = MX_KDT_FLOATS,
                                          .key = 0,
                                          .run = groupnorm_run,
                                          .workspace = groupnorm_workspace};
static const mx_kernel_def k_lrn = {
    .op = "LRN", .dtypes = MX_KDT_FLOATS, .key = 0, .run = lrn_run, .workspace = lrn_workspace};
static const mx_kernel_def k_lpnorm = {.op = "LpNormalization",
                                       .dtypes = MX_KDT_FLOATS,
                                       .key = 0,
                                       .run = lpnorm_run,
                                       .workspace = lpnorm_workspace};
static const mx_kernel_def k_mvn = {.op = "MeanVarianceNormalization",
                                    .dtypes = MX_KDT_FLOATS,
                                    .key = 0,
                                    .run = mvn_run,
                                    .workspace = mvn_workspace};

const mx_kernel_def *const mx__kernels_norm[] = {
    &k_batchnorm, &k_instancenorm, &k_groupnorm, &k_lrn, &k_lpnorm, &k_mvn, NULL,
};
