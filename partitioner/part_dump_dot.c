/* The Graphviz DOT dump: every node, graph input, constant and graph output drawn inside the
 * box of its cluster (KNOWN green, UNKNOWN orange, DATA, INPUT and NETOUTPUT grey); data edges
 * between clusters are bold. The collectives of a tensor-parallel shard (mixrt shard) are blue
 * and say under their op why they are there. Ids: n<node id>, v<value id> (graph inputs and
 * initializers), o<index> (graph outputs). */
#include <stdio.h>

#include "graph/passes/shard.h"
#include "partitioner/partitioner_impl.h"

/* Writes text escaped for a DOT string (quotes and backslashes escaped, control characters
 * dropped). */
static void dot_escaped(FILE *out, const char *s) {
  for (; s && *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      fprintf(out, "\\%c", c);
    else if (c >= 0x20)
      fputc(c, out);
  }
}

/* A DOT string literal. */
static void dot_string(FILE *out, const char *s) {
  fputc('"', out);
  dot_escaped(out, s);
  fputc('"', out);
}

/* A two-line DOT label "first\nsecond". */
static void dot_label2(FILE *out, const char *first, const char *second) {
  fputc('"', out);
  dot_escaped(out, first);
  fputs("\\n", out);
  dot_escaped(out, second);
  fputc('"', out);
}

/* The subgraphs of control node nd as DOT clusters nested in the current one, each holding its
 * ops (and, recursively, the subgraphs of the control nodes among them); `path` makes the ids
 * unique. */
static void control_dot(FILE *out, const mx_partition *p, const mx_node *nd, const char *path, int depth) {
  uint32_t k = 0;
  for (uint32_t a = 0; a < nd->n_attrs; a++) {
    const mx_graph *sub = nd->attrs[a].type == MX_ATTR_GRAPH ? nd->attrs[a].graph : NULL;
    if (!sub) continue;
    char id[96];
    snprintf(id, sizeof id, "%s_%u", path, k++);
    fprintf(out, "%*ssubgraph cluster_%s {\n%*slabel=", 2 * depth, "", id, 2 * depth + 2, "");
    dot_label2(out, nd->attrs[a].name, sub->name);
    fprintf(out, "; style=dashed; color=\"#6a1b9a\"; fillcolor=\"#f3e5f5\";\n");
    /* How the body partitions as a program of its own (part_control_body.c). */
    char plan[MX_ERROR_MESSAGE_MAX];
    mx__part_body_summary(p, sub, plan, sizeof plan);
    fprintf(out, "%*s%s_plan [shape=note, label=", 2 * depth + 2, "", id);
    dot_string(out, plan);
    fprintf(out, "];\n");
    for (size_t n = 0; n < sub->n_nodes; n++) {
      const mx_node *inner = &sub->nodes[n];
      if (inner->flags & MX_NODE_DEAD) continue;
      fprintf(out, "%*s%s_n%zu [label=", 2 * depth + 2, "", id, n);
      dot_label2(out, inner->name, inner->op_type);
      fprintf(out, "];\n");
      if (!mx__part_is_control(inner)) continue;
      char inner_path[128];
      snprintf(inner_path, sizeof inner_path, "%s_n%zu", id, n);
      control_dot(out, p, inner, inner_path, depth + 1);
    }
    fprintf(out, "%*s}\n", 2 * depth, "");
  }
}

static void style_of(mx_cluster_type t, const char **line, const char **fill) {
  switch (t) {
    case MX_CLUSTER_KNOWN:
      *line = "#2e7d32";
      *fill = "#c8e6c9";
      return;
    case MX_CLUSTER_UNKNOWN:
      *line = "#e65100";
      *fill = "#ffe0b2";
      return;
    default:
      *line = "#757575";
      *fill = "#eeeeee";
      return;
  }
}

/* The DOT id of whatever produces value v. */
static void source_id(const mx_partition *p, mx_value_id v, char *buf, size_t cap) {
  const mx_graph *g = p->g;
  const mx_value *val = &g->values[v];
  uint32_t k = p->const_of_value[v];
  if (k != MX__PART_NONE && p->consts[k].node != MX_NO_NODE)
    snprintf(buf, cap, "n%u", p->consts[k].node);
  else if (!(val->flags & MX_VALUE_INPUT) && val->producer != MX_NO_NODE && mx__node_valid(g, val->producer))
    snprintf(buf, cap, "n%u", val->producer);
  else
    snprintf(buf, cap, "v%u", v);
}

