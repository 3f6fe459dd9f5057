/* Loop and Scan carried values rebound between iterations without copies: a fixed-shape state
 * is written by the body's static model straight into its other buffer, which becomes the next
 * iteration's input (loop_carry_rebinds, no loop_carry_copies), under every executor, with one
 * and two streams and after an .mxm round trip; a carried output that is the body's input or a
 * capture, and a value that grows every iteration, are copied (and counted) and stay right; scan
 * outputs and a greedy decode inside one Loop still equal the reference interpreter. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "control_support.h"
#include "mixrt/graph.h"
#include "mixrt/reference.h"
#include "mixrt/session.h"

#define H 64

static mx_graph *new_graph(const char *name) {
  mx_graph *g = NULL;
  cr_assert_eq(mx_graph_create(name, &g), MX_OK);
  return g;
}

static mx_value_id input(mx_graph *g, const char *name, mx_dtype dt, int32_t rank, const mx_dim *dims) {
  mx_shape s = {.rank = rank};
  for (int32_t i = 0; i < rank; i++) s.dims[i] = dims[i];
  mx_value_id v;
  cr_assert_eq(mx_graph_add_input(g, name, dt, &s, &v), MX_OK, "%s", mx_graph_last_error(g));
  return v;
}

static float w_data[H * H], b_data[H], k_data[H];

static void fill_weights(void) {
  for (int i = 0; i < H * H; i++) w_data[i] = 0.02f * (float)((i * 37 % 23) - 11) / 11.0f;
  for (int i = 0; i < H; i++) b_data[i] = 0.01f * (float)(i % 7 - 3);
  for (int i = 0; i < H; i++) k_data[i] = 0.5f - 0.01f * (float)i;
}

/* The Loop's cond (true) and the body's first two inputs (the trip count is g's first input). */
static void loop_head(mx_graph *g, mx_graph *body, mx_value_id *trips, mx_value_id *cond, mx_value_id *it,
                      mx_value_id *ci) {
  *trips = mx_graph_find_value(g, "trips");
  uint8_t yes = 1;
  *cond = ctl_constant(g, "cond", MX_BOOL, 0, NULL, &yes);
  *it = input(body, "iter", MX_INT64, 0, NULL);
  *ci = input(body, "cond_in", MX_BOOL, 0, NULL);
}

/* h = Tanh(h @ W + b) * 0.9 in body (W, b captured from the root). */
static mx_value_id recurrent_step(mx_graph *body, mx_value_id h) {
  mx_value_id w = ctl_outer(body, "W"), b = ctl_outer(body, "b"), sc = ctl_outer(body, "scale");
  mx_value_id mm = ctl_op(body, "MatMul", (mx_value_id[]){h, w}, 2);
  mx_value_id th = ctl_op(body, "Tanh", (mx_value_id[]){ctl_op(body, "Add", (mx_value_id[]){mm, b}, 2)}, 1);
  return ctl_op(body, "Mul", (mx_value_id[]){th, sc}, 2);
}

static void recurrent_weights(mx_graph *g) {
  float scale = 0.9f;
  ctl_constant(g, "W", MX_FLOAT32, 2, (int64_t[]){H, H}, w_data);
  ctl_constant(g, "b", MX_FLOAT32, 1, (int64_t[]){H}, b_data);
  ctl_constant(g, "scale", MX_FLOAT32, 0, NULL, &scale);
}

/* Loop(trips) carrying h [1,64] through MatMul / Add / Tanh / Mul; the iteration numbers are
 * scanned out. */
static mx_graph *recurrent_loop(void) {
  fill_weights();
  mx_graph *g = new_graph("carry");
  input(g, "trips", MX_INT64, 0, NULL);
  mx_value_id h0 = input(g, "h0", MX_FLOAT32, 2, (mx_dim[]){1, H});
  recurrent_weights(g);
  mx_graph *body = ctl_sub(g, "rnn_body");
  mx_value_id trips, cond, it, ci;
  loop_head(g, body, &trips, &cond, &it, &ci);
  mx_value_id h = input(body, "h", MX_FLOAT32, 2, (mx_dim[]){1, H});
  cr_assert_eq(mx_graph_add_output(body, ctl_op(body, "Identity", &ci, 1)), MX_OK);
  cr_assert_eq(mx_graph_add_output(body, recurrent_step(body, h)), MX_OK);
  cr_assert_eq(mx_graph_add_output(body, ctl_op(body, "Identity", &it, 1)), MX_OK);
  mx_attr a = mx_attr_graph("body", body);
  mx_value_id outs[2];
  ctl_node(g, "Loop", "rnn", (mx_value_id[]){trips, cond, h0}, 3, &a, 1, outs, 2);
  cr_assert_eq(mx_graph_add_output(g, outs[0]), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, outs[1]), MX_OK);
  return g;
}

