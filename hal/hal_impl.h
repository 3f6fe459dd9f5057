/* Private structures of the HAL (never included outside hal/).
 *
 * The front end (hal/hal.c, hal/memory.c, hal/model.c) owns everything that is the same for
 * every device: options, memory tracking, checking mode, fault injection, sequence counters,
 * sticky errors, events and the host side of models. A backend (hal/cpu/) implements the
 * mx__device_ops table: how commands reach the device side and run there.
 *
 * Ordering model. Every stream has a channel (mx__chan) with two monotonic counters:
 * `submitted` (commands queued by the host) and `completed` (commands finished or skipped on
 * the device side). A command's sequence number is its 1-based position. An event is a pair
 * (channel, target): it is reached when channel.completed >= target. Channels belong to the
 * device and are recycled without resetting their counters, so an event that outlives its
 * stream stays valid (a destroyed stream was drained, so its events count as reached). */
#ifndef MIXRT_HAL_HAL_IMPL_H
#define MIXRT_HAL_HAL_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/arena.h"
#include "common/clock.h"
#include "common/error.h"
#include "hal/hal.h"

/* ThreadSanitizer cannot see the inline-assembly atomics of concurrencykit, so the ring
 * hand-offs are annotated as release/acquire pairs in TSan builds. */
#if defined(__SANITIZE_THREAD__)
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define MX__TSAN_ACQUIRE(p) __tsan_acquire((void *)(p))
#define MX__TSAN_RELEASE(p) __tsan_release((void *)(p))
#else
#define MX__TSAN_ACQUIRE(p) ((void)0)
#define MX__TSAN_RELEASE(p) ((void)0)
#endif

#define MX__LIKELY(x)   __builtin_expect(!!(x), 1)
#define MX__UNLIKELY(x) __builtin_expect(!!(x), 0)

/* --- waiting (hal/wait.c) --------------------------------------------------------------------- */

/* Host threads waiting for device progress. A waiter parks in one of a few slots saying which
 * counter it waits for and the value it needs; a notifier that has just advanced a counter wakes
 * only the slots whose condition it met (it compares the counter's address, it never reads
 * through a waiter's pointer). When every slot is taken, further waiters share a broadcast futex
 * that any progress bumps. The protocol is an eventcount: the waiter arms, re-reads the counter
 * and parks only if the futex word did not move; the notifier publishes progress with a
 * sequentially consistent store before it looks at the slots, so one side always sees the
 * other. */
#define MX__WAIT_SLOTS 8

/* Spinning waiters (host threads and idle workers) spin with the pause instruction alone for
 * this long, then yield the processor between checks until their spin time ends and they park. */
#define MX__SPIN_PURE_NS 2000u

typedef struct mx__waiter {
  _Alignas(64) _Atomic uint32_t state; /* 0 free, 1 claimed, 2 armed (parked or parking),
                                          3 woken by a notifier */
  _Atomic uint32_t futex;              /* bumped by the notifier that wakes this slot */
  _Atomic uintptr_t word;              /* address of the counter waited on (compared only) */
  _Atomic uint64_t target;             /* value the counter must reach */
} mx__waiter;

typedef struct mx__waitq {
  _Atomic uint32_t armed;         /* slots in state 2 (notifiers skip the scan at 0) */
  _Atomic uint32_t bcast;         /* broadcast futex word for overflow waiters */
  _Atomic uint32_t bcast_waiters; /* overflow waiters parked on bcast */
  mx__waiter slot[MX__WAIT_SLOTS];
} mx__waitq;

void mx__futex_wait(_Atomic uint32_t *word, uint32_t expected);
void mx__futex_wake(_Atomic uint32_t *word, int count);

static inline void mx__cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

/* The caller has just advanced *word to `value` with a sequentially consistent store: wakes the
 * host threads waiting for *word to reach at most `value` (and the overflow waiters). */
void mx__waitq_notify(mx__waitq *q, const _Atomic uint64_t *word, uint64_t value);

/* Blocks the calling host thread until *word >= target: spins for spin_ns, then parks on q. The
 * code that advances *word must call mx__waitq_notify(q, word, new value). */
void mx__waitq_wait_ge(mx__waitq *q, _Atomic uint64_t *word, uint64_t target, int64_t spin_ns);

/* --- channels, streams, events ---------------------------------------------------------------- */

