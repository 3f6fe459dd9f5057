/* The depthwise float32 Conv core (one input channel per output channel, 1-D and 2-D): a direct
 * loop per channel over a zero-padded copy of its image, so no tap needs a bounds check. Stride 1
 * runs along the padded rows as one long row (the columns past the output width are computed and
 * dropped), stride 2 along even/odd column planes, so both vectorize with unit-stride loads
 * (AVX-512, AVX2 and baseline copies, MX_KHOT). Bias, residual and the fused activation are
 * applied per output row while it is in cache. Every output adds its taps in one fixed order,
 * whatever the ISA copy or the thread count. Convs whose padded image fits 64x64 pixels, without
 * a residual, run 16 channels at a time in vector lanes instead (kernels/conv_depthwise_lanes.c,
 * the same bits). */
#include "kernels/conv_depthwise.h"

#include <string.h>

#include "kernels/conv_depthwise_lanes.h"
#include "kernels/conv_epilogue.h"
#include "kernels/kmath.h"
#include "kernels/threads.h"

/* Floats after the padded image and after the accumulator that the vector loops may read or
 * write past the end (lanes whose outputs are dropped): two vectors. */
#define SLACK 32

/* Vectors of sums per block along a stride-1 long row: each sum is a chain of dependent adds
 * (25 on 5x5 taps), so a block needs about twice as many independent sums as an add's latency
 * in cycles covers the two vector pipes: 8 (128 outputs), not 4. */
#define DW_LONG_NV 8

/* The padded geometry of one depthwise Conv. */
typedef struct dw_plan {
  int64_t hp, wp, q; /* padded image height, width, plane width (stride 2) */
  int64_t pitch1;    /* floats per padded row at stride 1 (see make_plan) */
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
  /* At stride 1 a row's right padding and the next row's left padding are the same zeros: the
   * taps of row r read addresses r * pitch + j for j < wp, and with pitch >= wp - pl (its right
   * reads end before row r + 1's image) and >= pl + IW' (row r's image ends before row r + 1's
   * left reads) every read outside the image lands on a zero. A 7x7 map under 5x5 taps gets a
   * pitch of 9 instead of 11: its output rows fill 4 vectors, not 5. */
  const int64_t reach = p->wp - w->pb[2];
  const int64_t img_cols = w->img[2] < reach ? w->img[2] : reach;
  p->pitch1 = reach > w->pb[2] + img_cols ? reach : w->pb[2] + img_cols;
  if (p->pitch1 > p->wp || p->pitch1 < 1) p->pitch1 = p->wp;
  /* padded image (as one plane, or two planes of q), then the accumulator of the output rows
   * laid out with the padded pitch (stride 1) or a pitch of whole vectors (rows of up to 32) */
  const int64_t acc_rows = w->grid[1] * (p->wp > round_up(w->grid[2], 16) ? p->wp : round_up(w->grid[2], 16));
  p->slot_floats = (size_t)round_up(p->hp * 2 * p->q + SLACK, 16) + (size_t)round_up(acc_rows + SLACK, 16);
}

size_t mx__kconv_dw_slot_floats(const mx_kwin *w) {
  dw_plan p;
  make_plan(w, &p);
  /* room for the channels-in-lanes path too (whether it runs depends on the call) */
  const size_t lanes = mx__kdwl_slot_floats(w);
  return lanes > p.slot_floats ? lanes : p.slot_floats;
}

/* 16 floats as one value: gcc keeps it in one AVX-512 register, two AVX2 or four SSE
 * registers, per ISA copy; a * b + c stays a multiply then an add (C11 mode, no contraction),
 * so every copy rounds alike. */
typedef float v16f __attribute__((vector_size(64)));

