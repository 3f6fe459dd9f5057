/* Tests of the normalization and loss CPU kernels (kernels/norm.c, kernels/loss.c) in the
 * element types the ONNX node tests leave out: float64 against double formulas computed here,
 * float16 and bfloat16 through the float32 path, statistics of another type than X
 * (BatchNormalization opset 15), training-mode running statistics, GroupNormalization's
 * per-group (opset 18) scale, MeanVarianceNormalization over axes that leave the last dim,
 * LpNormalization of an all-zero column, and the losses' ignore_index, weights and refusal of
 * a class out of range. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/half.h"
#include "graph/ops/norm_params.h"
#include "kernels/kernel.h"
#include "kernels/kernels_support.h"

/* A deterministic spread of values in [-2, 2). */
static double val(int64_t i) { return (double)((i * 37 + 11) % 64) / 16.0 - 2.0; }

static void fill_f64(double *x, int64_t n, int64_t seed) {
  for (int64_t i = 0; i < n; i++) x[i] = val(i + seed);
}

static void expect_f64_near(const double *got, const double *want, int64_t n, double tol) {
  for (int64_t i = 0; i < n; i++)
    cr_expect(fabs(got[i] - want[i]) <= tol * (1.0 + fabs(want[i])), "element %lld: %.17g, want %.17g",
              (long long)i, got[i], want[i]);
}

/* Reference (x - mean) / sqrt(var + eps) per (n, group) of X [N, C, inner], scale/bias per
 * channel (or per group when per_group). */
static void ref_groupnorm(const double *x, double *y, int64_t n, int64_t c, int64_t inner, int64_t groups,
                          const double *sc, const double *b, bool per_group, double eps) {
  int64_t per = c / groups, len = per * inner;
  for (int64_t k = 0; k < n; k++)
    for (int64_t g = 0; g < groups; g++) {
      const double *xs = x + (k * c + g * per) * inner;
      double m = 0.0, v = 0.0;
      for (int64_t i = 0; i < len; i++) m += xs[i];
      m /= (double)len;
      for (int64_t i = 0; i < len; i++) v += (xs[i] - m) * (xs[i] - m);
      v /= (double)len;
      for (int64_t i = 0; i < len; i++) {
        int64_t ch = g * per + i / inner, idx = per_group ? g : ch;
        y[(k * c + g * per) * inner + i] = (xs[i] - m) / sqrt(v + eps) * sc[idx] + b[idx];
      }
    }
}

Test(norm_kernels, groupnorm_float64_per_channel_and_per_group) {
  enum { N = 2, CH = 6, INNER = 5, NUM = N * CH * INNER };
  double x[NUM], y[NUM], want[NUM], sc[CH], b[CH];
  fill_f64(x, NUM, 3);
  fill_f64(sc, CH, 7);
  fill_f64(b, CH, 9);
  for (int per_group = 0; per_group < 2; per_group++) {
    mx_groupnorm_params p = {
        .epsilon = 1e-3f, .num_groups = 3, .per_group_affine = per_group, .stash_type = 1};
    int64_t cnt = per_group ? 3 : CH;
    mx_kernel_call *c = kc_new(3, 1, &p);
    kc_set(c, 0, MX_FLOAT64, 3, DIMS(N, CH, INNER), x);
    kc_set(c, 1, MX_FLOAT64, 1, DIMS(cnt), sc);
    kc_set(c, 2, MX_FLOAT64, 1, DIMS(cnt), b);
    kc_set(c, 3, MX_FLOAT64, 3, DIMS(N, CH, INNER), y);
    cr_assert_eq(kc_run("GroupNormalization", c), MX_OK, "%s", c->why ? c->why : "");
    free(c);
    ref_groupnorm(x, want, N, CH, INNER, 3, sc, b, per_group, (double)1e-3f);
    expect_f64_near(y, want, NUM, 1e-12);
  }
}

