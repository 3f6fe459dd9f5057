/* The built-in model generators (mixrt/models.h) through the partitioner, after the same
 * optimization `mixrt partition` runs: the Llama decode step splits into one UNKNOWN attention
 * per layer between KNOWN blocks (the rotary tables shared by every layer stay in the root); the
 * mixture-of-experts block and the encoder, whose token counts are symbolic, are one UNKNOWN
 * cluster; binding the symbols makes each a single static model. */
#include "mixrt/models.h"
#include "test_helpers.h"

static void optimize(mx_graph *g) {
  cr_assert_eq(mx_graph_optimize(g, NULL), MX_OK, "%s", mx_graph_last_error(g));
}

Test(models, llama_decode_step) {
  mx_llama_config cfg;
  mx_llama_config_default(&cfg);
  cfg.layers = 3;
  mx_graph *g = NULL;
  mx_error err = {0};
  cr_assert_eq(mx_model_llama(&cfg, &g, &err), MX_OK, "%s", err.message);
  optimize(g);
  mx_partition *p = pt_partition(g, 4, false, NULL, 0);
  mx_partition_totals t;
  mx_partition_get_totals(p, &t);
  cr_assert_eq(t.known_clusters, (size_t)cfg.layers + 1, "one known block per gap and at both ends");
  size_t attention = 0, unknown_compute = 0;
  for (size_t n = 0; n < g->n_nodes; n++) {
    if (g->nodes[n].flags & MX_NODE_DEAD) continue;
    mx_partition_node_info info;
    cr_assert(mx_partition_node(p, (mx_node_id)n, &info));
    bool is_attention = strcmp(g->nodes[n].op_type, "Attention") == 0;
    if (is_attention) {
      attention++;
      cr_assert(info.unknown, "%s must be unknown", g->nodes[n].name);
      cr_assert_eq(info.reason.kind, MX_PART_SYMBOLIC_DIM);
    } else if (info.unknown) {
      /* Only the host-side shape arithmetic on past_len is unknown besides attention. */
      unknown_compute++;
      cr_assert(info.reason.kind == MX_PART_HOST_PLACEMENT || info.reason.kind == MX_PART_SYMBOLIC_DIM,
                "%s: %s", g->nodes[n].name, mx_partition_reason_name(info.reason.kind));
    }
  }
  cr_assert_eq(attention, (size_t)cfg.layers);
  cr_assert_leq(unknown_compute, 4, "shape arithmetic only");
  cr_assert_neq(pt_cluster_of(p, g, "l0/attention"), pt_cluster_of(p, g, "l1/attention"));
  mx_graph *root = mx_partition_root(p);
  mx_value_id cos = mx_graph_find_value(root, "rope_cos");
  cr_assert_neq(cos, MX_NO_VALUE, "rope tables are shared by every layer's block");
  cr_assert_not_null(mx_graph_value_constant(root, cos));
  pt_check_root_order(p);
  pt_check_roundtrip(p, g, false);
  mx_partition_destroy(p);

  cr_assert_eq(mx_graph_bind_symbol(g, "past_len", 16), MX_OK, "%s", mx_graph_last_error(g));
  optimize(g);
  p = pt_partition(g, 4, false, NULL, 0);
  mx_partition_get_totals(p, &t);
  cr_assert_eq(t.unknown_nodes, 0);
  cr_assert_eq(t.known_clusters, 1);
  cr_assert_eq(t.shared_constants, 0);
  pt_check_roundtrip(p, g, false);
  mx_partition_destroy(p);
  mx_graph_destroy(g);
}

Test(models, moe_block_is_dynamic) {
  mx_graph *g = NULL;
  mx_error err = {0};
  cr_assert_eq(mx_model_moe(NULL, &g, &err), MX_OK, "%s", err.message);
  optimize(g);
  mx_partition *p = pt_partition(g, 4, false, NULL, 0);
  mx_partition_totals t;
  mx_partition_get_totals(p, &t);
  cr_assert_eq(t.unknown_clusters, 1);
  cr_assert_eq(t.known_clusters, 0);
  cr_assert_eq(t.unknown_nodes, mx_graph_node_count(g));
  char *why = pt_explain(p, "route_probs");
  cr_assert(strstr(why, "symbol 'tokens' comes from graph input 'x' dim 0"), "%s", why);
  free(why);
  pt_check_roundtrip(p, g, true);
  mx_partition_destroy(p);
  mx_graph_destroy(g);
}

Test(models, encoder_binds_to_static) {
  mx_encoder_config cfg;
  mx_encoder_config_default(&cfg);
  mx_graph *g = NULL;
  mx_error err = {0};
  cr_assert_eq(mx_model_encoder(&cfg, &g, &err), MX_OK, "%s", err.message);
  optimize(g);
  mx_partition *p = pt_partition(g, 4, false, NULL, 0);
  mx_partition_totals t;
  mx_partition_get_totals(p, &t);
  cr_assert_eq(t.known_clusters, 0);
  cr_assert_eq(t.unknown_clusters, 1);
  pt_check_roundtrip(p, g, false);
  mx_partition_destroy(p);
  cr_assert_eq(mx_graph_bind_symbol(g, "batch", 2), MX_OK, "%s", mx_graph_last_error(g));
  cr_assert_eq(mx_graph_bind_symbol(g, "seq", 8), MX_OK, "%s", mx_graph_last_error(g));
  optimize(g);
  p = pt_partition(g, 4, false, NULL, 0);
  mx_partition_get_totals(p, &t);
  cr_assert_eq(t.unknown_nodes, 0);
  cr_assert_eq(t.known_clusters, 1);
  mx_partition_destroy(p);
  mx_graph_destroy(g);
}
