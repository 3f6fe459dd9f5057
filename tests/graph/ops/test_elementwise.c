/* Inference tests of the elementwise op definitions (graph/ops/elementwise*.c): output dtypes
 * and shapes with concrete, symbolic and unknown dims, numpy and legacy broadcasting, dtype and
 * shape errors, attribute parsing (Cast, Clip, Gelu, Mod), and the symbolic values that shape
 * arithmetic carries through Add/Sub/Mul/Div/Mod/Neg/Abs, comparisons, logic, Where, Cast and
 * Max/Min. Graphs are built with the public builder API; symbolic values are set on graph
 * inputs and read back through the IR. */
#include <criterion/criterion.h>
#include <string.h>

#include "graph/ir.h"
#include "graph/ops/op.h"
#include "graph/ops/ops_support.h"
#include "mixrt/graph.h"

static void setup(void) { mxt_ops_setup("ew"); }

TestSuite(ew_infer, .init = setup, .fini = mxt_ops_teardown);

/* --- shapes and dtypes -------------------------------------------------------------------- */

Test(ew_infer, bias_add_keeps_symbolic_dims) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("batch"), S("seq"), 768));
  mx_value_id b = input("b", MX_FLOAT32, SHAPE(768));
  mx_value_id y = op("Add", (mx_value_id[]){x, b}, 2, NULL, 0);
  infer_ok();
  expect_shape(y, MX_FLOAT32, SHAPE(S("batch"), S("seq"), 768));
  expect_no_sv(y);
}

Test(ew_infer, broadcast_one_against_symbol_and_scalar) {
  mx_value_id x = input("x", MX_FLOAT16, SHAPE(S("batch"), 1, 4));
  mx_value_id m = input("m", MX_FLOAT16, SHAPE(1, S("seq"), 1));
  mx_value_id s = input("s", MX_FLOAT16, SCALAR);
  mx_value_id y = op("Mul", (mx_value_id[]){x, m}, 2, NULL, 0);
  mx_value_id z = op("Sub", (mx_value_id[]){s, y}, 2, NULL, 0);
  infer_ok();
  expect_shape(y, MX_FLOAT16, SHAPE(S("batch"), S("seq"), 4));
  expect_shape(z, MX_FLOAT16, SHAPE(S("batch"), S("seq"), 4));
}

Test(ew_infer, unknown_dims_and_rank) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(MX_DIM_UNKNOWN, 3));
  mx_value_id y = input("y", MX_FLOAT32, SHAPE(5, MX_DIM_UNKNOWN));
  mx_value_id u = input_unknown_rank("u", MX_FLOAT32);
  mx_value_id a = op("Add", (mx_value_id[]){x, y}, 2, NULL, 0);
  mx_value_id b = op("Div", (mx_value_id[]){x, u}, 2, NULL, 0);
  mx_value_id c = op("Exp", (mx_value_id[]){u}, 1, NULL, 0);
  infer_ok();
  expect_shape(a, MX_FLOAT32, SHAPE(5, 3));
  mx_shape s;
  mx_graph_value_shape(G, b, &s);
  cr_assert_eq(s.rank, MX_RANK_UNKNOWN);
  mx_graph_value_shape(G, c, &s);
  cr_assert_eq(s.rank, MX_RANK_UNKNOWN);
}

Test(ew_infer, incompatible_shapes_fail) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2, 3));
  mx_value_id y = input("y", MX_FLOAT32, SHAPE(4));
  op("Add", (mx_value_id[]){x, y}, 2, NULL, 0);
  infer_fails(MX_ERR_SHAPE, NULL);
}

Test(ew_infer, mismatched_dtypes_name_the_input) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2));
  mx_value_id y = input("y", MX_FLOAT16, SHAPE(2));
  op("Mul", (mx_value_id[]){x, y}, 2, NULL, 0);
  infer_fails(MX_ERR_DTYPE, "input 1");
}

Test(ew_infer, dtype_sets_are_enforced) {
  mx_value_id b = input("b", MX_BOOL, SHAPE(2));
  op("Add", (mx_value_id[]){b, b}, 2, NULL, 0);
  infer_fails(MX_ERR_DTYPE, "input 0");
}

