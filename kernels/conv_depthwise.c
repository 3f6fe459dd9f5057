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

/* Floats after the padded image and after the accumulator that the vector loops may read or
 * write past the end (lanes whose outputs are dropped): two vectors. */
#define SLACK 32

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
      (size_t)round_up(p->hp * 2 * p->q + SLACK, 16) + (size_t)round_up(w->grid[1] * p->wp + SLACK, 16);
}

size_t mx__kconv_dw_slot_floats(const mx_kwin *w) {
  dw_plan p;
  make_plan(w, &p);
  return p.slot_floats;
}

/* 16 floats as one value: gcc keeps it in one AVX-512 register, two AVX2 or four SSE
 * registers, per ISA copy; a * b + c stays a multiply then an add (C11 mode, no contraction),
 * so every copy rounds alike. */
typedef float v16f __attribute__((vector_size(64)));

/* Outputs ow..ow+15 of the output row whose first padded input row is r0: the KH x KW taps
 * added in order (row by row, left to right) to a zero start. Stride 1 reads padded column
 * ow + kw*dw; stride 2 (planes) reads column ow + kw/2 of the even (kw even) or odd plane.
 * Lanes past the row's end read the SLACK after the padded image and are dropped. Written to
 * out[0..16) (vectors never cross a call: their ABI differs between the ISA copies). */
MX_KINLINE void dw_vec_taps(float *out, const float *pad, const float *odd, int64_t pitch, const float *wk,
                            int64_t r0, int64_t dh, int64_t dw, int64_t ow, int64_t KH, int64_t KW, bool planes) {
  v16f sum = {0};
  for (int64_t kh = 0; kh < KH; kh++) {
    const int64_t ro = (r0 + kh * dh) * pitch + ow;
    const float *wr = wk + kh * KW;
    for (int64_t kw = 0; kw < KW; kw++) {
      const float *src = planes ? (kw & 1 ? odd : pad) + ro + kw / 2 : pad + ro + kw * dw;
      v16f x;
      memcpy(&x, src, sizeof x);
      sum = sum + wr[kw] * x;
    }
  }
  memcpy(out, &sum, sizeof sum);
}

/* dw_vec_taps for 32 outputs at once (two vectors sharing each tap's weight); the same
 * per-lane order, so the same bits. */
MX_KINLINE void dw_vec_taps2(float *out, const float *pad, const float *odd, int64_t pitch, const float *wk,
                             int64_t r0, int64_t dh, int64_t dw, int64_t ow, int64_t KH, int64_t KW,
                             bool planes) {
  v16f s0 = {0}, s1 = {0};
  for (int64_t kh = 0; kh < KH; kh++) {
    const int64_t ro = (r0 + kh * dh) * pitch + ow;
    const float *wr = wk + kh * KW;
    for (int64_t kw = 0; kw < KW; kw++) {
      const float *src = planes ? (kw & 1 ? odd : pad) + ro + kw / 2 : pad + ro + kw * dw;
      v16f x0, x1;
      memcpy(&x0, src, sizeof x0);
      memcpy(&x1, src + 16, sizeof x1);
      s0 = s0 + wr[kw] * x0;
      s1 = s1 + wr[kw] * x1;
    }
  }
  memcpy(out, &s0, sizeof s0);
  memcpy(out + 16, &s1, sizeof s1);
}

typedef int32_t v16i __attribute__((vector_size(64)));

/* m ? a : b per lane (m from a comparison: all ones or zero); a macro, since vectors passed to
 * a function change ABI between the ISA copies. */
#define SELECT16(m, a, b) ((v16f)(((v16i)(m) & (v16i)(a)) | (~(v16i)(m) & (v16i)(b))))

/* The epilogue without a residual on the 16 sums at p, in place: p[i] = act(p[i] + bias), each
 * step the same operation as mx__kconv_epilogue_body's, so the bits agree. false for an
 * activation it does not cover (the caller runs the row epilogue instead). */
MX_KINLINE bool dw_vec_epilogue(float *p, float bias, int32_t act, float a, float b) {
  v16f v, zero = {0}, one = zero + 1.0f;
  memcpy(&v, p, sizeof v);
  v = v + bias;
  switch (act) {
    case MX_CONV_ACT_NONE: break;
    case MX_CONV_ACT_RELU: v = SELECT16(v > zero, v, zero); break;
    case MX_CONV_ACT_CLIP:
      v = SELECT16(v < a, zero + a, v);
      v = SELECT16(v > b, zero + b, v);
      break;
    case MX_CONV_ACT_HARD_SIGMOID: {
      v16f t = a * v + b;
      t = SELECT16(t > zero, t, zero);
      v = SELECT16(t < one, t, one);
      break;
    }
    case MX_CONV_ACT_HARD_SWISH: {
      v16f t = v * (1.0f / 6.0f) + 0.5f;
      t = SELECT16(t < zero, zero, t);
      t = SELECT16(t > one, one, t);
      v = v * t;
      break;
    }
    default: return false;
  }
  memcpy(p, &v, sizeof v);
  return true;
}

