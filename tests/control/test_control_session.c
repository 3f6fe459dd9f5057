/* Control flow through a session's partitioner and executors: a control node is a partition of
 * its own (UNKNOWN, reason control_flow) run by the dynamic executor as one op, so the rest of
 * the graph still becomes static models; results equal the reference interpreter's, with If
 * branches of different output shapes, a Loop whose trip count depends on data and an If nested
 * in a Loop; the Loop iteration limit of the session options and a run cancelled from another
 * thread. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "control_support.h"
#include "mixrt/graph.h"
#include "mixrt/partition.h"
#include "mixrt/reference.h"
#include "mixrt/session.h"
#include "partitioner/partitioner.h"

#define N 8

static mx_graph *new_graph(void) {
  mx_graph *g = NULL;
  cr_assert_eq(mx_graph_create("t", &g), MX_OK);
  return g;
}

static mx_value_id input(mx_graph *g, const char *name, mx_dtype dt, int32_t rank, const mx_dim *dims) {
  mx_shape s = {.rank = rank};
  for (int32_t i = 0; i < rank; i++) s.dims[i] = dims[i];
  mx_value_id v;
  cr_assert_eq(mx_graph_add_input(g, name, dt, &s, &v), MX_OK, "%s", mx_graph_last_error(g));
  return v;
}

/* x [N] -> a chain of 4 elementwise ops (a static model) -> h; If(c): then h + h ([N]), else
 * Concat(h, h) ([2N]): the If's output dim is a fresh symbol; Relu after it runs dynamically. */
static mx_graph *static_then_if(void) {
  mx_graph *g = new_graph();
  mx_value_id c = input(g, "c", MX_BOOL, 0, NULL);
  mx_value_id x = input(g, "x", MX_FLOAT32, 1, (mx_dim[]){N});
  mx_value_id two = ctl_fconst(g, "two", 2.0f), half = ctl_fconst(g, "half", 0.5f);
  mx_value_id a = ctl_op(g, "Mul", (mx_value_id[]){x, two}, 2);
  mx_value_id b = ctl_op(g, "Add", (mx_value_id[]){a, half}, 2);
  mx_value_id t = ctl_op(g, "Tanh", &b, 1);
  mx_value_id h = ctl_op(g, "Mul", (mx_value_id[]){t, x}, 2);
  (void)h;
  const char *hname = mx_graph_value_name(g, h);
  mx_graph *th = ctl_sub(g, "then"), *el = ctl_sub(g, "else");
  mx_value_id th_h = ctl_outer(th, hname);
  cr_assert_eq(mx_graph_add_output(th, ctl_op(th, "Add", (mx_value_id[]){th_h, th_h}, 2)), MX_OK);
  mx_value_id el_h = ctl_outer(el, hname), cat;
  mx_attr ax = mx_attr_int("axis", 0);
  ctl_node(el, "Concat", "cat", (mx_value_id[]){el_h, el_h}, 2, &ax, 1, &cat, 1);
  cr_assert_eq(mx_graph_add_output(el, cat), MX_OK);
  mx_attr br[] = {mx_attr_graph("then_branch", th), mx_attr_graph("else_branch", el)};
  mx_value_id y;
  ctl_node(g, "If", "choose", &c, 1, br, 2, &y, 1);
  cr_assert_eq(mx_graph_add_output(g, ctl_op(g, "Relu", &y, 1)), MX_OK);
  return g;
}

/* Loop without a trip count running while iter + 1 < limit (a graph input the body captures),
 * its body holding an If: iterations below 2 add `one`, later ones `ten` (root constants
 * captured two levels down); the iteration numbers are scanned out. */
