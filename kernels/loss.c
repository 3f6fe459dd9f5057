/* CPU kernels of the losses group: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.
 *
 * Both see the scores as [N, C, D] (D the product of the dims after C) and the target as
 * [N, D]. An element's loss is -x[n, t, d] * weight[t] (weight 1 without the input); a target
 * equal to ignore_index contributes neither loss nor weight, and any other target outside
 * [0, C) fails the kernel. "mean" divides the summed loss by the summed weights.
 *
 * SoftmaxCrossEntropyLoss first takes the log-softmax over C into the workspace (float for
 * float32/float16/bfloat16 scores, double for float64), then applies the same loss; the
 * log-softmax is also its optional second output. The loss itself touches only N*D scores,
 * so it reads and writes them through the generic element accessors; sums run in double. */
#include <math.h>
#include <string.h>

#include "graph/ops/norm_params.h"
#include "kernels/groups.h"
#include "kernels/kutil.h"
#include "kernels/linalg_impl.h"

/* Scores as [N, C, D]. */
static bool loss_dims(const mx_ktensor *x, int64_t *n, int64_t *c, int64_t *d) {
  if (x->rank < 2) return false;
  *n = x->dims[0];
  *c = x->dims[1];
  *d = 1;
  for (int32_t i = 2; i < x->rank; i++) *d *= x->dims[i];
  return true;
}

/* The loss over scores xs (n*c*d elements of dtype xdt, already log-probabilities) into output 0.
 * Returns MX_ERR_KERNEL with call->why set on a bad target or shape. */
static mx_status loss_apply(mx_kernel_call *call, const void *xs, mx_dtype xdt, int64_t n, int64_t c,
                            int64_t d) {
  const mx_loss_params *p = call->params;
  const mx_ktensor *t = &call->t[1];
  const mx_ktensor *w = call->n_in > 2 && call->t[2].dtype != MX_DTYPE_UNDEFINED ? &call->t[2] : NULL;
  mx_ktensor *out = mx__kout(call, 0);
  if (mx__ktensor_numel(t) != n * d || t->rank != call->t[0].rank - 1) {
    call->why = "loss: the target must have the scores' dims without C";
    return MX_ERR_KERNEL;
  }
  if (w && mx__ktensor_numel(w) != c) {
    call->why = "loss: the weight must have one value per class";
    return MX_ERR_KERNEL;
  }
  if (t->dtype != MX_INT64 && t->dtype != MX_INT32) return MX_ERR_UNSUPPORTED;
  double sum = 0.0, wsum = 0.0;
  for (int64_t k = 0; k < n; k++)
    for (int64_t j = 0; j < d; j++) {
      int64_t i = k * d + j;
      int64_t cls = mx__kget_i64(t->data, t->dtype, i);
      double loss = 0.0, wt = 0.0;
      if (!(p->has_ignore_index && cls == p->ignore_index)) {
        if (cls < 0 || cls >= c) {
          call->why = "loss: a target class is outside [0, C) and is not ignore_index";
          return MX_ERR_KERNEL;
        }
        wt = w ? mx__kget_f64(w->data, w->dtype, cls) : 1.0;
        loss = -mx__kget_f64(xs, xdt, (k * c + cls) * d + j) * wt;
      }
      if (p->reduction == MX_LOSS_NONE) mx__kset_f64(out->data, out->dtype, i, loss);
      sum += loss;
      wsum += wt;
    }
  /* Mean over zero total weight is 0/0: NaN, as the definition's division gives. */
  if (p->reduction == MX_LOSS_SUM) mx__kset_f64(out->data, out->dtype, 0, sum);
  if (p->reduction == MX_LOSS_MEAN) mx__kset_f64(out->data, out->dtype, 0, sum / wsum);
  return MX_OK;
}

/* --- NegativeLogLikelihoodLoss -------------------------------------------------------------------- */

static mx_status nllloss_run(mx_kernel_call *call) {
  const mx_ktensor *x = &call->t[0];
  int64_t n, c, d;
  if (!loss_dims(x, &n, &c, &d)) {
    call->why = "NegativeLogLikelihoodLoss: the input must be (N x C x ...)";
    return MX_ERR_KERNEL;
  }
  return loss_apply(call, x->data, x->dtype, n, c, d);
}

/* --- SoftmaxCrossEntropyLoss ----------------------------------------------------------------------- */

/* Column-wise log-softmax of one sample: x and y are [c, d] blocks (y may be x); m and s hold d
 * scratch values. Written for T = float and T = double. */
