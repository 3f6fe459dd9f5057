/* Control flow built through the graph API: If / Loop / Scan inference (symbolic shapes where
 * branches or iterations differ), the reference interpreter running subgraphs with outer-scope
 * captures (nested If inside a Loop, a Loop whose trip count depends on data), the folding of an
 * If on a constant, the malformed cases refused naming the node, control nodes run through a
 * session, and an ONNX export / import round trip of a Loop over a sequence. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control_support.h"
#include "graph/ir.h"
#include "mixrt/graph.h"
#include "mixrt/onnx.h"
#include "mixrt/reference.h"
#include "mixrt/sequence.h"
#include "mixrt/session.h"

static mx_graph *new_graph(void) {
  mx_graph *g = NULL;
  cr_assert_eq(mx_graph_create("t", &g), MX_OK);
  return g;
}

static mx_value_id input(mx_graph *g, const char *name, mx_dtype dt, int32_t rank, const mx_dim *dims) {
  mx_shape s = {.rank = rank};
  for (int32_t i = 0; i < rank; i++) s.dims[i] = dims[i];
  mx_value_id v;
  cr_assert_eq(mx_graph_add_input(g, name, dt, &s, &v), MX_OK, "%s", mx_graph_last_error(g));
  return v;
}

/* Adds node `type` named `name` with the given inputs, attributes and n_out outputs. */
static void run1(mx_graph *g, const mx_tensor *ins, size_t n_in, mx_tensor *out, size_t n_out) {
  mx_error err = {0};
  cr_assert_eq(mx_reference_run(g, ins, n_in, out, n_out, &err), MX_OK, "%s", err.message);
}

/* If whose branches give [6] (Concat of x with itself) and [3] (x): one output of rank 1 whose
 * dim is a fresh symbol, and each branch's result at run time. */
static mx_graph *if_different_shapes(void) {
  mx_graph *g = new_graph();
  mx_value_id c = input(g, "c", MX_BOOL, 0, NULL);
  input(g, "x", MX_FLOAT32, 1, (mx_dim[]){3});
  mx_graph *th = ctl_sub(g, "then"), *el = ctl_sub(g, "else");
  mx_value_id tx = ctl_outer(th, "x"), y;
  mx_attr ax = mx_attr_int("axis", 0);
  ctl_node(th, "Concat", "cat", (mx_value_id[]){tx, tx}, 2, &ax, 1, &y, 1);
  cr_assert_eq(mx_graph_add_output(th, y), MX_OK);
  mx_value_id ex = ctl_outer(el, "x");
  cr_assert_eq(mx_graph_add_output(el, ctl_op(el, "Identity", &ex, 1)), MX_OK);
  mx_attr br[] = {mx_attr_graph("then_branch", th), mx_attr_graph("else_branch", el)};
  mx_value_id out;
  ctl_node(g, "If", "choose", &c, 1, br, 2, &out, 1);
  cr_assert_eq(mx_graph_add_output(g, out), MX_OK);
  return g;
}

Test(control, if_branches_of_different_shapes) {
  mx_graph *g = if_different_shapes();
  cr_assert_eq(mx_graph_infer(g), MX_OK, "%s", mx_graph_last_error(g));
  mx_shape s;
  mx_graph_value_shape(g, mx_graph_output(g, 0), &s);
  cr_assert_eq(s.rank, 1);
  cr_assert(mx_dim_is_expr(s.dims[0]), "the differing dim is a fresh symbol");
  float xv[3] = {1, 2, 3};
  for (int cond = 0; cond < 2; cond++) {
    uint8_t cv = (uint8_t)cond;
    mx_tensor in[2] = {{.dtype = MX_BOOL, .rank = 0, .data = &cv},
                       {.dtype = MX_FLOAT32, .rank = 1, .dims = {3}, .data = xv}};
    mx_tensor out;
    run1(g, in, 2, &out, 1);
    cr_assert_eq(out.dims[0], cond ? 6 : 3);
    cr_assert_eq(((float *)out.data)[out.dims[0] - 1], 3.0f);
    mx_tensor_release(&out);
  }
  mx_graph_destroy(g);
}

