/* Inference tests of the resampling group (graph/ops/resample.c: Pad, CenterCropPad, Resize,
 * Upsample, DepthToSpace, SpaceToDepth, GridSample, AffineGrid, RoiAlign, NonMaxSuppression)
 * and the tensor group (graph/ops/tensor.c: OneHot, Compress, Unique, Scatter,
 * ScatterElements, EyeLike, ReverseSequence, TensorScatter): shapes that stay symbolic (Pad's
 * dim + pads, DepthToSpace's c/(b*b) and h*b, Resize by integer scales), fresh symbols for
 * sizes only known at run time, data-dependent flags and upper bounds, and the refusals of bad
 * attributes and inputs with the node and attribute named. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "graph/ir.h"
#include "graph/ops/op.h"
#include "graph/ops/ops_support.h"
#include "mixrt/graph.h"

static void setup(void) { mxt_ops_setup("resample"); }

TestSuite(resample_infer, .init = setup, .fini = mxt_ops_teardown);

/* A 1-D float32 constant. */
static mx_value_id const_f32(const char *name, int64_t n, const float *data) {
  mx_tensor t = {.dtype = MX_FLOAT32, .rank = 1, .dims = {n}, .data = (void *)data};
  mx_value_id v;
  cr_assert_eq(mx_graph_add_constant(G, name, &t, &v), MX_OK);
  return v;
}

/* --- Pad -------------------------------------------------------------------------------------- */

Test(resample_infer, pad_adds_constant_pads_to_symbolic_dims) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("n"), 3, S("h"), S("w")));
  mx_value_id pads = CONST_1D("pads", 0, 0, 1, 2, 0, 0, 1, 2);
  mx_value_id y = op("Pad", (mx_value_id[]){x, pads}, 2, NULL, 0);
  infer_ok();
  expect_shape_str(y, MX_FLOAT32, "[n, 3, h + 2, w + 4]");
}

Test(resample_infer, pad_with_symbolic_pads_and_axes) {
  mx_value_id x = input("x", MX_INT32, SHAPE(4, S("s")));
  static mx_dim pv[2];
  pv[0] = S("p");
  pv[1] = C(3);
  mx_value_id pads = input_sv("pads", MX_INT64, 2, pv);
  mx_value_id axes = CONST_1D("axes", -1);
  mx_attr mode = mx_attr_string("mode", "edge");
  mx_value_id y = op("Pad", (mx_value_id[]){x, pads, MX_NO_VALUE, axes}, 4, &mode, 1);
  infer_ok();
  expect_shape_str(y, MX_INT32, "[4, s + p + 3]");
}

Test(resample_infer, pad_with_unknown_pads_gets_fresh_dims) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2, 3));
  mx_value_id pads = input("pads", MX_INT64, SHAPE(4));
  mx_value_id y = op("Pad", (mx_value_id[]){x, pads}, 2, NULL, 0);
  infer_ok();
  mx_shape s = shape_of(y);
  cr_assert_eq(s.rank, 2);
  cr_assert(is_expr(s.dims[0]) && is_expr(s.dims[1]) && s.dims[0] != s.dims[1]);
}

Test(resample_infer, pad_negative_pads_crop) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(5, 6));
  mx_value_id y = op("Pad", (mx_value_id[]){x, CONST_1D("pads", -1, 0, -2, 1)}, 2, NULL, 0);
  infer_ok();
  expect_shape(y, MX_FLOAT32, SHAPE(2, 7));
}

Test(resample_infer, pad_of_the_wrong_length_fails) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2, 3, 4));
  op("Pad", (mx_value_id[]){x, CONST_1D("pads", 1, 1, 1, 1)}, 2, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "pads has 4 values, expected 6");
}

Test(resample_infer, pad_axis_out_of_range_fails) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2, 3));
  op("Pad", (mx_value_id[]){x, CONST_1D("pads", 1, 1), MX_NO_VALUE, CONST_1D("axes", 2)}, 4, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "axis 2 is out of range");
}

