/* Kernel tests of MatMul, Gemm and Einsum (kernels/linalg*.c): hand-computed products,
 * batch broadcasting and 1-D promotion checked against a naive loop, zero-size dims, float16
 * rounding once, integer wrap-around, NaN propagation, Gemm's transposes/alpha/beta/C
 * broadcasting, and Einsum's fast (BLAS) and generic paths including diagonals and "...". */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/half.h"
#include "graph/ops/linalg_params.h"
#include "graph/ops/op.h"
#include "kernels/kernel.h"
#include "kernels/kernels_support.h"

/* Naive batched matmul with numpy broadcasting, for 4-D operands (1s where a dim is absent). */
static void naive_bmm(const float *a, const int64_t *ad, const float *b, const int64_t *bd, float *y,
                      const int64_t *yd) {
  for (int64_t i0 = 0; i0 < yd[0]; i0++)
    for (int64_t i1 = 0; i1 < yd[1]; i1++)
      for (int64_t m = 0; m < yd[2]; m++)
        for (int64_t n = 0; n < yd[3]; n++) {
          int64_t a0 = ad[0] == 1 ? 0 : i0, a1 = ad[1] == 1 ? 0 : i1;
          int64_t b0 = bd[0] == 1 ? 0 : i0, b1 = bd[1] == 1 ? 0 : i1;
          double s = 0;
          for (int64_t k = 0; k < ad[3]; k++)
            s += (double)a[((a0 * ad[1] + a1) * ad[2] + m) * ad[3] + k] *
                 b[((b0 * bd[1] + b1) * bd[2] + k) * bd[3] + n];
          y[((i0 * yd[1] + i1) * yd[2] + m) * yd[3] + n] = (float)s;
        }
}

TestSuite(linalg_kernels);

Test(linalg_kernels, matmul_2x3_by_3x2) {
  float a[] = {1, 2, 3, 4, 5, 6}, b[] = {7, 8, 9, 10, 11, 12}, y[4];
  mx_kernel_call *c = kc_new(2, 1, NULL);
  kc_set(c, 0, MX_FLOAT32, 2, (int64_t[]){2, 3}, a);
  kc_set(c, 1, MX_FLOAT32, 2, (int64_t[]){3, 2}, b);
  kc_set(c, 2, MX_FLOAT32, 2, (int64_t[]){2, 2}, y);
  cr_assert_eq(kc_run("MatMul", c), MX_OK);
  expect_f32_near(y, (float[]){58, 64, 139, 154}, 4, 0);
  free(c);
}

Test(linalg_kernels, matmul_batch_broadcast_matches_naive) {
  /* [2,1,3,4] x [1,5,4,6] -> [2,5,3,6]: both sides broadcast a batch dim. */
  int64_t ad[] = {2, 1, 3, 4}, bd[] = {1, 5, 4, 6}, yd[] = {2, 5, 3, 6};
  float a[24], b[120], y[180], want[180];
  for (int i = 0; i < 24; i++) a[i] = (float)(i % 7) - 3.0f;
  for (int i = 0; i < 120; i++) b[i] = (float)(i % 5) * 0.5f - 1.0f;
  naive_bmm(a, ad, b, bd, want, yd);
  mx_kernel_call *c = kc_new(2, 1, NULL);
  kc_set(c, 0, MX_FLOAT32, 4, ad, a);
  kc_set(c, 1, MX_FLOAT32, 4, bd, b);
  kc_set(c, 2, MX_FLOAT32, 4, yd, y);
  cr_assert_eq(kc_run("MatMul", c), MX_OK);
  expect_f32_near(y, want, 180, 1e-6f);
  free(c);
}

