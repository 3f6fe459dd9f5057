/* A node that a rule has fused (a Conv or MatMul carrying mixrt_* attributes: an activation, a
 * bias, a transpose) is no longer the plain op, and later rules or rounds must not treat it as
 * one: the outputs against the unfused graph (support_fusion.c). */
#include <criterion/criterion.h>

#include "support_fusion.h"

/* Conv -> Relu -> BatchNormalization: conv_act takes the Relu, and BN, which reads the Relu's
 * result, must not then be folded into the fused Conv's weights (BN(relu(y)) != relu(BN(y))). */
static void build_conv_relu_bn(mx_graph *g) {
  mx_value_id x = fz_input(g, "x", MX_FLOAT32, 4, (mx_dim[]){1, 2, 5, 5});
  mx_value_id y = FZ2(g, "Conv", x, fz_weights(g, 4, (int64_t[]){4, 2, 3, 3}, 31));
  float sc[4] = {1.5f, -0.5f, 2.0f, 1.0f}, bi[4] = {0.1f, -0.2f, 0.3f, 0.0f};
  float mean[4] = {0.2f, -0.1f, 0.0f, 0.5f}, var[4] = {1.0f, 0.25f, 4.0f, 0.5f};
  int64_t c = 4;
  mx_value_id in[5] = {FZ1(g, "Relu", y), fz_const(g, 1, &c, sc), fz_const(g, 1, &c, bi),
                       fz_const(g, 1, &c, mean), fz_const(g, 1, &c, var)};
  cr_assert_eq(mx_graph_add_output(g, fz_op(g, "BatchNormalization", 5, in, NULL, 0)), MX_OK);
}

Test(fusion_fused_nodes, batchnorm_after_a_fused_conv_activation_stays) {
  mx_fuse_report r;
  mx_graph *g =
      fz_fuse_and_compare(build_conv_relu_bn, "default", (const int64_t[][MX_MAX_RANK]){{1, 2, 5, 5}}, &r);
  cr_assert_eq(fz_hits(&r, "conv_act"), 1);
  cr_assert_eq(fz_hits(&r, "bn_fold"), 0);
  cr_assert_eq(fz_count(g, "BatchNormalization"), 1);
  mx_graph_destroy(g);
}

/* MatMul(x, W) + b -> Softmax -> MatMul(V) looks like attention scores only without the bias;
 * once matmul_bias_act has taken the Add, the attention rule must not read the fused MatMul as
 * MatMul(Q, K^T). */
static void build_biased_scores(mx_graph *g) {
  mx_value_id q = fz_input(g, "q", MX_FLOAT32, 4, (mx_dim[]){1, 2, 3, 4});
  mx_value_id k = fz_input(g, "k", MX_FLOAT32, 4, (mx_dim[]){1, 2, 3, 4});
  mx_value_id v = fz_input(g, "v", MX_FLOAT32, 4, (mx_dim[]){1, 2, 3, 4});
  int64_t kt[] = {0, 1, 3, 2};
  mx_value_id s = FZ2(g, "MatMul", q, fz_transpose(g, k, 4, kt));
  s = FZ2(g, "Add", s, fz_weights(g, 1, (int64_t[]){3}, 41));
  mx_attr sm = mx_attr_int("axis", -1);
  cr_assert_eq(mx_graph_add_output(g, FZ2(g, "MatMul", fz_op(g, "Softmax", 1, &s, &sm, 1), v)), MX_OK);
}

Test(fusion_fused_nodes, attention_does_not_read_a_fused_matmul) {
  mx_fuse_report r;
  mx_graph *g =
      fz_fuse_and_compare(build_biased_scores, "default",
                          (const int64_t[][MX_MAX_RANK]){{1, 2, 3, 4}, {1, 2, 3, 4}, {1, 2, 3, 4}}, &r);
  cr_assert_eq(fz_count(g, "Softmax") + fz_count(g, "Attention"), 1);
  mx_graph_destroy(g);
}

/* Gemm -> Relu -> BatchNormalization: the same for a Gemm whose activation gemm_act took. */
static void build_gemm_relu_bn(mx_graph *g) {
  mx_value_id x = fz_input(g, "x", MX_FLOAT32, 2, (mx_dim[]){3, 5});
  mx_value_id y = FZ2(g, "Gemm", x, fz_weights(g, 2, (int64_t[]){5, 4}, 61));
  float sc[4] = {1.5f, -0.5f, 2.0f, 1.0f}, bi[4] = {0.1f, -0.2f, 0.3f, 0.0f};
  float mean[4] = {0.2f, -0.1f, 0.0f, 0.5f}, var[4] = {1.0f, 0.25f, 4.0f, 0.5f};
  int64_t c = 4;
  mx_value_id in[5] = {FZ1(g, "Relu", y), fz_const(g, 1, &c, sc), fz_const(g, 1, &c, bi),
                       fz_const(g, 1, &c, mean), fz_const(g, 1, &c, var)};
  cr_assert_eq(mx_graph_add_output(g, fz_op(g, "BatchNormalization", 5, in, NULL, 0)), MX_OK);
}

Test(fusion_fused_nodes, batchnorm_after_a_fused_gemm_activation_stays) {
  mx_fuse_report r;
  mx_graph *g =
      fz_fuse_and_compare(build_gemm_relu_bn, "default", (const int64_t[][MX_MAX_RANK]){{3, 5}}, &r);
  cr_assert_eq(fz_hits(&r, "gemm_act"), 1);
  cr_assert_eq(fz_hits(&r, "bn_fold"), 0);
  cr_assert_eq(fz_count(g, "BatchNormalization"), 1);
  mx_graph_destroy(g);
}