Test(resample_infer, pad_unknown_mode_fails_naming_the_attribute) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2, 3));
  mx_attr mode = mx_attr_string("mode", "mirror");
  op("Pad", (mx_value_id[]){x, CONST_1D("pads", 1, 1, 1, 1)}, 2, &mode, 1);
  infer_fails(MX_ERR_INVALID_GRAPH, "attribute mode: unknown value 'mirror'");
}

Test(resample_infer, pad_cropping_below_zero_fails) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2));
  op("Pad", (mx_value_id[]){x, CONST_1D("pads", -2, -1)}, 2, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "negative");
}

Test(resample_infer, pad_before_opset_11_reads_attributes) {
  cr_assert_eq(mx_graph_set_opset(G, "", 10), MX_OK);
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("b"), 4));
  mx_attr attrs[] = {mx_attr_ints("pads", (int64_t[]){0, 1, 0, 3}, 4), mx_attr_float("value", 1.5f)};
  mx_value_id y = op("Pad", &x, 1, attrs, 2);
  infer_ok();
  expect_shape_str(y, MX_FLOAT32, "[b, 8]");
}

/* --- CenterCropPad ---------------------------------------------------------------------------- */

Test(resample_infer, center_crop_pad_takes_the_shape_values) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("h"), S("w"), 3));
  mx_attr axes = mx_attr_ints("axes", (int64_t[]){0, -2}, 2);
  mx_value_id y = op("CenterCropPad", (mx_value_id[]){x, CONST_1D("s", 10, 12)}, 2, &axes, 1);
  infer_ok();
  expect_shape(y, MX_FLOAT32, SHAPE(10, 12, 3));
}

Test(resample_infer, center_crop_pad_shape_length_must_match) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(4, 4, 3));
  op("CenterCropPad", (mx_value_id[]){x, CONST_1D("s", 2, 2)}, 2, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "shape has 2 values, expected 3");
}

/* --- Resize / Upsample ------------------------------------------------------------------------ */

Test(resample_infer, resize_by_constant_scales_keeps_symbols) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("n"), 3, S("h"), 10));
  static const float sc[] = {1.0f, 1.0f, 2.0f, 0.5f};
  mx_value_id y = op("Resize", (mx_value_id[]){x, MX_NO_VALUE, const_f32("scales", 4, sc)}, 3, NULL, 0);
  infer_ok();
  expect_shape_str(y, MX_FLOAT32, "[n, 3, 2*h, 5]");
}

Test(resample_infer, resize_floor_of_fractional_scales) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(1, 1, 4, 4));
  static const float sc[] = {1.0f, 1.0f, 0.6f, 0.8f};
  mx_attr mode = mx_attr_string("mode", "linear");
  mx_value_id y = op("Resize", (mx_value_id[]){x, MX_NO_VALUE, const_f32("scales", 4, sc)}, 3, &mode, 1);
  infer_ok();
  expect_shape(y, MX_FLOAT32, SHAPE(1, 1, 2, 3));
}

Test(resample_infer, resize_by_sizes_with_axes) {
  mx_value_id x = input("x", MX_UINT8, SHAPE(S("n"), S("h"), S("w"), 3));
  mx_attr axes = mx_attr_ints("axes", (int64_t[]){2, 1}, 2);
  static mx_dim sv[2];
  sv[0] = S("W");
  sv[1] = C(224);
  mx_value_id sizes = input_sv("sizes", MX_INT64, 2, sv);
  mx_value_id y = op("Resize", (mx_value_id[]){x, MX_NO_VALUE, MX_NO_VALUE, sizes}, 4, &axes, 1);
  infer_ok();
  expect_shape_str(y, MX_UINT8, "[n, 224, W, 3]");
}

Test(resample_infer, resize_keep_aspect_ratio_not_larger) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(1, 1, 2, 4));
  mx_attr a[] = {mx_attr_string("keep_aspect_ratio_policy", "not_larger"),
                 mx_attr_ints("axes", (int64_t[]){2, 3}, 2)};
  mx_value_id y =
      op("Resize", (mx_value_id[]){x, MX_NO_VALUE, MX_NO_VALUE, CONST_1D("sizes", 7, 8)}, 4, a, 2);
  infer_ok();
  expect_shape(y, MX_FLOAT32, SHAPE(1, 1, 4, 8));
}

