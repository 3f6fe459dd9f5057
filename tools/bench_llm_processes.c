/* `mixrt bench llm --processes N`: the same measurement in N fresh processes, one after another,
 * summed up across them.
 *
 * Why: on a shared host, where a process's memory lands (its pages in the last-level cache and
 * in the host's memory) is decided once per process, and it moves a memory-bound step by
 * several percent, one system more than another. Within a process, rounds and Williams orders
 * even out the machine's drifts; only more processes even out placement. Each process is this
 * executable run again with the same options and `--results FILE`, its JSON document kept
 * whole in "runs". "across_processes" gives, per point, every process's ratio of medians and
 * their median, how many processes had the hybrid ahead, and the rounds compared pooled over
 * all processes with their sign test; the targets use the median over processes of each
 * point's ratio (the worst point), and say which single process was worst. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/file.h"
#include "tools/bench_llm.h"
#include "tools/cli.h"

/* One process's figures and its JSON document. */
typedef struct process_run {
  config_result res[N_CONFIGS];
  char *json; /* the document it printed (owned), trailing white space removed */
} process_run;

/* Runs process `index`: this executable with the user's options (without --processes) and
 * --results, its stdout into `json_path`. */
static int run_one(const char *exe, int argc, char **argv, int index, const char *json_path, const char *bin_path) {
  char **cargv = calloc((size_t)argc + 6, sizeof *cargv);
  if (!cargv) return mx_cli_runtime_error(CMD, "out of memory");
  int n = 0;
  cargv[n++] = "mixrt";
  cargv[n++] = "bench";
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--processes") == 0 || strcmp(argv[i], "--table") == 0) {
      i++; /* and its value: the table is written once, from every process's figures */
      continue;
    }
    cargv[n++] = argv[i];
  }
  cargv[n++] = "--results";
  cargv[n++] = (char *)bin_path;
  cargv[n] = NULL;
  int fd = open(json_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    free(cargv);
    return mx_cli_runtime_error(CMD, "cannot create %s: %s", json_path, strerror(errno));
  }
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fd, STDOUT_FILENO);
    close(fd);
    execv(exe, cargv);
    fprintf(stderr, "mixrt " CMD ": cannot run %s: %s\n", exe, strerror(errno));
    _exit(127);
  }
  close(fd);
  free(cargv);
  if (pid < 0) return mx_cli_runtime_error(CMD, "cannot start process %d: %s", index + 1, strerror(errno));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return mx_cli_runtime_error(CMD, "process %d failed (%s %d); its messages are above", index + 1,
                                WIFEXITED(status) ? "exit status" : "signal",
                                WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
  return MX_EXIT_OK;
}

/* Largest document or figures file a process may leave: far above what any run writes. */
#define MAX_PROCESS_FILE ((size_t)1 << 30)

static int load_one(process_run *pr, int index, const char *json_path, const char *bin_path) {
  uint8_t *bin = NULL, *json = NULL;
  size_t size = 0;
  mx_error err;
  llm_results_header h;
  bool ok = mx__read_file(bin_path, MAX_PROCESS_FILE, &bin, &size, &err) == MX_OK &&
            size == sizeof h + sizeof pr->res;
  if (ok) {
    memcpy(&h, bin, sizeof h);
    ok = memcmp(h.magic, "MXBLLM1", 8) == 0 && h.result_size == sizeof(config_result) && h.n_configs == N_CONFIGS;
  }
  if (ok) memcpy(pr->res, bin + sizeof h, sizeof pr->res);
  free(bin);
  if (!ok) return mx_cli_runtime_error(CMD, "process %d: its figures in %s are missing or malformed", index + 1, bin_path);
  if (mx__read_file(json_path, MAX_PROCESS_FILE, &json, &size, &err) != MX_OK)
    return mx_cli_runtime_error(CMD, "process %d: %s", index + 1, err.message);
  pr->json = (char *)json; /* NUL-terminated */
  while (size && (pr->json[size - 1] == '\n' || pr->json[size - 1] == ' ')) pr->json[--size] = '\0';
  return MX_EXIT_OK;
}

