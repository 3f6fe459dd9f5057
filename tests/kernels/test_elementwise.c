/* Tests of the elementwise CPU kernels (kernels/elementwise*.c): broadcasting edge cases
 * (scalars, rank 0, zero-size dims, bias rows, both-sided broadcast, legacy axis), integer
 * wrapping and division semantics, Mod signs, mixed-type Pow, NaN/Inf propagation, float16 and
 * bfloat16 rounding (once, not per step), Cast rules (saturation, NaN, double rounding), Where,
 * Clip, Gelu and in-place execution. Calls are built directly as mx_kernel_call blocks. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/half.h"
#include "graph/ops/elementwise_params.h"
#include "kernels/kernel.h"
#include "kernels/kernels_support.h"

/* --- call building ---------------------------------------------------------------------------- */

/* Binary op on float32 tensors. */
static mx_status bin_f32(const char *op, int32_t ra, const int64_t *da, const float *a, int32_t rb,
                         const int64_t *db, const float *b, int32_t ro, const int64_t *dout, float *out) {
  mx_kernel_call *c = kc_new(2, 1, NULL);
  kc_set(c, 0, MX_FLOAT32, ra, da, (void *)a);
  kc_set(c, 1, MX_FLOAT32, rb, db, (void *)b);
  kc_set(c, 2, MX_FLOAT32, ro, dout, out);
  mx_status st = kc_run_with(op, c, NULL);
  free(c);
  return st;
}

/* --- broadcasting ----------------------------------------------------------------------------- */

Test(ew_kernel, add_same_shape_long) {
  enum { N = 10007 };
  float *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b), *o = malloc(N * sizeof *o);
  for (int i = 0; i < N; i++) a[i] = (float)i * 0.5f, b[i] = (float)(N - i);
  cr_assert_eq(bin_f32("Add", 1, DIMS(N), a, 1, DIMS(N), b, 1, DIMS(N), o), MX_OK);
  for (int i = 0; i < N; i++) cr_assert_eq(o[i], a[i] + b[i], "element %d", i);
  cr_assert_eq(bin_f32("Mul", 2, DIMS(1, N), a, 1, DIMS(N), b, 2, DIMS(1, N), o), MX_OK);
  for (int i = 0; i < N; i++) cr_assert_eq(o[i], a[i] * b[i], "element %d", i);
  free(a);
  free(b);
  free(o);
}

Test(ew_kernel, bias_add_rows) {
  float x[12], b[4] = {10, 20, 30, 40}, o[12];
  for (int i = 0; i < 12; i++) x[i] = (float)i;
  cr_assert_eq(bin_f32("Add", 2, DIMS(3, 4), x, 1, DIMS(4), b, 2, DIMS(3, 4), o), MX_OK);
  for (int i = 0; i < 12; i++) cr_assert_eq(o[i], x[i] + b[i % 4]);
  /* broadcast on the left operand */
  cr_assert_eq(bin_f32("Sub", 1, DIMS(4), b, 2, DIMS(3, 4), x, 2, DIMS(3, 4), o), MX_OK);
  for (int i = 0; i < 12; i++) cr_assert_eq(o[i], b[i % 4] - x[i]);
}

Test(ew_kernel, outer_broadcast_both_sides) {
  float col[3] = {1, 2, 3}, row[4] = {10, 100, 1000, 10000}, o[12];
  cr_assert_eq(bin_f32("Mul", 2, DIMS(3, 1), col, 2, DIMS(1, 4), row, 2, DIMS(3, 4), o), MX_OK);
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 4; j++) cr_assert_eq(o[i * 4 + j], col[i] * row[j]);
}

Test(ew_kernel, middle_axis_broadcast) {
  float a[2 * 3 * 4], b[2 * 4], o[24];
  for (int i = 0; i < 24; i++) a[i] = (float)i;
  for (int i = 0; i < 8; i++) b[i] = (float)(i * 100);
  cr_assert_eq(bin_f32("Add", 3, DIMS(2, 3, 4), a, 3, DIMS(2, 1, 4), b, 3, DIMS(2, 3, 4), o), MX_OK);
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++)
      for (int k = 0; k < 4; k++) cr_assert_eq(o[(i * 3 + j) * 4 + k], a[(i * 3 + j) * 4 + k] + b[i * 4 + k]);
}

Test(ew_kernel, rank0_scalars) {
  float s = 2.0f, t = 5.0f, v[3] = {1, 2, 3}, o[3], so;
  cr_assert_eq(bin_f32("Div", 0, NULL, &s, 1, DIMS(3), v, 1, DIMS(3), o), MX_OK);
  assert_f32_near(o, (float[]){2.0f, 1.0f, 2.0f / 3.0f}, 3, 0.0f);
  cr_assert_eq(bin_f32("Sub", 0, NULL, &s, 0, NULL, &t, 0, NULL, &so), MX_OK);
  cr_assert_eq(so, -3.0f);
}

Test(ew_kernel, zero_size_writes_nothing) {
  float b[3] = {1, 2, 3}, o[1] = {42.0f};
  cr_assert_eq(bin_f32("Add", 2, DIMS(0, 3), NULL, 1, DIMS(3), b, 2, DIMS(0, 3), o), MX_OK);
  cr_assert_eq(o[0], 42.0f);
}

