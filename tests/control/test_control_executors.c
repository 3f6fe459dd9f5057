/* Control flow under every executor and stream count: an If between a static model and a
 * dynamic op, and a Loop whose body holds an If, through the sequential, topological and
 * multi-thread executors with 1 and 2 streams, outputs allocated by the session or written
 * into the caller's buffers, equal to the reference interpreter; and where the bodies run: on a
 * CPU device a compiled branch's child session has an inline device of its own (the control op
 * waits for it on the calling thread, so no worker hand-off), on an inline device it shares the
 * parent's. */
#include <criterion/criterion.h>
#include <string.h>

#include "control_support.h"
#include "mixrt/graph.h"
#include "mixrt/reference.h"
#include "mixrt/session.h"
#include "partitioner/partitioner.h"
#include "v2runtime/kernels_control.h"
#include "v2runtime/session_impl.h"

#define N 8

static mx_value_id if_node(mx_graph *g, mx_value_id c, mx_graph *th, mx_graph *el) {
  mx_attr br[] = {mx_attr_graph("then_branch", th), mx_attr_graph("else_branch", el)};
  mx_node_desc d = {.op_type = "If",
                    .name = "choose",
                    .inputs = &c,
                    .n_inputs = 1,
                    .attrs = br,
                    .n_attrs = 2,
                    .n_outputs = 1};
  mx_value_id y;
  cr_assert_eq(mx_graph_add_node(g, &d, &y), MX_OK, "%s", mx_graph_last_error(g));
  return y;
}

/* c, x [N] -> h = Tanh(2x + 0.5) * x (a static model); If(c): then h + h, else h * h; Relu of
 * the If's output after it. */
static mx_graph *static_if_relu(void) {
  mx_graph *g;
  cr_assert_eq(mx_graph_create("if_between", &g), MX_OK);
  mx_shape s0 = {.rank = 0}, s1 = {.rank = 1, .dims = {N}};
  mx_value_id c, x;
  cr_assert_eq(mx_graph_add_input(g, "c", MX_BOOL, &s0, &c), MX_OK);
  cr_assert_eq(mx_graph_add_input(g, "x", MX_FLOAT32, &s1, &x), MX_OK);
  mx_value_id two = ctl_fconst(g, "two", 2.0f), half = ctl_fconst(g, "half", 0.5f);
  mx_value_id a = ctl_op(g, "Mul", (mx_value_id[]){x, two}, 2);
  mx_value_id b = ctl_op(g, "Add", (mx_value_id[]){a, half}, 2);
  mx_value_id t = ctl_op(g, "Tanh", &b, 1);
  mx_value_id h = ctl_op(g, "Mul", (mx_value_id[]){t, x}, 2);
  const char *hname = mx_graph_value_name(g, h);
  mx_graph *th, *el;
  cr_assert_eq(mx_graph_create_subgraph(g, "then", &th), MX_OK);
  cr_assert_eq(mx_graph_create_subgraph(g, "else", &el), MX_OK);
  mx_value_id th_h = ctl_outer(th, hname), el_h = ctl_outer(el, hname);
  cr_assert_eq(mx_graph_add_output(th, ctl_op(th, "Add", (mx_value_id[]){th_h, th_h}, 2)), MX_OK);
  cr_assert_eq(mx_graph_add_output(el, ctl_op(el, "Mul", (mx_value_id[]){el_h, el_h}, 2)), MX_OK);
  mx_value_id y = if_node(g, c, th, el);
  cr_assert_eq(mx_graph_add_output(g, ctl_op(g, "Relu", &y, 1)), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, h), MX_OK);
  return g;
}

static const mx_executor_kind executors[] = {MX_EXECUTOR_SEQUENTIAL, MX_EXECUTOR_TOPOLOGICAL,
                                             MX_EXECUTOR_MULTI_THREAD};

static mx_session *open_with(mx_graph *g, mx_executor_kind ex, uint32_t streams, mx_device_kind kind) {
  mx_session_options o;
  mx_session_options_init(&o);
  o.executor = ex;
  o.streams = streams;
  o.executor_threads = 2;
  o.device_options.kind = kind;
  mx_session *s;
  mx_error err = {0};
  cr_assert_eq(mx_session_create(&o, &s, &err), MX_OK, "%s", err.message);
  cr_assert_eq(mx_session_load_graph(s, g), MX_OK, "%s", mx_session_last_error(s));
  return s;
}

