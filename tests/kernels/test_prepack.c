/* Kernel tests of the pre-packed weights (kernels/prepack.h): a float32 Conv, MatMul and Gemm
 * run with a block from an executor-style cache give the same bits as without one, on 1 and 2
 * intra-op threads; the kernels really read the block (a block with its data zeroed changes the
 * result); a block packed from other weights, or handed to a call whose weights moved, is
 * ignored; paths without packed weights (depthwise, 1x1 on a 1x1 map) get no block; the cache
 * keeps one block per (weights, layout) and frees them all. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "graph/ops/conv_params.h"
#include "graph/ops/linalg_params.h"
#include "kernels/gemm_f32.h"
#include "kernels/kernel.h"
#include "kernels/kernels_support.h"
#include "kernels/prepack.h"
#include "kernels/threads.h"

TestSuite(prepack);

static uint32_t seed = 4242u;
static float *rnd_buf(int64_t n) { return ks_rnd_buf(&seed, n); }

/* Runs op on c (prepacked as set) on `threads` intra-op threads into y (ny floats), returns a copy. */
static float *run_copy(const char *op, mx_kernel_call *c, float *y, int64_t ny, int32_t threads) {
  memset(y, 0xff, (size_t)ny * sizeof *y);
  mx__kthreads_set(threads);
  mx_status st = kc_run(op, c);
  mx__kthreads_set(1);
  cr_assert_eq(st, MX_OK, "%s: %s", op, c->why ? c->why : "");
  float *out = malloc((size_t)ny * sizeof *out);
  memcpy(out, y, (size_t)ny * sizeof *out);
  return out;
}

static bool same(const float *a, const float *b, int64_t n) { return memcmp(a, b, (size_t)n * sizeof *a) == 0; }

/* Data bytes of a cached block (after its header). */
static size_t block_data_bytes(const void *block) {
  const mx_kprepack_hdr *h = block;
  return (size_t)h->bytes - MX_KPREPACK_HDR_BYTES;
}

/* The common checks of one call whose input 1 is the weights (wt, nw floats): with and without
 * the block, threads 1 and 2, a zeroed block is read, other weights' block ignored. */
static void check_call(const char *op, mx_kernel_call *c, float *wt, int64_t nw, float *y, int64_t ny,
                       bool expect_block) {
  const mx_kernel_def *kd = mx__kernel_find("", op, c);
  cr_assert_not_null(kd);
  mx_kprepack_cache cache = {0};
  c->prepacked = NULL;
  float *plain1 = run_copy(op, c, y, ny, 1), *plain2 = run_copy(op, c, y, ny, 2);
  cr_expect(same(plain1, plain2, ny), "%s: 1 and 2 threads differ without a block", op);
  const void *block = mx__kprepack_get(&cache, kd, c);
  if (!expect_block || !mx__kgemm_f32_available()) {
    cr_expect(!expect_block || !block, "%s: no own GEMM on this CPU, yet a block", op);
    cr_expect(expect_block || !block, "%s: a block for a path that reads no packed weights", op);
    mx__kprepack_cache_clear(&cache);
    free(plain1), free(plain2);
    return;
  }
  cr_assert_not_null(block, "%s: no block", op);
  cr_expect_eq(mx__kprepack_get(&cache, kd, c), block, "%s: a second request packs again", op);
  cr_expect_eq(cache.blocks, 1u);
  c->prepacked = block;
  float *packed1 = run_copy(op, c, y, ny, 1), *packed2 = run_copy(op, c, y, ny, 2);
  cr_expect(same(plain1, packed1, ny), "%s: pre-packed bits differ (1 thread)", op);
  cr_expect(same(plain2, packed2, ny), "%s: pre-packed bits differ (2 threads)", op);

  /* the kernel reads the block: zeroed packed weights change the result */
  size_t nb = block_data_bytes(block);
  unsigned char *saved = malloc(nb);
  memcpy(saved, mx__kprepack_data(block), nb);
  memset((unsigned char *)block + MX_KPREPACK_HDR_BYTES, 0, nb);
  float *zeroed = run_copy(op, c, y, ny, 1);
  cr_expect(!same(plain1, zeroed, ny), "%s: the block was not read", op);
  memcpy((unsigned char *)block + MX_KPREPACK_HDR_BYTES, saved, nb);

  /* other weights (a copy at another address, changed): the block made from wt is ignored */
  float *w2 = malloc((size_t)nw * sizeof *w2);
  for (int64_t i = 0; i < nw; i++) w2[i] = wt[i] * 0.5f - 0.25f;
  c->t[1].data = w2;
  float *other = run_copy(op, c, y, ny, 1);
  c->prepacked = NULL;
  float *other_plain = run_copy(op, c, y, ny, 1);
  cr_expect(same(other, other_plain, ny), "%s: a block of other weights was used", op);
  cr_expect(!same(other, plain1, ny), "%s: the changed weights changed nothing", op);
  /* a second constant gets its own block; both freed by the clear (LeakSanitizer) */
  const void *block2 = mx__kprepack_get(&cache, kd, c);
  cr_expect(block2 && block2 != block, "%s: other weights share a block", op);
  cr_expect_eq(cache.blocks, 2u);
  c->prepacked = block2;
  float *other_packed = run_copy(op, c, y, ny, 2);
  cr_expect(same(other_packed, other_plain, ny), "%s: the second block's bits differ", op);
  c->t[1].data = wt;
  c->prepacked = NULL;
  mx__kprepack_cache_clear(&cache);
  cr_expect_eq(cache.blocks, 0u);
  free(saved), free(w2), free(plain1), free(plain2), free(packed1), free(packed2), free(zeroed), free(other),
      free(other_plain), free(other_packed);
}