Test(ew_kernel, shapes_that_do_not_broadcast_fail) {
  float a[6] = {0}, b[4] = {0}, o[6];
  mx_kernel_call *c = kc_new(2, 1, NULL);
  kc_set(c, 0, MX_FLOAT32, 2, DIMS(2, 3), a);
  kc_set(c, 1, MX_FLOAT32, 1, DIMS(4), b);
  kc_set(c, 2, MX_FLOAT32, 2, DIMS(2, 3), o);
  cr_assert_eq(kc_run_with("Add", c, NULL), MX_ERR_KERNEL);
  cr_assert_not_null(c->why);
  free(c);
}

Test(ew_kernel, legacy_axis_broadcast) {
  float a[2 * 3 * 2], b[3] = {100, 200, 300}, o[12];
  for (int i = 0; i < 12; i++) a[i] = (float)i;
  mx_binary_params p = {1, 1};
  mx_kernel_call *c = kc_new(2, 1, NULL);
  kc_set(c, 0, MX_FLOAT32, 3, DIMS(2, 3, 2), a);
  kc_set(c, 1, MX_FLOAT32, 1, DIMS(3), b);
  kc_set(c, 2, MX_FLOAT32, 3, DIMS(2, 3, 2), o);
  cr_assert_eq(kc_run_with("Add", c, &p), MX_OK);
  for (int i = 0; i < 12; i++) cr_assert_eq(o[i], a[i] + b[(i / 2) % 3], "element %d", i);
  free(c);
}

Test(ew_kernel, in_place_over_an_input) {
  float a[5] = {1, 2, 3, 4, 5}, b[5] = {5, 4, 3, 2, 1};
  cr_assert_eq(bin_f32("Add", 1, DIMS(5), a, 1, DIMS(5), b, 1, DIMS(5), a), MX_OK);
  for (int i = 0; i < 5; i++) cr_assert_eq(a[i], 6.0f);
}

/* --- integer semantics ------------------------------------------------------------------------ */

/* Runs a same-dtype binary op over n-element 1-D buffers. */
static mx_status bin_n(const char *op, mx_dtype dt, mx_dtype out_dt, int64_t n, const void *a, const void *b,
                       void *o, const void *params) {
  mx_kernel_call *c = kc_new(2, 1, NULL);
  kc_set(c, 0, dt, 1, &n, (void *)a);
  kc_set(c, 1, dt, 1, &n, (void *)b);
  kc_set(c, 2, out_dt, 1, &n, o);
  mx_status st = kc_run_with(op, c, params);
  free(c);
  return st;
}

Test(ew_kernel, integer_arithmetic_wraps) {
  int8_t a[3] = {100, -100, 127}, b[3] = {100, -100, 1}, o[3];
  cr_assert_eq(bin_n("Add", MX_INT8, MX_INT8, 3, a, b, o, NULL), MX_OK);
  cr_assert_eq(o[0], -56);
  cr_assert_eq(o[1], 56);
  cr_assert_eq(o[2], -128);
  uint8_t ua[2] = {200, 3}, ub[2] = {2, 250}, uo[2];
  cr_assert_eq(bin_n("Mul", MX_UINT8, MX_UINT8, 2, ua, ub, uo, NULL), MX_OK);
  cr_assert_eq(uo[0], 144);
  cr_assert_eq(uo[1], 238);
  cr_assert_eq(bin_n("Sub", MX_UINT8, MX_UINT8, 2, ub, ua, uo, NULL), MX_OK);
  cr_assert_eq(uo[0], 58);
  cr_assert_eq(uo[1], 247);
  int64_t la[1] = {INT64_MAX}, lb[1] = {1}, lo[1];
  cr_assert_eq(bin_n("Add", MX_INT64, MX_INT64, 1, la, lb, lo, NULL), MX_OK);
  cr_assert_eq(lo[0], INT64_MIN);
  int32_t ia[1] = {65536}, io[1];
  cr_assert_eq(bin_n("Mul", MX_INT32, MX_INT32, 1, ia, ia, io, NULL), MX_OK);
  cr_assert_eq(io[0], 0);
}

Test(ew_kernel, integer_division_truncates) {
  int32_t a[6] = {-3, 3, -3, 3, INT32_MIN, 7}, b[6] = {2, 2, -2, -2, -1, 7}, o[6];
  cr_assert_eq(bin_n("Div", MX_INT32, MX_INT32, 6, a, b, o, NULL), MX_OK);
  int32_t want[6] = {-1, 1, 1, -1, INT32_MIN, 1};
  for (int i = 0; i < 6; i++) cr_assert_eq(o[i], want[i], "element %d: %d", i, o[i]);
  int8_t ca[2] = {-7, 9}, cb[2] = {2, 4}, co[2];
  cr_assert_eq(bin_n("Div", MX_INT8, MX_INT8, 2, ca, cb, co, NULL), MX_OK);
  cr_assert_eq(co[0], -3);
  cr_assert_eq(co[1], 2);
}

Test(ew_kernel, integer_division_by_zero_fails) {
  int64_t a[2] = {1, 2}, b[2] = {1, 0}, o[2];
  mx_kernel_call *c = kc_new(2, 1, NULL);
  kc_set(c, 0, MX_INT64, 1, DIMS(2), a);
  kc_set(c, 1, MX_INT64, 1, DIMS(2), b);
  kc_set(c, 2, MX_INT64, 1, DIMS(2), o);
  cr_assert_eq(kc_run_with("Div", c, NULL), MX_ERR_KERNEL);
  cr_assert_not_null(c->why);
  cr_assert(strstr(c->why, "zero"));
  free(c);
}

