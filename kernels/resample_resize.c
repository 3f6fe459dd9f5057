/* CPU kernels of Resize (opsets 10-19) and Upsample.
 *
 * Resize is separable: every output index of every axis maps to a few input taps with weights
 * (one tap for nearest, two for linear, four for cubic, a stretched filter for antialiased
 * downscaling), computed once per call into the workspace. An output element is then the sum
 * over the product of its axes' taps, computed row by row: the outer axes' taps of a row
 * combine into a few (offset, weight) pairs once, and the last axis runs over its own taps.
 * Axes that keep their size under scale 1 are the identity (one tap). The rules follow the
 * ONNX definition: the coordinate transformation chosen by coordinate_transformation_mode, taps
 * taken as the n nearest input indices with the input edge-extended (a tap at an integer
 * coordinate falls on the right of the pair), exclude_outside renormalizing over the taps
 * inside the input, tf_crop_and_resize answering extrapolation_value outside the input.
 * Nearest copies elements, so integer types stay exact; the other modes accumulate in double. */
#include <math.h>
#include <string.h>

#include "graph/ops/resample_params.h"
#include "kernels/kutil.h"
#include "kernels/shape_impl.h"

/* What one call resizes: per axis the sizes, the scale used by the coordinate transformation
 * and the roi of tf_crop_and_resize. */
typedef struct rs_plan {
  int32_t r;
  int64_t in[MX_MAX_RANK], out[MX_MAX_RANK], taps[MX_MAX_RANK];
  double scale[MX_MAX_RANK], roi_lo[MX_MAX_RANK], roi_hi[MX_MAX_RANK];
  bool resized[MX_MAX_RANK]; /* false: the identity */
} rs_plan;

/* Taps reserved per output index of an axis going from in to out elements. Antialiasing
 * stretches the filter by 1/scale, and scale >= (out - 0.5) / in for every way of giving it. */
static int64_t rs_reserved_taps(const mx_resize_params *p, int64_t in, int64_t out) {
  if (p->mode == MX_RESIZE_NEAREST) return 1;
  if (!p->antialias) return p->mode == MX_RESIZE_LINEAR ? 2 : 4;
  int64_t q = out > 0 ? (2 * in + out - 1) / out : 1;
  return 4 * q + 8;
}

/* Bytes of every axis' taps (indices, weights, outside flags), rounded up to 16. */
static size_t rs_taps_bytes(const mx_kernel_call *call) {
  const mx_resize_params *p = call->params;
  const mx_ktensor *x = &call->t[0], *y = &call->t[call->n_in];
  size_t n = 0;
  for (int32_t d = 0; d < y->rank && d < x->rank; d++) {
    int64_t k = rs_reserved_taps(p, x->dims[d], y->dims[d]);
    n += (size_t)y->dims[d] * ((size_t)k * (sizeof(int64_t) + sizeof(double)) + 1);
  }
  return (n + 15) & ~(size_t)15;
}

/* One combination of the outer axes' taps of an output row: input offset and weight. */
typedef struct rs_combo {
  int64_t off;
  double w;
} rs_combo;

/* Combinations reserved per row: the product of the outer axes' reserved taps. */
static int64_t rs_combo_cap(const mx_kernel_call *call) {
  const mx_resize_params *p = call->params;
  const mx_ktensor *x = &call->t[0], *y = &call->t[call->n_in];
  int64_t n = 1;
  for (int32_t d = 0; d + 1 < y->rank && d < x->rank; d++) {
    n *= rs_reserved_taps(p, x->dims[d], y->dims[d]);
    if (n > ((int64_t)1 << 20)) return (int64_t)1 << 20;
  }
  return n;
}

static size_t rs_workspace(const mx_kernel_call *call) {
  return rs_taps_bytes(call) + (size_t)rs_combo_cap(call) * sizeof(rs_combo) + 64;
}

