/* What ONNX import supports, on hand-built models: graph input shapes (dims, symbols, unknown
 * dims and ranks, GE encodings), initializers and the typed data fields, graph outputs naming
 * inputs or initializers, opsets, node order, generated and deduplicated names, omitted
 * optional inputs and outputs, Constant nodes, attributes of every kind and subgraphs that
 * use values of their enclosing graph. Also mx_tensor_parse_pb / mx_tensor_load_pb. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "graph/ir.h"
#include "graph/onnx/onnx_build.h"
#include "mixrt/onnx.h"

#define FLOAT ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT
#define INT64 ONNX__TENSOR_PROTO__DATA_TYPE__INT64
#define BOOL  ONNX__TENSOR_PROTO__DATA_TYPE__BOOL

/* Packs and loads m; asserts success. */
static mx_graph *load_ok(mxb *b, Onnx__ModelProto *m) {
  size_t size;
  uint8_t *bytes = mxb_pack(b, m, &size);
  mx_graph *g = NULL;
  mx_error err;
  mx_status st = mx_onnx_load_memory(bytes, size, NULL, &g, &err);
  cr_assert_eq(st, MX_OK, "%s: %s", mx_status_name(st), err.message);
  cr_assert_not_null(g);
  cr_assert_eq(err.status, MX_OK);
  return g;
}

static const mx_node *node_named(const mx_graph *g, const char *name) {
  mx_node_id n = mx_graph_find_node(g, name);
  cr_assert_neq(n, MX_NO_NODE, "no node '%s'", name);
  return mx__node(g, n);
}

static mx_value_id value_named(const mx_graph *g, const char *name) {
  mx_value_id v = mx_graph_find_value(g, name);
  cr_assert_neq(v, MX_NO_VALUE, "no value '%s'", name);
  return v;
}

Test(onnx_import, input_dims_symbols_and_unknowns) {
  mxb b = {0};
  Onnx__ModelProto *m = mxb_model(&b, 17);
  mxb_input(&b, m->graph, "a", FLOAT, "batch,seq,768");
  mxb_input(&b, m->graph, "b", FLOAT, "batch,?,-1");
  mxb_input(&b, m->graph, "c", INT64, "seq");
  mxb_input(&b, m->graph, "d", FLOAT, NULL); /* no shape: unknown rank */
  mxb_input(&b, m->graph, "e", FLOAT, "-2"); /* GE: unknown rank */
  mxb_input(&b, m->graph, "f", FLOAT, "");   /* a scalar */
  mxb_input(&b, m->graph, "g", 0, NULL);     /* no type at all */
  mxb_node(&b, m->graph, "Concat", "cat", "a,b,c,d,e,f,g", "y");
  mxb_output(&b, m->graph, "y", FLOAT, NULL);
  mx_graph *g = load_ok(&b, m);
  cr_assert_eq(mx_graph_input_count(g), 7);
  mx_shape a, bb, c, d, e, f, gs;
  cr_assert(mx_graph_value_shape(g, value_named(g, "a"), &a));
  cr_assert(mx_graph_value_shape(g, value_named(g, "b"), &bb));
  cr_assert(mx_graph_value_shape(g, value_named(g, "c"), &c));
  cr_assert(mx_graph_value_shape(g, value_named(g, "d"), &d));
  cr_assert(mx_graph_value_shape(g, value_named(g, "e"), &e));
  cr_assert(mx_graph_value_shape(g, value_named(g, "f"), &f));
  cr_assert(mx_graph_value_shape(g, value_named(g, "g"), &gs));
  mx_symtab *st = mx_graph_symtab(g);
  cr_assert_eq(a.rank, 3);
  cr_expect(mx_dim_is_expr(a.dims[0]));
  cr_expect_eq(a.dims[0], mx_sym_lookup(st, "batch"));
  cr_expect_eq(a.dims[1], mx_sym_lookup(st, "seq"));
  cr_expect_eq(a.dims[2], 768);
  cr_assert_eq(bb.rank, 3);
  cr_expect_eq(bb.dims[0], a.dims[0], "equal dim_param names give the same dim");
  cr_expect_eq(bb.dims[1], MX_DIM_UNKNOWN);
  cr_expect_eq(bb.dims[2], MX_DIM_UNKNOWN);
  cr_expect_eq(c.dims[0], a.dims[1]);
  cr_expect_neq(a.dims[0], a.dims[1], "different names give different dims");
  cr_expect_eq(d.rank, MX_RANK_UNKNOWN);
  cr_expect_eq(e.rank, MX_RANK_UNKNOWN);
  cr_expect_eq(f.rank, 0);
  cr_expect_eq(gs.rank, MX_RANK_UNKNOWN);
  cr_expect_eq(mx_graph_value_dtype(g, value_named(g, "c")), MX_INT64);
  cr_expect_eq(mx_graph_value_dtype(g, value_named(g, "g")), MX_DTYPE_UNDEFINED);
  mx_graph_destroy(g);
  mxb_free(&b);
}

