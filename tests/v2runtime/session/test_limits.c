/* Memory limits of a step: a step whose tensors could not fit (the session's memory_limit, the
 * device's, or the available physical memory) is refused before anything is allocated, at
 * once, with the value and its size named; the session then runs steps that fit as before. */
#include <criterion/criterion.h>
#include <string.h>
#include <time.h>

#include "mixrt/models.h"
#include "v2runtime/session/session_support.h"

enum { N_IO = 5 }; /* the default llama: token ids, then past key and value of 2 layers */

/* A session of the default llama decode step with these options (NULL: defaults). */
static mx_session *llama_session(const mx_session_options *o) {
  mx_llama_config cfg;
  mx_llama_config_default(&cfg);
  mx_graph *g;
  mx_error err;
  cr_assert_eq(mx_model_llama(&cfg, &g, &err), MX_OK, "%s", err.message);
  mx_session *s;
  cr_assert_eq(mx_session_create(o, &s, &err), MX_OK, "%s", err.message);
  cr_assert_eq(mx_session_load_graph(s, g), MX_OK, "%s", mx_session_last_error(s));
  cr_assert_eq(mx_session_input_count(s), N_IO);
  return s;
}

/* Input descriptions (no data) of a step at this past length. */
static void describe_inputs(mx_tensor *in, int64_t past) {
  memset(in, 0, N_IO * sizeof *in);
  in[0].dtype = MX_INT64;
  in[0].rank = 2;
  in[0].dims[0] = in[0].dims[1] = 1;
  for (int i = 1; i < N_IO; i++) {
    in[i].dtype = MX_FLOAT32;
    in[i].rank = 4;
    int64_t d[4] = {1, 2, past, 16};
    memcpy(in[i].dims, d, sizeof d);
  }
}

/* Host inputs with data at this past length. */
static void make_inputs(mx_tensor *in, int64_t past) {
  cr_assert_eq(mx_tensor_alloc(MX_INT64, 2, (int64_t[]){1, 1}, &in[0]), MX_OK);
  ((int64_t *)in[0].data)[0] = 3;
  for (int i = 1; i < N_IO; i++)
    cr_assert_eq(mxs_random_tensor(MX_FLOAT32, 4, (int64_t[]){1, 2, past, 16}, 5 + (uint64_t)i, &in[i]),
                 MX_OK);
}

static void release_all(mx_tensor *t) {
  for (int i = 0; i < N_IO; i++) mx_tensor_release(&t[i]);
}

static double seconds_since(const struct timespec *t0) {
  struct timespec t1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) * 1e-9;
}

Test(session_limits, default_limit_is_the_available_memory) {
  mx_session *s = llama_session(NULL);
  uint64_t limit = mx_session_memory_limit(s);
  cr_assert_gt(limit, 0);
  cr_assert_eq(mx_session_memory_limit(NULL), 0);
  mx_tensor in[N_IO];
  describe_inputs(in, 16);
  cr_assert_eq(mx_session_check_memory(s, in, N_IO), MX_OK, "%s", mx_session_last_error(s));
  mx_session_destroy(s);
}

/* The refusal of `mixrt run --random --shape past_len=100000000`: 4 pasts of 11.9 GiB and
 * presents as large, which no test machine holds 95 GiB for; named and quick. */
Test(session_limits, huge_past_refused_at_once) {
  mx_session *s = llama_session(NULL);
  if (mx_session_memory_limit(s) > 90ull << 30) cr_skip_test("more than 90 GiB of memory available");
  mx_tensor in[N_IO];
  describe_inputs(in, 100000000);
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  cr_assert_eq(mx_session_check_memory(s, in, N_IO), MX_ERR_DEVICE_OOM);
  cr_assert_lt(seconds_since(&t0), 0.5);
  const char *m = mx_session_last_error(s);
  cr_assert(strstr(m, "past_len = 100000000"), "%s", m);
  cr_assert(strstr(m, "present_key_0' [1, 2, past_len + 1, 16] float32, 11.9 GiB (12800000128 bytes)"), "%s",
            m);
  cr_assert(strstr(m, "the available physical memory"), "%s", m);
  mx_session_destroy(s);
}

