/* Element types of mixrt tensors.
 *
 * The numeric values equal ONNX's TensorProto.DataType codes, so import and export need no
 * table. float16 and bfloat16 are stored as their 16-bit patterns; bool is one byte (0 or 1). */
#ifndef MIXRT_DTYPE_H
#define MIXRT_DTYPE_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum mx_dtype {
  MX_DTYPE_UNDEFINED = 0, /* not yet known (before inference) or absent */
  MX_FLOAT32 = 1,
  MX_UINT8 = 2,
  MX_INT8 = 3,
  MX_INT16 = 5,
  MX_INT32 = 6,
  MX_INT64 = 7,
  MX_BOOL = 9,
  MX_FLOAT16 = 10,
  MX_FLOAT64 = 11,
  MX_BFLOAT16 = 16
} mx_dtype;

/* Bytes per element; 0 for MX_DTYPE_UNDEFINED or a code mixrt does not support. */
size_t mx_dtype_size(mx_dtype dtype);

/* Lower-case name ("float32", "bfloat16", ...); "undefined" for unknown codes. */
const char *mx_dtype_name(mx_dtype dtype);

/* Parses a name as printed by mx_dtype_name (also accepts "float", "double", "half"). Returns
 * MX_DTYPE_UNDEFINED when the name is unknown. */
mx_dtype mx_dtype_from_name(const char *name);

/* True for the ten supported element types. */
bool mx_dtype_is_supported(int code);
bool mx_dtype_is_float(mx_dtype dtype);   /* float16, bfloat16, float32, float64 */
bool mx_dtype_is_integer(mx_dtype dtype); /* int8..int64, uint8 (not bool) */
bool mx_dtype_is_signed(mx_dtype dtype);  /* signed integers and floats */

#ifdef __cplusplus
}
#endif
#endif /* MIXRT_DTYPE_H */
