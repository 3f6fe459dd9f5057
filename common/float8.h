/* Conversions between the narrow floats (float8e4m3fn, float8e4m3fnuz, float8e5m2,
 * float8e5m2fnuz, float4e2m1, float8e8m0) and float/double, as ONNX Cast defines them.
 *
 * Decoding is exact. Encoding rounds to nearest even once, from double (so a float64 source is
 * not rounded twice). Out-of-range values follow Cast's `saturate` rules (opset 19+):
 *   saturate:    |x| beyond the largest finite value (infinities included) becomes +/-max;
 *   no saturate: it becomes NaN, or +/-infinity for float8e5m2 (the only one with infinities).
 * "Beyond" means after rounding: a value within half a step above max still rounds to max.
 * The "uz" types have no negative zero (-0 encodes as 0) and one NaN (0x80). float4e2m1 has no
 * NaN or infinity: NaN encodes as -0 (0x8), like the ONNX reference. float8e8m0 holds
 * 2^(e-127) for e in 0..254 (0xFF is NaN) and is converted by its own function with a rounding
 * mode (up, down or nearest power of two). */
#ifndef MIXRT_COMMON_FLOAT8_H
#define MIXRT_COMMON_FLOAT8_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "mixrt/dtype.h"

/* Layout of one narrow float format (all but e8m0). */
typedef struct mx__f8_format {
  int man_bits; /* mantissa bits */
  int bias;     /* exponent bias */
  int max_code; /* largest finite positive code (sign bit clear) */
  int sign_bit; /* 0x80, or 0x08 for float4e2m1 */
  bool uz;      /* no negative zero; 0x80 is the only NaN */
  bool has_inf; /* float8e5m2: infinities at exponent all ones, mantissa 0 */
  int nan_code; /* positive NaN code (sign may be added for non-uz types); -1: none */
} mx__f8_format;

static inline const mx__f8_format *mx__f8_format_of(mx_dtype dt) {
  static const mx__f8_format e4m3fn = {3, 7, 0x7E, 0x80, false, false, 0x7F};
  static const mx__f8_format e4m3fnuz = {3, 8, 0x7F, 0x80, true, false, 0x80};
  static const mx__f8_format e5m2 = {2, 15, 0x7B, 0x80, false, true, 0x7E};
  static const mx__f8_format e5m2fnuz = {2, 16, 0x7F, 0x80, true, false, 0x80};
  static const mx__f8_format e2m1 = {1, 1, 0x7, 0x08, false, false, -1};
  switch (dt) {
    case MX_FLOAT8E4M3FN: return &e4m3fn;
    case MX_FLOAT8E4M3FNUZ: return &e4m3fnuz;
    case MX_FLOAT8E5M2: return &e5m2;
    case MX_FLOAT8E5M2FNUZ: return &e5m2fnuz;
    case MX_FLOAT4E2M1: return &e2m1;
    default: return 0;
  }
}

/* Value of code c of format f (exact in float). */
static inline float mx__f8_decode(const mx__f8_format *f, uint8_t c) {
  int mag = c & (f->sign_bit - 1);
  bool neg = (c & f->sign_bit) != 0;
  if (f->uz) {
    if (c == 0x80) return NAN;
  } else if (f->has_inf) {
    if ((mag >> f->man_bits) == (0x7F >> f->man_bits))
      return (mag & ((1 << f->man_bits) - 1)) ? NAN : (neg ? -INFINITY : INFINITY);
  } else if (f->nan_code >= 0 && mag == f->nan_code) {
    return NAN;
  }
  int exp_field = mag >> f->man_bits, man = mag & ((1 << f->man_bits) - 1);
  float v = exp_field == 0 ? ldexpf((float)man, 1 - f->bias - f->man_bits)
                           : ldexpf((float)((1 << f->man_bits) + man), exp_field - f->bias - f->man_bits);
  return neg ? -v : v;
}

