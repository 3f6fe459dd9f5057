/* Execution graphs and their executors: data and ordering edges, priority order, the three
 * executors on chains, wide and random DAGs (every node runs once, after its inputs), failures,
 * cycles and values written twice. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "v2runtime/exe_graph.h"
#include "v2runtime/exe_registry.h"

static uint16_t kernel(const char *name) {
  int k = mx__exe_kernel_find(name);
  cr_assert_geq(k, 0, "kernel %s missing", name);
  return (uint16_t)k;
}

/* A random DAG of Touch nodes: node i writes value i + 1 and reads up to 3 earlier values
 * (value 0 is never written; values start at 1). */
static void random_dag(mx_exe_builder *b, uint32_t n, uint32_t seed) {
  uint16_t touch = kernel("Touch");
  uint64_t s = seed * 2654435761u + 7;
  for (uint32_t i = 0; i < n; i++) {
    uint32_t in[3], n_in = 0;
    for (int k = 0; k < 3 && i > 0; k++) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      if ((s >> 60) & 1) in[n_in++] = 1 + (uint32_t)((s >> 33) % i);
    }
    uint32_t out = i + 1;
    cr_assert_eq(
        mx__exe_builder_add(b, touch, in, (uint16_t)n_in, &out, 1, NULL, 0, (uint32_t)(s >> 40) % 7, NULL),
        MX_OK);
  }
}

static void check_all_written(mx_exe_value *values, uint32_t n) {
  for (uint32_t i = 1; i <= n; i++) cr_assert_gt(values[i].i, 0, "node %u did not run", i - 1);
}

Test(exe_graph, executors_agree_on_random_dags) {
  mx_exe_pool *pool;
  mx_error err;
  cr_assert_eq(mx__exe_pool_create(2, &pool, &err), MX_OK, "%s", err.message);
  mx_exe_topo_scratch scratch = {0};
  for (uint32_t seed = 1; seed <= 50; seed++) {
    uint32_t n = 1 + seed * 13 % 300;
    mx_exe_builder *b;
    cr_assert_eq(mx__exe_builder_create(&b), MX_OK);
    random_dag(b, n, seed);
    mx_exe_graph g;
    cr_assert_eq(mx__exe_builder_finish(b, &g, &err), MX_OK, "%s", err.message);
    mx__exe_builder_destroy(b);
    mx_exe_value *ref = calloc(n + 1, sizeof *ref), *v = calloc(n + 1, sizeof *v);
    mx_exe_run run = {.values = ref, .err = &err, .failed_node = UINT32_MAX};
    cr_assert_eq(mx__exe_run_sequential(&g, &run), MX_OK, "%s", err.message);
    check_all_written(ref, n);
    for (int e = 0; e < 2; e++) {
      for (int rep = 0; rep < 3; rep++) {
        memset(v, 0, (n + 1) * sizeof *v);
        run.values = v;
        mx_status st =
            e == 0 ? mx__exe_run_topological(&g, &run, &scratch) : mx__exe_run_parallel(pool, &g, &run);
        cr_assert_eq(st, MX_OK, "%s", err.message);
        /* Touch writes 1 + the longest path to the node: identical whatever the executor. */
        cr_assert_eq(memcmp(v, ref, (n + 1) * sizeof *v), 0, "executor %d differs on seed %u", e, seed);
      }
    }
    free(ref);
    free(v);
    mx__exe_graph_release(&g);
  }
  mx__exe_topo_scratch_release(&scratch);
  mx__exe_pool_destroy(pool);
}

Test(exe_graph, priority_order_and_ordering_edges) {
  mx_exe_builder *b;
  cr_assert_eq(mx__exe_builder_create(&b), MX_OK);
  uint16_t noop = kernel("Noop");
  uint32_t a, c, d;
  cr_assert_eq(mx__exe_builder_add(b, noop, NULL, 0, NULL, 0, NULL, 0, 5, &a), MX_OK);
  cr_assert_eq(mx__exe_builder_add(b, noop, NULL, 0, NULL, 0, NULL, 0, 1, &c), MX_OK);
  cr_assert_eq(mx__exe_builder_add(b, noop, NULL, 0, NULL, 0, NULL, 0, 0, &d), MX_OK);
  cr_assert_eq(mx__exe_builder_edge(b, a, d), MX_OK); /* d must wait for a despite its priority */
  mx_exe_graph g;
  mx_error err;
  cr_assert_eq(mx__exe_builder_finish(b, &g, &err), MX_OK);
  cr_assert_eq(g.order[0], c);
  cr_assert_eq(g.order[1], a);
  cr_assert_eq(g.order[2], d);
  cr_assert_eq(g.indegree[d], 1);
  mx__exe_graph_release(&g);
  mx__exe_builder_destroy(b);
}

