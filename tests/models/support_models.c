/* Helpers shared by the model-generator tests (see models_support.h). The graph comparison
 * reads mixrt's IR directly (graph/ir.h): the public API has no node accessors. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/ir.h"
#include "mixrt/reference.h"
#include "models/models_support.h"

mx_tensor mxt_random_f32(int32_t rank, const int64_t *dims, uint64_t *rng) {
  mx_tensor t;
  cr_assert_eq(mx_tensor_alloc(MX_FLOAT32, rank, dims, &t), MX_OK);
  int64_t n;
  cr_assert(mx_tensor_numel(&t, &n));
  float *p = t.data;
  for (int64_t i = 0; i < n; i++) {
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    p[i] = (float)(*rng >> 40) / (float)(1u << 23) - 1.0f;
  }
  return t;
}

void mxt_run(mx_graph *g, const mx_tensor *in, size_t n_in, mx_tensor *out, size_t n_out) {
  mx_error err;
  mx_status st = mx_reference_run(g, in, n_in, out, n_out, &err);
  cr_assert_eq(st, MX_OK, "reference run of '%s': %s", mx_graph_name(g), err.message);
}

void mxt_release_all(mx_tensor *t, size_t n) {
  for (size_t i = 0; i < n; i++) mx_tensor_release(&t[i]);
}

void mxt_expect_bad_config(mx_status st, const mx_graph *g, const mx_error *err, const char *word) {
  cr_assert_eq(st, MX_ERR_INVALID_ARGUMENT, "config naming %s accepted", word);
  cr_assert_null(g);
  cr_assert_eq(err->status, MX_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(err->message, word), "message '%s' does not name %s", err->message, word);
}

const char *mxt_shape_of(mx_graph *g, const char *name, char *buf, size_t cap) {
  mx_value_id v = mx_graph_find_value(g, name);
  cr_assert_neq(v, MX_NO_VALUE, "no value '%s'", name);
  mx_shape s;
  cr_assert(mx_graph_value_shape(g, v, &s));
  mx_shape_format(mx_graph_symtab(g), &s, buf, cap);
  return buf;
}

bool mxt_tensors_identical(const mx_tensor *a, const mx_tensor *b) {
  size_t na, nb;
  if (a->dtype != b->dtype || a->rank != b->rank) return false;
  for (int32_t i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i]) return false;
  if (!mx_tensor_nbytes(a, &na) || !mx_tensor_nbytes(b, &nb) || na != nb) return false;
  return na == 0 || memcmp(a->data, b->data, na) == 0;
}

/* Compares the declared/inferred type of value va of a with vb of b. */
static bool same_value_type(const mx_graph *a, const mx_value *va, const mx_graph *b, const mx_value *vb,
                            const char *what, char *why, size_t cap) {
  char sa[256], sb[256];
  mx_shape_format(a->syms, &va->shape, sa, sizeof sa);
  mx_shape_format(b->syms, &vb->shape, sb, sizeof sb);
  if (strcmp(va->name, vb->name) != 0 || va->dtype != vb->dtype || strcmp(sa, sb) != 0) {
    snprintf(why, cap, "%s: '%s' %s %s vs '%s' %s %s", what, va->name, mx_dtype_name(va->dtype), sa, vb->name,
             mx_dtype_name(vb->dtype), sb);
    return false;
  }
  return true;
}

static bool same_attr(const mx_attr *x, const mx_attr *y) {
  if (strcmp(x->name, y->name) != 0 || x->type != y->type) return false;
  switch (x->type) {
    case MX_ATTR_INT: return x->i == y->i;
    case MX_ATTR_FLOAT: return memcmp(&x->f, &y->f, sizeof x->f) == 0;
    case MX_ATTR_STRING: return strcmp(x->s, y->s) == 0;
    case MX_ATTR_INTS:
      return x->count == y->count &&
             (x->count == 0 || memcmp(x->ints, y->ints, x->count * sizeof *x->ints) == 0);
    case MX_ATTR_FLOATS:
      return x->count == y->count &&
             (x->count == 0 || memcmp(x->floats, y->floats, x->count * sizeof *x->floats) == 0);
    case MX_ATTR_STRINGS:
      if (x->count != y->count) return false;
      for (size_t i = 0; i < x->count; i++)
        if (strcmp(x->strings[i], y->strings[i]) != 0) return false;
      return true;
    case MX_ATTR_TENSOR: return mxt_tensors_identical(x->tensor, y->tensor);
    default: return false; /* the generators use no graph attributes */
  }
}

