/* The tensor-parallel sharding pass (mx__shard_graph, graph/passes/shard.h): finds the blocks
 * to split (each Attention's Q/K/V projections, each MLP's up projections), then walks the graph
 * in order carrying for every value whether it is whole on each rank (replicated) or split on
 * one axis, rewriting each node that reads a split value (weights sliced, Reshape targets and
 * head counts divided) and inserting a collective where a split value must become whole again.
 * A node that reads a split value and is none of the forms below is refused by name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "graph/passes/passes.h"
#include "graph/passes/rewrite.h"
#include "graph/passes/shard_impl.h"

/* Per node: ROLE_NONE, or a column-split MatMul whose weight has `role` column sections (1; 3
 * for a fused QKV projection). */
enum { ROLE_NONE = 0, ROLE_COLUMN = 1 };

static bool is_op(const mx_node *n, const char *op) { return !n->domain[0] && strcmp(n->op_type, op) == 0; }

static bool is_const(const mx_graph *g, mx_value_id v) {
  return v != MX_NO_VALUE && (g->values[v].flags & MX_VALUE_CONST) && g->values[v].data;
}

static int64_t attr_int(const mx_node *n, const char *name, int64_t def) {
  const mx_attr *a = mx__node_attr(n, name);
  return a ? a->i : def;
}

/* MatMul with a constant rank-2 weight (possibly with mixrt's fused transpose/bias/activation). */
static bool is_weight_matmul(const mx_graph *g, const mx_node *n) {
  return is_op(n, "MatMul") && n->n_inputs >= 2 && is_const(g, n->inputs[1]) &&
         g->values[n->inputs[1]].data->rank == 2 && !attr_int(n, "mixrt_trans_a", 0);
}

static bool is_unary_elementwise(const mx_node *n) {
  static const char *const ops[] = {"Sigmoid",   "Relu", "Gelu",     "Swish", "Tanh",       "Erf",
                                    "Neg",       "Exp",  "Softplus", "Cast",  "Identity",   "HardSigmoid",
                                    "HardSwish", "Mish", "Abs",      "Sqrt",  "Reciprocal", NULL};
  for (int i = 0; ops[i]; i++)
    if (is_op(n, ops[i])) return true;
  return false;
}

static bool is_binary_elementwise(const mx_node *n) {
  static const char *const ops[] = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", NULL};
  for (int i = 0; ops[i]; i++)
    if (is_op(n, ops[i])) return n->n_inputs == 2;
  return false;
}

static bool concrete(mx_dim d, int64_t *v) {
  if (!mx_dim_is_concrete(d)) return false;
  *v = d;
  return true;
}

/* --- finding the blocks --------------------------------------------------------------------------- */

/* From Attention input v back to the MatMul projecting it, through the head reshapes, transposes
 * and rotary embedding; marks it a column split in `parts` parts. */
static mx_status mark_projection(mx__shard_ctx *c, uint8_t *role, mx_node_id att, mx_value_id v,
                                 const char *what, int parts) {
  mx_graph *g = c->g;
  int groups = 1;
  for (int hops = 0; hops < 16; hops++) {
    mx_node_id p = g->values[v].producer;
    if (p == MX_NO_NODE) break;
    const mx_node *pn = &g->nodes[p];
    if (is_weight_matmul(g, pn)) {
      int16_t before = c->role_parts[p] ? c->role_parts[p] : (int16_t)c->tp;
      if (role[p] && (role[p] != groups || before != parts))
        return mx__node_fail(c->err, &g->nodes[att], MX_ERR_UNSUPPORTED,
                             "its %s input comes from MatMul '%s', which another attention input cuts "
                             "differently (a fused projection with fewer kv-heads than tp)",
                             what, pn->name);
      role[p] = (uint8_t)groups;
      c->role_parts[p] = (int16_t)(parts == c->tp ? 0 : parts);
      return MX_OK;
    }
    if (is_op(pn, "Split") && groups == 1 && pn->n_outputs > 1 && pn->n_outputs < 16) {
      /* A fused QKV projection: its columns are n_outputs sections, each split by heads. */
      groups = (int)pn->n_outputs;
      v = pn->inputs[0];
      continue;
    }
    if (is_op(pn, "Reshape") || is_op(pn, "Transpose") || is_op(pn, "RotaryEmbedding")) {
      v = pn->inputs[0];
      continue;
    }
    if ((is_op(pn, "Add") || is_op(pn, "Mul")) && pn->n_inputs == 2) {
      v = is_const(g, pn->inputs[1]) ? pn->inputs[0] : pn->inputs[1];
      if (!is_const(g, pn->inputs[0]) && !is_const(g, pn->inputs[1])) break;
      continue;
    }
    break;
  }
  mx_value_id start = g->nodes[att].inputs[what[0] == 'q' ? 0 : what[0] == 'k' ? 1 : 2];
  return mx__node_fail(
      c->err, &g->nodes[att], MX_ERR_UNSUPPORTED,
      "its %s input '%s' does not come from a MatMul with constant weights through head "
      "reshapes, transposes and rotary embedding (stopped at '%s'): mixrt cannot split it by heads",
      what, g->values[start].name, g->values[v].name);
}

/* "tp 1, 2 or 4": the tensor-parallel sizes the pass can cut these heads for (query heads
 * divisible by tp; kv-heads divisible by tp, or dividing it and then replicated), for a refusal. */
