/* Shape specialization and binding states appended in place, together: a decoder whose key/value
 * caches live in padded buffers still gets split specializations (the Attention reading and
 * appending the caches runs dynamically with the padding as strides, the projections and the MLP
 * in static models). Each step's logits equal those of a second session running the copying
 * path (every present fed back through mx_session_run) bit for bit, and the caches too now and
 * then; the torch GPT's also equal the reference interpreter's now and then.
 *
 * The torch GPT is the zoo's gpt_kv (bench/zoo/export.py writes it into the build directory;
 * MIXRT_ZOO_DIR names that directory, default zoo/ of the working directory, then ../zoo/;
 * without the file its test is skipped); the llama is mixrt's own (mx_model_llama). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mixrt/binding.h"
#include "mixrt/graph.h"
#include "mixrt/models.h"
#include "mixrt/onnx.h"
#include "v2runtime/session/session_support.h"

#define MAX_IO 16

/* One decoder's geometry: ids [1, seq] then n_io - 1 caches [1, heads, past, head_dim]. */
typedef struct geometry {
  int n_io;
  int64_t heads, head_dim;
} geometry;

static bool zoo_gpt(char *path, size_t cap) {
  const char *env = getenv("MIXRT_ZOO_DIR");
  const char *dirs[] = {env, "zoo", "../zoo", "../../zoo"};
  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
    if (!dirs[i]) continue;
    snprintf(path, cap, "%s/gpt_kv.onnx", dirs[i]);
    if (access(path, R_OK) == 0) return true;
  }
  return false;
}

/* The split's op counts ("N ops in K static models, M ops in J dynamic runs") on stderr. */
static void print_split(void *user, mx_log_level level, const char *msg) {
  (void)user;
  (void)level;
  if (strstr(msg, "specialized without")) fprintf(stderr, "%s\n", msg);
}

static mx_session *session_on(uint32_t streams, mx_executor_kind ex) {
  mx_session_options o;
  mx_session_options_init(&o);
  o.streams = streams;
  o.executor = ex;
  o.device_options.fault_from_env = false;
  o.log = print_split;
  mx_session *s;
  mx_error err;
  cr_assert_eq(mx_session_create(&o, &s, &err), MX_OK, "%s", err.message);
  return s;
}

static mx_session *new_session(void) { return session_on(1, MX_EXECUTOR_SEQUENTIAL); }

static int64_t argmax_last(const mx_tensor *t) {
  int64_t vocab = t->dims[t->rank - 1], n = 0;
  mx_tensor_numel(t, &n);
  const float *f = (const float *)t->data + (n - vocab);
  int64_t best = 0;
  for (int64_t k = 1; k < vocab; k++)
    if (f[k] > f[best]) best = k;
  return best;
}

/* The copying path: host caches, each step's presents fed back. */
typedef struct copying {
  mx_session *s;
  int n_io;
  mx_tensor in[MAX_IO], out[MAX_IO];
} copying;

static void copying_init(copying *c, mx_session *s, const geometry *g) {
  memset(c, 0, sizeof *c);
  c->s = s;
  c->n_io = g->n_io;
  for (int i = 1; i < g->n_io; i++)
    cr_assert_eq(mx_tensor_alloc(MX_FLOAT32, 4, (int64_t[]){1, g->heads, 0, g->head_dim}, &c->in[i]), MX_OK);
}

static void copying_step(copying *c, const mx_tensor *ids) {
  mx_tensor_release(&c->in[0]);
  cr_assert_eq(mx_tensor_alloc(MX_INT64, ids->rank, ids->dims, &c->in[0]), MX_OK);
  memcpy(c->in[0].data, ids->data, (size_t)ids->dims[1] * sizeof(int64_t));
  mx_tensor_release(&c->out[0]);
  memset(c->out, 0, sizeof c->out);
  cr_assert_eq(mx_session_run(c->s, c->in, (size_t)c->n_io, c->out, (size_t)c->n_io), MX_OK, "%s",
               mx_session_last_error(c->s));
}

/* After a step's checks: the presents become the pasts. */
static void copying_advance(copying *c) {
  for (int i = 1; i < c->n_io; i++) {
    mx_tensor_release(&c->in[i]);
    c->in[i] = c->out[i];
    c->in[i].name = NULL;
    memset(&c->out[i], 0, sizeof c->out[i]);
  }
}

static void copying_free(copying *c) {
  for (int i = 0; i < c->n_io; i++) {
    mx_tensor_release(&c->in[i]);
    mx_tensor_release(&c->out[i]);
  }
}

/* Every state's rows against the copying path's presents of the same step, bit for bit. */
static void same_cache(mx_binding *b, mx_session *s, const copying *c) {
  for (int j = 1; j < c->n_io; j++) {
    const mx_tensor *v = mx_binding_output(b, (size_t)j);
    cr_assert_not_null(v);
    mx_tensor h;
    cr_assert_eq(mx_tensor_alloc(v->dtype, v->rank, v->dims, &h), MX_OK);
    cr_assert_eq(mx_binding_read_output(b, (size_t)j, &h), MX_OK, "%s", mx_session_last_error(s));
    char why[256];
    cr_assert(mxs_same(&h, &c->out[j], why, sizeof why), "state %d: %s", j, why);
    mx_tensor_release(&h);
  }
}

