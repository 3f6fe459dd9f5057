/* Kernel tests of the Winograd F(4x4, 3x3) Conv core (kernels/conv_winograd.c): near a double
 * reference and the im2col path on many shapes (odd sizes, pads 0/1/2 and asymmetric, batch 2,
 * channels not a multiple of 16, with and without bias, residual and activation); 1, 2 and 3
 * threads give the same bits (blocks alone and the shared transform); weights transformed
 * ahead give the bits of the per-run transform; through the Conv kernel a pre-packed block is
 * read and a stale one ignored; the AVX-512 lane transforms give the plain transforms' bits; on
 * ResNet-50-like values the error stays far inside the model zoo's tolerance (rtol 1e-3, atol 1e-4). Skipped where the CPU has no own GEMM copy. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph/ops/conv_params.h"
#include "kernels/conv_impl.h"
#include "kernels/conv_winograd.h"
#include "kernels/conv_winograd_lanes.h"
#include "kernels/gemm_f32.h"
#include "kernels/kernel.h"
#include "kernels/kernels_support.h"
#include "kernels/prepack.h"
#include "kernels/threads.h"

static void restore(void) { mx__kthreads_set(1); }

TestSuite(conv_winograd, .fini = restore);

static uint32_t seed = 77u;
static float rnd(void) { return ks_rnd(&seed); }

/* A 3x3 stride-1 Conv: batch, channels in, map h x w, channels out, pads (top, left, bottom,
 * right), bias, residual, activation. */
typedef struct wcase {
  int64_t n, c, h, w, m;
  int64_t pt, pl, pb, pr;
  bool bias, resid;
  int32_t act;
} wcase;

typedef struct wdata {
  mx_kwin win;
  mx_conv_params p;
  float *x, *wt, *b, *z;
  int64_t oh, ow, nx, nw, ny;
} wdata;

/* resnet: post-ReLU inputs in [0, 2), He-scaled weights, small biases (ResNet-50's value
 * ranges); else uniform in [-1, 1). */
static wdata make_data(const wcase *t, bool resnet) {
  seed = 77u;
  wdata d;
  memset(&d, 0, sizeof d);
  d.oh = t->h + t->pt + t->pb - 2;
  d.ow = t->w + t->pl + t->pr - 2;
  d.nx = t->n * t->c * t->h * t->w;
  d.nw = t->m * t->c * 9;
  d.ny = t->n * t->m * d.oh * d.ow;
  d.x = malloc((size_t)d.nx * 4);
  d.wt = malloc((size_t)d.nw * 4);
  d.b = malloc((size_t)t->m * 4);
  d.z = malloc((size_t)d.ny * 4);
  cr_assert(d.x && d.wt && d.b && d.z);
  const float wscale = resnet ? sqrtf(6.0f / (float)(9 * t->c)) : 1.0f;
  for (int64_t i = 0; i < d.nx; i++) d.x[i] = resnet ? fmaxf(0.0f, 2.0f * rnd()) : rnd();
  for (int64_t i = 0; i < d.nw; i++) d.wt[i] = wscale * rnd();
  for (int64_t i = 0; i < t->m; i++) d.b[i] = resnet ? 0.1f * rnd() : rnd();
  for (int64_t i = 0; i < d.ny; i++) d.z[i] = rnd();
  memset(&d.p, 0, sizeof d.p);
  d.p.op = MX_CONVOP_CONV;
  d.p.group = 1;
  d.p.n_strides = d.p.n_dilations = 2;
  d.p.strides[0] = d.p.strides[1] = 1;
  d.p.dilations[0] = d.p.dilations[1] = 1;
  d.p.n_pads = 4;
  d.p.pads[0] = t->pt;
  d.p.pads[1] = t->pl;
  d.p.pads[2] = t->pb;
  d.p.pads[3] = t->pr;
  d.p.fused_act = t->act;
  d.p.act_beta = 0.75f;
  cr_assert(mx__kwin_forward(&d.p, 2, DIMS(t->h, t->w), DIMS(d.oh, d.ow), DIMS(3, 3), &d.win));
  return d;
}

static void free_data(wdata *d) {
  free(d->x);
  free(d->wt);
  free(d->b);
  free(d->z);
}

