/* Head counts and the sharding pass (graph/passes/shard.c): fewer kv-heads than ranks (each
 * kv-head replicated on the ranks whose query heads read it) gives the unsharded model's logits
 * on simulated ranks; counts it cannot cut are refused naming the attention node and the tp
 * sizes that would do. */
#include <criterion/criterion.h>
#include <string.h>

#include "graph/ir.h"
#include "support_shard.h"

static mx_llama_config heads(int64_t q, int64_t kv) {
  mx_llama_config cfg;
  mx_llama_config_default(&cfg);
  cfg.heads = q;
  cfg.kv_heads = kv;
  return cfg;
}

static void expect_refusal(mx_llama_config cfg, int tp, const char *const *want) {
  mx_error err = {0};
  cr_assert_null(shard_test_rank(&cfg, tp, 0, NULL, &err), "tp %d", tp);
  for (size_t i = 0; want[i]; i++)
    cr_expect(strstr(err.message, want[i]), "want '%s': %s", want[i], err.message);
}

Test(shard_heads, heads_not_divisible_name_the_sizes_that_fit) {
  expect_refusal(heads(4, 2), 3,
                 (const char *[]){"l0/attention", "4 query heads and 2 kv heads cannot be cut for tp 3",
                                  "use tp 1, 2 or 4", NULL});
  expect_refusal(heads(8, 8), 3, (const char *[]){"use tp 1, 2, 4 or 8", NULL});
}

Test(shard_heads, kv_heads_not_dividing_tp_say_what_to_do) {
  mx_llama_config cfg = heads(6, 2);
  cfg.head_dim = 16;
  expect_refusal(cfg, 3,
                 (const char *[]){"l0/attention", "2 kv heads are fewer than tp 3 and do not divide it",
                                  "use tp 1, 2 or 6", "at least 3 kv heads", NULL});
}

/* Rank r's cache holds kv-head r * kv / tp: its past/present inputs and outputs have one head,
 * and the K/V projection weights the columns of that head. */
Test(shard_heads, shared_kv_head_cache_shapes) {
  mx_llama_config cfg = heads(4, 2);
  for (int r = 0; r < 4; r++) {
    mx_error err = {0};
    mx_graph *g = shard_test_rank(&cfg, 4, r, NULL, &err);
    cr_assert(g, "%s", err.message);
    mx_shape s;
    cr_assert(mx_graph_value_shape(g, mx_graph_find_value(g, "past_key_0"), &s));
    cr_expect_eq(s.dims[1], 1);
    cr_assert(mx_graph_value_shape(g, mx_graph_find_value(g, "present_value_1"), &s));
    cr_expect_eq(s.dims[1], 1);
    mx_graph_destroy(g);
  }
}

/* Greedy decode on simulated ranks against the unsharded model, rtol 1e-3 / atol 1e-4. */
static void check_shared(int64_t q, int64_t kv, int tp, int steps) {
  mx_llama_config cfg = heads(q, kv);
  mx_graph *full = shard_test_llama(&cfg);
  cr_assert(full);
  mx_graph *ranks[8];
  mx_error err = {0};
  for (int r = 0; r < tp; r++) {
    ranks[r] = shard_test_rank(&cfg, tp, r, NULL, &err);
    cr_assert(ranks[r], "%s", err.message);
  }
  shard_decode_shape shape = {.layers = cfg.layers,
                              .kv_heads = kv,
                              .rank_kv_heads = kv < tp ? 1 : kv / tp,
                              .head_dim = cfg.hidden / cfg.heads,
                              .first_token = 1};
  char label[64];
  snprintf(label, sizeof label, "%lld/%lld heads", (long long)q, (long long)kv);
  shard_check_greedy(full, ranks, tp, &shape, steps, label);
}

Test(shard_heads, two_kv_heads_on_four_ranks) { check_shared(4, 2, 4, 16); }

Test(shard_heads, one_kv_head_on_two_ranks) { check_shared(4, 1, 2, 16); }

Test(shard_heads, one_kv_head_on_four_ranks) { check_shared(4, 1, 4, 16); }