/* --- summing up ------------------------------------------------------------------------------ */

static double ratio(const point *pt, int other) {
  const timing *h = &pt->t[SYS_HYBRID], *o = &pt->t[other];
  return h->have && o->have && o->median > 0 ? h->median / o->median : NAN;
}

/* Two-sided Mann-Whitney test of whether the finite values of x[0..n) and y[0..n) come from
 * one distribution: exact (by counting the orders of the two samples) while both have at most
 * 20 values, the normal approximation beyond. Ties count a half. NAN with fewer than 2 each. */
static double mann_whitney_p(const double *x, const double *y, int n) {
  int m1 = 0, m2 = 0;
  double u = 0.0; /* pairs with x above y */
  for (int i = 0; i < n; i++) {
    if (!isfinite(x[i])) continue;
    m1++;
    for (int j = 0; j < n; j++)
      if (isfinite(y[j])) u += x[i] > y[j] ? 1.0 : x[i] == y[j] ? 0.5 : 0.0;
  }
  for (int j = 0; j < n; j++) m2 += isfinite(y[j]);
  if (m1 < 2 || m2 < 2) return NAN;
  const int umax = m1 * m2;
  double p;
  if (m1 <= 20 && m2 <= 20) {
    /* ways[a][b][k]: orders of a x's and b y's with k pairs of x above y. */
    const int w = umax + 1;
    double *ways = calloc((size_t)(m1 + 1) * (size_t)(m2 + 1) * (size_t)w, sizeof *ways);
    if (!ways) return NAN;
#define WAYS(a, b, k) ways[((size_t)(a) * (size_t)(m2 + 1) + (size_t)(b)) * (size_t)w + (size_t)(k)]
    for (int a = 0; a <= m1; a++)
      for (int b = 0; b <= m2; b++) {
        if (a == 0 || b == 0) {
          WAYS(a, b, 0) = 1.0;
          continue;
        }
        for (int k = 0; k <= a * b; k++) /* the largest value is an x (above all b y's) or a y */
          WAYS(a, b, k) = (k >= b ? WAYS(a - 1, b, k - b) : 0.0) + WAYS(a, b - 1, k);
      }
    double total = 0.0, low = 0.0, high = 0.0;
    for (int k = 0; k <= umax; k++) {
      total += WAYS(m1, m2, k);
      if (k <= floor(u)) low += WAYS(m1, m2, k);
      if (k >= ceil(u)) high += WAYS(m1, m2, k);
    }
#undef WAYS
    free(ways);
    p = 2.0 * (low < high ? low : high) / total;
  } else {
    double mean = umax / 2.0, sd = sqrt((double)m1 * m2 * (m1 + m2 + 1) / 12.0);
    double z = (fabs(u - mean) - 0.5) / sd;
    p = z > 0 ? erfc(z / sqrt(2.0)) : 1.0;
  }
  return p < 1.0 ? p : 1.0;
}

/* Every process's hybrid / `other` ratio at point (c, k) into out[0..n) (NAN where either
 * was not measured). */
static void ratios(const process_run *runs, int n, int c, size_t k, int other, double *out) {
  for (int i = 0; i < n; i++) out[i] = ratio(&runs[i].res[c].points[k], other);
}

/* At point (c, k): whether the processes' hybrid / dynamic ratios differ from their hybrid /
 * control ratios (Mann-Whitney p; NAN without a control), and whether the former's median is
 * the lower. scratch holds 2n values. */
static double against_control(const process_run *runs, int n, int c, size_t k, double *scratch, bool *lower) {
  double *xs = scratch, *ys = scratch + n;
  ratios(runs, n, c, k, SYS_DYNAMIC, xs);
  ratios(runs, n, c, k, SYS_CONTROL, ys);
  *lower = mx_cli_median(xs, (size_t)n) < mx_cli_median(ys, (size_t)n);
  return mann_whitney_p(xs, ys, n);
}

static void json_list(const double *v, int n) {
  putchar('[');
  for (int i = 0; i < n; i++) {
    if (i) printf(", ");
    mx_cli_json_num(v[i]);
  }
  putchar(']');
}

