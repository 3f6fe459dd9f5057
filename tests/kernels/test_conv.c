/* Kernel tests of the convolution and pooling kernels (kernels/conv*.c, kernels/pool.c):
 * 2-D Conv against a direct six-loop reference over the configurations ResNet and MobileNet
 * use (7x7 stride 2 stems, 3x3 with pads, 1x1 pointwise and strided 1x1, depthwise with and
 * without a channel multiplier, grouped, dilated, asymmetric pads, SAME_LOWER), in float32,
 * float64 and float16; ConvTranspose against a direct scatter; MaxPool's Indices in both
 * storage orders; AveragePool's divisor with and without count_include_pad; QLinearConv on the
 * operator's documented example; ConvInteger with zero points; and refusals of bad shapes. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/half.h"
#include "graph/ops/conv_params.h"
#include "kernels/kernel.h"
#include "kernels/kernels_support.h"

TestSuite(conv_kernels);

static uint32_t rng_state = 12345u;
static double rnd(void) {
  rng_state = rng_state * 1664525u + 1013904223u;
  return (double)(rng_state >> 8) / (double)(1u << 24) * 2.0 - 1.0;
}

/* One 2-D convolution case. */
typedef struct conv_case {
  int64_t n, c, h, w, m, group, kh, kw, sh, sw, dh, dw;
  int64_t pads[4]; /* top, left, bottom, right */
  int auto_pad;
  bool bias;
} conv_case;

static int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe) {
  return (in + pb + pe - d * (k - 1) - 1) / s + 1;
}

/* The pads a case uses (auto_pad resolved like the ONNX spec). */
static void case_pads(const conv_case *k, int64_t *oh, int64_t *ow, int64_t *pt, int64_t *pl) {
  if (k->auto_pad == MX_AUTO_PAD_NOTSET) {
    *pt = k->pads[0];
    *pl = k->pads[1];
    *oh = out_size(k->h, k->kh, k->sh, k->dh, k->pads[0], k->pads[2]);
    *ow = out_size(k->w, k->kw, k->sw, k->dw, k->pads[1], k->pads[3]);
    return;
  }
  *oh = (k->h + k->sh - 1) / k->sh;
  *ow = (k->w + k->sw - 1) / k->sw;
  int64_t th = (*oh - 1) * k->sh + (k->kh - 1) * k->dh + 1 - k->h,
          tw = (*ow - 1) * k->sw + (k->kw - 1) * k->dw + 1 - k->w;
  th = th < 0 ? 0 : th;
  tw = tw < 0 ? 0 : tw;
  *pt = k->auto_pad == MX_AUTO_PAD_SAME_LOWER ? th - th / 2 : th / 2;
  *pl = k->auto_pad == MX_AUTO_PAD_SAME_LOWER ? tw - tw / 2 : tw / 2;
}

static void conv_ref(const conv_case *k, const double *x, const double *w, const double *b, double *y,
                     int64_t oh, int64_t ow, int64_t pt, int64_t pl) {
  int64_t cg = k->c / k->group, mg = k->m / k->group;
  for (int64_t n = 0; n < k->n; n++)
    for (int64_t m = 0; m < k->m; m++)
      for (int64_t i = 0; i < oh; i++)
        for (int64_t j = 0; j < ow; j++) {
          double acc = b ? b[m] : 0.0;
          int64_t g = m / mg;
          for (int64_t c = 0; c < cg; c++)
            for (int64_t a = 0; a < k->kh; a++)
              for (int64_t e = 0; e < k->kw; e++) {
                int64_t ih = i * k->sh - pt + a * k->dh, iw = j * k->sw - pl + e * k->dw;
                if (ih < 0 || ih >= k->h || iw < 0 || iw >= k->w) continue;
                acc += x[((n * k->c + g * cg + c) * k->h + ih) * k->w + iw] *
                       w[((m * cg + c) * k->kh + a) * k->kw + e];
              }
          y[((n * k->m + m) * oh + i) * ow + j] = acc;
        }
}

