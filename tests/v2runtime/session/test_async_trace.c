/* Asynchronous runs pipelined 100 deep give the results of synchronous runs; a decode loop whose
 * steps feed each other through caller buffers stays correct when pipelined; traces are valid
 * JSON with a host lane and a lane per stream; statistics add up; one session used from two
 * threads at once is refused with MX_ERR_BUSY. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mixrt/models.h"
#include "support/json_check.h"
#include "v2runtime/session/session_support.h"

typedef struct counter {
  _Atomic int done;
  _Atomic int failed;
} counter;

static void on_done(void *user, mx_status st, const char *message) {
  counter *c = user;
  if (st != MX_OK) {
    fprintf(stderr, "async step failed: %s\n", message);
    atomic_fetch_add(&c->failed, 1);
  }
  atomic_fetch_add(&c->done, 1);
}

Test(async, pipelined_100_deep_equals_sync) {
  enum { N = 100 };
  mx_session *s = mxs_new_session(2, MX_EXECUTOR_SEQUENTIAL, 4);
  mx_graph *g;
  mx_error err;
  cr_assert_eq(mx_model_encoder(NULL, &g, &err), MX_OK);
  cr_assert_eq(mx_session_load_graph(s, g), MX_OK, "%s", mx_session_last_error(s));
  mx_tensor *x = calloc(N, sizeof *x), *got = calloc(N, sizeof *got);
  for (int i = 0; i < N; i++) {
    int64_t dims[3] = {1 + i % 3, 1 + i % 17, 64};
    cr_assert_eq(mxs_random_tensor(MX_FLOAT32, 3, dims, 500 + i, &x[i]), MX_OK);
    cr_assert_eq(mx_tensor_alloc(MX_FLOAT32, 3, dims, &got[i]), MX_OK);
  }
  counter c = {0, 0};
  for (int i = 0; i < N; i++)
    cr_assert_eq(mx_session_run_async(s, &x[i], 1, &got[i], 1, NULL, on_done, &c), MX_OK, "step %d: %s", i,
                 mx_session_last_error(s));
  cr_assert_eq(mx_session_synchronize(s), MX_OK);
  cr_assert_eq(atomic_load(&c.done), N);
  cr_assert_eq(atomic_load(&c.failed), 0);
  for (int i = 0; i < N; i++) {
    mx_tensor want = {0};
    cr_assert_eq(mx_session_run(s, &x[i], 1, &want, 1), MX_OK, "%s", mx_session_last_error(s));
    char why[256];
    cr_assert(mxs_same(&got[i], &want, why, sizeof why), "step %d: %s", i, why);
    mx_tensor_release(&want);
    mx_tensor_release(&x[i]);
    mx_tensor_release(&got[i]);
  }
  free(x);
  free(got);
  /* Asynchronous runs need caller buffers. */
  mx_tensor xi, none = {0};
  cr_assert_eq(mxs_random_tensor(MX_FLOAT32, 3, (int64_t[]){1, 2, 64}, 1, &xi), MX_OK);
  cr_assert_eq(mx_session_run_async(s, &xi, 1, &none, 1, NULL, on_done, &c), MX_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(mx_session_last_error(s), "caller buffers"), "%s", mx_session_last_error(s));
  mx_tensor_release(&xi);
  mx_session_destroy(s);
}