Test(ew_infer, float_only_math_rejects_integers) {
  mx_value_id i = input("i", MX_INT32, SHAPE(2));
  op("Sqrt", (mx_value_id[]){i}, 1, NULL, 0);
  infer_fails(MX_ERR_DTYPE, NULL);
}

Test(ew_infer, logic_needs_bool) {
  mx_value_id f = input("f", MX_FLOAT32, SHAPE(2));
  op("And", (mx_value_id[]){f, f}, 2, NULL, 0);
  infer_fails(MX_ERR_DTYPE, NULL);
}

Test(ew_infer, comparisons_and_logic_give_bool) {
  mx_value_id x = input("x", MX_INT8, SHAPE(3, 1));
  mx_value_id y = input("y", MX_INT8, SHAPE(4));
  mx_value_id lt = op("Less", (mx_value_id[]){x, y}, 2, NULL, 0);
  mx_value_id ge = op("GreaterOrEqual", (mx_value_id[]){x, y}, 2, NULL, 0);
  mx_value_id eq = op("Equal", (mx_value_id[]){lt, ge}, 2, NULL, 0);
  mx_value_id n = op("Not", (mx_value_id[]){eq}, 1, NULL, 0);
  mx_value_id x2 = op("Xor", (mx_value_id[]){n, lt}, 2, NULL, 0);
  infer_ok();
  expect_shape(lt, MX_BOOL, SHAPE(3, 4));
  expect_shape(ge, MX_BOOL, SHAPE(3, 4));
  expect_shape(eq, MX_BOOL, SHAPE(3, 4));
  expect_shape(n, MX_BOOL, SHAPE(3, 4));
  expect_shape(x2, MX_BOOL, SHAPE(3, 4));
}

Test(ew_infer, pow_mixes_base_and_exponent_types) {
  mx_value_id f = input("f", MX_FLOAT32, SHAPE(3));
  mx_value_id i = input("i", MX_INT64, SHAPE(3));
  mx_value_id k = input("k", MX_INT32, SHAPE(1));
  mx_value_id a = op("Pow", (mx_value_id[]){f, i}, 2, NULL, 0);
  mx_value_id b = op("Pow", (mx_value_id[]){k, f}, 2, NULL, 0);
  infer_ok();
  expect_shape(a, MX_FLOAT32, SHAPE(3));
  expect_shape(b, MX_INT32, SHAPE(3));
}

Test(ew_infer, pow_rejects_bool_exponent) {
  mx_value_id f = input("f", MX_FLOAT32, SHAPE(3));
  mx_value_id b = input("b", MX_BOOL, SHAPE(3));
  op("Pow", (mx_value_id[]){f, b}, 2, NULL, 0);
  infer_fails(MX_ERR_DTYPE, "input 1");
}

Test(ew_infer, variadic_broadcasts_all_inputs) {
  mx_value_id a = input("a", MX_FLOAT32, SHAPE(S("n"), 1));
  mx_value_id b = input("b", MX_FLOAT32, SHAPE(1, 5));
  mx_value_id c = input("c", MX_FLOAT32, SHAPE(5));
  mx_value_id s = op("Sum", (mx_value_id[]){a, b, c}, 3, NULL, 0);
  mx_value_id m = op("Mean", (mx_value_id[]){a}, 1, NULL, 0);
  mx_value_id mx = op("Max", (mx_value_id[]){c, b}, 2, NULL, 0);
  infer_ok();
  expect_shape(s, MX_FLOAT32, SHAPE(S("n"), 5));
  expect_shape(m, MX_FLOAT32, SHAPE(S("n"), 1));
  expect_shape(mx, MX_FLOAT32, SHAPE(1, 5));
}

Test(ew_infer, variadic_dtype_mismatch) {
  mx_value_id a = input("a", MX_INT32, SHAPE(2));
  mx_value_id b = input("b", MX_INT32, SHAPE(2));
  mx_value_id c = input("c", MX_INT64, SHAPE(2));
  op("Min", (mx_value_id[]){a, b, c}, 3, NULL, 0);
  infer_fails(MX_ERR_DTYPE, "input 2");
}

