/* `mixrt bench models`: median step latency of every zoo model (bench/zoo) in mixrt hybrid,
 * mixrt all-dynamic, ONNX Runtime (bench/peers/ort_runner.js) and PyTorch eager
 * (bench/peers/torch_runner.py), at each thread count, in alternating rounds; JSON, a markdown
 * table and ratios. Options and the run itself; the runner processes are in
 * cmd_bench_models_peer.c, mixrt's runner in cmd_bench_models_serve.c. */
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/json.h"
#include "mixrt/onnx.h"
#include "tools/bench.h"
#include "tools/cli.h"
#include "tools/cmd_bench_models.h"
#include "tools/run_inputs.h"

#define MAX_MODELS  64
#define MAX_THREADS 4

enum { R_HYBRID, R_DYNAMIC, R_ORT, R_TORCH, N_RUNNERS };
static const char *const runner_names[N_RUNNERS] = {"hybrid", "dynamic", "ort", "torch"};
static const char *const runner_titles[N_RUNNERS] = {"mixrt hybrid", "mixrt dynamic", "ONNX Runtime",
                                                     "PyTorch eager"};

typedef struct bm_args {
  const char *zoo, *models, *cases, *json, *plot, *node, *python, *peers, *work;
  int64_t threads[MAX_THREADS];
  int n_threads;
  bool use[N_RUNNERS];
  int64_t rounds, steps, warmup;
  bool table, layers;
  const char *device; /* --device: inline or cpu */
  char zoo_buf[PATH_MAX], peers_buf[PATH_MAX];
} bm_args;

typedef struct bm_config {
  int runner, t; /* t: index into threads */
  bool ok;
  char error[512];
  uint64_t *samples;
  int64_t n;
} bm_config;

typedef struct bm_model {
  const char *name, *file, *case_name; /* borrowed from the manifest */
  const mx_bmj *bench_case;            /* the case run: the first --cases names, else the first */
  char path[PATH_MAX], feed_dir[PATH_MAX];
  bool ready;
  char error[512];
  bm_config configs[N_RUNNERS * MAX_THREADS];
} bm_model;

void mx_cmd_bench_models_help(FILE *out) {
  fprintf(out,
          "usage: mixrt bench models [--zoo DIR] [--models NAME,...] [--cases NAME,...] [--threads 1,2]\n"
          "                          [--runners hybrid,dynamic,ort,torch] [--rounds N] [--steps N]\n"
          "                          [--warmup N] [--device inline|cpu] [--json FILE] [--table]\n"
          "                          [--plot FILE.png] [--layers]\n"
          "                          [--node PATH] [--python PATH] [--peers DIR] [--work-dir DIR]\n\n"
          "models: median step latency of the zoo's models (bench/zoo/export.py: ResNet-50,\n"
          "  MobileNetV3, a GPT decoder step, a BERT encoder, LSTM, GRU, ...) on one input case of each\n"
          "  model (its first, or the one --cases names), for mixrt hybrid, mixrt all-dynamic\n"
          "  (static_min_ops -1), ONNX Runtime (the Node peer of bench/peers, CPU provider, sequential)\n"
          "  and PyTorch eager (/usr/bin/python3 bench/peers/torch_runner.py, the zoo's torch modules\n"
          "  under inference_mode), at each thread count. Every runner is a process of its own, loaded\n"
          "  once per model; the rounds alternate them (each round runs --steps steps of every runner\n"
          "  and thread count, in a seeded order drawn anew for each round). Prints JSON on stdout\n"
          "  (into --json FILE instead; none with --table and no --json): per model and thread count\n"
          "  the median, p10 and p90 in milliseconds and the ratios hybrid / ONNX Runtime, hybrid /\n"
          "  PyTorch, dynamic / ONNX Runtime and hybrid / dynamic; per runner the speed-up of the last\n"
          "  thread count over the first. Wall-clock times: on a host other work shares they are noisy,\n"
          "  alternated so that every runner meets the same noise. A runner that cannot start (ONNX\n"
          "  Runtime not installed: make bench-deps; no torch in the python) or cannot run a model has\n"
          "  null figures and the reason. Progress lines go to stderr.\n"
          "  The zoo is exported once with\n"
          "      /usr/bin/python3 bench/zoo/export.py BUILD/zoo\n"
          "  (the ctest entry zoo_models does it too). A manifest case without inputs runs on seeded\n"
          "  random inputs (its symbols give the shapes).\n\n"
          "options:\n"
          "  --zoo DIR          the exported zoo (default: the zoo folder of the build tree this\n"
          "                     program is in, BUILD/zoo)\n"
          "  --models LIST      zoo models to run (default: every model of the manifest)\n"
          "  --cases LIST       input cases by name (bench/zoo/export.py's, e.g. seq1_past128,b1_s128):\n"
          "                     each model runs the first of its cases listed here, or its first case\n"
          "  --threads LIST     intra-op thread counts, up to 4 (default 1,2)\n"
          "  --runners LIST     hybrid, dynamic, ort, torch (default all four)\n"
          "  --rounds N         alternating rounds (default 5)\n"
          "  --steps N          timed steps per runner and thread count in each round (default 3)\n"
          "  --warmup N         untimed steps per runner and thread count after loading (default 2)\n"
          "  --device D         mixrt's device: inline (default: the work runs in the calling thread,\n"
          "                     as ONNX Runtime's and PyTorch's do) or cpu (a worker thread per stream)\n"
          "  --json FILE        the JSON into FILE instead of stdout\n"
          "  --table            a markdown table of the medians and ratios on stdout\n"
          "  --plot FILE.png    a bar chart of the medians (log scale) drawn by gnuplot (make\n"
          "                     bench-deps installs gnuplot-nox; without it --plot is refused)\n"
          "  --layers           instead: every Conv of each model timed alone (a one-node session,\n"
          "                     batch 1, the best of --rounds x --steps steps) at each thread count,\n"
          "                     with its GFLOP/s against the sgemm peak a short cblas_sgemm\n"
          "                     1024x1024x1024 probe measures on as many threads (best of 20 runs);\n"
          "                     markdown tables on stdout\n"
          "  --node PATH        the Node.js program (default node)\n"
          "  --python PATH      the Python with torch (default /usr/bin/python3)\n"
          "  --peers DIR        where ort_runner.js and torch_runner.py are (default: bench/peers of\n"
          "                     the source tree this program was built from, or $MIXRT_PEERS_DIR)\n"
          "  --work-dir DIR     where the runners' input files are linked (default: a new folder in\n"
          "                     /tmp, removed at the end)\n");
}

