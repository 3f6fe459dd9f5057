/* Inference tests of the recurrent, signal, LLM-block and random op definitions
 * (graph/ops/rnn.c, signal.c, llm.c, random.c): RNN/GRU/LSTM outputs over a symbolic sequence
 * and batch in both layouts, DFT/STFT/window/mel sizes from input values, LinearAttention,
 * FlexAttention and CausalConvWithState shapes with their states, the random ops' shapes and
 * dtypes, and the refused attributes and shapes of each; then (suite rnn_run) the kernels run
 * through the reference interpreter: recurrent directions, sequence_lens and dtypes, DFT lengths
 * and the random ops' repeatability. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/ops/ops_support.h"
#include "mixrt/graph.h"
#include "mixrt/reference.h"
#include "mixrt/tensor.h"

static void setup(void) { mxt_ops_setup("rnn"); }

TestSuite(rnn_infer, .init = setup, .fini = mxt_ops_teardown);

/* --- RNN / GRU / LSTM --------------------------------------------------------------------------- */

Test(rnn_infer, lstm_bidirectional_symbolic_seq_and_batch) {
  mx_value_id in[3] = {input("x", MX_FLOAT32, SHAPE(S("s"), S("b"), 10)),
                       input("w", MX_FLOAT32, SHAPE(2, 64, 10)), input("r", MX_FLOAT32, SHAPE(2, 64, 16))};
  mx_attr a[2] = {mx_attr_string("direction", "bidirectional"), mx_attr_int("hidden_size", 16)};
  mx_value_id out[3];
  op_multi("LSTM", in, 3, a, 2, out, 3);
  infer_ok();
  expect_shape_str(out[0], MX_FLOAT32, "[s, 2, b, 16]");
  expect_shape_str(out[1], MX_FLOAT32, "[2, b, 16]");
  expect_shape_str(out[2], MX_FLOAT32, "[2, b, 16]");
}

Test(rnn_infer, gru_layout1_hidden_from_r) {
  mx_value_id in[3] = {input("x", MX_FLOAT16, SHAPE(S("b"), S("s"), 5)),
                       input("w", MX_FLOAT16, SHAPE(1, 24, 5)), input("r", MX_FLOAT16, SHAPE(1, 24, 8))};
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
  mx_value_id in[3] = {input("x", MX_FLOAT32, SHAPE(S("b"), 16, 1)), MX_NO_VALUE,
                       const_scalar("axis", MX_INT64, 1)};
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
  mx_value_id in[4] = {input("x", MX_FLOAT32, SHAPE(1, S("n"), 1)), const_scalar("step", MX_INT64, 8),
                       MX_NO_VALUE, const_scalar("len", MX_INT64, 16)};
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
  mx_value_id in[6] = {
      input("q", MX_FLOAT32, SHAPE(S("b"), S("t"), 64)), input("k", MX_FLOAT32, SHAPE(S("b"), S("t"), 32)),
      input("v", MX_FLOAT32, SHAPE(S("b"), S("t"), 48)), MX_NO_VALUE,
      input("g", MX_FLOAT32, SHAPE(S("b"), S("t"), 4)),  input("beta", MX_FLOAT32, SHAPE(S("b"), S("t"), 4))};
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
  mx_attr a[3] = {mx_attr_int("q_num_heads", 4), mx_attr_int("kv_num_heads", 4),
                  mx_attr_string("update_rule", "delta")};
  mx_value_id out[2];
  op_multi("LinearAttention", in, 3, a, 3, out, 2);
  infer_fails(MX_ERR_INVALID_GRAPH, "beta");
}

Test(rnn_infer, linear_attention_refuses_ungrouped_heads) {
  mx_value_id in[3] = {input("q", MX_FLOAT32, SHAPE(2, 4, 30)), input("k", MX_FLOAT32, SHAPE(2, 4, 20)),
                       input("v", MX_FLOAT32, SHAPE(2, 4, 20))};
  mx_attr a[3] = {mx_attr_int("q_num_heads", 3), mx_attr_int("kv_num_heads", 2),
                  mx_attr_string("update_rule", "linear")};
  op("LinearAttention", in, 3, a, 3);
  infer_fails(MX_ERR_INVALID_GRAPH, "multiple");
}