Test(ew_kernel, float_division_by_zero_is_inf_nan) {
  float a[3] = {1, -1, 0}, b[3] = {0, 0, 0}, o[3];
  cr_assert_eq(bin_n("Div", MX_FLOAT32, MX_FLOAT32, 3, a, b, o, NULL), MX_OK);
  assert_f32_near(o, (float[]){INFINITY, -INFINITY, NAN}, 3, 0.0f);
}

Test(ew_kernel, mod_signs) {
  int32_t a[6] = {-4, 7, 5, 4, -7, 8}, b[6] = {2, -3, 8, -2, 3, 5}, o[6];
  mx_mod_params pm = {0, 0}, pf = {1, 0};
  cr_assert_eq(bin_n("Mod", MX_INT32, MX_INT32, 6, a, b, o, &pm), MX_OK);
  int32_t want[6] = {0, -2, 5, 0, 2, 3};
  for (int i = 0; i < 6; i++) cr_assert_eq(o[i], want[i], "mod element %d: %d", i, o[i]);
  cr_assert_eq(bin_n("Mod", MX_INT32, MX_INT32, 6, a, b, o, &pf), MX_OK);
  int32_t wantf[6] = {0, 1, 5, 0, -1, 3};
  for (int i = 0; i < 6; i++) cr_assert_eq(o[i], wantf[i], "fmod element %d: %d", i, o[i]);
  float fa[3] = {-4.3f, 7.2f, 5.0f}, fb[3] = {2.1f, -3.4f, 8.0f}, fo[3];
  cr_assert_eq(bin_n("Mod", MX_FLOAT32, MX_FLOAT32, 3, fa, fb, fo, &pf), MX_OK);
  assert_f32_near(fo, (float[]){fmodf(-4.3f, 2.1f), fmodf(7.2f, -3.4f), 5.0f}, 3, 0.0f);
  cr_assert_eq(bin_n("Mod", MX_FLOAT32, MX_FLOAT32, 3, fa, fb, fo, &pm), MX_OK);
  assert_f32_near(fo, (float[]){fmodf(-4.3f, 2.1f) + 2.1f, fmodf(7.2f, -3.4f) - 3.4f, 5.0f}, 3, 1e-6f);
}

Test(ew_kernel, pow_mixed_types) {
  int32_t base[3] = {1, 2, 3};
  float e[3] = {4, 5, 6};
  int32_t o[3];
  mx_kernel_call *c = kc_new(2, 1, NULL);
  kc_set(c, 0, MX_INT32, 1, DIMS(3), base);
  kc_set(c, 1, MX_FLOAT32, 1, DIMS(3), e);
  kc_set(c, 2, MX_INT32, 1, DIMS(3), o);
  cr_assert_eq(kc_run_with("Pow", c, NULL), MX_OK);
  cr_assert_eq(o[0], 1);
  cr_assert_eq(o[1], 32);
  cr_assert_eq(o[2], 729);
  float fb[3] = {2.0f, -2.0f, 0.5f}, fo[3];
  int64_t ie[3] = {3, 3, -2};
  kc_set(c, 0, MX_FLOAT32, 1, DIMS(3), fb);
  kc_set(c, 1, MX_INT64, 1, DIMS(3), ie);
  kc_set(c, 2, MX_FLOAT32, 1, DIMS(3), fo);
  cr_assert_eq(kc_run_with("Pow", c, NULL), MX_OK);
  assert_f32_near(fo, (float[]){8.0f, -8.0f, 4.0f}, 3, 0.0f);
  int64_t lb[3] = {3, -2, 10}, le[3] = {4, 3, 18}, lo[3];
  kc_set(c, 0, MX_INT64, 1, DIMS(3), lb);
  kc_set(c, 1, MX_INT64, 1, DIMS(3), le);
  kc_set(c, 2, MX_INT64, 1, DIMS(3), lo);
  cr_assert_eq(kc_run_with("Pow", c, NULL), MX_OK);
  cr_assert_eq(lo[0], 81);
  cr_assert_eq(lo[1], -8);
  cr_assert_eq(lo[2], 1000000000000000000LL);
  free(c);
}

/* --- comparisons and logic -------------------------------------------------------------------- */

Test(ew_kernel, comparisons_with_nan) {
  float a[4] = {1, NAN, 2, NAN}, b[4] = {2, 1, 2, NAN};
  uint8_t o[4];
  cr_assert_eq(bin_n("Less", MX_FLOAT32, MX_BOOL, 4, a, b, o, NULL), MX_OK);
  cr_assert_arr_eq(o, ((uint8_t[]){1, 0, 0, 0}), 4);
  cr_assert_eq(bin_n("Equal", MX_FLOAT32, MX_BOOL, 4, a, b, o, NULL), MX_OK);
  cr_assert_arr_eq(o, ((uint8_t[]){0, 0, 1, 0}), 4);
  cr_assert_eq(bin_n("GreaterOrEqual", MX_FLOAT32, MX_BOOL, 4, a, b, o, NULL), MX_OK);
  cr_assert_arr_eq(o, ((uint8_t[]){0, 0, 1, 0}), 4);
  cr_assert_eq(bin_n("LessOrEqual", MX_FLOAT32, MX_BOOL, 4, a, b, o, NULL), MX_OK);
  cr_assert_arr_eq(o, ((uint8_t[]){1, 0, 1, 0}), 4);
  cr_assert_eq(bin_n("Greater", MX_FLOAT32, MX_BOOL, 4, b, a, o, NULL), MX_OK);
  cr_assert_arr_eq(o, ((uint8_t[]){1, 0, 0, 0}), 4);
}

