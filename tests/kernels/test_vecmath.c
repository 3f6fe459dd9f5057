/* Tests of the branch-free float32 math of kernels/kmath.h as the kernels use it: the
 * Exp, Sigmoid, Tanh and Erf kernels (vectorized rows, AVX2 copy where the machine has it), Gelu's
 * tanh form and Softmax, checked against double-precision libm in ulps over a sweep of the
 * whole float range (every 4099th bit pattern, so signs, subnormals, huge values and the
 * overflow edges all come up) and on hand-picked edge cases: NaN, +-0, +-Inf, the clamp
 * boundaries, subnormal inputs and results, lengths that leave vector tails, in-place rows,
 * float16 and empty tensors. The inline helpers are also called directly (scalar code), which
 * must give the same bits as the kernels. */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/half.h"
#include "graph/ops/elementwise_params.h"
#include "graph/ops/nn_params.h"
#include "kernels/kernel.h"
#include "kernels/kernels_support.h"
#include "kernels/kmath.h"

/* Runs a unary kernel over n float32 (or 16-bit) elements. */
static mx_status un(const char *op, mx_dtype dt, int64_t n, const void *x, void *o, const void *params) {
  mx_kernel_call *c = kc_new(1, 1, NULL);
  kc_set(c, 0, dt, 1, &n, (void *)x);
  kc_set(c, 1, dt, 1, &n, o);
  mx_status st = kc_run_with(op, c, params);
  free(c);
  return st;
}

/* Distance of got from the exact value want, in units of the last place of want rounded to
 * float (subnormal spacing below FLT_MIN); 0 for matching infinities, huge for a mismatch. */
static double ulps(float got, double want) {
  if (isinf(want) || fabs(want) > FLT_MAX) return isinf(got) && (got > 0) == (want > 0) ? 0.0 : 1e30;
  if (!isfinite(got)) return 1e30;
  float w = (float)want;
  double ulp = fabsf(w) < FLT_MIN ? 0x1p-149 : (double)nextafterf(fabsf(w), INFINITY) - (double)fabsf(w);
  return fabs((double)got - want) / ulp;
}

typedef double (*ref_fn)(double);
static double ref_exp(double x) { return exp(x); }
static double ref_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
static double ref_tanh(double x) { return tanh(x); }
static double ref_erf(double x) { return erf(x); }

/* The sweep: every 4099th float bit pattern (about a million values). */
static float *sweep(int64_t *n) {
  int64_t cnt = (int64_t)((1ull << 32) / 4099) + 1;
  float *x = malloc((size_t)cnt * sizeof *x);
  cr_assert_not_null(x);
  for (int64_t i = 0; i < cnt; i++) {
    uint32_t u = (uint32_t)((uint64_t)i * 4099u);
    memcpy(&x[i], &u, sizeof u);
  }
  *n = cnt;
  return x;
}

/* Runs op over the sweep and checks every result within max_ulps of ref (NaN in, NaN out). */
static void check_sweep(const char *op, ref_fn ref, double max_ulps) {
  int64_t n;
  float *x = sweep(&n), *y = malloc((size_t)n * sizeof *y);
  cr_assert_not_null(y);
  cr_assert_eq(un(op, MX_FLOAT32, n, x, y, NULL), MX_OK);
  double worst = 0.0;
  float worst_x = 0.0f;
  for (int64_t i = 0; i < n; i++) {
    if (isnan(x[i])) {
      cr_assert(isnan(y[i]), "%s(NaN) = %g", op, (double)y[i]);
      continue;
    }
    double u = ulps(y[i], ref((double)x[i]));
    if (u > worst) worst = u, worst_x = x[i];
  }
  cr_expect(worst <= max_ulps, "%s: %.3f ulp at x = %a", op, worst, (double)worst_x);
  free(x);
  free(y);
}

