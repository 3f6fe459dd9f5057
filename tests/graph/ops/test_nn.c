/* Inference tests of the nn op definitions (graph/ops/nn.c): Softmax's opset-dependent axis,
 * LayerNormalization's statistics outputs, RMSNormalization's output type, Attention shapes in
 * 3-D and 4-D form with grouped heads and a symbolic KV cache (present = past + 1), and
 * RotaryEmbedding, plus the error cases. */
#include <criterion/criterion.h>
#include <string.h>

#include "graph/ops/ops_support.h"
#include "mixrt/graph.h"

static void setup(void) { mxt_ops_setup("nn"); }

TestSuite(nn_infer, .init = setup, .fini = mxt_ops_teardown);

/* --- Softmax ---------------------------------------------------------------------------------- */

Test(nn_infer, softmax_keeps_shape_and_dtype) {
  mx_value_id x = input("x", MX_FLOAT16, SHAPE(S("b"), 12, S("s"), S("s")));
  mx_value_id y = op("Softmax", &x, 1, NULL, 0);
  mx_value_id z = op("LogSoftmax", &x, 1, NULL, 0);
  infer_ok();
  expect_shape_str(y, MX_FLOAT16, "[b, 12, s, s]");
  expect_shape_str(z, MX_FLOAT16, "[b, 12, s, s]");
}

Test(nn_infer, softmax_default_axis_depends_on_opset) {
  /* Opset 11: the default axis is 1, out of range for a 1-D input. */
  cr_assert_eq(mx_graph_set_opset(G, "", 11), MX_OK);
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(8));
  op("Softmax", &x, 1, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "axis 1");
}

Test(nn_infer, softmax_default_axis_opset13_is_last) {
  cr_assert_eq(mx_graph_set_opset(G, "", 13), MX_OK);
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(8));
  mx_value_id y = op("Softmax", &x, 1, NULL, 0);
  infer_ok();
  expect_shape_str(y, MX_FLOAT32, "[8]");
}

Test(nn_infer, softmax_errors) {
  mx_value_id x = input("x", MX_INT32, SHAPE(2, 3));
  op("Softmax", &x, 1, NULL, 0);
  infer_fails(MX_ERR_DTYPE, "int32");
}

Test(nn_infer, softmax_axis_out_of_range) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2, 3));
  mx_attr ax = mx_attr_int("axis", -3);
  op("Softmax", &x, 1, &ax, 1);
  infer_fails(MX_ERR_SHAPE, "axis -3");
}

/* --- norms ------------------------------------------------------------------------------------ */

Test(nn_infer, layernorm_statistics_shapes) {
  mx_value_id x = input("x", MX_FLOAT16, SHAPE(S("b"), S("s"), 768));
  mx_value_id sc = input("scale", MX_FLOAT16, SHAPE(768));
  mx_value_id bi = input("bias", MX_FLOAT16, SHAPE(768));
  mx_value_id o1[3], o2[3];
  op_multi("LayerNormalization", (mx_value_id[]){x, sc, bi}, 3, NULL, 0, o1, 3);
  mx_attr ax = mx_attr_int("axis", 1);
  op_multi("LayerNormalization", (mx_value_id[]){x, sc}, 2, &ax, 1, o2, 3);
  infer_ok();
  expect_shape_str(o1[0], MX_FLOAT16, "[b, s, 768]");
  expect_shape_str(o1[1], MX_FLOAT32, "[b, s, 1]");
  expect_shape_str(o1[2], MX_FLOAT32, "[b, s, 1]");
  expect_shape_str(o2[1], MX_FLOAT32, "[b, 1, 1]");
}

Test(nn_infer, layernorm_scale_dtype_must_match) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2, 8));
  mx_value_id sc = input("scale", MX_FLOAT16, SHAPE(8));
  op("LayerNormalization", (mx_value_id[]){x, sc}, 2, NULL, 0);
  infer_fails(MX_ERR_DTYPE, "input 1");
}

Test(nn_infer, layernorm_bad_stash_type) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2, 8));
  mx_value_id sc = input("scale", MX_FLOAT32, SHAPE(8));
  mx_attr st = mx_attr_int("stash_type", 7);
  op("LayerNormalization", (mx_value_id[]){x, sc}, 2, &st, 1);
  infer_fails(MX_ERR_INVALID_GRAPH, "stash_type");
}