Test(ew_infer, legacy_broadcast_with_axis) {
  cr_assert_eq(mx_graph_set_opset(G, "", 6), MX_OK);
  mx_value_id a = input("a", MX_FLOAT32, SHAPE(2, 3, 4, 5));
  mx_value_id b = input("b", MX_FLOAT32, SHAPE(3, 4));
  mx_attr at[] = {mx_attr_int("broadcast", 1), mx_attr_int("axis", 1)};
  mx_value_id y = op("Add", (mx_value_id[]){a, b}, 2, at, 2);
  infer_ok();
  expect_shape(y, MX_FLOAT32, SHAPE(2, 3, 4, 5));
}

Test(ew_infer, legacy_broadcast_axis_must_fit) {
  cr_assert_eq(mx_graph_set_opset(G, "", 6), MX_OK);
  mx_value_id a = input("a", MX_FLOAT32, SHAPE(2, 3, 4, 5));
  mx_value_id b = input("b", MX_FLOAT32, SHAPE(4, 5));
  mx_attr at[] = {mx_attr_int("broadcast", 1), mx_attr_int("axis", 3)};
  op("Mul", (mx_value_id[]){a, b}, 2, at, 2);
  infer_fails(MX_ERR_SHAPE, NULL);
}

Test(ew_infer, where_broadcasts_three_ways) {
  mx_value_id c = input("c", MX_BOOL, SHAPE(S("b"), 1, 1));
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(1, 4, 1));
  mx_value_id y = input("y", MX_FLOAT32, SHAPE(6));
  mx_value_id w = op("Where", (mx_value_id[]){c, x, y}, 3, NULL, 0);
  infer_ok();
  expect_shape(w, MX_FLOAT32, SHAPE(S("b"), 4, 6));
}

Test(ew_infer, where_needs_bool_condition) {
  mx_value_id c = input("c", MX_INT32, SHAPE(2));
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2));
  op("Where", (mx_value_id[]){c, x, x}, 3, NULL, 0);
  infer_fails(MX_ERR_DTYPE, "input 0");
}

Test(ew_infer, cast_changes_dtype_only) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("b"), 3));
  mx_attr to = mx_attr_int("to", MX_BFLOAT16);
  mx_attr sat[] = {mx_attr_int("to", MX_INT8), mx_attr_int("saturate", 0)};
  mx_value_id y = op("Cast", &x, 1, &to, 1);
  mx_value_id z = op("Cast", &x, 1, sat, 2);
  infer_ok();
  expect_shape(y, MX_BFLOAT16, SHAPE(S("b"), 3));
  expect_shape(z, MX_INT8, SHAPE(S("b"), 3));
}

Test(ew_infer, cast_to_unsupported_type_fails) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(3));
  mx_attr to = mx_attr_int("to", 8); /* string */
  op("Cast", &x, 1, &to, 1);
  infer_fails(MX_ERR_UNSUPPORTED, "Cast");
}

Test(ew_infer, cast_needs_to) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(3));
  op("Cast", &x, 1, NULL, 0);
  infer_fails(MX_ERR_INVALID_GRAPH, "'to'");
}

Test(ew_infer, clip_bounds_by_opset) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2, S("n")));
  mx_value_id lo = input("lo", MX_FLOAT32, SCALAR);
  mx_value_id y = op("Clip", (mx_value_id[]){x, lo}, 2, NULL, 0);
  mx_value_id z = op("Clip", (mx_value_id[]){x, MX_NO_VALUE, lo}, 3, NULL, 0);
  infer_ok();
  expect_shape(y, MX_FLOAT32, SHAPE(2, S("n")));
  expect_shape(z, MX_FLOAT32, SHAPE(2, S("n")));
}

Test(ew_infer, clip_bound_must_be_scalar) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(4));
  mx_value_id lo = input("lo", MX_FLOAT32, SHAPE(2));
  op("Clip", (mx_value_id[]){x, lo}, 2, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "min");
}