static void tp_choices(int64_t nh, int64_t kvh, char *buf, size_t cap) {
  int64_t ok[8];
  int n = 0;
  for (int64_t d = 1; d <= nh; d++)
    if (nh % d == 0 && (kvh % d == 0 || d % kvh == 0)) {
      if (n == 8) memmove(ok, ok + 1, 7 * sizeof *ok); /* keep the largest */
      ok[n < 8 ? n++ : 7] = d;
    }
  size_t len = (size_t)snprintf(buf, cap, "tp");
  for (int i = 0; i < n && len < cap; i++)
    len += (size_t)snprintf(buf + len, cap - len, "%s%lld",
                            i == 0      ? " "
                            : i + 1 < n ? ", "
                                        : " or ",
                            (long long)ok[i]);
}

static mx_status find_attention(mx__shard_ctx *c, mx_node_id n, uint8_t *role, mx_value_id *states,
                                size_t *n_states) {
  mx_graph *g = c->g;
  const mx_node *nd = &g->nodes[n];
  if (nd->n_inputs < 3) return mx__node_fail(c->err, nd, MX_ERR_UNSUPPORTED, "Attention without q, k, v");
  const mx_shape *qs = &g->values[nd->inputs[0]].shape, *ks = &g->values[nd->inputs[1]].shape;
  int64_t nh = 0, kvh = 0;
  if (qs->rank == 4 && ks->rank == 4) {
    if (!concrete(qs->dims[1], &nh) || !concrete(ks->dims[1], &kvh))
      return mx__node_fail(c->err, nd, MX_ERR_UNSUPPORTED, "its head counts are not known");
  } else {
    nh = attr_int(nd, "q_num_heads", 0);
    kvh = attr_int(nd, "kv_num_heads", 0);
  }
  if (nh <= 0 || kvh <= 0)
    return mx__node_fail(c->err, nd, MX_ERR_UNSUPPORTED,
                         "its head counts (%lld query, %lld kv) are not known", (long long)nh,
                         (long long)kvh);
  /* Fewer kv-heads than ranks: each kv-head is replicated on the tp / kvh ranks whose query
   * heads read it (rank r holds kv-head r * kvh / tp), when that is a whole number. */
  int kv_parts = kvh < c->tp && c->tp % kvh == 0 ? (int)kvh : c->tp;
  if (nh % c->tp || kvh % kv_parts) {
    char fits[96];
    tp_choices(nh, kvh, fits, sizeof fits);
    if (nh % c->tp == 0 && kvh < c->tp)
      return mx__node_fail(
          c->err, nd, MX_ERR_UNSUPPORTED,
          "%lld kv heads are fewer than tp %d and do not divide it: each kv-head is replicated on "
          "tp / kv-heads ranks, which must be a whole number; use %s, or a model with at least "
          "%d kv heads",
          (long long)kvh, c->tp, fits, c->tp);
    return mx__node_fail(
        c->err, nd, MX_ERR_UNSUPPORTED,
        "%lld query heads and %lld kv heads cannot be cut for tp %d (the query heads must be "
        "divisible by tp, the kv heads divisible by tp or dividing it): use %s",
        (long long)nh, (long long)kvh, c->tp, fits);
  }
  static const char *const what[3] = {"q", "k", "v"};
  /* One kv-head (multi-query attention): keys, values and their cache stay whole on every rank. */
  for (int i = 0; i < (kvh == 1 ? 1 : 3); i++) {
    mx_status st = mark_projection(c, role, n, g->nodes[n].inputs[i], what[i], i ? kv_parts : c->tp);
    if (st != MX_OK) return st;
  }
  if (kvh == 1) return MX_OK;
  for (uint32_t i = 4; i < 6 && i < g->nodes[n].n_inputs; i++) {
    mx_value_id pv = g->nodes[n].inputs[i];
    if (pv == MX_NO_VALUE) continue;
    const mx_value *val = &g->values[pv];
    if (!(val->flags & MX_VALUE_INPUT) || val->shape.rank != 4)
      return mx__node_fail(
          c->err, &g->nodes[n], MX_ERR_UNSUPPORTED,
          "its cache input '%s' is no 4-D graph input: mixrt splits only a cache the caller holds",
          val->name);
    if (c->kind[pv] == MX__SHARD_SPLIT) continue; /* a cache two Attention nodes share */
    c->kind[pv] = MX__SHARD_SPLIT;
    c->axis[pv] = 1;
    c->parts[pv] = (int16_t)(kv_parts == c->tp ? 0 : kv_parts);
    states[(*n_states)++] = pv;
  }
  return MX_OK;
}

/* MLP: MatMul `down` whose activation comes, through elementwise ops only, from MatMuls with
 * constant weights that all read the same value. Marks those column splits. */
