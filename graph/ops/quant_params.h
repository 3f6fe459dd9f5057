/* Params structs of the quantization ops (graph/ops/quant.c, kernels/quant.c). Plain old data:
 * hashed and serialized byte for byte. */
#ifndef MIXRT_GRAPH_OPS_QUANT_PARAMS_H
#define MIXRT_GRAPH_OPS_QUANT_PARAMS_H

#include <stdint.h>

/* QuantizeLinear and DequantizeLinear. The scale (and zero point) is per tensor (a scalar or a
 * one-element 1-D tensor), per axis (1-D, as long as the quantized axis) or blocked (the
 * input's rank, with ceil(dim / block_size) entries along the axis and the input's dims
 * elsewhere). */
typedef struct mx_quant_params {
  int32_t axis;         /* quantized axis as given (may be negative); 1 by default */
  int32_t block_size;   /* > 0: blocked along axis (opset 21) */
  int32_t output_dtype; /* mx_dtype asked by the attribute, 0: the zero point's / scale's */
  int32_t saturate;     /* float8 outputs: 1 clamps out-of-range values (opset 19) */
  int32_t precision;    /* mx_dtype of the arithmetic (opset 25), 0: the scale's */
} mx_quant_params;

#endif /* MIXRT_GRAPH_OPS_QUANT_PARAMS_H */
