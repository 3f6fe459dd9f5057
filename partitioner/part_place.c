/* The final clusters of a partition, in root order: one DATA cluster per graph input, one
 * INPUT cluster per constant kept in the root, the merged KNOWN/UNKNOWN clusters in topological
 * order (ties: the cluster whose first node comes first), and NETOUTPUT.
 *
 * Constants (step (c)): a constant read by one cluster only moves into that cluster (weights
 * belong to their model); a constant read by several clusters, or that is a graph output, stays
 * in the root and is passed read-only to each reader.
 *
 * Boundary values: a cluster's inputs are the values its nodes read that another cluster holds,
 * in order of first use (nodes in topological order, inputs in slot order); its outputs are the
 * values its nodes produce that another cluster (or the graph output list) reads, in order of
 * production. The position in that order is the value's parent index on the call node. */
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "common/heap.h"
#include "partitioner/partitioner_impl.h"

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

/* Orders the merged groups topologically. gidx[pos] receives the group index (0.. in order of
 * first position); *topo receives the groups in order. */
static mx_status order_groups(mx_partition *p, uint32_t *gidx, uint32_t **topo_out, uint32_t *n_groups) {
  const mx_graph *g = p->g;
  uint32_t n = p->n_compute, ng = 0;
  mx_status st = MX_OK;
  uint32_t *local = malloc((n ? n : 1) * sizeof *local); /* by group root: index, or NONE */
  uint32_t *off = NULL, *adj = NULL, *indeg = NULL, *heap = NULL, *topo = NULL;
  if (!local) goto oom;
  for (uint32_t x = 0; x < n; x++) local[x] = MX__PART_NONE;
  for (uint32_t x = 0; x < n; x++) {
    uint32_t r = p->group_of[x];
    if (local[r] == MX__PART_NONE) local[r] = ng++;
    gidx[x] = local[r];
  }
  off = calloc((size_t)ng + 1, sizeof *off);
  indeg = calloc((size_t)ng + 1, sizeof *indeg);
  heap = malloc(((size_t)ng + 1) * sizeof *heap);
  topo = malloc(((size_t)ng + 1) * sizeof *topo);
  if (!off || !indeg || !heap || !topo) goto oom;
  size_t ne = 0;
  for (int pass = 0; pass < 2; pass++) {
    for (uint32_t b = 0; b < n; b++) {
      const mx_node *nd = &g->nodes[p->compute[b]];
      for (uint32_t k = 0; k < nd->n_inputs; k++) {
        uint32_t a = mx__part_input_pos(p, nd, k);
        if (a == MX__PART_NONE) continue;
        uint32_t ga = gidx[a], gb = gidx[b];
        if (ga == gb) continue;
        if (pass == 0) {
          off[ga + 1]++;
          ne++;
        } else {
          adj[off[ga]++] = gb;
          indeg[gb]++;
        }
      }
    }
    if (pass == 0) {
      for (uint32_t i = 0; i < ng; i++) off[i + 1] += off[i];
      adj = malloc((ne ? ne : 1) * sizeof *adj);
      if (!adj) goto oom;
    }
  }
  /* off[i] now ends group i's list; it starts at off[i - 1]. */
  size_t hn = 0;
  uint32_t tn = 0;
  for (uint32_t i = 0; i < ng; i++)
    if (indeg[i] == 0) mx__heap_u32_push(heap, &hn, i);
  while (hn) {
    uint32_t x = mx__heap_u32_pop(heap, &hn);
    topo[tn++] = x;
    for (uint32_t i = x ? off[x - 1] : 0; i < off[x]; i++)
      if (--indeg[adj[i]] == 0) mx__heap_u32_push(heap, &hn, adj[i]);
  }
  if (tn != ng) {
    st = mx__part_fail(p, MX_ERR_INTERNAL, "partition of '%s': the merged clusters form a cycle", g->name);
    goto done;
  }
  *topo_out = topo;
  topo = NULL;
  *n_groups = ng;
  goto done;
oom:
  st = mx__part_fail(p, MX_ERR_OUT_OF_MEMORY, "out of memory ordering the clusters of '%s'", g->name);
done:
  free(local);
  free(off);
  free(adj);
  free(indeg);
  free(heap);
  free(topo);
  return st;
}

