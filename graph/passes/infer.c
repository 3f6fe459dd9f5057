/* Whole-graph checking and inference (stage 1 of the compile pipeline), built on the per-node
 * steps that the run-time executors reuse.
 *
 * Per node: resolve the op definition, check arity and attributes against its schema, parse the
 * params struct once, then infer output dtypes, shapes and the symbolic values of small integer
 * tensors from the inputs' (design §4). Graph inputs and constants are the sources. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "graph/passes/passes.h"

static const char *attr_type_name(mx_attr_type t) {
  switch (t) {
    case MX_ATTR_FLOAT: return "float";
    case MX_ATTR_INT: return "int";
    case MX_ATTR_STRING: return "string";
    case MX_ATTR_TENSOR: return "tensor";
    case MX_ATTR_GRAPH: return "graph";
    case MX_ATTR_FLOATS: return "floats";
    case MX_ATTR_INTS: return "ints";
    case MX_ATTR_STRINGS: return "strings";
    case MX_ATTR_TYPE_PROTO: return "type";
    case MX_ATTR_UNDEFINED: break;
  }
  return "undefined";
}

static mx_status check_attrs(const mx_node *nd, const mx_op_def *def, mx_error *err) {
  for (uint32_t i = 0; i < nd->n_attrs; i++) {
    const mx_attr *a = &nd->attrs[i];
    const mx_attr_spec *s = def->attrs;
    while (s && s->name && strcmp(s->name, a->name) != 0) s++;
    if (!s || !s->name)
      return mx__fail(err, MX_ERR_UNSUPPORTED, "node '%s' (%s): unknown attribute '%s'", nd->name,
                      nd->op_type, a->name);
    if (s->type != a->type)
      return mx__fail(err, MX_ERR_INVALID_GRAPH, "node '%s' (%s): attribute '%s' must be %s, not %s",
                      nd->name, nd->op_type, a->name, attr_type_name(s->type), attr_type_name(a->type));
  }
  for (const mx_attr_spec *s = def->attrs; s && s->name; s++) {
    if (s->required && !mx__node_attr(nd, s->name))
      return mx__fail(err, MX_ERR_INVALID_GRAPH, "node '%s' (%s): required attribute '%s' is missing",
                      nd->name, nd->op_type, s->name);
  }
  return MX_OK;
}

mx_status mx__node_prepare(mx_graph *g, mx_node_id nid, mx_error *err) {
  mx_node *nd = &g->nodes[nid];
  const mx_op_def *def = nd->def;
  if (!def) {
    def = mx__op_find(nd->domain, nd->op_type);
    if (!def)
      return mx__fail(err, MX_ERR_UNSUPPORTED, "node '%s': op '%s'%s%s%s has no definition in mixrt",
                      nd->name, nd->op_type, nd->domain[0] ? " (domain '" : "", nd->domain,
                      nd->domain[0] ? "')" : "");
  }
  if (nd->n_inputs < def->min_inputs || (def->max_inputs != MX_VARIADIC && nd->n_inputs > def->max_inputs)) {
    char most[16] = "any number";
    if (def->max_inputs != MX_VARIADIC) snprintf(most, sizeof most, "%u", def->max_inputs);
    return mx__fail(err, MX_ERR_INVALID_GRAPH, "node '%s' (%s): %u inputs given, %u to %s allowed", nd->name,
                    nd->op_type, nd->n_inputs, def->min_inputs, most);
  }
  for (uint32_t i = 0; i < def->min_inputs; i++)
    if (nd->inputs[i] == MX_NO_VALUE)
      return mx__fail(err, MX_ERR_INVALID_GRAPH, "node '%s' (%s): required input %u is missing", nd->name,
                      nd->op_type, i);
  if (nd->n_outputs < def->min_outputs || nd->n_outputs > def->max_outputs)
    return mx__fail(err, MX_ERR_INVALID_GRAPH, "node '%s' (%s): %u outputs given, %u..%u allowed", nd->name,
                    nd->op_type, nd->n_outputs, def->min_outputs, def->max_outputs);
  mx_status st = check_attrs(nd, def, err);
  if (st != MX_OK) return st;
  if (!nd->params && def->params_size) {
    void *params = mx__arena_alloc(&g->arena, def->params_size, 16);
    if (!params) return mx__fail(err, MX_ERR_OUT_OF_MEMORY, "node '%s': out of memory for params", nd->name);
    mx_parse_ctx pc = {def, nd->attrs, nd->n_attrs, nd->opset, nd->n_inputs, nd->n_outputs, nd->name, err};
    st = def->parse(&pc, params);
    if (st != MX_OK) {
      if (err && strncmp(err->message, "node '", 6) != 0)
        mx__error_prefix(err, "node '%s' (%s): ", nd->name, nd->op_type);
      return st;
    }
    nd->params = params;
  }
  nd->def = def;
  return MX_OK;
}

void mx__value_info_of(const mx_graph *g, mx_value_id v, mx_value_info *info) {
  memset(info, 0, sizeof *info);
  info->sv_len = -1;
  if (v == MX_NO_VALUE) return;
  const mx_value *val = &g->values[v];
  info->present = true;
  info->dtype = val->dtype;
  info->shape = val->shape;
  info->sv = val->sv_len >= 0 ? val->sv : NULL;
  info->sv_len = val->sv_len;
  info->data = val->data;
  info->kind = val->kind;
}

mx_status mx__node_infer(const mx_graph *g, mx_node_id nid, mx_symtab *syms, const mx_value_info *in,
                         mx_value_info *out, mx_dim *out_sv, bool runtime, mx_error *err) {
  const mx_node *nd = &g->nodes[nid];
  for (uint32_t i = 0; i < nd->n_outputs; i++) {
    memset(&out[i], 0, sizeof out[i]);
    out[i].present = true;
    out[i].shape.rank = MX_RANK_UNKNOWN;
    out[i].sv = out_sv + (size_t)i * MX_SV_MAX;
    out[i].sv_len = -1;
  }
  if (nd->def->flags & MX_OP_SUBGRAPH) /* If, Loop, Scan, SequenceMap: graph/subgraph.c */
    return mx__subgraph_node_infer(g, nid, syms, in, out, out_sv, runtime, err);
  for (uint32_t i = 0; i < nd->n_inputs; i++) {
    if (in[i].present && in[i].kind != MX_KIND_TENSOR && !(nd->def->flags & MX_OP_ANY_KIND)) {
      if (nd->n_outputs == 1 && strcmp(nd->def->name, "Identity") == 0) { /* passes anything */
        out[0] = in[0];
        return MX_OK;
      }
      return mx__fail(err, MX_ERR_DTYPE, "node '%s' (%s): input %u ('%s') is a %s, not a tensor", nd->name,
                      nd->op_type, i, g->values[nd->inputs[i]].name,
                      in[i].kind == MX_KIND_SEQUENCE ? "sequence" : "optional");
    }
    if (in[i].present && in[i].dtype == MX_DTYPE_UNDEFINED && in[i].kind == MX_KIND_TENSOR)
      return mx__fail(err, MX_ERR_INVALID_GRAPH, "node '%s' (%s): input %u ('%s') has no known dtype",
                      nd->name, nd->op_type, i, g->values[nd->inputs[i]].name);
  }
  mx_infer_ctx ctx = {
      .syms = syms,
      .params = nd->params,
      .opset = nd->opset,
      .node_name = nd->name,
      .n_in = nd->n_inputs,
      .n_out = nd->n_outputs,
      .in = in,
      .out = out,
      .out_sv = out_sv,
      .runtime = runtime,
      .err = err,
  };
  mx_status st = nd->def->infer(&ctx);
  if (st != MX_OK) {
    if (err && err->status == MX_OK) mx__fail(err, st, "inference failed");
    mx__error_prefix(err, "node '%s' (%s): ", nd->name, nd->op_type);
    return st;
  }
  /* FlexAttention's score_mod / prob_mod subgraphs: inferred here, since the op is no
   * MX_OP_SUBGRAPH op (its output does not depend on them). */
  if (!runtime && strcmp(nd->def->name, "FlexAttention") == 0 &&
      (st = mx__flex_infer_mods(g, nid, syms, in, err)) != MX_OK)
    return st;
  for (uint32_t i = 0; i < nd->n_outputs; i++) {
    if (!out[i].present) continue;
    if (!mx_dtype_size(out[i].dtype))
      return mx__fail(err, MX_ERR_INTERNAL, "node '%s' (%s): inference left output %u without a dtype",
                      nd->name, nd->op_type, i);
    if (out[i].shape.rank < MX_RANK_UNKNOWN || out[i].shape.rank > MX_MAX_RANK)
      return mx__fail(err, MX_ERR_INTERNAL, "node '%s' (%s): inference gave output %u rank %d", nd->name,
                      nd->op_type, i, (int)out[i].shape.rank);
    if (out[i].sv_len > MX_SV_MAX) out[i].sv_len = -1;
    if (out[i].sv_len < 0) out[i].sv = NULL;
    for (int32_t k = out[i].shape.rank < 0 ? 0 : out[i].shape.rank; k < MX_MAX_RANK; k++)
      out[i].shape.dims[k] = 0;
  }
  return MX_OK;
}

