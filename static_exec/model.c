/* Static models: a plan loaded onto a device (StaticModelCreate), its per-step address refresh
 * (UpdateArgs, UpdateWorkspaces) and execution (Execute), and the accessors the V2 runtime and
 * tools use (GetRunAddress, sizes, statistics).
 *
 * Create sinks every plan task into one HAL model: a kernel task's argument block is an
 * mx_kernel_task with its tensors' dtypes and dims filled in and its data and workspace pointers
 * left as slots (alloc_id, offset); a copy task's block is an mx__copy_args. The HAL copies the
 * blocks, so afterwards the model keeps only the params bytes the blocks point to, the
 * input/output descriptions and one table of last addresses per allocation entry.
 *
 * A step compares the address of every input and output with the one installed last and hands
 * only the changed entries to mx__hal_model_update_bases; frozen inputs are compared once. A
 * step whose addresses did not move makes no refresh call at all. Nothing on the step path
 * allocates, except the first time a host tensor is given for an entry (its staging buffer). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hal/hal.h"
#include "kernels/prepack.h"
#include "static_exec/static_exec_impl.h"

struct mx_static_model {
  mx_device *dev;    /* borrowed; outlives the model */
  mx_hal_model *hal; /* the sunk task chain (owned) */
  mx_arena arena;    /* names and params bytes the task blocks point to */
  uint32_t n_inputs, n_outputs;
  uint32_t n_ids;               /* allocation-table entries */
  mx__pio *inputs, *outputs;    /* arena */
  void *weights;                /* device copy of the WEIGHT region (owned, or held as a shared
                                block when weights_shared), NULL if empty */
  bool weights_shared;          /* weights came from mx_device_shared_acquire */
  mx__mxm_mapping *weights_map; /* weights are the plan's mapped ones, registered with the
                                   device (held; no copy), or NULL */
  uint64_t weight_bytes;
  mx_kprepack_cache prepacks; /* weights of Conv / MatMul / Gemm tasks packed once at create
                                 (host-memory devices), freed with the model */
  bool share_prepacks;        /* prepacks are shared device blocks (with the weights shared) */
  mx_status prepack_error;    /* a device failure other than out-of-memory while keeping one */
  void *fm_owned; /* model-owned FM arena (device, owned) or NULL */
  void *fm_base;  /* FM arena of the next execute (owned or supplied), or NULL */
  uint64_t fm_bytes;
  bool fm_external;     /* FM supplied by update_workspaces */
  bool args_set;        /* update_args succeeded at least once */
  bool *frozen;         /* per input */
  void **last;          /* per alloc id: address installed last (NULL: none yet) */
  void **staging;       /* per input, then per output: model-owned device buffer for
                           host tensors, allocated on first use (owned), or NULL */
  const void **host_in; /* per input: host source of this step's staged copy, or NULL */
  void **host_out;      /* per output: host destination of this step's copy, or NULL */
  uint32_t *upd_ids;    /* scratch for one refresh (n_ids entries) */
  void **upd_addrs;
  uint32_t *pending; /* ids refreshed since the last execute (n_ids entries) */
  uint32_t n_pending;
  uint8_t *pending_flag; /* per id: already in pending */
  uint32_t *last_ref;    /* ids refreshed for the last execute, ascending (n_ids entries) */
  uint32_t n_last_ref;
  uint64_t executions, total_refreshed, staged_copies;
  mx_error err; /* the last failure of update / execute */
};

static mx_status model_fail(mx_static_model *m, mx_status st, const char *fmt, ...) MX_PRINTF(3, 4);

static mx_status model_fail(mx_static_model *m, mx_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  mx__error_vfail(&m->err, st, fmt, ap);
  va_end(ap);
  return st;
}

const char *mx__static_model_last_error(const mx_static_model *m) { return m ? m->err.message : ""; }

void mx__static_model_prepacked(const mx_static_model *m, uint32_t *blocks, uint64_t *bytes) {
  *blocks = m ? m->prepacks.blocks : 0;
  *bytes = m ? m->prepacks.bytes : 0;
}

void mx__static_load_options_init(mx_static_load_options *o) {
  if (o) memset(o, 0, sizeof *o);
}

