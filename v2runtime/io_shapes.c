/* Structured shapes of a session's inputs and outputs: each dim as a concrete size or a
 * symbolic expression (mx_session_io_dim), the model's symbols by name, and the concrete shape
 * of an output for given input shapes or symbol values (mx_session_output_shape,
 * mx_session_output_shape_for), worked out from the compiled model without running it. */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "v2runtime/session_impl.h"

size_t mx_session_symbol_count(const mx_session *s) {
  return s && s->prog ? mx_symtab_symbol_count(s->prog->root->syms) : 0;
}

const char *mx_session_symbol_name(const mx_session *s, size_t index) {
  return s && s->prog ? mx_symtab_symbol_name(s->prog->root->syms, index) : NULL;
}

bool mx_session_io_dim(const mx_session *s, bool output, size_t index, int32_t k, mx_io_dim *dim) {
  if (!s || !s->prog || !dim) return false;
  const mx_graph *root = s->prog->root;
  if (index >= (output ? root->n_outputs : root->n_inputs)) return false;
  const mx_value *v = &root->values[output ? root->outputs[index] : root->inputs[index]];
  if (v->shape.rank < 0 || k < 0 || k >= v->shape.rank) return false;
  mx_dim d = v->shape.dims[k];
  memset(dim, 0, sizeof *dim);
  dim->value = -1;
  if (mx_dim_is_concrete(d)) {
    dim->kind = MX_IO_DIM_CONCRETE;
    dim->value = d;
  } else if (mx_dim_is_unknown(d)) {
    dim->kind = MX_IO_DIM_UNKNOWN;
  } else {
    dim->kind = MX_IO_DIM_SYMBOLIC;
    uint32_t idx[1];
    dim->n_symbols = (uint32_t)mx_sym_symbols_of(root->syms, d, idx, 1);
  }
  if (dim->kind != MX_IO_DIM_UNKNOWN)
    mx_sym_format(root->syms, d, dim->expression, sizeof dim->expression);
  else
    memcpy(dim->expression, "?", 2);
  return true;
}

/* Evaluates output `index` with the symbol values in `values` (INT64_MIN: unbound). */
static mx_status evaluate(mx_session *s, size_t index, const int64_t *values, size_t n_values, int32_t *rank,
                          int64_t *dims) {
  const mx_graph *root = s->prog->root;
  if (index >= root->n_outputs)
    return mx__fail(&s->err, MX_ERR_INVALID_ARGUMENT, "output %zu: the model has %zu outputs", index,
                    root->n_outputs);
  const mx_value *v = &root->values[root->outputs[index]];
  if (v->shape.rank < 0)
    return mx__fail(&s->err, MX_ERR_UNSUPPORTED, "output '%s' has an unknown rank until the model runs",
                    v->name);
  for (int32_t k = 0; k < v->shape.rank; k++) {
    mx_dim d = v->shape.dims[k];
    mx_status st = mx_sym_eval(root->syms, d, values, n_values, &dims[k]);
    if (st == MX_OK && dims[k] >= 0) continue;
    char text[128];
    mx_sym_format(root->syms, d, text, sizeof text);
    if (mx_dim_is_unknown(d))
      return mx__fail(&s->err, MX_ERR_UNSUPPORTED, "output '%s' dim %d is known only when the model runs",
                      v->name, (int)k);
    return mx__fail(&s->err, st == MX_OK ? MX_ERR_SHAPE : st, "output '%s' dim %d is '%s': %s", v->name,
                    (int)k, text,
                    st == MX_OK              ? "negative for these values"
                    : st == MX_ERR_NOT_FOUND ? "a symbol it uses has no value"
                                             : "it overflows or divides by zero");
  }
  *rank = v->shape.rank;
  return MX_OK;
}

