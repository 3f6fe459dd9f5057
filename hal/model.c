/* HAL models (the task sink): building, the base table, incremental refresh and the device-side
 * steps shared by every backend.
 *
 * Building copies each task's argument block and slots into the model's arena and appends an
 * item to its internal stream; build_end turns the slots into per-id lists (CSR), so a refresh
 * touches only the slots of ids whose base changed.
 *
 * Refresh is split between host and device. mx__hal_model_update_bases only writes the host
 * base table and marks ids dirty. mx__hal_model_execute copies the dirty (id, base) pairs into a
 * ring of patch batches and queues the execution; the execution's first device-side step
 * (mx__model_begin) consumes its batch, updates the device base table and, in PATCH mode,
 * rewrites the affected slots. Host and device therefore never touch the same table, updates
 * made while executions are in flight apply to the next execute, and the host cost of execute
 * depends on the number of changed ids, not on the number of tasks.
 *
 * Executions of one model never overlap: each one's first step waits until the previous one
 * finished (on whatever stream it ran). Internal events are per-model counters holding the last
 * execution that recorded them, so they need no reset between executions. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/fail_cause.h"
#include "common/grow.h"
#include "hal/hal_impl.h"

#define MAX_MODEL_STREAMS 256u
#define MAX_MODEL_EVENTS  (1u << 24)
#define MAX_MODEL_IDS     (1u << 26)

static mx_status model_fail(mx_hal_model *m, mx_status status, const char *fmt, ...) MX_PRINTF(3, 4);

static mx_status model_fail(mx_hal_model *m, mx_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  mx__error_vfail(&m->err, status, fmt, ap);
  va_end(ap);
  return status;
}

const char *mx__hal_model_last_error(const mx_hal_model *m) { return m ? m->err.message : ""; }

/* Frees every buffer of a model (NULL fields are fine); the model itself too. */
static void model_free(mx_hal_model *m) {
  if (m->parts) {
    for (uint32_t i = 0; i < m->desc.n_streams; i++) free(m->parts[i].items);
  }
  free(m->parts);
  free(m->order);
  free(m->task_items);
  free(m->task_names);
  free(m->ev_recorded);
  free(m->id_slot_start);
  free(m->id_slots);
  free(m->host_base);
  free(m->dirty);
  free(m->dirty_ids);
  free(m->patches);
  free(m->dev_base);
  free(m->part_done);
  free(m->ev_epoch);
  free(m->part_skip);
  mx__arena_release(&m->arena);
  pthread_mutex_destroy(&m->host_lock);
  free(m);
}

mx_status mx__hal_model_create(mx_device *dev, const mx_hal_model_desc *desc, mx_hal_model **out,
                               mx_error *err) {
  if (out) *out = NULL;
  if (!dev || !desc || !out)
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "mx__hal_model_create: NULL argument");
  if (desc->n_streams < 1 || desc->n_streams > MAX_MODEL_STREAMS)
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "mx__hal_model_create: %u internal streams (must be 1..%u)",
                    desc->n_streams, MAX_MODEL_STREAMS);
  if (desc->n_events > MAX_MODEL_EVENTS || desc->n_ids > MAX_MODEL_IDS)
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT,
                    "mx__hal_model_create: %u events / %u ids exceed the limits (%u / %u)", desc->n_events,
                    desc->n_ids, MAX_MODEL_EVENTS, MAX_MODEL_IDS);
  if ((unsigned)desc->mode > MX_HAL_MODEL_INDIRECT)
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "mx__hal_model_create: unknown mode %d", (int)desc->mode);

  void *mem = NULL;
  if (posix_memalign(&mem, 64, sizeof(mx_hal_model)) != 0) return mx__fail_oom(err, "HAL model");
  mx_hal_model *m = mem;
  memset(m, 0, sizeof *m);
  m->dev = dev;
  m->desc = *desc;
  m->desc.name = NULL;
  pthread_mutex_init(&m->host_lock, NULL);
  mx__arena_init(&m->arena, 64 * 1024);
  if (desc->name && !(m->name = mx__arena_strdup(&m->arena, desc->name))) goto free_model;
  uint32_t ns = desc->n_streams, ne = desc->n_events, ni = desc->n_ids;
  m->patch_cap = 2 * (uint64_t)ni + 16;
  m->parts = calloc(ns, sizeof *m->parts);
  m->ev_recorded = calloc(ne ? ne : 1, 1);
  m->host_base = calloc(ni ? ni : 1, sizeof *m->host_base);
  m->dirty = calloc(ni ? ni : 1, 1);
  m->dirty_ids = calloc(ni ? ni : 1, sizeof *m->dirty_ids);
  m->patches = calloc(m->patch_cap, sizeof *m->patches);
  m->dev_base = calloc(ni ? ni : 1, sizeof *m->dev_base);
  m->part_done = calloc(ns, sizeof *m->part_done);
  m->ev_epoch = calloc(ne ? ne : 1, sizeof *m->ev_epoch);
  m->part_skip = calloc(ns, 1);
  if (!m->parts || !m->ev_recorded || !m->host_base || !m->dirty || !m->dirty_ids || !m->patches ||
      !m->dev_base || !m->part_done || !m->ev_epoch || !m->part_skip)
    goto free_model;

  pthread_mutex_lock(&dev->lock);
  m->next = dev->models;
  if (dev->models) dev->models->prev = m;
  dev->models = m;
  pthread_mutex_unlock(&dev->lock);
  *out = m;
  return MX_OK;

