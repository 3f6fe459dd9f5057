/* Inference tests of the reduce op definitions (graph/ops/reduce.c): axes as attribute or input
 * depending on the opset, keepdims, noop_with_empty_axes, negative axes, unknown axes values,
 * error cases, symbolic values of ReduceProd/ReduceSum over shapes, ArgMax/ArgMin and CumSum. */
#include <criterion/criterion.h>
#include <string.h>

#include "graph/ir.h"
#include "graph/ops/op.h"
#include "graph/ops/ops_support.h"
#include "graph/passes/passes.h"
#include "mixrt/graph.h"

static void setup(void) { mxt_ops_setup("red"); }

TestSuite(reduce_infer, .init = setup, .fini = mxt_ops_teardown);

static mx_value_id axes_const(const char *name, int32_t n, const int64_t *axes) {
  return const_i64(name, 1, (int64_t[]){n}, axes);
}

Test(reduce_infer, sum_axes_input_from_opset_13) {
  cr_assert_eq(mx_graph_set_opset(G, "", 13), MX_OK);
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("b"), S("s"), 768));
  mx_value_id ax = axes_const("ax", 1, (int64_t[]){1});
  mx_attr kd = mx_attr_int("keepdims", 0);
  mx_value_id y = op("ReduceSum", (mx_value_id[]){x, ax}, 2, &kd, 1);
  mx_value_id z = op("ReduceSum", (mx_value_id[]){x, ax}, 2, NULL, 0);
  infer_ok();
  expect_shape(y, MX_FLOAT32, SHAPE(S("b"), 768));
  expect_shape(z, MX_FLOAT32, SHAPE(S("b"), 1, 768));
}

Test(reduce_infer, mean_axes_attribute_before_opset_18) {
  cr_assert_eq(mx_graph_set_opset(G, "", 17), MX_OK);
  mx_value_id x = input("x", MX_FLOAT16, SHAPE(S("b"), S("s"), 768));
  int64_t axes[] = {-1, 0};
  mx_attr at = mx_attr_ints("axes", axes, 2);
  mx_value_id y = op("ReduceMean", &x, 1, &at, 1);
  infer_ok();
  expect_shape(y, MX_FLOAT16, SHAPE(1, S("s"), 1));
}

Test(reduce_infer, axes_input_in_attribute_opset_is_an_error) {
  cr_assert_eq(mx_graph_set_opset(G, "", 11), MX_OK);
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2, 3));
  mx_value_id ax = axes_const("ax", 1, (int64_t[]){1});
  op("ReduceSum", (mx_value_id[]){x, ax}, 2, NULL, 0);
  infer_fails(MX_ERR_INVALID_GRAPH, "attribute");
}

Test(reduce_infer, no_axes_reduce_everything) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("b"), 3, 4));
  mx_attr kd = mx_attr_int("keepdims", 0);
  mx_value_id a = op("ReduceMax", &x, 1, NULL, 0);
  mx_value_id b = op("ReduceL2", &x, 1, &kd, 1);
  infer_ok();
  expect_shape(a, MX_FLOAT32, SHAPE(1, 1, 1));
  expect_shape(b, MX_FLOAT32, SCALAR);
}

Test(reduce_infer, unknown_rank_input) {
  mx_value_id x;
  cr_assert_eq(mx_graph_add_input(G, "x", MX_FLOAT32, NULL, &x), MX_OK);
  mx_attr kd = mx_attr_int("keepdims", 0);
  mx_value_id all = op("ReduceSum", &x, 1, &kd, 1);
  mx_value_id keep = op("ReduceSum", &x, 1, NULL, 0);
  infer_ok();
  expect_shape(all, MX_FLOAT32, SCALAR);
  mx_shape s;
  mx_graph_value_shape(G, keep, &s);
  cr_assert_eq(s.rank, MX_RANK_UNKNOWN);
}

Test(reduce_infer, noop_with_empty_axes_copies_the_shape) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("b"), 3));
  mx_value_id empty = axes_const("e", 0, NULL);
  mx_attr noop = mx_attr_int("noop_with_empty_axes", 1);
  mx_value_id a = op("ReduceSumSquare", (mx_value_id[]){x, empty}, 2, &noop, 1);
  mx_value_id b = op("ReduceLogSumExp", &x, 1, &noop, 1);
  mx_value_id c = op("ReduceMin", (mx_value_id[]){x, empty}, 2, NULL, 0);
  mx_value_id none = input("none", MX_INT64, SHAPE(0));
  mx_value_id d = op("ReduceMax", (mx_value_id[]){x, none}, 2, &noop, 1);
  infer_ok();
  expect_shape(d, MX_FLOAT32, SHAPE(S("b"), 3));
  expect_shape(a, MX_FLOAT32, SHAPE(S("b"), 3));
  expect_shape(b, MX_FLOAT32, SHAPE(S("b"), 3));
  expect_shape(c, MX_FLOAT32, SHAPE(1, 1));
}