static mx_kconv_f32 job_of(const wcase *t, const wdata *d, float *y) {
  mx_kconv_f32 j;
  memset(&j, 0, sizeof j);
  j.w = &d->win;
  j.n = t->n;
  j.c = t->c;
  j.m = t->m;
  j.group = 1;
  j.x = d->x;
  j.wt = d->wt;
  j.b = t->bias ? d->b : NULL;
  j.z = t->resid ? d->z : NULL;
  j.y = y;
  j.act = t->act;
  j.beta = 0.75f;
  return j;
}

/* y through the Winograd core on `threads` threads; u: weights transformed ahead, or NULL. */
static void run_wino(const wcase *t, const wdata *d, int32_t threads, const float *u, float *y) {
  mx__kthreads_set(threads);
  for (int64_t i = 0; i < d->ny; i++) y[i] = NAN; /* every output must be written */
  const size_t fl = mx__kconv_wino_ws_floats(&d->win, t->n, t->c, t->m, 1, threads);
  cr_assert(fl > 0);
  float *ws = aligned_alloc(64, (fl * 4 + 63) / 64 * 64);
  cr_assert(ws);
  mx_kconv_f32 j = job_of(t, d, y);
  cr_assert(mx__kconv_wino_run(&j, u, ws, fl));
  free(ws);
  mx__kthreads_set(1);
}

/* y through the im2col + GEMM path of conv_fast.c on one thread. */
static void run_im2col(const wcase *t, const wdata *d, float *y) {
  mx__kthreads_set(1);
  const size_t fl = mx__kconv_f32_slot_floats(&d->win, t->n, t->c, t->m, 1, 1);
  float *ws = aligned_alloc(64, (fl * 4 + 63) / 64 * 64);
  cr_assert(ws);
  mx_kconv_f32 j = job_of(t, d, y);
  cr_assert(mx__kconv_f32_run(&j, ws, fl));
  free(ws);
}

/* The Conv in double into want (ny), and each output's sum of |products| into mag. */
static void reference(const wcase *t, const wdata *d, double *want, double *mag) {
  for (int64_t in = 0; in < t->n; in++)
    for (int64_t m = 0; m < t->m; m++)
      for (int64_t i = 0; i < d->oh; i++)
        for (int64_t j = 0; j < d->ow; j++) {
          double acc = 0.0, g = 0.0;
          for (int64_t ci = 0; ci < t->c; ci++)
            for (int64_t a = 0; a < 3; a++)
              for (int64_t e = 0; e < 3; e++) {
                const int64_t ih = i - t->pt + a, iw = j - t->pl + e;
                if (ih < 0 || ih >= t->h || iw < 0 || iw >= t->w) continue;
                const double v =
                    (double)d->x[((in * t->c + ci) * t->h + ih) * t->w + iw] * d->wt[((m * t->c + ci) * 3 + a) * 3 + e];
                acc += v;
                g += fabs(v);
              }
          const int64_t at = ((in * t->m + m) * d->oh + i) * d->ow + j;
          double v = acc + (t->bias ? d->b[m] : 0.0) + (t->resid ? d->z[at] : 0.0);
          if (t->act == MX_CONV_ACT_RELU) v = v > 0.0 ? v : 0.0;
          if (t->act == MX_CONV_ACT_CLIP) v = v < 0.0 ? 0.0 : (v > 0.75 ? 0.75 : v);
          want[at] = v;
          mag[at] = g;
        }
}

static const wcase shapes[] = {
    {1, 16, 14, 14, 16, 1, 1, 1, 1, true, false, MX_CONV_ACT_RELU},
    {1, 5, 9, 11, 7, 1, 1, 1, 1, true, true, MX_CONV_ACT_NONE},    /* odd sizes, partial tiles */
    {2, 20, 13, 10, 19, 0, 0, 0, 0, false, false, MX_CONV_ACT_NONE}, /* batch 2, no pads */
    {1, 17, 8, 8, 33, 2, 2, 2, 2, true, false, MX_CONV_ACT_CLIP},   /* pads 2 */
    {2, 24, 15, 17, 40, 0, 1, 2, 1, true, true, MX_CONV_ACT_RELU},  /* asymmetric pads */
    {1, 3, 3, 3, 2, 0, 0, 0, 0, false, false, MX_CONV_ACT_NONE},    /* one output */
    {1, 64, 28, 28, 64, 1, 1, 1, 1, true, true, MX_CONV_ACT_RELU},
    {3, 33, 7, 6, 50, 1, 0, 1, 2, false, true, MX_CONV_ACT_RELU},   /* three images */
    {1, 48, 30, 5, 18, 1, 2, 0, 1, true, false, MX_CONV_ACT_NONE},  /* tall and narrow */
};

