/* Kernel tests of the float32 Conv on several intra-op threads (kernels/conv_fast.c): the splits
 * a run makes for 2 and 3 threads (bands, output-channel chunks of whole row tiles, bands packed
 * once into a shared block by all threads before the products read them, pointwise bands in
 * whole 32-column panels) give the bits of 1 thread, near a double reference, on ResNet-50's
 * small-map shapes (14x14 and 7x7, 3x3 and 1x1, stride 2), batches and groups; a workspace too
 * small for the shared block runs the same bits without it. Skipped where the CPU has neither
 * own GEMM copy. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph/ops/conv_params.h"
#include "kernels/conv_impl.h"
#include "kernels/gemm_f32.h"
#include "kernels/kernel.h"
#include "kernels/kernels_support.h"
#include "kernels/threads.h"

static void restore(void) { mx__kthreads_set(1); }

TestSuite(conv_threads, .fini = restore);

static uint32_t seed = 2023u;

static float *rnd_buf(int64_t n) { return ks_rnd_buf(&seed, n); }

/* A square 2-D Conv: batch, channels in, map size, channels out, group, kernel, stride, pad. */
typedef struct tcase {
  int64_t n, c, h, m, group, k, s, pad;
  int32_t act;
} tcase;

static int64_t osize(const tcase *t) { return (t->h + 2 * t->pad - t->k) / t->s + 1; }

/* The case's tensors, the same on every call (the seed is reset). */
typedef struct tdata {
  float *x, *w, *b, *z;
  int64_t nx, nw, ny;
} tdata;

static tdata make_data(const tcase *t) {
  seed = 31u;
  tdata d;
  int64_t o = osize(t);
  d.nx = t->n * t->c * t->h * t->h;
  d.nw = t->m * (t->c / t->group) * t->k * t->k;
  d.ny = t->n * t->m * o * o;
  d.x = rnd_buf(d.nx);
  d.w = rnd_buf(d.nw);
  d.b = rnd_buf(t->m);
  d.z = rnd_buf(d.ny);
  return d;
}

static void free_data(tdata *d) {
  free(d->x);
  free(d->w);
  free(d->b);
  free(d->z);
}

static mx_conv_params params_of(const tcase *t) {
  mx_conv_params p;
  memset(&p, 0, sizeof p);
  p.op = MX_CONVOP_CONV;
  p.group = t->group;
  p.n_strides = p.n_dilations = 2;
  p.strides[0] = p.strides[1] = t->s;
  p.dilations[0] = p.dilations[1] = 1;
  p.n_pads = 4;
  for (int i = 0; i < 4; i++) p.pads[i] = t->pad;
  p.fused_act = t->act;
  p.act_beta = 0.75f;
  return p;
}

/* y = the Conv (bias, residual, activation) through the kernel on `threads` threads. */
static void run_kernel(const tcase *t, const tdata *d, int32_t threads, float *y) {
  mx_conv_params p = params_of(t);
  int64_t o = osize(t);
  mx__kthreads_set(threads);
  for (int64_t i = 0; i < d->ny; i++) y[i] = NAN; /* every output must be written */
  mx_kernel_call *c = kc_new(4, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 4, DIMS(t->n, t->c, t->h, t->h), d->x);
  kc_set(c, 1, MX_FLOAT32, 4, DIMS(t->m, t->c / t->group, t->k, t->k), d->w);
  kc_set(c, 2, MX_FLOAT32, 1, DIMS(t->m), d->b);
  kc_set(c, 3, MX_FLOAT32, 4, DIMS(t->n, t->m, o, o), d->z);
  kc_set(c, 4, MX_FLOAT32, 4, DIMS(t->n, t->m, o, o), y);
  cr_assert_eq(kc_run("Conv", c), MX_OK, "%s", c->why ? c->why : "");
  free(c);
}

/* The same in double, checked against y. */
static void expect_near_double(const tcase *t, const tdata *d, const float *y) {
  const int64_t o = osize(t), cg = t->c / t->group, mg = t->m / t->group;
  int64_t bad = 0;
  for (int64_t in = 0; in < t->n; in++)
    for (int64_t m = 0; m < t->m; m++)
      for (int64_t i = 0; i < o; i++)
        for (int64_t j = 0; j < o; j++) {
          double acc = 0.0, mag = 0.0;
          for (int64_t ci = 0; ci < cg; ci++)
            for (int64_t a = 0; a < t->k; a++)
              for (int64_t e = 0; e < t->k; e++) {
                int64_t ih = i * t->s - t->pad + a, iw = j * t->s - t->pad + e;
                if (ih < 0 || ih >= t->h || iw < 0 || iw >= t->h) continue;
                double v = (double)d->x[((in * t->c + (m / mg) * cg + ci) * t->h + ih) * t->h + iw] *
                           d->w[((m * cg + ci) * t->k + a) * t->k + e];
                acc += v;
                mag += fabs(v);
              }
          const int64_t at = ((in * t->m + m) * o + i) * o + j;
          double want = acc + d->b[m] + d->z[at];
          if (t->act == MX_CONV_ACT_RELU) want = want > 0.0 ? want : 0.0;
          if (t->act == MX_CONV_ACT_CLIP) want = want < 0.0 ? 0.0 : (want > 0.75 ? 0.75 : want);
          if (!(fabs(y[at] - want) <= 1e-5 * (mag + 1.0)) && bad++ < 5)
            cr_expect(0, "at %lld: %g, want %g", (long long)at, y[at], want);
        }
  cr_expect_eq(bad, 0, "%lld outputs off the double reference", (long long)bad);
}

