/* mixrt's own packed float32 GEMM (kernels/gemm_f32.c) for the dense Conv paths: C = A x B with
 * A row-major (the weights, packed into row panels block by block as the product runs) and B
 * already packed by the caller into panels of MX_KGEMM_NR columns (an im2col band written
 * straight into that layout), read in place with a row stride (a 1x1 Conv's image), or gathered
 * straight from a Conv's image by offsets (mx__kgemm_f32_gather, AVX-512 only). An
 * epilogue (bias, residual, Relu/Clip) may be applied in the store, to the C tile still in
 * registers. Register-blocked AVX-512 (14x32) and AVX2 (6x16) FMA micro-kernels, picked at run
 * time; on CPUs with neither the caller keeps its sgemm path.
 *
 * Every output is one FMA chain over k = 0..K-1 starting from 0, whatever the ISA copy, the
 * blocking or the thread that computes it, so the two copies give the same bits and the result
 * does not depend on how a caller splits the work. */
#ifndef MIXRT_KERNELS_GEMM_F32_H
#define MIXRT_KERNELS_GEMM_F32_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Columns of one panel of packed B: panel p holds columns [p*NR, p*NR + NR) as K rows of NR
 * floats (k-major), the last panel zero-padded. */
#define MX_KGEMM_NR 32

/* Whether the own kernels run on this CPU (AVX-512F, or AVX2 with FMA). MIXRT_GEMM=blas in the
 * environment turns them off (the sgemm path, for comparisons); MIXRT_GEMM=avx2 keeps the AVX2
 * copy on an AVX-512 CPU. */
bool mx__kgemm_f32_available(void);

/* Picks the copy (tests and benchmarks): 1 none (the callers' sgemm), 2 AVX2, 3 AVX-512 (capped
 * at what the CPU has), 0 back to the automatic choice. Returns the copy now in use. Not while
 * a product runs. */
int mx__kgemm_f32_use(int level);

/* Rows of C a product of m x n computes at a time (the register tile, 14 AVX-512 or 6 AVX2, or
 * 32 when it runs transposed; 1 without a copy): callers splitting the rows of C among threads
 * cut at multiples of it. */
int64_t mx__kgemm_f32_row_granule(int64_t m, int64_t n);

/* Floats of packed B for a K x n matrix. */
static inline size_t mx__kgemm_f32_packed_b_floats(int64_t k, int64_t n) {
  return (size_t)k * (size_t)((n + MX_KGEMM_NR - 1) / MX_KGEMM_NR * MX_KGEMM_NR);
}

/* Writes row k (n floats at `row`) of a K x n matrix into its packed layout bp (zero-padding
 * the last panel's columns past n). */
void mx__kgemm_f32_pack_b_row(const float *row, int64_t n, int64_t k_total, int64_t k, float *bp);

/* Floats of scratch one running product of m rows needs (A blocks, and for a narrow n, B's
 * columns regrouped and a transposed C). */
size_t mx__kgemm_f32_a_floats(int64_t m);

/* Called once per finished tile of C (rows [row0, row0+rows) x columns [col0, col0+cols)),
 * while it is still in L1: the caller's epilogue (bias, residual, activation). */
typedef void (*mx_kgemm_tile_fn)(void *ctx, int64_t row0, int64_t rows, int64_t col0, int64_t cols);

/* C[m, n] (row stride ldc) = A[m, k] (row stride lda) x B (packed, k x n), then tile_fn (may be
 * NULL) on every tile. a_scratch holds mx__kgemm_f32_a_floats(m) floats. Only when
 * mx__kgemm_f32_available(). */
void mx__kgemm_f32_packed(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *bp,
                          float *c, int64_t ldc, float *a_scratch, mx_kgemm_tile_fn tile_fn, void *ctx);

/* An epilogue the product applies to C as it stores it: each output v of row i, column j
 * becomes (v + bias[i]) + z[i * ldz + j] with a residual (v + bias[i] without, no add for a 0
 * bias), then Relu (v > 0 ? v : 0), Clip (v < lo: lo, then v > hi: hi) or HardSwish
 * (v * t, t = v * (1/6) + 0.5 clamped to [0, 1] the Clip way). The AVX-512 copy
 * applies it to its whole tiles in registers before their one store (no pass over C after it),
 * the rest as soon as a tile is stored; the same bits either way, and those of the Conv
 * epilogue (kernels/conv_epilogue.h) for the same operations. */
enum { MX_KGEMM_ACT_NONE = 0, MX_KGEMM_ACT_RELU = 1, MX_KGEMM_ACT_CLIP = 2, MX_KGEMM_ACT_HARD_SWISH = 3 };
typedef struct mx_kgemm_f32_epilogue {
  const float *bias; /* per row of C, or NULL */
  const float *z;    /* a residual laid out as C with row stride ldz, or NULL */
  int64_t ldz;
  int32_t act; /* MX_KGEMM_ACT_* */
  float lo, hi; /* Clip's bounds */
} mx_kgemm_f32_epilogue;

/* A packed once for several products (a Conv's weights, used by every band of its image): its
 * rows in panels of mr (the row granule of the products that read it), k block by k block:
 * block pc (of KC = 256 k, the last shorter) starts at pc * mpad floats, panel t of it at
 * t * kc * mr. A product reads rows [row0, row0 + m) of it. */
