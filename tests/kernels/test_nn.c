/* Kernel tests of Softmax/LogSoftmax, LayerNormalization, RMSNormalization, Attention and
 * RotaryEmbedding (kernels/nn*.c): hand-computed values, numerical stability with
 * large inputs, negative and middle axes, the opset < 13 2-D coercion, NaN/-inf handling,
 * float16 rounding, Attention's causal alignment with a past cache, grouped heads, 3-D layouts,
 * fully-masked rows, qk_matmul_output modes and padding, and rotary position lookups. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/half.h"
#include "graph/ops/nn_params.h"
#include "kernels/kernel.h"
#include "kernels/kernels_support.h"

TestSuite(nn_kernels);

/* --- Softmax ---------------------------------------------------------------------------------- */

static void softmax_ref(const double *x, double *y, int n) {
  double m = x[0], s = 0;
  for (int i = 1; i < n; i++) m = x[i] > m ? x[i] : m;
  for (int i = 0; i < n; i++) s += exp(x[i] - m);
  for (int i = 0; i < n; i++) y[i] = exp(x[i] - m) / s;
}

Test(nn_kernels, softmax_last_axis_and_large_values) {
  float x[] = {1, 2, 3, 1000, 1001, 1002}, y[6];
  mx_softmax_params p = {.axis = -1};
  mx_kernel_call *c = kc_new(1, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 2, (int64_t[]){2, 3}, x);
  kc_set(c, 1, MX_FLOAT32, 2, (int64_t[]){2, 3}, y);
  cr_assert_eq(kc_run("Softmax", c), MX_OK);
  double r[3];
  softmax_ref((double[]){1, 2, 3}, r, 3);
  float want[6];
  for (int i = 0; i < 6; i++) want[i] = (float)r[i % 3];
  expect_f32_near(y, want, 6, 1e-6f);
  free(c);
}

Test(nn_kernels, softmax_long_row_vectorized_path) {
  enum { N = 1003 };
  static float x[N], y[N];
  static double xd[N], r[N];
  for (int i = 0; i < N; i++) xd[i] = x[i] = (float)((i * 37) % 101) * 0.173f - 8.0f;
  softmax_ref(xd, r, N);
  mx_softmax_params p = {.axis = 0};
  mx_kernel_call *c = kc_new(1, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 1, (int64_t[]){N}, x);
  kc_set(c, 1, MX_FLOAT32, 1, (int64_t[]){N}, y);
  cr_assert_eq(kc_run("Softmax", c), MX_OK);
  for (int i = 0; i < N; i++)
    cr_expect(fabs(y[i] - r[i]) <= 2e-6 * r[i] + 1e-12, "[%d] %g vs %g", i, y[i], r[i]);
  free(c);
}

Test(nn_kernels, softmax_middle_axis) {
  /* [2,2,2] over axis 1: pairs (x[o,0,i], x[o,1,i]). */
  float x[] = {0, 0, 1, 2, 3, 3, 3, 3}, y[8];
  mx_softmax_params p = {.axis = 1};
  mx_kernel_call *c = kc_new(1, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 3, (int64_t[]){2, 2, 2}, x);
  kc_set(c, 1, MX_FLOAT32, 3, (int64_t[]){2, 2, 2}, y);
  cr_assert_eq(kc_run("Softmax", c), MX_OK);
  float e1 = (float)(1 / (1 + exp(1.0))), e2 = (float)(1 / (1 + exp(2.0)));
  expect_f32_near(y, (float[]){e1, e2, 1 - e1, 1 - e2, 0.5f, 0.5f, 0.5f, 0.5f}, 8, 1e-6f);
  free(c);
}

Test(nn_kernels, softmax_opset11_flattens_the_tail) {
  /* Axis 1 of [2,2,2] before opset 13: softmax over the 4 trailing elements of each batch. */
  float x[] = {0, 1, 2, 3, 5, 5, 5, 5}, y[8];
  mx_softmax_params p = {.axis = 1, .flatten = 1};
  mx_kernel_call *c = kc_new(1, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 3, (int64_t[]){2, 2, 2}, x);
  kc_set(c, 1, MX_FLOAT32, 3, (int64_t[]){2, 2, 2}, y);
  cr_assert_eq(kc_run("Softmax", c), MX_OK);
  double r[4];
  softmax_ref((double[]){0, 1, 2, 3}, r, 4);
  expect_f32_near(
      y, (float[]){(float)r[0], (float)r[1], (float)r[2], (float)r[3], 0.25f, 0.25f, 0.25f, 0.25f}, 8, 1e-6f);
  free(c);
}

Test(nn_kernels, logsoftmax_values) {
  float x[] = {1, 2, 3}, y[3];
  mx_softmax_params p = {.axis = -1, .log = 1};
  mx_kernel_call *c = kc_new(1, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 1, (int64_t[]){3}, x);
  kc_set(c, 1, MX_FLOAT32, 1, (int64_t[]){3}, y);
  cr_assert_eq(kc_run("LogSoftmax", c), MX_OK);
  double lse = 3 + log(exp(-2.0) + exp(-1.0) + 1);
  expect_f32_near(y, (float[]){(float)(1 - lse), (float)(2 - lse), (float)(3 - lse)}, 3, 1e-6f);
  free(c);
}

Test(nn_kernels, softmax_nan_and_neg_inf) {
  /* A NaN poisons its row (like numpy); -inf entries get exactly 0. */
  float x[] = {1, NAN, 2, -INFINITY, 0, -INFINITY}, y[6];
  mx_softmax_params p = {.axis = -1};
  mx_kernel_call *c = kc_new(1, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 2, (int64_t[]){2, 3}, x);
  kc_set(c, 1, MX_FLOAT32, 2, (int64_t[]){2, 3}, y);
  cr_assert_eq(kc_run("Softmax", c), MX_OK);
  cr_assert(isnan(y[0]) && isnan(y[1]) && isnan(y[2]));
  cr_assert(y[3] == 0.0f && y[4] == 1.0f && y[5] == 0.0f);
  free(c);
}

Test(nn_kernels, softmax_float16_and_float64) {
  uint16_t xh[] = {mx__f32_to_f16(0), mx__f32_to_f16(0), mx__f32_to_f16(0)}, yh[3];
  mx_softmax_params p = {.axis = -1};
  mx_kernel_call *c = kc_new(1, 1, &p);
  kc_set(c, 0, MX_FLOAT16, 1, (int64_t[]){3}, xh);
  kc_set(c, 1, MX_FLOAT16, 1, (int64_t[]){3}, yh);
  cr_assert_eq(kc_run("Softmax", c), MX_OK);
  for (int i = 0; i < 3; i++) cr_expect_eq(yh[i], mx__f32_to_f16(1.0f / 3.0f), "0x%04x", yh[i]);
  double xd[] = {0, log(3.0)}, yd[2];
  kc_set(c, 0, MX_FLOAT64, 1, (int64_t[]){2}, xd);
  kc_set(c, 1, MX_FLOAT64, 1, (int64_t[]){2}, yd);
  cr_assert_eq(kc_run("Softmax", c), MX_OK);
  cr_assert(fabs(yd[0] - 0.25) < 1e-15 && fabs(yd[1] - 0.75) < 1e-15);
  free(c);
}

Test(nn_kernels, softmax_zero_size) {
  float dummy = 0;
  mx_softmax_params p = {.axis = -1};
  mx_kernel_call *c = kc_new(1, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 2, (int64_t[]){0, 3}, &dummy);
  kc_set(c, 1, MX_FLOAT32, 2, (int64_t[]){0, 3}, &dummy);
  cr_assert_eq(kc_run("Softmax", c), MX_OK);
  free(c);
}

/* --- norms ------------------------------------------------------------------------------------ */

