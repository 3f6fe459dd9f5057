/* Inference tests of the normalization and loss op definitions (graph/ops/norm.c, loss.c):
 * shapes and dtypes kept symbolic, BatchNormalization's training outputs and opset-dependent
 * types, GroupNormalization's opset 18 (per group) and 21 (per channel) scale, the losses'
 * reduced and unreduced shapes, and the refusals of bad attributes and shapes, each naming the
 * node and the attribute or input. */
#include <criterion/criterion.h>
#include <string.h>

#include "graph/ops/ops_support.h"
#include "mixrt/graph.h"

static void setup(void) { mxt_ops_setup("norm"); }

TestSuite(norm_infer, .init = setup, .fini = mxt_ops_teardown);

/* --- BatchNormalization ------------------------------------------------------------------------ */

/* X [b, 3, h, w] and four per-channel inputs of dtype st (scale, B, mean, var). */
static void bn_inputs(mx_value_id *in, mx_dtype xt, mx_dtype st, int64_t c) {
  in[0] = input("x", xt, SHAPE(S("b"), 3, S("h"), S("w")));
  static const char *const names[] = {"scale", "bias", "mean", "var"};
  for (int i = 0; i < 4; i++) in[i + 1] = input(names[i], i < 2 ? xt : st, SHAPE(C(c)));
}

Test(norm_infer, batchnorm_inference_keeps_x) {
  mx_value_id in[5];
  bn_inputs(in, MX_FLOAT16, MX_FLOAT16, 3);
  mx_value_id y = op("BatchNormalization", in, 5, NULL, 0);
  infer_ok();
  expect_shape_str(y, MX_FLOAT16, "[b, 3, h, w]");
}

Test(norm_infer, batchnorm_training_outputs) {
  cr_assert_eq(mx_graph_set_opset(G, "", 15), MX_OK);
  mx_value_id in[5], out[3];
  bn_inputs(in, MX_FLOAT16, MX_FLOAT32, 3);
  mx_attr tm = mx_attr_int("training_mode", 1);
  op_multi("BatchNormalization", in, 5, &tm, 1, out, 3);
  infer_ok();
  expect_shape_str(out[0], MX_FLOAT16, "[b, 3, h, w]");
  expect_shape_str(out[1], MX_FLOAT32, "[3]");
  expect_shape_str(out[2], MX_FLOAT32, "[3]");
}

Test(norm_infer, batchnorm_outputs_need_training_mode) {
  cr_assert_eq(mx_graph_set_opset(G, "", 15), MX_OK);
  mx_value_id in[5], out[3];
  bn_inputs(in, MX_FLOAT32, MX_FLOAT32, 3);
  op_multi("BatchNormalization", in, 5, NULL, 0, out, 3);
  infer_fails(MX_ERR_INVALID_GRAPH, "training_mode");
}

Test(norm_infer, batchnorm_opset9_saved_statistics) {
  cr_assert_eq(mx_graph_set_opset(G, "", 9), MX_OK);
  mx_value_id in[5], out[5];
  bn_inputs(in, MX_FLOAT32, MX_FLOAT32, 3);
  op_multi("BatchNormalization", in, 5, NULL, 0, out, 5);
  infer_ok();
  for (int i = 1; i < 5; i++) expect_shape_str(out[i], MX_FLOAT32, "[3]");
}

Test(norm_infer, batchnorm_scale_of_wrong_length) {
  mx_value_id in[5];
  bn_inputs(in, MX_FLOAT32, MX_FLOAT32, 4);
  op("BatchNormalization", in, 5, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "input 1 (scale)");
}

Test(norm_infer, batchnorm_stat_types_before_opset14_follow_x) {
  cr_assert_eq(mx_graph_set_opset(G, "", 9), MX_OK);
  mx_value_id in[5];
  bn_inputs(in, MX_FLOAT16, MX_FLOAT32, 3);
  op("BatchNormalization", in, 5, NULL, 0);
  infer_fails(MX_ERR_DTYPE, "has dtype float32 but input 0 has float16");
}

