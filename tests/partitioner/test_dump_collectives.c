/* The JSON and DOT partition dumps of a tensor-parallel shard (graph/passes/shard.h): every
 * collective is named with the split it undoes, as the text note of `mixrt partition` does; an
 * unsharded model lists none. */
#include "graph/passes/shard.h"
#include "mixrt/models.h"
#include "test_helpers.h"

/* Rank `rank` of `tp` of the tiny llama, folded and fused as sessions compile it (tp 0: whole). */
static mx_graph *llama_rank(int tp, int rank) {
  mx_graph *g = NULL;
  mx_error err = {0};
  cr_assert_eq(mx_model_llama(NULL, &g, &err), MX_OK, "%s", err.message);
  mx_fuse_report fuse;
  cr_assert(mx_graph_optimize(g, NULL) == MX_OK && mx_graph_fuse(g, NULL, &fuse) == MX_OK &&
                mx_graph_optimize(g, NULL) == MX_OK,
            "%s", mx_graph_last_error(g));
  if (tp) cr_assert_eq(mx__shard_graph(g, tp, rank, NULL, &err), MX_OK, "%s", err.message);
  return g;
}

/* The dump written by fn, read back from a temporary file into a malloc'd string. */
static char *dump(const mx_partition *p, mx_status (*fn)(const mx_partition *, FILE *)) {
  FILE *f = tmpfile();
  cr_assert_not_null(f);
  cr_assert_eq(fn(p, f), MX_OK);
  long len = ftell(f);
  cr_assert_gt(len, 0);
  char *text = malloc((size_t)len + 1);
  cr_assert_not_null(text);
  rewind(f);
  cr_assert_eq(fread(text, 1, (size_t)len, f), (size_t)len);
  text[len] = '\0';
  fclose(f);
  return text;
}

static size_t count(const char *text, const char *what) {
  size_t n = 0;
  for (const char *s = strstr(text, what); s; s = strstr(s + 1, what)) n++;
  return n;
}

/* Collectives of g (live nodes of domain mixrt), and each one's name. */
static size_t collectives(const mx_graph *g, const char **names, size_t cap) {
  size_t n = 0;
  for (mx_node_id i = 0; i < g->n_nodes; i++)
    if (!(g->nodes[i].flags & MX_NODE_DEAD) && mx__shard_is_collective(&g->nodes[i]) && n < cap)
      names[n++] = g->nodes[i].name;
  return n;
}

Test(dump_collectives, json_names_each_collective_and_why) {
  mx_graph *g = llama_rank(2, 1);
  const char *names[16];
  size_t n = collectives(g, names, 16);
  cr_assert_eq(n, 6, "the tiny llama at tp 2: 5 AllReduce and 1 AllGather");
  mx_partition *p = pt_partition(g, MX_PARTITION_DEFAULT_STATIC_MIN_OPS, false, NULL, 0);
  char *json = dump(p, mx_partition_dump_json);
  const char *list = strstr(json, "\"collectives\": [");
  cr_assert(list, "%s", json);
  for (size_t i = 0; i < n; i++) {
    char want[256];
    snprintf(want, sizeof want, "{\"name\": \"%s\", \"op\": \"", names[i]);
    const char *entry = strstr(list, want);
    cr_expect(entry, "collective '%s' not listed: %s", names[i], list);
    cr_expect(entry && strstr(entry, "\"world_size\": 2, \"cluster\": "), "%s", entry ? entry : list);
  }
  cr_expect_eq(count(list, "\"why\": \"sums the 2 ranks' partial products of row-split MatMul"), 4, "%s",
               list);
  cr_expect_eq(count(list, "\"why\": \"sums the vocabulary-split rows of embedding Gather"), 1, "%s", list);
  cr_expect_eq(count(list, "\"why\": \"gathers the 2 vocabulary-split column blocks of MatMul"), 1, "%s",
               list);
  free(json);
  mx_partition_destroy(p);
  mx_graph_destroy(g);
}

Test(dump_collectives, dot_marks_each_collective_and_why) {
  mx_graph *g = llama_rank(2, 0);
  const char *names[16];
  size_t n = collectives(g, names, 16);
  mx_partition *p = pt_partition(g, MX_PARTITION_DEFAULT_STATIC_MIN_OPS, false, NULL, 0);
  char *dot = dump(p, mx_partition_dump_dot);
  cr_expect_eq(count(dot, "fillcolor=\"#bbdefb\""), n, "%s", dot);
  for (size_t i = 0; i < n; i++) {
    char want[256];
    snprintf(want, sizeof want, "label=\"%s\\n", names[i]);
    const char *node = strstr(dot, want);
    cr_assert(node, "collective '%s' not drawn", names[i]);
    /* Its line: the reason in the label and as the tooltip. */
    char line[1024];
    size_t len = strcspn(node, "\n");
    cr_assert_lt(len, sizeof line);
    memcpy(line, node, len);
    line[len] = '\0';
    cr_expect((strstr(line, "\\nsums the") || strstr(line, "\\ngathers the")) &&
                  (strstr(line, "tooltip=\"sums the") || strstr(line, "tooltip=\"gathers the")),
              "collective '%s' without its reason: %s", names[i], line);
  }
  cr_expect_eq(count(dot, "\\nAllReduce\\nsums the vocabulary-split rows of embedding Gather"), 1, "%s", dot);
  cr_expect_eq(count(dot, "\\nAllGather\\ngathers the 2 vocabulary-split column blocks"), 1, "%s", dot);
  free(dot);
  mx_partition_destroy(p);
  mx_graph_destroy(g);
}

Test(dump_collectives, unsharded_model_lists_none) {
  mx_graph *g = llama_rank(0, 0);
  mx_partition *p = pt_partition(g, MX_PARTITION_DEFAULT_STATIC_MIN_OPS, false, NULL, 0);
  char *json = dump(p, mx_partition_dump_json);
  cr_expect(strstr(json, "\"collectives\": [],"), "%s", json);
  free(json);
  char *dot = dump(p, mx_partition_dump_dot);
  cr_expect(!strstr(dot, "#bbdefb"), "%s", dot);
  free(dot);
  mx_partition_destroy(p);
  mx_graph_destroy(g);
}
