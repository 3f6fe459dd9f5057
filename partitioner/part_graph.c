/* The cluster graph the merge rules work on.
 *
 * A cluster is named by the position of its union-find root. Each root has a chain of
 * in-segments and a chain of out-segments; a segment is a range of the shared entry array, and
 * an entry names a neighbour cluster by a position that may since have been merged (the reader
 * resolves it with mx__part_find). Merging two clusters links their chains, so a merge costs
 * O(1) besides the union-find.
 *
 * At the start of each merge phase mx__part_rebuild recomputes every list from the node edges
 * (resolved, deduplicated, self edges dropped) and sorts the clusters topologically. During a
 * phase, out-lists are compacted when a search scans them: stale entries are resolved, repeats
 * and entries into dead clusters are dropped, and a chain of several segments is rewritten as
 * one. */
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "partitioner/partitioner-impl.h"

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
  w->out_head = malloc(nn * sizeof *w->out_head);
  w->out_tail = malloc(nn * sizeof *w->out_tail);
  w->mem_head = malloc(nn * sizeof *w->mem_head);
  w->mem_tail = malloc(nn * sizeof *w->mem_tail);
  w->mem_next = malloc(nn * sizeof *w->mem_next);
  w->order = malloc(nn * sizeof *w->order);
  w->aux = malloc(nn * sizeof *w->aux);
  w->scratch = malloc(nn * sizeof *w->scratch);
  w->scratch2 = malloc((nn + 2) * sizeof *w->scratch2);
  w->pred_off = calloc(nn + 1, sizeof *w->pred_off);
  bool ok = w->parent && w->rank && w->size && w->unknown && w->dead && w->min_pos && w->in_head &&
            w->in_tail && w->out_head && w->out_tail && w->mem_head && w->mem_tail && w->mem_next &&
            w->order && w->aux && w->scratch && w->scratch2 && w->pred_off &&
            marks_init(&w->visited, n) && marks_init(&w->seen, n) && marks_init(&w->tried, n);
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
    for (uint32_t k = 0; k < nd->n_inputs; k++) {
      mx_value_id v = nd->inputs[k];
      if (v == MX_NO_VALUE) continue;
      mx_node_id pr = g->values[v].producer;
      if (pr != MX_NO_NODE && p->pos_of[pr] != MX__PART_NONE) n_edges++;
    }
    w->pred_off[b + 1] = (uint32_t)n_edges;
  }
  w->pred = malloc((n_edges ? n_edges : 1) * sizeof *w->pred);
  if (!w->pred) goto oom;
  size_t e = 0;
  for (uint32_t b = 0; b < n; b++) {
    const mx_node *nd = &g->nodes[p->compute[b]];
    for (uint32_t k = 0; k < nd->n_inputs; k++) {
      mx_value_id v = nd->inputs[k];
      if (v == MX_NO_VALUE) continue;
      mx_node_id pr = g->values[v].producer;
      if (pr != MX_NO_NODE && p->pos_of[pr] != MX__PART_NONE) w->pred[e++] = p->pos_of[pr];
    }
  }
  return MX_OK;
oom:
  return mx__part_fail(p, MX_ERR_OUT_OF_MEMORY, "out of memory building the cluster graph of '%s'",
                       g->name);
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
  free(w->out_head);
  free(w->out_tail);
  free(w->mem_head);
  free(w->mem_tail);
  free(w->mem_next);
  free(w->order);
  free(w->aux);
  free(w->scratch);
  free(w->scratch2);
  free(w->pred_off);
  free(w->pred);
  free(w->seg_start);
  free(w->seg_len);
  free(w->seg_next);
  free(w->ent);
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

/* Makes room for `need` segments in the three parallel segment arrays. */
static bool grow_segs(mx__part_work *w, size_t need) {
  if (need <= w->cap_seg) return true;
  size_t cap = w->cap_seg ? w->cap_seg : 64;
  while (cap < need) cap *= 2;
  uint32_t *a = realloc(w->seg_start, cap * sizeof *a);
  if (!a) return false;
  w->seg_start = a;
  uint32_t *b = realloc(w->seg_len, cap * sizeof *b);
  if (!b) return false;
  w->seg_len = b;
  uint32_t *c = realloc(w->seg_next, cap * sizeof *c);
  if (!c) return false;
  w->seg_next = c;
  w->cap_seg = cap;
  return true;
}

/* Min-heap of roots keyed by min_pos. */
static void heap_push(const uint32_t *key, uint32_t *h, uint32_t *n, uint32_t x) {
  uint32_t i = (*n)++;
  while (i > 0) {
    uint32_t up = (i - 1) / 2;
    if (key[h[up]] <= key[x]) break;
    h[i] = h[up];
    i = up;
  }
  h[i] = x;
}

static uint32_t heap_pop(const uint32_t *key, uint32_t *h, uint32_t *n) {
  uint32_t top = h[0], last = h[--(*n)];
  uint32_t i = 0;
  for (;;) {
    uint32_t c = 2 * i + 1;
    if (c >= *n) break;
    if (c + 1 < *n && key[h[c + 1]] < key[h[c]]) c++;
    if (key[last] <= key[h[c]]) break;
    h[i] = h[c];
    i = c;
  }
  if (*n) h[i] = last;
  return top;
}

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

