/* The float32 Conv cores (float16/bfloat16 run through them widened): an algorithm per shape,
 * with the bias, a residual input and the fused activation applied in one epilogue while the
 * output tile is still in cache, and the work split into tasks for the intra-op thread pool.
 *
 *   pointwise (1x1 taps, stride 1, no padding): the image is its own im2col matrix, so each
 *     task is one sgemm over a slice of its columns;
 *   depthwise (one input channel per output channel, 1-D and 2-D): kernels/conv_depthwise.c;
 *   the rest: im2col of a band of output rows sized to stay in L2, then one sgemm per band
 *     (a whole-image im2col of a 56x56 layer is several MB and leaves the cache before the
 *     sgemm reads it).
 * The dense paths run mixrt's packed GEMM (kernels/gemm_f32.h) where the CPU has AVX-512 or
 * AVX2 with FMA: a band's columns (image rows, or im2col rows one at a time) are written
 * straight into its panel layout, and the epilogue runs on each tile as it is finished. Elsewhere,
 * and for a residual read in place from Y, they run OpenBLAS's cblas_sgemm. On several threads
 * a band that several output-channel chunks read is packed once, by all the threads (channel
 * ranges), before the chunks' products run (for narrow products, a 7x7 map's, already in the
 * column groups they read); the bands and chunks are those of least modelled
 * span on the run's threads (even_split), so the threads' shares end together. A map 7 outputs
 * wide (ResNet's last stage) skips the im2col on AVX-512: its narrow product reads B straight
 * from the image, zero-padded into the slot when the Conv pads (gather_b).
 * Every output adds its taps in one fixed order, whatever the ISA copy or the thread count
 * (the sgemm path: whatever the thread count). */
#include <cblas.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/conv_depthwise.h"
#include "kernels/conv_epilogue.h"
#include "kernels/conv_gemv.h"
#include "kernels/conv_impl.h"
#include "kernels/gemm_f32.h"
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
  bool own_gemm;      /* the dense paths run mixrt's packed GEMM (kernels/gemm_f32.h), not sgemm */
  size_t packed_floats; /* own GEMM: the packed B band at the start of a slot, A blocks after it */
  size_t gemm_floats;   /* own GEMM: its scratch (A blocks), then one im2col row */
  size_t slot_floats; /* scratch per thread */
  int64_t pre_mr;     /* own GEMM: the row panels the weights are read in when packed ahead */
  size_t pre_floats;  /* weights read by several tasks: packed once per run (all groups), ahead
                         of the threads' slots (0: each task packs its own) */
  bool shared_b;      /* own GEMM, a band read by several output-channel chunks: every band packed
                         once per run (in parallel, ahead of the products) into a shared block */
  size_t shared_floats; /* that block: n x group x bands packed bands of packed_floats */
  int64_t kparts;     /* tasks packing one band of it (channel ranges) */
  bool narrow_b;      /* shared_b for narrow products (a 7x7 map's 49 columns, run transposed):
                         the bands stored in the column groups those products read
                         (mx__kgemm_f32_narrow_b_row), not in panels each chunk regroups again */
  bool direct_b;      /* own GEMM, pointwise: the product reads its B (the image's rows) in
                         place, nothing packed (pointwise_direct) */
  bool gather_b;      /* own GEMM, output rows 7 or a multiple of 14 wide: the product reads B
                         straight from the image (mx__kgemm_f32_gather), no im2col, nothing shared */
  int64_t gather_h, gather_w; /* the image a band reads: zero-padded (rows, columns), or in place */
  bool gather_copy;           /* the image needs its padding: copied into the slot first */
} fast_plan;

