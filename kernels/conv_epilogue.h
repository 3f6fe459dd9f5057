/* The fused epilogue of the float32 Conv cores (kernels/conv_fast.c, kernels/conv_depthwise.c):
 * bias, an optional residual and the fused activation applied to a row of outputs while it is
 * still in cache. Inlined (always) into each ISA copy of its callers, so it vectorizes with
 * their target. */
#ifndef MIXRT_KERNELS_CONV_EPILOGUE_H
#define MIXRT_KERNELS_CONV_EPILOGUE_H

#include <stdint.h>

#include "graph/ops/conv_params.h"
#include "kernels/kmath.h"

/* Helpers inlined into each ISA copy of their callers. */
#define MX_KINLINE static inline __attribute__((always_inline))

/* out[i] = act(src[i] + bias (+ z[i])) for i < n; src may be out. */
MX_KINLINE void mx__kconv_epilogue_body(float *out, const float *src, const float *z, float bias, int64_t n,
                                        int32_t act, float a, float b) {
  if (z) {
    for (int64_t i = 0; i < n; i++) out[i] = (src[i] + bias) + z[i];
  } else if (bias != 0.0f || out != src) {
    for (int64_t i = 0; i < n; i++) out[i] = src[i] + bias;
  }
  switch (act) {
    case MX_CONV_ACT_RELU:
      for (int64_t i = 0; i < n; i++) out[i] = out[i] > 0.0f ? out[i] : 0.0f;
      break;
    case MX_CONV_ACT_CLIP:
      for (int64_t i = 0; i < n; i++) {
        float v = out[i];
        v = v < a ? a : v;
        out[i] = v > b ? b : v;
      }
      break;
    case MX_CONV_ACT_HARD_SIGMOID:
      for (int64_t i = 0; i < n; i++) {
        float t = a * out[i] + b;
        t = t > 0.0f ? t : 0.0f;
        out[i] = t < 1.0f ? t : 1.0f;
      }
      break;
    case MX_CONV_ACT_HARD_SWISH:
      for (int64_t i = 0; i < n; i++) {
        float v = out[i], t = v / 6.0f + 0.5f;
        t = t < 0.0f ? 0.0f : t;
        t = t > 1.0f ? 1.0f : t;
        out[i] = v * t;
      }
      break;
    case MX_CONV_ACT_SIGMOID:
      for (int64_t i = 0; i < n; i++) out[i] = mx__ksigmoidf(out[i]);
      break;
    case MX_CONV_ACT_SILU:
      for (int64_t i = 0; i < n; i++) out[i] = out[i] * mx__ksigmoidf(out[i]);
      break;
    default: break;
  }
}

#endif /* MIXRT_KERNELS_CONV_EPILOGUE_H */
