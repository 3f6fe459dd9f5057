/* bench_control's figure for a Loop body compiled as a static model (see bench_control.c):
 *
 *   loop_iteration_static_body_ns  one iteration of a Loop carrying h float32 [1,64] through
 *                                  h = Tanh(h x W + b) * s (MatMul, Add, Tanh, Mul: a fixed-shape
 *                                  body the session compiles into one static model, run once per
 *                                  iteration): (session step with M iterations minus the step
 *                                  with 0) / M. static_executes_per_iteration checks that the body
 *                                  ran as a static model each time (body_static_executes / M).
 *   loop_iteration_reference_body_ns  the same iteration through the reference interpreter (the
 *                                  body's ops one by one on host tensors), for comparison.
 *   carried_4096: loop_iteration_ns  one iteration of a Loop carrying h float32 [1,4096] (16 KiB)
 *                                  through h = Tanh(h * s + b), a static body whose result is
 *                                  written straight into the value's other buffer;
 *                                  rebinds_per_iteration / copies_per_iteration are the session's
 *                                  loop_carry_rebinds / loop_carry_copies over M (1 and 0 when no
 *                                  byte of the carried value is copied between iterations). */
#include <stdio.h>
#include <stdlib.h>

#include "common/clock.h"
#include "mixrt/graph.h"
#include "mixrt/session.h"
#include "reference/reference.h"

#define H 64

static void fail(const char *what, const char *msg) {
  fprintf(stderr, "bench_control: %s failed: %s\n", what, msg ? msg : "");
  exit(1);
}

static void ok(mx_status st, const char *what, const mx_graph *g) {
  if (st != MX_OK) fail(what, g ? mx_graph_last_error(g) : mx_status_name(st));
}

static float w_data[H * H], b_data[H];

/* Loop(m, c) carrying h [1, width] through h = Tanh(h * s + b) (b [width]: elementwise only, so
 * the iteration's cost is mostly what moving h costs). */
static mx_graph *carried_loop(int64_t width, float *bias) {
  for (int64_t i = 0; i < width; i++) bias[i] = 0.001f * (float)(i % 17 - 8);
  mx_graph *g = NULL, *body = NULL;
  ok(mx_graph_create("carried_loop", &g), "mx_graph_create", NULL);
  mx_shape s0 = {.rank = 0}, sh = {.rank = 2, .dims = {1, width}};
  mx_value_id m, c, h0, it, ci, h, b, sc, t, out;
  float scale = 0.5f;
  mx_tensor bt = {.dtype = MX_FLOAT32, .rank = 1, .dims = {width}, .data = bias};
  mx_tensor st = {.dtype = MX_FLOAT32, .rank = 0, .data = &scale};
  ok(mx_graph_add_input(g, "m", MX_INT64, &s0, &m), "add input", g);
  ok(mx_graph_add_input(g, "c", MX_BOOL, &s0, &c), "add input", g);
  ok(mx_graph_add_input(g, "h0", MX_FLOAT32, &sh, &h0), "add input", g);
  ok(mx_graph_add_constant(g, "b", &bt, &b), "constant", g);
  ok(mx_graph_add_constant(g, "scale", &st, &sc), "constant", g);
  ok(mx_graph_create_subgraph(g, "body", &body), "subgraph", g);
  ok(mx_graph_add_input(body, "iter", MX_INT64, &s0, &it), "body input", body);
  ok(mx_graph_add_input(body, "cond_in", MX_BOOL, &s0, &ci), "body input", body);
  ok(mx_graph_add_input(body, "h", MX_FLOAT32, &sh, &h), "body input", body);
  ok(mx_graph_add_outer(body, "b", &b), "outer", body);
  ok(mx_graph_add_outer(body, "scale", &sc), "outer", body);
  ok(mx_graph_add_op(body, "Mul", (mx_value_id[]){h, sc}, 2, NULL, 0, &t), "Mul", body);
  ok(mx_graph_add_op(body, "Add", (mx_value_id[]){t, b}, 2, NULL, 0, &t), "Add", body);
  ok(mx_graph_add_op(body, "Tanh", &t, 1, NULL, 0, &t), "Tanh", body);
  ok(mx_graph_add_output(body, ci), "body output", body);
  ok(mx_graph_add_output(body, t), "body output", body);
  mx_attr a = mx_attr_graph("body", body);
  mx_node_desc d = {.op_type = "Loop",
                    .name = "carry",
                    .inputs = (mx_value_id[]){m, c, h0},
                    .n_inputs = 3,
                    .attrs = &a,
                    .n_attrs = 1,
                    .n_outputs = 1};
  ok(mx_graph_add_node(g, &d, &out), "Loop", g);
  ok(mx_graph_add_output(g, out), "output", g);
  return g;
}

