/* The intra-op thread pool of the CPU kernels (kernels/threads.h): worker threads started on
 * demand that take the tasks of one parallel run at a time from a shared range (the first
 * worker from its back, the others from its front), the calling thread taking its share as
 * slot 0.
 *
 * A run must never cost more than running its tasks inline, so the handoff is cheap:
 *   - a run is published in one atomic word (generation, workers wanted, workers joined, closed);
 *     a worker joins with a compare-and-swap and gets its slot from the join order, so the
 *     caller only ever waits for workers that actually joined, never for one still asleep;
 *   - once the caller has taken the last task it closes the run: a worker waking late finds it
 *     closed and goes back to waiting instead of delaying the caller;
 *   - workers spin a short while after a run before sleeping (the next kernel of a model
 *     usually follows within microseconds), and the caller signals only as many sleeping
 *     workers as the run wants;
 *   - runs whose estimated work is too small to repay a handoff run inline (one threshold,
 *     MIN_WORK_PER_SLOT, in mx__kparallel_work).
 * Nothing spins unbounded: every spin gives up after SPIN_ROUNDS pauses (the caller waiting for
 * its run's workers after CALLER_SPIN_ROUNDS) and then sleeps on a condition variable. Workers
 * can be bound to cores of their own with hwloc (see "pinning"). */
#include "kernels/threads.h"

#include <hwloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#else
#define CPU_RELAX() ((void)0)
#endif

/* Pauses a worker (or the waiting caller) spins before sleeping: some tens of microseconds,
 * longer than the gap between two kernels of a model, far shorter than a scheduler tick. */
#define SPIN_ROUNDS 4000

/* Pauses the caller spins for the workers that joined its run before it sleeps: longer than a
 * worker's wait between runs, since a joined worker is running tasks and ends within one (a
 * Winograd block or a band: up to a millisecond), and a caller put to sleep woke 50-100 us
 * after its last worker ended (ResNet-50 at 2 threads: 0.17-0.2 ms a step in such wakes, half
 * of that with this bound). About 1 ms. */
#define CALLER_SPIN_ROUNDS 50000

/* Estimated work (multiply-adds or comparable element steps) each thread of a run must get for
 * the handoff to pay: a woken worker costs some microseconds, a task split in two rarely ends at
 * once, and the next kernel then reads half its input from the other core's cache. Measured on
 * whole models at 2 threads (the runs under SCHED_FIFO on a loaded 2-core host, medians):
 * MobileNetV3-large 6.09-6.37 ms at 4M per thread, 5.67-6.18 at 8M, 5.48-6.05 at 16M, 5.55-5.81
 * with no Conv split; ResNet-50 44.5-45.6 ms at 4M, 41.2-45.0 at 8M, 38.9-42.6 at 16M, 51-53 at
 * 32M (its 51M multiply-add layers then stay on one thread). */
#define MIN_WORK_PER_SLOT ((int64_t)1 << 24)

/* The run word: generation << 17 | closed << 16 | wanted << 8 | joined. */
#define JOINED_MASK 0xffull
#define WANTED_SHIFT 8
#define CLOSED_BIT (1ull << 16)
#define GEN_SHIFT 17

static atomic_int pool_size = 1;

static pthread_mutex_t run_lock = PTHREAD_MUTEX_INITIALIZER; /* one parallel run at a time */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;       /* guards sleeping and waking */
static pthread_cond_t work_cv = PTHREAD_COND_INITIALIZER;
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER;

static int32_t workers; /* started worker threads; only the run_lock holder starts more */
static _Atomic uint64_t run_word;
static atomic_int sleepers;       /* workers asleep on work_cv (or about to be) */
static atomic_int caller_waiting; /* the caller sleeps on done_cv */
static atomic_int job_done;       /* joined workers that ran out of tasks */
static atomic_llong job_next;          /* job_wide: the next task */
static _Atomic uint64_t job_range;     /* otherwise: the tasks left, [lo, hi) (next_task) */
static bool job_wide;
/* The run's function and size: written before the run word is published, read by a worker only
 * after it joined, and not rewritten before every joined worker is done. */
static mx_ktask_fn job_fn;
static void *job_ctx;
static int64_t job_tasks;

static uint64_t generation_of(uint64_t w) { return w >> GEN_SHIFT; }

/* The next task for `slot`, or -1 when none is left. The tasks not yet taken are the range
 * [lo, hi) of job_range (lo in the low 32 bits, hi in the high ones): slot 1 takes them from the
 * back, every other slot from the front. A kernel numbers its tasks in the order of the data they
 * write (bands of columns, chunks of channels), so on two threads the caller keeps the first part
 * and the worker the last part of every kernel's output, run after run: the next kernel's tasks
 * then mostly read what the same core just wrote, still in its own cache, where a shared counter
 * hands each task to whichever thread comes first. A run of more tasks than fit in 32 bits
 * takes them all from the front (job_next). */