Test(nn_infer, rmsnorm_output_has_scale_type) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("b"), 4096));
  mx_value_id sc = input("scale", MX_FLOAT16, SHAPE(4096));
  mx_value_id y = op("RMSNormalization", (mx_value_id[]){x, sc}, 2, NULL, 0);
  infer_ok();
  expect_shape_str(y, MX_FLOAT16, "[b, 4096]");
}

Test(nn_infer, rmsnorm_axis_out_of_range) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2, 8));
  mx_value_id sc = input("scale", MX_FLOAT32, SHAPE(8));
  mx_attr ax = mx_attr_int("axis", 2);
  op("RMSNormalization", (mx_value_id[]){x, sc}, 2, &ax, 1);
  infer_fails(MX_ERR_SHAPE, "axis 2");
}

/* --- Attention -------------------------------------------------------------------------------- */

Test(nn_infer, attention_decode_step_with_symbolic_past) {
  mx_dim b = S("batch"), past = S("past");
  mx_value_id q = input("q", MX_FLOAT32, SHAPE(b, 32, 1, 64));
  mx_value_id k = input("k", MX_FLOAT32, SHAPE(b, 8, 1, 64));
  mx_value_id v = input("v", MX_FLOAT32, SHAPE(b, 8, 1, 64));
  mx_value_id pk = input("pk", MX_FLOAT32, SHAPE(b, 8, past, 64));
  mx_value_id pv = input("pv", MX_FLOAT32, SHAPE(b, 8, past, 64));
  mx_value_id outs[4];
  mx_attr causal = mx_attr_int("is_causal", 1);
  op_multi("Attention", (mx_value_id[]){q, k, v, MX_NO_VALUE, pk, pv}, 6, &causal, 1, outs, 4);
  infer_ok();
  expect_shape_str(outs[0], MX_FLOAT32, "[batch, 32, 1, 64]");
  expect_shape_str(outs[1], MX_FLOAT32, "[batch, 8, past + 1, 64]");
  expect_shape_str(outs[2], MX_FLOAT32, "[batch, 8, past + 1, 64]");
  expect_shape_str(outs[3], MX_FLOAT32, "[batch, 32, 1, past + 1]");
  /* The present length is a real expression, not a fresh symbol. */
  mx_shape pres;
  mx_graph_value_shape(G, outs[1], &pres);
  cr_assert_eq(pres.dims[2], mx_sym_add(T, past, 1));
}

Test(nn_infer, attention_3d_grouped_heads) {
  mx_value_id q = input("q", MX_FLOAT16, SHAPE(2, S("s"), 512));
  mx_value_id k = input("k", MX_FLOAT16, SHAPE(2, S("s"), 128));
  mx_value_id v = input("v", MX_FLOAT16, SHAPE(2, S("s"), 96));
  mx_attr at[] = {mx_attr_int("q_num_heads", 8), mx_attr_int("kv_num_heads", 2)};
  mx_value_id outs[3];
  op_multi("Attention", (mx_value_id[]){q, k, v}, 3, at, 2, outs, 3);
  infer_ok();
  expect_shape_str(outs[0], MX_FLOAT16, "[2, s, 384]");
  expect_shape_str(outs[1], MX_FLOAT16, "[2, 2, s, 64]");
  expect_shape_str(outs[2], MX_FLOAT16, "[2, 2, s, 48]");
}

Test(nn_infer, attention_3d_needs_head_counts) {
  mx_value_id q = input("q", MX_FLOAT32, SHAPE(2, 4, 64));
  op("Attention", (mx_value_id[]){q, q, q}, 3, NULL, 0);
  infer_fails(MX_ERR_INVALID_GRAPH, "q_num_heads");
}

Test(nn_infer, attention_heads_must_group) {
  mx_value_id q = input("q", MX_FLOAT32, SHAPE(1, 3, 4, 8));
  mx_value_id k = input("k", MX_FLOAT32, SHAPE(1, 2, 4, 8));
  op("Attention", (mx_value_id[]){q, k, k}, 3, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "multiple");
}

Test(nn_infer, attention_head_size_mismatch) {
  mx_value_id q = input("q", MX_FLOAT32, SHAPE(1, 2, 4, 8));
  mx_value_id k = input("k", MX_FLOAT32, SHAPE(1, 2, 4, 16));
  op("Attention", (mx_value_id[]){q, k, k}, 3, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "head size");
}