/* even[i] = src[2i], odd[i] = src[2i + 1] for i < 16 (the stride-2 planes of 32 image floats). */
MX_KINLINE void dw_split_pairs(float *even, float *odd, const float *src) {
  v16f a, b;
  memcpy(&a, src, sizeof a);
  memcpy(&b, src + 16, sizeof b);
#if defined(__clang__) /* clang spells gcc's two-vector shuffle with constant indices */
  v16f e = __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  v16f o = __builtin_shufflevector(a, b, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
#else
  static const v16i even_idx = {0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30};
  static const v16i odd_idx = {1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31};
  v16f e = __builtin_shuffle(a, b, even_idx), o = __builtin_shuffle(a, b, odd_idx);
#endif
  memcpy(even, &e, sizeof e);
  memcpy(odd, &o, sizeof o);
}

/* dst[0..n) = src[0..n). With `spill` (the caller lets 32 floats be read at src and written at
 * dst: what lands past dst's row is overwritten later) a row of up to 32 floats moves as one or
 * two vectors instead of a libc call, which costs more than the copy on 7- and 14-wide rows. */
MX_KINLINE void dw_copy_row(float *dst, const float *src, int64_t n, bool spill) {
  if (spill && n <= 32) {
    v16f a;
    memcpy(&a, src, sizeof a);
    if (n > 16) {
      v16f b;
      memcpy(&b, src + 16, sizeof b);
      memcpy(dst + 16, &b, sizeof b);
    }
    memcpy(dst, &a, sizeof a);
    return;
  }
  memcpy(dst, src, (size_t)n * sizeof(float));
}

/* Any width stride and dilation. */
MX_KINLINE void dw_row_taps_any(float *restrict acc, const float *restrict src, const float *restrict wv,
                                int64_t s, int64_t d, int64_t n, int64_t K) {
  for (int64_t t = 0; t < K; t++)
    for (int64_t i = 0; i < n; i++) acc[i] += wv[t] * src[i * s + t * d];
}

/* One output channel (one dispatch to the ISA copy per channel: the tap helpers and the
 * epilogue are inlined into it): x the input channel's image, wk its taps, y its output (grid_size). */
MX_KHOT static void dw_channel(const dw_plan *p, const mx_kwin *w, const float *x, const float *wk,
                               float *y, float *slot, const float *z, float bias, int32_t act, float aa,
                               float ab) {
  const int64_t OH = w->grid[1], OW = w->grid[2], IH = w->img[1], IW = w->img[2];
  const int64_t sh = w->s[1], sw = w->s[2], dh = w->d[1], dw = w->d[2], KH = w->k[1], KW = w->k[2];
  const bool planes = sw == 2 && dw == 1;
  const int64_t pitch = planes ? p->q : p->wp; /* floats per padded row (per plane) */
  float *pad = slot, *odd = slot + p->hp * p->q;
  float *acc = slot + round_up(p->hp * 2 * p->q + SLACK, 16);
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
      /* Columns e0.. whose pair (2j - pb, 2j + 1 - pb) and the next 15 pairs lie inside the
       * image: split 32 image floats into 16 even and 16 odd ones per step. */
      int64_t jv = e0;
      for (; 2 * jv - pb + 32 <= IW && jv + 16 <= p->q; jv += 16) dw_split_pairs(er + jv, orow + jv, xr + 2 * jv - pb);
      for (int64_t j = jv; j < e1; j++) er[j] = xr[2 * j - pb];
      for (int64_t j = o0; j < o1 && j < e0; j++) orow[j] = xr[2 * j + 1 - pb];
      for (int64_t j = o0 > jv ? o0 : jv; j < o1; j++) orow[j] = xr[2 * j + 1 - pb];
    } else {
      float *pr = pad + r * pitch;
      int64_t lo = w->pb[2], hi = w->pb[2] + IW;
      if (hi > p->wp) hi = p->wp;
      if (!xr || lo >= hi) {
        memset(pr, 0, (size_t)p->wp * sizeof(float));
        continue;
      }
      for (int64_t j = 0; j < lo; j++) pr[j] = 0.0f;
      /* the vectors may read on into the channel's next image rows, and write into the zero
       * columns set below, the next padded rows (written after this one) or the SLACK */
      dw_copy_row(pr + lo, xr, hi - lo, (IH - ih) * IW >= 32);
      for (int64_t j = hi; j < p->wp; j++) pr[j] = 0.0f;
    }
  }
  if (sw == 1 && sh == 1) {
    /* All output rows as one long row of pitch wp (output (oh, ow) is acc[oh*wp + ow]; the
     * columns past OW are computed and dropped), 32 at a time with every tap in registers:
     * small maps (7x7, 14x14) fill whole vectors this way. Then the epilogue from acc (y may
     * hold the residual, read in place, so sums never land in y first). */
    const int64_t n = (OH - 1) * pitch + OW;
    bool fused = !z;
    for (int64_t i = 0; i < n; i += 32) {
      if (n - i <= 16) {
        /* the last 16 or fewer: one vector (a 7x7 map's 73 sums take 80 lanes, not 96) */
        switch (KW) {
          case 3: dw_vec_taps(acc + i, pad, odd, pitch, wk, 0, dh, dw, i, KH, 3, false); break;
          case 5: dw_vec_taps(acc + i, pad, odd, pitch, wk, 0, dh, dw, i, KH, 5, false); break;
          default: dw_vec_taps(acc + i, pad, odd, pitch, wk, 0, dh, dw, i, KH, KW, false); break;
        }
        if (fused) fused = dw_vec_epilogue(acc + i, bias, act, aa, ab);
        break;
      }
      switch (KW) {
        case 3: dw_vec_taps2(acc + i, pad, odd, pitch, wk, 0, dh, dw, i, KH, 3, false); break;
        case 5: dw_vec_taps2(acc + i, pad, odd, pitch, wk, 0, dh, dw, i, KH, 5, false); break;
        default: dw_vec_taps2(acc + i, pad, odd, pitch, wk, 0, dh, dw, i, KH, KW, false); break;
      }
      if (fused) fused = dw_vec_epilogue(acc + i, bias, act, aa, ab);
      if (fused) dw_vec_epilogue(acc + i + 16, bias, act, aa, ab);
    }
    for (int64_t oh = 0; oh < OH; oh++) {
      if (fused)
        dw_copy_row(y + oh * OW, acc + oh * pitch, OW, (OH - oh) * OW >= 32); /* within the channel */
      else
        mx__kconv_epilogue_body(y + oh * OW, acc + oh * pitch, z ? z + oh * OW : NULL, bias, OW, act, aa, ab);
    }
    return;
  }
  if (sw == 1 || planes) {
    /* 32 (rows wider than a vector) or 16 outputs of a row at a time, every tap added in
     * registers, then the epilogue from the row in acc */
    for (int64_t oh = 0; oh < OH; oh++) {
      bool fused = !z;
      if (OW > 16) {
        for (int64_t ow = 0; ow < OW; ow += 32) {
          switch (KW) {
            case 3: dw_vec_taps2(acc + ow, pad, odd, pitch, wk, oh * sh, dh, dw, ow, KH, 3, planes); break;
            case 5: dw_vec_taps2(acc + ow, pad, odd, pitch, wk, oh * sh, dh, dw, ow, KH, 5, planes); break;
            default: dw_vec_taps2(acc + ow, pad, odd, pitch, wk, oh * sh, dh, dw, ow, KH, KW, planes); break;
          }
          if (fused) fused = dw_vec_epilogue(acc + ow, bias, act, aa, ab);
          if (fused) dw_vec_epilogue(acc + ow + 16, bias, act, aa, ab);
        }
      }
      for (int64_t ow = 0; OW <= 16 && ow < OW; ow += 16) {
        switch (KW) {
          case 3: dw_vec_taps(acc + ow, pad, odd, pitch, wk, oh * sh, dh, dw, ow, KH, 3, planes); break;
          case 5: dw_vec_taps(acc + ow, pad, odd, pitch, wk, oh * sh, dh, dw, ow, KH, 5, planes); break;
          default: dw_vec_taps(acc + ow, pad, odd, pitch, wk, oh * sh, dh, dw, ow, KH, KW, planes); break;
        }
        if (fused) fused = dw_vec_epilogue(acc + ow, bias, act, aa, ab);
      }
      if (fused)
        dw_copy_row(y + oh * OW, acc, OW, (OH - oh) * OW >= 32);
      else
        mx__kconv_epilogue_body(y + oh * OW, acc, z ? z + oh * OW : NULL, bias, OW, act, aa, ab);
    }
    return;
  }
  for (int64_t oh = 0; oh < OH; oh++) {
    float *ar = acc;
    memset(ar, 0, (size_t)OW * sizeof(float));
    for (int64_t kh = 0; kh < KH; kh++)
      dw_row_taps_any(ar, pad + (oh * sh + kh * dh) * pitch, wk + kh * KW, sw, dw, OW, KW);
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
