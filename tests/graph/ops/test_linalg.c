/* Inference tests of the linear-algebra op definitions (graph/ops/linalg.c): MatMul with 1-D
 * promotion, batch broadcasting and symbolic dims, Gemm transposes and C broadcasting, Einsum
 * explicit/implicit outputs, diagonals, "..." broadcasting and sums, and the error cases. */
#include <criterion/criterion.h>
#include <string.h>

#include "graph/ops/ops_support.h"
#include "mixrt/graph.h"

static void setup(void) { mxt_ops_setup("linalg"); }

TestSuite(linalg_infer, .init = setup, .fini = mxt_ops_teardown);

static mx_value_id einsum(const char *eq, const mx_value_id *in, size_t n) {
  mx_attr a = mx_attr_string("equation", eq);
  return op("Einsum", in, n, &a, 1);
}

Test(linalg_infer, matmul_symbolic_batch_and_weights) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("batch"), S("seq"), 768));
  mx_value_id w = input("w", MX_FLOAT32, SHAPE(768, 3072));
  mx_value_id y = op("MatMul", (mx_value_id[]){x, w}, 2, NULL, 0);
  infer_ok();
  expect_shape_str(y, MX_FLOAT32, "[batch, seq, 3072]");
}

Test(linalg_infer, matmul_one_d_promotion) {
  mx_value_id v = input("v", MX_FLOAT32, SHAPE(4));
  mx_value_id m = input("m", MX_FLOAT32, SHAPE(S("b"), 4, 5));
  mx_value_id n = input("n", MX_FLOAT32, SHAPE(S("b"), 3, 4));
  mx_value_id vm = op("MatMul", (mx_value_id[]){v, m}, 2, NULL, 0);
  mx_value_id nv = op("MatMul", (mx_value_id[]){n, v}, 2, NULL, 0);
  mx_value_id vv = op("MatMul", (mx_value_id[]){v, v}, 2, NULL, 0);
  infer_ok();
  expect_shape_str(vm, MX_FLOAT32, "[b, 5]");
  expect_shape_str(nv, MX_FLOAT32, "[b, 3]");
  expect_shape_str(vv, MX_FLOAT32, "[]");
}

Test(linalg_infer, matmul_batch_broadcast) {
  mx_value_id a = input("a", MX_INT64, SHAPE(2, 1, 3, 4));
  mx_value_id b = input("b", MX_INT64, SHAPE(5, 4, 6));
  mx_value_id y = op("MatMul", (mx_value_id[]){a, b}, 2, NULL, 0);
  infer_ok();
  expect_shape_str(y, MX_INT64, "[2, 5, 3, 6]");
}

Test(linalg_infer, matmul_unknown_rank_stays_unknown) {
  mx_value_id a = input("a", MX_FLOAT16, SHAPE(3, 4));
  mx_value_id b;
  cr_assert_eq(mx_graph_add_input(G, "b", MX_FLOAT16, NULL, &b), MX_OK);
  mx_value_id y = op("MatMul", (mx_value_id[]){a, b}, 2, NULL, 0);
  infer_ok();
  expect_shape_str(y, MX_FLOAT16, "[*]");
}

Test(linalg_infer, matmul_contraction_mismatch) {
  mx_value_id a = input("a", MX_FLOAT32, SHAPE(3, 4));
  mx_value_id b = input("b", MX_FLOAT32, SHAPE(5, 6));
  op("MatMul", (mx_value_id[]){a, b}, 2, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "contraction");
}

Test(linalg_infer, matmul_symbolic_contraction_mismatch) {
  /* seq and seq + 1 can never be equal. */
  mx_dim s = S("seq");
  mx_value_id a = input("a", MX_FLOAT32, SHAPE(3, s));
  mx_value_id b = input("b", MX_FLOAT32, SHAPE(mx_sym_add(T, s, 1), 6));
  op("MatMul", (mx_value_id[]){a, b}, 2, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "seq + 1");
}

Test(linalg_infer, matmul_dtype_errors) {
  mx_value_id a = input("a", MX_FLOAT32, SHAPE(3, 4));
  mx_value_id b = input("b", MX_FLOAT16, SHAPE(4, 6));
  op("MatMul", (mx_value_id[]){a, b}, 2, NULL, 0);
  infer_fails(MX_ERR_DTYPE, "input 1");
}

Test(linalg_infer, matmul_rejects_bool_and_scalars) {
  mx_value_id a = input("a", MX_BOOL, SHAPE(3, 4));
  op("MatMul", (mx_value_id[]){a, a}, 2, NULL, 0);
  infer_fails(MX_ERR_DTYPE, "bool");
}

Test(linalg_infer, matmul_rejects_scalar) {
  mx_value_id a = input("a", MX_FLOAT32, SHAPE(3, 4));
  mx_shape sc = {0, {0}};
  mx_value_id s = input("s", MX_FLOAT32, sc);
  op("MatMul", (mx_value_id[]){a, s}, 2, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "scalar");
}

Test(linalg_infer, gemm_transposes_and_bias) {
  mx_value_id a = input("a", MX_FLOAT32, SHAPE(64, S("m")));
  mx_value_id b = input("b", MX_FLOAT32, SHAPE(128, 64));
  mx_value_id c = input("c", MX_FLOAT32, SHAPE(128));
  mx_attr at[] = {mx_attr_int("transA", 1), mx_attr_int("transB", 1), mx_attr_float("alpha", 0.5f)};
  mx_value_id y = op("Gemm", (mx_value_id[]){a, b, c}, 3, at, 3);
  mx_value_id y2 = op("Gemm", (mx_value_id[]){b, a}, 2, NULL, 0);
  infer_ok();
  expect_shape_str(y, MX_FLOAT32, "[m, 128]");
  expect_shape_str(y2, MX_FLOAT32, "[128, m]");
}

