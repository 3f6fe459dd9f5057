/* Graph passes shared with the modules above graph/: per-node checking and inference (used by
 * the whole-graph pass here and, at run time, by the reference interpreter and the dynamic
 * executor), and constant folding with a caller-supplied evaluator (graph/ has no kernels). */
#ifndef MIXRT_GRAPH_PASSES_H
#define MIXRT_GRAPH_PASSES_H

#include "graph/ir.h"
#include "graph/ops/op.h"

/* Resolves node n's definition and checks its arity and attributes against the schema, then
 * parses its params (once; they are cached on the node). Errors name the node. */
MX_MUST_USE mx_status mx__node_prepare(mx_graph *g, mx_node_id n, mx_error *err);

/* Runs node n's inference on the given input infos. out[0..n_outputs) receive the results;
 * out_sv must hold n_outputs * MX_SV_MAX entries. `syms` is the table used for arithmetic: the
 * graph's own at compile time; at run time (runtime = true) a caller-owned scratch table, since
 * the graph's table must not change while it is executing. Errors name the node. */
MX_MUST_USE mx_status mx__node_infer(const mx_graph *g, mx_node_id n, mx_symtab *syms,
                                     const mx_value_info *in, mx_value_info *out, mx_dim *out_sv,
                                     bool runtime, mx_error *err);

/* mx__node_infer of a node whose op runs subgraphs (MX_OP_SUBGRAPH; graph/subgraph.c): infers
 * the subgraphs against the node's inputs and captured outer values, then the outputs. */
MX_MUST_USE mx_status mx__subgraph_node_infer(const mx_graph *g, mx_node_id n, mx_symtab *syms,
                                              const mx_value_info *in, mx_value_info *out, mx_dim *out_sv,
                                              bool runtime, mx_error *err);

/* Infers subgraph `sub` (attribute `attr` of node n) with its inputs declared as tensors of
 * dtypes[i] and shapes[i] (one per input of sub), after binding the outer values it captures:
 * for ops that carry subgraphs without running through mx__subgraph_node_infer. */
MX_MUST_USE mx_status mx__subgraph_infer_as(const mx_graph *g, mx_node_id n, mx_symtab *syms, mx_graph *sub,
                                            const char *attr, const mx_dtype *dtypes, const mx_shape *shapes,
                                            mx_error *err);

/* graph/ops/llm.c: infers FlexAttention node n's score_mod / prob_mod subgraphs (if any) for the
 * node's input infos, so that passes over them see their types and shapes. */
MX_MUST_USE mx_status mx__flex_infer_mods(const mx_graph *g, mx_node_id n, mx_symtab *syms,
                                          const mx_value_info *in, mx_error *err);

/* Fills `info` with what the graph knows about value v. */
void mx__value_info_of(const mx_graph *g, mx_value_id v, mx_value_info *info);

/* Where mx__graph_infer_nodes reads node inputs and keeps node outputs: the graph's own values
 * (mx_graph_infer) or caller-owned records (run-time inference of a PartitionedCall body). */
typedef struct mx__infer_io {
  /* Fills *info for input value v (never MX_NO_VALUE). */
  void (*get)(void *user, mx_value_id v, mx_value_info *info);
  /* Keeps the inferred *info of output value v (its sv is only valid during the call: copy
   * it). On failure leaves a message in the error of mx__graph_infer_nodes. */
  mx_status (*put)(void *user, mx_value_id v, const mx_value_info *info);
  void *user; /* passed to get and put */
} mx__infer_io;

/* Infers the nodes order[0..n_order) of g in that order with mx__node_infer (symbols in syms,
 * `runtime` as there): each node's inputs come from io->get, its outputs go to io->put. Stops at
 * the first failure, whose message is in err (may be NULL); `what` names g in the messages of
 * this function ("graph", "body"). Every node must have been prepared (mx__node_prepare). */
MX_MUST_USE mx_status mx__graph_infer_nodes(const mx_graph *g, const mx_node_id *order, size_t n_order,
                                            mx_symtab *syms, bool runtime, const mx__infer_io *io,
                                            const char *what, mx_error *err);

/* Evaluates node n on constant inputs: fills outs[0..n_outputs) with host tensors whose data
 * the callee allocated with malloc (the caller frees it). Returns MX_ERR_UNSUPPORTED to decline. */
typedef mx_status (*mx_fold_eval_fn)(void *user, mx_graph *g, mx_node_id n, mx_tensor *outs);

/* Replaces nodes whose outputs are all known constants by those constants: outputs whose
 * symbolic value is fully concrete (shape arithmetic) always; any node with only constant inputs
 * when `eval` is given (tensors up to max_bytes). Adds to *folded the number of nodes folded. */
MX_MUST_USE mx_status mx__graph_fold_constants(mx_graph *g, mx_fold_eval_fn eval, void *user,
                                               size_t max_bytes, size_t *folded);

/* Removes nodes whose outputs nothing uses and constants nobody reads. */
MX_MUST_USE mx_status mx__graph_remove_dead(mx_graph *g, size_t *removed_nodes, size_t *removed_values);

#endif /* MIXRT_GRAPH_PASSES_H */
