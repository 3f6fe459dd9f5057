/* IR construction, validation errors, topological order and the fold/dead-node passes. */
#include <criterion/criterion.h>
#include <string.h>

#include "graph/ir.h"
#include "graph/passes/passes.h"
#include "mixrt/graph.h"

static mx_graph *new_graph(void) {
  mx_graph *g = NULL;
  cr_assert_eq(mx_graph_create("t", &g), MX_OK);
  return g;
}

static mx_value_id input(mx_graph *g, const char *name, int32_t rank, const mx_dim *dims) {
  mx_shape s = {.rank = rank};
  for (int32_t i = 0; i < rank; i++) s.dims[i] = dims[i];
  mx_value_id v;
  cr_assert_eq(mx_graph_add_input(g, name, MX_FLOAT32, &s, &v), MX_OK, "%s", mx_graph_last_error(g));
  return v;
}

Test(graph, build_and_read) {
  mx_graph *g = new_graph();
  mx_dim batch = mx_sym_named(mx_graph_symtab(g), "batch");
  mx_value_id x = input(g, "x", 2, (mx_dim[]){batch, 4});
  float one = 1.0f;
  mx_tensor c = {.dtype = MX_FLOAT32, .rank = 0, .data = &one};
  mx_value_id k, y;
  cr_assert_eq(mx_graph_add_constant(g, "one", &c, &k), MX_OK);
  cr_assert_eq(mx_graph_add_op(g, "Add", (mx_value_id[]){x, k}, 2, NULL, 0, &y), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, y), MX_OK);
  cr_assert_eq(mx_graph_input_count(g), 1);
  cr_assert_eq(mx_graph_output_count(g), 1);
  cr_assert_eq(mx_graph_node_count(g), 1);
  cr_assert_eq(mx_graph_find_value(g, "x"), x);
  cr_assert_eq(mx_graph_find_value(g, "nope"), MX_NO_VALUE);
  cr_assert_str_eq(mx_graph_value_name(g, x), "x");
  cr_assert_not_null(mx_graph_value_constant(g, k));
  cr_assert_null(mx_graph_value_constant(g, x));
  cr_assert_eq(mx_graph_infer(g), MX_OK, "%s", mx_graph_last_error(g));
  mx_shape s;
  cr_assert(mx_graph_value_shape(g, y, &s));
  cr_assert_eq(s.rank, 2);
  cr_assert_eq(s.dims[0], batch);
  cr_assert_eq(s.dims[1], 4);
  cr_assert_eq(mx_graph_value_dtype(g, y), MX_FLOAT32);
  mx_graph_destroy(g);
}

Test(graph, destroy_null_is_noop) { mx_graph_destroy(NULL); }

Test(graph, duplicate_names_rejected) {
  mx_graph *g = new_graph();
  input(g, "x", 1, (mx_dim[]){3});
  mx_value_id v;
  cr_assert_eq(mx_graph_add_input(g, "x", MX_FLOAT32, NULL, &v), MX_ERR_INVALID_GRAPH);
  cr_assert(strstr(mx_graph_last_error(g), "'x'"), "%s", mx_graph_last_error(g));
  mx_value_id x = mx_graph_find_value(g, "x");
  mx_node_desc d = {.op_type = "Relu", .name = "r", .inputs = &x, .n_inputs = 1, .n_outputs = 1};
  cr_assert_eq(mx_graph_add_node(g, &d, &v), MX_OK);
  cr_assert_eq(mx_graph_add_node(g, &d, &v), MX_ERR_INVALID_GRAPH);
  cr_assert(strstr(mx_graph_last_error(g), "duplicate node name 'r'"), "%s", mx_graph_last_error(g));
  const char *outs[] = {"x"};
  mx_node_desc d2 = {.op_type = "Relu", .inputs = &x, .n_inputs = 1, .output_names = outs, .n_outputs = 1};
  cr_assert_eq(mx_graph_add_node(g, &d2, &v), MX_ERR_INVALID_GRAPH);
  cr_assert_eq(mx_graph_node_count(g), 1);
  mx_graph_destroy(g);
}

Test(graph, bad_arguments_rejected) {
  mx_graph *g = new_graph();
  mx_value_id v;
  cr_assert_eq(mx_graph_add_input(g, "", MX_FLOAT32, NULL, &v), MX_ERR_INVALID_ARGUMENT);
  cr_assert_eq(mx_graph_add_input(g, "x", (mx_dtype)99, NULL, &v), MX_ERR_UNSUPPORTED);
  cr_assert_eq(mx_graph_add_op(g, "Relu", (mx_value_id[]){1234}, 1, NULL, 0, &v), MX_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(mx_graph_last_error(g), "input 0"), "%s", mx_graph_last_error(g));
  cr_assert_eq(mx_graph_add_output(g, 77), MX_ERR_INVALID_ARGUMENT);
  cr_assert_eq(mx_graph_add_constant(g, "c", NULL, &v), MX_ERR_INVALID_ARGUMENT);
  mx_tensor huge = {.dtype = MX_FLOAT32, .rank = 3, .dims = {1ll << 40, 1ll << 40, 1ll << 40}};
  cr_assert_eq(mx_graph_add_constant(g, "huge", &huge, &v), MX_ERR_LIMIT);
  mx_graph_destroy(g);
}

