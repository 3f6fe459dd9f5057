/* Shared helpers of the CPU kernel tests (see kernels_support.h). */
#include "kernels/kernels_support.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

mx_kernel_call *kc_new(uint16_t n_in, uint16_t n_out, const void *params) {
  mx_kernel_call *c = mx__kernel_call_new(n_in, n_out, params);
  cr_assert(c);
  return c;
}

void kc_set(mx_kernel_call *c, uint32_t i, mx_dtype dt, int32_t rank, const int64_t *dims, void *data) {
  mx__ktensor_set(&c->t[i], dt, rank, dims, data);
}

mx_status kc_run(const char *op, mx_kernel_call *c) {
  const mx_kernel_def *k = mx__kernel_find("", op, c);
  cr_assert(k, "no %s kernel for this dtype", op);
  size_t ws = k->workspace ? k->workspace(c) : 0;
  void *w = NULL;
  if (ws) {
    w = aligned_alloc(64, (ws + 63) & ~(size_t)63);
    cr_assert_not_null(w);
  }
  c->workspace = w;
  c->workspace_size = ws;
  c->why = NULL;
  mx_status st = k->run(c);
  free(w);
  c->workspace = NULL;
  return st;
}

mx_status kc_run_with(const char *op, mx_kernel_call *c, const void *params) {
  c->params = params;
  return kc_run(op, c);
}

void expect_i64(const int64_t *got, const int64_t *want, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    cr_expect_eq(got[i], want[i], "[%lld] got %lld want %lld", (long long)i, (long long)got[i],
                 (long long)want[i]);
}

void expect_f32_same(const float *got, const float *want, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    cr_expect(got[i] == want[i] || (isnan(got[i]) && isnan(want[i])), "[%lld] got %g want %g", (long long)i,
              (double)got[i], (double)want[i]);
}

void expect_f32_near(const float *got, const float *want, int64_t n, float tol) {
  for (int64_t i = 0; i < n; i++) {
    if (isnan(want[i])) {
      cr_expect(isnan(got[i]), "[%lld] want NaN, got %g", (long long)i, (double)got[i]);
      continue;
    }
    cr_expect(fabsf(got[i] - want[i]) <= tol * (1.0f + fabsf(want[i])), "[%lld] got %.7g want %.7g",
              (long long)i, (double)got[i], (double)want[i]);
  }
}

void assert_f32_near(const float *got, const float *want, int n, float tol) {
  for (int i = 0; i < n; i++) {
    if (isnan(want[i]))
      cr_assert(isnan(got[i]), "element %d: %g, want NaN", i, (double)got[i]);
    else if (isinf(want[i]))
      cr_assert_eq(got[i], want[i], "element %d: %g, want %g", i, (double)got[i], (double)want[i]);
    else
      cr_assert(fabsf(got[i] - want[i]) <= tol * (1.0f + fabsf(want[i])), "element %d: %.9g, want %.9g", i,
                (double)got[i], (double)want[i]);
  }
}

float ks_rnd(uint32_t *seed) {
  *seed = *seed * 1664525u + 1013904223u;
  return (float)(*seed >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
}

float *ks_rnd_buf(uint32_t *seed, int64_t n) {
  float *p = malloc((size_t)(n ? n : 1) * sizeof *p);
  cr_assert(p, "out of memory for %lld test floats", (long long)n);
  for (int64_t i = 0; i < n; i++) p[i] = ks_rnd(seed);
  return p;
}
