/* Control nodes (If, Loop, Scan and any other node holding subgraphs) made ready for the
 * partitioner: each one is wrapped into a partition call of its own.
 *
 * A control node's bodies read values of the enclosing graph by name (outer-scope captures):
 * edges no node input shows. The partitioner and the executors only follow node inputs, so
 * before partitioning every root-level control node N is replaced by a PartitionedCall node
 * (unknown = 1) whose inputs are N's inputs followed by every value N's bodies capture, and
 * whose body W holds N alone: W's inputs carry the same names as the values of the root, so
 * N's bodies find their captures in W exactly as they found them in the root. The call keeps
 * N's name and produces N's output values (same ids and names), so readers, graph outputs and
 * other bodies capturing them are unchanged.
 *
 * The partitioner marks such a call UNKNOWN (reason control_flow); the dynamic executor runs it
 * as one host op whose work is running W (v2runtime/kernels_control.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/grow.h"
#include "common/json.h"
#include "graph/ops/op.h"
#include "graph/passes/passes.h"
#include "partitioner/partitioner.h"

bool mx__part_is_control(const mx_node *nd) {
  /* Ops whose graphs are functions the op calls itself (FlexAttention's score_mod) are not
   * control flow: they keep the interpreter. */
  if (!nd->def || !(nd->def->flags & MX_OP_SUBGRAPH)) return false;
  for (uint32_t a = 0; a < nd->n_attrs; a++)
    if (nd->attrs[a].type == MX_ATTR_GRAPH) return true;
  return false;
}

bool mx__part_is_control_call(const mx_node *nd) {
  if (!mx__part_is_call(nd) || !mx__part_call_is_unknown(nd)) return false;
  const mx_graph *body = mx__part_call_body(nd);
  if (!body || body->n_live_nodes != 1) return false;
  for (size_t n = 0; n < body->n_nodes; n++)
    if (!(body->nodes[n].flags & MX_NODE_DEAD)) return mx__part_is_control(&body->nodes[n]);
  return false;
}

const mx_node *mx__part_control_node(const mx_node *call) {
  const mx_graph *body = mx__part_call_body(call);
  for (size_t n = 0; body && n < body->n_nodes; n++)
    if (!(body->nodes[n].flags & MX_NODE_DEAD)) return &body->nodes[n];
  return NULL;
}

/* Counts the values g reads by name from enclosing graphs (its captures). */
static size_t count_captures(const mx_graph *g) {
  size_t n = 0;
  for (size_t v = 0; v < g->n_values; v++)
    n += (g->values[v].flags & (MX_VALUE_DEAD | MX_VALUE_OUTER)) == MX_VALUE_OUTER;
  return n;
}

/* Prints the subgraphs of control node nd, one line each followed by how each partitions as a
 * program of its own (part_control_body.c), and the control nodes inside them, indented by
 * depth. */
static void dump_nested(FILE *out, const mx_partition *p, const mx_node *nd, int depth) {
  for (uint32_t a = 0; a < nd->n_attrs; a++) {
    const mx_graph *sub = nd->attrs[a].type == MX_ATTR_GRAPH ? nd->attrs[a].graph : NULL;
    if (!sub) continue;
    fprintf(out, "%*s%s '%s': %zu node%s, %zu input%s, %zu output%s, %zu capture%s", 2 * depth, "",
            nd->attrs[a].name, sub->name, sub->n_live_nodes, sub->n_live_nodes == 1 ? "" : "s", sub->n_inputs,
            sub->n_inputs == 1 ? "" : "s", sub->n_outputs, sub->n_outputs == 1 ? "" : "s",
            count_captures(sub), count_captures(sub) == 1 ? "" : "s");
    size_t shown = 0;
    for (size_t n = 0; n < sub->n_nodes && shown < 4; n++) {
      if (sub->nodes[n].flags & MX_NODE_DEAD) continue;
      fprintf(out, "%s%s", shown++ ? ", " : " (", sub->nodes[n].op_type);
    }
    if (shown) fprintf(out, "%s)", sub->n_live_nodes > shown ? ", ..." : "");
    fprintf(out, "\n");
    mx__part_dump_body_text(out, p, sub, depth + 1);
    for (size_t n = 0; n < sub->n_nodes; n++) {
      const mx_node *inner = &sub->nodes[n];
      if ((inner->flags & MX_NODE_DEAD) || !mx__part_is_control(inner)) continue;
      fprintf(out, "%*s%s '%s' (control flow, nested)\n", 2 * depth + 2, "", inner->op_type, inner->name);
      dump_nested(out, p, inner, depth + 2);
    }
  }
}

