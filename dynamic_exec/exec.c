/* Dynamic executor lifetime and the step skeleton: create/destroy, mx__dyn_exec_run, the
 * prepare / launch / free steps of one op, step begin (stream join) and end (output delivery),
 * releasing values and recovering from a failed step. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dynamic_exec/dynamic_exec_impl.h"

mx_status mx__dyn_fail(mx_dyn_exec *e, mx_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  mx__error_vfail(&e->err, st, fmt, ap);
  va_end(ap);
  return st;
}

const char *mx__dyn_exec_last_error(const mx_dyn_exec *e) { return e ? e->err.message : ""; }

mx_caching_allocator *mx__dyn_exec_allocator(mx_dyn_exec *e) { return e ? e->alloc : NULL; }

mx_stream *mx__dyn_exec_stream(mx_dyn_exec *e, size_t k) {
  return e && k < e->n_streams ? e->streams[k] : NULL;
}

void mx__dyn_exec_stats_get(const mx_dyn_exec *e, mx_dyn_exec_stats *st) {
  if (e && st) *st = e->stats;
}

/* --- values ----------------------------------------------------------------------------------- */

mx_status mx__dyn_alloc_value(mx_dyn_exec *e, mx_value_id v, size_t nbytes, int s) {
  mx__dyn_val *rv = &e->vals[v];
  void *p = NULL;
  mx_status st = mx__caching_alloc(e->alloc, nbytes, s >= 0 ? e->streams[s] : NULL, &p, &e->err);
  if (st != MX_OK) {
    mx__error_prefix(&e->err, "value '%s': ", e->g->values[v].name);
    return st;
  }
  rv->dev = p;
  rv->block = p;
  rv->buf = p ? v : MX__DYN_NONE;
  rv->refs = p ? 1 : 0;
  rv->use_mask = s >= 0 ? 1u << s : 0;
  rv->last_stream = (int8_t)s;
  return MX_OK;
}

/* Gives an owner's block back to the allocator, ordered after every stream that used it. */
static void release_block(mx_dyn_exec *e, mx__dyn_val *o) {
  if (!o->block) return;
  mx_stream *last = o->last_stream >= 0 ? e->streams[o->last_stream] : NULL;
  uint32_t others = o->use_mask;
  if (o->last_stream >= 0) others &= ~(1u << o->last_stream);
  while (others) {
    int k = __builtin_ctz(others);
    others &= others - 1;
    if (e->streams[k] != last)
      MX_IGNORE_STATUS(mx__caching_record_stream(e->alloc, o->block, e->streams[k], NULL));
  }
  mx__caching_free(e->alloc, o->block, last, NULL);
  o->block = NULL;
  o->use_mask = 0;
  o->last_stream = -1;
}

void mx__dyn_value_free(mx_dyn_exec *e, mx_value_id v) {
  mx__dyn_val *rv = &e->vals[v];
  if (!rv->live || rv->pinned) return;
  rv->live = false;
  rv->dev = NULL;
  rv->host = NULL;
  rv->upload_stream = -1;
  uint32_t b = rv->buf;
  rv->buf = MX__DYN_NONE;
  if (b != MX__DYN_NONE && --e->vals[b].refs == 0) release_block(e, &e->vals[b]);
}

void mx__dyn_op_free_after(mx_dyn_exec *e, size_t i) {
  const mx__dyn_op *op = &e->plan->ops[i];
  const uint32_t *f = e->plan->frees + op->free_first;
  for (uint32_t k = 0; k < op->n_free; k++) mx__dyn_value_free(e, f[k]);
}

/* --- per-op steps ----------------------------------------------------------------------------- */

static size_t shape_bytes(const mx__dyn_val *rv, uint32_t esize) {
  size_t n = esize;
  for (int32_t d = 0; d < rv->rank; d++) n *= (size_t)rv->dims[d];
  return n;
}

/* True when value v holds data of the current step (constants always do), or when nothing
 * computes it at run time (no producer, or a skipped one: readers use its symbolic values). */
static bool ready(const mx_dyn_exec *e, mx_value_id v) {
  const mx__dyn_val *rv = &e->vals[v];
  if (rv->pinned || (rv->live && rv->live_step == e->step)) return true;
  const mx__dyn_pval *pv = &e->plan->vals[v];
  if (pv->home == MX__DYN_HOME_INPUT) return false;
  return pv->producer == MX__DYN_NONE || e->plan->ops[pv->producer].kind == MX__DYN_OP_SKIP;
}

/* The per-op kernels must come in plan order (an op's inputs computed first, its shapes
 * inferred before its launch). A lowered graph read from a file is checked for its shape, not
 * for that order, so a damaged one could otherwise launch an op on values this step never
 * computed: each op checks its inputs (and, at launch, its outputs) and refuses instead. */
static mx_status check_ready(mx_dyn_exec *e, const mx__dyn_op *op, bool outputs, const char *what) {
  const mx_node *nd = op->nd;
  for (uint32_t j = 0; j < op->n_in + (outputs ? op->n_out : 0); j++) {
    mx_value_id v = j < op->n_in ? nd->inputs[j] : nd->outputs[j - op->n_in];
    if (v == MX_NO_VALUE || ready(e, v)) continue;
    return mx__dyn_fail(e, MX_ERR_INVALID_GRAPH,
                        "node '%s' (%s): %s before its %s '%s' was computed this step", nd->name, nd->op_type,
                        what, j < op->n_in ? "input" : "output", e->g->values[v].name);
  }
  return MX_OK;
}

