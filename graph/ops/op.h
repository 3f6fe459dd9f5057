/* Op definitions: what mixrt knows about each ONNX operator.
 *
 * An mx_op_def gives an op's arity, its attribute schema (names, types, defaults), a parse
 * function that turns a node's attributes into a plain-old-data params struct (the struct CPU
 * kernels read, and that .mxm files store byte for byte), a shape+dtype inference function and
 * flags. Inference works on possibly symbolic shapes and on the symbolic *values* of small
 * integer tensors (design §4), and the same function serves at run time with concrete shapes
 * and values (ctx->runtime), so the reference interpreter and the dynamic executor never need
 * a second copy of the shape rules.
 *
 * Params structs must not contain pointers: they are copied, hashed and serialized as bytes. */
#ifndef MIXRT_GRAPH_OPS_OP_H
#define MIXRT_GRAPH_OPS_OP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "mixrt/graph.h"

/* Elements of a symbolic value the inference keeps (longer integer tensors get none). */
#define MX_SV_MAX 64
/* Arity marker for variadic ops (Concat, Sum, Max, Min, ...): any count up to this. */
#define MX_VARIADIC 65535

/* Op flags. */
enum {
  /* An output shape depends on input *values* only known after the kernel ran (NonZero).
   * The op must provide upper_bound, and its kernel writes the actual shape. */
  MX_OP_DATA_DEPENDENT = 1u << 0,
  /* Small integer shape arithmetic: cheaper on the host than a device round trip. */
  MX_OP_HOST_PREFERRED = 1u << 1,
  /* Elementwise: output 0 may be computed in place over an input of equal shape and dtype. */
  MX_OP_ELEMENTWISE = 1u << 2,
  /* Output 0 holds exactly the bytes of input 0 (Reshape, Squeeze, Identity, ...). */
  MX_OP_ALIAS = 1u << 3,
  /* Reads only the shape of its input, not its data (Shape, Size). */
  MX_OP_SHAPE_ONLY = 1u << 4,
  /* Takes or gives sequences / optionals (mx_value_info.kind); other ops refuse them. */
  MX_OP_ANY_KIND = 1u << 5,
  /* Runs subgraphs (If, Loop, Scan, SequenceMap): inferred and run by graph/subgraph.c and
   * reference/control.c from the node itself rather than through infer and a kernel. */
  MX_OP_SUBGRAPH = 1u << 6,
  /* Exchanges data with other ranks (the collectives of graph/ops/collective.c): never folded
   * at load, even on constant inputs, and kept when nothing reads its outputs (Send). */
  MX_OP_COMMUNICATES = 1u << 7
};

/* What inference knows about one value. */
typedef struct mx_value_info {
  bool present; /* false for an omitted optional input / output */
  mx_dtype dtype;
  mx_shape shape;
  const mx_dim *sv;      /* symbolic value (row-major), NULL when unknown */
  int32_t sv_len;        /* elements in sv, -1 when unknown */
  const mx_tensor *data; /* constant data on the host, or NULL */
  uint8_t kind;          /* mx_value_kind: tensor (0), sequence or optional */
} mx_value_info;

/* Attribute schema entry. Defaults apply when the node does not carry the attribute. */
typedef struct mx_attr_spec {
  const char *name;
  mx_attr_type type;
  bool required;
  int64_t def_i;     /* INT default */
  float def_f;       /* FLOAT default */
  const char *def_s; /* STRING default (NULL: "") */
} mx_attr_spec;

struct mx_op_def;

/* Input of a parse function. */
typedef struct mx_parse_ctx {
  const struct mx_op_def *def;
  const mx_attr *attrs; /* the node's attributes (already checked against the schema) */
  uint32_t n_attrs;
  int64_t opset;     /* version of the op's domain the model imports */
  uint32_t n_inputs; /* as given on the node (including omitted optional ones) */
  uint32_t n_outputs;
  const char *node_name;
  mx_error *err;
} mx_parse_ctx;

/* Input and output of an inference function. */
typedef struct mx_infer_ctx {
  mx_symtab *syms;    /* the graph's symbol table */
  const void *params; /* parsed params (def->params_size bytes) */
  int64_t opset;
  const char *node_name; /* for messages */
  uint32_t n_in;
  uint32_t n_out;
  const mx_value_info *in; /* n_in entries */
  mx_value_info *out;      /* n_out entries to fill: dtype, shape and (optionally) sv_len */
  mx_dim *out_sv;          /* storage for output symbolic values: output i owns
                              out_sv[i*MX_SV_MAX .. +MX_SV_MAX); out[i].sv already points there */
  bool runtime;            /* shapes and values are the actual ones of a run: no fresh symbols */
  mx_error *err;
} mx_infer_ctx;