/* The cluster of node n (compute or Constant node). */
static uint32_t node_cluster(const mx_partition *p, mx_node_id n) { return p->cluster_of_node[n]; }

/* Places every constant: moved into its only reading cluster, or kept in the root. Returns the
 * number kept (INPUT clusters). */
static uint32_t place_constants(mx_partition *p) {
  const mx_graph *g = p->g;
  uint32_t shared = 0;
  for (uint32_t i = 0; i < p->n_consts; i++) {
    mx__part_const *k = &p->consts[i];
    uint32_t only = MX__PART_NONE;
    bool several = false, root_use = false;
    const mx_value_id *vals = &k->value;
    uint32_t nvals = 1;
    if (k->node != MX_NO_NODE) {
      vals = g->nodes[k->node].outputs;
      nvals = g->nodes[k->node].n_outputs;
    }
    for (uint32_t j = 0; j < nvals; j++) {
      const mx_value *val = &g->values[vals[j]];
      if (val->flags & MX_VALUE_OUTPUT) root_use = true;
      for (size_t c = 0; c < val->n_consumers; c++) {
        mx_node_id cn = val->consumers[c];
        if (!mx__node_valid(g, cn)) continue;
        uint32_t cl = node_cluster(p, cn);
        if (only == MX__PART_NONE)
          only = cl;
        else if (only != cl)
          several = true;
      }
    }
    k->shared = several || root_use || only == MX__PART_NONE;
    k->cluster = k->shared ? MX__PART_NONE : only;
    if (k->shared) shared++;
  }
  return shared;
}

static bool push_bound(mx_partition *p, size_t *cap, mx_value_id v, uint32_t index, uint32_t peer,
                       bool constant) {
  if (!MX_GROW(p->bounds, *cap, p->n_bounds + 1)) return false;
  p->bounds[p->n_bounds++] = (mx__part_bound){v, index, peer, constant};
  return true;
}

static bool is_shared_const(const mx_partition *p, mx_value_id v) {
  uint32_t k = p->const_of_value[v];
  return k != MX__PART_NONE && p->consts[k].shared;
}

/* The smallest cluster other than `self` that reads v (NETOUTPUT for a graph output), or NONE. */
static uint32_t first_reader(const mx_partition *p, mx_value_id v, uint32_t self, uint32_t netout) {
  const mx_graph *g = p->g;
  const mx_value *val = &g->values[v];
  uint32_t best = (val->flags & MX_VALUE_OUTPUT) && self != netout ? netout : MX__PART_NONE;
  for (size_t c = 0; c < val->n_consumers; c++) {
    mx_node_id cn = val->consumers[c];
    if (!mx__node_valid(g, cn)) continue;
    uint32_t cl = p->cluster_of_node[cn];
    if (cl != self && cl < best) best = cl;
  }
  return best;
}

/* Appends the sorted distinct ids of buf[0..n) to p->links. */
static bool push_links(mx_partition *p, size_t *cap, uint32_t *buf, uint32_t n, uint32_t *first,
                       uint32_t *count) {
  qsort(buf, n, sizeof *buf, cmp_u32);
  *first = (uint32_t)p->n_links;
  *count = 0;
  for (uint32_t i = 0; i < n; i++) {
    if (i > 0 && buf[i] == buf[i - 1]) continue;
    if (!MX_GROW(p->links, *cap, p->n_links + 1)) return false;
    p->links[p->n_links++] = buf[i];
    (*count)++;
  }
  return true;
}

