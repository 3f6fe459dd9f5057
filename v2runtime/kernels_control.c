/* The control kernel of sessions (see kernels_control.h).
 *
 * A wrapper call's body holds the control node alone, with one input per value the node reads
 * (its inputs and every value its subgraphs capture, under the same names), so the body runs
 * as a graph of its own: the reference interpreter's frame of the body is where the branches
 * and loop bodies find their captures. Outputs come back in host memory the dynamic executor
 * adopts without a copy.
 *
 * Limits: the session's max_loop_iterations and its cancel flag are installed for the calling
 * thread around each run (mx__reference_set_limits), so every Loop at any depth sees them. */
#include "v2runtime/kernels_control.h"

#include "common/error.h"
#include "partitioner/partitioner.h"
#include "reference/reference.h"
#include "v2runtime/session_impl.h"

void mx_session_cancel(mx_session *s) {
  if (!s) return;
  atomic_store(&s->cancel, true);
  mx__control_bodies_cancel(s); /* a Loop nested in a body runs in a child session */
}

mx_status mx__control_run_graph(mx_session *s, mx_graph *g, const mx_tensor *ins, size_t n_in,
                                mx_tensor *outs, size_t n_out, mx_error *err) {
  mx__ref_limits lim = {
      .max_iterations =
          s->opts.max_loop_iterations > 0 ? s->opts.max_loop_iterations : MX_SESSION_DEFAULT_LOOP_ITERATIONS,
      .cancel = &s->cancel,
      .raise_hint = "mx_session_options.max_loop_iterations",
      .iterations = &s->last.loop_iterations,
      .carry_rebinds = &s->last.loop_carry_rebinds,
      .carry_copies = &s->last.loop_carry_copies,
      .run_body = mx__control_body_run, /* bodies as programs of their own (kernels_control_body.c) */
      .body_user = s,
  };
  const mx__ref_limits *prev = mx__reference_set_limits(&lim);
  mx_status st = mx__reference_run_graph(g, NULL, ins, n_in, outs, n_out, err);
  mx__reference_set_limits(prev);
  return st;
}

void mx__control_body_device(const mx_session *s, mx_session_options *o) {
  o->device = s->dev;
  mx_device_info info;
  mx_device_get_info(s->dev, &info);
  if (info.kind != MX_DEVICE_CPU) return;
  /* The control op waits for its body on the calling thread anyway (it is a host op of the
   * parent's step), so the body runs there too: a CPU device's worker would cost a hand-off per
   * branch or iteration (microseconds, far more than a small body's work). Both devices are
   * host memory, so the parent's tensors are read in place. */
  mx_device_memory_stats mem;
  mx_device_memory_stats_get(s->dev, &mem);
  o->device = NULL;
  mx_device_options_init(&o->device_options);
  o->device_options.kind = MX_DEVICE_INLINE;
  o->device_options.memory_limit = mem.limit_bytes;
  o->device_options.check = info.check ? MX_CHECK_ON : MX_CHECK_OFF;
  o->device_options.fault_from_env = false; /* injected faults count the parent device's operations */
}

mx_status mx__control_run(void *user, const mx_node *nd, const mx_tensor *ins, size_t n_in, mx_tensor *outs,
                          size_t n_out, mx_error *err) {
  mx_session *s = user;
  /* One attribute lookup per dispatch (mx__part_is_control_call would take three more): the
   * wrapper holds exactly one live node, which the interpreter runs whatever it is. */
  mx_graph *body = mx__part_call_body(nd);
  if (!body || body->n_live_nodes != 1)
    return mx__node_fail(err, nd, MX_ERR_UNSUPPORTED,
                         "a node with subgraphs runs in a session only wrapped into a call of its own");
  if (atomic_load_explicit(&s->cancel, memory_order_relaxed)) {
    const mx_node *cn = mx__part_control_node(nd);
    return mx__node_fail(err, cn ? cn : nd, MX_ERR_CANCELLED, "the run was cancelled (mx_session_cancel)");
  }
  /* Atomic: the multi-thread executor runs two control ops of one step at once. */
  __atomic_fetch_add(&s->last.control_runs, 1, __ATOMIC_RELAXED);
  return mx__control_run_graph(s, body, ins, n_in, outs, n_out, err);
}
