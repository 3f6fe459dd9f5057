/* `mixrt demo`: the main job, end to end, on a built-in model. Builds a Llama-style decode step
 * in memory (mx_model_llama: projections and MLP have fixed shapes, attention over the KV cache
 * has the symbolic length past_len), prints how the partitioner splits it into static models
 * and dynamic ops and why, loads it into a session, and decodes greedily: each step's present
 * key/value tensors become the next step's past, the argmax of the logits the next token. It
 * prints a progress line every 8 steps, then the step latency (median, p90), tokens/s, where the
 * time went (static models, dynamic ops, host kernels, from mx_session_get_stats), the refresh
 * and allocator counters, and a check: the first 4 steps run again through the reference
 * interpreter on the same inputs must give bit-identical outputs (exit 1 when they do not). */
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "graph/ir.h"
#include "mixrt/models.h"
#include "mixrt/partition.h"
#include "mixrt/reference.h"
#include "mixrt/session.h"
#include "tools/bench.h"
#include "tools/cmd_tp.h"
#include "tools/commands.h"

enum { CHECK_STEPS = 4, PROGRESS_EVERY = 8, MAX_IO = 1 + 2 * 64, MAX_LAYERS = 64 };

/* The user's choices. */
typedef struct demo_args {
  const char *size;    /* "tiny" or "small" (borrowed from argv or a literal) */
  bool overridden;     /* a field of the size was set explicitly */
  mx_llama_config cfg; /* the size, then the explicit overrides */
  int64_t steps;       /* decode steps */
  int64_t token;       /* the first token */
  mx_device_kind device;
  int64_t streams;
  mx_executor_kind executor;
  int64_t static_min_ops; /* partitioner threshold; -1 runs everything dynamically */
  bool no_state;          /* --no-state: the copying loop (presents handed back, fed again) */
  int64_t tp;             /* --tp N: this process is one rank of N (0: no tensor parallelism) */
} demo_args;

void mx_cmd_demo_help(FILE *out) {
  fprintf(out,
          "usage: mixrt demo [--size tiny|small] [--steps N] [--device cpu|inline] [--streams N]\n"
          "                  [--executor sequential|topological|multi-thread] [--static-min-ops N]\n"
          "                  [--layers N] [--hidden N] [--heads N] [--kv-heads N] [--head-dim N]\n"
          "                  [--ffn N] [--vocab N] [--seed N] [--token N] [--no-state] [--tp N]\n\n"
          "The main job on a built-in model: builds a Llama-style decode step in memory (batch 1, one\n"
          "new token, a KV cache of symbolic length past_len), prints how it is split into static\n"
          "models and dynamic ops and why, loads it into a session and decodes greedily: the present\n"
          "key/value outputs of a step are the past inputs of the next, the argmax of the logits the\n"
          "next token. A progress line every 8 steps; then the step latency (median, p90, measured\n"
          "around each mx_session_run), tokens/s, the time split between static models, dynamic ops\n"
          "and host kernels, the address-refresh and allocator counters, and a check: the first 4\n"
          "steps, run again through the reference interpreter on the same inputs, must give\n"
          "bit-identical outputs.\n\n"
          "options:\n"
          "  --size tiny|small   tiny: 2 layers, hidden 64, 4 heads (2 key/value heads), ffn 172,\n"
          "                      vocab 128; small (default): 4 layers, hidden 256, 4 heads of 64\n"
          "                      (4 key/value heads), ffn 688, vocab 1000\n"
          "  --layers, --hidden, --heads, --kv-heads, --head-dim, --ffn, --vocab, --seed N\n"
          "                      override one field of the size (see mixrt gen --help)\n"
          "  --steps N           decode steps (default 64)\n"
          "  --token N           the first token (default 1)\n"
          "  --device cpu|inline cpu: a worker thread per stream; inline (default): work runs in the\n"
          "                      calling thread (faster for one stream on a small machine)\n"
          "  --streams N         streams (default 1)\n"
          "  --executor E        execution-graph executor (default sequential)\n"
          "  --static-min-ops N  known clusters with fewer ops run dynamically; -1 runs everything\n"
          "                      dynamically (default 4)\n"
          "  --no-state          the copying loop: every present handed back as a host tensor and fed\n"
          "                      in again as the next past. By default the loop runs a binding with\n"
          "                      the KV cache as session state (include/mixrt/binding.h): it stays on\n"
          "                      the device, only the token goes in and the logits come out\n"
          "  --tp N              tensor parallel over MPI: `mpirun -np N mixrt demo --tp N`. Every rank\n"
          "                      builds the model and takes its shard in memory (heads, MLP and\n"
          "                      vocabulary split, its kv-heads of the cache; N must divide --kv-heads),\n"
          "                      attaches the world communicator and decodes; rank 0 prints the tokens\n"
          "                      and each rank's time split (compute, communication, waiting). The check\n"
          "                      compares the first 4 steps' logits with the unsharded model run by the\n"
          "                      reference interpreter within rtol 1e-3 / atol 1e-4 (the shards add in\n"
          "                      another order) and the tokens exactly. N must equal the MPI world size\n\n"
          "exit codes: 0 done and the check passed, 1 runtime error or the check failed, 2 usage error\n");
}

