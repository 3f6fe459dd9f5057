/* The sharded llama decode step over MPI: `mpirun -np N mpi_llama` shards the tiny llama
 * (graph/passes/shard.h) for N ranks, each rank loads its shard into a session with the world
 * communicator, and all ranks decode greedily for 64 steps, feeding back their own KV cache
 * (the rank's kv-heads). The logits end in an AllGather, so every rank sees all of them and
 * picks the same token. Rank 0 also runs the unsharded model in a session of its own: every
 * step's logits must agree within the conformance tolerances and the tokens exactly. Then every
 * rank feeds a token id past the vocabulary, which each must refuse at the embedding without
 * waiting in a collective. Prints "ok rank R: ..." / "FAIL rank R: ..." lines for
 * tests/dist/run_mpi.sh (two ok lines per rank), plus rank 0's time split (this rank's step time,
 * of which the collectives). An argument names another llama preset ("small"), or the kv-heads of
 * the tiny one ("kv=2": fewer than 4 ranks, each kv-head then held by the ranks sharing it). Whatever fails,
 * the sessions and caches are freed before the program ends (mpi_finish). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_support.h"

#define STEPS 64

/* The llama of cfg folded and fused as a session compiles it; sharded for tp ranks when tp > 0. */
static mx_graph *llama(const mx_llama_config *cfg, int tp, int rank, mx_error *err) {
  mx_graph *g = NULL;
  if (mx_model_llama(cfg, &g, err) != MX_OK) return NULL;
  return mpi_prepare(g, tp, rank, err);
}

static int64_t argmax(const mx_tensor *t) {
  int64_t n = 0, best = 0;
  (void)mx_tensor_numel(t, &n);
  const float *d = t->data;
  for (int64_t i = 1; i < n; i++)
    if (d[i] > d[best]) best = i;
  return best;
}

/* One model's inputs and outputs over the steps: ids, then the caches fed back. */
typedef struct decoder {
  mx_session *s;
  size_t n_io;
  mx_tensor in[64], out[64];
} decoder;

static mx_status decoder_init(decoder *d, mx_session *s, const mx_llama_config *cfg, int64_t kv_heads) {
  memset(d, 0, sizeof *d);
  d->s = s;
  d->n_io = 1 + 2 * (size_t)cfg->layers;
  const int64_t hd = cfg->head_dim ? cfg->head_dim : cfg->hidden / cfg->heads;
  for (size_t i = 1; i < d->n_io; i++) {
    mx_status st = mx_tensor_alloc(MX_FLOAT32, 4, (int64_t[]){1, kv_heads, 0, hd}, &d->in[i]);
    if (st != MX_OK) return st;
  }
  return MX_OK;
}

static mx_status decoder_step(decoder *d, int64_t token) {
  mx_tensor ids;
  mx_status st = mx_tensor_alloc(MX_INT64, 2, (int64_t[]){1, 1}, &ids);
  if (st != MX_OK) return st;
  *(int64_t *)ids.data = token;
  d->in[0] = ids;
  mx_tensor_release(&d->out[0]);
  memset(d->out, 0, sizeof d->out);
  st = mx_session_run(d->s, d->in, d->n_io, d->out, d->n_io);
  mx_tensor_release(&ids);
  for (size_t i = 1; st == MX_OK && i < d->n_io; i++) {
    mx_tensor_release(&d->in[i]);
    d->in[i] = d->out[i];
    memset(&d->out[i], 0, sizeof d->out[i]);
  }
  return st;
}

static void decoder_free(decoder *d) {
  for (size_t i = 1; i < d->n_io; i++) mx_tensor_release(&d->in[i]);
  mx_tensor_release(&d->out[0]);
  mx_session_destroy(d->s);
}

/* An id past the vocabulary, on every rank: each refuses it at the embedding, naming the node
 * and the id, before the embedding's AllReduce, so no rank is left waiting in it for the others
 * (a short timeout makes such a wait a failure that says so, not a hang). */
static int check_id_out_of_range(mx_comm *c, decoder *d, int64_t vocab) {
  mx_comm_set_timeout_ms(c, 5000);
  double t0 = mpi_now_s();
  mx_status st = decoder_step(d, vocab);
  double sec = mpi_now_s() - t0;
  const char *msg = mx_session_last_error(d->s);
  char id[48];
  snprintf(id, sizeof id, "index %lld ", (long long)vocab);
  if (st == MX_OK) return mpi_fail("token id past the vocabulary", "the step ran");
  if (!strstr(msg, "'embed") || !strstr(msg, id) || strstr(msg, "timed out"))
    return mpi_fail("token id past the vocabulary: not refused at the embedding", msg);
  printf("ok rank %d: tp %d token id %lld refused at the embedding in %.3f s: %s\n", mpi_rank, mpi_size,
         (long long)vocab, sec, msg);
  return 0;
}

