/* Loading sequence and optional values from .pb files (mx_value_load_pb): the SequenceProto and
 * OptionalProto messages of onnx-data.proto, which the generated onnx.proto code lacks, read with
 * a small wire-format walker; each tensor inside goes through mx_tensor_parse_pb. Sequences of
 * tensors and optionals of a tensor or of such a sequence are supported. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/file.h"
#include "graph/onnx/onnx_impl.h"
#include "mixrt/sequence.h"

/* Protobuf wire types. */
enum { WIRE_VARINT = 0, WIRE_I64 = 1, WIRE_LEN = 2, WIRE_I32 = 5 };

typedef struct wire {
  const uint8_t *p, *end;
} wire;

static bool read_varint(wire *w, uint64_t *v) {
  uint64_t r = 0;
  for (int shift = 0; shift < 64 && w->p < w->end; shift += 7) {
    uint8_t b = *w->p++;
    r |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *v = r;
      return true;
    }
  }
  return false;
}

/* Reads the next field: its number, wire type, and a varint value or a byte range. */
static bool next_field(wire *w, uint32_t *field, int *type, uint64_t *v, const uint8_t **data, size_t *len) {
  uint64_t key;
  if (!read_varint(w, &key)) return false;
  *field = (uint32_t)(key >> 3);
  *type = (int)(key & 7);
  switch (*type) {
    case WIRE_VARINT: return read_varint(w, v);
    case WIRE_I64:
      if (w->end - w->p < 8) return false;
      w->p += 8;
      return true;
    case WIRE_I32:
      if (w->end - w->p < 4) return false;
      w->p += 4;
      return true;
    case WIRE_LEN:
      if (!read_varint(w, v) || *v > (uint64_t)(w->end - w->p)) return false;
      *data = w->p;
      *len = (size_t)*v;
      w->p += *len;
      return true;
    default: return false;
  }
}

static mx_status parse_sequence(const uint8_t *data, size_t size, int depth, mx_tensor *out, mx_error *err);

/* A TensorProto inside a container, appended to `list`. */
static mx_status add_tensor(const uint8_t *data, size_t len, mx_tensor *list, mx_error *err) {
  mx_tensor t;
  mx_status st = mx_tensor_parse_pb(data, len, &t, NULL, err);
  if (st != MX_OK) return st;
  mx_value_list *l = mx_value_list_of(list);
  if (l->count == 0 && l->elem_dtype == MX_DTYPE_UNDEFINED) l->elem_dtype = t.dtype;
  st = mx_value_list_insert(list, l->count, &t);
  if (st != MX_OK) {
    mx_tensor_release(&t);
    return mx__fail(err, st, "out of host memory");
  }
  return MX_OK;
}

static mx_status parse_sequence(const uint8_t *data, size_t size, int depth, mx_tensor *out, mx_error *err) {
  (void)depth;
  wire w = {data, data + size};
  mx_status st = mx_value_list_new(MX_KIND_SEQUENCE, MX_DTYPE_UNDEFINED, out);
  if (st != MX_OK) return mx__fail(err, st, "out of host memory");
  while (w.p < w.end) {
    uint32_t field;
    int type;
    uint64_t v = 0;
    const uint8_t *d = NULL;
    size_t len = 0;
    if (!next_field(&w, &field, &type, &v, &d, &len)) {
      st = mx__fail(err, MX_ERR_MALFORMED, "SequenceProto: malformed wire data");
      break;
    }
    if (field == 3 && type == WIRE_LEN) {
      st = add_tensor(d, len, out, err);
    } else if (field >= 4 && field <= 7 && type == WIRE_LEN) {
      st = mx__fail(err, MX_ERR_UNSUPPORTED,
                    "SequenceProto: only sequences of tensors are supported (field %u)", field);
    }
    if (st != MX_OK) break;
  }
  if (st != MX_OK) mx_tensor_release(out);
  return st;
}

static mx_status parse_optional(const uint8_t *data, size_t size, mx_tensor *out, mx_error *err) {
  wire w = {data, data + size};
  const uint8_t *tensor = NULL, *seq = NULL;
  size_t tlen = 0, slen = 0;
  uint64_t elem_type = 0;
  while (w.p < w.end) {
    uint32_t field;
    int type;
    uint64_t v = 0;
    const uint8_t *d = NULL;
    size_t len = 0;
    if (!next_field(&w, &field, &type, &v, &d, &len))
      return mx__fail(err, MX_ERR_MALFORMED, "OptionalProto: malformed wire data");
    if (field == 2 && type == WIRE_VARINT)
      elem_type = v;
    else if (field == 3 && type == WIRE_LEN)
      tensor = d, tlen = len;
    else if (field == 5 && type == WIRE_LEN)
      seq = d, slen = len;
    else if (field >= 4 && field <= 7 && type == WIRE_LEN)
      return mx__fail(err, MX_ERR_UNSUPPORTED, "OptionalProto: field %u is not supported", field);
  }
  bool is_seq = seq || elem_type == 3; /* OptionalProto.DataType SEQUENCE */
  mx_status st =
      mx_value_list_new(is_seq ? MX_KIND_OPTIONAL_SEQUENCE : MX_KIND_OPTIONAL, MX_DTYPE_UNDEFINED, out);
  if (st != MX_OK) return mx__fail(err, st, "out of host memory");
  if (tensor) {
    st = add_tensor(tensor, tlen, out, err);
  } else if (seq) {
    mx_tensor s;
    st = parse_sequence(seq, slen, 1, &s, err);
    if (st == MX_OK) {
      mx_value_list_of(out)->elem_dtype = mx_value_list_of(&s)->elem_dtype;
      st = mx_value_list_insert(out, 0, &s);
      if (st != MX_OK) {
        mx_tensor_release(&s);
        st = mx__fail(err, st, "out of host memory");
      }
    }
  }
  if (st != MX_OK) mx_tensor_release(out);
  return st;
}

mx_status mx_value_load_pb(const char *path, mx_value_kind kind, mx_tensor *t, mx_error *err) {
  mx_error local;
  mx_error *e = err ? err : &local;
  mx_error_clear(e);
  if (!path || !t) return mx__fail(e, MX_ERR_INVALID_ARGUMENT, "mx_value_load_pb: path or tensor is NULL");
  memset(t, 0, sizeof *t);
  if (kind == MX_KIND_TENSOR) return mx_tensor_load_pb(path, t, NULL, e);
  uint8_t *buf = NULL;
  size_t size = 0;
  mx_status st = mx__read_file(path, MX_ONNX_MAX_FILE_BYTES, &buf, &size, e);
  if (st != MX_OK) return st;
  st = kind == MX_KIND_SEQUENCE ? parse_sequence(buf, size, 0, t, e) : parse_optional(buf, size, t, e);
  if (st != MX_OK) mx__error_prefix(e, "%s: ", path);
  free(buf);
  return st;
}
