/* Inference tests of the activation-group op definitions (graph/ops/activation.c): pointwise
 * activations keep symbolic shapes and dtypes (bool for IsNaN/IsInf), PRelu's one-way slope
 * broadcasting, the bitwise ops' integer dtypes and broadcasting, Hardmax's axis rules before
 * and from opset 13, Det's batch shape, CumProd's axis checks, ReduceLogSum's axes (attribute
 * before opset 18, input from 18), and the attribute errors (Celu alpha 0, Shrink's negative
 * lambd, BitShift's direction). */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "graph/ir.h"
#include "graph/ops/op.h"
#include "graph/ops/ops_support.h"
#include "mixrt/graph.h"

static void setup(void) { mxt_ops_setup("act"); }

TestSuite(activation_infer, .init = setup, .fini = mxt_ops_teardown);

/* --- pointwise ---------------------------------------------------------------------------- */

Test(activation_infer, pointwise_keep_symbolic_shape_and_dtype) {
  static const char *const ops[] = {
      "Elu",      "Selu",     "Celu",   "LeakyRelu", "HardSigmoid", "HardSwish", "ThresholdedRelu",
      "Softplus", "Softsign", "Shrink", "Mish",      "Swish",       "Tan",       "Asin",
      "Acos",     "Atan",     "Sinh",   "Cosh",      "Asinh",       "Acosh",     "Atanh",
      "Round"};
  enum { N = sizeof ops / sizeof ops[0] };
  mx_value_id x = input("x", MX_FLOAT16, SHAPE(S("batch"), S("seq"), 64));
  mx_value_id y[N];
  for (int i = 0; i < N; i++) y[i] = op(ops[i], &x, 1, NULL, 0);
  infer_ok();
  for (int i = 0; i < N; i++) expect_shape(y[i], MX_FLOAT16, SHAPE(S("batch"), S("seq"), 64));
}

Test(activation_infer, isnan_and_isinf_give_bool) {
  mx_value_id x = input("x", MX_BFLOAT16, SHAPE(S("n"), 3));
  mx_attr neg = mx_attr_int("detect_positive", 0);
  mx_value_id a = op("IsNaN", &x, 1, NULL, 0);
  mx_value_id b = op("IsInf", &x, 1, &neg, 1);
  infer_ok();
  expect_shape(a, MX_BOOL, SHAPE(S("n"), 3));
  expect_shape(b, MX_BOOL, SHAPE(S("n"), 3));
}

Test(activation_infer, float_activations_refuse_integers) {
  mx_value_id x = input("x", MX_INT32, SHAPE(4));
  op("Elu", &x, 1, NULL, 0);
  infer_fails(MX_ERR_DTYPE, "input 0");
}

Test(activation_infer, shrink_takes_integers) {
  mx_value_id x = input("x", MX_INT8, SHAPE(4));
  mx_value_id y = op("Shrink", &x, 1, NULL, 0);
  infer_ok();
  expect_shape(y, MX_INT8, SHAPE(4));
}

Test(activation_infer, celu_alpha_zero_is_refused) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(4));
  mx_attr a = mx_attr_float("alpha", 0.0f);
  op("Celu", &x, 1, &a, 1);
  infer_fails(MX_ERR_INVALID_GRAPH, "alpha");
}

Test(activation_infer, shrink_negative_lambd_is_refused) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(4));
  mx_attr a = mx_attr_float("lambd", -1.0f);
  op("Shrink", &x, 1, &a, 1);
  infer_fails(MX_ERR_INVALID_GRAPH, "lambd");
}

Test(activation_infer, non_finite_alpha_is_refused) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(4));
  mx_attr a = mx_attr_float("alpha", NAN);
  op("LeakyRelu", &x, 1, &a, 1);
  infer_fails(MX_ERR_INVALID_GRAPH, "alpha");
}

Test(activation_infer, unknown_attribute_is_refused) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(4));
  mx_attr a = mx_attr_float("beta", 1.0f);
  op("Elu", &x, 1, &a, 1);
  infer_fails(MX_ERR_UNSUPPORTED, "beta");
}

