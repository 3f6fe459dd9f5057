/* Tests of the image group (graph/ops/image.c, kernels/image.c, graph/ops/image_codec*.c):
 * ImageDecoder's inference (symbolic [H, W, C] without the bytes, the header's size with them,
 * bad dtypes and attributes refused), decoding of every format through the reference
 * interpreter (the upstream node tests' JPEG, PNG, TIFF, WebP, JPEG 2000 and PNM images, and
 * hand-made PNMs), and bad data refused with a message naming the cause: unknown formats,
 * truncated data and headers claiming huge images (refused before anything is allocated). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/ops/image_codec.h"
#include "graph/ops/ops_support.h"
#include "mixrt/graph.h"
#include "mixrt/reference.h"
#include "mixrt/tensor.h"
#include "support/onnx_node.h"

static void setup(void) { mxt_ops_setup("image"); }

TestSuite(image, .init = setup, .fini = mxt_ops_teardown);

/* An ImageDecoder node on a graph input of n bytes (n < 0: a symbolic length); returns its output. */
static mx_value_id decoder(const char *pixel_format, int64_t n) {
  mx_value_id x = input("encoded", MX_UINT8, n < 0 ? SHAPE(S("n")) : SHAPE(C(n)));
  mx_attr a = mx_attr_string("pixel_format", pixel_format);
  mx_value_id y = op("ImageDecoder", &x, 1, &a, 1);
  cr_assert_eq(mx_graph_add_output(G, y), MX_OK);
  return y;
}

/* Runs G on `len` encoded bytes; returns the status, the output in *out (release it) and the
 * message in err. */
static mx_status decode(const uint8_t *bytes, size_t len, mx_tensor *out, mx_error *err) {
  mx_tensor in = {.dtype = MX_UINT8, .rank = 1, .dims = {(int64_t)len}, .data = (void *)bytes};
  memset(out, 0, sizeof *out);
  mx_error_clear(err);
  return mx_reference_run(G, &in, 1, out, 1, err);
}

/* The encoded input and expected output of one upstream test (skips the test without the data). */
static void load_case(const char *name, mx_tensor *in, mx_tensor *want) {
  const char *root = mxt_onnx_node_dir();
  if (!root) cr_skip_test("no ONNX node-test data");
  char path[1024];
  mx_error err;
  snprintf(path, sizeof path, "%s/%s/test_data_set_0/input_0.pb", root, name);
  cr_assert_eq(mx_tensor_load_pb(path, in, NULL, &err), MX_OK, "%s", err.message);
  snprintf(path, sizeof path, "%s/%s/test_data_set_0/output_0.pb", root, name);
  cr_assert_eq(mx_tensor_load_pb(path, want, NULL, &err), MX_OK, "%s", err.message);
}

/* Decodes upstream test `name` with pixel_format and checks every byte. */
static void decodes_like_upstream(const char *name, const char *pixel_format) {
  mx_tensor in, want, got;
  load_case(name, &in, &want);
  decoder(pixel_format, -1);
  mx_error err;
  cr_assert_eq(decode(in.data, (size_t)in.dims[0], &got, &err), MX_OK, "%s: %s", name, err.message);
  cr_assert_eq(got.rank, 3);
  for (int d = 0; d < 3; d++) cr_assert_eq(got.dims[d], want.dims[d], "%s: dim %d", name, d);
  size_t n = (size_t)(got.dims[0] * got.dims[1] * got.dims[2]);
  cr_assert_eq(memcmp(got.data, want.data, n), 0, "%s: pixels differ", name);
  mx_tensor_release(&got);
  mx_tensor_release(&in);
  mx_tensor_release(&want);
}

/* Decoding fails with MX_ERR_KERNEL and needle in the message. */
static void refused(const uint8_t *bytes, size_t len, const char *needle) {
  mx_tensor got;
  mx_error err;
  mx_status st = decode(bytes, len, &got, &err);
  cr_assert_neq(st, MX_OK, "accepted");
  if (st == MX_OK) mx_tensor_release(&got);
  cr_assert_eq(st, MX_ERR_KERNEL, "status %s: %s", mx_status_string(st), err.message);
  cr_assert(strstr(err.message, needle), "message: %s", err.message);
}

/* --- inference -------------------------------------------------------------------------------- */

