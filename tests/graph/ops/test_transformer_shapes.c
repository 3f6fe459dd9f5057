/* The Foundation issue's end-to-end inference check: an exported-transformer-style encoder
 * layer (tests/support/support_transformer.c) whose Reshape targets all come from Shape
 * arithmetic on a symbolic batch and sequence must infer with no unknown rank anywhere, the
 * Reshapes must land on [batch, seq, 4, 16] and back on [batch, seq, 64], and the output must
 * be exactly the input's [batch, seq, 64]. Binding the symbols afterwards must make every
 * shape concrete and let the optimizer fold the shape arithmetic. */
#include <criterion/criterion.h>
#include <string.h>

#include "graph/ir.h"
#include "mixrt/graph.h"
#include "support/transformer_fixture.h"

static mx_graph *G;
static mx_symtab *T;

static void setup(void) {
  mx_status st = mxt_transformer_build(&G);
  cr_assert_eq(st, MX_OK, "building the fixture: %s", mx_status_name(st));
  T = mx_graph_symtab(G);
}
static void teardown(void) {
  mx_graph_destroy(G);
  G = NULL;
}

TestSuite(transformer_shapes, .init = setup, .fini = teardown);

static mx_shape shape_of(const char *value) {
  mx_value_id v = mx_graph_find_value(G, value);
  cr_assert_neq(v, MX_NO_VALUE, "no value '%s'", value);
  mx_shape s;
  cr_assert(mx_graph_value_shape(G, v, &s));
  return s;
}

static void expect_shape(const char *value, mx_shape want) {
  mx_shape got = shape_of(value);
  char a[160], b[160];
  mx_shape_format(T, &got, a, sizeof a);
  mx_shape_format(T, &want, b, sizeof b);
  cr_assert_str_eq(a, b, "%s", value);
  cr_assert_eq(got.rank, want.rank);
  for (int32_t i = 0; i < got.rank; i++) cr_assert_eq(got.dims[i], want.dims[i], "%s dim %d", value, (int)i);
}

Test(transformer_shapes, no_unknown_rank_and_exact_output_shape) {
  cr_assert_eq(mx_graph_infer(G), MX_OK, "%s", mx_graph_last_error(G));
  mx_dim b = mx_sym_lookup(T, MXT_TRANSFORMER_BATCH), s = mx_sym_lookup(T, MXT_TRANSFORMER_SEQ);
  cr_assert(mx_dim_is_expr(b) && mx_dim_is_expr(s));

  size_t checked = 0;
  for (size_t i = 0; i < G->n_values; i++) {
    const mx_value *v = &G->values[i];
    if (v->flags & MX_VALUE_DEAD) continue;
    cr_assert_neq(v->shape.rank, MX_RANK_UNKNOWN, "value '%s' has an unknown rank", v->name);
    for (int32_t k = 0; k < v->shape.rank; k++)
      cr_assert(!mx_dim_is_unknown(v->shape.dims[k]), "value '%s' dim %d is unknown", v->name, (int)k);
    checked++;
  }
  cr_assert_gt(checked, 40);

  mx_shape x = shape_of(MXT_TRANSFORMER_INPUT);
  mx_shape y = shape_of(MXT_TRANSFORMER_OUTPUT);
  cr_assert_eq(y.rank, 3);
  cr_assert_eq(y.dims[0], x.dims[0]);
  cr_assert_eq(y.dims[1], x.dims[1]);
  cr_assert_eq(y.dims[2], MXT_TRANSFORMER_HIDDEN);
  cr_assert_eq(y.dims[0], b);
  cr_assert_eq(y.dims[1], s);
  cr_assert_eq(mx_graph_value_dtype(G, mx_graph_find_value(G, MXT_TRANSFORMER_OUTPUT)), MX_FLOAT32);
}

Test(transformer_shapes, intermediate_shapes_are_symbolic) {
  cr_assert_eq(mx_graph_infer(G), MX_OK, "%s", mx_graph_last_error(G));
  mx_dim b = mx_sym_lookup(T, MXT_TRANSFORMER_BATCH), s = mx_sym_lookup(T, MXT_TRANSFORMER_SEQ);
  expect_shape("position_ids:0", (mx_shape){1, {s}});
  expect_shape("pos_embed:0", (mx_shape){2, {s, 64}});
  expect_shape("heads_shape:0", (mx_shape){1, {4}});
  expect_shape("q/reshape:0", (mx_shape){4, {b, s, 4, 16}});
  expect_shape("q/transpose:0", (mx_shape){4, {b, 4, s, 16}});
  expect_shape("k/transpose:0", (mx_shape){4, {b, 4, 16, s}});
  expect_shape("scores:0", (mx_shape){4, {b, 4, s, s}});
  expect_shape("mask:0", (mx_shape){4, {b, 1, 1, s}});
  expect_shape("mask_expand:0", (mx_shape){4, {b, 4, s, s}});
  expect_shape("softmax:0", (mx_shape){4, {b, 4, s, s}});
  expect_shape("context_transpose:0", (mx_shape){4, {b, s, 4, 16}});
  expect_shape("merge_heads:0", (mx_shape){3, {b, s, 64}});

  const mx_value *target = &G->values[mx_graph_find_value(G, "heads_shape:0")];
  cr_assert_eq(target->sv_len, 4);
  cr_assert_eq(target->sv[0], b);
  cr_assert_eq(target->sv[1], s);
  cr_assert_eq(target->sv[2], 4);
  cr_assert_eq(target->sv[3], 16);
}

Test(transformer_shapes, binding_the_symbols_makes_everything_concrete_and_folds) {
  cr_assert_eq(mx_graph_infer(G), MX_OK, "%s", mx_graph_last_error(G));
  cr_assert_eq(mx_graph_bind_symbol(G, MXT_TRANSFORMER_BATCH, 2), MX_OK, "%s", mx_graph_last_error(G));
  cr_assert_eq(mx_graph_bind_symbol(G, MXT_TRANSFORMER_SEQ, 5), MX_OK, "%s", mx_graph_last_error(G));
  expect_shape(MXT_TRANSFORMER_OUTPUT, (mx_shape){3, {2, 5, 64}});
  expect_shape("scores:0", (mx_shape){4, {2, 4, 5, 5}});
  cr_assert_neq(mx_graph_find_node(G, "heads_shape"), MX_NO_NODE);
  cr_assert_neq(mx_graph_find_node(G, "position_ids"), MX_NO_NODE);
  mx_optimize_report rep;
  cr_assert_eq(mx_graph_optimize(G, &rep), MX_OK, "%s", mx_graph_last_error(G));
  cr_assert_eq(mx_graph_find_node(G, "heads_shape"), MX_NO_NODE, "shape arithmetic should fold");
  cr_assert_eq(mx_graph_find_node(G, "position_ids"), MX_NO_NODE, "Range(0, 5, 1) should fold");
  cr_assert_neq(mx_graph_find_node(G, "softmax"), MX_NO_NODE);
  cr_assert_gt(rep.folded_nodes, 8);
}
