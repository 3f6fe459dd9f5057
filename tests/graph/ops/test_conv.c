/* Inference tests of the convolution and pooling op definitions (graph/ops/conv.c, pool.c):
 * output sizes as symbolic expressions of the input's dims (strides, pads, dilations, auto_pad,
 * ceil_mode), grouped and depthwise weights, ConvTranspose's output_shape/output_padding,
 * Col2Im and MaxUnpool sizes from input values, MaxPool's Indices, the quantized convolutions'
 * output types, and the refusals of bad attributes naming the node and the attribute. */
#include <criterion/criterion.h>
#include <string.h>

#include "graph/ops/ops_support.h"
#include "mixrt/graph.h"

static void setup(void) { mxt_ops_setup("conv"); }

TestSuite(conv_infer, .init = setup, .fini = mxt_ops_teardown);

#define INTS(name, ...) \
  mx_attr_ints(name, (const int64_t[]){__VA_ARGS__}, sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t))

/* --- Conv --------------------------------------------------------------------------------------- */

Test(conv_infer, conv_symbolic_stride_and_pads) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("n"), 3, S("h"), S("w")));
  mx_value_id w = input("w", MX_FLOAT32, SHAPE(64, 3, 7, 7));
  mx_value_id b = input("b", MX_FLOAT32, SHAPE(64));
  mx_attr a[] = {INTS("strides", 2, 2), INTS("pads", 3, 3, 3, 3)};
  mx_value_id y = op("Conv", (mx_value_id[]){x, w, b}, 3, a, 2);
  infer_ok();
  expect_shape_str(y, MX_FLOAT32, "[n, 64, floor((h - 1) / 2) + 1, floor((w - 1) / 2) + 1]");
}

Test(conv_infer, conv_concrete_and_kernel_from_weights) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(1, 1, 5, 5));
  mx_value_id w = input("w", MX_FLOAT32, SHAPE(1, 1, 3, 3));
  mx_attr a[] = {INTS("pads", 1, 0, 1, 0), INTS("strides", 2, 2)};
  mx_value_id y = op("Conv", (mx_value_id[]){x, w}, 2, a, 2);
  infer_ok();
  /* Height: floor((5 + 2 - 3)/2) + 1 = 3; width: floor((5 - 3)/2) + 1 = 2. */
  expect_shape_str(y, MX_FLOAT32, "[1, 1, 3, 2]");
}

Test(conv_infer, conv_depthwise_dilated_1d_and_3d) {
  mx_value_id x = input("x", MX_FLOAT16, SHAPE(S("n"), 32, S("l")));
  mx_value_id w = input("w", MX_FLOAT16, SHAPE(32, 1, 3));
  mx_attr a[] = {mx_attr_int("group", 32), INTS("dilations", 2)};
  mx_value_id y = op("Conv", (mx_value_id[]){x, w}, 2, a, 2);
  mx_value_id x3 = input("x3", MX_FLOAT64, SHAPE(2, 4, 8, 8, 8));
  mx_value_id w3 = input("w3", MX_FLOAT64, SHAPE(6, 2, 3, 3, 3));
  mx_attr a3[] = {mx_attr_int("group", 2), mx_attr_string("auto_pad", "SAME_UPPER"),
                  INTS("strides", 2, 1, 3)};
  mx_value_id y3 = op("Conv", (mx_value_id[]){x3, w3}, 2, a3, 3);
  infer_ok();
  expect_shape_str(y, MX_FLOAT16, "[n, 32, l - 4]");
  expect_shape_str(y3, MX_FLOAT64, "[2, 6, 4, 8, 3]");
}

Test(conv_infer, conv_same_and_valid_symbolic) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(1, 8, S("h"), S("w")));
  mx_value_id w = input("w", MX_FLOAT32, SHAPE(8, 8, 3, 3));
  mx_attr same[] = {mx_attr_string("auto_pad", "SAME_LOWER"), INTS("strides", 2, 2)};
  mx_attr valid[] = {mx_attr_string("auto_pad", "VALID")};
  mx_value_id ys = op("Conv", (mx_value_id[]){x, w}, 2, same, 2);
  mx_value_id yv = op("Conv", (mx_value_id[]){x, w}, 2, valid, 1);
  infer_ok();
  mx_shape s = shape_of(ys), v = shape_of(yv);
  cr_assert(is_expr(s.dims[2]) && is_expr(s.dims[3]));
  cr_assert_eq(v.dims[2], mx_sym_sub(T, S("h"), C(2)));
  cr_assert_eq(v.dims[3], mx_sym_sub(T, S("w"), C(2)));
  cr_assert_eq(s.dims[2], mx_sym_ceildiv(T, S("h"), C(2)));
}

