/* Inference tests of the shape group (graph/ops/shape*.c): Shape, Size, Reshape, Flatten,
 * Squeeze, Unsqueeze, Transpose, Concat, Split, Expand, Tile, Identity, Dropout, Constant,
 * ConstantOfShape and Range. Each checks output dtypes and shapes with concrete, symbolic and
 * unknown dims, the symbolic values (sv) that shape arithmetic carries, versioned attribute vs
 * input forms, and error cases. Graphs are built with the public builder API; symbolic values
 * of graph inputs are set through the IR. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "graph/ir.h"
#include "graph/ops/op.h"
#include "graph/ops/ops_support.h"
#include "graph/passes/passes.h"
#include "mixrt/graph.h"

static void setup(void) { mxt_ops_setup("shape"); }

TestSuite(shape_infer, .init = setup, .fini = mxt_ops_teardown);

/* --- Shape, Size ------------------------------------------------------------------------------ */

Test(shape_infer, shape_value_is_the_symbolic_dims) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("batch"), S("seq"), 768));
  mx_value_id s = op("Shape", &x, 1, NULL, 0);
  infer_ok();
  expect_shape(s, MX_INT64, SHAPE(3));
  EXPECT_SV(s, S("batch"), S("seq"), 768);
}

Test(shape_infer, shape_start_end_follow_the_clamping_rules) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2, S("seq"), 4, 5));
  mx_attr a1[] = {mx_attr_int("start", 1), mx_attr_int("end", -1)};
  mx_attr a2[] = {mx_attr_int("start", -10)};
  mx_attr a3[] = {mx_attr_int("start", 3), mx_attr_int("end", 1)};
  mx_attr a4[] = {mx_attr_int("end", 100)};
  mx_value_id s1 = op("Shape", &x, 1, a1, 2);
  mx_value_id s2 = op("Shape", &x, 1, a2, 1);
  mx_value_id s3 = op("Shape", &x, 1, a3, 2);
  mx_value_id s4 = op("Shape", &x, 1, a4, 1);
  infer_ok();
  expect_shape(s1, MX_INT64, SHAPE(2));
  EXPECT_SV(s1, S("seq"), 4);
  expect_shape(s2, MX_INT64, SHAPE(4));
  EXPECT_SV(s2, 2, S("seq"), 4, 5);
  expect_shape(s3, MX_INT64, SHAPE(0));
  expect_sv(s3, 0, NULL);
  expect_shape(s4, MX_INT64, SHAPE(4));
}

Test(shape_infer, shape_of_unknown_rank_is_1d_of_unknown_length) {
  mx_value_id x = input_unknown_rank("x", MX_FLOAT32);
  mx_value_id s = op("Shape", &x, 1, NULL, 0);
  infer_ok();
  expect_shape(s, MX_INT64, SHAPE(MX_DIM_UNKNOWN));
  expect_no_sv(s);
}

Test(shape_infer, shape_keeps_unknown_dims_as_unknown_elements) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(MX_DIM_UNKNOWN, 8));
  mx_value_id s = op("Shape", &x, 1, NULL, 0);
  infer_ok();
  EXPECT_SV(s, MX_DIM_UNKNOWN, 8);
}

Test(shape_infer, size_is_the_symbolic_element_count) {
  mx_value_id x = input("x", MX_FLOAT16, SHAPE(S("batch"), S("seq"), 4));
  mx_value_id n = op("Size", &x, 1, NULL, 0);
  infer_ok();
  expect_shape(n, MX_INT64, SCALAR);
  EXPECT_SV(n, mx_sym_mul(T, mx_sym_mul(T, S("batch"), S("seq")), 4));
}

/* --- Reshape ---------------------------------------------------------------------------------- */

Test(shape_infer, reshape_infers_minus_one_by_exact_symbolic_division) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("batch"), S("seq"), 768));
  static mx_dim t1[4], t2[4], t3[2];
  t1[0] = 0, t1[1] = 0, t1[2] = 12, t1[3] = C(-1);
  t2[0] = S("batch"), t2[1] = S("seq"), t2[2] = 12, t2[3] = 64;
  t3[0] = C(-1), t3[1] = 768;
  mx_value_id y1 = op("Reshape", (mx_value_id[]){x, input_sv("t1", MX_INT64, 4, t1)}, 2, NULL, 0);
  mx_value_id y2 = op("Reshape", (mx_value_id[]){x, input_sv("t2", MX_INT64, 4, t2)}, 2, NULL, 0);
  mx_value_id y3 = op("Reshape", (mx_value_id[]){x, input_sv("t3", MX_INT64, 2, t3)}, 2, NULL, 0);
  infer_ok();
  expect_shape(y1, MX_FLOAT32, SHAPE(S("batch"), S("seq"), 12, 64));
  expect_shape(y2, MX_FLOAT32, SHAPE(S("batch"), S("seq"), 12, 64));
  expect_shape(y3, MX_FLOAT32, SHAPE(mx_sym_mul(T, S("batch"), S("seq")), 768));
}

Test(shape_infer, reshape_minus_one_with_symbolic_target_dims) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("batch"), S("seq"), 12, 64));
  static mx_dim t[3];
  t[0] = S("batch"), t[1] = C(-1), t[2] = 768;
  mx_value_id y = op("Reshape", (mx_value_id[]){x, input_sv("t", MX_INT64, 3, t)}, 2, NULL, 0);
  infer_ok();
  expect_shape(y, MX_FLOAT32, SHAPE(S("batch"), S("seq"), 768));
}