static bool find_mlp(mx__shard_ctx *c, mx_node_id down, uint8_t *role) {
  mx_graph *g = c->g;
  mx_value_id stack[64], x = MX_NO_VALUE;
  mx_node_id leaves[16];
  size_t n_stack = 0, n_leaves = 0, visited = 0;
  stack[n_stack++] = g->nodes[down].inputs[0];
  while (n_stack) {
    mx_value_id v = stack[--n_stack];
    if (++visited > 64) return false;
    if (is_const(g, v)) {
      int64_t numel = 0;
      if (!mx_tensor_numel(g->values[v].data, &numel) || numel != 1) return false;
      continue;
    }
    mx_node_id p = g->values[v].producer;
    if (p == MX_NO_NODE) return false;
    const mx_node *pn = &g->nodes[p];
    if (is_weight_matmul(g, pn)) {
      if (x != MX_NO_VALUE && pn->inputs[0] != x) return false;
      x = pn->inputs[0];
      if (n_leaves == 16) return false;
      leaves[n_leaves++] = p;
      continue;
    }
    if (!is_unary_elementwise(pn) && !is_binary_elementwise(pn)) return false;
    for (uint32_t k = 0; k < pn->n_inputs; k++) {
      if (n_stack == 64) return false;
      stack[n_stack++] = pn->inputs[k];
    }
  }
  if (!n_leaves) return false;
  for (size_t i = 0; i < n_leaves; i++) role[leaves[i]] = ROLE_COLUMN;
  return true;
}

/* --- rewriting node by node ----------------------------------------------------------------------- */

static mx_status refuse(mx__shard_ctx *c, mx_node_id n, mx_value_id v, const char *why) {
  return mx__node_fail(c->err, &c->g->nodes[n], MX_ERR_UNSUPPORTED,
                       "reads '%s', which is split across ranks on axis %d, and %s", c->g->values[v].name,
                       (int)c->axis[v], why);
}

/* Value v split on `axis` in `parts` parts (tp: one per rank). */
static void set_split_parts(mx__shard_ctx *c, mx_value_id v, int axis, int parts) {
  c->kind[v] = MX__SHARD_SPLIT;
  c->axis[v] = (int8_t)axis;
  c->parts[v] = (int16_t)(parts == c->tp ? 0 : parts);
}

static void set_split(mx__shard_ctx *c, mx_value_id v, int axis) { set_split_parts(c, v, axis, c->tp); }

/* Column split: the weight's output columns (and bias) cut into tp parts. */
static mx_status column_matmul(mx__shard_ctx *c, mx_node_id n, int groups, int parts) {
  mx_graph *g = c->g;
  mx_value_id x = g->nodes[n].inputs[0], w = g->nodes[n].inputs[1], y = g->nodes[n].outputs[0];
  if (c->kind[x] == MX__SHARD_SPLIT)
    return refuse(c, n, x, "a column-split projection needs its input whole");
  bool trans_b = attr_int(&g->nodes[n], "mixrt_trans_b", 0) != 0;
  mx_value_id out;
  mx_status st = mx__shard_slice_const(c, n, w, trans_b ? 0 : 1, groups, parts, &out);
  if (st != MX_OK) return st;
  if (attr_int(&g->nodes[n], "mixrt_bias", 0) && g->nodes[n].n_inputs > 2 &&
      is_const(g, g->nodes[n].inputs[2])) {
    mx_value_id b = g->nodes[n].inputs[2];
    st = mx__shard_slice_const(c, n, b, g->values[b].data->rank - 1, groups, parts, &out);
    if (st != MX_OK) return st;
  } else if (attr_int(&g->nodes[n], "mixrt_bias", 0)) {
    return mx__node_fail(c->err, &g->nodes[n], MX_ERR_UNSUPPORTED, "its fused bias is no constant");
  }
  set_split_parts(c, y, g->values[y].shape.rank - 1, parts);
  return MX_OK;
}

/* Row split: the weight's input rows cut; partial sums summed by an AllReduce. */
static mx_status row_matmul(mx__shard_ctx *c, mx_node_id n, const char *block) {
  mx_graph *g = c->g;
  mx_value_id x = g->nodes[n].inputs[0], w = g->nodes[n].inputs[1], y = g->nodes[n].outputs[0];
  if (c->axis[x] != g->values[x].shape.rank - 1)
    return refuse(c, n, x, "a row-split MatMul needs it split on its last axis");
  if (mx__shard_parts(c, x) != c->tp)
    return refuse(
        c, n, x,
        "it is replicated on several ranks (a shared kv-head), so their sum would count it more than once");
  if (mx__node_attr(&g->nodes[n], "mixrt_activation"))
    return refuse(c, n, x, "its fused activation cannot run on partial sums");
  bool trans_b = attr_int(&g->nodes[n], "mixrt_trans_b", 0) != 0;
  mx_value_id out;
  mx_status st = mx__shard_slice_const(c, n, w, trans_b ? 1 : 0, 1, c->tp, &out);
  if (st != MX_OK) return st;
  if (attr_int(&g->nodes[n], "mixrt_bias", 0) && c->rank != 0) {
    /* The fused bias (a constant or a residual) is added once, by rank 0: the other ranks' node
     * loses it, and the AllReduce sums it in with the partial products. */
    mx_node *nd = &g->nodes[n];
    if (nd->n_inputs > 2 && nd->inputs[2] != MX_NO_VALUE) mx__graph_remove_use(g, nd->inputs[2], n);
    nd->n_inputs = 2;
    uint32_t kept = 0;
    for (uint32_t i = 0; i < nd->n_attrs; i++)
      if (strcmp(nd->attrs[i].name, "mixrt_bias") != 0) nd->attrs[kept++] = nd->attrs[i];
    nd->n_attrs = kept;
    nd->params = NULL;
    mx__graph_invalidate(g);
  }
  char why[320];
  snprintf(why, sizeof why, "sums the partial products of row-split %s '%s'", block, g->nodes[n].name);
  return mx__shard_collective_after(c, y, "AllReduce", NULL, 0, why);
}

