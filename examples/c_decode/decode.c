/* A framework adapter's decode loop in C, against the installed library only (public headers,
 * libmixrt.so): build the built-in tiny Llama decode step, load it into a session, then run
 * greedy steps where each step's present key/value tensors become the next step's past.
 * Prints the library version and one token per step.
 *
 *   decode [STEPS]     (default 8)
 *
 * Built by examples/c_decode/CMakeLists.txt (find_package(mixrt)) or by hand with
 *   cc decode.c $(pkg-config --cflags --libs mixrt) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mixrt/mixrt.h"
#include "mixrt/version.h"

#define MAX_IO 64

static int fail(const char *what, const char *message) {
  fprintf(stderr, "decode: %s: %s\n", what, message);
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

int main(int argc, char **argv) {
  long steps = argc > 1 ? strtol(argv[1], NULL, 10) : 8;
  if (steps < 1) return fail("usage", "decode [STEPS >= 1]");
  printf("mixrt %s (compiled against %s)\n", mx_version(), MIXRT_VERSION);

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
  if (mx_session_load_graph(s, g) != MX_OK) { /* the session owns g from here on */
    int rc = fail("load", mx_session_last_error(s));
    mx_session_destroy(s);
    return rc;
  }

  /* Inputs by position: input_ids, then past_key_<i>, past_value_<i> per layer, empty at first. */
  const size_t n_io = mx_session_input_count(s);
  if (n_io > MAX_IO || n_io != mx_session_output_count(s)) {
    mx_session_destroy(s);
    return fail("model", "unexpected number of inputs or outputs");
  }
  mx_tensor in[MAX_IO], out[MAX_IO];
  memset(in, 0, sizeof in);
  const int64_t tok_dims[2] = {1, 1};
  const int64_t head_dim = cfg.head_dim ? cfg.head_dim : cfg.hidden / cfg.heads;
  const int64_t kv_dims[4] = {1, cfg.kv_heads, 0, head_dim};
  mx_status st = mx_tensor_alloc(MX_INT64, 2, tok_dims, &in[0]);
  for (size_t i = 1; i < n_io && st == MX_OK; i++) st = mx_tensor_alloc(MX_FLOAT32, 4, kv_dims, &in[i]);
  int rc = 0;
  if (st != MX_OK) {
    rc = fail("inputs", mx_status_string(st));
    goto done;
  }
  ((int64_t *)in[0].data)[0] = 1;

  printf("tokens:");
  for (long step = 0; step < steps; step++) {
    memset(out, 0, sizeof out); /* data NULL: the session allocates each output for us */
    if (mx_session_run(s, in, n_io, out, n_io) != MX_OK) {
      rc = fail("run", mx_session_last_error(s));
      goto done;
    }
    const int64_t token = argmax(&out[0]);
    printf(" %lld", (long long)token);
    mx_tensor_release(&out[0]);
    for (size_t i = 1; i < n_io; i++) { /* present -> past */
      mx_tensor_release(&in[i]);
      in[i] = out[i];
      in[i].name = NULL;
    }
    ((int64_t *)in[0].data)[0] = token;
  }
  printf("\n");

done:
  for (size_t i = 0; i < n_io; i++) mx_tensor_release(&in[i]);
  mx_session_destroy(s);
  return rc;
}