Test(vecmath, exp_sweep_within_1_5_ulp) { check_sweep("Exp", ref_exp, 1.5); }
Test(vecmath, sigmoid_sweep_within_3_ulp) { check_sweep("Sigmoid", ref_sigmoid, 3.0); }
Test(vecmath, tanh_sweep_within_3_ulp) { check_sweep("Tanh", ref_tanh, 3.0); }
Test(vecmath, erf_sweep_within_3_ulp) { check_sweep("Erf", ref_erf, 3.0); }

/* erf's edges: odd, +-0 and subnormals kept (erf(x) ~ 1.128 x), the two halves meet at 1
 * without a jump, +-1 from 4 on and at the infinities, NaN. */
Test(vecmath, erf_edges) {
  const float x[] = {0.0f, -0.0f, 0x1p-149f, -1e-30f, 0.999999940f, 1.0f, 3.99f, 4.0f, 1e30f, -INFINITY, NAN};
  enum { N = sizeof x / sizeof x[0] };
  float y[N];
  cr_assert_eq(un("Erf", MX_FLOAT32, N, x, y, NULL), MX_OK);
  cr_expect(y[0] == 0.0f && !signbit(y[0]) && y[1] == 0.0f && signbit(y[1]));
  for (int i = 2; i < 7; i++)
    cr_expect(ulps(y[i], erf((double)x[i])) <= 3.0, "erf(%a) = %a", (double)x[i], (double)y[i]);
  cr_expect(y[5] >= y[4], "erf is not monotonic across 1: %a then %a", (double)y[4], (double)y[5]);
  cr_expect_eq(y[7], 1.0f);
  cr_expect_eq(y[8], 1.0f);
  cr_expect_eq(y[9], -1.0f);
  cr_expect(isnan(y[10]));
}

Test(vecmath, exp_edges) {
  const float x[] = {0.0f,
                     -0.0f,
                     NAN,
                     -NAN,
                     INFINITY,
                     -INFINITY,
                     88.72283172607421875f, /* largest x with a finite exp */
                     nextafterf(88.72283172607421875f, 100.0f),
                     89.0f,
                     1e30f,
                     -87.0f,
                     -100.0f,
                     -103.0f,
                     -103.97f, /* subnormal results */
                     -104.0f,
                     -200.0f,
                     -1e30f,
                     0x1p-149f,
                     -0x1p-149f,
                     1e-30f};
  enum { N = sizeof x / sizeof x[0] };
  float y[N];
  cr_assert_eq(un("Exp", MX_FLOAT32, N, x, y, NULL), MX_OK);
  cr_expect_eq(y[0], 1.0f);
  cr_expect_eq(y[1], 1.0f);
  cr_expect(isnan(y[2]) && isnan(y[3]));
  cr_expect(isinf(y[4]) && y[4] > 0);
  cr_expect_eq(y[5], 0.0f);
  cr_expect(isfinite(y[6]) && y[6] > 3.4e38f, "exp(88.7228317) = %g", (double)y[6]);
  cr_expect(isinf(y[7]) && isinf(y[8]) && isinf(y[9]));
  for (int i = 10; i < 14; i++) {
    cr_expect(y[i] > 0.0f, "exp(%g) = %g", (double)x[i], (double)y[i]);
    cr_expect(ulps(y[i], exp((double)x[i])) <= 1.5, "exp(%g) = %a", (double)x[i], (double)y[i]);
  }
  cr_expect_eq(y[14], 0.0f);
  cr_expect_eq(y[15], 0.0f);
  cr_expect_eq(y[16], 0.0f);
  cr_expect_eq(y[17], 1.0f);
  cr_expect_eq(y[18], 1.0f);
  cr_expect_eq(y[19], 1.0f);
  /* The scalar helper gives the kernel's bits. */
  for (int i = 0; i < N; i++) {
    float s = mx__kexpf(x[i]);
    cr_expect(memcmp(&s, &y[i], sizeof s) == 0 || (isnan(s) && isnan(y[i])), "x = %g", (double)x[i]);
  }
}

