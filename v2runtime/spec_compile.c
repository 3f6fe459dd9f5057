/* One specialization of a dynamic partition (spec.h): the call's body is copied into a new graph
 * whose inputs have the concrete dims the binding gives, inferred and folded (shape arithmetic
 * on now-concrete shapes becomes constants), compiled by the static compiler and loaded onto the
 * session's device. The copy and the plan are freed once the model is loaded. The copy shares the
 * body's constants (mx__graph_add_constant_shared, not copied): it is destroyed before the body. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "partitioner/partitioner.h"
#include "v2runtime/spec.h"

/* Copies the imported opsets of g and of the graphs enclosing it (the innermost one wins). */
static mx_status copy_opsets(mx_graph *dst, const mx_graph *g) {
  const mx_graph *chain[32];
  size_t n = 0;
  for (const mx_graph *at = g; at && n < 32; at = at->parent) chain[n++] = at;
  while (n--)
    for (size_t i = 0; i < chain[n]->n_opsets; i++) {
      mx_status st = mx_graph_set_opset(dst, chain[n]->opsets[i].domain, chain[n]->opsets[i].version);
      if (st != MX_OK) return st;
    }
  return MX_OK;
}

/* A dim of the source written into dst: its value when `values` give one, else (symbolic) the
 * same expression over symbols of dst's own table, parsed from its printed form. */
static mx_status copy_dim(mx_graph *dst, const mx_symtab *syms, mx_dim d, const int64_t *values,
                          size_t n_values, bool symbolic, mx_dim *out) {
  int64_t v = 0;
  if (mx_dim_is_concrete(d)) {
    *out = d;
    return MX_OK;
  }
  if (mx_sym_eval(syms, d, values, n_values, &v) == MX_OK && v >= 0) {
    *out = v;
    return MX_OK;
  }
  if (!symbolic || mx_dim_is_unknown(d)) return MX_ERR_SHAPE;
  char text[256];
  mx_sym_format(syms, d, text, sizeof text);
  return mx_sym_parse(mx_graph_symtab(dst), text, out);
}

/* True when every element of v's symbolic value has a value under `values` (written to data). */
static bool sv_value(const mx_symtab *syms, const mx_value *v, const int64_t *values, size_t n_values,
                     int64_t *data, size_t cap) {
  if (!v->sv || v->sv_len < 0 || (size_t)v->sv_len > cap || v->dtype != MX_INT64) return false;
  for (int32_t i = 0; i < v->sv_len; i++) {
    if (mx_dim_is_concrete(v->sv[i]))
      data[i] = v->sv[i];
    else if (mx_sym_eval(syms, v->sv[i], values, n_values, &data[i]) != MX_OK)
      return false;
  }
  return true;
}

