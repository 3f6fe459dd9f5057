/* The partition API at its edges: argument and graph errors with clear messages, graphs
 * without compute nodes, multi-output nodes, host placement and unknown-dim reasons and their
 * explanations, detaching the root, the PartitionedCall op (compile-time and run-time
 * inference), and what the dumps contain. */
#include "graph/passes/passes.h"
#include "test_helpers.h"

Test(api, null_and_defaults) {
  mx_partition_destroy(NULL);
  cr_assert_eq(mx_partition_cluster_count(NULL), 0);
  cr_assert_null(mx_partition_root(NULL));
  cr_assert_str_eq(mx_partition_last_error(NULL), "");
  mx_partition_options o;
  mx_partition_options_init(&o);
  cr_assert_eq(o.static_min_ops, 4);
  cr_assert_not(o.stable);
  cr_assert_eq(o.n_force_unknown, 0);
  mx_error err = {0};
  mx_partition *p = (mx_partition *)1;
  cr_assert_eq(mx_partition_create(NULL, NULL, &p, &err), MX_ERR_INVALID_ARGUMENT);
  cr_assert_null(p);
  cr_assert(strstr(err.message, "graph"), "%s", err.message);
  cr_assert_str_eq(mx_cluster_type_name(MX_CLUSTER_UNKNOWN), "UNKNOWN");
  cr_assert_str_eq(mx_partition_reason_name(MX_PART_ABSORBED), "absorbed");
}

Test(api, errors_name_what_is_wrong) {
  mx_graph *g = pt_graph("errors");
  mx_value_id x = pt_input(g, "x", MX_FLOAT32, 1, (mx_dim[]){4});
  mx_value_id a = pt_op1(g, "Relu", "first", x);
  cr_assert_eq(mx_graph_add_output(g, a), MX_OK);
  mx_partition *p = NULL;
  mx_error err = {0};
  /* Not inferred yet. */
  cr_assert_eq(mx_partition_create(g, NULL, &p, &err), MX_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(err.message, "not inferred") && strstr(err.message, "'first'"), "%s", err.message);
  pt_infer(g);
  mx_partition_options o;
  mx_partition_options_init(&o);
  o.static_min_ops = -2;
  cr_assert_eq(mx_partition_create(g, &o, &p, &err), MX_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(err.message, "static_min_ops"), "%s", err.message);
  const char *bad[] = {"zzz"};
  mx_partition_options_init(&o);
  o.force_unknown = bad;
  o.n_force_unknown = 1;
  cr_assert_eq(mx_partition_create(g, &o, &p, &err), MX_ERR_NOT_FOUND);
  cr_assert(strstr(err.message, "'zzz'"), "%s", err.message);
  cr_assert_null(p);
  /* A partitioned root holds subgraphs: partitioning it again is refused by name. */
  p = pt_partition(g, 4, false, NULL, 0);
  mx_graph *root = mx_partition_root(p);
  pt_infer(root);
  mx_partition *again = NULL;
  cr_assert_eq(mx_partition_create(root, NULL, &again, &err), MX_ERR_UNSUPPORTED);
  cr_assert(strstr(err.message, "'body'") && strstr(err.message, "subgraph"), "%s", err.message);
  mx_partition_destroy(p);
  mx_graph_destroy(g);
}

Test(api, graph_without_compute_nodes) {
  mx_graph *g = pt_graph("passthrough");
  mx_value_id x = pt_input(g, "x", MX_FLOAT32, 1, (mx_dim[]){4});
  mx_value_id c = pt_const(g, "c", 1, (int64_t[]){2}, 1.0f);
  cr_assert_eq(mx_graph_add_output(g, x), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, c), MX_OK);
  pt_infer(g);
  mx_partition *p = pt_partition(g, 4, false, NULL, 0);
  cr_assert_eq(mx_partition_cluster_count(p), 3, "DATA, INPUT, NETOUTPUT");
  mx_partition_cluster_info ci;
  mx_partition_cluster(p, 1, &ci);
  cr_assert_eq(ci.type, MX_CLUSTER_INPUT);
  cr_assert_eq(ci.n_outputs, 1);
  mx_partition_cluster(p, 2, &ci);
  cr_assert_eq(ci.type, MX_CLUSTER_NETOUTPUT);
  cr_assert_eq(ci.n_inputs, 2);
  pt_check_roundtrip(p, g, false);
  mx_graph *root = mx_partition_root(p);
  cr_assert_eq(mx_graph_node_count(root), 0);
  mx_partition_destroy(p);
  mx_graph_destroy(g);
}