Test(conv_winograd, near_double_and_the_im2col_path_on_many_shapes) {
  if (!mx__kgemm_f32_available()) cr_skip_test("no AVX-512 or AVX2 copy on this CPU");
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    const wcase *t = &shapes[s];
    wdata d = make_data(t, false);
    cr_assert(mx__kconv_wino_applies(&d.win, t->c, t->m, 1));
    float *y = malloc((size_t)d.ny * 4), *yi = malloc((size_t)d.ny * 4);
    double *want = malloc((size_t)d.ny * 8), *mag = malloc((size_t)d.ny * 8);
    cr_assert(y && yi && want && mag);
    run_wino(t, &d, 1, NULL, y);
    run_im2col(t, &d, yi);
    reference(t, &d, want, mag);
    int64_t bad = 0;
    for (int64_t i = 0; i < d.ny; i++) {
      const double tol = 2e-5 * (mag[i] + 1.0);
      if (!(fabs(y[i] - want[i]) <= tol && fabs(y[i] - yi[i]) <= 2.0 * tol) && bad++ < 5)
        cr_expect(0, "shape %zu at %lld: %g, im2col %g, double %g", s, (long long)i, y[i], yi[i], want[i]);
    }
    cr_expect_eq(bad, 0, "shape %zu: %lld outputs off", s, (long long)bad);
    free(y);
    free(yi);
    free(want);
    free(mag);
    free_data(&d);
  }
}

Test(conv_winograd, one_two_and_three_threads_give_the_same_bits) {
  if (!mx__kgemm_f32_available()) cr_skip_test("no AVX-512 or AVX2 copy on this CPU");
  static const wcase cases[] = {
      {1, 64, 56, 56, 64, 1, 1, 1, 1, true, false, MX_CONV_ACT_RELU},    /* several blocks */
      {1, 256, 14, 14, 256, 1, 1, 1, 1, true, true, MX_CONV_ACT_RELU},   /* one block: shared V */
      {2, 128, 28, 28, 128, 1, 1, 1, 1, true, false, MX_CONV_ACT_NONE},  /* batch 2 */
      {2, 24, 15, 17, 40, 0, 1, 2, 1, true, true, MX_CONV_ACT_CLIP},
  };
  for (size_t s = 0; s < sizeof cases / sizeof cases[0]; s++) {
    const wcase *t = &cases[s];
    wdata d = make_data(t, true);
    float *y1 = malloc((size_t)d.ny * 4), *yt = malloc((size_t)d.ny * 4);
    cr_assert(y1 && yt);
    run_wino(t, &d, 1, NULL, y1);
    for (int32_t th = 2; th <= 3; th++) {
      run_wino(t, &d, th, NULL, yt);
      cr_expect(memcmp(y1, yt, (size_t)d.ny * 4) == 0, "case %zu: 1 and %d threads differ", s, th);
    }
    free(y1);
    free(yt);
    free_data(&d);
  }
}

/* The lane transforms (kernels/conv_winograd_lanes.c, with the GEMM's AVX-512 copy) against the
 * plain ones (the AVX2 copy, whose products give the same bits): tile rows of fewer and more
 * than 16 tiles, segments that cross a 32-tile panel, a batch's last partial panel, pads. */
Test(conv_winograd, lane_transforms_give_the_bits_of_the_plain_ones) {
  if (mx__kgemm_f32_use(3) != 3) {
    mx__kgemm_f32_use(0);
    cr_skip_test("no AVX-512 copy on this CPU");
  }
  static const wcase cases[] = {
      {1, 64, 56, 56, 64, 1, 1, 1, 1, true, false, MX_CONV_ACT_RELU},  /* 14 tiles a row */
      {2, 20, 70, 75, 24, 1, 1, 1, 1, true, true, MX_CONV_ACT_CLIP},   /* 19 tiles a row, batch 2 */
      {1, 24, 13, 38, 17, 0, 2, 1, 0, false, true, MX_CONV_ACT_NONE},  /* 10 tiles, asymmetric pads */
      {1, 16, 130, 9, 16, 1, 1, 1, 1, true, false, MX_CONV_ACT_RELU},  /* 3 tiles, many rows */
  };
  for (size_t s = 0; s < sizeof cases / sizeof cases[0]; s++) {
    const wcase *t = &cases[s];
    wdata d = make_data(t, true);
    float *lanes = malloc((size_t)d.ny * 4), *plain = malloc((size_t)d.ny * 4);
    cr_assert(lanes && plain);
    for (int32_t th = 1; th <= 2; th++) {
      mx__kgemm_f32_use(3);
      cr_assert(mx__kwino_lanes());
      run_wino(t, &d, th, NULL, lanes);
      mx__kgemm_f32_use(2);
      cr_assert(!mx__kwino_lanes());
      run_wino(t, &d, th, NULL, plain);
      cr_expect(memcmp(lanes, plain, (size_t)d.ny * 4) == 0, "case %zu, %d threads: lane and plain transforms differ",
                s, th);
    }
    free(lanes);
    free(plain);
    free_data(&d);
  }
  mx__kgemm_f32_use(0);
}

