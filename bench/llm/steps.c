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
mx_status mx__llm_device_tensor(mx_device *dev, mx_dtype dt, int32_t rank, const int64_t *dims, mx_tensor *t) {
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
    if (st == MX_OK && nbytes) st = mx_device_copy(c->dev, c->dev_in[k].data, in[k].data, nbytes, MX_COPY_H2D);
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
  st = c->device_io ? mx_session_run(s, c->dev_in, n, c->dev_out, n) : mx_session_run(s, in, n, out, n);
  if (st != MX_OK) {
    snprintf(why, cap, "%s: %s", sys_names[sys], mx_session_last_error(s));
    mx__llm_release_all(out, n);
    return st;
  }
  for (size_t k = 0; c->device_io && download && k < n && st == MX_OK; k++) {
    const mx_tensor *d = &c->dev_out[k];
    size_t nbytes = 0;
    mx_tensor_nbytes(d, &nbytes);
    st = mx_tensor_alloc(d->dtype, d->rank, d->dims, &out[k]);
    if (st == MX_OK && nbytes) st = mx_device_copy(c->dev, out[k].data, d->data, nbytes, MX_COPY_D2H);
    if (st != MX_OK) {
      snprintf(why, cap, "%s: reading the device outputs: %s", sys_names[sys], mx_status_string(st));
      mx__llm_release_all(out, n);
    }
  }
  return st;
}

/* Times `count` steps of a mixrt system into samples (ns; NULL: untimed warm-up). */
static mx_status time_mixrt(bench_ctx *c, int sys, const mx_tensor *in, size_t n, int64_t count, uint64_t *samples,
                            char *why, size_t cap) {
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
  if (!c->state_live[sys]) return;
  for (size_t k = 0; k < n; k++) {
    if (state_on_device(c, sys)) mx_device_free(c->dev, c->state[sys][k].data);
    else mx_tensor_release(&c->state[sys][k]);
  }
  memset(c->state[sys], 0, sizeof c->state[sys]);
  c->state_live[sys] = false;
}

/* --mode decode: system sys starts from a copy of the point's inputs. */
mx_status mx__llm_state_init(bench_ctx *c, int sys, const mx_tensor *in, size_t n) {
  mx_status st = MX_OK;
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
static mx_status decode_steps(bench_ctx *c, int sys, size_t n, int64_t count, uint64_t *samples, char *why,
                              size_t cap) {
  mx_tensor *in = c->state[sys];
  const bool dev = state_on_device(c, sys);
  mx_status st = MX_OK;
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
      if (dev) mx_device_free(c->dev, in[i].data);
      else mx_tensor_release(&in[i]);
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
