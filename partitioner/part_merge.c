/* Steps 2 and 3 of a partition: one cluster per compute node, then the merge rules.
 *
 * Normal mode, in this order (each phase starts from a fresh topological sort of the clusters):
 *   (a) path absorption: for each UNKNOWN cluster C in topological order and each UNKNOWN
 *       cluster U with a direct edge U -> C, every cluster on a path U ~> C joins C (contracting
 *       the edge while a side path exists would make a cycle); absorbed KNOWN nodes record the
 *       directly connected pair;
 *   (b) single-path merge of KNOWN clusters: an input cluster I joins its consumer C when the
 *       direct edge is the only path I ~> C;
 *   (d) KNOWN clusters with fewer than static_min_ops ops become UNKNOWN;
 *   (e) single-path merge of UNKNOWN clusters.
 * (Step (c), constants, is in part_place.c: constants are not clusters here.)
 *
 * Cycle checks. Within a phase clusters are processed in the order of the phase's sort, and a
 * merge always goes into the cluster being processed (the "current" one), which keeps its rank.
 * Then every cluster that can reach the current cluster or a later one has a smaller rank than
 * it, so a search for a path to the current cluster only visits clusters ranked below it
 * ("past" clusters), whose lists no longer change. Out-lists are read through scans bounded by
 * the current rank, so an edge into a later cluster is not read until that cluster is reached
 * (a node feeding thousands of consumers costs each check O(1), not O(consumers)); a past
 * cluster left without any out-edge is marked dead and dropped from the lists that name it.
 * Each node's in-edges are examined once per phase (by the cluster that holds it when that
 * cluster is processed).
 *
 * Stable mode: clusters are the runs of equal type in the topological order; KNOWN runs shorter
 * than static_min_ops become UNKNOWN and join their neighbours. Runs are intervals of a
 * topological order, so contracting them never makes a cycle. */
#include <stdlib.h>
#include <string.h>

#include "partitioner/partitioner_impl.h"

/* Sets the reason of every member of root r (KNOWN members only). */
static void set_member_reasons(mx__part_work *w, uint32_t r, const mx_partition_reason *why) {
  mx_partition *p = w->p;
  for (uint32_t x = w->mem_head[r]; x != MX__PART_NONE; x = w->mem_next[x]) {
    mx_partition_reason *rr = &p->reason[p->compute[x]];
    if (rr->kind == MX_PART_KNOWN) *rr = *why;
  }
}

static mx_status oom(mx__part_work *w) {
  return mx__part_fail(w->p, MX_ERR_OUT_OF_MEMORY, "out of memory merging the clusters of '%s'",
                       w->p->g->name);
}

/* (a) Merges into C (current, UNKNOWN) every cluster on a path from U (a direct UNKNOWN input)
 * to C. from_pos -> to_pos is the node edge that connects them. */
static mx_status absorb_paths(mx__part_work *w, uint32_t u, uint32_t c, uint32_t from_pos, uint32_t to_pos) {
  mx_status st = MX_OK;
  uint32_t *cnt = NULL, *src = NULL;
  uint8_t *good = NULL;
  uint32_t limit = w->rank[c];
  /* Forward search from U over clusters ranked below C; remember the edges it crosses. */
  mx__part_marks_reset(&w->visited);
  mx__part_mark_set(&w->visited, u);
  w->aux[u] = 0;
  w->scratch[0] = u;
  uint32_t nv = 1, head = 0;
  w->n_tmp = 0;
  while (head < nv) {
    uint32_t x = w->scratch[head++], k;
    mx__part_out_neighbors(w, x, limit, &k);
    for (uint32_t i = 0; i < k; i++) {
      uint32_t y = w->scratch2[i];
      if (y != c) {
        if (w->rank[y] > limit) continue;
        if (!mx__part_marked(&w->visited, y)) {
          mx__part_mark_set(&w->visited, y);
          w->aux[y] = nv;
          w->scratch[nv++] = y;
        }
      }
      if (!mx__part_tmp_push(w, w->aux[x], y == c ? MX__PART_NONE : w->aux[y])) return oom(w);
    }
  }
  /* Backward over the recorded edges from C: the clusters that reach C are on a path U ~> C. */
  cnt = calloc((size_t)nv + 2, sizeof *cnt);
  src = malloc((w->n_tmp ? w->n_tmp : 1) * sizeof *src);
  good = calloc((size_t)nv + 1, 1);
  if (!cnt || !src || !good) {
    st = oom(w);
    goto done;
  }
  for (size_t i = 0; i < w->n_tmp; i++) {
    uint32_t to = w->tmp[2 * i + 1];
    cnt[(to == MX__PART_NONE ? nv : to) + 1]++;
  }
  for (uint32_t i = 0; i <= nv; i++) cnt[i + 1] += cnt[i];
  for (size_t i = 0; i < w->n_tmp; i++) {
    uint32_t to = w->tmp[2 * i + 1];
    uint32_t t = to == MX__PART_NONE ? nv : to;
    src[cnt[t]++] = w->tmp[2 * i];
  }
  /* cnt[t] now ends bucket t; bucket t starts at cnt[t - 1] (0 for t == 0). */
  uint32_t *queue = w->scratch2; /* free again: no more out-list scans in this call */
  uint32_t qn = 0, qh = 0;
  queue[qn++] = nv;
  good[nv] = 1;
  while (qh < qn) {
    uint32_t t = queue[qh++];
    uint32_t begin = t ? cnt[t - 1] : 0;
    for (uint32_t i = begin; i < cnt[t]; i++) {
      uint32_t s = src[i];
      if (!good[s]) {
        good[s] = 1;
        queue[qn++] = s;
      }
    }
  }
  mx_partition_reason why = mx__part_reason(MX_PART_ABSORBED);
  why.from = w->p->compute[from_pos];
  why.to = w->p->compute[to_pos];
  for (uint32_t l = 0; l < nv; l++) {
    if (!good[l]) continue;
    uint32_t x = w->scratch[l];
    if (!w->unknown[x]) set_member_reasons(w, x, &why);
    mx__part_union(w, x, c);
  }
done:
  free(cnt);
  free(src);
  free(good);
  return st;
}

