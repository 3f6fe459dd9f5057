/* The Winograd F(4x4, 3x3) float32 Conv core (see kernels/conv_winograd.h): plan, tasks and the
 * three transforms.
 *
 * Tiles are numbered over the whole batch, image by image, tile row by tile row. A block of
 * tiles (whole 32-column GEMM panels) is the unit of work: its input transform V (36 points x C x tiles, each point
 * written straight into the own GEMM's packed-B panels), its 36 products into Mout (36 points x
 * M x tiles) and its output transform, so a block stays in L2 from one step to the next.
 * With at least two blocks per thread each task runs one block alone; with fewer (the 14x14
 * and 7x7 maps) all blocks are transformed first by all threads into a shared V, then tasks
 * of (block, output-channel chunk) run the products and the output transform. The arithmetic
 * of every output is the same in both ways. */
#include <stdlib.h>
#include <string.h>

#include "kernels/conv_epilogue.h"
#include "kernels/conv_winograd.h"
#include "kernels/conv_winograd_lanes.h"
#include "kernels/gemm_f32.h"
#include "kernels/kmath.h"
#include "kernels/prepack.h"
#include "kernels/threads.h"

/* Bytes of V and Mout a block aims at: they and the weights of one point stay in L2. */
#define BLOCK_BYTES (1024 * 1024)
/* Floats between the 36 points' planes of V and Mout beyond their data: planes of a power-of-two
 * size (64 channels x 32 tiles: 8 KB) would all start in the same L1 set, and a tile's 36 points
 * are written (read) together. */
#define PLANE_SKEW 16