Test(resample_infer, resize_scales_from_a_graph_input_get_fresh_dims) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(1, 3, 8, 8));
  mx_value_id sc = input("scales", MX_FLOAT32, SHAPE(4));
  mx_value_id y = op("Resize", (mx_value_id[]){x, MX_NO_VALUE, sc}, 3, NULL, 0);
  infer_ok();
  mx_shape s = shape_of(y);
  cr_assert_eq(s.rank, 4);
  for (int32_t k = 0; k < 4; k++) cr_assert(is_expr(s.dims[k]), "dim %d", (int)k);
}

Test(resample_infer, resize_unknown_mode_fails_naming_the_attribute) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(1, 1, 4, 4));
  static const float sc[] = {1.0f, 1.0f, 2.0f, 2.0f};
  mx_attr mode = mx_attr_string("mode", "bilinear");
  op("Resize", (mx_value_id[]){x, MX_NO_VALUE, const_f32("scales", 4, sc)}, 3, &mode, 1);
  infer_fails(MX_ERR_INVALID_GRAPH, "attribute mode: unknown value 'bilinear'");
}

Test(resample_infer, resize_unknown_coordinate_mode_fails) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(1, 1, 4, 4));
  static const float sc[] = {1.0f, 1.0f, 2.0f, 2.0f};
  mx_attr c = mx_attr_string("coordinate_transformation_mode", "corners");
  op("Resize", (mx_value_id[]){x, MX_NO_VALUE, const_f32("scales", 4, sc)}, 3, &c, 1);
  infer_fails(MX_ERR_INVALID_GRAPH, "coordinate_transformation_mode");
}

Test(resample_infer, resize_scales_of_the_wrong_length_fail) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(1, 1, 4, 4));
  static const float sc[] = {2.0f, 2.0f};
  op("Resize", (mx_value_id[]){x, MX_NO_VALUE, const_f32("scales", 2, sc)}, 3, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "scales has 2 values, expected 4");
}

Test(resample_infer, resize_axis_out_of_range_fails) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(1, 1, 4, 4));
  mx_attr axes = mx_attr_ints("axes", (int64_t[]){4}, 1);
  op("Resize", (mx_value_id[]){x, MX_NO_VALUE, MX_NO_VALUE, CONST_1D("sizes", 8)}, 4, &axes, 1);
  infer_fails(MX_ERR_SHAPE, "axis 4 is out of range");
}

Test(resample_infer, upsample_opset_7_scales_attribute) {
  cr_assert_eq(mx_graph_set_opset(G, "", 7), MX_OK);
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("n"), 2, S("h"), 3));
  mx_attr a = mx_attr_floats("scales", (float[]){1.0f, 1.0f, 2.0f, 3.0f}, 4);
  mx_value_id y = op("Upsample", &x, 1, &a, 1);
  infer_ok();
  expect_shape_str(y, MX_FLOAT32, "[n, 2, 2*h, 9]");
}

/* --- DepthToSpace / SpaceToDepth -------------------------------------------------------------- */

Test(resample_infer, depth_to_space_keeps_symbols) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("n"), 12, S("h"), S("w")));
  mx_attr a[] = {mx_attr_int("blocksize", 2), mx_attr_string("mode", "CRD")};
  mx_value_id y = op("DepthToSpace", &x, 1, a, 2);
  infer_ok();
  expect_shape_str(y, MX_FLOAT32, "[n, 3, 2*h, 2*w]");
}

Test(resample_infer, depth_to_space_symbolic_channels_divide) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(1, S("c"), 4, 4));
  mx_attr a = mx_attr_int("blocksize", 3);
  mx_value_id y = op("DepthToSpace", &x, 1, &a, 1);
  infer_ok();
  mx_shape s = shape_of(y);
  cr_assert(is_expr(s.dims[1]));
  cr_assert_eq(s.dims[2], 12);
}

Test(resample_infer, depth_to_space_channels_not_multiple_fails) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(1, 6, 4, 4));
  mx_attr a = mx_attr_int("blocksize", 2);
  op("DepthToSpace", &x, 1, &a, 1);
  infer_fails(MX_ERR_SHAPE, "attribute blocksize 2: channels 6 is not a multiple of 4");
}

