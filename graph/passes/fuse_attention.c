/* Rules recognizing the transformer blocks exporters write with primitive ops:
 *   attention: MatMul(Softmax(scale(MatMul(Q, Transpose(K))) [+ mask | Where(mask, ., -big)]), V)
 *              with 4-D heads [B, H, S, D] into Attention. K and V may be grouped-query heads
 *              repeated with Unsqueeze(2) -> Expand -> Reshape (the Attention op repeats them
 *              itself), and a cache written as Concat(past, new) on the sequence axis becomes the
 *              op's past_key/past_value inputs with the Concat results as present_key/value.
 *   rotary:    x * cos + Concat(-x[..., D/2:], x[..., :D/2]) * sin with cos/sin =
 *              Unsqueeze(Gather(table, position_ids), 1) over constant tables of full head
 *              width whose two halves are equal, into RotaryEmbedding (halves rotation) over the
 *              half-width tables. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph/ops/index_params.h"
#include "graph/ops/nn_params.h"
#include "graph/ops/shape_params.h"
#include "graph/passes/rewrite.h"

static const mx_shape *shape_of(const mx_graph *g, mx_value_id v) { return &g->values[v].shape; }

/* --- attention ---------------------------------------------------------------------------------- */

/* The value before a grouped-query repeat (Reshape(Expand(Unsqueeze(x, 2)))) of v, or v. */
static mx_value_id unrepeat(const mx_graph *g, mx_value_id v) {
  mx_node_id r = mx__rw_producer(g, v, "Reshape");
  if (r == MX_NO_NODE) return v;
  mx_node_id e = mx__rw_producer(g, g->nodes[r].inputs[0], "Expand");
  if (e == MX_NO_NODE) return v;
  mx_node_id u = mx__rw_producer(g, g->nodes[e].inputs[0], "Unsqueeze");
  if (u == MX_NO_NODE) return v;
  mx_value_id x = g->nodes[u].inputs[0];
  const mx_shape *xs = shape_of(g, x), *es = shape_of(g, g->nodes[e].outputs[0]), *rs = shape_of(g, v);
  const mx_shape *us = shape_of(g, g->nodes[u].outputs[0]);
  if (xs->rank != 4 || us->rank != 5 || es->rank != 5 || rs->rank != 4 || us->dims[2] != 1) return v;
  /* [B, KV, T, D] -> [B, KV, 1, T, D] -> [B, KV, rep, T, D] -> [B, KV * rep, T, D] */
  if (us->dims[0] != xs->dims[0] || us->dims[1] != xs->dims[1] || us->dims[3] != xs->dims[2] ||
      us->dims[4] != xs->dims[3])
    return v;
  if (es->dims[0] != xs->dims[0] || es->dims[1] != xs->dims[1] || es->dims[3] != xs->dims[2] ||
      es->dims[4] != xs->dims[3] || !mx_dim_is_concrete(es->dims[2]))
    return v;
  if (rs->dims[0] != xs->dims[0] || rs->dims[2] != xs->dims[2] || rs->dims[3] != xs->dims[3] ||
      !mx_dim_is_concrete(rs->dims[1]) || !mx_dim_is_concrete(xs->dims[1]) ||
      rs->dims[1] != xs->dims[1] * es->dims[2])
    return v;
  return x;
}

/* k is Concat(past, new) on axis 2 of a 4-D value: sets *past and *now. */
static bool cache_concat(const mx_graph *g, mx_value_id k, mx_value_id *past, mx_value_id *now) {
  mx_node_id c = mx__rw_producer(g, k, "Concat");
  if (c == MX_NO_NODE || g->nodes[c].n_inputs != 2 || !g->nodes[c].params) return false;
  const mx_concat_params *p = g->nodes[c].params;
  if (p->axis != 2 && p->axis != -2) return false;
  *past = g->nodes[c].inputs[0];
  *now = g->nodes[c].inputs[1];
  return shape_of(g, *past)->rank == 4;
}