static int64_t round_up(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

typedef struct wino_plan {
  int64_t th, tw;          /* tile rows and columns of one image */
  int64_t tiles;           /* tiles of the batch */
  int64_t tb;              /* tiles per block: whole 32-column panels (every product's width) */
  int64_t blocks;          /* blocks of the batch */
  int64_t mr;              /* row panels of the transformed weights (the GEMM's register tile) */
  int64_t mchunk, mchunks; /* output channels per product task */
  bool shared_v;           /* all blocks' V transformed first into a shared buffer */
  size_t u_floats;         /* the weights' transform, plain then packed (when not pre-packed) */
  size_t v_floats;         /* V of one block */
  size_t slot_floats;      /* per thread: [V (not shared)] Mout, GEMM scratch, transform rows */
  size_t line_floats;      /* the transform rows of a slot */
} wino_plan;

bool mx__kconv_wino_applies(const mx_kwin *w, int64_t c, int64_t m, int64_t group) {
  if (w->spatial != 2 || group != 1 || c < 1 || m < 1) return false;
  for (int i = 1; i < 3; i++)
    if (w->k[i] != 3 || w->s[i] != 1 || w->d[i] != 1) return false;
  if (w->img[0] != 1 || w->grid[0] != 1 || w->grid[1] < 1 || w->grid[2] < 1) return false;
  return mx__kgemm_f32_available();
}

/* MIXRT_WINOGRAD=0 (or off) turns the core off, for comparisons; read once. */
static bool wino_enabled(void) {
  static int enabled = -1;
  int e = __atomic_load_n(&enabled, __ATOMIC_RELAXED);
  if (e < 0) {
    const char *env = getenv("MIXRT_WINOGRAD");
    e = !(env && (strcmp(env, "0") == 0 || strcmp(env, "off") == 0));
    __atomic_store_n(&enabled, e, __ATOMIC_RELAXED);
  }
  return e != 0;
}

bool mx__kconv_wino_chosen(const mx_kwin *w, int64_t n, int64_t c, int64_t m, int64_t group) {
  (void)n;
  if (!wino_enabled() || !mx__kconv_wino_applies(w, c, m, group)) return false;
  /* Measured on ResNet-50's stride-1 3x3 layers (bench/RESULTS.md, "Winograd 3x3"): 56x56
   * and 28x28 maps gain; 14x14 (16 tiles padded to a 32-column panel) gains with the lane
   * transforms (kernels/conv_winograd_lanes.c) and breaks even with the plain ones; 7x7 (4
   * tiles in a panel) loses 3x. So an image of at least 4x4 tiles (13x13 outputs), or 7x7
   * tiles (25x25) with the plain transforms, and 16 channels each way, below which the
   * transforms cost what the products save. */
  const int64_t tiles = ((w->grid[1] + 3) / 4) * ((w->grid[2] + 3) / 4);
  return c >= 16 && m >= 16 && tiles >= (mx__kwino_lanes() ? 16 : 49);
}

/* Floats of the transformed weights in the GEMM's row panels of mr (all 36 points). */
static size_t packed_u_floats(int64_t m, int64_t c, int64_t mr) {
  return (size_t)MX_KWINO_POINTS * (size_t)round_up((int64_t)mx__kgemm_f32_pre_a_floats(m, c, mr), 16);
}

int64_t mx__kconv_wino_mr(void) { return mx__kgemm_f32_row_granule(64, MX_KGEMM_NR); }

size_t mx__kconv_wino_packed_floats(int64_t m, int64_t c) { return packed_u_floats(m, c, mx__kconv_wino_mr()); }

/* Floats of a slot's Mout: 36 planes of an output-channel chunk's tiles. */
static size_t mout_floats(const wino_plan *p) {
  return (size_t)round_up(MX_KWINO_POINTS * (p->mchunk * p->tb + PLANE_SKEW), 16);
}

static void make_plan(const mx_kwin *w, int64_t n, int64_t c, int64_t m, int32_t slots, wino_plan *p) {
  memset(p, 0, sizeof *p);
  p->th = (w->grid[1] + 3) / 4;
  p->tw = (w->grid[2] + 3) / 4;
  p->tiles = n * p->th * p->tw;
  /* Products of whole 32-column panels never take the GEMM's narrow (transposed) path, so
   * every product, the batch's last included, reads the weights in the same row panels. */
  const int64_t per_panel = (int64_t)MX_KWINO_POINTS * (c + m) * 4 * MX_KGEMM_NR;
  int64_t tb = BLOCK_BYTES / per_panel * MX_KGEMM_NR;
  if (tb < MX_KGEMM_NR) tb = MX_KGEMM_NR;
  if (tb > round_up(p->tiles, MX_KGEMM_NR)) tb = round_up(p->tiles, MX_KGEMM_NR);
  p->blocks = (p->tiles + tb - 1) / tb;
  p->tb = round_up((p->tiles + p->blocks - 1) / p->blocks, MX_KGEMM_NR);
  p->blocks = (p->tiles + p->tb - 1) / p->tb;
  p->mr = mx__kconv_wino_mr();
  p->u_floats = (size_t)round_up((int64_t)mx__kconv_wino_u_floats(m, c), 16) + packed_u_floats(m, c, p->mr);
  p->v_floats = (size_t)round_up(MX_KWINO_POINTS * (c * p->tb + PLANE_SKEW), 16);
  p->mchunk = m;
  p->mchunks = 1;
  p->shared_v = slots > 1 && p->blocks < 2 * slots;
  if (p->shared_v) {
    /* one (block, chunk) task per thread, chunks of whole row panels: every chunk reads all of
     * its block's V, which both threads wrote, so more and smaller chunks read more of it from
     * the other core's cache. ResNet-50 at 2 threads, alternated 4 times: two tasks per thread
     * 31.2-31.5 ms, one 29.8-30.6; its 28x28 maps' two blocks then go one to each thread. */
    const int64_t want = (slots + p->blocks - 1) / p->blocks;
    const int64_t panels = (m + p->mr - 1) / p->mr;
    int64_t chunk = (panels + want - 1) / want * p->mr;
    p->mchunk = chunk > m ? m : chunk;
    p->mchunks = (m + p->mchunk - 1) / p->mchunk;
  }
  /* transform rows: the input band and its row transform (6 + 6 rows), the output's column
   * sums (24 rows of tw) and 4 output rows */
  const int64_t width = round_up(p->tw * 4 + 2, 16);
  p->line_floats = (size_t)(16 * width + 24 * round_up(p->tw, 16));
  p->slot_floats = (p->shared_v ? 0 : p->v_floats) + mout_floats(p) +
                   (size_t)round_up((int64_t)mx__kgemm_f32_a_floats(p->mchunk), 16) + p->line_floats;
}

static size_t plan_total(const wino_plan *p, int32_t slots) {
  return p->u_floats + (p->shared_v ? (size_t)p->blocks * p->v_floats : 0) + (size_t)slots * p->slot_floats;
}

size_t mx__kconv_wino_ws_floats(const mx_kwin *w, int64_t n, int64_t c, int64_t m, int64_t group,
                                int32_t slots) {
  if (!mx__kconv_wino_applies(w, c, m, group)) return 0;
  /* a run plans for the threads its work repays, maybe fewer than the pool: the largest plan */
  size_t most = 0;
  for (int32_t s = 1; s <= slots; s++) {
    wino_plan p;
    make_plan(w, n, c, m, s, &p);
    size_t t = plan_total(&p, s);
    if (t > most) most = t;
  }
  return most;
}

/* --- transforms ------------------------------------------------------------------------------- */

void mx__kconv_wino_transform_weights(const float *wt, int64_t m, int64_t c, int64_t m0, int64_t m1, float *u) {
  /* G g G^T in double, rounded once: the weights' transform adds no error of its own */
  const size_t plane = (size_t)m * (size_t)c;
  for (int64_t om = m0; om < m1; om++)
    for (int64_t ic = 0; ic < c; ic++) {
      const float *g = wt + (om * c + ic) * 9;
      double t[6][3];
      for (int j = 0; j < 3; j++) {
        const double g0 = g[j], g1 = g[3 + j], g2 = g[6 + j];
        t[0][j] = g0 / 4.0;
        t[1][j] = -(g0 + g1 + g2) / 6.0;
        t[2][j] = -(g0 - g1 + g2) / 6.0;
        t[3][j] = g0 / 24.0 + g1 / 12.0 + g2 / 6.0;
        t[4][j] = g0 / 24.0 - g1 / 12.0 + g2 / 6.0;
        t[5][j] = g2;
      }
      float *dst = u + (size_t)om * (size_t)c + (size_t)ic;
      for (int i = 0; i < 6; i++) {
        const double g0 = t[i][0], g1 = t[i][1], g2 = t[i][2];
        const double r[6] = {g0 / 4.0,
                             -(g0 + g1 + g2) / 6.0,
                             -(g0 - g1 + g2) / 6.0,
                             g0 / 24.0 + g1 / 12.0 + g2 / 6.0,
                             g0 / 24.0 - g1 / 12.0 + g2 / 6.0,
                             g2};
        for (int k = 0; k < 6; k++) dst[(size_t)(i * 6 + k) * plane] = (float)r[k];
      }
    }
}

/* B^T d of six values (one column of a tile, or one row of it). */
#define WINO_BT(d0, d1, d2, d3, d4, d5, o0, o1, o2, o3, o4, o5) \
  do {                                                          \
    o0 = 4.0f * (d0) - 5.0f * (d2) + (d4);                      \
    o1 = ((d3) + (d4)) - 4.0f * ((d1) + (d2));                  \
    o2 = ((d4) - (d3)) + 4.0f * ((d1) - (d2));                  \
    o3 = ((d4) - (d2)) + 2.0f * ((d3) - (d1));                  \
    o4 = ((d4) - (d2)) - 2.0f * ((d3) - (d1));                  \
    o5 = 4.0f * (d1) - 5.0f * (d3) + (d5);                      \
  } while (0)

/* A^T m of six values. */
#define WINO_AT(m0, m1, m2, m3, m4, m5, o0, o1, o2, o3)  \
  do {                                                   \
    o0 = (m0) + ((m1) + (m2)) + ((m3) + (m4));           \
    o1 = ((m1) - (m2)) + 2.0f * ((m3) - (m4));           \
    o2 = ((m1) + (m2)) + 4.0f * ((m3) + (m4));           \
    o3 = ((m1) - (m2)) + 8.0f * ((m3) - (m4)) + (m5);    \
  } while (0)

/* The input transform of one channel's tile row: band holds the 6 image rows the tiles read
 * (zero outside the image), `width` = tw*4+2 columns, `ld` apart; t1 scratch of the same
 * shape. Tile tc's point (k, l) goes to v[(k*6+l)*vstride + panel offset of tile t0+tc]. */
MX_KHOT static void input_tile_row(const float *band, int64_t ld, int64_t tw, float *t1, float *v,
                                   int64_t vstride, int64_t c, int64_t ch, int64_t t0) {
  const int64_t width = tw * 4 + 2;
  /* B^T along the rows, all columns at once */
  {
    const float *d0 = band, *d1 = band + ld, *d2 = band + 2 * ld, *d3 = band + 3 * ld, *d4 = band + 4 * ld,
                *d5 = band + 5 * ld;
    float *o0 = t1, *o1 = t1 + ld, *o2 = t1 + 2 * ld, *o3 = t1 + 3 * ld, *o4 = t1 + 4 * ld, *o5 = t1 + 5 * ld;
    for (int64_t x = 0; x < width; x++)
      WINO_BT(d0[x], d1[x], d2[x], d3[x], d4[x], d5[x], o0[x], o1[x], o2[x], o3[x], o4[x], o5[x]);
  }
  /* B^T along each tile's columns, written into the packed panels */
  for (int k = 0; k < 6; k++) {
    const float *r = t1 + k * ld;
    float *vk = v + (size_t)(k * 6) * (size_t)vstride;
    for (int64_t tc = 0; tc < tw; tc++) {
      const int64_t t = t0 + tc;
      const size_t off = (size_t)((t / MX_KGEMM_NR) * c * MX_KGEMM_NR + ch * MX_KGEMM_NR + t % MX_KGEMM_NR);
      const float *d = r + 4 * tc;
      float o0, o1, o2, o3, o4, o5;
      WINO_BT(d[0], d[1], d[2], d[3], d[4], d[5], o0, o1, o2, o3, o4, o5);
      vk[off] = o0;
      vk[off + (size_t)vstride] = o1;
      vk[off + 2 * (size_t)vstride] = o2;
      vk[off + 3 * (size_t)vstride] = o3;
      vk[off + 4 * (size_t)vstride] = o4;
      vk[off + 5 * (size_t)vstride] = o5;
    }
  }
}

/* The output transform of one output channel's tile row: mo[p * mstride + tc] is point p of
 * tile tc; the 4 output rows (tw*4 columns, `ld` apart) go to out. s: 24 rows of tw scratch. */
MX_KHOT static void output_tile_row(const float *mo, int64_t mstride, int64_t tw, float *s, int64_t sld,
                                    float *out, int64_t ld) {
  /* A^T along the tile's rows (the point index k), every tile at once: s[a*6 + l][tc] */
  for (int l = 0; l < 6; l++) {
    const float *m0 = mo + (size_t)l * (size_t)mstride, *m1 = m0 + 6 * mstride, *m2 = m0 + 12 * mstride,
                *m3 = m0 + 18 * mstride, *m4 = m0 + 24 * mstride, *m5 = m0 + 30 * mstride;
    float *o0 = s + l * sld, *o1 = s + (6 + l) * sld, *o2 = s + (12 + l) * sld, *o3 = s + (18 + l) * sld;
    for (int64_t tc = 0; tc < tw; tc++)
      WINO_AT(m0[tc], m1[tc], m2[tc], m3[tc], m4[tc], m5[tc], o0[tc], o1[tc], o2[tc], o3[tc]);
  }
  /* A^T along the columns (l): output row a, columns 4*tc .. 4*tc+3 */
  for (int a = 0; a < 4; a++) {
    const float *r = s + a * 6 * sld;
    float *row = out + a * ld;
    for (int64_t tc = 0; tc < tw; tc++) {
      float o0, o1, o2, o3;
      WINO_AT(r[tc], r[sld + tc], r[2 * sld + tc], r[3 * sld + tc], r[4 * sld + tc], r[5 * sld + tc], o0, o1,
              o2, o3);
      row[4 * tc] = o0;
      row[4 * tc + 1] = o1;
      row[4 * tc + 2] = o2;
      row[4 * tc + 3] = o3;
    }
  }
}

MX_KHOT static void epilogue_row(float *out, const float *src, const float *z, float bias, int64_t n, int32_t act,
                                 float a, float b) {
  mx__kconv_epilogue_body(out, src, z, bias, n, act, a, b);
}

/* --- tasks ------------------------------------------------------------------------------------ */

typedef struct wino_job {
  const mx_kconv_f32 *j;
  const wino_plan *p;
  const float *u;  /* transformed weights in row panels */
  float *u_plain;  /* this run's plain transform (NULL: pre-packed) */
  float *u_dst;    /* where this run packs it */
  float *v_shared; /* every block's V (p->shared_v), or NULL */
  float *slots;    /* the threads' slots */
  int64_t u_tasks; /* the weights' transform tasks (first in the prepare run) */
  int64_t c_parts; /* shared V: tasks per block (channel ranges) */
} wino_job;

void mx__kconv_wino_pack_weights(const float *u, int64_t m, int64_t c, int64_t mr, int64_t r0, int64_t rows,
                                 float *up) {
  const size_t plane = (size_t)m * (size_t)c, psize = packed_u_floats(m, c, mr) / MX_KWINO_POINTS;
  for (int q = 0; q < MX_KWINO_POINTS; q++)
    mx__kgemm_f32_pre_a_pack(u + q * plane, c, m, c, mr, r0, rows, up + q * psize);
}

/* Tiles [t0, t0 + count) of block `block` (count < tb only for the batch's last). */
static int64_t block_tiles(const wino_plan *p, int64_t block, int64_t *t0) {
  *t0 = block * p->tb;
  return p->tiles - *t0 < p->tb ? p->tiles - *t0 : p->tb;
}

/* The columns a block's products compute: its tiles to a multiple of 16, so a last half panel
 * (a 14x14 map's 16 tiles) runs the GEMM's 16-column tile instead of a whole panel of zeros;
 * the columns computed past the last tile are dropped. */
static int64_t computed_cols(const wino_plan *p, int64_t ntiles) {
  return round_up(ntiles, 16) < p->tb ? round_up(ntiles, 16) : p->tb;
}

/* Channels [c0, c1) of a block's V: each tile-row segment's six image rows copied into a
 * zero-padded band, then transformed. The columns past the batch's last tile are zeroed. */
static void transform_block(const wino_job *wj, int64_t block, int64_t c0, int64_t c1, float *v, float *line) {
  const wino_plan *p = wj->p;
  const mx_kconv_f32 *j = wj->j;
  const mx_kwin *w = j->w;
  const int64_t H = w->img[1], W = w->img[2], pt = w->pb[1], pl = w->pb[2];
  const int64_t ld = round_up(p->tw * 4 + 2, 16);
  float *band = line, *t1 = line + 6 * ld;
  int64_t t0;
  const int64_t ntiles = block_tiles(p, block, &t0);
  const int64_t vstride = j->c * p->tb + PLANE_SKEW;
  const bool lanes = mx__kwino_lanes();
  for (int64_t ch = c0; ch < c1; ch++) {
    for (int64_t local = 0; local < ntiles;) {
      /* the segment [tc0, tc1) of tile row r the block covers from its tile `local` on */
      const int64_t r = (t0 + local) / p->tw, tc0 = (t0 + local) % p->tw;
      const int64_t tc1 = tc0 + (ntiles - local) < p->tw ? tc0 + (ntiles - local) : p->tw;
      const int64_t in = r / p->th, tr = r % p->th, width = (tc1 - tc0) * 4 + 2;
      const float *xc = j->x + (in * j->c + ch) * w->img_size;
      /* band column x reads image column x0 + x */
      const int64_t x0 = tc0 * 4 - pl;
      if (lanes) {
        mx__kwino_input_segment(xc, H, W, tr * 4 - pt, x0, tc1 - tc0, v, vstride, j->c, ch, local);
        local += tc1 - tc0;
        continue;
      }
      int64_t xlo = -x0, xhi = W - x0;
      xlo = xlo < 0 ? 0 : xlo > width ? width : xlo;
      xhi = xhi < 0 ? 0 : xhi > width ? width : xhi;
      for (int i = 0; i < 6; i++) {
        float *b = band + i * ld;
        const int64_t ih = tr * 4 - pt + i;
        if (ih < 0 || ih >= H || xlo >= xhi) {
          memset(b, 0, (size_t)width * sizeof(float));
          continue;
        }
        memset(b, 0, (size_t)xlo * sizeof(float));
        memcpy(b + xlo, xc + ih * W + x0 + xlo, (size_t)(xhi - xlo) * sizeof(float));
        if (xhi < width) memset(b + xhi, 0, (size_t)(width - xhi) * sizeof(float));
      }
      input_tile_row(band, ld, tc1 - tc0, t1, v, vstride, j->c, ch, local);
      local += tc1 - tc0;
    }
  }
  /* The batch's last block: the columns the products compute past its last tile are zeroed:
   * they are dropped, but must not hold stale NaNs or denormals. The rest of the panel is never
   * read (a 14x14 map's 16 tiles: nothing to zero; zeroing up to the whole panel wrote 590 KB
   * per run there). */
  const int64_t computed = computed_cols(p, ntiles);
  if (ntiles < computed) {
    const int64_t panel0 = ntiles / MX_KGEMM_NR, tail = ntiles % MX_KGEMM_NR;
    for (int q = 0; q < MX_KWINO_POINTS; q++)
      for (int64_t pn = panel0; pn * MX_KGEMM_NR < computed; pn++) {
        float *pv = v + (size_t)q * (size_t)vstride + (size_t)(pn * j->c * MX_KGEMM_NR);
        const int64_t from = pn == panel0 ? tail : 0;
        const int64_t to = computed - pn * MX_KGEMM_NR < MX_KGEMM_NR ? computed - pn * MX_KGEMM_NR : MX_KGEMM_NR;
        for (int64_t ch = c0; ch < c1; ch++)
          memset(pv + ch * MX_KGEMM_NR + from, 0, (size_t)(to - from) * sizeof(float));
      }
  }
}

/* Output channels [m0, m0 + mn) of a block: the 36 products (tb columns each, whole panels),
 * then the output transform with the epilogue. */
static void products_block(const wino_job *wj, int64_t block, int64_t m0, int64_t mn, const float *v, float *slot) {
  const wino_plan *p = wj->p;
  const mx_kconv_f32 *j = wj->j;
  const mx_kwin *w = j->w;
  int64_t t0;
  const int64_t ntiles = block_tiles(p, block, &t0), vstride = j->c * p->tb + PLANE_SKEW;
  float *mo = slot, *ascr = mo + mout_floats(p);
  float *line = ascr + round_up((int64_t)mx__kgemm_f32_a_floats(p->mchunk), 16);
  const size_t plane = (size_t)j->m * (size_t)j->c, mplane = (size_t)(mn * p->tb + PLANE_SKEW);
  const size_t psize = packed_u_floats(j->m, j->c, p->mr) / MX_KWINO_POINTS;
  const int64_t mpad = round_up(j->m, p->mr);
  const int64_t cols = computed_cols(p, ntiles);
  for (int q = 0; q < MX_KWINO_POINTS; q++) {
    const mx_kgemm_f32_pre_a pa = {wj->u + q * psize, p->mr, mpad, m0};
    /* the plain weights are read only if the panels did not fit the product (never here) */
    const float *a = wj->u_plain ? wj->u_plain + q * plane + (size_t)m0 * (size_t)j->c : NULL;
    mx__kgemm_f32_packed_pre(mn, cols, j->c, a, j->c, &pa, v + (size_t)q * (size_t)vstride, mo + q * mplane,
                             p->tb, ascr, NULL, NULL);
  }
  const int64_t OH = w->grid[1], OW = w->grid[2];
  const int64_t sld = round_up(p->tw, 16), ld = round_up(p->tw * 4 + 2, 16);
  float *s = line, *orows = line + 24 * sld;
  const bool lanes = mx__kwino_lanes();
  for (int64_t om = m0; om < m0 + mn; om++) {
    const float bias = j->b ? j->b[om] : 0.0f;
    for (int64_t local = 0; local < ntiles;) {
      /* the segment [tc0, tc1) of tile row r the block covers from its tile `local` on */
      const int64_t r = (t0 + local) / p->tw, tc0 = (t0 + local) % p->tw;
      const int64_t tc1 = tc0 + (ntiles - local) < p->tw ? tc0 + (ntiles - local) : p->tw;
      const int64_t in = r / p->th, tr = r % p->th;
      const float *mt = mo + (size_t)(om - m0) * (size_t)p->tb + (size_t)local;
      if (lanes)
        mx__kwino_output_rows(mt, (int64_t)mplane, tc1 - tc0, orows, ld);
      else
        output_tile_row(mt, (int64_t)mplane, tc1 - tc0, s, sld, orows, ld);
      const int64_t ox = tc0 * 4, on = (tc1 * 4 < OW ? tc1 * 4 : OW) - ox;
      const size_t ybase = (size_t)((in * j->m + om) * w->grid_size + ox);
      for (int a = 0; a < 4 && tr * 4 + a < OH; a++) {
        const size_t at = ybase + (size_t)((tr * 4 + a) * OW);
        epilogue_row(j->y + at, orows + a * ld, j->z ? j->z + at : NULL, bias, on, j->act, j->alpha, j->beta);
      }
      local += tc1 - tc0;
    }
  }
}

/* One task of the weights' transform: rows [r0, r0 + U_PANELS * mr), plain, then packed. */
#define U_PANELS 2

static void run_weights(const wino_job *wj, int64_t task) {
  const int64_t m = wj->j->m, rows = U_PANELS * wj->p->mr, r0 = task * rows;
  const int64_t r1 = r0 + rows > m ? m : r0 + rows;
  mx__kconv_wino_transform_weights(wj->j->wt, m, wj->j->c, r0, r1, wj->u_plain);
  mx__kconv_wino_pack_weights(wj->u_plain, m, wj->j->c, wj->p->mr, r0, r1 - r0, wj->u_dst);
}

/* The work ahead of the products: the weights' transform tasks, then (shared V) every block's
 * input transform in channel ranges. */
static void run_prepare(void *ctx, int64_t task, int32_t slot) {
  const wino_job *wj = ctx;
  if (task < wj->u_tasks) {
    run_weights(wj, task);
    return;
  }
  task -= wj->u_tasks;
  const wino_plan *p = wj->p;
  const int64_t block = task / wj->c_parts, part = task % wj->c_parts, c = wj->j->c;
  float *line = wj->slots + (size_t)slot * p->slot_floats + p->slot_floats - p->line_floats;
  transform_block(wj, block, part * c / wj->c_parts, (part + 1) * c / wj->c_parts,
                  wj->v_shared + (size_t)block * p->v_floats, line);
}

/* A task of the products: one block alone (its V in the slot), or (shared V) one block's
 * output-channel chunk. */
static void run_block(void *ctx, int64_t task, int32_t slot) {
  const wino_job *wj = ctx;
  const wino_plan *p = wj->p;
  float *sl = wj->slots + (size_t)slot * p->slot_floats;
  if (!p->shared_v) {
    float *line = sl + p->slot_floats - p->line_floats;
    transform_block(wj, task, 0, wj->j->c, sl, line);
    products_block(wj, task, 0, wj->j->m, sl, sl + p->v_floats);
    return;
  }
  const int64_t block = task / p->mchunks, mc = task % p->mchunks;
  const int64_t m0 = mc * p->mchunk, mn = wj->j->m - m0 < p->mchunk ? wj->j->m - m0 : p->mchunk;
  products_block(wj, block, m0, mn, wj->v_shared + (size_t)block * p->v_floats, sl);
}

bool mx__kconv_wino_run(const mx_kconv_f32 *j, const float *u_pre, float *scratch, size_t scratch_floats) {
  const mx_kwin *w = j->w;
  if (!mx__kconv_wino_applies(w, j->c, j->m, j->group)) return false;
  const int64_t work = j->n * j->m * w->grid_size * j->c * 9;
  int32_t slots = mx__kthreads_for_work(work);
  wino_plan p;
  for (;; slots--) {
    /* fewer threads when the workspace was sized for a smaller pool */
    if (slots < 1) return false;
    make_plan(w, j->n, j->c, j->m, slots, &p);
    if (u_pre) p.u_floats = 0;
    if (plan_total(&p, slots) <= scratch_floats) break;
  }
  wino_job wj = {.j = j, .p = &p, .u = u_pre};
  float *at = scratch;
  if (!u_pre) {
    wj.u_plain = at;
    wj.u_dst = at + round_up((int64_t)mx__kconv_wino_u_floats(j->m, j->c), 16);
    wj.u = wj.u_dst;
    at += p.u_floats;
    wj.u_tasks = (j->m + U_PANELS * p.mr - 1) / (U_PANELS * p.mr);
  }
  if (p.shared_v) {
    wj.v_shared = at;
    at += (size_t)p.blocks * p.v_floats;
  }
  wj.slots = at;
  if (p.shared_v) {
    wj.c_parts = (4 * slots + p.blocks - 1) / p.blocks;
    if (wj.c_parts > j->c) wj.c_parts = j->c;
    mx__kparallel(wj.u_tasks + p.blocks * wj.c_parts, slots, run_prepare, &wj);
    mx__kparallel(p.blocks * p.mchunks, slots, run_block, &wj);
  } else {
    if (wj.u_tasks) mx__kparallel(wj.u_tasks, slots, run_prepare, &wj);
    mx__kparallel(p.blocks, slots, run_block, &wj);
  }
  return true;
}

const float *mx__kconv_wino_prepacked(const mx_kernel_call *call, const float *wt) {
  if (call->n_in < 2 || wt != call->t[1].data || call->t[1].rank != 4) return NULL;
  const mx_kernel_prepack_layout want = {
      {MX_KPREPACK_CONV_WINO, call->t[1].dims[0], call->t[1].dims[1], mx__kconv_wino_mr()}};
  return mx__kprepack_find(call, 1, &want);
}