Test(ew_kernel, comparisons_of_integers_and_halves) {
  uint8_t a[3] = {0, 200, 255}, b[3] = {1, 200, 3}, o[3];
  cr_assert_eq(bin_n("Greater", MX_UINT8, MX_BOOL, 3, a, b, o, NULL), MX_OK);
  cr_assert_arr_eq(o, ((uint8_t[]){0, 0, 1}), 3);
  uint16_t ha[2] = {mx__f32_to_f16(1.5f), mx__f32_to_f16(-2.0f)},
           hb[2] = {mx__f32_to_f16(1.5f), mx__f32_to_f16(1.0f)};
  cr_assert_eq(bin_n("Equal", MX_FLOAT16, MX_BOOL, 2, ha, hb, o, NULL), MX_OK);
  cr_assert_arr_eq(o, ((uint8_t[]){1, 0}), 2);
  uint16_t ba[2] = {mx__f32_to_bf16(-3.0f), mx__f32_to_bf16(2.0f)},
           bb[2] = {mx__f32_to_bf16(1.0f), mx__f32_to_bf16(2.0f)};
  cr_assert_eq(bin_n("Less", MX_BFLOAT16, MX_BOOL, 2, ba, bb, o, NULL), MX_OK);
  cr_assert_arr_eq(o, ((uint8_t[]){1, 0}), 2);
}

Test(ew_kernel, logic_broadcast) {
  uint8_t a[6] = {0, 1, 0, 1, 1, 0}, b[3] = {1, 1, 0}, o[6];
  mx_kernel_call *c = kc_new(2, 1, NULL);
  kc_set(c, 0, MX_BOOL, 2, DIMS(2, 3), a);
  kc_set(c, 1, MX_BOOL, 1, DIMS(3), b);
  kc_set(c, 2, MX_BOOL, 2, DIMS(2, 3), o);
  cr_assert_eq(kc_run_with("And", c, NULL), MX_OK);
  cr_assert_arr_eq(o, ((uint8_t[]){0, 1, 0, 1, 1, 0}), 6);
  cr_assert_eq(kc_run_with("Or", c, NULL), MX_OK);
  cr_assert_arr_eq(o, ((uint8_t[]){1, 1, 0, 1, 1, 0}), 6);
  cr_assert_eq(kc_run_with("Xor", c, NULL), MX_OK);
  cr_assert_arr_eq(o, ((uint8_t[]){1, 0, 0, 0, 0, 0}), 6);
  free(c);
}

/* --- variadic --------------------------------------------------------------------------------- */

Test(ew_kernel, max_min_propagate_nan) {
  float a[3] = {1, NAN, 3}, b[3] = {2, 0, NAN}, o[3];
  cr_assert_eq(bin_n("Max", MX_FLOAT32, MX_FLOAT32, 3, a, b, o, NULL), MX_OK);
  assert_f32_near(o, (float[]){2, NAN, NAN}, 3, 0.0f);
  cr_assert_eq(bin_n("Min", MX_FLOAT32, MX_FLOAT32, 3, a, b, o, NULL), MX_OK);
  assert_f32_near(o, (float[]){1, NAN, NAN}, 3, 0.0f);
}

Test(ew_kernel, sum_mean_three_inputs_broadcast) {
  float a[2] = {1, 2}, b[3] = {10, 20, 30}, s = 100, o[6];
  mx_kernel_call *c = kc_new(3, 1, NULL);
  kc_set(c, 0, MX_FLOAT32, 2, DIMS(2, 1), a);
  kc_set(c, 1, MX_FLOAT32, 1, DIMS(3), b);
  kc_set(c, 2, MX_FLOAT32, 0, NULL, &s);
  kc_set(c, 3, MX_FLOAT32, 2, DIMS(2, 3), o);
  cr_assert_eq(kc_run_with("Sum", c, NULL), MX_OK);
  assert_f32_near(o, (float[]){111, 121, 131, 112, 122, 132}, 6, 0.0f);
  cr_assert_eq(kc_run_with("Mean", c, NULL), MX_OK);
  assert_f32_near(o, (float[]){37, 121.0f / 3, 131.0f / 3, 112.0f / 3, 122.0f / 3, 44}, 6, 1e-6f);
  free(c);
}

Test(ew_kernel, variadic_single_input_broadcasts_copy) {
  int32_t a[2] = {7, -7}, o[2];
  mx_kernel_call *c = kc_new(1, 1, NULL);
  kc_set(c, 0, MX_INT32, 1, DIMS(2), a);
  kc_set(c, 1, MX_INT32, 1, DIMS(2), o);
  cr_assert_eq(kc_run_with("Max", c, NULL), MX_OK);
  cr_assert_eq(o[0], 7);
  cr_assert_eq(o[1], -7);
  free(c);
}

Test(ew_kernel, variadic_in_place_over_a_later_input) {
  float a[3] = {1, 2, 3}, b[3] = {10, 20, 30}, d[3] = {100, 200, 300};
  mx_kernel_call *c = kc_new(3, 1, NULL);
  kc_set(c, 0, MX_FLOAT32, 1, DIMS(3), a);
  kc_set(c, 1, MX_FLOAT32, 1, DIMS(3), b);
  kc_set(c, 2, MX_FLOAT32, 1, DIMS(3), d);
  kc_set(c, 3, MX_FLOAT32, 1, DIMS(3), d); /* output over input 2 */
  cr_assert_eq(kc_run_with("Sum", c, NULL), MX_OK);
  assert_f32_near(d, (float[]){111, 222, 333}, 3, 0.0f);
  free(c);
}

