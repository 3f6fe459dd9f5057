/* Params structs of the activation and remaining math ops (graph/ops/activation.c), read by the
 * CPU kernels in kernels/activation*.c. Plain old data: they are copied, hashed and serialized
 * byte for byte, so no pointers and no implicit padding. */
#ifndef MIXRT_GRAPH_OPS_ACTIVATION_PARAMS_H
#define MIXRT_GRAPH_OPS_ACTIVATION_PARAMS_H

#include <stdint.h>

/* The pointwise activations with float attributes. What each field holds, per op:
 *   Elu, Celu, LeakyRelu, ThresholdedRelu, Swish: alpha
 *   Selu: alpha, gamma
 *   HardSigmoid: alpha (slope), beta (offset); HardSwish: the fixed alpha = 1/6, beta = 0.5
 *   Shrink: alpha = lambd (the threshold), beta = bias
 * Fields an op does not use are 0. */
typedef struct mx_activation_params {
  float alpha;
  float beta;
  float gamma;
  int32_t reserved; /* always 0 */
} mx_activation_params;

/* Hardmax. Before opset 13 the input is seen as 2-D [prod(dims before axis), prod(the rest)]
 * and the one-hot runs over each whole row; from 13 it runs along the single dim `axis`. */
typedef struct mx_hardmax_params {
  int32_t axis;      /* possibly negative */
  int32_t coerce_2d; /* 1: the pre-13 rule */
} mx_hardmax_params;

/* IsInf. */
typedef struct mx_isinf_params {
  int32_t detect_positive; /* 1: +inf maps to true */
  int32_t detect_negative; /* 1: -inf maps to true */
} mx_isinf_params;

/* BitShift. */
typedef struct mx_bitshift_params {
  int32_t left;     /* 1: direction "LEFT"; 0: "RIGHT" */
  int32_t reserved; /* always 0 */
} mx_bitshift_params;

/* CumProd (the axis is input 1). */
typedef struct mx_cumprod_params {
  int32_t exclusive; /* 1: element i multiplies the elements before i only (the first is 1) */
  int32_t reverse;   /* 1: products run from the end of the axis */
} mx_cumprod_params;

#endif /* MIXRT_GRAPH_OPS_ACTIVATION_PARAMS_H */
