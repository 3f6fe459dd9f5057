/* Rewrite rules on graphs holding subgraphs: the rules run inside If branches and Loop bodies
 * (at any depth) and on the root, where a value a body reads by name is never renamed away;
 * the fused graph's outputs against the unfused graph's (support_fusion.c). */
#include <criterion/criterion.h>

#include "support_fusion.h"

static mx_graph *sub(mx_graph *parent, const char *name) {
  mx_graph *s;
  cr_assert_eq(mx_graph_create_subgraph(parent, name, &s), MX_OK);
  return s;
}

static mx_value_id outer(mx_graph *s, const char *name) {
  mx_value_id v;
  cr_assert_eq(mx_graph_add_outer(s, name, &v), MX_OK, "%s", mx_graph_last_error(s));
  return v;
}

/* A one-output node whose output is called `name` (subgraphs capture values by name). */
static mx_value_id named(mx_graph *g, const char *type, mx_value_id in, const char *name) {
  const char *names[] = {name};
  mx_node_desc d = {.op_type = type, .inputs = &in, .n_inputs = 1, .output_names = names, .n_outputs = 1};
  mx_value_id y;
  cr_assert_eq(mx_graph_add_node(g, &d, &y), MX_OK, "%s", mx_graph_last_error(g));
  return y;
}

/* Gelu written out: x * 0.5 * (1 + Erf(x / sqrt 2)). */
static mx_value_id gelu_erf(mx_graph *g, mx_value_id x) {
  float r2 = 1.4142135f, one = 1.0f, half = 0.5f;
  mx_value_id e = FZ1(g, "Erf", FZ2(g, "Div", x, fz_const(g, 0, NULL, &r2)));
  return FZ2(g, "Mul", FZ2(g, "Mul", x, FZ2(g, "Add", e, fz_const(g, 0, NULL, &one))),
             fz_const(g, 0, NULL, &half));
}

/* A condition known only at run time: max(x) > threshold. */
static mx_value_id cond_of(mx_graph *g, mx_value_id x, float threshold) {
  mx_attr keep = mx_attr_int("keepdims", 0);
  mx_value_id m = fz_op(g, "ReduceMax", 1, &x, &keep, 1);
  return FZ2(g, "Greater", m, fz_const(g, 0, NULL, &threshold));
}

/* If: the then branch holds a Gelu in primitive ops, the else branch a Linear + Relu and an
 * Identity; threshold picks the branch the run takes (-100: then, 100: else). */
static void build_if(mx_graph *g, float threshold) {
  mx_dim b = mx_sym_named(mx_graph_symtab(g), "b");
  mx_value_id x = fz_input(g, "x", MX_FLOAT32, 2, (mx_dim[]){b, 8});
  mx_graph *th = sub(g, "then"), *el = sub(g, "else");
  cr_assert_eq(mx_graph_add_output(th, gelu_erf(th, outer(th, "x"))), MX_OK);
  mx_value_id ex = outer(el, "x");
  mx_value_id y = FZ2(el, "MatMul", ex, fz_weights(el, 2, (int64_t[]){8, 8}, 3));
  y = FZ1(el, "Relu", FZ2(el, "Add", y, fz_weights(el, 1, (int64_t[]){8}, 4)));
  cr_assert_eq(mx_graph_add_output(el, FZ1(el, "Identity", y)), MX_OK);
  mx_attr br[] = {mx_attr_graph("then_branch", th), mx_attr_graph("else_branch", el)};
  cr_assert_eq(mx_graph_add_output(g, fz_op(g, "If", 1, (mx_value_id[]){cond_of(g, x, threshold)}, br, 2)),
               MX_OK);
}
static void build_if_then(mx_graph *g) { build_if(g, -100.0f); }
static void build_if_else(mx_graph *g) { build_if(g, 100.0f); }

static void check_if(fz_builder build) {
  mx_fuse_report r;
  mx_graph *g = fz_fuse_and_compare(build, "default", (const int64_t[][MX_MAX_RANK]){{3, 8}}, &r);
  cr_assert_eq(fz_hits(&r, "gelu"), 1);
  cr_assert_eq(fz_hits(&r, "matmul_bias_act"), 1);
  cr_assert_geq(fz_hits(&r, "identity"), 1);
  cr_assert_eq(fz_count_deep(g, "Gelu"), 1);
  cr_assert_eq(fz_count_deep(g, "Erf"), 0);
  cr_assert_eq(fz_count_deep(g, "Relu"), 0);
  cr_assert_eq(fz_count_deep(g, "MatMul"), 1);
  cr_assert_lt(r.ops_after, r.ops_before);
  mx_graph_destroy(g);
}

Test(fusion_subgraph, rules_run_inside_if_branches) {
  check_if(build_if_then);
  check_if(build_if_else);
}

