/* The single-threaded executors: sequential (a loop over the precomputed priority order, the
 * default for graphs without control flow) and topological (a ready queue over working
 * indegrees, reset per run with one copy). Both stop at the first failing kernel. */
#include <stdlib.h>
#include <string.h>

#include "v2runtime/exe_graph.h"

#define MX__LIKELY(x) __builtin_expect(!!(x), 1)

mx_status mx__exe_run_sequential(const mx_exe_graph *g, mx_exe_run *run) {
  const mx_exe_node *nodes = g->nodes;
  const uint32_t *order = g->order;
  for (uint32_t i = 0, n = g->n_nodes; i < n; i++) {
    const mx_exe_node *nd = &nodes[order[i]];
    mx_status st = MX__LIKELY(!run->on_node) ? nd->fn(run, nd) : mx__exe_call(run, nd, order[i]);
    if (st != MX_OK) {
      run->failed_node = order[i];
      return st;
    }
  }
  return MX_OK;
}

void mx__exe_topo_scratch_release(mx_exe_topo_scratch *s) {
  free(s->indegree);
  free(s->queue);
  memset(s, 0, sizeof *s);
}

mx_status mx__exe_run_topological(const mx_exe_graph *g, mx_exe_run *run, mx_exe_topo_scratch *s) {
  const uint32_t n = g->n_nodes;
  if (s->n < n) {
    uint32_t *d = realloc(s->indegree, (n ? n : 1) * sizeof *d);
    if (d) s->indegree = d;
    uint32_t *q = realloc(s->queue, (n ? n : 1) * sizeof *q);
    if (q) s->queue = q;
    if (!d || !q) return MX_ERR_OUT_OF_MEMORY;
    s->n = n;
  }
  uint32_t *indeg = s->indegree, *queue = s->queue;
  if (n) memcpy(indeg, g->indegree, n * sizeof *indeg);
  /* Every node enters the queue exactly once, so a plain array is the ring. */
  uint32_t head = 0, tail = 0;
  for (uint32_t i = 0; i < n; i++)
    if (!indeg[i]) queue[tail++] = i;
  while (head < tail) {
    uint32_t x = queue[head++];
    const mx_exe_node *nd = &g->nodes[x];
    mx_status st = mx__exe_call(run, nd, x);
    if (st != MX_OK) {
      run->failed_node = x;
      return st;
    }
    for (uint32_t e = g->succ_start[x]; e < g->succ_start[x + 1]; e++) {
      uint32_t sx = g->succ[e];
      if (--indeg[sx] == 0) queue[tail++] = sx;
    }
  }
  return MX_OK;
}