mx_status mx__static_copy_fn(void *args, size_t size) {
  if (size < sizeof(mx__copy_args)) return MX_ERR_INTERNAL;
  const mx__copy_args *a = args;
  if (a->n) memmove(a->dst, a->src, (size_t)a->n);
  return MX_OK;
}

/* --- create ----------------------------------------------------------------------------------- */

static mx_status copy_ios(mx_static_model *m, const mx__pio *src, uint32_t n, mx__pio **dst, mx_error *err) {
  *dst = mx__arena_array(&m->arena, n ? n : 1, sizeof **dst, 8);
  if (!*dst) return mx__fail_oom(err, "model inputs and outputs");
  for (uint32_t i = 0; i < n; i++) {
    (*dst)[i] = src[i];
    (*dst)[i].name = mx__arena_strdup(&m->arena, src[i].name ? src[i].name : "");
    if (!(*dst)[i].name) return mx__fail_oom(err, "model names");
  }
  return MX_OK;
}

/* Where a model keeps a pre-packed block: a shared block of the device when its weights are
 * shared (models of one plan on one device hold one copy), else its own copy. */
static void *prepack_keep(void *ctx, const void *host, size_t bytes) {
  mx_static_model *m = ctx;
  void *block = NULL;
  mx_status st = mx__hal_copy_keep(m->dev, m->share_prepacks, host, bytes, &block);
  /* Out of device memory: the task packs per run, as it would without pre-packing. Any other
   * failure is the device's, and the model's create reports it (as a dynamic launch does). */
  if (st != MX_OK && st != MX_ERR_DEVICE_OOM && m->prepack_error == MX_OK) m->prepack_error = st;
  return st == MX_OK ? block : NULL;
}

static void prepack_drop(void *ctx, void *block) {
  mx_static_model *m = ctx;
  mx__hal_copy_release(m->dev, m->share_prepacks, block);
}

/* The weights of kernel task pt (call: its block, dims and params set) packed once for the
 * kernel when it has a pre-packed form and reads that input from the WEIGHT region, which the
 * model's host-memory device reads in place; NULL otherwise (the kernel packs per run). */
static const void *task_prepack(mx_static_model *m, const mx__ptask *pt, const mx_kernel_def *kd,
                                mx_kernel_call *call) {
  const mx_kprepack_hook *hook = mx__kprepack_hook(kd);
  if (!hook || !m->weights || !mx__kprepack_enabled() || !mx__hal_device_host_memory(m->dev) ||
      hook->input >= pt->n_in || pt->t[hook->input].alloc != MX__ID_WEIGHT)
    return NULL;
  call->t[hook->input].data = (char *)m->weights + pt->t[hook->input].offset;
  const void *block = mx__kprepack_get(&m->prepacks, kd, call);
  call->t[hook->input].data = NULL; /* a slot: the HAL installs it */
  return block;
}

/* Builds plan task ti as a HAL task (argument block in blk, slots in slots, both large enough)
 * and appends it with its event waits and records. */