mx_status mx__graph_infer_nodes(const mx_graph *g, const mx_node_id *order, size_t n_order, mx_symtab *syms,
                                bool runtime, const mx__infer_io *io, const char *what, mx_error *err) {
  mx_status st = MX_OK;
  mx_value_info *in = NULL, *out = NULL;
  mx_dim *out_sv = NULL;
  size_t cap_in = 0, cap_out = 0;
  for (size_t i = 0; i < n_order; i++) {
    const mx_node *nd = &g->nodes[order[i]];
    if (!nd->def) {
      st = mx__fail(err, MX_ERR_INVALID_GRAPH, "%s '%s': node '%s' was never prepared", what, g->name,
                    nd->name);
      goto done;
    }
    if (nd->n_inputs > cap_in) {
      free(in);
      cap_in = nd->n_inputs * 2;
      in = malloc(cap_in * sizeof *in);
      if (!in) goto oom;
    }
    if (nd->n_outputs > cap_out) {
      free(out);
      free(out_sv);
      cap_out = nd->n_outputs * 2;
      out = malloc(cap_out * sizeof *out);
      out_sv = malloc(cap_out * MX_SV_MAX * sizeof *out_sv);
      if (!out || !out_sv) goto oom;
    }
    for (uint32_t k = 0; k < nd->n_inputs; k++) {
      if (nd->inputs[k] == MX_NO_VALUE)
        mx__value_info_of(g, MX_NO_VALUE, &in[k]);
      else
        io->get(io->user, nd->inputs[k], &in[k]);
    }
    st = mx__node_infer(g, order[i], syms, in, out, out_sv, runtime, err);
    if (st != MX_OK) goto done;
    for (uint32_t k = 0; k < nd->n_outputs; k++) {
      st = io->put(io->user, nd->outputs[k], &out[k]);
      if (st != MX_OK) goto done;
    }
  }
  goto done;
oom:
  st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of memory inferring %s '%s'", what, g->name);
done:
  free(in);
  free(out);
  free(out_sv);
  return st;
}

