/* Helpers of the reliability tests (see reliability.h): the llama decode loop with its cache
 * carried from step to step, the mixture-of-experts step, the reference comparison. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "reliability/reliability.h"

static uint64_t next_rand(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

mx_status mxr_random_tensor(mx_dtype dt, int32_t rank, const int64_t *dims, uint64_t seed, mx_tensor *t) {
  mx_status st = mx_tensor_alloc(dt, rank, dims, t);
  if (st != MX_OK) return st;
  int64_t n = 0;
  mx_tensor_numel(t, &n);
  uint64_t s = seed;
  for (int64_t i = 0; i < n; i++) {
    uint64_t r = next_rand(&s);
    if (dt == MX_FLOAT32)
      ((float *)t->data)[i] = (float)((double)(r >> 11) / (double)(1ull << 53) * 2.0 - 1.0);
    else if (dt == MX_INT64)
      ((int64_t *)t->data)[i] = (int64_t)(r % 7);
  }
  return MX_OK;
}

mx_session *mxr_session(const mx_device_options *dev, uint32_t streams, mx_executor_kind ex, char *why,
                        size_t cap) {
  mx_session_options o;
  mx_session_options_init(&o);
  if (dev) o.device_options = *dev;
  o.streams = streams;
  o.executor = ex;
  o.executor_threads = 2;
  mx_session *s = NULL;
  mx_error err;
  if (mx_session_create(&o, &s, &err) != MX_OK) {
    snprintf(why, cap, "%s", err.message);
    return NULL;
  }
  return s;
}

/* Compares outputs with the reference's; false with the first difference in why. */
static bool same_outputs(const mx_tensor *got, const mx_tensor *want, size_t n, char *why, size_t cap) {
  for (size_t k = 0; k < n; k++) {
    char d[200];
    if (!mx_tensor_allclose(&got[k], &want[k], 0.0, 0.0, d, sizeof d)) {
      snprintf(why, cap, "output %zu differs from the reference: %s", k, d);
      return false;
    }
  }
  return true;
}

/* --- llama ---------------------------------------------------------------------------------- */

mx_status mxr_llama_init(mxr_llama *l, const mx_llama_config *cfg) {
  memset(l, 0, sizeof *l);
  if (cfg)
    l->cfg = *cfg;
  else
    mx_llama_config_default(&l->cfg);
  l->n_io = 1 + 2 * (size_t)l->cfg.layers;
  if (l->n_io > MXR_MAX_IO) return MX_ERR_INVALID_ARGUMENT;
  l->head_dim = l->cfg.head_dim ? l->cfg.head_dim : l->cfg.hidden / l->cfg.heads;
  mx_status st = mx_model_llama(&l->cfg, &l->ref, NULL);
  if (st != MX_OK) return st;
  mxr_llama_reset(l);
  return MX_OK;
}

void mxr_llama_free(mxr_llama *l) {
  for (size_t i = 0; i < MXR_MAX_IO; i++) mx_tensor_release(&l->past[i]);
  mx_graph_destroy(l->ref);
  l->ref = NULL;
}

void mxr_llama_reset(mxr_llama *l) {
  for (size_t i = 1; i < l->n_io; i++) {
    mx_tensor_release(&l->past[i]);
    cr_assert_eq(mx_tensor_alloc(MX_FLOAT32, 4, (int64_t[]){1, l->cfg.kv_heads, 0, l->head_dim}, &l->past[i]),
                 MX_OK);
  }
  l->past_len = 0;
}

mx_status mxr_llama_load(const mxr_llama *l, mx_session *s) {
  mx_graph *g = NULL;
  mx_status st = mx_model_llama(&l->cfg, &g, NULL);
  if (st != MX_OK) return st;
  return mx_session_load_graph(s, g);
}

mx_status mxr_llama_step(mxr_llama *l, mx_session *s, int64_t token, unsigned flags, char *why, size_t cap) {
  mx_tensor in[MXR_MAX_IO], out[MXR_MAX_IO], want[MXR_MAX_IO];
  memset(out, 0, sizeof out);
  memset(want, 0, sizeof want);
  mx_status st = mx_tensor_alloc(MX_INT64, 2, (int64_t[]){1, 1}, &in[0]);
  if (st != MX_OK) return st;
  ((int64_t *)in[0].data)[0] = token;
  for (size_t i = 1; i < l->n_io; i++) in[i] = l->past[i];
  st = mx_session_run(s, in, l->n_io, out, l->n_io);
  if (st != MX_OK) {
    snprintf(why, cap, "%s", mx_session_last_error(s));
    goto done;
  }
  if (flags & MXR_CHECK) {
    mx_error err;
    st = mx_reference_run(l->ref, in, l->n_io, want, l->n_io, &err);
    if (st != MX_OK) {
      snprintf(why, cap, "reference: %s", err.message);
      goto done;
    }
    if (!same_outputs(out, want, l->n_io, why, cap)) {
      st = MX_ERR_INTERNAL;
      goto done;
    }
  }
  if (flags & MXR_ADVANCE) {
    for (size_t i = 1; i < l->n_io; i++) {
      mx_tensor_release(&l->past[i]);
      l->past[i] = out[i];
      l->past[i].name = NULL;
      memset(&out[i], 0, sizeof out[i]);
    }
    l->past_len++;
  }
done:
  mx_tensor_release(&in[0]);
  for (size_t k = 0; k < l->n_io; k++) {
    mx_tensor_release(&out[k]);
    mx_tensor_release(&want[k]);
  }
  return st;
}

/* --- moe ------------------------------------------------------------------------------------ */

mx_status mxr_moe_init(mxr_moe *m) {
  memset(m, 0, sizeof *m);
  mx_moe_config_default(&m->cfg);
  return mx_model_moe(&m->cfg, &m->ref, NULL);
}

void mxr_moe_free(mxr_moe *m) {
  mx_graph_destroy(m->ref);
  m->ref = NULL;
}

mx_status mxr_moe_load(const mxr_moe *m, mx_session *s) {
  mx_graph *g = NULL;
  mx_status st = mx_model_moe(&m->cfg, &g, NULL);
  if (st != MX_OK) return st;
  return mx_session_load_graph(s, g);
}

mx_status mxr_moe_step(mxr_moe *m, mx_session *s, int64_t tokens, uint64_t seed, unsigned flags, char *why,
                       size_t cap) {
  mx_tensor x, got = {0}, want = {0};
  mx_status st = mxr_random_tensor(MX_FLOAT32, 2, (int64_t[]){tokens, m->cfg.hidden}, seed, &x);
  if (st != MX_OK) return st;
  st = mx_session_run(s, &x, 1, &got, 1);
  if (st != MX_OK) {
    snprintf(why, cap, "%s", mx_session_last_error(s));
  } else if (flags & MXR_CHECK) {
    mx_error err;
    st = mx_reference_run(m->ref, &x, 1, &want, 1, &err);
    if (st != MX_OK)
      snprintf(why, cap, "reference: %s", err.message);
    else if (!same_outputs(&got, &want, 1, why, cap))
      st = MX_ERR_INTERNAL;
  }
  mx_tensor_release(&x);
  mx_tensor_release(&got);
  mx_tensor_release(&want);
  return st;
}
