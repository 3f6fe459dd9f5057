/* Rule shape_subgraph on minimal graphs: Reshape and Expand targets computed from Shape ->
 * Gather -> Unsqueeze -> Concat become constants that mean the same for every symbol value
 * (outputs keep their symbolic shapes), and the near misses that no constant can express. */
#include <criterion/criterion.h>

#include "graph/ops/shape_params.h"
#include "support_fusion.h"

/* Dim `axis` of x's shape as a 1-element int64 tensor, the way torch exports x.size(axis). */
static mx_value_id dim_of(mx_graph *g, mx_value_id x, int64_t axis) {
  mx_value_id idx = fz_const_dt(g, MX_INT64, 0, NULL, &axis);
  mx_value_id d = FZ2(g, "Gather", FZ1(g, "Shape", x), idx);
  return FZ2(g, "Unsqueeze", d, fz_ints(g, 1, (int64_t[]){0}));
}

static mx_value_id concat0(mx_graph *g, size_t n, const mx_value_id *parts) {
  mx_attr ax = mx_attr_int("axis", 0);
  return fz_op(g, "Concat", n, parts, &ax, 1);
}

/* [b, s, 8] -> [b, s, 2, 4] (heads split) -> [b*s, 8] (the -1 case); [b, s, 1] expanded to
 * [b, s, 8]. */
static void build_shape_chains(mx_graph *g) {
  mx_symtab *t = mx_graph_symtab(g);
  mx_dim b = mx_sym_named(t, "b"), s = mx_sym_named(t, "s");
  mx_value_id x = fz_input(g, "x", MX_FLOAT32, 3, (mx_dim[]){b, s, 8});
  mx_value_id heads =
      concat0(g, 3, (mx_value_id[]){dim_of(g, x, 0), dim_of(g, x, 1), fz_ints(g, 2, (int64_t[]){2, 4})});
  mx_value_id y = FZ2(g, "Reshape", x, heads);
  cr_assert_eq(mx_graph_add_output(g, FZ1(g, "Relu", y)), MX_OK);
  mx_value_id rows = FZ2(g, "Mul", dim_of(g, x, 0), dim_of(g, x, 1));
  mx_value_id flat =
      FZ2(g, "Reshape", y, concat0(g, 2, (mx_value_id[]){rows, fz_ints(g, 1, (int64_t[]){8})}));
  cr_assert_eq(mx_graph_add_output(g, FZ1(g, "Exp", flat)), MX_OK);
  mx_value_id col = fz_input(g, "col", MX_FLOAT32, 3, (mx_dim[]){b, s, 1});
  mx_value_id e =
      FZ2(g, "Expand", col,
          concat0(g, 3, (mx_value_id[]){dim_of(g, x, 0), dim_of(g, x, 1), fz_ints(g, 1, (int64_t[]){8})}));
  cr_assert_eq(mx_graph_add_output(g, FZ2(g, "Add", e, x)), MX_OK);
}

Test(fusion_shape, reshape_and_expand_targets_become_constants) {
  mx_fuse_report r;
  mx_graph *g = fz_fuse_and_compare(build_shape_chains, "shape_subgraph",
                                    (const int64_t[][MX_MAX_RANK]){{2, 3, 8}, {2, 3, 1}}, &r);
  cr_assert_eq(fz_hits(&r, "shape_subgraph"), 3);
  cr_assert_eq(fz_count(g, "Shape"), 0);
  cr_assert_eq(fz_count(g, "Gather"), 0);
  cr_assert_eq(fz_count(g, "Concat"), 0);
  cr_assert_eq(fz_count(g, "Unsqueeze"), 0);
  /* The outputs keep their symbolic shapes: [b, s, 2, 4] and [b*s, 8]. */
  mx_symtab *t = mx_graph_symtab(g);
  mx_dim b = mx_sym_lookup(t, "b"), s = mx_sym_lookup(t, "s");
  const mx_shape *y = &g->values[g->outputs[0]].shape, *f = &g->values[g->outputs[1]].shape;
  cr_assert(y->rank == 4 && y->dims[0] == b && y->dims[1] == s && y->dims[2] == 2 && y->dims[3] == 4);
  cr_assert(f->rank == 2 && f->dims[0] == mx_sym_mul(t, b, s) && f->dims[1] == 8);
  mx_graph_destroy(g);
}

