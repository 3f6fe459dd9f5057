/* Load check of a plan's ordering. Two tasks on different streams that touch the same bytes,
 * one of them writing, must be ordered by events (a chain of records and waits): otherwise the
 * CPU device's stream threads would race on those bytes, and a crafted .mxm file would get
 * undefined behaviour rather than an error. And on any number of streams, a task may read bytes
 * of the FM arena or an output only after an earlier task wrote them in the same execution:
 * otherwise it would compute on whatever the previous execution left there.
 *
 * Happens-before comes from vector clocks. A task's clock holds, per stream, how many of that
 * stream's tasks have finished before the task starts: its own stream's earlier tasks and,
 * through every event it waits for, everything the recording task's clock holds (a task records
 * its events after it ran). Task x is ordered before a later task y when y's clock counts x on
 * x's stream.
 *
 * The bytes a task may write (the FM arena and the outputs) are cut into pieces at every access
 * boundary. Walking the tasks in plan order, each piece remembers its last writer and, per
 * stream, its latest reader since then. A read must come after the last writer (and there must
 * be one), a write after the last writer and every stream's latest reader. Remembering only those is enough: the
 * writers of a piece are ordered one after another (or the walk stopped), and a stream's earlier
 * readers come before its latest in that stream's own order. The work is the pieces each access
 * covers, not every pair of tasks that ever share bytes (that grows with the square of a long
 * plan's tasks, as the memory plan reuses bytes). Tasks' ranges and events were checked before
 * (mx__plan_check). */
#include <stdlib.h>
#include <string.h>

#include "static_exec/static_exec_impl.h"

#define BAD(...) mx__fail(err, MX_ERR_MALFORMED, __VA_ARGS__)

/* Clock entries (tasks x streams), piece-state entries (pieces x (streams + 1)) and piece visits
 * a check may take: far above what a compiled plan needs, low enough that a crafted file cannot
 * make loading take minutes or gigabytes. */
#define MAX_ENTRIES (1u << 24)
#define MAX_VISITS  (1ull << 28)

typedef struct access {
  uint32_t alloc;  /* alloc id of the region */
  uint64_t lo, hi; /* bytes [lo, hi) of it */
  uint32_t task;
  bool write;
} access;

/* One region's pieces: bounds[0..n] cut it into n pieces; state holds, per piece, the last
 * writer then the latest reader of each stream (MX__NONE: none). */
typedef struct region {
  uint32_t alloc;
  uint64_t *bounds;
  uint32_t n;
  uint32_t *state;
} region;

typedef struct order_check {
  const mx_static_plan *p;
  uint32_t S;          /* streams */
  uint32_t *clk, *pos; /* per task: clock (S entries), 1-based place on its stream */
  access *acc;         /* every access, in task order */
  size_t n_acc;
  region *reg; /* regions with accesses, by alloc id */
  uint32_t n_reg;
  uint32_t *reg_of; /* alloc id -> index in reg */
  uint64_t visits;
} order_check;

/* Appends the accesses of task ti that may conflict: every read or write of the FM arena or an
 * output. Inputs and weights are only ever read (writes to them are refused earlier). */
static size_t task_accesses(const mx_static_plan *p, uint32_t ti, access *out) {
  const mx__ptask *pt = &p->tasks[ti];
  size_t n = 0;
  for (uint32_t i = 0; i < pt->n_in + pt->n_out; i++) {
    const mx__ptensor *t = &pt->t[i];
    if (t->alloc == MX__NO_ALLOC || !t->nbytes) continue;
    mx_static_alloc_kind kind = mx__plan_id_kind(p, t->alloc, NULL);
    if (kind != MX_STATIC_FM && kind != MX_STATIC_OUTPUT) continue;
    out[n++] = (access){t->alloc, t->offset, t->offset + t->nbytes, ti, i >= pt->n_in};
  }
  if (pt->ws_size) out[n++] = (access){MX__ID_FM, pt->ws_offset, pt->ws_offset + pt->ws_size, ti, true};
  return n;
}

