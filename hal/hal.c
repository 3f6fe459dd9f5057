/* The device front end: options and environment, device lifetime, streams, events, launches.
 *
 * Everything here is backend-independent: it validates arguments, applies fault injection,
 * keeps the per-stream sequence counters (channels) and sticky errors, and implements events as
 * (channel, target) pairs. The backend table (dev->ops) only moves commands to the device side
 * and runs them. Launch is the hot path: one branch for fault injection, then the backend. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/record.h"
#include "hal/hal_impl.h"

#define DEFAULT_RING_SLOTS 1024u
#define MAX_RING_SLOTS     (1u << 20)
#define DEFAULT_SPIN_NS    20000

static const char *const fault_names[MX_FAULT_POINT_COUNT] = {"alloc", "copy", "launch", "kernel"};

/* --- device errors ---------------------------------------------------------------------------- */

/* The message of the last host call that failed, kept per thread (with the device it failed on),
 * as errno is: sessions that share a device call it from their own threads, and one must never
 * read, or overwrite, the message of another's failure. Per thread, it needs no lock either. */
static _Thread_local const mx_device *last_error_device;
static _Thread_local char last_error_message[MX_ERROR_MESSAGE_MAX];

mx_status mx__device_fail(mx_device *dev, mx_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error_message, sizeof last_error_message, fmt, ap);
  va_end(ap);
  last_error_device = dev;
  return status;
}

const char *mx_device_last_error(const mx_device *dev) {
  return dev && dev == last_error_device ? last_error_message : "";
}

/* --- options ---------------------------------------------------------------------------------- */

void mx_device_options_init(mx_device_options *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->version = MX_DEVICE_OPTIONS_VERSION;
  o->kind = MX_DEVICE_CPU;
  o->pinning = MX_PIN_AUTO;
  o->check = MX_CHECK_FROM_ENV;
  o->fault_from_env = true;
  o->spin_ns = -1;
  o->huge_pages = true;
}

/* Parses MIXRT_FAULT ("point:N[,point:N...]") into nth[]. */
static mx_status parse_fault_spec(const char *spec, uint64_t nth[MX_FAULT_POINT_COUNT], mx_error *err) {
  const char *p = spec;
  for (;;) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    const char *colon = memchr(p, ':', len);
    int point = -1;
    if (colon) {
      for (int i = 0; i < MX_FAULT_POINT_COUNT; i++) {
        if ((size_t)(colon - p) == strlen(fault_names[i]) &&
            strncmp(p, fault_names[i], (size_t)(colon - p)) == 0)
          point = i;
      }
    }
    uint64_t n = 0;
    bool number_ok = colon && colon + 1 < p + len;
    for (const char *q = colon ? colon + 1 : p; number_ok && q < p + len; q++) {
      if (*q < '0' || *q > '9' || n > (UINT64_MAX - 9) / 10) {
        number_ok = false;
        break;
      }
      n = n * 10 + (uint64_t)(*q - '0');
    }
    if (point < 0 || !number_ok || n == 0)
      return mx__fail(err, MX_ERR_INVALID_ARGUMENT,
                      "MIXRT_FAULT='%s': '%.*s' is not POINT:N with POINT one of alloc, copy, "
                      "launch, kernel and N >= 1",
                      spec, (int)len, p);
    nth[point] = n;
    if (!end) break;
    p = end + 1;
  }
  return MX_OK;
}