/* One step of s against the reference; caller_buffers: the outputs go into buffers given. */
static void expect_as_reference(mx_session *s, const mx_tensor *in, bool caller_buffers, const char *what) {
  float buf[2][N];
  mx_tensor got[2], want[2];
  memset(got, 0, sizeof got);
  if (caller_buffers)
    for (int k = 0; k < 2; k++)
      got[k] = (mx_tensor){.dtype = MX_FLOAT32, .rank = 1, .dims = {N}, .data = buf[k]};
  cr_assert_eq(mx_session_run(s, in, 2, got, 2), MX_OK, "%s: %s", what, mx_session_last_error(s));
  mx_graph *g = static_if_relu();
  mx_error err = {0};
  cr_assert_eq(mx_reference_run(g, in, 2, want, 2, &err), MX_OK, "%s", err.message);
  for (int k = 0; k < 2; k++) {
    char why[200];
    cr_assert(mx_tensor_allclose(&got[k], &want[k], 1e-6, 1e-6, why, sizeof why), "%s, output %d: %s", what,
              k, why);
    if (!caller_buffers) mx_tensor_release(&got[k]);
    mx_tensor_release(&want[k]);
  }
  mx_graph_destroy(g);
}

Test(control_executors, if_between_static_and_dynamic_under_every_executor_and_stream_count) {
  float xv[N];
  for (int i = 0; i < N; i++) xv[i] = 0.25f * (float)i - 0.9f;
  static const mx_device_kind kinds[] = {MX_DEVICE_CPU, MX_DEVICE_INLINE};
  for (size_t d = 0; d < 2; d++)
    for (size_t e = 0; e < 3; e++)
      for (uint32_t streams = 1; streams <= 2; streams++) {
        mx_session *s = open_with(static_if_relu(), executors[e], streams, kinds[d]);
        for (int round = 0; round < 3; round++)
          for (int cond = 0; cond < 2; cond++) {
            uint8_t cv = (uint8_t)cond;
            mx_tensor in[2] = {{.dtype = MX_BOOL, .rank = 0, .data = &cv},
                               {.dtype = MX_FLOAT32, .rank = 1, .dims = {N}, .data = xv}};
            char what[96];
            snprintf(what, sizeof what, "device %zu, executor %zu, %u streams, round %d, c=%d", d, e, streams,
                     round, cond);
            expect_as_reference(s, in, round == 1, what);
            mx_session_stats last;
            cr_assert_eq(mx_session_get_stats(s, &last, NULL), MX_OK);
            cr_assert_eq(last.control_runs, 1, "%s", what);
          }
        mx_session_destroy(s);
      }
}

/* The then branch of the If in graph g or in the partition calls it holds (the copy the
 * session compiled), or NULL. */
static const mx_graph *then_branch_in(const mx_graph *g) {
  for (size_t n = 0; g && n < g->n_nodes; n++) {
    const mx_node *nd = &g->nodes[n];
    if (nd->flags & MX_NODE_DEAD) continue;
    const mx_node *cn = mx__part_is_control_call(nd) ? mx__part_control_node(nd) : NULL;
    for (uint32_t k = 0; cn && k < cn->n_attrs; k++)
      if (cn->attrs[k].type == MX_ATTR_GRAPH && strcmp(cn->attrs[k].name, "then_branch") == 0)
        return cn->attrs[k].graph;
    const mx_graph *inner = cn ? NULL : then_branch_in(mx__part_call_body(nd));
    if (inner) return inner;
  }
  return NULL;
}

Test(control_executors, a_compiled_branch_runs_on_the_calling_threads_device) {
  float xv[N] = {0};
  uint8_t cv = 1;
  mx_tensor in[2] = {{.dtype = MX_BOOL, .rank = 0, .data = &cv},
                     {.dtype = MX_FLOAT32, .rank = 1, .dims = {N}, .data = xv}};
  static const mx_device_kind kinds[] = {MX_DEVICE_CPU, MX_DEVICE_INLINE};
  for (size_t d = 0; d < 2; d++) {
    mx_session *s = open_with(static_if_relu(), MX_EXECUTOR_SEQUENTIAL, 1, kinds[d]);
    expect_as_reference(s, in, false, "first step");
    const mx_graph *th = then_branch_in(s->prog->root);
    cr_assert_not_null(th, "the program holds the If inside a call of its own");
    mx_session *child = NULL;
    const char *why = mx__control_body_status(s, th, &child);
    cr_assert_not_null(why, "the then branch ran");
    if (!child) {
      mx_session_destroy(s);
      cr_skip_test("the branch stays with the interpreter: %s", why);
    }
    mx_device_info info;
    mx_device_get_info(mx_session_device(child), &info);
    cr_assert_eq(info.kind, MX_DEVICE_INLINE, "device %zu: the branch runs on the calling thread", d);
    if (kinds[d] == MX_DEVICE_INLINE)
      cr_assert_eq(mx_session_device(child), mx_session_device(s), "an inline parent shares its device");
    else
      cr_assert_neq(mx_session_device(child), mx_session_device(s), "a CPU parent's branch has its own");
    mx_session_destroy(s);
  }
}