/* Branches of equal shapes keep the concrete shape. */
Test(control, if_branches_of_equal_shapes_stay_concrete) {
  mx_graph *g = new_graph();
  mx_value_id c = input(g, "c", MX_BOOL, 0, NULL);
  mx_dim b = mx_sym_named(mx_graph_symtab(g), "b");
  input(g, "x", MX_FLOAT32, 2, (mx_dim[]){b, 4});
  mx_graph *th = ctl_sub(g, "then"), *el = ctl_sub(g, "else");
  mx_value_id tx = ctl_outer(th, "x"), ex = ctl_outer(el, "x");
  cr_assert_eq(mx_graph_add_output(th, ctl_op(th, "Relu", &tx, 1)), MX_OK);
  cr_assert_eq(mx_graph_add_output(el, ctl_op(el, "Neg", &ex, 1)), MX_OK);
  mx_attr br[] = {mx_attr_graph("then_branch", th), mx_attr_graph("else_branch", el)};
  mx_value_id out;
  ctl_node(g, "If", "choose", &c, 1, br, 2, &out, 1);
  cr_assert_eq(mx_graph_add_output(g, out), MX_OK);
  cr_assert_eq(mx_graph_infer(g), MX_OK, "%s", mx_graph_last_error(g));
  mx_shape s;
  mx_graph_value_shape(g, out, &s);
  cr_assert_eq(s.rank, 2);
  cr_assert_eq(s.dims[0], b);
  cr_assert_eq(s.dims[1], 4);
  mx_graph_destroy(g);
}

/* Loop with no trip count: runs while iter + 1 < limit, where limit is a graph input captured by
 * the body, summing into acc and emitting the iteration number as a scan output. */
static mx_graph *data_dependent_loop(void) {
  mx_graph *g = new_graph();
  input(g, "limit", MX_INT64, 0, NULL);
  mx_value_id acc0 = ctl_fconst(g, "acc0", 0.0f);
  ctl_iconst(g, "one_i", 1);
  mx_graph *body = ctl_sub(g, "body");
  mx_value_id it = input(body, "iter", MX_INT64, 0, NULL);
  input(body, "cond_in", MX_BOOL, 0, NULL);
  mx_value_id acc = input(body, "acc", MX_FLOAT32, 1, (mx_dim[]){1});
  mx_value_id lim = ctl_outer(body, "limit"), one_i = ctl_outer(body, "one_i");
  mx_value_id next = ctl_op(body, "Add", (mx_value_id[]){it, one_i}, 2);
  mx_value_id cond = ctl_op(body, "Less", (mx_value_id[]){next, lim}, 2);
  mx_value_id one_f = ctl_fconst(body, "one_f", 1.0f);
  mx_value_id acc1 = ctl_op(body, "Add", (mx_value_id[]){acc, one_f}, 2);
  mx_value_id it_out = ctl_op(body, "Identity", &it, 1);
  cr_assert_eq(mx_graph_add_output(body, cond), MX_OK);
  cr_assert_eq(mx_graph_add_output(body, acc1), MX_OK);
  cr_assert_eq(mx_graph_add_output(body, it_out), MX_OK);
  mx_attr a = mx_attr_graph("body", body);
  mx_value_id outs[2];
  ctl_node(g, "Loop", "loop", (mx_value_id[]){MX_NO_VALUE, MX_NO_VALUE, acc0}, 3, &a, 1, outs, 2);
  cr_assert_eq(mx_graph_add_output(g, outs[0]), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, outs[1]), MX_OK);
  return g;
}

Test(control, loop_with_data_dependent_trip_count) {
  mx_graph *g = data_dependent_loop();
  cr_assert_eq(mx_graph_infer(g), MX_OK, "%s", mx_graph_last_error(g));
  mx_shape s;
  mx_graph_value_shape(g, mx_graph_output(g, 1), &s);
  cr_assert_eq(s.rank, 1);
  cr_assert(mx_dim_is_expr(s.dims[0]), "the scan output's iteration count is a symbol");
  int64_t limit = 5;
  mx_tensor in = {.dtype = MX_INT64, .rank = 0, .data = &limit};
  mx_tensor out[2];
  run1(g, &in, 1, out, 2);
  cr_assert_eq(((float *)out[0].data)[0], 5.0f);
  cr_assert_eq(out[1].rank, 1);
  cr_assert_eq(out[1].dims[0], 5);
  for (int64_t i = 0; i < 5; i++) cr_assert_eq(((int64_t *)out[1].data)[i], i);
  mx_tensor_release(&out[0]);
  mx_tensor_release(&out[1]);
  mx_graph_destroy(g);
}

