/* Dependency order of an ONNX graph's nodes.
 *
 * ONNX files should list nodes topologically, but exporters and hand edits do not always, so
 * the importer computes the order itself from names: a node depends on the producers of its
 * inputs and of every outer name its subgraphs use (an If branch reading a value of the
 * enclosing graph must be imported after that value exists). Among ready nodes the file
 * order is kept, so a sorted file imports in its own order. A name that nothing defines, or a
 * cycle, is reported with the node and the name at fault. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/grow.h"
#include "common/heap.h"
#include "graph/onnx/onnx_impl.h"

/* --- name sets -------------------------------------------------------------------------------- */

void mx__onnx_names_init(mx__onnx_names *s) {
  memset(s, 0, sizeof *s);
  mx__strmap_init(&s->seen);
}

void mx__onnx_names_free(mx__onnx_names *s) {
  free(s->v);
  mx__strmap_free(&s->seen);
  memset(s, 0, sizeof *s);
}

bool mx__onnx_names_add(mx__onnx_names *s, const char *name) {
  if (mx__strmap_get(&s->seen, name, NULL)) return true;
  if (s->n >= UINT32_MAX || !MX_GROW(s->v, s->cap, s->n + 1)) return false;
  if (!mx__strmap_put(&s->seen, name, (uint32_t)s->n)) return false;
  s->v[s->n++] = name;
  return true;
}

/* --- small helpers ---------------------------------------------------------------------------- */

int mx__onnx_attr_type(const Onnx__AttributeProto *a) {
  if (a->has_type && a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED) return (int)a->type;
  if (a->has_f) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
  if (a->has_i) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
  if (a->has_s) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
  if (a->t) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
  if (a->g) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH;
  if (a->sparse_tensor) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSOR;
  if (a->tp) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTO;
  if (a->n_floats) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
  if (a->n_ints) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
  if (a->n_strings) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS;
  if (a->n_tensors) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSORS;
  if (a->n_graphs) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS;
  if (a->n_sparse_tensors) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSORS;
  if (a->n_type_protos) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTOS;
  return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED;
}

const char *mx__onnx_node_label(const Onnx__NodeProto *np, size_t index, char *buf, size_t n) {
  const char *op = np->op_type && *np->op_type ? np->op_type : "?";
  if (np->name && *np->name)
    snprintf(buf, n, "'%.100s' (%.60s)", np->name, op);
  else
    snprintf(buf, n, "#%zu (%.60s)", index, op);
  return buf;
}

bool mx__onnx_scope_defines(const mx__onnx_scope *s, const char *name) {
  for (; s; s = s->parent)
    if (mx__strmap_get(&s->defined, name, NULL)) return true;
  return false;
}

/* The graph attributes of a node whose subgraphs take part in ordering. */
static bool is_graph_attr(const Onnx__AttributeProto *a) {
  return a && a->g && mx__onnx_attr_type(a) == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH;
}

/* --- free names of a graph -------------------------------------------------------------------- */

/* Adds `name` to out unless it is empty or `defined` holds it. */
static bool add_free(mx__onnx_names *out, const mx_strmap *defined, const char *name) {
  if (!name || !*name || mx__strmap_get(defined, name, NULL)) return true;
  return mx__onnx_names_add(out, name);
}

mx_status mx__onnx_free_names(const Onnx__GraphProto *gp, int depth, mx__onnx_names *out, mx_error *err) {
  mx_status st = MX_OK;
  mx_strmap defined;
  mx__onnx_names inner;
  mx__strmap_init(&defined);
  mx__onnx_names_init(&inner);
  if (depth > MX_ONNX_MAX_GRAPH_DEPTH) {
    st =
        mx__fail(err, MX_ERR_LIMIT, "subgraphs are nested more than %d levels deep", MX_ONNX_MAX_GRAPH_DEPTH);
    goto done;
  }
  /* Everything gp defines, wherever it is in the file. */
  for (size_t i = 0; i < gp->n_input; i++)
    if (gp->input[i] && gp->input[i]->name && !mx__strmap_put(&defined, gp->input[i]->name, 0)) goto oom;
  for (size_t i = 0; i < gp->n_initializer; i++)
    if (gp->initializer[i] && gp->initializer[i]->name &&
        !mx__strmap_put(&defined, gp->initializer[i]->name, 0))
      goto oom;
  for (size_t i = 0; i < gp->n_node; i++) {
    const Onnx__NodeProto *np = gp->node[i];
    for (size_t k = 0; k < np->n_output; k++)
      if (np->output[k] && *np->output[k] && !mx__strmap_put(&defined, np->output[k], 0)) goto oom;
  }
  /* Everything gp uses. */
  for (size_t i = 0; i < gp->n_node; i++) {
    const Onnx__NodeProto *np = gp->node[i];
    for (size_t k = 0; k < np->n_input; k++)
      if (!add_free(out, &defined, np->input[k])) goto oom;
    for (size_t k = 0; k < np->n_attribute; k++) {
      if (!is_graph_attr(np->attribute[k])) continue;
      inner.n = 0;
      mx__strmap_free(&inner.seen);
      st = mx__onnx_free_names(np->attribute[k]->g, depth + 1, &inner, err);
      if (st != MX_OK) goto done;
      for (size_t j = 0; j < inner.n; j++)
        if (!add_free(out, &defined, inner.v[j])) goto oom;
    }
  }
  for (size_t i = 0; i < gp->n_output; i++)
    if (gp->output[i] && !add_free(out, &defined, gp->output[i]->name)) goto oom;
  goto done;
oom:
  st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory collecting the names of a subgraph");
done:
  mx__onnx_names_free(&inner);
  mx__strmap_free(&defined);
  return st;
}