Test(ew_kernel, variadic_float16_rounds_once) {
  /* 1 + 2^-11 + 2^-11: float16 steps would round 1 + 2^-11 back to 1 (ties to even). */
  uint16_t one = mx__f32_to_f16(1.0f), tiny = mx__f32_to_f16(0x1p-11f), o;
  mx_kernel_call *c = kc_new(3, 1, NULL);
  kc_set(c, 0, MX_FLOAT16, 0, NULL, &one);
  kc_set(c, 1, MX_FLOAT16, 0, NULL, &tiny);
  kc_set(c, 2, MX_FLOAT16, 0, NULL, &tiny);
  kc_set(c, 3, MX_FLOAT16, 0, NULL, &o);
  cr_assert_eq(kc_run_with("Sum", c, NULL), MX_OK);
  cr_assert_eq(o, 0x3C01, "got 0x%04x", o);
  free(c);
}

Test(ew_kernel, max_of_int8_three_inputs) {
  int8_t a[2] = {-128, 5}, b[2] = {-127, -5}, d[2] = {-128, 6}, o[2];
  mx_kernel_call *c = kc_new(3, 1, NULL);
  kc_set(c, 0, MX_INT8, 1, DIMS(2), a);
  kc_set(c, 1, MX_INT8, 1, DIMS(2), b);
  kc_set(c, 2, MX_INT8, 1, DIMS(2), d);
  kc_set(c, 3, MX_INT8, 1, DIMS(2), o);
  cr_assert_eq(kc_run_with("Max", c, NULL), MX_OK);
  cr_assert_eq(o[0], -127);
  cr_assert_eq(o[1], 6);
  cr_assert_eq(kc_run_with("Min", c, NULL), MX_OK);
  cr_assert_eq(o[0], -128);
  cr_assert_eq(o[1], -5);
  free(c);
}

/* --- unary ------------------------------------------------------------------------------------ */

static mx_status un(const char *op, mx_dtype dt, int64_t n, const void *x, void *o, const void *params) {
  mx_kernel_call *c = kc_new(1, 1, NULL);
  kc_set(c, 0, dt, 1, &n, (void *)x);
  kc_set(c, 1, dt, 1, &n, o);
  mx_status st = kc_run_with(op, c, params);
  free(c);
  return st;
}

Test(ew_kernel, unary_float_math) {
  float x[6] = {-2.5f, -0.0f, 0.5f, NAN, INFINITY, -INFINITY}, o[6];
  cr_assert_eq(un("Relu", MX_FLOAT32, 6, x, o, NULL), MX_OK);
  assert_f32_near(o, (float[]){0, 0, 0.5f, NAN, INFINITY, 0}, 6, 0.0f);
  cr_assert_eq(un("Abs", MX_FLOAT32, 6, x, o, NULL), MX_OK);
  assert_f32_near(o, (float[]){2.5f, 0, 0.5f, NAN, INFINITY, INFINITY}, 6, 0.0f);
  cr_assert_eq(un("Sign", MX_FLOAT32, 6, x, o, NULL), MX_OK);
  assert_f32_near(o, (float[]){-1, 0, 1, NAN, 1, -1}, 6, 0.0f);
  cr_assert_eq(un("Floor", MX_FLOAT32, 6, x, o, NULL), MX_OK);
  assert_f32_near(o, (float[]){-3, 0, 0, NAN, INFINITY, -INFINITY}, 6, 0.0f);
  cr_assert_eq(un("Ceil", MX_FLOAT32, 6, x, o, NULL), MX_OK);
  assert_f32_near(o, (float[]){-2, 0, 1, NAN, INFINITY, -INFINITY}, 6, 0.0f);
  cr_assert_eq(un("Neg", MX_FLOAT32, 6, x, o, NULL), MX_OK);
  assert_f32_near(o, (float[]){2.5f, 0, -0.5f, NAN, -INFINITY, INFINITY}, 6, 0.0f);
  cr_assert_eq(un("Sigmoid", MX_FLOAT32, 6, x, o, NULL), MX_OK);
  assert_f32_near(o, (float[]){0.07585818f, 0.5f, 0.62245933f, NAN, 1, 0}, 6, 1e-6f);
  cr_assert_eq(un("Tanh", MX_FLOAT32, 6, x, o, NULL), MX_OK);
  assert_f32_near(o, (float[]){-0.98661430f, 0, 0.46211716f, NAN, 1, -1}, 6, 1e-6f);
  cr_assert_eq(un("Reciprocal", MX_FLOAT32, 6, x, o, NULL), MX_OK);
  assert_f32_near(o, (float[]){-0.4f, -INFINITY, 2, NAN, 0, 0}, 6, 0.0f);
  cr_assert_eq(un("Erf", MX_FLOAT32, 6, x, o, NULL), MX_OK);
  assert_f32_near(o, (float[]){-0.99959305f, 0, 0.52049988f, NAN, 1, -1}, 6, 1e-6f);
  float y[4] = {0, 1, 4, -1}, p[4];
  cr_assert_eq(un("Sqrt", MX_FLOAT32, 4, y, p, NULL), MX_OK);
  assert_f32_near(p, (float[]){0, 1, 2, NAN}, 4, 0.0f);
  cr_assert_eq(un("Log", MX_FLOAT32, 4, y, p, NULL), MX_OK);
  assert_f32_near(p, (float[]){-INFINITY, 0, logf(4), NAN}, 4, 0.0f);
  /* float32 Exp is the vectorized kmath.h exp (within 1.5 ulp), not libm's: not bit-exact. */
  cr_assert_eq(un("Exp", MX_FLOAT32, 4, y, p, NULL), MX_OK);
  assert_f32_near(p, (float[]){1, expf(1), expf(4), expf(-1)}, 4, 2e-7f);
  cr_assert_eq(un("Sin", MX_FLOAT32, 4, y, p, NULL), MX_OK);
  assert_f32_near(p, (float[]){0, sinf(1), sinf(4), sinf(-1)}, 4, 0.0f);
  cr_assert_eq(un("Cos", MX_FLOAT32, 4, y, p, NULL), MX_OK);
  assert_f32_near(p, (float[]){1, cosf(1), cosf(4), cosf(-1)}, 4, 0.0f);
}