static mx_graph *recurrent_loop(void) {
  for (int i = 0; i < H * H; i++) w_data[i] = 0.02f * (float)((i * 37 % 23) - 11) / 11.0f;
  for (int i = 0; i < H; i++) b_data[i] = 0.01f * (float)(i % 7 - 3);
  mx_graph *g = NULL, *body = NULL;
  ok(mx_graph_create("static_body_loop", &g), "mx_graph_create", NULL);
  mx_shape s0 = {.rank = 0}, sh = {.rank = 2, .dims = {1, H}};
  mx_value_id m, c, h0, it, ci, h, w, b, sc, t, out;
  float scale = 0.9f;
  mx_tensor wt = {.dtype = MX_FLOAT32, .rank = 2, .dims = {H, H}, .data = w_data};
  mx_tensor bt = {.dtype = MX_FLOAT32, .rank = 1, .dims = {H}, .data = b_data};
  mx_tensor st = {.dtype = MX_FLOAT32, .rank = 0, .data = &scale};
  ok(mx_graph_add_input(g, "m", MX_INT64, &s0, &m), "add input", g);
  ok(mx_graph_add_input(g, "c", MX_BOOL, &s0, &c), "add input", g);
  ok(mx_graph_add_input(g, "h0", MX_FLOAT32, &sh, &h0), "add input", g);
  ok(mx_graph_add_constant(g, "W", &wt, &w), "constant", g);
  ok(mx_graph_add_constant(g, "b", &bt, &b), "constant", g);
  ok(mx_graph_add_constant(g, "scale", &st, &sc), "constant", g);
  ok(mx_graph_create_subgraph(g, "body", &body), "subgraph", g);
  ok(mx_graph_add_input(body, "iter", MX_INT64, &s0, &it), "body input", body);
  ok(mx_graph_add_input(body, "cond_in", MX_BOOL, &s0, &ci), "body input", body);
  ok(mx_graph_add_input(body, "h", MX_FLOAT32, &sh, &h), "body input", body);
  ok(mx_graph_add_outer(body, "W", &w), "outer", body);
  ok(mx_graph_add_outer(body, "b", &b), "outer", body);
  ok(mx_graph_add_outer(body, "scale", &sc), "outer", body);
  ok(mx_graph_add_op(body, "MatMul", (mx_value_id[]){h, w}, 2, NULL, 0, &t), "MatMul", body);
  ok(mx_graph_add_op(body, "Add", (mx_value_id[]){t, b}, 2, NULL, 0, &t), "Add", body);
  ok(mx_graph_add_op(body, "Tanh", &t, 1, NULL, 0, &t), "Tanh", body);
  ok(mx_graph_add_op(body, "Mul", (mx_value_id[]){t, sc}, 2, NULL, 0, &t), "Mul", body);
  ok(mx_graph_add_output(body, ci), "body output", body);
  ok(mx_graph_add_output(body, t), "body output", body);
  mx_attr a = mx_attr_graph("body", body);
  mx_node_desc d = {.op_type = "Loop",
                    .name = "rnn",
                    .inputs = (mx_value_id[]){m, c, h0},
                    .n_inputs = 3,
                    .attrs = &a,
                    .n_attrs = 1,
                    .n_outputs = 1};
  ok(mx_graph_add_node(g, &d, &out), "Loop", g);
  ok(mx_graph_add_output(g, out), "output", g);
  return g;
}

static int cmp(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return a < b ? -1 : a > b;
}

/* Median ns of one session step over `reps` repetitions of `steps` steps with m iterations, the
 * carried value [1, width]. */
static double step_ns_width(mx_session *s, int64_t width, int64_t m, int steps, int reps) {
  float *h0 = calloc((size_t)width, sizeof *h0), *out_buf = calloc((size_t)width, sizeof *out_buf);
  uint8_t cv = 1;
  mx_tensor in[3] = {{.dtype = MX_INT64, .rank = 0, .data = &m},
                     {.dtype = MX_BOOL, .rank = 0, .data = &cv},
                     {.dtype = MX_FLOAT32, .rank = 2, .dims = {1, width}, .data = h0}};
  double *t = malloc((size_t)reps * sizeof *t);
  if (!t || !h0 || !out_buf) fail("malloc", "out of memory");
  for (int rep = -1; rep < reps; rep++) { /* rep -1: warm-up (compiles the body) */
    uint64_t t0 = mx__now_ns();
    for (int i = 0; i < steps; i++) {
      mx_tensor out = {.dtype = MX_FLOAT32, .rank = 2, .dims = {1, width}, .data = out_buf};
      if (mx_session_run(s, in, 3, &out, 1) != MX_OK) fail("mx_session_run", mx_session_last_error(s));
    }
    if (rep >= 0) t[rep] = (double)(mx__now_ns() - t0) / steps;
  }
  qsort(t, (size_t)reps, sizeof *t, cmp);
  double med = t[reps / 2];
  free(t);
  free(h0);
  free(out_buf);
  return med;
}