static int64_t next_task(int32_t slot) {
  if (job_wide) return atomic_fetch_add(&job_next, 1);
  uint64_t r = atomic_load(&job_range);
  for (;;) {
    const uint64_t lo = r & 0xffffffffull, hi = r >> 32;
    if (lo >= hi) return -1;
    const bool back = slot == 1;
    const uint64_t taken = back ? (hi - 1) << 32 | lo : hi << 32 | (lo + 1);
    if (atomic_compare_exchange_weak(&job_range, &r, taken)) return (int64_t)(back ? hi - 1 : lo);
  }
}

static void take_tasks(mx_ktask_fn fn, void *ctx, int64_t n, int32_t slot) {
  for (;;) {
    int64_t t = next_task(slot);
    if (t < 0 || t >= n) return;
    fn(ctx, t, slot);
  }
}

/* Joins the run of word w when it is open and wants more workers: the slot, or 0. */
static int32_t try_join(uint64_t w) {
  const uint64_t gen = generation_of(w);
  for (;;) {
    /* a newer run is joined from the worker's loop, which then records its generation */
    if (generation_of(w) != gen || (w & CLOSED_BIT)) return 0;
    uint64_t joined = w & JOINED_MASK, wanted = (w >> WANTED_SHIFT) & 0xff;
    if (joined + 1 >= wanted) return 0;
    if (atomic_compare_exchange_weak(&run_word, &w, w + 1)) return (int32_t)joined + 1;
  }
}

/* Waits until the run word's generation differs from `seen`, spinning first; returns the word. */
static uint64_t wait_for_run(uint64_t seen) {
  for (int i = 0; i < SPIN_ROUNDS; i++) {
    uint64_t w = atomic_load(&run_word);
    if (generation_of(w) != seen) return w;
    CPU_RELAX();
  }
  pthread_mutex_lock(&mu);
  atomic_fetch_add(&sleepers, 1);
  uint64_t w;
  /* the caller publishes the word, then reads `sleepers`; this thread counts itself, then reads
   * the word: one of the two sees the other (sequentially consistent atomics) */
  while (generation_of(w = atomic_load(&run_word)) == seen) pthread_cond_wait(&work_cv, &mu);
  atomic_fetch_sub(&sleepers, 1);
  pthread_mutex_unlock(&mu);
  return w;
}

/* --- pinning ----------------------------------------------------------------------------------
 * Each worker is bound to a core of its own (hwloc), away from the core of the thread that first
 * started workers (the caller of the runs: an inline device's thread, or a CPU device stream
 * that hal/cpu/topology.c pinned). Unbound, the scheduler at times put the worker on the caller's
 * core for a while, and a run then took as long as on one thread plus the handoff. Worker i takes
 * the i-th core after the caller's (cyclically), so two workers never share a core while one is
 * free; with more workers than other cores they wrap onto cores again, the caller's last.
 * The caller of later runs may sit elsewhere (a CPU device whose streams hal/cpu/topology.c pins
 * after the workers started, or an unbound thread the scheduler moved): each run names the
 * caller's processing unit, and a worker bound to the caller's core moves to the next other one
 * before it takes tasks, so the two never share a core for a whole run.
 * Binding is off unless MIXRT_POOL_PIN=1 is in the environment: measured on ResNet-50 and
 * MobileNetV3 at 2 threads it gained nothing over the scheduler's placement (within the noise),
 * and a bound worker cannot leave a core another busy thread holds: with a CPU device under
 * SCHED_FIFO, the submitting thread waited on the worker's core and ResNet-50's Convs at 2 threads
 * took as long as at 1 (`mixrt bench models --layers`: 69.9 ms bound, 40.4 ms unbound). */

static hwloc_topology_t pin_topo; /* loaded on the first worker start; kept for the process */
static bool pin_tried;
static int pin_cores;          /* cores in pin_topo */
static int pin_caller_core;    /* the caller's core when the first worker started, or -1 */
static int *pin_core_of;       /* core (logical index) of each processing unit's OS index */
static int pin_max_pu;         /* entries of pin_core_of */
static atomic_int job_caller_pu = -1; /* the processing unit the run's caller took it on */

