/* Step start: matching the caller's tensors to the graph inputs, checking each against its
 * declared dtype and shape, and binding the symbols its dims name. A symbol bound twice to
 * different values, a wrong rank or dtype, or a concrete dim mismatch is an error naming the
 * input and dim. Every binding also records whether the symbol's value changed since the
 * previous step, which is what lets ops keep their output dims. */
#include <stdio.h>
#include <string.h>

#include "dynamic_exec/dynamic_exec_impl.h"

bool mx__dyn_bind_symbol(mx_dyn_exec *e, uint32_t s, int64_t value) {
  int64_t *cur = &e->sym_val[s];
  if (*cur == INT64_MIN) {
    *cur = value;
    if (e->sym_prev[s] != value) {
      e->sym_prev[s] = value;
      e->changed |= mx__dyn_sym_bit(s);
    }
    return true;
  }
  return *cur == value;
}

/* The caller's tensor for graph input i. By name, the position that matched last step is tried
 * first (callers pass their tensors in the same order every step). */
static const mx_tensor *match_input(mx_dyn_exec *e, const mx_tensor *inputs, size_t n, bool named, size_t i) {
  if (!named) return &inputs[i];
  const char *want = e->g->values[e->g->inputs[i]].name;
  uint32_t last = e->in_pos[i];
  if (last < n && strcmp(inputs[last].name, want) == 0) return &inputs[last];
  for (size_t k = 0; k < n; k++) {
    if (k == last || strcmp(inputs[k].name, want) != 0) continue;
    e->in_pos[i] = (uint32_t)k;
    return &inputs[k];
  }
  return NULL;
}

static mx_status check_input(mx_dyn_exec *e, size_t i, const mx_tensor *t) {
  const mx_graph *g = e->g;
  mx_value_id v = g->inputs[i];
  const mx__dyn_pval *decl = &e->plan->vals[v];
  const char *name = g->values[v].name;
  if (t->dtype != decl->dtype)
    return mx__dyn_fail(e, MX_ERR_DTYPE, "input '%s': dtype %s given, %s expected", name,
                        mx_dtype_name(t->dtype), mx_dtype_name(decl->dtype));
  if (t->rank < 0 || t->rank > MX_MAX_RANK)
    return mx__dyn_fail(e, MX_ERR_SHAPE, "input '%s': rank %d is out of range", name, (int)t->rank);
  if (decl->rank >= 0 && t->rank != decl->rank)
    return mx__dyn_fail(e, MX_ERR_SHAPE, "input '%s': rank %d given, %d expected", name, (int)t->rank,
                        (int)decl->rank);
  size_t nbytes;
  if (!mx__dyn_dims_bytes(t->dims, t->rank, decl->esize, &nbytes))
    return mx__dyn_fail(e, MX_ERR_SHAPE, "input '%s': invalid or overflowing dims", name);
  if (nbytes && !t->data) return mx__dyn_fail(e, MX_ERR_INVALID_ARGUMENT, "input '%s': data is NULL", name);
  if (t->placement != MX_HOST && t->placement != MX_DEVICE)
    return mx__dyn_fail(e, MX_ERR_INVALID_ARGUMENT, "input '%s': invalid placement %d", name,
                        (int)t->placement);
  if (decl->rank >= 0) {
    for (int32_t k = 0; k < t->rank; k++) {
      const mx__dyn_dimx *d = &decl->dims[k];
      if (d->kind == MX__DYN_DIM_CONST) {
        if (d->v != t->dims[k])
          return mx__dyn_fail(e, MX_ERR_SHAPE, "input '%s': dim %d is %lld, %lld expected", name, (int)k,
                              (long long)t->dims[k], (long long)d->v);
        continue;
      }
      uint32_t s = e->plan->input_syms[i * MX_MAX_RANK + (size_t)k];
      if (s == MX__DYN_NONE) continue;
      if (!mx__dyn_bind_symbol(e, s, t->dims[k]))
        return mx__dyn_fail(e, MX_ERR_SHAPE, "input '%s': dim %d is %lld, but symbol '%s' is already %lld",
                            name, (int)k, (long long)t->dims[k], mx_symtab_symbol_name(e->g->syms, s),
                            (long long)e->sym_val[s]);
    }
  }
  mx__dyn_val *rv = &e->vals[v];
  rv->live = true;
  rv->live_step = e->step;
  rv->rank = t->rank;
  for (int32_t k = 0; k < MX_MAX_RANK; k++) rv->dims[k] = k < t->rank ? t->dims[k] : 0;
  rv->nbytes = nbytes;
  rv->dev = t->placement == MX_DEVICE ? t->data : NULL;
  rv->host = t->placement == MX_HOST ? t->data : NULL;
  rv->buf = MX__DYN_NONE;
  rv->ready_stream = -1;
  rv->upload_stream = -1;
  rv->pad_rows = 0;
  return MX_OK;
}

/* Declared dims that are expressions (not a plain symbol) are checked once every symbol is
 * bound; those using a symbol no input binds are left to the ops that read them. */
static mx_status check_expressions(mx_dyn_exec *e, size_t i) {
  const mx_graph *g = e->g;
  mx_value_id v = g->inputs[i];
  const mx__dyn_pval *pv = &e->plan->vals[v];
  const mx__dyn_val *rv = &e->vals[v];
  if (pv->rank < 0) return MX_OK;
  for (int32_t k = 0; k < pv->rank; k++) {
    if (pv->dims[k].kind != MX__DYN_DIM_EXPR) continue;
    int64_t want;
    if (mx__dyn_eval_dimx(e, &pv->dims[k], &want) != MX_OK || want == rv->dims[k]) continue;
    char expr[128];
    mx_sym_format(g->syms, (mx_dim)pv->dims[k].v, expr, sizeof expr);
    return mx__dyn_fail(e, MX_ERR_SHAPE, "input '%s': dim %d is %lld, but %s = %lld", g->values[v].name,
                        (int)k, (long long)rv->dims[k], expr, (long long)want);
  }
  return MX_OK;
}

mx_status mx__dyn_bind_inputs(mx_dyn_exec *e, const mx_tensor *inputs, size_t n) {
  const mx_graph *g = e->g;
  if (n != g->n_inputs)
    return mx__dyn_fail(e, MX_ERR_INVALID_ARGUMENT, "graph '%s' has %zu inputs, %zu given", g->name,
                        g->n_inputs, n);
  if (n && !inputs) return mx__dyn_fail(e, MX_ERR_INVALID_ARGUMENT, "inputs is NULL");
  bool named = n > 0;
  for (size_t i = 0; i < n && named; i++) named = inputs[i].name != NULL;
  for (size_t i = 0; i < n; i++) {
    const mx_tensor *t = match_input(e, inputs, n, named, i);
    if (!t)
      return mx__dyn_fail(e, MX_ERR_NOT_FOUND, "input '%s' is not given (inputs are matched by name)",
                          g->values[g->inputs[i]].name);
    mx_status st = check_input(e, i, t);
    if (st != MX_OK) return st;
  }
  for (size_t i = 0; i < n; i++) {
    mx_status st = e->in_exprs[i] ? check_expressions(e, i) : MX_OK;
    if (st != MX_OK) return st;
  }
  return MX_OK;
}
