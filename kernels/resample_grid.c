/* CPU kernels of GridSample (N-D: nearest, linear, cubic; zeros, border and reflection
 * padding), AffineGrid (2-D and 3-D) and RoiAlign (avg and max).
 *
 * GridSample computes each grid point's taps (input index per spatial axis, or none for a
 * zero-padded one, and weights) once and applies them to every channel. Coordinates are
 * unnormalized from [-1, 1] by align_corners and kept in float32 like the ONNX definition;
 * nearest rounds half to even on every rank (the upstream node tests expect that for 3-D too).
 * RoiAlign computes each bilinear sample point once and applies it to every channel. */
#include <math.h>
#include <string.h>

#include "graph/ops/resample_params.h"
#include "kernels/kutil.h"
#include "kernels/shape_impl.h"

/* --- GridSample ------------------------------------------------------------------------------- */

#define GS_MAX_SPATIAL (MX_MAX_RANK - 2)

/* Reflects x into [lo, hi] by bouncing off the nearer border until it lands inside. */
static double gs_reflect(double x, double lo, double hi) {
  double range = hi - lo;
  if (range <= 0.0) return lo;
  if (x < lo) {
    double dx = lo - x;
    int64_t n = (int64_t)(dx / range);
    double rem = dx - (double)n * range;
    return n % 2 == 0 ? lo + rem : hi - rem;
  }
  if (x > hi) {
    double dx = x - hi;
    int64_t n = (int64_t)(dx / range);
    double rem = dx - (double)n * range;
    return n % 2 == 0 ? hi - rem : lo + rem;
  }
  return x;
}

/* Input index read for integer position i of an axis of n elements, or -1 for a zero. */
static int64_t gs_pixel(int64_t i, int64_t n, int32_t padding, double lo, double hi) {
  if (padding == MX_GRID_ZEROS) return i >= 0 && i < n ? i : -1;
  if (padding == MX_GRID_BORDER) return i < 0 ? 0 : i >= n ? n - 1 : i;
  int64_t j = (int64_t)gs_reflect((double)i, lo, hi);
  return j < 0 ? 0 : j >= n ? n - 1 : j;
}

static void gs_cubic_coeffs(double t, double *c) {
  const double a = -0.75;
  double x = t + 1.0;
  c[0] = ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a;
  c[1] = ((a + 2.0) * t - (a + 3.0)) * t * t + 1.0;
  x = 1.0 - t;
  c[2] = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  x = 2.0 - t;
  c[3] = ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a;
}