Test(graph, attributes_are_copied) {
  mx_graph *g = new_graph();
  mx_value_id x = input(g, "x", 2, (mx_dim[]){2, 3});
  int64_t perm[] = {1, 0};
  mx_attr a = mx_attr_ints("perm", perm, 2);
  mx_value_id y;
  cr_assert_eq(mx_graph_add_op(g, "Transpose", &x, 1, &a, 1, &y), MX_OK);
  perm[0] = 7; /* the graph must hold its own copy */
  const mx_node *n = &g->nodes[g->values[y].producer];
  const mx_attr *got = mx__node_attr(n, "perm");
  cr_assert_not_null(got);
  cr_assert_eq(got->count, 2);
  cr_assert_eq(got->ints[0], 1);
  mx_attr dup[] = {mx_attr_int("axis", 0), mx_attr_int("axis", 1)};
  cr_assert_eq(mx_graph_add_op(g, "Softmax", &x, 1, dup, 2, &y), MX_ERR_INVALID_GRAPH);
  mx_graph_destroy(g);
}

Test(graph, stable_topological_order) {
  mx_graph *g = new_graph();
  mx_value_id x = input(g, "x", 1, (mx_dim[]){4});
  mx_value_id a, b, c;
  cr_assert_eq(mx_graph_add_op(g, "Relu", &x, 1, NULL, 0, &a), MX_OK);
  cr_assert_eq(mx_graph_add_op(g, "Neg", &x, 1, NULL, 0, &b), MX_OK);
  cr_assert_eq(mx_graph_add_op(g, "Add", (mx_value_id[]){a, b}, 2, NULL, 0, &c), MX_OK);
  const mx_node_id *order;
  size_t n;
  cr_assert_eq(mx__graph_topo_order(g, &order, &n), MX_OK);
  cr_assert_eq(n, 3);
  for (size_t i = 0; i < n; i++) cr_assert_eq(order[i], i);
  mx_graph_destroy(g);
}

Test(graph, cycle_is_reported) {
  mx_graph *g = new_graph();
  mx_value_id x = input(g, "x", 1, (mx_dim[]){4});
  mx_value_id a, b;
  cr_assert_eq(mx_graph_add_op(g, "Relu", &x, 1, NULL, 0, &a), MX_OK);
  cr_assert_eq(mx_graph_add_op(g, "Neg", &a, 1, NULL, 0, &b), MX_OK);
  /* Rewire Relu to read Neg's output: Relu -> Neg -> Relu. */
  mx_node *relu = &g->nodes[g->values[a].producer];
  mx__graph_remove_use(g, x, g->values[a].producer);
  relu->inputs[0] = b;
  cr_assert_eq(mx__graph_add_use(g, b, g->values[a].producer), MX_OK);
  mx__graph_invalidate(g);
  cr_assert_eq(mx_graph_validate(g), MX_ERR_INVALID_GRAPH);
  cr_assert(strstr(mx_graph_last_error(g), "cycle"), "%s", mx_graph_last_error(g));
  mx_graph_destroy(g);
}

Test(graph, unknown_op_named) {
  mx_graph *g = new_graph();
  mx_value_id x = input(g, "x", 1, (mx_dim[]){4}), y;
  mx_node_desc d = {.op_type = "FancyOp", .name = "fancy", .inputs = &x, .n_inputs = 1, .n_outputs = 1};
  cr_assert_eq(mx_graph_add_node(g, &d, &y), MX_OK);
  cr_assert_eq(mx_graph_validate(g), MX_ERR_UNSUPPORTED);
  cr_assert(strstr(mx_graph_last_error(g), "'fancy'") && strstr(mx_graph_last_error(g), "FancyOp"), "%s",
            mx_graph_last_error(g));
  mx_graph_destroy(g);
}

