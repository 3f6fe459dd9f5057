/* Module-shared pieces of the reference interpreter: running one node on host tensors (used by
 * the interpreter itself and as the constant-folding evaluator of the compile pipeline). */
#ifndef MIXRT_REFERENCE_REFERENCE_H
#define MIXRT_REFERENCE_REFERENCE_H

#include <stdatomic.h>
#include <stdbool.h>

#include "graph/passes/passes.h"
#include "mixrt/reference.h"

/* Runs node n of g (prepared: def and params resolved) on host tensors.
 * inputs[i] is NULL for an omitted optional input. outputs[0..n_outputs) receive host tensors
 * with data from mx__host_alloc (free with mx__host_free) — also on failure nothing is left
 * allocated. `scratch` is a symbol table for run-time inference (not the graph's). */
MX_MUST_USE mx_status mx__reference_exec_node(mx_graph *g, mx_node_id n, mx_symtab *scratch,
                                              const mx_tensor *const *inputs, mx_tensor *outputs,
                                              mx_error *err);

/* One graph being run: its run-time values by id, chained to the frame of the node that runs it
 * (NULL for the root graph), where captured outer values are found by name. */
typedef struct mx__ref_frame {
  const mx_graph *g;
  mx_tensor *vals;
  const struct mx__ref_frame *parent;
} mx__ref_frame;

/* Runs g (inferred and prepared) in a frame under `parent` (NULL: the root graph, whose inputs
 * are checked against the declarations). Inputs are borrowed; outputs[0..n_outputs) receive
 * values the caller owns (mx_tensor_release; sequences and optionals included). */
MX_MUST_USE mx_status mx__reference_run_graph(mx_graph *g, const mx__ref_frame *parent,
                                              const mx_tensor *inputs, size_t n_inputs, mx_tensor *outputs,
                                              size_t n_outputs, mx_error *err);
/* The same, for a body whose caller reuses its inputs: an output that is one of g's inputs given
 * back unchanged is not copied but borrowed (borrowed[i] true: outputs[i] is the caller's own
 * inputs[...] tensor, which the caller must not release twice). borrowed may be NULL (copies). */
MX_MUST_USE mx_status mx__reference_run_body(mx_graph *g, const mx__ref_frame *parent,
                                             const mx_tensor *inputs, size_t n_inputs, mx_tensor *outputs,
                                             size_t n_outputs, bool *borrowed, mx_error *err);
/* The run-time value called `name` in frame f or the nearest enclosing frame, or NULL. */
const mx_tensor *mx__reference_frame_lookup(const mx__ref_frame *f, const char *name);

/* --- reference/control.c: ops that run subgraphs or handle sequences and optionals --------- */

/* True when node nd runs through mx__reference_exec_control: an op that runs subgraphs or
 * takes / gives sequences and optionals, or any node fed one (Identity). */
bool mx__reference_is_control(const mx_graph *g, const mx_node *nd, const mx_tensor *const *inputs);
/* Runs such a node in frame f; outputs as mx__reference_exec_node's (owned by the caller, freed
 * with mx_tensor_release). Errors name the node. */
MX_MUST_USE mx_status mx__reference_exec_control(const mx__ref_frame *f, mx_node_id n,
                                                 const mx_tensor *const *inputs, mx_tensor *outputs,
                                                 mx_error *err);
/* A new host tensor of the given type and dims (data from mx__host_alloc, uninitialized); a size
 * past the address space or an allocation failure fails naming node nd (reference/control.c). */
MX_MUST_USE mx_status mx__reference_new_tensor(mx_error *err, const mx_node *nd, mx_dtype dt, int32_t rank,
                                               const int64_t *dims, mx_tensor *t);
/* reference/flex.c: FlexAttention with score_mod / prob_mod subgraphs, which CPU kernels do not
 * run. Same contract as mx__reference_exec_control. */
MX_MUST_USE mx_status mx__reference_flex_attention(const mx__ref_frame *f, mx_node_id n,
                                                   const mx_tensor *const *inputs, mx_tensor *outputs,
                                                   mx_error *err);
/* Limits of the control ops run by the calling thread (set by sessions around a run). */
typedef struct mx__ref_limits {
  int64_t max_iterations;     /* a Loop whose only exit is its condition stops after this many
                             iterations (<= 0: mx_reference_loop_limit()) */
  const _Atomic bool *cancel; /* set from another thread: the next Loop iteration fails with
                                 MX_ERR_CANCELLED (NULL: never) */
  const char *raise_hint;     /* what raises max_iterations, for the message (NULL: the
                                 interpreter's own knobs) */
  uint64_t *iterations;       /* counts every Loop iteration run (NULL: not counted) */
  uint64_t *carry_rebinds;    /* Loop / Scan carried values handed to the next iteration without
                                 a copy of their bytes (NULL: not counted) */
  uint64_t *carry_copies;     /* ... and those whose bytes were copied (NULL: not counted) */
  /* Runs body `body` of control node nd (If, Loop, Scan) in place of the interpreter (sessions:
   * bodies compiled into programs of their own), or NULL. Inputs as the body takes them (its
   * captures are found from frame f); outputs owned by the caller. An output whose data is set
   * on entry is a buffer offered for the result (a carried value's other buffer, of the dtype and
   * dims it had last): the body writes it there, or declines by giving a tensor of its own in
   * that slot. copied[i] (n_out entries) is set false where output i was written in place into
   * its offered buffer, true where its bytes were copied from elsewhere. Sets *handled false
   * (outs untouched) to leave the body to the interpreter. */
  mx_status (*run_body)(void *user, const mx_node *nd, mx_graph *body, const struct mx__ref_frame *f,
                        const mx_tensor *ins, size_t n_in, mx_tensor *outs, size_t n_out, bool *copied,
                        bool *handled, mx_error *err);
  void *body_user;
} mx__ref_limits;
/* Installs l (borrowed; NULL: none) for the calling thread; returns the previous one. */
const mx__ref_limits *mx__reference_set_limits(const mx__ref_limits *l);

/* "tensor", "sequence", "optional", "optional sequence". */
const char *mx__reference_kind_name(mx_value_kind kind);

/* Constant-folding evaluator (mx_fold_eval_fn) running nodes through the reference kernels.
 * `user` is ignored. Output data is malloc'd as mx__graph_fold_constants expects. */
MX_MUST_USE mx_status mx__reference_fold_eval(void *user, mx_graph *g, mx_node_id n, mx_tensor *outs);

/* 64-byte aligned host buffers for tensor data (at least 1 byte, so data is never NULL);
 * free() may release them too. */
void *mx__host_alloc(size_t nbytes);
void mx__host_free(void *p);

#endif /* MIXRT_REFERENCE_REFERENCE_H */