/* Boundary values and neighbour clusters of every cluster; the boundary-value total. */
static mx_status boundaries(mx_partition *p) {
  const mx_graph *g = p->g;
  mx_status st = MX_OK;
  size_t cap_bounds = 0, cap_links = 0, cap_buf = 64, nb = 0;
  uint32_t netout = p->n_clusters - 1;
  uint32_t *listed =
      malloc((g->n_values ? g->n_values : 1) * sizeof *listed); /* by value: cluster that listed it */
  uint32_t *buf = malloc(cap_buf * sizeof *buf);
  if (!listed || !buf) goto oom;
  for (size_t v = 0; v < g->n_values; v++) listed[v] = MX__PART_NONE;
#define PUSH_BUF(x)                               \
  do {                                            \
    if (!MX_GROW(buf, cap_buf, nb + 1)) goto oom; \
    buf[nb++] = (x);                              \
  } while (0)
  for (uint32_t id = 0; id < p->n_clusters; id++) {
    mx__part_cluster *c = &p->clusters[id];
    c->first_in = c->first_out = (uint32_t)p->n_bounds;
    c->n_in = c->n_out = 0;
    if (c->type == MX_CLUSTER_NETOUTPUT) {
      nb = 0;
      for (size_t i = 0; i < g->n_outputs; i++) {
        mx_value_id v = g->outputs[i];
        if (!push_bound(p, &cap_bounds, v, c->n_in++, p->cluster_of_value[v], is_shared_const(p, v)))
          goto oom;
        PUSH_BUF(p->cluster_of_value[v]);
      }
      c->first_out = (uint32_t)p->n_bounds;
      if (!push_links(p, &cap_links, buf, (uint32_t)nb, &c->first_pred, &c->n_pred)) goto oom;
      c->first_succ = (uint32_t)p->n_links;
      c->n_succ = 0;
      continue;
    }
    /* Inputs (KNOWN / UNKNOWN only). */
    nb = 0;
    for (uint32_t m = 0; m < c->n_nodes; m++) {
      const mx_node *nd = &g->nodes[p->members[c->first_node + m]];
      for (uint32_t k = 0; k < nd->n_inputs; k++) {
        mx_value_id v = nd->inputs[k];
        if (v == MX_NO_VALUE) continue;
        uint32_t src = p->cluster_of_value[v];
        if (src == id || listed[v] == id) continue;
        listed[v] = id;
        if (!push_bound(p, &cap_bounds, v, c->n_in++, src, is_shared_const(p, v))) goto oom;
        PUSH_BUF(src);
      }
    }
    if (!push_links(p, &cap_links, buf, (uint32_t)nb, &c->first_pred, &c->n_pred)) goto oom;
    /* Outputs: node outputs, or the DATA / INPUT value. */
    c->first_out = (uint32_t)p->n_bounds;
    nb = 0;
    const mx_value_id *outs = NULL;
    uint32_t n_outs = 0;
    mx_value_id single = c->source;
    for (uint32_t m = 0; m <= c->n_nodes; m++) {
      if (m < c->n_nodes) {
        const mx_node *nd = &g->nodes[p->members[c->first_node + m]];
        outs = nd->outputs;
        n_outs = nd->n_outputs;
      } else if (c->type == MX_CLUSTER_DATA || c->type == MX_CLUSTER_INPUT) {
        uint32_t k = c->type == MX_CLUSTER_INPUT ? p->const_of_value[single] : MX__PART_NONE;
        if (k != MX__PART_NONE && p->consts[k].node != MX_NO_NODE) {
          outs = g->nodes[p->consts[k].node].outputs;
          n_outs = g->nodes[p->consts[k].node].n_outputs;
        } else {
          outs = &single;
          n_outs = 1;
        }
      } else {
        break;
      }
      for (uint32_t k = 0; k < n_outs; k++) {
        mx_value_id v = outs[k];
        uint32_t peer = first_reader(p, v, id, netout);
        if (peer == MX__PART_NONE) continue;
        if (!push_bound(p, &cap_bounds, v, c->n_out++, peer, false)) goto oom;
        const mx_value *val = &g->values[v];
        if (val->flags & MX_VALUE_OUTPUT) PUSH_BUF(netout);
        for (size_t r = 0; r < val->n_consumers; r++) {
          mx_node_id cn = val->consumers[r];
          if (mx__node_valid(g, cn) && p->cluster_of_node[cn] != id) PUSH_BUF(p->cluster_of_node[cn]);
        }
      }
    }
    if (!push_links(p, &cap_links, buf, (uint32_t)nb, &c->first_succ, &c->n_succ)) goto oom;
  }
#undef PUSH_BUF
  /* Distinct values crossing a boundary: the outputs of every cluster (each listed once). */
  size_t crossing = 0;
  for (uint32_t id = 0; id + 1 < p->n_clusters; id++) crossing += p->clusters[id].n_out;
  p->totals.boundary_values = crossing;
  goto done;
oom:
  st = mx__part_fail(p, MX_ERR_OUT_OF_MEMORY, "out of memory listing the boundary values of '%s'", g->name);
done:
  free(listed);
  free(buf);
  return st;
}