Test(async, pipelined_decode_loop_feeds_itself) {
  enum { STEPS = 20 };
  mx_llama_config cfg;
  mx_llama_config_default(&cfg);
  mx_graph *g, *ref;
  mx_error err;
  cr_assert_eq(mx_model_llama(&cfg, &g, &err), MX_OK);
  cr_assert_eq(mx_model_llama(&cfg, &ref, &err), MX_OK);
  mx_session *s = mxs_new_session(1, MX_EXECUTOR_SEQUENTIAL, 4);
  cr_assert_eq(mx_session_load_graph(s, g), MX_OK, "%s", mx_session_last_error(s));
  size_t n = mx_session_input_count(s);
  int64_t hd = cfg.hidden / cfg.heads;
  /* Buffers for every step, allocated up front: step k reads the caches step k-1 writes. */
  mx_tensor(*io)[16] = calloc(STEPS + 1, sizeof *io);
  mx_tensor *logits = calloc(STEPS, sizeof *logits);
  for (int k = 0; k <= STEPS; k++) {
    cr_assert_eq(mx_tensor_alloc(MX_INT64, 2, (int64_t[]){1, 1}, &io[k][0]), MX_OK);
    ((int64_t *)io[k][0].data)[0] = (k * 13 + 1) % cfg.vocab;
    for (size_t i = 1; i < n; i++)
      cr_assert_eq(mx_tensor_alloc(MX_FLOAT32, 4, (int64_t[]){1, cfg.kv_heads, k, hd}, &io[k][i]), MX_OK);
  }
  counter c = {0, 0};
  for (int k = 0; k < STEPS; k++) {
    mx_tensor out[16];
    cr_assert_eq(mx_tensor_alloc(MX_FLOAT32, 3, (int64_t[]){1, 1, cfg.vocab}, &logits[k]), MX_OK);
    out[0] = logits[k];
    for (size_t i = 1; i < n; i++) out[i] = io[k + 1][i];
    cr_assert_eq(mx_session_run_async(s, io[k], n, out, n, NULL, on_done, &c), MX_OK, "step %d: %s", k,
                 mx_session_last_error(s));
  }
  cr_assert_eq(mx_session_synchronize(s), MX_OK);
  cr_assert_eq(atomic_load(&c.failed), 0);
  /* The reference, step by step on the same caches. */
  for (int k = 0; k < STEPS; k++) {
    mx_tensor want[16] = {{0}};
    cr_assert_eq(mx_reference_run(ref, io[k], n, want, n, &err), MX_OK, "%s", err.message);
    char why[256];
    cr_assert(mxs_same(&logits[k], &want[0], why, sizeof why), "step %d logits: %s", k, why);
    for (size_t i = 1; i < n; i++)
      cr_assert(mxs_same(&io[k + 1][i], &want[i], why, sizeof why), "step %d: %s", k, why);
    for (size_t i = 0; i < n; i++) mx_tensor_release(&want[i]);
    mx_tensor_release(&logits[k]);
  }
  for (int k = 0; k <= STEPS; k++)
    for (size_t i = 0; i < n; i++) mx_tensor_release(&io[k][i]);
  free(io);
  free(logits);
  mx_graph_destroy(ref);
  mx_session_destroy(s);
}