static mx_conv_params case_params(const conv_case *k) {
  mx_conv_params p;
  memset(&p, 0, sizeof p);
  p.op = MX_CONVOP_CONV;
  p.group = k->group;
  p.auto_pad = k->auto_pad;
  p.n_strides = p.n_dilations = 2;
  p.strides[0] = k->sh, p.strides[1] = k->sw;
  p.dilations[0] = k->dh, p.dilations[1] = k->dw;
  if (k->auto_pad == MX_AUTO_PAD_NOTSET) {
    p.n_pads = 4;
    memcpy(p.pads, k->pads, sizeof k->pads);
  }
  return p;
}

/* Runs a case in dtype dt (float32, float64 or float16) and compares with the reference. */
static void run_case(const conv_case *k, mx_dtype dt, double tol) {
  int64_t oh, ow, pt, pl;
  case_pads(k, &oh, &ow, &pt, &pl);
  int64_t nx = k->n * k->c * k->h * k->w, nw = k->m * (k->c / k->group) * k->kh * k->kw,
          ny = k->n * k->m * oh * ow;
  double *x = malloc((size_t)nx * 8), *w = malloc((size_t)nw * 8), *b = malloc((size_t)k->m * 8);
  double *ref = malloc((size_t)ny * 8);
  for (int64_t i = 0; i < nx; i++) x[i] = rnd();
  for (int64_t i = 0; i < nw; i++) w[i] = rnd();
  for (int64_t i = 0; i < k->m; i++) b[i] = rnd();
  size_t es = mx_dtype_size(dt);
  void *xt = malloc((size_t)nx * es), *wt = malloc((size_t)nw * es), *bt = malloc((size_t)k->m * es);
  void *yt = malloc((size_t)ny * es);
  for (int64_t i = 0; i < nx; i++) {
    if (dt == MX_FLOAT16)
      x[i] = mx__f16_to_f32(mx__f32_to_f16((float)x[i])); /* the reference sees the rounded input */
    if (dt == MX_FLOAT32) ((float *)xt)[i] = (float)x[i];
    if (dt == MX_FLOAT64) ((double *)xt)[i] = x[i];
    if (dt == MX_FLOAT16) ((uint16_t *)xt)[i] = mx__f32_to_f16((float)x[i]);
  }
  for (int64_t i = 0; i < nw; i++) {
    if (dt == MX_FLOAT16) w[i] = mx__f16_to_f32(mx__f32_to_f16((float)w[i]));
    if (dt == MX_FLOAT32) ((float *)wt)[i] = (float)w[i];
    if (dt == MX_FLOAT64) ((double *)wt)[i] = w[i];
    if (dt == MX_FLOAT16) ((uint16_t *)wt)[i] = mx__f32_to_f16((float)w[i]);
  }
  for (int64_t i = 0; i < k->m; i++) {
    if (dt == MX_FLOAT16) b[i] = mx__f16_to_f32(mx__f32_to_f16((float)b[i]));
    if (dt == MX_FLOAT32) ((float *)bt)[i] = (float)b[i];
    if (dt == MX_FLOAT64) ((double *)bt)[i] = b[i];
    if (dt == MX_FLOAT16) ((uint16_t *)bt)[i] = mx__f32_to_f16((float)b[i]);
  }
  conv_ref(k, x, w, k->bias ? b : NULL, ref, oh, ow, pt, pl);
  mx_conv_params p = case_params(k);
  mx_kernel_call *c = kc_new(k->bias ? 3 : 2, 1, &p);
  kc_set(c, 0, dt, 4, DIMS(k->n, k->c, k->h, k->w), xt);
  kc_set(c, 1, dt, 4, DIMS(k->m, k->c / k->group, k->kh, k->kw), wt);
  if (k->bias) kc_set(c, 2, dt, 1, DIMS(k->m), bt);
  kc_set(c, k->bias ? 3 : 2, dt, 4, DIMS(k->n, k->m, oh, ow), yt);
  cr_assert_eq(kc_run("Conv", c), MX_OK, "%s", c->why ? c->why : "");
  int bad = 0;
  for (int64_t i = 0; i < ny && bad < 5; i++) {
    double got = dt == MX_FLOAT32   ? ((float *)yt)[i]
                 : dt == MX_FLOAT64 ? ((double *)yt)[i]
                                    : mx__f16_to_f32(((uint16_t *)yt)[i]);
    if (fabs(got - ref[i]) > tol * (1.0 + fabs(ref[i]))) {
      cr_expect(false, "%s c=%lld m=%lld g=%lld k=%lldx%lld: [%lld] %g vs %g", mx_dtype_name(dt),
                (long long)k->c, (long long)k->m, (long long)k->group, (long long)k->kh, (long long)k->kw,
                (long long)i, got, ref[i]);
      bad++;
    }
  }
  free(c);
  free(x), free(w), free(b), free(ref), free(xt), free(wt), free(bt), free(yt);
}