/* --- ordering --------------------------------------------------------------------------------- */

/* One dependency: node `consumer` uses `name`, produced by node `producer`. */
typedef struct dep_edge {
  uint32_t producer;
  uint32_t consumer;
  const char *name; /* borrowed from the graph proto */
} dep_edge;

typedef struct edge_list {
  dep_edge *v;
  size_t n, cap;
} edge_list;

/* Records that node i uses `name` (an input or a subgraph's outer name). */
static mx_status use_name(mx__onnx_import *im, const mx__onnx_scope *sc, uint32_t i, const char *name,
                          const char *subgraph_attr, edge_list *edges) {
  char lb[200];
  const Onnx__NodeProto *np = sc->gp->node[i];
  uint32_t producer;
  if (mx__strmap_get(&sc->defined, name, &producer)) {
    if (producer == MX_ONNX_NOT_NODE) return MX_OK;
    if (producer == i)
      return mx__fail(im->err, MX_ERR_INVALID_GRAPH,
                      "node %s uses its own output '%s'%s%s: the graph has a cycle",
                      mx__onnx_node_label(np, i, lb, sizeof lb), name, subgraph_attr ? " in subgraph " : "",
                      subgraph_attr ? subgraph_attr : "");
    if (!MX_GROW(edges->v, edges->cap, edges->n + 1))
      return mx__fail(im->err, MX_ERR_OUT_OF_MEMORY, "out of host memory ordering nodes");
    edges->v[edges->n++] = (dep_edge){producer, i, name};
    return MX_OK;
  }
  if (mx__onnx_scope_defines(sc->parent, name)) return MX_OK; /* an outer value */
  if (subgraph_attr)
    return mx__fail(im->err, MX_ERR_INVALID_GRAPH,
                    "node %s: subgraph '%s' uses '%s', which no node, graph input or initializer "
                    "defines",
                    mx__onnx_node_label(np, i, lb, sizeof lb), subgraph_attr, name);
  return mx__fail(im->err, MX_ERR_INVALID_GRAPH,
                  "node %s: input '%s' is not produced by any node and is not a graph input or "
                  "initializer",
                  mx__onnx_node_label(np, i, lb, sizeof lb), name);
}

/* Collects the dependencies of every node of sc->gp, grouped by consumer in node order. */
static mx_status collect_edges(mx__onnx_import *im, const mx__onnx_scope *sc, edge_list *edges) {
  mx_status st = MX_OK;
  mx__onnx_names outer;
  mx__onnx_names_init(&outer);
  const Onnx__GraphProto *gp = sc->gp;
  for (uint32_t i = 0; i < gp->n_node; i++) {
    const Onnx__NodeProto *np = gp->node[i];
    for (size_t k = 0; k < np->n_input; k++) {
      if (!np->input[k] || !*np->input[k]) continue; /* omitted optional input */
      st = use_name(im, sc, i, np->input[k], NULL, edges);
      if (st != MX_OK) goto done;
    }
    for (size_t k = 0; k < np->n_attribute; k++) {
      const Onnx__AttributeProto *a = np->attribute[k];
      if (!is_graph_attr(a)) continue;
      mx__onnx_names_free(&outer);
      mx__onnx_names_init(&outer);
      st = mx__onnx_free_names(a->g, sc->depth + 1, &outer, im->err);
      if (st != MX_OK) {
        char lb[200];
        mx__error_prefix(im->err, "node %s: subgraph '%.100s': ", mx__onnx_node_label(np, i, lb, sizeof lb),
                         a->name ? a->name : "");
        goto done;
      }
      for (size_t j = 0; j < outer.n; j++) {
        st = use_name(im, sc, i, outer.v[j], a->name ? a->name : "", edges);
        if (st != MX_OK) goto done;
      }
    }
  }
done:
  mx__onnx_names_free(&outer);
  return st;
}

/* Reports a cycle among the nodes not placed (indeg > 0). Starting from one of them and
 * following unplaced producers must revisit a node; that node is on a cycle. */