/* LM head writing a graph output: vocabulary columns split, logits gathered. */
static mx_status vocab_head(mx__shard_ctx *c, mx_node_id n) {
  const mx_graph *cg = c->g;
  const mx_tensor *w = cg->values[cg->nodes[n].inputs[1]].data;
  int64_t cols = w->dims[attr_int(&cg->nodes[n], "mixrt_trans_b", 0) ? 0 : 1];
  if (cols % c->tp) return MX_OK; /* stays whole on every rank: correct, only not split */
  mx_status st = column_matmul(c, n, 1, c->tp);
  if (st != MX_OK) return st;
  mx_graph *g = c->g;
  mx_value_id y = g->nodes[n].outputs[0];
  mx_attr axis = mx_attr_int("axis", g->values[y].shape.rank - 1);
  char why[320];
  snprintf(why, sizeof why, "gathers the vocabulary-split logits of '%s'", g->nodes[n].name);
  c->report->n_vocab++;
  return mx__shard_collective_after(c, y, "AllGather", &axis, 1, why);
}

/* Embedding Gather on a [vocab, hidden] table: each rank keeps its rows plus one zero row, and
 * an AllReduce sums the ranks' rows. Which row an id reads on this rank comes from a Gather on a
 * [vocab] constant (the rank's row for its own ids, the zero row for the others): that Gather
 * reads the ids as the embedding did, so a negative id counts from the end of the table and an
 * id outside [-vocab, vocab) fails the run naming the id, on every rank alike (they all read the
 * same ids) and before the AllReduce, so no rank is left waiting in it. */
static mx_status vocab_embedding(mx__shard_ctx *c, mx_node_id n) {
  mx_graph *g = c->g;
  mx_value_id table = g->nodes[n].inputs[0], ids = g->nodes[n].inputs[1], y = g->nodes[n].outputs[0];
  const mx_tensor *t = g->values[table].data;
  int64_t vocab = t->dims[0], hidden = t->dims[1];
  if (vocab % c->tp)
    return mx__node_fail(c->err, &g->nodes[n], MX_ERR_UNSUPPORTED, "vocabulary %lld not divisible by tp %d",
                         (long long)vocab, c->tp);
  mx_dtype it = g->values[ids].dtype;
  if (it != MX_INT64 && it != MX_INT32)
    return mx__node_fail(c->err, &g->nodes[n], MX_ERR_UNSUPPORTED, "its indices are neither int32 nor int64");
  int64_t local = vocab / c->tp, lo = local * c->rank;
  size_t es = mx_dtype_size(t->dtype);
  unsigned char *rows = calloc((size_t)((local + 1) * hidden), es);
  void *row_of_id = malloc((size_t)vocab * mx_dtype_size(it));
  if (!rows || !row_of_id) {
    free(rows);
    free(row_of_id);
    return mx__fail_oom(c->err, "an embedding slice");
  }
  memcpy(rows, (const unsigned char *)t->data + (size_t)(lo * hidden) * es, (size_t)(local * hidden) * es);
  for (int64_t v = 0; v < vocab; v++) {
    int64_t r = v >= lo && v < lo + local ? v - lo : local;
    if (it == MX_INT64)
      ((int64_t *)row_of_id)[v] = r;
    else
      ((int32_t *)row_of_id)[v] = (int32_t)r;
  }
  char name[256];
  snprintf(name, sizeof name, "%s.tp%d", g->values[table].name, c->rank);
  mx_value_id slice = MX_NO_VALUE, row_map = MX_NO_VALUE, idx = MX_NO_VALUE;
  mx_status st = mx__rw_new_const(g, name, t->dtype, 2, (int64_t[]){local + 1, hidden}, rows, &slice);
  snprintf(name, sizeof name, "%s.tp%d_rows", g->values[ids].name, c->rank);
  if (st == MX_OK) st = mx__rw_new_const(g, name, it, 1, (int64_t[]){vocab}, row_of_id, &row_map);
  free(rows);
  free(row_of_id);
  /* Named after the embedding, so an id out of range is reported against it. */
  snprintf(name, sizeof name, "%s.tp_rows", g->nodes[n].name);
  mx_node_desc lookup = {.op_type = "Gather",
                         .name = name,
                         .inputs = (mx_value_id[]){row_map, ids},
                         .n_inputs = 2,
                         .n_outputs = 1};
  if (st == MX_OK) st = mx_graph_add_node(g, &lookup, &idx);
  if (st != MX_OK) return mx__fail_err_from_graph(c, st);
  st = mx__shard_rewire_input(c, n, ids, idx);
  if (st == MX_OK) st = mx__shard_rewire_input(c, n, table, slice);
  if (st != MX_OK) return st;
  c->report->n_weights++;
  c->report->n_vocab++;
  char why[320];
  snprintf(why, sizeof why, "sums the vocabulary-split rows of embedding '%s' (each id lives on one rank)",
           g->nodes[n].name);
  set_split(c, y, 0); /* partial: made whole by the AllReduce right away */
  return mx__shard_collective_after(c, y, "AllReduce", NULL, 0, why);
}