/* The clusters array: n_in DATA clusters (one per graph input) first, the rest typed later. */
static bool create_clusters(mx_partition *p, uint32_t n_in) {
  p->clusters = calloc(p->n_clusters, sizeof *p->clusters);
  if (!p->clusters) return false;
  for (uint32_t id = 0; id < p->n_clusters; id++) {
    mx__part_cluster *c = &p->clusters[id];
    c->min_rank = c->max_rank = -1;
    c->source = MX_NO_VALUE;
    c->call = MX_NO_NODE;
  }
  for (uint32_t i = 0; i < n_in; i++) {
    p->clusters[i].type = MX_CLUSTER_DATA;
    p->clusters[i].source = p->g->inputs[i];
  }
  return true;
}

/* Final ids: the ng compute clusters after the DATA and INPUT ones (from `base`), one INPUT
 * cluster per shared constant (from n_in), NETOUTPUT last; and each cluster's type. */
static void assign_cluster_ids(mx_partition *p, uint32_t n_in, uint32_t base, uint32_t ng) {
  const uint32_t n = p->n_compute;
  for (uint32_t x = 0; x < n; x++) p->cluster_of_node[p->compute[x]] += base;
  uint32_t next_input = n_in;
  for (uint32_t i = 0; i < p->n_consts; i++) {
    mx__part_const *k = &p->consts[i];
    if (k->shared) {
      k->cluster = next_input++;
      p->clusters[k->cluster].type = MX_CLUSTER_INPUT;
      p->clusters[k->cluster].source = k->value;
    } else {
      k->cluster += base;
    }
    if (k->node != MX_NO_NODE) p->cluster_of_node[k->node] = k->cluster;
  }
  for (uint32_t i = 0; i < ng; i++) p->clusters[base + i].type = MX_CLUSTER_KNOWN;
  for (uint32_t x = 0; x < n; x++)
    if (p->group_unknown[p->group_of[x]])
      p->clusters[p->cluster_of_node[p->compute[x]]].type = MX_CLUSTER_UNKNOWN;
  p->clusters[p->n_clusters - 1].type = MX_CLUSTER_NETOUTPUT;
}

/* Members (positions are in topological order, so each cluster's list is too) and each
 * cluster's rank range. fill: one zeroed counter per cluster (scratch). */
static void list_members(mx_partition *p, uint32_t *fill) {
  const uint32_t n = p->n_compute;
  for (uint32_t x = 0; x < n; x++) p->clusters[p->cluster_of_node[p->compute[x]]].n_nodes++;
  uint32_t acc = 0;
  for (uint32_t id = 0; id < p->n_clusters; id++) {
    p->clusters[id].first_node = acc;
    acc += p->clusters[id].n_nodes;
  }
  for (uint32_t x = 0; x < n; x++) {
    uint32_t id = p->cluster_of_node[p->compute[x]];
    p->members[p->clusters[id].first_node + fill[id]++] = p->compute[x];
  }
  for (uint32_t id = 0; id < p->n_clusters; id++) {
    mx__part_cluster *c = &p->clusters[id];
    if (!c->n_nodes) continue;
    c->min_rank = p->rank_of[p->members[c->first_node]];
    c->max_rank = p->rank_of[p->members[c->first_node + c->n_nodes - 1]];
  }
}

/* Constants by cluster, in constant order. fill: one counter per cluster (scratch). */
static void list_cluster_consts(mx_partition *p, uint32_t *fill) {
  for (uint32_t i = 0; i < p->n_consts; i++) p->clusters[p->consts[i].cluster].n_consts++;
  uint32_t acc = 0;
  for (uint32_t id = 0; id < p->n_clusters; id++) {
    p->clusters[id].first_const = acc;
    acc += p->clusters[id].n_consts;
    fill[id] = 0;
  }
  for (uint32_t i = 0; i < p->n_consts; i++) {
    uint32_t id = p->consts[i].cluster;
    p->cluster_consts[p->clusters[id].first_const + fill[id]++] = i;
  }
}

