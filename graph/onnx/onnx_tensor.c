/* ONNX TensorProto -> mx_tensor: initializers, Constant values and tensor attributes of the
 * importer, and the public mx_tensor_load_pb / mx_tensor_parse_pb for single-tensor files
 * (the input_i.pb / output_i.pb files of the ONNX node tests).
 *
 * A tensor's data comes from exactly one place: raw_data (little-endian bytes), the typed
 * field ONNX assigns to its element type (float_data; int32_data for int32, int16, int8,
 * uint16, uint8, bool, float16, bfloat16 and the 8-bit floats as their bit patterns, and for the
 * sub-byte types as packed bytes; int64_data; uint64_data for uint32 and uint64; double_data)
 * or an external file; strings come from string_data only. The sub-byte types (int4, uint4, float4e2m1, int2, uint2) arrive packed
 * two or four to a byte, low bits first, and are unpacked to one element per byte, the form
 * mixrt tensors hold them in (see mixrt/dtype.h). Every size is checked before anything is allocated: dims
 * whose element count or byte size overflows are MX_ERR_LIMIT, and data whose length does not
 * match the dims is MX_ERR_MALFORMED naming the tensor, so a file can never make the loader
 * allocate more than the data it actually carries. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/file.h"
#include "graph/onnx/onnx_impl.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "mixrt's ONNX loader copies raw_data as is and needs a little-endian host"
#endif

const char *mx__onnx_type_name(int64_t code) {
  static const char *const names[] = {
      "undefined",      "float32",  "uint8",        "int8",           "uint16",
      "int16",          "int32",    "int64",        "string",         "bool",
      "float16",        "float64",  "uint32",       "uint64",         "complex64",
      "complex128",     "bfloat16", "float8e4m3fn", "float8e4m3fnuz", "float8e5m2",
      "float8e5m2fnuz", "uint4",    "int4",         "float4e2m1",     "float8e8m0",
      "uint2",          "int2"};
  if (code < 0 || code >= (int64_t)(sizeof names / sizeof names[0])) return "unknown";
  return names[code];
}

/* The typed field of `tp` that ONNX assigns to dtype: its element count and name. */
static size_t own_field(const Onnx__TensorProto *tp, mx_dtype dtype, const char **field) {
  switch (dtype) {
    case MX_FLOAT32: *field = "float_data"; return tp->n_float_data;
    case MX_FLOAT64: *field = "double_data"; return tp->n_double_data;
    case MX_INT64: *field = "int64_data"; return tp->n_int64_data;
    case MX_INT32:
    case MX_INT16:
    case MX_INT8:
    case MX_UINT8:
    case MX_BOOL:
    case MX_FLOAT16:
    case MX_BFLOAT16:
    case MX_UINT16:
    case MX_FLOAT8E4M3FN:
    case MX_FLOAT8E4M3FNUZ:
    case MX_FLOAT8E5M2:
    case MX_FLOAT8E5M2FNUZ:
    case MX_FLOAT8E8M0:
    case MX_UINT4:
    case MX_INT4:
    case MX_FLOAT4E2M1:
    case MX_UINT2:
    case MX_INT2: *field = "int32_data"; return tp->n_int32_data;
    case MX_UINT32:
    case MX_UINT64: *field = "uint64_data"; return tp->n_uint64_data;
    case MX_STRING: *field = "string_data"; return tp->n_string_data;
    case MX_DTYPE_UNDEFINED: break;
  }
  *field = "?";
  return 0;
}

/* Unpacks n sub-byte elements from packed bytes in place (buf holds n bytes; the packed ones
 * sit at its start): element i is bits [i*w, i*w+w) of the stream, sign-extended for int4 and
 * int2. Runs backwards so no packed byte is overwritten before it is read. */
void mx__onnx_unpack_sub_byte(uint8_t *buf, mx_dtype dtype, size_t n) {
  int w = mx_dtype_bits(dtype);
  if (w >= 8 || w <= 0) return;
  int per = 8 / w;
  bool is_signed = dtype == MX_INT4 || dtype == MX_INT2;
  uint8_t mask = (uint8_t)((1u << w) - 1);
  for (size_t i = n; i-- > 0;) {
    uint8_t v = (uint8_t)((buf[i / (size_t)per] >> ((int)(i % (size_t)per) * w)) & mask);
    if (is_signed && (v >> (w - 1))) v = (uint8_t)(v | (uint8_t)~mask);
    buf[i] = v;
  }
}

/* Packs n one-per-byte sub-byte elements into dst (mx_dtype_packed_bytes(dtype, n) bytes),
 * low bits first: the inverse of mx__onnx_unpack_sub_byte. */