Test(linalg_kernels, matmul_shared_weights_folds_batch) {
  /* [2,3,4] x [4,5]: the batch folds into 6 rows of one product. */
  int64_t ad[] = {1, 2, 3, 4}, bd[] = {1, 1, 4, 5}, yd[] = {1, 2, 3, 5};
  float a[24], b[20], y[30], want[30];
  for (int i = 0; i < 24; i++) a[i] = (float)i * 0.25f;
  for (int i = 0; i < 20; i++) b[i] = (float)(i % 3) - 1.0f;
  naive_bmm(a, ad, b, bd, want, yd);
  mx_kernel_call *c = kc_new(2, 1, NULL);
  kc_set(c, 0, MX_FLOAT32, 3, ad + 1, a);
  kc_set(c, 1, MX_FLOAT32, 2, bd + 2, b);
  kc_set(c, 2, MX_FLOAT32, 3, yd + 1, y);
  cr_assert_eq(kc_run("MatMul", c), MX_OK);
  expect_f32_near(y, want, 30, 1e-6f);
  free(c);
}

Test(linalg_kernels, matmul_one_d_operands) {
  float v[] = {1, 2, 3}, m[] = {1, 0, 0, 1, 1, 1}, y2[2], s;
  /* [3] x [3,2] -> [2] */
  mx_kernel_call *c = kc_new(2, 1, NULL);
  kc_set(c, 0, MX_FLOAT32, 1, (int64_t[]){3}, v);
  kc_set(c, 1, MX_FLOAT32, 2, (int64_t[]){3, 2}, m);
  kc_set(c, 2, MX_FLOAT32, 1, (int64_t[]){2}, y2);
  cr_assert_eq(kc_run("MatMul", c), MX_OK);
  expect_f32_near(y2, (float[]){4, 5}, 2, 0);
  /* [3] x [3] -> scalar */
  kc_set(c, 1, MX_FLOAT32, 1, (int64_t[]){3}, v);
  kc_set(c, 2, MX_FLOAT32, 0, NULL, &s);
  cr_assert_eq(kc_run("MatMul", c), MX_OK);
  cr_assert_float_eq(s, 14.0f, 0);
  free(c);
}

Test(linalg_kernels, matmul_zero_size_dims) {
  /* K = 0: the result is zeros. M = 0: nothing is written. */
  float y[4] = {9, 9, 9, 9}, dummy = 0;
  mx_kernel_call *c = kc_new(2, 1, NULL);
  kc_set(c, 0, MX_FLOAT32, 2, (int64_t[]){2, 0}, &dummy);
  kc_set(c, 1, MX_FLOAT32, 2, (int64_t[]){0, 2}, &dummy);
  kc_set(c, 2, MX_FLOAT32, 2, (int64_t[]){2, 2}, y);
  cr_assert_eq(kc_run("MatMul", c), MX_OK);
  expect_f32_near(y, (float[]){0, 0, 0, 0}, 4, 0);
  float y2[1] = {7};
  kc_set(c, 0, MX_FLOAT32, 2, (int64_t[]){0, 3}, &dummy);
  kc_set(c, 1, MX_FLOAT32, 2, (int64_t[]){3, 2}, &dummy);
  kc_set(c, 2, MX_FLOAT32, 2, (int64_t[]){0, 2}, y2);
  cr_assert_eq(kc_run("MatMul", c), MX_OK);
  cr_assert_float_eq(y2[0], 7.0f, 0);
  free(c);
}

Test(linalg_kernels, matmul_mismatch_is_kernel_error) {
  float a[6] = {0}, y[4];
  mx_kernel_call *c = kc_new(2, 1, NULL);
  kc_set(c, 0, MX_FLOAT32, 2, (int64_t[]){2, 3}, a);
  kc_set(c, 1, MX_FLOAT32, 2, (int64_t[]){2, 3}, a);
  kc_set(c, 2, MX_FLOAT32, 2, (int64_t[]){2, 3}, y);
  cr_assert_eq(kc_run("MatMul", c), MX_ERR_KERNEL);
  cr_assert(c->why && strstr(c->why, "contraction"));
  free(c);
}

