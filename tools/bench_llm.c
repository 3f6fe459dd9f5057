/* `mixrt bench llm`: decode-step latency of the Llama-style decode model (mx_model_llama) at
 * several KV-cache lengths, for mixrt hybrid (static models + dynamic ops), mixrt all-dynamic
 * (static_min_ops -1), the mixrt reference interpreter, and ONNX Runtime.
 *
 * Each configuration is written once as an ONNX file (mx_onnx_save_file) into a work directory;
 * every system loads that same file and gets the same inputs (token 7, seeded random past keys
 * and values of the chosen length). Every system first runs the step once for the correctness
 * comparison (outputs against ONNX Runtime's, and hybrid / all-dynamic against the reference
 * interpreter bit for bit), then warm-up steps, then the timed rounds: in each round every
 * system runs its block of steps (a few untimed steps first), in an order that changes from
 * round to round (round_position), so slow drifts of the machine hit every system alike, and
 * each round's blocks are also compared pairwise (rounds_compared). A sample is the wall time
 * of one step as its caller sees it: around mx_session_run (inputs and outputs in device
 * buffers prepared beforehand, or host tensors with --io host) or mx_reference_run for mixrt,
 * around `await session.run(feeds)` inside the Node process for ONNX Runtime. Every timed step repeats the same inputs (--mode
 * fixed), or each system decodes from them, feeding its presents back (--mode decode).
 *
 * ONNX Runtime runs in a persistent Node process (bench/peers/ort_runner.js, package
 * onnxruntime-node installed by `make bench-deps`) spoken to over pipes: one request line, one
 * reply line; tensors go through .npy files in the work directory. The binding's own per-call
 * cost is measured on an Identity model of one float, beside mixrt's session on the same model.
 * Without node or the package, or with --no-ort, the ONNX Runtime figures are null and the JSON
 * says why. The result is one JSON object on stdout. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/json.h"
#include "common/clock.h"
#include "mixrt/onnx.h"
#include "mixrt/partition.h"
#include "mixrt/reference.h"
#include "tools/bench.h"
#include "tools/bench_llm.h"
#include "tools/sysmem.h"

/* The ONNX Runtime peer process. */
typedef struct peer {
  pid_t pid;                     /* the node process, or -1 when the peer is not running */
  FILE *to, *from;               /* its stdin / stdout */
  char *line;                    /* the last reply line (getline buffer, owned) */
  size_t line_cap;
  char version[64];              /* onnxruntime-node version */
  char node_version[64];
  char reason[512];              /* why ONNX Runtime is not measured (pid < 0) */
} peer;

/* --- options ---------------------------------------------------------------------------------- */

void mx_bench_llm_help(FILE *out) {
  fprintf(out,
          "usage: mixrt bench llm [--configs tiny,small] [--past 16,128,512] [--rounds N] [--min-time S]\n"
          "                       [--steps N] [--warmup N] [--block-warmup N]\n"
          "                       [--systems hybrid,dynamic,reference,ort,control] [--no-ort] [--skip-kernels]\n"
          "                       [--no-huge-pages] [--processes N]\n"
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
          "  --past LIST        KV-cache lengths, up to 8 (default 16,128,512)\n"
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

static int parse_args(int argc, char **argv, llm_args *a) {
  memset(a, 0, sizeof *a);
  a->configs[0] = a->configs[1] = true;
  a->past[0] = 16, a->past[1] = 128, a->past[2] = 512, a->n_past = 3;
  a->rounds = 20, a->min_time = 3.0, a->steps = 20, a->warmup = 200, a->block_warmup = 5, a->identity_runs = 2000;
  a->processes = 1;
  for (int s = 0; s < SYS_COUNT; s++) a->systems[s] = s != SYS_CONTROL;
  a->device = MX_DEVICE_INLINE;
  a->device_io = true;
  a->streams = 1;
  a->executor = MX_EXECUTOR_SEQUENTIAL;
  a->node = "node";
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
    static const char *const valued[] = {"--configs",  "--past",     "--rounds",        "--min-time", "--steps",
                                         "--warmup",   "--block-warmup", "--systems",   "--device",   "--streams",
                                         "--executor", "--io",       "--mode",          "--node",     "--peers",
                                         "--work-dir", "--identity-runs", "--table", "--processes", "--results"};
    size_t k = 0;
    while (k < sizeof valued / sizeof valued[0] && strcmp(arg, valued[k]) != 0) k++;
    if (k == sizeof valued / sizeof valued[0]) return mx_cli_usage_error(CMD, "unknown option '%s'", arg);
    const char *v = mx_cli_option_value(CMD, argc, argv, &i);
    if (!v) return MX_EXIT_USAGE;
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
      systems_given = true;
      if (!parse_names(v, sys_names, SYS_COUNT, a->systems))
        return mx_cli_usage_error(CMD, "--systems takes hybrid, dynamic, reference, ort, control separated by commas, not '%s'",
                                  v);
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
      if (!mx_cli_parse_device(v, &a->device)) return mx_cli_usage_error(CMD, "unknown device '%s' (cpu or inline)", v);
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
  }
  if (a->skip_kernels) {
    /* Only the mixrt sessions run on the device; their outputs are not computed, so nothing is
     * compared and no step may depend on a previous one's values. */
    if (a->systems[SYS_REFERENCE] || a->systems[SYS_ORT]) {
      if (!systems_given)
        a->systems[SYS_REFERENCE] = a->systems[SYS_ORT] = false;
      else
        return mx_cli_usage_error(CMD, "--skip-kernels measures mixrt's own cost: --systems may name only hybrid, "
                                       "dynamic and control");
    }
    if (a->decode)
      return mx_cli_usage_error(CMD, "--skip-kernels runs no kernel: --mode decode has no values to feed back");
  }
  if (a->processes > 1 && a->results)
    return mx_cli_usage_error(CMD, "--results is what each process of --processes writes: not both");
  mx_llama_config cfg;
  mx_cli_llm_size("tiny", &cfg);
  for (size_t k = 0; k < a->n_past; k++) {
    const int64_t timed = a->rounds * (a->block_warmup + a->steps);
    int64_t grown = a->warmup > timed ? a->warmup : timed;
    int64_t last = a->past[k] + (a->decode ? grown - 1 : 0);
    if (last >= cfg.max_pos)
      return mx_cli_usage_error(CMD, "past length %lld%s exceeds the models' rotary table (%lld positions)",
                                (long long)last, a->decode ? " (reached in decode mode)" : "",
                                (long long)cfg.max_pos);
  }
  return MX_EXIT_OK;
}

/* --- the ONNX Runtime peer -------------------------------------------------------------------- */

/* Sends one request line and reads the reply into p->line (without its newline). True when
 * the reply starts with "ok"; false on "err ..." or when the process is gone (p->line then
 * holds a message). */
static bool peer_call(peer *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool peer_call(peer *p, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int w = vfprintf(p->to, fmt, ap);
  va_end(ap);
  if (w < 0 || fputc('\n', p->to) == EOF || fflush(p->to) != 0 || getline(&p->line, &p->line_cap, p->from) < 0) {
    free(p->line);
    p->line = strdup("err the ONNX Runtime process stopped answering");
    p->line_cap = p->line ? strlen(p->line) + 1 : 0;
    return false;
  }
  p->line[strcspn(p->line, "\r\n")] = '\0';
  return strncmp(p->line, "ok", 2) == 0 && (p->line[2] == '\0' || p->line[2] == ' ');
}

/* Text after the reply's first word ("" when none). */
static const char *reply_rest(const peer *p) {
  const char *sp = p->line ? strchr(p->line, ' ') : NULL;
  return sp ? sp + 1 : "";
}

static void peer_stop(peer *p) {
  if (p->to) {
    fputs("quit\n", p->to);
    fclose(p->to);
  }
  if (p->from) fclose(p->from);
  if (p->pid > 0) waitpid(p->pid, NULL, 0);
  free(p->line);
  p->to = p->from = NULL;
  p->line = NULL;
  p->pid = -1;
}

/* Finds bench/peers: --peers, $MIXRT_PEERS_DIR, or the folder next to this source file's
 * tools/ folder (the build records the source path). */
static void peers_dir(const llm_args *a, char *buf, size_t cap) {
  const char *env = getenv("MIXRT_PEERS_DIR");
  if (a->peers_dir) {
    snprintf(buf, cap, "%s", a->peers_dir);
  } else if (env && *env) {
    snprintf(buf, cap, "%s", env);
  } else {
    char src[1024];
    snprintf(src, sizeof src, "%s", __FILE__);
    char *slash = strrchr(src, '/');
    if (slash) *slash = '\0';
    slash = strrchr(src, '/');
    if (slash) {
      *slash = '\0';
      snprintf(buf, cap, "%s/bench/peers", src);
    } else {
      snprintf(buf, cap, "bench/peers");
    }
  }
}

/* Starts the Node process and waits for its "ready" line. On failure p->pid is -1 and
 * p->reason says why (the benchmark then runs without ONNX Runtime). */
static void peer_start(const llm_args *a, peer *p) {
  char dir[1024], script[1100], modules[1100];
  int in[2] = {-1, -1}, out[2] = {-1, -1}; /* pipe ends not yet handed to a FILE or the child */
  peers_dir(a, dir, sizeof dir);
  snprintf(script, sizeof script, "%s/ort_runner.js", dir);
  snprintf(modules, sizeof modules, "%s/node_modules/onnxruntime-node/package.json", dir);
  if (access(script, R_OK) != 0) {
    snprintf(p->reason, sizeof p->reason, "%s not found (give --peers DIR)", script);
    return;
  }
  if (access(modules, R_OK) != 0) {
    snprintf(p->reason, sizeof p->reason, "onnxruntime-node is not installed in %s (run make bench-deps)", dir);
    return;
  }
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) {
    snprintf(p->reason, sizeof p->reason, "pipe: %s", strerror(errno));
    goto fail;
  }
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(in[0], STDIN_FILENO);
    dup2(out[1], STDOUT_FILENO);
    execlp(a->node, a->node, script, (char *)NULL);
    fprintf(stderr, "mixrt bench llm: cannot run %s: %s\n", a->node, strerror(errno));
    _exit(127);
  }
  if (pid < 0) {
    snprintf(p->reason, sizeof p->reason, "fork: %s", strerror(errno));
    goto fail;
  }
  p->pid = pid;
  close(in[0]);
  close(out[1]);
  in[0] = out[1] = -1;
  if (!(p->to = fdopen(in[1], "w"))) {
    snprintf(p->reason, sizeof p->reason, "fdopen: %s", strerror(errno));
    goto fail;
  }
  in[1] = -1;
  if (!(p->from = fdopen(out[0], "r"))) {
    snprintf(p->reason, sizeof p->reason, "fdopen: %s", strerror(errno));
    goto fail;
  }
  out[0] = -1;
  ssize_t got = getline(&p->line, &p->line_cap, p->from);
  if (got < 0 || strncmp(p->line, "ready ", 6) != 0) {
    if (p->line && got < 0) p->line[0] = '\0'; /* nothing was read: the buffer holds no string */
    if (p->line) p->line[strcspn(p->line, "\r\n")] = '\0';
    snprintf(p->reason, sizeof p->reason, "%s did not start the ONNX Runtime peer%s%s", a->node,
             p->line && *p->line ? ": " : " (is Node.js installed? run make bench-deps)", p->line ? p->line : "");
    goto fail;
  }
  if (sscanf(p->line + 6, "%63s %63s", p->version, p->node_version) != 2) snprintf(p->version, sizeof p->version, "?");
  return;
fail:
  /* Raw pipe ends first, so a started child sees end-of-file and exits before it is waited for. */
  for (int k = 0; k < 2; k++) {
    if (in[k] >= 0) close(in[k]);
    if (out[k] >= 0) close(out[k]);
  }
  peer_stop(p);
}

