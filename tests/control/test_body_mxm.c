/* Compiled control bodies in .mxm files: a saved session's bodies (their static plans, execution
 * graphs and nested bodies) load without compiling, run as static models after the round trip,
 * and a file whose stored body does not fit the model is refused naming the body. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "control_support.h"
#include "mixrt/graph.h"
#include "mixrt/session.h"
#include "proto/mixrt_model.pb-c.h"
#include "static_exec/mxm_info.h"
#include "static_exec/static_exec_impl.h"
#include "v2runtime/kernels_control.h"

#define H 32

static float w_data[H * H], b_data[H];

static void fill_weights(void) {
  for (int i = 0; i < H * H; i++) w_data[i] = 0.03f * (float)((i * 29 % 17) - 8) / 8.0f;
  for (int i = 0; i < H; i++) b_data[i] = 0.01f * (float)(i % 5 - 2);
}

static mx_value_id input(mx_graph *g, const char *name, mx_dtype dt, int32_t rank, const mx_dim *dims) {
  mx_shape s = {.rank = rank};
  for (int32_t i = 0; i < rank; i++) s.dims[i] = dims[i];
  mx_value_id v;
  cr_assert_eq(mx_graph_add_input(g, name, dt, &s, &v), MX_OK, "%s", mx_graph_last_error(g));
  return v;
}

/* Adds Loop `name` to g carrying h through body `body_name`: h = Tanh(h @ W + b) * scale (W, b,
 * scale captured from the root); the body is made by the caller's hook when nested. Returns the
 * Loop's output. */
static mx_value_id recurrent(mx_graph *g, const char *name, const char *body_name, mx_value_id trips,
                             mx_value_id cond, mx_value_id h0, bool nested) {
  mx_graph *body;
  cr_assert_eq(mx_graph_create_subgraph(g, body_name, &body), MX_OK);
  input(body, "iter", MX_INT64, 0, NULL);
  mx_value_id ci = input(body, "cond_in", MX_BOOL, 0, NULL);
  mx_value_id h = input(body, "h", MX_FLOAT32, 2, (mx_dim[]){1, H});
  mx_value_id next;
  if (nested) {
    /* The outer body runs an inner Loop of two iterations, then one step of its own. */
    int64_t two = 2;
    mx_value_id m = ctl_constant(body, "inner_trips", MX_INT64, 0, NULL, &two);
    mx_value_id inner = recurrent(body, "inner", "inner_body", m, ctl_outer(body, "cond"), h, false);
    next = ctl_op(body, "Tanh", &inner, 1);
  } else {
    mx_value_id w = ctl_outer(body, "W"), b = ctl_outer(body, "b"), sc = ctl_outer(body, "scale");
    mx_value_id mm = ctl_op(body, "MatMul", (mx_value_id[]){h, w}, 2);
    mx_value_id ad = ctl_op(body, "Add", (mx_value_id[]){mm, b}, 2);
    mx_value_id th = ctl_op(body, "Tanh", &ad, 1);
    next = ctl_op(body, "Mul", (mx_value_id[]){th, sc}, 2);
  }
  cr_assert_eq(mx_graph_add_output(body, ctl_op(body, "Identity", &ci, 1)), MX_OK);
  cr_assert_eq(mx_graph_add_output(body, next), MX_OK);
  mx_attr a = mx_attr_graph("body", body);
  mx_node_desc d = {.op_type = "Loop",
                    .name = name,
                    .inputs = (mx_value_id[]){trips, cond, h0},
                    .n_inputs = 3,
                    .attrs = &a,
                    .n_attrs = 1,
                    .n_outputs = 1};
  mx_value_id out;
  cr_assert_eq(mx_graph_add_node(g, &d, &out), MX_OK, "%s", mx_graph_last_error(g));
  return out;
}

/* A Loop carrying h [1,H] through a MatMul/Add/Tanh/Mul body (nested: a body running a Loop of
 * its own). */
