/* Tests of the activation-group CPU kernels (kernels/activation*.c): the pointwise activations
 * against double formulas over a wide range (large magnitudes, NaN), float16 through the
 * float32 rows, integer Shrink, Round's ties to even, IsNaN/IsInf with each detect flag (also
 * on 8-bit floats), bitwise ops with broadcasting and over-wide shifts, Hardmax's ties, NaN and
 * the pre-13 2-D view, Det with pivoting, singular and batched matrices, CumProd in its
 * exclusive/reverse modes (integers, float16) and ReduceLogSum over attribute axes. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/half.h"
#include "graph/ops/activation_params.h"
#include "graph/ops/reduce_params.h"
#include "kernels/kernel.h"
#include "kernels/kernels_support.h"

/* Runs a one-input one-output op on n elements of dtype dt (input and output dtypes may differ). */
static mx_status run_unary(const char *op, const void *params, mx_dtype in_dt, const void *x, mx_dtype out_dt,
                           void *y, int64_t n) {
  mx_kernel_call *c = kc_new(1, 1, NULL);
  kc_set(c, 0, in_dt, 1, DIMS(n), (void *)x);
  kc_set(c, 1, out_dt, 1, DIMS(n), y);
  mx_status st = kc_run_with(op, c, params);
  free(c);
  return st;
}

static const float XS[] = {-100.0f, -20.0f, -3.5f, -1.0f, -0.25f, -1e-6f, 0.0f,
                           1e-6f,   0.3f,   1.0f,  2.5f,  20.0f,  100.0f};
enum { NX = sizeof XS / sizeof XS[0] };

/* The op over XS in float32 and float64 matches ref within tol (relative, plus tol absolute). */
static void check_formula(const char *op, const mx_activation_params *p,
                          double (*ref)(double, const mx_activation_params *), float tol) {
  float y[NX], want[NX];
  double xd[NX], yd[NX];
  for (int i = 0; i < NX; i++) {
    want[i] = (float)ref(XS[i], p);
    xd[i] = XS[i];
  }
  cr_assert_eq(run_unary(op, p, MX_FLOAT32, XS, MX_FLOAT32, y, NX), MX_OK, "%s float32", op);
  expect_f32_near(y, want, NX, tol);
  cr_assert_eq(run_unary(op, p, MX_FLOAT64, xd, MX_FLOAT64, yd, NX), MX_OK, "%s float64", op);
  for (int i = 0; i < NX; i++) {
    double w = ref(xd[i], p);
    cr_expect(fabs(yd[i] - w) <= 1e-12 * (1.0 + fabs(w)), "%s(%g) = %.17g, want %.17g", op, xd[i], yd[i], w);
  }
  /* NaN in, NaN out. */
  float nan_in = NAN, nan_out = 0.0f;
  cr_assert_eq(run_unary(op, p, MX_FLOAT32, &nan_in, MX_FLOAT32, &nan_out, 1), MX_OK);
  cr_expect(isnan(nan_out), "%s(NaN) = %g", op, nan_out);
}

static double ref_elu(double x, const mx_activation_params *p) {
  return x > 0 ? x : p->alpha * (exp(x) - 1.0);
}
static double ref_selu(double x, const mx_activation_params *p) {
  return p->gamma * (x > 0 ? x : p->alpha * (exp(x) - 1.0));
}
static double ref_celu(double x, const mx_activation_params *p) {
  return fmax(0.0, x) + fmin(0.0, p->alpha * (exp(x / p->alpha) - 1.0));
}
static double ref_leaky(double x, const mx_activation_params *p) { return x < 0 ? p->alpha * x : x; }
static double ref_hardsigmoid(double x, const mx_activation_params *p) {
  return fmax(0.0, fmin(1.0, p->alpha * x + p->beta));
}
static double ref_hardswish(double x, const mx_activation_params *p) {
  (void)p;
  return x * fmax(0.0, fmin(1.0, x / 6.0 + 0.5));
}
static double ref_softplus(double x, const mx_activation_params *p) {
  (void)p;
  return x > 30 ? x : log(exp(x) + 1.0);
}
static double ref_softsign(double x, const mx_activation_params *p) {
  (void)p;
  return x / (1.0 + fabs(x));
}
static double ref_mish(double x, const mx_activation_params *p) { return x * tanh(ref_softplus(x, p)); }
static double ref_swish(double x, const mx_activation_params *p) { return x / (1.0 + exp(-p->alpha * x)); }