static bool rs_input_given(const mx_kernel_call *call, int32_t i) {
  return i >= 0 && i < call->n_in && call->t[i].data && mx__ktensor_numel(&call->t[i]) > 0;
}

/* Fills the plan from the inputs; returns NULL or the reason it cannot. */
static const char *rs_plan_make(const mx_kernel_call *call, rs_plan *pl) {
  const mx_resize_params *p = call->params;
  const mx_ktensor *x = &call->t[0], *y = &call->t[call->n_in];
  int32_t r = x->rank;
  if (y->rank != r || y->dtype != x->dtype) return "Resize: output must have the input's rank and dtype";
  memset(pl, 0, sizeof *pl);
  pl->r = r;
  int32_t axes[MX_MAX_RANK], na = p->n_axes ? p->n_axes : r;
  for (int32_t k = 0; k < na; k++)
    if (!mx__knorm_axis(p->n_axes ? p->axes[k] : k, r, &axes[k])) return "Resize: an axis is out of range";
  for (int32_t d = 0; d < r; d++) {
    pl->in[d] = x->dims[d];
    pl->out[d] = y->dims[d];
    pl->scale[d] = 1.0;
    pl->roi_hi[d] = 1.0;
  }
  if (rs_input_given(call, p->sizes_input)) {
    const mx_ktensor *ts = &call->t[p->sizes_input];
    if (ts->dtype != MX_INT64 || mx__ktensor_numel(ts) != na)
      return "Resize: sizes must be int64, one per axis";
    const int64_t *sz = ts->data;
    double common = 0.0;
    for (int32_t k = 0; k < na; k++) {
      double ratio = pl->in[axes[k]] > 0 ? (double)sz[k] / (double)pl->in[axes[k]] : 1.0;
      pl->scale[axes[k]] = ratio;
      if (k == 0 || (p->aspect == MX_ASPECT_NOT_LARGER ? ratio < common : ratio > common)) common = ratio;
    }
    if (p->aspect != MX_ASPECT_STRETCH)
      for (int32_t k = 0; k < na; k++) pl->scale[axes[k]] = common;
  } else if (p->n_attr_scales > 0) {
    if (p->n_attr_scales != na) return "Resize: scales must have one value per axis";
    for (int32_t k = 0; k < na; k++) pl->scale[axes[k]] = p->attr_scales[k];
  } else if (rs_input_given(call, p->scales_input)) {
    const mx_ktensor *ts = &call->t[p->scales_input];
    if (!mx_dtype_is_float(ts->dtype) || mx__ktensor_numel(ts) != na)
      return "Resize: scales must be float, one per axis";
    for (int32_t k = 0; k < na; k++) pl->scale[axes[k]] = mx__kget_f64(ts->data, ts->dtype, k);
  } else {
    return "Resize: one of scales and sizes is required";
  }
  for (int32_t d = 0; d < r; d++)
    if (!(pl->scale[d] > 0.0) && pl->out[d] > 0) return "Resize: scales must be positive";
  if (p->coord == MX_COORD_TF_CROP_AND_RESIZE) {
    if (!rs_input_given(call, p->roi_input)) return "Resize: tf_crop_and_resize needs roi";
    const mx_ktensor *tr = &call->t[p->roi_input];
    if (!mx_dtype_is_float(tr->dtype) || mx__ktensor_numel(tr) != 2 * na)
      return "Resize: roi must have 2 values per axis";
    for (int32_t k = 0; k < na; k++) {
      pl->roi_lo[axes[k]] = mx__kget_f64(tr->data, tr->dtype, k);
      pl->roi_hi[axes[k]] = mx__kget_f64(tr->data, tr->dtype, k + na);
    }
  }
  for (int32_t d = 0; d < r; d++) {
    bool whole_roi = pl->roi_lo[d] == 0.0 && pl->roi_hi[d] == 1.0;
    pl->resized[d] = !(pl->scale[d] == 1.0 && pl->out[d] == pl->in[d] && whole_roi);
    if (pl->out[d] > 0 && pl->in[d] == 0) return "Resize: cannot resize an empty axis to a non-empty one";
  }
  return NULL;
}