Test(conv_infer, conv_refuses_kernel_shape_disagreeing_with_weights) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(1, 3, 8, 8));
  mx_value_id w = input("w", MX_FLOAT32, SHAPE(4, 3, 3, 3));
  mx_attr a[] = {INTS("kernel_shape", 3, 5)};
  op("Conv", (mx_value_id[]){x, w}, 2, a, 1);
  infer_fails(MX_ERR_SHAPE, "kernel_shape");
}

Test(conv_infer, conv_refuses_group_not_dividing_channels) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(1, 6, 8, 8));
  mx_value_id w = input("w", MX_FLOAT32, SHAPE(4, 3, 3, 3));
  mx_attr a[] = {mx_attr_int("group", 4)};
  op("Conv", (mx_value_id[]){x, w}, 2, a, 1);
  infer_fails(MX_ERR_SHAPE, "'group' 4");
}

Test(conv_infer, conv_refuses_weights_channels_times_group_mismatch) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(1, 6, 8, 8));
  mx_value_id w = input("w", MX_FLOAT32, SHAPE(4, 2, 3, 3));
  op("Conv", (mx_value_id[]){x, w}, 2, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "group");
}

Test(conv_infer, conv_refuses_pads_of_wrong_length_naming_node) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(1, 3, 8, 8));
  mx_value_id w = input("w", MX_FLOAT32, SHAPE(4, 3, 3, 3));
  mx_attr a[] = {INTS("pads", 1, 1)};
  mx_node_desc d = {.op_type = "Conv",
                    .name = "stem",
                    .inputs = (mx_value_id[]){x, w},
                    .n_inputs = 2,
                    .attrs = a,
                    .n_attrs = 1,
                    .n_outputs = 1};
  mx_value_id out;
  cr_assert_eq(mx_graph_add_node(G, &d, &out), MX_OK);
  infer_fails(MX_ERR_SHAPE, "'pads'");
  cr_assert(strstr(mx_graph_last_error(G), "stem"), "%s", mx_graph_last_error(G));
}

Test(conv_infer, conv_refuses_pads_disagreeing_with_kernel_shape) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(1, 3, 8, 8));
  mx_value_id w = input("w", MX_FLOAT32, SHAPE(4, 3, 3, 3));
  mx_attr a[] = {INTS("kernel_shape", 3, 3), INTS("pads", 1, 1, 1)};
  op("Conv", (mx_value_id[]){x, w}, 2, a, 2);
  infer_fails(MX_ERR_INVALID_GRAPH, "'pads'");
}

Test(conv_infer, conv_refuses_unknown_auto_pad) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(1, 3, 8, 8));
  mx_value_id w = input("w", MX_FLOAT32, SHAPE(4, 3, 3, 3));
  mx_attr a[] = {mx_attr_string("auto_pad", "SAME")};
  op("Conv", (mx_value_id[]){x, w}, 2, a, 1);
  infer_fails(MX_ERR_INVALID_GRAPH, "'auto_pad' is 'SAME'");
}

Test(conv_infer, conv_refuses_zero_stride_and_int_input) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(1, 3, 8, 8));
  mx_value_id w = input("w", MX_FLOAT32, SHAPE(4, 3, 3, 3));
  mx_attr a[] = {INTS("strides", 1, 0)};
  op("Conv", (mx_value_id[]){x, w}, 2, a, 1);
  infer_fails(MX_ERR_INVALID_GRAPH, "'strides'");
}

Test(conv_infer, conv_refuses_integer_input_and_window_too_large) {
  mx_value_id x = input("x", MX_INT32, SHAPE(1, 3, 8, 8));
  mx_value_id w = input("w", MX_INT32, SHAPE(4, 3, 3, 3));
  op("Conv", (mx_value_id[]){x, w}, 2, NULL, 0);
  infer_fails(MX_ERR_DTYPE, "int32");
}

