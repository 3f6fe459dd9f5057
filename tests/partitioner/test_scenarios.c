/* Partitioner scenarios with the exact clusters expected (normal and stable mode): all-static
 * graphs, chains mixing static and dynamic nodes, path absorption, known chains joined through
 * an unknown node, small clusters and the limits 0 and -1, a data-dependent NonZero, shared
 * constants, an unknown last node. Each also checks the partitioned root graph. */
#include "test_helpers.h"

static const int64_t d23[] = {2, 3};

/* x -> a (Relu) -> b (Neg) -> c (Add w) -> d (Relu) -> out */
static mx_graph *all_static(void) {
  mx_graph *g = pt_graph("all_static");
  mx_value_id x = pt_input(g, "x", MX_FLOAT32, 2, (mx_dim[]){2, 3});
  mx_value_id w = pt_const(g, "w", 1, (int64_t[]){3}, 1.0f);
  mx_value_id a = pt_op1(g, "Relu", "a", x);
  mx_value_id b = pt_op1(g, "Neg", "b", a);
  mx_value_id c = pt_op2(g, "Add", "c", b, w);
  mx_value_id d = pt_op1(g, "Relu", "d", c);
  cr_assert_eq(mx_graph_add_output(g, d), MX_OK);
  pt_infer(g);
  return g;
}

Test(scenarios, all_static_is_one_known_cluster) {
  mx_graph *g = all_static();
  for (int stable = 0; stable < 2; stable++) {
    for (int64_t limit = 0; limit <= 8; limit += 4) {
      mx_partition *p = pt_partition(g, limit, stable, NULL, 0);
      pt_expect(p, g, "K:a,b,c,d");
      mx_partition_totals t;
      mx_partition_get_totals(p, &t);
      cr_assert_eq(t.unknown_nodes, 0);
      cr_assert_eq(t.known_clusters, 1);
      cr_assert_eq(t.shared_constants, 0, "w moves into the static model");
      cr_assert_eq(pt_reason(p, g, "c"), MX_PART_KNOWN);
      /* DATA x, KNOWN, NETOUTPUT. */
      cr_assert_eq(mx_partition_cluster_count(p), 3);
      pt_check_root_order(p);
      pt_check_roundtrip(p, g, false);
      mx_partition_destroy(p);
    }
  }
  /* -1 still makes it all dynamic. */
  mx_partition *p = pt_partition(g, -1, false, NULL, 0);
  pt_expect(p, g, "U:a,b,c,d");
  cr_assert_eq(pt_reason(p, g, "a"), MX_PART_ALL_DYNAMIC);
  mx_partition_destroy(p);
  mx_graph_destroy(g);
}

/* x -> s1 (Relu) -> d1 (Neg, forced) -> d2 (Relu, forced) -> s2 (Neg) */
static mx_graph *static_dynamic_chain(void) {
  mx_graph *g = pt_graph("sdds");
  mx_value_id x = pt_input(g, "x", MX_FLOAT32, 2, (mx_dim[]){2, 3});
  mx_value_id s1 = pt_op1(g, "Relu", "s1", x);
  mx_value_id d1 = pt_op1(g, "Neg", "d1", s1);
  mx_value_id d2 = pt_op1(g, "Relu", "d2", d1);
  mx_value_id s2 = pt_op1(g, "Neg", "s2", d2);
  cr_assert_eq(mx_graph_add_output(g, s2), MX_OK);
  pt_infer(g);
  return g;
}

static const char *const dyn12[] = {"d1", "d2"};

