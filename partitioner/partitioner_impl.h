/* Private layout of a partition and of the cluster-merging work state, shared by the files of
 * partitioner/ only:
 *
 *   part_order.c     topological order, constant sources, compute nodes
 *   part_mark.c      unknown marking with a reason per node
 *   part_graph.c     the cluster graph: union-find, edge segments, per-phase rebuild and ranks
 *   part_merge.c     the merge rules (path absorption, single-path merges, small clusters,
 *                    stable mode)
 *   part_place.c     final clusters, constant placement, boundary values, totals
 *   part_build.c     the partitioned root graph and the subgraphs
 *   part_call.c      readers of partition call nodes
 *   part_reason.c    reason text and explain
 *   part_format.c    text helpers shared by the dumps
 *   part_dump_*.c    text, DOT and JSON dumps
 *   part_api.c       the public API over all of this
 *
 * Positions. The live nodes of the input graph are ordered topologically (smallest id first
 * among ready nodes, like mx__graph_topo_order); a node's "rank" is its index in that order.
 * Constant nodes (no inputs, constant outputs) are kept aside; the other nodes, the "compute"
 * nodes, get a dense index `pos` in the same order, and the merge works on positions. */
#ifndef MIXRT_PARTITIONER_IMPL_H
#define MIXRT_PARTITIONER_IMPL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "common/error.h"
#include "graph/ir.h"
#include "mixrt/partition.h"
#include "partitioner/partitioner.h"

#define MX__PART_NONE UINT32_MAX

/* A constant source: a constant value nothing produces, or a Constant node. */
typedef struct mx__part_const {
  mx_value_id value; /* the constant value (a Constant node's first output) */
  mx_node_id node;   /* the Constant node, or MX_NO_NODE for an initializer */
  uint32_t cluster;  /* final cluster that holds it */
  bool shared;       /* kept in the root as an INPUT cluster */
} mx__part_const;

/* A value crossing a boundary (public mx_partition_boundary plus nothing else). */
typedef mx_partition_boundary mx__part_bound;

/* One final cluster. Index ranges point into the partition's shared arrays. */
typedef struct mx__part_cluster {
  mx_cluster_type type;
  uint32_t first_node, n_nodes;   /* into p->members: node ids in topological order */
  uint32_t first_const, n_consts; /* into p->cluster_consts: indices into p->consts */
  uint32_t first_in, n_in;        /* into p->bounds: values crossing in, parent-index order */
  uint32_t first_out, n_out;      /* into p->bounds: values crossing out */
  uint32_t first_pred, n_pred;    /* into p->links: producer clusters, ascending */
  uint32_t first_succ, n_succ;    /* into p->links: consumer clusters, ascending */
  int64_t min_rank, max_rank;     /* topological positions of its nodes; -1 without nodes */
  mx_value_id source;             /* DATA: the graph input; INPUT: the constant value */
  mx_node_id call;                /* its call node in the root, or MX_NO_NODE */
  mx_graph *body;                 /* the call's subgraph (owned by the root), or NULL */
} mx__part_cluster;

struct mx_partition {
  const mx_graph *g;      /* the input graph (borrowed; outlives the partition) */
  int64_t static_min_ops; /* options in force */
  bool stable;
  mx_graph *root; /* the partitioned root graph (owned), NULL once detached */
  mx_error err;   /* last failure (mx_partition_last_error) */

  /* --- order (part_order.c) --- */
  mx_node_id *order; /* live nodes in topological order (malloc'd) */
  size_t n_order;
  uint32_t *rank_of;   /* by node id: index in `order`, MX__PART_NONE when dead */
  mx_node_id *compute; /* compute nodes by position (malloc'd) */
  uint32_t n_compute;
  uint32_t *pos_of;       /* by node id: position, MX__PART_NONE for constant / dead */
  mx__part_const *consts; /* constant sources: initializers by value id, then Constant
                             nodes in topological order (malloc'd) */
  uint32_t n_consts;
  uint32_t *const_of_value; /* by value id: index into consts, MX__PART_NONE otherwise */

  /* --- marking (part_mark.c) --- */
  mx_partition_reason *reason; /* by node id (malloc'd) */
  uint8_t *marked_unknown;     /* by position: unknown after marking, before any merge */
  uint32_t n_marked_unknown;

  /* --- merge result (part_merge.c) --- */
  uint32_t *group_of;     /* by position: merged group (a union-find root) */
  uint8_t *group_unknown; /* by group root: 1 when the group is UNKNOWN */