/* A loop-carried value that grows every iteration gets a fresh symbol for the growing dim. */
Test(control, loop_carried_value_whose_shape_changes) {
  mx_graph *g = new_graph();
  mx_value_id m = ctl_iconst(g, "m", 3);
  mx_value_id x0 = ctl_fconst(g, "x0", 1.0f);
  mx_graph *body = ctl_sub(g, "body");
  input(body, "iter", MX_INT64, 0, NULL);
  mx_value_id ci = input(body, "cond_in", MX_BOOL, 0, NULL);
  mx_value_id x = input(body, "x", MX_FLOAT32, 1, (mx_dim[]){1});
  mx_attr ax = mx_attr_int("axis", 0);
  mx_value_id y;
  ctl_node(body, "Concat", "grow", (mx_value_id[]){x, x}, 2, &ax, 1, &y, 1);
  cr_assert_eq(mx_graph_add_output(body, ctl_op(body, "Identity", &ci, 1)), MX_OK);
  cr_assert_eq(mx_graph_add_output(body, y), MX_OK);
  mx_attr a = mx_attr_graph("body", body);
  mx_value_id out;
  ctl_node(g, "Loop", "grow_loop", (mx_value_id[]){m, MX_NO_VALUE, x0}, 3, &a, 1, &out, 1);
  cr_assert_eq(mx_graph_add_output(g, out), MX_OK);
  cr_assert_eq(mx_graph_infer(g), MX_OK, "%s", mx_graph_last_error(g));
  mx_shape s;
  mx_graph_value_shape(g, out, &s);
  cr_assert_eq(s.rank, 1);
  cr_assert(mx_dim_is_expr(s.dims[0]));
  mx_tensor r;
  run1(g, NULL, 0, &r, 1);
  cr_assert_eq(r.dims[0], 8);
  mx_tensor_release(&r);
  mx_graph_destroy(g);
}

/* Loop of 4 iterations whose body holds an If: iterations 0 and 1 add `one` (a constant of the
 * root graph, captured two levels down), later ones add `ten`. */
Test(control, nested_if_inside_loop) {
  mx_graph *g = new_graph();
  mx_value_id m = ctl_iconst(g, "m", 4);
  mx_value_id acc0 = ctl_fconst(g, "acc0", 0.0f);
  ctl_fconst(g, "one", 1.0f);
  ctl_fconst(g, "ten", 10.0f);
  ctl_iconst(g, "two", 2);
  mx_graph *body = ctl_sub(g, "body");
  mx_value_id it = input(body, "iter", MX_INT64, 0, NULL);
  mx_value_id ci = input(body, "cond_in", MX_BOOL, 0, NULL);
  input(body, "acc", MX_FLOAT32, 1, (mx_dim[]){1});
  mx_value_id two = ctl_outer(body, "two");
  mx_value_id small = ctl_op(body, "Less", (mx_value_id[]){it, two}, 2);
  mx_graph *th = ctl_sub(body, "then"), *el = ctl_sub(body, "else");
  mx_value_id ta = ctl_outer(th, "acc"), t1 = ctl_outer(th, "one");
  cr_assert_eq(mx_graph_add_output(th, ctl_op(th, "Add", (mx_value_id[]){ta, t1}, 2)), MX_OK);
  mx_value_id ea = ctl_outer(el, "acc"), e10 = ctl_outer(el, "ten");
  cr_assert_eq(mx_graph_add_output(el, ctl_op(el, "Add", (mx_value_id[]){ea, e10}, 2)), MX_OK);
  mx_attr br[] = {mx_attr_graph("then_branch", th), mx_attr_graph("else_branch", el)};
  mx_value_id acc1;
  ctl_node(body, "If", "inner_if", &small, 1, br, 2, &acc1, 1);
  cr_assert_eq(mx_graph_add_output(body, ctl_op(body, "Identity", &ci, 1)), MX_OK);
  cr_assert_eq(mx_graph_add_output(body, acc1), MX_OK);
  mx_attr a = mx_attr_graph("body", body);
  mx_value_id out;
  ctl_node(g, "Loop", "outer_loop", (mx_value_id[]){m, MX_NO_VALUE, acc0}, 3, &a, 1, &out, 1);
  cr_assert_eq(mx_graph_add_output(g, out), MX_OK);
  mx_tensor r;
  run1(g, NULL, 0, &r, 1);
  cr_assert_eq(((float *)r.data)[0], 22.0f);
  mx_tensor_release(&r);
  mx_graph_destroy(g);
}