Test(activation_kernel, pointwise_formulas) {
  mx_activation_params none = {0};
  mx_activation_params elu = {0.7f, 0, 0, 0};
  mx_activation_params selu = {1.67326319217681884765625f, 0, 1.05070102214813232421875f, 0};
  mx_activation_params celu = {1.5f, 0, 0, 0}, celu_neg = {-2.0f, 0, 0, 0};
  mx_activation_params leaky = {0.01f, 0, 0, 0}, hs = {0.2f, 0.5f, 0, 0}, swish = {1.5f, 0, 0, 0};
  check_formula("Elu", &elu, ref_elu, 2e-6f);
  check_formula("Selu", &selu, ref_selu, 2e-6f);
  check_formula("Celu", &celu, ref_celu, 2e-6f);
  check_formula("Celu", &celu_neg, ref_celu, 2e-6f);
  check_formula("LeakyRelu", &leaky, ref_leaky, 1e-7f);
  check_formula("HardSigmoid", &hs, ref_hardsigmoid, 1e-7f);
  check_formula("HardSwish", NULL, ref_hardswish, 1e-7f);
  check_formula("Softplus", NULL, ref_softplus, 2e-6f);
  check_formula("Softsign", NULL, ref_softsign, 1e-7f);
  check_formula("Mish", NULL, ref_mish, 2e-6f);
  check_formula("Swish", &swish, ref_swish, 2e-6f);
  (void)none;
}

Test(activation_kernel, thresholded_relu_and_shrink) {
  mx_activation_params th = {1.0f, 0, 0, 0};
  float x[5] = {-2.0f, 0.5f, 1.0f, 1.5f, NAN}, y[5];
  cr_assert_eq(run_unary("ThresholdedRelu", &th, MX_FLOAT32, x, MX_FLOAT32, y, 5), MX_OK);
  expect_f32_same(y, (float[]){0.0f, 0.0f, 0.0f, 1.5f, 0.0f}, 5);
  mx_activation_params sh = {1.5f, 0.5f, 0, 0}; /* lambd 1.5, bias 0.5 */
  float xs[5] = {-3.0f, -1.5f, 0.0f, 1.6f, 4.0f}, ys[5];
  cr_assert_eq(run_unary("Shrink", &sh, MX_FLOAT32, xs, MX_FLOAT32, ys, 5), MX_OK);
  expect_f32_near(ys, (float[]){-2.5f, 0.0f, 0.0f, 1.1f, 3.5f}, 5, 1e-7f);
  int8_t xi[5] = {-128, -2, 1, 2, 127}, yi[5];
  cr_assert_eq(run_unary("Shrink", &sh, MX_INT8, xi, MX_INT8, yi, 5), MX_OK);
  int8_t want[5] = {-127, -1, 0, 1, 126}; /* x + 0.5 / x - 0.5, truncated toward zero */
  for (int i = 0; i < 5; i++)
    cr_expect_eq(yi[i], want[i], "Shrink int8 [%d] = %d, want %d", i, yi[i], want[i]);
}

Test(activation_kernel, float16_runs_through_float32) {
  mx_activation_params celu = {1.0f, 0, 0, 0};
  uint16_t x[3] = {mx__f32_to_f16(-1.0f), mx__f32_to_f16(0.5f), 0x7e00 /* NaN */}, y[3];
  cr_assert_eq(run_unary("Celu", &celu, MX_FLOAT16, x, MX_FLOAT16, y, 3), MX_OK);
  cr_expect_eq(y[0], mx__f32_to_f16(expf(-1.0f) - 1.0f));
  cr_expect_eq(y[1], mx__f32_to_f16(0.5f));
  cr_expect(isnan(mx__f16_to_f32(y[2])));
  uint16_t b[2] = {mx__f32_to_bf16(0.5f), mx__f32_to_bf16(-0.5f)}, r[2];
  cr_assert_eq(run_unary("Asin", NULL, MX_BFLOAT16, b, MX_BFLOAT16, r, 2), MX_OK);
  cr_expect_eq(r[0], mx__f32_to_bf16(asinf(0.5f)));
  cr_expect_eq(r[1], mx__f32_to_bf16(asinf(-0.5f)));
}

