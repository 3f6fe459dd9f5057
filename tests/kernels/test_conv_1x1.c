/* Kernel tests of B read in place by the own float32 GEMM (mx__kgemm_f32_strided_pre,
 * kernels/gemm_f32.c) and of the 1x1 stride-1 Convs that read their image that way
 * (kernels/conv_fast.c): the strided B gives the packed B's bits on both ISA copies, with and
 * without pre-packed weights, for n past whole panels, inside a half panel, narrow (run
 * transposed) and k over several blocks, never reading the columns past n of a row; every tile
 * goes through the tile callback once; 1x1 Convs with bias, a residual and every fused
 * activation are near a double reference and give the same bits on 1, 2 and 3 threads.
 * Skipped where the CPU has neither own GEMM copy. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph/ops/conv_params.h"
#include "kernels/gemm_f32.h"
#include "kernels/kernel.h"
#include "kernels/kernels_support.h"
#include "kernels/threads.h"

static void restore(void) {
  mx__kgemm_f32_use(0);
  mx__kthreads_set(1);
}

TestSuite(conv_1x1, .fini = restore);

static uint32_t seed = 777u;

static float *rnd_buf(int64_t n) { return ks_rnd_buf(&seed, n); }

/* Counts the visits of each output by the tile callback. */
typedef struct visits {
  int *count;
  int64_t n;
} visits;

static void count_tile(void *ctx, int64_t row0, int64_t rows, int64_t col0, int64_t cols) {
  visits *v = ctx;
  for (int64_t i = row0; i < row0 + rows; i++)
    for (int64_t j = col0; j < col0 + cols; j++) v->count[i * v->n + j]++;
}

/* C = A x B[k, n] with B's rows ldb apart: packed (reference) and read in place, on the copy
 * `level`, with weights packed per product or ahead (pre); the two must be the same bits. */
static void strided_against_packed(int level, int64_t m, int64_t n, int64_t k, int64_t ldb, bool pre) {
  mx__kgemm_f32_use(level);
  float *a = rnd_buf(m * k), *b = rnd_buf(k * ldb);
  /* the columns past n hold NaN: a product that read them would spread it to its outputs */
  for (int64_t r = 0; r < k; r++)
    for (int64_t j = n; j < ldb; j++) b[r * ldb + j] = NAN;
  float *c1 = malloc((size_t)(m * n) * 4), *c2 = malloc((size_t)(m * n) * 4);
  float *bp = aligned_alloc(64, (mx__kgemm_f32_packed_b_floats(k, n) * 4 + 64) / 64 * 64);
  float *as = aligned_alloc(64, (mx__kgemm_f32_a_floats(m) * 4 + 63) / 64 * 64);
  const int64_t mr = mx__kgemm_f32_row_granule(m, n), mpad = (m + mr - 1) / mr * mr;
  float *ap = aligned_alloc(64, (mx__kgemm_f32_pre_a_floats(m, k, mr) * 4 + 63) / 64 * 64);
  int *count = calloc((size_t)(m * n), sizeof *count);
  cr_assert(c1 && c2 && bp && as && ap && count);
  for (int64_t r = 0; r < k; r++) mx__kgemm_f32_pack_b_row(b + r * ldb, n, k, r, bp);
  mx__kgemm_f32_pre_a_pack(a, k, m, k, mr, 0, m, ap);
  mx_kgemm_f32_pre_a pa = {ap, mr, mpad, 0};
  for (int64_t i = 0; i < m * n; i++) c1[i] = c2[i] = NAN; /* every output must be written */
  mx__kgemm_f32_packed_pre(m, n, k, a, k, pre ? &pa : NULL, bp, c1, n, as, NULL, NULL);
  visits v = {count, n};
  mx__kgemm_f32_strided_pre(m, n, k, a, k, pre ? &pa : NULL, b, ldb, c2, n, as, count_tile, &v);
  cr_expect(memcmp(c1, c2, (size_t)(m * n) * 4) == 0, "copy %d, %lldx%lldx%lld (ldb %lld, pre %d): strided B differs",
            level, (long long)m, (long long)n, (long long)k, (long long)ldb, (int)pre);
  int64_t wrong = 0;
  for (int64_t i = 0; i < m * n; i++) wrong += count[i] != 1 || isnan(c2[i]);
  cr_expect_eq(wrong, 0, "copy %d, %lldx%lldx%lld: %lld outputs not visited once or NaN", level, (long long)m,
               (long long)n, (long long)k, (long long)wrong);
  free(a);
  free(b);
  free(c1);
  free(c2);
  free(bp);
  free(as);
  free(ap);
  free(count);
}