Test(trace, json_with_host_and_stream_lanes) {
  mx_session_options so;
  mx_session_options_init(&so);
  so.streams = 2;
  so.executor = MX_EXECUTOR_TOPOLOGICAL;
  so.spec_cache_size = 0; /* the dynamic partitions' op launches are what this trace shows */
  mx_session *s;
  mx_error serr;
  cr_assert_eq(mx_session_create(&so, &s, &serr), MX_OK, "%s", serr.message);
  mx_graph *g;
  mx_error err;
  mx_llama_config cfg;
  mx_llama_config_default(&cfg);
  cr_assert_eq(mx_model_llama(&cfg, &g, &err), MX_OK);
  cr_assert_eq(mx_session_load_graph(s, g), MX_OK, "%s", mx_session_last_error(s));
  size_t n = mx_session_input_count(s);
  mx_tensor in[16] = {{0}}, out[16];
  cr_assert_eq(mx_tensor_alloc(MX_INT64, 2, (int64_t[]){1, 1}, &in[0]), MX_OK);
  for (size_t i = 1; i < n; i++)
    cr_assert_eq(
        mxs_random_tensor(MX_FLOAT32, 4, (int64_t[]){1, cfg.kv_heads, 3, cfg.hidden / cfg.heads}, i, &in[i]),
        MX_OK);
  cr_assert_eq(mx_session_trace_end(s, "/tmp/never.json"), MX_ERR_INVALID_ARGUMENT);
  cr_assert_eq(mx_session_trace_begin(s), MX_OK);
  for (int step = 0; step < 3; step++) {
    memset(out, 0, sizeof out);
    cr_assert_eq(mx_session_run(s, in, n, out, n), MX_OK, "%s", mx_session_last_error(s));
    for (size_t i = 0; i < n; i++) mx_tensor_release(&out[i]);
  }
  char path[] = "/tmp/mixrt-trace-XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  close(fd);
  cr_assert_eq(mx_session_trace_end(s, path), MX_OK, "%s", mx_session_last_error(s));
  char *text = mxt_read_text(path);
  cr_assert_not_null(text);
  char why[128];
  cr_assert(mxt_json_valid(text, why, sizeof why), "%s", why);
  cr_assert(strstr(text, "\"traceEvents\""));
  cr_assert(strstr(text, "{\"name\": \"host\"}"), "no host lane");
  cr_assert(strstr(text, "{\"name\": \"stream 0\"}") && strstr(text, "{\"name\": \"stream 1\"}"),
            "no stream lanes");
  cr_assert_geq(mxt_count(text, "\"name\": \"StaticModelExecute"), 3,
                "a static execute per step on the host lane");
  cr_assert_geq(mxt_count(text, "\"name\": \"static "), 3, "static executions on a stream lane");
  cr_assert_geq(mxt_count(text, "(Attention)"), 3 * (size_t)cfg.layers,
                "attention launches on a stream lane");
  cr_assert_geq(mxt_count(text, "\"cat\": \"device\""), 6);
  free(text);
  unlink(path);
  for (size_t i = 0; i < n; i++) mx_tensor_release(&in[i]);
  mx_session_stats last, total;
  cr_assert_eq(mx_session_get_stats(s, &last, &total), MX_OK);
  cr_assert_eq(total.steps, 3);
  cr_assert_eq(last.steps, 1);
  cr_assert_gt(last.kernels_run, 0);
  cr_assert_geq(total.static_executes, 3);
  cr_assert_eq(total.device_allocations, total.allocator_misses, "every miss is one device allocation");
  mx_session_destroy(s);
}

typedef struct busy_arg {
  mx_session *s;
  mx_tensor *x;
  _Atomic int *busy;
  _Atomic int *ok;
} busy_arg;

static void *hammer(void *arg) {
  busy_arg *b = arg;
  for (int i = 0; i < 200; i++) {
    mx_tensor y = {0};
    mx_status st = mx_session_run(b->s, b->x, 1, &y, 1);
    if (st == MX_ERR_BUSY && strstr(mx_session_last_error(b->s), "in use by another thread"))
      atomic_fetch_add(b->busy, 1);
    else if (st == MX_OK)
      atomic_fetch_add(b->ok, 1);
    mx_tensor_release(&y);
  }
  return NULL;
}

Test(session, two_threads_on_one_session_get_busy_not_corruption) {
  mx_session *s = mxs_new_session(1, MX_EXECUTOR_SEQUENTIAL, 4);
  mx_graph *g;
  mx_error err;
  cr_assert_eq(mx_model_encoder(NULL, &g, &err), MX_OK);
  cr_assert_eq(mx_session_load_graph(s, g), MX_OK);
  mx_tensor x;
  cr_assert_eq(mxs_random_tensor(MX_FLOAT32, 3, (int64_t[]){1, 8, 64}, 3, &x), MX_OK);
  _Atomic int busy = 0, ok = 0;
  busy_arg a = {s, &x, &busy, &ok};
  pthread_t t1, t2;
  pthread_create(&t1, NULL, hammer, &a);
  pthread_create(&t2, NULL, hammer, &a);
  pthread_join(t1, NULL);
  pthread_join(t2, NULL);
  cr_assert_eq(atomic_load(&busy) + atomic_load(&ok), 400, "every call either ran or was refused");
  cr_assert_gt(atomic_load(&ok), 0);
  mx_tensor_release(&x);
  mx_session_destroy(s);
}
