/* The tensor-parallel sharding pass: rewrites a transformer decoder (as mixrt sees it after the
 * fusion rules: fused Attention, RMS/LayerNormalization, MatMul with constant weights) into the
 * graph one rank of N runs.
 *
 * Attention heads are split (Q/K/V weight columns by heads, o_proj rows), the MLP column then
 * row (gate/up columns, down rows), with one AllReduce after each row-split MatMul; the KV cache
 * inputs/outputs of each Attention hold the rank's kv-heads only (with fewer kv-heads than ranks,
 * dividing tp, the one kv-head its query heads read, held alike by the ranks sharing it; one
 * kv-head stays whole); a Gather on a constant
 * [vocab, hidden] table fed by a graph input becomes a Gather of the rank's rows (ids of other
 * ranks read a zero row; an id outside the vocabulary fails the run on every rank, before the
 * collective) plus an AllReduce; an LM head MatMul writing a graph output is split by
 * vocabulary columns and ends in an AllGather. The collectives are domain "mixrt" nodes
 * (AllReduce, AllGather) carrying world_size. Whatever the pass cannot place is refused, naming
 * the node and why. */
#ifndef MIXRT_GRAPH_PASSES_SHARD_H
#define MIXRT_GRAPH_PASSES_SHARD_H

#include "graph/ir.h"

/* One collective the pass inserted, and why it is there. */
typedef struct mx__shard_collective {
  const char *node; /* the collective node's name (g's arena) */
  const char *op;   /* "AllReduce" or "AllGather" */
  const char *why;  /* one line naming the node it follows (g's arena) */
} mx__shard_collective;

/* What mx__shard_graph did. */
typedef struct mx__shard_report {
  mx__shard_collective *collectives; /* malloc'd, in graph order; free with mx__shard_report_free */
  size_t n_collectives;
  size_t n_weights;                   /* constants replaced by their rank's slice */
  size_t n_states;                    /* graph inputs/outputs whose shape is now the rank's part (KV cache) */
  size_t n_attention, n_mlp, n_vocab; /* attention blocks, MLP blocks, vocab-split embeddings + heads */
} mx__shard_report;

/* Rewrites g (inferred; fused) in place into rank `rank` of `tp`'s graph. tp 1 leaves g as it
 * is apart from world_size-1 collectives. On refusal returns MX_ERR_UNSUPPORTED with a message
 * in err naming the node and the cause; g is then left half-rewritten (shard a copy). report
 * may be NULL. */
MX_MUST_USE mx_status mx__shard_graph(mx_graph *g, int tp, int rank, mx__shard_report *report, mx_error *err);

void mx__shard_report_free(mx__shard_report *r);

/* True for node n being one of the collectives the pass emits (domain "mixrt"). */
bool mx__shard_is_collective(const mx_node *n);

/* graph/passes/shard_explain.c: one line into buf saying why collective node n of a sharded
 * graph is there (which split it undoes), read off the node feeding it; false when n is no
 * collective. */
bool mx__shard_explain(const mx_graph *g, mx_node_id n, char *buf, size_t cap);

#endif /* MIXRT_GRAPH_PASSES_SHARD_H */