free_model:
  model_free(m);
  return mx__fail_oom(err, "HAL model tables");
}

/* Appends an item to internal stream `stream` and to the add order. */
static mx_status append_item(mx_hal_model *m, uint32_t stream, const mx__model_item *it) {
  mx__model_part *p = &m->parts[stream];
  if (!MX_GROW(p->items, p->cap, p->n + 1) || !MX_GROW(m->order, m->cap_order, m->n_order + 1))
    return model_fail(m, MX_ERR_OUT_OF_MEMORY, "out of host memory while adding to the model");
  p->items[p->n] = *it;
  p->items[p->n].part = (uint16_t)stream;
  m->order[m->n_order].part = stream;
  m->order[m->n_order].item = (uint32_t)p->n;
  p->n++;
  m->n_order++;
  return MX_OK;
}

static mx_status check_building(mx_hal_model *m, uint32_t stream, const char *what) {
  if (m->built)
    return model_fail(m, MX_ERR_INVALID_ARGUMENT, "%s: the model is built (build_end was called)", what);
  if (stream >= m->desc.n_streams)
    return model_fail(m, MX_ERR_INVALID_ARGUMENT, "%s: internal stream %u out of range (model has %u)", what,
                      stream, m->desc.n_streams);
  return MX_OK;
}

mx_status mx__hal_model_add_task(mx_hal_model *m, uint32_t stream, const mx_hal_task *task,
                                 uint32_t *task_index) {
  return mx__hal_model_add_task_named(m, stream, task, NULL, task_index);
}

