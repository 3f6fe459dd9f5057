/* The JSON dump: options, clusters (with their nodes, constants, boundary values and neighbour
 * clusters), every node with its cluster and reason, the collectives of a tensor-parallel shard
 * with why each is there, and the totals. docs/partition.md
 * describes each field. Output depends only on the partition, so it is byte-identical across
 * runs. */
#include <stdio.h>

#include "common/json.h"
#include "graph/passes/shard.h"
#include "partitioner/partitioner_impl.h"
#include "partitioner/spec.h"

static void bound_json(FILE *out, const mx_partition *p, const mx__part_bound *b, bool input) {
  const mx_value *val = &p->g->values[b->value];
  char s[512];
  mx__part_shape_text(p, b->value, s, sizeof s);
  fprintf(out, "{\"name\": ");
  mx__json_string(out, val->name);
  fprintf(out, ", \"dtype\": \"%s\", \"shape\": ", mx_dtype_name(val->dtype));
  mx__json_string(out, s);
  fprintf(out, ", \"parent_index\": %u, \"%s\": %u", b->parent_index, input ? "from" : "to", b->peer);
  if (input) fprintf(out, ", \"const\": %s", b->constant ? "true" : "false");
  fputc('}', out);
}

static void ids_json(FILE *out, const uint32_t *ids, uint32_t n) { mx__part_print_ids(out, ids, n); }

static void cluster_json(FILE *out, const mx_partition *p, uint32_t id) {
  const mx__part_cluster *c = &p->clusters[id];
  const mx_graph *g = p->g;
  fprintf(out, "    {\"id\": %u, \"type\": \"%s\", \"call\": ", id, mx_cluster_type_name(c->type));
  if (p->root && c->call != MX_NO_NODE)
    mx__json_string(out, p->root->nodes[c->call].name);
  else
    fprintf(out, "null");
  fprintf(out, ", \"rank_min\": %lld, \"rank_max\": %lld,\n     \"nodes\": [", (long long)c->min_rank,
          (long long)c->max_rank);
  if (c->type == MX_CLUSTER_DATA || c->type == MX_CLUSTER_INPUT) {
    mx__json_string(out, mx__part_cluster_label(p, id, 0));
  } else {
    for (uint32_t m = 0; m < c->n_nodes; m++) {
      if (m) fprintf(out, ", ");
      mx__json_string(out, g->nodes[p->members[c->first_node + m]].name);
    }
  }
  fprintf(out, "],\n     \"constants\": [");
  if (c->type == MX_CLUSTER_KNOWN || c->type == MX_CLUSTER_UNKNOWN) {
    for (uint32_t k = 0; k < c->n_consts; k++) {
      const mx__part_const *kc = &p->consts[p->cluster_consts[c->first_const + k]];
      if (k) fprintf(out, ", ");
      mx__json_string(out, kc->node != MX_NO_NODE ? g->nodes[kc->node].name : g->values[kc->value].name);
    }
  }
  fprintf(out, "],\n     \"inputs\": [");
  for (uint32_t k = 0; k < c->n_in; k++) {
    if (k) fprintf(out, ", ");
    bound_json(out, p, &p->bounds[c->first_in + k], true);
  }
  fprintf(out, "],\n     \"outputs\": [");
  for (uint32_t k = 0; k < c->n_out; k++) {
    if (k) fprintf(out, ", ");
    bound_json(out, p, &p->bounds[c->first_out + k], false);
  }
  fprintf(out, "],\n     \"in_clusters\": ");
  ids_json(out, p->links + c->first_pred, c->n_pred);
  fprintf(out, ", \"out_clusters\": ");
  ids_json(out, p->links + c->first_succ, c->n_succ);
  if (c->type == MX_CLUSTER_UNKNOWN && p->spec) {
    const mx_spec_info *sp = &p->spec[id];
    fprintf(out, ",\n     \"specializable\": %s, \"spec_symbols\": [", sp->specializable ? "true" : "false");
    for (uint32_t k = 0; sp->specializable && k < sp->n_syms; k++) {
      if (k) fprintf(out, ", ");
      mx__json_string(out, mx_symtab_symbol_name(g->syms, sp->syms[k]));
    }
    fprintf(out, "]");
    if (!sp->specializable) {
      fprintf(out, ", \"spec_why\": ");
      mx__json_string(out, sp->why ? sp->why : "");
    }
  }
  /* The control nodes an UNKNOWN cluster runs, with their subgraphs nested. */
  size_t n_control = 0;
  for (uint32_t k = 0; c->type == MX_CLUSTER_UNKNOWN && k < c->n_nodes; k++) {
    const mx_node *nd = &p->g->nodes[p->members[c->first_node + k]];
    if (!mx__part_is_control_call(nd)) continue;
    fprintf(out, "%s", n_control++ ? ", " : ",\n     \"control\": [");
    mx__part_dump_control_json(out, p, nd);
  }
  if (n_control) fprintf(out, "]");
  fprintf(out, "}");
}

