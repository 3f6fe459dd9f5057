/* Inference tests of the recurrent, signal, LLM-block and random op definitions
 * (graph/ops/rnn.c, signal.c, llm.c, random.c): RNN/GRU/LSTM outputs over a symbolic sequence
 * and batch in both layouts, DFT/STFT/window/mel sizes from input values, LinearAttention,
 * FlexAttention and CausalConvWithState shapes with their states, the random ops' shapes and
 * dtypes, and the refused attributes and shapes of each. */
#include <criterion/criterion.h>
#include <string.h>

#include "mixrt/graph.h"
#include "ops/ops_support.h"

static void setup(void) { mxt_ops_setup("rnn"); }

TestSuite(rnn_infer, .init = setup, .fini = mxt_ops_teardown);

/* --- RNN / GRU / LSTM --------------------------------------------------------------------------- */

Test(rnn_infer, lstm_bidirectional_symbolic_seq_and_batch) {
  mx_value_id in[3] = {input("x", MX_FLOAT32, SHAPE(S("s"), S("b"), 10)), input("w", MX_FLOAT32, SHAPE(2, 64, 10)),
                       input("r", MX_FLOAT32, SHAPE(2, 64, 16))};
  mx_attr a[2] = {mx_attr_string("direction", "bidirectional"), mx_attr_int("hidden_size", 16)};
  mx_value_id out[3];
  op_multi("LSTM", in, 3, a, 2, out, 3);
  infer_ok();
  expect_shape_str(out[0], MX_FLOAT32, "[s, 2, b, 16]");
  expect_shape_str(out[1], MX_FLOAT32, "[2, b, 16]");
  expect_shape_str(out[2], MX_FLOAT32, "[2, b, 16]");
}

Test(rnn_infer, gru_layout1_hidden_from_r) {
  mx_value_id in[3] = {input("x", MX_FLOAT16, SHAPE(S("b"), S("s"), 5)), input("w", MX_FLOAT16, SHAPE(1, 24, 5)),
                       input("r", MX_FLOAT16, SHAPE(1, 24, 8))};
  mx_attr a = mx_attr_int("layout", 1);
  mx_value_id out[2];
  op_multi("GRU", in, 3, &a, 1, out, 2);
  infer_ok();
  expect_shape_str(out[0], MX_FLOAT16, "[b, s, 1, 8]");
  expect_shape_str(out[1], MX_FLOAT16, "[b, 1, 8]");
}

Test(rnn_infer, rnn_refuses_bad_direction) {
  mx_value_id in[3] = {input("x", MX_FLOAT32, SHAPE(4, 1, 3)), input("w", MX_FLOAT32, SHAPE(1, 2, 3)),
                       input("r", MX_FLOAT32, SHAPE(1, 2, 2))};
  mx_attr a = mx_attr_string("direction", "sideways");
  op("RNN", in, 3, &a, 1);
  infer_fails(MX_ERR_INVALID_GRAPH, "direction 'sideways'");
}

Test(rnn_infer, lstm_refuses_w_of_wrong_gate_count) {
  /* LSTM has 4 gates: W must be [1, 4 * 8, 3]. */
  mx_value_id in[3] = {input("x", MX_FLOAT32, SHAPE(4, 1, 3)), input("w", MX_FLOAT32, SHAPE(1, 24, 3)),
                       input("r", MX_FLOAT32, SHAPE(1, 32, 8))};
  op("LSTM", in, 3, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "W");
}

Test(rnn_infer, rnn_refuses_unknown_activation) {
  mx_value_id in[3] = {input("x", MX_FLOAT32, SHAPE(4, 1, 3)), input("w", MX_FLOAT32, SHAPE(1, 2, 3)),
                       input("r", MX_FLOAT32, SHAPE(1, 2, 2))};
  const char *acts[1] = {"Wiggle"};
  mx_attr a = {.name = "activations", .type = MX_ATTR_STRINGS, .strings = acts, .count = 1};
  op("RNN", in, 3, &a, 1);
  infer_fails(MX_ERR_INVALID_GRAPH, "Wiggle");
}

Test(rnn_infer, rnn_refuses_integer_input) {
  mx_value_id in[3] = {input("x", MX_INT32, SHAPE(4, 1, 3)), input("w", MX_INT32, SHAPE(1, 2, 3)),
                       input("r", MX_INT32, SHAPE(1, 2, 2))};
  op("RNN", in, 3, NULL, 0);
  infer_fails(MX_ERR_DTYPE, "int32");
}

/* --- signal ------------------------------------------------------------------------------------- */

Test(rnn_infer, dft_onesided_halves_the_axis) {
  cr_assert_eq(mx_graph_set_opset(G, "", 20), MX_OK);
  mx_value_id in[3] = {input("x", MX_FLOAT32, SHAPE(S("b"), 16, 1)), MX_NO_VALUE, const_scalar("axis", MX_INT64, 1)};
  mx_attr a = mx_attr_int("onesided", 1);
  mx_value_id y = op("DFT", in, 3, &a, 1);
  infer_ok();
  expect_shape_str(y, MX_FLOAT32, "[b, 9, 2]");
}