Test(onnx_import, opsets_and_ir_version) {
  mxb b = {0};
  Onnx__ModelProto *m = mxb_model(&b, 13);
  mxb_opset(&b, m, "com.microsoft", 1);
  m->ir_version = 7;
  mxb_input(&b, m->graph, "x", FLOAT, "2");
  mxb_node(&b, m->graph, "Relu", "r", "x", "y");
  Onnx__NodeProto *n = mxb_node(&b, m->graph, "FusedThing", "f", "y", "z");
  n->domain = mxb_str(&b, "com.microsoft");
  mxb_output(&b, m->graph, "z", FLOAT, NULL);
  mx_graph *g = load_ok(&b, m);
  cr_expect_eq(g->ir_version, 7);
  cr_expect_eq(mx_graph_opset(g, ""), 13);
  cr_expect_eq(mx_graph_opset(g, "ai.onnx"), 13);
  cr_expect_eq(mx_graph_opset(g, "com.microsoft"), 1);
  const mx_node *fn = node_named(g, "f");
  cr_expect_str_eq(fn->op_type, "FusedThing");
  cr_expect_str_eq(fn->domain, "com.microsoft");
  cr_expect_eq(fn->opset, 1);
  cr_expect_eq(node_named(g, "r")->opset, 13);
  mx_graph_destroy(g);

  /* "ai.onnx" is the default domain; a model importing nothing gets opset 1. */
  Onnx__ModelProto *m2 = mxb_model(&b, 13);
  m2->n_opset_import = 0;
  mxb_opset(&b, m2, "ai.onnx", 11);
  g = load_ok(&b, m2);
  cr_expect_eq(mx_graph_opset(g, ""), 11);
  mx_graph_destroy(g);
  Onnx__ModelProto *m3 = mxb_model(&b, 13);
  m3->n_opset_import = 0;
  g = load_ok(&b, m3);
  cr_expect_eq(mx_graph_opset(g, ""), 1);
  mx_graph_destroy(g);
  mxb_free(&b);
}

Test(onnx_import, initializers_inputs_and_outputs) {
  mxb b = {0};
  Onnx__ModelProto *m = mxb_model(&b, 17);
  float w[3] = {1, 2, 3};
  mxb_input(&b, m->graph, "x", FLOAT, "3");
  mxb_input(&b, m->graph, "w", FLOAT, "3"); /* also an initializer: a constant (IR < 4 style) */
  mxb_initializer(&b, m->graph, mxb_tensor(&b, "w", FLOAT, "3", w, sizeof w));
  mxb_node(&b, m->graph, "Add", "add", "x,w", "y");
  mxb_output(&b, m->graph, "y", FLOAT, NULL);
  mxb_output(&b, m->graph, "x", FLOAT, NULL); /* a graph input directly */
  mxb_output(&b, m->graph, "w", FLOAT, NULL); /* an initializer directly */
  mx_graph *g = load_ok(&b, m);
  cr_assert_eq(mx_graph_input_count(g), 1);
  cr_expect_str_eq(mx_graph_value_name(g, mx_graph_input(g, 0)), "x");
  mx_value_id wv = value_named(g, "w");
  const mx_tensor *t = mx_graph_value_constant(g, wv);
  cr_assert_not_null(t);
  cr_expect_eq(t->rank, 1);
  cr_expect_eq(((const float *)t->data)[2], 3.0f);
  cr_assert_eq(mx_graph_output_count(g), 3);
  cr_expect_eq(mx_graph_output(g, 0), value_named(g, "y"));
  cr_expect_eq(mx_graph_output(g, 1), mx_graph_input(g, 0));
  cr_expect_eq(mx_graph_output(g, 2), wv);
  cr_expect(mx__val(g, mx_graph_input(g, 0))->flags & MX_VALUE_OUTPUT);
  mx_graph_destroy(g);
  mxb_free(&b);
}

