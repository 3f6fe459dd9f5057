/* Element types of mixrt tensors.
 *
 * The numeric values equal ONNX's TensorProto.DataType codes, so import and export need no
 * table. float16 and bfloat16 are stored as their 16-bit patterns; bool is one byte (0 or 1).
 *
 * Narrow types. The 8-bit floats (float8e4m3fn, float8e4m3fnuz, float8e5m2, float8e5m2fnuz,
 * float8e8m0) are one byte holding their bit pattern. The sub-byte types (uint4, int4,
 * float4e2m1, uint2, int2) are also held one element per byte in a mixrt tensor, so every
 * kernel can index them like uint8: int4/int2 sign-extended into an int8, uint4/uint2 as a
 * uint8 in 0..15 / 0..3, float4e2m1 as its 4-bit pattern in the low bits (high bits 0). ONNX
 * files pack them two (4-bit) or four (2-bit) to a byte, low bits first; the ONNX importer
 * unpacks raw_data/int32_data on load and the exporter packs them again, so mx_dtype_size is 1
 * for them and mx_dtype_bits tells the packed width. Kernels compute with the narrow floats by
 * converting to float32 (common/float8.h).
 *
 * Strings. MX_STRING (ONNX code 8) is a host-only type: a string tensor's data is an array of
 * numel `char *`, each a NUL-terminated UTF-8 string of its own malloc (or, for tensors a graph
 * holds - initializers, attribute tensors - of the graph's arena); a NULL entry reads as "".
 * mx_dtype_size(MX_STRING) is sizeof(char *), but the bytes are pointers, so code that copies
 * tensor data by bytes must not take strings: mx_dtype_is_supported(MX_STRING) is false and
 * mx_dtype_bits(MX_STRING) is 0, so every path built on those refuses string tensors, and only
 * the paths that say so take them: ONNX import (string_data), TensorProto .pb loading, the
 * reference interpreter (string kernels, host values, comparison), mx_tensor_alloc/release.
 * Static models, device uploads and .npy files refuse them. */
#ifndef MIXRT_DTYPE_H
#define MIXRT_DTYPE_H

#include <stdbool.h>
#include <stddef.h>

#include "mixrt/api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum mx_dtype {
  MX_DTYPE_UNDEFINED = 0, /* not yet known (before inference) or absent */
  MX_FLOAT32 = 1,
  MX_UINT8 = 2,
  MX_INT8 = 3,
  MX_UINT16 = 4,
  MX_INT16 = 5,
  MX_INT32 = 6,
  MX_INT64 = 7,
  MX_STRING = 8, /* host only: an array of char * (see above) */
  MX_BOOL = 9,
  MX_FLOAT16 = 10,
  MX_FLOAT64 = 11,
  MX_UINT32 = 12,
  MX_UINT64 = 13,
  MX_BFLOAT16 = 16,
  MX_FLOAT8E4M3FN = 17,   /* 1 sign, 4 exponent, 3 mantissa bits; no infinity, NaN = S.1111.111 */
  MX_FLOAT8E4M3FNUZ = 18, /* as e4m3fn with bias 8; no -0, NaN = 0x80 */
  MX_FLOAT8E5M2 = 19,     /* IEEE-like: infinities and NaNs */
  MX_FLOAT8E5M2FNUZ = 20, /* bias 16; no infinity, no -0, NaN = 0x80 */
  MX_UINT4 = 21,
  MX_INT4 = 22,
  MX_FLOAT4E2M1 = 23, /* 1 sign, 2 exponent, 1 mantissa bit; no infinity or NaN */
  MX_FLOAT8E8M0 = 24, /* an unsigned power of two 2^(e-127); 0xFF is NaN */
  MX_UINT2 = 25,
  MX_INT2 = 26
} mx_dtype;

/* Highest mx_dtype code (bit masks over dtypes fit in 32 bits). */
#define MX_DTYPE_MAX_CODE 26

/* Bytes per element in a mixrt tensor (1 for the sub-byte types, sizeof(char *) for strings, see
 * above); 0 for MX_DTYPE_UNDEFINED or a code mixrt does not support. */
MX_API size_t mx_dtype_size(mx_dtype dtype);
/* Bits per element as ONNX stores it: 2, 4, 8, 16, 32 or 64; 0 when unsupported or a string. */
MX_API int mx_dtype_bits(mx_dtype dtype);

/* Lower-case name ("float32", "bfloat16", ...); "undefined" for unknown codes. */
MX_API const char *mx_dtype_name(mx_dtype dtype);

/* Parses a name as printed by mx_dtype_name (also accepts "float", "double", "half"). Returns
 * MX_DTYPE_UNDEFINED when the name is unknown. */
MX_API mx_dtype mx_dtype_from_name(const char *name);

/* True for every fixed-width element type above (all ONNX tensor types but string and complex);
 * false for MX_STRING, which only the paths listed above take. */
MX_API bool mx_dtype_is_supported(int code);
MX_API bool mx_dtype_is_float(mx_dtype dtype); /* float16, bfloat16, float32, float64 */
/* The 8-bit and 4-bit floats: float8e4m3fn/fnuz, float8e5m2/fnuz, float8e8m0, float4e2m1. */
MX_API bool mx_dtype_is_narrow_float(mx_dtype dtype);
/* int8..int64 and uint8..uint64 (not bool, not the sub-byte integers). */
MX_API bool mx_dtype_is_integer(mx_dtype dtype);
/* int4, uint4, int2, uint2. */
MX_API bool mx_dtype_is_sub_byte_int(mx_dtype dtype);
MX_API bool mx_dtype_is_unsigned(mx_dtype dtype); /* uint2..uint64 */
MX_API bool mx_dtype_is_signed(mx_dtype dtype);   /* signed integers (int2..int64) and floats but e8m0 */
/* Packed bytes of n elements of a sub-byte type as ONNX stores them (n * bits / 8 rounded up);
 * n * mx_dtype_size for the other types. */
MX_API size_t mx_dtype_packed_bytes(mx_dtype dtype, size_t n);

#ifdef __cplusplus
}
#endif
#endif /* MIXRT_DTYPE_H */