Test(ew_kernel, unary_float64) {
  double x[3] = {-1.5, 0.25, 700}, o[3];
  cr_assert_eq(un("Exp", MX_FLOAT64, 3, x, o, NULL), MX_OK);
  for (int i = 0; i < 3; i++) cr_assert_eq(o[i], exp(x[i]));
  cr_assert_eq(un("Sigmoid", MX_FLOAT64, 3, x, o, NULL), MX_OK);
  cr_assert(fabs(o[0] - 1.0 / (1.0 + exp(1.5))) < 1e-15);
  cr_assert_eq(o[2], 1.0);
}

Test(ew_kernel, unary_integers) {
  int8_t x[4] = {-128, -3, 0, 7}, o[4];
  cr_assert_eq(un("Abs", MX_INT8, 4, x, o, NULL), MX_OK);
  cr_assert_arr_eq(o, ((int8_t[]){-128, 3, 0, 7}), 4);
  cr_assert_eq(un("Neg", MX_INT8, 4, x, o, NULL), MX_OK);
  cr_assert_arr_eq(o, ((int8_t[]){-128, 3, 0, -7}), 4);
  cr_assert_eq(un("Sign", MX_INT8, 4, x, o, NULL), MX_OK);
  cr_assert_arr_eq(o, ((int8_t[]){-1, -1, 0, 1}), 4);
  cr_assert_eq(un("Relu", MX_INT8, 4, x, o, NULL), MX_OK);
  cr_assert_arr_eq(o, ((int8_t[]){0, 0, 0, 7}), 4);
  int64_t l[2] = {INT64_MIN, -5}, lo[2];
  cr_assert_eq(un("Abs", MX_INT64, 2, l, lo, NULL), MX_OK);
  cr_assert_eq(lo[0], INT64_MIN);
  cr_assert_eq(lo[1], 5);
  uint8_t b[3] = {0, 1, 1}, bo[3];
  cr_assert_eq(un("Not", MX_BOOL, 3, b, bo, NULL), MX_OK);
  cr_assert_arr_eq(bo, ((uint8_t[]){1, 0, 0}), 3);
}

Test(ew_kernel, unary_rejects_unsupported_dtypes) {
  int32_t x[1] = {1}, o[1];
  mx_kernel_call *c = kc_new(1, 1, NULL);
  kc_set(c, 0, MX_INT32, 1, DIMS(1), x);
  kc_set(c, 1, MX_INT32, 1, DIMS(1), o);
  cr_assert_null(mx__kernel_find(NULL, "Exp", c));
  free(c);
}

Test(ew_kernel, float16_unary_rounds_once) {
  /* exp(1) = 2.71828...: nearest float16 is 2.71875 (0x4170). */
  uint16_t x[3] = {mx__f32_to_f16(1.0f), 0x7e00 /* NaN */, mx__f32_to_f16(12.0f)}, o[3];
  cr_assert_eq(un("Exp", MX_FLOAT16, 3, x, o, NULL), MX_OK);
  cr_assert_eq(o[0], 0x4170, "got 0x%04x", o[0]);
  cr_assert(isnan(mx__f16_to_f32(o[1])));
  cr_assert_eq(o[2], 0x7c00, "exp(12) overflows float16 to inf, got 0x%04x", o[2]);
  uint16_t bx[1] = {mx__f32_to_bf16(2.0f)}, bo[1];
  cr_assert_eq(un("Sqrt", MX_BFLOAT16, 1, bx, bo, NULL), MX_OK);
  cr_assert_eq(bo[0], mx__f32_to_bf16(sqrtf(2.0f)));
}

Test(ew_kernel, gelu_exact_and_tanh) {
  float x[4] = {-3, -1, 0, 1}, o[4];
  mx_gelu_params exact = {0, 0}, approx = {1, 0};
  cr_assert_eq(un("Gelu", MX_FLOAT32, 4, x, o, &exact), MX_OK);
  assert_f32_near(o, (float[]){-0.00404969f, -0.15865525f, 0, 0.84134475f}, 4, 1e-6f);
  cr_assert_eq(un("Gelu", MX_FLOAT32, 4, x, o, &approx), MX_OK);
  assert_f32_near(o, (float[]){-0.00363739f, -0.15880801f, 0, 0.84119199f}, 4, 1e-6f);
}