Test(rnn_infer, dft_inverse_onesided_gives_real_signal) {
  cr_assert_eq(mx_graph_set_opset(G, "", 17), MX_OK);
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2, 6, 2));
  mx_attr a[3] = {mx_attr_int("axis", 1), mx_attr_int("inverse", 1), mx_attr_int("onesided", 1)};
  mx_value_id y = op("DFT", &x, 1, a, 3);
  infer_ok();
  expect_shape_str(y, MX_FLOAT32, "[2, 10, 1]");
}

Test(rnn_infer, dft_refuses_the_complex_axis) {
  cr_assert_eq(mx_graph_set_opset(G, "", 17), MX_OK);
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2, 6, 2));
  mx_attr a = mx_attr_int("axis", 2);
  op("DFT", &x, 1, &a, 1);
  infer_fails(MX_ERR_SHAPE, "axis 2");
}

Test(rnn_infer, stft_frames_stay_symbolic) {
  mx_value_id in[4] = {input("x", MX_FLOAT32, SHAPE(1, S("n"), 1)), const_scalar("step", MX_INT64, 8), MX_NO_VALUE,
                       const_scalar("len", MX_INT64, 16)};
  mx_value_id y = op("STFT", in, 4, NULL, 0);
  infer_ok();
  mx_shape s = shape_of(y);
  cr_assert_eq(s.rank, 4);
  cr_assert(is_expr(s.dims[1]));
  cr_assert_eq(s.dims[2], 9);
  cr_assert_eq(s.dims[3], 2);
}

Test(rnn_infer, window_size_from_value_and_dtype) {
  mx_value_id size = const_scalar("size", MX_INT64, 10);
  mx_attr a = mx_attr_int("output_datatype", MX_FLOAT64);
  mx_value_id y = op("HannWindow", &size, 1, &a, 1);
  infer_ok();
  expect_shape_str(y, MX_FLOAT64, "[10]");
}

Test(rnn_infer, window_refuses_string_output) {
  mx_value_id size = const_scalar("size", MX_INT64, 10);
  mx_attr a = mx_attr_int("output_datatype", 8);
  op("BlackmanWindow", &size, 1, &a, 1);
  infer_fails(MX_ERR_INVALID_GRAPH, "output_datatype");
}

Test(rnn_infer, mel_weight_matrix_shape) {
  mx_value_id in[5] = {const_scalar("mel", MX_INT64, 8), const_scalar("n", MX_INT64, 16),
                       const_scalar("rate", MX_INT64, 8192), const_scalar("lo", MX_FLOAT32, 0),
                       const_scalar("hi", MX_FLOAT32, 4096)};
  mx_value_id y = op("MelWeightMatrix", in, 5, NULL, 0);
  infer_ok();
  expect_shape_str(y, MX_FLOAT32, "[9, 8]");
}

/* --- LLM blocks --------------------------------------------------------------------------------- */

Test(rnn_infer, swiglu_broadcasts) {
  mx_value_id in[2] = {input("a", MX_FLOAT16, SHAPE(S("t"), 64)), input("b", MX_FLOAT16, SHAPE(64))};
  mx_value_id y = op("SwiGLU", in, 2, NULL, 0);
  infer_ok();
  expect_shape_str(y, MX_FLOAT16, "[t, 64]");
}

Test(rnn_infer, linear_attention_grouped_heads_and_state) {
  mx_value_id in[6] = {input("q", MX_FLOAT32, SHAPE(S("b"), S("t"), 64)), input("k", MX_FLOAT32, SHAPE(S("b"), S("t"), 32)),
                       input("v", MX_FLOAT32, SHAPE(S("b"), S("t"), 48)), MX_NO_VALUE,
                       input("g", MX_FLOAT32, SHAPE(S("b"), S("t"), 4)), input("beta", MX_FLOAT32, SHAPE(S("b"), S("t"), 4))};
  mx_attr a[2] = {mx_attr_int("q_num_heads", 8), mx_attr_int("kv_num_heads", 4)};
  mx_value_id out[2];
  op_multi("LinearAttention", in, 6, a, 2, out, 2);
  infer_ok();
  expect_shape_str(out[0], MX_FLOAT32, "[b, t, 96]");
  expect_shape_str(out[1], MX_FLOAT32, "[b, 4, 8, 12]");
}

Test(rnn_infer, linear_attention_delta_needs_beta) {
  mx_value_id in[3] = {input("q", MX_FLOAT32, SHAPE(2, 4, 32)), input("k", MX_FLOAT32, SHAPE(2, 4, 32)),
                       input("v", MX_FLOAT32, SHAPE(2, 4, 32))};
  mx_attr a[3] = {mx_attr_int("q_num_heads", 4), mx_attr_int("kv_num_heads", 4), mx_attr_string("update_rule", "delta")};
  mx_value_id out[2];
  op_multi("LinearAttention", in, 3, a, 3, out, 2);
  infer_fails(MX_ERR_INVALID_GRAPH, "beta");
}

