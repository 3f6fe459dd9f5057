/* One step, or one block of steps, of a mixrt system (hybrid, dynamic, control sessions, or the
 * reference interpreter) in `mixrt bench llm`: the device buffers of --io device, the decode
 * state of --mode decode (presents fed back as pasts, the argmax as the next token), and the
 * timing of each step as its caller sees it. */
#include <stdlib.h>
#include <string.h>

#include "bench/llm/llm_impl.h"
#include "common/clock.h"
#include "mixrt/reference.h"
#include "tools/bench.h"

void mx__llm_release_all(mx_tensor *t, size_t n) {
  for (size_t k = 0; k < n; k++) mx_tensor_release(&t[k]);
}

/* Frees the device buffers of the point. */
void mx__llm_free_device_io(bench_ctx *c, size_t n) {
  for (size_t k = 0; k < n; k++) {
    mx_device_free(c->dev, c->dev_in[k].data);
    mx_device_free(c->dev, c->dev_out[k].data);
  }
  memset(c->dev_in, 0, sizeof c->dev_in);
  memset(c->dev_out, 0, sizeof c->dev_out);
}

/* A device tensor of the given type and dims (at least one byte is allocated). */
mx_status mx__llm_device_tensor(mx_device *dev, mx_dtype dt, int32_t rank, const int64_t *dims,
                                mx_tensor *t) {
  memset(t, 0, sizeof *t);
  t->dtype = dt;
  t->rank = rank;
  memcpy(t->dims, dims, (size_t)rank * sizeof *dims);
  t->placement = MX_DEVICE;
  size_t nbytes;
  if (!mx_tensor_nbytes(t, &nbytes)) return MX_ERR_LIMIT;
  return mx_device_alloc(dev, nbytes ? nbytes : 1, 0, &t->data);
}

/* --io device: uploads the inputs and allocates output buffers of the step's shapes
 * (logits [1, 1, vocab], presents [1, kv_heads, past + 1, head_dim]). */
mx_status mx__llm_make_device_io(bench_ctx *c, const mx_llama_config *cfg, const mx_tensor *in, size_t n) {
  mx_status st = MX_OK;
  for (size_t k = 0; k < n && st == MX_OK; k++) {
    size_t nbytes = 0;
    mx_tensor_nbytes(&in[k], &nbytes);
    st = mx__llm_device_tensor(c->dev, in[k].dtype, in[k].rank, in[k].dims, &c->dev_in[k]);
    if (st == MX_OK && nbytes)
      st = mx_device_copy(c->dev, c->dev_in[k].data, in[k].data, nbytes, MX_COPY_H2D);
    if (st != MX_OK) break;
    if (k == 0) {
      st = mx__llm_device_tensor(c->dev, MX_FLOAT32, 3, (const int64_t[]){1, 1, cfg->vocab}, &c->dev_out[0]);
    } else {
      int64_t dims[4] = {1, cfg->kv_heads, in[k].dims[2] + 1, mx_cli_llm_head_dim(cfg)};
      st = mx__llm_device_tensor(c->dev, MX_FLOAT32, 4, dims, &c->dev_out[k]);
    }
  }
  if (st != MX_OK) mx__llm_free_device_io(c, n);
  return st;
}

void mx__llm_binding_free(bench_ctx *c, int sys) {
  mx_binding_destroy(c->binding[sys]);
  c->binding[sys] = NULL;
  if (c->binding_ids[sys].placement == MX_DEVICE)
    mx_device_free(c->dev, c->binding_ids[sys].data);
  else
    mx_tensor_release(&c->binding_ids[sys]);
  memset(&c->binding_ids[sys], 0, sizeof c->binding_ids[sys]);
}

/* System sys's binding (made at its first step of a point, NULL under --no-state and for the
 * reference interpreter): the cache pairs as session state loaded from the pasts src[1 .. n)
 * (host or device), the token id from a copy of src[0] of its own, the logits into
 * c->dev_out[0] in fixed mode under --io device, else a buffer the binding allocates (on the
 * device under --io device). */
