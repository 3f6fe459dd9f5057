/* ONNX import and export of the element types beyond the original ten: sub-byte types unpacked
 * from raw_data and int32_data (int4 sign-extended, one element per byte) and packed again on
 * export, uint16 from int32_data, uint32/uint64 from uint64_data, float8 bytes, and packed
 * lengths checked, and Identity running on them. (The bundled onnx.proto predates the narrow
 * types: their codes are mx_dtype values, which equal ONNX's.) */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "graph/onnx/onnx_build.h"
#include "mixrt/graph.h"
#include "mixrt/onnx.h"
#include "mixrt/reference.h"
#include "mixrt/tensor.h"

/* Parses t as a single-tensor file; asserts success. */
static mx_tensor parse_ok(mxb *b, Onnx__TensorProto *t) {
  size_t size;
  uint8_t *bytes = mxb_pack_tensor(b, t, &size);
  mx_tensor out;
  mx_error err;
  mx_status st = mx_tensor_parse_pb(bytes, size, &out, NULL, &err);
  cr_assert_eq(st, MX_OK, "%s", err.message);
  return out;
}

Test(onnx_narrow_types, int4_raw_data_is_unpacked) {
  mxb b = {0};
  const uint8_t raw[3] = {0x87, 0x1F, 0x0E};
  mx_tensor t = parse_ok(&b, mxb_tensor(&b, "w", MX_INT4, "5", raw, sizeof raw));
  cr_assert_eq(t.dtype, MX_INT4);
  const int8_t want[5] = {7, -8, -1, 1, -2};
  cr_expect_arr_eq(t.data, want, 5);
  mx_tensor_release(&t);
  mxb_free(&b);
}

Test(onnx_narrow_types, uint2_int32_data_is_unpacked) {
  mxb b = {0};
  Onnx__TensorProto *tp = mxb_tensor(&b, "w", MX_UINT2, "6", NULL, 0);
  tp->n_int32_data = 2; /* two packed bytes, one per int32 */
  tp->int32_data = mxb_alloc(&b, 2 * sizeof(int32_t));
  tp->int32_data[0] = 0xE4; /* 0, 1, 2, 3 */
  tp->int32_data[1] = 0x0B; /* 3, 2 */
  mx_tensor t = parse_ok(&b, tp);
  const uint8_t want[6] = {0, 1, 2, 3, 3, 2};
  cr_expect_arr_eq(t.data, want, 6);
  mx_tensor_release(&t);
  mxb_free(&b);
}

Test(onnx_narrow_types, wide_unsigned_typed_fields) {
  mxb b = {0};
  Onnx__TensorProto *u16 = mxb_tensor(&b, "a", ONNX__TENSOR_PROTO__DATA_TYPE__UINT16, "2", NULL, 0);
  u16->n_int32_data = 2;
  u16->int32_data = mxb_alloc(&b, 2 * sizeof(int32_t));
  u16->int32_data[0] = 65535;
  u16->int32_data[1] = 7;
  mx_tensor t = parse_ok(&b, u16);
  cr_expect_eq(t.dtype, MX_UINT16);
  cr_expect_eq(((uint16_t *)t.data)[0], 65535);
  cr_expect_eq(((uint16_t *)t.data)[1], 7);
  mx_tensor_release(&t);
  Onnx__TensorProto *u64 = mxb_tensor(&b, "b", ONNX__TENSOR_PROTO__DATA_TYPE__UINT64, "1", NULL, 0);
  u64->n_uint64_data = 1;
  u64->uint64_data = mxb_alloc(&b, sizeof(uint64_t));
  u64->uint64_data[0] = UINT64_MAX;
  t = parse_ok(&b, u64);
  cr_expect_eq(((uint64_t *)t.data)[0], UINT64_MAX);
  mx_tensor_release(&t);
  mxb_free(&b);
}

Test(onnx_narrow_types, packed_length_is_checked) {
  mxb b = {0};
  const uint8_t raw[3] = {0};
  Onnx__TensorProto *tp = mxb_tensor(&b, "w", MX_INT4, "8", raw, sizeof raw);
  size_t size;
  uint8_t *bytes = mxb_pack_tensor(&b, tp, &size);
  mx_tensor t;
  mx_error err;
  cr_expect_eq(mx_tensor_parse_pb(bytes, size, &t, NULL, &err), MX_ERR_MALFORMED);
  cr_expect(strstr(err.message, "need 4") != NULL, "%s", err.message);
  mxb_free(&b);
}

Test(onnx_narrow_types, int4_initializer_round_trips_through_export) {
  mxb b = {0};
  Onnx__ModelProto *m = mxb_model(&b, 21);
  const uint8_t raw[3] = {0x87, 0x1F, 0x0E};
  mxb_initializer(&b, m->graph, mxb_tensor(&b, "w", MX_INT4, "5", raw, sizeof raw));
  const uint8_t f8[2] = {0x38, 0xC0};
  mxb_initializer(&b, m->graph, mxb_tensor(&b, "f", MX_FLOAT8E4M3FN, "2", f8, 2));
  mxb_node(&b, m->graph, "Identity", "id", "w", "y");
  mxb_node(&b, m->graph, "Identity", "id2", "f", "z");
  mxb_output(&b, m->graph, "y", MX_INT4, "5");
  mxb_output(&b, m->graph, "z", MX_FLOAT8E4M3FN, "2");
  size_t size;
  uint8_t *bytes = mxb_pack(&b, m, &size);
  mx_graph *g = NULL, *g2 = NULL;
  mx_error err;
  cr_assert_eq(mx_onnx_load_memory(bytes, size, NULL, &g, &err), MX_OK, "%s", err.message);
  void *saved = NULL;
  size_t saved_size = 0;
  cr_assert_eq(mx_onnx_save_memory(g, &saved, &saved_size, &err), MX_OK, "%s", err.message);
  cr_assert_eq(mx_onnx_load_memory(saved, saved_size, NULL, &g2, &err), MX_OK, "%s", err.message);
  const mx_tensor *w = mx_graph_value_constant(g2, mx_graph_find_value(g2, "w"));
  const mx_tensor *f = mx_graph_value_constant(g2, mx_graph_find_value(g2, "f"));
  cr_assert_not_null(w);
  cr_assert_not_null(f);
  const int8_t want[5] = {7, -8, -1, 1, -2};
  cr_expect_eq(w->dtype, MX_INT4);
  cr_expect_arr_eq(w->data, want, 5);
  cr_expect_eq(f->dtype, MX_FLOAT8E4M3FN);
  cr_expect_arr_eq(f->data, f8, 2);
  /* Identity moves the narrow types like any one-byte type. */
  mx_tensor outs[2];
  memset(outs, 0, sizeof outs);
  cr_assert_eq(mx_reference_run(g2, NULL, 0, outs, 2, &err), MX_OK, "%s", err.message);
  cr_expect_eq(outs[0].dtype, MX_INT4);
  cr_expect_arr_eq(outs[0].data, want, 5);
  cr_expect_arr_eq(outs[1].data, f8, 2);
  mx_tensor_release(&outs[0]);
  mx_tensor_release(&outs[1]);
  free(saved);
  mx_graph_destroy(g);
  mx_graph_destroy(g2);
  mxb_free(&b);
}