Test(nn_kernels, layernorm_values_and_statistics) {
  float x[] = {1, 2, 3, 4, -1, -1, -1, -1}, sc[] = {1, 2, 1, 1}, b[] = {0, 0, 0, 10}, y[8], mean[2], inv[2];
  mx_norm_params p = {.axis = -1, .epsilon = 1e-5f, .stash_type = MX_FLOAT32};
  mx_kernel_call *c = kc_new(3, 3, &p);
  kc_set(c, 0, MX_FLOAT32, 2, (int64_t[]){2, 4}, x);
  kc_set(c, 1, MX_FLOAT32, 1, (int64_t[]){4}, sc);
  kc_set(c, 2, MX_FLOAT32, 1, (int64_t[]){4}, b);
  kc_set(c, 3, MX_FLOAT32, 2, (int64_t[]){2, 4}, y);
  kc_set(c, 4, MX_FLOAT32, 2, (int64_t[]){2, 1}, mean);
  kc_set(c, 5, MX_FLOAT32, 2, (int64_t[]){2, 1}, inv);
  cr_assert_eq(kc_run("LayerNormalization", c), MX_OK);
  float is = (float)(1 / sqrt(1.25 + 1e-5)), i0 = (float)(1 / sqrt(1e-5));
  expect_f32_near(y, (float[]){-1.5f * is, -0.5f * is * 2, 0.5f * is, 1.5f * is + 10, 0, 0, 0, 10}, 8, 1e-6f);
  expect_f32_near(mean, (float[]){2.5f, -1}, 2, 1e-7f);
  expect_f32_near(inv, (float[]){is, i0}, 2, 1e-6f);
  free(c);
}

Test(nn_kernels, layernorm_axis0_broadcast_scale_float16) {
  /* axis 0 normalizes everything; a scalar-shaped scale broadcasts. */
  uint16_t x[4], sc = mx__f32_to_f16(2.0f), y[4];
  float xv[] = {0, 0, 4, 4};
  for (int i = 0; i < 4; i++) x[i] = mx__f32_to_f16(xv[i]);
  mx_norm_params p = {.axis = 0, .epsilon = 0.0f, .stash_type = MX_FLOAT32};
  mx_kernel_call *c = kc_new(2, 1, &p);
  kc_set(c, 0, MX_FLOAT16, 2, (int64_t[]){2, 2}, x);
  kc_set(c, 1, MX_FLOAT16, 1, (int64_t[]){1}, &sc);
  kc_set(c, 2, MX_FLOAT16, 2, (int64_t[]){2, 2}, y);
  cr_assert_eq(kc_run("LayerNormalization", c), MX_OK);
  float want[] = {-2, -2, 2, 2};
  for (int i = 0; i < 4; i++) cr_expect_float_eq(mx__f16_to_f32(y[i]), want[i], 0);
  free(c);
}

Test(nn_kernels, layernorm_float64_constant_row_is_stable) {
  /* A huge constant row: the two-pass variance is exactly 0, so y = bias. */
  double x[] = {1e12, 1e12, 1e12}, sc[] = {1, 1, 1}, b[] = {1, 2, 3}, y[3];
  mx_norm_params p = {.axis = -1, .epsilon = 1e-5f, .stash_type = MX_FLOAT32};
  mx_kernel_call *c = kc_new(3, 1, &p);
  kc_set(c, 0, MX_FLOAT64, 2, (int64_t[]){1, 3}, x);
  kc_set(c, 1, MX_FLOAT64, 1, (int64_t[]){3}, sc);
  kc_set(c, 2, MX_FLOAT64, 1, (int64_t[]){3}, b);
  kc_set(c, 3, MX_FLOAT64, 2, (int64_t[]){1, 3}, y);
  cr_assert_eq(kc_run("LayerNormalization", c), MX_OK);
  cr_assert(y[0] == 1 && y[1] == 2 && y[2] == 3);
  free(c);
}

Test(nn_kernels, layernorm_scale_varying_per_row) {
  /* Scale [2,1] broadcasts numpy-style over X [2,3]: row r is scaled by scale[r]. */
  float x[] = {1, 2, 3, 1, 2, 3}, sc[] = {1, 2}, y[6];
  mx_norm_params p = {.axis = -1, .epsilon = 0.0f, .stash_type = MX_FLOAT32};
  mx_kernel_call *c = kc_new(2, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 2, (int64_t[]){2, 3}, x);
  kc_set(c, 1, MX_FLOAT32, 2, (int64_t[]){2, 1}, sc);
  kc_set(c, 2, MX_FLOAT32, 2, (int64_t[]){2, 3}, y);
  cr_assert_eq(kc_run("LayerNormalization", c), MX_OK);
  float r = (float)sqrt(1.5);
  expect_f32_near(y, (float[]){-r, 0, r, -2 * r, 0, 2 * r}, 6, 1e-6f);
  /* A scale that does not broadcast is a kernel error. */
  kc_set(c, 1, MX_FLOAT32, 1, (int64_t[]){2}, sc);
  cr_assert_eq(kc_run("LayerNormalization", c), MX_ERR_KERNEL);
  free(c);
}

Test(nn_kernels, rmsnorm_values_and_scale_type) {
  float x[] = {3, 4, 0, 0}, sc[] = {1, 0.5f};
  float y[4];
  mx_norm_params p = {.axis = -1, .epsilon = 0.0f, .stash_type = MX_FLOAT32};
  mx_kernel_call *c = kc_new(2, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 2, (int64_t[]){2, 2}, x);
  kc_set(c, 1, MX_FLOAT32, 1, (int64_t[]){2}, sc);
  kc_set(c, 2, MX_FLOAT32, 2, (int64_t[]){2, 2}, y);
  cr_assert_eq(kc_run("RMSNormalization", c), MX_OK);
  float r = (float)sqrt(12.5);
  cr_expect(fabsf(y[0] - 3 / r) < 1e-6f && fabsf(y[1] - 2 / r) < 1e-6f);
  cr_expect(isnan(y[2]), "0/0 with epsilon 0 is NaN like numpy");
  /* float32 X with a float16 scale gives a float16 Y. */
  uint16_t sch[] = {mx__f32_to_f16(1), mx__f32_to_f16(1)}, yh[4];
  p.epsilon = 1e-5f;
  kc_set(c, 1, MX_FLOAT16, 1, (int64_t[]){2}, sch);
  kc_set(c, 2, MX_FLOAT16, 2, (int64_t[]){2, 2}, yh);
  cr_assert_eq(kc_run("RMSNormalization", c), MX_OK);
  cr_expect_eq(yh[0], mx__f32_to_f16((float)(3 / sqrt(12.5 + 1e-5))));
  cr_expect_eq(yh[2], mx__f32_to_f16(0.0f));
  free(c);
}

/* Scale and bias laid out every way they may broadcast onto X [3,4,5] (dense rows read in
 * place, broadcast or per-row ones gathered, float32 or float64 or float16 typed) give the
 * same bits as the same values materialized to X's full shape in another dtype (the generic
 * gather). Normalizing over the last axis (n = 5) and over the last two (n = 20). */
