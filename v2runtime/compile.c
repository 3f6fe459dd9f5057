/* Compiling a model into a program: inference, constant folding through the reference kernels
 * (constant sub-expressions are computed once here, so no step ever repeats them), dead-node
 * removal, partitioning, a static plan per KNOWN call, a dynamic plan per UNKNOWN call, and the
 * lowering into execution graphs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "graph/ops/op.h"
#include "graph/passes/passes.h"
#include "mixrt/partition.h"
#include "partitioner/partitioner.h"
#include "reference/reference.h"
#include "static_exec/mxm_info.h"
#include "v2runtime/kernels_control.h"
#include "v2runtime/session_impl.h"

/* Largest constant a folding step may produce (bytes). */
#define FOLD_MAX_BYTES ((size_t)64 << 20)

mx_status mx__program_fold(mx_graph *g) {
  mx_status st = MX_OK;
  for (int round = 0; st == MX_OK && round < 16; round++) {
    size_t folded = 0, removed_nodes = 0, removed_values = 0;
    st = mx__graph_fold_constants(g, mx__reference_fold_eval, NULL, FOLD_MAX_BYTES, &folded);
    if (st == MX_OK) st = mx__graph_remove_dead(g, &removed_nodes, &removed_values);
    if (st == MX_OK && (folded || removed_nodes)) st = mx_graph_infer(g);
    if (!folded) break;
  }
  return st;
}

/* Stage 1 (inference, folding), Stage 2 (the rewrite rules `passes` selects), then folding
 * again over what the rules built. */
static mx_status optimize(mx_graph *g, const char *passes, mx_fuse_report *fuse, mx_error *err) {
  mx_status st = mx_graph_infer(g);
  if (st == MX_OK) st = mx__program_fold(g);
  if (st == MX_OK) st = mx_graph_fuse(g, passes, fuse);
  if (st == MX_OK) st = mx__program_fold(g);
  if (st != MX_OK) return mx__fail(err, st, "%s", mx_graph_last_error(g));
  return MX_OK;
}

size_t mx__call_frozen_positions(const mx_session *s, const mx_program *p, const mx_rt_call *c,
                                 uint32_t *out) {
  size_t n = 0;
  const mx_node *nd = &p->root->nodes[c->node];
  for (uint32_t k = 0; k < c->n_in; k++) {
    const mx_value *v = &p->root->values[c->in_values[k]];
    bool frozen = mx__part_call_input_is_const(nd, k);
    for (size_t f = 0; !frozen && (v->flags & MX_VALUE_INPUT) && f < s->opts.n_frozen_inputs; f++)
      frozen = strcmp(s->frozen_names[f], v->name) == 0;
    if (frozen) out[n++] = k;
  }
  return n;
}

static mx_status plan_call(mx_session *s, mx_program *p, mx_rt_call *c, mx_error *err) {
  mx_node *nd = &p->root->nodes[c->node];
  mx_graph *body = mx__part_call_body(nd);
  if (!c->unknown) {
    uint32_t *frozen = malloc((c->n_in ? c->n_in : 1) * sizeof *frozen);
    if (!frozen) return mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory planning '%s'", c->name);
    mx_static_options so;
    mx__static_options_init(&so);
    so.max_streams = s->n_streams;
    so.frozen_inputs = frozen;
    so.n_frozen = mx__call_frozen_positions(s, p, c, frozen);
    so.name = c->name;
    mx_status st = mx__static_compile(body, &so, &c->plan, err);
    free(frozen);
    if (st == MX_OK) return MX_OK;
    /* A cluster the static compiler refuses still runs: op by op. */
    if (s->opts.log) {
      char line[MX_ERROR_MESSAGE_MAX + 128];
      snprintf(line, sizeof line, "static partition '%s' runs dynamically: %s", c->name,
               err ? err->message : "");
      s->opts.log(s->opts.log_user, MX_LOG_WARN, line);
    }
    c->unknown = true;
  }
  mx_dyn_options dopt;
  mx__dyn_options_init(&dopt);
  dopt.max_streams = s->n_streams;
  dopt.share_constants = !s->opts.private_weights;
  dopt.control_run = mx__control_run; /* wrapped control nodes (partitioner/part_control.c) */
  dopt.control_user = s;
  mx_status st = mx__dyn_plan_create(body, &dopt, &c->dplan, err);
  if (st != MX_OK) mx__error_prefix(err, "dynamic partition '%s': ", c->name);
  return st;
}