/* Input coordinate of output index o (ONNX coordinate_transformation_mode); *outside is set
 * when tf_crop_and_resize lands outside the input. */
static double rs_coord(const mx_resize_params *p, const rs_plan *pl, int32_t d, int64_t o, bool *outside) {
  double s = pl->scale[d], in = (double)pl->in[d], x = (double)o;
  double out_f = s * in; /* the unrounded output length */
  *outside = false;
  switch (p->coord) {
    case MX_COORD_HALF_PIXEL_SYMMETRIC: {
      double adjust = (double)pl->out[d] / out_f, offset = in / 2.0 * (1.0 - adjust);
      return offset + (x + 0.5) / s - 0.5;
    }
    case MX_COORD_PYTORCH_HALF_PIXEL: return pl->out[d] > 1 ? (x + 0.5) / s - 0.5 : 0.0;
    case MX_COORD_ALIGN_CORNERS: return out_f == 1.0 ? 0.0 : x * (in - 1.0) / (out_f - 1.0);
    case MX_COORD_ASYMMETRIC: return x / s;
    case MX_COORD_TF_HALF_PIXEL_FOR_NN: return (x + 0.5) / s;
    case MX_COORD_TF_CROP_AND_RESIZE: {
      double lo = pl->roi_lo[d], hi = pl->roi_hi[d], v;
      if (pl->out[d] > 1)
        v = lo * (in - 1.0) + x * (hi - lo) * (in - 1.0) / (out_f - 1.0);
      else
        v = 0.5 * (lo + hi) * (in - 1.0);
      *outside = v < 0.0 || v > in - 1.0;
      return v;
    }
    default: return (x + 0.5) / s - 0.5;
  }
}