Test(conv_winograd, weights_transformed_ahead_give_the_same_bits) {
  if (!mx__kgemm_f32_available()) cr_skip_test("no AVX-512 or AVX2 copy on this CPU");
  const wcase t = {2, 40, 20, 19, 24, 1, 1, 1, 1, true, true, MX_CONV_ACT_RELU};
  wdata d = make_data(&t, false);
  float *plain = malloc(mx__kconv_wino_u_floats(t.m, t.c) * 4);
  float *u = aligned_alloc(64, mx__kconv_wino_packed_floats(t.m, t.c) * 4);
  float *y1 = malloc((size_t)d.ny * 4), *y2 = malloc((size_t)d.ny * 4);
  cr_assert(plain && u && y1 && y2);
  mx__kconv_wino_transform_weights(d.wt, t.m, t.c, 0, t.m, plain);
  mx__kconv_wino_pack_weights(plain, t.m, t.c, mx__kconv_wino_mr(), 0, t.m, u);
  free(plain);
  run_wino(&t, &d, 1, NULL, y1);
  for (int32_t th = 1; th <= 2; th++) {
    run_wino(&t, &d, th, u, y2);
    cr_expect(memcmp(y1, y2, (size_t)d.ny * 4) == 0, "%d threads: transformed ahead differs", th);
  }
  free(u);
  free(y1);
  free(y2);
  free_data(&d);
}

/* Through the Conv kernel (a shape the dispatch gives the core): y with call->prepacked set. */
static void kernel_run(const wcase *t, const wdata *d, const float *wt, const void *block, float *y) {
  mx_kernel_call *c = kc_new(3, 1, &d->p);
  kc_set(c, 0, MX_FLOAT32, 4, DIMS(t->n, t->c, t->h, t->w), d->x);
  kc_set(c, 1, MX_FLOAT32, 4, DIMS(t->m, t->c, 3, 3), (void *)wt);
  kc_set(c, 2, MX_FLOAT32, 1, DIMS(t->m), d->b);
  kc_set(c, 3, MX_FLOAT32, 4, DIMS(t->n, t->m, d->oh, d->ow), y);
  c->prepacked = block;
  cr_assert_eq(kc_run("Conv", c), MX_OK, "%s", c->why ? c->why : "");
  free(c);
}

/* The pre-packed block of weights wt for the case (malloc'd), or NULL when none is made. */
static void *kernel_block(const wcase *t, const wdata *d, const float *wt) {
  mx_kernel_call *c = kc_new(3, 1, &d->p);
  kc_set(c, 0, MX_FLOAT32, 4, DIMS(t->n, t->c, t->h, t->w), NULL);
  kc_set(c, 1, MX_FLOAT32, 4, DIMS(t->m, t->c, 3, 3), (void *)wt);
  kc_set(c, 2, MX_FLOAT32, 1, DIMS(t->m), NULL);
  kc_set(c, 3, MX_FLOAT32, 4, DIMS(t->n, t->m, d->oh, d->ow), NULL);
  mx_kernel_prepack_layout l;
  const size_t bytes = mx__kconv_prepack(c, NULL, &l);
  void *block = NULL;
  if (bytes) {
    cr_expect_eq(l.v[0], MX_KPREPACK_CONV_WINO);
    block = aligned_alloc(64, bytes);
    cr_assert(block);
    cr_assert_eq(mx__kconv_prepack(c, block, &l), bytes);
  }
  free(c);
  return block;
}