Test(scenarios, static_dynamic_dynamic_static) {
  mx_graph *g = static_dynamic_chain();
  for (int stable = 0; stable < 2; stable++) {
    /* Default limit: the one-op static clusters are too small, so one unknown cluster. */
    mx_partition *p = pt_partition(g, 4, stable, dyn12, 2);
    pt_expect(p, g, "U:s1,d1,d2,s2");
    cr_assert_eq(pt_reason(p, g, "s1"), MX_PART_SMALL_CLUSTER);
    cr_assert_eq(pt_reason(p, g, "d1"), MX_PART_FORCED);
    mx_graph *root = mx_partition_root(p);
    cr_assert_eq(mx_graph_node_count(root), 1, "the root holds one call");
    cr_assert(mx__part_call_is_unknown(&root->nodes[0]));
    pt_check_roundtrip(p, g, false);
    mx_partition_destroy(p);
    /* Limit 0 keeps the static ends. */
    p = pt_partition(g, 0, stable, dyn12, 2);
    pt_expect(p, g, "K:s1|U:d1,d2|K:s2");
    cr_assert_eq(pt_reason(p, g, "s1"), MX_PART_KNOWN);
    pt_check_root_order(p);
    pt_check_roundtrip(p, g, false);
    mx_partition_destroy(p);
  }
  mx_graph_destroy(g);
}

/* a -> u1 -> u2, with the side path u1 -> k -> u2 (k known). */
static mx_graph *side_path(void) {
  mx_graph *g = pt_graph("side_path");
  mx_value_id x = pt_input(g, "x", MX_FLOAT32, 2, (mx_dim[]){2, 3});
  mx_value_id a = pt_op1(g, "Relu", "a", x);
  mx_value_id u1 = pt_op1(g, "Neg", "u1", a);
  mx_value_id k = pt_op1(g, "Relu", "k", u1);
  mx_value_id u2 = pt_op2(g, "Add", "u2", u1, k);
  mx_value_id b = pt_op1(g, "Neg", "b", u2);
  cr_assert_eq(mx_graph_add_output(g, b), MX_OK);
  pt_infer(g);
  return g;
}

static const char *const u12[] = {"u1", "u2"};

Test(scenarios, known_node_on_side_path_is_absorbed) {
  mx_graph *g = side_path();
  mx_partition *p = pt_partition(g, 0, false, u12, 2);
  pt_expect(p, g, "K:a|U:u1,k,u2|K:b");
  mx_partition_node_info info;
  cr_assert(mx_partition_node(p, mx_graph_find_node(g, "k"), &info));
  cr_assert_eq(info.reason.kind, MX_PART_ABSORBED);
  cr_assert(info.unknown);
  cr_assert_eq(info.reason.from, mx_graph_find_node(g, "u1"));
  cr_assert_eq(info.reason.to, mx_graph_find_node(g, "u2"));
  char *why = pt_explain(p, "k");
  cr_assert(strstr(why, "'u1' -> 'u2'"), "%s", why);
  free(why);
  pt_check_roundtrip(p, g, false);
  mx_partition_destroy(p);
  /* Default limit: both one-op known ends become unknown too. */
  p = pt_partition(g, 4, false, u12, 2);
  pt_expect(p, g, "U:a,u1,k,u2,b");
  mx_partition_destroy(p);
  /* Stable mode does not absorb: runs of the order. */
  p = pt_partition(g, 0, true, u12, 2);
  pt_expect(p, g, "K:a|U:u1|K:k|U:u2|K:b");
  pt_check_root_order(p);
  pt_check_roundtrip(p, g, false);
  mx_partition_destroy(p);
  mx_graph_destroy(g);
}

/* a1..a4 -> u (forced) -> b1, and a4 -> b1 directly; b1..b4. */
static mx_graph *two_paths(void) {
  mx_graph *g = pt_graph("two_paths");
  mx_value_id x = pt_input(g, "x", MX_FLOAT32, 2, (mx_dim[]){2, 3});
  mx_value_id a1 = pt_op1(g, "Relu", "a1", x);
  mx_value_id a2 = pt_op1(g, "Neg", "a2", a1);
  mx_value_id a3 = pt_op1(g, "Relu", "a3", a2);
  mx_value_id a4 = pt_op1(g, "Neg", "a4", a3);
  mx_value_id u = pt_op1(g, "Neg", "u", a4);
  mx_value_id b1 = pt_op2(g, "Add", "b1", a4, u);
  mx_value_id b2 = pt_op1(g, "Relu", "b2", b1);
  mx_value_id b3 = pt_op1(g, "Neg", "b3", b2);
  mx_value_id b4 = pt_op1(g, "Relu", "b4", b3);
  cr_assert_eq(mx_graph_add_output(g, b4), MX_OK);
  pt_infer(g);
  return g;
}