/* Reshape of a split value: the split moves to the output axis with the same leading product. */
static mx_status reshape(mx__shard_ctx *c, mx_node_id n) {
  mx_graph *g = c->g;
  mx_value_id x = g->nodes[n].inputs[0], tv = g->nodes[n].inputs[1], y = g->nodes[n].outputs[0];
  if (!is_const(g, tv)) return refuse(c, n, x, "its target shape is no constant");
  const mx_shape *in = &g->values[x].shape, *out = &g->values[y].shape;
  int a = c->axis[x], b = -1, parts = mx__shard_parts(c, x);
  mx_dim lead_in[MX_MAX_RANK], lead_out[MX_MAX_RANK];
  int nin = 0;
  for (int i = 0; i < a; i++)
    if (in->dims[i] != 1) lead_in[nin++] = in->dims[i];
  int nout = 0;
  for (int j = 0; j < out->rank && b < 0; j++) {
    if (nout == nin && out->dims[j] != 1) {
      bool same = true;
      for (int k = 0; k < nin; k++) same = same && lead_in[k] == lead_out[k];
      int64_t d;
      if (same && concrete(out->dims[j], &d) && d % parts == 0) b = j;
    }
    if (out->dims[j] != 1 && nout < MX_MAX_RANK) lead_out[nout++] = out->dims[j];
  }
  const mx_tensor *t = g->values[tv].data;
  if (b < 0 || t->dtype != MX_INT64 || t->rank != 1 || t->dims[0] != out->rank)
    return refuse(c, n, x, "no axis of its output carries the split whole");
  int64_t target[MX_MAX_RANK];
  memcpy(target, t->data, (size_t)out->rank * sizeof *target);
  if (target[b] > 0)
    target[b] /= parts;
  else if (target[b] == 0 && b != a)
    return refuse(c, n, x, "its target copies another axis into the split one");
  mx_value_id nt;
  mx_status st = mx__rw_new_const_for(g, n, MX_INT64, 1, (int64_t[]){out->rank}, target, &nt);
  if (st == MX_OK) st = mx__shard_rewire_input(c, n, tv, nt);
  if (st != MX_OK) return st;
  set_split_parts(c, y, b, parts);
  return MX_OK;
}

static mx_status transpose(mx__shard_ctx *c, mx_node_id n) {
  mx_graph *g = c->g;
  mx_value_id x = g->nodes[n].inputs[0], y = g->nodes[n].outputs[0];
  const mx_attr *perm = mx__node_attr(&g->nodes[n], "perm");
  int r = g->values[x].shape.rank, a = c->axis[x];
  for (int j = 0; j < r; j++) {
    int64_t pj = perm && (size_t)j < perm->count ? perm->ints[j] : r - 1 - j;
    if (pj == a) {
      set_split_parts(c, y, j, mx__shard_parts(c, x));
      return MX_OK;
    }
  }
  return refuse(c, n, x, "its perm is not understood");
}

/* Divides integer attribute `name` of node n by `parts` (head counts of 3-D attention inputs). */
static mx_status divide_attr(mx__shard_ctx *c, mx_node_id n, const char *name, int parts, bool required) {
  mx_node *nd = &c->g->nodes[n];
  for (uint32_t i = 0; i < nd->n_attrs; i++)
    if (!strcmp(nd->attrs[i].name, name)) {
      if (nd->attrs[i].i % parts)
        return mx__node_fail(c->err, nd, MX_ERR_UNSUPPORTED, "%s %lld not divisible into %d parts (tp %d)",
                             name, (long long)nd->attrs[i].i, parts, c->tp);
      nd->attrs[i].i /= parts;
      nd->params = NULL;
      return MX_OK;
    }
  if (required)
    return mx__node_fail(c->err, nd, MX_ERR_UNSUPPORTED, "packed 3-D heads without a %s attribute", name);
  return MX_OK;
}