Test(exe_graph, cycles_and_double_writes_rejected) {
  mx_exe_builder *b;
  mx_error err;
  mx_exe_graph g;
  uint16_t touch = kernel("Touch");
  cr_assert_eq(mx__exe_builder_create(&b), MX_OK);
  uint32_t v1 = 1, v2 = 2;
  cr_assert_eq(mx__exe_builder_add(b, touch, &v2, 1, &v1, 1, NULL, 0, 0, NULL), MX_OK);
  cr_assert_eq(mx__exe_builder_add(b, touch, &v1, 1, &v2, 1, NULL, 0, 0, NULL), MX_OK);
  cr_assert_eq(mx__exe_builder_finish(b, &g, &err), MX_ERR_INVALID_GRAPH);
  cr_assert(strstr(err.message, "cycle"), "%s", err.message);
  mx__exe_builder_destroy(b);
  cr_assert_eq(mx__exe_builder_create(&b), MX_OK);
  cr_assert_eq(mx__exe_builder_add(b, touch, NULL, 0, &v1, 1, NULL, 0, 0, NULL), MX_OK);
  cr_assert_eq(mx__exe_builder_add(b, touch, NULL, 0, &v1, 1, NULL, 0, 0, NULL), MX_OK);
  cr_assert_eq(mx__exe_builder_finish(b, &g, &err), MX_ERR_INVALID_GRAPH);
  cr_assert(strstr(err.message, "written by nodes"), "%s", err.message);
  mx__exe_builder_destroy(b);
}

Test(exe_graph, failure_stops_and_names_the_node) {
  mx_exe_builder *b;
  mx_error err;
  mx_exe_graph g;
  uint16_t touch = kernel("Touch");
  cr_assert_eq(mx__exe_builder_create(&b), MX_OK);
  /* Node 1 reads value 5, which nothing writes: Touch fails there. */
  uint32_t v1 = 1, v5 = 5, v2 = 2;
  cr_assert_eq(mx__exe_builder_add(b, touch, NULL, 0, &v1, 1, NULL, 0, 0, NULL), MX_OK);
  cr_assert_eq(mx__exe_builder_add(b, touch, &v5, 1, &v2, 1, NULL, 0, 1, NULL), MX_OK);
  cr_assert_eq(mx__exe_builder_finish(b, &g, &err), MX_OK);
  mx__exe_builder_destroy(b);
  mx_exe_pool *pool;
  cr_assert_eq(mx__exe_pool_create(2, &pool, &err), MX_OK);
  mx_exe_topo_scratch scratch = {0};
  for (int e = 0; e < 3; e++) {
    mx_exe_value v[8] = {0};
    mx_exe_run run = {.values = v, .err = &err, .failed_node = UINT32_MAX};
    mx_status st = e == 0   ? mx__exe_run_sequential(&g, &run)
                   : e == 1 ? mx__exe_run_topological(&g, &run, &scratch)
                            : mx__exe_run_parallel(pool, &g, &run);
    cr_assert_eq(st, MX_ERR_INTERNAL);
    cr_assert_eq(run.failed_node, 1);
    cr_assert(strstr(err.message, "value 5"), "%s", err.message);
  }
  /* The pool still works after a failed run. */
  mx__exe_graph_release(&g);
  cr_assert_eq(mx__exe_builder_create(&b), MX_OK);
  random_dag(b, 100, 99);
  cr_assert_eq(mx__exe_builder_finish(b, &g, &err), MX_OK);
  mx__exe_builder_destroy(b);
  mx_exe_value v[101] = {0};
  mx_exe_run run = {.values = v, .err = &err, .failed_node = UINT32_MAX};
  cr_assert_eq(mx__exe_run_parallel(pool, &g, &run), MX_OK, "%s", err.message);
  check_all_written(v, 100);
  mx__exe_graph_release(&g);
  mx__exe_topo_scratch_release(&scratch);
  mx__exe_pool_destroy(pool);
}
