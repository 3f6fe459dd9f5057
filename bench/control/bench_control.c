/* bench_control: the host cost of control flow, as JSON.
 *
 *   if_dispatch_ns       one If whose branches are each one Identity of an outer-scope x
 *                        (float32 [16]), minus the same graph with the Identity at the root: what
 *                        choosing a branch and running its subgraph adds per step.
 *   loop_iteration_ns    one iteration of a Loop whose body only passes its condition and one
 *                        loop-carried float32 [16] through (no nodes): (time with M iterations
 *                        minus time with 0 iterations) / M.
 * Each is measured through the reference interpreter (mx__reference_run_graph on the inferred
 * graph: mx_reference_run without its inference pass, what a session step runs) and through a
 * session on the CPU device (mx_session_run, caller output buffers).
 * target_ns is the cost the control path aims to stay under for each figure. In a session the
 * If step runs on the calling thread (the control op is a host op and its branch a child
 * session on an inline device), while the baseline graph's static model runs on the CPU
 * device's worker (identity_step_ns: a hand-off each way, microseconds, far more on a loaded
 * host). So the session's if_dispatch_ns subtracts the baseline run on the calling thread too:
 * the same Identity graph in a session on an inline device (identity_inline_step_ns).
 *
 * *_cpu_ns: the same figures in the calling thread's CPU time (the session's identity_step_cpu_ns
 * is the inline baseline's): steadier than wall time on a loaded host, where a repetition's wall
 * time includes waiting for a core. *_under_target_cpu compare those with target_ns.
 * Usage: bench_control [--quick]. Every figure is the median of repetitions in the same run.
 *        bench_control --profile-if N: only N session If steps, no output (for perf / callgrind). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "mixrt/graph.h"
#include "mixrt/reference.h"
#include "mixrt/session.h"
#include "reference/reference.h"

#define ELEMS     16
#define TARGET_NS 1000.0

static int g_reps = 15;

/* bench_control_body.c: loop_iteration_static_body_ns (a Loop body run as a static model). */
void mx__bench_control_static_body(bool quick);
/* bench_control_body.c: carried_4096 (a Loop carrying float32 [1,4096] through a static body). */
void mx__bench_control_carried(bool quick);

static void die(const char *what, const char *msg) {
  fprintf(stderr, "bench_control: %s failed: %s\n", what, msg ? msg : "");
  exit(1);
}

static void check(mx_status st, const char *what, const mx_graph *g) {
  if (st != MX_OK) die(what, g ? mx_graph_last_error(g) : mx_status_name(st));
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return v[n / 2];
}

/* x float32 [ELEMS] -> y: through an If on input c (branches: Identity of x) when with_if,
 * else one Identity at the root (the baseline; c is still an input, unread). */
static mx_graph *if_graph(bool with_if) {
  mx_graph *g = NULL;
  check(mx_graph_create("if_dispatch", &g), "mx_graph_create", NULL);
  mx_shape s0 = {.rank = 0}, s1 = {.rank = 1, .dims = {ELEMS}};
  mx_value_id c, x, y;
  check(mx_graph_add_input(g, "c", MX_BOOL, &s0, &c), "add input", g);
  check(mx_graph_add_input(g, "x", MX_FLOAT32, &s1, &x), "add input", g);
  if (!with_if) {
    check(mx_graph_add_op(g, "Identity", &x, 1, NULL, 0, &y), "Identity", g);
  } else {
    mx_graph *br[2];
    for (int k = 0; k < 2; k++) {
      mx_value_id bx, by;
      check(mx_graph_create_subgraph(g, k ? "else" : "then", &br[k]), "subgraph", g);
      check(mx_graph_add_outer(br[k], "x", &bx), "outer", br[k]);
      check(mx_graph_add_op(br[k], "Identity", &bx, 1, NULL, 0, &by), "Identity", br[k]);
      check(mx_graph_add_output(br[k], by), "branch output", br[k]);
    }
    mx_attr a[] = {mx_attr_graph("then_branch", br[0]), mx_attr_graph("else_branch", br[1])};
    mx_node_desc d = {.op_type = "If",
                      .name = "choose",
                      .inputs = &c,
                      .n_inputs = 1,
                      .attrs = a,
                      .n_attrs = 2,
                      .n_outputs = 1};
    check(mx_graph_add_node(g, &d, &y), "If", g);
  }
  check(mx_graph_add_output(g, y), "output", g);
  check(mx_graph_infer(g), "infer", g);
  return g;
}