/* The build tree's zoo: <build>/zoo beside <build>/tools/mixrt. */
static void default_zoo(char *buf, size_t cap) {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) {
    snprintf(buf, cap, "zoo");
    return;
  }
  exe[n] = '\0';
  for (int k = 0; k < 2; k++) {
    char *slash = strrchr(exe, '/');
    if (slash) *slash = '\0';
  }
  snprintf(buf, cap, "%s/zoo", exe);
}

#ifndef MIXRT_ONNX_NODE_DIR_DEFAULT
#define MIXRT_ONNX_NODE_DIR_DEFAULT "tests/data/onnx-node"
#endif

/* bench/peers of the source tree: the build records the ONNX node tests' folder,
 * <source>/tests/data/onnx-node. */
static void default_peers(char *buf, size_t cap) {
  const char *env = getenv("MIXRT_PEERS_DIR");
  if (env && *env) {
    snprintf(buf, cap, "%s", env);
    return;
  }
  const char *node_dir = MIXRT_ONNX_NODE_DIR_DEFAULT, *suffix = "tests/data/onnx-node";
  size_t n = strlen(node_dir), m = strlen(suffix);
  if (n >= m && strcmp(node_dir + n - m, suffix) == 0)
    snprintf(buf, cap, "%.*sbench/peers", (int)(n - m), node_dir);
  else
    snprintf(buf, cap, "bench/peers");
}

static bool parse_count(const char *cmd, const char *opt, const char *v, int64_t lo, int64_t hi,
                        int64_t *out) {
  if (!v) return false;
  if (!mx_cli_parse_int(v, out) || *out < lo || *out > hi) {
    mx_cli_usage_error(cmd, "%s needs a number from %lld to %lld, not '%s'", opt, (long long)lo,
                       (long long)hi, v);
    return false;
  }
  return true;
}

static int parse(int argc, char **argv, bm_args *a) {
  const char *cmd = "bench models";
  a->rounds = 5;
  a->steps = 3;
  a->warmup = 2;
  a->threads[0] = 1;
  a->threads[1] = 2;
  a->n_threads = 2;
  a->node = "node";
  a->device = "inline";
  a->python = "/usr/bin/python3";
  for (int r = 0; r < N_RUNNERS; r++) a->use[r] = true;
  for (int i = 1; i < argc; i++) {
    const char *o = argv[i];
    const char **text = strcmp(o, "--zoo") == 0        ? &a->zoo
                        : strcmp(o, "--models") == 0   ? &a->models
                        : strcmp(o, "--cases") == 0    ? &a->cases
                        : strcmp(o, "--json") == 0     ? &a->json
                        : strcmp(o, "--node") == 0     ? &a->node
                        : strcmp(o, "--python") == 0   ? &a->python
                        : strcmp(o, "--peers") == 0    ? &a->peers
                        : strcmp(o, "--work-dir") == 0 ? &a->work
                                                       : NULL;
    if (text) {
      if (!(*text = mx_cli_option_value(cmd, argc, argv, &i))) return MX_EXIT_USAGE;
    } else if (strcmp(o, "--rounds") == 0 || strcmp(o, "--steps") == 0 || strcmp(o, "--warmup") == 0) {
      int64_t *dst = o[2] == 'r' ? &a->rounds : o[2] == 's' ? &a->steps : &a->warmup;
      if (!parse_count(cmd, o, mx_cli_option_value(cmd, argc, argv, &i), o[2] == 'w' ? 0 : 1, 10000, dst))
        return MX_EXIT_USAGE;
    } else if (strcmp(o, "--threads") == 0) {
      const char *v = mx_cli_option_value(cmd, argc, argv, &i);
      if (!v) return MX_EXIT_USAGE;
      a->n_threads = 0;
      char buf[256];
      snprintf(buf, sizeof buf, "%s", v);
      for (char *save = NULL, *w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
        if (a->n_threads == MAX_THREADS) return mx_cli_usage_error(cmd, "--threads takes up to 4 counts");
        if (!parse_count(cmd, "--threads", w, 1, 64, &a->threads[a->n_threads++])) return MX_EXIT_USAGE;
      }
      if (!a->n_threads) return mx_cli_usage_error(cmd, "--threads needs at least one count");
    } else if (strcmp(o, "--runners") == 0) {
      const char *v = mx_cli_option_value(cmd, argc, argv, &i);
      if (!v) return MX_EXIT_USAGE;
      for (int r = 0; r < N_RUNNERS; r++) a->use[r] = false;
      char buf[256];
      snprintf(buf, sizeof buf, "%s", v);
      for (char *save = NULL, *w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
        int found = -1;
        for (int r = 0; r < N_RUNNERS; r++)
          if (strcmp(w, runner_names[r]) == 0) found = r;
        if (found < 0)
          return mx_cli_usage_error(cmd, "--runners takes hybrid, dynamic, ort and torch, not '%s'", w);
        a->use[found] = true;
      }
    } else if (strcmp(o, "--device") == 0) {
      const char *v = mx_cli_option_value(cmd, argc, argv, &i);
      if (!v) return MX_EXIT_USAGE;
      if (strcmp(v, "inline") != 0 && strcmp(v, "cpu") != 0)
        return mx_cli_usage_error(cmd, "--device takes inline or cpu, not '%s'", v);
      a->device = v;
    } else if (strcmp(o, "--plot") == 0) {
      if (!(a->plot = mx_cli_option_value(cmd, argc, argv, &i))) return MX_EXIT_USAGE;
    } else if (strcmp(o, "--table") == 0) {
      a->table = true;
    } else if (strcmp(o, "--layers") == 0) {
      a->layers = true;
    } else {
      return mx_cli_usage_error(cmd, "unknown %s '%s'", o[0] == '-' ? "option" : "argument", o);
    }
  }
  if (a->plot && system("command -v gnuplot > /dev/null 2>&1") != 0)
    return mx_cli_usage_error(
        cmd, "--plot needs gnuplot, which is not on PATH (make bench-deps installs gnuplot-nox)");
  if (!a->zoo) {
    default_zoo(a->zoo_buf, sizeof a->zoo_buf);
    a->zoo = a->zoo_buf;
  }
  if (!a->peers) {
    default_peers(a->peers_buf, sizeof a->peers_buf);
    a->peers = a->peers_buf;
  }
  return MX_EXIT_OK;
}