/* --- binary ------------------------------------------------------------------------------- */

Test(activation_infer, prelu_slope_broadcasts_to_x) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("b"), 16, 8, 8));
  mx_value_id s = input("s", MX_FLOAT32, SHAPE(16, 1, 1));
  mx_value_id y = op("PRelu", (mx_value_id[]){x, s}, 2, NULL, 0);
  infer_ok();
  expect_shape(y, MX_FLOAT32, SHAPE(S("b"), 16, 8, 8));
}

Test(activation_infer, prelu_slope_wider_than_x_fails) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(3, 1));
  mx_value_id s = input("s", MX_FLOAT32, SHAPE(3, 4));
  op("PRelu", (mx_value_id[]){x, s}, 2, NULL, 0);
  infer_fails(MX_ERR_SHAPE, NULL);
}

Test(activation_infer, prelu_slope_of_higher_rank_fails) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(4));
  mx_value_id s = input("s", MX_FLOAT32, SHAPE(1, 4));
  op("PRelu", (mx_value_id[]){x, s}, 2, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "rank");
}

Test(activation_infer, bitwise_broadcast_integers) {
  mx_value_id a = input("a", MX_UINT64, SHAPE(S("n"), 4, 1));
  mx_value_id b = input("b", MX_UINT64, SHAPE(5));
  mx_value_id y = op("BitwiseXor", (mx_value_id[]){a, b}, 2, NULL, 0);
  mx_value_id z = op("BitwiseNot", &a, 1, NULL, 0);
  infer_ok();
  expect_shape(y, MX_UINT64, SHAPE(S("n"), 4, 5));
  expect_shape(z, MX_UINT64, SHAPE(S("n"), 4, 1));
}

Test(activation_infer, bitwise_refuses_floats_and_mixed_types) {
  mx_value_id a = input("a", MX_FLOAT32, SHAPE(2));
  op("BitwiseAnd", (mx_value_id[]){a, a}, 2, NULL, 0);
  infer_fails(MX_ERR_DTYPE, "input 0");
}

Test(activation_infer, bitwise_mixed_types_fail) {
  mx_value_id a = input("a", MX_INT32, SHAPE(2));
  mx_value_id b = input("b", MX_INT16, SHAPE(2));
  op("BitwiseOr", (mx_value_id[]){a, b}, 2, NULL, 0);
  infer_fails(MX_ERR_DTYPE, "input 1");
}

Test(activation_infer, bitshift_direction) {
  mx_value_id a = input("a", MX_UINT16, SHAPE(3));
  mx_attr left = mx_attr_string("direction", "LEFT");
  mx_value_id y = op("BitShift", (mx_value_id[]){a, a}, 2, &left, 1);
  infer_ok();
  expect_shape(y, MX_UINT16, SHAPE(3));
}

Test(activation_infer, bitshift_bad_direction_fails) {
  mx_value_id a = input("a", MX_UINT8, SHAPE(3));
  mx_attr bad = mx_attr_string("direction", "left");
  op("BitShift", (mx_value_id[]){a, a}, 2, &bad, 1);
  infer_fails(MX_ERR_INVALID_GRAPH, "direction");
}

Test(activation_infer, bitshift_needs_direction) {
  mx_value_id a = input("a", MX_UINT8, SHAPE(3));
  op("BitShift", (mx_value_id[]){a, a}, 2, NULL, 0);
  infer_fails(MX_ERR_INVALID_GRAPH, "direction");
}

Test(activation_infer, bitshift_refuses_signed) {
  mx_value_id a = input("a", MX_INT32, SHAPE(3));
  mx_attr left = mx_attr_string("direction", "LEFT");
  op("BitShift", (mx_value_id[]){a, a}, 2, &left, 1);
  infer_fails(MX_ERR_DTYPE, NULL);
}

/* --- Hardmax, Det, CumProd ---------------------------------------------------------------- */

Test(activation_infer, hardmax_axis_range_from_opset_13) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("b"), 3, 4));
  mx_attr a = mx_attr_int("axis", -3);
  mx_value_id y = op("Hardmax", &x, 1, &a, 1);
  infer_ok();
  expect_shape(y, MX_FLOAT32, SHAPE(S("b"), 3, 4));
}

