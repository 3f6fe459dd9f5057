/* float32 MatMul on the own packed GEMM (kernels/gemm_f32_matmul.c): edge shapes around the
 * register tile and the panel width, transposed B, batch broadcast and folded batches, the fused
 * bias and activations on each tile, against a double-precision reference; and the same bits on
 * 1 and 2 threads and with the AVX2 and AVX-512 copies. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph/ops/linalg_params.h"
#include "kernels/gemm_f32.h"
#include "kernels/kernel.h"
#include "kernels/kernels_support.h"
#include "kernels/threads.h"

static void restore_auto(void) {
  mx__kgemm_f32_use(0);
  mx__kthreads_set(1);
}
TestSuite(matmul_gemm, .fini = restore_auto);

static uint32_t seed = 777u;
static float *random_floats(int64_t n) {
  float *p = malloc((size_t)(n ? n : 1) * sizeof *p);
  cr_assert(p);
  for (int64_t i = 0; i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    p[i] = (float)(seed >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
  }
  return p;
}

/* One case: A [batch_a, m, k], B [batch_b, k, n] (or [batch_b, n, k] with tb); batch 0 means
 * the operand is 2-D; the output's batch is the larger one. */
typedef struct mm_case {
  int64_t batch_a, batch_b, m, k, n;
  int tb, bias, act;
} mm_case;

static float *run_case(const mm_case *t, const float *a, const float *b, const float *bias, int32_t threads) {
  int64_t batch = t->batch_a > t->batch_b ? t->batch_a : t->batch_b;
  if (batch == 0) batch = 1;
  int64_t ny = batch * t->m * t->n;
  float *y = malloc((size_t)ny * sizeof *y);
  cr_assert(y);
  for (int64_t i = 0; i < ny; i++) y[i] = -12345.0f; /* every element must be written */
  mx_matmul_params p = {.trans_b = t->tb, .has_bias = t->bias, .fused_act = t->act};
  uint16_t n_in = t->bias ? 3 : 2;
  mx_kernel_call *call = kc_new(n_in, 1, &p);
  int64_t da[3] = {t->batch_a, t->m, t->k}, db[3] = {t->batch_b, t->tb ? t->n : t->k, t->tb ? t->k : t->n};
  int64_t dy[3] = {batch, t->m, t->n}, dbias[1] = {t->n};
  kc_set(call, 0, MX_FLOAT32, t->batch_a ? 3 : 2, t->batch_a ? da : da + 1, (void *)a);
  kc_set(call, 1, MX_FLOAT32, t->batch_b ? 3 : 2, t->batch_b ? db : db + 1, (void *)b);
  if (t->bias) kc_set(call, 2, MX_FLOAT32, 1, dbias, (void *)bias);
  bool batched = t->batch_a || t->batch_b;
  kc_set(call, n_in, MX_FLOAT32, batched ? 3 : 2, batched ? dy : dy + 1, y);
  mx__kthreads_set(threads);
  mx_status st = kc_run("MatMul", call);
  mx__kthreads_set(1);
  cr_assert_eq(st, MX_OK, "MatMul: %s", call->why ? call->why : "");
  free(call);
  return y;
}

static double act_ref(int act, double x) {
  switch (act) {
    case MX_MATMUL_ACT_RELU: return x > 0 ? x : 0;
    case MX_MATMUL_ACT_GELU: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    case MX_MATMUL_ACT_SIGMOID: return 1.0 / (1.0 + exp(-x));
    default: return x;
  }
}

static void check_case(mm_case t) {
  int64_t ba = t.batch_a ? t.batch_a : 1, bb = t.batch_b ? t.batch_b : 1;
  int64_t batch = ba > bb ? ba : bb;
  float *a = random_floats(ba * t.m * t.k), *b = random_floats(bb * t.k * t.n), *bias = random_floats(t.n);
  float *want = run_case(&t, a, b, bias, 1);
  for (int64_t q = 0; q < batch; q++) {
    const float *aq = a + (ba == 1 ? 0 : q) * t.m * t.k, *bq = b + (bb == 1 ? 0 : q) * t.k * t.n;
    for (int64_t i = 0; i < t.m; i++)
      for (int64_t j = 0; j < t.n; j++) {
        double s = 0;
        for (int64_t l = 0; l < t.k; l++) s += (double)aq[i * t.k + l] * (double)(t.tb ? bq[j * t.k + l] : bq[l * t.n + j]);
        if (t.bias) s += bias[j];
        s = act_ref(t.act, s);
        float got = want[(q * t.m + i) * t.n + j];
        cr_assert(fabs(got - s) <= 1e-4 + 1e-4 * fabs(s), "m %lld k %lld n %lld [%lld,%lld,%lld]: %g vs %g",
                  (long long)t.m, (long long)t.k, (long long)t.n, (long long)q, (long long)i, (long long)j,
                  (double)got, s);
      }
  }
  float *two = run_case(&t, a, b, bias, 2);
  expect_f32_same(two, want, batch * t.m * t.n);
  free(two);
  /* the other ISA copy (when the CPU has both) gives the same bits */
  int top = mx__kgemm_f32_use(3);
  if (top == 3 && mx__kgemm_f32_use(2) == 2) {
    float *avx2 = run_case(&t, a, b, bias, 1);
    expect_f32_same(avx2, want, batch * t.m * t.n);
    free(avx2);
  }
  mx__kgemm_f32_use(0);
  free(want);
  free(a);
  free(b);
  free(bias);
}

