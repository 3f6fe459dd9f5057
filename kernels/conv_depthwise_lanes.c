/* The channels-in-lanes path of the depthwise float32 Conv: 16 channels at a time, lane i of
 * every vector holding channel i. The 16 images are transposed into one zero-padded image of
 * 16-float pixels, each output pixel of the 16 channels is then one vector that adds its taps
 * (a weight vector of the 16 channels' taps times an input pixel), and the output pixels are
 * transposed back into the channels' planes.
 *
 * Why: on small maps (7x7, 14x14) a channel's outputs fill only a few vectors, so the per-channel
 * path (kernels/conv_depthwise.c) has few independent sums and each waits on the add before it;
 * here a block of up to 8 output pixels gives 8 independent sums, no lane is wasted on the
 * columns past a row, and stride and dilation are only address steps (no even/odd planes).
 *
 * Every output adds its taps in the per-channel path's order (row by row, left to right, a
 * multiply then an add, from a zero start) and applies bias and activation with the same steps,
 * so both paths give the same bits. */
#include "kernels/conv_depthwise_lanes.h"

#include <stdlib.h>
#include <string.h>

#include "graph/ops/conv_params.h"
#include "kernels/conv_epilogue.h"
#include "kernels/kmath.h"

typedef float v16f __attribute__((vector_size(64)));
typedef int32_t v16i __attribute__((vector_size(64)));

#define LANES MX_KDWL_LANES

/* Largest padded image (floats, 16 per pixel) the path takes: its reads stay in the L2 cache;
 * larger maps are wide enough for the per-channel path to fill its vectors. */
#define DWL_MAX_PAD_FLOATS (64 * 1024)

/* Output pixels summed at once: independent sums sharing each weight load. */
#define DWL_BLOCK 8

typedef struct dwl_geom {
  int64_t hp, wp;      /* padded image height, width */
  int64_t pad_floats;  /* the padded image of 16-float pixels */
  int64_t out_floats;  /* the output pixels */
} dwl_geom;

static bool make_geom(const mx_kwin *w, dwl_geom *g) {
  memset(g, 0, sizeof *g);
  if (w->grid[0] != 1 || w->k[0] != 1 || w->img[0] != 1) return false;
  g->hp = (w->grid[1] - 1) * w->s[1] + (w->k[1] - 1) * w->d[1] + 1;
  g->wp = (w->grid[2] - 1) * w->s[2] + (w->k[2] - 1) * w->d[2] + 1;
  g->pad_floats = g->hp * g->wp * LANES;
  g->out_floats = w->grid_size * LANES;
  return g->pad_floats <= DWL_MAX_PAD_FLOATS;
}

size_t mx__kdwl_slot_floats(const mx_kwin *w) {
  dwl_geom g;
  if (!make_geom(w, &g)) return 0;
  /* padded image, output pixels, the taps' weight vectors, the bias vector */
  return (size_t)(g.pad_floats + g.out_floats + w->k_size * LANES + LANES);
}

/* MIXRT_DW_LANES=0 (or off) turns the path off, for comparisons; read once. */
static bool lanes_enabled(void) {
  static int enabled = -1;
  int e = __atomic_load_n(&enabled, __ATOMIC_RELAXED);
  if (e < 0) {
    const char *env = getenv("MIXRT_DW_LANES");
    e = !(env && (strcmp(env, "0") == 0 || strcmp(env, "off") == 0));
    __atomic_store_n(&enabled, e, __ATOMIC_RELAXED);
  }
  return e != 0;
}

bool mx__kdwl_applies(const mx_kconv_f32 *j) {
  dwl_geom g;
  if (j->z || !lanes_enabled() || !make_geom(j->w, &g)) return false;
  switch (j->act) {
    case MX_CONV_ACT_NONE:
    case MX_CONV_ACT_RELU:
    case MX_CONV_ACT_CLIP:
    case MX_CONV_ACT_HARD_SIGMOID:
    case MX_CONV_ACT_HARD_SWISH: return true;
    default: return false;
  }
}

#if defined(__clang__) /* clang spells gcc's two-vector shuffle with constant indices */
#define DWL_SHUF(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
#define DWL_SHUF(a, b, ...) __builtin_shuffle(a, b, (v16i){__VA_ARGS__})
#endif

