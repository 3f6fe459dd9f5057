/* CPU kernels of the rarer convolutions, computed in double on the float64 cores of conv.c:
 * ConvInteger and QLinearConv (8-bit products summed exactly: a double holds every int32 sum
 * such a convolution can produce), DeformConv (2-D, bilinear sampling at learned offsets with an
 * optional mask) and Col2Im (any element type: patches scatter-added into the image). */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "graph/ops/conv_params.h"
#include "kernels/conv_impl.h"
#include "kernels/kutil.h"
#include "kernels/linalg_impl.h"

/* Carves consecutive 64-byte-aligned double buffers out of a workspace. */
typedef struct ws_cursor {
  char *at;
} ws_cursor;
static double *ws_take(ws_cursor *c, int64_t elems) {
  double *p = (double *)c->at;
  c->at += mx__kconv_align((size_t)elems * sizeof(double));
  return p;
}

static bool present(const mx_kernel_call *call, uint32_t i) {
  return i < call->n_in && call->t[i].dtype != MX_DTYPE_UNDEFINED;
}

/* Element i of a per-tensor (one element) or per-channel vector. */
static double vec_at(const mx_ktensor *t, int64_t i) {
  return mx__kget_f64(t->data, t->dtype, mx__ktensor_numel(t) == 1 ? 0 : i);
}

/* --- ConvInteger and QLinearConv -------------------------------------------------------------- */

/* The integer convolution's tensors: X and W at these inputs, zero points at those (-1: none). */
typedef struct qconv_io {
  uint32_t x, w;
  int32_t x_zp, w_zp, bias;
} qconv_io;

static const qconv_io conv_integer_io = {0, 1, 2, 3, -1};
static const qconv_io qlinear_io = {0, 3, 2, 5, 8};

static mx_status plan_qconv(const mx_kernel_call *call, const qconv_io *io, mx_kwin *w, const char **why) {
  const mx_conv_params *p = call->params;
  const mx_ktensor *x = &call->t[io->x], *wt = &call->t[io->w], *y = &call->t[call->n_in];
  if (x->rank < 3 || wt->rank != x->rank || y->rank != x->rank) {
    *why = "ConvInteger: X, W and Y must have the same rank of at least 3";
    return MX_ERR_KERNEL;
  }
  if (!mx__kwin_forward(p, x->rank - 2, x->dims + 2, y->dims + 2, wt->dims + 2, w)) {
    *why = "ConvInteger: only 1-D, 2-D and 3-D convolutions are supported";
    return MX_ERR_UNSUPPORTED;
  }
  if (wt->dims[1] * p->group != x->dims[1] || wt->dims[0] % p->group != 0 || y->dims[1] != wt->dims[0]) {
    *why = "ConvInteger: channel counts of X, W, Y and group disagree";
    return MX_ERR_KERNEL;
  }
  return MX_OK;
}

static size_t qconv_workspace(const mx_kernel_call *call, const qconv_io *io) {
  mx_kwin w;
  const char *why;
  if (plan_qconv(call, io, &w, &why) != MX_OK) return 0;
  const mx_conv_params *p = call->params;
  const mx_ktensor *x = &call->t[io->x], *wt = &call->t[io->w];
  int64_t col = x->dims[1] / p->group * w.k_size * w.grid_size;
  return mx__kconv_align((size_t)mx__ktensor_numel(x) * 8) +
         mx__kconv_align((size_t)mx__ktensor_numel(wt) * 8) + mx__kconv_align((size_t)wt->dims[0] * 8) +
         mx__kconv_align((size_t)mx__ktensor_numel(&call->t[call->n_in]) * 8) +
         mx__kconv_align((size_t)col * 8);
}

