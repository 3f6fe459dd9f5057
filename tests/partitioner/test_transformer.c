/* A transformer decode stack built with the builder API: fixed batch (1) and token count (1),
 * symbolic past length. Attention over the KV cache (cache concat, scores, softmax, weighted
 * sum) must be UNKNOWN; projections, MLP and norms KNOWN, with exactly one known cluster before
 * the first attention, one per gap between attentions, and one after the last. */
#include "test_helpers.h"

#define D  16
#define H  2
#define DH 8
#define F  32

static mx_value_id named(mx_graph *g, const char *op, int layer, const char *what, const mx_value_id *in,
                         size_t n, const mx_attr *attrs, size_t na) {
  char name[64];
  snprintf(name, sizeof name, "l%d/%s", layer, what);
  return pt_op(g, op, name, in, n, attrs, na);
}

static mx_value_id weight(mx_graph *g, int layer, const char *what, int64_t rows, int64_t cols) {
  char name[64];
  snprintf(name, sizeof name, "l%d/%s", layer, what);
  return cols ? pt_const(g, name, 2, (int64_t[]){rows, cols}, 0.01f)
              : pt_const(g, name, 1, (int64_t[]){rows}, 1.0f);
}

/* Builds an L-layer decoder; returns the inferred graph. */
static mx_graph *decoder(int layers) {
  mx_graph *g = pt_graph("decoder");
  mx_dim past = mx_sym_named(mx_graph_symtab(g), "past");
  mx_value_id h = pt_input(g, "tokens", MX_FLOAT32, 3, (mx_dim[]){1, 1, D});
  mx_value_id heads_shape = pt_const_i64(g, "heads_shape", 4, (int64_t[]){1, 1, H, DH});
  mx_value_id model_shape = pt_const_i64(g, "model_shape", 3, (int64_t[]){1, 1, D});
  int64_t to_heads[] = {0, 2, 1, 3}, kt_perm[] = {0, 1, 3, 2};
  mx_attr perm_heads = mx_attr_ints("perm", to_heads, 4), perm_kt = mx_attr_ints("perm", kt_perm, 4);
  mx_attr axis2 = mx_attr_int("axis", 2), axis_last = mx_attr_int("axis", -1);
  for (int l = 0; l < layers; l++) {
    char pk[32], pv[32];
    snprintf(pk, sizeof pk, "past_k%d", l);
    snprintf(pv, sizeof pv, "past_v%d", l);
    mx_value_id past_k = pt_input(g, pk, MX_FLOAT32, 4, (mx_dim[]){1, H, past, DH});
    mx_value_id past_v = pt_input(g, pv, MX_FLOAT32, 4, (mx_dim[]){1, H, past, DH});
    mx_value_id n1 =
        named(g, "RMSNormalization", l, "norm1", (mx_value_id[]){h, weight(g, l, "g1", D, 0)}, 2, NULL, 0);
    mx_value_id q = named(g, "MatMul", l, "q", (mx_value_id[]){n1, weight(g, l, "wq", D, D)}, 2, NULL, 0);
    mx_value_id k = named(g, "MatMul", l, "k", (mx_value_id[]){n1, weight(g, l, "wk", D, D)}, 2, NULL, 0);
    mx_value_id v = named(g, "MatMul", l, "v", (mx_value_id[]){n1, weight(g, l, "wv", D, D)}, 2, NULL, 0);
    mx_value_id qr = named(g, "Reshape", l, "q_heads", (mx_value_id[]){q, heads_shape}, 2, NULL, 0);
    mx_value_id kr = named(g, "Reshape", l, "k_heads", (mx_value_id[]){k, heads_shape}, 2, NULL, 0);
    mx_value_id vr = named(g, "Reshape", l, "v_heads", (mx_value_id[]){v, heads_shape}, 2, NULL, 0);
    mx_value_id qt = named(g, "Transpose", l, "q_t", &qr, 1, &perm_heads, 1);
    mx_value_id kt = named(g, "Transpose", l, "k_t", &kr, 1, &perm_heads, 1);
    mx_value_id vt = named(g, "Transpose", l, "v_t", &vr, 1, &perm_heads, 1);
    mx_value_id kc = named(g, "Concat", l, "attn/k_cache", (mx_value_id[]){past_k, kt}, 2, &axis2, 1);
    mx_value_id vc = named(g, "Concat", l, "attn/v_cache", (mx_value_id[]){past_v, vt}, 2, &axis2, 1);
    mx_value_id kT = named(g, "Transpose", l, "attn/k_T", &kc, 1, &perm_kt, 1);
    mx_value_id s = named(g, "MatMul", l, "attn/scores", (mx_value_id[]){qt, kT}, 2, NULL, 0);
    mx_value_id ss =
        named(g, "Mul", l, "attn/scaled", (mx_value_id[]){s, weight(g, l, "scale", 1, 0)}, 2, NULL, 0);
    mx_value_id pr = named(g, "Softmax", l, "attn/probs", &ss, 1, &axis_last, 1);
    mx_value_id o = named(g, "MatMul", l, "attn/out", (mx_value_id[]){pr, vc}, 2, NULL, 0);
    mx_value_id ot = named(g, "Transpose", l, "o_t", &o, 1, &perm_heads, 1);
    mx_value_id om = named(g, "Reshape", l, "o_merge", (mx_value_id[]){ot, model_shape}, 2, NULL, 0);
    mx_value_id proj =
        named(g, "MatMul", l, "o_proj", (mx_value_id[]){om, weight(g, l, "wo", D, D)}, 2, NULL, 0);
    mx_value_id h1 = named(g, "Add", l, "residual1", (mx_value_id[]){h, proj}, 2, NULL, 0);
    mx_value_id n2 =
        named(g, "RMSNormalization", l, "norm2", (mx_value_id[]){h1, weight(g, l, "g2", D, 0)}, 2, NULL, 0);
    mx_value_id up =
        named(g, "MatMul", l, "mlp_up", (mx_value_id[]){n2, weight(g, l, "w1", D, F)}, 2, NULL, 0);
    mx_value_id act = named(g, "Relu", l, "mlp_act", &up, 1, NULL, 0);
    mx_value_id down =
        named(g, "MatMul", l, "mlp_down", (mx_value_id[]){act, weight(g, l, "w2", F, D)}, 2, NULL, 0);
    h = named(g, "Add", l, "residual2", (mx_value_id[]){h1, down}, 2, NULL, 0);
    cr_assert_eq(mx_graph_add_output(g, kc), MX_OK);
    cr_assert_eq(mx_graph_add_output(g, vc), MX_OK);
  }
  cr_assert_eq(mx_graph_add_output(g, h), MX_OK);
  pt_infer(g);
  return g;
}

