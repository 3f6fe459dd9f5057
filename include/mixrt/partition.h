/* The dynamic-shape partitioner: splits an inferred graph into KNOWN clusters (every shape
 * concrete: compiled into a static model) and UNKNOWN clusters (run op by op with run-time shape
 * inference), and builds the partitioned root graph that later stages compile.
 *
 * The root graph holds the graph inputs (DATA), the constants shared by several clusters, one
 * partition call node per cluster (op "PartitionedCall" of domain "mixrt": GRAPH attribute
 * "body" with the cluster's subgraph, INT attribute "unknown" 0/1, INTS attribute
 * "const_inputs" listing the call inputs that are shared constants) and the graph outputs.
 * Nodes are in topological order. Every decision keeps a reason (which tensor, which dim, which
 * op flag or which merge rule), readable per node, in the dumps (text, Graphviz DOT, JSON) and
 * through mx_partition_explain.
 *
 * Typical use:
 *
 *   mx_partition_options o; mx_partition_options_init(&o);
 *   mx_partition *p; mx_error err;
 *   if (mx_partition_create(g, &o, &p, &err) != MX_OK) puts(err.message);
 *   mx_partition_dump_text(p, stdout);
 *   mx_graph *root = mx_partition_root(p);   // borrowed from p
 *   ...
 *   mx_partition_destroy(p);
 *
 * The input graph is never modified. The partition reads names and shapes from it and the root
 * graph shares its symbol table, so the input graph must outlive the partition and its root
 * (inferring the root again may add fresh symbols to that shared table). */
#ifndef MIXRT_PARTITION_H
#define MIXRT_PARTITION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "mixrt/api.h"
#include "mixrt/graph.h"
#include "mixrt/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mx_partition mx_partition;

/* Default of mx_partition_options.static_min_ops. */
#define MX_PARTITION_DEFAULT_STATIC_MIN_OPS 4

/* The layout of mx_partition_options this header describes (docs/abi.md): 1, the fields below.
 * mx_partition_create refuses a record whose version it does not know. */
#define MX_PARTITION_OPTIONS_VERSION 1u

typedef struct mx_partition_options {
  uint32_t version; /* MX_PARTITION_OPTIONS_VERSION; set by mx_partition_options_init */
  /* Known clusters with fewer ops become unknown (a static model that small costs more to
   * launch than it saves). 0 keeps every known cluster; -1 makes the whole graph dynamic. */
  int64_t static_min_ops;
  /* Stable mode: clusters are consecutive runs of the topological order instead of the
   * absorb-and-merge rules (predictable, fewer merges). */
  bool stable;
  /* Names of nodes to mark UNKNOWN whatever their shapes (borrowed during mx_partition_create
   * only). Every name must be a node of the graph. */
  const char *const *force_unknown;
  size_t n_force_unknown;
} mx_partition_options;

/* Fills *o with the defaults: static_min_ops 4, not stable, nothing forced. */
MX_API void mx_partition_options_init(mx_partition_options *o);

typedef enum mx_cluster_type {
  MX_CLUSTER_DATA = 0,     /* one graph input; stays in the root */
  MX_CLUSTER_INPUT = 1,    /* a constant kept in the root (several readers, or a graph output) */
  MX_CLUSTER_KNOWN = 2,    /* every shape concrete: becomes a static model */
  MX_CLUSTER_UNKNOWN = 3,  /* runs op by op with run-time shapes */
  MX_CLUSTER_NETOUTPUT = 4 /* the graph outputs; stays in the root */
} mx_cluster_type;

/* "DATA", "INPUT", "KNOWN", "UNKNOWN", "NETOUTPUT" (never NULL). */
MX_API const char *mx_cluster_type_name(mx_cluster_type t);