Test(conv_infer, conv_refuses_window_larger_than_input) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(1, 3, 2, 8));
  mx_value_id w = input("w", MX_FLOAT32, SHAPE(4, 3, 5, 3));
  op("Conv", (mx_value_id[]){x, w}, 2, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "smaller than the window");
}

Test(conv_infer, conv_refuses_bias_of_wrong_length) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(1, 3, 8, 8));
  mx_value_id w = input("w", MX_FLOAT32, SHAPE(4, 3, 3, 3));
  mx_value_id b = input("b", MX_FLOAT32, SHAPE(5));
  op("Conv", (mx_value_id[]){x, w, b}, 3, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "bias");
}

/* --- ConvTranspose ------------------------------------------------------------------------------ */

Test(conv_infer, conv_transpose_shapes) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("n"), 8, S("h"), 5));
  mx_value_id w = input("w", MX_FLOAT32, SHAPE(8, 3, 3, 3));
  mx_attr a[] = {mx_attr_int("group", 2), INTS("strides", 2, 2), INTS("pads", 1, 1, 1, 1),
                 INTS("output_padding", 1, 1)};
  mx_value_id y = op("ConvTranspose", (mx_value_id[]){x, w}, 2, a, 4);
  mx_attr o[] = {INTS("strides", 3, 2), INTS("output_shape", 10, 8)};
  mx_value_id yo = op("ConvTranspose", (mx_value_id[]){x, w}, 2, o, 2);
  mx_attr s[] = {INTS("strides", 2, 2), mx_attr_string("auto_pad", "SAME_UPPER")};
  mx_value_id ys = op("ConvTranspose", (mx_value_id[]){x, w}, 2, s, 2);
  infer_ok();
  /* 2*(h-1) + 1 + 3 - 2 = 2*h; width 2*4 + 1 + 3 - 2 = 10. */
  expect_shape_str(y, MX_FLOAT32, "[n, 6, 2*h, 10]");
  expect_shape_str(yo, MX_FLOAT32, "[n, 3, 10, 8]");
  expect_shape_str(ys, MX_FLOAT32, "[n, 3, 2*h, 10]");
}

Test(conv_infer, conv_transpose_refuses_channel_mismatch) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(1, 4, 5, 5));
  mx_value_id w = input("w", MX_FLOAT32, SHAPE(8, 3, 3, 3));
  op("ConvTranspose", (mx_value_id[]){x, w}, 2, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "input channels");
}

/* --- quantized and deformable convolutions, Col2Im ---------------------------------------------- */

Test(conv_infer, conv_integer_and_qlinear_types) {
  mx_value_id x = input("x", MX_UINT8, SHAPE(1, 1, 3, 3));
  mx_value_id w = input("w", MX_UINT8, SHAPE(1, 1, 2, 2));
  mx_value_id zp = input("zp", MX_UINT8, SCALAR);
  mx_value_id y = op("ConvInteger", (mx_value_id[]){x, w, zp}, 3, NULL, 0);
  mx_value_id xs = input("xs", MX_FLOAT32, SCALAR), ys = input("ys", MX_FLOAT32, SCALAR);
  mx_value_id wi = input("wi", MX_INT8, SHAPE(2, 1, 2, 2)), wzp = input("wzp", MX_INT8, SHAPE(2));
  mx_value_id ws = input("ws", MX_FLOAT32, SHAPE(2)), yzp = input("yzp", MX_INT8, SCALAR);
  mx_value_id q = op("QLinearConv", (mx_value_id[]){x, xs, zp, wi, ws, wzp, ys, yzp}, 8, NULL, 0);
  infer_ok();
  expect_shape_str(y, MX_INT32, "[1, 1, 2, 2]");
  expect_shape_str(q, MX_INT8, "[1, 2, 2, 2]");
}

Test(conv_infer, deform_conv_shape_and_offset_check) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(1, 4, 6, 6));
  mx_value_id w = input("w", MX_FLOAT32, SHAPE(2, 4, 3, 3));
  mx_value_id off = input("off", MX_FLOAT32, SHAPE(1, 18, 4, 4));
  mx_value_id y = op("DeformConv", (mx_value_id[]){x, w, off}, 3, NULL, 0);
  infer_ok();
  expect_shape_str(y, MX_FLOAT32, "[1, 2, 4, 4]");
}

