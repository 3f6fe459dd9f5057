/* CPU kernels of the pooling group: MaxPool (with Indices), AveragePool, LpPool,
 * GlobalAveragePool, GlobalMaxPool, GlobalLpPool and MaxUnpool.
 *
 * Windows are walked per (n, c) plane over three normalized spatial dims (kernels/conv_impl.h).
 * float32 is read in place; float64 computes in double; float16, bfloat16, int8 and uint8
 * (all exact in float32) are widened to float32 in the workspace and stored back once.
 *
 * AveragePool's divisor: the taps inside the image (count_include_pad = 0), or the taps inside
 * the image and its explicit padding (count_include_pad = 1); a ceil_mode window that hangs
 * past the end padding does not count the overhang either way.
 *
 * float32 has two vectorized paths (AVX-512, AVX2 and baseline copies): 2-D MaxPool without
 * Indices (the columns whose window lies inside the image take every tap in one pass over the
 * row, 3 taps at stride 2 in AVX-512 lanes (kernels/pool_lanes.c); the edge columns go tap by
 * tap as the generic walk does, so NaNs and ties come out the same; bands of output rows split
 * among the intra-op threads when the input is 1 MB or more), and GlobalAveragePool (eight
 * double partial sums per plane, added in a fixed order). */
#include <math.h>
#include <string.h>

#include "graph/ops/conv_params.h"
#include "kernels/conv_impl.h"
#include "kernels/groups.h"
#include "kernels/kmath.h"
#include "kernels/kutil.h"
#include "kernels/pool_lanes.h"
#include "kernels/threads.h"

/* What one pooling call computes. */
typedef struct pool_plan {
  mx_kwin w;
  int64_t planes; /* N * C */
  int32_t op;     /* MX_CONVOP_* */
  int32_t count_include_pad;
  int32_t storage_order;
  double p; /* Lp exponent */
} pool_plan;

#define PT          float
#define PT_FN(name) name##_f32
#include "kernels/pool_tmpl.inc"
#undef PT
#undef PT_FN

#define PT          double
#define PT_FN(name) name##_f64
#include "kernels/pool_tmpl.inc"
#undef PT
#undef PT_FN

/* Output rows [oh0, oh1) of one plane of a 2-D MaxPool (w->grid[0] == 1, dilation 1 along the
 * width): the same taps in the same order as pool_all, the first valid tap as the start and a
 * tap replacing the maximum only when greater. */
MX_KHOT static void maxpool2d_rows_f32(const mx_kwin *w, const float *restrict x, float *restrict y,
                                       int64_t oh0, int64_t oh1, bool lanes) {
  const int64_t OW = w->grid[2], IW = w->img[2], sw = w->s[2], KW = w->k[2], pbw = w->pb[2];
  lanes = lanes && sw == 2 && KW == 3;
  /* columns ow whose taps ow*sw - pbw + kw all fall inside [0, IW) */
  int64_t in_lo = pbw > 0 ? (pbw + sw - 1) / sw : 0;
  int64_t in_hi = IW - KW + pbw >= 0 ? (IW - KW + pbw) / sw + 1 : 0;
  if (in_hi > OW) in_hi = OW;
  if (in_lo > in_hi) in_lo = in_hi;
  for (int64_t oh = oh0; oh < oh1; oh++) {
    float *yr = y + oh * OW;
    int64_t kh_lo = -1, kh_hi = -1; /* valid rows of the window: [kh_lo, kh_hi) */
    for (int64_t kh = 0; kh < w->k[1]; kh++) {
      int64_t ih = oh * w->s[1] - w->pb[1] + kh * w->d[1];
      if (ih < 0 || ih >= w->img[1]) continue;
      if (kh_lo < 0) kh_lo = kh;
      kh_hi = kh + 1;
    }
    for (int64_t ow = 0; ow < OW; ow++) {
      if (ow == in_lo && in_lo < in_hi && kh_lo >= 0) {
        /* the interior columns: every width tap is valid */
        for (int64_t kh = kh_lo; kh < kh_hi; kh++) {
          int64_t ih = oh * w->s[1] - w->pb[1] + kh * w->d[1];
          if (ih < 0 || ih >= w->img[1]) continue;
          const float *xr = x + ih * IW;
          if (lanes) {
            mx__kpool_max3_s2(yr + in_lo, xr + in_lo * sw - pbw, in_hi - in_lo, kh == kh_lo);
            continue;
          }
          for (int64_t kw = 0; kw < KW; kw++) {
            if (kh == kh_lo && kw == 0) {
              for (int64_t o = in_lo; o < in_hi; o++) yr[o] = xr[o * sw - pbw];
              continue;
            }
            for (int64_t o = in_lo; o < in_hi; o++) {
              float v = xr[o * sw + kw - pbw];
              yr[o] = v > yr[o] ? v : yr[o];
            }
          }
        }
        ow = in_hi - 1;
        continue;
      }
      float best = 0.0f;
      bool any = false;
      for (int64_t kh = kh_lo < 0 ? 0 : kh_lo; kh_lo >= 0 && kh < kh_hi; kh++) {
        int64_t ih = oh * w->s[1] - w->pb[1] + kh * w->d[1];
        if (ih < 0 || ih >= w->img[1]) continue;
        for (int64_t kw = 0; kw < KW; kw++) {
          int64_t iw = ow * sw - pbw + kw;
          if (iw < 0 || iw >= IW) continue;
          float v = x[ih * IW + iw];
          if (!any || v > best) best = v;
          any = true;
        }
      }
      yr[ow] = any ? best : NAN;
    }
  }
}

