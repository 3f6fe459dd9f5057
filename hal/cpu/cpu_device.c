/* The CPU device: streams served by worker threads through lock-free rings.
 *
 * Each stream has a single-producer single-consumer ck_ring of pointers to commands, and a
 * circular array of 256-byte command slots the commands live in. A command takes one slot
 * (header + MX_HAL_INLINE_ARGS bytes of arguments) or, for a larger argument block, several
 * consecutive slots (never wrapping: the producer skips the tail of the array instead). Slot
 * positions count up in 64 bits: the producer advances `alloc_pos`, the worker publishes
 * `slots_released` once a command has finished, so a slot is rewritten only after the command
 * using it is done and the worker runs commands in place, without copying. Launches with
 * argument blocks up to a quarter of the queue (about 64 KiB with the default 1024 slots) never
 * allocate; larger blocks are copied to the heap. At most size - 1 slots are in use, so the
 * ring (size - 1 entries) never fills. Host submitters of one stream are serialized by the
 * stream's submit lock, which makes them a single producer.
 *
 * Workers. By default (max_workers = 0) each stream gets its own worker thread; with a cap,
 * streams share workers (least loaded first). A worker scans its streams in priority order and
 * runs up to 64 commands of each per round. A command that must wait (an event wait, a model
 * waiting for its previous execution, a join of a model's internal streams) is left at the
 * head of its stream with the counter and target it waits for, and the worker moves on, so a
 * shared worker never deadlocks on work it serves itself.
 *
 * Spin then park. An idle worker spins for the device's spin time (yielding the processor
 * after the first MX__SPIN_PURE_NS, so a descheduled host thread gets to run on a small
 * machine), then parks on its futex "bell". Producers ring the bell only when the worker announced
 * it is sleeping (one fence and a load on the launch path). A worker that parks with a blocked
 * command registers as "blocked"; completions ring the bells of blocked sleepers only. Host threads
 * that wait (full queue, synchronize) spin and then park on the device's host wait queue, which
 * wakes them only once the counter they wait for reaches their target. */
#include <ck_ring.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/fail_cause.h"
#include "hal/cpu/cpu_impl.h"

#define MAX_WORKERS  256u
#define DRAIN_BUDGET 64u

enum cmd_kind {
  CMD_KERNEL,
  CMD_CALLBACK,
  CMD_COPY,
  CMD_MEMSET,
  CMD_FREE,
  CMD_WAIT,
  CMD_FAIL,
  CMD_MODEL_RUN,
  CMD_MODEL_PART
};

enum cmd_flags {
  CMD_HEAP = 1,  /* the argument block is on the heap (u.call.heap), freed by the worker */
  CMD_INJECT = 2 /* copy/memset: injected fault */
};

/* A command: the first (or only) slot it takes. */
typedef struct cpu_cmd {
  uint8_t kind;    /* enum cmd_kind */
  uint8_t flags;   /* enum cmd_flags */
  uint16_t nslots; /* consecutive slots the command takes (its arguments continue into them) */
  uint32_t size;   /* KERNEL/CALLBACK: argument bytes */
  uint64_t seq;    /* the command's sequence number on its stream's channel */
  union {
    struct {
      mx_hal_fn fn;
      void *heap;       /* argument block when larger than the slot (owned by the command) */
      const char *name; /* for failure reports, or NULL (borrowed) */
    } call;
    struct {
      void *dst;
      const void *src;
      size_t n;
      const char *name; /* what is copied, for failure reports, or NULL (borrowed) */
    } copy;
    struct {
      void *dst;
      size_t n;
      int value;
      const char *name; /* for failure reports, or NULL (borrowed) */
    } set;
    struct {
      void *ptr;
    } free;
    struct {
      mx__chan *chan;
      uint64_t target;
    } wait;
    struct {
      mx_status status;
    } fail;
    struct {
      mx_hal_model *m;
      uint64_t exec;        /* execution number */
      uint64_t patch_start; /* MODEL_RUN: its patch batch in the model's ring */
      uint32_t patch_count;
      uint32_t part; /* MODEL_PART: internal stream */
    } model;
  } u;
  _Alignas(16) unsigned char args[MX_HAL_INLINE_ARGS]; /* inline argument block */
} cpu_cmd;

_Static_assert(sizeof(cpu_cmd) == 256, "a command slot is four cache lines");

typedef struct cpu_worker cpu_worker;