/* Y (double, before requantization) = conv(X - x_zp, W - w_zp) + B. */
static mx_status qconv_accumulate(mx_kernel_call *call, const qconv_io *io, double **yd_out) {
  mx_kwin w;
  mx_status st = plan_qconv(call, io, &w, &call->why);
  if (st != MX_OK) return st;
  const mx_conv_params *p = call->params;
  const mx_ktensor *x = &call->t[io->x], *wt = &call->t[io->w];
  int64_t nx = mx__ktensor_numel(x), nw = mx__ktensor_numel(wt), m = wt->dims[0];
  int64_t ny = mx__ktensor_numel(&call->t[call->n_in]);
  ws_cursor c = {call->workspace};
  double *xd = ws_take(&c, nx), *wd = ws_take(&c, nw), *bd = ws_take(&c, m), *yd = ws_take(&c, ny);
  double *col = ws_take(&c, 0);
  double xzp = present(call, (uint32_t)io->x_zp) ? vec_at(&call->t[io->x_zp], 0) : 0.0;
  for (int64_t i = 0; i < nx; i++) xd[i] = mx__kget_f64(x->data, x->dtype, i) - xzp;
  int64_t per_m = m ? nw / m : 0;
  bool has_wzp = present(call, (uint32_t)io->w_zp);
  if (has_wzp && mx__ktensor_numel(&call->t[io->w_zp]) != 1 && mx__ktensor_numel(&call->t[io->w_zp]) != m) {
    call->why = "ConvInteger: w_zero_point must have one entry or one per output channel";
    return MX_ERR_KERNEL;
  }
  for (int64_t j = 0; j < m; j++) {
    double zp = has_wzp ? vec_at(&call->t[io->w_zp], j) : 0.0;
    for (int64_t i = 0; i < per_m; i++)
      wd[j * per_m + i] = mx__kget_f64(wt->data, wt->dtype, j * per_m + i) - zp;
  }
  bool has_bias = io->bias >= 0 && present(call, (uint32_t)io->bias);
  for (int64_t j = 0; j < m && has_bias; j++)
    bd[j] = mx__kget_f64(call->t[io->bias].data, call->t[io->bias].dtype, j);
  if (ny)
    mx__kconv_forward_f64(&w, x->dims[0], x->dims[1], m, p->group, xd, wd, has_bias ? bd : NULL, yd, col);
  *yd_out = yd;
  return MX_OK;
}

static size_t conv_integer_workspace(const mx_kernel_call *call) {
  return qconv_workspace(call, &conv_integer_io);
}

static mx_status conv_integer_run(mx_kernel_call *call) {
  double *yd;
  mx_status st = qconv_accumulate(call, &conv_integer_io, &yd);
  if (st != MX_OK) return st;
  mx_ktensor *y = mx__kout(call, 0);
  int64_t ny = mx__ktensor_numel(y);
  for (int64_t i = 0; i < ny; i++) ((int32_t *)y->data)[i] = (int32_t)(int64_t)yd[i];
  return MX_OK;
}

const mx_kernel_def mx__kernel_conv_integer = {.op = "ConvInteger",
                                               .dtypes = MX_KDT(MX_INT8) | MX_KDT(MX_UINT8),
                                               .key = 0,
                                               .run = conv_integer_run,
                                               .workspace = conv_integer_workspace};

static size_t qlinear_conv_workspace(const mx_kernel_call *call) {
  return qconv_workspace(call, &qlinear_io);
}

/* Inputs: x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B. */
static mx_status qlinear_conv_run(mx_kernel_call *call) {
  double *yd;
  mx_status st = qconv_accumulate(call, &qlinear_io, &yd);
  if (st != MX_OK) return st;
  mx_ktensor *y = mx__kout(call, 0);
  int64_t ny = mx__ktensor_numel(y), m = y->dims[1], per = 1;
  for (int32_t i = 2; i < y->rank; i++) per *= y->dims[i];
  float xs = (float)vec_at(&call->t[1], 0), ys = (float)vec_at(&call->t[6], 0);
  double yzp = vec_at(&call->t[7], 0);
  double lo = y->dtype == MX_UINT8 ? 0 : -128, hi = y->dtype == MX_UINT8 ? 255 : 127;
  for (int64_t i = 0; i < ny; i++) {
    int64_t ch = (i / per) % m;
    float scale = xs * (float)vec_at(&call->t[4], ch) / ys;
    double v = nearbyint(yd[i] * (double)scale) + yzp;
    v = v < lo ? lo : v > hi ? hi : v;
    mx__kset_f64(y->data, y->dtype, i, v);
  }
  return MX_OK;
}