/* True when the caller's buffer bound to value v (rv->bound_out) has v's dtype and current dims
 * and nbytes > 0. */
static bool bound_fits(const mx_dyn_exec *e, const mx__dyn_val *rv, mx_value_id v, size_t nbytes) {
  const mx_tensor *t = &e->out_bind[rv->bound_out];
  if (!nbytes || t->dtype != e->plan->vals[v].dtype || t->rank != rv->rank) return false;
  return memcmp(t->dims, rv->dims, (size_t)rv->rank * sizeof *rv->dims) == 0;
}

static bool overlaps(uintptr_t lo, uintptr_t hi, const void *p, size_t n) {
  return p && n && (uintptr_t)p < hi && lo < (uintptr_t)p + n;
}

mx_status mx__dyn_bind_output(mx_dyn_exec *e, size_t k, const mx_tensor *buf) {
  if (!e) return MX_ERR_INVALID_ARGUMENT;
  if (!e->in_step) return mx__dyn_fail(e, MX_ERR_INVALID_ARGUMENT, "binding output %zu outside a step", k);
  const mx_graph *g = e->g;
  if (k >= g->n_outputs)
    return mx__dyn_fail(e, MX_ERR_INVALID_ARGUMENT, "binding output %zu: graph '%s' has %zu outputs", k,
                        g->name, g->n_outputs);
  if (!buf || !buf->data || buf->placement != MX_DEVICE || buf->rank < 0 || buf->rank > MX_MAX_RANK)
    return MX_OK;
  mx_value_id v = g->outputs[k];
  const mx__dyn_pval *pv = &e->plan->vals[v];
  mx__dyn_val *rv = &e->vals[v];
  if (rv->bound_out != MX__DYN_NONE || pv->home != MX__DYN_HOME_DEVICE || pv->producer == MX__DYN_NONE ||
      buf->dtype != pv->dtype)
    return MX_OK;
  const mx__dyn_op *op = &e->plan->ops[pv->producer];
  if (op->kind != MX__DYN_OP_DEVICE || (op->flags & MX__DYN_DATA_DEP)) return MX_OK;
  /* The producer would overwrite what the step still reads, or another bound output. */
  size_t n;
  if (!mx__dyn_dims_bytes(buf->dims, buf->rank, pv->esize, &n) || !n) return MX_OK;
  uintptr_t lo = (uintptr_t)buf->data, hi = lo + n;
  for (size_t i = 0; i < g->n_inputs; i++) {
    const mx__dyn_val *in = &e->vals[g->inputs[i]];
    if (overlaps(lo, hi, in->dev, in->nbytes) || overlaps(lo, hi, in->host, in->nbytes)) return MX_OK;
  }
  for (size_t j = 0; j < g->n_outputs && e->n_out_bound; j++)
    if (overlaps(lo, hi, e->out_bind[j].data, e->out_bind_bytes[j])) return MX_OK;
  e->out_bind[k] = *buf;
  e->out_bind_bytes[k] = n;
  e->n_out_bound++;
  rv->bound_out = (uint32_t)k;
  return MX_OK;
}

/* Forgets every output binding of the step. */
static void unbind_outputs(mx_dyn_exec *e) {
  if (!e->n_out_bound) return;
  const mx_graph *g = e->g;
  for (size_t k = 0; k < g->n_outputs; k++) {
    if (!e->out_bind[k].data) continue;
    e->vals[g->outputs[k]].bound_out = MX__DYN_NONE;
    e->vals[g->outputs[k]].pad_rows = 0;
    e->out_bind[k].data = NULL;
  }
  e->n_out_bound = 0;
}

