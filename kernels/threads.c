/* The intra-op thread pool of the CPU kernels (kernels/threads.h): worker threads started on
 * demand that take the tasks of one parallel run at a time from a shared counter, the calling
 * thread taking its share as slot 0. */
#include "kernels/threads.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

static atomic_int pool_size = 1;

static pthread_mutex_t run_lock = PTHREAD_MUTEX_INITIALIZER; /* one parallel run at a time */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;       /* guards the job record below */
static pthread_cond_t work_cv = PTHREAD_COND_INITIALIZER;
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER;

static int32_t workers;      /* started worker threads (slots 1..workers) */
static uint64_t generation;  /* bumped for every run handed to the workers */
static int32_t job_slots;    /* slots taking part in the current run, the caller's included */
static int32_t job_finished; /* workers of the current run that ran out of tasks */
static mx_ktask_fn job_fn;
static void *job_ctx;
static int64_t job_tasks;
static atomic_llong job_next;
/* The generation each worker was started at: it takes the runs after it, even the one handed
 * out before the thread first got the lock. */
static uint64_t start_generation[MX_KTHREADS_MAX];

static void take_tasks(mx_ktask_fn fn, void *ctx, int64_t n, int32_t slot) {
  for (;;) {
    int64_t t = atomic_fetch_add(&job_next, 1);
    if (t >= n) return;
    fn(ctx, t, slot);
  }
}

static void *worker_main(void *arg) {
  int32_t slot = (int32_t)(intptr_t)arg;
  pthread_mutex_lock(&mu);
  uint64_t seen = start_generation[slot];
  for (;;) {
    while (generation == seen) pthread_cond_wait(&work_cv, &mu);
    seen = generation;
    if (slot >= job_slots) continue; /* this run asked for fewer threads */
    mx_ktask_fn fn = job_fn;
    void *ctx = job_ctx;
    int64_t n = job_tasks;
    pthread_mutex_unlock(&mu);
    take_tasks(fn, ctx, n, slot);
    pthread_mutex_lock(&mu);
    if (++job_finished == job_slots - 1) pthread_cond_signal(&done_cv);
  }
  return NULL;
}

void mx__kthreads_set(int32_t n) {
  if (n < 1) n = 1;
  if (n > MX_KTHREADS_MAX) n = MX_KTHREADS_MAX;
  atomic_store(&pool_size, n);
}

int32_t mx__kthreads(void) { return atomic_load(&pool_size); }

/* Starts workers up to slot n-1; called with run_lock held. Returns the slots available. */
static int32_t ensure_workers(int32_t n) {
  while (workers < n - 1) {
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_mutex_lock(&mu);
    start_generation[workers + 1] = generation;
    pthread_mutex_unlock(&mu);
    bool ok = pthread_create(&t, &attr, worker_main, (void *)(intptr_t)(workers + 1)) == 0;
    pthread_attr_destroy(&attr);
    if (!ok) break;
    pthread_mutex_lock(&mu);
    workers++;
    pthread_mutex_unlock(&mu);
  }
  return workers + 1 < n ? workers + 1 : n;
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
  pthread_mutex_lock(&mu);
  job_fn = fn;
  job_ctx = ctx;
  job_tasks = n_tasks;
  job_slots = slots;
  job_finished = 0;
  atomic_store(&job_next, 0);
  generation++;
  pthread_cond_broadcast(&work_cv);
  pthread_mutex_unlock(&mu);
  take_tasks(fn, ctx, n_tasks, 0);
  pthread_mutex_lock(&mu);
  while (job_finished < job_slots - 1) pthread_cond_wait(&done_cv, &mu);
  pthread_mutex_unlock(&mu);
  pthread_mutex_unlock(&run_lock);
}
