/* Step 4 of a partition: the partitioned root graph.
 *
 * The root has its own arena and shares the input graph's symbol table (so symbolic dims keep
 * their meaning). It holds, in this order: the graph inputs, the constants kept in the root,
 * the Constant nodes kept in the root, one partition call per KNOWN/UNKNOWN cluster in cluster
 * order (a topological order), and the graph outputs. Each call's subgraph is adopted by the
 * root (mx__graph_adopt_subgraph), so the root owns it; the call's "body" attribute refers to
 * it. Subgraphs get an arena chunk sized to their cluster, so thousands of tiny clusters stay
 * cheap.
 *
 * A subgraph has one input per value crossing in and one output per value crossing out, in
 * parent-index order (input k of the subgraph is input k of the call, likewise outputs); its
 * nodes and moved constants are copies of the originals (same names, attributes, op
 * definitions, parsed params, and inferred dtypes, shapes and symbolic values), added in
 * topological order. Call outputs in the root keep the names of the values they carry. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "graph/passes/passes.h"
#include "partitioner/partitioner_impl.h"

/* Per-build state: where each input-graph value lives in the graph being filled. */
typedef struct build_ctx {
  mx_partition *p;
  mx_value_id *root_val; /* by input value id: the root value, or MX_NO_VALUE */
  mx_value_id *sub_val;  /* by input value id: the value in the current subgraph */
  uint32_t *sub_owner;   /* by input value id: cluster whose subgraph sub_val refers to */
} build_ctx;

static mx_status fail_from(mx_partition *p, const mx_graph *on, const char *what) {
  return mx__part_fail(p, on->err.status != MX_OK ? on->err.status : MX_ERR_OUT_OF_MEMORY, "%s: %s", what,
                       on->err.message[0] ? on->err.message : "out of memory");
}

/* Copies dtype, shape, symbolic value and constant data of input-graph value `from` onto `to`. */
static mx_status copy_value_info(mx_graph *dst, mx_value_id to, const mx_graph *g, mx_value_id from) {
  const mx_value *s = &g->values[from];
  mx_value *d = &dst->values[to];
  d->dtype = s->dtype;
  d->shape = s->shape;
  d->sv = NULL;
  d->sv_len = -1;
  if (s->sv && s->sv_len >= 0) {
    d->sv = mx__arena_memdup(&dst->arena, s->sv, (size_t)s->sv_len * sizeof *s->sv, 8);
    if (!d->sv) return MX_ERR_OUT_OF_MEMORY;
    d->sv_len = s->sv_len;
  }
  if (s->data && !d->data) {
    d->data = mx__graph_copy_tensor(dst, s->data);
    if (!d->data) return MX_ERR_OUT_OF_MEMORY;
    d->flags |= MX_VALUE_CONST;
  }
  return MX_OK;
}

/* Adds a node to dst without the builder's limits on input and output counts. attrs must
 * already live in dst's arena. out_names[k] names output k (must be new in dst). */
static mx_status add_node_raw(mx_graph *dst, const char *name, const char *op_type, const char *domain,
                              int64_t opset, const mx_value_id *inputs, uint32_t n_in, mx_attr *attrs,
                              uint32_t n_attrs, const char *const *out_names, uint32_t n_out,
                              mx_node_id *out_id) {
  if (mx__strmap_get(&dst->node_names, name, NULL))
    return mx__graph_fail(dst, MX_ERR_INVALID_GRAPH, "duplicate node name '%s'", name);
  const char *nm = mx__arena_strdup(&dst->arena, name);
  const char *op = mx__arena_strdup(&dst->arena, op_type);
  const char *dom = mx__arena_strdup(&dst->arena, domain);
  mx_value_id *ins = mx__arena_memdup(&dst->arena, inputs, (size_t)n_in * sizeof *ins, 8);
  mx_value_id *outs = mx__arena_array(&dst->arena, n_out ? n_out : 1, sizeof *outs, 8);
  if (!nm || !op || !dom || !ins || !outs || !MX_GROW(dst->nodes, dst->cap_nodes, dst->n_nodes + 1))
    return mx__graph_fail(dst, MX_ERR_OUT_OF_MEMORY, "out of memory adding node '%s'", name);
  mx_node_id nid = (mx_node_id)dst->n_nodes;
  for (uint32_t k = 0; k < n_out; k++) {
    mx_status st = mx__graph_new_value(dst, out_names[k], &outs[k]);
    if (st != MX_OK) return st;
    dst->values[outs[k]].producer = nid;
    dst->values[outs[k]].producer_slot = k;
  }
  for (uint32_t k = 0; k < n_in; k++) {
    if (ins[k] == MX_NO_VALUE) continue;
    mx_status st = mx__graph_add_use(dst, ins[k], nid);
    if (st != MX_OK) return st;
  }
  if (!mx__strmap_put(&dst->node_names, nm, nid))
    return mx__graph_fail(dst, MX_ERR_OUT_OF_MEMORY, "out of memory adding node '%s'", name);
  mx_node *n = &dst->nodes[nid];
  memset(n, 0, sizeof *n);
  n->name = nm;
  n->op_type = op;
  n->domain = dom;
  n->opset = opset;
  n->inputs = ins;
  n->n_inputs = n_in;
  n->outputs = outs;
  n->n_outputs = n_out;
  n->attrs = attrs;
  n->n_attrs = n_attrs;
  dst->n_nodes++;
  dst->n_live_nodes++;
  mx__graph_invalidate(dst);
  *out_id = nid;
  return MX_OK;
}

