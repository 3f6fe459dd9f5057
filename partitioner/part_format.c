/* Small text helpers shared by the dumps and explain: shapes, cluster labels and id lists
 * (JSON string literals come from common/json.h). */
#include <stdio.h>

#include "partitioner/partitioner_impl.h"

void mx__part_shape_text(const mx_partition *p, mx_value_id v, char *buf, size_t cap) {
  mx_shape_format(p->g->syms, &p->g->values[v].shape, buf, cap);
}

const char *mx__part_cluster_label(const mx_partition *p, uint32_t c, size_t k) {
  const mx__part_cluster *cl = &p->clusters[c];
  const mx_graph *g = p->g;
  if (k < cl->n_nodes) return g->nodes[p->members[cl->first_node + k]].name;
  if (cl->type == MX_CLUSTER_DATA || cl->type == MX_CLUSTER_INPUT) {
    if (k > 0) return NULL;
    uint32_t ci = p->const_of_value[cl->source];
    if (cl->type == MX_CLUSTER_INPUT && ci != MX__PART_NONE && p->consts[ci].node != MX_NO_NODE)
      return g->nodes[p->consts[ci].node].name;
    return g->values[cl->source].name;
  }
  return NULL;
}

void mx__part_print_ids(FILE *out, const uint32_t *ids, uint32_t n) {
  fputc('[', out);
  for (uint32_t i = 0; i < n; i++) fprintf(out, "%s%u", i ? ", " : "", ids[i]);
  fputc(']', out);
}
