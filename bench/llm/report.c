/* What `mixrt bench llm` reports: the JSON document on stdout (each part written by a function
 * of its own, in the document's order) and the --table file for gnuplot. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bench/llm/llm_impl.h"
#include "common/json.h"
#include "mixrt/partition.h"
#include "tools/bench.h"
#include "tools/cli.h"
#include "tools/sysmem.h"

void mx__llm_json_num(double v) {
  if (isfinite(v))
    printf("%.6g", v);
  else
    printf("null");
}

static void json_timing(const timing *t) {
  if (!t->have) {
    printf("null");
    return;
  }
  printf("{\"median\": ");
  mx__llm_json_num(t->median);
  printf(", \"p10\": ");
  mx__llm_json_num(t->p10);
  printf(", \"p90\": ");
  mx__llm_json_num(t->p90);
  printf(", \"samples\": %zu}", t->samples);
}

static void json_diff(const diff *d) {
  if (!d->have) {
    printf("null");
    return;
  }
  printf("{\"logits_max_abs\": ");
  mx__llm_json_num(d->logits_abs);
  printf(", \"logits_rel\": ");
  mx__llm_json_num(d->logits_rel);
  printf(", \"present_max_abs\": ");
  mx__llm_json_num(d->present_abs);
  printf(", \"present_rel\": ");
  mx__llm_json_num(d->present_rel);
  printf("}");
}

static void json_ratio(const timing *x, const timing *y) {
  if (x->have && y->have && y->median > 0)
    mx__llm_json_num(x->median / y->median);
  else
    printf("null");
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

void mx__llm_json_head(int argc, char **argv) {
  printf("{\"benchmark\": \"llm\",\n \"command\": \"mixrt bench");
  for (int i = 0; i < argc; i++) {
    putchar(' ');
    for (const char *s = argv[i]; *s; s++) printf(*s == '"' || *s == '\\' ? "\\%c" : "%c", *s);
  }
  putchar('"');
}

void mx__llm_json_target(bool *first, const char *name, double value, double limit, const char *missing,
                         double worst_single_process) {
  printf("%s\n    {\"target\": ", *first ? "" : ",");
  mx__json_string(stdout, name);
  printf(", \"limit\": ");
  mx__llm_json_num(limit);
  printf(", \"worst\": ");
  mx__llm_json_num(value);
  printf(", \"met\": %s", isnan(value) ? "null" : value <= limit ? "true" : "false");
  if (isnan(value)) {
    printf(", \"why_null\": ");
    mx__json_string(stdout, missing);
  }
  if (!isnan(worst_single_process)) {
    printf(", \"worst_single_process\": ");
    mx__llm_json_num(worst_single_process);
  }
  printf("}");
  *first = false;
}

/* The model name of the first CPU in /proc/cpuinfo into cpu (left alone when there is none). */
static void read_cpu_model(char *cpu, size_t cap) {
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "model name", 10) == 0 && strchr(line, ':')) {
      snprintf(cpu, cap, "%s", strchr(line, ':') + 2);
      cpu[strcspn(cpu, "\n")] = '\0';
      break;
    }
  fclose(f);
}

/* "machine": the CPU, how busy the host was, and its transparent-huge-page mode. */
static void json_machine(double load) {
  char cpu[256] = "unknown";
  read_cpu_model(cpu, sizeof cpu);
  printf(",\n \"machine\": {\"cpu\": ");
  mx__json_string(stdout, cpu);
  printf(", \"online_cpus\": %ld, \"load_average_at_start\": ", sysconf(_SC_NPROCESSORS_ONLN));
  mx__llm_json_num(load);
  char thp[32];
  printf(", \"transparent_huge_pages\": ");
  mx__json_string(stdout, mx_cli_thp_mode(thp, sizeof thp));
  printf("}");
}