static mx_status sink_task(mx_static_model *m, const mx_static_plan *p, uint32_t ti, void *blk,
                           mx_hal_slot *slots, mx_error *err) {
  const mx__ptask *pt = &p->tasks[ti];
  mx_hal_task task = {.args = blk, .slots = slots};
  uint32_t ns = 0;
  if (pt->kind == MX__TASK_COPY) {
    mx__copy_args *a = blk;
    memset(a, 0, sizeof *a);
    a->n = pt->t[0].nbytes;
    slots[ns++] = (mx_hal_slot){(uint32_t)offsetof(mx__copy_args, src), pt->t[0].alloc, pt->t[0].offset};
    slots[ns++] = (mx_hal_slot){(uint32_t)offsetof(mx__copy_args, dst), pt->t[1].alloc, pt->t[1].offset};
    task.fn = mx__static_copy_fn;
    task.args_size = (uint32_t)sizeof *a;
  } else {
    uint32_t nt = pt->n_in + pt->n_out;
    size_t size = mx__kernel_task_size(nt);
    memset(blk, 0, size);
    mx_kernel_task *kt = blk;
    mx_kernel_call *call = mx__kernel_task_call(blk);
    call->n_in = (uint16_t)pt->n_in;
    call->n_out = (uint16_t)pt->n_out;
    for (uint32_t i = 0; i < nt; i++) {
      const mx__ptensor *t = &pt->t[i];
      call->t[i].dtype = t->dtype;
      mx__ktensor_set_dims(&call->t[i], t->dtype == MX_DTYPE_UNDEFINED ? 0 : t->rank, t->dims);
      if (t->alloc != MX__NO_ALLOC)
        slots[ns++] = (mx_hal_slot){(uint32_t)mx__kernel_task_data_offset(i), t->alloc, t->offset};
    }
    const mx_kernel_def *kd = mx__kernel_find(pt->domain, pt->op, call);
    if (!kd)
      return mx__fail(err, MX_ERR_UNSUPPORTED, "task %u ('%s', %s): no CPU kernel for its dtypes", ti,
                      pt->name, pt->op);
    kt->run = kd->run;
    kt->shape_out = NULL;
    if (pt->params_size) {
      void *params = mx__arena_memdup(&m->arena, pt->params, pt->params_size, 16);
      if (!params) return mx__fail_oom(err, "model params");
      call->params = params;
    }
    call->prepacked = task_prepack(m, pt, kd, call);
    if (m->prepack_error != MX_OK)
      return mx__fail(err, m->prepack_error, "task %u ('%s', %s): keeping its pre-packed weights: %s", ti,
                      pt->name, pt->op, mx_device_last_error(m->dev));
    call->workspace_size = (size_t)pt->ws_size;
    if (pt->ws_size)
      slots[ns++] = (mx_hal_slot){(uint32_t)mx__kernel_task_workspace_offset(), MX__ID_FM, pt->ws_offset};
    task.fn = mx__kernel_task_run;
    task.args_size = (uint32_t)size;
  }
  task.n_slots = ns;
  for (uint32_t k = 0; k < pt->n_waits; k++) {
    if (mx__hal_model_add_event_wait(m->hal, pt->stream, pt->waits[k]) != MX_OK)
      return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "task %u ('%s'): %s", ti, pt->name,
                      mx__hal_model_last_error(m->hal));
  }
  mx_status st = mx__hal_model_add_task_named(m->hal, pt->stream, &task, pt->name, NULL);
  if (st != MX_OK)
    return mx__fail(err, st, "task %u ('%s'): %s", ti, pt->name, mx__hal_model_last_error(m->hal));
  for (uint32_t k = 0; k < pt->n_records; k++) {
    if (mx__hal_model_add_event_record(m->hal, pt->stream, pt->records[k]) != MX_OK)
      return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "task %u ('%s'): %s", ti, pt->name,
                      mx__hal_model_last_error(m->hal));
  }
  return MX_OK;
}

/* Installs base `addr` for alloc id `id` and remembers it. */
static mx_status set_base(mx_static_model *m, uint32_t id, void *addr, mx_error *err) {
  mx_status st = mx__hal_model_update_bases(m->hal, &id, &addr, 1);
  if (st != MX_OK) return mx__fail(err, st, "%s", mx__hal_model_last_error(m->hal));
  m->last[id] = addr;
  return MX_OK;
}

static mx_status build(mx_static_model *m, const mx_static_plan *p, mx_hal_model_mode mode, mx_error *err) {
  mx_status st = MX_OK;
  size_t blk_cap = sizeof(mx__copy_args), slot_cap = 2;
  for (uint32_t t = 0; t < p->n_tasks; t++) {
    uint32_t nt = p->tasks[t].n_in + p->tasks[t].n_out;
    if (mx__kernel_task_size(nt) > blk_cap) blk_cap = mx__kernel_task_size(nt);
    if (nt + 1u > slot_cap) slot_cap = nt + 1u;
  }
  void *blk = aligned_alloc(16, (blk_cap + 15) & ~(size_t)15);
  mx_hal_slot *slots = malloc(slot_cap * sizeof *slots);
  if (!blk || !slots) {
    st = mx__fail_oom(err, "task blocks");
    goto free_scratch;
  }
  mx_hal_model_desc desc = {
      .n_streams = p->n_streams, .n_events = p->n_events, .n_ids = m->n_ids, .mode = mode, .name = p->name};
  st = mx__hal_model_create(m->dev, &desc, &m->hal, err);
  if (st != MX_OK) goto free_scratch;
  for (uint32_t t = 0; t < p->n_tasks && st == MX_OK; t++) st = sink_task(m, p, t, blk, slots, err);
  if (st != MX_OK) goto free_scratch;
  st = mx__hal_model_build_end(m->hal);
  if (st != MX_OK) {
    mx__fail(err, st, "%s", mx__hal_model_last_error(m->hal));
    goto free_scratch;
  }
  if (m->weights) st = set_base(m, MX__ID_WEIGHT, m->weights, err);
  if (st == MX_OK && m->fm_owned) st = set_base(m, MX__ID_FM, m->fm_owned, err);

free_scratch:
  free(slots);
  free(blk);
  return st;
}