/* What a run of decode steps measured on the binding's session. */
typedef struct decode_figures {
  uint64_t hits, compiles;     /* over the whole run */
  uint64_t launches, executes; /* of the last step */
  size_t appended;
} decode_figures;

/* A prefill of `prefill` tokens then `steps` single-token steps through a binding with appended
 * states on session s and through the copying path on session ref_s, compared at every step;
 * with ref (the model's graph), every 16th step also against the reference interpreter. */
static void decode(mx_session *s, mx_session *ref_s, const geometry *g, mx_graph *ref, int64_t prefill,
                   int steps, int64_t capacity, decode_figures *fig) {
  mx_binding *b;
  cr_assert_eq(mx_binding_create(s, &b), MX_OK, "%s", mx_session_last_error(s));
  cr_assert_eq(mx_binding_set_state_append(b, true), MX_OK);
  size_t pairs = 0;
  cr_assert_eq(mx_binding_pair_states(b, 2, capacity, &pairs), MX_OK, "%s", mx_session_last_error(s));
  cr_assert_eq(pairs, (size_t)(g->n_io - 1));
  mx_tensor ids;
  cr_assert_eq(mx_tensor_alloc(MX_INT64, 2, (int64_t[]){1, prefill}, &ids), MX_OK);
  for (int64_t k = 0; k < prefill; k++) ((int64_t *)ids.data)[k] = 1 + 7 * k % 50;
  cr_assert_eq(mx_binding_bind_input(b, "input_ids", &ids), MX_OK, "%s", mx_session_last_error(s));
  cr_assert_eq(mx_binding_bind_output_alloc(b, "logits", MX_HOST), MX_OK);
  size_t ids_at = 0;
  while (mx_binding_input_is_state(b, ids_at)) ids_at++;
  copying c;
  copying_init(&c, ref_s, g);
  mx_session_stats total0;
  cr_assert_eq(mx_session_get_stats(s, NULL, &total0), MX_OK);
  for (int step = 0; step <= steps; step++) {
    if (step == 1) { /* one token per step from here */
      mx_tensor_release(&ids);
      cr_assert_eq(mx_tensor_alloc(MX_INT64, 2, (int64_t[]){1, 1}, &ids), MX_OK);
      ((int64_t *)ids.data)[0] = argmax_last(&c.out[0]);
      cr_assert_eq(mx_binding_set_input(b, ids_at, &ids), MX_OK, "%s", mx_session_last_error(s));
    }
    cr_assert_eq(mx_session_run_binding(s, b), MX_OK, "step %d: %s", step, mx_session_last_error(s));
    copying_step(&c, &ids);
    char why[256];
    cr_assert(mxs_same(mx_binding_output(b, 0), &c.out[0], why, sizeof why), "step %d: %s", step, why);
    if (step % 16 == 15 || step == steps) same_cache(b, s, &c);
    if (ref && step % 16 == 15) {
      mx_tensor want[MAX_IO];
      memset(want, 0, sizeof want);
      mx_error err;
      cr_assert_eq(mx_reference_run(ref, c.in, (size_t)g->n_io, want, (size_t)g->n_io, &err), MX_OK, "%s",
                   err.message);
      for (int i = 0; i < g->n_io; i++) {
        cr_assert(mx_tensor_allclose(&c.out[i], &want[i], 1e-5, 1e-6, why, sizeof why),
                  "step %d, output %d: %s", step, i, why);
        mx_tensor_release(&want[i]);
      }
    }
    ((int64_t *)ids.data)[0] = argmax_last(&c.out[0]);
    copying_advance(&c);
  }
  mx_session_stats last, total;
  cr_assert_eq(mx_session_get_stats(s, &last, &total), MX_OK);
  fig->hits = total.spec_hits - total0.spec_hits;
  fig->compiles = total.spec_compiles - total0.spec_compiles;
  fig->launches = last.dynamic_launches;
  fig->executes = last.static_executes;
  fig->appended = mx_binding_state_appended(b);
  cr_assert_eq(mx_binding_state_length(b), prefill + steps);
  fprintf(stderr, "decode step: %llu static executions, %llu dynamic launches; %llu hits, %llu compiles\n",
          (unsigned long long)fig->executes, (unsigned long long)fig->launches, (unsigned long long)fig->hits,
          (unsigned long long)fig->compiles);
  copying_free(&c);
  mx_binding_destroy(b);
  mx_tensor_release(&ids);
}

/* The torch GPT: prefill 9, 64 decode steps, the caches growing from 16 rows (two moves). The
 * decode step is served by the split (the projections and MLP static, the three Attentions and
 * the mask dynamic), not op by op (51 launches). */