/* Keys' cubic convolution kernel with parameter a. */
static double rs_cubic(double x, double a) {
  x = fabs(x);
  if (x <= 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  if (x < 2.0) return ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a;
  return 0.0;
}

/* Builds the taps of axis d: for each output index, k taps (input index clamped into the
 * input, weight) and whether it lies outside (extrapolation). Returns the taps per index, or
 * -1 when more than `cap` would be needed. */
static int64_t rs_axis_taps(const mx_resize_params *p, const rs_plan *pl, int32_t d, int64_t cap,
                            int64_t *idx, double *w, unsigned char *oob) {
  int64_t in = pl->in[d], out = pl->out[d];
  if (!pl->resized[d]) {
    for (int64_t o = 0; o < out; o++) {
      idx[o] = o;
      w[o] = 1.0;
      oob[o] = 0;
    }
    return 1;
  }
  double s = pl->scale[d], a = p->cubic_coeff_a, sa = s < 1.0 ? s : 1.0;
  /* Taps relative to the left neighbour: first offset i0 and count n (even). */
  int64_t i0, n;
  if (p->mode == MX_RESIZE_NEAREST) {
    i0 = 0;
    n = 1;
  } else if (p->mode == MX_RESIZE_LINEAR) {
    i0 = p->antialias ? (int64_t)floor(-1.0 / sa) + 1 : 0;
    n = 2 - 2 * i0;
  } else {
    i0 = p->antialias ? (int64_t)floor(-2.0 / sa) + 1 : -1;
    n = 2 - 2 * i0;
  }
  if (n > cap) return -1;
  for (int64_t o = 0; o < out; o++) {
    bool outside;
    double x = rs_coord(p, pl, d, o, &outside);
    oob[o] = outside;
    int64_t *ti = idx + o * n;
    double *tw = w + o * n;
    double base_f = floor(x), ratio = x - base_f;
    int64_t base = (int64_t)base_f;
    if (p->mode == MX_RESIZE_NEAREST) {
      int64_t pick = base;
      if (ratio != 0.0) {
        switch (p->nearest) {
          case MX_NEAREST_ROUND_PREFER_CEIL: pick = ratio < 0.5 ? base : base + 1; break;
          case MX_NEAREST_FLOOR: pick = base; break;
          case MX_NEAREST_CEIL: pick = base + 1; break;
          default: pick = ratio <= 0.5 ? base : base + 1; break;
        }
      }
      ti[0] = pick < 0 ? 0 : pick >= in ? in - 1 : pick;
      tw[0] = 1.0;
      continue;
    }
    /* At an integer coordinate the pair is (x - 1, x) with all weight on x. */
    if (ratio == 0.0) {
      base -= 1;
      ratio = 1.0;
    }
    for (int64_t k = 0; k < n; k++) {
      double t = (double)(i0 + k) - ratio;
      if (p->mode == MX_RESIZE_LINEAR) {
        double v = 1.0 - fabs(p->antialias ? t * sa : t);
        tw[k] = v < 0.0 ? 0.0 : v;
      } else {
        tw[k] = rs_cubic(p->antialias ? t * sa : t, a);
      }
    }
    /* The window of n taps stays within the input extended by n/2 edge copies each side. */
    int64_t start = base + i0, m = n / 2;
    if (start < -m) start = -m;
    if (start > in - m) start = in - m;
    double sum = 0.0;
    for (int64_t k = 0; k < n; k++) {
      int64_t j = start + k;
      if (p->exclude_outside && (j < 0 || j >= in)) tw[k] = 0.0;
      sum += tw[k];
      ti[k] = j < 0 ? 0 : j >= in ? in - 1 : j;
    }
    if ((p->antialias || p->exclude_outside) && sum != 0.0)
      for (int64_t k = 0; k < n; k++) tw[k] /= sum;
  }
  return n;
}

static mx_status rs_run(mx_kernel_call *call) {
  const mx_resize_params *p = call->params;
  const mx_ktensor *x = mx__kin(call, 0);
  mx_ktensor *y = mx__kout(call, 0);
  rs_plan pl;
  const char *why = rs_plan_make(call, &pl);
  if (why) {
    call->why = why;
    return MX_ERR_KERNEL;
  }
  int64_t total = mx__ktensor_numel(y);
  if (total == 0) return MX_OK;
  if (call->workspace_size < rs_workspace(call)) {
    call->why = "Resize: workspace too small";
    return MX_ERR_KERNEL;
  }
  int32_t r = pl.r;
  /* Workspace: every axis' indices and weights, then the outside flags. */
  int64_t *idx[MX_MAX_RANK];
  double *wt[MX_MAX_RANK];
  unsigned char *oob[MX_MAX_RANK];
  char *ws = call->workspace;
  size_t used = 0;
  for (int32_t d = 0; d < r; d++) {
    int64_t cap = rs_reserved_taps(p, pl.in[d], pl.out[d]);
    idx[d] = (int64_t *)(ws + used);
    used += (size_t)(pl.out[d] * cap) * sizeof(int64_t);
    wt[d] = (double *)(ws + used);
    used += (size_t)(pl.out[d] * cap) * sizeof(double);
  }
  for (int32_t d = 0; d < r; d++) {
    oob[d] = (unsigned char *)(ws + used);
    used += (size_t)pl.out[d];
    pl.taps[d] = rs_axis_taps(p, &pl, d, rs_reserved_taps(p, pl.in[d], pl.out[d]), idx[d], wt[d], oob[d]);
    if (pl.taps[d] < 0) {
      call->why = "Resize: the antialiasing filter is wider than the workspace";
      return MX_ERR_KERNEL;
    }
  }
  int64_t istride[MX_MAX_RANK], s = 1;
  for (int32_t d = r - 1; d >= 0; d--) {
    istride[d] = s;
    s *= pl.in[d];
  }
  size_t es = mx_dtype_size(x->dtype);
  bool nearest = p->mode == MX_RESIZE_NEAREST, f32 = x->dtype == MX_FLOAT32;
  const unsigned char *src = x->data;
  unsigned char *dst = y->data;
  if (r == 0) {
    memcpy(dst, src, es);
    return MX_OK;
  }
  /* Row by row: the taps of the outer axes combine into a few (offset, weight) pairs per row,
   * then the last axis runs over its own taps. */
  rs_combo *combos = (rs_combo *)(ws + rs_taps_bytes(call));
  int64_t cap = rs_combo_cap(call), last = r - 1, cols = pl.out[last], kl = pl.taps[last];
  const int64_t *li = idx[last];
  const double *lw = wt[last];
  int64_t c[MX_MAX_RANK] = {0};
  for (int64_t row = 0; row < total / cols; row++, dst += (size_t)cols * es) {
    bool outside = false;
    int64_t nc = 1;
    combos[0].off = 0;
    combos[0].w = 1.0;
    for (int32_t d = 0; d < last; d++) {
      outside |= oob[d][c[d]] != 0;
      int64_t k = pl.taps[d];
      if (nc * k > cap) {
        call->why = "Resize: too many taps for the workspace";
        return MX_ERR_KERNEL;
      }
      /* Expand every combination by the k taps of axis d (last tap first, in place). */
      for (int64_t j = nc - 1; j >= 0; j--)
        for (int64_t t = k - 1; t >= 0; t--) {
          rs_combo *to = &combos[j * k + t];
          to->off = combos[j].off + idx[d][c[d] * k + t] * istride[d];
          to->w = combos[j].w * wt[d][c[d] * k + t];
        }
      nc *= k;
    }
    if (outside) {
      for (int64_t o = 0; o < cols; o++) mx__kset_f64(dst, y->dtype, o, p->extrapolation_value);
    } else if (nearest) {
      const unsigned char *srow = src + (size_t)combos[0].off * es;
      const unsigned char *ob = oob[last];
      if (es == 4) {
        for (int64_t o = 0; o < cols; o++)
          if (!ob[o]) memcpy(dst + (size_t)o * 4, srow + (size_t)li[o] * 4, 4);
      } else {
        for (int64_t o = 0; o < cols; o++)
          if (!ob[o]) memcpy(dst + (size_t)o * es, srow + (size_t)li[o] * es, es);
      }
      for (int64_t o = 0; o < cols; o++)
        if (ob[o]) mx__kset_f64(dst, y->dtype, o, p->extrapolation_value);
    } else {
      for (int64_t o = 0; o < cols; o++) {
        if (oob[last][o]) {
          mx__kset_f64(dst, y->dtype, o, p->extrapolation_value);
          continue;
        }
        double acc = 0.0;
        for (int64_t j = 0; j < nc; j++) {
          double a = 0.0;
          for (int64_t t = 0; t < kl; t++) {
            int64_t off = combos[j].off + li[o * kl + t];
            double v = f32 ? (double)((const float *)src)[off] : mx__kget_f64(src, x->dtype, off);
            a += lw[o * kl + t] * v;
          }
          acc += combos[j].w * a;
        }
        if (f32)
          ((float *)dst)[o] = (float)acc;
        else
          mx__kset_f64(dst, y->dtype, o, acc);
      }
    }
    for (int32_t d = last - 1; d >= 0; d--) {
      if (++c[d] < pl.out[d]) break;
      c[d] = 0;
    }
  }
  return MX_OK;
}

const mx_kernel_def mx__kernel_resize = {.op = "Resize",
                                         .dtypes = MX_KDT_FLOATS | MX_KDT_INTS,
                                         .key = 0,
                                         .run = rs_run,
                                         .workspace = rs_workspace};
const mx_kernel_def mx__kernel_upsample = {.op = "Upsample",
                                           .dtypes = MX_KDT_FLOATS | MX_KDT_INTS,
                                           .key = 0,
                                           .run = rs_run,
                                           .workspace = rs_workspace};
