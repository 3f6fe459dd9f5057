/* The reference interpreter (see mixrt/reference.h): checks the caller's inputs against the
 * graph's declared inputs, then runs every node in topological order through
 * mx__reference_exec_node, freeing each intermediate right after its last consumer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "reference/reference.h"

/* Checks one given input against the declared graph input, binding symbols as it goes. */
static mx_status check_input(const mx_graph *g, const mx_value *decl, const mx_tensor *t, int64_t *bound,
                             size_t n_syms, mx_error *err) {
  if (t->dtype != decl->dtype)
    return mx__fail(err, MX_ERR_DTYPE, "input '%s': dtype %s given, %s expected", decl->name,
                    mx_dtype_name(t->dtype), mx_dtype_name(decl->dtype));
  if (t->rank < 0 || t->rank > MX_MAX_RANK)
    return mx__fail(err, MX_ERR_SHAPE, "input '%s': rank %d is out of range", decl->name, (int)t->rank);
  size_t nbytes;
  if (!mx_tensor_nbytes(t, &nbytes))
    return mx__fail(err, MX_ERR_SHAPE, "input '%s': invalid or overflowing dims", decl->name);
  if (nbytes && !t->data) return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "input '%s': data is NULL", decl->name);
  if (t->placement != MX_HOST)
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "input '%s': the reference interpreter needs host data",
                    decl->name);
  if (decl->shape.rank == MX_RANK_UNKNOWN) return MX_OK;
  if (t->rank != decl->shape.rank)
    return mx__fail(err, MX_ERR_SHAPE, "input '%s': rank %d given, %d expected", decl->name, (int)t->rank,
                    (int)decl->shape.rank);
  for (int32_t k = 0; k < t->rank; k++) {
    mx_dim d = decl->shape.dims[k];
    if (mx_dim_is_concrete(d)) {
      if (d != t->dims[k])
        return mx__fail(err, MX_ERR_SHAPE, "input '%s': dim %d is %lld, %lld expected", decl->name, (int)k,
                        (long long)t->dims[k], (long long)d);
      continue;
    }
    int64_t s = mx_sym_symbol_index(g->syms, d);
    if (s < 0 || (size_t)s >= n_syms) continue; /* expressions are checked by the ops that use them */
    if (bound[s] == INT64_MIN) {
      bound[s] = t->dims[k];
    } else if (bound[s] != t->dims[k]) {
      return mx__fail(err, MX_ERR_SHAPE, "input '%s': dim %d is %lld, but symbol '%s' is already %lld",
                      decl->name, (int)k, (long long)t->dims[k], mx_symtab_symbol_name(g->syms, (size_t)s),
                      (long long)bound[s]);
    }
  }
  return MX_OK;
}

/* Matches the caller's inputs to graph inputs: by name when all have names, else by position. */
static mx_status match_inputs(const mx_graph *g, const mx_tensor *inputs, size_t n_inputs,
                              const mx_tensor **by_input, mx_error *err) {
  if (n_inputs != g->n_inputs)
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "graph '%s' has %zu inputs, %zu given", g->name, g->n_inputs,
                    n_inputs);
  if (n_inputs && !inputs) return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "inputs is NULL");
  bool named = n_inputs > 0;
  for (size_t i = 0; i < n_inputs; i++) named = named && inputs[i].name;
  for (size_t i = 0; i < g->n_inputs; i++) by_input[i] = named ? NULL : &inputs[i];
  if (!named) return MX_OK;
  for (size_t i = 0; i < n_inputs; i++) {
    size_t k = 0;
    while (k < g->n_inputs && strcmp(g->values[g->inputs[k]].name, inputs[i].name) != 0) k++;
    if (k == g->n_inputs)
      return mx__fail(err, MX_ERR_NOT_FOUND, "graph '%s' has no input named '%s'", g->name, inputs[i].name);
    if (by_input[k]) return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "input '%s' is given twice", inputs[i].name);
    by_input[k] = &inputs[i];
  }
  return MX_OK;
}

static mx_status copy_tensor(const mx_tensor *src, mx_tensor *dst) {
  size_t nbytes = 0;
  mx_tensor_nbytes(src, &nbytes);
  *dst = *src;
  dst->name = NULL;
  dst->placement = MX_HOST;
  dst->data = mx__host_alloc(nbytes);
  if (!dst->data) return MX_ERR_OUT_OF_MEMORY;
  if (nbytes) memcpy(dst->data, src->data, nbytes);
  return MX_OK;
}

