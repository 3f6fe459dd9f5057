/* `--tp N` of `mixrt run` and `mixrt demo`: this rank's shard, the world communicator, the
 * per-rank time split and the demo's check against one process (tools/cmd_tp.h). The MPI parts
 * are built only with libmixrt_mpi (MIXRT_CLI_HAVE_MPI); without it --tp is refused. */
#include "tools/cmd_tp.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graph/passes/shard.h"
#include "mixrt/reference.h"
#include "tools/bench.h"
#include "tools/commands.h"

#ifdef MIXRT_CLI_HAVE_MPI
#include <mpi.h>

#include "mixrt/dist.h"

struct mx_cli_tp {
  mx_comm *comm;
  int rank, size;
  uint64_t ex0, bytes0, ns0; /* the counters when the session got the communicator */
};

int mx_cli_tp_begin(const char *cmd, int64_t tp, mx_cli_tp **out) {
  *out = NULL;
  mx_cli_tp *t = calloc(1, sizeof *t);
  if (!t) return mx_cli_runtime_error(cmd, "out of memory");
  mx_error err = {0};
  if (mx_comm_create_world(&t->comm, &err) != MX_OK) {
    free(t);
    return mx_cli_runtime_error(cmd, "--tp %lld: joining the MPI world: %s", (long long)tp, err.message);
  }
  t->rank = mx_comm_rank(t->comm);
  t->size = mx_comm_size(t->comm);
  if (t->size != tp) {
    int size = t->size;
    mx_cli_tp_end(t);
    return mx_cli_usage_error(cmd,
                              "--tp %lld but the MPI world has %d rank%s: start it with `mpirun -np %lld "
                              "mixrt %s ... --tp %lld`",
                              (long long)tp, size, size == 1 ? "" : "s", (long long)tp, cmd, (long long)tp);
  }
  if (t->rank != 0) { /* one copy of the outputs: rank 0's */
    fflush(stdout);
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) {
      dup2(null, STDOUT_FILENO);
      close(null);
    }
  }
  *out = t;
  return MX_EXIT_OK;
}

int mx_cli_tp_rank(const mx_cli_tp *t) { return t ? t->rank : 0; }
int mx_cli_tp_size(const mx_cli_tp *t) { return t ? t->size : 1; }

int mx_cli_tp_attach(const char *cmd, mx_cli_tp *t, mx_session *s) {
  if (mx_session_set_comm(s, t->comm) != MX_OK)
    return mx_cli_runtime_error(cmd, "rank %d: attaching the communicator: %s", t->rank,
                                mx_session_last_error(s));
  mx_comm_get_stats(t->comm, &t->ex0, &t->bytes0, &t->ns0);
  return MX_EXIT_OK;
}

/* What each rank sends rank 0 for the split. */
enum { SPLIT_STEP_NS, SPLIT_EXCHANGE_NS, SPLIT_EXCHANGES, SPLIT_BYTES, SPLIT_FIELDS };