/* Parses the times of a "run" reply (ns): the first `skip` are passed over (untimed warm-up),
 * the next n go to samples[0..n). False when fewer came back. */
static bool parse_times(const peer *p, int64_t skip, uint64_t *samples, int64_t n) {
  const char *s = reply_rest(p);
  for (int64_t k = -skip; k < n; k++) {
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s) return false;
    if (k >= 0) samples[k] = v;
    s = end;
  }
  return true;
}

/* --- files ------------------------------------------------------------------------------------ */

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(path);
}

void mx_cli_remove_tree(const char *dir) { nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS); }

/* Writes in[0..n) as DIR/<name>.npy, named after the session's inputs. */
static mx_status write_inputs(mx_session *s, const char *dir, const mx_tensor *in, size_t n, mx_error *err) {
  if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
    snprintf(err->message, sizeof err->message, "cannot create %s: %s", dir, strerror(errno));
    return MX_ERR_IO;
  }
  for (size_t i = 0; i < n; i++) {
    mx_io_info info;
    mx_session_input_info(s, i, &info);
    char path[1200];
    snprintf(path, sizeof path, "%s/%s.npy", dir, info.name);
    mx_status st = mx_tensor_save_npy(path, &in[i], err);
    if (st != MX_OK) return st;
  }
  return MX_OK;
}

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
  mx_node_desc d = {.op_type = "Identity", .name = "identity", .inputs = &x, .n_inputs = 1, .output_names = out_names,
                    .n_outputs = 1};
  if ((st = mx_graph_add_input(g, "x", MX_FLOAT32, &shape, &x)) != MX_OK || (st = mx_graph_add_node(g, &d, &y)) != MX_OK ||
      (st = mx_graph_add_output(g, y)) != MX_OK || (st = mx_graph_infer(g)) != MX_OK) {
    snprintf(err->message, sizeof err->message, "building the Identity model: %s", mx_graph_last_error(g));
    goto destroy_graph;
  }
  st = mx_onnx_save_file(g, path, err);
destroy_graph:
  mx_graph_destroy(g);
  return st;
}

/* --- measuring -------------------------------------------------------------------------------- */

static void releaseall(mx_tensor *t, size_t n) {
  for (size_t k = 0; k < n; k++) mx_tensor_release(&t[k]);
}

/* State shared by the measurement of one configuration. */
typedef struct bench_ctx {
  const llm_args *a;
  peer *p;
  const char *dir;               /* the work directory */
  mx_device *dev;                /* the device both sessions run on (borrowed) */
  mx_session *sessions[SYS_ORT]; /* by system: hybrid, dynamic, control (NULL when not run; the
                                    reference interpreter's slot is always NULL) */
  mx_graph *ref;                 /* the reference interpreter's graph */
  const char *name;              /* configuration name, also the peer's session name */
  bool ort;                      /* ONNX Runtime runs for this configuration */
  bool device_io;                /* sessions read dev_in and write dev_out (--io device) */
  const mx_llama_config *cfg;    /* the configuration measured */
  mx_tensor state[SYS_ORT][MAX_IO]; /* --mode decode: each mixrt system's next inputs (owned; in
                                       device memory for the sessions under --io device) */
  bool state_live[SYS_ORT];      /* state[s] holds tensors */
  mx_tensor dev_in[MAX_IO];      /* device copies of the point's inputs (owned, --io device) */
  mx_tensor dev_out[MAX_IO];     /* device output buffers of the point's shapes (owned) */
} bench_ctx;

/* Frees the device buffers of the point. */
static void free_device_io(bench_ctx *c, size_t n) {
  for (size_t k = 0; k < n; k++) {
    mx_device_free(c->dev, c->dev_in[k].data);
    mx_device_free(c->dev, c->dev_out[k].data);
  }
  memset(c->dev_in, 0, sizeof c->dev_in);
  memset(c->dev_out, 0, sizeof c->dev_out);
}

/* A device tensor of the given type and dims (at least one byte is allocated). */
static mx_status device_tensor(mx_device *dev, mx_dtype dt, int32_t rank, const int64_t *dims, mx_tensor *t) {
  memset(t, 0, sizeof *t);
  t->dtype = dt;
  t->rank = rank;
  memcpy(t->dims, dims, (size_t)rank * sizeof *dims);
  t->placement = MX_DEVICE;
  size_t nbytes;
  if (!mx_tensor_nbytes(t, &nbytes)) return MX_ERR_LIMIT;
  return mx_device_alloc(dev, nbytes ? nbytes : 1, 0, &t->data);
}

/* --io device: uploads the inputs and allocates output buffers of the step's shapes
 * (logits [1, 1, vocab], presents [1, kv_heads, past + 1, head_dim]). */
static mx_status make_device_io(bench_ctx *c, const mx_llama_config *cfg, const mx_tensor *in, size_t n) {
  mx_status st = MX_OK;
  for (size_t k = 0; k < n && st == MX_OK; k++) {
    size_t nbytes = 0;
    mx_tensor_nbytes(&in[k], &nbytes);
    st = device_tensor(c->dev, in[k].dtype, in[k].rank, in[k].dims, &c->dev_in[k]);
    if (st == MX_OK && nbytes) st = mx_device_copy(c->dev, c->dev_in[k].data, in[k].data, nbytes, MX_COPY_H2D);
    if (st != MX_OK) break;
    if (k == 0) {
      st = device_tensor(c->dev, MX_FLOAT32, 3, (const int64_t[]){1, 1, cfg->vocab}, &c->dev_out[0]);
    } else {
      int64_t dims[4] = {1, cfg->kv_heads, in[k].dims[2] + 1, mx_cli_llm_head_dim(cfg)};
      st = device_tensor(c->dev, MX_FLOAT32, 4, dims, &c->dev_out[k]);
    }
  }
  if (st != MX_OK) free_device_io(c, n);
  return st;
}