static int parse_args(int argc, char **argv, demo_args *a) {
  memset(a, 0, sizeof *a);
  a->size = "small";
  a->steps = 64;
  a->token = 1;
  a->device = MX_DEVICE_INLINE;
  a->streams = 1;
  a->executor = MX_EXECUTOR_SEQUENTIAL;
  a->static_min_ops = MX_PARTITION_DEFAULT_STATIC_MIN_OPS;
  /* Overrides are applied after the size, whatever their order on the command line. */
  struct {
    const char *flag;
    int64_t value;
    bool given;
  } over[] = {{"--layers", 0, false},   {"--hidden", 0, false},   {"--heads", 0, false},
              {"--kv-heads", 0, false}, {"--head-dim", 0, false}, {"--ffn", 0, false},
              {"--vocab", 0, false},    {"--seed", 0, false}};
  const size_t n_over = sizeof over / sizeof over[0];
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (strcmp(arg, "--no-state") == 0) {
      a->no_state = true;
      continue;
    }
    size_t k = 0;
    while (k < n_over && strcmp(arg, over[k].flag) != 0) k++;
    bool numeric = k < n_over || strcmp(arg, "--steps") == 0 || strcmp(arg, "--token") == 0 ||
                   strcmp(arg, "--streams") == 0 || strcmp(arg, "--static-min-ops") == 0 ||
                   strcmp(arg, "--tp") == 0;
    bool word = strcmp(arg, "--size") == 0 || strcmp(arg, "--device") == 0 || strcmp(arg, "--executor") == 0;
    if (!numeric && !word) return mx_cli_usage_error("demo", "unknown option '%s'", arg);
    const char *v = mx_cli_option_value("demo", argc, argv, &i);
    if (!v) return MX_EXIT_USAGE;
    int64_t x = 0;
    if (numeric && !mx_cli_parse_int(v, &x))
      return mx_cli_usage_error("demo", "%s needs a whole number, not '%s'", arg, v);
    if (k < n_over) {
      bool zero_ok = strcmp(arg, "--head-dim") == 0 || strcmp(arg, "--seed") == 0;
      if (x < (zero_ok ? 0 : 1)) return mx_cli_usage_error("demo", "%s must be >= %d", arg, zero_ok ? 0 : 1);
      over[k].value = x;
      over[k].given = true;
    } else if (strcmp(arg, "--size") == 0) {
      mx_llama_config probe;
      if (!mx_cli_llm_size(v, &probe))
        return mx_cli_usage_error("demo", "unknown size '%s' (tiny or small)", v);
      a->size = v;
    } else if (strcmp(arg, "--steps") == 0) {
      if (x < 1) return mx_cli_usage_error("demo", "--steps must be >= 1");
      a->steps = x;
    } else if (strcmp(arg, "--token") == 0) {
      if (x < 0) return mx_cli_usage_error("demo", "--token must be >= 0");
      a->token = x;
    } else if (strcmp(arg, "--tp") == 0) {
      if (x < 1 || x > 1024) return mx_cli_usage_error("demo", "--tp wants a number of ranks from 1 to 1024");
      a->tp = x;
    } else if (strcmp(arg, "--streams") == 0) {
      if (x < 1 || x > 64) return mx_cli_usage_error("demo", "--streams must be 1..64");
      a->streams = x;
    } else if (strcmp(arg, "--static-min-ops") == 0) {
      if (x < -1) return mx_cli_usage_error("demo", "--static-min-ops must be >= -1");
      a->static_min_ops = x;
    } else if (strcmp(arg, "--device") == 0) {
      if (!mx_cli_parse_device(v, &a->device))
        return mx_cli_usage_error("demo", "unknown device '%s' (cpu or inline)", v);
    } else if (!mx_cli_parse_executor(v, &a->executor)) { /* --executor */
      return mx_cli_usage_error("demo", "unknown executor '%s' (sequential, topological or multi-thread)", v);
    }
  }
  mx_cli_llm_size(a->size, &a->cfg);
  int64_t *fields[] = {&a->cfg.layers,   &a->cfg.hidden, &a->cfg.heads, &a->cfg.kv_heads,
                       &a->cfg.head_dim, &a->cfg.ffn,    &a->cfg.vocab, NULL};
  for (size_t k = 0; k < n_over; k++) {
    if (!over[k].given) continue;
    if (fields[k])
      *fields[k] = over[k].value;
    else
      a->cfg.seed = (uint64_t)over[k].value;
    a->overridden = true;
  }
  if (a->cfg.layers > MAX_LAYERS) return mx_cli_usage_error("demo", "--layers must be <= %d", MAX_LAYERS);
  if (a->token >= a->cfg.vocab)
    return mx_cli_usage_error("demo", "--token %lld is not below the vocabulary size %lld",
                              (long long)a->token, (long long)a->cfg.vocab);
  if (a->cfg.max_pos < a->steps)
    return mx_cli_usage_error("demo", "--steps %lld exceeds the rotary table (%lld positions)",
                              (long long)a->steps, (long long)a->cfg.max_pos);
  return MX_EXIT_OK;
}

