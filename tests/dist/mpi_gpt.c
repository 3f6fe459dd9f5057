/* The torch-exported GPT decoder sharded over MPI: `mpirun -np N mpi_gpt MODEL.onnx` loads the
 * zoo's gpt_kv.onnx (bench/zoo/export.py: input_ids [1, seq] and per layer past_key_i /
 * past_value_i [1, heads, past_len, d]; logits [1, seq, vocab] and present_key_i /
 * present_value_i), optimizes and fuses it as a session compiles it, shards it for this rank
 * (graph/passes/shard.h) and loads the shard into a session with the world communicator. All
 * ranks prefill a few tokens, then decode greedily one token a step, feeding each present_* back
 * as the past_* of the same name (the rank's heads of the cache). The logits end in an AllGather,
 * so every rank picks the same token. Rank 0 also runs the unsharded model: every step's logits
 * must agree within the conformance tolerances and the tokens exactly. Prints "ok rank R: ..." /
 * "FAIL rank R: ..." lines for tests/dist/run_mpi.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_support.h"

#define STEPS   64 /* greedy steps, the prefill included */
#define MAX_IO  64 /* model inputs/outputs this test handles */
#define PREFILL 4  /* prompt tokens of the first step */

/* The model of `path` folded and fused as a session compiles it; sharded for tp ranks when
 * tp > 0. seq and past_len stay symbols: the prefill and the decode steps share the graph. */
static mx_graph *gpt(const char *path, int tp, int rank, mx_error *err) {
  mx_graph *g = NULL;
  if (mx_onnx_load_file(path, &g, err) != MX_OK) return NULL;
  return mpi_prepare(g, tp, rank, err);
}

/* One model's step inputs and outputs. feed[i] is the output that becomes input i at the next
 * step (the present_* named like input i's past_*), or -1 for input_ids. */
typedef struct decoder {
  mx_session *s;
  size_t n_in, n_out;
  int feed[MAX_IO];
  mx_tensor in[MAX_IO], out[MAX_IO];
} decoder;

/* Matches the graph's inputs to its outputs by name and allocates empty caches (past_len 0)
 * with the shapes the graph declares for them (heads already this rank's share). Then loads g
 * into a session (which owns it from there), attached to c when c is not NULL. */
static int decoder_init(decoder *d, mx_graph *g, mx_comm *c, mx_error *err) {
  memset(d, 0, sizeof *d);
  d->n_in = mx_graph_input_count(g);
  d->n_out = mx_graph_output_count(g);
  if (d->n_in > MAX_IO || d->n_out > MAX_IO || d->n_in < 1) {
    snprintf(err->message, sizeof err->message, "%zu inputs, %zu outputs: not the GPT decoder", d->n_in,
             d->n_out);
    d->n_in = d->n_out = 0; /* nothing to free */
    mx_graph_destroy(g);
    return 1;
  }
  for (size_t i = 0; i < d->n_in; i++) {
    mx_value_id v = mx_graph_input(g, i);
    const char *name = mx_graph_value_name(g, v);
    d->feed[i] = -1;
    if (strcmp(name, "input_ids") == 0) {
      if (i != 0) break;
      continue;
    }
    if (strncmp(name, "past_", 5) != 0) break;
    char want[128];
    snprintf(want, sizeof want, "present_%s", name + 5);
    for (size_t o = 0; o < d->n_out; o++)
      if (strcmp(mx_graph_value_name(g, mx_graph_output(g, o)), want) == 0) d->feed[i] = (int)o;
    mx_shape sh;
    if (d->feed[i] < 0 || !mx_graph_value_shape(g, v, &sh) || sh.rank != 4) break;
    int64_t dims[4];
    for (int k = 0; k < 4; k++) dims[k] = k == 2 ? 0 : sh.dims[k];
    if (dims[0] < 0 || dims[1] < 0 || dims[3] < 0) break;
    if (mx_tensor_alloc(MX_FLOAT32, 4, dims, &d->in[i]) != MX_OK) break;
  }
  for (size_t i = 1; i < d->n_in; i++)
    if (!d->in[i].data && d->feed[i] < 0) {
      snprintf(err->message, sizeof err->message,
               "input %zu (%s) is not a past_* cache with a present_* output of known heads", i,
               mx_graph_value_name(g, mx_graph_input(g, i)));
      mx_graph_destroy(g);
      return 1;
    }
  d->s = mpi_session(g, c, err);
  return d->s ? 0 : 1;
}

