/* Simplification rules: no-op nodes removed (identity), Transpose pairs composed or cancelled
 * (transpose_pair), Reshape chains collapsed (reshape_chain), common subexpressions merged
 * (cse). */
#include <stdlib.h>
#include <string.h>

#include "graph/ops/shape_params.h"
#include "graph/passes/rewrite.h"

static bool is_op(const mx_node *n, const char *op) { return !n->domain[0] && strcmp(n->op_type, op) == 0; }

/* --- identity ----------------------------------------------------------------------------------- */

/* Whether node n passes input 0 through unchanged as output 0 (and nothing reads its others). */
static bool is_noop(const mx_graph *g, const mx_node *n) {
  const mx_value *in = &g->values[n->inputs[0]], *out = &g->values[n->outputs[0]];
  if (in->kind != MX_KIND_TENSOR || out->kind != MX_KIND_TENSOR || in->dtype != out->dtype) return false;
  if (is_op(n, "Identity")) return true;
  if (is_op(n, "Dropout")) {
    /* Inference mode only: no training_mode input, or a constant false one; mask unread. */
    if (n->n_inputs > 2 && n->inputs[2] != MX_NO_VALUE) {
      double t;
      if (!mx__rw_const_scalar(g, n->inputs[2], &t) || t != 0.0) return false;
    }
    const mx_attr *is_test = mx__node_attr(n, "is_test");
    if (n->opset < 7 && !(is_test && is_test->i)) return false;
    for (uint32_t k = 1; k < n->n_outputs; k++) {
      const mx_value *m = &g->values[n->outputs[k]];
      if (m->n_consumers || (m->flags & MX_VALUE_OUTPUT)) return false;
    }
    return true;
  }
  if (is_op(n, "Cast") || is_op(n, "CastLike")) return true; /* same dtype checked above */
  if (is_op(n, "Expand") || is_op(n, "Reshape")) return mx__rw_same_shape(&in->shape, &out->shape);
  return false;
}

static mx_status run_identity(mx_graph *g, size_t *hits) {
  size_t n = g->n_nodes;
  for (size_t i = 0; i < n; i++) {
    mx_node *nd = &g->nodes[i];
    if ((nd->flags & MX_NODE_DEAD) || nd->n_inputs < 1 || nd->inputs[0] == MX_NO_VALUE) continue;
    if (!is_noop(g, nd)) continue;
    if (mx__rw_forward(g, nd->outputs[0], nd->inputs[0])) (*hits)++;
  }
  return MX_OK;
}

const mx__rw_rule mx__rule_identity = {
    .name = "identity",
    .what = "Identity, inference Dropout, Cast to the same type, no-op Expand / Reshape removed",
    .by_default = true,
    .run = run_identity,
};

/* --- transpose_pair ----------------------------------------------------------------------------- */

/* The permutation of Transpose node n over rank r (reversal when it has none). */
static bool transpose_perm(const mx_node *n, int32_t r, int64_t *perm) {
  const mx_transpose_params *p = n->params;
  if (!p || r < 0) return false;
  if (!p->has_perm) {
    for (int32_t i = 0; i < r; i++) perm[i] = r - 1 - i;
    return true;
  }
  if (p->n_perm != r) return false;
  for (int32_t i = 0; i < r; i++) perm[i] = p->perm[i];
  return true;
}

static mx_status run_transpose_pair(mx_graph *g, size_t *hits) {
  size_t n = g->n_nodes;
  for (size_t i = 0; i < n; i++) {
    mx_node *outer = &g->nodes[i];
    if ((outer->flags & MX_NODE_DEAD) || !is_op(outer, "Transpose")) continue;
    mx_node_id in_id = mx__rw_producer(g, outer->inputs[0], "Transpose");
    if (in_id == MX_NO_NODE) continue;
    const mx_node *inner = &g->nodes[in_id];
    mx_value_id x = inner->inputs[0];
    int32_t r = g->values[x].shape.rank;
    int64_t p1[MX_MAX_RANK], p2[MX_MAX_RANK], c[MX_MAX_RANK];
    if (!transpose_perm(inner, r, p1) || !transpose_perm(outer, r, p2)) continue;
    /* out[i] = mid[p2[i]] = x[p1[p2[i]]] */
    bool ident = true;
    for (int32_t k = 0; k < r; k++) {
      c[k] = p1[p2[k]];
      ident &= c[k] == k;
    }
    mx_value_id y = outer->outputs[0];
    if (ident) {
      if (mx__rw_forward(g, y, x)) (*hits)++;
      continue;
    }
    mx_attr a = mx_attr_ints("perm", c, (size_t)r);
    mx_status st = mx__rw_replace(g, y, "Transpose", &x, 1, &a, 1, NULL);
    if (st != MX_OK) return st;
    (*hits)++;
  }
  return MX_OK;
}

const mx__rw_rule mx__rule_transpose_pair = {
    .name = "transpose_pair",
    .what = "Transpose of a Transpose composed into one (removed when the pair cancels)",
    .by_default = true,
    .run = run_transpose_pair,
};

/* --- reshape_chain ------------------------------------------------------------------------------ */

