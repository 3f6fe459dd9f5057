/* The multi-thread executor: a pool of worker threads (pinned with hwloc) and the calling thread
 * run one execution graph together. Indegrees are atomic counters (concurrencykit ck_pr); a node
 * whose counter reaches zero goes into a lock-free MPMC ring (ck_ring) that every thread takes
 * work from. Kernels flagged MX_EXE_SERIAL run under one mutex.
 *
 * Between runs, workers spin for a short while (a next run usually follows at once) and then
 * park on a condition variable, so an idle session costs no CPU. */
#include <ck_pr.h>
#include <ck_ring.h>
#include <hwloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/error.h"
#include "v2runtime/exe_graph.h"

/* ThreadSanitizer does not see concurrencykit's inline-assembly atomics: annotate hand-offs. */
#if defined(__SANITIZE_THREAD__)
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define TSAN_ACQUIRE(p) __tsan_acquire((void *)(p))
#define TSAN_RELEASE(p) __tsan_release((void *)(p))
#else
#define TSAN_ACQUIRE(p) ((void)0)
#define TSAN_RELEASE(p) ((void)0)
#endif

#define SPIN_BEFORE_PARK_NS 200000u /* idle workers spin this long between runs before parking */

/* The ready queue. ck_ring's multi-consumer dequeue reads a slot before its compare-and-swap
 * claims it (and retries when another consumer won): correct, but ThreadSanitizer cannot see
 * concurrencykit's atomics and reports that read. TSan builds therefore use a locked ring with the
 * same interface, so the rest of the executor is checked as it is. */
typedef struct ready_queue {
#if defined(__SANITIZE_THREAD__)
  pthread_mutex_t lock;
  uint32_t head, tail; /* positions, wrapping at cap */
#else
  ck_ring_t ring;
#endif
  ck_ring_buffer_t *buf; /* storage (cap entries, a power of two) */
  uint32_t cap;
} ready_queue;

static void queue_reset(ready_queue *q) {
#if defined(__SANITIZE_THREAD__)
  pthread_mutex_lock(&q->lock);
  q->head = q->tail = 0;
  pthread_mutex_unlock(&q->lock);
#else
  ck_ring_init(&q->ring, q->cap);
#endif
}

static bool queue_push(ready_queue *q, uint32_t x) {
#if defined(__SANITIZE_THREAD__)
  pthread_mutex_lock(&q->lock);
  bool ok = q->tail - q->head < q->cap - 1;
  if (ok) q->buf[q->tail++ & (q->cap - 1)].value = (void *)(uintptr_t)x;
  pthread_mutex_unlock(&q->lock);
  return ok;
#else
  return ck_ring_enqueue_mpmc(&q->ring, q->buf, (void *)(uintptr_t)x);
#endif
}

static bool queue_pop(ready_queue *q, uint32_t *x) {
  void *item;
#if defined(__SANITIZE_THREAD__)
  pthread_mutex_lock(&q->lock);
  bool ok = q->head != q->tail;
  if (ok) item = q->buf[q->head++ & (q->cap - 1)].value;
  pthread_mutex_unlock(&q->lock);
  if (!ok) return false;
#else
  if (!ck_ring_dequeue_mpmc(&q->ring, q->buf, &item)) return false;
#endif
  *x = (uint32_t)(uintptr_t)item;
  return true;
}

typedef struct worker {
  struct mx_exe_pool *pool;
  pthread_t thread;
  uint32_t index;
} worker;

struct mx_exe_pool {
  worker *workers;
  uint32_t n_workers;
  hwloc_topology_t topo;
  bool have_topo;

  pthread_mutex_t lock;        /* guards generation/shutdown for parking */
  pthread_cond_t wake;         /* workers park here */
  _Atomic uint64_t generation; /* bumped when a run starts */
  _Atomic bool shutdown;
  _Atomic uint32_t active; /* workers inside the current run */

  pthread_mutex_t serial; /* MX_EXE_SERIAL kernels */

  /* The current run (written by the caller before bumping generation). */
  const mx_exe_graph *g;
  mx_exe_run *run;
  uint32_t *indeg;   /* working indegrees (cap_nodes) */
  ready_queue queue; /* ready nodes */
  uint32_t cap_nodes;
  _Atomic uint32_t remaining; /* nodes not yet finished */
  _Atomic bool failed;
  _Atomic uint32_t failed_node;
  mx_status fail_status; /* first failure (written under `serial`... see record_failure) */
  pthread_mutex_t fail_lock;
};