mx_status mx__dyn_op_prepare(mx_dyn_exec *e, size_t i) {
  const mx_dyn_plan *p = e->plan;
  const mx__dyn_op *op = &p->ops[i];
  if (op->kind == MX__DYN_OP_SKIP) return MX_OK;
  e->cur_op = (uint32_t)i;
  /* An eval op reads neither the data nor the shapes of its inputs, only the step's symbols
   * (an unbound one fails its evaluation), so its inputs may already be released. */
  mx_status st = op->kind == MX__DYN_OP_EVAL ? MX_OK : check_ready(e, op, false, "shape inference");
  if (st != MX_OK) return st;
  if (op->flags & MX__DYN_CONTROL) { /* shapes and data come from its run */
    for (uint32_t k = 0; k < op->n_out; k++) {
      mx__dyn_val_set_host(e, &e->vals[op->nd->outputs[k]], NULL);
    }
    return MX_OK;
  }
  st = mx__dyn_shapes(e, i);
  if (st != MX_OK) return st;
  const mx_value_id *outs = op->nd->outputs;
  switch (op->kind) {
    case MX__DYN_OP_DEVICE:
      for (uint32_t k = 0; k < op->n_out; k++) {
        mx__dyn_val *rv = &e->vals[outs[k]];
        size_t nbytes = shape_bytes(rv, p->vals[outs[k]].esize);
        if (rv->bound_out != MX__DYN_NONE && bound_fits(e, rv, outs[k], nbytes)) {
          /* The caller's buffer: borrowed, so nothing is ever freed for it. */
          rv->dev = e->out_bind[rv->bound_out].data;
          rv->buf = MX__DYN_NONE;
        } else {
          st = mx__dyn_alloc_value(e, outs[k], nbytes, op->stream);
          if (st != MX_OK) return st;
        }
        rv->host = NULL;
        rv->live = true;
        rv->live_step = e->step;
        rv->ready_stream = (int8_t)op->stream;
        rv->upload_stream = -1;
      }
      return MX_OK;
    case MX__DYN_OP_HOST:
      for (uint32_t k = 0; k < op->n_out; k++) {
        mx__dyn_val *rv = &e->vals[outs[k]];
        st = mx__dyn_host_reserve(rv, rv->nbytes);
        if (st != MX_OK) return mx__dyn_fail(e, st, "node '%s': out of host memory", op->nd->name);
        mx__dyn_val_set_host(e, rv, rv->host_buf);
      }
      return MX_OK;
    case MX__DYN_OP_EVAL:
      for (uint32_t k = 0; k < op->n_out; k++) {
        mx__dyn_val *rv = &e->vals[outs[k]];
        mx__dyn_val_set_host(e, rv, rv->host_buf);
      }
      return MX_OK;
    case MX__DYN_OP_ALIAS: {
      const mx__dyn_val *in = &e->vals[op->nd->inputs[0]];
      mx__dyn_val *rv = &e->vals[outs[0]];
      /* Data uploaded this step is ordered by the uploader's event, which the alias does not
       * carry: the alias then keeps only the host copy and uploads on its own if needed. */
      bool share = in->upload_stream < 0;
      rv->dev = share ? in->dev : NULL;
      rv->buf = share ? in->buf : MX__DYN_NONE;
      if (rv->buf != MX__DYN_NONE) e->vals[rv->buf].refs++;
      rv->host = in->host;
      rv->ready_stream = in->ready_stream;
      rv->upload_stream = -1;
      rv->live = true;
      rv->live_step = e->step;
      if (rv->nbytes != in->nbytes)
        return mx__dyn_fail(e, MX_ERR_SHAPE, "node '%s' (%s): output has %zu bytes but input '%s' has %zu",
                            op->nd->name, op->nd->op_type, rv->nbytes, e->g->values[op->nd->inputs[0]].name,
                            in->nbytes);
      return MX_OK;
    }
    default: return MX_OK;
  }
}

mx_status mx__dyn_op_launch(mx_dyn_exec *e, size_t i) {
  const mx__dyn_op *op = &e->plan->ops[i];
  e->cur_op = (uint32_t)i;
  if (op->kind != MX__DYN_OP_DEVICE && op->kind != MX__DYN_OP_HOST) return MX_OK;
  mx_status st = check_ready(e, op, true, "launched");
  if (st != MX_OK) return st;
  if (op->flags & MX__DYN_CONTROL) return mx__dyn_run_control(e, i);
  return op->kind == MX__DYN_OP_DEVICE ? mx__dyn_launch_device(e, i) : mx__dyn_run_host(e, i);
}

/* --- step begin / end / abort ----------------------------------------------------------------- */

mx_status mx__dyn_step_begin(mx_dyn_exec *e, const mx_tensor *inputs, size_t n_inputs, mx_stream *caller) {
  if (e->in_step) mx__dyn_step_abort(e);
  e->step++;
  e->stats.steps++;
  e->in_step = true;
  e->used_streams = 0;
  e->changed = 0;
  e->cur_op = MX__DYN_NONE;
  atomic_store(&e->fail.op, MX__DYN_NONE);
  atomic_store(&e->fail.why, NULL);
  e->caller = caller ? caller : e->streams[0];
  if (mx_stream_device(e->caller) != e->dev)
    return mx__dyn_fail(e, MX_ERR_INVALID_ARGUMENT, "the caller stream belongs to another device");
  while (e->h2d_pending) {
    int k = __builtin_ctz(e->h2d_pending);
    e->h2d_pending &= e->h2d_pending - 1;
    /* Only the wait matters here: a failed copy is reported by the step that queued it. */
    MX_IGNORE_STATUS(mx_event_synchronize(e->h2d_events[k]));
  }
  for (size_t k = 0; k < e->n_bound; k++) e->sym_val[e->bound_syms[k]] = INT64_MIN;
  mx_status st = mx__dyn_bind_inputs(e, inputs, n_inputs);
  if (st != MX_OK) return st;
  bool join = false;
  for (uint32_t k = 0; k < e->n_streams; k++) join = join || e->streams[k] != e->caller;
  if (join) {
    st = mx_event_record(e->start_event, e->caller);
    for (uint32_t k = 0; k < e->n_streams && st == MX_OK; k++)
      if (e->streams[k] != e->caller) st = mx_stream_wait_event(e->streams[k], e->start_event);
    if (st != MX_OK)
      return mx__dyn_fail(e, st, "ordering the streams after the caller stream failed: %s",
                          mx_device_last_error(e->dev));
  }
  return MX_OK;
}