static int64_t round_up(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

/* Pointwise bands of `band` columns (whole panels) over P columns: a last remainder of less than
 * a panel joins the band before it instead of running as a task of its own (196 columns in bands
 * of 64: 64, 64 and 68, not 64, 64, 64 and 4, a task that costs a panel's pass over all of k and
 * left one thread 128 columns and the other 68). */
static int64_t pw_band_count(int64_t P, int64_t band) {
  int64_t bands = (P + band - 1) / band;
  /* (bands of 64 columns or more: the widened one is never a narrow product, kernels/gemm_f32.h) */
  if (bands > 1 && band >= 2 * MX_KGEMM_NR && P - (bands - 1) * band < MX_KGEMM_NR) bands--;
  return bands;
}

static bool is_pointwise(const mx_kwin *w) {
  for (int i = 0; i < 3; i++)
    if (w->k[i] != 1 || w->s[i] != 1 || w->pb[i] != 0 || w->img[i] != w->grid[i]) return false;
  return true;
}

/* Of the band sizes from `band` down to half of it (multiples of `step`, at least `least`), the
 * one whose bands end soonest on `slots` threads taking them in turn (ties: the larger band).
 * The cache rule's band need not divide the map: 56 output rows in bands of 5 are 11 bands and
 * one of a single row, and two threads then finish after 6 bands where 14 bands of 4 take 28
 * rows each. */
static int64_t balanced_band(int64_t band, int64_t units, int64_t outer, int32_t slots, int64_t step,
                             int64_t least) {
  int64_t best = band, best_span = -1;
  for (int64_t b = band; b >= step && 2 * b >= band && b >= least; b -= step) {
    if (b != band && b % step) continue;
    const int64_t tasks = outer * ((units + b - 1) / b);
    const int64_t rounds = (tasks + slots - 1) / slots;
    /* the last band of an image is shorter: count what the busiest thread gets */
    const int64_t span = rounds * b;
    if (best_span < 0 || span < best_span) best = b, best_span = span;
  }
  return best;
}

static void even_split(fast_plan *p, int64_t outer, int32_t slots, int64_t cache_band);

/* A comparison switch of the environment, read once into *cached: 1 when `name` is unset or
 * holds none of the `count` values, else 2 + the index of the one it holds. */
static int env_switch(_Atomic int *cached, const char *name, const char *const *values, int count) {
  int v = atomic_load_explicit(cached, memory_order_relaxed);
  if (!v) {
    const char *env = getenv(name);
    v = 1;
    for (int i = 0; env && i < count; i++)
      if (strcmp(env, values[i]) == 0) v = 2 + i;
    atomic_store_explicit(cached, v, memory_order_relaxed);
  }
  return v;
}

/* The tasks of the own GEMM's paths: bands of equal size (the cache rule's count). On several
 * threads, when the tasks are fewer than two per thread or do not divide among the threads,
 * more bands (while a band keeps 64 columns), else output-channel chunks of whole row tiles.
 * The chunks of a band read it packed from a shared block that all threads fill first
 * (p->shared_b): packed per chunk, a 14x14 or 7x7 map's im2col ran once per chunk, and two
 * threads did 1.3-1.7x the CPU work of one on those layers. */
static void own_gemm_split(fast_plan *p, int64_t n, int64_t group, int32_t slots) {
  const bool pw = p->algo == ALGO_POINTWISE;
  const int64_t cache_band = p->band_rows;
  const int64_t units = pw ? p->P : p->rows;                            /* columns or output rows */
  const int64_t min_units = pw ? 64 : (64 + p->rowlen - 1) / p->rowlen; /* a band's least */
  const int64_t outer = n * group;
  int64_t bands = p->bands < 1 ? 1 : p->bands;
  const int64_t tasks0 = outer * bands;
  /* at least two tasks per thread: a worker that joins late still finds one */
  const int64_t target = slots <= 1 ? tasks0 : tasks0 < 2 * slots ? 2 * slots : round_up(tasks0, slots);
  if (target > tasks0) {
    int64_t more = (target + outer - 1) / outer;
    if (units / more >= min_units) bands = more;
  }
  int64_t band = (units + bands - 1) / bands;
  /* a pointwise band in whole panels: only the image's last band ends in a partial one */
  if (pw && band > MX_KGEMM_NR) band = round_up(band, MX_KGEMM_NR);
  if (band > units) band = units;
  if (slots > 1) band = balanced_band(band, units, outer, slots, pw ? MX_KGEMM_NR : 1, min_units);
  p->band_rows = band;
  p->bands = pw ? pw_band_count(units, band) : (units + band - 1) / band;
  p->mchunks = 1;
  p->mchunk = p->mg;
  const int64_t tasks = outer * p->bands, cols = pw ? band : band * p->rowlen;
  const int64_t granule = mx__kgemm_f32_row_granule(p->mg, cols);
  if (slots > 1 && (tasks % slots || tasks < target) && p->mg >= 2 * granule) {
    /* The chunks of a band share its packed columns (p->shared_b), so more chunks cost little
     * but a narrow product's own regrouping of them (the 7x7 maps): there, one per thread. */
    const bool narrow = granule == MX_KGEMM_NR;
    int64_t chunks = narrow ? 1 : tasks < target ? (target + tasks - 1) / tasks : 2;
    while ((tasks * chunks) % slots) chunks++;
    /* whole row tiles, as many in every chunk as can be */
    const int64_t tiles = (p->mg + granule - 1) / granule;
    int64_t chunk = (tiles + chunks - 1) / chunks * granule;
    p->mchunk = chunk > p->mg ? p->mg : chunk;
    p->mchunks = (p->mg + p->mchunk - 1) / p->mchunk;
    p->shared_b = p->mchunks > 1;
  }
  if (slots > 1) even_split(p, outer, slots, cache_band);
}

/* --- an even split on several threads ----------------------------------------------------------
 * The rules above pick bands, then chunks, by counts; what the threads' shares come to is left
 * to chance: a 14x14 pointwise map (196 columns) in bands of 64 is 64, 64, 64 and 4 columns, and
 * two threads end after 128 and 68. split_span models a run instead: every task costs its
 * register tiles (row tiles x 32-column panels, a partial tile as a whole one) times k, plus the
 * packing of its band when it packs its own, the threads take tasks as the pool hands them out
 * (slot 1 from the back, the others from the front; the workers start a handoff later than the
 * caller), and a plan with shared bands pays the packing pass before its products. The span is
 * when the last thread ends; even_split takes the plan of least span among bands of whole panels
 * (rows for im2col) and chunks of whole row tiles, never a band wider than the cache rule's. The
 * split does not change any output's bits. */

/* In units of one register tile's k step (a 14x32 FMA block of one k): */
#define SPLIT_HANDOFF 1200 /* a worker's start after the caller's (a wake of some microseconds) */
#define SPLIT_TASK 200     /* a task's own cost besides its tiles */
#define SPLIT_PACK_COLS 32 /* columns of B packed per k in the time of one tile step */

typedef struct split_try {
  int64_t band, bands, mchunk, mchunks; /* band: columns (pointwise) or output rows */
  bool shared;
} split_try;

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* The span of a plan on `slots` threads (see above), in tile steps. */
static int64_t split_span(const fast_plan *p, const split_try *t, int64_t outer, bool direct, int32_t slots) {
  enum { MAX_SLOTS = 8 };
  if (slots > MAX_SLOTS) slots = MAX_SLOTS;
  const bool pw = p->algo == ALGO_POINTWISE;
  const int64_t units = pw ? p->P : p->rows, per_band = t->bands * t->mchunks;
  const int64_t n_tasks = outer * per_band;
  int64_t clock[MAX_SLOTS];
  for (int32_t s = 0; s < slots; s++) clock[s] = s ? SPLIT_HANDOFF : 0;
  int64_t prepare = 0;
  if (t->shared) {
    /* every band packed once, by all threads, then a second handoff */
    const int64_t packs = outer * ceil_div(p->kdim * (pw ? p->P : p->rows * p->rowlen), SPLIT_PACK_COLS);
    prepare = ceil_div(packs, slots) + SPLIT_HANDOFF;
  }
  int64_t lo = 0, hi = n_tasks;
  while (lo < hi) {
    int32_t s = 0;
    for (int32_t q = 1; q < slots; q++)
      if (clock[q] < clock[s]) s = q;
    const int64_t task = s == 1 ? --hi : lo++;
    const int64_t mc = task % t->mchunks, band = task / t->mchunks % t->bands;
    const int64_t u0 = band * t->band;
    const int64_t un = (pw && band == t->bands - 1) || units - u0 < t->band ? units - u0 : t->band;
    const int64_t cols = pw ? un : un * p->rowlen;
    const int64_t mn = p->mg - mc * t->mchunk < t->mchunk ? p->mg - mc * t->mchunk : t->mchunk;
    const int64_t g = mx__kgemm_f32_row_granule(mn, cols);
    /* a narrow product runs transposed: 32 weight rows by the row tile's count of columns */
    int64_t cost;
    if (g == MX_KGEMM_NR)
      cost = ceil_div(mn, g) * ceil_div(cols, mx__kgemm_f32_row_granule(1 << 20, 1 << 10)) * p->kdim;
    else /* a last panel of up to 16 columns runs the half-width tile */
      cost = ceil_div(mn, g) * ceil_div(cols, MX_KGEMM_NR / 2) * p->kdim / 2;
    cost += SPLIT_TASK;
    if (!t->shared && !direct) cost += ceil_div(p->kdim * cols, SPLIT_PACK_COLS);
    clock[s] += cost;
  }
  int64_t span = 0;
  for (int32_t s = 0; s < slots; s++)
    if (clock[s] > span) span = clock[s];
  return span + prepare;
}

static bool pointwise_direct(const fast_plan *p);

/* Replaces p's split by the one of least span when that is clearly shorter (3 %). `cache_band`:
 * the widest band the cache rule allows. */
static void even_split(fast_plan *p, int64_t outer, int32_t slots, int64_t cache_band) {
  /* MIXRT_CONV_SPLIT=count in the environment keeps the counted split (comparisons) */
  static _Atomic int keep;
  if (env_switch(&keep, "MIXRT_CONV_SPLIT", (const char *const[]){"count"}, 1) == 2) return;
  const bool pw = p->algo == ALGO_POINTWISE;
  const bool direct = pw && pointwise_direct(p);
  const int64_t units = pw ? p->P : p->rows, step = pw ? MX_KGEMM_NR : 1;
  const split_try now = {p->band_rows, p->bands, p->mchunk, p->mchunks, p->shared_b && !direct};
  split_try best = now;
  int64_t best_span = split_span(p, &now, outer, direct, slots);
  const int64_t now_span = best_span;
  const int64_t max_tasks = 8 * (int64_t)slots;
  /* a band keeps 64 columns (narrower products run far below peak), and a product is run
   * narrow (transposed, kernels/gemm_f32.h) only where the rules above run it so */
  const int64_t least = pw ? 2 * MX_KGEMM_NR : ceil_div(2 * MX_KGEMM_NR, p->rowlen);
  const bool narrow_now = mx__kgemm_f32_row_granule(p->mchunk, pw ? p->band_rows : p->band_rows * p->rowlen) ==
                          MX_KGEMM_NR;
  for (int64_t band = step; band < units + step; band += step) {
    const int64_t b = band > units ? units : band;
    if (b > cache_band && b > step) break;
    if (b < least && b < units) continue;
    const int64_t bands = pw ? pw_band_count(units, b) : ceil_div(units, b);
    if (outer * bands > max_tasks) continue;
    const int64_t cols = pw ? b : b * p->rowlen;
    if (!narrow_now && mx__kgemm_f32_row_granule(p->mg, cols) == MX_KGEMM_NR) continue;
    for (int64_t chunks = 1; chunks <= 2 * slots; chunks++) {
      const int64_t g = mx__kgemm_f32_row_granule(p->mg, cols);
      const int64_t tiles = ceil_div(p->mg, g);
      if (chunks > 1 && (p->mg < 2 * g || chunks > tiles)) break;
      if (outer * bands * chunks > max_tasks) break;
      split_try t = {b, bands, 0, 0, false};
      t.mchunk = chunks == 1 ? p->mg : ceil_div(tiles, chunks) * g;
      if (t.mchunk > p->mg) t.mchunk = p->mg;
      t.mchunks = ceil_div(p->mg, t.mchunk);
      t.shared = t.mchunks > 1 && !direct;
      const int64_t span = split_span(p, &t, outer, direct, slots);
      if (span < best_span) best = t, best_span = span;
    }
  }
  if (best_span * 100 > now_span * 92) return;
  p->band_rows = best.band;
  p->bands = best.bands;
  p->mchunk = best.mchunk;
  p->mchunks = best.mchunks;
  p->shared_b = best.mchunks > 1;
}

/* Whether a pointwise Conv's products read the image in place (B = [Cin, H*W], rows P floats
 * apart) instead of packing each band into 32-column panels first. MIXRT_CONV_1X1=packed or
 * =direct in the environment forces one way (comparisons). */
static bool pointwise_direct(const fast_plan *p) {
  static _Atomic int choice; /* 1 by shape, 2 packed, 3 direct */
  const int v = env_switch(&choice, "MIXRT_CONV_1X1", (const char *const[]){"packed", "direct"}, 2);
  if (v != 1) return v == 3;
  /* Packing a band costs a pass over it; read in place, B's rows are P floats apart instead of
   * one contiguous panel. Thread CPU time on ResNet-50's 1x1 layers, per layer: in place
   * 9-22 % less on the 56x56 maps (the image is past L2, packing streams it twice) and 2-8 %
   * less on most others, but 3-9 % more where m >= 4 k on a map in L2 (128 -> 512 28x28,
   * 512 -> 2048 7x7: each panel is read by many blocks of weight rows, and a packed one stays
   * in L1 between them). */
  return !(p->mg >= 4 * p->kdim && p->P <= 1024);
}

/* Whether gathered products run for wide maps too (rows a multiple of 14 wide), not only for
 * 7-wide ones: MIXRT_CONV_GATHER=narrow keeps them to the 7-wide maps (comparisons). */
static bool gather_wide(void) {
  static _Atomic int choice;
  return env_switch(&choice, "MIXRT_CONV_GATHER", (const char *const[]){"narrow"}, 1) == 1;
}

/* The gathered product (fast_plan.gather_b) for a 2-D im2col Conv at width stride 1 or 2 on the
 * own GEMM's AVX-512 copy, its output rows 7 wide (its whole map a narrow product) or a multiple
 * of 14: B read straight from the image, 14 positions to a tile (two rows of 7, or 14 of one
 * row), the product run transposed. The im2col of a 7x7 map (4608 rows of 49 floats for a
 * 512-channel 3x3 Conv) and, on several threads, its regrouping in a block both threads write and
 * read cost a fifth to a quarter of the layer; gathered, nothing is written but each band's
 * rows of the image with their padding (nothing when the Conv has none). */
static void plan_gather(fast_plan *p, const mx_kwin *w, int64_t cols) {
  p->gather_b = false;
  if (p->algo != ALGO_IM2COL || !mx__kgemm_f32_gather_available()) return;
  if (w->grid[0] != 1 || w->img[0] != 1 || w->k[0] != 1 || (w->s[2] != 1 && w->s[2] != 2)) return;
  if (p->rowlen == 7) {
    if (cols > 64 || mx__kgemm_f32_row_granule(p->mchunk, cols) != MX_KGEMM_NR) return;
  } else if (p->rowlen % 14 || !gather_wide()) {
    return;
  } else if (p->kdim < 64 || 4 * p->mchunk < 3 * round_up(p->mchunk, MX_KGEMM_NR)) {
    /* Run transposed, a tile spans 32 output channels and its outputs go through a transpose
     * into Y: with fewer channels, or few taps to amortize the transpose over (MobileNetV3's
     * first layer, 16 channels of 27 taps: 0.16-0.21 ms im2col'd, 0.26-0.31 gathered), the
     * im2col's product is faster. */
    return;
  }
  /* a band's rows of the padded image: every row and column its taps read, from -pad on */
  const int64_t h = (p->band_rows - 1) * w->s[1] + (w->k[1] - 1) * w->d[1] + 1;
  const int64_t wd = (w->grid[2] - 1) * w->s[2] + (w->k[2] - 1) * w->d[2] + 1;
  const int64_t full_h = (w->grid[1] - 1) * w->s[1] + (w->k[1] - 1) * w->d[1] + 1;
  const bool copy = w->pb[1] != 0 || w->pb[2] != 0 || full_h > w->img[1] || wd > w->img[2];
  /* the k rows' offsets are int32 */
  if (p->cg * (copy ? h * wd : w->img_size) > INT32_MAX) return;
  p->gather_copy = copy;
  p->gather_h = copy ? h : w->img[1];
  p->gather_w = copy ? wd : w->img[2];
  p->gather_b = true;
  p->shared_b = false;
  p->narrow_b = false;
  /* output-channel chunks in whole 32-channel panels, each starting on one of the pre-packed
   * weights' panels (cut for 14-row tiles, 256 channels went as 140 and 116: 5 and 4 panels) */
  if (p->mchunks > 1) {
    const int64_t chunk = round_up((p->mg + p->mchunks - 1) / p->mchunks, MX_KGEMM_NR);
    p->mchunk = chunk < p->mg ? chunk : p->mg;
    p->mchunks = (p->mg + p->mchunk - 1) / p->mchunk;
  }
}

/* Slot floats of the gathered product: the band's padded image, the k rows' offsets (int32)
 * and the groups' (two int64 each). */
static size_t gather_floats(const fast_plan *p) {
  if (!p->gather_b) return 0;
  const int64_t image = p->gather_copy ? p->cg * p->gather_h * p->gather_w : 0;
  const int64_t groups = (p->band_rows * p->rowlen + 13) / 14;
  return (size_t)round_up(image, 16) + (size_t)round_up(p->kdim, 16) + (size_t)round_up(4 * groups, 16);
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
    cols = round_up(cols < 64 ? 64 : cols, 32);
    p->band_rows = cols > p->P ? p->P : cols;
    p->bands = pw_band_count(p->P, p->band_rows);
  } else if (mx__kconv_dw_applies(w, p->cg)) {
    p->algo = ALGO_DEPTHWISE;
    p->slot_floats = mx__kconv_dw_slot_floats(w);
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
  if (p->algo != ALGO_DEPTHWISE && mx__kgemm_f32_available()) {
    /* packed B band, A blocks, one im2col row; the sgemm path's im2col band (taken by a
     * residual read in place from Y) fits in the same slot */
    own_gemm_split(p, n, group, slots);
    /* the widest band: a pointwise one's last may hold a remainder of less than a panel more */
    int64_t cols = p->algo == ALGO_POINTWISE ? p->P - (p->bands - 1) * p->band_rows : p->band_rows * p->rowlen;
    if (p->algo == ALGO_POINTWISE && cols < p->band_rows) cols = p->band_rows;
    p->slot_floats = p->algo == ALGO_POINTWISE ? 0 : (size_t)round_up(p->kdim * cols, 16);
    p->own_gemm = true;
    p->direct_b = p->algo == ALGO_POINTWISE && pointwise_direct(p);
    if (p->direct_b) p->shared_b = false; /* nothing packed to share among the chunks */
    /* Narrow products regroup their B's columns before they run; each chunk of a shared band
     * did it again (two threads: the whole band twice). The shared block holds them regrouped
     * instead, made once by all threads. (Not where a pointwise product reads the image in
     * place: regrouped ahead, 2048 -> 512 on a 7x7 map took 0.39 ms on two threads, not 0.34,
     * the pass and its second handoff costing more than a second regrouping.) */
    if (p->shared_b && cols <= 64 && mx__kgemm_f32_row_granule(p->mchunk, cols) == MX_KGEMM_NR) p->narrow_b = true;
    plan_gather(p, w, cols);
    p->packed_floats = p->direct_b || p->gather_b
                           ? 0
                           : (size_t)round_up((int64_t)mx__kgemm_f32_packed_b_floats(p->kdim, cols), 16);
    if (p->narrow_b) {
      const size_t regrouped = (size_t)round_up((int64_t)mx__kgemm_f32_narrow_b_floats(p->kdim, cols), 16);
      if (regrouped > p->packed_floats) p->packed_floats = regrouped;
    }
    p->gemm_floats = mx__kgemm_f32_a_floats(p->mchunk);
    size_t own = p->packed_floats + p->gemm_floats + (size_t)round_up(cols, 16) + gather_floats(p);
    if (own > p->slot_floats) p->slot_floats = own;
    /* Each of the n x bands tasks of a weight chunk would pack it again (the 56x56 layers run
     * a dozen bands): pack it once for all of them when it is read more than once. */
    p->pre_mr = p->gather_b
                    ? MX_KGEMM_NR
                    : mx__kgemm_f32_row_granule(p->mchunk, p->algo == ALGO_POINTWISE ? p->band_rows : cols);
    if (n * p->bands > 1)
      p->pre_floats = (size_t)round_up(
          (int64_t)mx__kgemm_f32_pre_a_floats(p->mg, p->kdim, p->pre_mr) * group, 16);
    if (p->shared_b) {
      const int64_t units = n * group * p->bands;
      p->shared_floats = (size_t)units * p->packed_floats;
      /* about four packing tasks per thread, in whole input channels */
      p->kparts = (4 * slots + units - 1) / units;
      if (p->kparts > p->cg) p->kparts = p->cg;
    }
    return;
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
  /* A run plans for the threads its work repays (mx__kthreads_for_work), maybe fewer than the
   * pool: the slot must hold the largest plan of any of those counts (the own GEMM's bands and
   * chunks, and so its scratch, depend on it). */
  size_t most = 0, pre = 0;
  for (int32_t s = 1; s <= slots; s++) {
    fast_plan p;
    make_plan(w, n, c, m, group, s, &p);
    if (p.slot_floats > most) most = p.slot_floats;
    if (p.pre_floats + p.shared_floats > pre) pre = p.pre_floats + p.shared_floats;
  }
  /* the caller sizes the workspace as slots of this; the pre-packed weights and the shared
   * packed bands are blocks at its start, spread over the slots here */
  return most + (size_t)round_up((int64_t)((pre + (size_t)slots - 1) / (size_t)slots), 16);
}

/* --- epilogue --------------------------------------------------------------------------------- */

MX_KHOT static void epilogue_f32(float *out, const float *src, const float *z, float bias, int64_t n,
                                 int32_t act, float a, float b) {
  mx__kconv_epilogue_body(out, src, z, bias, n, act, a, b);
}

/* The epilogue of an sgemm tile: rows of n outputs, `ld` apart. */
MX_KHOT static void epilogue_rows_f32(float *y, const float *z, const float *bias, int64_t rows, int64_t n,
                                      int64_t ld, int32_t act, float a, float b) {
  for (int64_t r = 0; r < rows; r++)
    mx__kconv_epilogue_body(y + r * ld, y + r * ld, z ? z + r * ld : NULL, bias ? bias[r] : 0.0f, n, act, a,
                            b);
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

/* One output row (od, oh) of an im2col row for tap (kd, kh), whose columns [lo, hi) read the
 * image: zeroes the row's other columns (all of them where the tap reads padding) and returns
 * the image row to copy [lo, hi) from, or NULL; advances (od, oh) to the next output row. */
static inline const float *im2col_row_start(const float *xc, const mx_kwin *w, int64_t kd, int64_t kh, int64_t lo,
                                            int64_t hi, int64_t *od, int64_t *oh, float *row) {
  const int64_t id = *od * w->s[0] - w->pb[0] + kd * w->d[0];
  const int64_t ih = *oh * w->s[1] - w->pb[1] + kh * w->d[1];
  const int64_t rowlen = w->grid[2];
  if (++*oh == w->grid[1]) *oh = 0, ++*od;
  if (id < 0 || id >= w->img[0] || ih < 0 || ih >= w->img[1] || lo >= hi) {
    memset(row, 0, (size_t)rowlen * sizeof(float));
    return NULL;
  }
  for (int64_t ow = 0; ow < lo; ow++) row[ow] = 0.0f;
  for (int64_t ow = hi; ow < rowlen; ow++) row[ow] = 0.0f;
  return xc + (id * w->img[1] + ih) * w->img[2];
}

/* row[i] = src[2 i] for i in [0, n): a stride-2 Conv's im2col run, 16 outputs per two loads and a
 * permute on AVX-512 (one float at a time it was half of the im2col's time on ResNet-50's first
 * 7x7 layer, and a fifth of a stride-2 3x3 layer's); src[2 (n - 1)] is the last float read. */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
__attribute__((target("avx512f"), always_inline)) static inline void stride2_avx512(float *row, const float *src,
                                                                                   int64_t n) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 lo = _mm512_loadu_ps(src + 2 * i), hi = _mm512_maskz_loadu_ps(0x7FFF, src + 2 * i + 16);
    _mm512_storeu_ps(row + i, _mm512_permutex2var_ps(lo, even, hi));
  }
  if (i < n) {
    const int64_t rest = n - i, used = 2 * rest - 1; /* floats of src read: 1..31 */
    const __mmask16 mlo = used >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << used) - 1u);
    const __mmask16 mhi = used > 16 ? (__mmask16)((1u << (used - 16)) - 1u) : 0;
    const __m512 lo = _mm512_maskz_loadu_ps(mlo, src + 2 * i), hi = _mm512_maskz_loadu_ps(mhi, src + 2 * i + 16);
    _mm512_mask_storeu_ps(row + i, (__mmask16)((1u << rest) - 1u), _mm512_permutex2var_ps(lo, even, hi));
  }
}
/* im2col_row (below) of a stride-2 Conv on AVX-512: every output row of the band in one call,
 * so rows of 28, 14 or 7 outputs (ResNet-50's stride-2 3x3 and 1x1 layers) take the permutes
 * too, not only runs long enough to repay a call per row. */
