/* Shape specialization in the partitioner: symbol kinds (bound by input shapes or by data) and
 * the UNKNOWN clusters marked specializable, in the text and JSON dumps. */
#include "partitioner/partitioner_impl.h"
#include "partitioner/spec.h"
#include "test_helpers.h"

/* x [batch, 4] -> Relu -> Add c -> Mul c -> Sigmoid: every op symbolic in batch. */
static mx_graph *batch_chain(void) {
  mx_graph *g = pt_graph("chain");
  mx_dim batch = mx_sym_named(mx_graph_symtab(g), "batch");
  mx_value_id x = pt_input(g, "x", MX_FLOAT32, 2, (mx_dim[]){batch, 4});
  mx_value_id c = pt_const(g, "c", 1, (int64_t[]){4}, 0.5f);
  mx_value_id y = pt_op1(g, "Relu", "relu", x);
  y = pt_op2(g, "Add", "add", y, c);
  y = pt_op2(g, "Mul", "mul", y, c);
  y = pt_op1(g, "Sigmoid", "sig", y);
  cr_assert_eq(mx_graph_add_output(g, y), MX_OK);
  pt_infer(g);
  return g;
}

/* The single UNKNOWN cluster of p, or MX__PART_NONE. */
static uint32_t unknown_cluster(const mx_partition *p) {
  uint32_t found = MX__PART_NONE;
  for (uint32_t id = 0; id < p->n_clusters; id++)
    if (p->clusters[id].type == MX_CLUSTER_UNKNOWN) {
      cr_assert_eq(found, MX__PART_NONE, "more than one UNKNOWN cluster");
      found = id;
    }
  return found;
}

Test(partition_spec, input_shape_symbols_make_a_cluster_specializable) {
  mx_graph *g = batch_chain();
  mx_partition *p = pt_partition(g, 4, false, NULL, 0);
  uint32_t u = unknown_cluster(p);
  cr_assert_neq(u, MX__PART_NONE);
  cr_assert(p->spec[u].specializable, "%s", p->spec[u].why ? p->spec[u].why : "");
  cr_assert_eq(p->spec[u].n_syms, 1);
  cr_assert_str_eq(mx_symtab_symbol_name(g->syms, p->spec[u].syms[0]), "batch");
  char *text = pt_dump(p, mx_partition_dump_text);
  cr_assert(strstr(text, "| specializable on [batch]"), "%s", text);
  cr_assert(strstr(text, "symbols: batch (input)"), "%s", text);
  free(text);
  char *json = pt_dump(p, mx_partition_dump_json);
  cr_assert(strstr(json, "\"specializable\": true, \"spec_symbols\": [\"batch\"]"), "%s", json);
  cr_assert(strstr(json, "\"symbols\": [{\"name\": \"batch\", \"kind\": \"input\"}]"), "%s", json);
  free(json);
  mx_partition_destroy(p);
  mx_graph_destroy(g);
}

Test(partition_spec, two_symbols_listed_in_order) {
  mx_graph *g = pt_graph("two");
  mx_symtab *t = mx_graph_symtab(g);
  mx_dim a = mx_sym_named(t, "a"), b = mx_sym_named(t, "b");
  mx_value_id x = pt_input(g, "x", MX_FLOAT32, 2, (mx_dim[]){a, 4});
  mx_value_id y = pt_input(g, "y", MX_FLOAT32, 2, (mx_dim[]){4, b});
  mx_value_id r = pt_op1(g, "Relu", "relu", x);
  mx_value_id m = pt_op2(g, "MatMul", "mm", r, y);
  m = pt_op1(g, "Sigmoid", "sig", m);
  m = pt_op1(g, "Neg", "neg", m);
  cr_assert_eq(mx_graph_add_output(g, m), MX_OK);
  pt_infer(g);
  mx_partition *p = pt_partition(g, 4, false, NULL, 0);
  char *text = pt_dump(p, mx_partition_dump_text);
  cr_assert(strstr(text, "| specializable on [a, b]"), "%s", text);
  cr_assert(strstr(text, "symbols: a (input), b (input)"), "%s", text);
  free(text);
  mx_partition_destroy(p);
  mx_graph_destroy(g);
}