/* Delivers graph output i (see mx__dyn_exec_run). */
static mx_status deliver(mx_dyn_exec *e, size_t i, mx_tensor *t, bool *need_sync) {
  const mx_graph *g = e->g;
  mx_value_id v = g->outputs[i];
  mx__dyn_val *rv = &e->vals[v];
  const mx__dyn_pval *pv = &e->plan->vals[v];
  const char *name = g->values[v].name;
  mx_status st = MX_OK;
  if (!rv->live) return mx__dyn_fail(e, MX_ERR_INTERNAL, "output '%s' was not computed", name);
  if (t->placement != MX_HOST && t->placement != MX_DEVICE)
    return mx__dyn_fail(e, MX_ERR_INVALID_ARGUMENT, "output '%s': invalid placement %d", name,
                        (int)t->placement);
  size_t n = rv->nbytes;
  const void *src_dev = rv->dev, *src_host = rv->host;
  if (n && !src_dev && !src_host) return mx__dyn_fail(e, MX_ERR_INTERNAL, "output '%s' has no data", name);
  if (t->data) {
    bool same = t->dtype == pv->dtype && t->rank == rv->rank;
    for (int32_t d = 0; same && d < rv->rank; d++) same = t->dims[d] == rv->dims[d];
    if (!same) {
      char want[160] = "", *w = want;
      for (int32_t d = 0; d < rv->rank; d++)
        w += snprintf(w, (size_t)(want + sizeof want - w), "%s%lld", d ? ", " : "", (long long)rv->dims[d]);
      return mx__dyn_fail(e, MX_ERR_SHAPE, "output '%s': the caller's buffer must be %s [%s]", name,
                          mx_dtype_name(pv->dtype), want);
    }
  } else {
    e->out_alloc[i] = true;
    if (t->placement == MX_DEVICE) {
      bool own = rv->buf == v && rv->refs == 1 && rv->block;
      for (size_t k = i + 1; own && k < g->n_outputs; k++) own = g->outputs[k] != v;
      if (own) {
        /* Hand the block over: the caller frees it on its stream, after the join. */
        t->data = rv->block;
        rv->block = NULL;
        rv->buf = MX__DYN_NONE;
        rv->refs = 0;
        rv->dev = NULL;
        n = 0;
      } else if (n) {
        st = mx__caching_alloc(e->alloc, n, e->caller, &t->data, &e->err);
        if (st != MX_OK) {
          mx__error_prefix(&e->err, "output '%s': ", name);
          return st;
        }
      }
    } else if (n) {
      t->data = malloc(n);
      if (!t->data)
        return mx__dyn_fail(e, MX_ERR_OUT_OF_MEMORY, "output '%s': out of host memory (%zu bytes)", name, n);
    }
    t->dtype = pv->dtype;
    t->rank = rv->rank;
    memset(t->dims, 0, sizeof t->dims);
    memcpy(t->dims, rv->dims, (size_t)rv->rank * sizeof *rv->dims);
  }
  t->name = name;
  if (!n) return MX_OK;
  if (t->data == src_dev) {
    e->stats.outputs_in_place++; /* written by its producer (mx__dyn_bind_output) */
    return MX_OK;
  }
  if (!e->out_alloc[i]) e->stats.output_copies++;
  if (t->placement == MX_HOST) {
    if (src_host) {
      memcpy(t->data, src_host, n);
    } else {
      st = mx__hal_copy_async_named(e->caller, t->data, src_dev, n, MX_COPY_D2H, name);
      *need_sync = true;
    }
  } else {
    st = mx__hal_copy_async_named(e->caller, t->data, src_dev ? src_dev : src_host, n,
                                  src_dev ? MX_COPY_D2D : MX_COPY_H2D, name);
    if (!src_dev) e->h2d_pending |= 1u << MX_DYN_MAX_STREAMS;
  }
  if (st != MX_OK)
    return mx__dyn_fail(e, st, "output '%s': copy failed: %s", name, mx_device_last_error(e->dev));
  return MX_OK;
}

/* Frees the outputs this step's delivery allocated and empties them. */
static void undeliver(mx_dyn_exec *e, mx_tensor *outputs, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (!e->out_alloc[i]) continue;
    if (outputs[i].placement == MX_DEVICE)
      mx__caching_free(e->alloc, outputs[i].data, NULL, NULL);
    else
      free(outputs[i].data);
    mx_placement pl = outputs[i].placement;
    memset(&outputs[i], 0, sizeof outputs[i]);
    outputs[i].placement = pl;
    e->out_alloc[i] = false;
  }
}

