/* A control node's body (an If branch, a Loop or Scan body) made into a root graph of its own,
 * so the root's pipeline (optimize, partition, static models, dynamic executor) compiles it.
 *
 * The copy takes the body's inputs first, then one input per value the body (or a graph nested
 * in it) reads from the enclosing graphs, under the same name, so nested bodies still find
 * their captures by name. Nodes, constants and nested subgraphs are deep-copied: the original
 * body stays with its node (the interpreter fallback and the dumps read it). Symbolic dims of
 * the inputs become symbols of the copy's own table, by name; an expression dim becomes a fresh
 * symbol (the run binds it from the tensor fed). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/grow.h"
#include "common/json.h"
#include "partitioner/partitioner_impl.h"

/* The value called `name` in g or the nearest enclosing graph (not an outer reference), or
 * NULL. */
static const mx_value *find_defined(const mx_graph *g, const char *name) {
  for (; g; g = g->parent) {
    mx_value_id v = mx_graph_find_value(g, name);
    if (v != MX_NO_VALUE && mx__value_valid(g, v) && !(g->values[v].flags & MX_VALUE_OUTER))
      return &g->values[v];
  }
  return NULL;
}

/* The shape s of a value of `from`, its dims re-made in the symbol table of `to`. */
static mx_shape translate_shape(const mx_graph *from, mx_graph *to, const mx_shape *s) {
  mx_shape r = *s;
  for (int32_t k = 0; k < s->rank && k < MX_MAX_RANK; k++) {
    mx_dim d = s->dims[k];
    if (!mx_dim_is_expr(d)) continue;
    char name[128];
    if (mx_sym_symbol_index(from->syms, d) >= 0) {
      mx_sym_format(from->syms, d, name, sizeof name);
      r.dims[k] = mx_sym_named(to->syms, name);
    } else {
      r.dims[k] = mx_sym_fresh(to->syms, "body_dim");
    }
    if (r.dims[k] == MX_DIM_UNKNOWN || mx_dim_is_concrete(r.dims[k])) r.dims[k] = MX_DIM_UNKNOWN;
  }
  return r;
}

/* Adds to names (no repeats) the outer references of sub and of the graphs nested in it that
 * resolve outside `body` (in the graphs enclosing it). */
static bool collect_captures(const mx_graph *body, const mx_graph *sub, const char ***names, size_t *n,
                             size_t *cap) {
  for (size_t v = 0; v < sub->n_values; v++) {
    const mx_value *val = &sub->values[v];
    if ((val->flags & (MX_VALUE_DEAD | MX_VALUE_OUTER)) != MX_VALUE_OUTER) continue;
    /* Defined in the body or in a graph between it and sub: not a capture of the body. */
    bool inside = false;
    for (const mx_graph *g = sub; g && !inside; g = g->parent) {
      if (g != sub) {
        mx_value_id id = mx_graph_find_value(g, val->name);
        inside = id != MX_NO_VALUE && mx__value_valid(g, id) && !(g->values[id].flags & MX_VALUE_OUTER);
      }
      if (g == body) break;
    }
    if (inside || !find_defined(body->parent, val->name)) continue;
    bool seen = false;
    for (size_t i = 0; i < *n && !seen; i++) seen = strcmp((*names)[i], val->name) == 0;
    if (seen) continue;
    if (!MX_GROW(*names, *cap, *n + 1)) return false;
    (*names)[(*n)++] = val->name;
  }
  for (size_t i = 0; i < sub->n_subgraphs; i++)
    if (!collect_captures(body, sub->subgraphs[i], names, n, cap)) return false;
  return true;
}

static mx_status copy_graph(mx_graph *dst, const mx_graph *src, const char *const *captures,
                            size_t n_captures, mx_error *err);

