/* Tests of the narrow element types and the quantization kernels: float8/float4 encoding
 * (round half to even, saturate and no-saturate overflow, the uz types' zero and NaN,
 * float8e8m0 rounding modes), Cast into and out of them and into int4, BitCast, the sub-byte
 * packing of the ONNX importer, and QuantizeLinear / DequantizeLinear (ties to even,
 * saturation, per-axis and blocked scales), DynamicQuantizeLinear, MatMulInteger and
 * QLinearMatMul against hand-computed values. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/float8.h"
#include "graph/onnx/onnx_impl.h"
#include "graph/ops/elementwise_params.h"
#include "graph/ops/quant_params.h"
#include "kernels/kernel.h"
#include "kernels/kernels_support.h"

/* --- float8 / float4 conversions ---------------------------------------------------------------- */

static uint8_t enc(mx_dtype dt, double v, bool sat) { return mx__f8_encode(mx__f8_format_of(dt), v, sat); }
static float dec(mx_dtype dt, uint8_t c) { return mx__narrow_to_f32(dt, c); }

Test(narrow_types, e4m3fn_values_and_rounding) {
  cr_expect_eq(enc(MX_FLOAT8E4M3FN, 1.0, true), 0x38);
  cr_expect_eq(enc(MX_FLOAT8E4M3FN, 448.0, true), 0x7E);
  cr_expect_eq(enc(MX_FLOAT8E4M3FN, -448.0, true), 0xFE);
  cr_expect_eq(enc(MX_FLOAT8E4M3FN, 1.0625, true), 0x38);  /* tie between 1 and 1.125: even */
  cr_expect_eq(enc(MX_FLOAT8E4M3FN, 1.1875, true), 0x3A);  /* tie between 1.125 and 1.25: even */
  cr_expect_eq(enc(MX_FLOAT8E4M3FN, 0x1p-9, true), 0x01);  /* smallest subnormal */
  cr_expect_eq(enc(MX_FLOAT8E4M3FN, 0x1p-10, true), 0x00); /* half of it ties to zero */
  cr_expect_eq(enc(MX_FLOAT8E4M3FN, 464.0, false), 0x7E);  /* within half a step of max */
  cr_expect(isnan(dec(MX_FLOAT8E4M3FN, enc(MX_FLOAT8E4M3FN, 500.0, false))));
  cr_expect_eq(enc(MX_FLOAT8E4M3FN, 500.0, true), 0x7E);
  cr_expect_eq(enc(MX_FLOAT8E4M3FN, INFINITY, true), 0x7E);
  cr_expect_eq(enc(MX_FLOAT8E4M3FN, -1e300, true), 0xFE);
  cr_expect_eq(enc(MX_FLOAT8E4M3FN, 1e-300, true), 0x00);
  cr_expect(isnan(dec(MX_FLOAT8E4M3FN, enc(MX_FLOAT8E4M3FN, NAN, true))));
  cr_expect_float_eq(dec(MX_FLOAT8E4M3FN, 0x7E), 448.0f, 0.0f);
  cr_expect(signbit(dec(MX_FLOAT8E4M3FN, 0x80)));
}

Test(narrow_types, e5m2_keeps_infinities) {
  cr_expect_eq(enc(MX_FLOAT8E5M2, 57344.0, true), 0x7B);
  cr_expect_eq(enc(MX_FLOAT8E5M2, 1e6, true), 0x7B);
  cr_expect_eq(enc(MX_FLOAT8E5M2, 1e6, false), 0x7C);
  cr_expect_eq(enc(MX_FLOAT8E5M2, -INFINITY, false), 0xFC);
  cr_expect(isinf(dec(MX_FLOAT8E5M2, 0xFC)) && dec(MX_FLOAT8E5M2, 0xFC) < 0);
  cr_expect(isnan(dec(MX_FLOAT8E5M2, 0x7E)));
}

Test(narrow_types, uz_types_have_no_negative_zero) {
  cr_expect_eq(enc(MX_FLOAT8E4M3FNUZ, -0.0, true), 0x00);
  cr_expect_eq(enc(MX_FLOAT8E5M2FNUZ, -1e-30, true), 0x00);
  cr_expect_eq(enc(MX_FLOAT8E4M3FNUZ, 240.0, true), 0x7F);
  cr_expect_eq(enc(MX_FLOAT8E4M3FNUZ, 1000.0, false), 0x80);
  cr_expect(isnan(dec(MX_FLOAT8E5M2FNUZ, 0x80)));
}