Test(linalg_kernels, matmul_float16_rounds_once) {
  /* (1 + 2^-10)^2 = 1 + 2^-9 + 2^-20 rounds to 1 + 2^-9 in float16 (0x3C02). */
  uint16_t one_eps = mx__f32_to_f16(1.0f + 1.0f / 1024.0f);
  uint16_t a[3] = {one_eps}, b[3] = {one_eps}, y1, y2;
  mx_kernel_call *c = kc_new(2, 1, NULL);
  kc_set(c, 0, MX_FLOAT16, 2, (int64_t[]){1, 1}, a);
  kc_set(c, 1, MX_FLOAT16, 2, (int64_t[]){1, 1}, b);
  kc_set(c, 2, MX_FLOAT16, 2, (int64_t[]){1, 1}, &y1);
  cr_assert_eq(kc_run("MatMul", c), MX_OK);
  cr_assert_eq(y1, 0x3C02, "got 0x%04x", y1);
  /* 1 + 2^-11 + 2^-11 = 1 + 2^-10 (0x3C01) when summed in float32 and rounded once; rounding
   * after each float16 addition would tie to even twice and give 1.0 (0x3C00). */
  uint16_t one = mx__f32_to_f16(1.0f), tiny = mx__f32_to_f16(1.0f / 2048.0f);
  uint16_t a3[3] = {one, tiny, tiny}, b3[3] = {one, one, one};
  kc_set(c, 0, MX_FLOAT16, 2, (int64_t[]){1, 3}, a3);
  kc_set(c, 1, MX_FLOAT16, 2, (int64_t[]){3, 1}, b3);
  kc_set(c, 2, MX_FLOAT16, 2, (int64_t[]){1, 1}, &y2);
  cr_assert_eq(kc_run("MatMul", c), MX_OK);
  cr_assert_eq(y2, 0x3C01, "got 0x%04x", y2);
  free(c);
}

Test(linalg_kernels, matmul_bfloat16) {
  uint16_t a[4], b[4], y[4];
  float av[] = {1, 2, 3, 4}, bv[] = {0.5f, 0, 0, 2};
  for (int i = 0; i < 4; i++) a[i] = mx__f32_to_bf16(av[i]), b[i] = mx__f32_to_bf16(bv[i]);
  mx_kernel_call *c = kc_new(2, 1, NULL);
  kc_set(c, 0, MX_BFLOAT16, 2, (int64_t[]){2, 2}, a);
  kc_set(c, 1, MX_BFLOAT16, 2, (int64_t[]){2, 2}, b);
  kc_set(c, 2, MX_BFLOAT16, 2, (int64_t[]){2, 2}, y);
  cr_assert_eq(kc_run("MatMul", c), MX_OK);
  float want[] = {0.5f, 4, 1.5f, 8};
  for (int i = 0; i < 4; i++) cr_expect_float_eq(mx__bf16_to_f32(y[i]), want[i], 0);
  free(c);
}

Test(linalg_kernels, matmul_int32_wraps_int64_exact) {
  int32_t a[] = {INT32_MAX, 1}, b[] = {2, 3}, y;
  mx_kernel_call *c = kc_new(2, 1, NULL);
  kc_set(c, 0, MX_INT32, 1, (int64_t[]){2}, a);
  kc_set(c, 1, MX_INT32, 1, (int64_t[]){2}, b);
  kc_set(c, 2, MX_INT32, 0, NULL, &y);
  cr_assert_eq(kc_run("MatMul", c), MX_OK);
  cr_assert_eq(y, (int32_t)((uint32_t)INT32_MAX * 2u + 3u)); /* wraps to 1 */
  int64_t a64[] = {1, 2, 3, 4}, b64[] = {10000000000LL, 1, 2, 3}, y64[4];
  kc_set(c, 0, MX_INT64, 2, (int64_t[]){2, 2}, a64);
  kc_set(c, 1, MX_INT64, 2, (int64_t[]){2, 2}, b64);
  kc_set(c, 2, MX_INT64, 2, (int64_t[]){2, 2}, y64);
  cr_assert_eq(kc_run("MatMul", c), MX_OK);
  cr_assert_eq(y64[0], 10000000004LL);
  cr_assert_eq(y64[1], 7);
  cr_assert_eq(y64[2], 30000000008LL);
  cr_assert_eq(y64[3], 15);
  free(c);
}

