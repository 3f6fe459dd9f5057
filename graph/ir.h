/* The graph IR as other modules see it: value and node records, and the internal calls that
 * passes, the partitioner and the executors use to read and rewrite graphs.
 *
 * Values and nodes live in two arrays indexed by mx_value_id / mx_node_id. Ids are never reused:
 * a removed node or value is flagged DEAD and skipped by every walk. Names, attributes, shapes,
 * symbolic values and constant data are in the graph's arena; consumer lists are growable
 * malloc'd arrays. The public API (mixrt/graph.h) is a thin layer over this. */
#ifndef MIXRT_GRAPH_IR_H
#define MIXRT_GRAPH_IR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/arena.h"
#include "common/strmap.h"
#include "mixrt/graph.h"

struct mx_op_def;

/* Value flags. */
enum {
  MX_VALUE_INPUT = 1u << 0,  /* a graph input */
  MX_VALUE_OUTPUT = 1u << 1, /* a graph output (possibly also an input or a constant) */
  MX_VALUE_CONST = 1u << 2,  /* has constant data (initializer, Constant node or folded) */
  MX_VALUE_DEAD = 1u << 3,   /* removed; ignore */
  MX_VALUE_OUTER = 1u << 4   /* in a subgraph: a reference to a value of an enclosing graph */
};

/* Node flags. */
enum {
  MX_NODE_DEAD = 1u << 0 /* removed; ignore */
};

/* Storage of a large constant (>= MX__CONST_STORE_MIN bytes) held outside its graph's arena, so
 * its bytes can be released while the graph lives: they are a heap block until a holder (a static
 * plan's weight block) takes them over, then they lie in the holder's bytes (one copy, shared).
 * Owned by the graph that created it; other graphs' values may share it (same header), so neither
 * the header nor the bytes are ever written once set: a pass that changes a constant makes a new one.
 * Every constant made by copying (import, builder, folding, rewrite rules) of this size is stored. */
#define MX__CONST_STORE_MIN 4096
typedef struct mx__const_store {
  mx_tensor header;             /* the constant; data = heap, or inside the holder's bytes */
  void *heap;                   /* owned 64-byte aligned block, NULL once a holder took over */
  size_t heap_mapped;           /* heap's length when it is an anonymous mapping, else 0 */
  void *holder;                 /* one reference on the holder of the bytes, or NULL */
  void (*release)(void *);      /* drops `holder` */
  struct mx__const_store *next; /* the owning graph's list */
  bool pinned;                  /* something reads header.data in place (mx__graph_const_pin):
                                   the bytes never move again, no holder takes them over */
} mx__const_store;

typedef struct mx_value {
  const char *name;       /* unique within the graph; arena */
  mx_dtype dtype;         /* MX_DTYPE_UNDEFINED until declared or inferred */
  mx_shape shape;         /* declared or inferred; rank MX_RANK_UNKNOWN until known */
  mx_node_id producer;    /* producing node, or MX_NO_NODE (input, constant, outer) */
  uint32_t producer_slot; /* output index on the producer */
  uint32_t flags;         /* MX_VALUE_* */
  uint8_t kind;           /* mx_value_kind: tensor (0), sequence or optional */
  mx_node_id *consumers;  /* consuming nodes, one entry per use (malloc'd) */
  size_t n_consumers;
  size_t cap_consumers;
  mx_tensor *data; /* constant data (host, arena) when MX_VALUE_CONST, else NULL */
  mx_dim *sv;      /* symbolic value of a small integer tensor, row-major; arena */
  int32_t sv_len;  /* elements in sv, or -1 when the value is not known */
  mx__const_store *store; /* data's storage when it is a large constant held outside an arena
                             (this graph's or shared from another), else NULL */
} mx_value;

typedef struct mx_node {
  const char *name;            /* unique within the graph; arena */
  const char *op_type;         /* ONNX op type; arena */
  const char *domain;          /* "" for the default ONNX domain; arena */
  const struct mx_op_def *def; /* resolved definition (NULL until inference resolves it) */
  int64_t opset;               /* version of `domain` the graph imports */
  mx_value_id *inputs;         /* MX_NO_VALUE for an omitted optional input; arena */
  uint32_t n_inputs;
  mx_value_id *outputs; /* arena */
  uint32_t n_outputs;
  mx_attr *attrs; /* deep copies in the arena; GRAPH attrs own their subgraph */
  uint32_t n_attrs;
  void *params;   /* parsed attribute struct (def->params_size bytes), or NULL */
  uint32_t flags; /* MX_NODE_* */
} mx_node;

typedef struct mx_opset_entry {
  const char *domain; /* "" = default ONNX domain; arena */
  int64_t version;
} mx_opset_entry;