Test(shape_infer, reshape_concrete_and_allowzero) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2, 3, 4));
  mx_value_id z = input("z", MX_FLOAT32, SHAPE(0, 3));
  mx_value_id y1 = op("Reshape", (mx_value_id[]){x, CONST_1D("a", 4, -1)}, 2, NULL, 0);
  mx_value_id y2 = op("Reshape", (mx_value_id[]){x, CONST_1D("b", 0, -1, 2)}, 2, NULL, 0);
  mx_attr az = mx_attr_int("allowzero", 1);
  mx_value_id y3 = op("Reshape", (mx_value_id[]){z, CONST_1D("c", 3, 0)}, 2, &az, 1);
  mx_value_id y4 = op("Reshape", (mx_value_id[]){x, CONST_1D("d", 24)}, 2, NULL, 0);
  infer_ok();
  expect_shape(y1, MX_FLOAT32, SHAPE(4, 6));
  expect_shape(y2, MX_FLOAT32, SHAPE(2, 6, 2));
  expect_shape(y3, MX_FLOAT32, SHAPE(3, 0));
  expect_shape(y4, MX_FLOAT32, SHAPE(24));
}

Test(shape_infer, reshape_passes_the_value_of_a_shape_tensor) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("b"), 5));
  mx_value_id s = op("Shape", &x, 1, NULL, 0);
  mx_value_id r = op("Reshape", (mx_value_id[]){s, CONST_1D("t", 2, 1)}, 2, NULL, 0);
  infer_ok();
  expect_shape(r, MX_INT64, SHAPE(2, 1));
  EXPECT_SV(r, S("b"), 5);
}

Test(shape_infer, reshape_with_unknown_target_values_keeps_the_rank) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("b"), 6));
  mx_value_id t = input("t", MX_INT64, SHAPE(3));
  mx_value_id y = op("Reshape", (mx_value_id[]){x, t}, 2, NULL, 0);
  mx_value_id u = input("u", MX_INT64, SHAPE(MX_DIM_UNKNOWN));
  mx_value_id y2 = op("Reshape", (mx_value_id[]){x, u}, 2, NULL, 0);
  infer_ok();
  mx_shape s = shape_of(y);
  cr_assert_eq(s.rank, 3);
  for (int i = 0; i < 3; i++) cr_assert(is_expr(s.dims[i]), "dim %d should be a run-time symbol", i);
  cr_assert_eq(shape_of(y2).rank, MX_RANK_UNKNOWN);
}

Test(shape_infer, reshape_rejects_indivisible_targets) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2, 3));
  op("Reshape", (mx_value_id[]){x, CONST_1D("t", 4, -1)}, 2, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "6");
}

Test(shape_infer, reshape_rejects_two_minus_ones) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2, 3));
  op("Reshape", (mx_value_id[]){x, CONST_1D("t", -1, -1)}, 2, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "-1");
}

Test(shape_infer, reshape_rejects_wrong_element_count) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2, 3));
  op("Reshape", (mx_value_id[]){x, CONST_1D("t", 7)}, 2, NULL, 0);
  infer_fails(MX_ERR_SHAPE, NULL);
}

Test(shape_infer, reshape_shape_must_be_int64) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2, 3));
  mx_value_id t = input("t", MX_INT32, SHAPE(2));
  op("Reshape", (mx_value_id[]){x, t}, 2, NULL, 0);
  infer_fails(MX_ERR_DTYPE, "input 1");
}

/* --- Flatten ---------------------------------------------------------------------------------- */

Test(shape_infer, flatten_multiplies_symbolic_dims) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("batch"), S("seq"), 768));
  mx_attr a2 = mx_attr_int("axis", 2), am1 = mx_attr_int("axis", -1), a0 = mx_attr_int("axis", 0);
  mx_value_id f2 = op("Flatten", &x, 1, &a2, 1);
  mx_value_id fm1 = op("Flatten", &x, 1, &am1, 1);
  mx_value_id f0 = op("Flatten", &x, 1, &a0, 1);
  mx_value_id fd = op("Flatten", &x, 1, NULL, 0);
  infer_ok();
  mx_dim bs = mx_sym_mul(T, S("batch"), S("seq"));
  expect_shape(f2, MX_FLOAT32, SHAPE(bs, 768));
  expect_shape(fm1, MX_FLOAT32, SHAPE(bs, 768));
  expect_shape(f0, MX_FLOAT32, SHAPE(1, mx_sym_mul(T, bs, 768)));
  expect_shape(fd, MX_FLOAT32, SHAPE(S("batch"), mx_sym_mul(T, S("seq"), 768)));
}

Test(shape_infer, flatten_of_unknown_rank_is_2d) {
  mx_value_id x = input_unknown_rank("x", MX_FLOAT32);
  mx_value_id f = op("Flatten", &x, 1, NULL, 0);
  infer_ok();
  expect_shape(f, MX_FLOAT32, SHAPE(MX_DIM_UNKNOWN, MX_DIM_UNKNOWN));
}

