/* Head counts the sharding pass cannot split (graph/passes/shard.c): the refusal names the
 * attention node and says which tp sizes would do, and why fewer kv-heads than ranks do not. */
#include <criterion/criterion.h>
#include <string.h>

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
  for (size_t i = 0; want[i]; i++) cr_expect(strstr(err.message, want[i]), "want '%s': %s", want[i], err.message);
}

Test(shard_heads, fewer_kv_heads_than_ranks_says_what_to_do) {
  expect_refusal(heads(4, 2), 4,
                 (const char *[]){"l0/attention", "2 kv heads are fewer than tp 4", "does not replicate",
                                  "use tp 1 or 2", "at least 4 kv heads", NULL});
}

Test(shard_heads, one_kv_head_says_what_to_do) {
  expect_refusal(heads(4, 1), 2, (const char *[]){"1 kv head is fewer than tp 2", "use tp 1,", NULL});
}

Test(shard_heads, heads_not_divisible_name_the_sizes_that_fit) {
  expect_refusal(heads(4, 2), 3,
                 (const char *[]){"l0/attention", "4 query heads and 2 kv heads are not both divisible by tp 3",
                                  "use tp 1 or 2", NULL});
  expect_refusal(heads(8, 8), 3, (const char *[]){"use tp 1, 2, 4 or 8", NULL});
}