mx_status mx__dyn_step_end(mx_dyn_exec *e, mx_tensor *outputs, size_t n_outputs) {
  const mx_graph *g = e->g;
  if (n_outputs != g->n_outputs)
    return mx__dyn_fail(e, MX_ERR_INVALID_ARGUMENT, "graph '%s' has %zu outputs, %zu requested", g->name,
                        g->n_outputs, n_outputs);
  if (n_outputs && !outputs) return mx__dyn_fail(e, MX_ERR_INVALID_ARGUMENT, "outputs is NULL");
  mx_status st = MX_OK;
  e->cur_op = MX__DYN_NONE;
  /* Join: the caller stream waits for every stream this step used. */
  for (uint32_t k = 0; k < e->n_streams && st == MX_OK; k++) {
    if (!(e->used_streams & (1u << k)) || e->streams[k] == e->caller) continue;
    bool dup = false;
    for (uint32_t j = 0; j < k && !dup; j++)
      dup = e->streams[j] == e->streams[k] && (e->used_streams & (1u << j));
    if (dup) continue;
    st = mx_event_record(e->end_events[k], e->streams[k]);
    if (st == MX_OK) st = mx_stream_wait_event(e->caller, e->end_events[k]);
    if (st != MX_OK)
      return mx__dyn_fail(e, st, "joining the streams into the caller stream failed: %s",
                          mx_device_last_error(e->dev));
  }
  bool need_sync = false;
  for (size_t i = 0; i < n_outputs; i++) e->out_alloc[i] = false;
  for (size_t i = 0; i < n_outputs && st == MX_OK; i++) st = deliver(e, i, &outputs[i], &need_sync);
  if (st == MX_OK && need_sync) {
    st = mx_stream_synchronize(e->caller);
    if (st != MX_OK) st = mx__dyn_kernel_failure(e, st);
  }
  if (st != MX_OK) {
    undeliver(e, outputs, n_outputs);
    return st;
  }
  for (size_t i = 0; i < n_outputs; i++) {
    e->out_alloc[i] = false;
    mx__dyn_value_free(e, g->outputs[i]);
  }
  unbind_outputs(e);
  /* Blocks freed this step become reusable on other streams once each stream gets here. */
  bool caller_fenced = false;
  for (uint32_t k = 0; k < e->n_streams; k++) {
    if (!(e->used_streams & (1u << k))) continue;
    mx__caching_fence(e->alloc, e->streams[k]);
    caller_fenced = caller_fenced || e->streams[k] == e->caller;
  }
  if (!caller_fenced) mx__caching_fence(e->alloc, e->caller);
  for (uint32_t pend = e->h2d_pending; pend; pend &= pend - 1) {
    uint32_t k = (uint32_t)__builtin_ctz(pend);
    mx_stream *s = k < e->n_streams ? e->streams[k] : e->caller;
    if (mx_event_record(e->h2d_events[k], s) != MX_OK) {
      MX_IGNORE_STATUS(mx_stream_synchronize(s)); /* waits even when the stream failed */
      e->h2d_pending &= ~(1u << k);
    }
  }
  e->in_step = false;
  return MX_OK;
}

/* Drains s; resets it when it failed. */
static void drain(mx_stream *s) {
  if (s && mx_stream_synchronize(s) != MX_OK) mx_stream_reset(s);
}

void mx__dyn_step_abort(mx_dyn_exec *e) {
  if (!e->in_step) return;
  for (uint32_t k = 0; k < e->n_streams; k++) drain(e->streams[k]);
  drain(e->caller);
  for (size_t v = 0; v < e->plan->n_values; v++) {
    mx__dyn_val *rv = &e->vals[v];
    if (rv->block) mx__caching_free(e->alloc, rv->block, NULL, NULL);
    rv->block = NULL;
    rv->refs = 0;
    rv->use_mask = 0;
    rv->last_stream = -1;
    if (rv->pinned) continue;
    rv->live = false;
    rv->dev = NULL;
    rv->host = NULL;
    rv->buf = MX__DYN_NONE;
    rv->upload_stream = -1;
  }
  for (size_t i = 0; i < e->plan->n_ops; i++) e->ops[i].shapes_valid = false;
  e->h2d_pending = 0;
  unbind_outputs(e);
  e->stats.failed_steps++;
  e->in_step = false;
}

mx_status mx__dyn_exec_run(mx_dyn_exec *e, const mx_tensor *inputs, size_t n_inputs, mx_tensor *outputs,
                           size_t n_outputs, mx_stream *caller_stream) {
  if (!e) return MX_ERR_INVALID_ARGUMENT;
  const mx_dyn_plan *p = e->plan;
  if (n_outputs != e->g->n_outputs)
    return mx__dyn_fail(e, MX_ERR_INVALID_ARGUMENT, "graph '%s' has %zu outputs, %zu requested", e->g->name,
                        e->g->n_outputs, n_outputs);
  if (n_outputs && !outputs) return mx__dyn_fail(e, MX_ERR_INVALID_ARGUMENT, "outputs is NULL");
  mx_status st = mx__dyn_step_begin(e, inputs, n_inputs, caller_stream);
  for (size_t k = 0; k < n_outputs && st == MX_OK; k++)
    if (outputs[k].data && outputs[k].placement == MX_DEVICE) st = mx__dyn_bind_output(e, k, &outputs[k]);
  for (size_t i = 0; i < p->n_ops && st == MX_OK; i++) {
    const mx__dyn_op *op = &p->ops[i];
    if (op->kind == MX__DYN_OP_SKIP) continue;
    st = mx__dyn_op_prepare(e, i);
    if (st == MX_OK) st = mx__dyn_op_launch(e, i);
    if (st == MX_OK && (op->flags & MX__DYN_DATA_DEP)) st = mx__dyn_op_sync_shape(e, i);
    if (st == MX_OK) mx__dyn_op_free_after(e, i);
  }
  if (st == MX_OK) st = mx__dyn_step_end(e, outputs, n_outputs);
  if (st != MX_OK) mx__dyn_step_abort(e);
  return st;
}

/* --- lifetime --------------------------------------------------------------------------------- */

static mx_status create_events(mx_dyn_exec *e, mx_error *err) {
  const mx_dyn_plan *p = e->plan;
  e->events = calloc(p->n_events ? p->n_events : 1, sizeof *e->events);
  if (!e->events) return mx__fail_oom(err, "executor events");
  mx_status st = MX_OK;
  for (uint32_t k = 0; k < p->n_events && st == MX_OK; k++) st = mx_event_create(e->dev, &e->events[k]);
  if (st == MX_OK) st = mx_event_create(e->dev, &e->start_event);
  for (uint32_t k = 0; k < e->n_streams && st == MX_OK; k++) st = mx_event_create(e->dev, &e->end_events[k]);
  for (uint32_t k = 0; k <= MX_DYN_MAX_STREAMS && st == MX_OK; k++)
    st = mx_event_create(e->dev, &e->h2d_events[k]);
  if (st != MX_OK)
    return mx__fail(err, st, "creating executor events failed: %s", mx_device_last_error(e->dev));
  return MX_OK;
}