Test(linalg_kernels, matmul_nan_and_inf_propagate) {
  float a[] = {NAN, 1, 1, 1}, b[] = {1, 0, 0, 1}, y[4];
  mx_kernel_call *c = kc_new(2, 1, NULL);
  kc_set(c, 0, MX_FLOAT32, 2, (int64_t[]){2, 2}, a);
  kc_set(c, 1, MX_FLOAT32, 2, (int64_t[]){2, 2}, b);
  kc_set(c, 2, MX_FLOAT32, 2, (int64_t[]){2, 2}, y);
  cr_assert_eq(kc_run("MatMul", c), MX_OK);
  cr_assert(isnan(y[0]));
  cr_assert_float_eq(y[2], 1.0f, 0);
  cr_assert_float_eq(y[3], 1.0f, 0);
  float ai[] = {INFINITY, 1}, bi[] = {1, 2}, yi;
  kc_set(c, 0, MX_FLOAT32, 1, (int64_t[]){2}, ai);
  kc_set(c, 1, MX_FLOAT32, 1, (int64_t[]){2}, bi);
  kc_set(c, 2, MX_FLOAT32, 0, NULL, &yi);
  cr_assert_eq(kc_run("MatMul", c), MX_OK);
  cr_assert(isinf(yi) && yi > 0);
  free(c);
}

Test(linalg_kernels, matmul_float64) {
  double a[] = {1, 2, 3, 4}, b[] = {1e-12, 0, 0, 1}, y[4];
  mx_kernel_call *c = kc_new(2, 1, NULL);
  kc_set(c, 0, MX_FLOAT64, 2, (int64_t[]){2, 2}, a);
  kc_set(c, 1, MX_FLOAT64, 2, (int64_t[]){2, 2}, b);
  kc_set(c, 2, MX_FLOAT64, 2, (int64_t[]){2, 2}, y);
  cr_assert_eq(kc_run("MatMul", c), MX_OK);
  cr_assert_eq(y[0], 1e-12);
  cr_assert_eq(y[1], 2.0);
  cr_assert_eq(y[2], 3e-12);
  cr_assert_eq(y[3], 4.0);
  free(c);
}

/* Single-row and single-column products (the gemv paths, which clear Y and accumulate into it)
 * over an output buffer full of NaN garbage, float32 and float64, against a double loop. */
Test(linalg_kernels, matmul_gemv_paths_ignore_old_output) {
  enum { K = 64, N = 172 };
  static float a[K], b[K * N], y[N];
  static double ad[K], bd[K * N], yd[N];
  for (int i = 0; i < K; i++) a[i] = (float)((i * 7) % 11) * 0.25f - 1.0f, ad[i] = a[i];
  for (int i = 0; i < K * N; i++) b[i] = (float)((i * 13) % 17) * 0.125f - 1.0f, bd[i] = b[i];
  /* [1,K] x [K,N] */
  for (int pass = 0; pass < 2; pass++) {
    bool dbl = pass == 1;
    mx_dtype dt = dbl ? MX_FLOAT64 : MX_FLOAT32;
    for (int i = 0; i < N; i++) y[i] = NAN, yd[i] = NAN;
    mx_kernel_call *c = kc_new(2, 1, NULL);
    kc_set(c, 0, dt, 2, DIMS(1, K), dbl ? (void *)ad : (void *)a);
    kc_set(c, 1, dt, 2, DIMS(K, N), dbl ? (void *)bd : (void *)b);
    kc_set(c, 2, dt, 2, DIMS(1, N), dbl ? (void *)yd : (void *)y);
    cr_assert_eq(kc_run("MatMul", c), MX_OK);
    for (int n = 0; n < N; n++) {
      double want = 0;
      for (int k = 0; k < K; k++) want += ad[k] * bd[k * N + n];
      double got = dbl ? yd[n] : y[n];
      cr_assert(fabs(got - want) <= 1e-5 * (1 + fabs(want)), "%s column %d: %g, want %g", dbl ? "f64" : "f32",
                n, got, want);
    }
    /* [N,K] x [K] (B 1-D: one column): B's first K values as the vector. */
    for (int i = 0; i < N; i++) y[i] = NAN, yd[i] = NAN;
    kc_set(c, 0, dt, 2, DIMS(N, K), dbl ? (void *)bd : (void *)b);
    kc_set(c, 1, dt, 1, DIMS(K), dbl ? (void *)ad : (void *)a);
    kc_set(c, 2, dt, 1, DIMS(N), dbl ? (void *)yd : (void *)y);
    cr_assert_eq(kc_run("MatMul", c), MX_OK);
    for (int m = 0; m < N; m++) {
      double want = 0;
      for (int k = 0; k < K; k++) want += bd[m * K + k] * ad[k];
      double got = dbl ? yd[m] : y[m];
      cr_assert(fabs(got - want) <= 1e-5 * (1 + fabs(want)), "%s row %d: %g, want %g", dbl ? "f64" : "f32", m,
                got, want);
    }
    free(c);
  }
}

