/* Kernel tests of the float32 Conv's bands on several intra-op threads (kernels/conv_fast.c) on
 * ResNet-50's 56x56 maps, where a run re-sizes its bands so the threads' shares end together
 * (56 output rows in 14 bands of 4 on two threads, pointwise bands in whole panels), and on its
 * 14x14 pointwise maps (even_split), with the pool's first worker taking the tasks from the back:
 * 1, 2 and 3 threads give the same bits, and sampled outputs match a double reference
 * (conv_square_support.h). Skipped where the CPU has neither own GEMM copy. */
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

static void restore(void) { mx__kthreads_set(1); }

TestSuite(conv_threads_bands, .fini = restore);

static float *filled(int64_t n, uint32_t seed) { return ks_rnd_buf(&seed, n); }

/* Every case: sampled outputs on 1 thread against the double reference, and 2 and 3 threads
 * bit-identical to 1. */
static void check_cases(const cs_case *cases, size_t count) {
  for (size_t ci = 0; ci < count; ci++) {
    const cs_case *t = &cases[ci];
    const int64_t o = cs_out_size(t), ny = t->n * t->m * o * o;
    float *x = filled(t->n * t->c * t->h * t->h, 11u), *w = filled(t->m * t->c * t->k * t->k, 12u);
    float *b = filled(t->m, 13u), *z = filled(ny, 14u);
    float *y1 = malloc((size_t)ny * 4), *yt = malloc((size_t)ny * 4);
    cr_assert(y1 && yt);
    cs_run(t, 1, false, MX_CONV_ACT_RELU, x, w, b, z, y1);
    for (int64_t s = 0; s < 64; s++) {
      const int64_t idx = (s * 7919) % ny, jj = idx % o, i = idx / o % o, m = idx / (o * o) % t->m,
                    in = idx / (o * o * t->m);
      const double ref = cs_reference_at(t, MX_CONV_ACT_RELU, x, w, b, z, in, m, i, jj);
      cr_expect(fabs(y1[idx] - ref) <= 1e-4 * (1.0 + fabs(ref)), "case %zu at %lld: %g, want %g", ci,
                (long long)idx, (double)y1[idx], ref);
    }
    for (int32_t threads = 2; threads <= 3; threads++) {
      cs_run(t, threads, false, MX_CONV_ACT_RELU, x, w, b, z, yt);
      cr_expect(memcmp(y1, yt, (size_t)ny * 4) == 0, "case %zu: 1 and %d threads differ", ci, threads);
    }
    free(x);
    free(w);
    free(b);
    free(z);
    free(y1);
    free(yt);
  }
}

Test(conv_threads_bands, resnet50_56x56_layers_equal_bits_on_1_2_3_threads) {
  if (!mx__kgemm_f32_available()) cr_skip_test("no AVX-512 or AVX2 copy on this CPU");
  static const cs_case cases[] = {
      {1, 64, 56, 64, 3, 1, 1, 0, 0},  /* im2col bands of output rows */
      {1, 64, 56, 256, 1, 1, 0, 0, 0}, /* pointwise bands of columns */
      {1, 256, 56, 64, 1, 1, 0, 0, 0}, /* pointwise, fewer channels out than in */
      {2, 64, 56, 64, 3, 1, 1, 0, 0},  /* two images: bands of both */
      {1, 32, 30, 48, 3, 1, 1, 0, 0},  /* rows that no band size divides evenly */
  };
  check_cases(cases, sizeof cases / sizeof cases[0]);
}

/* The 14x14 pointwise layers, whose 196 columns in bands of 64 left a last band of 4 and two
 * threads' shares at 128 and 68 columns: the bands and output-channel chunks of least modelled
 * span (even_split) that a run takes now. */
Test(conv_threads_bands, resnet50_14x14_pointwise_layers_equal_bits_on_1_2_3_threads) {
  if (!mx__kgemm_f32_available()) cr_skip_test("no AVX-512 or AVX2 copy on this CPU");
  static const cs_case cases[] = {
      {1, 256, 14, 1024, 1, 1, 0, 0, 0}, /* packed bands shared by chunks of output channels */
      {1, 1024, 14, 256, 1, 1, 0, 0, 0}, /* read in place: bands of 96 columns */
      {1, 1024, 14, 512, 1, 1, 0, 0, 0}, /* read in place: bands and chunks */
      {2, 256, 14, 1024, 1, 1, 0, 0, 0}, /* two images */
      {1, 400, 13, 600, 1, 1, 0, 0, 0},  /* 169 columns, 600 rows: partial tiles and panels */
  };
  check_cases(cases, sizeof cases / sizeof cases[0]);
}