/* Appends up to three node names of cluster id, then "..." and the last one. */
static void cluster_names(const mx_partition *p, const mx_graph *g, size_t id, size_t n_nodes, char *buf,
                          size_t cap) {
  size_t len = 0;
  buf[0] = '\0';
  for (size_t k = 0; k < n_nodes && len < cap; k++) {
    if (k == 3 && n_nodes > 4) {
      len += (size_t)snprintf(buf + len, cap - len, ", ...");
      k = n_nodes - 1;
    }
    mx_node_id n = mx_partition_cluster_node(p, id, k);
    len += (size_t)snprintf(buf + len, cap - len, "%s%s", k ? ", " : "", g->nodes[n].name);
  }
}

/* Partitions a copy of the model with the session's threshold and prints one line per static
 * or dynamic cluster (for a dynamic one, why its first op is dynamic), then the totals. */
static int print_partition(const demo_args *a) {
  mx_error err;
  mx_graph *g;
  if (mx_model_llama(&a->cfg, &g, &err) != MX_OK) return mx_cli_runtime_error("demo", "%s", err.message);
  int rc = MX_EXIT_OK;
  mx_partition *p = NULL;
  if (mx_graph_infer(g) != MX_OK) {
    rc = mx_cli_runtime_error("demo", "inferring the model: %s", mx_graph_last_error(g));
    goto destroy_graph;
  }
  mx_partition_options po;
  mx_partition_options_init(&po);
  po.static_min_ops = a->static_min_ops;
  if (mx_partition_create(g, &po, &p, &err) != MX_OK) {
    rc = mx_cli_runtime_error("demo", "partitioning: %s", err.message);
    goto destroy_graph;
  }
  printf(
      "== partition (static_min_ops %lld): static models run as one sunk task chain each, dynamic ops "
      "one by one with run-time shapes ==\n",
      (long long)a->static_min_ops);
  for (size_t id = 0; id < mx_partition_cluster_count(p); id++) {
    mx_partition_cluster_info ci;
    mx_partition_cluster(p, id, &ci);
    if (ci.type != MX_CLUSTER_KNOWN && ci.type != MX_CLUSTER_UNKNOWN) continue;
    char names[256], why[256];
    cluster_names(p, g, id, ci.n_nodes, names, sizeof names);
    printf("  %-7s #%-3zu %3zu op%s  %s\n", ci.type == MX_CLUSTER_KNOWN ? "static" : "dynamic", id,
           ci.n_nodes, ci.n_nodes == 1 ? " " : "s", names);
    if (ci.type == MX_CLUSTER_UNKNOWN) {
      mx_partition_reason_format(p, mx_partition_cluster_node(p, id, 0), why, sizeof why);
      printf("                       why: %s\n", why);
    }
  }
  mx_partition_totals t;
  mx_partition_get_totals(p, &t);
  printf(
      "  totals: %zu ops in %zu static model%s, %zu ops in %zu dynamic cluster%s, %zu values cross a "
      "boundary\n\n",
      t.known_nodes, t.known_clusters, t.known_clusters == 1 ? "" : "s", t.unknown_nodes, t.unknown_clusters,
      t.unknown_clusters == 1 ? "" : "s", t.boundary_values);
  mx_partition_destroy(p);
destroy_graph:
  mx_graph_destroy(g);
  return rc;
}