static mx_graph *model(bool nested) {
  fill_weights();
  mx_graph *g = NULL;
  cr_assert_eq(mx_graph_create("t", &g), MX_OK);
  mx_value_id trips = input(g, "trips", MX_INT64, 0, NULL);
  mx_value_id h0 = input(g, "h0", MX_FLOAT32, 2, (mx_dim[]){1, H});
  uint8_t yes = 1;
  float scale = 0.9f;
  mx_value_id cond = ctl_constant(g, "cond", MX_BOOL, 0, NULL, &yes);
  ctl_constant(g, "W", MX_FLOAT32, 2, (int64_t[]){H, H}, w_data);
  ctl_constant(g, "b", MX_FLOAT32, 1, (int64_t[]){H}, b_data);
  ctl_constant(g, "scale", MX_FLOAT32, 0, NULL, &scale);
  cr_assert_eq(mx_graph_add_output(g, recurrent(g, "rnn", "rnn_body", trips, cond, h0, nested)), MX_OK);
  return g;
}

static mx_session *session(mx_executor_kind ex) {
  mx_session_options o;
  mx_session_options_init(&o);
  o.executor = ex;
  o.streams = ex == MX_EXECUTOR_SEQUENTIAL ? 1 : 2;
  o.executor_threads = 2;
  mx_session *s;
  mx_error err = {0};
  cr_assert_eq(mx_session_create(&o, &s, &err), MX_OK, "%s", err.message);
  return s;
}

static const int64_t trips = 5;
static float h0[H];

/* Runs s once; out receives the carried value. */
static void run(mx_session *s, float *out) {
  for (int i = 0; i < H; i++) h0[i] = 0.05f * (float)(i % 9) - 0.2f;
  int64_t m = trips;
  mx_tensor in[2] = {{.dtype = MX_INT64, .rank = 0, .data = &m},
                     {.dtype = MX_FLOAT32, .rank = 2, .dims = {1, H}, .data = h0}};
  mx_tensor got = {0};
  cr_assert_eq(mx_session_run(s, in, 2, &got, 1), MX_OK, "%s", mx_session_last_error(s));
  cr_assert_eq(got.dtype, MX_FLOAT32);
  memcpy(out, got.data, sizeof(float) * H);
  mx_tensor_release(&got);
}

/* Saves model(nested) compiled into a new temporary file (its name in path); want receives
 * what the compiled session computes, *static_executes its bodies' static model runs. */
static void save(bool nested, char *path, float *want, uint64_t *static_executes) {
  mx_session *s = session(MX_EXECUTOR_SEQUENTIAL);
  cr_assert_eq(mx_session_load_graph(s, model(nested)), MX_OK, "%s", mx_session_last_error(s));
  run(s, want);
  mx_session_stats last;
  cr_assert_eq(mx_session_get_stats(s, &last, NULL), MX_OK);
  *static_executes = last.body_static_executes;
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  close(fd);
  cr_assert_eq(mx_session_save(s, path, NULL), MX_OK, "%s", mx_session_last_error(s));
  mx_session_destroy(s);
}

static void round_trip(bool nested) {
  char path[] = "/tmp/mixrt_body_mxm_XXXXXX";
  float want[H], got[H];
  uint64_t compiled_executes;
  save(nested, path, want, &compiled_executes);
  static const mx_executor_kind executors[] = {MX_EXECUTOR_SEQUENTIAL, MX_EXECUTOR_TOPOLOGICAL,
                                               MX_EXECUTOR_MULTI_THREAD};
  for (size_t e = 0; e < 3; e++) {
    mx_session *s = session(executors[e]);
    uint64_t compiles = mx__control_body_compiles();
    cr_assert_eq(mx_session_load_file(s, path), MX_OK, "%s", mx_session_last_error(s));
    cr_assert_eq(mx__control_body_compiles(), compiles, "executor %zu: %llu bodies compiled at load", e,
                 (unsigned long long)(mx__control_body_compiles() - compiles));
    run(s, got);
    cr_assert_eq(mx__control_body_compiles(), compiles, "bodies compiled on first use");
    for (int i = 0; i < H; i++) cr_assert_float_eq(got[i], want[i], 1e-6f, "executor %zu, element %d", e, i);
    mx_session_stats last;
    cr_assert_eq(mx_session_get_stats(s, &last, NULL), MX_OK);
    /* Each iteration runs the body's static model (nested: each outer iteration the inner
     * body's twice), as the session that saved the file did. */
    cr_assert_eq(last.body_static_executes, (nested ? 2u : 1u) * (uint64_t)trips,
                 "executor %zu: %llu static executes for %lld iterations", e,
                 (unsigned long long)last.body_static_executes, (long long)trips);
    cr_assert_eq(last.body_static_executes, compiled_executes);
    mx_session_destroy(s);
  }
  remove(path);
}

Test(body_mxm, loop_body_loads_without_compiling) { round_trip(false); }

