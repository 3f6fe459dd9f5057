/* MatMul and Gemm on the intra-op threads (kernels/linalg_threads.c): a large float32 product
 * split in bands of rows (with the fused bias and activation applied per band), in bands of
 * columns (few rows), a batch split by product, a folded batch, and Gemm with a broadcast C,
 * alpha and beta, each computed on 2 and 3 threads and compared with the same kernel on one. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "graph/ops/linalg_params.h"
#include "kernels/kernel.h"
#include "kernels/kernels_support.h"
#include "kernels/threads.h"

TestSuite(matmul_threads);

static uint32_t seed = 4242u;
static float *random_floats(int64_t n) { return ks_rnd_buf(&seed, n); }

static int64_t numel(int32_t rank, const int64_t *dims) {
  int64_t n = 1;
  for (int32_t i = 0; i < rank; i++) n *= dims[i];
  return n;
}

/* Runs op on inputs a, b (and c when c_rank > 0) into a fresh output with `threads` threads. */
static float *run_on(const char *op, const void *params, int32_t threads, int32_t ra, const int64_t *da,
                     const float *a, int32_t rb, const int64_t *db, const float *b, int32_t rc,
                     const int64_t *dc, const float *c, int32_t ry, const int64_t *dy) {
  int64_t ny = numel(ry, dy);
  float *y = malloc((size_t)ny * sizeof *y);
  cr_assert(y);
  for (int64_t i = 0; i < ny; i++) y[i] = -12345.0f; /* every element must be written */
  uint16_t n_in = rc ? 3 : 2;
  mx_kernel_call *call = kc_new(n_in, 1, params);
  kc_set(call, 0, MX_FLOAT32, ra, da, (void *)a);
  kc_set(call, 1, MX_FLOAT32, rb, db, (void *)b);
  if (rc) kc_set(call, 2, MX_FLOAT32, rc, dc, (void *)c);
  kc_set(call, n_in, MX_FLOAT32, ry, dy, y);
  mx__kthreads_set(threads);
  mx_status st = kc_run(op, call);
  mx__kthreads_set(1);
  cr_assert_eq(st, MX_OK, "%s: %s", op, call->why ? call->why : "");
  free(call);
  return y;
}

/* The product on 2 and 3 threads equals the one on 1 thread (to rounding). */
static void check(const char *op, const void *params, int32_t ra, const int64_t *da, int32_t rb,
                  const int64_t *db, int32_t rc, const int64_t *dc, int32_t ry, const int64_t *dy) {
  float *a = random_floats(numel(ra, da)), *b = random_floats(numel(rb, db));
  float *c = rc ? random_floats(numel(rc, dc)) : NULL;
  float *want = run_on(op, params, 1, ra, da, a, rb, db, b, rc, dc, c, ry, dy);
  for (int32_t threads = 2; threads <= 3; threads++) {
    float *got = run_on(op, params, threads, ra, da, a, rb, db, b, rc, dc, c, ry, dy);
    expect_f32_near(got, want, numel(ry, dy), 1e-5f);
    free(got);
  }
  free(want);
  free(a);
  free(b);
  free(c);
}

Test(matmul_threads, bands_of_rows) {
  check("MatMul", NULL, 2, DIMS(96, 256), 2, DIMS(256, 128), 0, NULL, 2, DIMS(96, 128));
}

Test(matmul_threads, transposed_operands_with_bias_and_relu_per_band) {
  mx_matmul_params p = {.trans_a = 1, .trans_b = 1, .has_bias = 1, .fused_act = MX_MATMUL_ACT_RELU};
  /* A stored [k, m], B stored [n, k]; 24 rows: two bands of 16 and 8. */
  check("MatMul", &p, 2, DIMS(640, 24), 2, DIMS(200, 640), 1, DIMS(200), 2, DIMS(24, 200));
}

Test(matmul_threads, few_rows_split_by_columns) {
  check("MatMul", NULL, 2, DIMS(4, 512), 2, DIMS(512, 2000), 0, NULL, 2, DIMS(4, 2000));
  mx_matmul_params p = {.trans_b = 1};
  check("MatMul", &p, 2, DIMS(3, 512), 2, DIMS(1500, 512), 0, NULL, 2, DIMS(3, 1500));
}

Test(matmul_threads, batch_split_by_product_and_folded_batch) {
  check("MatMul", NULL, 3, DIMS(6, 64, 96), 3, DIMS(6, 96, 80), 0, NULL, 3, DIMS(6, 64, 80));
  /* B shared by the batch: one product of 4 x 32 rows. */
  check("MatMul", NULL, 3, DIMS(4, 32, 128), 2, DIMS(128, 160), 0, NULL, 3, DIMS(4, 32, 160));
}

Test(matmul_threads, gemm_with_broadcast_c) {
  mx_gemm_params p = {.alpha = 0.5f, .beta = 2.0f, .trans_b = 1};
  check("Gemm", &p, 2, DIMS(100, 300), 2, DIMS(200, 300), 1, DIMS(200), 2, DIMS(100, 200));
  mx_gemm_params q = {.alpha = 1.0f, .beta = 0.0f, .trans_a = 1};
  check("Gemm", &q, 2, DIMS(300, 64), 2, DIMS(300, 256), 0, NULL, 2, DIMS(64, 256));
}
