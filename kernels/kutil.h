/* Helpers shared by CPU kernels: reading and writing elements of any dtype as double or int64
 * (the slow generic path for rare dtypes, including the narrow floats and the sub-byte integers,
 * which mixrt holds one element per byte: see mixrt/dtype.h), float16/bfloat16 conversion of whole rows (the fast
 * path computes 16-bit types in float32 and rounds once), and broadcast index mapping. */
#ifndef MIXRT_KERNELS_KUTIL_H
#define MIXRT_KERNELS_KUTIL_H

#include <stdint.h>

#include "common/float8.h"
#include "common/half.h"
#include "kernels/kernel.h"

/* Element i of a buffer of dtype dt, as double. */
static inline double mx__kget_f64(const void *p, mx_dtype dt, int64_t i) {
  switch (dt) {
    case MX_FLOAT32: return ((const float *)p)[i];
    case MX_FLOAT64: return ((const double *)p)[i];
    case MX_FLOAT16: return mx__f16_to_f32(((const uint16_t *)p)[i]);
    case MX_BFLOAT16: return mx__bf16_to_f32(((const uint16_t *)p)[i]);
    case MX_INT8: return ((const int8_t *)p)[i];
    case MX_UINT8: return ((const uint8_t *)p)[i];
    case MX_INT16: return ((const int16_t *)p)[i];
    case MX_INT32: return ((const int32_t *)p)[i];
    case MX_INT64: return (double)((const int64_t *)p)[i];
    case MX_BOOL: return ((const uint8_t *)p)[i] ? 1.0 : 0.0;
    case MX_UINT16: return ((const uint16_t *)p)[i];
    case MX_UINT32: return ((const uint32_t *)p)[i];
    case MX_UINT64: return (double)((const uint64_t *)p)[i];
    case MX_INT4:
    case MX_INT2: return ((const int8_t *)p)[i];
    case MX_UINT4:
    case MX_UINT2: return ((const uint8_t *)p)[i];
    case MX_FLOAT8E4M3FN:
    case MX_FLOAT8E4M3FNUZ:
    case MX_FLOAT8E5M2:
    case MX_FLOAT8E5M2FNUZ:
    case MX_FLOAT4E2M1:
    case MX_FLOAT8E8M0: return mx__narrow_to_f32(dt, ((const uint8_t *)p)[i]);
    case MX_STRING: /* no numeric value: string kernels read char * */
    case MX_DTYPE_UNDEFINED: break;
  }
  return 0.0;
}

/* Element i of an integer or bool buffer as int64 (floats are truncated toward zero; uint64
 * values past INT64_MAX come back as their two's-complement bit pattern). */
static inline int64_t mx__kget_i64(const void *p, mx_dtype dt, int64_t i) {
  switch (dt) {
    case MX_INT8:
    case MX_INT4:
    case MX_INT2: return ((const int8_t *)p)[i];
    case MX_UINT8:
    case MX_UINT4:
    case MX_UINT2: return ((const uint8_t *)p)[i];
    case MX_UINT16: return ((const uint16_t *)p)[i];
    case MX_UINT32: return ((const uint32_t *)p)[i];
    case MX_UINT64: return (int64_t)((const uint64_t *)p)[i];
    case MX_INT16: return ((const int16_t *)p)[i];
    case MX_INT32: return ((const int32_t *)p)[i];
    case MX_INT64: return ((const int64_t *)p)[i];
    case MX_BOOL: return ((const uint8_t *)p)[i] != 0;
    default: return (int64_t)mx__kget_f64(p, dt, i);
  }
}

/* Stores an int64 into a sub-byte integer buffer, keeping its low 4 or 2 bits (wrapping like a
 * C cast; int4/int2 sign-extended so the byte holds the value). */
static inline void mx__kset_sub_byte(void *p, mx_dtype dt, int64_t i, int64_t v) {
  int bits = dt == MX_INT4 || dt == MX_UINT4 ? 4 : 2;
  uint8_t low = (uint8_t)((uint64_t)v & ((1u << bits) - 1));
  if ((dt == MX_INT4 || dt == MX_INT2) && (low >> (bits - 1))) low = (uint8_t)(low | (0xFFu << bits));
  ((uint8_t *)p)[i] = low;
}