static mx_graph *loop_with_nested_if(void) {
  mx_graph *g = new_graph();
  input(g, "limit", MX_INT64, 0, NULL);
  mx_value_id acc0 = ctl_fconst(g, "acc0", 0.0f);
  ctl_fconst(g, "one", 1.0f);
  ctl_fconst(g, "ten", 10.0f);
  ctl_iconst(g, "two", 2);
  ctl_iconst(g, "one_i", 1);
  mx_graph *body = ctl_sub(g, "body");
  mx_value_id it = input(body, "iter", MX_INT64, 0, NULL);
  input(body, "cond_in", MX_BOOL, 0, NULL);
  input(body, "acc", MX_FLOAT32, 1, (mx_dim[]){1});
  mx_value_id lim = ctl_outer(body, "limit"), one_i = ctl_outer(body, "one_i"), two = ctl_outer(body, "two");
  mx_value_id next = ctl_op(body, "Add", (mx_value_id[]){it, one_i}, 2);
  mx_value_id cond = ctl_op(body, "Less", (mx_value_id[]){next, lim}, 2);
  mx_value_id small = ctl_op(body, "Less", (mx_value_id[]){it, two}, 2);
  mx_graph *th = ctl_sub(body, "then"), *el = ctl_sub(body, "else");
  mx_value_id ta = ctl_outer(th, "acc"), t1 = ctl_outer(th, "one");
  cr_assert_eq(mx_graph_add_output(th, ctl_op(th, "Add", (mx_value_id[]){ta, t1}, 2)), MX_OK);
  mx_value_id ea = ctl_outer(el, "acc"), e10 = ctl_outer(el, "ten");
  cr_assert_eq(mx_graph_add_output(el, ctl_op(el, "Add", (mx_value_id[]){ea, e10}, 2)), MX_OK);
  mx_attr br[] = {mx_attr_graph("then_branch", th), mx_attr_graph("else_branch", el)};
  mx_value_id acc1;
  ctl_node(body, "If", "inner_if", &small, 1, br, 2, &acc1, 1);
  cr_assert_eq(mx_graph_add_output(body, cond), MX_OK);
  cr_assert_eq(mx_graph_add_output(body, acc1), MX_OK);
  cr_assert_eq(mx_graph_add_output(body, ctl_op(body, "Identity", &it, 1)), MX_OK);
  mx_attr a = mx_attr_graph("body", body);
  mx_value_id outs[2];
  ctl_node(g, "Loop", "outer_loop", (mx_value_id[]){MX_NO_VALUE, MX_NO_VALUE, acc0}, 3, &a, 1, outs, 2);
  cr_assert_eq(mx_graph_add_output(g, ctl_op(g, "Neg", &outs[0], 1)), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, outs[1]), MX_OK);
  return g;
}

static mx_session *open_session(mx_graph *g) {
  mx_session_options o;
  mx_session_options_init(&o);
  mx_session *s;
  mx_error err = {0};
  cr_assert_eq(mx_session_create(&o, &s, &err), MX_OK, "%s", err.message);
  cr_assert_eq(mx_session_load_graph(s, g), MX_OK, "%s", mx_session_last_error(s));
  return s;
}

/* Runs make() through a session and the reference interpreter; outputs must be equal. */
static void expect_as_reference(mx_session *s, mx_graph *(*make)(void), const mx_tensor *in, size_t n_in,
                                size_t n_out) {
  mx_tensor got[4], want[4];
  memset(got, 0, sizeof got);
  cr_assert_eq(mx_session_run(s, in, n_in, got, n_out), MX_OK, "%s", mx_session_last_error(s));
  mx_graph *g = make();
  mx_error err = {0};
  cr_assert_eq(mx_reference_run(g, in, n_in, want, n_out, &err), MX_OK, "%s", err.message);
  for (size_t k = 0; k < n_out; k++) {
    char why[200];
    cr_assert(mx_tensor_allclose(&got[k], &want[k], 1e-6, 1e-6, why, sizeof why), "output %zu: %s", k, why);
    mx_tensor_release(&got[k]);
    mx_tensor_release(&want[k]);
  }
  mx_graph_destroy(g);
}

Test(control_session, if_is_a_partition_and_the_rest_stays_static) {
  mx_session *s = open_session(static_then_if());
  float xv[N];
  for (int i = 0; i < N; i++) xv[i] = 0.25f * (float)i - 1.0f;
  for (int round = 0; round < 2; round++)
    for (int cond = 0; cond < 2; cond++) {
      uint8_t cv = (uint8_t)cond;
      mx_tensor in[2] = {{.dtype = MX_BOOL, .rank = 0, .data = &cv},
                         {.dtype = MX_FLOAT32, .rank = 1, .dims = {N}, .data = xv}};
      expect_as_reference(s, static_then_if, in, 2, 1);
      mx_session_stats last;
      cr_assert_eq(mx_session_get_stats(s, &last, NULL), MX_OK);
      cr_assert_eq(last.static_executes, 1, "the elementwise chain runs as one static model");
      cr_assert_gt(last.kernels_run, 0, "the step ran the execution graph, not the interpreter");
    }
  mx_session_destroy(s);
}