static void record_failure(mx_exe_pool *p, uint32_t node, mx_status st) {
  pthread_mutex_lock(&p->fail_lock);
  if (!atomic_load(&p->failed)) {
    p->fail_status = st;
    atomic_store(&p->failed_node, node);
    atomic_store(&p->failed, true);
  }
  pthread_mutex_unlock(&p->fail_lock);
}

/* Takes ready nodes and runs them until the graph is done or failed. */
static void participate(mx_exe_pool *p) {
  while (atomic_load_explicit(&p->remaining, memory_order_acquire) > 0 && !atomic_load(&p->failed)) {
    /* Read after `remaining`: the caller publishes g and run before it (see mx__exe_run_parallel). */
    const mx_exe_graph *g = p->g;
    mx_exe_run *run = p->run;
    uint32_t x;
    if (!queue_pop(&p->queue, &x)) {
      sched_yield();
      continue;
    }
    TSAN_ACQUIRE(&p->indeg[x]);
    const mx_exe_node *nd = &g->nodes[x];
    mx_status st;
    if (nd->flags & MX_EXE_SERIAL) {
      pthread_mutex_lock(&p->serial);
      st = mx__exe_call(run, nd, x);
      pthread_mutex_unlock(&p->serial);
    } else {
      st = mx__exe_call(run, nd, x);
    }
    if (st != MX_OK) {
      record_failure(p, x, st);
      return;
    }
    for (uint32_t e = g->succ_start[x]; e < g->succ_start[x + 1]; e++) {
      uint32_t s = g->succ[e];
      TSAN_RELEASE(&p->indeg[s]);
      bool zero;
      ck_pr_dec_32_zero(&p->indeg[s], &zero);
      if (zero) {
        TSAN_ACQUIRE(&p->indeg[s]);
        TSAN_RELEASE(&p->indeg[s]);
        while (!queue_push(&p->queue, s)) sched_yield();
      }
    }
    atomic_fetch_sub_explicit(&p->remaining, 1, memory_order_acq_rel);
  }
}

static void pin(mx_exe_pool *p, uint32_t index) {
  if (!p->have_topo) return;
  int cores = hwloc_get_nbobjs_by_type(p->topo, HWLOC_OBJ_CORE);
  if (cores <= 1) return;
  /* The caller usually runs on core 0: workers take the following cores. */
  hwloc_obj_t core =
      hwloc_get_obj_by_type(p->topo, HWLOC_OBJ_CORE, (unsigned)((index + 1) % (unsigned)cores));
  if (core && core->cpuset) hwloc_set_cpubind(p->topo, core->cpuset, HWLOC_CPUBIND_THREAD);
}

static void *worker_main(void *arg) {
  worker *w = arg;
  mx_exe_pool *p = w->pool;
  pin(p, w->index);
  uint64_t seen = 0;
  for (;;) {
    /* Wait for a new run: spin first, then park. */
    uint64_t t0 = mx__now_ns();
    while (atomic_load(&p->generation) == seen && !atomic_load(&p->shutdown) &&
           mx__now_ns() - t0 < SPIN_BEFORE_PARK_NS)
      sched_yield();
    pthread_mutex_lock(&p->lock);
    while (atomic_load(&p->generation) == seen && !atomic_load(&p->shutdown))
      pthread_cond_wait(&p->wake, &p->lock);
    pthread_mutex_unlock(&p->lock);
    if (atomic_load(&p->shutdown)) break;
    /* Count as active before looking at the run, so the caller of a run waits for us; if the run
     * already ended, participate() sees remaining == 0 and returns at once. */
    atomic_fetch_add(&p->active, 1);
    seen = atomic_load(&p->generation);
    participate(p);
    atomic_fetch_sub(&p->active, 1);
  }
  return NULL;
}

uint32_t mx__exe_pool_threads(const mx_exe_pool *p) { return p ? p->n_workers + 1 : 0; }