Test(conv_1x1, strided_b_gives_the_packed_bits) {
  if (!mx__kgemm_f32_available()) cr_skip_test("no AVX-512 or AVX2 copy on this CPU");
  /* m, n, k, ldb: whole panels, a 16-column half, tails of 1, 5, 17 and 31, narrow n run
   * transposed (49, 20), k past one and several 256 blocks, odd m */
  static const int64_t shapes[][4] = {{64, 128, 64, 3136},  {15, 48, 257, 50},   {29, 33, 300, 40},
                                      {100, 37, 513, 37},   {7, 63, 9, 64},      {256, 49, 600, 52},
                                      {70, 20, 40, 21},     {1, 1, 1, 1},        {131, 784, 128, 784},
                                      {14, 224, 520, 230},  {33, 31, 17, 31},    {169, 96, 1030, 100}};
  for (int level = 3; level >= 2; level--)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
      for (int pre = 0; pre < 2; pre++)
        strided_against_packed(level, shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], pre);
}

/* --- 1x1 Convs -------------------------------------------------------------------------------- */

/* A 1x1 stride-1 Conv: batch, channels in, map height and width, channels out, activation,
 * with a residual or not. */
typedef struct pcase {
  int64_t n, c, h, w, m;
  int32_t act;
  bool residual;
} pcase;

static void run_conv(const pcase *t, const float *x, const float *wt, const float *b, const float *z,
                     int32_t threads, float *y) {
  mx_conv_params p;
  memset(&p, 0, sizeof p);
  p.op = MX_CONVOP_CONV;
  p.group = 1;
  p.n_strides = p.n_dilations = 2;
  p.strides[0] = p.strides[1] = 1;
  p.dilations[0] = p.dilations[1] = 1;
  p.n_pads = 4;
  p.fused_act = t->act;
  p.act_alpha = t->act == MX_CONV_ACT_HARD_SIGMOID ? 0.2f : -0.25f;
  p.act_beta = t->act == MX_CONV_ACT_HARD_SIGMOID ? 0.5f : 0.75f;
  mx__kthreads_set(threads);
  const int64_t ny = t->n * t->m * t->h * t->w;
  for (int64_t i = 0; i < ny; i++) y[i] = NAN;
  mx_kernel_call *c = kc_new(t->residual ? 4 : 3, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 4, DIMS(t->n, t->c, t->h, t->w), (void *)x);
  kc_set(c, 1, MX_FLOAT32, 4, DIMS(t->m, t->c, 1, 1), (void *)wt);
  kc_set(c, 2, MX_FLOAT32, 1, DIMS(t->m), (void *)b);
  if (t->residual) kc_set(c, 3, MX_FLOAT32, 4, DIMS(t->n, t->m, t->h, t->w), (void *)z);
  kc_set(c, t->residual ? 4 : 3, MX_FLOAT32, 4, DIMS(t->n, t->m, t->h, t->w), y);
  cr_assert_eq(kc_run("Conv", c), MX_OK, "%s", c->why ? c->why : "");
  free(c);
}

