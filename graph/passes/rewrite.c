/* Stage 2 runner: selects rewrite rules from a --passes text, runs them to a fixed point with
 * dead-node removal and re-inference between rounds, on the root graph and then inside every
 * subgraph (If / Loop / Scan bodies, at any depth), counts each rule's hits and the op-type
 * histogram before and after (mx_graph_fuse); and the matching/rewriting helpers the rules share
 * (graph/passes/rewrite.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/half.h"
#include "common/record.h"
#include "graph/passes/passes.h"
#include "graph/passes/rewrite.h"

extern const mx__rw_rule mx__rule_conv_residual; /* graph/passes/fuse_residual.c */

const mx__rw_rule *const mx__rw_rules[] = {
    &mx__rule_identity,
    &mx__rule_transpose_pair,
    &mx__rule_reshape_chain,
    &mx__rule_cse,
    &mx__rule_bn_fold,
    &mx__rule_layernorm,
    &mx__rule_rmsnorm,
    &mx__rule_gelu,
    &mx__rule_silu,
    &mx__rule_rotary,
    &mx__rule_attention,
    &mx__rule_conv_act,
    &mx__rule_conv_residual,
    &mx__rule_matmul_transpose,
    &mx__rule_matmul_bias_act,
    &mx__rule_shape_subgraph,
    &mx__rule_transpose_reshape,
    &mx__rule_view_chain,
    &mx__rule_gemm_act,
    &mx__rule_cast_pair,
    &mx__rule_shape_cse,
    NULL,
};

const char *mx_fuse_rule_name(size_t index, const char **what, bool *by_default) {
  for (size_t i = 0; mx__rw_rules[i]; i++) {
    if (i != index) continue;
    if (what) *what = mx__rw_rules[i]->what;
    if (by_default) *by_default = mx__rw_rules[i]->by_default;
    return mx__rw_rules[i]->name;
  }
  return NULL;
}

/* --- matching helpers ------------------------------------------------------------------------- */

mx_node_id mx__rw_producer(const mx_graph *g, mx_value_id v, const char *op) {
  if (v == MX_NO_VALUE || !mx__value_valid(g, v)) return MX_NO_NODE;
  mx_node_id p = g->values[v].producer;
  if (p == MX_NO_NODE || !mx__node_valid(g, p)) return MX_NO_NODE;
  const mx_node *n = &g->nodes[p];
  if (n->domain[0] || strcmp(n->op_type, op) != 0) return MX_NO_NODE;
  for (uint32_t k = 0; k < n->n_attrs; k++)
    if (strncmp(n->attrs[k].name, "mixrt_", 6) == 0) return MX_NO_NODE;
  return p;
}

bool mx__rw_is_output(const mx_graph *g, mx_value_id v) {
  return (g->values[v].flags & MX_VALUE_OUTPUT) != 0;
}

bool mx__rw_single_use(const mx_graph *g, mx_value_id v) {
  return g->values[v].n_consumers == 1 && !mx__rw_is_output(g, v);
}

static bool element_as_double(const mx_tensor *t, int64_t i, double *out) {
  const void *d = t->data;
  switch (t->dtype) {
    case MX_FLOAT32: *out = ((const float *)d)[i]; return true;
    case MX_FLOAT64: *out = ((const double *)d)[i]; return true;
    case MX_FLOAT16: *out = mx__f16_to_f32(((const uint16_t *)d)[i]); return true;
    case MX_BFLOAT16: *out = mx__bf16_to_f32(((const uint16_t *)d)[i]); return true;
    case MX_INT64: *out = (double)((const int64_t *)d)[i]; return true;
    case MX_INT32: *out = ((const int32_t *)d)[i]; return true;
    default: return false;
  }
}

