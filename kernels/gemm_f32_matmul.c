/* float32 MatMul and Gemm on mixrt's own packed GEMM (kernels/gemm_f32.h): B (row-major [k, n], or
 * transposed [n, k]) is packed into MX_KGEMM_NR-column panels, then the rows of C are computed in
 * bands (one per task on the intra-op threads), the caller's epilogue (bias, activation, Gemm's C)
 * running on each finished tile while it is still in L1.
 *
 * The own GEMM computes every output as one FMA chain over k in order, whatever the band, the
 * thread or the ISA copy, so a product gives the same bits on 1 or N threads and on AVX-512 or
 * AVX2. For small and medium products it also avoids OpenBLAS's per-call setup and its copy of B,
 * which dominate at the sizes of a small encoder's projections. */
#include <string.h>

#include "kernels/gemm_f32.h"
#include "kernels/gemm_f32_matmul.h"
#include "kernels/prepack.h"
#include "kernels/threads.h"

/* Without AVX-512 the own AVX2 copy runs about as fast as OpenBLAS's Haswell kernels on large
 * products: above this many multiply-adds the product stays on sgemm there. */
#define OWN_AVX2_MAX_MACS ((int64_t)1 << 24)
/* Below this many multiply-adds (about 40 us on one core) a split across threads costs more than
 * it saves (the same bound as linalg_threads.c's). */
#define OWN_PAR_MIN_MACS ((int64_t)1 << 21)
/* B is packed anew on every run into the workspace (unless a constant B was pre-packed beside
 * the model): above this many elements (4 MB, a large model's weight matrix) that copy and its
 * memory are not worth it, and sgemm's blocked packing runs instead. */
#define OWN_MAX_B_ELEMS ((int64_t)1 << 20)

bool mx__kmm_own_pays(int64_t m, int64_t n, int64_t k, int ta) {
  if (ta || m < 2 || n < 2 || k < 1 || k * n > OWN_MAX_B_ELEMS || !mx__kgemm_f32_available()) return false;
  /* The register tile's height tells the copy: 14 rows is the AVX-512 one. n wide enough that the
   * narrow (transposed) grid is never chosen. */
  const bool avx512 = mx__kgemm_f32_row_granule(1 << 20, 1 << 10) == 14;
  return avx512 || m * n * k <= OWN_AVX2_MAX_MACS;
}

static size_t round16(size_t f) { return (f + 15) / 16 * 16; }

/* Scratch of one thread: the own GEMM's A blocks for up to m rows, then (unless one packed B is
 * shared by every task) its own copy of packed B. */
static size_t slot_floats(int64_t m, int64_t n, int64_t k, bool b_shared) {
  return round16(mx__kgemm_f32_a_floats(m) + (b_shared ? 0 : mx__kgemm_f32_packed_b_floats(k, n)));
}

/* The packed B every task reads, at the start of the workspace (0 when each packs its own). */
static size_t shared_floats(int64_t n, int64_t k, bool b_shared) {
  return b_shared ? round16(mx__kgemm_f32_packed_b_floats(k, n)) : 0;
}

size_t mx__kmm_own_workspace(int64_t m, int64_t n, int64_t k, bool b_shared) {
  return (shared_floats(n, k, b_shared) + slot_floats(m, n, k, b_shared) * (size_t)mx__kthreads()) * sizeof(float);
}

void mx__kmm_pack_b(const float *b, int64_t ldb, int tb, int64_t k, int64_t n, float *bp) {
  if (!tb) {
    for (int64_t q = 0; q < k; q++) mx__kgemm_f32_pack_b_row(b + q * ldb, n, k, q, bp);
    return;
  }
  const int64_t panels = (n + MX_KGEMM_NR - 1) / MX_KGEMM_NR;
  for (int64_t p = 0; p < panels; p++) {
    float *dst = bp + (size_t)p * (size_t)k * MX_KGEMM_NR;
    const int64_t col0 = p * MX_KGEMM_NR, cols = n - col0 < MX_KGEMM_NR ? n - col0 : MX_KGEMM_NR;
    if (cols < MX_KGEMM_NR) memset(dst, 0, (size_t)k * MX_KGEMM_NR * sizeof(float));
    /* column j of op(B) is row col0 + j of the stored B: k contiguous floats */
    for (int64_t j = 0; j < cols; j++) {
      const float *src = b + (col0 + j) * ldb;
      for (int64_t q = 0; q < k; q++) dst[q * MX_KGEMM_NR + j] = src[q];
    }
  }
}

static mx_kernel_prepack_layout b_layout(int tb, int64_t k, int64_t n) {
  mx_kernel_prepack_layout l = {{MX_KPREPACK_MM_B, k, n, tb ? 1 : 0}};
  return l;
}

size_t mx__kmm_prepack_b(const mx_kernel_call *call, int tb, int64_t k, int64_t n, void *dst,
                         mx_kernel_prepack_layout *layout) {
  const mx_ktensor *b = &call->t[1];
  if (b->dtype != MX_FLOAT32 || k < 1 || n < 1 || mx__ktensor_numel(b) != k * n) return 0;
  const size_t bytes = mx__kprepack_block_bytes(mx__kgemm_f32_packed_b_floats(k, n) * sizeof(float));
  *layout = b_layout(tb, k, n);
  if (!dst) return bytes;
  float *bp = mx__kprepack_begin(dst, bytes, call, 1, layout);
  mx__kmm_pack_b(b->data, tb ? k : n, tb, k, n, bp);
  return bytes;
}

