/* Inference tests of the index group (graph/ops/index*.c): Gather, GatherElements, GatherND,
 * ScatterND, Slice, Trilu, TopK and NonZero. Each checks output dtypes and shapes with concrete,
 * symbolic and unknown dims, symbolic values picked out of shape tensors, Slice's clamping rules
 * on concrete and symbolic dims, versioned attribute vs input forms, and error cases. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "graph/ir.h"
#include "graph/ops/op.h"
#include "graph/ops/ops_support.h"
#include "graph/passes/passes.h"
#include "mixrt/graph.h"

static void setup(void) { mxt_ops_setup("index"); }

TestSuite(index_infer, .init = setup, .fini = mxt_ops_teardown);

/* --- Gather ----------------------------------------------------------------------------------- */

Test(index_infer, gather_of_a_shape_picks_the_symbol) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("batch"), S("seq"), 768));
  mx_value_id s = op("Shape", &x, 1, NULL, 0);
  mx_value_id b = op("Gather", (mx_value_id[]){s, const_scalar("i0", MX_INT64, 0)}, 2, NULL, 0);
  mx_value_id h = op("Gather", (mx_value_id[]){s, const_scalar("im1", MX_INT32, -1)}, 2, NULL, 0);
  mx_value_id two = op("Gather", (mx_value_id[]){s, CONST_1D("i2", 1, 0)}, 2, NULL, 0);
  infer_ok();
  expect_shape(b, MX_INT64, SCALAR);
  EXPECT_SV(b, S("batch"));
  EXPECT_SV(h, 768);
  expect_shape(two, MX_INT64, SHAPE(2));
  EXPECT_SV(two, S("seq"), S("batch"));
}

Test(index_infer, gather_shapes_on_any_axis) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("b"), S("s"), 8));
  mx_value_id i = input("i", MX_INT64, SHAPE(2, 3));
  mx_attr a1 = mx_attr_int("axis", 1), am1 = mx_attr_int("axis", -1);
  mx_value_id y0 = op("Gather", (mx_value_id[]){x, i}, 2, NULL, 0);
  mx_value_id y1 = op("Gather", (mx_value_id[]){x, i}, 2, &a1, 1);
  mx_value_id y2 = op("Gather", (mx_value_id[]){x, const_scalar("k", MX_INT64, 3)}, 2, &am1, 1);
  infer_ok();
  expect_shape(y0, MX_FLOAT32, SHAPE(2, 3, S("s"), 8));
  expect_shape(y1, MX_FLOAT32, SHAPE(S("b"), 2, 3, 8));
  expect_shape(y2, MX_FLOAT32, SHAPE(S("b"), S("s")));
  expect_no_sv(y2);
}

Test(index_infer, gather_embedding_lookup) {
  mx_value_id table = input("table", MX_FLOAT32, SHAPE(30522, 768));
  mx_value_id ids = input("ids", MX_INT64, SHAPE(S("batch"), S("seq")));
  mx_value_id e = op("Gather", (mx_value_id[]){table, ids}, 2, NULL, 0);
  infer_ok();
  expect_shape(e, MX_FLOAT32, SHAPE(S("batch"), S("seq"), 768));
}

Test(index_infer, gather_of_a_2d_value_on_axis_1) {
  mx_value_id c = const_i64("c", 2, (int64_t[]){2, 3}, (int64_t[]){1, 2, 3, 4, 5, 6});
  mx_attr a1 = mx_attr_int("axis", 1);
  mx_value_id y = op("Gather", (mx_value_id[]){c, CONST_1D("i", 2, -3)}, 2, &a1, 1);
  infer_ok();
  expect_shape(y, MX_INT64, SHAPE(2, 2));
  EXPECT_SV(y, 3, 1, 6, 4);
}