Test(image, infer_gives_symbolic_height_and_width) {
  mx_value_id y = decoder("RGB", -1);
  infer_ok();
  mx_shape s = shape_of(y);
  cr_assert_eq(s.rank, 3);
  cr_assert(is_expr(s.dims[0]) && is_expr(s.dims[1]));
  cr_assert_eq(s.dims[2], 3);
}

Test(image, grayscale_has_one_channel) {
  mx_value_id y = decoder("Grayscale", -1);
  infer_ok();
  cr_assert_eq(shape_of(y).dims[2], 1);
}

Test(image, refuses_float_input) {
  mx_value_id x = input("encoded", MX_FLOAT32, SHAPE(C(16)));
  op("ImageDecoder", &x, 1, NULL, 0);
  infer_fails(MX_ERR_DTYPE, "uint8");
}

Test(image, refuses_unknown_pixel_format) {
  mx_value_id x = input("encoded", MX_UINT8, SHAPE(C(16)));
  mx_attr a = mx_attr_string("pixel_format", "CMYK");
  mx_node_desc d = {
      .op_type = "ImageDecoder", .inputs = &x, .n_inputs = 1, .attrs = &a, .n_attrs = 1, .n_outputs = 1};
  mx_value_id y;
  mx_status st = mx_graph_add_node(G, &d, &y);
  if (st == MX_OK) st = mx_graph_infer(G);
  cr_assert_neq(st, MX_OK);
  cr_assert(strstr(mx_graph_last_error(G), "pixel_format"), "message: %s", mx_graph_last_error(G));
}

/* --- every format ------------------------------------------------------------------------------- */

Test(image, jpeg_rgb) { decodes_like_upstream("test_image_decoder_decode_jpeg_rgb", "RGB"); }
Test(image, jpeg_bgr) { decodes_like_upstream("test_image_decoder_decode_jpeg_bgr", "BGR"); }
Test(image, jpeg_grayscale) {
  decodes_like_upstream("test_image_decoder_decode_jpeg_grayscale", "Grayscale");
}
Test(image, png_rgb) { decodes_like_upstream("test_image_decoder_decode_png_rgb", "RGB"); }
Test(image, tiff_rgb) { decodes_like_upstream("test_image_decoder_decode_tiff_rgb", "RGB"); }
Test(image, webp_rgb) { decodes_like_upstream("test_image_decoder_decode_webp_rgb", "RGB"); }
Test(image, jpeg2000_rgb) { decodes_like_upstream("test_image_decoder_decode_jpeg2k_rgb", "RGB"); }
Test(image, pnm_rgb) { decodes_like_upstream("test_image_decoder_decode_pnm_rgb", "RGB"); }

Test(image, pnm_gray_with_comments_and_a_small_maxval) {
  static const uint8_t pgm[] = "P5 # two by one\n2 1\n15\n\x00\x0f";
  decoder("RGB", -1);
  mx_tensor got;
  mx_error err;
  cr_assert_eq(decode(pgm, sizeof pgm - 1, &got, &err), MX_OK, "%s", err.message);
  const uint8_t want[6] = {0, 0, 0, 255, 255, 255};
  cr_assert_eq(got.dims[0], 1);
  cr_assert_eq(got.dims[1], 2);
  cr_assert_eq(memcmp(got.data, want, 6), 0);
  mx_tensor_release(&got);
}

Test(image, grayscale_uses_pil_luma) {
  static const uint8_t ppm[] = "P6\n2 1\n255\n\xff\x00\x00\x10\x80\xf0";
  decoder("Grayscale", -1);
  mx_tensor got;
  mx_error err;
  cr_assert_eq(decode(ppm, sizeof ppm - 1, &got, &err), MX_OK, "%s", err.message);
  const uint8_t *y = got.data;
  cr_assert_eq(y[0], 76); /* 255 * 0.299 */
  cr_assert_eq(y[1], (19595u * 0x10 + 38470u * 0x80 + 7471u * 0xf0 + 0x8000u) >> 16);
  mx_tensor_release(&got);
}

/* --- bad data ----------------------------------------------------------------------------------- */

Test(image, refuses_unknown_format) {
  static const uint8_t junk[] = "GIF89a not supported";
  decoder("RGB", -1);
  refused(junk, sizeof junk - 1, "no known image format");
}

