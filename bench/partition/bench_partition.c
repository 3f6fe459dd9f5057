/* bench_partition: time of the dynamic-shape partitioner on growing graphs, as JSON.
 *
 * Two families, each at about 1k, 10k, 100k and 1M nodes:
 *   layered      random layered DAG (32 nodes per layer; Add/Relu/Neg reading 1-2 values from the
 *                previous 3 layers), 5% of the nodes forced UNKNOWN (force_unknown), seeded;
 *   transformer  repeated decode layers (RMSNorm, Q/K/V projections, attention over a KV cache of
 *                symbolic length, output projection, MLP; 28 ops per layer), the attention
 *                UNKNOWN through its symbolic shapes;
 *   fanout       one node read by all the others (1% of them forced UNKNOWN): the worst case
 *                for single-path checks that scan out-lists.
 * For each: graph build and inference times, the partition's wall and CPU time (CPU time split
 * into its phases: mark, merge, place, build), the clusters found, and the partition's CPU ns per
 * node and per n*log2(n) so that growth can be compared across sizes within one run.
 *
 * usage: bench_partition [--max-nodes N] [--family layered|transformer|fanout|all] [--reps R]
 * (R repetitions of the partition, the fastest is reported; default 3). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "mixrt/graph.h"
#include "mixrt/partition.h"
#include "partitioner/partitioner.h"

#define FAIL(...)                 \
  do {                            \
    fprintf(stderr, __VA_ARGS__); \
    fputc('\n', stderr);          \
    exit(1);                      \
  } while (0)

typedef struct bench_graph {
  mx_graph *g;
  char **forced; /* names forced unknown (malloc'd) */
  size_t n_forced;
  double build_ms;
} bench_graph;

/* CPU time of the process in nanoseconds: unlike wall time, it does not grow when other jobs
 * share the machine. */
static uint64_t cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t rng_state;
static uint64_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

static mx_value_id add(mx_graph *g, const char *op, const char *name, const mx_value_id *in, size_t n,
                       const mx_attr *attrs, size_t na) {
  mx_node_desc d = {.op_type = op,
                    .name = name,
                    .inputs = in,
                    .n_inputs = n,
                    .attrs = attrs,
                    .n_attrs = na,
                    .n_outputs = 1};
  mx_value_id y;
  if (mx_graph_add_node(g, &d, &y) != MX_OK) FAIL("build: %s", mx_graph_last_error(g));
  return y;
}

static bench_graph layered(size_t n_nodes) {
  const size_t width = 32;
  bench_graph b = {0};
  uint64_t t0 = mx__now_ns();
  rng_state = 0x2545f4914f6cdd1dull ^ n_nodes;
  if (mx_graph_create("layered", &b.g) != MX_OK) FAIL("out of memory");
  mx_shape s = {.rank = 2, .dims = {2, 3}};
  mx_value_id *vals = malloc((n_nodes + width) * sizeof *vals);
  b.forced = malloc((n_nodes + 1) * sizeof *b.forced);
  if (!vals || !b.forced) FAIL("out of memory");
  for (size_t i = 0; i < width; i++) {
    char name[32];
    snprintf(name, sizeof name, "in%zu", i);
    if (mx_graph_add_input(b.g, name, MX_FLOAT32, &s, &vals[i]) != MX_OK)
      FAIL("%s", mx_graph_last_error(b.g));
  }
  size_t nv = width;
  for (size_t i = 0; i < n_nodes; i++) {
    size_t layer_start = nv - nv % width; /* values of earlier layers end before this one */
    size_t span = layer_start < 3 * width ? layer_start : 3 * width;
    char name[32];
    snprintf(name, sizeof name, "n%zu", i);
    mx_value_id a = vals[layer_start - 1 - rnd() % span], y;
    uint64_t kind = rnd() % 3;
    if (kind == 0) {
      mx_value_id in[2] = {a, vals[layer_start - 1 - rnd() % span]};
      y = add(b.g, "Add", name, in, 2, NULL, 0);
    } else {
      y = add(b.g, kind == 1 ? "Relu" : "Neg", name, &a, 1, NULL, 0);
    }
    vals[nv++] = y;
    if (rnd() % 100 < 5) b.forced[b.n_forced++] = strdup(name);
  }
  for (size_t i = nv - width; i < nv; i++)
    if (mx_graph_add_output(b.g, vals[i]) != MX_OK) FAIL("graph output: %s", mx_graph_last_error(b.g));
  free(vals);
  b.build_ms = (double)(mx__now_ns() - t0) / 1e6;
  return b;
}