/* "mixrt": the device, executor and I/O the sessions ran with. */
static void json_mixrt(const llm_args *a) {
  printf(
      ",\n \"mixrt\": {\"device\": \"%s\", \"streams\": %lld, \"executor\": \"%s\", "
      "\"hybrid_static_min_ops\": %d, \"dynamic_static_min_ops\": -1, \"huge_pages\": %s, \"io\": \"%s\", "
      "\"io_means\": \"%s\", \"state\": %s, \"state_means\": \"%s\"}",
      mx_cli_device_name(a->device), (long long)a->streams, mx_cli_executor_name(a->executor),
      MX_PARTITION_DEFAULT_STATIC_MIN_OPS, a->no_huge_pages ? "false" : "true",
      a->device_io ? "device" : "host",
      a->device_io ? "inputs uploaded to device buffers before timing; outputs written into device buffers "
                     "of the step's shapes allocated before timing (zero copy)"
                   : "host input tensors; outputs allocated by the session as host tensors, released after "
                     "the timed call",
      a->no_state ? "false" : "true",
      a->no_state ? "--no-state: every step by mx_session_run, the pasts fed and the presents taken as above"
      : a->state_copy ? "the KV cache as session state through a binding (include/mixrt/binding.h), "
                        "--state-copy: pasts loaded once, kept on the device, the presents written whole "
                        "into the state's other buffer; fixed mode swaps back to the loaded rows after each "
                        "step; only the token id goes in and the logits come out (into the io above)"
                      : "the KV cache as session state through a binding (include/mixrt/binding.h): pasts "
                        "loaded once into device buffers padded to the capacity, Attention appending only "
                        "the new row in place; fixed mode forgets that row after each step (no copy); only "
                        "the token id goes in and the logits come out (into the io above)");
}

/* "method": how the samples were taken. */
static void json_method(const llm_args *a) {
  printf(",\n \"method\": {\"kernels\": \"%s\", ",
         a->skip_kernels ? "skipped: the device runs no kernel and no model "
                           "task (launches, argument copies, stream order and events as usual), so the times "
                           "are what mixrt spends "
                           "around the kernels, and outputs are not computed"
                         : "run");
  printf(
      "\"mode\": \"%s\", \"mode_means\": \"%s\", \"rounds\": %lld, \"steps_per_round\": %lld, "
      "\"min_time_s\": %g, \"warmup\": %lld, \"block_warmup\": %lld, \"token\": %d, "
      "\"past\": \"seeded random values in [-1, 1)\", \"order\": \"systems take turns by round, the orders "
      "cycling through a Williams square: each system at each position, and right after each other system, "
      "equally often; each block starts with block_warmup untimed steps\", "
      "\"rounds_compared\": \"per round, the median of the hybrid's block against the other system's block "
      "of "
      "that round\", "
      "\"unit\": \"microseconds per step\", "
      "\"relative_difference\": \"largest |x - ort| / largest |ort| over the logits (or all present "
      "tensors)\"}",
      a->decode ? "decode" : "fixed",
      a->decode ? "each system decodes greedily from the point's inputs, feeding presents back as pasts; its "
                  "state carries across rounds, so the past length grows by one per step (past_range); the "
                  "warm-up decodes from the same inputs, then the state restarts from them"
                : "every step runs on the same inputs of the point's past length",
      (long long)a->rounds, (long long)a->steps, a->decode ? 0.0 : a->min_time, (long long)a->warmup,
      (long long)a->block_warmup, TOKEN);
}

/* "ort": whether ONNX Runtime ran (or why not), its versions and session options. */
static void json_ort(const peer *p) {
  bool ort_on = p->pid > 0;
  printf(",\n \"ort\": {\"available\": %s, \"reason\": ", ort_on ? "true" : "false");
  if (ort_on)
    printf("null");
  else
    mx__json_string(stdout, p->reason);
  printf(", \"package\": ");
  if (ort_on) {
    char pkg[96];
    snprintf(pkg, sizeof pkg, "onnxruntime-node %s", p->version);
    mx__json_string(stdout, pkg);
  } else {
    printf("null");
  }
  printf(", \"node\": ");
  if (ort_on)
    mx__json_string(stdout, p->node_version);
  else
    printf("null");
  printf(
      ", \"session_options\": {\"execution_provider\": \"cpu\", \"intra_op_num_threads\": 1, "
      "\"inter_op_num_threads\": 1, \"execution_mode\": \"sequential\", \"graph_optimization_level\": "
      "\"all\"}, "
      "\"timed\": \"inside Node, around await session.run(feeds)\"}");
}