Test(activation_kernel, round_ties_to_even) {
  float x[8] = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 2.4f, -2.6f, 1e20f}, y[8];
  cr_assert_eq(run_unary("Round", NULL, MX_FLOAT32, x, MX_FLOAT32, y, 8), MX_OK);
  expect_f32_same(y, (float[]){0.0f, 2.0f, 2.0f, -0.0f, -2.0f, 2.0f, -3.0f, 1e20f}, 8);
  cr_expect(signbit(y[3]), "Round(-0.5) is -0");
}

Test(activation_kernel, trig_and_hyperbolic) {
  static const char *const ops[] = {"Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Atanh"};
  static double (*const fns[])(double) = {tan, asin, acos, atan, sinh, cosh, asinh, atanh};
  float x[4] = {-0.9f, -0.1f, 0.2f, 0.75f}, y[4], want[4];
  for (int k = 0; k < 8; k++) {
    for (int i = 0; i < 4; i++) want[i] = (float)fns[k](x[i]);
    cr_assert_eq(run_unary(ops[k], NULL, MX_FLOAT32, x, MX_FLOAT32, y, 4), MX_OK, "%s", ops[k]);
    expect_f32_near(y, want, 4, 1e-6f);
  }
  float xa[3] = {1.0f, 2.0f, 0.5f}, ya[3];
  cr_assert_eq(run_unary("Acosh", NULL, MX_FLOAT32, xa, MX_FLOAT32, ya, 3), MX_OK);
  cr_expect_float_eq(ya[0], 0.0f, 1e-7f);
  cr_expect_float_eq(ya[1], (float)acosh(2.0), 1e-6f);
  cr_expect(isnan(ya[2]), "Acosh below 1 is NaN");
}

Test(activation_kernel, isnan_isinf_flags) {
  float x[5] = {1.0f, NAN, INFINITY, -INFINITY, -0.0f};
  uint8_t y[5];
  cr_assert_eq(run_unary("IsNaN", NULL, MX_FLOAT32, x, MX_BOOL, y, 5), MX_OK);
  cr_expect_arr_eq(y, ((uint8_t[]){0, 1, 0, 0, 0}), 5);
  mx_isinf_params both = {1, 1}, pos = {1, 0}, neg = {0, 1};
  cr_assert_eq(run_unary("IsInf", &both, MX_FLOAT32, x, MX_BOOL, y, 5), MX_OK);
  cr_expect_arr_eq(y, ((uint8_t[]){0, 0, 1, 1, 0}), 5);
  cr_assert_eq(run_unary("IsInf", &pos, MX_FLOAT32, x, MX_BOOL, y, 5), MX_OK);
  cr_expect_arr_eq(y, ((uint8_t[]){0, 0, 1, 0, 0}), 5);
  double xd[5] = {1.0, NAN, INFINITY, -INFINITY, 0.0};
  cr_assert_eq(run_unary("IsInf", &neg, MX_FLOAT64, xd, MX_BOOL, y, 5), MX_OK);
  cr_expect_arr_eq(y, ((uint8_t[]){0, 0, 0, 1, 0}), 5);
  uint16_t h[3] = {0x7c00 /* +inf */, 0x7e00 /* NaN */, 0x3c00 /* 1 */};
  cr_assert_eq(run_unary("IsNaN", NULL, MX_FLOAT16, h, MX_BOOL, y, 3), MX_OK);
  cr_expect_arr_eq(y, ((uint8_t[]){0, 1, 0}), 3);
  uint8_t e5m2[4] = {0x7c /* +inf */, 0xfc /* -inf */, 0x7e /* NaN */, 0x3c /* 1 */};
  cr_assert_eq(run_unary("IsInf", &both, MX_FLOAT8E5M2, e5m2, MX_BOOL, y, 4), MX_OK);
  cr_expect_arr_eq(y, ((uint8_t[]){1, 1, 0, 0}), 4);
  cr_assert_eq(run_unary("IsNaN", NULL, MX_FLOAT8E5M2, e5m2, MX_BOOL, y, 4), MX_OK);
  cr_expect_arr_eq(y, ((uint8_t[]){0, 0, 1, 0}), 4);
  uint8_t e4m3[2] = {0x7f /* NaN */, 0x7e /* 448, the largest: e4m3fn has no infinity */};
  cr_assert_eq(run_unary("IsInf", &both, MX_FLOAT8E4M3FN, e4m3, MX_BOOL, y, 2), MX_OK);
  cr_expect_arr_eq(y, ((uint8_t[]){0, 0}), 2);
  cr_assert_eq(run_unary("IsNaN", NULL, MX_FLOAT8E4M3FN, e4m3, MX_BOOL, y, 2), MX_OK);
  cr_expect_arr_eq(y, ((uint8_t[]){1, 0}), 2);
}