Test(norm_infer, batchnorm_spatial0_takes_per_activation_values) {
  cr_assert_eq(mx_graph_set_opset(G, "", 7), MX_OK);
  mx_value_id in[5];
  in[0] = input("x", MX_FLOAT32, SHAPE(S("b"), 3, 5));
  static const char *const names[] = {"scale", "bias", "mean", "var"};
  for (int i = 0; i < 4; i++) in[i + 1] = input(names[i], MX_FLOAT32, SHAPE(3, 5));
  mx_attr sp = mx_attr_int("spatial", 0);
  mx_value_id y = op("BatchNormalization", in, 5, &sp, 1);
  infer_ok();
  expect_shape_str(y, MX_FLOAT32, "[b, 3, 5]");
}

/* --- InstanceNormalization / GroupNormalization -------------------------------------------------- */

Test(norm_infer, instancenorm_shapes_and_errors) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("b"), 4, S("l")));
  mx_value_id sc = input("scale", MX_FLOAT32, SHAPE(4));
  mx_value_id bad = input("bias", MX_FLOAT32, SHAPE(5));
  mx_value_id y = op("InstanceNormalization", (mx_value_id[]){x, sc, sc}, 3, NULL, 0);
  infer_ok();
  expect_shape_str(y, MX_FLOAT32, "[b, 4, l]");
  op("InstanceNormalization", (mx_value_id[]){x, sc, bad}, 3, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "input 2 (B)");
}

Test(norm_infer, groupnorm_opset21_scale_per_channel) {
  cr_assert_eq(mx_graph_set_opset(G, "", 21), MX_OK);
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("b"), 6, 8, 8));
  mx_value_id sc = input("scale", MX_FLOAT32, SHAPE(6));
  mx_attr g = mx_attr_int("num_groups", 3);
  mx_value_id y = op("GroupNormalization", (mx_value_id[]){x, sc, sc}, 3, &g, 1);
  infer_ok();
  expect_shape_str(y, MX_FLOAT32, "[b, 6, 8, 8]");
}

Test(norm_infer, groupnorm_opset18_scale_per_group) {
  cr_assert_eq(mx_graph_set_opset(G, "", 18), MX_OK);
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("b"), 6, 8));
  mx_value_id sc = input("scale", MX_FLOAT32, SHAPE(6));
  mx_attr g = mx_attr_int("num_groups", 3);
  op("GroupNormalization", (mx_value_id[]){x, sc, sc}, 3, &g, 1);
  infer_fails(MX_ERR_SHAPE, "num_groups");
}

Test(norm_infer, groupnorm_groups_must_divide_channels) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2, 6, 8));
  mx_value_id sc = input("scale", MX_FLOAT32, SHAPE(6));
  mx_attr g = mx_attr_int("num_groups", 4);
  op("GroupNormalization", (mx_value_id[]){x, sc, sc}, 3, &g, 1);
  infer_fails(MX_ERR_SHAPE, "num_groups 4 does not divide");
}

Test(norm_infer, groupnorm_bad_attributes) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2, 6, 8));
  mx_value_id sc = input("scale", MX_FLOAT32, SHAPE(6));
  mx_attr g = mx_attr_int("num_groups", 0);
  op("GroupNormalization", (mx_value_id[]){x, sc, sc}, 3, &g, 1);
  infer_fails(MX_ERR_INVALID_GRAPH, "num_groups 0");
}

Test(norm_infer, groupnorm_needs_num_groups) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2, 6, 8));
  mx_value_id sc = input("scale", MX_FLOAT32, SHAPE(6));
  op("GroupNormalization", (mx_value_id[]){x, sc, sc}, 3, NULL, 0);
  infer_fails(MX_ERR_INVALID_GRAPH, "num_groups");
}

/* --- LRN, LpNormalization, MeanVarianceNormalization --------------------------------------------- */

Test(norm_infer, lrn_keeps_shape_and_checks_size) {
  mx_value_id x = input("x", MX_BFLOAT16, SHAPE(S("b"), 16, S("h"), S("w")));
  mx_attr sz = mx_attr_int("size", 5);
  mx_value_id y = op("LRN", &x, 1, &sz, 1);
  infer_ok();
  expect_shape_str(y, MX_BFLOAT16, "[b, 16, h, w]");
  mx_attr bad = mx_attr_int("size", 0);
  op("LRN", &x, 1, &bad, 1);
  infer_fails(MX_ERR_INVALID_GRAPH, "size 0");
}