__attribute__((target("avx512f"))) static void im2col_row_s2(const float *xc, const mx_kwin *w, int64_t kd,
                                                             int64_t kh, int64_t off, int64_t lo, int64_t hi,
                                                             int64_t r0, int64_t r1, float *row) {
  const int64_t rowlen = w->grid[2];
  int64_t od = r0 / w->grid[1], oh = r0 % w->grid[1];
  for (int64_t r = r0; r < r1; r++, row += rowlen) {
    const float *xr = im2col_row_start(xc, w, kd, kh, lo, hi, &od, &oh, row);
    if (xr) stride2_avx512(row + lo, xr + lo * 2 + off, hi - lo);
  }
}
static bool stride2_fast(void) {
  static _Atomic int have; /* 0 not asked yet, 1 no, 2 yes */
  int v = atomic_load_explicit(&have, memory_order_relaxed);
  if (!v) {
    v = __builtin_cpu_supports("avx512f") ? 2 : 1;
    atomic_store_explicit(&have, v, memory_order_relaxed);
  }
  return v == 2;
}
#else
static void im2col_row_s2(const float *xc, const mx_kwin *w, int64_t kd, int64_t kh, int64_t off, int64_t lo,
                          int64_t hi, int64_t r0, int64_t r1, float *row) {
  (void)xc, (void)w, (void)kd, (void)kh, (void)off, (void)lo, (void)hi, (void)r0, (void)r1, (void)row;
}
static bool stride2_fast(void) { return false; }
#endif