/* Rounds v to the nearest code of format f (ties to even), with Cast's saturate rules. */
static inline uint8_t mx__f8_encode(const mx__f8_format *f, double v, bool saturate) {
  int sign = signbit(v) ? f->sign_bit : 0;
  int nan = f->nan_code < 0 ? f->sign_bit : f->uz ? f->nan_code : (f->nan_code | sign);
  if (isnan(v)) return (uint8_t)nan;
  double a = fabs(v);
  int emin = 1 - f->bias; /* exponent of the smallest normal */
  int code;
  int e = 0;
  if (a != 0.0 && !isinf(a)) {
    (void)frexp(a, &e);
    e -= 1; /* a = 1.m * 2^e */
  }
  if (isinf(a) || e > 32) { /* 2^32 is far beyond every format's largest value */
    code = f->max_code + 1;
  } else if (a == 0.0) {
    code = 0;
  } else {
    if (e < emin) e = emin;
    /* mantissa counted in steps of the binade's spacing; its parity is the code's */
    double r = rint(ldexp(a, f->man_bits - e));
    code = ((e - emin) << f->man_bits) + (int)r;
  }
  if (code > f->max_code) {
    if (saturate) return (uint8_t)(f->max_code | sign);
    if (f->has_inf) return (uint8_t)((0x7F & ~((1 << f->man_bits) - 1)) | sign);
    return (uint8_t)nan;
  }
  if (code == 0 && f->uz) return 0;
  return (uint8_t)(code | sign);
}

/* float8e8m0: 2^(c-127), 0xFF is NaN. */
static inline float mx__e8m0_decode(uint8_t c) {
  if (c == 0xFF) return NAN;
  return ldexpf(1.0f, (int)c - 127);
}

/* Rounding modes of a float8e8m0 target (Cast's round_mode). */
enum { MX__E8M0_UP = 0, MX__E8M0_DOWN = 1, MX__E8M0_NEAREST = 2 };

/* The float32 exponent of |v| rounded by `mode` on its mantissa bits: up rounds any remainder
 * up, down drops it, nearest rounds half up; NaN (and infinity unless saturating) is 0xFF,
 * values past 2^127 saturate to 0xFE or become NaN. */
static inline uint8_t mx__e8m0_encode(float v, int mode, bool saturate) {
  uint32_t u;
  memcpy(&u, &v, 4);
  uint32_t exp = (u >> 23) & 0xFF, man = u & 0x7FFFFF;
  if (exp == 0xFF) {
    if (man || !saturate) return 0xFF;
    return 0xFE;
  }
  if (exp == 0) { /* a float32 subnormal lies below 2^-126; 2^-127 is its mantissa 0x400000 */
    if (mode == MX__E8M0_UP) return man > 0x400000;
    if (mode == MX__E8M0_NEAREST) return man >= 0x600000;
    return 0;
  }
  if (mode == MX__E8M0_UP && man) exp++;
  if (mode == MX__E8M0_NEAREST && (man & 0x400000)) exp++;
  if (exp == 0xFF) return saturate ? 0xFE : 0xFF;
  return (uint8_t)exp;
}

/* Any narrow float code -> float. */
static inline float mx__narrow_to_f32(mx_dtype dt, uint8_t c) {
  if (dt == MX_FLOAT8E8M0) return mx__e8m0_decode(c);
  return mx__f8_decode(mx__f8_format_of(dt), c);
}

/* double -> narrow float code (e8m0 rounds up, as Cast's default round_mode). */
static inline uint8_t mx__narrow_from_f64(mx_dtype dt, double v, bool saturate) {
  if (dt == MX_FLOAT8E8M0) return mx__e8m0_encode((float)v, MX__E8M0_UP, saturate);
  return mx__f8_encode(mx__f8_format_of(dt), v, saturate);
}

#endif /* MIXRT_COMMON_FLOAT8_H */
