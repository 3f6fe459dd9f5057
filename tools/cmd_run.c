/* `mixrt run MODEL`: runs a model (ONNX or .mxm) through a session — or the reference
 * interpreter — on inputs from .npy files or random data, and reports the outputs, the per-step
 * latency and where the time went. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/clock.h"
#include "common/progress.h"
#include "graph/ir.h"
#include "mixrt/onnx.h"
#include "mixrt/reference.h"
#include "mixrt/session.h"
#include "tools/bench.h"
#include "tools/cmd_tp.h"
#include "tools/commands.h"
#include "tools/run_inputs.h"
#include "tools/session_opts.h"
#include "tools/sysmem.h"
#include "v2runtime/session_impl.h"

#define MAX_ITEMS 64

void mx_cmd_run_help(FILE *out) {
  fprintf(out,
          "usage: mixrt run MODEL.onnx|MODEL.mxm [--input NAME=FILE.npy ...] [--random] [--seed N]\n"
          "                 [--shape SYM=VAL ...] [--steps N] [--executor seq|topo|mt] [--streams K]\n"
          "                 [--static-min-ops N] [--device cpu|inline] [--frozen NAME ...]\n"
          "                 [--trace FILE.json] [--output-dir DIR] [--reference] [--check]\n"
          "                 [--skip-kernels] [--no-huge-pages] [--no-state] [--progress] [--tp N]\n\n"
          "Runs a model once per step and prints its outputs (dtype, shape, first values), the\n"
          "per-step latency (median, p10, p90), the time split between static models, dynamic ops\n"
          "and host kernels, and the device memory in use, the weights' share of it (shared blocks,\n"
          "held once by every session of the model on a device) and the huge pages granted. An ONNX\n"
          "model is compiled into mixrt's hybrid form first (partitioned into static models and\n"
          "dynamic ops, lowered into an execution graph); an .mxm file (from `mixrt compile`) is\n"
          "loaded without compiling.\n\n"
          "options:\n"
          "  --input NAME=FILE.npy   value of graph input NAME (NumPy .npy)\n"
          "  --random                seeded random values for inputs without --input\n"
          "  --seed N                seed of --random (default 1)\n"
          "  --shape SYM=VALUE       value of a symbolic dim, for --random inputs\n"
          "  --steps N               run N times (default 1). Inputs and outputs that pair up by name\n"
          "                          (past... <- present...) run as session state through a binding\n"
          "                          (include/mixrt/binding.h): loaded from the given inputs, kept on\n"
          "                          the device, and rolled back after each step so every step runs\n"
          "                          the same inputs\n"
          "  --no-state              no binding: every step through mx_session_run with the caller's\n"
          "                          inputs and outputs\n"
          "  --progress              load stage lines on stderr even when it is not a terminal\n"
          "%s"
          "  --trace FILE.json       write a Chrome trace of the steps (open it in Perfetto)\n"
          "  --output-dir DIR        write every output of the last step as DIR/<name>.npy\n"
          "  --reference             run through the reference interpreter instead (ONNX only)\n"
          "  --check                 also run the reference interpreter and compare every output\n"
          "                          bit for bit (ONNX only)\n"
          "  --skip-kernels          the device runs no kernel and no static-model task, everything\n"
          "                          around them runs: the latency is mixrt's own per-step cost.\n"
          "                          Outputs are not computed (nor printed); a model whose shapes\n"
          "                          depend on computed values (NonZero, say) may fail\n"
          "  --no-huge-pages         back device memory with 4 KiB pages only (by default blocks of\n"
          "                          1.5 MiB and more, the weights above all, get 2 MiB huge pages)\n"
          "  --tp N                  tensor parallel over MPI: `mpirun -np N mixrt run MODEL.onnx --tp N`.\n"
          "                          Every rank loads the ONNX model, takes its shard in memory (as\n"
          "                          `mixrt shard` writes it: --input files and --random inputs follow the\n"
          "                          shard's shapes, e.g. caches with the rank's kv-heads), attaches the\n"
          "                          world communicator and runs; rank 0 prints its outputs and each\n"
          "                          rank's time split (compute, communication, waiting). N must equal\n"
          "                          the MPI world size; not with .mxm, --reference or --check\n",
          mx_cli_session_opts_help);
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

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

typedef struct run_args {
  const char *model, *out_dir, *trace;
  mx_named_file files[MAX_ITEMS];
  size_t nf;
  mx_symbol_binding bindings[MAX_ITEMS];
  size_t nb;
  bool random, reference, check;
  bool no_state; /* --no-state: every step by mx_session_run, pasts fed by the caller */
  bool progress; /* --progress: load stage lines on stderr even when not a terminal */
  int64_t steps, seed;
  int64_t tp; /* --tp N: this process is one rank of N (0: no tensor parallelism) */
  mx_cli_session_opts so;
} run_args;