static void norm_layout_case(const char *op, bool bias, mx_dtype xdt, int64_t axis, int32_t srank,
                             const int64_t *sdims) {
  enum { N = 60 };
  float xf[N];
  double xd[N], full_s[N], full_b[N];
  for (int i = 0; i < N; i++) xf[i] = (float)((i * 37) % 19) * 0.25f - 2.0f, xd[i] = xf[i];
  /* The small tensor's values, and their broadcast to [3,4,5] in double. */
  int64_t sn = 1;
  for (int32_t k = 0; k < srank; k++) sn *= sdims[k];
  float s32[N], b32[N];
  double s64[N], b64[N];
  uint16_t s16[N], b16[N];
  for (int64_t i = 0; i < sn; i++) {
    s32[i] = 0.5f + (float)i * 0.125f, b32[i] = (float)i * -0.25f;
    s64[i] = s32[i], b64[i] = b32[i];
    s16[i] = mx__f32_to_f16(s32[i]), b16[i] = mx__f32_to_f16(b32[i]);
  }
  for (int i = 0; i < N; i++) {
    int64_t c[3] = {i / 20, (i / 5) % 4, i % 5}, off = 0, st = 1;
    for (int32_t k = srank - 1; k >= 0; k--) {
      int64_t xk = 3 - srank + k;
      off += (sdims[k] == 1 ? 0 : c[xk]) * st;
      st *= sdims[k];
    }
    full_s[i] = s64[off], full_b[i] = b64[off];
  }
  mx_norm_params p = {.axis = axis, .epsilon = 1e-5f, .stash_type = MX_FLOAT32};
  uint32_t n_in = bias ? 3 : 2;
  /* Reference: the full-shape tensors in the other float type (float64 for a float32 X). */
  float yf_ref[N], yf[N];
  double yd_ref[N], yd[N];
  float full_sf[N], full_bf[N];
  for (int i = 0; i < N; i++) full_sf[i] = (float)full_s[i], full_bf[i] = (float)full_b[i];
  void *xp = xdt == MX_FLOAT32 ? (void *)xf : (void *)xd;
  void *yrp = xdt == MX_FLOAT32 ? (void *)yf_ref : (void *)yd_ref,
       *yp = xdt == MX_FLOAT32 ? (void *)yf : (void *)yd;
  mx_dtype ref_dt = xdt == MX_FLOAT32 ? MX_FLOAT64 : MX_FLOAT32;
  mx_kernel_call *c = kc_new((uint16_t)n_in, 1, &p);
  kc_set(c, 0, xdt, 3, DIMS(3, 4, 5), xp);
  kc_set(c, 1, ref_dt, 3, DIMS(3, 4, 5), ref_dt == MX_FLOAT64 ? (void *)full_s : (void *)full_sf);
  if (bias) kc_set(c, 2, ref_dt, 3, DIMS(3, 4, 5), ref_dt == MX_FLOAT64 ? (void *)full_b : (void *)full_bf);
  kc_set(c, n_in, xdt, 3, DIMS(3, 4, 5), yrp);
  cr_assert_eq(kc_run(op, c), MX_OK);
  /* The small layout in each typed form. */
  mx_dtype dts[3] = {MX_FLOAT32, MX_FLOAT64, MX_FLOAT16};
  void *sp[3] = {s32, s64, s16}, *bp[3] = {b32, b64, b16};
  for (int k = 0; k < 3; k++) {
    kc_set(c, 1, dts[k], srank, sdims, sp[k]);
    if (bias) kc_set(c, 2, dts[k], srank, sdims, bp[k]);
    kc_set(c, n_in, xdt, 3, DIMS(3, 4, 5), yp);
    cr_assert_eq(kc_run(op, c), MX_OK);
    size_t bytes = xdt == MX_FLOAT32 ? sizeof yf : sizeof yd;
    /* float16 holds these values exactly too (multiples of 1/8 below 8). */
    cr_expect(memcmp(yp, yrp, bytes) == 0, "%s axis %lld scale rank %d dtype %d differs", op, (long long)axis,
              srank, (int)dts[k]);
  }
  free(c);
}

Test(nn_kernels, norm_scale_layouts_give_same_bits) {
  const char *ops[2] = {"LayerNormalization", "RMSNormalization"};
  mx_dtype xdts[2] = {MX_FLOAT32, MX_FLOAT64};
  for (int o = 0; o < 2; o++)
    for (int d = 0; d < 2; d++) {
      bool b = o == 0;
      /* Over the last axis: dense [5], [1,5]; per row [3,4,5] (dense) and [3,1,1] / [4,1] (broadcast). */
      norm_layout_case(ops[o], b, xdts[d], -1, 1, DIMS(5));
      norm_layout_case(ops[o], b, xdts[d], -1, 2, DIMS(1, 5));
      norm_layout_case(ops[o], b, xdts[d], -1, 3, DIMS(3, 4, 5));
      norm_layout_case(ops[o], b, xdts[d], -1, 3, DIMS(3, 1, 1));
      norm_layout_case(ops[o], b, xdts[d], -1, 2, DIMS(4, 1));
      /* Over the last two: dense [4,5]; broadcast inside the row [5], [4,1], [1,1]; per row [3,1,5]. */
      norm_layout_case(ops[o], b, xdts[d], 1, 2, DIMS(4, 5));
      norm_layout_case(ops[o], b, xdts[d], 1, 1, DIMS(5));
      norm_layout_case(ops[o], b, xdts[d], 1, 2, DIMS(4, 1));
      norm_layout_case(ops[o], b, xdts[d], 1, 2, DIMS(1, 1));
      norm_layout_case(ops[o], b, xdts[d], 1, 3, DIMS(3, 1, 5));
      norm_layout_case(ops[o], b, xdts[d], 1, 3, DIMS(3, 4, 5));
    }
}

/* --- Attention -------------------------------------------------------------------------------- */

/* Naive reference for 4-D inputs: past concatenated, optional float mask [Sq, T], causal with
 * the past offset, GQA by integer division of heads. Writes y [B, Hq, Sq, Dv]. */
static void attention_ref(int B, int Hq, int Hkv, int Sq, int P, int Skv, int D, const float *q,
                          const float *k, const float *v, const float *pk, const float *pv, const float *mask,
                          bool causal, float scale, float *y) {
  int T = P + Skv;
  for (int b = 0; b < B; b++)
    for (int h = 0; h < Hq; h++) {
      int g = h / (Hq / Hkv);
      for (int i = 0; i < Sq; i++) {
        double s[64], m = -INFINITY, sum = 0;
        for (int j = 0; j < T; j++) {
          const float *kr =
              j < P ? pk + ((b * Hkv + g) * P + j) * D : k + ((b * Hkv + g) * Skv + (j - P)) * D;
          double dot = 0;
          for (int d = 0; d < D; d++) dot += (double)q[((b * Hq + h) * Sq + i) * D + d] * kr[d];
          s[j] = dot * scale + (mask ? mask[i * T + j] : 0);
          if (causal && j > i + P) s[j] = -INFINITY;
          m = s[j] > m ? s[j] : m;
        }
        for (int j = 0; j < T; j++) sum += exp(s[j] - m);
        for (int d = 0; d < D; d++) {
          double acc = 0;
          for (int j = 0; j < T; j++) {
            const float *vr =
                j < P ? pv + ((b * Hkv + g) * P + j) * D : v + ((b * Hkv + g) * Skv + (j - P)) * D;
            acc += exp(s[j] - m) / sum * vr[d];
          }
          y[((b * Hq + h) * Sq + i) * D + d] = (float)acc;
        }
      }
    }
}

static void fill(float *x, int n, int seed) {
  for (int i = 0; i < n; i++) x[i] = (float)(((i + 1) * (seed * 7 + 13)) % 17) / 8.0f - 1.0f;
}

/* GQA + causal + float mask + past cache against the naive reference, for sq query rows and head
 * size D (4: the general path; 8: the float32 decode step when sq is 1). */