/* Whether Reshape node n's target means the same whatever its input's shape: a constant shape
 * without 0 entries (or allowzero set), since 0 copies a dim of the input. */
static bool target_is_absolute(const mx_graph *g, const mx_node *n) {
  const mx_reshape_params *p = n->params;
  if (p && p->allowzero) return true;
  const mx_value *s = &g->values[n->inputs[1]];
  if (s->data && s->data->dtype == MX_INT64) {
    int64_t cnt;
    if (!mx_tensor_numel(s->data, &cnt)) return false;
    for (int64_t k = 0; k < cnt; k++)
      if (((const int64_t *)s->data->data)[k] == 0) return false;
    return true;
  }
  /* A symbolic target whose entries are all known and non-zero. */
  if (s->sv_len < 0 || !s->sv) return false;
  for (int32_t k = 0; k < s->sv_len; k++)
    if (s->sv[k] == 0 || mx_dim_is_unknown(s->sv[k])) return false;
  return true;
}

static bool is_view(const mx_node *n) {
  return is_op(n, "Reshape") || is_op(n, "Flatten") || is_op(n, "Squeeze") || is_op(n, "Unsqueeze");
}

static mx_status run_reshape_chain(mx_graph *g, size_t *hits) {
  size_t n = g->n_nodes;
  for (size_t i = 0; i < n; i++) {
    mx_node *outer = &g->nodes[i];
    if ((outer->flags & MX_NODE_DEAD) || !is_op(outer, "Reshape") || outer->n_inputs < 2) continue;
    mx_value_id mid = outer->inputs[0];
    mx_node_id pid = g->values[mid].producer;
    if (pid == MX_NO_NODE || !is_view(&g->nodes[pid]) || !target_is_absolute(g, outer)) continue;
    mx_value_id x = g->nodes[pid].inputs[0];
    if (g->values[x].dtype != g->values[mid].dtype) continue;
    /* The outer Reshape reads the chain's source directly. */
    mx__graph_remove_use(g, mid, (mx_node_id)i);
    outer->inputs[0] = x;
    mx_status st = mx__graph_add_use(g, x, (mx_node_id)i);
    if (st != MX_OK) return st;
    mx__graph_invalidate(g);
    (*hits)++;
  }
  return MX_OK;
}

const mx__rw_rule mx__rule_reshape_chain = {
    .name = "reshape_chain",
    .what = "Reshape of a Reshape / Flatten / Squeeze / Unsqueeze reads the chain's source",
    .by_default = true,
    .run = run_reshape_chain,
};

/* --- cse ---------------------------------------------------------------------------------------- */

/* Ops whose result is not a function of their inputs and attributes alone. */
static bool is_impure(const mx_node *n) {
  static const char *const impure[] = {
      "RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
      "Multinomial",  "Bernoulli",     "Dropout",          NULL};
  if (n->domain[0]) return true;
  if (n->def && (n->def->flags & (MX_OP_SUBGRAPH | MX_OP_ANY_KIND))) return true;
  for (size_t k = 0; impure[k]; k++)
    if (strcmp(n->op_type, impure[k]) == 0) return true;
  return false;
}

static uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ull; }

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = mix(h, b[i]);
  return h;
}

static uint64_t node_hash(const mx_node *n) {
  uint64_t h = hash_bytes(0xcbf29ce484222325ull, n->op_type, strlen(n->op_type));
  for (uint32_t k = 0; k < n->n_inputs; k++) h = mix(h, n->inputs[k]);
  h = mix(h, n->n_outputs);
  h = mix(h, n->n_attrs);
  return h;
}

static bool attr_equal(const mx_attr *a, const mx_attr *b) {
  if (strcmp(a->name, b->name) != 0 || a->type != b->type) return false;
  switch (a->type) {
    case MX_ATTR_INT: return a->i == b->i;
    case MX_ATTR_FLOAT: return memcmp(&a->f, &b->f, sizeof a->f) == 0;
    case MX_ATTR_STRING: return strcmp(a->s, b->s) == 0;
    case MX_ATTR_INTS:
      return a->count == b->count && (!a->count || !memcmp(a->ints, b->ints, a->count * sizeof *a->ints));
    case MX_ATTR_FLOATS:
      return a->count == b->count &&
             (!a->count || !memcmp(a->floats, b->floats, a->count * sizeof *a->floats));
    case MX_ATTR_STRINGS:
      if (a->count != b->count) return false;
      for (size_t k = 0; k < a->count; k++)
        if (strcmp(a->strings[k], b->strings[k]) != 0) return false;
      return true;
    default: return false; /* tensors, graphs, types: never merged */
  }
}

static bool nodes_equal(const mx_node *a, const mx_node *b) {
  if (strcmp(a->op_type, b->op_type) != 0 || a->n_inputs != b->n_inputs || a->n_outputs != b->n_outputs ||
      a->n_attrs != b->n_attrs)
    return false;
  for (uint32_t k = 0; k < a->n_inputs; k++)
    if (a->inputs[k] != b->inputs[k]) return false;
  for (uint32_t k = 0; k < a->n_attrs; k++) {
    const mx_attr *o = mx__node_attr(b, a->attrs[k].name);
    if (!o || !attr_equal(&a->attrs[k], o)) return false;
  }
  return true;
}

