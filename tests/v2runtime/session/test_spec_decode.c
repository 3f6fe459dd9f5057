/* Shape specialization on a GPT-style decoder exported by torch.onnx.export (the zoo's gpt_kv:
 * input_ids [1, seq], past keys/values [1, 4, past_len, 16] per layer, every dim symbolic). A
 * prefill of 9 tokens then 64 decode steps, the presents fed back as the next pasts: how many
 * specializations it compiles, the share of the decode step's ops that run in static models,
 * and sampled steps equal to the reference interpreter.
 *
 * The model is exported by bench/zoo/export.py into the build directory (never into git):
 * MIXRT_ZOO_DIR names that directory (default: zoo/ of the working directory, then ../zoo/);
 * without the file the tests are skipped. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mixrt/graph.h"
#include "mixrt/onnx.h"
#include "v2runtime/session/session_support.h"

#define DECODE_LAYERS   3
#define DECODE_PASTS    (2 * DECODE_LAYERS)
#define DECODE_HEADS    4
#define DECODE_HEAD_DIM 16
#define DECODE_VOCAB    256

static bool zoo_model(char *path, size_t cap) {
  const char *env = getenv("MIXRT_ZOO_DIR");
  const char *dirs[] = {env, "zoo", "../zoo", "../../zoo"};
  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
    if (!dirs[i]) continue;
    snprintf(path, cap, "%s/gpt_kv.onnx", dirs[i]);
    if (access(path, R_OK) == 0) return true;
  }
  return false;
}

typedef struct decoder {
  mx_session *s;
  mx_graph *ref;
  mx_tensor pasts[DECODE_PASTS]; /* the cache the next step reads */
  int64_t past_len;
  uint64_t launches_per_decode; /* dynamic launches of the last decode step */
} decoder;

/* The split's own op count ("N ops in K static models, M ops in J dynamic runs") on stderr. */
static void print_split(void *user, mx_log_level level, const char *msg) {
  (void)user;
  (void)level;
  if (strstr(msg, "specialized without")) fprintf(stderr, "%s\n", msg);
}

static void open_decoder(decoder *d, uint32_t cache_size) {
  char path[512];
  if (!zoo_model(path, sizeof path))
    cr_skip_test(
        "zoo/gpt_kv.onnx not found (bench/zoo/export.py writes it; MIXRT_ZOO_DIR names its directory)");
  memset(d, 0, sizeof *d);
  mx_session_options o;
  mx_session_options_init(&o);
  o.device_options.fault_from_env = false;
  o.spec_cache_size = cache_size;
  o.log = print_split;
  mx_error err;
  cr_assert_eq(mx_session_create(&o, &d->s, &err), MX_OK, "%s", err.message);
  cr_assert_eq(mx_session_load_file(d->s, path), MX_OK, "%s", mx_session_last_error(d->s));
  cr_assert_eq(mx_onnx_load_file(path, &d->ref, &err), MX_OK, "%s", err.message);
  for (int i = 0; i < DECODE_PASTS; i++) {
    const int64_t dims[4] = {1, DECODE_HEADS, 0, DECODE_HEAD_DIM};
    cr_assert_eq(mxs_random_tensor(MX_FLOAT32, 4, dims, 1, &d->pasts[i]), MX_OK);
  }
}

static void close_decoder(decoder *d) {
  for (int i = 0; i < DECODE_PASTS; i++) mx_tensor_release(&d->pasts[i]);
  mx_graph_destroy(d->ref);
  mx_session_destroy(d->s);
}

/* One step over `seq` new tokens; the presents become the pasts. With check, the logits and
 * presents equal the reference interpreter's on the same inputs. */
static void decode_step(decoder *d, int64_t seq, uint64_t seed, bool check) {
  mx_tensor in[1 + DECODE_PASTS];
  cr_assert_eq(mxs_random_tensor(MX_INT64, 2, (int64_t[]){1, seq}, seed, &in[0]), MX_OK);
  for (int i = 0; i < DECODE_PASTS; i++) in[1 + i] = d->pasts[i];
  mx_tensor out[1 + DECODE_PASTS];
  memset(out, 0, sizeof out);
  cr_assert_eq(mx_session_run(d->s, in, 1 + DECODE_PASTS, out, 1 + DECODE_PASTS), MX_OK,
               "seq %lld past %lld: %s", (long long)seq, (long long)d->past_len, mx_session_last_error(d->s));
  cr_assert_eq(out[0].dims[1], seq);
  if (check) {
    mx_tensor want[1 + DECODE_PASTS];
    memset(want, 0, sizeof want);
    mx_error err;
    cr_assert_eq(mx_reference_run(d->ref, in, 1 + DECODE_PASTS, want, 1 + DECODE_PASTS, &err), MX_OK, "%s",
                 err.message);
    for (int i = 0; i < 1 + DECODE_PASTS; i++) {
      char why[256];
      cr_assert(mx_tensor_allclose(&out[i], &want[i], 1e-5, 1e-6, why, sizeof why),
                "past %lld, output %d: %s", (long long)d->past_len, i, why);
      mx_tensor_release(&want[i]);
    }
  }
  mx_tensor_release(&in[0]);
  mx_tensor_release(&out[0]);
  for (int i = 0; i < DECODE_PASTS; i++) {
    mx_tensor_release(&d->pasts[i]);
    d->pasts[i] = out[1 + i];
  }
  d->past_len += seq;
  mx_session_stats last;
  cr_assert_eq(mx_session_get_stats(d->s, &last, NULL), MX_OK);
  d->launches_per_decode = last.dynamic_launches;
}

/* Prefill 9 tokens, then 64 decode steps (every 16th checked against the reference). */
static void prefill_and_decode(decoder *d) {
  decode_step(d, 9, 1000, true);
  for (int i = 0; i < 64; i++) decode_step(d, 1, 2000 + (uint64_t)i, i % 16 == 15);
}

/* Two specializations (seq 9 and seq 1); past_len's new value every step is the split's job. */
Test(session_spec_decode, prefill_then_decode_compiles_two) {
  decoder d;
  open_decoder(&d, 8);
  prefill_and_decode(&d);
  mx_session_stats t;
  cr_assert_eq(mx_session_get_stats(d.s, NULL, &t), MX_OK);
  cr_assert_eq(t.spec_compiles, 2, "compiles %llu, misses %llu, hits %llu, fallbacks %llu",
               (unsigned long long)t.spec_compiles, (unsigned long long)t.spec_misses,
               (unsigned long long)t.spec_hits, (unsigned long long)t.spec_fallbacks);
  close_decoder(&d);
}

/* At seq 1 at least 85 % of the ops run in static models: the dynamic launches of a decode
 * step against those of the same step with specialization off (every op dynamic). What stays
 * dynamic is what has dims over past_len: the Attention of each layer (the cache Concats are
 * its present outputs) and the causal mask built from the key count (Range, LessOrEqual). */
Test(session_spec_decode, decode_step_mostly_static) {
  decoder off, on;
  open_decoder(&off, 0);
  prefill_and_decode(&off);
  open_decoder(&on, 8);
  prefill_and_decode(&on);
  double share = 1.0 - (double)on.launches_per_decode / (double)off.launches_per_decode;
  fprintf(stderr, "decode step: %llu dynamic launches specialized, %llu without: %.1f %% static\n",
          (unsigned long long)on.launches_per_decode, (unsigned long long)off.launches_per_decode,
          100.0 * share);
  cr_assert_geq(share, 0.85, "%.3f", share);
  close_decoder(&on);
  close_decoder(&off);
}
