/* Helpers of the rewrite-rule tests (support_fusion.h). */
#include "support_fusion.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "common/half.h"
#include "mixrt/reference.h"

mx_value_id fz_input(mx_graph *g, const char *name, mx_dtype dt, int32_t rank, const mx_dim *dims) {
  mx_shape s = {.rank = rank};
  for (int32_t i = 0; i < rank; i++) s.dims[i] = dims[i];
  mx_value_id v;
  cr_assert_eq(mx_graph_add_input(g, name, dt, &s, &v), MX_OK, "%s", mx_graph_last_error(g));
  return v;
}

mx_value_id fz_const_dt(mx_graph *g, mx_dtype dt, int32_t rank, const int64_t *dims, const void *data) {
  mx_tensor t = {.dtype = dt, .rank = rank, .data = (void *)data};
  for (int32_t i = 0; i < rank; i++) t.dims[i] = dims[i];
  mx_value_id v;
  cr_assert_eq(mx_graph_add_constant(g, NULL, &t, &v), MX_OK, "%s", mx_graph_last_error(g));
  return v;
}

mx_value_id fz_const(mx_graph *g, int32_t rank, const int64_t *dims, const float *data) {
  return fz_const_dt(g, MX_FLOAT32, rank, dims, data);
}

mx_value_id fz_weights(mx_graph *g, int32_t rank, const int64_t *dims, unsigned seed) {
  int64_t n = 1;
  for (int32_t i = 0; i < rank; i++) n *= dims[i];
  float *w = malloc((size_t)(n ? n : 1) * sizeof *w);
  cr_assert(w);
  for (int64_t k = 0; k < n; k++) {
    seed = seed * 1103515245u + 12345u;
    w[k] = (float)((seed >> 8) % 1000) / 1000.0f - 0.5f;
  }
  mx_value_id v = fz_const(g, rank, dims, w);
  free(w);
  return v;
}

mx_value_id fz_ints(mx_graph *g, size_t n, const int64_t *data) {
  int64_t d = (int64_t)n;
  return fz_const_dt(g, MX_INT64, 1, &d, data);
}

mx_value_id fz_op(mx_graph *g, const char *type, size_t n, const mx_value_id *in, const mx_attr *attrs,
                  size_t na) {
  mx_value_id y;
  cr_assert_eq(mx_graph_add_op(g, type, in, n, attrs, na, &y), MX_OK, "%s", mx_graph_last_error(g));
  return y;
}

mx_value_id fz_transpose(mx_graph *g, mx_value_id x, size_t rank, const int64_t *perm) {
  mx_attr a = mx_attr_ints("perm", perm, rank);
  return fz_op(g, "Transpose", 1, &x, &a, 1);
}

size_t fz_count(const mx_graph *g, const char *type) {
  size_t n = 0;
  for (size_t i = 0; i < g->n_nodes; i++)
    if (!(g->nodes[i].flags & MX_NODE_DEAD) && strcmp(g->nodes[i].op_type, type) == 0) n++;
  return n;
}

size_t fz_count_deep(const mx_graph *g, const char *type) {
  size_t n = 0;
  for (size_t i = 0; i < g->n_nodes; i++) {
    const mx_node *nd = &g->nodes[i];
    if (nd->flags & MX_NODE_DEAD) continue;
    if (strcmp(nd->op_type, type) == 0) n++;
    for (uint32_t a = 0; a < nd->n_attrs; a++)
      if (nd->attrs[a].type == MX_ATTR_GRAPH && nd->attrs[a].graph)
        n += fz_count_deep(nd->attrs[a].graph, type);
  }
  return n;
}

size_t fz_hits(const mx_fuse_report *r, const char *rule) {
  for (size_t i = 0; i < r->n_rules; i++)
    if (strcmp(r->rules[i].name, rule) == 0) return r->rules[i].hits;
  cr_assert_fail("no rule %s", rule);
  return 0;
}