static char *shape_text(const mx_graph *g, mx_value_id v) {
  char buf[512];
  mx_shape_format(g->syms, &g->values[v].shape, buf, sizeof buf);
  return strdup(buf);
}

mx_status mx__program_calls(mx_program *p, mx_error *err) {
  const mx_node_id *order;
  size_t n_order;
  mx_status st = mx__graph_topo_order(p->root, &order, &n_order);
  if (st != MX_OK) return mx__fail(err, st, "%s", mx_graph_last_error(p->root));
  p->calls = calloc(n_order ? n_order : 1, sizeof *p->calls);
  if (!p->calls) goto oom;
  for (size_t i = 0; i < n_order; i++) {
    mx_node *nd = &p->root->nodes[order[i]];
    if (!mx__part_is_call(nd))
      return mx__fail(err, MX_ERR_INVALID_GRAPH, "root node '%s' (%s) is not a partition call", nd->name,
                      nd->op_type);
    mx_rt_call *c = &p->calls[p->n_calls++];
    c->node = order[i];
    c->name = nd->name;
    c->unknown = mx__part_call_is_unknown(nd);
    c->n_in = nd->n_inputs;
    c->n_out = nd->n_outputs;
    c->in_values = malloc((c->n_in ? c->n_in : 1) * sizeof *c->in_values);
    c->out_values = malloc((c->n_out ? c->n_out : 1) * sizeof *c->out_values);
    c->args_in = calloc(c->n_in ? c->n_in : 1, sizeof *c->args_in);
    c->args_out = calloc(c->n_out ? c->n_out : 1, sizeof *c->args_out);
    if (!c->in_values || !c->out_values || !c->args_in || !c->args_out) goto oom;
    for (uint32_t k = 0; k < c->n_in; k++)
      if (nd->inputs[k] == MX_NO_VALUE)
        return mx__fail(err, MX_ERR_INVALID_GRAPH, "partition call '%s': input %u is missing", c->name, k);
    if (c->n_in) memcpy(c->in_values, nd->inputs, c->n_in * sizeof *c->in_values);
    if (c->n_out) memcpy(c->out_values, nd->outputs, c->n_out * sizeof *c->out_values);
  }
  return MX_OK;
oom:
  return mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory building the program");
}

mx_status mx__program_finish(mx_program *p, mx_error *err) {
  for (size_t c = 0; c < p->n_calls; c++) {
    if (p->calls[c].unknown)
      p->dynamic_calls++;
    else
      p->static_calls++;
  }
  p->n_values = p->root->n_values;
  p->values = calloc(p->n_values ? p->n_values : 1, sizeof *p->values);
  p->input_shapes = calloc(p->root->n_inputs ? p->root->n_inputs : 1, sizeof *p->input_shapes);
  p->output_shapes = calloc(p->root->n_outputs ? p->root->n_outputs : 1, sizeof *p->output_shapes);
  if (!p->values || !p->input_shapes || !p->output_shapes) goto oom;
  for (size_t i = 0; i < p->root->n_inputs; i++)
    if (!(p->input_shapes[i] = shape_text(p->root, p->root->inputs[i]))) goto oom;
  for (size_t i = 0; i < p->root->n_outputs; i++)
    if (!(p->output_shapes[i] = shape_text(p->root, p->root->outputs[i]))) goto oom;
  return MX_OK;
oom:
  return mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory building the program");
}

/* True when g holds a node that handles sequences / optionals, or a node with subgraphs that
 * takes or gives one of those (or strings), or the graph takes or gives one. Nodes with
 * subgraphs on tensors run through the partitioner, wrapped into calls of their own. */
static bool needs_interpreter(const mx_graph *g, char *why, size_t cap) {
  for (size_t n = 0; n < g->n_nodes; n++) {
    const mx_node *nd = &g->nodes[n];
    if (nd->flags & MX_NODE_DEAD) continue;
    bool control = mx__part_is_control(nd);
    if (control) {
      if (mx__part_control_wrappable(g, nd)) continue;
      snprintf(why, cap, "node '%s' (%s) takes or gives a sequence, optional or string", nd->name,
               nd->op_type);
      return true;
    }
    bool graph_attr = false;
    for (uint32_t a = 0; a < nd->n_attrs; a++) graph_attr = graph_attr || nd->attrs[a].type == MX_ATTR_GRAPH;
    if (graph_attr || (nd->def && (nd->def->flags & (MX_OP_SUBGRAPH | MX_OP_ANY_KIND)))) {
      snprintf(why, cap, "node '%s' (%s) %s", nd->name, nd->op_type,
               graph_attr ? "calls a graph attribute" : "handles sequences or optionals");
      return true;
    }
  }
  for (size_t i = 0; i < g->n_inputs + g->n_outputs; i++) {
    const mx_value *v = &g->values[i < g->n_inputs ? g->inputs[i] : g->outputs[i - g->n_inputs]];
    if (v->kind == MX_KIND_TENSOR) continue;
    snprintf(why, cap, "graph %s '%s' is a sequence or optional", i < g->n_inputs ? "input" : "output",
             v->name);
    return true;
  }
  return false;
}