Test(conv_infer, deform_conv_refuses_offset_size) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(1, 4, 6, 6));
  mx_value_id w = input("w", MX_FLOAT32, SHAPE(2, 4, 3, 3));
  mx_value_id off = input("off", MX_FLOAT32, SHAPE(1, 18, 5, 4));
  op("DeformConv", (mx_value_id[]){x, w, off}, 3, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "offset");
}

Test(conv_infer, col2im_shape_from_values) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(1, 10, 5));
  mx_value_id img = CONST_1D("img", 5, 5);
  mx_value_id blk = CONST_1D("blk", 1, 5);
  mx_value_id y = op("Col2Im", (mx_value_id[]){x, img, blk}, 3, NULL, 0);
  infer_ok();
  expect_shape_str(y, MX_FLOAT32, "[1, 2, 5, 5]");
}

Test(conv_infer, col2im_refuses_block_count) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(1, 10, 8));
  mx_value_id img = CONST_1D("img", 5, 5);
  mx_value_id blk = CONST_1D("blk", 1, 5);
  op("Col2Im", (mx_value_id[]){x, img, blk}, 3, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "block count");
}

/* --- pools -------------------------------------------------------------------------------------- */

Test(conv_infer, maxpool_symbolic_with_indices) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("n"), 64, S("h"), S("w")));
  mx_attr a[] = {INTS("kernel_shape", 3, 3), INTS("strides", 2, 2), INTS("pads", 1, 1, 1, 1)};
  mx_value_id out[2];
  op_multi("MaxPool", &x, 1, a, 3, out, 2);
  infer_ok();
  expect_shape_str(out[0], MX_FLOAT32, "[n, 64, floor((h - 1) / 2) + 1, floor((w - 1) / 2) + 1]");
  expect_shape_str(out[1], MX_INT64, "[n, 64, floor((h - 1) / 2) + 1, floor((w - 1) / 2) + 1]");
}

Test(conv_infer, pools_ceil_mode_and_dilations_concrete) {
  mx_value_id x = input("x", MX_UINT8, SHAPE(1, 1, 4, 4));
  mx_attr a[] = {INTS("kernel_shape", 3, 3), INTS("strides", 2, 2), mx_attr_int("ceil_mode", 1)};
  mx_value_id y = op("MaxPool", &x, 1, a, 3);
  mx_value_id xf = input("xf", MX_FLOAT32, SHAPE(1, 1, 5, 5, 5));
  mx_attr d[] = {INTS("kernel_shape", 2, 2, 2), INTS("dilations", 2, 2, 2),
                 mx_attr_int("count_include_pad", 1)};
  mx_value_id z = op("AveragePool", &xf, 1, d, 3);
  infer_ok();
  expect_shape_str(y, MX_UINT8, "[1, 1, 2, 2]");
  expect_shape_str(z, MX_FLOAT32, "[1, 1, 3, 3, 3]");
}

Test(conv_infer, ceil_mode_drops_a_window_starting_in_the_end_pad) {
  /* ceil((5 + 1 + 1 - 2)/2) + 1 = 4, but window 3 would start at 6 - 1 = 5, past the input. */
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(1, 1, 5));
  mx_attr a[] = {INTS("kernel_shape", 2), INTS("strides", 2), INTS("pads", 1, 1),
                 mx_attr_int("ceil_mode", 1)};
  mx_value_id y = op("AveragePool", &x, 1, a, 4);
  infer_ok();
  expect_shape_str(y, MX_FLOAT32, "[1, 1, 3]");
}

Test(conv_infer, global_pools_and_lppool) {
  mx_value_id x = input("x", MX_FLOAT16, SHAPE(S("n"), 1280, S("h"), S("w")));
  mx_value_id ga = op("GlobalAveragePool", &x, 1, NULL, 0);
  mx_value_id gm = op("GlobalMaxPool", &x, 1, NULL, 0);
  mx_attr p = mx_attr_int("p", 3);
  mx_value_id gl = op("GlobalLpPool", &x, 1, &p, 1);
  mx_attr a[] = {INTS("kernel_shape", 2, 2), mx_attr_int("p", 1)};
  mx_value_id lp = op("LpPool", &x, 1, a, 2);
  infer_ok();
  expect_shape_str(ga, MX_FLOAT16, "[n, 1280, 1, 1]");
  expect_shape_str(gm, MX_FLOAT16, "[n, 1280, 1, 1]");
  expect_shape_str(gl, MX_FLOAT16, "[n, 1280, 1, 1]");
  expect_shape_str(lp, MX_FLOAT16, "[n, 1280, h - 1, w - 1]");
}