typedef struct cpu_stream {
  struct mx_stream base; /* must stay first */
  /* Read-only after creation (both sides). */
  _Alignas(64) cpu_worker *worker; /* serving worker (owned by the device) */
  ck_ring_buffer_t *ring_buf;      /* ring entries (owned) */
  cpu_cmd *slots;                  /* command slots (owned, 64-byte aligned) */
  uint32_t mask;                   /* number of slots (= ring entries) - 1 */
  uint32_t max_cmd_slots;          /* slots one command may take; larger blocks go to the heap */
  /* Host side, under submit_lock. */
  _Alignas(64) uint64_t alloc_pos; /* slot positions ever handed out */
  uint64_t released_seen;          /* last value of slots_released the host read */
  /* Ring positions (ck_ring pads them onto separate cache lines). */
  _Alignas(64) ck_ring_t ring;
  /* Worker side. */
  _Alignas(64) _Atomic uint64_t slots_released; /* slot positions free again (commands done) */
  uint64_t release_pos;                         /* worker's copy of slots_released */
  cpu_cmd *cur;                                 /* dequeued command waiting for *wait_word >= wait_target */
  uint32_t phase, pc;                           /* resume point of a model command */
  _Atomic uint64_t *wait_word;
  uint64_t wait_target;
} cpu_stream;

/* Immutable list of the streams a worker serves, replaced as a whole on every change. */
typedef struct cpu_list {
  size_t n;
  cpu_stream *s[]; /* by priority, highest first */
} cpu_list;

struct cpu_worker {
  mx_device *dev;
  uint32_t index; /* slot in the device table; the pinning target */
  pthread_t thread;
  bool running;                    /* thread started and not joined (under cd->lock) */
  size_t n_streams;                /* streams assigned (under cd->lock) */
  _Atomic uint32_t bell;           /* futex word; bumped to wake the worker */
  _Atomic uint32_t sleeping;       /* 1 while the worker is parked or about to park */
  _Atomic uint32_t parked_blocked; /* 1 while parked with a blocked command */
  _Atomic int stop;                /* asks the thread to exit once its list is empty */
  _Atomic(cpu_list *) list;        /* published list: one of bufs, or the empty list */
  cpu_list *bufs[2];               /* two lists of capacity `cap` (owned, under cd->lock); the one
                                      not published is rewritten on the next change, so removing a
                                      stream never allocates */
  size_t cap;
  _Atomic uint64_t gen;      /* bumped with every new list */
  _Atomic uint64_t seen_gen; /* last generation the thread adopted */
  /* Thread-private. */
  cpu_list *mine;   /* adopted list (borrowed from `list`) */
  uint64_t adopted; /* its generation */
  bool niced;       /* OS priority lowered already */
};

typedef struct cpu_device {
  mx__cpu_topo topo;
  pthread_mutex_t lock;                     /* guards worker assignment and lifetimes */
  cpu_worker *_Atomic workers[MAX_WORKERS]; /* worker table (owned) */
  _Atomic uint32_t n_workers;               /* used entries of the table */
  _Atomic uint32_t n_blocked;               /* parked workers holding a blocked command */
  _Atomic uint32_t pinned;                  /* workers whose binding succeeded */
} cpu_device;

static const cpu_list empty_list = {0};

/* --- waking ----------------------------------------------------------------------------------- */

static void wake_worker(cpu_worker *w) {
  if (atomic_exchange(&w->sleeping, 0) == 0) return;
  atomic_fetch_add(&w->bell, 1);
  mx__futex_wake(&w->bell, 1);
}

static void cpu_notify(mx_device *dev) {
  cpu_device *cd = dev->impl;
  if (MX__LIKELY(atomic_load(&cd->n_blocked) == 0)) return;
  uint32_t n = atomic_load(&cd->n_workers);
  for (uint32_t i = 0; i < n; i++) {
    cpu_worker *w = atomic_load(&cd->workers[i]);
    if (w && atomic_load(&w->parked_blocked) && atomic_load(&w->sleeping)) wake_worker(w);
  }
}

/* --- producer side ---------------------------------------------------------------------------- */

/* Slots a command with an inline argument block of `size` bytes takes. */
static uint32_t slots_for(size_t size) {
  if (size <= MX_HAL_INLINE_ARGS) return 1;
  size_t more = (size - MX_HAL_INLINE_ARGS + sizeof(cpu_cmd) - 1) / sizeof(cpu_cmd);
  return more + 1 > UINT32_MAX ? UINT32_MAX : (uint32_t)(more + 1);
}

/* Where a command's inline argument block starts (it may run on into the following slots). */
static inline unsigned char *cmd_args(cpu_cmd *c) { return (unsigned char *)c + offsetof(cpu_cmd, args); }

/* Reserves k consecutive slots and a ring entry on s (caller holds the submit lock); parks
 * while the slots are in use. */