Test(index_infer, gather_keeps_negative_values) {
  mx_value_id c = CONST_1D("c", 0, 0, -1);
  mx_value_id y = op("Gather", (mx_value_id[]){c, CONST_1D("i", 2, 0)}, 2, NULL, 0);
  infer_ok();
  EXPECT_SV(y, C(-1), 0);
}

Test(index_infer, gather_constant_index_out_of_range_fails) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("b"), 3));
  mx_value_id s = op("Shape", &x, 1, NULL, 0);
  op("Gather", (mx_value_id[]){s, const_scalar("i", MX_INT64, 2)}, 2, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "out of range");
}

Test(index_infer, gather_indices_must_be_integers) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(4));
  mx_value_id i = input("i", MX_FLOAT32, SHAPE(2));
  op("Gather", (mx_value_id[]){x, i}, 2, NULL, 0);
  infer_fails(MX_ERR_DTYPE, "input 1");
}

Test(index_infer, gather_unknown_rank) {
  mx_value_id x = input_unknown_rank("x", MX_FLOAT32);
  mx_value_id y = op("Gather", (mx_value_id[]){x, CONST_1D("i", 0)}, 2, NULL, 0);
  infer_ok();
  cr_assert_eq(shape_of(y).rank, MX_RANK_UNKNOWN);
}

/* --- GatherElements, GatherND, ScatterND ------------------------------------------------------ */

Test(index_infer, gather_elements_takes_the_indices_shape) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(3, 3));
  mx_value_id i = input("i", MX_INT32, SHAPE(S("n"), 3));
  mx_attr a = mx_attr_int("axis", -1);
  mx_value_id y = op("GatherElements", (mx_value_id[]){x, i}, 2, &a, 1);
  infer_ok();
  expect_shape(y, MX_FLOAT32, SHAPE(S("n"), 3));
}

Test(index_infer, gather_elements_rank_mismatch_fails) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(3, 3));
  mx_value_id i = input("i", MX_INT64, SHAPE(3));
  op("GatherElements", (mx_value_id[]){x, i}, 2, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "rank");
}

Test(index_infer, gathernd_shapes_with_batch_dims) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("b"), 4, 5, 6));
  mx_value_id i1 = input("i1", MX_INT64, SHAPE(S("b"), 7, 2));
  mx_value_id i0 = input("i0", MX_INT64, SHAPE(3, 1));
  mx_attr bd = mx_attr_int("batch_dims", 1);
  mx_value_id y1 = op("GatherND", (mx_value_id[]){x, i1}, 2, &bd, 1);
  mx_value_id y0 = op("GatherND", (mx_value_id[]){x, i0}, 2, NULL, 0);
  infer_ok();
  expect_shape(y1, MX_FLOAT32, SHAPE(S("b"), 7, 6));
  expect_shape(y0, MX_FLOAT32, SHAPE(3, 4, 5, 6));
}

Test(index_infer, gathernd_index_depth_too_large_fails) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2, 2));
  mx_value_id i = input("i", MX_INT64, SHAPE(1, 3));
  op("GatherND", (mx_value_id[]){x, i}, 2, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "last dim");
}

Test(index_infer, scatternd_keeps_the_data_shape) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("n"), 4));
  mx_value_id i = input("i", MX_INT64, SHAPE(2, 1));
  mx_value_id u = input("u", MX_FLOAT32, SHAPE(2, 4));
  mx_attr red = mx_attr_string("reduction", "add");
  mx_value_id y = op("ScatterND", (mx_value_id[]){x, i, u}, 3, &red, 1);
  infer_ok();
  expect_shape(y, MX_FLOAT32, SHAPE(S("n"), 4));
}

Test(index_infer, scatternd_checks_updates) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(5, 4));
  mx_value_id i = input("i", MX_INT64, SHAPE(2, 1));
  mx_value_id u = input("u", MX_FLOAT32, SHAPE(2, 3));
  op("ScatterND", (mx_value_id[]){x, i, u}, 3, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "updates");
}