/* --- binary ------------------------------------------------------------------------------- */

static mx_status run_binary(const char *op, const void *params, mx_dtype dt, int32_t ra, const int64_t *da,
                            const void *a, int32_t rb, const int64_t *db, const void *b, int32_t ro,
                            const int64_t *dout, void *y) {
  mx_kernel_call *c = kc_new(2, 1, NULL);
  kc_set(c, 0, dt, ra, da, (void *)a);
  kc_set(c, 1, dt, rb, db, (void *)b);
  kc_set(c, 2, dt, ro, dout, y);
  mx_status st = kc_run_with(op, c, params);
  free(c);
  return st;
}

Test(activation_kernel, prelu_broadcasts_the_slope) {
  float x[6] = {-1.0f, 2.0f, -3.0f, -4.0f, 5.0f, NAN}, s[3] = {0.5f, 0.25f, 2.0f}, y[6];
  cr_assert_eq(run_binary("PRelu", NULL, MX_FLOAT32, 2, DIMS(2, 3), x, 1, DIMS(3), s, 2, DIMS(2, 3), y),
               MX_OK);
  expect_f32_same(y, (float[]){-0.5f, 2.0f, -6.0f, -2.0f, 5.0f, NAN}, 6);
  int64_t xi[3] = {-4, 3, -1}, si = 3, yi[3];
  cr_assert_eq(run_binary("PRelu", NULL, MX_INT64, 1, DIMS(3), xi, 0, NULL, &si, 1, DIMS(3), yi), MX_OK);
  expect_i64(yi, (int64_t[]){-12, 3, -3}, 3);
}

Test(activation_kernel, bitwise_ops_broadcast) {
  int8_t a[4] = {0x0f, -1, 0x55, -128}, b[2] = {0x3c, 0x01}, y[4];
  cr_assert_eq(run_binary("BitwiseAnd", NULL, MX_INT8, 2, DIMS(2, 2), a, 1, DIMS(2), b, 2, DIMS(2, 2), y),
               MX_OK);
  cr_expect_arr_eq(y, ((int8_t[]){0x0c, 0x01, 0x14, 0x00}), 4);
  cr_assert_eq(run_binary("BitwiseOr", NULL, MX_INT8, 2, DIMS(2, 2), a, 1, DIMS(2), b, 2, DIMS(2, 2), y),
               MX_OK);
  cr_expect_arr_eq(y, ((int8_t[]){0x3f, -1, 0x7d, -127}), 4);
  cr_assert_eq(run_binary("BitwiseXor", NULL, MX_INT8, 2, DIMS(2, 2), a, 1, DIMS(2), b, 2, DIMS(2, 2), y),
               MX_OK);
  cr_expect_arr_eq(y, ((int8_t[]){0x33, -2, 0x69, -127}), 4);
  int32_t ni[3] = {0, -1, 5}, no[3];
  cr_assert_eq(run_unary("BitwiseNot", NULL, MX_INT32, ni, MX_INT32, no, 3), MX_OK);
  cr_expect_arr_eq(no, ((int32_t[]){-1, 0, -6}), 3);
}