/* Validates the options and fills in everything left to defaults or the environment. */
static mx_status resolve_options(const mx_device_options *in, mx_device_options *o, bool *check,
                                 mx_error *err) {
  if (in) {
    if (in->version == 1 || in->version == 2) {
      /* A caller built against an older header passed a shorter record: copy what it has,
       * keep the defaults of the fields added since. */
      mx_device_options_init(o);
      memcpy(o, in,
             in->version == 1 ? offsetof(mx_device_options, skip_kernels)
                              : offsetof(mx_device_options, huge_pages));
      o->version = MX_DEVICE_OPTIONS_VERSION;
    } else if (in->version != MX_DEVICE_OPTIONS_VERSION) {
      return mx__fail(err, MX_ERR_INVALID_ARGUMENT,
                      "device options version %u is not 1, 2 or %u (call mx_device_options_init)",
                      in->version, MX_DEVICE_OPTIONS_VERSION);
    } else {
      *o = *in;
    }
  } else {
    mx_device_options_init(o);
  }
  if ((unsigned)o->kind > MX_DEVICE_INLINE)
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "unknown device kind %d", (int)o->kind);
  if ((unsigned)o->pinning > MX_PIN_SCATTER)
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "unknown pinning policy %d", (int)o->pinning);
  if ((unsigned)o->check > MX_CHECK_ON)
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "unknown checking setting %d", (int)o->check);
  if (o->ring_slots == 0) o->ring_slots = DEFAULT_RING_SLOTS;
  if (o->ring_slots < 4 || o->ring_slots > MAX_RING_SLOTS || (o->ring_slots & (o->ring_slots - 1)))
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "ring_slots %u must be a power of two between 4 and %u",
                    o->ring_slots, MAX_RING_SLOTS);
  if (o->spin_ns < 0) o->spin_ns = DEFAULT_SPIN_NS;

  if (o->check == MX_CHECK_FROM_ENV) {
    const char *env = getenv("MIXRT_DEVICE_CHECK");
    if (!env || !*env || strcmp(env, "0") == 0) {
      o->check = MX_CHECK_OFF;
    } else if (strcmp(env, "1") == 0) {
      o->check = MX_CHECK_ON;
    } else {
      return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "MIXRT_DEVICE_CHECK='%s': expected 0 or 1", env);
    }
  }
  *check = o->check == MX_CHECK_ON;

  bool any = false;
  for (int i = 0; i < MX_FAULT_POINT_COUNT; i++) any |= o->fault_nth[i] != 0;
  if (!any && o->fault_from_env) {
    const char *env = getenv("MIXRT_FAULT");
    if (env && *env) {
      mx_status st = parse_fault_spec(env, o->fault_nth, err);
      if (st != MX_OK) return st;
    }
  }
  return MX_OK;
}

/* --- device lifetime -------------------------------------------------------------------------- */

mx_status mx_device_create(const mx_device_options *o, mx_device **out, mx_error *err) {
  if (!out) return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "mx_device_create: NULL output");
  *out = NULL;
  mx_device_options opt;
  bool check = false;
  mx_status st = resolve_options(o, &opt, &check, err);
  if (st != MX_OK) return st;

  mx_device *dev = calloc(1, sizeof *dev);
  if (!dev) return mx__fail_oom(err, "device");
  dev->opt = opt;
  dev->spin_ns = opt.spin_ns;
  mx__tick_clock_start(&dev->clock);
  dev->check = check;
  dev->skip_kernels = opt.skip_kernels;
  long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
  dev->mem_capacity = pages > 0 && page_size > 0 ? (uint64_t)pages * (uint64_t)page_size : UINT64_MAX;
  for (int i = 0; i < MX_FAULT_POINT_COUNT; i++) {
    dev->fault_nth[i] = opt.fault_nth[i];
    dev->faults |= opt.fault_nth[i] != 0;
  }
  dev->ops = opt.kind == MX_DEVICE_CPU ? &mx__cpu_device_ops : &mx__inline_device_ops;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  dev->mem_rng = ((uint64_t)ts.tv_nsec << 1) | 1u;
  pthread_mutex_init(&dev->lock, NULL);
  pthread_mutex_init(&dev->mem_lock, NULL);
  pthread_mutex_init(&dev->share_lock, NULL);

  st = dev->ops->init(dev, err);
  if (st != MX_OK) goto destroy_locks;
  *out = dev;
  return MX_OK;

destroy_locks:
  pthread_mutex_destroy(&dev->share_lock);
  pthread_mutex_destroy(&dev->mem_lock);
  pthread_mutex_destroy(&dev->lock);
  free(dev);
  return st;
}

