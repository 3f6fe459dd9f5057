/* mixrt's packed float32 GEMM (see gemm_f32.h): GotoBLAS-style blocking around register-blocked
 * FMA micro-kernels.
 *
 * Loops, outermost first: k in blocks of KC; rows of A in blocks of MC, each packed into
 * MR-row panels (k-major, MR floats per k, zero rows past m) so the micro-kernel broadcasts its
 * A values from one stream; then every NR-column panel of B (a KC x NR slice, 32 KB at KC = 256,
 * stays in L1 while the MR tiles of the A block stream past it from L2).
 *
 * The micro-kernel keeps an MR x 32 tile of C in registers for a whole KC block: AVX-512 14 rows
 * x 2 zmm (28 accumulators), AVX2 6 rows x 2 ymm run on each 16-column half of the panel. Each
 * accumulator starts at 0 (or at the partial sum the previous k block stored, which is the same
 * float) and takes one FMA per k in order, so both copies round every output alike. Tiles that
 * overhang m or n: on AVX-512 a tile of just their rows (1..14) with masked loads and stores of
 * their columns, straight into C; on AVX2 computed whole into a scratch tile and their valid
 * part copied. B read in place (its rows ld apart) takes the place of a packed panel; on the
 * last k block an epilogue is applied to the AVX-512 copy's tiles in registers, to the AVX2
 * copy's once stored. */
#include "kernels/gemm_f32.h"

#include "kernels/conv_epilogue.h"
#include "kernels/kmath.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define NR MX_KGEMM_NR
#ifndef KC
#define KC 256
#endif
#define MR_AVX512 14
#define MR_AVX2 6
#define MC_AVX512 (MR_AVX512 * 12)
#define MC_AVX2 (MR_AVX2 * 24)
#define MC_MAX (MC_AVX512 > MC_AVX2 ? MC_AVX512 : MC_AVX2)
/* Narrow products (n <= NARROW_N, a 7x7 image) run transposed: rows of A in MC_NARROW blocks. */
#define NARROW_N 64
#define MC_NARROW (NR * 5)

/* One ISA copy: the rows of its tile and the tile kernel (C tile MR x NR at c, row stride ldc;
 * B's k rows ldb floats apart: NR in a packed panel, the image's row stride when B is read in
 * place; acc: add to the partial sums in C instead of starting from 0; e: the epilogue, its
 * pointers at the tile, applied to the registers before they are stored, or NULL; only the
 * AVX-512 copy's whole tile takes one; pf: see A_PREFETCH_FLOATS). */
typedef void (*tile_kernel)(int64_t kc, const float *ap, const float *bp, int64_t ldb, float *c, int64_t ldc,
                            bool acc, const mx_kgemm_f32_epilogue *e, int64_t pf);
/* Packs rows [r0, r0 + rows) x k [k0, k0 + kc) of A into mr-row panels (zero rows past m). */
typedef void (*a_packer)(const float *a, int64_t lda, int64_t m, int64_t r0, int64_t rows, int64_t k0,
                         int64_t kc, int64_t mr, float *ap);
static void pack_a(const float *a, int64_t lda, int64_t m, int64_t r0, int64_t rows, int64_t k0, int64_t kc,
                   int64_t mr, float *ap);
/* A tile of rows x cols (at most the copy's MR x NR) computed and stored as it is, epilogue
 * included (e: pointers at the tile, or NULL). */
typedef void (*edge_fn)(int64_t rows, int64_t cols, int64_t kc, const float *ap, const float *bp, int64_t ldb,
                        float *c, int64_t ldc, bool acc, const mx_kgemm_f32_epilogue *e, int64_t pf);
/* A narrow product's finished tile of C^T (rows x cols of C, element (i, j) at t[j * ldt + i])
 * written into C with the epilogue (e: pointers at the tile, or NULL). */
typedef void (*narrow_out_fn)(const float *t, int64_t ldt, int64_t rows, int64_t cols, float *c, int64_t ldc,
                              const mx_kgemm_f32_epilogue *e);
typedef struct isa_copy {
  bool epi_in_store; /* its tile applies an epilogue in its store */
  int64_t mr, mc;
  tile_kernel tile, half; /* NR columns; the first 16 (NULL: none, the whole tile runs) */
  a_packer pack;
  edge_fn edge; /* edge tiles (NULL: a whole tile into a scratch tile, its valid part copied) */
  narrow_out_fn narrow_out; /* a narrow product's tile into C (NULL: one float at a time) */
} isa_copy;

/* With pre-packed weights, a tile prefetches their row panel this many floats (16 KB, about
 * 290 k steps of a 14-row panel) ahead into L2. Past the first layers of a model they come from
 * memory (ResNet-50's 3x3 and Winograd layers hold 9.4 MB each, more than a step leaves in
 * cache), and a 16-column tile (a 14x14 map's Winograd products) uses each weight for only 16
 * outputs: the hardware prefetcher alone kept it waiting on them when both cores read memory.
 * Prefetches never fault, so those past the packed block's end are harmless. */
#define A_PREFETCH_FLOATS 4096

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* pf > 0: the weights are A's panel, fetched pf floats ahead; pf < 0: they are B's panel (a
 * narrow product's, 32 floats a k step), fetched -pf floats ahead; 0: none. */
#define PREFETCH_WEIGHTS(ap, bp, pf)                                     \
  do {                                                                   \
    if ((pf) > 0) {                                                      \
      _mm_prefetch((const char *)((ap) + (pf)), _MM_HINT_T1);            \
    } else if ((pf) < 0) {                                               \
      _mm_prefetch((const char *)((bp) - (pf)), _MM_HINT_T1);            \
      _mm_prefetch((const char *)((bp) - (pf) + 16), _MM_HINT_T1);       \
    }                                                                    \
  } while (0)

#define REP14(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13)
#define REP6(X) X(0) X(1) X(2) X(3) X(4) X(5)

/* Below lo: lo, then above hi: hi (NaN stays), the order of mx__kconv_clamp. */
__attribute__((target("avx512f,avx2,fma"), always_inline)) static inline __m512 clamp512(__m512 v, __m512 lo,
                                                                                           __m512 hi) {
  v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, lo, _CMP_LT_OQ), lo);
  return _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, hi, _CMP_GT_OQ), hi);
}

