/* The Winograd core's tile transforms with one tile per AVX-512 lane (see
 * kernels/conv_winograd_lanes.h).
 *
 * The plain transforms in kernels/conv_winograd.c handle a tile's six columns one float at a
 * time, from a zero-padded copy of the six image rows: each tile's points are combinations of
 * neighbouring floats of one row, which a loop over tiles cannot vectorize, and the products'
 * panels or the output rows they feed are strided. Here 16 tiles of a tile row are handled at
 * once: the image rows are read in place (masked loads give the zeros outside the image), the
 * transform's row pass runs on whole vectors, its floats are deinterleaved by 4 with permutes, so lane j of vector i holds float 4j + i (the i-th column of tile j), the
 * transform runs lane-wise, and the results go out as whole vectors (the input side into the
 * panels, where consecutive tiles are consecutive floats; the output side re-interleaved into
 * output rows). Every point is the same sequence of operations as in the plain code (C11 mode:
 * no FMA contraction), so the bits are the same. */
#include "kernels/conv_winograd_lanes.h"

#include "kernels/gemm_f32.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define TARGET __attribute__((target("avx512f")))

/* Lanes [0, n) of 16 (n may be negative or above 16). */
TARGET static inline __mmask16 first_lanes(int64_t n) {
  return n <= 0 ? (__mmask16)0 : n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1u);
}

/* B^T d of six lane vectors, in the operation order of the plain WINO_BT. */
#define BT_LANES(d0, d1, d2, d3, d4, d5, o)                                                          \
  do {                                                                                             \
    const __m512 four = _mm512_set1_ps(4.0f), five = _mm512_set1_ps(5.0f), two = _mm512_set1_ps(2.0f); \
    o[0] = _mm512_add_ps(_mm512_sub_ps(_mm512_mul_ps(four, d0), _mm512_mul_ps(five, d2)), d4);      \
    o[1] = _mm512_sub_ps(_mm512_add_ps(d3, d4), _mm512_mul_ps(four, _mm512_add_ps(d1, d2)));        \
    o[2] = _mm512_add_ps(_mm512_sub_ps(d4, d3), _mm512_mul_ps(four, _mm512_sub_ps(d1, d2)));        \
    o[3] = _mm512_add_ps(_mm512_sub_ps(d4, d2), _mm512_mul_ps(two, _mm512_sub_ps(d3, d1)));         \
    o[4] = _mm512_sub_ps(_mm512_sub_ps(d4, d2), _mm512_mul_ps(two, _mm512_sub_ps(d3, d1)));         \
    o[5] = _mm512_add_ps(_mm512_sub_ps(_mm512_mul_ps(four, d1), _mm512_mul_ps(five, d3)), d5);      \
  } while (0)

/* A^T m of six lane vectors, in the operation order of the plain WINO_AT. */
#define AT_LANES(m0, m1, m2, m3, m4, m5, o0, o1, o2, o3)                                             \
  do {                                                                                             \
    const __m512 s12 = _mm512_add_ps(m1, m2), d12 = _mm512_sub_ps(m1, m2);                         \
    const __m512 s34 = _mm512_add_ps(m3, m4), d34 = _mm512_sub_ps(m3, m4);                         \
    o0 = _mm512_add_ps(_mm512_add_ps(m0, s12), s34);                                               \
    o1 = _mm512_add_ps(d12, _mm512_mul_ps(_mm512_set1_ps(2.0f), d34));                             \
    o2 = _mm512_add_ps(s12, _mm512_mul_ps(_mm512_set1_ps(4.0f), s34));                             \
    o3 = _mm512_add_ps(_mm512_add_ps(d12, _mm512_mul_ps(_mm512_set1_ps(8.0f), d34)), m5);          \
  } while (0)

/* Lanes [lo, hi) of 16 floats whose lane 0 is image column col0 of row `row` (lo > 0: the
 * columns left of the image, which are zero; the load starts at the row's first column). */
TARGET static inline __m512 image_lanes(const float *row, int64_t col0, int64_t lo, int64_t hi) {
  if (lo == 0) return _mm512_maskz_loadu_ps(first_lanes(hi), row + col0);
  const __m512 v = _mm512_maskz_loadu_ps(first_lanes(hi - lo), row + col0 + lo);
  const __m512i back = _mm512_sub_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                        _mm512_set1_epi32((int)lo));
  return _mm512_maskz_permutexvar_ps((__mmask16)(first_lanes(hi) & ~first_lanes(lo)), back, v);
}

/* Floats of a row of the row transform: 16 tiles' 66 columns, in whole vectors. */
#define T1_LD 80

