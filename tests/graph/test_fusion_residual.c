/* Rule conv_residual (graph/passes/fuse_residual.c) on minimal graphs: a Conv whose output is
 * added to a same-shape residual (then Relu'd or not) becomes one Conv reading the residual;
 * near misses (a broadcast residual, a Conv output read twice, a Conv that already has an
 * activation) stay as they are. Every fused graph's outputs are checked against the unfused
 * graph's through the reference interpreter (support_fusion.c), so the Conv kernel's residual
 * input runs too: pointwise, im2col and depthwise paths. */
#include <criterion/criterion.h>

#include "support_fusion.h"

/* A Conv of x [1, 4, 6, 6] to 4 channels: 3x3 pads 1 (im2col), 1x1 (pointwise) or depthwise 3x3. */
typedef enum { K3X3, K1X1, DEPTHWISE } conv_kind;

static mx_value_id conv(mx_graph *g, mx_value_id x, conv_kind kind, bool bias, unsigned seed) {
  int64_t k = kind == K1X1 ? 1 : 3, cin = kind == DEPTHWISE ? 1 : 4;
  int64_t pads[] = {k / 2, k / 2, k / 2, k / 2};
  mx_attr at[2] = {mx_attr_ints("pads", pads, 4), mx_attr_int("group", kind == DEPTHWISE ? 4 : 1)};
  mx_value_id in[3] = {x, fz_weights(g, 4, (int64_t[]){4, cin, k, k}, seed),
                       bias ? fz_weights(g, 1, (int64_t[]){4}, seed + 7) : MX_NO_VALUE};
  return fz_op(g, "Conv", bias ? 3 : 2, in, at, 2);
}

static mx_value_id input(mx_graph *g, const char *name) {
  return fz_input(g, name, MX_FLOAT32, 4, (mx_dim[]){1, 4, 6, 6});
}

static const int64_t two_inputs[][MX_MAX_RANK] = {{1, 4, 6, 6}, {1, 4, 6, 6}};

/* Conv + Add(residual) + Relu for each Conv path, the residual on either side of the Add. */
static void build_block_per_path(mx_graph *g) {
  mx_value_id x = input(g, "x"), r = input(g, "r");
  cr_assert_eq(mx_graph_add_output(g, FZ1(g, "Relu", FZ2(g, "Add", conv(g, x, K3X3, true, 1), r))), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, FZ1(g, "Relu", FZ2(g, "Add", r, conv(g, x, K1X1, false, 2)))), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, FZ1(g, "Relu", FZ2(g, "Add", conv(g, x, DEPTHWISE, true, 3), r))),
               MX_OK);
}

Test(fusion_residual, conv_add_relu_becomes_one_conv_on_every_path) {
  mx_fuse_report rep;
  mx_graph *g = fz_fuse_and_compare(build_block_per_path, "conv_residual", two_inputs, &rep);
  cr_assert_eq(fz_hits(&rep, "conv_residual"), 3);
  cr_assert_eq(fz_count(g, "Add"), 0);
  cr_assert_eq(fz_count(g, "Relu"), 0);
  cr_assert_eq(fz_count(g, "Conv"), 3);
  mx_graph_destroy(g);
}

/* ResNet's downsampling block: both sides of the Add are Convs; one takes the other as its
 * residual. */
static void build_two_conv_block(mx_graph *g) {
  mx_value_id x = input(g, "x");
  mx_value_id branch = conv(g, conv(g, x, K3X3, true, 4), K1X1, true, 5);
  mx_value_id shortcut = conv(g, x, K1X1, true, 6);
  cr_assert_eq(mx_graph_add_output(g, FZ1(g, "Relu", FZ2(g, "Add", branch, shortcut))), MX_OK);
}

