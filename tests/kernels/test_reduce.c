/* Tests of the reduce CPU kernels (kernels/reduce*.c): every Reduce* op over inner,
 * outer, middle and non-adjacent axes, axes from the attribute or the input (negative, empty
 * with and without noop_with_empty_axes), empty sets, NaN/Inf, integer wrapping and
 * saturation, float16 rounding, long rows against a double reference, ArgMax/ArgMin ties and
 * NaN, and CumSum in all four exclusive/reverse modes. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/half.h"
#include "graph/ops/reduce_params.h"
#include "kernels/kernel.h"
#include "kernels/kernels_support.h"

/* Attribute-style params: axes given, keepdims as asked. */
static mx_reduce_params attr_axes(int32_t n, const int64_t *axes, int keepdims) {
  mx_reduce_params p;
  memset(&p, 0, sizeof p);
  p.n_axes = n;
  for (int32_t i = 0; i < n; i++) p.axes[i] = axes[i];
  p.keepdims = keepdims;
  return p;
}

/* Runs a float32 reduction with attribute axes; the output has dims `od`. */
static mx_status red_f32(const char *op, int32_t rank, const int64_t *dims, const float *x, int32_t n_axes,
                         const int64_t *axes, int32_t orank, const int64_t *od, float *out) {
  mx_reduce_params p = attr_axes(n_axes, axes, 1);
  mx_kernel_call *c = kc_new(1, 1, NULL);
  kc_set(c, 0, MX_FLOAT32, rank, dims, (void *)x);
  kc_set(c, 1, MX_FLOAT32, orank, od, out);
  mx_status st = kc_run_with(op, c, &p);
  free(c);
  return st;
}

/* x[i][j][k] = i*100 + j*10 + k over [2, 3, 4]. */
static float X[24];
static void fill_x(void) {
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++)
      for (int k = 0; k < 4; k++) X[(i * 3 + j) * 4 + k] = (float)(i * 100 + j * 10 + k);
}

TestSuite(reduce_kernel, .init = fill_x);

Test(reduce_kernel, sum_over_each_axis) {
  float o[12];
  cr_assert_eq(red_f32("ReduceSum", 3, DIMS(2, 3, 4), X, 1, DIMS(2), 3, DIMS(2, 3, 1), o), MX_OK);
  assert_f32_near(o, (float[]){6, 46, 86, 406, 446, 486}, 6, 0.0f);
  cr_assert_eq(red_f32("ReduceSum", 3, DIMS(2, 3, 4), X, 1, DIMS(1), 3, DIMS(2, 1, 4), o), MX_OK);
  assert_f32_near(o, (float[]){30, 33, 36, 39, 330, 333, 336, 339}, 8, 0.0f);
  cr_assert_eq(red_f32("ReduceSum", 3, DIMS(2, 3, 4), X, 1, DIMS(-3), 3, DIMS(1, 3, 4), o), MX_OK);
  assert_f32_near(o, (float[]){100, 102, 104, 106, 120, 122, 124, 126, 140, 142, 144, 146}, 12, 0.0f);
}

Test(reduce_kernel, non_adjacent_axes_and_all) {
  float o[3], all;
  cr_assert_eq(red_f32("ReduceSum", 3, DIMS(2, 3, 4), X, 2, DIMS(0, 2), 3, DIMS(1, 3, 1), o), MX_OK);
  assert_f32_near(o, (float[]){412, 492, 572}, 3, 0.0f);
  cr_assert_eq(red_f32("ReduceMean", 3, DIMS(2, 3, 4), X, 0, NULL, 0, NULL, &all), MX_OK);
  assert_f32_near(&all, (float[]){61.5f}, 1, 1e-6f);
  cr_assert_eq(red_f32("ReduceMax", 3, DIMS(2, 3, 4), X, 2, DIMS(-1, 0), 1, DIMS(3), o), MX_OK);
  assert_f32_near(o, (float[]){103, 113, 123}, 3, 0.0f);
  cr_assert_eq(red_f32("ReduceMin", 3, DIMS(2, 3, 4), X, 2, DIMS(1, 2), 1, DIMS(2), o), MX_OK);
  assert_f32_near(o, (float[]){0, 100}, 2, 0.0f);
}