static bool listed(const char *list, const char *name) {
  if (!list) return true;
  size_t n = strlen(name);
  for (const char *p = list; *p;) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len == n && strncmp(p, name, n) == 0) return true;
    if (!end) break;
    p = end + 1;
  }
  return false;
}

static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    if (n + 4096 + 1 > cap) {
      cap = cap ? cap * 2 : 65536;
      char *grown = realloc(buf, cap);
      if (!grown) break;
      buf = grown;
    }
    size_t got = fread(buf + n, 1, cap - n - 1, f);
    n += got;
    if (got == 0) break;
  }
  fclose(f);
  if (buf) buf[n] = '\0';
  return buf;
}

/* The inputs of a model's case as DIR/<input>.npy: links to the zoo's files, or seeded random
 * tensors (shapes from the case's symbols) written there when the case names no inputs. */
static bool prepare_inputs(bm_model *m, const mx_bmj *c, const char *zoo) {
  const mx_bmj *inputs = mx__bmj_get(c, "inputs");
  if (inputs && inputs->kind == MX_BMJ_OBJECT && inputs->n) {
    for (size_t k = 0; k < inputs->n; k++) {
      char link[PATH_MAX + 300], target[PATH_MAX + 300], abs_target[PATH_MAX];
      if (inputs->items[k].kind != MX_BMJ_STRING) continue;
      snprintf(target, sizeof target, "%s/%s", zoo, inputs->items[k].text);
      if (!realpath(target, abs_target)) {
        snprintf(m->error, sizeof m->error, "input file %s: %s", target, strerror(errno));
        return false;
      }
      snprintf(link, sizeof link, "%s/%s.npy", m->feed_dir, inputs->keys[k]);
      unlink(link); /* a --work-dir of an earlier run */
      if (symlink(abs_target, link) != 0) {
        snprintf(m->error, sizeof m->error, "%s: %s", link, strerror(errno));
        return false;
      }
    }
    return true;
  }
  mx_graph *g = NULL;
  mx_error err;
  if (mx_onnx_load_file(m->path, &g, &err) != MX_OK) {
    snprintf(m->error, sizeof m->error, "%s", err.message);
    return false;
  }
  const mx_bmj *syms = mx__bmj_get(c, "symbols");
  mx_symbol_binding bind[32];
  size_t nb = 0;
  for (size_t k = 0; syms && syms->kind == MX_BMJ_OBJECT && k < syms->n && nb < 32; k++) {
    bind[nb].name = syms->keys[k];
    bind[nb].value = (int64_t)syms->items[k].number;
    nb++;
  }
  size_t n_in = mx_graph_input_count(g);
  mx_tensor *in = calloc(n_in ? n_in : 1, sizeof *in);
  bool ok = in && mx_cli_make_inputs("bench models", g, NULL, 0, true, 1, bind, nb, in) == MX_EXIT_OK;
  if (!ok)
    snprintf(m->error, sizeof m->error,
             "cannot make random inputs (the case's symbols do not give every dim)");
  for (size_t k = 0; ok && k < n_in; k++) {
    char file[PATH_MAX + 300];
    snprintf(file, sizeof file, "%s/%s.npy", m->feed_dir, mx_graph_value_name(g, mx_graph_input(g, k)));
    if (mx_tensor_save_npy(file, &in[k], &err) != MX_OK) {
      snprintf(m->error, sizeof m->error, "%s", err.message);
      ok = false;
    }
  }
  for (size_t k = 0; in && k < n_in; k++) mx_tensor_release(&in[k]);
  free(in);
  mx_graph_destroy(g);
  return ok;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  (void)remove(path); /* best effort: a leftover file is only untidy */
  return 0;
}

/* Removes the work folder this run created (links and random inputs only). */
static void remove_work(const char *work) { nftw(work, remove_entry, 8, FTW_DEPTH | FTW_PHYS); }