static mx_value_id weight(mx_graph *g, const char *name, int64_t rows, int64_t cols, float *buf) {
  mx_tensor t = {.dtype = MX_FLOAT32, .rank = cols ? 2 : 1, .dims = {rows, cols}, .data = buf};
  mx_value_id v;
  if (mx_graph_add_constant(g, name, &t, &v) != MX_OK) FAIL("%s", mx_graph_last_error(g));
  return v;
}

/* One decode layer; names "l<i>/<what>". Returns the new hidden state. */
static mx_value_id decode_layer(mx_graph *g, int l, mx_value_id h, mx_dim past, mx_value_id heads_shape,
                                mx_value_id model_shape, float *buf) {
  enum { D = 8, H = 2, DH = 4, F = 16 };
  char nm[64], pk[32], pv[32];
#define N(what) (snprintf(nm, sizeof nm, "l%d/%s", l, what), nm)
  int64_t to_heads[] = {0, 2, 1, 3}, kt_perm[] = {0, 1, 3, 2};
  mx_attr perm_heads = mx_attr_ints("perm", to_heads, 4), perm_kt = mx_attr_ints("perm", kt_perm, 4);
  mx_attr axis2 = mx_attr_int("axis", 2), axis_last = mx_attr_int("axis", -1);
  snprintf(pk, sizeof pk, "past_k%d", l);
  snprintf(pv, sizeof pv, "past_v%d", l);
  mx_shape ps = {.rank = 4, .dims = {1, H, past, DH}};
  mx_value_id past_k, past_v;
  if (mx_graph_add_input(g, pk, MX_FLOAT32, &ps, &past_k) != MX_OK ||
      mx_graph_add_input(g, pv, MX_FLOAT32, &ps, &past_v) != MX_OK)
    FAIL("%s", mx_graph_last_error(g));
  mx_value_id n1 =
      add(g, "RMSNormalization", N("norm1"), (mx_value_id[]){h, weight(g, N("g1"), D, 0, buf)}, 2, NULL, 0);
  mx_value_id q = add(g, "MatMul", N("q"), (mx_value_id[]){n1, weight(g, N("wq"), D, D, buf)}, 2, NULL, 0);
  mx_value_id k = add(g, "MatMul", N("k"), (mx_value_id[]){n1, weight(g, N("wk"), D, D, buf)}, 2, NULL, 0);
  mx_value_id v = add(g, "MatMul", N("v"), (mx_value_id[]){n1, weight(g, N("wv"), D, D, buf)}, 2, NULL, 0);
  mx_value_id qr = add(g, "Reshape", N("q_heads"), (mx_value_id[]){q, heads_shape}, 2, NULL, 0);
  mx_value_id kr = add(g, "Reshape", N("k_heads"), (mx_value_id[]){k, heads_shape}, 2, NULL, 0);
  mx_value_id vr = add(g, "Reshape", N("v_heads"), (mx_value_id[]){v, heads_shape}, 2, NULL, 0);
  mx_value_id qt = add(g, "Transpose", N("q_t"), &qr, 1, &perm_heads, 1);
  mx_value_id kt = add(g, "Transpose", N("k_t"), &kr, 1, &perm_heads, 1);
  mx_value_id vt = add(g, "Transpose", N("v_t"), &vr, 1, &perm_heads, 1);
  mx_value_id kc = add(g, "Concat", N("attn/k_cache"), (mx_value_id[]){past_k, kt}, 2, &axis2, 1);
  mx_value_id vc = add(g, "Concat", N("attn/v_cache"), (mx_value_id[]){past_v, vt}, 2, &axis2, 1);
  mx_value_id kT = add(g, "Transpose", N("attn/k_T"), &kc, 1, &perm_kt, 1);
  mx_value_id sc = add(g, "MatMul", N("attn/scores"), (mx_value_id[]){qt, kT}, 2, NULL, 0);
  mx_value_id ss =
      add(g, "Mul", N("attn/scaled"), (mx_value_id[]){sc, weight(g, N("scale"), 1, 0, buf)}, 2, NULL, 0);
  mx_value_id pr = add(g, "Softmax", N("attn/probs"), &ss, 1, &axis_last, 1);
  mx_value_id o = add(g, "MatMul", N("attn/out"), (mx_value_id[]){pr, vc}, 2, NULL, 0);
  mx_value_id ot = add(g, "Transpose", N("o_t"), &o, 1, &perm_heads, 1);
  mx_value_id om = add(g, "Reshape", N("o_merge"), (mx_value_id[]){ot, model_shape}, 2, NULL, 0);
  mx_value_id proj =
      add(g, "MatMul", N("o_proj"), (mx_value_id[]){om, weight(g, N("wo"), D, D, buf)}, 2, NULL, 0);
  mx_value_id h1 = add(g, "Add", N("residual1"), (mx_value_id[]){h, proj}, 2, NULL, 0);
  mx_value_id n2 =
      add(g, "RMSNormalization", N("norm2"), (mx_value_id[]){h1, weight(g, N("g2"), D, 0, buf)}, 2, NULL, 0);
  mx_value_id up =
      add(g, "MatMul", N("mlp_up"), (mx_value_id[]){n2, weight(g, N("w1"), D, F, buf)}, 2, NULL, 0);
  mx_value_id act = add(g, "Relu", N("mlp_act"), &up, 1, NULL, 0);
  mx_value_id down =
      add(g, "MatMul", N("mlp_down"), (mx_value_id[]){act, weight(g, N("w2"), F, D, buf)}, 2, NULL, 0);
  mx_value_id out = add(g, "Add", N("residual2"), (mx_value_id[]){h1, down}, 2, NULL, 0);
#undef N
  if (mx_graph_add_output(g, kc) != MX_OK) FAIL("graph output: %s", mx_graph_last_error(g));
  if (mx_graph_add_output(g, vc) != MX_OK) FAIL("graph output: %s", mx_graph_last_error(g));
  return out;
}

