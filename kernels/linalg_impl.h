/* Private declarations shared by the linear-algebra and nn kernel files: the one-time OpenBLAS
 * set-up, the Einsum kernel definitions (linalg_einsum.c) that linalg.c lists in the group's
 * exported array, and the workspace layout helper. */
#ifndef MIXRT_KERNELS_LINALG_IMPL_H
#define MIXRT_KERNELS_LINALG_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/kernel.h"
#include "kernels/threads.h"

/* Makes every later BLAS call single-threaded (the device's streams provide the parallelism).
 * Cheap after the first call; safe from any thread. */
void mx__kblas_init(void);

/* Rounds a workspace byte count up so the next carved buffer stays 64-byte aligned. */
static inline size_t mx__kalign64(size_t n) { return (n + 63) & ~(size_t)63; }

/* Called on each band of output rows right after it is computed (rows x n, row-major): the
 * fused epilogue of a MatMul. */
typedef void (*mx_ksgemm_rows_fn)(const void *ctx, float *c, int64_t rows, int64_t n);

/* C[m,n] = alpha op(A) op(B) + beta C (row-major, leading dims those of contiguous operands)
 * split across the intra-op threads (linalg_threads.c), rows_done (NULL: none) applied to each
 * band of rows. False, with nothing done, when the pool has one thread or the product is too
 * small to be worth splitting: the caller then makes the one sgemm call itself. */
bool mx__ksgemm_threads(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                        const float *b, float beta, float *c, mx_ksgemm_rows_fn rows_done,
                        const void *rows_ctx);

/* y[n] = alpha a[k] op(B) + beta y, op(B) = B [k, n] or, tb set, B^T of B [n, k]: one sgemv per
 * fixed block of outputs, the blocks split across the intra-op threads when the weights are
 * large enough (a classifier head streams megabytes of them). The same bits on any thread
 * count. */
void mx__ksgemv_split(int tb, int64_t n, int64_t k, float alpha, const float *a, const float *b, float beta,
                      float *y);

/* Runs fn over n_tasks independent tasks (the products of a batched MatMul) on the intra-op
 * threads when they hold `macs` multiply-adds in all, enough to be worth it; false, with nothing
 * run, otherwise. */
bool mx__kparallel_large(int64_t n_tasks, int64_t macs, mx_ktask_fn fn, void *ctx);

extern const mx_kernel_def mx__kernel_einsum_float;
extern const mx_kernel_def mx__kernel_einsum_int;

#endif /* MIXRT_KERNELS_LINALG_IMPL_H */