Test(norm_kernels, instancenorm_float16) {
  enum { N = 2, CH = 3, INNER = 8, NUM = N * CH * INNER };
  double xd[NUM], want[NUM], sc[CH], b[CH];
  uint16_t xh[NUM], yh[NUM], sch[CH], bh[CH];
  fill_f64(xd, NUM, 1);
  fill_f64(sc, CH, 2);
  fill_f64(b, CH, 5);
  for (int i = 0; i < NUM; i++) xh[i] = mx__f32_to_f16((float)xd[i]), xd[i] = mx__f16_to_f32(xh[i]);
  for (int i = 0; i < CH; i++) {
    sch[i] = mx__f32_to_f16((float)sc[i]), sc[i] = mx__f16_to_f32(sch[i]);
    bh[i] = mx__f32_to_f16((float)b[i]), b[i] = mx__f16_to_f32(bh[i]);
  }
  mx_groupnorm_params p = {.epsilon = 1e-5f, .stash_type = 1};
  mx_kernel_call *c = kc_new(3, 1, &p);
  kc_set(c, 0, MX_FLOAT16, 3, DIMS(N, CH, INNER), xh);
  kc_set(c, 1, MX_FLOAT16, 1, DIMS(CH), sch);
  kc_set(c, 2, MX_FLOAT16, 1, DIMS(CH), bh);
  kc_set(c, 3, MX_FLOAT16, 3, DIMS(N, CH, INNER), yh);
  cr_assert_eq(kc_run("InstanceNormalization", c), MX_OK);
  free(c);
  ref_groupnorm(xd, want, N, CH, INNER, CH, sc, b, false, (double)1e-5f);
  for (int i = 0; i < NUM; i++)
    cr_expect(fabs(mx__f16_to_f32(yh[i]) - want[i]) <= 2e-3 * (1.0 + fabs(want[i])),
              "element %d: %g, want %g", i, (double)mx__f16_to_f32(yh[i]), want[i]);
}

Test(norm_kernels, batchnorm_bfloat16_x_with_float32_statistics) {
  enum { N = 2, CH = 3, INNER = 4, NUM = N * CH * INNER };
  uint16_t xh[NUM], yh[NUM], sc[CH], b[CH];
  float mean[CH] = {0.5f, -1.0f, 0.0f}, var[CH] = {1.0f, 0.25f, 4.0f};
  for (int i = 0; i < NUM; i++) xh[i] = mx__f32_to_bf16((float)val(i));
  for (int i = 0; i < CH; i++)
    sc[i] = mx__f32_to_bf16(1.0f + (float)i), b[i] = mx__f32_to_bf16(0.5f * (float)i);
  mx_batchnorm_params p = {.epsilon = 1e-5f, .momentum = 0.9f, .spatial = 1};
  mx_kernel_call *c = kc_new(5, 1, &p);
  kc_set(c, 0, MX_BFLOAT16, 3, DIMS(N, CH, INNER), xh);
  kc_set(c, 1, MX_BFLOAT16, 1, DIMS(CH), sc);
  kc_set(c, 2, MX_BFLOAT16, 1, DIMS(CH), b);
  kc_set(c, 3, MX_FLOAT32, 1, DIMS(CH), mean);
  kc_set(c, 4, MX_FLOAT32, 1, DIMS(CH), var);
  kc_set(c, 5, MX_BFLOAT16, 3, DIMS(N, CH, INNER), yh);
  cr_assert_eq(kc_run("BatchNormalization", c), MX_OK);
  free(c);
  for (int i = 0; i < NUM; i++) {
    int ch = (i / INNER) % CH;
    double want = (mx__bf16_to_f32(xh[i]) - mean[ch]) / sqrt(var[ch] + 1e-5) * mx__bf16_to_f32(sc[ch]) +
                  mx__bf16_to_f32(b[ch]);
    cr_expect(fabs(mx__bf16_to_f32(yh[i]) - want) <= 1e-2 * (1.0 + fabs(want)), "element %d", i);
  }
}

Test(norm_kernels, batchnorm_training_float64) {
  enum { N = 3, CH = 2, INNER = 5, NUM = N * CH * INNER };
  double x[NUM], y[NUM], sc[CH] = {1.5, 0.5}, b[CH] = {0.0, 1.0}, mean[CH] = {1.0, -1.0},
                         var[CH] = {2.0, 3.0};
  double rm[CH], rv[CH];
  fill_f64(x, NUM, 4);
  mx_batchnorm_params p = {.epsilon = 1e-5f, .momentum = 0.75f, .training_mode = 1, .spatial = 1};
  mx_kernel_call *c = kc_new(5, 3, &p);
  kc_set(c, 0, MX_FLOAT64, 3, DIMS(N, CH, INNER), x);
  kc_set(c, 1, MX_FLOAT64, 1, DIMS(CH), sc);
  kc_set(c, 2, MX_FLOAT64, 1, DIMS(CH), b);
  kc_set(c, 3, MX_FLOAT64, 1, DIMS(CH), mean);
  kc_set(c, 4, MX_FLOAT64, 1, DIMS(CH), var);
  kc_set(c, 5, MX_FLOAT64, 3, DIMS(N, CH, INNER), y);
  kc_set(c, 6, MX_FLOAT64, 1, DIMS(CH), rm);
  kc_set(c, 7, MX_FLOAT64, 1, DIMS(CH), rv);
  cr_assert_eq(kc_run("BatchNormalization", c), MX_OK);
  free(c);
  for (int ch = 0; ch < CH; ch++) {
    double m = 0.0, v = 0.0;
    for (int k = 0; k < N; k++)
      for (int i = 0; i < INNER; i++) m += x[(k * CH + ch) * INNER + i];
    m /= N * INNER;
    for (int k = 0; k < N; k++)
      for (int i = 0; i < INNER; i++) v += pow(x[(k * CH + ch) * INNER + i] - m, 2);
    v /= N * INNER;
    cr_expect(fabs(rm[ch] - (mean[ch] * 0.75 + m * 0.25)) < 1e-12, "running mean %d", ch);
    cr_expect(fabs(rv[ch] - (var[ch] * 0.75 + v * 0.25)) < 1e-12, "running var %d", ch);
    for (int k = 0; k < N; k++)
      for (int i = 0; i < INNER; i++) {
        int j = (k * CH + ch) * INNER + i;
        double want = (x[j] - m) / sqrt(v + (double)1e-5f) * sc[ch] + b[ch];
        cr_expect(fabs(y[j] - want) < 1e-12 * (1.0 + fabs(want)), "y %d", j);
      }
  }
}