/* Split (two outputs) feeding a known and an unknown consumer. */
Test(api, multi_output_node) {
  mx_graph *g = pt_graph("split");
  mx_value_id x = pt_input(g, "x", MX_FLOAT32, 2, (mx_dim[]){4, 6});
  mx_attr attrs[] = {mx_attr_int("axis", 1), mx_attr_int("num_outputs", 2)};
  const char *outs[] = {"left", "right"};
  mx_node_desc d = {.op_type = "Split",
                    .name = "split",
                    .inputs = &x,
                    .n_inputs = 1,
                    .attrs = attrs,
                    .n_attrs = 2,
                    .output_names = outs,
                    .n_outputs = 2};
  mx_value_id lr[2];
  cr_assert_eq(mx_graph_add_node(g, &d, lr), MX_OK, "%s", mx_graph_last_error(g));
  mx_value_id ka = pt_op1(g, "Relu", "ka", lr[0]);
  mx_value_id ub = pt_op1(g, "Neg", "ub", lr[1]);
  cr_assert_eq(mx_graph_add_output(g, ka), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, ub), MX_OK);
  pt_infer(g);
  const char *forced[] = {"ub"};
  mx_partition *p = pt_partition(g, 0, false, forced, 1);
  pt_expect(p, g, "K:split,ka|U:ub");
  uint32_t k = pt_cluster_of(p, g, "split");
  mx_partition_cluster_info ci;
  mx_partition_cluster(p, k, &ci);
  cr_assert_eq(ci.n_outputs, 2, "ka (graph output) and right (read by ub)");
  mx_partition_boundary b;
  cr_assert(mx_partition_cluster_output(p, k, 0, &b));
  cr_assert_eq(b.value, mx_graph_find_value(g, "right"));
  cr_assert_eq(b.peer, pt_cluster_of(p, g, "ub"));
  cr_assert(mx_partition_cluster_output(p, k, 1, &b));
  cr_assert_eq(b.value, ka);
  cr_assert_eq(b.peer, mx_partition_cluster_count(p) - 1, "NETOUTPUT");
  cr_assert_not(mx_partition_cluster_output(p, k, 2, &b));
  pt_check_roundtrip(p, g, false);
  mx_partition_destroy(p);
  mx_graph_destroy(g);
}

/* Shape arithmetic on a symbolic shape runs on the host. */
Test(api, host_placement_reason) {
  mx_graph *g = pt_graph("host");
  mx_dim batch = mx_sym_named(mx_graph_symtab(g), "batch");
  mx_value_id x = pt_input(g, "x", MX_FLOAT32, 2, (mx_dim[]){batch, 4});
  mx_value_id s = pt_op1(g, "Shape", "shape", x);
  int64_t zero = 0;
  mx_tensor zt = {.dtype = MX_INT64, .rank = 0, .data = &zero};
  mx_value_id idx;
  cr_assert_eq(mx_graph_add_constant(g, "zero", &zt, &idx), MX_OK);
  mx_value_id first = pt_op2(g, "Gather", "first_dim", s, idx);
  cr_assert_eq(mx_graph_add_output(g, first), MX_OK);
  pt_infer(g);
  mx_partition *p = pt_partition(g, 4, false, NULL, 0);
  cr_assert_eq(pt_reason(p, g, "shape"), MX_PART_SYMBOLIC_DIM);
  cr_assert_eq(pt_reason(p, g, "first_dim"), MX_PART_HOST_PLACEMENT);
  char line[256];
  mx_partition_reason_format(p, mx_graph_find_node(g, "first_dim"), line, sizeof line);
  cr_assert(strstr(line, "= [batch]"), "%s", line);
  char *why = pt_explain(p, "first_dim");
  cr_assert(strstr(why, "symbol 'batch' comes from graph input 'x' dim 0"), "%s", why);
  free(why);
  pt_check_roundtrip(p, g, false);
  mx_partition_destroy(p);
  mx_graph_destroy(g);
}