Test(resample_infer, depth_to_space_unknown_mode_fails) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(1, 8, 4, 4));
  mx_attr a[] = {mx_attr_int("blocksize", 2), mx_attr_string("mode", "XYZ")};
  op("DepthToSpace", &x, 1, a, 2);
  infer_fails(MX_ERR_INVALID_GRAPH, "attribute mode");
}

Test(resample_infer, space_to_depth_blocksize_not_dividing_height_fails) {
  mx_value_id z = input("z", MX_FLOAT32, SHAPE(1, 1, 5, 4));
  mx_attr a = mx_attr_int("blocksize", 2);
  op("SpaceToDepth", &z, 1, &a, 1);
  infer_fails(MX_ERR_SHAPE, "height 5 is not a multiple of 2");
}

Test(resample_infer, space_to_depth_keeps_symbols) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("n"), S("c"), 8, 6));
  mx_attr a = mx_attr_int("blocksize", 2);
  mx_value_id y = op("SpaceToDepth", &x, 1, &a, 1);
  infer_ok();
  expect_shape_str(y, MX_FLOAT32, "[n, 4*c, 4, 3]");
}

/* --- GridSample / AffineGrid / RoiAlign / NonMaxSuppression ----------------------------------- */

Test(resample_infer, grid_sample_takes_the_grid_dims) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("n"), 3, 5, 5, 5));
  mx_value_id g = input("g", MX_FLOAT32, SHAPE(S("n"), 2, 4, 6, 3));
  mx_attr mode = mx_attr_string("mode", "cubic");
  mx_value_id y = op("GridSample", (mx_value_id[]){x, g}, 2, &mode, 1);
  infer_ok();
  expect_shape_str(y, MX_FLOAT32, "[n, 3, 2, 4, 6]");
}

Test(resample_infer, grid_sample_bad_grid_and_mode_fail) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(1, 3, 5, 5));
  mx_value_id g = input("g", MX_FLOAT32, SHAPE(1, 4, 4, 3));
  op("GridSample", (mx_value_id[]){x, g}, 2, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "grid's last dim is 3, expected 2");
}

Test(resample_infer, grid_sample_unknown_padding_mode_fails) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(1, 3, 5, 5));
  mx_value_id g = input("g", MX_FLOAT32, SHAPE(1, 4, 4, 2));
  mx_attr pm = mx_attr_string("padding_mode", "wrap");
  op("GridSample", (mx_value_id[]){x, g}, 2, &pm, 1);
  infer_fails(MX_ERR_INVALID_GRAPH, "attribute padding_mode");
}

Test(resample_infer, affine_grid_from_size_values) {
  mx_value_id theta = input("theta", MX_FLOAT32, SHAPE(S("n"), 2, 3));
  static mx_dim sv[4];
  sv[0] = S("n");
  sv[1] = C(3);
  sv[2] = S("h");
  sv[3] = C(7);
  mx_value_id y = op("AffineGrid", (mx_value_id[]){theta, input_sv("size", MX_INT64, 4, sv)}, 2, NULL, 0);
  infer_ok();
  expect_shape_str(y, MX_FLOAT32, "[n, h, 7, 2]");
}

Test(resample_infer, roi_align_output) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2, 8, 16, 16));
  mx_value_id rois = input("rois", MX_FLOAT32, SHAPE(S("r"), 4));
  mx_value_id bi = input("bi", MX_INT64, SHAPE(S("r")));
  mx_attr a[] = {mx_attr_int("output_height", 3), mx_attr_int("output_width", 5)};
  mx_value_id y = op("RoiAlign", (mx_value_id[]){x, rois, bi}, 3, a, 2);
  infer_ok();
  expect_shape_str(y, MX_FLOAT32, "[r, 8, 3, 5]");
}

Test(resample_infer, roi_align_unknown_mode_fails) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(2, 8, 16, 16));
  mx_value_id rois = input("rois", MX_FLOAT32, SHAPE(3, 4));
  mx_value_id bi = input("bi", MX_INT64, SHAPE(3));
  mx_attr a = mx_attr_string("mode", "median");
  op("RoiAlign", (mx_value_id[]){x, rois, bi}, 3, &a, 1);
  infer_fails(MX_ERR_INVALID_GRAPH, "attribute mode");
}