/* Compares every output of one step with the reference interpreter's, bit for bit. */
static bool same_as_reference(mx_graph *ref, const mx_tensor *in, const mx_tensor *out, size_t n,
                              int64_t step, char *why, size_t cap) {
  mx_tensor want[MAX_IO];
  memset(want, 0, n * sizeof *want);
  mx_error err;
  if (mx_reference_run(ref, in, n, want, n, &err) != MX_OK) {
    snprintf(why, cap, "step %lld: the reference interpreter failed: %s", (long long)step, err.message);
    return false;
  }
  bool same = true;
  for (size_t k = 0; k < n && same; k++) {
    char reason[200];
    if (!mx_tensor_allclose(&out[k], &want[k], 0.0, 0.0, reason, sizeof reason)) {
      snprintf(why, cap, "step %lld output '%s': %s", (long long)step,
               mx_graph_value_name(ref, mx_graph_output(ref, k)), reason);
      same = false;
    }
  }
  for (size_t k = 0; k < n; k++) mx_tensor_release(&want[k]);
  return same;
}

/* A host copy of binding output j (a state's rows packed, even when appended in place). */
static mx_status fetch_output(mx_binding *b, size_t j, mx_tensor *host) {
  const mx_tensor *o = mx_binding_output(b, j);
  if (!o) return MX_ERR_INVALID_ARGUMENT;
  mx_status st = mx_tensor_alloc(o->dtype, o->rank, o->dims, host);
  return st == MX_OK ? mx_binding_read_output(b, j, host) : st;
}

/* A host copy of the logits of one of the first steps, for the check of --tp after the loop. */
static void keep_logits(const mx_tensor *logits, mx_tensor *kept) {
  size_t nbytes = 0;
  mx_tensor_nbytes(logits, &nbytes);
  if (mx_tensor_alloc(logits->dtype, logits->rank, logits->dims, kept) == MX_OK)
    memcpy(kept->data, logits->data, nbytes);
}

static double us(uint64_t ns) { return (double)ns / 1000.0; }
static double pct(uint64_t part, uint64_t whole) {
  return whole ? 100.0 * (double)part / (double)whole : 0.0;
}
static double mib(uint64_t bytes) { return (double)bytes / (1024.0 * 1024.0); }

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return a < b ? -1 : a > b;
}

/* The caller's side of the step just run: the step as the caller timed it minus the session's
 * own step, plus the session's feed and output kernels. */
static uint64_t host_side(mx_session *s, uint64_t lat) {
  mx_session_stats l;
  if (mx_session_get_stats(s, &l, NULL) != MX_OK) return 0;
  return (lat > l.step_ns ? lat - l.step_ns : 0) + l.host_ns;
}

