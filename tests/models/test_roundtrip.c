/* ONNX round trips of the generated models: each generator's graph, inferred, is exported
 * (mx_onnx_save_memory), imported again (mx_onnx_load_memory) and inferred; the two graphs must
 * be identical (inputs and outputs with names, dtypes and printed shapes; nodes in the same
 * topological order with the same op types, names, edges and attributes; constants byte for
 * byte), and the reference interpreter must give bit-identical outputs on both. A second export
 * of the imported graph must give the same bytes as the first. A graph exported before inference
 * (its outputs have no dtype yet) is written without output types and reads back the same. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "mixrt/models.h"
#include "mixrt/onnx.h"
#include "models/models_support.h"
#include "onnx/onnx.pb-c.h"

/* Exports g (inferred here), imports the bytes, checks the graphs and a second export agree,
 * and returns the imported graph (inferred). */
static mx_graph *round_trip(mx_graph *g) {
  mx_error err;
  cr_assert_eq(mx_graph_infer(g), MX_OK, "%s", mx_graph_last_error(g));
  void *bytes = NULL, *bytes2 = NULL;
  size_t size = 0, size2 = 0;
  cr_assert_eq(mx_onnx_save_memory(g, &bytes, &size, &err), MX_OK, "%s", err.message);
  mx_graph *back;
  cr_assert_eq(mx_onnx_load_memory(bytes, size, NULL, &back, &err), MX_OK, "%s", err.message);
  cr_assert_eq(mx_graph_infer(back), MX_OK, "%s", mx_graph_last_error(back));
  char why[512] = "";
  cr_assert(mxt_graphs_identical(g, back, why, sizeof why), "%s: %s", mx_graph_name(g), why);
  cr_assert_str_eq(mx_graph_name(back), mx_graph_name(g));
  cr_assert_eq(mx_graph_opset(back, ""), mx_graph_opset(g, ""));
  cr_assert_eq(mx_onnx_save_memory(back, &bytes2, &size2, &err), MX_OK, "%s", err.message);
  cr_assert(size == size2 && memcmp(bytes, bytes2, size) == 0, "the re-exported model differs");
  free(bytes);
  free(bytes2);
  return back;
}

/* Runs both graphs on the same inputs; outputs must be bit-identical. */
static void same_outputs(mx_graph *a, mx_graph *b, const mx_tensor *in, size_t n_in, size_t n_out) {
  mx_tensor oa[16], ob[16];
  cr_assert_leq(n_out, 16);
  cr_assert_eq(mx_graph_output_count(a), n_out);
  mxt_run(a, in, n_in, oa, n_out);
  mxt_run(b, in, n_in, ob, n_out);
  for (size_t i = 0; i < n_out; i++)
    cr_assert(mxt_tensors_identical(&oa[i], &ob[i]), "output %zu of '%s' differs after the round trip", i,
              mx_graph_name(a));
  mxt_release_all(oa, n_out);
  mxt_release_all(ob, n_out);
}

static void llama_round_trip(const mx_llama_config *cfg) {
  mx_graph *g;
  mx_error err;
  cr_assert_eq(mx_model_llama(cfg, &g, &err), MX_OK, "%s", err.message);
  mx_graph *back = round_trip(g);
  const int64_t D = cfg->head_dim ? cfg->head_dim : cfg->hidden / cfg->heads, P = 3;
  const size_t n = (size_t)(1 + 2 * cfg->layers);
  mx_tensor in[16];
  cr_assert_leq(n, 16);
  uint64_t rng = 1234;
  cr_assert_eq(mx_tensor_alloc(MX_INT64, 2, (int64_t[]){1, 1}, &in[0]), MX_OK);
  *(int64_t *)in[0].data = cfg->vocab - 1;
  for (size_t i = 1; i < n; i++) in[i] = mxt_random_f32(4, (int64_t[]){1, cfg->kv_heads, P, D}, &rng);
  same_outputs(g, back, in, n, n);
  mxt_release_all(in, n);
  mx_graph_destroy(back);
  mx_graph_destroy(g);
}

Test(roundtrip, llama_default) {
  mx_llama_config c;
  mx_llama_config_default(&c);
  llama_round_trip(&c);
}