/* Why a node is where it is. */
typedef enum mx_partition_reason_kind {
  MX_PART_KNOWN = 0,           /* every input and output shape is concrete */
  MX_PART_SYMBOLIC_DIM = 1,    /* a tensor has a symbolic dim (value, slot, dim say which) */
  MX_PART_UNKNOWN_DIM = 2,     /* a tensor has an unknown dim */
  MX_PART_UNKNOWN_RANK = 3,    /* a tensor has an unknown rank */
  MX_PART_DATA_DEPENDENT = 4,  /* the op's output shape depends on input data (NonZero) */
  MX_PART_VALUE_DEPENDENT = 5, /* the op reads an input's value that is not known at compile time */
  MX_PART_HOST_PLACEMENT = 6,  /* shape arithmetic on run-time values: runs on the host */
  MX_PART_FORCED = 7,          /* named in mx_partition_options.force_unknown */
  MX_PART_ALL_DYNAMIC = 8,     /* static_min_ops is -1: the whole graph runs dynamically */
  MX_PART_ABSORBED = 9,        /* known, but on a path between two connected unknown nodes */
  MX_PART_SMALL_CLUSTER = 10,  /* known, but its known cluster had fewer than static_min_ops ops */
  MX_PART_CONSTANT = 11,       /* a Constant node: placed with the cluster(s) that read it */
  MX_PART_CONTROL_FLOW = 12    /* a control node (If, Loop, Scan): runs its subgraphs as one op */
} mx_partition_reason_kind;

/* Short name of a kind: "known", "symbolic_dim", ... (never NULL). */
MX_API const char *mx_partition_reason_name(mx_partition_reason_kind k);

/* A reason record. Ids refer to the input graph. */
typedef struct mx_partition_reason {
  mx_partition_reason_kind kind;
  mx_value_id value;   /* the tensor that decided it, or MX_NO_VALUE */
  int32_t slot;        /* position of `value` among the node's inputs (or outputs), or -1 */
  bool is_output;      /* `slot` counts outputs rather than inputs */
  int32_t dim;         /* the dim index of `value`, or -1 */
  mx_node_id from, to; /* ABSORBED: the directly connected pair (from -> to) whose path holds
                          the node; else MX_NO_NODE */
  int64_t cluster_ops; /* SMALL_CLUSTER: ops in the known cluster (or run) it came from */
  int64_t limit;       /* SMALL_CLUSTER / ALL_DYNAMIC: the static_min_ops in force */
} mx_partition_reason;

/* --- lifetime ------------------------------------------------------------------------------- */

/* Partitions g, which must be inferred (mx_graph_infer succeeded). opts may be NULL (defaults).
 * g is not modified and must outlive *out. On success *out receives a new partition (destroy
 * with mx_partition_destroy); on failure *out is NULL and err (may be NULL) names the node or
 * option at fault. */
MX_API MX_MUST_USE mx_status mx_partition_create(const mx_graph *g, const mx_partition_options *opts,
                                                 mx_partition **out, mx_error *err);
/* Frees the partition and, unless detached, its root graph. NULL is a no-op. */
MX_API void mx_partition_destroy(mx_partition *p);
/* Message of the last failure on p ("" if none). Borrowed until the next call. */
MX_API const char *mx_partition_last_error(const mx_partition *p);

/* --- the partitioned graph ------------------------------------------------------------------ */

/* The partitioned root graph (borrowed; owned by p), or NULL after mx_partition_detach_root.
 * It shares the input graph's symbol table; its subgraphs are owned by its call nodes. */
MX_API mx_graph *mx_partition_root(mx_partition *p);
/* Transfers the root graph to the caller (mx_graph_destroy); p keeps every other record. */
MX_API mx_graph *mx_partition_detach_root(mx_partition *p);

/* --- clusters ------------------------------------------------------------------------------- */

typedef struct mx_partition_cluster_info {
  uint32_t id; /* index, 0..count-1: DATA, INPUT, then calls in root order, NETOUTPUT last */
  mx_cluster_type type;
  size_t n_nodes;     /* ops (input-graph nodes) in the cluster; 0 for DATA/INPUT/NETOUTPUT */
  size_t n_constants; /* constants it holds (moved into its subgraph, or the INPUT constant) */
  int64_t min_rank;   /* smallest / largest topological position of its nodes in the input */
  int64_t max_rank;   /*   graph; -1 for clusters without nodes */
  size_t n_inputs;    /* values crossing in (call inputs, in parent-index order) */
  size_t n_outputs;   /* values crossing out (call outputs, in parent-index order) */
  mx_node_id call;    /* its partition call node in the root, or MX_NO_NODE */
  mx_graph *body;     /* the call's subgraph (borrowed from the root), or NULL */
} mx_partition_cluster_info;