/* A 2-D MaxPool as tasks of the intra-op pool: bands of output rows across every plane. The
 * Convs before it split their output by rows too, the pool's first thread taking the top bands
 * and a worker the bottom ones (kernels/threads.c), so each thread here reads rows its own core
 * just wrote. Read on one core, half the input came from the other core's cache: ResNet-50's
 * 3.2 MB MaxPool input took 0.6 ms at 2 threads against 0.2 ms at 1. */
typedef struct maxpool_job {
  const mx_kwin *w;
  const float *x;
  float *y;
  int64_t planes, band; /* band: output rows per task */
  bool lanes;
} maxpool_job;

static void maxpool_task(void *ctx, int64_t task, int32_t slot) {
  (void)slot;
  const maxpool_job *j = ctx;
  const int64_t oh0 = task * j->band, oh1 = oh0 + j->band < j->w->grid[1] ? oh0 + j->band : j->w->grid[1];
  for (int64_t p = 0; p < j->planes; p++)
    maxpool2d_rows_f32(j->w, j->x + p * j->w->img_size, j->y + p * j->w->grid_size, oh0, oh1, j->lanes);
}

/* Inputs of at least this many bytes split among the intra-op threads, whatever their work:
 * what a split saves there is the cross-core reads, not arithmetic. */
#define MAXPOOL_SPLIT_BYTES (1 << 20)

/* The mean of each plane of n values: eight double partial sums, added pairwise at the end. */
MX_KHOT static void global_average_f32(const float *restrict x, float *restrict y, int64_t planes,
                                       int64_t n) {
  for (int64_t pi = 0; pi < planes; pi++) {
    const float *xp = x + pi * n;
    double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
      for (int j = 0; j < 8; j++) acc[j] += (double)xp[i + j];
    for (int j = 0; i < n; i++, j++) acc[j] += (double)xp[i];
    double sum = ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
    y[pi] = (float)(sum / (double)n);
  }
}

static bool is_global(int32_t op) {
  return op == MX_CONVOP_GLOBAL_AVERAGE_POOL || op == MX_CONVOP_GLOBAL_MAX_POOL ||
         op == MX_CONVOP_GLOBAL_LP_POOL;
}

static mx_status plan_pool(const mx_kernel_call *call, pool_plan *pl, const char **why) {
  const mx_conv_params *p = call->params;
  const mx_ktensor *x = &call->t[0], *y = &call->t[call->n_in];
  memset(pl, 0, sizeof *pl);
  if (x->rank < 3 || y->rank != x->rank || y->dims[0] != x->dims[0] || y->dims[1] != x->dims[1]) {
    *why = "pooling: X and Y must be [N, C, spatial...] with the same N and C";
    return MX_ERR_KERNEL;
  }
  int32_t spatial = x->rank - 2;
  pl->planes = x->dims[0] * x->dims[1];
  pl->op = p->op;
  pl->count_include_pad = p->count_include_pad;
  pl->storage_order = p->storage_order;
  pl->p = p->p;
  if (is_global(p->op)) {
    /* One window over the whole plane, seen as a single row. */
    int64_t n = 1;
    for (int32_t i = 0; i < spatial; i++) n *= x->dims[2 + i];
    mx_conv_params q;
    memset(&q, 0, sizeof q);
    mx__kwin_forward(&q, 1, &n, (const int64_t[]){1}, &n, &pl->w);
    pl->op = p->op == MX_CONVOP_GLOBAL_AVERAGE_POOL ? MX_CONVOP_AVERAGE_POOL
             : p->op == MX_CONVOP_GLOBAL_MAX_POOL   ? MX_CONVOP_MAX_POOL
                                                    : MX_CONVOP_LP_POOL;
    return MX_OK;
  }
  if (p->n_kernel != spatial) {
    *why = "pooling: kernel_shape must have one entry per spatial dim";
    return MX_ERR_KERNEL;
  }
  if (!mx__kwin_forward(p, spatial, x->dims + 2, y->dims + 2, p->kernel_shape, &pl->w)) {
    *why = "pooling: only 1-D, 2-D and 3-D windows are supported";
    return MX_ERR_UNSUPPORTED;
  }
  return MX_OK;
}