static bool is_attention(const char *name) { return strstr(name, "/attn/") != NULL; }

Test(transformer, decode_stack_clusters) {
  const int layers = 4;
  mx_graph *g = decoder(layers);
  mx_partition *p = pt_partition(g, 4, false, NULL, 0);
  mx_partition_totals t;
  mx_partition_get_totals(p, &t);
  cr_assert_eq(t.unknown_clusters, (size_t)layers, "one unknown cluster per attention");
  cr_assert_eq(t.known_clusters, (size_t)layers + 1, "one known cluster per gap, plus both ends");
  cr_assert_eq(t.unknown_nodes, (size_t)layers * 7);
  /* Every node: attention parts unknown, everything else known. */
  for (size_t n = 0; n < g->n_nodes; n++) {
    mx_partition_node_info info;
    cr_assert(mx_partition_node(p, (mx_node_id)n, &info));
    cr_assert_eq(info.unknown, is_attention(g->nodes[n].name), "node %s", g->nodes[n].name);
  }
  /* Known clusters alternate with unknown ones, and each gap holds both halves of a layer. */
  int last_type = -1;
  for (size_t id = 0; id < mx_partition_cluster_count(p); id++) {
    mx_partition_cluster_info ci;
    mx_partition_cluster(p, id, &ci);
    if (ci.type != MX_CLUSTER_KNOWN && ci.type != MX_CLUSTER_UNKNOWN) continue;
    cr_assert_neq((int)ci.type, last_type, "cluster %zu follows a cluster of the same type", id);
    last_type = (int)ci.type;
  }
  for (int l = 0; l + 1 < layers; l++) {
    char a[32], b[32];
    snprintf(a, sizeof a, "l%d/mlp_down", l);
    snprintf(b, sizeof b, "l%d/q", l + 1);
    cr_assert_eq(pt_cluster_of(p, g, a), pt_cluster_of(p, g, b), "gap %d is one known cluster", l);
  }
  cr_assert_eq(pt_cluster_of(p, g, "l0/norm1"), pt_cluster_of(p, g, "l0/v_t"));
  cr_assert_eq(pt_cluster_of(p, g, "l3/o_t"), pt_cluster_of(p, g, "l3/residual2"));
  /* Reasons: the cache concat sees the symbolic past; the softmax a symbolic scores dim. */
  cr_assert_eq(pt_reason(p, g, "l0/attn/k_cache"), MX_PART_SYMBOLIC_DIM);
  cr_assert_eq(pt_reason(p, g, "l2/q"), MX_PART_KNOWN);
  char *why = pt_explain(p, "l1/attn/probs");
  cr_assert(strstr(why, "symbol 'past' comes from graph input 'past_k0' dim 2"), "%s", why);
  free(why);
  /* Weights moved into their models; the shared reshape targets stay in the root. */
  cr_assert_eq(t.shared_constants, 2);
  pt_check_root_order(p);
  pt_check_roundtrip(p, g, false);
  mx_partition_destroy(p);

  /* Stable mode gives the same clusters on this graph's build order. */
  p = pt_partition(g, 4, true, NULL, 0);
  mx_partition_get_totals(p, &t);
  cr_assert_eq(t.unknown_clusters, (size_t)layers);
  cr_assert_eq(t.known_clusters, (size_t)layers + 1);
  mx_partition_destroy(p);
  mx_graph_destroy(g);
}

