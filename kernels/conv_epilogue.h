/* The fused epilogue of the float32 Conv cores (kernels/conv_fast.c, kernels/conv_depthwise.c):
 * bias, an optional residual and the fused activation applied to a row of outputs while it is
 * still in cache. Inlined (always) into each ISA copy of its callers, so it vectorizes with
 * their target. */
#ifndef MIXRT_KERNELS_CONV_EPILOGUE_H
#define MIXRT_KERNELS_CONV_EPILOGUE_H

#include <stdbool.h>
#include <stdint.h>

#include "graph/ops/conv_params.h"
#include "kernels/kmath.h"

/* Helpers inlined into each ISA copy of their callers. */
#define MX_KINLINE static inline __attribute__((always_inline))

/* One pass over the row: v = src[i] + bias (+ z[i]), then ACT (an expression of v) stored to
 * out[i]. The bias is not added when it is 0 in place, so -0 sums stay -0 as before. */
#define MX__KCONV_EPILOGUE_LOOP(ACT)                                        \
  do {                                                                     \
    if (z) {                                                               \
      for (int64_t i = 0; i < n; i++) {                                    \
        float v = (src[i] + bias) + z[i];                                  \
        out[i] = (ACT);                                                    \
      }                                                                    \
    } else if (add_bias) {                                                 \
      for (int64_t i = 0; i < n; i++) {                                    \
        float v = src[i] + bias;                                           \
        out[i] = (ACT);                                                    \
      }                                                                    \
    } else {                                                               \
      for (int64_t i = 0; i < n; i++) {                                    \
        float v = src[i];                                                  \
        out[i] = (ACT);                                                    \
      }                                                                    \
    }                                                                      \
  } while (0)

/* max(lo, min(hi, t)) in the order the activations clamp: t < lo first, then t > hi. */
MX_KINLINE float mx__kconv_clamp(float t, float lo, float hi) {
  t = t < lo ? lo : t;
  return t > hi ? hi : t;
}

/* HardSigmoid's a * v + b clamped to [0, 1] (the max with 0 first, as ONNX states it). */
MX_KINLINE float mx__kconv_hard_sigmoid(float v, float a, float b) {
  float t = a * v + b;
  t = t > 0.0f ? t : 0.0f;
  return t < 1.0f ? t : 1.0f;
}

/* out[i] = act(src[i] + bias (+ z[i])) for i < n; src may be out. One pass, so a row is read
 * and written once whatever the activation. HardSwish multiplies by 1/6 as the HardSwish
 * kernel does (kernels/activation.c), so fused and unfused give the same bits, and no lane
 * waits on a division. */
MX_KINLINE void mx__kconv_epilogue_body(float *out, const float *src, const float *z, float bias, int64_t n,
                                        int32_t act, float a, float b) {
  const bool add_bias = bias != 0.0f || out != src;
  switch (act) {
    case MX_CONV_ACT_RELU: MX__KCONV_EPILOGUE_LOOP(v > 0.0f ? v : 0.0f); break;
    case MX_CONV_ACT_CLIP: MX__KCONV_EPILOGUE_LOOP(mx__kconv_clamp(v, a, b)); break;
    case MX_CONV_ACT_HARD_SIGMOID: MX__KCONV_EPILOGUE_LOOP(mx__kconv_hard_sigmoid(v, a, b)); break;
    case MX_CONV_ACT_HARD_SWISH: MX__KCONV_EPILOGUE_LOOP(v * mx__kconv_clamp(v * (1.0f / 6.0f) + 0.5f, 0.0f, 1.0f)); break;
    case MX_CONV_ACT_SIGMOID: MX__KCONV_EPILOGUE_LOOP(mx__ksigmoidf(v)); break;
    case MX_CONV_ACT_SILU: MX__KCONV_EPILOGUE_LOOP(v * mx__ksigmoidf(v)); break;
    default:
      if (z || add_bias) MX__KCONV_EPILOGUE_LOOP(v);
      break;
  }
}

#endif /* MIXRT_KERNELS_CONV_EPILOGUE_H */