Test(resample_infer, nms_is_data_dependent_with_a_bound) {
  mx_value_id boxes = input("boxes", MX_FLOAT32, SHAPE(2, 6, 4));
  mx_value_id scores = input("scores", MX_FLOAT32, SHAPE(2, 3, 6));
  mx_value_id y = op("NonMaxSuppression", (mx_value_id[]){boxes, scores}, 2, NULL, 0);
  infer_ok();
  mx_shape s = shape_of(y);
  cr_assert_eq(mx_graph_value_dtype(G, y), MX_INT64);
  cr_assert_eq(s.rank, 2);
  cr_assert(is_expr(s.dims[0]));
  cr_assert_eq(s.dims[1], 3);
  const mx_op_def *def = mx__op_find("", "NonMaxSuppression");
  cr_assert(def->flags & MX_OP_DATA_DEPENDENT);
  cr_assert_not_null(def->upper_bound);
}

/* --- tensor group ----------------------------------------------------------------------------- */

static void setup_tensor(void) { mxt_ops_setup("tensor"); }

TestSuite(tensor_infer, .init = setup_tensor, .fini = mxt_ops_teardown);

Test(tensor_infer, onehot_inserts_depth) {
  mx_value_id ind = input("ind", MX_INT64, SHAPE(S("b"), 5));
  mx_value_id vals = input("vals", MX_FLOAT32, SHAPE(2));
  mx_attr axis = mx_attr_int("axis", 1);
  mx_value_id y = op("OneHot", (mx_value_id[]){ind, const_scalar("d", MX_FLOAT32, 10), vals}, 3, &axis, 1);
  mx_value_id z = op("OneHot", (mx_value_id[]){ind, input("dd", MX_INT64, SCALAR), vals}, 3, NULL, 0);
  infer_ok();
  expect_shape_str(y, MX_FLOAT32, "[b, 10, 5]");
  mx_shape s = shape_of(z);
  cr_assert_eq(s.rank, 3);
  cr_assert(is_expr(s.dims[2]));
}

Test(tensor_infer, onehot_axis_out_of_range_fails) {
  mx_value_id ind = input("ind", MX_INT64, SHAPE(5));
  mx_attr axis = mx_attr_int("axis", 2);
  op("OneHot", (mx_value_id[]){ind, const_scalar("d", MX_INT64, 3), input("v", MX_FLOAT32, SHAPE(2))}, 3,
     &axis, 1);
  infer_fails(MX_ERR_SHAPE, "attribute axis: 2 is out of range");
}

Test(tensor_infer, compress_counts_a_constant_condition) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("b"), 3));
  uint8_t c[3] = {1, 0, 1};
  mx_tensor t = {.dtype = MX_BOOL, .rank = 1, .dims = {3}, .data = c};
  mx_value_id cond;
  cr_assert_eq(mx_graph_add_constant(G, "cond", &t, &cond), MX_OK);
  mx_attr axis = mx_attr_int("axis", 1);
  mx_value_id y = op("Compress", (mx_value_id[]){x, cond}, 2, &axis, 1);
  mx_value_id z = op("Compress", (mx_value_id[]){x, input("c2", MX_BOOL, SHAPE(4))}, 2, NULL, 0);
  infer_ok();
  expect_shape_str(y, MX_FLOAT32, "[b, 2]");
  mx_shape s = shape_of(z);
  cr_assert_eq(s.rank, 1);
  cr_assert(is_expr(s.dims[0]));
}

Test(tensor_infer, unique_shares_one_symbol) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(4, S("w")));
  mx_attr axis = mx_attr_int("axis", 0);
  mx_value_id outs[4];
  op_multi("Unique", &x, 1, &axis, 1, outs, 4);
  infer_ok();
  mx_shape y = shape_of(outs[0]), ind = shape_of(outs[1]), inv = shape_of(outs[2]), cnt = shape_of(outs[3]);
  cr_assert(is_expr(y.dims[0]));
  cr_assert_eq(y.dims[1], S("w"));
  cr_assert_eq(ind.dims[0], y.dims[0]);
  cr_assert_eq(cnt.dims[0], y.dims[0]);
  cr_assert_eq(inv.dims[0], 4);
  cr_assert_eq(mx_graph_value_dtype(G, outs[1]), MX_INT64);
  cr_assert(mx__op_find("", "Unique")->flags & MX_OP_DATA_DEPENDENT);
  cr_assert(mx__op_find("", "Compress")->flags & MX_OP_DATA_DEPENDENT);
}