Test(linalg_infer, gemm_bias_must_broadcast) {
  mx_value_id a = input("a", MX_FLOAT32, SHAPE(4, 8));
  mx_value_id b = input("b", MX_FLOAT32, SHAPE(8, 16));
  mx_value_id c = input("c", MX_FLOAT32, SHAPE(3, 16));
  op("Gemm", (mx_value_id[]){a, b, c}, 3, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "C");
}

Test(linalg_infer, gemm_needs_2d) {
  mx_value_id a = input("a", MX_FLOAT32, SHAPE(2, 4, 8));
  mx_value_id b = input("b", MX_FLOAT32, SHAPE(8, 16));
  op("Gemm", (mx_value_id[]){a, b}, 2, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "rank 3");
}

Test(linalg_infer, gemm_unknown_attribute_rejected) {
  mx_value_id a = input("a", MX_FLOAT32, SHAPE(4, 8));
  mx_value_id b = input("b", MX_FLOAT32, SHAPE(8, 16));
  mx_attr bad = mx_attr_int("transC", 1);
  op("Gemm", (mx_value_id[]){a, b}, 2, &bad, 1);
  infer_fails(MX_ERR_UNSUPPORTED, "transC");
}

Test(linalg_infer, einsum_batched_matmul_symbolic) {
  mx_value_id a = input("a", MX_FLOAT32, SHAPE(S("b"), S("i"), 8));
  mx_value_id b = input("b", MX_FLOAT32, SHAPE(S("b"), 8, 5));
  mx_value_id y = einsum("bij, bjk -> bik", (mx_value_id[]){a, b}, 2);
  infer_ok();
  expect_shape_str(y, MX_FLOAT32, "[b, i, 5]");
}

Test(linalg_infer, einsum_implicit_output_is_sorted_singletons) {
  mx_value_id a = input("a", MX_FLOAT64, SHAPE(2, 3));
  mx_value_id b = input("b", MX_FLOAT64, SHAPE(3, 4));
  mx_value_id y = einsum("ij,jk", (mx_value_id[]){a, b}, 2);
  mx_value_id t = einsum("ba", (mx_value_id[]){a}, 1); /* implicit: "ab" order, a transpose */
  infer_ok();
  expect_shape_str(y, MX_FLOAT64, "[2, 4]");
  expect_shape_str(t, MX_FLOAT64, "[3, 2]");
}

Test(linalg_infer, einsum_diagonal_sum_and_scalar) {
  mx_value_id a = input("a", MX_FLOAT32, SHAPE(5, 5));
  mx_value_id d = einsum("ii->i", (mx_value_id[]){a}, 1);
  mx_value_id tr = einsum("ii", (mx_value_id[]){a}, 1);
  mx_value_id s = einsum("ij->", (mx_value_id[]){a}, 1);
  infer_ok();
  expect_shape_str(d, MX_FLOAT32, "[5]");
  expect_shape_str(tr, MX_FLOAT32, "[]");
  expect_shape_str(s, MX_FLOAT32, "[]");
}

Test(linalg_infer, einsum_ellipsis_broadcast) {
  mx_value_id a = input("a", MX_FLOAT32, SHAPE(2, 1, 3, 4));
  mx_value_id b = input("b", MX_FLOAT32, SHAPE(7, 4, 6));
  mx_value_id y = einsum("...ij,...jk->...ik", (mx_value_id[]){a, b}, 2);
  mx_value_id z = einsum("...ij,...jk", (mx_value_id[]){a, b}, 2);
  infer_ok();
  expect_shape_str(y, MX_FLOAT32, "[2, 7, 3, 6]");
  expect_shape_str(z, MX_FLOAT32, "[2, 7, 3, 6]");
}

Test(linalg_infer, einsum_label_size_mismatch) {
  mx_value_id a = input("a", MX_FLOAT32, SHAPE(2, 3));
  mx_value_id b = input("b", MX_FLOAT32, SHAPE(4, 5));
  einsum("ij,jk->ik", (mx_value_id[]){a, b}, 2);
  infer_fails(MX_ERR_SHAPE, "label 'j'");
}

Test(linalg_infer, einsum_operand_count_mismatch) {
  mx_value_id a = input("a", MX_FLOAT32, SHAPE(2, 3));
  einsum("ij,jk->ik", (mx_value_id[]){a}, 1);
  infer_fails(MX_ERR_INVALID_GRAPH, "2 operands");
}

Test(linalg_infer, einsum_rank_mismatch) {
  mx_value_id a = input("a", MX_FLOAT32, SHAPE(2, 3));
  einsum("ijk->i", (mx_value_id[]){a}, 1);
  infer_fails(MX_ERR_SHAPE, "rank 2");
}

Test(linalg_infer, einsum_output_label_not_in_inputs) {
  mx_value_id a = input("a", MX_FLOAT32, SHAPE(2, 3));
  einsum("ij->iz", (mx_value_id[]){a}, 1);
  infer_fails(MX_ERR_INVALID_GRAPH, "'z'");
}
