/* The op groups the registry knows. Each array is NULL-terminated and lives in the file of the
 * same name: elementwise.c (unary/binary/variadic math, logic, comparisons, Cast, Where, Clip),
 * reduce.c (Reduce*, ArgMax/ArgMin, CumSum), nn.c (Softmax, LogSoftmax, LayerNormalization,
 * RMSNormalization, Gelu, Attention, RotaryEmbedding), linalg.c (MatMul, Gemm, Einsum),
 * shape.c (Shape, Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Concat, Split, Expand,
 * Tile, Identity, Dropout, Constant, ConstantOfShape, Range), index.c (Gather, GatherElements,
 * GatherND, ScatterND, Slice, Trilu, TopK, NonZero). */
#ifndef MIXRT_GRAPH_OPS_GROUPS_H
#define MIXRT_GRAPH_OPS_GROUPS_H

#include "graph/ops/op.h"

extern const mx_op_def *const mx__ops_elementwise[];
extern const mx_op_def *const mx__ops_reduce[];
extern const mx_op_def *const mx__ops_nn[];
extern const mx_op_def *const mx__ops_linalg[];
extern const mx_op_def *const mx__ops_shape[];
extern const mx_op_def *const mx__ops_index[];
extern const mx_op_def *const mx__ops_mixrt[]; /* mixrt_ops.c: PartitionedCall (domain "mixrt") */

#endif /* MIXRT_GRAPH_OPS_GROUPS_H */
