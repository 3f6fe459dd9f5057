/* The cluster graph the merge rules work on (the layout is described in partitioner_impl.h).
 *
 * mx__part_rebuild recomputes every list from the node edges at the start of a merge phase
 * (resolved, deduplicated, self edges dropped), sorts the clusters topologically and sorts each
 * out-segment by the rank of its targets. Merging two clusters links their in-chains and melds
 * their out-heaps. mx__part_out_neighbors is the one reader of out-lists: a scan bounded by a
 * rank, which pops the heap's segments whose first key is in range, compacts the prefix it
 * reads, and pushes them back. */
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "common/heap.h"
#include "partitioner/partitioner_impl.h"

void mx__part_marks_reset(mx__part_marks *k) {
  if (k->epoch == UINT32_MAX) {
    memset(k->m, 0, (size_t)k->n * sizeof *k->m);
    k->epoch = 0;
  }
  k->epoch++;
}

static bool marks_init(mx__part_marks *k, uint32_t n) {
  k->m = calloc(n ? n : 1, sizeof *k->m);
  k->epoch = 0;
  k->n = n;
  return k->m != NULL;
}

mx_status mx__part_work_init(mx__part_work *w, mx_partition *p) {
  memset(w, 0, sizeof *w);
  w->p = p;
  const mx_graph *g = p->g;
  uint32_t n = p->n_compute;
  size_t nn = n ? n : 1;
  w->n = n;
  w->parent = malloc(nn * sizeof *w->parent);
  w->rank = malloc(nn * sizeof *w->rank);
  w->size = malloc(nn * sizeof *w->size);
  w->unknown = malloc(nn);
  w->dead = calloc(nn, 1);
  w->min_pos = malloc(nn * sizeof *w->min_pos);
  w->in_head = malloc(nn * sizeof *w->in_head);
  w->in_tail = malloc(nn * sizeof *w->in_tail);
  w->out_root = malloc(nn * sizeof *w->out_root);
  w->mem_head = malloc(nn * sizeof *w->mem_head);
  w->mem_tail = malloc(nn * sizeof *w->mem_tail);
  w->mem_next = malloc(nn * sizeof *w->mem_next);
  w->order = malloc(nn * sizeof *w->order);
  w->aux = malloc(nn * sizeof *w->aux);
  w->scratch = malloc(nn * sizeof *w->scratch);
  w->scratch2 = malloc((nn + 2) * sizeof *w->scratch2);
  w->popped = malloc(nn * sizeof *w->popped);
  w->seg_start = malloc(2 * nn * sizeof *w->seg_start);
  w->seg_len = malloc(2 * nn * sizeof *w->seg_len);
  w->seg_next = malloc(2 * nn * sizeof *w->seg_next);
  w->seg_left = malloc(2 * nn * sizeof *w->seg_left);
  w->pred_off = calloc(nn + 1, sizeof *w->pred_off);
  bool ok = w->parent && w->rank && w->size && w->unknown && w->dead && w->min_pos && w->in_head &&
            w->in_tail && w->out_root && w->mem_head && w->mem_tail && w->mem_next && w->order && w->aux &&
            w->scratch && w->scratch2 && w->popped && w->seg_start && w->seg_len && w->seg_next &&
            w->seg_left && w->pred_off && marks_init(&w->visited, n) && marks_init(&w->seen, n) &&
            marks_init(&w->tried, n);
  if (!ok) goto oom;
  for (uint32_t i = 0; i < n; i++) {
    w->parent[i] = i;
    w->size[i] = 1;
    w->unknown[i] = p->marked_unknown[i];
    w->min_pos[i] = i;
    w->mem_head[i] = w->mem_tail[i] = i;
    w->mem_next[i] = MX__PART_NONE;
  }
  /* Node edges by destination: the compute producers of each compute node's inputs. */
  size_t n_edges = 0;
  for (uint32_t b = 0; b < n; b++) {
    const mx_node *nd = &g->nodes[p->compute[b]];
    for (uint32_t k = 0; k < nd->n_inputs; k++)
      if (mx__part_input_pos(p, nd, k) != MX__PART_NONE) n_edges++;
    w->pred_off[b + 1] = (uint32_t)n_edges;
  }
  w->pred = malloc((n_edges ? n_edges : 1) * sizeof *w->pred);
  w->cap_ent = 2 * n_edges + 1;
  w->ent = malloc(w->cap_ent * sizeof *w->ent);
  w->key = malloc(w->cap_ent * sizeof *w->key);
  if (!w->pred || !w->ent || !w->key) goto oom;
  size_t e = 0;
  for (uint32_t b = 0; b < n; b++) {
    const mx_node *nd = &g->nodes[p->compute[b]];
    for (uint32_t k = 0; k < nd->n_inputs; k++) {
      uint32_t a = mx__part_input_pos(p, nd, k);
      if (a != MX__PART_NONE) w->pred[e++] = a;
    }
  }
  return MX_OK;
oom:
  return mx__part_fail(p, MX_ERR_OUT_OF_MEMORY, "out of memory building the cluster graph of '%s'", g->name);
}

