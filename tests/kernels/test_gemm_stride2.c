/* Kernel tests of the stride-2 im2col runs the own GEMM's Conv path packs (kernels/conv_fast.c:
 * runs of 32 outputs or more take 16 outputs per two loads and a permute on AVX-512): stride-2
 * Convs of 1x1, 3x3 and 7x7 taps on maps 1 to 100 wide (runs of 1 to 50 outputs, tails of every
 * length under 16, padding 0 to 3, images whose last row ends the buffer) match a double reference, and the AVX-512 and AVX2
 * GEMM copies give the same bits. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph/ops/conv_params.h"
#include "kernels/gemm_f32.h"
#include "kernels/kernel.h"
#include "kernels/kernels_support.h"

static void restore(void) { mx__kgemm_f32_use(0); }

TestSuite(gemm_stride2, .fini = restore);

/* Y = Conv(X [1, c, h, w], W [m, c, k, k]) stride 2, padding pad, no bias, with GEMM copy level;
 * y is [1, m, oh, ow]. */
static void conv_s2(int level, int64_t c, int64_t h, int64_t wd, int64_t m, int64_t k, int64_t pad, const float *x,
                    const float *w, float *y, int64_t oh, int64_t ow) {
  mx_conv_params p;
  memset(&p, 0, sizeof p);
  p.op = MX_CONVOP_CONV;
  p.group = 1;
  p.n_strides = p.n_dilations = 2;
  p.strides[0] = p.strides[1] = 2;
  p.dilations[0] = p.dilations[1] = 1;
  p.n_pads = 4;
  for (int i = 0; i < 4; i++) p.pads[i] = pad;
  mx__kgemm_f32_use(level);
  mx_kernel_call *call = kc_new(2, 1, &p);
  kc_set(call, 0, MX_FLOAT32, 4, DIMS(1, c, h, wd), (void *)x);
  kc_set(call, 1, MX_FLOAT32, 4, DIMS(m, c, k, k), (void *)w);
  kc_set(call, 2, MX_FLOAT32, 4, DIMS(1, m, oh, ow), y);
  cr_assert_eq(kc_run("Conv", call), MX_OK, "%s", call->why ? call->why : "");
  free(call);
}

Test(gemm_stride2, runs_of_every_length_match_double_and_both_copies) {
  if (!mx__kgemm_f32_available()) cr_skip_test("no AVX-512 or AVX2 copy on this CPU");
  uint32_t seed = 2222u;
  static const int64_t taps[][2] = {{1, 0}, {3, 1}, {7, 3}, {3, 0}, {7, 2}};
  for (size_t t = 0; t < sizeof taps / sizeof taps[0]; t++)
    for (int64_t wd = 1; wd <= 100; wd++) {
      const int64_t k = taps[t][0], pad = taps[t][1], c = 3, m = 5, h = 9;
      if (wd + 2 * pad < k || h + 2 * pad < k) continue;
      const int64_t oh = (h + 2 * pad - k) / 2 + 1, ow = (wd + 2 * pad - k) / 2 + 1;
      /* the image alone in its buffer: a read past its last float would show under ASan */
      float *x = ks_rnd_buf(&seed, c * h * wd), *w = ks_rnd_buf(&seed, m * c * k * k);
      float *y3 = ks_rnd_buf(&seed, m * oh * ow), *y2 = ks_rnd_buf(&seed, m * oh * ow);
      const int top = mx__kgemm_f32_use(3);
      conv_s2(3, c, h, wd, m, k, pad, x, w, y3, oh, ow);
      conv_s2(2, c, h, wd, m, k, pad, x, w, y2, oh, ow);
      for (int64_t o = 0; o < m; o++)
        for (int64_t i = 0; i < oh; i++)
          for (int64_t j = 0; j < ow; j++) {
            double acc = 0.0, mag = 0.0;
            for (int64_t ci = 0; ci < c; ci++)
              for (int64_t a = 0; a < k; a++)
                for (int64_t e = 0; e < k; e++) {
                  const int64_t ih = i * 2 - pad + a, iw = j * 2 - pad + e;
                  if (ih < 0 || ih >= h || iw < 0 || iw >= wd) continue;
                  const double v = (double)x[(ci * h + ih) * wd + iw] * w[((o * c + ci) * k + a) * k + e];
                  acc += v;
                  mag += fabs(v);
                }
            const float got = y3[(o * oh + i) * ow + j];
            cr_expect(fabs(got - acc) <= 1e-6 * mag + 1e-6, "%lldx%lld taps, pad %lld, width %lld at (%lld, %lld, %lld): %g, want %g",
                      (long long)k, (long long)k, (long long)pad, (long long)wd, (long long)o, (long long)i,
                      (long long)j, got, acc);
          }
      if (top == 3)
        cr_expect(memcmp(y3, y2, (size_t)(m * oh * ow) * sizeof(float)) == 0,
                  "%lldx%lld taps, pad %lld, width %lld: AVX-512 and AVX2 differ", (long long)k, (long long)k,
                  (long long)pad, (long long)wd);
      free(x);
      free(w);
      free(y3);
      free(y2);
    }
}
