/* `mixrt bench llm --processes N` summed up: the document that holds every process's JSON in
 * "runs", the figures across the processes per point ("across_processes"), the targets on the
 * median over processes, whether hybrid / dynamic stands out from the machine's own spread
 * (hybrid / control, "beyond_control"), and the --table of the processes' medians. Each part of
 * the document is written by a function of its own, in the document's order. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench/llm/llm_impl.h"
#include "tools/cli.h"

static double ratio(const point *pt, int other) {
  const timing *h = &pt->t[SYS_HYBRID], *o = &pt->t[other];
  return h->have && o->have && o->median > 0 ? h->median / o->median : NAN;
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
  *lower = mx__llm_median(xs, (size_t)n) < mx__llm_median(ys, (size_t)n);
  return mx__llm_mann_whitney_p(xs, ys, n);
}

static void json_list(const double *v, int n) {
  putchar('[');
  for (int i = 0; i < n; i++) {
    if (i) printf(", ");
    mx__llm_json_num(v[i]);
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
  double med = mx__llm_median(scratch, (size_t)n);
  if (isnan(med)) {
    printf("null");
    return;
  }
  printf("{\"median\": ");
  mx__llm_json_num(med);
  printf(", \"min\": ");
  mx__llm_json_num(lo);
  printf(", \"max\": ");
  mx__llm_json_num(hi);
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
  printf("{\"hybrid_faster\": %lld, \"rounds\": %lld, \"sign_test_p\": ", (long long)faster,
         (long long)rounds);
  mx__llm_json_num(mx__llm_sign_test(faster, rounds));
  printf("}");
}

/* Per configuration and system: the target figure, the worst point's median over processes
 * (a ratio to `other`), and the worst single process at any point. */