Test(reduce_infer, unknown_axes_keep_rank_or_count) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("b"), 1, 4));
  mx_value_id ax = input("ax", MX_INT64, SHAPE(2));
  mx_value_id any = input("any", MX_INT64, SHAPE(S("k")));
  mx_attr kd = mx_attr_int("keepdims", 0);
  mx_value_id keep = op("ReduceProd", (mx_value_id[]){x, ax}, 2, NULL, 0);
  mx_value_id drop = op("ReduceL1", (mx_value_id[]){x, ax}, 2, &kd, 1);
  mx_value_id unk = op("ReduceL1", (mx_value_id[]){x, any}, 2, &kd, 1);
  infer_ok();
  expect_shape(keep, MX_FLOAT32, SHAPE(MX_DIM_UNKNOWN, 1, MX_DIM_UNKNOWN));
  expect_shape(drop, MX_FLOAT32, SHAPE(MX_DIM_UNKNOWN));
  mx_shape s;
  mx_graph_value_shape(G, unk, &s);
  cr_assert_eq(s.rank, MX_RANK_UNKNOWN);
}

Test(reduce_infer, axis_errors) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2, 3));
  mx_value_id ax = axes_const("ax", 1, (int64_t[]){2});
  op("ReduceMean", (mx_value_id[]){x, ax}, 2, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "out of range");
}

Test(reduce_infer, duplicate_axes_fail) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2, 3));
  mx_value_id ax = axes_const("ax", 2, (int64_t[]){1, -1});
  op("ReduceSum", (mx_value_id[]){x, ax}, 2, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "twice");
}

Test(reduce_infer, axes_must_be_int64) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2, 3));
  mx_value_id ax = input("ax", MX_INT32, SHAPE(1));
  op("ReduceSum", (mx_value_id[]){x, ax}, 2, NULL, 0);
  infer_fails(MX_ERR_DTYPE, "input 1");
}

Test(reduce_infer, reduce_prod_of_a_shape_counts_elements) {
  mx_value_id x = input("x", MX_INT64, SHAPE(3));
  static mx_dim sv[3];
  sv[0] = S("b");
  sv[1] = S("s");
  sv[2] = C(64);
  G->values[x].sv = sv;
  G->values[x].sv_len = 3;
  mx_attr kd = mx_attr_int("keepdims", 0);
  mx_value_id p = op("ReduceProd", &x, 1, &kd, 1);
  mx_value_id s = op("ReduceSum", &x, 1, NULL, 0);
  mx_value_id m = op("ReduceMax", &x, 1, &kd, 1);
  infer_ok();
  expect_shape(p, MX_INT64, SCALAR);
  expect_shape(s, MX_INT64, SHAPE(1));
  cr_assert_eq(G->values[p].sv_len, 1);
  cr_assert_eq(G->values[p].sv[0], mx_sym_mul(T, mx_sym_mul(T, S("b"), S("s")), C(64)));
  cr_assert_eq(G->values[s].sv_len, 1);
  cr_assert_eq(G->values[s].sv[0], mx_sym_add(T, mx_sym_add(T, S("b"), S("s")), C(64)));
  cr_assert_eq(G->values[m].sv_len, 1);
  cr_assert_eq(G->values[m].sv[0], mx_sym_max(T, mx_sym_max(T, S("b"), S("s")), C(64)));
}

Test(reduce_infer, reduce_sum_of_2d_values_along_one_axis) {
  int64_t data[] = {1, 2, 3, 4, 5, 6};
  mx_tensor t = {.dtype = MX_INT64, .rank = 2, .dims = {2, 3}, .data = data};
  mx_value_id x;
  cr_assert_eq(mx_graph_add_constant(G, "x", &t, &x), MX_OK);
  mx_value_id ax = axes_const("ax", 1, (int64_t[]){0});
  mx_attr kd = mx_attr_int("keepdims", 0);
  mx_value_id s = op("ReduceSum", (mx_value_id[]){x, ax}, 2, &kd, 1);
  infer_ok();
  expect_shape(s, MX_INT64, SHAPE(3));
  cr_assert_eq(G->values[s].sv_len, 3);
  cr_assert_eq(G->values[s].sv[0], C(5));
  cr_assert_eq(G->values[s].sv[1], C(7));
  cr_assert_eq(G->values[s].sv[2], C(9));
}

