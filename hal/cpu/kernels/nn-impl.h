/* Private helpers of the nn kernel files (nn.c, nn_attention.c, nn_rotary.c): a branch-free
 * expf that gcc vectorizes, lane-split float reductions, and the kernel definitions that nn.c
 * lists in the group's exported array. */
#ifndef MIXRT_HAL_CPU_KERNELS_NN_IMPL_H
#define MIXRT_HAL_CPU_KERNELS_NN_IMPL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "hal/cpu/kernels/kernel.h"

/* exp(x) for float32 without branches or calls, so loops over it vectorize: Cody-Waite range
 * reduction x = n*ln2 + r and a degree-6 polynomial for exp(r), within about 2 ulp of expf.
 * Below -87 it returns 0 (true values there are under 1.7e-38), above 88 +infinity, and NaN
 * stays NaN. Softmax-style callers pass x - max <= 0, where it is accurate. */
static inline float mx__kexpf(float x) {
  float xc = x < -87.0f ? -87.0f : x;
  xc = xc > 88.0f ? 88.0f : xc;
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
  res = x < -87.0f ? 0.0f : res;
  res = x > 88.0f ? INFINITY : res;
  return res;
}

/* Lanes of the split reductions below (independent accumulators vectorize without -ffast-math). */
#define MX_KLANES 8

/* max(x[0..n)) ignoring NaN (callers see NaN again through x - max); -inf for n == 0. */
static inline float mx__kmax_f32(const float *x, int64_t n) {
  float m[MX_KLANES];
  for (int j = 0; j < MX_KLANES; j++) m[j] = -INFINITY;
  int64_t i = 0;
  for (; i + MX_KLANES <= n; i += MX_KLANES)
    for (int j = 0; j < MX_KLANES; j++) m[j] = x[i + j] > m[j] ? x[i + j] : m[j];
  for (; i < n; i++) m[0] = x[i] > m[0] ? x[i] : m[0];
  float r = m[0];
  for (int j = 1; j < MX_KLANES; j++) r = m[j] > r ? m[j] : r;
  return r;
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

/* y[i] = exp(x[i] - m), returning the sum of the y (x and y may be the same buffer). */
static inline double mx__kexp_sum_f32(const float *x, float *y, int64_t n, float m) {
  float a[MX_KLANES] = {0};
  int64_t i = 0;
  for (; i + MX_KLANES <= n; i += MX_KLANES)
    for (int j = 0; j < MX_KLANES; j++) {
      float e = mx__kexpf(x[i + j] - m);
      y[i + j] = e;
      a[j] += e;
    }
  double s = 0.0;
  for (; i < n; i++) {
    float e = mx__kexpf(x[i] - m);
    y[i] = e;
    s += e;
  }
  for (int j = 0; j < MX_KLANES; j++) s += a[j];
  return s;
}

extern const mx_kernel_def mx__kernel_attention_float;
extern const mx_kernel_def mx__kernel_attention_f64;
extern const mx_kernel_def mx__kernel_rotary;

#endif /* MIXRT_HAL_CPU_KERNELS_NN_IMPL_H */