/* mx__infer_io over the graph's own values. */
static void graph_get(void *user, mx_value_id v, mx_value_info *info) { mx__value_info_of(user, v, info); }

/* Stores one inferred output on its value (the put of mx_graph_infer; user is the graph). */
static mx_status store_output(void *user, mx_value_id v, const mx_value_info *info) {
  mx_graph *g = user;
  mx_value *val = &g->values[v];
  val->dtype = info->dtype;
  val->shape = info->shape;
  val->kind = info->kind;
  if (val->flags & MX_VALUE_CONST) return MX_OK; /* folded constants keep their own sv */
  val->sv = NULL;
  val->sv_len = -1;
  if (info->sv && info->sv_len >= 0) {
    mx_dim *sv = mx__arena_array(&g->arena, info->sv_len ? (size_t)info->sv_len : 1, sizeof *sv, 8);
    if (!sv)
      return mx__graph_fail(g, MX_ERR_OUT_OF_MEMORY, "out of memory storing the value of '%s'", val->name);
    memcpy(sv, info->sv, (size_t)info->sv_len * sizeof *sv);
    val->sv = sv;
    val->sv_len = info->sv_len;
  }
  return MX_OK;
}

mx_status mx_graph_validate(mx_graph *g) {
  if (!g) return MX_ERR_INVALID_ARGUMENT;
  for (size_t i = 0; i < g->n_outputs; i++)
    if (!mx__value_valid(g, g->outputs[i]))
      return mx__graph_fail(g, MX_ERR_INVALID_GRAPH, "graph '%s': output %zu refers to a removed value",
                            g->name, i);
  for (size_t n = 0; n < g->n_nodes; n++) {
    const mx_node *nd = &g->nodes[n];
    if (nd->flags & MX_NODE_DEAD) continue;
    for (uint32_t i = 0; i < nd->n_inputs; i++) {
      mx_value_id v = nd->inputs[i];
      if (v == MX_NO_VALUE) continue;
      if (!mx__value_valid(g, v))
        return mx__graph_fail(g, MX_ERR_INVALID_GRAPH, "node '%s' (%s): input %u refers to a removed value",
                              nd->name, nd->op_type, i);
      const mx_value *val = &g->values[v];
      if (val->producer == MX_NO_NODE && !(val->flags & (MX_VALUE_INPUT | MX_VALUE_CONST | MX_VALUE_OUTER)))
        return mx__graph_fail(
            g, MX_ERR_INVALID_GRAPH,
            "node '%s' (%s): input %u ('%s') is not produced by any node, input or constant", nd->name,
            nd->op_type, i, val->name);
    }
  }
  for (size_t i = 0; i < g->n_outputs; i++) {
    const mx_value *val = &g->values[g->outputs[i]];
    if (val->producer == MX_NO_NODE && !(val->flags & (MX_VALUE_INPUT | MX_VALUE_CONST | MX_VALUE_OUTER)))
      return mx__graph_fail(g, MX_ERR_INVALID_GRAPH, "graph output '%s' is not produced by anything",
                            val->name);
  }
  const mx_node_id *order;
  size_t n_order;
  mx_status st = mx__graph_topo_order(g, &order, &n_order);
  if (st != MX_OK) return st;
  for (size_t i = 0; i < n_order; i++) {
    st = mx__node_prepare(g, order[i], &g->err);
    if (st != MX_OK) return st;
  }
  return MX_OK;
}