Test(reduce_infer, argmax_argmin) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("b"), 5, 7));
  mx_attr a1[] = {mx_attr_int("axis", -1), mx_attr_int("keepdims", 0), mx_attr_int("select_last_index", 1)};
  mx_attr a2 = mx_attr_int("axis", 1);
  mx_value_id am = op("ArgMax", &x, 1, a1, 3);
  mx_value_id an = op("ArgMin", &x, 1, &a2, 1);
  mx_value_id d = op("ArgMax", &x, 1, NULL, 0);
  infer_ok();
  expect_shape(am, MX_INT64, SHAPE(S("b"), 5));
  expect_shape(an, MX_INT64, SHAPE(S("b"), 1, 7));
  expect_shape(d, MX_INT64, SHAPE(1, 5, 7));
}

Test(reduce_infer, argmax_axis_out_of_range) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2, 3));
  mx_attr a = mx_attr_int("axis", 2);
  op("ArgMax", &x, 1, &a, 1);
  infer_fails(MX_ERR_SHAPE, NULL);
}

Test(reduce_infer, argmax_of_empty_axis_fails) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2, 0));
  mx_attr a = mx_attr_int("axis", 1);
  op("ArgMin", &x, 1, &a, 1);
  infer_fails(MX_ERR_SHAPE, "size 0");
}

Test(reduce_infer, cumsum_keeps_shape) {
  mx_value_id x = input("x", MX_FLOAT64, SHAPE(S("n"), 3));
  mx_value_id ax = input("ax", MX_INT32, SCALAR);
  mx_attr at[] = {mx_attr_int("exclusive", 1), mx_attr_int("reverse", 1)};
  mx_value_id y = op("CumSum", (mx_value_id[]){x, ax}, 2, at, 2);
  infer_ok();
  expect_shape(y, MX_FLOAT64, SHAPE(S("n"), 3));
}

Test(reduce_infer, cumsum_axis_checks) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2, 3));
  mx_value_id ax = axes_const("ax", 1, (int64_t[]){2});
  op("CumSum", (mx_value_id[]){x, ax}, 2, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "out of range");
}

Test(reduce_infer, cumsum_axis_dtype) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2, 3));
  mx_value_id ax = input("ax", MX_FLOAT32, SCALAR);
  op("CumSum", (mx_value_id[]){x, ax}, 2, NULL, 0);
  infer_fails(MX_ERR_DTYPE, "input 1");
}

Test(reduce_infer, runtime_axes_values_give_concrete_shapes) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("b"), 5, 7));
  mx_value_id ax = input("ax", MX_INT64, SHAPE(1));
  mx_attr kd = mx_attr_int("keepdims", 0);
  mx_value_id y = op("ReduceMean", (mx_value_id[]){x, ax}, 2, &kd, 1);
  infer_ok();
  expect_shape(y, MX_FLOAT32, SHAPE(MX_DIM_UNKNOWN, MX_DIM_UNKNOWN));
  /* At run time the executor passes concrete shapes and the axes' values. */
  mx_symtab *scratch;
  cr_assert_eq(mx_symtab_create(&scratch), MX_OK);
  mx_dim axes_sv[1] = {mx_sym_const(scratch, -2)};
  mx_value_info in[2];
  memset(in, 0, sizeof in);
  in[0] = (mx_value_info){.present = true, .dtype = MX_FLOAT32, .shape = {3, {4, 5, 7}}, .sv_len = -1};
  in[1] = (mx_value_info){.present = true, .dtype = MX_INT64, .shape = {1, {1}}, .sv = axes_sv, .sv_len = 1};
  mx_value_info out[1];
  mx_dim out_sv[MX_SV_MAX];
  mx_error err = {0};
  mx_node_id n = G->values[y].producer;
  cr_assert_eq(mx__node_infer(G, n, scratch, in, out, out_sv, true, &err), MX_OK, "%s", err.message);
  cr_assert_eq(out[0].shape.rank, 2);
  cr_assert_eq(out[0].shape.dims[0], 4);
  cr_assert_eq(out[0].shape.dims[1], 7);
  mx_symtab_destroy(scratch);
}