mx_status mx__hal_model_add_task_named(mx_hal_model *m, uint32_t stream, const mx_hal_task *task,
                                       const char *task_name, uint32_t *task_index) {
  if (!m) return MX_ERR_INVALID_ARGUMENT;
  mx_status st = check_building(m, stream, "mx__hal_model_add_task");
  if (st != MX_OK) return st;
  uint32_t t = m->n_tasks;
  if (!task || !task->fn) return model_fail(m, MX_ERR_INVALID_ARGUMENT, "task %u: NULL task or function", t);
  if (task->args_size && !task->args)
    return model_fail(m, MX_ERR_INVALID_ARGUMENT, "task %u: NULL argument block of %u bytes", t,
                      task->args_size);
  if (task->n_slots && !task->slots)
    return model_fail(m, MX_ERR_INVALID_ARGUMENT, "task %u: NULL slots (%u announced)", t, task->n_slots);
  if (t == UINT32_MAX) return model_fail(m, MX_ERR_LIMIT, "task %u: too many tasks in one model", t);
  for (uint32_t k = 0; k < task->n_slots; k++) {
    const mx_hal_slot *sl = &task->slots[k];
    if ((uint64_t)sl->arg_offset + sizeof(void *) > task->args_size)
      return model_fail(m, MX_ERR_INVALID_ARGUMENT,
                        "task %u slot %u: a pointer at byte %u does not fit in the %u-byte "
                        "argument block",
                        t, k, sl->arg_offset, task->args_size);
    if (sl->alloc_id >= m->desc.n_ids)
      return model_fail(m, MX_ERR_INVALID_ARGUMENT,
                        "task %u slot %u: alloc id %u out of range (model has %u ids)", t, k, sl->alloc_id,
                        m->desc.n_ids);
  }
  mx__model_item it = {0};
  it.fn = m->dev->skip_kernels ? mx__skipped_kernel : task->fn;
  it.size = task->args_size;
  it.kind = MX__ITEM_TASK;
  it.index = t;
  it.n_slots = task->n_slots;
  it.args = mx__arena_memdup(&m->arena, task->args, task->args_size, 16);
  it.slots =
      task->n_slots ? mx__arena_memdup(&m->arena, task->slots, task->n_slots * sizeof *task->slots, 8) : NULL;
  const char *name = task_name ? mx__arena_strdup(&m->arena, task_name) : NULL;
  if (!it.args || (task->n_slots && !it.slots) || (task_name && !name) ||
      !MX_GROW(m->task_names, m->cap_task_names, (size_t)t + 1))
    return model_fail(m, MX_ERR_OUT_OF_MEMORY, "task %u: out of host memory", t);
  m->task_names[t] = name;
  st = append_item(m, stream, &it);
  if (st != MX_OK) return st;
  m->n_tasks++;
  m->n_slots += task->n_slots;
  if (task_index) *task_index = t;
  return MX_OK;
}

mx_status mx__hal_model_add_event_record(mx_hal_model *m, uint32_t stream, uint32_t event) {
  if (!m) return MX_ERR_INVALID_ARGUMENT;
  mx_status st = check_building(m, stream, "mx__hal_model_add_event_record");
  if (st != MX_OK) return st;
  if (event >= m->desc.n_events)
    return model_fail(m, MX_ERR_INVALID_ARGUMENT, "event %u out of range (model has %u)", event,
                      m->desc.n_events);
  if (m->ev_recorded[event])
    return model_fail(m, MX_ERR_INVALID_ARGUMENT,
                      "event %u is already recorded (each internal event is recorded once)", event);
  mx__model_item it = {.kind = MX__ITEM_RECORD, .index = event};
  st = append_item(m, stream, &it);
  if (st == MX_OK) m->ev_recorded[event] = 1;
  return st;
}

mx_status mx__hal_model_add_event_wait(mx_hal_model *m, uint32_t stream, uint32_t event) {
  if (!m) return MX_ERR_INVALID_ARGUMENT;
  mx_status st = check_building(m, stream, "mx__hal_model_add_event_wait");
  if (st != MX_OK) return st;
  if (event >= m->desc.n_events)
    return model_fail(m, MX_ERR_INVALID_ARGUMENT, "event %u out of range (model has %u)", event,
                      m->desc.n_events);
  if (!m->ev_recorded[event])
    return model_fail(m, MX_ERR_INVALID_ARGUMENT,
                      "event %u is waited on before it is recorded (add its record first)", event);
  mx__model_item it = {.kind = MX__ITEM_WAIT, .index = event};
  return append_item(m, stream, &it);
}