static double step_ns(mx_session *s, int64_t m, int steps, int reps) {
  return step_ns_width(s, H, m, steps, reps);
}

/* The same through the reference interpreter (mx__reference_run_graph on the inferred graph). */
static double reference_ns(mx_graph *g, int64_t m, int steps, int reps) {
  static float h0[H];
  uint8_t cv = 1;
  mx_tensor in[3] = {{.dtype = MX_INT64, .rank = 0, .data = &m},
                     {.dtype = MX_BOOL, .rank = 0, .data = &cv},
                     {.dtype = MX_FLOAT32, .rank = 2, .dims = {1, H}, .data = h0}};
  double *t = malloc((size_t)reps * sizeof *t);
  if (!t) fail("malloc", "out of memory");
  for (int rep = -1; rep < reps; rep++) {
    uint64_t t0 = mx__now_ns();
    for (int i = 0; i < steps; i++) {
      mx_tensor out = {0};
      mx_error err = {0};
      if (mx__reference_run_graph(g, NULL, in, 3, &out, 1, &err) != MX_OK) fail("reference run", err.message);
      mx_tensor_release(&out);
    }
    if (rep >= 0) t[rep] = (double)(mx__now_ns() - t0) / steps;
  }
  qsort(t, (size_t)reps, sizeof *t, cmp);
  double med = t[reps / 2];
  free(t);
  return med;
}

void mx__bench_control_static_body(bool quick) {
  mx_session_options o;
  mx_session_options_init(&o);
  mx_session *s = NULL;
  mx_error err = {0};
  if (mx_session_create(&o, &s, &err) != MX_OK) fail("mx_session_create", err.message);
  if (mx_session_load_graph(s, recurrent_loop()) != MX_OK)
    fail("mx_session_load_graph", mx_session_last_error(s));
  const int64_t iters = quick ? 50 : 200;
  const int steps = quick ? 5 : 20, reps = quick ? 5 : 11;
  double full = step_ns(s, iters, steps, reps);
  mx_session_stats last;
  if (mx_session_get_stats(s, &last, NULL) != MX_OK) fail("mx_session_get_stats", "");
  double empty = step_ns(s, 0, steps, reps);
  mx_session_destroy(s);
  /* The same Loop through the reference interpreter (the body run op by op on host tensors). */
  mx_graph *g = recurrent_loop();
  ok(mx_graph_infer(g), "infer", g);
  double ref_full = reference_ns(g, iters, steps, reps), ref_empty = reference_ns(g, 0, steps, reps);
  mx_graph_destroy(g);
  printf(
      ",\n  \"static_body\": {\"loop_iteration_static_body_ns\": %.1f, \"loop_iterations\": %lld, "
      "\"loop_step_ns\": %.1f, \"loop_zero_step_ns\": %.1f, \"static_executes_per_iteration\": %.2f,\n"
      "    \"loop_iteration_reference_body_ns\": %.1f}\n",
      (full - empty) / (double)iters, (long long)iters, full, empty,
      (double)last.body_static_executes / (double)iters, (ref_full - ref_empty) / (double)iters);
}

void mx__bench_control_carried(bool quick) {
  enum { WIDTH = 4096 };
  static float bias[WIDTH];
  mx_session_options o;
  mx_session_options_init(&o);
  mx_session *s = NULL;
  mx_error err = {0};
  if (mx_session_create(&o, &s, &err) != MX_OK) fail("mx_session_create", err.message);
  if (mx_session_load_graph(s, carried_loop(WIDTH, bias)) != MX_OK)
    fail("mx_session_load_graph", mx_session_last_error(s));
  const int64_t iters = quick ? 50 : 200;
  const int steps = quick ? 5 : 20, reps = quick ? 5 : 11;
  double full = step_ns_width(s, WIDTH, iters, steps, reps);
  mx_session_stats last;
  if (mx_session_get_stats(s, &last, NULL) != MX_OK) fail("mx_session_get_stats", "");
  double empty = step_ns_width(s, WIDTH, 0, steps, reps);
  mx_session_destroy(s);
  printf(
      ",\n  \"carried_4096\": {\"loop_iteration_ns\": %.1f, \"loop_iterations\": %lld, \"loop_step_ns\": "
      "%.1f, "
      "\"loop_zero_step_ns\": %.1f,\n    \"static_executes_per_iteration\": %.2f, "
      "\"rebinds_per_iteration\": %.2f, \"copies_per_iteration\": %.2f}\n",
      (full - empty) / (double)iters, (long long)iters, full, empty,
      (double)last.body_static_executes / (double)iters, (double)last.loop_carry_rebinds / (double)iters,
      (double)last.loop_carry_copies / (double)iters);
}