/* Copies node n of the input graph into dst; its inputs are map[input value id]. The copy's
 * output values receive the original names and inferred information; map is updated. */
static mx_status copy_node(mx_partition *p, mx_graph *dst, mx_node_id n, mx_value_id *map) {
  const mx_graph *g = p->g;
  const mx_node *nd = &g->nodes[n];
  mx_status st = MX_OK;
  /* Most nodes have a few inputs and outputs: stack buffers, heap beyond. */
  mx_value_id ins_local[16];
  const char *names_local[16];
  mx_value_id *ins = nd->n_inputs <= 16 ? ins_local : malloc(nd->n_inputs * sizeof *ins);
  const char **names = nd->n_outputs <= 16 ? names_local : malloc(nd->n_outputs * sizeof *names);
  if (!ins || !names) {
    st = mx__part_fail(p, MX_ERR_OUT_OF_MEMORY, "out of memory copying node '%s'", nd->name);
    goto done;
  }
  for (uint32_t k = 0; k < nd->n_inputs; k++)
    ins[k] = nd->inputs[k] == MX_NO_VALUE ? MX_NO_VALUE : map[nd->inputs[k]];
  for (uint32_t k = 0; k < nd->n_outputs; k++) names[k] = g->values[nd->outputs[k]].name;
  mx_attr *attrs = NULL;
  if (mx__graph_copy_attrs(dst, nd->attrs, nd->n_attrs, &attrs) != MX_OK) {
    st = fail_from(p, dst, nd->name);
    goto done;
  }
  mx_node_id nid;
  if (add_node_raw(dst, nd->name, nd->op_type, nd->domain, nd->opset, ins, nd->n_inputs, attrs, nd->n_attrs,
                   names, nd->n_outputs, &nid) != MX_OK) {
    st = fail_from(p, dst, nd->name);
    goto done;
  }
  mx_node *cp = &dst->nodes[nid];
  cp->def = nd->def;
  if (nd->params && nd->def && nd->def->params_size) {
    cp->params = mx__arena_memdup(&dst->arena, nd->params, nd->def->params_size, 16);
    if (!cp->params) {
      st = mx__part_fail(p, MX_ERR_OUT_OF_MEMORY, "out of memory copying node '%s'", nd->name);
      goto done;
    }
  }
  for (uint32_t k = 0; k < nd->n_outputs; k++) {
    map[nd->outputs[k]] = cp->outputs[k];
    if (copy_value_info(dst, cp->outputs[k], g, nd->outputs[k]) != MX_OK) {
      st = mx__part_fail(p, MX_ERR_OUT_OF_MEMORY, "out of memory copying the outputs of node '%s'", nd->name);
      goto done;
    }
  }
done:
  if (ins != ins_local) free(ins);
  if (names != names_local) free(names);
  return st;
}

