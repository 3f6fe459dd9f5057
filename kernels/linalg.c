/* CPU kernels of MatMul and Gemm (Einsum lives in linalg_einsum.c).
 *
 * float32 products run on mixrt's own packed GEMM where it pays (gemm_f32_matmul.c: AVX-512 or
 * AVX2, the bias and activation applied per tile, the same bits on any thread count); otherwise,
 * float32 and float64 go through CBLAS (OpenBLAS, one thread per call; large float32 products and
 * batches split across the intra-op threads, linalg_threads.c): a batched MatMul
 * loops over the broadcast batch calling sgemm/dgemm, folds the batch into the row count when
 * B is shared by every batch entry, and uses gemv for single rows or columns. float16 and
 * bfloat16 are converted to float32 in the workspace, multiplied with sgemm and rounded once.
 * int32/int64 use a plain loop with wrapping (unsigned) arithmetic, like numpy.
 *
 * What the fusion pass folded into a MatMul (mx_matmul_params): transposed operands go to BLAS
 * as its transpose flags; the bias and the activation are an epilogue applied to each product
 * right after it is computed, while it is still in cache (float types only). */
#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "graph/ops/linalg_params.h"
#include "kernels/gemm_f32_matmul.h"
#include "kernels/groups.h"
#include "kernels/kmath.h"
#include "kernels/kutil.h"
#include "kernels/linalg_impl.h"
#include "kernels/prepack.h"

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static void blas_single_thread(void) { openblas_set_num_threads(1); }
void mx__kblas_init(void) { pthread_once(&blas_once, blas_single_thread); }

/* --- MatMul ------------------------------------------------------------------------------------- */

/* How a MatMul maps onto a loop of 2-D products. */
typedef struct mm_plan {
  int64_t m, k, n;             /* rows of A, contraction, columns of B (after 1-D promotion) */
  int64_t batch;               /* number of output matrices */
  int32_t brank;               /* rank of the broadcast batch shape */
  int64_t bdims[MX_MAX_RANK];  /* broadcast batch shape */
  int64_t a_step[MX_MAX_RANK]; /* A's stride per batch dim, in matrices (0: broadcast) */
  int64_t b_step[MX_MAX_RANK]; /* B's stride per batch dim, in matrices (0: broadcast) */
  int fold;                    /* B is shared and A is not broadcast: one product, batch*m rows */
  int ta, tb;                  /* A / B hold their last two axes swapped (mx_matmul_params) */
} mm_plan;

/* why: set to the cause when the shapes do not make a MatMul. */
static mx_status mm_plan_shapes(const mx_kernel_call *call, mm_plan *p, const char **why) {
  const mx_ktensor *a = &call->t[0], *b = &call->t[1];
  int32_t ra = a->rank, rb = b->rank;
  if (ra < 1 || rb < 1) {
    *why = "MatMul: an input is a scalar";
    return MX_ERR_KERNEL;
  }
  if (b->dtype != a->dtype || call->t[call->n_in].dtype != a->dtype) {
    *why = "MatMul: A, B and Y must have one dtype";
    return MX_ERR_KERNEL;
  }
  const mx_matmul_params *mp = call->params;
  p->ta = mp && mp->trans_a;
  p->tb = mp && mp->trans_b;
  if ((p->ta && ra < 2) || (p->tb && rb < 2)) {
    *why = "MatMul: a transposed operand has rank < 2";
    return MX_ERR_KERNEL;
  }
  /* Every field is set below (the batch arrays up to brank), so no clearing of the struct. */
  p->m = ra >= 2 ? a->dims[ra - (p->ta ? 1 : 2)] : 1;
  p->k = a->dims[ra - (p->ta ? 2 : 1)];
  p->n = rb >= 2 ? b->dims[rb - (p->tb ? 2 : 1)] : 1;
  int64_t kb = rb >= 2 ? b->dims[rb - (p->tb ? 1 : 2)] : b->dims[0];
  if (kb != p->k) {
    *why = "MatMul: the contraction dims of A and B differ";
    return MX_ERR_KERNEL;
  }
  int32_t abr = ra > 2 ? ra - 2 : 0, bbr = rb > 2 ? rb - 2 : 0;
  p->brank = abr > bbr ? abr : bbr;
  int64_t sa = 1, sb = 1;
  bool a_full = true, b_shared = true;
  p->batch = 1;
  for (int32_t i = p->brank - 1; i >= 0; i--) {
    int32_t ia = i - (p->brank - abr), ib = i - (p->brank - bbr);
    int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
    if (da != db && da != 1 && db != 1) {
      *why = "MatMul: batch dims do not broadcast";
      return MX_ERR_KERNEL;
    }
    int64_t d = da == 1 ? db : da;
    p->bdims[i] = d;
    p->a_step[i] = da == 1 ? 0 : sa;
    p->b_step[i] = db == 1 ? 0 : sb;
    if (da != d) a_full = false;
    if (db != 1) b_shared = false;
    sa *= da;
    sb *= db;
    p->batch *= d;
  }
  /* A transposed A's rows are not contiguous across the batch. */
  p->fold = a_full && b_shared && !p->ta;
  return MX_OK;
}

static mx_status mm_make_plan(mx_kernel_call *call, mm_plan *p) { return mm_plan_shapes(call, p, &call->why); }

/* Offsets (in matrices) of A and B for output matrix `idx`. */
static void mm_offsets(const mm_plan *p, int64_t idx, int64_t *oa, int64_t *ob) {
  int64_t a = 0, b = 0;
  for (int32_t i = p->brank - 1; i >= 0; i--) {
    int64_t c = idx % p->bdims[i];
    idx /= p->bdims[i];
    a += c * p->a_step[i];
    b += c * p->b_step[i];
  }
  *oa = a;
  *ob = b;
}