/* One tensor beyond any memory, and one whose size overflows 64 bits. */
Test(session_limits, single_tensor_refused) {
  mx_session *s = llama_session(NULL);
  mx_tensor in[N_IO];
  describe_inputs(in, 1000000000000000);
  cr_assert_eq(mx_session_check_memory(s, in, N_IO), MX_ERR_DEVICE_OOM);
  const char *m = mx_session_last_error(s);
  cr_assert(strstr(m, "[1, 2, past_len, 16] float32 would take 113.7 PiB (128000000000000000 bytes)"), "%s",
            m);
  describe_inputs(in, INT64_MAX / 4);
  cr_assert_eq(mx_session_check_memory(s, in, N_IO), MX_ERR_DEVICE_OOM);
  cr_assert(strstr(mx_session_last_error(s), "more than 2^63 bytes"), "%s", mx_session_last_error(s));
  mx_session_destroy(s);
}

/* The session's cap: a real step over it fails before running, the outputs stay unallocated,
 * and steps that fit run afterwards. */
Test(session_limits, session_cap_refuses_run_then_recovers) {
  mx_session_options o;
  mx_session_options_init(&o);
  o.memory_limit = 1000000; /* past 1000: inputs 0.98 MiB, outputs as much */
  mx_session *s = llama_session(&o);
  cr_assert_eq(mx_session_memory_limit(s), 1000000);
  mx_tensor in[N_IO], out[N_IO];
  make_inputs(in, 1000);
  memset(out, 0, sizeof out);
  cr_assert_eq(mx_session_run(s, in, N_IO, out, N_IO), MX_ERR_DEVICE_OOM);
  const char *m = mx_session_last_error(s);
  cr_assert(strstr(m, "the step's inputs take"), "%s", m);
  cr_assert(strstr(m, "with past_len = 1000"), "%s", m);
  cr_assert(strstr(m, "the session's memory_limit, 976.6 KiB (1000000 bytes)"), "%s", m);
  for (int i = 0; i < N_IO; i++) cr_assert_null(out[i].data);
  release_all(in);
  make_inputs(in, 100);
  cr_assert_eq(mx_session_run(s, in, N_IO, out, N_IO), MX_OK, "%s", mx_session_last_error(s));
  cr_assert_eq(out[1].dims[2], 101);
  release_all(out);
  release_all(in);
  mx_session_destroy(s);
}

/* The device's memory_limit caps the session's. */
Test(session_limits, device_limit_caps_the_session) {
  mx_session_options o;
  mx_session_options_init(&o);
  o.memory_limit = 1u << 30;
  o.device_options.memory_limit = 4u << 20;
  mx_session *s = llama_session(&o);
  cr_assert_eq(mx_session_memory_limit(s), 4u << 20);
  mx_tensor in[N_IO];
  describe_inputs(in, 10000);
  cr_assert_eq(mx_session_check_memory(s, in, N_IO), MX_ERR_DEVICE_OOM);
  cr_assert(strstr(mx_session_last_error(s), "the device's memory_limit, 4.0 MiB"), "%s",
            mx_session_last_error(s));
  describe_inputs(in, 1000);
  cr_assert_eq(mx_session_check_memory(s, in, N_IO), MX_OK, "%s", mx_session_last_error(s));
  mx_session_destroy(s);
}

/* Inputs matched by name in any order, unknown names refused, as mx_session_run does. */
Test(session_limits, check_matches_names) {
  mx_session *s = llama_session(NULL);
  mx_tensor in[N_IO], rev[N_IO];
  describe_inputs(in, 100000000);
  for (int i = 0; i < N_IO; i++) {
    mx_io_info info;
    cr_assert(mx_session_input_info(s, (size_t)i, &info));
    in[i].name = info.name;
  }
  for (int i = 0; i < N_IO; i++) rev[i] = in[N_IO - 1 - i];
  mx_status st = mx_session_check_memory(s, rev, N_IO);
  if (mx_session_memory_limit(s) <= 90ull << 30)
    cr_assert_eq(st, MX_ERR_DEVICE_OOM, "%s", mx_session_last_error(s));
  rev[2].name = "no_such_input";
  cr_assert_eq(mx_session_check_memory(s, rev, N_IO), MX_ERR_NOT_FOUND);
  cr_assert_eq(mx_session_check_memory(s, rev, N_IO - 1), MX_ERR_INVALID_ARGUMENT);
  mx_session_destroy(s);
}
