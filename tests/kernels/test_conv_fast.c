/* Kernel tests of the float32 Conv cores (kernels/conv_fast.c) and the float32 pooling paths
 * (kernels/pool.c): every Conv path (pointwise, im2col bands, depthwise at stride 1 and 2, with
 * dilation, channel multipliers, 1-D) with bias, a residual fourth input and a fused Relu,
 * against a direct loop, on 1 and 3 intra-op threads (the results must not depend on the thread
 * count beyond rounding); the float16 residual, read in place; 2-D MaxPool and
 * GlobalAveragePool against the float64 walk; the intra-op thread pool (every task once, two
 * callers at a time). */
#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/half.h"
#include "graph/ops/conv_params.h"
#include "kernels/kernel.h"
#include "kernels/kernels_support.h"
#include "kernels/threads.h"

TestSuite(conv_fast);

static uint32_t seed = 777u;
static float rnd(void) {
  seed = seed * 1664525u + 1013904223u;
  return (float)(seed >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
}

/* A 2-D case; h == 1 with kh == 1 makes it 1-D-like. */
typedef struct fcase {
  int64_t n, c, h, w, m, group, kh, kw, sh, sw, dh, dw, pad;
} fcase;

static int64_t osize(int64_t in, int64_t k, int64_t s, int64_t d, int64_t p) {
  return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

/* y = relu(conv(x, w) + b + z) in double. */
static void reference(const fcase *k, const float *x, const float *w, const float *b, const float *z,
                      double *y, int64_t oh, int64_t ow) {
  int64_t cg = k->c / k->group, mg = k->m / k->group;
  for (int64_t n = 0; n < k->n; n++)
    for (int64_t m = 0; m < k->m; m++)
      for (int64_t i = 0; i < oh; i++)
        for (int64_t j = 0; j < ow; j++) {
          int64_t o = ((n * k->m + m) * oh + i) * ow + j;
          double acc = (double)b[m] + (double)z[o];
          for (int64_t c = 0; c < cg; c++)
            for (int64_t a = 0; a < k->kh; a++)
              for (int64_t e = 0; e < k->kw; e++) {
                int64_t ih = i * k->sh - k->pad + a * k->dh, iw = j * k->sw - k->pad + e * k->dw;
                if (ih < 0 || ih >= k->h || iw < 0 || iw >= k->w) continue;
                acc += (double)x[((n * k->c + (m / mg) * cg + c) * k->h + ih) * k->w + iw] *
                       (double)w[((m * cg + c) * k->kh + a) * k->kw + e];
              }
          y[o] = acc > 0.0 ? acc : 0.0;
        }
}

static mx_conv_params params_of(const fcase *k) {
  mx_conv_params p;
  memset(&p, 0, sizeof p);
  p.op = MX_CONVOP_CONV;
  p.group = k->group;
  p.n_strides = p.n_dilations = 2;
  p.strides[0] = k->sh, p.strides[1] = k->sw;
  p.dilations[0] = k->dh, p.dilations[1] = k->dw;
  p.n_pads = 4;
  for (int i = 0; i < 4; i++) p.pads[i] = k->pad;
  p.fused_act = MX_CONV_ACT_RELU;
  return p;
}

static void run_fcase(const fcase *k, int32_t threads) {
  int64_t oh = osize(k->h, k->kh, k->sh, k->dh, k->pad), ow = osize(k->w, k->kw, k->sw, k->dw, k->pad);
  int64_t nx = k->n * k->c * k->h * k->w, nw = k->m * (k->c / k->group) * k->kh * k->kw,
          ny = k->n * k->m * oh * ow;
  float *x = malloc((size_t)nx * 4), *w = malloc((size_t)nw * 4), *b = malloc((size_t)k->m * 4);
  float *z = malloc((size_t)ny * 4), *y = malloc((size_t)ny * 4);
  double *ref = malloc((size_t)ny * 8);
  for (int64_t i = 0; i < nx; i++) x[i] = rnd();
  for (int64_t i = 0; i < nw; i++) w[i] = rnd();
  for (int64_t i = 0; i < k->m; i++) b[i] = rnd();
  for (int64_t i = 0; i < ny; i++) z[i] = rnd();
  reference(k, x, w, b, z, ref, oh, ow);
  mx_conv_params p = params_of(k);
  mx_kernel_call *c = kc_new(4, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 4, DIMS(k->n, k->c, k->h, k->w), x);
  kc_set(c, 1, MX_FLOAT32, 4, DIMS(k->m, k->c / k->group, k->kh, k->kw), w);
  kc_set(c, 2, MX_FLOAT32, 1, DIMS(k->m), b);
  kc_set(c, 3, MX_FLOAT32, 4, DIMS(k->n, k->m, oh, ow), z);
  kc_set(c, 4, MX_FLOAT32, 4, DIMS(k->n, k->m, oh, ow), y);
  mx__kthreads_set(threads);
  mx_status st = kc_run("Conv", c);
  mx__kthreads_set(1);
  cr_assert_eq(st, MX_OK, "%s", c->why ? c->why : "");
  int bad = 0;
  for (int64_t i = 0; i < ny && bad < 5; i++)
    if (fabs((double)y[i] - ref[i]) > 1e-4 * (1.0 + fabs(ref[i]))) {
      cr_expect(false, "c=%lld m=%lld g=%lld k=%lldx%lld s=%lld/%lld d=%lld/%lld threads %d: [%lld] %g vs %g",
                (long long)k->c, (long long)k->m, (long long)k->group, (long long)k->kh, (long long)k->kw,
                (long long)k->sh, (long long)k->sw, (long long)k->dh, (long long)k->dw, threads, (long long)i,
                (double)y[i], ref[i]);
      bad++;
    }
  free(x), free(w), free(b), free(z), free(y), free(ref), free(c);
}

static const fcase cases[] = {
    /* n  c   h   w   m   g   kh kw sh sw dh dw pad */
    {2, 16, 9, 11, 64, 1, 1, 1, 1, 1, 1, 1, 0},   /* pointwise, two images */
    {1, 8, 40, 40, 48, 1, 3, 3, 1, 1, 1, 1, 1},   /* im2col in several bands */
    {1, 3, 33, 31, 16, 1, 7, 7, 2, 2, 1, 1, 3},   /* a stem: 7x7 stride 2 */
    {1, 64, 7, 7, 96, 1, 3, 3, 1, 1, 1, 1, 1},    /* few positions, output channels in chunks */
    {1, 16, 10, 10, 32, 1, 1, 1, 2, 2, 1, 1, 0},  /* strided 1x1 */
    {1, 12, 10, 12, 12, 2, 3, 3, 1, 1, 1, 1, 1},  /* grouped */
    {1, 24, 14, 13, 24, 24, 3, 3, 1, 1, 1, 1, 1}, /* depthwise 3x3 */
    {2, 16, 15, 17, 16, 16, 3, 3, 2, 2, 1, 1, 1}, /* depthwise stride 2, odd sizes */
    {1, 8, 14, 14, 8, 8, 5, 5, 2, 2, 1, 1, 2},    /* depthwise 5x5 stride 2 */
    {1, 8, 7, 7, 8, 8, 5, 5, 1, 1, 1, 1, 2},      /* depthwise 5x5 on a 7x7 image */
    {1, 6, 12, 12, 12, 6, 3, 3, 1, 1, 1, 1, 1},   /* depthwise with a channel multiplier */
    {1, 4, 13, 13, 4, 4, 3, 3, 1, 1, 2, 2, 2},    /* depthwise dilated */
    {1, 4, 11, 11, 4, 4, 3, 3, 2, 1, 1, 1, 0},    /* depthwise stride 2 along the height only */
    {1, 4, 12, 12, 4, 4, 3, 3, 3, 3, 1, 1, 1},    /* depthwise stride 3 */
    {1, 4, 12, 12, 4, 4, 4, 7, 2, 2, 1, 1, 0},    /* depthwise wide kernel, stride 2 */
    {1, 5, 1, 20, 5, 5, 1, 3, 1, 1, 1, 1, 0},     /* depthwise over one row (1-D) */
};

Test(conv_fast, every_path_with_residual_and_relu_on_one_and_three_threads) {
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    run_fcase(&cases[i], 1);
    run_fcase(&cases[i], 3);
  }
}

Test(conv_fast, float16_residual_is_read_in_place) {
  const fcase k = {1, 8, 9, 9, 16, 1, 3, 3, 1, 1, 1, 1, 1};
  int64_t ny = 16 * 9 * 9, nx = 8 * 81, nw = 16 * 8 * 9;
  float *x = malloc((size_t)nx * 4), *w = malloc((size_t)nw * 4), *b = malloc(16 * 4),
        *z = malloc((size_t)ny * 4);
  uint16_t *xh = malloc((size_t)nx * 2), *wh = malloc((size_t)nw * 2), *bh = malloc(16 * 2),
           *zh = malloc((size_t)ny * 2);
  uint16_t *yh = malloc((size_t)ny * 2);
  double *ref = malloc((size_t)ny * 8);
  /* values exact in float16, so the reference sees what the kernel sees */
  for (int64_t i = 0; i < nx; i++) x[i] = mx__f16_to_f32(xh[i] = mx__f32_to_f16(rnd()));
  for (int64_t i = 0; i < nw; i++) w[i] = mx__f16_to_f32(wh[i] = mx__f32_to_f16(rnd()));
  for (int64_t i = 0; i < 16; i++) b[i] = mx__f16_to_f32(bh[i] = mx__f32_to_f16(rnd()));
  for (int64_t i = 0; i < ny; i++) z[i] = mx__f16_to_f32(zh[i] = mx__f32_to_f16(rnd()));
  reference(&k, x, w, b, z, ref, 9, 9);
  mx_conv_params p = params_of(&k);
  mx_kernel_call *c = kc_new(4, 1, &p);
  kc_set(c, 0, MX_FLOAT16, 4, DIMS(1, 8, 9, 9), xh);
  kc_set(c, 1, MX_FLOAT16, 4, DIMS(16, 8, 3, 3), wh);
  kc_set(c, 2, MX_FLOAT16, 1, DIMS(16), bh);
  kc_set(c, 3, MX_FLOAT16, 4, DIMS(1, 16, 9, 9), zh);
  kc_set(c, 4, MX_FLOAT16, 4, DIMS(1, 16, 9, 9), yh);
  cr_assert_eq(kc_run("Conv", c), MX_OK, "%s", c->why ? c->why : "");
  for (int64_t i = 0; i < ny; i++)
    cr_assert(fabs(mx__f16_to_f32(yh[i]) - ref[i]) <= 2e-3 * (1.0 + fabs(ref[i])), "[%lld] %g vs %g",
              (long long)i, (double)mx__f16_to_f32(yh[i]), ref[i]);
  free(x), free(w), free(b), free(z), free(xh), free(wh), free(bh), free(zh), free(yh), free(ref), free(c);
}

Test(conv_fast, residual_of_the_wrong_shape_is_refused) {
  const fcase k = {1, 4, 5, 5, 4, 1, 3, 3, 1, 1, 1, 1, 1};
  float x[100] = {0}, w[144] = {0}, b[4] = {0}, z[99] = {0}, y[100];
  mx_conv_params p = params_of(&k);
  mx_kernel_call *c = kc_new(4, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 4, DIMS(1, 4, 5, 5), x);
  kc_set(c, 1, MX_FLOAT32, 4, DIMS(4, 4, 3, 3), w);
  kc_set(c, 2, MX_FLOAT32, 1, DIMS(4), b);
  kc_set(c, 3, MX_FLOAT32, 4, DIMS(1, 4, 5, 4), z);
  kc_set(c, 4, MX_FLOAT32, 4, DIMS(1, 4, 5, 5), y);
  cr_assert_eq(kc_run("Conv", c), MX_ERR_KERNEL);
  cr_assert_not_null(c->why);
  free(c);
}

/* Runs a pooling op on x (planes of h x w) in float32 and in float64, and compares. */
static void pool_both(const mx_conv_params *p, int64_t planes, int64_t h, int64_t w, int64_t oh, int64_t ow,
                      bool with_nan) {
  int64_t nx = planes * h * w, ny = planes * oh * ow;
  float *x = malloc((size_t)nx * 4), *y = malloc((size_t)ny * 4);
  double *xd = malloc((size_t)nx * 8), *yd = malloc((size_t)ny * 8);
  for (int64_t i = 0; i < nx; i++) {
    /* ties on purpose: few distinct values */
    x[i] = with_nan && i % 17 == 3 ? NAN : (float)((int)(rnd() * 8.0f)) * 0.5f;
    xd[i] = x[i];
  }
  mx_kernel_call *c = kc_new(1, 1, p);
  const char *op = p->op == MX_CONVOP_MAX_POOL ? "MaxPool" : "GlobalAveragePool";
  kc_set(c, 0, MX_FLOAT32, 4, DIMS(1, planes, h, w), x);
  kc_set(c, 1, MX_FLOAT32, 4, DIMS(1, planes, oh, ow), y);
  cr_assert_eq(kc_run(op, c), MX_OK, "%s", c->why ? c->why : "");
  kc_set(c, 0, MX_FLOAT64, 4, DIMS(1, planes, h, w), xd);
  kc_set(c, 1, MX_FLOAT64, 4, DIMS(1, planes, oh, ow), yd);
  cr_assert_eq(kc_run(op, c), MX_OK, "%s", c->why ? c->why : "");
  for (int64_t i = 0; i < ny; i++) {
    if (p->op == MX_CONVOP_MAX_POOL)
      cr_assert((isnan(y[i]) && isnan(yd[i])) || y[i] == (float)yd[i], "[%lld] %g vs %g", (long long)i,
                (double)y[i], yd[i]);
    else
      cr_assert(fabs(y[i] - yd[i]) <= 1e-6 * (1.0 + fabs(yd[i])), "[%lld] %g vs %g", (long long)i,
                (double)y[i], yd[i]);
  }
  free(x), free(y), free(xd), free(yd), free(c);
}

Test(conv_fast, maxpool_and_global_average_match_the_generic_walk) {
  struct {
    int64_t h, w, k, s, pad, ceil;
  } mp[] = {{16, 16, 3, 2, 1, 0},
            {15, 17, 3, 2, 1, 1},
            {9, 9, 2, 2, 0, 0},
            {7, 10, 3, 1, 1, 0},
            {5, 5, 5, 3, 2, 1},
            {40, 70, 3, 2, 1, 0},     /* rows of 35: AVX-512 lanes in two vectors (pool_lanes.c) */
            {112, 112, 3, 2, 1, 0}}; /* ResNet's: rows of 56 */
  for (size_t i = 0; i < sizeof mp / sizeof *mp; i++)
    for (int nan = 0; nan < 2; nan++) {
      mx_conv_params p;
      memset(&p, 0, sizeof p);
      p.op = MX_CONVOP_MAX_POOL;
      p.n_kernel = 2;
      p.kernel_shape[0] = p.kernel_shape[1] = mp[i].k;
      p.n_strides = 2;
      p.strides[0] = p.strides[1] = mp[i].s;
      p.n_pads = 4;
      for (int j = 0; j < 4; j++) p.pads[j] = mp[i].pad;
      p.ceil_mode = (int32_t)mp[i].ceil;
      int64_t span_h = mp[i].h + 2 * mp[i].pad - mp[i].k, span_w = mp[i].w + 2 * mp[i].pad - mp[i].k;
      int64_t oh = (mp[i].ceil ? (span_h + mp[i].s - 1) : span_h) / mp[i].s + 1;
      int64_t ow = (mp[i].ceil ? (span_w + mp[i].s - 1) : span_w) / mp[i].s + 1;
      /* ceil mode: a last window starting in the end padding is dropped */
      if (mp[i].ceil && (oh - 1) * mp[i].s >= mp[i].h + mp[i].pad) oh--;
      if (mp[i].ceil && (ow - 1) * mp[i].s >= mp[i].w + mp[i].pad) ow--;
      pool_both(&p, 3, mp[i].h, mp[i].w, oh, ow, nan);
    }
  mx_conv_params g;
  memset(&g, 0, sizeof g);
  g.op = MX_CONVOP_GLOBAL_AVERAGE_POOL;
  pool_both(&g, 5, 7, 9, 1, 1, false);
  pool_both(&g, 2, 1, 3, 1, 1, false);
}

/* Inputs of 1 MB and more split into bands of output rows among the threads (kernels/pool.c):
 * ResNet's MaxPool over 24 planes, and 100 planes of 40x70 (bands of 2 rows on 3 threads, the
 * last shorter), with the same outputs as the generic walk. */
Test(conv_fast, maxpool_split_among_threads_matches_the_generic_walk) {
  struct {
    int64_t planes, h, w, oh, ow;
  } mp[] = {{24, 112, 112, 56, 56}, {100, 40, 70, 20, 35}};
  for (int32_t threads = 2; threads <= 3; threads++) {
    mx__kthreads_set(threads);
    for (size_t i = 0; i < sizeof mp / sizeof *mp; i++)
      for (int nan = 0; nan < 2; nan++) {
        mx_conv_params p;
        memset(&p, 0, sizeof p);
        p.op = MX_CONVOP_MAX_POOL;
        p.n_kernel = p.n_strides = 2;
        p.kernel_shape[0] = p.kernel_shape[1] = 3;
        p.strides[0] = p.strides[1] = 2;
        p.n_pads = 4;
        for (int j = 0; j < 4; j++) p.pads[j] = 1;
        pool_both(&p, mp[i].planes, mp[i].h, mp[i].w, mp[i].oh, mp[i].ow, nan);
      }
  }
  mx__kthreads_set(1);
}

/* --- the intra-op thread pool (kernels/threads.c) ---------------------------------------------- */

typedef struct count_ctx {
  int64_t n;
  int32_t max_slots;
  int *hits;    /* per task */
  int bad_slot; /* a slot outside [0, max_slots) ran a task */
} count_ctx;

static void count_task(void *vctx, int64_t task, int32_t slot) {
  count_ctx *c = vctx;
  __atomic_fetch_add(&c->hits[task], 1, __ATOMIC_RELAXED);
  if (slot < 0 || slot >= c->max_slots) __atomic_store_n(&c->bad_slot, 1, __ATOMIC_RELAXED);
}

/* Many runs of varied sizes, back to back: every task runs exactly once, on an allowed slot. */
static void *many_runs(void *arg) {
  int rounds = *(int *)arg;
  int hits[97];
  for (int r = 0; r < rounds; r++) {
    count_ctx c = {.n = r % 97, .max_slots = 1 + r % 4, .hits = hits, .bad_slot = 0};
    memset(hits, 0, sizeof hits);
    mx__kparallel(c.n, c.max_slots, count_task, &c);
    for (int64_t t = 0; t < c.n; t++)
      if (hits[t] != 1) return (void *)1;
    if (c.bad_slot) return (void *)1;
  }
  return NULL;
}

Test(conv_fast, thread_pool_runs_every_task_once) {
  mx__kthreads_set(3);
  int rounds = 3000;
  cr_assert_null(many_runs(&rounds));
  /* two callers at once: one of them finds the pool busy and runs its tasks itself */
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, many_runs, &rounds), 0);
  void *other = many_runs(&rounds);
  void *ret;
  pthread_join(t, &ret);
  mx__kthreads_set(1);
  cr_assert_null(other);
  cr_assert_null(ret);
}