#define SCE_LOGSOFTMAX(SUF, T, EXP, LOG)                                                 \
  static void sce_logsoftmax_##SUF(const T *x, T *y, int64_t c, int64_t d, T *m, T *s) { \
    for (int64_t j = 0; j < d; j++) {                                                    \
      m[j] = -INFINITY;                                                                  \
      s[j] = 0;                                                                          \
    }                                                                                    \
    for (int64_t k = 0; k < c; k++)                                                      \
      for (int64_t j = 0; j < d; j++) m[j] = x[k * d + j] > m[j] ? x[k * d + j] : m[j];  \
    for (int64_t k = 0; k < c; k++)                                                      \
      for (int64_t j = 0; j < d; j++) s[j] += EXP(x[k * d + j] - m[j]);                  \
    for (int64_t j = 0; j < d; j++) m[j] += LOG(s[j]);                                   \
    for (int64_t k = 0; k < c; k++)                                                      \
      for (int64_t j = 0; j < d; j++) y[k * d + j] = x[k * d + j] - m[j];                \
  }
SCE_LOGSOFTMAX(f32, float, expf, logf)
SCE_LOGSOFTMAX(f64, double, exp, log)
#undef SCE_LOGSOFTMAX

static size_t sce_workspace(const mx_kernel_call *call) {
  const mx_ktensor *x = &call->t[0];
  int64_t n, c, d;
  if (!loss_dims(x, &n, &c, &d)) return 0;
  size_t el = x->dtype == MX_FLOAT64 ? 8 : 4;
  return mx__kalign64((size_t)mx__ktensor_numel(x) * el) + 2 * mx__kalign64((size_t)d * el);
}

static mx_status sce_run(mx_kernel_call *call) {
  const mx_ktensor *x = &call->t[0];
  int64_t n, c, d;
  if (!loss_dims(x, &n, &c, &d)) {
    call->why = "SoftmaxCrossEntropyLoss: the scores must be (N x C x ...)";
    return MX_ERR_KERNEL;
  }
  int64_t numel = mx__ktensor_numel(x), block = c * d;
  bool dbl = x->dtype == MX_FLOAT64;
  size_t el = dbl ? 8 : 4;
  char *w = call->workspace;
  void *lp = w;
  void *m = w + mx__kalign64((size_t)numel * el), *s = (char *)m + mx__kalign64((size_t)d * el);
  if (dbl) {
    for (int64_t k = 0; k < n; k++)
      sce_logsoftmax_f64((const double *)x->data + k * block, (double *)lp + k * block, c, d, m, s);
  } else {
    const float *xf = x->data;
    if (x->dtype == MX_FLOAT16 || x->dtype == MX_BFLOAT16) {
      mx__khalf_to_f32(x->data, x->dtype, lp, numel);
      xf = lp;
    } else if (x->dtype != MX_FLOAT32) {
      return MX_ERR_UNSUPPORTED;
    }
    for (int64_t k = 0; k < n; k++) sce_logsoftmax_f32(xf + k * block, (float *)lp + k * block, c, d, m, s);
  }
  mx_status st = loss_apply(call, lp, dbl ? MX_FLOAT64 : MX_FLOAT32, n, c, d);
  if (st != MX_OK) return st;
  mx_ktensor *lo = call->n_out > 1 ? mx__kout(call, 1) : NULL;
  if (lo && lo->data && numel > 0) {
    if (lo->dtype == x->dtype && (dbl || x->dtype == MX_FLOAT32))
      mx__kcopy(lo->data, lp, (size_t)numel * el);
    else if (lo->dtype == x->dtype)
      mx__kf32_to_half(lp, lo->dtype, lo->data, numel);
    else {
      call->why = "SoftmaxCrossEntropyLoss: log_prob must have the scores' dtype";
      return MX_ERR_KERNEL;
    }
  }
  return MX_OK;
}

static const mx_kernel_def k_nllloss = {
    .op = "NegativeLogLikelihoodLoss", .dtypes = MX_KDT_FLOATS, .key = 0, .run = nllloss_run};
static const mx_kernel_def k_sce = {.op = "SoftmaxCrossEntropyLoss",
                                    .dtypes = MX_KDT_FLOATS,
                                    .key = 0,
                                    .run = sce_run,
                                    .workspace = sce_workspace};

const mx_kernel_def *const mx__kernels_loss[] = {
    &k_nllloss,
    &k_sce,
    NULL,
};