/* Row (kd, kh, kw) of a channel's im2col for output rows [r0, r1) (depth and height flattened):
 * (r1 - r0) * rowlen floats at row. */
static void im2col_row(const float *xc, const mx_kwin *w, int64_t kd, int64_t kh, int64_t kw, int64_t r0,
                       int64_t r1, float *row) {
  const int64_t rowlen = w->grid[2], s = w->s[2];
  int64_t off = kw * w->d[2] - w->pb[2], lo, hi;
  valid_range(rowlen, s, off, w->img[2], &lo, &hi);
  if (s == 2 && stride2_fast()) {
    im2col_row_s2(xc, w, kd, kh, off, lo, hi, r0, r1, row);
    return;
  }
  int64_t od = r0 / w->grid[1], oh = r0 % w->grid[1];
  for (int64_t r = r0; r < r1; r++, row += rowlen) {
    const float *xr = im2col_row_start(xc, w, kd, kh, lo, hi, &od, &oh, row);
    if (!xr) continue;
    if (s == 1)
      memcpy(row + lo, xr + lo + off, (size_t)(hi - lo) * sizeof(float));
    else
      for (int64_t ow = lo; ow < hi; ow++) row[ow] = xr[ow * s + off];
  }
}

/* col [channels*taps, (r1-r0)*rowlen]: the patches of output rows [r0, r1), for the sgemm
 * path. */