static double act_double(int32_t act, double v) {
  switch (act) {
    case MX_CONV_ACT_RELU: return v > 0.0 ? v : 0.0;
    case MX_CONV_ACT_CLIP: return v < -0.25 ? -0.25 : (v > 0.75 ? 0.75 : v);
    case MX_CONV_ACT_HARD_SIGMOID: {
      double t = 0.2 * v + 0.5;
      return t < 0.0 ? 0.0 : (t > 1.0 ? 1.0 : t);
    }
    case MX_CONV_ACT_HARD_SWISH: {
      double t = v / 6.0 + 0.5;
      return v * (t < 0.0 ? 0.0 : (t > 1.0 ? 1.0 : t));
    }
    case MX_CONV_ACT_SIGMOID: return 1.0 / (1.0 + exp(-v));
    case MX_CONV_ACT_SILU: return v / (1.0 + exp(-v));
    default: return v;
  }
}

static const pcase pcases[] = {
    {1, 64, 28, 28, 40, MX_CONV_ACT_RELU, true},       /* 784 columns: 24 panels and a half */
    {1, 96, 32, 32, 50, MX_CONV_ACT_CLIP, false},       /* 1024: whole panels */
    {2, 40, 24, 30, 33, MX_CONV_ACT_HARD_SIGMOID, true}, /* two images, 720 columns */
    {1, 300, 16, 48, 29, MX_CONV_ACT_HARD_SWISH, false}, /* k over two blocks */
    {1, 24, 56, 56, 70, MX_CONV_ACT_SIGMOID, true},     /* a 56x56 map in several bands */
    {1, 48, 16, 32, 64, MX_CONV_ACT_SILU, false},
    {1, 70, 14, 14, 60, MX_CONV_ACT_NONE, true},        /* 196 columns */
    {1, 520, 7, 7, 90, MX_CONV_ACT_RELU, true},         /* 49 columns: narrow, transposed */
    {1, 33, 9, 11, 17, MX_CONV_ACT_NONE, false},        /* odd sizes */
};

Test(conv_1x1, every_epilogue_near_double_and_equal_on_1_2_3_threads) {
  if (!mx__kgemm_f32_available()) cr_skip_test("no AVX-512 or AVX2 copy on this CPU");
  for (size_t s = 0; s < sizeof pcases / sizeof pcases[0]; s++) {
    const pcase *t = &pcases[s];
    const int64_t P = t->h * t->w, nx = t->n * t->c * P, ny = t->n * t->m * P;
    seed = 99u + (uint32_t)s;
    float *x = rnd_buf(nx), *wt = rnd_buf(t->m * t->c), *b = rnd_buf(t->m), *z = rnd_buf(ny);
    float *y1 = malloc((size_t)ny * 4), *yt = malloc((size_t)ny * 4);
    cr_assert(y1 && yt);
    run_conv(t, x, wt, b, z, 1, y1);
    int64_t bad = 0;
    for (int64_t in = 0; in < t->n; in++)
      for (int64_t o = 0; o < t->m; o++)
        for (int64_t q = 0; q < P; q++) {
          double acc = 0.0, mag = 0.0;
          for (int64_t ci = 0; ci < t->c; ci++) {
            double v = (double)wt[o * t->c + ci] * x[(in * t->c + ci) * P + q];
            acc += v;
            mag += fabs(v);
          }
          const int64_t at = (in * t->m + o) * P + q;
          const double want = act_double(t->act, acc + b[o] + (t->residual ? z[at] : 0.0));
          if (!(fabs(y1[at] - want) <= 1e-5 * (mag + 1.0)) && bad++ < 5)
            cr_expect(0, "case %zu at %lld: %g, want %g", s, (long long)at, y1[at], want);
        }
    cr_expect_eq(bad, 0, "case %zu: %lld outputs off the double reference", s, (long long)bad);
    for (int32_t threads = 2; threads <= 3; threads++) {
      run_conv(t, x, wt, b, z, threads, yt);
      cr_expect(memcmp(y1, yt, (size_t)ny * 4) == 0, "case %zu: 1 and %d threads differ", s, threads);
    }
    free(x);
    free(wt);
    free(b);
    free(z);
    free(y1);
    free(yt);
  }
}