mx_status mx_partition_dump_json(const mx_partition *p, FILE *out) {
  if (!p || !out) return MX_ERR_INVALID_ARGUMENT;
  const mx_graph *g = p->g;
  fprintf(out, "{\"graph\": ");
  mx__json_string(out, g->name);
  fprintf(out, ",\n \"options\": {\"static_min_ops\": %lld, \"stable\": %s},\n \"clusters\": [\n",
          (long long)p->static_min_ops, p->stable ? "true" : "false");
  for (uint32_t id = 0; id < p->n_clusters; id++) {
    cluster_json(out, p, id);
    fprintf(out, "%s\n", id + 1 < p->n_clusters ? "," : "");
  }
  fprintf(out, " ],\n \"nodes\": [\n");
  char line[1024];
  for (size_t i = 0; i < p->n_order; i++) {
    mx_node_id n = p->order[i];
    const mx_node *nd = &g->nodes[n];
    uint32_t c = p->cluster_of_node[n];
    fprintf(out, "    {\"name\": ");
    mx__json_string(out, nd->name);
    fprintf(out, ", \"op\": ");
    mx__json_string(out, nd->op_type);
    fprintf(out, ", \"rank\": %zu, \"cluster\": %u, \"unknown\": %s, \"reason\": \"%s\", \"detail\": ", i, c,
            p->clusters[c].type == MX_CLUSTER_UNKNOWN ? "true" : "false",
            mx_partition_reason_name(p->reason[n].kind));
    mx__part_reason_text(p, n, line, sizeof line);
    mx__json_string(out, line);
    fprintf(out, "}%s\n", i + 1 < p->n_order ? "," : "");
  }
  /* A shard's collectives (mixrt shard), in graph order, with the split each one undoes: the
   * text dump's note of `mixrt partition`, here for tools. Empty for an unsharded model. */
  fprintf(out, " ],\n \"collectives\": [");
  for (size_t i = 0, shown = 0; i < p->n_order; i++) {
    mx_node_id n = p->order[i];
    if (!mx__shard_explain(g, n, line, sizeof line)) continue;
    const mx_attr *ws = mx__node_attr(&g->nodes[n], "world_size");
    fprintf(out, "%s\n    {\"name\": ", shown++ ? "," : "");
    mx__json_string(out, g->nodes[n].name);
    fprintf(out, ", \"op\": ");
    mx__json_string(out, g->nodes[n].op_type);
    fprintf(out, ", \"world_size\": %lld, \"cluster\": %u, \"why\": ", ws ? (long long)ws->i : 1LL,
            p->cluster_of_node[n]);
    mx__json_string(out, line);
    fputc('}', out);
  }
  fprintf(out, "],\n \"symbols\": [");
  for (size_t k = 0, shown = 0; k < p->n_sym_kinds; k++) {
    if (p->sym_kinds[k] == MX_SPEC_SYM_UNUSED) continue;
    fprintf(out, "%s{\"name\": ", shown++ ? ", " : "");
    mx__json_string(out, mx_symtab_symbol_name(g->syms, k));
    fprintf(out, ", \"kind\": \"%s\"}", mx__spec_sym_kind_name((mx_spec_sym_kind)p->sym_kinds[k]));
  }
  const mx_partition_totals *t = &p->totals;
  fprintf(out,
          "],\n \"totals\": {\"clusters\": %u, \"known_clusters\": %zu, \"unknown_clusters\": %zu, "
          "\"known_nodes\": %zu, \"unknown_nodes\": %zu, \"constants\": %zu, \"shared_constants\": "
          "%zu, "
          "\"boundary_values\": %zu}}\n",
          p->n_clusters, t->known_clusters, t->unknown_clusters, t->known_nodes, t->unknown_nodes,
          t->constants, t->shared_constants, t->boundary_values);
  return ferror(out) ? MX_ERR_IO : MX_OK;
}