mx_status mx__hal_model_build_end(mx_hal_model *m) {
  if (!m) return MX_ERR_INVALID_ARGUMENT;
  if (m->built) return model_fail(m, MX_ERR_INVALID_ARGUMENT, "mx__hal_model_build_end: called twice");
  if (m->n_slots > UINT32_MAX)
    return model_fail(m, MX_ERR_LIMIT, "model has %" PRIu64 " slots (limit %u)", m->n_slots, UINT32_MAX);
  uint32_t ni = m->desc.n_ids;
  m->task_items = calloc(m->n_tasks ? m->n_tasks : 1, sizeof *m->task_items);
  m->id_slot_start = calloc((size_t)ni + 1, sizeof *m->id_slot_start);
  m->id_slots = calloc(m->n_slots ? m->n_slots : 1, sizeof *m->id_slots);
  uint32_t *fill = calloc(ni ? ni : 1, sizeof *fill);
  mx_status st = MX_OK;
  if (!m->task_items || !m->id_slot_start || !m->id_slots || !fill) {
    st = model_fail(m, MX_ERR_OUT_OF_MEMORY, "mx__hal_model_build_end: out of host memory");
    goto free_tables;
  }
  /* Task index -> item, and the per-id slot counts. */
  for (uint32_t p = 0; p < m->desc.n_streams; p++) {
    for (size_t i = 0; i < m->parts[p].n; i++) {
      mx__model_item *it = &m->parts[p].items[i];
      if (it->kind != MX__ITEM_TASK) continue;
      m->task_items[it->index] = it;
      for (uint32_t k = 0; k < it->n_slots; k++) m->id_slot_start[it->slots[k].alloc_id + 1]++;
    }
  }
  for (uint32_t i = 0; i < ni; i++) m->id_slot_start[i + 1] += m->id_slot_start[i];
  for (uint32_t t = 0; t < m->n_tasks; t++) {
    mx__model_item *it = m->task_items[t];
    for (uint32_t k = 0; k < it->n_slots; k++) {
      const mx_hal_slot *sl = &it->slots[k];
      mx__id_slot *dst = &m->id_slots[m->id_slot_start[sl->alloc_id] + fill[sl->alloc_id]++];
      dst->loc = it->args + sl->arg_offset;
      dst->offset = sl->offset;
    }
  }
  st = m->dev->ops->model_prepare(m);
  if (st != MX_OK) {
    model_fail(m, st, "mx__hal_model_build_end: %s", mx_device_last_error(m->dev));
    goto free_tables;
  }
  m->slow = m->desc.mode == MX_HAL_MODEL_INDIRECT || m->dev->check || m->dev->fault_nth[MX_FAULT_KERNEL] != 0;
  m->built = true;
  free(fill);
  return MX_OK;

free_tables:
  free(fill);
  free(m->task_items);
  free(m->id_slot_start);
  free(m->id_slots);
  m->task_items = NULL;
  m->id_slot_start = NULL;
  m->id_slots = NULL;
  return st;
}

mx_status mx__hal_model_update_bases(mx_hal_model *m, const uint32_t *ids, void *const *addrs, size_t n) {
  if (!m) return MX_ERR_INVALID_ARGUMENT;
  if (n && (!ids || !addrs))
    return model_fail(m, MX_ERR_INVALID_ARGUMENT, "mx__hal_model_update_bases: NULL arrays");
  for (size_t i = 0; i < n; i++) {
    if (ids[i] >= m->desc.n_ids)
      return model_fail(m, MX_ERR_INVALID_ARGUMENT,
                        "mx__hal_model_update_bases: entry %zu: alloc id %u out of range (model "
                        "has %u ids)",
                        i, ids[i], m->desc.n_ids);
  }
  pthread_mutex_lock(&m->host_lock);
  for (size_t i = 0; i < n; i++) {
    uint32_t id = ids[i];
    if (m->host_base[id] == addrs[i]) continue;
    m->host_base[id] = addrs[i];
    if (!m->dirty[id]) {
      m->dirty[id] = 1;
      m->dirty_ids[m->n_dirty++] = id;
    }
  }
  pthread_mutex_unlock(&m->host_lock);
  return MX_OK;
}

mx_status mx__hal_model_execute(mx_hal_model *m, mx_stream *s) {
  if (!m || !s) return MX_ERR_INVALID_ARGUMENT;
  if (!m->built)
    return model_fail(m, MX_ERR_INVALID_ARGUMENT, "mx__hal_model_execute: the model is not built");
  if (s->dev != m->dev)
    return model_fail(m, MX_ERR_INVALID_ARGUMENT,
                      "mx__hal_model_execute: the stream belongs to another device");
  mx_status st = mx__launch_fault(s, "mx__hal_model_execute");
  if (st != MX_OK) return model_fail(m, st, "%s", mx_device_last_error(m->dev));

  pthread_mutex_lock(&m->host_lock);
  uint32_t count = m->n_dirty;
  uint64_t head = m->patch_head;
  /* The ring holds at least two full batches; wait only if earlier executions still have
   * theirs queued. */
  if (head + count > atomic_load(&m->patch_consumed) + m->patch_cap)
    mx__waitq_wait_ge(&m->dev->host_wq, &m->patch_consumed, head + count - m->patch_cap, m->dev->spin_ns);
  for (uint32_t i = 0; i < count; i++) {
    uint32_t id = m->dirty_ids[i];
    mx__patch *p = &m->patches[(head + i) % m->patch_cap];
    p->id = id;
    p->base = m->host_base[id];
  }
  uint64_t exec = m->exec_submitted + 1;
  st = m->dev->ops->model_execute(m, s, exec, head, count);
  if (st == MX_OK) {
    m->exec_submitted = exec;
    m->patch_head = head + count;
    for (uint32_t i = 0; i < count; i++) m->dirty[m->dirty_ids[i]] = 0;
    m->n_dirty = 0;
  }
  pthread_mutex_unlock(&m->host_lock);
  if (st != MX_OK) return model_fail(m, st, "mx__hal_model_execute: %s", mx_device_last_error(m->dev));
  return MX_OK;
}

