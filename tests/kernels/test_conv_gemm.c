/* Kernel tests of mixrt's packed float32 GEMM (kernels/gemm_f32.c) and of the Conv paths that run
 * through it (kernels/conv_fast.c): products whose m, n and k are not multiples of the tiles
 * (rows past the 14- or 6-row tile, columns past a 32-column panel or inside its 16-column half,
 * k past a 256 block, narrow n run transposed) against a double loop; the AVX-512 and AVX2 copies give the same bits;
 * Convs (1x1, 3x3 with padding and stride, grouped) with bias, a residual and Relu or Clip on 1
 * and 2 intra-op threads give the same bits, near a double reference; weights packed once for
 * several products give the bits of weights packed per product, and a Conv whose weights change
 * between runs (same buffer) sees the new ones. Skipped where the CPU has neither copy. */
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

static float *rnd_buf(int64_t n) { return ks_rnd_buf(&seed, n); }

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
    {64, 56, 56, 64, 1, 3, 3, 1, 1, MX_CONV_ACT_RELU},   /* large 3x3: may take Winograd */
    {15, 56, 56, 64, 1, 3, 3, 1, 1, MX_CONV_ACT_RELU},   /* many bands: weights packed once per run */
    {64, 56, 56, 200, 1, 1, 1, 1, 0, MX_CONV_ACT_CLIP},  /* 1x1 in bands, weights packed once */
    {32, 40, 40, 48, 2, 3, 3, 1, 1, MX_CONV_ACT_RELU},   /* grouped, in bands: packed per group */
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
    /* A stride-1 3x3 of one group may go through Winograd (kernels/conv_winograd.c), whose input
     * and output transforms add rounding; tests/kernels/test_conv_winograd.c bounds it closer. */
    const bool may_wino = g->kh == 3 && g->kw == 3 && g->s == 1 && g->group == 1;
    const double tol = may_wino ? 3e-4 : 2e-5;
    for (int64_t i = 0; i < ny; i++)
      cr_expect(fabs(y1[i] - ref[i]) <= tol * (1.0 + fabs(ref[i])), "case %zu at %lld: %g, want %g", t,
                (long long)i, y1[i], ref[i]);
    cr_expect(memcmp(y1, y2, (size_t)ny * 4) == 0, "case %zu: 1 and 2 threads differ", t);
    cr_expect(memcmp(y1, y3, (size_t)ny * 4) == 0, "case %zu: AVX-512 and AVX2 differ", t);
    free(y1);
    free(y2);
    free(y3);
    free(ref);
  }
}

/* Weights packed ahead (the whole m rows, in two row ranges as two threads would) and read by
 * products of row chunks give the same bits as each product packing its own. */
Test(conv_gemm, pre_packed_weights_give_the_same_bits) {
  if (!mx__kgemm_f32_available()) cr_skip_test("no AVX-512 or AVX2 copy on this CPU");
  static const int64_t shapes[][3] = {{100, 300, 600}, {70, 49, 300}, {168, 96, 257}, {64, 20, 1170}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    const int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
    float *a = rnd_buf(m * k), *b = rnd_buf(k * n), *c1 = rnd_buf(m * n), *c2 = rnd_buf(m * n);
    gemm_with(0, m, n, k, a, b, c1);
    const int64_t mr = mx__kgemm_f32_row_granule(m, n), mpad = (m + mr - 1) / mr * mr;
    float *ap = aligned_alloc(64, (mx__kgemm_f32_pre_a_floats(m, k, mr) * 4 + 63) / 64 * 64);
    float *bp = aligned_alloc(64, (mx__kgemm_f32_packed_b_floats(k, n) * 4 + 64) / 64 * 64);
    float *as = aligned_alloc(64, mx__kgemm_f32_a_floats(m) * 4);
    cr_assert(ap && bp && as);
    const int64_t half = (m / 2 + mr - 1) / mr * mr;
    mx__kgemm_f32_pre_a_pack(a, k, m, k, mr, 0, half, ap);
    mx__kgemm_f32_pre_a_pack(a, k, m, k, mr, half, m - half, ap);
    for (int64_t r = 0; r < k; r++) mx__kgemm_f32_pack_b_row(b + r * n, n, k, r, bp);
    for (int64_t i = 0; i < m * n; i++) c2[i] = NAN;
    /* rows in two chunks cut at the granule, when the chunks keep it */
    const int64_t cut = mr == mx__kgemm_f32_row_granule(half, n) && mr == mx__kgemm_f32_row_granule(m - half, n)
                            ? half : m;
    mx_kgemm_f32_pre_a pa = {ap, mr, mpad, 0};
    mx__kgemm_f32_packed_pre(cut, n, k, a, k, &pa, bp, c2, n, as, NULL, NULL);
    if (cut < m) {
      pa.row0 = cut;
      mx__kgemm_f32_packed_pre(m - cut, n, k, a + cut * k, k, &pa, bp, c2 + cut * n, n, as, NULL, NULL);
    }
    cr_expect(memcmp(c1, c2, (size_t)(m * n) * 4) == 0, "%lldx%lldx%lld: pre-packed weights differ",
              (long long)m, (long long)n, (long long)k);
    free(ap);
    free(bp);
    free(as);
    free(a);
    free(b);
    free(c1);
    free(c2);
  }
}

