/* Kernel tests of the float32 Conv's bands shared by several output-channel chunks on intra-op
 * threads (kernels/conv_fast.c, shared_b and narrow_b): a 7x7 map's narrow products read their
 * B regrouped once into the shared block (a pointwise one reading the image in place keeps
 * doing so), a 14x14 map's chunks read packed panels. On 1, 2 and 3 threads, on either GEMM copy,
 * with the epilogue in the store (Relu) or on each finished tile (Sigmoid), and with a workspace
 * too small for the shared block, the outputs have the same bits; sampled outputs match a
 * double reference. Skipped where the CPU has neither own GEMM copy. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph/ops/conv_params.h"
#include "kernels/conv_impl.h"
#include "kernels/conv_square_support.h"
#include "kernels/gemm_f32.h"
#include "kernels/kernels_support.h"
#include "kernels/threads.h"

static void restore(void) {
  mx__kthreads_set(1);
  mx__kgemm_f32_use(0);
}

TestSuite(conv_threads_shared, .fini = restore);

static float *filled(int64_t n, uint32_t seed) { return ks_rnd_buf(&seed, n); }

static void check_cases(const cs_case *cases, size_t count, int level) {
  static const int32_t acts[] = {MX_CONV_ACT_RELU, MX_CONV_ACT_SIGMOID};
  mx__kgemm_f32_use(level);
  for (size_t ci = 0; ci < count; ci++)
    for (size_t ai = 0; ai < sizeof acts / sizeof acts[0]; ai++) {
      const cs_case *t = &cases[ci];
      const int32_t act = acts[ai];
      const int64_t o = cs_out_size(t), ny = t->n * t->m * o * o;
      float *x = filled(t->n * t->c * t->h * t->h, 21u), *w = filled(t->m * t->c * t->k * t->k, 22u);
      float *b = filled(t->m, 23u), *z = filled(ny, 24u);
      float *y1 = malloc((size_t)ny * 4), *yt = malloc((size_t)ny * 4);
      cr_assert(y1 && yt);
      cs_run(t, 1, false, act, x, w, b, z, y1);
      for (int64_t s = 0; s < 48; s++) {
        const int64_t idx = (s * 7919) % ny, jj = idx % o, i = idx / o % o, m = idx / (o * o) % t->m,
                      in = idx / (o * o * t->m);
        const double ref = cs_reference_at(t, act, x, w, b, z, in, m, i, jj);
        cr_expect(fabs(y1[idx] - ref) <= 1e-4 * (1.0 + fabs(ref)), "copy %d case %zu act %d at %lld: %g, want %g",
                  level, ci, act, (long long)idx, (double)y1[idx], ref);
      }
      for (int32_t threads = 2; threads <= 3; threads++)
        for (int tight = 0; tight <= 1; tight++) {
          cs_run(t, threads, tight, act, x, w, b, z, yt);
          cr_expect(memcmp(y1, yt, (size_t)ny * 4) == 0, "copy %d case %zu act %d: 1 and %d threads%s differ",
                    level, ci, act, threads, tight ? " (one slot)" : "");
        }
      free(x);
      free(w);
      free(b);
      free(z);
      free(y1);
      free(yt);
    }
}

static const cs_case resnet_cases[] = {
    /* 7x7 3x3: narrow products, regrouped im2col shared (on the AVX2 copy; the AVX-512 one
     * reads the image in place, test_conv_gather.c) */
    {1, 512, 7, 512, 3, 1, 1, 0, 0},
    {1, 2048, 7, 512, 1, 1, 0, 0, 0}, /* 7x7 pointwise read in place */
    {1, 512, 7, 2048, 1, 1, 0, 0, 0}, /* 7x7 pointwise, packed: regrouped, shared */
    {1, 256, 14, 256, 3, 1, 1, 0, 0}, /* 14x14 3x3: packed panels shared */
    {2, 512, 7, 512, 3, 1, 1, 0, 0},  /* two images */
    {1, 256, 14, 512, 3, 2, 1, 0, 0}, /* stride 2 onto 7x7 */
    {1, 96, 6, 200, 3, 1, 1, 0, 0},   /* 36 columns, 200 rows: partial groups and tiles */
};

Test(conv_threads_shared, small_maps_equal_bits_on_1_2_3_threads_avx512) {
  if (!mx__kgemm_f32_available()) cr_skip_test("no AVX-512 or AVX2 copy on this CPU");
  check_cases(resnet_cases, sizeof resnet_cases / sizeof resnet_cases[0], 3);
}

Test(conv_threads_shared, small_maps_equal_bits_on_1_2_3_threads_avx2) {
  if (!mx__kgemm_f32_available()) cr_skip_test("no AVX-512 or AVX2 copy on this CPU");
  check_cases(resnet_cases, sizeof resnet_cases / sizeof resnet_cases[0], 2);
}

/* A regrouped B gives a product the bits of a packed one, on either copy. */
Test(conv_threads_shared, regrouped_b_equals_packed_b) {
  if (!mx__kgemm_f32_available()) cr_skip_test("no AVX-512 or AVX2 copy on this CPU");
  static const int64_t ns[] = {49, 36, 7, 63, 20};
  for (int level = 2; level <= 3; level++) {
    mx__kgemm_f32_use(level);
    for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
      const int64_t m = 200, n = ns[ni], k = 600;
      float *a = filled(m * k, 31u), *bmat = filled(k * n, 32u);
      float *bp = calloc(mx__kgemm_f32_packed_b_floats(k, n), 4), *bn = calloc(mx__kgemm_f32_narrow_b_floats(k, n), 4);
      float *c1 = malloc((size_t)(m * n) * 4), *c2 = malloc((size_t)(m * n) * 4);
      float *scr = aligned_alloc(64, (mx__kgemm_f32_a_floats(m) * 4 + 63) / 64 * 64);
      cr_assert(bp && bn && c1 && c2 && scr);
      for (int64_t kk = 0; kk < k; kk++) {
        mx__kgemm_f32_pack_b_row(bmat + kk * n, n, k, kk, bp);
        mx__kgemm_f32_narrow_b_row(bmat + kk * n, n, k, kk, bn);
      }
      mx__kgemm_f32_packed(m, n, k, a, k, bp, c1, n, scr, NULL, NULL);
      for (int64_t i = 0; i < m * n; i++) c2[i] = NAN;
      mx__kgemm_f32_narrow_pre(m, n, k, a, k, NULL, bn, c2, n, scr, NULL, NULL, NULL);
      cr_expect(memcmp(c1, c2, (size_t)(m * n) * 4) == 0, "copy %d, n %lld: regrouped B differs", level,
                (long long)n);
      free(a);
      free(bmat);
      free(bp);
      free(bn);
      free(c1);
      free(c2);
      free(scr);
    }
  }
}