Test(norm_infer, lpnorm_checks_p_and_axis) {
  mx_value_id x = input("x", MX_FLOAT64, SHAPE(S("n"), 3));
  mx_value_id y = op("LpNormalization", &x, 1, NULL, 0);
  infer_ok();
  expect_shape_str(y, MX_FLOAT64, "[n, 3]");
  mx_attr ax = mx_attr_int("axis", 2);
  op("LpNormalization", &x, 1, &ax, 1);
  infer_fails(MX_ERR_SHAPE, "axis 2");
}

Test(norm_infer, lpnorm_p3_is_refused) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2, 3));
  mx_attr p = mx_attr_int("p", 3);
  op("LpNormalization", &x, 1, &p, 1);
  infer_fails(MX_ERR_INVALID_GRAPH, "p 3");
}

Test(norm_infer, mvn_default_axes_need_rank4) {
  mx_value_id x4 = input("x4", MX_FLOAT32, SHAPE(S("b"), 3, 4, 4));
  mx_value_id y = op("MeanVarianceNormalization", &x4, 1, NULL, 0);
  infer_ok();
  expect_shape_str(y, MX_FLOAT32, "[b, 3, 4, 4]");
  mx_value_id x2 = input("x2", MX_FLOAT32, SHAPE(2, 3));
  op("MeanVarianceNormalization", &x2, 1, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "axes entry 2");
}

Test(norm_infer, mvn_repeated_axis) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2, 3));
  int64_t axes[] = {1, -1};
  mx_attr a = mx_attr_ints("axes", axes, 2);
  op("MeanVarianceNormalization", &x, 1, &a, 1);
  infer_fails(MX_ERR_SHAPE, "twice");
}

/* --- losses --------------------------------------------------------------------------------------- */

Test(norm_infer, nllloss_shapes_by_reduction) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("n"), 5, S("d1"), 2));
  mx_value_id t = input("t", MX_INT64, SHAPE(S("n"), S("d1"), 2));
  mx_value_id w = input("w", MX_FLOAT32, SHAPE(5));
  mx_attr none = mx_attr_string("reduction", "none");
  mx_value_id l0 = op("NegativeLogLikelihoodLoss", (mx_value_id[]){x, t, w}, 3, &none, 1);
  mx_value_id l1 = op("NegativeLogLikelihoodLoss", (mx_value_id[]){x, t}, 2, NULL, 0);
  infer_ok();
  expect_shape_str(l0, MX_FLOAT32, "[n, d1, 2]");
  expect_shape(l1, MX_FLOAT32, SCALAR);
}

Test(norm_infer, nllloss_bad_reduction) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(3, 5));
  mx_value_id t = input("t", MX_INT64, SHAPE(3));
  mx_attr r = mx_attr_string("reduction", "avg");
  op("NegativeLogLikelihoodLoss", (mx_value_id[]){x, t}, 2, &r, 1);
  infer_fails(MX_ERR_INVALID_GRAPH, "reduction 'avg'");
}

Test(norm_infer, nllloss_target_shape_and_weight) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(3, 5, 4));
  mx_value_id t = input("t", MX_INT64, SHAPE(3, 2));
  op("NegativeLogLikelihoodLoss", (mx_value_id[]){x, t}, 2, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "target");
}

Test(norm_infer, nllloss_weight_length) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(3, 5));
  mx_value_id t = input("t", MX_INT32, SHAPE(3));
  mx_value_id w = input("w", MX_FLOAT32, SHAPE(4));
  op("NegativeLogLikelihoodLoss", (mx_value_id[]){x, t, w}, 3, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "weight");
}

Test(norm_infer, sce_log_prob_output) {
  mx_value_id x = input("x", MX_FLOAT16, SHAPE(S("n"), 5, S("d")));
  mx_value_id t = input("t", MX_INT64, SHAPE(S("n"), S("d")));
  mx_value_id out[2];
  mx_attr r = mx_attr_string("reduction", "sum");
  op_multi("SoftmaxCrossEntropyLoss", (mx_value_id[]){x, t}, 2, &r, 1, out, 2);
  infer_ok();
  expect_shape(out[0], MX_FLOAT16, SCALAR);
  expect_shape_str(out[1], MX_FLOAT16, "[n, 5, d]");
}

Test(norm_infer, sce_target_must_be_integer) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(3, 5));
  mx_value_id t = input("t", MX_FLOAT32, SHAPE(3));
  op("SoftmaxCrossEntropyLoss", (mx_value_id[]){x, t}, 2, NULL, 0);
  infer_fails(MX_ERR_DTYPE, "target");
}