/* --- the runners ---------------------------------------------------------------------------- */

typedef struct bm_run {
  bm_args *a;
  mx_bm_peer mixrt[MAX_THREADS]; /* one mixrt process per thread count */
  mx_bm_peer ort, torch;
  bool started[N_RUNNERS];     /* hybrid/dynamic: the mixrt processes */
  char reason[N_RUNNERS][512]; /* why a runner is unavailable */
  char version[N_RUNNERS][96];
} bm_run;

static mx_bm_peer *peer_of(bm_run *r, int runner, int t) {
  return runner == R_ORT ? &r->ort : runner == R_TORCH ? &r->torch : &r->mixrt[t];
}

static void start_runners(bm_run *r) {
  bm_args *a = r->a;
  char self[PATH_MAX], script[PATH_MAX + 32], modules[PATH_MAX + 64], threads[16];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  self[n > 0 ? n : 0] = '\0';
  if (a->use[R_HYBRID] || a->use[R_DYNAMIC]) {
    bool all = true;
    char failed[512] = "";
    for (int t = 0; t < a->n_threads; t++) {
      snprintf(threads, sizeof threads, "%lld", (long long)a->threads[t]);
      char *argv[] = {self,    "bench",    "models",          "--serve", "--threads",
                      threads, "--device", (char *)a->device, NULL};
      fprintf(stderr, "bench models: starting mixrt (%s threads)\n", threads);
      mx__bm_peer_start(&r->mixrt[t], argv);
      if (r->mixrt[t].pid < 0) {
        all = false;
        snprintf(failed, sizeof failed, "%s", r->mixrt[t].reason);
      }
    }
    for (int k = R_HYBRID; k <= R_DYNAMIC; k++) {
      r->started[k] = all && a->use[k];
      if (!a->use[k])
        snprintf(r->reason[k], sizeof r->reason[k], "not asked for (--runners)");
      else if (!all)
        snprintf(r->reason[k], sizeof r->reason[k], "%s", failed);
      else
        snprintf(r->version[k], sizeof r->version[k], "%s", r->mixrt[0].version);
    }
  } else {
    for (int k = R_HYBRID; k <= R_DYNAMIC; k++)
      snprintf(r->reason[k], sizeof r->reason[k], "not asked for (--runners)");
  }
  r->ort.pid = r->torch.pid = -1;
  if (!a->use[R_ORT]) {
    snprintf(r->reason[R_ORT], sizeof r->reason[R_ORT], "not asked for (--runners)");
  } else {
    snprintf(script, sizeof script, "%s/ort_runner.js", a->peers);
    snprintf(modules, sizeof modules, "%s/node_modules/onnxruntime-node/package.json", a->peers);
    if (access(script, R_OK) != 0) {
      snprintf(r->reason[R_ORT], sizeof r->reason[R_ORT], "%s not found (give --peers DIR)", script);
    } else if (access(modules, R_OK) != 0) {
      snprintf(r->reason[R_ORT], sizeof r->reason[R_ORT],
               "onnxruntime-node is not installed in %s (run make bench-deps)", a->peers);
    } else {
      char *argv[] = {(char *)a->node, script, NULL};
      fprintf(stderr, "bench models: starting ONNX Runtime (%s %s)\n", a->node, script);
      mx__bm_peer_start(&r->ort, argv);
      r->started[R_ORT] = r->ort.pid > 0;
      snprintf(r->reason[R_ORT], sizeof r->reason[R_ORT], "%s", r->ort.reason);
      snprintf(r->version[R_ORT], sizeof r->version[R_ORT], "%s", r->ort.version);
    }
  }
  if (!a->use[R_TORCH]) {
    snprintf(r->reason[R_TORCH], sizeof r->reason[R_TORCH], "not asked for (--runners)");
  } else {
    snprintf(script, sizeof script, "%s/torch_runner.py", a->peers);
    if (access(script, R_OK) != 0) {
      snprintf(r->reason[R_TORCH], sizeof r->reason[R_TORCH], "%s not found (give --peers DIR)", script);
    } else {
      char *argv[] = {(char *)a->python, script, NULL};
      fprintf(stderr, "bench models: starting PyTorch (%s %s)\n", a->python, script);
      mx__bm_peer_start(&r->torch, argv);
      r->started[R_TORCH] = r->torch.pid > 0;
      snprintf(r->reason[R_TORCH], sizeof r->reason[R_TORCH], "%s", r->torch.reason);
      snprintf(r->version[R_TORCH], sizeof r->version[R_TORCH], "%s", r->torch.version);
    }
  }
  for (int k = 0; k < N_RUNNERS; k++)
    if (a->use[k] && !r->started[k])
      fprintf(stderr, "bench models: no %s: %s\n", runner_titles[k], r->reason[k]);
}

static void stop_runners(bm_run *r) {
  for (int t = 0; t < r->a->n_threads; t++)
    if (r->mixrt[t].pid > 0) mx__bm_peer_stop(&r->mixrt[t]);
  if (r->ort.pid > 0) mx__bm_peer_stop(&r->ort);
  if (r->torch.pid > 0) mx__bm_peer_stop(&r->torch);
}

/* The session name of a configuration in its runner process. */
static void session_name(const bm_config *c, char *buf, size_t cap) {
  snprintf(buf, cap, "%s_%d", runner_names[c->runner], c->t);
}

static void config_fail(bm_config *c, const mx_bm_peer *p, const char *what) {
  const char *said = p->line && strncmp(p->line, "err ", 4) == 0 ? p->line + 4 : (p->line ? p->line : "");
  snprintf(c->error, sizeof c->error, "%s: %s", what, said);
  c->ok = false;
}