static void mm_offsets_cb(const void *plan, int64_t idx, int64_t *oa, int64_t *ob) {
  mm_offsets(plan, idx, oa, ob);
}

/* The 2-D products C[m,n] = op(A)[m,k] * op(B)[k,n], C row-major contiguous; A is stored
 * [m,k] (or [k,m] when ta), B [k,n] (or [n,k] when tb). They take void pointers so that mm_run
 * can call any of them. */
typedef void (*mm2d_fn)(const void *a, const void *b, void *c, int64_t m, int64_t k, int64_t n, int ta,
                        int tb);

/* Floating point through BLAS in precision T: gemv for a single row or column, gemm otherwise.
 * A single row of a transposed A (or column of a transposed B) is the same contiguous vector. */
#define MM2D_BLAS(NAME, T, GEMV, GEMM)                                                                    \
  static void NAME(const void *a, const void *b, void *vc, int64_t m, int64_t k, int64_t n, int ta,       \
                   int tb) {                                                                              \
    T *c = vc;                                                                                            \
    if (m == 0 || n == 0) return;                                                                         \
    if (k == 0) {                                                                                         \
      memset(c, 0, (size_t)(m * n) * sizeof *c);                                                          \
    } else if (m == 1) {                                                                                  \
      /* gemv would scale y by beta = 0 (keeping NaN garbage) in a separate call: y is cleared and   \
       * accumulated into with beta = 1 instead, the same bits. */    \
      memset(c, 0, (size_t)n * sizeof *c);                                                                \
      if (tb)                                                                                             \
        GEMV(CblasRowMajor, CblasNoTrans, (blasint)n, (blasint)k, (T)1, b, (blasint)k, a, 1, (T)1, c, 1); \
      else                                                                                                \
        GEMV(CblasRowMajor, CblasTrans, (blasint)k, (blasint)n, (T)1, b, (blasint)n, a, 1, (T)1, c, 1);   \
    } else if (n == 1) {                                                                                  \
      memset(c, 0, (size_t)m * sizeof *c);                                                                \
      if (ta)                                                                                             \
        GEMV(CblasRowMajor, CblasTrans, (blasint)k, (blasint)m, (T)1, a, (blasint)m, b, 1, (T)1, c, 1);   \
      else                                                                                                \
        GEMV(CblasRowMajor, CblasNoTrans, (blasint)m, (blasint)k, (T)1, a, (blasint)k, b, 1, (T)1, c, 1); \
    } else {                                                                                              \
      GEMM(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (blasint)m,     \
           (blasint)n, (blasint)k, (T)1, a, (blasint)(ta ? m : k), b, (blasint)(tb ? k : n), (T)0, c,     \
           (blasint)n);                                                                                   \
    }                                                                                                     \
  }
MM2D_BLAS(mm2d_f32_blas, float, cblas_sgemv, cblas_sgemm)
MM2D_BLAS(mm2d_f64, double, cblas_dgemv, cblas_dgemm)
#undef MM2D_BLAS

/* A row times a small matrix (the decode step's projections): below this many elements of B,
 * a BLAS gemv call's fixed cost (argument checks, blocking: several hundred instructions) is as
 * large as the product, so mm_row_regs_f32 or mm_row_stream_f32 does it directly. */
#define MM_ROW_MAX_ELEMS (1 << 16)

/* 16, 8 and 4 floats (gcc vector extensions; 16 floats are one AVX-512 register, two AVX2 ones).
 * The vectors never cross a call, so gcc's note that their passing convention depends on the
 * ISA does not apply. */
#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
typedef float mm_v16 __attribute__((vector_size(64)));
typedef float mm_v8 __attribute__((vector_size(32)));
typedef float mm_v4 __attribute__((vector_size(16)));

__attribute__((always_inline)) static inline mm_v16 mm_ld16(const float *p) {
  mm_v16 v;
  memcpy(&v, p, sizeof v);
  return v;
}

/* c[0..n) = a[0..k) B for row-major B[k, n]. Each element of c is the sum of its terms of even q
 * plus the sum of its terms of odd q, each in the order of q: a block of 32 (or 16) columns keeps
 * the two sums in registers over all of k, so the adds form four (or two) independent chains
 * per block instead of a chain through memory. The columns past the last such block get the
 * same two sums in narrower vectors, then scalar code, so an element's value does not depend on
 * its column. */