/* "identity_call_us": the per-call cost of the Identity model in both systems. */
static void json_identity(const timing *id_ort, const timing *id_mixrt) {
  printf(",\n \"identity_call_us\": {\"ort\": ");
  json_timing(id_ort);
  printf(", \"mixrt\": ");
  json_timing(id_mixrt);
  printf("}");
}

/* A point's "step_us": every system's latency. */
static void json_step_us(const point *pt) {
  printf("\"step_us\": {");
  for (int s = 0; s < SYS_COUNT; s++) {
    printf("%s\"%s\": ", s ? ", " : "", sys_names[s]);
    json_timing(&pt->t[s]);
  }
  printf("}");
}

/* A point's ratios of the hybrid's median to the other systems' (to ONNX Runtime's also without
 * the binding's own per-call cost, id_ort). */
static void json_ratios(const point *pt, const timing *id_ort) {
  printf(",\n     \"ratio_hybrid_ort\": ");
  json_ratio(&pt->t[SYS_HYBRID], &pt->t[SYS_ORT]);
  printf(", \"ratio_hybrid_ort_without_binding\": ");
  if (pt->t[SYS_HYBRID].have && pt->t[SYS_ORT].have && id_ort->have && pt->t[SYS_ORT].median > id_ort->median)
    mx__llm_json_num(pt->t[SYS_HYBRID].median / (pt->t[SYS_ORT].median - id_ort->median));
  else
    printf("null");
  printf(", \"ratio_hybrid_dynamic\": ");
  json_ratio(&pt->t[SYS_HYBRID], &pt->t[SYS_DYNAMIC]);
  printf(", \"ratio_hybrid_reference\": ");
  json_ratio(&pt->t[SYS_HYBRID], &pt->t[SYS_REFERENCE]);
  printf(", \"ratio_hybrid_control\": ");
  json_ratio(&pt->t[SYS_HYBRID], &pt->t[SYS_CONTROL]);
}

/* A point's "rounds_compared": the hybrid's blocks against each other system's, round by round. */
static void json_rounds_compared(const point *pt) {
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
    mx__llm_json_num(rp->median_ratio);
    printf(", \"sign_test_p\": ");
    mx__llm_json_num(rp->sign_test_p);
    printf("}");
  }
  printf("}");
}

/* A point's correctness: bitwise equality to the reference, and the differences to ONNX
 * Runtime's outputs (null when no system was compared). */
static void json_correctness(const point *pt) {
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
}

/* A point's "<system>_per_step" for the hybrid and dynamic sessions: their own counters. */
static void json_per_step(const point *pt) {
  for (int s = 0; s < 2; s++) {
    printf(",\n     \"%s_per_step\": ", sys_names[s]);
    if (pt->have_step[s]) {
      const session_step *h = &pt->step[s];
      printf(
          "{\"static_executes\": %.2f, \"dynamic_launches\": %.2f, \"exe_graph_kernels\": %.2f, "
          "\"refreshed_entries\": %.2f, \"device_allocations\": %.3f, \"session_step_us\": %.2f, "
          "\"static_us\": %.2f, \"dynamic_us\": %.2f, \"host_us\": %.2f}",
          h->static_executes, h->dynamic_launches, h->kernels, h->refreshed, h->device_allocations,
          h->step_us, h->static_us, h->dynamic_us, h->host_us);
    } else {
      printf("null");
    }
  }
}

/* One entry of a configuration's "points" (k: its index). */
static void json_point(const llm_args *a, const point *pt, size_t k, const timing *id_ort) {
  int64_t first = pt->past;
  int64_t last = a->decode ? first + a->rounds * (a->block_warmup + a->steps) - 1 : pt->past;
  printf("%s\n    {\"past\": %lld, \"past_range\": [%lld, %lld], \"rounds\": %lld, ", k ? "," : "",
         (long long)pt->past, (long long)first, (long long)last, (long long)pt->rounds);
  json_step_us(pt);
  json_ratios(pt, id_ort);
  json_rounds_compared(pt);
  json_correctness(pt);
  json_per_step(pt);
  printf("}");
}

