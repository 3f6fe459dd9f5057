/* Helpers of the sharded-decoder programs under mpirun (mpi_support.h). */
#include "mpi_support.h"

#include <stdio.h>
#include <time.h>

#include "graph/passes/shard.h"

int mpi_rank, mpi_size;

mx_comm *mpi_start(void) {
  mx_comm *c = NULL;
  mx_error err = {0};
  if (mx_comm_create_world(&c, &err) != MX_OK) {
    mpi_fail("mx_comm_create_world", err.message);
    return NULL;
  }
  mpi_rank = mx_comm_rank(c);
  mpi_size = mx_comm_size(c);
  return c;
}

int mpi_fail(const char *what, const char *msg) {
  printf("FAIL rank %d: %s: %s\n", mpi_rank, what, msg);
  fflush(stdout);
  return 1;
}

double mpi_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

mx_graph *mpi_prepare(mx_graph *g, int tp, int rank, mx_error *err) {
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

mx_session *mpi_session(mx_graph *g, mx_comm *c, mx_error *err) {
  mx_session_options o;
  mx_session_options_init(&o);
  mx_session *s = NULL;
  if (mx_session_create(&o, &s, err) != MX_OK) {
    mx_graph_destroy(g);
    return NULL;
  }
  mx_status st = mx_session_load_graph(s, g);
  if (st == MX_OK && c) st = mx_session_set_comm(s, c);
  if (st != MX_OK) {
    snprintf(err->message, sizeof err->message, "%s", mx_session_last_error(s));
    mx_session_destroy(s);
    return NULL;
  }
  return s;
}

bool mpi_same_step(int step, const mx_tensor *rank_logits, const mx_tensor *full_logits, int64_t rank_token,
                   int64_t full_token) {
  char why[256];
  if (!mx_tensor_allclose(rank_logits, full_logits, 1e-3, 1e-4, why, sizeof why)) {
    printf("FAIL rank %d: tp %d step %d logits differ from one process: %s\n", mpi_rank, mpi_size, step, why);
  } else if (rank_token != full_token) {
    printf("FAIL rank %d: tp %d step %d token %lld, one process %lld\n", mpi_rank, mpi_size, step,
           (long long)rank_token, (long long)full_token);
  } else {
    return true;
  }
  fflush(stdout);
  return false;
}

int mpi_finish(mx_comm *c, int status) {
  fflush(stdout);
  mx_comm_release(c);
  if (status == 0) mx_comm_finalize_mpi();
  return status;
}
