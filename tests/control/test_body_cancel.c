/* A Loop nested in a compiled body runs in a child session: mx_session_cancel on the session the
 * caller holds stops it too (the run fails with MX_ERR_CANCELLED naming the inner Loop), and the
 * iteration limit of the options applies to it as well. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "control_support.h"
#include "mixrt/graph.h"
#include "mixrt/session.h"

static mx_value_id input(mx_graph *g, const char *name, mx_dtype dt, int32_t rank, const mx_dim *dims) {
  mx_shape s = {.rank = rank};
  for (int32_t i = 0; i < rank; i++) s.dims[i] = dims[i];
  mx_value_id v;
  cr_assert_eq(mx_graph_add_input(g, name, dt, &s, &v), MX_OK, "%s", mx_graph_last_error(g));
  return v;
}

static void loop_node(mx_graph *g, const char *name, mx_value_id m, mx_value_id v, mx_graph *body,
                      mx_value_id *out) {
  mx_attr a = mx_attr_graph("body", body);
  mx_node_desc d = {.op_type = "Loop",
                    .name = name,
                    .inputs = (mx_value_id[]){m, MX_NO_VALUE, v},
                    .n_inputs = 3,
                    .attrs = &a,
                    .n_attrs = 1,
                    .n_outputs = 1};
  cr_assert_eq(mx_graph_add_node(g, &d, out), MX_OK, "%s", mx_graph_last_error(g));
}

/* Loop 'outer' (M = 2) whose body runs Loop 'forever' (no trip count, its condition stays true:
 * acc + 1 each iteration) on the carried x [1]. */
static mx_graph *loop_in_loop(void) {
  mx_graph *g = NULL, *ob = NULL, *ib = NULL;
  cr_assert_eq(mx_graph_create("t", &g), MX_OK);
  mx_value_id x = input(g, "x", MX_FLOAT32, 1, (mx_dim[]){1});
  int64_t two = 2;
  mx_tensor tt = {.dtype = MX_INT64, .rank = 0, .data = &two};
  mx_value_id m;
  cr_assert_eq(mx_graph_add_constant(g, "m", &tt, &m), MX_OK);
  cr_assert_eq(mx_graph_create_subgraph(g, "outer_body", &ob), MX_OK);
  input(ob, "o_iter", MX_INT64, 0, NULL);
  mx_value_id oc = input(ob, "o_cond", MX_BOOL, 0, NULL);
  mx_value_id ov = input(ob, "o_v", MX_FLOAT32, 1, (mx_dim[]){1});
  cr_assert_eq(mx_graph_create_subgraph(ob, "inner_body", &ib), MX_OK);
  input(ib, "i_iter", MX_INT64, 0, NULL);
  mx_value_id ic = input(ib, "i_cond", MX_BOOL, 0, NULL);
  mx_value_id iv = input(ib, "i_v", MX_FLOAT32, 1, (mx_dim[]){1});
  float one = 1.0f;
  mx_tensor ot = {.dtype = MX_FLOAT32, .rank = 1, .dims = {1}, .data = &one};
  mx_value_id c1;
  cr_assert_eq(mx_graph_add_constant(ib, "one", &ot, &c1), MX_OK);
  cr_assert_eq(mx_graph_add_output(ib, ctl_op(ib, "Identity", &ic, 1)), MX_OK);
  cr_assert_eq(mx_graph_add_output(ib, ctl_op(ib, "Add", (mx_value_id[]){iv, c1}, 2)), MX_OK);
  mx_value_id inner_out;
  loop_node(ob, "forever", MX_NO_VALUE, ov, ib, &inner_out);
  cr_assert_eq(mx_graph_add_output(ob, ctl_op(ob, "Identity", &oc, 1)), MX_OK);
  cr_assert_eq(mx_graph_add_output(ob, ctl_op(ob, "Neg", &inner_out, 1)), MX_OK);
  mx_value_id out;
  loop_node(g, "outer", m, x, ob, &out);
  cr_assert_eq(mx_graph_add_output(g, out), MX_OK);
  return g;
}

static mx_session *open_limited(int64_t max_iterations) {
  mx_session_options o;
  mx_session_options_init(&o);
  o.max_loop_iterations = max_iterations;
  mx_session *s;
  mx_error err = {0};
  cr_assert_eq(mx_session_create(&o, &s, &err), MX_OK, "%s", err.message);
  cr_assert_eq(mx_session_load_graph(s, loop_in_loop()), MX_OK, "%s", mx_session_last_error(s));
  return s;
}

typedef struct canceller {
  mx_session *s;
  atomic_bool done;
} canceller;

static void *cancel_until_done(void *arg) {
  canceller *c = arg;
  while (!atomic_load(&c->done)) { /* again and again: a cancel before the run starts is dropped */
    mx_session_cancel(c->s);
    struct timespec ts = {0, 5 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  return NULL;
}

Test(body_cancel, cancel_stops_a_loop_nested_in_a_body) {
  mx_session *s = open_limited(INT64_MAX);
  canceller c = {.s = s};
  atomic_init(&c.done, false);
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, cancel_until_done, &c), 0);
  float x = 0;
  mx_tensor in = {.dtype = MX_FLOAT32, .rank = 1, .dims = {1}, .data = &x}, out = {0};
  mx_status st = mx_session_run(s, &in, 1, &out, 1);
  atomic_store(&c.done, true);
  pthread_join(th, NULL);
  cr_assert_eq(st, MX_ERR_CANCELLED, "%s", mx_session_last_error(s));
  /* The inner Loop stops (naming 'forever' inside 'outer'), or the outer one when the cancel
   * lands before its first iteration: either way the run ends. */
  cr_assert(strstr(mx_session_last_error(s), "'outer'"), "%s", mx_session_last_error(s));
  mx_session_destroy(s);
}

Test(body_cancel, iteration_limit_applies_inside_a_body) {
  mx_session *s = open_limited(50);
  float x = 0;
  mx_tensor in = {.dtype = MX_FLOAT32, .rank = 1, .dims = {1}, .data = &x}, out = {0};
  cr_assert_eq(mx_session_run(s, &in, 1, &out, 1), MX_ERR_LIMIT);
  const char *msg = mx_session_last_error(s);
  cr_assert(strstr(msg, "'outer'") && strstr(msg, "'forever'") && strstr(msg, "50 iterations"), "%s", msg);
  mx_session_destroy(s);
}
