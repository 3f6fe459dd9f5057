/* `mixrt run M.mxm` (see run_mxm.h): loads the plan, builds its inputs like the ONNX path does
 * (from .npy files or seeded random values, through a graph that only declares the plan's
 * inputs), loads the model on the CPU device and runs it once per step on host tensors (staged
 * by the model), timing each step up to the synchronization of its stream. */
#include "tools/run_mxm.h"

#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "static_exec/static_exec.h"
#include "tools/cli.h"

bool mx_cli_is_mxm(const char *path) {
  size_t n = path ? strlen(path) : 0;
  return n >= 4 && strcmp(path + n - 4, ".mxm") == 0;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* DIR/<name>.npy with characters unsafe in file names replaced. */
static void npy_path(char *buf, size_t cap, const char *dir, const char *name) {
  char safe[256];
  size_t i = 0;
  for (; name[i] && i + 1 < sizeof safe; i++) {
    char c = name[i];
    safe[i] = (c == '/' || c == '\\' || c == ':' || c == ' ') ? '_' : c;
  }
  safe[i] = '\0';
  snprintf(buf, cap, "%s/%s.npy", dir, safe);
}

/* A graph declaring the plan's inputs, for mx_cli_make_inputs. */
static mx_status input_graph(const mx_static_plan *p, mx_graph **out) {
  mx_graph *g;
  mx_status st = mx_graph_create("mxm_inputs", &g);
  for (size_t i = 0; st == MX_OK && i < mx_static_plan_input_count(p); i++) {
    mx_static_io io;
    mx_static_plan_input(p, i, &io);
    mx_shape s = {.rank = io.rank};
    for (int32_t k = 0; k < io.rank; k++) s.dims[k] = io.dims[k];
    mx_value_id v;
    st = mx_graph_add_input(g, io.name, io.dtype, &s, &v);
  }
  if (st != MX_OK) {
    mx_graph_destroy(g);
    return st;
  }
  *out = g;
  return MX_OK;
}

int mx_cli_run_mxm(const mx_run_mxm_args *a) {
  if (a->n_bindings)
    return mx_cli_usage_error("run",
                              "--shape does not apply to a compiled model (its shapes are fixed)");
  mx_error err = {0};
  mx_static_plan *p = NULL;
  if (mx_mxm_load(a->model, &p, &err) != MX_OK)
    return mx_cli_runtime_error("run", "%s", err.message);
  int rc = MX_EXIT_RUNTIME;
  size_t n_in = mx_static_plan_input_count(p), n_out = mx_static_plan_output_count(p);
  mx_graph *g = NULL;
  mx_device *dev = NULL;
  mx_stream *s = NULL;
  mx_static_model *m = NULL;
  bool have_inputs = false;
  mx_tensor *inputs = calloc(n_in ? n_in : 1, sizeof *inputs);
  mx_tensor *outputs = calloc(n_out ? n_out : 1, sizeof *outputs);
  uint64_t *times = calloc((size_t)a->steps, sizeof *times);
  if (!inputs || !outputs || !times) {
    rc = mx_cli_runtime_error("run", "out of memory");
    goto cleanup;
  }
  if (input_graph(p, &g) != MX_OK) {
    rc = mx_cli_runtime_error("run", "out of memory");
    goto cleanup;
  }
  rc = mx_cli_make_inputs("run", g, a->files, a->n_files, a->random, a->seed, NULL, 0, inputs);
  if (rc != MX_EXIT_OK) goto cleanup;
  have_inputs = true;
  rc = MX_EXIT_RUNTIME;
  for (size_t i = 0; i < n_in; i++) inputs[i].placement = MX_HOST;
  for (size_t j = 0; j < n_out; j++) {
    mx_static_io io;
    mx_static_plan_output(p, j, &io);
    if (mx_tensor_alloc(io.dtype, io.rank, io.dims, &outputs[j]) != MX_OK) {
      rc = mx_cli_runtime_error("run", "output '%s': cannot allocate %llu bytes", io.name,
                                (unsigned long long)io.nbytes);
      goto cleanup;
    }
    outputs[j].name = io.name;
    outputs[j].placement = MX_HOST;
  }
  mx_device_options o;
  mx_device_options_init(&o);
  if (mx_device_create(&o, &dev, &err) != MX_OK || mx_stream_create(dev, 0, &s) != MX_OK) {
    rc = mx_cli_runtime_error("run", "CPU device: %s",
                              dev ? mx_device_last_error(dev) : err.message);
    goto cleanup;
  }
  if (mx_static_model_create(dev, p, NULL, &m, &err) != MX_OK) {
    rc = mx_cli_runtime_error("run", "%s", err.message);
    goto cleanup;
  }
  for (int64_t step = 0; step < a->steps; step++) {
    uint64_t t0 = mx__now_ns();
    mx_status st = mx_static_model_update_args(m, inputs, n_in, outputs, n_out);
    if (st == MX_OK) st = mx_static_model_execute(m, s);
    if (st != MX_OK) {
      rc = mx_cli_runtime_error("run", "step %lld: %s", (long long)step,
                                mx_static_model_last_error(m));
      goto cleanup;
    }
    if (mx_stream_synchronize(s) != MX_OK) {
      mx_stream_error se;
      mx_stream_get_error(s, &se);
      rc = mx_cli_runtime_error("run", "step %lld: %s", (long long)step, se.message);
      goto cleanup;
    }
    times[step] = mx__now_ns() - t0;
  }
  printf("outputs:\n");
  for (size_t j = 0; j < n_out; j++) {
    mx_cli_print_tensor(stdout, outputs[j].name, &outputs[j]);
    if (a->out_dir) {
      char path[4096];
      npy_path(path, sizeof path, a->out_dir, outputs[j].name ? outputs[j].name : "output");
      if (mx_tensor_save_npy(path, &outputs[j], &err) != MX_OK) {
        rc = mx_cli_runtime_error("run", "%s", err.message);
        goto cleanup;
      }
    }
  }
  mx_static_report r;
  mx_static_plan_report(p, &r);
  int64_t n = a->steps;
  qsort(times, (size_t)n, sizeof *times, cmp_u64);
  printf(
      "executor: static (%u tasks on %u streams, FM arena %llu bytes); steps: %lld; step latency: "
      "median %.3f ms, p10 %.3f ms, p90 %.3f ms\n",
      r.tasks, r.streams, (unsigned long long)r.fm_bytes, (long long)n, times[n / 2] / 1e6,
      times[n / 10] / 1e6, times[(n * 9) / 10] / 1e6);
  rc = MX_EXIT_OK;
cleanup:
  mx_static_model_destroy(m);
  mx_stream_destroy(s);
  mx_device_destroy(dev);
  for (size_t i = 0; have_inputs && i < n_in; i++) mx_tensor_release(&inputs[i]);
  for (size_t j = 0; outputs && j < n_out; j++) mx_tensor_release(&outputs[j]);
  free(times);
  free(outputs);
  free(inputs);
  mx_graph_destroy(g);
  mx_static_plan_destroy(p);
  return rc;
}