Test(activation_kernel, bitshift_both_directions) {
  mx_bitshift_params left = {1, 0}, right = {0, 0};
  uint8_t x[4] = {1, 0x81, 0xff, 16}, s[4] = {1, 1, 8, 2}, y[4];
  cr_assert_eq(run_binary("BitShift", &left, MX_UINT8, 1, DIMS(4), x, 1, DIMS(4), s, 1, DIMS(4), y), MX_OK);
  cr_expect_arr_eq(y, ((uint8_t[]){2, 0x02, 0, 64}), 4);
  cr_assert_eq(run_binary("BitShift", &right, MX_UINT8, 1, DIMS(4), x, 1, DIMS(4), s, 1, DIMS(4), y), MX_OK);
  cr_expect_arr_eq(y, ((uint8_t[]){0, 0x40, 0, 4}), 4);
  uint64_t x64[2] = {1, UINT64_MAX}, s64 = 63, y64[2];
  cr_assert_eq(run_binary("BitShift", &left, MX_UINT64, 1, DIMS(2), x64, 0, NULL, &s64, 1, DIMS(2), y64),
               MX_OK);
  cr_expect_eq(y64[0], (uint64_t)1 << 63);
  cr_expect_eq(y64[1], (uint64_t)1 << 63);
}

/* --- Hardmax, Det, CumProd, ReduceLogSum -------------------------------------------------- */

static mx_status run_hardmax(const mx_hardmax_params *p, int32_t rank, const int64_t *dims, const float *x,
                             float *y) {
  mx_kernel_call *c = kc_new(1, 1, NULL);
  kc_set(c, 0, MX_FLOAT32, rank, dims, (void *)x);
  kc_set(c, 1, MX_FLOAT32, rank, dims, y);
  mx_status st = kc_run_with("Hardmax", c, p);
  free(c);
  return st;
}

Test(activation_kernel, hardmax_first_maximum_and_nan) {
  mx_hardmax_params last = {-1, 0};
  float x[6] = {1, 3, 3, NAN, 0, 7}, y[6];
  cr_assert_eq(run_hardmax(&last, 2, DIMS(2, 3), x, y), MX_OK);
  expect_f32_same(y, (float[]){0, 1, 0, 1, 0, 0}, 6);
  mx_hardmax_params first = {0, 0};
  cr_assert_eq(run_hardmax(&first, 2, DIMS(2, 3), x, y), MX_OK); /* columns (1, NaN), (3, 0), (3, 7) */
  expect_f32_same(y, (float[]){0, 1, 0, 1, 0, 1}, 6);
}

Test(activation_kernel, hardmax_before_13_uses_the_2d_view) {
  /* [2, 2, 2] with axis 1: rows of 4 elements. */
  mx_hardmax_params p = {1, 1};
  float x[8] = {1, 2, 9, 3, 5, 4, 0, 1}, y[8];
  cr_assert_eq(run_hardmax(&p, 3, DIMS(2, 2, 2), x, y), MX_OK);
  expect_f32_same(y, (float[]){0, 0, 1, 0, 1, 0, 0, 0}, 8);
}

static mx_status run_det(mx_dtype dt, int32_t rank, const int64_t *dims, const void *x, int32_t orank,
                         void *y) {
  mx_kernel_call *c = kc_new(1, 1, NULL);
  kc_set(c, 0, dt, rank, dims, (void *)x);
  kc_set(c, 1, dt, orank, dims, y);
  mx_status st = kc_run("Det", c);
  free(c);
  return st;
}

