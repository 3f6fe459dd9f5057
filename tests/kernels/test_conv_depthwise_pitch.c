/* Kernel tests of the depthwise Conv core's stride-1 padded image (kernels/conv_depthwise.c),
 * whose rows share their padding zeros (a row's right pad is the next row's left pad): uneven
 * left/right and top/bottom pads, pads wider than the taps reach, images wider than the taps
 * reach, dilation, a residual, several channels per slot and long rows in blocks of up to 8
 * vectors with short last blocks, on one and two threads. Each output
 * must equal, bit for bit, a float loop that adds the taps inside the image in the kernel's order
 * (row by row, left to right, from zero) and then the bias and residual. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph/ops/conv_params.h"
#include "kernels/kernel.h"
#include "kernels/kernels_support.h"
#include "kernels/threads.h"

TestSuite(conv_depthwise_pitch);

static uint32_t seed = 1234u;
/* Uniform in [-2, 2): twice ks_rnd's value, the same bits as scaling by 4 and shifting by 2. */
static float rnd(void) { return 2.0f * ks_rnd(&seed); }

typedef struct pcase {
  int64_t c, h, w, kh, kw, d;
  int64_t pt, pl, pbot, pr; /* pads: top, left, bottom, right */
} pcase;

/* Runs case k (with a residual when `residual`, a Relu when `relu`) on `threads` threads and
 * checks every output's bits against the float loop. */
static void run_pcase(const pcase *k, bool residual, bool relu, int32_t threads) {
  const int64_t oh = k->h + k->pt + k->pbot - k->d * (k->kh - 1);
  const int64_t ow = k->w + k->pl + k->pr - k->d * (k->kw - 1);
  cr_assert(oh > 0 && ow > 0);
  const int64_t nx = k->c * k->h * k->w, nw = k->c * k->kh * k->kw, ny = k->c * oh * ow;
  float *x = malloc((size_t)nx * 4), *w = malloc((size_t)nw * 4), *b = malloc((size_t)k->c * 4);
  float *z = malloc((size_t)ny * 4), *y = malloc((size_t)ny * 4);
  for (int64_t i = 0; i < nx; i++) x[i] = rnd();
  for (int64_t i = 0; i < nw; i++) w[i] = rnd();
  for (int64_t i = 0; i < k->c; i++) b[i] = rnd();
  for (int64_t i = 0; i < ny; i++) z[i] = rnd();
  mx_conv_params p;
  memset(&p, 0, sizeof p);
  p.op = MX_CONVOP_CONV;
  p.group = k->c;
  p.n_strides = p.n_dilations = 2;
  p.strides[0] = p.strides[1] = 1;
  p.dilations[0] = p.dilations[1] = k->d;
  p.n_pads = 4; /* ONNX order: begins (h, w), then ends (h, w) */
  p.pads[0] = k->pt, p.pads[1] = k->pl, p.pads[2] = k->pbot, p.pads[3] = k->pr;
  p.fused_act = relu ? MX_CONV_ACT_RELU : MX_CONV_ACT_NONE;
  mx_kernel_call *c = kc_new(residual ? 4 : 3, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 4, DIMS(1, k->c, k->h, k->w), x);
  kc_set(c, 1, MX_FLOAT32, 4, DIMS(k->c, 1, k->kh, k->kw), w);
  kc_set(c, 2, MX_FLOAT32, 1, DIMS(k->c), b);
  if (residual) kc_set(c, 3, MX_FLOAT32, 4, DIMS(1, k->c, oh, ow), z);
  kc_set(c, residual ? 4 : 3, MX_FLOAT32, 4, DIMS(1, k->c, oh, ow), y);
  mx__kthreads_set(threads);
  mx_status st = kc_run("Conv", c);
  mx__kthreads_set(1);
  cr_assert_eq(st, MX_OK, "%s", c->why ? c->why : "");
  int bad = 0;
  for (int64_t ch = 0; ch < k->c; ch++)
    for (int64_t i = 0; i < oh; i++)
      for (int64_t j = 0; j < ow && bad < 5; j++) {
        float acc = 0.0f;
        for (int64_t u = 0; u < k->kh; u++)
          for (int64_t v = 0; v < k->kw; v++) {
            const int64_t ih = i - k->pt + u * k->d, iw = j - k->pl + v * k->d;
            if (ih < 0 || ih >= k->h || iw < 0 || iw >= k->w) continue;
            const float prod = w[(ch * k->kh + u) * k->kw + v] * x[(ch * k->h + ih) * k->w + iw];
            acc = acc + prod;
          }
        const int64_t o = (ch * oh + i) * ow + j;
        float want = acc + b[ch];
        if (residual) want = want + z[o];
        if (relu) want = want > 0.0f ? want : 0.0f;
        uint32_t gb, wb;
        memcpy(&gb, &y[o], 4);
        memcpy(&wb, &want, 4);
        if (gb != wb) {
          cr_expect(false, "c=%lld %lldx%lld k=%lldx%lld d=%lld pads %lld,%lld,%lld,%lld res %d: (%lld,%lld,%lld) %.9g vs %.9g",
                    (long long)k->c, (long long)k->h, (long long)k->w, (long long)k->kh, (long long)k->kw,
                    (long long)k->d, (long long)k->pt, (long long)k->pl, (long long)k->pbot, (long long)k->pr,
                    (int)residual, (long long)ch, (long long)i, (long long)j, (double)y[o], (double)want);
          bad++;
        }
      }
  free(x), free(w), free(b), free(z), free(y), free(c);
}

