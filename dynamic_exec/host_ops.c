/* Host-side data movement and host kernels.
 *
 * Host ops (shape-only ops and small integer arithmetic) run synchronously on the calling
 * thread, calling the CPU kernel directly on host tensors; their outputs live in persistent
 * host buffers owned by the executor, and output elements that are exactly a symbol in the
 * graph's symbolic value bind that symbol. Host code that needs a value produced on the device
 * reads it back after synchronizing the producer's stream; device ops that need a host value
 * get it by an asynchronous upload into an allocator block on their stream (recording an event
 * when consumers on other streams wait for it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dynamic_exec/dynamic_exec_impl.h"

mx_status mx__dyn_host_reserve(mx__dyn_val *rv, size_t nbytes) {
  if (rv->host_buf && nbytes <= rv->host_cap) return MX_OK;
  size_t cap = (nbytes + 63) & ~(size_t)63;
  if (cap < 64) cap = 64;
  void *p = aligned_alloc(64, cap);
  if (!p) return MX_ERR_OUT_OF_MEMORY;
  free(rv->host_buf);
  rv->host_buf = p;
  rv->host_cap = cap;
  return MX_OK;
}

mx_status mx__dyn_readback(mx_dyn_exec *e, mx_value_id v) {
  mx__dyn_val *rv = &e->vals[v];
  if (rv->host || !rv->nbytes) return MX_OK;
  const char *name = e->g->values[v].name;
  if (!rv->dev) return mx__dyn_fail(e, MX_ERR_INTERNAL, "value '%s' has no data", name);
  mx_stream *s = rv->ready_stream >= 0 ? e->streams[rv->ready_stream] : e->caller;
  mx_status st = mx_stream_synchronize(s);
  if (st != MX_OK) return mx__dyn_kernel_failure(e, st);
  if (mx__dyn_host_reserve(rv, rv->nbytes) != MX_OK)
    return mx__dyn_fail(e, MX_ERR_OUT_OF_MEMORY, "value '%s': out of host memory for a read-back", name);
  st = mx_device_copy(e->dev, rv->host_buf, rv->dev, rv->nbytes, MX_COPY_D2H);
  if (st != MX_OK)
    return mx__dyn_fail(e, st, "value '%s': read-back failed: %s", name, mx_device_last_error(e->dev));
  rv->host = rv->host_buf;
  e->stats.readbacks++;
  return MX_OK;
}

mx_status mx__dyn_upload(mx_dyn_exec *e, mx_value_id v, uint32_t s) {
  mx__dyn_val *rv = &e->vals[v];
  if (rv->dev || !rv->nbytes) return MX_OK;
  const char *name = e->g->values[v].name;
  if (!rv->host) return mx__dyn_fail(e, MX_ERR_INTERNAL, "value '%s' has no data", name);
  mx_status st = mx__dyn_alloc_value(e, v, rv->nbytes, (int)s);
  if (st != MX_OK) return st;
  mx_stream *stream = e->streams[s];
  st = mx__hal_copy_async_named(stream, rv->dev, rv->host, rv->nbytes, MX_COPY_H2D, name);
  if (st != MX_OK)
    return mx__dyn_fail(e, st, "value '%s': upload failed: %s", name, mx_device_last_error(e->dev));
  rv->upload_stream = (int8_t)s;
  rv->ready_stream = (int8_t)s;
  e->h2d_pending |= 1u << s;
  e->used_streams |= 1u << s;
  int32_t ev = e->plan->vals[v].upload_event;
  if (ev >= 0 && (st = mx_event_record(e->events[ev], stream)) != MX_OK)
    return mx__dyn_fail(e, st, "value '%s': recording its upload failed: %s", name,
                        mx_device_last_error(e->dev));
  e->stats.uploads++;
  return MX_OK;
}

/* Binds the symbols that are exactly elements of op i's output values in the graph. */
static mx_status bind_values(mx_dyn_exec *e, const mx__dyn_op *op) {
  for (uint32_t k = 0; k < op->n_out; k++) {
    mx_value_id v = op->nd->outputs[k];
    const mx__dyn_val *rv = &e->vals[v];
    const mx__dyn_pval *pv = &e->plan->vals[v];
    if (pv->sv_len <= 0 || !rv->host || rv->nbytes != (size_t)pv->sv_len * pv->esize) continue;
    const mx__dyn_dimx *sv = e->plan->svx + pv->sv_first;
    for (int32_t j = 0; j < pv->sv_len; j++) {
      if (sv[j].kind != MX__DYN_DIM_SYM && sv[j].kind != MX__DYN_DIM_BIND) continue;
      int64_t x = pv->dtype == MX_INT64 ? ((const int64_t *)rv->host)[j] : ((const int32_t *)rv->host)[j];
      if (!mx__dyn_bind_symbol(e, (uint32_t)sv[j].v, x))
        return mx__dyn_fail(e, MX_ERR_SHAPE,
                            "node '%s' (%s): output %u element %d is %lld, but symbol '%s' is "
                            "already %lld",
                            op->nd->name, op->nd->op_type, k, (int)j, (long long)x,
                            mx_symtab_symbol_name(e->g->syms, (size_t)sv[j].v),
                            (long long)e->sym_val[sv[j].v]);
    }
  }
  return MX_OK;
}

mx_status mx__dyn_run_host(mx_dyn_exec *e, size_t i) {
  const mx__dyn_op *op = &e->plan->ops[i];
  const mx_node *nd = op->nd;
  const bool shape_only = (op->flags & MX__DYN_SHAPE_ONLY) != 0;
  for (uint32_t j = 0; j < op->n_in; j++) {
    mx_value_id v = nd->inputs[j];
    if (v == MX_NO_VALUE || (j == 0 && shape_only)) continue;
    mx_status st = mx__dyn_readback(e, v);
    if (st != MX_OK) return st;
  }
  unsigned char *block = mx__dyn_meta(e, i);
  mx_kernel_call *call = mx__kernel_task_call(block + MX__DYN_HDR_SIZE);
  for (uint32_t j = 0; j < op->n_in; j++) {
    mx_value_id v = nd->inputs[j];
    call->t[j].data = v == MX_NO_VALUE || (j == 0 && shape_only) ? NULL : e->vals[v].host;
  }
  for (uint32_t k = 0; k < op->n_out; k++) call->t[op->n_in + k].data = e->vals[nd->outputs[k]].host;
  if (call->workspace_size > e->host_ws_cap) {
    void *ws = aligned_alloc(64, (call->workspace_size + 63) & ~(size_t)63);
    if (!ws)
      return mx__dyn_fail(e, MX_ERR_OUT_OF_MEMORY, "node '%s': out of host memory for scratch", nd->name);
    free(e->host_ws);
    e->host_ws = ws;
    e->host_ws_cap = call->workspace_size;
  }
  call->workspace = call->workspace_size ? e->host_ws : NULL;
  call->why = NULL;
  mx_status st = op->kernel->run(call);
  e->stats.host_runs++;
  if (st != MX_OK)
    return mx__dyn_fail(e, st, "node '%s' (%s): kernel failed: %s", nd->name, nd->op_type,
                        call->why ? call->why : mx_status_string(st));
  return bind_values(e, op);
}
