/* Constant folding and dead-node removal.
 *
 * Folding turns a node into constants when every output's value is known: shape arithmetic
 * whose symbolic values became concrete (Shape of a static tensor, Gather of it, Concat ...)
 * folds without running anything; other nodes with only constant inputs fold when the caller
 * supplies an evaluator (graph/ has no kernels; the reference interpreter provides one).
 * The folded output keeps its value id, so consumers need no rewiring. */
#include <stdlib.h>
#include <string.h>

#include "common/record.h"
#include "graph/passes/passes.h"

/* Builds a host tensor from a fully concrete symbolic value; false when it is not one. */
static bool sv_tensor(mx_graph *g, const mx_value *v, mx_tensor *t, int64_t *buf) {
  if (v->sv_len < 0 || !v->sv || v->shape.rank == MX_RANK_UNKNOWN) return false;
  if (v->dtype != MX_INT64 && v->dtype != MX_INT32) return false;
  memset(t, 0, sizeof *t);
  t->dtype = v->dtype;
  t->rank = v->shape.rank;
  int64_t n = 1;
  for (int32_t i = 0; i < v->shape.rank; i++) {
    if (!mx_dim_is_concrete(v->shape.dims[i])) return false;
    t->dims[i] = v->shape.dims[i];
    if (__builtin_mul_overflow(n, t->dims[i], &n)) return false; /* hostile dims: no fold */
  }
  if (n != v->sv_len) return false;
  for (int64_t i = 0; i < n; i++)
    if (!mx_sym_const_value(g->syms, v->sv[i], &buf[i])) return false;
  if (v->dtype == MX_INT32) {
    int32_t *b32 = (int32_t *)buf;
    for (int64_t i = 0; i < n; i++) b32[i] = (int32_t)buf[i];
  }
  t->data = buf;
  return true;
}

static bool all_inputs_const(const mx_graph *g, const mx_node *nd) {
  for (uint32_t i = 0; i < nd->n_inputs; i++) {
    mx_value_id v = nd->inputs[i];
    if (v != MX_NO_VALUE && !(g->values[v].flags & MX_VALUE_CONST)) return false;
  }
  return true;
}

static bool outputs_fit(const mx_graph *g, const mx_node *nd, size_t max_bytes) {
  size_t total = 0;
  for (uint32_t i = 0; i < nd->n_outputs; i++) {
    const mx_value *v = &g->values[nd->outputs[i]];
    if (v->shape.rank == MX_RANK_UNKNOWN) return false;
    mx_tensor probe = {.dtype = v->dtype, .rank = v->shape.rank};
    for (int32_t k = 0; k < v->shape.rank; k++) {
      if (!mx_dim_is_concrete(v->shape.dims[k])) return false;
      probe.dims[k] = v->shape.dims[k];
    }
    size_t nb;
    if (!mx_tensor_nbytes(&probe, &nb) || nb > max_bytes - total) return false;
    total += nb;
  }
  return true;
}

mx_status mx__graph_fold_constants(mx_graph *g, mx_fold_eval_fn eval, void *user, size_t max_bytes,
                                   size_t *folded) {
  const mx_node_id *order0;
  size_t n;
  mx_status st = mx__graph_fold_const_if(g, folded); /* an If on a constant becomes its branch */
  if (st != MX_OK) return st;
  st = mx__graph_topo_order(g, &order0, &n);
  if (st != MX_OK) return st;
  /* Folding removes nodes, which drops the cached order: work on a copy. */
  mx_node_id *order = malloc((n ? n : 1) * sizeof *order);
  if (!order) return mx__graph_fail(g, MX_ERR_OUT_OF_MEMORY, "out of memory folding constants");
  memcpy(order, order0, n * sizeof *order);
  int64_t buf[MX_SV_MAX];
  for (size_t i = 0; i < n; i++) {
    mx_node_id nid = order[i];
    mx_node *nd = &g->nodes[nid];
    if (nd->flags & MX_NODE_DEAD) continue;
    if (nd->def && (nd->def->flags & MX_OP_COMMUNICATES)) continue;
    bool by_sv = nd->n_outputs > 0;
    for (uint32_t k = 0; k < nd->n_outputs && by_sv; k++) {
      mx_tensor t;
      by_sv = sv_tensor(g, &g->values[nd->outputs[k]], &t, buf);
    }
    if (by_sv) {
      for (uint32_t k = 0; k < nd->n_outputs; k++) {
        mx_tensor t;
        sv_tensor(g, &g->values[nd->outputs[k]], &t, buf);
        st = mx__graph_set_const(g, nd->outputs[k], &t);
        if (st != MX_OK) goto done;
      }
      mx__graph_remove_node(g, nid);
      (*folded)++;
      continue;
    }
    if (!eval || !all_inputs_const(g, nd) || !outputs_fit(g, nd, max_bytes)) continue;
    if (nd->n_outputs > 64) continue;
    mx_tensor outs[64];
    memset(outs, 0, sizeof outs);
    st = eval(user, g, nid, outs);
    if (st == MX_ERR_UNSUPPORTED) continue;
    if (st == MX_OK) {
      for (uint32_t k = 0; k < nd->n_outputs && st == MX_OK; k++)
        st = mx__graph_set_const(g, nd->outputs[k], &outs[k]);
    }
    for (uint32_t k = 0; k < nd->n_outputs; k++) free(outs[k].data);
    if (st != MX_OK) goto done;
    mx__graph_remove_node(g, nid);
    (*folded)++;
  }
  st = MX_OK;
done:
  free(order);
  return st;
}