typedef struct attn_match {
  mx_value_id q, k, v, mask, y;
  float scale;
  int64_t k_perm[4];                 /* K = Transpose(k, k_perm) */
  mx_value_id where_cond, where_neg; /* Where(cond, ., neg) before an additive mask, or none */
  mx_value_id where_scores;          /* the scores that Where passes through */
  bool where_inverted;               /* Where(cond, neg, .): cond marks the keys left out */
  bool where_only;                   /* the Where is the whole mask (no additive mask after it) */
  bool k_direct;                     /* k_perm is the identity: k is K itself */
} attn_match;

/* v = Where(cond, scores, very negative constant) (a causal mask, as GPT-2 exports write it):
 * records cond and the constant in m. */
static bool where_mask(const mx_graph *g, mx_value_id v, attn_match *m) {
  mx_node_id w = mx__rw_producer(g, v, "Where");
  double neg;
  if (w == MX_NO_NODE) return false;
  /* Where(keep, scores, neg) or, inverted, Where(drop, neg, scores). */
  int ns = 2;
  if (!mx__rw_const_scalar(g, g->nodes[w].inputs[2], &neg) || neg > -1e4) {
    ns = 1;
    if (!mx__rw_const_scalar(g, g->nodes[w].inputs[1], &neg) || neg > -1e4) return false;
  }
  mx_value_id sv = g->nodes[w].inputs[3 - ns];
  if (mx__rw_producer(g, sv, "Mul") == MX_NO_NODE && mx__rw_producer(g, sv, "Div") == MX_NO_NODE &&
      mx__rw_producer(g, sv, "MatMul") == MX_NO_NODE)
    return false;
  if (shape_of(g, g->nodes[w].inputs[0])->rank > 4 || g->values[g->nodes[w].inputs[0]].dtype != MX_BOOL)
    return false;
  m->where_cond = g->nodes[w].inputs[0];
  m->where_neg = g->nodes[w].inputs[ns];
  m->where_inverted = ns == 1;
  m->where_scores = sv;
  return true;
}