/* The progress line after step `step` (every PROGRESS_EVERY steps and at the end). */
static void progress(const demo_args *a, const uint64_t *lat, const int64_t *tokens, int64_t step) {
  if ((step + 1) % PROGRESS_EVERY != 0 && step + 1 != a->steps) return;
  uint64_t window[PROGRESS_EVERY];
  size_t w = 0;
  for (int64_t k = step; k >= 0 && w < PROGRESS_EVERY && k > step - PROGRESS_EVERY; k--) window[w++] = lat[k];
  printf(
      "step %3lld/%lld  past_len %3lld  next token %5lld  step %8.1f us  (median of the last %zu: %.1f us)\n",
      (long long)(step + 1), (long long)a->steps, (long long)step, (long long)tokens[step], us(lat[step]), w,
      us(mx_cli_quantile(window, w, 0.5)));
}

/* The decode loop with a binding and the KV cache as state: per step the token goes in, the
 * logits come out, the cache stays on the device. The first CHECK_STEPS steps are compared with
 * the reference interpreter on host copies of the cache (outside the timed call). */
static int decode_with_state(const demo_args *a, mx_session *s, mx_graph *ref, mx_tensor *in, size_t n_io,
                             uint64_t *lat, uint64_t *host, int64_t *tokens, mx_tensor *kept, bool *check_ok,
                             char *why, size_t cap) {
  mx_binding *b = NULL;
  size_t pairs = 0;
  if (mx_cli_state_binding(s, in, 2, a->steps + 1, &b, &pairs) != MX_OK)
    return mx_cli_runtime_error("demo", "binding: %s", mx_session_last_error(s));
  printf(
      "   (binding: %zu cache pairs kept as session state with room for %lld rows; --no-state: the copying "
      "loop)\n",
      pairs, (long long)mx_binding_state_capacity(b));
  const mx_tensor *logits = mx_binding_output(b, (size_t)mx_binding_output_index(b, "logits"));
  int rc = MX_EXIT_OK;
  for (int64_t step = 0; step < a->steps && rc == MX_EXIT_OK; step++) {
    bool check = ref && step < CHECK_STEPS && *check_ok;
    mx_tensor out[MAX_IO];
    memset(out, 0, sizeof out);
    for (size_t i = 1; check && i < n_io; i++) { /* the pasts, as the step will read them */
      mx_tensor_release(&in[i]);
      if (mx_binding_input_is_state(b, i) && fetch_output(b, i, &in[i]) != MX_OK)
        rc = mx_cli_runtime_error("demo", "reading the cache back");
    }
    uint64_t ts = mx__now_ns();
    mx_status st = rc == MX_EXIT_OK ? mx_session_run_binding(s, b) : MX_ERR_INTERNAL;
    lat[step] = mx__now_ns() - ts;
    host[step] = host_side(s, lat[step]);
    if (st != MX_OK && rc == MX_EXIT_OK)
      rc = mx_cli_runtime_error("demo", "step %lld: %s", (long long)step, mx_session_last_error(s));
    if (rc != MX_EXIT_OK) break;
    tokens[step] = mx_cli_argmax(logits);
    if (!ref && step < CHECK_STEPS) keep_logits(logits, &kept[step]);
    if (check) {
      bool fetched = mx_tensor_alloc(logits->dtype, logits->rank, logits->dims, &out[0]) == MX_OK;
      size_t nbytes = 0;
      mx_tensor_nbytes(logits, &nbytes);
      if (fetched) memcpy(out[0].data, logits->data, nbytes);
      for (size_t i = 1; i < n_io && fetched; i++) fetched = fetch_output(b, i, &out[i]) == MX_OK;
      *check_ok = fetched && same_as_reference(ref, in, out, n_io, step, why, cap);
      if (!fetched) snprintf(why, cap, "step %lld: reading the outputs back failed", (long long)step);
      for (size_t i = 0; i < n_io; i++) mx_tensor_release(&out[i]);
    }
    ((int64_t *)in[0].data)[0] = tokens[step];
    progress(a, lat, tokens, step);
  }
  mx_binding_destroy(b);
  return rc;
}

