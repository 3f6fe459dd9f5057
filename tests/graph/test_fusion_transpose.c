/* Rules transpose_reshape and view_chain on minimal graphs (symbolic dims included): hits, near
 * misses, and the fused graph's outputs against the unfused graph's (support_fusion.c). */
#include <criterion/criterion.h>

#include "support_fusion.h"

static const int64_t perm_heads[] = {0, 2, 1, 3};

/* One-token head split [b, 1, 4, 8] -> [b, 4, 1, 8]: only the 1 moves. An identity perm. */
static void build_unit_transposes(mx_graph *g) {
  mx_dim b = mx_sym_named(mx_graph_symtab(g), "b");
  mx_value_id x = fz_input(g, "x", MX_FLOAT32, 4, (mx_dim[]){b, 1, 4, 8});
  cr_assert_eq(mx_graph_add_output(g, FZ1(g, "Relu", fz_transpose(g, x, 4, perm_heads))), MX_OK);
  int64_t same[] = {0, 1, 2, 3};
  cr_assert_eq(mx_graph_add_output(g, FZ1(g, "Exp", fz_transpose(g, x, 4, same))), MX_OK);
  /* Near miss: [b, 3, 4, 8] -> [b, 4, 3, 8] moves data. */
  mx_value_id z = fz_input(g, "z", MX_FLOAT32, 4, (mx_dim[]){b, 3, 4, 8});
  cr_assert_eq(mx_graph_add_output(g, FZ1(g, "Neg", fz_transpose(g, z, 4, perm_heads))), MX_OK);
}

Test(fusion_transpose, transposes_of_unit_dims_become_reshapes) {
  mx_fuse_report r;
  mx_graph *g = fz_fuse_and_compare(build_unit_transposes, "transpose_reshape",
                                    (const int64_t[][MX_MAX_RANK]){{2, 1, 4, 8}, {2, 3, 4, 8}}, &r);
  cr_assert_eq(fz_hits(&r, "transpose_reshape"), 2);
  cr_assert_eq(fz_count(g, "Transpose"), 1);
  cr_assert_eq(fz_count(g, "Reshape"), 1);
  mx_graph_destroy(g);
}

/* [b, 6] -> Reshape [b, 2, 3] -> Unsqueeze -> [b, 1, 2, 3]: one Reshape of x. Unsqueeze then
 * Squeeze of the same axis: nothing. A view whose result is also an output stays. */
static void build_views(mx_graph *g) {
  mx_dim b = mx_sym_named(mx_graph_symtab(g), "b");
  mx_value_id x = fz_input(g, "x", MX_FLOAT32, 2, (mx_dim[]){b, 6});
  mx_value_id r3 = FZ2(g, "Reshape", x, fz_ints(g, 3, (int64_t[]){0, 2, 3}));
  cr_assert_eq(mx_graph_add_output(g, FZ1(g, "Exp", FZ2(g, "Unsqueeze", r3, fz_ints(g, 1, (int64_t[]){1})))),
               MX_OK);
  mx_value_id u = FZ2(g, "Unsqueeze", x, fz_ints(g, 1, (int64_t[]){0}));
  cr_assert_eq(mx_graph_add_output(g, FZ1(g, "Relu", FZ2(g, "Squeeze", u, fz_ints(g, 1, (int64_t[]){0})))),
               MX_OK);
  mx_value_id y = fz_input(g, "y", MX_FLOAT32, 3, (mx_dim[]){b, 2, 4});
  mx_value_id f = FZ1(g, "Flatten", y); /* [b, 8], an output too */
  cr_assert_eq(mx_graph_add_output(g, f), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, FZ1(g, "Neg", FZ2(g, "Reshape", f, fz_ints(g, 2, (int64_t[]){-1, 4})))),
               MX_OK);
}

Test(fusion_transpose, view_chains_collapse) {
  mx_fuse_report r;
  mx_graph *g =
      fz_fuse_and_compare(build_views, "view_chain", (const int64_t[][MX_MAX_RANK]){{2, 6}, {2, 2, 4}}, &r);
  cr_assert_eq(fz_hits(&r, "view_chain"), 3);
  cr_assert_eq(fz_count(g, "Unsqueeze"), 0);
  cr_assert_eq(fz_count(g, "Squeeze"), 0);
  cr_assert_eq(fz_count(g, "Flatten"), 1);
  cr_assert_eq(fz_count(g, "Reshape"), 2);
  mx_graph_destroy(g);
}