typedef struct mx__chan {
  /* Host side (written per submission). */
  _Alignas(64) _Atomic uint64_t submitted; /* commands queued (under the stream's submit lock) */
  uint64_t base;                           /* `submitted` when the current stream took the channel: command
                                 numbers shown to users are seq - base */
  struct mx__chan *next_free;              /* device free list (under dev->lock) */
  struct mx__chan *next_all;               /* every channel of the device, for teardown */
  /* Device side (written per completion), on its own cache line. */
  _Alignas(64) _Atomic uint64_t completed; /* commands finished or skipped on the device side */
  _Atomic uint64_t error_seq;              /* sequence number of the command that failed it; 0 = healthy */
  _Atomic int error_status;                /* its mx_status (valid when error_seq != 0) */
  /* Its message (valid when error_seq != 0; written before the failed command completes, so a
   * stream whose wait saw that completion reads it whole). */
  char error_msg[MX_ERROR_MESSAGE_MAX];
} mx__chan;

/* Common head of every stream object; a backend's stream struct starts with it. */
struct mx_stream {
  mx_device *dev; /* owning device (borrowed) */
  mx__chan *chan; /* sequence counters (owned by the device, recycled) */
  int priority;   /* higher runs first on a shared worker */
  bool internal;  /* private stream of a model: not in the device list */
  /* Sticky error. Written only by the thread that runs this stream's commands, before
   * err_status (release) and chan->error_seq are published; cleared by mx_stream_reset once the
   * stream is drained. */
  _Atomic int err_status;        /* mx_status; MX_OK while healthy */
  int64_t err_task;              /* failing model task (add order) or -1 */
  int32_t err_model_stream;      /* its internal stream or -1 */
  struct mx_stream *prev, *next; /* device stream list (under dev->lock) */
  /* Written by every submission: kept off the line the device side reads per command. */
  _Alignas(64) pthread_mutex_t submit_lock; /* serializes host submissions */
  char err_msg[MX_ERROR_MESSAGE_MAX];
};

struct mx_event {
  mx_device *dev;               /* owning device (borrowed) */
  pthread_mutex_t lock;         /* guards chan and target against concurrent record/wait */
  mx__chan *chan;               /* channel of the last record; NULL = never recorded */
  uint64_t target;              /* reached when chan->completed >= target */
  struct mx_event *prev, *next; /* device event list (under dev->lock) */
};

/* Records a device-side failure of command `seq` on s (first failure wins). Called only by the
 * thread running s's commands. task / mstream identify a model task (-1 when none). */
void mx__stream_fail(mx_stream *s, uint64_t seq, mx_status status, int64_t task, int32_t mstream,
                     const char *fmt, ...) MX_PRINTF(6, 7);

/* Checks on the device side whether waiting for (chan, target) inherits a failure: fails s at
 * command seq when chan failed at or before target. */
void mx__stream_check_wait(mx_stream *s, uint64_t seq, const mx__chan *chan, uint64_t target);

/* Creates a stream (internal: a model's private stream, kept out of the device list). */
MX_MUST_USE mx_status mx__stream_create(mx_device *dev, int priority, bool internal, mx_stream **out);

/* Launch fault injection for calls that launch through other paths (model execute): returns
 * MX_OK, or MX_ERR_DEVICE after failing s at this point of its order. */
MX_MUST_USE mx_status mx__launch_fault(mx_stream *s, const char *what);

/* The printf arguments for "%s%s%s" that quote an optional name: " 'name'" or nothing. */
#define MX__QUOTE(name) (name) ? " '" : "", (name) ? (name) : "", (name) ? "'" : ""

/* 1-based number of command `seq` among the submissions of the channel's current stream. */
static inline uint64_t mx__cmd_no(const mx__chan *chan, uint64_t seq) { return seq - chan->base; }

static inline bool mx__stream_failed(const mx_stream *s) {
  return atomic_load_explicit(&s->err_status, memory_order_relaxed) != MX_OK;
}

/* --- asynchronous operations other than calls ------------------------------------------------ */

typedef enum mx__op_kind {
  MX__OP_COPY = 0,   /* memcpy(dst, src, n) */
  MX__OP_MEMSET = 1, /* memset(dst, value, n) */
  MX__OP_FREE = 2,   /* free device allocation ptr */
  MX__OP_WAIT = 3,   /* wait until chan->completed >= target */
  MX__OP_FAIL = 4    /* fail the stream with status and message (injected launch fault) */
} mx__op_kind;