struct mx_graph {
  const char *name;        /* arena */
  mx_arena arena;          /* owns names, attributes, shapes, sv, small constants' data */
  mx__const_store *stores; /* large constants held outside the arena (owned list) */
  mx_symtab *syms;         /* symbol table, shared with subgraphs */
  bool owns_syms;          /* true for a root graph */
  struct mx_graph *parent; /* enclosing graph of a subgraph, else NULL */

  mx_value *values; /* all values ever created, by id */
  size_t n_values, cap_values;
  mx_node *nodes; /* all nodes ever created, by id */
  size_t n_nodes, cap_nodes;
  size_t n_live_nodes; /* nodes without MX_NODE_DEAD */

  mx_value_id *inputs; /* graph inputs in order (malloc'd) */
  size_t n_inputs, cap_inputs;
  mx_value_id *outputs; /* graph outputs in order (malloc'd) */
  size_t n_outputs, cap_outputs;

  mx_opset_entry *opsets; /* imported opsets (malloc'd) */
  size_t n_opsets, cap_opsets;

  mx_strmap value_names; /* name -> value id (keys are the arena names) */
  mx_strmap node_names;  /* name -> node id */
  uint64_t name_counter; /* for generated names */

  mx_graph **subgraphs; /* owned subgraphs (from GRAPH attributes), malloc'd */
  size_t n_subgraphs, cap_subgraphs;

  mx_node_id *topo; /* cached topological order of live nodes (malloc'd) or NULL */
  size_t n_topo;

  mx_log_fn log; /* pass log callback, or NULL */
  void *log_user;
  int64_t ir_version; /* ONNX IR version of an imported model, 0 otherwise */
  mx_error err;       /* last error (mx_graph_last_error) */
};

/* --- errors and logging --------------------------------------------------------------------- */