static void check_gqa_causal_with_past(int sq, int D) {
  enum { B = 2, HQ = 4, HKV = 2, P = 3, SKV = 2, DMAX = 8, T = P + SKV, SQMAX = 2 };
  static float q[B * HQ * SQMAX * DMAX], k[B * HKV * SKV * DMAX], v[B * HKV * SKV * DMAX];
  static float pk[B * HKV * P * DMAX], pv[B * HKV * P * DMAX], mask[SQMAX * T];
  static float y[B * HQ * SQMAX * DMAX], want[B * HQ * SQMAX * DMAX], prk[B * HKV * T * DMAX],
      prv[B * HKV * T * DMAX];
  fill(q, B * HQ * sq * D, 1), fill(k, B * HKV * SKV * D, 2), fill(v, B * HKV * SKV * D, 3);
  fill(pk, B * HKV * P * D, 4), fill(pv, B * HKV * P * D, 5), fill(mask, sq * T, 6);
  mx_attention_params p = {.is_causal = 1};
  attention_ref(B, HQ, HKV, sq, P, SKV, D, q, k, v, pk, pv, mask, true, (float)(1.0 / sqrt((double)D)), want);
  mx_kernel_call *c = kc_new(6, 3, &p);
  kc_set(c, 0, MX_FLOAT32, 4, (int64_t[]){B, HQ, sq, D}, q);
  kc_set(c, 1, MX_FLOAT32, 4, (int64_t[]){B, HKV, SKV, D}, k);
  kc_set(c, 2, MX_FLOAT32, 4, (int64_t[]){B, HKV, SKV, D}, v);
  kc_set(c, 3, MX_FLOAT32, 2, (int64_t[]){sq, T}, mask);
  kc_set(c, 4, MX_FLOAT32, 4, (int64_t[]){B, HKV, P, D}, pk);
  kc_set(c, 5, MX_FLOAT32, 4, (int64_t[]){B, HKV, P, D}, pv);
  kc_set(c, 6, MX_FLOAT32, 4, (int64_t[]){B, HQ, sq, D}, y);
  kc_set(c, 7, MX_FLOAT32, 4, (int64_t[]){B, HKV, T, D}, prk);
  kc_set(c, 8, MX_FLOAT32, 4, (int64_t[]){B, HKV, T, D}, prv);
  cr_assert_eq(kc_run("Attention", c), MX_OK);
  expect_f32_near(y, want, B * HQ * sq * D, 1e-5f);
  /* present = past rows then new rows, per (batch, kv head). */
  cr_assert_eq(memcmp(prk, pk, P * D * sizeof(float)), 0);
  cr_assert_eq(memcmp(prk + P * D, k, SKV * D * sizeof(float)), 0);
  cr_assert_eq(
      memcmp(prv + (1 * HKV + 1) * T * D + P * D, v + (1 * HKV + 1) * SKV * D, SKV * D * sizeof(float)), 0);
  free(c);
}

Test(nn_kernels, attention_gqa_causal_with_past_matches_reference) {
  check_gqa_causal_with_past(2, 4);
  check_gqa_causal_with_past(2, 8);
}

/* One query row takes the matrix-vector path. */
Test(nn_kernels, attention_decode_step_matches_reference) {
  check_gqa_causal_with_past(1, 4);
  check_gqa_causal_with_past(1, 8);
}

/* One query row over caches of every length around the switch between the loop path (short
 * caches) and GEMV (long ones): head sizes with and without a multiple-of-8 part, GQA, no past,
 * two new key rows, the 3-D layout (K rows strided by kv_heads * head size), float32 and
 * float64, against a double-precision reference. */
static void decode_case(mx_dtype dt, bool three_d, int P, int SKV, int D) {
  enum { HQ = 4, HKV = 2 };
  int T = P + SKV;
  size_t es = dt == MX_FLOAT64 ? 8 : 4;
  float *qf = malloc(HQ * D * 4), *kf = malloc((size_t)HKV * SKV * D * 4),
        *vf = malloc((size_t)HKV * SKV * D * 4);
  float *pkf = malloc((size_t)HKV * (P + 1) * D * 4), *pvf = malloc((size_t)HKV * (P + 1) * D * 4);
  double *want = malloc(HQ * D * 8), *sc = malloc((size_t)T * 8);
  void *q = malloc(HQ * D * es), *k = malloc((size_t)HKV * SKV * D * es),
       *v = malloc((size_t)HKV * SKV * D * es);
  void *pk = malloc((size_t)HKV * (P + 1) * D * es), *pv = malloc((size_t)HKV * (P + 1) * D * es);
  void *y = malloc(HQ * D * es);
  cr_assert(qf && kf && vf && pkf && pvf && want && sc && q && k && v && pk && pv && y);
  fill(qf, HQ * D, 1), fill(kf, HKV * SKV * D, 2), fill(vf, HKV * SKV * D, 3);
  fill(pkf, HKV * P * D, 4), fill(pvf, HKV * P * D, 5);
  /* In the 3-D layout the new K/V rows are [SKV, HKV * D]; kf/vf hold [HKV, SKV, D]. */
  float *kl = malloc((size_t)HKV * SKV * D * 4), *vl = malloc((size_t)HKV * SKV * D * 4);
  cr_assert(kl && vl);
  for (int g = 0; g < HKV; g++)
    for (int s2 = 0; s2 < SKV; s2++)
      for (int d = 0; d < D; d++) {
        int src = (g * SKV + s2) * D + d, dst = three_d ? (s2 * HKV + g) * D + d : src;
        kl[dst] = kf[src], vl[dst] = vf[src];
      }
  const float *srcs[5] = {qf, kl, vl, pkf, pvf};
  void *dsts[5] = {q, k, v, pk, pv};
  int counts[5] = {HQ * D, HKV * SKV * D, HKV * SKV * D, HKV * P * D, HKV * P * D};
  for (int t = 0; t < 5; t++)
    for (int i = 0; i < counts[t]; i++) {
      if (dt == MX_FLOAT64)
        ((double *)dsts[t])[i] = srcs[t][i];
      else
        ((float *)dsts[t])[i] = srcs[t][i];
    }
  double scale = (float)(1.0 / sqrt((double)D)); /* the kernel keeps the scale as a float */
  for (int h = 0; h < HQ; h++) {
    int g = h / (HQ / HKV);
    double m = -INFINITY, sum = 0;
    for (int j = 0; j < T; j++) {
      const float *kr = j < P ? pkf + (g * P + j) * D : kf + (g * SKV + j - P) * D;
      double dot = 0;
      for (int d = 0; d < D; d++) dot += (double)qf[h * D + d] * kr[d];
      sc[j] = dot * scale;
      m = sc[j] > m ? sc[j] : m;
    }
    for (int j = 0; j < T; j++) sum += exp(sc[j] - m);
    for (int d = 0; d < D; d++) {
      double acc = 0;
      for (int j = 0; j < T; j++) {
        const float *vr = j < P ? pvf + (g * P + j) * D : vf + (g * SKV + j - P) * D;
        acc += exp(sc[j] - m) / sum * vr[d];
      }
      want[h * D + d] = acc;
    }
  }
  mx_attention_params prm = {.q_num_heads = three_d ? HQ : 0, .kv_num_heads = three_d ? HKV : 0};
  void *prk = malloc((size_t)HKV * T * D * es), *prv = malloc((size_t)HKV * T * D * es);
  cr_assert(prk && prv);
  mx_kernel_call *c = kc_new(6, 3, &prm);
  kc_set(c, 7, dt, 4, DIMS(1, HKV, T, D), prk);
  kc_set(c, 8, dt, 4, DIMS(1, HKV, T, D), prv);
  if (three_d) {
    kc_set(c, 0, dt, 3, DIMS(1, 1, HQ * D), q);
    kc_set(c, 1, dt, 3, DIMS(1, SKV, HKV * D), k);
    kc_set(c, 2, dt, 3, DIMS(1, SKV, HKV * D), v);
    kc_set(c, 6, dt, 3, DIMS(1, 1, HQ * D), y);
  } else {
    kc_set(c, 0, dt, 4, DIMS(1, HQ, 1, D), q);
    kc_set(c, 1, dt, 4, DIMS(1, HKV, SKV, D), k);
    kc_set(c, 2, dt, 4, DIMS(1, HKV, SKV, D), v);
    kc_set(c, 6, dt, 4, DIMS(1, HQ, 1, D), y);
  }
  if (P > 0) {
    kc_set(c, 4, dt, 4, DIMS(1, HKV, P, D), pk);
    kc_set(c, 5, dt, 4, DIMS(1, HKV, P, D), pv);
  }
  cr_assert_eq(kc_run("Attention", c), MX_OK);
  for (int i = 0; i < HQ * D; i++) {
    double got = dt == MX_FLOAT64 ? ((double *)y)[i] : ((float *)y)[i];
    double tol = dt == MX_FLOAT64 ? 1e-12 : 2e-6;
    cr_expect(fabs(got - want[i]) <= tol * (1 + fabs(want[i])),
              "dt %d 3d %d P %d Skv %d D %d [%d]: %.9g, want %.9g", (int)dt, (int)three_d, P, SKV, D, i, got,
              want[i]);
  }
  /* present = past rows then the new rows, per key/value head, exactly. */
  for (int g = 0; g < HKV; g++)
    for (int j = 0; j < T; j++)
      for (int d = 0; d < D; d++) {
        size_t at = ((size_t)g * T + j) * D + d;
        double wk = j < P ? pkf[(g * P + j) * D + d] : kf[(g * SKV + j - P) * D + d];
        double wv = j < P ? pvf[(g * P + j) * D + d] : vf[(g * SKV + j - P) * D + d];
        double gk = dt == MX_FLOAT64 ? ((double *)prk)[at] : ((float *)prk)[at];
        double gv = dt == MX_FLOAT64 ? ((double *)prv)[at] : ((float *)prv)[at];
        cr_expect(gk == wk && gv == wv, "dt %d 3d %d P %d Skv %d D %d: present row %d of head %d", (int)dt,
                  (int)three_d, P, SKV, D, j, g);
      }
  free(c);
  void *all[] = {qf, kf, vf, pkf, pvf, want, sc, q, k, v, pk, pv, y, kl, vl, prk, prv};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
}

