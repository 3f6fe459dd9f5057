/* bench_hal: the HAL's own overheads, on the CPU device and the inline device, as JSON.
 *
 *   launch            host cost of one mx__hal_launch (no-op kernel, 32-byte argument block):
 *                     a burst of 256 into a stream kept busy (the host side alone), and a
 *                     stream of 100000 while the worker consumes (host, and end to end with
 *                     the synchronize); the same for a 480-byte block (two queue slots)
 *   model_task        device-side cost per task inside a HAL model (10000 no-op tasks with one
 *                     slot each), from the model's own device timer, PATCH and INDIRECT modes
 *   model_execute     host cost of mx__hal_model_execute for chains of 1 .. 10000 tasks: queued
 *                     back-to-back after a synchronize (per call), and single calls on an idle
 *                     stream (median, includes one clock read); flatness = 10000-task / 1-task
 *   refresh           k changed ids out of n = 1000 (10000 tasks, 10 slots per id): host cost of
 *                     update_bases + execute, device cost of the patch step, slots patched
 *   event_round_trip  stream A: kernel, record eA; stream B: wait eA, kernel, record eB; A waits
 *                     eB; time per round trip (two cross-stream hand-offs)
 *
 * Usage: bench_hal [--quick] [--pin none|compact|scatter|auto]
 *   --quick: fewer repetitions, for smoke runs; --pin: worker pinning (default auto)
 * Every figure is a median over repetitions measured in the same run. */
#include <inttypes.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "hal/hal.h"

static int g_reps = 21;
static mx_pinning g_pin = MX_PIN_AUTO; /* --pin */

static mx_status k_noop(void *args, size_t size) {
  (void)args;
  (void)size;
  return MX_OK;
}

typedef struct noop_args {
  void *p;        /* a device pointer (a model slot) */
  int64_t pad[3]; /* 32 bytes in all, a typical small kernel block */
} noop_args;

static void die(const char *what, mx_status st, const char *msg) {
  fprintf(stderr, "bench_hal: %s failed: %s (%s)\n", what, mx_status_string(st), msg ? msg : "");
  exit(1);
}

/* Stops the benchmark when a call it times fails: a figure over failed calls would mislead. */
static void must(const char *what, mx_status st) {
  if (st != MX_OK) die(what, st, NULL);
}