/* Runs y = a[1, K] x b[K, N] through the MatMul kernel and checks every column against a
 * double-precision product. */
static void check_row_product(mx_kernel_call *c, const float *a, const float *b, float *y, int K, int N) {
  for (int i = 0; i < N; i++) y[i] = NAN;
  kc_set(c, 0, MX_FLOAT32, 2, DIMS(1, K), (void *)a);
  kc_set(c, 1, MX_FLOAT32, 2, DIMS(K, N), (void *)b);
  kc_set(c, 2, MX_FLOAT32, 2, DIMS(1, N), y);
  cr_assert_eq(kc_run("MatMul", c), MX_OK);
  for (int n = 0; n < N; n++) {
    double want = 0;
    for (int k = 0; k < K; k++) want += (double)a[k] * b[k * N + n];
    cr_assert(fabs(y[n] - want) <= 1e-5 * (1 + fabs(want)), "k %d n %d column %d: %g, want %g", K, N, n, y[n],
              want);
  }
}

/* A float32 row times a small matrix (the decode step's projections) for every width class of
 * its column blocks (32, 16, 8 and 4 columns, then single ones) and odd and even k, against a
 * double-precision product; an element's value does not depend on the width of B around it.
 * Larger B (walked row after row) against the same product. */
Test(linalg_kernels, matmul_row_widths_and_columns_agree) {
  enum { KMAX = 67, NMAX = 172 };
  static float a[KMAX], b[KMAX * NMAX], nb[KMAX * NMAX], y[NMAX], ny[NMAX];
  for (int i = 0; i < KMAX; i++) a[i] = (float)((i * 7) % 11) * 0.25f - 1.0f;
  for (int i = 0; i < KMAX * NMAX; i++) b[i] = (float)((i * 13) % 17) * 0.125f - 1.0f;
  const int ks[] = {1, 2, 3, 64, 67}, ns[] = {1, 3, 4, 7, 8, 13, 16, 31, 32, 33, 47, 63, 100, 172};
  mx_kernel_call *c = kc_new(2, 1, NULL);
  for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++)
    for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
      int K = ks[ki], N = ns[ni];
      check_row_product(c, a, b, y, K, N);
      /* The same columns inside the widest B: the same bits. */
      for (int k = 0; k < K; k++)
        for (int n = 0; n < NMAX; n++) nb[k * NMAX + n] = n < N ? b[k * N + n] : 0.5f;
      check_row_product(c, a, nb, ny, K, NMAX);
      cr_assert_eq(memcmp(y, ny, (size_t)N * sizeof(float)), 0, "k %d n %d: columns differ inside a wider B",
                   K, N);
    }
  /* B beyond 64 KB (walked row after row) up to the BLAS limit. */
  static const int big[][2] = {{256, 256}, {300, 100}, {100, 300}};
  static float ba[300], bb[300 * 300], by[300];
  for (int i = 0; i < 300; i++) ba[i] = (float)((i * 5) % 13) * 0.125f - 0.75f;
  for (int i = 0; i < 300 * 300; i++) bb[i] = (float)((i * 11) % 19) * 0.0625f - 0.5f;
  for (size_t t = 0; t < sizeof big / sizeof big[0]; t++)
    check_row_product(c, ba, bb, by, big[t][0], big[t][1]);
  free(c);
}