/* The epilogue on 16 outputs of row i of a tile, columns j.. (e's pointers at the tile), in
 * registers: the operations and order of epi_rows, so the same bits. The residual is read only
 * where mask is set (an edge tile's columns past n). */
__attribute__((target("avx512f,avx2,fma"), always_inline)) static inline __m512
epi512_masked(__m512 v, const mx_kgemm_f32_epilogue *e, int64_t i, int64_t j, __mmask16 mask) {
  const float bias = e->bias ? e->bias[i] : 0.0f;
  if (e->z)
    v = _mm512_add_ps(_mm512_add_ps(v, _mm512_set1_ps(bias)), _mm512_maskz_loadu_ps(mask, e->z + i * e->ldz + j));
  else if (bias != 0.0f)
    v = _mm512_add_ps(v, _mm512_set1_ps(bias));
  if (e->act == MX_KGEMM_ACT_RELU) {
    v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_GT_OQ), v);
  } else if (e->act == MX_KGEMM_ACT_CLIP) {
    v = clamp512(v, _mm512_set1_ps(e->lo), _mm512_set1_ps(e->hi));
  } else if (e->act == MX_KGEMM_ACT_HARD_SWISH) {
    const __m512 t = _mm512_add_ps(_mm512_mul_ps(v, _mm512_set1_ps(1.0f / 6.0f)), _mm512_set1_ps(0.5f));
    v = _mm512_mul_ps(v, clamp512(t, _mm512_setzero_ps(), _mm512_set1_ps(1.0f)));
  }
  return v;
}

/* epi512_masked over all 16 columns: a whole tile's. */
__attribute__((target("avx512f,avx2,fma"), always_inline)) static inline __m512
epi512(__m512 v, const mx_kgemm_f32_epilogue *e, int64_t i, int64_t j) {
  return epi512_masked(v, e, i, j, (__mmask16)0xffff);
}

/* The AVX-512 tile, 14 rows x (W = 2: 32, W = 1: 16) columns; the 16-wide one serves a last
 * panel with at most 16 valid columns (B's padding columns are skipped, not computed). */
#define TILE_AVX512(NAME, W)                                                                          \
  __attribute__((target("avx512f,avx2,fma"))) static void NAME(int64_t kc, const float *restrict ap,  \
                                                             const float *restrict bp, int64_t ldb, \
                                                             float *restrict c, int64_t ldc, bool acc,  \
                                                             const mx_kgemm_f32_epilogue *e,         \
                                                             int64_t pf) {                           \
    const bool wide = (W) > 1;                                                                        \
    REP14(DECL512)                                                                                    \
    if (acc) {                                                                                        \
      REP14(LOAD512)                                                                                  \
    } else {                                                                                          \
      REP14(ZERO512)                                                                                  \
    }                                                                                                 \
    for (int64_t k = 0; k < kc; k++) {                                                                \
      const __m512 b0 = _mm512_loadu_ps(bp), b1 = wide ? _mm512_loadu_ps(bp + 16) : b0;             \
      PREFETCH_WEIGHTS(ap, bp, pf);                                                                   \
      REP14(STEP512)                                                                                  \
      ap += MR_AVX512;                                                                                \
      bp += ldb;                                                                                      \
    }                                                                                                 \
    if (e) {                                                                                          \
      REP14(EPI512)                                                                                   \
    }                                                                                                 \
    REP14(STORE512)                                                                                   \
  }
#define DECL512(i) __m512 c##i##a, c##i##b = _mm512_setzero_ps();
#define LOAD512(i)                                                 \
  c##i##a = _mm512_loadu_ps(c + (i) * ldc);                        \
  if (wide) c##i##b = _mm512_loadu_ps(c + (i) * ldc + 16);
#define ZERO512(i) c##i##a = _mm512_setzero_ps();
#define STEP512(i)                                                 \
  {                                                                \
    const __m512 a = _mm512_set1_ps(ap[i]);                        \
    c##i##a = _mm512_fmadd_ps(a, b0, c##i##a);                     \
    if (wide) c##i##b = _mm512_fmadd_ps(a, b1, c##i##b);        \
  }
#define EPI512(i)                                                  \
  c##i##a = epi512(c##i##a, e, i, 0);                              \
  if (wide) c##i##b = epi512(c##i##b, e, i, 16);