static mx_status binding_for(bench_ctx *c, int sys, const mx_tensor *src, size_t n, mx_binding **out,
                             char *why, size_t cap) {
  *out = NULL;
  if (c->a->no_state || sys == SYS_REFERENCE) return MX_OK;
  if (c->binding[sys]) {
    *out = c->binding[sys];
    return MX_OK;
  }
  mx_session *s = c->sessions[sys];
  mx_tensor *ids = &c->binding_ids[sys];
  mx_status st = src[0].placement == MX_DEVICE
                     ? mx__llm_device_tensor(c->dev, MX_INT64, src[0].rank, src[0].dims, ids)
                     : mx_tensor_alloc(MX_INT64, src[0].rank, src[0].dims, ids);
  if (st == MX_OK && src[0].placement == MX_DEVICE)
    st = mx_device_copy(c->dev, ids->data, src[0].data, sizeof(int64_t), MX_COPY_D2D);
  else if (st == MX_OK)
    memcpy(ids->data, src[0].data, sizeof(int64_t));
  mx_binding *b = NULL;
  size_t pairs = 0;
  if (st == MX_OK) st = mx_binding_create(s, &b);
  if (st == MX_OK) st = mx_binding_set_state_append(b, !c->a->state_copy);
  if (st == MX_OK) st = mx_binding_pair_states(b, 2, c->a->decode ? 0 : src[1].dims[2] + 1, &pairs);
  if (st == MX_OK) st = mx_binding_bind_input(b, "input_ids", ids);
  if (st == MX_OK && c->device_io && !c->a->decode)
    st = mx_binding_bind_output(b, "logits", &c->dev_out[0]);
  else if (st == MX_OK)
    st = mx_binding_bind_output_alloc(b, "logits", c->device_io ? MX_DEVICE : MX_HOST);
  for (size_t i = 1; i < n && st == MX_OK; i++) st = mx_binding_load_state(b, i, &src[i]);
  if (st != MX_OK || pairs != n - 1) {
    snprintf(why, cap, "%s: binding with the cache as state: %s", sys_names[sys],
             st != MX_OK ? mx_session_last_error(s) : "the pasts and presents do not pair up");
    mx_binding_destroy(b);
    if (ids->placement == MX_DEVICE)
      mx_device_free(c->dev, ids->data);
    else
      mx_tensor_release(ids);
    memset(ids, 0, sizeof *ids);
    return st != MX_OK ? st : MX_ERR_INVALID_GRAPH;
  }
  *out = c->binding[sys] = b;
  return MX_OK;
}

/* Runs one step of mixrt system sys. Host I/O (and the reference interpreter): out receives
 * host tensors the caller releases. Device I/O: the session reads c->dev_in and writes
 * c->dev_out; out receives host copies only when `download` is set (else it is left empty). */
mx_status mx__llm_run_mixrt(bench_ctx *c, int sys, const mx_tensor *in, size_t n, mx_tensor *out,
                            bool download, char *why, size_t cap) {
  memset(out, 0, n * sizeof *out);
  mx_status st;
  if (sys == SYS_REFERENCE) {
    mx_error err;
    st = mx_reference_run(c->ref, in, n, out, n, &err);
    if (st != MX_OK) snprintf(why, cap, "reference: %s", err.message);
    return st;
  }
  mx_session *s = c->sessions[sys];
  mx_binding *b = NULL;
  st = binding_for(c, sys, c->device_io ? c->dev_in : in, n, &b, why, cap);
  if (st != MX_OK) return st;
  if (b) {
    /* Every step runs the point's inputs: back to the loaded rows (a swap of buffers). */
    int64_t past = in[1].dims[2];
    st = mx_binding_state_length(b) == past ? MX_OK : mx_binding_truncate(b, past);
    if (st == MX_OK) st = mx_session_run_binding(s, b);
  } else {
    st = c->device_io ? mx_session_run(s, c->dev_in, n, c->dev_out, n) : mx_session_run(s, in, n, out, n);
  }
  if (st != MX_OK) {
    snprintf(why, cap, "%s: %s", sys_names[sys], mx_session_last_error(s));
    mx__llm_release_all(out, n);
    return st;
  }
  for (size_t k = 0; b && !c->device_io && download && k < n && st == MX_OK; k++) {
    /* Host I/O through a binding: the outputs as host tensors, like mx_session_run's. */
    const mx_tensor *o = mx_binding_output(b, k);
    size_t nbytes = 0;
    mx_tensor_nbytes(o, &nbytes);
    st = mx_tensor_alloc(o->dtype, o->rank, o->dims, &out[k]);
    if (st == MX_OK && nbytes) st = mx_binding_read_output(b, k, &out[k]); /* states packed */
    if (st != MX_OK) {
      snprintf(why, cap, "%s: reading the outputs: %s", sys_names[sys], mx_status_string(st));
      mx__llm_release_all(out, n);
    }
  }
  for (size_t k = 0; c->device_io && download && k < n && st == MX_OK; k++) {
    const mx_tensor *d = b ? mx_binding_output(b, k) : &c->dev_out[k];
    size_t nbytes = 0;
    mx_tensor_nbytes(d, &nbytes);
    st = mx_tensor_alloc(d->dtype, d->rank, d->dims, &out[k]);
    if (st == MX_OK && nbytes)
      st = b ? mx_binding_read_output(b, k, &out[k]) /* states packed */
             : mx_device_copy(c->dev, out[k].data, d->data, nbytes, MX_COPY_D2H);
    if (st != MX_OK) {
      snprintf(why, cap, "%s: reading the device outputs: %s", sys_names[sys], mx_status_string(st));
      mx__llm_release_all(out, n);
    }
  }
  return st;
}