static const conv_case cases[] = {
    /* n  c   h   w   m  grp kh kw sh sw dh dw  pads          auto_pad  bias */
    {2, 3, 17, 19, 8, 1, 7, 7, 2, 2, 1, 1, {3, 3, 3, 3}, 0, true},           /* ResNet stem */
    {1, 8, 9, 9, 16, 1, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 0, false},           /* 3x3 same */
    {2, 16, 7, 6, 12, 1, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 0, true},           /* 1x1 pointwise */
    {1, 16, 8, 8, 24, 1, 1, 1, 2, 2, 1, 1, {0, 0, 0, 0}, 0, false},          /* strided 1x1 */
    {2, 12, 11, 10, 12, 12, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, 0, true},        /* depthwise s2 */
    {1, 6, 9, 9, 12, 6, 5, 5, 1, 1, 1, 1, {2, 2, 2, 2}, 0, true},            /* depthwise x2 */
    {1, 8, 10, 9, 12, 4, 3, 3, 1, 2, 2, 1, {2, 0, 1, 3}, 0, true},           /* grouped, dilated */
    {1, 4, 9, 8, 6, 2, 3, 2, 2, 3, 1, 2, {0}, MX_AUTO_PAD_SAME_LOWER, true}, /* SAME_LOWER */
    {1, 4, 9, 8, 6, 1, 4, 3, 3, 2, 1, 1, {0}, MX_AUTO_PAD_SAME_UPPER, false},
    {1, 4, 6, 3, 4, 4, 5, 5, 1, 1, 1, 1, {2, 2, 2, 2}, 0, true}, /* depthwise, row narrower than the kernel */
    {1, 3, 9, 17, 3, 3, 5, 5, 2, 2, 1, 1, {2, 2, 2, 2}, 0, false}, /* depthwise 5x5 s2 */
    {1, 2, 8, 12, 2, 2, 3, 3, 1, 1, 2, 2, {2, 2, 2, 2}, 0, true},  /* dilated depthwise */
    {1, 2, 7, 9, 2, 2, 3, 3, 1, 3, 1, 1, {1, 1, 1, 1}, 0, true},   /* depthwise stride 3 */
};

Test(conv_kernels, conv2d_float32_matches_direct_loops) {
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i], MX_FLOAT32, 1e-5);
}

Test(conv_kernels, conv2d_float64_matches_direct_loops) {
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i], MX_FLOAT64, 1e-12);
}

Test(conv_kernels, conv2d_float16_computes_in_float32) {
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i], MX_FLOAT16, 4e-3);
}

Test(conv_kernels, conv_refuses_channel_mismatch) {
  float x[2 * 4 * 4] = {0}, w[3 * 3 * 3 * 3] = {0}, y[3 * 2 * 2];
  mx_conv_params p = {.op = MX_CONVOP_CONV, .group = 1};
  mx_kernel_call *c = kc_new(2, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 4, DIMS(1, 2, 4, 4), x);
  kc_set(c, 1, MX_FLOAT32, 4, DIMS(3, 3, 3, 3), w);
  kc_set(c, 2, MX_FLOAT32, 4, DIMS(1, 3, 2, 2), y);
  cr_assert_eq(kc_run("Conv", c), MX_ERR_KERNEL);
  cr_assert(c->why && strstr(c->why, "channel"));
  free(c);
}