static void ratio_figures(const llm_args *a, const process_run *runs, int n, int c, int other,
                          double *scratch, double *worst_median, double *worst_process) {
  *worst_median = *worst_process = NAN;
  for (size_t k = 0; k < a->n_past; k++) {
    ratios(runs, n, c, k, other, scratch);
    for (int i = 0; i < n; i++)
      if (isfinite(scratch[i]) && (isnan(*worst_process) || scratch[i] > *worst_process))
        *worst_process = scratch[i];
    double med = mx__llm_median(scratch, (size_t)n);
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

/* "runs": every process's document, whole. */
static void json_runs(const process_run *runs, int n) {
  printf(",\n \"processes\": %d,\n \"runs\": [\n", n);
  for (int i = 0; i < n; i++) printf("%s%s", runs[i].json, i + 1 < n ? ",\n" : "\n");
  printf(" ]");
}

/* A point's "step_us_median_per_process": every system's median in each process. */
static void json_medians_per_process(const process_run *runs, int n, int c, size_t k, double *scratch) {
  printf("\"step_us_median_per_process\": {");
  for (int s = 0; s < SYS_COUNT; s++) {
    for (int i = 0; i < n; i++) {
      const timing *t = &runs[i].res[c].points[k].t[s];
      scratch[i] = t->have ? t->median : NAN;
    }
    printf("%s\"%s\": ", s ? ", " : "", sys_names[s]);
    json_list(scratch, n);
  }
  printf("}");
}

/* A point's "dynamic_against_control": the Mann-Whitney test of against_control (null
 * without a control). */
static void json_against_control(const process_run *runs, int n, int c, size_t k, double *scratch) {
  bool lower = false;
  double p = against_control(runs, n, c, k, scratch, &lower);
  printf(",\n     \"dynamic_against_control\": ");
  if (isnan(p)) {
    printf("null");
  } else {
    printf("{\"mann_whitney_p\": ");
    mx__llm_json_num(p);
    printf(", \"dynamic_ratio_median_lower\": %s}", lower ? "true" : "false");
  }
}

/* Whether hybrid and dynamic equalled the reference at point (c, k) in every process: 1, 0,
 * or -1 when some process did not compare them. */
static int same_in_every_process(const process_run *runs, int n, int c, size_t k) {
  int same = 1;
  for (int i = 0; i < n; i++) {
    const int *v = runs[i].res[c].points[k].same_as_ref;
    if (v[0] < 0 || v[1] < 0)
      same = -1;
    else if (same == 1 && !(v[0] && v[1]))
      same = 0;
  }
  return same;
}

/* One entry of a configuration's "points" in "across_processes". */
static void json_across_point(const process_run *runs, int n, int c, size_t k, double *scratch) {
  printf("%s\n    {\"past\": %lld, ", k ? "," : "", (long long)runs[0].res[c].points[k].past);
  json_medians_per_process(runs, n, c, k, scratch);
  printf(",\n     \"ratio_hybrid_dynamic\": ");
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
  printf("}");
  json_against_control(runs, n, c, k, scratch);
  const int same = same_in_every_process(runs, n, c, k);
  printf(",\n     \"hybrid_and_dynamic_equal_reference_in_every_process\": %s}", same < 0 ? "null"
                                                                                 : same   ? "true"
                                                                                          : "false");
}

/* "across_processes": per configuration and point, the figures over the processes. */
static void json_across_processes(const llm_args *a, const process_run *runs, int n, double *scratch) {
  printf(
      ",\n \"across_processes\": {\"statistic\": \"per point, each process's ratio of the hybrid's median to "
      "the other system's; the targets take the median of those over the processes (at the worst point): a "
      "process's memory placement on a shared host moves its ratio by several percent either way, which "
      "rounds within one process cannot even out\",\n  \"configs\": [");
  bool first_cfg = true;
  for (int c = 0; c < N_CONFIGS; c++) {
    if (!runs[0].res[c].run) continue;
    printf("%s\n   {\"config\": \"%s\", \"points\": [", first_cfg ? "" : ",", config_names[c]);
    first_cfg = false;
    for (size_t k = 0; k < a->n_past; k++) json_across_point(runs, n, c, k, scratch);
    printf("\n   ]}");
  }
  printf("\n  ]}");
}

/* "targets": per configuration, the worst point's median over processes of hybrid / ort and
 * hybrid / dynamic (with the worst single process), and the logits difference of every
 * process. */
static void json_summary_targets(const llm_args *a, const process_run *runs, int n, double *scratch) {
  printf(",\n \"targets\": [");
  bool first = true;
  const char *why_ort = mx__llm_no_ort_reason(a);
  if (!why_ort) why_ort = "ONNX Runtime or the hybrid was not measured (see the runs)";
  const char *why_dyn = "hybrid or dynamic not measured";
  for (int c = 0; c < N_CONFIGS; c++) {
    if (!runs[0].res[c].run) continue;
    double med, one;
    char name[128];
    ratio_figures(a, runs, n, c, SYS_ORT, scratch, &med, &one);
    snprintf(name, sizeof name, "%s: hybrid / ort <= %.1f (median over processes)", config_names[c],
             config_ort_limit[c]);
    mx__llm_json_target(&first, name, med, config_ort_limit[c], why_ort, one);
    ratio_figures(a, runs, n, c, SYS_DYNAMIC, scratch, &med, &one);
    snprintf(name, sizeof name, "%s: hybrid / dynamic < 1 (median over processes%s)", config_names[c],
             a->skip_kernels ? "; kernels skipped: mixrt's own cost" : "");
    mx__llm_json_target(&first, name, med, 1.0, why_dyn, one);
    snprintf(name, sizeof name, "%s: logits relative difference to ort <= 1e-4 (every process)",
             config_names[c]);
    mx__llm_json_target(&first, name, worst_logits(a, runs, n, c), 1e-4, why_ort, NAN);
  }
  printf("\n ]");
}

/* "beyond_control": per configuration, at how many points the hybrid / dynamic ratios were
 * lower than the hybrid / control ratios with p < 0.05, i.e. shown beyond the machine's own
 * spread (null without a control). */
static void json_beyond_control(const llm_args *a, const process_run *runs, int n, double *scratch) {
  printf(",\n \"beyond_control\": ");
  if (!a->systems[SYS_CONTROL]) {
    printf("null");
    return;
  }
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
    printf("%s\n    {\"config\": \"%s\", \"points_shown\": %d, \"points\": %zu, \"worst_p\": ",
           first_c ? "" : ",", config_names[c], shown, a->n_past);
    mx__llm_json_num(worst_p);
    printf("}");
    first_c = false;
  }
  printf("\n ]");
}

void mx__llm_print_summary(const llm_args *a, int argc, char **argv, const process_run *runs, int n,
                           double *scratch) {
  mx__llm_json_head(argc, argv);
  json_runs(runs, n);
  json_across_processes(a, runs, n, scratch);
  json_summary_targets(a, runs, n, scratch);
  json_beyond_control(a, runs, n, scratch);
  printf("}\n");
}

/* --table with --processes: every system's median, p10 and p90 at every point, each the median
 * of the processes' figures (a figure no process measured stays unmeasured). */
int mx__llm_write_median_table(const llm_args *a, const process_run *runs, int n, double *scratch) {
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
          *fig[f] = mx__llm_median(scratch, (size_t)n);
        }
        pt->t[s].have = isfinite(pt->t[s].median);
      }
    }
  }
  int rc = mx__llm_write_table(a, res, n);
  free(res);
  return rc;
}
