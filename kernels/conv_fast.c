/* The float32 Conv cores (float16/bfloat16 run through them widened): an algorithm per shape,
 * with the bias, a residual input and the fused activation applied in one epilogue while the
 * output tile is still in cache, and the work split into tasks for the intra-op thread pool.
 *
 *   pointwise (1x1 taps, stride 1, no padding): the image is its own im2col matrix, so each
 *     task is one sgemm over a slice of its columns;
 *   depthwise (one input channel per output channel, 1-D and 2-D): a direct loop per channel
 *     over a zero-padded copy of its image, so no tap needs a bounds check; stride 1 runs along
 *     the padded rows as one long row (the columns past the output width are computed and
 *     dropped), stride 2 along even/odd column planes, so both vectorize with unit-stride
 *     loads (AVX-512, AVX2 and baseline copies, MX_KHOT);
 *   the rest: im2col of a band of output rows sized to stay in L2, then one sgemm per band
 *     (a whole-image im2col of a 56x56 layer is several MB and leaves the cache before the
 *     sgemm reads it).
 * Every output adds its taps in one fixed order, whatever the ISA copy or the thread count. */
#include <cblas.h>
#include <string.h>

#include "kernels/conv_impl.h"
#include "kernels/kmath.h"
#include "kernels/threads.h"

/* Bytes of im2col (plus output) a band aims at: about half an L2 of the machines mixrt runs on,
 * so the band and the weights' panel stay there through the sgemm. */
#define BAND_BYTES (384 * 1024)

#define MIN_BAND_COLS 256

typedef enum { ALGO_POINTWISE, ALGO_DEPTHWISE, ALGO_IM2COL } conv_algo;

/* How a Conv splits into tasks: (image, group, band, output-channel chunk). */
typedef struct fast_plan {
  conv_algo algo;
  int64_t cg, mg, kdim, P; /* channels in / out per group, taps per output, positions */
  int64_t rows, rowlen;    /* output rows (depth x height flattened) and their width */
  int64_t band_rows;       /* output rows per band (im2col), or columns per band (pointwise) */
  int64_t bands, mchunks, mchunk;
  int64_t hp, wp, q;  /* depthwise: padded image height, width, plane width (stride 2) */
  size_t slot_floats; /* scratch per thread */
} fast_plan;