/* Whether value v is a constant whose device copy kernels read. */
static bool device_constant(const mx_dyn_exec *e, size_t v) {
  const mx__dyn_val *rv = &e->vals[v];
  return e->plan->vals[v].home == MX__DYN_HOME_CONST && rv->host && rv->nbytes &&
         (e->plan->vals[v].flags & MX__DYN_V_DEV_READ);
}

/* Whether kernels read constant v in the graph's own bytes: on a host-memory device (not in
 * checking mode, which wants every buffer a kernel touches to be the device's) a large constant
 * held in a store (64-byte aligned, see mx__const_store) needs no copy. Only stores: which
 * constants go to the block then depends on sizes alone, so executors of equal plans still lay
 * out equal blocks (share_constants). The graph outlives the executor (plan->g is borrowed by the
 * plan, which the executor borrows), and init_values pinned its bytes: a static plan compiled
 * later (a specialization sharing them) no longer moves them into its weight block. */
static bool const_in_place(const mx_dyn_exec *e, size_t v) {
  return mx__hal_device_host_memory(e->dev) && !mx__hal_device_checking(e->dev) && e->g->values[v].store &&
         ((uintptr_t)e->vals[v].host & 63) == 0;
}

/* The constants kernels read live in one device block, in value order at 64-byte offsets: one
 * allocation instead of one per weight, large enough for huge pages
 * (mx_device_options.huge_pages), so a step's walk over the weights misses the TLB per 2 MiB
 * rather than per 4 KiB. This lays them out: with `base`, points each constant's device address
 * at its place in the block; with `staging`, copies its bytes to the same place there. */
static void place_constants(mx_dyn_exec *e, char *base, char *staging) {
  size_t off = 0;
  for (size_t v = 0; v < e->plan->n_values; v++) {
    if (!device_constant(e, v) || const_in_place(e, v)) continue;
    mx__dyn_val *rv = &e->vals[v];
    if (base) rv->dev = base + off;
    if (staging) memcpy(staging + off, rv->host, rv->nbytes);
    off += (rv->nbytes + 63) & ~(size_t)63;
  }
}

/* Uploads the constants' block (place_constants). With mx_dyn_options.share_constants it is a
 * shared block of the device: laid out in host memory first (padding zeroed, so equal constants
 * give equal bytes) and acquired, so executors of equal plans on one device hold one copy. */
static mx_status upload_constants(mx_dyn_exec *e, mx_error *err) {
  size_t total = 0;
  for (size_t v = 0; v < e->plan->n_values; v++) {
    if (!device_constant(e, v)) continue;
    if (const_in_place(e, v)) {
      e->vals[v].dev = (void *)(uintptr_t)e->vals[v].host;
      continue;
    }
    size_t n = (e->vals[v].nbytes + 63) & ~(size_t)63;
    if (n < e->vals[v].nbytes || total > SIZE_MAX - n)
      return mx__fail(err, MX_ERR_LIMIT, "the constants exceed the address space");
    total += n;
  }
  if (!total) return MX_OK;
  mx_status st;
  if (e->plan->opt.share_constants) {
    char *staging = calloc(1, total);
    if (!staging) return mx__fail_oom(err, "constants staging");
    place_constants(e, NULL, staging);
    st = mx_device_shared_acquire(e->dev, staging, total, 64, &e->const_block);
    free(staging);
    if (st != MX_OK)
      return mx__fail(err, st, "constants: %zu bytes: %s", total, mx_device_last_error(e->dev));
    e->const_shared = true;
    place_constants(e, e->const_block, NULL);
    return MX_OK;
  }
  st = mx_device_alloc(e->dev, total, 64, &e->const_block);
  if (st != MX_OK)
    return mx__fail(err, st, "constants: allocation of %zu bytes failed: %s", total,
                    mx_device_last_error(e->dev));
  place_constants(e, e->const_block, NULL);
  for (size_t v = 0; v < e->plan->n_values; v++) {
    if (!device_constant(e, v) || const_in_place(e, v)) continue;
    const mx__dyn_val *rv = &e->vals[v];
    st = mx_device_copy(e->dev, rv->dev, rv->host, rv->nbytes, MX_COPY_H2D);
    if (st != MX_OK)
      return mx__fail(err, st, "constant '%s': upload of %zu bytes failed: %s", e->g->values[v].name,
                      rv->nbytes, mx_device_last_error(e->dev));
  }
  return MX_OK;
}

static mx_status init_values(mx_dyn_exec *e, mx_error *err) {
  const mx_dyn_plan *p = e->plan;
  const mx_graph *g = e->g;
  for (size_t v = 0; v < p->n_values; v++) {
    mx__dyn_val *rv = &e->vals[v];
    const mx__dyn_pval *pv = &p->vals[v];
    rv->buf = MX__DYN_NONE;
    rv->bound_out = MX__DYN_NONE;
    rv->last_stream = rv->ready_stream = rv->upload_stream = -1;
    if (pv->host_cap) {
      mx_status st = mx__dyn_host_reserve(rv, pv->host_cap);
      if (st != MX_OK) return mx__fail_oom(err, "executor host buffers");
    }
    const mx_value *val = &g->values[v];
    if (pv->home != MX__DYN_HOME_CONST || !val->data) continue;
    const mx_tensor *t = val->data;
    rv->pinned = rv->live = true;
    rv->host = t->data;
    mx__graph_const_pin(g, (mx_value_id)v); /* rv->host stays valid while g lives */
    rv->rank = t->rank;
    memcpy(rv->dims, t->dims, sizeof rv->dims);
    mx_tensor_nbytes(t, &rv->nbytes);
  }
  return upload_constants(e, err);
}