#define CHECK(call, dev)                                          \
  do {                                                            \
    mx_status st_ = (call);                                       \
    if (st_ != MX_OK) die(#call, st_, mx_device_last_error(dev)); \
  } while (0)

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static mx_device_kind mx_device_kind_of(mx_device *dev) {
  mx_device_info info;
  mx_device_get_info(dev, &info);
  return info.kind;
}

static mx_device *make_device(mx_device_kind kind) {
  mx_device_options o;
  mx_device_options_init(&o);
  o.kind = kind;
  o.pinning = g_pin;
  o.check = MX_CHECK_OFF;
  o.fault_from_env = false;
  mx_device *dev = NULL;
  mx_error err;
  mx_status st = mx_device_create(&o, &dev, &err);
  if (st != MX_OK) die("mx_device_create", st, err.message);
  return dev;
}

/* --- gate: keeps a stream busy so bursts measure the host side alone -------------------------- */

typedef struct gate_args {
  sem_t *open; /* posted by the host once its burst is queued */
} gate_args;

/* Blocks the stream's worker (in the kernel, using no processor) until the host opens it. */
static mx_status k_gate(void *args, size_t size) {
  (void)size;
  gate_args *g = args;
  while (sem_wait(g->open) != 0) {
  }
  return MX_OK;
}

/* --- launch --------------------------------------------------------------------------------- */

/* Launch cost with an argument block of `size` bytes (32: a small kernel; 480: a kernel call
 * block with three tensors, which takes two queue slots). */
static void bench_launch(mx_device *dev, size_t size, double *burst_ns, double *stream_ns, double *e2e_ns) {
  mx_stream *s;
  CHECK(mx_stream_create(dev, 0, &s), dev);
  enum { N = 100000, B = 256 };
  unsigned char a[512] = {0};
  double b[64], h[64], e[64];
  for (int w = 0; w < 1000; w++) CHECK(mx__hal_launch(s, k_noop, a, size), dev);
  CHECK(mx_stream_synchronize(s), dev);
  bool gated = mx_device_kind_of(dev) == MX_DEVICE_CPU;
  for (int r = 0; r < g_reps; r++) {
    /* burst into a busy stream: the worker does not consume meanwhile */
    sem_t open;
    sem_init(&open, 0, 0);
    gate_args g = {&open};
    if (gated) CHECK(mx__hal_host_callback(s, k_gate, &g, sizeof g), dev);
    uint64_t t0 = mx__now_ns();
    for (int i = 0; i < B; i++) must("mx__hal_launch", mx__hal_launch(s, k_noop, a, size));
    uint64_t t1 = mx__now_ns();
    sem_post(&open);
    CHECK(mx_stream_synchronize(s), dev);
    sem_destroy(&open);
    b[r] = (double)(t1 - t0) / B;
    /* streaming: the worker consumes while the host launches */
    t0 = mx__now_ns();
    for (int i = 0; i < N; i++) must("mx__hal_launch", mx__hal_launch(s, k_noop, a, size));
    t1 = mx__now_ns();
    CHECK(mx_stream_synchronize(s), dev);
    uint64_t t2 = mx__now_ns();
    h[r] = (double)(t1 - t0) / N;
    e[r] = (double)(t2 - t0) / N;
  }
  *burst_ns = median(b, g_reps);
  *stream_ns = median(h, g_reps);
  *e2e_ns = median(e, g_reps);
  mx_stream_destroy(s);
}

/* --- models ----------------------------------------------------------------------------------- */

/* A single-stream chain of n no-op tasks; task i's slot uses id i % n_ids. */
static mx_hal_model *chain(mx_device *dev, uint32_t n, uint32_t n_ids, mx_hal_model_mode mode, void *buf) {
  mx_hal_model_desc d = {.n_streams = 1, .n_events = 0, .n_ids = n_ids, .mode = mode};
  mx_hal_model *m;
  mx_error err;
  mx_status st = mx__hal_model_create(dev, &d, &m, &err);
  if (st != MX_OK) die("mx__hal_model_create", st, err.message);
  noop_args a = {0};
  for (uint32_t i = 0; i < n; i++) {
    mx_hal_slot sl = {0, i % n_ids, (uint64_t)(i % 64) * 8};
    mx_hal_task t = {k_noop, &a, sizeof a, &sl, 1};
    st = mx__hal_model_add_task(m, 0, &t, NULL);
    if (st != MX_OK) die("mx__hal_model_add_task", st, mx__hal_model_last_error(m));
  }
  st = mx__hal_model_build_end(m);
  if (st != MX_OK) die("mx__hal_model_build_end", st, mx__hal_model_last_error(m));
  uint32_t *ids = malloc(n_ids * sizeof *ids);
  void **addrs = malloc(n_ids * sizeof *addrs);
  for (uint32_t i = 0; i < n_ids; i++) {
    ids[i] = i;
    addrs[i] = buf;
  }
  st = mx__hal_model_update_bases(m, ids, addrs, n_ids);
  if (st != MX_OK) die("mx__hal_model_update_bases", st, mx__hal_model_last_error(m));
  free(ids);
  free(addrs);
  return m;
}

static double bench_model_task(mx_device *dev, mx_stream *s, void *buf, mx_hal_model_mode mode) {
  enum { T = 10000 };
  mx_hal_model *m = chain(dev, T, 1, mode, buf);
  double v[64];
  CHECK(mx__hal_model_execute(m, s), dev);
  CHECK(mx_stream_synchronize(s), dev);
  for (int r = 0; r < g_reps; r++) {
    CHECK(mx__hal_model_execute(m, s), dev);
    CHECK(mx_stream_synchronize(s), dev);
    mx_hal_model_stats st;
    mx__hal_model_stats_get(m, &st);
    v[r] = (double)st.last_exec_ns / T;
  }
  mx__hal_model_destroy(m);
  return median(v, g_reps);
}

typedef struct exec_cost {
  uint32_t tasks;
  double busy_ns;   /* per call, calls queued behind a busy stream (host side alone) */
  double queued_ns; /* per call, calls queued back-to-back while the device runs them */
  double idle_ns;   /* one call on an idle stream (includes one clock read) */
} exec_cost;

static void bench_model_execute(mx_device *dev, mx_stream *s, void *buf, exec_cost *out) {
  static const uint32_t sizes[5] = {1, 10, 100, 1000, 10000};
  bool gated = mx_device_kind_of(dev) == MX_DEVICE_CPU;
  for (int k = 0; k < 5; k++) {
    mx_hal_model *m = chain(dev, sizes[k], 1, MX_HAL_MODEL_PATCH, buf);
    CHECK(mx__hal_model_execute(m, s), dev);
    CHECK(mx_stream_synchronize(s), dev);
    enum { B = 64 };
    double busy[64], q[64], idle[64];
    for (int r = 0; r < g_reps; r++) {
      sem_t open;
      sem_init(&open, 0, 0);
      gate_args g = {&open};
      if (gated) CHECK(mx__hal_host_callback(s, k_gate, &g, sizeof g), dev);
      uint64_t t0 = mx__now_ns();
      for (int i = 0; i < B; i++) must("mx__hal_model_execute", mx__hal_model_execute(m, s));
      uint64_t t1 = mx__now_ns();
      sem_post(&open);
      CHECK(mx_stream_synchronize(s), dev);
      sem_destroy(&open);
      busy[r] = (double)(t1 - t0) / B;
      t0 = mx__now_ns();
      for (int i = 0; i < B; i++) must("mx__hal_model_execute", mx__hal_model_execute(m, s));
      t1 = mx__now_ns();
      CHECK(mx_stream_synchronize(s), dev);
      q[r] = (double)(t1 - t0) / B;
      double one[32];
      for (int i = 0; i < 32; i++) {
        uint64_t a = mx__now_ns();
        must("mx__hal_model_execute", mx__hal_model_execute(m, s));
        uint64_t b = mx__now_ns();
        one[i] = (double)(b - a);
        CHECK(mx_stream_synchronize(s), dev);
      }
      idle[r] = median(one, 32);
    }
    out[k].tasks = sizes[k];
    out[k].busy_ns = median(busy, g_reps);
    out[k].queued_ns = median(q, g_reps);
    out[k].idle_ns = median(idle, g_reps);
    mx__hal_model_destroy(m);
  }
}

typedef struct refresh_cost {
  uint32_t changed;
  double host_ns;   /* update_bases + execute */
  double patch_ns;  /* device: first step */
  uint64_t patched; /* slots patched per execution */
  double exec_ns;   /* device: whole execution */
} refresh_cost;

static void bench_refresh(mx_device *dev, mx_stream *s, void *buf0, void *buf1, mx_hal_model_mode mode,
                          refresh_cost *out) {
  enum { T = 10000, IDS = 1000 };
  static const uint32_t ks[5] = {0, 1, 10, 100, 1000};
  mx_hal_model *m = chain(dev, T, IDS, mode, buf0);
  CHECK(mx__hal_model_execute(m, s), dev);
  CHECK(mx_stream_synchronize(s), dev);
  uint32_t *ids = malloc(IDS * sizeof *ids);
  void **addrs = malloc(IDS * sizeof *addrs);
  int flip = 1;
  for (int k = 0; k < 5; k++) {
    double h[64], p[64], e[64];
    uint64_t patched = 0;
    for (int r = 0; r < g_reps; r++) {
      for (uint32_t i = 0; i < ks[k]; i++) {
        ids[i] = (uint32_t)(((uint64_t)i * 7919u) % IDS);
        addrs[i] = flip ? buf1 : buf0;
      }
      /* ids not changed this round keep whatever base they had; only the k changed matter */
      uint64_t t0 = mx__now_ns();
      must("mx__hal_model_update_bases", mx__hal_model_update_bases(m, ids, addrs, ks[k]));
      must("mx__hal_model_execute", mx__hal_model_execute(m, s));
      uint64_t t1 = mx__now_ns();
      CHECK(mx_stream_synchronize(s), dev);
      mx_hal_model_stats st;
      mx__hal_model_stats_get(m, &st);
      h[r] = (double)(t1 - t0);
      p[r] = (double)st.last_patch_ns;
      e[r] = (double)st.last_exec_ns;
      patched = st.last_patched_slots;
      flip = !flip;
    }
    out[k].changed = ks[k];
    out[k].host_ns = median(h, g_reps);
    out[k].patch_ns = median(p, g_reps);
    out[k].exec_ns = median(e, g_reps);
    out[k].patched = patched;
  }
  free(ids);
  free(addrs);
  mx__hal_model_destroy(m);
}

/* --- events ----------------------------------------------------------------------------------- */

static double bench_events(mx_device *dev) {
  mx_stream *a, *b;
  mx_event *ea, *eb;
  CHECK(mx_stream_create(dev, 0, &a), dev);
  CHECK(mx_stream_create(dev, 0, &b), dev);
  CHECK(mx_event_create(dev, &ea), dev);
  CHECK(mx_event_create(dev, &eb), dev);
  enum { N = 20000 };
  double v[64];
  noop_args x = {0};
  for (int r = 0; r < g_reps; r++) {
    uint64_t t0 = mx__now_ns();
    for (int i = 0; i < N; i++) {
      must("mx__hal_launch", mx__hal_launch(a, k_noop, &x, sizeof x));
      must("mx_event_record", mx_event_record(ea, a));
      must("mx_stream_wait_event", mx_stream_wait_event(b, ea));
      must("mx__hal_launch", mx__hal_launch(b, k_noop, &x, sizeof x));
      must("mx_event_record", mx_event_record(eb, b));
      must("mx_stream_wait_event", mx_stream_wait_event(a, eb));
    }
    CHECK(mx_stream_synchronize(a), dev);
    CHECK(mx_stream_synchronize(b), dev);
    v[r] = (double)(mx__now_ns() - t0) / N;
  }
  mx_event_destroy(ea);
  mx_event_destroy(eb);
  mx_stream_destroy(a);
  mx_stream_destroy(b);
  return median(v, g_reps);
}

/* --- report ----------------------------------------------------------------------------------- */

static void run_device(mx_device_kind kind, const char *name, bool last) {
  mx_device *dev = make_device(kind);
  mx_device_info info;
  mx_device_get_info(dev, &info);
  double launch_burst, launch_stream, launch_e2e, big_burst, big_stream, big_e2e;
  bench_launch(dev, sizeof(noop_args), &launch_burst, &launch_stream, &launch_e2e);
  bench_launch(dev, 480, &big_burst, &big_stream, &big_e2e);

  mx_stream *s;
  CHECK(mx_stream_create(dev, 0, &s), dev);
  void *buf0, *buf1;
  CHECK(mx_device_alloc(dev, 4096, 0, &buf0), dev);
  CHECK(mx_device_alloc(dev, 4096, 0, &buf1), dev);
  double task_patch = bench_model_task(dev, s, buf0, MX_HAL_MODEL_PATCH);
  double task_indirect = bench_model_task(dev, s, buf0, MX_HAL_MODEL_INDIRECT);
  exec_cost ex[5];
  bench_model_execute(dev, s, buf0, ex);
  refresh_cost rp[5], ri[5];
  bench_refresh(dev, s, buf0, buf1, MX_HAL_MODEL_PATCH, rp);
  bench_refresh(dev, s, buf0, buf1, MX_HAL_MODEL_INDIRECT, ri);
  double ev = bench_events(dev);
  mx_device_get_info(dev, &info);

  printf("    \"%s\": {\n", name);
  printf("      \"pinning\": \"%s\",\n", info.pinning == MX_PIN_NONE      ? "none"
                                         : info.pinning == MX_PIN_COMPACT ? "compact"
                                                                          : "scatter");
  printf(
      "      \"launch_host_ns\": {\"burst\": %.1f, \"streaming\": %.1f, "
      "\"streaming_end_to_end\": %.1f},\n",
      launch_burst, launch_stream, launch_e2e);
  printf(
      "      \"launch_480B_host_ns\": {\"burst\": %.1f, \"streaming\": %.1f, "
      "\"streaming_end_to_end\": %.1f},\n",
      big_burst, big_stream, big_e2e);
  printf("      \"model_task_device_ns\": {\"patch\": %.2f, \"indirect\": %.2f},\n", task_patch,
         task_indirect);
  printf("      \"model_execute_host_ns\": [\n");
  for (int k = 0; k < 5; k++)
    printf(
        "        {\"tasks\": %u, \"busy_stream\": %.1f, \"queued\": %.1f, "
        "\"idle_stream\": %.1f}%s\n",
        ex[k].tasks, ex[k].busy_ns, ex[k].queued_ns, ex[k].idle_ns, k < 4 ? "," : "");
  printf("      ],\n");
  printf(
      "      \"model_execute_flatness\": {\"busy_stream\": %.2f, \"queued\": %.2f, "
      "\"idle_stream\": %.2f},\n",
      ex[4].busy_ns / ex[0].busy_ns, ex[4].queued_ns / ex[0].queued_ns, ex[4].idle_ns / ex[0].idle_ns);
  const char *mode_names[2] = {"patch", "indirect"};
  refresh_cost *modes[2] = {rp, ri};
  printf("      \"refresh\": {\"tasks\": 10000, \"ids\": 1000, \"slots_per_id\": 10,\n");
  for (int md = 0; md < 2; md++) {
    printf("        \"%s\": [\n", mode_names[md]);
    for (int k = 0; k < 5; k++)
      printf(
          "          {\"changed\": %u, \"host_ns\": %.0f, \"patch_device_ns\": %.0f, "
          "\"patched_slots\": %" PRIu64 ", \"exec_device_ns\": %.0f}%s\n",
          modes[md][k].changed, modes[md][k].host_ns, modes[md][k].patch_ns, modes[md][k].patched,
          modes[md][k].exec_ns, k < 4 ? "," : "");
    printf("        ]%s\n", md == 0 ? "," : "");
  }
  printf("      },\n");
  printf("      \"event_round_trip_ns\": %.1f\n", ev);
  printf("    }%s\n", last ? "" : ",");

  CHECK(mx_device_free(dev, buf0), dev);
  CHECK(mx_device_free(dev, buf1), dev);
  mx_stream_destroy(s);
  mx_device_destroy(dev);
}

/* ns per iteration of a dependent multiply-add loop: how fast this thread runs right now (the
 * machine may be shared; compare runs with similar values). */
static double calibrate(void) {
  double v[5];
  for (int r = 0; r < 5; r++) {
    volatile uint64_t x = 1;
    uint64_t t0 = mx__now_ns();
    for (int i = 0; i < 2000000; i++) x = x * 3 + 1;
    v[r] = (double)(mx__now_ns() - t0) / 2000000;
  }
  return median(v, 5);
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0) {
      g_reps = 3;
    } else if (strcmp(argv[i], "--pin") == 0 && i + 1 < argc) {
      const char *p = argv[++i];
      if (strcmp(p, "none") == 0)
        g_pin = MX_PIN_NONE;
      else if (strcmp(p, "compact") == 0)
        g_pin = MX_PIN_COMPACT;
      else if (strcmp(p, "scatter") == 0)
        g_pin = MX_PIN_SCATTER;
      else if (strcmp(p, "auto") == 0)
        g_pin = MX_PIN_AUTO;
      else {
        fprintf(stderr, "bench_hal: --pin takes none, compact, scatter or auto\n");
        return 2;
      }
    } else {
      fprintf(stderr, "usage: bench_hal [--quick] [--pin none|compact|scatter|auto]\n");
      return 2;
    }
  }
  mx_device *probe = make_device(MX_DEVICE_CPU);
  mx_device_info info;
  mx_device_get_info(probe, &info);
  mx_device_destroy(probe);
  printf("{\n");
  printf("  \"benchmark\": \"hal\",\n");
  printf("  \"processing_units\": %u,\n", info.processing_units);
  printf("  \"repetitions\": %d,\n", g_reps);
  double load[3] = {-1, -1, -1};
  FILE *f = fopen("/proc/loadavg", "r");
  if (f) {
    if (fscanf(f, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3) load[0] = -1;
    fclose(f);
  }
  printf("  \"loadavg_1min_at_start\": %.2f,\n", load[0]);
  printf("  \"host_loop_ns_at_start\": %.3f,\n", calibrate());
  printf(
      "  \"targets\": {\"launch_host_ns\": 150, \"model_task_device_ns\": 30, "
      "\"model_execute_flatness\": 2.0},\n");
  printf("  \"devices\": {\n");
  run_device(MX_DEVICE_CPU, "cpu", false);
  run_device(MX_DEVICE_INLINE, "inline", true);
  printf("  }\n}\n");
  return 0;
}