/* The core (logical index) the calling thread runs on, or is bound within; -1 if unknown. */
static int caller_core(void) {
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  int core = -1;
  if (set && hwloc_get_cpubind(pin_topo, set, HWLOC_CPUBIND_THREAD) == 0) {
    hwloc_obj_t obj = hwloc_get_obj_covering_cpuset(pin_topo, set);
    hwloc_obj_t c = obj ? hwloc_get_ancestor_obj_by_type(pin_topo, HWLOC_OBJ_CORE, obj) : NULL;
    if (obj && obj->type == HWLOC_OBJ_CORE) c = obj;
    if (c) core = (int)c->logical_index;
  }
  if (core < 0 && set && hwloc_get_last_cpu_location(pin_topo, set, HWLOC_CPUBIND_THREAD) == 0) {
    hwloc_obj_t pu = hwloc_get_obj_covering_cpuset(pin_topo, set);
    hwloc_obj_t c = pu ? hwloc_get_ancestor_obj_by_type(pin_topo, HWLOC_OBJ_CORE, pu) : NULL;
    if (c) core = (int)c->logical_index;
  }
  hwloc_bitmap_free(set);
  return core;
}

/* Loads the topology once (called with run_lock held, by the caller of a run). */
static void pin_init(void) {
  if (pin_tried) return;
  pin_tried = true;
  const char *env = getenv("MIXRT_POOL_PIN");
  if (!env || strcmp(env, "1") != 0) return;
  if (hwloc_topology_init(&pin_topo) != 0) {
    pin_topo = NULL;
    return;
  }
  if (hwloc_topology_load(pin_topo) != 0) {
    hwloc_topology_destroy(pin_topo);
    pin_topo = NULL;
    return;
  }
  pin_cores = hwloc_get_nbobjs_by_type(pin_topo, HWLOC_OBJ_CORE);
  pin_caller_core = caller_core();
  const int npu = hwloc_get_nbobjs_by_type(pin_topo, HWLOC_OBJ_PU);
  for (int i = 0; i < npu; i++) {
    hwloc_obj_t pu = hwloc_get_obj_by_type(pin_topo, HWLOC_OBJ_PU, (unsigned)i);
    if (pu && (int)pu->os_index + 1 > pin_max_pu) pin_max_pu = (int)pu->os_index + 1;
  }
  pin_core_of = pin_max_pu > 0 ? malloc((size_t)pin_max_pu * sizeof *pin_core_of) : NULL;
  for (int i = 0; pin_core_of && i < pin_max_pu; i++) pin_core_of[i] = -1;
  for (int i = 0; pin_core_of && i < npu; i++) {
    hwloc_obj_t pu = hwloc_get_obj_by_type(pin_topo, HWLOC_OBJ_PU, (unsigned)i);
    hwloc_obj_t c = pu ? hwloc_get_ancestor_obj_by_type(pin_topo, HWLOC_OBJ_CORE, pu) : NULL;
    if (c) pin_core_of[pu->os_index] = (int)c->logical_index;
  }
  if (pin_cores < 2) { /* one core: nothing to spread over */
    hwloc_topology_destroy(pin_topo);
    pin_topo = NULL;
  }
}

/* The core (logical index) worker `index` (0-based) is bound to when the caller sits on core
 * `caller` (-1: unknown): the index-th core after the caller's, the caller's own last. */
static int worker_core(int32_t index, int caller) {
  const int others = caller < 0 ? pin_cores : pin_cores - 1;
  const int step = index % pin_cores < others ? index % pin_cores : others;
  return caller < 0 ? step : (caller + 1 + step) % pin_cores;
}

/* Binds the calling worker to the first processing unit of core `core_index` (one unit, so it
 * does not move between SMT siblings either). */
static void pin_self(int core_index) {
  if (!pin_topo) return;
  hwloc_obj_t core = hwloc_get_obj_by_type(pin_topo, HWLOC_OBJ_CORE, (unsigned)core_index);
  if (!core || !core->cpuset) return;
  hwloc_bitmap_t one = hwloc_bitmap_dup(core->cpuset);
  if (!one) return;
  hwloc_bitmap_singlify(one);
  (void)hwloc_set_cpubind(pin_topo, one, HWLOC_CPUBIND_THREAD); /* best effort: unbound on failure */
  hwloc_bitmap_free(one);
}

typedef struct worker_start {
  uint64_t gen;  /* the worker waits for the run after this generation */
  int32_t index; /* its place among the workers: its core */
} worker_start;

static void *worker_main(void *arg) {
  worker_start start;
  memcpy(&start, arg, sizeof start);
  free(arg);
  int my_core = pin_topo ? worker_core(start.index, pin_caller_core) : -1;
  pin_self(my_core);
  uint64_t seen = start.gen;
  for (;;) {
    uint64_t w = wait_for_run(seen);
    seen = generation_of(w);
    int32_t slot = try_join(w);
    if (!slot) continue;
    if (pin_core_of) {
      /* the caller on this worker's core: move to the next other one (see "pinning") */
      const int pu = atomic_load_explicit(&job_caller_pu, memory_order_relaxed);
      const int caller = pu >= 0 && pu < pin_max_pu ? pin_core_of[pu] : -1;
      if (caller >= 0 && caller == my_core) {
        my_core = worker_core(start.index, caller);
        pin_self(my_core);
      }
    }
    take_tasks(job_fn, job_ctx, job_tasks, slot);
    atomic_fetch_add(&job_done, 1);
    if (atomic_load(&caller_waiting)) {
      pthread_mutex_lock(&mu);
      pthread_cond_signal(&done_cv);
      pthread_mutex_unlock(&mu);
    }
  }
  return NULL;
}