Test(control_session, branches_of_different_shapes_give_each_shape) {
  mx_session *s = open_session(static_then_if());
  float xv[N] = {0};
  for (int cond = 0; cond < 2; cond++) {
    uint8_t cv = (uint8_t)cond;
    mx_tensor in[2] = {{.dtype = MX_BOOL, .rank = 0, .data = &cv},
                       {.dtype = MX_FLOAT32, .rank = 1, .dims = {N}, .data = xv}};
    mx_tensor out = {0};
    cr_assert_eq(mx_session_run(s, in, 2, &out, 1), MX_OK, "%s", mx_session_last_error(s));
    cr_assert_eq(out.rank, 1);
    cr_assert_eq(out.dims[0], cond ? N : 2 * N);
    mx_tensor_release(&out);
  }
  mx_session_destroy(s);
}

Test(control_session, loop_with_data_dependent_trip_count_and_nested_if) {
  mx_session *s = open_session(loop_with_nested_if());
  for (int64_t limit = 1; limit <= 6; limit++) {
    mx_tensor in = {.dtype = MX_INT64, .rank = 0, .data = &limit};
    expect_as_reference(s, loop_with_nested_if, &in, 1, 2);
    mx_tensor out[2];
    memset(out, 0, sizeof out);
    cr_assert_eq(mx_session_run(s, &in, 1, out, 2), MX_OK, "%s", mx_session_last_error(s));
    float want = 0;
    for (int64_t i = 0; i < limit; i++) want += i < 2 ? 1.0f : 10.0f;
    cr_assert_eq(((float *)out[0].data)[0], -want);
    cr_assert_eq(out[1].dims[0], limit, "one scanned iteration number per iteration");
    mx_session_stats last, total;
    cr_assert_eq(mx_session_get_stats(s, &last, &total), MX_OK);
    cr_assert_eq(last.control_runs, 1, "the Loop ran as one op");
    cr_assert_eq(last.loop_iterations, (uint64_t)limit);
    cr_assert_geq(total.loop_iterations, (uint64_t)limit);
    mx_tensor_release(&out[0]);
    mx_tensor_release(&out[1]);
  }
  mx_session_destroy(s);
}

Test(control_session, partition_names_the_control_node) {
  mx_graph *g = static_then_if();
  cr_assert_eq(mx_graph_infer(g), MX_OK, "%s", mx_graph_last_error(g));
  mx_session *s = open_session(g);
  mx_session_stats last;
  uint8_t cv = 1;
  float xv[N] = {0};
  mx_tensor in[2] = {{.dtype = MX_BOOL, .rank = 0, .data = &cv},
                     {.dtype = MX_FLOAT32, .rank = 1, .dims = {N}, .data = xv}};
  mx_tensor out = {0};
  cr_assert_eq(mx_session_run(s, in, 2, &out, 1), MX_OK, "%s", mx_session_last_error(s));
  cr_assert_eq(mx_session_get_stats(s, &last, NULL), MX_OK);
  cr_assert_eq(last.static_executes, 1);
  mx_tensor_release(&out);
  cr_assert_str_eq(mx_partition_reason_name(MX_PART_CONTROL_FLOW), "control_flow");
  mx_session_destroy(s);
}

/* --- limits -------------------------------------------------------------------------------- */

/* A Loop without a trip count whose condition stays true: acc + 1 forever. */
static mx_graph *endless_loop(void) {
  mx_graph *g = new_graph();
  input(g, "x", MX_FLOAT32, 1, (mx_dim[]){1});
  mx_value_id t = ctl_op(g, "Identity", (mx_value_id[]){mx_graph_find_value(g, "x")}, 1);
  mx_graph *body = ctl_sub(g, "body");
  input(body, "iter", MX_INT64, 0, NULL);
  mx_value_id ci = input(body, "cond_in", MX_BOOL, 0, NULL);
  mx_value_id acc = input(body, "acc", MX_FLOAT32, 1, (mx_dim[]){1});
  mx_value_id one = ctl_fconst(body, "one", 1.0f);
  cr_assert_eq(mx_graph_add_output(body, ctl_op(body, "Identity", &ci, 1)), MX_OK);
  cr_assert_eq(mx_graph_add_output(body, ctl_op(body, "Add", (mx_value_id[]){acc, one}, 2)), MX_OK);
  mx_attr a = mx_attr_graph("body", body);
  mx_value_id out;
  ctl_node(g, "Loop", "forever", (mx_value_id[]){MX_NO_VALUE, MX_NO_VALUE, t}, 3, &a, 1, &out, 1);
  cr_assert_eq(mx_graph_add_output(g, out), MX_OK);
  return g;
}