/* --- ConvTranspose ------------------------------------------------------------------------------ */

Test(conv_kernels, conv_transpose_grouped_strided_matches_scatter) {
  enum { N = 2, C = 4, H = 5, W = 4, G = 2, MG = 3, KH = 3, KW = 2, SH = 2, SW = 3 };
  const int64_t pt = 1, pl = 0, pb = 2, pr = 1, oph = 1, opw = 2;
  const int64_t OH = SH * (H - 1) + oph + KH - pt - pb, OW = SW * (W - 1) + opw + KW - pl - pr;
  float x[N * C * H * W], w[C * MG * KH * KW], b[G * MG];
  for (size_t i = 0; i < sizeof x / sizeof x[0]; i++) x[i] = (float)rnd();
  for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) w[i] = (float)rnd();
  for (size_t i = 0; i < sizeof b / sizeof b[0]; i++) b[i] = (float)rnd();
  float *y = malloc(sizeof(float) * N * G * MG * OH * OW),
        *ref = calloc((size_t)(N * G * MG * OH * OW), sizeof(float));
  for (int n = 0; n < N; n++)
    for (int m = 0; m < G * MG; m++)
      for (int64_t i = 0; i < OH * OW; i++) ref[(n * G * MG + m) * OH * OW + i] = b[m];
  for (int n = 0; n < N; n++)
    for (int c = 0; c < C; c++)
      for (int i = 0; i < H; i++)
        for (int j = 0; j < W; j++)
          for (int mm = 0; mm < MG; mm++)
            for (int a = 0; a < KH; a++)
              for (int e = 0; e < KW; e++) {
                int64_t oy = i * SH - pt + a, ox = j * SW - pl + e;
                if (oy < 0 || oy >= OH || ox < 0 || ox >= OW) continue;
                int m = (c / (C / G)) * MG + mm;
                ref[((n * G * MG + m) * OH + oy) * OW + ox] +=
                    x[((n * C + c) * H + i) * W + j] * w[((c * MG + mm) * KH + a) * KW + e];
              }
  mx_conv_params p = {.op = MX_CONVOP_CONV_TRANSPOSE,
                      .group = G,
                      .n_strides = 2,
                      .strides = {SH, SW},
                      .n_pads = 4,
                      .pads = {pt, pl, pb, pr},
                      .n_output_padding = 2,
                      .output_padding = {oph, opw}};
  mx_kernel_call *c = kc_new(3, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 4, DIMS(N, C, H, W), x);
  kc_set(c, 1, MX_FLOAT32, 4, DIMS(C, MG, KH, KW), w);
  kc_set(c, 2, MX_FLOAT32, 1, DIMS(G * MG), b);
  kc_set(c, 3, MX_FLOAT32, 4, DIMS(N, G * MG, OH, OW), y);
  cr_assert_eq(kc_run("ConvTranspose", c), MX_OK, "%s", c->why ? c->why : "");
  expect_f32_near(y, ref, N * G * MG * OH * OW, 1e-5f);
  free(c);
  free(y), free(ref);
}

/* --- pools -------------------------------------------------------------------------------------- */