static const tcase cases[] = {
    {1, 256, 14, 256, 1, 3, 1, 1, MX_CONV_ACT_RELU},  /* ResNet-50 layer3 3x3: one band, chunks */
    {1, 512, 7, 512, 1, 3, 1, 1, MX_CONV_ACT_RELU},   /* layer4 3x3: a narrow product, chunks */
    {1, 256, 28, 256, 1, 3, 2, 1, MX_CONV_ACT_CLIP},  /* stride 2 onto a 14x14 map */
    {1, 1024, 14, 256, 1, 1, 1, 0, MX_CONV_ACT_RELU}, /* 1x1, 196 columns in whole panels */
    {1, 2048, 7, 512, 1, 1, 1, 0, MX_CONV_ACT_RELU},  /* 1x1 on 7x7, k over eight blocks */
    {1, 512, 14, 1024, 1, 1, 2, 0, MX_CONV_ACT_NONE}, /* 1x1 stride 2: through im2col */
    {3, 64, 14, 96, 1, 3, 1, 1, MX_CONV_ACT_RELU},    /* three images: tasks not a multiple of 2 */
    {1, 96, 14, 128, 2, 3, 1, 1, MX_CONV_ACT_RELU},   /* two groups, each band shared by chunks */
    {2, 60, 9, 70, 1, 3, 1, 1, MX_CONV_ACT_CLIP},     /* odd sizes: partial tiles and panels */
};

Test(conv_threads, two_and_three_threads_give_the_bits_of_one) {
  if (!mx__kgemm_f32_available()) cr_skip_test("no AVX-512 or AVX2 copy on this CPU");
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const tcase *t = &cases[i];
    tdata d = make_data(t);
    float *y1 = malloc((size_t)d.ny * 4), *yt = malloc((size_t)d.ny * 4);
    cr_assert(y1 && yt);
    run_kernel(t, &d, 1, y1);
    expect_near_double(t, &d, y1);
    for (int32_t threads = 2; threads <= 3; threads++) {
      run_kernel(t, &d, threads, yt);
      cr_expect(memcmp(y1, yt, (size_t)d.ny * 4) == 0, "case %zu: 1 and %d threads differ", i, threads);
    }
    free(y1);
    free(yt);
    free_data(&d);
  }
}

/* A workspace sized for one thread while the pool has two: no room for the shared bands, so
 * each task packs its own (and the run takes the threads the slots allow): the bits of the
 * same im2col path on one thread (the Conv kernel itself runs this shape through Winograd). */
Test(conv_threads, a_workspace_without_room_for_shared_bands_gives_the_same_bits) {
  if (!mx__kgemm_f32_available()) cr_skip_test("no AVX-512 or AVX2 copy on this CPU");
  const tcase t = {1, 256, 14, 256, 1, 3, 1, 1, MX_CONV_ACT_RELU};
  tdata d = make_data(&t);
  float *y1 = malloc((size_t)d.ny * 4), *y2 = malloc((size_t)d.ny * 4);
  cr_assert(y1 && y2);
  mx_kwin w;
  mx_conv_params p = params_of(&t);
  const int64_t o = osize(&t);
  cr_assert(mx__kwin_forward(&p, 2, DIMS(t.h, t.h), DIMS(o, o), DIMS(t.k, t.k), &w));
  mx__kthreads_set(2);
  const size_t one = mx__kconv_f32_slot_floats(&w, t.n, t.c, t.m, t.group, 1);
  const size_t two = mx__kconv_f32_slot_floats(&w, t.n, t.c, t.m, t.group, 2);
  cr_expect(2 * two > one, "two threads' workspace holds the shared bands");
  float *scratch = aligned_alloc(64, (one * 4 + 63) / 64 * 64);
  cr_assert(scratch);
  mx_kconv_f32 j;
  memset(&j, 0, sizeof j);
  j.w = &w;
  j.n = t.n;
  j.c = t.c;
  j.m = t.m;
  j.group = t.group;
  j.x = d.x;
  j.wt = d.w;
  j.b = d.b;
  j.z = d.z;
  j.act = t.act;
  j.beta = 0.75f;
  mx__kthreads_set(1);
  j.y = y1;
  cr_assert(mx__kconv_f32_run(&j, scratch, one));
  mx__kthreads_set(2);
  j.y = y2;
  cr_assert(mx__kconv_f32_run(&j, scratch, one));
  expect_near_double(&t, &d, y2);
  cr_expect(memcmp(y1, y2, (size_t)d.ny * 4) == 0, "a one-slot workspace on two threads changed the bits");
  free(scratch);
  free(y1);
  free(y2);
  free_data(&d);
}