void mx_device_destroy(mx_device *dev) {
  if (!dev) return;
  /* Models first (they own private streams), then streams (drained), then events. */
  while (dev->models) mx__hal_model_destroy(dev->models);
  while (dev->streams) mx_stream_destroy(dev->streams);
  while (dev->events) mx_event_destroy(dev->events);
  dev->ops->fini(dev);
  mx__shared_release_all(dev);
  mx__mem_release_all(dev);
  for (mx__chan *c = dev->chans_all; c;) {
    mx__chan *next = c->next_all;
    free(c);
    c = next;
  }
  pthread_mutex_destroy(&dev->share_lock);
  pthread_mutex_destroy(&dev->mem_lock);
  pthread_mutex_destroy(&dev->lock);
  free(dev);
}

void mx_device_get_info_sized(const mx_device *dev, mx_device_info *out, size_t record_size) {
  if (!dev || !out || record_size == 0) return;
  mx_device_info info;
  memset(&info, 0, sizeof info);
  info.kind = dev->opt.kind;
  info.pinning = MX_PIN_NONE;
  info.max_workers = dev->opt.max_workers;
  info.ring_slots = dev->opt.ring_slots;
  info.spin_ns = dev->spin_ns;
  info.check = dev->check;
  for (int i = 0; i < MX_FAULT_POINT_COUNT; i++) info.fault_nth[i] = dev->fault_nth[i];
  dev->ops->info(dev, &info);
  mx__record_fill(out, record_size, &info, sizeof info); /* the caller's size (docs/abi.md) */
}

bool mx__hal_device_checking(const mx_device *dev) { return dev && dev->check; }

bool mx__hal_device_host_memory(const mx_device *dev) {
  return dev && (dev->ops == &mx__cpu_device_ops || dev->ops == &mx__inline_device_ops);
}

mx_status mx__hal_copy_keep(mx_device *dev, bool shared, const void *host, size_t n, void **block) {
  return shared ? mx_device_shared_acquire(dev, host, n, 64, block) : mx_device_upload(dev, host, n, 64, block);
}

void mx__hal_copy_release(mx_device *dev, bool shared, void *block) {
  if (shared)
    MX_IGNORE_STATUS(mx_device_shared_release(dev, block));
  else
    mx_device_free(dev, block);
}

/* --- channels --------------------------------------------------------------------------------- */

static mx__chan *chan_acquire(mx_device *dev) {
  pthread_mutex_lock(&dev->lock);
  mx__chan *c = dev->chans_free;
  if (c) {
    dev->chans_free = c->next_free;
  } else {
    void *mem = NULL;
    c = posix_memalign(&mem, 64, sizeof *c) == 0 ? mem : NULL;
    if (c) {
      memset(c, 0, sizeof *c);
      c->next_all = dev->chans_all;
      dev->chans_all = c;
    }
  }
  pthread_mutex_unlock(&dev->lock);
  if (c) {
    /* Counters continue from the previous owner (drained: submitted == completed), so events
     * recorded on it stay reached. */
    atomic_store(&c->error_seq, 0);
    atomic_store(&c->error_status, MX_OK);
    c->base = atomic_load(&c->submitted);
    c->next_free = NULL;
  }
  return c;
}

static void chan_release(mx_device *dev, mx__chan *c) {
  pthread_mutex_lock(&dev->lock);
  c->next_free = dev->chans_free;
  dev->chans_free = c;
  pthread_mutex_unlock(&dev->lock);
}

/* --- streams ---------------------------------------------------------------------------------- */

mx_status mx__stream_create(mx_device *dev, int priority, bool internal, mx_stream **out) {
  *out = NULL;
  mx_status st = MX_OK;
  void *mem = NULL;
  size_t size = (dev->ops->stream_size + 63) & ~(size_t)63;
  if (posix_memalign(&mem, 64, size) != 0) {
    st = mx__device_fail(dev, MX_ERR_OUT_OF_MEMORY, "mx_stream_create: out of host memory");
    goto fail;
  }
  memset(mem, 0, size);
  mx_stream *s = mem;
  s->dev = dev;
  s->priority = priority;
  s->internal = internal;
  s->err_task = -1;
  s->err_model_stream = -1;
  atomic_init(&s->err_status, MX_OK);
  pthread_mutex_init(&s->submit_lock, NULL);
  s->chan = chan_acquire(dev);
  if (!s->chan) {
    st = mx__device_fail(dev, MX_ERR_OUT_OF_MEMORY, "mx_stream_create: out of host memory");
    goto destroy_lock;
  }
  st = dev->ops->stream_init(s);
  if (st != MX_OK) goto release_chan;
  if (!internal) {
    pthread_mutex_lock(&dev->lock);
    s->next = dev->streams;
    if (dev->streams) dev->streams->prev = s;
    dev->streams = s;
    pthread_mutex_unlock(&dev->lock);
  }
  *out = s;
  return MX_OK;

release_chan:
  chan_release(dev, s->chan);
destroy_lock:
  pthread_mutex_destroy(&s->submit_lock);
  free(mem);
fail:
  return st;
}