Test(onnx_import, nodes_out_of_order_are_sorted) {
  mxb b = {0};
  Onnx__ModelProto *m = mxb_model(&b, 17);
  mxb_input(&b, m->graph, "x", FLOAT, "2");
  mxb_node(&b, m->graph, "Neg", "third", "b", "c");
  mxb_node(&b, m->graph, "Relu", "second", "a", "b");
  mxb_node(&b, m->graph, "Abs", "first", "x", "a");
  mxb_node(&b, m->graph, "Exp", "side", "x", "s");
  mxb_output(&b, m->graph, "c", FLOAT, NULL);
  mxb_output(&b, m->graph, "s", FLOAT, NULL);
  mx_graph *g = load_ok(&b, m);
  const mx_node_id *order;
  size_t n;
  cr_assert_eq(mx__graph_topo_order(g, &order, &n), MX_OK);
  cr_assert_eq(n, 4);
  /* Ready nodes keep file order: "first" (file #2) before "side" (file #3). */
  cr_expect_str_eq(mx__node(g, order[0])->name, "first");
  cr_expect_str_eq(mx__node(g, order[1])->name, "second");
  cr_expect_str_eq(mx__node(g, order[2])->name, "third");
  cr_expect_str_eq(mx__node(g, order[3])->name, "side");
  mx_graph_destroy(g);
  mxb_free(&b);
}

Test(onnx_import, generated_and_deduplicated_names) {
  mxb b = {0};
  Onnx__ModelProto *m = mxb_model(&b, 17);
  mxb_input(&b, m->graph, "x", FLOAT, "2");
  mxb_node(&b, m->graph, "Relu", "", "x", "a"); /* no name */
  mxb_node(&b, m->graph, "Relu", "", "a", "b"); /* no name either */
  mxb_node(&b, m->graph, "Neg", "dup", "b", "c");
  mxb_node(&b, m->graph, "Neg", "dup", "c", "d");  /* same name again */
  mxb_node(&b, m->graph, "Abs", "Relu", "d", "e"); /* an explicit name a generated one must avoid */
  mxb_output(&b, m->graph, "e", FLOAT, NULL);
  mx_graph *g = load_ok(&b, m);
  cr_assert_eq(mx_graph_node_count(g), 5);
  const mx_node *abs_node = node_named(g, "Relu");
  cr_expect_str_eq(abs_node->op_type, "Abs", "the file's name wins over generated ones");
  cr_expect_str_eq(node_named(g, "dup")->op_type, "Neg");
  cr_expect_eq(node_named(g, "dup")->outputs[0], value_named(g, "c"), "first 'dup' keeps the name");
  /* Every node has a distinct name. */
  for (size_t i = 0; i < g->n_nodes; i++)
    for (size_t k = i + 1; k < g->n_nodes; k++) cr_expect_str_neq(g->nodes[i].name, g->nodes[k].name);
  mx_graph_destroy(g);
  mxb_free(&b);
}

Test(onnx_import, omitted_optional_inputs_and_outputs) {
  mxb b = {0};
  Onnx__ModelProto *m = mxb_model(&b, 17);
  mxb_input(&b, m->graph, "x", FLOAT, "2,3");
  mxb_input(&b, m->graph, "s", FLOAT, "3");
  /* LayerNormalization(x, s, <no bias>) -> (y, <no mean>, inv_std) */
  mxb_node(&b, m->graph, "LayerNormalization", "ln", "x,s,", "y,,inv_std");
  /* The generated name of the omitted output must not capture this later explicit name. */
  mxb_node(&b, m->graph, "Identity", "id", "y", "ln:1");
  mxb_output(&b, m->graph, "y", FLOAT, NULL);
  mxb_output(&b, m->graph, "ln:1", FLOAT, NULL);
  mx_graph *g = load_ok(&b, m);
  const mx_node *ln = node_named(g, "ln");
  cr_assert_eq(ln->n_inputs, 3);
  cr_expect_eq(ln->inputs[2], MX_NO_VALUE);
  cr_assert_eq(ln->n_outputs, 3);
  cr_expect_str_eq(mx_graph_value_name(g, ln->outputs[0]), "y");
  cr_expect_str_eq(mx_graph_value_name(g, ln->outputs[2]), "inv_std");
  const char *gen = mx_graph_value_name(g, ln->outputs[1]);
  cr_assert_not_null(gen);
  cr_expect_str_neq(gen, "ln:1");
  cr_expect_eq(node_named(g, "id")->outputs[0], value_named(g, "ln:1"));
  mx_graph_destroy(g);
  mxb_free(&b);
}

