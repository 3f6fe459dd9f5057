/* Property tests on 1000 seeded random DAGs of Add / Neg / Relu nodes with random constants,
 * random unknown marks (force_unknown), random static_min_ops and both modes:
 *   - every node is in exactly one cluster;
 *   - the cluster graph is acyclic (every edge goes from a lower to a higher cluster id, which
 *     is the root order);
 *   - no unknown node in a known cluster, and no known cluster below the limit;
 *   - in normal mode, directly connected unknown nodes share a cluster (path absorption);
 *   - the root graph is topologically ordered and infers to the original shapes;
 *   - partitioning the same graph again, or a rebuilt copy, gives byte-identical dumps. */
#include "test_helpers.h"

typedef struct rng {
  uint64_t s;
} rng;

static uint64_t next(rng *r) {
  r->s ^= r->s << 13;
  r->s ^= r->s >> 7;
  r->s ^= r->s << 17;
  return r->s;
}

static uint32_t below(rng *r, uint32_t n) { return (uint32_t)(next(r) % n); }

typedef struct dag {
  mx_graph *g;
  char **forced; /* names of nodes marked unknown (malloc'd) */
  size_t n_forced;
  int64_t limit;
  bool stable;
} dag;

static dag make_dag(uint64_t seed) {
  rng r = {seed * 0x9e3779b97f4a7c15ull + 1};
  dag d = {0};
  d.g = pt_graph("random");
  uint32_t n_inputs = 1 + below(&r, 3), n_nodes = 1 + below(&r, 48), n_consts = below(&r, 4);
  mx_value_id vals[64 + 8];
  size_t nv = 0;
  for (uint32_t i = 0; i < n_inputs; i++) {
    char name[16];
    snprintf(name, sizeof name, "in%u", i);
    vals[nv++] = pt_input(d.g, name, MX_FLOAT32, 2, (mx_dim[]){2, 3});
  }
  mx_value_id consts[4];
  for (uint32_t i = 0; i < n_consts; i++) {
    char name[16];
    snprintf(name, sizeof name, "c%u", i);
    consts[i] = pt_const(d.g, name, 1, (int64_t[]){3}, (float)i);
  }
  uint32_t unknown_pct = below(&r, 60);
  d.forced = calloc(n_nodes, sizeof *d.forced);
  cr_assert_not_null(d.forced);
  for (uint32_t i = 0; i < n_nodes; i++) {
    char name[16];
    snprintf(name, sizeof name, "n%u", i);
    /* Prefer recent values so chains form, sometimes reach far back. */
    uint32_t back = below(&r, 4) == 0 ? below(&r, (uint32_t)nv) : below(&r, nv < 4 ? (uint32_t)nv : 4);
    mx_value_id a = vals[nv - 1 - back];
    uint32_t kind = below(&r, 3);
    mx_value_id y;
    if (kind == 0) {
      mx_value_id b =
          n_consts && below(&r, 3) == 0 ? consts[below(&r, n_consts)] : vals[below(&r, (uint32_t)nv)];
      y = pt_op2(d.g, "Add", name, a, b);
    } else {
      y = pt_op1(d.g, kind == 1 ? "Neg" : "Relu", name, a);
    }
    vals[nv++] = y;
    if (below(&r, 100) < unknown_pct) d.forced[d.n_forced++] = strdup(name);
  }
  /* Outputs: every node output nothing reads, plus a random one. */
  for (size_t i = n_inputs; i < nv; i++)
    if (d.g->values[vals[i]].n_consumers == 0) cr_assert_eq(mx_graph_add_output(d.g, vals[i]), MX_OK);
  cr_assert_eq(mx_graph_add_output(d.g, vals[below(&r, (uint32_t)nv)]), MX_OK);
  static const int64_t limits[] = {-1, 0, 1, 2, 3, 4, 4, 4, 6};
  d.limit = limits[below(&r, 9)];
  d.stable = below(&r, 4) == 0;
  pt_infer(d.g);
  return d;
}

static void free_dag(dag *d) {
  for (size_t i = 0; i < d->n_forced; i++) free(d->forced[i]);
  free(d->forced);
  mx_graph_destroy(d->g);
}

static bool is_forced(const dag *d, const char *name) {
  for (size_t i = 0; i < d->n_forced; i++)
    if (strcmp(d->forced[i], name) == 0) return true;
  return false;
}

/* A data edge of the graph: node `from` produces an input of node `to`. */
typedef struct node_edge {
  mx_node_id from, to;
  uint32_t from_cluster, to_cluster; /* the clusters holding them */
} node_edge;

/* Every data edge between nodes of g, by consumer and then input slot; *n receives the count.
 * malloc'd (free it). */
