/* A transformer block (attention with fixed lengths + MLP) and the exported-style encoder with
 * its symbols bound: static execution equals the reference interpreter bit for bit with 1, 2
 * and 4 streams, in both HAL model modes, on the CPU device (checking mode on) and the inline
 * device; the memory plans pass the independent invariant check. */
#include <criterion/criterion.h>

#include "block.h"
#include "mixrt/models.h"
#include "support_static.h"

static void check_block(const mxt_block_config *cfg, mx_device_kind kind) {
  mx_graph *g;
  cr_assert_eq(mxt_block_build(cfg, &g), MX_OK);
  mx_device *dev = st_device(kind, true);
  cr_assert(dev);
  static const uint32_t streams[] = {1, 2, 4};
  for (int si = 0; si < 3; si++) {
    for (int mode = 0; mode < 2; mode++) {
      mx_static_options o;
      mx__static_options_init(&o);
      o.max_streams = streams[si];
      o.mode = mode ? MX_HAL_MODEL_INDIRECT : MX_HAL_MODEL_PATCH;
      char why[512] = "";
      cr_assert(st_check_against_reference(g, &o, NULL, dev, 3 + (uint64_t)si, why, sizeof why),
                "%u streams, %s mode: %s", streams[si], mode ? "INDIRECT" : "PATCH", why);
      mx_static_plan *p;
      mx_error err;
      cr_assert_eq(mx__static_compile(g, &o, &p, &err), MX_OK, "%s", err.message);
      cr_assert(st_check_memory_plan(p, why, sizeof why), "%u streams: %s", streams[si], why);
      mx_static_report r;
      mx__static_plan_report(p, &r);
      cr_assert(r.streams >= 1 && r.streams <= streams[si]);
      cr_assert_gt(r.aliases, 0, "the Reshapes run as no task");
      cr_assert_gt(r.in_place, 0, "some elementwise op works in place");
      if (streams[si] > 1) cr_assert_gt(r.streams, 1, "the Q/K/V branches use more than one stream");
      mx__static_plan_destroy(p);
    }
  }
  mx_device_destroy(dev);
  mx_graph_destroy(g);
}

Test(static_transformer, block_cpu) {
  mxt_block_config cfg = mxt_block_default();
  check_block(&cfg, MX_DEVICE_CPU);
}

Test(static_transformer, two_blocks_inline) {
  mxt_block_config cfg = mxt_block_default();
  cfg.layers = 2;
  cfg.seq = 16;
  check_block(&cfg, MX_DEVICE_INLINE);
}

Test(static_transformer, encoder_with_bound_symbols) {
  mx_encoder_config ec;
  mx_encoder_config_default(&ec);
  ec.layers = 2;
  mx_graph *g;
  mx_error err;
  cr_assert_eq(mx_model_encoder(&ec, &g, &err), MX_OK, "%s", err.message);
  cr_assert_eq(mx_graph_bind_symbol(g, "batch", 2), MX_OK, "%s", mx_graph_last_error(g));
  cr_assert_eq(mx_graph_bind_symbol(g, "seq", 12), MX_OK, "%s", mx_graph_last_error(g));
  mx_device *dev = st_device(MX_DEVICE_CPU, true);
  for (uint32_t streams = 1; streams <= 4; streams *= 2) {
    mx_static_options o;
    mx__static_options_init(&o);
    o.max_streams = streams;
    char why[512] = "";
    cr_assert(st_check_against_reference(g, &o, NULL, dev, 11, why, sizeof why), "%u streams: %s", streams,
              why);
  }
  /* Also after folding the shape arithmetic away. */
  cr_assert_eq(mx_graph_optimize(g, NULL), MX_OK, "%s", mx_graph_last_error(g));
  mx_static_options o;
  mx__static_options_init(&o);
  o.max_streams = 2;
  char why[512] = "";
  cr_assert(st_check_against_reference(g, &o, NULL, dev, 12, why, sizeof why), "optimized: %s", why);
  mx_device_destroy(dev);
  mx_graph_destroy(g);
}

/* A Transpose that moves only dims of size 1 ([1, 1, 4, 8] -> [1, 4, 1, 8], as a decode step's
 * head split does) keeps every element at its offset: it becomes an alias (no task), while one
 * that reorders dims larger than 1 stays a task; both equal the reference interpreter. */
Test(static_transformer, transpose_of_unit_dims_is_an_alias) {
  static const struct {
    int64_t dims[4], perm[4];
    uint32_t aliases;
  } cases[] = {
      {{1, 1, 4, 8}, {0, 2, 1, 3}, 1}, /* moves a 1 past the 4: a view */
      {{1, 4, 1, 8}, {0, 1, 3, 2}, 1}, /* the 8 and the 1 swap: still a view */
      {{2, 1, 4, 8}, {2, 1, 0, 3}, 0}, /* the 2 and the 4 swap: a copy */
  };
  mx_device *dev = st_device(MX_DEVICE_INLINE, true);
  cr_assert(dev);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    mx_graph *g;
    cr_assert_eq(mx_graph_create("unit_transpose", &g), MX_OK);
    mx_shape s = {4, {cases[i].dims[0], cases[i].dims[1], cases[i].dims[2], cases[i].dims[3]}};
    mx_value_id x, t, y;
    cr_assert_eq(mx_graph_add_input(g, "x", MX_FLOAT32, &s, &x), MX_OK);
    mx_attr perm = mx_attr_ints("perm", cases[i].perm, 4);
    cr_assert_eq(mx_graph_add_op(g, "Transpose", &x, 1, &perm, 1, &t), MX_OK);
    cr_assert_eq(mx_graph_add_op(g, "Relu", &t, 1, NULL, 0, &y), MX_OK);
    cr_assert_eq(mx_graph_add_output(g, y), MX_OK);
    cr_assert_eq(mx_graph_infer(g), MX_OK, "%s", mx_graph_last_error(g));
    mx_static_options o;
    mx__static_options_init(&o);
    mx_static_plan *p;
    mx_error err;
    cr_assert_eq(mx__static_compile(g, &o, &p, &err), MX_OK, "%s", err.message);
    mx_static_report r;
    mx__static_plan_report(p, &r);
    cr_expect_eq(r.aliases, cases[i].aliases, "case %zu: %u aliases", i, (unsigned)r.aliases);
    cr_expect_eq(mx__static_plan_task_count(p), 2 - (size_t)cases[i].aliases, "case %zu: %zu tasks", i,
                 mx__static_plan_task_count(p));
    mx__static_plan_destroy(p);
    char why[512] = "";
    cr_assert(st_check_against_reference(g, &o, NULL, dev, 5 + i, why, sizeof why), "case %zu: %s", i, why);
    mx_graph_destroy(g);
  }
  mx_device_destroy(dev);
}