/* One value crossing a cluster boundary. */
typedef struct mx_partition_boundary {
  mx_value_id value;     /* the value in the input graph */
  uint32_t parent_index; /* its position among the call node's inputs (or outputs) */
  uint32_t peer;         /* inputs: the cluster that produces it; outputs: the first cluster
                            that reads it (NETOUTPUT for a graph output read by nobody else) */
  bool constant;         /* a shared constant passed from the root: never changes */
} mx_partition_boundary;

MX_API size_t mx_partition_cluster_count(const mx_partition *p);
/* False when id is out of range. */
MX_API bool mx_partition_cluster(const mx_partition *p, size_t id, mx_partition_cluster_info *out);
/* Node k (0..n_nodes-1, topological order) of cluster id, or MX_NO_NODE. */
MX_API mx_node_id mx_partition_cluster_node(const mx_partition *p, size_t id, size_t k);
/* Input / output k of cluster id; false when out of range. */
MX_API bool mx_partition_cluster_input(const mx_partition *p, size_t id, size_t k,
                                       mx_partition_boundary *out);
MX_API bool mx_partition_cluster_output(const mx_partition *p, size_t id, size_t k,
                                        mx_partition_boundary *out);

/* --- nodes ---------------------------------------------------------------------------------- */

typedef struct mx_partition_node_info {
  uint32_t cluster;           /* the cluster that holds the node */
  bool unknown;               /* that cluster is UNKNOWN */
  mx_partition_reason reason; /* why */
} mx_partition_node_info;

/* Info about node n of the input graph; false for an invalid or removed node. */
MX_API bool mx_partition_node(const mx_partition *p, mx_node_id n, mx_partition_node_info *out);
/* Prints node n's reason as one line of text ("output 0 'y' dim 1 is symbolic: past_len + 1")
 * into buf (NUL-terminated when cap > 0). Returns the length the full text needs. */
MX_API size_t mx_partition_reason_format(const mx_partition *p, mx_node_id n, char *buf, size_t cap);

typedef struct mx_partition_totals {
  size_t known_nodes, unknown_nodes; /* ops in KNOWN / UNKNOWN clusters */
  size_t known_clusters, unknown_clusters;
  size_t constants;        /* constants of the input graph */
  size_t shared_constants; /* of those, kept in the root (INPUT clusters) */
  size_t boundary_values;  /* distinct values read in another cluster than
                              the one that produces them */
} mx_partition_totals;

/* Fills *out (caller-owned): `record_size` bytes, the caller's sizeof(mx_partition_totals), its
 * own fields first and zeros past them (docs/abi.md). */
MX_API void mx_partition_get_totals_sized(const mx_partition *p, mx_partition_totals *out,
                                          size_t record_size);
/* mx_partition_get_totals_sized with the size of the record this header declares. */
static inline void mx_partition_get_totals(const mx_partition *p, mx_partition_totals *out) {
  mx_partition_get_totals_sized(p, out, sizeof(mx_partition_totals));
}

/* --- dumps ---------------------------------------------------------------------------------- */

/* One line per cluster (id, type, op count, rank range, input and output cluster ids, first
 * node names) and the totals. Same partition, same bytes. */
MX_API MX_MUST_USE mx_status mx_partition_dump_text(const mx_partition *p, FILE *out);
/* Graphviz DOT: nodes boxed by cluster (KNOWN green, UNKNOWN orange, DATA, INPUT and NETOUTPUT
 * grey), cross-cluster edges bold. */
MX_API MX_MUST_USE mx_status mx_partition_dump_dot(const mx_partition *p, FILE *out);
/* One JSON object: {"graph", "options", "clusters": [...], "nodes": [...], "totals": {...}};
 * docs/partition.md lists every field. */
MX_API MX_MUST_USE mx_status mx_partition_dump_json(const mx_partition *p, FILE *out);
/* Why the node (or graph input / constant) called `name` is in its cluster, following the
 * reason back to the graph input or op that caused it. MX_ERR_NOT_FOUND when g has no node or
 * value of that name (the message is on p). */
MX_API MX_MUST_USE mx_status mx_partition_explain(mx_partition *p, const char *name, FILE *out);

#ifdef __cplusplus
}
#endif
#endif /* MIXRT_PARTITION_H */