/* Loop(trips) carrying h (recurrent), p (the body gives its input back in its own slot) and q
 * (the body gives back K, a root constant it captures). */
static mx_graph *aliasing_loop(void) {
  fill_weights();
  mx_graph *g = new_graph("carry_alias");
  input(g, "trips", MX_INT64, 0, NULL);
  mx_value_id h0 = input(g, "h0", MX_FLOAT32, 2, (mx_dim[]){1, H});
  mx_value_id p0 = input(g, "p0", MX_FLOAT32, 2, (mx_dim[]){1, H});
  recurrent_weights(g);
  mx_value_id q0 = ctl_constant(g, "K", MX_FLOAT32, 2, (int64_t[]){1, H}, k_data);
  mx_graph *body = ctl_sub(g, "alias_body");
  mx_value_id trips, cond, it, ci;
  loop_head(g, body, &trips, &cond, &it, &ci);
  mx_value_id h = input(body, "h", MX_FLOAT32, 2, (mx_dim[]){1, H});
  mx_value_id p = input(body, "p", MX_FLOAT32, 2, (mx_dim[]){1, H});
  input(body, "q", MX_FLOAT32, 2, (mx_dim[]){1, H});
  mx_value_id k = ctl_outer(body, "K");
  cr_assert_eq(mx_graph_add_output(body, ctl_op(body, "Identity", &ci, 1)), MX_OK);
  cr_assert_eq(mx_graph_add_output(body, recurrent_step(body, h)), MX_OK);
  cr_assert_eq(mx_graph_add_output(body, p), MX_OK);
  cr_assert_eq(mx_graph_add_output(body, k), MX_OK);
  mx_attr a = mx_attr_graph("body", body);
  mx_value_id outs[3];
  ctl_node(g, "Loop", "alias", (mx_value_id[]){trips, cond, h0, p0, q0}, 5, &a, 1, outs, 3);
  for (int i = 0; i < 3; i++) cr_assert_eq(mx_graph_add_output(g, outs[i]), MX_OK);
  return g;
}

/* Loop(trips) carrying h (recurrent) and x [1, n] that grows by one column per iteration
 * (Concat with the iteration's first element of h). */
