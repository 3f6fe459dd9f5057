/* `mixrt bench models --layers`: the GFLOP/s every Conv of a model reaches in mixrt, each layer
 * timed alone (a one-node graph with the layer's weights and attributes, batch 1, run through a
 * session with the asked intra-op threads), against the machine's sgemm peak measured by a short
 * cblas_sgemm 1024x1024x1024 probe on the same threads: how far each layer is from the limit. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "graph/ir.h"
#include "kernels/threads.h"
#include "mixrt/onnx.h"
#include "mixrt/session.h"
#include "tools/bench.h"
#include "tools/cli.h"
#include "tools/cmd_bench_models.h"

#define PROBE_N 1024

typedef struct probe {
  float *a[MX_KTHREADS_MAX], *b[MX_KTHREADS_MAX], *c[MX_KTHREADS_MAX];
} probe;

static void probe_task(void *ctx, int64_t task, int32_t slot) {
  probe *p = ctx;
  (void)slot;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, PROBE_N, PROBE_N, PROBE_N, 1.0f, p->a[task], PROBE_N,
              p->b[task], PROBE_N, 0.0f, p->c[task], PROBE_N);
}

/* GFLOP/s of `threads` single-threaded sgemms of 1024^3 run at once on the kernels' pool (the
 * way Conv runs them): the best of `reps` (on a shared host the best run is the one least
 * disturbed). 0 when out of memory. */
static double sgemm_peak(int32_t threads, int reps) {
  probe p;
  memset(&p, 0, sizeof p);
  double best = 0.0;
  size_t n = (size_t)PROBE_N * PROBE_N;
  bool ok = true;
  for (int32_t t = 0; t < threads && ok; t++) {
    p.a[t] = malloc(n * sizeof(float));
    p.b[t] = malloc(n * sizeof(float));
    p.c[t] = malloc(n * sizeof(float));
    ok = p.a[t] && p.b[t] && p.c[t];
    for (size_t k = 0; ok && k < n; k++) {
      p.a[t][k] = (float)((k * 7) % 13) / 13.0f;
      p.b[t][k] = (float)((k * 5) % 11) / 11.0f;
    }
  }
  openblas_set_num_threads(1);
  mx__kthreads_set(threads);
  for (int rep = 0; ok && rep < reps; rep++) {
    uint64_t t0 = mx__now_ns();
    mx__kparallel(threads, threads, probe_task, &p);
    double s = (double)(mx__now_ns() - t0) / 1e9;
    double gf = 2.0 * PROBE_N * PROBE_N * PROBE_N * threads / s / 1e9;
    if (gf > best) best = gf;
  }
  for (int32_t t = 0; t < threads; t++) {
    free(p.a[t]);
    free(p.b[t]);
    free(p.c[t]);
  }
  return best;
}

/* A concrete dim: a constant, or the batch (symbol of dim 0) taken as 1; -1 otherwise. */
static int64_t concrete(const mx_graph *g, mx_dim d, bool batch) {
  int64_t v;
  if (mx_dim_is_concrete(d)) return d;
  if (mx_sym_const_value(g->syms, d, &v)) return v;
  return batch ? 1 : -1;
}

/* Times one Conv node alone: *ms the best step (the least disturbed on a shared host), *flops its multiply-adds x 2. False (with why)
 * when the layer cannot be rebuilt on its own. */