mx_status mx__spec_copy_nodes(mx_graph *body, const mx_node_id *nodes, size_t n_nodes, const mx_value_id *ins,
                              size_t n_ins, const mx_value_id *outs_wanted, size_t n_outs,
                              const mx_symtab *syms, const int64_t *values, size_t n_values, bool symbolic,
                              bool *as_const, mx_graph **out, mx_error *err) {
  mx_graph *g = NULL;
  mx_value_id *map = malloc((body->n_values ? body->n_values : 1) * sizeof *map);
  mx_status st = map ? mx_graph_create(body->name, &g) : MX_ERR_OUT_OF_MEMORY;
  if (st != MX_OK) {
    st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory copying the partition body");
    goto done;
  }
  for (size_t v = 0; v < body->n_values; v++) map[v] = MX_NO_VALUE;
  st = copy_opsets(g, body);
  for (size_t i = 0; i < n_ins && as_const; i++) as_const[i] = false;
  for (size_t i = 0; i < n_ins && st == MX_OK; i++) {
    const mx_value *v = &body->values[ins[i]];
    if (map[ins[i]] != MX_NO_VALUE) continue;
    int64_t data[MX_MAX_RANK * 4];
    if (!(v->flags & MX_VALUE_INPUT) && v->shape.rank >= 0 && v->shape.rank <= 1 &&
        sv_value(syms, v, values, n_values, data, sizeof data / sizeof data[0])) {
      /* A shape-like value known from the binding: a constant of the copy, so the ops reading
       * it get concrete shapes. */
      mx_tensor t = {.dtype = MX_INT64, .rank = v->shape.rank, .data = data};
      if (v->shape.rank == 1) t.dims[0] = v->sv_len;
      st = mx_graph_add_constant(g, v->name, &t, &map[ins[i]]);
      if (as_const) as_const[i] = true;
      continue;
    }
    mx_shape shape = v->shape;
    for (int32_t k = 0; k < shape.rank && st == MX_OK; k++)
      if (copy_dim(g, syms, shape.dims[k], values, n_values, symbolic, &shape.dims[k]) != MX_OK) {
        st =
            mx__fail(err, MX_ERR_SHAPE, "input '%s' dim %d has no value under this binding", v->name, (int)k);
        goto done;
      }
    if (st == MX_OK) st = mx_graph_add_input(g, v->name, v->dtype, &shape, &map[ins[i]]);
  }
  for (size_t i = 0; i < n_nodes && st == MX_OK; i++) {
    const mx_node *nd = &body->nodes[nodes[i]];
    for (uint32_t k = 0; k < nd->n_inputs && st == MX_OK; k++) {
      mx_value_id x = nd->inputs[k];
      if (x == MX_NO_VALUE || map[x] != MX_NO_VALUE) continue;
      const mx_value *val = &body->values[x];
      if (val->flags & MX_VALUE_OUTER) {
        st = mx__fail(err, MX_ERR_UNSUPPORTED, "the body reads '%s' of an enclosing graph", val->name);
        goto done;
      }
      if (val->data) st = mx__graph_add_constant_shared(g, val->name, val, &map[x]);
    }
  }
  mx_value_id in_ids[256];
  const char *names[256];
  mx_value_id out_ids[256];
  for (size_t i = 0; i < n_nodes && st == MX_OK; i++) {
    const mx_node *nd = &body->nodes[nodes[i]];
    if (nd->n_inputs > 256 || nd->n_outputs > 256) {
      st = mx__fail(err, MX_ERR_LIMIT, "node '%s' has too many inputs or outputs to specialize", nd->name);
      goto done;
    }
    for (uint32_t k = 0; k < nd->n_inputs; k++) {
      in_ids[k] = nd->inputs[k] == MX_NO_VALUE ? MX_NO_VALUE : map[nd->inputs[k]];
      if (nd->inputs[k] != MX_NO_VALUE && in_ids[k] == MX_NO_VALUE) {
        st = mx__fail(err, MX_ERR_INTERNAL, "node '%s' reads '%s', which the copy lacks", nd->name,
                      body->values[nd->inputs[k]].name);
        goto done;
      }
    }
    for (uint32_t k = 0; k < nd->n_outputs; k++) names[k] = body->values[nd->outputs[k]].name;
    mx_node_desc d = {.op_type = nd->op_type,
                      .domain = nd->domain,
                      .name = nd->name,
                      .inputs = in_ids,
                      .n_inputs = nd->n_inputs,
                      .attrs = nd->attrs,
                      .n_attrs = nd->n_attrs,
                      .output_names = names,
                      .n_outputs = nd->n_outputs};
    st = mx_graph_add_node(g, &d, out_ids);
    for (uint32_t k = 0; k < nd->n_outputs && st == MX_OK; k++) map[nd->outputs[k]] = out_ids[k];
  }
  for (size_t i = 0; i < n_outs && st == MX_OK; i++) {
    mx_value_id x = outs_wanted[i];
    if (map[x] == MX_NO_VALUE && body->values[x].data)
      st = mx__graph_add_constant_shared(g, body->values[x].name, &body->values[x], &map[x]);
    if (st == MX_OK && map[x] == MX_NO_VALUE) {
      st = mx__fail(err, MX_ERR_INTERNAL, "output '%s' is not in the copy", body->values[x].name);
      goto done;
    }
    if (st == MX_OK) st = mx_graph_add_output(g, map[x]);
  }
  if (st != MX_OK && err->status == MX_OK)
    mx__fail(err, st, "copying the partition body: %s", mx_graph_last_error(g));
done:
  free(map);
  if (st != MX_OK) {
    mx_graph_destroy(g);
    g = NULL;
  }
  *out = g;
  return st;
}