Test(fusion_residual, downsampling_block_keeps_the_shortcut_conv) {
  mx_fuse_report rep;
  mx_graph *g = fz_fuse_and_compare(build_two_conv_block, "conv_residual",
                                    (const int64_t[][MX_MAX_RANK]){{1, 4, 6, 6}}, &rep);
  cr_assert_eq(fz_hits(&rep, "conv_residual"), 1);
  cr_assert_eq(fz_count(g, "Conv"), 3);
  cr_assert_eq(fz_count(g, "Add"), 0);
  cr_assert_eq(fz_count(g, "Relu"), 0);
  mx_graph_destroy(g);
}

/* An inverted residual (MobileNet): no Relu after the Add; and a sum that a Relu and a second
 * node read, so the Relu stays. */
static void build_add_without_relu(mx_graph *g) {
  mx_value_id x = input(g, "x"), r = input(g, "r");
  cr_assert_eq(mx_graph_add_output(g, FZ2(g, "Add", conv(g, x, K1X1, true, 8), r)), MX_OK);
  mx_value_id s = FZ2(g, "Add", conv(g, x, K3X3, true, 9), r);
  cr_assert_eq(mx_graph_add_output(g, FZ1(g, "Relu", s)), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, FZ1(g, "Neg", s)), MX_OK);
}

Test(fusion_residual, add_alone_and_add_read_twice) {
  mx_fuse_report rep;
  mx_graph *g = fz_fuse_and_compare(build_add_without_relu, "conv_residual", two_inputs, &rep);
  cr_assert_eq(fz_hits(&rep, "conv_residual"), 2);
  cr_assert_eq(fz_count(g, "Add"), 0);
  cr_assert_eq(fz_count(g, "Relu"), 1);
  mx_graph_destroy(g);
}

/* Near misses: a residual that broadcasts ([1, 4, 1, 1]), a Conv output that is also a graph
 * output, and a Conv that conv_act already fused with its Relu. */
static void build_near_misses(mx_graph *g) {
  mx_value_id x = input(g, "x");
  mx_value_id small = fz_input(g, "small", MX_FLOAT32, 4, (mx_dim[]){1, 4, 1, 1});
  cr_assert_eq(mx_graph_add_output(g, FZ1(g, "Relu", FZ2(g, "Add", conv(g, x, K3X3, true, 10), small))),
               MX_OK);
  mx_value_id seen = conv(g, x, K1X1, true, 11);
  cr_assert_eq(mx_graph_add_output(g, seen), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, FZ2(g, "Add", seen, x)), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, FZ2(g, "Add", FZ1(g, "Relu", conv(g, x, K3X3, true, 12)), x)), MX_OK);
}

Test(fusion_residual, near_misses_stay) {
  mx_fuse_report rep;
  mx_graph *g = fz_fuse_and_compare(build_near_misses, "conv_act,conv_residual",
                                    (const int64_t[][MX_MAX_RANK]){{1, 4, 6, 6}, {1, 4, 1, 1}}, &rep);
  cr_assert_eq(fz_hits(&rep, "conv_residual"), 0);
  cr_assert_eq(fz_hits(&rep, "conv_act"), 1);
  cr_assert_eq(fz_count(g, "Add"), 3);
  mx_graph_destroy(g);
}

/* A residual Conv is not taken again by conv_act: the activation after it stays a node (its
 * residual would otherwise be dropped). */
static void build_residual_then_sigmoid(mx_graph *g) {
  mx_value_id x = input(g, "x"), r = input(g, "r");
  cr_assert_eq(mx_graph_add_output(g, FZ1(g, "Sigmoid", FZ2(g, "Add", conv(g, x, K3X3, true, 13), r))),
               MX_OK);
}

Test(fusion_residual, conv_act_leaves_a_residual_conv_alone) {
  mx_fuse_report rep;
  mx_graph *g = fz_fuse_and_compare(build_residual_then_sigmoid, "conv_residual,conv_act", two_inputs, &rep);
  cr_assert_eq(fz_hits(&rep, "conv_residual"), 1);
  cr_assert_eq(fz_hits(&rep, "conv_act"), 0);
  cr_assert_eq(fz_count(g, "Sigmoid"), 1);
  mx_graph_destroy(g);
}