Test(conv_winograd, the_kernel_reads_a_block_and_ignores_a_stale_one) {
  if (!mx__kgemm_f32_available()) cr_skip_test("no AVX-512 or AVX2 copy on this CPU");
  const wcase t = {1, 32, 28, 28, 48, 1, 1, 1, 1, true, false, MX_CONV_ACT_NONE}; /* 7x7 tiles: chosen */
  wdata d = make_data(&t, false);
  if (!mx__kconv_wino_chosen(&d.win, t.n, t.c, t.m, 1)) cr_skip_test("MIXRT_WINOGRAD=0");
  float *y0 = malloc((size_t)d.ny * 4), *y1 = malloc((size_t)d.ny * 4), *w2 = malloc((size_t)d.nw * 4);
  cr_assert(y0 && y1 && w2);
  for (int64_t i = 0; i < d.nw; i++) w2[i] = -d.wt[i];
  kernel_run(&t, &d, d.wt, NULL, y0);
  void *block = kernel_block(&t, &d, d.wt);
  cr_assert_not_null(block);
  kernel_run(&t, &d, d.wt, block, y1);
  cr_expect(memcmp(y0, y1, (size_t)d.ny * 4) == 0, "the block's bits differ from the per-run transform");
  /* a zeroed block: read (the output is the bias) */
  const mx_kprepack_hdr *h = block;
  memset((char *)block + MX_KPREPACK_HDR_BYTES, 0, (size_t)h->bytes - MX_KPREPACK_HDR_BYTES);
  kernel_run(&t, &d, d.wt, block, y1);
  cr_expect_eq(y1[0], d.b[0], "a zeroed block was not read");
  free(block);
  /* the block of other weights handed to this call: ignored */
  void *stale = kernel_block(&t, &d, w2);
  kernel_run(&t, &d, d.wt, stale, y1);
  cr_expect(memcmp(y0, y1, (size_t)d.ny * 4) == 0, "a stale block was read");
  free(stale);
  free(y0);
  free(y1);
  free(w2);
  free_data(&d);
}

/* ResNet-50's four stride-1 3x3 shapes on its value ranges: error vs double well inside the zoo
 * test's rtol 1e-3 / atol 1e-4 (under half of it for one layer; measured 0.16-0.25, im2col
 * 0.01-0.02: F(4x4, 3x3) adds about ten times im2col's rounding error). */
Test(conv_winograd, resnet50_value_ranges_stay_inside_the_zoo_tolerance) {
  if (!mx__kgemm_f32_available()) cr_skip_test("no AVX-512 or AVX2 copy on this CPU");
  static const wcase cases[] = {
      {1, 64, 56, 56, 64, 1, 1, 1, 1, true, false, MX_CONV_ACT_RELU},
      {1, 128, 28, 28, 128, 1, 1, 1, 1, true, false, MX_CONV_ACT_NONE},
      {1, 256, 14, 14, 256, 1, 1, 1, 1, true, false, MX_CONV_ACT_NONE},
      {1, 512, 7, 7, 512, 1, 1, 1, 1, true, false, MX_CONV_ACT_NONE},
  };
  for (size_t s = 0; s < sizeof cases / sizeof cases[0]; s++) {
    const wcase *t = &cases[s];
    wdata d = make_data(t, true);
    float *y = malloc((size_t)d.ny * 4), *yi = malloc((size_t)d.ny * 4);
    double *want = malloc((size_t)d.ny * 8), *mag = malloc((size_t)d.ny * 8);
    cr_assert(y && yi && want && mag);
    run_wino(t, &d, 1, NULL, y);
    run_im2col(t, &d, yi);
    reference(t, &d, want, mag);
    double worst = 0.0, worst_i2c = 0.0; /* error / zoo tolerance */
    for (int64_t i = 0; i < d.ny; i++) {
      const double tol = 1e-4 + 1e-3 * fabs(want[i]);
      const double e = fabs(y[i] - want[i]) / tol, ei = fabs(yi[i] - want[i]) / tol;
      if (e > worst) worst = e;
      if (ei > worst_i2c) worst_i2c = ei;
    }
    cr_log_info("%lldx%lld, %lld channels: worst error %.4f of the zoo tolerance (im2col %.4f)",
                (long long)t->h, (long long)t->w, (long long)t->c, worst, worst_i2c);
    cr_expect(worst < 0.5, "shape %zu: worst error %.4f of the zoo tolerance", s, worst);
    free(y);
    free(yi);
    free(want);
    free(mag);
    free_data(&d);
  }
}