/* One entry of "results": configuration c, its sizes, and its points. */
static void json_config(const llm_args *a, int c, const config_result *cr, bool first_cfg,
                        const timing *id_ort) {
  const mx_llama_config *g = &cr->cfg;
  printf(
      "%s\n  {\"config\": \"%s\", \"layers\": %lld, \"hidden\": %lld, \"heads\": %lld, \"kv_heads\": %lld, "
      "\"head_dim\": %lld, \"ffn\": %lld, \"vocab\": %lld, \"nodes\": %zu, \"anon_huge_pages_kib\": %lld, "
      "\"weight_blocks_shared_between_systems\": %llu, \"points\": [",
      first_cfg ? "" : ",", config_names[c], (long long)g->layers, (long long)g->hidden, (long long)g->heads,
      (long long)g->kv_heads, (long long)mx_cli_llm_head_dim(g), (long long)g->ffn, (long long)g->vocab,
      cr->nodes, (long long)cr->huge_kib, (unsigned long long)cr->shared_hits);
  for (size_t k = 0; k < a->n_past; k++) json_point(a, &cr->points[k], k, id_ort);
  printf("\n  ]}");
}

/* "results": every configuration run. */
static void json_results(const llm_args *a, const config_result *res, const timing *id_ort) {
  printf(",\n \"results\": [");
  bool first_cfg = true;
  for (int c = 0; c < N_CONFIGS; c++) {
    if (!res[c].run) continue;
    json_config(a, c, &res[c], first_cfg, id_ort);
    first_cfg = false;
  }
  printf("\n ]");
}

/* "targets": per configuration, the worst point's hybrid / ort and hybrid / dynamic ratios and
 * logits difference against their limits. */
static void json_targets(const llm_args *a, const peer *p, const config_result *res) {
  printf(",\n \"targets\": [");
  bool first = true;
  const char *no_ort = p->pid > 0 ? "ONNX Runtime or hybrid not measured for this configuration" : p->reason;
  for (int c = 0; c < N_CONFIGS; c++) {
    if (!res[c].run) continue;
    char name[128];
    snprintf(name, sizeof name, "%s: hybrid / ort <= %.1f", config_names[c], config_ort_limit[c]);
    mx__llm_json_target(&first, name, worst(&res[c], a->n_past, fig_ratio_ort), config_ort_limit[c], no_ort,
                        NAN);
    snprintf(name, sizeof name, "%s: hybrid / dynamic < 1%s", config_names[c],
             a->skip_kernels ? " (kernels skipped: mixrt's own cost)" : "");
    mx__llm_json_target(&first, name, worst(&res[c], a->n_past, fig_ratio_dynamic), 1.0,
                        "hybrid or dynamic not measured", NAN);
    snprintf(name, sizeof name, "%s: logits relative difference to ort <= 1e-4", config_names[c]);
    mx__llm_json_target(&first, name, worst(&res[c], a->n_past, fig_logits_rel), 1e-4, no_ort, NAN);
  }
  printf("\n ]");
}

void mx__llm_print_json(const llm_args *a, int argc, char **argv, const peer *p, double load,
                        const timing *id_ort, const timing *id_mixrt, const config_result *res) {
  mx__llm_json_head(argc, argv);
  json_machine(load);
  json_mixrt(a);
  json_method(a);
  json_ort(p);
  json_identity(id_ort, id_mixrt);
  json_results(a, res, id_ort);
  json_targets(a, p, res);
  printf("}\n");
}

/* The systems in the data file's column order: the control session comes last, after the
 * columns bench/plot/llm_latency.gp reads. */
static const int column_system[SYS_COUNT] = {SYS_HYBRID, SYS_DYNAMIC, SYS_REFERENCE, SYS_ORT, SYS_CONTROL};

int mx__llm_write_table(const llm_args *a, const config_result *res, int64_t processes) {
  FILE *f = fopen(a->table, "w");
  if (!f) return mx_cli_runtime_error(CMD, "cannot write %s: %s", a->table, strerror(errno));
  fprintf(f,
          "# mixrt bench llm: decode-step latency in microseconds (median p10 p90 per system); ? = not "
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
        if (pt->t[s].have)
          fprintf(f, " %.3f %.3f %.3f", pt->t[s].median, pt->t[s].p10, pt->t[s].p90);
        else
          fprintf(f, " ? ? ?");
      }
      fputc('\n', f);
    }
  }
  if (fclose(f) != 0) return mx_cli_runtime_error(CMD, "cannot write %s: %s", a->table, strerror(errno));
  return MX_EXIT_OK;
}
