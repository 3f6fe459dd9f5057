/* The graph-building helpers of control_support.h. */
#include <criterion/criterion.h>

#include "control_support.h"

mx_value_id ctl_constant(mx_graph *g, const char *name, mx_dtype dt, int32_t rank, const int64_t *dims,
                         const void *data) {
  mx_tensor t = {.dtype = dt, .rank = rank, .data = (void *)data};
  for (int32_t i = 0; i < rank; i++) t.dims[i] = dims[i];
  mx_value_id id;
  cr_assert_eq(mx_graph_add_constant(g, name, &t, &id), MX_OK, "%s", mx_graph_last_error(g));
  return id;
}

mx_value_id ctl_fconst(mx_graph *g, const char *name, float v) {
  return ctl_constant(g, name, MX_FLOAT32, 1, (const int64_t[]){1}, &v);
}

mx_value_id ctl_iconst(mx_graph *g, const char *name, int64_t v) {
  return ctl_constant(g, name, MX_INT64, 0, NULL, &v);
}

mx_value_id ctl_op(mx_graph *g, const char *type, const mx_value_id *ins, size_t n) {
  mx_value_id y;
  cr_assert_eq(mx_graph_add_op(g, type, ins, n, NULL, 0, &y), MX_OK, "%s", mx_graph_last_error(g));
  return y;
}

void ctl_node(mx_graph *g, const char *type, const char *name, const mx_value_id *ins, size_t n_in,
              const mx_attr *attrs, size_t n_attrs, mx_value_id *outs, size_t n_out) {
  mx_node_desc d = {.op_type = type,
                    .name = name,
                    .inputs = ins,
                    .n_inputs = n_in,
                    .attrs = attrs,
                    .n_attrs = n_attrs,
                    .n_outputs = n_out};
  cr_assert_eq(mx_graph_add_node(g, &d, outs), MX_OK, "%s", mx_graph_last_error(g));
}

mx_graph *ctl_sub(mx_graph *parent, const char *name) {
  mx_graph *s;
  cr_assert_eq(mx_graph_create_subgraph(parent, name, &s), MX_OK);
  return s;
}

mx_value_id ctl_outer(mx_graph *s, const char *name) {
  mx_value_id v;
  cr_assert_eq(mx_graph_add_outer(s, name, &v), MX_OK, "%s", mx_graph_last_error(s));
  return v;
}