static cpu_cmd *push_begin(cpu_stream *s, uint32_t k) {
  mx_stream *b = &s->base;
  uint64_t n = (uint64_t)s->mask + 1;
  uint64_t start = s->alloc_pos;
  uint64_t idx = start & s->mask;
  if (idx + k > n) start += n - idx; /* commands never wrap: skip the tail */
  uint64_t end = start + k;
  if (end - s->released_seen > n - 1) {
    s->released_seen = atomic_load_explicit(&s->slots_released, memory_order_acquire);
    if (end - s->released_seen > n - 1) {
      mx__waitq_wait_ge(&b->dev->host_wq, &s->slots_released, end - (n - 1), b->dev->spin_ns);
      s->released_seen = atomic_load_explicit(&s->slots_released, memory_order_acquire);
    }
  }
  s->alloc_pos = end;
  /* Entries in the ring never outnumber the slots in use (< n - k here), so this succeeds. */
  ck_ring_buffer_t *entry = ck_ring_enqueue_reserve_spsc(&s->ring, s->ring_buf);
  MX__TSAN_ACQUIRE(&s->ring.c_head);
  cpu_cmd *c = &s->slots[start & s->mask];
  c->nslots = (uint16_t)k;
  entry->value = c;
  return c;
}

/* Publishes the command reserved by push_begin and wakes the worker if it sleeps. */
static void push_commit(cpu_stream *s, cpu_cmd *c) {
  mx__chan *ch = s->base.chan;
  uint64_t seq = atomic_load_explicit(&ch->submitted, memory_order_relaxed) + 1;
  c->seq = seq;
  MX__TSAN_RELEASE(&s->ring.p_tail);
  ck_ring_enqueue_commit_spsc(&s->ring);
  atomic_store_explicit(&ch->submitted, seq, memory_order_relaxed);
  /* Pairs with the worker's "sleeping = 1; look at the rings" (Dekker). */
  atomic_thread_fence(memory_order_seq_cst);
  cpu_worker *w = s->worker;
  if (atomic_load_explicit(&w->sleeping, memory_order_relaxed)) wake_worker(w);
}

static mx_status cpu_call_named(mx_stream *b, mx_hal_fn fn, const void *args, size_t size, bool kernel,
                                const char *name) {
  cpu_stream *s = (cpu_stream *)b;
  void *heap = NULL;
  uint32_t k = slots_for(size);
  if (MX__UNLIKELY(k > s->max_cmd_slots)) {
    heap = malloc(size);
    if (!heap)
      return mx__device_fail(b->dev, MX_ERR_OUT_OF_MEMORY,
                             "launch: out of host memory for a %zu-byte argument block", size);
    memcpy(heap, args, size);
    k = 1;
  }
  pthread_mutex_lock(&b->submit_lock);
  cpu_cmd *c = push_begin(s, k);
  c->kind = kernel ? CMD_KERNEL : CMD_CALLBACK;
  c->flags = heap ? CMD_HEAP : 0;
  c->size = (uint32_t)size;
  c->u.call.fn = fn;
  c->u.call.heap = heap;
  c->u.call.name = name;
  if (!heap && size) memcpy(cmd_args(c), args, size);
  push_commit(s, c);
  pthread_mutex_unlock(&b->submit_lock);
  return MX_OK;
}

static mx_status cpu_call(mx_stream *b, mx_hal_fn fn, const void *args, size_t size, bool kernel) {
  return cpu_call_named(b, fn, args, size, kernel, NULL);
}

/* Copies and memsets up to this size run in the submitting thread when their stream is idle. */
#define INLINE_COPY_MAX ((size_t)64 << 10)

/* Runs a small copy or memset in the calling thread when nothing is queued before it (caller
 * holds the submit lock): the worker would only run it after a wake-up that costs far more
 * than the bytes (microseconds, much more on a loaded host), and stream order holds because
 * everything submitted before has completed. It takes a sequence number of its own, so events
 * and waits see it as any command. False: queue it as usual (work pending, a failed stream, an
 * injected fault, a large block). */
static bool try_run_inline(mx_stream *b, const mx__op *op) {
  if ((op->kind != MX__OP_COPY && op->kind != MX__OP_MEMSET) || op->inject || op->n > INLINE_COPY_MAX)
    return false;
  mx__chan *ch = b->chan;
  uint64_t seq = atomic_load_explicit(&ch->submitted, memory_order_relaxed);
  if (atomic_load_explicit(&ch->completed, memory_order_acquire) != seq || mx__stream_failed(b)) return false;
  if (op->kind == MX__OP_COPY && op->n)
    memmove(op->dst, op->src, op->n);
  else if (op->n)
    memset(op->dst, op->value, op->n);
  seq++;
  atomic_store_explicit(&ch->submitted, seq, memory_order_relaxed);
  atomic_store(&ch->completed, seq);
  mx__waitq_notify(&b->dev->host_wq, &ch->completed, seq);
  return true;
}