static mx_status attention(mx__shard_ctx *c, mx_node_id n) {
  mx_graph *g = c->g;
  const mx_node *nd = &g->nodes[n];
  int r = g->values[nd->inputs[0]].shape.rank;
  int head_axis = r == 4 ? 1 : 2;
  /* Keys and values whole on every rank: one kv-head (multi-query), which every query head reads. */
  const bool kv_whole =
      c->kind[nd->inputs[1]] != MX__SHARD_SPLIT && c->kind[nd->inputs[2]] != MX__SHARD_SPLIT &&
      (r == 4 ? g->values[nd->inputs[1]].shape.dims[1] == 1 : attr_int(nd, "kv_num_heads", 0) == 1);
  for (int i = 0; i < (kv_whole ? 1 : 3); i++)
    if (c->kind[nd->inputs[i]] != MX__SHARD_SPLIT || c->axis[nd->inputs[i]] != head_axis)
      return mx__node_fail(c->err, nd, MX_ERR_UNSUPPORTED, "its input '%s' is not split by heads",
                           g->values[nd->inputs[i]].name);
  /* Query heads one part per rank; key and value heads the same parts (fewer when shared). */
  const int kv_parts = kv_whole ? 1 : mx__shard_parts(c, nd->inputs[1]);
  if (mx__shard_parts(c, nd->inputs[0]) != c->tp ||
      (!kv_whole && mx__shard_parts(c, nd->inputs[2]) != kv_parts))
    return mx__node_fail(c->err, nd, MX_ERR_UNSUPPORTED, "its key and value heads are cut differently");
  if (nd->n_inputs > 3 && nd->inputs[3] != MX_NO_VALUE) {
    mx_value_id m = nd->inputs[3];
    mx_node_id e = g->values[m].producer;
    if (c->kind[m] != MX__SHARD_SPLIT && e != MX_NO_NODE && is_op(&g->nodes[e], "Expand")) {
      /* A mask expanded over the heads: Attention broadcasts it, so the rank reads it unexpanded
       * when the heads axis was 1 before the Expand. */
      mx_value_id src = g->nodes[e].inputs[0];
      const mx_shape *ss = &g->values[src].shape;
      if (c->kind[src] != MX__SHARD_SPLIT && ss->rank >= 1 && ss->rank <= 4 &&
          (ss->rank < 3 || ss->dims[ss->rank - 3] == 1)) {
        mx_status st = mx__shard_rewire_input(c, n, m, src);
        if (st != MX_OK) return st;
        nd = &g->nodes[n];
        m = src;
      }
    }
    const mx_shape *ms = &g->values[m].shape;
    if (c->kind[m] == MX__SHARD_SPLIT || (ms->rank == 4 && ms->dims[1] != 1))
      return mx__node_fail(c->err, nd, MX_ERR_UNSUPPORTED, "its mask '%s' differs per head",
                           g->values[m].name);
  }
  if (r == 3) {
    mx_status st = divide_attr(c, n, "q_num_heads", c->tp, true);
    if (st == MX_OK) st = divide_attr(c, n, "kv_num_heads", kv_parts, true);
    if (st != MX_OK) return st;
  }
  nd = &g->nodes[n];
  set_split(c, nd->outputs[0], head_axis);
  for (uint32_t k = 1; k < nd->n_outputs && k < 3; k++)
    if (nd->outputs[k] != MX_NO_VALUE && !kv_whole) set_split_parts(c, nd->outputs[k], 1, kv_parts);
  if (nd->n_outputs > 3 && nd->outputs[3] != MX_NO_VALUE && g->values[nd->outputs[3]].n_consumers)
    return mx__node_fail(c->err, nd, MX_ERR_UNSUPPORTED, "its qk output is read: mixrt cannot split it");
  c->report->n_attention++;
  return MX_OK;
}

/* Binary elementwise op with at least one split operand. */
static mx_status binary(mx__shard_ctx *c, mx_node_id n) {
  mx_graph *g = c->g;
  mx_value_id y = g->nodes[n].outputs[0];
  int ry = g->values[y].shape.rank, axis = -1, parts = 0;
  for (int i = 0; i < 2; i++) {
    mx_value_id v = g->nodes[n].inputs[i];
    if (c->kind[v] != MX__SHARD_SPLIT) continue;
    int a = c->axis[v] + ry - g->values[v].shape.rank;
    if (axis >= 0 && axis != a) return refuse(c, n, v, "its other operand is split on another axis");
    if (parts && parts != mx__shard_parts(c, v))
      return refuse(c, n, v, "its other operand is cut in other parts");
    axis = a;
    parts = mx__shard_parts(c, v);
  }
  for (int i = 0; i < 2; i++) {
    mx_value_id v = g->nodes[n].inputs[i];
    if (c->kind[v] == MX__SHARD_SPLIT) continue;
    const mx_shape *s = &g->values[v].shape;
    int a = axis - (ry - s->rank);
    if (a < 0 || s->dims[a] == 1) continue;
    mx_value_id split_in = g->nodes[n].inputs[1 - i];
    if (!is_const(g, v))
      return refuse(c, n, split_in, "its other operand is whole and not broadcast on that axis");
    mx_value_id out;
    mx_status st = mx__shard_slice_const(c, n, v, a, 1, parts, &out);
    if (st != MX_OK) return st;
  }
  set_split_parts(c, y, axis, parts);
  return MX_OK;
}

static mx_status rotary(mx__shard_ctx *c, mx_node_id n) {
  mx_graph *g = c->g;
  mx_value_id x = g->nodes[n].inputs[0];
  for (uint32_t k = 1; k < g->nodes[n].n_inputs; k++)
    if (g->nodes[n].inputs[k] != MX_NO_VALUE && c->kind[g->nodes[n].inputs[k]] == MX__SHARD_SPLIT)
      return refuse(c, n, g->nodes[n].inputs[k], "only its first input may be split");
  int r = g->values[x].shape.rank;
  if (r == 4 && c->axis[x] != 1) return refuse(c, n, x, "4-D rotary input must be split by heads (axis 1)");
  if (r == 3) {
    if (c->axis[x] != 2) return refuse(c, n, x, "3-D rotary input must be split on its packed heads");
    mx_status st = divide_attr(c, n, "num_heads", mx__shard_parts(c, x), true);
    if (st != MX_OK) return st;
  }
  set_split_parts(c, g->nodes[n].outputs[0], c->axis[x], mx__shard_parts(c, x));
  return MX_OK;
}

/* Shape of a split value: multiplied back by tp on the split axis, so whatever reads it sees the
 * whole model's shape (a cache length read off past_key, shape arithmetic of the exporter). */