Test(norm_kernels, mvn_axes_leaving_the_last_dim) {
  enum { A = 3, B = 4, CC = 5, NUM = A * B * CC };
  double x[NUM], y[NUM];
  fill_f64(x, NUM, 2);
  mx_mvn_params p = {.axes = {0, 1}, .n_axes = 2};
  mx_kernel_call *c = kc_new(1, 1, &p);
  kc_set(c, 0, MX_FLOAT64, 3, DIMS(A, B, CC), x);
  kc_set(c, 1, MX_FLOAT64, 3, DIMS(A, B, CC), y);
  cr_assert_eq(kc_run("MeanVarianceNormalization", c), MX_OK);
  free(c);
  for (int k = 0; k < CC; k++) {
    double m = 0.0, v = 0.0;
    for (int i = 0; i < A * B; i++) m += x[i * CC + k];
    m /= A * B;
    for (int i = 0; i < A * B; i++) v += pow(x[i * CC + k] - m, 2);
    v /= A * B;
    for (int i = 0; i < A * B; i++) {
      double want = (x[i * CC + k] - m) / (sqrt(v) + 1e-9);
      cr_expect(fabs(y[i * CC + k] - want) < 1e-12 * (1.0 + fabs(want)), "element %d", i * CC + k);
    }
  }
}

Test(norm_kernels, lrn_float64) {
  enum { N = 2, CH = 5, INNER = 3, NUM = N * CH * INNER };
  double x[NUM], y[NUM];
  fill_f64(x, NUM, 6);
  mx_lrn_params p = {.alpha = 0.01f, .beta = 0.75f, .bias = 2.0f, .size = 4};
  mx_kernel_call *c = kc_new(1, 1, &p);
  kc_set(c, 0, MX_FLOAT64, 3, DIMS(N, CH, INNER), x);
  kc_set(c, 1, MX_FLOAT64, 3, DIMS(N, CH, INNER), y);
  cr_assert_eq(kc_run("LRN", c), MX_OK);
  free(c);
  for (int k = 0; k < N; k++)
    for (int ch = 0; ch < CH; ch++)
      for (int i = 0; i < INNER; i++) {
        /* size 4: one channel before, two after. */
        double sq = 0.0;
        for (int w = ch - 1; w <= ch + 2; w++)
          if (w >= 0 && w < CH) sq += pow(x[(k * CH + w) * INNER + i], 2);
        int j = (k * CH + ch) * INNER + i;
        double want = x[j] / pow(2.0 + (double)0.01f / 4 * sq, 0.75);
        cr_expect(fabs(y[j] - want) < 1e-12 * (1.0 + fabs(want)), "element %d", j);
      }
}

Test(norm_kernels, lpnorm_zero_column_gives_zeros) {
  float x[6] = {3, 0, 1, 4, 0, -1}, y[6];
  mx_lpnorm_params p = {.axis = 0, .p = 2};
  mx_kernel_call *c = kc_new(1, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 2, DIMS(2, 3), x);
  kc_set(c, 1, MX_FLOAT32, 2, DIMS(2, 3), y);
  cr_assert_eq(kc_run("LpNormalization", c), MX_OK);
  p.p = 1;
  float y1[6];
  kc_set(c, 1, MX_FLOAT32, 2, DIMS(2, 3), y1);
  cr_assert_eq(kc_run("LpNormalization", c), MX_OK);
  free(c);
  float s = sqrtf(2.0f);
  expect_f32_near(y, (const float[]){0.6f, 0.0f, 1.0f / s, 0.8f, 0.0f, -1.0f / s}, 6, 1e-6f);
  expect_f32_near(y1, (const float[]){3.0f / 7, 0.0f, 0.5f, 4.0f / 7, 0.0f, -0.5f}, 6, 1e-6f);
}

/* --- losses ---------------------------------------------------------------------------------------- */