Test(control, scan_running_sum) {
  mx_graph *g = new_graph();
  mx_value_id init = input(g, "init", MX_FLOAT32, 1, (mx_dim[]){2});
  mx_dim t = mx_sym_named(mx_graph_symtab(g), "t");
  mx_value_id xs = input(g, "xs", MX_FLOAT32, 2, (mx_dim[]){t, 2});
  mx_graph *body = ctl_sub(g, "body");
  mx_value_id s = input(body, "s", MX_FLOAT32, 1, (mx_dim[]){2});
  mx_value_id x = input(body, "x", MX_FLOAT32, 1, (mx_dim[]){2});
  mx_value_id s1 = ctl_op(body, "Add", (mx_value_id[]){s, x}, 2);
  cr_assert_eq(mx_graph_add_output(body, s1), MX_OK);
  cr_assert_eq(mx_graph_add_output(body, ctl_op(body, "Identity", &s1, 1)), MX_OK);
  mx_attr a[] = {mx_attr_graph("body", body), mx_attr_int("num_scan_inputs", 1)};
  mx_value_id outs[2];
  ctl_node(g, "Scan", "scan", (mx_value_id[]){init, xs}, 2, a, 2, outs, 2);
  cr_assert_eq(mx_graph_add_output(g, outs[0]), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, outs[1]), MX_OK);
  cr_assert_eq(mx_graph_infer(g), MX_OK, "%s", mx_graph_last_error(g));
  mx_shape sh;
  mx_graph_value_shape(g, outs[1], &sh);
  cr_assert_eq(sh.rank, 2);
  cr_assert_eq(sh.dims[0], t, "the scan output gains the iteration count");
  float iv[2] = {0, 0}, xv[6] = {1, 2, 3, 4, 5, 6};
  mx_tensor in[2] = {{.dtype = MX_FLOAT32, .rank = 1, .dims = {2}, .data = iv},
                     {.dtype = MX_FLOAT32, .rank = 2, .dims = {3, 2}, .data = xv}};
  mx_tensor out[2];
  run1(g, in, 2, out, 2);
  cr_assert_eq(((float *)out[0].data)[0], 9.0f);
  cr_assert_eq(((float *)out[0].data)[1], 12.0f);
  cr_assert_eq(out[1].dims[0], 3);
  cr_assert_eq(((float *)out[1].data)[2], 4.0f);
  mx_tensor_release(&out[0]);
  mx_tensor_release(&out[1]);
  mx_graph_destroy(g);
}

Test(control, constant_condition_if_is_folded_away) {
  mx_graph *g = new_graph();
  uint8_t yes = 1;
  mx_tensor ct = {.dtype = MX_BOOL, .rank = 0, .data = &yes};
  mx_value_id c;
  cr_assert_eq(mx_graph_add_constant(g, "c", &ct, &c), MX_OK);
  mx_value_id x = input(g, "x", MX_FLOAT32, 1, (mx_dim[]){2});
  mx_graph *th = ctl_sub(g, "then"), *el = ctl_sub(g, "else");
  mx_value_id tx = ctl_outer(th, "x"), ex = ctl_outer(el, "x");
  cr_assert_eq(mx_graph_add_output(th, ctl_op(th, "Neg", &tx, 1)), MX_OK);
  cr_assert_eq(mx_graph_add_output(el, ctl_op(el, "Relu", &ex, 1)), MX_OK);
  mx_attr br[] = {mx_attr_graph("then_branch", th), mx_attr_graph("else_branch", el)};
  mx_value_id out;
  ctl_node(g, "If", "fixed", &c, 1, br, 2, &out, 1);
  cr_assert_eq(mx_graph_add_output(g, ctl_op(g, "Abs", &out, 1)), MX_OK);
  (void)x;
  mx_optimize_report r;
  cr_assert_eq(mx_graph_optimize(g, &r), MX_OK, "%s", mx_graph_last_error(g));
  cr_assert_eq(
      mx_graph_find_node(g, "fixed") != MX_NO_NODE && mx__node_valid(g, mx_graph_find_node(g, "fixed")),
      false, "the If is gone");
  cr_assert_eq(mx_graph_node_count(g), 2); /* Neg, Abs */
  float xv[2] = {-1, 2};
  mx_tensor in = {.dtype = MX_FLOAT32, .rank = 1, .dims = {2}, .data = xv};
  mx_tensor o;
  run1(g, &in, 1, &o, 1);
  cr_assert_eq(((float *)o.data)[0], 1.0f);
  mx_tensor_release(&o);
  mx_graph_destroy(g);
}