/* Prints the summary after the decode loop. */
static void print_results(const demo_args *a, mx_session *s, uint64_t *lat, const uint64_t *lat_copy,
                          const uint64_t *host, const int64_t *tokens) {
  const size_t n = (size_t)a->steps;
  uint64_t sum = 0;
  for (size_t k = 0; k < n; k++) sum += lat[k];
  const uint64_t first = lat[0];
  printf("\ntokens: ");
  for (size_t k = 0; k < n && k < 24; k++) printf("%lld ", (long long)tokens[k]);
  printf("%s\n\n== results ==\n", n > 24 ? "..." : "");
  uint64_t med = mx_cli_quantile(lat, n, 0.5), p90 = mx_cli_quantile(lat, n, 0.9);
  printf(
      "step latency: median %.1f us, p90 %.1f us over %zu steps (first step %.1f us: first-use "
      "allocations)\n",
      us(med), us(p90), n, us(first));
  printf("throughput:   %.0f tokens/s (%zu steps in %.2f ms)\n", (double)n * 1e9 / (double)sum, n,
         (double)sum / 1e6);
  mx_session_stats t;
  if (mx_session_get_stats(s, NULL, &t) != MX_OK) memset(&t, 0, sizeof t); /* the breakdown below reads 0 */
  uint64_t accounted = t.static_ns + t.dynamic_ns + t.host_ns;
  printf("time split (sum over the steps, share of the session's step time %.2f ms):\n",
         (double)t.step_ns / 1e6);
  printf("  static models %5.1f%%  %.1f us/step (device-side execution of the sunk task chains)\n",
         pct(t.static_ns, t.step_ns), us(t.static_ns) / (double)n);
  printf("  dynamic ops   %5.1f%%  %.1f us/step (per-op shape inference, allocation, launch, wait)\n",
         pct(t.dynamic_ns, t.step_ns), us(t.dynamic_ns) / (double)n);
  printf("  host kernels  %5.1f%%  %.1f us/step (feeding inputs, collecting outputs)\n",
         pct(t.host_ns, t.step_ns), us(t.host_ns) / (double)n);
  if (accounted <= t.step_ns)
    printf(
        "  the rest      %5.1f%%  %.1f us/step (execution-graph scheduling, argument refresh, "
        "synchronization)\n",
        pct(t.step_ns - accounted, t.step_ns), us(t.step_ns - accounted) / (double)n);
  else
    printf("  (static models overlap host work on this device, so the shares add up to more than 100%%)\n");
  /* The caller's side of a step: matching names or preparing the binding before the session's
   * step starts, plus the feed and output kernels; per step, as a share of the step the caller
   * sees (the median of the steps after the first). */
  double *share = n > 1 ? malloc((n - 1) * sizeof *share) : NULL;
  uint64_t host_sum = 0;
  for (size_t k = 1; share && k < n; k++) {
    share[k - 1] = lat_copy[k] ? 100.0 * (double)host[k] / (double)lat_copy[k] : 0.0;
    host_sum += host[k];
  }
  if (share) {
    qsort(share, n - 1, sizeof *share, cmp_double);
    printf("host side:    %.2f us/step feeding and collecting, median %.2f%% of the step (%s)\n",
           us(host_sum) / (double)(n - 1), share[(n - 1) / 2],
           a->no_state ? "copying loop, --no-state" : "binding with the KV cache as state");
  }
  free(share);
  printf(
      "counters: %llu static executes, %llu dynamic launches, %llu execution-graph kernels, "
      "%llu refreshed allocation-table entries (%.1f per step)\n",
      (unsigned long long)t.static_executes, (unsigned long long)t.dynamic_launches,
      (unsigned long long)t.kernels_run, (unsigned long long)t.refreshed_entries,
      (double)t.refreshed_entries / (double)n);
  printf(
      "allocator: %llu device allocations, %llu cache hits, %llu misses; %.2f MiB in use (%.2f MiB cached), "
      "peak %.2f MiB\n",
      (unsigned long long)t.device_allocations, (unsigned long long)t.allocator_hits,
      (unsigned long long)t.allocator_misses, mib(t.bytes_in_use), mib(t.bytes_cached), mib(t.peak_bytes));
}