mx_status mx_reference_run(mx_graph *g, const mx_tensor *inputs, size_t n_inputs, mx_tensor *outputs,
                           size_t n_outputs, mx_error *err) {
  if (!g) return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "graph is NULL");
  if (n_outputs != g->n_outputs)
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "graph '%s' has %zu outputs, %zu requested", g->name,
                    g->n_outputs, n_outputs);
  if (n_outputs && !outputs) return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "outputs is NULL");
  memset(outputs, 0, n_outputs * sizeof *outputs);
  mx_status st = mx_graph_infer(g);
  if (st != MX_OK) return mx__fail(err, st, "%s", mx_graph_last_error(g));

  const mx_node_id *order;
  size_t n_order;
  st = mx__graph_topo_order(g, &order, &n_order);
  if (st != MX_OK) return mx__fail(err, st, "%s", mx_graph_last_error(g));

  size_t nv = g->n_values, n_syms = mx_symtab_symbol_count(g->syms);
  mx_tensor *vals = calloc(nv ? nv : 1, sizeof *vals);      /* run-time tensor of each value */
  uint8_t *owned = calloc(nv ? nv : 1, 1);                    /* 1 when vals[v].data is ours */
  size_t *uses = calloc(nv ? nv : 1, sizeof *uses);           /* remaining consumer uses */
  const mx_tensor **by_input = calloc(g->n_inputs ? g->n_inputs : 1, sizeof *by_input);
  int64_t *bound = malloc((n_syms ? n_syms : 1) * sizeof *bound);
  const mx_tensor **ins = NULL;
  mx_symtab *scratch = NULL;
  if (!vals || !owned || !uses || !by_input || !bound || mx_symtab_create(&scratch) != MX_OK) {
    st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory starting the reference interpreter");
    goto cleanup;
  }
  for (size_t s = 0; s < n_syms; s++) bound[s] = INT64_MIN;
  st = match_inputs(g, inputs, n_inputs, by_input, err);
  if (st != MX_OK) goto cleanup;
  for (size_t i = 0; i < g->n_inputs; i++) {
    const mx_value *decl = &g->values[g->inputs[i]];
    st = check_input(g, decl, by_input[i], bound, n_syms, err);
    if (st != MX_OK) goto cleanup;
    vals[g->inputs[i]] = *by_input[i];
  }
  for (size_t v = 0; v < nv; v++) {
    const mx_value *val = &g->values[v];
    if (val->flags & MX_VALUE_DEAD) continue;
    if ((val->flags & MX_VALUE_CONST) && !(val->flags & MX_VALUE_INPUT)) vals[v] = *val->data;
    uses[v] = val->n_consumers;
  }
  size_t max_in = 1;
  for (size_t i = 0; i < n_order; i++)
    if (g->nodes[order[i]].n_inputs > max_in) max_in = g->nodes[order[i]].n_inputs;
  ins = calloc(max_in, sizeof *ins);
  if (!ins) {
    st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory in the reference interpreter");
    goto cleanup;
  }

  for (size_t i = 0; i < n_order; i++) {
    const mx_node *nd = &g->nodes[order[i]];
    for (uint32_t k = 0; k < nd->n_inputs; k++) ins[k] = nd->inputs[k] == MX_NO_VALUE ? NULL : &vals[nd->inputs[k]];
    mx_tensor outs_buf[16];
    mx_tensor *outs = nd->n_outputs <= 16 ? outs_buf : calloc(nd->n_outputs, sizeof *outs);
    if (!outs) {
      st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory in the reference interpreter");
      goto cleanup;
    }
    st = mx__reference_exec_node(g, order[i], scratch, ins, outs, err);
    if (st == MX_OK) {
      for (uint32_t k = 0; k < nd->n_outputs; k++) {
        vals[nd->outputs[k]] = outs[k];
        owned[nd->outputs[k]] = 1;
      }
    }
    if (outs != outs_buf) free(outs);
    if (st != MX_OK) goto cleanup;
    /* Free intermediates whose last consumer this was (graph outputs are kept). */
    for (uint32_t k = 0; k < nd->n_inputs; k++) {
      mx_value_id v = nd->inputs[k];
      if (v == MX_NO_VALUE || --uses[v] > 0 || !owned[v] || (g->values[v].flags & MX_VALUE_OUTPUT)) continue;
      mx__host_free(vals[v].data);
      vals[v].data = NULL;
      owned[v] = 0;
    }
  }
  for (size_t i = 0; i < n_outputs; i++) {
    mx_value_id v = g->outputs[i];
    bool used_again = false;
    for (size_t k = i + 1; k < n_outputs; k++) used_again = used_again || g->outputs[k] == v;
    if (owned[v] && !used_again) {
      outputs[i] = vals[v]; /* hand over the buffer */
      owned[v] = 0;
    } else if (copy_tensor(&vals[v], &outputs[i]) != MX_OK) {
      st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory copying output '%s'", g->values[v].name);
      for (size_t k = 0; k <= i; k++) mx_tensor_release(&outputs[k]);
      goto cleanup;
    }
    outputs[i].name = g->values[v].name;
    outputs[i].placement = MX_HOST;
  }
  st = MX_OK;

cleanup:
  if (vals && owned)
    for (size_t v = 0; v < nv; v++)
      if (owned[v]) mx__host_free(vals[v].data);
  mx_symtab_destroy(scratch);
  free(ins);
  free(bound);
  free(by_input);
  free(uses);
  free(owned);
  free(vals);
  return st;
}
