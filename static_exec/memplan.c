/* The feature-map memory plan of a static plan.
 *
 * Buffers. Every value in the FM (not a graph input, output or constant) belongs to a group:
 * values produced by eliminated alias ops share their input's group, and the output of an
 * elementwise op joins the group of an input of the same dtype and shape when every other access
 * to that group happens before the op on the device (the input dies there: in-place). Each
 * non-empty group is one buffer; each kernel workspace is one more, used by its task only.
 *
 * Lifetimes. A buffer is accessed by the tasks that write or read any of its values; its first
 * access writes it and happens before every other. Two buffers may share bytes only when every
 * access of one happens before the first access of the other on the device: stream order and
 * events (mx__hb), so a use on another stream keeps a buffer alive until the event that orders
 * it. With one stream that is the plain schedule order.
 *
 * Offsets. Greedy by size with best fit (Pisarchyk & Lee 2020): buffers are taken in some order
 * and each goes into the smallest gap, between the buffers already placed that conflict with
 * it, that fits; otherwise on top. Several orders are tried (largest first, longest-lived
 * first, largest "breadth" first, first-use order) and the smallest arena wins. Sizes and
 * offsets are multiples of 64 bytes.
 *
 * Figures: the lower bound is the largest total of buffers that must be pairwise disjoint: the
 * buffers live at one schedule position (they conflict whatever the streams), and with several
 * streams a greedy extension of the fullest such sets by buffers conflicting with all members
 * (concurrent branches); no arena can be smaller. The no-reuse total is the sum of every
 * buffer. */
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "graph/ops/op.h"
#include "static_exec/static_exec_impl.h"

#define FM_ALIGN 64u

typedef struct ulist {
  uint32_t *u; /* tasks (malloc'd) */
  size_t n, cap;
} ulist;

static bool push_user(ulist *l, uint32_t t) {
  if (l->n && l->u[l->n - 1] == t) return true;
  if (!MX_GROW(l->u, l->cap, l->n + 1)) return false;
  l->u[l->n++] = t;
  return true;
}

static bool is_fm_root(const mx__compile *c, mx_value_id v) {
  return v != MX_NO_VALUE && c->vals[c->vals[v].root].loc == MX__LOC_FM;
}

/* Users of every FM root value (producer and consumers of it and of its aliases). */
static bool collect_users(mx__compile *c, ulist *ul) {
  for (uint32_t t = 0; t < c->n_tasks; t++) {
    const mx__ctask *task = &c->tasks[t];
    if (task->kind == MX__TASK_COPY) {
      if (is_fm_root(c, task->copy_src) && !push_user(&ul[c->vals[task->copy_src].root], t)) return false;
      continue;
    }
    const mx_node *nd = &c->g->nodes[task->node];
    for (uint32_t i = 0; i < nd->n_inputs + nd->n_outputs; i++) {
      mx_value_id v = i < nd->n_inputs ? nd->inputs[i] : nd->outputs[i - nd->n_inputs];
      if (is_fm_root(c, v) && !push_user(&ul[c->vals[v].root], t)) return false;
    }
  }
  return true;
}

static bool same_shape(const mx_value *a, const mx_value *b) {
  if (a->dtype != b->dtype || a->shape.rank != b->shape.rank) return false;
  for (int32_t k = 0; k < a->shape.rank; k++)
    if (a->shape.dims[k] != b->shape.dims[k]) return false;
  return true;
}

/* Tries to put the output of elementwise task t over one of its inputs. */
static bool try_in_place(mx__compile *c, uint32_t t, ulist *ul, bool *ok) {
  *ok = true;
  const mx_node *nd = &c->g->nodes[c->tasks[t].node];
  if (!(nd->def->flags & MX_OP_ELEMENTWISE) || nd->n_outputs < 1) return false;
  mx_value_id o = nd->outputs[0];
  if (c->vals[o].loc != MX__LOC_FM || c->vals[o].root != o || c->vals[o].nbytes == 0) return false;
  for (uint32_t i = 0; i < nd->n_inputs; i++) {
    mx_value_id v = nd->inputs[i];
    if (v == MX_NO_VALUE || v == o || !is_fm_root(c, v)) continue;
    if (!same_shape(&c->g->values[v], &c->g->values[o])) continue;
    uint32_t grp = mx__group_of(c, c->vals[v].root);
    bool clash = false;
    for (uint32_t j = 0; j < nd->n_inputs && !clash; j++) {
      mx_value_id w = nd->inputs[j];
      clash = j != i && w != v && is_fm_root(c, w) && mx__group_of(c, c->vals[w].root) == grp;
    }
    if (clash) continue;
    bool dies = true;
    for (size_t k = 0; k < ul[grp].n && dies; k++) dies = ul[grp].u[k] == t || mx__hb(c, ul[grp].u[k], t);
    if (!dies) continue;
    c->vals[o].group = grp;
    for (size_t k = 0; k < ul[o].n; k++) {
      if (!push_user(&ul[grp], ul[o].u[k])) {
        *ok = false;
        return false;
      }
    }
    c->in_place++;
    return true;
  }
  return false;
}

