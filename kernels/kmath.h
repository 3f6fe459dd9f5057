/* Branch-free float32 math shared by the CPU kernels (Softmax, Attention, the unary Exp,
 * Sigmoid, Tanh and Erf, Gelu): exp, expm1 of non-positive arguments, sigmoid, tanh and erf written
 * without data-dependent branches or libm calls, so that gcc -O3 vectorizes the loops that call
 * them (libm's expf / tanhf are scalar calls and keep a loop scalar). Also the MX_KHOT marker
 * for hot functions that get AVX-512 and AVX2 copies, and the order-preserving integer key of a
 * float that min/max and clamping use instead of float compares.
 *
 * Accuracy: exp within 1.5 ulp over the whole float range (subnormal results included; a
 * cheaper variant for softmax flushes results below 2^-126 to 0),
 * sigmoid, tanh and erf within about 3 ulp (relative error below 2e-7). NaN in gives NaN out;
 * +-infinity and large |x| give the limits (0, 1, +-1, +inf) without overflow or NaN.
 *
 * Only the CPU kernel files include this header. */
#ifndef MIXRT_KERNELS_KMATH_H
#define MIXRT_KERNELS_KMATH_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* Marks a hot function: gcc also compiles it for x86-64-v4 (AVX-512) and x86-64-v3 (AVX2, FMA)
 * and picks the copy at load time, since the default build targets baseline x86-64 (SSE2). Not
 * under ThreadSanitizer: the copy is picked by a resolver that runs before the sanitizer's
 * runtime is ready. All copies round alike: C11 mode keeps gcc from contracting a * b + c into an
 * FMA, and the kernels fix their summation orders in explicit lanes (tests/kernels/
 * test_isa_copies.c runs every such kernel on this CPU and on emulated AVX2 and baseline CPUs and
 * compares the bits). */
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define MX_KHOT __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define MX_KHOT
#endif

static inline int32_t mx__kf32_as_i32(float x) {
  int32_t i;
  memcpy(&i, &x, sizeof i);
  return i;
}
static inline float mx__ki32_as_f32(int32_t i) {
  float f;
  memcpy(&f, &i, sizeof f);
  return f;
}

/* Order-preserving integer key of a float (for non-NaN values: a < b exactly when
 * key(a) < key(b)); NaNs land beyond the infinities. Integer min/max over keys vectorizes where
 * float compares would not (gcc keeps trapping float compares as branches). The map is its own
 * inverse. */
static inline int32_t mx__kfkey(float x) {
  int32_t i = mx__kf32_as_i32(x);
  return i ^ ((i >> 31) & 0x7fffffff);
}
static inline float mx__kfunkey(int32_t k) { return mx__ki32_as_f32(k ^ ((k >> 31) & 0x7fffffff)); }

/* exp(x) for float32 without branches or calls. Cody-Waite range reduction x = n*ln2 + r
 * (|r| <= ln2/2) and a degree-6 polynomial for exp(r), within 1.5 ulp of exp.
 *
 * full (a constant at every call site, so the unused variant compiles away): the result is
 * scaled by 2^n as 2^(n/2) * 2^(n - n/2), so n down to -150 (subnormal results, rounded once
 * by the last multiply) and up to 128 need no special case; arguments are clamped to
 * [-104, 88.7228317] through their integer keys: below, the result is 0 (exp(-104) is under
 * half the smallest subnormal), above, +infinity (the next float up overflows).
 * Not full: one scaling by 2^n and the clamp [-87, 88], so results below exp(-87) ~ 1.6e-38
 * flush to 0 and x above 88 gives +infinity; six vector operations fewer, for callers whose
 * arguments are <= 0 and whose tiny results do not matter (softmax weights next to the
 * maximum's 1). Both: NaN stays NaN, and results in the normal range are the same bits. */