static bool widened(mx_dtype dt) { return dt != MX_FLOAT32 && dt != MX_FLOAT64; }

static size_t pool_workspace(const mx_kernel_call *call) {
  const mx_ktensor *x = &call->t[0], *y = &call->t[call->n_in];
  if (!widened(x->dtype)) return 0;
  return mx__kconv_align((size_t)mx__ktensor_numel(x) * 4) +
         mx__kconv_align((size_t)mx__ktensor_numel(y) * 4);
}

static mx_status pool_run(mx_kernel_call *call) {
  pool_plan pl;
  mx_status st = plan_pool(call, &pl, &call->why);
  if (st != MX_OK) return st;
  const mx_ktensor *x = &call->t[0];
  mx_ktensor *y = mx__kout(call, 0);
  int64_t *idx = NULL;
  if (call->n_out > 1 && call->t[call->n_in + 1].data) {
    if (call->t[call->n_in + 1].dtype != MX_INT64) {
      call->why = "MaxPool: Indices must be int64";
      return MX_ERR_KERNEL;
    }
    idx = call->t[call->n_in + 1].data;
  }
  if (y->dtype != x->dtype) {
    call->why = "pooling: Y must have X's dtype";
    return MX_ERR_KERNEL;
  }
  int64_t nx = mx__ktensor_numel(x), ny = mx__ktensor_numel(y);
  if (ny == 0) return MX_OK;
  if (x->dtype == MX_FLOAT32) {
    const mx_conv_params *p = call->params;
    const mx_kwin *w = &pl.w;
    if (p->op == MX_CONVOP_GLOBAL_AVERAGE_POOL && w->img_size > 0) {
      global_average_f32(x->data, y->data, pl.planes, w->img_size);
      return MX_OK;
    }
    if (p->op == MX_CONVOP_MAX_POOL && !idx && w->spatial == 2 && w->d[2] == 1) {
      const int32_t slots = (int64_t)pl.planes * w->img_size * 4 >= MAXPOOL_SPLIT_BYTES ? mx__kthreads() : 1;
      /* Fourteen bands per thread; on one, plane after plane. The threads take bands from both
       * ends and meet where the Conv before split its rows, which the pool's split cannot know
       * (ResNet-50's first Conv split 12 to 16 of its 28 bands): small bands let the meeting
       * follow it, so each thread reads rows its own core wrote. ResNet-50's MaxPool at 2
       * threads: 0.36 ms in 8 bands, 0.30-0.31 in 28. */
      const int64_t OH = w->grid[1], bands = slots == 1 ? 1 : OH < 14 * slots ? OH : 14 * slots;
      maxpool_job job = {w, x->data, y->data, pl.planes, (OH + bands - 1) / bands, mx__kpool_lanes()};
      mx__kparallel((OH + job.band - 1) / job.band, slots, maxpool_task, &job);
      return MX_OK;
    }
    pool_all_f32(&pl, x->data, y->data, idx);
    return MX_OK;
  }
  if (x->dtype == MX_FLOAT64) {
    pool_all_f64(&pl, x->data, y->data, idx);
    return MX_OK;
  }
  float *xf = call->workspace;
  float *yf = (float *)((char *)call->workspace + mx__kconv_align((size_t)nx * 4));
  if (x->dtype == MX_FLOAT16 || x->dtype == MX_BFLOAT16)
    mx__khalf_to_f32(x->data, x->dtype, xf, nx);
  else
    for (int64_t i = 0; i < nx; i++) xf[i] = (float)mx__kget_f64(x->data, x->dtype, i);
  pool_all_f32(&pl, xf, yf, idx);
  if (y->dtype == MX_FLOAT16 || y->dtype == MX_BFLOAT16)
    mx__kf32_to_half(yf, y->dtype, y->data, ny);
  else
    for (int64_t i = 0; i < ny; i++) /* a window wholly in the padding has no value: 0 for integers */
      mx__kset_f64(y->data, y->dtype, i, yf[i] == yf[i] ? yf[i] : 0.0);
  return MX_OK;
}

