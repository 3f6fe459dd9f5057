/* Stage 2 of graph optimization: named rewrite rules over the IR (fusion, simplification) and
 * the helpers they share. graph/passes/rewrite.c runs the rules (mx_graph_fuse); each
 * graph/passes/fuse_*.c file holds a family of rules.
 *
 * A rule walks the graph once and rewrites every match it finds, returning the number of hits.
 * Rules read inferred dtypes, shapes (possibly symbolic) and constants, and only rewrite when
 * the result is the same for every value of the symbols. A rule never removes the nodes of a
 * pattern itself: it makes the pattern's last value come from a new node (or forwards its uses)
 * and the runner's dead-node removal drops whatever nothing reads any more, so inner values that
 * other nodes also read stay computed. */
#ifndef MIXRT_GRAPH_PASSES_REWRITE_H
#define MIXRT_GRAPH_PASSES_REWRITE_H

#include "graph/ir.h"
#include "graph/ops/op.h"

typedef struct mx__rw_rule {
  const char *name;
  const char *what; /* one line for listings */
  bool by_default;  /* part of --passes default */
  /* Runs only once the other rules stop hitting: it takes apart forms other rules match (the
   * MatMul rules fold the Transpose the attention rule reads). */
  bool late;
  /* Rewrites every match in g; adds the hits to *hits. */
  mx_status (*run)(mx_graph *g, size_t *hits);
} mx__rw_rule;

/* The rules, in the order they run; NULL-terminated. */
extern const mx__rw_rule *const mx__rw_rules[];

/* The rule families. */
extern const mx__rw_rule mx__rule_identity, mx__rule_transpose_pair, mx__rule_reshape_chain, mx__rule_cse;
extern const mx__rw_rule mx__rule_bn_fold;
extern const mx__rw_rule mx__rule_gelu, mx__rule_silu, mx__rule_layernorm, mx__rule_rmsnorm;
extern const mx__rw_rule mx__rule_attention, mx__rule_rotary, mx__rule_conv_act;
extern const mx__rw_rule mx__rule_matmul_transpose, mx__rule_matmul_bias_act, mx__rule_shape_subgraph;
extern const mx__rw_rule mx__rule_transpose_reshape, mx__rule_view_chain, mx__rule_gemm_act;
extern const mx__rw_rule mx__rule_cast_pair, mx__rule_shape_cse;

/* --- matching helpers ------------------------------------------------------------------------- */

/* The live default-domain node of type `op` producing v, or MX_NO_NODE. A node carrying
 * mixrt-internal attributes (mixrt_*: a fused activation, bias or transpose) is not the plain op
 * and is never returned. */
mx_node_id mx__rw_producer(const mx_graph *g, mx_value_id v, const char *op);
/* True when v is read by exactly one node input and is no graph output. */
bool mx__rw_single_use(const mx_graph *g, mx_value_id v);
/* True when v is a graph output (its name must stay). */
bool mx__rw_is_output(const mx_graph *g, mx_value_id v);
/* The single element of constant v as a double; false when v is no one-element float/int constant. */
bool mx__rw_const_scalar(const mx_graph *g, mx_value_id v, double *out);
/* True when constant v holds one element equal to `want` within a relative tolerance `tol`. */
bool mx__rw_const_is(const mx_graph *g, mx_value_id v, double want, double tol);
/* True when two shapes have the same known rank and equal dims (symbolic dims by identity). */
bool mx__rw_same_shape(const mx_shape *a, const mx_shape *b);
/* For a binary node n (Add, Mul, ...): the input other than v, or MX_NO_VALUE when v is none of
 * its two inputs. */
mx_value_id mx__rw_other_input(const mx_node *n, mx_value_id v);

/* A constant Reshape target (allowzero 0) taking a tensor of shape `from` to shape `to` for every
 * value of the symbols: concrete dims as they are, a symbolic dim equal to from's at the same
 * place as 0 (copy), at most one other symbolic dim as -1 when the division it stands for gives
 * that dim back. Fills target[0..to->rank); false when no such constant exists. */
bool mx__rw_reshape_target(mx_graph *g, const mx_shape *from, const mx_shape *to, int64_t *target);

/* --- rewriting helpers ------------------------------------------------------------------------ */

/* Makes value `out` come from a new default-domain node (op, inputs, attrs) instead of its
 * current producer, which is removed (its other outputs must be unused). `out` keeps its id,
 * name, dtype and shape. *node (may be NULL) receives the new node. */
MX_MUST_USE mx_status mx__rw_replace(mx_graph *g, mx_value_id out, const char *op, const mx_value_id *inputs,
                                     size_t n_inputs, const mx_attr *attrs, size_t n_attrs, mx_node_id *node);
/* The same for a node with several outputs: outs[k] comes from output k of the new node (each
 * current producer is removed). */
MX_MUST_USE mx_status mx__rw_replace_n(mx_graph *g, const mx_value_id *outs, size_t n_outs, const char *op,
                                       const mx_value_id *inputs, size_t n_inputs, const mx_attr *attrs,
                                       size_t n_attrs);
/* Makes every reader of `from` read `to` instead (same dtype and shape). When `from` is a graph
 * output, `to`'s producer is made to produce `from` directly so the output keeps its name; false
 * (nothing changed) when that is impossible (`to` is an input, a constant or an output). */
bool mx__rw_forward(mx_graph *g, mx_value_id from, mx_value_id to);
/* A new constant made for node `node` (e.g. a Reshape target it reads): named as that node
 * when no value bears the name, so messages about the constant (an upload that fails) still
 * name something of the model as it was given; else a unique name built from it. */
MX_MUST_USE mx_status mx__rw_new_const_for(mx_graph *g, mx_node_id node, mx_dtype dtype, int32_t rank,
                                           const int64_t *dims, const void *data, mx_value_id *out);
/* A new float constant of the given dims (data copied) named after `hint`. */
MX_MUST_USE mx_status mx__rw_new_const(mx_graph *g, const char *hint, mx_dtype dtype, int32_t rank,
                                       const int64_t *dims, const void *data, mx_value_id *out);

#endif /* MIXRT_GRAPH_PASSES_REWRITE_H */