Test(onnx_import, constant_nodes_become_constants) {
  mxb b = {0};
  Onnx__ModelProto *m = mxb_model(&b, 17);
  int64_t shape[2] = {3, 1};
  Onnx__NodeProto *n = mxb_node(&b, m->graph, "Constant", "c_tensor", NULL, "ct");
  mxb_attr_tensor(&b, n, "value", mxb_tensor(&b, "ignored", INT64, "2", shape, sizeof shape));
  n = mxb_node(&b, m->graph, "Constant", "c_float", NULL, "cf");
  mxb_attr_float(&b, n, "value_float", 2.5f);
  n = mxb_node(&b, m->graph, "Constant", "c_floats", NULL, "cfs");
  mxb_attr_floats(&b, n, "value_floats", (float[]){1, 2, 3, 4}, 4);
  n = mxb_node(&b, m->graph, "Constant", "c_int", NULL, "ci");
  mxb_attr_int(&b, n, "value_int", -7);
  n = mxb_node(&b, m->graph, "Constant", "c_ints", NULL, "cis");
  mxb_attr_ints(&b, n, "value_ints", (int64_t[]){5, 6}, 2);
  n = mxb_node(&b, m->graph, "Constant", "c_empty", NULL, "cempty");
  mxb_attr_ints(&b, n, "value_ints", NULL, 0);
  mxb_node(&b, m->graph, "Reshape", "r", "cfs,ct", "y");
  mxb_output(&b, m->graph, "y", FLOAT, NULL);
  mxb_output(&b, m->graph, "cf", FLOAT, NULL);
  mx_graph *g = load_ok(&b, m);
  cr_expect_eq(mx_graph_node_count(g), 1, "only the Reshape stays a node");
  const mx_tensor *t = mx_graph_value_constant(g, value_named(g, "ct"));
  cr_assert_not_null(t);
  cr_expect_eq(t->dtype, MX_INT64);
  cr_expect_eq(t->rank, 1);
  cr_expect_eq(((const int64_t *)t->data)[0], 3);
  t = mx_graph_value_constant(g, value_named(g, "cf"));
  cr_assert_not_null(t);
  cr_expect_eq(t->dtype, MX_FLOAT32);
  cr_expect_eq(t->rank, 0);
  cr_expect_eq(*(const float *)t->data, 2.5f);
  t = mx_graph_value_constant(g, value_named(g, "cfs"));
  cr_expect_eq(t->rank, 1);
  cr_expect_eq(t->dims[0], 4);
  cr_expect_eq(((const float *)t->data)[3], 4.0f);
  t = mx_graph_value_constant(g, value_named(g, "ci"));
  cr_expect_eq(t->dtype, MX_INT64);
  cr_expect_eq(*(const int64_t *)t->data, -7);
  t = mx_graph_value_constant(g, value_named(g, "cis"));
  cr_expect_eq(t->dims[0], 2);
  cr_expect_eq(((const int64_t *)t->data)[1], 6);
  t = mx_graph_value_constant(g, value_named(g, "cempty"));
  cr_expect_eq(t->rank, 1);
  cr_expect_eq(t->dims[0], 0);
  cr_expect_eq(mx_graph_output(g, 1), value_named(g, "cf"));
  mx_graph_destroy(g);
  mxb_free(&b);
}

Test(onnx_import, attributes_of_every_kind) {
  mxb b = {0};
  Onnx__ModelProto *m = mxb_model(&b, 17);
  mxb_input(&b, m->graph, "x", FLOAT, "2");
  Onnx__NodeProto *n = mxb_node(&b, m->graph, "Custom", "all", "x", "y");
  mxb_attr_int(&b, n, "i", 42);
  mxb_attr_float(&b, n, "f", 0.5f);
  mxb_attr_string(&b, n, "s", "hello");
  mxb_attr_ints(&b, n, "is", (int64_t[]){1, -2, 3}, 3);
  mxb_attr_floats(&b, n, "fs", (float[]){0.25f, 4}, 2);
  mxb_attr_strings(&b, n, "ss", (const char *const[]){"a", "", "ccc"}, 3);
  int32_t tv[2] = {7, 8};
  mxb_attr_tensor(&b, n, "t", mxb_tensor(&b, "tt", ONNX__TENSOR_PROTO__DATA_TYPE__INT32, "2", tv, sizeof tv));
  mxb_attr_ints(&b, n, "empty", NULL, 0);
  /* An IR version 1 style attribute without a type. */
  Onnx__AttributeProto *old = mxb_attr(&b, n, "untyped", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED);
  old->has_type = 0;
  old->has_i = 1;
  old->i = 9;
  mxb_output(&b, m->graph, "y", FLOAT, NULL);
  mx_graph *g = load_ok(&b, m);
  const mx_node *nd = node_named(g, "all");
  cr_assert_eq(nd->n_attrs, 9);
  const mx_attr *a = mx__node_attr(nd, "i");
  cr_assert(a && a->type == MX_ATTR_INT && a->i == 42);
  a = mx__node_attr(nd, "f");
  cr_assert(a && a->type == MX_ATTR_FLOAT && a->f == 0.5f);
  a = mx__node_attr(nd, "s");
  cr_assert(a && a->type == MX_ATTR_STRING);
  cr_expect_str_eq(a->s, "hello");
  a = mx__node_attr(nd, "is");
  cr_assert(a && a->type == MX_ATTR_INTS && a->count == 3 && a->ints[1] == -2);
  a = mx__node_attr(nd, "fs");
  cr_assert(a && a->type == MX_ATTR_FLOATS && a->count == 2 && a->floats[1] == 4.0f);
  a = mx__node_attr(nd, "ss");
  cr_assert(a && a->type == MX_ATTR_STRINGS && a->count == 3);
  cr_expect_str_eq(a->strings[1], "");
  cr_expect_str_eq(a->strings[2], "ccc");
  a = mx__node_attr(nd, "t");
  cr_assert(a && a->type == MX_ATTR_TENSOR && a->tensor);
  cr_expect_eq(a->tensor->dtype, MX_INT32);
  cr_expect_eq(((const int32_t *)a->tensor->data)[1], 8);
  a = mx__node_attr(nd, "empty");
  cr_assert(a && a->type == MX_ATTR_INTS && a->count == 0);
  a = mx__node_attr(nd, "untyped");
  cr_assert(a && a->type == MX_ATTR_INT && a->i == 9);
  mx_graph_destroy(g);
  mxb_free(&b);
}