/* Sorts task ids by schedule position and removes repeats. */
static size_t sort_users(const mx__compile *c, uint32_t *u, size_t n) {
  for (size_t i = 1; i < n; i++) {
    uint32_t x = u[i];
    size_t j = i;
    while (j > 0 && c->tasks[u[j - 1]].pos > c->tasks[x].pos) {
      u[j] = u[j - 1];
      j--;
    }
    u[j] = x;
  }
  size_t m = 0;
  for (size_t i = 0; i < n; i++)
    if (m == 0 || u[m - 1] != u[i]) u[m++] = u[i];
  return m;
}

static bool conflict(const mx__compile *c, const mx__cbuf *a, const mx__cbuf *b) {
  if (a->lo <= b->hi && b->lo <= a->hi) return true;
  if (c->n_streams == 1) return false;
  const mx__cbuf *x = a->hi < b->lo ? a : b, *y = x == a ? b : a;
  for (uint32_t k = 0; k < x->n_users; k++)
    if (!mx__hb(c, x->users[k], y->first)) return true;
  return false;
}

/* One placement in the given order; writes offsets, returns the arena size. */
static uint64_t place(const mx__compile *c, const uint32_t *order, uint64_t *off, uint32_t *placed) {
  uint32_t np = 0;
  uint64_t arena = 0;
  for (uint32_t i = 0; i < c->n_bufs; i++) {
    uint32_t b = order[i];
    const mx__cbuf *B = &c->bufs[b];
    uint64_t prev_end = 0, best_off = 0, best_gap = UINT64_MAX;
    bool found = false;
    for (uint32_t k = 0; k < np; k++) {
      uint32_t q = placed[k];
      if (!conflict(c, B, &c->bufs[q])) continue;
      if (off[q] > prev_end) {
        uint64_t gap = off[q] - prev_end;
        if (gap >= B->size && gap < best_gap) {
          best_gap = gap;
          best_off = prev_end;
          found = true;
        }
      }
      uint64_t end = off[q] + c->bufs[q].size;
      if (end > prev_end) prev_end = end;
    }
    off[b] = found ? best_off : prev_end;
    if (off[b] + B->size > arena) arena = off[b] + B->size;
    uint32_t j = np++;
    while (j > 0 && off[placed[j - 1]] > off[b]) {
      placed[j] = placed[j - 1];
      j--;
    }
    placed[j] = b;
  }
  return arena;
}

typedef struct sort_key {
  uint64_t k1, k2, k3; /* compared in turn, larger first */
  uint32_t idx;
} sort_key;

static int cmp_key(const void *a, const void *b) {
  const sort_key *x = a, *y = b;
  if (x->k1 != y->k1) return x->k1 > y->k1 ? -1 : 1;
  if (x->k2 != y->k2) return x->k2 > y->k2 ? -1 : 1;
  if (x->k3 != y->k3) return x->k3 > y->k3 ? -1 : 1;
  return x->idx < y->idx ? -1 : x->idx > y->idx;
}

enum { ORDER_SIZE, ORDER_SIZE_LIFE, ORDER_LIFE, ORDER_BREADTH, ORDER_FIRST_USE, N_ORDERS };
static const char *const order_names[N_ORDERS] = {"greedy by size", "size, then lifetime", "lifetime",
                                                  "greedy by breadth", "first use"};