Test(index_infer, scatternd_unknown_reduction_fails) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(5));
  mx_value_id i = input("i", MX_INT64, SHAPE(1, 1));
  mx_value_id u = input("u", MX_FLOAT32, SHAPE(1));
  mx_attr red = mx_attr_string("reduction", "avg");
  op("ScatterND", (mx_value_id[]){x, i, u}, 3, &red, 1);
  infer_fails(MX_ERR_INVALID_GRAPH, "avg");
}

/* --- Slice ------------------------------------------------------------------------------------ */

static mx_value_id slice4(mx_value_id x, const char *tag, int64_t start, int64_t end, int64_t axis,
                          int64_t step) {
  char n[4][32];
  for (int k = 0; k < 4; k++) snprintf(n[k], sizeof n[k], "%s_%d", tag, k);
  return op("Slice",
            (mx_value_id[]){x, CONST_1D(n[0], start), CONST_1D(n[1], end), CONST_1D(n[2], axis),
                            CONST_1D(n[3], step)},
            5, NULL, 0);
}

Test(index_infer, slice_concrete_clamping) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(20, 10, 5));
  mx_value_id a = slice4(x, "a", 0, 3, 0, 1);
  mx_value_id b = slice4(x, "b", 1, 1000, 1, 1);
  mx_value_id c = slice4(x, "c", -3, -1, 1, 1);
  mx_value_id d = slice4(x, "d", 1000, 1000, 1, 1);
  mx_value_id e = slice4(x, "e", -1, INT64_MIN, 0, -1);
  mx_value_id f = slice4(x, "f", INT64_MAX, 2, 0, -3);
  mx_value_id g = slice4(x, "g", 0, INT64_MAX, 2, 2);
  infer_ok();
  expect_shape(a, MX_FLOAT32, SHAPE(3, 10, 5));
  expect_shape(b, MX_FLOAT32, SHAPE(20, 9, 5));
  expect_shape(c, MX_FLOAT32, SHAPE(20, 2, 5));
  expect_shape(d, MX_FLOAT32, SHAPE(20, 0, 5));
  expect_shape(e, MX_FLOAT32, SHAPE(20, 10, 5));
  expect_shape(f, MX_FLOAT32, SHAPE(6, 10, 5));
  expect_shape(g, MX_FLOAT32, SHAPE(20, 10, 3));
}

Test(index_infer, slice_default_axes_and_steps) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(20, 10, 5));
  mx_value_id y = op("Slice", (mx_value_id[]){x, CONST_1D("s", 0, 0), CONST_1D("e", 3, 10)}, 3, NULL, 0);
  mx_value_id z =
      op("Slice", (mx_value_id[]){x, CONST_1D("s2", 1), CONST_1D("e2", -1), CONST_1D("ax", -2)}, 4, NULL, 0);
  infer_ok();
  expect_shape(y, MX_FLOAT32, SHAPE(3, 10, 5));
  expect_shape(z, MX_FLOAT32, SHAPE(20, 8, 5));
}

Test(index_infer, slice_symbolic_dims) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("batch"), S("seq"), 768));
  mx_value_id all = slice4(x, "all", 0, INT64_MAX, 1, 1);
  mx_value_id last = slice4(x, "last", -1, INT64_MAX, 1, 1);
  mx_value_id drop_last = slice4(x, "dl", 0, -1, 1, 1);
  mx_value_id tail3 = slice4(x, "t3", -3, -1, 1, 1);
  mx_value_id rev = slice4(x, "rev", -1, INT64_MIN, 1, -1);
  mx_value_id every2 = slice4(x, "e2", 0, INT64_MAX, 1, 2);
  mx_value_id skip1 = slice4(x, "s1", 1, INT64_MAX, 1, 1);
  infer_ok();
  expect_shape(all, MX_FLOAT32, SHAPE(S("batch"), S("seq"), 768));
  expect_shape(last, MX_FLOAT32, SHAPE(S("batch"), 1, 768));
  expect_shape(drop_last, MX_FLOAT32, SHAPE(S("batch"), mx_sym_sub(T, S("seq"), 1), 768));
  expect_shape(tail3, MX_FLOAT32, SHAPE(S("batch"), 2, 768));
  expect_shape(rev, MX_FLOAT32, SHAPE(S("batch"), S("seq"), 768));
  expect_shape(every2, MX_FLOAT32, SHAPE(S("batch"), mx_sym_ceildiv(T, S("seq"), 2), 768));
  mx_shape s = shape_of(skip1);
  cr_assert(is_expr(s.dims[1]) && s.dims[1] != S("seq") && s.dims[1] != mx_sym_sub(T, S("seq"), 1),
            "start 1 on a symbolic dim is only known at run time");
}