static void const_node(FILE *out, const mx_partition *p, uint32_t k) {
  const mx__part_const *c = &p->consts[k];
  if (c->node != MX_NO_NODE) {
    fprintf(out, "    n%u [shape=ellipse, label=", c->node);
    dot_string(out, p->g->nodes[c->node].name);
  } else {
    fprintf(out, "    v%u [shape=ellipse, label=", c->value);
    dot_string(out, p->g->values[c->value].name);
  }
  fprintf(out, "];\n");
}

mx_status mx_partition_dump_dot(const mx_partition *p, FILE *out) {
  if (!p || !out) return MX_ERR_INVALID_ARGUMENT;
  const mx_graph *g = p->g;
  fprintf(out, "digraph partition {\n  graph [rankdir=TB, fontname=\"Helvetica\", label=");
  dot_string(out, g->name);
  fprintf(out,
          "];\n  node [shape=box, style=filled, fillcolor=white, fontname=\"Helvetica\", "
          "fontsize=10];\n");
  fprintf(out, "  edge [color=\"#616161\"];\n");
  for (uint32_t id = 0; id < p->n_clusters; id++) {
    const mx__part_cluster *c = &p->clusters[id];
    const char *line, *fill;
    style_of(c->type, &line, &fill);
    char label[96];
    if (c->n_nodes)
      snprintf(label, sizeof label, "%u %s (%u op%s)", id, mx_cluster_type_name(c->type), c->n_nodes,
               c->n_nodes == 1 ? "" : "s");
    else
      snprintf(label, sizeof label, "%u %s", id, mx_cluster_type_name(c->type));
    fprintf(out, "  subgraph cluster_%u {\n    label=", id);
    dot_string(out, label);
    fprintf(out, "; style=filled; color=\"%s\"; fillcolor=\"%s\";\n", line, fill);
    if (c->type == MX_CLUSTER_DATA) {
      char s[256];
      mx__part_shape_text(p, c->source, s, sizeof s);
      fprintf(out, "    v%u [shape=ellipse, label=", c->source);
      dot_label2(out, g->values[c->source].name, s);
      fprintf(out, "];\n");
    }
    for (uint32_t k = 0; k < c->n_consts; k++) const_node(out, p, p->cluster_consts[c->first_const + k]);
    for (uint32_t m = 0; m < c->n_nodes; m++) {
      mx_node_id n = p->members[c->first_node + m];
      /* A control node (wrapped into a call of its own) shows its op and its subgraphs. */
      const mx_node *control =
          mx__part_is_control_call(&g->nodes[n]) ? mx__part_control_node(&g->nodes[n]) : NULL;
      char why[512];
      fprintf(out, "    n%u [label=", n);
      if (!control && mx__shard_explain(g, n, why, sizeof why)) {
        /* A collective: which split it undoes, under its name and op. */
        fputc('"', out);
        dot_escaped(out, g->nodes[n].name);
        fputs("\\n", out);
        dot_escaped(out, g->nodes[n].op_type);
        fputs("\\n", out);
        dot_escaped(out, why);
        fprintf(out, "\", color=\"#0d47a1\", fillcolor=\"#bbdefb\", penwidth=2, tooltip=");
        dot_string(out, why);
      } else {
        dot_label2(out, g->nodes[n].name, control ? control->op_type : g->nodes[n].op_type);
      }
      fprintf(out, "];\n");
      if (control) {
        char path[32];
        snprintf(path, sizeof path, "n%u", n);
        control_dot(out, p, control, path, 2);
      }
    }
    if (c->type == MX_CLUSTER_NETOUTPUT) {
      for (size_t i = 0; i < g->n_outputs; i++) {
        fprintf(out, "    o%zu [shape=ellipse, label=", i);
        dot_string(out, g->values[g->outputs[i]].name);
        fprintf(out, "];\n");
      }
    }
    fprintf(out, "  }\n");
  }
  /* Edges, in node order; bold across clusters. */
  char src[32];
  for (size_t i = 0; i < p->n_order; i++) {
    mx_node_id n = p->order[i];
    const mx_node *nd = &g->nodes[n];
    uint32_t cn = p->cluster_of_node[n];
    for (uint32_t k = 0; k < nd->n_inputs; k++) {
      mx_value_id v = nd->inputs[k];
      if (v == MX_NO_VALUE) continue;
      source_id(p, v, src, sizeof src);
      bool cross = p->cluster_of_value[v] != cn;
      fprintf(out, "  %s -> n%u%s;\n", src, n, cross ? " [style=bold, penwidth=2.5, color=\"#000000\"]" : "");
    }
  }
  for (size_t i = 0; i < g->n_outputs; i++) {
    source_id(p, g->outputs[i], src, sizeof src);
    fprintf(out, "  %s -> o%zu [style=bold, penwidth=2.5, color=\"#000000\"];\n", src, i);
  }
  fprintf(out, "}\n");
  return ferror(out) ? MX_ERR_IO : MX_OK;
}