static mx_status report_cycle(mx__onnx_import *im, const mx__onnx_scope *sc, const uint32_t *indeg,
                              const dep_edge *edges, const size_t *in_start, uint8_t *mark) {
  char l1[200], l2[200];
  size_t n = sc->gp->n_node;
  uint32_t x = 0;
  while (x < n && indeg[x] == 0) x++;
  const dep_edge *via = NULL;
  for (size_t steps = 0; steps <= n; steps++) {
    if (mark[x]) break;
    mark[x] = 1;
    via = NULL;
    for (size_t e = in_start[x]; e < in_start[x + 1]; e++)
      if (indeg[edges[e].producer] > 0) {
        via = &edges[e];
        break;
      }
    if (!via) break; /* cannot happen: an unplaced node waits for an unplaced producer */
    x = via->producer;
  }
  /* x is on the cycle; name what it waits for. */
  for (size_t e = in_start[x]; e < in_start[x + 1]; e++)
    if (indeg[edges[e].producer] > 0) {
      via = &edges[e];
      break;
    }
  if (!via)
    return mx__fail(im->err, MX_ERR_INVALID_GRAPH, "graph '%s': node %s is on a cycle",
                    sc->gp->name ? sc->gp->name : "", mx__onnx_node_label(sc->gp->node[x], x, l1, sizeof l1));
  return mx__fail(im->err, MX_ERR_INVALID_GRAPH,
                  "graph '%s' has a cycle: node %s needs '%s', produced by node %s, which "
                  "depends on it",
                  sc->gp->name ? sc->gp->name : "", mx__onnx_node_label(sc->gp->node[x], x, l1, sizeof l1),
                  via->name, mx__onnx_node_label(sc->gp->node[via->producer], via->producer, l2, sizeof l2));
}

mx_status mx__onnx_order_nodes(mx__onnx_import *im, const mx__onnx_scope *sc, uint32_t **order) {
  mx_status st = MX_OK;
  size_t n = sc->gp->n_node;
  edge_list edges = {0};
  uint32_t *indeg = NULL, *heap = NULL, *out = NULL, *succ = NULL;
  size_t *in_start = NULL, *out_start = NULL, *cursor = NULL;
  uint8_t *mark = NULL;
  *order = NULL;
  if (n >= UINT32_MAX)
    return mx__fail(im->err, MX_ERR_LIMIT, "graph '%s' has too many nodes", sc->gp->name ? sc->gp->name : "");

  st = collect_edges(im, sc, &edges);
  if (st != MX_OK) goto free_edges;
  indeg = calloc(n + 1, sizeof *indeg);
  heap = malloc((n + 1) * sizeof *heap);
  out = malloc((n + 1) * sizeof *out);
  succ = malloc((edges.n + 1) * sizeof *succ);
  in_start = calloc(n + 1, sizeof *in_start);
  out_start = calloc(n + 1, sizeof *out_start);
  cursor = malloc((n + 1) * sizeof *cursor);
  mark = calloc(n + 1, 1);
  if (!indeg || !heap || !out || !succ || !in_start || !out_start || !cursor || !mark) {
    st = mx__fail(im->err, MX_ERR_OUT_OF_MEMORY, "out of host memory ordering nodes");
    goto free_arrays;
  }
  /* Edges are grouped by consumer (collected in node order), so in_start indexes them
   * directly; the successor lists (by producer) are built for the sweep. */
  for (size_t e = 0; e < edges.n; e++) {
    in_start[edges.v[e].consumer + 1]++;
    out_start[edges.v[e].producer + 1]++;
    indeg[edges.v[e].consumer]++;
  }
  for (size_t i = 0; i < n; i++) {
    in_start[i + 1] += in_start[i];
    out_start[i + 1] += out_start[i];
  }
  memcpy(cursor, out_start, n * sizeof *cursor);
  for (size_t e = 0; e < edges.n; e++) succ[cursor[edges.v[e].producer]++] = edges.v[e].consumer;

  /* Kahn's sweep; the heap keeps file order among ready nodes. */
  size_t hn = 0, on = 0;
  for (uint32_t i = 0; i < n; i++)
    if (indeg[i] == 0) mx__heap_u32_push(heap, &hn, i);
  while (hn) {
    uint32_t x = mx__heap_u32_pop(heap, &hn);
    out[on++] = x;
    for (size_t e = out_start[x]; e < out_start[x + 1]; e++)
      if (--indeg[succ[e]] == 0) mx__heap_u32_push(heap, &hn, succ[e]);
  }
  if (on != n) {
    st = report_cycle(im, sc, indeg, edges.v, in_start, mark);
    goto free_arrays;
  }
  *order = out;
  out = NULL;
free_arrays:
  free(mark);
  free(cursor);
  free(out_start);
  free(in_start);
  free(succ);
  free(out);
  free(heap);
  free(indeg);
free_edges:
  free(edges.v);
  return st;
}