Test(shape_infer, flatten_axis_out_of_range) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2, 3));
  mx_attr a = mx_attr_int("axis", 3);
  op("Flatten", &x, 1, &a, 1);
  infer_fails(MX_ERR_SHAPE, "axis");
}

/* --- Squeeze, Unsqueeze ----------------------------------------------------------------------- */

Test(shape_infer, squeeze_with_axes_input) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("b"), 1, 4, 1));
  mx_value_id y = op("Squeeze", (mx_value_id[]){x, CONST_1D("a", 1, -1)}, 2, NULL, 0);
  mx_value_id z = op("Squeeze", &x, 1, NULL, 0);
  infer_ok();
  expect_shape(y, MX_FLOAT32, SHAPE(S("b"), 4));
  cr_assert_eq(shape_of(z).rank, MX_RANK_UNKNOWN, "b may be 1 at run time");
}

Test(shape_infer, squeeze_all_ones_of_a_concrete_shape) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(1, 3, 1, 2));
  mx_value_id y = op("Squeeze", &x, 1, NULL, 0);
  infer_ok();
  expect_shape(y, MX_FLOAT32, SHAPE(3, 2));
}

Test(shape_infer, squeeze_attribute_before_opset_13) {
  cr_assert_eq(mx_graph_set_opset(G, "", 11), MX_OK);
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(1, S("s"), 1));
  int64_t axes[] = {0};
  mx_attr a = mx_attr_ints("axes", axes, 1);
  mx_value_id y = op("Squeeze", &x, 1, &a, 1);
  infer_ok();
  expect_shape(y, MX_FLOAT32, SHAPE(S("s"), 1));
}

Test(shape_infer, squeeze_attribute_rejected_from_opset_13) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(1, 2));
  int64_t axes[] = {0};
  mx_attr a = mx_attr_ints("axes", axes, 1);
  op("Squeeze", &x, 1, &a, 1);
  infer_fails(MX_ERR_INVALID_GRAPH, "opset 13");
}

Test(shape_infer, squeeze_of_a_dim_that_is_not_one_fails) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2, 3));
  op("Squeeze", (mx_value_id[]){x, CONST_1D("a", 1)}, 2, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "size 3");
}

Test(shape_infer, squeeze_keeps_the_value) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("b"), 7));
  mx_value_id s = op("Shape", &x, 1, NULL, 0);
  mx_value_id g = op("Slice", (mx_value_id[]){s, CONST_1D("st", 1), CONST_1D("en", 2)}, 3, NULL, 0);
  mx_value_id q = op("Squeeze", (mx_value_id[]){g, CONST_1D("ax", 0)}, 2, NULL, 0);
  infer_ok();
  expect_shape(q, MX_INT64, SCALAR);
  EXPECT_SV(q, 7);
}

Test(shape_infer, unsqueeze_with_axes_input_and_negative_axes) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("a"), S("b")));
  mx_value_id y = op("Unsqueeze", (mx_value_id[]){x, CONST_1D("ax", 0, 3)}, 2, NULL, 0);
  mx_value_id z = op("Unsqueeze", (mx_value_id[]){x, CONST_1D("neg", -1)}, 2, NULL, 0);
  mx_value_id w = op("Unsqueeze", (mx_value_id[]){x, CONST_1D("unsorted", 3, 1)}, 2, NULL, 0);
  infer_ok();
  expect_shape(y, MX_FLOAT32, SHAPE(1, S("a"), S("b"), 1));
  expect_shape(z, MX_FLOAT32, SHAPE(S("a"), S("b"), 1));
  expect_shape(w, MX_FLOAT32, SHAPE(S("a"), 1, S("b"), 1));
}

Test(shape_infer, unsqueeze_attribute_before_opset_13) {
  cr_assert_eq(mx_graph_set_opset(G, "", 11), MX_OK);
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(3));
  int64_t axes[] = {0, 2};
  mx_attr a = mx_attr_ints("axes", axes, 2);
  mx_value_id y = op("Unsqueeze", &x, 1, &a, 1);
  infer_ok();
  expect_shape(y, MX_FLOAT32, SHAPE(1, 3, 1));
}

Test(shape_infer, unsqueeze_of_a_scalar_value_keeps_the_symbol) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("batch"), 9));
  mx_value_id s = op("Shape", &x, 1, NULL, 0);
  mx_value_id g = op("Gather", (mx_value_id[]){s, const_scalar("i", MX_INT64, 0)}, 2, NULL, 0);
  mx_value_id u = op("Unsqueeze", (mx_value_id[]){g, CONST_1D("ax", 0)}, 2, NULL, 0);
  infer_ok();
  expect_shape(u, MX_INT64, SHAPE(1));
  EXPECT_SV(u, S("batch"));
}

Test(shape_infer, unsqueeze_repeated_axis_fails) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(3));
  op("Unsqueeze", (mx_value_id[]){x, CONST_1D("ax", 0, -3)}, 2, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "repeated");
}

Test(shape_infer, unsqueeze_unknown_axes_keep_the_rank) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(3, 4));
  mx_value_id ax = input("ax", MX_INT64, SHAPE(2));
  mx_value_id y = op("Unsqueeze", (mx_value_id[]){x, ax}, 2, NULL, 0);
  infer_ok();
  cr_assert_eq(shape_of(y).rank, 4);
}

/* --- Transpose -------------------------------------------------------------------------------- */