void mx__part_work_free(mx__part_work *w) {
  free(w->parent);
  free(w->rank);
  free(w->size);
  free(w->unknown);
  free(w->dead);
  free(w->min_pos);
  free(w->in_head);
  free(w->in_tail);
  free(w->out_root);
  free(w->mem_head);
  free(w->mem_tail);
  free(w->mem_next);
  free(w->order);
  free(w->aux);
  free(w->scratch);
  free(w->scratch2);
  free(w->popped);
  free(w->pred_off);
  free(w->pred);
  free(w->seg_start);
  free(w->seg_len);
  free(w->seg_next);
  free(w->seg_left);
  free(w->ent);
  free(w->key);
  free(w->tmp);
  free(w->visited.m);
  free(w->seen.m);
  free(w->tried.m);
  memset(w, 0, sizeof *w);
}

uint32_t mx__part_find(mx__part_work *w, uint32_t x) {
  while (w->parent[x] != x) {
    w->parent[x] = w->parent[w->parent[x]];
    x = w->parent[x];
  }
  return x;
}

bool mx__part_tmp_push(mx__part_work *w, uint32_t a, uint32_t b) {
  if (w->n_tmp + 1 > w->cap_tmp / 2) {
    size_t cap = w->cap_tmp;
    if (!MX_GROW(w->tmp, cap, 2 * (w->n_tmp + 1))) return false;
    w->cap_tmp = cap;
  }
  w->tmp[2 * w->n_tmp] = a;
  w->tmp[2 * w->n_tmp + 1] = b;
  w->n_tmp++;
  return true;
}

/* --- the topological sort of clusters ----------------------------------------------------- */

