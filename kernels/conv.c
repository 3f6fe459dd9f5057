/* CPU kernels of the convolutions group: Conv and ConvTranspose here (float32 Conv through the
 * per-shape cores of conv_fast.c, on the intra-op threads; float64 through im2col and dgemm,
 * 1x1 convolutions as a plain GEMM over the image, depthwise groups by a direct loop;
 * ConvTranspose through sgemm/dgemm and col2im; float16/bfloat16 widened to float32 in the
 * workspace and rounded once), ConvInteger, QLinearConv, DeformConv and Col2Im in conv_misc.c;
 * this file exports the group's array. A Conv may carry a fourth input, a residual of Y's shape
 * added before the fused activation (graph/passes/fuse_residual.c). */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "graph/ops/conv_params.h"
#include "kernels/conv_impl.h"
#include "kernels/conv_winograd.h"
#include "kernels/groups.h"
#include "kernels/kmath.h"
#include "kernels/kutil.h"
#include "kernels/linalg_impl.h"
#include "kernels/prepack.h"
#include "kernels/threads.h"

#define CT          float
#define CT_FN(name) name##_f32
#define CT_GEMM     cblas_sgemm
#include "kernels/conv_tmpl.inc"
#undef CT
#undef CT_FN
#undef CT_GEMM

#define CT          double
#define CT_FN(name) name##_f64
#define CT_GEMM     cblas_dgemm
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
  int64_t col_elems;   /* im2col / col2im scratch elements (float64, ConvTranspose) */
  size_t fast_floats;  /* scratch of the float32 Conv cores (every thread's slot) */
  const mx_ktensor *b; /* NULL without bias */
  const mx_ktensor *z; /* residual added before the activation, NULL without */
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
  if (!transpose && call->n_in > 3 && call->t[3].dtype != MX_DTYPE_UNDEFINED) {
    pl->z = &call->t[3];
    bool same = pl->z->rank == y->rank && pl->z->dtype == x->dtype;
    for (int32_t i = 0; same && i < y->rank; i++) same = pl->z->dims[i] == y->dims[i];
    if (!same) {
      *why = "Conv: the residual input must have Y's shape and dtype";
      return MX_ERR_KERNEL;
    }
  }
  int64_t cg = pl->c / pl->group, mg = pl->m / pl->group;
  if (!transpose && x->dtype != MX_FLOAT64) {
    int32_t slots = mx__kthreads();
    pl->fast_floats =
        (size_t)slots * mx__kconv_f32_slot_floats(&pl->w, pl->n, pl->c, pl->m, pl->group, slots);
    /* a 3x3 Conv the Winograd core takes may need more (its transforms' blocks) */
    size_t wino = mx__kconv_wino_chosen(&pl->w, pl->n, pl->c, pl->m, pl->group)
                      ? mx__kconv_wino_ws_floats(&pl->w, pl->n, pl->c, pl->m, pl->group, slots)
                      : 0;
    if (wino > pl->fast_floats) pl->fast_floats = wino;
  } else if (transpose)
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
  size_t bytes = mx__kconv_align((size_t)pl.col_elems * es + pl.fast_floats * 4);
  if (dt == MX_FLOAT16 || dt == MX_BFLOAT16) {
    bytes += mx__kconv_align((size_t)mx__ktensor_numel(&call->t[0]) * 4);
    bytes += mx__kconv_align((size_t)mx__ktensor_numel(&call->t[1]) * 4);
    bytes += mx__kconv_align((size_t)pl.m * 4);
    bytes += mx__kconv_align((size_t)mx__ktensor_numel(&call->t[call->n_in]) * 4);
  }
  return bytes;
}

/* A float32 Conv through the cores of conv_fast.c, with the col scratch of the workspace. */
static mx_status conv_f32(mx_kernel_call *call, const conv_plan *pl, const float *x, const float *wt,
                          const float *b, const float *z, float *y) {
  const mx_conv_params *cp = call->params;
  mx_kconv_f32 j = {.w = &pl->w,
                    .n = pl->n,
                    .c = pl->c,
                    .m = pl->m,
                    .group = pl->group,
                    .x = x,
                    .wt = wt,
                    .b = b,
                    .z = z,
                    .y = y,
                    .act = cp->fused_act,
                    .alpha = cp->act_alpha,
                    .beta = cp->act_beta};
  /* stride-1 3x3 shapes where it pays: Winograd F(4x4, 3x3), else (workspace too small) below */
  if (mx__kconv_wino_chosen(&pl->w, pl->n, pl->c, pl->m, pl->group) &&
      mx__kconv_wino_run(&j, mx__kconv_wino_prepacked(call, wt), call->workspace, pl->fast_floats))
    return MX_OK;
  j.pre_a = mx__kconv_prepacked(call, wt, &j.pre_mr); /* weights packed beside the model, if any */
  if (!mx__kconv_f32_run(&j, call->workspace, pl->fast_floats)) {
    call->why = "Conv: the workspace is smaller than the kernel declared";
    return MX_ERR_KERNEL;
  }
  return MX_OK;
}

/* The residual z (NULL: none) and the activation fused into a Conv (mx_conv_params.fused_act),
 * applied to n outputs in place. */
static void fused_activation_f64(const mx_conv_params *p, double *y, const double *z, int64_t n) {
  double a = p->act_alpha, b = p->act_beta;
  for (int64_t i = 0; i < n; i++) {
    double v = z ? y[i] + z[i] : y[i];
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
  size_t col_bytes =
      mx__kconv_align((size_t)pl.col_elems * (x->dtype == MX_FLOAT64 ? 8 : 4) + pl.fast_floats * 4);
  const void *b = pl.b ? pl.b->data : NULL;
  if (x->dtype == MX_FLOAT32) {
    if (!transpose) return conv_f32(call, &pl, x->data, wt->data, b, pl.z ? pl.z->data : NULL, y->data);
    conv_transpose_f32(&pl.w, pl.n, pl.c, pl.m, pl.group, x->data, wt->data, b, y->data, (float *)ws);
    return MX_OK;
  }
  if (x->dtype == MX_FLOAT64) {
    (transpose ? conv_transpose_f64 : conv_forward_f64)(&pl.w, pl.n, pl.c, pl.m, pl.group, x->data, wt->data,
                                                        b, y->data, (double *)ws);
    if (act || pl.z) fused_activation_f64(cp, y->data, pl.z ? pl.z->data : NULL, ny);
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
  if (!transpose) {
    /* The residual, widened, goes in Y's float32 copy: the kernel reads it in place. */
    if (pl.z) mx__khalf_to_f32(pl.z->data, x->dtype, yf, ny);
    mx_status cst = conv_f32(call, &pl, xf, wf, pl.b ? bf : NULL, pl.z ? yf : NULL, yf);
    if (cst != MX_OK) return cst;
  } else {
    conv_transpose_f32(&pl.w, pl.n, pl.c, pl.m, pl.group, xf, wf, pl.b ? bf : NULL, yf, (float *)ws);
  }
  mx__kf32_to_half(yf, y->dtype, y->data, ny);
  return MX_OK;
}

static size_t conv_workspace(const mx_kernel_call *call) { return conv_workspace_common(call, false); }
static size_t conv_transpose_workspace(const mx_kernel_call *call) {
  return conv_workspace_common(call, true);
}
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
    &k_conv,
    &k_conv_transpose,
    &mx__kernel_conv_integer,
    &mx__kernel_qlinear_conv,
    &mx__kernel_deform_conv,
    &mx__kernel_col2im,
    NULL,
};