Test(index_infer, slice_with_symbolic_end_from_a_shape) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("batch"), S("seq"), 8));
  mx_value_id pos = input("pos", MX_FLOAT32, SHAPE(512, 8));
  mx_value_id full = input("full", MX_FLOAT32, SHAPE(S("seq"), 8));
  mx_value_id s = op("Shape", &x, 1, NULL, 0);
  mx_value_id seq = op("Slice", (mx_value_id[]){s, CONST_1D("a", 1), CONST_1D("b", 2)}, 3, NULL, 0);
  mx_value_id p = op("Slice", (mx_value_id[]){pos, CONST_1D("z", 0), seq}, 3, NULL, 0);
  mx_value_id f = op("Slice", (mx_value_id[]){full, CONST_1D("z2", 0), seq}, 3, NULL, 0);
  infer_ok();
  expect_shape(seq, MX_INT64, SHAPE(1));
  EXPECT_SV(seq, S("seq"));
  expect_shape(p, MX_FLOAT32, SHAPE(mx_sym_min(T, S("seq"), 512), 8));
  expect_shape(f, MX_FLOAT32, SHAPE(S("seq"), 8));
}

Test(index_infer, slice_of_a_shape_value) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("b"), S("s"), 4, 16));
  mx_value_id s = op("Shape", &x, 1, NULL, 0);
  mx_value_id head = slice4(s, "h", 0, -2, 0, 1);
  mx_value_id rev = slice4(s, "r", INT64_MAX, INT64_MIN, 0, -2);
  infer_ok();
  EXPECT_SV(head, S("b"), S("s"));
  EXPECT_SV(rev, 16, S("s"));
}

Test(index_infer, slice_attributes_before_opset_10) {
  cr_assert_eq(mx_graph_set_opset(G, "", 9), MX_OK);
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("b"), 10));
  int64_t starts[] = {2}, ends[] = {-2}, axes[] = {1};
  mx_attr a[] = {mx_attr_ints("starts", starts, 1), mx_attr_ints("ends", ends, 1),
                 mx_attr_ints("axes", axes, 1)};
  mx_value_id y = op("Slice", &x, 1, a, 3);
  infer_ok();
  expect_shape(y, MX_FLOAT32, SHAPE(S("b"), 6));
}

Test(index_infer, slice_unknown_starts_are_run_time_sizes) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(4, 10));
  mx_value_id st = input("st", MX_INT64, SHAPE(1));
  mx_value_id y = op("Slice", (mx_value_id[]){x, st, CONST_1D("e", 5), CONST_1D("a", 1)}, 4, NULL, 0);
  mx_value_id z = op("Slice", (mx_value_id[]){x, st, CONST_1D("e2", 5)}, 3, NULL, 0);
  mx_value_id ax = input("ax", MX_INT64, SHAPE(1));
  mx_value_id w = op("Slice", (mx_value_id[]){x, CONST_1D("s3", 0), CONST_1D("e3", 5), ax}, 4, NULL, 0);
  infer_ok();
  mx_shape sy = shape_of(y), sz = shape_of(z), sw = shape_of(w);
  cr_assert_eq(sy.dims[0], 4);
  cr_assert(is_expr(sy.dims[1]));
  cr_assert(is_expr(sz.dims[0]));
  cr_assert_eq(sz.dims[1], 10);
  cr_assert_eq(sw.rank, 2);
  cr_assert(is_expr(sw.dims[0]) && is_expr(sw.dims[1]));
}

