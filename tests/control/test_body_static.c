/* Control-node bodies compiled into programs of their own: a Loop carrying a [1,64] state
 * through MatMul / Add / Tanh runs its body as one static model per iteration (body_runs and
 * body_static_executes equal the iteration count); If branches of different shapes, a Loop with
 * a data-dependent trip count and an If nested in it, under every executor and with two
 * streams; every output equals the reference interpreter's. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control_support.h"
#include "mixrt/graph.h"
#include "mixrt/reference.h"
#include "mixrt/session.h"

#define H 64

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

/* Weights of the recurrent body (small, so tanh stays away from saturation). */
static float w_data[H * H], b_data[H];

static void fill_weights(void) {
  for (int i = 0; i < H * H; i++) w_data[i] = 0.02f * (float)((i * 37 % 23) - 11) / 11.0f;
  for (int i = 0; i < H; i++) b_data[i] = 0.01f * (float)(i % 7 - 3);
}

/* Loop(M = trips input, cond = true) carrying h [1,64]: h = Tanh(h @ W + b) * scale, with W, b
 * and scale root constants the body captures; the iteration numbers are scanned out. */
static mx_graph *recurrent_loop(void) {
  fill_weights();
  mx_graph *g = new_graph();
  mx_value_id trips = input(g, "trips", MX_INT64, 0, NULL);
  mx_value_id h0 = input(g, "h0", MX_FLOAT32, 2, (mx_dim[]){1, H});
  uint8_t yes = 1;
  float scale = 0.9f;
  mx_value_id cond = ctl_constant(g, "cond", MX_BOOL, 0, NULL, &yes);
  ctl_constant(g, "W", MX_FLOAT32, 2, (int64_t[]){H, H}, w_data);
  ctl_constant(g, "b", MX_FLOAT32, 1, (int64_t[]){H}, b_data);
  ctl_constant(g, "scale", MX_FLOAT32, 0, NULL, &scale);
  mx_graph *body = ctl_sub(g, "rnn_body");
  mx_value_id it = input(body, "iter", MX_INT64, 0, NULL);
  mx_value_id ci = input(body, "cond_in", MX_BOOL, 0, NULL);
  mx_value_id h = input(body, "h", MX_FLOAT32, 2, (mx_dim[]){1, H});
  mx_value_id w = ctl_outer(body, "W"), b = ctl_outer(body, "b"), sc = ctl_outer(body, "scale");
  mx_value_id mm = ctl_op(body, "MatMul", (mx_value_id[]){h, w}, 2);
  mx_value_id ad = ctl_op(body, "Add", (mx_value_id[]){mm, b}, 2);
  mx_value_id th = ctl_op(body, "Tanh", &ad, 1);
  mx_value_id next = ctl_op(body, "Mul", (mx_value_id[]){th, sc}, 2);
  cr_assert_eq(mx_graph_add_output(body, ctl_op(body, "Identity", &ci, 1)), MX_OK);
  cr_assert_eq(mx_graph_add_output(body, next), MX_OK);
  cr_assert_eq(mx_graph_add_output(body, ctl_op(body, "Identity", &it, 1)), MX_OK);
  mx_attr a = mx_attr_graph("body", body);
  mx_value_id outs[2];
  ctl_node(g, "Loop", "rnn", (mx_value_id[]){trips, cond, h0}, 3, &a, 1, outs, 2);
  cr_assert_eq(mx_graph_add_output(g, outs[0]), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, outs[1]), MX_OK);
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

/* Runs s and the reference interpreter on make()'s graph; outputs must agree. */
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

Test(body_static, loop_body_is_one_static_model_per_iteration) {
  for (size_t e = 0; e < 3; e++)
    for (uint32_t streams = 1; streams <= 2; streams++) {
      mx_session *s = open_with(recurrent_loop(), executors[e], streams);
      float h0[H];
      for (int i = 0; i < H; i++) h0[i] = 0.1f * (float)(i % 5) - 0.2f;
      for (int64_t trips = 0; trips <= 6; trips += 3) {
        mx_tensor in[2] = {{.dtype = MX_INT64, .rank = 0, .data = &trips},
                           {.dtype = MX_FLOAT32, .rank = 2, .dims = {1, H}, .data = h0}};
        expect_as_reference(s, recurrent_loop, in, 2, 2);
        mx_session_stats last;
        cr_assert_eq(mx_session_get_stats(s, &last, NULL), MX_OK);
        cr_assert_eq(last.loop_iterations, (uint64_t)trips);
        cr_assert_eq(last.body_runs, (uint64_t)trips, "executor %zu, %u streams: %llu body runs", e, streams,
                     (unsigned long long)last.body_runs);
        cr_assert_eq(last.body_static_executes, (uint64_t)trips,
                     "executor %zu, %u streams: %llu static executes for %lld iterations", e, streams,
                     (unsigned long long)last.body_static_executes, (long long)trips);
      }
      mx_session_destroy(s);
    }
}