typedef struct mx__op {
  mx__op_kind kind;
  bool inject;      /* copy/memset: injected fault, fail instead of copying */
  mx_status status; /* FAIL: the status to report */
  void *dst;        /* COPY/MEMSET destination, FREE pointer */
  const void *src;  /* COPY source */
  size_t n;         /* COPY/MEMSET bytes */
  int value;        /* MEMSET byte */
  mx__chan *chan;   /* WAIT channel */
  uint64_t target;  /* WAIT target */
  const char *name; /* COPY/MEMSET: what is copied, for failure reports (borrowed until the
                       command has run), or NULL */
} mx__op;

/* --- models ----------------------------------------------------------------------------------- */

typedef enum mx__item_kind { MX__ITEM_TASK = 0, MX__ITEM_RECORD = 1, MX__ITEM_WAIT = 2 } mx__item_kind;

typedef struct mx__model_item {
  mx_hal_fn fn;             /* TASK: kernel; NULL otherwise */
  unsigned char *args;      /* TASK: argument block in the model arena (16-byte aligned) */
  uint32_t size;            /* TASK: argument bytes */
  uint16_t kind;            /* mx__item_kind */
  uint16_t part;            /* internal stream the item belongs to */
  uint32_t index;           /* TASK: task index (add order); RECORD/WAIT: event index */
  uint32_t n_slots;         /* TASK: number of slots */
  const mx_hal_slot *slots; /* TASK: its slots (in the model arena) */
} mx__model_item;

typedef struct mx__model_part {
  mx__model_item *items; /* owned, grown while building */
  size_t n, cap;
} mx__model_part;

typedef struct mx__order_entry {
  uint32_t part; /* internal stream */
  uint32_t item; /* index in that stream's items */
} mx__order_entry;

typedef struct mx__patch {
  uint32_t id; /* alloc id */
  void *base;  /* its new base */
} mx__patch;

typedef struct mx__id_slot {
  unsigned char *loc; /* where the pointer lives (inside an argument block of the arena) */
  uint64_t offset;    /* added to the base */
} mx__id_slot;

struct mx_hal_model {
  mx_device *dev;              /* owning device (borrowed) */
  mx_hal_model_desc desc;      /* as created */
  bool built;                  /* build_end succeeded: no more items, executes allowed */
  bool slow;                   /* tasks go through the slow path (indirect, checking, faults) */
  mx_error err;                /* the last failing host call on this model */
  mx_arena arena;              /* argument blocks and slot copies (owned) */
  mx__model_part *parts;       /* desc.n_streams entries (owned) */
  mx__order_entry *order;      /* every item in add order (owned) */
  size_t n_order, cap_order;   /* entries, capacity */
  uint32_t n_tasks;            /* tasks added */
  uint64_t n_slots;            /* slots over all tasks */
  mx__model_item **task_items; /* task index -> its item (built at build_end, owned) */
  const char *name;            /* desc.name copied into the arena, or NULL */
  const char **task_names;     /* task index -> its name in the arena or NULL (grown with the
                              tasks, owned); read only when a task fails */
  size_t cap_task_names;       /* entries of task_names */
  uint8_t *ev_recorded;        /* per event: recorded while building (owned) */
  uint32_t *id_slot_start;     /* CSR over ids: slots of id i are [start[i], start[i+1]) */
  mx__id_slot *id_slots;       /* (owned) */

  /* Host side, under host_lock (own cache lines: the device side never writes them). */
  _Alignas(64) pthread_mutex_t host_lock;
  void **host_base;                             /* latest bases set by update_bases (owned) */
  uint8_t *dirty;                               /* per id: changed since the last execute (owned) */
  uint32_t *dirty_ids;                          /* the ids with dirty set, in change order (owned) */
  uint32_t n_dirty;                             /* entries of dirty_ids */
  uint64_t exec_submitted;                      /* executions queued so far */
  mx__patch *patches;                           /* ring of patch batches handed to the device (owned) */
  uint64_t patch_cap;                           /* entries in the ring */
  uint64_t patch_head;                          /* entries ever written by the host */
  _Alignas(64) _Atomic uint64_t patch_consumed; /* entries ever consumed by first steps */