Test(activation_infer, hardmax_axis_out_of_range_fails) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(3, 4));
  mx_attr a = mx_attr_int("axis", 2);
  op("Hardmax", &x, 1, &a, 1);
  infer_fails(MX_ERR_SHAPE, "axis");
}

Test(activation_infer, hardmax_before_13_allows_axis_equal_to_rank) {
  cr_assert_eq(mx_graph_set_opset(G, "", 11), MX_OK);
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(3, 4));
  mx_attr a = mx_attr_int("axis", 2);
  mx_value_id y = op("Hardmax", &x, 1, &a, 1);
  infer_ok();
  expect_shape(y, MX_FLOAT32, SHAPE(3, 4));
}

Test(activation_infer, det_drops_the_matrix_dims) {
  mx_value_id x = input("x", MX_FLOAT64, SHAPE(S("b"), 2, S("m"), S("m")));
  mx_value_id y = op("Det", &x, 1, NULL, 0);
  infer_ok();
  expect_shape(y, MX_FLOAT64, SHAPE(S("b"), 2));
}

Test(activation_infer, det_of_non_square_fails) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2, 3));
  op("Det", &x, 1, NULL, 0);
  infer_fails(MX_ERR_SHAPE, NULL);
}

Test(activation_infer, det_of_a_vector_fails) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(3));
  op("Det", &x, 1, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "rank");
}

Test(activation_infer, cumprod_keeps_shape) {
  mx_value_id x = input("x", MX_INT64, SHAPE(S("n"), 5));
  mx_value_id ax = const_scalar("ax", MX_INT32, 1);
  mx_value_id y = op("CumProd", (mx_value_id[]){x, ax}, 2, NULL, 0);
  infer_ok();
  expect_shape(y, MX_INT64, SHAPE(S("n"), 5));
}

Test(activation_infer, cumprod_axis_out_of_range_fails) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2, 5));
  mx_value_id ax = const_scalar("ax", MX_INT64, -3);
  op("CumProd", (mx_value_id[]){x, ax}, 2, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "out of range");
}

Test(activation_infer, cumprod_axis_must_be_a_scalar) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2, 5));
  mx_value_id ax = CONST_1D("ax", 0, 1);
  op("CumProd", (mx_value_id[]){x, ax}, 2, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "scalar");
}

/* --- ReduceLogSum ------------------------------------------------------------------------- */

Test(activation_infer, reduce_log_sum_axes_input_from_opset_18) {
  cr_assert_eq(mx_graph_set_opset(G, "", 18), MX_OK);
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("b"), 3, 4));
  mx_value_id ax = CONST_1D("ax", -1);
  mx_attr kd = mx_attr_int("keepdims", 0);
  mx_value_id y = op("ReduceLogSum", (mx_value_id[]){x, ax}, 2, &kd, 1);
  mx_value_id z = op("ReduceLogSum", &x, 1, NULL, 0);
  infer_ok();
  expect_shape(y, MX_FLOAT32, SHAPE(S("b"), 3));
  expect_shape(z, MX_FLOAT32, SHAPE(1, 1, 1));
}

Test(activation_infer, reduce_log_sum_axes_attribute_before_18) {
  cr_assert_eq(mx_graph_set_opset(G, "", 13), MX_OK);
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("b"), 3, 4));
  int64_t axes[] = {0, 2};
  mx_attr at = mx_attr_ints("axes", axes, 2);
  mx_value_id y = op("ReduceLogSum", &x, 1, &at, 1);
  infer_ok();
  expect_shape(y, MX_FLOAT32, SHAPE(1, 3, 1));
}

Test(activation_infer, reduce_log_sum_axes_input_before_18_fails) {
  cr_assert_eq(mx_graph_set_opset(G, "", 13), MX_OK);
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(3, 4));
  mx_value_id ax = CONST_1D("ax", 0);
  op("ReduceLogSum", (mx_value_id[]){x, ax}, 2, NULL, 0);
  infer_fails(MX_ERR_INVALID_GRAPH, "attribute");
}