  /* --- final clusters (part_place.c) --- */
  mx__part_cluster *clusters; /* malloc'd, n_clusters */
  uint32_t n_clusters;
  uint32_t *cluster_of_node;  /* by node id: final cluster, MX__PART_NONE when dead */
  uint32_t *cluster_of_value; /* by value id: cluster holding its source, or NONE */
  mx_node_id *members;        /* node ids grouped by cluster (malloc'd, n_compute) */
  uint32_t *cluster_consts;   /* const indices grouped by cluster (malloc'd, n_consts) */
  mx__part_bound *bounds;     /* boundary values of every cluster (malloc'd) */
  size_t n_bounds;
  uint32_t *links; /* neighbour cluster ids of every cluster (malloc'd) */
  size_t n_links;
  mx_partition_totals totals;

  /* --- shape specialization (spec_part.c) --- */
  struct mx_spec_info *spec; /* by cluster: specializable and on which symbols (malloc'd) */
  uint8_t *sym_kinds;        /* by symbol of g's table: mx_spec_sym_kind (malloc'd) */
  size_t n_sym_kinds;

  mx__part_timings timings;
};

/* Position (index in p->compute) of the compute node that produces input k of nd, or
 * MX__PART_NONE when there is none (omitted input, graph input, constant source). Valid once
 * mx__part_order has run. */
static inline uint32_t mx__part_input_pos(const mx_partition *p, const mx_node *nd, uint32_t k) {
  mx_value_id v = nd->inputs[k];
  if (v == MX_NO_VALUE) return MX__PART_NONE;
  mx_node_id pr = p->g->values[v].producer;
  return pr == MX_NO_NODE ? MX__PART_NONE : p->pos_of[pr];
}

/* --- part_order.c ------------------------------------------------------------------------- */

/* Orders the live nodes, finds constant sources and compute nodes. Checks that g is inferred
 * and holds no subgraph attributes. */
MX_MUST_USE mx_status mx__part_order(mx_partition *p);

/* --- part_mark.c -------------------------------------------------------------------------- */

/* Marks each compute node KNOWN or UNKNOWN with its reason; Constant nodes get MX_PART_CONSTANT. */
MX_MUST_USE mx_status mx__part_mark(mx_partition *p, const mx_partition_options *o);

/* --- part_graph.c: the cluster graph during merging ---------------------------------------- */

/* Marks by position that are cleared in O(1): a position is marked when m[x] == epoch. */
typedef struct mx__part_marks {
  uint32_t *m;    /* n entries */
  uint32_t epoch; /* current mark value (0 is never used) */
  uint32_t n;
} mx__part_marks;

/* Work state. Clusters are named by a position (the union-find root). Edge lists are made of
 * segments, ranges of `ent` built by mx__part_rebuild; an entry names a neighbour by a position
 * that may since have been merged (readers resolve it with mx__part_find).
 *
 * In-lists: a chain of segments per root, linked in O(1) on merge and consumed once per phase
 * by the cluster being processed.
 *
 * Out-lists: each out-segment is sorted by `key`, the rank its target had when the phase
 * began. Merges only raise ranks (a cluster merged into the one being processed takes its rank)
 * so a key is a lower bound of its target's current rank. A root's out-segments form a skew heap
 * ordered by their first key, melded in O(log) on merge. A search bounded by rank L scans only
 * the segment prefixes with keys <= L, and drops what it finds there that is stale (the cluster
 * itself, dead clusters, repeats): an edge into a later cluster costs nothing until that cluster
 * is reached, which keeps wide fan-outs linear. */
typedef struct mx__part_work {
  mx_partition *p;
  uint32_t n;                  /* clusters at the start (= compute nodes) */
  uint32_t *parent;            /* union-find parent (root: itself) */
  uint32_t *rank;              /* roots: index in the phase's topological order of clusters */
  uint32_t *size;              /* roots: ops in the cluster */
  uint8_t *unknown;            /* roots: 1 UNKNOWN, 0 KNOWN */
  uint8_t *dead;               /* roots: no out-edge left (cannot reach any other cluster) */
  uint32_t *min_pos;           /* roots: smallest member position (tie-break when sorting) */
  uint32_t *in_head, *in_tail; /* roots: chain of in-segments (MX__PART_NONE: empty) */
  uint32_t *out_root;          /* roots: skew heap of out-segments (MX__PART_NONE: empty) */
  uint32_t *pred_off;          /* node edges by destination position: pred[pred_off[b]..[b+1]) */
  uint32_t *pred;              /*   are the positions of b's compute producers (with repeats) */
  uint32_t *seg_start;         /* 2n segments: in-segment of root r is r, out-segment is n + r */
  uint32_t *seg_len;           /*   entries still in the segment */
  uint32_t *seg_next;          /*   in: next segment of the chain; out: right child in the heap */
  uint32_t *seg_left;          /*   out: left child in the heap */
  uint32_t *ent;               /* entries: neighbour positions, possibly stale */
  uint32_t *key;               /* out entries: the target's rank when the phase began */
  size_t cap_ent;              /* capacity of ent and key */
  uint32_t *mem_head, *mem_tail, *mem_next; /* member positions of each root (linked) */
  uint32_t *order;                          /* the phase's topological order of roots */
  uint32_t n_roots;
  mx__part_marks visited; /* search marks */
  mx__part_marks seen;    /* duplicate marks while scanning one list */
  mx__part_marks tried;   /* inputs already tried for the cluster being processed */
  uint32_t *aux;          /* by position: local index during one search */
  uint32_t *scratch;      /* scratch list by position (n entries) */
  uint32_t *scratch2;     /* neighbour list written by mx__part_out_neighbors (n entries) */
  uint32_t *popped;       /* segments taken off a heap during one scan (n entries) */
  uint32_t *tmp;          /* growable scratch for edge pairs (2 words each) */
  size_t n_tmp, cap_tmp;  /* in pairs */
} mx__part_work;