Test(transformer, binding_the_past_makes_it_static) {
  mx_graph *g = decoder(2);
  cr_assert_eq(mx_graph_bind_symbol(g, "past", 7), MX_OK, "%s", mx_graph_last_error(g));
  mx_partition *p = pt_partition(g, 4, false, NULL, 0);
  mx_partition_totals t;
  mx_partition_get_totals(p, &t);
  cr_assert_eq(t.unknown_nodes, 0);
  cr_assert_eq(t.known_clusters, 1);
  mx_partition_destroy(p);
  mx_graph_destroy(g);
}

Test(transformer, dumps_are_deterministic) {
  mx_graph *g1 = decoder(3), *g2 = decoder(3);
  mx_partition *p1 = pt_partition(g1, 4, false, NULL, 0), *p2 = pt_partition(g2, 4, false, NULL, 0);
  mx_status (*fns[])(const mx_partition *, FILE *) = {mx_partition_dump_text, mx_partition_dump_dot,
                                                      mx_partition_dump_json};
  for (size_t i = 0; i < 3; i++) {
    char *a = pt_dump(p1, fns[i]), *b = pt_dump(p2, fns[i]);
    cr_assert_str_eq(a, b, "dump %zu differs between identical graphs", i);
    free(a);
    free(b);
  }
  char *text = pt_dump(p1, mx_partition_dump_text);
  cr_assert(strstr(text, "UNKNOWN   ops 7"), "%s", text);
  cr_assert(strstr(text, "totals: known"), "%s", text);
  free(text);
  char *json = pt_dump(p1, mx_partition_dump_json);
  cr_assert(strstr(json, "\"type\": \"UNKNOWN\""));
  cr_assert(strstr(json, "\"reason\": \"symbolic_dim\""));
  cr_assert(strstr(json, "\"shape\": \"[1, 2, past + 1, 8]\""), "%s", json);
  free(json);
  char *dot = pt_dump(p1, mx_partition_dump_dot);
  cr_assert(strstr(dot, "digraph partition {"));
  cr_assert(strstr(dot, "fillcolor=\"#ffe0b2\""));
  cr_assert(strstr(dot, "style=bold"));
  free(dot);
  mx_partition_destroy(p1);
  mx_partition_destroy(p2);
  mx_graph_destroy(g1);
  mx_graph_destroy(g2);
}