/* Decodes STEPS greedy steps with this rank's shard (rank 0 also with the whole model) and then
 * tries an id past the vocabulary. The decoders are freed by the caller, whatever happens. */
static int run(mx_comm *c, const mx_llama_config *cfg, decoder *rank_dec, decoder *full_dec) {
  mx_error err = {0};
  mx_graph *shard = llama(cfg, mpi_size, mpi_rank, &err);
  if (!shard) return mpi_fail("shard", err.message);
  mx_session *ss = mpi_session(shard, c, &err);
  if (!ss) return mpi_fail("load the shard", err.message);
  /* The rank's kv-heads: its share, or the one it shares with others when there are fewer. */
  int64_t rank_kv = cfg->kv_heads < mpi_size ? 1 : cfg->kv_heads / mpi_size;
  if (decoder_init(rank_dec, ss, cfg, rank_kv) != MX_OK) return mpi_fail("caches", "out of memory");
  if (mpi_rank == 0) {
    mx_graph *full = llama(cfg, 0, 0, &err);
    mx_session *fs = full ? mpi_session(full, NULL, &err) : NULL;
    if (!fs) return mpi_fail("the unsharded model", err.message);
    if (decoder_init(full_dec, fs, cfg, cfg->kv_heads) != MX_OK) return mpi_fail("caches", "out of memory");
  }
  uint64_t ex0, bytes0, ns0; /* the model-hash exchange of mx_session_set_comm is not a step's */
  mx_comm_get_stats(c, &ex0, &bytes0, &ns0);
  int64_t token = 1;
  double rank_time = 0, full_time = 0;
  for (int step = 0; step < STEPS; step++) {
    double t0 = mpi_now_s();
    if (decoder_step(rank_dec, token) != MX_OK) return mpi_fail("sharded step", mx_session_last_error(ss));
    double t1 = mpi_now_s();
    rank_time += t1 - t0;
    int64_t next = argmax(&rank_dec->out[0]);
    if (mpi_rank == 0) {
      if (decoder_step(full_dec, token) != MX_OK)
        return mpi_fail("unsharded step", mx_session_last_error(full_dec->s));
      full_time += mpi_now_s() - t1;
      if (!mpi_same_step(step, &rank_dec->out[0], &full_dec->out[0], next, argmax(&full_dec->out[0])))
        return 1;
    }
    token = next;
  }
  if (mpi_rank == 0) {
    printf(
        "ok rank 0: tp %d llama decode over %d greedy steps equals one process (logits within 1e-3/1e-4, "
        "same tokens; last token %lld)\n",
        mpi_size, STEPS, (long long)token);
    uint64_t exchanges, bytes, ns;
    mx_comm_get_stats(c, &exchanges, &bytes, &ns);
    exchanges -= ex0;
    bytes -= bytes0;
    ns -= ns0;
    /* The exchange time includes waiting for the slowest rank; rank 0 also runs the unsharded
     * model between steps, so here it is mostly the others catching up. */
    printf(
        "rank 0: per sharded step %.1f exchanges, %.0f bytes sent, %.3f ms in exchanges incl. waiting (%.0f "
        "%% of the step)\n",
        (double)exchanges / STEPS, (double)bytes / STEPS, (double)ns / 1e6 / STEPS,
        100.0 * (double)ns / 1e9 / rank_time);
    mx_session_stats total;
    if (mx_session_get_stats(ss, NULL, &total) == MX_OK)
      printf(
          "rank 0: %.2f ms per sharded step (one process: %.2f ms), %llu static executes and %llu dynamic "
          "launches over %d steps (loaded run: noisy)\n",
          rank_time * 1e3 / STEPS, full_time * 1e3 / STEPS, (unsigned long long)total.static_executes,
          (unsigned long long)total.dynamic_launches, STEPS);
  } else {
    printf("ok rank %d: tp %d decoded %d steps with its shard\n", mpi_rank, mpi_size, STEPS);
  }
  fflush(stdout);
  return check_id_out_of_range(c, rank_dec, cfg->vocab);
}

int main(int argc, char **argv) {
  mx_comm *c = mpi_start();
  if (!c) return 1;
  mx_llama_config cfg;
  mx_llama_config_default(&cfg);
  cfg.kv_heads = 4; /* kv-heads split over 2 or 4 ranks */
  /* `mpi_llama small`: the preset `mixrt demo` runs, for measurements (4 kv-heads too). */
  if (argc > 1 && !strncmp(argv[1], "kv=", 3))
    cfg.kv_heads = atoi(argv[1] + 3);
  else if (argc > 1 && !mx_llama_config_preset(&cfg, argv[1]))
    return mpi_finish(c, mpi_fail("preset", argv[1]));
  decoder rank_dec = {0}, full_dec = {0};
  int status = run(c, &cfg, &rank_dec, &full_dec);
  decoder_free(&rank_dec);
  decoder_free(&full_dec);
  return mpi_finish(c, status);
}
