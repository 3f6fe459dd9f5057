/* CPU kernels of the convolutions group: Conv and ConvTranspose here (float32 through im2col and
 * OpenBLAS sgemm, 1x1 convolutions as a plain GEMM over the image, depthwise groups by a direct
 * loop; float64 the same with dgemm; float16/bfloat16 widened to float32 in the workspace and
 * rounded once), ConvInteger, QLinearConv, DeformConv and Col2Im in conv_misc.c; this file
 * exports the group's array. */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "graph/ops/conv_params.h"
#include "kernels/conv_impl.h"
#include "kernels/groups.h"
#include "kernels/kmath.h"
#include "kernels/kutil.h"
#include "kernels/linalg_impl.h"

#define CT float
#define CT_FN(name) name##_f32
#define CT_GEMM cblas_sgemm
#include "kernels/conv_tmpl.inc"
#undef CT
#undef CT_FN
#undef CT_GEMM

#define CT double
#define CT_FN(name) name##_f64
#define CT_GEMM cblas_dgemm
#include "kernels/conv_tmpl.inc"
#undef CT
#undef CT_FN
#undef CT_GEMM

void mx__kconv_im2col_f64(const double *x, int64_t channels, const mx_kwin *w, double *col) {
  im2col_f64(x, channels, w, col);
}
void mx__kconv_col2im_add_f64(const double *col, int64_t channels, const mx_kwin *w, double *img) {
  col2im_add_f64(col, channels, w, img);
}
void mx__kconv_forward_f64(const mx_kwin *w, int64_t n, int64_t c, int64_t m, int64_t group, const double *x,
                           const double *wt, const double *b, double *y, double *col) {
  mx__kblas_init();
  conv_forward_f64(w, n, c, m, group, x, wt, b, y, col);
}

/* What a Conv or ConvTranspose call computes, from its tensors' dims. */
typedef struct conv_plan {
  mx_kwin w;
  int64_t n, c, m, group;
  int64_t col_elems;  /* im2col / col2im scratch elements */
  const mx_ktensor *b; /* NULL without bias */
} conv_plan;

static mx_status plan_conv(const mx_kernel_call *call, bool transpose, conv_plan *pl, const char **why) {
  const mx_conv_params *p = call->params;
  const mx_ktensor *x = &call->t[0], *wt = &call->t[1], *y = &call->t[call->n_in];
  memset(pl, 0, sizeof *pl);
  if (x->rank < 3 || wt->rank != x->rank || y->rank != x->rank) {
    *why = "Conv: X, W and Y must have the same rank of at least 3";
    return MX_ERR_KERNEL;
  }
  int32_t spatial = x->rank - 2;
  bool ok = transpose ? mx__kwin_transpose(p, spatial, y->dims + 2, x->dims + 2, wt->dims + 2, &pl->w)
                      : mx__kwin_forward(p, spatial, x->dims + 2, y->dims + 2, wt->dims + 2, &pl->w);
  if (!ok) {
    *why = "Conv: only 1-D, 2-D and 3-D convolutions are supported";
    return MX_ERR_UNSUPPORTED;
  }
  pl->n = x->dims[0];
  pl->c = x->dims[1];
  pl->group = p->group;
  pl->m = transpose ? wt->dims[1] * p->group : wt->dims[0];
  int64_t wc = transpose ? wt->dims[0] : wt->dims[1] * p->group;
  if (wc != pl->c || pl->m % p->group != 0 || y->dims[1] != pl->m || y->dims[0] != pl->n) {
    *why = "Conv: channel counts of X, W, Y and group disagree";
    return MX_ERR_KERNEL;
  }
  if (call->n_in > 2 && call->t[2].dtype != MX_DTYPE_UNDEFINED) {
    pl->b = &call->t[2];
    if (mx__ktensor_numel(pl->b) != pl->m) {
      *why = "Conv: bias B must have one entry per output channel";
      return MX_ERR_KERNEL;
    }
  }
  int64_t cg = pl->c / pl->group, mg = pl->m / pl->group;
  if (transpose)
    pl->col_elems = mg * pl->w.k_size * pl->w.grid_size;
  else if (!is_pointwise_f32(&pl->w) && cg != 1)
    pl->col_elems = cg * pl->w.k_size * pl->w.grid_size;
  return MX_OK;
}

