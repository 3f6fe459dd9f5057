/* Rule conv_act: Conv [-> Add(per-channel constant)] -> activation (Relu, Clip with constant
 * bounds, HardSigmoid, HardSwish, Sigmoid, SiLU as Swish alpha 1) becomes one Conv whose kernel
 * applies the activation (mixrt_activation attributes, mx_conv_params.fused_act) and whose
 * constant bias absorbs the Add. */
#include <stdlib.h>
#include <string.h>

#include "graph/ops/conv_params.h"
#include "graph/passes/rewrite.h"

static bool is_op(const mx_node *n, const char *op) { return !n->domain[0] && strcmp(n->op_type, op) == 0; }

/* The activation node n as a fused-activation name and parameters; false when it is none. */
static bool activation_of(const mx_graph *g, const mx_node *n, const char **name, float *alpha, float *beta) {
  *alpha = *beta = 0.0f;
  if (is_op(n, "Relu") || is_op(n, "Sigmoid") || is_op(n, "HardSwish")) {
    *name = n->op_type;
    return true;
  }
  if (is_op(n, "Swish")) {
    const mx_attr *a = mx__node_attr(n, "alpha");
    *name = "SiLU";
    return !a || a->f == 1.0f;
  }
  if (is_op(n, "HardSigmoid")) {
    const mx_attr *a = mx__node_attr(n, "alpha"), *b = mx__node_attr(n, "beta");
    *name = "HardSigmoid";
    *alpha = a ? a->f : 0.2f;
    *beta = b ? b->f : 0.5f;
    return true;
  }
  if (is_op(n, "Clip")) {
    double lo = -3.4028234663852886e38, hi = 3.4028234663852886e38;
    if (n->opset < 11) {
      const mx_attr *a = mx__node_attr(n, "min"), *b = mx__node_attr(n, "max");
      if (a) lo = a->f;
      if (b) hi = b->f;
    } else {
      if (n->n_inputs > 1 && n->inputs[1] != MX_NO_VALUE && !mx__rw_const_scalar(g, n->inputs[1], &lo))
        return false;
      if (n->n_inputs > 2 && n->inputs[2] != MX_NO_VALUE && !mx__rw_const_scalar(g, n->inputs[2], &hi))
        return false;
    }
    *name = "Clip";
    *alpha = (float)lo;
    *beta = (float)hi;
    return true;
  }
  return false;
}

/* Add node `add` reads conv output y and a float32 constant with one value per channel laid out
 * to broadcast over [N, M, spatial...]: fills bias[0..m) with it. */
static bool channel_constant(const mx_graph *g, const mx_node *add, mx_value_id y, int64_t m, float *bias) {
  mx_value_id o = mx__rw_other_input(add, y);
  if (o == MX_NO_VALUE || o == y) return false;
  const mx_tensor *t = g->values[o].data;
  int32_t yr = g->values[y].shape.rank;
  if (!t || !(g->values[o].flags & MX_VALUE_CONST) || t->dtype != MX_FLOAT32 || t->rank > yr) return false;
  int64_t n;
  if (!mx_tensor_numel(t, &n) || (n != m && n != 1)) return false;
  /* Its dims aligned to Y's from the right: only the channel dim (yr - 1 - k == 1) may exceed 1. */
  for (int32_t k = 0; k < t->rank; k++) {
    int32_t yd = yr - t->rank + k;
    if (t->dims[k] != 1 && yd != 1) return false;
  }
  for (int64_t c = 0; c < m; c++) bias[c] = ((const float *)t->data)[n == 1 ? 0 : c];
  return true;
}

static mx_status fuse_one(mx_graph *g, mx_node_id cid, bool *hit) {
  *hit = false;
  const mx_node *conv = &g->nodes[cid];
  const mx_conv_params *p = conv->params;
  mx_value_id y = conv->outputs[0];
  if (!p || p->fused_act || conv->n_inputs > 3 /* a residual: conv_residual's */ ||
      g->values[y].dtype != MX_FLOAT32 || !mx__rw_single_use(g, y))
    return MX_OK;
  const mx_shape *ys = &g->values[y].shape;
  if (ys->rank < 3 || !mx_dim_is_concrete(ys->dims[1])) return MX_OK;
  int64_t m = ys->dims[1];
  const mx_node *next = &g->nodes[g->values[y].consumers[0]];
  float *bias = calloc((size_t)m + 1, sizeof *bias);
  if (!bias) return mx__graph_fail(g, MX_ERR_OUT_OF_MEMORY, "out of memory fusing '%s'", conv->name);
  bool has_add = false;
  mx_value_id last = y;
  mx_status st = MX_OK;
  if (is_op(next, "Add") && channel_constant(g, next, y, m, bias)) {
    has_add = true;
    last = next->outputs[0];
    if (!mx__rw_single_use(g, last)) goto done;
    next = &g->nodes[g->values[last].consumers[0]];
  }
  const char *act;
  float alpha, beta;
  if (!activation_of(g, next, &act, &alpha, &beta) || next->inputs[0] != last) goto done;
  /* The bias: the Conv's own (constant) plus the Add's. */
  mx_value_id b = conv->n_inputs > 2 ? conv->inputs[2] : MX_NO_VALUE;
  if (b != MX_NO_VALUE) {
    const mx_tensor *bt = g->values[b].data;
    int64_t bn;
    if (!bt || bt->dtype != MX_FLOAT32 || !mx_tensor_numel(bt, &bn) || bn != m) {
      if (has_add) goto done;
    } else if (has_add) {
      for (int64_t c = 0; c < m; c++) bias[c] += ((const float *)bt->data)[c];
    }
  }
  mx_value_id nb = b;
  if (has_add && (st = mx__rw_new_const(g, "conv_fused_bias", MX_FLOAT32, 1, &m, bias, &nb)) != MX_OK)
    goto done;
  mx_attr attrs[40];
  uint32_t na = 0;
  for (uint32_t k = 0; k < conv->n_attrs && na < 36; k++) attrs[na++] = conv->attrs[k];
  attrs[na++] = mx_attr_string("mixrt_activation", act);
  attrs[na++] = mx_attr_float("mixrt_activation_alpha", alpha);
  attrs[na++] = mx_attr_float("mixrt_activation_beta", beta);
  mx_value_id ins[3] = {conv->inputs[0], conv->inputs[1], nb};
  st = mx__rw_replace(g, next->outputs[0], "Conv", ins, nb == MX_NO_VALUE ? 2 : 3, attrs, na, NULL);
  if (st == MX_OK) *hit = true;
done:
  free(bias);
  return st;
}

static mx_status run_conv_act(mx_graph *g, size_t *hits) {
  size_t n = g->n_nodes;
  for (size_t i = 0; i < n; i++) {
    const mx_node *nd = &g->nodes[i];
    if ((nd->flags & MX_NODE_DEAD) || !is_op(nd, "Conv")) continue;
    bool hit;
    mx_status st = fuse_one(g, (mx_node_id)i, &hit);
    if (st != MX_OK) return st;
    if (hit) (*hits)++;
  }
  return MX_OK;
}

const mx__rw_rule mx__rule_conv_act = {
    .name = "conv_act",
    .what =
        "Conv [+ per-channel Add] + Relu / Clip / HardSigmoid / HardSwish / Sigmoid / SiLU into one Conv "
        "kernel",
    .by_default = true,
    .run = run_conv_act,
};