/* TopK with k fed at run time: its outputs' size is unknown, and the consumer's explanation
 * leads back to TopK. */
Test(api, runtime_k_is_traced) {
  mx_graph *g = pt_graph("topk");
  mx_value_id x = pt_input(g, "x", MX_FLOAT32, 2, (mx_dim[]){4, 8});
  mx_value_id k = pt_input(g, "k", MX_INT64, 1, (mx_dim[]){1});
  const char *outs[] = {"values", "indices"};
  mx_node_desc d = {.op_type = "TopK",
                    .name = "topk",
                    .inputs = (mx_value_id[]){x, k},
                    .n_inputs = 2,
                    .output_names = outs,
                    .n_outputs = 2};
  mx_value_id vi[2];
  cr_assert_eq(mx_graph_add_node(g, &d, vi), MX_OK, "%s", mx_graph_last_error(g));
  mx_value_id r = pt_op1(g, "Relu", "after", vi[0]);
  cr_assert_eq(mx_graph_add_output(g, r), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, vi[1]), MX_OK);
  pt_infer(g);
  mx_partition *p = pt_partition(g, 0, false, NULL, 0);
  pt_expect(p, g, "U:topk,after");
  mx_partition_reason_kind kind = pt_reason(p, g, "topk");
  cr_assert(kind == MX_PART_UNKNOWN_DIM || kind == MX_PART_SYMBOLIC_DIM || kind == MX_PART_VALUE_DEPENDENT,
            "topk: %s", mx_partition_reason_name(kind));
  char *why = pt_explain(p, "after");
  cr_assert(strstr(why, "'topk' (TopK)"), "%s", why);
  free(why);
  pt_check_roundtrip(p, g, true);
  mx_partition_destroy(p);
  mx_graph_destroy(g);
}

Test(api, detach_root_and_call_op) {
  mx_graph *g = pt_graph("detach");
  mx_value_id x = pt_input(g, "x", MX_FLOAT32, 2, (mx_dim[]){2, 3});
  mx_value_id a = pt_op1(g, "Relu", "a", x);
  mx_value_id b = pt_op1(g, "Neg", "b", a);
  cr_assert_eq(mx_graph_add_output(g, b), MX_OK);
  pt_infer(g);
  const char *forced[] = {"b"};
  mx_partition *p = pt_partition(g, 0, false, forced, 1);
  mx_graph *root = mx_partition_detach_root(p);
  cr_assert_not_null(root);
  cr_assert_null(mx_partition_root(p));
  mx_partition_cluster_info ci;
  mx_partition_cluster(p, 1, &ci);
  cr_assert_null(ci.body);
  cr_assert_eq(ci.call, MX_NO_NODE);
  /* The partition's records stay readable; the root lives on its own. */
  char *text = pt_dump(p, mx_partition_dump_text);
  cr_assert(strstr(text, "KNOWN"));
  free(text);
  mx_partition_destroy(p);
  cr_assert_eq(mx_graph_node_count(root), 2);
  const mx_node *call = &root->nodes[0];
  cr_assert(mx__part_is_call(call));
  cr_assert_str_eq(call->op_type, "PartitionedCall");
  cr_assert_str_eq(call->domain, "mixrt");
  cr_assert_not(mx__part_call_is_unknown(call));
  cr_assert(mx__part_call_is_unknown(&root->nodes[1]));
  cr_assert_not(mx__part_call_input_is_const(call, 0));
  cr_assert_eq(mx_graph_opset(root, "mixrt"), 1);
  /* Binding a symbol-free root re-infers through the bodies. */
  pt_infer(root);
  mx_shape s;
  cr_assert(mx_graph_value_shape(root, mx_graph_output(root, 0), &s));
  cr_assert_eq(s.rank, 2);
  cr_assert_eq(s.dims[1], 3);
  mx_graph_destroy(root);
  mx_graph_destroy(g);
}