void mx__onnx_pack_sub_byte(const uint8_t *src, mx_dtype dtype, size_t n, uint8_t *dst) {
  int w = mx_dtype_bits(dtype);
  int per = 8 / w;
  uint8_t mask = (uint8_t)((1u << w) - 1);
  memset(dst, 0, mx_dtype_packed_bytes(dtype, n));
  for (size_t i = 0; i < n; i++)
    dst[i / (size_t)per] =
        (uint8_t)(dst[i / (size_t)per] | ((src[i] & mask) << ((int)(i % (size_t)per) * w)));
}

/* Name of the first non-empty typed field other than `own`, for messages. */
static const char *foreign_field(const Onnx__TensorProto *tp, const char *own) {
  const struct {
    const char *name;
    size_t n;
  } fields[] = {{"float_data", tp->n_float_data},   {"int32_data", tp->n_int32_data},
                {"int64_data", tp->n_int64_data},   {"double_data", tp->n_double_data},
                {"uint64_data", tp->n_uint64_data}, {"string_data", tp->n_string_data}};
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
    if (fields[i].n && strcmp(fields[i].name, own) != 0) return fields[i].name;
  return "?";
}

/* Copies the typed field of tp (n elements, already checked) into dst. */
static void fill_typed(const Onnx__TensorProto *tp, mx_dtype dtype, size_t n, void *dst) {
  switch (dtype) {
    case MX_FLOAT32: memcpy(dst, tp->float_data, n * sizeof(float)); break;
    case MX_FLOAT64: memcpy(dst, tp->double_data, n * sizeof(double)); break;
    case MX_INT64: memcpy(dst, tp->int64_data, n * sizeof(int64_t)); break;
    case MX_INT32: memcpy(dst, tp->int32_data, n * sizeof(int32_t)); break;
    case MX_INT16:
      for (size_t i = 0; i < n; i++) ((int16_t *)dst)[i] = (int16_t)tp->int32_data[i];
      break;
    case MX_INT8:
      for (size_t i = 0; i < n; i++) ((int8_t *)dst)[i] = (int8_t)tp->int32_data[i];
      break;
    case MX_UINT8:
      for (size_t i = 0; i < n; i++) ((uint8_t *)dst)[i] = (uint8_t)tp->int32_data[i];
      break;
    case MX_BOOL:
      for (size_t i = 0; i < n; i++) ((uint8_t *)dst)[i] = tp->int32_data[i] != 0;
      break;
    case MX_FLOAT16:
    case MX_BFLOAT16:
    case MX_UINT16: /* the 16-bit pattern sits in the low bits of each int32 */
      for (size_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = (uint16_t)(uint32_t)tp->int32_data[i];
      break;
    case MX_FLOAT8E4M3FN:
    case MX_FLOAT8E4M3FNUZ:
    case MX_FLOAT8E5M2:
    case MX_FLOAT8E5M2FNUZ:
    case MX_FLOAT8E8M0:
    case MX_UINT4:
    case MX_INT4:
    case MX_FLOAT4E2M1:
    case MX_UINT2:
    case MX_INT2: /* one byte (a bit pattern, or packed sub-byte elements) per int32 */
      for (size_t i = 0; i < n; i++) ((uint8_t *)dst)[i] = (uint8_t)(uint32_t)tp->int32_data[i];
      break;
    case MX_UINT32:
      for (size_t i = 0; i < n; i++) ((uint32_t *)dst)[i] = (uint32_t)tp->uint64_data[i];
      break;
    case MX_UINT64: memcpy(dst, tp->uint64_data, n * sizeof(uint64_t)); break;
    case MX_STRING: /* decode_strings */
    case MX_DTYPE_UNDEFINED: break;
  }
}

/* Prints dims as "[2, 3]" for messages. */
static const char *dims_text(const mx_tensor *t, char *buf, size_t n) {
  size_t k = 0;
  k += (size_t)snprintf(buf + k, n - k, "[");
  for (int32_t i = 0; i < t->rank && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)t->dims[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
  return buf;
}

/* A string tensor from string_data: an array of char * with each string NUL-terminated. In an
 * arena (graph tensors) the array and the strings live there; otherwise (single-tensor files)
 * each string is a malloc of its own, as mx_tensor_release expects (mixrt/tensor.h). */
static mx_status decode_strings(const Onnx__TensorProto *tp, const char *what, mx__onnx_src *src,
                                mx_arena *arena, mx_tensor *nt, int64_t numel, mx_error *err) {
  if (tp->has_raw_data ||
      (tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL))
    return mx__fail(err, MX_ERR_MALFORMED, "%s: string values must be stored in string_data", what);
  size_t n_other =
      tp->n_float_data + tp->n_int32_data + tp->n_int64_data + tp->n_double_data + tp->n_uint64_data;
  if (n_other || (int64_t)tp->n_string_data != numel)
    return mx__fail(err, MX_ERR_MALFORMED, "%s: string_data holds %zu values, but the dims need %lld", what,
                    tp->n_string_data, (long long)numel);
  size_t total = (size_t)numel * sizeof(char *);
  for (size_t i = 0; i < tp->n_string_data; i++) total += tp->string_data[i].len + 1;
  if (src && total > MX_ONNX_MAX_DECODED_BYTES - src->decoded)
    return mx__fail(err, MX_ERR_LIMIT,
                    "%s: %zu bytes of strings would take the model past the "
                    "tensor data one load may decode",
                    what, total);
  size_t n = (size_t)numel;
  char **strs =
      arena ? mx__arena_alloc(arena, n ? n * sizeof(char *) : 1, 64) : calloc(n ? n : 1, sizeof(char *));
  if (!strs) return mx__fail(err, MX_ERR_OUT_OF_MEMORY, "%s: out of host memory", what);
  for (size_t i = 0; i < n; i++) {
    const ProtobufCBinaryData *b = &tp->string_data[i];
    char *c = arena ? mx__arena_alloc(arena, b->len + 1, 1) : malloc(b->len + 1);
    if (!c) {
      if (!arena) {
        for (size_t k = 0; k < i; k++) free(strs[k]);
        free(strs);
      }
      return mx__fail(err, MX_ERR_OUT_OF_MEMORY, "%s: out of host memory", what);
    }
    if (b->len) memcpy(c, b->data, b->len);
    c[b->len] = '\0';
    strs[i] = c;
  }
  if (src) src->decoded += total;
  nt->data = strs;
  nt->placement = MX_HOST;
  return MX_OK;
}

/* Whether a decoded tensor of dtype and nbytes goes into a constant store's block. */
static bool block_wanted(const mx__onnx_src *src, mx_dtype dtype, size_t nbytes) {
  return src && src->const_blocks && dtype != MX_STRING && nbytes >= MX__CONST_STORE_MIN;
}

bool mx__onnx_decoded_in_block(const mx__onnx_src *src, const mx_tensor *t) {
  size_t nbytes;
  const uint8_t *d = t->data;
  bool in_blob = src && src->borrow_blob && d >= src->blob && d < src->blob + src->blob_size;
  return !in_blob && mx_tensor_nbytes(t, &nbytes) && block_wanted(src, t->dtype, nbytes);
}

mx_status mx__onnx_tensor_decode(const Onnx__TensorProto *tp, const char *what, mx__onnx_src *src,
                                 mx_arena *arena, mx_tensor *t, mx_error *err) {
  char dbuf[160];
  mx_status st = MX_OK;
  mx__onnx_ext ext = {.fd = -1};
  void *data = NULL;
  mx_tensor nt;
  memset(&nt, 0, sizeof nt);
  memset(t, 0, sizeof *t);

  /* Element type. */
  int32_t code = tp->has_data_type ? tp->data_type : 0;
  if (code == 0) return mx__fail(err, MX_ERR_MALFORMED, "%s has no element type", what);
  if (!mx_dtype_is_supported(code) && code != MX_STRING)
    return mx__fail(err, MX_ERR_UNSUPPORTED, "%s: element type %s (%d) is not supported", what,
                    mx__onnx_type_name(code), (int)code);
  nt.dtype = (mx_dtype)code;

  /* Dims and sizes. */
  if (tp->n_dims > MX_MAX_RANK)
    return mx__fail(err, MX_ERR_UNSUPPORTED, "%s has rank %zu; mixrt supports up to %d", what, tp->n_dims,
                    MX_MAX_RANK);
  nt.rank = (int32_t)tp->n_dims;
  for (size_t i = 0; i < tp->n_dims; i++) {
    if (tp->dims[i] < 0)
      return mx__fail(err, MX_ERR_MALFORMED, "%s: dim %zu is negative (%lld)", what, i,
                      (long long)tp->dims[i]);
    nt.dims[i] = tp->dims[i];
  }
  int64_t numel;
  size_t nbytes;
  if (!mx_tensor_numel(&nt, &numel))
    return mx__fail(err, MX_ERR_LIMIT, "%s: dims %s have more elements than fit in 64 bits", what,
                    dims_text(&nt, dbuf, sizeof dbuf));
  if (!mx_tensor_nbytes(&nt, &nbytes))
    return mx__fail(err, MX_ERR_LIMIT, "%s: dims %s of %s need more bytes than fit in memory", what,
                    dims_text(&nt, dbuf, sizeof dbuf), mx_dtype_name(nt.dtype));
  if (nt.dtype == MX_STRING) {
    if (tp->segment) return mx__fail(err, MX_ERR_UNSUPPORTED, "%s is a segment of a larger tensor", what);
    st = decode_strings(tp, what, src, arena, &nt, numel, err);
    if (st == MX_OK) *t = nt;
    return st;
  }
  if (tp->segment) return mx__fail(err, MX_ERR_UNSUPPORTED, "%s is a segment of a larger tensor", what);
  /* Bytes as stored in the file (sub-byte types packed) and values in the typed field. */
  size_t stored = mx_dtype_packed_bytes(nt.dtype, (size_t)numel);
  uint64_t typed_count = mx_dtype_bits(nt.dtype) < 8 ? (uint64_t)stored : (uint64_t)numel;

  /* Exactly one source of data. */
  const char *field;
  size_t n_own = own_field(tp, nt.dtype, &field);
  size_t n_typed = tp->n_float_data + tp->n_int32_data + tp->n_int64_data + tp->n_double_data +
                   tp->n_uint64_data + tp->n_string_data;
  bool external = tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
  if (n_typed != n_own)
    return mx__fail(err, MX_ERR_MALFORMED, "%s: %s values cannot be stored in %s", what,
                    mx_dtype_name(nt.dtype), foreign_field(tp, field));
  if ((external && (tp->has_raw_data || n_own)) || (tp->has_raw_data && n_own))
    return mx__fail(err, MX_ERR_MALFORMED, "%s stores its data in more than one place (%s%s%s)", what,
                    external ? "external file, " : "", tp->has_raw_data ? "raw_data, " : "",
                    n_own ? field : "");
  if (tp->has_raw_data && tp->raw_data.len != stored)
    return mx__fail(err, MX_ERR_MALFORMED, "%s: raw_data holds %zu bytes, but dims %s of %s need %zu", what,
                    tp->raw_data.len, dims_text(&nt, dbuf, sizeof dbuf), mx_dtype_name(nt.dtype), stored);
  if (n_own && n_own != typed_count)
    return mx__fail(err, MX_ERR_MALFORMED, "%s: %s holds %zu values, but dims %s need %lld", what, field,
                    n_own, dims_text(&nt, dbuf, sizeof dbuf), (long long)typed_count);
  if (!external && !tp->has_raw_data && !n_own && numel != 0)
    return mx__fail(err, MX_ERR_MALFORMED, "%s has no data, but dims %s need %lld values", what,
                    dims_text(&nt, dbuf, sizeof dbuf), (long long)numel);
  if (src && nbytes > MX_ONNX_MAX_DECODED_BYTES - src->decoded)
    return mx__fail(err, MX_ERR_LIMIT,
                    "%s: %zu bytes would take the model past the %llu bytes of tensor data one "
                    "load may decode",
                    what, nbytes, (unsigned long long)MX_ONNX_MAX_DECODED_BYTES);
  const uint8_t *in_blob = NULL; /* external data in the weights section of an .mxm file */
  if (external && src && src->blob) {
    st = mx__onnx_blob_region(src, tp, stored, what, &in_blob, err);
    if (st != MX_OK) return st;
  } else if (external) {
    st = mx__onnx_ext_open(src ? src->base_dir : NULL, tp, stored, what, &ext, err);
    if (st != MX_OK) return st;
  }

  if (in_blob && src->borrow_blob && mx_dtype_is_float(nt.dtype)) {
    src->decoded += nbytes;
    nt.data = (void *)in_blob; /* borrowed: the blob outlives whatever holds the tensor */
    nt.placement = MX_HOST;
    *t = nt;
    return MX_OK;
  }
  /* Allocate only now: the bytes are known to exist. A constant's block is handed over to the
   * graph as is (mx__graph_add_constant_adopt): the bytes are written once. */
  bool in_block = !arena && block_wanted(src, nt.dtype, nbytes);
  data = arena      ? mx__arena_alloc(arena, nbytes ? nbytes : 1, 64)
         : in_block ? mx__graph_const_block_alloc(nbytes)
                    : malloc(nbytes ? nbytes : 1);
  if (!data) {
    st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "%s: out of host memory for %zu bytes", what, nbytes);
    goto close_ext;
  }
  if (in_blob) {
    if (stored) memcpy(data, in_blob, stored);
  } else if (external) {
    st = mx__onnx_ext_read(&ext, data, what, err);
    if (st != MX_OK) goto free_data;
  } else if (tp->has_raw_data) {
    if (stored) memcpy(data, tp->raw_data.data, stored);
  } else if (n_own) {
    fill_typed(tp, nt.dtype, (size_t)typed_count, data);
  }
  if (mx_dtype_bits(nt.dtype) < 8) mx__onnx_unpack_sub_byte(data, nt.dtype, (size_t)numel);
  if (nt.dtype == MX_BOOL && (external || tp->has_raw_data)) /* mixrt bools are 0 or 1 */
    for (size_t i = 0; i < nbytes; i++) ((uint8_t *)data)[i] = ((uint8_t *)data)[i] != 0;

  mx__onnx_ext_close(&ext);
  if (src) src->decoded += nbytes;
  nt.data = data;
  nt.placement = MX_HOST;
  *t = nt;
  return MX_OK;
free_data:
  if (in_block)
    mx__graph_const_block_free(data, nbytes);
  else if (!arena)
    free(data);
close_ext:
  mx__onnx_ext_close(&ext);
  return st;
}

/* --- single-tensor files ---------------------------------------------------------------------- */

/* Parses one serialized TensorProto; `what` names the source in messages, `base_dir` locates
 * external data (NULL: refused). */
static mx_status parse_tensor(const void *data, size_t size, const char *what, const char *base_dir,
                              mx_tensor *t, char **name_out, mx_error *err) {
  mx_status st = MX_OK;
  char label[MX_ERROR_MESSAGE_MAX / 2];
  mx__onnx_src src = {.base_dir = base_dir};
  mx_tensor nt;
  char *name = NULL;
  if (size > MX_ONNX_MAX_FILE_BYTES)
    return mx__fail(err, MX_ERR_LIMIT, "%s: %zu bytes is more than a TensorProto can hold", what, size);
  st = mx__onnx_check_wire(&onnx__tensor_proto__descriptor, data, size, "TensorProto", err);
  if (st != MX_OK) {
    mx__error_prefix(err, "%s: ", what);
    return st;
  }
  Onnx__TensorProto *tp = onnx__tensor_proto__unpack(NULL, size, data);
  if (!tp)
    return mx__fail(err, MX_ERR_MALFORMED, "%s: not a valid TensorProto (protobuf decoding failed)", what);
  if (tp->name && *tp->name)
    snprintf(label, sizeof label, "%.120s: tensor '%.100s'", what, tp->name);
  else
    snprintf(label, sizeof label, "%.120s: tensor", what);
  st = mx__onnx_tensor_decode(tp, label, &src, NULL, &nt, err);
  if (st != MX_OK) goto free_proto;
  if (name_out) {
    name = strdup(tp->name ? tp->name : "");
    if (!name) {
      st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "%s: out of host memory", what);
      goto free_tensor;
    }
    *name_out = name;
  }
  *t = nt;
  onnx__tensor_proto__free_unpacked(tp, NULL);
  return MX_OK;
free_tensor:
  mx_tensor_release(&nt);
free_proto:
  onnx__tensor_proto__free_unpacked(tp, NULL);
  return st;
}