void mx__kthreads_set(int32_t n) {
  if (n < 1) n = 1;
  if (n > MX_KTHREADS_MAX) n = MX_KTHREADS_MAX;
  atomic_store(&pool_size, n);
}

int32_t mx__kthreads(void) { return atomic_load(&pool_size); }

/* Starts workers up to n-1 of them; called with run_lock held. Returns the slots available. */
static int32_t ensure_workers(int32_t n) {
  if (workers < n - 1) pin_init();
  while (workers < n - 1) {
    worker_start *start = malloc(sizeof *start);
    if (!start) break;
    /* a new worker waits for the run after the current generation */
    start->gen = generation_of(atomic_load(&run_word));
    start->index = workers;
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    bool ok = pthread_create(&t, &attr, worker_main, start) == 0;
    pthread_attr_destroy(&attr);
    if (!ok) {
      free(start);
      break;
    }
    workers++;
  }
  return workers + 1 < n ? workers + 1 : n;
}

/* Closes the run so no worker joins it any more; returns how many joined. */
static int32_t close_run(void) {
  uint64_t w = atomic_load(&run_word);
  while (!atomic_compare_exchange_weak(&run_word, &w, w | CLOSED_BIT)) {
  }
  return (int32_t)(w & JOINED_MASK);
}

static void wait_for_workers(int32_t joined) {
  for (int i = 0; i < CALLER_SPIN_ROUNDS; i++) {
    if (atomic_load(&job_done) >= joined) return;
    CPU_RELAX();
  }
  pthread_mutex_lock(&mu);
  atomic_store(&caller_waiting, 1);
  while (atomic_load(&job_done) < joined) pthread_cond_wait(&done_cv, &mu);
  atomic_store(&caller_waiting, 0);
  pthread_mutex_unlock(&mu);
}

void mx__kparallel(int64_t n_tasks, int32_t max_slots, mx_ktask_fn fn, void *ctx) {
  int32_t slots = mx__kthreads();
  if (max_slots < slots) slots = max_slots;
  if ((int64_t)slots > n_tasks) slots = (int32_t)n_tasks;
  if (slots <= 1 || pthread_mutex_trylock(&run_lock) != 0) {
    for (int64_t t = 0; t < n_tasks; t++) fn(ctx, t, 0);
    return;
  }
  slots = ensure_workers(slots);
  if (pin_core_of) atomic_store_explicit(&job_caller_pu, sched_getcpu(), memory_order_relaxed);
  job_fn = fn;
  job_ctx = ctx;
  job_tasks = n_tasks;
  job_wide = n_tasks > (int64_t)0x7fffffff;
  atomic_store(&job_next, 0);
  atomic_store(&job_range, job_wide ? 0 : (uint64_t)n_tasks << 32);
  atomic_store(&job_done, 0);
  uint64_t gen = generation_of(atomic_load(&run_word)) + 1;
  atomic_store(&run_word, gen << GEN_SHIFT | (uint64_t)slots << WANTED_SHIFT);
  int32_t asleep = atomic_load(&sleepers);
  if (asleep > 0) {
    /* wake as many as the run wants beyond the spinning ones (spinners join by themselves) */
    int32_t wake = slots - 1 < asleep ? slots - 1 : asleep;
    pthread_mutex_lock(&mu);
    for (int32_t i = 0; i < wake; i++) pthread_cond_signal(&work_cv);
    pthread_mutex_unlock(&mu);
  }
  take_tasks(fn, ctx, n_tasks, 0);
  wait_for_workers(close_run());
  pthread_mutex_unlock(&run_lock);
}

int32_t mx__kthreads_for_work(int64_t work) {
  int32_t slots = mx__kthreads();
  int64_t fit = work / MIN_WORK_PER_SLOT;
  if (fit < (int64_t)slots) slots = fit < 1 ? 1 : (int32_t)fit;
  return slots;
}

void mx__kparallel_work(int64_t n_tasks, int32_t max_slots, int64_t work, mx_ktask_fn fn, void *ctx) {
  int32_t fit = mx__kthreads_for_work(work);
  mx__kparallel(n_tasks, fit < max_slots ? fit : max_slots, fn, ctx);
}