static bool match_attention(const mx_graph *g, const mx_node *m2, attn_match *m) {
  m->where_cond = m->where_neg = m->where_scores = MX_NO_VALUE;
  m->where_inverted = m->where_only = false;
  mx_node_id sm = mx__rw_producer(g, m2->inputs[0], "Softmax");
  if (sm == MX_NO_NODE) return false;
  const mx_softmax_params *sp = g->nodes[sm].params;
  mx_value_id s = g->nodes[sm].inputs[0];
  int32_t rank = shape_of(g, s)->rank;
  if (!sp || sp->log || rank != 4 || (sp->axis != -1 && sp->axis != 3)) return false;
  m->mask = MX_NO_VALUE;
  mx_node_id a = mx__rw_producer(g, s, "Add");
  if (a != MX_NO_NODE) {
    /* scores + mask: the mask is the operand that is not the scaled product. */
    for (int k = 0; k < 2 && m->mask == MX_NO_VALUE; k++) {
      mx_value_id o = g->nodes[a].inputs[k];
      if (mx__rw_producer(g, o, "Mul") != MX_NO_NODE || mx__rw_producer(g, o, "Div") != MX_NO_NODE ||
          mx__rw_producer(g, o, "MatMul") != MX_NO_NODE || where_mask(g, o, m)) {
        m->mask = g->nodes[a].inputs[1 - k];
        s = m->where_cond != MX_NO_VALUE ? m->where_scores : o;
      }
    }
    if (m->mask == MX_NO_VALUE || g->values[m->mask].dtype == MX_BOOL) return false;
  } else if (mx__rw_producer(g, s, "Where") != MX_NO_NODE) {
    if (!where_mask(g, s, m)) return false;
    m->mask = m->where_cond;
    m->where_only = true;
    s = m->where_scores;
  }
  m->scale = 1.0f;
  mx_node_id sc = mx__rw_producer(g, s, "Mul");
  double c;
  if (sc != MX_NO_NODE) {
    mx_value_id o = MX_NO_VALUE;
    for (int k = 0; k < 2 && o == MX_NO_VALUE; k++)
      if (mx__rw_const_scalar(g, g->nodes[sc].inputs[1 - k], &c)) o = g->nodes[sc].inputs[k];
    if (o == MX_NO_VALUE) return false;
    m->scale = (float)c;
    s = o;
  } else if ((sc = mx__rw_producer(g, s, "Div")) != MX_NO_NODE) {
    if (!mx__rw_const_scalar(g, g->nodes[sc].inputs[1], &c) || c == 0.0) return false;
    m->scale = (float)(1.0 / c);
    s = g->nodes[sc].inputs[0];
  }
  mx_node_id m1 = mx__rw_producer(g, s, "MatMul");
  if (m1 == MX_NO_NODE) return false;
  mx_node_id t = mx__rw_producer(g, g->nodes[m1].inputs[1], "Transpose");
  if (t == MX_NO_NODE) return false;
  const mx_transpose_params *tp = g->nodes[t].params;
  if (!tp || !tp->has_perm || tp->n_perm != 4) return false;
  /* K^T = Transpose(X, perm): K is X under perm with its last two entries swapped (exporters
   * fold the head split and the key transpose into one perm such as [0, 2, 3, 1]). */
  m->k_perm[0] = tp->perm[0], m->k_perm[1] = tp->perm[1], m->k_perm[2] = tp->perm[3],
  m->k_perm[3] = tp->perm[2];
  m->k_direct = m->k_perm[0] == 0 && m->k_perm[1] == 1 && m->k_perm[2] == 2 && m->k_perm[3] == 3;
  m->q = g->nodes[m1].inputs[0];
  m->k = m->k_direct ? unrepeat(g, g->nodes[t].inputs[0]) : g->nodes[t].inputs[0];
  m->v = unrepeat(g, m2->inputs[1]);
  m->y = m2->outputs[0];
  const mx_shape *qs = shape_of(g, m->q), *vs = shape_of(g, m->v);
  mx_shape kperm = *shape_of(g, m->k);
  if (kperm.rank != 4) return false;
  for (int d = 0; d < 4; d++) kperm.dims[d] = shape_of(g, m->k)->dims[m->k_perm[d]];
  const mx_shape *ks = &kperm;
  if (qs->rank != 4 || vs->rank != 4) return false;
  if (!mx_dim_is_concrete(qs->dims[1]) || !mx_dim_is_concrete(ks->dims[1]) || ks->dims[1] < 1 ||
      qs->dims[1] % ks->dims[1] || ks->dims[1] != vs->dims[1] || qs->dims[3] != ks->dims[3] ||
      ks->dims[2] != vs->dims[2])
    return false;
  mx_dtype dt = g->values[m->q].dtype;
  if (dt != MX_FLOAT32 || g->values[m->k].dtype != dt || g->values[m->v].dtype != dt) return false;
  if (m->mask != MX_NO_VALUE) {
    mx_dtype mt = g->values[m->mask].dtype;
    if ((mt != dt && mt != MX_BOOL) || shape_of(g, m->mask)->rank < 1 || shape_of(g, m->mask)->rank > 4)
      return false;
  }
  return true;
}

/* Whether value v is computed from node `target`'s outputs (seen: scratch flags per node). */
static bool reaches(const mx_graph *g, mx_value_id v, mx_node_id target, uint8_t *seen) {
  if (v == MX_NO_VALUE) return false;
  mx_node_id p = g->values[v].producer;
  if (p == MX_NO_NODE || seen[p]) return false;
  if (p == target) return true;
  seen[p] = 1;
  for (uint32_t k = 0; k < g->nodes[p].n_inputs; k++)
    if (reaches(g, g->nodes[p].inputs[k], target, seen)) return true;
  return false;
}

/* Whether any of the values ins[0..n) is computed from the producer of k or of v (then the
 * cache Concats cannot become outputs of a node reading them). */