void mx__hal_model_stats_get(const mx_hal_model *m, mx_hal_model_stats *st) {
  if (!m || !st) return;
  memset(st, 0, sizeof *st);
  st->tasks = m->n_tasks;
  st->slots = (uint32_t)m->n_slots;
  st->streams = m->desc.n_streams;
  st->executions = atomic_load(&m->st_exec);
  st->patched_slots = atomic_load(&m->st_patched);
  st->last_patched_slots = atomic_load(&m->st_last_patched);
  st->refreshed_ids = atomic_load(&m->st_ids);
  st->last_refreshed_ids = atomic_load(&m->st_last_ids);
  /* Executions time themselves on the tick counter (a clock_gettime is tens of ns in a VM, three
   * of them a sizeable share of a small model's execution); converted here. */
  double ns_per_tick = mx__tick_clock_ratio(&m->dev->clock);
  st->last_patch_ns = (uint64_t)((double)atomic_load(&m->st_patch_ticks) * ns_per_tick);
  st->last_exec_ns = (uint64_t)((double)atomic_load(&m->st_exec_ticks) * ns_per_tick);
}

void mx__hal_model_destroy(mx_hal_model *m) {
  if (!m) return;
  mx_device *dev = m->dev;
  if (m->built) {
    mx__waitq_wait_ge(&dev->host_wq, &m->done, m->exec_submitted, dev->spin_ns);
    dev->ops->model_release(m);
  }
  pthread_mutex_lock(&dev->lock);
  if (m->prev)
    m->prev->next = m->next;
  else
    dev->models = m->next;
  if (m->next) m->next->prev = m->prev;
  pthread_mutex_unlock(&dev->lock);
  model_free(m);
}

/* --- device side ------------------------------------------------------------------------------ */

/* Records the first failure of the current execution (parts may fail concurrently). */
static void exec_fail(mx_hal_model *m, mx_status status, int64_t task, int32_t part, const char *fmt, ...)
    MX_PRINTF(5, 6);

static void exec_fail(mx_hal_model *m, mx_status status, int64_t task, int32_t part, const char *fmt, ...) {
  int expected = 0;
  if (!atomic_compare_exchange_strong(&m->exec_failed, &expected, 1)) return;
  m->exec_status = status;
  m->exec_task = task;
  m->exec_stream = part;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m->exec_msg, sizeof m->exec_msg, fmt, ap);
  va_end(ap);
}

static inline void *slot_address(void *base, uint64_t offset) {
  return (void *)((uintptr_t)base + (uintptr_t)offset);
}

/* "model 'M' task 3 'T'" for failure reports, with the names that were given. */
static const char *task_label(const mx_hal_model *m, uint32_t index, char *buf, size_t n) {
  const char *tn = m->task_names && index < m->n_tasks ? m->task_names[index] : NULL;
  snprintf(buf, n, "model%s%s%s task %u%s%s%s", MX__QUOTE(m->name), index, MX__QUOTE(tn));
  return buf;
}