static mx_status cpu_submit(mx_stream *b, const mx__op *op) {
  cpu_stream *s = (cpu_stream *)b;
  pthread_mutex_lock(&b->submit_lock);
  if (try_run_inline(b, op)) {
    pthread_mutex_unlock(&b->submit_lock);
    return MX_OK;
  }
  cpu_cmd *c = push_begin(s, 1);
  c->flags = op->inject ? CMD_INJECT : 0;
  c->size = 0;
  switch (op->kind) {
    case MX__OP_COPY:
      c->kind = CMD_COPY;
      c->u.copy.dst = op->dst;
      c->u.copy.src = op->src;
      c->u.copy.n = op->n;
      c->u.copy.name = op->name;
      break;
    case MX__OP_MEMSET:
      c->kind = CMD_MEMSET;
      c->u.set.dst = op->dst;
      c->u.set.n = op->n;
      c->u.set.value = op->value;
      c->u.set.name = op->name;
      break;
    case MX__OP_FREE:
      c->kind = CMD_FREE;
      c->u.free.ptr = op->dst;
      break;
    case MX__OP_WAIT:
      c->kind = CMD_WAIT;
      c->u.wait.chan = op->chan;
      c->u.wait.target = op->target;
      break;
    case MX__OP_FAIL:
      c->kind = CMD_FAIL;
      c->u.fail.status = op->status;
      break;
  }
  push_commit(s, c);
  pthread_mutex_unlock(&b->submit_lock);
  return MX_OK;
}

/* --- models ----------------------------------------------------------------------------------- */

/* m->impl: the private streams that run internal streams 1 .. n-1. */
static mx_status cpu_model_prepare(mx_hal_model *m) {
  uint32_t n = m->desc.n_streams - 1;
  if (n == 0) return MX_OK;
  mx_stream **aux = calloc(n, sizeof *aux);
  if (!aux) return mx__device_fail(m->dev, MX_ERR_OUT_OF_MEMORY, "out of host memory");
  mx_status st = MX_OK;
  uint32_t made = 0;
  for (; made < n; made++) {
    st = mx__stream_create(m->dev, 0, true, &aux[made]);
    if (st != MX_OK) goto destroy_streams;
  }
  m->impl = aux;
  return MX_OK;

destroy_streams:
  while (made > 0) mx_stream_destroy(aux[--made]);
  free(aux);
  return st;
}

static void cpu_model_release(mx_hal_model *m) {
  mx_stream **aux = m->impl;
  if (!aux) return;
  for (uint32_t i = 0; i + 1 < m->desc.n_streams; i++) mx_stream_destroy(aux[i]);
  free(aux);
  m->impl = NULL;
}

static mx_status cpu_model_execute(mx_hal_model *m, mx_stream *b, uint64_t exec, uint64_t patch_start,
                                   uint32_t patch_count) {
  cpu_stream *s = (cpu_stream *)b;
  pthread_mutex_lock(&b->submit_lock);
  cpu_cmd *c = push_begin(s, 1);
  c->kind = CMD_MODEL_RUN;
  c->flags = 0;
  c->u.model.m = m;
  c->u.model.exec = exec;
  c->u.model.patch_start = patch_start;
  c->u.model.patch_count = patch_count;
  c->u.model.part = 0;
  push_commit(s, c);
  pthread_mutex_unlock(&b->submit_lock);

  mx_stream **aux = m->impl;
  for (uint32_t i = 1; i < m->desc.n_streams; i++) {
    cpu_stream *a = (cpu_stream *)aux[i - 1];
    pthread_mutex_lock(&a->base.submit_lock);
    c = push_begin(a, 1);
    c->kind = CMD_MODEL_PART;
    c->flags = 0;
    c->u.model.m = m;
    c->u.model.exec = exec;
    c->u.model.patch_start = 0;
    c->u.model.patch_count = 0;
    c->u.model.part = i;
    push_commit(a, c);
    pthread_mutex_unlock(&a->base.submit_lock);
  }
  return MX_OK;
}

/* --- worker side ------------------------------------------------------------------------------ */

static bool block(cpu_stream *s, _Atomic uint64_t *word, uint64_t target) {
  s->wait_word = word;
  s->wait_target = target;
  return false;
}

/* MODEL_RUN: wait for the previous execution, first step, internal stream 0, join. */
static bool run_model(cpu_stream *s, cpu_cmd *c) {
  mx_hal_model *m = c->u.model.m;
  uint64_t exec = c->u.model.exec;
  _Atomic uint64_t *ww;
  uint64_t wt;
  switch (s->phase) {
    case 0:
      if (atomic_load(&m->done) < exec - 1) return block(s, &m->done, exec - 1);
      mx__model_begin(m, exec, c->u.model.patch_start, c->u.model.patch_count, mx__stream_failed(&s->base));
      atomic_store(&m->started, exec);
      cpu_notify(s->base.dev);
      s->phase = 1;
      s->pc = 0;
      /* fallthrough */
    case 1:
      if (!mx__model_run_part(m, 0, exec, &s->pc, &ww, &wt)) return block(s, ww, wt);
      s->phase = 2;
      /* fallthrough */
    default:
      for (uint32_t i = 1; i < m->desc.n_streams; i++) {
        if (atomic_load(&m->part_done[i]) < exec) return block(s, &m->part_done[i], exec);
      }
      mx__model_end(m, exec, &s->base, c->seq);
      return true;
  }
}