Test(control_session, loop_past_the_iteration_limit_fails_naming_the_node) {
  mx_session_options o;
  mx_session_options_init(&o);
  o.max_loop_iterations = 100;
  mx_session *s;
  mx_error err = {0};
  cr_assert_eq(mx_session_create(&o, &s, &err), MX_OK, "%s", err.message);
  cr_assert_eq(mx_session_load_graph(s, endless_loop()), MX_OK, "%s", mx_session_last_error(s));
  float x = 0;
  mx_tensor in = {.dtype = MX_FLOAT32, .rank = 1, .dims = {1}, .data = &x}, out = {0};
  cr_assert_eq(mx_session_run(s, &in, 1, &out, 1), MX_ERR_LIMIT);
  const char *msg = mx_session_last_error(s);
  cr_assert(strstr(msg, "'forever'") && strstr(msg, "100 iterations") && strstr(msg, "max_loop_iterations"),
            "%s", msg);
  mx_session_destroy(s);
}

Test(control_session, older_options_versions_take_the_default_limit) {
  mx_session_options o;
  mx_session_options_init(&o);
  cr_assert_eq(o.max_loop_iterations, (int64_t)1 << 24);
  o.version = 3;
  o.max_loop_iterations = 5; /* not part of a version-3 record: ignored */
  mx_session *s;
  mx_error err = {0};
  cr_assert_eq(mx_session_create(&o, &s, &err), MX_OK, "%s", err.message);
  mx_session_destroy(s);
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

Test(control_session, run_cancelled_from_another_thread) {
  mx_session_options o;
  mx_session_options_init(&o);
  o.max_loop_iterations = INT64_MAX;
  mx_session *s;
  mx_error err = {0};
  cr_assert_eq(mx_session_create(&o, &s, &err), MX_OK, "%s", err.message);
  cr_assert_eq(mx_session_load_graph(s, endless_loop()), MX_OK, "%s", mx_session_last_error(s));
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
  cr_assert(strstr(mx_session_last_error(s), "'forever'"), "%s", mx_session_last_error(s));
  mx_session_destroy(s);
}

/* --- partition dumps ----------------------------------------------------------------------- */

Test(control_session, partition_dump_shows_the_nesting_and_the_reason) {
  mx_graph *g = loop_with_nested_if();
  cr_assert_eq(mx_graph_infer(g), MX_OK, "%s", mx_graph_last_error(g));
  mx_error err = {0};
  size_t wrapped = 0;
  cr_assert_eq(mx__part_wrap_control(g, &wrapped, &err), MX_OK, "%s", err.message);
  cr_assert_eq(wrapped, 1);
  mx_partition_options o;
  mx_partition_options_init(&o);
  mx_partition *p;
  cr_assert_eq(mx_partition_create(g, &o, &p, &err), MX_OK, "%s", err.message);
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  cr_assert_eq(mx_partition_dump_text(p, f), MX_OK);
  fclose(f);
  cr_assert(strstr(text, "Loop 'outer_loop' (control flow"), "%s", text);
  cr_assert(strstr(text, "body 'body': 5 nodes"), "%s", text);
  cr_assert(strstr(text, "If 'inner_if' (control flow, nested)"), "%s", text);
  cr_assert(strstr(text, "then_branch 'then': 1 node, 0 inputs, 1 output, 2 captures (Add)"), "%s", text);
  free(text);
  f = open_memstream(&text, &len);
  cr_assert_eq(mx_partition_dump_json(p, f), MX_OK);
  fclose(f);
  cr_assert(strstr(text, "\"control\": [{\"op\": \"Loop\", \"name\": \"outer_loop\""), "%s", text);
  cr_assert(strstr(text, "\"control\": [{\"op\": \"If\", \"name\": \"inner_if\""), "%s", text);
  free(text);
  f = open_memstream(&text, &len);
  cr_assert_eq(mx_partition_dump_dot(p, f), MX_OK);
  fclose(f);
  cr_assert(strstr(text, "[label=\"outer_loop\\nLoop\"]"), "%s", text);
  cr_assert(strstr(text, "label=\"body\\nbody\"; style=dashed"), "%s", text);
  cr_assert(strstr(text, "label=\"then_branch\\nthen\"; style=dashed"), "%s", text);
  free(text);
  mx_partition_node_info info;
  cr_assert(mx_partition_node(p, mx_graph_find_node(g, "outer_loop"), &info));
  cr_assert_eq(info.reason.kind, MX_PART_CONTROL_FLOW);
  char why[256];
  mx_partition_reason_format(p, mx_graph_find_node(g, "outer_loop"), why, sizeof why);
  cr_assert(strstr(why, "Loop 'outer_loop' runs its subgraphs as one op"), "%s", why);
  mx_partition_destroy(p);
  mx_graph_destroy(g);
}

/* --- the interpreter fallback -------------------------------------------------------------- */

static char logged[1024];

static void keep_log(void *user, mx_log_level level, const char *msg) {
  (void)user;
  (void)level;
  if (strstr(msg, "reference interpreter")) snprintf(logged, sizeof logged, "%s", msg);
}

/* Sequences keep the interpreter, and the session's log says which node made it so. */
Test(control_session, sequences_keep_the_interpreter_and_the_log_says_why) {
  mx_graph *g = new_graph();
  mx_value_id x = input(g, "x", MX_FLOAT32, 1, (mx_dim[]){2});
  mx_value_id seq, cat;
  ctl_node(g, "SequenceConstruct", "make_seq", (mx_value_id[]){x, x}, 2, NULL, 0, &seq, 1);
  mx_attr ax = mx_attr_int("axis", 0);
  ctl_node(g, "ConcatFromSequence", "join", &seq, 1, &ax, 1, &cat, 1);
  cr_assert_eq(mx_graph_add_output(g, cat), MX_OK);
  mx_session_options o;
  mx_session_options_init(&o);
  o.log = keep_log;
  logged[0] = 0;
  mx_session *s;
  mx_error err = {0};
  cr_assert_eq(mx_session_create(&o, &s, &err), MX_OK, "%s", err.message);
  cr_assert_eq(mx_session_load_graph(s, g), MX_OK, "%s", mx_session_last_error(s));
  cr_assert(strstr(logged, "'make_seq' (SequenceConstruct)"), "log: '%s'", logged);
  float xv[2] = {1, 2};
  mx_tensor in = {.dtype = MX_FLOAT32, .rank = 1, .dims = {2}, .data = xv}, out = {0};
  cr_assert_eq(mx_session_run(s, &in, 1, &out, 1), MX_OK, "%s", mx_session_last_error(s));
  cr_assert_eq(out.dims[0], 4);
  mx_tensor_release(&out);
  mx_session_destroy(s);
}

/* --- .mxm ---------------------------------------------------------------------------------- */

/* A session saved with its control partition loads again and gives the same results. */
Test(control_session, control_flow_survives_an_mxm_round_trip) {
  mx_session *s = open_session(loop_with_nested_if());
  char path[] = "/tmp/mixrt_control_XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  close(fd);
  cr_assert_eq(mx_session_save(s, path, NULL), MX_OK, "%s", mx_session_last_error(s));
  mx_session_destroy(s);
  mx_session_options o;
  mx_session_options_init(&o);
  mx_error err = {0};
  cr_assert_eq(mx_session_create(&o, &s, &err), MX_OK, "%s", err.message);
  cr_assert_eq(mx_session_load_file(s, path), MX_OK, "%s", mx_session_last_error(s));
  for (int64_t limit = 1; limit <= 4; limit++) {
    mx_tensor in = {.dtype = MX_INT64, .rank = 0, .data = &limit};
    expect_as_reference(s, loop_with_nested_if, &in, 1, 2);
  }
  mx_session_destroy(s);
  remove(path);
}