typedef struct ccase {
  int64_t n, c, h, w, m, group, k, s, pad;
  bool block; /* a path that reads packed weights */
} ccase;

static void conv_case(const ccase *k) {
  const int64_t oh = (k->h + 2 * k->pad - k->k) / k->s + 1, ow = (k->w + 2 * k->pad - k->k) / k->s + 1;
  const int64_t nx = k->n * k->c * k->h * k->w, nw = k->m * (k->c / k->group) * k->k * k->k;
  const int64_t ny = k->n * k->m * oh * ow;
  float *x = rnd_buf(nx), *wt = rnd_buf(nw), *b = rnd_buf(k->m), *y = malloc((size_t)ny * sizeof *y);
  mx_conv_params p;
  memset(&p, 0, sizeof p);
  p.op = MX_CONVOP_CONV;
  p.group = k->group;
  p.n_strides = p.n_dilations = 2;
  p.strides[0] = p.strides[1] = k->s;
  p.dilations[0] = p.dilations[1] = 1;
  p.n_pads = 4;
  for (int i = 0; i < 4; i++) p.pads[i] = k->pad;
  p.fused_act = MX_CONV_ACT_RELU;
  mx_kernel_call *c = kc_new(3, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 4, DIMS(k->n, k->c, k->h, k->w), x);
  kc_set(c, 1, MX_FLOAT32, 4, DIMS(k->m, k->c / k->group, k->k, k->k), wt);
  kc_set(c, 2, MX_FLOAT32, 1, DIMS(k->m), b);
  kc_set(c, 3, MX_FLOAT32, 4, DIMS(k->n, k->m, oh, ow), y);
  check_call("Conv", c, wt, nw, y, ny, k->block);
  free(x), free(wt), free(b), free(y), free(c);
}

Test(prepack, conv_same_bits_with_and_without_the_block) {
  static const ccase cases[] = {
      /* n  c   h   w   m   g  k  s pad block */
      {1, 16, 30, 30, 32, 1, 3, 1, 1, true}, /* im2col in bands */
      {1, 64, 7, 7, 96, 1, 3, 1, 1, true},   /* a 7x7 map: narrow products, 32-row panels */
      {2, 32, 9, 9, 48, 1, 1, 1, 0, true},   /* pointwise, two images */
      {1, 12, 10, 10, 24, 2, 3, 1, 1, true}, /* grouped */
      {1, 3, 33, 33, 16, 1, 7, 2, 3, true},  /* a stem, 7x7 stride 2 */
      {1, 16, 12, 12, 16, 16, 3, 1, 1, false}, /* depthwise: reads the weights directly */
      {1, 32, 1, 1, 64, 1, 1, 1, 0, false},  /* 1x1 on a 1x1 map: a matrix-vector product */
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) conv_case(&cases[i]);
}