MX_MUST_USE mx_status mx__part_work_init(mx__part_work *w, mx_partition *p);
void mx__part_work_free(mx__part_work *w);
/* Union-find root of position x (with path halving). */
uint32_t mx__part_find(mx__part_work *w, uint32_t x);
/* Rebuilds the deduplicated cluster edge lists from the node edges and sorts the clusters
 * topologically (ties: smallest member position first); sets rank, order and n_roots. In-list
 * segment i belongs to root i (for the first phase, the destination node of every entry). */
MX_MUST_USE mx_status mx__part_rebuild(mx__part_work *w);
/* Merges cluster `from` into cluster `into` (both roots); `into` stays the root and keeps its
 * rank and type. */
void mx__part_union(mx__part_work *w, uint32_t from, uint32_t into);
/* Writes into w->scratch2[0..*n) the distinct neighbour roots of root x whose edge keys are
 * at most `limit` (every neighbour ranked at most `limit` is among them), dropping the stale
 * entries it reads. Marks x dead when no out-edge is left at all. */
void mx__part_out_neighbors(mx__part_work *w, uint32_t x, uint32_t limit, uint32_t *n);
/* Starts a new set of marks (clears the array on wrap-around). */
void mx__part_marks_reset(mx__part_marks *k);
static inline bool mx__part_marked(const mx__part_marks *k, uint32_t x) { return k->m[x] == k->epoch; }
static inline void mx__part_mark_set(mx__part_marks *k, uint32_t x) { k->m[x] = k->epoch; }
/* Appends the pair (a, b) to w->tmp; false on OOM. */
bool mx__part_tmp_push(mx__part_work *w, uint32_t a, uint32_t b);

/* --- part_merge.c ------------------------------------------------------------------------- */

/* Builds and merges clusters (normal or stable mode, limits, early exits); fills group_of and
 * group_unknown and the reasons of absorbed and small-cluster nodes. */
MX_MUST_USE mx_status mx__part_merge(mx_partition *p);

/* --- part_place.c ------------------------------------------------------------------------- */

/* Final clusters in root order, constant placement, boundary values, links and totals. */
MX_MUST_USE mx_status mx__part_place(mx_partition *p);

/* --- part_build.c ------------------------------------------------------------------------- */

/* Builds p->root and one subgraph per KNOWN/UNKNOWN cluster. */
MX_MUST_USE mx_status mx__part_build(mx_partition *p);

/* --- spec_part.c ------------------------------------------------------------------------- */

/* Symbol kinds and the specializable UNKNOWN clusters (partitioner/spec.h); after placement. */
MX_MUST_USE mx_status mx__part_spec(mx_partition *p);

/* --- part_reason.c ------------------------------------------------------------------------ */

/* A reason of the given kind with every reference empty (no value, slot, dim or nodes). */
mx_partition_reason mx__part_reason(mx_partition_reason_kind kind);
/* One-line text of node n's reason (snprintf semantics). */
size_t mx__part_reason_text(const mx_partition *p, mx_node_id n, char *buf, size_t cap);

/* --- part_format.c ------------------------------------------------------------------------ */

/* Formats a value's shape ("[batch, 4]", "[*]" for an unknown rank). */
void mx__part_shape_text(const mx_partition *p, mx_value_id v, char *buf, size_t cap);
/* Display name of what cluster c holds first (its first node, or its value). */
const char *mx__part_cluster_label(const mx_partition *p, uint32_t c, size_t k);
/* Writes a ", "-separated list of cluster ids into out: "[1, 4]". */
void mx__part_print_ids(FILE *out, const uint32_t *ids, uint32_t n);

/* Records a failure on p (printf-style) and returns status. */
mx_status mx__part_fail(mx_partition *p, mx_status status, const char *fmt, ...) MX_PRINTF(3, 4);

#endif /* MIXRT_PARTITIONER_IMPL_H */
