/* Building execution graphs: nodes are appended with their value ids; finishing derives data
 * edges from the values (writer before readers), adds the explicit ordering edges, removes
 * duplicates, and computes the CSR successor table, initial indegrees and the priority order. */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/grow.h"
#include "common/heap.h"
#include "v2runtime/exe_graph.h"
#include "v2runtime/exe_registry.h"

typedef struct pending_node {
  uint16_t kernel;
  uint16_t n_in, n_out;
  size_t io;   /* offset in b->io */
  size_t attr; /* offset in b->attr, or SIZE_MAX */
  uint32_t attr_size;
  uint32_t priority;
} pending_node;

typedef struct edge {
  uint32_t from, to;
} edge;

struct mx_exe_builder {
  pending_node *nodes;
  size_t n_nodes, cap_nodes;
  uint32_t *io;
  size_t n_io, cap_io;
  unsigned char *attr;
  size_t n_attr, cap_attr;
  edge *edges;
  size_t n_edges, cap_edges;
};

mx_status mx__exe_builder_create(mx_exe_builder **out) {
  *out = calloc(1, sizeof **out);
  return *out ? MX_OK : MX_ERR_OUT_OF_MEMORY;
}

void mx__exe_builder_destroy(mx_exe_builder *b) {
  if (!b) return;
  free(b->nodes);
  free(b->io);
  free(b->attr);
  free(b->edges);
  free(b);
}

uint32_t mx__exe_builder_count(const mx_exe_builder *b) { return (uint32_t)b->n_nodes; }

mx_status mx__exe_builder_add(mx_exe_builder *b, uint16_t kernel, const uint32_t *in, uint16_t n_in,
                              const uint32_t *out, uint16_t n_out, const void *attr, uint32_t attr_size,
                              uint32_t priority, uint32_t *node) {
  if (b->n_nodes >= UINT32_MAX - 1) return MX_ERR_LIMIT;
  size_t attr_at = SIZE_MAX;
  size_t padded = (attr_size + 7u) & ~(size_t)7u;
  if (!MX_GROW(b->nodes, b->cap_nodes, b->n_nodes + 1) ||
      !MX_GROW(b->io, b->cap_io, b->n_io + n_in + n_out) ||
      (attr_size && !MX_GROW(b->attr, b->cap_attr, b->n_attr + padded)))
    return MX_ERR_OUT_OF_MEMORY;
  if (attr_size) {
    attr_at = b->n_attr;
    memcpy(b->attr + attr_at, attr, attr_size);
    memset(b->attr + attr_at + attr_size, 0, padded - attr_size);
    b->n_attr += padded;
  }
  pending_node *p = &b->nodes[b->n_nodes];
  p->kernel = kernel;
  p->n_in = n_in;
  p->n_out = n_out;
  p->io = b->n_io;
  p->attr = attr_at;
  p->attr_size = attr_size;
  p->priority = priority;
  if (n_in) memcpy(b->io + b->n_io, in, n_in * sizeof *in);
  if (n_out) memcpy(b->io + b->n_io + n_in, out, n_out * sizeof *out);
  b->n_io += (size_t)n_in + n_out;
  if (node) *node = (uint32_t)b->n_nodes;
  b->n_nodes++;
  return MX_OK;
}

mx_status mx__exe_builder_edge(mx_exe_builder *b, uint32_t from, uint32_t to) {
  if (from >= b->n_nodes || to >= b->n_nodes || from == to) return MX_ERR_INVALID_ARGUMENT;
  if (!MX_GROW(b->edges, b->cap_edges, b->n_edges + 1)) return MX_ERR_OUT_OF_MEMORY;
  b->edges[b->n_edges].from = from;
  b->edges[b->n_edges].to = to;
  b->n_edges++;
  return MX_OK;
}

static int cmp_edge(const void *a, const void *b) {
  const edge *x = a, *y = b;
  if (x->from != y->from) return x->from < y->from ? -1 : 1;
  return x->to < y->to ? -1 : x->to > y->to;
}

void mx__exe_graph_release(mx_exe_graph *g) {
  if (!g) return;
  free(g->nodes);
  free(g->io);
  free(g->attr_data);
  free(g->succ_start);
  free(g->succ);
  free(g->indegree);
  free(g->order);
  memset(g, 0, sizeof *g);
}

