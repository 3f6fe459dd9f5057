/* bench_static: the static executor's memory plan and per-step overhead, as JSON.
 *
 *   memory          FM arena against its lower bound (largest total of simultaneously live
 *                   bytes) and against the no-reuse total, for transformer blocks (attention
 *                   with fixed lengths + MLP, tests/static_exec/block.h), the exported-style
 *                   encoder with its symbols bound, and random graphs; 1, 2 and 4 streams
 *   overhead        chains of 10, 100 and 1000 tiny ops (Neg/Relu on 16 floats) on the CPU and
 *                   inline devices: host time of UpdateArgs + Execute per step with unchanged
 *                   addresses ("steady") and with the output moving every step ("moving": one
 *                   entry refreshed), the end-to-end step time, the device time per task (the
 *                   HAL model's own timer; on the inline device the step runs inside execute,
 *                   so "overhead" is host time minus that device time), and the same ops
 *                   launched one by one with
 *                   mx__hal_launch of kernel task blocks in the same run
 *
 * Usage: bench_static [--quick]. Every figure is a median over the measured steps. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "kernels/kernel.h"
#include "mixrt/models.h"
#include "static_exec/static_exec.h"
#include "tests/static_exec/block.h"
#include "tests/static_exec/random_graph.h"

static int g_steps = 400; /* measured steps per configuration */

static void die(const char *what, const char *msg) {
  fprintf(stderr, "bench_static: %s failed: %s\n", what, msg ? msg : "");
  exit(1);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n ? v[n / 2] : 0;
}

/* --- memory ----------------------------------------------------------------------------------- */

static bool g_first_row = true;

static void memory_row(const char *name, mx_graph *g, uint32_t streams) {
  mx_static_options o;
  mx__static_options_init(&o);
  o.max_streams = streams;
  mx_static_plan *p;
  mx_error err;
  uint64_t t0 = mx__now_ns();
  if (mx__static_compile(g, &o, &p, &err) != MX_OK) die("compile", err.message);
  double ms = (double)(mx__now_ns() - t0) / 1e6;
  mx_static_report r;
  mx__static_plan_report(p, &r);
  printf(
      "%s    {\"graph\": \"%s\", \"max_streams\": %u, \"streams\": %u, \"tasks\": %u, \"events\": "
      "%u, "
      "\"fm_bytes\": %" PRIu64 ", \"lower_bound\": %" PRIu64 ", \"no_reuse\": %" PRIu64
      ", \"arena_over_bound\": %.4f, \"saving_vs_no_reuse\": %.4f, \"in_place\": %u, \"aliases\": "
      "%u, "
      "\"placement\": \"%s\", \"compile_ms\": %.3f}",
      g_first_row ? "" : ",\n", name, streams, r.streams, r.tasks, r.events, r.fm_bytes, r.lower_bound,
      r.no_reuse, r.lower_bound ? (double)r.fm_bytes / (double)r.lower_bound : 1.0,
      r.no_reuse ? 1.0 - (double)r.fm_bytes / (double)r.no_reuse : 0.0, r.in_place, r.aliases, r.placement,
      ms);
  g_first_row = false;
  mx__static_plan_destroy(p);
}