static mx_status grid_sample_run(mx_kernel_call *call) {
  const mx_grid_sample_params *p = call->params;
  const mx_ktensor *x = mx__kin(call, 0), *g = mx__kin(call, 1);
  mx_ktensor *y = mx__kout(call, 0);
  int32_t r = x->rank, ns = r - 2;
  if (r < 3 || ns > GS_MAX_SPATIAL || g->rank != r || g->dims[r - 1] != ns || y->rank != r ||
      g->dims[0] != x->dims[0] || y->dtype != x->dtype) {
    call->why = "GridSample: X, grid and Y shapes disagree";
    return MX_ERR_KERNEL;
  }
  int64_t n_batch = x->dims[0], chans = x->dims[1], in_sp = mx__kspan(x, 2, r),
          out_sp = mx__kspan(g, 1, r - 1);
  int64_t istride[GS_MAX_SPATIAL], s = 1;
  for (int32_t k = ns - 1; k >= 0; k--) {
    istride[k] = s;
    s *= x->dims[k + 2];
  }
  int32_t per_axis = p->mode == MX_RESIZE_NEAREST ? 1 : p->mode == MX_RESIZE_LINEAR ? 2 : 4;
  bool f32 = x->dtype == MX_FLOAT32;
  for (int64_t b = 0; b < n_batch; b++) {
    for (int64_t q = 0; q < out_sp; q++) {
      int64_t tidx[GS_MAX_SPATIAL][4];
      double tw[GS_MAX_SPATIAL][4];
      for (int32_t k = 0; k < ns; k++) {
        /* grid holds (x, y, z...): the last spatial axis first. */
        int32_t axis = ns - 1 - k;
        int64_t n = x->dims[axis + 2];
        double gv = mx__kget_f64(g->data, g->dtype, (b * out_sp + q) * ns + k);
        double lo = p->align_corners ? 0.0 : -0.5, hi = p->align_corners ? (double)n - 1.0 : (double)n - 0.5;
        float u = p->align_corners ? (float)((gv + 1.0) / 2.0 * ((double)n - 1.0))
                                   : (float)(((gv + 1.0) * (double)n - 1.0) / 2.0);
        double v = u;
        if (p->mode == MX_RESIZE_NEAREST) v = nearbyint(v);
        if (v < lo || v > hi) {
          if (p->padding == MX_GRID_BORDER)
            v = v < 0.0 ? 0.0 : v > (double)n - 1.0 ? (double)n - 1.0 : v;
          else if (p->padding == MX_GRID_REFLECTION)
            v = (float)gs_reflect(v, lo, hi);
        }
        if (p->mode == MX_RESIZE_NEAREST) {
          tidx[axis][0] = gs_pixel((int64_t)v, n, p->padding, lo, hi);
          tw[axis][0] = 1.0;
          continue;
        }
        double f = floor(v), t = v - f;
        int64_t i0 = (int64_t)f;
        if (p->mode == MX_RESIZE_LINEAR) {
          tw[axis][0] = 1.0 - t;
          tw[axis][1] = t;
          tidx[axis][0] = gs_pixel(i0, n, p->padding, lo, hi);
          tidx[axis][1] = gs_pixel(i0 + 1, n, p->padding, lo, hi);
        } else {
          gs_cubic_coeffs(t, tw[axis]);
          for (int32_t j = 0; j < 4; j++) tidx[axis][j] = gs_pixel(i0 - 1 + j, n, p->padding, lo, hi);
        }
      }
      for (int64_t c = 0; c < chans; c++) {
        int64_t base = (b * chans + c) * in_sp;
        double acc = 0.0;
        int32_t t[GS_MAX_SPATIAL] = {0};
        for (;;) {
          double w = 1.0;
          int64_t off = base;
          bool zero = false;
          for (int32_t k = 0; k < ns; k++) {
            w *= tw[k][t[k]];
            if (tidx[k][t[k]] < 0)
              zero = true;
            else
              off += tidx[k][t[k]] * istride[k];
          }
          if (!zero && w != 0.0)
            acc += w * (f32 ? (double)((const float *)x->data)[off] : mx__kget_f64(x->data, x->dtype, off));
          int32_t k = ns - 1;
          for (; k >= 0; k--) {
            if (++t[k] < per_axis) break;
            t[k] = 0;
          }
          if (k < 0) break;
        }
        int64_t e = (b * chans + c) * out_sp + q;
        if (f32)
          ((float *)y->data)[e] = (float)acc;
        else
          mx__kset_f64(y->data, y->dtype, e, acc);
      }
    }
  }
  return MX_OK;
}

const mx_kernel_def mx__kernel_grid_sample = {
    .op = "GridSample", .dtypes = MX_KDT_FLOATS, .key = 0, .run = grid_sample_run};

/* --- AffineGrid ------------------------------------------------------------------------------- */

/* Normalized coordinate of index i of an axis of n points. */
static double ag_coord(int64_t i, int64_t n, bool align_corners) {
  if (align_corners) return n > 1 ? -1.0 + 2.0 * (double)i / (double)(n - 1) : -1.0;
  return -1.0 + (2.0 * (double)i + 1.0) / (double)n;
}