mx_status mx_stream_create(mx_device *dev, int priority, mx_stream **out) {
  if (out) *out = NULL;
  if (!dev) return MX_ERR_INVALID_ARGUMENT;
  if (!out) return mx__device_fail(dev, MX_ERR_INVALID_ARGUMENT, "mx_stream_create: NULL output");
  return mx__stream_create(dev, priority, false, out);
}

static void stream_drain(mx_stream *s) {
  mx__waitq_wait_ge(&s->dev->host_wq, &s->chan->completed, atomic_load(&s->chan->submitted), s->dev->spin_ns);
}

void mx_stream_destroy(mx_stream *s) {
  if (!s) return;
  mx_device *dev = s->dev;
  stream_drain(s);
  if (!s->internal) {
    pthread_mutex_lock(&dev->lock);
    if (s->prev)
      s->prev->next = s->next;
    else
      dev->streams = s->next;
    if (s->next) s->next->prev = s->prev;
    pthread_mutex_unlock(&dev->lock);
  }
  dev->ops->stream_fini(s);
  chan_release(dev, s->chan);
  pthread_mutex_destroy(&s->submit_lock);
  free(s);
}

mx_status mx_stream_synchronize(mx_stream *s) {
  if (!s) return MX_ERR_INVALID_ARGUMENT;
  stream_drain(s);
  return (mx_status)atomic_load_explicit(&s->err_status, memory_order_acquire);
}

mx_status mx_stream_query(mx_stream *s) {
  if (!s) return MX_ERR_INVALID_ARGUMENT;
  mx_status err = (mx_status)atomic_load_explicit(&s->err_status, memory_order_acquire);
  if (err != MX_OK) return err;
  return atomic_load(&s->chan->completed) >= atomic_load(&s->chan->submitted) ? MX_OK : MX_ERR_BUSY;
}

mx_status mx_stream_reset(mx_stream *s) {
  if (!s) return MX_ERR_INVALID_ARGUMENT;
  pthread_mutex_lock(&s->submit_lock);
  stream_drain(s);
  mx_status prev = (mx_status)atomic_load_explicit(&s->err_status, memory_order_acquire);
  s->err_task = -1;
  s->err_model_stream = -1;
  s->err_msg[0] = '\0';
  atomic_store(&s->chan->error_seq, 0);
  atomic_store(&s->chan->error_status, MX_OK);
  atomic_store_explicit(&s->err_status, MX_OK, memory_order_release);
  pthread_mutex_unlock(&s->submit_lock);
  return prev;
}

mx_status mx_stream_get_error_sized(mx_stream *s, mx_stream_error *out, size_t record_size) {
  if (!s || !out || record_size == 0) return MX_ERR_INVALID_ARGUMENT;
  mx_stream_error e;
  memset(&e, 0, sizeof e);
  e.status = (mx_status)atomic_load_explicit(&s->err_status, memory_order_acquire);
  e.model_task = -1;
  e.model_stream = -1;
  if (e.status != MX_OK) {
    e.command = mx__cmd_no(s->chan, atomic_load(&s->chan->error_seq));
    e.model_task = s->err_task;
    e.model_stream = s->err_model_stream;
    memcpy(e.message, s->err_msg, sizeof e.message);
  }
  mx__record_fill(out, record_size, &e, sizeof e); /* the caller's size (docs/abi.md) */
  return e.status;
}

mx_device *mx_stream_device(const mx_stream *s) { return s ? s->dev : NULL; }