static mx_status reads_cache(const mx_graph *g, const mx_value_id *ins, size_t n, mx_value_id k,
                             mx_value_id v, bool *out) {
  uint8_t *seen = calloc(g->n_nodes + 1, 1);
  if (!seen) return MX_ERR_OUT_OF_MEMORY;
  *out = false;
  for (int which = 0; which < 2 && !*out; which++) {
    memset(seen, 0, g->n_nodes + 1);
    mx_node_id t = g->values[which ? v : k].producer;
    for (size_t i = 0; i < n && !*out; i++) *out = reaches(g, ins[i], t, seen);
  }
  free(seen);
  return MX_OK;
}

/* Every full Shape of cat = Concat(past, now) on axis 2 becomes Shape(past) + Shape(now) *
 * [0, 0, 1, 0]: a causal mask sized by the key count (Range over Shape(cat)[2], as torch exports
 * write it) then no longer reads the Concat, which can become the Attention's present output. */
static mx_status unhook_cache_shapes(mx_graph *g, mx_value_id cat, mx_value_id past, mx_value_id now) {
  static const int64_t axis2[4] = {0, 0, 1, 0};
  const int64_t four = 4;
  for (size_t u = 0; u < g->values[cat].n_consumers; u++) {
    mx_node_id sn = g->values[cat].consumers[u];
    const mx_node *nd = &g->nodes[sn];
    if ((nd->flags & MX_NODE_DEAD) || nd->domain[0] || strcmp(nd->op_type, "Shape") != 0) continue;
    const mx_shape_params *sp = nd->params;
    if (!sp || sp->start != 0 || (sp->has_end && sp->end < 4)) continue;
    mx_value_id out = nd->outputs[0], sa, sb, c, prod;
    mx_status st = mx_graph_add_op(g, "Shape", &past, 1, NULL, 0, &sa);
    if (st == MX_OK) st = mx_graph_add_op(g, "Shape", &now, 1, NULL, 0, &sb);
    if (st == MX_OK) st = mx__rw_new_const_for(g, sn, MX_INT64, 1, &four, axis2, &c);
    if (st == MX_OK) st = mx_graph_add_op(g, "Mul", (mx_value_id[]){sb, c}, 2, NULL, 0, &prod);
    if (st == MX_OK) st = mx__rw_replace(g, out, "Add", (mx_value_id[]){sa, prod}, 2, NULL, 0, NULL);
    if (st != MX_OK) return st;
    u = (size_t)-1; /* the consumer list changed: look again from the start */
  }
  return MX_OK;
}

