/* Graph-building helpers the control-flow suites share (support_build.c): each adds one thing
 * to a graph and fails the test, with the graph's last error, if mixrt refuses it. */
#ifndef MIXRT_TESTS_CONTROL_SUPPORT_H
#define MIXRT_TESTS_CONTROL_SUPPORT_H

#include <stddef.h>
#include <stdint.h>

#include "mixrt/graph.h"
#include "mixrt/session.h"

/* A constant of dtype dt and the given dims (rank 0: a scalar; dims may then be NULL). */
mx_value_id ctl_constant(mx_graph *g, const char *name, mx_dtype dt, int32_t rank, const int64_t *dims,
                         const void *data);
/* A float32 [1] constant and an int64 scalar constant. */
mx_value_id ctl_fconst(mx_graph *g, const char *name, float v);
mx_value_id ctl_iconst(mx_graph *g, const char *name, int64_t v);
/* A one-output node without attributes. */
mx_value_id ctl_op(mx_graph *g, const char *type, const mx_value_id *ins, size_t n);
/* A named node with attributes and n_out outputs, written to outs. */
void ctl_node(mx_graph *g, const char *type, const char *name, const mx_value_id *ins, size_t n_in,
              const mx_attr *attrs, size_t n_attrs, mx_value_id *outs, size_t n_out);
/* A subgraph of parent (a branch or body) and a value it captures from the outer scope. */
mx_graph *ctl_sub(mx_graph *parent, const char *name);
mx_value_id ctl_outer(mx_graph *s, const char *name);

/* A toy greedy decoder (support_decode.c). One step: inputs token [1] int64 and past
 * [past_len, HIDDEN] float32; outputs the next token [1] (ArgMax of tanh(sum of the cache rows) x
 * a projection) and present (past with the token's embedding appended). The Loop runs STEPS such
 * steps (Loop "generate", body "body"; inputs token and past [1, HIDDEN]) carrying (token,
 * past) and scanning the token: outputs the last token, the final cache and the tokens
 * [STEPS, 1]. */
#define CTL_DECODE_VOCAB  7
#define CTL_DECODE_HIDDEN 4
#define CTL_DECODE_STEPS  6
mx_graph *ctl_decode_step_model(void);
mx_graph *ctl_decode_loop_model(void);
/* Runs the step model's session STEPS times from (tok0, past0 [1, HIDDEN]), each step fed the
 * previous one's token and cache: the tokens, and the final cache in *past (the caller releases
 * it). Each token lies in the vocabulary and the cache grows by one row per step. */
void ctl_decode_separate_steps(mx_session *step, int64_t tok0, const float *past0, int64_t *tokens,
                               mx_tensor *past);

#endif /* MIXRT_TESTS_CONTROL_SUPPORT_H */
