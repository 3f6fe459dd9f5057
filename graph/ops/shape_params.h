/* Params structs of the shape group (Shape, Size, Reshape, Flatten, Squeeze, Unsqueeze,
 * Transpose, Concat, Split, Expand, Tile, Identity, Dropout, Constant, ConstantOfShape, Range).
 *
 * graph/ops/shape*.c fill them from node attributes; the CPU kernels in kernels/shape*.c
 * read them. They are plain old data without pointers: compiled models store them byte for
 * byte. Ops without attributes (Size, Expand, Tile, Identity, Range) have no params. */
#ifndef MIXRT_GRAPH_OPS_SHAPE_PARAMS_H
#define MIXRT_GRAPH_OPS_SHAPE_PARAMS_H

#include <stdint.h>

#include "mixrt/shape.h"

/* Most split sizes a Split node may list in its `split` attribute (opset < 13). */
#define MX_SPLIT_MAX 64
/* Bytes of constant data a Constant node may carry inline in its params. ONNX import turns
 * Constant nodes into graph constants, so only builder-made nodes use this path. */
#define MX_CONSTANT_INLINE_MAX 4096

/* Shape (opset 15 adds start/end). */
typedef struct mx_shape_params {
  int64_t start;    /* first dim (may be negative: counts from the end) */
  int64_t end;      /* one past the last dim, when has_end */
  int32_t has_end;  /* 0: up to the rank */
  int32_t reserved; /* always 0 */
} mx_shape_params;

/* Reshape. */
typedef struct mx_reshape_params {
  int64_t allowzero; /* 1: a 0 in the target is a real 0, not "copy the input dim" */
} mx_reshape_params;

/* Flatten. */
typedef struct mx_flatten_params {
  int64_t axis; /* in [-rank, rank]; dims before it form output dim 0 */
} mx_flatten_params;

/* Squeeze and Unsqueeze: axes from the attribute (opsets before 13; from 13 they are input 1). */
typedef struct mx_axes_params {
  int64_t axes[MX_MAX_RANK];
  int32_t n_axes;
  int32_t has_axes; /* 1 when the attribute was given */
} mx_axes_params;

/* Transpose. */
typedef struct mx_transpose_params {
  int64_t perm[MX_MAX_RANK];
  int32_t n_perm;
  int32_t has_perm; /* 0: reverse the dims */
} mx_transpose_params;

/* Concat (axis may be negative). */
typedef struct mx_concat_params {
  int64_t axis;
} mx_concat_params;

/* Split. Kernels take the sizes from the output dims; inference reads these. */
typedef struct mx_split_params {
  int64_t axis;
  int64_t num_outputs;         /* opset 18 attribute, 0 when absent */
  int64_t split[MX_SPLIT_MAX]; /* `split` attribute (opsets before 13) */
  int32_t n_split;
  int32_t has_split; /* 1 when the attribute was given */
} mx_split_params;

/* Dropout (inference only: output = input, mask all true). */
typedef struct mx_dropout_params {
  float ratio;      /* attribute of opsets before 12 (from 12 an input) */
  int32_t reserved; /* always 0 */
  int64_t seed;     /* unused at inference, kept for round trips */
} mx_dropout_params;

/* Constant: the value, inline. */
typedef struct mx_constant_params {
  int32_t dtype; /* mx_dtype of the value */
  int32_t rank;
  int64_t dims[MX_MAX_RANK];
  uint64_t nbytes; /* bytes used in data */
  union {
    unsigned char bytes[MX_CONSTANT_INLINE_MAX];
    uint64_t align; /* keeps bytes 8-byte aligned */
  } data;           /* row-major element data */
} mx_constant_params;

/* ConstantOfShape. */
typedef struct mx_constant_of_shape_params {
  int32_t dtype;    /* mx_dtype of the output (float32 when the attribute is absent) */
  int32_t reserved; /* always 0 */
  union {
    unsigned char bytes[8];
    uint64_t align;
  } value; /* one element of dtype, little-endian host layout */
} mx_constant_of_shape_params;

#endif /* MIXRT_GRAPH_OPS_SHAPE_PARAMS_H */