Test(graph, arity_and_attribute_errors_named) {
  mx_graph *g = new_graph();
  mx_value_id x = input(g, "x", 1, (mx_dim[]){4}), y;
  mx_node_desc d = {.op_type = "Add", .name = "lonely_add", .inputs = &x, .n_inputs = 1, .n_outputs = 1};
  cr_assert_eq(mx_graph_add_node(g, &d, &y), MX_OK);
  cr_assert_eq(mx_graph_validate(g), MX_ERR_INVALID_GRAPH);
  cr_assert(strstr(mx_graph_last_error(g), "lonely_add"), "%s", mx_graph_last_error(g));
  mx_graph_destroy(g);

  g = new_graph();
  x = input(g, "x", 1, (mx_dim[]){4});
  mx_attr bogus = mx_attr_int("bogus", 1);
  mx_node_desc d2 = {.op_type = "Relu",
                     .name = "r",
                     .inputs = &x,
                     .n_inputs = 1,
                     .attrs = &bogus,
                     .n_attrs = 1,
                     .n_outputs = 1};
  cr_assert_eq(mx_graph_add_node(g, &d2, &y), MX_OK);
  cr_assert_neq(mx_graph_validate(g), MX_OK);
  cr_assert(strstr(mx_graph_last_error(g), "bogus"), "%s", mx_graph_last_error(g));
  mx_graph_destroy(g);

  g = new_graph();
  x = input(g, "x", 2, (mx_dim[]){4, 4});
  mx_attr wrong = mx_attr_float("axis", 1.0f);
  mx_node_desc d3 = {.op_type = "Softmax",
                     .name = "sm",
                     .inputs = &x,
                     .n_inputs = 1,
                     .attrs = &wrong,
                     .n_attrs = 1,
                     .n_outputs = 1};
  cr_assert_eq(mx_graph_add_node(g, &d3, &y), MX_OK);
  cr_assert_eq(mx_graph_validate(g), MX_ERR_INVALID_GRAPH);
  cr_assert(strstr(mx_graph_last_error(g), "axis") && strstr(mx_graph_last_error(g), "'sm'"), "%s",
            mx_graph_last_error(g));
  mx_graph_destroy(g);
}

Test(graph, dangling_input_named) {
  mx_graph *g = new_graph();
  mx_value_id ghost, y;
  cr_assert_eq(mx__graph_new_value(g, "ghost", &ghost), MX_OK);
  mx_node_desc d = {.op_type = "Relu", .name = "r", .inputs = &ghost, .n_inputs = 1, .n_outputs = 1};
  cr_assert_eq(mx_graph_add_node(g, &d, &y), MX_OK);
  cr_assert_eq(mx_graph_validate(g), MX_ERR_INVALID_GRAPH);
  cr_assert(strstr(mx_graph_last_error(g), "ghost"), "%s", mx_graph_last_error(g));
  mx_graph_destroy(g);
}

Test(graph, dtype_mismatch_named) {
  mx_graph *g = new_graph();
  mx_value_id x = input(g, "x", 1, (mx_dim[]){4}), y, i;
  mx_shape s = {.rank = 1, .dims = {4}};
  cr_assert_eq(mx_graph_add_input(g, "i", MX_INT64, &s, &i), MX_OK);
  mx_node_desc d = {
      .op_type = "Add", .name = "mixed", .inputs = (mx_value_id[]){x, i}, .n_inputs = 2, .n_outputs = 1};
  cr_assert_eq(mx_graph_add_node(g, &d, &y), MX_OK);
  cr_assert_eq(mx_graph_infer(g), MX_ERR_DTYPE);
  cr_assert(strstr(mx_graph_last_error(g), "mixed"), "%s", mx_graph_last_error(g));
  mx_graph_destroy(g);
}

Test(graph, optimize_folds_shape_and_removes_dead_nodes) {
  mx_graph *g = new_graph();
  mx_value_id x = input(g, "x", 2, (mx_dim[]){2, 3});
  mx_value_id shp, dead, y;
  cr_assert_eq(mx_graph_add_op(g, "Shape", &x, 1, NULL, 0, &shp), MX_OK);
  cr_assert_eq(mx_graph_add_op(g, "Neg", &x, 1, NULL, 0, &dead), MX_OK);
  cr_assert_eq(mx_graph_add_op(g, "Reshape", (mx_value_id[]){x, shp}, 2, NULL, 0, &y), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, y), MX_OK);
  mx_optimize_report rep;
  cr_assert_eq(mx_graph_optimize(g, &rep), MX_OK, "%s", mx_graph_last_error(g));
  cr_assert_eq(rep.folded_nodes, 1);
  cr_assert_eq(rep.removed_nodes, 1);
  cr_assert_eq(mx_graph_node_count(g), 1);
  const mx_tensor *folded = mx_graph_value_constant(g, shp);
  cr_assert_not_null(folded);
  cr_assert_eq(((const int64_t *)folded->data)[0], 2);
  cr_assert_eq(((const int64_t *)folded->data)[1], 3);
  mx_graph_destroy(g);
}

Test(graph, bind_symbol_makes_shapes_concrete) {
  mx_graph *g = new_graph();
  mx_dim seq = mx_sym_named(mx_graph_symtab(g), "seq");
  mx_value_id x = input(g, "x", 2, (mx_dim[]){seq, 8}), y;
  cr_assert_eq(mx_graph_add_op(g, "Relu", &x, 1, NULL, 0, &y), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, y), MX_OK);
  cr_assert_eq(mx_graph_bind_symbol(g, "nope", 3), MX_ERR_NOT_FOUND);
  cr_assert_eq(mx_graph_bind_symbol(g, "seq", 5), MX_OK, "%s", mx_graph_last_error(g));
  mx_shape s;
  mx_graph_value_shape(g, y, &s);
  cr_assert_eq(s.dims[0], 5);
  mx_graph_destroy(g);
}
