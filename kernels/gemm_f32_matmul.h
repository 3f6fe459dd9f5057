/* float32 MatMul and Gemm on mixrt's own packed GEMM (kernels/gemm_f32_matmul.c): when it pays,
 * the scratch it needs, and the batched product with a per-tile epilogue. */
#ifndef MIXRT_KERNELS_GEMM_F32_MATMUL_H
#define MIXRT_KERNELS_GEMM_F32_MATMUL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/kernel.h"

/* Whether an m x n x k product (A transposed: ta) runs on the own GEMM on this CPU. */
bool mx__kmm_own_pays(int64_t m, int64_t n, int64_t k, int ta);

/* Workspace bytes mx__kmm_own_run needs for products of m x n x k on the pool's threads
 * (b_shared as passed to it). */
size_t mx__kmm_own_workspace(int64_t m, int64_t n, int64_t k, bool b_shared);

/* Floats of one thread's scratch for an m x n x k product: the packed B, then the A blocks
 * (mx__kgemm_f32_a_floats(m) floats first, the packed B after them). */
size_t mx__kmm_own_scratch_floats(int64_t m, int64_t n, int64_t k);

/* Packs op(B) (k x n) into MX_KGEMM_NR-column panels: B row-major [k, n] with row stride ldb, or
 * (tb) B stored [n, k] with row stride ldb. */
void mx__kmm_pack_b(const float *b, int64_t ldb, int tb, int64_t k, int64_t n, float *bp);

/* A constant B of call (input 1, float32, k x n or with tb n x k) pre-packed beside the model:
 * the body of MatMul's and Gemm's prepack hooks (mx_kernel_def.prepack), the panels
 * mx__kmm_pack_b writes, behind a kernels/prepack.h header. */
size_t mx__kmm_prepack_b(const mx_kernel_call *call, int tb, int64_t k, int64_t n, void *dst,
                         mx_kernel_prepack_layout *layout);
/* Those panels when call->prepacked holds them for input 1's current data, else NULL. */
const float *mx__kmm_prepacked_b(const mx_kernel_call *call, int tb, int64_t k, int64_t n);

/* The epilogue of one finished tile: rows x cols outputs at c (row stride ldc), whose first one
 * is at row `row` (within its product) and column col0. */
typedef void (*mx_kmm_tile_fn)(const void *ctx, float *c, int64_t rows, int64_t ldc, int64_t row, int64_t col0,
                               int64_t cols);

/* Offsets (in matrices) of A and B for product idx of a batch. */
typedef void (*mx_kmm_offsets_fn)(const void *ctx, int64_t idx, int64_t *oa, int64_t *ob);

/* C[i] = A[oa(i)] x op(B[ob(i)]) for i < batch, each product m x n x k with A row-major [m, k], B
 * [k, n] (or [n, k] when tb) and C contiguous; offsets NULL: oa = ob = i; b_shared: every product
 * uses B itself (packed once: b_packed, when not NULL, holds it already packed,
 * mx__kmm_prepacked_b). Returns false (nothing done) when the workspace is too small. */
bool mx__kmm_own_run(int64_t batch, int64_t m, int64_t n, int64_t k, const float *a, const float *b, int tb,
                     mx_kmm_offsets_fn offsets, const void *offsets_ctx, bool b_shared, const float *b_packed,
                     float *c, void *workspace, size_t workspace_bytes, mx_kmm_tile_fn tile_fn,
                     const void *tile_ctx);

#endif /* MIXRT_KERNELS_GEMM_F32_MATMUL_H */
