/* The text dump: one line per cluster (id, type, op count, rank range, producer and consumer
 * cluster ids, the first names it holds), under an UNKNOWN cluster the control nodes it runs
 * with their subgraphs, nested, and one line of totals. */
#include <stdio.h>

#include "partitioner/partitioner_impl.h"
#include "partitioner/spec.h"

#define FIRST_NAMES 3

mx_status mx_partition_dump_text(const mx_partition *p, FILE *out) {
  if (!p || !out) return MX_ERR_INVALID_ARGUMENT;
  fprintf(out, "partition of graph '%s': %u clusters (static_min_ops %lld, %s mode)\n", p->g->name,
          p->n_clusters, (long long)p->static_min_ops, p->stable ? "stable" : "normal");
  for (uint32_t id = 0; id < p->n_clusters; id++) {
    const mx__part_cluster *c = &p->clusters[id];
    char ranks[48] = "-";
    if (c->n_nodes)
      snprintf(ranks, sizeof ranks, "%lld..%lld", (long long)c->min_rank, (long long)c->max_rank);
    fprintf(out, "cluster %u %-9s ops %u ranks %s in ", id, mx_cluster_type_name(c->type), c->n_nodes, ranks);
    mx__part_print_ids(out, p->links + c->first_pred, c->n_pred);
    fprintf(out, " out ");
    mx__part_print_ids(out, p->links + c->first_succ, c->n_succ);
    fprintf(out, " |");
    size_t shown = 0;
    for (; shown < FIRST_NAMES; shown++) {
      const char *name = mx__part_cluster_label(p, id, shown);
      if (!name) break;
      fprintf(out, "%s %s", shown ? "," : "", name);
    }
    if (c->n_nodes > shown) fprintf(out, ", ... (+%zu)", (size_t)c->n_nodes - shown);
    if ((c->type == MX_CLUSTER_KNOWN || c->type == MX_CLUSTER_UNKNOWN) && c->n_consts)
      fprintf(out, " + %u constant%s", c->n_consts, c->n_consts == 1 ? "" : "s");
    if (c->type == MX_CLUSTER_NETOUTPUT) fprintf(out, " %u output%s", c->n_in, c->n_in == 1 ? "" : "s");
    if (p->spec && p->spec[id].specializable) {
      fprintf(out, " | specializable on [");
      for (uint32_t k = 0; k < p->spec[id].n_syms; k++)
        fprintf(out, "%s%s", k ? ", " : "", mx_symtab_symbol_name(p->g->syms, p->spec[id].syms[k]));
      fprintf(out, "]");
    }
    fprintf(out, "\n");
    for (uint32_t k = 0; c->type == MX_CLUSTER_UNKNOWN && k < c->n_nodes; k++) {
      const mx_node *nd = &p->g->nodes[p->members[c->first_node + k]];
      if (mx__part_is_control_call(nd)) mx__part_dump_control_text(out, p, nd, 1);
    }
  }
  size_t shown_syms = 0;
  for (size_t k = 0; k < p->n_sym_kinds; k++) {
    if (p->sym_kinds[k] == MX_SPEC_SYM_UNUSED) continue;
    fprintf(out, "%s %s (%s)", shown_syms++ ? "," : "symbols:", mx_symtab_symbol_name(p->g->syms, k),
            mx__spec_sym_kind_name((mx_spec_sym_kind)p->sym_kinds[k]));
  }
  if (shown_syms) fprintf(out, "\n");
  const mx_partition_totals *t = &p->totals;
  fprintf(out,
          "totals: known %zu ops in %zu cluster%s, unknown %zu ops in %zu cluster%s, constants %zu "
          "(%zu shared), "
          "boundary values %zu\n",
          t->known_nodes, t->known_clusters, t->known_clusters == 1 ? "" : "s", t->unknown_nodes,
          t->unknown_clusters, t->unknown_clusters == 1 ? "" : "s", t->constants, t->shared_constants,
          t->boundary_values);
  return ferror(out) ? MX_ERR_IO : MX_OK;
}