void mx__static_model_destroy(mx_static_model *m) {
  if (!m) return;
  mx__hal_model_destroy(m->hal);
  mx__kprepack_cache_clear(&m->prepacks); /* after the tasks reading them */
  if (m->staging)
    for (uint32_t i = 0; i < m->n_inputs + m->n_outputs; i++) mx_device_free(m->dev, m->staging[i]);
  mx_device_free(m->dev, m->fm_owned);
  if (m->weights_map) {
    MX_IGNORE_STATUS(mx_device_unregister_buffer(m->dev, m->weights));
    mx__mxm_mapping_release(m->weights_map);
  } else if (m->weights_shared)
    mx_device_shared_release(m->dev, m->weights);
  else
    mx_device_free(m->dev, m->weights);
  free(m->frozen);
  free(m->last);
  free(m->staging);
  free(m->host_in);
  free(m->host_out);
  free(m->upd_ids);
  free(m->upd_addrs);
  free(m->pending);
  free(m->pending_flag);
  free(m->last_ref);
  mx__arena_release(&m->arena);
  free(m);
}

mx_status mx__static_model_create(mx_device *dev, const mx_static_plan *plan,
                                  const mx_static_load_options *opt, mx_static_model **out, mx_error *err) {
  if (out) *out = NULL;
  if (!dev || !plan || !out)
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "mx__static_model_create: NULL argument");
  mx_static_load_options o;
  mx__static_load_options_init(&o);
  if (opt) o = *opt;
  if ((unsigned)o.fm > MX_STATIC_FM_EXTERNAL || (unsigned)o.mode > MX_STATIC_MODE_INDIRECT)
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "mx__static_model_create: unknown FM or HAL mode");
  if (o.n_frozen && !o.frozen_inputs)
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "mx__static_model_create: frozen_inputs is NULL");
  for (size_t k = 0; k < o.n_frozen; k++)
    if (o.frozen_inputs[k] >= plan->n_inputs)
      return mx__fail(err, MX_ERR_INVALID_ARGUMENT,
                      "mx__static_model_create: frozen input %u does not exist (plan '%s' has %u "
                      "inputs)",
                      o.frozen_inputs[k], plan->name, plan->n_inputs);
  mx_status st = plan->trusted ? MX_OK : mx__plan_check(plan, err);
  if (st != MX_OK) return st;

  mx_static_model *m = calloc(1, sizeof *m);
  if (!m) return mx__fail_oom(err, "static model");
  mx__arena_init(&m->arena, 16 * 1024);
  m->dev = dev;
  m->n_inputs = plan->n_inputs;
  m->n_outputs = plan->n_outputs;
  m->n_ids = mx__plan_ids(plan);
  m->fm_bytes = plan->fm_bytes;
  m->weight_bytes = plan->weight_bytes;
  m->prepacks = (mx_kprepack_cache){.keep = prepack_keep, .drop = prepack_drop, .ctx = m};
  m->share_prepacks = o.share_weights;
  m->fm_external = o.fm == MX_STATIC_FM_FROM_PLAN ? plan->fm_external : o.fm == MX_STATIC_FM_EXTERNAL;
  mx_hal_model_mode mode = o.mode == MX_STATIC_MODE_FROM_PLAN ? plan->mode
                           : o.mode == MX_STATIC_MODE_PATCH   ? MX_HAL_MODEL_PATCH
                                                              : MX_HAL_MODEL_INDIRECT;
  size_t nio = (size_t)m->n_inputs + m->n_outputs;
  m->frozen = calloc(m->n_inputs ? m->n_inputs : 1, sizeof *m->frozen);
  m->last = calloc(m->n_ids, sizeof *m->last);
  m->staging = calloc(nio ? nio : 1, sizeof *m->staging);
  m->host_in = calloc(m->n_inputs ? m->n_inputs : 1, sizeof *m->host_in);
  m->host_out = calloc(m->n_outputs ? m->n_outputs : 1, sizeof *m->host_out);
  m->upd_ids = calloc(m->n_ids, sizeof *m->upd_ids);
  m->upd_addrs = calloc(m->n_ids, sizeof *m->upd_addrs);
  m->pending = calloc(m->n_ids, sizeof *m->pending);
  m->pending_flag = calloc(m->n_ids, 1);
  m->last_ref = calloc(m->n_ids, sizeof *m->last_ref);
  if (!m->frozen || !m->last || !m->staging || !m->host_in || !m->host_out || !m->upd_ids || !m->upd_addrs ||
      !m->pending || !m->pending_flag || !m->last_ref) {
    st = mx__fail_oom(err, "static model tables");
    goto destroy_model;
  }
  st = copy_ios(m, plan->inputs, plan->n_inputs, &m->inputs, err);
  if (st == MX_OK) st = copy_ios(m, plan->outputs, plan->n_outputs, &m->outputs, err);
  if (st != MX_OK) goto destroy_model;
  for (uint32_t i = 0; i < m->n_inputs; i++) m->frozen[i] = plan->inputs[i].frozen;
  for (size_t k = 0; k < o.n_frozen; k++) {
    m->frozen[o.frozen_inputs[k]] = true;
    m->inputs[o.frozen_inputs[k]].frozen = true;
  }

  if (plan->weight_bytes) {
    /* Weights held by a mapping (a mapped .mxm, a compiled plan's block) serve a host-memory
     * device in place: registered, not copied
     * (registration fails when another model already registered them: that one copies). */
    if (plan->weights_map && mx__hal_device_host_memory(dev) &&
        mx_device_register_buffer(dev, plan->weights, (size_t)plan->weight_bytes) == MX_OK) {
      m->weights = plan->weights;
      m->weights_map = mx__mxm_mapping_retain(plan->weights_map);
    } else if (o.share_weights) {
      st = mx_device_shared_acquire(dev, plan->weights, (size_t)plan->weight_bytes, 64, &m->weights);
      m->weights_shared = st == MX_OK;
    } else {
      st = mx_device_upload(dev, plan->weights, (size_t)plan->weight_bytes, 64, &m->weights);
    }
    if (st != MX_OK) {
      mx__fail(err, st, "plan '%s': cannot upload %llu bytes of weights: %s", plan->name,
               (unsigned long long)plan->weight_bytes, mx_device_last_error(dev));
      goto destroy_model;
    }
  }
  if (!m->fm_external && plan->fm_bytes) {
    st = mx_device_alloc(dev, (size_t)plan->fm_bytes, 64, &m->fm_owned);
    if (st != MX_OK) {
      mx__fail(err, st, "plan '%s': cannot allocate the %llu-byte FM arena: %s", plan->name,
               (unsigned long long)plan->fm_bytes, mx_device_last_error(dev));
      goto destroy_model;
    }
    m->fm_base = m->fm_owned;
  }
  st = build(m, plan, mode, err);
  if (st != MX_OK) {
    mx__error_prefix(err, "plan '%s': ", plan->name);
    goto destroy_model;
  }
  *out = m;
  return MX_OK;

