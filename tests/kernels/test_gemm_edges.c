/* Kernel tests of the own float32 GEMM's edge tiles (kernels/gemm_f32.c): products whose m and n
 * leave partial tiles (1, 13, 14, 15, 31, 32, 33, 49 and 196 rows and columns: a tile of fewer
 * than 14 rows, a panel of fewer than 32 or 16 columns, a narrow product run transposed with a
 * last column group of fewer than 14) give, with B packed or read in place, the weights packed
 * per product or ahead (in the product's own row panels or in those of the other way round), and a bias + residual + Relu or Clip epilogue, the bits of the AVX2 copy
 * (one FMA chain per output in k order on both), near a double reference; and they write nothing
 * outside their m x n outputs of a wider C. Skipped where the CPU has no AVX-512 copy. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/gemm_f32.h"
#include "kernels/kernels_support.h"

static void restore(void) { mx__kgemm_f32_use(0); }

TestSuite(gemm_edges, .fini = restore);

static uint32_t seed = 8086u;

/* C = A x B then e, with the copy `level`, B packed (strided 0) or read in place, A packed per
 * product (pre 0), ahead in the product's own row panels (1) or in those of the other way round
 * (2: 32-row panels of a narrow product for a wide one and back, as a Conv's last band of a few
 * columns reads the weights packed for its first); C has row stride ldc (ldc - n sentinel floats past every row, and a sentinel row). */
static void product(int level, int strided, int pre, int64_t m, int64_t n, int64_t k, const float *a,
                    const float *b, float *c, int64_t ldc, const mx_kgemm_f32_epilogue *e) {
  cr_assert_eq(mx__kgemm_f32_use(level), level);
  float *bp = aligned_alloc(64, (mx__kgemm_f32_packed_b_floats(k, n) * 4 + 64) / 64 * 64);
  float *as = aligned_alloc(64, (mx__kgemm_f32_a_floats(m) * 4 + 63) / 64 * 64);
  const int64_t own = mx__kgemm_f32_row_granule(m, n), mr = pre == 2 ? (own == MX_KGEMM_NR ? 14 : MX_KGEMM_NR) : own;
  float *ap = aligned_alloc(64, (mx__kgemm_f32_pre_a_floats(m, k, mr) * 4 + 63) / 64 * 64);
  cr_assert(bp && as && ap);
  for (int64_t r = 0; r < k; r++) mx__kgemm_f32_pack_b_row(b + r * n, n, k, r, bp);
  mx__kgemm_f32_pre_a_pack(a, k, m, k, mr, 0, m, ap);
  const mx_kgemm_f32_pre_a pa = {ap, mr, (m + mr - 1) / mr * mr, 0};
  for (int64_t i = 0; i < (m + 1) * ldc; i++) c[i] = 1234.5f;
  mx__kgemm_f32_epi_pre(m, n, k, a, k, pre ? &pa : NULL, strided ? b : bp, strided ? n : 0, c, ldc, as, e);
  free(bp);
  free(as);
  free(ap);
}

static void check(int64_t m, int64_t n, int64_t k, int32_t act) {
  float *a = ks_rnd_buf(&seed, m * k), *b = ks_rnd_buf(&seed, k * n), *bias = ks_rnd_buf(&seed, m);
  const int64_t ldc = n + 3;
  float *z = ks_rnd_buf(&seed, m * ldc), *want = ks_rnd_buf(&seed, (m + 1) * ldc), *got = ks_rnd_buf(&seed, (m + 1) * ldc);
  const mx_kgemm_f32_epilogue e = {bias, z, ldc, act, -0.25f, 0.5f};
  product(2, 0, 0, m, n, k, a, b, want, ldc, &e);
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double acc = 0.0, mag = 0.0;
      for (int64_t p = 0; p < k; p++) {
        acc += (double)a[i * k + p] * b[p * n + j];
        mag += fabs((double)a[i * k + p] * b[p * n + j]);
      }
      double v = (acc + bias[i]) + z[i * ldc + j];
      v = act == MX_KGEMM_ACT_RELU ? (v > 0.0 ? v : 0.0) : (v < -0.25 ? -0.25 : v > 0.5 ? 0.5 : v);
      const double tol = 1e-6 * (mag + fabs(bias[i]) + fabs(z[i * ldc + j])) + 1e-6;
      cr_expect(fabs(want[i * ldc + j] - v) <= tol, "%lldx%lldx%lld at (%lld, %lld): %g, want %g", (long long)m,
                (long long)n, (long long)k, (long long)i, (long long)j, want[i * ldc + j], v);
    }
  for (int strided = 0; strided < 2; strided++)
    for (int pre = 0; pre < 3; pre++) {
      if (pre == 2 && n > 64) continue; /* only products of n <= 64 may run transposed */
      product(3, strided, pre, m, n, k, a, b, got, ldc, &e);
      cr_expect(memcmp(want, got, (size_t)((m + 1) * ldc) * 4) == 0,
                "%lldx%lldx%lld (B %s, A %s, act %d): AVX-512 and AVX2 differ, or outputs past n written",
                (long long)m, (long long)n, (long long)k, strided ? "in place" : "packed", pre == 2 ? "pre-packed the other way" : pre ? "pre-packed" : "per product",
                act);
    }
  for (int64_t j = n; j < ldc; j++) cr_expect_eq(got[j], 1234.5f, "column %lld past n written", (long long)j);
  for (int64_t j = 0; j < ldc; j++) cr_expect_eq(got[m * ldc + j], 1234.5f, "row m written");
  free(a);
  free(b);
  free(bias);
  free(z);
  free(want);
  free(got);
}

Test(gemm_edges, partial_tiles_match_avx2_bits_and_double) {
  if (mx__kgemm_f32_use(3) != 3) cr_skip_test("no AVX-512 copy on this CPU");
  static const int64_t sizes[] = {1, 13, 14, 15, 31, 32, 33, 49, 196};
  static const int64_t ks[] = {1, 14, 33};
  const int ns = (int)(sizeof sizes / sizeof sizes[0]);
  for (int i = 0; i < ns; i++)
    for (int j = 0; j < ns; j++)
      for (int q = 0; q < 3; q++)
        check(sizes[i], sizes[j], ks[q], (i + j + q) % 2 ? MX_KGEMM_ACT_RELU : MX_KGEMM_ACT_CLIP);
}

Test(gemm_edges, partial_tiles_over_several_k_blocks) {
  if (mx__kgemm_f32_use(3) != 3) cr_skip_test("no AVX-512 copy on this CPU");
  /* k past one or several 256 blocks: partial sums of edge tiles stored and loaded again */
  static const int64_t shapes[][3] = {{15, 49, 300}, {64, 49, 520}, {13, 196, 257}, {130, 33, 600},
                                      {512, 49, 600}, {100, 7, 260}, {33, 31, 513}, {1, 196, 300}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    check(shapes[s][0], shapes[s][1], shapes[s][2], s % 2 ? MX_KGEMM_ACT_RELU : MX_KGEMM_ACT_CLIP);
}
