/* Rules matmul_transpose and matmul_bias_act on minimal graphs: hits, near misses that must stay
 * as they are, and the fused graph's outputs against the unfused graph's (support_fusion.c),
 * through each path of the MatMul kernel (BLAS gemm, the gemv rows and columns, the batched
 * loop, float16, integers). */
#include <criterion/criterion.h>

#include "graph/ops/linalg_params.h"
#include "support_fusion.h"

static const int64_t perm_last2[] = {0, 2, 1};
static const int64_t perm_2d[] = {1, 0};

/* The params of the one live MatMul node of g. */
static const mx_matmul_params *only_matmul(const mx_graph *g) {
  const mx_matmul_params *p = NULL;
  for (size_t i = 0; i < g->n_nodes; i++)
    if (!(g->nodes[i].flags & MX_NODE_DEAD) && strcmp(g->nodes[i].op_type, "MatMul") == 0) {
      cr_assert_null(p, "more than one MatMul");
      p = g->nodes[i].params;
    }
  cr_assert_not_null(p, "no MatMul");
  return p;
}

/* --- matmul_transpose ------------------------------------------------------------------------- */

static void build_transposed_operands(mx_graph *g) {
  mx_dim b = mx_sym_named(mx_graph_symtab(g), "batch");
  mx_value_id a = fz_input(g, "a", MX_FLOAT32, 3, (mx_dim[]){b, 6, 5}); /* read as [b, 5, 6] */
  mx_value_id w = fz_input(g, "w", MX_FLOAT32, 2, (mx_dim[]){7, 6});    /* read as [6, 7] */
  mx_value_id y = FZ2(g, "MatMul", fz_transpose(g, a, 3, perm_last2), fz_transpose(g, w, 2, perm_2d));
  cr_assert_eq(mx_graph_add_output(g, y), MX_OK);
}

Test(fusion_matmul, transposes_of_both_operands_become_flags) {
  mx_fuse_report r;
  mx_graph *g = fz_fuse_and_compare(build_transposed_operands, "matmul_transpose",
                                    (const int64_t[][MX_MAX_RANK]){{3, 6, 5}, {7, 6}}, &r);
  cr_assert_eq(fz_hits(&r, "matmul_transpose"), 1);
  cr_assert_eq(fz_count(g, "Transpose"), 0);
  const mx_matmul_params *p = only_matmul(g);
  cr_assert(p->trans_a && p->trans_b);
  mx_graph_destroy(g);
}

/* A single row times a transposed B (the gemv path over B's rows), a single column of a
 * transposed A, and a batch of transposed A against a broadcast batch of B (no batch folding). */
static void build_transposed_rows_and_columns(mx_graph *g) {
  mx_value_id x = fz_input(g, "x", MX_FLOAT32, 2, (mx_dim[]){1, 8});
  mx_value_id w = fz_input(g, "w", MX_FLOAT32, 2, (mx_dim[]){16, 8});
  cr_assert_eq(mx_graph_add_output(g, FZ2(g, "MatMul", x, fz_transpose(g, w, 2, perm_2d))), MX_OK);
  mx_value_id at = fz_input(g, "at", MX_FLOAT32, 2, (mx_dim[]){8, 16});
  mx_value_id v = fz_input(g, "v", MX_FLOAT32, 2, (mx_dim[]){8, 1});
  cr_assert_eq(mx_graph_add_output(g, FZ2(g, "MatMul", fz_transpose(g, at, 2, perm_2d), v)), MX_OK);
  mx_value_id ab = fz_input(g, "ab", MX_FLOAT32, 3, (mx_dim[]){3, 4, 2});
  mx_value_id bb = fz_input(g, "bb", MX_FLOAT32, 3, (mx_dim[]){1, 4, 5});
  cr_assert_eq(mx_graph_add_output(g, FZ2(g, "MatMul", fz_transpose(g, ab, 3, perm_last2), bb)), MX_OK);
}