static int64_t round_up(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

static bool is_pointwise(const mx_kwin *w) {
  for (int i = 0; i < 3; i++)
    if (w->k[i] != 1 || w->s[i] != 1 || w->pb[i] != 0 || w->img[i] != w->grid[i]) return false;
  return true;
}

static void make_plan(const mx_kwin *w, int64_t n, int64_t c, int64_t m, int64_t group, int32_t slots,
                      fast_plan *p) {
  memset(p, 0, sizeof *p);
  p->cg = c / group;
  p->mg = m / group;
  p->kdim = p->cg * w->k_size;
  p->P = w->grid_size;
  p->rowlen = w->grid[2];
  p->rows = w->grid[0] * w->grid[1];
  p->mchunks = 1;
  p->mchunk = p->mg;
  if (is_pointwise(w)) {
    p->algo = ALGO_POINTWISE;
    int64_t cols = BAND_BYTES / 4 / (p->kdim + p->mg);
    cols = round_up(cols < 64 ? 64 : cols, 16);
    p->band_rows = cols > p->P ? p->P : cols;
    p->bands = (p->P + p->band_rows - 1) / p->band_rows;
  } else if (p->cg == 1 && w->k[0] == 1 && w->grid[0] == 1 && w->img[0] == 1) {
    p->algo = ALGO_DEPTHWISE;
    p->hp = (w->grid[1] - 1) * w->s[1] + (w->k[1] - 1) * w->d[1] + 1;
    p->wp = (w->grid[2] - 1) * w->s[2] + (w->k[2] - 1) * w->d[2] + 1;
    p->q = (p->wp + 1) / 2;
    /* padded image (as one plane, or two planes of q), then the accumulator of the output
     * rows laid out with the padded pitch */
    p->slot_floats =
        (size_t)round_up(p->hp * 2 * p->q + 16, 16) + (size_t)round_up(w->grid[1] * p->wp + 16, 16);
    p->bands = 1;
  } else {
    p->algo = ALGO_IM2COL;
    /* at least MIN_BAND_COLS columns: narrower sgemms run far below peak when K is large */
    int64_t cols = BAND_BYTES / 4 / (p->kdim + p->mg);
    if (cols < MIN_BAND_COLS) cols = MIN_BAND_COLS;
    int64_t br = (cols + p->rowlen / 2) / p->rowlen;
    p->band_rows = br < 1 ? 1 : (br > p->rows ? p->rows : br);
    p->bands = (p->rows + p->band_rows - 1) / p->band_rows;
    p->slot_floats = (size_t)round_up(p->kdim * p->band_rows * p->rowlen, 16);
  }
  /* Too few tasks for the threads: split the output channels too (a band's im2col is then
   * repeated per chunk, which costs far less than the sgemm it feeds). */
  int64_t tasks = n * group * p->bands;
  if (p->algo != ALGO_DEPTHWISE && slots > 1 && tasks < 2 * slots && p->mg >= 32) {
    int64_t want = (2 * slots + tasks - 1) / tasks;
    int64_t chunk = round_up((p->mg + want - 1) / want, 16);
    p->mchunk = chunk > p->mg ? p->mg : chunk;
    p->mchunks = (p->mg + p->mchunk - 1) / p->mchunk;
  }
}

size_t mx__kconv_f32_slot_floats(const mx_kwin *w, int64_t n, int64_t c, int64_t m, int64_t group,
                                 int32_t slots) {
  fast_plan p;
  make_plan(w, n, c, m, group, slots, &p);
  return p.slot_floats;
}

/* --- epilogue --------------------------------------------------------------------------------- */

/* Helpers inlined into each ISA copy of their callers. */
#define MX_KINLINE static inline __attribute__((always_inline))

/* out[i] = act(src[i] + bias (+ z[i])) for i < n; src may be out. */
MX_KINLINE void epilogue_body(float *out, const float *src, const float *z, float bias, int64_t n,
                              int32_t act, float a, float b) {
  if (z) {
    for (int64_t i = 0; i < n; i++) out[i] = (src[i] + bias) + z[i];
  } else if (bias != 0.0f || out != src) {
    for (int64_t i = 0; i < n; i++) out[i] = src[i] + bias;
  }
  switch (act) {
    case MX_CONV_ACT_RELU:
      for (int64_t i = 0; i < n; i++) out[i] = out[i] > 0.0f ? out[i] : 0.0f;
      break;
    case MX_CONV_ACT_CLIP:
      for (int64_t i = 0; i < n; i++) {
        float v = out[i];
        v = v < a ? a : v;
        out[i] = v > b ? b : v;
      }
      break;
    case MX_CONV_ACT_HARD_SIGMOID:
      for (int64_t i = 0; i < n; i++) {
        float t = a * out[i] + b;
        t = t > 0.0f ? t : 0.0f;
        out[i] = t < 1.0f ? t : 1.0f;
      }
      break;
    case MX_CONV_ACT_HARD_SWISH:
      for (int64_t i = 0; i < n; i++) {
        float v = out[i], t = v / 6.0f + 0.5f;
        t = t < 0.0f ? 0.0f : t;
        t = t > 1.0f ? 1.0f : t;
        out[i] = v * t;
      }
      break;
    case MX_CONV_ACT_SIGMOID:
      for (int64_t i = 0; i < n; i++) out[i] = mx__ksigmoidf(out[i]);
      break;
    case MX_CONV_ACT_SILU:
      for (int64_t i = 0; i < n; i++) out[i] = out[i] * mx__ksigmoidf(out[i]);
      break;
    default: break;
  }
}

MX_KHOT static void epilogue_f32(float *out, const float *src, const float *z, float bias, int64_t n,
                                 int32_t act, float a, float b) {
  epilogue_body(out, src, z, bias, n, act, a, b);
}

/* The epilogue of an sgemm tile: rows of n outputs, `ld` apart. */
MX_KHOT static void epilogue_rows_f32(float *y, const float *z, const float *bias, int64_t rows, int64_t n,
                                      int64_t ld, int32_t act, float a, float b) {
  for (int64_t r = 0; r < rows; r++)
    epilogue_body(y + r * ld, y + r * ld, z ? z + r * ld : NULL, bias ? bias[r] : 0.0f, n, act, a, b);
}

void mx__kconv_epilogue_f32(float *y, const float *z, int64_t n, int32_t act, float a, float b) {
  epilogue_f32(y, y, z, 0.0f, n, act, a, b);
}

/* --- im2col of a band of output rows ---------------------------------------------------------- */

/* Positions ow in [0, n) whose image column ow*s + off falls inside [0, width): [*lo, *hi). */
static void valid_range(int64_t n, int64_t s, int64_t off, int64_t width, int64_t *lo, int64_t *hi) {
  int64_t a = off >= 0 ? 0 : (-off + s - 1) / s;
  int64_t b = width - off <= 0 ? 0 : (width - off + s - 1) / s;
  if (b > n) b = n;
  if (a > b) a = b;
  *lo = a;
  *hi = b;
}

/* col [channels*taps, (r1-r0)*rowlen]: the patches of output rows [r0, r1) (depth and height
 * flattened). */
static void im2col_band(const float *x, int64_t channels, const mx_kwin *w, int64_t r0, int64_t r1,
                        float *col) {
  const int64_t rowlen = w->grid[2], cols = (r1 - r0) * rowlen, s = w->s[2];
  for (int64_t c = 0; c < channels; c++) {
    const float *xc = x + c * w->img_size;
    for (int64_t kd = 0; kd < w->k[0]; kd++)
      for (int64_t kh = 0; kh < w->k[1]; kh++)
        for (int64_t kw = 0; kw < w->k[2]; kw++) {
          float *row = col + (((c * w->k[0] + kd) * w->k[1] + kh) * w->k[2] + kw) * cols;
          int64_t off = kw * w->d[2] - w->pb[2], lo, hi;
          valid_range(rowlen, s, off, w->img[2], &lo, &hi);
          for (int64_t r = r0; r < r1; r++, row += rowlen) {
            int64_t od = r / w->grid[1], oh = r % w->grid[1];
            int64_t id = od * w->s[0] - w->pb[0] + kd * w->d[0];
            int64_t ih = oh * w->s[1] - w->pb[1] + kh * w->d[1];
            if (id < 0 || id >= w->img[0] || ih < 0 || ih >= w->img[1] || lo >= hi) {
              memset(row, 0, (size_t)rowlen * sizeof(float));
              continue;
            }
            const float *xr = xc + (id * w->img[1] + ih) * w->img[2];
            for (int64_t ow = 0; ow < lo; ow++) row[ow] = 0.0f;
            if (s == 1) {
              memcpy(row + lo, xr + lo + off, (size_t)(hi - lo) * sizeof(float));
            } else {
              for (int64_t ow = lo; ow < hi; ow++) row[ow] = xr[ow * s + off];
            }
            for (int64_t ow = hi; ow < rowlen; ow++) row[ow] = 0.0f;
          }
        }
  }
}

/* --- depthwise -------------------------------------------------------------------------------- */

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
MX_KHOT static void dw_channel(const fast_plan *p, const mx_kwin *w, const float *x, const float *wk,
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
      epilogue_body(y + oh * OW, acc + oh * pitch, z ? z + oh * OW : NULL, bias, OW, act, aa, ab);
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
    epilogue_body(y + oh * OW, ar, z ? z + oh * OW : NULL, bias, OW, act, aa, ab);
  }
}