/* Runs one step of mixrt system sys. Host I/O (and the reference interpreter): out receives
 * host tensors the caller releases. Device I/O: the session reads c->dev_in and writes
 * c->dev_out; out receives host copies only when `download` is set (else it is left empty). */
static mx_status run_mixrt(bench_ctx *c, int sys, const mx_tensor *in, size_t n, mx_tensor *out, bool download,
                           char *why, size_t cap) {
  memset(out, 0, n * sizeof *out);
  mx_status st;
  if (sys == SYS_REFERENCE) {
    mx_error err;
    st = mx_reference_run(c->ref, in, n, out, n, &err);
    if (st != MX_OK) snprintf(why, cap, "reference: %s", err.message);
    return st;
  }
  mx_session *s = c->sessions[sys];
  st = c->device_io ? mx_session_run(s, c->dev_in, n, c->dev_out, n) : mx_session_run(s, in, n, out, n);
  if (st != MX_OK) {
    snprintf(why, cap, "%s: %s", sys_names[sys], mx_session_last_error(s));
    releaseall(out, n);
    return st;
  }
  for (size_t k = 0; c->device_io && download && k < n && st == MX_OK; k++) {
    const mx_tensor *d = &c->dev_out[k];
    size_t nbytes = 0;
    mx_tensor_nbytes(d, &nbytes);
    st = mx_tensor_alloc(d->dtype, d->rank, d->dims, &out[k]);
    if (st == MX_OK && nbytes) st = mx_device_copy(c->dev, out[k].data, d->data, nbytes, MX_COPY_D2H);
    if (st != MX_OK) {
      snprintf(why, cap, "%s: reading the device outputs: %s", sys_names[sys], mx_status_string(st));
      releaseall(out, n);
    }
  }
  return st;
}

/* Times `count` steps of a mixrt system into samples (ns; NULL: untimed warm-up). */
static mx_status time_mixrt(bench_ctx *c, int sys, const mx_tensor *in, size_t n, int64_t count, uint64_t *samples,
                            char *why, size_t cap) {
  mx_tensor out[MAX_IO];
  for (int64_t k = 0; k < count; k++) {
    uint64_t t0 = mx__now_ns();
    mx_status st = run_mixrt(c, sys, in, n, out, false, why, cap);
    uint64_t t1 = mx__now_ns();
    if (st != MX_OK) return st;
    if (samples) samples[k] = t1 - t0;
    releaseall(out, n);
  }
  return MX_OK;
}

/* True when system sys keeps its decode state in device memory. */
static bool state_on_device(const bench_ctx *c, int sys) { return c->device_io && sys != SYS_REFERENCE; }

/* Frees the decode state of system sys. */
static void state_free(bench_ctx *c, int sys, size_t n) {
  if (!c->state_live[sys]) return;
  for (size_t k = 0; k < n; k++) {
    if (state_on_device(c, sys)) mx_device_free(c->dev, c->state[sys][k].data);
    else mx_tensor_release(&c->state[sys][k]);
  }
  memset(c->state[sys], 0, sizeof c->state[sys]);
  c->state_live[sys] = false;
}

/* --mode decode: system sys starts from a copy of the point's inputs. */
static mx_status state_init(bench_ctx *c, int sys, const mx_tensor *in, size_t n) {
  mx_status st = MX_OK;
  c->state_live[sys] = true;
  for (size_t k = 0; k < n && st == MX_OK; k++) {
    size_t nbytes = 0;
    mx_tensor_nbytes(&in[k], &nbytes);
    mx_tensor *t = &c->state[sys][k];
    if (state_on_device(c, sys)) {
      st = device_tensor(c->dev, in[k].dtype, in[k].rank, in[k].dims, t);
      if (st == MX_OK && nbytes) st = mx_device_copy(c->dev, t->data, in[k].data, nbytes, MX_COPY_H2D);
    } else {
      st = mx_tensor_alloc(in[k].dtype, in[k].rank, in[k].dims, t);
      if (st == MX_OK && nbytes) memcpy(t->data, in[k].data, nbytes);
    }
  }
  if (st != MX_OK) state_free(c, sys, n);
  return st;
}

/* --mode decode: `count` steps of system sys from its state, each timed into samples (NULL:
 * untimed warm-up). After a step the presents become the pasts and the argmax of the logits
 * the token; only the run itself is timed. Under --io device the output buffers of each step
 * are allocated before the timed call and the inputs are freed after it. */
static mx_status decode_steps(bench_ctx *c, int sys, size_t n, int64_t count, uint64_t *samples, char *why,
                              size_t cap) {
  mx_tensor *in = c->state[sys];
  const bool dev = state_on_device(c, sys);
  mx_status st = MX_OK;
  float *logits = malloc((size_t)c->cfg->vocab * sizeof *logits);
  if (!logits) return MX_ERR_OUT_OF_MEMORY;
  for (int64_t k = 0; k < count && st == MX_OK; k++) {
    mx_tensor out[MAX_IO];
    memset(out, 0, sizeof out);
    for (size_t i = 0; dev && i < n && st == MX_OK; i++) {
      int64_t dims[4] = {1, 1, c->cfg->vocab, 0};
      if (i) memcpy(dims, in[i].dims, sizeof dims), dims[2]++;
      st = device_tensor(c->dev, MX_FLOAT32, i ? 4 : 3, dims, &out[i]);
    }
    if (st != MX_OK) {
      snprintf(why, cap, "%s: device output buffers: %s", sys_names[sys], mx_status_string(st));
      for (size_t i = 0; i < n; i++) mx_device_free(c->dev, out[i].data);
      break;
    }
    mx_error err;
    uint64_t t0 = mx__now_ns();
    st = sys == SYS_REFERENCE ? mx_reference_run(c->ref, in, n, out, n, &err)
                              : mx_session_run(c->sessions[sys], in, n, out, n);
    uint64_t t1 = mx__now_ns();
    if (st != MX_OK) {
      snprintf(why, cap, "%s: %s", sys_names[sys],
               sys == SYS_REFERENCE ? err.message : mx_session_last_error(c->sessions[sys]));
      for (size_t i = 0; dev && i < n; i++) mx_device_free(c->dev, out[i].data);
      break;
    }
    if (samples) samples[k] = t1 - t0;
    mx_tensor host_logits = out[0];
    if (dev) {
      host_logits.data = logits;
      host_logits.placement = MX_HOST;
      st = mx_device_copy(c->dev, logits, out[0].data, (size_t)c->cfg->vocab * sizeof *logits, MX_COPY_D2H);
    }
    int64_t token = mx_cli_argmax(&host_logits);
    for (size_t i = 1; i < n; i++) { /* present -> past */
      if (dev) mx_device_free(c->dev, in[i].data);
      else mx_tensor_release(&in[i]);
      in[i] = out[i];
      in[i].name = NULL;
    }
    if (dev) {
      mx_device_free(c->dev, out[0].data);
      if (st == MX_OK) st = mx_device_copy(c->dev, in[0].data, &token, sizeof token, MX_COPY_H2D);
    } else {
      mx_tensor_release(&out[0]);
      ((int64_t *)in[0].data)[0] = token;
    }
    if (st != MX_OK) snprintf(why, cap, "%s: reading the logits: %s", sys_names[sys], mx_status_string(st));
  }
  free(logits);
  return st;
}

