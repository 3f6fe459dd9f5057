/* CPU kernels of the random numbers group: RandomUniform, RandomNormal, RandomUniformLike,
 * RandomNormalLike, Bernoulli and Multinomial.
 *
 * The generator is counter based: element i of a node's output comes from a SplitMix64 hash
 * of (seed, i), so a kernel keeps no state, every run of a node repeats its numbers, and any
 * element can be drawn independently of the others. Normal numbers take two uniforms through
 * the Box-Muller transform. */
#include <math.h>

#include "graph/ops/random_params.h"
#include "kernels/groups.h"
#include "kernels/kutil.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

static inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* Uniform double in [0, 1) for draw number i of a stream (53 random bits). */
static inline double uniform01(uint64_t seed, uint64_t i) {
  return (double)(splitmix64(seed ^ splitmix64(i)) >> 11) * (1.0 / 9007199254740992.0);
}

/* Standard normal for draw i: Box-Muller over two uniforms of the stream. */
static inline double normal01(uint64_t seed, uint64_t i) {
  double u1 = uniform01(seed, 2 * i), u2 = uniform01(seed, 2 * i + 1);
  return sqrt(-2.0 * log(1.0 - u1)) * cos(2.0 * M_PI * u2);
}

static mx_status random_run(mx_kernel_call *call) {
  const mx_random_params *p = call->params;
  mx_ktensor *y = mx__kout(call, 0);
  int64_t n = mx__ktensor_numel(y);
  switch (p->kind) {
    case MX_RANDOM_UNIFORM:
      for (int64_t i = 0; i < n; i++) {
        mx__kset_f64(y->data, y->dtype, i,
                     (double)p->a + ((double)p->b - (double)p->a) * uniform01(p->seed, (uint64_t)i));
        /* Rounding to a narrow type can reach high itself; the range is [low, high). */
        if (p->b > p->a && mx__kget_f64(y->data, y->dtype, i) >= (double)p->b)
          mx__kset_f64(y->data, y->dtype, i, p->a);
      }
      return MX_OK;
    case MX_RANDOM_NORMAL:
      for (int64_t i = 0; i < n; i++)
        mx__kset_f64(y->data, y->dtype, i, (double)p->a + (double)p->b * normal01(p->seed, (uint64_t)i));
      return MX_OK;
    case MX_RANDOM_BERNOULLI: {
      const mx_ktensor *x = &call->t[0];
      if (mx__ktensor_numel(x) != n) {
        call->why = "Bernoulli: the output size differs from the input";
        return MX_ERR_KERNEL;
      }
      for (int64_t i = 0; i < n; i++) {
        double prob = mx__kget_f64(x->data, x->dtype, i);
        mx__kset_f64(y->data, y->dtype, i, uniform01(p->seed, (uint64_t)i) < prob ? 1.0 : 0.0);
      }
      return MX_OK;
    }
    default: break;
  }
  /* Multinomial: each row of x holds unnormalized log-probabilities of its classes. */
  const mx_ktensor *x = &call->t[0];
  if (x->rank != 2 || y->rank != 2 || y->dims[0] != x->dims[0] || y->dims[1] != p->sample_size ||
      x->dims[1] < 1) {
    call->why = "Multinomial: the input must be [batch, classes] and the output [batch, sample_size]";
    return MX_ERR_KERNEL;
  }
  const int64_t classes = x->dims[1], samples = p->sample_size;
  for (int64_t b = 0; b < x->dims[0]; b++) {
    const int64_t row = b * classes;
    double m = -INFINITY, total = 0.0;
    for (int64_t c = 0; c < classes; c++) {
      double v = mx__kget_f64(x->data, x->dtype, row + c);
      m = v > m ? v : m;
    }
    for (int64_t c = 0; c < classes; c++) total += exp(mx__kget_f64(x->data, x->dtype, row + c) - m);
    for (int64_t s = 0; s < samples; s++) {
      double target = uniform01(p->seed, (uint64_t)(b * samples + s)) * total, acc = 0.0;
      int64_t pick = classes - 1;
      for (int64_t c = 0; c < classes; c++) {
        acc += exp(mx__kget_f64(x->data, x->dtype, row + c) - m);
        if (target < acc) {
          pick = c;
          break;
        }
      }
      mx__kset_i64(y->data, y->dtype, b * samples + s, pick);
    }
  }
  return MX_OK;
}

#define RANDOM_KERNEL(VAR, NAME, DTYPES) \
  static const mx_kernel_def VAR = {.op = NAME, .dtypes = DTYPES, .key = -1, .run = random_run}
RANDOM_KERNEL(k_uniform, "RandomUniform", MX_KDT_FLOATS);
RANDOM_KERNEL(k_normal, "RandomNormal", MX_KDT_FLOATS);
RANDOM_KERNEL(k_uniform_like, "RandomUniformLike", MX_KDT_FLOATS);
RANDOM_KERNEL(k_normal_like, "RandomNormalLike", MX_KDT_FLOATS);
RANDOM_KERNEL(k_bernoulli, "Bernoulli", MX_KDT_ALL);
RANDOM_KERNEL(k_multinomial, "Multinomial", MX_KDT(MX_INT32) | MX_KDT(MX_INT64));

const mx_kernel_def *const mx__kernels_random[] = {
    &k_uniform, &k_normal, &k_uniform_like, &k_normal_like, &k_bernoulli, &k_multinomial, NULL,
};
