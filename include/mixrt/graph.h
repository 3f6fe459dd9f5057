/* Graphs: the builder API and read access to mixrt's IR.
 *
 * A graph holds values (tensors: graph inputs, constants, node outputs) and nodes (one op each).
 * Every value has at most one producer and any number of consumers. Values and nodes are
 * addressed by small integer ids that stay valid for the graph's lifetime. One graph owns
 * everything it holds (names, attributes, constant data, subgraphs).
 *
 * Typical use (a graph computing y = x + 1 over a symbolic batch):
 *
 *   mx_graph *g; mx_graph_create("add_one", &g);
 *   mx_shape s = {1, {mx_sym_named(mx_graph_symtab(g), "batch")}};
 *   mx_value_id x, one, y;
 *   mx_graph_add_input(g, "x", MX_FLOAT32, &s, &x);
 *   float v = 1.0f; mx_tensor c = {.dtype = MX_FLOAT32, .rank = 0, .data = &v};
 *   mx_graph_add_constant(g, "one", &c, &one);
 *   mx_graph_add_op(g, "Add", (mx_value_id[]){x, one}, 2, NULL, 0, &y);
 *   mx_graph_add_output(g, y);
 *   if (mx_graph_infer(g) != MX_OK) puts(mx_graph_last_error(g));
 *   mx_graph_destroy(g);
 *
 * Failing calls return a status and leave a message on the graph (mx_graph_last_error) that
 * names the node, value or attribute at fault; the graph stays as it was before the call. */
#ifndef MIXRT_GRAPH_H
#define MIXRT_GRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mixrt/api.h"
#include "mixrt/dtype.h"
#include "mixrt/log.h"
#include "mixrt/shape.h"
#include "mixrt/status.h"
#include "mixrt/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mx_graph mx_graph;
typedef uint32_t mx_value_id;
typedef uint32_t mx_node_id;
#define MX_NO_VALUE ((mx_value_id)UINT32_MAX) /* an omitted optional input */
#define MX_NO_NODE  ((mx_node_id)UINT32_MAX)

/* The default-domain opset a new graph imports; ONNX import replaces it with the model's. */
#define MX_DEFAULT_OPSET 23

typedef enum mx_attr_type {
  MX_ATTR_UNDEFINED = 0,
  MX_ATTR_FLOAT = 1,
  MX_ATTR_INT = 2,
  MX_ATTR_STRING = 3,
  MX_ATTR_TENSOR = 4,
  MX_ATTR_GRAPH = 5,
  MX_ATTR_FLOATS = 6,
  MX_ATTR_INTS = 7,
  MX_ATTR_STRINGS = 8,
  MX_ATTR_TYPE_PROTO = 13 /* a value type: i holds MX_TYPE_CODE(kind, element dtype) */
} mx_attr_type;           /* values equal ONNX's AttributeProto.AttributeType */

/* What a value holds: a tensor, a sequence of tensors, or an optional (empty or holding a
 * tensor or a sequence). A sequence's or optional's dtype is its tensors' element type, its
 * shape their common shape when known. */
typedef enum mx_value_kind {
  MX_KIND_TENSOR = 0,
  MX_KIND_SEQUENCE = 1,
  MX_KIND_OPTIONAL = 2,         /* optional tensor */
  MX_KIND_OPTIONAL_SEQUENCE = 3 /* optional sequence of tensors */
} mx_value_kind;
/* One int naming a value type (the TYPE_PROTO attribute encoding): kind and element dtype. */
#define MX_TYPE_CODE(kind, dtype) ((int64_t)(kind)*4096 + (int64_t)(dtype))
#define MX_TYPE_CODE_KIND(code)   ((mx_value_kind)((code) / 4096))
#define MX_TYPE_CODE_DTYPE(code)  ((mx_dtype)((code) % 4096))

/* A node attribute. Only the fields of its type are read; everything is copied on add. */
typedef struct mx_attr {
  const char *name;
  mx_attr_type type;
  int64_t i;                  /* INT */
  float f;                    /* FLOAT */
  const char *s;              /* STRING: NUL-terminated text */
  const int64_t *ints;        /* INTS: count entries */
  const float *floats;        /* FLOATS: count entries */
  const char *const *strings; /* STRINGS: count entries */
  size_t count;               /* length of ints / floats / strings */
  const mx_tensor *tensor;    /* TENSOR: host data, copied */
  mx_graph *graph;            /* GRAPH: ownership moves to the node's graph on success */
} mx_attr;