bool mx__rw_const_scalar(const mx_graph *g, mx_value_id v, double *out) {
  if (v == MX_NO_VALUE) return false;
  const mx_tensor *t = g->values[v].data;
  if (!t || !(g->values[v].flags & MX_VALUE_CONST)) return false;
  int64_t n;
  if (!mx_tensor_numel(t, &n) || n != 1 || !t->data) return false;
  return element_as_double(t, 0, out);
}

bool mx__rw_const_is(const mx_graph *g, mx_value_id v, double want, double tol) {
  double x;
  if (!mx__rw_const_scalar(g, v, &x)) return false;
  return fabs(x - want) <= tol * fmax(1.0, fabs(want));
}

bool mx__rw_same_shape(const mx_shape *a, const mx_shape *b) {
  if (a->rank == MX_RANK_UNKNOWN || a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i] || mx_dim_is_unknown(a->dims[i])) return false;
  return true;
}

bool mx__rw_reshape_target(mx_graph *g, const mx_shape *from, const mx_shape *to, int64_t *target) {
  if (from->rank == MX_RANK_UNKNOWN || to->rank == MX_RANK_UNKNOWN) return false;
  int32_t infer_at = -1;
  mx_dim others = 1;
  for (int32_t k = 0; k < to->rank; k++) {
    mx_dim d = to->dims[k];
    bool in_place = k < from->rank && from->dims[k] == d;
    if (mx_dim_is_unknown(d)) return false;
    if (mx_dim_is_concrete(d) && d != 0) {
      target[k] = d;
    } else if (in_place) {
      target[k] = 0; /* copies from's dim: also the only way to write a 0 */
    } else if (d == 0 || infer_at >= 0) {
      return false;
    } else {
      infer_at = k;
      target[k] = -1;
      continue;
    }
    others = mx_sym_mul(g->syms, others, d);
  }
  if (infer_at < 0) return true;
  mx_dim numel = mx__shape_numel(g->syms, from);
  if (mx_dim_is_unknown(numel) || mx_dim_is_unknown(others) || others == 0) return false;
  return mx_sym_div(g->syms, numel, others) == to->dims[infer_at];
}

mx_value_id mx__rw_other_input(const mx_node *n, mx_value_id v) {
  if (n->n_inputs != 2) return MX_NO_VALUE;
  if (n->inputs[0] == v) return n->inputs[1];
  if (n->inputs[1] == v) return n->inputs[0];
  return MX_NO_VALUE;
}

/* --- rewriting helpers ------------------------------------------------------------------------ */

/* Makes node `nid` produce `out` at `slot` in place of its current output there (a fresh value
 * nothing reads yet), which is dropped. */
static void take_output(mx_graph *g, mx_node_id nid, uint32_t slot, mx_value_id out) {
  mx_node *nd = &g->nodes[nid];
  mx_value_id fresh = nd->outputs[slot];
  nd->outputs[slot] = out;
  g->values[out].producer = nid;
  g->values[out].producer_slot = slot;
  if (fresh != out) mx__graph_remove_value(g, fresh);
  mx__graph_invalidate(g);
}

mx_status mx__rw_replace(mx_graph *g, mx_value_id out, const char *op, const mx_value_id *inputs,
                         size_t n_inputs, const mx_attr *attrs, size_t n_attrs, mx_node_id *node) {
  /* The new node takes the replaced node's name (free once it is removed), so messages about it
   * still name a node of the model as it was given. */
  mx_node_id old = g->values[out].producer;
  const char *name = old != MX_NO_NODE && g->nodes[old].name[0] ? g->nodes[old].name : NULL;
  if (old != MX_NO_NODE) mx__graph_remove_node(g, old);
  mx_node_desc d = {.op_type = op,
                    .name = name,
                    .inputs = inputs,
                    .n_inputs = n_inputs,
                    .attrs = attrs,
                    .n_attrs = n_attrs,
                    .n_outputs = 1};
  mx_value_id fresh;
  mx_status st = mx_graph_add_node(g, &d, &fresh);
  if (st != MX_OK) return st;
  mx_node_id nid = g->values[fresh].producer;
  take_output(g, nid, 0, out);
  if (node) *node = nid;
  return MX_OK;
}