mx_status mx__graph_remove_dead(mx_graph *g, size_t *removed_nodes, size_t *removed_values) {
  /* Walk nodes from the last id down: a node's consumers usually have larger ids, so most dead
   * chains disappear in one sweep; repeat until nothing changes. */
  bool changed = true;
  /* Values that subgraphs read by name have no consumer edge but are used. */
  uint8_t *captured = g->n_subgraphs ? mx__graph_captured(g) : NULL;
  if (g->n_subgraphs && !captured)
    return mx__graph_fail(g, MX_ERR_OUT_OF_MEMORY, "out of memory removing dead nodes");
  while (changed) {
    changed = false;
    for (size_t i = g->n_nodes; i-- > 0;) {
      mx_node *nd = &g->nodes[i];
      if (nd->flags & MX_NODE_DEAD) continue;
      bool used = nd->def && (nd->def->flags & MX_OP_COMMUNICATES);
      for (uint32_t k = 0; k < nd->n_outputs && !used; k++) {
        const mx_value *v = &g->values[nd->outputs[k]];
        used = v->n_consumers > 0 || (v->flags & MX_VALUE_OUTPUT) || (captured && captured[nd->outputs[k]]);
      }
      if (used) continue;
      mx__graph_remove_node(g, (mx_node_id)i);
      for (uint32_t k = 0; k < nd->n_outputs; k++) {
        mx__graph_remove_value(g, nd->outputs[k]);
        (*removed_values)++;
      }
      (*removed_nodes)++;
      changed = true;
    }
  }
  for (size_t i = 0; i < g->n_values; i++) {
    mx_value *v = &g->values[i];
    if ((v->flags & (MX_VALUE_DEAD | MX_VALUE_INPUT | MX_VALUE_OUTPUT)) || v->n_consumers) continue;
    if (!(v->flags & MX_VALUE_CONST) || v->producer != MX_NO_NODE || (captured && captured[i])) continue;
    mx__graph_remove_value(g, (mx_value_id)i);
    (*removed_values)++;
  }
  free(captured);
  return MX_OK;
}

mx_status mx_graph_optimize_sized(mx_graph *g, mx_optimize_report *report, size_t record_size) {
  if (!g || (report && record_size == 0)) return MX_ERR_INVALID_ARGUMENT;
  mx_optimize_report r = {0};
  mx_status st = mx_graph_infer(g);
  for (int round = 0; st == MX_OK && round < 16; round++) {
    size_t folded = 0;
    st = mx__graph_fold_constants(g, NULL, NULL, 0, &folded);
    if (st != MX_OK) break;
    st = mx__graph_remove_dead(g, &r.removed_nodes, &r.removed_values);
    if (st != MX_OK) break;
    r.folded_nodes += folded;
    if (!folded) break;
    st = mx_graph_infer(g);
  }
  if (st == MX_OK) {
    mx__graph_log(g, MX_LOG_INFO, "optimize '%s': folded %zu nodes, removed %zu nodes and %zu values",
                  g->name, r.folded_nodes, r.removed_nodes, r.removed_values);
  }
  if (report) mx__record_fill(report, record_size, &r, sizeof r); /* the caller's size (docs/abi.md) */
  return st;
}