static node_edge *node_edges(const mx_graph *g, const mx_partition *p, size_t *n) {
  size_t cap = 1;
  for (size_t i = 0; i < g->n_nodes; i++) cap += g->nodes[i].n_inputs;
  node_edge *e = malloc(cap * sizeof *e);
  cr_assert_not_null(e);
  *n = 0;
  for (size_t i = 0; i < g->n_nodes; i++) {
    const mx_node *nd = &g->nodes[i];
    mx_partition_node_info bi;
    mx_partition_node(p, (mx_node_id)i, &bi);
    for (uint32_t k = 0; k < nd->n_inputs; k++) {
      mx_node_id pr = g->values[nd->inputs[k]].producer;
      if (pr == MX_NO_NODE) continue;
      mx_partition_node_info ai;
      mx_partition_node(p, pr, &ai);
      e[(*n)++] = (node_edge){pr, (mx_node_id)i, ai.cluster, bi.cluster};
    }
  }
  return e;
}

/* Normal mode merges as far as the rules allow: two directly connected clusters of the same
 * type (KNOWN-KNOWN, UNKNOWN-UNKNOWN) always have a second path between them, through another
 * cluster, that merging would turn into a cycle. Checked by brute force on the cluster graph. */
static void check_maximal(const dag *d, mx_partition *p, uint64_t seed) {
  const mx_graph *g = d->g;
  size_t nc = mx_partition_cluster_count(p);
  bool *edge = calloc(nc * nc, sizeof *edge), *reach = calloc(nc, sizeof *reach);
  cr_assert(edge && reach);
  size_t ne;
  node_edge *e = node_edges(g, p, &ne);
  for (size_t i = 0; i < ne; i++)
    if (e[i].from_cluster != e[i].to_cluster) edge[e[i].from_cluster * nc + e[i].to_cluster] = true;
  free(e);
  for (size_t a = 0; a < nc; a++) {
    mx_partition_cluster_info ca;
    mx_partition_cluster(p, a, &ca);
    for (size_t b = a + 1; b < nc; b++) {
      if (!edge[a * nc + b]) continue;
      mx_partition_cluster_info cb;
      mx_partition_cluster(p, b, &cb);
      if (ca.type != cb.type) continue;
      /* Clusters reachable from a without the direct edge a -> b (ids are topological). */
      memset(reach, 0, nc * sizeof *reach);
      for (size_t x = a + 1; x < b; x++) reach[x] = edge[a * nc + x];
      for (size_t x = a + 1; x < b; x++)
        for (size_t y = x + 1; y <= b && reach[x]; y++)
          if (edge[x * nc + y]) reach[y] = true;
      cr_assert(reach[b], "seed %llu: %s clusters %zu -> %zu could have merged", (unsigned long long)seed,
                mx_cluster_type_name(ca.type), a, b);
    }
  }
  free(edge);
  free(reach);
}

static void check_properties(const dag *d, mx_partition *p, uint64_t seed) {
  const mx_graph *g = d->g;
  size_t nc = mx_partition_cluster_count(p);
  size_t *seen = calloc(g->n_nodes, sizeof *seen);
  cr_assert_not_null(seen);
  size_t members = 0;
  for (size_t id = 0; id < nc; id++) {
    mx_partition_cluster_info ci;
    cr_assert(mx_partition_cluster(p, id, &ci));
    /* (A graph with no unknown node is not partitioned: one static model whatever its size.) */
    if (ci.type == MX_CLUSTER_KNOWN && d->limit > 0 && d->n_forced > 0)
      cr_assert_geq((int64_t)ci.n_nodes, d->limit, "seed %llu: known cluster %zu below the limit",
                    (unsigned long long)seed, id);
    for (size_t k = 0; k < ci.n_nodes; k++) {
      mx_node_id n = mx_partition_cluster_node(p, id, k);
      seen[n]++;
      members++;
      mx_partition_node_info info;
      cr_assert(mx_partition_node(p, n, &info));
      cr_assert_eq(info.cluster, id);
      if (ci.type == MX_CLUSTER_KNOWN) {
        cr_assert_not(is_forced(d, g->nodes[n].name), "seed %llu: unknown node %s in known cluster %zu",
                      (unsigned long long)seed, g->nodes[n].name, id);
        cr_assert_eq(info.reason.kind, MX_PART_KNOWN);
      }
    }
  }
  cr_assert_eq(members, mx_graph_node_count(g), "seed %llu", (unsigned long long)seed);
  for (size_t n = 0; n < g->n_nodes; n++)
    cr_assert_eq(seen[n], 1, "seed %llu: node %zu", (unsigned long long)seed, n);
  free(seen);
  /* Edges go forward in cluster order (so the cluster graph is acyclic), and in normal mode
   * two directly connected unknown nodes share a cluster. */
  size_t ne;
  node_edge *e = node_edges(g, p, &ne);
  for (size_t i = 0; i < ne; i++) {
    const char *from = g->nodes[e[i].from].name, *to = g->nodes[e[i].to].name;
    cr_assert_leq(e[i].from_cluster, e[i].to_cluster, "seed %llu: edge %s -> %s goes backwards",
                  (unsigned long long)seed, from, to);
    if (!d->stable && d->limit >= 0 && is_forced(d, to) && is_forced(d, from))
      cr_assert_eq(e[i].from_cluster, e[i].to_cluster, "seed %llu: unknown %s -> %s split",
                   (unsigned long long)seed, from, to);
  }
  free(e);
  for (size_t id = 0; id < nc; id++) {
    mx_partition_cluster_info ci;
    mx_partition_cluster(p, id, &ci);
    for (size_t k = 0; k < ci.n_inputs; k++) {
      mx_partition_boundary b;
      cr_assert(mx_partition_cluster_input(p, id, k, &b));
      cr_assert_lt(b.peer, id, "seed %llu: cluster %zu reads from a later cluster", (unsigned long long)seed,
                   id);
      cr_assert_eq(b.parent_index, k);
    }
  }
  if (!d->stable) check_maximal(d, p, seed);
  pt_check_root_order(p);
  pt_check_roundtrip(p, g, false);
}

