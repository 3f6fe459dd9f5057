/* Helpers of the sharding tests: the fused llama decode step, rank graphs, and a simulation of
 * N ranks in one process (each rank's graph run by the reference interpreter with the
 * collectives cut out and done by hand). */
#ifndef MIXRT_TESTS_SHARD_SUPPORT_H
#define MIXRT_TESTS_SHARD_SUPPORT_H

#include "graph/passes/shard.h"
#include "mixrt/mixrt.h"

/* The llama decode step of cfg, folded and fused as sessions compile it. */
mx_graph *shard_test_llama(const mx_llama_config *cfg);
/* Rank `rank` of `tp` of the fused llama (report may be NULL); NULL with err filled on refusal. */
mx_graph *shard_test_rank(const mx_llama_config *cfg, int tp, int rank, mx__shard_report *report,
                          mx_error *err);
/* Live nodes of g with op_type `op` (any domain). */
size_t shard_test_count(const mx_graph *g, const char *op);

/* N ranks in one process. */
typedef struct shard_sim shard_sim;
/* Takes ownership of ranks[0..tp) (sharded graphs of the same model). */
shard_sim *shard_sim_create(mx_graph **ranks, int tp);
void shard_sim_destroy(shard_sim *s);
/* Runs one step: inputs[r][0..n_in) are rank r's graph inputs by position; outputs[r][0..n_out)
 * receive rank r's graph outputs (mx_tensor_release each). */
mx_status shard_sim_run(shard_sim *s, mx_tensor *const *inputs, size_t n_in, mx_tensor **outputs,
                        size_t n_out, mx_error *err);

/* A decoder taking input_ids [1, 1] and per layer past key/value [1, kv_heads, past_len,
 * head_dim], giving logits and the grown caches in the same order; each rank's caches hold
 * rank_kv_heads. */
typedef struct shard_decode_shape {
  int64_t layers, kv_heads, rank_kv_heads, head_dim;
  int64_t first_token;
} shard_decode_shape;
/* Greedy decode for `steps` steps of `full` (reference interpreter) and of its tp rank graphs on
 * simulated ranks, from empty caches: every rank's logits within rtol 1e-3 / atol 1e-4 of the
 * unsharded ones and the tokens equal (label starts each failure message). Takes full and
 * ranks[0..tp). */
void shard_check_greedy(mx_graph *full, mx_graph **ranks, int tp, const shard_decode_shape *shape, int steps,
                        const char *label);

#endif /* MIXRT_TESTS_SHARD_SUPPORT_H */
