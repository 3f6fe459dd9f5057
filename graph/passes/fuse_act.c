/* Rules recognizing activations written with primitive ops:
 *   gelu: x * 0.5 * (1 + Erf(x / sqrt(2)))  (Div by 1.4142 or Mul by 0.7071) into Gelu, and
 *         x * 0.5 * (1 + Tanh(0.79788 * (x + 0.044715 * x^3))) into Gelu(approximate = tanh);
 *         the three products may come in any of the orders exporters write;
 *   silu: x * Sigmoid(x) into Swish (alpha 1, which is SiLU). */
#include <string.h>

#include "graph/passes/rewrite.h"

#define TOL 1e-3

static mx_node_id sole_consumer(const mx_graph *g, mx_value_id v, const char *op) {
  if (!mx__rw_single_use(g, v)) return MX_NO_NODE;
  mx_node_id c = g->values[v].consumers[0];
  const mx_node *n = &g->nodes[c];
  return !n->domain[0] && strcmp(n->op_type, op) == 0 ? c : MX_NO_NODE;
}

/* Constant operand of binary node n equal to `want`: the other operand, else MX_NO_VALUE. */
static mx_value_id with_const(const mx_graph *g, const mx_node *n, double want) {
  if (n->n_inputs != 2) return MX_NO_VALUE;
  for (int k = 0; k < 2; k++)
    if (mx__rw_const_is(g, n->inputs[1 - k], want, TOL)) return n->inputs[k];
  return MX_NO_VALUE;
}

/* Given a = 1 + f(x) (single use), finds y = 0.5 * x * a in one of its orders; MX_NO_VALUE if none. */
static mx_value_id half_x_times(const mx_graph *g, mx_value_id a, mx_value_id x) {
  mx_node_id m1 = sole_consumer(g, a, "Mul");
  if (m1 == MX_NO_NODE) return MX_NO_VALUE;
  const mx_node *n1 = &g->nodes[m1];
  mx_value_id o = mx__rw_other_input(n1, a), z = n1->outputs[0];
  if (o == x) { /* (x * a) * 0.5 */
    mx_node_id m2 = sole_consumer(g, z, "Mul");
    if (m2 != MX_NO_NODE && with_const(g, &g->nodes[m2], 0.5) == z) return g->nodes[m2].outputs[0];
    return MX_NO_VALUE;
  }
  mx_node_id h = mx__rw_producer(g, o, "Mul");
  if (h != MX_NO_NODE && with_const(g, &g->nodes[h], 0.5) == x) return z; /* (x * 0.5) * a */
  if (mx__rw_const_is(g, o, 0.5, TOL)) {                                  /* x * (a * 0.5) */
    mx_node_id m2 = sole_consumer(g, z, "Mul");
    if (m2 != MX_NO_NODE && mx__rw_other_input(&g->nodes[m2], z) == x) return g->nodes[m2].outputs[0];
  }
  return MX_NO_VALUE;
}

