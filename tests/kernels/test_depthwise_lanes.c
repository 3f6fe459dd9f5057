/* Kernel tests of the depthwise Conv's channels-in-lanes path (kernels/conv_depthwise_lanes.c:
 * 16 channels per vector, small maps, no residual): channel counts that leave a partial last
 * group of lanes, maps with fewer than 16 pixels and with a last transpose that overlaps the one
 * before, strides 1 to 3, dilation, uneven pads, pads the strided grid never reaches, channel
 * multipliers, batches, every activation the path applies in lanes, and maps on both sides of
 * its size limit. Each output must equal, bit for bit, a float loop that adds the taps inside
 * the image in the kernel's order (row by row, left to right, from zero), then the bias and the
 * activation with the kernel's steps; two threads must give the same bits. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph/ops/conv_params.h"
#include "kernels/kernel.h"
#include "kernels/kernels_support.h"
#include "kernels/threads.h"

TestSuite(depthwise_lanes);

static uint32_t seed = 4242u;
/* Uniform in [-2, 2): twice ks_rnd's value. */
static float rnd(void) { return 2.0f * ks_rnd(&seed); }

typedef struct lcase {
  int64_t n, c, mult, h, w, kh, kw, sh, sw, d;
  int64_t pt, pl, pbot, pr; /* pads: top, left, bottom, right */
} lcase;

/* The activation with the kernel's float steps (kernels/conv_epilogue.h). */
static float act_f(float v, int32_t act, float a, float b) {
  switch (act) {
    case MX_CONV_ACT_RELU: return v > 0.0f ? v : 0.0f;
    case MX_CONV_ACT_CLIP:
      v = v < a ? a : v;
      return v > b ? b : v;
    case MX_CONV_ACT_HARD_SIGMOID: {
      float t = a * v + b;
      t = t > 0.0f ? t : 0.0f;
      return t < 1.0f ? t : 1.0f;
    }
    case MX_CONV_ACT_HARD_SWISH: {
      float t = v * (1.0f / 6.0f) + 0.5f;
      t = t < 0.0f ? 0.0f : t;
      t = t > 1.0f ? 1.0f : t;
      return v * t;
    }
    default: return v;
  }
}

/* Runs case k with activation `act` (parameters a, b) on `threads` threads, checks every output's
 * bits against the float loop, and returns the output (malloc'd: the caller frees it). */
static float *run_lcase(const lcase *k, int32_t act, float a, float b, int32_t threads) {
  const int64_t m = k->c * k->mult;
  const int64_t oh = (k->h + k->pt + k->pbot - k->d * (k->kh - 1) - 1) / k->sh + 1;
  const int64_t ow = (k->w + k->pl + k->pr - k->d * (k->kw - 1) - 1) / k->sw + 1;
  cr_assert(oh > 0 && ow > 0);
  const int64_t nx = k->n * k->c * k->h * k->w, nw = m * k->kh * k->kw, ny = k->n * m * oh * ow;
  float *x = malloc((size_t)nx * 4), *w = malloc((size_t)nw * 4), *bias = malloc((size_t)m * 4);
  float *y = malloc((size_t)ny * 4);
  for (int64_t i = 0; i < nx; i++) x[i] = rnd();
  for (int64_t i = 0; i < nw; i++) w[i] = rnd();
  for (int64_t i = 0; i < m; i++) bias[i] = rnd();
  mx_conv_params p;
  memset(&p, 0, sizeof p);
  p.op = MX_CONVOP_CONV;
  p.group = k->c;
  p.n_strides = p.n_dilations = 2;
  p.strides[0] = k->sh, p.strides[1] = k->sw;
  p.dilations[0] = p.dilations[1] = k->d;
  p.n_pads = 4; /* ONNX order: begins (h, w), then ends (h, w) */
  p.pads[0] = k->pt, p.pads[1] = k->pl, p.pads[2] = k->pbot, p.pads[3] = k->pr;
  p.fused_act = act;
  p.act_alpha = a;
  p.act_beta = b;
  mx_kernel_call *c = kc_new(3, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 4, DIMS(k->n, k->c, k->h, k->w), x);
  kc_set(c, 1, MX_FLOAT32, 4, DIMS(m, 1, k->kh, k->kw), w);
  kc_set(c, 2, MX_FLOAT32, 1, DIMS(m), bias);
  kc_set(c, 3, MX_FLOAT32, 4, DIMS(k->n, m, oh, ow), y);
  mx__kthreads_set(threads);
  mx_status st = kc_run("Conv", c);
  mx__kthreads_set(1);
  cr_assert_eq(st, MX_OK, "%s", c->why ? c->why : "");
  int bad = 0;
  for (int64_t in = 0; in < k->n; in++)
    for (int64_t oc = 0; oc < m; oc++)
      for (int64_t i = 0; i < oh; i++)
        for (int64_t j = 0; j < ow && bad < 5; j++) {
          const int64_t ic = oc / k->mult;
          float acc = 0.0f;
          for (int64_t u = 0; u < k->kh; u++)
            for (int64_t v = 0; v < k->kw; v++) {
              const int64_t ih = i * k->sh - k->pt + u * k->d, iw = j * k->sw - k->pl + v * k->d;
              if (ih < 0 || ih >= k->h || iw < 0 || iw >= k->w) continue;
              const float prod = w[(oc * k->kh + u) * k->kw + v] * x[((in * k->c + ic) * k->h + ih) * k->w + iw];
              acc = acc + prod;
            }
          const int64_t o = ((in * m + oc) * oh + i) * ow + j;
          const float want = act_f(acc + bias[oc], act, a, b);
          uint32_t gb, wb;
          memcpy(&gb, &y[o], 4);
          memcpy(&wb, &want, 4);
          if (gb != wb) {
            cr_expect(false, "n=%lld c=%lld x%lld %lldx%lld k=%lldx%lld s=%lld,%lld d=%lld act %d: (%lld,%lld,%lld,%lld) %.9g vs %.9g",
                      (long long)k->n, (long long)k->c, (long long)k->mult, (long long)k->h, (long long)k->w,
                      (long long)k->kh, (long long)k->kw, (long long)k->sh, (long long)k->sw, (long long)k->d,
                      (int)act, (long long)in, (long long)oc, (long long)i, (long long)j, (double)y[o],
                      (double)want);
            bad++;
          }
        }
  free(x), free(w), free(bias), free(c);
  return y;
}