/* Times `count` steps of a mixrt system into samples (ns; NULL: untimed warm-up). */
static mx_status time_mixrt(bench_ctx *c, int sys, const mx_tensor *in, size_t n, int64_t count,
                            uint64_t *samples, char *why, size_t cap) {
  mx_tensor out[MAX_IO];
  for (int64_t k = 0; k < count; k++) {
    uint64_t t0 = mx__now_ns();
    mx_status st = mx__llm_run_mixrt(c, sys, in, n, out, false, why, cap);
    uint64_t t1 = mx__now_ns();
    if (st != MX_OK) return st;
    if (samples) samples[k] = t1 - t0;
    mx__llm_release_all(out, n);
  }
  return MX_OK;
}

/* True when system sys keeps its decode state in device memory. */
static bool state_on_device(const bench_ctx *c, int sys) { return c->device_io && sys != SYS_REFERENCE; }

/* Frees the decode state of system sys. */
void mx__llm_state_free(bench_ctx *c, int sys, size_t n) {
  if (sys != SYS_REFERENCE) mx__llm_binding_free(c, sys); /* made from the state or the point */
  if (!c->state_live[sys]) return;
  for (size_t k = 0; k < n; k++) {
    if (state_on_device(c, sys))
      mx_device_free(c->dev, c->state[sys][k].data);
    else
      mx_tensor_release(&c->state[sys][k]);
  }
  memset(c->state[sys], 0, sizeof c->state[sys]);
  c->state_live[sys] = false;
}

/* --mode decode: system sys starts from a copy of the point's inputs. */
mx_status mx__llm_state_init(bench_ctx *c, int sys, const mx_tensor *in, size_t n) {
  mx_status st = MX_OK;
  if (sys != SYS_REFERENCE) mx__llm_binding_free(c, sys); /* the next one loads this state */
  c->state_live[sys] = true;
  for (size_t k = 0; k < n && st == MX_OK; k++) {
    size_t nbytes = 0;
    mx_tensor_nbytes(&in[k], &nbytes);
    mx_tensor *t = &c->state[sys][k];
    if (state_on_device(c, sys)) {
      st = mx__llm_device_tensor(c->dev, in[k].dtype, in[k].rank, in[k].dims, t);
      if (st == MX_OK && nbytes) st = mx_device_copy(c->dev, t->data, in[k].data, nbytes, MX_COPY_H2D);
    } else {
      st = mx_tensor_alloc(in[k].dtype, in[k].rank, in[k].dims, t);
      if (st == MX_OK && nbytes) memcpy(t->data, in[k].data, nbytes);
    }
  }
  if (st != MX_OK) mx__llm_state_free(c, sys, n);
  return st;
}

/* --mode decode: `count` steps of system sys from its state, each timed into samples (NULL:
 * untimed warm-up). After a step the presents become the pasts and the argmax of the logits
 * the token; only the run itself is timed. Under --io device the output buffers of each step
 * are allocated before the timed call and the inputs are freed after it. */
/* --mode decode through system sys's binding: the cache grows in the session's state, the
 * logits are read back and the argmax written into the binding's token id after each step. */
