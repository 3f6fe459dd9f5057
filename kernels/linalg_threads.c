/* MatMul and Gemm on the intra-op thread pool (kernels/threads.h): a large float32 product is
 * cut into bands of output rows (or, when there are too few rows, of output columns), one
 * single-threaded OpenBLAS sgemm per band, the bands taken by the pool's threads; a one-row
 * product (a classifier head at batch 1) in fixed blocks of outputs, one sgemv per block. OpenBLAS stays
 * at one thread (mx__kblas_init), so its own threads never compete with the pool's for the
 * cores. Every output element is still one sgemm's dot product over the whole of k, so a band
 * computes what the one large call computes. */
#include <cblas.h>

#include "kernels/linalg_impl.h"
#include "kernels/threads.h"

/* Below this many multiply-adds (about 40 us on one core) handing bands to other threads costs
 * more than it saves. */
#define PAR_MIN_MACS ((int64_t)1 << 21)
/* Bands are whole multiples of these (the sgemm micro-kernels' row and column blocks). */
#define ROW_QUANTUM 8
#define COL_QUANTUM 16

typedef struct sgemm_job {
  int ta, tb;
  int64_t m, n, k;
  float alpha, beta;
  const float *a, *b;
  float *c;
  bool by_rows;
  int64_t band; /* rows or columns per task */
  mx_ksgemm_rows_fn rows_done;
  const void *rows_ctx;
} sgemm_job;

static void sgemm_task(void *ctx, int64_t task, int32_t slot) {
  const sgemm_job *j = ctx;
  (void)slot;
  int64_t lda = j->ta ? j->m : j->k, ldb = j->tb ? j->k : j->n;
  int64_t first = task * j->band;
  if (j->by_rows) {
    int64_t rows = j->m - first < j->band ? j->m - first : j->band;
    /* Row r of op(A) is row r of A, or column r of a transposed A. */
    const float *a = j->ta ? j->a + first : j->a + first * j->k;
    float *c = j->c + first * j->n;
    cblas_sgemm(CblasRowMajor, j->ta ? CblasTrans : CblasNoTrans, j->tb ? CblasTrans : CblasNoTrans,
                (blasint)rows, (blasint)j->n, (blasint)j->k, j->alpha, a, (blasint)lda, j->b, (blasint)ldb,
                j->beta, c, (blasint)j->n);
    if (j->rows_done) j->rows_done(j->rows_ctx, c, rows, j->n);
  } else {
    int64_t cols = j->n - first < j->band ? j->n - first : j->band;
    /* Column q of op(B) is column q of B, or row q of a transposed B. */
    const float *b = j->tb ? j->b + first * j->k : j->b + first;
    cblas_sgemm(CblasRowMajor, j->ta ? CblasTrans : CblasNoTrans, j->tb ? CblasTrans : CblasNoTrans,
                (blasint)j->m, (blasint)cols, (blasint)j->k, j->alpha, j->a, (blasint)lda, b, (blasint)ldb,
                j->beta, j->c + first, (blasint)j->n);
  }
}

bool mx__ksgemm_threads(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                        const float *b, float beta, float *c, mx_ksgemm_rows_fn rows_done,
                        const void *rows_ctx) {
  int32_t slots = mx__kthreads();
  if (slots <= 1 || m < 2 || n < 2 || k < 1 || m * n * k < PAR_MIN_MACS) return false;
  sgemm_job j = {ta, tb, m, n, k, alpha, beta, a, b, c, true, 0, rows_done, rows_ctx};
  /* Rows when every thread gets at least two row blocks; columns otherwise (a few rows, many
   * columns: the projections of a short sequence). The epilogue needs row bands. */
  int64_t tasks;
  if (m >= 2 * ROW_QUANTUM * slots || (rows_done && m >= 2 * slots)) {
    int64_t per = (m + slots - 1) / slots;
    j.band = (per + ROW_QUANTUM - 1) / ROW_QUANTUM * ROW_QUANTUM;
    if (j.band > m) j.band = m;
    tasks = (m + j.band - 1) / j.band;
  } else if (!rows_done && n >= 2 * COL_QUANTUM * slots) {
    j.by_rows = false;
    int64_t per = (n + slots - 1) / slots;
    j.band = (per + COL_QUANTUM - 1) / COL_QUANTUM * COL_QUANTUM;
    tasks = (n + j.band - 1) / j.band;
  } else {
    return false;
  }
  if (tasks < 2) return false;
  mx__kblas_init();
  mx__kparallel(tasks, slots, sgemm_task, &j);
  return true;
}

/* Outputs per task of a one-row product (sgemv_split): the same blocks on any thread count, so
 * each output is computed by the same sgemv call shape and its bits never depend on the pool. */
#define GEMV_BLOCK 128
/* Below this many weight bytes streamed (the work is memory-bound: each weight is read once)
 * a handoff costs more than the second core's bandwidth saves. */
#define GEMV_PAR_MIN_BYTES ((int64_t)512 * 1024)

typedef struct sgemv_job {
  int tb;
  int64_t n, k;
  float alpha, beta;
  const float *a, *b;
  float *y;
} sgemv_job;

/* Outputs [j0, j0 + cols) of y = alpha a op(B) + beta y: rows j0.. of a transposed B ([n, k]),
 * columns j0.. of a plain one ([k, n]). */
static void sgemv_block(const sgemv_job *j, int64_t j0, int64_t cols) {
  if (j->tb)
    cblas_sgemv(CblasRowMajor, CblasNoTrans, (blasint)cols, (blasint)j->k, j->alpha, j->b + j0 * j->k,
                (blasint)j->k, j->a, 1, j->beta, j->y + j0, 1);
  else
    cblas_sgemv(CblasRowMajor, CblasTrans, (blasint)j->k, (blasint)cols, j->alpha, j->b + j0, (blasint)j->n,
                j->a, 1, j->beta, j->y + j0, 1);
}

static void sgemv_task(void *ctx, int64_t task, int32_t slot) {
  (void)slot;
  const sgemv_job *j = ctx;
  const int64_t j0 = task * GEMV_BLOCK;
  sgemv_block(j, j0, j->n - j0 < GEMV_BLOCK ? j->n - j0 : GEMV_BLOCK);
}

void mx__ksgemv_split(int tb, int64_t n, int64_t k, float alpha, const float *a, const float *b, float beta,
                      float *y) {
  sgemv_job j = {tb, n, k, alpha, beta, a, b, y};
  const int64_t tasks = (n + GEMV_BLOCK - 1) / GEMV_BLOCK;
  mx__kblas_init();
  if (mx__kthreads() > 1 && tasks > 1 && n * k * (int64_t)sizeof(float) >= GEMV_PAR_MIN_BYTES) {
    mx__kparallel(tasks, mx__kthreads(), sgemv_task, &j);
    return;
  }
  for (int64_t t = 0; t < tasks; t++) sgemv_task(&j, t, 0);
}

bool mx__kparallel_large(int64_t n_tasks, int64_t macs, mx_ktask_fn fn, void *ctx) {
  int32_t slots = mx__kthreads();
  if (slots <= 1 || n_tasks < 2 || macs < PAR_MIN_MACS) return false;
  mx__kblas_init();
  mx__kparallel(n_tasks, slots, fn, ctx);
  return true;
}
