/* Shape specialization on a partition: the kind of every symbol, and for every UNKNOWN cluster
 * whether it is specializable and on which symbols (spec.h). The dumps print both. */
#include <stdlib.h>

#include "partitioner/partitioner_impl.h"
#include "partitioner/spec.h"

mx_status mx__part_spec(mx_partition *p) {
  const mx_graph *g = p->g;
  p->n_sym_kinds = mx_symtab_symbol_count(g->syms);
  p->sym_kinds = malloc(p->n_sym_kinds ? p->n_sym_kinds : 1);
  p->spec = calloc(p->n_clusters ? p->n_clusters : 1, sizeof *p->spec);
  if (!p->sym_kinds || !p->spec)
    return mx__part_fail(p, MX_ERR_OUT_OF_MEMORY, "out of memory partitioning graph '%s'", g->name);
  mx__spec_symbol_kinds(g, p->sym_kinds, p->n_sym_kinds);
  for (uint32_t id = 0; id < p->n_clusters; id++) {
    const mx__part_cluster *c = &p->clusters[id];
    mx_spec_info *info = &p->spec[id];
    info->why_node = MX_NO_NODE;
    info->why_sym = -1;
    if (c->type != MX_CLUSTER_UNKNOWN) continue;
    /* What the user asked to run dynamically stays dynamic. */
    bool chosen_dynamic = false;
    for (uint32_t m = 0; m < c->n_nodes && !chosen_dynamic; m++) {
      mx_partition_reason_kind k = p->reason[p->members[c->first_node + m]].kind;
      chosen_dynamic = k == MX_PART_FORCED || k == MX_PART_ALL_DYNAMIC;
    }
    if (chosen_dynamic) {
      info->why = "forced dynamic by option";
      continue;
    }
    mx__spec_analyze(g, p->members + c->first_node, c->n_nodes, p->sym_kinds, p->n_sym_kinds, info);
  }
  return MX_OK;
}