destroy_model:
  mx__static_model_destroy(m);
  return st;
}

/* --- steps ------------------------------------------------------------------------------------ */

static void format_dims(char *buf, size_t cap, int32_t rank, const int64_t *dims) {
  size_t n = (size_t)snprintf(buf, cap, "[");
  for (int32_t k = 0; k < rank && k < MX_MAX_RANK && n < cap; k++)
    n += (size_t)snprintf(buf + n, cap - n, "%s%lld", k ? ", " : "", (long long)dims[k]);
  if (n < cap) snprintf(buf + n, cap - n, "]");
}

/* True when t is exactly what io describes (dtype, rank, dims; data set unless empty), the
 * per-step case: nothing else to check, and no size to compute since io's is known valid. */
static inline bool tensor_matches(const mx__pio *io, const mx_tensor *t) {
  if (t->dtype != io->dtype || t->rank != io->rank ||
      (t->placement != MX_HOST && t->placement != MX_DEVICE) || (io->nbytes && !t->data))
    return false;
  for (int32_t k = 0; k < io->rank; k++)
    if (t->dims[k] != io->dims[k]) return false;
  return true;
}

/* Explains why a caller tensor does not match the model's description (tensor_matches failed). */
static mx_status check_tensor(mx_static_model *m, const char *what, uint32_t i, const mx__pio *io,
                              const mx_tensor *t) {
  if (t->dtype != io->dtype)
    return model_fail(m, MX_ERR_DTYPE, "%s %u ('%s'): dtype %s given, %s expected", what, i, io->name,
                      mx_dtype_name(t->dtype), mx_dtype_name(io->dtype));
  if (t->placement != MX_HOST && t->placement != MX_DEVICE)
    return model_fail(m, MX_ERR_INVALID_ARGUMENT, "%s %u ('%s'): unknown placement %d", what, i, io->name,
                      (int)t->placement);
  uint64_t nb = 0;
  bool valid = t->rank >= 0 && t->rank <= MX_MAX_RANK && mx__dims_nbytes(t->dtype, t->rank, t->dims, &nb);
  bool same = valid && t->rank == io->rank;
  for (int32_t k = 0; same && k < io->rank; k++) same = t->dims[k] == io->dims[k];
  if (!same) {
    char got[160] = "(invalid)", want[160];
    if (valid) format_dims(got, sizeof got, t->rank, t->dims);
    format_dims(want, sizeof want, io->rank, io->dims);
    if (valid && nb < io->nbytes)
      return model_fail(m, MX_ERR_SHAPE,
                        "%s %u ('%s'): buffer too small: shape %s holds %llu bytes, the model needs "
                        "%s (%llu bytes)",
                        what, i, io->name, got, (unsigned long long)nb, want, (unsigned long long)io->nbytes);
    return model_fail(m, MX_ERR_SHAPE, "%s %u ('%s'): shape %s given, %s expected", what, i, io->name, got,
                      want);
  }
  if (io->nbytes && !t->data)
    return model_fail(m, MX_ERR_INVALID_ARGUMENT, "%s %u ('%s'): data is NULL for %llu bytes", what, i,
                      io->name, (unsigned long long)io->nbytes);
  return MX_OK;
}