/* MODEL_PART: wait for the first step of the execution, then run one internal stream. */
static bool run_model_part(cpu_stream *s, cpu_cmd *c) {
  mx_hal_model *m = c->u.model.m;
  uint64_t exec = c->u.model.exec;
  uint32_t part = c->u.model.part;
  _Atomic uint64_t *ww;
  uint64_t wt;
  if (s->phase == 0) {
    if (atomic_load(&m->started) < exec) return block(s, &m->started, exec);
    s->phase = 1;
    s->pc = 0;
  }
  if (!mx__model_run_part(m, part, exec, &s->pc, &ww, &wt)) return block(s, ww, wt);
  atomic_store(&m->part_done[part], exec);
  cpu_notify(s->base.dev);
  return true;
}

/* Runs (or resumes) one command; false when it is blocked. */
static bool run_cmd(cpu_stream *s, cpu_cmd *c) {
  mx_stream *b = &s->base;
  mx_device *dev = b->dev;
  if (c->kind == CMD_MODEL_RUN) return run_model(s, c);
  if (c->kind == CMD_MODEL_PART) return run_model_part(s, c);
  if (MX__UNLIKELY(mx__stream_failed(b))) return true; /* failed streams skip their commands */
  switch (c->kind) {
    case CMD_KERNEL:
      if (MX__UNLIKELY(dev->fault_nth[MX_FAULT_KERNEL] != 0) && mx__fault_hit(dev, MX_FAULT_KERNEL)) {
        mx__stream_fail(b, c->seq, MX_ERR_KERNEL, -1, -1,
                        "command %" PRIu64 " (kernel%s%s%s) failed: injected fault (kernel:%" PRIu64 ")",
                        mx__cmd_no(b->chan, c->seq), MX__QUOTE(c->u.call.name),
                        dev->fault_nth[MX_FAULT_KERNEL]);
        break;
      }
      /* fallthrough */
    case CMD_CALLBACK: {
      void *args = (c->flags & CMD_HEAP) ? c->u.call.heap : (void *)cmd_args(c);
      mx_status st = c->u.call.fn(args, c->size);
      if (MX__UNLIKELY(st != MX_OK)) {
        /* A kernel's cause (value, position, bound) was left on this thread. */
        char cause[MX_FAIL_CAUSE_MAX + 1];
        bool has_cause = c->kind == CMD_KERNEL && mx__fail_cause_take(cause, sizeof cause);
        mx__stream_fail(b, c->seq, st, -1, -1, "command %" PRIu64 " (%s%s%s%s) failed: %s%s%s",
                        mx__cmd_no(b->chan, c->seq), c->kind == CMD_KERNEL ? "kernel" : "host callback",
                        MX__QUOTE(c->u.call.name), mx_status_string(st), has_cause ? ": " : "",
                        has_cause ? cause : "");
      }
      break;
    }
    case CMD_COPY:
      if (c->flags & CMD_INJECT) {
        mx__stream_fail(b, c->seq, MX_ERR_DEVICE, -1, -1,
                        "command %" PRIu64
                        " (asynchronous copy of %zu bytes%s%s%s%s) failed: injected "
                        "fault (copy:%" PRIu64 ")",
                        mx__cmd_no(b->chan, c->seq), c->u.copy.n, c->u.copy.name ? " of" : "",
                        MX__QUOTE(c->u.copy.name), dev->fault_nth[MX_FAULT_COPY]);
      } else if (c->u.copy.n) {
        memmove(c->u.copy.dst, c->u.copy.src, c->u.copy.n);
      }
      break;
    case CMD_MEMSET:
      if (c->flags & CMD_INJECT) {
        mx__stream_fail(b, c->seq, MX_ERR_DEVICE, -1, -1,
                        "command %" PRIu64
                        " (asynchronous memset of %zu bytes%s%s%s%s) failed: injected "
                        "fault (copy:%" PRIu64 ")",
                        mx__cmd_no(b->chan, c->seq), c->u.set.n, c->u.set.name ? " of" : "",
                        MX__QUOTE(c->u.set.name), dev->fault_nth[MX_FAULT_COPY]);
      } else if (c->u.set.n) {
        memset(c->u.set.dst, c->u.set.value, c->u.set.n);
      }
      break;
    case CMD_FREE: {
      char why[256];
      if (!mx__mem_free(dev, c->u.free.ptr, why, sizeof why))
        mx__stream_fail(b, c->seq, MX_ERR_INVALID_ARGUMENT, -1, -1,
                        "command %" PRIu64 " (stream-ordered free) failed: %s", mx__cmd_no(b->chan, c->seq),
                        why);
      break;
    }
    case CMD_WAIT:
      if (atomic_load(&c->u.wait.chan->completed) < c->u.wait.target)
        return block(s, &c->u.wait.chan->completed, c->u.wait.target);
      mx__stream_check_wait(b, c->seq, c->u.wait.chan, c->u.wait.target);
      break;
    case CMD_FAIL:
      mx__stream_fail(b, c->seq, c->u.fail.status, -1, -1,
                      "command %" PRIu64 " (launch) failed: injected fault (launch:%" PRIu64 ")",
                      mx__cmd_no(b->chan, c->seq), dev->fault_nth[MX_FAULT_LAUNCH]);
      break;
    default: break;
  }
  return true;
}