mx_status mx_tensor_parse_pb(const void *data, size_t size, mx_tensor *t, char **name_out, mx_error *err) {
  mx_error_clear(err);
  if (name_out) *name_out = NULL;
  if (!t) return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "mx_tensor_parse_pb: tensor is NULL");
  memset(t, 0, sizeof *t);
  if (!data && size) return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "mx_tensor_parse_pb: data is NULL");
  return parse_tensor(data, size, "TensorProto", NULL, t, name_out, err);
}

mx_status mx_tensor_load_pb(const char *path, mx_tensor *t, char **name_out, mx_error *err) {
  mx_status st;
  uint8_t *buf = NULL;
  size_t size = 0;
  char *dir = NULL;
  mx_error_clear(err);
  if (name_out) *name_out = NULL;
  if (!t) return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "mx_tensor_load_pb: tensor is NULL");
  memset(t, 0, sizeof *t);
  if (!path) return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "mx_tensor_load_pb: path is NULL");
  st = mx__read_file(path, MX_ONNX_MAX_FILE_BYTES, &buf, &size, err);
  if (st != MX_OK) return st;
  dir = mx__onnx_dirname(path);
  if (!dir) {
    st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "%s: out of host memory", path);
    goto free_buf;
  }
  st = parse_tensor(buf, size, path, dir, t, name_out, err);
  free(dir);
free_buf:
  free(buf);
  return st;
}
