/* `mixrt bench llm`'s options: the help text, and parsing the arguments into llm_args (with
 * the combinations that make no sense refused as usage errors). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bench/llm/llm.h"
#include "bench/llm/llm_impl.h"
#include "tools/bench.h"
#include "tools/cli.h"

void mx_bench_llm_help(FILE *out) {
  fprintf(
      out,
      "usage: mixrt bench llm [--configs tiny,small] [--past 16,128,512] [--rounds N] [--min-time S]\n"
      "                       [--steps N] [--warmup N] [--block-warmup N]\n"
      "                       [--systems hybrid,dynamic,reference,ort,control] [--no-ort] [--skip-kernels]\n"
      "                       [--no-huge-pages] [--no-state] [--state-copy] [--processes N]\n"
      "                       [--mode fixed|decode] [--io device|host] [--device inline|cpu]\n"
      "                       [--streams N] [--executor E]\n"
      "                       [--node PATH] [--peers DIR] [--work-dir DIR] [--identity-runs N]\n"
      "                       [--table FILE]\n\n"
      "llm: decode-step latency of the Llama-style decode model at each past length, for mixrt\n"
      "  hybrid, mixrt all-dynamic (static_min_ops -1), the mixrt reference interpreter and ONNX\n"
      "  Runtime (CPU, intra-op 1 thread, inter-op 1 thread, sequential), all on the same ONNX file\n"
      "  and the same inputs, run in interleaved rounds. Prints JSON: median / p10 / p90 per\n"
      "  system, the ratio hybrid / ONNX Runtime, the rounds in which the hybrid's block was\n"
      "  faster than each other system's block of the same round (with a sign test), the largest\n"
      "  differences of logits and present tensors to ONNX Runtime's, whether hybrid and\n"
      "  all-dynamic equal the reference bit for bit, and the ONNX Runtime binding's own per-call\n"
      "  cost (an Identity model).\n"
      "  tiny: 2 layers, hidden 64, 4 heads (2 key/value heads), ffn 172, vocab 128;\n"
      "  small: 4 layers, hidden 256, 4 heads of 64 (4 key/value heads), ffn 688, vocab 1000.\n\n"
      "options:\n"
      "  --configs LIST     tiny, small or both (default tiny,small)\n"
      "  --past LIST        KV-cache lengths, up to 8 (default 16,128,512); past 2047 the models'\n"
      "                     rotary tables get the rows they need (x2 steps, up to 16384)\n"
      "  --rounds N         timed rounds, at least (default 20)\n"
      "  --min-time S       fixed mode: after those rounds, more rounds until the point has taken\n"
      "                     S seconds, to a whole cycle of orders (default 3; 0: exactly --rounds).\n"
      "                     A shared host has slow spells of a fraction of a second: a point\n"
      "                     much shorter than that is measured wholly inside or outside one;\n"
      "                     and small's points need some 60 rounds for their ratios to settle.\n"
      "                     Decode mode runs exactly --rounds (its past lengths must be known).\n"
      "  --steps N          steps per system per round (default 20)\n"
      "  --warmup N         untimed steps per system before each past length (default 200: ONNX\n"
      "                     Runtime's Node path takes a few hundred calls to reach its speed)\n"
      "  --block-warmup N   untimed steps at the start of every block (default 5): the system that\n"
      "                     ran before has taken the caches, and a decode loop that runs alone\n"
      "                     does not pay for that on every step\n"
      "  --systems LIST     which systems run: hybrid, dynamic, reference, ort (the default), and\n"
      "                     control: a second hybrid session, identical to the first, run in\n"
      "                     the same rounds. Its ratio_hybrid_control is what the machine\n"
      "                     alone moves a ratio by (where each session's memory landed, the\n"
      "                     order of the blocks): a hybrid / dynamic ratio that differs from 1\n"
      "                     by less than hybrid / control does is not shown\n"
      "  --no-ort           skip ONNX Runtime (its figures are null, with the reason)\n"
      "  --skip-kernels     the device runs no kernel and no static-model task (launches, argument\n"
      "                     copies, stream order, events and copies as usual): the times are what\n"
      "                     mixrt itself spends per step. Only hybrid and dynamic run (nothing is\n"
      "                     computed, so nothing is compared); not with --mode decode\n"
      "  --no-state         mixrt sessions run by mx_session_run, the caller feeding the pasts and\n"
      "                     taking the presents each step. By default they run a binding with the\n"
      "                     KV cache as session state (include/mixrt/binding.h): loaded from the\n"
      "                     point's pasts, kept on the device; fixed mode rolls it back after each\n"
      "                     step (nothing is copied), decode mode lets it grow\n"
      "  --state-copy       the states take the binding's copying path (two buffers, each step\n"
      "                     writing the whole present into the other one) instead of the append in\n"
      "                     place (one buffer padded to the capacity, only the new rows written)\n"
      "  --no-huge-pages    mixrt's device memory in 4 KiB pages only (by default its blocks of\n"
      "                     1.5 MiB and more, the weights above all, get 2 MiB huge pages)\n"
      "  --processes N      run the whole measurement in N fresh processes, one after another\n"
      "                     (default 1; up to 100), and sum them up: each process's JSON under\n"
      "                     \"runs\"; per point, every process's ratios, their median and the rounds\n"
      "                     compared pooled (\"across_processes\"); the targets take the median over\n"
      "                     processes. Where a process's memory lands on a shared host moves a\n"
      "                     memory-bound step by several percent, once per process: rounds cannot\n"
      "                     even that out, more processes can. With --table, each figure of the\n"
      "                     table is its median over the processes\n"
      "  --results FILE     write this process's figures to FILE (binary; what each process of\n"
      "                     --processes does)\n"
      "  --mode fixed       every timed step runs on the same inputs (default)\n"
      "  --mode decode      every system decodes greedily from the point's inputs, its presents\n"
      "                     becoming its pasts, so no two timed steps have the same shapes: the\n"
      "                     past length grows by one per step over the rounds (the JSON gives the\n"
      "                     range; give fewer rounds and steps, e.g. --rounds 5 --steps 10); the\n"
      "                     warm-up decodes too, then every system starts again from the inputs\n"
      "  --io device        mixrt sessions read inputs from and write outputs into device buffers\n"
      "                     prepared before the timed call, zero copy (default)\n"
      "  --io host          host inputs; outputs allocated by the session as host tensors\n"
      "  --device D         mixrt device: inline (default: on one stream the work runs in the\n"
      "                     calling thread, measured faster than a worker thread on 2 cores) or cpu\n"
      "  --streams N        mixrt streams (default 1)\n"
      "  --executor E       sequential (default), topological or multi-thread\n"
      "  --node PATH        the Node.js program (default: node, found in PATH)\n"
      "  --peers DIR        the folder holding ort_runner.js and node_modules (default:\n"
      "                     $MIXRT_PEERS_DIR when set, else bench/peers of the source tree)\n"
      "  --work-dir DIR     write the ONNX and .npy files there and keep them (default: a temporary\n"
      "                     folder, removed at the end)\n"
      "  --identity-runs N  calls timed on the Identity model (default 2000)\n"
      "  --table FILE       also write the latencies as a gnuplot data file: one block per\n"
      "                     configuration (index 0 tiny, 1 small, as run), a row per past length:\n"
      "                     past, then median, p10, p90 of hybrid, dynamic, reference, ort in us\n"
      "                     (? when not measured); bench/plot/llm_latency.gp plots it\n\n"
      "ONNX Runtime comes from the npm package onnxruntime-node: `make bench-deps` installs it.\n"
      "exit codes: 0 measured, 1 runtime error (a system failed or gave outputs of another shape),\n"
      "2 usage error\n");
}

/* Parses a comma-separated list of positive numbers into v[0..cap). */
static bool parse_list(const char *text, int64_t *v, size_t cap, size_t *n) {
  char buf[256];
  snprintf(buf, sizeof buf, "%s", text);
  *n = 0;
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (*n == cap || !mx_cli_parse_int(tok, &v[*n]) || v[*n] < 0 || v[*n] > 100000) return false;
    (*n)++;
  }
  return *n > 0;
}

