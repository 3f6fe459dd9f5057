/* Rules recognizing normalizations written with primitive ops:
 *   layernorm: ReduceMean -> Sub -> Pow(2) | Mul(d, d) -> ReduceMean -> Add(eps) -> Sqrt -> Div
 *              [-> Mul(gamma)] [-> Add(beta)] (what torch exports below opset 17) into
 *              LayerNormalization;
 *   rmsnorm:   Pow(x, 2) | Mul(x, x) -> ReduceMean -> Add(eps) -> Sqrt -> Div(x, .) or
 *              Reciprocal | Div(1, .) -> Mul(x, .), [-> Mul(gamma)] into RMSNormalization.
 * Both need the reductions to cover the trailing axes of x with keepdims, a constant scalar
 * epsilon, and constant gamma / beta holding one value per element of the normalized dims. */
#include <stdlib.h>
#include <string.h>

#include "graph/ops/reduce_params.h"
#include "graph/passes/rewrite.h"

/* When v = ReduceMean(x) over the trailing axes [first, rank) of x with keepdims, sets *x and
 * *first (negative: counted from the end). */
static bool trailing_mean(const mx_graph *g, mx_value_id v, mx_value_id *x, int32_t *first) {
  mx_node_id id = mx__rw_producer(g, v, "ReduceMean");
  if (id == MX_NO_NODE) return false;
  const mx_node *n = &g->nodes[id];
  const mx_reduce_params *p = n->params;
  if (!p || !p->keepdims) return false;
  int32_t rank = g->values[n->inputs[0]].shape.rank;
  if (rank < 1) return false;
  int64_t axes[MX_MAX_RANK];
  int32_t na = 0;
  if (p->axes_from_input) {
    if (n->n_inputs < 2 || n->inputs[1] == MX_NO_VALUE) return false;
    const mx_tensor *t = g->values[n->inputs[1]].data;
    int64_t cnt;
    if (!t || t->dtype != MX_INT64 || !mx_tensor_numel(t, &cnt) || cnt < 1 || cnt > MX_MAX_RANK) return false;
    for (int64_t k = 0; k < cnt; k++) axes[na++] = ((const int64_t *)t->data)[k];
  } else {
    if (p->n_axes < 1) return false;
    for (int32_t k = 0; k < p->n_axes; k++) axes[na++] = p->axes[k];
  }
  /* The axes must be exactly {rank - na, ..., rank - 1}. */
  bool seen[MX_MAX_RANK] = {false};
  for (int32_t k = 0; k < na; k++) {
    int64_t a = axes[k] < 0 ? axes[k] + rank : axes[k];
    if (a < rank - na || a >= rank || seen[a]) return false;
    seen[a] = true;
  }
  *x = n->inputs[0];
  *first = -na;
  return true;
}

/* v = Pow(x, 2) or Mul(x, x): sets *x. */
static bool square_of(const mx_graph *g, mx_value_id v, mx_value_id *x) {
  mx_node_id id = mx__rw_producer(g, v, "Pow");
  if (id != MX_NO_NODE && mx__rw_const_is(g, g->nodes[id].inputs[1], 2.0, 0.0)) {
    *x = g->nodes[id].inputs[0];
    return true;
  }
  id = mx__rw_producer(g, v, "Mul");
  if (id != MX_NO_NODE && g->nodes[id].inputs[0] == g->nodes[id].inputs[1]) {
    *x = g->nodes[id].inputs[0];
    return true;
  }
  return false;
}

/* v = Sqrt(Add(var, eps)) with eps a constant scalar: sets *var and *eps. */
static bool sqrt_plus_eps(const mx_graph *g, mx_value_id v, mx_value_id *var, double *eps) {
  mx_node_id s = mx__rw_producer(g, v, "Sqrt");
  if (s == MX_NO_NODE) return false;
  mx_node_id a = mx__rw_producer(g, g->nodes[s].inputs[0], "Add");
  if (a == MX_NO_NODE) return false;
  const mx_node *an = &g->nodes[a];
  for (int k = 0; k < 2; k++) {
    if (mx__rw_const_scalar(g, an->inputs[1 - k], eps)) {
      *var = an->inputs[k];
      return *eps >= 0.0;
    }
  }
  return false;
}

/* Single consumer of v, when that consumer is a default-domain `op` node. */
static mx_node_id sole_consumer(const mx_graph *g, mx_value_id v, const char *op) {
  if (!mx__rw_single_use(g, v)) return MX_NO_NODE;
  mx_node_id c = g->values[v].consumers[0];
  const mx_node *n = &g->nodes[c];
  return !n->domain[0] && strcmp(n->op_type, op) == 0 ? c : MX_NO_NODE;
}

/* If the single reader of *y is `op` (Mul or Add) with a constant other operand holding one
 * value per element of x's trailing -first dims, builds that constant reshaped to exactly those
 * dims in *param and moves *y to the reader's output. */