Test(roundtrip, llama_other) {
  mx_llama_config c;
  mx_llama_config_default(&c);
  c.layers = 3, c.hidden = 48, c.heads = 6, c.kv_heads = 1, c.head_dim = 12, c.ffn = 40, c.vocab = 33;
  c.max_pos = 8, c.seed = 77;
  llama_round_trip(&c);
}

static void moe_round_trip(const mx_moe_config *cfg) {
  mx_graph *g;
  mx_error err;
  cr_assert_eq(mx_model_moe(cfg, &g, &err), MX_OK, "%s", err.message);
  mx_graph *back = round_trip(g);
  uint64_t rng = 99;
  for (int64_t tokens = 0; tokens <= 7; tokens += 7) {
    mx_tensor x = mxt_random_f32(2, (int64_t[]){tokens, cfg->hidden}, &rng);
    same_outputs(g, back, &x, 1, 1);
    mx_tensor_release(&x);
  }
  mx_graph_destroy(back);
  mx_graph_destroy(g);
}

Test(roundtrip, moe_default) {
  mx_moe_config c;
  mx_moe_config_default(&c);
  moe_round_trip(&c);
}

Test(roundtrip, moe_other) {
  mx_moe_config c = {.hidden = 12, .ffn = 7, .experts = 6, .top_k = 1, .seed = 3};
  moe_round_trip(&c);
}

Test(roundtrip, uninferred_graphs) {
  for (int which = 0; which < 3; which++) {
    mx_graph *g, *ref, *back;
    mx_error err;
    mx_status st = which == 0   ? mx_model_llama(NULL, &g, &err)
                   : which == 1 ? mx_model_moe(NULL, &g, &err)
                                : mx_model_encoder(NULL, &g, &err);
    cr_assert_eq(st, MX_OK, "%s", err.message);
    cr_assert_eq(which == 0   ? mx_model_llama(NULL, &ref, &err)
                 : which == 1 ? mx_model_moe(NULL, &ref, &err)
                              : mx_model_encoder(NULL, &ref, &err),
                 MX_OK);
    void *bytes;
    size_t size;
    cr_assert_eq(mx_onnx_save_memory(g, &bytes, &size, &err), MX_OK, "%s", err.message);
    /* No output is declared with element type 0 (UNDEFINED), which readers reject. */
    Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, size, bytes);
    cr_assert_not_null(m);
    cr_assert_eq(m->graph->n_output, mx_graph_output_count(g));
    for (size_t i = 0; i < m->graph->n_output; i++) {
      const Onnx__TypeProto *tp = m->graph->output[i]->type;
      cr_assert(!tp || (tp->tensor_type && tp->tensor_type->elem_type != 0), "output %s",
                m->graph->output[i]->name);
    }
    onnx__model_proto__free_unpacked(m, NULL);
    cr_assert_eq(mx_onnx_load_memory(bytes, size, NULL, &back, &err), MX_OK, "%s", err.message);
    cr_assert_eq(mx_graph_infer(back), MX_OK, "%s", mx_graph_last_error(back));
    cr_assert_eq(mx_graph_infer(ref), MX_OK, "%s", mx_graph_last_error(ref));
    char why[512] = "";
    cr_assert(mxt_graphs_identical(ref, back, why, sizeof why), "%s: %s", mx_graph_name(ref), why);
    free(bytes);
    mx_graph_destroy(back);
    mx_graph_destroy(ref);
    mx_graph_destroy(g);
  }
}

Test(roundtrip, encoder) {
  mx_encoder_config c;
  mx_encoder_config_default(&c);
  for (int variant = 0; variant < 2; variant++) {
    if (variant) c.layers = 2, c.hidden = 32, c.heads = 2, c.max_pos = 16, c.seed = 4;
    mx_graph *g;
    mx_error err;
    cr_assert_eq(mx_model_encoder(&c, &g, &err), MX_OK, "%s", err.message);
    mx_graph *back = round_trip(g);
    uint64_t rng = 5;
    mx_tensor x = mxt_random_f32(3, (int64_t[]){2, 5, c.hidden}, &rng);
    same_outputs(g, back, &x, 1, 1);
    mx_tensor_release(&x);
    mx_graph_destroy(back);
    mx_graph_destroy(g);
  }
}