static bench_graph transformer(size_t n_nodes) {
  enum { OPS_PER_LAYER = 28 };
  bench_graph b = {0};
  uint64_t t0 = mx__now_ns();
  if (mx_graph_create("transformer", &b.g) != MX_OK) FAIL("out of memory");
  float *buf = calloc(256, sizeof *buf);
  if (!buf) FAIL("out of memory");
  mx_dim past = mx_sym_named(mx_graph_symtab(b.g), "past");
  mx_shape hs = {.rank = 3, .dims = {1, 1, 8}};
  mx_value_id h;
  if (mx_graph_add_input(b.g, "tokens", MX_FLOAT32, &hs, &h) != MX_OK) FAIL("%s", mx_graph_last_error(b.g));
  int64_t heads[] = {1, 1, 2, 4}, model[] = {1, 1, 8};
  mx_tensor th = {.dtype = MX_INT64, .rank = 1, .dims = {4}, .data = heads};
  mx_tensor tm = {.dtype = MX_INT64, .rank = 1, .dims = {3}, .data = model};
  mx_value_id heads_shape, model_shape;
  if (mx_graph_add_constant(b.g, "heads_shape", &th, &heads_shape) != MX_OK ||
      mx_graph_add_constant(b.g, "model_shape", &tm, &model_shape) != MX_OK)
    FAIL("%s", mx_graph_last_error(b.g));
  int layers = (int)((n_nodes + OPS_PER_LAYER - 1) / OPS_PER_LAYER);
  for (int l = 0; l < layers; l++) h = decode_layer(b.g, l, h, past, heads_shape, model_shape, buf);
  if (mx_graph_add_output(b.g, h) != MX_OK) FAIL("graph output: %s", mx_graph_last_error(b.g));
  free(buf);
  b.build_ms = (double)(mx__now_ns() - t0) / 1e6;
  return b;
}

/* One Relu feeding n - 1 Neg nodes, 1% of them forced UNKNOWN: every single-path check starts
 * from the hub, whose out-list holds every other node. */
static bench_graph fanout(size_t n_nodes) {
  bench_graph b = {0};
  uint64_t t0 = mx__now_ns();
  if (mx_graph_create("fanout", &b.g) != MX_OK) FAIL("out of memory");
  mx_shape s = {.rank = 2, .dims = {2, 3}};
  mx_value_id x, hub;
  if (mx_graph_add_input(b.g, "x", MX_FLOAT32, &s, &x) != MX_OK) FAIL("%s", mx_graph_last_error(b.g));
  hub = add(b.g, "Relu", "hub", &x, 1, NULL, 0);
  b.forced = malloc(n_nodes * sizeof *b.forced);
  if (!b.forced) FAIL("out of memory");
  for (size_t i = 1; i < n_nodes; i++) {
    char name[32];
    snprintf(name, sizeof name, "leaf%zu", i);
    if (mx_graph_add_output(b.g, add(b.g, "Neg", name, &hub, 1, NULL, 0)) != MX_OK)
      FAIL("graph output: %s", mx_graph_last_error(b.g));
    if (i % 100 == 7) b.forced[b.n_forced++] = strdup(name);
  }
  b.build_ms = (double)(mx__now_ns() - t0) / 1e6;
  return b;
}