mx_status mx_session_output_shape(mx_session *s, const mx_tensor *inputs, size_t n_inputs, size_t index,
                                  int32_t *rank, int64_t *dims) {
  if (!s || !rank || !dims) return MX_ERR_INVALID_ARGUMENT;
  mx_status st = mx__session_enter(s);
  if (st != MX_OK) return st;
  mx_error_clear(&s->err);
  int64_t *values = NULL;
  mx_program *p = s->prog;
  if (!p) {
    st = mx__fail(&s->err, MX_ERR_INVALID_ARGUMENT, "no model is loaded");
    goto out;
  }
  const mx_graph *root = p->root;
  size_t n = root->n_inputs, n_syms = mx_symtab_symbol_count(root->syms);
  if (n_inputs != n || (n && !inputs)) {
    st = mx__fail(&s->err, MX_ERR_INVALID_ARGUMENT, "the model has %zu inputs, %zu given", n, n_inputs);
    goto out;
  }
  values = malloc((n_syms ? n_syms : 1) * sizeof *values);
  if (!values) {
    st = mx__fail(&s->err, MX_ERR_OUT_OF_MEMORY, "out of host memory");
    goto out;
  }
  for (size_t q = 0; q < n_syms; q++) values[q] = INT64_MIN;
  /* By name when every input is named, else by position (as mx_session_run). */
  bool named = n > 0;
  for (size_t i = 0; i < n; i++) named = named && inputs[i].name;
  for (size_t i = 0; i < n && st == MX_OK; i++) {
    size_t g = i;
    if (named)
      for (g = 0; g < n && strcmp(root->values[root->inputs[g]].name, inputs[i].name) != 0;) g++;
    if (g == n) {
      st = mx__fail(&s->err, MX_ERR_NOT_FOUND, "the model has no input named '%s'", inputs[i].name);
      break;
    }
    const mx_value *decl = &root->values[root->inputs[g]];
    if (inputs[i].rank != decl->shape.rank && decl->shape.rank >= 0) {
      st = mx__fail(&s->err, MX_ERR_SHAPE, "input '%s' has rank %d, the model's has %d", decl->name,
                    (int)inputs[i].rank, (int)decl->shape.rank);
      break;
    }
    for (int32_t k = 0; k < inputs[i].rank && k < MX_MAX_RANK; k++) {
      int32_t sym = p->input_dim_sym ? p->input_dim_sym[g * MX_MAX_RANK + (size_t)k] : -1;
      if (sym < 0 || (size_t)sym >= n_syms) continue;
      if (values[sym] != INT64_MIN && values[sym] != inputs[i].dims[k]) {
        st = mx__fail(&s->err, MX_ERR_SHAPE, "input '%s' dim %d gives %s = %lld, another input gave %lld",
                      decl->name, (int)k, mx_symtab_symbol_name(root->syms, (size_t)sym),
                      (long long)inputs[i].dims[k], (long long)values[sym]);
        break;
      }
      values[sym] = inputs[i].dims[k];
    }
  }
  if (st == MX_OK) st = evaluate(s, index, values, n_syms, rank, dims);
out:
  free(values);
  mx__session_leave(s);
  return st;
}

mx_status mx_session_output_shape_for(mx_session *s, const char *const *symbols, const int64_t *values,
                                      size_t n_symbols, size_t index, int32_t *rank, int64_t *dims) {
  if (!s || !rank || !dims || (n_symbols && (!symbols || !values))) return MX_ERR_INVALID_ARGUMENT;
  mx_status st = mx__session_enter(s);
  if (st != MX_OK) return st;
  mx_error_clear(&s->err);
  int64_t *bound = NULL;
  mx_program *p = s->prog;
  if (!p) {
    st = mx__fail(&s->err, MX_ERR_INVALID_ARGUMENT, "no model is loaded");
    goto out;
  }
  size_t n_syms = mx_symtab_symbol_count(p->root->syms);
  bound = malloc((n_syms ? n_syms : 1) * sizeof *bound);
  if (!bound) {
    st = mx__fail(&s->err, MX_ERR_OUT_OF_MEMORY, "out of host memory");
    goto out;
  }
  for (size_t q = 0; q < n_syms; q++) bound[q] = INT64_MIN;
  for (size_t i = 0; i < n_symbols && st == MX_OK; i++) {
    int64_t q =
        symbols[i] ? mx_sym_symbol_index(p->root->syms, mx_sym_lookup(p->root->syms, symbols[i])) : -1;
    if (q < 0 || (size_t)q >= n_syms)
      st = mx__fail(&s->err, MX_ERR_NOT_FOUND, "the model has no symbol named '%s'",
                    symbols[i] ? symbols[i] : "");
    else
      bound[q] = values[i];
  }
  if (st == MX_OK) st = evaluate(s, index, bound, n_syms, rank, dims);
out:
  free(bound);
  mx__session_leave(s);
  return st;
}