Test(narrow_types, float4e2m1_table) {
  static const float values[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (uint8_t c = 0; c < 8; c++) {
    cr_expect_float_eq(dec(MX_FLOAT4E2M1, c), values[c], 0.0f);
    cr_expect_float_eq(dec(MX_FLOAT4E2M1, (uint8_t)(c | 8)), -values[c], 0.0f);
    cr_expect_eq(enc(MX_FLOAT4E2M1, values[c], true), c);
  }
  cr_expect_eq(enc(MX_FLOAT4E2M1, 5.0, true), 6); /* tie between 4 and 6: even code */
  cr_expect_eq(enc(MX_FLOAT4E2M1, 100.0, true), 7);
  cr_expect_eq(enc(MX_FLOAT4E2M1, -2.5, true), 0xC); /* tie between 2 and 3: even code (2) */
}

Test(narrow_types, e8m0_rounding_modes) {
  cr_expect_eq(mx__e8m0_encode(1.0f, MX__E8M0_UP, true), 127);
  cr_expect_eq(mx__e8m0_encode(3.0f, MX__E8M0_UP, true), 129);
  cr_expect_eq(mx__e8m0_encode(3.0f, MX__E8M0_DOWN, true), 128);
  cr_expect_eq(mx__e8m0_encode(3.0f, MX__E8M0_NEAREST, true), 129);
  cr_expect_eq(mx__e8m0_encode(2.5f, MX__E8M0_NEAREST, true), 128);
  cr_expect_eq(mx__e8m0_encode(NAN, MX__E8M0_UP, true), 0xFF);
  cr_expect_float_eq(mx__e8m0_decode(130), 8.0f, 0.0f);
}

Test(narrow_types, sub_byte_pack_and_unpack) {
  uint8_t buf[5] = {0x87, 0x1F, 0x0E, 0, 0}; /* int4 pairs, low nibble first */
  mx__onnx_unpack_sub_byte(buf, MX_INT4, 5);
  int8_t want[5] = {7, -8, -1, 1, -2};
  for (int i = 0; i < 5; i++) cr_expect_eq((int8_t)buf[i], want[i], "element %d", i);
  uint8_t packed[3];
  mx__onnx_pack_sub_byte(buf, MX_INT4, 5, packed);
  cr_expect_eq(packed[0], 0x87);
  cr_expect_eq(packed[1], 0x1F);
  cr_expect_eq(packed[2], 0x0E);
  uint8_t two[4] = {0xE4, 0, 0, 0}; /* uint2: 0, 1, 2, 3 */
  mx__onnx_unpack_sub_byte(two, MX_UINT2, 4);
  for (int i = 0; i < 4; i++) cr_expect_eq(two[i], i);
  cr_expect_eq(mx_dtype_packed_bytes(MX_UINT2, 5), 2);
  cr_expect_eq(mx_dtype_size(MX_INT4), 1);
  cr_expect_str_eq(mx_dtype_name(MX_FLOAT8E5M2FNUZ), "float8e5m2fnuz");
  cr_expect_eq(mx_dtype_from_name("uint64"), MX_UINT64);
}

/* --- Cast and BitCast ---------------------------------------------------------------------------- */

static mx_status cast(const char *op, const mx_cast_params *p, mx_dtype from, const void *x, mx_dtype to,
                      void *y, int64_t n) {
  mx_kernel_call *c = kc_new(1, 1, NULL);
  kc_set(c, 0, from, 1, DIMS(n), (void *)x);
  kc_set(c, 1, to, 1, DIMS(n), y);
  mx_status st = kc_run_with(op, c, p);
  free(c);
  return st;
}

Test(narrow_types, cast_float_to_float8_saturates_or_not) {
  float x[3] = {1000.0f, -1000.0f, 0.3f};
  uint8_t y[3];
  mx_cast_params sat = {MX_FLOAT8E4M3FN, 1, 0}, nosat = {MX_FLOAT8E4M3FN, 0, 0};
  cr_assert_eq(cast("Cast", &sat, MX_FLOAT32, x, MX_FLOAT8E4M3FN, y, 3), MX_OK);
  cr_expect_eq(y[0], 0x7E);
  cr_expect_eq(y[1], 0xFE);
  cr_expect_eq(y[2], enc(MX_FLOAT8E4M3FN, 0.3f, true));
  cr_assert_eq(cast("Cast", &nosat, MX_FLOAT32, x, MX_FLOAT8E4M3FN, y, 3), MX_OK);
  cr_expect(isnan(dec(MX_FLOAT8E4M3FN, y[0])) && isnan(dec(MX_FLOAT8E4M3FN, y[1])));
}

Test(narrow_types, cast_float_to_int4_keeps_the_low_bits) {
  float x[4] = {-9.0f, 7.9f, 8.0f, 15.0f};
  int8_t y[4];
  mx_cast_params p = {MX_INT4, 1, 0};
  cr_assert_eq(cast("Cast", &p, MX_FLOAT32, x, MX_INT4, y, 4), MX_OK);
  int8_t want[4] = {7, 7, -8, -1};
  for (int i = 0; i < 4; i++) cr_expect_eq(y[i], want[i], "element %d", i);
}

Test(narrow_types, cast_from_float8_and_uint64) {
  uint8_t x[2] = {0x38, 0xC0}; /* 1, -2 in e4m3fn */
  float y[2];
  mx_cast_params p = {MX_FLOAT32, 1, 0};
  cr_assert_eq(cast("Cast", &p, MX_FLOAT8E4M3FN, x, MX_FLOAT32, y, 2), MX_OK);
  cr_expect_float_eq(y[0], 1.0f, 0.0f);
  cr_expect_float_eq(y[1], -2.0f, 0.0f);
  uint64_t big[1] = {UINT64_C(18446744073709551615)};
  double d[1];
  mx_cast_params pd = {MX_FLOAT64, 1, 0};
  cr_assert_eq(cast("Cast", &pd, MX_UINT64, big, MX_FLOAT64, d, 1), MX_OK);
  cr_expect(d[0] > 1.8e19);
}

Test(narrow_types, bitcast_copies_bits) {
  float x[2] = {1.0f, -0.0f};
  uint32_t y[2];
  mx_cast_params p = {MX_UINT32, 0, 0};
  cr_assert_eq(cast("BitCast", &p, MX_FLOAT32, x, MX_UINT32, y, 2), MX_OK);
  cr_expect_eq(y[0], 0x3F800000u);
  cr_expect_eq(y[1], 0x80000000u);
  int8_t i4[2] = {-1, 7};
  uint8_t u4[2];
  mx_cast_params pu = {MX_UINT4, 0, 0};
  cr_assert_eq(cast("BitCast", &pu, MX_INT4, i4, MX_UINT4, u4, 2), MX_OK);
  cr_expect_eq(u4[0], 15);
  cr_expect_eq(u4[1], 7);
}

/* --- QuantizeLinear / DequantizeLinear ----------------------------------------------------------- */

Test(quant_kernels, quantize_rounds_half_to_even_and_saturates) {
  float x[6] = {0.5f, 1.5f, 2.5f, -2.5f, 1000.0f, -1000.0f};
  float s = 1.0f;
  uint8_t zp = 10, y[6];
  mx_quant_params p = {1, 0, 0, 1, 0};
  mx_kernel_call *c = kc_new(3, 1, NULL);
  kc_set(c, 0, MX_FLOAT32, 1, DIMS(6), x);
  kc_set(c, 1, MX_FLOAT32, 0, NULL, &s);
  kc_set(c, 2, MX_UINT8, 0, NULL, &zp);
  kc_set(c, 3, MX_UINT8, 1, DIMS(6), y);
  cr_assert_eq(kc_run_with("QuantizeLinear", c, &p), MX_OK);
  uint8_t want[6] = {10, 12, 12, 8, 255, 0};
  for (int i = 0; i < 6; i++) cr_expect_eq(y[i], want[i], "element %d", i);
  free(c);
}

Test(quant_kernels, quantize_per_axis_to_int4) {
  float x[6] = {1.0f, 2.0f, 3.0f, 100.0f, -100.0f, 4.0f}; /* [2, 3], axis 1 */
  float s[3] = {1.0f, 2.0f, 0.5f};
  int8_t y[6];
  mx_quant_params p = {1, 0, MX_INT4, 1, 0};
  mx_kernel_call *c = kc_new(2, 1, NULL);
  kc_set(c, 0, MX_FLOAT32, 2, DIMS(2, 3), x);
  kc_set(c, 1, MX_FLOAT32, 1, DIMS(3), s);
  kc_set(c, 2, MX_INT4, 2, DIMS(2, 3), y);
  cr_assert_eq(kc_run_with("QuantizeLinear", c, &p), MX_OK);
  int8_t want[6] = {1, 1, 6, 7, -8, 7};
  for (int i = 0; i < 6; i++) cr_expect_eq(y[i], want[i], "element %d", i);
  free(c);
}

Test(quant_kernels, dequantize_blocked) {
  int8_t x[6] = {1, 2, 3, 4, 5, 6}; /* [1, 6], blocks of 4 along axis 1: 2 blocks */
  float s[2] = {0.5f, 10.0f};
  int8_t zp[2] = {1, 5};
  float y[6];
  mx_quant_params p = {1, 4, 0, 1, 0};
  mx_kernel_call *c = kc_new(3, 1, NULL);
  kc_set(c, 0, MX_INT8, 2, DIMS(1, 6), x);
  kc_set(c, 1, MX_FLOAT32, 2, DIMS(1, 2), s);
  kc_set(c, 2, MX_INT8, 2, DIMS(1, 2), zp);
  kc_set(c, 3, MX_FLOAT32, 2, DIMS(1, 6), y);
  cr_assert_eq(kc_run_with("DequantizeLinear", c, &p), MX_OK);
  float want[6] = {0.0f, 0.5f, 1.0f, 1.5f, 0.0f, 10.0f};
  for (int i = 0; i < 6; i++) cr_expect_float_eq(y[i], want[i], 0.0f, "element %d", i);
  free(c);
}

Test(quant_kernels, dynamic_quantize) {
  float x[4] = {-1.0f, 0.0f, 1.0f, 2.0f};
  uint8_t y[4], zp;
  float s;
  mx_kernel_call *c = kc_new(1, 3, NULL);
  kc_set(c, 0, MX_FLOAT32, 1, DIMS(4), x);
  kc_set(c, 1, MX_UINT8, 1, DIMS(4), y);
  kc_set(c, 2, MX_FLOAT32, 0, NULL, &s);
  kc_set(c, 3, MX_UINT8, 0, NULL, &zp);
  cr_assert_eq(kc_run("DynamicQuantizeLinear", c), MX_OK);
  cr_expect_float_eq(s, 3.0f / 255.0f, 1e-9f);
  cr_expect_eq(zp, 85);
  uint8_t want[4] = {0, 85, 170, 255};
  for (int i = 0; i < 4; i++) cr_expect_eq(y[i], want[i], "element %d", i);
  free(c);
}

/* --- integer matrix products ---------------------------------------------------------------------- */

Test(quant_kernels, matmulinteger_with_zero_points_and_batches) {
  uint8_t a[2 * 2 * 3] = {1, 2, 3, 4, 5, 6, 0, 1, 0, 2, 0, 2}; /* [2, 2, 3] */
  int8_t b[3 * 2] = {1, -1, 2, 0, -3, 4};                      /* [3, 2] */
  uint8_t az = 1;
  int8_t bz[2] = {0, 1};
  int32_t y[2 * 2 * 2];
  mx_kernel_call *c = kc_new(4, 1, NULL);
  kc_set(c, 0, MX_UINT8, 3, DIMS(2, 2, 3), a);
  kc_set(c, 1, MX_INT8, 2, DIMS(3, 2), b);
  kc_set(c, 2, MX_UINT8, 0, NULL, &az);
  kc_set(c, 3, MX_INT8, 1, DIMS(2), bz);
  kc_set(c, 4, MX_INT32, 3, DIMS(2, 2, 2), y);
  cr_assert_eq(kc_run("MatMulInteger", c), MX_OK);
  /* (a - 1) @ (b - [0, 1]) with b - bz = [[1, -2], [2, -1], [-3, 3]] */
  int32_t want[8] = {-4, 5, -4, 5, 2, -1, -4, 2};
  for (int i = 0; i < 8; i++) cr_expect_eq(y[i], want[i], "element %d", i);
  free(c);
}

Test(quant_kernels, qlinearmatmul_scales_rounds_and_saturates) {
  uint8_t a[2 * 2] = {10, 20, 30, 40}, b[2 * 2] = {1, 2, 3, 4};
  float as = 0.5f, bs = 2.0f, ys = 4.0f;
  uint8_t az = 10, bz = 1, yz = 100, y[4];
  mx_kernel_call *c = kc_new(8, 1, NULL);
  kc_set(c, 0, MX_UINT8, 2, DIMS(2, 2), a);
  kc_set(c, 1, MX_FLOAT32, 0, NULL, &as);
  kc_set(c, 2, MX_UINT8, 0, NULL, &az);
  kc_set(c, 3, MX_UINT8, 2, DIMS(2, 2), b);
  kc_set(c, 4, MX_FLOAT32, 0, NULL, &bs);
  kc_set(c, 5, MX_UINT8, 0, NULL, &bz);
  kc_set(c, 6, MX_FLOAT32, 0, NULL, &ys);
  kc_set(c, 7, MX_UINT8, 0, NULL, &yz);
  kc_set(c, 8, MX_UINT8, 2, DIMS(2, 2), y);
  cr_assert_eq(kc_run("QLinearMatMul", c), MX_OK);
  /* (a - 10) = [[0, 10], [20, 30]], (b - 1) = [[0, 1], [2, 3]]: products [[20, 30], [60, 110]],
   * times 0.25: [[5, 7.5], [15, 27.5]] -> ties to even 8, 28; plus 100 */
  uint8_t want[4] = {105, 108, 115, 128};
  for (int i = 0; i < 4; i++) cr_expect_eq(y[i], want[i], "element %d", i);
  free(c);
}