static void memory_section(bool quick) {
  printf("  \"memory\": [\n");
  static const struct {
    const char *name;
    mxt_block_config cfg;
  } blocks[] = {
      {"block_b2_s32_d64_f256", {2, 32, 64, 4, 256, 1, 7}},
      {"block_b1_s128_d256_f1024_x2", {1, 128, 256, 4, 1024, 2, 7}},
      {"block_b4_s64_d128_f512_x4", {4, 64, 128, 8, 512, 4, 7}},
  };
  for (size_t b = 0; b < sizeof blocks / sizeof blocks[0]; b++) {
    mx_graph *g;
    if (mxt_block_build(&blocks[b].cfg, &g) != MX_OK) die("block", "build");
    for (uint32_t s = 1; s <= 4; s *= 2) memory_row(blocks[b].name, g, s);
    mx_graph_destroy(g);
  }
  mx_encoder_config ec;
  mx_encoder_config_default(&ec);
  ec.layers = 2;
  mx_graph *g;
  mx_error err;
  if (mx_model_encoder(&ec, &g, &err) != MX_OK) die("encoder", err.message);
  if (mx_graph_bind_symbol(g, "batch", 2) != MX_OK || mx_graph_bind_symbol(g, "seq", 32) != MX_OK ||
      mx_graph_optimize(g, NULL) != MX_OK)
    die("encoder", mx_graph_last_error(g));
  for (uint32_t s = 1; s <= 4; s *= 2) memory_row("encoder_b2_s32_x2", g, s);
  mx_graph_destroy(g);
  printf("\n  ],\n");

  /* Random graphs: distribution of arena / bound and of the saving. */
  int n_graphs = quick ? 10 : 50;
  printf("  \"random_graphs\": [\n");
  for (uint32_t s = 1; s <= 4; s *= 4) {
    double *ratio = malloc((size_t)n_graphs * sizeof *ratio),
           *saving = malloc((size_t)n_graphs * sizeof *saving);
    int at_bound = 0, within = 0;
    double worst = 0;
    for (int k = 0; k < n_graphs; k++) {
      mx_graph *rg;
      if (mxt_random_graph((uint64_t)k + 1000, 20 + (k * 37) % 180, k % 4 == 0, &rg) != MX_OK)
        die("random", "graph");
      mx_static_options o;
      mx__static_options_init(&o);
      o.max_streams = s;
      mx_static_plan *p;
      if (mx__static_compile(rg, &o, &p, &err) != MX_OK) die("compile", err.message);
      mx_static_report r;
      mx__static_plan_report(p, &r);
      ratio[k] = r.lower_bound ? (double)r.fm_bytes / (double)r.lower_bound : 1.0;
      saving[k] = r.no_reuse ? 1.0 - (double)r.fm_bytes / (double)r.no_reuse : 0.0;
      at_bound += r.fm_bytes == r.lower_bound;
      within += ratio[k] <= 1.05;
      if (ratio[k] > worst) worst = ratio[k];
      mx__static_plan_destroy(p);
      mx_graph_destroy(rg);
    }
    printf(
        "    {\"max_streams\": %u, \"graphs\": %d, \"arena_over_bound_median\": %.4f, "
        "\"arena_over_bound_max\": %.4f, \"at_bound\": %d, \"within_1_05\": %d, "
        "\"saving_vs_no_reuse_median\": %.4f}%s\n",
        s, n_graphs, median(ratio, n_graphs), worst, at_bound, within, median(saving, n_graphs),
        s == 1 ? "," : "");
    free(ratio);
    free(saving);
  }
  printf("  ],\n");
}

/* --- overhead --------------------------------------------------------------------------------- */

#define VEC 16

static mx_graph *chain(int n) {
  mx_graph *g;
  if (mx_graph_create("chain", &g) != MX_OK) die("chain", "create");
  mx_shape s = {1, {VEC}};
  mx_value_id v;
  if (mx_graph_add_input(g, "x", MX_FLOAT32, &s, &v) != MX_OK) die("chain", mx_graph_last_error(g));
  for (int k = 0; k < n; k++)
    if (mx_graph_add_op(g, k % 2 ? "Relu" : "Neg", &v, 1, NULL, 0, &v) != MX_OK)
      die("chain", mx_graph_last_error(g));
  if (mx_graph_add_output(g, v) != MX_OK || mx_graph_infer(g) != MX_OK) die("chain", mx_graph_last_error(g));
  return g;
}

static mx_device *device(mx_device_kind kind) {
  mx_device_options o;
  mx_device_options_init(&o);
  o.kind = kind;
  o.check = MX_CHECK_OFF;
  o.fault_from_env = false;
  mx_device *dev;
  mx_error err;
  if (mx_device_create(&o, &dev, &err) != MX_OK) die("device", err.message);
  return dev;
}

typedef struct figures {
  double host_steady, host_moving, wall_steady, device_per_task;
  double host_overhead;   /* host time not spent running tasks (inline: host - device time) */
  double moving_overhead; /* same with the output moving every step */
  double launch_host, launch_wall;
  size_t block_bytes;
} figures;