const float *mx__kmm_prepacked_b(const mx_kernel_call *call, int tb, int64_t k, int64_t n) {
  const mx_kernel_prepack_layout l = b_layout(tb, k, n);
  return mx__kprepack_find(call, 1, &l);
}

size_t mx__kmm_own_scratch_floats(int64_t m, int64_t n, int64_t k) { return slot_floats(m, n, k, false); }

/* One band of rows of one product, and what its tiles' epilogue needs. */
typedef struct own_job {
  int64_t m, n, k;
  const float *a, *b;
  int tb;
  float *c;
  int64_t band; /* rows of C per task */
  int64_t bands;
  bool shared_b; /* one packed B (in slot 0's scratch) for every task */
  const float *bp_shared;
  float *scratch;
  size_t slot_floats;
  int64_t a_stride, b_stride, c_stride; /* floats between the products of a batch */
  mx_kmm_offsets_fn offsets; /* NULL: product i reads A and B number i */
  const void *offsets_ctx;
  mx_kmm_tile_fn tile_fn;
  const void *tile_ctx;
} own_job;

typedef struct own_tile_ctx {
  const own_job *j;
  float *c; /* the band's first row */
  int64_t row_base; /* the band's first row within its product */
} own_tile_ctx;

static void own_tile(void *vctx, int64_t row0, int64_t rows, int64_t col0, int64_t cols) {
  const own_tile_ctx *t = vctx;
  t->j->tile_fn(t->j->tile_ctx, t->c + row0 * t->j->n + col0, rows, t->j->n, t->row_base + row0, col0, cols);
}

static void own_task(void *vctx, int64_t task, int32_t slot) {
  const own_job *j = vctx;
  const int64_t prod = task / j->bands, band = task % j->bands;
  float *scr = j->scratch + (size_t)slot * j->slot_floats;
  const float *bp = j->bp_shared;
  int64_t ia = prod, ib = prod;
  if (j->offsets) j->offsets(j->offsets_ctx, prod, &ia, &ib);
  if (!j->shared_b) {
    float *own_bp = scr + mx__kgemm_f32_a_floats(j->m);
    mx__kmm_pack_b(j->b + ib * j->b_stride, j->tb ? j->k : j->n, j->tb, j->k, j->n, own_bp);
    bp = own_bp;
  }
  const int64_t row0 = band * j->band, rows = j->m - row0 < j->band ? j->m - row0 : j->band;
  float *c = j->c + prod * j->c_stride + row0 * j->n;
  own_tile_ctx t = {j, c, row0};
  mx__kgemm_f32_packed(rows, j->n, j->k, j->a + ia * j->a_stride + row0 * j->k, j->k, bp, c, j->n, scr,
                       j->tile_fn ? own_tile : NULL, &t);
}

bool mx__kmm_own_run(int64_t batch, int64_t m, int64_t n, int64_t k, const float *a, const float *b, int tb,
                     mx_kmm_offsets_fn offsets, const void *offsets_ctx, bool b_shared, const float *b_packed,
                     float *c, void *workspace, size_t workspace_bytes, mx_kmm_tile_fn tile_fn,
                     const void *tile_ctx) {
  const size_t per = slot_floats(m, n, k, b_shared), shared = shared_floats(n, k, b_shared);
  const size_t have = workspace_bytes / sizeof(float);
  if (!workspace || have < shared + per) return false;
  int64_t fit = (int64_t)((have - shared) / per);
  const int64_t macs = batch * m * n * k;
  int32_t slots = macs >= OWN_PAR_MIN_MACS ? mx__kthreads() : 1;
  if (slots > fit) slots = (int32_t)fit;
  own_job j = {.m = m,
               .n = n,
               .k = k,
               .a = a,
               .b = b,
               .tb = tb,
               .c = c,
               .band = m,
               .bands = 1,
               .shared_b = b_shared,
               .scratch = (float *)workspace + shared,
               .slot_floats = per,
               .a_stride = m * k,
               .b_stride = k * n,
               .c_stride = m * n,
               .offsets = offsets,
               .offsets_ctx = offsets_ctx,
               .tile_fn = tile_fn,
               .tile_ctx = tile_ctx};
  if (b_shared && b_packed) {
    j.bp_shared = b_packed; /* packed beside the model: the same panels this run would write */
  } else if (b_shared) {
    float *bp = workspace;
    mx__kmm_pack_b(b, tb ? k : n, tb, k, n, bp);
    j.bp_shared = bp;
  }
  /* A single product on several threads: bands of whole register tiles, two per thread so a
   * worker that joins late still finds one. */
  if (slots > 1 && batch < 2 * slots) {
    const int64_t granule = mx__kgemm_f32_row_granule(m, n);
    const int64_t want = 2 * (int64_t)slots / batch + 1;
    int64_t band = (m + want - 1) / want;
    band = (band + granule - 1) / granule * granule;
    if (band < m) {
      j.band = band;
      j.bands = (m + band - 1) / band;
    }
  }
  const int64_t tasks = batch * j.bands;
  if (slots > 1 && tasks > 1)
    mx__kparallel_work(tasks, slots, macs, own_task, &j);
  else
    for (int64_t t = 0; t < tasks; t++) own_task(&j, t, 0);
  return true;
}