/* The hybrid's ratio to system `other` at point (c, k) over the processes. */
static void json_ratio_across(const process_run *runs, int n, int c, size_t k, int other, double *scratch) {
  int below = 0;
  double lo = NAN, hi = NAN;
  ratios(runs, n, c, k, other, scratch);
  for (int i = 0; i < n; i++) {
    if (!isfinite(scratch[i])) continue;
    below += scratch[i] < 1.0;
    lo = isnan(lo) || scratch[i] < lo ? scratch[i] : lo;
    hi = isnan(hi) || scratch[i] > hi ? scratch[i] : hi;
  }
  double med = mx_cli_median(scratch, (size_t)n);
  if (isnan(med)) {
    printf("null");
    return;
  }
  printf("{\"median\": ");
  mx_cli_json_num(med);
  printf(", \"min\": ");
  mx_cli_json_num(lo);
  printf(", \"max\": ");
  mx_cli_json_num(hi);
  printf(", \"processes_below_1\": %d, \"per_process\": ", below);
  json_list(scratch, n);
  printf("}");
}

static void json_pooled_rounds(const process_run *runs, int n, int c, size_t k, int other) {
  int64_t faster = 0, rounds = 0;
  for (int i = 0; i < n; i++) {
    const round_pairs *rp = &runs[i].res[c].points[k].vs[other];
    if (!rp->have) continue;
    faster += rp->hybrid_faster;
    rounds += rp->rounds;
  }
  if (!rounds) {
    printf("null");
    return;
  }
  printf("{\"hybrid_faster\": %lld, \"rounds\": %lld, \"sign_test_p\": ", (long long)faster, (long long)rounds);
  mx_cli_json_num(mx_cli_llm_sign_test(faster, rounds));
  printf("}");
}

/* Per configuration and system: the target figure, the worst point's median over processes
 * (a ratio to `other`), and the worst single process at any point. */
static void ratio_figures(const llm_args *a, const process_run *runs, int n, int c, int other, double *scratch,
                          double *worst_median, double *worst_process) {
  *worst_median = *worst_process = NAN;
  for (size_t k = 0; k < a->n_past; k++) {
    ratios(runs, n, c, k, other, scratch);
    for (int i = 0; i < n; i++)
      if (isfinite(scratch[i]) && (isnan(*worst_process) || scratch[i] > *worst_process)) *worst_process = scratch[i];
    double med = mx_cli_median(scratch, (size_t)n);
    if (isfinite(med) && (isnan(*worst_median) || med > *worst_median)) *worst_median = med;
  }
}

static double worst_logits(const llm_args *a, const process_run *runs, int n, int c) {
  double w = NAN;
  for (int i = 0; i < n; i++)
    for (size_t k = 0; k < a->n_past; k++) {
      const diff *d = &runs[i].res[c].points[k].to_ort[SYS_HYBRID];
      if (d->have && (isnan(w) || d->logits_rel > w)) w = d->logits_rel;
    }
  return w;
}