Test(reduce_kernel, the_other_reductions) {
  float x[6] = {1, -2, 3, -4, 0.5f, 2}, o[3];
  cr_assert_eq(red_f32("ReduceProd", 2, DIMS(2, 3), x, 1, DIMS(1), 2, DIMS(2, 1), o), MX_OK);
  assert_f32_near(o, (float[]){-6, -4}, 2, 0.0f);
  cr_assert_eq(red_f32("ReduceSumSquare", 2, DIMS(2, 3), x, 1, DIMS(1), 2, DIMS(2, 1), o), MX_OK);
  assert_f32_near(o, (float[]){14, 20.25f}, 2, 0.0f);
  cr_assert_eq(red_f32("ReduceL1", 2, DIMS(2, 3), x, 1, DIMS(1), 2, DIMS(2, 1), o), MX_OK);
  assert_f32_near(o, (float[]){6, 6.5f}, 2, 0.0f);
  cr_assert_eq(red_f32("ReduceL2", 2, DIMS(2, 3), x, 1, DIMS(1), 2, DIMS(2, 1), o), MX_OK);
  assert_f32_near(o, (float[]){sqrtf(14), 4.5f}, 2, 1e-6f);
  cr_assert_eq(red_f32("ReduceLogSumExp", 2, DIMS(2, 3), x, 1, DIMS(0), 2, DIMS(1, 3), o), MX_OK);
  assert_f32_near(
      o, (float[]){logf(expf(1) + expf(-4)), logf(expf(-2) + expf(0.5f)), logf(expf(3) + expf(2))}, 3, 1e-6f);
}

Test(reduce_kernel, log_sum_exp_is_stable) {
  float x[6] = {1000, 1000, -1000, -1000, -INFINITY, -INFINITY}, o[3];
  cr_assert_eq(red_f32("ReduceLogSumExp", 2, DIMS(3, 2), x, 1, DIMS(1), 2, DIMS(3, 1), o), MX_OK);
  assert_f32_near(o, (float[]){1000 + logf(2), -1000 + logf(2), -INFINITY}, 3, 1e-6f);
}

Test(reduce_kernel, nan_propagates) {
  float x[4] = {1, NAN, 3, 4}, o[2];
  cr_assert_eq(red_f32("ReduceMax", 2, DIMS(2, 2), x, 1, DIMS(1), 2, DIMS(2, 1), o), MX_OK);
  assert_f32_near(o, (float[]){NAN, 4}, 2, 0.0f);
  cr_assert_eq(red_f32("ReduceMin", 2, DIMS(2, 2), x, 1, DIMS(0), 2, DIMS(1, 2), o), MX_OK);
  assert_f32_near(o, (float[]){1, NAN}, 2, 0.0f);
  cr_assert_eq(red_f32("ReduceSum", 2, DIMS(2, 2), x, 1, DIMS(1), 2, DIMS(2, 1), o), MX_OK);
  assert_f32_near(o, (float[]){NAN, 7}, 2, 0.0f);
}

Test(reduce_kernel, empty_sets_give_identities) {
  float o[2];
  const char *ops[] = {"ReduceSum",  "ReduceProd",      "ReduceMax", "ReduceMin",
                       "ReduceMean", "ReduceLogSumExp", "ReduceL2"};
  float want[] = {0, 1, -INFINITY, INFINITY, NAN, -INFINITY, 0};
  for (int i = 0; i < 7; i++) {
    cr_assert_eq(red_f32(ops[i], 2, DIMS(2, 0), NULL, 1, DIMS(1), 2, DIMS(2, 1), o), MX_OK, "%s", ops[i]);
    assert_f32_near(o, (float[]){want[i], want[i]}, 2, 0.0f);
  }
  /* A zero-size kept dim: nothing to write. */
  o[0] = 42;
  cr_assert_eq(red_f32("ReduceSum", 2, DIMS(0, 3), NULL, 1, DIMS(1), 2, DIMS(0, 1), o), MX_OK);
  cr_assert_eq(o[0], 42);
}

