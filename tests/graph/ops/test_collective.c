/* Inference tests of the collective op definitions (graph/ops/collective.c, domain "mixrt"):
 * AllReduce and Broadcast keep x, AllGather multiplies its axis by world_size and ReduceScatter
 * divides it (a symbolic dim becomes an expression), Recv takes its dtype and shape from its
 * attributes, and the refusals of bad attributes and shapes name the node. */
#include <criterion/criterion.h>
#include <string.h>

#include "graph/ops/ops_support.h"
#include "mixrt/graph.h"

static void setup(void) {
  mxt_ops_setup("collective");
  cr_assert_eq(mx_graph_set_opset(G, "mixrt", 1), MX_OK);
}

TestSuite(collective_infer, .init = setup, .fini = mxt_ops_teardown);

/* A collective node called `name` in domain "mixrt" with n_in inputs and one output (none for
 * Send); returns the output. */
static mx_value_id coll(const char *type, const char *name, const mx_value_id *in, size_t n_in, const mx_attr *attrs,
                        size_t na) {
  mx_value_id y = MX_NO_VALUE;
  size_t n_out = strcmp(type, "Send") == 0 ? 0 : 1;
  mx_node_desc d = {.op_type = type, .domain = "mixrt", .name = name, .inputs = in, .n_inputs = n_in,
                    .attrs = attrs, .n_attrs = na, .n_outputs = n_out};
  cr_assert_eq(mx_graph_add_node(G, &d, n_out ? &y : NULL), MX_OK, "%s", mx_graph_last_error(G));
  return y;
}

Test(collective_infer, allreduce_and_broadcast_keep_x) {
  mx_value_id x = input("x", MX_BFLOAT16, SHAPE(S("b"), S("s"), 64));
  mx_attr a[] = {mx_attr_int("world_size", 4), mx_attr_string("reduce", "max")};
  mx_value_id y = coll("AllReduce", "ar", &x, 1, a, 2);
  mx_attr b[] = {mx_attr_int("world_size", 4), mx_attr_int("root", 3)};
  mx_value_id z = coll("Broadcast", "bc", &y, 1, b, 2);
  infer_ok();
  expect_shape_str(y, MX_BFLOAT16, "[b, s, 64]");
  expect_shape_str(z, MX_BFLOAT16, "[b, s, 64]");
}

Test(collective_infer, allgather_multiplies_the_axis) {
  mx_value_id x = input("x", MX_FLOAT16, SHAPE(S("b"), 1, 32));
  mx_attr a[] = {mx_attr_int("world_size", 2), mx_attr_int("axis", -1)};
  mx_value_id y = coll("AllGather", "ag", &x, 1, a, 2);
  mx_attr a0[] = {mx_attr_int("world_size", 2)};
  mx_value_id z = coll("AllGather", "ag0", &x, 1, a0, 1);
  infer_ok();
  expect_shape_str(y, MX_FLOAT16, "[b, 1, 64]");
  mx_shape zs = shape_of(z);
  cr_assert_eq(zs.rank, 3);
  cr_assert(is_expr(zs.dims[0]), "2 * b stays symbolic");
  cr_assert_eq(zs.dims[1], 1);
}

Test(collective_infer, reducescatter_divides_the_axis) {
  mx_value_id x = input("x", MX_INT64, SHAPE(S("n"), 8));
  mx_attr a[] = {mx_attr_int("world_size", 4), mx_attr_int("axis", 1)};
  mx_value_id y = coll("ReduceScatter", "rs", &x, 1, a, 2);
  mx_attr a0[] = {mx_attr_int("world_size", 4)};
  mx_value_id z = coll("ReduceScatter", "rs0", &x, 1, a0, 1);
  infer_ok();
  expect_shape_str(y, MX_INT64, "[n, 2]");
  mx_shape zs = shape_of(z);
  cr_assert(is_expr(zs.dims[0]), "floordiv(n, 4) stays symbolic");
  cr_assert_eq(zs.dims[1], 8);
}

Test(collective_infer, send_and_recv) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2, 3));
  mx_attr s[] = {mx_attr_int("world_size", 2), mx_attr_int("peer", 1), mx_attr_int("tag", 5)};
  coll("Send", "send", &x, 1, s, 3);
  int64_t dims[] = {4, 5};
  mx_attr r[] = {mx_attr_int("world_size", 2), mx_attr_int("peer", 1), mx_attr_int("dtype", MX_FLOAT16),
                 mx_attr_ints("shape", dims, 2)};
  mx_value_id y = coll("Recv", "recv", NULL, 0, r, 4);
  cr_assert_eq(mx_graph_add_output(G, y), MX_OK);
  infer_ok();
  expect_shape_str(y, MX_FLOAT16, "[4, 5]");
}

Test(collective_infer, refuses_indivisible_scatter) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(6, 4));
  mx_attr a[] = {mx_attr_int("world_size", 4)};
  coll("ReduceScatter", "rs_bad", &x, 1, a, 1);
  infer_fails(MX_ERR_SHAPE, "rs_bad");
}

Test(collective_infer, refuses_out_of_range_axis) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(6, 4));
  mx_attr a[] = {mx_attr_int("world_size", 2), mx_attr_int("axis", 2)};
  coll("AllGather", "ag_bad", &x, 1, a, 2);
  infer_fails(MX_ERR_INVALID_GRAPH, "axis");
}

Test(collective_infer, refuses_bad_attributes) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2));
  mx_attr bad_mode[] = {mx_attr_int("world_size", 2), mx_attr_string("reduce", "mean")};
  coll("AllReduce", "ar_mode", &x, 1, bad_mode, 2);
  infer_fails(MX_ERR_INVALID_GRAPH, "reduce");
}

Test(collective_infer, refuses_world_size_zero) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2));
  mx_attr a[] = {mx_attr_int("world_size", 0)};
  coll("AllReduce", "ar_zero", &x, 1, a, 1);
  infer_fails(MX_ERR_INVALID_GRAPH, "world_size");
}

Test(collective_infer, refuses_root_outside_the_world) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2));
  mx_attr a[] = {mx_attr_int("world_size", 2), mx_attr_int("root", 2)};
  coll("Broadcast", "bc_root", &x, 1, a, 2);
  infer_fails(MX_ERR_INVALID_GRAPH, "root");
}

Test(collective_infer, refuses_strings_and_unreducible_types) {
  mx_value_id x = input("x", MX_UINT8, SHAPE(2));
  mx_attr a[] = {mx_attr_int("world_size", 2)};
  coll("AllReduce", "ar_u8", &x, 1, a, 1);
  infer_fails(MX_ERR_DTYPE, "ar_u8");
}