Test(ew_infer, clip_attributes_before_opset_11) {
  cr_assert_eq(mx_graph_set_opset(G, "", 6), MX_OK);
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(4));
  mx_attr at[] = {mx_attr_float("min", -1.0f), mx_attr_float("max", 1.0f)};
  mx_value_id y = op("Clip", &x, 1, at, 2);
  infer_ok();
  expect_shape(y, MX_FLOAT32, SHAPE(4));
  const mx_node *nd = &G->nodes[G->values[y].producer];
  const float *p = nd->params; /* mx_clip_params starts with min, max */
  cr_assert_float_eq(p[0], -1.0f, 0.0f);
  cr_assert_float_eq(p[1], 1.0f, 0.0f);
}

Test(ew_infer, gelu_approximate_is_checked) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(4));
  mx_attr ok = mx_attr_string("approximate", "tanh");
  mx_value_id y = op("Gelu", &x, 1, &ok, 1);
  infer_ok();
  expect_shape(y, MX_FLOAT32, SHAPE(4));
  mx_attr bad = mx_attr_string("approximate", "fast");
  op("Gelu", &x, 1, &bad, 1);
  infer_fails(MX_ERR_INVALID_GRAPH, "approximate");
}

Test(ew_infer, mod_fmod_must_be_boolean) {
  mx_value_id x = input("x", MX_INT32, SHAPE(4));
  mx_attr bad = mx_attr_int("fmod", 2);
  op("Mod", (mx_value_id[]){x, x}, 2, &bad, 1);
  infer_fails(MX_ERR_INVALID_GRAPH, "fmod");
}

Test(ew_infer, unknown_attribute_is_rejected) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(4));
  mx_attr bad = mx_attr_int("alpha", 2);
  op("Relu", &x, 1, &bad, 1);
  infer_fails(MX_ERR_UNSUPPORTED, "alpha");
}

/* --- symbolic values ---------------------------------------------------------------------- */

Test(ew_infer, sv_arithmetic_on_shapes) {
  static mx_dim shape_sv[3];
  shape_sv[0] = S("batch");
  shape_sv[1] = S("seq");
  shape_sv[2] = C(768);
  mx_value_id s = input_sv("s", MX_INT64, 3, shape_sv);
  int64_t d3[] = {3}, heads[] = {1, 1, 12};
  mx_value_id h = const_i64("h", 1, d3, heads);
  mx_value_id two = const_i64("two", 0, NULL, (int64_t[]){2});
  mx_value_id q = op("Div", (mx_value_id[]){s, h}, 2, NULL, 0);
  mx_value_id m = op("Mul", (mx_value_id[]){s, two}, 2, NULL, 0);
  mx_value_id a = op("Add", (mx_value_id[]){m, h}, 2, NULL, 0);
  mx_value_id d = op("Sub", (mx_value_id[]){a, s}, 2, NULL, 0);
  mx_value_id n = op("Neg", &d, 1, NULL, 0);
  mx_value_id b = op("Abs", &n, 1, NULL, 0);
  infer_ok();
  expect_shape(q, MX_INT64, SHAPE(3));
  EXPECT_SV(q, S("batch"), S("seq"), C(64));
  EXPECT_SV(m, mx_sym_mul(T, S("batch"), C(2)), mx_sym_mul(T, S("seq"), C(2)), C(1536));
  EXPECT_SV(d, mx_sym_add(T, S("batch"), C(1)), mx_sym_add(T, S("seq"), C(1)), C(780));
  EXPECT_SV(n, mx_sym_neg(T, mx_sym_add(T, S("batch"), C(1))), mx_sym_neg(T, mx_sym_add(T, S("seq"), C(1))),
            C(-780));
  /* |x| is only decided for constants. */
  EXPECT_SV(b, MX_DIM_UNKNOWN, MX_DIM_UNKNOWN, C(780));
}