static inline float mx__kexpf_core(float x, bool full) {
  const int32_t key_lo = full ? -1120927745 /* mx__kfkey(-104.0f) */ : -1118699521 /* mx__kfkey(-87.0f) */;
  const int32_t key_hi = full ? 1118925335 /* mx__kfkey(88.72283172607421875f) */ : 1118830592 /* (88.0f) */;
  int32_t ix = mx__kf32_as_i32(x);
  int32_t key = ix ^ ((ix >> 31) & 0x7fffffff);
  int32_t kc = key < key_lo ? key_lo : key;
  kc = kc > key_hi ? key_hi : kc;
  int32_t lo = -(int32_t)(key < key_lo);                    /* all ones: result 0 */
  int32_t hi = -(int32_t)(key > key_hi);                    /* all ones: result +inf */
  int32_t nan = -(int32_t)((ix & 0x7fffffff) > 0x7f800000); /* all ones: result x */
  float xc = mx__kfunkey(kc);
  float t = xc * 1.44269504088896341f + 12582912.0f; /* 1.5 * 2^23: rounds n into the low bits */
  float n = t - 12582912.0f;
  int32_t e = (int32_t)((uint32_t)mx__kf32_as_i32(t) - 0x4B400000u); /* n as an integer */
  float r = xc - n * 0.693145751953125f; /* ln2 split in two: n * hi is exact for |n| < 512 */
  r = r - n * 1.428606765330187045e-06f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  float res;
  if (full) {
    int32_t e1 = e / 2, e2 = e - e1; /* both in [-75, 64]: 2^e1 and 2^e2 are normal floats */
    float s1 = mx__ki32_as_f32((int32_t)((uint32_t)(e1 + 127) << 23));
    float s2 = mx__ki32_as_f32((int32_t)((uint32_t)(e2 + 127) << 23));
    res = p * s1 * s2; /* p * s1 is exact; the second product rounds once */
  } else {
    res = p * mx__ki32_as_f32((int32_t)((uint32_t)(e + 127) << 23)); /* n in [-126, 127] */
  }
  int32_t rb = mx__kf32_as_i32(res);
  rb &= ~lo;
  rb = (rb & ~hi) | (0x7f800000 & hi);
  rb = (rb & ~nan) | (ix & nan);
  return mx__ki32_as_f32(rb);
}

/* exp over the whole float range (the Exp op, sigmoid). */
static inline float mx__kexpf(float x) { return mx__kexpf_core(x, true); }
/* exp for arguments <= 0 where results below ~1.6e-38 may be 0 (softmax). */
static inline float mx__kexpf_ftz(float x) { return mx__kexpf_core(x, false); }

/* exp(y) - 1 for y <= 0 (or NaN), accurate also near 0 where exp(y) - 1 would cancel:
 * y = n*ln2 + r, expm1(r) by its Taylor series to r^8 (|r| <= ln2/2: truncation below 1e-9
 * relative), then expm1(y) = 2^n * expm1(r) + (2^n - 1), where 2^n - 1 is exact and the sum
 * does not cancel badly (|result| >= 0.29 when n != 0). Below -20 the result is -1 (it
 * rounds to -1 there anyway). NaN in gives NaN out; positive arguments are outside the
 * contract. */
static inline float mx__kexpm1_neg(float y) {
  const int32_t key_lo = -1101004801; /* mx__kfkey(-20.0f) */
  int32_t iy = mx__kf32_as_i32(y);
  int32_t key = iy ^ ((iy >> 31) & 0x7fffffff);
  int32_t nan = -(int32_t)((iy & 0x7fffffff) > 0x7f800000);
  int32_t kc = key < key_lo ? key_lo : key;
  float yc = mx__kfunkey(kc);
  float t = yc * 1.44269504088896341f + 12582912.0f;
  float n = t - 12582912.0f;
  int32_t e = (int32_t)((uint32_t)mx__kf32_as_i32(t) - 0x4B400000u); /* n, -29..0 */
  float r = yc - n * 0.693145751953125f;
  r = r - n * 1.428606765330187045e-06f;
  float p = 2.4801587302e-5f; /* 1/8! .. 1/2! */
  p = p * r + 1.9841269841e-4f;
  p = p * r + 1.3888888889e-3f;
  p = p * r + 8.3333333333e-3f;
  p = p * r + 4.1666666667e-2f;
  p = p * r + 1.6666666667e-1f;
  p = p * r + 0.5f;
  float em = p * (r * r) + r; /* expm1(r) */
  float s = mx__ki32_as_f32((int32_t)((uint32_t)(e + 127) << 23));
  int32_t rb = mx__kf32_as_i32(s * em + (s - 1.0f));
  rb = (rb & ~nan) | (iy & nan);
  return mx__ki32_as_f32(rb);
}