Test(vecmath, sigmoid_edges) {
  const float x[] = {0.0f,   -0.0f,  NAN,     INFINITY, -INFINITY, 1e30f,      -1e30f, 20.0f,
                     -20.0f, -90.0f, -103.0f, -110.0f,  0x1p-149f, -0x1p-149f, 17.0f,  -17.0f};
  enum { N = sizeof x / sizeof x[0] };
  float y[N];
  cr_assert_eq(un("Sigmoid", MX_FLOAT32, N, x, y, NULL), MX_OK);
  cr_expect_eq(y[0], 0.5f);
  cr_expect_eq(y[1], 0.5f);
  cr_expect(isnan(y[2]));
  cr_expect_eq(y[3], 1.0f);
  cr_expect_eq(y[4], 0.0f);
  cr_expect_eq(y[5], 1.0f);
  cr_expect_eq(y[6], 0.0f);
  /* Far tails: the tiny values e^x survive, down to subnormals, then 0. */
  for (int i = 7; i < 11; i++)
    cr_expect(ulps(y[i], ref_sigmoid((double)x[i])) <= 3.0, "sigmoid(%g) = %a", (double)x[i], (double)y[i]);
  cr_expect(y[9] > 0.0f && y[10] > 0.0f);
  cr_expect_eq(y[11], 0.0f);
  cr_expect_eq(y[12], 0.5f);
  cr_expect_eq(y[13], 0.5f);
  cr_expect(ulps(y[14], ref_sigmoid(17.0)) <= 3.0);
  cr_expect(ulps(y[15], ref_sigmoid(-17.0)) <= 3.0);
}

Test(vecmath, tanh_edges) {
  const float x[] = {0.0f,  -0.0f,     NAN,        INFINITY, -INFINITY, 1e30f, -1e30f, 9.0f,  -9.5f,
                     20.0f, 0x1p-149f, -0x1p-149f, 1e-20f,   -3e-8f,    1e-3f, -0.3f,  0.35f, 0.7f};
  enum { N = sizeof x / sizeof x[0] };
  float y[N];
  cr_assert_eq(un("Tanh", MX_FLOAT32, N, x, y, NULL), MX_OK);
  cr_expect(y[0] == 0.0f && !signbit(y[0]));
  cr_expect(y[1] == 0.0f && signbit(y[1]));
  cr_expect(isnan(y[2]));
  cr_expect_eq(y[3], 1.0f);
  cr_expect_eq(y[4], -1.0f);
  cr_expect_eq(y[5], 1.0f);
  cr_expect_eq(y[6], -1.0f);
  cr_expect_eq(y[9], 1.0f);
  /* Tiny and subnormal x: tanh(x) = x (to about an ulp), no cancellation. */
  cr_expect_eq(y[10], x[10]);
  cr_expect_eq(y[11], x[11]);
  cr_expect_eq(y[12], x[12]);
  cr_expect(ulps(y[13], tanh((double)x[13])) <= 1.5, "tanh(%g) = %a", (double)x[13], (double)y[13]);
  for (int i = 7; i < N; i++)
    cr_expect(ulps(y[i], tanh((double)x[i])) <= 3.0, "tanh(%g) = %a", (double)x[i], (double)y[i]);
}

/* Every length from 0 to 40 (vector bodies and tails), out of place and in place, matches the
 * scalar helper bit for bit. */
Test(vecmath, lengths_tails_and_in_place) {
  const char *ops[4] = {"Exp", "Sigmoid", "Tanh", "Erf"};
  float (*fns[4])(float) = {mx__kexpf, mx__ksigmoidf, mx__ktanhf, mx__kerff};
  for (int k = 0; k < 4; k++) {
    for (int64_t n = 0; n <= 40; n++) {
      float x[41], y[41], z[41];
      for (int64_t i = 0; i < n; i++) x[i] = z[i] = (float)(i * 37 % 23) * 0.75f - 8.0f;
      cr_assert_eq(un(ops[k], MX_FLOAT32, n, x, y, NULL), MX_OK);
      cr_assert_eq(un(ops[k], MX_FLOAT32, n, z, z, NULL), MX_OK);
      for (int64_t i = 0; i < n; i++) {
        float s = fns[k](x[i]);
        cr_expect(memcmp(&s, &y[i], 4) == 0 && memcmp(&s, &z[i], 4) == 0, "%s n=%lld i=%lld", ops[k],
                  (long long)n, (long long)i);
      }
    }
  }
}