/* NLL over scores [2, 3, 2] with targets [2, 2] (one ignored) and weights. */
Test(norm_kernels, nllloss_weights_ignore_index_and_reductions) {
  double x[12];
  fill_f64(x, 12, 8);
  int32_t t[4] = {2, -1, 0, 1};
  double w[3] = {0.5, 2.0, 1.5};
  double lossv[4] = {0}, sum = 0.0, wsum = 0.0;
  for (int k = 0; k < 2; k++)
    for (int j = 0; j < 2; j++) {
      int32_t cls = t[k * 2 + j];
      if (cls < 0) continue;
      lossv[k * 2 + j] = -x[(k * 3 + cls) * 2 + j] * w[cls];
      sum += lossv[k * 2 + j];
      wsum += w[cls];
    }
  for (int red = MX_LOSS_NONE; red <= MX_LOSS_MEAN; red++) {
    mx_loss_params p = {.ignore_index = -1, .has_ignore_index = 1, .reduction = red};
    double out[4];
    mx_kernel_call *c = kc_new(3, 1, &p);
    kc_set(c, 0, MX_FLOAT64, 3, DIMS(2, 3, 2), x);
    kc_set(c, 1, MX_INT32, 2, DIMS(2, 2), t);
    kc_set(c, 2, MX_FLOAT64, 1, DIMS(3), w);
    if (red == MX_LOSS_NONE)
      kc_set(c, 3, MX_FLOAT64, 2, DIMS(2, 2), out);
    else
      kc_set(c, 3, MX_FLOAT64, 0, NULL, out);
    cr_assert_eq(kc_run("NegativeLogLikelihoodLoss", c), MX_OK);
    free(c);
    if (red == MX_LOSS_NONE) expect_f64_near(out, lossv, 4, 1e-15);
    if (red == MX_LOSS_SUM) expect_f64_near(out, &sum, 1, 1e-15);
    double mean = sum / wsum;
    if (red == MX_LOSS_MEAN) expect_f64_near(out, &mean, 1, 1e-15);
  }
}

Test(norm_kernels, nllloss_refuses_class_out_of_range) {
  float x[6] = {0}, out;
  int64_t t[2] = {1, 3};
  mx_loss_params p = {.reduction = MX_LOSS_SUM};
  mx_kernel_call *c = kc_new(2, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 2, DIMS(2, 3), x);
  kc_set(c, 1, MX_INT64, 1, DIMS(2), t);
  kc_set(c, 2, MX_FLOAT32, 0, NULL, &out);
  cr_assert_eq(kc_run("NegativeLogLikelihoodLoss", c), MX_ERR_KERNEL);
  cr_assert(c->why && strstr(c->why, "outside"));
  free(c);
}

Test(norm_kernels, sce_float16_log_prob) {
  enum { N = 2, CH = 4, D = 3, NUM = N * CH * D };
  uint16_t xh[NUM], lph[NUM], lossh;
  double xd[NUM];
  for (int i = 0; i < NUM; i++) xh[i] = mx__f32_to_f16((float)val(i)), xd[i] = mx__f16_to_f32(xh[i]);
  int64_t t[N * D] = {0, 1, 2, 3, 0, 1};
  mx_loss_params p = {.reduction = MX_LOSS_MEAN};
  mx_kernel_call *c = kc_new(2, 2, &p);
  kc_set(c, 0, MX_FLOAT16, 3, DIMS(N, CH, D), xh);
  kc_set(c, 1, MX_INT64, 2, DIMS(N, D), t);
  kc_set(c, 2, MX_FLOAT16, 0, NULL, &lossh);
  kc_set(c, 3, MX_FLOAT16, 3, DIMS(N, CH, D), lph);
  cr_assert_eq(kc_run("SoftmaxCrossEntropyLoss", c), MX_OK);
  free(c);
  double sum = 0.0;
  for (int k = 0; k < N; k++)
    for (int j = 0; j < D; j++) {
      double m = -INFINITY, s = 0.0;
      for (int ch = 0; ch < CH; ch++) m = fmax(m, xd[(k * CH + ch) * D + j]);
      for (int ch = 0; ch < CH; ch++) s += exp(xd[(k * CH + ch) * D + j] - m);
      for (int ch = 0; ch < CH; ch++) {
        int i = (k * CH + ch) * D + j;
        double want = xd[i] - m - log(s);
        cr_expect(fabs(mx__f16_to_f32(lph[i]) - want) <= 2e-3 * (1.0 + fabs(want)), "log_prob %d", i);
      }
      sum -= xd[(k * CH + t[k * D + j]) * D + j] - m - log(s);
    }
  double want = sum / (N * D);
  cr_expect(fabs(mx__f16_to_f32(lossh) - want) <= 2e-3 * (1.0 + fabs(want)), "loss %g, want %g",
            (double)mx__f16_to_f32(lossh), want);
}