/* r[i] lane l <- r[l] lane i, in the classic four steps whose shuffles stay inside 128-bit
 * lanes or move whole ones (unpack of floats, unpack of float pairs, two 128-bit lane selects),
 * so no step needs a two-source permute: within each 128-bit lane a 4x4 transpose, then the
 * 4x4 grid of 128-bit blocks transposed. */
MX_KINLINE void dwl_transpose16(v16f *r) {
  v16f t[16];
#pragma GCC unroll 8
  for (int i = 0; i < 16; i += 2) { /* unpack floats: rows 2k, 2k + 1 */
    t[i] = DWL_SHUF(r[i], r[i + 1], 0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29);
    t[i + 1] = DWL_SHUF(r[i], r[i + 1], 2, 18, 3, 19, 6, 22, 7, 23, 10, 26, 11, 27, 14, 30, 15, 31);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 16; i += 4) { /* unpack float pairs: t[4k + 0, 2] and t[4k + 1, 3] */
    r[i] = DWL_SHUF(t[i], t[i + 2], 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
    r[i + 1] = DWL_SHUF(t[i], t[i + 2], 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
    r[i + 2] = DWL_SHUF(t[i + 1], t[i + 3], 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
    r[i + 3] = DWL_SHUF(t[i + 1], t[i + 3], 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
  }
  /* Row 4q + j now holds, in its 128-bit lane L, column 4L + j of rows 4q .. 4q + 3. The
   * 128-bit blocks are moved in two select steps: even then odd lanes of rows 8h + j and
   * 8h + 4 + j ... */
#pragma GCC unroll 4
  for (int h = 0; h < 2; h++)
    for (int j = 0; j < 4; j++) {
      const int a = 8 * h + j, b = 8 * h + 4 + j;
      t[8 * h + j] = DWL_SHUF(r[a], r[b], 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27);
      t[8 * h + 4 + j] = DWL_SHUF(r[a], r[b], 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
    }
  /* ... then of those across the two halves: column 4L + j lands in row 4L + j. */
#pragma GCC unroll 8
  for (int i = 0; i < 8; i++) {
    r[i] = DWL_SHUF(t[i], t[i + 8], 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27);
    r[i + 8] = DWL_SHUF(t[i], t[i + 8], 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
  }
}

/* m ? a : b per lane (m from a comparison); a macro, since vectors passed to a function change
 * ABI between the ISA copies. */
#define DWL_SELECT(m, a, b) ((v16f)(((v16i)(m) & (v16i)(a)) | (~(v16i)(m) & (v16i)(b))))

/* NB output pixels of one row, from padded pixel (r0, c0) on, `step` pixels apart: every tap of
 * each added in registers, then bias and the activation (the per-channel path's
 * dw_vec_epilogue steps, lane by lane), stored as NB vectors at out. */
MX_KINLINE void dwl_block(float *out, const float *pad, const float *wv, const float *bias, int64_t wp,
                          int64_t r0, int64_t c0, int64_t step, int64_t dh, int64_t dw, int64_t KH,
                          int64_t KW, int32_t act, float aa, float ab, int NB) {
  v16f s[DWL_BLOCK];
  for (int b = 0; b < NB; b++) s[b] = (v16f){0};
  for (int64_t kh = 0; kh < KH; kh++) {
    const float *row = pad + ((r0 + kh * dh) * wp + c0) * LANES;
    for (int64_t kw = 0; kw < KW; kw++) {
      v16f wk;
      memcpy(&wk, wv + (kh * KW + kw) * LANES, sizeof wk);
      const float *src = row + kw * dw * LANES;
      for (int b = 0; b < NB; b++) {
        v16f x;
        memcpy(&x, src + b * step * LANES, sizeof x);
        s[b] = s[b] + wk * x;
      }
    }
  }
  v16f bv, zero = {0}, one = zero + 1.0f;
  memcpy(&bv, bias, sizeof bv);
  for (int b = 0; b < NB; b++) {
    v16f v = s[b] + bv;
    switch (act) {
      case MX_CONV_ACT_RELU: v = DWL_SELECT(v > zero, v, zero); break;
      case MX_CONV_ACT_CLIP:
        v = DWL_SELECT(v < aa, zero + aa, v);
        v = DWL_SELECT(v > ab, zero + ab, v);
        break;
      case MX_CONV_ACT_HARD_SIGMOID: {
        v16f t = aa * v + ab;
        t = DWL_SELECT(t > zero, t, zero);
        v = DWL_SELECT(t < one, t, one);
        break;
      }
      case MX_CONV_ACT_HARD_SWISH: {
        v16f t = v * (1.0f / 6.0f) + 0.5f;
        t = DWL_SELECT(t < zero, zero, t);
        t = DWL_SELECT(t > one, one, t);
        v = v * t;
        break;
      }
      default: break;
    }
    memcpy(out + b * LANES, &v, sizeof v);
  }
}

/* dwl_block with the common kernels (3x3, 5x5) as constants, so their tap loops unroll. */
MX_KINLINE void dwl_block_k(float *out, const float *pad, const float *wv, const float *bias, int64_t wp,
                            int64_t r0, int64_t c0, int64_t step, int64_t dh, int64_t dw, int64_t KH,
                            int64_t KW, int32_t act, float aa, float ab, int NB) {
  if (KH == 3 && KW == 3)
    dwl_block(out, pad, wv, bias, wp, r0, c0, step, dh, dw, 3, 3, act, aa, ab, NB);
  else if (KH == 5 && KW == 5)
    dwl_block(out, pad, wv, bias, wp, r0, c0, step, dh, dw, 5, 5, act, aa, ab, NB);
  else
    dwl_block(out, pad, wv, bias, wp, r0, c0, step, dh, dw, KH, KW, act, aa, ab, NB);
}

/* Positions p .. p + 15 of 16 rows (rows[i] + p, 16 floats each) as 16 pixels: r[q] lane i is
 * rows[i][p + q]. */
MX_KINLINE void dwl_gather16(v16f *r, const float *const *rows, int64_t p) {
  for (int i = 0; i < 16; i++) memcpy(&r[i], rows[i] + p, sizeof r[i]);
  dwl_transpose16(r);
}

/* The 16 images (xc[i], IH x IW each) into the padded image's pixels; positions the padded
 * image does not reach are dropped. */
MX_KINLINE void dwl_fill(float *pad, const float *const *xc, const mx_kwin *w, int64_t wp, int64_t hp) {
  const int64_t IW = w->img[2], n = w->img[1] * IW, pt = w->pb[1], pl = w->pb[2];
  if (n < 16) {
    for (int64_t q = 0; q < n; q++) {
      const int64_t ph = q / IW + pt, pw = q % IW + pl;
      if (ph < hp && pw < wp)
        for (int i = 0; i < 16; i++) pad[(ph * wp + pw) * LANES + i] = xc[i][q];
    }
    return;
  }
  v16f r[16];
  for (int64_t p = 0;; p = p + 32 > n ? n - 16 : p + 16) {
    dwl_gather16(r, xc, p);
    int64_t ih = p / IW, iw = p % IW;
    for (int q = 0; q < 16; q++) {
      const int64_t ph = ih + pt, pw = iw + pl;
      if (ph < hp && pw < wp) memcpy(pad + (ph * wp + pw) * LANES, &r[q], sizeof r[q]);
      if (++iw == IW) {
        iw = 0;
        ih++;
      }
    }
    if (p + 16 >= n) break;
  }
}

MX_KHOT static void dwl_run_group(const mx_kconv_f32 *j, const dwl_geom *g, const float *const *xc,
                                  const float *const *wr, float *slot, bool clear, float *const *yc, int64_t nc) {
  const mx_kwin *w = j->w;
  const int64_t OH = w->grid[1], OW = w->grid[2], OHW = w->grid_size, KH = w->k[1], KW = w->k[2];
  const int64_t sh = w->s[1], sw = w->s[2], dh = w->d[1], dw = w->d[2], wp = g->wp;
  float *pad = slot, *outp = slot + g->pad_floats, *wv = outp + g->out_floats, *bias = wv + w->k_size * LANES;
  /* Rows and columns outside the images stay 0 from one group to the next (every group writes
   * the same pixels), so they are zeroed once per run, and only they: the image's pixels are
   * written by every group. */
  if (clear) {
    const int64_t pt = w->pb[1], pl = w->pb[2] < wp ? w->pb[2] : wp;
    const int64_t ih_end = pt + w->img[1], iw_end = pl + w->img[2] < wp ? pl + w->img[2] : wp;
    for (int64_t r = 0; r < g->hp; r++) {
      float *row = pad + r * wp * LANES;
      if (r < pt || r >= ih_end) {
        memset(row, 0, (size_t)(wp * LANES) * sizeof(float));
        continue;
      }
      memset(row, 0, (size_t)(pl * LANES) * sizeof(float));
      memset(row + iw_end * LANES, 0, (size_t)((wp - iw_end) * LANES) * sizeof(float));
    }
  }
  /* the taps of the 16 channels as KH x KW weight vectors */
  if (w->k_size < 16) {
    for (int64_t t = 0; t < w->k_size; t++)
      for (int i = 0; i < 16; i++) wv[t * LANES + i] = wr[i][t];
  } else {
    v16f r[16];
    for (int64_t p = 0;; p = p + 32 > w->k_size ? w->k_size - 16 : p + 16) {
      dwl_gather16(r, wr, p);
      memcpy(wv + p * LANES, r, sizeof r);
      if (p + 16 >= w->k_size) break;
    }
  }
  dwl_fill(pad, xc, w, wp, g->hp);
  const int32_t act = j->act;
  const float aa = j->alpha, ab = j->beta;
  for (int64_t oh = 0; oh < OH; oh++) {
    for (int64_t ow = 0; ow < OW; ow += DWL_BLOCK) {
      const int64_t nb = OW - ow < DWL_BLOCK ? OW - ow : DWL_BLOCK;
      float *o = outp + (oh * OW + ow) * LANES;
#define DWL_B(NB) dwl_block_k(o, pad, wv, bias, wp, oh * sh, ow * sw, sw, dh, dw, KH, KW, act, aa, ab, NB)
      switch (nb) {
        case 8: DWL_B(8); break;
        case 7: DWL_B(7); break;
        case 6: DWL_B(6); break;
        case 5: DWL_B(5); break;
        case 4: DWL_B(4); break;
        case 3: DWL_B(3); break;
        case 2: DWL_B(2); break;
        default: DWL_B(1); break;
      }
#undef DWL_B
    }
  }
  /* back into the channels' planes, 16 positions of the 16 channels per transpose */
  if (OHW < 16) {
    for (int64_t i = 0; i < nc; i++)
      for (int64_t q = 0; q < OHW; q++) yc[i][q] = outp[q * LANES + i];
    return;
  }
  v16f r[16];
  for (int64_t p = 0;; p = p + 32 > OHW ? OHW - 16 : p + 16) {
    for (int q = 0; q < 16; q++) memcpy(&r[q], outp + (p + q) * LANES, sizeof r[q]);
    dwl_transpose16(r);
    for (int64_t i = 0; i < nc; i++) memcpy(yc[i] + p, &r[i], sizeof r[i]);
    if (p + 16 >= OHW) break;
  }
}

void mx__kdwl_group(const mx_kconv_f32 *j, int64_t in, int64_t oc0, float *slot, bool clear) {
  const mx_kwin *w = j->w;
  dwl_geom g;
  make_geom(w, &g);
  const int64_t nc = j->m - oc0 < LANES ? j->m - oc0 : LANES, mpg = j->m / j->group;
  const float *xc[LANES];
  float *yc[LANES];
  float *wv = slot + g.pad_floats + g.out_floats, *bias = wv + w->k_size * LANES;
  const float *wr[LANES];
  for (int64_t i = 0; i < LANES; i++) {
    /* lanes past the last channel read channel oc0's image and taps; their sums are dropped */
    const int64_t oc = i < nc ? oc0 + i : oc0;
    xc[i] = j->x + (in * j->c + oc / mpg) * w->img_size;
    yc[i] = j->y + (in * j->m + oc) * w->grid_size;
    wr[i] = j->wt + oc * w->k_size;
    bias[i] = j->b ? j->b[oc] : 0.0f;
  }
  dwl_run_group(j, &g, xc, wr, slot, clear, yc, nc);
}
