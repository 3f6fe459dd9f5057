/* Tests of FlexAttention's score_mod / prob_mod subgraphs (graph/ops/llm.c infers them,
 * reference/flex.c runs them): the five-input form (score, batch, head, q_idx, kv_idx) of a
 * relative-position score_mod gives the upstream relative_positional test's output, which that
 * test computes with a one-input mod; a mod of the wrong arity is refused naming the attribute;
 * inference declares the mod's inputs as the [B, H, L, S] scores. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "graph/ir.h"
#include "graph/ops/ops_support.h"
#include "mixrt/graph.h"
#include "mixrt/reference.h"
#include "mixrt/tensor.h"
#include "support/onnx_node.h"

static void setup(void) { mxt_ops_setup("flex_mods"); }

TestSuite(flex_mods, .init = setup, .fini = mxt_ops_teardown);

/* score_mod(score, b, h, q, kv) = score + float(q - kv), built with `n_in` inputs (5 is the
 * valid form; any other count is for refusals). */
static mx_graph *relative_mod(size_t n_in) {
  mx_graph *sub;
  cr_assert_eq(mx_graph_create_subgraph(G, "score_mod", &sub), MX_OK);
  static const char *const names[] = {"score", "b", "h", "q_idx", "kv_idx"};
  mx_value_id in[5];
  mx_shape any = {.rank = MX_RANK_UNKNOWN};
  for (size_t i = 0; i < n_in; i++)
    cr_assert_eq(mx_graph_add_input(sub, names[i], i ? MX_INT64 : MX_FLOAT32, &any, &in[i]), MX_OK);
  mx_value_id rel, relf, out;
  mx_attr to = mx_attr_int("to", MX_FLOAT32);
  cr_assert_eq(mx_graph_add_op(sub, "Sub", (mx_value_id[]){in[3 % n_in], in[4 % n_in]}, 2, NULL, 0, &rel),
               MX_OK);
  cr_assert_eq(mx_graph_add_op(sub, "Cast", &rel, 1, &to, 1, &relf), MX_OK);
  cr_assert_eq(mx_graph_add_op(sub, "Add", (mx_value_id[]){in[0], relf}, 2, NULL, 0, &out), MX_OK);
  cr_assert_eq(mx_graph_add_output(sub, out), MX_OK);
  return sub;
}

static mx_value_id flex(mx_graph *score_mod, mx_shape q, mx_shape k) {
  cr_assert_eq(mx_graph_set_opset(G, "ai.onnx.preview", 1), MX_OK);
  mx_value_id in[3] = {input("Q", MX_FLOAT32, q), input("K", MX_FLOAT32, k), input("V", MX_FLOAT32, k)};
  mx_attr a = mx_attr_graph("score_mod", score_mod);
  mx_node_desc d = {.op_type = "FlexAttention",
                    .domain = "ai.onnx.preview",
                    .inputs = in,
                    .n_inputs = 3,
                    .attrs = &a,
                    .n_attrs = 1,
                    .n_outputs = 1};
  mx_value_id y;
  cr_assert_eq(mx_graph_add_node(G, &d, &y), MX_OK, "%s", mx_graph_last_error(G));
  cr_assert_eq(mx_graph_add_output(G, y), MX_OK);
  return y;
}

Test(flex_mods, five_input_score_mod_matches_upstream) {
  const char *root = mxt_onnx_node_dir();
  if (!root) cr_skip_test("no ONNX node-test data");
  mx_tensor in[3], want, got;
  mx_error err;
  char path[1024];
  for (int i = 0; i < 3; i++) {
    snprintf(path, sizeof path, "%s/test_flexattention_relative_positional/test_data_set_0/input_%d.pb", root,
             i);
    cr_assert_eq(mx_tensor_load_pb(path, &in[i], NULL, &err), MX_OK, "%s", err.message);
  }
  snprintf(path, sizeof path, "%s/test_flexattention_relative_positional/test_data_set_0/output_0.pb", root);
  cr_assert_eq(mx_tensor_load_pb(path, &want, NULL, &err), MX_OK, "%s", err.message);
  flex(relative_mod(5), SHAPE(S("b"), S("h"), S("l"), C(8)), SHAPE(S("b"), S("h"), S("s"), C(8)));
  cr_assert_eq(mx_reference_run(G, in, 3, &got, 1, &err), MX_OK, "%s", err.message);
  char why[256];
  cr_assert(mx_tensor_allclose(&got, &want, 1e-3, 1e-7, why, sizeof why), "%s", why);
  mx_tensor_release(&got);
  mx_tensor_release(&want);
  for (int i = 0; i < 3; i++) mx_tensor_release(&in[i]);
}

Test(flex_mods, inference_declares_the_scores) {
  mx_graph *sub = relative_mod(5);
  flex(sub, SHAPE(S("b"), C(4), S("l"), C(8)), SHAPE(S("b"), C(2), S("s"), C(8)));
  infer_ok();
  const mx_value *score = &sub->values[sub->inputs[0]], *kv = &sub->values[sub->inputs[4]];
  cr_assert_eq(score->dtype, MX_FLOAT32);
  cr_assert_eq(score->shape.rank, 4);
  cr_assert_eq(score->shape.dims[0], S("b"));
  cr_assert_eq(score->shape.dims[1], 4);
  cr_assert_eq(score->shape.dims[2], S("l"));
  cr_assert_eq(score->shape.dims[3], S("s"));
  cr_assert_eq(kv->dtype, MX_INT64);
  cr_assert_eq(kv->shape.dims[0], 1);
  cr_assert_eq(kv->shape.dims[3], S("s"));
}

Test(flex_mods, mod_with_three_inputs_is_refused) {
  flex(relative_mod(3), SHAPE(C(1), C(2), C(4), C(8)), SHAPE(C(1), C(2), C(4), C(8)));
  infer_fails(MX_ERR_INVALID_GRAPH, "score_mod");
}