/* A Conv in several bands run twice on the same buffers, the weights changed in between (one
 * value, then all): each run sees the weights it is given, on 1 and 2 threads alike. */
Test(conv_gemm, weights_changed_between_runs_are_seen) {
  if (!mx__kgemm_f32_available()) cr_skip_test("no AVX-512 or AVX2 copy on this CPU");
  const int64_t c = 32, h = 40, wd = 40, m = 48, ny = m * h * wd, nw = m * c * 9;
  seed = 7u;
  float *x = rnd_buf(c * h * wd), *w = rnd_buf(nw), *y1 = malloc((size_t)ny * 4), *y2 = malloc((size_t)ny * 4);
  float *y0 = malloc((size_t)ny * 4);
  cr_assert(y0 && y1 && y2);
  mx_conv_params p;
  memset(&p, 0, sizeof p);
  p.op = MX_CONVOP_CONV;
  p.group = 1;
  p.n_strides = p.n_dilations = 2;
  p.strides[0] = p.strides[1] = 1;
  p.dilations[0] = p.dilations[1] = 1;
  p.n_pads = 4;
  for (int i = 0; i < 4; i++) p.pads[i] = 1;
  for (int32_t threads = 1; threads <= 2; threads++) {
    mx__kthreads_set(threads);
    float *ys[3] = {y0, y1, y2};
    for (int run = 0; run < 3; run++) {
      if (run == 1) w[nw / 2] += 1.0f;
      if (run == 2)
        for (int64_t i = 0; i < nw; i++) w[i] = -w[i];
      mx_kernel_call *call = kc_new(2, 1, &p);
      kc_set(call, 0, MX_FLOAT32, 4, DIMS(1, c, h, wd), x);
      kc_set(call, 1, MX_FLOAT32, 4, DIMS(m, c, 3, 3), w);
      kc_set(call, 2, MX_FLOAT32, 4, DIMS(1, m, h, wd), ys[run]);
      cr_assert_eq(kc_run("Conv", call), MX_OK, "%s", call->why ? call->why : "");
      free(call);
    }
    /* the changed weight is output channel m/2's: its outputs moved, by the input under that tap */
    const int64_t mc = (nw / 2) / (c * 9);
    bool moved = false;
    for (int64_t i = mc * h * wd; i < (mc + 1) * h * wd; i++) moved |= y0[i] != y1[i];
    cr_expect(moved, "%d threads: a weight changed between runs was not seen", threads);
    for (int64_t i = 0; i < ny; i++) {
      if (i / (h * wd) != mc) cr_expect(y0[i] == y1[i], "%d threads: output %lld of another channel moved", threads, (long long)i);
      cr_expect(y2[i] == -y1[i], "%d threads: negated weights at %lld: %g, want %g", threads, (long long)i, y2[i], -y1[i]);
    }
    /* undo for the next thread count */
    for (int64_t i = 0; i < nw; i++) w[i] = -w[i];
    w[nw / 2] -= 1.0f;
  }
  free(x);
  free(w);
  free(y0);
  free(y1);
  free(y2);
}