Test(conv_kernels, maxpool_indices_in_both_storage_orders) {
  /* 1x2x3x4 input, 2x2 window, stride 2 with a one-column left pad: windows cover columns
   * {-1,0} and {1,2} (column 3 is left over). */
  float x[24];
  for (int i = 0; i < 24; i++) x[i] = (float)((i * 7) % 11);
  float y[2 * 1 * 2];
  int64_t idx[4];
  for (int order = 0; order < 2; order++) {
    mx_conv_params p = {.op = MX_CONVOP_MAX_POOL,
                        .group = 1,
                        .storage_order = order,
                        .n_kernel = 2,
                        .kernel_shape = {2, 2},
                        .n_strides = 2,
                        .strides = {2, 2},
                        .n_pads = 4,
                        .pads = {0, 1, 0, 0}};
    mx_kernel_call *c = kc_new(1, 2, &p);
    kc_set(c, 0, MX_FLOAT32, 4, DIMS(1, 2, 3, 4), x);
    kc_set(c, 1, MX_FLOAT32, 4, DIMS(1, 2, 1, 2), y);
    kc_set(c, 2, MX_INT64, 4, DIMS(1, 2, 1, 2), idx);
    cr_assert_eq(kc_run("MaxPool", c), MX_OK);
    for (int ch = 0; ch < 2; ch++)
      for (int o = 0; o < 2; o++) {
        float best = -INFINITY;
        int64_t bh = 0, bw = 0;
        for (int a = 0; a < 2; a++)
          for (int e = 0; e < 2; e++) {
            int64_t w = o * 2 - 1 + e;
            if (w < 0) continue;
            float v = x[ch * 12 + a * 4 + w];
            if (v > best) best = v, bh = a, bw = w;
          }
        cr_expect_eq(y[ch * 2 + o], best);
        int64_t want = ch * 12 + (order ? bh + bw * 3 : bh * 4 + bw);
        cr_expect_eq(idx[ch * 2 + o], want, "order %d ch %d o %d: %lld vs %lld", order, ch, o,
                     (long long)idx[ch * 2 + o], (long long)want);
      }
    free(c);
  }
}