static const pcase cases[] = {
    /* c   h   w  kh kw d  pt pl pb pr */
    {5, 7, 7, 5, 5, 1, 2, 2, 2, 2},     /* MobileNetV3's 7x7 5x5: rows 9 apart, not 11 */
    {3, 14, 14, 5, 5, 1, 2, 2, 2, 2},   /* 14x14 5x5: rows 16 apart */
    {3, 9, 10, 3, 3, 1, 1, 0, 1, 2},    /* no left pad, 2 right */
    {3, 9, 10, 3, 3, 1, 0, 2, 2, 0},    /* 2 left, no right; top only at the bottom */
    {4, 6, 5, 3, 5, 1, 1, 3, 0, 1},     /* left pad wider than the right */
    {3, 5, 6, 3, 3, 1, 3, 4, 2, 3},     /* pads wider than the taps reach */
    {3, 8, 12, 3, 3, 1, 0, 0, 0, 0},    /* no pad: rows as long as the image */
    {3, 11, 9, 3, 3, 2, 2, 1, 2, 3},    /* dilated, uneven pads */
    {6, 3, 3, 5, 5, 1, 2, 2, 2, 2},     /* a kernel wider than the image */
    {3, 1, 40, 1, 3, 1, 0, 1, 0, 1},    /* one row */
    {3, 30, 3, 3, 3, 1, 1, 2, 1, 0},    /* narrow and tall: many rows per vector */
    {2, 5, 40, 3, 3, 1, 1, 1, 1, 1},    /* rows wider than a vector */
    /* blocks of up to 8 vectors along the long row and their short last blocks */
    {2, 1, 70, 1, 3, 1, 0, 1, 0, 1},    /* 70 sums: one block of 5 vectors */
    {2, 1, 128, 1, 3, 1, 0, 1, 0, 1},   /* 128: exactly one block of 8 */
    {2, 1, 129, 1, 3, 1, 0, 1, 0, 1},   /* 129: 8, then 1 */
    {2, 9, 30, 3, 3, 1, 1, 1, 1, 1},    /* 278: 8, 8, then 2 */
};

Test(conv_depthwise_pitch, shared_row_padding_gives_the_float_loops_bits) {
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    run_pcase(&cases[i], false, false, 1);
    run_pcase(&cases[i], false, true, 1);
    run_pcase(&cases[i], true, true, 1);
  }
}

Test(conv_depthwise_pitch, two_threads_give_the_float_loops_bits) {
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_pcase(&cases[i], true, false, 2);
  static const pcase wide = {64, 14, 14, 5, 5, 1, 2, 2, 2, 2};
  run_pcase(&wide, false, true, 2);
}
