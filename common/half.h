/* float16 and bfloat16 <-> float32 conversions.
 *
 * Kernels compute 16-bit types in float32 and round once on store (round to nearest even,
 * NaN stays NaN, overflow becomes infinity), as the ONNX reference does. */
#ifndef MIXRT_COMMON_HALF_H
#define MIXRT_COMMON_HALF_H

#include <stdint.h>
#include <string.h>

static inline uint32_t mx__f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static inline float mx__bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static inline float mx__f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t man = h & 0x3ff;
  if (exp == 0x1f) return mx__bits_f32(sign | 0x7f800000u | (man << 13)); /* inf / nan */
  if (exp == 0) {
    if (man == 0) return mx__bits_f32(sign);
    /* subnormal: value = man * 2^-24 */
    float v = (float)man * 5.9604644775390625e-08f;
    return sign ? -v : v;
  }
  return mx__bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

static inline uint16_t mx__f32_to_f16(float f) {
  uint32_t u = mx__f32_bits(f);
  uint32_t sign = (u >> 16) & 0x8000;
  uint32_t exp = (u >> 23) & 0xff;
  uint32_t man = u & 0x7fffff;
  if (exp == 0xff) return (uint16_t)(sign | 0x7c00 | (man ? 0x200 | (man >> 13) : 0));
  int32_t e = (int32_t)exp - 127 + 15;
  if (e >= 31) return (uint16_t)(sign | 0x7c00); /* overflow -> inf */
  if (e <= 0) {
    if (e < -10) return (uint16_t)sign; /* underflow -> signed zero */
    man |= 0x800000;
    uint32_t shift = (uint32_t)(14 - e);
    uint32_t half_man = man >> shift;
    uint32_t rem = man & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half_man & 1))) half_man++;
    return (uint16_t)(sign | half_man);
  }
  uint32_t h = sign | ((uint32_t)e << 10) | (man >> 13);
  uint32_t rem = man & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++; /* may carry into exp: still correct */
  return (uint16_t)h;
}

static inline float mx__bf16_to_f32(uint16_t b) { return mx__bits_f32((uint32_t)b << 16); }

static inline uint16_t mx__f32_to_bf16(float f) {
  uint32_t u = mx__f32_bits(f);
  if ((u & 0x7fffffff) > 0x7f800000) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
  uint32_t lsb = (u >> 16) & 1;
  u += 0x7fff + lsb;
  return (uint16_t)(u >> 16);
}

#endif /* MIXRT_COMMON_HALF_H */
