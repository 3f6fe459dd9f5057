/* Params structs of the elementwise ops (graph/ops/elementwise*.c), read by the CPU kernels in
 * kernels/elementwise*.c. Plain old data: they are copied, hashed and serialized byte
 * for byte, so no pointers and no implicit padding. */
#ifndef MIXRT_GRAPH_OPS_ELEMENTWISE_PARAMS_H
#define MIXRT_GRAPH_OPS_ELEMENTWISE_PARAMS_H

#include <stdint.h>

/* Binary ops with broadcasting (Add, Sub, Mul, Div, Pow, comparisons, logic). Before opset 7
 * ONNX used "legacy" broadcasting: B is aligned with A starting at dim `axis` instead of at the
 * trailing dims. */
typedef struct mx_binary_params {
  int32_t legacy; /* 1: legacy broadcasting with an explicit axis; 0: numpy broadcasting */
  int32_t axis;   /* legacy: A's dim that B's dim 0 aligns with (may be negative) */
} mx_binary_params;

/* Mod. */
typedef struct mx_mod_params {
  int32_t fmod;     /* 1: sign of the dividend (C fmod); 0: sign of the divisor (integers) */
  int32_t reserved; /* always 0 */
} mx_mod_params;

/* Cast. */
typedef struct mx_cast_params {
  int32_t to;         /* target mx_dtype */
  int32_t saturate;   /* ONNX 'saturate' (float8 targets): 1 clamps out-of-range values */
  int32_t round_mode; /* float8e8m0 targets: 0 up, 1 down, 2 nearest (common/float8.h) */
} mx_cast_params;

/* Clip. Before opset 11 the bounds are attributes; from 11 they are optional inputs 1 and 2. */
typedef struct mx_clip_params {
  float min; /* attribute bound (used when from_attrs) */
  float max;
  int32_t from_attrs; /* 1: use min/max above; 0: read inputs 1 and 2 when present */
  int32_t reserved;   /* always 0 */
} mx_clip_params;

/* Gelu (opset 20). */
typedef struct mx_gelu_params {
  int32_t tanh_approx; /* 1: approximate = "tanh"; 0: "none" (exact, with erf) */
  int32_t reserved;    /* always 0 */
} mx_gelu_params;

#endif /* MIXRT_GRAPH_OPS_ELEMENTWISE_PARAMS_H */