static int parse(int argc, char **argv, run_args *a, char (*names)[128], char (*file_names)[128]) {
  a->steps = 1;
  a->seed = 1;
  mx_cli_session_opts_init(&a->so);
  for (int i = 1; i < argc; i++) {
    const char *o = argv[i];
    int r = mx_cli_session_option("run", &a->so, argc, argv, &i);
    if (r > 1) return r - 100;
    if (r == 1) continue;
    if (strcmp(o, "--input") == 0) {
      const char *v = mx_cli_option_value("run", argc, argv, &i);
      if (!v) return MX_EXIT_USAGE;
      const char *eq = strchr(v, '=');
      if (!eq || eq == v || (size_t)(eq - v) >= 128 || a->nf == MAX_ITEMS)
        return mx_cli_usage_error("run", "--input needs NAME=FILE.npy, not '%s'", v);
      memcpy(file_names[a->nf], v, (size_t)(eq - v));
      file_names[a->nf][eq - v] = '\0';
      a->files[a->nf].name = file_names[a->nf];
      a->files[a->nf].path = eq + 1;
      a->nf++;
    } else if (strcmp(o, "--shape") == 0) {
      const char *v = mx_cli_option_value("run", argc, argv, &i);
      if (!v) return MX_EXIT_USAGE;
      if (a->nb == MAX_ITEMS || !mx_cli_parse_binding(v, &a->bindings[a->nb], names[a->nb], 128))
        return mx_cli_usage_error("run", "--shape needs SYMBOL=VALUE with VALUE >= 0, not '%s'", v);
      a->nb++;
    } else if (strcmp(o, "--steps") == 0 || strcmp(o, "--seed") == 0) {
      const char *v = mx_cli_option_value("run", argc, argv, &i);
      int64_t x;
      if (!v) return MX_EXIT_USAGE;
      bool steps = o[3] == 't';
      if (!mx_cli_parse_int(v, &x) || x < (steps ? 1 : 0) || x > 100000000)
        return mx_cli_usage_error("run", "%s needs a number, not '%s'", o, v);
      if (steps)
        a->steps = x;
      else
        a->seed = x;
    } else if (strcmp(o, "--tp") == 0) {
      const char *v = mx_cli_option_value("run", argc, argv, &i);
      if (!v) return MX_EXIT_USAGE;
      if (!mx_cli_parse_int(v, &a->tp) || a->tp < 1 || a->tp > 1024)
        return mx_cli_usage_error("run", "--tp wants a number of ranks from 1 to 1024, not '%s'", v);
    } else if (strcmp(o, "--random") == 0) {
      a->random = true;
    } else if (strcmp(o, "--no-state") == 0) {
      a->no_state = true;
    } else if (strcmp(o, "--progress") == 0) {
      a->progress = true;
    } else if (strcmp(o, "--reference") == 0) {
      a->reference = true;
    } else if (strcmp(o, "--check") == 0) {
      a->check = true;
    } else if (strcmp(o, "--skip-kernels") == 0) {
      a->so.o.device_options.skip_kernels = true;
    } else if (strcmp(o, "--no-huge-pages") == 0) {
      a->so.o.device_options.huge_pages = false;
    } else if (strcmp(o, "--output-dir") == 0) {
      if (!(a->out_dir = mx_cli_option_value("run", argc, argv, &i))) return MX_EXIT_USAGE;
    } else if (strcmp(o, "--trace") == 0) {
      if (!(a->trace = mx_cli_option_value("run", argc, argv, &i))) return MX_EXIT_USAGE;
    } else if (o[0] == '-') {
      return mx_cli_usage_error("run", "unknown option '%s'", o);
    } else if (!a->model) {
      a->model = o;
    } else {
      return mx_cli_usage_error("run", "only one MODEL may be given");
    }
  }
  if (!a->model) return mx_cli_usage_error("run", "MODEL is required");
  if (a->out_dir) {
    struct stat sb;
    if (stat(a->out_dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
      return mx_cli_usage_error("run", "--output-dir '%s' is not a folder", a->out_dir);
  }
  bool mxm = ends_with(a->model, ".mxm");
  if (mxm && (a->reference || a->check))
    return mx_cli_usage_error("run", "--reference and --check need the ONNX model, not an .mxm file");
  if (a->so.o.device_options.skip_kernels && (a->reference || a->check || a->out_dir))
    return mx_cli_usage_error(
        "run", "--skip-kernels computes no output: not with --reference, --check or --output-dir");
  if (a->tp && (mxm || a->reference || a->check))
    return mx_cli_usage_error("run", "--tp shards the ONNX model for the hybrid runtime: not with an .mxm file, "
                                     "--reference or --check");
  if (a->reference && (a->trace || a->check))
    return mx_cli_usage_error("run", "--trace and --check apply to the hybrid runtime, not to --reference");
  return MX_EXIT_OK;
}

/* Every --shape must name a symbol of the model. */
static int check_bindings(const run_args *a, const mx_graph *g) {
  for (size_t i = 0; i < a->nb; i++)
    if (mx_sym_symbol_index(g->syms, mx_sym_lookup(g->syms, a->bindings[i].name)) < 0)
      return mx_cli_usage_error("run", "--shape %s: the model has no symbolic dim called '%s'",
                                a->bindings[i].name, a->bindings[i].name);
  return MX_EXIT_OK;
}

static void print_latency(const char *what, uint64_t *times, int64_t steps) {
  qsort(times, (size_t)steps, sizeof *times, cmp_u64);
  printf("%s; steps: %lld; step latency: median %.3f ms, p10 %.3f ms, p90 %.3f ms\n", what, (long long)steps,
         times[steps / 2] / 1e6, times[steps / 10] / 1e6, times[(steps * 9) / 10] / 1e6);
}

static int save_outputs(const char *dir, mx_tensor *outs, size_t n) {
  for (size_t k = 0; dir && k < n; k++) {
    char path[4096];
    mx_error err;
    file_name(path, sizeof path, dir, outs[k].name ? outs[k].name : "output");
    if (mx_tensor_save_npy(path, &outs[k], &err) != MX_OK)
      return mx_cli_runtime_error("run", "%s", err.message);
  }
  return MX_EXIT_OK;
}

/* The reference interpreter path (--reference). */
static int run_reference(run_args *a, mx_graph *g, mx_tensor *inputs, size_t n_in, mx_tensor *outputs,
                         size_t n_out, uint64_t *times) {
  mx_error err;
  for (int64_t s = 0; s < a->steps; s++) {
    for (size_t k = 0; k < n_out; k++) mx_tensor_release(&outputs[k]);
    uint64_t t0 = mx__now_ns();
    if (mx_reference_run(g, inputs, n_in, outputs, n_out, &err) != MX_OK)
      return mx_cli_runtime_error("run", "step %lld: %s", (long long)s, err.message);
    times[s] = mx__now_ns() - t0;
  }
  printf("outputs:\n");
  for (size_t k = 0; k < n_out; k++) mx_cli_print_tensor(stdout, outputs[k].name, &outputs[k]);
  int rc = save_outputs(a->out_dir, outputs, n_out);
  print_latency("executor: reference interpreter", times, a->steps);
  return rc;
}

static const char *executor_name(mx_executor_kind k) {
  return k == MX_EXECUTOR_TOPOLOGICAL    ? "topological"
         : k == MX_EXECUTOR_MULTI_THREAD ? "multi-thread"
                                         : "sequential";
}

/* The steps through a binding when inputs and outputs pair up as state: the states are loaded
 * from the inputs and rolled back after each step (a swap of buffers), so every step runs the
 * given inputs; the last step's outputs are copied to host tensors. *used is false (nothing run)
 * when nothing pairs up. */
static int run_with_state(run_args *a, mx_session *s, mx_tensor *inputs, size_t n_in, mx_tensor *outputs,
                          size_t n_out, uint64_t *times, bool *used) {
  mx_binding *b = NULL;
  size_t pairs = 0;
  *used = false;
  if (mx_cli_state_binding(s, inputs, MX_BINDING_AXIS_AUTO, 0, &b, &pairs) != MX_OK || !pairs) {
    mx_binding_destroy(b);
    return MX_EXIT_OK; /* no pairs (or pairs that cannot be states): the plain loop */
  }
  *used = true;
  int rc = MX_EXIT_OK;
  for (size_t i = 0; i < n_in && rc == MX_EXIT_OK; i++)
    if (mx_binding_input_is_state(b, i) && mx_binding_load_state(b, i, &inputs[i]) != MX_OK)
      rc = mx_cli_runtime_error("run", "%s", mx_session_last_error(s));
  const int64_t rows = mx_binding_state_length(b);
  uint64_t host = 0;
  for (int64_t st = 0; st < a->steps && rc == MX_EXIT_OK; st++) {
    uint64_t t0 = mx__now_ns();
    if (mx_session_run_binding(s, b) != MX_OK) {
      rc = mx_cli_runtime_error("run", "step %lld: %s", (long long)st, mx_session_last_error(s));
      break;
    }
    times[st] = mx__now_ns() - t0;
    mx_session_stats last;
    if (mx_session_get_stats(s, &last, NULL) != MX_OK) memset(&last, 0, sizeof last);
    host += (times[st] > last.step_ns ? times[st] - last.step_ns : 0) + last.host_ns;
    if (st + 1 < a->steps && mx_binding_truncate(b, rows) != MX_OK)
      rc = mx_cli_runtime_error("run", "%s", mx_session_last_error(s));
  }
  for (size_t k = 0; k < n_out && rc == MX_EXIT_OK; k++) {
    const mx_tensor *o = mx_binding_output(b, k);
    mx_tensor_release(&outputs[k]);
    /* Read through the binding: an appended state's rows lie padded in its buffer. */
    if (o && (mx_tensor_alloc(o->dtype, o->rank, o->dims, &outputs[k]) != MX_OK ||
              mx_binding_read_output(b, k, &outputs[k]) != MX_OK))
      rc = mx_cli_runtime_error("run", "reading output %zu back: %s", k, mx_session_last_error(s));
    mx_io_info info;
    mx_session_output_info(s, k, &info);
    outputs[k].name = info.name;
  }
  if (rc == MX_EXIT_OK) {
    uint64_t sum = 0;
    for (int64_t st = 0; st < a->steps; st++) sum += times[st];
    printf(
        "state: %zu input/output pairs kept on the device through a binding (%lld rows, rolled back after "
        "each "
        "step; --no-state turns it off); host side %.2f us/step, %.2f%% of the step\n",
        pairs, (long long)rows, (double)host / 1e3 / (double)a->steps,
        sum ? 100.0 * (double)host / (double)sum : 0.0);
  }
  mx_binding_destroy(b);
  return rc;
}

static int run_session(run_args *a, mx_session *s, mx_graph *ref, mx_tensor *inputs, size_t n_in,
                       mx_tensor *outputs, size_t n_out, uint64_t *times) {
  if (a->trace && mx_session_trace_begin(s) != MX_OK)
    return mx_cli_runtime_error("run", "%s", mx_session_last_error(s));
  bool state = false;
  if (!a->no_state && !a->so.o.device_options.skip_kernels) {
    int rc = run_with_state(a, s, inputs, n_in, outputs, n_out, times, &state);
    if (rc != MX_EXIT_OK) return rc;
  }
  for (int64_t st = 0; !state && st < a->steps; st++) {
    for (size_t k = 0; k < n_out; k++) mx_tensor_release(&outputs[k]);
    uint64_t t0 = mx__now_ns();
    if (mx_session_run(s, inputs, n_in, outputs, n_out) != MX_OK)
      return mx_cli_runtime_error("run", "step %lld: %s", (long long)st, mx_session_last_error(s));
    times[st] = mx__now_ns() - t0;
  }
  if (a->trace) {
    if (mx_session_trace_end(s, a->trace) != MX_OK)
      return mx_cli_runtime_error("run", "%s", mx_session_last_error(s));
  }
  if (a->so.o.device_options.skip_kernels) {
    printf("outputs: not computed (--skip-kernels: the device ran no kernel)\n");
  } else {
    printf("outputs:\n");
    for (size_t k = 0; k < n_out; k++) mx_cli_print_tensor(stdout, outputs[k].name, &outputs[k]);
  }
  int rc = save_outputs(a->out_dir, outputs, n_out);
  if (rc != MX_EXIT_OK) return rc;
  const mx_program *p = s->prog;
  char what[256];
  snprintf(what, sizeof what,
           "executor: hybrid (%zu static and %zu dynamic partitions; %s, %u stream%s, %s device%s%s)",
           p->static_calls, p->dynamic_calls, executor_name(a->so.o.executor), a->so.o.streams,
           a->so.o.streams == 1 ? "" : "s",
           a->so.o.device_options.kind == MX_DEVICE_INLINE ? "inline" : "CPU",
           a->so.o.device_options.huge_pages ? "" : ", no huge pages",
           a->so.o.device_options.skip_kernels ? ", kernels skipped" : "");
  print_latency(what, times, a->steps);
  mx_session_stats last, total;
  if (mx_session_get_stats(s, &last, &total) != MX_OK)
    return mx_cli_runtime_error("run", "%s", mx_session_last_error(s));
  printf("time split over %llu steps: static models %.3f ms, dynamic ops %.3f ms, host kernels %.3f ms\n",
         (unsigned long long)total.steps, total.static_ns / 1e6, total.dynamic_ns / 1e6, total.host_ns / 1e6);
  printf(
      "per step: %llu static executions, %llu dynamic launches, %llu kernels; refreshed entries %llu (last "
      "step %llu); "
      "device allocations %llu (last step %llu)\n",
      (unsigned long long)last.static_executes, (unsigned long long)last.dynamic_launches,
      (unsigned long long)last.kernels_run, (unsigned long long)total.refreshed_entries,
      (unsigned long long)last.refreshed_entries, (unsigned long long)total.device_allocations,
      (unsigned long long)last.device_allocations);
  if (total.spec_compiles || total.spec_hits || total.spec_misses)
    printf(
        "specializations: %llu hits, %llu misses, %llu compiles (%.1f ms), %llu evictions, %llu partition%s "
        "stayed dynamic\n",
        (unsigned long long)total.spec_hits, (unsigned long long)total.spec_misses,
        (unsigned long long)total.spec_compiles, total.spec_compile_ns / 1e6,
        (unsigned long long)total.spec_evictions, (unsigned long long)total.spec_fallbacks,
        total.spec_fallbacks == 1 ? "" : "s");
  uint64_t reads = mx__onnx_files_loaded();
  printf("load: %llu ONNX file read%s by this process; %.1f MiB of constant bytes copied into graphs\n",
         (unsigned long long)reads, reads == 1 ? "" : "s", (double)mx__graph_tensor_bytes_copied() / 1048576.0);
  mx_device_memory_stats mem;
  mx_device_memory_stats_get(mx_session_device(s), &mem);
  printf(
      "device memory: %.1f MiB in use (peak %.1f MiB); weights %.1f MiB in %llu shared block%s (held once "
      "however many sessions of this model use the device)\n",
      (double)mem.bytes_in_use / 1048576.0, (double)mem.peak_bytes / 1048576.0,
      (double)mem.shared_bytes / 1048576.0, (unsigned long long)mem.shared_blocks,
      mem.shared_blocks == 1 ? "" : "s");
  char thp[32];
  int64_t huge_kib = mx_cli_anon_huge_kib();
  mx_cli_thp_mode(thp, sizeof thp);
  if (huge_kib >= 0)
    printf("huge pages: %.1f MiB of this process (transparent huge pages %s%s)\n", (double)huge_kib / 1024.0,
           thp, a->so.o.device_options.huge_pages ? "" : "; mixrt asked for none");
  else
    printf("huge pages: unknown (transparent huge pages %s)\n", thp);
  if (a->trace) printf("trace: %s\n", a->trace);
  if (a->check) {
    mx_tensor *want = calloc(n_out ? n_out : 1, sizeof *want);
    mx_error err;
    if (!want) return mx_cli_runtime_error("run", "out of memory");
    rc = MX_EXIT_OK;
    if (mx_reference_run(ref, inputs, n_in, want, n_out, &err) != MX_OK) {
      rc = mx_cli_runtime_error("run", "check: the reference interpreter failed: %s", err.message);
    } else {
      for (size_t k = 0; k < n_out && rc == MX_EXIT_OK; k++) {
        char why[256];
        if (!mx_tensor_allclose(&outputs[k], &want[k], 0.0, 0.0, why, sizeof why)) {
          printf("check: FAIL: output '%s' differs from the reference interpreter: %s\n", outputs[k].name,
                 why);
          rc = MX_EXIT_RUNTIME;
        }
      }
      if (rc == MX_EXIT_OK)
        printf("check: PASS: every output equals the reference interpreter bit for bit\n");
    }
    for (size_t k = 0; k < n_out; k++) mx_tensor_release(&want[k]);
    free(want);
  }
  return rc;
}

int mx_cmd_run(int argc, char **argv) {
  run_args a;
  memset(&a, 0, sizeof a);
  char names[MAX_ITEMS][128], file_names[MAX_ITEMS][128];
  int rc = parse(argc, argv, &a, names, file_names);
  if (rc != MX_EXIT_OK) return rc;
  bool mxm = ends_with(a.model, ".mxm");
  mx_error err;
  mx_graph *g = NULL; /* the ONNX model as loaded (reference, --check, --tp), else NULL */
  mx_session *s = NULL;
  mx_cli_tp *tp = NULL;
  mx_tensor *inputs = NULL, *outputs = NULL;
  uint64_t *times = NULL;
  size_t n_in = 0, n_out = 0;
  if (a.tp && (rc = mx_cli_tp_begin("run", a.tp, &tp)) != MX_EXIT_OK) return rc;
  /* The tool keeps a graph of its own only where the model as loaded is needed: the reference
   * interpreter, --check, or a shard. Otherwise the session's load is the only one: reading the
   * weights twice cost as much CPU time as the rest of the load. */
  bool own_graph = !mxm && (a.reference || a.check || tp);
  if (own_graph && mx_onnx_load_file(a.model, &g, &err) != MX_OK) {
    rc = mx_cli_runtime_error("run", "%s", err.message);
    goto done;
  }
  /* With --tp, g becomes this rank's shard: it declares the inputs (the rank's cache shapes). */
  if (tp && (rc = mx_cli_tp_shard("run", tp, g)) != MX_EXIT_OK) goto done;
  if (!a.reference) {
    if (mx_session_create(&a.so.o, &s, &err) != MX_OK) {
      rc = mx_cli_runtime_error("run", "%s", err.message);
      goto done;
    }
    mx__progress_enable_for_cli(a.progress);
    if (tp) { /* the session takes a shard of its own */
      mx_graph *shard = NULL;
      if (mx_onnx_load_file(a.model, &shard, &err) != MX_OK) {
        rc = mx_cli_runtime_error("run", "%s", err.message);
        goto done;
      }
      if ((rc = mx_cli_tp_shard("run", tp, shard)) != MX_EXIT_OK) {
        mx_graph_destroy(shard);
        goto done;
      }
      if (mx_session_load_graph(s, shard) != MX_OK) { /* the session owns shard, also on failure */
        rc = mx_cli_runtime_error("run", "%s", mx_session_last_error(s));
        goto done;
      }
      if ((rc = mx_cli_tp_attach("run", tp, s)) != MX_EXIT_OK) goto done;
    } else if (mx_session_load_file(s, a.model) != MX_OK) {
      rc = mx_cli_runtime_error("run", "%s", mx_session_last_error(s));
      goto done;
    }
    mx__progress_stage("load: done");
    mx__progress_enable(false);
  }
  /* Inputs are described by the tool's ONNX graph, or by the loaded program's root graph. */
  mx_graph *decl = g ? g : s->prog->root;
  rc = check_bindings(&a, decl);
  if (rc != MX_EXIT_OK) goto done;
  n_in = mx_graph_input_count(decl);
  n_out = mx_graph_output_count(decl);
  inputs = calloc(n_in ? n_in : 1, sizeof *inputs);
  outputs = calloc(n_out ? n_out : 1, sizeof *outputs);
  times = calloc((size_t)a.steps, sizeof *times);
  if (!inputs || !outputs || !times) {
    rc = mx_cli_runtime_error("run", "out of memory");
    goto done;
  }
  rc = mx_cli_check_input_memory("run", s, decl, a.files, a.nf, a.random, a.bindings, a.nb);
  if (rc != MX_EXIT_OK) goto done;
  rc = mx_cli_make_inputs("run", decl, a.files, a.nf, a.random, (uint64_t)a.seed, a.bindings, a.nb, inputs);
  if (rc != MX_EXIT_OK) goto done;
  rc = a.reference ? run_reference(&a, g, inputs, n_in, outputs, n_out, times)
                   : run_session(&a, s, g, inputs, n_in, outputs, n_out, times);
  if (tp && rc == MX_EXIT_OK) {
    uint64_t sum = 0;
    for (int64_t k = 0; k < a.steps; k++) sum += times[k];
    mx_cli_tp_report(tp, sum, a.steps);
  }
done:
  for (size_t k = 0; inputs && k < n_in; k++) mx_tensor_release(&inputs[k]);
  for (size_t k = 0; outputs && k < n_out; k++) mx_tensor_release(&outputs[k]);
  free(times);
  free(outputs);
  free(inputs);
  mx_session_destroy(s);
  mx_graph_destroy(g);
  mx_cli_tp_end(tp);
  return rc;
}