mx_status mx__part_rebuild(mx__part_work *w) {
  uint32_t n = w->n;
  mx_status st = MX_OK;
  uint32_t *in_cnt = calloc((size_t)n + 1, sizeof *in_cnt);
  uint32_t *out_cnt = calloc((size_t)n + 1, sizeof *out_cnt);
  uint32_t *heap = malloc(((size_t)n + 1) * sizeof *heap);
  if (!in_cnt || !out_cnt || !heap) goto oom;
  /* Point every position straight at its root. */
  for (uint32_t x = 0; x < n; x++) w->scratch[x] = mx__part_find(w, x);
  for (uint32_t x = 0; x < n; x++) w->parent[x] = w->scratch[x];
  size_t e_in = 0, e_out = 0;
  for (uint32_t b = 0; b < n; b++) {
    uint32_t rb = w->parent[b];
    for (uint32_t i = w->pred_off[b]; i < w->pred_off[b + 1]; i++) {
      uint32_t ra = w->parent[w->pred[i]];
      if (ra == rb) continue;
      out_cnt[ra]++;
      in_cnt[rb]++;
      e_in++;
      e_out++;
    }
  }
  size_t need_seg = 2 * (size_t)n, need_ent = e_in + e_out;
  if (!grow_segs(w, need_seg ? need_seg : 1) ||
      !MX_GROW(w->ent, w->cap_ent, need_ent ? need_ent : 1))
    goto oom;
  w->n_seg = need_seg;
  w->n_ent = need_ent;
  /* In-segment r is [start, start+len) in the first half of ent, out-segment n+r in the second. */
  size_t off = 0;
  for (uint32_t r = 0; r < n; r++) {
    w->seg_start[r] = (uint32_t)off;
    w->seg_len[r] = 0;
    w->seg_next[r] = MX__PART_NONE;
    off += in_cnt[r];
  }
  for (uint32_t r = 0; r < n; r++) {
    w->seg_start[n + r] = (uint32_t)off;
    w->seg_len[n + r] = 0;
    w->seg_next[n + r] = MX__PART_NONE;
    off += out_cnt[r];
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
    if (w->parent[r] != r) {
      w->in_head[r] = w->in_tail[r] = w->out_head[r] = w->out_tail[r] = MX__PART_NONE;
      continue;
    }
    roots++;
    dedupe_segment(w, r);
    dedupe_segment(w, n + r);
    w->in_head[r] = w->in_tail[r] = r;
    w->out_head[r] = w->out_tail[r] = n + r;
    w->dead[r] = 0;
    in_cnt[r] = w->seg_len[r]; /* in-degree for the sort below */
  }
  /* Kahn's algorithm over the roots; ties go to the smallest member position. */
  uint32_t hn = 0, on = 0;
  for (uint32_t r = 0; r < n; r++)
    if (w->parent[r] == r && in_cnt[r] == 0) heap_push(w->min_pos, heap, &hn, r);
  while (hn) {
    uint32_t x = heap_pop(w->min_pos, heap, &hn);
    w->rank[x] = on;
    w->order[on++] = x;
    const uint32_t *e = w->ent + w->seg_start[n + x];
    for (uint32_t i = 0; i < w->seg_len[n + x]; i++)
      if (--in_cnt[e[i]] == 0) heap_push(w->min_pos, heap, &hn, e[i]);
  }
  w->n_roots = on;
  if (on != roots)
    st = mx__part_fail(
        w->p, MX_ERR_INTERNAL,
        "partition of '%s': the cluster graph has a cycle (%u of %u clusters ordered)",
        w->p->g->name, on, roots);
  goto done;
oom:
  st = mx__part_fail(w->p, MX_ERR_OUT_OF_MEMORY,
                     "out of memory rebuilding the cluster graph of '%s'", w->p->g->name);
done:
  free(in_cnt);
  free(out_cnt);
  free(heap);
  return st;
}

static void link_chain(uint32_t *seg_next, uint32_t *head_into, uint32_t *tail_into,
                       uint32_t *head_from, uint32_t *tail_from) {
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
  link_chain(w->seg_next, &w->in_head[into], &w->in_tail[into], &w->in_head[from],
             &w->in_tail[from]);
  link_chain(w->seg_next, &w->out_head[into], &w->out_tail[into], &w->out_head[from],
             &w->out_tail[from]);
  w->mem_next[w->mem_tail[into]] = w->mem_head[from];
  w->mem_tail[into] = w->mem_tail[from];
}

bool mx__part_out_neighbors(mx__part_work *w, uint32_t x, uint32_t *n_out) {
  mx__part_marks_reset(&w->seen);
  uint32_t k = 0, n_segs = 0;
  for (uint32_t s = w->out_head[x]; s != MX__PART_NONE; s = w->seg_next[s]) {
    n_segs++;
    const uint32_t *e = w->ent + w->seg_start[s];
    for (uint32_t i = 0; i < w->seg_len[s]; i++) {
      uint32_t y = mx__part_find(w, e[i]);
      if (y == x || w->dead[y] || mx__part_marked(&w->seen, y)) continue;
      mx__part_mark_set(&w->seen, y);
      w->scratch2[k++] = y;
    }
  }
  *n_out = k;
  if (n_segs == 0) return true;
  if (n_segs == 1) {
    uint32_t s = w->out_head[x];
    memcpy(w->ent + w->seg_start[s], w->scratch2, (size_t)k * sizeof *w->ent);
    w->seg_len[s] = k;
    return true;
  }
  /* Several segments: rewrite them as one new segment at the end of the entry array. */
  if (!MX_GROW(w->ent, w->cap_ent, w->n_ent + k)) return false;
  if (!grow_segs(w, w->n_seg + 1)) return false;
  uint32_t s = (uint32_t)w->n_seg++;
  w->seg_start[s] = (uint32_t)w->n_ent;
  w->seg_len[s] = k;
  w->seg_next[s] = MX__PART_NONE;
  memcpy(w->ent + w->n_ent, w->scratch2, (size_t)k * sizeof *w->ent);
  w->n_ent += k;
  w->out_head[x] = w->out_tail[x] = s;
  return true;
}