Test(reduce_kernel, axes_from_input_noop_and_all) {
  mx_reduce_params p;
  memset(&p, 0, sizeof p);
  p.axes_from_input = 1;
  p.keepdims = 0;
  int64_t axes[1] = {-1};
  float o[6];
  mx_kernel_call *c = kc_new(2, 1, NULL);
  kc_set(c, 0, MX_FLOAT32, 3, DIMS(2, 3, 4), X);
  kc_set(c, 1, MX_INT64, 1, DIMS(1), axes);
  kc_set(c, 2, MX_FLOAT32, 2, DIMS(2, 3), o);
  cr_assert_eq(kc_run_with("ReduceMean", c, &p), MX_OK);
  assert_f32_near(o, (float[]){1.5f, 11.5f, 21.5f, 101.5f, 111.5f, 121.5f}, 6, 1e-6f);
  /* empty axes: reduce everything, or copy with noop_with_empty_axes */
  float all, copy[24];
  kc_set(c, 1, MX_INT64, 1, DIMS(0), NULL);
  kc_set(c, 2, MX_FLOAT32, 0, NULL, &all);
  cr_assert_eq(kc_run_with("ReduceSum", c, &p), MX_OK);
  cr_assert_eq(all, 1476.0f);
  p.noop_with_empty_axes = 1;
  kc_set(c, 2, MX_FLOAT32, 3, DIMS(2, 3, 4), copy);
  cr_assert_eq(kc_run_with("ReduceSum", c, &p), MX_OK);
  cr_assert_arr_eq(copy, X, sizeof copy);
  /* omitted axes input behaves like empty axes */
  c->t[1].dtype = MX_DTYPE_UNDEFINED;
  memset(copy, 0, sizeof copy);
  cr_assert_eq(kc_run_with("ReduceMax", c, &p), MX_OK);
  cr_assert_arr_eq(copy, X, sizeof copy);
  free(c);
}

Test(reduce_kernel, bad_axes_fail) {
  mx_reduce_params p = attr_axes(2, DIMS(1, -1), 1);
  float o[2];
  mx_kernel_call *c = kc_new(1, 1, NULL);
  kc_set(c, 0, MX_FLOAT32, 2, DIMS(2, 2), X);
  kc_set(c, 1, MX_FLOAT32, 2, DIMS(2, 1), o);
  cr_assert_eq(kc_run_with("ReduceSum", c, &p), MX_ERR_KERNEL);
  cr_assert_not_null(c->why);
  p = attr_axes(1, DIMS(2), 1);
  cr_assert_eq(kc_run_with("ReduceSum", c, &p), MX_ERR_KERNEL);
  free(c);
}

Test(reduce_kernel, long_rows_match_double) {
  enum { N = 100003 };
  float *x = malloc(N * sizeof *x);
  double ref = 0, ref_sq = 0;
  for (int i = 0; i < N; i++) {
    x[i] = (float)((i * 7919) % 1000) * 0.001f - 0.3f;
    ref += x[i];
    ref_sq += (double)x[i] * x[i];
  }
  float o;
  cr_assert_eq(red_f32("ReduceSum", 1, DIMS(N), x, 1, DIMS(0), 1, DIMS(1), &o), MX_OK);
  cr_assert(fabs(o - ref) <= 1e-4 * fabs(ref) + 1e-2, "%g vs %g", (double)o, ref);
  cr_assert_eq(red_f32("ReduceSumSquare", 1, DIMS(N), x, 1, DIMS(0), 1, DIMS(1), &o), MX_OK);
  cr_assert(fabs(o - ref_sq) <= 1e-4 * ref_sq, "%g vs %g", (double)o, ref_sq);
  float mx = -INFINITY, mn = INFINITY;
  for (int i = 0; i < N; i++) mx = x[i] > mx ? x[i] : mx, mn = x[i] < mn ? x[i] : mn;
  cr_assert_eq(red_f32("ReduceMax", 1, DIMS(N), x, 1, DIMS(0), 1, DIMS(1), &o), MX_OK);
  cr_assert_eq(o, mx);
  cr_assert_eq(red_f32("ReduceMin", 1, DIMS(N), x, 1, DIMS(0), 1, DIMS(1), &o), MX_OK);
  cr_assert_eq(o, mn);
  float keep = x[5000];
  x[5000] = NAN;
  cr_assert_eq(red_f32("ReduceMax", 1, DIMS(N), x, 1, DIMS(0), 1, DIMS(1), &o), MX_OK);
  cr_assert(isnan(o));
  x[5000] = keep;
  keep = x[N - 1];
  x[N - 1] = NAN; /* in the tail after the 64-lane blocks */
  cr_assert_eq(red_f32("ReduceMin", 1, DIMS(N), x, 1, DIMS(0), 1, DIMS(1), &o), MX_OK);
  cr_assert(isnan(o));
  x[N - 1] = keep;
  /* the same data as 1000 outer rows reduced over axis 0 (kept inner rows) */
  float *cols = malloc(100 * sizeof *cols);
  cr_assert_eq(red_f32("ReduceSum", 2, DIMS(1000, 100), x, 1, DIMS(0), 2, DIMS(1, 100), cols), MX_OK);
  for (int j = 0; j < 100; j++) {
    double r = 0;
    for (int i = 0; i < 1000; i++) r += x[i * 100 + j];
    cr_assert(fabs(cols[j] - r) <= 1e-3, "column %d: %g vs %g", j, (double)cols[j], r);
  }
  free(cols);
  free(x);
}