/* Adds input-graph value v as a graph input of dst (name, dtype, shape, symbolic value). */
static mx_status add_input_like(mx_partition *p, mx_graph *dst, mx_value_id v, mx_value_id *out) {
  const mx_value *val = &p->g->values[v];
  if (mx_graph_add_input(dst, val->name, val->dtype, val->shape.rank == MX_RANK_UNKNOWN ? NULL : &val->shape,
                         out) != MX_OK)
    return fail_from(p, dst, val->name);
  mx_value *d = &dst->values[*out];
  if (val->sv && val->sv_len >= 0) {
    d->sv = mx__arena_memdup(&dst->arena, val->sv, (size_t)val->sv_len * sizeof *val->sv, 8);
    if (!d->sv) return mx__part_fail(p, MX_ERR_OUT_OF_MEMORY, "out of memory copying input '%s'", val->name);
    d->sv_len = val->sv_len;
  }
  return MX_OK;
}

/* Adds constant source k (initializer or Constant node) to dst; map is updated. An initializer's
 * data are shared with the input graph, not copied (it outlives the partition and its root, see
 * mixrt/partition.h, and is never modified): a model's weights stay one copy through compiling. */
static mx_status add_constant_like(mx_partition *p, mx_graph *dst, uint32_t k, mx_value_id *map) {
  const mx__part_const *c = &p->consts[k];
  if (c->node != MX_NO_NODE) return copy_node(p, dst, c->node, map);
  const mx_value *val = &p->g->values[c->value];
  if (mx__graph_add_constant_shared(dst, val->name, val, &map[c->value]) != MX_OK)
    return fail_from(p, dst, val->name);
  return MX_OK;
}

/* A graph with its own arena (chunks of `chunk` bytes) sharing the input graph's symbol table,
 * importing the input graph's opsets plus "mixrt", with room for `n_nodes` nodes and `n_values`
 * values. */
static mx_status new_graph(mx_partition *p, const char *name, size_t chunk, size_t n_nodes, size_t n_values,
                           mx_graph **out) {
  const mx_graph *g = p->g;
  mx_graph *r = calloc(1, sizeof *r);
  if (!r) return mx__part_fail(p, MX_ERR_OUT_OF_MEMORY, "out of memory creating graph '%s'", name);
  mx__arena_init(&r->arena, chunk);
  mx__strmap_init(&r->value_names);
  mx__strmap_init(&r->node_names);
  r->syms = g->syms;
  r->owns_syms = false;
  r->ir_version = g->ir_version;
  *out = r;
  r->name = mx__arena_strdup(&r->arena, name);
  if (!r->name || !MX_GROW(r->nodes, r->cap_nodes, n_nodes ? n_nodes : 1) ||
      !MX_GROW(r->values, r->cap_values, n_values ? n_values : 1))
    return mx__part_fail(p, MX_ERR_OUT_OF_MEMORY, "out of memory creating graph '%s'", name);
  for (size_t i = 0; i < g->n_opsets; i++)
    if (mx_graph_set_opset(r, g->opsets[i].domain, g->opsets[i].version) != MX_OK)
      return fail_from(p, r, name);
  if (mx_graph_set_opset(r, MX_PART_DOMAIN, MX_PART_DOMAIN_VERSION) != MX_OK) return fail_from(p, r, name);
  return MX_OK;
}

/* Counts of the graph that will hold cluster c (nodes and values), and a fitting arena chunk:
 * small clusters get small chunks, so thousands of tiny subgraphs stay cheap. */
static void cluster_sizes(const mx_partition *p, const mx__part_cluster *c, size_t *n_nodes, size_t *n_values,
                          size_t *chunk) {
  const mx_graph *g = p->g;
  size_t nn = c->n_nodes, nv = c->n_in, bytes = 1024 + 256 * (size_t)c->n_in;
  for (uint32_t m = 0; m < c->n_nodes; m++) {
    const mx_node *nd = &g->nodes[p->members[c->first_node + m]];
    nv += nd->n_outputs;
    bytes += 192 + 160 * (size_t)nd->n_outputs + 16 * (size_t)nd->n_attrs;
  }
  for (uint32_t k = 0; k < c->n_consts; k++) {
    const mx__part_const *kc = &p->consts[p->cluster_consts[c->first_const + k]];
    nn += kc->node != MX_NO_NODE;
    nv += kc->node != MX_NO_NODE ? g->nodes[kc->node].n_outputs : 1;
    bytes += 256;
  }
  *n_nodes = nn;
  *n_values = nv;
  *chunk = bytes < 4096 ? 4096 : bytes > 65536 ? 65536 : bytes;
}