Test(body_mxm, nested_loop_bodies_load_without_compiling) { round_trip(true); }

/* --- stored bodies that do not fit the model -------------------------------------------------- */

/* Writes `bad`: the file at `good` with its runtime record changed by edit (the static plans and
 * weights section kept, checksums recomputed), so only the stored record is wrong. */
static void rewrite(const char *good, const char *bad, void (*edit)(Mxm__Runtime *rt)) {
  unsigned char *d;
  size_t size;
  mx_error err;
  cr_assert_eq(mx__mxm_map_file(good, &d, &size, &err), MX_OK, "%s", err.message);
  Mxm__ModelFile *mf;
  const unsigned char *sec;
  uint64_t sec_size, sec_checksum;
  cr_assert_eq(mx__mxm_parse_sections(d, size, &mf, &sec, &sec_size, &sec_checksum, NULL, &err), MX_OK, "%s",
               err.message);
  Mxm__Runtime *rt = mxm__runtime__unpack(NULL, mf->runtime.len, mf->runtime.data);
  cr_assert(rt);
  cr_assert_geq(rt->n_bodies, 1, "no body stored");
  edit(rt);
  size_t n = mxm__runtime__get_packed_size(rt);
  uint8_t *packed = malloc(n);
  mxm__runtime__pack(rt, packed);
  ProtobufCBinaryData keep = mf->runtime;
  mf->runtime.data = packed;
  mf->runtime.len = n;
  size_t psz = mxm__model_file__get_packed_size(mf);
  uint8_t *payload = malloc(psz);
  mxm__model_file__pack(mf, payload);
  mf->runtime = keep;
  uint32_t hsz = (uint32_t)d[12] | (uint32_t)d[13] << 8 | (uint32_t)d[14] << 16 | (uint32_t)d[15] << 24;
  Mxm__FileHeader *h = mxm__file_header__unpack(NULL, hsz, d + 24);
  cr_assert(h);
  h->payload_size = psz;
  h->payload_checksum = mx__mxm_checksum(payload, psz);
  size_t nh = mxm__file_header__get_packed_size(h);
  if (sec_size) h->weights_offset = (24 + nh + psz + 4095) & ~(uint64_t)4095;
  nh = mxm__file_header__get_packed_size(h);
  if (sec_size) h->weights_offset = (24 + nh + psz + 4095) & ~(uint64_t)4095;
  uint8_t *hb = malloc(24 + nh);
  memcpy(hb, d, 12);
  for (int i = 0; i < 4; i++) hb[12 + i] = (uint8_t)(nh >> (8 * i));
  mxm__file_header__pack(h, hb + 24);
  uint64_t hc = mx__mxm_checksum(hb + 24, nh);
  for (int i = 0; i < 8; i++) hb[16 + i] = (uint8_t)(hc >> (8 * i));
  FILE *f = fopen(bad, "wb");
  cr_assert(f);
  cr_assert_eq(fwrite(hb, 1, 24 + nh, f), 24 + nh);
  cr_assert_eq(fwrite(payload, 1, psz, f), psz);
  if (sec_size) {
    for (uint64_t at = 24 + nh + psz; at < h->weights_offset; at++) fputc(0, f);
    cr_assert_eq(fwrite(sec, 1, sec_size, f), sec_size);
  }
  cr_assert_eq(fclose(f), 0);
  free(hb);
  mxm__file_header__free_unpacked(h, NULL);
  free(payload);
  free(packed);
  mxm__runtime__free_unpacked(rt, NULL);
  mxm__model_file__free_unpacked(mf, NULL);
  mx__mxm_unmap(d, size);
}

/* The first Main node of the body's program pointed at a value slot past the end. */
static void slot_out_of_range(Mxm__Runtime *rt) {
  Mxm__ExeGraph *m = rt->bodies[0]->runtime->main;
  cr_assert_gt(m->n_nodes, 0);
  for (size_t i = 0; i < m->n_nodes; i++)
    if (m->nodes[i]->n_outputs) {
      m->nodes[i]->outputs[0] = rt->bodies[0]->runtime->n_slots + 7;
      return;
    }
  cr_assert_fail("no node with outputs");
}

/* The body's Init graph lost its nodes: nothing creates its static model. */
static void init_emptied(Mxm__Runtime *rt) {
  Mxm__ExeGraph *init = rt->bodies[0]->runtime->init;
  /* freed here: the message's own free only walks the nodes it still counts */
  for (size_t i = 0; i < init->n_nodes; i++) protobuf_c_message_free_unpacked(&init->nodes[i]->base, NULL);
  init->n_nodes = 0;
}