static bool time_conv(mx_graph *g, const mx_node *node, int32_t threads, int64_t steps, double *ms,
                      double *flops, int64_t dims_out[4], int64_t *kdims, char *why, size_t cap) {
  mx_shape xs, ys;
  if (!mx_graph_value_shape(g, node->inputs[0], &xs) || !mx_graph_value_shape(g, node->outputs[0], &ys) ||
      xs.rank != 4 || ys.rank != 4) {
    snprintf(why, cap, "not a 2-D Conv with known rank");
    return false;
  }
  const mx_tensor *w = mx_graph_value_constant(g, node->inputs[1]);
  const mx_tensor *b = node->n_inputs > 2 && node->inputs[2] != MX_NO_VALUE
                           ? mx_graph_value_constant(g, node->inputs[2])
                           : NULL;
  if (!w || w->dtype != MX_FLOAT32 || w->rank != 4) {
    snprintf(why, cap, "weights are not a float32 constant");
    return false;
  }
  mx_shape in = {.rank = 4};
  for (int k = 0; k < 4; k++) {
    int64_t x = concrete(g, xs.dims[k], k == 0), y = concrete(g, ys.dims[k], k == 0);
    if (x < 0 || y < 0) {
      snprintf(why, cap, "symbolic dims besides the batch");
      return false;
    }
    in.dims[k] = x;
    dims_out[k] = y;
  }
  int64_t cg = w->dims[1];
  *flops = 2.0 * (double)(dims_out[1] * dims_out[2] * dims_out[3]) * (double)(cg * w->dims[2] * w->dims[3]);
  kdims[0] = w->dims[2];
  kdims[1] = w->dims[3];
  kdims[2] = in.dims[1] / cg; /* group */
  mx_graph *one = NULL;
  mx_session *s = NULL;
  mx_tensor x = {0}, out = {0};
  mx_error err;
  bool ok = false;
  mx_value_id vx, vw, vb = MX_NO_VALUE, vy;
  if (mx_graph_create("layer", &one) != MX_OK ||
      mx_graph_set_opset(one, "", mx_graph_opset(g, "")) != MX_OK ||
      mx_graph_add_input(one, "x", MX_FLOAT32, &in, &vx) != MX_OK ||
      mx_graph_add_constant(one, "w", w, &vw) != MX_OK ||
      (b && mx_graph_add_constant(one, "b", b, &vb) != MX_OK)) {
    snprintf(why, cap, "cannot build the one-node graph: %s",
             one ? mx_graph_last_error(one) : "out of memory");
    goto done;
  }
  mx_value_id ins[3] = {vx, vw, vb};
  const char *out_name = "y";
  mx_node_desc d = {.op_type = "Conv",
                    .inputs = ins,
                    .n_inputs = b ? 3 : 2,
                    .attrs = node->attrs,
                    .n_attrs = node->n_attrs,
                    .output_names = &out_name,
                    .n_outputs = 1};
  if (mx_graph_add_node(one, &d, &vy) != MX_OK || mx_graph_add_output(one, vy) != MX_OK) {
    snprintf(why, cap, "cannot build the one-node graph: %s", mx_graph_last_error(one));
    goto done;
  }
  mx_session_options o;
  mx_session_options_init(&o);
  o.intra_op_threads = (uint32_t)threads;
  if (mx_session_create(&o, &s, &err) != MX_OK) {
    snprintf(why, cap, "%s", err.message);
    goto done;
  }
  mx_status loaded = mx_session_load_graph(s, one);
  one = NULL; /* the session owns it now, also on failure */
  if (loaded != MX_OK) {
    snprintf(why, cap, "%s", mx_session_last_error(s));
    goto done;
  }
  if (mx_tensor_alloc(MX_FLOAT32, 4, in.dims, &x) != MX_OK) {
    snprintf(why, cap, "out of memory");
    goto done;
  }
  size_t nx = (size_t)(in.dims[0] * in.dims[1] * in.dims[2] * in.dims[3]);
  for (size_t k = 0; k < nx; k++) ((float *)x.data)[k] = (float)((k * 37) % 101) / 101.0f - 0.5f;
  x.name = "x";
  uint64_t *times = calloc((size_t)steps + 2, sizeof *times);
  if (!times) {
    snprintf(why, cap, "out of memory");
    goto done;
  }
  ok = true;
  for (int64_t k = -2; k < steps && ok; k++) { /* two untimed steps first */
    mx_tensor_release(&out);
    uint64_t t0 = mx__now_ns();
    if (mx_session_run(s, &x, 1, &out, 1) != MX_OK) {
      snprintf(why, cap, "%s", mx_session_last_error(s));
      ok = false;
    }
    if (k >= 0) times[k] = mx__now_ns() - t0;
  }
  if (ok) *ms = (double)mx_cli_quantile(times, (size_t)steps, 0.0) / 1e6;
  free(times);
done:
  mx_tensor_release(&out);
  mx_tensor_release(&x);
  mx_session_destroy(s);
  mx_graph_destroy(one);
  return ok;
}