/* Builds placement order `which` into out using per-position live totals `live`. */
static void make_order(const mx__compile *c, int which, const uint64_t *live, sort_key *keys, uint32_t *out) {
  uint32_t n = c->n_tasks;
  for (uint32_t b = 0; b < c->n_bufs; b++) {
    const mx__cbuf *B = &c->bufs[b];
    uint64_t life = (uint64_t)(B->hi - B->lo);
    sort_key *k = &keys[b];
    k->idx = b;
    switch (which) {
      case ORDER_SIZE:
        k->k1 = B->size;
        k->k2 = n - B->lo;
        k->k3 = 0;
        break;
      case ORDER_SIZE_LIFE:
        k->k1 = B->size;
        k->k2 = life;
        k->k3 = n - B->lo;
        break;
      case ORDER_LIFE:
        k->k1 = life;
        k->k2 = B->size;
        k->k3 = n - B->lo;
        break;
      case ORDER_BREADTH: {
        uint64_t m = 0;
        for (uint32_t p = B->lo; p <= B->hi; p++)
          if (live[p] > m) m = live[p];
        k->k1 = m;
        k->k2 = B->size;
        k->k3 = n - B->lo;
        break;
      }
      default:
        k->k1 = n - B->lo;
        k->k2 = B->size;
        k->k3 = 0;
        break;
    }
  }
  qsort(keys, c->n_bufs, sizeof *keys, cmp_key);
  for (uint32_t b = 0; b < c->n_bufs; b++) out[b] = keys[b].idx;
}

/* With several streams more buffers are live together than at any one position of the serial
 * schedule. Any set of pairwise-conflicting buffers must be disjoint, so its total is a lower
 * bound too: starting from the live sets of the fullest positions, greedily add the largest
 * buffers that conflict with every member. */
static void clique_bound(mx__compile *c, const uint64_t *live, uint32_t *members, sort_key *keys) {
  uint32_t n = c->n_tasks, nb = c->n_bufs;
  for (uint32_t p = 0; p < n; p++) {
    keys[p].k1 = live[p];
    keys[p].k2 = keys[p].k3 = 0;
    keys[p].idx = p;
  }
  qsort(keys, n, sizeof *keys, cmp_key);
  uint32_t *by_size = members + nb; /* second half of the scratch */
  for (uint32_t b = 0; b < nb; b++) by_size[b] = b;
  for (uint32_t i = 1; i < nb; i++) {
    uint32_t x = by_size[i], j = i;
    while (j > 0 && c->bufs[by_size[j - 1]].size < c->bufs[x].size) {
      by_size[j] = by_size[j - 1];
      j--;
    }
    by_size[j] = x;
  }
  for (uint32_t k = 0; k < n && k < 32 && 2 * keys[k].k1 >= c->lower_bound; k++) {
    uint32_t p = keys[k].idx, nm = 0;
    uint64_t total = 0;
    for (uint32_t b = 0; b < nb; b++)
      if (c->bufs[b].lo <= p && p <= c->bufs[b].hi) {
        members[nm++] = b;
        total += c->bufs[b].size;
      }
    for (uint32_t i = 0; i < nb; i++) {
      uint32_t b = by_size[i];
      const mx__cbuf *B = &c->bufs[b];
      if (B->lo <= p && p <= B->hi) continue;
      bool all = true;
      for (uint32_t m = 0; m < nm && all; m++) all = conflict(c, B, &c->bufs[members[m]]);
      if (!all) continue;
      members[nm++] = b;
      total += B->size;
    }
    if (total > c->lower_bound) c->lower_bound = total;
  }
}

/* Lower bound, no-reuse total and the best placement. */
static mx_status assign_offsets(mx__compile *c) {
  uint32_t n = c->n_tasks, nb = c->n_bufs;
  uint64_t *live = calloc((size_t)n + 1, sizeof *live);
  uint64_t *off = calloc(nb ? nb : 1, sizeof *off);
  uint64_t *best = calloc(nb ? nb : 1, sizeof *best);
  uint32_t *order = calloc(nb ? nb : 1, sizeof *order);
  uint32_t *placed = calloc(nb ? nb : 1, sizeof *placed);
  sort_key *keys = calloc(nb ? nb : 1, sizeof *keys);
  mx_status st = MX_OK;
  if (!live || !off || !best || !order || !placed || !keys) {
    st = mx__fail_oom(c->err, "memory plan");
    goto free_scratch;
  }
  /* Live totals per position: difference array, then prefix sums. */
  for (uint32_t b = 0; b < nb; b++) {
    live[c->bufs[b].lo] += c->bufs[b].size;
    live[c->bufs[b].hi + 1] -= c->bufs[b].size;
    c->no_reuse += c->bufs[b].size;
  }
  uint64_t run = 0;
  for (uint32_t p = 0; p <= n; p++) {
    run += live[p];
    live[p] = run;
    if (run > c->lower_bound) c->lower_bound = run;
  }
  if (c->n_streams > 1 && nb) {
    uint32_t *scratch = malloc(2 * (size_t)nb * sizeof *scratch);
    sort_key *pkeys = malloc((size_t)(n ? n : 1) * sizeof *pkeys);
    if (!scratch || !pkeys) {
      free(scratch);
      free(pkeys);
      st = mx__fail_oom(c->err, "memory plan");
      goto free_scratch;
    }
    clique_bound(c, live, scratch, pkeys);
    free(scratch);
    free(pkeys);
  }
  uint64_t best_arena = UINT64_MAX;
  for (int w = 0; w < N_ORDERS; w++) {
    make_order(c, w, live, keys, order);
    uint64_t arena = place(c, order, off, placed);
    if (arena < best_arena) {
      best_arena = arena;
      memcpy(best, off, nb * sizeof *off);
      c->placement = order_names[w];
    }
    if (best_arena == c->lower_bound) break; /* cannot do better */
  }
  c->fm_bytes = nb ? best_arena : 0;
  if (!nb) c->placement = "none (no feature map)";
  for (uint32_t b = 0; b < nb; b++) c->bufs[b].offset = best[b];

free_scratch:
  free(keys);
  free(placed);
  free(order);
  free(best);
  free(off);
  free(live);
  return st;
}