  /* Device side. Executions run one after another (each waits for the previous one). */
  void **dev_base;                     /* base table as the device sees it (owned) */
  _Atomic uint64_t started;            /* last execution whose first step is done */
  _Atomic uint64_t done;               /* last execution fully finished */
  _Atomic uint64_t *part_done;         /* per internal stream: last execution it finished (owned) */
  _Atomic uint64_t *ev_epoch;          /* per event: last execution that recorded it (owned) */
  uint8_t *part_skip;                  /* per internal stream: skip tasks in this execution (owned) */
  _Atomic int exec_failed;             /* 0, or 1 once a task of the current execution failed */
  mx_status exec_status;               /* first failure of the current execution (by its winner) */
  int64_t exec_task;                   /* its task index (add order), -1 when not a task */
  int32_t exec_stream;                 /* its internal stream, -1 when none */
  char exec_msg[MX_ERROR_MESSAGE_MAX]; /* its message, copied to the stream at the end */
  uint64_t exec_t0;                    /* when the current execution's first step started, ticks */

  /* Statistics (device side writes, host reads; see mx_hal_model_stats): executions, slots
   * patched (total, last), ids refreshed (total, last), and the last patch / execution time in
   * ns. */
  _Alignas(64) _Atomic uint64_t st_exec, st_patched, st_last_patched, st_ids, st_last_ids;
  _Atomic uint64_t st_patch_ticks, st_exec_ticks; /* mx__ticks: statistics_get makes them ns */

  _Alignas(64) void *impl;          /* backend state (CPU: private streams), owned by the backend */
  struct mx_hal_model *prev, *next; /* device model list (under dev->lock) */
};

/* Device-side steps (hal/model.c), used by the backends. */

/* First step of execution `exec`: consumes its patch batch [start, start + count) from the patch
 * ring, applies it to the base table (patching slots in PATCH mode), validates every slot in
 * checking mode, and arms the parts (abort: skip every task, e.g. the stream already failed). */
void mx__model_begin(mx_hal_model *m, uint64_t exec, uint64_t start, uint32_t count, bool abort);

/* Runs internal stream `part` of execution `exec` from item *pc. Returns true when the part
 * is finished; false when it must wait until **wait_word >= *wait_target (then *pc says where to
 * resume). */
bool mx__model_run_part(mx_hal_model *m, uint32_t part, uint64_t exec, uint32_t *pc,
                        _Atomic uint64_t **wait_word, uint64_t *wait_target);

/* Runs every item of execution `exec` in add order in the calling thread (inline device; add
 * order is always a valid schedule because waits follow their records). */
void mx__model_run_in_order(mx_hal_model *m, uint64_t exec);

/* Last step: statistics; fails stream s at command seq if a task failed; publishes done. */
void mx__model_end(mx_hal_model *m, uint64_t exec, mx_stream *s, uint64_t seq);

/* What launches and model tasks run on a device created with skip_kernels: nothing. */
MX_MUST_USE mx_status mx__skipped_kernel(void *args, size_t size);

/* --- device ----------------------------------------------------------------------------------- */

typedef struct mx__device_ops {
  uint32_t api_version; /* MX_HAL_API_VERSION the backend was written for */
  const char *name;
  size_t stream_size; /* bytes of the backend stream (starts with struct mx_stream) */
  mx_status (*init)(mx_device *dev, mx_error *err);
  void (*fini)(mx_device *dev); /* every stream is already gone */
  mx_status (*stream_init)(mx_stream *s);
  void (*stream_fini)(mx_stream *s); /* the stream is drained */
  /* Queues fn(args copy) on s; kernel says whether it is a kernel (fault injection). */
  mx_status (*call)(mx_stream *s, mx_hal_fn fn, const void *args, size_t size, bool kernel);
  mx_status (*submit)(mx_stream *s, const mx__op *op);
  mx_status (*model_prepare)(mx_hal_model *m);
  void (*model_release)(mx_hal_model *m); /* no execution in flight */
  /* Queues execution `exec` of m on s with its patch batch; called under m->host_lock. */
  mx_status (*model_execute)(mx_hal_model *m, mx_stream *s, uint64_t exec, uint64_t patch_start,
                             uint32_t patch_count);
  /* Device-side progress that may unblock other streams' commands was just published
   * (seq_cst); host waiters are notified separately through dev->host_wq. */
  void (*notify)(mx_device *dev);
  void (*info)(const mx_device *dev, mx_device_info *info);
  /* Version 2: call with a name for failure reports (borrowed until the command has run; may
   * be NULL). When NULL, launches go through call and stay unnamed. */
  mx_status (*call_named)(mx_stream *s, mx_hal_fn fn, const void *args, size_t size, bool kernel,
                          const char *name);
} mx__device_ops;