/* One timed block of a mixrt system: the fixed step repeated, or decode steps. */
static mx_status run_block(bench_ctx *c, int sys, const mx_tensor *in, size_t n, int64_t count, uint64_t *samples,
                           char *why, size_t cap) {
  if (c->a->decode) return decode_steps(c, sys, n, count, samples, why, cap);
  return time_mixrt(c, sys, in, n, count, samples, why, cap);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double mx_cli_median(const double *v, size_t n) {
  double *s = malloc((n ? n : 1) * sizeof *s);
  if (!s) return NAN;
  size_t m = 0;
  for (size_t i = 0; i < n; i++)
    if (isfinite(v[i])) s[m++] = v[i];
  qsort(s, m, sizeof *s, cmp_double);
  double r = m == 0 ? NAN : m % 2 ? s[m / 2] : (s[m / 2 - 1] + s[m / 2]) / 2;
  free(s);
  return r;
}

/* Which of the n systems runs k-th in round r. The rounds cycle through the rows of a Williams
 * square (and, for odd n, their reverses): every system runs at every position equally often,
 * and right after every other system equally often. A plain rotation would always put a system
 * after the same one, so whatever that one leaves behind in the caches and predictors (ONNX
 * Runtime's process, or the session sharing its inputs) would fall on it every round. */
static int round_position(int64_t r, int k, int n) {
  const int64_t rows = n % 2 ? 2 * (int64_t)n : n;
  int64_t row = r % rows;
  if (row >= n) { /* odd n: the second half reverses the first */
    row -= n;
    k = n - 1 - k;
  }
  /* Offsets 0, 1, n - 1, 2, n - 2, ... */
  int w = k % 2 ? (k + 1) / 2 : (n - k / 2) % n;
  return (int)((row + w) % n);
}

/* Whether round r (past --rounds) should run: in fixed mode while the point has taken less than
 * --min-time, and then on to the end of the cycle of orders, so every order runs equally often. */
static bool more_rounds(const llm_args *a, int64_t r, int n_sys, uint64_t t_start) {
  if (a->decode || a->min_time <= 0.0) return false;
  const int64_t cycle = n_sys % 2 ? 2 * (int64_t)n_sys : n_sys;
  if (r % cycle != 0) return true;
  return (double)(mx__now_ns() - t_start) * 1e-9 < a->min_time;
}

/* Doubles the rounds every system's sample array holds. */
static bool grow_samples(uint64_t *samples[SYS_COUNT], int64_t *cap_rounds, int64_t steps) {
  int64_t cap = *cap_rounds * 2;
  for (int s = 0; s < SYS_COUNT; s++) {
    if (!samples[s]) continue;
    uint64_t *p = realloc(samples[s], (size_t)(cap * steps) * sizeof *p);
    if (!p) return false;
    samples[s] = p;
  }
  *cap_rounds = cap;
  return true;
}

/* Median of one block of samples, left in place (the quantile helper sorts). */
static double block_median(const uint64_t *block, int64_t steps, uint64_t *scratch) {
  memcpy(scratch, block, (size_t)steps * sizeof *block);
  return (double)mx_cli_quantile(scratch, (size_t)steps, 0.5);
}

double mx_cli_llm_sign_test(int64_t k, int64_t n) {
  if (n <= 0) return 1.0;
  int64_t lo = k < n - k ? k : n - k;
  double tail = 0.0;
  for (int64_t i = 0; i <= lo; i++)
    tail += exp(lgamma((double)n + 1) - lgamma((double)i + 1) - lgamma((double)(n - i) + 1) - (double)n * log(2.0));
  double p = 2.0 * tail;
  return p < 1.0 ? p : 1.0;
}

/* Compares the hybrid's block with the other system's block of the same round, round by round.
 * Without the scratch memory it reports nothing rather than fail the benchmark. */
static round_pairs compare_rounds(const uint64_t *hybrid, const uint64_t *other, int64_t rounds, int64_t steps) {
  round_pairs rp = {0};
  uint64_t *scratch = malloc((size_t)steps * sizeof *scratch);
  double *ratio = malloc((size_t)rounds * sizeof *ratio);
  if (scratch && ratio) {
    for (int64_t r = 0; r < rounds; r++) {
      double h = block_median(hybrid + r * steps, steps, scratch);
      double o = block_median(other + r * steps, steps, scratch);
      ratio[r] = o > 0 ? h / o : 1.0;
      if (h < o) rp.hybrid_faster++;
    }
    rp.median_ratio = mx_cli_median(ratio, (size_t)rounds);
    rp.rounds = rounds;
    rp.sign_test_p = mx_cli_llm_sign_test(rp.hybrid_faster, rounds);
    rp.have = true;
  }
  free(scratch);
  free(ratio);
  return rp;
}

static timing summarize(uint64_t *samples, size_t n) {
  timing t = {.have = n > 0, .samples = n};
  t.median = (double)mx_cli_quantile(samples, n, 0.5) / 1e3;
  t.p10 = (double)mx_cli_quantile(samples, n, 0.1) / 1e3;
  t.p90 = (double)mx_cli_quantile(samples, n, 0.9) / 1e3;
  return t;
}

/* Largest |a - b| and largest |b| over a pair of float tensors of the same shape. */
static bool tensor_diff(const mx_tensor *a, const mx_tensor *b, double *max_abs, double *max_mag) {
  if (a->dtype != MX_FLOAT32 || b->dtype != MX_FLOAT32 || a->rank != b->rank) return false;
  for (int32_t d = 0; d < a->rank; d++)
    if (a->dims[d] != b->dims[d]) return false;
  int64_t n = 0;
  mx_tensor_numel(a, &n);
  const float *x = a->data, *y = b->data;
  for (int64_t k = 0; k < n; k++) {
    double e = fabs((double)x[k] - (double)y[k]), m = fabs((double)y[k]);
    if (e > *max_abs || isnan(e)) *max_abs = isnan(e) ? INFINITY : e;
    if (m > *max_mag) *max_mag = m;
  }
  return true;
}

/* Compares out[0..n) (logits first, then presents) with ONNX Runtime's. */
static bool compare(const mx_tensor *out, const mx_tensor *ort, size_t n, diff *d) {
  double la = 0, lm = 0, pa = 0, pm = 0;
  if (!tensor_diff(&out[0], &ort[0], &la, &lm)) return false;
  for (size_t k = 1; k < n; k++)
    if (!tensor_diff(&out[k], &ort[k], &pa, &pm)) return false;
  d->have = true;
  d->logits_abs = la;
  d->logits_rel = lm > 0 ? la / lm : la;
  d->present_abs = pa;
  d->present_rel = pm > 0 ? pa / pm : pa;
  return true;
}


/* Correctness: one step of every system on `in`, compared. */
static int check_point(bench_ctx *c, const mx_tensor *in, size_t n, point *pt) {
  mx_tensor outs[SYS_ORT][MAX_IO], ort[MAX_IO];
  bool have[SYS_ORT] = {false};
  char why[600];
  int rc = MX_EXIT_OK;
  memset(ort, 0, sizeof ort);
  for (int s = 0; s < SYS_ORT; s++) {
    if (!c->a->systems[s]) continue;
    if (run_mixrt(c, s, in, n, outs[s], true, why, sizeof why) != MX_OK) {
      rc = mx_cli_runtime_error(CMD, "%s past %lld: %s", c->name, (long long)pt->past, why);
      goto release;
    }
    have[s] = true;
  }
  if (c->ort) {
    char dir[1200];
    snprintf(dir, sizeof dir, "%s/%s-%lld-ort", c->dir, c->name, (long long)pt->past);
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
      rc = mx_cli_runtime_error(CMD, "cannot create %s: %s", dir, strerror(errno));
      goto release;
    }
    if (!peer_call(c->p, "save %s %s", c->name, dir)) {
      rc = mx_cli_runtime_error(CMD, "ONNX Runtime, %s past %lld: %s", c->name, (long long)pt->past, c->p->line);
      goto release;
    }
    for (size_t k = 0; k < n; k++) {
      mx_io_info info;
      mx_session_output_info(c->sessions[0] ? c->sessions[0] : c->sessions[1], k, &info);
      char path[1300];
      mx_error err;
      snprintf(path, sizeof path, "%s/%s.npy", dir, info.name);
      if (mx_tensor_load_npy(path, &ort[k], &err) != MX_OK) {
        rc = mx_cli_runtime_error(CMD, "reading ONNX Runtime's output: %s", err.message);
        goto release;
      }
    }
    for (int s = 0; s < SYS_ORT; s++) {
      if (have[s] && !compare(outs[s], ort, n, &pt->to_ort[s])) {
        rc = mx_cli_runtime_error(CMD, "%s past %lld: %s gives outputs of another type or shape than ONNX Runtime",
                                  c->name, (long long)pt->past, sys_names[s]);
        goto release;
      }
    }
  }
  for (int s = 0; s < 2; s++) {
    pt->same_as_ref[s] = -1;
    if (!have[s] || !have[SYS_REFERENCE]) continue;
    bool same = true;
    for (size_t k = 0; k < n && same; k++) same = mx_tensor_allclose(&outs[s][k], &outs[SYS_REFERENCE][k], 0, 0, NULL, 0);
    pt->same_as_ref[s] = same;
  }
release:
  for (int s = 0; s < SYS_ORT; s++)
    if (have[s]) releaseall(outs[s], n);
  releaseall(ort, n);
  return rc;
}

