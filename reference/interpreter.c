/* The reference interpreter (see mixrt/reference.h): checks the caller's inputs against the
 * graph's declared inputs, then runs every node in topological order through
 * mx__reference_exec_node, freeing each intermediate right after its last consumer.
 *
 * Subgraphs (If / Loop / Scan bodies) run through the same loop (mx__reference_run_graph) in a
 * frame chained to their node's frame: a value captured from an enclosing graph is read there
 * by name, and a value some subgraph captures is kept until its frame ends. Nodes of ops that
 * run subgraphs or handle sequences and optionals go to reference/control.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/string_tensor.h"
#include "mixrt/sequence.h"
#include "reference/reference.h"

/* Checks one given input against the declared graph input, binding symbols as it goes. */
static mx_status check_input(const mx_graph *g, const mx_value *decl, const mx_tensor *t, int64_t *bound,
                             size_t n_syms, mx_error *err) {
  if (decl->kind != MX_KIND_TENSOR || mx_value_is_list(t)) {
    /* A sequence or optional: its kind must match (an optional input also takes a plain value). */
    mx_value_kind k = mx_value_kind_of(t);
    bool ok = k == (mx_value_kind)decl->kind || (decl->kind == MX_KIND_OPTIONAL && k == MX_KIND_TENSOR) ||
              (decl->kind == MX_KIND_OPTIONAL_SEQUENCE && k == MX_KIND_SEQUENCE);
    if (!ok)
      return mx__fail(err, MX_ERR_DTYPE, "input '%s': a %s given, a %s expected", decl->name,
                      mx__reference_kind_name(k), mx__reference_kind_name((mx_value_kind)decl->kind));
    return MX_OK;
  }
  if (t->dtype != decl->dtype)
    return mx__fail(err, MX_ERR_DTYPE, "input '%s': dtype %s given, %s expected", decl->name,
                    mx_dtype_name(t->dtype), mx_dtype_name(decl->dtype));
  if (t->rank < 0 || t->rank > MX_MAX_RANK)
    return mx__fail(err, MX_ERR_SHAPE, "input '%s': rank %d is out of range", decl->name, (int)t->rank);
  size_t nbytes;
  if (!mx_tensor_nbytes(t, &nbytes))
    return mx__fail(err, MX_ERR_SHAPE, "input '%s': invalid or overflowing dims", decl->name);
  if (nbytes && !t->data)
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "input '%s': data is NULL", decl->name);
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
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "graph '%s' has %zu inputs, %zu given", g->name,
                    g->n_inputs, n_inputs);
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
    if (by_input[k])
      return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "input '%s' is given twice", inputs[i].name);
    by_input[k] = &inputs[i];
  }
  return MX_OK;
}

static mx_status copy_tensor(const mx_tensor *src, mx_tensor *dst) {
  if (mx_value_is_list(src)) return mx_value_copy(src, dst);
  size_t nbytes = 0;
  mx_tensor_nbytes(src, &nbytes);
  *dst = *src;
  dst->name = NULL;
  dst->placement = MX_HOST;
  dst->data = mx__host_alloc(nbytes);
  if (!dst->data) return MX_ERR_OUT_OF_MEMORY;
  if (src->dtype == MX_STRING) { /* deep: each string is the copy's own */
    memset(dst->data, 0, nbytes);
    mx_status st = mx__strings_copy(dst->data, src->data, nbytes / sizeof(char *));
    if (st != MX_OK) {
      mx__host_free(dst->data);
      dst->data = NULL;
    }
    return st;
  }
  if (nbytes) memcpy(dst->data, src->data, nbytes);
  return MX_OK;
}

/* Frees a run-time value the frame owns (a tensor's data, or a sequence / optional whole). */
static void free_value(mx_tensor *t) {
  int64_t n;
  if (mx_value_is_list(t)) {
    mx_tensor_release(t);
    return;
  }
  if (t->dtype == MX_STRING && t->data && mx_tensor_numel(t, &n)) mx__strings_free(t->data, (size_t)n);
  mx__host_free(t->data);
  t->data = NULL;
}

const mx_tensor *mx__reference_frame_lookup(const mx__ref_frame *f, const char *name) {
  for (; f; f = f->parent) {
    mx_value_id v = mx_graph_find_value(f->g, name);
    if (v != MX_NO_VALUE) return &f->vals[v]; /* an outer value of f is bound already */
  }
  return NULL;
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
  return mx__reference_run_graph(g, NULL, inputs, n_inputs, outputs, n_outputs, err);
}

mx_status mx__reference_run_graph(mx_graph *g, const mx__ref_frame *parent, const mx_tensor *inputs,
                                  size_t n_inputs, mx_tensor *outputs, size_t n_outputs, mx_error *err) {
  return mx__reference_run_body(g, parent, inputs, n_inputs, outputs, n_outputs, NULL, err);
}