static mx_status affine_grid_run(mx_kernel_call *call) {
  const mx_affine_grid_params *p = call->params;
  const mx_ktensor *theta = mx__kin(call, 0);
  mx_ktensor *y = mx__kout(call, 0);
  int32_t sp = y->rank - 2;
  if ((sp != 2 && sp != 3) || theta->rank != 3 || theta->dims[1] != sp || theta->dims[2] != sp + 1 ||
      theta->dims[0] != y->dims[0] || y->dims[y->rank - 1] != sp) {
    call->why = "AffineGrid: theta and the output shape disagree";
    return MX_ERR_KERNEL;
  }
  int64_t n = y->dims[0], d = sp == 3 ? y->dims[1] : 1, h = y->dims[sp == 3 ? 2 : 1],
          w = y->dims[sp == 3 ? 3 : 2];
  bool ac = p->align_corners != 0;
  int64_t e = 0;
  for (int64_t b = 0; b < n; b++) {
    double th[12];
    for (int32_t k = 0; k < sp * (sp + 1); k++)
      th[k] = mx__kget_f64(theta->data, theta->dtype, b * sp * (sp + 1) + k);
    for (int64_t iz = 0; iz < d; iz++)
      for (int64_t iy = 0; iy < h; iy++)
        for (int64_t ix = 0; ix < w; ix++) {
          double src[4] = {ag_coord(ix, w, ac), ag_coord(iy, h, ac), sp == 3 ? ag_coord(iz, d, ac) : 1.0,
                           1.0};
          for (int32_t j = 0; j < sp; j++) {
            const double *row = th + j * (sp + 1);
            double v = row[sp];
            for (int32_t k = 0; k < sp; k++) v += row[k] * src[k];
            mx__kset_f64(y->data, y->dtype, e++, v);
          }
        }
  }
  return MX_OK;
}

const mx_kernel_def mx__kernel_affine_grid = {
    .op = "AffineGrid", .dtypes = MX_KDT_FLOATS, .key = 0, .run = affine_grid_run};

/* --- RoiAlign --------------------------------------------------------------------------------- */

/* One bilinear sample: four input offsets within a channel plane and their weights. */
typedef struct ra_sample {
  int64_t pos[4];
  double w[4];
} ra_sample;

/* The sample at (yy, xx) of a height x width plane; false when it lies outside (weight 0). */
static bool ra_sample_at(double yy, double xx, int64_t height, int64_t width, ra_sample *sm) {
  if (yy < -1.0 || yy > (double)height || xx < -1.0 || xx > (double)width) return false;
  double yc = yy > 0.0 ? yy : 0.0, xc = xx > 0.0 ? xx : 0.0;
  int64_t y_lo = (int64_t)yc, x_lo = (int64_t)xc, y_hi, x_hi;
  if (y_lo >= height - 1) {
    y_hi = y_lo = height - 1;
    yc = (double)y_lo;
  } else {
    y_hi = y_lo + 1;
  }
  if (x_lo >= width - 1) {
    x_hi = x_lo = width - 1;
    xc = (double)x_lo;
  } else {
    x_hi = x_lo + 1;
  }
  double ly = yc - (double)y_lo, lx = xc - (double)x_lo, hy = 1.0 - ly, hx = 1.0 - lx;
  sm->pos[0] = y_lo * width + x_lo;
  sm->pos[1] = y_lo * width + x_hi;
  sm->pos[2] = y_hi * width + x_lo;
  sm->pos[3] = y_hi * width + x_hi;
  sm->w[0] = hy * hx;
  sm->w[1] = hy * lx;
  sm->w[2] = ly * hx;
  sm->w[3] = ly * lx;
  return true;
}

/* One accumulator per channel. */
static size_t roi_align_workspace(const mx_kernel_call *call) {
  const mx_ktensor *x = &call->t[0];
  return x->rank == 4 ? (size_t)x->dims[1] * sizeof(double) : 0;
}