static inline mx_attr mx_attr_int(const char *name, int64_t v) {
  mx_attr a = {0};
  a.name = name;
  a.type = MX_ATTR_INT;
  a.i = v;
  return a;
}
static inline mx_attr mx_attr_float(const char *name, float v) {
  mx_attr a = {0};
  a.name = name;
  a.type = MX_ATTR_FLOAT;
  a.f = v;
  return a;
}
static inline mx_attr mx_attr_string(const char *name, const char *v) {
  mx_attr a = {0};
  a.name = name;
  a.type = MX_ATTR_STRING;
  a.s = v;
  return a;
}
static inline mx_attr mx_attr_ints(const char *name, const int64_t *v, size_t n) {
  mx_attr a = {0};
  a.name = name;
  a.type = MX_ATTR_INTS;
  a.ints = v;
  a.count = n;
  return a;
}
static inline mx_attr mx_attr_floats(const char *name, const float *v, size_t n) {
  mx_attr a = {0};
  a.name = name;
  a.type = MX_ATTR_FLOATS;
  a.floats = v;
  a.count = n;
  return a;
}
static inline mx_attr mx_attr_tensor(const char *name, const mx_tensor *t) {
  mx_attr a = {0};
  a.name = name;
  a.type = MX_ATTR_TENSOR;
  a.tensor = t;
  return a;
}
static inline mx_attr mx_attr_graph(const char *name, mx_graph *g) {
  mx_attr a = {0};
  a.name = name;
  a.type = MX_ATTR_GRAPH;
  a.graph = g;
  return a;
}

/* Everything that describes one node for mx_graph_add_node. */
typedef struct mx_node_desc {
  const char *op_type;       /* ONNX op type, e.g. "MatMul" */
  const char *domain;        /* NULL or "" for the default ONNX domain */
  const char *name;          /* NULL: a unique name is generated */
  const mx_value_id *inputs; /* MX_NO_VALUE for an omitted optional input */
  size_t n_inputs;
  const mx_attr *attrs;
  size_t n_attrs;
  const char *const *output_names; /* NULL (or a NULL entry): "<node name>:<index>" */
  size_t n_outputs;
} mx_node_desc;

/* --- lifetime ------------------------------------------------------------------------------- */

/* Creates an empty graph importing MX_DEFAULT_OPSET. *out receives ownership. */
MX_API MX_MUST_USE mx_status mx_graph_create(const char *name, mx_graph **out);
/* Frees the graph and everything it owns. NULL is a no-op. */
MX_API void mx_graph_destroy(mx_graph *g);
/* Message of the last failure on this graph ("" if none). Borrowed until the next call. */
MX_API const char *mx_graph_last_error(const mx_graph *g);
/* The graph's symbol table (shared with its subgraphs). Borrowed. */
MX_API mx_symtab *mx_graph_symtab(mx_graph *g);
/* Installs a log callback for passes run on this graph (NULL removes it). */
MX_API void mx_graph_set_log(mx_graph *g, mx_log_fn fn, void *user);
MX_API const char *mx_graph_name(const mx_graph *g);

/* Sets the opset version the graph imports for `domain` (NULL or "" = default ONNX domain). */
MX_API MX_MUST_USE mx_status mx_graph_set_opset(mx_graph *g, const char *domain, int64_t version);
/* Imported version of `domain`, or 0 when the graph does not import it. */
MX_API int64_t mx_graph_opset(const mx_graph *g, const char *domain);

/* --- building ------------------------------------------------------------------------------- */

/* Declares a graph input. `shape` may hold symbolic and unknown dims (NULL: unknown rank). */
MX_API MX_MUST_USE mx_status mx_graph_add_input(mx_graph *g, const char *name, mx_dtype dtype,
                                                const mx_shape *shape, mx_value_id *out);
