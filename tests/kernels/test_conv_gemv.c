/* Kernel tests of the Conv of a 1x1 map through 1x1 taps (kernels/conv_gemv.c): channel counts
 * of squeeze-and-excitation blocks (multiples of 16 and not, fewer than 16), with and without a
 * bias, with a bias and a residual, fused HardSigmoid and Relu, two images, against a double loop; and the
 * same bits on one and two intra-op threads. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph/ops/conv_params.h"
#include "kernels/kernel.h"
#include "kernels/kernels_support.h"
#include "kernels/threads.h"

TestSuite(conv_gemv);

static uint32_t seed = 5u;
static float rnd(void) {
  seed = seed * 1664525u + 1013904223u;
  return (float)(seed >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
}

typedef struct gcase {
  int64_t n, c, m;
  bool bias, residual;
  int32_t act;
} gcase;

/* Runs case k on `threads` threads, checks it against double and returns its output. */
static float *run_gcase(const gcase *k, int32_t threads) {
  seed = 5u;
  int64_t nx = k->n * k->c, nw = k->m * k->c, ny = k->n * k->m;
  float *x = malloc((size_t)nx * 4), *w = malloc((size_t)nw * 4), *b = malloc((size_t)k->m * 4);
  float *z = malloc((size_t)ny * 4), *y = malloc((size_t)ny * 4);
  for (int64_t i = 0; i < nx; i++) x[i] = rnd();
  for (int64_t i = 0; i < nw; i++) w[i] = rnd();
  for (int64_t i = 0; i < k->m; i++) b[i] = rnd();
  for (int64_t i = 0; i < ny; i++) z[i] = rnd();
  mx_conv_params p;
  memset(&p, 0, sizeof p);
  p.op = MX_CONVOP_CONV;
  p.group = 1;
  p.fused_act = k->act;
  p.act_alpha = 0.2f;
  p.act_beta = 0.5f;
  uint16_t n_in = (uint16_t)(2 + k->bias + k->residual); /* a residual comes after a bias */
  mx_kernel_call *c = kc_new(n_in, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 4, DIMS(k->n, k->c, 1, 1), x);
  kc_set(c, 1, MX_FLOAT32, 4, DIMS(k->m, k->c, 1, 1), w);
  if (k->bias) kc_set(c, 2, MX_FLOAT32, 1, DIMS(k->m), b);
  if (k->residual) kc_set(c, 3, MX_FLOAT32, 4, DIMS(k->n, k->m, 1, 1), z);
  kc_set(c, n_in, MX_FLOAT32, 4, DIMS(k->n, k->m, 1, 1), y);
  mx__kthreads_set(threads);
  mx_status st = kc_run("Conv", c);
  mx__kthreads_set(1);
  cr_assert_eq(st, MX_OK, "%s", c->why ? c->why : "");
  int bad = 0;
  for (int64_t in = 0; in < k->n; in++)
    for (int64_t m = 0; m < k->m && bad < 5; m++) {
      double acc = k->bias ? b[m] : 0.0;
      for (int64_t i = 0; i < k->c; i++) acc += (double)w[m * k->c + i] * (double)x[in * k->c + i];
      if (k->residual) acc += z[in * k->m + m];
      if (k->act == MX_CONV_ACT_RELU) acc = acc > 0 ? acc : 0;
      if (k->act == MX_CONV_ACT_HARD_SIGMOID) {
        acc = 0.2 * acc + 0.5;
        acc = acc < 0 ? 0 : (acc > 1 ? 1 : acc);
      }
      double got = y[in * k->m + m];
      if (fabs(got - acc) > 1e-4 * (1 + fabs(acc))) {
        cr_expect(false, "c=%lld m=%lld act %d: [%lld,%lld] %g vs %g", (long long)k->c, (long long)k->m, k->act,
                  (long long)in, (long long)m, got, acc);
        bad++;
      }
    }
  free(x), free(w), free(b), free(z), free(c);
  return y;
}

static const gcase cases[] = {
    {1, 16, 8, true, false, MX_CONV_ACT_RELU},           {1, 8, 16, true, false, MX_CONV_ACT_HARD_SIGMOID},
    {1, 576, 144, true, false, MX_CONV_ACT_RELU},        {1, 144, 576, true, false, MX_CONV_ACT_HARD_SIGMOID},
    {2, 72, 24, false, false, MX_CONV_ACT_NONE},         {2, 40, 37, true, true, MX_CONV_ACT_RELU},
    {1, 3, 5, true, true, MX_CONV_ACT_NONE},
};

Test(conv_gemv, squeeze_excitation_shapes_match_a_double_loop) {
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) free(run_gcase(&cases[i], 1));
}

Test(conv_gemv, one_and_two_threads_give_the_same_bits) {
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const gcase *k = &cases[i];
    float *one = run_gcase(k, 1), *two = run_gcase(k, 2);
    expect_f32_same(two, one, k->n * k->m);
    free(one), free(two);
  }
}
