/* Helpers of the static-executor tests (see support_static.h). Plain C over the library (no
 * Criterion calls), so tests can use them from any thread. */
#include "support_static.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "random_graph.h"
#include "static_exec/static_exec_impl.h"

mx_device *st_device(mx_device_kind kind, bool check) {
  mx_device_options o;
  mx_device_options_init(&o);
  o.kind = kind;
  o.check = check ? MX_CHECK_ON : MX_CHECK_OFF;
  o.fault_from_env = false;
  mx_device *dev = NULL;
  mx_error err;
  if (mx_device_create(&o, &dev, &err) != MX_OK) {
    fprintf(stderr, "device: %s\n", err.message);
    return NULL;
  }
  return dev;
}

static mx_status fail(char *why, size_t cap, mx_status st, const char *what, const char *msg) {
  if (why && cap) snprintf(why, cap, "%s: %s (%s)", what, msg, mx_status_name(st));
  return st;
}

static mx_status run(mx_static_model *m, mx_stream *s, const mx_tensor *inputs, mx_tensor *outputs, bool host,
                     char *why, size_t cap) {
  mx_device *dev = mx_stream_device(s);
  size_t ni = mx__static_model_input_count(m), no = mx__static_model_output_count(m);
  mx_tensor *din = calloc(ni ? ni : 1, sizeof *din), *dout = calloc(no ? no : 1, sizeof *dout);
  mx_status st = MX_OK;
  if (!din || !dout) {
    st = fail(why, cap, MX_ERR_OUT_OF_MEMORY, "run", "out of memory");
    goto done;
  }
  memset(outputs, 0, no * sizeof *outputs);
  for (size_t j = 0; j < no && st == MX_OK; j++) {
    mx_static_io io;
    mx__static_model_output(m, j, &io);
    st = mx_tensor_alloc(io.dtype, io.rank, io.dims, &outputs[j]);
    outputs[j].name = io.name;
  }
  if (st != MX_OK) {
    fail(why, cap, st, "run", "cannot allocate outputs");
    goto done;
  }
  for (size_t i = 0; i < ni; i++) {
    din[i] = inputs[i];
    if (host) continue;
    size_t nb = 0;
    mx_tensor_nbytes(&inputs[i], &nb);
    din[i].placement = MX_DEVICE;
    din[i].data = NULL;
    if (!nb) continue;
    if ((st = mx_device_alloc(dev, nb, 64, &din[i].data)) != MX_OK ||
        (st = mx_device_copy(dev, din[i].data, inputs[i].data, nb, MX_COPY_H2D)) != MX_OK) {
      fail(why, cap, st, "run", mx_device_last_error(dev));
      goto done;
    }
  }
  for (size_t j = 0; j < no; j++) {
    dout[j] = outputs[j];
    if (host) continue;
    size_t nb = 0;
    mx_tensor_nbytes(&outputs[j], &nb);
    dout[j].placement = MX_DEVICE;
    dout[j].data = NULL;
    if (nb && (st = mx_device_alloc(dev, nb, 64, &dout[j].data)) != MX_OK) {
      fail(why, cap, st, "run", mx_device_last_error(dev));
      goto done;
    }
  }
  if ((st = mx__static_model_update_args(m, din, ni, dout, no)) != MX_OK ||
      (st = mx__static_model_execute(m, s)) != MX_OK) {
    fail(why, cap, st, "static model", mx__static_model_last_error(m));
    goto done;
  }
  mx_stream_error se;
  if ((st = mx_stream_synchronize(s)) != MX_OK) {
    mx_stream_get_error(s, &se);
    fail(why, cap, st, "stream", se.message);
    mx_stream_reset(s);
    goto done;
  }
  for (size_t j = 0; j < no && !host; j++) {
    size_t nb = 0;
    mx_tensor_nbytes(&outputs[j], &nb);
    if (nb && (st = mx_device_copy(dev, outputs[j].data, dout[j].data, nb, MX_COPY_D2H)) != MX_OK) {
      fail(why, cap, st, "copy back", mx_device_last_error(dev));
      goto done;
    }
  }
done:
  for (size_t i = 0; din && !host && i < ni; i++) mx_device_free(dev, din[i].data);
  for (size_t j = 0; dout && !host && j < no; j++) mx_device_free(dev, dout[j].data);
  free(din);
  free(dout);
  if (st != MX_OK)
    for (size_t j = 0; j < no; j++) mx_tensor_release(&outputs[j]);
  return st;
}

mx_status st_run_device(mx_static_model *m, mx_stream *s, const mx_tensor *inputs, mx_tensor *outputs,
                        char *why, size_t why_size) {
  return run(m, s, inputs, outputs, false, why, why_size);
}

mx_status st_run_host(mx_static_model *m, mx_stream *s, const mx_tensor *inputs, mx_tensor *outputs,
                      char *why, size_t why_size) {
  return run(m, s, inputs, outputs, true, why, why_size);
}