static void measure_static(mx_device *dev, mx_stream *s, int n, bool inline_dev, figures *f) {
  mx_graph *g = chain(n);
  mx_static_plan *p;
  mx_static_model *m;
  mx_error err;
  if (mx__static_compile(g, NULL, &p, &err) != MX_OK) die("compile", err.message);
  if (mx__static_model_create(dev, p, NULL, &m, &err) != MX_OK) die("create", err.message);
  void *in, *out[2];
  if (mx_device_alloc(dev, VEC * 4, 64, &in) != MX_OK ||
      mx_device_alloc(dev, VEC * 4, 64, &out[0]) != MX_OK ||
      mx_device_alloc(dev, VEC * 4, 64, &out[1]) != MX_OK || mx_device_memset(dev, in, 0, VEC * 4) != MX_OK)
    die("alloc", mx_device_last_error(dev));
  mx_tensor ti = {.dtype = MX_FLOAT32, .rank = 1, .dims = {VEC}, .data = in, .placement = MX_DEVICE};
  mx_tensor to = ti;
  double *host = malloc((size_t)g_steps * sizeof *host), *host2 = malloc((size_t)g_steps * sizeof *host2);
  double *wall = malloc((size_t)g_steps * sizeof *wall), *dev_t = malloc((size_t)g_steps * sizeof *dev_t);
  double *over = malloc((size_t)g_steps * sizeof *over), *over2 = malloc((size_t)g_steps * sizeof *over2);
  for (int phase = 0; phase < 2; phase++) {
    for (int k = -50; k < g_steps; k++) {
      to.data = phase == 1 ? out[(k + 100) % 2] : out[0];
      uint64_t t0 = mx__now_ns();
      if (mx__static_model_update_args(m, &ti, 1, &to, 1) != MX_OK || mx__static_model_execute(m, s) != MX_OK)
        die("step", mx__static_model_last_error(m));
      uint64_t t1 = mx__now_ns();
      if (mx_stream_synchronize(s) != MX_OK) die("synchronize", "");
      uint64_t t2 = mx__now_ns();
      if (k < 0) continue;
      if (phase == 0) {
        host[k] = (double)(t1 - t0);
        wall[k] = (double)(t2 - t0);
        mx_static_model_stats st;
        mx__static_model_stats_get(m, &st);
        dev_t[k] = (double)st.hal.last_exec_ns / n;
        over[k] = inline_dev ? host[k] - (double)st.hal.last_exec_ns : host[k];
      } else {
        host2[k] = (double)(t1 - t0);
        mx_static_model_stats st;
        mx__static_model_stats_get(m, &st);
        over2[k] = inline_dev ? host2[k] - (double)st.hal.last_exec_ns : host2[k];
      }
    }
  }
  f->host_steady = median(host, g_steps);
  f->host_moving = median(host2, g_steps);
  f->wall_steady = median(wall, g_steps);
  f->device_per_task = median(dev_t, g_steps);
  f->host_overhead = median(over, g_steps);
  f->moving_overhead = median(over2, g_steps);
  free(over);
  free(over2);
  free(host);
  free(host2);
  free(wall);
  free(dev_t);
  mx_device_free(dev, in);
  mx_device_free(dev, out[0]);
  mx_device_free(dev, out[1]);
  mx__static_model_destroy(m);
  mx__static_plan_destroy(p);
  mx_graph_destroy(g);
}