Test(linalg_kernels, gemm_transposes_alpha_beta_row_bias) {
  /* A^T with A = [[1,2],[3,4],[5,6]] (3x2) -> op(A) 2x3; B^T with B 2x3 -> op(B) 3x2. */
  float a[] = {1, 2, 3, 4, 5, 6}, b[] = {1, 0, 1, 0, 1, 0}, cb[] = {10, 20}, y[4];
  mx_gemm_params p = {.alpha = 2.0f, .beta = 0.5f, .trans_a = 1, .trans_b = 1};
  mx_kernel_call *c = kc_new(3, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 2, (int64_t[]){3, 2}, a);
  kc_set(c, 1, MX_FLOAT32, 2, (int64_t[]){2, 3}, b);
  kc_set(c, 2, MX_FLOAT32, 1, (int64_t[]){2}, cb);
  kc_set(c, 3, MX_FLOAT32, 2, (int64_t[]){2, 2}, y);
  cr_assert_eq(kc_run("Gemm", c), MX_OK);
  /* op(A) = [[1,3,5],[2,4,6]], op(B) = [[1,0],[0,1],[1,0]]: product [[6,3],[8,4]]. */
  expect_f32_near(y, (float[]){2 * 6 + 5, 2 * 3 + 10, 2 * 8 + 5, 2 * 4 + 10}, 4, 0);
  free(c);
}

Test(linalg_kernels, gemm_without_c_and_scalar_c) {
  float a[] = {1, 2, 3, 4}, b[] = {1, 1, 1, 1}, cs = 3, y[4];
  mx_gemm_params p = {.alpha = 1.0f, .beta = 1.0f};
  mx_kernel_call *c = kc_new(2, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 2, (int64_t[]){2, 2}, a);
  kc_set(c, 1, MX_FLOAT32, 2, (int64_t[]){2, 2}, b);
  kc_set(c, 2, MX_FLOAT32, 2, (int64_t[]){2, 2}, y);
  cr_assert_eq(kc_run("Gemm", c), MX_OK);
  expect_f32_near(y, (float[]){3, 3, 7, 7}, 4, 0);
  free(c);
  c = kc_new(3, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 2, (int64_t[]){2, 2}, a);
  kc_set(c, 1, MX_FLOAT32, 2, (int64_t[]){2, 2}, b);
  kc_set(c, 2, MX_FLOAT32, 0, NULL, &cs);
  kc_set(c, 3, MX_FLOAT32, 2, (int64_t[]){2, 2}, y);
  cr_assert_eq(kc_run("Gemm", c), MX_OK);
  expect_f32_near(y, (float[]){6, 6, 10, 10}, 4, 0);
  free(c);
}