bool st_same_bits(const mx_tensor *a, const mx_tensor *b, char *why, size_t cap) {
  if (a->dtype != b->dtype || a->rank != b->rank) {
    snprintf(why, cap, "dtype/rank differ (%s/%d vs %s/%d)", mx_dtype_name(a->dtype), (int)a->rank,
             mx_dtype_name(b->dtype), (int)b->rank);
    return false;
  }
  for (int32_t k = 0; k < a->rank; k++)
    if (a->dims[k] != b->dims[k]) {
      snprintf(why, cap, "dim %d differs (%lld vs %lld)", (int)k, (long long)a->dims[k],
               (long long)b->dims[k]);
      return false;
    }
  size_t nb = 0;
  mx_tensor_nbytes(a, &nb);
  if (nb && memcmp(a->data, b->data, nb) != 0) {
    size_t i = 0;
    while (((const unsigned char *)a->data)[i] == ((const unsigned char *)b->data)[i]) i++;
    snprintf(why, cap, "bytes differ from byte %zu of %zu", i, nb);
    return false;
  }
  return true;
}

static uint64_t next_rand(uint64_t *s) {
  uint64_t x = *s;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *s = x;
}

mx_status st_random_inputs(const mx_graph *g, uint64_t seed, mx_tensor *inputs) {
  uint64_t rng = seed * 0x9e3779b97f4a7c15ull + 12345;
  for (size_t i = 0; i < mx_graph_input_count(g); i++) {
    mx_value_id v = mx_graph_input(g, i);
    mx_shape s;
    mx_graph_value_shape(g, v, &s);
    mx_dtype dt = mx_graph_value_dtype(g, v);
    int64_t dims[MX_MAX_RANK];
    for (int32_t k = 0; k < s.rank; k++) dims[k] = s.dims[k];
    mx_status st = mx_tensor_alloc(dt, s.rank, dims, &inputs[i]);
    if (st != MX_OK) {
      for (size_t k = 0; k < i; k++) mx_tensor_release(&inputs[k]);
      return st;
    }
    inputs[i].name = mx_graph_value_name(g, v);
    int64_t n = 0;
    mx_tensor_numel(&inputs[i], &n);
    for (int64_t e = 0; e < n; e++) {
      uint64_t r = next_rand(&rng);
      switch (dt) {
        case MX_FLOAT32:
          ((float *)inputs[i].data)[e] = (float)((double)(r >> 11) / (double)(1ull << 53)) * 2.0f - 1.0f;
          break;
        case MX_INT64: ((int64_t *)inputs[i].data)[e] = (int64_t)(r % 7); break;
        case MX_INT32: ((int32_t *)inputs[i].data)[e] = (int32_t)(r % 7); break;
        default:
          ((unsigned char *)inputs[i].data)[e * (int64_t)mx_dtype_size(dt)] = (unsigned char)(r & 1);
          break;
      }
    }
  }
  return MX_OK;
}

bool st_check_against_reference(mx_graph *g, const mx_static_options *opt, const mx_static_load_options *lo,
                                mx_device *dev, uint64_t seed, char *why, size_t cap) {
  size_t ni = mx_graph_input_count(g), no = mx_graph_output_count(g);
  mx_tensor *in = calloc(ni ? ni : 1, sizeof *in);
  mx_tensor *ref = calloc(no ? no : 1, sizeof *ref), *got = calloc(no ? no : 1, sizeof *got);
  mx_static_plan *p = NULL;
  mx_static_model *m = NULL;
  mx_stream *s = NULL;
  bool ok = false, have_in = false, have_ref = false, have_got = false;
  mx_error err;
  if (!in || !ref || !got) goto done;
  if (st_random_inputs(g, seed, in) != MX_OK) {
    snprintf(why, cap, "random inputs");
    goto done;
  }
  have_in = true;
  if (mx_reference_run(g, in, ni, ref, no, &err) != MX_OK) {
    snprintf(why, cap, "reference: %s", err.message);
    goto done;
  }
  have_ref = true;
  if (mx__static_compile(g, opt, &p, &err) != MX_OK) {
    snprintf(why, cap, "compile: %s", err.message);
    goto done;
  }
  if (mx__static_model_create(dev, p, lo, &m, &err) != MX_OK) {
    snprintf(why, cap, "create: %s", err.message);
    goto done;
  }
  if (mx_stream_create(dev, 0, &s) != MX_OK) {
    snprintf(why, cap, "stream");
    goto done;
  }
  if (st_run_device(m, s, in, got, why, cap) != MX_OK) goto done;
  have_got = true;
  for (size_t j = 0; j < no; j++) {
    char w[200];
    if (!st_same_bits(&got[j], &ref[j], w, sizeof w)) {
      snprintf(why, cap, "output %zu ('%s'): %s", j, ref[j].name ? ref[j].name : "?", w);
      goto done;
    }
  }
  ok = true;
done:
  for (size_t j = 0; have_got && j < no; j++) mx_tensor_release(&got[j]);
  for (size_t j = 0; have_ref && j < no; j++) mx_tensor_release(&ref[j]);
  for (size_t i = 0; have_in && i < ni; i++) mx_tensor_release(&in[i]);
  mx_stream_destroy(s);
  mx__static_model_destroy(m);
  mx__static_plan_destroy(p);
  free(got);
  free(ref);
  free(in);
  return ok;
}

