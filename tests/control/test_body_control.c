/* Control bodies compiled into programs of their own, under every executor (sequential,
 * topological, multi-thread) with one and two streams: an If nested in a Loop whose trip count
 * depends on data, If branches of different output shapes, and a greedy decode of N tokens
 * inside one Loop (present carried as the next past) matching N separate steps. Every output
 * equals the reference interpreter's; body_runs counts each body run (Loop iterations, If
 * branches taken). */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "control_support.h"
#include "mixrt/graph.h"
#include "mixrt/reference.h"
#include "mixrt/session.h"

#define N      8
#define HIDDEN CTL_DECODE_HIDDEN
#define STEPS  CTL_DECODE_STEPS

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

/* Loop without a trip count running while iter + 1 < limit, its body holding an If: iterations
 * below 2 add `one` to acc [4], later ones `ten` times acc's Tanh (root constants captured two
 * levels down); the iteration numbers are scanned out. */
static mx_graph *loop_with_nested_if(void) {
  mx_graph *g = new_graph();
  input(g, "limit", MX_INT64, 0, NULL);
  float zeros[4] = {0.5f, -0.25f, 0.125f, 1.0f};
  mx_value_id acc0 = ctl_constant(g, "acc0", MX_FLOAT32, 1, (int64_t[]){4}, zeros);
  ctl_fconst(g, "one", 1.0f);
  ctl_fconst(g, "ten", 10.0f);
  ctl_iconst(g, "two", 2);
  ctl_iconst(g, "one_i", 1);
  mx_graph *body = ctl_sub(g, "body");
  mx_value_id it = input(body, "iter", MX_INT64, 0, NULL);
  input(body, "cond_in", MX_BOOL, 0, NULL);
  input(body, "acc", MX_FLOAT32, 1, (mx_dim[]){4});
  mx_value_id lim = ctl_outer(body, "limit"), one_i = ctl_outer(body, "one_i"), two = ctl_outer(body, "two");
  mx_value_id next = ctl_op(body, "Add", (mx_value_id[]){it, one_i}, 2);
  mx_value_id cond = ctl_op(body, "Less", (mx_value_id[]){next, lim}, 2);
  mx_value_id small = ctl_op(body, "Less", (mx_value_id[]){it, two}, 2);
  mx_graph *th = ctl_sub(body, "then"), *el = ctl_sub(body, "else");
  mx_value_id ta = ctl_outer(th, "acc"), t1 = ctl_outer(th, "one");
  cr_assert_eq(mx_graph_add_output(th, ctl_op(th, "Add", (mx_value_id[]){ta, t1}, 2)), MX_OK);
  mx_value_id ea = ctl_outer(el, "acc"), e10 = ctl_outer(el, "ten");
  mx_value_id et = ctl_op(el, "Tanh", &ea, 1);
  mx_value_id em = ctl_op(el, "Mul", (mx_value_id[]){et, e10}, 2);
  mx_value_id ee = ctl_op(el, "Add", (mx_value_id[]){em, ea}, 2);
  cr_assert_eq(mx_graph_add_output(el, ctl_op(el, "Sigmoid", &ee, 1)), MX_OK);
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

/* x [N]; If(c): then Tanh(x) * 2 + x ([N]), else Concat(x, Relu(x)) ([2N]); Neg after it. */
static mx_graph *if_of_two_shapes(void) {
  mx_graph *g = new_graph();
  mx_value_id c = input(g, "c", MX_BOOL, 0, NULL);
  input(g, "x", MX_FLOAT32, 1, (mx_dim[]){N});
  ctl_fconst(g, "two", 2.0f);
  mx_graph *th = ctl_sub(g, "then"), *el = ctl_sub(g, "else");
  mx_value_id tx = ctl_outer(th, "x"), t2 = ctl_outer(th, "two");
  mx_value_id tt = ctl_op(th, "Tanh", &tx, 1);
  mx_value_id tm = ctl_op(th, "Mul", (mx_value_id[]){tt, t2}, 2);
  cr_assert_eq(mx_graph_add_output(th, ctl_op(th, "Add", (mx_value_id[]){tm, tx}, 2)), MX_OK);
  mx_value_id ex = ctl_outer(el, "x"), cat;
  mx_value_id er = ctl_op(el, "Relu", &ex, 1);
  mx_attr ax = mx_attr_int("axis", 0);
  ctl_node(el, "Concat", "cat", (mx_value_id[]){ex, er}, 2, &ax, 1, &cat, 1);
  cr_assert_eq(mx_graph_add_output(el, cat), MX_OK);
  mx_attr br[] = {mx_attr_graph("then_branch", th), mx_attr_graph("else_branch", el)};
  mx_value_id y;
  ctl_node(g, "If", "choose", &c, 1, br, 2, &y, 1);
  cr_assert_eq(mx_graph_add_output(g, ctl_op(g, "Neg", &y, 1)), MX_OK);
  return g;
}

static mx_session *open_with(mx_graph *g, mx_executor_kind ex, uint32_t streams) {
  mx_session_options o;
  mx_session_options_init(&o);
  o.executor = ex;
  o.streams = streams;
  o.executor_threads = 2;
  mx_session *s;
  mx_error err = {0};
  cr_assert_eq(mx_session_create(&o, &s, &err), MX_OK, "%s", err.message);
  cr_assert_eq(mx_session_load_graph(s, g), MX_OK, "%s", mx_session_last_error(s));
  return s;
}

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
    cr_assert(mx_tensor_allclose(&got[k], &want[k], 1e-5, 1e-5, why, sizeof why), "output %zu: %s", k, why);
    mx_tensor_release(&got[k]);
    mx_tensor_release(&want[k]);
  }
  mx_graph_destroy(g);
}

