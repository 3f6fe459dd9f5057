/* Element type table: sizes, names and classes of the supported dtypes (every ONNX tensor type
 * but the complex types; strings only by name and pointer size, see mixrt/dtype.h). */
#include <string.h>

#include "mixrt/dtype.h"

int mx_dtype_bits(mx_dtype dtype) {
  switch (dtype) {
    case MX_FLOAT32: return 32;
    case MX_UINT8: return 8;
    case MX_INT8: return 8;
    case MX_UINT16: return 16;
    case MX_INT16: return 16;
    case MX_INT32: return 32;
    case MX_INT64: return 64;
    case MX_BOOL: return 8;
    case MX_FLOAT16: return 16;
    case MX_FLOAT64: return 64;
    case MX_UINT32: return 32;
    case MX_UINT64: return 64;
    case MX_BFLOAT16: return 16;
    case MX_FLOAT8E4M3FN:
    case MX_FLOAT8E4M3FNUZ:
    case MX_FLOAT8E5M2:
    case MX_FLOAT8E5M2FNUZ:
    case MX_FLOAT8E8M0: return 8;
    case MX_UINT4:
    case MX_INT4:
    case MX_FLOAT4E2M1: return 4;
    case MX_UINT2:
    case MX_INT2: return 2;
    case MX_STRING: /* no fixed width: see mx_dtype_size */
    case MX_DTYPE_UNDEFINED: return 0;
  }
  return 0;
}

size_t mx_dtype_size(mx_dtype dtype) {
  if (dtype == MX_STRING) return sizeof(char *); /* an array of pointers (mixrt/dtype.h) */
  int bits = mx_dtype_bits(dtype);
  if (bits == 0) return 0;
  return bits < 8 ? 1 : (size_t)bits / 8; /* sub-byte types: one element per byte */
}

size_t mx_dtype_packed_bytes(mx_dtype dtype, size_t n) {
  int bits = mx_dtype_bits(dtype);
  if (bits >= 8 || bits == 0) return n * mx_dtype_size(dtype);
  size_t per_byte = (size_t)(8 / bits);
  return n / per_byte + (n % per_byte != 0);
}

const char *mx_dtype_name(mx_dtype dtype) {
  switch (dtype) {
    case MX_FLOAT32: return "float32";
    case MX_UINT8: return "uint8";
    case MX_INT8: return "int8";
    case MX_UINT16: return "uint16";
    case MX_INT16: return "int16";
    case MX_INT32: return "int32";
    case MX_INT64: return "int64";
    case MX_STRING: return "string";
    case MX_BOOL: return "bool";
    case MX_FLOAT16: return "float16";
    case MX_FLOAT64: return "float64";
    case MX_UINT32: return "uint32";
    case MX_UINT64: return "uint64";
    case MX_BFLOAT16: return "bfloat16";
    case MX_FLOAT8E4M3FN: return "float8e4m3fn";
    case MX_FLOAT8E4M3FNUZ: return "float8e4m3fnuz";
    case MX_FLOAT8E5M2: return "float8e5m2";
    case MX_FLOAT8E5M2FNUZ: return "float8e5m2fnuz";
    case MX_UINT4: return "uint4";
    case MX_INT4: return "int4";
    case MX_FLOAT4E2M1: return "float4e2m1";
    case MX_FLOAT8E8M0: return "float8e8m0";
    case MX_UINT2: return "uint2";
    case MX_INT2: return "int2";
    case MX_DTYPE_UNDEFINED: return "undefined";
  }
  return "undefined";
}

mx_dtype mx_dtype_from_name(const char *name) {
  static const struct {
    const char *name;
    mx_dtype dtype;
  } aliases[] = {
      {"float", MX_FLOAT32},  {"f32", MX_FLOAT32}, {"half", MX_FLOAT16},  {"f16", MX_FLOAT16},
      {"double", MX_FLOAT64}, {"f64", MX_FLOAT64}, {"bf16", MX_BFLOAT16}, {"string", MX_STRING},
  };
  if (!name) return MX_DTYPE_UNDEFINED;
  for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
    if (strcmp(name, aliases[i].name) == 0) return aliases[i].dtype;
  for (int code = 1; code <= MX_DTYPE_MAX_CODE; code++)
    if (mx_dtype_is_supported(code) && strcmp(name, mx_dtype_name((mx_dtype)code)) == 0)
      return (mx_dtype)code;
  return MX_DTYPE_UNDEFINED;
}

bool mx_dtype_is_supported(int code) {
  return code > MX_DTYPE_UNDEFINED && code <= MX_DTYPE_MAX_CODE && mx_dtype_bits((mx_dtype)code) != 0;
}

bool mx_dtype_is_float(mx_dtype d) {
  return d == MX_FLOAT32 || d == MX_FLOAT16 || d == MX_BFLOAT16 || d == MX_FLOAT64;
}

bool mx_dtype_is_narrow_float(mx_dtype d) {
  return d == MX_FLOAT8E4M3FN || d == MX_FLOAT8E4M3FNUZ || d == MX_FLOAT8E5M2 || d == MX_FLOAT8E5M2FNUZ ||
         d == MX_FLOAT8E8M0 || d == MX_FLOAT4E2M1;
}

bool mx_dtype_is_integer(mx_dtype d) {
  return d == MX_UINT8 || d == MX_INT8 || d == MX_INT16 || d == MX_INT32 || d == MX_INT64 || d == MX_UINT16 ||
         d == MX_UINT32 || d == MX_UINT64;
}

bool mx_dtype_is_sub_byte_int(mx_dtype d) {
  return d == MX_UINT4 || d == MX_INT4 || d == MX_UINT2 || d == MX_INT2;
}

bool mx_dtype_is_unsigned(mx_dtype d) {
  return d == MX_UINT8 || d == MX_UINT16 || d == MX_UINT32 || d == MX_UINT64 || d == MX_UINT4 ||
         d == MX_UINT2;
}

bool mx_dtype_is_signed(mx_dtype d) {
  return mx_dtype_is_float(d) || d == MX_INT8 || d == MX_INT16 || d == MX_INT32 || d == MX_INT64 ||
         d == MX_INT4 || d == MX_INT2 || (mx_dtype_is_narrow_float(d) && d != MX_FLOAT8E8M0);
}
