/* The schedule of a static plan: a topological order of the tasks chosen by list scheduling
 * with priorities. A task's priority is its bottom level (its estimated device time plus the
 * longest estimated path from it to the end of the graph), so the critical path runs first and
 * branches that can overlap with it become ready early; ties keep the graph's own order, so a
 * chain keeps its natural order and the schedule is deterministic. */
#include <stdlib.h>

#include "static_exec/static_exec_impl.h"

/* True when task a should run before task b. */
static bool before(const mx__compile *c, uint32_t a, uint32_t b) {
  double la = c->tasks[a].blevel, lb = c->tasks[b].blevel;
  if (la != lb) return la > lb;
  return a < b;
}

static void heap_push(const mx__compile *c, uint32_t *h, uint32_t *n, uint32_t t) {
  uint32_t i = (*n)++;
  h[i] = t;
  while (i > 0) {
    uint32_t parent = (i - 1) / 2;
    if (!before(c, h[i], h[parent])) break;
    uint32_t tmp = h[i];
    h[i] = h[parent];
    h[parent] = tmp;
    i = parent;
  }
}

static uint32_t heap_pop(const mx__compile *c, uint32_t *h, uint32_t *n) {
  uint32_t top = h[0];
  h[0] = h[--(*n)];
  uint32_t i = 0;
  for (;;) {
    uint32_t l = 2 * i + 1, r = l + 1, best = i;
    if (l < *n && before(c, h[l], h[best])) best = l;
    if (r < *n && before(c, h[r], h[best])) best = r;
    if (best == i) break;
    uint32_t tmp = h[i];
    h[i] = h[best];
    h[best] = tmp;
    i = best;
  }
  return top;
}

mx_status mx__static_schedule(mx__compile *c) {
  uint32_t n = c->n_tasks;
  /* Tasks are created in topological order (kernels in graph order, copies after the kernels
   * they read), so one reverse pass gives the bottom levels. */
  for (uint32_t t = n; t-- > 0;) {
    mx__ctask *task = &c->tasks[t];
    double longest = 0;
    for (uint32_t k = 0; k < task->n_succs; k++) {
      double l = c->tasks[task->succs[k]].blevel;
      if (l > longest) longest = l;
    }
    task->blevel = task->cost + longest;
  }
  c->order = malloc((n ? n : 1) * sizeof *c->order);
  uint32_t *indeg = malloc((n ? n : 1) * sizeof *indeg);
  uint32_t *heap = malloc((n ? n : 1) * sizeof *heap);
  mx_status st = MX_OK;
  if (!c->order || !indeg || !heap) {
    st = mx__fail_oom(c->err, "schedule");
    goto free_scratch;
  }
  uint32_t hn = 0, pos = 0;
  for (uint32_t t = 0; t < n; t++) {
    indeg[t] = c->tasks[t].n_preds;
    if (indeg[t] == 0) heap_push(c, heap, &hn, t);
  }
  while (hn > 0) {
    uint32_t t = heap_pop(c, heap, &hn);
    c->tasks[t].pos = pos;
    c->order[pos++] = t;
    const mx__ctask *task = &c->tasks[t];
    for (uint32_t k = 0; k < task->n_succs; k++)
      if (--indeg[task->succs[k]] == 0) heap_push(c, heap, &hn, task->succs[k]);
  }
  if (pos != n) st = mx__fail(c->err, MX_ERR_INTERNAL, "schedule: the task graph has a cycle");

free_scratch:
  free(heap);
  free(indeg);
  return st;
}