/* Removes repeated entries from segment s (first occurrence kept, order kept). */
static void dedupe_segment(mx__part_work *w, uint32_t s) {
  mx__part_marks_reset(&w->seen);
  uint32_t *e = w->ent + w->seg_start[s];
  uint32_t k = 0;
  for (uint32_t i = 0; i < w->seg_len[s]; i++) {
    if (mx__part_marked(&w->seen, e[i])) continue;
    mx__part_mark_set(&w->seen, e[i]);
    e[k++] = e[i];
  }
  w->seg_len[s] = k;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Sorts out-segment s by the rank of its targets and records the ranks as keys. buf holds at
 * least seg_len[s] entries. */
static void sort_out_segment(mx__part_work *w, uint32_t s, uint64_t *buf) {
  uint32_t *e = w->ent + w->seg_start[s], *k = w->key + w->seg_start[s], len = w->seg_len[s];
  for (uint32_t i = 0; i < len; i++) buf[i] = (uint64_t)w->rank[e[i]] << 32 | e[i];
  qsort(buf, len, sizeof *buf, cmp_u64);
  for (uint32_t i = 0; i < len; i++) {
    k[i] = (uint32_t)(buf[i] >> 32);
    e[i] = (uint32_t)buf[i];
  }
}

mx_status mx__part_rebuild(mx__part_work *w) {
  uint32_t n = w->n;
  mx_status st = MX_OK;
  uint32_t *in_cnt = calloc((size_t)n + 1, sizeof *in_cnt);
  uint32_t *out_cnt = calloc((size_t)n + 1, sizeof *out_cnt);
  uint64_t *heap = malloc(((size_t)n + 1) * sizeof *heap); /* (min_pos << 32 | root) */
  uint64_t *buf = NULL;
  if (!in_cnt || !out_cnt || !heap) goto oom;
  /* Point every position straight at its root. */
  for (uint32_t x = 0; x < n; x++) w->scratch[x] = mx__part_find(w, x);
  for (uint32_t x = 0; x < n; x++) w->parent[x] = w->scratch[x];
  for (uint32_t b = 0; b < n; b++) {
    uint32_t rb = w->parent[b];
    for (uint32_t i = w->pred_off[b]; i < w->pred_off[b + 1]; i++) {
      uint32_t ra = w->parent[w->pred[i]];
      if (ra == rb) continue;
      out_cnt[ra]++;
      in_cnt[rb]++;
    }
  }
  /* In-segment r is the first half of ent, out-segment n + r the second. */
  size_t off = 0;
  uint32_t max_out = 0;
  for (uint32_t r = 0; r < n; r++) {
    w->seg_start[r] = (uint32_t)off;
    w->seg_len[r] = 0;
    w->seg_next[r] = MX__PART_NONE;
    off += in_cnt[r];
  }
  for (uint32_t r = 0; r < n; r++) {
    w->seg_start[n + r] = (uint32_t)off;
    w->seg_len[n + r] = 0;
    w->seg_next[n + r] = w->seg_left[n + r] = MX__PART_NONE;
    off += out_cnt[r];
    if (out_cnt[r] > max_out) max_out = out_cnt[r];
  }
  for (uint32_t b = 0; b < n; b++) {
    uint32_t rb = w->parent[b];
    for (uint32_t i = w->pred_off[b]; i < w->pred_off[b + 1]; i++) {
      uint32_t ra = w->parent[w->pred[i]];
      if (ra == rb) continue;
      w->ent[w->seg_start[rb] + w->seg_len[rb]++] = ra;
      w->ent[w->seg_start[n + ra] + w->seg_len[n + ra]++] = rb;
    }
  }
  uint32_t roots = 0;
  for (uint32_t r = 0; r < n; r++) {
    w->in_head[r] = w->in_tail[r] = w->out_root[r] = MX__PART_NONE;
    if (w->parent[r] != r) continue;
    roots++;
    dedupe_segment(w, r);
    dedupe_segment(w, n + r);
    w->in_head[r] = w->in_tail[r] = r;
    w->dead[r] = 0;
    in_cnt[r] = w->seg_len[r]; /* in-degree for the sort below */
  }
  /* Kahn's algorithm over the roots; ties go to the smallest member position. Roots' member
   * sets are disjoint, so min_pos is unique per root and the packed key orders by it alone. */
  size_t hn = 0;
  uint32_t on = 0;
  for (uint32_t r = 0; r < n; r++)
    if (w->parent[r] == r && in_cnt[r] == 0) mx__heap_u64_push(heap, &hn, (uint64_t)w->min_pos[r] << 32 | r);
  while (hn) {
    uint32_t x = (uint32_t)mx__heap_u64_pop(heap, &hn);
    w->rank[x] = on;
    w->order[on++] = x;
    const uint32_t *e = w->ent + w->seg_start[n + x];
    for (uint32_t i = 0; i < w->seg_len[n + x]; i++)
      if (--in_cnt[e[i]] == 0) mx__heap_u64_push(heap, &hn, (uint64_t)w->min_pos[e[i]] << 32 | e[i]);
  }
  w->n_roots = on;
  if (on != roots) {
    st = mx__part_fail(w->p, MX_ERR_INTERNAL,
                       "partition of '%s': the cluster graph has a cycle (%u of %u clusters ordered)",
                       w->p->g->name, on, roots);
    goto done;
  }
  /* Out-segments sorted by target rank; each root's heap is its one segment. */
  buf = malloc(((size_t)max_out + 1) * sizeof *buf);
  if (!buf) goto oom;
  for (uint32_t r = 0; r < n; r++) {
    if (w->parent[r] != r || w->seg_len[n + r] == 0) continue;
    sort_out_segment(w, n + r, buf);
    w->out_root[r] = n + r;
  }
  goto done;
oom:
  st = mx__part_fail(w->p, MX_ERR_OUT_OF_MEMORY, "out of memory rebuilding the cluster graph of '%s'",
                     w->p->g->name);
done:
  free(in_cnt);
  free(out_cnt);
  free(heap);
  free(buf);
  return st;
}

/* --- merging and reading ------------------------------------------------------------------ */

/* First key of out-segment s (it is never empty while in a heap). */
static inline uint32_t seg_key(const mx__part_work *w, uint32_t s) { return w->key[w->seg_start[s]]; }

/* Melds two skew heaps of out-segments (top-down, iterative). */
static uint32_t meld(mx__part_work *w, uint32_t a, uint32_t b) {
  if (a == MX__PART_NONE) return b;
  if (b == MX__PART_NONE) return a;
  if (seg_key(w, b) < seg_key(w, a)) {
    uint32_t t = a;
    a = b;
    b = t;
  }
  uint32_t root = a, parent = a;
  a = w->seg_next[parent];
  w->seg_next[parent] = w->seg_left[parent];
  while (a != MX__PART_NONE && b != MX__PART_NONE) {
    if (seg_key(w, b) < seg_key(w, a)) {
      uint32_t t = a;
      a = b;
      b = t;
    }
    w->seg_left[parent] = a;
    parent = a;
    a = w->seg_next[parent];
    w->seg_next[parent] = w->seg_left[parent];
  }
  w->seg_left[parent] = a != MX__PART_NONE ? a : b;
  return root;
}

static uint32_t heap_take(mx__part_work *w, uint32_t *root) {
  uint32_t s = *root;
  *root = meld(w, w->seg_left[s], w->seg_next[s]);
  w->seg_left[s] = w->seg_next[s] = MX__PART_NONE;
  return s;
}

static void link_chain(uint32_t *seg_next, uint32_t *head_into, uint32_t *tail_into, uint32_t *head_from,
                       uint32_t *tail_from) {
  if (*head_from == MX__PART_NONE) return;
  if (*head_into == MX__PART_NONE) {
    *head_into = *head_from;
  } else {
    seg_next[*tail_into] = *head_from;
  }
  *tail_into = *tail_from;
  *head_from = *tail_from = MX__PART_NONE;
}

void mx__part_union(mx__part_work *w, uint32_t from, uint32_t into) {
  w->parent[from] = into;
  w->size[into] += w->size[from];
  if (w->min_pos[from] < w->min_pos[into]) w->min_pos[into] = w->min_pos[from];
  link_chain(w->seg_next, &w->in_head[into], &w->in_tail[into], &w->in_head[from], &w->in_tail[from]);
  w->out_root[into] = meld(w, w->out_root[into], w->out_root[from]);
  w->out_root[from] = MX__PART_NONE;
  w->mem_next[w->mem_tail[into]] = w->mem_head[from];
  w->mem_tail[into] = w->mem_tail[from];
}

void mx__part_out_neighbors(mx__part_work *w, uint32_t x, uint32_t limit, uint32_t *n_out) {
  mx__part_marks_reset(&w->seen);
  uint32_t k = 0, n_popped = 0;
  while (w->out_root[x] != MX__PART_NONE && seg_key(w, w->out_root[x]) <= limit) {
    uint32_t s = heap_take(w, &w->out_root[x]);
    uint32_t *e = w->ent + w->seg_start[s], *ky = w->key + w->seg_start[s];
    uint32_t len = w->seg_len[s], j = 0, kept = 0;
    /* Read the prefix in range; keep live entries (resolved) at the front, in order. */
    for (; j < len && ky[j] <= limit; j++) {
      uint32_t y = mx__part_find(w, e[j]);
      if (y == x || w->dead[y] || mx__part_marked(&w->seen, y)) continue;
      mx__part_mark_set(&w->seen, y);
      w->scratch2[k++] = y;
      e[kept] = y;
      ky[kept] = ky[j];
      kept++;
    }
    /* Close the gap by moving the kept entries up to the unread rest. */
    uint32_t drop = j - kept;
    if (drop) {
      memmove(e + drop, e, (size_t)kept * sizeof *e);
      memmove(ky + drop, ky, (size_t)kept * sizeof *ky);
      w->seg_start[s] += drop;
      w->seg_len[s] -= drop;
    }
    if (w->seg_len[s]) w->popped[n_popped++] = s;
  }
  for (uint32_t i = 0; i < n_popped; i++) w->out_root[x] = meld(w, w->out_root[x], w->popped[i]);
  if (w->out_root[x] == MX__PART_NONE) w->dead[x] = 1;
  *n_out = k;
}