static const char *const only_u[] = {"u"};

Test(scenarios, known_chains_joined_by_two_paths_stay_apart) {
  mx_graph *g = two_paths();
  for (int stable = 0; stable < 2; stable++) {
    mx_partition *p = pt_partition(g, 4, stable, only_u, 1);
    pt_expect(p, g, "K:a1,a2,a3,a4|U:u|K:b1,b2,b3,b4");
    /* The value a4 crosses into both u's cluster and b's cluster. */
    uint32_t ca = pt_cluster_of(p, g, "a4"), cb = pt_cluster_of(p, g, "b1");
    mx_partition_cluster_info ia, ib;
    cr_assert(mx_partition_cluster(p, ca, &ia));
    cr_assert(mx_partition_cluster(p, cb, &ib));
    cr_assert_eq(ia.n_outputs, 1);
    cr_assert_eq(ib.n_inputs, 2);
    mx_partition_boundary bnd;
    cr_assert(mx_partition_cluster_input(p, cb, 0, &bnd));
    cr_assert_eq(bnd.value, mx_graph_find_value(g, "a4"));
    cr_assert_eq(bnd.parent_index, 0);
    cr_assert_eq(bnd.peer, ca);
    cr_assert(mx_partition_cluster_input(p, cb, 1, &bnd));
    cr_assert_eq(bnd.value, mx_graph_find_value(g, "u"));
    cr_assert_eq(bnd.parent_index, 1);
    pt_check_root_order(p);
    pt_check_roundtrip(p, g, false);
    mx_partition_destroy(p);
  }
  mx_graph_destroy(g);
}

/* p1..p4 -> u1 -> k1 -> k2 -> u2 -> q1..q4 */
static mx_graph *small_middle(void) {
  mx_graph *g = pt_graph("small_middle");
  mx_value_id v = pt_input(g, "x", MX_FLOAT32, 2, (mx_dim[]){2, 3});
  const char *names[] = {"p1", "p2", "p3", "p4", "u1", "k1", "k2", "u2", "q1", "q2", "q3", "q4"};
  for (size_t i = 0; i < 12; i++) v = pt_op1(g, i % 2 ? "Neg" : "Relu", names[i], v);
  cr_assert_eq(mx_graph_add_output(g, v), MX_OK);
  pt_infer(g);
  return g;
}

Test(scenarios, small_known_cluster_and_limits) {
  mx_graph *g = small_middle();
  for (int stable = 0; stable < 2; stable++) {
    mx_partition *p = pt_partition(g, 4, stable, u12, 2);
    pt_expect(p, g, "K:p1,p2,p3,p4|U:u1,k1,k2,u2|K:q1,q2,q3,q4");
    mx_partition_node_info info;
    cr_assert(mx_partition_node(p, mx_graph_find_node(g, "k1"), &info));
    cr_assert_eq(info.reason.kind, MX_PART_SMALL_CLUSTER);
    cr_assert_eq(info.reason.cluster_ops, 2);
    cr_assert_eq(info.reason.limit, 4);
    pt_check_roundtrip(p, g, false);
    mx_partition_destroy(p);

    p = pt_partition(g, 0, stable, u12, 2);
    pt_expect(p, g, "K:p1,p2,p3,p4|U:u1|K:k1,k2|U:u2|K:q1,q2,q3,q4");
    pt_check_root_order(p);
    pt_check_roundtrip(p, g, false);
    mx_partition_destroy(p);

    p = pt_partition(g, -1, stable, u12, 2);
    pt_expect(p, g, "U:p1,p2,p3,p4,u1,k1,k2,u2,q1,q2,q3,q4");
    cr_assert_eq(pt_reason(p, g, "q4"), MX_PART_ALL_DYNAMIC);
    cr_assert_eq(pt_reason(p, g, "u1"), MX_PART_FORCED);
    pt_check_roundtrip(p, g, false);
    mx_partition_destroy(p);

    /* A limit above every known cluster: everything unknown, merged into one. */
    p = pt_partition(g, 5, stable, u12, 2);
    pt_expect(p, g, "U:p1,p2,p3,p4,u1,k1,k2,u2,q1,q2,q3,q4");
    mx_partition_destroy(p);
  }
  mx_graph_destroy(g);
}