static void print_summary(const llm_args *a, int argc, char **argv, const process_run *runs, int n, double *scratch) {
  mx_cli_llm_json_head(argc, argv);
  printf(",\n \"processes\": %d,\n \"runs\": [\n", n);
  for (int i = 0; i < n; i++) printf("%s%s", runs[i].json, i + 1 < n ? ",\n" : "\n");
  printf(" ],\n \"across_processes\": {\"statistic\": \"per point, each process's ratio of the hybrid's median to "
         "the other system's; the targets take the median of those over the processes (at the worst point): a "
         "process's memory placement on a shared host moves its ratio by several percent either way, which "
         "rounds within one process cannot even out\",\n  \"configs\": [");
  bool first_cfg = true;
  for (int c = 0; c < N_CONFIGS; c++) {
    if (!runs[0].res[c].run) continue;
    printf("%s\n   {\"config\": \"%s\", \"points\": [", first_cfg ? "" : ",", config_names[c]);
    first_cfg = false;
    for (size_t k = 0; k < a->n_past; k++) {
      printf("%s\n    {\"past\": %lld, \"step_us_median_per_process\": {", k ? "," : "",
             (long long)runs[0].res[c].points[k].past);
      for (int s = 0; s < SYS_COUNT; s++) {
        for (int i = 0; i < n; i++) {
          const timing *t = &runs[i].res[c].points[k].t[s];
          scratch[i] = t->have ? t->median : NAN;
        }
        printf("%s\"%s\": ", s ? ", " : "", sys_names[s]);
        json_list(scratch, n);
      }
      printf("},\n     \"ratio_hybrid_dynamic\": ");
      json_ratio_across(runs, n, c, k, SYS_DYNAMIC, scratch);
      printf(",\n     \"ratio_hybrid_ort\": ");
      json_ratio_across(runs, n, c, k, SYS_ORT, scratch);
      printf(",\n     \"ratio_hybrid_control\": ");
      json_ratio_across(runs, n, c, k, SYS_CONTROL, scratch);
      printf(",\n     \"rounds_compared_pooled\": {\"dynamic\": ");
      json_pooled_rounds(runs, n, c, k, SYS_DYNAMIC);
      printf(", \"reference\": ");
      json_pooled_rounds(runs, n, c, k, SYS_REFERENCE);
      printf(", \"ort\": ");
      json_pooled_rounds(runs, n, c, k, SYS_ORT);
      printf(", \"control\": ");
      json_pooled_rounds(runs, n, c, k, SYS_CONTROL);
      bool lower = false;
      double p = against_control(runs, n, c, k, scratch, &lower);
      printf("},\n     \"dynamic_against_control\": ");
      if (isnan(p)) {
        printf("null");
      } else {
        printf("{\"mann_whitney_p\": ");
        mx_cli_json_num(p);
        printf(", \"dynamic_ratio_median_lower\": %s}", lower ? "true" : "false");
      }
      int same = 1;
      for (int i = 0; i < n; i++) {
        const int *v = runs[i].res[c].points[k].same_as_ref;
        if (v[0] < 0 || v[1] < 0) same = -1;
        else if (same == 1 && !(v[0] && v[1])) same = 0;
      }
      printf(",\n     \"hybrid_and_dynamic_equal_reference_in_every_process\": %s}",
             same < 0 ? "null" : same ? "true" : "false");
    }
    printf("\n   ]}");
  }
  printf("\n  ]},\n \"targets\": [");
  bool first = true;
  const char *why_ort = mx_cli_llm_no_ort_reason(a);
  if (!why_ort) why_ort = "ONNX Runtime or the hybrid was not measured (see the runs)";
  const char *why_dyn = "hybrid or dynamic not measured";
  for (int c = 0; c < N_CONFIGS; c++) {
    if (!runs[0].res[c].run) continue;
    double med, one;
    char name[128];
    ratio_figures(a, runs, n, c, SYS_ORT, scratch, &med, &one);
    snprintf(name, sizeof name, "%s: hybrid / ort <= %.1f (median over processes)", config_names[c],
             config_ort_limit[c]);
    mx_cli_llm_json_target(&first, name, med, config_ort_limit[c], why_ort, one);
    ratio_figures(a, runs, n, c, SYS_DYNAMIC, scratch, &med, &one);
    snprintf(name, sizeof name, "%s: hybrid / dynamic < 1 (median over processes%s)", config_names[c],
             a->skip_kernels ? "; kernels skipped: mixrt's own cost" : "");
    mx_cli_llm_json_target(&first, name, med, 1.0, why_dyn, one);
    snprintf(name, sizeof name, "%s: logits relative difference to ort <= 1e-4 (every process)", config_names[c]);
    mx_cli_llm_json_target(&first, name, worst_logits(a, runs, n, c), 1e-4, why_ort, NAN);
  }
  printf("\n ],\n \"beyond_control\": ");
  if (!a->systems[SYS_CONTROL]) {
    printf("null");
  } else {
    /* Per configuration: at how many points the hybrid / dynamic ratios were lower than the
     * hybrid / control ratios with p < 0.05, i.e. shown beyond the machine's own spread. */
    printf("[");
    bool first_c = true;
    for (int c = 0; c < N_CONFIGS; c++) {
      if (!runs[0].res[c].run) continue;
      int shown = 0;
      double worst_p = NAN;
      for (size_t k = 0; k < a->n_past; k++) {
        bool lower = false;
        double p = against_control(runs, n, c, k, scratch, &lower);
        if (!isnan(p) && lower && p < 0.05) shown++;
        if (!isnan(p) && (isnan(worst_p) || (lower ? p : 1.0) > worst_p)) worst_p = lower ? p : 1.0;
      }
      printf("%s\n    {\"config\": \"%s\", \"points_shown\": %d, \"points\": %zu, \"worst_p\": ", first_c ? "" : ",",
             config_names[c], shown, a->n_past);
      mx_cli_json_num(worst_p);
      printf("}");
      first_c = false;
    }
    printf("\n ]");
  }
  printf("}\n");
}