void mx__part_dump_control_text(FILE *out, const mx_partition *p, const mx_node *call, int depth) {
  const mx_node *cn = mx__part_control_node(call);
  if (!cn) return;
  fprintf(out, "%*s%s '%s' (control flow: runs as one op, its subgraphs as programs of their own)\n",
          2 * depth, "", cn->op_type, cn->name);
  dump_nested(out, p, cn, depth + 1);
}

/* JSON of control node nd: op, name and its subgraphs, each with its counts and the control
 * nodes nested in it. */
static void control_json(FILE *out, const mx_partition *p, const mx_node *nd) {
  fprintf(out, "{\"op\": ");
  mx__json_string(out, nd->op_type);
  fprintf(out, ", \"name\": ");
  mx__json_string(out, nd->name);
  fprintf(out, ", \"subgraphs\": [");
  size_t shown = 0;
  for (uint32_t a = 0; a < nd->n_attrs; a++) {
    const mx_graph *sub = nd->attrs[a].type == MX_ATTR_GRAPH ? nd->attrs[a].graph : NULL;
    if (!sub) continue;
    fprintf(out, "%s{\"attribute\": ", shown++ ? ", " : "");
    mx__json_string(out, nd->attrs[a].name);
    fprintf(out, ", \"graph\": ");
    mx__json_string(out, sub->name);
    fprintf(out, ", \"nodes\": %zu, \"inputs\": %zu, \"outputs\": %zu, \"captures\": %zu, ",
            sub->n_live_nodes, sub->n_inputs, sub->n_outputs, count_captures(sub));
    fprintf(out, "\"partition\": ");
    mx__part_dump_body_json(out, p, sub);
    fprintf(out, ", \"control\": [");
    size_t inner_shown = 0;
    for (size_t n = 0; n < sub->n_nodes; n++) {
      const mx_node *inner = &sub->nodes[n];
      if ((inner->flags & MX_NODE_DEAD) || !mx__part_is_control(inner)) continue;
      if (inner_shown++) fprintf(out, ", ");
      control_json(out, p, inner);
    }
    fprintf(out, "]}");
  }
  fprintf(out, "]}");
}

void mx__part_dump_control_json(FILE *out, const mx_partition *p, const mx_node *call) {
  const mx_node *cn = mx__part_control_node(call);
  if (cn) control_json(out, p, cn);
}

/* A growable list of value ids without repeats. */
typedef struct id_list {
  mx_value_id *v;
  size_t n, cap;
} id_list;

static bool list_add(id_list *l, mx_value_id v) {
  for (size_t i = 0; i < l->n; i++)
    if (l->v[i] == v) return true;
  if (!MX_GROW(l->v, l->cap, l->n + 1)) return false;
  l->v[l->n++] = v;
  return true;
}

/* Adds to l every value of g that sub (or a graph nested in it) reads by name. */
static bool add_captures(const mx_graph *g, const mx_graph *sub, id_list *l) {
  for (size_t v = 0; v < sub->n_values; v++) {
    if ((sub->values[v].flags & (MX_VALUE_DEAD | MX_VALUE_OUTER)) != MX_VALUE_OUTER) continue;
    mx_value_id id = mx_graph_find_value(g, sub->values[v].name);
    if (id != MX_NO_VALUE && mx__value_valid(g, id) && !list_add(l, id)) return false;
  }
  for (size_t i = 0; i < sub->n_subgraphs; i++)
    if (!add_captures(g, sub->subgraphs[i], l)) return false;
  return true;
}

/* True when every value node nd takes or gives is a tensor (the executors move tensors only). */
static bool tensors_only(const mx_graph *g, const mx_node *nd, const id_list *ins) {
  for (size_t i = 0; i < ins->n; i++)
    if (g->values[ins->v[i]].kind != MX_KIND_TENSOR || g->values[ins->v[i]].dtype == MX_STRING) return false;
  for (uint32_t k = 0; k < nd->n_outputs; k++)
    if (g->values[nd->outputs[k]].kind != MX_KIND_TENSOR || g->values[nd->outputs[k]].dtype == MX_STRING)
      return false;
  return true;
}