static mx_status affine_step(mx_graph *g, mx_value_id x, int32_t first, const char *op, mx_value_id *y,
                             mx_value_id *param, bool *found) {
  *found = false;
  mx_node_id c = sole_consumer(g, *y, op);
  if (c == MX_NO_NODE) return MX_OK;
  mx_value_id o = mx__rw_other_input(&g->nodes[c], *y);
  if (o == MX_NO_VALUE || !(g->values[o].flags & MX_VALUE_CONST) || !g->values[o].data) return MX_OK;
  const mx_tensor *t = g->values[o].data;
  const mx_shape *xs = &g->values[x].shape;
  if (t->dtype != g->values[x].dtype || xs->rank < -first) return MX_OK;
  int64_t dims[MX_MAX_RANK], want = 1, have;
  int32_t nd = -first;
  for (int32_t k = 0; k < nd; k++) {
    dims[k] = xs->dims[xs->rank - nd + k];
    if (!mx_dim_is_concrete(dims[k])) return MX_OK;
    want *= dims[k];
  }
  if (!mx_tensor_numel(t, &have) || have != want) return MX_OK;
  /* Its dims must be the normalized dims, possibly with leading 1s (so it broadcasts alike). */
  for (int32_t k = 0; k < t->rank; k++) {
    int32_t xi = xs->rank - t->rank + k;
    int64_t xd = xi >= 0 ? xs->dims[xi] : 1;
    if (t->dims[k] != 1 && t->dims[k] != xd) return MX_OK;
    if (t->dims[k] != xd && xi >= xs->rank - nd) return MX_OK;
  }
  mx_status st =
      mx__rw_new_const(g, op[0] == 'M' ? "norm_scale" : "norm_bias", t->dtype, nd, dims, t->data, param);
  if (st != MX_OK) return st;
  *y = g->nodes[c].outputs[0];
  *found = true;
  return MX_OK;
}

/* A constant of ones with x's trailing -first dims (an RMS/LayerNormalization needs a scale). */
static mx_status ones_like_tail(mx_graph *g, mx_value_id x, int32_t first, mx_value_id *out, bool *ok) {
  const mx_shape *xs = &g->values[x].shape;
  mx_dtype dt = g->values[x].dtype;
  int64_t dims[MX_MAX_RANK], n = 1;
  int32_t nd = -first;
  *ok = false;
  for (int32_t k = 0; k < nd; k++) {
    dims[k] = xs->dims[xs->rank - nd + k];
    if (!mx_dim_is_concrete(dims[k])) return MX_OK;
    n *= dims[k];
  }
  if (dt != MX_FLOAT32 && dt != MX_FLOAT64) return MX_OK;
  size_t es = dt == MX_FLOAT64 ? 8 : 4;
  void *d = malloc((size_t)n * es + 1);
  if (!d) return mx__graph_fail(g, MX_ERR_OUT_OF_MEMORY, "out of memory building a norm scale");
  for (int64_t i = 0; i < n; i++) {
    if (dt == MX_FLOAT64)
      ((double *)d)[i] = 1.0;
    else
      ((float *)d)[i] = 1.0f;
  }
  mx_status st = mx__rw_new_const(g, "norm_scale", dt, nd, dims, d, out);
  free(d);
  *ok = st == MX_OK;
  return st;
}

static bool is_float(mx_dtype dt) {
  return dt == MX_FLOAT32 || dt == MX_FLOAT64 || dt == MX_FLOAT16 || dt == MX_BFLOAT16;
}

/* Finishes a match: optional Mul(gamma) then (LayerNormalization only) Add(beta), then the
 * fused node replaces the last value. */
static mx_status emit(mx_graph *g, const char *op, mx_value_id x, mx_value_id y, int32_t first, double eps,
                      bool *hit) {
  mx_value_id gamma = MX_NO_VALUE, beta = MX_NO_VALUE;
  bool found;
  mx_status st = affine_step(g, x, first, "Mul", &y, &gamma, &found);
  if (st == MX_OK && strcmp(op, "LayerNormalization") == 0)
    st = affine_step(g, x, first, "Add", &y, &beta, &found);
  if (st == MX_OK && gamma == MX_NO_VALUE) st = ones_like_tail(g, x, first, &gamma, &found);
  if (st != MX_OK || gamma == MX_NO_VALUE) return st;
  mx_value_id ins[3] = {x, gamma, beta};
  mx_attr attrs[2] = {mx_attr_int("axis", first), mx_attr_float("epsilon", (float)eps)};
  st = mx__rw_replace(g, y, op, ins, beta == MX_NO_VALUE ? 2 : 3, attrs, 2, NULL);
  if (st == MX_OK) *hit = true;
  return st;
}

/* --- layernorm ---------------------------------------------------------------------------------- */