/* The same chain launched op by op: one kernel task block per op, buffers ping-ponging. */
static void measure_launches(mx_device *dev, mx_stream *s, int n, figures *f) {
  size_t size = mx__kernel_task_size(2);
  unsigned char *blocks = calloc((size_t)n, size);
  void *buf[2];
  if (!blocks || mx_device_alloc(dev, VEC * 4, 64, &buf[0]) != MX_OK ||
      mx_device_alloc(dev, VEC * 4, 64, &buf[1]) != MX_OK ||
      mx_device_memset(dev, buf[0], 0, VEC * 4) != MX_OK)
    die("alloc", mx_device_last_error(dev));
  const int64_t dims[1] = {VEC};
  for (int k = 0; k < n; k++) {
    void *blk = blocks + (size_t)k * size;
    mx_kernel_task *kt = blk;
    mx_kernel_call *call = mx__kernel_task_call(blk);
    call->n_in = 1;
    call->n_out = 1;
    for (int i = 0; i < 2; i++) {
      call->t[i].dtype = MX_FLOAT32;
      mx__ktensor_set_dims(&call->t[i], 1, dims);
    }
    call->t[0].data = buf[k % 2];
    call->t[1].data = buf[(k + 1) % 2];
    const mx_kernel_def *kd = mx__kernel_find("", k % 2 ? "Relu" : "Neg", call);
    if (!kd) die("kernel lookup", k % 2 ? "Relu" : "Neg");
    kt->run = kd->run;
  }
  double *host = malloc((size_t)g_steps * sizeof *host), *wall = malloc((size_t)g_steps * sizeof *wall);
  for (int k = -20; k < g_steps; k++) {
    uint64_t t0 = mx__now_ns();
    for (int i = 0; i < n; i++)
      if (mx__hal_launch(s, mx__kernel_task_run, blocks + (size_t)i * size, size) != MX_OK)
        die("launch", mx_device_last_error(dev));
    uint64_t t1 = mx__now_ns();
    if (mx_stream_synchronize(s) != MX_OK) die("synchronize", "");
    uint64_t t2 = mx__now_ns();
    if (k < 0) continue;
    host[k] = (double)(t1 - t0);
    wall[k] = (double)(t2 - t0);
  }
  f->launch_host = median(host, g_steps);
  f->launch_wall = median(wall, g_steps);
  f->block_bytes = size;
  free(host);
  free(wall);
  free(blocks);
  mx_device_free(dev, buf[0]);
  mx_device_free(dev, buf[1]);
}

static void overhead_device(mx_device_kind kind, const char *name, bool last) {
  mx_device *dev = device(kind);
  mx_stream *s;
  if (mx_stream_create(dev, 0, &s) != MX_OK) die("stream", mx_device_last_error(dev));
  static const int sizes[] = {10, 100, 1000};
  figures f[3];
  printf("    \"%s\": [\n", name);
  for (int i = 0; i < 3; i++) {
    measure_static(dev, s, sizes[i], kind == MX_DEVICE_INLINE, &f[i]);
    measure_launches(dev, s, sizes[i], &f[i]);
    printf(
        "      {\"ops\": %d, \"static_host_ns_steady\": %.0f, \"static_host_ns_moving\": %.0f, "
        "\"static_host_overhead_ns\": %.0f, \"static_host_overhead_ns_moving\": %.0f, "
        "\"static_step_wall_ns\": %.0f, \"static_device_ns_per_task\": %.1f, "
        "\"launch_host_ns\": %.0f, \"launch_host_ns_per_op\": %.1f, \"launch_step_wall_ns\": %.0f, "
        "\"launch_block_bytes\": %zu, \"wall_speedup\": %.2f}%s\n",
        sizes[i], f[i].host_steady, f[i].host_moving, f[i].host_overhead, f[i].moving_overhead,
        f[i].wall_steady, f[i].device_per_task, f[i].launch_host, f[i].launch_host / sizes[i],
        f[i].launch_wall, f[i].block_bytes, f[i].launch_wall / f[i].wall_steady, i == 2 ? "," : ",");
  }
  printf("      {\"static_host_overhead_flatness_1000_over_10\": %.2f}\n",
         f[2].host_overhead / f[0].host_overhead);
  printf("    ]%s\n", last ? "" : ",");
  mx_stream_destroy(s);
  mx_device_destroy(dev);
}

int main(int argc, char **argv) {
  bool quick = false;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0) {
      quick = true;
      g_steps = 60;
    } else {
      fprintf(stderr, "usage: bench_static [--quick]\n");
      return 2;
    }
  }
  double load[3] = {-1, -1, -1};
  FILE *fl = fopen("/proc/loadavg", "r");
  if (fl) {
    if (fscanf(fl, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3) load[0] = -1;
    fclose(fl);
  }
  printf("{\n  \"benchmark\": \"static\",\n  \"steps\": %d,\n  \"loadavg_1min_at_start\": %.2f,\n", g_steps,
         load[0]);
  printf(
      "  \"targets\": {\"arena_over_bound\": 1.05, \"transformer_saving_vs_no_reuse\": 0.40, "
      "\"static_host_flatness\": \"flat in op count\"},\n");
  memory_section(quick);
  printf("  \"overhead\": {\n");
  overhead_device(MX_DEVICE_CPU, "cpu", false);
  overhead_device(MX_DEVICE_INLINE, "inline", true);
  printf("  }\n}\n");
  return 0;
}