/* Adds a constant (initializer); its data is copied. */
MX_API MX_MUST_USE mx_status mx_graph_add_constant(mx_graph *g, const char *name, const mx_tensor *t,
                                                   mx_value_id *out);
/* Adds a node; outputs[0..desc->n_outputs) receive the ids of its new output values. */
MX_API MX_MUST_USE mx_status mx_graph_add_node(mx_graph *g, const mx_node_desc *desc, mx_value_id *outputs);
/* Shorthand for a single-output node in the default domain with a generated name. */
MX_API MX_MUST_USE mx_status mx_graph_add_op(mx_graph *g, const char *op_type, const mx_value_id *inputs,
                                             size_t n_inputs, const mx_attr *attrs, size_t n_attrs,
                                             mx_value_id *output);
/* Marks a value as the next graph output. */
MX_API MX_MUST_USE mx_status mx_graph_add_output(mx_graph *g, mx_value_id v);

/* --- reading -------------------------------------------------------------------------------- */

MX_API size_t mx_graph_input_count(const mx_graph *g);
MX_API mx_value_id mx_graph_input(const mx_graph *g, size_t index);
MX_API size_t mx_graph_output_count(const mx_graph *g);
MX_API mx_value_id mx_graph_output(const mx_graph *g, size_t index);
/* Number of live nodes. */
MX_API size_t mx_graph_node_count(const mx_graph *g);
/* The value called `name`, or MX_NO_VALUE. */
MX_API mx_value_id mx_graph_find_value(const mx_graph *g, const char *name);
/* The node called `name`, or MX_NO_NODE. */
MX_API mx_node_id mx_graph_find_node(const mx_graph *g, const char *name);
MX_API const char *mx_graph_value_name(const mx_graph *g, mx_value_id v);
MX_API mx_dtype mx_graph_value_dtype(const mx_graph *g, mx_value_id v);
/* Copies the (possibly symbolic) shape of a value; false for an invalid id. */
MX_API bool mx_graph_value_shape(const mx_graph *g, mx_value_id v, mx_shape *shape);
/* Constant data of a value (initializer or folded), or NULL. Borrowed from the graph. */
MX_API const mx_tensor *mx_graph_value_constant(const mx_graph *g, mx_value_id v);
/* What value v holds (MX_KIND_TENSOR for an invalid id). */
MX_API mx_value_kind mx_graph_value_kind(const mx_graph *g, mx_value_id v);
/* Declares that graph input v holds a sequence or an optional rather than a tensor. */
MX_API MX_MUST_USE mx_status mx_graph_set_input_kind(mx_graph *g, mx_value_id v, mx_value_kind kind);

/* --- subgraphs (If / Loop / Scan bodies) ------------------------------------------------------ */

/* Creates an empty subgraph of g (for a GRAPH attribute of a node of g): it imports g's opsets
 * and shares its symbols; g owns it. Pass it in an mx_attr of type MX_ATTR_GRAPH. */
MX_API MX_MUST_USE mx_status mx_graph_create_subgraph(mx_graph *g, const char *name, mx_graph **out);
/* In subgraph `sub`, a reference to the value called `name` of an enclosing graph (an outer-scope
 * capture): it reads that value when the node owning `sub` runs. */
MX_API MX_MUST_USE mx_status mx_graph_add_outer(mx_graph *sub, const char *name, mx_value_id *out);

/* --- passes --------------------------------------------------------------------------------- */

/* Checks structure: dangling or duplicate names, cycles, arity, attributes, dtypes. */
MX_API MX_MUST_USE mx_status mx_graph_validate(mx_graph *g);
/* Resolves op definitions and infers dtypes, shapes and symbolic values of every value. */
MX_API MX_MUST_USE mx_status mx_graph_infer(mx_graph *g);

/* What mx_graph_optimize did. */
typedef struct mx_optimize_report {
  size_t folded_nodes;   /* nodes replaced by constants */
  size_t removed_nodes;  /* nodes removed because nothing used their outputs */
  size_t removed_values; /* constants and values removed with them */
} mx_optimize_report;

/* Validation + inference + constant folding + dead-node removal, to a fixed point.
 * `report` may be NULL; else `record_size` bytes of it are written, the caller's
 * sizeof(mx_optimize_report): the library's fields first, zeros past them (docs/abi.md). */