const mx_kernel_def mx__kernel_qlinear_conv = {.op = "QLinearConv",
                                               .dtypes = MX_KDT(MX_INT8) | MX_KDT(MX_UINT8),
                                               .key = 0,
                                               .run = qlinear_conv_run,
                                               .workspace = qlinear_conv_workspace};

/* --- DeformConv --------------------------------------------------------------------------------- */

/* Inputs: X [N, C, H, W], W [M, C/group, kH, kW], offset [N, og*kH*kW*2, oH, oW], B [M],
 * mask [N, og*kH*kW, oH, oW]. */
static mx_status plan_deform(const mx_kernel_call *call, mx_kwin *w, const char **why) {
  const mx_conv_params *p = call->params;
  const mx_ktensor *x = &call->t[0], *wt = &call->t[1], *off = &call->t[2], *y = &call->t[call->n_in];
  if (x->rank != 4 || wt->rank != 4 || y->rank != 4 || off->rank != 4) {
    *why = "DeformConv: X, W, offset and Y must be 4-D";
    return MX_ERR_KERNEL;
  }
  mx_conv_params q = *p;
  q.auto_pad = MX_AUTO_PAD_NOTSET;
  mx__kwin_forward(&q, 2, x->dims + 2, y->dims + 2, wt->dims + 2, w);
  int64_t og = p->offset_group;
  if (p->group <= 0 || og <= 0 || wt->dims[1] * p->group != x->dims[1] || wt->dims[0] % p->group != 0 ||
      x->dims[1] % og != 0 || off->dims[1] != og * w->k_size * 2 || off->dims[2] != y->dims[2] ||
      off->dims[3] != y->dims[3]) {
    *why = "DeformConv: channel counts of X, W, offset and group disagree";
    return MX_ERR_KERNEL;
  }
  /* The kernel walks offset, mask and Y by X's batch and W's output channels. */
  if (off->dims[0] != x->dims[0] || y->dims[0] != x->dims[0] || y->dims[1] != wt->dims[0]) {
    *why = "DeformConv: the batch of X, offset and Y or the output channels of W and Y disagree";
    return MX_ERR_KERNEL;
  }
  if (present(call, 3) && mx__ktensor_numel(&call->t[3]) != wt->dims[0]) {
    *why = "DeformConv: B must hold one value per output channel";
    return MX_ERR_KERNEL;
  }
  if (present(call, 4) && mx__ktensor_numel(&call->t[4]) != x->dims[0] * og * w->k_size * w->grid_size) {
    *why = "DeformConv: mask must be [N, offset_group*kH*kW, oH, oW]";
    return MX_ERR_KERNEL;
  }
  return MX_OK;
}

static size_t deform_conv_workspace(const mx_kernel_call *call) {
  mx_kwin w;
  const char *why;
  if (plan_deform(call, &w, &why) != MX_OK) return 0;
  const mx_conv_params *p = call->params;
  int64_t cg = call->t[0].dims[1] / p->group;
  return mx__kconv_align((size_t)mx__ktensor_numel(&call->t[1]) * 8) +
         mx__kconv_align((size_t)mx__ktensor_numel(&call->t[call->n_in]) * 8) +
         mx__kconv_align((size_t)(cg * w.k_size * w.grid_size) * 8);
}