Test(spec_state, zoo_gpt_appended_and_specialized, .timeout = 300) {
  char path[512];
  if (!zoo_gpt(path, sizeof path))
    cr_skip_test(
        "zoo/gpt_kv.onnx not found (bench/zoo/export.py writes it; MIXRT_ZOO_DIR names its directory)");
  mx_session *s = new_session(), *ref_s = new_session();
  cr_assert_eq(mx_session_load_file(s, path), MX_OK, "%s", mx_session_last_error(s));
  cr_assert_eq(mx_session_load_file(ref_s, path), MX_OK, "%s", mx_session_last_error(ref_s));
  mx_graph *ref;
  mx_error err;
  cr_assert_eq(mx_onnx_load_file(path, &ref, &err), MX_OK, "%s", err.message);
  geometry g = {7, 4, 16};
  decode_figures fig;
  decode(s, ref_s, &g, ref, 9, 64, 16, &fig);
  cr_assert_eq(fig.appended, 6, "the six caches append in place");
  cr_assert_gt(fig.hits, 50, "the decode steps are served by a specialization");
  cr_assert_leq(fig.compiles, 3, "seq 9, then seq 1 at one past_len, then the split over past_len");
  cr_assert_gt(fig.executes, 0, "static models run in the decode step");
  cr_assert_lt(fig.launches, 20, "the decode step no longer runs op by op");
  /* A second binding on the session: its caches append too, served by the same splits. */
  decode(s, ref_s, &g, NULL, 9, 20, 64, &fig);
  cr_assert_eq(fig.appended, 6);
  cr_assert_eq(fig.compiles, 0);
  cr_assert_gt(fig.hits, 15);
  mx_graph_destroy(ref);
  mx_session_destroy(s);
  mx_session_destroy(ref_s);
}

/* The same on two streams with the multi-thread executor: the split's runs on the partition's
 * stream, the caches growing from 8 rows. */
Test(spec_state, zoo_gpt_two_streams_multi_thread, .timeout = 300) {
  char path[512];
  if (!zoo_gpt(path, sizeof path))
    cr_skip_test(
        "zoo/gpt_kv.onnx not found (bench/zoo/export.py writes it; MIXRT_ZOO_DIR names its directory)");
  mx_session *s = session_on(2, MX_EXECUTOR_MULTI_THREAD), *ref_s = new_session();
  cr_assert_eq(mx_session_load_file(s, path), MX_OK, "%s", mx_session_last_error(s));
  cr_assert_eq(mx_session_load_file(ref_s, path), MX_OK, "%s", mx_session_last_error(ref_s));
  geometry g = {7, 4, 16};
  decode_figures fig;
  decode(s, ref_s, &g, NULL, 5, 40, 8, &fig);
  cr_assert_eq(fig.appended, 6);
  cr_assert_gt(fig.hits, 30);
  mx_session_destroy(s);
  mx_session_destroy(ref_s);
}

static mx_session *llama_session(void) {
  mx_llama_config cfg;
  mx_llama_config_default(&cfg);
  mx_graph *g;
  mx_error err;
  cr_assert_eq(mx_model_llama(&cfg, &g, &err), MX_OK, "%s", err.message);
  mx_session *s = new_session();
  cr_assert_eq(mx_session_load_graph(s, g), MX_OK, "%s", mx_session_last_error(s));
  return s;
}

/* mixrt's llama: one token at a time for 300 steps, the caches growing from 32 rows (four
 * moves); the binding equal to the copying path at every step. Its dynamic partitions hold the
 * Attention alone (the rest are static partitions already): with the caches appended there is
 * nothing a split could make static, so they stay dynamic without compiling anything. */
Test(spec_state, llama_appended_attention_only, .timeout = 300) {
  mx_session *s = llama_session(), *ref_s = llama_session();
  geometry g = {5, 2, 16};
  decode_figures fig;
  decode(s, ref_s, &g, NULL, 1, 300, 32, &fig);
  cr_assert_eq(fig.appended, 4, "the four caches append in place");
  cr_assert_eq(fig.compiles, 0, "no split of the Attention alone");
  cr_assert_eq(fig.hits, 0);
  cr_assert_eq(fig.executes, 3, "the static partitions");
  mx_session_destroy(s);
  mx_session_destroy(ref_s);
}

/* A session that specialized before the binding's first step keeps the copying path (its
 * specializations read the caches packed), and still agrees with mx_session_run. */
Test(spec_state, specialized_before_keeps_copying, .timeout = 300) {
  mx_session *s = llama_session(), *ref_s = llama_session();
  geometry g = {5, 2, 16};
  copying warm;
  copying_init(&warm, s, &g);
  mx_tensor ids;
  cr_assert_eq(mx_tensor_alloc(MX_INT64, 2, (int64_t[]){1, 1}, &ids), MX_OK);
  ((int64_t *)ids.data)[0] = 5;
  copying_step(&warm, &ids);
  copying_free(&warm);
  mx_tensor_release(&ids);
  mx_session_stats total;
  cr_assert_eq(mx_session_get_stats(s, NULL, &total), MX_OK);
  cr_assert_gt(total.spec_compiles, 0);
  decode_figures fig;
  decode(s, ref_s, &g, NULL, 1, 40, 16, &fig);
  cr_assert_eq(fig.appended, 0, "the states keep the copying path");
  mx_session_destroy(s);
  mx_session_destroy(ref_s);
}
