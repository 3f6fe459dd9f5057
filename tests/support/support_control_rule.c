/* The executor suites' rules (see control_rule.h). Control flow or sequence / optional values:
 * a node whose op runs subgraphs or handles sequences and optionals (the op flags
 * MX_OP_SUBGRAPH and MX_OP_ANY_KIND, or any graph attribute), or a graph input or output of
 * another kind than a tensor. Strings: any value of element type MX_STRING. */
#include "support/control_rule.h"

#include <stdio.h>

#include "graph/ir.h"
#include "graph/ops/op.h"

bool mxt_needs_control(const mx_graph *g, char *why, size_t cap) {
  char scratch[8];
  if (!why) {
    why = scratch;
    cap = sizeof scratch;
  }
  for (size_t n = 0; n < g->n_nodes; n++) {
    const mx_node *nd = &g->nodes[n];
    if (nd->flags & MX_NODE_DEAD) continue;
    bool control = nd->def && (nd->def->flags & (MX_OP_SUBGRAPH | MX_OP_ANY_KIND));
    for (uint32_t a = 0; a < nd->n_attrs && !control; a++) control = nd->attrs[a].type == MX_ATTR_GRAPH;
    if (control) {
      snprintf(why, cap, "node '%s' (%s) runs subgraphs or handles sequences / optionals", nd->name,
               nd->op_type);
      return true;
    }
  }
  for (size_t i = 0; i < g->n_inputs + g->n_outputs; i++) {
    mx_value_id v = i < g->n_inputs ? g->inputs[i] : g->outputs[i - g->n_inputs];
    if (g->values[v].kind == MX_KIND_TENSOR) continue;
    snprintf(why, cap, "graph %s '%s' is a sequence or optional", i < g->n_inputs ? "input" : "output",
             g->values[v].name);
    return true;
  }
  return false;
}

bool mxt_holds_strings(const mx_graph *g, char *why, size_t cap) {
  for (size_t v = 0; v < g->n_values; v++) {
    const mx_value *val = &g->values[v];
    if ((val->flags & MX_VALUE_DEAD) || val->dtype != MX_STRING) continue;
    if (why) snprintf(why, cap, "value '%s' is a string tensor", val->name);
    return true;
  }
  return false;
}
