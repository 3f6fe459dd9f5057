/* Kernel tests of the intra-op pool's handoff (kernels/threads.c): a run too small to repay a
 * handoff stays on the calling thread, a large one spreads over at most the slots it may use,
 * every task runs exactly once whether the workers are spinning, asleep or joining late, and
 * Convs give bit-identical outputs on 1 and 2 threads. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "graph/ops/conv_params.h"
#include "kernels/kernel.h"
#include "kernels/kernels_support.h"
#include "kernels/threads.h"

TestSuite(threads_small);

typedef struct slot_log {
  int64_t n;
  int32_t max_slots;
  int hits[256];
  int used[MX_KTHREADS_MAX]; /* tasks each slot ran */
  int bad_slot;
} slot_log;

static void log_task(void *vctx, int64_t task, int32_t slot) {
  slot_log *l = vctx;
  __atomic_fetch_add(&l->hits[task], 1, __ATOMIC_RELAXED);
  if (slot < 0 || slot >= l->max_slots) {
    __atomic_store_n(&l->bad_slot, 1, __ATOMIC_RELAXED);
    return;
  }
  __atomic_fetch_add(&l->used[slot], 1, __ATOMIC_RELAXED);
}

/* Some busy work so a task lasts long enough for a worker to join. */
static void slow_task(void *vctx, int64_t task, int32_t slot) {
  volatile double acc = 0.0;
  for (int i = 0; i < 3000; i++) acc = acc + (double)i * 1e-9;
  log_task(vctx, task, slot);
}

static void check_once(const slot_log *l) {
  for (int64_t t = 0; t < l->n; t++) cr_assert_eq(l->hits[t], 1, "task %lld ran %d times", (long long)t, l->hits[t]);
  cr_assert_eq(l->bad_slot, 0, "a slot outside [0, %d) ran a task", l->max_slots);
}

Test(threads_small, small_work_runs_on_the_calling_thread) {
  mx__kthreads_set(2);
  slot_log l;
  memset(&l, 0, sizeof l);
  l.n = 64;
  l.max_slots = 2;
  mx__kparallel_work(l.n, 2, 1000, slow_task, &l);
  mx__kthreads_set(1);
  check_once(&l);
  cr_assert_eq(l.used[0], 64, "a run of 1000 multiply-adds was handed to a worker");
}

Test(threads_small, large_work_may_use_every_slot_it_is_given) {
  mx__kthreads_set(4);
  for (int round = 0; round < 50; round++) {
    slot_log l;
    memset(&l, 0, sizeof l);
    l.n = 200;
    l.max_slots = 3;
    mx__kparallel_work(l.n, 3, (int64_t)1 << 40, slow_task, &l);
    check_once(&l);
    cr_assert_eq(l.used[0] + l.used[1] + l.used[2], 200);
  }
  /* work for two threads only: slot 2 never runs */
  for (int round = 0; round < 50; round++) {
    slot_log l;
    memset(&l, 0, sizeof l);
    l.n = 100;
    l.max_slots = 2;
    mx__kparallel_work(l.n, 4, (int64_t)2 << 20, slow_task, &l);
    check_once(&l);
  }
  mx__kthreads_set(1);
}

static void nap_us(long us) {
  struct timespec ts = {0, us * 1000L};
  nanosleep(&ts, NULL);
}

/* Runs of every size with pauses between some of them, so workers are found spinning, asleep,
 * or waking after the caller already took every task. */
static void *mixed_runs(void *arg) {
  int rounds = *(int *)arg;
  for (int r = 0; r < rounds; r++) {
    slot_log l;
    memset(&l, 0, sizeof l);
    l.n = (r * 7) % 129;
    l.max_slots = 1 + r % 3;
    mx__kparallel(l.n, l.max_slots, r % 5 == 0 ? slow_task : log_task, &l);
    for (int64_t t = 0; t < l.n; t++)
      if (l.hits[t] != 1) return (void *)1;
    if (l.bad_slot) return (void *)1;
    if (r % 97 == 0) nap_us(3000); /* past the spin: the workers sleep */
  }
  return NULL;
}