Test(index_infer, slice_zero_step_fails) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(4));
  slice4(x, "z", 0, 2, 0, 0);
  infer_fails(MX_ERR_SHAPE, "step");
}

Test(index_infer, slice_repeated_axis_fails) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(4, 4));
  op("Slice", (mx_value_id[]){x, CONST_1D("s", 0, 0), CONST_1D("e", 1, 1), CONST_1D("a", 1, -1)}, 4, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "repeated");
}

Test(index_infer, slice_keeps_partial_values_from_inputs) {
  static mx_dim ends[1];
  ends[0] = mx_sym_sub(T, S("n"), 2);
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("n")));
  mx_value_id e = input_sv("e", MX_INT64, 1, ends);
  mx_value_id y = op("Slice", (mx_value_id[]){x, CONST_1D("s", 0), e}, 3, NULL, 0);
  infer_ok();
  expect_shape(y, MX_FLOAT32, SHAPE(mx_sym_sub(T, S("n"), 2)));
}

/* --- Trilu, TopK, NonZero --------------------------------------------------------------------- */

Test(index_infer, trilu_keeps_the_shape) {
  mx_value_id x = input("x", MX_INT64, SHAPE(S("b"), 4, 5));
  mx_value_id y = op("Trilu", (mx_value_id[]){x, const_scalar("k", MX_INT64, -1)}, 2, NULL, 0);
  infer_ok();
  expect_shape(y, MX_INT64, SHAPE(S("b"), 4, 5));
}

Test(index_infer, trilu_needs_a_matrix) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(5));
  op("Trilu", &x, 1, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "rank");
}

Test(index_infer, topk_with_constant_and_symbolic_k) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("b"), 10));
  mx_value_id o1[2], o2[2], o3[2];
  op_multi("TopK", (mx_value_id[]){x, CONST_1D("k", 3)}, 2, NULL, 0, o1, 2);
  static mx_dim ksv[1];
  ksv[0] = S("k");
  mx_attr ax0 = mx_attr_int("axis", 0);
  op_multi("TopK", (mx_value_id[]){x, input_sv("ks", MX_INT64, 1, ksv)}, 2, &ax0, 1, o2, 2);
  mx_value_id kin = input("kin", MX_INT64, SHAPE(1));
  op_multi("TopK", (mx_value_id[]){x, kin}, 2, NULL, 0, o3, 2);
  infer_ok();
  expect_shape(o1[0], MX_FLOAT32, SHAPE(S("b"), 3));
  expect_shape(o1[1], MX_INT64, SHAPE(S("b"), 3));
  expect_shape(o2[0], MX_FLOAT32, SHAPE(S("k"), 10));
  mx_shape s = shape_of(o3[1]);
  cr_assert(is_expr(s.dims[1]));
}

Test(index_infer, topk_k_attribute_before_opset_10) {
  cr_assert_eq(mx_graph_set_opset(G, "", 9), MX_OK);
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(3, 4));
  mx_attr k = mx_attr_int("k", 2);
  mx_value_id o[2];
  op_multi("TopK", &x, 1, &k, 1, o, 2);
  infer_ok();
  expect_shape(o[0], MX_FLOAT32, SHAPE(3, 2));
}

Test(index_infer, topk_k_larger_than_the_axis_fails) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(3, 4));
  mx_value_id o[2];
  op_multi("TopK", (mx_value_id[]){x, CONST_1D("k", 5)}, 2, NULL, 0, o, 2);
  infer_fails(MX_ERR_SHAPE, "exceeds");
}