/* The whole body with every dim concrete under the binding. */
static mx_status copy_body(mx_graph *body, const mx_symtab *syms, const int64_t *values, size_t n_values,
                           mx_graph **out, mx_error *err) {
  const mx_node_id *order = NULL;
  size_t n_order = 0;
  mx_status st = mx__graph_topo_order(body, &order, &n_order);
  if (st != MX_OK) return mx__fail(err, st, "%s", mx_graph_last_error(body));
  return mx__spec_copy_nodes(body, order, n_order, body->inputs, body->n_inputs, body->outputs,
                             body->n_outputs, syms, values, n_values, false, NULL, out, err);
}

/* Inference, then folding and dead-node removal to a fixed point. */
mx_status mx__spec_concretize(mx_graph *g, mx_error *err) {
  mx_status st = mx_graph_infer(g);
  if (st == MX_OK) st = mx__program_fold(g);
  if (st != MX_OK) return mx__fail(err, st, "%s", mx_graph_last_error(g));
  return MX_OK;
}

mx_status mx__spec_plan(mx_session *s, mx_program *p, const mx_rt_call *c, const int64_t *values,
                        size_t n_values, const char *name, mx_static_plan **out, bool *permanent,
                        mx_error *err) {
  *out = NULL;
  *permanent = false;
  mx_graph *body = mx__part_call_body(&p->root->nodes[c->node]);
  mx_graph *g = NULL;
  uint32_t *frozen = NULL;
  mx_status st = copy_body(body, p->root->syms, values, n_values, &g, err);
  if (st != MX_OK) {
    *permanent = st != MX_ERR_OUT_OF_MEMORY;
    goto done;
  }
  st = mx__spec_concretize(g, err);
  if (st != MX_OK) {
    *permanent = st != MX_ERR_OUT_OF_MEMORY;
    goto done;
  }
  frozen = malloc((c->n_in ? c->n_in : 1) * sizeof *frozen);
  if (!frozen) {
    st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory specializing '%s'", c->name);
    goto done;
  }
  mx_static_options so;
  mx__static_options_init(&so);
  so.max_streams = s->n_streams;
  so.frozen_inputs = frozen;
  so.n_frozen = mx__call_frozen_positions(s, p, c, frozen);
  so.name = name ? name : c->name;
  st = mx__static_compile(g, &so, out, err);
  /* A body the static compiler refuses is refused whatever the values: it stays dynamic. */
  if (st != MX_OK) *permanent = st != MX_ERR_OUT_OF_MEMORY;
done:
  if (st != MX_OK) mx__error_prefix(err, "specializing partition '%s': ", c->name);
  free(frozen);
  mx_graph_destroy(g);
  return st;
}

mx_status mx__spec_compile(mx_session *s, mx_program *p, const mx_rt_call *c, const int64_t *values,
                           size_t n_values, mx_static_model **out, bool *permanent, mx_error *err) {
  *out = NULL;
  mx_static_plan *plan = NULL;
  mx_status st = mx__spec_plan(s, p, c, values, n_values, NULL, &plan, permanent, err);
  if (st != MX_OK) return st;
  mx_static_load_options lo;
  mx__static_load_options_init(&lo);
  lo.share_weights = !s->opts.private_weights;
  st = mx__static_model_create(s->dev, plan, &lo, out, err);
  if (st != MX_OK) mx__error_prefix(err, "specializing partition '%s': ", c->name);
  mx__static_plan_destroy(plan);
  return st;
}