static const mx_kernel_def k_maxpool = {.op = "MaxPool",
                                        .dtypes = MX_KDT_FLOATS | MX_KDT(MX_INT8) | MX_KDT(MX_UINT8),
                                        .key = 0,
                                        .run = pool_run,
                                        .workspace = pool_workspace};
static const mx_kernel_def k_avgpool = {
    .op = "AveragePool", .dtypes = MX_KDT_FLOATS, .key = 0, .run = pool_run, .workspace = pool_workspace};
static const mx_kernel_def k_lppool = {
    .op = "LpPool", .dtypes = MX_KDT_FLOATS, .key = 0, .run = pool_run, .workspace = pool_workspace};
static const mx_kernel_def k_global_avgpool = {.op = "GlobalAveragePool",
                                               .dtypes = MX_KDT_FLOATS,
                                               .key = 0,
                                               .run = pool_run,
                                               .workspace = pool_workspace};
static const mx_kernel_def k_global_maxpool = {
    .op = "GlobalMaxPool", .dtypes = MX_KDT_FLOATS, .key = 0, .run = pool_run, .workspace = pool_workspace};
static const mx_kernel_def k_global_lppool = {
    .op = "GlobalLpPool", .dtypes = MX_KDT_FLOATS, .key = 0, .run = pool_run, .workspace = pool_workspace};

/* --- MaxUnpool ---------------------------------------------------------------------------------- */

/* Y is zero except at the indices I: I holds flat indices into the unpooled shape the
 * attributes give ((in - 1) * stride + kernel - pads, as MaxPool writes them), and that shape
 * sits at the start of every dim of Y when an output_shape input makes Y larger. */
static mx_status maxunpool_run(mx_kernel_call *call) {
  const mx_conv_params *p = call->params;
  const mx_ktensor *x = &call->t[0], *ind = &call->t[1];
  mx_ktensor *y = mx__kout(call, 0);
  int64_t nx = mx__ktensor_numel(x), ny = mx__ktensor_numel(y);
  int32_t rank = x->rank, spatial = rank - 2;
  if (mx__ktensor_numel(ind) != nx || ind->dtype != MX_INT64 || y->dtype != x->dtype || y->rank != rank ||
      spatial < 1 || p->n_kernel != spatial) {
    call->why =
        "MaxUnpool: I must be int64 with X's shape, Y of X's rank and dtype, one kernel size per spatial dim";
    return MX_ERR_KERNEL;
  }
  int64_t unpooled[MX_MAX_RANK];
  unpooled[0] = x->dims[0];
  unpooled[1] = x->dims[1];
  for (int32_t i = 0; i < spatial; i++) {
    int64_t s = p->n_strides ? p->strides[i] : 1, pads = p->n_pads ? p->pads[i] + p->pads[spatial + i] : 0;
    unpooled[2 + i] = (x->dims[2 + i] - 1) * s - pads + p->kernel_shape[i];
  }
  size_t es = mx_dtype_size(x->dtype);
  if (ny) memset(y->data, 0, (size_t)ny * es);
  const int64_t *iv = ind->data;
  for (int64_t i = 0; i < nx; i++) {
    /* The index's coordinates in the unpooled shape, re-linearized over Y's dims. */
    int64_t rest = iv[i], at = 0, scale = 1;
    bool inside = rest >= 0;
    for (int32_t d = rank - 1; d >= 0 && inside; d--) {
      int64_t coord = unpooled[d] > 0 ? rest % unpooled[d] : 0;
      rest = unpooled[d] > 0 ? rest / unpooled[d] : 0;
      inside = coord < y->dims[d];
      at += coord * scale;
      scale *= y->dims[d];
    }
    if (!inside || rest != 0) {
      call->why = "MaxUnpool: an index in I is outside the unpooled shape or Y";
      return MX_ERR_KERNEL;
    }
    memcpy((char *)y->data + (size_t)at * es, (const char *)x->data + (size_t)i * es, es);
  }
  return MX_OK;
}

static const mx_kernel_def k_maxunpool = {
    .op = "MaxUnpool", .dtypes = MX_KDT_FLOATS, .key = 0, .run = maxunpool_run};

const mx_kernel_def *const mx__kernels_pool[] = {
    &k_maxpool,        &k_avgpool,       &k_lppool,    &k_global_avgpool,
    &k_global_maxpool, &k_global_lppool, &k_maxunpool, NULL,
};