/* k1..k4 -> nz (NonZero) -> c (Cast) -> r (ReduceSum over the data-dependent axis) -> s1..s4 */
static mx_graph *nonzero_middle(void) {
  mx_graph *g = pt_graph("nonzero");
  mx_value_id v = pt_input(g, "x", MX_FLOAT32, 2, (mx_dim[]){4, 4});
  const char *pre[] = {"k1", "k2", "k3", "k4"};
  for (size_t i = 0; i < 4; i++) v = pt_op1(g, i % 2 ? "Neg" : "Relu", pre[i], v);
  mx_value_id nz = pt_op1(g, "NonZero", "nz", v);
  mx_attr to = mx_attr_int("to", MX_FLOAT32);
  mx_value_id c = pt_op(g, "Cast", "c", &nz, 1, &to, 1);
  mx_value_id axes = pt_const_i64(g, "axes", 1, (int64_t[]){1});
  mx_attr keep = mx_attr_int("keepdims", 0);
  mx_value_id r = pt_op(g, "ReduceSum", "r", (mx_value_id[]){c, axes}, 2, &keep, 1);
  mx_value_id w = pt_const(g, "w2", 1, (int64_t[]){2}, 0.5f);
  v = pt_op2(g, "Add", "s1", r, w);
  v = pt_op1(g, "Relu", "s2", v);
  v = pt_op1(g, "Neg", "s3", v);
  v = pt_op1(g, "Relu", "s4", v);
  cr_assert_eq(mx_graph_add_output(g, v), MX_OK);
  pt_infer(g);
  return g;
}

Test(scenarios, data_dependent_nonzero_in_static_graph) {
  mx_graph *g = nonzero_middle();
  for (int stable = 0; stable < 2; stable++) {
    mx_partition *p = pt_partition(g, 4, stable, NULL, 0);
    pt_expect(p, g, "K:k1,k2,k3,k4|U:nz,c,r|K:s1,s2,s3,s4");
    cr_assert_eq(pt_reason(p, g, "nz"), MX_PART_DATA_DEPENDENT);
    cr_assert_eq(pt_reason(p, g, "c"), MX_PART_SYMBOLIC_DIM);
    cr_assert_eq(pt_reason(p, g, "r"), MX_PART_SYMBOLIC_DIM);
    cr_assert_eq(pt_reason(p, g, "s1"), MX_PART_KNOWN);
    /* axes moves into the unknown cluster, w2 into the last known one. */
    cr_assert_eq(pt_cluster_of(p, g, "r"), pt_cluster_of(p, g, "nz"));
    mx_partition_totals t;
    mx_partition_get_totals(p, &t);
    cr_assert_eq(t.constants, 2);
    cr_assert_eq(t.shared_constants, 0);
    /* explain follows the fresh symbol back to NonZero. */
    char *why = pt_explain(p, "c");
    cr_assert(strstr(why, "created at run time by node 'nz' (NonZero)"), "%s", why);
    free(why);
    pt_check_root_order(p);
    pt_check_roundtrip(p, g, true);
    mx_partition_destroy(p);
  }
  mx_graph_destroy(g);
}

/* w is read by k1 (known) and u (unknown); v only by k2; z only by u. */
static mx_graph *shared_constant(void) {
  mx_graph *g = pt_graph("shared");
  mx_value_id x = pt_input(g, "x", MX_FLOAT32, 2, (mx_dim[]){2, 3});
  mx_value_id w = pt_const(g, "w", 2, d23, 1.0f);
  mx_value_id v = pt_const(g, "v", 1, (int64_t[]){3}, 2.0f);
  mx_value_id z = pt_const(g, "z", 1, (int64_t[]){3}, 3.0f);
  mx_value_id k1 = pt_op2(g, "Add", "k1", x, w);
  mx_value_id k2 = pt_op2(g, "Add", "k2", k1, v);
  mx_value_id k3 = pt_op1(g, "Relu", "k3", k2);
  mx_value_id k4 = pt_op1(g, "Neg", "k4", k3);
  mx_value_id u = pt_op2(g, "Add", "u", k4, w);
  mx_value_id u2 = pt_op2(g, "Add", "u_2", u, z);
  cr_assert_eq(mx_graph_add_output(g, u2), MX_OK);
  pt_infer(g);
  return g;
}

