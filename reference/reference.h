/* Module-shared pieces of the reference interpreter: running one node on host tensors (used by
 * the interpreter itself and as the constant-folding evaluator of the compile pipeline). */
#ifndef MIXRT_REFERENCE_REFERENCE_H
#define MIXRT_REFERENCE_REFERENCE_H

#include "graph/passes/passes.h"
#include "mixrt/reference.h"

/* Runs node n of g (prepared: def and params resolved) on host tensors.
 * inputs[i] is NULL for an omitted optional input. outputs[0..n_outputs) receive host tensors
 * with data from mx__host_alloc (free with mx__host_free) — also on failure nothing is left
 * allocated. `scratch` is a symbol table for run-time inference (not the graph's). */
mx_status mx__reference_exec_node(mx_graph *g, mx_node_id n, mx_symtab *scratch,
                                  const mx_tensor *const *inputs, mx_tensor *outputs, mx_error *err);

/* Constant-folding evaluator (mx_fold_eval_fn) running nodes through the reference kernels.
 * `user` is ignored. Output data is malloc'd as mx__graph_fold_constants expects. */
mx_status mx__reference_fold_eval(void *user, mx_graph *g, mx_node_id n, mx_tensor *outs);

/* 64-byte aligned host buffers for tensor data (at least 1 byte, so data is never NULL);
 * free() may release them too. */
void *mx__host_alloc(size_t nbytes);
void mx__host_free(void *p);

#endif /* MIXRT_REFERENCE_REFERENCE_H */