/* Checking mode: validates one slot address; records the failure and returns false. */
static bool check_slot_locked(mx_hal_model *m, const mx__model_item *it, uint32_t part, uint32_t k) {
  const mx_hal_slot *sl = &it->slots[k];
  void *base = m->dev_base[sl->alloc_id];
  char why[256], label[160];
  if (!base) {
    exec_fail(m, MX_ERR_INVALID_ARGUMENT, it->index, (int32_t)part,
              "%s (internal stream %u) slot %u: alloc id %u has no base address "
              "(update_bases was never called for it)",
              task_label(m, it->index, label, sizeof label), part, k, sl->alloc_id);
    return false;
  }
  void *addr = slot_address(base, sl->offset);
  if (!mx__mem_contains_locked(m->dev, addr, 0, why, sizeof why)) {
    exec_fail(m, MX_ERR_INVALID_ARGUMENT, it->index, (int32_t)part,
              "%s (internal stream %u) slot %u: address %p (alloc id %u base %p + "
              "offset %" PRIu64 ") is not inside a live device allocation: %s",
              task_label(m, it->index, label, sizeof label), part, k, addr, sl->alloc_id, base, sl->offset,
              why);
    return false;
  }
  return true;
}

/* Checking mode, PATCH models: validates every slot of every task, in task order. */
static bool check_all_slots(mx_hal_model *m) {
  bool ok = true;
  mx__mem_lock(m->dev);
  for (uint32_t t = 0; ok && t < m->n_tasks; t++) {
    const mx__model_item *it = m->task_items[t];
    for (uint32_t k = 0; ok && k < it->n_slots; k++) ok = check_slot_locked(m, it, it->part, k);
  }
  mx__mem_unlock(m->dev);
  return ok;
}

void mx__model_begin(mx_hal_model *m, uint64_t exec, uint64_t start, uint32_t count, bool abort) {
  uint64_t t0 = mx__ticks();
  m->exec_t0 = t0;
  uint64_t patched = 0, ids = 0;
  bool patch_mode = m->desc.mode == MX_HAL_MODEL_PATCH;
  for (uint32_t i = 0; i < count; i++) {
    const mx__patch *p = &m->patches[(start + i) % m->patch_cap];
    if (m->dev_base[p->id] == p->base) continue;
    m->dev_base[p->id] = p->base;
    ids++;
    if (!patch_mode) continue;
    uint32_t lo = m->id_slot_start[p->id], hi = m->id_slot_start[p->id + 1];
    for (uint32_t j = lo; j < hi; j++) {
      void *v = slot_address(p->base, m->id_slots[j].offset);
      memcpy(m->id_slots[j].loc, &v, sizeof v);
    }
    patched += hi - lo;
  }
  atomic_store(&m->patch_consumed, start + count);
  mx__waitq_notify(&m->dev->host_wq, &m->patch_consumed, start + count);

  atomic_store_explicit(&m->exec_failed, 0, memory_order_relaxed);
  m->exec_status = MX_OK;
  m->exec_task = -1;
  m->exec_stream = -1;
  m->exec_msg[0] = '\0';
  bool skip = abort;
  if (!skip && m->dev->check && patch_mode && !check_all_slots(m)) skip = true;
  memset(m->part_skip, skip ? 1 : 0, m->desc.n_streams);

  atomic_store_explicit(&m->st_last_patched, patched, memory_order_relaxed);
  atomic_fetch_add_explicit(&m->st_patched, patched, memory_order_relaxed);
  atomic_store_explicit(&m->st_last_ids, ids, memory_order_relaxed);
  atomic_fetch_add_explicit(&m->st_ids, ids, memory_order_relaxed);
  atomic_store_explicit(&m->st_patch_ticks, mx__ticks() - t0, memory_order_relaxed);
  (void)exec;
}

/* Slow path of one task: indirect resolution, checking mode, kernel fault injection. */
static mx_status run_task_slow(mx_hal_model *m, mx__model_item *it, uint32_t part) {
  mx_device *dev = m->dev;
  if (m->desc.mode == MX_HAL_MODEL_INDIRECT) {
    for (uint32_t k = 0; k < it->n_slots; k++) {
      const mx_hal_slot *sl = &it->slots[k];
      void *v = slot_address(m->dev_base[sl->alloc_id], sl->offset);
      memcpy(it->args + sl->arg_offset, &v, sizeof v);
    }
    if (dev->check) {
      bool ok = true;
      mx__mem_lock(dev);
      for (uint32_t k = 0; ok && k < it->n_slots; k++) ok = check_slot_locked(m, it, part, k);
      mx__mem_unlock(dev);
      if (!ok) return MX_ERR_INVALID_ARGUMENT;
    }
  }
  if (mx__fault_hit(dev, MX_FAULT_KERNEL)) {
    char label[160];
    exec_fail(m, MX_ERR_KERNEL, it->index, (int32_t)part,
              "%s (internal stream %u) failed: injected fault (kernel:%" PRIu64 ")",
              task_label(m, it->index, label, sizeof label), part, dev->fault_nth[MX_FAULT_KERNEL]);
    return MX_ERR_KERNEL;
  }
  return it->fn(it->args, it->size);
}

