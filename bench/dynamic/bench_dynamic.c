/* bench_dynamic: host overhead per op of the dynamic executor, as JSON.
 *
 * Graph: a chain of N tiny elementwise ops (Add / Mul by a constant / Neg, cycling) over
 * x float32 [n], n a symbol (16 elements at run time), for N = 10, 100, 1000, on the CPU device
 * and the inline device, one stream, input and output in device memory (caller buffers).
 *
 *   run_same_shape     host time of mx__dyn_exec_run per op, every step with the same shape:
 *                      bind + shape check (kept) + allocation + launch + free. On the CPU device
 *                      the kernels run on the worker, so this is host overhead alone; on the
 *                      inline device they run inside the call, and kernel_ns_per_op (the same
 *                      kernels called directly) is subtracted in run_same_shape_net.
 *                      Steps are queued back to back (inputs and outputs stay on the device, so
 *                      nothing waits) and the stream is synchronized once per repetition.
 *   run_new_shape      same, alternating n between 16 and 17: the output dims are evaluated
 *                      from their expressions every step (task blocks stay cached).
 *   run_synced         same shape, the stream synchronized (untimed) after every step: each
 *                      step then starts on an idle worker (the CPU device may have to wake it).
 *   split              the same step driven through the per-op step functions, one phase at a
 *                      time over all ops (every output live at once), per op: bind
 *                      (mx__dyn_step_begin / N), prepare (shapes kept + output allocation),
 *                      prepare_new_shape (shapes evaluated + allocation), launch (task block
 *                      lookup, pointer patching, mx__hal_launch), free (stream-ordered release),
 *                      end (join + output delivery / N).
 *   hal_launch_ns      mx__hal_launch of a no-op function with an argument block of the chain
 *                      ops' size, for comparison: the part of `launch` that is the HAL's.
 *   device_allocs      device allocations during the measured run steps (steady state: 0).
 *   static             the same chain compiled by the static executor at the fixed shape
 *                      n = 16 (static_exec/static_exec.h), in the same run on the same device:
 *                      host time of UpdateArgs + Execute per step, per op, steps queued back to
 *                      back. On the inline device both executors run the same kernels inside
 *                      the call, so dynamic_minus_static is the dynamic path's extra cost per op.
 *
 * Usage: bench_dynamic [--quick]. Every figure is the median of repetitions in the same run. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "dynamic_exec/dynamic_exec.h"
#include "hal/hal.h"
#include "kernels/kernel.h"
#include "static_exec/static_exec.h"

#define ELEMS    16
#define STEP_OPS 10000 /* ops per timed repetition (steps of a chain of N ops: STEP_OPS / N) */

static int g_reps = 21;