static void matmul_case(int64_t batch, int64_t m, int64_t k, int64_t n, int trans_b) {
  const int64_t na = batch * m * k, nw = k * n, ny = batch * m * n;
  float *a = rnd_buf(na), *wt = rnd_buf(nw), *y = malloc((size_t)ny * sizeof *y);
  mx_matmul_params p = {.trans_b = trans_b};
  mx_kernel_call *c = kc_new(2, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 3, DIMS(batch, m, k), a);
  if (trans_b)
    kc_set(c, 1, MX_FLOAT32, 2, DIMS(n, k), wt);
  else
    kc_set(c, 1, MX_FLOAT32, 2, DIMS(k, n), wt);
  kc_set(c, 2, MX_FLOAT32, 3, DIMS(batch, m, n), y);
  check_call("MatMul", c, wt, nw, y, ny, true);
  free(a), free(wt), free(y), free(c);
}

Test(prepack, matmul_same_bits_with_and_without_the_block) {
  matmul_case(1, 37, 64, 80, 0);
  matmul_case(3, 20, 96, 50, 0); /* a batch folded into one product, a last panel half full */
  matmul_case(2, 64, 128, 256, 1); /* B stored transposed */
}

Test(prepack, gemm_same_bits_with_and_without_the_block) {
  const int64_t m = 45, k = 72, n = 100;
  for (int tb = 0; tb < 2; tb++) {
    float *a = rnd_buf(m * k), *wt = rnd_buf(k * n), *cc = rnd_buf(n), *y = malloc((size_t)(m * n) * sizeof *y);
    mx_gemm_params p = {.alpha = 1.0f, .beta = 0.5f, .trans_b = tb};
    mx_kernel_call *c = kc_new(3, 1, &p);
    kc_set(c, 0, MX_FLOAT32, 2, DIMS(m, k), a);
    if (tb)
      kc_set(c, 1, MX_FLOAT32, 2, DIMS(n, k), wt);
    else
      kc_set(c, 1, MX_FLOAT32, 2, DIMS(k, n), wt);
    kc_set(c, 2, MX_FLOAT32, 1, DIMS(n), cc);
    kc_set(c, 3, MX_FLOAT32, 2, DIMS(m, n), y);
    check_call("Gemm", c, wt, k * n, y, m * n, true);
    free(a), free(wt), free(cc), free(y), free(c);
  }
}

/* A block of one layout is never read by a call of another (same weights pointer, other dims). */
Test(prepack, a_block_of_other_shapes_is_ignored) {
  if (!mx__kgemm_f32_available()) return;
  const int64_t m = 30, k = 64, n = 64;
  float *a = rnd_buf(m * k), *wt = rnd_buf(k * n), *y = malloc((size_t)(m * n) * sizeof *y);
  mx_kernel_call *c = kc_new(2, 1, NULL);
  kc_set(c, 0, MX_FLOAT32, 2, DIMS(m, k), a);
  kc_set(c, 1, MX_FLOAT32, 2, DIMS(k, n), wt);
  kc_set(c, 2, MX_FLOAT32, 2, DIMS(m, n), y);
  const mx_kernel_def *kd = mx__kernel_find("", "MatMul", c);
  mx_kprepack_cache cache = {0};
  c->prepacked = mx__kprepack_get(&cache, kd, c);
  cr_assert_not_null(c->prepacked);
  /* the same bytes read as B [32, 128] with A [30, 32] */
  kc_set(c, 0, MX_FLOAT32, 2, DIMS(m, 32), a);
  kc_set(c, 1, MX_FLOAT32, 2, DIMS(32, 128), wt);
  kc_set(c, 2, MX_FLOAT32, 2, DIMS(m, 128), y);
  float *y2 = malloc((size_t)(m * 128) * sizeof *y2);
  c->t[2].data = y2;
  float *with = run_copy("MatMul", c, y2, m * 128, 1);
  c->prepacked = NULL;
  float *without = run_copy("MatMul", c, y2, m * 128, 1);
  cr_expect(same(with, without, m * 128), "a block of another layout was read");
  mx__kprepack_cache_clear(&cache);
  free(a), free(wt), free(y), free(y2), free(with), free(without), free(c);
}