Test(activation_kernel, det_pivots_and_batches) {
  /* [[0, 1], [1, 0]] needs a row swap (-1); [[1, 2], [2, 4]] is singular; then a 3x3. */
  double x[2 * 4] = {0, 1, 1, 0, 1, 2, 2, 4}, y[2];
  cr_assert_eq(run_det(MX_FLOAT64, 3, DIMS(2, 2, 2), x, 1, y), MX_OK);
  cr_expect_float_eq(y[0], -1.0, 1e-15);
  cr_expect_float_eq(y[1], 0.0, 1e-15);
  float m[9] = {2, 0, 1, 1, 3, 2, 1, 1, 2}, d; /* 2 * (6 - 2) - 0 + 1 * (1 - 3) = 6 */
  cr_assert_eq(run_det(MX_FLOAT32, 2, DIMS(3, 3), m, 0, &d), MX_OK);
  cr_expect_float_eq(d, 6.0f, 1e-5f);
}

static mx_status run_cumprod(const mx_cumprod_params *p, mx_dtype dt, int32_t rank, const int64_t *dims,
                             const void *x, int64_t axis, void *y) {
  mx_kernel_call *c = kc_new(2, 1, NULL);
  kc_set(c, 0, dt, rank, dims, (void *)x);
  kc_set(c, 1, MX_INT64, 0, NULL, &axis);
  kc_set(c, 2, dt, rank, dims, y);
  mx_status st = kc_run_with("CumProd", c, p);
  free(c);
  return st;
}

Test(activation_kernel, cumprod_modes) {
  int32_t x[6] = {1, 2, 3, 4, 5, 6}, y[6];
  mx_cumprod_params plain = {0, 0}, excl = {1, 0}, rev = {0, 1}, both = {1, 1};
  cr_assert_eq(run_cumprod(&plain, MX_INT32, 2, DIMS(2, 3), x, 1, y), MX_OK);
  cr_expect_arr_eq(y, ((int32_t[]){1, 2, 6, 4, 20, 120}), 6);
  cr_assert_eq(run_cumprod(&excl, MX_INT32, 2, DIMS(2, 3), x, -1, y), MX_OK);
  cr_expect_arr_eq(y, ((int32_t[]){1, 1, 2, 1, 4, 20}), 6);
  cr_assert_eq(run_cumprod(&rev, MX_INT32, 2, DIMS(2, 3), x, 0, y), MX_OK);
  cr_expect_arr_eq(y, ((int32_t[]){4, 10, 18, 4, 5, 6}), 6);
  cr_assert_eq(run_cumprod(&both, MX_INT32, 2, DIMS(2, 3), x, 1, y), MX_OK);
  cr_expect_arr_eq(y, ((int32_t[]){6, 3, 1, 30, 6, 1}), 6);
  uint16_t h[3] = {mx__f32_to_f16(0.5f), mx__f32_to_f16(3.0f), mx__f32_to_f16(-2.0f)}, hy[3];
  cr_assert_eq(run_cumprod(&both, MX_FLOAT16, 1, DIMS(3), h, 0, hy), MX_OK);
  cr_expect_eq(hy[0], mx__f32_to_f16(-6.0f));
  cr_expect_eq(hy[1], mx__f32_to_f16(-2.0f));
  cr_expect_eq(hy[2], mx__f32_to_f16(1.0f));
  cr_assert_eq(run_cumprod(&plain, MX_INT32, 2, DIMS(2, 3), x, 2, y), MX_ERR_KERNEL);
}

Test(activation_kernel, reduce_log_sum_over_attribute_axes) {
  mx_reduce_params p;
  memset(&p, 0, sizeof p);
  p.n_axes = 1;
  p.axes[0] = 1;
  p.keepdims = 1;
  float x[6] = {1, 2, 3, 0, 0, 0}, y[2];
  mx_kernel_call *c = kc_new(1, 1, NULL);
  kc_set(c, 0, MX_FLOAT32, 2, DIMS(2, 3), x);
  kc_set(c, 1, MX_FLOAT32, 2, DIMS(2, 1), y);
  cr_assert_eq(kc_run_with("ReduceLogSum", c, &p), MX_OK);
  free(c);
  cr_expect_float_eq(y[0], logf(6.0f), 1e-6f);
  cr_expect(isinf(y[1]) && y[1] < 0, "log of an all-zero sum is -inf");
}
