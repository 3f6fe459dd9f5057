/* Kernel tests of mixrt's packed float32 GEMM (kernels/gemm_f32.c) and of the Conv paths that run
 * through it (kernels/conv_fast.c): products whose m, n and k are not multiples of the tiles
 * (rows past the 14- or 6-row tile, columns past a 32-column panel or inside its 16-column half,
 * k past a 256 block, narrow n run transposed) against a double loop; the AVX-512 and AVX2 copies give the same bits;
 * Convs (1x1, 3x3 with padding and stride, grouped) with bias, a residual and Relu or Clip on 1
 * and 2 intra-op threads give the same bits, near a double reference. Skipped where the CPU has
 * neither copy. */
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

TestSuite(conv_gemm, .fini = restore);

static uint32_t seed = 4242u;
static float rnd(void) {
  seed = seed * 1664525u + 1013904223u;
  return (float)(seed >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
}

static float *rnd_buf(int64_t n) {
  float *p = malloc((size_t)(n ? n : 1) * sizeof *p);
  cr_assert(p);
  for (int64_t i = 0; i < n; i++) p[i] = rnd();
  return p;
}

/* C = A x B through the packed GEMM with the copy `level`; returns the copy used. */
static int gemm_with(int level, int64_t m, int64_t n, int64_t k, const float *a, const float *b, float *c) {
  int used = mx__kgemm_f32_use(level);
  float *bp = aligned_alloc(64, (mx__kgemm_f32_packed_b_floats(k, n) * 4 + 64) / 64 * 64);
  float *as = aligned_alloc(64, mx__kgemm_f32_a_floats(m) * 4);
  cr_assert(bp && as);
  for (int64_t r = 0; r < k; r++) mx__kgemm_f32_pack_b_row(b + r * n, n, k, r, bp);
  for (int64_t i = 0; i < m * n; i++) c[i] = NAN; /* every output must be written */
  mx__kgemm_f32_packed(m, n, k, a, k, bp, c, n, as, NULL, NULL);
  free(bp);
  free(as);
  return used;
}

Test(conv_gemm, edge_tiles_match_double_and_both_copies_agree) {
  if (!mx__kgemm_f32_available()) cr_skip_test("no AVX-512 or AVX2 copy on this CPU");
  static const int64_t shapes[][3] = {{1, 1, 1},    {13, 5, 7},   {14, 32, 256}, {15, 33, 257},
                                      {29, 17, 513}, {6, 16, 3},  {7, 48, 300},  {100, 49, 260},
                                      {169, 70, 40}, {3, 100, 600}, {2048, 49, 520}, {40, 20, 9}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
    float *a = rnd_buf(m * k), *b = rnd_buf(k * n), *c3 = rnd_buf(m * n), *c2 = rnd_buf(m * n);
    int top = gemm_with(3, m, n, k, a, b, c3);
    int avx2 = gemm_with(2, m, n, k, a, b, c2);
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        double want = 0.0, mag = 0.0;
        for (int64_t p = 0; p < k; p++) {
          want += (double)a[i * k + p] * b[p * n + j];
          mag += fabs((double)a[i * k + p] * b[p * n + j]);
        }
        float got = c3[i * n + j];
        cr_expect(fabs(got - want) <= 1e-6 * mag + 1e-6, "%lldx%lldx%lld at (%lld, %lld): %g, want %g",
                  (long long)m, (long long)n, (long long)k, (long long)i, (long long)j, got, want);
      }
    if (top == 3 && avx2 == 2)
      cr_expect(memcmp(c3, c2, (size_t)(m * n) * sizeof(float)) == 0, "%lldx%lldx%lld: AVX-512 and AVX2 differ",
                (long long)m, (long long)n, (long long)k);
    free(a);
    free(b);
    free(c3);
    free(c2);
  }
}

/* --- Convs through the kernel ----------------------------------------------------------------- */

typedef struct gcase {
  int64_t c, h, w, m, group, kh, kw, s, pad;
  int32_t act; /* MX_CONV_ACT_RELU or MX_CONV_ACT_CLIP (0..0.5) */
} gcase;

static int64_t osize(int64_t in, int64_t k, int64_t s, int64_t p) { return (in + 2 * p - k) / s + 1; }

/* Runs the case once with `threads` intra-op threads and the GEMM copy `level`; y gets the
 * output, ref (when not NULL) the double reference. */