static void im2col_band(const float *x, int64_t channels, const mx_kwin *w, int64_t r0, int64_t r1,
                        float *col) {
  const int64_t cols = (r1 - r0) * w->grid[2];
  for (int64_t c = 0; c < channels; c++)
    for (int64_t kd = 0; kd < w->k[0]; kd++)
      for (int64_t kh = 0; kh < w->k[1]; kh++)
        for (int64_t kw = 0; kw < w->k[2]; kw++) {
          const int64_t kidx = ((c * w->k[0] + kd) * w->k[1] + kh) * w->k[2] + kw;
          im2col_row(x + c * w->img_size, w, kd, kh, kw, r0, r1, col + kidx * cols);
        }
}

/* The im2col rows of input channels [c0, c1) for output rows [r0, r1) in the own GEMM's packed
 * B of the band (kdim rows, kernels/gemm_f32.h), each through `row` (one row of scratch).
 * Threads may pack disjoint channel ranges of one band at once. */
static void im2col_pack(const float *x, int64_t c0, int64_t c1, int64_t kdim, const mx_kwin *w, int64_t r0,
                        int64_t r1, float *packed, float *row, bool regrouped) {
  const int64_t cols = (r1 - r0) * w->grid[2];
  for (int64_t c = c0; c < c1; c++)
    for (int64_t kd = 0; kd < w->k[0]; kd++)
      for (int64_t kh = 0; kh < w->k[1]; kh++)
        for (int64_t kw = 0; kw < w->k[2]; kw++) {
          const int64_t kidx = ((c * w->k[0] + kd) * w->k[1] + kh) * w->k[2] + kw;
          im2col_row(x + c * w->img_size, w, kd, kh, kw, r0, r1, row);
          if (regrouped)
            mx__kgemm_f32_narrow_b_row(row, cols, kdim, kidx, packed);
          else
            mx__kgemm_f32_pack_b_row(row, cols, kdim, kidx, packed);
        }
}