/* Builds the subgraph of compute cluster id and its call node in the root. */
static mx_status build_cluster(build_ctx *b, uint32_t id) {
  mx_partition *p = b->p;
  const mx_graph *g = p->g;
  mx_graph *root = p->root;
  mx__part_cluster *c = &p->clusters[id];
  mx_status st = MX_OK;
  char name[64];
  mx_value_id *call_in = malloc((c->n_in ? c->n_in : 1) * sizeof *call_in);
  const char **out_names = malloc((c->n_out ? c->n_out : 1) * sizeof *out_names);
  int64_t *const_pos = malloc((c->n_in ? c->n_in : 1) * sizeof *const_pos);
  if (!call_in || !out_names || !const_pos) {
    st = mx__part_fail(p, MX_ERR_OUT_OF_MEMORY, "out of memory building cluster %u", id);
    goto done;
  }
  snprintf(name, sizeof name, "partition_%u", id);
  size_t sub_nodes, sub_values, chunk;
  cluster_sizes(p, c, &sub_nodes, &sub_values, &chunk);
  mx_graph *sub = NULL;
  st = new_graph(p, name, chunk, sub_nodes, sub_values, &sub);
  if (st == MX_OK && mx__graph_adopt_subgraph(root, sub) != MX_OK)
    st = mx__part_fail(p, MX_ERR_OUT_OF_MEMORY, "out of memory adopting subgraph '%s'", name);
  if (st != MX_OK) {
    mx_graph_destroy(sub); /* not adopted: still ours */
    goto done;
  }
  c->body = sub;
  /* The subgraph sees input-graph value ids through sub_val, valid where sub_owner == id. */
  const mx__part_bound *ins = &p->bounds[c->first_in];
  size_t n_const = 0;
  for (uint32_t k = 0; k < c->n_in; k++) {
    mx_value_id v = ins[k].value;
    st = add_input_like(p, sub, v, &b->sub_val[v]);
    if (st != MX_OK) goto done;
    b->sub_owner[v] = id;
    call_in[k] = b->root_val[v];
    if (ins[k].constant) const_pos[n_const++] = k;
  }
  for (uint32_t k = 0; k < c->n_consts; k++) {
    uint32_t ci = p->cluster_consts[c->first_const + k];
    const mx__part_const *kc = &p->consts[ci];
    st = add_constant_like(p, sub, ci, b->sub_val);
    if (st != MX_OK) goto done;
    if (kc->node != MX_NO_NODE) {
      const mx_node *nd = &g->nodes[kc->node];
      for (uint32_t j = 0; j < nd->n_outputs; j++) b->sub_owner[nd->outputs[j]] = id;
    } else {
      b->sub_owner[kc->value] = id;
    }
  }
  for (uint32_t m = 0; m < c->n_nodes; m++) {
    mx_node_id n = p->members[c->first_node + m];
    const mx_node *nd = &g->nodes[n];
    for (uint32_t k = 0; k < nd->n_inputs; k++) {
      mx_value_id v = nd->inputs[k];
      if (v != MX_NO_VALUE && b->sub_owner[v] != id) {
        st =
            mx__part_fail(p, MX_ERR_INTERNAL, "partition: input '%s' of node '%s' is missing from cluster %u",
                          g->values[v].name, nd->name, id);
        goto done;
      }
    }
    st = copy_node(p, sub, n, b->sub_val);
    if (st != MX_OK) goto done;
    for (uint32_t k = 0; k < nd->n_outputs; k++) b->sub_owner[nd->outputs[k]] = id;
  }
  const mx__part_bound *outs = &p->bounds[c->first_out];
  for (uint32_t k = 0; k < c->n_out; k++) {
    if (mx_graph_add_output(sub, b->sub_val[outs[k].value]) != MX_OK) {
      st = fail_from(p, sub, name);
      goto done;
    }
    out_names[k] = g->values[outs[k].value].name;
  }

  /* The call node. */
  mx_attr spec[3] = {{0}};
  spec[0].name = MX_PART_ATTR_BODY;
  spec[0].type = MX_ATTR_GRAPH;
  spec[0].graph = sub;
  spec[1] = mx_attr_int(MX_PART_ATTR_UNKNOWN, c->type == MX_CLUSTER_UNKNOWN);
  spec[2] = mx_attr_ints(MX_PART_ATTR_CONST_INPUTS, const_pos, n_const);
  mx_attr *attrs;
  if (mx__graph_copy_attrs(root, spec, 3, &attrs) != MX_OK) {
    st = fail_from(p, root, name);
    goto done;
  }
  const char *call_name = mx__graph_unique_name(root, name);
  if (!call_name) {
    st = mx__part_fail(p, MX_ERR_OUT_OF_MEMORY, "out of memory naming call '%s'", name);
    goto done;
  }
  mx_node_id call;
  if (add_node_raw(root, call_name, MX_PART_CALL_OP, MX_PART_DOMAIN, MX_PART_DOMAIN_VERSION, call_in, c->n_in,
                   attrs, 3, out_names, c->n_out, &call) != MX_OK) {
    st = fail_from(p, root, name);
    goto done;
  }
  c->call = call;
  for (uint32_t k = 0; k < c->n_out; k++) {
    mx_value_id rv = root->nodes[call].outputs[k];
    b->root_val[outs[k].value] = rv;
    if (copy_value_info(root, rv, g, outs[k].value) != MX_OK) {
      st = mx__part_fail(p, MX_ERR_OUT_OF_MEMORY, "out of memory building call '%s'", call_name);
      goto done;
    }
  }
  /* Resolve the call's op now, so the root is ready for inference. */
  mx_error err = {0};
  if (mx__node_prepare(root, call, &err) != MX_OK) {
    st = mx__part_fail(p, err.status, "partition call '%s': %s", call_name, err.message);
    goto done;
  }
done:
  free(call_in);
  free(out_names);
  free(const_pos);
  return st;
}