Test(fusion_matmul, transposed_row_column_and_batched_products) {
  mx_fuse_report r;
  mx_graph *g = fz_fuse_and_compare(
      build_transposed_rows_and_columns, "matmul_transpose",
      (const int64_t[][MX_MAX_RANK]){{1, 8}, {16, 8}, {8, 16}, {8, 1}, {3, 4, 2}, {1, 4, 5}}, &r);
  cr_assert_eq(fz_hits(&r, "matmul_transpose"), 3);
  cr_assert_eq(fz_count(g, "Transpose"), 0);
  mx_graph_destroy(g);
}

static void build_transpose_not_last_two(mx_graph *g) {
  mx_value_id a = fz_input(g, "a", MX_FLOAT32, 3, (mx_dim[]){4, 3, 5});
  mx_value_id b = fz_input(g, "b", MX_FLOAT32, 3, (mx_dim[]){3, 5, 2});
  int64_t swap_batch[] = {1, 0, 2};
  cr_assert_eq(mx_graph_add_output(g, FZ2(g, "MatMul", fz_transpose(g, a, 3, swap_batch), b)), MX_OK);
}

Test(fusion_matmul, transpose_near_miss_batch_axes) {
  mx_fuse_report r;
  mx_graph *g = fz_fuse_and_compare(build_transpose_not_last_two, "matmul_transpose",
                                    (const int64_t[][MX_MAX_RANK]){{4, 3, 5}, {3, 5, 2}}, &r);
  cr_assert_eq(fz_hits(&r, "matmul_transpose"), 0);
  cr_assert_eq(fz_count(g, "Transpose"), 1);
  mx_graph_destroy(g);
}

static void build_int_transposed(mx_graph *g) {
  mx_value_id a = fz_input(g, "a", MX_INT64, 2, (mx_dim[]){3, 4});
  mx_value_id b = fz_input(g, "b", MX_INT64, 2, (mx_dim[]){5, 3});
  mx_value_id c = fz_input(g, "c", MX_INT64, 1, (mx_dim[]){5});
  mx_value_id y = FZ2(g, "MatMul", fz_transpose(g, a, 2, perm_2d), fz_transpose(g, b, 2, perm_2d));
  cr_assert_eq(mx_graph_add_output(g, FZ1(g, "Relu", FZ2(g, "Add", y, c))),
               MX_OK); /* integers: no epilogue */
}

Test(fusion_matmul, integer_transposes_fold_but_no_epilogue) {
  mx_fuse_report r;
  mx_graph *g = fz_fuse_and_compare(build_int_transposed, "default",
                                    (const int64_t[][MX_MAX_RANK]){{3, 4}, {5, 3}, {5}}, &r);
  cr_assert_eq(fz_hits(&r, "matmul_transpose"), 1);
  cr_assert_eq(fz_hits(&r, "matmul_bias_act"), 0);
  cr_assert_eq(fz_count(g, "Add"), 1);
  cr_assert_eq(fz_count(g, "Relu"), 1);
  mx_graph_destroy(g);
}

/* --- matmul_bias_act ---------------------------------------------------------------------------- */

/* A Linear layer as exporters write it: MatMul by a constant weight, Add of a constant bias. */
static mx_value_id linear(mx_graph *g, mx_value_id x, int64_t k, int64_t n, unsigned seed, bool bias_first) {
  mx_value_id y = FZ2(g, "MatMul", x, fz_weights(g, 2, (int64_t[]){k, n}, seed));
  mx_value_id b = fz_weights(g, 1, (int64_t[]){n}, seed + 1);
  return bias_first ? FZ2(g, "Add", b, y) : FZ2(g, "Add", y, b);
}

