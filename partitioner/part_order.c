/* First step of a partition: the topological order of the input graph, its constant sources
 * and its compute nodes, plus the checks that the graph is one the partitioner can take
 * (inferred, acyclic, no subgraph attributes).
 *
 * The order comes from mx__graph_order_nodes rather than mx__graph_topo_order so that the input
 * graph stays untouched (the latter caches the order on the graph). The rule is the same: among
 * ready nodes the smallest id goes first, so a graph built in a valid order keeps it. */
#include <stdlib.h>
#include <string.h>

#include "partitioner/partitioner_impl.h"

static bool live_producer(const mx_graph *g, mx_value_id v) {
  mx_node_id pr = g->values[v].producer;
  return pr != MX_NO_NODE && mx__node_valid(g, pr);
}

/* A constant the graph holds as a value (initializer or folded value), not produced by a live
 * node: a constant source of its own. */
static bool is_constant_value(const mx_graph *g, mx_value_id v) {
  const mx_value *val = &g->values[v];
  if ((val->flags & (MX_VALUE_DEAD | MX_VALUE_INPUT | MX_VALUE_OUTER)) || !(val->flags & MX_VALUE_CONST))
    return false;
  return !live_producer(g, v);
}

/* A node without inputs whose outputs are all constants. */
static bool is_constant_node(const mx_graph *g, const mx_node *nd) {
  if (nd->n_outputs == 0) return false;
  for (uint32_t i = 0; i < nd->n_inputs; i++)
    if (nd->inputs[i] != MX_NO_VALUE) return false;
  for (uint32_t i = 0; i < nd->n_outputs; i++)
    if (!(g->values[nd->outputs[i]].flags & MX_VALUE_CONST)) return false;
  return true;
}

/* Checks what the partitioner relies on: resolved ops, known dtypes, no nested graphs, no string
 * values (strings are host only: the reference interpreter runs them, sessions and static models
 * refuse them, see mixrt/dtype.h). */
static mx_status check_node(mx_partition *p, const mx_node *nd) {
  const mx_graph *g = p->g;
  if (!nd->def)
    return mx__part_fail(
        p, MX_ERR_INVALID_ARGUMENT,
        "graph '%s' is not inferred: node '%s' (%s) has no resolved op (run mx_graph_infer first)", g->name,
        nd->name, nd->op_type);
  /* A control node comes wrapped into a call of its own (mx__part_wrap_control). */
  for (uint32_t i = 0; i < nd->n_attrs && !mx__part_is_control_call(nd); i++)
    if (nd->attrs[i].type == MX_ATTR_GRAPH)
      return mx__part_fail(p, MX_ERR_UNSUPPORTED,
                           "node '%s' (%s): attribute '%s' holds a subgraph; the partitioner takes "
                           "control nodes wrapped into calls (mx__part_wrap_control)",
                           nd->name, nd->op_type, nd->attrs[i].name);
  for (uint32_t i = 0; i < nd->n_outputs; i++)
    if (g->values[nd->outputs[i]].dtype == MX_DTYPE_UNDEFINED)
      return mx__part_fail(p, MX_ERR_INVALID_ARGUMENT,
                           "graph '%s' is not inferred: output %u ('%s') of node '%s' has no dtype", g->name,
                           i, g->values[nd->outputs[i]].name, nd->name);
  for (uint32_t i = 0; i < nd->n_inputs + nd->n_outputs; i++) {
    mx_value_id v = i < nd->n_inputs ? nd->inputs[i] : nd->outputs[i - nd->n_inputs];
    if (v != MX_NO_VALUE && mx__value_valid(g, v) && g->values[v].dtype == MX_STRING)
      return mx__part_fail(p, MX_ERR_UNSUPPORTED,
                           "node '%s' (%s): value '%s' is a string tensor; strings are host only and "
                           "run through the reference interpreter (mx_reference_run), not sessions "
                           "or static models",
                           nd->name, nd->op_type, g->values[v].name);
  }
  return MX_OK;
}

