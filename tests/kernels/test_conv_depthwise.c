/* Kernel tests of the depthwise Conv core (kernels/conv_depthwise.c) without a residual, where
 * bias and activation are applied to the 16-lane sums in registers: every fused activation,
 * stride 1 (one long row) and stride 2 (even/odd planes), maps narrower than a vector, a kernel
 * wider than the image, dilation and channel multipliers, blocks of several rows and of 64
 * outputs with their short last blocks, against a direct loop in double. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph/ops/conv_params.h"
#include "kernels/kernel.h"
#include "kernels/kernels_support.h"
#include "kernels/threads.h"

TestSuite(conv_depthwise);

static uint32_t seed = 99u;
/* Uniform in [-2, 2): twice ks_rnd's value, the same bits as scaling by 4 and shifting by 2. */
static float rnd(void) { return 2.0f * ks_rnd(&seed); }

typedef struct dcase {
  int64_t n, c, mult, h, w, kh, kw, s, d, pad;
} dcase;

static double act_of(double v, int32_t act, double a, double b) {
  switch (act) {
    case MX_CONV_ACT_RELU: return v > 0 ? v : 0;
    case MX_CONV_ACT_CLIP: return v < a ? a : (v > b ? b : v);
    case MX_CONV_ACT_HARD_SIGMOID: {
      double t = a * v + b;
      return t < 0 ? 0 : (t > 1 ? 1 : t);
    }
    case MX_CONV_ACT_HARD_SWISH: {
      double t = v / 6 + 0.5;
      return v * (t < 0 ? 0 : (t > 1 ? 1 : t));
    }
    case MX_CONV_ACT_SIGMOID: return 1 / (1 + exp(-v));
    default: return v;
  }
}

/* Runs case k on `threads` intra-op threads and checks it against the double loop; the output
 * goes to *out (malloc'd, the caller frees it) when out is not NULL. */
static void run_dcase_on(const dcase *k, int32_t act, float a, float b, int32_t threads, float **out) {
  int64_t m = k->c * k->mult;
  int64_t oh = (k->h + 2 * k->pad - k->d * (k->kh - 1) - 1) / k->s + 1;
  int64_t ow = (k->w + 2 * k->pad - k->d * (k->kw - 1) - 1) / k->s + 1;
  int64_t nx = k->n * k->c * k->h * k->w, nw = m * k->kh * k->kw, ny = k->n * m * oh * ow;
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
  p.strides[0] = p.strides[1] = k->s;
  p.dilations[0] = p.dilations[1] = k->d;
  p.n_pads = 4;
  for (int i = 0; i < 4; i++) p.pads[i] = k->pad;
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
          double acc = bias[oc];
          for (int64_t u = 0; u < k->kh; u++)
            for (int64_t v = 0; v < k->kw; v++) {
              int64_t ih = i * k->s - k->pad + u * k->d, iw = j * k->s - k->pad + v * k->d;
              if (ih < 0 || ih >= k->h || iw < 0 || iw >= k->w) continue;
              acc += (double)x[((in * k->c + oc / k->mult) * k->h + ih) * k->w + iw] *
                     (double)w[(oc * k->kh + u) * k->kw + v];
            }
          double want = act_of(acc, act, a, b), got = y[((in * m + oc) * oh + i) * ow + j];
          if (fabs(got - want) > 1e-4 * (1 + fabs(want))) {
            cr_expect(false, "act %d c=%lld h=%lld w=%lld k=%lldx%lld s=%lld d=%lld pad=%lld: (%lld,%lld,%lld) %g vs %g",
                      act, (long long)k->c, (long long)k->h, (long long)k->w, (long long)k->kh, (long long)k->kw,
                      (long long)k->s, (long long)k->d, (long long)k->pad, (long long)oc, (long long)i, (long long)j,
                      got, want);
            bad++;
          }
        }
  if (out)
    *out = y;
  else
    free(y);
  free(x), free(w), free(bias), free(c);
}

static void run_dcase(const dcase *k, int32_t act, float a, float b) { run_dcase_on(k, act, a, b, 1, NULL); }