/* True when S reaches T (the current cluster) other than through a direct edge S -> T. */
static bool other_path(mx__part_work *w, uint32_t s, uint32_t t) {
  uint32_t limit = w->rank[t];
  mx__part_marks_reset(&w->visited);
  mx__part_mark_set(&w->visited, s);
  uint32_t nq = 0, head = 0, k;
  mx__part_out_neighbors(w, s, limit, &k);
  for (uint32_t i = 0; i < k; i++) {
    uint32_t y = w->scratch2[i];
    if (y == t || w->rank[y] > limit || mx__part_marked(&w->visited, y)) continue;
    mx__part_mark_set(&w->visited, y);
    w->scratch[nq++] = y;
  }
  while (head < nq) {
    uint32_t x = w->scratch[head++];
    mx__part_out_neighbors(w, x, limit, &k);
    for (uint32_t i = 0; i < k; i++) {
      uint32_t y = w->scratch2[i];
      if (y == t) return true;
      if (w->rank[y] > limit || mx__part_marked(&w->visited, y)) continue;
      mx__part_mark_set(&w->visited, y);
      w->scratch[nq++] = y;
    }
  }
  return false;
}

/* Takes the first segment of root c's in-chain; MX__PART_NONE when the chain is empty. */
static uint32_t pop_in_segment(mx__part_work *w, uint32_t c) {
  uint32_t s = w->in_head[c];
  if (s == MX__PART_NONE) return s;
  w->in_head[c] = w->seg_next[s];
  if (w->in_head[c] == MX__PART_NONE) w->in_tail[c] = MX__PART_NONE;
  w->seg_next[s] = MX__PART_NONE;
  return s;
}

/* (a) Path absorption over the UNKNOWN clusters. */
static mx_status phase_absorb(mx__part_work *w) {
  for (uint32_t idx = 0; idx < w->n_roots; idx++) {
    uint32_t c = w->order[idx];
    if (w->parent[c] != c || !w->unknown[c]) continue;
    mx__part_marks_reset(&w->tried);
    for (uint32_t s; (s = pop_in_segment(w, c)) != MX__PART_NONE;) {
      /* In the first phase every cluster is one node, so segment s holds the in-edges of node
       * s and its entries name the producer nodes. */
      for (uint32_t i = 0; i < w->seg_len[s]; i++) {
        uint32_t raw = w->ent[w->seg_start[s] + i];
        uint32_t u = mx__part_find(w, raw);
        if (u == c || mx__part_marked(&w->tried, u)) continue;
        mx__part_mark_set(&w->tried, u);
        if (!w->unknown[u]) continue;
        mx_status st = absorb_paths(w, u, c, raw, s);
        if (st != MX_OK) return st;
      }
    }
  }
  return MX_OK;
}