static void free_graph(bench_graph *b) {
  for (size_t i = 0; i < b->n_forced; i++) free(b->forced[i]);
  free(b->forced);
  mx_graph_destroy(b->g);
}

static void run(const char *family, size_t n_target, int reps, bool *first) {
  bench_graph b = strcmp(family, "layered") == 0       ? layered(n_target)
                  : strcmp(family, "transformer") == 0 ? transformer(n_target)
                                                       : fanout(n_target);
  uint64_t t0 = mx__now_ns();
  if (mx_graph_infer(b.g) != MX_OK) FAIL("infer: %s", mx_graph_last_error(b.g));
  double infer_ms = (double)(mx__now_ns() - t0) / 1e6;
  mx_partition_options o;
  mx_partition_options_init(&o);
  o.force_unknown = (const char *const *)b.forced;
  o.n_force_unknown = b.n_forced;
  double best = INFINITY, best_cpu = INFINITY;
  mx__part_timings bt = {0};
  mx_partition_totals tot = {0};
  size_t n_clusters = 0;
  for (int r = 0; r < reps; r++) {
    mx_partition *p;
    mx_error err;
    uint64_t s = mx__now_ns(), c = cpu_ns();
    if (mx_partition_create(b.g, &o, &p, &err) != MX_OK) FAIL("partition: %s", err.message);
    double ms = (double)(mx__now_ns() - s) / 1e6, cpu_ms = (double)(cpu_ns() - c) / 1e6;
    if (cpu_ms < best_cpu) best_cpu = cpu_ms;
    if (ms < best) {
      best = ms;
      mx__partition_timings(p, &bt);
      mx_partition_get_totals(p, &tot);
      n_clusters = mx_partition_cluster_count(p);
    }
    mx_partition_destroy(p);
  }
  size_t n = mx_graph_node_count(b.g);
  double ns_node = best_cpu * 1e6 / (double)n;
  printf(
      "%s\n    {\"family\": \"%s\", \"nodes\": %zu, \"build_ms\": %.2f, \"infer_ms\": %.2f, "
      "\"partition_ms\": %.3f, \"partition_cpu_ms\": %.3f,\n"
      "     \"phases_cpu_ms\": {\"mark\": %.3f, \"merge\": %.3f, \"place\": %.3f, \"build\": "
      "%.3f},\n"
      "     \"clusters\": %zu, \"known_clusters\": %zu, \"unknown_clusters\": %zu, "
      "\"unknown_nodes\": %zu,\n"
      "     \"ns_per_node\": %.1f, \"ns_per_node_log2n\": %.2f}",
      *first ? "" : ",", family, n, b.build_ms, infer_ms, best, best_cpu, (double)bt.mark_cpu_ns / 1e6,
      (double)bt.merge_cpu_ns / 1e6, (double)bt.place_cpu_ns / 1e6, (double)bt.build_cpu_ns / 1e6, n_clusters,
      tot.known_clusters, tot.unknown_clusters, tot.unknown_nodes, ns_node, ns_node / log2((double)n));
  fflush(stdout);
  *first = false;
  free_graph(&b);
}

int main(int argc, char **argv) {
  size_t max_nodes = 1000000;
  int reps = 3;
  const char *family = "all";
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--max-nodes") == 0 && i + 1 < argc)
      max_nodes = strtoull(argv[++i], NULL, 10);
    else if (strcmp(argv[i], "--family") == 0 && i + 1 < argc)
      family = argv[++i];
    else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
      reps = atoi(argv[++i]);
    else {
      fprintf(stderr,
              "usage: bench_partition [--max-nodes N] [--family layered|transformer|fanout|all] "
              "[--reps R]\n");
      return 2;
    }
  }
  if (reps < 1) reps = 1;
  static const size_t sizes[] = {1000, 10000, 100000, 1000000};
  static const char *const families[] = {"layered", "transformer", "fanout"};
  bool first = true;
  printf("{\"benchmark\": \"partition\", \"results\": [");
  for (size_t f = 0; f < 3; f++) {
    if (strcmp(family, "all") != 0 && strcmp(family, families[f]) != 0) continue;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
      if (sizes[i] > max_nodes) continue;
      run(families[f], sizes[i], reps, &first);
    }
  }
  printf("\n]}\n");
  return 0;
}