/* Copies node nd of src into dst (map: src value id -> dst value id). */
static mx_status copy_node(mx_graph *dst, const mx_graph *src, const mx_node *nd, mx_value_id *map,
                           mx_error *err) {
  mx_status st = MX_OK;
  mx_value_id *ins = calloc(nd->n_inputs + 1, sizeof *ins), *outs = calloc(nd->n_outputs + 1, sizeof *outs);
  const char **out_names = calloc(nd->n_outputs + 1, sizeof *out_names);
  mx_attr *attrs = calloc(nd->n_attrs + 1, sizeof *attrs);
  if (!ins || !outs || !out_names || !attrs) {
    st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory copying node '%s'", nd->name);
    goto done;
  }
  for (uint32_t i = 0; i < nd->n_inputs; i++)
    ins[i] = nd->inputs[i] == MX_NO_VALUE ? MX_NO_VALUE : map[nd->inputs[i]];
  for (uint32_t i = 0; i < nd->n_inputs; i++)
    if (nd->inputs[i] != MX_NO_VALUE && ins[i] == MX_NO_VALUE) {
      st = mx__node_fail(err, nd, MX_ERR_INVALID_GRAPH, "input %u ('%s') has no definition in the body copy",
                         i, src->values[nd->inputs[i]].name);
      goto done;
    }
  for (uint32_t k = 0; k < nd->n_outputs; k++) out_names[k] = src->values[nd->outputs[k]].name;
  if (nd->n_attrs) memcpy(attrs, nd->attrs, nd->n_attrs * sizeof *attrs); /* attrs may be NULL when 0 */
  for (uint32_t a = 0; a < nd->n_attrs && st == MX_OK; a++) {
    if (attrs[a].type != MX_ATTR_GRAPH || !attrs[a].graph) continue;
    mx_graph *nested = NULL;
    st = mx__graph_create_subgraph(dst, attrs[a].graph->name, &nested);
    if (st != MX_OK) {
      st = mx__fail(err, st, "copying the body: %s", mx_graph_last_error(dst));
      break;
    }
    st = copy_graph(nested, attrs[a].graph, NULL, 0, err);
    attrs[a].graph = nested;
  }
  if (st != MX_OK) goto done;
  mx_node_desc d = {.op_type = nd->op_type,
                    .domain = nd->domain,
                    .name = nd->name,
                    .inputs = ins,
                    .n_inputs = nd->n_inputs,
                    .attrs = attrs,
                    .n_attrs = nd->n_attrs,
                    .output_names = out_names,
                    .n_outputs = nd->n_outputs};
  st = mx_graph_add_node(dst, &d, outs);
  if (st != MX_OK) {
    st = mx__fail(err, st, "copying the body: %s", mx_graph_last_error(dst));
    goto done;
  }
  for (uint32_t k = 0; k < nd->n_outputs; k++) map[nd->outputs[k]] = outs[k];
done:
  free(ins);
  free(outs);
  free(out_names);
  free(attrs);
  return st;
}

/* Copies src into the empty graph dst. With captures (the top of the copy), src's outer
 * references become inputs of dst after src's own (named in captures); without (a nested
 * subgraph), they stay outer references. */
