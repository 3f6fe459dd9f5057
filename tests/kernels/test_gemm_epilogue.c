/* Kernel tests of the epilogue the own float32 GEMM applies in its store
 * (mx__kgemm_f32_epi_pre, kernels/gemm_f32.c): bias, residual, Relu, Clip and HardSwish, in registers on the
 * AVX-512 copy's whole tiles and after the store elsewhere (edge tiles, narrow products, the
 * AVX2 copy), give the bits of the product followed by the epilogue one output at a time, with
 * B packed or read in place, for every combination of bias / residual / activation, residuals
 * holding -0, NaN and values at the clip bounds. Skipped where the CPU has neither copy. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/gemm_f32.h"
#include "kernels/kernels_support.h"

static void restore(void) { mx__kgemm_f32_use(0); }

TestSuite(gemm_epilogue, .fini = restore);

static uint32_t seed = 31337u;

static float *rnd_buf(int64_t n) { return ks_rnd_buf(&seed, n); }

/* The epilogue one output at a time, as mx_kgemm_f32_epilogue states it. */
static float epi_one(float v, const mx_kgemm_f32_epilogue *e, int64_t i, int64_t j) {
  const float bias = e->bias ? e->bias[i] : 0.0f;
  if (e->z)
    v = (v + bias) + e->z[i * e->ldz + j];
  else if (bias != 0.0f)
    v = v + bias;
  if (e->act == MX_KGEMM_ACT_RELU) v = v > 0.0f ? v : 0.0f;
  if (e->act == MX_KGEMM_ACT_CLIP) {
    v = v < e->lo ? e->lo : v;
    v = v > e->hi ? e->hi : v;
  }
  if (e->act == MX_KGEMM_ACT_HARD_SWISH) {
    float t = v * (1.0f / 6.0f);
    t = t + 0.5f;
    t = t < 0.0f ? 0.0f : t;
    t = t > 1.0f ? 1.0f : t;
    v = v * t;
  }
  return v;
}

static void check_shape(int level, int64_t m, int64_t n, int64_t k) {
  mx__kgemm_f32_use(level);
  float *a = rnd_buf(m * k), *b = rnd_buf(k * n), *bias = rnd_buf(m), *z = rnd_buf(m * n);
  /* a 0 bias (no add: -0 stays -0), and special residuals */
  bias[0] = 0.0f;
  for (int64_t i = 0; i < m * n; i += 7) z[i] = -0.0f;
  for (int64_t i = 3; i < m * n; i += 29) z[i] = NAN;
  for (int64_t i = 5; i < m * n; i += 31) z[i] = 0.5f;
  float *want = malloc((size_t)(m * n) * 4), *got = malloc((size_t)(m * n) * 4);
  float *bp = aligned_alloc(64, (mx__kgemm_f32_packed_b_floats(k, n) * 4 + 64) / 64 * 64);
  float *as = aligned_alloc(64, (mx__kgemm_f32_a_floats(m) * 4 + 63) / 64 * 64);
  cr_assert(want && got && bp && as);
  for (int64_t r = 0; r < k; r++) mx__kgemm_f32_pack_b_row(b + r * n, n, k, r, bp);
  float *plain = malloc((size_t)(m * n) * 4);
  cr_assert(plain);
  mx__kgemm_f32_packed(m, n, k, a, k, bp, plain, n, as, NULL, NULL);
  for (int use_bias = 0; use_bias < 2; use_bias++)
    for (int use_z = 0; use_z < 2; use_z++)
      for (int32_t act = MX_KGEMM_ACT_NONE; act <= MX_KGEMM_ACT_HARD_SWISH; act++)
        for (int strided = 0; strided < 2; strided++) {
          const mx_kgemm_f32_epilogue e = {use_bias ? bias : NULL, use_z ? z : NULL, n, act, -0.25f, 0.5f};
          for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) want[i * n + j] = epi_one(plain[i * n + j], &e, i, j);
          for (int64_t i = 0; i < m * n; i++) got[i] = NAN;
          mx__kgemm_f32_epi_pre(m, n, k, a, k, NULL, strided ? b : bp, strided ? n : 0, got, n, as, &e);
          cr_expect(memcmp(want, got, (size_t)(m * n) * 4) == 0,
                    "copy %d, %lldx%lldx%lld, bias %d, residual %d, act %d, strided %d: other bits", level,
                    (long long)m, (long long)n, (long long)k, use_bias, use_z, act, strided);
        }
  free(a);
  free(b);
  free(bias);
  free(z);
  free(want);
  free(got);
  free(bp);
  free(as);
  free(plain);
}

Test(gemm_epilogue, in_the_store_gives_the_bits_of_a_pass_after) {
  if (!mx__kgemm_f32_available()) cr_skip_test("no AVX-512 or AVX2 copy on this CPU");
  /* whole tiles, edge rows and columns, a half panel, narrow (transposed), k past a block */
  static const int64_t shapes[][3] = {{28, 64, 40}, {29, 70, 300}, {14, 16, 9}, {100, 49, 260},
                                      {45, 96, 513}, {1, 1, 1},    {20, 20, 20}};
  for (int level = 3; level >= 2; level--)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
      check_shape(level, shapes[s][0], shapes[s][1], shapes[s][2]);
}