/* --- malformed graphs --------------------------------------------------------------------- */

static void expect_infer_error(mx_graph *g, const char *a, const char *b) {
  cr_assert_neq(mx_graph_infer(g), MX_OK);
  const char *m = mx_graph_last_error(g);
  cr_assert(strstr(m, a) && strstr(m, b), "message: %s", m);
}

Test(control, branch_reading_an_undefined_name_is_refused) {
  mx_graph *g = new_graph();
  mx_value_id c = input(g, "c", MX_BOOL, 0, NULL);
  mx_graph *th = ctl_sub(g, "then"), *el = ctl_sub(g, "else");
  mx_value_id tn = ctl_outer(th, "nowhere"), ec = ctl_outer(el, "c");
  cr_assert_eq(mx_graph_add_output(th, ctl_op(th, "Identity", &tn, 1)), MX_OK);
  cr_assert_eq(mx_graph_add_output(el, ctl_op(el, "Identity", &ec, 1)), MX_OK);
  mx_attr br[] = {mx_attr_graph("then_branch", th), mx_attr_graph("else_branch", el)};
  mx_value_id out;
  ctl_node(g, "If", "bad_if", &c, 1, br, 2, &out, 1);
  cr_assert_eq(mx_graph_add_output(g, out), MX_OK);
  expect_infer_error(g, "bad_if", "nowhere");
  mx_graph_destroy(g);
}

Test(control, body_with_wrong_input_count_is_refused) {
  mx_graph *g = new_graph();
  mx_value_id m = ctl_iconst(g, "m", 2), x0 = ctl_fconst(g, "x0", 1.0f);
  mx_graph *body = ctl_sub(g, "body");
  input(body, "iter", MX_INT64, 0, NULL);
  mx_value_id ci = input(body, "cond_in", MX_BOOL, 0, NULL);
  cr_assert_eq(mx_graph_add_output(body, ctl_op(body, "Identity", &ci, 1)), MX_OK);
  mx_attr a = mx_attr_graph("body", body);
  mx_value_id out;
  ctl_node(g, "Loop", "bad_loop", (mx_value_id[]){m, MX_NO_VALUE, x0}, 3, &a, 1, &out, 1);
  cr_assert_eq(mx_graph_add_output(g, out), MX_OK);
  expect_infer_error(g, "bad_loop", "inputs");
  mx_graph_destroy(g);
}

Test(control, body_with_wrong_output_count_is_refused) {
  mx_graph *g = new_graph();
  mx_value_id c = input(g, "c", MX_BOOL, 0, NULL);
  mx_graph *th = ctl_sub(g, "then"), *el = ctl_sub(g, "else");
  mx_value_id tc = ctl_outer(th, "c"), ec = ctl_outer(el, "c");
  cr_assert_eq(mx_graph_add_output(th, ctl_op(th, "Identity", &tc, 1)), MX_OK);
  cr_assert_eq(mx_graph_add_output(th, ctl_op(th, "Not", &tc, 1)), MX_OK);
  cr_assert_eq(mx_graph_add_output(el, ctl_op(el, "Identity", &ec, 1)), MX_OK);
  mx_attr br[] = {mx_attr_graph("then_branch", th), mx_attr_graph("else_branch", el)};
  mx_value_id out;
  ctl_node(g, "If", "uneven", &c, 1, br, 2, &out, 1);
  cr_assert_eq(mx_graph_add_output(g, out), MX_OK);
  expect_infer_error(g, "uneven", "outputs");
  mx_graph_destroy(g);
}