static void finish(cpu_stream *s, cpu_cmd *c) {
  if (c->flags & CMD_HEAP) free(c->u.call.heap);
  s->cur = NULL;
  s->wait_word = NULL;
  uint64_t seq = c->seq; /* the slot may be rewritten as soon as it is released */
  /* The command starts at the first position >= release_pos that maps to its slot (the
   * producer may have skipped the array's tail before it); release through its last slot. */
  uint64_t idx = (uint64_t)(c - s->slots);
  uint64_t start = s->release_pos + ((idx - s->release_pos) & s->mask);
  s->release_pos = start + c->nslots;
  atomic_store(&s->slots_released, s->release_pos);
  atomic_store(&s->base.chan->completed, seq);
  mx_device *dev = s->base.dev;
  cpu_notify(dev);
  mx__waitq_notify(&dev->host_wq, &s->slots_released, s->release_pos);
  mx__waitq_notify(&dev->host_wq, &s->base.chan->completed, seq);
}

/* Runs up to DRAIN_BUDGET commands of s; true if anything was dequeued or resumed. */
static bool drain(cpu_stream *s) {
  bool progress = false;
  for (unsigned n = 0; n < DRAIN_BUDGET; n++) {
    cpu_cmd *c = s->cur;
    if (c) {
      if (atomic_load(s->wait_word) < s->wait_target) return progress;
    } else {
      /* Look first, so the TSan acquire precedes the dequeue's read of the entry. */
      if (ck_ring_size(&s->ring) == 0) return progress;
      MX__TSAN_ACQUIRE(&s->ring.p_tail);
      MX__TSAN_RELEASE(&s->ring.c_head);
      void *p = NULL;
      ck_ring_dequeue_spsc(&s->ring, s->ring_buf, &p); /* single consumer: cannot fail now */
      c = s->cur = p;
      s->phase = 0;
      s->pc = 0;
    }
    progress = true;
    if (!run_cmd(s, c)) return true;
    finish(s, c);
  }
  return progress;
}

static void adopt(cpu_worker *w) {
  uint64_t g = atomic_load(&w->gen);
  w->mine = atomic_load(&w->list);
  w->adopted = g;
  /* A dedicated worker of a low-priority stream lowers its OS priority (raising it back would
   * need privileges, so this is done once). */
  if (w->dev->opt.max_workers == 0 && w->mine->n == 1 && w->mine->s[0]->base.priority < 0 && !w->niced) {
    int nice = -w->mine->s[0]->base.priority;
    if (nice > 19) nice = 19;
    setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), nice);
    w->niced = true;
  }
  atomic_store(&w->seen_gen, g);
  mx__waitq_notify(&w->dev->host_wq, &w->seen_gen, g);
}

static bool worker_ready(cpu_worker *w) {
  if (atomic_load(&w->stop) || atomic_load(&w->gen) != w->adopted) return true;
  const cpu_list *l = w->mine;
  for (size_t i = 0; i < l->n; i++) {
    cpu_stream *s = l->s[i];
    if (s->cur) {
      if (atomic_load(s->wait_word) >= s->wait_target) return true;
    } else if (ck_ring_size(&s->ring) != 0) {
      return true;
    }
  }
  return false;
}

static void park(cpu_worker *w) {
  cpu_device *cd = w->dev->impl;
  bool blocked = false;
  for (size_t i = 0; i < w->mine->n; i++) blocked |= w->mine->s[i]->cur != NULL;
  uint32_t bell = atomic_load(&w->bell);
  if (blocked) {
    atomic_store(&w->parked_blocked, 1);
    atomic_fetch_add(&cd->n_blocked, 1);
  }
  atomic_store(&w->sleeping, 1);
  if (!worker_ready(w)) mx__futex_wait(&w->bell, bell);
  atomic_store(&w->sleeping, 0);
  if (blocked) {
    atomic_fetch_sub(&cd->n_blocked, 1);
    atomic_store(&w->parked_blocked, 0);
  }
}

