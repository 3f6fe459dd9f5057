/* Private declarations shared by the linear-algebra and nn kernel files: the one-time OpenBLAS
 * set-up, the Einsum kernel definitions (linalg_einsum.c) that linalg.c lists in the group's
 * exported array, and the workspace layout helper. */
#ifndef MIXRT_KERNELS_LINALG_IMPL_H
#define MIXRT_KERNELS_LINALG_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kernel.h"

/* Makes every later BLAS call single-threaded (the device's streams provide the parallelism).
 * Cheap after the first call; safe from any thread. */
void mx__kblas_init(void);

/* Rounds a workspace byte count up so the next carved buffer stays 64-byte aligned. */
static inline size_t mx__kalign64(size_t n) { return (n + 63) & ~(size_t)63; }

extern const mx_kernel_def mx__kernel_einsum_float;
extern const mx_kernel_def mx__kernel_einsum_int;

#endif /* MIXRT_KERNELS_LINALG_IMPL_H */