Test(control, scan_axis_out_of_range_is_refused) {
  mx_graph *g = new_graph();
  mx_value_id xs = input(g, "xs", MX_FLOAT32, 2, (mx_dim[]){3, 2});
  mx_graph *body = ctl_sub(g, "body");
  mx_value_id x = input(body, "x", MX_FLOAT32, 1, (mx_dim[]){2});
  cr_assert_eq(mx_graph_add_output(body, ctl_op(body, "Relu", &x, 1)), MX_OK);
  int64_t axes[1] = {5};
  mx_attr a[] = {mx_attr_graph("body", body), mx_attr_int("num_scan_inputs", 1),
                 mx_attr_ints("scan_input_axes", axes, 1)};
  mx_value_id out;
  ctl_node(g, "Scan", "bad_scan", &xs, 1, a, 3, &out, 1);
  cr_assert_eq(mx_graph_add_output(g, out), MX_OK);
  expect_infer_error(g, "bad_scan", "out of range");
  mx_graph_destroy(g);
}

Test(control, endless_loop_stops_at_the_iteration_limit) {
  mx_graph *g = new_graph();
  mx_value_id x0 = ctl_fconst(g, "x0", 1.0f);
  uint8_t yes = 1;
  mx_tensor ct = {.dtype = MX_BOOL, .rank = 0, .data = &yes};
  mx_value_id c;
  cr_assert_eq(mx_graph_add_constant(g, "go", &ct, &c), MX_OK);
  mx_graph *body = ctl_sub(g, "body");
  input(body, "iter", MX_INT64, 0, NULL);
  mx_value_id ci = input(body, "cond_in", MX_BOOL, 0, NULL);
  mx_value_id x = input(body, "x", MX_FLOAT32, 1, (mx_dim[]){1});
  cr_assert_eq(mx_graph_add_output(body, ctl_op(body, "Identity", &ci, 1)), MX_OK);
  cr_assert_eq(mx_graph_add_output(body, ctl_op(body, "Identity", &x, 1)), MX_OK);
  mx_attr a = mx_attr_graph("body", body);
  mx_value_id out;
  ctl_node(g, "Loop", "forever", (mx_value_id[]){MX_NO_VALUE, c, x0}, 3, &a, 1, &out, 1);
  cr_assert_eq(mx_graph_add_output(g, out), MX_OK);
  int64_t prev = mx_reference_loop_limit(50);
  mx_tensor r;
  mx_error err = {0};
  cr_assert_eq(mx_reference_run(g, NULL, 0, &r, 1, &err), MX_ERR_LIMIT);
  cr_assert(strstr(err.message, "forever") && strstr(err.message, "50"), "%s", err.message);
  mx_reference_loop_limit(prev);
  mx_graph_destroy(g);
}

/* --- sequences ----------------------------------------------------------------------------- */

Test(control, sequence_ops_round_trip) {
  mx_graph *g = new_graph();
  mx_value_id x = input(g, "x", MX_FLOAT32, 2, (mx_dim[]){4, 2});
  mx_value_id seq;
  ctl_node(g, "SplitToSequence", "split", &x, 1, NULL, 0, &seq, 1);
  mx_value_id n = ctl_op(g, "SequenceLength", &seq, 1);
  mx_attr ax[] = {mx_attr_int("axis", 0)};
  mx_value_id back;
  ctl_node(g, "ConcatFromSequence", "cat", &seq, 1, ax, 1, &back, 1);
  cr_assert_eq(mx_graph_add_output(g, n), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, back), MX_OK);
  cr_assert_eq(mx_graph_infer(g), MX_OK, "%s", mx_graph_last_error(g));
  cr_assert_eq(mx_graph_value_kind(g, seq), MX_KIND_SEQUENCE);
  float xv[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  mx_tensor in = {.dtype = MX_FLOAT32, .rank = 2, .dims = {4, 2}, .data = xv};
  mx_tensor out[2];
  run1(g, &in, 1, out, 2);
  cr_assert_eq(*(int64_t *)out[0].data, 4);
  cr_assert_eq(out[1].dims[0], 4);
  cr_assert_eq(memcmp(out[1].data, xv, sizeof xv), 0);
  mx_tensor_release(&out[0]);
  mx_tensor_release(&out[1]);
  mx_graph_destroy(g);
}

/* --- sessions ------------------------------------------------------------------------------ */

