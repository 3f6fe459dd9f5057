/* The vocabulary-split embedding of the sharding pass (graph/passes/shard.c): token ids at the
 * ends of the table read the same rows as the unsharded model, and an id outside
 * [-vocab, vocab) fails every rank's run naming the embedding and the id, as the unsharded
 * Gather does, before the rank reaches the embedding's AllReduce. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "graph/ir.h"
#include "support_shard.h"

#define TP 2

/* Inputs of one decode step from an empty cache: ids [1, 1] = token, then the caches. */
typedef struct step_inputs {
  size_t n;
  mx_tensor t[16];
} step_inputs;

static void step_inputs_init(step_inputs *in, const mx_llama_config *cfg, int64_t kv_heads, int64_t token) {
  in->n = 1 + 2 * (size_t)cfg->layers;
  cr_assert_leq(in->n, 16);
  cr_assert_eq(mx_tensor_alloc(MX_INT64, 2, (int64_t[]){1, 1}, &in->t[0]), MX_OK);
  *(int64_t *)in->t[0].data = token;
  for (size_t i = 1; i < in->n; i++)
    cr_assert_eq(
        mx_tensor_alloc(MX_FLOAT32, 4, (int64_t[]){1, kv_heads, 0, cfg->hidden / cfg->heads}, &in->t[i]),
        MX_OK);
}

static void step_inputs_free(step_inputs *in) {
  for (size_t i = 0; i < in->n; i++) mx_tensor_release(&in->t[i]);
}

static void outputs_free(mx_tensor *out, size_t n) {
  for (size_t i = 0; i < n; i++) mx_tensor_release(&out[i]);
}

/* Runs g (unsharded, or one rank's graph with its collectives in place) through the reference
 * interpreter; returns the status, err filled on failure. */
static mx_status run_step(mx_graph *g, const mx_llama_config *cfg, int64_t kv_heads, int64_t token,
                          mx_error *err) {
  step_inputs in;
  step_inputs_init(&in, cfg, kv_heads, token);
  mx_tensor out[16] = {0};
  mx_status st = mx_reference_run(g, in.t, in.n, out, in.n, err);
  outputs_free(out, in.n);
  step_inputs_free(&in);
  return st;
}

static mx_llama_config config(void) {
  mx_llama_config cfg;
  mx_llama_config_default(&cfg);
  return cfg;
}

/* The name of the unsharded model's embedding node, read off the message of an id past the end. */
static void embedding_name(const mx_llama_config *cfg, char *name, size_t cap) {
  mx_graph *full = shard_test_llama(cfg);
  cr_assert(full);
  mx_error err = {0};
  cr_assert_neq(run_step(full, cfg, cfg->kv_heads, cfg->vocab, &err), MX_OK);
  const char *q = strstr(err.message, "node '");
  cr_assert(q, "%s", err.message);
  q += 6;
  const char *end = strchr(q, '\'');
  cr_assert(end && (size_t)(end - q) < cap, "%s", err.message);
  memcpy(name, q, (size_t)(end - q));
  name[end - q] = '\0';
  mx_graph_destroy(full);
}

/* Every rank's graph, collectives in place and no communicator, refuses the id at the
 * embedding: were the id let through, the run would reach the AllReduce and fail there asking
 * for a communicator (under MPI: wait in it while another rank had failed). */
static void check_refused(int64_t token) {
  mx_llama_config cfg = config();
  char embed[128];
  embedding_name(&cfg, embed, sizeof embed);
  char id[32];
  snprintf(id, sizeof id, "index %lld ", (long long)token);
  for (int r = 0; r < TP; r++) {
    mx_error err = {0};
    mx_graph *g = shard_test_rank(&cfg, TP, r, NULL, &err);
    cr_assert(g, "%s", err.message);
    cr_assert_neq(run_step(g, &cfg, cfg.kv_heads / TP, token, &err), MX_OK, "rank %d", r);
    cr_expect(strstr(err.message, embed) && strstr(err.message, id) && strstr(err.message, "out of range") &&
                  !strstr(err.message, "communicator"),
              "rank %d, id %lld: %s", r, (long long)token, err.message);
    mx_graph_destroy(g);
  }
}

Test(shard_vocab, id_past_the_end_refused_on_every_rank) { check_refused(config().vocab); }

Test(shard_vocab, id_far_past_the_end_refused_on_every_rank) { check_refused(1000003); }

Test(shard_vocab, id_before_the_start_refused_on_every_rank) { check_refused(-config().vocab - 1); }

/* The first and last rows of each rank's range, and the most negative id, give the unsharded
 * model's logits on simulated ranks. */
Test(shard_vocab, ids_at_the_range_ends_read_the_right_rows) {
  mx_llama_config cfg = config();
  const int64_t local = cfg.vocab / TP;
  const int64_t tokens[] = {0, local - 1, local, cfg.vocab - 1, -1, -cfg.vocab, -local - 1};
  mx_graph *full = shard_test_llama(&cfg);
  cr_assert(full);
  mx_graph *ranks[TP];
  mx_error err = {0};
  for (int r = 0; r < TP; r++) {
    ranks[r] = shard_test_rank(&cfg, TP, r, NULL, &err);
    cr_assert(ranks[r], "%s", err.message);
  }
  shard_sim *sim = shard_sim_create(ranks, TP);
  cr_assert(sim);
  for (size_t k = 0; k < sizeof tokens / sizeof tokens[0]; k++) {
    step_inputs full_in, rank_in;
    step_inputs_init(&full_in, &cfg, cfg.kv_heads, tokens[k]);
    step_inputs_init(&rank_in, &cfg, cfg.kv_heads / TP, tokens[k]);
    mx_tensor full_out[16] = {0}, rank_out[TP][16];
    memset(rank_out, 0, sizeof rank_out);
    mx_tensor *rin[TP], *rout[TP];
    for (int r = 0; r < TP; r++) {
      rin[r] = rank_in.t;
      rout[r] = rank_out[r];
    }
    cr_assert_eq(mx_reference_run(full, full_in.t, full_in.n, full_out, full_in.n, &err), MX_OK, "%s",
                 err.message);
    cr_assert_eq(shard_sim_run(sim, rin, rank_in.n, rout, rank_in.n, &err), MX_OK, "%s", err.message);
    for (int r = 0; r < TP; r++) {
      char why[256];
      cr_expect(mx_tensor_allclose(&rank_out[r][0], &full_out[0], 1e-3, 1e-4, why, sizeof why),
                "id %lld rank %d: %s", (long long)tokens[k], r, why);
      outputs_free(rank_out[r], rank_in.n);
    }
    outputs_free(full_out, full_in.n);
    step_inputs_free(&full_in);
    step_inputs_free(&rank_in);
  }
  shard_sim_destroy(sim);
  mx_graph_destroy(full);
}