/* [b, s] -> [s, b]: two symbolic entries, neither in its input place: no constant says that. */
static void build_swapped_dims(mx_graph *g) {
  mx_symtab *t = mx_graph_symtab(g);
  mx_value_id x = fz_input(g, "x", MX_FLOAT32, 2, (mx_dim[]){mx_sym_named(t, "b"), mx_sym_named(t, "s")});
  mx_value_id target = concat0(g, 2, (mx_value_id[]){dim_of(g, x, 1), dim_of(g, x, 0)});
  cr_assert_eq(mx_graph_add_output(g, FZ2(g, "Reshape", x, target)), MX_OK);
  /* allowzero: a 0 would be a real 0, so the two copied dims cannot be written either. */
  mx_value_id y = fz_input(g, "y", MX_FLOAT32, 2, (mx_dim[]){mx_sym_named(t, "b"), mx_sym_named(t, "s")});
  mx_attr az = mx_attr_int("allowzero", 1);
  mx_value_id same =
      concat0(g, 3, (mx_value_id[]){dim_of(g, y, 0), dim_of(g, y, 1), fz_ints(g, 1, (int64_t[]){1})});
  cr_assert_eq(mx_graph_add_output(g, fz_op(g, "Reshape", 2, (mx_value_id[]){y, same}, &az, 1)), MX_OK);
  /* Expand of [1, s, 1] over the symbolic batch: only the run time knows b. */
  mx_value_id row = fz_input(g, "row", MX_FLOAT32, 3, (mx_dim[]){1, mx_sym_named(t, "s"), 1});
  mx_value_id to =
      concat0(g, 3, (mx_value_id[]){dim_of(g, x, 0), dim_of(g, x, 1), fz_ints(g, 1, (int64_t[]){4})});
  cr_assert_eq(mx_graph_add_output(g, FZ2(g, "Expand", row, to)), MX_OK);
}

Test(fusion_shape, near_miss_no_constant_target) {
  mx_fuse_report r;
  mx_graph *g = fz_fuse_and_compare(build_swapped_dims, "shape_subgraph",
                                    (const int64_t[][MX_MAX_RANK]){{2, 3}, {2, 3}, {1, 3, 1}}, &r);
  cr_assert_eq(fz_hits(&r, "shape_subgraph"), 0);
  cr_assert_eq(fz_count(g, "Concat"), 3);
  mx_graph_destroy(g);
}

/* Two layers' caches of one symbolic length: the Range each builds from its own cache's Shape
 * is one Range once shape_cse merges the equal Shapes (cse then merges what reads them). A
 * cache of another length keeps its own. */
static void build_per_layer_shapes(mx_graph *g) {
  mx_symtab *t = mx_graph_symtab(g);
  mx_dim p = mx_sym_named(t, "past"), q = mx_sym_named(t, "other");
  mx_value_id k[3] = {fz_input(g, "k0", MX_FLOAT32, 4, (mx_dim[]){1, 2, p, 4}),
                      fz_input(g, "k1", MX_FLOAT32, 4, (mx_dim[]){1, 2, p, 4}),
                      fz_input(g, "k2", MX_FLOAT32, 4, (mx_dim[]){1, 2, q, 4})};
  int64_t two = 2, zero = 0, one = 1;
  for (int i = 0; i < 3; i++) {
    mx_value_id n = FZ2(g, "Gather", FZ1(g, "Shape", k[i]), fz_const_dt(g, MX_INT64, 0, NULL, &two));
    mx_value_id r = fz_op(
        g, "Range", 3,
        (mx_value_id[]){fz_const_dt(g, MX_INT64, 0, NULL, &zero), n, fz_const_dt(g, MX_INT64, 0, NULL, &one)},
        NULL, 0);
    mx_attr to = mx_attr_int("to", MX_FLOAT32);
    cr_assert_eq(mx_graph_add_output(g, fz_op(g, "Cast", 1, &r, &to, 1)), MX_OK);
  }
}

Test(fusion_shape, equal_shape_values_of_layers_merged) {
  mx_fuse_report r;
  mx_graph *g =
      fz_fuse_and_compare(build_per_layer_shapes, "default",
                          (const int64_t[][MX_MAX_RANK]){{1, 2, 5, 4}, {1, 2, 5, 4}, {1, 2, 3, 4}}, &r);
  cr_assert_geq(fz_hits(&r, "shape_cse"), 1);
  cr_assert_eq(fz_count(g, "Shape"), 2);
  cr_assert_eq(fz_count(g, "Range"), 2);
  mx_graph_destroy(g);
}
