/* Inference tests of the quantization group (graph/ops/quant.c) and of CastLike / BitCast
 * (graph/ops/elementwise_misc.c): output dtypes from the zero point, output_dtype or scale,
 * symbolic shapes kept, scale shapes per tensor / per axis / blocked checked against the input,
 * the integer matrix products' broadcast shapes, and the refused inputs and attributes. */
#include <criterion/criterion.h>

#include "graph/ir.h"
#include "graph/ops/op.h"
#include "graph/ops/ops_support.h"
#include "mixrt/graph.h"

static void setup(void) { mxt_ops_setup("quant"); }

TestSuite(quant_infer, .init = setup, .fini = mxt_ops_teardown);

/* --- QuantizeLinear ---------------------------------------------------------------------------- */

Test(quant_infer, quantize_defaults_to_uint8_and_keeps_the_shape) {
  mx_value_id in[2] = {input("x", MX_FLOAT32, SHAPE(S("n"), 4)), input("s", MX_FLOAT32, SHAPE())};
  mx_value_id y = op("QuantizeLinear", in, 2, NULL, 0);
  infer_ok();
  expect_shape(y, MX_UINT8, SHAPE(S("n"), 4));
}

Test(quant_infer, quantize_output_follows_the_zero_point) {
  static const mx_dtype zts[] = {MX_INT8, MX_UINT16, MX_INT4, MX_UINT2, MX_FLOAT8E4M3FN, MX_FLOAT4E2M1};
  mx_value_id x = input("x", MX_FLOAT16, SHAPE(2, 3)), s = input("s", MX_FLOAT16, SHAPE());
  mx_value_id y[6];
  for (int i = 0; i < 6; i++) {
    char name[8] = {'z', (char)('0' + i), 0};
    mx_value_id in[3] = {x, s, input(name, zts[i], SHAPE())};
    y[i] = op("QuantizeLinear", in, 3, NULL, 0);
  }
  infer_ok();
  for (int i = 0; i < 6; i++) expect_shape(y[i], zts[i], SHAPE(2, 3));
}

Test(quant_infer, quantize_output_dtype_attribute) {
  mx_value_id in[2] = {input("x", MX_FLOAT32, SHAPE(8)), input("s", MX_FLOAT32, SHAPE())};
  mx_attr a = mx_attr_int("output_dtype", MX_INT16);
  mx_value_id y = op("QuantizeLinear", in, 2, &a, 1);
  infer_ok();
  expect_shape(y, MX_INT16, SHAPE(8));
}

Test(quant_infer, quantize_output_dtype_must_match_the_zero_point) {
  mx_value_id in[3] = {input("x", MX_FLOAT32, SHAPE(8)), input("s", MX_FLOAT32, SHAPE()),
                       input("z", MX_UINT8, SHAPE())};
  mx_attr a = mx_attr_int("output_dtype", MX_INT8);
  op("QuantizeLinear", in, 3, &a, 1);
  infer_fails(MX_ERR_DTYPE, "output_dtype");
}

Test(quant_infer, quantize_refuses_a_float_output_dtype) {
  mx_value_id in[2] = {input("x", MX_FLOAT32, SHAPE(8)), input("s", MX_FLOAT32, SHAPE())};
  mx_attr a = mx_attr_int("output_dtype", MX_FLOAT32);
  op("QuantizeLinear", in, 2, &a, 1);
  infer_fails(MX_ERR_DTYPE, "cannot produce");
}

Test(quant_infer, quantize_refuses_an_integer_scale) {
  mx_value_id in[2] = {input("x", MX_FLOAT32, SHAPE(8)), input("s", MX_INT32, SHAPE())};
  op("QuantizeLinear", in, 2, NULL, 0);
  infer_fails(MX_ERR_DTYPE, "input 1");
}

Test(quant_infer, per_axis_scale_matches_the_axis_dim) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("b"), 3, 4));
  mx_value_id ok[2] = {x, input("s3", MX_FLOAT32, SHAPE(3))};
  mx_value_id y = op("QuantizeLinear", ok, 2, NULL, 0); /* axis 1 by default */
  infer_ok();
  expect_shape(y, MX_UINT8, SHAPE(S("b"), 3, 4));
  mx_value_id bad[2] = {x, input("s4", MX_FLOAT32, SHAPE(4))};
  op("QuantizeLinear", bad, 2, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "per-axis");
}