static void record_event(mx_hal_model *m, uint32_t event, uint64_t exec) {
  atomic_store(&m->ev_epoch[event], exec);
  m->dev->ops->notify(m->dev);
}

static void task_failed(mx_hal_model *m, const mx__model_item *it, uint32_t part, mx_status st) {
  char label[160], cause[MX_FAIL_CAUSE_MAX + 1];
  bool has_cause = mx__fail_cause_take(cause, sizeof cause); /* what the task said, same thread */
  exec_fail(m, st, it->index, (int32_t)part, "%s (internal stream %u) failed: %s%s%s",
            task_label(m, it->index, label, sizeof label), part, mx_status_string(st), has_cause ? ": " : "",
            cause);
}

bool mx__model_run_part(mx_hal_model *m, uint32_t part, uint64_t exec, uint32_t *pc,
                        _Atomic uint64_t **wait_word, uint64_t *wait_target) {
  mx__model_item *items = m->parts[part].items;
  uint32_t n = (uint32_t)m->parts[part].n;
  bool skip = m->part_skip[part];
  bool slow = m->slow;
  for (uint32_t i = *pc; i < n; i++) {
    mx__model_item *it = &items[i];
    if (MX__LIKELY(it->fn != NULL)) {
      if (MX__UNLIKELY(skip)) continue;
      mx_status st = MX__UNLIKELY(slow) ? run_task_slow(m, it, part) : it->fn(it->args, it->size);
      if (MX__UNLIKELY(st != MX_OK)) {
        task_failed(m, it, part, st);
        skip = true;
      }
    } else if (it->kind == MX__ITEM_RECORD) {
      record_event(m, it->index, exec);
    } else if (atomic_load_explicit(&m->ev_epoch[it->index], memory_order_acquire) < exec) {
      m->part_skip[part] = skip;
      *pc = i;
      *wait_word = &m->ev_epoch[it->index];
      *wait_target = exec;
      return false;
    }
  }
  m->part_skip[part] = skip;
  *pc = n;
  return true;
}

void mx__model_run_in_order(mx_hal_model *m, uint64_t exec) {
  for (size_t i = 0; i < m->n_order; i++) {
    uint32_t part = m->order[i].part;
    mx__model_item *it = &m->parts[part].items[m->order[i].item];
    if (it->kind == MX__ITEM_RECORD) {
      atomic_store(&m->ev_epoch[it->index], exec);
    } else if (it->kind == MX__ITEM_TASK && !m->part_skip[part]) {
      mx_status st = m->slow ? run_task_slow(m, it, part) : it->fn(it->args, it->size);
      if (st != MX_OK) {
        task_failed(m, it, part, st);
        m->part_skip[part] = 1;
      }
    }
    /* Waits are satisfied: their record comes earlier in add order. */
  }
}

void mx__model_end(mx_hal_model *m, uint64_t exec, mx_stream *s, uint64_t seq) {
  if (atomic_load(&m->exec_failed))
    mx__stream_fail(s, seq, m->exec_status, m->exec_task, m->exec_stream, "%s", m->exec_msg);
  atomic_fetch_add_explicit(&m->st_exec, 1, memory_order_relaxed);
  atomic_store_explicit(&m->st_exec_ticks, mx__ticks() - m->exec_t0, memory_order_relaxed);
  mx_device *dev = m->dev;
  /* Last access to m: once `done` is visible the host may destroy the model. */
  atomic_store(&m->done, exec);
  mx__waitq_notify(&dev->host_wq, &m->done, exec);
}
