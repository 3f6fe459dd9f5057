/* Rule shape_subgraph: a Reshape or Expand whose target is computed at run time from shapes
 * (Shape -> Gather -> Unsqueeze -> Concat, as exporters write it) but whose symbolic value
 * inference knows gets a constant target that means the same for every value of the symbols.
 * A symbolic entry equal to the input's dim at that place becomes "copy it" (Reshape: 0,
 * Expand: 1); one other symbolic Reshape entry becomes -1 when the division that -1 stands for
 * gives back that entry. The shape computation then has no reader left and dead-node removal
 * drops it.
 *
 * Rule shape_cse: integer values that inference knows to be equal for every symbol value (the
 * shape computations exporters repeat per layer) are merged into the first.
 *
 * Late: they change the form of the targets and masks that the other rules read. */
#include <stdlib.h>
#include <string.h>

#include "graph/ops/op.h"
#include "graph/ops/shape_params.h"
#include "graph/passes/rewrite.h"

static bool is_op(const mx_node *n, const char *op) { return !n->domain[0] && strcmp(n->op_type, op) == 0; }

/* Fills target[0..len) with the constant Reshape target of node n (input x, target value s);
 * false when the symbols do not allow one. */
static bool reshape_target(mx_graph *g, const mx_node *n, const mx_value *x, const mx_value *s,
                           int64_t *target) {
  const mx_reshape_params *p = n->params;
  mx_symtab *syms = g->syms;
  int32_t len = s->sv_len, rx = x->shape.rank;
  int32_t infer_at = -1;
  mx_dim others = 1;
  for (int32_t k = 0; k < len; k++) {
    mx_dim d = s->sv[k];
    int64_t v;
    if (mx_dim_is_unknown(d)) return false;
    if (mx_sym_const_value(syms, d, &v)) {
      /* Kept as written: a 0 (copy) or -1 means here what it meant there. */
      target[k] = v;
      if (v == -1) {
        if (infer_at >= 0) return false;
        infer_at = k;
        continue;
      }
      if (v == 0 && !p->allowzero) {
        if (k >= rx) return false;
        d = x->shape.dims[k];
      }
    } else if (!p->allowzero && k < rx && x->shape.dims[k] == d) {
      target[k] = 0;
    } else {
      if (infer_at >= 0) return false;
      infer_at = k;
      target[k] = -1;
      continue;
    }
    others = mx_sym_mul(syms, others, d);
  }
  if (infer_at < 0) return true;
  /* The -1 must come out as the symbolic entry it replaces. */
  mx_dim numel = mx__shape_numel(syms, &x->shape);
  if (mx_dim_is_unknown(numel) || mx_dim_is_unknown(others) || others == 0) return false;
  mx_dim want = s->sv[infer_at];
  int64_t v;
  if (mx_sym_const_value(syms, want, &v) && v == -1) return true; /* already a -1 */
  return mx_sym_div(syms, numel, others) == want;
}

/* The same for an Expand: entries equal to the aligned input dim become 1 (keep it). */
static bool expand_target(mx_graph *g, const mx_value *x, const mx_value *s, int64_t *target) {
  int32_t len = s->sv_len, rx = x->shape.rank;
  for (int32_t k = 0; k < len; k++) {
    mx_dim d = s->sv[k];
    int64_t v;
    int32_t i = k - (len - rx); /* the input dim aligned with entry k, if any */
    if (mx_dim_is_unknown(d)) return false;
    if (mx_sym_const_value(g->syms, d, &v))
      target[k] = v;
    else if (i >= 0 && x->shape.dims[i] == d)
      target[k] = 1;
    else
      return false;
  }
  return true;
}