/* 1 / (1 + exp(-x)) without overflow: e = exp(-|x|) is in [0, 1], and the result is 1/(1+e)
 * for x >= 0 or e/(1+e) for x < 0: the numerator is picked by the sign bit before the one
 * division (e / d, not e * (1 / d): one rounding less). Large negative x gives the tiny
 * (subnormal, then 0) values e, large positive x gives 1. NaN propagates through e. */
static inline float mx__ksigmoidf(float x) {
  int32_t ix = mx__kf32_as_i32(x);
  float e = mx__kexpf(mx__ki32_as_f32(ix | INT32_MIN)); /* exp(-|x|) */
  int32_t m = ix >> 31;                                 /* all ones for negative x */
  float num = mx__ki32_as_f32((mx__kf32_as_i32(1.0f) & ~m) | (mx__kf32_as_i32(e) & m));
  return num / (1.0f + e);
}

/* tanh(x) = sign(x) * -expm1(-2|x|) / (2 + expm1(-2|x|)): no cancellation near 0 (tiny and
 * subnormal x give x back), +-1 for |x| above 10 and for infinities, NaN for NaN. */
static inline float mx__ktanhf(float x) {
  int32_t ix = mx__kf32_as_i32(x);
  float ax = mx__ki32_as_f32(ix & 0x7fffffff);
  float em = mx__kexpm1_neg(-2.0f * ax);
  float t = -em / (2.0f + em); /* in [0, 1], but -0 for x = +-0 */
  return mx__ki32_as_f32((mx__kf32_as_i32(t) & 0x7fffffff) | (ix & INT32_MIN));
}

/* erf(x) without branches or calls, within about 3 ulp (relative error below 2e-7):
 *   |x| < 1: x * P(x^2), P a degree-5 least-squares fit of erf(x)/x over [0, 1];
 *   |x| >= 1: 1 - exp(-x^2) * R(1/|x|), R a degree-8 fit of erfc(a) * exp(a^2) over a in
 *     [1, 4]; |x| is clamped to 4, where the result already rounds to 1.
 * Both halves are computed and one picked by the magnitude's bits, so the loops that call it
 * vectorize (libm's erff is a scalar call). The sign is put back at the end (erf is odd);
 * NaN in gives NaN out. */
static inline float mx__kerff(float x) {
  int32_t ix = mx__kf32_as_i32(x);
  int32_t ia = ix & 0x7fffffff;
  float a = mx__ki32_as_f32(ia);
  float t = a * a;
  float p = -5.6508538546e-04f;
  p = p * t + 4.9197794870e-03f;
  p = p * t + -2.6710286736e-02f;
  p = p * t + 1.1279986799e-01f;
  p = p * t + -3.7612265348e-01f;
  p = p * t + 1.1283791065e+00f;
  float near0 = a * p;
  /* 1.0f and 4.0f as bits: non-negative floats order like their bits */
  int32_t ic = ia < 0x3f800000 ? 0x3f800000 : ia;
  ic = ic > 0x40800000 ? 0x40800000 : ic;
  float ac = mx__ki32_as_f32(ic);
  float u = 1.0f / ac;
  float r = -1.0098984465e-02f;
  r = r * u + 3.1199961901e-02f;
  r = r * u + 1.9414380193e-02f;
  r = r * u + -2.3834717274e-01f;
  r = r * u + 4.9553957582e-01f;
  r = r * u + -4.7150075436e-01f;
  r = r * u + 4.2087357491e-02f;
  r = r * u + 5.5901646614e-01f;
  r = r * u + 2.7267227415e-04f;
  float far = 1.0f - mx__kexpf(-(ac * ac)) * r;
  int32_t small = -(int32_t)(ia < 0x3f800000); /* all ones: |x| < 1 */
  int32_t nan = -(int32_t)(ia > 0x7f800000);   /* all ones: result x */
  int32_t rb = (mx__kf32_as_i32(near0) & small) | (mx__kf32_as_i32(far) & ~small);
  rb |= ix & INT32_MIN;
  rb = (rb & ~nan) | (ix & nan);
  return mx__ki32_as_f32(rb);
}

#endif /* MIXRT_KERNELS_KMATH_H */