/* --table with --processes: every system's median, p10 and p90 at every point, each the median
 * of the processes' figures (a figure no process measured stays unmeasured). */
static int write_median_table(const llm_args *a, const process_run *runs, int n, double *scratch) {
  config_result *res = calloc(N_CONFIGS, sizeof *res);
  if (!res) return mx_cli_runtime_error(CMD, "out of memory");
  for (int c = 0; c < N_CONFIGS; c++) {
    res[c].run = runs[0].res[c].run;
    for (size_t k = 0; k < a->n_past; k++) {
      point *pt = &res[c].points[k];
      pt->past = runs[0].res[c].points[k].past;
      for (int s = 0; s < SYS_COUNT; s++) {
        double *fig[3] = {&pt->t[s].median, &pt->t[s].p10, &pt->t[s].p90};
        for (int f = 0; f < 3; f++) {
          for (int i = 0; i < n; i++) {
            const timing *t = &runs[i].res[c].points[k].t[s];
            scratch[i] = !t->have ? NAN : f == 0 ? t->median : f == 1 ? t->p10 : t->p90;
          }
          *fig[f] = mx_cli_median(scratch, (size_t)n);
        }
        pt->t[s].have = isfinite(pt->t[s].median);
      }
    }
  }
  int rc = mx_cli_llm_write_table(a, res, n);
  free(res);
  return rc;
}

int mx_cli_llm_processes(const llm_args *a, int argc, char **argv) {
  char exe[4096];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (len <= 0) return mx_cli_runtime_error(CMD, "cannot find this program (/proc/self/exe): %s", strerror(errno));
  exe[len] = '\0';
  char dir[] = "/tmp/mixrt-bench-processes-XXXXXX";
  if (!mkdtemp(dir)) return mx_cli_runtime_error(CMD, "cannot create a temporary folder: %s", strerror(errno));
  const int n = (int)a->processes;
  process_run *runs = calloc((size_t)n, sizeof *runs);
  double *scratch = malloc((size_t)n * 2 * sizeof *scratch); /* two lists of n */
  int rc = runs && scratch ? MX_EXIT_OK : mx_cli_runtime_error(CMD, "out of memory");
  for (int i = 0; i < n && rc == MX_EXIT_OK; i++) {
    char json_path[128], bin_path[128];
    snprintf(json_path, sizeof json_path, "%s/process-%d.json", dir, i + 1);
    snprintf(bin_path, sizeof bin_path, "%s/process-%d.bin", dir, i + 1);
    fprintf(stderr, "mixrt " CMD ": process %d of %d\n", i + 1, n);
    rc = run_one(exe, argc, argv, i, json_path, bin_path);
    if (rc == MX_EXIT_OK) rc = load_one(&runs[i], i, json_path, bin_path);
  }
  if (rc == MX_EXIT_OK) print_summary(a, argc, argv, runs, n, scratch);
  if (rc == MX_EXIT_OK && a->table) rc = write_median_table(a, runs, n, scratch);
  for (int i = 0; runs && i < n; i++) free(runs[i].json);
  free(runs);
  free(scratch);
  mx_cli_remove_tree(dir);
  return rc;
}
