/* Decode-step helpers shared by `mixrt demo` and `mixrt bench llm`: the named model sizes, the
 * device and executor option words, building the inputs of one step of the Llama-style decode
 * model (include/mixrt/models.h), the greedy choice of the next token, and quantiles of timing
 * samples. */
#include <stdlib.h>
#include <string.h>

#include "tools/bench.h"

bool mx_cli_llm_size(const char *name, mx_llama_config *cfg) { return mx_llama_config_preset(cfg, name); }

int64_t mx_cli_llm_head_dim(const mx_llama_config *cfg) {
  return cfg->head_dim ? cfg->head_dim : cfg->hidden / cfg->heads;
}

bool mx_cli_parse_device(const char *text, mx_device_kind *out) {
  if (strcmp(text, "cpu") == 0)
    *out = MX_DEVICE_CPU;
  else if (strcmp(text, "inline") == 0)
    *out = MX_DEVICE_INLINE;
  else
    return false;
  return true;
}

bool mx_cli_parse_executor(const char *text, mx_executor_kind *out) {
  if (strcmp(text, "sequential") == 0 || strcmp(text, "seq") == 0)
    *out = MX_EXECUTOR_SEQUENTIAL;
  else if (strcmp(text, "topological") == 0 || strcmp(text, "topo") == 0)
    *out = MX_EXECUTOR_TOPOLOGICAL;
  else if (strcmp(text, "multi-thread") == 0 || strcmp(text, "mt") == 0)
    *out = MX_EXECUTOR_MULTI_THREAD;
  else
    return false;
  return true;
}

const char *mx_cli_device_name(mx_device_kind k) { return k == MX_DEVICE_INLINE ? "inline" : "cpu"; }

const char *mx_cli_executor_name(mx_executor_kind k) {
  switch (k) {
    case MX_EXECUTOR_TOPOLOGICAL: return "topological";
    case MX_EXECUTOR_MULTI_THREAD: return "multi-thread";
    default: return "sequential";
  }
}

/* xorshift64: the same seed gives the same values on every machine. */
static uint64_t next_random(uint64_t *s) {
  uint64_t x = *s;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *s = x;
}

mx_status mx_cli_llm_inputs(const mx_llama_config *cfg, int64_t token, int64_t past, uint64_t seed,
                            mx_tensor *in) {
  const size_t n = 1 + 2 * (size_t)cfg->layers;
  memset(in, 0, n * sizeof *in);
  const int64_t tok_dims[2] = {1, 1};
  const int64_t kv_dims[4] = {1, cfg->kv_heads, past, mx_cli_llm_head_dim(cfg)};
  mx_status st = mx_tensor_alloc(MX_INT64, 2, tok_dims, &in[0]);
  if (st != MX_OK) return st;
  ((int64_t *)in[0].data)[0] = token;
  uint64_t rng = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 1; i < n; i++) {
    st = mx_tensor_alloc(MX_FLOAT32, 4, kv_dims, &in[i]);
    if (st != MX_OK) goto release_inputs;
    int64_t count;
    mx_tensor_numel(&in[i], &count);
    float *f = in[i].data;
    for (int64_t k = 0; seed && k < count; k++)
      f[k] = (float)((double)(next_random(&rng) >> 11) / 4503599627370496.0 - 1.0);
  }
  return MX_OK;
release_inputs:
  for (size_t i = 0; i < n; i++) mx_tensor_release(&in[i]);
  return st;
}

void mx_cli_llm_inputs_release(const mx_llama_config *cfg, mx_tensor *in) {
  for (size_t i = 0; i < 1 + 2 * (size_t)cfg->layers; i++) mx_tensor_release(&in[i]);
}

int64_t mx_cli_argmax(const mx_tensor *logits) {
  int64_t n = 0, best = 0;
  mx_tensor_numel(logits, &n);
  const float *f = logits->data;
  for (int64_t k = 1; k < n; k++)
    if (f[k] > f[best]) best = k;
  return best;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

uint64_t mx_cli_quantile(uint64_t *v, size_t n, double q) {
  if (!n) return 0;
  qsort(v, n, sizeof *v, cmp_u64);
  size_t k = (size_t)(q * (double)(n - 1) + 0.5);
  return v[k < n ? k : n - 1];
}

mx_status mx_cli_state_binding(mx_session *s, const mx_tensor *inputs, int32_t axis, int64_t capacity,
                               mx_binding **out, size_t *n_pairs) {
  mx_binding *b = NULL;
  *out = NULL;
  *n_pairs = 0;
  mx_status st = mx_binding_create(s, &b);
  if (st == MX_OK) st = mx_binding_pair_states(b, axis, capacity, n_pairs);
  for (size_t i = 0; st == MX_OK && i < mx_session_input_count(s); i++)
    if (!mx_binding_input_is_state(b, i)) st = mx_binding_set_input(b, i, &inputs[i]);
  for (size_t j = 0; st == MX_OK && j < mx_session_output_count(s); j++) {
    mx_io_info info;
    mx_session_output_info(s, j, &info);
    if (mx_binding_output(b, j)) continue; /* a state's output */
    st = mx_binding_bind_output_alloc(b, info.name, MX_HOST);
  }
  if (st != MX_OK) {
    mx_binding_destroy(b);
    return st;
  }
  *out = b;
  return MX_OK;
}

mx_status mx_cli_download(mx_session *s, const mx_tensor *dev, mx_tensor *host) {
  mx_status st = mx_tensor_alloc(dev->dtype, dev->rank, dev->dims, host);
  size_t nbytes = 0;
  mx_tensor_nbytes(host, &nbytes);
  if (st == MX_OK && nbytes)
    st = mx_device_copy(mx_session_device(s), host->data, dev->data, nbytes, MX_COPY_D2H);
  if (st != MX_OK) mx_tensor_release(host);
  return st;
}