static mx_status copy_graph(mx_graph *dst, const mx_graph *src, const char *const *captures,
                            size_t n_captures, mx_error *err) {
  mx_status st = MX_OK;
  mx_value_id *map = malloc((src->n_values ? src->n_values : 1) * sizeof *map);
  mx_node_id *order = malloc((src->n_nodes ? src->n_nodes : 1) * sizeof *order);
  if (!map || !order) {
    st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory copying graph '%s'", src->name);
    goto done;
  }
  for (size_t v = 0; v < src->n_values; v++) map[v] = MX_NO_VALUE;
#define GRAPH_FAIL(g_) (st = mx__fail(err, st, "copying the body: %s", mx_graph_last_error(g_)))
  for (size_t i = 0; i < src->n_inputs && st == MX_OK; i++) {
    const mx_value *v = &src->values[src->inputs[i]];
    mx_shape s = translate_shape(src, dst, &v->shape);
    st = mx_graph_add_input(dst, v->name, v->dtype, &s, &map[src->inputs[i]]);
    if (st == MX_OK && v->kind != MX_KIND_TENSOR)
      st = mx_graph_set_input_kind(dst, map[src->inputs[i]], v->kind);
    if (st != MX_OK) GRAPH_FAIL(dst);
  }
  for (size_t i = 0; i < n_captures && st == MX_OK; i++) {
    const mx_value *v = find_defined(src->parent, captures[i]);
    mx_value_id id;
    mx_shape s = translate_shape(src, dst, &v->shape);
    st = mx_graph_add_input(dst, v->name, v->dtype, &s, &id);
    if (st == MX_OK && v->kind != MX_KIND_TENSOR) st = mx_graph_set_input_kind(dst, id, v->kind);
    if (st != MX_OK) GRAPH_FAIL(dst);
    mx_value_id own = mx_graph_find_value(src, captures[i]);
    if (own != MX_NO_VALUE) map[own] = id;
  }
  for (size_t v = 0; v < src->n_values && st == MX_OK; v++) {
    const mx_value *val = &src->values[v];
    if ((val->flags & MX_VALUE_DEAD) || map[v] != MX_NO_VALUE) continue;
    if ((val->flags & MX_VALUE_OUTER) && !captures) {
      st = mx_graph_add_outer(dst, val->name, &map[v]);
      if (st != MX_OK) GRAPH_FAIL(dst);
    } else if ((val->flags & MX_VALUE_CONST) && val->data && !(val->flags & MX_VALUE_INPUT)) {
      st = mx_graph_add_constant(dst, val->name, val->data, &map[v]);
      if (st != MX_OK) GRAPH_FAIL(dst);
    }
  }
  size_t n = 0;
  const char *culprit = NULL;
  if (st == MX_OK && (!mx__graph_order_nodes(src, order, &n, &culprit) || n != src->n_live_nodes))
    st = mx__fail(err, MX_ERR_INVALID_GRAPH, "graph '%s' cannot be ordered%s%s", src->name,
                  culprit ? " at node " : "", culprit ? culprit : "");
  for (size_t i = 0; i < n && st == MX_OK; i++) st = copy_node(dst, src, &src->nodes[order[i]], map, err);
  for (size_t i = 0; i < src->n_outputs && st == MX_OK; i++) {
    mx_value_id o = map[src->outputs[i]];
    if (o == MX_NO_VALUE) {
      st = mx__fail(err, MX_ERR_INVALID_GRAPH, "output '%s' of graph '%s' has no definition",
                    src->values[src->outputs[i]].name, src->name);
      break;
    }
    st = mx_graph_add_output(dst, o);
    if (st != MX_OK) GRAPH_FAIL(dst);
  }
#undef GRAPH_FAIL
done:
  free(map);
  free(order);
  return st;
}

mx_status mx__part_body_standalone(const mx_graph *body, mx_graph **out, size_t *n_captures, mx_error *err) {
  *out = NULL;
  const char **names = NULL;
  size_t n = 0, cap = 0;
  if (!collect_captures(body, body, &names, &n, &cap)) {
    free(names);
    return mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory copying graph '%s'", body->name);
  }
  const mx_graph *root = body;
  while (root->parent) root = root->parent;
  mx_graph *g = NULL;
  mx_status st = mx_graph_create(body->name, &g);
  if (st != MX_OK) {
    free(names);
    return mx__fail(err, st, "out of host memory copying graph '%s'", body->name);
  }
  for (size_t i = 0; i < root->n_opsets && st == MX_OK; i++)
    st = mx_graph_set_opset(g, root->opsets[i].domain, root->opsets[i].version);
  g->ir_version = root->ir_version;
  if (st == MX_OK) st = copy_graph(g, body, names, n, err);
  free(names);
  if (st != MX_OK) {
    mx_graph_destroy(g);
    return st;
  }
  if (n_captures) *n_captures = n;
  *out = g;
  return MX_OK;
}