typedef struct mx_kgemm_f32_pre_a {
  const float *ap;
  int64_t mr;   /* mx__kgemm_f32_row_granule(m, n) of the products */
  int64_t mpad; /* rows of the whole packed A: m rounded up to mr */
  int64_t row0; /* first row a product reads (a multiple of mr) */
} mx_kgemm_f32_pre_a;

/* Floats of a pre-packed m x k A in panels of mr rows. */
size_t mx__kgemm_f32_pre_a_floats(int64_t m, int64_t k, int64_t mr);
/* Packs rows [r0, r0 + rows) (r0 a multiple of mr, rows too unless they end at m) of the m x k
 * A (row stride lda) into ap, all k blocks; threads may pack disjoint row ranges at once. */
void mx__kgemm_f32_pre_a_pack(const float *a, int64_t lda, int64_t m, int64_t k, int64_t mr, int64_t r0,
                              int64_t rows, float *ap);
/* mx__kgemm_f32_packed reading A from pa (the same bits); when pa's rows are cut in panels of
 * another height than this product's (another n), it packs from a as usual. */
void mx__kgemm_f32_packed_pre(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                              const mx_kgemm_f32_pre_a *pa, const float *bp, float *c, int64_t ldc,
                              float *a_scratch, mx_kgemm_tile_fn tile_fn, void *ctx);

/* mx__kgemm_f32_packed_pre with B read in place: a row-major k x n matrix, its rows ldb floats
 * apart (a 1x1 Conv's image, no packing); only a last panel of fewer than 32 columns is copied
 * (per k block, into a_scratch). The same bits as the packed B. */
void mx__kgemm_f32_strided_pre(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                               const mx_kgemm_f32_pre_a *pa, const float *b, int64_t ldb, float *c, int64_t ldc,
                               float *a_scratch, mx_kgemm_tile_fn tile_fn, void *ctx);

/* C = A x B then the epilogue epi (may be NULL), A as mx__kgemm_f32_packed_pre reads it (pa may
 * be NULL); B read in place with rows ldb floats apart (as mx__kgemm_f32_strided_pre), or
 * packed (ldb <= 0, as mx__kgemm_f32_packed_pre). */
void mx__kgemm_f32_epi_pre(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const mx_kgemm_f32_pre_a *pa,
                           const float *b, int64_t ldb, float *c, int64_t ldc, float *a_scratch,
                           const mx_kgemm_f32_epilogue *epi);

/* B regrouped ahead for narrow products (n <= 64 columns, run transposed): the column groups
 * the transposed product reads, k block by k block, so several products over the same B (a 7x7
 * map's output-channel chunks) do not each regroup it. Floats it takes (either copy): */
size_t mx__kgemm_f32_narrow_b_floats(int64_t k, int64_t n);
/* Writes row k (n floats at `row`) of a K x n matrix into its regrouped layout bn; threads may
 * write disjoint rows at once. */
void mx__kgemm_f32_narrow_b_row(const float *row, int64_t n, int64_t k_total, int64_t k, float *bn);
/* C = A x B from the regrouped B (the transposed run, whatever m; n <= 64), then the epilogue
 * epi and tile_fn (either may be NULL); the same bits as the other forms of B. */
void mx__kgemm_f32_narrow_pre(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                              const mx_kgemm_f32_pre_a *pa, const float *bn, float *c, int64_t ldc,
                              float *a_scratch, const mx_kgemm_f32_epilogue *epi, mx_kgemm_tile_fn tile_fn,
                              void *ctx);

/* B read straight from an image instead of an im2col, for a Conv whose output rows are 7 or a
 * multiple of 14 wide: C's columns in groups of 14 (the last may hold 7), group g's first 7
 * positions at pos0 = group_off[2g], its last 7 at pos1 = group_off[2g + 1] (two rows of a 7-wide
 * map, or one row's 14 neighbours), so column 14g + i of k row kk is
 * x[koff[kk] + pos0 + i * stride] for i < 7 and x[koff[kk] + pos1 + (i - 7) * stride] after; x
 * holds the padding as zeros. */
typedef struct mx_kgemm_f32_gather {
  const float *x;
  const int32_t *koff;      /* per k row (a tap of a channel) */
  const int64_t *group_off; /* two per group of 14 columns */
  int32_t stride;           /* 1 or 2 */
} mx_kgemm_f32_gather;
/* Whether mx__kgemm_f32_gather runs (the AVX-512 copy in use). */
bool mx__kgemm_f32_gather_available(void);
/* C = A x B then the epilogue epi and tile_fn (either may be NULL), B as b describes it, n a
 * multiple of 7: run transposed (as a narrow product, 14 columns of C by 32 rows a tile) without
 * B's im2col or packing, the same bits as the other forms of B. A as mx__kgemm_f32_packed_pre reads
 * it (pa may be NULL); scratch as a_scratch there. */
void mx__kgemm_f32_gather(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                          const mx_kgemm_f32_pre_a *pa, const mx_kgemm_f32_gather *b, float *c, int64_t ldc,
                          float *scratch, const mx_kgemm_f32_epilogue *epi, mx_kgemm_tile_fn tile_fn,
                          void *ctx);

#endif /* MIXRT_KERNELS_GEMM_F32_H */
