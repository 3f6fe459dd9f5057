/* Launching device ops, reading data-dependent output shapes, and naming failed kernels.
 *
 * Every device op owns a few launch blocks (the plan's meta_entries): a header naming the op
 * for failure reports, then a kernel task block (mx_kernel_task + mx_kernel_call with every
 * tensor's dims and strides and the workspace size), filled once per set of concrete shapes.
 * A launch finds the block matching the current shapes (the last one used first), patches the
 * data and workspace pointers and hands it to mx__hal_launch, which copies it; nothing is
 * recomputed when the shapes repeat. The HAL runs dyn_task_run, which runs the task and keeps
 * a record on the host: the last op finished per stream, and the first op that failed with the
 * kernel's explanation. */
#include <stdio.h>
#include <string.h>

#include "dynamic_exec/dynamic_exec_impl.h"

static mx_status dyn_task_run(void *args, size_t size) {
  mx__dyn_launch_hdr *h = args;
  unsigned char *task = (unsigned char *)args + MX__DYN_HDR_SIZE;
  mx_status st = mx__kernel_task_run(task, size - MX__DYN_HDR_SIZE);
  if (st == MX_OK) {
    atomic_store_explicit(&h->fail->done[h->stream].v, ((uint64_t)h->step << 32) | h->op,
                          memory_order_release);
    return MX_OK;
  }
  uint32_t none = MX__DYN_NONE;
  if (atomic_compare_exchange_strong(&h->fail->op, &none, h->op))
    atomic_store(&h->fail->why, mx__kernel_task_call(task)->why);
  return st;
}

/* True when block's tensors have the current shapes of op i's values. */
static bool meta_matches(const mx_dyn_exec *e, const mx__dyn_op *op, const unsigned char *block) {
  const mx_kernel_call *call = mx__kernel_task_call((void *)(block + MX__DYN_HDR_SIZE));
  const mx_node *nd = op->nd;
  for (uint32_t j = 0; j < op->n_in + op->n_out; j++) {
    mx_value_id v = j < op->n_in ? nd->inputs[j] : nd->outputs[j - op->n_in];
    if (v == MX_NO_VALUE) continue;
    const mx__dyn_val *rv = &e->vals[v];
    const mx_ktensor *t = &call->t[j];
    if (t->rank != rv->rank) return false;
    for (int32_t d = 0; d < rv->rank; d++)
      if (t->dims[d] != rv->dims[d]) return false;
    if (e->any_pad) {
      int64_t strides[MX_MAX_RANK];
      mx__dyn_val_strides(rv, strides);
      if (memcmp(strides, t->strides, (size_t)rv->rank * sizeof *strides) != 0) return false;
    }
  }
  return true;
}

/* The constant input of a device op's kernel packed for it (the first block of these shapes
 * packs it; blocks of other shapes with the same layout share it), or NULL: the kernel has no
 * pre-packed form for these shapes, or that input is not a constant. */
static const void *op_prepack(mx_dyn_exec *e, const mx__dyn_op *op, mx_kernel_call *call) {
  const mx_kprepack_hook *hook = e->prepack_ok ? mx__kprepack_hook(op->kernel) : NULL;
  if (!hook || hook->input >= op->n_in) return NULL;
  mx_value_id v = op->nd->inputs[hook->input];
  if (v == MX_NO_VALUE || e->plan->vals[v].home != MX__DYN_HOME_CONST || !e->vals[v].dev) return NULL;
  call->t[hook->input].data = e->vals[v].dev;
  const void *block = mx__kprepack_get(&e->prepacks, op->kernel, call);
  call->t[hook->input].data = NULL; /* set at each launch */
  return block;
}

/* A launch block's pre-packed constant and workspace. A pack given up for want of memory is
 * retried by the op's next launch, so that a passing out-of-memory does not leave the op packing
 * its weights on every run for the executor's lifetime. */
static void meta_prepack(mx_dyn_exec *e, size_t i, mx_kernel_call *call) {
  const mx__dyn_op *op = &e->plan->ops[i];
  const uint32_t failures = e->prepacks.failures;
  call->prepacked = op->kind == MX__DYN_OP_DEVICE ? op_prepack(e, op, call) : NULL;
  e->ops[i].prepack_retry = e->prepacks.failures != failures;
  call->workspace_size = op->kernel->workspace ? op->kernel->workspace(call) : 0;
}

