/* Index-style kernel failures carry their cause into the session's message: the value, where
 * it stands and the bound (a token id past the vocabulary, a position past the rotary table),
 * whichever way the failing op runs (static model, dynamic op, reference interpreter), and the
 * session runs the next good step as before. */
#include <criterion/criterion.h>
#include <string.h>

#include "mixrt/models.h"
#include "v2runtime/session/session_support.h"

enum { N_IO = 5 }; /* the default llama: token ids, then past key and value of 2 layers */

static const char gather_cause[] =
    "Gather: index 100000 at position 0 of the indices is out of range [-128, 128) of data axis 0";

static mx_graph *llama(void) {
  mx_llama_config cfg;
  mx_llama_config_default(&cfg);
  mx_graph *g;
  mx_error err;
  cr_assert_eq(mx_model_llama(&cfg, &g, &err), MX_OK, "%s", err.message);
  return g;
}

static void make_inputs(mx_tensor *in, int64_t token, int64_t past) {
  cr_assert_eq(mx_tensor_alloc(MX_INT64, 2, (int64_t[]){1, 1}, &in[0]), MX_OK);
  ((int64_t *)in[0].data)[0] = token;
  for (int i = 1; i < N_IO; i++)
    cr_assert_eq(mxs_random_tensor(MX_FLOAT32, 4, (int64_t[]){1, 2, past, 16}, 9 + (uint64_t)i, &in[i]),
                 MX_OK);
}

static void release_all(mx_tensor *t) {
  for (int i = 0; i < N_IO; i++) mx_tensor_release(&t[i]);
}

/* Runs one failing step (expects `cause` in the message) then a good one. */
static void fails_with_cause(mx_session *s, int64_t token, int64_t past, const char *node,
                             const char *cause) {
  mx_tensor in[N_IO], out[N_IO];
  memset(out, 0, sizeof out);
  make_inputs(in, token, past);
  cr_assert_neq(mx_session_run(s, in, N_IO, out, N_IO), MX_OK);
  const char *m = mx_session_last_error(s);
  cr_assert(strstr(m, node), "%s", m);
  cr_assert(strstr(m, cause), "%s", m);
  for (int i = 0; i < N_IO; i++) cr_assert_null(out[i].data);
  release_all(in);
  make_inputs(in, 5, 4);
  cr_assert_eq(mx_session_run(s, in, N_IO, out, N_IO), MX_OK, "%s", mx_session_last_error(s));
  release_all(out);
  release_all(in);
}

/* Static partitions (default), everything dynamic, and every cluster static. */
Test(session_kernel_causes, out_of_range_token) {
  const int64_t min_ops[] = {4, -1, 0};
  for (size_t k = 0; k < sizeof min_ops / sizeof min_ops[0]; k++) {
    mx_session *s = mxs_new_session(1, MX_EXECUTOR_SEQUENTIAL, min_ops[k]);
    cr_assert_eq(mx_session_load_graph(s, llama()), MX_OK, "%s", mx_session_last_error(s));
    fails_with_cause(s, 100000, 3, "'embed'", gather_cause);
    mx_session_destroy(s);
  }
}

Test(session_kernel_causes, position_past_the_rotary_table) {
  const int64_t min_ops[] = {4, -1};
  for (size_t k = 0; k < sizeof min_ops / sizeof min_ops[0]; k++) {
    mx_session *s = mxs_new_session(1, MX_EXECUTOR_SEQUENTIAL, min_ops[k]);
    cr_assert_eq(mx_session_load_graph(s, llama()), MX_OK, "%s", mx_session_last_error(s));
    fails_with_cause(
        s, 5, 5000, "q_rotary'",
        "RotaryEmbedding: position id 5000 (batch 0, token 0) is out of the cos/sin caches' range "
        "[0, 2048)");
    mx_session_destroy(s);
  }
}

/* Several streams and the multi-thread executor: the cause is reported by the worker that ran
 * the kernel. */
Test(session_kernel_causes, other_streams_and_executors) {
  mx_session *s = mxs_new_session(2, MX_EXECUTOR_MULTI_THREAD, 4);
  cr_assert_eq(mx_session_load_graph(s, llama()), MX_OK, "%s", mx_session_last_error(s));
  fails_with_cause(s, 100000, 3, "'embed'", gather_cause);
  fails_with_cause(s, -129, 3, "'embed'", "Gather: index -129 at position 0");
  mx_session_destroy(s);
}

/* The reference interpreter names the cause too (its own check of the indices). */
Test(session_kernel_causes, reference_interpreter) {
  mx_graph *g = llama();
  mx_tensor in[N_IO], out[N_IO];
  memset(out, 0, sizeof out);
  make_inputs(in, 100000, 3);
  for (int i = 0; i < N_IO; i++) in[i].name = NULL;
  mx_error err;
  cr_assert_neq(mx_reference_run(g, in, N_IO, out, N_IO, &err), MX_OK);
  cr_assert(strstr(err.message, "'embed'") && strstr(err.message, "100000") && strstr(err.message, "128"),
            "%s", err.message);
  release_all(in);
  mx_graph_destroy(g);
}