mx_status mx__rw_replace_n(mx_graph *g, const mx_value_id *outs, size_t n_outs, const char *op,
                           const mx_value_id *inputs, size_t n_inputs, const mx_attr *attrs, size_t n_attrs) {
  mx_value_id fresh[8];
  if (n_outs > 8) return mx__graph_fail(g, MX_ERR_LIMIT, "a rewrite builds at most 8 outputs");
  mx_node_desc d = {.op_type = op,
                    .inputs = inputs,
                    .n_inputs = n_inputs,
                    .attrs = attrs,
                    .n_attrs = n_attrs,
                    .n_outputs = n_outs};
  mx_status st = mx_graph_add_node(g, &d, fresh);
  if (st != MX_OK) return st;
  mx_node_id nid = g->values[fresh[0]].producer;
  for (size_t k = 0; k < n_outs; k++) {
    mx_node_id old = g->values[outs[k]].producer;
    if (old != MX_NO_NODE) mx__graph_remove_node(g, old);
  }
  for (size_t k = 0; k < n_outs; k++) take_output(g, nid, (uint32_t)k, outs[k]);
  return MX_OK;
}

bool mx__rw_forward(mx_graph *g, mx_value_id from, mx_value_id to) {
  if (from == to) return false;
  /* Values a subgraph captures keep their producers (dead-node removal keeps them): only the
   * readers in g move. */
  if (!mx__rw_is_output(g, from)) {
    if (!g->values[from].n_consumers) return false; /* read only by name from a subgraph: nothing moves */
    return mx__graph_replace_uses(g, from, to) == MX_OK;
  }
  mx_value *vt = &g->values[to];
  if ((vt->flags & (MX_VALUE_INPUT | MX_VALUE_OUTPUT | MX_VALUE_CONST | MX_VALUE_OUTER)) ||
      vt->producer == MX_NO_NODE)
    return false;
  if (g->n_subgraphs) {
    /* `to` disappears below: a subgraph reading it by name would lose it. */
    uint8_t *captured = mx__graph_captured(g);
    bool keep = !captured || captured[to];
    free(captured);
    if (keep) return false;
  }
  /* `from` keeps its name: its producer goes away and `to`'s producer writes it instead. */
  mx_node_id old = g->values[from].producer;
  if (old != MX_NO_NODE) mx__graph_remove_node(g, old);
  mx_node_id p = vt->producer;
  uint32_t slot = vt->producer_slot;
  g->nodes[p].outputs[slot] = from;
  g->values[from].producer = p;
  g->values[from].producer_slot = slot;
  vt->producer = MX_NO_NODE;
  if (mx__graph_replace_uses(g, to, from) != MX_OK) return false;
  mx__graph_remove_value(g, to);
  return true;
}

mx_status mx__rw_new_const(mx_graph *g, const char *hint, mx_dtype dtype, int32_t rank, const int64_t *dims,
                           const void *data, mx_value_id *out) {
  mx_tensor t = {.dtype = dtype, .rank = rank, .data = (void *)data};
  for (int32_t i = 0; i < rank; i++) t.dims[i] = dims[i];
  const char *name = mx__graph_unique_name(g, hint);
  if (!name) return mx__graph_fail(g, MX_ERR_OUT_OF_MEMORY, "out of memory naming a folded constant");
  return mx_graph_add_constant(g, name, &t, out);
}

mx_status mx__rw_new_const_for(mx_graph *g, mx_node_id node, mx_dtype dtype, int32_t rank,
                               const int64_t *dims, const void *data, mx_value_id *out) {
  const char *name = g->nodes[node].name;
  if (!name[0] || mx_graph_find_value(g, name) != MX_NO_VALUE)
    return mx__rw_new_const(g, name[0] ? name : "c", dtype, rank, dims, data, out);
  mx_tensor t = {.dtype = dtype, .rank = rank, .data = (void *)data};
  for (int32_t i = 0; i < rank; i++) t.dims[i] = dims[i];
  return mx_graph_add_constant(g, name, &t, out);
}