/* NonZero's count is a symbol bound by data: its cluster is never specializable. */
Test(partition_spec, data_dependent_symbol_is_never_specialized) {
  mx_graph *g = pt_graph("nz");
  mx_value_id x = pt_input(g, "x", MX_FLOAT32, 1, (mx_dim[]){6});
  mx_value_id nz = pt_op1(g, "NonZero", "nonzero", x);
  mx_value_id tr = pt_op1(g, "Transpose", "transpose", nz);
  mx_value_id f = pt_op(g, "Cast", "cast", &tr, 1, (mx_attr[]){mx_attr_int("to", MX_FLOAT32)}, 1);
  mx_value_id y = pt_op1(g, "Neg", "neg", f);
  y = pt_op1(g, "Abs", "abs", y);
  cr_assert_eq(mx_graph_add_output(g, y), MX_OK);
  pt_infer(g);
  mx_partition *p = pt_partition(g, 4, false, NULL, 0);
  bool any_unknown = false;
  for (uint32_t id = 0; id < p->n_clusters; id++) {
    if (p->clusters[id].type != MX_CLUSTER_UNKNOWN) continue;
    any_unknown = true;
    cr_assert_not(p->spec[id].specializable, "cluster %u is specializable", id);
  }
  cr_assert(any_unknown);
  char *json = pt_dump(p, mx_partition_dump_json);
  cr_assert(strstr(json, "\"kind\": \"data\""), "%s", json);
  cr_assert(strstr(json, "\"specializable\": false"), "%s", json);
  cr_assert_null(strstr(json, "\"specializable\": true"), "%s", json);
  free(json);
  char *text = pt_dump(p, mx_partition_dump_text);
  cr_assert_null(strstr(text, "specializable on"), "%s", text);
  free(text);
  mx_partition_destroy(p);
  mx_graph_destroy(g);
}

/* A symbol of an input dim written as an expression is not bound by that input alone. */
Test(partition_spec, symbol_kinds) {
  mx_graph *g = pt_graph("kinds");
  mx_symtab *t = mx_graph_symtab(g);
  mx_dim s = mx_sym_named(t, "s"), n = mx_sym_named(t, "n");
  pt_input(g, "x", MX_FLOAT32, 2, (mx_dim[]){s, 2});
  mx_value_id z = pt_input(g, "z", MX_FLOAT32, 1, (mx_dim[]){mx_sym_add(t, n, mx_sym_const(t, 1))});
  cr_assert_eq(mx_graph_add_output(g, pt_op1(g, "Neg", "neg", z)), MX_OK);
  pt_infer(g);
  uint8_t kinds[8];
  size_t k = mx_symtab_symbol_count(t);
  cr_assert_leq(k, 8);
  mx__spec_symbol_kinds(g, kinds, k);
  cr_assert_eq(kinds[mx_sym_symbol_index(t, s)], MX_SPEC_SYM_INPUT);
  cr_assert_eq(kinds[mx_sym_symbol_index(t, n)], MX_SPEC_SYM_DATA);
  mx_spec_info info;
  mx__spec_analyze(g, NULL, 0, kinds, k, &info);
  cr_assert_not(info.specializable);
  cr_assert_eq(info.why_sym, mx_sym_symbol_index(t, n));
  mx_graph_destroy(g);
}

/* Nodes forced dynamic stay dynamic. */
Test(partition_spec, forced_clusters_are_not_specializable) {
  mx_graph *g = batch_chain();
  const char *forced[] = {"relu", "add", "mul", "sig"};
  mx_partition *p = pt_partition(g, 4, false, forced, 4);
  uint32_t u = unknown_cluster(p);
  cr_assert_neq(u, MX__PART_NONE);
  cr_assert_not(p->spec[u].specializable);
  char *json = pt_dump(p, mx_partition_dump_json);
  cr_assert(strstr(json, "\"spec_why\": \"forced dynamic by option\""), "%s", json);
  free(json);
  mx_partition_destroy(p);
  mx_graph_destroy(g);
}
