/* Internals shared by the sharding pass's files (shard.c: what splits where; shard_edit.c: the
 * edits that carry it out). */
#ifndef MIXRT_GRAPH_PASSES_SHARD_IMPL_H
#define MIXRT_GRAPH_PASSES_SHARD_IMPL_H

#include "graph/passes/shard.h"

/* How a value lies across the ranks. */
enum { MX__SHARD_REP = 0, MX__SHARD_SPLIT = 1 };

/* A constant replaced by its rank's slice: later users of the same constant must want the same
 * cut (tied embeddings) and then share the slice. */
typedef struct mx__shard_slice {
  mx_value_id orig;
  int32_t axis, groups, parts;
  mx_value_id result;
  mx_node_id first_user;
} mx__shard_slice;

typedef struct mx__shard_ctx {
  mx_graph *g;
  int tp, rank;
  mx_error *err;
  mx__shard_report *report;
  uint8_t *kind;  /* per value: MX__SHARD_REP / MX__SHARD_SPLIT */
  int8_t *axis;   /* per value: the split axis */
  int16_t *parts; /* per value: the parts the split axis is cut into (0: tp; fewer for the kv-heads
                     of a model with fewer kv-heads than ranks, each part on tp / parts ranks) */
  size_t cap;     /* entries of kind and axis */
  mx__shard_slice *slices;
  size_t n_slices, cap_slices;
  size_t n_roles;      /* nodes that existed before the rewrite (the role array's length) */
  int16_t *role_parts; /* per such node: the parts of its column split (0: tp; kv projections of a
                          model with fewer kv-heads than ranks: the kv-heads) */
} mx__shard_ctx;

/* Grows the per-value states to the graph's value count. */
MX_MUST_USE mx_status mx__shard_grow(mx__shard_ctx *c);
/* Points node n's inputs reading `from` at `to`. */
MX_MUST_USE mx_status mx__shard_rewire_input(mx__shard_ctx *c, mx_node_id n, mx_value_id from,
                                             mx_value_id to);
/* Gives node `user` the rank's slice of constant v: axis `axis` cut into `groups` equal sections
 * (a fused QKV weight: 3), each cut in `parts` parts (tp, or a divisor of tp: then tp / parts
 * ranks hold the same part) of which the rank keeps its own. */
MX_MUST_USE mx_status mx__shard_slice_const(mx__shard_ctx *c, mx_node_id user, mx_value_id v, int32_t axis,
                                            int32_t groups, int32_t parts, mx_value_id *out);
/* The parts value v's split axis is cut into. */
static inline int mx__shard_parts(const mx__shard_ctx *c, mx_value_id v) {
  return c->parts[v] ? c->parts[v] : c->tp;
}
/* Inserts collective `op` (domain mixrt, world_size and `extra` attributes) behind value x:
 * x's producer writes a new value, the collective reads it and writes x; why goes into the report. */
MX_MUST_USE mx_status mx__shard_collective_after(mx__shard_ctx *c, mx_value_id x, const char *op,
                                                 const mx_attr *extra, size_t n_extra, const char *why);
/* Makes value x (a Shape's output) the product of what its producer now writes and constant k. */
MX_MUST_USE mx_status mx__shard_mul_after(mx__shard_ctx *c, mx_value_id x, mx_value_id k);
/* Infers every node again, its attributes parsed anew (mx_graph_infer). */
MX_MUST_USE mx_status mx__shard_reinfer(mx__shard_ctx *c);
/* Copies the graph's last error into c->err with status st. */
mx_status mx__fail_err_from_graph(mx__shard_ctx *c, mx_status st);

#endif /* MIXRT_GRAPH_PASSES_SHARD_IMPL_H */