Test(nn_kernels, attention_decode_short_and_long_caches) {
  const int pasts[] = {0, 1, 3, 7, 16, 40, 63, 64, 200, 515};
  const int heads[] = {5, 8, 16, 20, 24, 32, 64, 128};
  for (int dt = 0; dt < 2; dt++)
    for (int layout = 0; layout < 2; layout++)
      for (size_t i = 0; i < sizeof pasts / sizeof pasts[0]; i++)
        for (size_t j = 0; j < sizeof heads / sizeof heads[0]; j++)
          for (int skv = 1; skv <= 2; skv++)
            decode_case(dt ? MX_FLOAT64 : MX_FLOAT32, layout == 1, pasts[i], skv, heads[j]);
}

/* One float32 decode step in the 4-D layout, no mask: q [1, hq, 1, d], k and v [1, hkv, 1, d],
 * the caches pk, pv [1, hkv, p, d] (no past inputs when they are NULL), y [1, hq, 1, d] and the presents
 * [1, hkv, p + 1, d]; the call must succeed. */
static void run_decode_f32(int hq, int hkv, int d, int p, const float *q, const float *k, const float *v,
                           const float *pk, const float *pv, float *y, float *prk, float *prv) {
  mx_attention_params prm = {0};
  mx_kernel_call *c = kc_new(6, 3, &prm);
  kc_set(c, 0, MX_FLOAT32, 4, DIMS(1, hq, 1, d), (void *)q);
  kc_set(c, 1, MX_FLOAT32, 4, DIMS(1, hkv, 1, d), (void *)k);
  kc_set(c, 2, MX_FLOAT32, 4, DIMS(1, hkv, 1, d), (void *)v);
  if (pk && pv) {
    kc_set(c, 4, MX_FLOAT32, 4, DIMS(1, hkv, p, d), (void *)pk);
    kc_set(c, 5, MX_FLOAT32, 4, DIMS(1, hkv, p, d), (void *)pv);
  }
  kc_set(c, 6, MX_FLOAT32, 4, DIMS(1, hq, 1, d), y);
  kc_set(c, 7, MX_FLOAT32, 4, DIMS(1, hkv, p + 1, d), prk);
  kc_set(c, 8, MX_FLOAT32, 4, DIMS(1, hkv, p + 1, d), prv);
  cr_assert_eq(kc_run("Attention", c), MX_OK,
               "decode step: %d query heads, %d key/value heads of %d, past %d", hq, hkv, d, p);
  free(c);
}

/* The float32 decode step without mask, softcap or qk output keeps its weights unnormalized
 * and scales Y once; non-finite scores must still come out as the normalized softmax would give
 * them: a NaN query or NaN scores give a NaN head, and a head whose every score is -inf gives
 * zeros. */
Test(nn_kernels, attention_decode_plain_step_with_nonfinite_scores) {
  enum { HQ = 4, HKV = 2, P = 40, D = 16, T = P + 1 };
  static float q[HQ * D], k[HKV * D], v[HKV * D], pk[HKV * P * D], pv[HKV * P * D], y[HQ * D];
  static float prk[HKV * T * D], prv[HKV * T * D];
  fill(q, HQ * D, 1), fill(k, HKV * D, 2), fill(v, HKV * D, 3), fill(pk, HKV * P * D, 4),
      fill(pv, HKV * P * D, 5);
  q[0] = NAN; /* head 0 (key/value head 0) */
  /* Every key of key/value head 1 (query heads 2 and 3) is all -inf: query 2, all ones, scores
   * -inf everywhere; query 3, (-1, 0, 0, ...), meets 0 * -inf and scores NaN. */
  for (int d = 0; d < D; d++) q[2 * D + d] = 1.0f, q[3 * D + d] = d == 0 ? -1.0f : 0.0f;
  for (int j = 0; j < P; j++)
    for (int d = 0; d < D; d++) pk[(P + j) * D + d] = -INFINITY;
  for (int d = 0; d < D; d++) k[D + d] = -INFINITY;
  run_decode_f32(HQ, HKV, D, P, q, k, v, pk, pv, y, prk, prv);
  for (int d = 0; d < D; d++) {
    cr_expect(isnan(y[d]), "head 0 (NaN query) [%d] = %g", d, y[d]);
    cr_expect(isfinite(y[D + d]), "head 1 [%d] = %g", d, y[D + d]);
    cr_expect(y[2 * D + d] == 0.0f, "head 2 (every score -inf) [%d] = %g", d, y[2 * D + d]);
    cr_expect(isnan(y[3 * D + d]), "head 3 (NaN scores) [%d] = %g", d, y[3 * D + d]);
  }
}

/* The float32 decode step walks the query heads of a key/value group two at a time: each head's
 * Y must be the same bits as when it has its key/value head to itself (the group's K and V
 * repeated per query head), for groups of 2 and 3 (a pair and a single), head sizes 8, 16 and
 * 64, caches whose length is and is not a multiple of the row blocks. */
static void decode_grouping_case(int group, int D, int P) {
  enum { HKV = 2 };
  const int HQ = HKV * group, T = P + 1;
  float *q = malloc((size_t)HQ * D * 4), *k = malloc((size_t)HKV * D * 4), *v = malloc((size_t)HKV * D * 4);
  float *pk = malloc((size_t)HKV * P * D * 4 + 4), *pv = malloc((size_t)HKV * P * D * 4 + 4);
  float *kr = malloc((size_t)HQ * D * 4), *vr = malloc((size_t)HQ * D * 4);
  float *pkr = malloc((size_t)HQ * P * D * 4 + 4), *pvr = malloc((size_t)HQ * P * D * 4 + 4);
  float *y = malloc((size_t)HQ * D * 4), *yr = malloc((size_t)HQ * D * 4);
  float *prk = malloc((size_t)HQ * T * D * 4), *prv = malloc((size_t)HQ * T * D * 4);
  cr_assert(q && k && v && pk && pv && kr && vr && pkr && pvr && y && yr && prk && prv);
  fill(q, HQ * D, 1), fill(k, HKV * D, 2), fill(v, HKV * D, 3), fill(pk, HKV * P * D, 4),
      fill(pv, HKV * P * D, 5);
  for (int h = 0; h < HQ; h++) {
    int g = h / group;
    memcpy(kr + h * D, k + g * D, (size_t)D * 4);
    memcpy(vr + h * D, v + g * D, (size_t)D * 4);
    memcpy(pkr + (size_t)h * P * D, pk + (size_t)g * P * D, (size_t)P * D * 4);
    memcpy(pvr + (size_t)h * P * D, pv + (size_t)g * P * D, (size_t)P * D * 4);
  }
  run_decode_f32(HQ, HKV, D, P, q, k, v, pk, pv, y, prk, prv);
  run_decode_f32(HQ, HQ, D, P, q, kr, vr, pkr, pvr, yr, prk, prv); /* each query head alone */
  for (int i = 0; i < HQ * D; i++)
    cr_expect(memcmp(&y[i], &yr[i], 4) == 0, "group %d D %d P %d: Y[%d] %.9g grouped, %.9g alone", group, D,
              P, i, y[i], yr[i]);
  float *all[] = {q, k, v, pk, pv, kr, vr, pkr, pvr, y, yr, prk, prv};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
}