typedef struct mx__mem_node mx__mem_node;
typedef struct mx__shared_block mx__shared_block;

struct mx_device {
  const mx__device_ops *ops;                          /* backend table (static, borrowed) */
  void *impl;                                         /* backend state (owned by the backend) */
  mx_device_options opt;                              /* resolved options */
  int64_t spin_ns;                                    /* resolved spin time before parking */
  mx__tick_clock clock;                               /* converts model statistics' ticks to ns */
  bool check;                                         /* checking mode */
  bool faults;                                        /* any fault point armed */
  bool skip_kernels;                                  /* launches and model tasks run
                                                         mx__skipped_kernel instead */
  uint64_t fault_nth[MX_FAULT_POINT_COUNT];           /* 0 = off, N = the Nth operation fails */
  _Atomic uint64_t fault_count[MX_FAULT_POINT_COUNT]; /* operations seen per point */

  pthread_mutex_t lock;             /* guards the lists below and the channels */
  mx_stream *streams;               /* user streams (their objects are owned by their users) */
  mx_event *events;                 /* every live event (owned by their users) */
  mx_hal_model *models;             /* every live model (owned by their users) */
  mx__chan *chans_all, *chans_free; /* channels (owned), every one and the recyclable ones */

  pthread_mutex_t mem_lock;                 /* guards the memory fields */
  mx__mem_node *mem_root;                   /* live allocations and registered buffers, by address */
  uint64_t mem_in_use, mem_peak;            /* bytes (reserved before the host allocation happens) */
  uint64_t mem_capacity;                    /* bytes the device can ever provide: the host's physical memory
                                    (device memory is host RAM); larger requests are refused */
  uint64_t mem_allocs, mem_frees, mem_live; /* counts since creation, and live now */
  uint64_t mem_rng;                         /* treap priority generator */

  pthread_mutex_t share_lock; /* guards the shared blocks; taken before mem_lock, never inside */
  mx__shared_block *shared;   /* live shared blocks (hal/shared.c; owned) */
  uint64_t shared_hits;       /* acquisitions served by an existing block */

  mx__waitq host_wq; /* host threads waiting for device progress */
};

/* Records a host-call failure on the device (message for mx_device_last_error). */
mx_status mx__device_fail(mx_device *dev, mx_status status, const char *fmt, ...) MX_PRINTF(3, 4);

/* True when the Nth operation of point p is this one (fault injection). */
static inline bool mx__fault_hit(mx_device *dev, mx_fault_point p) {
  uint64_t nth = dev->fault_nth[p];
  if (MX__LIKELY(nth == 0)) return false;
  return atomic_fetch_add_explicit(&dev->fault_count[p], 1, memory_order_relaxed) + 1 == nth;
}

/* Memory (hal/memory.c). */
void mx__mem_lock(mx_device *dev);
void mx__mem_unlock(mx_device *dev);
/* With mem_lock held: whether [p, p + n) lies inside one live allocation or registered buffer
 * (n == 0: p inside or at the start of one). On failure `why` explains (nearest allocation). */
bool mx__mem_contains_locked(mx_device *dev, const void *p, size_t n, char *why, size_t why_size);
/* Frees a live allocation (device side of mx_device_free_async); false with `why` if not live. */
bool mx__mem_free(mx_device *dev, void *ptr, char *why, size_t why_size);
/* Frees every allocation and registration (device teardown). */
void mx__mem_release_all(mx_device *dev);
/* Marks the live allocation at ptr shared (mx_device_free refuses it) or not; false if ptr is
 * not a live allocation. */
bool mx__mem_set_shared(mx_device *dev, void *ptr, bool shared);
/* Forgets every shared block's record (device teardown; the blocks go with the allocations). */
void mx__shared_release_all(mx_device *dev);
/* The shared blocks' figures for mx_device_memory_stats. */
void mx__shared_stats(mx_device *dev, uint64_t *blocks, uint64_t *bytes, uint64_t *hits);

/* Backends. */
extern const mx__device_ops mx__cpu_device_ops;
extern const mx__device_ops mx__inline_device_ops;

#endif /* MIXRT_HAL_HAL_IMPL_H */