/* The value y of the GELU pattern around node `f` (Erf or Tanh) when its argument is x's; sets *x. */
static mx_value_id gelu_around(const mx_graph *g, const mx_node *f, bool tanh_form, mx_value_id *x) {
  mx_value_id u = f->inputs[0];
  if (!tanh_form) {
    mx_node_id d = mx__rw_producer(g, u, "Div");
    if (d != MX_NO_NODE && mx__rw_const_is(g, g->nodes[d].inputs[1], 1.4142135623730951, TOL))
      *x = g->nodes[d].inputs[0];
    else if ((d = mx__rw_producer(g, u, "Mul")) != MX_NO_NODE)
      *x = with_const(g, &g->nodes[d], 0.7071067811865476);
    else
      return MX_NO_VALUE;
  } else {
    /* u = 0.79788 * (x + 0.044715 * x^3) */
    mx_node_id m = mx__rw_producer(g, u, "Mul");
    if (m == MX_NO_NODE) return MX_NO_VALUE;
    mx_value_id s = with_const(g, &g->nodes[m], 0.7978845608028654);
    mx_node_id add = mx__rw_producer(g, s, "Add");
    if (add == MX_NO_NODE) return MX_NO_VALUE;
    const mx_node *an = &g->nodes[add];
    *x = MX_NO_VALUE;
    for (int k = 0; k < 2 && *x == MX_NO_VALUE; k++) {
      mx_node_id c = mx__rw_producer(g, an->inputs[1 - k], "Mul");
      if (c == MX_NO_NODE) continue;
      mx_node_id p = mx__rw_producer(g, with_const(g, &g->nodes[c], 0.044715), "Pow");
      if (p != MX_NO_NODE && g->nodes[p].inputs[0] == an->inputs[k] &&
          mx__rw_const_is(g, g->nodes[p].inputs[1], 3.0, 0.0))
        *x = an->inputs[k];
    }
  }
  if (*x == MX_NO_VALUE) return MX_NO_VALUE;
  mx_node_id a = sole_consumer(g, f->outputs[0], "Add");
  if (a == MX_NO_NODE || with_const(g, &g->nodes[a], 1.0) != f->outputs[0]) return MX_NO_VALUE;
  return half_x_times(g, g->nodes[a].outputs[0], *x);
}

static bool float_like(const mx_graph *g, mx_value_id x, mx_value_id y) {
  mx_dtype dt = g->values[x].dtype;
  return (dt == MX_FLOAT32 || dt == MX_FLOAT64 || dt == MX_FLOAT16 || dt == MX_BFLOAT16) &&
         g->values[y].dtype == dt && mx__rw_same_shape(&g->values[x].shape, &g->values[y].shape);
}

static mx_status run_gelu(mx_graph *g, size_t *hits) {
  size_t n = g->n_nodes;
  for (size_t i = 0; i < n; i++) {
    const mx_node *nd = &g->nodes[i];
    if ((nd->flags & MX_NODE_DEAD) || nd->domain[0]) continue;
    bool tanh_form = strcmp(nd->op_type, "Tanh") == 0;
    if (!tanh_form && strcmp(nd->op_type, "Erf") != 0) continue;
    mx_value_id x = MX_NO_VALUE, y = gelu_around(g, nd, tanh_form, &x);
    if (y == MX_NO_VALUE || !float_like(g, x, y)) continue;
    mx_attr a = mx_attr_string("approximate", "tanh");
    mx_status st = mx__rw_replace(g, y, "Gelu", &x, 1, &a, tanh_form ? 1 : 0, NULL);
    if (st != MX_OK) return st;
    (*hits)++;
  }
  return MX_OK;
}

const mx__rw_rule mx__rule_gelu = {
    .name = "gelu",
    .what = "Gelu from its Erf form and (approximate = tanh) its Tanh form",
    .by_default = true,
    .run = run_gelu,
};

static mx_status run_silu(mx_graph *g, size_t *hits) {
  size_t n = g->n_nodes;
  for (size_t i = 0; i < n; i++) {
    const mx_node *nd = &g->nodes[i];
    if ((nd->flags & MX_NODE_DEAD) || nd->domain[0] || strcmp(nd->op_type, "Mul") != 0 || nd->n_inputs != 2)
      continue;
    mx_value_id x = MX_NO_VALUE, y = nd->outputs[0];
    for (int k = 0; k < 2 && x == MX_NO_VALUE; k++) {
      mx_node_id s = mx__rw_producer(g, nd->inputs[1 - k], "Sigmoid");
      if (s != MX_NO_NODE && g->nodes[s].inputs[0] == nd->inputs[k]) x = nd->inputs[k];
    }
    if (x == MX_NO_VALUE || !float_like(g, x, y)) continue;
    mx_status st = mx__rw_replace(g, y, "Swish", &x, 1, NULL, 0, NULL);
    if (st != MX_OK) return st;
    (*hits)++;
  }
  return MX_OK;
}

const mx__rw_rule mx__rule_silu = {
    .name = "silu",
    .what = "x * Sigmoid(x) into Swish (alpha 1: SiLU)",
    .by_default = true,
    .run = run_silu,
};