Test(nn_kernels, attention_decode_grouped_heads_equal_lone_heads) {
  const int groups[] = {2, 3}, heads[] = {8, 16, 64}, pasts[] = {0, 5, 16, 37, 300};
  for (size_t gi = 0; gi < 2; gi++)
    for (size_t di = 0; di < 3; di++)
      for (size_t pi = 0; pi < 5; pi++) decode_grouping_case(groups[gi], heads[di], pasts[pi]);
}

/* A decode step whose past and presents together pass the core's L2 writes the presents by
 * streaming stores when they are 16-byte aligned, by ordinary stores otherwise. Both must give
 * the same presents (the exact concatenation) and the same Y bits; head sizes 16 and 64 (the
 * two vector widths' walks) and a cache well past 1 MiB of rows. */
static void decode_stream_case(int D, int P) {
  enum { HQ = 8, HKV = 4 };
  const int T = P + 1;
  const size_t past_n = (size_t)HKV * P * D, pres_n = (size_t)HKV * T * D;
  float *q = malloc((size_t)HQ * D * 4), *k = malloc((size_t)HKV * D * 4), *v = malloc((size_t)HKV * D * 4);
  float *pk = malloc(past_n * 4), *pv = malloc(past_n * 4);
  float *y[2] = {malloc((size_t)HQ * D * 4), malloc((size_t)HQ * D * 4)};
  /* One float more than the presents need, so pass 1 can start 4 bytes in: not 16-byte aligned. */
  float *prk[2], *prv[2];
  void *blk[4];
  for (int i = 0; i < 4; i++) cr_assert_eq(posix_memalign(&blk[i], 64, (pres_n + 1) * 4), 0);
  prk[0] = blk[0], prv[0] = blk[1], prk[1] = (float *)blk[2] + 1, prv[1] = (float *)blk[3] + 1;
  cr_assert(q && k && v && pk && pv && y[0] && y[1]);
  fill(q, HQ * D, 1), fill(k, HKV * D, 2), fill(v, HKV * D, 3), fill(pk, (int)past_n, 4),
      fill(pv, (int)past_n, 5);
  for (int pass = 0; pass < 2; pass++)
    run_decode_f32(HQ, HKV, D, P, q, k, v, pk, pv, y[pass], prk[pass], prv[pass]);
  cr_expect(memcmp(y[0], y[1], (size_t)HQ * D * 4) == 0,
            "D %d P %d: Y differs between streamed and stored presents", D, P);
  int bad = 0;
  for (int g = 0; g < HKV && !bad; g++)
    for (int j = 0; j < T && !bad; j++) {
      const float *wk = j < P ? pk + ((size_t)g * P + j) * D : k + (size_t)g * D;
      const float *wv = j < P ? pv + ((size_t)g * P + j) * D : v + (size_t)g * D;
      for (int pass = 0; pass < 2; pass++) {
        size_t at = ((size_t)g * T + j) * D;
        if (memcmp(prk[pass] + at, wk, (size_t)D * 4) != 0 || memcmp(prv[pass] + at, wv, (size_t)D * 4) != 0)
          bad = 1;
        cr_expect(!bad, "D %d P %d pass %d: present row %d of head %d", D, P, pass, j, g);
      }
    }
  float *all[] = {q, k, v, pk, pv, y[0], y[1]};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
  for (int i = 0; i < 4; i++) free(blk[i]);
}

Test(nn_kernels, attention_decode_streamed_presents_equal_stored_ones) {
  decode_stream_case(16, 2100); /* 4 heads x 2100 rows x 16 x 4 bytes x 2 (K, V): 1.08 MB of past */
  decode_stream_case(64, 1000);
  decode_stream_case(64, 1003); /* a cache length off the row blocks */
}

Test(nn_kernels, attention_3d_layout_equals_4d) {
  /* The same numbers in (batch, seq, heads*D) form give the transposed output. */
  enum { H = 2, S = 3, D = 2 };
  float q4[H * S * D], k4[H * S * D], v4[H * S * D], y4[H * S * D];
  float q3[S * H * D], k3[S * H * D], v3[S * H * D], y3[S * H * D];
  fill(q4, H * S * D, 1), fill(k4, H * S * D, 2), fill(v4, H * S * D, 3);
  for (int h = 0; h < H; h++)
    for (int s = 0; s < S; s++)
      for (int d = 0; d < D; d++) {
        q3[(s * H + h) * D + d] = q4[(h * S + s) * D + d];
        k3[(s * H + h) * D + d] = k4[(h * S + s) * D + d];
        v3[(s * H + h) * D + d] = v4[(h * S + s) * D + d];
      }
  mx_attention_params p4 = {0}, p3 = {.q_num_heads = H, .kv_num_heads = H};
  mx_kernel_call *c = kc_new(3, 1, &p4);
  kc_set(c, 0, MX_FLOAT32, 4, (int64_t[]){1, H, S, D}, q4);
  kc_set(c, 1, MX_FLOAT32, 4, (int64_t[]){1, H, S, D}, k4);
  kc_set(c, 2, MX_FLOAT32, 4, (int64_t[]){1, H, S, D}, v4);
  kc_set(c, 3, MX_FLOAT32, 4, (int64_t[]){1, H, S, D}, y4);
  cr_assert_eq(kc_run("Attention", c), MX_OK);
  c->params = &p3;
  kc_set(c, 0, MX_FLOAT32, 3, (int64_t[]){1, S, H * D}, q3);
  kc_set(c, 1, MX_FLOAT32, 3, (int64_t[]){1, S, H * D}, k3);
  kc_set(c, 2, MX_FLOAT32, 3, (int64_t[]){1, S, H * D}, v3);
  kc_set(c, 3, MX_FLOAT32, 3, (int64_t[]){1, S, H * D}, y3);
  cr_assert_eq(kc_run("Attention", c), MX_OK);
  for (int h = 0; h < H; h++)
    for (int s = 0; s < S; s++)
      for (int d = 0; d < D; d++) cr_expect_float_eq(y3[(s * H + h) * D + d], y4[(h * S + s) * D + d], 1e-6f);
  free(c);
}

Test(nn_kernels, attention_fully_masked_row_is_zero_and_modes) {
  /* Bool mask row 0 all false: Y row 0 = 0 and the softmax (mode 3) row 0 = 0. */
  float q[] = {1, 0, 0, 1}, k[] = {1, 0, 0, 1}, v[] = {1, 2, 3, 4}, y[4], qk[4];
  uint8_t mask[] = {0, 0, 1, 1};
  mx_attention_params p = {.qk_matmul_output_mode = 3, .has_scale = 1, .scale = 1.0f};
  mx_kernel_call *c = kc_new(4, 4, &p);
  kc_set(c, 0, MX_FLOAT32, 4, (int64_t[]){1, 1, 2, 2}, q);
  kc_set(c, 1, MX_FLOAT32, 4, (int64_t[]){1, 1, 2, 2}, k);
  kc_set(c, 2, MX_FLOAT32, 4, (int64_t[]){1, 1, 2, 2}, v);
  kc_set(c, 3, MX_BOOL, 2, (int64_t[]){2, 2}, mask);
  kc_set(c, 4, MX_FLOAT32, 4, (int64_t[]){1, 1, 2, 2}, y);
  kc_set(c, 7, MX_FLOAT32, 4, (int64_t[]){1, 1, 2, 2}, qk);
  cr_assert_eq(kc_run("Attention", c), MX_OK);
  float e = (float)(1 / (1 + exp(-1.0))); /* row 1: scores [0, 1] */
  expect_f32_near(y, (float[]){0, 0, (1 - e) * 1 + e * 3, (1 - e) * 2 + e * 4}, 4, 1e-6f);
  expect_f32_near(qk, (float[]){0, 0, 1 - e, e}, 4, 1e-6f);
  /* Mode 0 gives the raw scaled scores; mode 2 adds the mask (-inf where false). */
  p.qk_matmul_output_mode = 0;
  cr_assert_eq(kc_run("Attention", c), MX_OK);
  expect_f32_near(qk, (float[]){1, 0, 0, 1}, 4, 0);
  p.qk_matmul_output_mode = 2;
  cr_assert_eq(kc_run("Attention", c), MX_OK);
  cr_assert(isinf(qk[0]) && qk[0] < 0 && isinf(qk[1]) && qk[2] == 0 && qk[3] == 1);
  free(c);
}