/* The staging buffer of entry k (inputs then outputs), allocated on first use. */
static mx_status ensure_staging(mx_static_model *m, uint32_t k, const char *what, uint32_t i,
                                const mx__pio *io) {
  if (m->staging[k]) return MX_OK;
  mx_status st = mx_device_alloc(m->dev, (size_t)io->nbytes, 64, &m->staging[k]);
  if (st != MX_OK)
    return model_fail(m, st, "%s %u ('%s'): cannot allocate a %llu-byte staging buffer: %s", what, i,
                      io->name, (unsigned long long)io->nbytes, mx_device_last_error(m->dev));
  return MX_OK;
}

static void add_pending(mx_static_model *m, uint32_t id) {
  if (m->pending_flag[id]) return;
  m->pending_flag[id] = 1;
  m->pending[m->n_pending++] = id;
}

/* Hands the collected changes to the HAL and records them. */
static mx_status apply_updates(mx_static_model *m, uint32_t n) {
  if (n == 0) return MX_OK;
  mx_status st = mx__hal_model_update_bases(m->hal, m->upd_ids, m->upd_addrs, n);
  if (st != MX_OK) return model_fail(m, st, "address refresh: %s", mx__hal_model_last_error(m->hal));
  for (uint32_t k = 0; k < n; k++) {
    m->last[m->upd_ids[k]] = m->upd_addrs[k];
    add_pending(m, m->upd_ids[k]);
  }
  return MX_OK;
}