static void meta_fill(mx_dyn_exec *e, size_t i, unsigned char *block) {
  const mx__dyn_op *op = &e->plan->ops[i];
  const mx_node *nd = op->nd;
  memset(block, 0, op->block_size);
  mx__dyn_launch_hdr *h = (mx__dyn_launch_hdr *)block;
  h->fail = &e->fail;
  h->op = (uint32_t)i;
  h->stream = op->stream;
  mx_kernel_task *task = (mx_kernel_task *)(block + MX__DYN_HDR_SIZE);
  task->run = op->kernel->run;
  task->shape_out = (op->flags & MX__DYN_DATA_DEP) ? e->ops[i].shape_out : NULL;
  mx_kernel_call *call = mx__kernel_task_call(task);
  call->params = nd->params;
  call->n_in = (uint16_t)op->n_in;
  call->n_out = (uint16_t)op->n_out;
  for (uint32_t j = 0; j < op->n_in + op->n_out; j++) {
    mx_value_id v = j < op->n_in ? nd->inputs[j] : nd->outputs[j - op->n_in];
    if (v == MX_NO_VALUE) continue;
    const mx__dyn_val *rv = &e->vals[v];
    call->t[j].dtype = e->plan->vals[v].dtype;
    mx__ktensor_set_dims(&call->t[j], rv->rank, rv->dims);
    if (rv->pad_rows) mx__dyn_val_strides(rv, call->t[j].strides);
  }
  meta_prepack(e, i, call);
}

unsigned char *mx__dyn_meta(mx_dyn_exec *e, size_t i) {
  const mx__dyn_op *op = &e->plan->ops[i];
  mx__dyn_opstate *os = &e->ops[i];
  const uint32_t bs = op->block_size;
  if (os->n_meta) {
    unsigned char *last = os->meta + (size_t)os->last_meta * bs;
    if (meta_matches(e, op, last)) {
      e->stats.meta_hits++;
      if (os->prepack_retry) meta_prepack(e, i, mx__kernel_task_call(last + MX__DYN_HDR_SIZE));
      return last;
    }
    for (uint8_t k = 0; k < os->n_meta; k++) {
      unsigned char *b = os->meta + (size_t)k * bs;
      if (k == os->last_meta || !meta_matches(e, op, b)) continue;
      os->last_meta = k;
      e->stats.meta_hits++;
      if (os->prepack_retry) meta_prepack(e, i, mx__kernel_task_call(b + MX__DYN_HDR_SIZE));
      return b;
    }
  }
  uint8_t k;
  if (os->n_meta < e->plan->opt.meta_entries) {
    k = os->n_meta++;
  } else {
    k = os->next_victim;
    os->next_victim = (uint8_t)((os->next_victim + 1) % e->plan->opt.meta_entries);
  }
  unsigned char *b = os->meta + (size_t)k * bs;
  meta_fill(e, i, b);
  os->last_meta = k;
  e->stats.meta_misses++;
  return b;
}

mx_status mx__dyn_launch_device(mx_dyn_exec *e, size_t i) {
  const mx_dyn_plan *p = e->plan;
  const mx__dyn_op *op = &p->ops[i];
  const mx_node *nd = op->nd;
  const uint32_t s = op->stream;
  mx_stream *stream = e->streams[s];
  mx_status st;
  for (uint32_t j = 0; j < op->n_in; j++) {
    mx_value_id v = nd->inputs[j];
    if (v == MX_NO_VALUE) continue;
    mx__dyn_val *rv = &e->vals[v];
    if (!rv->dev && rv->nbytes) {
      st = mx__dyn_upload(e, v, s);
      if (st != MX_OK) return st;
    } else if (rv->upload_stream >= 0 && (uint32_t)rv->upload_stream != s && p->vals[v].upload_event >= 0) {
      st = mx_stream_wait_event(stream, e->events[p->vals[v].upload_event]);
      if (st != MX_OK) goto launch_error;
      e->stats.event_waits++;
    }
  }
  for (uint32_t w = 0; w < op->n_wait; w++) {
    st = mx_stream_wait_event(stream, e->events[p->waits[op->wait_first + w]]);
    if (st != MX_OK) goto launch_error;
    e->stats.event_waits++;
  }
  unsigned char *block = mx__dyn_meta(e, i);
  if (e->prepack_error != MX_OK) {
    st = e->prepack_error;
    e->prepack_error = MX_OK;
    return mx__dyn_fail(e, st, "node '%s' (%s): keeping its pre-packed weights: %s", nd->name, nd->op_type,
                        mx_device_last_error(e->dev));
  }
  mx__dyn_launch_hdr *h = (mx__dyn_launch_hdr *)block;
  h->step = (uint16_t)e->step;
  mx_kernel_call *call = mx__kernel_task_call(block + MX__DYN_HDR_SIZE);
  for (uint32_t j = 0; j < op->n_in; j++)
    call->t[j].data = nd->inputs[j] == MX_NO_VALUE ? NULL : e->vals[nd->inputs[j]].dev;
  for (uint32_t k = 0; k < op->n_out; k++) call->t[op->n_in + k].data = e->vals[nd->outputs[k]].dev;
  void *ws = NULL;
  if (call->workspace_size) {
    st = mx__caching_alloc(e->alloc, call->workspace_size, stream, &ws, &e->err);
    if (st != MX_OK) {
      mx__error_prefix(&e->err, "node '%s' (%s): workspace: ", nd->name, nd->op_type);
      return st;
    }
  }
  call->workspace = ws;
  st = mx__hal_launch_named(stream, dyn_task_run, block, op->block_size, nd->name);
  e->used_streams |= 1u << s;
  if (ws) mx__caching_free(e->alloc, ws, stream, NULL);
  if (st != MX_OK) goto launch_error;
  for (uint32_t j = 0; j < op->n_in; j++)
    if (nd->inputs[j] != MX_NO_VALUE) mx__dyn_mark_use(e, nd->inputs[j], s);
  if (op->event >= 0 && (st = mx_event_record(e->events[op->event], stream)) != MX_OK) goto launch_error;
  e->stats.launches++;
  return MX_OK;

launch_error:
  return mx__dyn_fail(e, st, "node '%s' (%s): launch failed: %s", nd->name, nd->op_type,
                      mx_device_last_error(e->dev));
}