Test(reduce_kernel, float16_mean_rounds_once) {
  uint16_t x[4], o;
  float v[4] = {1.0f, 0x1p-11f, 0x1p-11f, 0.0f};
  for (int i = 0; i < 4; i++) x[i] = mx__f32_to_f16(v[i]);
  mx_reduce_params p = attr_axes(0, NULL, 0);
  mx_kernel_call *c = kc_new(1, 1, NULL);
  kc_set(c, 0, MX_FLOAT16, 1, DIMS(4), x);
  kc_set(c, 1, MX_FLOAT16, 0, NULL, &o);
  cr_assert_eq(kc_run_with("ReduceSum", c, &p), MX_OK);
  cr_assert_eq(o, 0x3c01, "got 0x%04x", o);
  cr_assert_eq(kc_run_with("ReduceMean", c, &p), MX_OK);
  cr_assert_eq(o, mx__f32_to_f16((1.0f + 0x1p-10f) / 4), "got 0x%04x", o);
  free(c);
}

Test(reduce_kernel, integers_wrap_saturate_and_truncate) {
  int8_t x[4] = {100, 100, -7, 2}, o[2];
  mx_reduce_params p = attr_axes(1, DIMS(1), 1);
  mx_kernel_call *c = kc_new(1, 1, NULL);
  kc_set(c, 0, MX_INT8, 2, DIMS(2, 2), x);
  kc_set(c, 1, MX_INT8, 2, DIMS(2, 1), o);
  cr_assert_eq(kc_run_with("ReduceSum", c, &p), MX_OK);
  cr_assert_eq(o[0], -56);
  cr_assert_eq(o[1], -5);
  cr_assert_eq(kc_run_with("ReduceMean", c, &p), MX_OK);
  cr_assert_eq(o[0], 100); /* the mean of the exact sum, like numpy */
  cr_assert_eq(o[1], -2);
  cr_assert_eq(kc_run_with("ReduceL1", c, &p), MX_OK);
  cr_assert_eq(o[1], 9);
  cr_assert_eq(kc_run_with("ReduceL2", c, &p), MX_OK);
  cr_assert_eq(o[0], 127); /* sqrt(20000) = 141.4, saturated */
  cr_assert_eq(o[1], 7);
  free(c);
  int32_t e[1], m;
  p = attr_axes(1, DIMS(0), 0);
  c = kc_new(1, 1, NULL);
  kc_set(c, 0, MX_INT32, 1, DIMS(0), e);
  kc_set(c, 1, MX_INT32, 0, NULL, &m);
  cr_assert_eq(kc_run_with("ReduceMax", c, &p), MX_OK);
  cr_assert_eq(m, INT32_MIN);
  cr_assert_eq(kc_run_with("ReduceMin", c, &p), MX_OK);
  cr_assert_eq(m, INT32_MAX);
  cr_assert_eq(kc_run_with("ReduceProd", c, &p), MX_OK);
  cr_assert_eq(m, 1);
  free(c);
  int64_t shape[3] = {2, 3, 5}, prod;
  c = kc_new(1, 1, NULL);
  kc_set(c, 0, MX_INT64, 1, DIMS(3), shape);
  kc_set(c, 1, MX_INT64, 0, NULL, &prod);
  cr_assert_eq(kc_run_with("ReduceProd", c, &p), MX_OK);
  cr_assert_eq(prod, 30);
  free(c);
}

Test(reduce_kernel, bool_max_min) {
  uint8_t x[6] = {0, 0, 1, 1, 1, 1}, o[3];
  mx_reduce_params p = attr_axes(1, DIMS(1), 0);
  mx_kernel_call *c = kc_new(1, 1, NULL);
  kc_set(c, 0, MX_BOOL, 2, DIMS(3, 2), x);
  kc_set(c, 1, MX_BOOL, 1, DIMS(3), o);
  cr_assert_eq(kc_run_with("ReduceMax", c, &p), MX_OK);
  cr_assert_arr_eq(o, ((uint8_t[]){0, 1, 1}), 3);
  x[3] = 0;
  cr_assert_eq(kc_run_with("ReduceMin", c, &p), MX_OK);
  cr_assert_arr_eq(o, ((uint8_t[]){0, 0, 1}), 3);
  cr_assert_null(mx__kernel_find(NULL, "ReduceSum", c));
  free(c);
}

