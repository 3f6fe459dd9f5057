/* The float32 Conv of a 1x1 map through 1x1 taps (squeeze-and-excitation's two Convs): each
 * output is one weight row times the image's channel vector. The dense paths would pack the
 * weights and the one column into GEMM panels on every call and fill a 14- or 32-wide tile for
 * one useful column; here each weight row is read once, straight from the weights. Every output
 * adds its products in one fixed order in every ISA copy (16 lane sums over k, a multiply then
 * an add, then the lanes folded in halves), on whatever thread runs it. */
#include "kernels/conv_gemv.h"

#include <string.h>

#include "kernels/conv_epilogue.h"
#include "kernels/kmath.h"

typedef float v16f __attribute__((vector_size(64)));

bool mx__kconv_gemv_applies(const mx_kconv_f32 *j) {
  const mx_kwin *w = j->w;
  if (j->group != 1 || w->img_size != 1 || w->grid_size != 1 || w->k_size != 1) return false;
  for (int i = 0; i < 3; i++)
    if (w->pb[i] != 0) return false;
  return true;
}

/* sum over k < n of a[k] * b[k]: lane l adds the products k = l, l + 16, ... in k order (the
 * last partial vector padded with zeros), then the 16 lanes fold in halves (8, 4, 2, 1). */
MX_KINLINE float dot_f32(const float *a, const float *b, int64_t n) {
  v16f acc = {0};
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) {
    v16f x, y;
    memcpy(&x, a + k, sizeof x);
    memcpy(&y, b + k, sizeof y);
    acc = acc + x * y;
  }
  if (k < n) {
    v16f x = {0}, y = {0};
    memcpy(&x, a + k, (size_t)(n - k) * sizeof(float));
    memcpy(&y, b + k, (size_t)(n - k) * sizeof(float));
    acc = acc + x * y;
  }
  float lanes[16];
  memcpy(lanes, &acc, sizeof lanes);
  for (int half = 8; half >= 1; half /= 2)
    for (int l = 0; l < half; l++) lanes[l] = lanes[l] + lanes[l + half];
  return lanes[0];
}

/* dot_f32 of NR rows (a, a + lda, ...) with b, into out[0..NR): each row's sum in the same order
 * as dot_f32's, so the same bits; the NR sums are independent, so their adds overlap instead of
 * each waiting on the one before, and each vector of b is loaded once for all rows. */
MX_KINLINE void dot_rows_f32(float *out, const float *a, int64_t lda, const float *b, int64_t n, int NR) {
  v16f acc[4];
  for (int r = 0; r < NR; r++) acc[r] = (v16f){0};
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) {
    v16f y;
    memcpy(&y, b + k, sizeof y);
    for (int r = 0; r < NR; r++) {
      v16f x;
      memcpy(&x, a + r * lda + k, sizeof x);
      acc[r] = acc[r] + x * y;
    }
  }
  if (k < n) {
    v16f y = {0};
    memcpy(&y, b + k, (size_t)(n - k) * sizeof(float));
    for (int r = 0; r < NR; r++) {
      v16f x = {0};
      memcpy(&x, a + r * lda + k, (size_t)(n - k) * sizeof(float));
      acc[r] = acc[r] + x * y;
    }
  }
  for (int r = 0; r < NR; r++) {
    float lanes[16];
    memcpy(lanes, &acc[r], sizeof lanes);
    for (int half = 8; half >= 1; half /= 2)
      for (int l = 0; l < half; l++) lanes[l] = lanes[l] + lanes[l + half];
    out[r] = lanes[0];
  }
}

MX_KHOT static void gemv_image(const mx_kconv_f32 *j, const float *x, float *y, const float *z) {
  int64_t m = 0;
  for (; m + 4 <= j->m; m += 4) {
    /* the sums land in locals first: z may be y (a residual read in place) */
    float s[4];
    dot_rows_f32(s, j->wt + m * j->c, j->c, x, j->c, 4);
    for (int r = 0; r < 4; r++)
      mx__kconv_epilogue_body(y + m + r, &s[r], z ? z + m + r : NULL, j->b ? j->b[m + r] : 0.0f, 1, j->act,
                              j->alpha, j->beta);
  }
  for (; m < j->m; m++) {
    /* the sum lands in a local first: z may be y (a residual read in place) */
    float s = dot_f32(j->wt + m * j->c, x, j->c);
    mx__kconv_epilogue_body(y + m, &s, z ? z + m : NULL, j->b ? j->b[m] : 0.0f, 1, j->act, j->alpha, j->beta);
  }
}

void mx__kconv_gemv_run(const mx_kconv_f32 *j) {
  for (int64_t in = 0; in < j->n; in++)
    gemv_image(j, j->x + in * j->c, j->y + in * j->m, j->z ? j->z + in * j->m : NULL);
}