Test(shape_infer, transpose_permutes_symbolic_dims) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("b"), S("s"), 4, 16));
  int64_t perm[] = {0, 2, 1, 3};
  mx_attr a = mx_attr_ints("perm", perm, 4);
  mx_value_id y = op("Transpose", &x, 1, &a, 1);
  mx_value_id r = op("Transpose", &x, 1, NULL, 0);
  infer_ok();
  expect_shape(y, MX_FLOAT32, SHAPE(S("b"), 4, S("s"), 16));
  expect_shape(r, MX_FLOAT32, SHAPE(16, 4, S("s"), S("b")));
}

Test(shape_infer, transpose_moves_values) {
  mx_value_id c = const_i64("c", 2, (int64_t[]){2, 3}, (int64_t[]){1, 2, 3, 4, 5, 6});
  mx_value_id y = op("Transpose", &c, 1, NULL, 0);
  infer_ok();
  expect_shape(y, MX_INT64, SHAPE(3, 2));
  EXPECT_SV(y, 1, 4, 2, 5, 3, 6);
}

Test(shape_infer, transpose_perm_length_must_match) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2, 3));
  int64_t perm[] = {2, 0, 1};
  mx_attr a = mx_attr_ints("perm", perm, 3);
  op("Transpose", &x, 1, &a, 1);
  infer_fails(MX_ERR_SHAPE, "perm");
}

Test(shape_infer, transpose_bad_perm_fails_to_parse) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2, 3));
  int64_t perm[] = {0, 0};
  mx_attr a = mx_attr_ints("perm", perm, 2);
  op("Transpose", &x, 1, &a, 1);
  infer_fails(MX_ERR_INVALID_GRAPH, "permutation");
}

/* --- Concat ----------------------------------------------------------------------------------- */

Test(shape_infer, concat_sums_symbolic_dims) {
  mx_value_id k = input("k", MX_FLOAT32, SHAPE(S("batch"), S("past"), 64));
  mx_value_id n = input("n", MX_FLOAT32, SHAPE(S("batch"), S("seq"), 64));
  mx_attr ax = mx_attr_int("axis", -2);
  mx_value_id y = op("Concat", (mx_value_id[]){k, n}, 2, &ax, 1);
  infer_ok();
  expect_shape(y, MX_FLOAT32, SHAPE(S("batch"), mx_sym_add(T, S("past"), S("seq")), 64));
}

Test(shape_infer, concat_of_shape_pieces_builds_a_reshape_target) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("batch"), S("seq"), 64));
  mx_value_id s = op("Shape", &x, 1, NULL, 0);
  mx_value_id b = op("Gather", (mx_value_id[]){s, const_scalar("i0", MX_INT64, 0)}, 2, NULL, 0);
  mx_value_id q = op("Gather", (mx_value_id[]){s, const_scalar("i1", MX_INT64, 1)}, 2, NULL, 0);
  mx_value_id ub = op("Unsqueeze", (mx_value_id[]){b, CONST_1D("a0", 0)}, 2, NULL, 0);
  mx_value_id uq = op("Unsqueeze", (mx_value_id[]){q, CONST_1D("a1", 0)}, 2, NULL, 0);
  mx_attr ax = mx_attr_int("axis", 0);
  mx_value_id t = op("Concat", (mx_value_id[]){ub, uq, CONST_1D("heads", 4, 16)}, 3, &ax, 1);
  mx_value_id r = op("Reshape", (mx_value_id[]){x, t}, 2, NULL, 0);
  infer_ok();
  expect_shape(t, MX_INT64, SHAPE(4));
  EXPECT_SV(t, S("batch"), S("seq"), 4, 16);
  expect_shape(r, MX_FLOAT32, SHAPE(S("batch"), S("seq"), 4, 16));
}

Test(shape_infer, concat_2d_values_on_axis_1) {
  mx_value_id a = const_i64("a", 2, (int64_t[]){2, 1}, (int64_t[]){1, 2});
  mx_value_id b = const_i64("b", 2, (int64_t[]){2, 2}, (int64_t[]){3, 4, 5, 6});
  mx_attr ax = mx_attr_int("axis", 1);
  mx_value_id y = op("Concat", (mx_value_id[]){a, b}, 2, &ax, 1);
  infer_ok();
  expect_shape(y, MX_INT64, SHAPE(2, 3));
  EXPECT_SV(y, 1, 3, 4, 2, 5, 6);
}

Test(shape_infer, concat_with_unknown_rank_input) {
  mx_value_id a = input("a", MX_FLOAT32, SHAPE(2, 3));
  mx_value_id u = input_unknown_rank("u", MX_FLOAT32);
  mx_attr ax = mx_attr_int("axis", 0);
  mx_value_id y = op("Concat", (mx_value_id[]){a, u}, 2, &ax, 1);
  infer_ok();
  expect_shape(y, MX_FLOAT32, SHAPE(MX_DIM_UNKNOWN, 3));
}

Test(shape_infer, concat_rejects_mismatched_dims) {
  mx_value_id a = input("a", MX_FLOAT32, SHAPE(2, 3));
  mx_value_id b = input("b", MX_FLOAT32, SHAPE(2, 4));
  mx_attr ax = mx_attr_int("axis", 0);
  op("Concat", (mx_value_id[]){a, b}, 2, &ax, 1);
  infer_fails(MX_ERR_SHAPE, "input 1");
}