#define STORE512(i)                                                \
  _mm512_storeu_ps(c + (i) * ldc, c##i##a);                        \
  if (wide) _mm512_storeu_ps(c + (i) * ldc + 16, c##i##b);

TILE_AVX512(tile_avx512, 2)
TILE_AVX512(tile_avx512_half, 1)

/* An edge tile: R rows (1..14) x W 16-column halves, only the columns in masks m0 (first half)
 * and m1 (second) read from and written to C (and the residual), so a tile that overhangs m or n
 * computes only its R rows, straight into C, with the epilogue in its store, instead of a whole
 * 14-row tile into a scratch tile copied out. B's rows are read whole (its panels are padded).
 * The same FMA chain per output as the whole tile. */
typedef void (*edge_kernel)(int64_t kc, const float *ap, const float *bp, int64_t ldb, float *c, int64_t ldc,
                            bool acc, const mx_kgemm_f32_epilogue *e, __mmask16 m0, __mmask16 m1, int64_t pf);

#define EDGE_AVX512(NAME, R, W)                                                                          \
  __attribute__((target("avx512f,avx2,fma"))) static void NAME(                                         \
      int64_t kc, const float *restrict ap, const float *restrict bp, int64_t ldb, float *restrict c,   \
      int64_t ldc, bool acc, const mx_kgemm_f32_epilogue *e, __mmask16 m0, __mmask16 m1, int64_t pf) { \
    enum { rows_ = (R) };                                                                                \
    const bool wide = (W) > 1;                                                                           \
    REP14(EDECL512)                                                                                      \
    if (acc) {                                                                                           \
      REP14(ELOAD512)                                                                                    \
    }                                                                                                    \
    for (int64_t k = 0; k < kc; k++) {                                                                   \
      const __m512 b0 = _mm512_loadu_ps(bp), b1 = wide ? _mm512_loadu_ps(bp + 16) : b0;                \
      PREFETCH_WEIGHTS(ap, bp, pf);                                                                      \
      REP14(ESTEP512)                                                                                    \
      ap += MR_AVX512;                                                                                   \
      bp += ldb;                                                                                         \
    }                                                                                                    \
    if (e) {                                                                                             \
      REP14(EEPI512)                                                                                     \
    }                                                                                                    \
    REP14(ESTORE512)                                                                                     \
  }
#define EDECL512(i) __m512 c##i##a = _mm512_setzero_ps(), c##i##b = _mm512_setzero_ps();
#define ELOAD512(i)                                                       \
  if ((i) < rows_) {                                                      \
    c##i##a = _mm512_maskz_loadu_ps(m0, c + (i) * ldc);                   \
    if (wide) c##i##b = _mm512_maskz_loadu_ps(m1, c + (i) * ldc + 16);    \
  }
#define ESTEP512(i)                                                       \
  if ((i) < rows_) {                                                      \
    const __m512 a = _mm512_set1_ps(ap[i]);                               \
    c##i##a = _mm512_fmadd_ps(a, b0, c##i##a);                            \
    if (wide) c##i##b = _mm512_fmadd_ps(a, b1, c##i##b);                  \
  }
#define EEPI512(i)                                                        \
  if ((i) < rows_) {                                                      \
    c##i##a = epi512_masked(c##i##a, e, i, 0, m0);                        \
    if (wide) c##i##b = epi512_masked(c##i##b, e, i, 16, m1);             \
  }
#define ESTORE512(i)                                                      \
  if ((i) < rows_) {                                                      \
    _mm512_mask_storeu_ps(c + (i) * ldc, m0, c##i##a);                    \
    if (wide) _mm512_mask_storeu_ps(c + (i) * ldc + 16, m1, c##i##b);     \
  }

#define EDGE_PAIR(R) EDGE_AVX512(edge512_##R##_1, R, 1) EDGE_AVX512(edge512_##R##_2, R, 2)
EDGE_PAIR(1)
EDGE_PAIR(2)
EDGE_PAIR(3)
EDGE_PAIR(4)
EDGE_PAIR(5)
EDGE_PAIR(6)
EDGE_PAIR(7)
EDGE_PAIR(8)
EDGE_PAIR(9)
EDGE_PAIR(10)
EDGE_PAIR(11)
EDGE_PAIR(12)
EDGE_PAIR(13)
EDGE_PAIR(14)

/* [rows - 1][halves - 1] */
static const edge_kernel edge_avx512[MR_AVX512][2] = {
    {edge512_1_1, edge512_1_2},   {edge512_2_1, edge512_2_2},   {edge512_3_1, edge512_3_2},
    {edge512_4_1, edge512_4_2},   {edge512_5_1, edge512_5_2},   {edge512_6_1, edge512_6_2},
    {edge512_7_1, edge512_7_2},   {edge512_8_1, edge512_8_2},   {edge512_9_1, edge512_9_2},
    {edge512_10_1, edge512_10_2}, {edge512_11_1, edge512_11_2}, {edge512_12_1, edge512_12_2},
    {edge512_13_1, edge512_13_2}, {edge512_14_1, edge512_14_2}};

/* A gathered product's tile of C^T read from the image itself (mx__kgemm_f32_gather): R rows
 * (14, or 7 for a last group of 7) of positions, two runs of 7 in the image, by one 32-column
 * weight panel. Position i's float of tap k is x[koff[k] + off0 + i * S] for i < 7,
 * x[koff[k] + off1 + (i - 7) * S] after: the broadcast that the regrouped B's row would hold,
 * so the same FMA chain per output as the tile over the regrouped B. */
typedef void (*gather_kernel)(int64_t kc, const float *x, const int32_t *koff, int64_t off0, int64_t off1,
                              const float *bp, float *c, int64_t ldc, bool acc, int64_t pf);

#define GATHER_AVX512(NAME, S, R)                                                                    \
  __attribute__((target("avx512f,avx2,fma"))) static void NAME(                                      \
      int64_t kc, const float *restrict x, const int32_t *restrict koff, int64_t off0, int64_t off1, \
      const float *restrict bp, float *restrict c, int64_t ldc, bool acc, int64_t pf) {              \
    enum { rows_ = (R), S_ = (S) };                                                                  \
    const bool wide = true;                                                                          \
    const __mmask16 m0 = 0xFFFF, m1 = 0xFFFF;                                                        \
    REP14(EDECL512)                                                                                  \
    if (acc) {                                                                                       \
      REP14(ELOAD512)                                                                                \
    }                                                                                                \
    for (int64_t k = 0; k < kc; k++) {                                                               \
      const float *p0 = x + koff[k] + off0, *p1 = x + koff[k] + off1;                                \
      const __m512 b0 = _mm512_loadu_ps(bp), b1 = _mm512_loadu_ps(bp + 16);                          \
      PREFETCH_WEIGHTS(bp, bp, pf);                                                                  \
      REP14(GSTEP512)                                                                                \
      bp += NR;                                                                                      \
    }                                                                                                \
    REP14(ESTORE512)                                                                                 \
  }
#define GSTEP512(i)                                                           \
  if ((i) < rows_) {                                                          \
    const __m512 a = _mm512_set1_ps((i) < 7 ? p0[(i)*S_] : p1[((i)-7) * S_]); \
    c##i##a = _mm512_fmadd_ps(a, b0, c##i##a);                                \
    c##i##b = _mm512_fmadd_ps(a, b1, c##i##b);                                \
  }

GATHER_AVX512(gather512_s1_14, 1, 14)
GATHER_AVX512(gather512_s1_7, 1, 7)
GATHER_AVX512(gather512_s2_14, 2, 14)
GATHER_AVX512(gather512_s2_7, 2, 7)

/* Group g's tile (cols: 14, or 7 for a last group of 7) over k block pc of a gathered B. */
static void gather_tile(const mx_kgemm_f32_gather *b, int64_t g, int64_t cols, int64_t kc, int64_t pc,
                        const float *bp, float *c, int64_t ldc, bool acc, int64_t pf) {
  const bool s2 = b->stride == 2, whole = cols == MR_AVX512;
  const gather_kernel kern =
      whole ? (s2 ? gather512_s2_14 : gather512_s1_14) : (s2 ? gather512_s2_7 : gather512_s1_7);
  kern(kc, b->x, b->koff + pc, b->group_off[2 * g], b->group_off[2 * g + 1], bp, c, ldc, acc, pf);
}

/* The edge tile of rows x cols (cols <= NR) at c. */
__attribute__((target("avx512f,avx2,fma"))) static void edge_tile_avx512(int64_t rows, int64_t cols, int64_t kc,
                                                                         const float *ap, const float *bp,
                                                                         int64_t ldb, float *c, int64_t ldc,
                                                                         bool acc, const mx_kgemm_f32_epilogue *e,
                                                                         int64_t pf) {
  const __mmask16 m0 = cols >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << cols) - 1u);
  const __mmask16 m1 = cols >= NR ? (__mmask16)0xFFFF : cols > 16 ? (__mmask16)((1u << (cols - 16)) - 1u) : 0;
  edge_avx512[rows - 1][cols > 16](kc, ap, bp, ldb, c, ldc, acc, e, m0, m1, pf);
}

/* One 16-column half of a panel (bp already offset to it; B rows stay ldb apart). */
__attribute__((target("avx2,fma"))) static inline void half_avx2(int64_t kc, const float *restrict ap,
                                                                 const float *restrict bp, int64_t ldb,
                                                                 float *restrict c, int64_t ldc, bool acc,
                                                                 const mx_kgemm_f32_epilogue *e, int64_t pf) {
  (void)e;  /* never given one (epi_in_store false) */
  (void)pf; /* the AVX2 copy leaves the weights to the hardware prefetcher */
#define DECL(i) __m256 c##i##a, c##i##b;
  REP6(DECL)
#undef DECL
  if (acc) {
#define LOAD(i)                                   \
  c##i##a = _mm256_loadu_ps(c + (i) * ldc);       \
  c##i##b = _mm256_loadu_ps(c + (i) * ldc + 8);
    REP6(LOAD)
#undef LOAD
  } else {
#define ZERO(i)                    \
  c##i##a = _mm256_setzero_ps();   \
  c##i##b = _mm256_setzero_ps();
    REP6(ZERO)
#undef ZERO
  }
  for (int64_t k = 0; k < kc; k++) {
    const __m256 b0 = _mm256_loadu_ps(bp), b1 = _mm256_loadu_ps(bp + 8);
#define STEP(i)                                   \
  {                                               \
    const __m256 a = _mm256_broadcast_ss(ap + (i)); \
    c##i##a = _mm256_fmadd_ps(a, b0, c##i##a);    \
    c##i##b = _mm256_fmadd_ps(a, b1, c##i##b);    \
  }
    REP6(STEP)
#undef STEP
    ap += MR_AVX2;
    bp += ldb;
  }
#define STORE(i)                                 \
  _mm256_storeu_ps(c + (i) * ldc, c##i##a);      \
  _mm256_storeu_ps(c + (i) * ldc + 8, c##i##b);
  REP6(STORE)
#undef STORE
}

__attribute__((target("avx2,fma"))) static void tile_avx2(int64_t kc, const float *restrict ap,
                                                          const float *restrict bp, int64_t ldb,
                                                          float *restrict c, int64_t ldc, bool acc,
                                                          const mx_kgemm_f32_epilogue *e, int64_t pf) {
  half_avx2(kc, ap, bp, ldb, c, ldc, acc, e, pf);
  half_avx2(kc, ap, bp + 16, ldb, c + 16, ldc, acc, e, pf);
}

/* out[j][i] = r[i][j]: a 16x16 block transposed in registers. */
__attribute__((target("avx512f,avx2,fma"), always_inline)) static inline void transpose16_avx512(const __m512 *r,
                                                                                                 __m512 *out) {
  __m512 u[16], v[16];
  for (int j = 0; j < 8; j++) {
    u[2 * j] = _mm512_unpacklo_ps(r[2 * j], r[2 * j + 1]);
    u[2 * j + 1] = _mm512_unpackhi_ps(r[2 * j], r[2 * j + 1]);
  }
  for (int j = 0; j < 4; j++) {
    __m512d p0 = _mm512_castps_pd(u[4 * j]), p1 = _mm512_castps_pd(u[4 * j + 1]);
    __m512d p2 = _mm512_castps_pd(u[4 * j + 2]), p3 = _mm512_castps_pd(u[4 * j + 3]);
    v[4 * j + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(p0, p2));
    v[4 * j + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(p0, p2));
    v[4 * j + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(p1, p3));
    v[4 * j + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(p1, p3));
  }
  /* v[4j + e], 128-bit lane L: rows 4j..4j+3 at column 4L + e */
  for (int e = 0; e < 4; e++) {
    __m512 c0 = _mm512_shuffle_f32x4(v[e], v[4 + e], 0x44), c1 = _mm512_shuffle_f32x4(v[8 + e], v[12 + e], 0x44);
    __m512 c2 = _mm512_shuffle_f32x4(v[e], v[4 + e], 0xEE), c3 = _mm512_shuffle_f32x4(v[8 + e], v[12 + e], 0xEE);
    out[e] = _mm512_shuffle_f32x4(c0, c1, 0x88);
    out[e + 4] = _mm512_shuffle_f32x4(c0, c1, 0xDD);
    out[e + 8] = _mm512_shuffle_f32x4(c2, c3, 0x88);
    out[e + 12] = _mm512_shuffle_f32x4(c2, c3, 0xDD);
  }
}

/* narrow_out_fn: 16 rows of C at a time, their (at most 16) columns loaded as vectors along the
 * rows, transposed in registers, then each row through the epilogue of whole tiles and one
 * masked store: the same operations per output as the copy followed by epi_rows. */
__attribute__((target("avx512f,avx2,fma"))) static void narrow_out_avx512(const float *t, int64_t ldt, int64_t rows,
                                                                          int64_t cols, float *c, int64_t ldc,
                                                                          const mx_kgemm_f32_epilogue *e) {
  const __mmask16 col_mask = (__mmask16)((1u << cols) - 1u);
  for (int64_t i0 = 0; i0 < rows; i0 += 16) {
    const int64_t n = rows - i0 < 16 ? rows - i0 : 16;
    const __mmask16 row_mask = (__mmask16)((1u << n) - 1u);
    __m512 r[16], o[16];
    for (int j = 0; j < 16; j++)
      r[j] = j < cols ? _mm512_maskz_loadu_ps(row_mask, t + j * ldt + i0) : _mm512_setzero_ps();
    transpose16_avx512(r, o);
    for (int64_t i = 0; i < n; i++) {
      const __m512 v = e ? epi512_masked(o[i], e, i0 + i, 0, col_mask) : o[i];
      _mm512_mask_storeu_ps(c + (i0 + i) * ldc, col_mask, v);
    }
  }
}

/* pack_a with 16x16 transposes in registers (the weights are re-packed on every product, and
 * a narrow one, 49 columns, reuses each weight only 49 times: copied one float at a time the
 * packing took longer than the FMAs). mr <= 32. */
__attribute__((target("avx512f,avx2,fma"))) static void pack_a_avx512(const float *a, int64_t lda, int64_t m,
                                                                      int64_t r0, int64_t rows, int64_t k0,
                                                                      int64_t kc, int64_t mr, float *ap) {
  const int64_t kv = kc / 16 * 16;
  for (int64_t t = 0; t < rows; t += mr, ap += kc * mr) {
    for (int64_t i0 = 0; i0 < mr; i0 += 16) {
      const int64_t lanes = mr - i0 < 16 ? mr - i0 : 16;
      const __mmask16 keep = (__mmask16)((1u << lanes) - 1u);
      for (int64_t k = 0; k < kv; k += 16) {
        __m512 r[16], o[16];
        for (int i = 0; i < 16; i++) {
          int64_t row = r0 + t + i0 + i;
          r[i] = i < lanes && row < m ? _mm512_loadu_ps(a + row * lda + k0 + k) : _mm512_setzero_ps();
        }
        transpose16_avx512(r, o);
        for (int kk = 0; kk < 16; kk++) _mm512_mask_storeu_ps(ap + (k + kk) * mr + i0, keep, o[kk]);
      }
    }
    if (kv < kc) pack_a(a, lda, m, r0 + t, mr, k0 + kv, kc - kv, mr, ap + kv * mr);
  }
}

static const isa_copy copy_avx512 = {true,          MR_AVX512,     MC_AVX512,       tile_avx512,
                                     tile_avx512_half, pack_a_avx512, edge_tile_avx512, narrow_out_avx512};
static const isa_copy copy_avx2 = {false, MR_AVX2, MC_AVX2, tile_avx2, half_avx2, pack_a, NULL, NULL};

/* 0: not decided yet, 1: none, 2: AVX2, 3: AVX-512. */
static _Atomic int isa_choice;

static const isa_copy *pick_copy(void) {
  int v = atomic_load_explicit(&isa_choice, memory_order_relaxed);
  if (!v) {
    const char *env = getenv("MIXRT_GEMM");
    if (env && strcmp(env, "blas") == 0)
      v = 1;
    else if (env && strcmp(env, "avx2") == 0 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
      v = 2;
    else if (__builtin_cpu_supports("avx512f"))
      v = 3;
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
      v = 2;
    else
      v = 1;
    atomic_store_explicit(&isa_choice, v, memory_order_relaxed);
  }
  return v == 3 ? &copy_avx512 : v == 2 ? &copy_avx2 : NULL;
}
#else
static const isa_copy *pick_copy(void) { return NULL; }
/* never called: no copy runs a product here */
static void gather_tile(const mx_kgemm_f32_gather *b, int64_t g, int64_t cols, int64_t kc, int64_t pc,
                        const float *bp, float *c, int64_t ldc, bool acc, int64_t pf) {
  (void)b, (void)g, (void)cols, (void)kc, (void)pc, (void)bp, (void)c, (void)ldc, (void)acc, (void)pf;
}
#endif

bool mx__kgemm_f32_available(void) { return pick_copy() != NULL; }

int mx__kgemm_f32_use(int level) {
#if defined(__x86_64__) && defined(__GNUC__)
  int have = __builtin_cpu_supports("avx512f") ? 3 : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 2 : 1;
  if (level == 0) {
    atomic_store_explicit(&isa_choice, 0, memory_order_relaxed);
  } else {
    if (level > have) level = have;
    atomic_store_explicit(&isa_choice, level, memory_order_relaxed);
  }
  pick_copy();
  return atomic_load_explicit(&isa_choice, memory_order_relaxed);
#else
  (void)level;
  return 1;
#endif
}


size_t mx__kgemm_f32_a_floats(int64_t m) {
  /* A blocks; a narrow product's B groups and its transposed C */
  size_t mpad = (size_t)((m + NR - 1) / NR * NR);
  return (size_t)MC_MAX * KC + (size_t)KC * (NARROW_N + MR_AVX512) + mpad * (NARROW_N + MR_AVX512);
}

void mx__kgemm_f32_pack_b_row(const float *row, int64_t n, int64_t k_total, int64_t k, float *bp) {
  float *dst = bp + k * NR;
  const size_t panel = (size_t)k_total * NR;
  int64_t j = 0;
  for (; j + NR <= n; j += NR, dst += panel) memcpy(dst, row + j, NR * sizeof(float));
  if (j < n) {
    memcpy(dst, row + j, (size_t)(n - j) * sizeof(float));
    memset(dst + (n - j), 0, (size_t)(NR - (n - j)) * sizeof(float));
  }
}

/* Rows [r0, r0 + rows) x k [k0, k0 + kc) of A into MR-row panels (zero rows past m), one
 * float at a time. */
static void pack_a(const float *a, int64_t lda, int64_t m, int64_t r0, int64_t rows, int64_t k0, int64_t kc,
                   int64_t mr, float *ap) {
  for (int64_t t = 0; t < rows; t += mr, ap += kc * mr)
    for (int64_t i = 0; i < mr; i++) {
      int64_t r = r0 + t + i;
      if (r >= m) {
        for (int64_t k = 0; k < kc; k++) ap[k * mr + i] = 0.0f;
        continue;
      }
      const float *src = a + r * lda + k0;
      for (int64_t k = 0; k < kc; k++) ap[k * mr + i] = src[k];
    }
}

/* Share of a tile grid's work that is real: n columns in panels of NR (a last one of at most 16
 * in the half kernel) and m rows in tiles of mr, against the transposed grid. */
static bool narrow_pays(const isa_copy *isa, int64_t m, int64_t n) {
  if (n > NARROW_N || n % NR == 0) return false;
  const int64_t tail = n % NR, cols = n - tail + (tail <= 16 && isa->half ? 16 : NR);
  const int64_t mr = isa->mr;
  /* with edge tiles, the mr side of either grid wastes nothing */
  const int64_t mrows = isa->edge ? m : (m + mr - 1) / mr * mr, ncols = isa->edge ? n : (n + mr - 1) / mr * mr;
  double usual = (double)n / (double)cols * (double)m / (double)mrows;
  double narrow = (double)n / (double)ncols * (double)m / (double)((m + NR - 1) / NR * NR);
  return narrow > usual;
}

/* The panels of k block pc (kc deep) of a pre-packed A from the product's row ic on. */
static const float *pre_a_block(const mx_kgemm_f32_pre_a *pa, int64_t pc, int64_t ic, int64_t kc) {
  return pa->ap + pc * pa->mpad + (pa->row0 + ic) / pa->mr * kc * pa->mr;
}

/* The epilogue on rows x cols outputs of C at c (row stride ldc), e's pointers at them: v =
 * (c + bias) + z with a residual, c + bias without (no add for a 0 bias, so -0 stays -0), then
 * Relu (v > 0 ? v : 0) or Clip (below lo: lo, then above hi: hi; NaN stays), as the Conv
 * epilogue (kernels/conv_epilogue.h) computes them. */
MX_KHOT static void epi_rows(float *c, int64_t ldc, int64_t rows, int64_t cols, const mx_kgemm_f32_epilogue *e) {
  /* the Conv epilogue's own loop (vectorized in each clone), in place: the bias is added only
   * when it is not 0, or with a residual */
  const int32_t act = e->act == MX_KGEMM_ACT_RELU         ? MX_CONV_ACT_RELU
                      : e->act == MX_KGEMM_ACT_CLIP       ? MX_CONV_ACT_CLIP
                      : e->act == MX_KGEMM_ACT_HARD_SWISH ? MX_CONV_ACT_HARD_SWISH
                                                          : MX_CONV_ACT_NONE;
  for (int64_t i = 0; i < rows; i++)
    mx__kconv_epilogue_body(c + i * ldc, c + i * ldc, e->z ? e->z + i * e->ldz : NULL, e->bias ? e->bias[i] : 0.0f,
                            cols, act, e->lo, e->hi);
}

/* e with its pointers moved to the tile at (row0, col0). */
static mx_kgemm_f32_epilogue epi_at(const mx_kgemm_f32_epilogue *e, int64_t row0, int64_t col0) {
  mx_kgemm_f32_epilogue t = *e;
  if (t.bias) t.bias += row0;
  if (t.z) t.z += row0 * t.ldz + col0;
  return t;
}

/* Where a product reads B: packed panels (ld unused), or a row-major K x n matrix read in
 * place, its k rows ld floats apart (a 1x1 Conv's image). */
typedef struct b_source {
  const float *p;
  int64_t ld;
  bool packed;
  bool regrouped; /* already in a narrow product's column groups (mx__kgemm_f32_narrow_b_row) */
  const mx_kgemm_f32_gather *gather; /* or gathered from an image (the AVX-512 copy only) */
} b_source;

/* Row kk of k block pc of B (n columns, a packed B holding k rows in all) into row, zeros from
 * column n to `width`; returns row. Whole rows and panels by memcpy: regrouped one float at a
 * time, a 7x7 product's B took a fifth of its layer. */
static const float *b_row(const b_source *b, int64_t n, int64_t k, int64_t kabs, int64_t width, float *row) {
  if (b->packed) {
    const int64_t panels = (n + NR - 1) / NR;
    for (int64_t p = 0; p < panels; p++) memcpy(row + p * NR, b->p + (p * k + kabs) * NR, NR * sizeof(float));
  } else {
    memcpy(row, b->p + kabs * b->ld, (size_t)n * sizeof(float));
  }
  for (int64_t j = n; j < width; j++) row[j] = 0.0f;
  return row;
}

/* The product with the roles swapped (C^T = B^T A^T): A in NR-row panels takes the place of a
 * B panel, B's columns in groups of mr that of an A panel, so a narrow n wastes at most mr - 1
 * columns instead of up to NR - 1. The micro-kernel is the same and every output still gets its
 * one FMA chain in k order, so the bits do not depend on which way a product runs. The tiles come
 * out transposed: they stay in a transposed C in the scratch through the k blocks, and each
 * goes into C (then through tile_fn) once, after the last. */
static void packed_narrow(const isa_copy *isa, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                          const mx_kgemm_f32_pre_a *pa, const b_source *b, float *c, int64_t ldc, float *scratch,
                          const mx_kgemm_f32_epilogue *epi, mx_kgemm_tile_fn tile_fn, void *ctx) {
  const int64_t mr = isa->mr, groups = (n + mr - 1) / mr;
  float *ablk = scratch, *bt = scratch + (size_t)MC_MAX * KC;
  float *ct_all = bt + (size_t)KC * (NARROW_N + MR_AVX512); /* C^T: a band's columns of mpad */
  const int64_t mpad = (m + NR - 1) / NR * NR;
  /* the groups whose transposed C the scratch holds at once: all of a narrow n, bands of them for
   * a gathered B of any width */
  const int64_t band = (NARROW_N + MR_AVX512) / mr;
  /* a row of B: its panels (n <= NARROW_N), then the zero columns of the last group */
  float row[NARROW_N + MR_AVX512 + NR];
  for (int64_t g0 = 0; g0 < groups; g0 += band) {
    const int64_t g1 = g0 + band < groups ? g0 + band : groups;
    for (int64_t pc = 0; pc < k; pc += KC) {
      const int64_t kc = k - pc < KC ? k - pc : KC;
      const bool acc = pc > 0, last = pc + kc >= k;
      /* B regrouped by the caller (once for several products) is read as it is */
      const float *btk = b->regrouped ? b->p + pc * groups * mr : bt;
      for (int64_t kk = 0; kk < kc && !b->regrouped && !b->gather; kk++) {
        const float *src = b_row(b, n, k, pc + kk, groups * mr, row);
        for (int64_t g = 0; g < groups; g++)
          memcpy(bt + (g * kc + kk) * mr, src + g * mr, (size_t)mr * sizeof(float));
      }
      for (int64_t ic = 0; ic < m; ic += MC_NARROW) {
        const int64_t mc = m - ic < MC_NARROW ? m - ic : MC_NARROW, panels = (mc + NR - 1) / NR;
        const float *apan = pa ? pre_a_block(pa, pc, ic, kc) : ablk;
        if (!pa) isa->pack(a, lda, m, ic, mc, pc, kc, NR, ablk);
        for (int64_t g = g0; g < g1; g++) {
          const int64_t col0 = g * mr, cols = n - col0 < mr ? n - col0 : mr;
          for (int64_t t = 0; t < panels; t++) {
            const int64_t row0 = ic + t * NR, rows = m - row0 < NR ? m - row0 : NR;
            float *tile = ct_all + (col0 - g0 * mr) * mpad + row0;
            const float *wpan = apan + t * kc * NR;
            /* pre-packed weights (here B's panels) come from memory on a band's first group's pass */
            const int64_t pf = pa && g == g0 ? -A_PREFETCH_FLOATS : 0;
            if (b->gather)
              gather_tile(b->gather, g, cols, kc, pc, wpan, tile, mpad, acc, pf);
            else if (cols < mr && isa->edge) /* a last group of fewer columns: only those rows of C^T */
              isa->edge(cols, NR, kc, btk + g * kc * mr, wpan, NR, tile, mpad, acc, NULL, pf);
            else
              isa->tile(kc, btk + g * kc * mr, wpan, NR, tile, mpad, acc, NULL, pf);
            if (!last) continue;
            float *ct = c + row0 * ldc + col0;
            const mx_kgemm_f32_epilogue te = epi ? epi_at(epi, row0, col0) : (mx_kgemm_f32_epilogue){0};
            if (isa->narrow_out) {
              isa->narrow_out(tile, mpad, rows, cols, ct, ldc, epi ? &te : NULL);
            } else {
              for (int64_t i = 0; i < rows; i++)
                for (int64_t jj = 0; jj < cols; jj++) ct[i * ldc + jj] = tile[jj * mpad + i];
              if (epi) epi_rows(ct, ldc, rows, cols, &te);
            }
            if (tile_fn) tile_fn(ctx, row0, rows, col0, cols);
          }
        }
      }
    }
  }
}

bool mx__kgemm_f32_gather_available(void) {
#if defined(__x86_64__) && defined(__GNUC__)
  return pick_copy() == &copy_avx512;
#else
  return false;
#endif
}

void mx__kgemm_f32_gather(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                          const mx_kgemm_f32_pre_a *pa, const mx_kgemm_f32_gather *b, float *c, int64_t ldc,
                          float *scratch, const mx_kgemm_f32_epilogue *epi, mx_kgemm_tile_fn tile_fn,
                          void *ctx) {
  const isa_copy *isa = pick_copy();
  if (!mx__kgemm_f32_gather_available() || m <= 0 || n <= 0 || n % 7 || k <= 0) return;
  if (pa && (pa->mr != NR || pa->row0 % NR || pa->row0 + m > pa->mpad)) pa = NULL;
  const b_source src = {NULL, 0, false, false, b};
  packed_narrow(isa, m, n, k, a, lda, pa, &src, c, ldc, scratch, epi, tile_fn, ctx);
}

int64_t mx__kgemm_f32_row_granule(int64_t m, int64_t n) {
  const isa_copy *isa = pick_copy();
  return !isa ? 1 : narrow_pays(isa, m, n) ? NR : isa->mr;
}

size_t mx__kgemm_f32_pre_a_floats(int64_t m, int64_t k, int64_t mr) {
  return (size_t)((m + mr - 1) / mr * mr) * (size_t)k;
}

void mx__kgemm_f32_pre_a_pack(const float *a, int64_t lda, int64_t m, int64_t k, int64_t mr, int64_t r0,
                              int64_t rows, float *ap) {
  const isa_copy *isa = pick_copy();
  if (!isa || rows <= 0) return;
  const int64_t mpad = (m + mr - 1) / mr * mr;
  for (int64_t pc = 0; pc < k; pc += KC) {
    const int64_t kc = k - pc < KC ? k - pc : KC;
    isa->pack(a, lda, m, r0, rows, pc, kc, mr, ap + pc * mpad + r0 / mr * kc * mr);
  }
}

static void packed_impl(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const mx_kgemm_f32_pre_a *pa,
                        const b_source *b, float *c, int64_t ldc, float *a_scratch,
                        const mx_kgemm_f32_epilogue *epi, mx_kgemm_tile_fn tile_fn, void *ctx) {
  const isa_copy *isa = pick_copy();
  if (!isa || m <= 0 || n <= 0) return;
  if (k <= 0) {
    for (int64_t r = 0; r < m; r++) memset(c + r * ldc, 0, (size_t)n * sizeof(float));
    if (epi) epi_rows(c, ldc, m, n, epi);
    if (tile_fn) tile_fn(ctx, 0, m, 0, n);
    return;
  }
  bool narrow = narrow_pays(isa, m, n);
  /* Weights pre-packed for the other way round (packed for a Conv's first band, read by a last
   * band of a few columns: 4 of a 14x14 map's 196) run that way, the same bits, rather than
   * packing all of them again for those few columns. */
  if (pa && pa->mr == isa->mr) narrow = false;
  if (pa && pa->mr == NR && n <= NARROW_N) narrow = true;
  if (b->regrouped) narrow = true; /* the caller's regrouped B serves only the transposed run */
  const int64_t granule = narrow ? NR : isa->mr;
  /* pre-packed weights serve only a product that cuts its rows the same way */
  if (pa && (pa->mr != granule || pa->row0 % granule || pa->row0 + m > pa->mpad)) pa = NULL;
  if (narrow) {
    packed_narrow(isa, m, n, k, a, lda, pa, b, c, ldc, a_scratch, epi, tile_fn, ctx);
    return;
  }
  const int64_t mr = isa->mr, panels = (n + NR - 1) / NR;
  float edge[MR_AVX512 * NR] __attribute__((aligned(64)));
  memset(edge, 0, sizeof edge);
  /* B read in place: a last panel of fewer than NR columns (16 in a half tile) is copied into
   * a zero-padded panel per k block (the tile reads whole rows of it), in the scratch the narrow
   * products' B groups use */
  const int64_t tail = n % NR;
  const bool tail_copy = !b->packed && tail && !(tail == 16 && isa->half);
  float *tail_panel = a_scratch + (size_t)MC_MAX * KC;
  for (int64_t pc = 0; pc < k; pc += KC) {
    const int64_t kc = k - pc < KC ? k - pc : KC;
    const bool acc = pc > 0, last = pc + kc >= k;
    if (tail_copy)
      for (int64_t kk = 0; kk < kc; kk++) {
        float *dst = tail_panel + kk * NR;
        memcpy(dst, b->p + (pc + kk) * b->ld + (n - tail), (size_t)tail * sizeof(float));
        memset(dst + tail, 0, (size_t)(NR - tail) * sizeof(float));
      }
    for (int64_t ic = 0; ic < m; ic += isa->mc) {
      const int64_t mc = m - ic < isa->mc ? m - ic : isa->mc, tiles = (mc + mr - 1) / mr;
      const float *ablk = pa ? pre_a_block(pa, pc, ic, kc) : a_scratch;
      if (!pa) isa->pack(a, lda, m, ic, mc, pc, kc, mr, a_scratch);
      for (int64_t jp = 0; jp < panels; jp++) {
        const int64_t col0 = jp * NR, cols = n - col0 < NR ? n - col0 : NR;
        const float *bpp = b->packed ? b->p + (jp * k + pc) * NR
                           : cols < NR && tail_copy ? tail_panel
                                                    : b->p + pc * b->ld + col0;
        const int64_t ldb = b->packed || (cols < NR && tail_copy) ? NR : b->ld;
        for (int64_t t = 0; t < tiles; t++) {
          const int64_t row0 = ic + t * mr, rows = m - row0 < mr ? m - row0 : mr;
          float *ct = c + row0 * ldc + col0;
          const float *apt = ablk + t * kc * mr;
          const tile_kernel kern = cols <= 16 && isa->half ? isa->half : isa->tile;
          /* pre-packed weights are read from memory on the first panel's pass, from cache after */
          const int64_t pf = pa && jp == 0 ? A_PREFETCH_FLOATS : 0;
          mx_kgemm_f32_epilogue te = {0};
          if (last && epi) te = epi_at(epi, row0, col0);
          const bool in_store = last && epi && isa->epi_in_store && rows == mr && cols == NR;
          if (rows == mr && cols == NR) {
            kern(kc, apt, bpp, ldb, ct, ldc, acc, in_store ? &te : NULL, pf);
          } else if (isa->edge) {
            isa->edge(rows, cols, kc, apt, bpp, ldb, ct, ldc, acc, last && epi ? &te : NULL, pf);
          } else {
            if (acc)
              for (int64_t r = 0; r < rows; r++) memcpy(edge + r * NR, ct + r * ldc, (size_t)cols * sizeof(float));
            kern(kc, apt, bpp, ldb, edge, NR, acc, NULL, pf);
            for (int64_t r = 0; r < rows; r++) memcpy(ct + r * ldc, edge + r * NR, (size_t)cols * sizeof(float));
          }
          if (last && epi && !in_store && !isa->edge) epi_rows(ct, ldc, rows, cols, &te);
          if (last && tile_fn) tile_fn(ctx, row0, rows, col0, cols);
        }
      }
    }
  }
}

void mx__kgemm_f32_packed(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *bp,
                          float *c, int64_t ldc, float *a_scratch, mx_kgemm_tile_fn tile_fn, void *ctx) {
  const b_source b = {bp, NR, true, false, NULL};
  packed_impl(m, n, k, a, lda, NULL, &b, c, ldc, a_scratch, NULL, tile_fn, ctx);
}

void mx__kgemm_f32_packed_pre(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                              const mx_kgemm_f32_pre_a *pa, const float *bp, float *c, int64_t ldc,
                              float *a_scratch, mx_kgemm_tile_fn tile_fn, void *ctx) {
  const b_source b = {bp, NR, true, false, NULL};
  packed_impl(m, n, k, a, lda, pa, &b, c, ldc, a_scratch, NULL, tile_fn, ctx);
}

void mx__kgemm_f32_strided_pre(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                               const mx_kgemm_f32_pre_a *pa, const float *b, int64_t ldb, float *c, int64_t ldc,
                               float *a_scratch, mx_kgemm_tile_fn tile_fn, void *ctx) {
  const b_source src = {b, ldb, false, false, NULL};
  packed_impl(m, n, k, a, lda, pa, &src, c, ldc, a_scratch, NULL, tile_fn, ctx);
}

size_t mx__kgemm_f32_narrow_b_floats(int64_t k, int64_t n) {
  /* groups of mr columns (14 or 6) cover n with fewer than MR_AVX512 to spare */
  return (size_t)k * (size_t)(n + MR_AVX512);
}

void mx__kgemm_f32_narrow_b_row(const float *row, int64_t n, int64_t k_total, int64_t k, float *bn) {
  const isa_copy *isa = pick_copy();
  if (!isa) return;
  const int64_t mr = isa->mr, groups = (n + mr - 1) / mr;
  const int64_t pc = k / KC * KC, kc = k_total - pc < KC ? k_total - pc : KC;
  float *dst = bn + pc * groups * mr + (k - pc) * mr;
  /* whole groups by copies of a constant size, which the compiler makes a few vector moves
   * (a call per 14 floats was a tenth of a 7x7 map's 3x3 Conv on two threads) */
  const int64_t whole = n / mr;
  if (mr == MR_AVX512)
    for (int64_t g = 0; g < whole; g++, dst += kc * mr) memcpy(dst, row + g * mr, MR_AVX512 * sizeof(float));
  else
    for (int64_t g = 0; g < whole; g++, dst += kc * mr) memcpy(dst, row + g * mr, MR_AVX2 * sizeof(float));
  if (whole < groups) {
    const int64_t cols = n - whole * mr;
    memcpy(dst, row + whole * mr, (size_t)cols * sizeof(float));
    for (int64_t j = cols; j < mr; j++) dst[j] = 0.0f;
  }
}

void mx__kgemm_f32_narrow_pre(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                              const mx_kgemm_f32_pre_a *pa, const float *bn, float *c, int64_t ldc,
                              float *a_scratch, const mx_kgemm_f32_epilogue *epi, mx_kgemm_tile_fn tile_fn,
                              void *ctx) {
  const b_source b = {bn, 0, false, true, NULL};
  packed_impl(m, n, k, a, lda, pa, &b, c, ldc, a_scratch, epi, tile_fn, ctx);
}

void mx__kgemm_f32_epi_pre(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const mx_kgemm_f32_pre_a *pa,
                           const float *b, int64_t ldb, float *c, int64_t ldc, float *a_scratch,
                           const mx_kgemm_f32_epilogue *epi) {
  const b_source src = {b, ldb > 0 ? ldb : NR, ldb <= 0, false, NULL};
  packed_impl(m, n, k, a, lda, pa, &src, c, ldc, a_scratch, epi, NULL, NULL);
}