mx_status mx__part_build(mx_partition *p) {
  const mx_graph *g = p->g;
  size_t root_nodes = 0, root_values = g->n_inputs;
  for (uint32_t id = 0; id < p->n_clusters; id++) {
    const mx__part_cluster *c = &p->clusters[id];
    if (c->type == MX_CLUSTER_KNOWN || c->type == MX_CLUSTER_UNKNOWN) {
      root_nodes++;
      root_values += c->n_out;
    } else if (c->type == MX_CLUSTER_INPUT) {
      root_nodes++;
      root_values += 1;
    }
  }
  mx_status st = new_graph(p, g->name, 0, root_nodes, root_values, &p->root);
  if (st != MX_OK) return st;
  mx_graph *root = p->root;
  size_t nv = g->n_values ? g->n_values : 1;
  build_ctx b = {p, malloc(nv * sizeof *b.root_val), malloc(nv * sizeof *b.sub_val),
                 malloc(nv * sizeof *b.sub_owner)};
  if (!b.root_val || !b.sub_val || !b.sub_owner) {
    st = mx__part_fail(p, MX_ERR_OUT_OF_MEMORY, "out of memory building the root of '%s'", g->name);
    goto done;
  }
  for (size_t v = 0; v < g->n_values; v++) {
    b.root_val[v] = MX_NO_VALUE;
    b.sub_owner[v] = MX__PART_NONE;
  }
  for (size_t i = 0; i < g->n_inputs; i++) {
    st = add_input_like(p, root, g->inputs[i], &b.root_val[g->inputs[i]]);
    if (st != MX_OK) goto done;
  }
  for (uint32_t id = 0; id < p->n_clusters; id++) {
    const mx__part_cluster *c = &p->clusters[id];
    if (c->type != MX_CLUSTER_INPUT) continue;
    st = add_constant_like(p, root, p->const_of_value[c->source], b.root_val);
    if (st != MX_OK) goto done;
  }
  for (uint32_t id = 0; id < p->n_clusters; id++) {
    mx_cluster_type t = p->clusters[id].type;
    if (t != MX_CLUSTER_KNOWN && t != MX_CLUSTER_UNKNOWN) continue;
    st = build_cluster(&b, id);
    if (st != MX_OK) goto done;
  }
  for (size_t i = 0; i < g->n_outputs; i++) {
    mx_value_id rv = b.root_val[g->outputs[i]];
    if (rv == MX_NO_VALUE) {
      st = mx__part_fail(p, MX_ERR_INTERNAL, "partition: graph output '%s' has no value in the root",
                         g->values[g->outputs[i]].name);
      goto done;
    }
    if (mx_graph_add_output(root, rv) != MX_OK) {
      st = fail_from(p, root, "graph outputs");
      goto done;
    }
  }
done:
  free(b.root_val);
  free(b.sub_val);
  free(b.sub_owner);
  return st;
}