Test(shape_infer, concat_rejects_provably_different_symbolic_dims) {
  mx_value_id a = input("a", MX_FLOAT32, SHAPE(S("s"), 3));
  mx_value_id b = input("b", MX_FLOAT32, SHAPE(mx_sym_add(T, S("s"), 1), 3));
  mx_attr ax = mx_attr_int("axis", 1);
  op("Concat", (mx_value_id[]){a, b}, 2, &ax, 1);
  infer_fails(MX_ERR_SHAPE, NULL);
}

Test(shape_infer, concat_rejects_mixed_dtypes) {
  mx_value_id a = input("a", MX_FLOAT32, SHAPE(2));
  mx_value_id b = input("b", MX_FLOAT16, SHAPE(2));
  mx_attr ax = mx_attr_int("axis", 0);
  op("Concat", (mx_value_id[]){a, b}, 2, &ax, 1);
  infer_fails(MX_ERR_DTYPE, "input 1");
}

Test(shape_infer, concat_needs_axis) {
  mx_value_id a = input("a", MX_FLOAT32, SHAPE(2));
  op("Concat", (mx_value_id[]){a, a}, 2, NULL, 0);
  infer_fails(MX_ERR_INVALID_GRAPH, "axis");
}

/* --- Split ------------------------------------------------------------------------------------ */

Test(shape_infer, split_equal_parts_of_a_symbolic_dim) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("b"), mx_sym_mul(T, S("h"), 3)));
  mx_attr ax = mx_attr_int("axis", 1);
  mx_value_id o[3];
  op_multi("Split", &x, 1, &ax, 1, o, 3);
  infer_ok();
  for (int i = 0; i < 3; i++) expect_shape(o[i], MX_FLOAT32, SHAPE(S("b"), S("h")));
}

Test(shape_infer, split_sizes_from_input_at_opset_13) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("b"), 6));
  mx_attr ax = mx_attr_int("axis", -1);
  mx_value_id o[2];
  op_multi("Split", (mx_value_id[]){x, CONST_1D("s", 2, 4)}, 2, &ax, 1, o, 2);
  infer_ok();
  expect_shape(o[0], MX_FLOAT32, SHAPE(S("b"), 2));
  expect_shape(o[1], MX_FLOAT32, SHAPE(S("b"), 4));
}

Test(shape_infer, split_attribute_before_opset_13) {
  cr_assert_eq(mx_graph_set_opset(G, "", 11), MX_OK);
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(5));
  int64_t sizes[] = {1, 4};
  mx_attr a = mx_attr_ints("split", sizes, 2);
  mx_value_id o[2];
  op_multi("Split", &x, 1, &a, 1, o, 2);
  infer_ok();
  expect_shape(o[0], MX_FLOAT32, SHAPE(1));
  expect_shape(o[1], MX_FLOAT32, SHAPE(4));
}

Test(shape_infer, split_num_outputs_at_opset_18_leaves_a_smaller_last_chunk) {
  cr_assert_eq(mx_graph_set_opset(G, "", 18), MX_OK);
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(7, 2));
  mx_attr a = mx_attr_int("num_outputs", 3);
  mx_value_id o[3];
  op_multi("Split", &x, 1, &a, 1, o, 3);
  infer_ok();
  expect_shape(o[0], MX_FLOAT32, SHAPE(3, 2));
  expect_shape(o[1], MX_FLOAT32, SHAPE(3, 2));
  expect_shape(o[2], MX_FLOAT32, SHAPE(1, 2));
}

Test(shape_infer, split_of_a_shape_value) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("b"), S("s"), 8));
  mx_value_id s = op("Shape", &x, 1, NULL, 0);
  mx_value_id o[2];
  op_multi("Split", (mx_value_id[]){s, CONST_1D("sz", 2, 1)}, 2, NULL, 0, o, 2);
  infer_ok();
  EXPECT_SV(o[0], S("b"), S("s"));
  EXPECT_SV(o[1], 8);
}

Test(shape_infer, split_sizes_must_add_up) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(6));
  mx_value_id o[2];
  op_multi("Split", (mx_value_id[]){x, CONST_1D("s", 2, 3)}, 2, NULL, 0, o, 2);
  infer_fails(MX_ERR_SHAPE, "add up");
}

Test(shape_infer, split_uneven_equal_split_fails) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(7));
  mx_value_id o[2];
  op_multi("Split", &x, 1, NULL, 0, o, 2);
  infer_fails(MX_ERR_SHAPE, "equal");
}

Test(shape_infer, split_unknown_sizes_are_run_time_symbols) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(3, 6));
  mx_value_id sz = input("sz", MX_INT64, SHAPE(2));
  mx_attr ax = mx_attr_int("axis", 1);
  mx_value_id o[2];
  op_multi("Split", (mx_value_id[]){x, sz}, 2, &ax, 1, o, 2);
  infer_ok();
  for (int i = 0; i < 2; i++) {
    mx_shape s = shape_of(o[i]);
    cr_assert_eq(s.rank, 2);
    cr_assert_eq(s.dims[0], 3);
    cr_assert(is_expr(s.dims[1]));
  }
}

/* --- Expand, Tile ----------------------------------------------------------------------------- */