static void *worker_main(void *arg) {
  cpu_worker *w = arg;
  mx_device *dev = w->dev;
  cpu_device *cd = dev->impl;
  if (mx__cpu_topo_bind_self(&cd->topo, w->index)) atomic_fetch_add(&cd->pinned, 1);
  uint64_t spin_ns = (uint64_t)dev->spin_ns;
  uint64_t idle_start = 0; /* 0: busy; UINT64_MAX: parked since the last progress */
  unsigned spins = 0;
  for (;;) {
    if (atomic_load(&w->gen) != w->adopted) adopt(w);
    bool progress = false;
    const cpu_list *l = w->mine;
    for (size_t i = 0; i < l->n; i++) progress |= drain(l->s[i]);
    if (progress) {
      idle_start = 0;
      continue;
    }
    if (atomic_load(&w->stop)) break;
    if (idle_start == 0) {
      idle_start = mx__now_ns();
      spins = 0;
    }
    if (idle_start != UINT64_MAX) {
      mx__cpu_relax();
      if ((++spins & 31) != 0) continue;
      uint64_t spent = mx__now_ns() - idle_start;
      if (spent < spin_ns) {
        if (spent >= MX__SPIN_PURE_NS) sched_yield();
        continue;
      }
    }
    park(w);
    idle_start = UINT64_MAX;
  }
  return NULL;
}

/* --- worker management ------------------------------------------------------------------------ */

/* Publishes a list for w and waits until its thread (if running) adopted it. */
static void set_list(cpu_worker *w, cpu_list *list) {
  atomic_store(&w->list, list);
  uint64_t g = atomic_fetch_add(&w->gen, 1) + 1;
  if (w->running) {
    wake_worker(w);
    mx__waitq_wait_ge(&w->dev->host_wq, &w->seen_gen, g, w->dev->spin_ns);
  }
}

/* Fills dst with cur's streams, minus `remove`, plus `add` placed by priority (stable). */
static void list_fill(cpu_list *dst, const cpu_list *cur, cpu_stream *add, cpu_stream *remove) {
  size_t k = 0;
  bool placed = add == NULL;
  for (size_t i = 0; i < cur->n; i++) {
    if (cur->s[i] == remove) continue;
    if (!placed && add->base.priority > cur->s[i]->base.priority) {
      dst->s[k++] = add;
      placed = true;
    }
    dst->s[k++] = cur->s[i];
  }
  if (!placed) dst->s[k++] = add;
  dst->n = k;
}

/* Publishes w's list with `add` added or `remove` removed (under cd->lock). Only growth past
 * the capacity allocates, so removal cannot fail; false when out of memory. */
static bool list_change(cpu_worker *w, cpu_stream *add, cpu_stream *remove) {
  const cpu_list *cur = atomic_load(&w->list);
  size_t need = cur->n + (add ? 1 : 0);
  if (need > w->cap) {
    size_t ncap = w->cap ? 2 * w->cap : 4;
    cpu_list *b0 = malloc(sizeof *b0 + ncap * sizeof b0->s[0]);
    cpu_list *b1 = malloc(sizeof *b1 + ncap * sizeof b1->s[0]);
    if (!b0 || !b1) {
      free(b0);
      free(b1);
      return false;
    }
    list_fill(b0, cur, add, remove);
    set_list(w, b0); /* the old buffers are unused once this returns */
    free(w->bufs[0]);
    free(w->bufs[1]);
    w->bufs[0] = b0;
    w->bufs[1] = b1;
    w->cap = ncap;
    return true;
  }
  cpu_list *next = cur == w->bufs[0] ? w->bufs[1] : w->bufs[0];
  list_fill(next, cur, add, remove);
  set_list(w, next);
  return true;
}

/* Least loaded worker, or a new one while the cap allows; under cd->lock. */
static cpu_worker *pick_worker(mx_device *dev, cpu_device *cd) {
  uint32_t cap = dev->opt.max_workers ? dev->opt.max_workers : MAX_WORKERS;
  if (cap > MAX_WORKERS) cap = MAX_WORKERS;
  uint32_t n = atomic_load(&cd->n_workers);
  cpu_worker *best = NULL;
  for (uint32_t i = 0; i < n; i++) {
    cpu_worker *w = atomic_load(&cd->workers[i]);
    if (!best || w->n_streams < best->n_streams) best = w;
  }
  if ((!best || best->n_streams > 0) && n < cap) {
    cpu_worker *w = calloc(1, sizeof *w);
    if (!w) return best;
    w->dev = dev;
    w->index = n;
    atomic_init(&w->list, (cpu_list *)&empty_list);
    w->mine = (cpu_list *)&empty_list;
    w->adopted = 0;
    atomic_store(&cd->workers[n], w);
    atomic_store(&cd->n_workers, n + 1);
    best = w;
  }
  return best;
}

static void stop_worker(cpu_worker *w) {
  atomic_store(&w->stop, 1);
  wake_worker(w);
  pthread_join(w->thread, NULL);
  w->running = false;
  atomic_store(&w->stop, 0);
  /* A restarted thread adopts the list published before its start (gen moved on). */
}