/* Loads, feeds and warms up one configuration. */
static void config_load(bm_run *r, bm_model *m, bm_config *c) {
  bm_args *a = r->a;
  mx_bm_peer *p = peer_of(r, c->runner, c->t);
  char name[64];
  session_name(c, name, sizeof name);
  long long threads = (long long)a->threads[c->t];
  uint64_t t0 = mx__now_ns();
  bool ok = c->runner == R_TORCH ? mx__bm_peer_call(p, "load %s %s %lld", name, m->name, threads)
            : c->runner == R_ORT
                ? mx__bm_peer_call(p, "load %s %s %lld", name, m->path, threads)
                : mx__bm_peer_call(p, "load %s %s %s", name, m->path, runner_names[c->runner]);
  if (!ok) return config_fail(c, p, "load");
  if (!mx__bm_peer_call(p, "feed %s %s", name, m->feed_dir)) return config_fail(c, p, "feed");
  if (a->warmup && !mx__bm_peer_call(p, "run %s %lld", name, (long long)a->warmup))
    return config_fail(c, p, "run");
  c->ok = true;
  c->samples = calloc((size_t)(a->rounds * a->steps), sizeof *c->samples);
  if (!c->samples) {
    snprintf(c->error, sizeof c->error, "out of memory");
    c->ok = false;
  }
  fprintf(stderr, "bench models: %s: %s, %lld thread%s loaded (%.1f s)\n", m->name, runner_titles[c->runner],
          threads, threads == 1 ? "" : "s", (double)(mx__now_ns() - t0) / 1e9);
}

static void config_run(bm_run *r, bm_config *c) {
  mx_bm_peer *p = peer_of(r, c->runner, c->t);
  char name[64];
  session_name(c, name, sizeof name);
  if (!mx__bm_peer_call(p, "run %s %lld", name, (long long)r->a->steps)) return config_fail(c, p, "run");
  const char *s = mx__bm_peer_rest(p);
  for (int64_t k = 0; k < r->a->steps; k++) {
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s) {
      snprintf(c->error, sizeof c->error, "run: the reply has fewer times than steps: %s", p->line);
      c->ok = false;
      return;
    }
    c->samples[c->n++] = v;
    s = end;
  }
}

static void config_drop(bm_run *r, bm_config *c) {
  mx_bm_peer *p = peer_of(r, c->runner, c->t);
  char name[64];
  session_name(c, name, sizeof name);
  if (p->pid > 0 && !mx__bm_peer_call(p, "drop %s", name) && c->ok) config_fail(c, p, "drop");
}

static int n_configs(const bm_args *a) { return N_RUNNERS * a->n_threads; }

static void measure_model(bm_run *r, bm_model *m) {
  bm_args *a = r->a;
  int nc = n_configs(a);
  for (int k = 0; k < nc; k++) {
    bm_config *c = &m->configs[k];
    c->runner = k / a->n_threads;
    c->t = k % a->n_threads;
    if (!a->use[c->runner]) continue;
    if (!r->started[c->runner]) {
      snprintf(c->error, sizeof c->error, "%s", r->reason[c->runner]);
      continue;
    }
    config_load(r, m, c);
    if (!c->ok) fprintf(stderr, "bench models: %s: %s: %s\n", m->name, runner_titles[c->runner], c->error);
  }
  uint64_t t0 = mx__now_ns();
  uint64_t rng = 0x9E3779B97F4A7C15ull;
  int order[N_RUNNERS * MAX_THREADS];
  for (int j = 0; j < nc; j++) order[j] = j;
  for (int64_t round = 0; round < a->rounds; round++) {
    /* A new seeded order every round: what runs just before a runner (whose threads may still
     * spin, whose data filled the caches) changes from round to round. */
    for (int j = nc - 1; j > 0; j--) {
      rng = rng * 6364136223846793005ull + 1442695040888963407ull;
      int pick = (int)((rng >> 33) % (uint64_t)(j + 1)), keep = order[j];
      order[j] = order[pick];
      order[pick] = keep;
    }
    for (int j = 0; j < nc; j++) {
      bm_config *c = &m->configs[order[j]];
      if (c->ok) config_run(r, c);
    }
    fprintf(stderr, "bench models: %s: round %lld/%lld (%.1f s)\n", m->name, (long long)(round + 1),
            (long long)a->rounds, (double)(mx__now_ns() - t0) / 1e9);
  }
  for (int k = 0; k < nc; k++)
    if (a->use[m->configs[k].runner] && r->started[m->configs[k].runner]) config_drop(r, &m->configs[k]);
}

/* --- the report ----------------------------------------------------------------------------- */

typedef struct bm_stat {
  bool ok;
  double median, p10, p90; /* milliseconds */
  int64_t n;
} bm_stat;

static bm_stat stat_of(bm_config *c) {
  bm_stat s = {0};
  if (!c->ok || c->n == 0) return s;
  s.ok = true;
  s.n = c->n;
  s.median = (double)mx_cli_quantile(c->samples, (size_t)c->n, 0.5) / 1e6;
  s.p10 = (double)mx_cli_quantile(c->samples, (size_t)c->n, 0.1) / 1e6;
  s.p90 = (double)mx_cli_quantile(c->samples, (size_t)c->n, 0.9) / 1e6;
  return s;
}

static bm_config *config_at(bm_model *m, const bm_args *a, int runner, int t) {
  return &m->configs[runner * a->n_threads + t];
}