Test(shape_infer, expand_broadcasts_with_a_symbolic_target) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(1, S("seq"), 1));
  static mx_dim t[3];
  t[0] = S("batch"), t[1] = 1, t[2] = 64;
  mx_value_id y = op("Expand", (mx_value_id[]){x, input_sv("t", MX_INT64, 3, t)}, 2, NULL, 0);
  mx_value_id z = op("Expand", (mx_value_id[]){x, CONST_1D("r", 2, 1, 1, 1)}, 2, NULL, 0);
  infer_ok();
  expect_shape(y, MX_FLOAT32, SHAPE(S("batch"), S("seq"), 64));
  expect_shape(z, MX_FLOAT32, SHAPE(2, 1, S("seq"), 1));
}

Test(shape_infer, expand_of_values) {
  mx_value_id c = const_i64("c", 2, (int64_t[]){2, 1}, (int64_t[]){7, 9});
  mx_value_id y = op("Expand", (mx_value_id[]){c, CONST_1D("t", 2, 3)}, 2, NULL, 0);
  infer_ok();
  expect_shape(y, MX_INT64, SHAPE(2, 3));
  EXPECT_SV(y, 7, 7, 7, 9, 9, 9);
}

Test(shape_infer, expand_incompatible_fails) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(3));
  op("Expand", (mx_value_id[]){x, CONST_1D("t", 2, 4)}, 2, NULL, 0);
  infer_fails(MX_ERR_SHAPE, NULL);
}

Test(shape_infer, expand_unknown_target_values) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(5, 1));
  mx_value_id t = input("t", MX_INT64, SHAPE(3));
  mx_value_id y = op("Expand", (mx_value_id[]){x, t}, 2, NULL, 0);
  infer_ok();
  expect_shape(y, MX_FLOAT32, SHAPE(MX_DIM_UNKNOWN, 5, MX_DIM_UNKNOWN));
}

Test(shape_infer, tile_multiplies_dims) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("a"), 2));
  mx_value_id y = op("Tile", (mx_value_id[]){x, CONST_1D("r", 2, 3)}, 2, NULL, 0);
  mx_value_id c = const_i64("c", 1, (int64_t[]){2}, (int64_t[]){4, 5});
  mx_value_id z = op("Tile", (mx_value_id[]){c, CONST_1D("r2", 2)}, 2, NULL, 0);
  infer_ok();
  expect_shape(y, MX_FLOAT32, SHAPE(mx_sym_mul(T, S("a"), 2), 6));
  EXPECT_SV(z, 4, 5, 4, 5);
}

Test(shape_infer, tile_repeats_must_match_rank) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2, 2));
  op("Tile", (mx_value_id[]){x, CONST_1D("r", 2)}, 2, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "repeats");
}

/* --- Identity, Dropout ------------------------------------------------------------------------ */

Test(shape_infer, identity_and_dropout_pass_through) {
  mx_value_id x = input("x", MX_FLOAT16, SHAPE(S("b"), 3));
  mx_value_id i = op("Identity", &x, 1, NULL, 0);
  mx_value_id d[2];
  op_multi("Dropout", (mx_value_id[]){x, const_scalar("ratio", MX_FLOAT32, 0.1)}, 2, NULL, 0, d, 2);
  mx_value_id s = op("Shape", &x, 1, NULL, 0);
  mx_value_id si = op("Identity", &s, 1, NULL, 0);
  infer_ok();
  expect_shape(i, MX_FLOAT16, SHAPE(S("b"), 3));
  expect_shape(d[0], MX_FLOAT16, SHAPE(S("b"), 3));
  expect_shape(d[1], MX_BOOL, SHAPE(S("b"), 3));
  EXPECT_SV(si, S("b"), 3);
}

Test(shape_infer, dropout_ratio_attribute_before_opset_12) {
  cr_assert_eq(mx_graph_set_opset(G, "", 10), MX_OK);
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(4));
  mx_attr a = mx_attr_float("ratio", 0.2f);
  mx_value_id y = op("Dropout", &x, 1, &a, 1);
  infer_ok();
  expect_shape(y, MX_FLOAT32, SHAPE(4));
}

Test(shape_infer, dropout_ratio_must_be_float) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(4));
  op("Dropout", (mx_value_id[]){x, const_scalar("r", MX_INT64, 0)}, 2, NULL, 0);
  infer_fails(MX_ERR_DTYPE, "input 1");
}

/* --- Constant, ConstantOfShape ---------------------------------------------------------------- */

Test(shape_infer, constant_attribute_forms) {
  int64_t ints[] = {3, -1};
  float floats[] = {1.5f, 2.5f, 3.5f};
  mx_attr a1 = mx_attr_ints("value_ints", ints, 2);
  mx_attr a2 = mx_attr_floats("value_floats", floats, 3);
  mx_attr a3 = mx_attr_int("value_int", 9);
  mx_attr a4 = mx_attr_float("value_float", 1.0f);
  int32_t data[] = {1, 2, 3, 4, 5, 6};
  mx_tensor t = {.dtype = MX_INT32, .rank = 2, .dims = {2, 3}, .data = data};
  mx_attr a5 = mx_attr_tensor("value", &t);
  mx_value_id c1 = op("Constant", NULL, 0, &a1, 1);
  mx_value_id c2 = op("Constant", NULL, 0, &a2, 1);
  mx_value_id c3 = op("Constant", NULL, 0, &a3, 1);
  mx_value_id c4 = op("Constant", NULL, 0, &a4, 1);
  mx_value_id c5 = op("Constant", NULL, 0, &a5, 1);
  infer_ok();
  expect_shape(c1, MX_INT64, SHAPE(2));
  EXPECT_SV(c1, 3, C(-1));
  expect_shape(c2, MX_FLOAT32, SHAPE(3));
  expect_no_sv(c2);
  expect_shape(c3, MX_INT64, SCALAR);
  EXPECT_SV(c3, 9);
  expect_shape(c4, MX_FLOAT32, SCALAR);
  expect_shape(c5, MX_INT32, SHAPE(2, 3));
  EXPECT_SV(c5, 1, 2, 3, 4, 5, 6);
}