MX_KHOT static void mm_row_regs_f32(const float *restrict a, const float *restrict b, float *restrict c,
                                    int64_t k, int64_t n) {
  int64_t j = 0;
  /* Written out with two 16-float vectors per sum: as one 32-float vector (MM_ROW_BLOCK below),
   * gcc keeps the sums in memory and the block runs about 3 times slower. */
  for (; j + 32 <= n; j += 32) {
    mm_v16 e0 = {0}, e1 = {0}, o0 = {0}, o1 = {0};
    const float *restrict bj = b + j;
    int64_t q = 0;
    for (; q + 2 <= k; q += 2) {
      const float *restrict b0 = bj + q * n, *restrict b1 = b0 + n;
      e0 += a[q] * mm_ld16(b0);
      e1 += a[q] * mm_ld16(b0 + 16);
      o0 += a[q + 1] * mm_ld16(b1);
      o1 += a[q + 1] * mm_ld16(b1 + 16);
    }
    if (q < k) {
      e0 += a[q] * mm_ld16(bj + q * n);
      e1 += a[q] * mm_ld16(bj + q * n + 16);
    }
    mm_v16 r0 = e0 + o0, r1 = e1 + o1;
    memcpy(c + j, &r0, sizeof r0);
    memcpy(c + j + 16, &r1, sizeof r1);
  }
  /* The remaining columns in blocks of 16, 8 and 4 (and the last < 4 in scalar code). */
#define MM_ROW_BLOCK(W, T)                  \
  for (; j + W <= n; j += W) {              \
    T e0 = {0}, o0 = {0}, v;                \
    const float *restrict bj = b + j;       \
    int64_t q = 0;                          \
    for (; q + 2 <= k; q += 2) {            \
      memcpy(&v, bj + q * n, sizeof v);     \
      e0 += a[q] * v;                       \
      memcpy(&v, bj + q * n + n, sizeof v); \
      o0 += a[q + 1] * v;                   \
    }                                       \
    if (q < k) {                            \
      memcpy(&v, bj + q * n, sizeof v);     \
      e0 += a[q] * v;                       \
    }                                       \
    v = e0 + o0;                            \
    memcpy(c + j, &v, sizeof v);            \
  }
  MM_ROW_BLOCK(16, mm_v16)
  MM_ROW_BLOCK(8, mm_v8)
  MM_ROW_BLOCK(4, mm_v4)
#undef MM_ROW_BLOCK
  for (; j < n; j++) {
    float e = 0.0f, o = 0.0f;
    int64_t q = 0;
    for (; q + 2 <= k; q += 2) {
      e += a[q] * b[q * n + j];
      o += a[q + 1] * b[(q + 1) * n + j];
    }
    if (q < k) e += a[q] * b[q * n + j];
    c[j] = e + o;
  }
}

/* c[0..n) = a[0..k) B for row-major B[k, n] walking B row after row: rows added into c four at a
 * time, each element's terms in the order of k, in vector lanes across n. For a B larger than the
 * first-level cache, where mm_row_regs_f32's column blocks would walk B in strided strips. */
MX_KHOT static void mm_row_stream_f32(const float *restrict a, const float *restrict b, float *restrict c,
                                      int64_t k, int64_t n) {
  memset(c, 0, (size_t)n * sizeof *c);
  int64_t q = 0;
  for (; q + 4 <= k; q += 4) {
    const float a0 = a[q], a1 = a[q + 1], a2 = a[q + 2], a3 = a[q + 3];
    const float *restrict b0 = b + q * n, *restrict b1 = b0 + n, *restrict b2 = b1 + n, *restrict b3 = b2 + n;
    for (int64_t j = 0; j < n; j++) c[j] = (((c[j] + a0 * b0[j]) + a1 * b1[j]) + a2 * b2[j]) + a3 * b3[j];
  }
  for (; q < k; q++) {
    const float aq = a[q];
    const float *restrict bq = b + q * n;
    for (int64_t j = 0; j < n; j++) c[j] += aq * bq[j];
  }
}

/* B up to this many elements (64 KB) takes mm_row_regs_f32: it stays in the first two cache
 * levels, where the column blocks' strided walk costs nothing and the register sums win. */
#define MM_ROW_REGS_MAX_ELEMS (1 << 14)

static void mm2d_f32(const void *a, const void *b, void *c, int64_t m, int64_t k, int64_t n, int ta, int tb) {
  if (m == 1 && !tb && k > 0 && k * n <= MM_ROW_REGS_MAX_ELEMS)
    mm_row_regs_f32(a, b, c, k, n);
  else if (m == 1 && !tb && k > 0 && k * n <= MM_ROW_MAX_ELEMS)
    mm_row_stream_f32(a, b, c, k, n);
  else
    mm2d_f32_blas(a, b, c, m, k, n, ta, tb);
}

/* Integers of type T: products wrap like numpy's fixed-width integers (arithmetic in the
 * unsigned type U avoids UB). */
#define MM2D_INT(NAME, T, U)                                                                          \
  static void NAME(const void *va, const void *vb, void *vc, int64_t m, int64_t k, int64_t n, int ta, \
                   int tb) {                                                                          \
    const T *a = va, *b = vb;                                                                         \
    U *restrict cu = vc;                                                                              \
    int64_t sa_i = ta ? 1 : k, sa_q = ta ? m : 1, sb_q = tb ? 1 : n, sb_j = tb ? k : 1;               \
    for (int64_t i = 0; i < m; i++) {                                                                 \
      U *restrict row = cu + i * n;                                                                   \
      for (int64_t j = 0; j < n; j++) row[j] = 0;                                                     \
      for (int64_t q = 0; q < k; q++) {                                                               \
        U av = (U)a[i * sa_i + q * sa_q];                                                             \
        const T *restrict br = b + q * sb_q;                                                          \
        for (int64_t j = 0; j < n; j++) row[j] += av * (U)br[j * sb_j];                               \
      }                                                                                               \
    }                                                                                                 \
  }
MM2D_INT(mm2d_i32, int32_t, uint32_t)
MM2D_INT(mm2d_i64, int64_t, uint64_t)
#undef MM2D_INT

/* The fused epilogue of a MatMul: bias (NULL: none; bias_n elements, n or 1) added along the
 * last axis, then the activation act (MX_MATMUL_ACT_*). */
typedef struct mm_epilogue {
  const void *bias;
  int64_t bias_n;
  int32_t act;
} mm_epilogue;

/* Applies the epilogue to rows x n row-major outputs in place. */
typedef void (*mm_epi_fn)(const mm_epilogue *e, void *c, int64_t rows, int64_t n);

/* The activation formulas are those of the standalone kernels (Relu, Gelu, Swish, Sigmoid, Tanh),
 * so a fused MatMul computes what the unfused graph computes. */
