/* Rule bn_fold: an inference-mode spatial BatchNormalization after a Conv, ConvTranspose or
 * Gemm whose weights are constants is folded into those weights and the bias:
 *   y = (conv(x) - mean) * s + beta,  s = scale / sqrt(var + eps)
 *     = conv'(x) with W'[channel] = W[channel] * s and b' = (b - mean) * s + beta.
 * float32 and float64 weights; the folded constants are computed in double. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/ops/conv_params.h"
#include "graph/ops/linalg_params.h"
#include "graph/ops/norm_params.h"
#include "graph/passes/rewrite.h"

static double get(const mx_tensor *t, int64_t i) {
  return t->dtype == MX_FLOAT64 ? ((const double *)t->data)[i] : ((const float *)t->data)[i];
}
static void put(mx_dtype dt, void *data, int64_t i, double v) {
  if (dt == MX_FLOAT64)
    ((double *)data)[i] = v;
  else
    ((float *)data)[i] = (float)v;
}

/* A constant float32/float64 tensor of dtype dt read by v, or NULL. */
static const mx_tensor *const_of(const mx_graph *g, mx_value_id v, mx_dtype dt) {
  if (v == MX_NO_VALUE || !(g->values[v].flags & MX_VALUE_CONST)) return NULL;
  const mx_tensor *t = g->values[v].data;
  return t && t->dtype == dt && t->data ? t : NULL;
}

static int64_t numel(const mx_tensor *t) {
  int64_t n = 0;
  return mx_tensor_numel(t, &n) ? n : -1;
}

/* Channel scale s[c] and shift h[c] of the BatchNormalization: y = x * s + h. */
static bool bn_affine(const mx_graph *g, const mx_node *bn, mx_dtype dt, int64_t channels, double *s,
                      double *h) {
  const mx_tensor *sc = const_of(g, bn->inputs[1], dt), *b = const_of(g, bn->inputs[2], dt);
  const mx_tensor *m = const_of(g, bn->inputs[3], dt), *v = const_of(g, bn->inputs[4], dt);
  if (!sc || !b || !m || !v) return false;
  if (numel(sc) != channels || numel(b) != channels || numel(m) != channels || numel(v) != channels)
    return false;
  const mx_batchnorm_params *p = bn->params;
  for (int64_t c = 0; c < channels; c++) {
    s[c] = get(sc, c) / sqrt(get(v, c) + (double)p->epsilon);
    h[c] = get(b, c) - get(m, c) * s[c];
  }
  return true;
}

/* Builds W' and b' for producer nd (Conv, ConvTranspose or Gemm) and the BN's s, h. */
static bool fold_weights(const mx_graph *g, const mx_node *nd, mx_dtype dt, int64_t channels, const double *s,
                         const double *h, void *w_out, void *b_out, double *gemm_beta) {
  bool gemm = strcmp(nd->op_type, "Gemm") == 0, convt = strcmp(nd->op_type, "ConvTranspose") == 0;
  const mx_tensor *w = const_of(g, nd->inputs[1], dt);
  int64_t nw = numel(w);
  if (!w || nw < 0) return false;
  if (gemm) {
    const mx_gemm_params *gp = nd->params;
    if (w->rank != 2) return false;
    int64_t n_cols = w->dims[1];
    for (int64_t i = 0; i < nw; i++) {
      int64_t c = gp->trans_b ? i / n_cols : i % n_cols;
      put(dt, w_out, i, get(w, i) * s[c]);
    }
    /* y = alpha*AB + beta*C: the bias term folds to (beta*C) * s + h, so beta becomes 1. */
    const mx_tensor *cb = nd->n_inputs > 2 ? const_of(g, nd->inputs[2], dt) : NULL;
    if (nd->n_inputs > 2 && nd->inputs[2] != MX_NO_VALUE && !cb) return false;
    int64_t nc = cb ? numel(cb) : 0;
    if (cb && nc != 1 && nc != channels) return false;
    if (cb && cb->rank == 2 && cb->dims[0] != 1) return false;
    for (int64_t c = 0; c < channels; c++) {
      double bias = cb ? gp->beta * get(cb, nc == 1 ? 0 : c) : 0.0;
      put(dt, b_out, c, bias * s[c] + h[c]);
    }
    *gemm_beta = 1.0;
    return true;
  }
  const mx_conv_params *cp = nd->params;
  if (w->rank < 3) return false;
  int64_t per_row = nw / w->dims[0]; /* elements behind one index of dim 0 */
  if (!convt) {
    if (w->dims[0] != channels) return false;
    for (int64_t i = 0; i < nw; i++) put(dt, w_out, i, get(w, i) * s[i / per_row]);
  } else {
    /* W is [C_in, C_out / group, k...]; output channel = group index * (C_out/group) + j. */
    int64_t group = cp->group, cout_g = w->dims[1], cin_g = w->dims[0] / group;
    if (group < 1 || cout_g * group != channels || w->dims[0] % group) return false;
    int64_t k = per_row / cout_g;
    for (int64_t i = 0; i < nw; i++) {
      int64_t ci = i / per_row, j = (i % per_row) / k;
      put(dt, w_out, i, get(w, i) * s[(ci / cin_g) * cout_g + j]);
    }
  }
  const mx_tensor *cb = nd->n_inputs > 2 ? const_of(g, nd->inputs[2], dt) : NULL;
  if (nd->n_inputs > 2 && nd->inputs[2] != MX_NO_VALUE && (!cb || numel(cb) != channels)) return false;
  for (int64_t c = 0; c < channels; c++) put(dt, b_out, c, (cb ? get(cb, c) : 0.0) * s[c] + h[c]);
  return true;
}