/* Loop(m, true, v) whose body returns (cond_in, v_in) unchanged: m iterations of nothing. */
static mx_graph *loop_graph(void) {
  mx_graph *g = NULL, *body = NULL;
  check(mx_graph_create("empty_loop", &g), "mx_graph_create", NULL);
  mx_shape s0 = {.rank = 0}, s1 = {.rank = 1, .dims = {ELEMS}};
  mx_value_id m, c, v, it, ci, vi, out;
  check(mx_graph_add_input(g, "m", MX_INT64, &s0, &m), "add input", g);
  check(mx_graph_add_input(g, "c", MX_BOOL, &s0, &c), "add input", g);
  check(mx_graph_add_input(g, "v", MX_FLOAT32, &s1, &v), "add input", g);
  check(mx_graph_create_subgraph(g, "body", &body), "subgraph", g);
  check(mx_graph_add_input(body, "iter", MX_INT64, &s0, &it), "body input", body);
  check(mx_graph_add_input(body, "cond_in", MX_BOOL, &s0, &ci), "body input", body);
  check(mx_graph_add_input(body, "v_in", MX_FLOAT32, &s1, &vi), "body input", body);
  check(mx_graph_add_output(body, ci), "body output", body);
  check(mx_graph_add_output(body, vi), "body output", body);
  mx_attr a = mx_attr_graph("body", body);
  mx_node_desc d = {.op_type = "Loop",
                    .name = "loop",
                    .inputs = (mx_value_id[]){m, c, v},
                    .n_inputs = 3,
                    .attrs = &a,
                    .n_attrs = 1,
                    .n_outputs = 1};
  check(mx_graph_add_node(g, &d, &out), "Loop", g);
  check(mx_graph_add_output(g, out), "output", g);
  check(mx_graph_infer(g), "infer", g);
  return g;
}

/* One way of running a graph: the interpreter on a graph, or a session holding it. */
typedef struct runner {
  mx_graph *g;
  mx_session *s;
  float out[ELEMS];
} runner;

/* How a graph runs: the interpreter, a session on the CPU device, a session on an inline one. */
enum { BY_REFERENCE, BY_SESSION, BY_SESSION_INLINE };

static void runner_open(runner *r, mx_graph *g, int how) {
  memset(r, 0, sizeof *r);
  if (how == BY_REFERENCE) {
    r->g = g;
    return;
  }
  mx_session_options o;
  mx_session_options_init(&o);
  if (how == BY_SESSION_INLINE) o.device_options.kind = MX_DEVICE_INLINE;
  mx_error err = {0};
  if (mx_session_create(&o, &r->s, &err) != MX_OK) die("mx_session_create", err.message);
  if (mx_session_load_graph(r->s, g) != MX_OK) die("mx_session_load_graph", mx_session_last_error(r->s));
}

static void runner_close(runner *r) {
  if (r->s)
    mx_session_destroy(r->s);
  else
    mx_graph_destroy(r->g);
}

static void run_once(runner *r, const mx_tensor *in, size_t n_in) {
  mx_tensor out = {0};
  if (r->s) {
    out = (mx_tensor){.dtype = MX_FLOAT32, .rank = 1, .dims = {ELEMS}, .data = r->out};
    if (mx_session_run(r->s, in, n_in, &out, 1) != MX_OK) die("mx_session_run", mx_session_last_error(r->s));
    return;
  }
  mx_error err = {0};
  if (mx__reference_run_graph(r->g, NULL, in, n_in, &out, 1, &err) != MX_OK)
    die("mx_reference_run", err.message);
  mx_tensor_release(&out);
}

/* Median ns per run of `steps` runs: wall time, and the calling thread's CPU time (what the
 * runs cost that thread however many other processes share the cores: every path measured here
 * runs on the calling thread except the CPU-device baseline, identity_step). */
typedef struct timing {
  double wall, cpu;
} timing;

static uint64_t thread_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static timing time_runs(runner *r, const mx_tensor *in, size_t n_in, int steps) {
  double *t = malloc(2 * (size_t)g_reps * sizeof *t);
  if (!t) die("malloc", "out of memory");
  double *c = t + g_reps;
  for (int k = 0; k < 3; k++) run_once(r, in, n_in); /* warm-up */
  for (int rep = 0; rep < g_reps; rep++) {
    uint64_t t0 = mx__now_ns(), c0 = thread_cpu_ns();
    for (int i = 0; i < steps; i++) run_once(r, in, n_in);
    c[rep] = (double)(thread_cpu_ns() - c0) / steps;
    t[rep] = (double)(mx__now_ns() - t0) / steps;
  }
  timing m = {median(t, g_reps), median(c, g_reps)};
  free(t);
  return m;
}

static float g_x[ELEMS];

/* The If step, the baseline, and (sessions only) the baseline in a session on an inline
 * device; returns the dispatch cost (wall, cpu) against the baseline on the calling thread. */