Test(conv_infer, maxpool_refuses_missing_kernel_shape) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(1, 1, 4, 4));
  op("MaxPool", &x, 1, NULL, 0);
  infer_fails(MX_ERR_INVALID_GRAPH, "kernel_shape");
}

Test(conv_infer, pool_refuses_kernel_shape_rank_and_storage_order) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(1, 1, 4, 4));
  mx_attr a[] = {INTS("kernel_shape", 2)};
  op("MaxPool", &x, 1, a, 1);
  infer_fails(MX_ERR_SHAPE, "'kernel_shape'");
}

Test(conv_infer, maxpool_refuses_bad_storage_order) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(1, 1, 4, 4));
  mx_attr a[] = {INTS("kernel_shape", 2, 2), mx_attr_int("storage_order", 2)};
  op("MaxPool", &x, 1, a, 2);
  infer_fails(MX_ERR_INVALID_GRAPH, "'storage_order'");
}

Test(conv_infer, averagepool_refuses_int8) {
  mx_value_id x = input("x", MX_INT8, SHAPE(1, 1, 4, 4));
  mx_attr a[] = {INTS("kernel_shape", 2, 2)};
  op("AveragePool", &x, 1, a, 1);
  infer_fails(MX_ERR_DTYPE, "int8");
}

Test(conv_infer, maxunpool_default_and_given_output_shape) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("n"), 3, S("h"), 4));
  mx_value_id i = input("i", MX_INT64, SHAPE(S("n"), 3, S("h"), 4));
  mx_attr a[] = {INTS("kernel_shape", 2, 2), INTS("strides", 2, 2)};
  mx_value_id y = op("MaxUnpool", (mx_value_id[]){x, i}, 2, a, 2);
  mx_value_id shape = CONST_1D("shape", 1, 3, 9, 9);
  mx_value_id y2 = op("MaxUnpool", (mx_value_id[]){x, i, shape}, 3, a, 2);
  infer_ok();
  expect_shape_str(y, MX_FLOAT32, "[n, 3, 2*h, 8]");
  expect_shape_str(y2, MX_FLOAT32, "[1, 3, 9, 9]");
}

Test(conv_infer, ceil_mode_symbolic_needs_no_clamp_without_end_pad) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("n"), 1, S("h")));
  mx_attr a[] = {INTS("kernel_shape", 3), INTS("strides", 2), mx_attr_int("ceil_mode", 1)};
  mx_value_id y = op("MaxPool", &x, 1, a, 3);
  mx_attr b[] = {INTS("kernel_shape", 2), INTS("strides", 2), INTS("pads", 1, 1),
                 mx_attr_int("ceil_mode", 1)};
  mx_value_id z = op("MaxPool", &x, 1, b, 4);
  infer_ok();
  cr_assert_eq(shape_of(y).dims[2],
               mx_sym_add(T, mx_sym_ceildiv(T, mx_sym_sub(T, S("h"), C(3)), C(2)), C(1)));
  /* With an end pad the last window may start in it: the size is clamped to ceil((h + 1) / 2). */
  mx_dim clamp = mx_sym_min(T, mx_sym_add(T, mx_sym_ceildiv(T, S("h"), C(2)), C(1)),
                            mx_sym_ceildiv(T, mx_sym_add(T, S("h"), C(1)), C(2)));
  cr_assert_eq(shape_of(z).dims[2], clamp);
}

Test(conv_infer, deform_conv_refuses_offset_channels) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(1, 4, 6, 6));
  mx_value_id w = input("w", MX_FLOAT32, SHAPE(2, 4, 3, 3));
  mx_value_id off = input("off", MX_FLOAT32, SHAPE(1, 9, 4, 4));
  op("DeformConv", (mx_value_id[]){x, w, off}, 3, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "offset channels");
}
