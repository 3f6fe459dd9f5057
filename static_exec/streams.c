/* Streams and events of a static plan.
 *
 * Assignment: the tasks are walked in schedule order and each goes to the stream where it can
 * start earliest in a simulation with the cost model; reading the output of a task on another
 * stream costs an event, so chains stay on one stream and only branches with real work spread
 * out. Stream numbers are then renumbered by first use (stream 0 runs the first task).
 *
 * Events: every data edge between tasks of different streams needs the consumer's stream to
 * wait for the producer. A vector clock per stream records the last position of every stream
 * already known to be finished; an edge whose producer is covered by the clock is redundant
 * (implied by stream order and the events already placed) and gets no wait. That is the
 * transitive reduction of the cross-stream edges for this order: a wait is kept only when
 * nothing else orders the pair. A producer needed by several consumers records one event they
 * all wait on. The clock each task starts with is kept: mx__hb(a, b) reads it to decide whether
 * a happens before b on the device, which the memory plan needs. */
#include <stdlib.h>
#include <string.h>

#include "static_exec/static_exec_impl.h"

#define COST_EVENT_NS 2000.0 /* estimated cost of a cross-stream wait */

static void assign(mx__compile *c) {
  uint32_t S = c->max_streams;
  double avail[MX_STATIC_MAX_STREAMS] = {0};
  double *finish = malloc((c->n_tasks ? c->n_tasks : 1) * sizeof *finish);
  for (uint32_t pos = 0; pos < c->n_tasks; pos++) {
    uint32_t t = c->order[pos];
    mx__ctask *task = &c->tasks[t];
    if (S == 1 || !finish) {
      task->stream = 0;
      continue;
    }
    /* The stream of the predecessor that finishes last is preferred on ties. */
    uint32_t pref = 0;
    double last = -1;
    for (uint32_t k = 0; k < task->n_preds; k++) {
      uint32_t p = task->preds[k];
      if (finish[p] > last) {
        last = finish[p];
        pref = c->tasks[p].stream;
      }
    }
    uint32_t best = pref;
    double best_start = -1;
    for (uint32_t s = 0; s < S; s++) {
      double ready = 0;
      for (uint32_t k = 0; k < task->n_preds; k++) {
        uint32_t p = task->preds[k];
        double r = finish[p] + (c->tasks[p].stream != s ? COST_EVENT_NS : 0.0);
        if (r > ready) ready = r;
      }
      double start = ready > avail[s] ? ready : avail[s];
      if (best_start < 0 || start < best_start || (start == best_start && s == pref)) {
        best_start = start;
        best = s;
      }
    }
    task->stream = best;
    finish[t] = best_start + task->cost;
    avail[best] = finish[t];
  }
  free(finish);
}

/* Renumbers streams by first use and sets the 1-based position of every task on its stream. */
static void renumber(mx__compile *c) {
  uint32_t map[MX_STATIC_MAX_STREAMS], count[MX_STATIC_MAX_STREAMS] = {0};
  for (uint32_t s = 0; s < MX_STATIC_MAX_STREAMS; s++) map[s] = MX__NONE;
  uint32_t used = 0;
  for (uint32_t pos = 0; pos < c->n_tasks; pos++) {
    mx__ctask *task = &c->tasks[c->order[pos]];
    if (map[task->stream] == MX__NONE) map[task->stream] = used++;
    task->stream = map[task->stream];
    task->spos = ++count[task->stream];
  }
  c->n_streams = used ? used : 1;
}

mx_status mx__static_streams(mx__compile *c) {
  uint32_t S = c->max_streams, n = c->n_tasks;
  assign(c);
  renumber(c);
  c->vc = calloc((size_t)(n ? n : 1) * S, sizeof *c->vc);
  uint32_t *known = calloc((size_t)S * S, sizeof *known); /* clock of each stream's end so far */
  uint32_t *cur = calloc(S, sizeof *cur);
  uint32_t *cross = malloc((n ? n : 1) * sizeof *cross);
  mx_status st = MX_OK;
  if (!c->vc || !known || !cur || !cross) {
    st = mx__fail_oom(c->err, "stream clocks");
    goto free_scratch;
  }
  for (uint32_t pos = 0; pos < n; pos++) {
    uint32_t t = c->order[pos];
    mx__ctask *task = &c->tasks[t];
    uint32_t s = task->stream;
    memcpy(cur, known + (size_t)s * S, S * sizeof *cur);
    uint32_t nc = 0;
    for (uint32_t k = 0; k < task->n_preds; k++)
      if (c->tasks[task->preds[k]].stream != s) cross[nc++] = task->preds[k];
    c->cross_edges += nc;
    /* Latest producers first: waiting for them often covers the earlier ones. */
    for (uint32_t i = 1; i < nc; i++) {
      uint32_t x = cross[i], j = i;
      while (j > 0 && c->tasks[cross[j - 1]].pos < c->tasks[x].pos) {
        cross[j] = cross[j - 1];
        j--;
      }
      cross[j] = x;
    }
    if (nc) {
      task->waits = mx__arena_array(&c->arena, nc, sizeof *task->waits, 4);
      if (!task->waits) {
        st = mx__fail_oom(c->err, "events");
        goto free_scratch;
      }
    }
    for (uint32_t i = 0; i < nc; i++) {
      mx__ctask *p = &c->tasks[cross[i]];
      if (cur[p->stream] >= p->spos) continue; /* already ordered: redundant */
      if (p->event == MX__NONE) p->event = c->n_events++;
      task->waits[task->n_waits++] = p->event;
      c->n_waits++;
      const uint32_t *pvc = c->vc + (size_t)cross[i] * S;
      for (uint32_t x = 0; x < S; x++) {
        uint32_t v = x == p->stream ? p->spos : pvc[x];
        if (v > cur[x]) cur[x] = v;
      }
    }
    memcpy(c->vc + (size_t)t * S, cur, S * sizeof *cur);
    cur[s] = task->spos;
    memcpy(known + (size_t)s * S, cur, S * sizeof *cur);
  }

free_scratch:
  free(cross);
  free(cur);
  free(known);
  return st;
}