/* --- selection ---------------------------------------------------------------------------------- */

static size_t rule_count(void) {
  size_t n = 0;
  while (mx__rw_rules[n]) n++;
  return n;
}

/* Fills on[] from the passes text; fails naming an unknown rule. */
static mx_status select_rules(mx_graph *g, const char *passes, bool *on) {
  size_t n = rule_count();
  if (!passes || !*passes) passes = "default";
  for (size_t i = 0; i < n; i++) on[i] = false;
  const char *p = passes;
  while (*p) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    bool off = len && p[0] == '-';
    const char *w = off ? p + 1 : p;
    size_t wl = off ? len - 1 : len;
    bool known = false;
    if ((wl == 7 && strncmp(w, "default", 7) == 0) || (wl == 3 && strncmp(w, "all", 3) == 0)) {
      bool all = wl == 3;
      for (size_t i = 0; i < n; i++)
        if (all || mx__rw_rules[i]->by_default) on[i] = !off;
      known = true;
    } else if (wl == 4 && strncmp(w, "none", 4) == 0) {
      for (size_t i = 0; i < n; i++) on[i] = false;
      known = true;
    } else {
      for (size_t i = 0; i < n; i++) {
        if (strlen(mx__rw_rules[i]->name) == wl && strncmp(mx__rw_rules[i]->name, w, wl) == 0) {
          on[i] = !off;
          known = true;
        }
      }
    }
    if (!known && wl)
      return mx__graph_fail(g, MX_ERR_INVALID_ARGUMENT,
                            "--passes: unknown rule '%.*s' (see mixrt inspect --passes list)", (int)wl, w);
    p += len;
    if (*p == ',') p++;
  }
  return MX_OK;
}

/* --- histogram ---------------------------------------------------------------------------------- */

/* Adds the live nodes of g and of the subgraphs of its live nodes to the histogram and *live. */
static void count_graph_ops(const mx_graph *g, mx_fuse_report *r, bool after, size_t *live) {
  for (size_t i = 0; i < g->n_nodes; i++) {
    const mx_node *nd = &g->nodes[i];
    if (nd->flags & MX_NODE_DEAD) continue;
    (*live)++;
    for (uint32_t a = 0; a < nd->n_attrs; a++)
      if (nd->attrs[a].type == MX_ATTR_GRAPH && nd->attrs[a].graph)
        count_graph_ops(nd->attrs[a].graph, r, after, live);
    size_t k = 0;
    while (k < r->n_op_types && strcmp(r->op_types[k].op_type, nd->op_type) != 0) k++;
    if (k == r->n_op_types) {
      if (k == MX_FUSE_MAX_OP_TYPES) continue;
      /* Op type names of the graph's arena may die with removed nodes: keep a stable name. */
      const mx_op_def *def = nd->def ? nd->def : mx__op_find(nd->domain, nd->op_type);
      r->op_types[k].op_type = def ? def->name : "(unknown op)";
      if (!def) continue;
      r->op_types[k].before = r->op_types[k].after = 0;
      r->n_op_types++;
    }
    if (after)
      r->op_types[k].after++;
    else
      r->op_types[k].before++;
  }
}

static void count_ops(const mx_graph *g, mx_fuse_report *r, bool after) {
  size_t live = 0;
  count_graph_ops(g, r, after, &live);
  if (after)
    r->ops_after = live;
  else
    r->ops_before = live;
}

/* --- the runner --------------------------------------------------------------------------------- */

/* Runs the rules selected in on[0..n) over g to a fixed point: phase 0 the rules that are not
 * late, phase 1 all of them. g is root or a subgraph of it: after each hit, dead nodes of g are
 * removed and root is inferred again (which infers its subgraphs against their enclosing
 * values). Failures are recorded on root. */