void mx_cli_tp_report(const mx_cli_tp *t, uint64_t steps_ns, int64_t steps) {
  uint64_t ex, bytes, ns;
  mx_comm_get_stats(t->comm, &ex, &bytes, &ns);
  double mine[SPLIT_FIELDS] = {(double)steps_ns, (double)(ns - t->ns0), (double)(ex - t->ex0),
                               (double)(bytes - t->bytes0)};
  double *all = t->rank == 0 ? calloc((size_t)t->size * SPLIT_FIELDS, sizeof *all) : NULL;
  double dummy[SPLIT_FIELDS];
  MPI_Gather(mine, SPLIT_FIELDS, MPI_DOUBLE, all ? all : dummy, SPLIT_FIELDS, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  if (t->rank != 0 || !all) return;
  double transfer = all[SPLIT_EXCHANGE_NS];
  for (int r = 1; r < t->size; r++)
    if (all[r * SPLIT_FIELDS + SPLIT_EXCHANGE_NS] < transfer)
      transfer = all[r * SPLIT_FIELDS + SPLIT_EXCHANGE_NS];
  const double n = steps > 0 ? (double)steps : 1.0;
  printf(
      "tensor parallel: %d rank%s; per-rank time split per step (communication: the shortest time any rank "
      "spent in exchanges; waiting: this rank's exchange time beyond it):\n",
      t->size, t->size == 1 ? "" : "s");
  for (int r = 0; r < t->size; r++) {
    const double *v = all + r * SPLIT_FIELDS;
    double step = v[SPLIT_STEP_NS] / n, xch = v[SPLIT_EXCHANGE_NS] / n, comm = transfer / n;
    double wait = xch - comm, compute = step > xch ? step - xch : 0.0;
    double pc = step > 0 ? 100.0 / step : 0.0;
    printf(
        "  rank %d: step %.1f us = compute %.1f us (%.0f%%) + communication %.1f us (%.0f%%) + waiting %.1f "
        "us (%.0f%%); %.1f exchanges, %.0f bytes sent per step\n",
        r, step / 1e3, compute / 1e3, compute * pc, comm / 1e3, comm * pc, wait / 1e3, wait * pc,
        v[SPLIT_EXCHANGES] / n, v[SPLIT_BYTES] / n);
  }
  free(all);
}

void mx_cli_tp_end(mx_cli_tp *t) {
  if (!t) return;
  fflush(stdout);
  mx_comm_release(t->comm);
  mx_comm_finalize_mpi();
  free(t);
}

#else /* no libmixrt_mpi */

struct mx_cli_tp {
  int unused;
};

int mx_cli_tp_begin(const char *cmd, int64_t tp, mx_cli_tp **out) {
  *out = NULL;
  return mx_cli_usage_error(cmd,
                            "--tp %lld needs MPI, and this mixrt was built without it (libmixrt_mpi: install "
                            "libopenmpi-dev and configure with -DMIXRT_MPI=ON)",
                            (long long)tp);
}
int mx_cli_tp_rank(const mx_cli_tp *t) {
  (void)t;
  return 0;
}
int mx_cli_tp_size(const mx_cli_tp *t) {
  (void)t;
  return 1;
}
int mx_cli_tp_attach(const char *cmd, mx_cli_tp *t, mx_session *s) {
  (void)t;
  (void)s;
  return mx_cli_usage_error(cmd, "--tp needs MPI, and this mixrt was built without it");
}
void mx_cli_tp_report(const mx_cli_tp *t, uint64_t steps_ns, int64_t steps) {
  (void)t;
  (void)steps_ns;
  (void)steps;
}
void mx_cli_tp_end(mx_cli_tp *t) { (void)t; }

#endif

int mx_cli_tp_shard(const char *cmd, const mx_cli_tp *t, mx_graph *g) {
  if (mx_graph_shard(g, mx_cli_tp_size(t), mx_cli_tp_rank(t)) != MX_OK)
    return mx_cli_runtime_error(cmd, "rank %d of %d: the model cannot be sharded: %s", mx_cli_tp_rank(t),
                                mx_cli_tp_size(t), mx_graph_last_error(g));
  return MX_EXIT_OK;
}

bool mx_cli_tp_check_llama(const mx_cli_tp *t, const mx_llama_config *cfg, int64_t first_token,
                           const int64_t *tokens, const mx_tensor *logits, int64_t n, char *why, size_t cap) {
  if (mx_cli_tp_rank(t) != 0 || n <= 0) return true;
  mx_error err = {0};
  mx_graph *g = NULL;
  if (mx_model_llama(cfg, &g, &err) != MX_OK) {
    snprintf(why, cap, "building the unsharded model: %s", err.message);
    return false;
  }
  const size_t n_io = 1 + 2 * (size_t)cfg->layers;
  mx_tensor *in = calloc(n_io, sizeof *in), *out = calloc(n_io, sizeof *out);
  bool same = in && out && mx_cli_llm_inputs(cfg, first_token, 0, 0, in) == MX_OK;
  if (!same) snprintf(why, cap, "out of memory");
  for (int64_t step = 0; same && step < n; step++) {
    ((int64_t *)in[0].data)[0] = step ? tokens[step - 1] : first_token;
    if (mx_reference_run(g, in, n_io, out, n_io, &err) != MX_OK) {
      snprintf(why, cap, "step %lld: the reference interpreter failed: %s", (long long)step, err.message);
      same = false;
      break;
    }
    char reason[200];
    if (!mx_tensor_allclose(&logits[step], &out[0], 1e-3, 1e-4, reason, sizeof reason)) {
      snprintf(why, cap, "step %lld logits differ from one process: %s", (long long)step, reason);
      same = false;
    } else if (mx_cli_argmax(&out[0]) != tokens[step]) {
      snprintf(why, cap, "step %lld: token %lld, one process %lld", (long long)step, (long long)tokens[step],
               (long long)mx_cli_argmax(&out[0]));
      same = false;
    }
    mx_tensor_release(&out[0]);
    for (size_t i = 1; i < n_io; i++) { /* present -> past */
      mx_tensor_release(&in[i]);
      in[i] = out[i];
      in[i].name = NULL;
      memset(&out[i], 0, sizeof out[i]);
    }
  }
  if (in) {
    for (size_t i = 0; i < n_io; i++) mx_tensor_release(&in[i]);
  }
  if (out) {
    for (size_t i = 0; i < n_io; i++) mx_tensor_release(&out[i]);
  }
  free(in);
  free(out);
  mx_graph_destroy(g);
  return same;
}