/* Fills the clocks and places (see the file comment); recorded_by has n_events entries. */
static void vector_clocks(order_check *c, uint32_t *recorded_by) {
  const mx_static_plan *p = c->p;
  const uint32_t S = c->S;
  uint32_t last[MX_STATIC_MAX_STREAMS], count[MX_STATIC_MAX_STREAMS] = {0};
  for (uint32_t s = 0; s < S; s++) last[s] = MX__NONE;
  for (uint32_t t = 0; t < p->n_tasks; t++) {
    const mx__ptask *pt = &p->tasks[t];
    uint32_t s = pt->stream, *clk = c->clk + (size_t)t * S;
    if (last[s] != MX__NONE) memcpy(clk, c->clk + (size_t)last[s] * S, S * sizeof *clk);
    for (uint32_t k = 0; k < pt->n_waits; k++) {
      const uint32_t *r = c->clk + (size_t)recorded_by[pt->waits[k]] * S;
      for (uint32_t q = 0; q < S; q++) clk[q] = r[q] > clk[q] ? r[q] : clk[q];
    }
    clk[s] = c->pos[t] = ++count[s];
    last[s] = t;
    for (uint32_t k = 0; k < pt->n_records; k++) recorded_by[pt->records[k]] = t;
  }
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

/* Cuts every region with accesses at all their boundaries; false when out of memory or over
 * MAX_ENTRIES (*too_big). */
static bool make_regions(order_check *c, bool *too_big) {
  uint32_t ids = mx__plan_ids(c->p);
  uint32_t *count = calloc(ids, sizeof *count);
  c->reg_of = calloc(ids, sizeof *c->reg_of);
  if (!count || !c->reg_of) {
    free(count);
    return false;
  }
  for (size_t i = 0; i < c->n_acc; i++) count[c->acc[i].alloc]++;
  for (uint32_t id = 0; id < ids; id++) c->n_reg += count[id] > 0;
  c->reg = calloc(c->n_reg ? c->n_reg : 1, sizeof *c->reg);
  bool ok = c->reg != NULL;
  uint64_t entries = 0;
  for (uint32_t id = 0, r = 0; ok && id < ids; id++) {
    if (!count[id]) continue;
    c->reg_of[id] = r;
    region *g = &c->reg[r++];
    g->alloc = id;
    g->bounds = malloc(2 * (size_t)count[id] * sizeof *g->bounds);
    ok = g->bounds != NULL;
    for (size_t i = 0; ok && i < c->n_acc; i++) {
      if (c->acc[i].alloc != id) continue;
      g->bounds[g->n++] = c->acc[i].lo;
      g->bounds[g->n++] = c->acc[i].hi;
    }
    if (!ok) break;
    qsort(g->bounds, g->n, sizeof *g->bounds, cmp_u64);
    uint32_t u = 0;
    for (uint32_t k = 0; k < g->n; k++)
      if (!u || g->bounds[k] != g->bounds[u - 1]) g->bounds[u++] = g->bounds[k];
    g->n = u - 1; /* pieces between the unique bounds */
    entries += (uint64_t)g->n * (c->S + 1);
    if (entries > MAX_ENTRIES) {
      *too_big = true;
      ok = false;
      break;
    }
    g->state = malloc(((size_t)g->n * (c->S + 1) + 1) * sizeof *g->state);
    ok = g->state != NULL;
    if (ok)
      for (size_t k = 0; k < (size_t)g->n * (c->S + 1); k++) g->state[k] = MX__NONE;
  }
  free(count);
  return ok;
}

/* Index of the piece that starts at lo (lo is one of the bounds). */
static uint32_t piece_at(const region *g, uint64_t lo) {
  uint32_t a = 0, b = g->n;
  while (a < b) {
    uint32_t m = a + (b - a) / 2;
    if (g->bounds[m] < lo)
      a = m + 1;
    else
      b = m;
  }
  return a;
}

static bool ordered(const order_check *c, uint32_t x, uint32_t y) {
  uint32_t sx = c->p->tasks[x].stream;
  return sx == c->p->tasks[y].stream || c->clk[(size_t)y * c->S + sx] >= c->pos[x];
}

static mx_status race(const order_check *c, uint32_t x, uint32_t y, const access *a, uint64_t lo, uint64_t hi,
                      bool x_writes, mx_error *err) {
  const mx_static_plan *p = c->p;
  const mx__ptask *tx = &p->tasks[x], *ty = &p->tasks[y];
  return BAD(
      "plan '%s': tasks %u ('%s', stream %u) and %u ('%s', stream %u) both use bytes %llu..%llu of the %s "
      "region %u, %s, and no event orders them",
      p->name, x, tx->name, tx->stream, y, ty->name, ty->stream, (unsigned long long)lo,
      (unsigned long long)hi, mx__static_alloc_kind_name(mx__plan_id_kind(p, a->alloc, NULL)), a->alloc,
      x_writes && a->write ? "both writing"
      : x_writes           ? "the first writing"
                           : "the second writing");
}

/* Checks access a (of the task being walked) against the pieces it covers. */
static mx_status check_access(order_check *c, const access *a, mx_error *err) {
  const region *g = &c->reg[c->reg_of[a->alloc]];
  const uint32_t S = c->S, y = a->task;
  for (uint32_t k = piece_at(g, a->lo); k < g->n && g->bounds[k] < a->hi; k++) {
    if (++c->visits > MAX_VISITS)
      return BAD("plan '%s': too many overlapping accesses to check their order", c->p->name);
    const uint32_t *st = g->state + (size_t)k * (S + 1);
    if (st[0] == MX__NONE && !a->write) {
      const mx__ptask *ty = &c->p->tasks[y];
      return BAD(
          "plan '%s': task %u ('%s') reads bytes %llu..%llu of the %s region %u, which no earlier task "
          "writes",
          c->p->name, y, ty->name, (unsigned long long)g->bounds[k], (unsigned long long)g->bounds[k + 1],
          mx__static_alloc_kind_name(mx__plan_id_kind(c->p, a->alloc, NULL)), a->alloc);
    }
    if (st[0] != MX__NONE && !ordered(c, st[0], y))
      return race(c, st[0], y, a, g->bounds[k], g->bounds[k + 1], true, err);
    for (uint32_t s = 0; a->write && s < S; s++)
      if (st[1 + s] != MX__NONE && !ordered(c, st[1 + s], y))
        return race(c, st[1 + s], y, a, g->bounds[k], g->bounds[k + 1], false, err);
  }
  return MX_OK;
}

/* Records access a in the pieces it covers: reads first, then writes (see the caller). */
static void apply_access(order_check *c, const access *a) {
  region *g = &c->reg[c->reg_of[a->alloc]];
  const uint32_t S = c->S, s = c->p->tasks[a->task].stream;
  for (uint32_t k = piece_at(g, a->lo); k < g->n && g->bounds[k] < a->hi; k++) {
    uint32_t *st = g->state + (size_t)k * (S + 1);
    if (!a->write) {
      st[1 + s] = a->task;
      continue;
    }
    st[0] = a->task;
    for (uint32_t q = 0; q < S; q++) st[1 + q] = MX__NONE;
  }
}

static mx_status walk(order_check *c, mx_error *err) {
  size_t i = 0;
  while (i < c->n_acc) {
    size_t end = i;
    while (end < c->n_acc && c->acc[end].task == c->acc[i].task) end++;
    for (size_t k = i; k < end; k++) {
      mx_status st = check_access(c, &c->acc[k], err);
      if (st != MX_OK) return st;
    }
    /* A task's own reads and writes do not race with each other; after it, a later task must
     * follow it as the bytes' writer (and as a reader of what it only read). */
    for (int pass = 0; pass < 2; pass++)
      for (size_t k = i; k < end; k++)
        if (c->acc[k].write == (pass == 1)) apply_access(c, &c->acc[k]);
    i = end;
  }
  return MX_OK;
}

mx_status mx__plan_check_order(const mx_static_plan *p, mx_error *err) {
  const uint32_t S = p->n_streams, n = p->n_tasks;
  if (n == 0) return MX_OK;
  if ((uint64_t)n * S > MAX_ENTRIES)
    return BAD("plan '%s': %u tasks on %u streams, too many to check their order", p->name, n, S);
  order_check c = {.p = p, .S = S};
  size_t max_acc = 0;
  for (uint32_t t = 0; t < n; t++) max_acc += p->tasks[t].n_in + p->tasks[t].n_out + 1u;
  c.clk = calloc((size_t)n * S, sizeof *c.clk);
  c.pos = malloc(n * sizeof *c.pos);
  c.acc = malloc(max_acc * sizeof *c.acc);
  uint32_t *recorded_by = malloc((p->n_events ? p->n_events : 1) * sizeof *recorded_by);
  mx_status st = MX_OK;
  bool too_big = false;
  if (!c.clk || !c.pos || !c.acc || !recorded_by) {
    st = mx__fail_oom(err, "plan order check");
    goto done;
  }
  vector_clocks(&c, recorded_by);
  for (uint32_t t = 0; t < n; t++) c.n_acc += task_accesses(p, t, c.acc + c.n_acc);
  if (!make_regions(&c, &too_big)) {
    st = too_big ? BAD("plan '%s': too many distinct byte ranges to check their order", p->name)
                 : mx__fail_oom(err, "plan order check");
    goto done;
  }
  st = walk(&c, err);
done:
  for (uint32_t r = 0; c.reg && r < c.n_reg; r++) {
    free(c.reg[r].bounds);
    free(c.reg[r].state);
  }
  free(c.reg);
  free(c.reg_of);
  free(recorded_by);
  free(c.acc);
  free(c.pos);
  free(c.clk);
  return st;
}