static mx_status fuse_graph(mx_graph *root, mx_graph *g, const bool *on, size_t n, mx_fuse_report *r) {
  mx_status st = MX_OK;
  for (int phase = 0; phase < 2 && st == MX_OK; phase++) {
    for (int round = 0; round < 8; round++) {
      size_t round_hits = 0;
      for (size_t i = 0; i < n && st == MX_OK; i++) {
        if (!on[i] || (phase == 0 && mx__rw_rules[i]->late)) continue;
        size_t hits = 0;
        st = mx__rw_rules[i]->run(g, &hits);
        if (st != MX_OK) break;
        r->rules[i].hits += hits;
        round_hits += hits;
        if (hits) {
          size_t dn = 0, dv = 0;
          st = mx__graph_remove_dead(g, &dn, &dv);
          if (st == MX_OK) st = mx_graph_infer(root);
        }
      }
      if (st != MX_OK || !round_hits) break;
    }
  }
  if (st != MX_OK && g != root) mx__graph_fail_err(root, &g->err);
  return st;
}

/* fuse_graph on every subgraph of g's live nodes, then on theirs. */
static mx_status fuse_subgraphs(mx_graph *root, mx_graph *g, const bool *on, size_t n, mx_fuse_report *r) {
  for (size_t i = 0; i < g->n_nodes; i++) {
    if (g->nodes[i].flags & MX_NODE_DEAD) continue;
    for (uint32_t a = 0; a < g->nodes[i].n_attrs; a++) {
      mx_graph *sub = g->nodes[i].attrs[a].type == MX_ATTR_GRAPH ? g->nodes[i].attrs[a].graph : NULL;
      if (!sub) continue;
      mx_status st = fuse_graph(root, sub, on, n, r);
      if (st == MX_OK) st = fuse_subgraphs(root, sub, on, n, r);
      if (st != MX_OK) return st;
    }
  }
  return MX_OK;
}

static mx_status fuse_into(mx_graph *g, const char *passes, mx_fuse_report *r) {
  size_t n = rule_count();
  bool on[MX_FUSE_MAX_RULES];
  memset(r, 0, sizeof *r);
  mx_status st = select_rules(g, passes, on);
  if (st != MX_OK) return st;
  r->n_rules = n;
  for (size_t i = 0; i < n; i++) {
    r->rules[i].name = mx__rw_rules[i]->name;
    r->rules[i].enabled = on[i];
  }
  st = mx_graph_infer(g);
  if (st != MX_OK) return st;
  count_ops(g, r, false);
  bool any = false;
  for (size_t i = 0; i < n; i++) any |= on[i];
  if (!any) {
    count_ops(g, r, true);
    return MX_OK;
  }
  /* Subgraphs read enclosing values by name: the rules keep those values (see mx__rw_forward;
   * dead-node removal keeps captured values), so the root is rewritten first, then the bodies. */
  st = fuse_graph(g, g, on, n, r);
  if (st == MX_OK) st = fuse_subgraphs(g, g, on, n, r);
  if (st != MX_OK) return st;
  count_ops(g, r, true);
  for (size_t i = 0; i < n; i++)
    if (r->rules[i].hits)
      mx__graph_log(g, MX_LOG_INFO, "fuse '%s': rule %s hit %zu times", g->name, r->rules[i].name,
                    r->rules[i].hits);
  return MX_OK;
}

mx_status mx_graph_fuse_sized(mx_graph *g, const char *passes, mx_fuse_report *report, size_t record_size) {
  if (!g || (report && record_size == 0)) return MX_ERR_INVALID_ARGUMENT;
  /* Filled in the library's own layout, then handed over at the caller's size (docs/abi.md). */
  mx_fuse_report r;
  mx_status st = fuse_into(g, passes, &r);
  if (report) mx__record_fill(report, record_size, &r, sizeof r);
  return st;
}