/* The call's inference propagates a new binding of a symbol into its body. */
Test(api, call_inference_follows_bindings) {
  mx_graph *g = pt_graph("bind");
  mx_dim n = mx_sym_named(mx_graph_symtab(g), "n");
  mx_value_id x = pt_input(g, "x", MX_FLOAT32, 2, (mx_dim[]){n, 3});
  mx_value_id a = pt_op1(g, "Relu", "a", x);
  mx_value_id b = pt_op1(g, "Neg", "b", a);
  cr_assert_eq(mx_graph_add_output(g, b), MX_OK);
  pt_infer(g);
  mx_partition *p = pt_partition(g, 4, false, NULL, 0);
  mx_graph *root = mx_partition_root(p);
  cr_assert_eq(mx_graph_bind_symbol(root, "n", 5), MX_OK, "%s", mx_graph_last_error(root));
  mx_shape s;
  cr_assert(mx_graph_value_shape(root, mx_graph_output(root, 0), &s));
  cr_assert_eq(s.dims[0], 5);
  mx_partition_cluster_info ci;
  mx_partition_cluster(p, 1, &ci);
  cr_assert(mx_graph_value_shape(ci.body, mx_graph_find_value(ci.body, "a"), &s));
  cr_assert_eq(s.dims[0], 5, "the body sees the binding");
  mx_partition_destroy(p);
  mx_graph_destroy(g);
}

/* Run-time inference of a call (concrete input shapes, a scratch symbol table) infers the
 * body on local records: the output shape follows the input, a bad shape fails naming the body's
 * node, and the body itself keeps its compile-time shapes. */
Test(api, call_inference_at_run_time) {
  mx_graph *g = pt_graph("rt");
  mx_dim n = mx_sym_named(mx_graph_symtab(g), "n");
  mx_value_id x = pt_input(g, "x", MX_FLOAT32, 2, (mx_dim[]){n, 3});
  mx_value_id c = pt_const(g, "c", 1, (int64_t[]){3}, 1.0f);
  mx_value_id a = pt_op2(g, "Add", "a", x, c);
  mx_value_id s = pt_op1(g, "Shape", "s", a);
  mx_value_id b = pt_op2(g, "Reshape", "b", a, s);
  cr_assert_eq(mx_graph_add_output(g, b), MX_OK);
  pt_infer(g);
  mx_partition *p = pt_partition(g, -1, false, NULL, 0);
  mx_graph *root = mx_partition_root(p);
  mx_node_id call = MX_NO_NODE;
  for (size_t i = 0; i < root->n_nodes; i++)
    if (strcmp(root->nodes[i].op_type, "PartitionedCall") == 0) call = (mx_node_id)i;
  cr_assert_neq(call, MX_NO_NODE);
  const mx_node *nd = &root->nodes[call];
  cr_assert_eq(nd->n_outputs, 1);
  mx_symtab *scratch;
  cr_assert_eq(mx_symtab_create(&scratch), MX_OK);
  mx_value_info in[4], out[1];
  mx_dim out_sv[MX_SV_MAX];
  cr_assert_leq(nd->n_inputs, 4);
  for (int64_t rows = 1; rows <= 7; rows += 6) {
    for (uint32_t i = 0; i < nd->n_inputs; i++) {
      mx__value_info_of(root, nd->inputs[i], &in[i]);
      if (in[i].shape.rank == 2) in[i].shape.dims[0] = rows;
    }
    mx_error err = {0};
    cr_assert_eq(mx__node_infer(root, call, scratch, in, out, out_sv, true, &err), MX_OK, "%s", err.message);
    cr_assert_eq(out[0].dtype, MX_FLOAT32);
    cr_assert_eq(out[0].shape.rank, 2);
    cr_assert_eq(out[0].shape.dims[0], rows);
    cr_assert_eq(out[0].shape.dims[1], 3);
  }
  for (uint32_t i = 0; i < nd->n_inputs; i++) {
    mx__value_info_of(root, nd->inputs[i], &in[i]);
    if (in[i].shape.rank == 2) in[i].shape.dims[0] = 2, in[i].shape.dims[1] = 4;
  }
  mx_error err = {0};
  cr_assert_eq(mx__node_infer(root, call, scratch, in, out, out_sv, true, &err), MX_ERR_SHAPE);
  cr_assert(strstr(err.message, "node 'a'"), "%s", err.message);
  mx_partition_cluster_info ci;
  bool found = false;
  for (size_t id = 0; id < mx_partition_cluster_count(p) && !found; id++)
    found = mx_partition_cluster(p, id, &ci) && ci.type == MX_CLUSTER_UNKNOWN;
  cr_assert(found);
  mx_shape shape;
  cr_assert(mx_graph_value_shape(ci.body, mx_graph_find_value(ci.body, "a"), &shape));
  cr_assert_eq(shape.dims[0], n, "run-time inference leaves the body as it was");
  mx_symtab_destroy(scratch);
  mx_partition_destroy(p);
  mx_graph_destroy(g);
}