MX_KHOT static void mm_epi_block_f32(const mm_epilogue *e, float *c0, int64_t rows, int64_t ldc, int64_t col0,
                                     int64_t n) {
  const float *restrict bias = e->bias;
  const bool bias_row = bias && e->bias_n != 1;
  for (int64_t i = 0; i < rows; i++) {
    float *restrict c = c0 + i * ldc;
    if (bias_row)
      for (int64_t j = 0; j < n; j++) c[j] += bias[col0 + j];
    else if (bias)
      for (int64_t j = 0; j < n; j++) c[j] += bias[0];
    switch (e->act) {
      case MX_MATMUL_ACT_RELU:
        for (int64_t j = 0; j < n; j++) c[j] = c[j] > 0.0f ? c[j] : 0.0f;
        break;
      case MX_MATMUL_ACT_GELU:
        for (int64_t j = 0; j < n; j++) c[j] = 0.5f * c[j] * (1.0f + mx__kerff(c[j] * 0.7071067811865476f));
        break;
      case MX_MATMUL_ACT_GELU_TANH:
        for (int64_t j = 0; j < n; j++) {
          float x = c[j];
          c[j] = 0.5f * x * (1.0f + mx__ktanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
        }
        break;
      case MX_MATMUL_ACT_SILU:
        for (int64_t j = 0; j < n; j++) c[j] = c[j] * mx__ksigmoidf(c[j]);
        break;
      case MX_MATMUL_ACT_SIGMOID:
        for (int64_t j = 0; j < n; j++) c[j] = mx__ksigmoidf(c[j]);
        break;
      case MX_MATMUL_ACT_TANH:
        for (int64_t j = 0; j < n; j++) c[j] = mx__ktanhf(c[j]);
        break;
      default: break;
    }
  }
}

static void mm_epilogue_f32(const mm_epilogue *e, void *vc, int64_t rows, int64_t n) {
  mm_epi_block_f32(e, vc, rows, n, 0, n);
}

/* The epilogue on one tile of the own GEMM (gemm_f32_matmul.c), while the tile is in L1. */
static void mm_own_tile_f32(const void *ctx, float *c, int64_t rows, int64_t ldc, int64_t row, int64_t col0,
                            int64_t cols) {
  (void)row;
  mm_epi_block_f32(ctx, c, rows, ldc, col0, cols);
}

static void mm_epilogue_f64(const mm_epilogue *e, void *vc, int64_t rows, int64_t n) {
  const double *bias = e->bias;
  for (int64_t i = 0; i < rows; i++) {
    double *c = (double *)vc + i * n;
    for (int64_t j = 0; j < n; j++) {
      double x = c[j] + (bias ? bias[e->bias_n == n ? j : 0] : 0.0);
      switch (e->act) {
        case MX_MATMUL_ACT_RELU: x = x > 0.0 ? x : 0.0; break;
        case MX_MATMUL_ACT_GELU: x = 0.5 * x * (1.0 + erf(x * 0.7071067811865476)); break;
        case MX_MATMUL_ACT_GELU_TANH:
          x = 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
          break;
        case MX_MATMUL_ACT_SILU: x = x / (1.0 + exp(-x)); break;
        case MX_MATMUL_ACT_SIGMOID: x = 1.0 / (1.0 + exp(-x)); break;
        case MX_MATMUL_ACT_TANH: x = tanh(x); break;
        default: break;
      }
      c[j] = x;
    }
  }
}

/* One batched product: its operands, output and the routines that compute it. */
typedef struct mm_batch_job {
  const mm_plan *p;
  const void *a, *b;
  void *c;
  size_t esize;
  mm2d_fn fn;
  mm_epi_fn epi;
  const mm_epilogue *e;
} mm_batch_job;

/* Output matrix i of the batch, then its epilogue. */
static void mm_one(const mm_batch_job *j, int64_t i) {
  const mm_plan *p = j->p;
  size_t sa = (size_t)(p->m * p->k) * j->esize, sb = (size_t)(p->k * p->n) * j->esize,
         sc = (size_t)(p->m * p->n) * j->esize;
  int64_t oa, ob;
  mm_offsets(p, i, &oa, &ob);
  char *ci = (char *)j->c + (size_t)i * sc;
  j->fn((const char *)j->a + (size_t)oa * sa, (const char *)j->b + (size_t)ob * sb, ci, p->m, p->k, p->n,
        p->ta, p->tb);
  if (j->epi) j->epi(j->e, ci, p->m, p->n);
}

static void mm_batch_task(void *ctx, int64_t task, int32_t slot) {
  (void)slot;
  mm_one(ctx, task);
}

/* The float32 epilogue on a band of rows of a product split across threads. */
static void mm_epilogue_rows_f32(const void *ctx, float *c, int64_t rows, int64_t n) {
  mm_epilogue_f32(ctx, c, rows, n);
}

/* Runs the batched product on element buffers of `esize` bytes with the 2-D routine `fn`, and
 * the epilogue (when epi is not NULL) on each product as soon as it is computed. A large float32
 * product is split across the intra-op threads in bands of rows; a large batch, one product per
 * task. */
static void mm_run(const mm_plan *p, const void *a, const void *b, void *c, size_t esize, mm2d_fn fn,
                   mm_epi_fn epi, const mm_epilogue *e) {
  if (p->fold || p->batch == 1) {
    int64_t rows = p->fold ? p->batch * p->m : p->m;
    if (fn == mm2d_f32 && mx__ksgemm_threads(p->ta, p->tb, rows, p->n, p->k, 1.0f, a, b, 0.0f, c,
                                             epi ? mm_epilogue_rows_f32 : NULL, e))
      return;
    fn(a, b, c, rows, p->k, p->n, p->ta, p->tb);
    if (epi) epi(e, c, rows, p->n);
    return;
  }
  mm_batch_job j = {p, a, b, c, esize, fn, epi, e};
  if (mx__kparallel_large(p->batch, p->batch * p->m * p->n * p->k, mm_batch_task, &j)) return;
  for (int64_t i = 0; i < p->batch; i++) mm_one(&j, i);
}

/* The fused bias and activation of the call (e->bias NULL and act 0 when there are none); fails
 * on a bias that is not a vector of n (or 1) entries. */
static mx_status mm_get_epilogue(mx_kernel_call *call, const mm_plan *p, mm_epilogue *e) {
  const mx_matmul_params *mp = call->params;
  e->bias = NULL;
  e->bias_n = 0;
  e->act = mp ? mp->fused_act : MX_MATMUL_ACT_NONE;
  if (!mp || !mp->has_bias) return MX_OK;
  const mx_ktensor *bias = &call->t[2];
  if (call->n_in < 3 || bias->dtype != call->t[0].dtype) {
    call->why = "MatMul: the fused bias is missing or of another dtype";
    return MX_ERR_KERNEL;
  }
  e->bias_n = mx__ktensor_numel(bias);
  if (e->bias_n != p->n && e->bias_n != 1) {
    call->why = "MatMul: the fused bias has neither N entries nor one";
    return MX_ERR_KERNEL;
  }
  e->bias = bias->data;
  return MX_OK;
}

/* The shape of a float32 MatMul's product on the own GEMM: one product of batch * m rows when
 * the batch folds, else the batch of m-row products. */
static void mm_own_shape(const mm_plan *p, int64_t *batch, int64_t *rows) {
  *batch = p->fold ? 1 : p->batch;
  *rows = p->fold ? p->batch * p->m : p->m;
}

/* A float32 MatMul on the own GEMM (gemm_f32_matmul.c) when it pays and the workspace holds its
 * scratch; false: the BLAS path computes it. e: the fused epilogue, NULL when there is none. */
static bool mm_own_f32(mx_kernel_call *call, const mm_plan *p, const float *a, const float *b, float *c,
                       const mm_epilogue *e) {
  int64_t batch, rows;
  mm_own_shape(p, &batch, &rows);
  if (!mx__kmm_own_pays(rows, p->n, p->k, p->ta)) return false;
  const float *bp = batch == 1 && b == call->t[1].data ? mx__kmm_prepacked_b(call, p->tb, p->k, p->n) : NULL;
  return mx__kmm_own_run(batch, rows, p->n, p->k, a, b, p->tb, batch > 1 ? mm_offsets_cb : NULL, p, batch == 1, bp,
                         c, call->workspace, call->workspace_size, e ? mm_own_tile_f32 : NULL, e);
}

/* A constant B shared by the whole product (batch 1 once folded), pre-packed beside the model. */
size_t mx__kmatmul_prepack(const mx_kernel_call *call, void *dst, mx_kernel_prepack_layout *layout) {
  if (call->t[0].dtype != MX_FLOAT32 || call->t[1].dtype != MX_FLOAT32) return 0;
  mm_plan p;
  const char *why = NULL;
  if (mm_plan_shapes(call, &p, &why) != MX_OK) return 0;
  int64_t batch, rows;
  mm_own_shape(&p, &batch, &rows);
  if (batch != 1 || !mx__kmm_own_pays(rows, p.n, p.k, p.ta)) return 0;
  return mx__kmm_prepack_b(call, p.tb, p.k, p.n, dst, layout);
}

/* A float32 MatMul's scratch on the own GEMM (none on the BLAS path or for float64). */
static size_t matmul_float_workspace(const mx_kernel_call *call) {
  if (call->t[0].dtype != MX_FLOAT32) return 0;
  mm_plan p;
  const char *why = NULL;
  if (mm_plan_shapes(call, &p, &why) != MX_OK) return 0;
  int64_t batch, rows;
  mm_own_shape(&p, &batch, &rows);
  if (batch == 0 || !mx__kmm_own_pays(rows, p.n, p.k, p.ta)) return 0;
  return mx__kmm_own_workspace(rows, p.n, p.k, batch == 1);
}

static mx_status matmul_run(mx_kernel_call *call) {
  mm_plan p;
  mx_status st = mm_make_plan(call, &p);
  if (st != MX_OK) return st;
  mm_epilogue e;
  if ((st = mm_get_epilogue(call, &p, &e)) != MX_OK) return st;
  bool epi = e.bias || e.act != MX_MATMUL_ACT_NONE;
  mx_ktensor *y = mx__kout(call, 0);
  if (p.batch == 0 || p.m == 0 || p.n == 0) return MX_OK;
  const void *a = call->t[0].data, *b = call->t[1].data;
  switch (y->dtype) {
    case MX_FLOAT32:
      if (mm_own_f32(call, &p, a, b, y->data, epi ? &e : NULL)) return MX_OK;
      mx__kblas_init();
      mm_run(&p, a, b, y->data, 4, mm2d_f32, epi ? mm_epilogue_f32 : NULL, &e);
      return MX_OK;
    case MX_FLOAT64:
      mx__kblas_init();
      mm_run(&p, a, b, y->data, 8, mm2d_f64, epi ? mm_epilogue_f64 : NULL, &e);
      return MX_OK;
    case MX_INT32:
    case MX_INT64:
      if (epi) {
        call->why = "MatMul: a fused bias or activation needs a float dtype";
        return MX_ERR_KERNEL;
      }
      mm_run(&p, a, b, y->data, y->dtype == MX_INT32 ? 4 : 8, y->dtype == MX_INT32 ? mm2d_i32 : mm2d_i64,
             NULL, &e);
      return MX_OK;
    case MX_FLOAT16:
    case MX_BFLOAT16: {
      mx__kblas_init();
      int64_t na = mx__ktensor_numel(&call->t[0]), nb = mx__ktensor_numel(&call->t[1]);
      int64_t ny = mx__ktensor_numel(y);
      float *fa = call->workspace;
      float *fb = (float *)((char *)fa + mx__kalign64((size_t)na * 4));
      float *fy = (float *)((char *)fb + mx__kalign64((size_t)nb * 4));
      float *fbias = (float *)((char *)fy + mx__kalign64((size_t)ny * 4));
      mx__khalf_to_f32(a, call->t[0].dtype, fa, na);
      mx__khalf_to_f32(b, call->t[1].dtype, fb, nb);
      if (e.bias) {
        mx__khalf_to_f32(e.bias, y->dtype, fbias, e.bias_n);
        e.bias = fbias;
      }
      mm_run(&p, fa, fb, fy, 4, mm2d_f32, epi ? mm_epilogue_f32 : NULL, &e);
      mx__kf32_to_half(fy, y->dtype, y->data, ny);
      return MX_OK;
    }
    default: return MX_ERR_UNSUPPORTED;
  }
}

/* float16/bfloat16 products run in float32 copies of A, B and Y (Gemm reads C in its dtype). */
static size_t half_workspace(const mx_kernel_call *call) {
  size_t na = (size_t)mx__ktensor_numel(&call->t[0]), nb = (size_t)mx__ktensor_numel(&call->t[1]);
  size_t ny = (size_t)mx__ktensor_numel(&call->t[call->n_in]);
  return mx__kalign64(na * 4) + mx__kalign64(nb * 4) + mx__kalign64(ny * 4);
}

/* A MatMul's also holds a float32 copy of its fused bias. */
static size_t matmul_half_workspace(const mx_kernel_call *call) {
  size_t nbias =
      call->n_in > 2 && call->t[2].dtype != MX_DTYPE_UNDEFINED ? (size_t)mx__ktensor_numel(&call->t[2]) : 0;
  return half_workspace(call) + mx__kalign64(nbias * 4);
}

static const mx_kernel_def k_matmul_float = {.op = "MatMul",
                                             .dtypes = MX_KDT(MX_FLOAT32) | MX_KDT(MX_FLOAT64),
                                             .key = 0,
                                             .run = matmul_run,
                                             .workspace = matmul_float_workspace};
static const mx_kernel_def k_matmul_half = {.op = "MatMul",
                                            .dtypes = MX_KDT(MX_FLOAT16) | MX_KDT(MX_BFLOAT16),
                                            .key = 0,
                                            .run = matmul_run,
                                            .workspace = matmul_half_workspace};
static const mx_kernel_def k_matmul_int = {
    .op = "MatMul", .dtypes = MX_KDT(MX_INT32) | MX_KDT(MX_INT64), .key = 0, .run = matmul_run};

/* --- Gemm --------------------------------------------------------------------------------------- */

typedef struct gemm_dims {
  int64_t m, n, k;
  int64_t c_s0, c_s1; /* C's strides broadcast to [m, n] */
  bool has_c;
} gemm_dims;

static mx_status gemm_make_dims(mx_kernel_call *call, gemm_dims *g) {
  const mx_gemm_params *p = call->params;
  const mx_ktensor *a = &call->t[0], *b = &call->t[1];
  if (a->rank != 2 || b->rank != 2) {
    call->why = "Gemm: A and B must be 2-D";
    return MX_ERR_KERNEL;
  }
  bool c_in = call->n_in > 2 && call->t[2].dtype != MX_DTYPE_UNDEFINED;
  if (b->dtype != a->dtype || call->t[call->n_in].dtype != a->dtype ||
      (c_in && call->t[2].dtype != a->dtype)) {
    call->why = "Gemm: A, B, C and Y must have one dtype";
    return MX_ERR_KERNEL;
  }
  g->m = a->dims[p->trans_a ? 1 : 0];
  g->k = a->dims[p->trans_a ? 0 : 1];
  int64_t kb = b->dims[p->trans_b ? 1 : 0];
  g->n = b->dims[p->trans_b ? 0 : 1];
  if (kb != g->k) {
    call->why = "Gemm: the contraction dims of op(A) and op(B) differ";
    return MX_ERR_KERNEL;
  }
  g->has_c = c_in && p->beta != 0.0f;
  g->c_s0 = g->c_s1 = 0;
  if (g->has_c) {
    const mx_ktensor *c = &call->t[2];
    if (c->rank > 2) {
      call->why = "Gemm: C has more than 2 dims";
      return MX_ERR_KERNEL;
    }
    int64_t want[2] = {g->m, g->n}, s[2];
    for (int32_t i = 0; i < c->rank; i++) {
      int64_t d = c->dims[i], o = want[2 - c->rank + i];
      if (d != o && d != 1) {
        call->why = "Gemm: C does not broadcast to [M, N]";
        return MX_ERR_KERNEL;
      }
    }
    mx__kbroadcast_strides(c, 2, s);
    g->c_s0 = s[0];
    g->c_s1 = s[1];
  }
  return MX_OK;
}

/* Y = beta * C (broadcast), in float32 or float64 element buffers; C is read in its dtype. */
static void gemm_fill_c_f32(const gemm_dims *g, const mx_ktensor *c, float beta, float *y) {
  if (c->dtype == MX_FLOAT32) {
    const float *cv = c->data;
    for (int64_t i = 0; i < g->m; i++)
      for (int64_t j = 0; j < g->n; j++) y[i * g->n + j] = beta * cv[i * g->c_s0 + j * g->c_s1];
  } else {
    for (int64_t i = 0; i < g->m; i++)
      for (int64_t j = 0; j < g->n; j++)
        y[i * g->n + j] = beta * (float)mx__kget_f64(c->data, c->dtype, i * g->c_s0 + j * g->c_s1);
  }
}

static mx_status gemm_run_f32(mx_kernel_call *call, const gemm_dims *g, const float *a, const float *b,
                              float *y) {
  const mx_gemm_params *p = call->params;
  if (g->has_c)
    gemm_fill_c_f32(g, &call->t[2], p->beta, y);
  else if (g->k == 0)
    memset(y, 0, (size_t)(g->m * g->n) * sizeof *y);
  if (g->k == 0) return MX_OK;
  mx__kblas_init();
  if (g->m == 1) {
    /* one row (a classifier head at batch 1): sgemv streams B once, where sgemm would first
     * copy all of it into packed panels; its output blocks split across the intra-op threads */
    mx__ksgemv_split(p->trans_b, g->n, g->k, p->alpha, a, b, g->has_c ? 1.0f : 0.0f, y);
    return MX_OK;
  }
  if (mx__ksgemm_threads(p->trans_a, p->trans_b, g->m, g->n, g->k, p->alpha, a, b, g->has_c ? 1.0f : 0.0f, y,
                         NULL, NULL))
    return MX_OK;
  cblas_sgemm(CblasRowMajor, p->trans_a ? CblasTrans : CblasNoTrans, p->trans_b ? CblasTrans : CblasNoTrans,
              (blasint)g->m, (blasint)g->n, (blasint)g->k, p->alpha, a, (blasint)(p->trans_a ? g->m : g->k),
              b, (blasint)(p->trans_b ? g->k : g->n), g->has_c ? 1.0f : 0.0f, y, (blasint)g->n);
  return MX_OK;
}

/* What a float32 Gemm's tiles on the own GEMM add: beta * C (broadcast; c NULL: none), then the
 * fused activation. */
typedef struct gemm_tile_ctx {
  const gemm_dims *g;
  const float *c;
  float beta;
  mm_epilogue e;
} gemm_tile_ctx;

static void gemm_own_tile_f32(const void *vctx, float *y, int64_t rows, int64_t ldc, int64_t row, int64_t col0,
                              int64_t cols) {
  const gemm_tile_ctx *t = vctx;
  if (t->c)
    for (int64_t i = 0; i < rows; i++) {
      const float *cr = t->c + (row + i) * t->g->c_s0 + col0 * t->g->c_s1;
      float *yr = y + i * ldc;
      for (int64_t j = 0; j < cols; j++) yr[j] += t->beta * cr[j * t->g->c_s1];
    }
  if (t->e.act != MX_MATMUL_ACT_NONE) mm_epi_block_f32(&t->e, y, rows, ldc, col0, cols);
}

/* Whether a float32 Gemm runs on the own GEMM: alpha 1 and A not transposed (what the packing
 * takes as it is). */
static bool gemm_own_pays(const mx_gemm_params *p, const gemm_dims *g) {
  return p->alpha == 1.0f && !p->trans_a && mx__kmm_own_pays(g->m, g->n, g->k, 0);
}

/* A float32 Gemm (Y float32) on the own GEMM with its C and activation on each tile; false: the
 * BLAS path computes it. */
static bool gemm_own_f32(mx_kernel_call *call, const gemm_dims *g, float *y) {
  const mx_gemm_params *p = call->params;
  if (!gemm_own_pays(p, g)) return false;
  gemm_tile_ctx t = {g, g->has_c ? call->t[2].data : NULL, p->beta,
                     {.bias = NULL, .bias_n = 0, .act = p->fused_act}};
  bool tile = t.c || t.e.act != MX_MATMUL_ACT_NONE;
  const float *bp = mx__kmm_prepacked_b(call, p->trans_b, g->k, g->n);
  return mx__kmm_own_run(1, g->m, g->n, g->k, call->t[0].data, call->t[1].data, p->trans_b, NULL, NULL, true, bp,
                         y, call->workspace, call->workspace_size, tile ? gemm_own_tile_f32 : NULL, &t);
}

static size_t gemm_float_workspace(const mx_kernel_call *call) {
  if (call->t[0].dtype != MX_FLOAT32 || !call->params) return 0;
  gemm_dims g;
  const mx_gemm_params *p = call->params;
  const mx_ktensor *a = &call->t[0], *b = &call->t[1];
  if (a->rank != 2 || b->rank != 2) return 0;
  g.m = a->dims[p->trans_a ? 1 : 0];
  g.k = a->dims[p->trans_a ? 0 : 1];
  g.n = b->dims[p->trans_b ? 0 : 1];
  if (!gemm_own_pays(p, &g)) return 0;
  return mx__kmm_own_workspace(g.m, g.n, g.k, true);
}

/* Gemm's B (a constant: the weights) pre-packed beside the model when the own GEMM runs it. */
size_t mx__kgemm_prepack(const mx_kernel_call *call, void *dst, mx_kernel_prepack_layout *layout) {
  const mx_gemm_params *p = call->params;
  const mx_ktensor *a = &call->t[0], *b = &call->t[1];
  if (!p || a->dtype != MX_FLOAT32 || b->dtype != MX_FLOAT32 || a->rank != 2 || b->rank != 2) return 0;
  gemm_dims g;
  g.m = a->dims[p->trans_a ? 1 : 0];
  g.k = a->dims[p->trans_a ? 0 : 1];
  g.n = b->dims[p->trans_b ? 0 : 1];
  if (b->dims[p->trans_b ? 1 : 0] != g.k || !gemm_own_pays(p, &g)) return 0;
  return mx__kmm_prepack_b(call, p->trans_b, g.k, g.n, dst, layout);
}

static mx_status gemm_run_f64(mx_kernel_call *call, const gemm_dims *g) {
  const mx_gemm_params *p = call->params;
  double *y = mx__kout(call, 0)->data;
  if (g->has_c) {
    const mx_ktensor *c = &call->t[2];
    for (int64_t i = 0; i < g->m; i++)
      for (int64_t j = 0; j < g->n; j++)
        y[i * g->n + j] = (double)p->beta * ((const double *)c->data)[i * g->c_s0 + j * g->c_s1];
  } else if (g->k == 0) {
    memset(y, 0, (size_t)(g->m * g->n) * sizeof *y);
  }
  if (g->k == 0) return MX_OK;
  mx__kblas_init();
  cblas_dgemm(CblasRowMajor, p->trans_a ? CblasTrans : CblasNoTrans, p->trans_b ? CblasTrans : CblasNoTrans,
              (blasint)g->m, (blasint)g->n, (blasint)g->k, (double)p->alpha, call->t[0].data,
              (blasint)(p->trans_a ? g->m : g->k), call->t[1].data, (blasint)(p->trans_b ? g->k : g->n),
              g->has_c ? 1.0 : 0.0, y, (blasint)g->n);
  return MX_OK;
}

/* Integer Gemm: exact integer products, then alpha/beta applied in double and truncated. */
static mx_status gemm_run_int(mx_kernel_call *call, const gemm_dims *g) {
  const mx_gemm_params *p = call->params;
  const mx_ktensor *a = &call->t[0], *b = &call->t[1];
  mx_ktensor *y = mx__kout(call, 0);
  int64_t sa_i = p->trans_a ? 1 : g->k, sa_k = p->trans_a ? g->m : 1;
  int64_t sb_k = p->trans_b ? 1 : g->n, sb_j = p->trans_b ? g->k : 1;
  for (int64_t i = 0; i < g->m; i++) {
    for (int64_t j = 0; j < g->n; j++) {
      uint64_t acc = 0;
      for (int64_t q = 0; q < g->k; q++)
        acc += (uint64_t)mx__kget_i64(a->data, a->dtype, i * sa_i + q * sa_k) *
               (uint64_t)mx__kget_i64(b->data, b->dtype, q * sb_k + j * sb_j);
      double v = (double)p->alpha * (double)(int64_t)acc;
      if (g->has_c)
        v += (double)p->beta *
             (double)mx__kget_i64(call->t[2].data, call->t[2].dtype, i * g->c_s0 + j * g->c_s1);
      mx__kset_i64(y->data, y->dtype, i * g->n + j, (int64_t)v);
    }
  }
  return MX_OK;
}

static mx_status gemm_run(mx_kernel_call *call) {
  gemm_dims g;
  mx_status st = gemm_make_dims(call, &g);
  if (st != MX_OK) return st;
  mx_ktensor *y = mx__kout(call, 0);
  if (g.m == 0 || g.n == 0) return MX_OK;
  /* A fused activation (mx_gemm_params.fused_act) runs as the MatMul epilogue without a bias. */
  const mx_gemm_params *gp = call->params;
  mm_epilogue e = {.bias = NULL, .bias_n = 0, .act = gp ? gp->fused_act : MX_MATMUL_ACT_NONE};
  bool act = e.act != MX_MATMUL_ACT_NONE;
  switch (y->dtype) {
    case MX_FLOAT32:
      if (g.k > 0 && gemm_own_f32(call, &g, y->data)) return MX_OK;
      st = gemm_run_f32(call, &g, call->t[0].data, call->t[1].data, y->data);
      if (st == MX_OK && act) mm_epilogue_f32(&e, y->data, g.m, g.n);
      return st;
    case MX_FLOAT64:
      st = gemm_run_f64(call, &g);
      if (st == MX_OK && act) mm_epilogue_f64(&e, y->data, g.m, g.n);
      return st;
    case MX_INT32:
    case MX_INT64:
      if (act) {
        call->why = "Gemm: a fused activation needs a float dtype";
        return MX_ERR_KERNEL;
      }
      return gemm_run_int(call, &g);
    case MX_FLOAT16:
    case MX_BFLOAT16: {
      int64_t na = mx__ktensor_numel(&call->t[0]), nb = mx__ktensor_numel(&call->t[1]);
      float *fa = call->workspace;
      float *fb = (float *)((char *)fa + mx__kalign64((size_t)na * 4));
      float *fy = (float *)((char *)fb + mx__kalign64((size_t)nb * 4));
      mx__khalf_to_f32(call->t[0].data, call->t[0].dtype, fa, na);
      mx__khalf_to_f32(call->t[1].data, call->t[1].dtype, fb, nb);
      st = gemm_run_f32(call, &g, fa, fb, fy);
      if (st == MX_OK && act) mm_epilogue_f32(&e, fy, g.m, g.n);
      if (st == MX_OK) mx__kf32_to_half(fy, y->dtype, y->data, g.m * g.n);
      return st;
    }
    default: return MX_ERR_UNSUPPORTED;
  }
}

static const mx_kernel_def k_gemm_float = {.op = "Gemm",
                                           .dtypes = MX_KDT(MX_FLOAT32) | MX_KDT(MX_FLOAT64),
                                           .key = 0,
                                           .run = gemm_run,
                                           .workspace = gemm_float_workspace};
static const mx_kernel_def k_gemm_half = {.op = "Gemm",
                                          .dtypes = MX_KDT(MX_FLOAT16) | MX_KDT(MX_BFLOAT16),
                                          .key = 0,
                                          .run = gemm_run,
                                          .workspace = half_workspace};
static const mx_kernel_def k_gemm_int = {
    .op = "Gemm", .dtypes = MX_KDT(MX_INT32) | MX_KDT(MX_INT64), .key = 0, .run = gemm_run};

const mx_kernel_def *const mx__kernels_linalg[] = {
    &k_matmul_float, &k_matmul_half,           &k_matmul_int,          &k_gemm_float, &k_gemm_half,
    &k_gemm_int,     &mx__kernel_einsum_float, &mx__kernel_einsum_int, NULL,
};