/* The sums of NV vectors of 16 outputs in each of NR output rows: row r's first padded input row
 * is r0 + r * rstep, its outputs ow.. land at out + r * ostride. Each output adds its KH x KW taps
 * in order (row by row, left to right) to a zero start, a multiply then an add. Stride 1 reads
 * padded column ow + kw*dw; stride 2 (planes) reads column ow + kw/2 of the even (kw even) or odd
 * plane. Lanes past a row's end read the SLACK after the padded image and are dropped. NR * NV
 * (at most 8) independent sums share each tap's weight: one or two would leave the adds waiting
 * on each other, since every tap of a sum depends on the one before. NR and NV are constants at
 * every call, so the sums live in registers; they go to memory at the end (vectors never cross a
 * call: their ABI differs between the ISA copies). */
MX_KINLINE void dw_block(float *out, int64_t ostride, const float *pad, const float *odd, int64_t pitch,
                         const float *wk, int64_t r0, int64_t rstep, int64_t dh, int64_t dw, int64_t ow,
                         int64_t KH, int64_t KW, bool planes, int NR, int NV) {
  v16f s[8];
  for (int i = 0; i < NR * NV; i++) s[i] = (v16f){0};
  for (int64_t kh = 0; kh < KH; kh++) {
    const float *wr = wk + kh * KW;
    for (int64_t kw = 0; kw < KW; kw++) {
      const float wv = wr[kw];
      const float *base = planes ? (kw & 1 ? odd : pad) + kw / 2 : pad + kw * dw;
      for (int r = 0; r < NR; r++) {
        const float *src = base + (r0 + r * rstep + kh * dh) * pitch + ow;
        for (int v = 0; v < NV; v++) {
          v16f x;
          memcpy(&x, src + 16 * v, sizeof x);
          s[r * NV + v] = s[r * NV + v] + wv * x;
        }
      }
    }
  }
  for (int r = 0; r < NR; r++)
    for (int v = 0; v < NV; v++) memcpy(out + r * ostride + 16 * v, &s[r * NV + v], sizeof(v16f));
}