Test(conv_kernels, averagepool_divisor_with_and_without_pads) {
  float x[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, y[4];
  for (int include = 0; include < 2; include++) {
    mx_conv_params p = {.op = MX_CONVOP_AVERAGE_POOL,
                        .group = 1,
                        .count_include_pad = include,
                        .n_kernel = 2,
                        .kernel_shape = {2, 2},
                        .n_strides = 2,
                        .strides = {2, 2},
                        .n_pads = 4,
                        .pads = {1, 1, 0, 0}};
    mx_kernel_call *c = kc_new(1, 1, &p);
    kc_set(c, 0, MX_FLOAT32, 4, DIMS(1, 1, 3, 3), x);
    kc_set(c, 1, MX_FLOAT32, 4, DIMS(1, 1, 2, 2), y);
    cr_assert_eq(kc_run("AveragePool", c), MX_OK);
    /* Windows: {1}, {2,3}, {4,7}, {5,6,8,9}. */
    float want0[4] = {1, 2.5f, 5.5f, 7}, want1[4] = {0.25f, 1.25f, 2.75f, 7};
    expect_f32_near(y, include ? want1 : want0, 4, 1e-6f);
    free(c);
  }
}

Test(conv_kernels, global_pools_over_3d_and_float16) {
  uint16_t x[2 * 2 * 2 * 2], y[2];
  float xv[16];
  for (int i = 0; i < 16; i++) x[i] = mx__f32_to_f16(xv[i] = (float)(i - 5));
  mx_conv_params p = {.op = MX_CONVOP_GLOBAL_MAX_POOL, .group = 1};
  mx_kernel_call *c = kc_new(1, 1, &p);
  kc_set(c, 0, MX_FLOAT16, 5, DIMS(1, 2, 2, 2, 2), x);
  kc_set(c, 1, MX_FLOAT16, 5, DIMS(1, 2, 1, 1, 1), y);
  cr_assert_eq(kc_run("GlobalMaxPool", c), MX_OK);
  cr_expect_eq(mx__f16_to_f32(y[0]), 2.0f);
  cr_expect_eq(mx__f16_to_f32(y[1]), 10.0f);
  p.op = MX_CONVOP_GLOBAL_AVERAGE_POOL;
  cr_assert_eq(kc_run("GlobalAveragePool", c), MX_OK);
  cr_expect_eq(mx__f16_to_f32(y[0]), -1.5f);
  cr_expect_eq(mx__f16_to_f32(y[1]), 6.5f);
  free(c);
}

/* --- quantized convolutions --------------------------------------------------------------------- */

Test(conv_kernels, qlinear_conv_documented_example) {
  uint8_t x[49] = {255, 174, 162, 25,  203, 168, 58,  15,  59,  237, 95,  129, 0,  64,  56, 242, 153,
                   221, 168, 12,  166, 232, 178, 186, 195, 237, 162, 237, 188, 39, 124, 77, 80,  102,
                   43,  127, 230, 21,  83,  41,  40,  134, 255, 154, 92,  141, 42, 148, 247};
  uint8_t want[49] = {0,   81,  93,  230, 52,  87,  197, 240, 196, 18,  160, 126, 255, 191, 199, 13,  102,
                      34,  87,  243, 89,  23,  77,  69,  60,  18,  93,  18,  67,  216, 131, 178, 175, 153,
                      212, 128, 25,  234, 172, 214, 215, 121, 0,   101, 163, 114, 213, 107, 8};
  uint8_t w[1] = {0}, xzp = 132, wzp = 255, yzp = 123, y[49];
  float xs = 0.00369204697f, ws = 0.00172794575f, ys = 0.00162681262f;
  mx_conv_params p = {.op = MX_CONVOP_QLINEAR_CONV, .group = 1};
  mx_kernel_call *c = kc_new(8, 1, &p);
  kc_set(c, 0, MX_UINT8, 4, DIMS(1, 1, 7, 7), x);
  kc_set(c, 1, MX_FLOAT32, 0, NULL, &xs);
  kc_set(c, 2, MX_UINT8, 0, NULL, &xzp);
  kc_set(c, 3, MX_UINT8, 4, DIMS(1, 1, 1, 1), w);
  kc_set(c, 4, MX_FLOAT32, 1, DIMS(1), &ws);
  kc_set(c, 5, MX_UINT8, 1, DIMS(1), &wzp);
  kc_set(c, 6, MX_FLOAT32, 0, NULL, &ys);
  kc_set(c, 7, MX_UINT8, 0, NULL, &yzp);
  kc_set(c, 8, MX_UINT8, 4, DIMS(1, 1, 7, 7), y);
  cr_assert_eq(kc_run("QLinearConv", c), MX_OK, "%s", c->why ? c->why : "");
  for (int i = 0; i < 49; i++) cr_expect_eq(y[i], want[i], "[%d] %d vs %d", i, y[i], want[i]);
  free(c);
}

Test(conv_kernels, conv_integer_with_zero_points_and_padding) {
  /* 3x3 input minus zero point 1, 2x2 weights minus 2, one pixel of padding: padded cells read
   * as the zero point, i.e. contribute nothing. */
  int8_t x[9] = {2, 3, 4, 5, 6, 7, 8, 9, 10}, w[4] = {3, 4, 5, 6}, xzp = 1, wzp = 2;
  int32_t y[16];
  mx_conv_params p = {.op = MX_CONVOP_CONV_INTEGER, .group = 1, .n_pads = 4, .pads = {1, 1, 1, 1}};
  mx_kernel_call *c = kc_new(4, 1, &p);
  kc_set(c, 0, MX_INT8, 4, DIMS(1, 1, 3, 3), x);
  kc_set(c, 1, MX_INT8, 4, DIMS(1, 1, 2, 2), w);
  kc_set(c, 2, MX_INT8, 0, NULL, &xzp);
  kc_set(c, 3, MX_INT8, 0, NULL, &wzp);
  kc_set(c, 4, MX_INT32, 4, DIMS(1, 1, 4, 4), y);
  cr_assert_eq(kc_run("ConvInteger", c), MX_OK, "%s", c->why ? c->why : "");
  int32_t xs[9], ws[4] = {1, 2, 3, 4};
  for (int i = 0; i < 9; i++) xs[i] = x[i] - 1;
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++) {
      int32_t acc = 0;
      for (int a = 0; a < 2; a++)
        for (int e = 0; e < 2; e++) {
          int ih = i - 1 + a, iw = j - 1 + e;
          if (ih >= 0 && ih < 3 && iw >= 0 && iw < 3) acc += xs[ih * 3 + iw] * ws[a * 2 + e];
        }
      cr_expect_eq(y[i * 4 + j], acc, "[%d,%d] %d vs %d", i, j, y[i * 4 + j], acc);
    }
  free(c);
}