Test(tensor_infer, scatter_elements_checks) {
  mx_value_id d = input("d", MX_FLOAT32, SHAPE(S("n"), 4));
  mx_value_id i = input("i", MX_INT64, SHAPE(2, 4));
  mx_value_id u = input("u", MX_FLOAT32, SHAPE(2, 4));
  mx_attr a[] = {mx_attr_int("axis", -2), mx_attr_string("reduction", "max")};
  mx_value_id y = op("ScatterElements", (mx_value_id[]){d, i, u}, 3, a, 2);
  infer_ok();
  expect_shape_str(y, MX_FLOAT32, "[n, 4]");
}

Test(tensor_infer, scatter_elements_unknown_reduction_fails) {
  mx_value_id d = input("d", MX_FLOAT32, SHAPE(3, 4));
  mx_value_id i = input("i", MX_INT64, SHAPE(2, 4));
  mx_attr a = mx_attr_string("reduction", "avg");
  op("ScatterElements", (mx_value_id[]){d, i, input("u", MX_FLOAT32, SHAPE(2, 4))}, 3, &a, 1);
  infer_fails(MX_ERR_INVALID_GRAPH, "attribute reduction");
}

Test(tensor_infer, scatter_elements_axis_out_of_range_fails) {
  mx_value_id d = input("d", MX_FLOAT32, SHAPE(3, 4));
  mx_value_id i = input("i", MX_INT64, SHAPE(2, 4));
  mx_attr a = mx_attr_int("axis", 2);
  op("ScatterElements", (mx_value_id[]){d, i, input("u", MX_FLOAT32, SHAPE(2, 4))}, 3, &a, 1);
  infer_fails(MX_ERR_SHAPE, "attribute axis: 2 is out of range");
}

Test(tensor_infer, eyelike_dtype_and_rank) {
  mx_value_id x = input("x", MX_INT32, SHAPE(S("n"), 5));
  mx_attr dt = mx_attr_int("dtype", MX_FLOAT64);
  mx_value_id y = op("EyeLike", &x, 1, &dt, 1);
  infer_ok();
  expect_shape_str(y, MX_FLOAT64, "[n, 5]");
}

Test(tensor_infer, eyelike_needs_2d) {
  mx_value_id x = input("x", MX_INT32, SHAPE(5));
  op("EyeLike", &x, 1, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "2-D");
}

Test(tensor_infer, reverse_sequence_axes_must_differ) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(4, 3));
  mx_attr a[] = {mx_attr_int("batch_axis", 0), mx_attr_int("time_axis", 0)};
  op("ReverseSequence", (mx_value_id[]){x, input("l", MX_INT64, SHAPE(4))}, 2, a, 2);
  infer_fails(MX_ERR_INVALID_GRAPH, "batch_axis");
}

Test(tensor_infer, tensor_scatter_keeps_the_cache_shape) {
  mx_value_id cache = input("cache", MX_FLOAT16, SHAPE(S("b"), 8, 16, 64));
  mx_value_id upd = input("upd", MX_FLOAT16, SHAPE(S("b"), 8, 1, 64));
  mx_attr mode = mx_attr_string("mode", "circular");
  mx_value_id y =
      op("TensorScatter", (mx_value_id[]){cache, upd, input("wi", MX_INT64, SHAPE(S("b")))}, 3, &mode, 1);
  infer_ok();
  expect_shape_str(y, MX_FLOAT16, "[b, 8, 16, 64]");
}

Test(tensor_infer, tensor_scatter_update_longer_than_cache_fails) {
  mx_value_id cache = input("cache", MX_FLOAT32, SHAPE(1, 4, 8));
  mx_value_id upd = input("upd", MX_FLOAT32, SHAPE(1, 5, 8));
  op("TensorScatter", (mx_value_id[]){cache, upd}, 2, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "exceeds");
}