Test(ew_infer, sv_integer_division_truncates_and_mod_follows_divisor) {
  static mx_dim a_sv[4], b_sv[4];
  int64_t av[] = {-7, 7, -7, 7}, bv[] = {2, -2, -2, 0};
  for (int i = 0; i < 4; i++) {
    a_sv[i] = C(av[i]);
    b_sv[i] = C(bv[i]);
  }
  mx_value_id a = input_sv("a", MX_INT64, 4, a_sv);
  mx_value_id b = input_sv("b", MX_INT64, 4, b_sv);
  mx_value_id q = op("Div", (mx_value_id[]){a, b}, 2, NULL, 0);
  mx_value_id r = op("Mod", (mx_value_id[]){a, b}, 2, NULL, 0);
  mx_attr f = mx_attr_int("fmod", 1);
  mx_value_id rf = op("Mod", (mx_value_id[]){a, b}, 2, &f, 1);
  infer_ok();
  /* Division by zero stays unknown (the kernel reports it at run time). */
  EXPECT_SV(q, C(-3), C(-3), C(3), MX_DIM_UNKNOWN);
  EXPECT_SV(r, C(1), C(-1), C(-1), MX_DIM_UNKNOWN);
  EXPECT_SV(rf, C(-1), C(1), C(-1), MX_DIM_UNKNOWN);
}

Test(ew_infer, sv_symbolic_division_and_mod) {
  static mx_dim sv[2];
  sv[0] = mx_sym_mul(T, S("seq"), C(4));
  sv[1] = S("seq");
  mx_value_id a = input_sv("a", MX_INT64, 2, sv);
  mx_value_id four = const_i64("four", 0, NULL, (int64_t[]){4});
  mx_value_id q = op("Div", (mx_value_id[]){a, four}, 2, NULL, 0);
  mx_value_id r = op("Mod", (mx_value_id[]){a, four}, 2, NULL, 0);
  infer_ok();
  EXPECT_SV(q, S("seq"), mx_sym_div(T, S("seq"), C(4)));
  EXPECT_SV(r, C(0), mx_sym_mod(T, S("seq"), C(4)));
}

Test(ew_infer, sv_int32_wraps) {
  static mx_dim sv[2];
  sv[0] = C(INT32_MAX);
  sv[1] = S("n");
  mx_value_id a = input_sv("a", MX_INT32, 2, sv);
  mx_value_id s = op("Add", (mx_value_id[]){a, a}, 2, NULL, 0);
  infer_ok();
  EXPECT_SV(s, C(-2), mx_sym_mul(T, S("n"), C(2)));
}

Test(ew_infer, sv_comparisons_decide_only_when_known) {
  static mx_dim a_sv[4], b_sv[4];
  a_sv[0] = S("n");
  a_sv[1] = C(-1);
  a_sv[2] = mx_sym_add(T, S("n"), C(1));
  a_sv[3] = S("n");
  b_sv[0] = S("n");
  b_sv[1] = C(-1);
  b_sv[2] = S("n");
  b_sv[3] = S("m");
  mx_value_id a = input_sv("a", MX_INT64, 4, a_sv);
  mx_value_id b = input_sv("b", MX_INT64, 4, b_sv);
  mx_value_id eq = op("Equal", (mx_value_id[]){a, b}, 2, NULL, 0);
  mx_value_id lt = op("Less", (mx_value_id[]){a, b}, 2, NULL, 0);
  mx_value_id gt = op("Greater", (mx_value_id[]){a, b}, 2, NULL, 0);
  mx_value_id le = op("LessOrEqual", (mx_value_id[]){a, b}, 2, NULL, 0);
  mx_value_id ge = op("GreaterOrEqual", (mx_value_id[]){a, b}, 2, NULL, 0);
  mx_value_id nt = op("Not", &eq, 1, NULL, 0);
  infer_ok();
  EXPECT_SV(eq, C(1), C(1), C(0), MX_DIM_UNKNOWN);
  EXPECT_SV(lt, C(0), C(0), C(0), MX_DIM_UNKNOWN);
  EXPECT_SV(gt, C(0), C(0), C(1), MX_DIM_UNKNOWN);
  EXPECT_SV(le, C(1), C(1), C(0), MX_DIM_UNKNOWN);
  EXPECT_SV(ge, C(1), C(1), C(1), MX_DIM_UNKNOWN);
  EXPECT_SV(nt, C(0), C(0), C(1), MX_DIM_UNKNOWN);
}

