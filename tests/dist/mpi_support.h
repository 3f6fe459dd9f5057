/* What the sharded-decoder programs under mpirun (mpi_llama.c, mpi_gpt.c) share: the rank's
 * place in the world, "FAIL rank R" lines for tests/dist/run_mpi.sh, a clock, a model prepared
 * and sharded as a session compiles it, a session holding it with the world communicator, the
 * comparison of a step against one process, and the way out. */
#ifndef MIXRT_TESTS_DIST_MPI_SUPPORT_H
#define MIXRT_TESTS_DIST_MPI_SUPPORT_H

#include <stdbool.h>

#include "mixrt/dist.h"
#include "mixrt/mixrt.h"

/* This process's rank and the world's size (set by mpi_start). */
extern int mpi_rank, mpi_size;

/* The world communicator (MPI initialized if needed); NULL after printing a FAIL line. */
mx_comm *mpi_start(void);
/* Prints "FAIL rank R: what: msg" and returns 1 (the program's status). */
int mpi_fail(const char *what, const char *msg);
/* Monotonic seconds. */
double mpi_now_s(void);

/* Takes g: optimizes, fuses and optimizes it again as a session compiles a model, then, when
 * tp > 0, rewrites it into rank `rank` of tp's shard. NULL (g freed) with err filled on failure. */
mx_graph *mpi_prepare(mx_graph *g, int tp, int rank, mx_error *err);
/* A session with default options holding g (which it takes, even on failure), attached to c
 * when c is not NULL. NULL with err filled on failure. */
mx_session *mpi_session(mx_graph *g, mx_comm *c, mx_error *err);

/* Rank 0's check of one step against the unsharded model: logits within the conformance
 * tolerances (rtol 1e-3, atol 1e-4) and the same greedy token. Prints a FAIL line and returns
 * false when they differ. */
bool mpi_same_step(int step, const mx_tensor *rank_logits, const mx_tensor *full_logits, int64_t rank_token,
                   int64_t full_token);

/* Ends the program with `status` once the sessions are gone: releases c and, after a success,
 * finalizes MPI. After a failure it leaves MPI as it is, since another rank may still wait in a
 * collective (MPI_Finalize could then wait with it) and mpirun ends the job at once when a rank
 * exits non-zero without finalizing. */
int mpi_finish(mx_comm *c, int status);

#endif /* MIXRT_TESTS_DIST_MPI_SUPPORT_H */
