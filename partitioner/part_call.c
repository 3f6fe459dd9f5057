/* Readers of partition call nodes for the stages that consume a partitioned root graph. */
#include <string.h>

#include "partitioner/partitioner.h"

bool mx__part_is_call(const mx_node *n) {
  return n && strcmp(n->op_type, MX_PART_CALL_OP) == 0 && strcmp(n->domain, MX_PART_DOMAIN) == 0;
}

mx_graph *mx__part_call_body(const mx_node *n) {
  if (!mx__part_is_call(n)) return NULL;
  const mx_attr *a = mx__node_attr(n, MX_PART_ATTR_BODY);
  return a && a->type == MX_ATTR_GRAPH ? a->graph : NULL;
}

bool mx__part_call_is_unknown(const mx_node *n) {
  if (!mx__part_is_call(n)) return false;
  const mx_attr *a = mx__node_attr(n, MX_PART_ATTR_UNKNOWN);
  return a && a->type == MX_ATTR_INT && a->i != 0;
}

bool mx__part_call_input_is_const(const mx_node *n, uint32_t index) {
  if (!mx__part_is_call(n)) return false;
  const mx_attr *a = mx__node_attr(n, MX_PART_ATTR_CONST_INPUTS);
  if (!a || a->type != MX_ATTR_INTS) return false;
  for (size_t i = 0; i < a->count; i++)
    if (a->ints[i] == (int64_t)index) return true;
  return false;
}