/* True when body and the graphs nested in it move tensors only (else why names the value). */
static bool tensors_only(const mx_graph *body, char *why, size_t cap) {
  for (size_t v = 0; v < body->n_values; v++) {
    const mx_value *val = &body->values[v];
    if (val->flags & MX_VALUE_DEAD) continue;
    if (val->kind != MX_KIND_TENSOR) {
      snprintf(why, cap, "value '%s' is a %s", val->name,
               val->kind == MX_KIND_SEQUENCE ? "sequence" : "optional");
      return false;
    }
    if (val->dtype == MX_STRING) {
      snprintf(why, cap, "value '%s' holds strings", val->name);
      return false;
    }
  }
  for (size_t i = 0; i < body->n_subgraphs; i++)
    if (!tensors_only(body->subgraphs[i], why, cap)) return false;
  return true;
}

bool mx__part_body_compilable(const mx_graph *body, char *why, size_t cap) {
  /* Nothing to compile: the interpreter hands the outputs on without running anything, which
   * costs less than a program's step. */
  if (body->n_live_nodes == 0) {
    snprintf(why, cap, "it holds no nodes (its outputs are its inputs or captures)");
    return false;
  }
  return tensors_only(body, why, cap);
}

/* --- the bodies in the dumps ----------------------------------------------------------------- */

/* The options of parent partition p that a body's partition takes over. */
static void options_of(const mx_partition *p, mx_partition_options *o) {
  mx_partition_options_init(o);
  o->static_min_ops = p->static_min_ops;
  o->stable = p->stable;
}

/* Partitions body the way a session compiles it (a standalone copy, inferred, its control nodes
 * wrapped, partitioned with the options of the parent partition p). On success the caller
 * destroys *part, then *copy; on failure why says what keeps the body in the interpreter. */
static bool partition_body(const mx_partition *p, const mx_graph *body, mx_graph **copy, mx_partition **part,
                           char *why, size_t cap) {
  mx_partition_options o;
  options_of(p, &o);
  *copy = NULL;
  *part = NULL;
  if (!mx__part_body_compilable(body, why, cap)) return false;
  mx_error err;
  mx_error_clear(&err);
  mx_graph *g = NULL;
  mx_status st = mx__part_body_standalone(body, &g, NULL, &err);
  if (st == MX_OK && mx_graph_infer(g) != MX_OK)
    st = mx__fail(&err, MX_ERR_INVALID_GRAPH, "%s", mx_graph_last_error(g));
  if (st == MX_OK) st = mx__part_wrap_control(g, NULL, &err);
  if (st == MX_OK) st = mx_partition_create(g, &o, part, &err);
  if (st != MX_OK) {
    snprintf(why, cap, "its copy does not partition: %s", err.message);
    mx_graph_destroy(g);
    return false;
  }
  *copy = g;
  return true;
}

/* The reason text of the first node of cluster id of bp. */
static void cluster_reason(const mx_partition *bp, size_t id, char *buf, size_t cap) {
  buf[0] = '\0';
  mx_node_id n = mx_partition_cluster_node(bp, id, 0);
  if (n != MX_NO_NODE) mx_partition_reason_format(bp, n, buf, cap);
}

void mx__part_dump_body_text(FILE *out, const mx_partition *p, const mx_graph *body, int depth) {
  mx_graph *copy;
  mx_partition *bp;
  char why[MX_ERROR_MESSAGE_MAX];
  if (!partition_body(p, body, &copy, &bp, why, sizeof why)) {
    fprintf(out, "%*sruns through the reference interpreter: %s\n", 2 * depth, "", why);
    return;
  }
  size_t nc = mx_partition_cluster_count(bp), known = 0, unknown = 0;
  for (size_t id = 0; id < nc; id++) {
    mx_partition_cluster_info ci;
    if (!mx_partition_cluster(bp, id, &ci) || (ci.type != MX_CLUSTER_KNOWN && ci.type != MX_CLUSTER_UNKNOWN))
      continue;
    known += ci.type == MX_CLUSTER_KNOWN;
    unknown += ci.type == MX_CLUSTER_UNKNOWN;
  }
  fprintf(
      out,
      "%*scompiled as a program of its own: %zu KNOWN cluster%s (static models, compiled once, run on each "
      "pass), %zu UNKNOWN (dynamic executor)\n",
      2 * depth, "", known, known == 1 ? "" : "s", unknown);
  for (size_t id = 0; id < nc; id++) {
    mx_partition_cluster_info ci;
    if (!mx_partition_cluster(bp, id, &ci) || (ci.type != MX_CLUSTER_KNOWN && ci.type != MX_CLUSTER_UNKNOWN))
      continue;
    fprintf(out, "%*sbody cluster %zu %s ops %zu |", 2 * depth, "", id, mx_cluster_type_name(ci.type),
            ci.n_nodes);
    for (size_t k = 0; k < ci.n_nodes && k < 3; k++) {
      mx_node_id n = mx_partition_cluster_node(bp, id, k);
      fprintf(out, "%s %s", k ? "," : "", n == MX_NO_NODE ? "?" : copy->nodes[n].name);
    }
    if (ci.n_nodes > 3) fprintf(out, ", ... (+%zu)", ci.n_nodes - 3);
    if (ci.type == MX_CLUSTER_UNKNOWN) {
      char reason[512];
      cluster_reason(bp, id, reason, sizeof reason);
      fprintf(out, " | %s", reason);
    }
    fprintf(out, "\n");
  }
  mx_partition_destroy(bp);
  mx_graph_destroy(copy);
}