Test(quant_infer, axis_out_of_range_is_refused) {
  mx_value_id in[2] = {input("x", MX_FLOAT32, SHAPE(3, 4)), input("s", MX_FLOAT32, SHAPE(4))};
  mx_attr a = mx_attr_int("axis", 2);
  op("QuantizeLinear", in, 2, &a, 1);
  infer_fails(MX_ERR_SHAPE, "axis");
}

Test(quant_infer, blocked_scale_shape_is_checked) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(3, 8));
  mx_attr a[2] = {mx_attr_int("axis", 1), mx_attr_int("block_size", 3)};
  mx_value_id ok[2] = {x, input("s", MX_FLOAT32, SHAPE(3, 3))}; /* ceil(8 / 3) = 3 blocks */
  mx_value_id y = op("DequantizeLinear", (mx_value_id[]){input("q", MX_INT4, SHAPE(3, 8)), ok[1]}, 2, a, 2);
  mx_value_id z = op("QuantizeLinear", ok, 2, a, 2);
  infer_ok();
  expect_shape(y, MX_FLOAT32, SHAPE(3, 8));
  expect_shape(z, MX_UINT8, SHAPE(3, 8));
  mx_value_id bad[2] = {x, input("s2", MX_FLOAT32, SHAPE(3, 2))};
  op("QuantizeLinear", bad, 2, a, 2);
  infer_fails(MX_ERR_SHAPE, "blocks");
}

Test(quant_infer, negative_block_size_is_refused) {
  mx_value_id in[2] = {input("x", MX_FLOAT32, SHAPE(8)), input("s", MX_FLOAT32, SHAPE())};
  mx_attr a = mx_attr_int("block_size", -2);
  op("QuantizeLinear", in, 2, &a, 1);
  infer_fails(MX_ERR_INVALID_GRAPH, "block_size");
}

Test(quant_infer, zero_point_shape_must_match_the_scale) {
  mx_value_id in[3] = {input("x", MX_FLOAT32, SHAPE(2, 3)), input("s", MX_FLOAT32, SHAPE(3)),
                       input("z", MX_UINT8, SHAPE(2))};
  op("QuantizeLinear", in, 3, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "zero point");
}

/* --- DequantizeLinear -------------------------------------------------------------------------- */

Test(quant_infer, dequantize_output_is_the_scale_dtype) {
  mx_value_id in[3] = {input("x", MX_FLOAT8E4M3FN, SHAPE(S("n"))), input("s", MX_FLOAT16, SHAPE()),
                       input("z", MX_FLOAT8E4M3FN, SHAPE(1))};
  mx_value_id y = op("DequantizeLinear", in, 3, NULL, 0);
  mx_attr a = mx_attr_int("output_dtype", MX_FLOAT32);
  mx_value_id y32 = op("DequantizeLinear", in, 3, &a, 1);
  infer_ok();
  expect_shape(y, MX_FLOAT16, SHAPE(S("n")));
  expect_shape(y32, MX_FLOAT32, SHAPE(S("n")));
}

Test(quant_infer, dequantize_zero_point_has_the_input_dtype) {
  mx_value_id in[3] = {input("x", MX_UINT8, SHAPE(4)), input("s", MX_FLOAT32, SHAPE()),
                       input("z", MX_INT8, SHAPE())};
  op("DequantizeLinear", in, 3, NULL, 0);
  infer_fails(MX_ERR_DTYPE, "zero point");
}

Test(quant_infer, dequantize_refuses_a_float_input) {
  mx_value_id in[2] = {input("x", MX_FLOAT32, SHAPE(4)), input("s", MX_FLOAT32, SHAPE())};
  op("DequantizeLinear", in, 2, NULL, 0);
  infer_fails(MX_ERR_DTYPE, "input 0");
}

/* --- DynamicQuantizeLinear, MatMulInteger, QLinearMatMul --------------------------------------- */

