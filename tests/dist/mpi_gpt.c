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
#include <time.h>

#include "graph/passes/shard.h"
#include "mixrt/dist.h"
#include "mixrt/mixrt.h"

#define STEPS 64   /* greedy steps, the prefill included */
#define MAX_IO 64  /* model inputs/outputs this test handles */
#define PREFILL 4  /* prompt tokens of the first step */

static int g_rank, g_size;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int fail(const char *what, const char *msg) {
  printf("FAIL rank %d: %s: %s\n", g_rank, what, msg);
  fflush(stdout);
  return 1;
}

/* The model of `path` folded and fused as a session compiles it; sharded for tp ranks when
 * tp > 0. seq and past_len stay symbols: the prefill and the decode steps share the graph. */
static mx_graph *gpt(const char *path, int tp, int rank, mx_error *err) {
  mx_graph *g = NULL;
  if (mx_onnx_load_file(path, &g, err) != MX_OK) return NULL;
  mx_fuse_report fuse;
  mx_status st = mx_graph_optimize(g, NULL);
  if (st == MX_OK) st = mx_graph_fuse(g, NULL, &fuse);
  if (st == MX_OK) st = mx_graph_optimize(g, NULL);
  if (st == MX_OK && tp > 0) st = mx__shard_graph(g, tp, rank, NULL, err);
  if (st != MX_OK) {
    if (!err->message[0]) snprintf(err->message, sizeof err->message, "%s", mx_graph_last_error(g));
    mx_graph_destroy(g);
    return NULL;
  }
  return g;
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
  mx_session_options o;
  mx_session_options_init(&o);
  if (mx_session_create(&o, &d->s, err) != MX_OK) {
    mx_graph_destroy(g);
    return 1;
  }
  mx_status st = mx_session_load_graph(d->s, g);
  if (st == MX_OK && c) st = mx_session_set_comm(d->s, c);
  if (st != MX_OK) {
    snprintf(err->message, sizeof err->message, "%s", mx_session_last_error(d->s));
    return 1;
  }
  return 0;
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

int main(int argc, char **argv) {
  mx_comm *c = NULL;
  mx_error err = {0};
  if (mx_comm_create_world(&c, &err) != MX_OK) return fail("mx_comm_create_world", err.message);
  g_rank = mx_comm_rank(c);
  g_size = mx_comm_size(c);
  if (argc < 2) return fail("usage", "mpi_gpt MODEL.onnx (bench/zoo/export.py DIR --only gpt_kv)");
  mx_graph *shard = gpt(argv[1], g_size, g_rank, &err);
  if (!shard) return fail("shard", err.message);
  decoder rank_dec, full_dec;
  if (decoder_init(&rank_dec, shard, c, &err)) return fail("load the shard", err.message);
  if (g_rank == 0) {
    mx_graph *full = gpt(argv[1], 0, 0, &err);
    if (!full || decoder_init(&full_dec, full, NULL, &err)) return fail("the unsharded model", err.message);
  }
  /* A fixed prompt, then one token a step. */
  int64_t tokens[PREFILL] = {3, 17, 42, 7}, n = PREFILL;
  int bad = 0, distinct = 0;
  unsigned char seen[4096] = {0}; /* tokens picked so far (the zoo GPT's vocabulary is 256) */
  double rank_time = 0, full_time = 0;
  for (int step = 0; step < STEPS && !bad; step++) {
    double t0 = now_s();
    if (decoder_step(&rank_dec, tokens, n) != MX_OK) return fail("sharded step", mx_session_last_error(rank_dec.s));
    double t1 = now_s();
    rank_time += t1 - t0;
    int64_t next = next_token(&rank_dec.out[0]);
    if (g_rank == 0) {
      if (decoder_step(&full_dec, tokens, n) != MX_OK)
        return fail("unsharded step", mx_session_last_error(full_dec.s));
      full_time += now_s() - t1;
      char why[256];
      if (!mx_tensor_allclose(&rank_dec.out[0], &full_dec.out[0], 1e-3, 1e-4, why, sizeof why)) {
        printf("FAIL rank 0: tp %d step %d logits differ from one process: %s\n", g_size, step, why);
        bad = 1;
      } else if (next_token(&full_dec.out[0]) != next) {
        printf("FAIL rank 0: tp %d step %d token %lld, one process %lld\n", g_size, step, (long long)next,
               (long long)next_token(&full_dec.out[0]));
        bad = 1;
      }
    }
    if (next >= 0 && next < (int64_t)sizeof seen && !seen[next]++) distinct++;
    tokens[0] = next;
    n = 1;
  }
  if (g_rank == 0 && !bad)
    printf(
        "ok rank 0: tp %d torch GPT decode (prefill %d, then %d greedy steps) equals one process (logits "
        "within 1e-3/1e-4, same tokens: %d distinct, last %lld); %.2f ms per sharded step, one process %.2f ms "
        "(loaded run: noisy)\n",
        g_size, PREFILL, STEPS - 1, distinct, (long long)tokens[0], rank_time * 1e3 / STEPS, full_time * 1e3 / STEPS);
  else if (!bad)
    printf("ok rank %d: tp %d decoded %d steps with its shard of the torch GPT\n", g_rank, g_size, STEPS);
  fflush(stdout);
  /* Leaving without MPI_Finalize makes mpirun end the other ranks now rather than after their
   * collective timeout. */
  if (bad) return 1;
  decoder_free(&rank_dec);
  if (g_rank == 0) decoder_free(&full_dec);
  mx_comm_release(c);
  mx_comm_finalize_mpi();
  return 0;
}