mx_status mx__static_model_update_args(mx_static_model *m, const mx_tensor *inputs, size_t n_inputs,
                                       const mx_tensor *outputs, size_t n_outputs) {
  if (!m) return MX_ERR_INVALID_ARGUMENT;
  if (n_inputs != m->n_inputs || n_outputs != m->n_outputs)
    return model_fail(m, MX_ERR_INVALID_ARGUMENT,
                      "update_args: %zu inputs and %zu outputs given, the model has %u and %u", n_inputs,
                      n_outputs, m->n_inputs, m->n_outputs);
  if ((n_inputs && !inputs) || (n_outputs && !outputs))
    return model_fail(m, MX_ERR_INVALID_ARGUMENT, "update_args: NULL tensor array");
  mx_status st;
  /* Everything is checked (and staging prepared) before any state changes. */
  for (uint32_t i = 0; i < m->n_inputs; i++) {
    st = tensor_matches(&m->inputs[i], &inputs[i]) ? MX_OK
                                                   : check_tensor(m, "input", i, &m->inputs[i], &inputs[i]);
    if (st == MX_OK && inputs[i].placement == MX_HOST && m->inputs[i].nbytes)
      st = ensure_staging(m, i, "input", i, &m->inputs[i]);
    if (st != MX_OK) return st;
  }
  for (uint32_t j = 0; j < m->n_outputs; j++) {
    st = tensor_matches(&m->outputs[j], &outputs[j])
             ? MX_OK
             : check_tensor(m, "output", j, &m->outputs[j], &outputs[j]);
    if (st == MX_OK && outputs[j].placement == MX_HOST && m->outputs[j].nbytes)
      st = ensure_staging(m, m->n_inputs + j, "output", j, &m->outputs[j]);
    if (st != MX_OK) return st;
  }
  uint32_t n = 0;
  for (uint32_t i = 0; i < m->n_inputs; i++) {
    const mx_tensor *t = &inputs[i];
    bool host = t->placement == MX_HOST && m->inputs[i].nbytes;
    m->host_in[i] = host ? t->data : NULL;
    if (!m->inputs[i].nbytes || (m->frozen[i] && m->args_set)) continue;
    void *addr = host ? m->staging[i] : t->data;
    uint32_t id = MX__ID_INPUT0 + i;
    if (addr == m->last[id]) continue;
    m->upd_ids[n] = id;
    m->upd_addrs[n++] = addr;
  }
  for (uint32_t j = 0; j < m->n_outputs; j++) {
    const mx_tensor *t = &outputs[j];
    bool host = t->placement == MX_HOST && m->outputs[j].nbytes;
    m->host_out[j] = host ? t->data : NULL;
    if (!m->outputs[j].nbytes) continue;
    void *addr = host ? m->staging[m->n_inputs + j] : t->data;
    uint32_t id = MX__ID_INPUT0 + m->n_inputs + j;
    if (addr == m->last[id]) continue;
    m->upd_ids[n] = id;
    m->upd_addrs[n++] = addr;
  }
  st = apply_updates(m, n);
  if (st == MX_OK) m->args_set = true;
  return st;
}