/* --- tasks ------------------------------------------------------------------------------------ */

/* The epilogue of one tile of the own GEMM's output. */
typedef struct tile_epilogue {
  float *y;
  const float *z, *b;
  int64_t ld;
  int32_t act;
  float alpha, beta;
} tile_epilogue;

static void tile_epilogue_run(void *ctx, int64_t row0, int64_t rows, int64_t col0, int64_t cols) {
  const tile_epilogue *e = ctx;
  size_t off = (size_t)(row0 * e->ld + col0);
  epilogue_rows_f32(e->y + off, e->z ? e->z + off : NULL, e->b ? e->b + row0 : NULL, rows, cols, e->ld,
                    e->act, e->alpha, e->beta);
}

/* The first output position of a band and its count. */
static void band_cols(const fast_plan *p, int64_t band, int64_t *c0, int64_t *ncols) {
  if (p->algo == ALGO_POINTWISE) {
    *c0 = band * p->band_rows;
    *ncols = band == p->bands - 1 || p->P - *c0 < p->band_rows ? p->P - *c0 : p->band_rows;
  } else {
    int64_t r0 = band * p->band_rows, r1 = r0 + p->band_rows > p->rows ? p->rows : r0 + p->band_rows;
    *c0 = r0 * p->rowlen;
    *ncols = (r1 - r0) * p->rowlen;
  }
}

/* Input channels [ch0, ch1) of a band's columns packed into the own GEMM's panels (regrouped:
 * a narrow product's column groups): the image's rows for a pointwise Conv, im2col rows
 * otherwise. */
static void pack_band(const fast_plan *p, const mx_kwin *w, int64_t band, const float *xg, int64_t ch0,
                      int64_t ch1, float *packed, float *row, bool regrouped) {
  int64_t c0, ncols;
  band_cols(p, band, &c0, &ncols);
  if (p->algo == ALGO_POINTWISE) {
    for (int64_t k = ch0; k < ch1; k++) {
      if (regrouped)
        mx__kgemm_f32_narrow_b_row(xg + k * p->P + c0, ncols, p->kdim, k, packed);
      else
        mx__kgemm_f32_pack_b_row(xg + k * p->P + c0, ncols, p->kdim, k, packed);
    }
  } else {
    const int64_t r0 = band * p->band_rows;
    im2col_pack(xg, ch0, ch1, p->kdim, w, r0, r0 + ncols / p->rowlen, packed, row, regrouped);
  }
}

/* The gathered product of one task (fast_plan.gather_b) over output rows [r0, r1): their rows
 * of the image zero-padded into the slot when the Conv pads, each k row's offset in them
 * (channel, tap row, tap column) and each group of 14 positions', then the product straight
 * from them. */
static void run_gather(const fast_plan *p, const mx_kwin *w, int64_t r0, int64_t r1, const float *xg,
                       const float *wg, float *yg, int64_t mn, const mx_kgemm_f32_pre_a *pa, float *scr,
                       const mx_kgemm_f32_epilogue *epi, mx_kgemm_tile_fn tile_fn, void *ctx) {
  const int64_t W = p->gather_w, s1 = w->s[1], s2 = w->s[2];
  const int64_t H = p->gather_copy ? (r1 - r0 - 1) * s1 + (w->k[1] - 1) * w->d[1] + 1 : 0;
  const int64_t plane = p->gather_copy ? H * W : w->img_size;
  float *ablocks = scr, *image = scr + round_up((int64_t)p->gemm_floats, 16);
  int32_t *koff = (int32_t *)(image + (p->gather_copy ? round_up(p->cg * p->gather_h * W, 16) : 0));
  int64_t *group_off = (int64_t *)((float *)koff + round_up(p->kdim, 16));
  /* the first image row the band reads (the copy's row 0; in place, the image's own rows) */
  const int64_t ih0 = r0 * s1 - w->pb[1];
  const float *x = xg + (p->gather_copy ? 0 : ih0 * w->img[2]);
  if (p->gather_copy) {
    /* each row: zeros, the image row's columns it holds, zeros (or all zeros off the image) */
    const int64_t iw0 = -w->pb[2], lead = iw0 < 0 ? -iw0 : 0;
    const int64_t last = iw0 + W < w->img[2] ? iw0 + W : w->img[2]; /* past the last column held */
    const int64_t span = last - (iw0 + lead) > 0 ? last - (iw0 + lead) : 0;
    for (int64_t c = 0; c < p->cg; c++) {
      const float *src = xg + c * w->img_size;
      float *dst = image + c * plane;
      for (int64_t r = 0; r < H; r++, dst += W) {
        const int64_t ih = ih0 + r;
        if (ih < 0 || ih >= w->img[1] || !span) {
          memset(dst, 0, (size_t)W * sizeof(float));
          continue;
        }
        memset(dst, 0, (size_t)lead * sizeof(float));
        memcpy(dst + lead, src + ih * w->img[2] + iw0 + lead, (size_t)span * sizeof(float));
        memset(dst + lead + span, 0, (size_t)(W - lead - span) * sizeof(float));
      }
    }
    x = image;
  }
  /* output row r0 + r, column q, tap (kh, kw) of channel ch reads the band's row r * s1 + kh *
   * d1 and column q * s2 + kw * d2 */
  int64_t kidx = 0;
  for (int64_t c = 0; c < p->cg; c++)
    for (int64_t kh = 0; kh < w->k[1]; kh++)
      for (int64_t kw = 0; kw < w->k[2]; kw++)
        koff[kidx++] = (int32_t)(c * plane + kh * w->d[1] * W + kw * w->d[2]);
  const int64_t n = (r1 - r0) * p->rowlen, groups = (n + 13) / 14;
  for (int64_t g = 0; g < groups; g++) {
    int64_t pos[2];
    for (int h = 0; h < 2; h++) {
      int64_t q = g * 14 + h * 7; /* the run's first position (past the end: any valid one) */
      if (q >= n) q = g * 14;
      pos[h] = q / p->rowlen * s1 * W + q % p->rowlen * s2;
    }
    group_off[2 * g] = pos[0];
    group_off[2 * g + 1] = pos[1];
  }
  const mx_kgemm_f32_gather b = {x, koff, group_off, (int32_t)s2};
  mx__kgemm_f32_gather(mn, n, p->kdim, wg, p->kdim, pa, &b, yg, p->P, ablocks, epi, tile_fn, ctx);
}