/* If(cond) with branches that read outer values; the value `late` they read is produced by a
 * node listed after the If, so ordering must account for the subgraphs' outer names. */
Test(onnx_import, subgraphs_with_outer_values) {
  mxb b = {0};
  Onnx__ModelProto *m = mxb_model(&b, 17);
  mxb_input(&b, m->graph, "cond", BOOL, "");
  mxb_input(&b, m->graph, "x", FLOAT, "batch");
  Onnx__GraphProto *then_g = mxb_graph(&b, "then_body");
  mxb_node(&b, then_g, "Add", "t_add", "x,late", "t_out");
  mxb_output(&b, then_g, "t_out", FLOAT, NULL);
  Onnx__GraphProto *else_g = mxb_graph(&b, "");
  /* Nested: a Loop-free inner If in the else branch, reading x from two levels up. */
  Onnx__GraphProto *inner = mxb_graph(&b, "inner");
  mxb_node(&b, inner, "Neg", "i_neg", "x", "i_out");
  mxb_output(&b, inner, "i_out", FLOAT, NULL);
  Onnx__NodeProto *inner_if = mxb_node(&b, else_g, "If", "e_if", "cond", "e_out");
  mxb_attr_graph(&b, inner_if, "then_branch", inner);
  mxb_attr_graph(&b, inner_if, "else_branch", inner);
  mxb_output(&b, else_g, "e_out", FLOAT, NULL);
  Onnx__NodeProto *n = mxb_node(&b, m->graph, "If", "branch", "cond", "y");
  mxb_attr_graph(&b, n, "then_branch", then_g);
  mxb_attr_graph(&b, n, "else_branch", else_g);
  mxb_node(&b, m->graph, "Relu", "late_node", "x", "late");
  mxb_output(&b, m->graph, "y", FLOAT, NULL);
  mx_graph *g = load_ok(&b, m);
  const mx_node *br = node_named(g, "branch");
  cr_assert_eq(g->n_subgraphs, 2, "each subgraph registered once, not %zu times", g->n_subgraphs);
  const mx_attr *ta = mx__node_attr(br, "then_branch");
  const mx_attr *ea = mx__node_attr(br, "else_branch");
  cr_assert(ta && ta->type == MX_ATTR_GRAPH && ta->graph);
  cr_assert(ea && ea->type == MX_ATTR_GRAPH && ea->graph);
  mx_graph *tg = ta->graph, *eg = ea->graph;
  cr_expect_eq(tg->parent, g);
  cr_expect_str_eq(mx_graph_name(tg), "then_body");
  cr_expect_str_eq(mx_graph_name(eg), "branch/else_branch");
  cr_expect_eq(mx_graph_symtab(tg), mx_graph_symtab(g), "subgraphs share the symbol table");
  cr_expect_eq(mx_graph_opset(tg, ""), 17);
  mx_value_id ox = value_named(tg, "x"), ol = value_named(tg, "late");
  cr_expect(mx__val(tg, ox)->flags & MX_VALUE_OUTER);
  cr_expect(mx__val(tg, ol)->flags & MX_VALUE_OUTER);
  cr_expect_eq(mx__val(tg, ox)->dtype, MX_FLOAT32, "outer values carry what the outer graph knows");
  cr_expect_eq(mx_graph_output_count(tg), 1);
  cr_expect_eq(mx_graph_input_count(tg), 0);
  /* The Relu producing `late` comes before the If. */
  const mx_node_id *order;
  size_t cnt;
  cr_assert_eq(mx__graph_topo_order(g, &order, &cnt), MX_OK);
  cr_assert_eq(cnt, 2);
  cr_expect_str_eq(mx__node(g, order[0])->name, "late_node");
  /* Two levels down: the inner If's branches reference x as an outer value. */
  cr_assert_eq(eg->n_subgraphs, 2);
  mx_graph *ig = eg->subgraphs[0];
  cr_expect(mx__val(ig, value_named(ig, "x"))->flags & MX_VALUE_OUTER);
  cr_expect(mx__val(eg, value_named(eg, "cond"))->flags & MX_VALUE_OUTER);
  mx_graph_destroy(g);
  mxb_free(&b);
}