/* Measures one past length of one configuration. */
static int measure_point(bench_ctx *c, const mx_llama_config *cfg, point *pt) {
  const llm_args *a = c->a;
  const size_t n = 1 + 2 * (size_t)cfg->layers;
  mx_tensor in[MAX_IO];
  mx_error err;
  char why[600];
  int rc = MX_EXIT_OK;
  uint64_t *samples[SYS_COUNT] = {NULL};
  size_t counts[SYS_COUNT] = {0};
  mx_session_stats before[2] = {{0}}, after = {0};
  mx_status st = mx_cli_llm_inputs(cfg, TOKEN % cfg->vocab, pt->past, 1000 + (uint64_t)pt->past, in);
  if (st != MX_OK) return mx_cli_runtime_error(CMD, "allocating the inputs: %s", mx_status_string(st));
  if (c->device_io && (st = make_device_io(c, cfg, in, n)) != MX_OK) {
    rc = mx_cli_runtime_error(CMD, "device buffers for the inputs and outputs: %s", mx_status_string(st));
    goto release_inputs;
  }
  char in_dir[1200];
  snprintf(in_dir, sizeof in_dir, "%s/%s-%lld-in", c->dir, c->name, (long long)pt->past);
  if (c->ort) {
    if (write_inputs(c->sessions[0] ? c->sessions[0] : c->sessions[1], in_dir, in, n, &err) != MX_OK) {
      rc = mx_cli_runtime_error(CMD, "%s", err.message);
      goto free_device;
    }
    if (!peer_call(c->p, "feed %s %s", c->name, in_dir)) {
      rc = mx_cli_runtime_error(CMD, "ONNX Runtime, %s: %s", c->name, c->p->line);
      goto free_device;
    }
  }
  rc = check_point(c, in, n, pt);
  if (rc != MX_EXIT_OK) goto free_device;
  int order[SYS_COUNT], n_sys = 0;
  int64_t cap_rounds = a->rounds; /* rounds the sample arrays hold; --min-time grows them */
  for (int s = 0; s < SYS_COUNT; s++) {
    bool on = s == SYS_ORT ? c->ort : a->systems[s];
    if (!on) continue;
    order[n_sys++] = s;
    samples[s] = calloc((size_t)(cap_rounds * a->steps), sizeof **samples);
    if (!samples[s]) {
      rc = mx_cli_runtime_error(CMD, "out of memory");
      goto free_samples;
    }
    if (s != SYS_ORT && a->decode && (st = state_init(c, s, in, n)) != MX_OK) {
      rc = mx_cli_runtime_error(CMD, "%s: the decode state: %s", sys_names[s], mx_status_string(st));
      goto free_samples;
    }
    if (s != SYS_ORT && run_block(c, s, in, n, a->warmup, NULL, why, sizeof why) != MX_OK) {
      rc = mx_cli_runtime_error(CMD, "%s past %lld: %s", c->name, (long long)pt->past, why);
      goto free_samples;
    }
    if (s == SYS_ORT && a->warmup &&
        !peer_call(c->p, "%s %s %lld", a->decode ? "decode" : "run", c->name, (long long)a->warmup)) {
      rc = mx_cli_runtime_error(CMD, "ONNX Runtime, %s: %s", c->name, c->p->line);
      goto free_samples;
    }
    /* Decode mode: the timed steps start again from the point's inputs. */
    if (s != SYS_ORT && a->decode) {
      state_free(c, s, n);
      if ((st = state_init(c, s, in, n)) != MX_OK) {
        rc = mx_cli_runtime_error(CMD, "%s: the decode state: %s", sys_names[s], mx_status_string(st));
        goto free_samples;
      }
    }
    if (s == SYS_ORT && a->decode && !peer_call(c->p, "feed %s %s", c->name, in_dir)) {
      rc = mx_cli_runtime_error(CMD, "ONNX Runtime, %s: %s", c->name, c->p->line);
      goto free_samples;
    }
  }
  for (int s = 0; s < 2; s++)
    if (c->sessions[s]) mx_session_get_stats(c->sessions[s], NULL, &before[s]);
  uint64_t session_steps[2] = {0, 0};
  const uint64_t t_start = mx__now_ns();
  int64_t r = 0;
  for (; r < a->rounds || more_rounds(a, r, n_sys, t_start); r++) {
    if (r == cap_rounds && !grow_samples(samples, &cap_rounds, a->steps)) {
      rc = mx_cli_runtime_error(CMD, "out of memory");
      goto free_samples;
    }
    for (int k = 0; k < n_sys; k++) {
      int s = order[round_position(r, k, n_sys)];
      uint64_t *dst = samples[s] + counts[s];
      if (s == SYS_ORT) {
        if (!peer_call(c->p, "%s %s %lld", a->decode ? "decode" : "run", c->name,
                       (long long)(a->block_warmup + a->steps)) ||
            !parse_times(c->p, a->block_warmup, dst, a->steps)) {
          rc = mx_cli_runtime_error(CMD, "ONNX Runtime, %s: %s", c->name, c->p->line);
          goto free_samples;
        }
      } else if ((a->block_warmup && run_block(c, s, in, n, a->block_warmup, NULL, why, sizeof why) != MX_OK) ||
                 run_block(c, s, in, n, a->steps, dst, why, sizeof why) != MX_OK) {
        rc = mx_cli_runtime_error(CMD, "%s past %lld: %s", c->name, (long long)pt->past, why);
        goto free_samples;
      }
      if (s == SYS_HYBRID || s == SYS_DYNAMIC) /* the stats count warm-up steps too */
        session_steps[s == SYS_DYNAMIC] += (uint64_t)(a->block_warmup + a->steps);
      counts[s] += (size_t)a->steps;
    }
  }
  for (int s = 0; s < 2; s++) {
    if (!c->sessions[s] || !session_steps[s]) continue;
    const mx_session_stats *b = &before[s];
    mx_session_get_stats(c->sessions[s], NULL, &after);
    double k = (double)session_steps[s];
    pt->have_step[s] = true;
    pt->step[s] = (session_step){
        .static_executes = (double)(after.static_executes - b->static_executes) / k,
        .dynamic_launches = (double)(after.dynamic_launches - b->dynamic_launches) / k,
        .kernels = (double)(after.kernels_run - b->kernels_run) / k,
        .refreshed = (double)(after.refreshed_entries - b->refreshed_entries) / k,
        .device_allocations = (double)(after.device_allocations - b->device_allocations) / k,
        .static_us = (double)(after.static_ns - b->static_ns) / k / 1e3,
        .dynamic_us = (double)(after.dynamic_ns - b->dynamic_ns) / k / 1e3,
        .host_us = (double)(after.host_ns - b->host_ns) / k / 1e3,
        .step_us = (double)(after.step_ns - b->step_ns) / k / 1e3};
  }
  pt->rounds = r;
  if (samples[SYS_HYBRID])
    for (int s = SYS_HYBRID + 1; s < SYS_COUNT; s++)
      if (samples[s]) pt->vs[s] = compare_rounds(samples[SYS_HYBRID], samples[s], r, a->steps);
  for (int s = 0; s < SYS_COUNT; s++)
    if (samples[s]) pt->t[s] = summarize(samples[s], counts[s]);
free_samples:
  for (int s = 0; s < SYS_COUNT; s++) free(samples[s]);
  for (int s = 0; s < SYS_ORT; s++) state_free(c, s, n);
free_device:
  if (c->device_io) free_device_io(c, n);
release_inputs:
  mx_cli_llm_inputs_release(cfg, in);
  return rc;
}

/* private_weights: the session uploads weights of its own instead of sharing equal ones with
 * the sessions before it (the control, whose point is to land in memory of its own). */
static mx_session *open_session(const llm_args *a, mx_device *dev, int64_t static_min_ops, bool private_weights,
                                const char *path, int *rc) {
  mx_session_options o;
  mx_session_options_init(&o);
  o.device = dev;
  o.private_weights = private_weights;
  o.streams = (uint32_t)a->streams;
  o.executor = a->executor;
  o.static_min_ops = static_min_ops;
  mx_session *s;
  mx_error err;
  if (mx_session_create(&o, &s, &err) != MX_OK) {
    *rc = mx_cli_runtime_error(CMD, "%s", err.message);
    return NULL;
  }
  if (mx_session_load_file(s, path) != MX_OK) {
    *rc = mx_cli_runtime_error(CMD, "loading %s: %s", path, mx_session_last_error(s));
    mx_session_destroy(s);
    return NULL;
  }
  return s;
}

/* Builds the decode step of cfg, infers it and writes it as ONNX to path; *nodes receives its
 * node count. */