/* One task through the own GEMM: the band's columns packed into panels (or read packed from
 * the shared block, bshared), then mn output channels times them, the epilogue on each tile as
 * it is finished. */
static void run_own_gemm(const fast_plan *p, const mx_kwin *w, const mx_kconv_f32 *j, int64_t band,
                         const float *xg, const float *wg, float *yg, const float *zg, const float *bg,
                         int64_t mn, const mx_kgemm_f32_pre_a *pa, const float *bshared, float *scr) {
  float *ablocks = scr + p->packed_floats;
  const float *packed = bshared ? bshared : scr;
  int64_t c0, ncols;
  band_cols(p, band, &c0, &ncols);
  tile_epilogue e = {yg + c0, zg ? zg + c0 : NULL, bg, p->P, j->act, j->alpha, j->beta};
  const bool any = zg || bg || j->act != MX_CONV_ACT_NONE;
  if (j->act == MX_CONV_ACT_NONE || j->act == MX_CONV_ACT_RELU || j->act == MX_CONV_ACT_CLIP ||
      j->act == MX_CONV_ACT_HARD_SWISH) {
    /* bias, residual and Relu/Clip/HardSwish in the GEMM's store (in registers on AVX-512), not
     * in a pass over each finished tile */
    const int32_t act = j->act == MX_CONV_ACT_RELU         ? MX_KGEMM_ACT_RELU
                        : j->act == MX_CONV_ACT_CLIP       ? MX_KGEMM_ACT_CLIP
                        : j->act == MX_CONV_ACT_HARD_SWISH ? MX_KGEMM_ACT_HARD_SWISH
                                                           : MX_KGEMM_ACT_NONE;
    const mx_kgemm_f32_epilogue epi = {bg, zg ? zg + c0 : NULL, p->P, act, j->alpha, j->beta};
    if (p->gather_b) {
      run_gather(p, w, c0 / p->rowlen, (c0 + ncols) / p->rowlen, xg, wg, yg + c0, mn, pa, scr,
                 any ? &epi : NULL, NULL, NULL);
      return;
    }
    if (bshared && p->narrow_b) {
      mx__kgemm_f32_narrow_pre(mn, ncols, p->kdim, wg, p->kdim, pa, bshared, yg + c0, p->P, ablocks,
                               any ? &epi : NULL, NULL, NULL);
      return;
    }
    if (!p->direct_b && !bshared) pack_band(p, w, band, xg, 0, p->cg, scr, ablocks + p->gemm_floats, false);
    mx__kgemm_f32_epi_pre(mn, ncols, p->kdim, wg, p->kdim, pa, p->direct_b ? xg + c0 : packed,
                          p->direct_b ? p->P : 0, yg + c0, p->P, ablocks, any ? &epi : NULL);
    return;
  }
  if (p->gather_b) {
    run_gather(p, w, c0 / p->rowlen, (c0 + ncols) / p->rowlen, xg, wg, yg + c0, mn, pa, scr, NULL,
               any ? tile_epilogue_run : NULL, &e);
    return;
  }
  if (p->direct_b) {
    mx__kgemm_f32_strided_pre(mn, ncols, p->kdim, wg, p->kdim, pa, xg + c0, p->P, yg + c0, p->P, ablocks,
                              any ? tile_epilogue_run : NULL, &e);
    return;
  }
  if (bshared && p->narrow_b) {
    mx__kgemm_f32_narrow_pre(mn, ncols, p->kdim, wg, p->kdim, pa, bshared, yg + c0, p->P, ablocks, NULL,
                             any ? tile_epilogue_run : NULL, &e);
    return;
  }
  if (!bshared) pack_band(p, w, band, xg, 0, p->cg, scr, ablocks + p->gemm_floats, false);
  mx__kgemm_f32_packed_pre(mn, ncols, p->kdim, wg, p->kdim, pa, packed, yg + c0, p->P, ablocks,
                           any ? tile_epilogue_run : NULL, &e);
}

typedef struct fast_job {
  const mx_kconv_f32 *j;
  const fast_plan *p;
  float *scratch;    /* the threads' slots */
  const float *pre;  /* the weights packed for all tasks (p->pre_mr), or NULL */
  float *pre_dst;    /* where this run packs them (run_pre_pack), NULL when they were kept */
  float *bshared;    /* every band packed once for all its chunks (p->shared_b), or NULL */
  int64_t pre_tasks; /* run_prepare: the pre-pack's tasks come first */
} fast_job;

/* Row panels of the weights packed per pre-pack task. */
#define PRE_PANELS 4

