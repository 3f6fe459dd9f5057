/* Params structs of the tensor construction and scatter group (OneHot, Compress, Unique,
 * Scatter, ScatterElements, EyeLike, ReverseSequence, TensorScatter).
 *
 * graph/ops/tensor.c fills them from node attributes; the CPU kernels in kernels/tensor.c read
 * them. Plain old data without pointers (compiled models store them byte for byte); parse
 * functions zero the whole struct first so padding bytes stay zero. */
#ifndef MIXRT_GRAPH_OPS_TENSOR_PARAMS_H
#define MIXRT_GRAPH_OPS_TENSOR_PARAMS_H

#include <stdint.h>

/* OneHot. */
typedef struct mx_onehot_params {
  int64_t axis; /* where the depth axis is inserted; may be negative */
} mx_onehot_params;

/* Compress and Unique. */
typedef struct mx_axis_opt_params {
  int64_t axis;     /* may be negative; meaningful when has_axis */
  int32_t has_axis; /* 0: the input is flattened */
  int32_t sorted;   /* Unique: 1 sorts the unique values, 0 keeps first-occurrence order */
} mx_axis_opt_params;

/* Scatter and ScatterElements. The reduction values are those of mx_scatter_reduction
 * (graph/ops/index_params.h): none, add, mul, max, min. */
typedef struct mx_scatter_elements_params {
  int64_t axis; /* may be negative */
  int32_t reduction;
  int32_t reserved; /* always 0 */
} mx_scatter_elements_params;

/* EyeLike. */
typedef struct mx_eyelike_params {
  int64_t k;        /* diagonal offset: ones at (i, i + k) */
  int32_t dtype;    /* output mx_dtype; 0: the input's */
  int32_t reserved; /* always 0 */
} mx_eyelike_params;

/* ReverseSequence. */
typedef struct mx_reverse_sequence_params {
  int64_t batch_axis; /* 0 or 1 */
  int64_t time_axis;  /* the other one */
} mx_reverse_sequence_params;

/* TensorScatter. */
typedef struct mx_tensor_scatter_params {
  int64_t axis;     /* the sequence axis; may be negative */
  int32_t circular; /* 1: write positions wrap around the cache length */
  int32_t reserved; /* always 0 */
} mx_tensor_scatter_params;

#endif /* MIXRT_GRAPH_OPS_TENSOR_PARAMS_H */