/* Where each value comes from: its constant's cluster, its producer's, or its DATA cluster. */
static void place_values(mx_partition *p, uint32_t n_in) {
  const mx_graph *g = p->g;
  for (size_t v = 0; v < g->n_values; v++) {
    const mx_value *val = &g->values[v];
    uint32_t cl = MX__PART_NONE;
    if (!(val->flags & MX_VALUE_DEAD)) {
      if (p->const_of_value[v] != MX__PART_NONE)
        cl = p->consts[p->const_of_value[v]].cluster;
      else if (val->producer != MX_NO_NODE && mx__node_valid(g, val->producer))
        cl = p->cluster_of_node[val->producer];
    }
    p->cluster_of_value[v] = cl;
  }
  for (uint32_t i = 0; i < n_in; i++) p->cluster_of_value[g->inputs[i]] = i;
}

/* The partition's cluster, node and constant counts. */
static void count_totals(mx_partition *p, uint32_t n_shared) {
  mx_partition_totals *t = &p->totals;
  t->constants = p->n_consts;
  t->shared_constants = n_shared;
  for (uint32_t id = 0; id < p->n_clusters; id++) {
    const mx__part_cluster *c = &p->clusters[id];
    if (c->type == MX_CLUSTER_KNOWN) {
      t->known_clusters++;
      t->known_nodes += c->n_nodes;
    } else if (c->type == MX_CLUSTER_UNKNOWN) {
      t->unknown_clusters++;
      t->unknown_nodes += c->n_nodes;
    }
  }
}

mx_status mx__part_place(mx_partition *p) {
  const mx_graph *g = p->g;
  mx_status st = MX_OK;
  uint32_t n = p->n_compute, ng = 0;
  uint32_t *gidx = malloc((n ? n : 1) * sizeof *gidx);
  uint32_t *topo = NULL, *group_id = NULL, *fill = NULL;
  p->cluster_of_node = malloc((g->n_nodes ? g->n_nodes : 1) * sizeof *p->cluster_of_node);
  p->cluster_of_value = malloc((g->n_values ? g->n_values : 1) * sizeof *p->cluster_of_value);
  p->members = malloc((n ? n : 1) * sizeof *p->members);
  p->cluster_consts = malloc((p->n_consts ? p->n_consts : 1) * sizeof *p->cluster_consts);
  if (!gidx || !p->cluster_of_node || !p->cluster_of_value || !p->members || !p->cluster_consts) goto oom;
  st = order_groups(p, gidx, &topo, &ng);
  if (st != MX_OK) goto done;
  group_id = malloc(((size_t)ng + 1) * sizeof *group_id);
  if (!group_id) goto oom;

  /* Compute clusters first get provisional ids 0..ng-1 to place the constants. */
  for (uint32_t i = 0; i < ng; i++) group_id[topo[i]] = i;
  for (size_t i = 0; i < g->n_nodes; i++) p->cluster_of_node[i] = MX__PART_NONE;
  for (uint32_t x = 0; x < n; x++) p->cluster_of_node[p->compute[x]] = group_id[gidx[x]];
  uint32_t n_shared = place_constants(p);

  uint32_t n_in = (uint32_t)g->n_inputs;
  uint32_t base = n_in + n_shared;
  p->n_clusters = base + ng + 1;
  if (!create_clusters(p, n_in)) goto oom;
  assign_cluster_ids(p, n_in, base, ng);
  fill = calloc(p->n_clusters, sizeof *fill);
  if (!fill) goto oom;
  list_members(p, fill);
  list_cluster_consts(p, fill);
  place_values(p, n_in);

  st = boundaries(p);
  if (st != MX_OK) goto done;
  count_totals(p, n_shared);
  goto done;
oom:
  st = mx__part_fail(p, MX_ERR_OUT_OF_MEMORY, "out of memory placing the clusters of '%s'", g->name);
done:
  free(gidx);
  free(topo);
  free(group_id);
  free(fill);
  return st;
}