/* One task of the pre-pack: PRE_PANELS row panels of one group's weights. */
static void run_pre_pack(void *vctx, int64_t task, int32_t slot) {
  (void)slot;
  const fast_job *fj = vctx;
  const fast_plan *p = fj->p;
  const int64_t per = (p->mg + p->pre_mr - 1) / p->pre_mr, tasks_g = (per + PRE_PANELS - 1) / PRE_PANELS;
  const int64_t g = task / tasks_g, r0 = task % tasks_g * PRE_PANELS * p->pre_mr;
  const int64_t rows = p->mg - r0 < PRE_PANELS * p->pre_mr ? p->mg - r0 : PRE_PANELS * p->pre_mr;
  const size_t gsize = mx__kgemm_f32_pre_a_floats(p->mg, p->kdim, p->pre_mr);
  mx__kgemm_f32_pre_a_pack(fj->j->wt + g * p->mg * p->kdim, p->kdim, p->mg, p->kdim, p->pre_mr, r0, rows,
                           fj->pre_dst + (size_t)g * gsize);
}

/* One task of the packing ahead of a run in shared bands: a pre-pack task (the first
 * fj->pre_tasks), or the im2col of one channel range of one band into the shared block. */
static void run_prepare(void *vctx, int64_t task, int32_t slot) {
  const fast_job *fj = vctx;
  if (task < fj->pre_tasks) {
    run_pre_pack(vctx, task, slot);
    return;
  }
  const fast_plan *p = fj->p;
  const mx_kconv_f32 *j = fj->j;
  task -= fj->pre_tasks;
  const int64_t unit = task / p->kparts, part = task % p->kparts;
  const int64_t band = unit % p->bands, g = unit / p->bands % j->group, in = unit / p->bands / j->group;
  const float *xg = j->x + (in * j->c + g * p->cg) * j->w->img_size;
  float *row = fj->scratch + (size_t)slot * p->slot_floats + p->packed_floats + p->gemm_floats;
  pack_band(p, j->w, band, xg, part * p->cg / p->kparts, (part + 1) * p->cg / p->kparts,
            fj->bshared + (size_t)unit * p->packed_floats, row, p->narrow_b);
}

static void run_task(void *vctx, int64_t task, int32_t slot) {
  const fast_job *fj = vctx;
  const mx_kconv_f32 *j = fj->j;
  const fast_plan *p = fj->p;
  const mx_kwin *w = j->w;
  float *scr = p->slot_floats ? fj->scratch + (size_t)slot * p->slot_floats : NULL; /* no scratch: NULL */
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
  if (p->own_gemm && !z_in_y) {
    mx_kgemm_f32_pre_a pa = {0};
    if (fj->pre) {
      const size_t gsize = mx__kgemm_f32_pre_a_floats(p->mg, p->kdim, p->pre_mr);
      pa = (mx_kgemm_f32_pre_a){fj->pre + (size_t)g * gsize, p->pre_mr, (p->mg + p->pre_mr - 1) / p->pre_mr * p->pre_mr, m0};
    }
    const float *bshared = fj->bshared ? fj->bshared + (size_t)(task / p->mchunks) * p->packed_floats : NULL;
    run_own_gemm(p, w, j, band, xg, wg, yg, zg, bg, mn, fj->pre ? &pa : NULL, bshared, scr);
    return;
  }
  int64_t c0, ncols;
  const float *bmat;
  int64_t ldb;
  if (p->algo == ALGO_POINTWISE) {
    band_cols(p, band, &c0, &ncols);
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

int64_t mx__kconv_f32_pre_mr(const mx_kconv_f32 *j) {
  const mx_kwin *w = j->w;
  if (j->c % j->group || j->m % j->group || mx__kconv_gemv_applies(j)) return 0;
  int32_t slots = mx__kthreads_for_work(j->n * j->m * w->grid_size * (j->c / j->group) * w->k_size);
  fast_plan p;
  make_plan(w, j->n, j->c, j->m, j->group, slots, &p);
  return p.own_gemm ? p.pre_mr : 0;
}

bool mx__kconv_f32_run(const mx_kconv_f32 *j, float *scratch, size_t scratch_floats) {
  const mx_kwin *w = j->w;
  if (j->c % j->group || j->m % j->group) return false;
  /* 1x1 taps on a 1x1 map (squeeze-and-excitation): a matrix-vector product, no GEMM panels */
  if (mx__kconv_gemv_applies(j)) {
    mx__kconv_gemv_run(j);
    return true;
  }
  int32_t slots = mx__kthreads_for_work(j->n * j->m * w->grid_size * (j->c / j->group) * w->k_size);
  fast_plan p;
  make_plan(w, j->n, j->c, j->m, j->group, slots, &p);
  /* Weights pre-packed beside the model in this plan's panels serve every task as they are. */
  const bool kept = j->pre_a && p.own_gemm && j->z != j->y && j->pre_mr == p.pre_mr;
  /* A residual read in place from Y runs the sgemm path: nothing to pre-pack for; nor when the
   * workspace (sized for another pool size) cannot hold it and one slot. */
  /* Shared bands likewise, and not when the workspace cannot hold them (each task packs its
   * own band then, as on one thread). */
  if (j->z == j->y || p.shared_floats + p.pre_floats + p.slot_floats > scratch_floats) p.shared_b = false;
  if (!p.shared_b) p.shared_floats = 0, p.narrow_b = false;
  if (kept || j->z == j->y || p.shared_floats + p.pre_floats + p.slot_floats > scratch_floats) p.pre_floats = 0;
  float *pre_dst = p.pre_floats ? scratch : NULL;
  float *bshared = p.shared_b ? scratch + p.pre_floats : NULL;
  scratch += p.pre_floats + p.shared_floats;
  scratch_floats -= p.pre_floats + p.shared_floats;
  if (p.slot_floats) {
    size_t fit = scratch_floats / p.slot_floats;
    if (fit < 1) return false;
    if ((size_t)slots > fit) slots = (int32_t)fit;
  }
  if (p.algo == ALGO_DEPTHWISE) {
    mx__kconv_dw_run(j, scratch, slots);
    return true;
  }
  fast_job fj = {j, &p, scratch, kept ? j->pre_a : pre_dst, pre_dst, NULL, 0};
  fj.bshared = bshared;
  if (pre_dst) {
    const int64_t per = (p.mg + p.pre_mr - 1) / p.pre_mr;
    fj.pre_tasks = j->group * ((per + PRE_PANELS - 1) / PRE_PANELS);
  }
  if (bshared) /* the bands (and weights) packed by all threads, then the products */
    mx__kparallel(fj.pre_tasks + j->n * j->group * p.bands * p.kparts, slots, run_prepare, &fj);
  else if (pre_dst)
    mx__kparallel_work(fj.pre_tasks, slots, j->m * p.kdim * 8, run_pre_pack, &fj);
  int64_t tasks = j->n * j->group * p.bands * p.mchunks;
  mx__kparallel_work(tasks, slots, j->n * j->m * p.P * p.kdim, run_task, &fj);
  return true;
}