static void build_mlp(mx_graph *g) {
  mx_dim b = mx_sym_named(mx_graph_symtab(g), "batch"), s = mx_sym_named(mx_graph_symtab(g), "seq");
  mx_value_id x = fz_input(g, "x", MX_FLOAT32, 3, (mx_dim[]){b, s, 8});
  mx_value_id h = FZ1(g, "Gelu", linear(g, x, 8, 32, 1, false));
  mx_attr tanh_form = mx_attr_string("approximate", "tanh");
  mx_value_id h2 = linear(g, h, 32, 16, 3, true);
  h2 = fz_op(g, "Gelu", 1, &h2, &tanh_form, 1);
  mx_value_id s3 = linear(g, h2, 16, 12, 5, false);
  mx_value_id h3 = FZ2(g, "Mul", s3, FZ1(g, "Sigmoid", s3)); /* SiLU, through the silu rule */
  mx_value_id h4 = FZ1(g, "Relu", linear(g, h3, 12, 8, 7, false));
  mx_value_id h5 = FZ1(g, "Tanh", FZ2(g, "MatMul", h4, fz_weights(g, 2, (int64_t[]){8, 8}, 9))); /* no bias */
  cr_assert_eq(mx_graph_add_output(g, linear(g, h5, 8, 4, 11, false)), MX_OK); /* bias, no activation */
}

Test(fusion_matmul, linear_layers_with_activations_become_one_matmul_each) {
  mx_fuse_report r;
  mx_graph *g = fz_fuse_and_compare(build_mlp, "default", (const int64_t[][MX_MAX_RANK]){{2, 3, 8}}, &r);
  cr_assert_eq(fz_hits(&r, "matmul_bias_act"), 6);
  cr_assert_eq(fz_count(g, "MatMul"), 6);
  cr_assert_eq(g->n_live_nodes, 6, "%zu nodes left", g->n_live_nodes);
  mx_graph_destroy(g);
}

/* The decode step's shape: one row (the kernel's own row loops), bias and SiLU. */
static void build_row_bias_silu(mx_graph *g) {
  mx_value_id x = fz_input(g, "x", MX_FLOAT32, 3, (mx_dim[]){1, 1, 16});
  mx_value_id y = linear(g, x, 16, 40, 13, false);
  cr_assert_eq(mx_graph_add_output(g, FZ2(g, "Mul", FZ1(g, "Sigmoid", y), y)), MX_OK);
}

Test(fusion_matmul, single_row_with_bias_and_silu) {
  mx_fuse_report r;
  mx_graph *g =
      fz_fuse_and_compare(build_row_bias_silu, "default", (const int64_t[][MX_MAX_RANK]){{1, 1, 16}}, &r);
  cr_assert_eq(fz_hits(&r, "matmul_bias_act"), 1);
  cr_assert_eq(g->n_live_nodes, 1);
  const mx_matmul_params *p = only_matmul(g);
  cr_assert(p->has_bias);
  cr_assert_eq(p->fused_act, MX_MATMUL_ACT_SILU);
  mx_graph_destroy(g);
}

static void build_half_linear_relu(mx_graph *g) {
  mx_value_id x = fz_input(g, "x", MX_FLOAT16, 2, (mx_dim[]){5, 8});
  mx_value_id w = fz_input(g, "w", MX_FLOAT16, 2, (mx_dim[]){6, 8});
  mx_value_id b = fz_input(g, "b", MX_FLOAT16, 2, (mx_dim[]){1, 6});
  mx_value_id y = FZ2(g, "Add", FZ2(g, "MatMul", x, fz_transpose(g, w, 2, perm_2d)), b);
  cr_assert_eq(mx_graph_add_output(g, FZ1(g, "Relu", y)), MX_OK);
}

Test(fusion_matmul, float16_transposed_weight_bias_relu) {
  mx_fuse_report r;
  mx_graph *g = fz_fuse_and_compare(build_half_linear_relu, "default",
                                    (const int64_t[][MX_MAX_RANK]){{5, 8}, {6, 8}, {1, 6}}, &r);
  cr_assert_eq(fz_hits(&r, "matmul_transpose"), 1);
  cr_assert_eq(fz_hits(&r, "matmul_bias_act"), 1);
  cr_assert_eq(g->n_live_nodes, 1);
  const mx_matmul_params *p = only_matmul(g);
  cr_assert(p->trans_b && p->has_bias);
  cr_assert_eq(p->fused_act, MX_MATMUL_ACT_RELU);
  mx_graph_destroy(g);
}