Test(ew_kernel, clip_attributes_inputs_and_nan) {
  float x[5] = {-5, -1, 0.5f, 3, NAN}, o[5];
  mx_clip_params attrs = {-1.0f, 1.0f, 1, 0};
  cr_assert_eq(un("Clip", MX_FLOAT32, 5, x, o, &attrs), MX_OK);
  assert_f32_near(o, (float[]){-1, -1, 0.5f, 1, NAN}, 5, 0.0f);
  mx_clip_params inputs = {0, 0, 0, 0};
  float lo = 0.0f;
  mx_kernel_call *c = kc_new(3, 1, NULL);
  kc_set(c, 0, MX_FLOAT32, 1, DIMS(5), x);
  kc_set(c, 1, MX_FLOAT32, 0, NULL, &lo);
  c->t[2].dtype = MX_DTYPE_UNDEFINED; /* max omitted */
  kc_set(c, 3, MX_FLOAT32, 1, DIMS(5), o);
  cr_assert_eq(kc_run_with("Clip", c, &inputs), MX_OK);
  assert_f32_near(o, (float[]){0, 0, 0.5f, 3, NAN}, 5, 0.0f);
  free(c);
  int32_t xi[4] = {-100, 5, 50, 7}, lo_i = 0, hi_i = 10, oi[4];
  c = kc_new(3, 1, NULL);
  kc_set(c, 0, MX_INT32, 1, DIMS(4), xi);
  kc_set(c, 1, MX_INT32, 0, NULL, &lo_i);
  kc_set(c, 2, MX_INT32, 0, NULL, &hi_i);
  kc_set(c, 3, MX_INT32, 1, DIMS(4), oi);
  cr_assert_eq(kc_run_with("Clip", c, &inputs), MX_OK);
  cr_assert_arr_eq(oi, ((int32_t[]){0, 5, 10, 7}), 4);
  /* min > max: everything becomes max */
  lo_i = 20;
  cr_assert_eq(kc_run_with("Clip", c, &inputs), MX_OK);
  cr_assert_arr_eq(oi, ((int32_t[]){10, 10, 10, 10}), 4);
  free(c);
}

/* --- Cast ------------------------------------------------------------------------------------- */

static mx_status cast(mx_dtype from, mx_dtype to, int64_t n, const void *x, void *o) {
  mx_cast_params p = {(int32_t)to, 1, 0};
  mx_kernel_call *c = kc_new(1, 1, NULL);
  kc_set(c, 0, from, 1, &n, (void *)x);
  kc_set(c, 1, to, 1, &n, o);
  mx_status st = kc_run_with("Cast", c, &p);
  free(c);
  return st;
}

Test(ew_kernel, cast_float_to_half_specials) {
  float x[6] = {65504.0f, 65520.0f, NAN, -INFINITY, 1.0f / 3.0f, 0x1p-25f};
  uint16_t o[6];
  cr_assert_eq(cast(MX_FLOAT32, MX_FLOAT16, 6, x, o), MX_OK);
  cr_assert_eq(o[0], 0x7bff);
  cr_assert_eq(o[1], 0x7c00);
  cr_assert_eq(o[2] & 0x7c00, 0x7c00);
  cr_assert_neq(o[2] & 0x03ff, 0);
  cr_assert_eq(o[3], 0xfc00);
  cr_assert_eq(o[4], 0x3555);
  cr_assert_eq(o[5], 0x0000); /* half of the smallest subnormal: ties to even (zero) */
  cr_assert_eq(cast(MX_FLOAT32, MX_BFLOAT16, 6, x, o), MX_OK);
  cr_assert_eq(o[3], 0xff80);
  cr_assert_eq(o[2] & 0x7f80, 0x7f80);
  cr_assert_neq(o[2] & 0x007f, 0);
}

Test(ew_kernel, cast_double_to_half_rounds_once) {
  /* Just above the float16 midpoint between 1 and 1 + 2^-10; a float32 step would land on
   * the midpoint and round to even (1.0). */
  double x[2] = {1.0 + 0x1p-11 + 0x1p-40, 1.0 + 0x1p-11};
  uint16_t o[2];
  cr_assert_eq(cast(MX_FLOAT64, MX_FLOAT16, 2, x, o), MX_OK);
  cr_assert_eq(o[0], 0x3c01, "got 0x%04x", o[0]);
  cr_assert_eq(o[1], 0x3c00, "got 0x%04x", o[1]);
  double big[2] = {1e300, -1e-300};
  cr_assert_eq(cast(MX_FLOAT64, MX_FLOAT16, 2, big, o), MX_OK);
  cr_assert_eq(o[0], 0x7c00);
  cr_assert_eq(o[1], 0x8000);
  /* bfloat16: 1 + 2^-8 + 2^-40 is above the midpoint between 1 and 1 + 2^-7 */
  double bx[1] = {1.0 + 0x1p-8 + 0x1p-40};
  cr_assert_eq(cast(MX_FLOAT64, MX_BFLOAT16, 1, bx, o), MX_OK);
  cr_assert_eq(o[0], 0x3f81, "got 0x%04x", o[0]);
}

Test(ew_kernel, cast_float_to_int_saturates) {
  float x[6] = {1.9f, -1.9f, 3e9f, -3e9f, NAN, INFINITY};
  int32_t o[6];
  cr_assert_eq(cast(MX_FLOAT32, MX_INT32, 6, x, o), MX_OK);
  cr_assert_arr_eq(o, ((int32_t[]){1, -1, INT32_MAX, INT32_MIN, 0, INT32_MAX}), 6);
  uint8_t u[6];
  cr_assert_eq(cast(MX_FLOAT32, MX_UINT8, 6, x, u), MX_OK);
  cr_assert_arr_eq(u, ((uint8_t[]){1, 0, 255, 0, 0, 255}), 6);
  int64_t l[6];
  cr_assert_eq(cast(MX_FLOAT32, MX_INT64, 6, x, l), MX_OK);
  cr_assert_eq(l[2], 3000000000LL);
  cr_assert_eq(l[5], INT64_MAX);
}

