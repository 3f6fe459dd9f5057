/* Element type table: sizes, names and classes of the ten supported dtypes. */
#include <string.h>

#include "mixrt/dtype.h"

size_t mx_dtype_size(mx_dtype dtype) {
  switch (dtype) {
    case MX_FLOAT32: return 4;
    case MX_UINT8: return 1;
    case MX_INT8: return 1;
    case MX_INT16: return 2;
    case MX_INT32: return 4;
    case MX_INT64: return 8;
    case MX_BOOL: return 1;
    case MX_FLOAT16: return 2;
    case MX_FLOAT64: return 8;
    case MX_BFLOAT16: return 2;
    case MX_DTYPE_UNDEFINED: return 0;
  }
  return 0;
}

const char *mx_dtype_name(mx_dtype dtype) {
  switch (dtype) {
    case MX_FLOAT32: return "float32";
    case MX_UINT8: return "uint8";
    case MX_INT8: return "int8";
    case MX_INT16: return "int16";
    case MX_INT32: return "int32";
    case MX_INT64: return "int64";
    case MX_BOOL: return "bool";
    case MX_FLOAT16: return "float16";
    case MX_FLOAT64: return "float64";
    case MX_BFLOAT16: return "bfloat16";
    case MX_DTYPE_UNDEFINED: return "undefined";
  }
  return "undefined";
}

mx_dtype mx_dtype_from_name(const char *name) {
  static const struct {
    const char *name;
    mx_dtype dtype;
  } names[] = {
      {"float32", MX_FLOAT32}, {"float", MX_FLOAT32},     {"f32", MX_FLOAT32},
      {"uint8", MX_UINT8},     {"int8", MX_INT8},         {"int16", MX_INT16},
      {"int32", MX_INT32},     {"int64", MX_INT64},       {"bool", MX_BOOL},
      {"float16", MX_FLOAT16}, {"half", MX_FLOAT16},      {"f16", MX_FLOAT16},
      {"float64", MX_FLOAT64}, {"double", MX_FLOAT64},    {"f64", MX_FLOAT64},
      {"bfloat16", MX_BFLOAT16}, {"bf16", MX_BFLOAT16},
  };
  if (!name) return MX_DTYPE_UNDEFINED;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strcmp(name, names[i].name) == 0) return names[i].dtype;
  return MX_DTYPE_UNDEFINED;
}

bool mx_dtype_is_supported(int code) {
  return code != MX_DTYPE_UNDEFINED && mx_dtype_size((mx_dtype)code) != 0;
}

bool mx_dtype_is_float(mx_dtype d) {
  return d == MX_FLOAT32 || d == MX_FLOAT16 || d == MX_BFLOAT16 || d == MX_FLOAT64;
}

bool mx_dtype_is_integer(mx_dtype d) {
  return d == MX_UINT8 || d == MX_INT8 || d == MX_INT16 || d == MX_INT32 || d == MX_INT64;
}

bool mx_dtype_is_signed(mx_dtype d) {
  return mx_dtype_is_float(d) || d == MX_INT8 || d == MX_INT16 || d == MX_INT32 || d == MX_INT64;
}
