/* `mixrt run MODEL`: runs a model on inputs from .npy files or random data and reports the
 * outputs and per-step latency. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/clock.h"
#include "mixrt/onnx.h"
#include "mixrt/reference.h"
#include "tools/commands.h"
#include "tools/run_inputs.h"
#include "tools/run_mxm.h"

#define MAX_ITEMS 64

void mx_cmd_run_help(FILE *out) {
  fprintf(out,
          "usage: mixrt run MODEL.onnx|MODEL.mxm [--input NAME=FILE.npy ...] [--random] [--seed N]\n"
          "                 [--shape SYMBOL=VALUE ...] [--steps N] [--reference] [--output-dir DIR]\n\n"
          "Runs a model once per step and prints its outputs (dtype, shape, first values) and the\n"
          "per-step latency (median, p10, p90). An ONNX model runs through the reference interpreter\n"
          "(op by op on the host, every shape resolved at run time); --reference says so explicitly.\n"
          "A compiled model (.mxm, from `mixrt compile`) runs as a static model on the CPU device;\n"
          "its shapes are fixed, so --shape does not apply to it.\n\n"
          "options:\n"
          "  --input NAME=FILE.npy  value of graph input NAME (NumPy .npy)\n"
          "  --random               seeded random values for inputs without --input\n"
          "  --seed N               seed of --random (default 1)\n"
          "  --shape SYM=VALUE      value of a symbolic dim, for --random inputs\n"
          "  --steps N              run N times (default 1)\n"
          "  --reference            use the reference interpreter\n"
          "  --output-dir DIR       write every output as DIR/<name>.npy\n");
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Output file name: the output name with characters unsafe in file names replaced. */
static void file_name(char *buf, size_t cap, const char *dir, const char *name) {
  char safe[256];
  size_t i = 0;
  for (; name[i] && i + 1 < sizeof safe; i++) {
    char c = name[i];
    safe[i] = (c == '/' || c == '\\' || c == ':' || c == ' ') ? '_' : c;
  }
  safe[i] = '\0';
  snprintf(buf, cap, "%s/%s.npy", dir, safe);
}

