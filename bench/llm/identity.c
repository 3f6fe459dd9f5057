/* The ONNX Runtime binding's own per-call cost: an ONNX model of one Identity on a float [1],
 * called through the peer and, for comparison, through a mixrt session on the same device
 * settings. */
#include <stdlib.h>

#include "bench/llm/llm_impl.h"
#include "common/clock.h"
#include "mixrt/onnx.h"
#include "mixrt/partition.h"
#include "tools/cli.h"

/* An ONNX model of one Identity on a float [1] (the binding-overhead probe). */
static mx_status write_identity(const char *path, mx_error *err) {
  mx_graph *g;
  mx_status st = mx_graph_create("identity", &g);
  if (st != MX_OK) {
    snprintf(err->message, sizeof err->message, "creating the Identity model: %s", mx_status_string(st));
    return st;
  }
  mx_shape shape = {.rank = 1, .dims = {1}};
  mx_value_id x, y;
  const char *out_names[1] = {"y"};
  mx_node_desc d = {.op_type = "Identity",
                    .name = "identity",
                    .inputs = &x,
                    .n_inputs = 1,
                    .output_names = out_names,
                    .n_outputs = 1};
  if ((st = mx_graph_add_input(g, "x", MX_FLOAT32, &shape, &x)) != MX_OK ||
      (st = mx_graph_add_node(g, &d, &y)) != MX_OK || (st = mx_graph_add_output(g, y)) != MX_OK ||
      (st = mx_graph_infer(g)) != MX_OK) {
    snprintf(err->message, sizeof err->message, "building the Identity model: %s", mx_graph_last_error(g));
    goto destroy_graph;
  }
  st = mx_onnx_save_file(g, path, err);
destroy_graph:
  mx_graph_destroy(g);
  return st;
}

int mx__llm_measure_identity(const llm_args *a, peer *p, mx_device *dev, const char *dir, timing *ort_t,
                             timing *mixrt_t) {
  char path[1100], in_dir[1100];
  snprintf(path, sizeof path, "%s/identity.onnx", dir);
  snprintf(in_dir, sizeof in_dir, "%s/identity-in", dir);
  mx_error err;
  if (write_identity(path, &err) != MX_OK) return mx_cli_runtime_error(CMD, "%s", err.message);
  int rc = MX_EXIT_OK;
  uint64_t *samples = calloc((size_t)a->identity_runs, sizeof *samples);
  mx_session *s = mx__llm_open_session(a, dev, MX_PARTITION_DEFAULT_STATIC_MIN_OPS, false, path, &rc);
  mx_tensor x = {0}, dx = {0}, dy = {0};
  if (!s) goto free_samples;
  if (!samples) {
    rc = mx_cli_runtime_error(CMD, "out of memory");
    goto close;
  }
  const int64_t one = 1;
  if (mx_tensor_alloc(MX_FLOAT32, 1, &one, &x) != MX_OK ||
      (a->device_io && (mx__llm_device_tensor(dev, MX_FLOAT32, 1, &one, &dx) != MX_OK ||
                        mx__llm_device_tensor(dev, MX_FLOAT32, 1, &one, &dy) != MX_OK))) {
    rc = mx_cli_runtime_error(CMD, "out of memory");
    goto close;
  }
  if (a->device_io && mx_device_copy(dev, dx.data, x.data, sizeof(float), MX_COPY_H2D) != MX_OK) {
    rc = mx_cli_runtime_error(CMD, "the input could not be copied to the device: %s",
                              mx_device_last_error(dev));
    goto close;
  }
  for (int64_t k = -a->warmup; k < a->identity_runs; k++) {
    mx_tensor y = {0};
    uint64_t t0 = mx__now_ns();
    mx_status st = a->device_io ? mx_session_run(s, &dx, 1, &dy, 1) : mx_session_run(s, &x, 1, &y, 1);
    uint64_t t1 = mx__now_ns();
    if (st != MX_OK) {
      rc = mx_cli_runtime_error(CMD, "identity: %s", mx_session_last_error(s));
      goto close;
    }
    mx_tensor_release(&y);
    if (k >= 0) samples[k] = t1 - t0;
  }
  *mixrt_t = mx__llm_summarize(samples, (size_t)a->identity_runs);
  if (p->pid > 0) {
    if (mx__llm_write_inputs(s, in_dir, &x, 1, &err) != MX_OK) {
      rc = mx_cli_runtime_error(CMD, "%s", err.message);
      goto close;
    }
    if (!mx__llm_peer_call(p, "load identity %s", path) ||
        !mx__llm_peer_call(p, "feed identity %s", in_dir) ||
        (a->warmup && !mx__llm_peer_call(p, "run identity %lld", (long long)a->warmup)) ||
        !mx__llm_peer_call(p, "run identity %lld", (long long)a->identity_runs) ||
        !mx__llm_peer_times(p, 0, samples, a->identity_runs)) {
      rc = mx_cli_runtime_error(CMD, "ONNX Runtime, Identity model: %s", p->line);
      goto close;
    }
    mx__llm_peer_call(p, "drop identity");
    *ort_t = mx__llm_summarize(samples, (size_t)a->identity_runs);
  }
close:
  mx_tensor_release(&x);
  mx_device_free(dev, dx.data);
  mx_device_free(dev, dy.data);
  mx_session_destroy(s);
free_samples:
  free(samples);
  return rc;
}