Test(quant_infer, dynamic_quantize_outputs) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("n"), 5));
  mx_value_id outs[3];
  op_multi("DynamicQuantizeLinear", &x, 1, NULL, 0, outs, 3);
  infer_ok();
  expect_shape(outs[0], MX_UINT8, SHAPE(S("n"), 5));
  expect_shape(outs[1], MX_FLOAT32, SHAPE());
  expect_shape(outs[2], MX_UINT8, SHAPE());
}

Test(quant_infer, matmulinteger_broadcasts_batches_to_int32) {
  mx_value_id in[4] = {input("a", MX_UINT8, SHAPE(S("b"), 1, 3, 4)), input("b", MX_INT8, SHAPE(5, 4, 2)),
                       input("az", MX_UINT8, SHAPE(3)), input("bz", MX_INT8, SHAPE(2))};
  mx_value_id y = op("MatMulInteger", in, 4, NULL, 0);
  infer_ok();
  expect_shape(y, MX_INT32, SHAPE(S("b"), 5, 3, 2));
}

Test(quant_infer, matmulinteger_checks_the_contraction_and_zero_points) {
  mx_value_id bad_k[2] = {input("a", MX_UINT8, SHAPE(3, 4)), input("b", MX_UINT8, SHAPE(5, 2))};
  op("MatMulInteger", bad_k, 2, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "contraction");
}

Test(quant_infer, matmulinteger_zero_point_length) {
  mx_value_id in[3] = {input("a", MX_UINT8, SHAPE(3, 4)), input("b", MX_UINT8, SHAPE(4, 2)),
                       input("az", MX_UINT8, SHAPE(4))};
  op("MatMulInteger", in, 3, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "per-row");
}

Test(quant_infer, qlinearmatmul_output_is_the_y_zero_point_dtype) {
  mx_value_id in[8] = {input("a", MX_INT8, SHAPE(2, S("m"), 4)),
                       input("as", MX_FLOAT16, SHAPE()),
                       input("az", MX_INT8, SHAPE()),
                       input("b", MX_INT8, SHAPE(4, 3)),
                       input("bs", MX_FLOAT16, SHAPE()),
                       input("bz", MX_INT8, SHAPE()),
                       input("ys", MX_FLOAT16, SHAPE()),
                       input("yz", MX_INT8, SHAPE())};
  mx_value_id y = op("QLinearMatMul", in, 8, NULL, 0);
  infer_ok();
  expect_shape(y, MX_INT8, SHAPE(2, S("m"), 3));
}

Test(quant_infer, qlinearmatmul_refuses_a_vector_y_scale) {
  mx_value_id in[8] = {input("a", MX_UINT8, SHAPE(2, 4)), input("as", MX_FLOAT32, SHAPE()),
                       input("az", MX_UINT8, SHAPE()),    input("b", MX_UINT8, SHAPE(4, 3)),
                       input("bs", MX_FLOAT32, SHAPE()),  input("bz", MX_UINT8, SHAPE()),
                       input("ys", MX_FLOAT32, SHAPE(3)), input("yz", MX_UINT8, SHAPE())};
  op("QLinearMatMul", in, 8, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "input 6");
}

/* --- CastLike and BitCast ---------------------------------------------------------------------- */

Test(quant_infer, castlike_takes_the_dtype_of_input_1) {
  mx_value_id in[2] = {input("x", MX_FLOAT16, SHAPE(S("n"), 2)), input("t", MX_FLOAT8E5M2, SHAPE(1))};
  mx_value_id y = op("CastLike", in, 2, NULL, 0);
  infer_ok();
  expect_shape(y, MX_FLOAT8E5M2, SHAPE(S("n"), 2));
}

Test(quant_infer, bitcast_keeps_the_shape_and_needs_equal_widths) {
  mx_value_id x = input("x", MX_FLOAT32, SHAPE(S("n")));
  mx_attr to = mx_attr_int("to", MX_UINT32);
  mx_value_id y = op("BitCast", &x, 1, &to, 1);
  infer_ok();
  expect_shape(y, MX_UINT32, SHAPE(S("n")));
  mx_attr to16 = mx_attr_int("to", MX_INT16);
  op("BitCast", &x, 1, &to16, 1);
  infer_fails(MX_ERR_DTYPE, "widths");
}