static const char *const u_and_u2[] = {"u", "u_2"};

Test(scenarios, constant_shared_by_known_and_unknown) {
  mx_graph *g = shared_constant();
  for (int stable = 0; stable < 2; stable++) {
    mx_partition *p = pt_partition(g, 4, stable, u_and_u2, 2);
    pt_expect(p, g, "K:k1,k2,k3,k4|U:u,u_2");
    mx_partition_totals t;
    mx_partition_get_totals(p, &t);
    cr_assert_eq(t.constants, 3);
    cr_assert_eq(t.shared_constants, 1);
    /* w is an INPUT cluster in the root; both calls take it as a const input. */
    uint32_t wc = UINT32_MAX;
    for (size_t id = 0; id < mx_partition_cluster_count(p); id++) {
      mx_partition_cluster_info ci;
      mx_partition_cluster(p, id, &ci);
      if (ci.type == MX_CLUSTER_INPUT) wc = (uint32_t)id;
    }
    cr_assert_neq(wc, UINT32_MAX);
    mx_graph *root = mx_partition_root(p);
    mx_value_id rw = mx_graph_find_value(root, "w");
    cr_assert_neq(rw, MX_NO_VALUE);
    cr_assert_not_null(mx_graph_value_constant(root, rw));
    cr_assert_eq(mx_graph_find_value(root, "v"), MX_NO_VALUE, "v moved into the known cluster");
    cr_assert_eq(mx_graph_find_value(root, "z"), MX_NO_VALUE, "z follows its unknown reader");
    size_t calls = 0;
    for (size_t n = 0; n < root->n_nodes; n++) {
      const mx_node *nd = &root->nodes[n];
      if (!mx__part_is_call(nd)) continue;
      calls++;
      bool found = false;
      for (uint32_t k = 0; k < nd->n_inputs; k++) {
        if (nd->inputs[k] != rw) continue;
        found = true;
        cr_assert(mx__part_call_input_is_const(nd, k), "call %s input %u must be marked constant", nd->name,
                  k);
      }
      cr_assert(found, "call %s must read w", nd->name);
      mx_graph *body = mx__part_call_body(nd);
      cr_assert_not_null(body);
      if (mx__part_call_is_unknown(nd))
        cr_assert_neq(mx_graph_find_value(body, "z"), MX_NO_VALUE);
      else
        cr_assert_neq(mx_graph_find_value(body, "v"), MX_NO_VALUE);
    }
    cr_assert_eq(calls, 2);
    char *why = pt_explain(p, "w");
    cr_assert(strstr(why, "kept in the root"), "%s", why);
    free(why);
    pt_check_roundtrip(p, g, false);
    mx_partition_destroy(p);
  }
  mx_graph_destroy(g);
}

/* k1..k4 -> nz (NonZero) as the last node. */
Test(scenarios, only_the_last_node_is_unknown) {
  mx_graph *g = pt_graph("last");
  mx_value_id v = pt_input(g, "x", MX_FLOAT32, 2, (mx_dim[]){4, 4});
  const char *pre[] = {"k1", "k2", "k3", "k4"};
  for (size_t i = 0; i < 4; i++) v = pt_op1(g, i % 2 ? "Neg" : "Relu", pre[i], v);
  v = pt_op1(g, "NonZero", "nz", v);
  cr_assert_eq(mx_graph_add_output(g, v), MX_OK);
  pt_infer(g);
  for (int stable = 0; stable < 2; stable++) {
    mx_partition *p = pt_partition(g, 4, stable, NULL, 0);
    pt_expect(p, g, "K:k1,k2,k3,k4|U:nz");
    pt_check_roundtrip(p, g, true);
    mx_partition_destroy(p);
    p = pt_partition(g, 5, stable, NULL, 0);
    pt_expect(p, g, "U:k1,k2,k3,k4,nz");
    mx_partition_destroy(p);
  }
  mx_graph_destroy(g);
}