Test(onnx_import, subgraph_inputs_without_types_and_outputs_naming_outer_values) {
  mxb b = {0};
  Onnx__ModelProto *m = mxb_model(&b, 17);
  mxb_input(&b, m->graph, "n", INT64, "");
  mxb_input(&b, m->graph, "v0", FLOAT, "4");
  Onnx__GraphProto *body = mxb_graph(&b, "body");
  mxb_input(&b, body, "iter", 0, NULL);
  mxb_input(&b, body, "cond_in", BOOL, "");
  mxb_input(&b, body, "v", 0, NULL);
  mxb_node(&b, body, "Identity", "keep", "cond_in", "cond_out");
  mxb_node(&b, body, "Add", "acc", "v,v0", "v_out");
  mxb_output(&b, body, "cond_out", BOOL, "");
  mxb_output(&b, body, "v_out", FLOAT, NULL);
  mxb_output(&b, body, "v0", FLOAT, NULL); /* a scan output that is an outer value */
  Onnx__NodeProto *loop = mxb_node(&b, m->graph, "Loop", "loop", "n,,v0", "v_final,scan");
  mxb_attr_graph(&b, loop, "body", body);
  mxb_output(&b, m->graph, "v_final", FLOAT, NULL);
  mx_graph *g = load_ok(&b, m);
  const mx_node *ln = node_named(g, "loop");
  cr_expect_eq(ln->inputs[1], MX_NO_VALUE);
  mx_graph *bg = mx__node_attr(ln, "body")->graph;
  cr_assert_eq(mx_graph_input_count(bg), 3);
  cr_expect_eq(mx_graph_value_dtype(bg, mx_graph_input(bg, 0)), MX_DTYPE_UNDEFINED);
  cr_expect_eq(mx_graph_value_dtype(bg, mx_graph_input(bg, 1)), MX_BOOL);
  cr_assert_eq(mx_graph_output_count(bg), 3);
  mx_value_id o2 = mx_graph_output(bg, 2);
  cr_expect_str_eq(mx_graph_value_name(bg, o2), "v0");
  cr_expect(mx__val(bg, o2)->flags & MX_VALUE_OUTER);
  mx_graph_destroy(g);
  mxb_free(&b);
}

/* --- tensors ---------------------------------------------------------------------------------- */

static mx_tensor parse_ok(mxb *b, Onnx__TensorProto *tp, const char *want_name) {
  size_t size;
  uint8_t *bytes = mxb_pack_tensor(b, tp, &size);
  mx_tensor t;
  char *name = NULL;
  mx_error err;
  mx_status st = mx_tensor_parse_pb(bytes, size, &t, &name, &err);
  cr_assert_eq(st, MX_OK, "%s", err.message);
  cr_expect_str_eq(name, want_name);
  cr_expect_null(t.name);
  cr_expect_eq(t.placement, MX_HOST);
  free(name);
  return t;
}