/* dw_block with the common kernels (3x3, 5x5) as constants, so their tap loops unroll. */
MX_KINLINE void dw_block_k(float *out, int64_t ostride, const float *pad, const float *odd, int64_t pitch,
                           const float *wk, int64_t r0, int64_t rstep, int64_t dh, int64_t dw, int64_t ow,
                           int64_t KH, int64_t KW, bool planes, int NR, int NV) {
  if (KH == 3 && KW == 3)
    dw_block(out, ostride, pad, odd, pitch, wk, r0, rstep, dh, dw, ow, 3, 3, planes, NR, NV);
  else if (KH == 5 && KW == 5)
    dw_block(out, ostride, pad, odd, pitch, wk, r0, rstep, dh, dw, ow, 5, 5, planes, NR, NV);
  else
    dw_block(out, ostride, pad, odd, pitch, wk, r0, rstep, dh, dw, ow, KH, KW, planes, NR, NV);
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

/* A short image row (its pairs from src on, at most 16) split into 16 even and 16 odd floats,
 * the even lanes from ne on and the odd ones from no on written as 0: 32 floats are read at src
 * and 16 written at even and at odd, past the row into its padding (which must read 0) or the
 * next padded rows (written after this one). */
MX_KINLINE void dw_split_short_row(float *even, float *odd, const float *src, int64_t ne, int64_t no) {
  static const v16i lane = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  const v16f zero = {0};
  float e[16], o[16];
  dw_split_pairs(e, o, src);
  v16f ve, vo;
  memcpy(&ve, e, sizeof ve);
  memcpy(&vo, o, sizeof vo);
  ve = SELECT16(lane < (int32_t)ne, ve, zero);
  vo = SELECT16(lane < (int32_t)no, vo, zero);
  memcpy(even, &ve, sizeof ve);
  memcpy(odd, &vo, sizeof vo);
}

/* dst[0..n) = src[0..n), a row of the padded image. With `spill` (32 floats may be read at src
 * and written at dst) a row of up to 32 floats moves as one or two vectors whose lanes past n are
 * written as 0: they land on the row's right padding and the next rows' left padding, which must
 * read 0, or on image columns written after this row. */
MX_KINLINE void dw_fill_row(float *dst, const float *src, int64_t n, bool spill) {
  if (spill && n <= 32) {
    static const v16i lane = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    const v16f zero = {0};
    const int32_t keep = (int32_t)n;
    v16f a;
    memcpy(&a, src, sizeof a);
    a = SELECT16(lane < keep, a, zero);
    memcpy(dst, &a, sizeof a);
    if (n > 16) {
      v16f b;
      memcpy(&b, src + 16, sizeof b);
      b = SELECT16(lane + 16 < keep, b, zero);
      memcpy(dst + 16, &b, sizeof b);
    }
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
 * epilogue are inlined into it): x the input channel's image, wk its taps, y its output (grid_size).
 * clear: the slot's padded image has not been zeroed yet in this run. */
MX_KHOT static void dw_channel(const dw_plan *p, const mx_kwin *w, const float *x, const float *wk,
                               float *y, float *slot, bool clear, const float *z, float bias, int32_t act,
                               float aa, float ab) {
  const int64_t OH = w->grid[1], OW = w->grid[2], IH = w->img[1], IW = w->img[2];
  const int64_t sh = w->s[1], sw = w->s[2], dh = w->d[1], dw = w->d[2], KH = w->k[1], KW = w->k[2];
  const bool planes = sw == 2 && dw == 1;
  /* floats per padded row (per plane); stride 1 shares the zeros between rows */
  const int64_t pitch = planes ? p->q : sw == 1 && sh == 1 ? p->pitch1 : p->wp;
  float *pad = slot, *odd = slot + p->hp * p->q;
  float *acc = slot + round_up(p->hp * 2 * p->q + SLACK, 16);
  /* The zero-padded image: rows and columns outside the image are 0. They stay 0 from one
   * channel to the next (every channel writes the same image columns, and a row copy that
   * spills past its row writes zeros), so only the image is written once the slot is clear. */
  /* (at stride 1 the last row's taps read up to (hp - 1) * pitch + wp, within hp * wp) */
  if (clear) memset(slot, 0, (size_t)(planes ? p->hp * 2 * p->q : p->hp * p->wp) * sizeof(float));
  for (int64_t r = 0; r < p->hp; r++) {
    int64_t ih = r - w->pb[1];
    if (ih < 0 || ih >= IH) continue;
    const float *xr = x + ih * IW;
    if (planes) {
      /* padded column 2j (+1) holds image column 2j - pb (+1) */
      float *er = pad + r * pitch, *orow = odd + r * pitch;
      const int64_t pb = w->pb[2];
      int64_t e0 = (pb + 1) / 2, e1 = (IW - 1 + pb) / 2 + 1; /* 0 <= 2j - pb < IW */
      int64_t o0 = pb / 2, o1 = (IW - 2 + pb) / 2 + 1;       /* 0 <= 2j + 1 - pb < IW */
      if (IW - 2 + pb < 0) o1 = 0;
      const bool fits = e1 <= p->q && o1 <= p->q; /* the image ends inside the padded width */
      e1 = e1 > p->q ? p->q : e1;
      o1 = o1 > p->q ? p->q : o1;
      /* Rows of up to 16 pairs (7x7 to 28x28 maps) as one vector step when 32 floats can be read
       * from the first pair on and 16 written in each plane; image column 0 of an odd pad
       * (odd plane column e0 - 1) one by one. */
      const int64_t s0 = 2 * e0 - pb;
      if (fits && IW - s0 <= 32 && (IH - ih) * IW - s0 >= 32 && (p->hp - r) * p->q - e0 >= 16) {
        dw_split_short_row(er + e0, orow + e0, xr + s0, e1 - e0, o1 - e0);
        for (int64_t j = o0; j < o1 && j < e0; j++) orow[j] = xr[2 * j + 1 - pb];
        continue;
      }
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
      if (lo >= hi) continue;
      /* the vectors may read on into the channel's next image rows, and write zeros past the
       * row (into its padding, the next padded rows or the SLACK) */
      dw_fill_row(pr + lo, xr, hi - lo, (IH - ih) * IW >= 32);
    }
  }
  if (sw == 1 && sh == 1) {
    /* All output rows as one long row of pitch `pitch` (output (oh, ow) is acc[oh*pitch + ow];
     * the columns past OW are computed and dropped), 128 at a time with every tap in registers,
     * the last 112 or fewer as 1 to 7 vectors (a 7x7 map's 61 sums take 64 lanes): small maps
     * (7x7, 14x14) fill whole vectors this way. Then the epilogue from acc (y may hold the residual,
     * read in place, so sums never land in y first). */
    const int64_t n = (OH - 1) * pitch + OW;
    bool fused = !z;
    for (int64_t i = 0; i < n; i += 16 * DW_LONG_NV) {
      const int64_t nv = n - i >= 16 * DW_LONG_NV ? DW_LONG_NV : (n - i + 15) / 16;
#define DW_LONG(NVC) dw_block_k(acc + i, 0, pad, odd, pitch, wk, 0, 0, dh, dw, i, KH, KW, false, 1, NVC)
      switch (nv) {
        case 8: DW_LONG(8); break;
        case 7: DW_LONG(7); break;
        case 6: DW_LONG(6); break;
        case 5: DW_LONG(5); break;
        case 4: DW_LONG(4); break;
        case 3: DW_LONG(3); break;
        case 2: DW_LONG(2); break;
        default: DW_LONG(1); break;
      }
#undef DW_LONG
      for (int64_t v = 0; fused && v < nv; v++) fused = dw_vec_epilogue(acc + i + 16 * v, bias, act, aa, ab);
    }
    for (int64_t oh = 0; oh < OH; oh++) {
      if (fused)
        dw_copy_row(y + oh * OW, acc + oh * pitch, OW, (OH - oh) * OW >= 32); /* within the channel */
      else
        mx__kconv_epilogue_body(y + oh * OW, acc + oh * pitch, z ? z + oh * OW : NULL, bias, OW, act, aa, ab);
    }
    return;
  }
  if ((sw == 1 || planes) && OW <= 32) {
    /* Rows of one or two vectors (7, 14 and 28 wide at stride 2): four or two output rows at a
     * time, each at acc + oh * apitch, then the epilogue row by row. */
    const int64_t apitch = round_up(OW, 16), nv = apitch / 16, rows = nv == 1 ? 4 : 2;
    for (int64_t oh = 0; oh < OH; oh += rows) {
      const int64_t nr = OH - oh < rows ? OH - oh : rows;
      float *ab0 = acc + oh * apitch;
      const int64_t r0 = oh * sh;
      if (nv == 1) {
        switch (nr) {
          case 4: dw_block_k(ab0, apitch, pad, odd, pitch, wk, r0, sh, dh, dw, 0, KH, KW, planes, 4, 1); break;
          case 3: dw_block_k(ab0, apitch, pad, odd, pitch, wk, r0, sh, dh, dw, 0, KH, KW, planes, 3, 1); break;
          case 2: dw_block_k(ab0, apitch, pad, odd, pitch, wk, r0, sh, dh, dw, 0, KH, KW, planes, 2, 1); break;
          default: dw_block_k(ab0, apitch, pad, odd, pitch, wk, r0, sh, dh, dw, 0, KH, KW, planes, 1, 1); break;
        }
      } else if (nr == 2) {
        dw_block_k(ab0, apitch, pad, odd, pitch, wk, r0, sh, dh, dw, 0, KH, KW, planes, 2, 2);
      } else {
        dw_block_k(ab0, apitch, pad, odd, pitch, wk, r0, sh, dh, dw, 0, KH, KW, planes, 1, 2);
      }
    }
    bool fused = !z;
    for (int64_t oh = 0; oh < OH; oh++) {
      float *ar = acc + oh * apitch;
      for (int64_t v = 0; fused && v < nv; v++) fused = dw_vec_epilogue(ar + 16 * v, bias, act, aa, ab);
      if (fused)
        dw_copy_row(y + oh * OW, ar, OW, (OH - oh) * OW >= 32);
      else
        mx__kconv_epilogue_body(y + oh * OW, ar, z ? z + oh * OW : NULL, bias, OW, act, aa, ab);
    }
    return;
  }
  if (sw == 1 || planes) {
    /* Wider rows (56 and more): 64 outputs of a row at a time (the last 1 to 4 vectors), every
     * tap added in registers, then the epilogue from the row in acc. */
    for (int64_t oh = 0; oh < OH; oh++) {
      bool fused = !z;
      for (int64_t ow = 0; ow < OW; ow += 64) {
        const int64_t nv = OW - ow >= 64 ? 4 : (OW - ow + 15) / 16;
        switch (nv) {
          case 4: dw_block_k(acc + ow, 0, pad, odd, pitch, wk, oh * sh, 0, dh, dw, ow, KH, KW, planes, 1, 4); break;
          case 3: dw_block_k(acc + ow, 0, pad, odd, pitch, wk, oh * sh, 0, dh, dw, ow, KH, KW, planes, 1, 3); break;
          case 2: dw_block_k(acc + ow, 0, pad, odd, pitch, wk, oh * sh, 0, dh, dw, ow, KH, KW, planes, 1, 2); break;
          default: dw_block_k(acc + ow, 0, pad, odd, pitch, wk, oh * sh, 0, dh, dw, ow, KH, KW, planes, 1, 1); break;
        }
        for (int64_t v = 0; fused && v < nv; v++) fused = dw_vec_epilogue(acc + ow + 16 * v, bias, act, aa, ab);
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
  bool clear[MX_KTHREADS_MAX]; /* per slot: its padded image is zeroed (only that slot's thread
                                * touches its entry) */
} dw_job;

/* task: one output channel of one image */
static void run_task(void *vctx, int64_t task, int32_t slot) {
  dw_job *dj = vctx;
  const mx_kconv_f32 *j = dj->j;
  const dw_plan *p = dj->p;
  const mx_kwin *w = j->w;
  float *scr = dj->scratch + (size_t)slot * p->slot_floats;
  int64_t in = task / j->m, oc = task % j->m, g = oc / p->m_per_group;
  const float *xc = j->x + (in * j->c + g) * w->img_size;
  size_t yo = (size_t)(in * j->m + oc) * (size_t)w->grid_size;
  const bool clear = !dj->clear[slot];
  dj->clear[slot] = true;
  dw_channel(p, w, xc, j->wt + oc * w->k_size, j->y + yo, scr, clear, j->z ? j->z + yo : NULL,
             j->b ? j->b[oc] : 0.0f, j->act, j->alpha, j->beta);
}

/* task: 16 output channels of one image through the channels-in-lanes path */
static void run_lanes_task(void *vctx, int64_t task, int32_t slot) {
  dw_job *dj = vctx;
  const mx_kconv_f32 *j = dj->j;
  const int64_t groups = (j->m + MX_KDWL_LANES - 1) / MX_KDWL_LANES;
  const bool clear = !dj->clear[slot];
  dj->clear[slot] = true;
  mx__kdwl_group(j, task / groups, task % groups * MX_KDWL_LANES, dj->scratch + (size_t)slot * dj->p->slot_floats,
                 clear);
}

void mx__kconv_dw_run(const mx_kconv_f32 *j, float *scratch, int32_t slots) {
  dw_plan p;
  make_plan(j->w, &p);
  p.m_per_group = j->m / j->group;
  p.slot_floats = mx__kconv_dw_slot_floats(j->w);
  dw_job dj = {.j = j, .p = &p, .scratch = scratch};
  const mx_kwin *w = j->w;
  if (mx__kdwl_applies(j)) {
    /* small maps: 16 channels per task, one in each vector lane */
    const int64_t groups = (j->m + MX_KDWL_LANES - 1) / MX_KDWL_LANES;
    mx__kparallel_work(j->n * groups, slots, j->n * j->m * w->grid_size * w->k_size, run_lanes_task, &dj);
    return;
  }
  mx__kparallel_work(j->n * j->m, slots, j->n * j->m * w->grid_size * w->k_size, run_task, &dj);
}