/* Random values in [-2, 2) (small integers for integer inputs) of the given dims. */
static void random_input(const mx_value *v, const int64_t *dims, unsigned *seed, mx_tensor *t) {
  cr_assert_eq(mx_tensor_alloc(v->dtype, v->shape.rank, dims, t), MX_OK);
  int64_t n;
  mx_tensor_numel(t, &n);
  for (int64_t k = 0; k < n; k++) {
    *seed = *seed * 1103515245u + 12345u;
    float x = (float)((*seed >> 8) % 2000) / 500.0f - 2.0f;
    switch (v->dtype) {
      case MX_FLOAT32: ((float *)t->data)[k] = x; break;
      case MX_FLOAT64: ((double *)t->data)[k] = x; break;
      case MX_FLOAT16: ((uint16_t *)t->data)[k] = mx__f32_to_f16(x); break;
      case MX_BFLOAT16: ((uint16_t *)t->data)[k] = mx__f32_to_bf16(x); break;
      case MX_INT64: ((int64_t *)t->data)[k] = (int64_t)(*seed >> 8) % 7 - 3; break;
      case MX_INT32: ((int32_t *)t->data)[k] = (int32_t)((*seed >> 8) % 7) - 3; break;
      case MX_BOOL: ((uint8_t *)t->data)[k] = (*seed >> 8) & 1; break;
      default: cr_assert_fail("no random data for dtype %s", mx_dtype_name(v->dtype));
    }
  }
}

mx_graph *fz_fuse_and_compare(fz_builder build, const char *passes, const int64_t (*dims)[MX_MAX_RANK],
                              mx_fuse_report *rep) {
  mx_graph *ref, *g;
  cr_assert_eq(mx_graph_create("ref", &ref), MX_OK);
  cr_assert_eq(mx_graph_create("fused", &g), MX_OK);
  build(ref);
  build(g);
  cr_assert_eq(mx_graph_optimize(ref, NULL), MX_OK, "%s", mx_graph_last_error(ref));
  cr_assert_eq(mx_graph_optimize(g, NULL), MX_OK, "%s", mx_graph_last_error(g));
  cr_assert_eq(mx_graph_fuse(g, passes, rep), MX_OK, "%s", mx_graph_last_error(g));
  cr_assert_eq(mx_graph_validate(g), MX_OK, "%s", mx_graph_last_error(g));
  enum { MAX_IO = 8 };
  mx_tensor ins[MAX_IO], a[MAX_IO], b[MAX_IO];
  cr_assert_leq(ref->n_inputs, MAX_IO);
  cr_assert_leq(ref->n_outputs, MAX_IO);
  unsigned seed = 7;
  for (size_t i = 0; i < ref->n_inputs; i++)
    random_input(&ref->values[ref->inputs[i]], dims[i], &seed, &ins[i]);
  size_t no = ref->n_outputs;
  cr_assert_eq(g->n_outputs, no);
  mx_error err;
  cr_assert_eq(mx_reference_run(ref, ins, ref->n_inputs, a, no, &err), MX_OK, "%s", err.message);
  cr_assert_eq(mx_reference_run(g, ins, g->n_inputs, b, no, &err), MX_OK, "%s", err.message);
  for (size_t k = 0; k < no; k++) {
    cr_assert_str_eq(mx_graph_value_name(g, g->outputs[k]), mx_graph_value_name(ref, ref->outputs[k]));
    char why[256];
    bool half = a[k].dtype == MX_FLOAT16 || a[k].dtype == MX_BFLOAT16;
    cr_assert(mx_tensor_allclose(&b[k], &a[k], half ? 2e-2 : 1e-4, half ? 2e-2 : 1e-5, why, sizeof why),
              "output %zu: %s", k, why);
    mx_tensor_release(&a[k]);
    mx_tensor_release(&b[k]);
  }
  for (size_t i = 0; i < ref->n_inputs; i++) mx_tensor_release(&ins[i]);
  mx_graph_destroy(ref);
  return g;
}