/* The stored body claims another body of the model. */
static void renamed(Mxm__Runtime *rt) { rt->bodies[0]->ordinal = 3; }

typedef struct bad_case {
  void (*edit)(Mxm__Runtime *rt);
  const char *words; /* the refusal must contain them */
} bad_case;

Test(body_mxm, a_stored_body_that_does_not_fit_is_refused_naming_it) {
  char good[] = "/tmp/mixrt_body_mxm_XXXXXX";
  float want[H];
  uint64_t executes;
  save(false, good, want, &executes);
  const bad_case cases[] = {
      {slot_out_of_range, "body 'rnn_body' of node 'rnn': Main graph node"},
      {init_emptied, "body 'rnn_body' of node 'rnn': the Init graph does not create"},
      {renamed, "stored bodies belong to no control node"},
  };
  char bad[] = "/tmp/mixrt_body_mxm_bad_XXXXXX";
  int fd = mkstemp(bad);
  cr_assert_geq(fd, 0);
  close(fd);
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    rewrite(good, bad, cases[c].edit);
    mx_session *s = session(MX_EXECUTOR_SEQUENTIAL);
    cr_assert_eq(mx_session_load_file(s, bad), MX_ERR_MALFORMED, "case %zu loaded: %s", c,
                 mx_session_last_error(s));
    cr_assert(strstr(mx_session_last_error(s), cases[c].words), "case %zu: %s", c, mx_session_last_error(s));
    mx_session_destroy(s);
  }
  /* The untouched file still loads. */
  rewrite(good, bad, init_emptied);
  mx_session *s = session(MX_EXECUTOR_SEQUENTIAL);
  cr_assert_eq(mx_session_load_file(s, good), MX_OK, "%s", mx_session_last_error(s));
  mx_session_destroy(s);
  remove(bad);
  remove(good);
}

/* --- body stats under concurrent control ops -------------------------------------------------- */

/* Two independent Loops over the same weights (the multi-thread executor runs them at once). */
static mx_graph *two_loops(void) {
  mx_graph *g = model(false);
  mx_value_id trips_in = 0, h0_in = 1, cond = 2; /* value ids in the order model() made them */
  mx_value_id y = recurrent(g, "rnn_b", "rnn_b_body", trips_in, cond, h0_in, false);
  cr_assert_eq(mx_graph_add_output(g, y), MX_OK);
  return g;
}

/* Each control op adds its bodies' counts to the step's stats; two Loops running at the same time
 * on two threads lose none. */
Test(body_mxm, two_loops_at_once_count_every_body_run) {
  mx_session *s = session(MX_EXECUTOR_MULTI_THREAD);
  cr_assert_eq(mx_session_load_graph(s, two_loops()), MX_OK, "%s", mx_session_last_error(s));
  for (int i = 0; i < H; i++) h0[i] = 0.05f * (float)(i % 9) - 0.2f;
  int64_t m = 40;
  mx_tensor in[2] = {{.dtype = MX_INT64, .rank = 0, .data = &m},
                     {.dtype = MX_FLOAT32, .rank = 2, .dims = {1, H}, .data = h0}};
  for (int step = 0; step < 30; step++) {
    mx_tensor got[2];
    memset(got, 0, sizeof got);
    cr_assert_eq(mx_session_run(s, in, 2, got, 2), MX_OK, "%s", mx_session_last_error(s));
    for (int i = 0; i < H; i++)
      cr_assert_float_eq(((float *)got[0].data)[i], ((float *)got[1].data)[i], 1e-6f);
    mx_tensor_release(&got[0]);
    mx_tensor_release(&got[1]);
    mx_session_stats last;
    cr_assert_eq(mx_session_get_stats(s, &last, NULL), MX_OK);
    cr_assert_eq(last.loop_iterations, 2 * (uint64_t)m, "step %d: %llu iterations", step,
                 (unsigned long long)last.loop_iterations);
    cr_assert_eq(last.body_runs, 2 * (uint64_t)m, "step %d: %llu body runs", step,
                 (unsigned long long)last.body_runs);
    cr_assert_eq(last.body_static_executes, 2 * (uint64_t)m, "step %d: %llu static executes", step,
                 (unsigned long long)last.body_static_executes);
  }
  mx_session_destroy(s);
}