static mx_status init_ops(mx_dyn_exec *e, mx_error *err) {
  const mx_dyn_plan *p = e->plan;
  for (size_t i = 0; i < p->n_ops; i++) {
    const mx__dyn_op *op = &p->ops[i];
    mx__dyn_opstate *os = &e->ops[i];
    if (op->kind != MX__DYN_OP_DEVICE && op->kind != MX__DYN_OP_HOST) continue;
    os->meta = aligned_alloc(16, (size_t)op->block_size * p->opt.meta_entries);
    if (!os->meta) return mx__fail_oom(err, "executor launch blocks");
    if (op->flags & MX__DYN_DATA_DEP) {
      os->shape_out = calloc((size_t)op->n_out * MX_KERNEL_SHAPE_RECORD, sizeof *os->shape_out);
      if (!os->shape_out) return mx__fail_oom(err, "executor shape records");
    }
  }
  return MX_OK;
}

static mx_status init_symbols(mx_dyn_exec *e, mx_error *err) {
  const mx_dyn_plan *p = e->plan;
  size_t ns = p->n_syms ? p->n_syms : 1;
  e->sym_val = malloc(ns * sizeof *e->sym_val);
  e->sym_prev = malloc(ns * sizeof *e->sym_prev);
  e->bound_syms = malloc((e->g->n_inputs * MX_MAX_RANK + p->n_late + 1) * sizeof *e->bound_syms);
  bool *seen = calloc(ns, sizeof *seen);
  mx_status st = MX_OK;
  if (!e->sym_val || !e->sym_prev || !e->bound_syms || !seen) {
    st = mx__fail_oom(err, "executor symbols");
    goto done;
  }
  for (size_t s = 0; s < ns; s++) e->sym_val[s] = e->sym_prev[s] = INT64_MIN;
  for (size_t i = 0; i < e->g->n_inputs; i++) {
    const mx__dyn_pval *pv = &p->vals[e->g->inputs[i]];
    for (int32_t k = 0; k < pv->rank; k++) e->in_exprs[i] |= pv->dims[k].kind == MX__DYN_DIM_EXPR;
  }
  for (size_t k = 0; k < e->g->n_inputs * MX_MAX_RANK; k++) {
    uint32_t s = p->input_syms[k];
    if (s == MX__DYN_NONE || seen[s]) continue;
    seen[s] = true;
    e->bound_syms[e->n_bound++] = s;
  }
  for (size_t k = 0; k < p->n_late; k++) {
    if (seen[p->late_syms[k]]) continue;
    seen[p->late_syms[k]] = true;
    e->bound_syms[e->n_bound++] = p->late_syms[k];
  }
done:
  free(seen);
  return st;
}

/* Where an executor keeps a pre-packed block: beside its constants, a shared block of the device
 * when they are shared (executors of equal plans hold one copy), else its own copy. */
static void *prepack_keep(void *ctx, const void *host, size_t bytes) {
  mx_dyn_exec *e = ctx;
  void *block = NULL;
  mx_status st = mx__hal_copy_keep(e->dev, e->const_shared, host, bytes, &block);
  /* Out of device memory: the kernel packs per run and a later launch retries. Any other failure
   * is the device's, and the launch reports it. */
  if (st != MX_OK && st != MX_ERR_DEVICE_OOM && e->prepack_error == MX_OK) e->prepack_error = st;
  return st == MX_OK ? block : NULL;
}

static void prepack_drop(void *ctx, void *block) {
  mx_dyn_exec *e = ctx;
  mx__hal_copy_release(e->dev, e->const_shared, block);
}

void mx__dyn_exec_prepacked(const mx_dyn_exec *e, uint32_t *blocks, uint64_t *bytes) {
  *blocks = e ? e->prepacks.blocks : 0;
  *bytes = e ? e->prepacks.bytes : 0;
}