static const dcase cases[] = {
    /* n  c  mult h   w   kh kw s  d  pad */
    {1, 8, 1, 28, 28, 3, 3, 1, 1, 1},  /* stride 1: one long row */
    {2, 5, 1, 15, 17, 3, 3, 2, 1, 1},  /* stride 2, odd sizes */
    {1, 6, 1, 7, 7, 5, 5, 1, 1, 2},    /* a 7x7 map, narrower than a vector */
    {1, 4, 1, 14, 14, 5, 5, 2, 1, 2},  /* 5x5 stride 2 */
    {1, 3, 1, 3, 3, 5, 5, 1, 1, 2},    /* a kernel wider than the image */
    {1, 3, 2, 11, 9, 3, 3, 1, 2, 2},   /* dilated, channel multiplier 2 */
    {1, 2, 1, 1, 40, 1, 3, 1, 1, 1},   /* one row (1-D) */
    {1, 2, 1, 9, 1, 3, 1, 1, 1, 0},    /* one column */
    {1, 3, 1, 33, 35, 3, 3, 2, 1, 0},  /* stride 2 without padding */
    /* stride 2 on rows of 32 image columns and more: the planes split by vectors, the
     * columns next to the edges one by one */
    {1, 3, 1, 20, 112, 3, 3, 2, 1, 1},  /* odd left pad, even width */
    {1, 2, 1, 9, 67, 3, 3, 2, 1, 1},    /* odd width */
    {1, 2, 1, 9, 66, 3, 3, 2, 1, 0},    /* no pad: pairs start on even columns */
    {1, 3, 1, 12, 56, 5, 5, 2, 1, 2},   /* 5x5, even left pad */
    {1, 2, 1, 7, 33, 5, 5, 2, 1, 2},    /* one vector step, then edges */
    {1, 2, 1, 8, 41, 3, 3, 2, 1, 3},    /* a pad wider than the taps need */
    /* blocks of several output rows (rows of up to 32) and of 64 outputs with a short last
     * block; every case has channels after the first, which rely on the padding the first
     * one left zero in the slot */
    {1, 5, 1, 13, 13, 3, 3, 2, 1, 1},   /* 7 rows of 7: a block of 4 rows, then 3 */
    {1, 3, 1, 27, 27, 5, 5, 2, 1, 2},   /* 14 rows of 14: blocks of 4, then 2 */
    {1, 3, 1, 53, 53, 3, 3, 2, 1, 1},   /* 27 rows of 27: blocks of 2 rows of 2 vectors, then 1 */
    {1, 3, 1, 9, 150, 3, 3, 2, 1, 1},   /* rows of 75: 64, then one vector */
    {1, 2, 1, 5, 200, 3, 3, 2, 1, 1},   /* rows of 100: 64, then three vectors */
    {1, 4, 1, 5, 20, 3, 3, 1, 1, 1},    /* stride 1, a long row of 108: 64, then three vectors */
    {1, 4, 1, 3, 30, 3, 3, 1, 1, 1},    /* stride 1, a long row of 94: 64, then two vectors */
    {1, 3, 1, 4, 5, 3, 3, 1, 1, 1},     /* image rows copied exactly (too few floats to spill) */
    {1, 3, 1, 9, 5, 3, 3, 1, 1, 2},     /* rows copied by vectors, then exactly, pad 2 */
    {1, 3, 1, 10, 10, 3, 3, 3, 1, 1},   /* stride 3: the padded image of stride 1 */
    {1, 3, 1, 12, 12, 3, 5, 1, 1, 2},   /* a 3x5 kernel (neither 3x3 nor 5x5) */
    /* stride 2 on rows of up to 32 image columns: split as one vector step per row */
    {1, 3, 1, 9, 9, 2, 2, 2, 1, 0},     /* the image wider than the taps reach: not split so */
    {1, 3, 1, 11, 31, 3, 3, 2, 1, 1},   /* 31 columns, odd pad: column 0 to the odd plane */
    {1, 3, 1, 6, 32, 5, 5, 2, 1, 2},    /* 32 columns: the last rows one by one */
};

Test(conv_depthwise, fused_activations_without_residual_match_a_direct_loop) {
  static const int32_t acts[] = {MX_CONV_ACT_NONE, MX_CONV_ACT_RELU, MX_CONV_ACT_CLIP, MX_CONV_ACT_HARD_SIGMOID,
                                 MX_CONV_ACT_HARD_SWISH, MX_CONV_ACT_SIGMOID};
  for (size_t a = 0; a < sizeof acts / sizeof *acts; a++) {
    float alpha = acts[a] == MX_CONV_ACT_CLIP ? -0.5f : 0.2f, beta = acts[a] == MX_CONV_ACT_CLIP ? 1.5f : 0.5f;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_dcase(&cases[i], acts[a], alpha, beta);
  }
}

/* The wide stride-2 shapes and MobileNetV3's depthwise layers on one and two threads: the
 * same bits (every output adds its taps in one order, whichever thread runs its channel). */
Test(conv_depthwise, one_and_two_threads_give_the_same_bits) {
  static const dcase shapes[] = {
      {1, 16, 1, 112, 112, 3, 3, 2, 1, 1}, {1, 72, 1, 56, 56, 3, 3, 2, 1, 1}, {1, 96, 1, 28, 28, 5, 5, 2, 1, 2},
      {1, 240, 1, 14, 14, 5, 5, 1, 1, 2},  {1, 576, 1, 7, 7, 5, 5, 1, 1, 2},  {2, 9, 1, 9, 67, 3, 3, 2, 1, 1},
  };
  for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
    float *one = NULL, *two = NULL;
    seed = 7u; /* the same data on both runs */
    run_dcase_on(&shapes[i], MX_CONV_ACT_HARD_SWISH, 0, 0, 1, &one);
    seed = 7u;
    run_dcase_on(&shapes[i], MX_CONV_ACT_HARD_SWISH, 0, 0, 2, &two);
    const dcase *k = &shapes[i];
    int64_t oh = (k->h + 2 * k->pad - (k->kh - 1) - 1) / k->s + 1, ow = (k->w + 2 * k->pad - (k->kw - 1) - 1) / k->s + 1;
    expect_f32_same(two, one, k->n * k->c * k->mult * oh * ow);
    free(one), free(two);
  }
}