static mx_status shape_of_split(mx__shard_ctx *c, mx_node_id n) {
  mx_graph *g = c->g;
  mx_value_id x = g->nodes[n].inputs[0], s = g->nodes[n].outputs[0];
  int r = g->values[x].shape.rank;
  int64_t start = attr_int(&g->nodes[n], "start", 0), end = attr_int(&g->nodes[n], "end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  if (start < 0) start = 0;
  if (end > r) end = r;
  if (end <= start) return MX_OK;
  int64_t k[MX_MAX_RANK];
  for (int64_t i = start; i < end; i++) k[i - start] = i == c->axis[x] ? mx__shard_parts(c, x) : 1;
  mx_value_id kv;
  mx_status st = mx__rw_new_const_for(g, n, MX_INT64, 1, (int64_t[]){end - start}, k, &kv);
  if (st != MX_OK) return mx__fail_err_from_graph(c, st);
  return mx__shard_mul_after(c, s, kv);
}

/* Split of a fused QKV projection's output into its sections: each section's size divided. */
static mx_status split(mx__shard_ctx *c, mx_node_id n, const uint8_t *role) {
  mx_graph *g = c->g;
  mx_value_id x = g->nodes[n].inputs[0];
  mx_node_id p = g->values[x].producer;
  int r = g->values[x].shape.rank;
  int64_t axis = attr_int(&g->nodes[n], "axis", 0);
  if (axis < 0) axis += r;
  if (p == MX_NO_NODE || p >= c->n_roles || role[p] != g->nodes[n].n_outputs || axis != c->axis[x] ||
      mx__shard_parts(c, x) != c->tp)
    return refuse(c, n, x, "only the Split of a fused projection into its sections is understood");
  if (g->nodes[n].n_inputs > 1 && g->nodes[n].inputs[1] != MX_NO_VALUE) {
    mx_value_id sv = g->nodes[n].inputs[1];
    const mx_tensor *t = is_const(g, sv) ? g->values[sv].data : NULL;
    if (!t || t->dtype != MX_INT64 || t->rank != 1 || t->dims[0] > 16)
      return refuse(c, n, x, "its split sizes are no constant");
    int64_t sizes[16];
    for (int64_t i = 0; i < t->dims[0]; i++) {
      sizes[i] = ((const int64_t *)t->data)[i];
      if (sizes[i] % c->tp) return refuse(c, n, x, "a split size is not divisible by tp");
      sizes[i] /= c->tp;
    }
    mx_value_id ns;
    mx_status st = mx__rw_new_const_for(g, n, MX_INT64, 1, t->dims, sizes, &ns);
    if (st == MX_OK) st = mx__shard_rewire_input(c, n, sv, ns);
    if (st != MX_OK) return st;
  } else if (mx__node_attr(&g->nodes[n], "split")) {
    mx_node *nd = &g->nodes[n];
    for (uint32_t i = 0; i < nd->n_attrs; i++) {
      if (strcmp(nd->attrs[i].name, "split") != 0) continue;
      int64_t *sizes =
          mx__arena_array(&g->arena, nd->attrs[i].count ? nd->attrs[i].count : 1, sizeof *sizes, 8);
      if (!sizes) return mx__fail_oom(c->err, "split sizes");
      for (size_t k = 0; k < nd->attrs[i].count; k++) sizes[k] = nd->attrs[i].ints[k] / c->tp;
      nd->attrs[i].ints = sizes;
      nd->params = NULL;
    }
  }
  for (uint32_t k = 0; k < g->nodes[n].n_outputs; k++)
    if (g->nodes[n].outputs[k] != MX_NO_VALUE) set_split(c, g->nodes[n].outputs[k], (int)axis);
  return MX_OK;
}

static mx_status visit(mx__shard_ctx *c, mx_node_id n, const uint8_t *role) {
  mx_graph *g = c->g;
  mx_status st = mx__shard_grow(c); /* values made by earlier rewrites (slices, targets) */
  if (st != MX_OK) return st;
  const mx_node *nd = &g->nodes[n];
  if (role[n] >= ROLE_COLUMN)
    return column_matmul(c, n, role[n], c->role_parts[n] ? c->role_parts[n] : c->tp);
  mx_value_id split_in = MX_NO_VALUE;
  for (uint32_t k = 0; k < nd->n_inputs; k++)
    if (nd->inputs[k] != MX_NO_VALUE && c->kind[nd->inputs[k]] == MX__SHARD_SPLIT) split_in = nd->inputs[k];
  if (split_in == MX_NO_VALUE) {
    if (is_weight_matmul(g, nd) && mx__rw_is_output(g, nd->outputs[0])) return vocab_head(c, n);
    if (is_op(nd, "Gather") && is_const(g, nd->inputs[0]) && g->values[nd->inputs[0]].data->rank == 2 &&
        attr_int(nd, "axis", 0) == 0 && (g->values[nd->inputs[1]].flags & MX_VALUE_INPUT))
      return vocab_embedding(c, n);
    return MX_OK;
  }
  if (is_op(nd, "Attention")) return attention(c, n);
  if (is_weight_matmul(g, nd) && nd->inputs[0] == split_in) return row_matmul(c, n, "projection");
  if (is_op(nd, "Reshape")) return reshape(c, n);
  if (is_op(nd, "Transpose")) return transpose(c, n);
  if (is_op(nd, "RotaryEmbedding")) return rotary(c, n);
  if (is_op(nd, "Shape")) return shape_of_split(c, n);
  if (is_op(nd, "Split")) return split(c, n, role);
  if (is_unary_elementwise(nd)) {
    set_split_parts(c, nd->outputs[0], c->axis[nd->inputs[0]], mx__shard_parts(c, nd->inputs[0]));
    return MX_OK;
  }
  if (is_binary_elementwise(nd)) return binary(c, n);
  char why[128];
  snprintf(why, sizeof why, "mixrt does not know how to shard a %s%s%s on it", nd->domain,
           nd->domain[0] ? "." : "", nd->op_type);
  return refuse(c, n, split_in, why);
}

/* --- the pass -------------------------------------------------------------------------------------- */

static mx_status run(mx__shard_ctx *c) {
  mx_graph *g = c->g;
  mx_status st = mx_graph_infer(g);
  if (st != MX_OK) return mx__fail_err_from_graph(c, st);
  if (mx_graph_opset(g, "mixrt") <= 0 && (st = mx_graph_set_opset(g, "mixrt", 1)) != MX_OK)
    return mx__fail_err_from_graph(c, st);
  if ((st = mx__shard_grow(c)) != MX_OK) return st;
  const mx_node_id *order;
  size_t n_order;
  if ((st = mx__graph_topo_order(g, &order, &n_order)) != MX_OK) return mx__fail_err_from_graph(c, st);
  mx_node_id *ord = malloc((n_order ? n_order : 1) * sizeof *ord);
  uint8_t *role = calloc(g->n_nodes ? g->n_nodes : 1, 1);
  c->role_parts = calloc(g->n_nodes ? g->n_nodes : 1, sizeof *c->role_parts);
  c->n_roles = g->n_nodes;
  mx_value_id *states = malloc((g->n_inputs ? g->n_inputs : 1) * sizeof *states);
  size_t n_states = 0;
  if (!ord || !role || !states || !c->role_parts) {
    st = mx__fail_oom(c->err, "the sharding pass");
    goto done;
  }
  memcpy(ord, order, n_order * sizeof *ord);
  for (size_t i = 0; i < n_order && st == MX_OK; i++)
    if (is_op(&g->nodes[ord[i]], "Attention")) st = find_attention(c, ord[i], role, states, &n_states);
  for (size_t i = 0; i < n_order && st == MX_OK; i++) {
    mx_node_id n = ord[i];
    if (role[n] || !is_weight_matmul(g, &g->nodes[n])) continue;
    if (find_mlp(c, n, role)) c->report->n_mlp++;
  }
  /* Rewriting adds nodes (collectives, masks) after the ones visited: only the original order is walked. */
  for (size_t i = 0; i < n_order && st == MX_OK; i++) st = visit(c, ord[i], role);
  if (st != MX_OK) goto done;
  for (size_t i = 0; i < g->n_outputs; i++) {
    mx_value_id v = g->outputs[i];
    if (c->kind[v] != MX__SHARD_SPLIT) continue;
    mx_node_id p = g->values[v].producer;
    if (p == MX_NO_NODE || !is_op(&g->nodes[p], "Attention") || g->values[v].producer_slot == 0) {
      st = mx__fail(c->err, MX_ERR_UNSUPPORTED,
                    "graph output '%s' would hold only this rank's part (split on axis %d): only the "
                    "attention caches may stay split",
                    g->values[v].name, (int)c->axis[v]);
      goto done;
    }
    c->report->n_states++;
  }
  for (size_t i = 0; i < c->n_slices; i++) {
    mx_value_id w = c->slices[i].orig;
    if (g->values[w].n_consumers) {
      st =
          mx__fail(c->err, MX_ERR_UNSUPPORTED,
                   "weight '%s' is used twice in incompatible ways: node '%s' takes a slice of it, node '%s' "
                   "reads it whole",
                   g->values[w].name, g->nodes[c->slices[i].first_user].name,
                   g->nodes[g->values[w].consumers[0]].name);
      goto done;
    }
  }
  for (size_t i = 0; i < n_states; i++) {
    mx_shape *s = &g->values[states[i]].shape;
    int parts = mx__shard_parts(c, states[i]);
    if (mx_dim_is_concrete(s->dims[1]) && s->dims[1] % parts == 0) s->dims[1] /= parts;
    c->report->n_states++;
  }
  size_t rn = 0, rv = 0;
  if ((st = mx__graph_remove_dead(g, &rn, &rv)) != MX_OK) {
    st = mx__fail_err_from_graph(c, st);
    goto done;
  }
  st = mx__shard_reinfer(c);
done:
  free(ord);
  free(role);
  free(states);
  return st;
}

mx_status mx__shard_graph(mx_graph *g, int tp, int rank, mx__shard_report *report, mx_error *err) {
  mx__shard_report local;
  if (!report) report = &local;
  memset(report, 0, sizeof *report);
  if (!g || tp < 1 || rank < 0 || rank >= tp)
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "shard: rank %d of tp %d is out of range", rank, tp);
  mx__shard_ctx c = {.g = g, .tp = tp, .rank = rank, .err = err, .report = report};
  mx_status st = run(&c);
  free(c.kind);
  free(c.axis);
  free(c.parts);
  free(c.role_parts);
  free(c.slices);
  if (report == &local) mx__shard_report_free(&local);
  return st;
}