static mx_status match_layernorm(mx_graph *g, mx_node_id div, bool *hit) {
  const mx_node *n = &g->nodes[div];
  mx_value_id d = n->inputs[0], var, sq, x, x2, y = n->outputs[0];
  double eps;
  int32_t first, first2;
  if (!sqrt_plus_eps(g, n->inputs[1], &var, &eps) || !trailing_mean(g, var, &sq, &first)) return MX_OK;
  if (!square_of(g, sq, &x2) || x2 != d) return MX_OK;
  mx_node_id sub = mx__rw_producer(g, d, "Sub");
  if (sub == MX_NO_NODE) return MX_OK;
  x = g->nodes[sub].inputs[0];
  if (!trailing_mean(g, g->nodes[sub].inputs[1], &x2, &first2) || x2 != x || first2 != first) return MX_OK;
  if (!is_float(g->values[x].dtype) || g->values[y].dtype != g->values[x].dtype) return MX_OK;
  if (!mx__rw_same_shape(&g->values[x].shape, &g->values[y].shape)) return MX_OK;
  return emit(g, "LayerNormalization", x, y, first, eps, hit);
}

static mx_status run_layernorm(mx_graph *g, size_t *hits) {
  size_t n = g->n_nodes;
  for (size_t i = 0; i < n; i++) {
    const mx_node *nd = &g->nodes[i];
    if ((nd->flags & MX_NODE_DEAD) || nd->domain[0] || strcmp(nd->op_type, "Div") != 0) continue;
    bool hit = false;
    mx_status st = match_layernorm(g, (mx_node_id)i, &hit);
    if (st != MX_OK) return st;
    if (hit) (*hits)++;
  }
  return MX_OK;
}

const mx__rw_rule mx__rule_layernorm = {
    .name = "layernorm",
    .what = "LayerNormalization from ReduceMean / Sub / Pow / ReduceMean / Add / Sqrt / Div [/ Mul / Add]",
    .by_default = true,
    .run = run_layernorm,
};

/* --- rmsnorm ------------------------------------------------------------------------------------ */

/* v = 1 / r as Reciprocal(r) or Div(1, r): sets *r. */
static bool reciprocal_of(const mx_graph *g, mx_value_id v, mx_value_id *r) {
  mx_node_id id = mx__rw_producer(g, v, "Reciprocal");
  if (id != MX_NO_NODE) {
    *r = g->nodes[id].inputs[0];
    return true;
  }
  id = mx__rw_producer(g, v, "Div");
  if (id != MX_NO_NODE && mx__rw_const_is(g, g->nodes[id].inputs[0], 1.0, 0.0)) {
    *r = g->nodes[id].inputs[1];
    return true;
  }
  return false;
}

/* Node n (Div or Mul) is x / sqrt(mean(x^2) + eps) or x * (1 / sqrt(...)): sets x, first, eps. */
static bool rms_core(const mx_graph *g, const mx_node *n, mx_value_id *x, int32_t *first, double *eps) {
  mx_value_id cand[2], denom[2];
  int nc = 0;
  if (strcmp(n->op_type, "Div") == 0) {
    cand[0] = n->inputs[0];
    denom[0] = n->inputs[1];
    nc = 1;
  } else {
    for (int k = 0; k < 2; k++) {
      mx_value_id r;
      if (reciprocal_of(g, n->inputs[1 - k], &r)) {
        cand[nc] = n->inputs[k];
        denom[nc++] = r;
      }
    }
  }
  for (int k = 0; k < nc; k++) {
    mx_value_id var, sq, xx;
    if (!sqrt_plus_eps(g, denom[k], &var, eps) || !trailing_mean(g, var, &sq, first)) continue;
    if (!square_of(g, sq, &xx) || xx != cand[k]) continue;
    *x = xx;
    return true;
  }
  return false;
}

static mx_status run_rmsnorm(mx_graph *g, size_t *hits) {
  size_t n = g->n_nodes;
  for (size_t i = 0; i < n; i++) {
    const mx_node *nd = &g->nodes[i];
    if ((nd->flags & MX_NODE_DEAD) || nd->domain[0] || nd->n_inputs != 2) continue;
    if (strcmp(nd->op_type, "Div") != 0 && strcmp(nd->op_type, "Mul") != 0) continue;
    mx_value_id x, y = nd->outputs[0];
    int32_t first;
    double eps;
    if (!rms_core(g, nd, &x, &first, &eps)) continue;
    if (!is_float(g->values[x].dtype) || g->values[y].dtype != g->values[x].dtype) continue;
    if (!mx__rw_same_shape(&g->values[x].shape, &g->values[y].shape)) continue;
    bool hit = false;
    mx_status st = emit(g, "RMSNormalization", x, y, first, eps, &hit);
    if (st != MX_OK) return st;
    if (hit) (*hits)++;
  }
  return MX_OK;
}

const mx__rw_rule mx__rule_rmsnorm = {
    .name = "rmsnorm",
    .what = "RMSNormalization from Pow / ReduceMean / Add / Sqrt / (Div | Reciprocal / Mul) [/ Mul]",
    .by_default = true,
    .run = run_rmsnorm,
};