/* Stores v (rounded once for 16-bit floats) as element i of a buffer of dtype dt. */
static inline void mx__kset_f64(void *p, mx_dtype dt, int64_t i, double v) {
  switch (dt) {
    case MX_FLOAT32: ((float *)p)[i] = (float)v; break;
    case MX_FLOAT64: ((double *)p)[i] = v; break;
    case MX_FLOAT16: ((uint16_t *)p)[i] = mx__f32_to_f16((float)v); break;
    case MX_BFLOAT16: ((uint16_t *)p)[i] = mx__f32_to_bf16((float)v); break;
    case MX_INT8: ((int8_t *)p)[i] = (int8_t)v; break;
    case MX_UINT8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case MX_INT16: ((int16_t *)p)[i] = (int16_t)v; break;
    case MX_INT32: ((int32_t *)p)[i] = (int32_t)v; break;
    case MX_INT64: ((int64_t *)p)[i] = (int64_t)v; break;
    case MX_BOOL: ((uint8_t *)p)[i] = v != 0.0; break;
    case MX_UINT16: ((uint16_t *)p)[i] = (uint16_t)v; break;
    case MX_UINT32: ((uint32_t *)p)[i] = (uint32_t)v; break;
    case MX_UINT64: ((uint64_t *)p)[i] = v < 0 ? (uint64_t)(int64_t)v : (uint64_t)v; break;
    case MX_INT4:
    case MX_INT2:
    case MX_UINT4:
    case MX_UINT2: mx__kset_sub_byte(p, dt, i, (int64_t)v); break;
    case MX_FLOAT8E4M3FN:
    case MX_FLOAT8E4M3FNUZ:
    case MX_FLOAT8E5M2:
    case MX_FLOAT8E5M2FNUZ:
    case MX_FLOAT4E2M1:
    case MX_FLOAT8E8M0: ((uint8_t *)p)[i] = mx__narrow_from_f64(dt, v, true); break;
    case MX_STRING: /* no numeric value: string kernels read char * */
    case MX_DTYPE_UNDEFINED: break;
  }
}

/* Stores an int64 as element i of an integer or bool buffer (wrapping like a C cast). */
static inline void mx__kset_i64(void *p, mx_dtype dt, int64_t i, int64_t v) {
  switch (dt) {
    case MX_INT8: ((int8_t *)p)[i] = (int8_t)v; break;
    case MX_UINT8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case MX_INT16: ((int16_t *)p)[i] = (int16_t)v; break;
    case MX_INT32: ((int32_t *)p)[i] = (int32_t)v; break;
    case MX_INT64: ((int64_t *)p)[i] = v; break;
    case MX_BOOL: ((uint8_t *)p)[i] = v != 0; break;
    case MX_UINT16: ((uint16_t *)p)[i] = (uint16_t)v; break;
    case MX_UINT32: ((uint32_t *)p)[i] = (uint32_t)v; break;
    case MX_UINT64: ((uint64_t *)p)[i] = (uint64_t)v; break;
    case MX_INT4:
    case MX_INT2:
    case MX_UINT4:
    case MX_UINT2: mx__kset_sub_byte(p, dt, i, v); break;
    default: mx__kset_f64(p, dt, i, (double)v); break;
  }
}

/* Converts n 16-bit floats (dt FLOAT16 or BFLOAT16) to float32, and back (rounding once). */
static inline void mx__khalf_to_f32(const uint16_t *src, mx_dtype dt, float *dst, int64_t n) {
  if (dt == MX_FLOAT16)
    for (int64_t i = 0; i < n; i++) dst[i] = mx__f16_to_f32(src[i]);
  else
    for (int64_t i = 0; i < n; i++) dst[i] = mx__bf16_to_f32(src[i]);
}
static inline void mx__kf32_to_half(const float *src, mx_dtype dt, uint16_t *dst, int64_t n) {
  if (dt == MX_FLOAT16)
    for (int64_t i = 0; i < n; i++) dst[i] = mx__f32_to_f16(src[i]);
  else
    for (int64_t i = 0; i < n; i++) dst[i] = mx__f32_to_bf16(src[i]);
}

/* Strides (in elements) that read tensor `in` broadcast to `out_rank` dims of the output:
 * 0 where `in` has size 1 (or is missing a leading dim). */
static inline void mx__kbroadcast_strides(const mx_ktensor *in, int32_t out_rank, int64_t *strides) {
  int32_t off = out_rank - in->rank;
  int64_t s = 1;
  for (int32_t i = out_rank - 1; i >= 0; i--) {
    int32_t k = i - off;
    if (k < 0) {
      strides[i] = 0;
      continue;
    }
    strides[i] = in->dims[k] == 1 ? 0 : s;
    s *= in->dims[k];
  }
}

#endif /* MIXRT_KERNELS_KUTIL_H */