/* The float32 decode step (one query row, head size 8): qk outputs of modes 0 and 3, a bool
 * mask, and a fully masked row giving zeros. */
Test(nn_kernels, attention_decode_step_modes_and_masked_row) {
  float q[8] = {1}, k[16] = {0}, v[16], y[8], qk[2];
  k[0] = 1, k[8 + 1] = 1; /* key 0 = e0, key 1 = e1: scores [1, 0] */
  for (int i = 0; i < 16; i++) v[i] = (float)i;
  uint8_t mask[2] = {1, 1};
  mx_attention_params p = {.qk_matmul_output_mode = 3, .has_scale = 1, .scale = 1.0f};
  mx_kernel_call *c = kc_new(4, 4, &p);
  kc_set(c, 0, MX_FLOAT32, 4, (int64_t[]){1, 1, 1, 8}, q);
  kc_set(c, 1, MX_FLOAT32, 4, (int64_t[]){1, 1, 2, 8}, k);
  kc_set(c, 2, MX_FLOAT32, 4, (int64_t[]){1, 1, 2, 8}, v);
  kc_set(c, 3, MX_BOOL, 1, (int64_t[]){2}, mask);
  kc_set(c, 4, MX_FLOAT32, 4, (int64_t[]){1, 1, 1, 8}, y);
  kc_set(c, 7, MX_FLOAT32, 4, (int64_t[]){1, 1, 1, 2}, qk);
  cr_assert_eq(kc_run("Attention", c), MX_OK);
  float e = (float)(1 / (1 + exp(-1.0)));
  expect_f32_near(qk, (float[]){e, 1 - e}, 2, 1e-6f);
  float want[8];
  for (int d = 0; d < 8; d++) want[d] = e * v[d] + (1 - e) * v[8 + d];
  expect_f32_near(y, want, 8, 1e-5f);
  p.qk_matmul_output_mode = 0;
  cr_assert_eq(kc_run("Attention", c), MX_OK);
  expect_f32_near(qk, (float[]){1, 0}, 2, 0);
  mask[0] = mask[1] = 0;
  p.qk_matmul_output_mode = 3;
  cr_assert_eq(kc_run("Attention", c), MX_OK);
  expect_f32_near(qk, (float[]){0, 0}, 2, 0);
  expect_f32_near(y, (float[8]){0}, 8, 0);
  free(c);
}

Test(nn_kernels, attention_softcap_before_mask) {
  /* softcap 0.5 squashes the scores; the -inf mask must still remove key 1 entirely. */
  float q[] = {4, 0}, k[] = {1, 0, 1, 0}, v[] = {1, 1000}, y, qk[2], mask[] = {0, -INFINITY};
  mx_attention_params p = {.softcap = 0.5f, .qk_matmul_output_mode = 1, .has_scale = 1, .scale = 1.0f};
  mx_kernel_call *c = kc_new(4, 4, &p);
  kc_set(c, 0, MX_FLOAT32, 4, (int64_t[]){1, 1, 1, 2}, q);
  kc_set(c, 1, MX_FLOAT32, 4, (int64_t[]){1, 1, 2, 2}, k);
  kc_set(c, 2, MX_FLOAT32, 4, (int64_t[]){1, 1, 2, 1}, v);
  kc_set(c, 3, MX_FLOAT32, 2, (int64_t[]){1, 2}, mask);
  kc_set(c, 4, MX_FLOAT32, 4, (int64_t[]){1, 1, 1, 1}, &y);
  kc_set(c, 7, MX_FLOAT32, 4, (int64_t[]){1, 1, 1, 2}, qk);
  cr_assert_eq(kc_run("Attention", c), MX_OK);
  cr_assert_float_eq(y, 1.0f, 1e-6f);
  float capped = 0.5f * tanhf(8.0f);
  expect_f32_near(qk, (float[]){capped, capped}, 2, 1e-6f);
  free(c);
}

Test(nn_kernels, attention_nonpad_and_causal_offset) {
  /* External cache of 4 keys, 1 valid for batch 0 and 3 for batch 1, decode query: batch 0
   * attends key 0 only, batch 1 keys 0..2 (bottom-right causal offset nonpad - 1). */
  float q[] = {0, 0}, k[8] = {0}, v[] = {1, 2, 3, 100, 1, 2, 3, 100}, y[2];
  int64_t nonpad[] = {1, 3};
  mx_attention_params p = {.is_causal = 1};
  mx_kernel_call *c = kc_new(7, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 4, (int64_t[]){2, 1, 1, 1}, q);
  kc_set(c, 1, MX_FLOAT32, 4, (int64_t[]){2, 1, 4, 1}, k);
  kc_set(c, 2, MX_FLOAT32, 4, (int64_t[]){2, 1, 4, 1}, v);
  kc_set(c, 6, MX_INT64, 1, (int64_t[]){2}, nonpad);
  kc_set(c, 7, MX_FLOAT32, 4, (int64_t[]){2, 1, 1, 1}, y);
  cr_assert_eq(kc_run("Attention", c), MX_OK);
  expect_f32_near(y, (float[]){1, 2}, 2, 1e-6f);
  free(c);
}

Test(nn_kernels, attention_short_mask_hides_remaining_keys) {
  /* A float mask covering 1 of 2 keys: key 1 is left out. */
  float q[] = {1}, k[] = {1, 1}, v[] = {5, 7}, y, mask[] = {0};
  mx_attention_params p = {0};
  mx_kernel_call *c = kc_new(4, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 4, (int64_t[]){1, 1, 1, 1}, q);
  kc_set(c, 1, MX_FLOAT32, 4, (int64_t[]){1, 1, 2, 1}, k);
  kc_set(c, 2, MX_FLOAT32, 4, (int64_t[]){1, 1, 2, 1}, v);
  kc_set(c, 3, MX_FLOAT32, 2, (int64_t[]){1, 1}, mask);
  kc_set(c, 4, MX_FLOAT32, 4, (int64_t[]){1, 1, 1, 1}, &y);
  cr_assert_eq(kc_run("Attention", c), MX_OK);
  cr_assert_float_eq(y, 5.0f, 1e-6f);
  free(c);
}