mx_status mx__part_order(mx_partition *p) {
  const mx_graph *g = p->g;
  size_t nn = g->n_nodes, nv = g->n_values;
  mx_status st = MX_OK;
  p->order = malloc((nn ? nn : 1) * sizeof *p->order);
  p->rank_of = malloc((nn ? nn : 1) * sizeof *p->rank_of);
  p->pos_of = malloc((nn ? nn : 1) * sizeof *p->pos_of);
  p->compute = malloc((nn ? nn : 1) * sizeof *p->compute);
  p->const_of_value = malloc((nv ? nv : 1) * sizeof *p->const_of_value);
  if (!p->order || !p->rank_of || !p->pos_of || !p->compute || !p->const_of_value) {
    st = mx__part_fail(p, MX_ERR_OUT_OF_MEMORY, "out of memory ordering graph '%s'", g->name);
    goto done;
  }
  for (size_t i = 0; i < nn; i++) {
    p->rank_of[i] = MX__PART_NONE;
    p->pos_of[i] = MX__PART_NONE;
  }
  for (size_t v = 0; v < nv; v++) p->const_of_value[v] = MX__PART_NONE;

  size_t n_live = 0;
  for (size_t i = 0; i < nn; i++) {
    const mx_node *nd = &g->nodes[i];
    if (nd->flags & MX_NODE_DEAD) continue;
    n_live++;
    st = check_node(p, nd);
    if (st != MX_OK) goto done;
    for (uint32_t k = 0; k < nd->n_inputs; k++) {
      mx_value_id v = nd->inputs[k];
      if (v == MX_NO_VALUE) continue;
      if (!mx__value_valid(g, v)) {
        st = mx__part_fail(p, MX_ERR_INVALID_GRAPH, "node '%s' (%s): input %u refers to a removed value",
                           nd->name, nd->op_type, k);
        goto done;
      }
      if (g->values[v].dtype == MX_DTYPE_UNDEFINED) {
        st = mx__part_fail(p, MX_ERR_INVALID_ARGUMENT,
                           "graph '%s' is not inferred: input %u ('%s') of node '%s' has no dtype", g->name,
                           k, g->values[v].name, nd->name);
        goto done;
      }
    }
  }
  size_t on;
  const char *culprit;
  if (!mx__graph_order_nodes(g, p->order, &on, &culprit)) {
    st = mx__part_fail(p, MX_ERR_OUT_OF_MEMORY, "out of memory ordering graph '%s'", g->name);
    goto done;
  }
  for (size_t i = 0; i < on; i++) p->rank_of[p->order[i]] = (uint32_t)i;
  p->n_order = on;
  if (on != n_live) {
    st = mx__part_fail(p, MX_ERR_INVALID_GRAPH, "graph '%s' has a cycle through node '%s'", g->name, culprit);
    goto done;
  }

  /* Constant sources: initializers (and folded values) by value id, then Constant nodes. */
  size_t n_const_nodes = 0;
  for (size_t i = 0; i < on; i++)
    if (is_constant_node(g, &g->nodes[p->order[i]])) n_const_nodes++;
  size_t n_init = 0;
  for (size_t v = 0; v < nv; v++)
    if (is_constant_value(g, (mx_value_id)v)) n_init++;
  p->consts = calloc(n_init + n_const_nodes ? n_init + n_const_nodes : 1, sizeof *p->consts);
  if (!p->consts) {
    st = mx__part_fail(p, MX_ERR_OUT_OF_MEMORY, "out of memory listing the constants of '%s'", g->name);
    goto done;
  }
  uint32_t nc = 0;
  for (size_t v = 0; v < nv; v++) {
    if (!is_constant_value(g, (mx_value_id)v)) continue;
    p->consts[nc] = (mx__part_const){(mx_value_id)v, MX_NO_NODE, MX__PART_NONE, false};
    p->const_of_value[v] = nc++;
  }
  uint32_t npos = 0;
  for (size_t i = 0; i < on; i++) {
    mx_node_id x = p->order[i];
    const mx_node *nd = &g->nodes[x];
    if (is_constant_node(g, nd)) {
      p->consts[nc] = (mx__part_const){nd->outputs[0], x, MX__PART_NONE, false};
      for (uint32_t k = 0; k < nd->n_outputs; k++) p->const_of_value[nd->outputs[k]] = nc;
      nc++;
    } else {
      p->pos_of[x] = npos;
      p->compute[npos++] = x;
    }
  }
  p->n_consts = nc;
  p->n_compute = npos;
done:
  return st;
}