static mx_status fold_one(mx_graph *g, mx_node_id bn_id, bool *hit) {
  const mx_node *bn = &g->nodes[bn_id];
  const mx_batchnorm_params *p = bn->params;
  *hit = false;
  if (!p || p->training_mode || !p->spatial || bn->n_inputs != 5) return MX_OK;
  for (uint32_t k = 1; k < bn->n_outputs; k++)
    if (g->values[bn->outputs[k]].n_consumers || mx__rw_is_output(g, bn->outputs[k])) return MX_OK;
  mx_value_id x = bn->inputs[0];
  mx_node_id pid = g->values[x].producer;
  if (pid == MX_NO_NODE || !mx__rw_single_use(g, x)) return MX_OK;
  const mx_node *nd = &g->nodes[pid];
  bool gemm = !nd->domain[0] && strcmp(nd->op_type, "Gemm") == 0;
  if (nd->domain[0] ||
      (!gemm && strcmp(nd->op_type, "Conv") != 0 && strcmp(nd->op_type, "ConvTranspose") != 0))
    return MX_OK;
  if (!nd->params || nd->n_outputs != 1) return MX_OK;
  /* A Conv or Gemm whose kernel applies a fused activation computes act(W x + b): BN does not
   * fold in. */
  if (gemm ? ((const mx_gemm_params *)nd->params)->fused_act
           : ((const mx_conv_params *)nd->params)->fused_act)
    return MX_OK;
  mx_dtype dt = g->values[x].dtype;
  if (dt != MX_FLOAT32 && dt != MX_FLOAT64) return MX_OK;
  const mx_shape *xs = &g->values[x].shape;
  if (xs->rank < 2 || !mx_dim_is_concrete(xs->dims[1]) || (gemm && xs->rank != 2)) return MX_OK;
  int64_t channels = xs->dims[1];
  const mx_tensor *w = const_of(g, nd->inputs[1], dt);
  if (!w || channels <= 0) return MX_OK;
  int64_t nw = numel(w);
  size_t es = dt == MX_FLOAT64 ? 8 : 4;
  double *s = malloc(2 * (size_t)channels * sizeof *s);
  void *wd = malloc((size_t)nw * es + 1), *bd = malloc((size_t)channels * es);
  mx_status st = MX_OK;
  if (!s || !wd || !bd) {
    st = mx__graph_fail(g, MX_ERR_OUT_OF_MEMORY, "out of memory folding '%s'", bn->name);
    goto done;
  }
  double beta = 0;
  if (!bn_affine(g, bn, dt, channels, s, s + channels) ||
      !fold_weights(g, nd, dt, channels, s, s + channels, wd, bd, &beta))
    goto done;
  mx_value_id nw_id, nb_id;
  st = mx__rw_new_const(g, "bn_folded_W", dt, w->rank, w->dims, wd, &nw_id);
  if (st == MX_OK) st = mx__rw_new_const(g, "bn_folded_B", dt, 1, &channels, bd, &nb_id);
  if (st != MX_OK) goto done;
  /* The producer's attributes, with Gemm's beta set to 1 (the bias is pre-scaled). */
  mx_attr attrs[32];
  uint32_t na = 0;
  for (uint32_t k = 0; k < nd->n_attrs && na < 31; k++)
    if (!gemm || strcmp(nd->attrs[k].name, "beta") != 0) attrs[na++] = nd->attrs[k];
  if (nd->n_attrs > 31) goto done;
  if (gemm) attrs[na++] = mx_attr_float("beta", (float)beta);
  mx_value_id ins[3] = {nd->inputs[0], nw_id, nb_id};
  char op[32];
  snprintf(op, sizeof op, "%s", nd->op_type);
  st = mx__rw_replace(g, bn->outputs[0], op, ins, 3, attrs, na, NULL);
  if (st == MX_OK) *hit = true;
done:
  free(s);
  free(wd);
  free(bd);
  return st;
}

static mx_status run_bn_fold(mx_graph *g, size_t *hits) {
  size_t n = g->n_nodes;
  for (size_t i = 0; i < n; i++) {
    const mx_node *nd = &g->nodes[i];
    if ((nd->flags & MX_NODE_DEAD) || nd->domain[0] || strcmp(nd->op_type, "BatchNormalization") != 0)
      continue;
    bool hit;
    mx_status st = fold_one(g, (mx_node_id)i, &hit);
    if (st != MX_OK) return st;
    if (hit) (*hits)++;
  }
  return MX_OK;
}

const mx__rw_rule mx__rule_bn_fold = {
    .name = "bn_fold",
    .what = "inference BatchNormalization folded into the preceding Conv / ConvTranspose / Gemm weights",
    .by_default = true,
    .run = run_bn_fold,
};
