/* A one-row float32 Gemm (a classifier head at batch 1) on the intra-op threads
 * (kernels/linalg_threads.c, mx__ksgemv_split): its blocks of outputs split across 2 and 3 threads
 * give the same bits as 1 thread, with B plain and transposed, a broadcast C, alpha and beta, sizes
 * that are not a multiple of the block, and a product too small to be split; each against a
 * double-precision sum. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph/ops/linalg_params.h"
#include "kernels/kernel.h"
#include "kernels/kernels_support.h"
#include "kernels/threads.h"

TestSuite(threads_gemv);

static uint32_t seed = 977u;
static float *random_floats(int64_t n) { return ks_rnd_buf(&seed, n); }

/* Y[1, n] = alpha A[1, k] op(B) + beta C[n] on `threads` threads. */
static float *gemm_row(const mx_gemm_params *p, int32_t threads, int64_t n, int64_t k, const float *a,
                       const float *b, const float *c) {
  float *y = malloc((size_t)n * sizeof *y);
  cr_assert(y);
  for (int64_t i = 0; i < n; i++) y[i] = -12345.0f; /* every element must be written */
  mx_kernel_call *call = kc_new(c ? 3 : 2, 1, p);
  kc_set(call, 0, MX_FLOAT32, 2, DIMS(1, k), (void *)a);
  if (p->trans_b)
    kc_set(call, 1, MX_FLOAT32, 2, DIMS(n, k), (void *)b);
  else
    kc_set(call, 1, MX_FLOAT32, 2, DIMS(k, n), (void *)b);
  if (c) kc_set(call, 2, MX_FLOAT32, 1, DIMS(n), (void *)c);
  kc_set(call, c ? 3 : 2, MX_FLOAT32, 2, DIMS(1, n), y);
  mx__kthreads_set(threads);
  mx_status st = kc_run("Gemm", call);
  mx__kthreads_set(1);
  cr_assert_eq(st, MX_OK, "Gemm: %s", call->why ? call->why : "");
  free(call);
  return y;
}

static void check(int32_t trans_b, int64_t n, int64_t k, float alpha, float beta, bool with_c) {
  mx_gemm_params p = {.alpha = alpha, .beta = beta, .trans_b = trans_b};
  float *a = random_floats(k), *b = random_floats(n * k), *c = with_c ? random_floats(n) : NULL;
  float *want = gemm_row(&p, 1, n, k, a, b, c);
  for (int64_t j = 0; j < n; j++) {
    double s = 0.0;
    for (int64_t i = 0; i < k; i++) s += (double)a[i] * (double)(trans_b ? b[j * k + i] : b[i * n + j]);
    s = alpha * s + (with_c ? beta * (double)c[j] : 0.0);
    cr_assert(fabs(s - (double)want[j]) <= 1e-5 * (double)k, "output %lld: %g, double %g", (long long)j,
              (double)want[j], s);
  }
  for (int32_t threads = 2; threads <= 3; threads++) {
    float *got = gemm_row(&p, threads, n, k, a, b, c);
    expect_f32_same(got, want, n);
    free(got);
  }
  free(want);
  free(a);
  free(b);
  free(c);
}

Test(threads_gemv, resnet_head_transposed_b) { check(1, 1000, 2048, 1.0f, 1.0f, true); }

Test(threads_gemv, plain_b_alpha_beta_ragged_block) { check(0, 1001, 1280, 0.5f, 2.0f, true); }

Test(threads_gemv, no_c) { check(1, 333, 960, 1.0f, 0.0f, false); }

/* 64 KB of weights: run on the calling thread, still in the same blocks */
Test(threads_gemv, too_small_to_split) { check(1, 300, 50, 1.0f, 1.0f, true); }
