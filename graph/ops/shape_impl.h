/* Private helpers of the shape and index op groups (graph/ops/shape*.c, graph/ops/index*.c):
 * reading the values of shape-giving inputs, moving symbolic values (sv) of small integer
 * tensors through layout ops, and merging dims that must agree. Also declares the op
 * definitions that live in the group's secondary files so each group can keep one array. */
#ifndef MIXRT_GRAPH_OPS_SHAPE_IMPL_H
#define MIXRT_GRAPH_OPS_SHAPE_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "graph/ops/op.h"

/* Values from 2^31 up (and down from -2^31) mean "to the end" in Slice starts/ends. */
#define MX__SLICE_BIG ((int64_t)1 << 31)

/* The values of input i as symbolic integers: its sv, or the data of a host int32/int64
 * tensor. False when neither is known or there are more than cap elements. Elements may be
 * MX_DIM_UNKNOWN (a value that is not known on its own). */
bool mx__shp_values(mx_infer_ctx *ctx, uint32_t i, mx_dim *buf, int32_t cap, int32_t *n);
/* Same, but only when every element is a known constant. */
bool mx__shp_ints(mx_infer_ctx *ctx, uint32_t i, int64_t *buf, int32_t cap, int32_t *n);
/* The single element of input i as a double: from a constant sv or host data of any dtype. */
bool mx__shp_scalar_f64(mx_infer_ctx *ctx, uint32_t i, double *out);

/* The dims of s when the rank is known and every dim is concrete. */
bool mx__shp_concrete(const mx_shape *s, int64_t *dims);
/* Number of elements of s when the rank is known and every dim is concrete. */
bool mx__shp_concrete_numel(const mx_shape *s, int64_t *n);
/* Copies n values into the sv of output i. */
void mx__shp_set_sv(mx_infer_ctx *ctx, uint32_t i, const mx_dim *v, int32_t n);
/* Output i gets the dtype and sv of input j (ops that keep the elements and change the shape). */
void mx__shp_pass_values(mx_infer_ctx *ctx, uint32_t i, uint32_t j);
/* Output i gets the dtype, shape and sv of input j. */
void mx__shp_pass(mx_infer_ctx *ctx, uint32_t i, uint32_t j);

/* Builds the sv of output `out` (concrete shape out_dims, at most MX_SV_MAX elements) from
 * in_sv: element c (coordinates) is in_sv[base + sum_k (c[k] mod mods[k]) * strides[k]]
 * (mods NULL: no modulo). False when too large or an offset falls outside in_sv. */
bool mx__shp_sv_strided(mx_infer_ctx *ctx, uint32_t out, const mx_dim *in_sv, int32_t in_len, int32_t rank,
                        const int64_t *out_dims, int64_t base, const int64_t *strides, const int64_t *mods);

/* Merges two dims that must be equal (inputs of Concat off the axis, broadcast-free checks):
 * the better known of the two, or MX_ERR_SHAPE when they provably differ. `what` names the
 * pair in the message. */
MX_MUST_USE mx_status mx__shp_merge_dim(mx_infer_ctx *ctx, mx_dim a, mx_dim b, mx_dim *out, const char *what);

/* Fails with MX_ERR_DTYPE naming input i unless it is absent or its dtype is int32/int64. */
MX_MUST_USE mx_status mx__shp_want_index(mx_infer_ctx *ctx, uint32_t i, const char *role);
/* Fails with MX_ERR_DTYPE naming input i unless it is absent or has dtype dt. */
MX_MUST_USE mx_status mx__shp_want_dtype(mx_infer_ctx *ctx, uint32_t i, mx_dtype dt, const char *role);

/* A dim given by an element of a shape-giving value: a non-negative constant, a symbolic
 * expression, or (for an unknown element) MX_DIM_UNKNOWN. Negative constants fail with
 * MX_ERR_SHAPE. */
MX_MUST_USE mx_status mx__shp_dim_of_value(mx_infer_ctx *ctx, mx_dim v, mx_dim *out, const char *what);

/* The rank a 1-D shape-giving input i gives by its length alone (its values unknown): its one
 * dim when concrete, else MX_RANK_UNKNOWN (also for an unknown rank). Fails with MX_ERR_SHAPE
 * when it is not 1-D, MX_ERR_LIMIT when the length exceeds MX_MAX_RANK. */
MX_MUST_USE mx_status mx__shp_rank_of_length(mx_infer_ctx *ctx, uint32_t i, int32_t *rank);
/* The shape given by the values of 1-D int64 input i (Expand, ConstantOfShape): dims from its
 * values; else, when its length is known, that rank with unknown dims (fresh symbols when
 * `fresh`); else an unknown rank. Negative sizes fail with MX_ERR_SHAPE naming `what`. */
MX_MUST_USE mx_status mx__shp_target_shape(mx_infer_ctx *ctx, uint32_t i, mx_shape *out, bool fresh,
                                           const char *what);

/* Definitions living in secondary files of the groups. */
extern const mx_op_def mx__op_transpose, mx__op_concat, mx__op_split, mx__op_expand, mx__op_tile;
extern const mx_op_def mx__op_constant, mx__op_constant_of_shape, mx__op_range;
extern const mx_op_def mx__op_slice, mx__op_trilu, mx__op_topk, mx__op_nonzero;

#endif /* MIXRT_GRAPH_OPS_SHAPE_IMPL_H */