bool mx__part_control_wrappable(const mx_graph *g, const mx_node *nd) {
  id_list ins = {0};
  bool ok = true;
  for (uint32_t i = 0; i < nd->n_inputs && ok; i++)
    if (nd->inputs[i] != MX_NO_VALUE) ok = list_add(&ins, nd->inputs[i]);
  for (uint32_t a = 0; a < nd->n_attrs && ok; a++)
    if (nd->attrs[a].type == MX_ATTR_GRAPH && nd->attrs[a].graph)
      ok = add_captures(g, nd->attrs[a].graph, &ins);
  ok = ok && tensors_only(g, nd, &ins);
  free(ins.v);
  return ok;
}

/* Drops sub from g's list of owned subgraphs (its new owner adopts it). */
static void disown(mx_graph *g, const mx_graph *sub) {
  for (size_t i = 0; i < g->n_subgraphs; i++) {
    if (g->subgraphs[i] != sub) continue;
    memmove(&g->subgraphs[i], &g->subgraphs[i + 1], (g->n_subgraphs - i - 1) * sizeof *g->subgraphs);
    g->n_subgraphs--;
    return;
  }
}

/* Copies dtype, shape and symbolic value of g's value v onto w's value wv. */
static mx_status copy_info(mx_graph *w, mx_value_id wv, const mx_graph *g, mx_value_id v) {
  const mx_value *s = &g->values[v];
  mx_value *d = &w->values[wv];
  d->dtype = s->dtype;
  d->shape = s->shape;
  d->kind = s->kind;
  d->sv = NULL;
  d->sv_len = -1;
  if (s->sv && s->sv_len > 0) {
    d->sv = mx__arena_memdup(&w->arena, s->sv, (size_t)s->sv_len * sizeof *s->sv, 8);
    if (!d->sv) return MX_ERR_OUT_OF_MEMORY;
    d->sv_len = s->sv_len;
  } else if (s->sv_len == 0) {
    d->sv_len = 0;
  }
  return MX_OK;
}