Test(api, dump_contents) {
  mx_graph *g = pt_graph("dumps");
  mx_value_id x = pt_input(g, "x \"quoted\"", MX_FLOAT32, 2, (mx_dim[]){2, 3});
  mx_value_id w = pt_const(g, "w", 1, (int64_t[]){3}, 1.0f);
  mx_value_id a = pt_op2(g, "Add", "a", x, w);
  mx_value_id b = pt_op1(g, "Neg", "b", a);
  mx_value_id c = pt_op2(g, "Add", "c", b, w);
  cr_assert_eq(mx_graph_add_output(g, c), MX_OK);
  pt_infer(g);
  const char *forced[] = {"b"};
  mx_partition *p = pt_partition(g, 0, false, forced, 1);
  char *text = pt_dump(p, mx_partition_dump_text);
  cr_assert(strstr(text, "cluster 2 KNOWN     ops 1 ranks 0..0 in [0, 1] out [3] | a"), "%s", text);
  cr_assert(strstr(text, "constants 1 (1 shared)"), "%s", text);
  free(text);
  char *json = pt_dump(p, mx_partition_dump_json);
  cr_assert(strstr(json, "\"name\": \"x \\\"quoted\\\"\""), "%s", json);
  cr_assert(strstr(json, "\"const\": true"), "%s", json);
  cr_assert(strstr(json, "\"reason\": \"forced\""), "%s", json);
  cr_assert(strstr(json, "\"boundary_values\": 5"), "%s", json);
  free(json);
  char *dot = pt_dump(p, mx_partition_dump_dot);
  cr_assert(strstr(dot, "subgraph cluster_3"), "%s", dot);
  cr_assert(strstr(dot, "label=\"x \\\"quoted\\\"\\n[2, 3]\""), "%s", dot);
  cr_assert(strstr(dot, "fillcolor=\"#c8e6c9\""), "%s", dot);
  free(dot);
  mx_partition_destroy(p);
  mx_graph_destroy(g);
}

/* A cluster with more outputs than the op registry's arity field holds: the partition and its
 * records are complete; the call is left unresolved. */
Test(api, call_with_many_outputs) {
  mx_graph *g = pt_graph("wide_outputs");
  mx_value_id x = pt_input(g, "x", MX_FLOAT32, 1, (mx_dim[]){4});
  for (int i = 0; i < 300; i++) {
    char name[16];
    snprintf(name, sizeof name, "r%d", i);
    cr_assert_eq(mx_graph_add_output(g, pt_op1(g, "Relu", name, x)), MX_OK);
  }
  pt_infer(g);
  mx_partition *p = pt_partition(g, 4, false, NULL, 0);
  mx_partition_cluster_info ci;
  cr_assert(mx_partition_cluster(p, 1, &ci));
  cr_assert_eq(ci.type, MX_CLUSTER_KNOWN);
  cr_assert_eq(ci.n_outputs, 300);
  mx_graph *root = mx_partition_root(p);
  cr_assert_eq(root->nodes[ci.call].n_outputs, 300);
  /* The call resolves whatever its size, and the whole root infers again. */
  cr_assert_not_null(root->nodes[ci.call].def);
  cr_assert_eq(mx_graph_infer(root), MX_OK, "%s", mx_graph_last_error(root));
  cr_assert_eq(mx_graph_infer(ci.body), MX_OK, "%s", mx_graph_last_error(ci.body));
  mx_partition_destroy(p);
  mx_graph_destroy(g);
}
