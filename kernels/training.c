/* CPU kernels of the ai.onnx.preview.training optimizers: Adagrad, Adam, Momentum (float32 and
 * float64, computed in double). One pass per optimized tensor, element by element. */
#include <math.h>

#include "graph/ops/training_params.h"
#include "kernels/groups.h"
#include "kernels/kutil.h"

/* One optimizer step on element i: x and the states in s (1 or 2) are read and replaced. */
typedef void (*step_fn)(const mx_optimizer_params *p, double r, int64_t t, double *x, double g, double *s);

static void adagrad_step(const mx_optimizer_params *p, double r, int64_t t, double *x, double g, double *s) {
  double rate = r / (1.0 + (double)t * p->decay_factor);
  double gr = p->norm_coefficient * *x + g;
  s[0] += gr * gr;
  *x -= rate * gr / (sqrt(s[0]) + p->epsilon);
}

static void adam_step(const mx_optimizer_params *p, double r, int64_t t, double *x, double g, double *s) {
  double gr = p->norm_coefficient * *x + g;
  s[0] = p->alpha * s[0] + (1.0 - p->alpha) * gr;
  s[1] = p->beta * s[1] + (1.0 - p->beta) * gr * gr;
  double rate = t > 0 ? r * sqrt(1.0 - pow(p->beta, (double)t)) / (1.0 - pow(p->alpha, (double)t)) : r;
  double xn = *x - rate * s[0] / (sqrt(s[1]) + p->epsilon);
  *x = (1.0 - p->norm_coefficient_post) * xn;
}

static void momentum_step(const mx_optimizer_params *p, double r, int64_t t, double *x, double g, double *s) {
  double gr = p->norm_coefficient * *x + g;
  double beta = t > 0 ? p->beta : 1.0;
  s[0] = p->alpha * s[0] + beta * gr;
  *x -= p->nesterov ? r * (gr + p->alpha * s[0]) : r * s[0];
}

static mx_status optimizer_run(mx_kernel_call *call, uint32_t n_states, step_fn step) {
  const mx_optimizer_params *p = call->params;
  const mx_ktensor *rt = mx__kin(call, 0), *tt = mx__kin(call, 1);
  if (mx__ktensor_numel(rt) != 1 || mx__ktensor_numel(tt) != 1) {
    call->why = "R and T must hold one value each";
    return MX_ERR_KERNEL;
  }
  double r = mx__kget_f64(rt->data, rt->dtype, 0);
  int64_t t = mx__kget_i64(tt->data, tt->dtype, 0);
  uint32_t n = (uint32_t)p->groups;
  for (uint32_t j = 0; j < n; j++) {
    const mx_ktensor *x = mx__kin(call, 2 + j), *g = mx__kin(call, 2 + n + j);
    mx_ktensor *xo = mx__kout(call, j);
    int64_t m = mx__ktensor_numel(x);
    if (mx__ktensor_numel(g) != m) {
      call->why = "a gradient's size differs from its tensor's";
      return MX_ERR_KERNEL;
    }
    for (uint32_t k = 0; k < n_states; k++)
      if (mx__ktensor_numel(mx__kin(call, 2 + (2 + k) * n + j)) != m) {
        call->why = "a state's size differs from its tensor's";
        return MX_ERR_KERNEL;
      }
    for (int64_t i = 0; i < m; i++) {
      double xv = mx__kget_f64(x->data, x->dtype, i), gv = mx__kget_f64(g->data, g->dtype, i), s[2] = {0, 0};
      for (uint32_t k = 0; k < n_states; k++) {
        const mx_ktensor *st = mx__kin(call, 2 + (2 + k) * n + j);
        s[k] = mx__kget_f64(st->data, st->dtype, i);
      }
      step(p, r, t, &xv, gv, s);
      mx__kset_f64(xo->data, xo->dtype, i, xv);
      for (uint32_t k = 0; k < n_states; k++) {
        mx_ktensor *so = mx__kout(call, (1 + k) * n + j);
        mx__kset_f64(so->data, so->dtype, i, s[k]);
      }
    }
  }
  return MX_OK;
}

static mx_status adagrad_run(mx_kernel_call *call) { return optimizer_run(call, 1, adagrad_step); }
static mx_status adam_run(mx_kernel_call *call) { return optimizer_run(call, 2, adam_step); }
static mx_status momentum_run(mx_kernel_call *call) { return optimizer_run(call, 1, momentum_step); }

#define TRAINING_DTYPES (MX_KDT(MX_FLOAT32) | MX_KDT(MX_FLOAT64))
static const mx_kernel_def k_adagrad = {.op = "Adagrad",
                                        .domain = "ai.onnx.preview.training",
                                        .dtypes = TRAINING_DTYPES,
                                        .key = 2,
                                        .run = adagrad_run};
static const mx_kernel_def k_adam = {
    .op = "Adam", .domain = "ai.onnx.preview.training", .dtypes = TRAINING_DTYPES, .key = 2, .run = adam_run};
static const mx_kernel_def k_momentum = {.op = "Momentum",
                                         .domain = "ai.onnx.preview.training",
                                         .dtypes = TRAINING_DTYPES,
                                         .key = 2,
                                         .run = momentum_run};

const mx_kernel_def *const mx__kernels_training[] = {
    &k_adagrad,
    &k_adam,
    &k_momentum,
    NULL,
};