Test(shape_infer, constant_needs_exactly_one_value) {
  mx_attr a[] = {mx_attr_int("value_int", 1), mx_attr_float("value_float", 1.0f)};
  op("Constant", NULL, 0, a, 2);
  infer_fails(MX_ERR_INVALID_GRAPH, "exactly one");
}

Test(shape_infer, constant_of_shape_takes_the_symbolic_value) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("batch"), S("seq"), 8));
  mx_value_id s = op("Shape", (mx_value_id[]){x}, 1, (mx_attr[]){mx_attr_int("end", 2)}, 1);
  mx_value_id m = op("ConstantOfShape", &s, 1, NULL, 0);
  int64_t one = 1;
  mx_tensor v = {.dtype = MX_INT64, .rank = 1, .dims = {1}, .data = &one};
  mx_attr va = mx_attr_tensor("value", &v);
  mx_value_id k = op("ConstantOfShape", (mx_value_id[]){CONST_1D("sh", 2, 2)}, 1, &va, 1);
  infer_ok();
  expect_shape(m, MX_FLOAT32, SHAPE(S("batch"), S("seq")));
  expect_no_sv(m);
  expect_shape(k, MX_INT64, SHAPE(2, 2));
  EXPECT_SV(k, 1, 1, 1, 1);
}

Test(shape_infer, constant_of_shape_unknown_values_keep_rank) {
  mx_value_id s = input("s", MX_INT64, SHAPE(3));
  mx_value_id m = op("ConstantOfShape", &s, 1, NULL, 0);
  infer_ok();
  mx_shape sh = shape_of(m);
  cr_assert_eq(sh.rank, 3);
  for (int i = 0; i < 3; i++) cr_assert(is_expr(sh.dims[i]));
}

Test(shape_infer, constant_of_shape_value_must_have_one_element) {
  int64_t two[] = {1, 2};
  mx_tensor v = {.dtype = MX_INT64, .rank = 1, .dims = {2}, .data = two};
  mx_attr va = mx_attr_tensor("value", &v);
  op("ConstantOfShape", (mx_value_id[]){CONST_1D("sh", 2)}, 1, &va, 1);
  infer_fails(MX_ERR_INVALID_GRAPH, "one element");
}

Test(shape_infer, constant_of_shape_negative_dim_fails) {
  op("ConstantOfShape", (mx_value_id[]){CONST_1D("sh", 2, -3)}, 1, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "negative");
}

/* --- Range ------------------------------------------------------------------------------------ */

Test(shape_infer, range_to_a_symbolic_limit) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("batch"), S("seq"), 8));
  mx_value_id s = op("Shape", &x, 1, NULL, 0);
  mx_value_id seq = op("Gather", (mx_value_id[]){s, const_scalar("i", MX_INT64, 1)}, 2, NULL, 0);
  mx_value_id zero = const_scalar("zero", MX_INT64, 0), one = const_scalar("one", MX_INT64, 1);
  mx_value_id two = const_scalar("two", MX_INT64, 2);
  mx_value_id r = op("Range", (mx_value_id[]){zero, seq, one}, 3, NULL, 0);
  mx_value_id r2 = op("Range", (mx_value_id[]){zero, seq, two}, 3, NULL, 0);
  infer_ok();
  expect_shape(r, MX_INT64, SHAPE(S("seq")));
  expect_shape(r2, MX_INT64, SHAPE(mx_sym_ceildiv(T, S("seq"), 2)));
}

Test(shape_infer, range_concrete_values) {
  mx_value_id r = op("Range",
                     (mx_value_id[]){const_scalar("a", MX_INT64, 1), const_scalar("b", MX_INT64, 10),
                                     const_scalar("c", MX_INT64, 3)},
                     3, NULL, 0);
  mx_value_id d = op("Range",
                     (mx_value_id[]){const_scalar("a2", MX_INT32, 10), const_scalar("b2", MX_INT32, 6),
                                     const_scalar("c2", MX_INT32, -3)},
                     3, NULL, 0);
  mx_value_id e = op("Range",
                     (mx_value_id[]){const_scalar("a3", MX_INT64, 5), const_scalar("b3", MX_INT64, 1),
                                     const_scalar("c3", MX_INT64, 1)},
                     3, NULL, 0);
  mx_value_id f = op("Range",
                     (mx_value_id[]){const_scalar("a4", MX_FLOAT32, 0), const_scalar("b4", MX_FLOAT32, 1),
                                     const_scalar("c4", MX_FLOAT32, 0.3)},
                     3, NULL, 0);
  infer_ok();
  expect_shape(r, MX_INT64, SHAPE(3));
  EXPECT_SV(r, 1, 4, 7);
  expect_shape(d, MX_INT32, SHAPE(2));
  EXPECT_SV(d, 10, 7);
  expect_shape(e, MX_INT64, SHAPE(0));
  expect_shape(f, MX_FLOAT32, SHAPE(4));
}