/* --- random graphs ---------------------------------------------------------------------------- */

mx_status st_random_graph(uint64_t seed, int n_ops, bool corner_outputs, mx_graph **out) {
  return mxt_random_graph(seed, n_ops, corner_outputs, out);
}

/* --- independent memory-plan check ------------------------------------------------------------ */

bool st_check_memory_plan(const mx_static_plan *p, char *why, size_t cap) {
  size_t n = mx__static_plan_task_count(p), nb = mx__static_plan_buffer_count(p);
  size_t words = (n + 63) / 64;
  uint64_t *reach = calloc((n ? n : 1) * (words ? words : 1), sizeof *reach); /* reach[b]: tasks HB b */
  size_t *last_on = calloc(MX_STATIC_MAX_STREAMS, sizeof *last_on);
  size_t *recorder = NULL;
  bool ok = false;
  mx_static_report r;
  mx__static_plan_report(p, &r);
  recorder = calloc(r.events ? r.events : 1, sizeof *recorder);
  if (!reach || !last_on || !recorder) goto done;
  for (size_t s = 0; s < MX_STATIC_MAX_STREAMS; s++) last_on[s] = SIZE_MAX;
  for (size_t t = 0; t < n; t++) {
    mx_static_task_info ti;
    mx__static_plan_task(p, t, &ti);
    uint64_t *rt = reach + t * words;
    size_t preds[65];
    size_t np = 0;
    if (last_on[ti.stream] != SIZE_MAX) preds[np++] = last_on[ti.stream];
    for (uint32_t k = 0; k < ti.n_waits && np < 65; k++) preds[np++] = recorder[ti.waits[k]];
    for (size_t k = 0; k < np; k++) {
      size_t q = preds[k];
      rt[q / 64] |= 1ull << (q % 64);
      for (size_t w = 0; w < words; w++) rt[w] |= reach[q * words + w];
    }
    for (uint32_t k = 0; k < ti.n_records; k++) recorder[ti.records[k]] = t;
    last_on[ti.stream] = t;
  }
#define HB(a, b) ((reach[(size_t)(b)*words + (a) / 64] >> ((a) % 64)) & 1u)
  if (r.fm_bytes < r.lower_bound) {
    snprintf(why, cap, "arena %llu below the lower bound %llu", (unsigned long long)r.fm_bytes,
             (unsigned long long)r.lower_bound);
    goto done;
  }
  for (size_t i = 0; i < nb; i++) {
    mx_static_buffer_info a;
    mx__static_plan_buffer(p, i, &a);
    if (a.offset % 64 || a.size % 64 || a.offset + a.size > r.fm_bytes || a.n_users == 0) {
      snprintf(why, cap, "buffer %zu ('%s') misplaced", i, a.name);
      goto done;
    }
    for (size_t j = i + 1; j < nb; j++) {
      mx_static_buffer_info b;
      mx__static_plan_buffer(p, j, &b);
      if (a.offset >= b.offset + b.size || b.offset >= a.offset + a.size) continue;
      bool ab = true, ba = true;
      for (uint32_t x = 0; x < a.n_users; x++)
        for (uint32_t y = 0; y < b.n_users; y++) {
          ab = ab && HB(a.users[x], b.users[y]);
          ba = ba && HB(b.users[y], a.users[x]);
        }
      if (!ab && !ba) {
        snprintf(why, cap, "buffers '%s' and '%s' overlap in memory while their lifetimes overlap", a.name,
                 b.name);
        goto done;
      }
    }
  }
  /* Every FM argument of every task lies in a buffer that lists the task. */
  for (size_t t = 0; t < n; t++) {
    const mx__ptask *pt = &p->tasks[t];
    for (uint32_t k = 0; k <= pt->n_in + pt->n_out; k++) {
      uint64_t off, size;
      if (k == pt->n_in + pt->n_out) {
        if (!pt->ws_size) continue;
        off = pt->ws_offset;
        size = pt->ws_size;
      } else {
        if (pt->t[k].alloc != MX__ID_FM) continue;
        off = pt->t[k].offset;
        size = pt->t[k].nbytes;
      }
      bool found = false;
      for (size_t i = 0; i < nb && !found; i++) {
        mx_static_buffer_info b;
        mx__static_plan_buffer(p, i, &b);
        if (off < b.offset || off + size > b.offset + b.size) continue;
        for (uint32_t u = 0; u < b.n_users && !found; u++) found = b.users[u] == t;
      }
      if (!found) {
        snprintf(why, cap, "task %zu ('%s') argument %u is in no buffer that lists the task", t, pt->name, k);
        goto done;
      }
    }
  }
#undef HB
  ok = true;
done:
  free(recorder);
  free(last_on);
  free(reach);
  return ok;
}
