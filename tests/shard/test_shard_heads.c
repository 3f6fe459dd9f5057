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
  const int64_t hd = cfg.hidden / cfg.heads, rank_kv = kv < tp ? 1 : kv / tp;
  mx_graph *full = shard_test_llama(&cfg);
  cr_assert(full);
  mx_graph *ranks[8];
  mx_error err = {0};
  for (int r = 0; r < tp; r++) {
    ranks[r] = shard_test_rank(&cfg, tp, r, NULL, &err);
    cr_assert(ranks[r], "%s", err.message);
  }
  shard_sim *sim = shard_sim_create(ranks, tp);
  cr_assert(sim);
  const size_t n_io = 1 + 2 * (size_t)cfg.layers;
  mx_tensor full_in[16], full_out[16], rank_in[8][16], rank_out[8][16];
  mx_tensor *rin[8], *rout[8];
  for (size_t i = 1; i < n_io; i++) {
    cr_assert_eq(mx_tensor_alloc(MX_FLOAT32, 4, (int64_t[]){1, kv, 0, hd}, &full_in[i]), MX_OK);
    for (int r = 0; r < tp; r++)
      cr_assert_eq(mx_tensor_alloc(MX_FLOAT32, 4, (int64_t[]){1, rank_kv, 0, hd}, &rank_in[r][i]), MX_OK);
  }
  for (int r = 0; r < tp; r++) {
    rin[r] = rank_in[r];
    rout[r] = rank_out[r];
  }
  int64_t token = 1;
  for (int step = 0; step < steps; step++) {
    mx_tensor ids;
    cr_assert_eq(mx_tensor_alloc(MX_INT64, 2, (int64_t[]){1, 1}, &ids), MX_OK);
    *(int64_t *)ids.data = token;
    full_in[0] = ids;
    for (int r = 0; r < tp; r++) rank_in[r][0] = ids;
    cr_assert_eq(mx_reference_run(full, full_in, n_io, full_out, n_io, &err), MX_OK, "%s", err.message);
    cr_assert_eq(shard_sim_run(sim, rin, n_io, rout, n_io, &err), MX_OK, "%s", err.message);
    int64_t next = 0;
    const float *lf = full_out[0].data;
    for (int64_t i = 1; i < cfg.vocab; i++)
      if (lf[i] > lf[next]) next = i;
    for (int r = 0; r < tp; r++) {
      char why[256];
      cr_assert(mx_tensor_allclose(&rank_out[r][0], &full_out[0], 1e-3, 1e-4, why, sizeof why),
                "%lld/%lld heads, tp %d rank %d step %d logits: %s", (long long)q, (long long)kv, tp, r, step,
                why);
    }
    token = next;
    mx_tensor_release(&ids);
    for (size_t i = 1; i < n_io; i++) {
      mx_tensor_release(&full_in[i]);
      full_in[i] = full_out[i];
      for (int r = 0; r < tp; r++) {
        mx_tensor_release(&rank_in[r][i]);
        rank_in[r][i] = rank_out[r][i];
      }
    }
    mx_tensor_release(&full_out[0]);
    for (int r = 0; r < tp; r++) mx_tensor_release(&rank_out[r][0]);
  }
  for (size_t i = 1; i < n_io; i++) {
    mx_tensor_release(&full_in[i]);
    for (int r = 0; r < tp; r++) mx_tensor_release(&rank_in[r][i]);
  }
  shard_sim_destroy(sim);
  mx_graph_destroy(full);
}

Test(shard_heads, two_kv_heads_on_four_ranks) { check_shared(4, 2, 4, 16); }

Test(shard_heads, one_kv_head_on_two_ranks) { check_shared(4, 1, 2, 16); }

Test(shard_heads, one_kv_head_on_four_ranks) { check_shared(4, 1, 4, 16); }