static void die(const char *what, const char *msg) {
  fprintf(stderr, "bench_dynamic: %s failed: %s\n", what, msg ? msg : "");
  exit(1);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The chain over x [n] (symbolic when fixed is 0, else of that concrete length). */
static mx_graph *chain(int len, int64_t fixed) {
  mx_graph *g;
  if (mx_graph_create("chain", &g) != MX_OK) die("mx_graph_create", NULL);
  mx_shape s = {.rank = 1, .dims = {fixed ? fixed : mx_sym_named(mx_graph_symtab(g), "n")}};
  mx_value_id x, c, v;
  float half = 0.5f;
  mx_tensor ct = {.dtype = MX_FLOAT32, .rank = 0, .data = &half};
  if (mx_graph_add_input(g, "x", MX_FLOAT32, &s, &x) != MX_OK ||
      mx_graph_add_constant(g, "c", &ct, &c) != MX_OK)
    die("building the chain", mx_graph_last_error(g));
  v = x;
  for (int i = 0; i < len; i++) {
    mx_status st;
    if (i % 3 == 0)
      st = mx_graph_add_op(g, "Add", (mx_value_id[]){v, x}, 2, NULL, 0, &v);
    else if (i % 3 == 1)
      st = mx_graph_add_op(g, "Mul", (mx_value_id[]){v, c}, 2, NULL, 0, &v);
    else
      st = mx_graph_add_op(g, "Neg", &v, 1, NULL, 0, &v);
    if (st != MX_OK) die("building the chain", mx_graph_last_error(g));
  }
  if (mx_graph_add_output(g, v) != MX_OK || mx_graph_infer(g) != MX_OK)
    die("inferring the chain", mx_graph_last_error(g));
  return g;
}

static mx_status k_noop(void *args, size_t size) {
  (void)args;
  (void)size;
  return MX_OK;
}

/* Host cost of one mx__hal_launch of a no-op with an argument block of `size` bytes. */
static double hal_launch_ns(mx_stream *s, size_t size) {
  static unsigned char block[4096];
  double t[64];
  const int burst = 200;
  for (int r = 0; r < g_reps; r++) {
    if (mx_stream_synchronize(s) != MX_OK) die("mx_stream_synchronize", NULL);
    uint64_t t0 = mx__now_ns();
    for (int i = 0; i < burst; i++)
      if (mx__hal_launch(s, k_noop, block, size) != MX_OK) die("mx__hal_launch", NULL);
    t[r] = (double)(mx__now_ns() - t0) / burst;
  }
  if (mx_stream_synchronize(s) != MX_OK) die("mx_stream_synchronize", NULL);
  return median(t, g_reps);
}

/* The chain's kernels called directly on 16-element buffers, per op (inline-device baseline). */
static double kernel_ns_per_op(void) {
  static float a[ELEMS], b[ELEMS], o[ELEMS], c = 0.5f;
  const char *ops[3] = {"Add", "Mul", "Neg"};
  _Alignas(16) unsigned char blocks[3][512];
  const mx_kernel_def *k[3];
  for (int i = 0; i < 3; i++) {
    memset(blocks[i], 0, sizeof blocks[i]);
    mx_kernel_call *call = (mx_kernel_call *)blocks[i];
    call->n_in = i == 2 ? 1 : 2;
    call->n_out = 1;
    int64_t d = ELEMS;
    for (int j = 0; j < call->n_in + 1; j++) {
      call->t[j].dtype = MX_FLOAT32;
      mx__ktensor_set_dims(&call->t[j], (i == 1 && j == 1) ? 0 : 1, &d);
    }
    call->t[0].data = a;
    if (i != 2) call->t[1].data = i == 1 ? (void *)&c : (void *)b;
    call->t[call->n_in].data = o;
    k[i] = mx__kernel_find("", ops[i], call);
    if (!k[i]) die("kernel lookup", ops[i]);
  }
  double t[64];
  const int n = 3000;
  for (int r = 0; r < g_reps; r++) {
    uint64_t t0 = mx__now_ns();
    for (int i = 0; i < n; i++) k[i % 3]->run((mx_kernel_call *)blocks[i % 3]);
    t[r] = (double)(mx__now_ns() - t0) / n;
  }
  return median(t, g_reps);
}

typedef struct bench_rig {
  mx_device *dev;
  mx_graph *g;
  mx_dyn_plan *plan;
  mx_dyn_exec *e;
  mx_stream *s;
  mx_tensor x[2];   /* device inputs, n = 16 and 17 */
  mx_tensor out[2]; /* caller device buffers for them */
} bench_rig;

static void rig_open(bench_rig *r, mx_device_kind kind, int len) {
  memset(r, 0, sizeof *r);
  mx_device_options o;
  mx_device_options_init(&o);
  o.kind = kind;
  o.check = MX_CHECK_OFF;
  o.fault_from_env = false;
  o.ring_slots = 65536; /* a repetition's launches fit the queue: the host never waits for the worker */
  mx_error err;
  if (mx_device_create(&o, &r->dev, &err) != MX_OK) die("mx_device_create", err.message);
  r->g = chain(len, 0);
  if (mx__dyn_plan_create(r->g, NULL, &r->plan, &err) != MX_OK) die("mx__dyn_plan_create", err.message);
  if (mx__dyn_exec_create(r->dev, r->plan, NULL, NULL, 0, &r->e, &err) != MX_OK)
    die("mx__dyn_exec_create", err.message);
  r->s = mx__dyn_exec_stream(r->e, 0);
  for (int k = 0; k < 2; k++) {
    int64_t n = ELEMS + k;
    float host[ELEMS + 1];
    for (int i = 0; i < n; i++) host[i] = (float)i / 7.0f;
    for (int t = 0; t < 2; t++) {
      mx_tensor *m = t ? &r->out[k] : &r->x[k];
      *m = (mx_tensor){.dtype = MX_FLOAT32, .rank = 1, .dims = {n}, .placement = MX_DEVICE};
      if (mx_device_alloc(r->dev, (size_t)n * 4, 0, &m->data) != MX_OK) die("mx_device_alloc", NULL);
    }
    if (mx_device_copy(r->dev, r->x[k].data, host, (size_t)n * 4, MX_COPY_H2D) != MX_OK)
      die("mx_device_copy", NULL);
  }
}

static void rig_close(bench_rig *r) {
  if (mx_stream_synchronize(r->s) != MX_OK) die("mx_stream_synchronize", NULL);
  for (int k = 0; k < 2; k++) {
    mx_device_free(r->dev, r->x[k].data);
    mx_device_free(r->dev, r->out[k].data);
  }
  mx__dyn_exec_destroy(r->e);
  mx__dyn_plan_destroy(r->plan);
  mx_graph_destroy(r->g);
  mx_device_destroy(r->dev);
}

static void run_step(bench_rig *r, int k) {
  if (mx__dyn_exec_run(r->e, &r->x[k], 1, &r->out[k], 1, NULL) != MX_OK)
    die("mx__dyn_exec_run", mx__dyn_exec_last_error(r->e));
}

/* Median host time per op of mx__dyn_exec_run (alternating shapes when `alternate`). With
 * `sync_each`, the stream is synchronized (untimed) after every step, so each step starts on an
 * idle (possibly parked) worker; without, steps are queued back to back and synchronized once
 * per repetition, as a pipelined caller would. */
static double time_runs(bench_rig *r, int len, bool alternate, bool sync_each) {
  double t[64];
  int steps = STEP_OPS / len;
  for (int w = 0; w < 3; w++) run_step(r, alternate ? w & 1 : 0);
  if (mx_stream_synchronize(r->s) != MX_OK) die("mx_stream_synchronize", NULL);
  for (int rep = 0; rep < g_reps; rep++) {
    uint64_t host = 0;
    for (int i = 0; i < steps; i++) {
      uint64_t t0 = mx__now_ns();
      run_step(r, alternate ? i & 1 : 0);
      host += mx__now_ns() - t0;
      if (sync_each)
        if (mx_stream_synchronize(r->s) != MX_OK) die("mx_stream_synchronize", NULL); /* not timed */
    }
    if (mx_stream_synchronize(r->s) != MX_OK) die("mx_stream_synchronize", NULL);
    t[rep] = (double)host / steps / len;
  }
  return median(t, g_reps);
}

/* The static executor on the same chain at n = 16: median host ns per op of UpdateArgs +
 * Execute, steps queued back to back like run_same_shape (kernels subtracted on the inline
 * device by the caller). */
static double time_static(bench_rig *r, int len) {
  mx_graph *g = chain(len, ELEMS);
  mx_static_plan *plan;
  mx_static_model *m;
  mx_error err;
  if (mx__static_compile(g, NULL, &plan, &err) != MX_OK) die("mx__static_compile", err.message);
  if (mx__static_model_create(r->dev, plan, NULL, &m, &err) != MX_OK)
    die("mx__static_model_create", err.message);
  int steps = STEP_OPS / len;
  double t[64];
  for (int w = 0; w < 3; w++) {
    if (mx__static_model_update_args(m, &r->x[0], 1, &r->out[0], 1) != MX_OK ||
        mx__static_model_execute(m, r->s) != MX_OK)
      die("static step", mx__static_model_last_error(m));
  }
  if (mx_stream_synchronize(r->s) != MX_OK) die("mx_stream_synchronize", NULL);
  for (int rep = 0; rep < g_reps; rep++) {
    uint64_t host = 0;
    for (int i = 0; i < steps; i++) {
      uint64_t t0 = mx__now_ns();
      if (mx__static_model_update_args(m, &r->x[0], 1, &r->out[0], 1) != MX_OK ||
          mx__static_model_execute(m, r->s) != MX_OK)
        die("static step", mx__static_model_last_error(m));
      host += mx__now_ns() - t0;
    }
    if (mx_stream_synchronize(r->s) != MX_OK) die("mx_stream_synchronize", NULL);
    t[rep] = (double)host / steps / len;
  }
  mx__static_model_destroy(m);
  mx__static_plan_destroy(plan);
  mx_graph_destroy(g);
  return median(t, g_reps);
}

typedef struct split {
  double bind, prepare, prepare_new, launch, free, end;
} split;

/* One step through the per-op functions, phase by phase; adds each phase's time to *acc. */
static void phased_step(bench_rig *r, int k, double *bind, double *prepare, double *launch, double *fr,
                        double *end) {
  size_t n = mx__dyn_op_count(r->plan);
  uint64_t t0 = mx__now_ns();
  if (mx__dyn_step_begin(r->e, &r->x[k], 1, NULL) != MX_OK) die("step_begin", mx__dyn_exec_last_error(r->e));
  uint64_t t1 = mx__now_ns();
  for (size_t i = 0; i < n; i++)
    if (mx__dyn_op_prepare(r->e, i) != MX_OK) die("prepare", mx__dyn_exec_last_error(r->e));
  uint64_t t2 = mx__now_ns();
  for (size_t i = 0; i < n; i++)
    if (mx__dyn_op_launch(r->e, i) != MX_OK) die("launch", mx__dyn_exec_last_error(r->e));
  uint64_t t3 = mx__now_ns();
  for (size_t i = 0; i < n; i++) mx__dyn_op_free_after(r->e, i);
  uint64_t t4 = mx__now_ns();
  if (mx__dyn_step_end(r->e, &r->out[k], 1) != MX_OK) die("step_end", mx__dyn_exec_last_error(r->e));
  uint64_t t5 = mx__now_ns();
  *bind = (double)(t1 - t0);
  *prepare = (double)(t2 - t1);
  *launch = (double)(t3 - t2);
  *fr = (double)(t4 - t3);
  *end = (double)(t5 - t4);
}

static split time_split(bench_rig *r, int len) {
  double b[64], p[64], pn[64], l[64], f[64], e[64];
  double tb, tp, tl, tf, te;
  for (int w = 0; w < 3; w++) {
    phased_step(r, 0, &tb, &tp, &tl, &tf, &te);
    if (mx_stream_synchronize(r->s) != MX_OK) die("mx_stream_synchronize", NULL);
  }
  for (int rep = 0; rep < g_reps; rep++) {
    phased_step(r, 0, &b[rep], &p[rep], &l[rep], &f[rep], &e[rep]);
    if (mx_stream_synchronize(r->s) != MX_OK) die("mx_stream_synchronize", NULL);
    /* Two steps with a new shape each: prepare evaluates every op's dims. */
    phased_step(r, 1, &tb, &pn[rep], &tl, &tf, &te);
    if (mx_stream_synchronize(r->s) != MX_OK) die("mx_stream_synchronize", NULL);
    phased_step(r, 0, &tb, &tp, &tl, &tf, &te);
    pn[rep] = 0.5 * (pn[rep] + tp);
    if (mx_stream_synchronize(r->s) != MX_OK) die("mx_stream_synchronize", NULL);
  }
  split s = {median(b, g_reps) / len, median(p, g_reps) / len, median(pn, g_reps) / len,
             median(l, g_reps) / len, median(f, g_reps) / len, median(e, g_reps) / len};
  return s;
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0) {
      g_reps = 5;
    } else {
      fprintf(stderr, "usage: bench_dynamic [--quick]\n");
      return 2;
    }
  }
  static const int lens[] = {10, 100, 1000};
  static const struct {
    mx_device_kind kind;
    const char *name;
  } devs[] = {{MX_DEVICE_CPU, "cpu"}, {MX_DEVICE_INLINE, "inline"}};
  double kernel_ns = kernel_ns_per_op();
  printf("{\n  \"benchmark\": \"dynamic\",\n  \"elements\": %d,\n  \"repetitions\": %d,\n", ELEMS, g_reps);
  printf("  \"kernel_ns_per_op\": %.1f,\n  \"results\": [\n", kernel_ns);
  bool first = true;
  for (size_t d = 0; d < sizeof devs / sizeof *devs; d++) {
    for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
      int len = lens[li];
      bench_rig r;
      rig_open(&r, devs[d].kind, len);
      mx_dyn_plan_info info;
      mx__dyn_plan_info_get(r.plan, &info);
      mx_caching_stats a0, a1;
      run_step(&r, 0);
      if (mx_stream_synchronize(r.s) != MX_OK) die("mx_stream_synchronize", NULL);
      mx__caching_stats_get(mx__dyn_exec_allocator(r.e), &a0);
      double same = time_runs(&r, len, false, false);
      double alt = time_runs(&r, len, true, false);
      double synced = time_runs(&r, len, false, true);
      mx__caching_stats_get(mx__dyn_exec_allocator(r.e), &a1);
      split s = time_split(&r, len);
      double stat = time_static(&r, len);
      /* The block size of a two-input op of the chain (the launch argument block). */
      size_t block = (size_t)((16 + mx__kernel_task_size(3) + 15) & ~(size_t)15);
      double hal = hal_launch_ns(r.s, block);
      double net = devs[d].kind == MX_DEVICE_INLINE ? same - kernel_ns : same;
      printf("%s    {\"device\": \"%s\", \"ops\": %d, \"device_ops\": %zu,\n", first ? "" : ",\n",
             devs[d].name, len, info.device_ops);
      printf("     \"run_same_shape_ns_per_op\": %.1f, \"run_same_shape_net_ns_per_op\": %.1f,\n", same, net);
      printf("     \"run_new_shape_ns_per_op\": %.1f, \"run_synced_each_step_ns_per_op\": %.1f,\n", alt,
             synced);
      printf(
          "     \"split_ns_per_op\": {\"bind\": %.1f, \"prepare\": %.1f, \"prepare_new_shape\": %.1f, "
          "\"launch\": %.1f, \"free\": %.1f, \"end\": %.1f},\n",
          s.bind, s.prepare, s.prepare_new, s.launch, s.free, s.end);
      printf("     \"hal_launch_ns\": %.1f, \"launch_block_bytes\": %zu, \"hal_inline_args\": %u,\n", hal,
             block, MX_HAL_INLINE_ARGS);
      printf("     \"static_ns_per_op\": %.1f, \"dynamic_minus_static_ns_per_op\": %.1f,\n", stat,
             same - stat);
      printf("     \"device_allocs_while_measuring\": %" PRIu64 "}", a1.device_allocs - a0.device_allocs);
      first = false;
      rig_close(&r);
    }
  }
  printf("\n  ]\n}\n");
  return 0;
}