static mx_status write_model(const mx_llama_config *cfg, const char *path, size_t *nodes, mx_error *err) {
  mx_graph *g;
  mx_status st = mx_model_llama(cfg, &g, err);
  if (st != MX_OK) return st;
  if ((st = mx_graph_infer(g)) != MX_OK) {
    snprintf(err->message, sizeof err->message, "inferring the model: %s", mx_graph_last_error(g));
    goto destroy_graph;
  }
  *nodes = mx_graph_node_count(g);
  st = mx_onnx_save_file(g, path, err);
destroy_graph:
  mx_graph_destroy(g);
  return st;
}

/* Writes configuration `which` as ONNX and measures every past length. */
static int measure_config(const llm_args *a, peer *p, mx_device *dev, const char *dir, int which,
                          config_result *cr) {
  mx_cli_llm_size(config_names[which], &cr->cfg);
  cr->run = true;
  bench_ctx c = {.a = a, .p = p, .dir = dir, .dev = dev, .name = config_names[which],
                 .ort = a->systems[SYS_ORT] && p->pid > 0, .device_io = a->device_io, .cfg = &cr->cfg};
  char path[1100];
  snprintf(path, sizeof path, "%s/%s.onnx", dir, c.name);
  mx_error err;
  int rc = MX_EXIT_OK;
  if (write_model(&cr->cfg, path, &cr->nodes, &err) != MX_OK) return mx_cli_runtime_error(CMD, "%s", err.message);
  if (a->systems[SYS_REFERENCE] && mx_onnx_load_file(path, &c.ref, &err) != MX_OK)
    return mx_cli_runtime_error(CMD, "%s", err.message);
  mx_device_memory_stats mem0, mem1;
  mx_device_memory_stats_get(dev, &mem0);
  if (a->systems[SYS_HYBRID] && !(c.sessions[0] = open_session(a, dev, MX_PARTITION_DEFAULT_STATIC_MIN_OPS, false, path, &rc)))
    goto close;
  if (a->systems[SYS_DYNAMIC] && !(c.sessions[1] = open_session(a, dev, -1, false, path, &rc))) goto close;
  if (a->systems[SYS_CONTROL] &&
      !(c.sessions[SYS_CONTROL] = open_session(a, dev, MX_PARTITION_DEFAULT_STATIC_MIN_OPS, true, path, &rc)))
    goto close;
  if (!c.sessions[0] && !c.sessions[1] && c.ort) {
    /* The .npy names come from a session's input list; open one that is only used for that. */
    if (!(c.sessions[1] = open_session(a, dev, -1, false, path, &rc))) goto close;
  }
  mx_device_memory_stats_get(dev, &mem1);
  cr->shared_hits = mem1.shared_hits - mem0.shared_hits;
  if (c.ort && !peer_call(p, "load %s %s", c.name, path)) {
    rc = mx_cli_runtime_error(CMD, "ONNX Runtime cannot load %s: %s", path, p->line);
    goto close;
  }
  for (size_t k = 0; k < a->n_past && rc == MX_EXIT_OK; k++) {
    cr->points[k].past = a->past[k];
    rc = measure_point(&c, &cr->cfg, &cr->points[k]);
  }
  if (c.ort) peer_call(p, "drop %s", c.name);
  cr->huge_kib = mx_cli_anon_huge_kib();
close:
  for (int s = 0; s < SYS_ORT; s++) mx_session_destroy(c.sessions[s]);
  mx_graph_destroy(c.ref);
  return rc;
}

/* The binding overhead: `runs` calls of an Identity model through ONNX Runtime, and through a
 * mixrt session on the same device settings for comparison. */