/* --- timing (MIXRT_WINO_BENCH=1 in the environment; skipped otherwise) ------------------------ */

#include <time.h>

static double now_s(clockid_t clk) {
  struct timespec ts;
  clock_gettime(clk, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Best of `reps` runs of ResNet-50's stride-1 3x3 layers through each path, weights packed
 * ahead for both (as a model runs them): process CPU time and wall time, ms, and GFLOP/s
 * counting the direct Conv's multiply-adds. */
Test(conv_winograd, timing_of_resnet50_layers) {
  const char *env = getenv("MIXRT_WINO_BENCH");
  if (!env || !mx__kgemm_f32_available()) cr_skip_test("MIXRT_WINO_BENCH not set");
  static const wcase cases[] = {
      {1, 64, 56, 56, 64, 1, 1, 1, 1, true, false, MX_CONV_ACT_RELU},
      {1, 128, 28, 28, 128, 1, 1, 1, 1, true, false, MX_CONV_ACT_RELU},
      {1, 256, 14, 14, 256, 1, 1, 1, 1, true, false, MX_CONV_ACT_RELU},
      {1, 512, 7, 7, 512, 1, 1, 1, 1, true, false, MX_CONV_ACT_RELU},
  };
  const int reps = 15;
  for (int32_t th = 1; th <= 2; th++)
    for (size_t s = 0; s < sizeof cases / sizeof cases[0]; s++) {
      const wcase *t = &cases[s];
      wdata d = make_data(t, true);
      float *y = malloc((size_t)d.ny * 4), *u = aligned_alloc(64, mx__kconv_wino_packed_floats(t->m, t->c) * 4);
      float *plain = malloc(mx__kconv_wino_u_floats(t->m, t->c) * 4);
      mx__kconv_wino_transform_weights(d.wt, t->m, t->c, 0, t->m, plain);
      mx__kconv_wino_pack_weights(plain, t->m, t->c, mx__kconv_wino_mr(), 0, t->m, u);
      free(plain);
      mx__kthreads_set(th);
      mx_kconv_f32 j = job_of(t, &d, y);
      const int64_t mr = mx__kconv_f32_pre_mr(&j);
      float *pa = malloc(mx__kgemm_f32_pre_a_floats(t->m, t->c * 9, mr ? mr : 14) * 4);
      if (mr) mx__kgemm_f32_pre_a_pack(d.wt, t->c * 9, t->m, t->c * 9, mr, 0, t->m, pa);
      const size_t f1 = (size_t)th * mx__kconv_f32_slot_floats(&d.win, t->n, t->c, t->m, 1, th);
      const size_t f2 = mx__kconv_wino_ws_floats(&d.win, t->n, t->c, t->m, 1, th);
      float *ws = aligned_alloc(64, ((f1 > f2 ? f1 : f2) * 4 + 63) / 64 * 64);
      double best[2][2] = {{1e9, 1e9}, {1e9, 1e9}};
      for (int r = 0; r < reps; r++)
        for (int path = 0; path < 2; path++) {
          double c0 = now_s(CLOCK_PROCESS_CPUTIME_ID), w0 = now_s(CLOCK_MONOTONIC);
          if (path == 0) {
            j.pre_a = mr ? pa : NULL;
            j.pre_mr = mr;
            cr_assert(mx__kconv_f32_run(&j, ws, f1));
          } else {
            j.pre_a = NULL;
            cr_assert(mx__kconv_wino_run(&j, u, ws, f2));
          }
          double c = now_s(CLOCK_PROCESS_CPUTIME_ID) - c0, w = now_s(CLOCK_MONOTONIC) - w0;
          if (c < best[path][0]) best[path][0] = c;
          if (w < best[path][1]) best[path][1] = w;
        }
      const double gflop = 2e-9 * (double)(t->m * t->c * 9 * d.oh * d.ow);
      cr_log_info("%d thr %3lldch %2lldx%-2lld im2col cpu %.3f wall %.3f ms (%.0f GF/s) | winograd cpu %.3f wall %.3f ms (%.0f GF/s)",
                  th, (long long)t->c, (long long)t->h, (long long)t->w, 1e3 * best[0][0], 1e3 * best[0][1],
                  gflop / best[0][1], 1e3 * best[1][0], 1e3 * best[1][1], gflop / best[1][1]);
      free(ws);
      free(pa);
      free(u);
      free(y);
      free_data(&d);
    }
  mx__kthreads_set(1);
}