mx_status mx__exe_pool_create(uint32_t threads, mx_exe_pool **out, mx_error *err) {
  *out = NULL;
  mx_exe_pool *p = calloc(1, sizeof *p);
  if (!p) return mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory creating a worker pool");
  p->have_topo = hwloc_topology_init(&p->topo) == 0;
  if (p->have_topo && hwloc_topology_load(p->topo) != 0) {
    hwloc_topology_destroy(p->topo);
    p->have_topo = false;
  }
  if (threads == 0) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    threads = cores > 1 ? (uint32_t)cores : 2;
  }
  if (threads > 256) threads = 256;
  p->n_workers = threads - 1;
  pthread_mutex_init(&p->lock, NULL);
  pthread_cond_init(&p->wake, NULL);
  pthread_mutex_init(&p->serial, NULL);
  pthread_mutex_init(&p->fail_lock, NULL);
#if defined(__SANITIZE_THREAD__)
  pthread_mutex_init(&p->queue.lock, NULL);
#endif
  p->workers = calloc(p->n_workers ? p->n_workers : 1, sizeof *p->workers);
  if (!p->workers) goto oom;
  for (uint32_t i = 0; i < p->n_workers; i++) {
    p->workers[i].pool = p;
    p->workers[i].index = i;
    if (pthread_create(&p->workers[i].thread, NULL, worker_main, &p->workers[i]) != 0) {
      p->n_workers = i;
      mx__exe_pool_destroy(p);
      return mx__fail(err, MX_ERR_INTERNAL, "cannot start worker thread %u of the multi-thread executor", i);
    }
  }
  *out = p;
  return MX_OK;
oom:
  mx__exe_pool_destroy(p);
  return mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory creating a worker pool");
}

void mx__exe_pool_destroy(mx_exe_pool *p) {
  if (!p) return;
  pthread_mutex_lock(&p->lock);
  atomic_store(&p->shutdown, true);
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->lock);
  for (uint32_t i = 0; i < p->n_workers; i++) pthread_join(p->workers[i].thread, NULL);
  free(p->workers);
  free(p->indeg);
  free(p->queue.buf);
#if defined(__SANITIZE_THREAD__)
  pthread_mutex_destroy(&p->queue.lock);
#endif
  pthread_mutex_destroy(&p->lock);
  pthread_cond_destroy(&p->wake);
  pthread_mutex_destroy(&p->serial);
  pthread_mutex_destroy(&p->fail_lock);
  if (p->have_topo) hwloc_topology_destroy(p->topo);
  free(p);
}

mx_status mx__exe_run_parallel(mx_exe_pool *p, const mx_exe_graph *g, mx_exe_run *run) {
  const uint32_t n = g->n_nodes;
  if (n == 0) return MX_OK;
  if (n > p->cap_nodes) {
    uint32_t *d = realloc(p->indeg, n * sizeof *d);
    if (!d) return MX_ERR_OUT_OF_MEMORY;
    p->indeg = d;
    p->cap_nodes = n;
  }
  uint32_t cap = 2;
  while (cap <= n) cap *= 2; /* a ck_ring holds capacity - 1 entries */
  if (cap > p->queue.cap) {
    ck_ring_buffer_t *rb = realloc(p->queue.buf, cap * sizeof *rb);
    if (!rb) return MX_ERR_OUT_OF_MEMORY;
    p->queue.buf = rb;
    p->queue.cap = cap;
  }
  /* Workers of the previous run have all left participate() (the caller waited for them). */
  queue_reset(&p->queue);
  memcpy(p->indeg, g->indegree, n * sizeof *p->indeg);
  p->g = g;
  p->run = run;
  atomic_store(&p->failed, false);
  atomic_store(&p->remaining, n);
  for (uint32_t i = 0; i < n; i++) {
    if (g->indegree[i]) continue;
    TSAN_RELEASE(&p->indeg[i]);
    queue_push(&p->queue, i);
  }
  pthread_mutex_lock(&p->lock);
  atomic_fetch_add(&p->generation, 1);
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->lock);
  participate(p);
  /* Wait until no worker is still inside this run (they leave as soon as remaining is 0 or a
   * failure is recorded). A worker that has not yet entered sees remaining == 0 and leaves. */
  while (atomic_load(&p->active) != 0) sched_yield();
  if (atomic_load(&p->failed)) {
    run->failed_node = atomic_load(&p->failed_node);
    return p->fail_status;
  }
  return MX_OK;
}
