/* Private helpers of the nn kernel files (nn.c, nn_attention.c, nn_rotary.c): a branch-free
 * expf that gcc vectorizes, lane-split float reductions, and the kernel definitions that nn.c
 * lists in the group's exported array. */
#ifndef MIXRT_HAL_CPU_KERNELS_NN_IMPL_H
#define MIXRT_HAL_CPU_KERNELS_NN_IMPL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "hal/cpu/kernels/kernel.h"

/* Marks a hot function: gcc also compiles it for x86-64-v3 (AVX2, FMA) and picks the copy at
 * load time, since the default build targets baseline x86-64 (SSE2). Not under ThreadSanitizer:
 * the copy is picked by a resolver that runs before the sanitizer's runtime is ready. */
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define MX_KHOT __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define MX_KHOT
#endif

/* Order-preserving integer key of a float (for non-NaN values: a < b exactly when
 * key(a) < key(b)); NaNs land beyond the infinities. Integer min/max over keys vectorizes where
 * float compares would not (gcc keeps trapping float compares as branches). The map is its own
 * inverse. */
static inline int32_t mx__kfkey(float x) {
  int32_t i;
  memcpy(&i, &x, sizeof i);
  return i ^ ((i >> 31) & 0x7fffffff);
}
static inline float mx__kfunkey(int32_t k) {
  int32_t i = k ^ ((k >> 31) & 0x7fffffff);
  float f;
  memcpy(&f, &i, sizeof f);
  return f;
}

/* exp(x) for float32 without branches or calls, so loops over it vectorize: Cody-Waite range
 * reduction x = n*ln2 + r and a degree-6 polynomial for exp(r), within 1.5 ulp of exp. Below
 * -87 it returns 0 (true values there are under 1.7e-38), above 88 +infinity, and NaN stays
 * NaN. Clamping and the special cases use integer keys and bit masks: no data-dependent
 * branches for the compiler to keep. */
static inline float mx__kexpf(float x) {
  const int32_t key_lo = -1118699521; /* mx__kfkey(-87.0f) */
  const int32_t key_hi = 1118830592;  /* mx__kfkey(88.0f) */
  int32_t ix;
  memcpy(&ix, &x, sizeof ix);
  int32_t key = ix ^ ((ix >> 31) & 0x7fffffff);
  int32_t kc = key < key_lo ? key_lo : key;
  kc = kc > key_hi ? key_hi : kc;
  int32_t lo = -(int32_t)(key < key_lo);                      /* all ones: result 0 */
  int32_t hi = -(int32_t)(key > key_hi);                      /* all ones: result +inf */
  int32_t nan = -(int32_t)((ix & 0x7fffffff) > 0x7f800000);   /* all ones: result x */
  float xc = mx__kfunkey(kc);
  float t = xc * 1.44269504088896341f + 12582912.0f; /* 1.5 * 2^23: rounds n into the low bits */
  float n = t - 12582912.0f;
  uint32_t tb;
  memcpy(&tb, &t, sizeof tb);
  uint32_t e = tb - 0x4B400000u; /* n as a two's-complement integer */
  float r = xc - n * 0.693145751953125f;
  r = r - n * 1.428606765330187045e-06f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  uint32_t sb = (e + 127u) << 23;
  float s;
  memcpy(&s, &sb, sizeof s);
  float res = p * s;
  int32_t rb;
  memcpy(&rb, &res, sizeof rb);
  rb &= ~lo;
  rb = (rb & ~hi) | (0x7f800000 & hi);
  rb = (rb & ~nan) | (ix & nan);
  memcpy(&res, &rb, sizeof res);
  return res;
}

/* Lanes of the split reductions below (independent accumulators vectorize without -ffast-math). */
#define MX_KLANES 8

/* max(x[0..n)) over integer keys; -inf for n == 0. A NaN may come out as the maximum (callers
 * then see NaN everywhere through x - max, like numpy) or be passed over (callers see it again
 * through exp(NaN - max)). */
static inline float mx__kmax_f32(const float *x, int64_t n) {
  int32_t m[MX_KLANES];
  for (int j = 0; j < MX_KLANES; j++) m[j] = mx__kfkey(-INFINITY);
  int64_t i = 0;
  for (; i + MX_KLANES <= n; i += MX_KLANES)
    for (int j = 0; j < MX_KLANES; j++) {
      int32_t k = mx__kfkey(x[i + j]);
      m[j] = k > m[j] ? k : m[j];
    }
  for (; i < n; i++) {
    int32_t k = mx__kfkey(x[i]);
    m[0] = k > m[0] ? k : m[0];
  }
  int32_t r = m[0];
  for (int j = 1; j < MX_KLANES; j++) r = m[j] > r ? m[j] : r;
  return mx__kfunkey(r);
}

/* Sum of x[0..n) in MX_KLANES float lanes, combined in double. */
static inline double mx__ksum_f32(const float *x, int64_t n) {
  float a[MX_KLANES] = {0};
  int64_t i = 0;
  for (; i + MX_KLANES <= n; i += MX_KLANES)
    for (int j = 0; j < MX_KLANES; j++) a[j] += x[i + j];
  double s = 0.0;
  for (; i < n; i++) s += x[i];
  for (int j = 0; j < MX_KLANES; j++) s += a[j];
  return s;
}

/* y[i] = exp(x[i] - m), returning the sum of the y (x and y may be the same buffer). The exp
 * pass and the sum are separate loops: each vectorizes cleanly, and the row is hot in cache. */
static inline double mx__kexp_sum_f32(const float *x, float *y, int64_t n, float m) {
  for (int64_t i = 0; i < n; i++) y[i] = mx__kexpf(x[i] - m);
  return mx__ksum_f32(y, n);
}

extern const mx_kernel_def mx__kernel_attention_float;
extern const mx_kernel_def mx__kernel_attention_f64;
extern const mx_kernel_def mx__kernel_rotary;

#endif /* MIXRT_HAL_CPU_KERNELS_NN_IMPL_H */