static void build_bias_near_misses(mx_graph *g) {
  mx_value_id x = fz_input(g, "x", MX_FLOAT32, 2, (mx_dim[]){5, 8});
  /* A per-row "bias" [5, 1] runs along the first axis. */
  mx_value_id rows = FZ2(g, "MatMul", x, fz_weights(g, 2, (int64_t[]){8, 4}, 21));
  cr_assert_eq(
      mx_graph_add_output(g, FZ1(g, "Relu", FZ2(g, "Add", rows, fz_weights(g, 2, (int64_t[]){5, 1}, 22)))),
      MX_OK);
  /* An Add that broadcasts the product to a larger shape. */
  mx_value_id grow = FZ2(g, "MatMul", x, fz_weights(g, 2, (int64_t[]){8, 4}, 23));
  cr_assert_eq(mx_graph_add_output(g, FZ2(g, "Add", grow, fz_weights(g, 3, (int64_t[]){2, 1, 4}, 24))),
               MX_OK);
  /* The product is read twice: it stays, and so does its Add. */
  mx_value_id shared = FZ2(g, "MatMul", x, fz_weights(g, 2, (int64_t[]){8, 4}, 25));
  cr_assert_eq(mx_graph_add_output(g, FZ2(g, "Add", shared, fz_weights(g, 1, (int64_t[]){4}, 26))), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, FZ1(g, "Exp", shared)), MX_OK);
  /* A 1-D B: Y [5] runs along A's rows, and so would the "bias". */
  mx_value_id mv = FZ2(g, "MatMul", x, fz_weights(g, 1, (int64_t[]){8}, 28));
  cr_assert_eq(mx_graph_add_output(g, FZ2(g, "Add", mv, fz_weights(g, 1, (int64_t[]){5}, 29))), MX_OK);
  /* An activation the kernel does not apply: the bias is fused, LeakyRelu stays. */
  mx_value_id lr = linear(g, x, 8, 4, 27, false);
  cr_assert_eq(mx_graph_add_output(g, FZ1(g, "LeakyRelu", lr)), MX_OK);
}

Test(fusion_matmul, bias_near_misses) {
  mx_fuse_report r;
  mx_graph *g = fz_fuse_and_compare(build_bias_near_misses, "matmul_bias_act",
                                    (const int64_t[][MX_MAX_RANK]){{5, 8}}, &r);
  cr_assert_eq(fz_hits(&r, "matmul_bias_act"), 1); /* only the LeakyRelu's bias */
  cr_assert_eq(fz_count(g, "Add"), 4);
  cr_assert_eq(fz_count(g, "Relu"), 1);
  cr_assert_eq(fz_count(g, "LeakyRelu"), 1);
  mx_graph_destroy(g);
}

/* MatMul(Q, Transpose(K)) is the attention rule's: the late MatMul rules leave it to that rule. */
static void build_attention(mx_graph *g) {
  mx_value_id q = fz_input(g, "q", MX_FLOAT32, 4, (mx_dim[]){1, 2, 3, 4});
  mx_value_id k = fz_input(g, "k", MX_FLOAT32, 4, (mx_dim[]){1, 2, 3, 4});
  mx_value_id v = fz_input(g, "v", MX_FLOAT32, 4, (mx_dim[]){1, 2, 3, 4});
  int64_t kt[] = {0, 1, 3, 2};
  float two = 2.0f;
  mx_value_id s = FZ2(g, "Div", FZ2(g, "MatMul", q, fz_transpose(g, k, 4, kt)), fz_const(g, 0, NULL, &two));
  mx_attr sm = mx_attr_int("axis", -1);
  cr_assert_eq(mx_graph_add_output(g, FZ2(g, "MatMul", fz_op(g, "Softmax", 1, &s, &sm, 1), v)), MX_OK);
}

Test(fusion_matmul, attention_keeps_its_transposed_key) {
  mx_fuse_report r;
  mx_graph *g =
      fz_fuse_and_compare(build_attention, "default",
                          (const int64_t[][MX_MAX_RANK]){{1, 2, 3, 4}, {1, 2, 3, 4}, {1, 2, 3, 4}}, &r);
  cr_assert_eq(fz_count(g, "Attention"), 1);
  cr_assert_eq(fz_hits(&r, "matmul_transpose"), 0);
  mx_graph_destroy(g);
}