static void json_ratio(FILE *f, const char *key, bm_stat x, bm_stat y) {
  fprintf(f, ", \"%s\": ", key);
  if (x.ok && y.ok && y.median > 0)
    fprintf(f, "%.4f", x.median / y.median);
  else
    fprintf(f, "null");
}

static void write_json(FILE *f, bm_run *r, bm_model *models, size_t n, int argc, char **argv) {
  bm_args *a = r->a;
  fprintf(f, "{\n \"benchmark\": \"models\",\n \"command\": ");
  char cmd[2048] = "mixrt bench";
  for (int k = 0; k < argc; k++) {
    size_t used = strlen(cmd);
    snprintf(cmd + used, sizeof cmd - used, " %s", argv[k]);
  }
  mx__json_string(f, cmd);
  fprintf(f, ",\n \"zoo\": ");
  mx__json_string(f, a->zoo);
  fprintf(f, ",\n \"settings\": {\"threads\": [");
  for (int t = 0; t < a->n_threads; t++) fprintf(f, "%s%lld", t ? ", " : "", (long long)a->threads[t]);
  fprintf(f,
          "], \"rounds\": %lld, \"steps\": %lld, \"warmup\": %lld, \"mixrt_device\": \"%s\", \"unit\": "
          "\"ms\"},\n \"runners\": {",
          (long long)a->rounds, (long long)a->steps, (long long)a->warmup, a->device);
  for (int k = 0; k < N_RUNNERS; k++) {
    fprintf(f, "%s\n  \"%s\": {\"available\": %s, \"version\": ", k ? "," : "", runner_names[k],
            r->started[k] ? "true" : "false");
    if (r->started[k])
      mx__json_string(f, r->version[k]);
    else
      fprintf(f, "null");
    fprintf(f, ", \"reason\": ");
    if (r->started[k])
      fprintf(f, "null");
    else
      mx__json_string(f, r->reason[k]);
    fprintf(f, "}");
  }
  fprintf(f, "\n },\n \"models\": [");
  for (size_t i = 0; i < n; i++) {
    bm_model *m = &models[i];
    fprintf(f, "%s\n  {\"name\": ", i ? "," : "");
    mx__json_string(f, m->name);
    fprintf(f, ", \"case\": ");
    mx__json_string(f, m->case_name);
    fprintf(f, ", \"model\": ");
    mx__json_string(f, m->path);
    fprintf(f, ", \"error\": ");
    if (m->ready)
      fprintf(f, "null");
    else
      mx__json_string(f, m->error);
    fprintf(f, ",\n   \"results\": [");
    for (int t = 0; t < a->n_threads; t++) {
      bm_stat st[N_RUNNERS];
      for (int k = 0; k < N_RUNNERS; k++) st[k] = stat_of(config_at(m, a, k, t));
      fprintf(f, "%s\n    {\"threads\": %lld, \"latency_ms\": {", t ? "," : "", (long long)a->threads[t]);
      for (int k = 0; k < N_RUNNERS; k++) {
        fprintf(f, "%s\"%s\": ", k ? ", " : "", runner_names[k]);
        if (st[k].ok)
          fprintf(f, "{\"median\": %.4f, \"p10\": %.4f, \"p90\": %.4f, \"samples\": %lld}", st[k].median,
                  st[k].p10, st[k].p90, (long long)st[k].n);
        else
          fprintf(f, "null");
      }
      fprintf(f, "},\n     \"errors\": {");
      bool first = true;
      for (int k = 0; k < N_RUNNERS; k++) {
        bm_config *c = config_at(m, a, k, t);
        if (!a->use[k] || st[k].ok) continue;
        fprintf(f, "%s\"%s\": ", first ? "" : ", ", runner_names[k]);
        mx__json_string(f, c->error[0] ? c->error : m->error);
        first = false;
      }
      fprintf(f, "}");
      json_ratio(f, "ratio_hybrid_ort", st[R_HYBRID], st[R_ORT]);
      json_ratio(f, "ratio_hybrid_torch", st[R_HYBRID], st[R_TORCH]);
      json_ratio(f, "ratio_dynamic_ort", st[R_DYNAMIC], st[R_ORT]);
      json_ratio(f, "ratio_hybrid_dynamic", st[R_HYBRID], st[R_DYNAMIC]);
      fprintf(f, "}");
    }
    /* Speed-up from the first thread count to the last: median there / median here. */
    fprintf(f, "],\n   \"speedup_last_over_first_threads\": {");
    for (int k = 0; k < N_RUNNERS; k++) {
      bm_stat lo = stat_of(config_at(m, a, k, 0)), hi = stat_of(config_at(m, a, k, a->n_threads - 1));
      fprintf(f, "%s\"%s\": ", k ? ", " : "", runner_names[k]);
      if (lo.ok && hi.ok && hi.median > 0 && a->n_threads > 1)
        fprintf(f, "%.3f", lo.median / hi.median);
      else
        fprintf(f, "null");
    }
    fprintf(f, "}}");
  }
  fprintf(f, "\n ]\n}\n");
}

static void table_cell_ms(FILE *f, bm_stat s) {
  if (s.ok)
    fprintf(f, " %.2f |", s.median);
  else
    fprintf(f, " - |");
}

static void table_cell_ratio(FILE *f, bm_stat x, bm_stat y) {
  if (x.ok && y.ok && y.median > 0)
    fprintf(f, " %.2fx |", x.median / y.median);
  else
    fprintf(f, " - |");
}