void mx__stream_fail(mx_stream *s, uint64_t seq, mx_status status, int64_t task, int32_t mstream,
                     const char *fmt, ...) {
  if (atomic_load_explicit(&s->err_status, memory_order_relaxed) != MX_OK) return;
  s->err_task = task;
  s->err_model_stream = mstream;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->err_msg, sizeof s->err_msg, fmt, ap);
  va_end(ap);
  memcpy(s->chan->error_msg, s->err_msg, sizeof s->chan->error_msg);
  /* Published before the command's completion (which is sequentially consistent), so a stream
   * that sees the completion also sees the failure. */
  atomic_store_explicit(&s->chan->error_status, status, memory_order_relaxed);
  atomic_store_explicit(&s->chan->error_seq, seq, memory_order_relaxed);
  atomic_store_explicit(&s->err_status, status, memory_order_release);
}

void mx__stream_check_wait(mx_stream *s, uint64_t seq, const mx__chan *chan, uint64_t target) {
  uint64_t es = atomic_load(&chan->error_seq);
  if (es == 0 || es > target) return;
  mx_status st = (mx_status)atomic_load(&chan->error_status);
  /* The other stream's message says what failed there (the waiter saw that command complete,
   * so the message is whole). */
  mx__stream_fail(s, seq, st, -1, -1,
                  "command %" PRIu64 ": waited for an event of a stream that failed at its command %" PRIu64
                  ": %s",
                  mx__cmd_no(s->chan, seq), mx__cmd_no(chan, es), chan->error_msg);
}

/* --- launches --------------------------------------------------------------------------------- */

/* Injected launch fault: nothing runs, the stream fails at this point of its order. */
static mx_status inject_launch_fault(mx_stream *s, const char *what) {
  mx_device *dev = s->dev;
  mx__op op = {.kind = MX__OP_FAIL, .status = MX_ERR_DEVICE};
  mx_status st = dev->ops->submit(s, &op);
  if (st != MX_OK) return st;
  return mx__device_fail(dev, MX_ERR_DEVICE, "%s failed: injected fault (launch:%" PRIu64 ")", what,
                         dev->fault_nth[MX_FAULT_LAUNCH]);
}

static mx_status bad_call(mx_stream *s, const char *what, mx_hal_fn fn, size_t size) {
  if (!s) return MX_ERR_INVALID_ARGUMENT;
  if (!fn) return mx__device_fail(s->dev, MX_ERR_INVALID_ARGUMENT, "%s: NULL function", what);
  if (size > UINT32_MAX)
    return mx__device_fail(s->dev, MX_ERR_INVALID_ARGUMENT, "%s: argument block of %zu bytes is too large",
                           what, size);
  return mx__device_fail(s->dev, MX_ERR_INVALID_ARGUMENT, "%s: NULL argument block of %zu bytes", what, size);
}

mx_status mx__skipped_kernel(void *args, size_t size) {
  (void)args;
  (void)size;
  return MX_OK;
}

mx_status mx__hal_launch_named(mx_stream *s, mx_hal_fn fn, const void *args, size_t size, const char *name) {
  if (MX__UNLIKELY(!s || !fn || (size && !args) || size > UINT32_MAX))
    return bad_call(s, "mx__hal_launch", fn, size);
  mx_device *dev = s->dev;
  if (MX__UNLIKELY(dev->faults) && mx__fault_hit(dev, MX_FAULT_LAUNCH))
    return inject_launch_fault(s, "mx__hal_launch");
  if (MX__UNLIKELY(dev->skip_kernels)) fn = mx__skipped_kernel;
  if (dev->ops->call_named) return dev->ops->call_named(s, fn, args, size, true, name);
  return dev->ops->call(s, fn, args, size, true);
}

mx_status mx__hal_launch(mx_stream *s, mx_hal_fn fn, const void *args, size_t size) {
  return mx__hal_launch_named(s, fn, args, size, NULL);
}

mx_status mx__hal_host_callback(mx_stream *s, mx_hal_fn fn, const void *args, size_t size) {
  if (MX__UNLIKELY(!s || !fn || (size && !args) || size > UINT32_MAX))
    return bad_call(s, "mx__hal_host_callback", fn, size);
  return s->dev->ops->call(s, fn, args, size, false);
}