Test(image, refuses_empty_input) {
  decoder("RGB", -1);
  refused((const uint8_t *)"", 0, "empty");
}

/* Each upstream image cut to `keep` of its bytes is refused naming its format. */
static void refuses_truncated(const char *name, double keep, const char *needle) {
  mx_tensor in, want;
  load_case(name, &in, &want);
  decoder("RGB", -1);
  refused(in.data, (size_t)((double)in.dims[0] * keep), needle);
  mx_tensor_release(&in);
  mx_tensor_release(&want);
}

Test(image, refuses_truncated_jpeg) { refuses_truncated("test_image_decoder_decode_jpeg_rgb", 0.6, "JPEG"); }
Test(image, refuses_truncated_png) { refuses_truncated("test_image_decoder_decode_png_rgb", 0.6, "PNG"); }
Test(image, refuses_truncated_tiff) { refuses_truncated("test_image_decoder_decode_tiff_rgb", 0.5, "TIFF"); }
Test(image, refuses_truncated_webp) { refuses_truncated("test_image_decoder_decode_webp_rgb", 0.6, "WebP"); }
Test(image, refuses_truncated_jpeg2000) {
  refuses_truncated("test_image_decoder_decode_jpeg2k_rgb", 0.6, "JPEG 2000");
}
Test(image, refuses_truncated_pnm) { refuses_truncated("test_image_decoder_decode_pnm_rgb", 0.6, "PNM"); }
Test(image, refuses_a_header_only) { refuses_truncated("test_image_decoder_decode_png_rgb", 0.1, "PNG"); }

Test(image, refuses_huge_pnm_header) {
  static const uint8_t ppm[] = "P6\n100000 100000\n255\n\x01\x02\x03";
  decoder("RGB", -1);
  refused(ppm, sizeof ppm - 1, "65535");
}

Test(image, refuses_huge_pixel_count) {
  static const uint8_t ppm[] = "P6\n60000 60000\n255\n\x01\x02\x03";
  decoder("RGB", -1);
  refused(ppm, sizeof ppm - 1, "2^28");
}

static uint32_t crc32_of(const uint8_t *p, size_t n) {
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < n; i++) {
    c ^= p[i];
    for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
  }
  return ~c;
}

static void put_be32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

Test(image, refuses_huge_png_header) {
  mx_tensor in, want;
  load_case("test_image_decoder_decode_png_rgb", &in, &want);
  uint8_t *b = in.data; /* signature (8), IHDR length (4) and type (4), then width, height */
  put_be32(b + 16, 100000);
  put_be32(b + 20, 100000);
  put_be32(b + 29, crc32_of(b + 12, 17)); /* the chunk's CRC covers type and data */
  decoder("RGB", -1);
  refused(b, (size_t)in.dims[0], "65535");
  mx_tensor_release(&in);
  mx_tensor_release(&want);
}

Test(image, refuses_huge_jpeg_header) {
  mx_tensor in, want;
  load_case("test_image_decoder_decode_jpeg_rgb", &in, &want);
  uint8_t *b = in.data;
  size_t n = (size_t)in.dims[0], sof = 0;
  for (size_t i = 2; i + 9 < n && !sof; i++)
    if (b[i] == 0xff && (b[i + 1] == 0xc0 || b[i + 1] == 0xc2)) sof = i;
  cr_assert(sof, "no SOF marker in the test image");
  b[sof + 5] = 0xea, b[sof + 6] = 0x60; /* height 60000 */
  b[sof + 7] = 0xea, b[sof + 8] = 0x60; /* width 60000 */
  decoder("RGB", -1);
  refused(b, n, "2^28");
  mx_tensor_release(&in);
  mx_tensor_release(&want);
}

Test(image, constant_input_gives_the_header_size) {
  static const uint8_t ppm[] =
      "P6\n3 2\n255\n"
      "\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11\x12";
  mx_tensor t = {.dtype = MX_UINT8, .rank = 1, .dims = {(int64_t)sizeof ppm - 1}, .data = (void *)ppm};
  mx_value_id x;
  cr_assert_eq(mx_graph_add_constant(G, "encoded", &t, &x), MX_OK);
  mx_value_id y = op("ImageDecoder", &x, 1, NULL, 0);
  infer_ok();
  expect_shape(y, MX_UINT8, SHAPE(C(2), C(3), C(3)));
}
