/* The depthwise float32 Conv core (one input channel per output channel, 1-D and 2-D): a direct
 * loop per channel over a zero-padded copy of its image, so no tap needs a bounds check. Stride 1
 * runs along the padded rows as one long row (the columns past the output width are computed and
 * dropped), stride 2 along even/odd column planes, so both vectorize with unit-stride loads
 * (AVX-512, AVX2 and baseline copies, MX_KHOT). Bias, residual and the fused activation are
 * applied per output row while it is in cache. Every output adds its taps in one fixed order,
 * whatever the ISA copy or the thread count. */
#include "kernels/conv_depthwise.h"

#include <string.h>

#include "kernels/conv_epilogue.h"
#include "kernels/kmath.h"
#include "kernels/threads.h"

/* The padded geometry of one depthwise Conv. */
typedef struct dw_plan {
  int64_t hp, wp, q; /* padded image height, width, plane width (stride 2) */
  int64_t m_per_group;
  size_t slot_floats; /* scratch per thread */
} dw_plan;

static int64_t round_up(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

bool mx__kconv_dw_applies(const mx_kwin *w, int64_t cg) {
  return cg == 1 && w->k[0] == 1 && w->grid[0] == 1 && w->img[0] == 1;
}

static void make_plan(const mx_kwin *w, dw_plan *p) {
  memset(p, 0, sizeof *p);
  p->hp = (w->grid[1] - 1) * w->s[1] + (w->k[1] - 1) * w->d[1] + 1;
  p->wp = (w->grid[2] - 1) * w->s[2] + (w->k[2] - 1) * w->d[2] + 1;
  p->q = (p->wp + 1) / 2;
  /* padded image (as one plane, or two planes of q), then the accumulator of the output rows
   * laid out with the padded pitch */
  p->slot_floats =
      (size_t)round_up(p->hp * 2 * p->q + 16, 16) + (size_t)round_up(w->grid[1] * p->wp + 16, 16);
}

size_t mx__kconv_dw_slot_floats(const mx_kwin *w) {
  dw_plan p;
  make_plan(w, &p);
  return p.slot_floats;
}

/* acc[i] += sum over the K taps t of wv[t] * src[i + t*d] for i < n, the taps added in order. */
MX_KINLINE void dw_row_taps(float *restrict acc, const float *restrict src, const float *restrict wv,
                            int64_t d, int64_t n, int K) {
  switch (K) {
    case 3:
      for (int64_t i = 0; i < n; i++)
        acc[i] = ((acc[i] + wv[0] * src[i]) + wv[1] * src[i + d]) + wv[2] * src[i + 2 * d];
      return;
    case 5:
      for (int64_t i = 0; i < n; i++)
        acc[i] = ((((acc[i] + wv[0] * src[i]) + wv[1] * src[i + d]) + wv[2] * src[i + 2 * d]) +
                  wv[3] * src[i + 3 * d]) +
                 wv[4] * src[i + 4 * d];
      return;
    default:
      for (int t = 0; t < K; t++) {
        const float wt = wv[t];
        const float *restrict st = src + t * d;
        for (int64_t i = 0; i < n; i++) acc[i] += wt * st[i];
      }
  }
}

/* Stride 2 along the width, dilation 1: output column ow reads padded column 2*ow + t, which is
 * column ow + t/2 of the even (t even) or odd plane. */
MX_KINLINE void dw_row_taps_s2(float *restrict acc, const float *restrict even, const float *restrict odd,
                               const float *restrict wv, int64_t n, int K) {
  switch (K) {
    case 3:
      for (int64_t i = 0; i < n; i++)
        acc[i] = ((acc[i] + wv[0] * even[i]) + wv[1] * odd[i]) + wv[2] * even[i + 1];
      return;
    case 5:
      for (int64_t i = 0; i < n; i++)
        acc[i] =
            ((((acc[i] + wv[0] * even[i]) + wv[1] * odd[i]) + wv[2] * even[i + 1]) + wv[3] * odd[i + 1]) +
            wv[4] * even[i + 2];
      return;
    default:
      for (int t = 0; t < K; t++) {
        const float wt = wv[t];
        const float *restrict st = (t & 1 ? odd : even) + t / 2;
        for (int64_t i = 0; i < n; i++) acc[i] += wt * st[i];
      }
  }
}

/* Any width stride and dilation. */
MX_KINLINE void dw_row_taps_any(float *restrict acc, const float *restrict src, const float *restrict wv,
                                int64_t s, int64_t d, int64_t n, int64_t K) {
  for (int64_t t = 0; t < K; t++)
    for (int64_t i = 0; i < n; i++) acc[i] += wv[t] * src[i * s + t * d];
}

/* One output channel (one dispatch to the ISA copy per channel: the row helpers and the
 * epilogue are inlined into it): x the input channel's image, wk its taps, y its output (grid_size). */
MX_KHOT static void dw_channel(const dw_plan *p, const mx_kwin *w, const float *x, const float *wk,
                               float *y, float *slot, const float *z, float bias, int32_t act, float aa,
                               float ab) {
  const int64_t OH = w->grid[1], OW = w->grid[2], IH = w->img[1], IW = w->img[2];
  const int64_t sh = w->s[1], sw = w->s[2], dh = w->d[1], dw = w->d[2], KH = w->k[1], KW = w->k[2];
  const bool planes = sw == 2 && dw == 1;
  const int64_t pitch = planes ? p->q : p->wp; /* floats per padded row (per plane) */
  float *pad = slot, *odd = slot + p->hp * p->q;
  float *acc = slot + round_up(p->hp * 2 * p->q + 16, 16);
  /* The zero-padded image: rows and columns outside the image are 0. */
  for (int64_t r = 0; r < p->hp; r++) {
    int64_t ih = r - w->pb[1];
    const float *xr = ih >= 0 && ih < IH ? x + ih * IW : NULL;
    if (planes) {
      /* padded column 2j (+1) holds image column 2j - pb (+1) */
      float *er = pad + r * pitch, *orow = odd + r * pitch;
      memset(er, 0, (size_t)p->q * sizeof(float));
      memset(orow, 0, (size_t)p->q * sizeof(float));
      if (!xr) continue;
      const int64_t pb = w->pb[2];
      int64_t e0 = (pb + 1) / 2, e1 = (IW - 1 + pb) / 2 + 1; /* 0 <= 2j - pb < IW */
      int64_t o0 = pb / 2, o1 = (IW - 2 + pb) / 2 + 1;       /* 0 <= 2j + 1 - pb < IW */
      if (IW - 2 + pb < 0) o1 = 0;
      e1 = e1 > p->q ? p->q : e1;
      o1 = o1 > p->q ? p->q : o1;
      for (int64_t j = e0; j < e1; j++) er[j] = xr[2 * j - pb];
      for (int64_t j = o0; j < o1; j++) orow[j] = xr[2 * j + 1 - pb];
    } else {
      float *pr = pad + r * pitch;
      int64_t lo = w->pb[2], hi = w->pb[2] + IW;
      if (hi > p->wp) hi = p->wp;
      if (!xr || lo >= hi) {
        memset(pr, 0, (size_t)p->wp * sizeof(float));
        continue;
      }
      for (int64_t j = 0; j < lo; j++) pr[j] = 0.0f;
      memcpy(pr + lo, xr, (size_t)(hi - lo) * sizeof(float));
      for (int64_t j = hi; j < p->wp; j++) pr[j] = 0.0f;
    }
  }
  if (sw == 1) {
    /* All output rows as one long row of pitch wp: output (oh, ow) is acc[oh*wp + ow]. */
    const int64_t n = (OH - 1) * pitch + OW;
    memset(acc, 0, (size_t)n * sizeof(float));
    for (int64_t kh = 0; kh < KH; kh++) {
      if (sh == 1) {
        dw_row_taps(acc, pad + kh * dh * pitch, wk + kh * KW, dw, n, (int)KW);
      } else {
        for (int64_t oh = 0; oh < OH; oh++)
          dw_row_taps(acc + oh * pitch, pad + (oh * sh + kh * dh) * pitch, wk + kh * KW, dw, OW, (int)KW);
      }
    }
    for (int64_t oh = 0; oh < OH; oh++)
      mx__kconv_epilogue_body(y + oh * OW, acc + oh * pitch, z ? z + oh * OW : NULL, bias, OW, act, aa, ab);
    return;
  }
  for (int64_t oh = 0; oh < OH; oh++) {
    float *ar = acc;
    memset(ar, 0, (size_t)OW * sizeof(float));
    for (int64_t kh = 0; kh < KH; kh++) {
      int64_t r = oh * sh + kh * dh;
      if (planes)
        dw_row_taps_s2(ar, pad + r * pitch, odd + r * pitch, wk + kh * KW, OW, (int)KW);
      else
        dw_row_taps_any(ar, pad + r * pitch, wk + kh * KW, sw, dw, OW, KW);
    }
    mx__kconv_epilogue_body(y + oh * OW, ar, z ? z + oh * OW : NULL, bias, OW, act, aa, ab);
  }
}

/* --- tasks ------------------------------------------------------------------------------------ */

typedef struct dw_job {
  const mx_kconv_f32 *j;
  const dw_plan *p;
  float *scratch;
} dw_job;

/* task: one output channel of one image */
static void run_task(void *vctx, int64_t task, int32_t slot) {
  const dw_job *dj = vctx;
  const mx_kconv_f32 *j = dj->j;
  const dw_plan *p = dj->p;
  const mx_kwin *w = j->w;
  float *scr = dj->scratch + (size_t)slot * p->slot_floats;
  int64_t in = task / j->m, oc = task % j->m, g = oc / p->m_per_group;
  const float *xc = j->x + (in * j->c + g) * w->img_size;
  size_t yo = (size_t)(in * j->m + oc) * (size_t)w->grid_size;
  dw_channel(p, w, xc, j->wt + oc * w->k_size, j->y + yo, scr, j->z ? j->z + yo : NULL,
             j->b ? j->b[oc] : 0.0f, j->act, j->alpha, j->beta);
}

void mx__kconv_dw_run(const mx_kconv_f32 *j, float *scratch, int32_t slots) {
  dw_plan p;
  make_plan(j->w, &p);
  p.m_per_group = j->m / j->group;
  dw_job dj = {j, &p, scratch};
  const mx_kwin *w = j->w;
  mx__kparallel_work(j->n * j->m, slots, j->n * j->m * w->grid_size * w->k_size, run_task, &dj);
}