mx_status mx__dyn_exec_create(mx_device *dev, const mx_dyn_plan *plan, mx_caching_allocator *alloc,
                              mx_stream *const *streams, size_t n_streams, mx_dyn_exec **out, mx_error *err) {
  if (out) *out = NULL;
  if (!dev || !plan || !out)
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "mx__dyn_exec_create: NULL argument");
  if (alloc && mx__caching_allocator_device(alloc) != dev)
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "mx__dyn_exec_create: the allocator serves another device");
  for (size_t k = 0; streams && k < n_streams; k++)
    if (!streams[k] || mx_stream_device(streams[k]) != dev)
      return mx__fail(err, MX_ERR_INVALID_ARGUMENT,
                      "mx__dyn_exec_create: stream %zu is NULL or of another device", k);
  mx_status st = MX_OK;
  mx_dyn_exec *e = aligned_alloc(64, (sizeof *e + 63) & ~(size_t)63);
  if (!e) return mx__fail_oom(err, "executor");
  memset(e, 0, sizeof *e);
  e->dev = dev;
  e->plan = plan;
  e->g = plan->g;
  e->n_streams = plan->n_streams;
  atomic_init(&e->fail.op, MX__DYN_NONE);
  e->prepacks = (mx_kprepack_cache){.keep = prepack_keep, .drop = prepack_drop, .ctx = e};
  e->prepack_ok = mx__kprepack_enabled() && mx__hal_device_host_memory(dev);
  if (alloc) {
    e->alloc = alloc;
  } else {
    st = mx__caching_allocator_create(dev, &e->alloc, err);
    if (st != MX_OK) goto destroy_exec;
    e->own_alloc = true;
  }
  for (uint32_t k = 0; k < e->n_streams; k++) {
    if (streams && n_streams) {
      e->streams[k] = streams[k % n_streams];
      continue;
    }
    st = mx_stream_create(dev, 0, &e->own_streams[k]);
    if (st != MX_OK) {
      mx__fail(err, st, "creating executor stream %u failed: %s", k, mx_device_last_error(dev));
      goto destroy_exec;
    }
    e->n_own_streams = k + 1;
    e->streams[k] = e->own_streams[k];
  }
  size_t nio = plan->max_io ? plan->max_io : 1;
  e->vals = calloc(plan->n_values ? plan->n_values : 1, sizeof *e->vals);
  e->ops = calloc(plan->n_ops ? plan->n_ops : 1, sizeof *e->ops);
  e->infos = calloc(2 * nio, sizeof *e->infos);
  e->info_sv = calloc(2 * nio * MX_SV_MAX, sizeof *e->info_sv);
  e->info_data = calloc(nio, sizeof *e->info_data);
  e->out_alloc = calloc(e->g->n_outputs ? e->g->n_outputs : 1, sizeof *e->out_alloc);
  e->out_bind = calloc(e->g->n_outputs ? e->g->n_outputs : 1, sizeof *e->out_bind);
  e->out_bind_bytes = calloc(e->g->n_outputs ? e->g->n_outputs : 1, sizeof *e->out_bind_bytes);
  e->in_pos = calloc(e->g->n_inputs ? e->g->n_inputs : 1, sizeof *e->in_pos);
  e->in_exprs = calloc(e->g->n_inputs ? e->g->n_inputs : 1, sizeof *e->in_exprs);
  if (!e->vals || !e->ops || !e->infos || !e->info_sv || !e->info_data || !e->out_alloc || !e->out_bind ||
      !e->out_bind_bytes || !e->in_pos || !e->in_exprs) {
    st = mx__fail_oom(err, "executor");
    goto destroy_exec;
  }
  st = mx_symtab_create(&e->scratch);
  if (st != MX_OK) {
    mx__fail_oom(err, "executor symbol table");
    goto destroy_exec;
  }
  st = create_events(e, err);
  if (st == MX_OK) st = init_symbols(e, err);
  if (st == MX_OK) st = init_ops(e, err);
  if (st == MX_OK) st = init_values(e, err);
  if (st != MX_OK) goto destroy_exec;
  *out = e;
  return MX_OK;

destroy_exec:
  mx__dyn_exec_destroy(e);
  return st;
}

void mx__dyn_exec_destroy(mx_dyn_exec *e) {
  if (!e) return;
  if (e->in_step) mx__dyn_step_abort(e);
  for (uint32_t k = 0; k < e->n_streams; k++)
    if (e->streams[k]) MX_IGNORE_STATUS(mx_stream_synchronize(e->streams[k])); /* drains, failed or not */
  if (e->vals) {
    for (size_t v = 0; v < e->plan->n_values; v++) {
      mx__dyn_val *rv = &e->vals[v];
      if (rv->block && e->alloc) mx__caching_free(e->alloc, rv->block, NULL, NULL);
      free(rv->host_buf);
    }
  }
  mx__kprepack_cache_clear(&e->prepacks); /* the streams drained above: no kernel reads them */
  if (e->const_block && e->const_shared)
    mx_device_shared_release(e->dev, e->const_block);
  else if (e->const_block)
    mx_device_free(e->dev, e->const_block);
  if (e->ops) {
    for (size_t i = 0; i < e->plan->n_ops; i++) {
      free(e->ops[i].meta);
      free(e->ops[i].shape_out);
      free(e->ops[i].infer_key);
    }
  }
  if (e->events)
    for (uint32_t k = 0; k < e->plan->n_events; k++) mx_event_destroy(e->events[k]);
  free(e->events);
  mx_event_destroy(e->start_event);
  for (uint32_t k = 0; k < MX_DYN_MAX_STREAMS; k++) mx_event_destroy(e->end_events[k]);
  for (uint32_t k = 0; k <= MX_DYN_MAX_STREAMS; k++) mx_event_destroy(e->h2d_events[k]);
  if (e->own_alloc) {
    mx__caching_allocator_destroy(e->alloc);
  } else {
    for (uint32_t k = 0; k < e->n_own_streams; k++) mx__caching_forget_stream(e->alloc, e->own_streams[k]);
  }
  for (uint32_t k = 0; k < e->n_own_streams; k++) mx_stream_destroy(e->own_streams[k]);
  mx_symtab_destroy(e->scratch);
  free(e->vals);
  free(e->ops);
  free(e->infos);
  free(e->info_sv);
  free(e->info_data);
  free(e->out_alloc);
  free(e->out_bind);
  free(e->out_bind_bytes);
  free(e->in_pos);
  free(e->in_exprs);
  free(e->sym_val);
  free(e->sym_prev);
  free(e->bound_syms);
  free(e->host_ws);
  free(e);
}