int mx_cmd_demo(int argc, char **argv) {
  demo_args a;
  int rc = parse_args(argc, argv, &a);
  if (rc != MX_EXIT_OK) return rc;
  const mx_llama_config *cfg = &a.cfg;
  const size_t n_io = 1 + 2 * (size_t)cfg->layers;
  mx_error err;
  mx_graph *g = NULL, *ref = NULL;
  mx_cli_tp *tp = NULL;
  mx_tensor kept[CHECK_STEPS]; /* --tp: the first steps' logits, checked after the loop */
  memset(kept, 0, sizeof kept);
  mx_llama_config rank_cfg = *cfg; /* the inputs this rank feeds: its kv-heads of the cache */
  if (a.tp) {
    if (a.cfg.kv_heads % a.tp)
      return mx_cli_usage_error("demo", "--tp %lld does not divide the %lld key/value heads (--kv-heads)",
                                (long long)a.tp, (long long)a.cfg.kv_heads);
    if ((rc = mx_cli_tp_begin("demo", a.tp, &tp)) != MX_EXIT_OK) return rc;
    rank_cfg.kv_heads /= a.tp;
  }
  mx_status st = mx_model_llama(cfg, &g, &err);
  if (st != MX_OK) {
    rc = st == MX_ERR_INVALID_ARGUMENT ? mx_cli_usage_error("demo", "%s", err.message)
                                       : mx_cli_runtime_error("demo", "%s", err.message);
    goto destroy_graphs;
  }
  printf("== mixrt demo: greedy decoding with a Llama-style decoder (%s size%s) ==\n", a.size,
         a.overridden ? ", with the fields given on the command line" : "");
  printf(
      "model: %lld layers, hidden %lld, %lld heads (%lld key/value heads, head dim %lld), ffn %lld, vocab "
      "%lld, "
      "%zu nodes\n",
      (long long)cfg->layers, (long long)cfg->hidden, (long long)cfg->heads, (long long)cfg->kv_heads,
      (long long)mx_cli_llm_head_dim(cfg), (long long)cfg->ffn, (long long)cfg->vocab,
      mx_graph_node_count(g));
  printf(
      "inputs: input_ids [1, 1], past_key_<i> / past_value_<i> [1, %lld, past_len, %lld]; the symbolic "
      "past_len "
      "grows by one every step\n\n",
      (long long)cfg->kv_heads, (long long)mx_cli_llm_head_dim(cfg));
  rc = print_partition(&a);
  if (rc != MX_EXIT_OK) goto destroy_graphs;
  if (tp) {
    if ((rc = mx_cli_tp_shard("demo", tp, g)) != MX_EXIT_OK) goto destroy_graphs;
    printf(
        "== tensor parallel: %d rank%s over MPI; each runs its shard (the partition above is the whole "
        "model's): its %lld key/value heads of the cache, its columns and rows of the projections and "
        "MLP, its rows of the vocabulary ==\n\n",
        mx_cli_tp_size(tp), mx_cli_tp_size(tp) == 1 ? "" : "s", (long long)rank_cfg.kv_heads);
  } else if ((st = mx_model_llama(cfg, &ref, &err)) != MX_OK) {
    rc = mx_cli_runtime_error("demo", "%s", err.message);
    goto destroy_graphs;
  }

  mx_session_options o;
  mx_session_options_init(&o);
  o.device_options.kind = a.device;
  o.streams = (uint32_t)a.streams;
  o.executor = a.executor;
  o.static_min_ops = a.static_min_ops;
  mx_session *s;
  if (mx_session_create(&o, &s, &err) != MX_OK) {
    rc = mx_cli_runtime_error("demo", "%s", err.message);
    goto destroy_graphs;
  }
  uint64_t t0 = mx__now_ns();
  st = mx_session_load_graph(s, g);
  g = NULL; /* the session owns it now, also on failure */
  if (st != MX_OK) {
    rc = mx_cli_runtime_error("demo", "loading the model: %s", mx_session_last_error(s));
    goto destroy_session;
  }
  if (tp && (rc = mx_cli_tp_attach("demo", tp, s)) != MX_EXIT_OK) goto destroy_session;
  printf("== session: %s device, %lld stream%s, %s executor; compiled and loaded in %.1f ms ==\n\n",
         mx_cli_device_name(a.device), (long long)a.streams, a.streams == 1 ? "" : "s",
         mx_cli_executor_name(a.executor), (double)(mx__now_ns() - t0) / 1e6);

  uint64_t *lat = calloc((size_t)a.steps, sizeof *lat);
  uint64_t *lat_copy = calloc((size_t)a.steps, sizeof *lat_copy),
           *host = calloc((size_t)a.steps, sizeof *host);
  int64_t *tokens = calloc((size_t)a.steps, sizeof *tokens);
  mx_tensor in[MAX_IO], out[MAX_IO];
  bool have_inputs = false, check_ok = true;
  char why[512] = "";
  if (!lat || !tokens || !lat_copy || !host) {
    rc = mx_cli_runtime_error("demo", "out of memory");
    goto free_buffers;
  }
  if ((st = mx_cli_llm_inputs(&rank_cfg, a.token, 0, 0, in)) != MX_OK) {
    rc = mx_cli_runtime_error("demo", "allocating the inputs: %s", mx_status_string(st));
    goto free_buffers;
  }
  have_inputs = true;
  printf("== decode: %lld greedy steps from token %lld, present -> past ==\n", (long long)a.steps,
         (long long)a.token);
  if (!a.no_state) {
    rc = decode_with_state(&a, s, ref, in, n_io, lat, host, tokens, kept, &check_ok, why, sizeof why);
    if (rc != MX_EXIT_OK) goto free_buffers;
  }
  for (int64_t step = 0; a.no_state && step < a.steps; step++) {
    memset(out, 0, sizeof out);
    uint64_t ts = mx__now_ns();
    st = mx_session_run(s, in, n_io, out, n_io);
    lat[step] = mx__now_ns() - ts;
    host[step] = host_side(s, lat[step]);
    if (st != MX_OK) {
      rc = mx_cli_runtime_error("demo", "step %lld: %s", (long long)step, mx_session_last_error(s));
      goto free_buffers;
    }
    if (ref && step < CHECK_STEPS && check_ok)
      check_ok = same_as_reference(ref, in, out, n_io, step, why, sizeof why);
    tokens[step] = mx_cli_argmax(&out[0]);
    if (!ref && step < CHECK_STEPS) keep_logits(&out[0], &kept[step]);
    for (size_t i = 1; i < n_io; i++) { /* present -> past */
      mx_tensor_release(&in[i]);
      in[i] = out[i];
      in[i].name = NULL;
    }
    mx_tensor_release(&out[0]);
    ((int64_t *)in[0].data)[0] = tokens[step];
    progress(&a, lat, tokens, step);
  }
  memcpy(lat_copy, lat, (size_t)a.steps * sizeof *lat);
  print_results(&a, s, lat, lat_copy, host, tokens);
  int64_t checked = a.steps < CHECK_STEPS ? a.steps : CHECK_STEPS;
  if (tp) {
    uint64_t sum = 0;
    for (int64_t k = 0; k < a.steps; k++) sum += lat_copy[k];
    mx_cli_tp_report(tp, sum, a.steps);
    check_ok = mx_cli_tp_check_llama(tp, cfg, a.token, tokens, kept, checked, why, sizeof why);
  }
  const char *oracle = tp ? "the unsharded model (reference interpreter, rtol 1e-3 / atol 1e-4)"
                          : "the reference interpreter";
  if (check_ok) {
    printf("check: first %lld steps equal %s: PASS\n", (long long)checked, oracle);
  } else {
    printf("check: first %lld steps equal %s: FAIL (%s)\n", (long long)checked, oracle, why);
    rc = MX_EXIT_RUNTIME;
  }
free_buffers:
  if (have_inputs) mx_cli_llm_inputs_release(&rank_cfg, in);
  for (size_t k = 0; k < CHECK_STEPS; k++) mx_tensor_release(&kept[k]);
  free(tokens);
  free(host);
  free(lat_copy);
  free(lat);
destroy_session:
  mx_session_destroy(s);
destroy_graphs:
  mx_graph_destroy(ref);
  mx_graph_destroy(g);
  mx_cli_tp_end(tp);
  return rc;
}
