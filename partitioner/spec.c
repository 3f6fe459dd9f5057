/* Symbol kinds and the specializable-cluster analysis (see spec.h). */
#include <string.h>

#include "graph/ops/op.h"
#include "partitioner/partitioner.h"
#include "partitioner/spec.h"

const char *mx__spec_sym_kind_name(mx_spec_sym_kind k) {
  switch (k) {
    case MX_SPEC_SYM_INPUT: return "input";
    case MX_SPEC_SYM_DATA: return "data";
    default: return "unused";
  }
}

/* Marks every symbol dim d uses as DATA unless it is already INPUT. */
static void mark_used(const mx_symtab *t, mx_dim d, uint8_t *kinds, size_t n) {
  if (!mx_dim_is_expr(d)) return;
  uint32_t idx[16];
  size_t k = mx_sym_symbols_of(t, d, idx, 16);
  for (size_t i = 0; i < k && i < 16; i++)
    if (idx[i] < n && kinds[idx[i]] != MX_SPEC_SYM_INPUT) kinds[idx[i]] = MX_SPEC_SYM_DATA;
}

void mx__spec_symbol_kinds(const mx_graph *g, uint8_t *kinds, size_t n) {
  if (n) memset(kinds, MX_SPEC_SYM_UNUSED, n);
  for (size_t i = 0; i < g->n_inputs; i++) {
    const mx_value *v = &g->values[g->inputs[i]];
    for (int32_t k = 0; k < v->shape.rank; k++) {
      int64_t s = mx_dim_is_expr(v->shape.dims[k]) ? mx_sym_symbol_index(g->syms, v->shape.dims[k]) : -1;
      if (s >= 0 && (size_t)s < n) kinds[s] = MX_SPEC_SYM_INPUT;
    }
  }
  for (size_t id = 0; id < g->n_values; id++) {
    const mx_value *v = &g->values[id];
    if (v->flags & MX_VALUE_DEAD) continue;
    for (int32_t k = 0; k < v->shape.rank; k++) mark_used(g->syms, v->shape.dims[k], kinds, n);
    for (int32_t k = 0; v->sv && k < v->sv_len; k++) mark_used(g->syms, v->sv[k], kinds, n);
  }
}

typedef struct analysis {
  const mx_graph *g;
  const uint8_t *kinds;
  size_t n_kinds;
  mx_spec_info *out;
} analysis;

static bool refuse(analysis *a, const char *why, mx_node_id n, int64_t sym) {
  a->out->specializable = false;
  a->out->why = why;
  a->out->why_node = n;
  a->out->why_sym = sym;
  return false;
}

/* Adds the symbols of d to the set; false (with the reason) when one is not input-bound. */
static bool take_dim(analysis *a, mx_dim d, mx_node_id n) {
  if (mx_dim_is_concrete(d)) return true;
  if (mx_dim_is_unknown(d)) return refuse(a, "a tensor has an unknown dim", n, -1);
  uint32_t idx[16];
  size_t k = mx_sym_symbols_of(a->g->syms, d, idx, 16);
  if (k > 16) return refuse(a, "a dim uses too many symbols", n, -1);
  for (size_t i = 0; i < k; i++) {
    if (idx[i] >= a->n_kinds || a->kinds[idx[i]] != MX_SPEC_SYM_INPUT)
      return refuse(a, "a dim uses a symbol bound by data", n, idx[i]);
    mx_spec_info *o = a->out;
    uint32_t at = 0;
    while (at < o->n_syms && o->syms[at] < idx[i]) at++;
    if (at < o->n_syms && o->syms[at] == idx[i]) continue;
    if (o->n_syms == MX_SPEC_MAX_SYMS) return refuse(a, "the cluster depends on too many symbols", n, idx[i]);
    memmove(o->syms + at + 1, o->syms + at, (o->n_syms - at) * sizeof *o->syms);
    o->syms[at] = idx[i];
    o->n_syms++;
  }
  return true;
}

static bool take_value(analysis *a, mx_value_id v, mx_node_id n, bool read_by_value) {
  const mx_value *val = &a->g->values[v];
  if (val->kind != MX_KIND_TENSOR) return refuse(a, "a sequence or optional value", n, -1);
  if (val->shape.rank == MX_RANK_UNKNOWN) return refuse(a, "a tensor has an unknown rank", n, -1);
  for (int32_t k = 0; k < val->shape.rank; k++)
    if (!take_dim(a, val->shape.dims[k], n)) return false;
  if (val->data) return true;
  if (read_by_value && (!val->sv || val->sv_len < 0))
    return refuse(a, "an op reads a run-time value that no input shape determines", n, -1);
  for (int32_t k = 0; val->sv && k < val->sv_len; k++) {
    if (mx_dim_is_unknown(val->sv[k])) {
      if (read_by_value)
        return refuse(a, "an op reads a run-time value that no input shape determines", n, -1);
      continue;
    }
    if (!take_dim(a, val->sv[k], n)) return false;
  }
  return true;
}

static bool take_node(analysis *a, mx_node_id n) {
  const mx_node *nd = &a->g->nodes[n];
  const mx_op_def *def = nd->def;
  if (!def) return refuse(a, "an op without a resolved definition", n, -1);
  if (def->flags & MX_OP_DATA_DEPENDENT) return refuse(a, "a data-dependent op", n, -1);
  if ((def->flags & (MX_OP_SUBGRAPH | MX_OP_ANY_KIND)) || mx__part_is_control_call(nd))
    return refuse(a, "an op with subgraphs or sequences", n, -1);
  for (uint32_t i = 0; i < nd->n_inputs; i++) {
    if (nd->inputs[i] == MX_NO_VALUE) continue;
    bool by_value = i < 64 && (def->value_inputs & (1ull << i));
    if (!take_value(a, nd->inputs[i], n, by_value)) return false;
  }
  for (uint32_t i = 0; i < nd->n_outputs; i++)
    if (!take_value(a, nd->outputs[i], n, false)) return false;
  return true;
}

void mx__spec_analyze(const mx_graph *g, const mx_node_id *nodes, size_t n_nodes, const uint8_t *kinds,
                      size_t n_kinds, mx_spec_info *out) {
  memset(out, 0, sizeof *out);
  out->specializable = true;
  out->why_node = MX_NO_NODE;
  out->why_sym = -1;
  analysis a = {g, kinds, n_kinds, out};
  size_t count = nodes ? n_nodes : g->n_nodes;
  for (size_t i = 0; i < count; i++) {
    mx_node_id n = nodes ? nodes[i] : (mx_node_id)i;
    if (g->nodes[n].flags & MX_NODE_DEAD) continue;
    if (!take_node(&a, n)) return;
  }
  /* A cluster with no symbol at all has nothing to specialize on (it is unknown for another
   * reason, or it would be KNOWN). */
  if (!out->n_syms) refuse(&a, "no symbolic dim to specialize on", MX_NO_NODE, -1);
}