/* Bilinear sample of plane x (h x w, dtype dt) at (py, px); points outside read as zero. */
static double bilinear(const void *x, mx_dtype dt, int64_t base, int64_t h, int64_t w, double py, double px) {
  if (py <= -1.0 || py >= (double)h || px <= -1.0 || px >= (double)w) return 0.0;
  double fy = floor(py), fx = floor(px);
  int64_t y0 = (int64_t)fy, x0 = (int64_t)fx;
  double ly = py - fy, lx = px - fx, v = 0.0;
  for (int dy = 0; dy < 2; dy++)
    for (int dx = 0; dx < 2; dx++) {
      int64_t yy = y0 + dy, xx = x0 + dx;
      if (yy < 0 || yy >= h || xx < 0 || xx >= w) continue;
      double wgt = (dy ? ly : 1.0 - ly) * (dx ? lx : 1.0 - lx);
      v += wgt * mx__kget_f64(x, dt, base + yy * w + xx);
    }
  return v;
}

static mx_status deform_conv_run(mx_kernel_call *call) {
  mx_kwin w;
  mx_status st = plan_deform(call, &w, &call->why);
  if (st != MX_OK) return st;
  const mx_conv_params *p = call->params;
  const mx_ktensor *x = &call->t[0], *wt = &call->t[1], *off = &call->t[2];
  const mx_ktensor *mask = present(call, 4) ? &call->t[4] : NULL, *b = present(call, 3) ? &call->t[3] : NULL;
  mx_ktensor *y = mx__kout(call, 0);
  const int64_t n = x->dims[0], c = x->dims[1], m = wt->dims[0], group = p->group, og = p->offset_group;
  const int64_t cg = c / group, mg = m / group, K = w.k_size, P = w.grid_size, H = w.img[1], W = w.img[2];
  const int64_t kdim = cg * K, c_per_og = c / og;
  int64_t nw = mx__ktensor_numel(wt), ny = mx__ktensor_numel(y);
  ws_cursor cur = {call->workspace};
  double *wd = ws_take(&cur, nw), *yd = ws_take(&cur, ny), *col = ws_take(&cur, kdim * P);
  for (int64_t i = 0; i < nw; i++) wd[i] = mx__kget_f64(wt->data, wt->dtype, i);
  mx__kblas_init();
  for (int64_t in = 0; in < n; in++) {
    for (int64_t g = 0; g < group; g++) {
      for (int64_t cl = 0; cl < cg; cl++) {
        int64_t ch = g * cg + cl, grp = ch / c_per_og;
        int64_t xbase = (in * c + ch) * H * W;
        for (int64_t kh = 0; kh < w.k[1]; kh++)
          for (int64_t kw = 0; kw < w.k[2]; kw++) {
            int64_t kk = kh * w.k[2] + kw;
            double *row = col + (cl * K + kk) * P;
            int64_t obase_h = ((in * og + grp) * K * 2 + 2 * kk) * P, obase_w = obase_h + P;
            int64_t mbase = ((in * og + grp) * K + kk) * P;
            for (int64_t oh = 0; oh < w.grid[1]; oh++)
              for (int64_t ow = 0; ow < w.grid[2]; ow++) {
                int64_t pos = oh * w.grid[2] + ow;
                double py = (double)(oh * w.s[1] - w.pb[1] + kh * w.d[1]) +
                            mx__kget_f64(off->data, off->dtype, obase_h + pos);
                double px = (double)(ow * w.s[2] - w.pb[2] + kw * w.d[2]) +
                            mx__kget_f64(off->data, off->dtype, obase_w + pos);
                double v = bilinear(x->data, x->dtype, xbase, H, W, py, px);
                if (mask) v *= mx__kget_f64(mask->data, mask->dtype, mbase + pos);
                row[pos] = v;
              }
          }
      }
      double *yg = yd + (in * m + g * mg) * P;
      for (int64_t j = 0; j < mg; j++) {
        double bv = b ? mx__kget_f64(b->data, b->dtype, g * mg + j) : 0.0;
        for (int64_t i = 0; i < P; i++) yg[j * P + i] = bv;
      }
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)mg, (blasint)P, (blasint)kdim, 1.0,
                  wd + g * mg * kdim, (blasint)kdim, col, (blasint)P, 1.0, yg, (blasint)P);
    }
  }
  for (int64_t i = 0; i < ny; i++) mx__kset_f64(y->data, y->dtype, i, yd[i]);
  return MX_OK;
}

