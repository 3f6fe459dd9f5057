/* Private helpers of the nn kernel files (nn.c, nn_attention.c, nn_rotary.c): lane-split float
 * reductions (the branch-free expf they use lives in kmath.h, shared with the elementwise
 * kernels), and the kernel definitions that nn.c lists in the group's exported array. */
#ifndef MIXRT_KERNELS_NN_IMPL_H
#define MIXRT_KERNELS_NN_IMPL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/kernel.h"
#include "kernels/kmath.h"

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
  for (int64_t i = 0; i < n; i++) y[i] = mx__kexpf_ftz(x[i] - m);
  return mx__ksum_f32(y, n);
}

extern const mx_kernel_def mx__kernel_attention_float;
extern const mx_kernel_def mx__kernel_attention_f64;
extern const mx_kernel_def mx__kernel_rotary;

#endif /* MIXRT_KERNELS_NN_IMPL_H */