Test(linalg_kernels, gemm_float64_and_float16_column_bias) {
  double a[] = {1, 2, 3, 4}, b[] = {2, 0, 0, 2}, cb[] = {1, -1}, y[4];
  mx_gemm_params p = {.alpha = 1.0f, .beta = 1.0f};
  mx_kernel_call *c = kc_new(3, 1, &p);
  kc_set(c, 0, MX_FLOAT64, 2, (int64_t[]){2, 2}, a);
  kc_set(c, 1, MX_FLOAT64, 2, (int64_t[]){2, 2}, b);
  kc_set(c, 2, MX_FLOAT64, 2, (int64_t[]){2, 1}, cb);
  kc_set(c, 3, MX_FLOAT64, 2, (int64_t[]){2, 2}, y);
  cr_assert_eq(kc_run("Gemm", c), MX_OK);
  cr_assert(y[0] == 3 && y[1] == 5 && y[2] == 5 && y[3] == 7);
  uint16_t ah[4], bh[4], chh[2], yh[4];
  for (int i = 0; i < 4; i++) ah[i] = mx__f32_to_f16((float)a[i]), bh[i] = mx__f32_to_f16((float)b[i]);
  chh[0] = mx__f32_to_f16(1), chh[1] = mx__f32_to_f16(-1);
  kc_set(c, 0, MX_FLOAT16, 2, (int64_t[]){2, 2}, ah);
  kc_set(c, 1, MX_FLOAT16, 2, (int64_t[]){2, 2}, bh);
  kc_set(c, 2, MX_FLOAT16, 2, (int64_t[]){2, 1}, chh);
  kc_set(c, 3, MX_FLOAT16, 2, (int64_t[]){2, 2}, yh);
  cr_assert_eq(kc_run("Gemm", c), MX_OK);
  float want[] = {3, 5, 5, 7};
  for (int i = 0; i < 4; i++) cr_expect_float_eq(mx__f16_to_f32(yh[i]), want[i], 0);
  free(c);
}

/* Einsum params through the op definition's own parser. */
static mx_einsum_params einsum_params(const char *eq, uint32_t n_inputs) {
  const mx_op_def *def = mx__op_find("", "Einsum");
  cr_assert(def);
  mx_attr a = mx_attr_string("equation", eq);
  mx_parse_ctx pc = {def, &a, 1, 12, n_inputs, 1, "einsum", NULL};
  mx_einsum_params p;
  cr_assert_eq(def->parse(&pc, &p), MX_OK, "parse of '%s'", eq);
  return p;
}

Test(linalg_kernels, einsum_batched_matmul_fast_path) {
  /* "bij,bkj->bik": B transposed inside the equation; runs through sgemm. */
  mx_einsum_params p = einsum_params("bij,bkj->bik", 2);
  float a[] = {1, 2, 3, 4, 5, 6, 7, 8}, b[] = {1, 0, 0, 1, 2, 1, 1, 2}, y[8];
  mx_kernel_call *c = kc_new(2, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 3, (int64_t[]){2, 2, 2}, a);
  kc_set(c, 1, MX_FLOAT32, 3, (int64_t[]){2, 2, 2}, b);
  kc_set(c, 2, MX_FLOAT32, 3, (int64_t[]){2, 2, 2}, y);
  cr_assert_eq(kc_run("Einsum", c), MX_OK);
  /* batch 0: A=[[1,2],[3,4]], B^T rows [1,0],[0,1] -> A; batch 1: A=[[5,6],[7,8]] x [[2,1],[1,2]]^T. */
  expect_f32_near(y, (float[]){1, 2, 3, 4, 16, 17, 22, 23}, 8, 0);
  free(c);
}

Test(linalg_kernels, einsum_diagonal_trace_transpose) {
  double m[] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, d[3], tr, t[9];
  mx_einsum_params p1 = einsum_params("ii->i", 1), p2 = einsum_params("ii", 1),
                   p3 = einsum_params("ij->ji", 1);
  mx_kernel_call *c = kc_new(1, 1, &p1);
  kc_set(c, 0, MX_FLOAT64, 2, (int64_t[]){3, 3}, m);
  kc_set(c, 1, MX_FLOAT64, 1, (int64_t[]){3}, d);
  cr_assert_eq(kc_run("Einsum", c), MX_OK);
  cr_assert(d[0] == 1 && d[1] == 5 && d[2] == 9);
  c->params = &p2;
  kc_set(c, 1, MX_FLOAT64, 0, NULL, &tr);
  cr_assert_eq(kc_run("Einsum", c), MX_OK);
  cr_assert_eq(tr, 15.0);
  c->params = &p3;
  kc_set(c, 1, MX_FLOAT64, 2, (int64_t[]){3, 3}, t);
  cr_assert_eq(kc_run("Einsum", c), MX_OK);
  cr_assert(t[1] == 4 && t[3] == 2 && t[8] == 9);
  free(c);
}