static const mx_executor_kind executors[] = {MX_EXECUTOR_SEQUENTIAL, MX_EXECUTOR_TOPOLOGICAL,
                                             MX_EXECUTOR_MULTI_THREAD};

static mx_session_stats last_stats(mx_session *s) {
  mx_session_stats last;
  cr_assert_eq(mx_session_get_stats(s, &last, NULL), MX_OK);
  return last;
}

Test(body_control, nested_if_in_loop_with_data_dependent_trip_count) {
  for (size_t e = 0; e < 3; e++)
    for (uint32_t streams = 1; streams <= 2; streams++) {
      mx_session *s = open_with(loop_with_nested_if(), executors[e], streams);
      for (int64_t limit = 1; limit <= 5; limit++) {
        mx_tensor in = {.dtype = MX_INT64, .rank = 0, .data = &limit};
        expect_as_reference(s, loop_with_nested_if, &in, 1, 2);
        mx_session_stats last = last_stats(s);
        cr_assert_eq(last.loop_iterations, (uint64_t)limit);
        /* Each iteration runs the Loop body and one If branch, both compiled. */
        cr_assert_eq(last.body_runs, (uint64_t)(2 * limit), "executor %zu, %u streams, limit %lld: %llu", e,
                     streams, (long long)limit, (unsigned long long)last.body_runs);
      }
      mx_session_destroy(s);
    }
}

Test(body_control, if_branches_of_different_shapes) {
  float xv[N];
  for (int i = 0; i < N; i++) xv[i] = 0.3f * (float)i - 1.0f;
  for (size_t e = 0; e < 3; e++)
    for (uint32_t streams = 1; streams <= 2; streams++) {
      mx_session *s = open_with(if_of_two_shapes(), executors[e], streams);
      for (int round = 0; round < 2; round++)
        for (int cond = 0; cond < 2; cond++) {
          uint8_t cv = (uint8_t)cond;
          mx_tensor in[2] = {{.dtype = MX_BOOL, .rank = 0, .data = &cv},
                             {.dtype = MX_FLOAT32, .rank = 1, .dims = {N}, .data = xv}};
          expect_as_reference(s, if_of_two_shapes, in, 2, 1);
          mx_tensor out = {0};
          cr_assert_eq(mx_session_run(s, in, 2, &out, 1), MX_OK, "%s", mx_session_last_error(s));
          cr_assert_eq(out.dims[0], cond ? N : 2 * N);
          mx_tensor_release(&out);
          mx_session_stats last = last_stats(s);
          cr_assert_eq(last.body_runs, 1, "the branch taken ran as a program of its own");
          /* A branch of 2-3 ops is below static_min_ops: dynamic, or one specialization of it. */
          cr_assert_leq(last.body_static_executes, 1, "%llu", (unsigned long long)last.body_static_executes);
        }
      mx_session_destroy(s);
    }
}

/* --- a greedy decode inside one Loop ----------------------------------------------------------- */

Test(body_control, greedy_decode_in_one_loop_matches_separate_steps) {
  int64_t tok0 = 3;
  float past0[HIDDEN] = {0.25f, -0.5f, 0.125f, 0.75f};
  mx_session *step = open_with(ctl_decode_step_model(), MX_EXECUTOR_SEQUENTIAL, 1);
  int64_t tokens[STEPS];
  mx_tensor past;
  ctl_decode_separate_steps(step, tok0, past0, tokens, &past);
  mx_tensor in[2] = {{.dtype = MX_INT64, .rank = 1, .dims = {1}, .data = &tok0},
                     {.dtype = MX_FLOAT32, .rank = 2, .dims = {1, HIDDEN}, .data = past0}};
  for (size_t e = 0; e < 3; e++)
    for (uint32_t streams = 1; streams <= 2; streams++) {
      mx_session *loop = open_with(ctl_decode_loop_model(), executors[e], streams);
      for (int run = 0; run < 2; run++) {
        expect_as_reference(loop, ctl_decode_loop_model, in, 2, 3);
        mx_tensor out[3];
        memset(out, 0, sizeof out);
        cr_assert_eq(mx_session_run(loop, in, 2, out, 3), MX_OK, "%s", mx_session_last_error(loop));
        cr_assert_eq(((const int64_t *)out[0].data)[0], tokens[STEPS - 1]);
        char why[200];
        cr_assert(mx_tensor_allclose(&out[1], &past, 1e-6, 1e-6, why, sizeof why), "final cache: %s", why);
        for (int i = 0; i < STEPS; i++)
          cr_assert_eq(((const int64_t *)out[2].data)[i], tokens[i], "token %d (executor %zu, %u streams)", i,
                       e, streams);
        for (int k = 0; k < 3; k++) mx_tensor_release(&out[k]);
        mx_session_stats last = last_stats(loop);
        cr_assert_eq(last.body_runs, STEPS, "each step ran the compiled body");
      }
      mx_session_destroy(loop);
    }
  mx_tensor_release(&past);
  mx_session_destroy(step);
}