int mx__bench_models_layers(const char *model, const char *input_npy, int32_t threads, int64_t steps,
                            FILE *out) {
  (void)input_npy; /* layers run on their own inputs: only the shapes matter */
  mx_graph *g = NULL;
  mx_error err;
  if (mx_onnx_load_file(model, &g, &err) != MX_OK)
    return mx_cli_runtime_error("bench models", "%s", err.message);
  if (mx_graph_infer(g) != MX_OK) {
    int rc = mx_cli_runtime_error("bench models", "%s: %s", model, mx_graph_last_error(g));
    mx_graph_destroy(g);
    return rc;
  }
  fprintf(stderr, "bench models: sgemm peak probe (%d thread%s)\n", threads, threads == 1 ? "" : "s");
  double peak = sgemm_peak(threads, 10);
  /* The table is printed once the layers are timed, with the peak probed again after them. */
  char *table = NULL;
  size_t table_len = 0;
  FILE *rows = open_memstream(&table, &table_len);
  if (!rows) {
    mx_graph_destroy(g);
    return mx_cli_runtime_error("bench models", "out of memory");
  }
  FILE *layers_out = out;
  out = rows;
  double total_flops = 0, total_ms = 0;
  int index = 0;
  for (size_t n = 0; n < g->n_nodes; n++) {
    const mx_node *node = &g->nodes[n];
    if ((node->flags & MX_NODE_DEAD) || strcmp(node->op_type, "Conv") != 0 || (node->domain && *node->domain))
      continue;
    double ms = 0, flops = 0;
    int64_t dims[4] = {0}, k[3] = {0};
    char why[256];
    index++;
    if (!time_conv(g, node, threads, steps, &ms, &flops, dims, k, why, sizeof why)) {
      fprintf(out, "| %d | %s | - | - | - | - | - | - | %s |\n", index, node->name, why);
      continue;
    }
    double gfs = flops / (ms / 1e3) / 1e9;
    total_flops += flops;
    total_ms += ms;
    fprintf(out, "| %d | %s | %lldx%lldx%lld | %lldx%lld | %lld | %.3f | %.3f | %.1f | @%.6f\n", index,
            node->name, (long long)dims[1], (long long)dims[2], (long long)dims[3], (long long)k[0],
            (long long)k[1], (long long)k[2], flops / 1e9, ms, gfs, gfs);
  }
  fclose(rows);
  out = layers_out;
  double again = sgemm_peak(threads, 10);
  if (again > peak) peak = again;
  fprintf(
      out,
      "threads %d: sgemm 1024^3 peak %.1f GFLOP/s (%d single-threaded OpenBLAS sgemm%s at once, best of 20\n"
      "runs before and after the layers); each layer's best of %lld steps, batch 1, through a one-node "
      "session\n\n",
      threads, peak, threads, threads == 1 ? "" : "s", (long long)steps);
  fprintf(out,
          "| # | Conv | out CxHxW | kernel | group | GFLOP | ms | GFLOP/s | of peak |\n"
          "|---:|---|---|---|---:|---:|---:|---:|---:|\n");
  /* "of peak" was written as a placeholder: fill it now that the peak is known. */
  for (char *line = table, *next; line && *line; line = next) {
    next = strchr(line, '\n');
    if (next) *next++ = '\0';
    double gfs;
    char *mark = strstr(line, "| @");
    if (mark && sscanf(mark + 3, "%lf", &gfs) == 1) {
      *mark = '\0';
      fprintf(out, "%s| %.0f%% |\n", line, peak > 0 ? 100.0 * gfs / peak : 0.0);
    } else {
      fprintf(out, "%s\n", line);
    }
  }
  free(table);
  if (total_ms > 0)
    fprintf(out, "| all | %d Conv layers | | | | %.3f | %.3f | %.1f | %.0f%% |\n\n", index, total_flops / 1e9,
            total_ms, total_flops / (total_ms / 1e3) / 1e9,
            peak > 0 ? 100.0 * total_flops / (total_ms / 1e3) / 1e9 / peak : 0.0);
  mx_graph_destroy(g);
  return MX_EXIT_OK;
}
