/* Layout-free rewrites of data movement:
 *  - transpose_reshape: a Transpose that keeps the order of every dim larger than 1 (it only
 *    moves dims of size 1, as the head split of a one-token decode step does, or its perm is the
 *    identity) moves no data: it becomes a Reshape, which the executors run as an alias, or
 *    nothing;
 *  - view_chain: a chain of Reshape / Flatten / Squeeze / Unsqueeze is one Reshape of the
 *    chain's source whatever the targets in between, or nothing when it ends with the source's
 *    shape (Unsqueeze then Squeeze, a Reshape and its inverse).
 * Targets are constants that mean the same for every value of the symbols (mx__rw_reshape_target);
 * shapes with dims inference does not know are left alone. Both late: the attention and MatMul
 * rules read Transposes and head-split Reshapes. */
#include <string.h>

#include "graph/ops/shape_params.h"
#include "graph/passes/rewrite.h"

static bool is_op(const mx_node *n, const char *op) { return !n->domain[0] && strcmp(n->op_type, op) == 0; }

static bool known_shape(const mx_shape *s) {
  if (s->rank == MX_RANK_UNKNOWN) return false;
  for (int32_t i = 0; i < s->rank; i++)
    if (mx_dim_is_unknown(s->dims[i])) return false;
  return true;
}

/* Makes y come from Reshape(x) with a constant target, or from x itself when the shapes agree. */
static mx_status reshape_to(mx_graph *g, mx_value_id y, mx_value_id x, bool *hit) {
  *hit = false;
  const mx_shape *ys = &g->values[y].shape, *xs = &g->values[x].shape;
  if (mx__rw_same_shape(ys, xs)) {
    *hit = mx__rw_forward(g, y, x);
    return MX_OK;
  }
  int64_t target[MX_MAX_RANK];
  if (!mx__rw_reshape_target(g, xs, ys, target)) return MX_OK;
  int64_t len = ys->rank;
  mx_value_id c;
  mx_status st = mx__rw_new_const_for(g, g->values[y].producer, MX_INT64, 1, &len, target, &c);
  if (st != MX_OK) return st;
  mx_value_id ins[2] = {x, c};
  st = mx__rw_replace(g, y, "Reshape", ins, 2, NULL, 0, NULL);
  if (st == MX_OK) *hit = true;
  return st;
}

/* --- transpose_reshape -------------------------------------------------------------------------- */

/* Whether Transpose node t keeps every dim of size other than 1 in its order. */
static bool moves_only_unit_dims(const mx_graph *g, const mx_node *t) {
  const mx_transpose_params *p = t->params;
  const mx_shape *xs = &g->values[t->inputs[0]].shape;
  if (!p || !known_shape(xs)) return false;
  int32_t r = xs->rank;
  int64_t last = -1;
  for (int32_t i = 0; i < r; i++) {
    int64_t k = p->has_perm ? p->perm[i] : r - 1 - i;
    if (p->has_perm && p->n_perm != r) return false;
    if (xs->dims[k] == 1) continue;
    if (k < last) return false;
    last = k;
  }
  return true;
}

static mx_status run_transpose_reshape(mx_graph *g, size_t *hits) {
  size_t n = g->n_nodes;
  for (size_t i = 0; i < n; i++) {
    const mx_node *nd = &g->nodes[i];
    if ((nd->flags & MX_NODE_DEAD) || !is_op(nd, "Transpose") || !moves_only_unit_dims(g, nd)) continue;
    mx_value_id y = nd->outputs[0], x = nd->inputs[0];
    if (!known_shape(&g->values[y].shape)) continue;
    bool hit;
    mx_status st = reshape_to(g, y, x, &hit);
    if (st != MX_OK) return st;
    if (hit) (*hits)++;
  }
  return MX_OK;
}

const mx__rw_rule mx__rule_transpose_reshape = {
    .name = "transpose_reshape",
    .what = "Transpose that only moves dims of size 1 (or does not move any) becomes a Reshape (or nothing)",
    .by_default = true,
    .late = true,
    .run = run_transpose_reshape,
};

/* --- view_chain ------------------------------------------------------------------------------- */

static bool is_view(const mx_node *n) {
  return is_op(n, "Reshape") || is_op(n, "Flatten") || is_op(n, "Squeeze") || is_op(n, "Unsqueeze");
}

static mx_status run_view_chain(mx_graph *g, size_t *hits) {
  size_t n = g->n_nodes;
  for (size_t i = 0; i < n; i++) {
    const mx_node *nd = &g->nodes[i];
    if ((nd->flags & MX_NODE_DEAD) || !is_view(nd) || nd->n_outputs != 1) continue;
    mx_value_id y = nd->outputs[0], x = nd->inputs[0];
    if (!known_shape(&g->values[y].shape)) continue;
    /* The source: below every view whose result only views feed on (a view read elsewhere
     * too stays computed, so reading through it gains nothing but costs nothing either). */
    mx_value_id src = x;
    int depth = 0;
    for (;;) {
      mx_node_id p = g->values[src].producer;
      if (p == MX_NO_NODE || (g->nodes[p].flags & MX_NODE_DEAD) || !is_view(&g->nodes[p])) break;
      mx_value_id below = g->nodes[p].inputs[0];
      if (g->values[below].dtype != g->values[src].dtype || !known_shape(&g->values[below].shape)) break;
      src = below;
      depth++;
    }
    if (!depth && !mx__rw_same_shape(&g->values[y].shape, &g->values[x].shape)) continue;
    bool hit;
    mx_status st = reshape_to(g, y, src, &hit);
    if (st != MX_OK) return st;
    if (hit) (*hits)++;
  }
  return MX_OK;
}

const mx__rw_rule mx__rule_view_chain = {
    .name = "view_chain",
    .what = "chains of Reshape / Flatten / Squeeze / Unsqueeze become one Reshape of the source, or nothing",
    .by_default = true,
    .late = true,
    .run = run_view_chain,
};