Test(random, thousand_dags) {
  for (uint64_t seed = 1; seed <= 1000; seed++) {
    dag d = make_dag(seed);
    mx_partition *p = pt_partition(d.g, d.limit, d.stable, (const char *const *)d.forced, d.n_forced);
    char *json1 = pt_dump(p, mx_partition_dump_json);
    char *text1 = pt_dump(p, mx_partition_dump_text);
    check_properties(&d, p, seed);
    mx_partition_destroy(p);
    /* Same graph again, and a copy built from the same seed: identical dumps. */
    p = pt_partition(d.g, d.limit, d.stable, (const char *const *)d.forced, d.n_forced);
    char *json2 = pt_dump(p, mx_partition_dump_json);
    cr_assert_str_eq(json1, json2, "seed %llu: JSON differs between runs", (unsigned long long)seed);
    free(json2);
    mx_partition_destroy(p);
    dag e = make_dag(seed);
    p = pt_partition(e.g, e.limit, e.stable, (const char *const *)e.forced, e.n_forced);
    char *text2 = pt_dump(p, mx_partition_dump_text);
    cr_assert_str_eq(text1, text2, "seed %llu: text differs for a rebuilt graph", (unsigned long long)seed);
    free(text2);
    mx_partition_destroy(p);
    free_dag(&e);
    free(json1);
    free(text1);
    free_dag(&d);
  }
}

/* Normal mode on wide random DAGs: stresses the merge searches (many unknown islands). */
Test(random, wide_dags_stay_acyclic) {
  for (uint64_t seed = 1; seed <= 40; seed++) {
    rng r = {seed * 7919 + 3};
    mx_graph *g = pt_graph("wide");
    mx_value_id vals[600];
    size_t nv = 0;
    vals[nv++] = pt_input(g, "x", MX_FLOAT32, 2, (mx_dim[]){2, 3});
    char *forced[600];
    size_t nf = 0;
    for (int i = 0; i < 500; i++) {
      char name[16];
      snprintf(name, sizeof name, "w%d", i);
      mx_value_id a = vals[nv - 1 - below(&r, nv < 24 ? (uint32_t)nv : 24)];
      mx_value_id b = vals[nv - 1 - below(&r, nv < 24 ? (uint32_t)nv : 24)];
      vals[nv++] = below(&r, 2) ? pt_op2(g, "Add", name, a, b) : pt_op1(g, "Relu", name, a);
      if (below(&r, 100) < 15) forced[nf++] = strdup(name);
    }
    for (size_t i = 1; i < nv; i++)
      if (g->values[vals[i]].n_consumers == 0) cr_assert_eq(mx_graph_add_output(g, vals[i]), MX_OK);
    pt_infer(g);
    dag d = {g, forced, nf, (int64_t)below(&r, 5), false};
    mx_partition *p = pt_partition(g, d.limit, false, (const char *const *)forced, nf);
    check_properties(&d, p, seed);
    mx_partition_destroy(p);
    for (size_t i = 0; i < nf; i++) free(forced[i]);
    mx_graph_destroy(g);
  }
}