Test(ew_kernel, cast_integers_and_bools) {
  int64_t x[4] = {((int64_t)1 << 32) + 5, -1, 0, 300};
  int32_t o[4];
  cr_assert_eq(cast(MX_INT64, MX_INT32, 4, x, o), MX_OK);
  cr_assert_arr_eq(o, ((int32_t[]){5, -1, 0, 300}), 4);
  int8_t b8[4];
  cr_assert_eq(cast(MX_INT64, MX_INT8, 4, x, b8), MX_OK);
  cr_assert_arr_eq(b8, ((int8_t[]){5, -1, 0, 44}), 4);
  uint8_t b[4];
  cr_assert_eq(cast(MX_INT64, MX_BOOL, 4, x, b), MX_OK);
  cr_assert_arr_eq(b, ((uint8_t[]){1, 1, 0, 1}), 4);
  float f[4] = {0.0f, -0.0f, NAN, 0.1f};
  cr_assert_eq(cast(MX_FLOAT32, MX_BOOL, 4, f, b), MX_OK);
  cr_assert_arr_eq(b, ((uint8_t[]){0, 0, 1, 1}), 4);
  uint8_t bb[2] = {1, 0};
  double d[2];
  cr_assert_eq(cast(MX_BOOL, MX_FLOAT64, 2, bb, d), MX_OK);
  cr_assert_eq(d[0], 1.0);
  cr_assert_eq(d[1], 0.0);
  uint16_t h[2];
  cr_assert_eq(cast(MX_INT64, MX_FLOAT16, 2, x + 2, h), MX_OK);
  cr_assert_eq(h[0], 0);
  cr_assert_eq(h[1], mx__f32_to_f16(300.0f));
}

Test(ew_kernel, cast_half_to_wider_is_exact) {
  uint16_t h[3] = {0x3555, 0x0001, 0xfc00};
  double d[3];
  float f[3];
  cr_assert_eq(cast(MX_FLOAT16, MX_FLOAT64, 3, h, d), MX_OK);
  cr_assert_eq(d[0], 0.333251953125);
  cr_assert_eq(d[1], 0x1p-24);
  cr_assert(isinf(d[2]) && d[2] < 0);
  cr_assert_eq(cast(MX_FLOAT16, MX_FLOAT32, 3, h, f), MX_OK);
  cr_assert_eq(f[0], 0.333251953125f);
  uint16_t bf[1];
  cr_assert_eq(cast(MX_FLOAT16, MX_BFLOAT16, 1, h, bf), MX_OK);
  cr_assert_eq(bf[0], mx__f32_to_bf16(0.333251953125f));
}

Test(ew_kernel, cast_checks_the_target) {
  float x[1] = {1};
  int32_t o[1];
  mx_cast_params p = {MX_INT64, 1, 0};
  mx_kernel_call *c = kc_new(1, 1, NULL);
  kc_set(c, 0, MX_FLOAT32, 1, DIMS(1), x);
  kc_set(c, 1, MX_INT32, 1, DIMS(1), o);
  cr_assert_eq(kc_run_with("Cast", c, &p), MX_ERR_UNSUPPORTED);
  free(c);
}

/* --- Where ------------------------------------------------------------------------------------ */

Test(ew_kernel, where_three_way_broadcast) {
  uint8_t cond[2] = {1, 0};
  int64_t x[3] = {1, 2, 3}, y = -9, o[6];
  mx_kernel_call *c = kc_new(3, 1, NULL);
  kc_set(c, 0, MX_BOOL, 2, DIMS(2, 1), cond);
  kc_set(c, 1, MX_INT64, 2, DIMS(1, 3), x);
  kc_set(c, 2, MX_INT64, 0, NULL, &y);
  kc_set(c, 3, MX_INT64, 2, DIMS(2, 3), o);
  cr_assert_eq(kc_run_with("Where", c, NULL), MX_OK);
  cr_assert_arr_eq(o, ((int64_t[]){1, 2, 3, -9, -9, -9}), 6);
  free(c);
  uint8_t cc[4] = {1, 0, 0, 1};
  uint16_t hx[4] = {1, 2, 3, 4}, hy[4] = {10, 20, 30, 40}, ho[4];
  c = kc_new(3, 1, NULL);
  kc_set(c, 0, MX_BOOL, 1, DIMS(4), cc);
  kc_set(c, 1, MX_FLOAT16, 1, DIMS(4), hx);
  kc_set(c, 2, MX_FLOAT16, 1, DIMS(4), hy);
  kc_set(c, 3, MX_FLOAT16, 1, DIMS(4), ho);
  cr_assert_eq(kc_run_with("Where", c, NULL), MX_OK);
  cr_assert_arr_eq(ho, ((uint16_t[]){1, 20, 30, 4}), 4);
  free(c);
}

Test(ew_kernel, where_dtype_mismatch) {
  uint8_t cond[1] = {1};
  float x[1] = {1};
  double y[1] = {2}, o[1];
  mx_kernel_call *c = kc_new(3, 1, NULL);
  kc_set(c, 0, MX_BOOL, 1, DIMS(1), cond);
  kc_set(c, 1, MX_FLOAT32, 1, DIMS(1), x);
  kc_set(c, 2, MX_FLOAT64, 1, DIMS(1), y);
  kc_set(c, 3, MX_FLOAT64, 1, DIMS(1), o);
  cr_assert_eq(kc_run_with("Where", c, NULL), MX_ERR_UNSUPPORTED);
  free(c);
}