/* Parses a comma-separated list of names into sel[0..count). */
static bool parse_names(const char *text, const char *const *names, size_t count, bool *sel) {
  char buf[256];
  snprintf(buf, sizeof buf, "%s", text);
  memset(sel, 0, count * sizeof *sel);
  bool any = false;
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    size_t k = 0;
    while (k < count && strcmp(names[k], tok) != 0) k++;
    if (k == count) return false;
    sel[k] = any = true;
  }
  return any;
}

/* The defaults of every option. */
static void set_defaults(llm_args *a) {
  memset(a, 0, sizeof *a);
  a->configs[0] = a->configs[1] = true;
  a->past[0] = 16, a->past[1] = 128, a->past[2] = 512, a->n_past = 3;
  a->rounds = 20, a->min_time = 3.0, a->steps = 20, a->warmup = 200, a->block_warmup = 5,
  a->identity_runs = 2000;
  a->processes = 1;
  for (int s = 0; s < SYS_COUNT; s++) a->systems[s] = s != SYS_CONTROL;
  a->device = MX_DEVICE_INLINE;
  a->device_io = true;
  a->streams = 1;
  a->executor = MX_EXECUTOR_SEQUENTIAL;
  a->node = "node";
}

/* Option arg with its value v into *a (*systems_given: --systems was given). */
static int parse_value(const char *arg, const char *v, llm_args *a, bool *systems_given) {
  int64_t x = 0;
  const bool zero_ok = strcmp(arg, "--warmup") == 0 || strcmp(arg, "--block-warmup") == 0;
  bool numeric = zero_ok || strcmp(arg, "--rounds") == 0 || strcmp(arg, "--steps") == 0 ||
                 strcmp(arg, "--streams") == 0 || strcmp(arg, "--identity-runs") == 0 ||
                 strcmp(arg, "--processes") == 0;
  if (numeric) {
    int64_t min = zero_ok ? 0 : 1;
    if (!mx_cli_parse_int(v, &x) || x < min || x > 1000000)
      return mx_cli_usage_error(CMD, "%s needs a whole number >= %lld, not '%s'", arg, (long long)min, v);
  }
  if (strcmp(arg, "--configs") == 0) {
    if (!parse_names(v, config_names, N_CONFIGS, a->configs))
      return mx_cli_usage_error(CMD, "--configs takes tiny, small or tiny,small, not '%s'", v);
  } else if (strcmp(arg, "--past") == 0) {
    if (!parse_list(v, a->past, MAX_PAST, &a->n_past))
      return mx_cli_usage_error(CMD, "--past takes up to %d lengths 0..100000 separated by commas, not '%s'",
                                MAX_PAST, v);
  } else if (strcmp(arg, "--systems") == 0) {
    *systems_given = true;
    if (!parse_names(v, sys_names, SYS_COUNT, a->systems))
      return mx_cli_usage_error(
          CMD, "--systems takes hybrid, dynamic, reference, ort, control separated by commas, not '%s'", v);
  } else if (strcmp(arg, "--rounds") == 0) {
    a->rounds = x;
  } else if (strcmp(arg, "--min-time") == 0) {
    char *end = NULL;
    errno = 0;
    double t = strtod(v, &end);
    if (errno || end == v || *end || !(t >= 0.0 && t <= 3600.0))
      return mx_cli_usage_error(CMD, "--min-time needs seconds from 0 to 3600, not '%s'", v);
    a->min_time = t;
  } else if (strcmp(arg, "--steps") == 0) {
    a->steps = x;
  } else if (strcmp(arg, "--warmup") == 0) {
    a->warmup = x;
  } else if (strcmp(arg, "--block-warmup") == 0) {
    a->block_warmup = x;
  } else if (strcmp(arg, "--identity-runs") == 0) {
    a->identity_runs = x;
  } else if (strcmp(arg, "--streams") == 0) {
    if (x > 64) return mx_cli_usage_error(CMD, "--streams must be 1..64");
    a->streams = x;
  } else if (strcmp(arg, "--device") == 0) {
    if (!mx_cli_parse_device(v, &a->device))
      return mx_cli_usage_error(CMD, "unknown device '%s' (cpu or inline)", v);
  } else if (strcmp(arg, "--executor") == 0) {
    if (!mx_cli_parse_executor(v, &a->executor))
      return mx_cli_usage_error(CMD, "unknown executor '%s' (sequential, topological or multi-thread)", v);
  } else if (strcmp(arg, "--mode") == 0) {
    if (strcmp(v, "fixed") != 0 && strcmp(v, "decode") != 0)
      return mx_cli_usage_error(CMD, "--mode takes fixed or decode, not '%s'", v);
    a->decode = v[0] == 'd';
  } else if (strcmp(arg, "--io") == 0) {
    if (strcmp(v, "host") != 0 && strcmp(v, "device") != 0)
      return mx_cli_usage_error(CMD, "--io takes host or device, not '%s'", v);
    a->device_io = v[0] == 'd';
  } else if (strcmp(arg, "--node") == 0) {
    a->node = v;
  } else if (strcmp(arg, "--table") == 0) {
    a->table = v;
  } else if (strcmp(arg, "--processes") == 0) {
    if (x > 100) return mx_cli_usage_error(CMD, "--processes must be 1..100");
    a->processes = x;
  } else if (strcmp(arg, "--results") == 0) {
    a->results = v;
  } else if (strcmp(arg, "--peers") == 0) {
    a->peers_dir = v;
  } else {
    a->work_dir = v;
  }
  return MX_EXIT_OK;
}