static mx_status run_attention(mx_graph *g, size_t *hits) {
  size_t n = g->n_nodes;
  for (size_t i = 0; i < n; i++) {
    const mx_node *nd = &g->nodes[i];
    if ((nd->flags & MX_NODE_DEAD) || nd->domain[0] || strcmp(nd->op_type, "MatMul") != 0) continue;
    attn_match m;
    if (!match_attention(g, nd, &m)) continue;
    mx_attr a[2] = {mx_attr_float("scale", m.scale), mx_attr_int("is_causal", 0)};
    mx_value_id pk, nk, pv, nv;
    mx_status st;
    if (m.where_only && m.where_inverted) {
      /* The op's boolean mask marks the keys taken: the negation of Where's condition. */
      mx_node_id nn = mx__rw_producer(g, m.where_cond, "Not");
      if (nn != MX_NO_NODE)
        m.mask = g->nodes[nn].inputs[0];
      else if ((st = mx_graph_add_op(g, "Not", &m.where_cond, 1, NULL, 0, &m.mask)) != MX_OK)
        return st;
    } else if (m.where_cond != MX_NO_VALUE && !m.where_only) {
      /* Where(c, s, neg) + am == s + Where(c, am, neg + am): one additive mask (operands of the
       * Where swapped when it is inverted). */
      mx_value_id t, wm;
      if ((st = mx_graph_add_op(g, "Add", (mx_value_id[]){m.where_neg, m.mask}, 2, NULL, 0, &t)) != MX_OK)
        return st;
      mx_value_id w3[3] = {m.where_cond, m.where_inverted ? t : m.mask, m.where_inverted ? m.mask : t};
      if ((st = mx_graph_add_op(g, "Where", w3, 3, NULL, 0, &wm)) != MX_OK) return st;
      m.mask = wm;
    }
    if (!m.k_direct) {
      /* K in [B, H, T, D] order, from the value the score transpose read. */
      mx_attr pa = mx_attr_ints("perm", m.k_perm, 4);
      mx_node_desc d = {
          .op_type = "Transpose", .inputs = &m.k, .n_inputs = 1, .attrs = &pa, .n_attrs = 1, .n_outputs = 1};
      mx_value_id kt;
      if ((st = mx_graph_add_node(g, &d, &kt)) != MX_OK) return st;
      g->values[kt].dtype = g->values[m.k].dtype;
      m.k = kt;
    }
    bool cache = cache_concat(g, m.k, &pk, &nk) && cache_concat(g, m.v, &pv, &nv) &&
                 shape_of(g, nk)->rank == 4 && shape_of(g, nv)->rank == 4;
    if (cache) {
      mx_status us = unhook_cache_shapes(g, m.k, pk, nk);
      if (us == MX_OK) us = unhook_cache_shapes(g, m.v, pv, nv);
      if (us != MX_OK) return us;
      bool cyc;
      mx_value_id ins[6] = {m.q, nk, nv, m.mask, pk, pv};
      if (reads_cache(g, ins, 6, m.k, m.v, &cyc) != MX_OK)
        return mx__graph_fail(g, MX_ERR_OUT_OF_MEMORY, "out of memory matching attention");
      cache = !cyc;
    }
    if (cache) {
      /* The cache Concats become the op's present outputs. */
      mx_value_id ins[6] = {m.q, nk, nv, m.mask, pk, pv}, outs[3] = {m.y, m.k, m.v};
      st = mx__rw_replace_n(g, outs, 3, "Attention", ins, 6, a, 2);
    } else {
      mx_value_id ins[4] = {m.q, m.k, m.v, m.mask};
      st = mx__rw_replace(g, m.y, "Attention", ins, m.mask == MX_NO_VALUE ? 3 : 4, a, 2, NULL);
    }
    if (st != MX_OK) return st;
    (*hits)++;
  }
  return MX_OK;
}

const mx__rw_rule mx__rule_attention = {
    .name = "attention",
    .what =
        "MatMul / scale / (+mask | Where) / Softmax / MatMul over 4-D heads into Attention (cache Concats "
        "into past/present)",
    .by_default = true,
    .run = run_attention,
};

/* --- rotary ------------------------------------------------------------------------------------- */

/* Slice of x over its last axis from `from` to `to` (to may be any end past the dim). */
static bool last_axis_slice(const mx_graph *g, mx_value_id v, mx_value_id x, int64_t from, int64_t to,
                            int64_t dim) {
  mx_node_id s = mx__rw_producer(g, v, "Slice");
  if (s == MX_NO_NODE) return false;
  const mx_node *n = &g->nodes[s];
  if (n->inputs[0] != x || n->n_inputs < 4) return false;
  const mx_tensor *st = g->values[n->inputs[1]].data, *en = g->values[n->inputs[2]].data,
                  *ax = g->values[n->inputs[3]].data;
  if (!st || !en || !ax || st->dtype != MX_INT64 || en->dtype != MX_INT64 || ax->dtype != MX_INT64)
    return false;
  int64_t cnt;
  if (!mx_tensor_numel(st, &cnt) || cnt != 1) return false;
  if (n->n_inputs > 4 && n->inputs[4] != MX_NO_VALUE && !mx__rw_const_is(g, n->inputs[4], 1.0, 0.0))
    return false;
  int32_t rank = shape_of(g, x)->rank;
  int64_t a = ((const int64_t *)ax->data)[0], b0 = ((const int64_t *)st->data)[0],
          e0 = ((const int64_t *)en->data)[0];
  if (a != -1 && a != rank - 1) return false;
  if (b0 != from) return false;
  return to >= dim ? e0 >= dim : e0 == to;
}

