/* Intra-op threads of the CPU kernels: one process-wide pool that splits a large kernel (Conv,
 * float32 MatMul and Gemm: kernels/linalg_threads.c) into tasks. Its size is set once from the session option (mx_session_options.intra_op_threads,
 * `mixrt run --threads N`); at 1, the default, every task runs in the calling thread, so
 * single-thread figures stay comparable. OpenBLAS stays single-threaded (mx__kblas_init): each
 * task calls it from its own thread, and OpenBLAS's own threads would otherwise compete with
 * the pool's for the same cores. */
#ifndef MIXRT_KERNELS_THREADS_H
#define MIXRT_KERNELS_THREADS_H

#include <stdint.h>

/* A task of a parallel run: `task` in [0, n_tasks), `slot` in [0, slots) names the thread
 * running it (a kernel gives each slot its own part of the workspace). */
typedef void (*mx_ktask_fn)(void *ctx, int64_t task, int32_t slot);

/* Sets the pool size (1..MX_KTHREADS_MAX; 0 or 1: no worker threads). Workers start on the
 * first parallel run that needs them. Safe to call at any time. */
#define MX_KTHREADS_MAX 64
void mx__kthreads_set(int32_t n);
/* The pool size (>= 1). Kernels size their per-thread workspace by it. */
int32_t mx__kthreads(void);

/* Runs fn for every task, on at most max_slots threads (the caller's among them), and returns
 * when all are done. Tasks are taken from a shared range, slot 1 from its back (the last task
 * first), every other slot from its front, so on two threads each keeps about the same end of
 * every kernel's output run after run. A slot number names a thread within one run only
 * (workers get theirs in the order they join). When the pool is busy with another kernel (two
 * streams running kernels at once) or has one thread, the tasks run here. */
void mx__kparallel(int64_t n_tasks, int32_t max_slots, mx_ktask_fn fn, void *ctx);
/* mx__kparallel for a run of about `work` multiply-adds (or comparable element steps) in all:
 * it takes only as many threads as the work repays, and runs inline when a handoff would cost
 * more than it saves. Kernels that can estimate their work call this one. */
void mx__kparallel_work(int64_t n_tasks, int32_t max_slots, int64_t work, mx_ktask_fn fn, void *ctx);
/* The threads a run of `work` multiply-adds repays (1..mx__kthreads()): for kernels that plan
 * their split (band sizes, channel chunks) by thread count, so a run kept inline is also
 * planned as one. */
int32_t mx__kthreads_for_work(int64_t work);

#endif /* MIXRT_KERNELS_THREADS_H */