Test(onnx_import, typed_data_fields) {
  mxb b = {0};
  int32_t i32[4] = {-1, 300, 0, 2};
  struct {
    int elem;
    mx_dtype dtype;
  } narrow[] = {{ONNX__TENSOR_PROTO__DATA_TYPE__INT8, MX_INT8},
                {ONNX__TENSOR_PROTO__DATA_TYPE__UINT8, MX_UINT8},
                {ONNX__TENSOR_PROTO__DATA_TYPE__INT16, MX_INT16},
                {ONNX__TENSOR_PROTO__DATA_TYPE__INT32, MX_INT32},
                {ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, MX_BOOL}};
  for (size_t k = 0; k < sizeof narrow / sizeof narrow[0]; k++) {
    Onnx__TensorProto *tp = mxb_tensor(&b, "n", narrow[k].elem, "2,2", NULL, 0);
    tp->n_int32_data = 4;
    tp->int32_data = i32;
    mx_tensor t = parse_ok(&b, tp, "n");
    cr_expect_eq(t.dtype, narrow[k].dtype);
    cr_expect_eq(t.rank, 2);
    switch (t.dtype) {
      case MX_INT8:
        cr_expect_eq(((int8_t *)t.data)[0], -1);
        cr_expect_eq(((int8_t *)t.data)[1], 44);
        break;
      case MX_UINT8: cr_expect_eq(((uint8_t *)t.data)[0], 255); break;
      case MX_INT16: cr_expect_eq(((int16_t *)t.data)[1], 300); break;
      case MX_INT32: cr_expect_eq(((int32_t *)t.data)[1], 300); break;
      case MX_BOOL:
        cr_expect_eq(((uint8_t *)t.data)[0], 1);
        cr_expect_eq(((uint8_t *)t.data)[1], 1);
        cr_expect_eq(((uint8_t *)t.data)[2], 0);
        break;
      default: break;
    }
    mx_tensor_release(&t);
  }
  /* float16 / bfloat16 bit patterns in int32_data. */
  int32_t halves[2] = {0x3c00, 0xc000}; /* 1.0, -2.0 */
  Onnx__TensorProto *tp = mxb_tensor(&b, "h", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16, "2", NULL, 0);
  tp->n_int32_data = 2;
  tp->int32_data = halves;
  mx_tensor t = parse_ok(&b, tp, "h");
  cr_expect_eq(t.dtype, MX_FLOAT16);
  cr_expect_eq(((uint16_t *)t.data)[0], 0x3c00);
  cr_expect_eq(((uint16_t *)t.data)[1], 0xc000);
  mx_tensor_release(&t);
  tp = mxb_tensor(&b, "bf", ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16, "2", NULL, 0);
  tp->n_int32_data = 2;
  tp->int32_data = (int32_t[]){0x3f80, 0x4000};
  t = parse_ok(&b, tp, "bf");
  cr_expect_eq(t.dtype, MX_BFLOAT16);
  cr_expect_eq(((uint16_t *)t.data)[1], 0x4000);
  mx_tensor_release(&t);
  /* float_data, int64_data, double_data. */
  tp = mxb_tensor(&b, "f", FLOAT, "3", NULL, 0);
  tp->n_float_data = 3;
  tp->float_data = (float[]){1.5f, -2, 3};
  t = parse_ok(&b, tp, "f");
  cr_expect_eq(((float *)t.data)[0], 1.5f);
  mx_tensor_release(&t);
  tp = mxb_tensor(&b, "l", INT64, "", NULL, 0);
  tp->n_int64_data = 1;
  tp->int64_data = (int64_t[]){INT64_MIN};
  t = parse_ok(&b, tp, "l");
  cr_expect_eq(t.rank, 0);
  cr_expect_eq(*(int64_t *)t.data, INT64_MIN);
  mx_tensor_release(&t);
  tp = mxb_tensor(&b, "d", ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE, "1,2", NULL, 0);
  tp->n_double_data = 2;
  tp->double_data = (double[]){0.125, 1e300};
  t = parse_ok(&b, tp, "d");
  cr_expect_eq(t.dtype, MX_FLOAT64);
  cr_expect_eq(((double *)t.data)[1], 1e300);
  mx_tensor_release(&t);
  mxb_free(&b);
}

Test(onnx_import, raw_data_empty_tensors_and_bools) {
  mxb b = {0};
  uint8_t bools[3] = {0, 1, 7};
  mx_tensor t = parse_ok(&b, mxb_tensor(&b, "b", BOOL, "3", bools, 3), "b");
  cr_expect_eq(((uint8_t *)t.data)[2], 1, "bools are normalized to 0 / 1");
  mx_tensor_release(&t);
  t = parse_ok(&b, mxb_tensor(&b, "e", FLOAT, "2,0,3", NULL, 0), "e");
  cr_expect_eq(t.rank, 3);
  cr_expect_eq(t.dims[1], 0);
  cr_expect_not_null(t.data);
  mx_tensor_release(&t);
  t = parse_ok(&b, mxb_tensor(&b, "", FLOAT, "0", "", 0), "");
  mx_tensor_release(&t);
  /* Without name_out the name is simply not returned. */
  size_t size;
  uint8_t *bytes = mxb_pack_tensor(&b, mxb_tensor(&b, "q", INT64, "1", (int64_t[]){5}, 8), &size);
  cr_assert_eq(mx_tensor_parse_pb(bytes, size, &t, NULL, NULL), MX_OK);
  cr_expect_eq(*(int64_t *)t.data, 5);
  mx_tensor_release(&t);
  mxb_free(&b);
}