Test(index_infer, nonzero_is_data_dependent) {
  mx_value_id x = input("x", MX_BOOL, SHAPE(S("b"), 4));
  mx_value_id y = op("NonZero", &x, 1, NULL, 0);
  infer_ok();
  mx_shape s = shape_of(y);
  cr_assert_eq(mx_graph_value_dtype(G, y), MX_INT64);
  cr_assert_eq(s.rank, 2);
  cr_assert_eq(s.dims[0], 2);
  cr_assert(is_expr(s.dims[1]), "the count is a fresh symbol");
  const mx_op_def *def = mx__op_find("", "NonZero");
  cr_assert(def && (def->flags & MX_OP_DATA_DEPENDENT) && def->upper_bound);

  mx_value_info in = {.present = true, .dtype = MX_BOOL, .shape = {2, {3, 4}}, .sv_len = -1};
  mx_value_info out[1];
  mx_dim out_sv[MX_SV_MAX];
  mx_infer_ctx ctx = {
      .syms = T, .n_in = 1, .n_out = 1, .in = &in, .out = out, .out_sv = out_sv, .runtime = true};
  mx_shape bound;
  cr_assert_eq(def->upper_bound(&ctx, 0, &bound), MX_OK);
  cr_assert_eq(bound.rank, 2);
  cr_assert_eq(bound.dims[0], 2);
  cr_assert_eq(bound.dims[1], 12);
}

Test(index_infer, flags_and_value_inputs) {
  cr_assert(mx__op_find("", "Shape")->flags & MX_OP_SHAPE_ONLY);
  cr_assert(mx__op_find("", "Gather")->flags & MX_OP_HOST_PREFERRED);
  cr_assert(mx__op_find("", "Reshape")->flags & MX_OP_ALIAS);
  cr_assert_eq(mx__op_find("", "Reshape")->value_inputs, 1u << 1);
  cr_assert_eq(mx__op_find("", "Slice")->value_inputs, 0x1eu);
  cr_assert_eq(mx__op_find("", "Range")->value_inputs, 0x7u);
  cr_assert_eq(mx__op_find("", "ConstantOfShape")->value_inputs, 1u);
  cr_assert_eq(mx__op_find("", "TopK")->value_inputs, 1u << 1);
  cr_assert_eq(mx__op_find("", "Gather")->flags & MX_OP_DATA_DEPENDENT, 0u);
}

Test(index_infer, runtime_slice_reads_host_data) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("n"), 3));
  mx_value_id st = input("st", MX_INT64, SHAPE(1));
  mx_value_id y = op("Slice", (mx_value_id[]){x, st, CONST_1D("e", INT64_MAX)}, 3, NULL, 0);
  infer_ok();
  int64_t start = -2;
  mx_tensor ts = {.dtype = MX_INT64, .rank = 1, .dims = {1}, .data = &start};
  int64_t end = INT64_MAX;
  mx_tensor te = {.dtype = MX_INT64, .rank = 1, .dims = {1}, .data = &end};
  mx_value_info in[3] = {
      {.present = true, .dtype = MX_FLOAT32, .shape = {2, {7, 3}}, .sv_len = -1},
      {.present = true, .dtype = MX_INT64, .shape = {1, {1}}, .sv_len = -1, .data = &ts},
      {.present = true, .dtype = MX_INT64, .shape = {1, {1}}, .sv_len = -1, .data = &te},
  };
  mx_value_info out[1];
  mx_dim out_sv[MX_SV_MAX];
  mx_symtab *scratch;
  cr_assert_eq(mx_symtab_create(&scratch), MX_OK);
  mx_error err = {0};
  mx_status s = mx__node_infer(G, G->values[y].producer, scratch, in, out, out_sv, true, &err);
  mx_symtab_destroy(scratch);
  cr_assert_eq(s, MX_OK);
  cr_assert_eq(out[0].shape.dims[0], 2);
  cr_assert_eq(out[0].shape.dims[1], 3);
}