static const lcase cases[] = {
    /* n  c  mult h   w  kh kw sh sw d  pt pl pb pr */
    {1, 576, 1, 7, 7, 5, 5, 1, 1, 1, 2, 2, 2, 2},    /* MobileNetV3's 7x7 5x5 layers */
    {1, 288, 1, 14, 14, 5, 5, 2, 2, 1, 2, 2, 2, 2},  /* 14x14 to 7x7 at stride 2 */
    {1, 40, 1, 14, 14, 5, 5, 1, 1, 1, 2, 2, 2, 2},   /* 40 channels: a last group of 8 lanes */
    {1, 72, 1, 56, 56, 3, 3, 2, 2, 1, 1, 1, 1, 1},   /* 56x56 to 28x28 at stride 2 */
    {1, 17, 1, 28, 28, 3, 3, 1, 1, 1, 1, 1, 1, 1},   /* 17 channels: a group of 1 */
    {2, 5, 1, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1},      /* a batch, fewer channels than lanes */
    {1, 3, 1, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1},      /* 9 pixels: fewer than one transpose */
    {1, 19, 1, 1, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1},     /* a 1x1 map */
    {1, 20, 1, 4, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1},     /* 20 pixels: the last transpose overlaps */
    {1, 18, 1, 9, 13, 3, 5, 3, 2, 1, 1, 2, 0, 1},    /* strides 3 and 2, uneven pads */
    {1, 16, 1, 11, 9, 3, 3, 1, 1, 2, 2, 1, 2, 3},    /* dilated */
    {1, 16, 1, 8, 8, 3, 3, 2, 2, 1, 0, 0, 3, 3},     /* end pads the strided grid never reaches */
    {1, 6, 3, 10, 10, 3, 3, 1, 1, 1, 1, 1, 1, 1},    /* channel multiplier 3 (18 outputs) */
    {2, 4, 2, 6, 7, 5, 5, 2, 1, 1, 2, 2, 2, 2},      /* multiplier 2, a batch */
    {1, 33, 1, 1, 40, 1, 3, 1, 1, 1, 0, 1, 0, 1},    /* one row */
    {1, 16, 1, 62, 62, 3, 3, 1, 1, 1, 1, 1, 1, 1},   /* a padded image of 64x64 pixels: the limit */
    {1, 16, 1, 63, 63, 3, 3, 1, 1, 1, 1, 1, 1, 1},   /* 65x65: the per-channel path */
};

static const struct {
  int32_t act;
  float a, b;
} acts[] = {
    {MX_CONV_ACT_NONE, 0, 0},           {MX_CONV_ACT_RELU, 0, 0},
    {MX_CONV_ACT_CLIP, -0.5f, 1.5f},    {MX_CONV_ACT_HARD_SIGMOID, 0.2f, 0.5f},
    {MX_CONV_ACT_HARD_SWISH, 0, 0},
};

Test(depthwise_lanes, every_activation_gives_the_float_loops_bits) {
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    for (size_t a = 0; a < sizeof acts / sizeof *acts; a++)
      free(run_lcase(&cases[i], acts[a].act, acts[a].a, acts[a].b, 1));
}

Test(depthwise_lanes, two_threads_give_the_bits_of_one) {
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const lcase *k = &cases[i];
    const uint32_t start = seed; /* both runs draw the same inputs */
    float *one = run_lcase(k, MX_CONV_ACT_HARD_SWISH, 0, 0, 1);
    seed = start;
    float *two = run_lcase(k, MX_CONV_ACT_HARD_SWISH, 0, 0, 2);
    const int64_t oh = (k->h + k->pt + k->pbot - k->d * (k->kh - 1) - 1) / k->sh + 1;
    const int64_t ow = (k->w + k->pl + k->pr - k->d * (k->kw - 1) - 1) / k->sw + 1;
    cr_expect_eq(memcmp(one, two, (size_t)(k->n * k->c * k->mult * oh * ow) * 4), 0, "case %zu", i);
    free(one), free(two);
  }
}
