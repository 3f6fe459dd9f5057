/* Rule conv_residual: Conv -> Add(the Conv's output, a residual R of the same shape) [-> Relu]
 * becomes one Conv reading R as a fourth input: its kernel adds R to each output tile before the
 * fused activation, while the tile is in cache, instead of an Add and a Relu each streaming the
 * whole tensor again (ResNet's blocks end this way, MobileNet's inverted residuals without the
 * Relu). The Relu becomes the Conv's mixrt_activation. */
#include <string.h>

#include "graph/ops/conv_params.h"
#include "graph/passes/rewrite.h"

static bool is_op(const mx_node *n, const char *op) { return !n->domain[0] && strcmp(n->op_type, op) == 0; }

static bool is_float(mx_dtype dt) {
  return dt == MX_FLOAT32 || dt == MX_FLOAT64 || dt == MX_FLOAT16 || dt == MX_BFLOAT16;
}

/* Conv node producing v that can take a residual: a plain Conv (no fused activation, no residual
 * yet) whose output only this Add reads. */
static mx_node_id plain_conv(const mx_graph *g, mx_value_id v) {
  mx_node_id c = mx__rw_producer(g, v, "Conv");
  if (c == MX_NO_NODE || !mx__rw_single_use(g, v)) return MX_NO_NODE;
  const mx_node *n = &g->nodes[c];
  const mx_conv_params *p = n->params;
  if (!p || p->fused_act != MX_CONV_ACT_NONE || n->n_inputs > 3 || n->n_outputs != 1) return MX_NO_NODE;
  return c;
}

static mx_status fuse_one(mx_graph *g, mx_node_id aid, bool *hit) {
  *hit = false;
  const mx_node *add = &g->nodes[aid];
  if (add->n_inputs != 2 || add->n_outputs != 1) return MX_OK;
  mx_value_id a = add->inputs[0], b = add->inputs[1], out = add->outputs[0];
  if (a == b) return MX_OK;
  /* Either side may be the Conv (a block's branch and its shortcut are both Convs when the
   * shortcut downsamples): the first that qualifies takes the other as its residual. */
  mx_value_id y = a, r = b;
  mx_node_id cid = plain_conv(g, a);
  if (cid == MX_NO_NODE) {
    y = b;
    r = a;
    cid = plain_conv(g, b);
  }
  if (cid == MX_NO_NODE) return MX_OK;
  const mx_value *yv = &g->values[y], *rv = &g->values[r], *ov = &g->values[out];
  /* No broadcasting: the residual has exactly the Conv's shape and dtype. */
  if (!is_float(yv->dtype) || rv->dtype != yv->dtype || !mx__rw_same_shape(&rv->shape, &yv->shape) ||
      !mx__rw_same_shape(&ov->shape, &yv->shape))
    return MX_OK;
  /* A Relu reading the sum alone joins the Conv too. */
  mx_value_id last = out;
  bool relu = false;
  if (mx__rw_single_use(g, out)) {
    const mx_node *next = &g->nodes[g->values[out].consumers[0]];
    if (is_op(next, "Relu") && next->n_outputs == 1 && next->inputs[0] == out) {
      relu = true;
      last = next->outputs[0];
    }
  }
  const mx_node *conv = &g->nodes[cid];
  mx_attr attrs[40];
  uint32_t na = 0;
  for (uint32_t k = 0; k < conv->n_attrs && na < 37; k++) attrs[na++] = conv->attrs[k];
  /* Always marked, so that other rules see a fused node, not a plain Conv. */
  attrs[na++] = mx_attr_string("mixrt_activation", relu ? "Relu" : "");
  mx_value_id ins[4] = {conv->inputs[0], conv->inputs[1], conv->n_inputs > 2 ? conv->inputs[2] : MX_NO_VALUE,
                        r};
  mx_status st = mx__rw_replace(g, last, "Conv", ins, 4, attrs, na, NULL);
  if (st == MX_OK) *hit = true;
  return st;
}

static mx_status run_conv_residual(mx_graph *g, size_t *hits) {
  size_t n = g->n_nodes;
  for (size_t i = 0; i < n; i++) {
    const mx_node *nd = &g->nodes[i];
    if ((nd->flags & MX_NODE_DEAD) || !is_op(nd, "Add")) continue;
    bool hit;
    mx_status st = fuse_one(g, (mx_node_id)i, &hit);
    if (st != MX_OK) return st;
    if (hit) (*hits)++;
  }
  return MX_OK;
}

const mx__rw_rule mx__rule_conv_residual = {
    .name = "conv_residual",
    .what = "Conv + Add of a same-shape residual [+ Relu] into one Conv kernel reading the residual",
    .by_default = true,
    .run = run_conv_residual,
};