/* An ONNX MatMul with a third input is malformed; so is an unknown fused activation. */
Test(fusion_matmul, mixrt_attributes_checked) {
  mx_graph *g;
  cr_assert_eq(mx_graph_create("bad", &g), MX_OK);
  mx_value_id a = fz_input(g, "a", MX_FLOAT32, 2, (mx_dim[]){2, 3});
  mx_value_id b = fz_input(g, "b", MX_FLOAT32, 2, (mx_dim[]){3, 4});
  mx_value_id c = fz_input(g, "c", MX_FLOAT32, 1, (mx_dim[]){4});
  mx_value_id y;
  mx_status st = mx_graph_add_op(g, "MatMul", (mx_value_id[]){a, b, c}, 3, NULL, 0, &y);
  if (st == MX_OK) st = mx_graph_infer(g);
  cr_assert_neq(st, MX_OK);
  cr_assert(strstr(mx_graph_last_error(g), "MatMul has 3 inputs"), "%s", mx_graph_last_error(g));
  mx_graph_destroy(g);

  cr_assert_eq(mx_graph_create("bad2", &g), MX_OK);
  a = fz_input(g, "a", MX_FLOAT32, 2, (mx_dim[]){2, 3});
  b = fz_input(g, "b", MX_FLOAT32, 2, (mx_dim[]){3, 4});
  mx_attr act = mx_attr_string("mixrt_activation", "Softplus");
  st = mx_graph_add_op(g, "MatMul", (mx_value_id[]){a, b}, 2, &act, 1, &y);
  if (st == MX_OK) st = mx_graph_infer(g);
  cr_assert_neq(st, MX_OK);
  cr_assert(strstr(mx_graph_last_error(g), "Softplus"), "%s", mx_graph_last_error(g));
  mx_graph_destroy(g);
}

/* --- gemm_act ---------------------------------------------------------------------------------- */

/* A pooler (Gemm with transB and C, then Tanh), a float64 Gemm + Relu, and a near miss. */
static void build_gemm_acts(mx_graph *g) {
  mx_value_id x = fz_input(g, "x", MX_FLOAT32, 2, (mx_dim[]){3, 8});
  mx_attr tb[2] = {mx_attr_int("transB", 1), mx_attr_float("alpha", 0.5f)};
  mx_value_id in[3] = {x, fz_weights(g, 2, (int64_t[]){6, 8}, 51), fz_weights(g, 1, (int64_t[]){6}, 52)};
  cr_assert_eq(mx_graph_add_output(g, FZ1(g, "Tanh", fz_op(g, "Gemm", 3, in, tb, 2))), MX_OK);
  mx_value_id d = fz_input(g, "d", MX_FLOAT64, 2, (mx_dim[]){3, 4});
  mx_value_id e = fz_input(g, "e", MX_FLOAT64, 2, (mx_dim[]){4, 5});
  cr_assert_eq(mx_graph_add_output(g, FZ1(g, "Relu", FZ2(g, "Gemm", d, e))), MX_OK);
  mx_value_id in2[2] = {x, fz_weights(g, 2, (int64_t[]){8, 4}, 53)};
  cr_assert_eq(mx_graph_add_output(g, FZ1(g, "LeakyRelu", fz_op(g, "Gemm", 2, in2, NULL, 0))), MX_OK);
}

Test(fusion_matmul, gemm_activations_join_the_kernel) {
  mx_fuse_report r;
  mx_graph *g = fz_fuse_and_compare(build_gemm_acts, "gemm_act",
                                    (const int64_t[][MX_MAX_RANK]){{3, 8}, {3, 4}, {4, 5}}, &r);
  cr_assert_eq(fz_hits(&r, "gemm_act"), 2);
  cr_assert_eq(fz_count(g, "Tanh"), 0);
  cr_assert_eq(fz_count(g, "Relu"), 0);
  cr_assert_eq(fz_count(g, "LeakyRelu"), 1);
  cr_assert_eq(fz_count(g, "Gemm"), 3);
  mx_graph_destroy(g);
}