Test(shape_infer, range_from_past_to_past_plus_seq) {
  static mx_dim past[1], total[1];
  past[0] = S("past");
  total[0] = mx_sym_add(T, S("past"), S("seq"));
  mx_value_id a = input("a", MX_INT64, SCALAR), b = input("b", MX_INT64, SCALAR);
  G->values[a].sv = past, G->values[a].sv_len = 1;
  G->values[b].sv = total, G->values[b].sv_len = 1;
  mx_value_id r = op("Range", (mx_value_id[]){a, b, const_scalar("one", MX_INT64, 1)}, 3, NULL, 0);
  infer_ok();
  expect_shape(r, MX_INT64, SHAPE(S("seq")));
}

Test(shape_infer, range_unknown_inputs_give_a_run_time_symbol) {
  mx_value_id a = input("a", MX_FLOAT32, SCALAR);
  mx_value_id r = op("Range", (mx_value_id[]){a, a, a}, 3, NULL, 0);
  infer_ok();
  mx_shape s = shape_of(r);
  cr_assert_eq(s.rank, 1);
  cr_assert(is_expr(s.dims[0]));
}

Test(shape_infer, range_rejects_mixed_dtypes_and_zero_delta) {
  mx_value_id r = op("Range",
                     (mx_value_id[]){const_scalar("a", MX_INT64, 0), const_scalar("b", MX_INT32, 3),
                                     const_scalar("c", MX_INT64, 1)},
                     3, NULL, 0);
  (void)r;
  infer_fails(MX_ERR_DTYPE, "input 1");
}

Test(shape_infer, range_zero_delta_fails) {
  op("Range",
     (mx_value_id[]){const_scalar("a", MX_INT64, 0), const_scalar("b", MX_INT64, 3),
                     const_scalar("c", MX_INT64, 0)},
     3, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "delta");
}

/* --- schema and run-time inference ----------------------------------------------------------- */

Test(shape_infer, attributes_outside_the_schema_are_rejected) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2));
  mx_attr a = mx_attr_int("axiss", 0);
  op("Identity", &x, 1, &a, 1);
  infer_fails(MX_ERR_UNSUPPORTED, "axiss");
}

/* Runs node `producer_of(out)`'s inference as the executors do at run time: concrete input
 * shapes and, for value inputs, host data instead of symbolic values. */
static mx_status run_infer(mx_value_id out, const mx_value_info *in, mx_value_info *res, mx_dim *res_sv) {
  mx_node_id n = G->values[out].producer;
  mx_error err = {0};
  mx_symtab *scratch;
  cr_assert_eq(mx_symtab_create(&scratch), MX_OK);
  mx_status st = mx__node_infer(G, n, scratch, in, res, res_sv, true, &err);
  mx_symtab_destroy(scratch);
  return st;
}

Test(shape_infer, runtime_reshape_and_range_read_host_data) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("b"), 6));
  mx_value_id t = input("t", MX_INT64, SHAPE(2));
  mx_value_id y = op("Reshape", (mx_value_id[]){x, t}, 2, NULL, 0);
  mx_value_id a = input("a", MX_FLOAT32, SCALAR);
  mx_value_id r = op("Range", (mx_value_id[]){a, a, a}, 3, NULL, 0);
  infer_ok();

  int64_t target[] = {-1, 4};
  mx_tensor tt = {.dtype = MX_INT64, .rank = 1, .dims = {2}, .data = target};
  mx_value_info in[3] = {
      {.present = true, .dtype = MX_FLOAT32, .shape = {2, {2, 6}}, .sv_len = -1},
      {.present = true, .dtype = MX_INT64, .shape = {1, {2}}, .sv_len = -1, .data = &tt},
  };
  mx_value_info res[1];
  mx_dim res_sv[MX_SV_MAX];
  cr_assert_eq(run_infer(y, in, res, res_sv), MX_OK);
  cr_assert_eq(res[0].shape.rank, 2);
  cr_assert_eq(res[0].shape.dims[0], 3);
  cr_assert_eq(res[0].shape.dims[1], 4);

  float start = 1.0f, limit = 2.0f, delta = 0.25f;
  mx_tensor ts = {.dtype = MX_FLOAT32, .data = &start}, tl = {.dtype = MX_FLOAT32, .data = &limit},
            td = {.dtype = MX_FLOAT32, .data = &delta};
  mx_value_info rin[3] = {
      {.present = true, .dtype = MX_FLOAT32, .sv_len = -1, .data = &ts},
      {.present = true, .dtype = MX_FLOAT32, .sv_len = -1, .data = &tl},
      {.present = true, .dtype = MX_FLOAT32, .sv_len = -1, .data = &td},
  };
  cr_assert_eq(run_infer(r, rin, res, res_sv), MX_OK);
  cr_assert_eq(res[0].shape.rank, 1);
  cr_assert_eq(res[0].shape.dims[0], 4);
}