/* Workspace: the col scratch, then for 16-bit types float32 copies of X, W, B and Y. */
static size_t conv_workspace_common(const mx_kernel_call *call, bool transpose) {
  conv_plan pl;
  const char *why;
  if (plan_conv(call, transpose, &pl, &why) != MX_OK) return 0;
  mx_dtype dt = call->t[0].dtype;
  size_t es = dt == MX_FLOAT64 ? 8 : 4;
  size_t bytes = mx__kconv_align((size_t)pl.col_elems * es);
  if (dt == MX_FLOAT16 || dt == MX_BFLOAT16) {
    bytes += mx__kconv_align((size_t)mx__ktensor_numel(&call->t[0]) * 4);
    bytes += mx__kconv_align((size_t)mx__ktensor_numel(&call->t[1]) * 4);
    bytes += mx__kconv_align((size_t)pl.m * 4);
    bytes += mx__kconv_align((size_t)mx__ktensor_numel(&call->t[call->n_in]) * 4);
  }
  return bytes;
}

/* The activation fused into a Conv (mx_conv_params.fused_act), applied to n outputs in place. */
static void fused_activation_f32(const mx_conv_params *p, float *y, int64_t n) {
  float a = p->act_alpha, b = p->act_beta;
  switch (p->fused_act) {
  case MX_CONV_ACT_RELU:
    for (int64_t i = 0; i < n; i++) y[i] = y[i] > 0.0f ? y[i] : 0.0f;
    break;
  case MX_CONV_ACT_CLIP:
    for (int64_t i = 0; i < n; i++) y[i] = y[i] < a ? a : (y[i] > b ? b : y[i]);
    break;
  case MX_CONV_ACT_HARD_SIGMOID:
    for (int64_t i = 0; i < n; i++) y[i] = fmaxf(0.0f, fminf(1.0f, a * y[i] + b));
    break;
  case MX_CONV_ACT_HARD_SWISH:
    for (int64_t i = 0; i < n; i++) y[i] = y[i] * fmaxf(0.0f, fminf(1.0f, y[i] / 6.0f + 0.5f));
    break;
  case MX_CONV_ACT_SIGMOID:
    for (int64_t i = 0; i < n; i++) y[i] = 1.0f / (1.0f + expf(-y[i]));
    break;
  case MX_CONV_ACT_SILU:
    for (int64_t i = 0; i < n; i++) y[i] = y[i] / (1.0f + expf(-y[i]));
    break;
  default: break;
  }
}

static void fused_activation_f64(const mx_conv_params *p, double *y, int64_t n) {
  double a = p->act_alpha, b = p->act_beta;
  for (int64_t i = 0; i < n; i++) {
    double v = y[i];
    switch (p->fused_act) {
    case MX_CONV_ACT_RELU: v = v > 0.0 ? v : 0.0; break;
    case MX_CONV_ACT_CLIP: v = v < a ? a : (v > b ? b : v); break;
    case MX_CONV_ACT_HARD_SIGMOID: v = fmax(0.0, fmin(1.0, a * v + b)); break;
    case MX_CONV_ACT_HARD_SWISH: v = v * fmax(0.0, fmin(1.0, v / 6.0 + 0.5)); break;
    case MX_CONV_ACT_SIGMOID: v = 1.0 / (1.0 + exp(-v)); break;
    case MX_CONV_ACT_SILU: v = v / (1.0 + exp(-v)); break;
    default: break;
    }
    y[i] = v;
  }
}