TARGET static void input_segment(const float *xc, int64_t h, int64_t w, int64_t ih0, int64_t x0, int64_t tw,
                                 float *v, int64_t vstride, int64_t c, int64_t ch, int64_t t0) {
  /* even/odd quarters: floats 4j + {0, 1} (or {2, 3}) of two vectors, j < 8 */
  const __m512i pick01 = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 1, 5, 9, 13, 17, 21, 25, 29);
  const __m512i pick23 = _mm512_setr_epi32(2, 6, 10, 14, 18, 22, 26, 30, 3, 7, 11, 15, 19, 23, 27, 31);
  /* the next tile's column 0 (1): lane j + 1, the 16th tile's from the fifth vector */
  const __m512i next0 = _mm512_setr_epi32(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16);
  const __m512i next1 = _mm512_setr_epi32(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 17);
  const int64_t panel = c * MX_KGEMM_NR;
  float t1[6 * T1_LD] __attribute__((aligned(64)));
  const float *rows[6];
  for (int i = 0; i < 6; i++) rows[i] = ih0 + i >= 0 && ih0 + i < h ? xc + (ih0 + i) * w : NULL;
  for (int64_t tc = 0; tc < tw; tc += 16) {
    const int64_t n = tw - tc < 16 ? tw - tc : 16, avail = 4 * n + 2;
    /* B^T along the rows: the six image rows' columns the 16 tiles read, zero outside the image */
    for (int64_t vi = 0; vi < 5 && 16 * vi < avail; vi++) {
      const int64_t col0 = x0 + 4 * tc + 16 * vi, right = avail - 16 * vi < w - col0 ? avail - 16 * vi : w - col0;
      const int64_t lo = col0 >= 0 ? 0 : -col0 > 16 ? 16 : -col0, hi = right < 0 ? 0 : right > 16 ? 16 : right;
      __m512 d[6];
      for (int i = 0; i < 6; i++)
        d[i] = rows[i] && lo < hi ? image_lanes(rows[i], col0, lo, hi) : _mm512_setzero_ps();
      __m512 o[6];
      BT_LANES(d[0], d[1], d[2], d[3], d[4], d[5], o);
      for (int k = 0; k < 6; k++) _mm512_store_ps(t1 + k * T1_LD + 16 * vi, o[k]);
    }
    /* where the n tiles' points go: up to the end of their panel, then the next panel */
    const int64_t t = t0 + tc, pos = t % MX_KGEMM_NR;
    const int64_t first = MX_KGEMM_NR - pos < n ? MX_KGEMM_NR - pos : n;
    const __mmask16 m1 = first_lanes(first), m2 = (__mmask16)(first_lanes(n) & ~m1);
    float *base1 = v + (t / MX_KGEMM_NR) * panel + ch * MX_KGEMM_NR + pos;
    float *base2 = v + (t / MX_KGEMM_NR + 1) * panel + ch * MX_KGEMM_NR; /* lane `first` lands here */
    /* B^T along each tile's columns */
    for (int k = 0; k < 6; k++) {
      const float *p = t1 + k * T1_LD;
      const __m512 a0 = _mm512_maskz_loadu_ps(first_lanes(avail), p);
      const __m512 a1 = _mm512_maskz_loadu_ps(first_lanes(avail - 16), p + 16);
      const __m512 a2 = _mm512_maskz_loadu_ps(first_lanes(avail - 32), p + 32);
      const __m512 a3 = _mm512_maskz_loadu_ps(first_lanes(avail - 48), p + 48);
      const __m512 a4 = _mm512_maskz_loadu_ps(first_lanes(avail - 64), p + 64);
      const __m512 x01 = _mm512_permutex2var_ps(a0, pick01, a1), y01 = _mm512_permutex2var_ps(a2, pick01, a3);
      const __m512 x23 = _mm512_permutex2var_ps(a0, pick23, a1), y23 = _mm512_permutex2var_ps(a2, pick23, a3);
      const __m512 d0 = _mm512_shuffle_f32x4(x01, y01, 0x44), d1 = _mm512_shuffle_f32x4(x01, y01, 0xEE);
      const __m512 d2 = _mm512_shuffle_f32x4(x23, y23, 0x44), d3 = _mm512_shuffle_f32x4(x23, y23, 0xEE);
      const __m512 d4 = _mm512_permutex2var_ps(d0, next0, a4), d5 = _mm512_permutex2var_ps(d1, next1, a4);
      __m512 o[6];
      BT_LANES(d0, d1, d2, d3, d4, d5, o);
      for (int l = 0; l < 6; l++) {
        const size_t at = (size_t)(k * 6 + l) * (size_t)vstride;
        _mm512_mask_storeu_ps(base1 + at, m1, o[l]);
        if (m2) _mm512_mask_storeu_ps(base2 + at - first, m2, o[l]);
      }
    }
  }
}

