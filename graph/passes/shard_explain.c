/* Why a collective of a sharded graph is there, read off the graph itself (a rank file written
 * by `mixrt shard` carries no notes): the node feeding it says which split it undoes. Used by
 * the partition dump of `mixrt partition` and by `mixrt shard`'s listing. */
#include <stdio.h>
#include <string.h>

#include "graph/passes/shard.h"

/* The node the collective's input comes from; a Gather there is a vocabulary-split embedding. */
static const mx_node *source_of(const mx_graph *g, const mx_node *coll, bool *embedding) {
  *embedding = false;
  if (!coll->n_inputs || coll->inputs[0] == MX_NO_VALUE) return NULL;
  mx_node_id p = g->values[coll->inputs[0]].producer;
  if (p == MX_NO_NODE) return NULL;
  const mx_node *pn = &g->nodes[p];
  if (!pn->domain[0] && !strcmp(pn->op_type, "Gather")) *embedding = true;
  return pn;
}

bool mx__shard_explain(const mx_graph *g, mx_node_id n, char *buf, size_t cap) {
  const mx_node *nd = &g->nodes[n];
  if (!mx__shard_is_collective(nd)) return false;
  const mx_attr *ws = mx__node_attr(nd, "world_size"), *ax = mx__node_attr(nd, "axis");
  long long world = ws ? (long long)ws->i : 1, axis = ax ? (long long)ax->i : 0;
  bool embedding;
  const mx_node *src = source_of(g, nd, &embedding);
  const char *sname = src ? src->name : "?", *sop = src ? src->op_type : "?";
  bool matmul = src && !src->domain[0] && !strcmp(src->op_type, "MatMul");
  if (!strcmp(nd->op_type, "AllReduce")) {
    if (matmul)
      snprintf(
          buf, cap,
          "sums the %lld ranks' partial products of row-split MatMul '%s' (its weight's rows cut %lld ways)",
          world, sname, world);
    else if (embedding)
      snprintf(buf, cap,
               "sums the vocabulary-split rows of embedding Gather '%s' (each id's row lives on one of %lld "
               "ranks)",
               sname, world);
    else
      snprintf(buf, cap, "sums the %lld ranks' parts of '%s' (%s)", world, sname, sop);
  } else if (!strcmp(nd->op_type, "AllGather")) {
    if (matmul)
      snprintf(buf, cap, "gathers the %lld vocabulary-split column blocks of MatMul '%s' on axis %lld", world,
               sname, axis);
    else
      snprintf(buf, cap, "gathers the %lld ranks' parts of '%s' (%s) on axis %lld", world, sname, sop, axis);
  } else {
    snprintf(buf, cap, "%s over %lld ranks of '%s' (%s)", nd->op_type, world, sname, sop);
  }
  return true;
}
