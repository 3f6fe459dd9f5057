/* mx_graph_shard, the public entry of the sharding pass: on the unprepared llama it gives the
 * rank graph the internal pass gives on the prepared one (same collectives, same cache shapes,
 * the same weight slice), refuses a bad rank or tp naming both, and refuses a graph the pass
 * cannot shard with the node named in mx_graph_last_error. */
#include <criterion/criterion.h>
#include <string.h>

#include "graph/ir.h"
#include "support_shard.h"

static mx_graph *llama(int64_t kv_heads) {
  mx_llama_config cfg;
  mx_llama_config_default(&cfg);
  cfg.kv_heads = kv_heads;
  mx_graph *g = NULL;
  mx_error err = {0};
  cr_assert_eq(mx_model_llama(&cfg, &g, &err), MX_OK, "%s", err.message);
  return g;
}

Test(shard_api, public_entry_equals_the_pass) {
  mx_llama_config cfg;
  mx_llama_config_default(&cfg);
  cfg.kv_heads = 2;
  mx_graph *g = llama(2);
  cr_assert_eq(mx_graph_shard(g, 2, 1), MX_OK, "%s", mx_graph_last_error(g));
  mx_error err = {0};
  mx_graph *ref = shard_test_rank(&cfg, 2, 1, NULL, &err);
  cr_assert(ref, "%s", err.message);
  cr_expect_eq(shard_test_count(g, "AllReduce"), shard_test_count(ref, "AllReduce"));
  cr_expect_eq(shard_test_count(g, "AllGather"), 1);
  mx_shape a, b;
  cr_assert(mx_graph_value_shape(g, mx_graph_find_value(g, "past_key_0"), &a));
  cr_assert(mx_graph_value_shape(ref, mx_graph_find_value(ref, "past_key_0"), &b));
  cr_expect_eq(a.dims[1], 1);
  cr_expect_eq(a.dims[1], b.dims[1]);
  /* The same slice of the same weight. */
  mx_value_id gv = mx_graph_find_value(g, "l0/wq.tp1"), rv = mx_graph_find_value(ref, "l0/wq.tp1");
  cr_assert(gv != MX_NO_VALUE && rv != MX_NO_VALUE);
  const mx_tensor *gt = mx_graph_value_constant(g, gv), *rt = mx_graph_value_constant(ref, rv);
  size_t gn = 0, rn = 0;
  cr_assert(gt && rt && mx_tensor_nbytes(gt, &gn) && mx_tensor_nbytes(rt, &rn));
  cr_assert_eq(gn, rn);
  cr_expect(memcmp(gt->data, rt->data, rn) == 0);
  mx_graph_destroy(ref);
  mx_graph_destroy(g);
}

Test(shard_api, bad_rank_and_unshardable_graph) {
  cr_expect_eq(mx_graph_shard(NULL, 2, 0), MX_ERR_INVALID_ARGUMENT);
  mx_graph *g = llama(2);
  cr_expect_eq(mx_graph_shard(g, 2, 2), MX_ERR_INVALID_ARGUMENT);
  cr_expect(strstr(mx_graph_last_error(g), "rank 2 of 2"), "%s", mx_graph_last_error(g));
  cr_expect_eq(mx_graph_shard(g, 0, 0), MX_ERR_INVALID_ARGUMENT);
  mx_graph_destroy(g);
  /* 4 query heads do not split 3 ways. */
  g = llama(2);
  cr_expect_neq(mx_graph_shard(g, 3, 0), MX_OK);
  cr_expect(strstr(mx_graph_last_error(g), "head"), "%s", mx_graph_last_error(g));
  mx_graph_destroy(g);
}