static mx_graph *growing_loop(void) {
  fill_weights();
  mx_graph *g = new_graph("carry_grow");
  input(g, "trips", MX_INT64, 0, NULL);
  mx_value_id h0 = input(g, "h0", MX_FLOAT32, 2, (mx_dim[]){1, H});
  mx_value_id x0 = input(g, "x0", MX_FLOAT32, 2, (mx_dim[]){1, 1});
  recurrent_weights(g);
  int64_t starts = 0, ends = 1, axes = 1;
  ctl_constant(g, "starts", MX_INT64, 1, (int64_t[]){1}, &starts);
  ctl_constant(g, "ends", MX_INT64, 1, (int64_t[]){1}, &ends);
  ctl_constant(g, "axes", MX_INT64, 1, (int64_t[]){1}, &axes);
  mx_graph *body = ctl_sub(g, "grow_body");
  mx_value_id trips, cond, it, ci;
  loop_head(g, body, &trips, &cond, &it, &ci);
  mx_value_id h = input(body, "h", MX_FLOAT32, 2, (mx_dim[]){1, H});
  mx_value_id x = input(body, "x", MX_FLOAT32, 2, (mx_dim[]){1, MX_DIM_UNKNOWN});
  mx_value_id h1 = recurrent_step(body, h);
  mx_value_id first = ctl_op(
      body, "Slice",
      (mx_value_id[]){h1, ctl_outer(body, "starts"), ctl_outer(body, "ends"), ctl_outer(body, "axes")}, 4);
  mx_attr ax = mx_attr_int("axis", 1);
  mx_value_id x1;
  ctl_node(body, "Concat", "grow", (mx_value_id[]){x, first}, 2, &ax, 1, &x1, 1);
  cr_assert_eq(mx_graph_add_output(body, ctl_op(body, "Identity", &ci, 1)), MX_OK);
  cr_assert_eq(mx_graph_add_output(body, h1), MX_OK);
  cr_assert_eq(mx_graph_add_output(body, x1), MX_OK);
  mx_attr a = mx_attr_graph("body", body);
  mx_value_id outs[2];
  ctl_node(g, "Loop", "grow_loop", (mx_value_id[]){trips, cond, h0, x0}, 4, &a, 1, outs, 2);
  for (int i = 0; i < 2; i++) cr_assert_eq(mx_graph_add_output(g, outs[i]), MX_OK);
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

/* Runs s and the reference interpreter on make()'s graph; outputs must agree. Returns the step's
 * statistics. */
static mx_session_stats expect_as_reference(mx_session *s, mx_graph *(*make)(void), const mx_tensor *in,
                                            size_t n_in, size_t n_out, const char *what) {
  mx_tensor got[4], want[4];
  memset(got, 0, sizeof got);
  cr_assert_eq(mx_session_run(s, in, n_in, got, n_out), MX_OK, "%s: %s", what, mx_session_last_error(s));
  mx_graph *g = make();
  mx_error err = {0};
  cr_assert_eq(mx_reference_run(g, in, n_in, want, n_out, &err), MX_OK, "%s", err.message);
  for (size_t k = 0; k < n_out; k++) {
    char why[200];
    cr_assert(mx_tensor_allclose(&got[k], &want[k], 1e-5, 1e-5, why, sizeof why), "%s: output %zu: %s", what,
              k, why);
    mx_tensor_release(&got[k]);
    mx_tensor_release(&want[k]);
  }
  mx_graph_destroy(g);
  mx_session_stats last;
  cr_assert_eq(mx_session_get_stats(s, &last, NULL), MX_OK);
  return last;
}

static const mx_executor_kind executors[] = {MX_EXECUTOR_SEQUENTIAL, MX_EXECUTOR_TOPOLOGICAL,
                                             MX_EXECUTOR_MULTI_THREAD};

static float h0_data[H], p0_data[H];

static void fill_inputs(void) {
  for (int i = 0; i < H; i++) {
    h0_data[i] = 0.1f * (float)(i % 5) - 0.2f;
    p0_data[i] = 0.03f * (float)(i % 11) - 0.1f;
  }
}

Test(carry, fixed_state_is_rebound_without_copies) {
  fill_inputs();
  for (size_t e = 0; e < 3; e++)
    for (uint32_t streams = 1; streams <= 2; streams++) {
      mx_session *s = open_with(recurrent_loop(), executors[e], streams);
      for (int64_t trips = 50; trips >= 0; trips -= 25) {
        mx_tensor in[2] = {{.dtype = MX_INT64, .rank = 0, .data = &trips},
                           {.dtype = MX_FLOAT32, .rank = 2, .dims = {1, H}, .data = h0_data}};
        char what[96];
        snprintf(what, sizeof what, "executor %zu, %u streams, %lld trips", e, streams, (long long)trips);
        mx_session_stats last = expect_as_reference(s, recurrent_loop, in, 2, 2, what);
        cr_assert_eq(last.body_static_executes, (uint64_t)trips, "%s", what);
        cr_assert_eq(last.loop_carry_copies, 0, "%s: %llu copies", what,
                     (unsigned long long)last.loop_carry_copies);
        cr_assert_eq(last.loop_carry_rebinds, (uint64_t)trips, "%s: %llu rebinds", what,
                     (unsigned long long)last.loop_carry_rebinds);
      }
      mx_session_stats total;
      cr_assert_eq(mx_session_get_stats(s, NULL, &total), MX_OK);
      cr_assert_eq(total.loop_carry_rebinds, 75);
      mx_session_destroy(s);
    }
}

Test(carry, outputs_that_are_an_input_or_a_capture_are_copied) {
  fill_inputs();
  for (size_t e = 0; e < 3; e++)
    for (uint32_t streams = 1; streams <= 2; streams++) {
      mx_session *s = open_with(aliasing_loop(), executors[e], streams);
      int64_t trips = 7;
      mx_tensor in[3] = {{.dtype = MX_INT64, .rank = 0, .data = &trips},
                         {.dtype = MX_FLOAT32, .rank = 2, .dims = {1, H}, .data = h0_data},
                         {.dtype = MX_FLOAT32, .rank = 2, .dims = {1, H}, .data = p0_data}};
      char what[96];
      snprintf(what, sizeof what, "executor %zu, %u streams", e, streams);
      mx_session_stats last = expect_as_reference(s, aliasing_loop, in, 3, 3, what);
      /* h is written in place; p (given back) and q (the capture) are copied every iteration. */
      cr_assert_eq(last.loop_carry_rebinds, (uint64_t)trips, "%s: %llu rebinds", what,
                   (unsigned long long)last.loop_carry_rebinds);
      cr_assert_eq(last.loop_carry_copies, 2 * (uint64_t)trips, "%s: %llu copies", what,
                   (unsigned long long)last.loop_carry_copies);
      mx_session_destroy(s);
    }
}

Test(carry, a_value_that_grows_is_copied_and_stays_right) {
  fill_inputs();
  for (size_t e = 0; e < 3; e++)
    for (uint32_t streams = 1; streams <= 2; streams++) {
      mx_session *s = open_with(growing_loop(), executors[e], streams);
      int64_t trips = 9;
      float x0 = 1.5f;
      mx_tensor in[3] = {{.dtype = MX_INT64, .rank = 0, .data = &trips},
                         {.dtype = MX_FLOAT32, .rank = 2, .dims = {1, H}, .data = h0_data},
                         {.dtype = MX_FLOAT32, .rank = 2, .dims = {1, 1}, .data = &x0}};
      char what[96];
      snprintf(what, sizeof what, "executor %zu, %u streams", e, streams);
      mx_tensor got[2];
      memset(got, 0, sizeof got);
      cr_assert_eq(mx_session_run(s, in, 3, got, 2), MX_OK, "%s: %s", what, mx_session_last_error(s));
      cr_assert_eq(got[1].dims[1], 1 + trips, "%s", what);
      mx_tensor_release(&got[0]);
      mx_tensor_release(&got[1]);
      mx_session_stats last = expect_as_reference(s, growing_loop, in, 3, 2, what);
      /* x grows: copied each iteration; h keeps its shape: rebound. */
      cr_assert_eq(last.loop_carry_copies, (uint64_t)trips, "%s: %llu copies", what,
                   (unsigned long long)last.loop_carry_copies);
      cr_assert_eq(last.loop_carry_rebinds, (uint64_t)trips, "%s: %llu rebinds", what,
                   (unsigned long long)last.loop_carry_rebinds);
      mx_session_destroy(s);
    }
}

/* Scan over xs [t, 64] with state s [1, 64]: s = Tanh(s @ W + b) * 0.9 + x, scanned out each
 * step (and its iteration's x doubled). */
static mx_graph *scan_model(void) {
  fill_weights();
  mx_graph *g = new_graph("carry_scan");
  mx_value_id s0 = input(g, "s0", MX_FLOAT32, 2, (mx_dim[]){1, H});
  mx_dim t = mx_sym_named(mx_graph_symtab(g), "t");
  mx_value_id xs = input(g, "xs", MX_FLOAT32, 3, (mx_dim[]){t, 1, H});
  recurrent_weights(g);
  mx_graph *body = ctl_sub(g, "scan_body");
  mx_value_id s = input(body, "s", MX_FLOAT32, 2, (mx_dim[]){1, H});
  mx_value_id x = input(body, "x", MX_FLOAT32, 2, (mx_dim[]){1, H});
  mx_value_id s1 = ctl_op(body, "Add", (mx_value_id[]){recurrent_step(body, s), x}, 2);
  cr_assert_eq(mx_graph_add_output(body, s1), MX_OK);
  cr_assert_eq(mx_graph_add_output(body, ctl_op(body, "Identity", &s1, 1)), MX_OK);
  cr_assert_eq(mx_graph_add_output(body, ctl_op(body, "Add", (mx_value_id[]){x, x}, 2)), MX_OK);
  mx_attr a[] = {mx_attr_graph("body", body), mx_attr_int("num_scan_inputs", 1)};
  mx_value_id outs[3];
  ctl_node(g, "Scan", "scan", (mx_value_id[]){s0, xs}, 2, a, 2, outs, 3);
  for (int i = 0; i < 3; i++) cr_assert_eq(mx_graph_add_output(g, outs[i]), MX_OK);
  return g;
}

Test(carry, scan_state_is_rebound_and_scan_outputs_stay_right) {
  fill_inputs();
  enum { T = 12 };
  static float xs[T * H];
  for (int i = 0; i < T * H; i++) xs[i] = 0.01f * (float)(i % 13) - 0.05f;
  for (size_t e = 0; e < 3; e++)
    for (uint32_t streams = 1; streams <= 2; streams++) {
      mx_session *s = open_with(scan_model(), executors[e], streams);
      mx_tensor in[2] = {{.dtype = MX_FLOAT32, .rank = 2, .dims = {1, H}, .data = h0_data},
                         {.dtype = MX_FLOAT32, .rank = 3, .dims = {T, 1, H}, .data = xs}};
      char what[96];
      snprintf(what, sizeof what, "executor %zu, %u streams", e, streams);
      mx_session_stats last = expect_as_reference(s, scan_model, in, 2, 3, what);
      cr_assert_eq(last.loop_carry_copies, 0, "%s: %llu copies", what,
                   (unsigned long long)last.loop_carry_copies);
      cr_assert_eq(last.loop_carry_rebinds, T, "%s: %llu rebinds", what,
                   (unsigned long long)last.loop_carry_rebinds);
      mx_session_destroy(s);
    }
}

Test(carry, rebound_after_an_mxm_round_trip) {
  fill_inputs();
  mx_session *s = open_with(recurrent_loop(), MX_EXECUTOR_SEQUENTIAL, 1);
  char path[] = "/tmp/mixrt_carry_XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  close(fd);
  cr_assert_eq(mx_session_save(s, path, NULL), MX_OK, "%s", mx_session_last_error(s));
  mx_session_destroy(s);
  for (size_t e = 0; e < 3; e++) {
    mx_session_options o;
    mx_session_options_init(&o);
    o.executor = executors[e];
    o.streams = e == 0 ? 1 : 2;
    mx_error err = {0};
    cr_assert_eq(mx_session_create(&o, &s, &err), MX_OK, "%s", err.message);
    cr_assert_eq(mx_session_load_file(s, path), MX_OK, "%s", mx_session_last_error(s));
    int64_t trips = 50;
    mx_tensor in[2] = {{.dtype = MX_INT64, .rank = 0, .data = &trips},
                       {.dtype = MX_FLOAT32, .rank = 2, .dims = {1, H}, .data = h0_data}};
    mx_session_stats last = expect_as_reference(s, recurrent_loop, in, 2, 2, "after .mxm");
    cr_assert_eq(last.body_static_executes, (uint64_t)trips);
    cr_assert_eq(last.loop_carry_copies, 0);
    cr_assert_eq(last.loop_carry_rebinds, (uint64_t)trips);
    mx_session_destroy(s);
  }
  remove(path);
}

/* --- a greedy decode inside one Loop ----------------------------------------------------------- */

#define HIDDEN CTL_DECODE_HIDDEN
#define STEPS  CTL_DECODE_STEPS

Test(carry, greedy_decode_in_one_loop_still_equals_separate_steps) {
  int64_t tok0 = 3;
  float past0[HIDDEN] = {0.25f, -0.5f, 0.125f, 0.75f};
  mx_session *step = open_with(ctl_decode_step_model(), MX_EXECUTOR_SEQUENTIAL, 1);
  int64_t tokens[STEPS];
  mx_tensor past;
  ctl_decode_separate_steps(step, tok0, past0, tokens, &past);
  for (size_t e = 0; e < 3; e++)
    for (uint32_t streams = 1; streams <= 2; streams++) {
      mx_session *loop = open_with(ctl_decode_loop_model(), executors[e], streams);
      mx_tensor in[2] = {{.dtype = MX_INT64, .rank = 1, .dims = {1}, .data = &tok0},
                         {.dtype = MX_FLOAT32, .rank = 2, .dims = {1, HIDDEN}, .data = past0}};
      mx_tensor out[3];
      memset(out, 0, sizeof out);
      cr_assert_eq(mx_session_run(loop, in, 2, out, 3), MX_OK, "%s", mx_session_last_error(loop));
      cr_assert_eq(((const int64_t *)out[0].data)[0], tokens[STEPS - 1]);
      char why[200];
      cr_assert(mx_tensor_allclose(&out[1], &past, 1e-6, 1e-6, why, sizeof why), "final cache: %s", why);
      for (int i = 0; i < STEPS; i++)
        cr_assert_eq(((const int64_t *)out[2].data)[i], tokens[i], "token %d", i);
      for (int k = 0; k < 3; k++) mx_tensor_release(&out[k]);
      /* The token keeps its shape (rebound), the cache grows (copied). */
      mx_session_stats last;
      cr_assert_eq(mx_session_get_stats(loop, &last, NULL), MX_OK);
      cr_assert_eq(last.loop_carry_rebinds, STEPS, "executor %zu, %u streams: %llu rebinds", e, streams,
                   (unsigned long long)last.loop_carry_rebinds);
      cr_assert_eq(last.loop_carry_copies, STEPS, "executor %zu, %u streams: %llu copies", e, streams,
                   (unsigned long long)last.loop_carry_copies);
      mx_session_destroy(loop);
    }
  mx_tensor_release(&past);
  mx_session_destroy(step);
}