static int measure_identity(const llm_args *a, peer *p, mx_device *dev, const char *dir, timing *ort_t,
                            timing *mixrt_t) {
  char path[1100], in_dir[1100];
  snprintf(path, sizeof path, "%s/identity.onnx", dir);
  snprintf(in_dir, sizeof in_dir, "%s/identity-in", dir);
  mx_error err;
  if (write_identity(path, &err) != MX_OK) return mx_cli_runtime_error(CMD, "%s", err.message);
  int rc = MX_EXIT_OK;
  uint64_t *samples = calloc((size_t)a->identity_runs, sizeof *samples);
  mx_session *s = open_session(a, dev, MX_PARTITION_DEFAULT_STATIC_MIN_OPS, false, path, &rc);
  mx_tensor x = {0}, dx = {0}, dy = {0};
  if (!s) goto free_samples;
  if (!samples) {
    rc = mx_cli_runtime_error(CMD, "out of memory");
    goto close;
  }
  const int64_t one = 1;
  mx_tensor_alloc(MX_FLOAT32, 1, &one, &x);
  if (!x.data || (a->device_io && (device_tensor(dev, MX_FLOAT32, 1, &one, &dx) != MX_OK ||
                                   device_tensor(dev, MX_FLOAT32, 1, &one, &dy) != MX_OK))) {
    rc = mx_cli_runtime_error(CMD, "out of memory");
    goto close;
  }
  if (a->device_io) mx_device_copy(dev, dx.data, x.data, sizeof(float), MX_COPY_H2D);
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
  *mixrt_t = summarize(samples, (size_t)a->identity_runs);
  if (p->pid > 0) {
    if (write_inputs(s, in_dir, &x, 1, &err) != MX_OK) {
      rc = mx_cli_runtime_error(CMD, "%s", err.message);
      goto close;
    }
    if (!peer_call(p, "load identity %s", path) || !peer_call(p, "feed identity %s", in_dir) ||
        (a->warmup && !peer_call(p, "run identity %lld", (long long)a->warmup)) ||
        !peer_call(p, "run identity %lld", (long long)a->identity_runs) ||
        !parse_times(p, 0, samples, a->identity_runs)) {
      rc = mx_cli_runtime_error(CMD, "ONNX Runtime, Identity model: %s", p->line);
      goto close;
    }
    peer_call(p, "drop identity");
    *ort_t = summarize(samples, (size_t)a->identity_runs);
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

/* --- JSON ------------------------------------------------------------------------------------- */

void mx_cli_json_num(double v) {
  if (isfinite(v)) printf("%.6g", v);
  else printf("null");
}

static void json_timing(const timing *t) {
  if (!t->have) {
    printf("null");
    return;
  }
  printf("{\"median\": ");
  mx_cli_json_num(t->median);
  printf(", \"p10\": ");
  mx_cli_json_num(t->p10);
  printf(", \"p90\": ");
  mx_cli_json_num(t->p90);
  printf(", \"samples\": %zu}", t->samples);
}

static void json_diff(const diff *d) {
  if (!d->have) {
    printf("null");
    return;
  }
  printf("{\"logits_max_abs\": ");
  mx_cli_json_num(d->logits_abs);
  printf(", \"logits_rel\": ");
  mx_cli_json_num(d->logits_rel);
  printf(", \"present_max_abs\": ");
  mx_cli_json_num(d->present_abs);
  printf(", \"present_rel\": ");
  mx_cli_json_num(d->present_rel);
  printf("}");
}

static void json_ratio(const timing *x, const timing *y) {
  if (x->have && y->have && y->median > 0) mx_cli_json_num(x->median / y->median);
  else printf("null");
}

static void json_same(int v) { printf("%s", v < 0 ? "null" : v ? "true" : "false"); }

/* Worst value of one figure over every point of a configuration; NAN when none. */
typedef double (*figure_fn)(const point *pt);

static double fig_ratio_ort(const point *pt) {
  const timing *h = &pt->t[SYS_HYBRID], *o = &pt->t[SYS_ORT];
  return h->have && o->have ? h->median / o->median : NAN;
}
static double fig_ratio_dynamic(const point *pt) {
  const timing *h = &pt->t[SYS_HYBRID], *d = &pt->t[SYS_DYNAMIC];
  return h->have && d->have ? h->median / d->median : NAN;
}
static double fig_logits_rel(const point *pt) {
  return pt->to_ort[SYS_HYBRID].have ? pt->to_ort[SYS_HYBRID].logits_rel : NAN;
}

static double worst(const config_result *cr, size_t n_past, figure_fn f) {
  double w = NAN;
  for (size_t k = 0; k < n_past; k++) {
    double v = f(&cr->points[k]);
    if (!isnan(v) && (isnan(w) || v > w)) w = v;
  }
  return w;
}

void mx_cli_llm_json_head(int argc, char **argv) {
  printf("{\"benchmark\": \"llm\",\n \"command\": \"mixrt bench");
  for (int i = 0; i < argc; i++) {
    putchar(' ');
    for (const char *s = argv[i]; *s; s++) printf(*s == '"' || *s == '\\' ? "\\%c" : "%c", *s);
  }
  putchar('"');
}

void mx_cli_llm_json_target(bool *first, const char *name, double value, double limit, const char *missing,
                            double worst_single_process) {
  printf("%s\n    {\"target\": ", *first ? "" : ",");
  mx__json_string(stdout, name);
  printf(", \"limit\": ");
  mx_cli_json_num(limit);
  printf(", \"worst\": ");
  mx_cli_json_num(value);
  printf(", \"met\": %s", isnan(value) ? "null" : value <= limit ? "true" : "false");
  if (isnan(value)) {
    printf(", \"why_null\": ");
    mx__json_string(stdout, missing);
  }
  if (!isnan(worst_single_process)) {
    printf(", \"worst_single_process\": ");
    mx_cli_json_num(worst_single_process);
  }
  printf("}");
  *first = false;
}

static void print_json(const llm_args *a, int argc, char **argv, const peer *p, double load, const timing *id_ort,
                       const timing *id_mixrt, const config_result *res) {
  char cpu[256] = "unknown";
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (f) {
    char line[512];
    while (fgets(line, sizeof line, f))
      if (strncmp(line, "model name", 10) == 0 && strchr(line, ':')) {
        snprintf(cpu, sizeof cpu, "%s", strchr(line, ':') + 2);
        cpu[strcspn(cpu, "\n")] = '\0';
        break;
      }
    fclose(f);
  }
  mx_cli_llm_json_head(argc, argv);
  printf(",\n \"machine\": {\"cpu\": ");
  mx__json_string(stdout, cpu);
  printf(", \"online_cpus\": %ld, \"load_average_at_start\": ", sysconf(_SC_NPROCESSORS_ONLN));
  mx_cli_json_num(load);
  char thp[32];
  printf(", \"transparent_huge_pages\": ");
  mx__json_string(stdout, mx_cli_thp_mode(thp, sizeof thp));
  printf("},\n \"mixrt\": {\"device\": \"%s\", \"streams\": %lld, \"executor\": \"%s\", "
         "\"hybrid_static_min_ops\": %d, \"dynamic_static_min_ops\": -1, \"huge_pages\": %s, \"io\": \"%s\", "
         "\"io_means\": \"%s\"},\n",
         mx_cli_device_name(a->device), (long long)a->streams, mx_cli_executor_name(a->executor),
         MX_PARTITION_DEFAULT_STATIC_MIN_OPS, a->no_huge_pages ? "false" : "true", a->device_io ? "device" : "host",
         a->device_io ? "inputs uploaded to device buffers before timing; outputs written into device buffers "
                        "of the step's shapes allocated before timing (zero copy)"
                      : "host input tensors; outputs allocated by the session as host tensors, released after "
                        "the timed call");
  printf(" \"method\": {\"kernels\": \"%s\", ", a->skip_kernels ? "skipped: the device runs no kernel and no model "
         "task (launches, argument copies, stream order and events as usual), so the times are what mixrt spends "
         "around the kernels, and outputs are not computed" : "run");
  printf("\"mode\": \"%s\", \"mode_means\": \"%s\", \"rounds\": %lld, \"steps_per_round\": %lld, "
         "\"min_time_s\": %g, \"warmup\": %lld, \"block_warmup\": %lld, \"token\": %d, "
         "\"past\": \"seeded random values in [-1, 1)\", \"order\": \"systems take turns by round, the orders "
         "cycling through a Williams square: each system at each position, and right after each other system, "
         "equally often; each block starts with block_warmup untimed steps\", "
         "\"rounds_compared\": \"per round, the median of the hybrid's block against the other system's block of "
         "that round\", "
         "\"unit\": \"microseconds per step\", "
         "\"relative_difference\": \"largest |x - ort| / largest |ort| over the logits (or all present tensors)\"},\n",
         a->decode ? "decode" : "fixed",
         a->decode ? "each system decodes greedily from the point's inputs, feeding presents back as pasts; its "
                     "state carries across rounds, so the past length grows by one per step (past_range); the "
                     "warm-up decodes from the same inputs, then the state restarts from them"
                   : "every step runs on the same inputs of the point's past length",
         (long long)a->rounds, (long long)a->steps, a->decode ? 0.0 : a->min_time, (long long)a->warmup,
         (long long)a->block_warmup, TOKEN);
  bool ort_on = p->pid > 0;
  printf(" \"ort\": {\"available\": %s, \"reason\": ", ort_on ? "true" : "false");
  if (ort_on) printf("null");
  else mx__json_string(stdout, p->reason);
  printf(", \"package\": ");
  if (ort_on) {
    char pkg[96];
    snprintf(pkg, sizeof pkg, "onnxruntime-node %s", p->version);
    mx__json_string(stdout, pkg);
  } else {
    printf("null");
  }
  printf(", \"node\": ");
  if (ort_on) mx__json_string(stdout, p->node_version);
  else printf("null");
  printf(", \"session_options\": {\"execution_provider\": \"cpu\", \"intra_op_num_threads\": 1, "
         "\"inter_op_num_threads\": 1, \"execution_mode\": \"sequential\", \"graph_optimization_level\": \"all\"}, "
         "\"timed\": \"inside Node, around await session.run(feeds)\"},\n");
  printf(" \"identity_call_us\": {\"ort\": ");
  json_timing(id_ort);
  printf(", \"mixrt\": ");
  json_timing(id_mixrt);
  printf("},\n \"results\": [");
  bool first_cfg = true;
  for (int c = 0; c < N_CONFIGS; c++) {
    const config_result *cr = &res[c];
    if (!cr->run) continue;
    const mx_llama_config *g = &cr->cfg;
    printf("%s\n  {\"config\": \"%s\", \"layers\": %lld, \"hidden\": %lld, \"heads\": %lld, \"kv_heads\": %lld, "
           "\"head_dim\": %lld, \"ffn\": %lld, \"vocab\": %lld, \"nodes\": %zu, \"anon_huge_pages_kib\": %lld, "
           "\"weight_blocks_shared_between_systems\": %llu, \"points\": [",
           first_cfg ? "" : ",", config_names[c], (long long)g->layers, (long long)g->hidden, (long long)g->heads,
           (long long)g->kv_heads, (long long)mx_cli_llm_head_dim(g), (long long)g->ffn, (long long)g->vocab, cr->nodes,
           (long long)cr->huge_kib, (unsigned long long)cr->shared_hits);
    first_cfg = false;
    for (size_t k = 0; k < a->n_past; k++) {
      const point *pt = &cr->points[k];
      int64_t first = pt->past;
      int64_t last = a->decode ? first + a->rounds * (a->block_warmup + a->steps) - 1 : pt->past;
      printf("%s\n    {\"past\": %lld, \"past_range\": [%lld, %lld], \"rounds\": %lld, \"step_us\": {", k ? "," : "",
             (long long)pt->past, (long long)first, (long long)last, (long long)pt->rounds);
      for (int s = 0; s < SYS_COUNT; s++) {
        printf("%s\"%s\": ", s ? ", " : "", sys_names[s]);
        json_timing(&pt->t[s]);
      }
      printf("},\n     \"ratio_hybrid_ort\": ");
      json_ratio(&pt->t[SYS_HYBRID], &pt->t[SYS_ORT]);
      printf(", \"ratio_hybrid_ort_without_binding\": ");
      if (pt->t[SYS_HYBRID].have && pt->t[SYS_ORT].have && id_ort->have && pt->t[SYS_ORT].median > id_ort->median)
        mx_cli_json_num(pt->t[SYS_HYBRID].median / (pt->t[SYS_ORT].median - id_ort->median));
      else
        printf("null");
      printf(", \"ratio_hybrid_dynamic\": ");
      json_ratio(&pt->t[SYS_HYBRID], &pt->t[SYS_DYNAMIC]);
      printf(", \"ratio_hybrid_reference\": ");
      json_ratio(&pt->t[SYS_HYBRID], &pt->t[SYS_REFERENCE]);
      printf(", \"ratio_hybrid_control\": ");
      json_ratio(&pt->t[SYS_HYBRID], &pt->t[SYS_CONTROL]);
      printf(",\n     \"rounds_compared\": {");
      for (int s = SYS_HYBRID + 1; s < SYS_COUNT; s++) {
        const round_pairs *rp = &pt->vs[s];
        printf("%s\"%s\": ", s > SYS_HYBRID + 1 ? ", " : "", sys_names[s]);
        if (!rp->have) {
          printf("null");
          continue;
        }
        printf("{\"hybrid_faster\": %lld, \"rounds\": %lld, \"median_ratio\": ", (long long)rp->hybrid_faster,
               (long long)rp->rounds);
        mx_cli_json_num(rp->median_ratio);
        printf(", \"sign_test_p\": ");
        mx_cli_json_num(rp->sign_test_p);
        printf("}");
      }
      printf("}");
      printf(",\n     \"hybrid_equals_reference\": ");
      json_same(pt->same_as_ref[0]);
      printf(", \"dynamic_equals_reference\": ");
      json_same(pt->same_as_ref[1]);
      printf(",\n     \"diff_to_ort\": ");
      if (pt->to_ort[SYS_HYBRID].have || pt->to_ort[SYS_DYNAMIC].have || pt->to_ort[SYS_REFERENCE].have ||
          pt->to_ort[SYS_CONTROL].have) {
        printf("{");
        for (int s = 0; s < SYS_ORT; s++) {
          printf("%s\"%s\": ", s ? ", " : "", sys_names[s]);
          json_diff(&pt->to_ort[s]);
        }
        printf("}");
      } else {
        printf("null");
      }
      for (int s = 0; s < 2; s++) {
        printf(",\n     \"%s_per_step\": ", sys_names[s]);
        if (pt->have_step[s]) {
          const session_step *h = &pt->step[s];
          printf("{\"static_executes\": %.2f, \"dynamic_launches\": %.2f, \"exe_graph_kernels\": %.2f, "
                 "\"refreshed_entries\": %.2f, \"device_allocations\": %.3f, \"session_step_us\": %.2f, "
                 "\"static_us\": %.2f, \"dynamic_us\": %.2f, \"host_us\": %.2f}",
                 h->static_executes, h->dynamic_launches, h->kernels, h->refreshed, h->device_allocations,
                 h->step_us, h->static_us, h->dynamic_us, h->host_us);
        } else {
          printf("null");
        }
      }
      printf("}");
    }
    printf("\n  ]}");
  }
  printf("\n ],\n \"targets\": [");
  bool first = true;
  const char *no_ort = ort_on ? "ONNX Runtime or hybrid not measured for this configuration" : p->reason;
  for (int c = 0; c < N_CONFIGS; c++) {
    if (!res[c].run) continue;
    char name[128];
    snprintf(name, sizeof name, "%s: hybrid / ort <= %.1f", config_names[c], config_ort_limit[c]);
    mx_cli_llm_json_target(&first, name, worst(&res[c], a->n_past, fig_ratio_ort), config_ort_limit[c], no_ort, NAN);
    snprintf(name, sizeof name, "%s: hybrid / dynamic < 1%s", config_names[c],
             a->skip_kernels ? " (kernels skipped: mixrt's own cost)" : "");
    mx_cli_llm_json_target(&first, name, worst(&res[c], a->n_past, fig_ratio_dynamic), 1.0,
                           "hybrid or dynamic not measured", NAN);
    snprintf(name, sizeof name, "%s: logits relative difference to ort <= 1e-4", config_names[c]);
    mx_cli_llm_json_target(&first, name, worst(&res[c], a->n_past, fig_logits_rel), 1e-4, no_ort, NAN);
  }
  printf("\n ]}\n");
}

/* The systems in the data file's column order: the control session comes last, after the
 * columns bench/plot/llm_latency.gp reads. */
static const int column_system[SYS_COUNT] = {SYS_HYBRID, SYS_DYNAMIC, SYS_REFERENCE, SYS_ORT, SYS_CONTROL};

int mx_cli_llm_write_table(const llm_args *a, const config_result *res, int64_t processes) {
  FILE *f = fopen(a->table, "w");
  if (!f) return mx_cli_runtime_error(CMD, "cannot write %s: %s", a->table, strerror(errno));
  fprintf(f, "# mixrt bench llm: decode-step latency in microseconds (median p10 p90 per system); ? = not "
             "measured\n# mode %s, io %s, device %s\n",
          a->decode ? "decode" : "fixed", a->device_io ? "device" : "host", mx_cli_device_name(a->device));
  if (processes > 1)
    fprintf(f, "# each figure: its median over %lld processes (--processes)\n", (long long)processes);
  bool first = true;
  for (int c = 0; c < N_CONFIGS; c++) {
    if (!res[c].run) continue;
    fprintf(f, "%s# config %s\n# past", first ? "" : "\n\n", config_names[c]);
    first = false;
    for (int i = 0; i < SYS_COUNT; i++) {
      const char *name = sys_names[column_system[i]];
      fprintf(f, " %s_median %s_p10 %s_p90", name, name, name);
    }
    fputc('\n', f);
    for (size_t k = 0; k < a->n_past; k++) {
      const point *pt = &res[c].points[k];
      fprintf(f, "%lld", (long long)pt->past);
      for (int i = 0; i < SYS_COUNT; i++) {
        const int s = column_system[i];
        if (pt->t[s].have) fprintf(f, " %.3f %.3f %.3f", pt->t[s].median, pt->t[s].p10, pt->t[s].p90);
        else fprintf(f, " ? ? ?");
      }
      fputc('\n', f);
    }
  }
  if (fclose(f) != 0) return mx_cli_runtime_error(CMD, "cannot write %s: %s", a->table, strerror(errno));
  return MX_EXIT_OK;
}

const char *mx_cli_llm_no_ort_reason(const llm_args *a) {
  if (a->no_ort) return "--no-ort was given";
  if (a->skip_kernels) return "--skip-kernels: mixrt's own cost only";
  if (!a->systems[SYS_ORT]) return "ort is not among --systems";
  return NULL;
}

/* Writes this process's figures for the --processes driver (llm_results_header, then the
 * configurations' results). */
static int write_results(const llm_args *a, const config_result *res) {
  FILE *f = fopen(a->results, "wb");
  if (!f) return mx_cli_runtime_error(CMD, "cannot write %s: %s", a->results, strerror(errno));
  llm_results_header h = {.magic = "MXBLLM1", .result_size = sizeof *res, .n_configs = N_CONFIGS};
  bool ok = fwrite(&h, sizeof h, 1, f) == 1 && fwrite(res, sizeof *res, N_CONFIGS, f) == N_CONFIGS;
  if (fclose(f) != 0 || !ok) return mx_cli_runtime_error(CMD, "cannot write %s: %s", a->results, strerror(errno));
  return MX_EXIT_OK;
}

/* --- the command ------------------------------------------------------------------------------ */

int mx_bench_llm(int argc, char **argv) {
  llm_args a;
  int rc = parse_args(argc, argv, &a);
  if (rc != MX_EXIT_OK) return rc;
  if (a.processes > 1) return mx_cli_llm_processes(&a, argc, argv);
  signal(SIGPIPE, SIG_IGN); /* a dead peer shows as a failed write, not a killed benchmark */
  char tmp[] = "/tmp/mixrt-bench-llm-XXXXXX";
  const char *dir = a.work_dir;
  if (dir) {
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) return mx_cli_runtime_error(CMD, "cannot create %s: %s", dir, strerror(errno));
  } else if (!(dir = mkdtemp(tmp))) {
    return mx_cli_runtime_error(CMD, "cannot create a temporary folder: %s", strerror(errno));
  }
  double load[1] = {NAN};
  if (getloadavg(load, 1) != 1) load[0] = NAN;
  peer p = {.pid = -1};
  const char *no_ort = mx_cli_llm_no_ort_reason(&a);
  if (no_ort) snprintf(p.reason, sizeof p.reason, "%s", no_ort);
  else peer_start(&a, &p);
  config_result res[N_CONFIGS];
  memset(res, 0, sizeof res);
  timing id_ort = {0}, id_mixrt = {0};
  mx_device_options dopt;
  mx_device_options_init(&dopt);
  dopt.kind = a.device;
  dopt.skip_kernels = a.skip_kernels;
  dopt.huge_pages = !a.no_huge_pages;
  mx_device *dev = NULL;
  mx_error err;
  if (mx_device_create(&dopt, &dev, &err) != MX_OK) {
    rc = mx_cli_runtime_error(CMD, "%s", err.message);
    goto stop_peer;
  }
  rc = measure_identity(&a, &p, dev, dir, &id_ort, &id_mixrt);
  for (int c = 0; c < N_CONFIGS && rc == MX_EXIT_OK; c++)
    if (a.configs[c]) rc = measure_config(&a, &p, dev, dir, c, &res[c]);
  if (rc == MX_EXIT_OK) print_json(&a, argc, argv, &p, load[0], &id_ort, &id_mixrt, res);
  if (rc == MX_EXIT_OK && a.table) rc = mx_cli_llm_write_table(&a, res, 1);
  if (rc == MX_EXIT_OK && a.results) rc = write_results(&a, res);
  mx_device_destroy(dev);
stop_peer:
  peer_stop(&p);
  if (!a.work_dir) mx_cli_remove_tree(dir);
  return rc;
}