/* The choices that make no sense together, or that the models cannot run. */
/* Rows of the rotary tables the models may get (the generator allows more; the tables cost
 * max_pos x head_dim floats each). */
#define MAX_ROTARY_ROWS 16384

/* The largest position a point of past length `past` reaches (decode mode grows it). */
static int64_t last_position(const llm_args *a, int64_t past) {
  const int64_t timed = a->rounds * (a->block_warmup + a->steps);
  int64_t grown = a->warmup > timed ? a->warmup : timed;
  return past + (a->decode ? grown - 1 : 0);
}

static int check_choices(llm_args *a, bool systems_given) {
  if (a->skip_kernels) {
    /* Only the mixrt sessions run on the device; their outputs are not computed, so nothing is
     * compared and no step may depend on a previous one's values. */
    if (a->systems[SYS_REFERENCE] || a->systems[SYS_ORT]) {
      if (!systems_given)
        a->systems[SYS_REFERENCE] = a->systems[SYS_ORT] = false;
      else
        return mx_cli_usage_error(CMD,
                                  "--skip-kernels measures mixrt's own cost: --systems may name only hybrid, "
                                  "dynamic and control");
    }
    if (a->decode)
      return mx_cli_usage_error(CMD,
                                "--skip-kernels runs no kernel: --mode decode has no values to feed back");
  }
  if (a->processes > 1 && a->results)
    return mx_cli_usage_error(CMD, "--results is what each process of --processes writes: not both");
  mx_llama_config cfg;
  mx_cli_llm_size("tiny", &cfg);
  cfg.max_pos = MAX_ROTARY_ROWS;
  for (size_t k = 0; k < a->n_past; k++) {
    int64_t last = last_position(a, a->past[k]);
    if (last >= cfg.max_pos)
      return mx_cli_usage_error(CMD, "past length %lld%s exceeds the models' rotary table (%lld positions)",
                                (long long)last, a->decode ? " (reached in decode mode)" : "",
                                (long long)cfg.max_pos);
  }
  return MX_EXIT_OK;
}