Test(matmul_gemm, edge_shapes) {
  const int64_t ms[] = {2, 6, 13, 14, 15, 29, 128}, ns[] = {2, 7, 16, 17, 31, 32, 33, 64, 100}, ks[] = {1, 5, 64, 300};
  for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
    for (size_t j = 0; j < sizeof ns / sizeof ns[0]; j++)
      for (size_t l = 0; l < sizeof ks / sizeof ks[0]; l++)
        check_case((mm_case){.m = ms[i], .n = ns[j], .k = ks[l]});
}

Test(matmul_gemm, transposed_b) {
  check_case((mm_case){.m = 128, .n = 128, .k = 16, .tb = 1});
  check_case((mm_case){.m = 17, .n = 45, .k = 270, .tb = 1});
  check_case((mm_case){.batch_a = 4, .batch_b = 4, .m = 128, .n = 128, .k = 16, .tb = 1});
}

Test(matmul_gemm, batch_broadcast_and_fold) {
  check_case((mm_case){.batch_a = 5, .batch_b = 0, .m = 24, .n = 40, .k = 64});  /* folded */
  check_case((mm_case){.batch_a = 0, .batch_b = 3, .m = 24, .n = 40, .k = 64});  /* A broadcast */
  check_case((mm_case){.batch_a = 1, .batch_b = 6, .m = 30, .n = 20, .k = 33});
  check_case((mm_case){.batch_a = 8, .batch_b = 8, .m = 128, .n = 16, .k = 128}); /* attention x V */
}

Test(matmul_gemm, bias_and_activation_epilogues) {
  check_case((mm_case){.m = 128, .n = 256, .k = 64, .bias = 1, .act = MX_MATMUL_ACT_GELU});
  check_case((mm_case){.m = 128, .n = 64, .k = 256, .bias = 1});
  check_case((mm_case){.m = 37, .n = 50, .k = 70, .bias = 1, .act = MX_MATMUL_ACT_RELU});
  check_case((mm_case){.batch_a = 3, .batch_b = 0, .m = 9, .n = 100, .k = 20, .act = MX_MATMUL_ACT_SIGMOID});
  check_case((mm_case){.m = 300, .n = 200, .k = 120, .tb = 1, .bias = 1, .act = MX_MATMUL_ACT_GELU});
}

/* Gemm with alpha 1: C broadcast ([n], [m, 1], [m, n]) times beta added per tile, B transposed or
 * not, a fused activation; against the reference, and 2 threads against 1. */
static float *run_gemm(const mx_gemm_params *p, int64_t m, int64_t n, int64_t k, const float *a, const float *b,
                       int32_t rc, const int64_t *dc, const float *c, int32_t threads) {
  float *y = malloc((size_t)(m * n) * sizeof *y);
  cr_assert(y);
  mx_kernel_call *call = kc_new(rc ? 3 : 2, 1, p);
  int64_t da[2] = {m, k}, db[2] = {p->trans_b ? n : k, p->trans_b ? k : n}, dy[2] = {m, n};
  kc_set(call, 0, MX_FLOAT32, 2, da, (void *)a);
  kc_set(call, 1, MX_FLOAT32, 2, db, (void *)b);
  if (rc) kc_set(call, 2, MX_FLOAT32, rc, dc, (void *)c);
  kc_set(call, rc ? 3 : 2, MX_FLOAT32, 2, dy, y);
  mx__kthreads_set(threads);
  mx_status st = kc_run("Gemm", call);
  mx__kthreads_set(1);
  cr_assert_eq(st, MX_OK, "Gemm: %s", call->why ? call->why : "");
  free(call);
  return y;
}

static void check_gemm(int64_t m, int64_t n, int64_t k, int tb, float beta, int act, int32_t rc, const int64_t *dc) {
  mx_gemm_params p = {.alpha = 1.0f, .beta = beta, .trans_b = tb, .fused_act = act};
  float *a = random_floats(m * k), *b = random_floats(k * n), *c = random_floats(m * n);
  float *want = run_gemm(&p, m, n, k, a, b, rc, dc, c, 1);
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double s = 0;
      for (int64_t l = 0; l < k; l++) s += (double)a[i * k + l] * (double)(tb ? b[j * k + l] : b[l * n + j]);
      if (rc) {
        int64_t ci = rc == 1 ? j : dc[1] == 1 ? i : i * n + j;
        s += (double)beta * c[ci];
      }
      s = act_ref(act, s);
      cr_assert(fabs(want[i * n + j] - s) <= 1e-4 + 1e-4 * fabs(s), "Gemm [%lld,%lld]: %g vs %g", (long long)i,
                (long long)j, (double)want[i * n + j], s);
    }
  float *two = run_gemm(&p, m, n, k, a, b, rc, dc, c, 2);
  expect_f32_same(two, want, m * n);
  free(two);
  free(want);
  free(a);
  free(b);
  free(c);
}

Test(matmul_gemm, gemm_c_beta_and_activation_per_tile) {
  check_gemm(128, 64, 64, 1, 1.0f, 0, 1, (const int64_t[]){64});
  check_gemm(33, 70, 300, 0, 0.5f, MX_MATMUL_ACT_RELU, 2, (const int64_t[]){33, 1});
  check_gemm(200, 300, 150, 1, 2.0f, MX_MATMUL_ACT_GELU, 2, (const int64_t[]){200, 300});
  check_gemm(5, 3, 7, 0, 0.0f, 0, 0, NULL);
}