mx_status mx__static_memplan(mx__compile *c) {
  size_t nv = c->g->n_values;
  ulist *ul = calloc(nv ? nv : 1, sizeof *ul);
  mx_status st = MX_OK;
  if (!ul || !collect_users(c, ul)) {
    st = mx__fail_oom(c->err, "memory plan users");
    goto free_users;
  }
  for (uint32_t pos = 0; pos < c->n_tasks; pos++) {
    uint32_t t = c->order[pos];
    if (c->tasks[t].kind != MX__TASK_KERNEL) continue;
    bool ok;
    try_in_place(c, t, ul, &ok);
    if (!ok) {
      st = mx__fail_oom(c->err, "memory plan users");
      goto free_users;
    }
  }
  /* One buffer per non-empty group, one per workspace. */
  uint32_t cap = 0;
  for (size_t v = 0; v < nv; v++)
    if (c->vals[v].loc == MX__LOC_FM && c->vals[v].root == v && mx__group_of(c, (uint32_t)v) == v) cap++;
  for (uint32_t t = 0; t < c->n_tasks; t++) cap += c->tasks[t].ws_size ? 1 : 0;
  c->bufs = calloc(cap ? cap : 1, sizeof *c->bufs);
  if (!c->bufs) {
    st = mx__fail_oom(c->err, "memory plan buffers");
    goto free_users;
  }
  for (size_t v = 0; v < nv; v++) {
    mx__cval *cv = &c->vals[v];
    if (cv->loc != MX__LOC_FM || cv->root != v || mx__group_of(c, (uint32_t)v) != v) continue;
    if (cv->nbytes == 0 || ul[v].n == 0) continue;
    mx__cbuf *B = &c->bufs[c->n_bufs];
    B->size = (cv->nbytes + FM_ALIGN - 1) & ~(uint64_t)(FM_ALIGN - 1);
    B->value = (mx_value_id)v;
    B->users = ul[v].u;
    B->cap_users = (uint32_t)ul[v].cap;
    ul[v].u = NULL;
    B->n_users = (uint32_t)sort_users(c, B->users, ul[v].n);
    B->first = B->users[0];
    B->lo = c->tasks[B->users[0]].pos;
    B->hi = c->tasks[B->users[B->n_users - 1]].pos;
    cv->buffer = c->n_bufs++;
  }
  for (uint32_t pos = 0; pos < c->n_tasks; pos++) {
    uint32_t t = c->order[pos];
    if (!c->tasks[t].ws_size) continue;
    mx__cbuf *B = &c->bufs[c->n_bufs];
    B->size = (c->tasks[t].ws_size + FM_ALIGN - 1) & ~(uint64_t)(FM_ALIGN - 1);
    B->workspace = true;
    B->task = t;
    B->value = MX_NO_VALUE;
    B->users = malloc(sizeof *B->users);
    if (!B->users) {
      st = mx__fail_oom(c->err, "memory plan buffers");
      goto free_users;
    }
    B->users[0] = t;
    B->n_users = 1;
    B->first = t;
    B->lo = B->hi = pos;
    c->n_bufs++;
  }
  st = assign_offsets(c);

free_users:
  for (size_t v = 0; ul && v < nv; v++) free(ul[v].u);
  free(ul);
  return st;
}