Test(linalg_kernels, einsum_ellipsis_broadcast_generic) {
  /* "...ij,...jk->...ik" with batch [2,1] x [3]: broadcasting forces the generic loop. */
  int64_t ad[] = {2, 1, 2, 2}, bd[] = {1, 3, 2, 2}, yd[] = {2, 3, 2, 2};
  float a[8], b[12], y[24], want[24];
  for (int i = 0; i < 8; i++) a[i] = (float)i;
  for (int i = 0; i < 12; i++) b[i] = (float)(i % 4) - 1.5f;
  naive_bmm(a, ad, b, bd, want, yd);
  mx_einsum_params p = einsum_params("...ij,...jk->...ik", 2);
  mx_kernel_call *c = kc_new(2, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 4, ad, a);
  kc_set(c, 1, MX_FLOAT32, 3, bd + 1, b);
  kc_set(c, 2, MX_FLOAT32, 4, yd, y);
  cr_assert_eq(kc_run("Einsum", c), MX_OK);
  expect_f32_near(y, want, 24, 1e-6f);
  free(c);
}

Test(linalg_kernels, einsum_sum_outer_and_integers) {
  int64_t a[] = {1, 2, 3}, b[] = {10, 20}, outer[6], total;
  mx_einsum_params p = einsum_params("i,j", 2), ps = einsum_params("i->", 1);
  mx_kernel_call *c = kc_new(2, 1, &p);
  kc_set(c, 0, MX_INT64, 1, (int64_t[]){3}, a);
  kc_set(c, 1, MX_INT64, 1, (int64_t[]){2}, b);
  kc_set(c, 2, MX_INT64, 2, (int64_t[]){3, 2}, outer);
  cr_assert_eq(kc_run("Einsum", c), MX_OK);
  int64_t want[] = {10, 20, 20, 40, 30, 60};
  for (int i = 0; i < 6; i++) cr_expect_eq(outer[i], want[i]);
  free(c);
  c = kc_new(1, 1, &ps);
  kc_set(c, 0, MX_INT64, 1, (int64_t[]){3}, a);
  kc_set(c, 1, MX_INT64, 0, NULL, &total);
  cr_assert_eq(kc_run("Einsum", c), MX_OK);
  cr_assert_eq(total, 6);
  free(c);
}

Test(linalg_kernels, einsum_empty_sum_is_zero) {
  float dummy = 0, y[2] = {5, 5};
  mx_einsum_params p = einsum_params("ij->i", 1);
  mx_kernel_call *c = kc_new(1, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 2, (int64_t[]){2, 0}, &dummy);
  kc_set(c, 1, MX_FLOAT32, 1, (int64_t[]){2}, y);
  cr_assert_eq(kc_run("Einsum", c), MX_OK);
  cr_assert(y[0] == 0 && y[1] == 0);
  /* The same with an empty float64 operand whose data pointer is NULL. */
  double yd[3] = {5, 5, 5};
  mx_einsum_params pj = einsum_params("ij->j", 1);
  c->params = &pj;
  kc_set(c, 0, MX_FLOAT64, 2, (int64_t[]){0, 3}, NULL);
  kc_set(c, 1, MX_FLOAT64, 1, (int64_t[]){3}, yd);
  cr_assert_eq(kc_run("Einsum", c), MX_OK);
  cr_assert(yd[0] == 0 && yd[1] == 0 && yd[2] == 0);
  free(c);
}

Test(linalg_kernels, einsum_size_mismatch_is_kernel_error) {
  float a[6] = {0}, y[4];
  mx_einsum_params p = einsum_params("ij,jk->ik", 2);
  mx_kernel_call *c = kc_new(2, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 2, (int64_t[]){2, 3}, a);
  kc_set(c, 1, MX_FLOAT32, 2, (int64_t[]){2, 3}, a);
  kc_set(c, 2, MX_FLOAT32, 2, (int64_t[]){2, 2}, y);
  cr_assert_eq(kc_run("Einsum", c), MX_ERR_KERNEL);
  cr_assert(c->why != NULL);
  free(c);
}