/* Two independent chains built interleaved: a known one and an unknown one. Normal mode keeps
 * them apart; stable mode sees alternating one-op runs and makes everything unknown. */
Test(scenarios, stable_mode_follows_the_order) {
  mx_graph *g = pt_graph("interleaved");
  mx_value_id x = pt_input(g, "x", MX_FLOAT32, 2, (mx_dim[]){2, 3});
  mx_value_id a = x, b = x;
  const char *an[] = {"a1", "a2", "a3", "a4"}, *bn[] = {"b1", "b2", "b3", "b4"};
  for (size_t i = 0; i < 4; i++) {
    a = pt_op1(g, "Relu", an[i], a);
    b = pt_op1(g, "Neg", bn[i], b);
  }
  cr_assert_eq(mx_graph_add_output(g, a), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, b), MX_OK);
  pt_infer(g);
  mx_partition *p = pt_partition(g, 4, false, bn, 4);
  pt_expect(p, g, "K:a1,a2,a3,a4|U:b1,b2,b3,b4");
  pt_check_roundtrip(p, g, false);
  mx_partition_destroy(p);
  p = pt_partition(g, 4, true, bn, 4);
  pt_expect(p, g, "U:a1,b1,a2,b2,a3,b3,a4,b4");
  pt_check_roundtrip(p, g, false);
  mx_partition_destroy(p);
  p = pt_partition(g, 0, true, bn, 4);
  pt_expect(p, g, "K:a1|U:b1|K:a2|U:b2|K:a3|U:b3|K:a4|U:b4");
  pt_check_root_order(p);
  pt_check_roundtrip(p, g, false);
  mx_partition_destroy(p);
  mx_graph_destroy(g);
}

/* A symbolic batch makes everything downstream unknown; explain names the graph input. */
Test(scenarios, symbolic_input_explained) {
  mx_graph *g = pt_graph("sym");
  mx_dim batch = mx_sym_named(mx_graph_symtab(g), "batch");
  mx_value_id x = pt_input(g, "x", MX_FLOAT32, 2, (mx_dim[]){batch, 3});
  mx_value_id a = pt_op1(g, "Relu", "a", x);
  mx_value_id b = pt_op1(g, "Neg", "b", a);
  cr_assert_eq(mx_graph_add_output(g, b), MX_OK);
  pt_infer(g);
  mx_partition *p = pt_partition(g, 4, false, NULL, 0);
  pt_expect(p, g, "U:a,b");
  mx_partition_node_info info;
  cr_assert(mx_partition_node(p, mx_graph_find_node(g, "b"), &info));
  cr_assert_eq(info.reason.kind, MX_PART_SYMBOLIC_DIM);
  cr_assert_eq(info.reason.value, a);
  cr_assert_eq(info.reason.slot, 0);
  cr_assert_not(info.reason.is_output);
  cr_assert_eq(info.reason.dim, 0);
  char line[256];
  mx_partition_reason_format(p, mx_graph_find_node(g, "b"), line, sizeof line);
  cr_assert_str_eq(line, "input 0 'a' dim 0 is symbolic: batch");
  char *why = pt_explain(p, "b");
  cr_assert(strstr(why, "symbol 'batch' comes from graph input 'x' dim 0"), "%s", why);
  free(why);
  why = pt_explain(p, "x");
  cr_assert(strstr(why, "graph input 'x'"), "%s", why);
  free(why);
  cr_assert_eq(mx_partition_explain(p, "nope", stdout), MX_ERR_NOT_FOUND);
  cr_assert(strstr(mx_partition_last_error(p), "'nope'"));
  pt_check_roundtrip(p, g, false);
  mx_partition_destroy(p);
  mx_graph_destroy(g);
}