/* Wraps node n of g (see the top of the file). */
static mx_status wrap_one(mx_graph *g, mx_node_id n, mx_error *err) {
  mx_status st = MX_OK;
  id_list ins = {0};
  mx_value_id *w_in = NULL, *w_out = NULL, *call_out = NULL, *node_in = NULL;
  const char **out_names = NULL;
  mx_graph *w = NULL;
  /* Copies of what the node is made of, taken before g's arrays move. */
  const mx_node orig = g->nodes[n];
  for (uint32_t i = 0; i < orig.n_inputs; i++)
    if (orig.inputs[i] != MX_NO_VALUE && !list_add(&ins, orig.inputs[i])) goto oom;
  for (uint32_t a = 0; a < orig.n_attrs; a++)
    if (orig.attrs[a].type == MX_ATTR_GRAPH && orig.attrs[a].graph &&
        !add_captures(g, orig.attrs[a].graph, &ins))
      goto oom;
  w_in = malloc((ins.n ? ins.n : 1) * sizeof *w_in);
  w_out = malloc((orig.n_outputs ? orig.n_outputs : 1) * sizeof *w_out);
  call_out = malloc((orig.n_outputs ? orig.n_outputs : 1) * sizeof *call_out);
  node_in = malloc((orig.n_inputs ? orig.n_inputs : 1) * sizeof *node_in);
  out_names = malloc((orig.n_outputs ? orig.n_outputs : 1) * sizeof *out_names);
  if (!w_in || !w_out || !call_out || !node_in || !out_names) goto oom;

  char wname[256];
  snprintf(wname, sizeof wname, "%s/control", orig.name);
  st = mx__graph_create_subgraph(g, wname, &w);
  if (st != MX_OK) goto graph_fail;
  disown(g, w); /* adopted again by the call node below */
  for (size_t i = 0; i < ins.n && st == MX_OK; i++) {
    const mx_value *v = &g->values[ins.v[i]];
    st = mx_graph_add_input(w, v->name, v->dtype, &v->shape, &w_in[i]);
    if (st == MX_OK) st = copy_info(w, w_in[i], g, ins.v[i]);
  }
  if (st != MX_OK) goto w_fail;
  for (uint32_t i = 0; i < orig.n_inputs; i++) {
    node_in[i] = MX_NO_VALUE;
    for (size_t k = 0; k < ins.n && orig.inputs[i] != MX_NO_VALUE; k++)
      if (ins.v[k] == orig.inputs[i]) node_in[i] = w_in[k];
  }
  for (uint32_t k = 0; k < orig.n_outputs; k++) out_names[k] = g->values[orig.outputs[k]].name;
  /* The node moves into W: its subgraphs change owner with it. */
  for (uint32_t a = 0; a < orig.n_attrs; a++)
    if (orig.attrs[a].type == MX_ATTR_GRAPH && orig.attrs[a].graph) disown(g, orig.attrs[a].graph);
  mx_node_desc nd = {.op_type = orig.op_type,
                     .domain = orig.domain,
                     .name = orig.name,
                     .inputs = node_in,
                     .n_inputs = orig.n_inputs,
                     .attrs = orig.attrs,
                     .n_attrs = orig.n_attrs,
                     .output_names = out_names,
                     .n_outputs = orig.n_outputs};
  st = mx_graph_add_node(w, &nd, w_out);
  for (uint32_t k = 0; k < orig.n_outputs && st == MX_OK; k++) {
    st = copy_info(w, w_out[k], g, orig.outputs[k]);
    if (st == MX_OK) st = mx_graph_add_output(w, w_out[k]);
  }
  if (st != MX_OK) goto w_fail;

  /* N leaves g; the call takes its name and its outputs. */
  mx__graph_remove_node(g, n);
  st = mx_graph_set_opset(g, MX_PART_DOMAIN, MX_PART_DOMAIN_VERSION);
  if (st != MX_OK) goto graph_fail;
  mx_attr attrs[2];
  memset(attrs, 0, sizeof attrs);
  attrs[0].name = MX_PART_ATTR_BODY;
  attrs[0].type = MX_ATTR_GRAPH;
  attrs[0].graph = w;
  attrs[1].name = MX_PART_ATTR_UNKNOWN;
  attrs[1].type = MX_ATTR_INT;
  attrs[1].i = 1;
  mx_node_desc cd = {.op_type = MX_PART_CALL_OP,
                     .domain = MX_PART_DOMAIN,
                     .name = orig.name,
                     .inputs = ins.v,
                     .n_inputs = ins.n,
                     .attrs = attrs,
                     .n_attrs = 2,
                     .output_names = NULL,
                     .n_outputs = orig.n_outputs};
  st = mx_graph_add_node(g, &cd, call_out);
  if (st != MX_OK) goto graph_fail;
  w = NULL; /* owned by g through the call */
  mx_node_id cid = g->values[call_out[0]].producer;
  mx_node *call = &g->nodes[cid];
  for (uint32_t k = 0; k < orig.n_outputs; k++) {
    mx_value_id old = orig.outputs[k];
    call->outputs[k] = old;
    g->values[old].producer = cid;
    g->values[old].producer_slot = k;
    g->values[call_out[k]].producer = MX_NO_NODE;
    mx__graph_remove_value(g, call_out[k]);
  }
  mx__graph_invalidate(g);
  goto done;

oom:
  st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory wrapping node '%s'", orig.name);
  goto done;
w_fail:
  st = mx__fail(err, st, "node '%s' (%s): wrapping it for the partitioner failed: %s", orig.name,
                orig.op_type, mx_graph_last_error(w));
  goto done;
graph_fail:
  st = mx__fail(err, st, "node '%s' (%s): wrapping it for the partitioner failed: %s", orig.name,
                orig.op_type, mx_graph_last_error(g));
done:
  free(ins.v);
  free(w_in);
  free(w_out);
  free(call_out);
  free(node_in);
  free(out_names);
  return st;
}

mx_status mx__part_wrap_control(mx_graph *g, size_t *wrapped, mx_error *err) {
  size_t count = 0;
  size_t nn = g->n_nodes; /* calls added below are not visited */
  for (size_t n = 0; n < nn; n++) {
    const mx_node *nd = &g->nodes[n];
    if ((nd->flags & MX_NODE_DEAD) || !mx__part_is_control(nd) || mx__part_is_call(nd)) continue;
    if (!mx__part_control_wrappable(g, nd))
      return mx__fail(err, MX_ERR_UNSUPPORTED, "node '%s' (%s) takes or gives a sequence, optional or string",
                      nd->name, nd->op_type);
    mx_status st = wrap_one(g, (mx_node_id)n, err);
    if (st != MX_OK) return st;
    count++;
  }
  if (count) {
    mx_status st = mx_graph_infer(g);
    if (st != MX_OK) return mx__fail(err, st, "%s", mx_graph_last_error(g));
  }
  if (wrapped) *wrapped = count;
  return MX_OK;
}
