/* The control kernel of sessions: how the dynamic executor runs a control node (an If, Loop or
 * Scan wrapped into a call of its own by partitioner/part_control.c) as one host op, and the
 * limits (Loop iterations, cancellation) every control op of a session's run obeys. */
#ifndef MIXRT_V2RUNTIME_KERNELS_CONTROL_H
#define MIXRT_V2RUNTIME_KERNELS_CONTROL_H

#include "graph/ir.h"

/* mx_session_options.max_loop_iterations when 0 or not given (options before version 4). */
#define MX_SESSION_DEFAULT_LOOP_ITERATIONS ((int64_t)1 << 24)

struct mx_session;
struct mx_session_options;

/* mx_dyn_options.control_run of a session's dynamic plans (user: the mx_session). Runs the body
 * of wrapper call nd on host tensors through the reference interpreter's control code, under
 * the session's limits. */
MX_MUST_USE mx_status mx__control_run(void *user, const mx_node *nd, const mx_tensor *ins, size_t n_in,
                                      mx_tensor *outs, size_t n_out, mx_error *err);

/* Runs graph g whole through the reference interpreter under session s's limits (programs that
 * keep the interpreter: sequences and optionals). Arguments as mx__reference_run_graph's. */
MX_MUST_USE mx_status mx__control_run_graph(struct mx_session *s, mx_graph *g, const mx_tensor *ins,
                                            size_t n_in, mx_tensor *outs, size_t n_out, mx_error *err);

/* --- kernels_control_body.c: bodies compiled into programs of their own ------------------- */

struct mx__control_bodies;
struct mx__ref_frame;
/* mx__ref_limits.run_body of a session's runs (user: the mx_session): runs body `body` of
 * control node nd through a child session compiled from it on first use (partitioned like the
 * root; fixed-shape parts as static models), writing carried values into the buffers offered
 * where it can (copied[i] false); *handled false leaves a body that cannot be compiled
 * (sequences, optionals, strings) to the interpreter. */
MX_MUST_USE mx_status mx__control_body_run(void *user, const mx_node *nd, mx_graph *body,
                                           const struct mx__ref_frame *f, const mx_tensor *ins, size_t n_in,
                                           mx_tensor *outs, size_t n_out, bool *copied, bool *handled,
                                           mx_error *err);
/* Sets the device of a body's child session in o: a device of its own that runs on the calling
 * thread (inline) when s runs on a CPU device, else s's device. */
void mx__control_body_device(const struct mx_session *s, struct mx_session_options *o);
/* Compiles the bodies of every control call of s's program now (at load: a restored .mxm too),
 * so the first step finds their static models ready; a body that cannot be compiled is left to
 * the interpreter, as on first use. */
void mx__control_bodies_prepare(struct mx_session *s);
/* Cancels the run in progress of every body's child session of s, at any depth (never waits:
 * while a body is being compiled the children are skipped, and s's own Loop stops at its next
 * iteration). */
void mx__control_bodies_cancel(struct mx_session *s);
/* Calls visit for every body of the control calls of program p, in a fixed order (control
 * calls in root order, each node's graph attributes in order; ordinal counts from 0): the order
 * an .mxm stores compiled bodies in. Stops at the first failure and returns it. */
struct mx_program;
typedef mx_status (*mx__control_body_visit)(void *ctx, const mx_node *nd, const mx_graph *body, size_t ordinal);
MX_MUST_USE mx_status mx__control_bodies_each(const struct mx_program *p, mx__control_body_visit visit, void *ctx);
/* The child session body was compiled into in program p, or NULL (not compiled: the interpreter
 * runs it, or it has not run). */
struct mx_session *mx__control_body_child(const struct mx_program *p, const mx_graph *body);
/* Restores body `body` of control node nd of program p (not yet installed in session s) from a
 * stored program: build makes the program for the child session it is given (as s's children
 * are made), which then runs its Init. Nothing is compiled. Failures name the body and node. */
typedef mx_status (*mx__control_body_build)(void *ctx, struct mx_session *child, struct mx_program **out,
                                            mx_error *err);
MX_MUST_USE mx_status mx__control_body_restore(struct mx_session *s, struct mx_program *p, const mx_node *nd,
                                               const mx_graph *body, mx__control_body_build build, void *ctx,
                                               mx_error *err);
/* Bodies compiled from their graphs in this process so far (tests: a restored .mxm adds none). */
uint64_t mx__control_body_compiles(void);
/* Frees a program's compiled bodies (NULL is a no-op). */
void mx__control_bodies_free(struct mx__control_bodies *b);
/* What session s made of body: NULL when it has not run yet; else *child is its child session
 * (NULL: the interpreter runs it, and the text returned says why). */
const char *mx__control_body_status(struct mx_session *s, const mx_graph *body, struct mx_session **child);

#endif /* MIXRT_V2RUNTIME_KERNELS_CONTROL_H */