Test(ew_infer, sv_reshape_minus_one_replacement_with_where) {
  /* target = Where(Equal(t, -1), shape_of_x, t): the usual "replace -1 by the real dim". */
  static mx_dim t_sv[3], x_sv[3];
  t_sv[0] = C(-1);
  t_sv[1] = C(12);
  t_sv[2] = C(64);
  x_sv[0] = S("batch");
  x_sv[1] = S("seq");
  x_sv[2] = C(768);
  mx_value_id t = input_sv("t", MX_INT64, 3, t_sv);
  mx_value_id x = input_sv("x", MX_INT64, 3, x_sv);
  mx_value_id m1 = const_i64("m1", 0, NULL, (int64_t[]){-1});
  mx_value_id eq = op("Equal", (mx_value_id[]){t, m1}, 2, NULL, 0);
  mx_value_id w = op("Where", (mx_value_id[]){eq, x, t}, 3, NULL, 0);
  infer_ok();
  expect_shape(eq, MX_BOOL, SHAPE(3));
  EXPECT_SV(eq, C(1), C(0), C(0));
  EXPECT_SV(w, S("batch"), C(12), C(64));
}

Test(ew_infer, sv_where_with_unknown_condition_has_no_value) {
  static mx_dim x_sv[2];
  x_sv[0] = S("a");
  x_sv[1] = C(3);
  mx_value_id c = input("c", MX_BOOL, SHAPE(2));
  mx_value_id x = input_sv("x", MX_INT64, 2, x_sv);
  mx_value_id w = op("Where", (mx_value_id[]){c, x, x}, 3, NULL, 0);
  infer_ok();
  expect_shape(w, MX_INT64, SHAPE(2));
  expect_no_sv(w);
}

Test(ew_infer, sv_logic) {
  static mx_dim a_sv[3], b_sv[3];
  a_sv[0] = C(1);
  a_sv[1] = C(0);
  a_sv[2] = MX_DIM_UNKNOWN;
  b_sv[0] = C(1);
  b_sv[1] = C(1);
  b_sv[2] = C(0);
  mx_value_id a = input_sv("a", MX_BOOL, 3, a_sv);
  mx_value_id b = input_sv("b", MX_BOOL, 3, b_sv);
  mx_value_id and_ = op("And", (mx_value_id[]){a, b}, 2, NULL, 0);
  mx_value_id or_ = op("Or", (mx_value_id[]){a, b}, 2, NULL, 0);
  mx_value_id xor_ = op("Xor", (mx_value_id[]){a, b}, 2, NULL, 0);
  infer_ok();
  EXPECT_SV(and_, C(1), C(0), C(0));
  EXPECT_SV(or_, C(1), C(1), MX_DIM_UNKNOWN);
  EXPECT_SV(xor_, C(0), C(1), MX_DIM_UNKNOWN);
}

Test(ew_infer, sv_max_min_variadic) {
  static mx_dim a_sv[2], b_sv[1];
  a_sv[0] = S("n");
  a_sv[1] = C(5);
  b_sv[0] = C(1);
  mx_value_id a = input_sv("a", MX_INT64, 2, a_sv);
  mx_value_id b = input_sv("b", MX_INT64, 1, b_sv);
  mx_value_id mx = op("Max", (mx_value_id[]){a, b, a}, 3, NULL, 0);
  mx_value_id mn = op("Min", (mx_value_id[]){b, a}, 2, NULL, 0);
  mx_value_id one = op("Max", &a, 1, NULL, 0);
  infer_ok();
  /* Inputs fold left to right. */
  EXPECT_SV(mx, mx_sym_max(T, mx_sym_max(T, S("n"), C(1)), S("n")), C(5));
  EXPECT_SV(mn, mx_sym_min(T, S("n"), C(1)), C(1));
  EXPECT_SV(one, S("n"), C(5));
}