/* --- tasks ------------------------------------------------------------------------------------ */

typedef struct fast_job {
  const mx_kconv_f32 *j;
  const fast_plan *p;
  float *scratch;
} fast_job;

static void run_task(void *vctx, int64_t task, int32_t slot) {
  const fast_job *fj = vctx;
  const mx_kconv_f32 *j = fj->j;
  const fast_plan *p = fj->p;
  const mx_kwin *w = j->w;
  float *scr = p->slot_floats ? fj->scratch + (size_t)slot * p->slot_floats : NULL; /* no scratch: NULL */
  if (p->algo == ALGO_DEPTHWISE) {
    /* task: one output channel of one image */
    int64_t in = task / j->m, oc = task % j->m, g = oc / p->mg;
    const float *xc = j->x + (in * j->c + g) * w->img_size;
    size_t yo = (size_t)(in * j->m + oc) * (size_t)p->P;
    dw_channel(p, w, xc, j->wt + oc * w->k_size, j->y + yo, scr, j->z ? j->z + yo : NULL,
               j->b ? j->b[oc] : 0.0f, j->act, j->alpha, j->beta);
    return;
  }
  int64_t mc = task % p->mchunks;
  int64_t rest = task / p->mchunks;
  int64_t band = rest % p->bands;
  rest /= p->bands;
  int64_t g = rest % j->group, in = rest / j->group;
  int64_t m0 = mc * p->mchunk, mn = p->mg - m0 < p->mchunk ? p->mg - m0 : p->mchunk;
  const float *xg = j->x + (in * j->c + g * p->cg) * w->img_size;
  const float *wg = j->wt + (g * p->mg + m0) * p->kdim;
  size_t yoff = (size_t)((in * j->m + g * p->mg + m0) * p->P);
  float *yg = j->y + yoff;
  const float *zg = j->z ? j->z + yoff : NULL;
  const float *bg = j->b ? j->b + g * p->mg + m0 : NULL;
  /* A residual read in place from Y (the float16 path widens it there) is the sgemm's C. */
  const bool z_in_y = j->z == j->y;
  if (z_in_y) zg = NULL;
  int64_t c0, ncols;
  const float *bmat;
  int64_t ldb;
  if (p->algo == ALGO_POINTWISE) {
    c0 = band * p->band_rows;
    ncols = p->P - c0 < p->band_rows ? p->P - c0 : p->band_rows;
    bmat = xg + c0;
    ldb = p->P;
  } else {
    int64_t r0 = band * p->band_rows, r1 = r0 + p->band_rows > p->rows ? p->rows : r0 + p->band_rows;
    c0 = r0 * p->rowlen;
    ncols = (r1 - r0) * p->rowlen;
    im2col_band(xg, p->cg, w, r0, r1, scr);
    bmat = scr;
    ldb = ncols;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)mn, (blasint)ncols, (blasint)p->kdim, 1.0f,
              wg, (blasint)p->kdim, bmat, (blasint)ldb, z_in_y ? 1.0f : 0.0f, yg + c0, (blasint)p->P);
  epilogue_rows_f32(yg + c0, zg ? zg + c0 : NULL, bg, mn, ncols, p->P, j->act, j->alpha, j->beta);
}

bool mx__kconv_f32_run(const mx_kconv_f32 *j, float *scratch, size_t scratch_floats) {
  const mx_kwin *w = j->w;
  if (j->c % j->group || j->m % j->group) return false;
  int32_t slots = mx__kthreads();
  fast_plan p;
  make_plan(w, j->n, j->c, j->m, j->group, slots, &p);
  if (p.slot_floats) {
    size_t fit = scratch_floats / p.slot_floats;
    if (fit < 1) return false;
    if ((size_t)slots > fit) slots = (int32_t)fit;
  }
  fast_job fj = {j, &p, scratch};
  int64_t tasks = p.algo == ALGO_DEPTHWISE ? j->n * j->m : j->n * j->group * p.bands * p.mchunks;
  mx__kparallel(tasks, slots, run_task, &fj);
  return true;
}