Test(threads_small, every_task_once_with_sleeping_and_late_workers) {
  mx__kthreads_set(3);
  int rounds = 2000;
  cr_assert_null(mixed_runs(&rounds));
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, mixed_runs, &rounds), 0);
  void *mine = mixed_runs(&rounds);
  void *theirs;
  pthread_join(t, &theirs);
  mx__kthreads_set(1);
  cr_assert_null(mine);
  cr_assert_null(theirs);
}

/* --- Convs on 1 and 2 threads ----------------------------------------------------------------- */

static uint32_t seed = 4242u;
static float rnd(void) {
  seed = seed * 1664525u + 1013904223u;
  return (float)(seed >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
}

typedef struct ccase {
  int64_t n, c, h, w, m, group, k, s, pad;
} ccase;

static void conv_on(const ccase *k, int32_t threads, const float *x, const float *wt, const float *b, float *y,
                    int64_t oh, int64_t ow) {
  mx_conv_params p;
  memset(&p, 0, sizeof p);
  p.op = MX_CONVOP_CONV;
  p.group = k->group;
  p.n_strides = p.n_dilations = 2;
  p.strides[0] = p.strides[1] = k->s;
  p.dilations[0] = p.dilations[1] = 1;
  p.n_pads = 4;
  for (int i = 0; i < 4; i++) p.pads[i] = k->pad;
  p.fused_act = MX_CONV_ACT_HARD_SWISH;
  mx_kernel_call *c = kc_new(3, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 4, DIMS(k->n, k->c, k->h, k->w), (void *)x);
  kc_set(c, 1, MX_FLOAT32, 4, DIMS(k->m, k->c / k->group, k->k, k->k), (void *)wt);
  kc_set(c, 2, MX_FLOAT32, 1, DIMS(k->m), (void *)b);
  kc_set(c, 3, MX_FLOAT32, 4, DIMS(k->n, k->m, oh, ow), y);
  mx__kthreads_set(threads);
  mx_status st = kc_run("Conv", c);
  mx__kthreads_set(1);
  cr_assert_eq(st, MX_OK, "%s", c->why ? c->why : "");
  free(c);
}

Test(threads_small, convs_are_bit_identical_on_one_and_two_threads) {
  static const ccase cases[] = {
      /* n  c    h    w    m    g    k  s  pad */
      {1, 16, 56, 56, 16, 16, 3, 2, 1},   /* MobileNetV3-small's first depthwise */
      {1, 96, 14, 14, 96, 96, 5, 1, 2},   /* a 5x5 depthwise on 14x14 */
      {1, 576, 7, 7, 576, 576, 5, 1, 2},  /* the last depthwise of the small model */
      {2, 8, 5, 5, 8, 8, 3, 1, 1},        /* tiny: inline */
      {1, 48, 14, 14, 144, 1, 1, 1, 0},   /* a small 1x1 on 14x14 */
      {1, 96, 7, 7, 576, 1, 1, 1, 0},     /* a 1x1 on 7x7 */
      {1, 64, 28, 28, 128, 1, 3, 1, 1},   /* dense 3x3, large enough to split */
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const ccase *k = &cases[i];
    int64_t oh = (k->h + 2 * k->pad - k->k) / k->s + 1, ow = (k->w + 2 * k->pad - k->k) / k->s + 1;
    int64_t nx = k->n * k->c * k->h * k->w, nw = k->m * (k->c / k->group) * k->k * k->k, ny = k->n * k->m * oh * ow;
    float *x = malloc((size_t)nx * 4), *wt = malloc((size_t)nw * 4), *b = malloc((size_t)k->m * 4);
    float *y1 = malloc((size_t)ny * 4), *y2 = malloc((size_t)ny * 4);
    for (int64_t j = 0; j < nx; j++) x[j] = rnd();
    for (int64_t j = 0; j < nw; j++) wt[j] = rnd();
    for (int64_t j = 0; j < k->m; j++) b[j] = rnd();
    conv_on(k, 1, x, wt, b, y1, oh, ow);
    for (int rep = 0; rep < 3; rep++) {
      memset(y2, 0xff, (size_t)ny * 4);
      conv_on(k, 2, x, wt, b, y2, oh, ow);
      cr_assert_eq(memcmp(y1, y2, (size_t)ny * 4), 0, "case %zu differs between 1 and 2 threads", i);
    }
    free(x), free(wt), free(b), free(y1), free(y2);
  }
}