TARGET static void output_rows(const float *mo, int64_t mstride, int64_t tw, float *out, int64_t ld) {
  /* pairs (o0, o1) of lanes 0..7 and 8..15; then pairs of pairs, 4 tiles per vector */
  const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  const __m512i q01 = _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11);
  const __m512i q23 = _mm512_setr_epi64(4, 12, 5, 13, 6, 14, 7, 15);
  for (int64_t tc = 0; tc < tw; tc += 16) {
    const int64_t n = tw - tc < 16 ? tw - tc : 16;
    const __mmask16 lanes = first_lanes(n);
    /* A^T along the point index k: s[a * 6 + l] */
    __m512 s[24];
    for (int l = 0; l < 6; l++) {
      const float *m = mo + (size_t)l * (size_t)mstride + tc;
      const size_t st = 6 * (size_t)mstride;
      const __m512 m0 = _mm512_maskz_loadu_ps(lanes, m), m1 = _mm512_maskz_loadu_ps(lanes, m + st);
      const __m512 m2 = _mm512_maskz_loadu_ps(lanes, m + 2 * st), m3 = _mm512_maskz_loadu_ps(lanes, m + 3 * st);
      const __m512 m4 = _mm512_maskz_loadu_ps(lanes, m + 4 * st), m5 = _mm512_maskz_loadu_ps(lanes, m + 5 * st);
      AT_LANES(m0, m1, m2, m3, m4, m5, s[l], s[6 + l], s[12 + l], s[18 + l]);
    }
    /* A^T along l, then the four columns of each tile interleaved into the output row */
    for (int a = 0; a < 4; a++) {
      const __m512 *r = s + a * 6;
      __m512 o0, o1, o2, o3;
      AT_LANES(r[0], r[1], r[2], r[3], r[4], r[5], o0, o1, o2, o3);
      const __m512d l01 = _mm512_castps_pd(_mm512_permutex2var_ps(o0, lo, o1));
      const __m512d h01 = _mm512_castps_pd(_mm512_permutex2var_ps(o0, hi, o1));
      const __m512d l23 = _mm512_castps_pd(_mm512_permutex2var_ps(o2, lo, o3));
      const __m512d h23 = _mm512_castps_pd(_mm512_permutex2var_ps(o2, hi, o3));
      float *row = out + a * ld + 4 * tc;
      const int64_t floats = 4 * n;
      _mm512_mask_storeu_ps(row, first_lanes(floats), _mm512_castpd_ps(_mm512_permutex2var_pd(l01, q01, l23)));
      _mm512_mask_storeu_ps(row + 16, first_lanes(floats - 16),
                            _mm512_castpd_ps(_mm512_permutex2var_pd(l01, q23, l23)));
      _mm512_mask_storeu_ps(row + 32, first_lanes(floats - 32),
                            _mm512_castpd_ps(_mm512_permutex2var_pd(h01, q01, h23)));
      _mm512_mask_storeu_ps(row + 48, first_lanes(floats - 48),
                            _mm512_castpd_ps(_mm512_permutex2var_pd(h01, q23, h23)));
    }
  }
}

bool mx__kwino_lanes(void) {
  /* with the GEMM's AVX-512 copy: a test that picks the AVX2 copy (mx__kgemm_f32_use) runs the
   * plain transforms, so both are compared in one process */
  return __builtin_cpu_supports("avx512f") && mx__kgemm_f32_row_granule(64, MX_KGEMM_NR) == 14;
}

void mx__kwino_input_segment(const float *xc, int64_t h, int64_t w, int64_t ih0, int64_t x0, int64_t tw, float *v,
                             int64_t vstride, int64_t c, int64_t ch, int64_t t0) {
  input_segment(xc, h, w, ih0, x0, tw, v, vstride, c, ch, t0);
}

void mx__kwino_output_rows(const float *mo, int64_t mstride, int64_t tw, float *out, int64_t ld) {
  output_rows(mo, mstride, tw, out, ld);
}
#else
bool mx__kwino_lanes(void) { return false; }
void mx__kwino_input_segment(const float *xc, int64_t h, int64_t w, int64_t ih0, int64_t x0, int64_t tw, float *v,
                             int64_t vstride, int64_t c, int64_t ch, int64_t t0) {
  (void)xc, (void)h, (void)w, (void)ih0, (void)x0, (void)tw, (void)v, (void)vstride, (void)c, (void)ch, (void)t0;
}
void mx__kwino_output_rows(const float *mo, int64_t mstride, int64_t tw, float *out, int64_t ld) {
  (void)mo, (void)mstride, (void)tw, (void)out, (void)ld;
}
#endif