/* Records a failure on the graph (printf-style) and returns `status`. */
mx_status mx__graph_fail(mx_graph *g, mx_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Copies an error record onto the graph and returns its status. */
mx_status mx__graph_fail_err(mx_graph *g, const mx_error *err);
/* Records a failure of node `nd` in `err` (printf-style), prefixed "node 'NAME' (OP): ", and
 * returns `status`: the one form every node-level message takes. */
mx_status mx__node_fail(mx_error *err, const mx_node *nd, mx_status status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Sends one line to the graph's log callback, if any. */
void mx__graph_log(mx_graph *g, mx_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* --- building blocks ------------------------------------------------------------------------ */

/* Creates a subgraph sharing g's symbol table; g owns it (it is freed with g). */
MX_MUST_USE mx_status mx__graph_create_subgraph(mx_graph *g, const char *name, mx_graph **out);
/* Adopts an existing graph as a subgraph of g (it must use g's symbol table or own none). */
MX_MUST_USE mx_status mx__graph_adopt_subgraph(mx_graph *g, mx_graph *sub);

/* New value with a unique name (NULL: generated "<hint>_N"). Dtype undefined, rank unknown. */
MX_MUST_USE mx_status mx__graph_new_value(mx_graph *g, const char *name, mx_value_id *out);
/* A name not used by any value or node of g, built from `hint`; arena. NULL on OOM. */
const char *mx__graph_unique_name(mx_graph *g, const char *hint);
/* Turns v into a constant holding a copy of t (dtype and shape follow t; stored when large). */
MX_MUST_USE mx_status mx__graph_set_const(mx_graph *g, mx_value_id v, const mx_tensor *t);
/* A new constant whose data are t's own bytes, not copied: they must stay valid and unchanged for
 * the graph's life (the mapped weights section of an .mxm file, held by whoever loaded it). */
MX_MUST_USE mx_status mx__graph_add_constant_borrowed(mx_graph *g, const char *name, const mx_tensor *t,
                                                      mx_value_id *out);
/* A new constant sharing src's data (src: a constant of a graph that outlives g, never modified):
 * a large constant shares src's storage, so a holder taking it over serves both graphs. */
MX_MUST_USE mx_status mx__graph_add_constant_shared(mx_graph *g, const char *name, const mx_value *src,
                                                    mx_value_id *out);
/* Blocks a large constant's store holds (64-byte aligned; anonymous mappings from 64 KiB):
 * a decoder writes a constant's bytes into one and hands it to mx__graph_add_constant_adopt. */
void *mx__graph_const_block_alloc(size_t nbytes);
void mx__graph_const_block_free(void *block, size_t nbytes);
/* A new constant holding t, whose data are a block of nbytes(t) from mx__graph_const_block_alloc:
 * g takes the block over (no copy; a constant too small for a store is copied into the arena and
 * the block freed). The block is the graph's also on failure. */
MX_MUST_USE mx_status mx__graph_add_constant_adopt(mx_graph *g, const char *name, const mx_tensor *t,
                                                   mx_value_id *out);
/* When constant v is a large constant held outside an arena, its bytes become the nbytes at
 * `bytes` (an equal copy kept alive by `holder`, e.g. a static plan's weight block): the heap copy
 * (or the previous holder) is released and one reference on holder is taken over (dropped with
 * release(holder) when the owning graph is destroyed). Returns false (holder not taken) otherwise. */
bool mx__graph_const_rehome(const mx_graph *g, mx_value_id v, void *bytes, size_t nbytes, void *holder,
                            void (*release)(void *));
/* Constant v's bytes (v->data->data) stay where they are while g lives: a holder no longer takes
 * them over (mx__graph_const_rehome refuses). For readers of the bytes in place, e.g. an
 * executor on a host-memory device. */
void mx__graph_const_pin(const mx_graph *g, mx_value_id v);
/* Bytes of tensor data every graph of the process has copied into its arena so far (constants,
 * Constant-node and tensor attributes): tests check with it that compiling shares the imported
 * initializers instead of copying them. */
uint64_t mx__graph_tensor_bytes_copied(void);
/* ONNX files mx_onnx_load_file has read in this process so far (graph/onnx/onnx_import.c). */
uint64_t mx__onnx_files_loaded(void);
/* Adds a use of v by node n. */
MX_MUST_USE mx_status mx__graph_add_use(mx_graph *g, mx_value_id v, mx_node_id n);
/* Removes one use of v by node n (no-op when absent). */
void mx__graph_remove_use(mx_graph *g, mx_value_id v, mx_node_id n);
/* Redirects every use of `from` (node inputs and graph outputs) to `to`. */
MX_MUST_USE mx_status mx__graph_replace_uses(mx_graph *g, mx_value_id from, mx_value_id to);
/* Marks node n dead and drops its input uses; its outputs lose their producer. */
void mx__graph_remove_node(mx_graph *g, mx_node_id n);
/* Marks value v dead (it must have no consumers and not be a graph input/output). */
void mx__graph_remove_value(mx_graph *g, mx_value_id v);
/* Forgets the cached topological order (call after changing edges). */
void mx__graph_invalidate(mx_graph *g);

/* --- walking -------------------------------------------------------------------------------- */

/* Stable topological order of the live nodes: among ready nodes the smallest id goes first, so a
 * graph built in a valid order keeps it. The array is cached on the graph (borrowed, valid until
 * the next change). Fails with MX_ERR_INVALID_GRAPH naming a node on a cycle. */
MX_MUST_USE mx_status mx__graph_topo_order(mx_graph *g, const mx_node_id **order, size_t *n);
/* The same order computed into out (room for g->n_nodes ids) and not cached, for callers that
 * must leave g untouched. *n receives the count placed; when it is less than the live nodes
 * (some lie on or behind a cycle), *culprit names the first such node by id (a string of g).
 * Returns false when out of memory. */
bool mx__graph_order_nodes(const mx_graph *g, mx_node_id *out, size_t *n, const char **culprit);

/* graph/subgraph.c: a calloc'd flag per value of g (n_values), 1 for a value that a subgraph
 * of g reads by name (an outer-scope capture, at any depth), so passes keep it; NULL when out
 * of memory. */
uint8_t *mx__graph_captured(const mx_graph *g);
/* graph/subgraph.c: the edges a capture implies but no node input shows: a node holding
 * subgraphs runs after the producer of every value of g they read by name. A CSR by producer:
 * the nodes waiting for live node p are (*to)[(*first)[p] .. (*first)[p + 1]); both malloc'd
 * (*first has n_nodes + 1 entries). False when out of memory. */
bool mx__graph_capture_edges(const mx_graph *g, uint32_t **first, mx_node_id **to);
/* Replaces each If node whose condition is a constant by the nodes of the branch it takes
 * (branches holding subgraphs of their own are left alone); adds the count to *folded. */
MX_MUST_USE mx_status mx__graph_fold_const_if(mx_graph *g, size_t *folded);

/* The attribute called `name` on node n, or NULL. */
const mx_attr *mx__node_attr(const mx_node *n, const char *name);

/* Deep-copies attributes into g's arena (GRAPH attributes are adopted, not copied). */
MX_MUST_USE mx_status mx__graph_copy_attrs(mx_graph *g, const mx_attr *src, size_t n, mx_attr **out);
/* Copies a tensor (header and data) into g's arena. */
mx_tensor *mx__graph_copy_tensor(mx_graph *g, const mx_tensor *t);

static inline mx_value *mx__val(const mx_graph *g, mx_value_id v) { return &g->values[v]; }
static inline mx_node *mx__node(const mx_graph *g, mx_node_id n) { return &g->nodes[n]; }
static inline bool mx__value_valid(const mx_graph *g, mx_value_id v) {
  return v < g->n_values && !(g->values[v].flags & MX_VALUE_DEAD);
}
static inline bool mx__node_valid(const mx_graph *g, mx_node_id n) {
  return n < g->n_nodes && !(g->nodes[n].flags & MX_NODE_DEAD);
}

#endif /* MIXRT_GRAPH_IR_H */