static mx_status run_shape_subgraph(mx_graph *g, size_t *hits) {
  size_t n = g->n_nodes;
  for (size_t i = 0; i < n; i++) {
    mx_node *nd = &g->nodes[i];
    bool reshape = is_op(nd, "Reshape");
    if ((nd->flags & MX_NODE_DEAD) || !(reshape || is_op(nd, "Expand")) || nd->n_inputs < 2 ||
        (reshape && !nd->params))
      continue;
    mx_value_id sid = nd->inputs[1];
    const mx_value *x = &g->values[nd->inputs[0]], *s = &g->values[sid];
    if ((s->flags & MX_VALUE_CONST) || s->sv_len < 0 || !s->sv || s->sv_len > MX_MAX_RANK ||
        x->shape.rank == MX_RANK_UNKNOWN)
      continue;
    int64_t target[MX_MAX_RANK];
    if (!(reshape ? reshape_target(g, nd, x, s, target) : expand_target(g, x, s, target))) continue;
    int64_t len = s->sv_len;
    mx_value_id c;
    mx_status st = mx__rw_new_const_for(g, (mx_node_id)i, MX_INT64, 1, &len, target, &c);
    if (st != MX_OK) return st;
    nd = &g->nodes[i]; /* adding the constant may have moved the node array */
    mx__graph_remove_use(g, sid, (mx_node_id)i);
    nd->inputs[1] = c;
    if ((st = mx__graph_add_use(g, c, (mx_node_id)i)) != MX_OK) return st;
    mx__graph_invalidate(g);
    (*hits)++;
  }
  return MX_OK;
}

/* --- shape_cse ------------------------------------------------------------------------------- */

/* Whether v is an integer tensor whose every element inference knows (concrete or symbolic). */
static bool known_values(const mx_value *v) {
  if ((v->flags & (MX_VALUE_DEAD | MX_VALUE_CONST | MX_VALUE_INPUT | MX_VALUE_OUTPUT | MX_VALUE_OUTER)) ||
      v->kind != MX_KIND_TENSOR || (v->dtype != MX_INT64 && v->dtype != MX_INT32) || v->sv_len < 0 ||
      !v->sv || !v->n_consumers)
    return false;
  for (int32_t k = 0; k < v->sv_len; k++)
    if (mx_dim_is_unknown(v->sv[k])) return false;
  return true;
}

static bool same_values(const mx_value *a, const mx_value *b) {
  if (a->dtype != b->dtype || a->sv_len != b->sv_len || a->shape.rank != b->shape.rank) return false;
  for (int32_t k = 0; k < a->shape.rank; k++)
    if (a->shape.dims[k] != b->shape.dims[k]) return false;
  return memcmp(a->sv, b->sv, (size_t)a->sv_len * sizeof *a->sv) == 0;
}

/* Shape computations repeated per layer (Shape of each layer's cache, the Gather / Range / mask
 * built from it) hold values inference proved equal for every symbol value: the later ones
 * read the first. Walking in topological order keeps the first before every reader. */
static mx_status run_shape_cse(mx_graph *g, size_t *hits) {
  const mx_node_id *order;
  size_t n_order;
  mx_status st = mx__graph_topo_order(g, &order, &n_order);
  if (st != MX_OK) return st;
  mx_node_id *ids = malloc((n_order ? n_order : 1) * sizeof *ids);
  mx_value_id *firsts = malloc((g->n_values ? g->n_values : 1) * sizeof *firsts);
  if (!ids || !firsts) {
    free(ids);
    free(firsts);
    return mx__graph_fail(g, MX_ERR_OUT_OF_MEMORY, "out of memory merging shape values");
  }
  memcpy(ids, order, n_order * sizeof *ids); /* the cached order dies with the first rewrite */
  size_t n_firsts = 0;
  for (size_t o = 0; o < n_order && st == MX_OK; o++) {
    const mx_node *nd = &g->nodes[ids[o]];
    if (nd->flags & MX_NODE_DEAD) continue;
    for (uint32_t k = 0; k < nd->n_outputs && st == MX_OK; k++) {
      mx_value_id v = nd->outputs[k];
      if (!known_values(&g->values[v])) continue;
      size_t f = 0;
      while (f < n_firsts && !same_values(&g->values[firsts[f]], &g->values[v])) f++;
      if (f == n_firsts) {
        firsts[n_firsts++] = v;
        continue;
      }
      st = mx__graph_replace_uses(g, v, firsts[f]);
      if (st == MX_OK) (*hits)++;
    }
  }
  free(ids);
  free(firsts);
  return st;
}

const mx__rw_rule mx__rule_shape_cse = {
    .name = "shape_cse",
    .what =
        "integer values inference knows to be equal for every symbol value (per-layer shape computations) "
        "merged",
    .by_default = true,
    .late = true,
    .run = run_shape_cse,
};

const mx__rw_rule mx__rule_shape_subgraph = {
    .name = "shape_subgraph",
    .what =
        "Reshape / Expand targets computed from shapes replaced by constants that mean the same for every "
        "symbol value",
    .by_default = true,
    .late = true,
    .run = run_shape_subgraph,
};
