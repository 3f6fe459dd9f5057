/* `mixrt bench scheduler`: the cost of scheduling itself. Builds an execution graph of empty
 * kernels (Noop) in one of four shapes and reports, for each executor, the nanoseconds per
 * kernel of a whole run (median of several runs), as JSON. */
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "tools/bench.h"
#include "v2runtime/exe_graph.h"
#include "v2runtime/exe_registry.h"

typedef enum shape_kind { SHAPE_CHAIN, SHAPE_WIDE, SHAPE_LAYERED, SHAPE_RANDOM } shape_kind;

static const char *const shape_names[] = {"chain", "wide", "layered", "random"};
static const char *const executor_names[] = {"sequential", "topological", "multi-thread"};

/* Node i writes value i + 1; its inputs are values of earlier nodes chosen by the shape. */
static mx_status build(shape_kind kind, uint32_t n, mx_exe_graph *g, mx_error *err) {
  mx_exe_builder *b;
  mx_status st = mx__exe_builder_create(&b);
  if (st != MX_OK) return st;
  uint16_t noop = (uint16_t)mx__exe_kernel_find("Noop");
  uint64_t rng = 12345;
  const uint32_t width = 16;
  for (uint32_t i = 0; i < n && st == MX_OK; i++) {
    uint32_t in[4], n_in = 0, out = i + 1;
    switch (kind) {
      case SHAPE_CHAIN:
        if (i) in[n_in++] = i;
        break;
      case SHAPE_WIDE: /* one source fanning out to everyone, joined by nothing */
        if (i) in[n_in++] = 1;
        break;
      case SHAPE_LAYERED: /* layers of `width` nodes, each reading two nodes of the layer before */
        if (i >= width) {
          uint32_t base = (i / width - 1) * width;
          in[n_in++] = base + (i % width) + 1;
          in[n_in++] = base + ((i + 1) % width) + 1;
        }
        break;
      case SHAPE_RANDOM:
        for (int k = 0; k < 3 && i; k++) {
          rng = rng * 6364136223846793005ull + 1442695040888963407ull;
          in[n_in++] = 1 + (uint32_t)((rng >> 33) % i);
        }
        break;
    }
    st = mx__exe_builder_add(b, noop, in, (uint16_t)n_in, &out, 1, NULL, 0, 0, NULL);
  }
  if (st == MX_OK) st = mx__exe_builder_finish(b, g, err);
  mx__exe_builder_destroy(b);
  return st;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

int mx_bench_scheduler(int argc, char **argv) {
  bool shapes[4] = {true, true, true, true}, executors[3] = {true, true, true};
  int64_t n = 10000, reps = 21, threads = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--graph") == 0 || strcmp(a, "--executor") == 0) {
      const char *v = mx_cli_option_value("bench scheduler", argc, argv, &i);
      if (!v) return MX_EXIT_USAGE;
      bool is_graph = a[2] == 'g';
      const char *const *names = is_graph ? shape_names : executor_names;
      size_t count = is_graph ? 4 : 3, k = 0;
      bool *sel = is_graph ? shapes : executors;
      if (strcmp(v, "mt") == 0) v = "multi-thread";
      if (strcmp(v, "seq") == 0) v = "sequential";
      if (strcmp(v, "topo") == 0) v = "topological";
      while (k < count && strcmp(names[k], v) != 0) k++;
      if (k == count) return mx_cli_usage_error("bench scheduler", "unknown %s '%s'", a + 2, v);
      for (size_t j = 0; j < count; j++) sel[j] = j == k;
    } else if (strcmp(a, "--nodes") == 0 || strcmp(a, "--repeat") == 0 || strcmp(a, "--threads") == 0) {
      const char *v = mx_cli_option_value("bench scheduler", argc, argv, &i);
      int64_t x;
      if (!v) return MX_EXIT_USAGE;
      if (!mx_cli_parse_int(v, &x) || x < (a[2] == 't' ? 0 : 1) || x > 10000000)
        return mx_cli_usage_error("bench scheduler", "%s needs a positive number, not '%s'", a, v);
      if (a[2] == 'n')
        n = x;
      else if (a[2] == 'r')
        reps = x;
      else
        threads = x;
    } else {
      return mx_cli_usage_error("bench scheduler", "unknown option '%s'", a);
    }
  }
  mx_error err;
  mx_exe_pool *pool = NULL;
  if (executors[2] && mx__exe_pool_create((uint32_t)threads, &pool, &err) != MX_OK)
    return mx_cli_runtime_error("bench scheduler", "%s", err.message);
  mx_exe_value *values = calloc((size_t)n + 2, sizeof *values);
  uint64_t *times = calloc((size_t)reps, sizeof *times);
  mx_exe_topo_scratch scratch = {0};
  int rc = MX_EXIT_OK;
  if (!values || !times) {
    rc = mx_cli_runtime_error("bench scheduler", "out of memory");
    goto done;
  }
  printf("{\"benchmark\": \"scheduler\", \"nodes\": %lld, \"repeat\": %lld, \"threads\": %u, \"results\": [",
         (long long)n, (long long)reps, pool ? mx__exe_pool_threads(pool) : 1);
  bool first = true;
  for (int s = 0; s < 4; s++) {
    if (!shapes[s]) continue;
    mx_exe_graph g;
    if (build((shape_kind)s, (uint32_t)n, &g, &err) != MX_OK) {
      rc = mx_cli_runtime_error("bench scheduler", "%s", err.message);
      goto done;
    }
    for (int e = 0; e < 3; e++) {
      if (!executors[e]) continue;
      mx_exe_run run = {.values = values, .err = &err, .failed_node = UINT32_MAX};
      for (int64_t r = 0; r < reps; r++) {
        uint64_t t0 = mx__now_ns();
        mx_status st = e == 0   ? mx__exe_run_sequential(&g, &run)
                       : e == 1 ? mx__exe_run_topological(&g, &run, &scratch)
                                : mx__exe_run_parallel(pool, &g, &run);
        times[r] = mx__now_ns() - t0;
        if (st != MX_OK) {
          mx__exe_graph_release(&g);
          rc = mx_cli_runtime_error("bench scheduler", "run failed: %s", mx_status_string(st));
          goto done;
        }
      }
      qsort(times, (size_t)reps, sizeof *times, cmp_u64);
      printf(
          "%s\n  {\"graph\": \"%s\", \"executor\": \"%s\", \"ns_per_kernel\": %.2f, \"run_us_median\": %.2f, "
          "\"run_us_min\": %.2f}",
          first ? "" : ",", shape_names[s], executor_names[e], (double)times[reps / 2] / (double)n,
          times[reps / 2] / 1e3, times[0] / 1e3);
      first = false;
    }
    mx__exe_graph_release(&g);
  }
  printf("\n]}\n");
done:
  mx__exe_topo_scratch_release(&scratch);
  free(times);
  free(values);
  mx__exe_pool_destroy(pool);
  return rc;
}