static mx_status roi_align_run(mx_kernel_call *call) {
  const mx_roi_align_params *p = call->params;
  const mx_ktensor *x = mx__kin(call, 0), *rois = mx__kin(call, 1), *bi = mx__kin(call, 2);
  mx_ktensor *y = mx__kout(call, 0);
  if (x->rank != 4 || rois->rank != 2 || rois->dims[1] != 4 || bi->rank != 1 ||
      bi->dims[0] != rois->dims[0] || y->rank != 4 || y->dims[0] != rois->dims[0] ||
      y->dims[2] != p->output_height || y->dims[3] != p->output_width ||
      call->workspace_size < roi_align_workspace(call)) {
    call->why = "RoiAlign: input and output shapes disagree";
    return MX_ERR_KERNEL;
  }
  int64_t n_rois = rois->dims[0], chans = x->dims[1], height = x->dims[2], width = x->dims[3];
  int64_t ph_n = p->output_height, pw_n = p->output_width, plane = height * width;
  double *acc = call->workspace;
  double scale = p->spatial_scale, offset = p->half_pixel ? 0.5 : 0.0;
  bool f32 = x->dtype == MX_FLOAT32;
  for (int64_t n = 0; n < n_rois; n++) {
    int64_t b = mx__kindex_at(bi, n);
    if (b < 0 || b >= x->dims[0]) {
      call->why = "RoiAlign: a batch index is out of range";
      return MX_ERR_KERNEL;
    }
    double rv[4];
    for (int32_t k = 0; k < 4; k++) rv[k] = mx__kget_f64(rois->data, rois->dtype, n * 4 + k);
    double start_w = rv[0] * scale - offset, start_h = rv[1] * scale - offset;
    double roi_w = rv[2] * scale - offset - start_w, roi_h = rv[3] * scale - offset - start_h;
    if (!p->half_pixel) {
      roi_w = roi_w > 1.0 ? roi_w : 1.0;
      roi_h = roi_h > 1.0 ? roi_h : 1.0;
    }
    double bin_h = roi_h / (double)ph_n, bin_w = roi_w / (double)pw_n;
    int64_t gh = p->sampling_ratio > 0 ? p->sampling_ratio : (int64_t)ceil(roi_h / (double)ph_n);
    int64_t gw = p->sampling_ratio > 0 ? p->sampling_ratio : (int64_t)ceil(roi_w / (double)pw_n);
    if (gh < 0) gh = 0;
    if (gw < 0) gw = 0;
    int64_t count = gh * gw > 1 ? gh * gw : 1;
    const unsigned char *base =
        (const unsigned char *)x->data + (size_t)(b * chans * plane) * mx_dtype_size(x->dtype);
    for (int64_t ph = 0; ph < ph_n; ph++)
      for (int64_t pw = 0; pw < pw_n; pw++) {
        bool first = true;
        for (int64_t c = 0; c < chans; c++) acc[c] = 0.0;
        for (int64_t iy = 0; iy < gh; iy++) {
          double yy = start_h + (double)ph * bin_h + ((double)iy + 0.5) * bin_h / (double)gh;
          for (int64_t ix = 0; ix < gw; ix++) {
            double xx = start_w + (double)pw * bin_w + ((double)ix + 0.5) * bin_w / (double)gw;
            ra_sample sm;
            bool inside = ra_sample_at(yy, xx, height, width, &sm);
            for (int64_t c = 0; c < chans; c++) {
              double v[4] = {0.0, 0.0, 0.0, 0.0};
              for (int32_t j = 0; inside && j < 4; j++) {
                int64_t e = c * plane + sm.pos[j];
                v[j] = sm.w[j] * (f32 ? (double)((const float *)base)[e] : mx__kget_f64(base, x->dtype, e));
              }
              if (p->max_mode) {
                double m = fmax(fmax(v[0], v[1]), fmax(v[2], v[3]));
                acc[c] = first ? m : fmax(acc[c], m);
              } else {
                acc[c] += v[0] + v[1] + v[2] + v[3];
              }
            }
            first = false;
          }
        }
        for (int64_t c = 0; c < chans; c++)
          mx__kset_f64(y->data, y->dtype, ((n * chans + c) * ph_n + ph) * pw_n + pw,
                       p->max_mode ? acc[c] : acc[c] / (double)count);
      }
  }
  return MX_OK;
}

const mx_kernel_def mx__kernel_roi_align = {.op = "RoiAlign",
                                            .dtypes = MX_KDT_FLOATS,
                                            .key = 0,
                                            .run = roi_align_run,
                                            .workspace = roi_align_workspace};
