/* MaxPool rows of 3 taps at stride 2 with AVX-512 lanes (see kernels/pool_lanes.h). A plain loop
 * over outputs reads every other float, which gcc does not vectorize: 16 outputs here take three
 * masked loads, the even floats, the odd ones and the even ones one further by permutes, and
 * three lane-wise maxima. _mm512_max_ps(v, y) is `v > y ? v : y` lane by lane (y when either is
 * NaN), the plain loop's step. */
#include "kernels/pool_lanes.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define TARGET __attribute__((target("avx512f")))

TARGET static inline __mmask16 first_lanes(int64_t n) {
  return n <= 0 ? (__mmask16)0 : n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1u);
}

TARGET static void max3_s2(float *y, const float *x, int64_t n, bool first) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  for (int64_t o = 0; o < n; o += 16) {
    const int64_t count = n - o < 16 ? n - o : 16, used = 2 * count + 1; /* floats of x read */
    const float *s = x + 2 * o;
    const __m512 a0 = _mm512_maskz_loadu_ps(first_lanes(used), s);
    const __m512 a1 = _mm512_maskz_loadu_ps(first_lanes(used - 16), s + 16);
    const __m512 a2 = _mm512_maskz_loadu_ps(first_lanes(used - 32), s + 32);
    const __m512 tap0 = _mm512_permutex2var_ps(a0, even, a1), tap1 = _mm512_permutex2var_ps(a0, odd, a1);
    /* floats 2 .. 33: the window two further on */
    const __m512 b0 = _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(a1), _mm512_castps_si512(a0), 2));
    const __m512 b1 = _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(a2), _mm512_castps_si512(a1), 2));
    const __m512 tap2 = _mm512_permutex2var_ps(b0, even, b1);
    const __mmask16 out = first_lanes(count);
    __m512 m = first ? tap0 : _mm512_max_ps(tap0, _mm512_maskz_loadu_ps(out, y + o));
    m = _mm512_max_ps(tap1, m);
    m = _mm512_max_ps(tap2, m);
    _mm512_mask_storeu_ps(y + o, out, m);
  }
}

bool mx__kpool_lanes(void) { return __builtin_cpu_supports("avx512f"); }

void mx__kpool_max3_s2(float *y, const float *x, int64_t n, bool first) { max3_s2(y, x, n, first); }
#else
bool mx__kpool_lanes(void) { return false; }
void mx__kpool_max3_s2(float *y, const float *x, int64_t n, bool first) { (void)y, (void)x, (void)n, (void)first; }
#endif