/* --- dumps ----------------------------------------------------------------------------------- */

#include "mixrt/partition.h"
#include "partitioner/partitioner.h"

/* The text, JSON and DOT dumps and --explain show each body's own clusters under its control
 * node: the recurrent body is one KNOWN cluster of its 6 ops. */
Test(body_static, dumps_show_the_clusters_of_each_body) {
  mx_graph *g = recurrent_loop();
  cr_assert_eq(mx_graph_infer(g), MX_OK, "%s", mx_graph_last_error(g));
  mx_error err = {0};
  cr_assert_eq(mx__part_wrap_control(g, NULL, &err), MX_OK, "%s", err.message);
  mx_partition_options o;
  mx_partition_options_init(&o);
  mx_partition *p;
  cr_assert_eq(mx_partition_create(g, &o, &p, &err), MX_OK, "%s", err.message);
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  cr_assert_eq(mx_partition_dump_text(p, f), MX_OK);
  fclose(f);
  cr_assert(strstr(text, "body 'rnn_body': 6 nodes"), "%s", text);
  cr_assert(strstr(text, "compiled as a program of its own: 1 KNOWN cluster"), "%s", text);
  cr_assert(strstr(text, "KNOWN ops 6 |"), "%s", text);
  free(text);
  f = open_memstream(&text, &len);
  cr_assert_eq(mx_partition_dump_json(p, f), MX_OK);
  fclose(f);
  cr_assert(strstr(text, "\"partition\": {\"compiled\": true, \"clusters\": [{\"id\": "), "%s", text);
  cr_assert(strstr(text, "\"type\": \"KNOWN\", \"ops\": 6"), "%s", text);
  free(text);
  f = open_memstream(&text, &len);
  cr_assert_eq(mx_partition_dump_dot(p, f), MX_OK);
  fclose(f);
  cr_assert(strstr(text, "label=\"1 KNOWN (6 ops), 0 UNKNOWN (0 ops)\""), "%s", text);
  free(text);
  f = open_memstream(&text, &len);
  cr_assert_eq(mx_partition_explain(p, "rnn", f), MX_OK);
  fclose(f);
  cr_assert(strstr(text, "each body compiled as a program of its own"), "%s", text);
  cr_assert(strstr(text, "compiled as a program of its own: 1 KNOWN cluster"), "%s", text);
  free(text);
  mx_partition_destroy(p);
  mx_graph_destroy(g);
}

/* --- .mxm ------------------------------------------------------------------------------------ */

#include <unistd.h>

/* A session saved with a Loop loads again with its body compiled at load into a static model:
 * the first step after loading runs it once per iteration, equal to the reference. */
Test(body_static, compiled_body_after_an_mxm_round_trip) {
  mx_session *s = open_with(recurrent_loop(), MX_EXECUTOR_SEQUENTIAL, 1);
  char path[] = "/tmp/mixrt_body_XXXXXX";
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
    float h0[H];
    for (int i = 0; i < H; i++) h0[i] = 0.05f * (float)(i % 9) - 0.2f;
    int64_t trips = 5;
    mx_tensor in[2] = {{.dtype = MX_INT64, .rank = 0, .data = &trips},
                       {.dtype = MX_FLOAT32, .rank = 2, .dims = {1, H}, .data = h0}};
    expect_as_reference(s, recurrent_loop, in, 2, 2);
    mx_session_stats last;
    cr_assert_eq(mx_session_get_stats(s, &last, NULL), MX_OK);
    cr_assert_eq(last.body_static_executes, (uint64_t)trips);
    mx_session_destroy(s);
  }
  remove(path);
}