/* --- ArgMax / ArgMin ------------------------------------------------------------------------ */

static mx_status arg(const char *op, mx_dtype dt, int32_t rank, const int64_t *dims, const void *x,
                     int32_t axis, int last, int32_t orank, const int64_t *od, int64_t *out) {
  mx_argreduce_params p = {axis, 1, last, 0};
  mx_kernel_call *c = kc_new(1, 1, NULL);
  kc_set(c, 0, dt, rank, dims, (void *)x);
  kc_set(c, 1, MX_INT64, orank, od, out);
  mx_status st = kc_run_with(op, c, &p);
  free(c);
  return st;
}

Test(reduce_kernel, argmax_argmin_ties) {
  float x[8] = {2, 5, 5, 1, 7, 7, 0, 7};
  int64_t o[4];
  cr_assert_eq(arg("ArgMax", MX_FLOAT32, 2, DIMS(2, 4), x, 1, 0, 2, DIMS(2, 1), o), MX_OK);
  cr_assert_arr_eq(o, ((int64_t[]){1, 0}), 2 * sizeof(int64_t));
  cr_assert_eq(arg("ArgMax", MX_FLOAT32, 2, DIMS(2, 4), x, -1, 1, 2, DIMS(2, 1), o), MX_OK);
  cr_assert_arr_eq(o, ((int64_t[]){2, 3}), 2 * sizeof(int64_t));
  cr_assert_eq(arg("ArgMin", MX_FLOAT32, 2, DIMS(2, 4), x, 0, 0, 2, DIMS(1, 4), o), MX_OK);
  cr_assert_arr_eq(o, ((int64_t[]){0, 0, 1, 0}), 4 * sizeof(int64_t));
  cr_assert_eq(arg("ArgMin", MX_FLOAT32, 2, DIMS(2, 4), x, 0, 1, 2, DIMS(1, 4), o), MX_OK);
  cr_assert_arr_eq(o, ((int64_t[]){0, 0, 1, 0}), 4 * sizeof(int64_t));
}

Test(reduce_kernel, argmax_nan_wins) {
  float x[5] = {1, NAN, 9, NAN, 3};
  int64_t o;
  cr_assert_eq(arg("ArgMax", MX_FLOAT32, 1, DIMS(5), x, 0, 0, 1, DIMS(1), &o), MX_OK);
  cr_assert_eq(o, 1);
  cr_assert_eq(arg("ArgMax", MX_FLOAT32, 1, DIMS(5), x, 0, 1, 1, DIMS(1), &o), MX_OK);
  cr_assert_eq(o, 3);
  cr_assert_eq(arg("ArgMin", MX_FLOAT32, 1, DIMS(5), x, 0, 0, 1, DIMS(1), &o), MX_OK);
  cr_assert_eq(o, 1);
}

Test(reduce_kernel, argmax_other_dtypes) {
  int32_t xi[6] = {3, -1, 9, 9, 0, -5};
  int64_t o[3];
  cr_assert_eq(arg("ArgMax", MX_INT32, 2, DIMS(3, 2), xi, 1, 0, 2, DIMS(3, 1), o), MX_OK);
  cr_assert_arr_eq(o, ((int64_t[]){0, 0, 0}), 3 * sizeof(int64_t));
  cr_assert_eq(arg("ArgMax", MX_INT32, 2, DIMS(3, 2), xi, 1, 1, 2, DIMS(3, 1), o), MX_OK);
  cr_assert_arr_eq(o, ((int64_t[]){0, 1, 0}), 3 * sizeof(int64_t));
  uint16_t h[3] = {mx__f32_to_f16(-1), mx__f32_to_f16(4), mx__f32_to_f16(2)};
  cr_assert_eq(arg("ArgMax", MX_FLOAT16, 1, DIMS(3), h, 0, 0, 0, NULL, o), MX_OK);
  cr_assert_eq(o[0], 1);
  cr_assert_eq(arg("ArgMin", MX_FLOAT16, 1, DIMS(3), h, 0, 0, 0, NULL, o), MX_OK);
  cr_assert_eq(o[0], 0);
}

