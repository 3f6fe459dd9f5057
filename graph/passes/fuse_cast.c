/* Rule cast_pair: a Cast (or CastLike) back to the type of the value a first Cast widened gives
 * that value back (Cast(Cast(x, float64), float32) for a float32 x, int32 -> int64 -> int32,
 * float16 -> float32 -> float16): the wider type holds every value of the narrower one exactly,
 * so the round trip is the identity. Narrowing first (float32 -> float16 -> float32) rounds and
 * is left alone. */
#include <string.h>

#include "graph/passes/rewrite.h"

static bool is_cast(const mx_node *n) {
  return !n->domain[0] && (strcmp(n->op_type, "Cast") == 0 || strcmp(n->op_type, "CastLike") == 0);
}

static bool is_signed_int(mx_dtype t) {
  return t == MX_INT8 || t == MX_INT16 || t == MX_INT32 || t == MX_INT64;
}
static bool is_unsigned_int(mx_dtype t) {
  return t == MX_UINT8 || t == MX_UINT16 || t == MX_UINT32 || t == MX_UINT64;
}
static int int_bits(mx_dtype t) { return (int)mx_dtype_size(t) * 8; }

/* Whether every value of type `from` is exactly a value of type `to`. */
static bool holds_exactly(mx_dtype from, mx_dtype to) {
  if (from == to) return true;
  if (from == MX_BOOL)
    return is_signed_int(to) || is_unsigned_int(to) || to == MX_FLOAT16 || to == MX_BFLOAT16 ||
           to == MX_FLOAT32 || to == MX_FLOAT64;
  if (from == MX_FLOAT16 || from == MX_BFLOAT16) return to == MX_FLOAT32 || to == MX_FLOAT64;
  if (from == MX_FLOAT32) return to == MX_FLOAT64;
  int mant = to == MX_FLOAT32 ? 24 : to == MX_FLOAT64 ? 53 : 0; /* integers a float holds exactly */
  if (is_signed_int(from)) {
    if (mant) return int_bits(from) <= mant;
    return is_signed_int(to) && int_bits(to) > int_bits(from);
  }
  if (is_unsigned_int(from)) {
    if (mant) return int_bits(from) < mant;
    if (is_unsigned_int(to)) return int_bits(to) > int_bits(from);
    return is_signed_int(to) && int_bits(to) > int_bits(from);
  }
  return false;
}

static mx_status run_cast_pair(mx_graph *g, size_t *hits) {
  size_t n = g->n_nodes;
  for (size_t i = 0; i < n; i++) {
    const mx_node *outer = &g->nodes[i];
    if ((outer->flags & MX_NODE_DEAD) || !is_cast(outer) || outer->n_inputs < 1) continue;
    mx_value_id mid = outer->inputs[0], y = outer->outputs[0];
    mx_node_id p = g->values[mid].producer;
    if (p == MX_NO_NODE || (g->nodes[p].flags & MX_NODE_DEAD) || !is_cast(&g->nodes[p])) continue;
    mx_value_id x = g->nodes[p].inputs[0];
    mx_dtype tx = g->values[x].dtype, tm = g->values[mid].dtype, ty = g->values[y].dtype;
    if (tx == MX_DTYPE_UNDEFINED || ty != tx || !holds_exactly(tx, tm)) continue;
    if (!mx__rw_same_shape(&g->values[y].shape, &g->values[x].shape)) continue;
    if (mx__rw_forward(g, y, x)) (*hits)++;
  }
  return MX_OK;
}

const mx__rw_rule mx__rule_cast_pair = {
    .name = "cast_pair",
    .what = "Cast back to the type a widening Cast started from removed with it",
    .by_default = true,
    .run = run_cast_pair,
};