/* Runs one step on tokens[0..n) (the prompt, or the last token) and feeds the caches back. */
static mx_status decoder_step(decoder *d, const int64_t *tokens, int64_t n) {
  mx_tensor ids;
  mx_status st = mx_tensor_alloc(MX_INT64, 2, (int64_t[]){1, n}, &ids);
  if (st != MX_OK) return st;
  memcpy(ids.data, tokens, (size_t)n * sizeof *tokens);
  d->in[0] = ids;
  for (size_t o = 0; o < d->n_out; o++) mx_tensor_release(&d->out[o]);
  memset(d->out, 0, sizeof d->out);
  st = mx_session_run(d->s, d->in, d->n_in, d->out, d->n_out);
  mx_tensor_release(&ids);
  memset(&d->in[0], 0, sizeof d->in[0]);
  for (size_t i = 1; st == MX_OK && i < d->n_in; i++) {
    mx_tensor_release(&d->in[i]);
    d->in[i] = d->out[d->feed[i]];
    memset(&d->out[d->feed[i]], 0, sizeof d->out[0]);
  }
  return st;
}

static void decoder_free(decoder *d) {
  for (size_t i = 1; i < d->n_in; i++) mx_tensor_release(&d->in[i]);
  for (size_t o = 0; o < d->n_out; o++) mx_tensor_release(&d->out[o]);
  mx_session_destroy(d->s);
}

/* The greedy token: argmax over the vocabulary at the last position of logits [1, seq, vocab]. */
static int64_t next_token(const mx_tensor *logits) {
  const int64_t vocab = logits->dims[logits->rank - 1];
  int64_t n = 0;
  (void)mx_tensor_numel(logits, &n);
  const float *row = (const float *)logits->data + (n - vocab);
  int64_t best = 0;
  for (int64_t i = 1; i < vocab; i++)
    if (row[i] > row[best]) best = i;
  return best;
}

/* Prefills and decodes STEPS greedy steps with this rank's shard (rank 0 also with the whole
 * model). The decoders are freed by the caller, whatever happens. */
static int run(const char *path, mx_comm *c, decoder *rank_dec, decoder *full_dec) {
  mx_error err = {0};
  mx_graph *shard = gpt(path, mpi_size, mpi_rank, &err);
  if (!shard) return mpi_fail("shard", err.message);
  if (decoder_init(rank_dec, shard, c, &err)) return mpi_fail("load the shard", err.message);
  if (mpi_rank == 0) {
    mx_graph *full = gpt(path, 0, 0, &err);
    if (!full || decoder_init(full_dec, full, NULL, &err))
      return mpi_fail("the unsharded model", err.message);
  }
  /* A fixed prompt, then one token a step. */
  int64_t tokens[PREFILL] = {3, 17, 42, 7}, n = PREFILL;
  int distinct = 0;
  unsigned char seen[4096] = {0}; /* tokens picked so far (the zoo GPT's vocabulary is 256) */
  double rank_time = 0, full_time = 0;
  for (int step = 0; step < STEPS; step++) {
    double t0 = mpi_now_s();
    if (decoder_step(rank_dec, tokens, n) != MX_OK)
      return mpi_fail("sharded step", mx_session_last_error(rank_dec->s));
    double t1 = mpi_now_s();
    rank_time += t1 - t0;
    int64_t next = next_token(&rank_dec->out[0]);
    if (mpi_rank == 0) {
      if (decoder_step(full_dec, tokens, n) != MX_OK)
        return mpi_fail("unsharded step", mx_session_last_error(full_dec->s));
      full_time += mpi_now_s() - t1;
      if (!mpi_same_step(step, &rank_dec->out[0], &full_dec->out[0], next, next_token(&full_dec->out[0])))
        return 1;
    }
    if (next >= 0 && next < (int64_t)sizeof seen && !seen[next]++) distinct++;
    tokens[0] = next;
    n = 1;
  }
  if (mpi_rank == 0)
    printf(
        "ok rank 0: tp %d torch GPT decode (prefill %d, then %d greedy steps) equals one process (logits "
        "within 1e-3/1e-4, same tokens: %d distinct, last %lld); %.2f ms per sharded step, one process %.2f "
        "ms "
        "(loaded run: noisy)\n",
        mpi_size, PREFILL, STEPS - 1, distinct, (long long)tokens[0], rank_time * 1e3 / STEPS,
        full_time * 1e3 / STEPS);
  else
    printf("ok rank %d: tp %d decoded %d steps with its shard of the torch GPT\n", mpi_rank, mpi_size, STEPS);
  return 0;
}

int main(int argc, char **argv) {
  mx_comm *c = mpi_start();
  if (!c) return 1;
  if (argc < 2)
    return mpi_finish(c, mpi_fail("usage", "mpi_gpt MODEL.onnx (bench/zoo/export.py DIR --only gpt_kv)"));
  decoder rank_dec = {0}, full_dec = {0};
  int status = run(argv[1], c, &rank_dec, &full_dec);
  decoder_free(&rank_dec);
  decoder_free(&full_dec);
  return mpi_finish(c, status);
}