Test(vecmath, empty_tensor) {
  float x[1] = {1.0f}, y[1] = {42.0f};
  cr_assert_eq(un("Sigmoid", MX_FLOAT32, 0, x, y, NULL), MX_OK);
  cr_assert_eq(un("Tanh", MX_FLOAT32, 0, x, y, NULL), MX_OK);
  cr_assert_eq(un("Exp", MX_FLOAT32, 0, x, y, NULL), MX_OK);
  cr_expect_eq(y[0], 42.0f);
}

/* float16 goes through the float32 row and rounds once. */
Test(vecmath, sigmoid_float16) {
  const float xs[6] = {-10.0f, -1.0f, 0.0f, 0.5f, 3.0f, 65504.0f};
  uint16_t x[6], y[6];
  for (int i = 0; i < 6; i++) x[i] = mx__f32_to_f16(xs[i]);
  cr_assert_eq(un("Sigmoid", MX_FLOAT16, 6, x, y, NULL), MX_OK);
  for (int i = 0; i < 6; i++) {
    float want = (float)ref_sigmoid((double)xs[i]);
    cr_expect_eq(y[i], mx__f32_to_f16(want), "x = %g: %g, want %g", (double)xs[i],
                 (double)mx__f16_to_f32(y[i]), (double)want);
  }
}

/* Gelu's tanh form on the vector tanh: close to the double formula (1 + tanh cancels for
 * negative x, so the bound has a term in |x| times tanh's error), limits at +-large x. */
Test(vecmath, gelu_tanh_form) {
  const float x[] = {-30.0f, -3.0f, -0.5f, 0.0f, 1e-20f, 0.5f, 2.0f, 30.0f, 1e20f, NAN};
  enum { N = sizeof x / sizeof x[0] };
  float y[N];
  mx_gelu_params approx = {1, 0};
  cr_assert_eq(un("Gelu", MX_FLOAT32, N, x, y, &approx), MX_OK);
  for (int i = 0; i < N - 1; i++) {
    double v = x[i];
    double want = 0.5 * v * (1.0 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
    cr_expect(fabs((double)y[i] - want) <= 4e-7 * (fabs(want) + fabs(v)) + 1e-30,
              "gelu(%g) = %.9g, want %.9g", v, (double)y[i], want);
  }
  cr_expect(isnan(y[N - 1]));
}

/* Softmax uses the cheaper exp variant: weights in the normal range are accurate, those below
 * ~1.6e-38 (where they vanish next to the maximum's 1 anyway) are 0. */
Test(vecmath, softmax_tiny_weights) {
  float x[3] = {0.0f, -80.0f, -95.0f}, y[3];
  mx_softmax_params p = {.axis = -1};
  mx_kernel_call *c = kc_new(1, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 1, DIMS(3), x);
  kc_set(c, 1, MX_FLOAT32, 1, DIMS(3), y);
  cr_assert_eq(kc_run("Softmax", c), MX_OK);
  free(c);
  cr_expect_eq(y[0], 1.0f);
  cr_expect(y[1] > 0.0f && ulps(y[1], exp(-80.0)) <= 2.0, "%a", (double)y[1]);
  cr_expect_eq(y[2], 0.0f);
  /* The two variants agree bit for bit in the normal range. */
  for (float v = -87.0f; v <= 0.0f; v += 0.37f) {
    float a = mx__kexpf(v), b = mx__kexpf_ftz(v);
    cr_expect(memcmp(&a, &b, sizeof a) == 0, "x = %g", (double)v);
  }
}