mx_status mx__exe_builder_finish(mx_exe_builder *b, mx_exe_graph *g, mx_error *err) {
  memset(g, 0, sizeof *g);
  const uint32_t n = (uint32_t)b->n_nodes;
  mx_status st = MX_OK;
  uint32_t max_value = 0;
  for (size_t i = 0; i < b->n_io; i++)
    if (b->io[i] + 1 > max_value) max_value = b->io[i] + 1;
  uint32_t *writer = malloc((max_value ? max_value : 1) * sizeof *writer);
  edge *all = NULL;
  uint64_t *heap = NULL; /* ready nodes keyed (priority << 32 | id) */
  size_t n_heap = 0;
  size_t n_all = 0;
  if (!writer) goto oom;
  for (uint32_t v = 0; v < max_value; v++) writer[v] = UINT32_MAX;
  for (uint32_t i = 0; i < n; i++) {
    const pending_node *p = &b->nodes[i];
    for (uint16_t k = 0; k < p->n_out; k++) {
      uint32_t v = b->io[p->io + p->n_in + k];
      if (writer[v] != UINT32_MAX) {
        st = mx__fail(err, MX_ERR_INVALID_GRAPH, "execution graph: value %u is written by nodes %u and %u", v,
                      writer[v], i);
        goto done;
      }
      writer[v] = i;
    }
  }
  size_t cap_all = b->n_edges + b->n_io;
  all = malloc((cap_all ? cap_all : 1) * sizeof *all);
  if (!all) goto oom;
  if (b->n_edges) memcpy(all, b->edges, b->n_edges * sizeof *all);
  n_all = b->n_edges;
  for (uint32_t i = 0; i < n; i++) {
    const pending_node *p = &b->nodes[i];
    for (uint16_t k = 0; k < p->n_in; k++) {
      uint32_t w = writer[b->io[p->io + k]];
      if (w != UINT32_MAX && w != i) all[n_all++] = (edge){w, i};
    }
  }
  qsort(all, n_all, sizeof *all, cmp_edge);
  size_t uniq = 0;
  for (size_t i = 0; i < n_all; i++)
    if (!uniq || all[i].from != all[uniq - 1].from || all[i].to != all[uniq - 1].to) all[uniq++] = all[i];
  n_all = uniq;

  g->n_nodes = n;
  g->nodes = calloc(n ? n : 1, sizeof *g->nodes);
  g->io = malloc((b->n_io ? b->n_io : 1) * sizeof *g->io);
  g->attr_data = malloc(b->n_attr ? b->n_attr : 8);
  g->succ_start = calloc((size_t)n + 1, sizeof *g->succ_start);
  g->succ = malloc((n_all ? n_all : 1) * sizeof *g->succ);
  g->indegree = calloc(n ? n : 1, sizeof *g->indegree);
  g->order = malloc((n ? n : 1) * sizeof *g->order);
  heap = malloc((n ? n : 1) * sizeof *heap);
  if (!g->nodes || !g->io || !g->attr_data || !g->succ_start || !g->succ || !g->indegree || !g->order ||
      !heap)
    goto oom;
  if (b->n_io) memcpy(g->io, b->io, b->n_io * sizeof *g->io);
  g->n_io = b->n_io;
  if (b->n_attr) memcpy(g->attr_data, b->attr, b->n_attr);
  g->attr_size = b->n_attr;
  for (size_t i = 0; i < n_all; i++) {
    g->succ_start[all[i].from + 1]++;
    g->indegree[all[i].to]++;
  }
  for (uint32_t i = 0; i < n; i++) g->succ_start[i + 1] += g->succ_start[i];
  for (size_t i = 0; i < n_all; i++) g->succ[i] = all[i].to; /* sorted by from: already CSR order */
  for (uint32_t i = 0; i < n; i++) {
    const pending_node *p = &b->nodes[i];
    const mx_exe_kernel_def *kd = mx__exe_kernel_at(p->kernel);
    if (!kd) {
      st = mx__fail(err, MX_ERR_INVALID_GRAPH, "execution graph: node %u uses unknown kernel %u", i,
                    p->kernel);
      goto done;
    }
    mx_exe_node *nd = &g->nodes[i];
    nd->fn = kd->fn;
    nd->io = g->io + p->io;
    nd->attr = p->attr == SIZE_MAX ? NULL : g->attr_data + p->attr;
    nd->attr_size = p->attr_size;
    nd->n_in = p->n_in;
    nd->n_out = p->n_out;
    nd->kernel = p->kernel;
    nd->flags = kd->flags;
    nd->priority = p->priority;
  }
  /* Priority order: Kahn's algorithm taking the smallest (priority, id) among ready nodes. */
  uint32_t *indeg = malloc((n ? n : 1) * sizeof *indeg);
  if (!indeg) goto oom;
  if (n) memcpy(indeg, g->indegree, n * sizeof *indeg);
  for (uint32_t i = 0; i < n; i++)
    if (!indeg[i]) mx__heap_u64_push(heap, &n_heap, ((uint64_t)g->nodes[i].priority << 32) | i);
  uint32_t done_n = 0;
  while (n_heap) {
    uint32_t x = (uint32_t)mx__heap_u64_pop(heap, &n_heap);
    g->order[done_n++] = x;
    for (uint32_t e = g->succ_start[x]; e < g->succ_start[x + 1]; e++) {
      uint32_t s = g->succ[e];
      if (--indeg[s] == 0) mx__heap_u64_push(heap, &n_heap, ((uint64_t)g->nodes[s].priority << 32) | s);
    }
  }
  free(indeg);
  if (done_n != n) {
    st = mx__fail(err, MX_ERR_INVALID_GRAPH, "execution graph has a cycle (%u of %u nodes ordered)", done_n,
                  n);
    goto done;
  }
  st = MX_OK;
  goto done;
oom:
  st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory building an execution graph");
done:
  free(heap);
  free(all);
  free(writer);
  if (st != MX_OK) mx__exe_graph_release(g);
  return st;
}
