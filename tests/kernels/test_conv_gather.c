/* Kernel tests of the gathered product (kernels/conv_fast.c, gather_b): on the AVX-512 copy a
 * Conv whose output rows are 7 or a multiple of 14 wide reads its B straight from the image
 * (each band's rows zero-padded into the slot when the Conv pads), where the AVX2 copy runs the
 * im2col. 3x3 taps at stride 1 and 2, 7x7 at stride 2, 1x1 at stride 2 read in place, dilation
 * 2, rows 7, 14, 28 and 56 wide, 7-wide maps of 1 to 9 rows (a last group of 7 positions), 32
 * to 160 output channels (last weight panels of 16 and 24), channel counts whose taps end a k
 * block early, one and two images, on 1 and 2 threads, with the epilogue in the store (Relu) or
 * on each finished tile (Sigmoid): every output matches a double reference and has the AVX2
 * copy's bits. Skipped where the CPU has no AVX-512. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/conv_impl.h"
#include "kernels/conv_square_support.h"
#include "kernels/gemm_f32.h"
#include "kernels/kernels_support.h"
#include "kernels/threads.h"

static void restore(void) {
  mx__kthreads_set(1);
  mx__kgemm_f32_use(0);
}

TestSuite(conv_gather, .fini = restore);

/* {n, c, h, m, k, s, pad, w, d}: every output row 7 or a multiple of 14 wide */
static const cs_case cases[] = {
    {1, 64, 7, 64, 3, 1, 1, 0, 0},   /* a 7x7 map's 3x3 Conv (ResNet's last stage, narrower) */
    {1, 30, 14, 96, 3, 2, 1, 0, 0},  /* stride 2 from 14x14, 270 taps: a short second k block */
    {2, 40, 13, 64, 3, 2, 1, 0, 0},  /* stride 2 from 13x13, two images */
    {1, 300, 14, 64, 1, 2, 0, 0, 0}, /* 1x1 stride 2: read in place, no copy */
    {1, 24, 7, 88, 3, 1, 2, 0, 2},   /* dilation 2; 88 channels: a last panel of 24 */
    {1, 16, 5, 64, 3, 1, 1, 7, 0},   /* 5 rows: groups of 14, 14 and 7 positions */
    {1, 16, 9, 160, 3, 1, 1, 7, 0},  /* 9 rows (63 positions) */
    {1, 8, 1, 64, 3, 1, 1, 7, 0},    /* 1 row: one group of 7 */
    {1, 32, 16, 64, 3, 2, 0, 15, 0}, /* stride 2 without padding, an image taller than read */
    {1, 16, 28, 64, 3, 2, 1, 0, 0},  /* 14 wide, stride 2 (ResNet's 28x28 -> 14x14) */
    {1, 3, 56, 64, 7, 2, 3, 0, 0},   /* 7x7 taps at stride 2, 28 wide (ResNet's first layer) */
    {1, 64, 56, 48, 1, 2, 0, 0, 0},  /* 1x1 stride 2 in place, 28 wide, a last panel of 16 */
    {2, 20, 29, 56, 3, 2, 0, 0, 0},  /* two images, no padding: in place, 14 wide */
    {1, 8, 28, 32, 3, 1, 2, 0, 2},   /* dilation 2, stride 1, 28 wide */
    {1, 8, 6, 32, 3, 2, 1, 112, 0},  /* 3 rows of 56 */
    {1, 96, 84, 64, 3, 2, 1, 0, 0},  /* 42 rows of 42: several bands */
};

static float *filled(int64_t n, uint32_t seed) { return ks_rnd_buf(&seed, n); }

Test(conv_gather, rows_7_or_14n_wide_match_double_and_the_im2col_bits) {
  if (mx__kgemm_f32_use(3) != 3 || !mx__kgemm_f32_gather_available())
    cr_skip_test("no AVX-512 copy on this CPU");
  static const int32_t acts[] = {MX_CONV_ACT_RELU, MX_CONV_ACT_SIGMOID};
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++)
    for (size_t ai = 0; ai < sizeof acts / sizeof acts[0]; ai++) {
      const cs_case *t = &cases[ci];
      const int32_t act = acts[ai];
      const int64_t oh = cs_out_size(t), ow = cs_out_width(t), wd = cs_in_width(t),
                    ny = t->n * t->m * oh * ow;
      cr_assert(ow == 7 || ow % 14 == 0, "case %zu: output %lld wide", ci, (long long)ow);
      float *x = filled(t->n * t->c * t->h * wd, 31u + (uint32_t)ci),
            *w = filled(t->m * t->c * t->k * t->k, 32u);
      float *b = filled(t->m, 33u), *z = filled(ny, 34u);
      float *y512 = malloc((size_t)ny * 4), *y2 = malloc((size_t)ny * 4), *yt = malloc((size_t)ny * 4);
      cr_assert(y512 && y2 && yt);
      mx__kgemm_f32_use(2);
      cs_run(t, 1, false, act, x, w, b, z, y2);
      mx__kgemm_f32_use(3);
      cs_run(t, 1, false, act, x, w, b, z, y512);
      for (int64_t idx = 0; idx < ny; idx++) {
        const int64_t jj = idx % ow, i = idx / ow % oh, m = idx / (ow * oh) % t->m,
                      in = idx / (ow * oh * t->m);
        const double ref = cs_reference_at(t, act, x, w, b, z, in, m, i, jj);
        if (!(fabs(y512[idx] - ref) <= 1e-4 * (1.0 + fabs(ref)))) {
          cr_expect(false, "case %zu act %d at (%lld, %lld, %lld, %lld): %g, want %g", ci, act, (long long)in,
                    (long long)m, (long long)i, (long long)jj, (double)y512[idx], ref);
          break;
        }
      }
      cr_expect(memcmp(y512, y2, (size_t)ny * 4) == 0, "case %zu act %d: AVX-512 and AVX2 copies differ", ci,
                act);
      cs_run(t, 2, false, act, x, w, b, z, yt);
      cr_expect(memcmp(y512, yt, (size_t)ny * 4) == 0, "case %zu act %d: 1 and 2 threads differ", ci, act);
      free(x);
      free(w);
      free(b);
      free(z);
      free(y512);
      free(y2);
      free(yt);
    }
}