mx_status mx_graph_infer(mx_graph *g) {
  if (!g) return MX_ERR_INVALID_ARGUMENT;
  mx_status st = mx_graph_validate(g);
  if (st != MX_OK) return st;
  const mx_node_id *order;
  size_t n_order;
  st = mx__graph_topo_order(g, &order, &n_order);
  if (st != MX_OK) return st;
  mx__infer_io io = {graph_get, store_output, g};
  st = mx__graph_infer_nodes(g, order, n_order, g->syms, false, &io, "graph", &g->err);
  if (st != MX_OK) return st;
  if (mx_symtab_status(g->syms) != MX_OK)
    return mx__graph_fail(g, MX_ERR_OUT_OF_MEMORY, "graph '%s': out of memory in the symbol table", g->name);
  return MX_OK;
}

mx_status mx_graph_bind_symbol(mx_graph *g, const char *name, int64_t value) {
  if (!g || !name) return MX_ERR_INVALID_ARGUMENT;
  if (value < 0)
    return mx__graph_fail(g, MX_ERR_INVALID_ARGUMENT, "symbol '%s': value %lld is negative", name,
                          (long long)value);
  mx_dim sym = mx_sym_lookup(g->syms, name);
  int64_t idx = mx_sym_symbol_index(g->syms, sym);
  if (idx < 0) return mx__graph_fail(g, MX_ERR_NOT_FOUND, "graph '%s' has no symbol '%s'", g->name, name);
  for (size_t i = 0; i < g->n_inputs; i++) {
    mx_value *v = &g->values[g->inputs[i]];
    for (int32_t k = 0; k < v->shape.rank; k++)
      v->shape.dims[k] = mx_sym_substitute(g->syms, v->shape.dims[k], (size_t)idx, (mx_dim)value);
  }
  return mx_graph_infer(g);
}
