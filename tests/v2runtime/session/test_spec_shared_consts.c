/* A specialization's copy of a partition body shares the body's constants: a large constant of
 * the copy is the body's store (the same bytes, no copy), a small one points at the body's bytes,
 * and the copy is destroyed before the body without freeing them. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "graph/ir.h"
#include "mixrt/graph.h"
#include "v2runtime/spec.h"

TestSuite(spec_shared_consts);

/* A float32 constant of n elements (values i * 0.25). */
static mx_value_id add_floats(mx_graph *g, const char *name, int64_t n) {
  float *f = malloc((size_t)n * sizeof *f);
  cr_assert_not_null(f);
  for (int64_t i = 0; i < n; i++) f[i] = (float)i * 0.25f;
  mx_tensor t = {.dtype = MX_FLOAT32, .rank = 1, .dims = {n}, .data = f, .placement = MX_HOST};
  mx_value_id v;
  cr_assert_eq(mx_graph_add_constant(g, name, &t, &v), MX_OK, "%s", mx_graph_last_error(g));
  free(f);
  return v;
}

Test(spec_shared_consts, the_copy_reads_the_body_bytes) {
  mx_graph *body;
  cr_assert_eq(mx_graph_create("body", &body), MX_OK);
  cr_assert_eq(mx_graph_set_opset(body, "", 17), MX_OK);
  mx_dim n = mx_sym_named(mx_graph_symtab(body), "n");
  mx_shape xs = {.rank = 1, .dims = {n}};
  mx_value_id x;
  cr_assert_eq(mx_graph_add_input(body, "x", MX_FLOAT32, &xs, &x), MX_OK);
  mx_value_id big = add_floats(body, "big", 4096), small = add_floats(body, "small", 4);
  cr_assert_not_null(body->values[big].store);
  cr_assert_null(body->values[small].store);
  mx_value_id cat_out, sum_out;
  mx_attr axis = {.name = "axis", .type = MX_ATTR_INT, .i = 0};
  mx_node_desc cat = {.op_type = "Concat",
                      .inputs = (mx_value_id[]){x, big, small},
                      .n_inputs = 3,
                      .attrs = &axis,
                      .n_attrs = 1,
                      .n_outputs = 1};
  cr_assert_eq(mx_graph_add_node(body, &cat, &cat_out), MX_OK, "%s", mx_graph_last_error(body));
  mx_node_desc relu = {.op_type = "Relu", .inputs = &cat_out, .n_inputs = 1, .n_outputs = 1};
  cr_assert_eq(mx_graph_add_node(body, &relu, &sum_out), MX_OK, "%s", mx_graph_last_error(body));
  cr_assert_eq(mx_graph_add_output(body, sum_out), MX_OK);
  cr_assert_eq(mx_graph_infer(body), MX_OK, "%s", mx_graph_last_error(body));

  const mx_node_id *order;
  size_t n_order;
  cr_assert_eq(mx__graph_topo_order(body, &order, &n_order), MX_OK);
  int64_t values[1] = {3};
  cr_assert_eq(mx_sym_symbol_index(body->syms, n), 0);
  uint64_t copied_before = mx__graph_tensor_bytes_copied();
  mx_graph *copy = NULL;
  mx_error err;
  cr_assert_eq(mx__spec_copy_nodes(body, order, n_order, body->inputs, body->n_inputs, body->outputs,
                                   body->n_outputs, body->syms, values, 1, false, NULL, &copy, &err),
               MX_OK, "%s", err.message);
  cr_expect_eq(mx__graph_tensor_bytes_copied(), copied_before, "no constant bytes were copied");
  mx_value_id cbig = MX_NO_VALUE, csmall = MX_NO_VALUE;
  for (size_t v = 0; v < copy->n_values; v++) {
    if (!copy->values[v].name) continue;
    if (!strcmp(copy->values[v].name, "big")) cbig = (mx_value_id)v;
    if (!strcmp(copy->values[v].name, "small")) csmall = (mx_value_id)v;
  }
  cr_assert_neq(cbig, MX_NO_VALUE);
  cr_assert_neq(csmall, MX_NO_VALUE);
  cr_expect_eq(copy->values[cbig].store, body->values[big].store, "the large constant shares the store");
  cr_expect_eq(copy->values[cbig].data->data, body->values[big].data->data);
  cr_expect_eq(copy->values[csmall].data->data, body->values[small].data->data);
  cr_expect_eq(copy->values[cbig].data->dims[0], 4096);
  mx_graph_destroy(copy);
  /* The body's bytes survive the copy. */
  const float *f = body->values[big].data->data;
  cr_expect_eq(f[4095], 4095 * 0.25f);
  mx_graph_destroy(body);
}