mx_status mx__program_compile(mx_session *s, mx_graph *g, mx_program **out, mx_error *err) {
  *out = NULL;
  mx_status st;
  mx_partition *part = NULL;
  mx_program *p = calloc(1, sizeof *p);
  if (!p) {
    mx_graph_destroy(g);
    return mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory compiling a model");
  }
  p->source = g;
  st = optimize(g, s->passes, &s->fuse, err);
  if (st != MX_OK) goto fail;
  char why[MX_ERROR_MESSAGE_MAX];
  if (needs_interpreter(g, why, sizeof why)) {
    /* The executors move tensors only: a model with sequences or optionals runs whole on the
     * host through the reference interpreter (constant If nodes are folded above; control
     * nodes on tensors are partitioned below). */
    if (s->opts.log) {
      char line[MX_ERROR_MESSAGE_MAX + 96];
      snprintf(line, sizeof line, "model runs whole through the reference interpreter, not partitioned: %s",
               why);
      s->opts.log(s->opts.log_user, MX_LOG_INFO, line);
    }
    p->interpreted = true;
    snprintf(p->interpreted_why, sizeof p->interpreted_why, "%s", why);
    p->root = g;
    p->source = NULL;
    st = mx__program_finish(p, err);
    if (st != MX_OK) goto fail;
    *out = p;
    return MX_OK;
  }
  st = mx__part_wrap_control(g, NULL, err);
  if (st != MX_OK) goto fail;
  mx_partition_options po;
  mx_partition_options_init(&po);
  po.static_min_ops = s->opts.static_min_ops;
  po.stable = s->opts.stable_partition;
  st = mx_partition_create(g, &po, &part, err);
  if (st != MX_OK) goto fail;
  p->root = mx_partition_detach_root(part);
  mx_partition_destroy(part);
  part = NULL;
  if (!p->root) {
    st = mx__fail(err, MX_ERR_INTERNAL, "the partitioner returned no root graph");
    goto fail;
  }
  st = mx__program_calls(p, err);
  for (size_t c = 0; c < p->n_calls && st == MX_OK; c++) st = plan_call(s, p, &p->calls[c], err);
  if (st == MX_OK) st = mx__program_finish(p, err);
  if (st == MX_OK) st = mx__program_lower(s, p, err);
  if (st != MX_OK) goto fail;
  *out = p;
  return MX_OK;
fail:
  mx_partition_destroy(part);
  mx__program_free(p);
  return st;
}

void mx__program_free(mx_program *p) {
  if (!p) return;
  for (size_t c = 0; c < p->n_calls; c++) {
    mx_rt_call *call = &p->calls[c];
    mx__static_model_destroy(call->model);
    mx__static_plan_destroy(call->plan);
    mx__dyn_exec_destroy(call->dexec);
    mx__dyn_plan_destroy(call->dplan);
    mx_event_destroy(call->done);
    free(call->waits);
    free(call->in_values);
    free(call->out_values);
    free(call->args_in);
    free(call->args_out);
  }
  free(p->calls);
  mx__exe_graph_release(&p->init);
  mx__exe_graph_release(&p->main);
  mx__exe_graph_release(&p->deinit);
  free(p->slots);
  free(p->values);
  mx__mem_limits_free(p->limits);
  free(p->input_dim_sym);
  free(p->sym_min);
  free(p->sym_max);
  for (size_t i = 0; p->input_shapes && p->root && i < p->root->n_inputs; i++) free(p->input_shapes[i]);
  for (size_t i = 0; p->output_shapes && p->root && i < p->root->n_outputs; i++) free(p->output_shapes[i]);
  free(p->input_shapes);
  free(p->output_shapes);
  mx__control_bodies_free(p->bodies); /* before the root: they are keyed by its bodies */
  mx_graph_destroy(p->root);
  mx_graph_destroy(p->source);
  mx__mxm_mapping_release(p->weights_map); /* after the root, whose constants may lie in it */
  free(p);
}