Test(nn_kernels, attention_float16_and_float64_agree) {
  enum { N = 2 * 3 * 4 };
  float q[N], k[N], v[N];
  fill(q, N, 1), fill(k, N, 2), fill(v, N, 3);
  uint16_t qh[N], kh[N], vh[N], yh[N];
  double qd[N], kd[N], vd[N], yd[N];
  for (int i = 0; i < N; i++) {
    qh[i] = mx__f32_to_f16(q[i]), kh[i] = mx__f32_to_f16(k[i]), vh[i] = mx__f32_to_f16(v[i]);
    qd[i] = q[i], kd[i] = k[i], vd[i] = v[i];
  }
  mx_attention_params p = {.is_causal = 1};
  int64_t dims[] = {1, 2, 3, 4};
  mx_kernel_call *c = kc_new(3, 1, &p);
  kc_set(c, 0, MX_FLOAT16, 4, dims, qh);
  kc_set(c, 1, MX_FLOAT16, 4, dims, kh);
  kc_set(c, 2, MX_FLOAT16, 4, dims, vh);
  kc_set(c, 3, MX_FLOAT16, 4, dims, yh);
  cr_assert_eq(kc_run("Attention", c), MX_OK);
  kc_set(c, 0, MX_FLOAT64, 4, dims, qd);
  kc_set(c, 1, MX_FLOAT64, 4, dims, kd);
  kc_set(c, 2, MX_FLOAT64, 4, dims, vd);
  kc_set(c, 3, MX_FLOAT64, 4, dims, yd);
  cr_assert_eq(kc_run("Attention", c), MX_OK);
  for (int i = 0; i < N; i++)
    cr_expect_eq(yh[i], mx__f32_to_f16((float)yd[i]), "[%d] 0x%04x vs %g", i, yh[i], yd[i]);
  /* Causal, first query row sees only key 0: Y = V row 0. */
  cr_assert_eq(yd[0], vd[0]);
  free(c);
}

Test(nn_kernels, attention_no_keys_gives_zeros) {
  /* Zero keys: every row is fully masked by construction, Y is all zeros. */
  float q[] = {1, 2, 3, 4}, dummy = 0, y[4] = {9, 9, 9, 9};
  mx_attention_params p = {0};
  mx_kernel_call *c = kc_new(3, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 4, (int64_t[]){1, 1, 2, 2}, q);
  kc_set(c, 1, MX_FLOAT32, 4, (int64_t[]){1, 1, 0, 2}, &dummy);
  kc_set(c, 2, MX_FLOAT32, 4, (int64_t[]){1, 1, 0, 2}, &dummy);
  kc_set(c, 3, MX_FLOAT32, 4, (int64_t[]){1, 1, 2, 2}, y);
  cr_assert_eq(kc_run("Attention", c), MX_OK);
  expect_f32_near(y, (float[]){0, 0, 0, 0}, 4, 0);
  free(c);
}

Test(nn_kernels, attention_bad_heads_is_kernel_error) {
  float x[24] = {0}, y[24];
  mx_attention_params p = {0};
  mx_kernel_call *c = kc_new(3, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 4, (int64_t[]){1, 3, 2, 4}, x);
  kc_set(c, 1, MX_FLOAT32, 4, (int64_t[]){1, 2, 3, 4}, x);
  kc_set(c, 2, MX_FLOAT32, 4, (int64_t[]){1, 2, 3, 4}, x);
  kc_set(c, 3, MX_FLOAT32, 4, (int64_t[]){1, 3, 2, 4}, y);
  cr_assert_eq(kc_run("Attention", c), MX_ERR_KERNEL);
  cr_assert(c->why && strstr(c->why, "heads"));
  free(c);
}

/* --- RotaryEmbedding -------------------------------------------------------------------------- */

Test(nn_kernels, rotary_halves_and_interleaved) {
  /* One head of 4: cos = 0, sin = 1 rotates by 90 degrees. */
  float x[] = {1, 2, 3, 4}, cs[] = {0, 0}, sn[] = {1, 1}, y[4];
  mx_rotary_params p = {0};
  mx_kernel_call *c = kc_new(3, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 4, (int64_t[]){1, 1, 1, 4}, x);
  kc_set(c, 1, MX_FLOAT32, 3, (int64_t[]){1, 1, 2}, cs);
  kc_set(c, 2, MX_FLOAT32, 3, (int64_t[]){1, 1, 2}, sn);
  kc_set(c, 3, MX_FLOAT32, 4, (int64_t[]){1, 1, 1, 4}, y);
  cr_assert_eq(kc_run("RotaryEmbedding", c), MX_OK);
  /* halves: x1 = [1,2], x2 = [3,4] -> [-x2, x1] */
  expect_f32_near(y, (float[]){-3, -4, 1, 2}, 4, 0);
  p.interleaved = 1;
  cr_assert_eq(kc_run("RotaryEmbedding", c), MX_OK);
  /* pairs (1,2), (3,4) -> (-2,1), (-4,3) */
  expect_f32_near(y, (float[]){-2, 1, -4, 3}, 4, 0);
  free(c);
}

Test(nn_kernels, rotary_position_ids_partial_dim_3d) {
  /* 3-D input, 2 heads of 4, rotary dim 2: only the first pair of each head turns; position 1
   * of the cache has cos = 0, sin = -1. */
  float x[] = {1, 2, 3, 4, 5, 6, 7, 8}, cs[] = {1, 0}, sn[] = {0, -1}, y[8];
  int64_t ids[] = {1};
  mx_rotary_params p = {.num_heads = 2, .rotary_embedding_dim = 2};
  mx_kernel_call *c = kc_new(4, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 3, (int64_t[]){1, 1, 8}, x);
  kc_set(c, 1, MX_FLOAT32, 2, (int64_t[]){2, 1}, cs);
  kc_set(c, 2, MX_FLOAT32, 2, (int64_t[]){2, 1}, sn);
  kc_set(c, 3, MX_INT64, 2, (int64_t[]){1, 1}, ids);
  kc_set(c, 4, MX_FLOAT32, 3, (int64_t[]){1, 1, 8}, y);
  cr_assert_eq(kc_run("RotaryEmbedding", c), MX_OK);
  /* (a, b) -> (cos a - sin b, sin a + cos b) = (b, -a) */
  expect_f32_near(y, (float[]){2, -1, 3, 4, 6, -5, 7, 8}, 8, 0);
  ids[0] = 2;
  cr_assert_eq(kc_run("RotaryEmbedding", c), MX_ERR_KERNEL);
  cr_assert(c->why && strstr(c->why, "position"));
  free(c);
}

Test(nn_kernels, rotary_empty_sequence) {
  float cs = 1;
  mx_rotary_params p = {0};
  mx_kernel_call *c = kc_new(3, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 4, (int64_t[]){1, 2, 0, 4}, NULL);
  kc_set(c, 1, MX_FLOAT32, 3, (int64_t[]){1, 0, 2}, &cs);
  kc_set(c, 2, MX_FLOAT32, 3, (int64_t[]){1, 0, 2}, &cs);
  kc_set(c, 3, MX_FLOAT32, 4, (int64_t[]){1, 2, 0, 4}, NULL);
  cr_assert_eq(kc_run("RotaryEmbedding", c), MX_OK);
  free(c);
}

Test(nn_kernels, rotary_float16_rounds_once) {
  float cv = (float)cos(0.3), sv = (float)sin(0.3);
  uint16_t x[] = {mx__f32_to_f16(0.7f), mx__f32_to_f16(-1.3f)}, cs = mx__f32_to_f16(cv),
           sn = mx__f32_to_f16(sv), y[2];
  mx_rotary_params p = {0};
  mx_kernel_call *c = kc_new(3, 1, &p);
  kc_set(c, 0, MX_FLOAT16, 4, (int64_t[]){1, 1, 1, 2}, x);
  kc_set(c, 1, MX_FLOAT16, 3, (int64_t[]){1, 1, 1}, &cs);
  kc_set(c, 2, MX_FLOAT16, 3, (int64_t[]){1, 1, 1}, &sn);
  kc_set(c, 3, MX_FLOAT16, 4, (int64_t[]){1, 1, 1, 2}, y);
  cr_assert_eq(kc_run("RotaryEmbedding", c), MX_OK);
  float a = mx__f16_to_f32(x[0]), b = mx__f16_to_f32(x[1]), cf = mx__f16_to_f32(cs), sf = mx__f16_to_f32(sn);
  cr_expect_eq(y[0], mx__f32_to_f16(cf * a - sf * b));
  cr_expect_eq(y[1], mx__f32_to_f16(sf * a + cf * b));
  free(c);
}