/* v = Unsqueeze(Gather(table, pos), [1]) with a constant float32 table [P, D]: sets *table, *pos. */
static bool gathered_table(const mx_graph *g, mx_value_id v, mx_value_id *table, mx_value_id *pos) {
  mx_node_id u = mx__rw_producer(g, v, "Unsqueeze");
  if (u == MX_NO_NODE || g->nodes[u].n_inputs != 2) return false;
  const mx_tensor *ax = g->values[g->nodes[u].inputs[1]].data;
  if (!ax || ax->dtype != MX_INT64 || ax->rank != 1 || ax->dims[0] != 1 ||
      ((const int64_t *)ax->data)[0] != 1)
    return false;
  mx_node_id ga = mx__rw_producer(g, g->nodes[u].inputs[0], "Gather");
  if (ga == MX_NO_NODE) return false;
  const mx_gather_params *gp = g->nodes[ga].params;
  if (!gp || gp->axis != 0) return false;
  *table = g->nodes[ga].inputs[0];
  *pos = g->nodes[ga].inputs[1];
  const mx_tensor *t = g->values[*table].data;
  return t && t->dtype == MX_FLOAT32 && t->rank == 2 && shape_of(g, *pos)->rank == 2;
}

/* A [P, D/2] constant holding the first half of the table's columns, when both halves are equal;
 * cached per table so every layer shares one. */
typedef struct half_cache {
  mx_value_id full[16], half[16];
  size_t n;
} half_cache;

static mx_status half_table(mx_graph *g, half_cache *hc, mx_value_id full, mx_value_id *out) {
  for (size_t k = 0; k < hc->n; k++)
    if (hc->full[k] == full) {
      *out = hc->half[k];
      return MX_OK;
    }
  *out = MX_NO_VALUE;
  const mx_tensor *t = g->values[full].data;
  int64_t P = t->dims[0], D = t->dims[1], h = D / 2;
  if (D % 2) return MX_OK;
  const float *src = t->data;
  for (int64_t p = 0; p < P; p++)
    for (int64_t i = 0; i < h; i++)
      if (src[p * D + i] != src[p * D + h + i]) return MX_OK;
  float *d = malloc((size_t)(P * h) * sizeof *d + 1);
  if (!d) return mx__graph_fail(g, MX_ERR_OUT_OF_MEMORY, "out of memory building a rotary table");
  for (int64_t p = 0; p < P; p++) memcpy(d + p * h, src + p * D, (size_t)h * sizeof *d);
  mx_status st = mx__rw_new_const(g, "rotary_half_table", MX_FLOAT32, 2, (int64_t[]){P, h}, d, out);
  free(d);
  if (st == MX_OK && hc->n < 16) {
    hc->full[hc->n] = full;
    hc->half[hc->n++] = *out;
  }
  return st;
}

/* Mul node `m`: the operand that is `want` and the other one. */
static bool mul_with(const mx_graph *g, mx_value_id v, mx_value_id *a, mx_value_id *b) {
  mx_node_id m = mx__rw_producer(g, v, "Mul");
  if (m == MX_NO_NODE) return false;
  *a = g->nodes[m].inputs[0];
  *b = g->nodes[m].inputs[1];
  return true;
}

