/* Step 1 of a partition: every compute node is marked KNOWN or UNKNOWN (design §4) and keeps
 * the reason. The first rule that applies wins:
 *
 *   1. forced by option (force_unknown names the node); a control node (wrapped into a call of
 *      its own, part_control.c) runs its subgraphs on the host;
 *   2. the op's output shape depends on input data (MX_OP_DATA_DEPENDENT);
 *   3. an input, then an output, has an unknown rank, an unknown dim or a symbolic dim (the
 *      first such tensor and dim are recorded);
 *   4. the op reads an input by value (value_inputs) and that value is not known at compile
 *      time (neither constant data nor a fully concrete symbolic value);
 *   5. host placement: a host-preferred op (small integer shape arithmetic) whose result is
 *      only known at run time;
 *   otherwise KNOWN. Constant nodes are not marked: they follow the clusters that read them. */
#include <stdlib.h>
#include <string.h>

#include "graph/ops/op.h"
#include "partitioner/partitioner_impl.h"

/* Checks one tensor's shape; fills *r and returns true when it makes the node unknown. */
static bool shape_reason(const mx_value *val, mx_value_id v, int32_t slot, bool is_output,
                         mx_partition_reason *r) {
  mx_partition_reason_kind kind = MX_PART_KNOWN;
  int32_t dim = -1;
  if (val->shape.rank == MX_RANK_UNKNOWN) {
    kind = MX_PART_UNKNOWN_RANK;
  } else {
    for (int32_t k = 0; k < val->shape.rank; k++) {
      mx_dim d = val->shape.dims[k];
      if (mx_dim_is_concrete(d)) continue;
      kind = mx_dim_is_unknown(d) ? MX_PART_UNKNOWN_DIM : MX_PART_SYMBOLIC_DIM;
      dim = k;
      break;
    }
  }
  if (kind == MX_PART_KNOWN) return false;
  *r = mx__part_reason(kind);
  r->value = v;
  r->slot = slot;
  r->is_output = is_output;
  r->dim = dim;
  return true;
}

/* True when every element of the value is known at compile time. */
static bool value_known(const mx_graph *g, const mx_value *val) {
  if (val->data) return true;
  if (val->sv_len < 0 || !val->sv) return false;
  for (int32_t i = 0; i < val->sv_len; i++) {
    mx_dim d = val->sv[i];
    if (!mx_dim_is_concrete(d) && !mx_sym_const_value(g->syms, d, NULL)) return false;
  }
  return true;
}

static mx_partition_reason mark_node(const mx_graph *g, const mx_node *nd, bool forced) {
  mx_partition_reason r = mx__part_reason(MX_PART_KNOWN);
  if (forced) return mx__part_reason(MX_PART_FORCED);
  if (mx__part_is_control_call(nd)) return mx__part_reason(MX_PART_CONTROL_FLOW);
  const mx_op_def *def = nd->def;
  if (def->flags & MX_OP_DATA_DEPENDENT) {
    r = mx__part_reason(MX_PART_DATA_DEPENDENT);
    if (nd->n_outputs) {
      r.value = nd->outputs[0];
      r.slot = 0;
      r.is_output = true;
    }
    return r;
  }
  for (uint32_t i = 0; i < nd->n_inputs; i++) {
    mx_value_id v = nd->inputs[i];
    if (v != MX_NO_VALUE && shape_reason(&g->values[v], v, (int32_t)i, false, &r)) return r;
  }
  for (uint32_t i = 0; i < nd->n_outputs; i++) {
    mx_value_id v = nd->outputs[i];
    if (shape_reason(&g->values[v], v, (int32_t)i, true, &r)) return r;
  }
  for (uint32_t i = 0; i < nd->n_inputs && i < 64; i++) {
    mx_value_id v = nd->inputs[i];
    if (v == MX_NO_VALUE || !(def->value_inputs & (1ull << i))) continue;
    if (!value_known(g, &g->values[v])) {
      r = mx__part_reason(MX_PART_VALUE_DEPENDENT);
      r.value = v;
      r.slot = (int32_t)i;
      return r;
    }
  }
  if (def->flags & MX_OP_HOST_PREFERRED) {
    for (uint32_t i = 0; i < nd->n_outputs; i++) {
      const mx_value *val = &g->values[nd->outputs[i]];
      if (val->sv_len >= 0 && val->sv && !value_known(g, val)) {
        r = mx__part_reason(MX_PART_HOST_PLACEMENT);
        r.value = nd->outputs[i];
        r.slot = (int32_t)i;
        r.is_output = true;
        return r;
      }
    }
  }
  return r;
}

mx_status mx__part_mark(mx_partition *p, const mx_partition_options *o) {
  const mx_graph *g = p->g;
  size_t nn = g->n_nodes;
  mx_status st = MX_OK;
  uint8_t *forced = calloc(nn ? nn : 1, 1);
  p->reason = malloc((nn ? nn : 1) * sizeof *p->reason);
  p->marked_unknown = calloc(p->n_compute ? p->n_compute : 1, 1);
  if (!forced || !p->reason || !p->marked_unknown) {
    st = mx__part_fail(p, MX_ERR_OUT_OF_MEMORY, "out of memory marking graph '%s'", g->name);
    goto done;
  }
  for (size_t i = 0; i < nn; i++) p->reason[i] = mx__part_reason(MX_PART_KNOWN);
  for (size_t i = 0; i < o->n_force_unknown; i++) {
    const char *name = o->force_unknown ? o->force_unknown[i] : NULL;
    mx_node_id n = mx_graph_find_node(g, name);
    if (n == MX_NO_NODE || !mx__node_valid(g, n)) {
      st = mx__part_fail(p, MX_ERR_NOT_FOUND, "force_unknown: graph '%s' has no node named '%s'", g->name,
                         name ? name : "(null)");
      goto done;
    }
    forced[n] = 1;
  }
  for (uint32_t i = 0; i < p->n_consts; i++)
    if (p->consts[i].node != MX_NO_NODE) p->reason[p->consts[i].node] = mx__part_reason(MX_PART_CONSTANT);
  p->n_marked_unknown = 0;
  for (uint32_t pos = 0; pos < p->n_compute; pos++) {
    mx_node_id n = p->compute[pos];
    p->reason[n] = mark_node(g, &g->nodes[n], forced[n]);
    if (p->reason[n].kind != MX_PART_KNOWN) {
      p->marked_unknown[pos] = 1;
      p->n_marked_unknown++;
    }
  }
done:
  free(forced);
  return st;
}