mx_status mx__dyn_op_sync_shape(mx_dyn_exec *e, size_t i) {
  const mx__dyn_op *op = &e->plan->ops[i];
  if (op->kind != MX__DYN_OP_DEVICE || !(op->flags & MX__DYN_DATA_DEP)) return MX_OK;
  e->cur_op = (uint32_t)i;
  mx_status st = mx_stream_synchronize(e->streams[op->stream]);
  e->stats.shape_syncs++;
  if (st != MX_OK) return mx__dyn_kernel_failure(e, st);
  const int64_t *rec = e->ops[i].shape_out;
  for (uint32_t k = 0; k < op->n_out; k++, rec += MX_KERNEL_SHAPE_RECORD) {
    mx_value_id v = op->nd->outputs[k];
    mx__dyn_val *rv = &e->vals[v];
    const mx__dyn_pval *pv = &e->plan->vals[v];
    int64_t rank = rec[0];
    bool ok = rank == rv->rank;
    size_t nb = pv->esize;
    for (int32_t d = 0; ok && d < rv->rank; d++) {
      ok = rec[1 + d] >= 0 && rec[1 + d] <= rv->dims[d];
      nb *= (size_t)rec[1 + d];
    }
    if (!ok)
      return mx__dyn_fail(e, MX_ERR_KERNEL,
                          "node '%s' (%s): the kernel reported an output %u shape beyond its "
                          "upper bound",
                          op->nd->name, op->nd->op_type, k);
    memcpy(rv->dims, rec + 1, (size_t)rv->rank * sizeof *rv->dims);
    rv->nbytes = nb;
  }
  return mx__dyn_bind_outputs(e, i);
}

mx_status mx__dyn_kernel_failure(mx_dyn_exec *e, mx_status st) {
  const mx_dyn_plan *p = e->plan;
  uint32_t fop = atomic_load(&e->fail.op);
  const char *why = atomic_load(&e->fail.why);
  mx_stream_error se = {0};
  if (fop == MX__DYN_NONE) {
    /* The kernel did not run (an injected fault, a failed copy or wait): the failing op is the
     * first launched op after the last one that finished on a failed stream. */
    uint32_t limit = e->cur_op == MX__DYN_NONE ? (uint32_t)p->n_ops : e->cur_op + 1;
    uint16_t step = (uint16_t)e->step;
    for (uint32_t k = 0; k < e->n_streams; k++) {
      mx_stream_error ke;
      if (mx_stream_get_error(e->streams[k], &ke) == MX_OK) continue;
      uint64_t done = atomic_load(&e->fail.done[k].v);
      uint32_t after = (uint16_t)(done >> 32) == step ? (uint32_t)done : MX__DYN_NONE;
      for (uint32_t i = after == MX__DYN_NONE ? 0 : after + 1; i < limit && i < fop; i++) {
        if (p->ops[i].kind != MX__DYN_OP_DEVICE || p->ops[i].stream != k) continue;
        fop = i;
        se = ke;
        break;
      }
      if (se.status == MX_OK) se = ke;
    }
  } else {
    mx_stream_get_error(e->streams[p->ops[fop].stream], &se);
  }
  const char *detail = why ? why : se.message[0] ? se.message : mx_status_string(st);
  if (fop == MX__DYN_NONE) return mx__dyn_fail(e, st, "device work failed: %s", detail);
  const mx_node *nd = p->ops[fop].nd;
  return mx__dyn_fail(e, st, "node '%s' (%s): kernel failed: %s", nd->name, nd->op_type, detail);
}