const mx_kernel_def mx__kernel_deform_conv = {.op = "DeformConv",
                                              .dtypes = MX_KDT_FLOATS,
                                              .key = 0,
                                              .run = deform_conv_run,
                                              .workspace = deform_conv_workspace};

/* --- Col2Im ------------------------------------------------------------------------------------- */

/* Inputs: input [N, C*prod(block), L], image_shape, block_shape; output [N, C, image...]. */
static mx_status plan_col2im(const mx_kernel_call *call, mx_kwin *w, const char **why) {
  const mx_conv_params *p = call->params;
  const mx_ktensor *x = &call->t[0], *img = &call->t[1], *blk = &call->t[2], *y = &call->t[call->n_in];
  int32_t spatial = y->rank - 2;
  if (x->rank != 3 || spatial < 1 || mx__ktensor_numel(img) != spatial || mx__ktensor_numel(blk) != spatial) {
    *why = "Col2Im: input must be 3-D and image_shape/block_shape must have one entry per spatial dim";
    return MX_ERR_KERNEL;
  }
  int64_t k[MX_CONV_MAX_SPATIAL], grid[MX_CONV_MAX_SPATIAL];
  int64_t blocks = 1, ksz = 1;
  for (int32_t i = 0; i < spatial; i++) {
    k[i] = blk->data ? ((const int64_t *)blk->data)[i] : 1;
    int64_t s = p->n_strides ? p->strides[i] : 1, d = p->n_dilations ? p->dilations[i] : 1;
    int64_t pads = p->n_pads ? p->pads[i] + p->pads[spatial + i] : 0;
    grid[i] = (y->dims[2 + i] + pads - d * (k[i] - 1) - 1) / s + 1;
    blocks *= grid[i];
    ksz *= k[i];
  }
  if (!mx__kwin_forward(p, spatial, y->dims + 2, grid, k, w)) {
    *why = "Col2Im: only 1 to 3 spatial dims are supported";
    return MX_ERR_UNSUPPORTED;
  }
  if (blocks != x->dims[2] || ksz * y->dims[1] != x->dims[1]) {
    *why = "Col2Im: input dims disagree with image_shape, block_shape and the attributes";
    return MX_ERR_KERNEL;
  }
  return MX_OK;
}

static size_t col2im_workspace(const mx_kernel_call *call) {
  return mx__kconv_align((size_t)mx__ktensor_numel(&call->t[0]) * 8) +
         mx__kconv_align((size_t)mx__ktensor_numel(&call->t[call->n_in]) * 8);
}

static mx_status col2im_run(mx_kernel_call *call) {
  mx_kwin w;
  mx_status st = plan_col2im(call, &w, &call->why);
  if (st != MX_OK) return st;
  const mx_ktensor *x = &call->t[0];
  mx_ktensor *y = mx__kout(call, 0);
  int64_t nx = mx__ktensor_numel(x), ny = mx__ktensor_numel(y);
  ws_cursor cur = {call->workspace};
  double *xd = ws_take(&cur, nx), *yd = ws_take(&cur, ny);
  for (int64_t i = 0; i < nx; i++) xd[i] = mx__kget_f64(x->data, x->dtype, i);
  memset(yd, 0, (size_t)ny * sizeof *yd);
  const int64_t n = y->dims[0], c = y->dims[1];
  for (int64_t in = 0; in < n; in++)
    mx__kconv_col2im_add_f64(xd + in * c * w.k_size * w.grid_size, c, &w, yd + in * c * w.img_size);
  for (int64_t i = 0; i < ny; i++) mx__kset_f64(y->data, y->dtype, i, yd[i]);
  return MX_OK;
}

const mx_kernel_def mx__kernel_col2im = {
    .op = "Col2Im", .dtypes = MX_KDT_ALL, .key = 0, .run = col2im_run, .workspace = col2im_workspace};