void mx__part_dump_body_json(FILE *out, const mx_partition *p, const mx_graph *body) {
  mx_graph *copy;
  mx_partition *bp;
  char why[MX_ERROR_MESSAGE_MAX];
  if (!partition_body(p, body, &copy, &bp, why, sizeof why)) {
    fprintf(out, "{\"compiled\": false, \"reason\": ");
    mx__json_string(out, why);
    fprintf(out, "}");
    return;
  }
  fprintf(out, "{\"compiled\": true, \"clusters\": [");
  size_t nc = mx_partition_cluster_count(bp), shown = 0;
  for (size_t id = 0; id < nc; id++) {
    mx_partition_cluster_info ci;
    if (!mx_partition_cluster(bp, id, &ci) || (ci.type != MX_CLUSTER_KNOWN && ci.type != MX_CLUSTER_UNKNOWN))
      continue;
    fprintf(out, "%s{\"id\": %zu, \"type\": \"%s\", \"ops\": %zu, \"nodes\": [", shown++ ? ", " : "", id,
            mx_cluster_type_name(ci.type), ci.n_nodes);
    for (size_t k = 0; k < ci.n_nodes; k++) {
      mx_node_id n = mx_partition_cluster_node(bp, id, k);
      if (k) fprintf(out, ", ");
      mx__json_string(out, n == MX_NO_NODE ? "?" : copy->nodes[n].name);
    }
    fprintf(out, "]");
    if (ci.type == MX_CLUSTER_UNKNOWN) {
      char reason[512];
      cluster_reason(bp, id, reason, sizeof reason);
      fprintf(out, ", \"reason\": ");
      mx__json_string(out, reason);
    }
    fprintf(out, "}");
  }
  fprintf(out, "]}");
  mx_partition_destroy(bp);
  mx_graph_destroy(copy);
}

void mx__part_body_summary(const mx_partition *p, const mx_graph *body, char *buf, size_t cap) {
  mx_graph *copy;
  mx_partition *bp;
  char why[MX_ERROR_MESSAGE_MAX];
  if (!partition_body(p, body, &copy, &bp, why, sizeof why)) {
    snprintf(buf, cap, "interpreter: %s", why);
    return;
  }
  size_t nc = mx_partition_cluster_count(bp), known = 0, known_ops = 0, unknown = 0, unknown_ops = 0;
  for (size_t id = 0; id < nc; id++) {
    mx_partition_cluster_info ci;
    if (!mx_partition_cluster(bp, id, &ci)) continue;
    if (ci.type == MX_CLUSTER_KNOWN) known++, known_ops += ci.n_nodes;
    if (ci.type == MX_CLUSTER_UNKNOWN) unknown++, unknown_ops += ci.n_nodes;
  }
  snprintf(buf, cap, "%zu KNOWN (%zu ops), %zu UNKNOWN (%zu ops)", known, known_ops, unknown, unknown_ops);
  mx_partition_destroy(bp);
  mx_graph_destroy(copy);
}
