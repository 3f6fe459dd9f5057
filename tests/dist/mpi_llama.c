/* The sharded llama decode step over MPI: `mpirun -np N mpi_llama` shards the tiny llama
 * (graph/passes/shard.h) for N ranks, each rank loads its shard into a session with the world
 * communicator, and all ranks decode greedily for 64 steps, feeding back their own KV cache
 * (the rank's kv-heads). The logits end in an AllGather, so every rank sees all of them and
 * picks the same token. Rank 0 also runs the unsharded model in a session of its own: every
 * step's logits must agree within the conformance tolerances and the tokens exactly. Prints
 * "ok rank R: ..." / "FAIL rank R: ..." lines for tests/dist/run_mpi.sh, plus rank 0's time
 * split (this rank's step time, of which the collectives). An argument names another llama
 * preset ("small"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "graph/passes/shard.h"
#include "mixrt/dist.h"
#include "mixrt/mixrt.h"

#define STEPS 64

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

/* The tiny llama folded and fused as a session compiles it; sharded for tp ranks when tp > 0. */
static mx_graph *llama(const mx_llama_config *cfg, int tp, int rank, mx_error *err) {
  mx_graph *g = NULL;
  if (mx_model_llama(cfg, &g, err) != MX_OK) return NULL;
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

static mx_session *session_of(mx_graph *g, mx_comm *c, mx_error *err) {
  mx_session_options o;
  mx_session_options_init(&o);
  mx_session *s = NULL;
  if (mx_session_create(&o, &s, err) != MX_OK) return NULL;
  mx_status st = mx_session_load_graph(s, g);
  if (st == MX_OK && c) st = mx_session_set_comm(s, c);
  if (st != MX_OK) {
    snprintf(err->message, sizeof err->message, "%s", mx_session_last_error(s));
    mx_session_destroy(s);
    return NULL;
  }
  return s;
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

int main(int argc, char **argv) {
  mx_comm *c = NULL;
  mx_error err = {0};
  if (mx_comm_create_world(&c, &err) != MX_OK) return fail("mx_comm_create_world", err.message);
  g_rank = mx_comm_rank(c);
  g_size = mx_comm_size(c);
  mx_llama_config cfg;
  mx_llama_config_default(&cfg);
  cfg.kv_heads = 4; /* kv-heads split over 2 or 4 ranks */
  /* `mpi_llama small`: the preset `mixrt demo` runs, for measurements (4 kv-heads too). */
  if (argc > 1 && !mx_llama_config_preset(&cfg, argv[1])) return fail("preset", argv[1]);
  mx_graph *shard = llama(&cfg, g_size, g_rank, &err);
  if (!shard) return fail("shard", err.message);
  mx_session *ss = session_of(shard, c, &err);
  if (!ss) return fail("load the shard", err.message);
  decoder rank_dec, full_dec = {0};
  if (decoder_init(&rank_dec, ss, &cfg, cfg.kv_heads / g_size) != MX_OK)
    return fail("caches", "out of memory");
  if (g_rank == 0) {
    mx_graph *full = llama(&cfg, 0, 0, &err);
    mx_session *fs = full ? session_of(full, NULL, &err) : NULL;
    if (!fs || decoder_init(&full_dec, fs, &cfg, cfg.kv_heads) != MX_OK)
      return fail("the unsharded model", err.message);
  }
  uint64_t ex0, bytes0, ns0; /* the model-hash exchange of mx_session_set_comm is not a step's */
  mx_comm_get_stats(c, &ex0, &bytes0, &ns0);
  int64_t token = 1;
  int bad = 0;
  double rank_time = 0, full_time = 0;
  mx_session_stats total;
  for (int step = 0; step < STEPS && !bad; step++) {
    double t0 = now_s();
    if (decoder_step(&rank_dec, token) != MX_OK) return fail("sharded step", mx_session_last_error(ss));
    double t1 = now_s();
    rank_time += t1 - t0;
    int64_t next = argmax(&rank_dec.out[0]);
    if (g_rank == 0) {
      if (decoder_step(&full_dec, token) != MX_OK)
        return fail("unsharded step", mx_session_last_error(full_dec.s));
      full_time += now_s() - t1;
      char why[256];
      if (!mx_tensor_allclose(&rank_dec.out[0], &full_dec.out[0], 1e-3, 1e-4, why, sizeof why)) {
        printf("FAIL rank 0: tp %d step %d logits differ from one process: %s\n", g_size, step, why);
        bad = 1;
      } else if (argmax(&full_dec.out[0]) != next) {
        printf("FAIL rank 0: tp %d step %d token %lld, one process %lld\n", g_size, step, (long long)next,
               (long long)argmax(&full_dec.out[0]));
        bad = 1;
      }
    }
    token = next;
  }
  if (g_rank == 0 && !bad) {
    printf(
        "ok rank 0: tp %d llama decode over %d greedy steps equals one process (logits within 1e-3/1e-4, "
        "same "
        "tokens; last token %lld)\n",
        g_size, STEPS, (long long)token);
    uint64_t exchanges, bytes, ns;
    mx_comm_get_stats(c, &exchanges, &bytes, &ns);
    exchanges -= ex0;
    bytes -= bytes0;
    ns -= ns0;
    /* The exchange time includes waiting for the slowest rank; rank 0 also runs the unsharded
     * model between steps, so here it is mostly the others catching up. */
    printf(
        "rank 0: per sharded step %.1f exchanges, %.0f bytes sent, %.3f ms in exchanges incl. waiting (%.0f "
        "%% "
        "of the step)\n",
        (double)exchanges / STEPS, (double)bytes / STEPS, (double)ns / 1e6 / STEPS,
        100.0 * (double)ns / 1e9 / rank_time);
    if (mx_session_get_stats(ss, NULL, &total) == MX_OK)
      printf(
          "rank 0: %.2f ms per sharded step (one process: %.2f ms), %llu static executes and %llu dynamic "
          "launches over %d steps (loaded run: noisy)\n",
          rank_time * 1e3 / STEPS, full_time * 1e3 / STEPS, (unsigned long long)total.static_executes,
          (unsigned long long)total.dynamic_launches, STEPS);
  } else if (!bad) {
    printf("ok rank %d: tp %d decoded %d steps with its shard\n", g_rank, g_size, STEPS);
  }
  fflush(stdout);
  decoder_free(&rank_dec);
  if (g_rank == 0) decoder_free(&full_dec);
  mx_comm_release(c);
  mx_comm_finalize_mpi();
  return bad;
}