int64_t mx__llm_rotary_rows(const llm_args *a, int64_t preset) {
  int64_t rows = preset;
  for (size_t k = 0; k < a->n_past; k++)
    while (last_position(a, a->past[k]) >= rows && rows < MAX_ROTARY_ROWS) rows *= 2;
  return rows < MAX_ROTARY_ROWS ? rows : MAX_ROTARY_ROWS;
}

int mx__llm_parse_args(int argc, char **argv, llm_args *a) {
  set_defaults(a);
  bool systems_given = false;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (strcmp(arg, "--no-ort") == 0) {
      a->no_ort = true;
      continue;
    }
    if (strcmp(arg, "--skip-kernels") == 0) {
      a->skip_kernels = true;
      continue;
    }
    if (strcmp(arg, "--no-huge-pages") == 0) {
      a->no_huge_pages = true;
      continue;
    }
    if (strcmp(arg, "--no-state") == 0) {
      a->no_state = true;
      continue;
    }
    if (strcmp(arg, "--state-copy") == 0) {
      a->state_copy = true;
      continue;
    }
    static const char *const valued[] = {"--configs",       "--past",    "--rounds",       "--min-time",
                                         "--steps",         "--warmup",  "--block-warmup", "--systems",
                                         "--device",        "--streams", "--executor",     "--io",
                                         "--mode",          "--node",    "--peers",        "--work-dir",
                                         "--identity-runs", "--table",   "--processes",    "--results"};
    size_t k = 0;
    while (k < sizeof valued / sizeof valued[0] && strcmp(arg, valued[k]) != 0) k++;
    if (k == sizeof valued / sizeof valued[0]) return mx_cli_usage_error(CMD, "unknown option '%s'", arg);
    const char *v = mx_cli_option_value(CMD, argc, argv, &i);
    if (!v) return MX_EXIT_USAGE;
    int rc = parse_value(arg, v, a, &systems_given);
    if (rc != MX_EXIT_OK) return rc;
  }
  return check_choices(a, systems_given);
}

const char *mx__llm_no_ort_reason(const llm_args *a) {
  if (a->no_ort) return "--no-ort was given";
  if (a->skip_kernels) return "--skip-kernels: mixrt's own cost only";
  if (!a->systems[SYS_ORT]) return "ort is not among --systems";
  return NULL;
}