mx_status mx__static_model_update_workspaces(mx_static_model *m, void *fm_base) {
  if (!m) return MX_ERR_INVALID_ARGUMENT;
  if (!m->fm_external)
    return model_fail(m, MX_ERR_INVALID_ARGUMENT,
                      "update_workspaces: the model owns its FM arena (load it with an external "
                      "FM to supply one)");
  if (m->fm_bytes && !fm_base)
    return model_fail(m, MX_ERR_INVALID_ARGUMENT, "update_workspaces: NULL FM arena (%llu bytes needed)",
                      (unsigned long long)m->fm_bytes);
  if (((uintptr_t)fm_base & 63u) != 0)
    return model_fail(m, MX_ERR_INVALID_ARGUMENT, "update_workspaces: FM arena %p is not 64-byte aligned",
                      fm_base);
  m->fm_base = fm_base;
  if (!m->fm_bytes || fm_base == m->last[MX__ID_FM]) return MX_OK;
  m->upd_ids[0] = MX__ID_FM;
  m->upd_addrs[0] = fm_base;
  return apply_updates(m, 1);
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

/* Sorts ids[0..n) ascending. A step refreshes a few entries, usually already in order
 * (update_args adds them by id): insertion sort, without qsort's call overhead. */
static void sort_ids(uint32_t *ids, uint32_t n) {
  if (n > 32) {
    qsort(ids, n, sizeof *ids, cmp_u32);
    return;
  }
  for (uint32_t i = 1; i < n; i++) {
    uint32_t x = ids[i], j = i;
    for (; j > 0 && ids[j - 1] > x; j--) ids[j] = ids[j - 1];
    ids[j] = x;
  }
}

mx_status mx__static_model_execute(mx_static_model *m, mx_stream *s) {
  if (!m || !s)
    return m ? model_fail(m, MX_ERR_INVALID_ARGUMENT, "execute: NULL stream") : MX_ERR_INVALID_ARGUMENT;
  if (mx_stream_device(s) != m->dev)
    return model_fail(m, MX_ERR_INVALID_ARGUMENT, "execute: the stream belongs to another device");
  if (!m->args_set && m->n_inputs + m->n_outputs)
    return model_fail(m, MX_ERR_INVALID_ARGUMENT, "execute: update_args was never called");
  if (m->fm_external && m->fm_bytes && !m->fm_base)
    return model_fail(m, MX_ERR_INVALID_ARGUMENT,
                      "execute: the FM arena (%llu bytes) was never supplied (update_workspaces)",
                      (unsigned long long)m->fm_bytes);
  mx_status st;
  for (uint32_t i = 0; i < m->n_inputs; i++) {
    if (!m->host_in[i]) continue;
    st = mx__hal_copy_async_named(s, m->staging[i], m->host_in[i], (size_t)m->inputs[i].nbytes, MX_COPY_H2D,
                                  m->inputs[i].name);
    if (st != MX_OK)
      return model_fail(m, st, "execute: input %u ('%s'): staging copy failed: %s", i, m->inputs[i].name,
                        mx_device_last_error(m->dev));
    m->staged_copies++;
  }
  st = mx__hal_model_execute(m->hal, s);
  if (st != MX_OK) return model_fail(m, st, "execute: %s", mx__hal_model_last_error(m->hal));
  for (uint32_t j = 0; j < m->n_outputs; j++) {
    if (!m->host_out[j]) continue;
    st = mx__hal_copy_async_named(s, m->host_out[j], m->staging[m->n_inputs + j],
                                  (size_t)m->outputs[j].nbytes, MX_COPY_D2H, m->outputs[j].name);
    if (st != MX_OK)
      return model_fail(m, st, "execute: output %u ('%s'): staging copy failed: %s", j, m->outputs[j].name,
                        mx_device_last_error(m->dev));
    m->staged_copies++;
  }
  m->executions++;
  m->total_refreshed += m->n_pending;
  m->n_last_ref = m->n_pending;
  for (uint32_t k = 0; k < m->n_pending; k++) {
    m->last_ref[k] = m->pending[k];
    m->pending_flag[m->pending[k]] = 0;
  }
  sort_ids(m->last_ref, m->n_last_ref);
  m->n_pending = 0;
  return MX_OK;
}

/* --- accessors -------------------------------------------------------------------------------- */

void *mx__static_model_run_address(const mx_static_model *m, mx_static_alloc_kind kind, uint64_t offset) {
  if (!m) return NULL;
  if (kind == MX_STATIC_WEIGHT && m->weights && offset < m->weight_bytes) return (char *)m->weights + offset;
  if (kind == MX_STATIC_FM && m->fm_base && offset < m->fm_bytes) return (char *)m->fm_base + offset;
  return NULL;
}

uint64_t mx__static_model_fm_size(const mx_static_model *m) { return m ? m->fm_bytes : 0; }
size_t mx__static_model_input_count(const mx_static_model *m) { return m ? m->n_inputs : 0; }
size_t mx__static_model_output_count(const mx_static_model *m) { return m ? m->n_outputs : 0; }

bool mx__static_model_input(const mx_static_model *m, size_t index, mx_static_io *out) {
  if (!m || !out || index >= m->n_inputs) return false;
  return mx__pio_info(&m->inputs[index], out);
}

bool mx__static_model_output(const mx_static_model *m, size_t index, mx_static_io *out) {
  if (!m || !out || index >= m->n_outputs) return false;
  return mx__pio_info(&m->outputs[index], out);
}

void mx__static_model_stats_get(const mx_static_model *m, mx_static_model_stats *st) {
  if (!st) return;
  memset(st, 0, sizeof *st);
  if (!m) return;
  st->executions = m->executions;
  st->entries = m->n_ids;
  st->last_refreshed = m->n_last_ref;
  st->total_refreshed = m->total_refreshed;
  st->staged_copies = m->staged_copies;
  mx__hal_model_stats_get(m->hal, &st->hal);
}

size_t mx__static_model_last_refreshed(const mx_static_model *m, uint32_t *ids, size_t cap) {
  if (!m) return 0;
  for (size_t k = 0; ids && k < m->n_last_ref && k < cap; k++) ids[k] = m->last_ref[k];
  return m->n_last_ref;
}