/* Loop (3 iterations) carrying v: v = Tanh(v W + c), with an If nested in the body whose
 * branch holds x * Sigmoid(x). */
static void build_loop(mx_graph *g) {
  mx_value_id x = fz_input(g, "x", MX_FLOAT32, 2, (mx_dim[]){2, 8});
  mx_graph *body = sub(g, "body");
  mx_value_id iter = fz_input(body, "i", MX_INT64, 0, NULL);
  (void)iter;
  mx_value_id cin = fz_input(body, "cond_in", MX_BOOL, 0, NULL);
  mx_value_id v = fz_input(body, "v", MX_FLOAT32, 2, (mx_dim[]){2, 8});
  mx_value_id y = FZ2(body, "MatMul", v, fz_weights(body, 2, (int64_t[]){8, 8}, 5));
  y = FZ1(body, "Tanh", FZ2(body, "Add", fz_weights(body, 1, (int64_t[]){8}, 6), y));
  mx_graph *th = sub(body, "swish"), *el = sub(body, "plain");
  mx_value_id ty = outer(th, "y_t");
  cr_assert_eq(mx_graph_add_output(th, FZ2(th, "Mul", ty, FZ1(th, "Sigmoid", ty))), MX_OK);
  cr_assert_eq(mx_graph_add_output(el, FZ1(el, "Neg", outer(el, "y_t"))), MX_OK);
  named(body, "Identity", y, "y_t");
  mx_attr br[] = {mx_attr_graph("then_branch", th), mx_attr_graph("else_branch", el)};
  mx_value_id picked = fz_op(body, "If", 1, (mx_value_id[]){cond_of(body, v, -100.0f)}, br, 2);
  cr_assert_eq(mx_graph_add_output(body, FZ1(body, "Identity", cin)), MX_OK);
  cr_assert_eq(mx_graph_add_output(body, picked), MX_OK);
  int64_t three = 3;
  mx_value_id m = fz_const_dt(g, MX_INT64, 0, NULL, &three);
  mx_attr ba = mx_attr_graph("body", body);
  cr_assert_eq(mx_graph_add_output(g, fz_op(g, "Loop", 3, (mx_value_id[]){m, MX_NO_VALUE, x}, &ba, 1)),
               MX_OK);
}

Test(fusion_subgraph, rules_run_inside_loop_bodies_and_nested_branches) {
  mx_fuse_report r;
  mx_graph *g = fz_fuse_and_compare(build_loop, "default", (const int64_t[][MX_MAX_RANK]){{2, 8}}, &r);
  cr_assert_eq(fz_hits(&r, "matmul_bias_act"), 1);
  cr_assert_eq(fz_hits(&r, "silu"), 1);
  cr_assert_eq(fz_count_deep(g, "Tanh"), 0);
  cr_assert_eq(fz_count_deep(g, "Swish"), 1);
  mx_graph_destroy(g);
}

/* The root's Identity would hand its output name to t's producer and drop t, which the branch
 * reads by name: it must stay. A CSE duplicate the branch reads stays computed too. */
static void build_captured(mx_graph *g) {
  mx_value_id x = fz_input(g, "x", MX_FLOAT32, 1, (mx_dim[]){6});
  mx_value_id t = named(g, "Relu", x, "t");
  mx_value_id e1 = FZ1(g, "Exp", x), e2 = named(g, "Exp", x, "e2");
  cr_assert_eq(mx_graph_add_output(g, FZ1(g, "Identity", t)), MX_OK);
  mx_graph *th = sub(g, "then"), *el = sub(g, "else");
  cr_assert_eq(mx_graph_add_output(th, FZ2(th, "Add", outer(th, "t"), outer(th, "e2"))), MX_OK);
  cr_assert_eq(mx_graph_add_output(el, FZ1(el, "Neg", outer(el, "t"))), MX_OK);
  mx_attr br[] = {mx_attr_graph("then_branch", th), mx_attr_graph("else_branch", el)};
  cr_assert_eq(mx_graph_add_output(g, fz_op(g, "If", 1, (mx_value_id[]){cond_of(g, x, -100.0f)}, br, 2)),
               MX_OK);
  cr_assert_eq(mx_graph_add_output(g, FZ2(g, "Add", e1, e2)), MX_OK);
}

Test(fusion_subgraph, root_values_read_by_a_branch_stay) {
  mx_fuse_report r;
  mx_graph *g = fz_fuse_and_compare(build_captured, "default", (const int64_t[][MX_MAX_RANK]){{6}}, &r);
  cr_assert_eq(fz_count(g, "Identity"), 1);
  cr_assert_neq(mx_graph_find_value(g, "t"), MX_NO_VALUE);
  cr_assert_neq(mx_graph_find_value(g, "e2"), MX_NO_VALUE);
  mx_graph_destroy(g);
}
