/* Params structs of the index group (Gather, GatherElements, GatherND, ScatterND, Slice, Trilu,
 * TopK, NonZero).
 *
 * graph/ops/index*.c fill them from node attributes; the CPU kernels in kernels/index*.c
 * read them. Plain old data without pointers (compiled models store them byte for byte).
 * NonZero has no params. */
#ifndef MIXRT_GRAPH_OPS_INDEX_PARAMS_H
#define MIXRT_GRAPH_OPS_INDEX_PARAMS_H

#include <stdint.h>

#include "mixrt/shape.h"

/* Gather and GatherElements. */
typedef struct mx_gather_params {
  int64_t axis; /* may be negative */
} mx_gather_params;

/* GatherND. */
typedef struct mx_gathernd_params {
  int64_t batch_dims; /* leading dims shared by data and indices */
} mx_gathernd_params;

/* ScatterND reduction. */
typedef enum mx_scatter_reduction {
  MX_SCATTER_NONE = 0,
  MX_SCATTER_ADD = 1,
  MX_SCATTER_MUL = 2,
  MX_SCATTER_MAX = 3,
  MX_SCATTER_MIN = 4
} mx_scatter_reduction;

typedef struct mx_scatternd_params {
  int32_t reduction; /* mx_scatter_reduction */
  int32_t reserved;  /* always 0 */
} mx_scatternd_params;

/* Slice: the attributes of opsets before 10 (from 10 starts/ends/axes/steps are inputs). */
typedef struct mx_slice_params {
  int64_t starts[MX_MAX_RANK];
  int64_t ends[MX_MAX_RANK];
  int64_t axes[MX_MAX_RANK];
  int32_t n;          /* entries in starts/ends (and axes when has_axes) */
  int32_t from_attrs; /* 1: opset < 10, use the arrays above; 0: read the inputs */
  int32_t has_axes;   /* 1 when the axes attribute was given */
  int32_t reserved;   /* always 0 */
} mx_slice_params;

/* Trilu. */
typedef struct mx_trilu_params {
  int64_t upper; /* 1: keep the upper triangle, 0: the lower */
} mx_trilu_params;

/* TopK. */
typedef struct mx_topk_params {
  int64_t axis;        /* may be negative */
  int64_t largest;     /* 1: largest K, 0: smallest K */
  int64_t sorted;      /* 1: outputs in order (kernels always sort) */
  int64_t k;           /* the `k` attribute of opsets before 10 */
  int32_t k_from_attr; /* 1 for opsets before 10 */
  int32_t reserved;    /* always 0 */
} mx_topk_params;

#endif /* MIXRT_GRAPH_OPS_INDEX_PARAMS_H */
