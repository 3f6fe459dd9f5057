/* Params structs of the reduction ops (graph/ops/reduce.c), read by the CPU kernels in
 * kernels/reduce*.c. Plain old data: copied, hashed and serialized byte for byte, so no
 * pointers and no implicit padding. */
#ifndef MIXRT_GRAPH_OPS_REDUCE_PARAMS_H
#define MIXRT_GRAPH_OPS_REDUCE_PARAMS_H

#include <stdint.h>

#include "mixrt/shape.h"

/* ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceSumSquare, ReduceL1,
 * ReduceL2, ReduceLogSumExp. The axes are an attribute before opset 18 (13 for ReduceSum) and
 * the optional input 1 from then on. */
typedef struct mx_reduce_params {
  int64_t axes[MX_MAX_RANK];    /* attribute axes (possibly negative); n_axes entries */
  int32_t n_axes;               /* 0: the attribute is absent or empty */
  int32_t axes_from_input;      /* 1: the axes are input 1's values (when present) */
  int32_t keepdims;             /* 1: reduced dims stay as size 1 */
  int32_t noop_with_empty_axes; /* 1: no or empty axes mean "copy the input" instead of "all" */
} mx_reduce_params;

/* ArgMax, ArgMin. */
typedef struct mx_argreduce_params {
  int32_t axis; /* possibly negative */
  int32_t keepdims;
  int32_t select_last_index; /* 1: ties pick the last index instead of the first */
  int32_t reserved;          /* always 0 */
} mx_argreduce_params;

/* CumSum (the axis is input 1). */
typedef struct mx_cumsum_params {
  int32_t exclusive; /* 1: element i sums the elements before i only */
  int32_t reverse;   /* 1: sums run from the end of the axis */
} mx_cumsum_params;

#endif /* MIXRT_GRAPH_OPS_REDUCE_PARAMS_H */