Test(rnn_infer, linear_attention_refuses_ungrouped_heads) {
  mx_value_id in[3] = {input("q", MX_FLOAT32, SHAPE(2, 4, 30)), input("k", MX_FLOAT32, SHAPE(2, 4, 20)),
                       input("v", MX_FLOAT32, SHAPE(2, 4, 20))};
  mx_attr a[3] = {mx_attr_int("q_num_heads", 3), mx_attr_int("kv_num_heads", 2), mx_attr_string("update_rule", "linear")};
  op("LinearAttention", in, 3, a, 3);
  infer_fails(MX_ERR_INVALID_GRAPH, "multiple");
}

Test(rnn_infer, causal_conv_state_keeps_kernel_minus_one) {
  mx_value_id in[2] = {input("x", MX_FLOAT32, SHAPE(S("b"), 16, S("t"))), input("w", MX_FLOAT32, SHAPE(16, 1, 4))};
  mx_value_id out[2];
  op_multi("CausalConvWithState", in, 2, NULL, 0, out, 2);
  infer_ok();
  expect_shape_str(out[0], MX_FLOAT32, "[b, 16, t]");
  expect_shape_str(out[1], MX_FLOAT32, "[b, 16, 3]");
}

Test(rnn_infer, causal_conv_refuses_non_depthwise_weight) {
  mx_value_id in[2] = {input("x", MX_FLOAT32, SHAPE(2, 16, 8)), input("w", MX_FLOAT32, SHAPE(16, 2, 4))};
  op("CausalConvWithState", in, 2, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "depthwise");
}

Test(rnn_infer, causal_conv_refuses_unknown_activation) {
  mx_value_id in[2] = {input("x", MX_FLOAT32, SHAPE(2, 16, 8)), input("w", MX_FLOAT32, SHAPE(16, 1, 4))};
  mx_attr a = mx_attr_string("activation", "gelu");
  op("CausalConvWithState", in, 2, &a, 1);
  infer_fails(MX_ERR_INVALID_GRAPH, "gelu");
}

Test(rnn_infer, flex_attention_grouped_heads) {
  cr_assert_eq(mx_graph_set_opset(G, "ai.onnx.preview", 1), MX_OK);
  mx_value_id in[3] = {input("q", MX_FLOAT32, SHAPE(S("b"), 8, S("l"), 16)), input("k", MX_FLOAT32, SHAPE(S("b"), 2, S("s"), 16)),
                       input("v", MX_FLOAT32, SHAPE(S("b"), 2, S("s"), 32))};
  mx_value_id y;
  mx_node_desc d = {.op_type = "FlexAttention", .domain = "ai.onnx.preview", .inputs = in, .n_inputs = 3, .n_outputs = 1};
  cr_assert_eq(mx_graph_add_node(G, &d, &y), MX_OK, "%s", mx_graph_last_error(G));
  infer_ok();
  expect_shape_str(y, MX_FLOAT32, "[b, 8, l, 32]");
}

/* --- random ------------------------------------------------------------------------------------- */

Test(rnn_infer, random_normal_shape_and_dtype_from_attributes) {
  int64_t shape[3] = {2, 3, 4};
  mx_attr a[2] = {mx_attr_ints("shape", shape, 3), mx_attr_int("dtype", MX_FLOAT64)};
  mx_value_id y = op("RandomNormal", NULL, 0, a, 2);
  infer_ok();
  expect_shape_str(y, MX_FLOAT64, "[2, 3, 4]");
}

Test(rnn_infer, random_uniform_like_keeps_symbolic_shape) {
  mx_value_id x = input("x", MX_FLOAT16, SHAPE(S("b"), 7));
  mx_value_id y = op("RandomUniformLike", &x, 1, NULL, 0);
  infer_ok();
  expect_shape_str(y, MX_FLOAT16, "[b, 7]");
}

Test(rnn_infer, bernoulli_output_dtype_attribute) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(10));
  mx_attr a = mx_attr_int("dtype", MX_BOOL);
  mx_value_id y = op("Bernoulli", &x, 1, &a, 1);
  infer_ok();
  expect_shape_str(y, MX_BOOL, "[10]");
}

Test(rnn_infer, multinomial_samples) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("b"), 5));
  mx_attr a[2] = {mx_attr_int("sample_size", 3), mx_attr_int("dtype", MX_INT64)};
  mx_value_id y = op("Multinomial", &x, 1, a, 2);
  infer_ok();
  expect_shape_str(y, MX_INT64, "[b, 3]");
}

Test(rnn_infer, random_uniform_refuses_integer_dtype) {
  int64_t shape[1] = {4};
  mx_attr a[2] = {mx_attr_ints("shape", shape, 1), mx_attr_int("dtype", MX_INT32)};
  op("RandomUniform", NULL, 0, a, 2);
  infer_fails(MX_ERR_INVALID_GRAPH, "dtype");
}