static void run_gcase(const gcase *g, int32_t threads, int level, float *y, double *ref) {
  seed = 99u;
  int64_t oh = osize(g->h, g->kh, g->s, g->pad), ow = osize(g->w, g->kw, g->s, g->pad);
  int64_t cg = g->c / g->group, mg = g->m / g->group;
  int64_t nx = g->c * g->h * g->w, nw = g->m * cg * g->kh * g->kw, ny = g->m * oh * ow;
  float *x = rnd_buf(nx), *w = rnd_buf(nw), *b = rnd_buf(g->m), *z = rnd_buf(ny);
  mx_conv_params p;
  memset(&p, 0, sizeof p);
  p.op = MX_CONVOP_CONV;
  p.group = g->group;
  p.n_strides = p.n_dilations = 2;
  p.strides[0] = p.strides[1] = g->s;
  p.dilations[0] = p.dilations[1] = 1;
  p.n_pads = 4;
  for (int i = 0; i < 4; i++) p.pads[i] = g->pad;
  p.fused_act = g->act;
  p.act_alpha = 0.0f;
  p.act_beta = 0.5f;
  mx__kthreads_set(threads);
  mx__kgemm_f32_use(level);
  mx_kernel_call *c = kc_new(4, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 4, DIMS(1, g->c, g->h, g->w), x);
  kc_set(c, 1, MX_FLOAT32, 4, DIMS(g->m, cg, g->kh, g->kw), w);
  kc_set(c, 2, MX_FLOAT32, 1, DIMS(g->m), b);
  kc_set(c, 3, MX_FLOAT32, 4, DIMS(1, g->m, oh, ow), z);
  kc_set(c, 4, MX_FLOAT32, 4, DIMS(1, g->m, oh, ow), y);
  cr_assert_eq(kc_run("Conv", c), MX_OK, "%s", c->why ? c->why : "");
  free(c);
  if (ref)
    for (int64_t m = 0; m < g->m; m++)
      for (int64_t i = 0; i < oh; i++)
        for (int64_t j = 0; j < ow; j++) {
          double acc = 0.0;
          for (int64_t ci = 0; ci < cg; ci++)
            for (int64_t a = 0; a < g->kh; a++)
              for (int64_t e = 0; e < g->kw; e++) {
                int64_t ih = i * g->s - g->pad + a, iw = j * g->s - g->pad + e;
                if (ih < 0 || ih >= g->h || iw < 0 || iw >= g->w) continue;
                acc += (double)x[((m / mg) * cg + ci) * g->h * g->w + ih * g->w + iw] *
                       w[((m * cg + ci) * g->kh + a) * g->kw + e];
              }
          int64_t o = (m * oh + i) * ow + j;
          double v = (acc + b[m]) + z[o];
          if (g->act == MX_CONV_ACT_RELU) v = v > 0.0 ? v : 0.0;
          if (g->act == MX_CONV_ACT_CLIP) v = v < 0.0 ? 0.0 : (v > 0.5 ? 0.5 : v);
          ref[o] = v;
        }
  free(x);
  free(w);
  free(b);
  free(z);
}

static const gcase gcases[] = {
    {64, 14, 14, 100, 1, 1, 1, 1, 0, MX_CONV_ACT_RELU},  /* 1x1: m past a 14-row tile, 196 columns */
    {33, 9, 11, 45, 1, 3, 3, 1, 1, MX_CONV_ACT_CLIP},    /* 3x3 padded: k = 297, n = 99 */
    {40, 15, 13, 29, 1, 3, 3, 2, 1, MX_CONV_ACT_RELU},   /* strided: n = 56 */
    {48, 10, 10, 36, 4, 3, 3, 1, 1, MX_CONV_ACT_RELU},   /* grouped: 4 groups of 12 in, 9 out */
    {300, 7, 7, 70, 1, 1, 1, 1, 0, MX_CONV_ACT_CLIP},    /* n = 49, k past a 256 block */
    {130, 7, 7, 64, 1, 3, 3, 1, 1, MX_CONV_ACT_RELU},    /* k = 1170: five blocks of k */
};

Test(conv_gemm, convs_match_double_on_one_and_two_threads_and_both_copies) {
  if (!mx__kgemm_f32_available()) cr_skip_test("no AVX-512 or AVX2 copy on this CPU");
  for (size_t t = 0; t < sizeof gcases / sizeof gcases[0]; t++) {
    const gcase *g = &gcases[t];
    int64_t ny = g->m * osize(g->h, g->kh, g->s, g->pad) * osize(g->w, g->kw, g->s, g->pad);
    float *y1 = malloc((size_t)ny * 4), *y2 = malloc((size_t)ny * 4), *y3 = malloc((size_t)ny * 4);
    double *ref = malloc((size_t)ny * 8);
    cr_assert(y1 && y2 && y3 && ref);
    run_gcase(g, 1, 3, y1, ref);
    run_gcase(g, 2, 3, y2, NULL);
    run_gcase(g, 1, 2, y3, NULL);
    for (int64_t i = 0; i < ny; i++)
      cr_expect(fabs(y1[i] - ref[i]) <= 2e-5 * (1.0 + fabs(ref[i])), "case %zu at %lld: %g, want %g", t,
                (long long)i, y1[i], ref[i]);
    cr_expect(memcmp(y1, y2, (size_t)ny * 4) == 0, "case %zu: 1 and 2 threads differ", t);
    cr_expect(memcmp(y1, y3, (size_t)ny * 4) == 0, "case %zu: AVX-512 and AVX2 differ", t);
    free(y1);
    free(y2);
    free(y3);
    free(ref);
  }
}