/* A constant that merge_constants may merge: initializer-like, read, small. */
static bool small_const(const mx_graph *g, size_t i, size_t *nb) {
  const mx_value *a = &g->values[i];
  if ((a->flags & (MX_VALUE_DEAD | MX_VALUE_INPUT | MX_VALUE_OUTER)) || !(a->flags & MX_VALUE_CONST) ||
      !a->data || a->producer != MX_NO_NODE || a->data->dtype == MX_STRING)
    return false;
  return mx_tensor_nbytes(a->data, nb) && *nb <= 64;
}

/* Small constants with equal dtype, dims and bytes become one, so nodes reading them match.
 * Candidates are bucketed by a hash of their bytes, so the cost stays linear in practice. */
static mx_status merge_constants(mx_graph *g, size_t *hits) {
  size_t n = g->n_values, cap = 64;
  while (cap < 2 * n) cap *= 2;
  mx_value_id *table = malloc(cap * sizeof *table);
  if (!table) return mx__graph_fail(g, MX_ERR_OUT_OF_MEMORY, "out of memory merging constants");
  for (size_t k = 0; k < cap; k++) table[k] = MX_NO_VALUE;
  mx_status st = MX_OK;
  for (size_t i = 0; i < n && st == MX_OK; i++) {
    size_t nb;
    if (!small_const(g, i, &nb)) continue;
    const mx_tensor *t = g->values[i].data;
    uint64_t h = hash_bytes(mix(0xcbf29ce484222325ull, (uint64_t)t->dtype), t->dims,
                            sizeof(int64_t) * (size_t)t->rank);
    h = hash_bytes(mix(h, (uint64_t)t->rank), t->data, t->data ? nb : 0);
    size_t slot = (size_t)(h & (cap - 1));
    bool merged = false;
    for (; table[slot] != MX_NO_VALUE; slot = (slot + 1) & (cap - 1)) {
      const mx_tensor *o = g->values[table[slot]].data;
      if (o->dtype != t->dtype || o->rank != t->rank ||
          memcmp(o->dims, t->dims, sizeof(int64_t) * (size_t)t->rank) != 0 ||
          (nb && memcmp(o->data, t->data, nb) != 0))
        continue;
      /* A graph output keeps its own value; everything else reads the first copy. */
      if (g->values[i].n_consumers && !mx__rw_is_output(g, (mx_value_id)i)) {
        st = mx__graph_replace_uses(g, (mx_value_id)i, table[slot]);
        if (st == MX_OK) (*hits)++;
      }
      merged = true;
      break;
    }
    if (!merged && !mx__rw_is_output(g, (mx_value_id)i)) table[slot] = (mx_value_id)i;
  }
  free(table);
  return st;
}

static mx_status run_cse(mx_graph *g, size_t *hits) {
  mx_status st = merge_constants(g, hits);
  if (st != MX_OK) return st;
  const mx_node_id *order;
  size_t n_order;
  st = mx__graph_topo_order(g, &order, &n_order);
  if (st != MX_OK) return st;
  mx_node_id *ids = malloc((n_order ? n_order : 1) * sizeof *ids);
  size_t cap = 16;
  while (cap < 2 * n_order) cap *= 2;
  mx_node_id *table = malloc(cap * sizeof *table);
  if (!ids || !table) {
    free(ids);
    free(table);
    return mx__graph_fail(g, MX_ERR_OUT_OF_MEMORY, "out of memory merging common subexpressions");
  }
  memcpy(ids, order, n_order * sizeof *ids); /* the cached order dies with the first rewrite */
  for (size_t k = 0; k < cap; k++) table[k] = MX_NO_NODE;
  for (size_t o = 0; o < n_order; o++) {
    mx_node *nd = &g->nodes[ids[o]];
    if ((nd->flags & MX_NODE_DEAD) || is_impure(nd)) continue;
    size_t slot = (size_t)(node_hash(nd) & (cap - 1));
    bool merged = false;
    for (; table[slot] != MX_NO_NODE; slot = (slot + 1) & (cap - 1)) {
      mx_node *first = &g->nodes[table[slot]];
      if (!nodes_equal(first, nd)) continue;
      bool ok = true;
      for (uint32_t k = 0; k < nd->n_outputs && ok; k++) ok = !mx__rw_is_output(g, nd->outputs[k]);
      if (!ok) break;
      for (uint32_t k = 0; k < nd->n_outputs && st == MX_OK; k++)
        st = mx__graph_replace_uses(g, nd->outputs[k], first->outputs[k]);
      if (st != MX_OK) break;
      (*hits)++;
      merged = true;
      break;
    }
    if (st != MX_OK) break;
    if (!merged && table[slot] == MX_NO_NODE) table[slot] = ids[o];
  }
  free(ids);
  free(table);
  return st;
}

const mx__rw_rule mx__rule_cse = {
    .name = "cse",
    .what = "nodes computing the same op on the same inputs (and equal small constants) merged",
    .by_default = true,
    .run = run_cse,
};