mx_status mx__reference_run_body(mx_graph *g, const mx__ref_frame *parent, const mx_tensor *inputs,
                                 size_t n_inputs, mx_tensor *outputs, size_t n_outputs, bool *borrowed,
                                 mx_error *err) {
  mx_status st;
  memset(outputs, 0, n_outputs * sizeof *outputs);
  const mx_node_id *order;
  size_t n_order;
  st = mx__graph_topo_order(g, &order, &n_order);
  if (st != MX_OK) return mx__fail(err, st, "%s", mx_graph_last_error(g));

  size_t nv = g->n_values, n_syms = mx_symtab_symbol_count(g->syms);
  size_t max_in = 1;
  for (size_t i = 0; i < n_order; i++)
    if (g->nodes[order[i]].n_inputs > max_in) max_in = g->nodes[order[i]].n_inputs;
  /* The frame's arrays share one zeroed block, widest elements first: a Loop body runs once per
   * iteration, and one allocation per run keeps an iteration's fixed cost small. */
  size_t nv1 = nv ? nv : 1, ni1 = g->n_inputs ? g->n_inputs : 1, ns1 = n_syms ? n_syms : 1;
  size_t block_bytes = nv1 * sizeof(mx_tensor) + nv1 * sizeof(size_t) + ns1 * sizeof(int64_t) +
                       (ni1 + max_in) * sizeof(mx_tensor *) + 2 * nv1;
  char *block = calloc(1, block_bytes);
  mx_tensor *vals = NULL; /* run-time tensor of each value */
  uint8_t *owned = NULL;  /* 1 when vals[v].data is ours */
  size_t *uses = NULL;    /* remaining consumer uses */
  uint8_t *keep = NULL;   /* 1: a subgraph reads it by name */
  const mx_tensor **by_input = NULL;
  int64_t *bound = NULL;
  const mx_tensor **ins = NULL;
  mx_symtab *scratch = NULL;          /* made by the first node that needs it (an empty body never does) */
  bool keep_own = g->n_subgraphs > 0; /* without subgraphs nothing is captured: keep stays zero */
  if (block) {
    vals = (mx_tensor *)block;
    uses = (size_t *)(vals + nv1);
    bound = (int64_t *)(uses + nv1);
    by_input = (const mx_tensor **)(bound + ns1);
    ins = by_input + ni1;
    owned = (uint8_t *)(ins + max_in);
    keep = keep_own ? mx__graph_captured(g) : owned + nv1;
  }
  if (!block || !keep) {
    st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory starting the reference interpreter");
    goto cleanup;
  }
  for (size_t s = 0; s < n_syms; s++) bound[s] = INT64_MIN;
  st = match_inputs(g, inputs, n_inputs, by_input, err);
  if (st != MX_OK) goto cleanup;
  for (size_t i = 0; i < g->n_inputs; i++) {
    const mx_value *decl = &g->values[g->inputs[i]];
    if (!parent) { /* a subgraph's inputs come from its node, already checked */
      st = check_input(g, decl, by_input[i], bound, n_syms, err);
      if (st != MX_OK) goto cleanup;
    }
    vals[g->inputs[i]] = *by_input[i];
  }
  for (size_t v = 0; v < nv; v++) {
    const mx_value *val = &g->values[v];
    if (val->flags & MX_VALUE_DEAD) continue;
    if ((val->flags & MX_VALUE_CONST) && !(val->flags & MX_VALUE_INPUT)) vals[v] = *val->data;
    if ((val->flags & MX_VALUE_OUTER) && parent) {
      const mx_tensor *o = mx__reference_frame_lookup(parent, val->name);
      if (!o) {
        st = mx__fail(err, MX_ERR_INVALID_GRAPH, "graph '%s' reads '%s', which no enclosing graph has",
                      g->name, val->name);
        goto cleanup;
      }
      vals[v] = *o; /* borrowed */
    }
    uses[v] = val->n_consumers;
  }
  mx__ref_frame frame = {g, vals, parent};

  for (size_t i = 0; i < n_order; i++) {
    const mx_node *nd = &g->nodes[order[i]];
    for (uint32_t k = 0; k < nd->n_inputs; k++)
      ins[k] = nd->inputs[k] == MX_NO_VALUE ? NULL : &vals[nd->inputs[k]];
    mx_tensor outs_buf[16];
    mx_tensor *outs = nd->n_outputs <= 16 ? outs_buf : calloc(nd->n_outputs, sizeof *outs);
    if (!outs) {
      st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory in the reference interpreter");
      goto cleanup;
    }
    if (mx__reference_is_control(g, nd, ins))
      st = mx__reference_exec_control(&frame, order[i], ins, outs, err);
    else if (!scratch && mx_symtab_create(&scratch) != MX_OK)
      st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory in the reference interpreter");
    else
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
      if (v == MX_NO_VALUE || --uses[v] > 0 || !owned[v] || keep[v] || (g->values[v].flags & MX_VALUE_OUTPUT))
        continue;
      free_value(&vals[v]);
      owned[v] = 0;
    }
  }
  for (size_t i = 0; i < n_outputs; i++) {
    mx_value_id v = g->outputs[i];
    bool used_again = false;
    for (size_t k = i + 1; k < n_outputs; k++) used_again = used_again || g->outputs[k] == v;
    if (borrowed) borrowed[i] = false;
    if (owned[v] && !used_again) {
      outputs[i] = vals[v]; /* hand over the buffer */
      owned[v] = 0;
    } else if (borrowed && !owned[v] && (g->values[v].flags & MX_VALUE_INPUT)) {
      outputs[i] = vals[v]; /* the caller's own input given back: no copy */
      borrowed[i] = true;
    } else if (copy_tensor(&vals[v], &outputs[i]) != MX_OK) {
      st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory copying output '%s'", g->values[v].name);
      for (size_t k = 0; k <= i; k++)
        if (!borrowed || !borrowed[k]) mx_tensor_release(&outputs[k]);
      goto cleanup;
    }
    outputs[i].name = g->values[v].name;
    outputs[i].placement = MX_HOST;
  }
  st = MX_OK;

cleanup:
  if (vals && owned)
    for (size_t v = 0; v < nv; v++)
      if (owned[v]) free_value(&vals[v]);
  mx_symtab_destroy(scratch);
  if (keep_own) free(keep);
  free(block);
  return st;
}
