/* The exported-style llama (primitive ops, as torch.onnx.export writes it) after the rewrite
 * rules: the same op histogram as the built-in fused llama, and the same logits and cache. */
#include <criterion/criterion.h>
#include <string.h>

#include "graph/ir.h"
#include "mixrt/graph.h"
#include "mixrt/models.h"
#include "mixrt/reference.h"

static size_t count_op(const mx_graph *g, const char *type) {
  size_t n = 0;
  for (size_t i = 0; i < g->n_nodes; i++)
    if (!(g->nodes[i].flags & MX_NODE_DEAD) && strcmp(g->nodes[i].op_type, type) == 0) n++;
  return n;
}

static void run(mx_graph *g, int64_t past, mx_tensor *outs) {
  size_t ni = g->n_inputs;
  mx_tensor ins[64];
  cr_assert_leq(ni, 64);
  for (size_t i = 0; i < ni; i++) {
    const mx_value *v = &g->values[g->inputs[i]];
    int64_t dims[MX_MAX_RANK];
    for (int32_t k = 0; k < v->shape.rank; k++)
      dims[k] = mx_dim_is_concrete(v->shape.dims[k]) ? v->shape.dims[k] : past;
    cr_assert_eq(mx_tensor_alloc(v->dtype, v->shape.rank, dims, &ins[i]), MX_OK);
    ins[i].name = v->name;
    int64_t n;
    mx_tensor_numel(&ins[i], &n);
    for (int64_t k = 0; k < n; k++) {
      if (v->dtype == MX_INT64)
        ((int64_t *)ins[i].data)[k] = 5;
      else
        ((float *)ins[i].data)[k] = (float)((k * 37 + (int64_t)i * 11) % 101) / 101.0f - 0.5f;
    }
  }
  mx_error err;
  cr_assert_eq(mx_reference_run(g, ins, ni, outs, g->n_outputs, &err), MX_OK, "%s", err.message);
  for (size_t i = 0; i < ni; i++) mx_tensor_release(&ins[i]);
}

static void check_preset(const char *preset) {
  mx_llama_config cfg;
  cr_assert(mx_llama_config_preset(&cfg, preset));
  cfg.max_pos = 64;
  mx_graph *ref, *ex;
  mx_error err;
  cr_assert_eq(mx_model_llama(&cfg, &ref, &err), MX_OK, "%s", err.message);
  cr_assert_eq(mx_model_llama_exported(&cfg, &ex, &err), MX_OK, "%s", err.message);
  mx_fuse_report rr, re;
  cr_assert_eq(mx_graph_optimize(ref, NULL), MX_OK, "%s", mx_graph_last_error(ref));
  cr_assert_eq(mx_graph_fuse(ref, "default", &rr), MX_OK, "%s", mx_graph_last_error(ref));
  cr_assert_eq(mx_graph_optimize(ex, NULL), MX_OK, "%s", mx_graph_last_error(ex));
  cr_assert_eq(mx_graph_fuse(ex, "default", &re), MX_OK, "%s", mx_graph_last_error(ex));
  cr_assert_eq(mx_graph_optimize(ex, NULL), MX_OK, "%s", mx_graph_last_error(ex));
  static const char *const fused[] = {
      "RMSNormalization", "RotaryEmbedding", "Attention", "Swish", "MatMul", NULL};
  for (size_t k = 0; fused[k]; k++)
    cr_assert_eq(count_op(ex, fused[k]), count_op(ref, fused[k]), "%s: %zu exported, %zu built-in", fused[k],
                 count_op(ex, fused[k]), count_op(ref, fused[k]));
  cr_assert_eq(ex->n_live_nodes, ref->n_live_nodes, "%zu ops after the passes, the built-in form has %zu",
               ex->n_live_nodes, ref->n_live_nodes);
  mx_tensor a[64], b[64];
  run(ref, 3, a);
  run(ex, 3, b);
  for (size_t k = 0; k < ref->n_outputs; k++) {
    char why[256];
    cr_assert_str_eq(mx_graph_value_name(ex, ex->outputs[k]), mx_graph_value_name(ref, ref->outputs[k]));
    cr_assert(mx_tensor_allclose(&b[k], &a[k], 1e-3, 1e-4, why, sizeof why), "output %zu: %s", k, why);
    mx_tensor_release(&a[k]);
    mx_tensor_release(&b[k]);
  }
  mx_graph_destroy(ref);
  mx_graph_destroy(ex);
}

Test(fusion_llama, exported_tiny_fuses_to_builtin_form) { check_preset("tiny"); }
Test(fusion_llama, exported_small_fuses_to_builtin_form) { check_preset("small"); }

Test(fusion_llama, exported_unfused_matches_builtin) {
  mx_llama_config cfg;
  mx_llama_config_preset(&cfg, "tiny");
  cfg.max_pos = 64;
  mx_graph *ref, *ex;
  mx_error err;
  cr_assert_eq(mx_model_llama(&cfg, &ref, &err), MX_OK, "%s", err.message);
  cr_assert_eq(mx_model_llama_exported(&cfg, &ex, &err), MX_OK, "%s", err.message);
  cr_assert_eq(count_op(ex, "Attention"), 0);
  mx_tensor a[64], b[64];
  run(ref, 4, a);
  run(ex, 4, b);
  for (size_t k = 0; k < ref->n_outputs; k++) {
    char why[256];
    cr_assert(mx_tensor_allclose(&b[k], &a[k], 1e-3, 1e-4, why, sizeof why), "output %zu: %s", k, why);
    mx_tensor_release(&a[k]);
    mx_tensor_release(&b[k]);
  }
  mx_graph_destroy(ref);
  mx_graph_destroy(ex);
}