/* rot = Concat(Neg(x[..., h:]), x[..., :h]) on the last axis: sets *x. */
static bool rotate_half_of(const mx_graph *g, mx_value_id rot, mx_value_id *x) {
  mx_node_id c = mx__rw_producer(g, rot, "Concat");
  if (c == MX_NO_NODE || g->nodes[c].n_inputs != 2 || !g->nodes[c].params) return false;
  const mx_concat_params *cp = g->nodes[c].params;
  mx_node_id ng = mx__rw_producer(g, g->nodes[c].inputs[0], "Neg");
  if (ng == MX_NO_NODE) return false;
  mx_node_id s = mx__rw_producer(g, g->nodes[ng].inputs[0], "Slice");
  if (s == MX_NO_NODE) return false;
  *x = g->nodes[s].inputs[0];
  const mx_shape *xs = shape_of(g, *x);
  if (xs->rank != 4 || !mx_dim_is_concrete(xs->dims[3]) || xs->dims[3] % 2) return false;
  if (cp->axis != -1 && cp->axis != 3) return false;
  int64_t D = xs->dims[3], h = D / 2;
  return last_axis_slice(g, g->nodes[ng].inputs[0], *x, h, D, D) &&
         last_axis_slice(g, g->nodes[c].inputs[1], *x, 0, h, D);
}

static mx_status run_rotary(mx_graph *g, size_t *hits) {
  half_cache hc = {.n = 0};
  size_t n = g->n_nodes;
  for (size_t i = 0; i < n; i++) {
    const mx_node *nd = &g->nodes[i];
    if ((nd->flags & MX_NODE_DEAD) || nd->domain[0] || strcmp(nd->op_type, "Add") != 0 || nd->n_inputs != 2)
      continue;
    mx_value_id y = nd->outputs[0];
    for (int order = 0; order < 2; order++) {
      mx_value_id a0, a1, b0, b1, x = MX_NO_VALUE, cosv = MX_NO_VALUE, sinv = MX_NO_VALUE, rot = MX_NO_VALUE;
      if (!mul_with(g, nd->inputs[order], &a0, &a1) || !mul_with(g, nd->inputs[1 - order], &b0, &b1))
        continue;
      /* Second product: rotate_half(x) * sin in either order. */
      mx_value_id xr;
      if (rotate_half_of(g, b0, &xr))
        rot = b0, sinv = b1;
      else if (rotate_half_of(g, b1, &xr))
        rot = b1, sinv = b0;
      else
        continue;
      if (a0 == xr)
        x = a0, cosv = a1;
      else if (a1 == xr)
        x = a1, cosv = a0;
      else
        continue;
      (void)rot;
      mx_value_id ct, cpos, stbl, spos;
      if (!gathered_table(g, cosv, &ct, &cpos) || !gathered_table(g, sinv, &stbl, &spos) || cpos != spos)
        continue;
      const mx_shape *xs = shape_of(g, x), *ps = shape_of(g, cpos);
      if (g->values[x].dtype != MX_FLOAT32 || g->values[ct].data->dims[1] != xs->dims[3] ||
          g->values[stbl].data->dims[1] != xs->dims[3] || ps->dims[0] != xs->dims[0] ||
          ps->dims[1] != xs->dims[2] || !mx__rw_same_shape(xs, shape_of(g, y)))
        continue;
      mx_value_id hcos, hsin;
      mx_status st = half_table(g, &hc, ct, &hcos);
      if (st == MX_OK && hcos != MX_NO_VALUE)
        st = half_table(g, &hc, stbl, &hsin);
      else
        hsin = MX_NO_VALUE;
      if (st != MX_OK) return st;
      if (hcos == MX_NO_VALUE || hsin == MX_NO_VALUE) continue;
      mx_attr a = mx_attr_int("interleaved", 0);
      st = mx__rw_replace(g, y, "RotaryEmbedding", (mx_value_id[]){x, hcos, hsin, cpos}, 4, &a, 1, NULL);
      if (st != MX_OK) return st;
      (*hits)++;
      break;
    }
  }
  return MX_OK;
}

const mx__rw_rule mx__rule_rotary = {
    .name = "rotary",
    .what = "x * cos + Concat(Neg(Slice), Slice) * sin over Gather-ed tables into RotaryEmbedding",
    .by_default = true,
    .run = run_rotary,
};
