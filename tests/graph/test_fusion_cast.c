/* Rule cast_pair on minimal graphs: round trips through a wider type removed, round trips
 * through a narrower one (which round) kept; outputs against the unfused graph's. */
#include <criterion/criterion.h>

#include "support_fusion.h"

static mx_value_id cast_to(mx_graph *g, mx_value_id x, mx_dtype to) {
  mx_attr a = mx_attr_int("to", to);
  return fz_op(g, "Cast", 1, &x, &a, 1);
}

static void build_casts(mx_graph *g) {
  mx_dim b = mx_sym_named(mx_graph_symtab(g), "b");
  mx_value_id x = fz_input(g, "x", MX_FLOAT32, 2, (mx_dim[]){b, 5});
  cr_assert_eq(mx_graph_add_output(g, FZ1(g, "Relu", cast_to(g, cast_to(g, x, MX_FLOAT64), MX_FLOAT32))),
               MX_OK);
  mx_value_id i = fz_input(g, "i", MX_INT32, 1, (mx_dim[]){4});
  cr_assert_eq(mx_graph_add_output(g, FZ1(g, "Neg", cast_to(g, cast_to(g, i, MX_INT64), MX_INT32))), MX_OK);
  /* Near misses: float32 through float16 rounds; int32 through float32 loses bits past 2^24. */
  cr_assert_eq(mx_graph_add_output(g, FZ1(g, "Exp", cast_to(g, cast_to(g, x, MX_FLOAT16), MX_FLOAT32))),
               MX_OK);
  cr_assert_eq(mx_graph_add_output(g, FZ1(g, "Abs", cast_to(g, cast_to(g, i, MX_FLOAT32), MX_INT32))), MX_OK);
}

Test(fusion_cast, round_trips_through_wider_types_removed) {
  mx_fuse_report r;
  mx_graph *g =
      fz_fuse_and_compare(build_casts, "cast_pair", (const int64_t[][MX_MAX_RANK]){{3, 5}, {4}}, &r);
  cr_assert_eq(fz_hits(&r, "cast_pair"), 2);
  cr_assert_eq(fz_count(g, "Cast"), 4);
  mx_graph_destroy(g);
}