Test(ew_infer, sv_cast_between_integer_types) {
  static mx_dim sv[3];
  sv[0] = S("n");
  sv[1] = C(((int64_t)1 << 32) + 7);
  sv[2] = C(0);
  mx_value_id a = input_sv("a", MX_INT64, 3, sv);
  mx_attr to32 = mx_attr_int("to", MX_INT32), tob = mx_attr_int("to", MX_BOOL),
          tof = mx_attr_int("to", MX_FLOAT32);
  mx_value_id i32 = op("Cast", &a, 1, &to32, 1);
  mx_value_id b = op("Cast", &a, 1, &tob, 1);
  mx_value_id f = op("Cast", &a, 1, &tof, 1);
  mx_attr to64 = mx_attr_int("to", MX_INT64);
  mx_value_id back = op("Cast", &i32, 1, &to64, 1);
  infer_ok();
  EXPECT_SV(i32, S("n"), C(7), C(0));
  EXPECT_SV(b, MX_DIM_UNKNOWN, C(1), C(0));
  expect_no_sv(f);
  EXPECT_SV(back, S("n"), C(7), C(0));
}

Test(ew_infer, sv_broadcasts_scalars) {
  static mx_dim s_sv[1], v_sv[3];
  s_sv[0] = S("k");
  v_sv[0] = C(1);
  v_sv[1] = C(2);
  v_sv[2] = C(3);
  mx_value_id s = input_sv("s", MX_INT64, -1, s_sv); /* rank 0 */
  mx_value_id v = input_sv("v", MX_INT64, 3, v_sv);
  mx_value_id p = op("Mul", (mx_value_id[]){s, v}, 2, NULL, 0);
  infer_ok();
  expect_shape(p, MX_INT64, SHAPE(3));
  EXPECT_SV(p, S("k"), mx_sym_mul(T, S("k"), C(2)), mx_sym_mul(T, S("k"), C(3)));
}

Test(ew_infer, no_sv_for_floats_or_unknown_inputs) {
  mx_value_id f = input("f", MX_FLOAT32, SHAPE(2));
  mx_value_id i = input("i", MX_INT64, SHAPE(2));
  mx_value_id a = op("Add", (mx_value_id[]){f, f}, 2, NULL, 0);
  mx_value_id b = op("Add", (mx_value_id[]){i, i}, 2, NULL, 0);
  infer_ok();
  expect_no_sv(a);
  expect_no_sv(b);
}

Test(ew_infer, shape_ops_are_host_preferred_float_math_is_not) {
  mx_value_id x = input("x", MX_INT64, SHAPE(2));
  mx_value_id f = input("f", MX_FLOAT32, SHAPE(2));
  mx_value_id a = op("Add", (mx_value_id[]){x, x}, 2, NULL, 0);
  mx_value_id e = op("Exp", &f, 1, NULL, 0);
  infer_ok();
  const mx_node *na = &G->nodes[G->values[a].producer];
  const mx_node *ne = &G->nodes[G->values[e].producer];
  cr_assert(na->def->flags & MX_OP_HOST_PREFERRED);
  cr_assert(na->def->flags & MX_OP_ELEMENTWISE);
  cr_assert_not(ne->def->flags & MX_OP_HOST_PREFERRED);
  cr_assert(ne->def->flags & MX_OP_ELEMENTWISE);
}

Test(ew_infer, folding_turns_known_shape_arithmetic_into_constants) {
  static mx_dim sv[2];
  sv[0] = C(4);
  sv[1] = C(6);
  mx_value_id a = input_sv("a", MX_INT64, 2, sv);
  mx_value_id two = const_i64("two", 0, NULL, (int64_t[]){2});
  mx_value_id q = op("Div", (mx_value_id[]){a, two}, 2, NULL, 0);
  cr_assert_eq(mx_graph_add_output(G, q), MX_OK);
  mx_optimize_report r;
  cr_assert_eq(mx_graph_optimize(G, &r), MX_OK, "%s", mx_graph_last_error(G));
  const mx_tensor *t = mx_graph_value_constant(G, q);
  cr_assert_not_null(t);
  cr_assert_eq(((const int64_t *)t->data)[0], 2);
  cr_assert_eq(((const int64_t *)t->data)[1], 3);
}