/* (b) and (e): single-path merges among clusters of one type. */
static mx_status phase_single_path(mx__part_work *w, uint8_t unknown) {
  for (uint32_t idx = 0; idx < w->n_roots; idx++) {
    uint32_t c = w->order[idx];
    if (w->parent[c] != c) continue;
    if (w->unknown[c] != unknown) {
      w->in_head[c] = w->in_tail[c] = MX__PART_NONE;
      continue;
    }
    mx__part_marks_reset(&w->tried);
    for (uint32_t s; (s = pop_in_segment(w, c)) != MX__PART_NONE;) {
      for (uint32_t i = 0; i < w->seg_len[s]; i++) {
        uint32_t in = mx__part_find(w, w->ent[w->seg_start[s] + i]);
        if (in == c || mx__part_marked(&w->tried, in)) continue;
        mx__part_mark_set(&w->tried, in);
        if (w->unknown[in] != unknown) continue;
        if (!other_path(w, in, c)) mx__part_union(w, in, c);
      }
    }
  }
  return MX_OK;
}

/* (d) KNOWN clusters below the limit become UNKNOWN. */
static void phase_small(mx__part_work *w, int64_t limit) {
  if (limit <= 0) return;
  for (uint32_t x = 0; x < w->n; x++) {
    if (w->parent[x] != x || w->unknown[x] || (int64_t)w->size[x] >= limit) continue;
    mx_partition_reason why = mx__part_reason(MX_PART_SMALL_CLUSTER);
    why.cluster_ops = w->size[x];
    why.limit = limit;
    set_member_reasons(w, x, &why);
    w->unknown[x] = 1;
  }
}

static mx_status merge_normal(mx_partition *p) {
  mx__part_work w;
  mx_status st = mx__part_work_init(&w, p);
  if (st == MX_OK) st = mx__part_rebuild(&w);
  if (st == MX_OK) st = phase_absorb(&w);
  if (st == MX_OK) st = mx__part_rebuild(&w);
  if (st == MX_OK) st = phase_single_path(&w, 0);
  if (st == MX_OK) {
    phase_small(&w, p->static_min_ops);
    st = mx__part_rebuild(&w);
  }
  if (st == MX_OK) st = phase_single_path(&w, 1);
  if (st == MX_OK) {
    for (uint32_t x = 0; x < w.n; x++) {
      uint32_t r = mx__part_find(&w, x);
      p->group_of[x] = r;
      p->group_unknown[r] = w.unknown[r];
    }
  }
  mx__part_work_free(&w);
  return st;
}

/* Stable mode: runs of the topological order. */
static void merge_stable(mx_partition *p) {
  uint32_t n = p->n_compute;
  int64_t limit = p->static_min_ops;
  /* Pass 1: KNOWN runs below the limit become UNKNOWN. */
  for (uint32_t start = 0; start < n;) {
    uint32_t end = start + 1;
    while (end < n && p->marked_unknown[end] == p->marked_unknown[start]) end++;
    bool unknown = p->marked_unknown[start];
    for (uint32_t x = start; x < end; x++) p->group_unknown[x] = unknown;
    if (!unknown && limit > 0 && (int64_t)(end - start) < limit) {
      mx_partition_reason why = mx__part_reason(MX_PART_SMALL_CLUSTER);
      why.cluster_ops = end - start;
      why.limit = limit;
      for (uint32_t x = start; x < end; x++) {
        p->reason[p->compute[x]] = why;
        p->group_unknown[x] = 1;
      }
    }
    start = end;
  }
  /* Pass 2: runs of equal type after pass 1 are the clusters; a group is named by its first
   * position, and group_unknown is kept for group roots only. */
  uint32_t first = 0;
  for (uint32_t x = 0; x < n; x++) {
    if (x > 0 && p->group_unknown[x] != p->group_unknown[first]) first = x;
    p->group_of[x] = first;
  }
}

mx_status mx__part_merge(mx_partition *p) {
  uint32_t n = p->n_compute;
  p->group_of = malloc((n ? n : 1) * sizeof *p->group_of);
  p->group_unknown = calloc(n ? n : 1, 1);
  if (!p->group_of || !p->group_unknown)
    return mx__part_fail(p, MX_ERR_OUT_OF_MEMORY, "out of memory merging the clusters of '%s'", p->g->name);
  if (n == 0) return MX_OK;
  if (p->static_min_ops < 0) {
    /* The whole graph runs dynamically: one UNKNOWN cluster. */
    mx_partition_reason why = mx__part_reason(MX_PART_ALL_DYNAMIC);
    why.limit = p->static_min_ops;
    for (uint32_t x = 0; x < n; x++) {
      p->group_of[x] = 0;
      mx_partition_reason *r = &p->reason[p->compute[x]];
      if (r->kind == MX_PART_KNOWN) *r = why;
    }
    p->group_unknown[0] = 1;
    return MX_OK;
  }
  if (p->n_marked_unknown == 0) {
    /* Nothing is unknown: no partition, the whole graph is one static model. */
    for (uint32_t x = 0; x < n; x++) p->group_of[x] = 0;
    return MX_OK;
  }
  if (p->stable) {
    merge_stable(p);
    return MX_OK;
  }
  return merge_normal(p);
}