int mx_cmd_run(int argc, char **argv) {
  const char *model = NULL, *out_dir = NULL;
  mx_named_file files[MAX_ITEMS];
  mx_symbol_binding bindings[MAX_ITEMS];
  char names[MAX_ITEMS][128];
  char file_names[MAX_ITEMS][128];
  size_t nf = 0, nb = 0;
  bool random = false;
  int64_t steps = 1, seed = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--input") == 0) {
      const char *v = mx_cli_option_value("run", argc, argv, &i);
      if (!v) return MX_EXIT_USAGE;
      const char *eq = strchr(v, '=');
      if (!eq || eq == v || (size_t)(eq - v) >= sizeof file_names[0] || nf == MAX_ITEMS)
        return mx_cli_usage_error("run", "--input needs NAME=FILE.npy, not '%s'", v);
      memcpy(file_names[nf], v, (size_t)(eq - v));
      file_names[nf][eq - v] = '\0';
      files[nf].name = file_names[nf];
      files[nf].path = eq + 1;
      nf++;
    } else if (strcmp(a, "--shape") == 0) {
      const char *v = mx_cli_option_value("run", argc, argv, &i);
      if (!v) return MX_EXIT_USAGE;
      if (nb == MAX_ITEMS || !mx_cli_parse_binding(v, &bindings[nb], names[nb], sizeof names[nb]))
        return mx_cli_usage_error("run", "--shape needs SYMBOL=VALUE with VALUE >= 0, not '%s'", v);
      nb++;
    } else if (strcmp(a, "--steps") == 0 || strcmp(a, "--seed") == 0) {
      const char *v = mx_cli_option_value("run", argc, argv, &i);
      int64_t x;
      if (!v) return MX_EXIT_USAGE;
      if (!mx_cli_parse_int(v, &x) || x < (a[3] == 't' ? 1 : 0) || x > 100000000)
        return mx_cli_usage_error("run", "%s needs a number, not '%s'", a, v);
      if (a[3] == 't') steps = x;
      else seed = x;
    } else if (strcmp(a, "--random") == 0) {
      random = true;
    } else if (strcmp(a, "--reference") == 0) {
      /* the reference interpreter is the executor of this command */
    } else if (strcmp(a, "--output-dir") == 0) {
      if (!(out_dir = mx_cli_option_value("run", argc, argv, &i))) return MX_EXIT_USAGE;
    } else if (a[0] == '-') {
      return mx_cli_usage_error("run", "unknown option '%s'", a);
    } else if (!model) {
      model = a;
    } else {
      return mx_cli_usage_error("run", "only one MODEL may be given");
    }
  }
  if (!model) return mx_cli_usage_error("run", "MODEL is required");
  if (out_dir) {
    struct stat sb;
    if (stat(out_dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
      return mx_cli_usage_error("run", "--output-dir '%s' is not a folder", out_dir);
  }
  if (mx_cli_is_mxm(model)) {
    mx_run_mxm_args ra = {model, files, nf, random, (uint64_t)seed, steps, out_dir, nb};
    return mx_cli_run_mxm(&ra);
  }
  mx_error err;
  mx_graph *g;
  if (mx_onnx_load_file(model, &g, &err) != MX_OK) return mx_cli_runtime_error("run", "%s", err.message);
  int rc = MX_EXIT_RUNTIME;
  size_t n_in = mx_graph_input_count(g), n_out = mx_graph_output_count(g);
  mx_tensor *inputs = calloc(n_in ? n_in : 1, sizeof *inputs);
  mx_tensor *outputs = calloc(n_out ? n_out : 1, sizeof *outputs);
  uint64_t *times = calloc((size_t)steps, sizeof *times);
  if (!inputs || !outputs || !times) {
    rc = mx_cli_runtime_error("run", "out of memory");
    goto cleanup;
  }
  rc = mx_cli_make_inputs("run", g, files, nf, random, (uint64_t)seed, bindings, nb, inputs);
  if (rc != MX_EXIT_OK) goto cleanup;
  for (int64_t s = 0; s < steps; s++) {
    for (size_t k = 0; k < n_out; k++) mx_tensor_release(&outputs[k]);
    uint64_t t0 = mx__now_ns();
    if (mx_reference_run(g, inputs, n_in, outputs, n_out, &err) != MX_OK) {
      rc = mx_cli_runtime_error("run", "step %lld: %s", (long long)s, err.message);
      goto cleanup;
    }
    times[s] = mx__now_ns() - t0;
  }
  printf("outputs:\n");
  for (size_t k = 0; k < n_out; k++) {
    mx_cli_print_tensor(stdout, outputs[k].name, &outputs[k]);
    if (out_dir) {
      char path[4096];
      file_name(path, sizeof path, out_dir, outputs[k].name ? outputs[k].name : "output");
      if (mx_tensor_save_npy(path, &outputs[k], &err) != MX_OK) {
        rc = mx_cli_runtime_error("run", "%s", err.message);
        goto cleanup;
      }
    }
  }
  qsort(times, (size_t)steps, sizeof *times, cmp_u64);
  printf("executor: reference; steps: %lld; step latency: median %.3f ms, p10 %.3f ms, p90 %.3f ms\n",
         (long long)steps, times[steps / 2] / 1e6, times[steps / 10] / 1e6, times[(steps * 9) / 10] / 1e6);
  rc = MX_EXIT_OK;
cleanup:
  for (size_t k = 0; inputs && k < n_in; k++) mx_tensor_release(&inputs[k]);
  for (size_t k = 0; outputs && k < n_out; k++) mx_tensor_release(&outputs[k]);
  free(times);
  free(outputs);
  free(inputs);
  mx_graph_destroy(g);
  return rc;
}