Test(nn_infer, attention_mask_dtype) {
  mx_value_id q = input("q", MX_FLOAT32, SHAPE(1, 2, 4, 8));
  mx_value_id m = input("m", MX_INT32, SHAPE(4, 4));
  op("Attention", (mx_value_id[]){q, q, q, m}, 4, NULL, 0);
  infer_fails(MX_ERR_DTYPE, "input 3");
}

Test(nn_infer, attention_bool_mask_and_nonpad_at_opset24) {
  cr_assert_eq(mx_graph_set_opset(G, "", 24), MX_OK);
  mx_value_id q = input("q", MX_FLOAT32, SHAPE(2, 2, 4, 8));
  mx_value_id m = input("m", MX_BOOL, SHAPE(4, 6));
  mx_value_id kv = input("kv", MX_FLOAT32, SHAPE(2, 2, 6, 8));
  mx_value_id np = input("np", MX_INT64, SHAPE(2));
  mx_value_id y = op("Attention", (mx_value_id[]){q, kv, kv, m, MX_NO_VALUE, MX_NO_VALUE, np}, 7, NULL, 0);
  infer_ok();
  expect_shape_str(y, MX_FLOAT32, "[2, 2, 4, 8]");
}

Test(nn_infer, attention_nonpad_needs_opset24) {
  cr_assert_eq(mx_graph_set_opset(G, "", 23), MX_OK);
  mx_value_id q = input("q", MX_FLOAT32, SHAPE(2, 2, 4, 8));
  mx_value_id np = input("np", MX_INT64, SHAPE(2));
  op("Attention", (mx_value_id[]){q, q, q, MX_NO_VALUE, MX_NO_VALUE, MX_NO_VALUE, np}, 7, NULL, 0);
  infer_fails(MX_ERR_INVALID_GRAPH, "opset 24");
}

Test(nn_infer, attention_bad_mode) {
  mx_value_id q = input("q", MX_FLOAT32, SHAPE(2, 2, 4, 8));
  mx_attr mode = mx_attr_int("qk_matmul_output_mode", 4);
  op("Attention", (mx_value_id[]){q, q, q}, 3, &mode, 1);
  infer_fails(MX_ERR_INVALID_GRAPH, "qk_matmul_output_mode");
}

/* --- RotaryEmbedding -------------------------------------------------------------------------- */

Test(nn_infer, rotary_keeps_shape) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("b"), S("s"), 256));
  mx_value_id c = input("cos", MX_FLOAT32, SHAPE(1024, 32));
  mx_value_id ids = input("ids", MX_INT64, SHAPE(S("b"), S("s")));
  mx_attr at[] = {mx_attr_int("num_heads", 4), mx_attr_int("rotary_embedding_dim", 64)};
  mx_value_id y = op("RotaryEmbedding", (mx_value_id[]){x, c, c, ids}, 4, at, 2);
  infer_ok();
  expect_shape_str(y, MX_FLOAT32, "[b, s, 256]");
}

Test(nn_infer, rotary_3d_needs_num_heads) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(1, 4, 64));
  mx_value_id c = input("cos", MX_FLOAT32, SHAPE(1, 4, 32));
  op("RotaryEmbedding", (mx_value_id[]){x, c, c}, 3, NULL, 0);
  infer_fails(MX_ERR_INVALID_GRAPH, "num_heads");
}

Test(nn_infer, rotary_position_ids_int64) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(1, 2, 4, 8));
  mx_value_id c = input("cos", MX_FLOAT32, SHAPE(16, 4));
  mx_value_id ids = input("ids", MX_INT32, SHAPE(1, 4));
  op("RotaryEmbedding", (mx_value_id[]){x, c, c, ids}, 4, NULL, 0);
  infer_fails(MX_ERR_DTYPE, "position_ids");
}

Test(nn_infer, rotary_odd_dim_rejected) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(1, 2, 4, 8));
  mx_value_id c = input("cos", MX_FLOAT32, SHAPE(1, 4, 4));
  mx_attr rd = mx_attr_int("rotary_embedding_dim", 3);
  op("RotaryEmbedding", (mx_value_id[]){x, c, c}, 3, &rd, 1);
  infer_fails(MX_ERR_INVALID_GRAPH, "even");
}