static mx_status decode_bound(bench_ctx *c, int sys, mx_binding *b, int64_t count, uint64_t *samples,
                              char *why, size_t cap) {
  mx_session *s = c->sessions[sys];
  const mx_tensor *logits = mx_binding_output(b, 0);
  float *host = malloc((size_t)c->cfg->vocab * sizeof *host);
  mx_status st = host ? MX_OK : MX_ERR_OUT_OF_MEMORY;
  for (int64_t k = 0; k < count && st == MX_OK; k++) {
    uint64_t t0 = mx__now_ns();
    st = mx_session_run_binding(s, b);
    uint64_t t1 = mx__now_ns();
    if (st != MX_OK) {
      snprintf(why, cap, "%s: %s", sys_names[sys], mx_session_last_error(s));
      break;
    }
    if (samples) samples[k] = t1 - t0;
    mx_tensor h = *logits;
    if (logits->placement == MX_DEVICE) {
      h.data = host;
      h.placement = MX_HOST;
      st = mx_device_copy(c->dev, host, logits->data, (size_t)c->cfg->vocab * sizeof *host, MX_COPY_D2H);
    }
    int64_t token = mx_cli_argmax(&h);
    mx_tensor *ids = &c->binding_ids[sys];
    if (st == MX_OK && ids->placement == MX_DEVICE)
      st = mx_device_copy(c->dev, ids->data, &token, sizeof token, MX_COPY_H2D);
    else
      ((int64_t *)ids->data)[0] = token;
    if (st != MX_OK) snprintf(why, cap, "%s: reading the logits: %s", sys_names[sys], mx_status_string(st));
  }
  free(host);
  return st;
}

static mx_status decode_steps(bench_ctx *c, int sys, size_t n, int64_t count, uint64_t *samples, char *why,
                              size_t cap) {
  mx_tensor *in = c->state[sys];
  const bool dev = state_on_device(c, sys);
  mx_binding *b = NULL;
  mx_status st = binding_for(c, sys, in, n, &b, why, cap);
  if (st != MX_OK || b) return st == MX_OK ? decode_bound(c, sys, b, count, samples, why, cap) : st;
  float *logits = malloc((size_t)c->cfg->vocab * sizeof *logits);
  if (!logits) return MX_ERR_OUT_OF_MEMORY;
  for (int64_t k = 0; k < count && st == MX_OK; k++) {
    mx_tensor out[MAX_IO];
    memset(out, 0, sizeof out);
    for (size_t i = 0; dev && i < n && st == MX_OK; i++) {
      int64_t dims[4] = {1, 1, c->cfg->vocab, 0};
      if (i) memcpy(dims, in[i].dims, sizeof dims), dims[2]++;
      st = mx__llm_device_tensor(c->dev, MX_FLOAT32, i ? 4 : 3, dims, &out[i]);
    }
    if (st != MX_OK) {
      snprintf(why, cap, "%s: device output buffers: %s", sys_names[sys], mx_status_string(st));
      for (size_t i = 0; i < n; i++) mx_device_free(c->dev, out[i].data);
      break;
    }
    mx_error err;
    uint64_t t0 = mx__now_ns();
    st = sys == SYS_REFERENCE ? mx_reference_run(c->ref, in, n, out, n, &err)
                              : mx_session_run(c->sessions[sys], in, n, out, n);
    uint64_t t1 = mx__now_ns();
    if (st != MX_OK) {
      snprintf(why, cap, "%s: %s", sys_names[sys],
               sys == SYS_REFERENCE ? err.message : mx_session_last_error(c->sessions[sys]));
      for (size_t i = 0; dev && i < n; i++) mx_device_free(c->dev, out[i].data);
      break;
    }
    if (samples) samples[k] = t1 - t0;
    mx_tensor host_logits = out[0];
    if (dev) {
      host_logits.data = logits;
      host_logits.placement = MX_HOST;
      st = mx_device_copy(c->dev, logits, out[0].data, (size_t)c->cfg->vocab * sizeof *logits, MX_COPY_D2H);
    }
    int64_t token = mx_cli_argmax(&host_logits);
    for (size_t i = 1; i < n; i++) { /* present -> past */
      if (dev)
        mx_device_free(c->dev, in[i].data);
      else
        mx_tensor_release(&in[i]);
      in[i] = out[i];
      in[i].name = NULL;
    }
    if (dev) {
      mx_device_free(c->dev, out[0].data);
      if (st == MX_OK) st = mx_device_copy(c->dev, in[0].data, &token, sizeof token, MX_COPY_H2D);
    } else {
      mx_tensor_release(&out[0]);
      ((int64_t *)in[0].data)[0] = token;
    }
    if (st != MX_OK) snprintf(why, cap, "%s: reading the logits: %s", sys_names[sys], mx_status_string(st));
  }
  free(logits);
  return st;
}

/* One timed block of a mixrt system: the fixed step repeated, or decode steps. */
mx_status mx__llm_run_block(bench_ctx *c, int sys, const mx_tensor *in, size_t n, int64_t count,
                            uint64_t *samples, char *why, size_t cap) {
  if (c->a->decode) return decode_steps(c, sys, n, count, samples, why, cap);
  return time_mixrt(c, sys, in, n, count, samples, why, cap);
}