MX_API MX_MUST_USE mx_status mx_graph_optimize_sized(mx_graph *g, mx_optimize_report *report,
                                                     size_t record_size);
/* mx_graph_optimize_sized with the size of the record this header declares. */
static inline MX_MUST_USE mx_status mx_graph_optimize(mx_graph *g, mx_optimize_report *report) {
  return mx_graph_optimize_sized(g, report, sizeof(mx_optimize_report));
}

/* --- Stage 2: rewrite rules (fusion and simplification; graph/passes/rewrite.c) -------------- */

#define MX_FUSE_MAX_RULES    32
#define MX_FUSE_MAX_OP_TYPES 96

/* What mx_graph_fuse did: per rule whether it ran and how often it hit, and the live op count
 * and per-op-type histogram before and after (op types beyond MX_FUSE_MAX_OP_TYPES are left
 * out of the histogram, never of the counts). Strings are static or borrowed from the graph. */
typedef struct mx_fuse_report {
  size_t n_rules;
  struct {
    const char *name;
    bool enabled;
    size_t hits;
  } rules[MX_FUSE_MAX_RULES];
  size_t ops_before, ops_after;
  size_t n_op_types;
  struct {
    const char *op_type;
    size_t before, after;
  } op_types[MX_FUSE_MAX_OP_TYPES];
} mx_fuse_report;

/* Runs the rewrite rules that `passes` selects on an inferred graph, to a fixed point, with
 * dead-node removal and re-inference after each change. `passes`: NULL or "default" (the
 * default rules), "none", "all", or a comma-separated list of rule names (a leading '-' turns a
 * default rule off: "default,-cse"). A graph holding subgraphs is left as it is. `report` may be
 * NULL; else `record_size` bytes of it are written, the caller's sizeof(mx_fuse_report) (docs/abi.md;
 * MX_FUSE_MAX_RULES and MX_FUSE_MAX_OP_TYPES size its arrays, so changing them is an ABI break).
 * Fails with MX_ERR_INVALID_ARGUMENT naming an unknown rule. */
MX_API MX_MUST_USE mx_status mx_graph_fuse_sized(mx_graph *g, const char *passes, mx_fuse_report *report,
                                                 size_t record_size);
/* mx_graph_fuse_sized with the size of the record this header declares. */
static inline MX_MUST_USE mx_status mx_graph_fuse(mx_graph *g, const char *passes, mx_fuse_report *report) {
  return mx_graph_fuse_sized(g, passes, report, sizeof(mx_fuse_report));
}
/* Rewrites g in place into the graph rank `rank` of `tp` runs for tensor parallelism (the pass
 * of `mixrt shard`, docs/distributed.md): the graph is inferred, folded and fused first, then the
 * attention heads and the MLP are split column then row with one AllReduce per block, the KV
 * cache inputs/outputs keep the rank's kv-heads and the vocabulary is split with an AllGather of
 * the logits. The collectives are domain "mixrt" nodes carrying world_size = tp; a session runs
 * them once a communicator of tp ranks is attached (mx_session_set_comm, mixrt/dist.h, in
 * libmixrt_mpi). tp 1 leaves the computation whole. Fails with MX_ERR_INVALID_ARGUMENT for tp < 1
 * or rank outside [0, tp), and with the pass's error naming the node for a graph it cannot shard
 * (heads not divisible by tp, a weight read in two incompatible ways, ...); g is then unusable. */
MX_API MX_MUST_USE mx_status mx_graph_shard(mx_graph *g, int32_t tp, int32_t rank);
/* The rules mx_graph_fuse knows, by index (NULL past the last), with a one-line description
 * and whether "default" runs it. */
MX_API const char *mx_fuse_rule_name(size_t index, const char **what, bool *by_default);

/* Binds symbol `name` to `value` everywhere (graph inputs and inferred shapes) and re-infers.
 * Fails with MX_ERR_NOT_FOUND when the graph has no such symbol. */
MX_API MX_MUST_USE mx_status mx_graph_bind_symbol(mx_graph *g, const char *name, int64_t value);

#ifdef __cplusplus
}
#endif
#endif /* MIXRT_GRAPH_H */
