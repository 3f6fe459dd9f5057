/* The recommended decode loop of a framework adapter: a binding (include/mixrt/binding.h) with the
 * KV cache kept by the session as persistent state. Inputs and outputs are bound once by name;
 * each step only writes the new token id and runs; the cache never leaves the device and no
 * step allocates while it fits its capacity.
 *
 * For comparison the same greedy decode also runs the copying way (every present handed back
 * to the caller and fed in again as the next past); the program prints the tokens of both and
 * fails when they differ.
 *
 *   decode_state [STEPS]     (default 8)
 *
 * Built against an installed mixrt with
 *   cc -std=c11 decode_state.c $(pkg-config --cflags --libs mixrt) -o decode_state
 * (the install_consumer test does exactly that, then runs it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mixrt/binding.h"
#include "mixrt/mixrt.h"

#define MAX_IO 64

static int fail(const char *what, const char *message) {
  fprintf(stderr, "decode_state: %s: %s\n", what, message);
  return 1;
}

static int64_t argmax(const mx_tensor *logits) {
  int64_t n = 0, best = 0;
  mx_tensor_numel(logits, &n);
  const float *f = logits->data;
  for (int64_t k = 1; k < n; k++)
    if (f[k] > f[best]) best = k;
  return best;
}

/* Greedy decoding with a binding and state: tokens[0 .. steps). */
static int decode_with_state(mx_session *s, long steps, int64_t *tokens) {
  mx_binding *b = NULL;
  mx_tensor ids;
  if (mx_tensor_alloc(MX_INT64, 2, (const int64_t[]){1, 1}, &ids) != MX_OK)
    return fail("inputs", "out of memory");
  int rc = 0;
  size_t pairs = 0;
  /* 1. Bind once: the cache pairs (past_key_<i> <- present_key_<i>, ...) along axis 2 with room
   *    for 64 rows (it grows x2 past that), the token ids from a host tensor, the logits into a
   *    host buffer the binding allocates and reuses. */
  if (mx_binding_create(s, &b) != MX_OK || mx_binding_pair_states(b, 2, 64, &pairs) != MX_OK ||
      mx_binding_bind_input(b, "input_ids", &ids) != MX_OK ||
      mx_binding_bind_output_alloc(b, "logits", MX_HOST) != MX_OK) {
    rc = fail("binding", mx_session_last_error(s));
    goto done;
  }
  const mx_tensor *logits = mx_binding_output(b, (size_t)mx_binding_output_index(b, "logits"));
  printf("binding: %zu cache pairs kept as state\n", pairs);
  /* 2. Each step: write the token, run, read the logits. */
  int64_t token = 1;
  for (long step = 0; step < steps; step++) {
    ((int64_t *)ids.data)[0] = token;
    if (mx_session_run_binding(s, b) != MX_OK) {
      rc = fail("run", mx_session_last_error(s));
      goto done;
    }
    tokens[step] = token = argmax(logits);
  }
  printf("state: %lld rows held, room for %lld\n", (long long)mx_binding_state_length(b),
         (long long)mx_binding_state_capacity(b));
  /* 3. A new prompt: mx_binding_reset(b); a rejected speculated token: mx_binding_truncate. */
done:
  mx_binding_destroy(b); /* before the session */
  mx_tensor_release(&ids);
  return rc;
}

/* The same decoding the copying way: every output handed back, the presents fed in again. */
static int decode_copying(mx_session *s, long steps, int64_t *tokens) {
  const size_t n_io = mx_session_input_count(s);
  if (n_io > MAX_IO || n_io != mx_session_output_count(s))
    return fail("model", "unexpected inputs or outputs");
  mx_tensor in[MAX_IO], out[MAX_IO];
  memset(in, 0, sizeof in);
  int rc = 0;
  mx_status st = mx_tensor_alloc(MX_INT64, 2, (const int64_t[]){1, 1}, &in[0]);
  for (size_t i = 1; i < n_io && st == MX_OK; i++) {
    mx_io_info info;
    mx_session_input_info(s, i, &info);
    int64_t dims[4];
    for (int32_t k = 0; k < 4; k++) {
      mx_io_dim d;
      mx_session_io_dim(s, false, i, k, &d);
      dims[k] = d.kind == MX_IO_DIM_CONCRETE ? d.value : 0; /* past_len: empty at first */
    }
    st = mx_tensor_alloc(info.dtype, 4, dims, &in[i]);
  }
  if (st != MX_OK) {
    rc = fail("inputs", mx_status_string(st));
    goto done;
  }
  int64_t token = 1;
  for (long step = 0; step < steps; step++) {
    ((int64_t *)in[0].data)[0] = token;
    memset(out, 0, sizeof out);
    if (mx_session_run(s, in, n_io, out, n_io) != MX_OK) {
      rc = fail("run", mx_session_last_error(s));
      goto done;
    }
    tokens[step] = token = argmax(&out[0]);
    mx_tensor_release(&out[0]);
    for (size_t i = 1; i < n_io; i++) {
      mx_tensor_release(&in[i]);
      in[i] = out[i];
      in[i].name = NULL;
    }
  }
done:
  for (size_t i = 0; i < n_io && i < MAX_IO; i++) mx_tensor_release(&in[i]);
  return rc;
}

int main(int argc, char **argv) {
  long steps = argc > 1 ? strtol(argv[1], NULL, 10) : 8;
  if (steps < 1 || steps > 2000) return fail("usage", "decode_state [STEPS in 1..2000]");
  mx_llama_config cfg;
  mx_llama_config_default(&cfg);
  mx_error err;
  mx_graph *g = NULL;
  if (mx_model_llama(&cfg, &g, &err) != MX_OK) return fail("model", err.message);
  mx_session_options o;
  mx_session_options_init(&o);
  mx_session *s = NULL;
  if (mx_session_create(&o, &s, &err) != MX_OK) {
    mx_graph_destroy(g);
    return fail("session", err.message);
  }
  if (mx_session_load_graph(s, g) != MX_OK) {
    int rc = fail("load", mx_session_last_error(s));
    mx_session_destroy(s);
    return rc;
  }
  int64_t *with_state = calloc((size_t)steps, sizeof *with_state);
  int64_t *copying = calloc((size_t)steps, sizeof *copying);
  int rc = !with_state || !copying ? fail("tokens", "out of memory") : 0;
  if (!rc) rc = decode_with_state(s, steps, with_state);
  if (!rc) rc = decode_copying(s, steps, copying);
  if (!rc) {
    printf("tokens:");
    for (long k = 0; k < steps; k++) printf(" %lld", (long long)with_state[k]);
    printf("\n");
    if (memcmp(with_state, copying, (size_t)steps * sizeof *copying) != 0)
      rc = fail("check", "the state path and the copying path gave different tokens");
    else
      printf("check: the copying path gives the same tokens\n");
  }
  free(with_state);
  free(copying);
  mx_session_destroy(s);
  return rc;
}