static void write_table(FILE *f, bm_run *r, bm_model *models, size_t n) {
  bm_args *a = r->a;
  fprintf(f,
          "| model | case | threads | mixrt hybrid ms | mixrt dynamic ms | ONNX Runtime ms | PyTorch ms | "
          "hybrid / ORT | hybrid / PyTorch | dynamic / ORT |\n"
          "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (size_t i = 0; i < n; i++) {
    for (int t = 0; t < a->n_threads; t++) {
      bm_stat st[N_RUNNERS];
      for (int k = 0; k < N_RUNNERS; k++) st[k] = stat_of(config_at(&models[i], a, k, t));
      fprintf(f, "| %s | %s | %lld |", models[i].name, models[i].case_name, (long long)a->threads[t]);
      for (int k = 0; k < N_RUNNERS; k++) table_cell_ms(f, st[k]);
      table_cell_ratio(f, st[R_HYBRID], st[R_ORT]);
      table_cell_ratio(f, st[R_HYBRID], st[R_TORCH]);
      table_cell_ratio(f, st[R_DYNAMIC], st[R_ORT]);
      fprintf(f, "\n");
    }
  }
}

/* A PNG of the medians through gnuplot: one cluster of bars per model and thread count, one bar
 * per runner, latency on a log scale. */
static int write_plot(bm_run *r, bm_model *models, size_t n) {
  bm_args *a = r->a;
  FILE *gp = popen("gnuplot", "w");
  if (!gp) return mx_cli_runtime_error("bench models", "--plot: cannot start gnuplot: %s", strerror(errno));
  fprintf(gp, "set terminal png size 1400,700 noenhanced\nset output ");
  mx__json_string(gp, a->plot); /* a quoted string gnuplot reads alike */
  fprintf(gp,
          "\nset style data histograms\nset style histogram clustered gap 1\nset style fill solid border -1\n"
          "set logscale y\nset ylabel 'median step latency (ms)'\nset xtics rotate by -35\n"
          "set datafile missing '?'\nset key top right\nset grid ytics\n"
          "set title 'mixrt bench models: batch 1, median of %lld steps'\n$data << EOD\n",
          (long long)(a->rounds * a->steps));
  for (size_t i = 0; i < n; i++)
    for (int t = 0; t < a->n_threads; t++) {
      fprintf(gp, "\"%s %lldt\"", models[i].name, (long long)a->threads[t]);
      for (int k = 0; k < N_RUNNERS; k++) {
        bm_stat st = stat_of(config_at(&models[i], a, k, t));
        if (st.ok)
          fprintf(gp, " %.5f", st.median);
        else
          fprintf(gp, " ?");
      }
      fprintf(gp, "\n");
    }
  fprintf(gp, "EOD\nplot");
  for (int k = 0; k < N_RUNNERS; k++)
    fprintf(gp, "%s $data using %d%s title '%s'", k ? "," : "", k + 2, k ? "" : ":xtic(1)", runner_titles[k]);
  fprintf(gp, "\n");
  int status = pclose(gp);
  if (status != 0) return mx_cli_runtime_error("bench models", "--plot: gnuplot failed (status %d)", status);
  fprintf(stderr, "bench models: plot written to %s\n", a->plot);
  return MX_EXIT_OK;
}

/* --- the command ---------------------------------------------------------------------------- */

/* The case of a model's manifest entry that runs: the first of its cases whose name --cases
 * lists, or its first case when none is listed. */
static const mx_bmj *pick_case(const bm_args *a, const mx_bmj *cases) {
  if (a->cases)
    for (size_t c = 0; c < cases->n; c++) {
      const char *n = mx__bmj_str(&cases->items[c], "name");
      if (n && listed(a->cases, n)) return &cases->items[c];
    }
  return &cases->items[0];
}

/* Fills models[] from the manifest (the models --models names, each with the case pick_case
 * chooses). */
static int read_manifest(bm_args *a, mx_bmj *man, bm_model *models, size_t *n) {
  const mx_bmj *list = mx__bmj_get(man, "models");
  if (!list || list->kind != MX_BMJ_ARRAY)
    return mx_cli_runtime_error("bench models", "%s/manifest.json has no \"models\" list", a->zoo);
  *n = 0;
  for (size_t k = 0; k < list->n; k++) {
    const mx_bmj *e = &list->items[k];
    const char *name = mx__bmj_str(e, "name"), *file = mx__bmj_str(e, "model");
    const mx_bmj *cases = mx__bmj_get(e, "cases");
    if (!name || !file || !cases || cases->kind != MX_BMJ_ARRAY || !cases->n) continue;
    if (!listed(a->models, name)) continue;
    if (*n == MAX_MODELS) return mx_cli_usage_error("bench models", "at most %d models", MAX_MODELS);
    bm_model *m = &models[(*n)++];
    m->name = name;
    m->file = file;
    m->bench_case = pick_case(a, cases);
    m->case_name = mx__bmj_str(m->bench_case, "name");
    if (!m->case_name) m->case_name = "?";
    if (file[0] == '/')
      snprintf(m->path, sizeof m->path, "%s", file);
    else
      snprintf(m->path, sizeof m->path, "%s/%s", a->zoo, file);
  }
  if (a->models) {
    /* Every name asked for must be in the manifest. */
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", a->models);
    for (char *save = NULL, *w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
      bool found = false;
      for (size_t k = 0; k < *n; k++) found |= strcmp(models[k].name, w) == 0;
      if (!found)
        return mx_cli_usage_error("bench models", "--models: no model called '%s' in %s/manifest.json", w,
                                  a->zoo);
    }
  }
  if (a->cases) {
    /* Every case asked for must be one of a chosen model's. */
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", a->cases);
    for (char *save = NULL, *w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
      bool found = false;
      for (size_t k = 0; k < *n; k++) found |= strcmp(models[k].case_name, w) == 0;
      if (!found)
        return mx_cli_usage_error("bench models",
                                  "--cases: no model run has a case called '%s' (or another "
                                  "case listed comes first for it)",
                                  w);
    }
  }
  if (*n == 0) return mx_cli_runtime_error("bench models", "no model to run in %s/manifest.json", a->zoo);
  return MX_EXIT_OK;
}