Test(onnx_import, tensor_file_errors) {
  mxb b = {0};
  size_t size;
  mx_tensor t;
  char *name = (char *)"untouched";
  mx_error err;
  uint8_t *bytes = mxb_pack_tensor(&b, mxb_tensor(&b, "short", FLOAT, "4", "abc", 3), &size);
  cr_assert_eq(mx_tensor_parse_pb(bytes, size, &t, &name, &err), MX_ERR_MALFORMED);
  cr_expect_null(name);
  cr_expect(strstr(err.message, "'short'"), "%s", err.message);
  bytes = mxb_pack_tensor(&b, mxb_tensor(&b, "notype", 0, "1", "abcd", 4), &size);
  cr_assert_eq(mx_tensor_parse_pb(bytes, size, &t, NULL, &err), MX_ERR_MALFORMED);
  cr_expect(strstr(err.message, "element type"), "%s", err.message);
  Onnx__TensorProto *ext = mxb_tensor(&b, "far", FLOAT, "1", NULL, 0);
  mxb_external(&b, ext, "location", "w.bin");
  bytes = mxb_pack_tensor(&b, ext, &size);
  cr_assert_eq(mx_tensor_parse_pb(bytes, size, &t, NULL, &err), MX_ERR_INVALID_ARGUMENT);
  cr_expect(strstr(err.message, "'far'"), "%s", err.message);
  cr_assert_eq(mx_tensor_parse_pb(NULL, 4, &t, NULL, &err), MX_ERR_INVALID_ARGUMENT);
  cr_assert_eq(mx_tensor_parse_pb("", 0, NULL, NULL, &err), MX_ERR_INVALID_ARGUMENT);
  mxb_free(&b);
}

Test(onnx_import, tensor_file_with_external_data_next_to_it) {
  mxb b = {0};
  char dir[] = "/tmp/mixrt-pb-XXXXXX";
  cr_assert_not_null(mkdtemp(dir));
  char pb[64], bin[64];
  snprintf(pb, sizeof pb, "%s/t.pb", dir);
  snprintf(bin, sizeof bin, "%s/t.bin", dir);
  int64_t v[3] = {10, 20, 30};
  cr_assert_eq(mxb_write_file(bin, v, sizeof v), 0);
  Onnx__TensorProto *tp = mxb_tensor(&b, "ext", INT64, "3", NULL, 0);
  mxb_external(&b, tp, "location", "t.bin");
  mxb_external(&b, tp, "length", "24");
  mxb_external(&b, tp, "checksum", "ignored");
  size_t size;
  uint8_t *bytes = mxb_pack_tensor(&b, tp, &size);
  cr_assert_eq(mxb_write_file(pb, bytes, size), 0);
  mx_tensor t;
  char *name = NULL;
  mx_error err;
  cr_assert_eq(mx_tensor_load_pb(pb, &t, &name, &err), MX_OK, "%s", err.message);
  cr_expect_str_eq(name, "ext");
  cr_expect_eq(((int64_t *)t.data)[2], 30);
  free(name);
  mx_tensor_release(&t);
  unlink(pb);
  unlink(bin);
  rmdir(dir);
  mxb_free(&b);
}

Test(onnx_import, model_file_with_external_data) {
  mxb b = {0};
  char dir[] = "/tmp/mixrt-model-XXXXXX";
  cr_assert_not_null(mkdtemp(dir));
  char sub[64], model[64], bin[80];
  snprintf(sub, sizeof sub, "%s/weights", dir);
  snprintf(model, sizeof model, "%s/m.onnx", dir);
  snprintf(bin, sizeof bin, "%s/weights/w.bin", dir);
  cr_assert_eq(mkdir(sub, 0700), 0);
  float w[4] = {1, 2, 3, 4};
  cr_assert_eq(mxb_write_file(bin, w, sizeof w), 0);
  Onnx__ModelProto *m = mxb_model(&b, 17);
  Onnx__TensorProto *tp = mxb_tensor(&b, "w", FLOAT, "2,2", NULL, 0);
  mxb_external(&b, tp, "location", "weights/./w.bin");
  mxb_initializer(&b, m->graph, tp);
  mxb_input(&b, m->graph, "x", FLOAT, "2,2");
  mxb_node(&b, m->graph, "MatMul", "mm", "x,w", "y");
  mxb_output(&b, m->graph, "y", FLOAT, NULL);
  size_t size;
  uint8_t *bytes = mxb_pack(&b, m, &size);
  cr_assert_eq(mxb_write_file(model, bytes, size), 0);
  mx_graph *g = NULL;
  mx_error err;
  cr_assert_eq(mx_onnx_load_file(model, &g, &err), MX_OK, "%s", err.message);
  const mx_tensor *t = mx_graph_value_constant(g, value_named(g, "w"));
  cr_assert_not_null(t);
  cr_expect_eq(((const float *)t->data)[3], 4.0f);
  mx_graph_destroy(g);
  /* From memory with the right base directory, too. */
  cr_assert_eq(mx_onnx_load_memory(bytes, size, dir, &g, &err), MX_OK, "%s", err.message);
  mx_graph_destroy(g);
  unlink(bin);
  unlink(model);
  rmdir(sub);
  rmdir(dir);
  mxb_free(&b);
}