static timing if_dispatch(bool session, int steps, timing *with_if, timing *without, timing *without_inline) {
  uint8_t cv = 1;
  mx_tensor in[2] = {{.dtype = MX_BOOL, .rank = 0, .data = &cv},
                     {.dtype = MX_FLOAT32, .rank = 1, .dims = {ELEMS}, .data = g_x}};
  runner a, b;
  runner_open(&a, if_graph(true), session ? BY_SESSION : BY_REFERENCE);
  runner_open(&b, if_graph(false), session ? BY_SESSION : BY_REFERENCE);
  *with_if = time_runs(&a, in, 2, steps);
  *without = time_runs(&b, in, 2, steps);
  runner_close(&a);
  runner_close(&b);
  const timing *base = without;
  if (session) {
    runner_open(&b, if_graph(false), BY_SESSION_INLINE);
    *without_inline = time_runs(&b, in, 2, steps);
    runner_close(&b);
    base = without_inline;
  }
  return (timing){with_if->wall - base->wall, with_if->cpu - base->cpu};
}

static timing loop_iteration(bool session, int steps, int64_t iters, timing *full, timing *empty) {
  int64_t m = iters, zero = 0;
  uint8_t cv = 1;
  mx_tensor in[3] = {{.dtype = MX_INT64, .rank = 0, .data = &m},
                     {.dtype = MX_BOOL, .rank = 0, .data = &cv},
                     {.dtype = MX_FLOAT32, .rank = 1, .dims = {ELEMS}, .data = g_x}};
  runner r;
  runner_open(&r, loop_graph(), session ? BY_SESSION : BY_REFERENCE);
  *full = time_runs(&r, in, 3, steps);
  in[0].data = &zero;
  *empty = time_runs(&r, in, 3, steps);
  runner_close(&r);
  return (timing){(full->wall - empty->wall) / (double)iters, (full->cpu - empty->cpu) / (double)iters};
}

/* N session steps of the If graph and nothing else: what a profiler should look at. */
static int profile_if(int steps) {
  uint8_t cv = 1;
  mx_tensor in[2] = {{.dtype = MX_BOOL, .rank = 0, .data = &cv},
                     {.dtype = MX_FLOAT32, .rank = 1, .dims = {ELEMS}, .data = g_x}};
  runner a;
  runner_open(&a, if_graph(true), BY_SESSION);
  for (int i = 0; i < steps; i++) run_once(&a, in, 2);
  runner_close(&a);
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 2 && strcmp(argv[1], "--profile-if") == 0) return profile_if(atoi(argv[2]));
  bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
  int steps = quick ? 200 : 2000;
  int64_t iters = quick ? 1000 : 10000;
  if (quick) g_reps = 5;
  for (int i = 0; i < ELEMS; i++) g_x[i] = (float)i;
  printf("{\n  \"bench\": \"control\",\n  \"elements\": %d,\n  \"target_ns\": %.0f,\n", ELEMS, TARGET_NS);
  static const char *names[] = {"reference", "session"};
  for (int w = 0; w < 2; w++) {
    timing with_if, without, without_inline = {0, 0}, full, empty;
    timing d = if_dispatch(w == 1, steps, &with_if, &without, &without_inline);
    timing it = loop_iteration(w == 1, quick ? 20 : 50, iters, &full, &empty);
    printf("  \"%s\": {\n", names[w]);
    printf("    \"if_dispatch_ns\": %.1f, \"if_step_ns\": %.1f, \"identity_step_ns\": %.1f,\n", d.wall,
           with_if.wall, without.wall);
    if (w == 1) printf("    \"identity_inline_step_ns\": %.1f,\n", without_inline.wall);
    printf("    \"if_dispatch_cpu_ns\": %.1f, \"if_step_cpu_ns\": %.1f, \"identity_step_cpu_ns\": %.1f,\n",
           d.cpu, with_if.cpu, w == 1 ? without_inline.cpu : without.cpu);
    printf(
        "    \"loop_iteration_ns\": %.1f, \"loop_iteration_cpu_ns\": %.1f, \"loop_iterations\": %lld, "
        "\"loop_step_ns\": %.1f, \"loop_zero_step_ns\": %.1f,\n",
        it.wall, it.cpu, (long long)iters, full.wall, empty.wall);
    printf("    \"if_under_target\": %s, \"loop_under_target\": %s,\n", d.wall < TARGET_NS ? "true" : "false",
           it.wall < TARGET_NS ? "true" : "false");
    printf("    \"if_under_target_cpu\": %s, \"loop_under_target_cpu\": %s\n",
           d.cpu < TARGET_NS ? "true" : "false", it.cpu < TARGET_NS ? "true" : "false");
    printf("  }%s\n", w == 0 ? "," : "");
  }
  mx__bench_control_static_body(quick); /* bench_control_body.c: ",\n  \"static_body\": {...}" */
  mx__bench_control_carried(quick);     /* bench_control_body.c: ",\n  \"carried_4096\": {...}" */
  printf("}\n");
  return 0;
}