int mx_cmd_bench_models(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], "--serve") == 0) return mx__bench_models_serve(argc, argv);
  for (int i = 1; i < argc; i++)
    if (mx_cli_is_help(argv[i])) {
      mx_cmd_bench_models_help(stdout);
      return MX_EXIT_OK;
    }
  static bm_args a;
  memset(&a, 0, sizeof a);
  int rc = parse(argc, argv, &a);
  if (rc != MX_EXIT_OK) return rc;
  char path[PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/manifest.json", a.zoo);
  char *text = read_file(path);
  if (!text)
    return mx_cli_runtime_error("bench models",
                                "%s: %s. Export the zoo first: /usr/bin/python3 bench/zoo/export.py %s "
                                "(see bench/zoo/README.md), or give --zoo DIR",
                                path, strerror(errno), a.zoo);
  char why[256];
  mx_bmj *man = mx__bmj_parse(text, why, sizeof why);
  free(text);
  if (!man) return mx_cli_runtime_error("bench models", "%s: not JSON (%s)", path, why);
  static bm_model models[MAX_MODELS];
  memset(models, 0, sizeof models);
  size_t n = 0;
  rc = read_manifest(&a, man, models, &n);
  if (rc != MX_EXIT_OK) {
    mx__bmj_free(man);
    return rc;
  }
  if (a.layers) {
    for (size_t k = 0; k < n && rc == MX_EXIT_OK; k++) {
      const mx_bmj *c = models[k].bench_case;
      const mx_bmj *inputs = c ? mx__bmj_get(c, "inputs") : NULL;
      char input[PATH_MAX + 300] = "";
      if (inputs && inputs->kind == MX_BMJ_OBJECT && inputs->n == 1 && inputs->items[0].kind == MX_BMJ_STRING)
        snprintf(input, sizeof input, "%s/%s", a.zoo, inputs->items[0].text);
      printf("## %s (%s)\n\n", models[k].name, models[k].case_name);
      for (int t = 0; t < a.n_threads && rc == MX_EXIT_OK; t++)
        rc = mx__bench_models_layers(models[k].path, input[0] ? input : NULL, (int32_t)a.threads[t],
                                     a.rounds * a.steps, stdout);
    }
    mx__bmj_free(man);
    return rc;
  }
  char work[PATH_MAX];
  bool own_work = !a.work;
  if (a.work) {
    snprintf(work, sizeof work, "%s", a.work);
    if (mkdir(work, 0755) != 0 && errno != EEXIST) {
      mx__bmj_free(man);
      return mx_cli_runtime_error("bench models", "--work-dir %s: %s", work, strerror(errno));
    }
  } else {
    const char *tmp = getenv("TMPDIR");
    snprintf(work, sizeof work, "%s/mixrt-bench-models-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(work)) {
      mx__bmj_free(man);
      return mx_cli_runtime_error("bench models", "cannot create a work folder %s: %s", work,
                                  strerror(errno));
    }
  }
  for (size_t k = 0; k < n; k++) {
    bm_model *m = &models[k];
    snprintf(m->feed_dir, sizeof m->feed_dir, "%s/%s", work, m->name);
    if (mkdir(m->feed_dir, 0755) != 0 && errno != EEXIST) {
      /* Named from its parts: m->feed_dir shares the models array with m->error (-Wrestrict). */
      snprintf(m->error, sizeof m->error, "%s/%s: %s", work, m->name, strerror(errno));
      continue;
    }
    m->ready = prepare_inputs(m, m->bench_case, a.zoo);
    if (!m->ready) fprintf(stderr, "bench models: %s: %s\n", m->name, m->error);
  }
  /* A runner process that dies must not take this one with it on the next write. */
  signal(SIGPIPE, SIG_IGN);
  static bm_run r;
  memset(&r, 0, sizeof r);
  r.a = &a;
  start_runners(&r);
  for (size_t k = 0; k < n; k++)
    if (models[k].ready) measure_model(&r, &models[k]);
  stop_runners(&r);
  if (own_work) remove_work(work);
  FILE *jf = a.table ? NULL : stdout;
  if (a.json && !(jf = fopen(a.json, "w"))) {
    rc = mx_cli_runtime_error("bench models", "--json %s: %s", a.json, strerror(errno));
    jf = NULL;
  }
  if (jf) {
    write_json(jf, &r, models, n, argc, argv);
    if (jf != stdout && fclose(jf) != 0)
      rc = mx_cli_runtime_error("bench models", "--json %s: write failed", a.json);
  }
  if (a.table) write_table(stdout, &r, models, n);
  if (a.plot && rc == MX_EXIT_OK) rc = write_plot(&r, models, n);
  bool any = false;
  for (size_t k = 0; k < n; k++)
    for (int c = 0; c < n_configs(&a); c++) any |= models[k].configs[c].ok;
  for (size_t k = 0; k < n; k++)
    for (int c = 0; c < n_configs(&a); c++) free(models[k].configs[c].samples);
  mx__bmj_free(man);
  if (rc == MX_EXIT_OK && !any) rc = mx_cli_runtime_error("bench models", "no runner measured any model");
  return rc;
}