Test(rnn_infer, causal_conv_state_keeps_kernel_minus_one) {
  mx_value_id in[2] = {input("x", MX_FLOAT32, SHAPE(S("b"), 16, S("t"))),
                       input("w", MX_FLOAT32, SHAPE(16, 1, 4))};
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
  mx_value_id in[3] = {input("q", MX_FLOAT32, SHAPE(S("b"), 8, S("l"), 16)),
                       input("k", MX_FLOAT32, SHAPE(S("b"), 2, S("s"), 16)),
                       input("v", MX_FLOAT32, SHAPE(S("b"), 2, S("s"), 32))};
  mx_value_id y;
  mx_node_desc d = {
      .op_type = "FlexAttention", .domain = "ai.onnx.preview", .inputs = in, .n_inputs = 3, .n_outputs = 1};
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

/* --- running the kernels through the reference interpreter -------------------------------------
 * The ONNX node tests only run forward layers; these check the other directions and
 * sequence_lens against forward runs over rearranged inputs, the float64 and float16 paths
 * against float32, the transforms against a direct sum, and that seeded random ops repeat. */

/* Runs one node of type opname over the given host tensors (NULL: omitted input) and returns
 * n_out outputs (owned by the caller). */
static void run_node(const char *opname, mx_tensor *const *ins, int n_in, const mx_attr *attrs, int na,
                     mx_tensor *outs, int n_out) {
  mx_graph *g;
  cr_assert_eq(mx_graph_create("run", &g), MX_OK);
  mx_value_id iv[8], ov[4];
  mx_tensor feed[8];
  int nf = 0;
  for (int i = 0; i < n_in; i++) {
    if (!ins[i]) {
      iv[i] = MX_NO_VALUE;
      continue;
    }
    char name[8];
    snprintf(name, sizeof name, "in%d", i);
    mx_shape s = {.rank = ins[i]->rank};
    for (int d = 0; d < s.rank; d++) s.dims[d] = ins[i]->dims[d];
    cr_assert_eq(mx_graph_add_input(g, name, ins[i]->dtype, &s, &iv[i]), MX_OK);
    feed[nf++] = *ins[i];
  }
  mx_node_desc nd = {.op_type = opname,
                     .inputs = iv,
                     .n_inputs = (size_t)n_in,
                     .attrs = attrs,
                     .n_attrs = (size_t)na,
                     .n_outputs = (size_t)n_out};
  cr_assert_eq(mx_graph_add_node(g, &nd, ov), MX_OK, "%s", mx_graph_last_error(g));
  for (int i = 0; i < n_out; i++) cr_assert_eq(mx_graph_add_output(g, ov[i]), MX_OK);
  cr_assert_eq(mx_graph_infer(g), MX_OK, "%s", mx_graph_last_error(g));
  mx_error err = {0};
  memset(outs, 0, sizeof(mx_tensor) * (size_t)n_out);
  cr_assert_eq(mx_reference_run(g, feed, (size_t)nf, outs, (size_t)n_out, &err), MX_OK, "%s", err.message);
  mx_graph_destroy(g);
}

/* A float32 tensor of uniform values in [-1, 1) from a fixed sequence. */
static mx_tensor *rand_f32(int32_t rank, const int64_t *dims) {
  static uint32_t state = 12345;
  mx_tensor *t = calloc(1, sizeof *t);
  cr_assert_eq(mx_tensor_alloc(MX_FLOAT32, rank, dims, t), MX_OK);
  int64_t n;
  mx_tensor_numel(t, &n);
  for (int64_t i = 0; i < n; i++) {
    state = state * 1664525u + 1013904223u;
    ((float *)t->data)[i] = (float)(state >> 8) / 8388608.0f - 1.0f;
  }
  return t;
}

/* Rows [from, from + count) of the leading dim of t, as a new tensor. */
static mx_tensor *rows_of(const mx_tensor *t, int64_t from, int64_t count) {
  int64_t dims[MX_MAX_RANK], row = 1;
  for (int d = 0; d < t->rank; d++) dims[d] = t->dims[d];
  for (int d = 1; d < t->rank; d++) row *= t->dims[d];
  dims[0] = count;
  mx_tensor *r = rand_f32(t->rank, dims);
  memcpy(r->data, (const float *)t->data + from * row, (size_t)(count * row) * sizeof(float));
  return r;
}

static void free_tensor(mx_tensor *t) {
  if (!t) return;
  mx_tensor_release(t);
  free(t);
}

static float at_f(const mx_tensor *t, int64_t i) { return ((const float *)t->data)[i]; }

enum { RS = 5, RB = 2, RI = 3, RH = 4 };

/* Inputs of a bidirectional layer of kind ("RNN", "GRU", "LSTM") and one direction's slice. */
typedef struct layer_inputs {
  mx_tensor *all[8];    /* X, W, R, B, sequence_lens, initial_h, initial_c, P for both directions */
  mx_tensor *dir[2][8]; /* the same for one direction */
  int n_in, n_out;
} layer_inputs;

static void make_layer(const char *kind, layer_inputs *li) {
  int gates = strcmp(kind, "RNN") == 0 ? 1 : strcmp(kind, "GRU") == 0 ? 3 : 4;
  bool lstm = gates == 4;
  memset(li, 0, sizeof *li);
  li->n_in = lstm ? 8 : 6;
  li->n_out = lstm ? 3 : 2;
  li->all[0] = rand_f32(3, (int64_t[]){RS, RB, RI});
  li->all[1] = rand_f32(3, (int64_t[]){2, gates * RH, RI});
  li->all[2] = rand_f32(3, (int64_t[]){2, gates * RH, RH});
  li->all[3] = rand_f32(2, (int64_t[]){2, 2 * gates * RH});
  li->all[5] = rand_f32(3, (int64_t[]){2, RB, RH});
  if (lstm) {
    li->all[6] = rand_f32(3, (int64_t[]){2, RB, RH});
    li->all[7] = rand_f32(2, (int64_t[]){2, 3 * RH});
  }
  for (int d = 0; d < 2; d++) {
    li->dir[d][0] = li->all[0];
    for (int i = 1; i < 8; i++) li->dir[d][i] = li->all[i] ? rows_of(li->all[i], d, 1) : NULL;
  }
}

static void free_layer(layer_inputs *li) {
  for (int d = 0; d < 2; d++)
    for (int i = 1; i < 8; i++) free_tensor(li->dir[d][i]);
  for (int i = 0; i < 8; i++) free_tensor(li->all[i]);
}

static void release_all(mx_tensor *t, int n) {
  for (int i = 0; i < n; i++) mx_tensor_release(&t[i]);
}

static void check_directions(const char *kind, int linear_before_reset) {
  layer_inputs li;
  make_layer(kind, &li);
  mx_attr fwd[2] = {mx_attr_string("direction", "forward"),
                    mx_attr_int("linear_before_reset", linear_before_reset)};
  mx_attr rev[2] = {mx_attr_string("direction", "reverse"),
                    mx_attr_int("linear_before_reset", linear_before_reset)};
  mx_attr bi[2] = {mx_attr_string("direction", "bidirectional"),
                   mx_attr_int("linear_before_reset", linear_before_reset)};
  int na = strcmp(kind, "GRU") == 0 ? 2 : 1;
  /* Reverse over X equals forward over X reversed in time, read backwards. */
  mx_tensor *xr = rand_f32(3, (int64_t[]){RS, RB, RI});
  for (int t = 0; t < RS; t++)
    memcpy((float *)xr->data + t * RB * RI, (float *)li.all[0]->data + (RS - 1 - t) * RB * RI,
           RB * RI * sizeof(float));
  mx_tensor *ins_fr[8];
  memcpy(ins_fr, li.dir[1], sizeof ins_fr);
  ins_fr[0] = xr;
  mx_tensor o_rev[3], o_fr[3], o_f0[3], o_bi[3];
  run_node(kind, li.dir[1], li.n_in, rev, na, o_rev, li.n_out);
  run_node(kind, ins_fr, li.n_in, fwd, na, o_fr, li.n_out);
  run_node(kind, li.dir[0], li.n_in, fwd, na, o_f0, li.n_out);
  run_node(kind, li.all, li.n_in, bi, na, o_bi, li.n_out);
  for (int t = 0; t < RS; t++)
    for (int k = 0; k < RB * RH; k++) {
      cr_assert_float_eq(at_f(&o_rev[0], t * RB * RH + k), at_f(&o_fr[0], (RS - 1 - t) * RB * RH + k), 1e-5,
                         "%s", kind);
      cr_assert_float_eq(at_f(&o_bi[0], (t * 2 + 0) * RB * RH + k), at_f(&o_f0[0], t * RB * RH + k), 1e-5,
                         "%s", kind);
      cr_assert_float_eq(at_f(&o_bi[0], (t * 2 + 1) * RB * RH + k), at_f(&o_rev[0], t * RB * RH + k), 1e-5,
                         "%s", kind);
    }
  for (int k = 0; k < RB * RH; k++) {
    cr_assert_float_eq(at_f(&o_rev[1], k), at_f(&o_fr[1], k), 1e-5);
    cr_assert_float_eq(at_f(&o_bi[1], RB * RH + k), at_f(&o_rev[1], k), 1e-5);
  }
  /* sequence_lens: a row of length 3 run in reverse equals a reverse run over its 3 steps,
   * with zeros in Y after them. */
  mx_tensor lens;
  cr_assert_eq(mx_tensor_alloc(MX_INT32, 1, (int64_t[]){RB}, &lens), MX_OK);
  ((int32_t *)lens.data)[0] = RS;
  ((int32_t *)lens.data)[1] = 3;
  mx_tensor *ins_l[8], *ins_3[8];
  memcpy(ins_l, li.dir[1], sizeof ins_l);
  memcpy(ins_3, li.dir[1], sizeof ins_3);
  ins_l[4] = &lens;
  ins_3[0] = rows_of(li.all[0], 0, 3);
  mx_tensor o_l[3], o_3[3];
  run_node(kind, ins_l, li.n_in, rev, na, o_l, li.n_out);
  run_node(kind, ins_3, li.n_in, rev, na, o_3, li.n_out);
  for (int t = 0; t < RS; t++)
    for (int k = 0; k < RH; k++)
      cr_assert_float_eq(at_f(&o_l[0], (t * RB + 1) * RH + k),
                         t < 3 ? at_f(&o_3[0], (t * RB + 1) * RH + k) : 0.0f, 1e-5);
  for (int k = 0; k < RH; k++) cr_assert_float_eq(at_f(&o_l[1], RH + k), at_f(&o_3[1], RH + k), 1e-5);
  free_tensor(ins_3[0]);
  free_tensor(xr);
  mx_tensor_release(&lens);
  release_all(o_rev, li.n_out), release_all(o_fr, li.n_out), release_all(o_f0, li.n_out),
      release_all(o_bi, li.n_out);
  release_all(o_l, li.n_out), release_all(o_3, li.n_out);
  free_layer(&li);
}

TestSuite(rnn_run);

Test(rnn_run, rnn_directions_and_sequence_lens) { check_directions("RNN", 0); }
Test(rnn_run, gru_directions_and_sequence_lens) { check_directions("GRU", 0); }
Test(rnn_run, gru_linear_before_reset_directions) { check_directions("GRU", 1); }
Test(rnn_run, lstm_directions_and_sequence_lens) { check_directions("LSTM", 0); }

Test(rnn_run, lstm_float64_and_float16_follow_float32) {
  layer_inputs li;
  make_layer("LSTM", &li);
  mx_attr a[2] = {mx_attr_string("direction", "bidirectional"), mx_attr_float("clip", 0.7f)};
  mx_tensor o32[3];
  run_node("LSTM", li.all, 8, a, 2, o32, 3);
  const mx_dtype dts[2] = {MX_FLOAT64, MX_FLOAT16};
  for (int di = 0; di < 2; di++) {
    mx_tensor conv[8], *ins[8] = {0};
    for (int i = 0; i < 8; i++) {
      if (!li.all[i]) continue;
      cr_assert_eq(mx_tensor_alloc(dts[di], li.all[i]->rank, li.all[i]->dims, &conv[i]), MX_OK);
      int64_t n;
      mx_tensor_numel(li.all[i], &n);
      for (int64_t j = 0; j < n; j++) {
        float v = at_f(li.all[i], j);
        if (di == 0)
          ((double *)conv[i].data)[j] = v;
        else
          ((_Float16 *)conv[i].data)[j] = (_Float16)v;
      }
      ins[i] = &conv[i];
    }
    mx_tensor o[3];
    run_node("LSTM", ins, 8, a, 2, o, 3);
    for (int k = 0; k < 3; k++) {
      cr_assert_eq(o[k].dtype, dts[di]);
      int64_t n;
      mx_tensor_numel(&o32[k], &n);
      for (int64_t j = 0; j < n; j++) {
        double v = di == 0 ? ((double *)o[k].data)[j] : (double)((_Float16 *)o[k].data)[j];
        cr_assert_float_eq(v, at_f(&o32[k], j), di == 0 ? 1e-5 : 2e-2);
      }
    }
    release_all(o, 3);
    for (int i = 0; i < 8; i++)
      if (ins[i]) mx_tensor_release(&conv[i]);
  }
  release_all(o32, 3);
  free_layer(&li);
}

Test(rnn_run, dft_lengths_match_the_direct_sum) {
  /* 100: Bluestein, 37: direct sum, 128: radix 2; forward and inverse. */
  const int lens[3] = {100, 37, 128};
  for (int li = 0; li < 3; li++)
    for (int inv = 0; inv < 2; inv++) {
      const int n = lens[li];
      mx_graph *g;
      cr_assert_eq(mx_graph_create("dft", &g), MX_OK);
      cr_assert_eq(mx_graph_set_opset(g, "", 17), MX_OK);
      mx_shape s = {.rank = 3, .dims = {1, n, 2}};
      mx_value_id x, y;
      cr_assert_eq(mx_graph_add_input(g, "x", MX_FLOAT32, &s, &x), MX_OK);
      mx_attr a[2] = {mx_attr_int("axis", 1), mx_attr_int("inverse", inv)};
      cr_assert_eq(mx_graph_add_op(g, "DFT", &x, 1, a, 2, &y), MX_OK);
      cr_assert_eq(mx_graph_add_output(g, y), MX_OK);
      cr_assert_eq(mx_graph_infer(g), MX_OK, "%s", mx_graph_last_error(g));
      mx_tensor *in = rand_f32(3, (int64_t[]){1, n, 2}), out;
      mx_error err = {0};
      cr_assert_eq(mx_reference_run(g, in, 1, &out, 1, &err), MX_OK, "%s", err.message);
      const float *xd = in->data, *yd = out.data;
      for (int k = 0; k < n; k++) {
        double sr = 0.0, si = 0.0;
        for (int j = 0; j < n; j++) {
          double ang = (inv ? 2.0 : -2.0) * M_PI * (double)((int64_t)j * k % n) / n;
          sr += xd[2 * j] * cos(ang) - xd[2 * j + 1] * sin(ang);
          si += xd[2 * j] * sin(ang) + xd[2 * j + 1] * cos(ang);
        }
        if (inv) sr /= n, si /= n;
        cr_assert_float_eq(yd[2 * k], sr, 1e-4, "n %d inverse %d bin %d", n, inv, k);
        cr_assert_float_eq(yd[2 * k + 1], si, 1e-4, "n %d inverse %d bin %d", n, inv, k);
      }
      mx_tensor_release(&out);
      free_tensor(in);
      mx_graph_destroy(g);
    }
}

Test(rnn_run, random_normal_repeats_and_has_its_moments) {
  int64_t shape[2] = {1000, 3};
  mx_attr a[3] = {mx_attr_ints("shape", shape, 2), mx_attr_float("mean", 2.0f), mx_attr_float("scale", 3.0f)};
  mx_tensor o1, o2;
  run_node("RandomNormal", NULL, 0, a, 3, &o1, 1);
  run_node("RandomNormal", NULL, 0, a, 3, &o2, 1);
  cr_assert(memcmp(o1.data, o2.data, 3000 * sizeof(float)) == 0, "two runs drew different numbers");
  double s = 0.0, s2 = 0.0;
  for (int i = 0; i < 3000; i++) s += at_f(&o1, i), s2 += (double)at_f(&o1, i) * at_f(&o1, i);
  double mean = s / 3000, sd = sqrt(s2 / 3000 - mean * mean);
  cr_assert(fabs(mean - 2.0) < 0.2 && fabs(sd - 3.0) < 0.2, "mean %g, sd %g", mean, sd);
  mx_tensor_release(&o1);
  mx_tensor_release(&o2);
}

Test(rnn_run, multinomial_never_draws_impossible_classes) {
  mx_tensor lg;
  cr_assert_eq(mx_tensor_alloc(MX_FLOAT32, 2, (int64_t[]){2, 3}, &lg), MX_OK);
  const float logits[6] = {0, 0, -200, -200, 0, -200};
  memcpy(lg.data, logits, sizeof logits);
  mx_attr a = mx_attr_int("sample_size", 50);
  mx_tensor *ins[1] = {&lg}, o;
  run_node("Multinomial", ins, 1, &a, 1, &o, 1);
  int zeros = 0;
  for (int i = 0; i < 50; i++) {
    int32_t v = ((int32_t *)o.data)[i];
    cr_assert(v == 0 || v == 1, "row 0 drew class %d", (int)v);
    zeros += v == 0;
  }
  for (int i = 50; i < 100; i++) cr_assert_eq(((int32_t *)o.data)[i], 1);
  cr_assert(zeros > 10 && zeros < 40, "%d of 50 draws were class 0", zeros);
  mx_tensor_release(&o);
  mx_tensor_release(&lg);
}