static const char *value_name(const mx_graph *g, mx_value_id v) {
  return v == MX_NO_VALUE ? "" : g->values[v].name;
}

static bool same_node(const mx_graph *a, const mx_node *x, const mx_graph *b, const mx_node *y, char *why,
                      size_t cap) {
  if (strcmp(x->op_type, y->op_type) != 0 || strcmp(x->domain, y->domain) != 0 ||
      strcmp(x->name, y->name) != 0 || x->n_inputs != y->n_inputs || x->n_outputs != y->n_outputs ||
      x->n_attrs != y->n_attrs) {
    snprintf(why, cap, "node '%s' (%s, %u in, %u out, %u attrs) vs '%s' (%s, %u in, %u out, %u attrs)",
             x->name, x->op_type, x->n_inputs, x->n_outputs, x->n_attrs, y->name, y->op_type, y->n_inputs,
             y->n_outputs, y->n_attrs);
    return false;
  }
  for (uint32_t k = 0; k < x->n_inputs; k++) {
    if (strcmp(value_name(a, x->inputs[k]), value_name(b, y->inputs[k])) != 0) {
      snprintf(why, cap, "node '%s': input %u is '%s' vs '%s'", x->name, k, value_name(a, x->inputs[k]),
               value_name(b, y->inputs[k]));
      return false;
    }
  }
  for (uint32_t k = 0; k < x->n_outputs; k++) {
    if (strcmp(value_name(a, x->outputs[k]), value_name(b, y->outputs[k])) != 0) {
      snprintf(why, cap, "node '%s': output %u is '%s' vs '%s'", x->name, k, value_name(a, x->outputs[k]),
               value_name(b, y->outputs[k]));
      return false;
    }
  }
  for (uint32_t k = 0; k < x->n_attrs; k++) {
    if (!same_attr(&x->attrs[k], &y->attrs[k])) {
      snprintf(why, cap, "node '%s': attribute %u ('%s' vs '%s') differs", x->name, k, x->attrs[k].name,
               y->attrs[k].name);
      return false;
    }
  }
  return true;
}

/* Counts the live constants of g. */
static size_t count_constants(const mx_graph *g) {
  size_t n = 0;
  for (size_t v = 0; v < g->n_values; v++)
    if ((g->values[v].flags & MX_VALUE_CONST) && !(g->values[v].flags & MX_VALUE_DEAD)) n++;
  return n;
}

bool mxt_graphs_identical(mx_graph *a, mx_graph *b, char *why, size_t cap) {
  if (a->n_inputs != b->n_inputs || a->n_outputs != b->n_outputs) {
    snprintf(why, cap, "%zu/%zu inputs/outputs vs %zu/%zu", a->n_inputs, a->n_outputs, b->n_inputs,
             b->n_outputs);
    return false;
  }
  for (size_t i = 0; i < a->n_inputs; i++)
    if (!same_value_type(a, &a->values[a->inputs[i]], b, &b->values[b->inputs[i]], "input", why, cap))
      return false;
  for (size_t i = 0; i < a->n_outputs; i++)
    if (!same_value_type(a, &a->values[a->outputs[i]], b, &b->values[b->outputs[i]], "output", why, cap))
      return false;

  const mx_node_id *oa, *ob;
  size_t na, nb;
  if (mx__graph_topo_order(a, &oa, &na) != MX_OK || mx__graph_topo_order(b, &ob, &nb) != MX_OK) {
    snprintf(why, cap, "no topological order");
    return false;
  }
  if (na != nb) {
    snprintf(why, cap, "%zu nodes vs %zu", na, nb);
    return false;
  }
  for (size_t i = 0; i < na; i++)
    if (!same_node(a, &a->nodes[oa[i]], b, &b->nodes[ob[i]], why, cap)) return false;

  size_t ca = count_constants(a), cb = count_constants(b);
  if (ca != cb) {
    snprintf(why, cap, "%zu constants vs %zu", ca, cb);
    return false;
  }
  for (size_t v = 0; v < a->n_values; v++) {
    const mx_value *x = &a->values[v];
    if (!(x->flags & MX_VALUE_CONST) || (x->flags & MX_VALUE_DEAD)) continue;
    mx_value_id w = mx_graph_find_value(b, x->name);
    const mx_tensor *tb = w == MX_NO_VALUE ? NULL : mx_graph_value_constant(b, w);
    if (!tb || !mxt_tensors_identical(x->data, tb)) {
      snprintf(why, cap, "constant '%s' %s", x->name, tb ? "differs" : "is missing");
      return false;
    }
  }
  return true;
}