mx_status mx__launch_fault(mx_stream *s, const char *what) {
  mx_device *dev = s->dev;
  if (MX__LIKELY(!dev->faults) || !mx__fault_hit(dev, MX_FAULT_LAUNCH)) return MX_OK;
  return inject_launch_fault(s, what);
}

/* --- events ----------------------------------------------------------------------------------- */

mx_status mx_event_create(mx_device *dev, mx_event **out) {
  if (out) *out = NULL;
  if (!dev) return MX_ERR_INVALID_ARGUMENT;
  if (!out) return mx__device_fail(dev, MX_ERR_INVALID_ARGUMENT, "mx_event_create: NULL output");
  mx_event *e = calloc(1, sizeof *e);
  if (!e) return mx__device_fail(dev, MX_ERR_OUT_OF_MEMORY, "mx_event_create: out of host memory");
  e->dev = dev;
  pthread_mutex_init(&e->lock, NULL);
  pthread_mutex_lock(&dev->lock);
  e->next = dev->events;
  if (dev->events) dev->events->prev = e;
  dev->events = e;
  pthread_mutex_unlock(&dev->lock);
  *out = e;
  return MX_OK;
}

void mx_event_destroy(mx_event *e) {
  if (!e) return;
  mx_device *dev = e->dev;
  pthread_mutex_lock(&dev->lock);
  if (e->prev)
    e->prev->next = e->next;
  else
    dev->events = e->next;
  if (e->next) e->next->prev = e->prev;
  pthread_mutex_unlock(&dev->lock);
  pthread_mutex_destroy(&e->lock);
  free(e);
}

mx_status mx_event_record(mx_event *e, mx_stream *s) {
  if (!e || !s) return MX_ERR_INVALID_ARGUMENT;
  if (s->dev != e->dev)
    return mx__device_fail(e->dev, MX_ERR_INVALID_ARGUMENT,
                           "mx_event_record: the stream belongs to another device");
  pthread_mutex_lock(&e->lock);
  e->chan = s->chan;
  e->target = atomic_load(&s->chan->submitted);
  pthread_mutex_unlock(&e->lock);
  return MX_OK;
}

static void event_snapshot(mx_event *e, mx__chan **chan, uint64_t *target) {
  pthread_mutex_lock(&e->lock);
  *chan = e->chan;
  *target = e->target;
  pthread_mutex_unlock(&e->lock);
}

mx_status mx_stream_wait_event(mx_stream *s, mx_event *e) {
  if (!s || !e) return MX_ERR_INVALID_ARGUMENT;
  if (s->dev != e->dev)
    return mx__device_fail(s->dev, MX_ERR_INVALID_ARGUMENT,
                           "mx_stream_wait_event: the event belongs to another device");
  mx__chan *chan;
  uint64_t target;
  event_snapshot(e, &chan, &target);
  if (!chan || chan == s->chan) return MX_OK; /* never recorded, or in-order already */
  /* Already reached without a failure: nothing to queue. */
  uint64_t es = atomic_load(&chan->error_seq);
  if (atomic_load(&chan->completed) >= target && (es == 0 || es > target)) return MX_OK;
  mx__op op = {.kind = MX__OP_WAIT, .chan = chan, .target = target};
  return s->dev->ops->submit(s, &op);
}

static mx_status event_state(mx__chan *chan, uint64_t target) {
  if (!chan) return MX_OK;
  if (atomic_load(&chan->completed) < target) return MX_ERR_BUSY;
  uint64_t es = atomic_load(&chan->error_seq);
  if (es != 0 && es <= target) return (mx_status)atomic_load(&chan->error_status);
  return MX_OK;
}

mx_status mx_event_query(mx_event *e) {
  if (!e) return MX_ERR_INVALID_ARGUMENT;
  mx__chan *chan;
  uint64_t target;
  event_snapshot(e, &chan, &target);
  return event_state(chan, target);
}

mx_status mx_event_synchronize(mx_event *e) {
  if (!e) return MX_ERR_INVALID_ARGUMENT;
  mx__chan *chan;
  uint64_t target;
  event_snapshot(e, &chan, &target);
  if (chan) mx__waitq_wait_ge(&e->dev->host_wq, &chan->completed, target, e->dev->spin_ns);
  return event_state(chan, target);
}