static mx_status cpu_stream_init(mx_stream *b) {
  cpu_stream *s = (cpu_stream *)b;
  mx_device *dev = b->dev;
  cpu_device *cd = dev->impl;
  uint32_t n = dev->opt.ring_slots;
  mx_status st = MX_OK;
  void *slots = NULL;
  s->ring_buf = calloc(n, sizeof *s->ring_buf);
  if (!s->ring_buf || posix_memalign(&slots, 64, (size_t)n * sizeof(cpu_cmd)) != 0) {
    st = mx__device_fail(dev, MX_ERR_OUT_OF_MEMORY,
                         "mx_stream_create: out of host memory for "
                         "a %u-slot queue",
                         n);
    goto free_ring;
  }
  s->slots = slots;
  ck_ring_init(&s->ring, n);
  s->mask = n - 1;
  s->max_cmd_slots = n / 4 < 65535 ? n / 4 : 65535;
  if (s->max_cmd_slots == 0) s->max_cmd_slots = 1;

  pthread_mutex_lock(&cd->lock);
  cpu_worker *w = pick_worker(dev, cd);
  if (!w || !list_change(w, s, NULL)) {
    pthread_mutex_unlock(&cd->lock);
    st = mx__device_fail(dev, MX_ERR_OUT_OF_MEMORY, "mx_stream_create: out of host memory");
    goto free_ring;
  }
  s->worker = w;
  w->n_streams++;
  if (!w->running) {
    int rc = pthread_create(&w->thread, NULL, worker_main, w);
    if (rc != 0) {
      w->n_streams--;
      list_change(w, NULL, s);
      pthread_mutex_unlock(&cd->lock);
      st = mx__device_fail(dev, MX_ERR_DEVICE, "mx_stream_create: cannot start a worker thread: %s",
                           strerror(rc));
      goto free_ring;
    }
    w->running = true;
  }
  pthread_mutex_unlock(&cd->lock);
  return MX_OK;

free_ring:
  free(slots);
  free(s->ring_buf);
  s->slots = NULL;
  s->ring_buf = NULL;
  return st;
}

static void cpu_stream_fini(mx_stream *b) {
  cpu_stream *s = (cpu_stream *)b;
  mx_device *dev = b->dev;
  cpu_device *cd = dev->impl;
  cpu_worker *w = s->worker;
  pthread_mutex_lock(&cd->lock);
  list_change(w, NULL, s); /* removal never allocates */
  w->n_streams--;
  if (dev->opt.max_workers == 0 && w->n_streams == 0 && w->running) stop_worker(w);
  pthread_mutex_unlock(&cd->lock);
  free(s->slots);
  free(s->ring_buf);
}

/* --- device ----------------------------------------------------------------------------------- */

static mx_status cpu_init(mx_device *dev, mx_error *err) {
  cpu_device *cd = calloc(1, sizeof *cd);
  if (!cd) return mx__fail_oom(err, "CPU device");
  mx_status st = mx__cpu_topo_init(&cd->topo, dev->opt.pinning, err);
  if (st != MX_OK) goto free_device;
  pthread_mutex_init(&cd->lock, NULL);
  dev->impl = cd;
  return MX_OK;

free_device:
  free(cd);
  return st;
}

static void cpu_fini(mx_device *dev) {
  cpu_device *cd = dev->impl;
  uint32_t n = atomic_load(&cd->n_workers);
  for (uint32_t i = 0; i < n; i++) {
    cpu_worker *w = atomic_load(&cd->workers[i]);
    if (w->running) stop_worker(w);
    free(w->bufs[0]);
    free(w->bufs[1]);
    free(w);
  }
  mx__cpu_topo_fini(&cd->topo);
  pthread_mutex_destroy(&cd->lock);
  free(cd);
  dev->impl = NULL;
}

static void cpu_info(const mx_device *dev, mx_device_info *info) {
  cpu_device *cd = dev->impl;
  info->pinning = cd->topo.policy;
  info->processing_units = cd->topo.n_pus;
  pthread_mutex_lock(&cd->lock);
  uint32_t n = atomic_load(&cd->n_workers), running = 0;
  for (uint32_t i = 0; i < n; i++) running += atomic_load(&cd->workers[i])->running ? 1 : 0;
  pthread_mutex_unlock(&cd->lock);
  info->workers = running;
  info->pinned_workers = atomic_load(&cd->pinned);
}

const mx__device_ops mx__cpu_device_ops = {
    .api_version = MX_HAL_API_VERSION,
    .name = "cpu",
    .stream_size = sizeof(cpu_stream),
    .init = cpu_init,
    .fini = cpu_fini,
    .stream_init = cpu_stream_init,
    .stream_fini = cpu_stream_fini,
    .call = cpu_call,
    .submit = cpu_submit,
    .model_prepare = cpu_model_prepare,
    .model_release = cpu_model_release,
    .model_execute = cpu_model_execute,
    .notify = cpu_notify,
    .info = cpu_info,
    .call_named = cpu_call_named,
};