static void session_matches_reference(mx_graph *(*make)(void), const mx_tensor *in, size_t n_in,
                                      size_t n_out) {
  mx_session_options o;
  mx_session_options_init(&o);
  mx_session *s;
  mx_error err = {0};
  cr_assert_eq(mx_session_create(&o, &s, &err), MX_OK, "%s", err.message);
  cr_assert_eq(mx_session_load_graph(s, make()), MX_OK, "%s", mx_session_last_error(s));
  mx_tensor got[4], want[4];
  memset(got, 0, sizeof got); /* no buffers: the session allocates the outputs */
  cr_assert_eq(mx_session_run(s, in, n_in, got, n_out), MX_OK, "%s", mx_session_last_error(s));
  mx_graph *g = make();
  run1(g, in, n_in, want, n_out);
  for (size_t k = 0; k < n_out; k++) {
    char why[200];
    cr_assert(mx_tensor_allclose(&got[k], &want[k], 0, 0, why, sizeof why), "output %zu: %s", k, why);
    mx_tensor_release(&got[k]);
    mx_tensor_release(&want[k]);
  }
  mx_graph_destroy(g);
  mx_session_destroy(s);
}

Test(control, if_runs_in_a_session) {
  float xv[3] = {1, 2, 3};
  for (int cond = 0; cond < 2; cond++) {
    uint8_t cv = (uint8_t)cond;
    mx_tensor in[2] = {{.dtype = MX_BOOL, .rank = 0, .data = &cv},
                       {.dtype = MX_FLOAT32, .rank = 1, .dims = {3}, .data = xv}};
    session_matches_reference(if_different_shapes, in, 2, 1);
  }
}

Test(control, loop_runs_in_a_session) {
  int64_t limit = 7;
  mx_tensor in = {.dtype = MX_INT64, .rank = 0, .data = &limit};
  session_matches_reference(data_dependent_loop, &in, 1, 2);
}

/* --- ONNX round trip ----------------------------------------------------------------------- */

#ifndef MIXRT_ONNX_NODE_DIR_DEFAULT
#define MIXRT_ONNX_NODE_DIR_DEFAULT "tests/data/onnx-node"
#endif

/* A model with a Loop over a sequence, exported and imported again, gives the same result. */
Test(control, loop_over_a_sequence_survives_export) {
  char path[1024], in_path[1024], out_path[1024];
  snprintf(path, sizeof path, "%s/test_loop13_seq/model.onnx", MIXRT_ONNX_NODE_DIR_DEFAULT);
  mx_graph *g;
  mx_error err = {0};
  if (mx_onnx_load_file(path, &g, &err) != MX_OK)
    cr_skip_test("ONNX node-test data not found: %s", err.message);
  void *data;
  size_t size;
  cr_assert_eq(mx_graph_infer(g), MX_OK, "%s", mx_graph_last_error(g));
  cr_assert_eq(mx_onnx_save_memory(g, &data, &size, &err), MX_OK, "%s", err.message);
  mx_graph *g2;
  cr_assert_eq(mx_onnx_load_memory(data, size, NULL, &g2, &err), MX_OK, "%s", err.message);
  free(data);
  cr_assert_eq(mx_graph_value_kind(g2, mx_graph_input(g2, 2)), MX_KIND_SEQUENCE);
  mx_tensor in[3], out, want;
  memset(in, 0, sizeof in);
  for (int i = 0; i < 3; i++) {
    snprintf(in_path, sizeof in_path, "%s/test_loop13_seq/test_data_set_0/input_%d.pb",
             MIXRT_ONNX_NODE_DIR_DEFAULT, i);
    cr_assert_eq(
        mx_value_load_pb(in_path, mx_graph_value_kind(g2, mx_graph_input(g2, (size_t)i)), &in[i], &err),
        MX_OK, "%s", err.message);
  }
  snprintf(out_path, sizeof out_path, "%s/test_loop13_seq/test_data_set_0/output_0.pb",
           MIXRT_ONNX_NODE_DIR_DEFAULT);
  cr_assert_eq(mx_value_load_pb(out_path, MX_KIND_SEQUENCE, &want, &err), MX_OK, "%s", err.message);
  run1(g2, in, 3, &out, 1);
  char why[200];
  cr_assert(mx_tensor_allclose(&out, &want, 1e-6, 0, why, sizeof why), "%s", why);
  mx_tensor_release(&out);
  mx_tensor_release(&want);
  for (int i = 0; i < 3; i++) mx_tensor_release(&in[i]);
  mx_graph_destroy(g2);
  mx_graph_destroy(g);
}