typedef struct mx_op_def {
  const char *name;                  /* op type */
  const char *domain;                /* "" for the default ONNX domain */
  uint16_t min_inputs, max_inputs;   /* max MX_VARIADIC for variadic */
  uint16_t min_outputs, max_outputs; /* max MX_VARIADIC for a variable count (Split) */
  uint32_t flags;                    /* MX_OP_* */
  uint64_t value_inputs;             /* bit i: the VALUE of input i shapes the outputs */
  const mx_attr_spec *attrs;         /* schema, terminated by an entry with name NULL */
  size_t params_size;                /* bytes of the params struct (0: no params) */
  /* Fills params from the node's attributes. NULL when params_size is 0. */
  mx_status (*parse)(const mx_parse_ctx *pc, void *params);
  /* Infers output dtypes and shapes (and symbolic values where it can). */
  mx_status (*infer)(mx_infer_ctx *ctx);
  /* For MX_OP_DATA_DEPENDENT ops: the largest shape output `index` can have, given concrete
   * input shapes in ctx (ctx->runtime is true). */
  mx_status (*upper_bound)(mx_infer_ctx *ctx, uint32_t index, mx_shape *bound);
  /* For ops without MX_OP_ALIAS that still leave the bytes where they are for some inputs:
   * whether output 0 is exactly input 0's bytes for this node (params parsed) when input 0 has
   * shape in0 in every run. NULL: never. */
  bool (*keeps_bytes)(const void *params, const mx_shape *in0);
} mx_op_def;

/* Whether node nd's output 0 is exactly the bytes of its input 0 (a view under another shape):
 * an MX_OP_ALIAS op, or an op whose keeps_bytes says so for the input's inferred shape (a
 * Transpose that moves only dims of size 1). Executors may then bind the output to the input's
 * memory instead of running a kernel. */
struct mx_node;
bool mx__node_keeps_bytes(const mx_graph *g, const struct mx_node *nd);

/* The definition of (domain, op_type), or NULL. domain NULL or "ai.onnx" means "". */
const mx_op_def *mx__op_find(const char *domain, const char *op_type);
/* Every definition, in a stable order (for listings). */
size_t mx__op_count(void);
const mx_op_def *mx__op_at(size_t index);

/* --- helpers for parse functions -------------------------------------------------------------- */

/* The node's attribute called name, or NULL. */
const mx_attr *mx__parse_attr(const mx_parse_ctx *pc, const char *name);
/* INT attribute or its schema default. */
int64_t mx__parse_int(const mx_parse_ctx *pc, const char *name);
/* FLOAT attribute or its schema default. */
float mx__parse_float(const mx_parse_ctx *pc, const char *name);
/* STRING attribute or its schema default, copied into buf (fails if it does not fit). */
MX_MUST_USE mx_status mx__parse_string(const mx_parse_ctx *pc, const char *name, char *buf, size_t cap);
/* INTS attribute copied into out[0..cap); *n receives the count (0 when absent).
 * Fails with MX_ERR_LIMIT when there are more than cap. */
MX_MUST_USE mx_status mx__parse_ints(const mx_parse_ctx *pc, const char *name, int64_t *out, size_t cap,
                                     size_t *n);
/* FLOATS attribute, likewise. */
MX_MUST_USE mx_status mx__parse_floats(const mx_parse_ctx *pc, const char *name, float *out, size_t cap,
                                       size_t *n);
/* Records an attribute error naming the node and returns MX_ERR_INVALID_GRAPH. */
mx_status mx__parse_fail(const mx_parse_ctx *pc, const char *fmt, ...) MX_PRINTF(2, 3);

/* --- helpers for inference functions ---------------------------------------------------------- */

/* Records an inference error (the caller adds the node name) and returns `status`. */
mx_status mx__infer_fail(mx_infer_ctx *ctx, mx_status status, const char *fmt, ...) MX_PRINTF(3, 4);
/* A fresh symbol for a size only known at run time (named after the node and `what`), or
 * MX_DIM_UNKNOWN when ctx->runtime. */
mx_dim mx__infer_fresh(mx_infer_ctx *ctx, const char *what);
/* Writable symbolic-value storage of output i (MX_SV_MAX entries). */
static inline mx_dim *mx__infer_out_sv(mx_infer_ctx *ctx, uint32_t i) {
  return ctx->out_sv + (size_t)i * MX_SV_MAX;
}
/* True when input i is present. */
static inline bool mx__in_present(const mx_infer_ctx *ctx, uint32_t i) {
  return i < ctx->n_in && ctx->in[i].present;
}
/* Number of elements of a shape as a symbolic integer (unknown for an unknown rank). */
mx_dim mx__shape_numel(mx_symtab *t, const mx_shape *s);
/* Normalizes a possibly negative axis against rank; false when out of range. */
bool mx__norm_axis(int64_t axis, int32_t rank, int32_t *out);
/* Multidirectional (numpy) broadcasting of two shapes. Fails with MX_ERR_SHAPE when two dims
 * are provably incompatible. */
MX_MUST_USE mx_status mx__broadcast_shapes(mx_infer_ctx *ctx, const mx_shape *a, const mx_shape *b,
                                           mx_shape *out);
/* Fails with MX_ERR_SHAPE when two dims that must be equal provably differ (both concrete, or
 * symbols whose order is decided); unknown dims pass. `what` names the pair in the message. */
MX_MUST_USE mx_status mx__check_same_dim(mx_infer_ctx *ctx, mx_dim a, mx_dim b, const char *what);
/* Fails with MX_ERR_DTYPE unless input i has the dtype of input ref. */
MX_MUST_USE mx_status mx__infer_same_dtype(mx_infer_ctx *ctx, uint32_t i, uint32_t ref);
/* The integer elements of input i when known (from sv); NULL otherwise. *n gets the count. */
const mx_dim *mx__in_values(const mx_infer_ctx *ctx, uint32_t i, int32_t *n);
/* Input i's elements as concrete int64 when every one is a constant; false otherwise. */
bool mx__in_const_ints(const mx_infer_ctx *ctx, uint32_t i, int64_t *out, int32_t cap, int32_t *n);

#endif /* MIXRT_GRAPH_OPS_OP_H */