Test(reduce_kernel, argmax_empty_axis_fails) {
  int64_t o[2];
  cr_assert_eq(arg("ArgMax", MX_FLOAT32, 2, DIMS(2, 0), NULL, 1, 0, 2, DIMS(2, 1), o), MX_ERR_KERNEL);
}

/* --- CumSum --------------------------------------------------------------------------------- */

static mx_status cumsum(mx_dtype dt, int32_t rank, const int64_t *dims, const void *x, int64_t axis, int excl,
                        int rev, void *out) {
  mx_cumsum_params p = {excl, rev};
  int32_t ax = (int32_t)axis;
  mx_kernel_call *c = kc_new(2, 1, NULL);
  kc_set(c, 0, dt, rank, dims, (void *)x);
  kc_set(c, 1, MX_INT32, 0, NULL, &ax);
  kc_set(c, 2, dt, rank, dims, out);
  mx_status st = kc_run_with("CumSum", c, &p);
  free(c);
  return st;
}

Test(reduce_kernel, cumsum_modes) {
  double x[5] = {1, 2, 3, 4, 5}, o[5];
  cr_assert_eq(cumsum(MX_FLOAT64, 1, DIMS(5), x, 0, 0, 0, o), MX_OK);
  cr_assert_arr_eq(o, ((double[]){1, 3, 6, 10, 15}), sizeof o);
  cr_assert_eq(cumsum(MX_FLOAT64, 1, DIMS(5), x, 0, 1, 0, o), MX_OK);
  cr_assert_arr_eq(o, ((double[]){0, 1, 3, 6, 10}), sizeof o);
  cr_assert_eq(cumsum(MX_FLOAT64, 1, DIMS(5), x, 0, 0, 1, o), MX_OK);
  cr_assert_arr_eq(o, ((double[]){15, 14, 12, 9, 5}), sizeof o);
  cr_assert_eq(cumsum(MX_FLOAT64, 1, DIMS(5), x, -1, 1, 1, o), MX_OK);
  cr_assert_arr_eq(o, ((double[]){14, 12, 9, 5, 0}), sizeof o);
}

Test(reduce_kernel, cumsum_2d_axes_and_ints) {
  int32_t x[6] = {1, 2, 3, 4, 5, 6}, o[6];
  cr_assert_eq(cumsum(MX_INT32, 2, DIMS(2, 3), x, 0, 0, 0, o), MX_OK);
  cr_assert_arr_eq(o, ((int32_t[]){1, 2, 3, 5, 7, 9}), sizeof o);
  cr_assert_eq(cumsum(MX_INT32, 2, DIMS(2, 3), x, 1, 0, 0, o), MX_OK);
  cr_assert_arr_eq(o, ((int32_t[]){1, 3, 6, 4, 9, 15}), sizeof o);
  cr_assert_eq(cumsum(MX_INT32, 2, DIMS(2, 3), x, 1, 1, 1, o), MX_OK);
  cr_assert_arr_eq(o, ((int32_t[]){5, 3, 0, 11, 6, 0}), sizeof o);
  int32_t big[2] = {INT32_MAX, 1}, bo[2];
  cr_assert_eq(cumsum(MX_INT32, 1, DIMS(2), big, 0, 0, 0, bo), MX_OK);
  cr_assert_eq(bo[1], INT32_MIN);
}

Test(reduce_kernel, cumsum_float16_keeps_float32_sums) {
  /* Adding 2^-11 to 1 twice: rounding each running sum to float16 would stay at 1. */
  uint16_t x[3] = {mx__f32_to_f16(1.0f), mx__f32_to_f16(0x1p-11f), mx__f32_to_f16(0x1p-11f)}, o[3];
  cr_assert_eq(cumsum(MX_FLOAT16, 1, DIMS(3), x, 0, 0, 0, o), MX_OK);
  cr_assert_eq(o[0], 0x3c00);
  cr_assert_eq(o[1], 0x3c00); /* 1 + 2^-11 is a tie: even */
  cr_assert_eq(o[2], 0x3c01);
}

Test(reduce_kernel, cumsum_bad_axis) {
  float x[2] = {1, 2}, o[2];
  cr_assert_eq(cumsum(MX_FLOAT32, 1, DIMS(2), x, 1, 0, 0, o), MX_ERR_KERNEL);
}