static mx_status conv_run_common(mx_kernel_call *call, bool transpose) {
  conv_plan pl;
  mx_status st = plan_conv(call, transpose, &pl, &call->why);
  if (st != MX_OK) return st;
  const mx_ktensor *x = &call->t[0], *wt = &call->t[1];
  mx_ktensor *y = mx__kout(call, 0);
  int64_t ny = mx__ktensor_numel(y);
  if (ny == 0) return MX_OK;
  const mx_conv_params *cp = call->params;
  bool act = !transpose && cp->fused_act != MX_CONV_ACT_NONE;
  if (wt->dtype != x->dtype || y->dtype != x->dtype || (pl.b && pl.b->dtype != x->dtype)) {
    call->why = "Conv: X, W, B and Y must share one dtype";
    return MX_ERR_KERNEL;
  }
  if (mx__ktensor_numel(x) == 0 || mx__ktensor_numel(wt) == 0) {
    /* No products to sum: Y is the bias. */
    mx__kzero(y->data, (size_t)ny * mx_dtype_size(y->dtype));
    if (!pl.b) return MX_OK;
  }
  mx__kblas_init();
  char *ws = call->workspace;
  size_t col_bytes = mx__kconv_align((size_t)pl.col_elems * (x->dtype == MX_FLOAT64 ? 8 : 4));
  const void *b = pl.b ? pl.b->data : NULL;
  if (x->dtype == MX_FLOAT32) {
    (transpose ? conv_transpose_f32 : conv_forward_f32)(&pl.w, pl.n, pl.c, pl.m, pl.group, x->data, wt->data, b,
                                                          y->data, (float *)ws);
    if (act) fused_activation_f32(cp, y->data, ny);
    return MX_OK;
  }
  if (x->dtype == MX_FLOAT64) {
    (transpose ? conv_transpose_f64 : conv_forward_f64)(&pl.w, pl.n, pl.c, pl.m, pl.group, x->data, wt->data, b,
                                                          y->data, (double *)ws);
    if (act) fused_activation_f64(cp, y->data, ny);
    return MX_OK;
  }
  if (x->dtype != MX_FLOAT16 && x->dtype != MX_BFLOAT16) return MX_ERR_UNSUPPORTED;
  int64_t nx = mx__ktensor_numel(x), nw = mx__ktensor_numel(wt);
  float *xf = (float *)(ws + col_bytes);
  float *wf = (float *)((char *)xf + mx__kconv_align((size_t)nx * 4));
  float *bf = (float *)((char *)wf + mx__kconv_align((size_t)nw * 4));
  float *yf = (float *)((char *)bf + mx__kconv_align((size_t)pl.m * 4));
  mx__khalf_to_f32(x->data, x->dtype, xf, nx);
  mx__khalf_to_f32(wt->data, x->dtype, wf, nw);
  if (pl.b) mx__khalf_to_f32(pl.b->data, x->dtype, bf, pl.m);
  (transpose ? conv_transpose_f32 : conv_forward_f32)(&pl.w, pl.n, pl.c, pl.m, pl.group, xf, wf, pl.b ? bf : NULL,
                                                        yf, (float *)ws);
  if (act) fused_activation_f32(cp, yf, ny);
  mx__kf32_to_half(yf, y->dtype, y->data, ny);
  return MX_OK;
}

static size_t conv_workspace(const mx_kernel_call *call) { return conv_workspace_common(call, false); }
static size_t conv_transpose_workspace(const mx_kernel_call *call) { return conv_workspace_common(call, true); }
static mx_status conv_run(mx_kernel_call *call) { return conv_run_common(call, false); }
static mx_status conv_transpose_run(mx_kernel_call *call) { return conv_run_common(call, true); }

static const mx_kernel_def k_conv = {
    .op = "Conv", .dtypes = MX_KDT_FLOATS, .key = 0, .run = conv_run, .workspace = conv_workspace};
static const mx_kernel_def k_conv_transpose = {.op = "ConvTranspose",
                                               .dtypes = MX_KDT_FLOATS,
                                               .key = 0,
                                               .run = conv_transpose_run,
                                               .workspace = conv_transpose_workspace};

const mx_kernel_def *const mx__kernels_conv[] = {
    &k_conv, &k_conv_transpose, &mx__kernel_conv_integer, &mx__kernel_qlinear_conv, &mx__kernel_deform_conv,
    &mx__kernel_col2im, NULL,
};
