/* Distributed execution: a communicator between the ranks (processes) that run one model cut
 * for tensor parallelism, and how a session gets one (docs/distributed.md).
 *
 * The collective ops of domain "mixrt" (AllReduce, AllGather, ReduceScatter, Broadcast, Send,
 * Recv) carry the world size the model was cut for. A session runs them through the
 * communicator it was given with mx_session_set_comm; with world size 1 they are identities and
 * need none.
 *
 * libmixrt itself does not link MPI. The communicators over Open MPI come from the separate
 * library libmixrt_mpi (CMake target mixrt_mpi, option MIXRT_MPI, on when MPI is found): its
 * functions are declared below with MX_MPI_API. It is a static library of the build tree, used
 * with libmixrt.a (it is not installed yet); a program that uses it links mixrt_mpi, which
 * brings libmixrt and MPI along. */
#ifndef MIXRT_DIST_H
#define MIXRT_DIST_H

#include <stdint.h>

#include "mixrt/api.h"
#include "mixrt/session.h"
#include "mixrt/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Functions of libmixrt_mpi (not of libmixrt). */
#if defined(__GNUC__) || defined(__clang__)
#define MX_MPI_API __attribute__((visibility("default")))
#else
#define MX_MPI_API
#endif

typedef struct mx_comm mx_comm;

/* Default time a rank waits for the others in one collective, send or receive before the run
 * fails; the environment variable MIXRT_COMM_TIMEOUT (seconds, may be fractional) overrides it
 * when a communicator is created, mx_comm_set_timeout_ms after. */
#define MX_COMM_TIMEOUT_MS_DEFAULT 30000

/* This process's rank in the communicator (0 .. size - 1); -1 for NULL. */
MX_API int32_t mx_comm_rank(const mx_comm *c);
/* Ranks in the communicator; 0 for NULL. */
MX_API int32_t mx_comm_size(const mx_comm *c);
/* Sets how long one exchange may wait for the other ranks (at least 1 ms). */
MX_API void mx_comm_set_timeout_ms(mx_comm *c, int64_t ms);
MX_API int64_t mx_comm_timeout_ms(const mx_comm *c);
/* What the communicator exchanged since it was created: exchanges completed, bytes this rank
 * contributed to them (its send buffers), and nanoseconds spent from the start of an exchange to
 * its end (transfer plus waiting for the other ranks). Bytes count this rank's buffer of each
 * exchange: what it sent (AllReduce and ReduceScatter: its whole input) or, for Recv and a
 * non-root Broadcast, what it received. Any pointer may be NULL. */
MX_API void mx_comm_get_stats(const mx_comm *c, uint64_t *exchanges, uint64_t *bytes, uint64_t *ns);
/* Drops the caller's reference; a session given the communicator keeps its own until it is
 * destroyed. NULL is a no-op. */
MX_API void mx_comm_release(mx_comm *c);

/* Gives the session communicator c (the session takes a reference), after a model is loaded
 * and before its first run. The session checks that every collective node of the model was
 * made for c's size (else MX_ERR_INVALID_GRAPH naming the node) and exchanges a hash of the
 * model's structure (ops, attributes, shapes, dtypes; not the weights, which differ between
 * shards) with every rank: a rank that loaded another model makes every rank fail with
 * MX_ERR_INVALID_GRAPH. This is itself a collective: every rank calls it. Collective kernels of
 * the process run through the last communicator given to any session. */
MX_API MX_MUST_USE mx_status mx_session_set_comm(mx_session *s, mx_comm *c);

/* --- libmixrt_mpi ------------------------------------------------------------------------------ */

/* A communicator over MPI_COMM_WORLD (a duplicate of it). Initializes MPI (thread level
 * MPI_THREAD_MULTIPLE: kernels run on stream threads) when the program has not; the program
 * calls mx_comm_finalize_mpi before it exits in that case. */
MX_MPI_API MX_MUST_USE mx_status mx_comm_create_world(mx_comm **out, mx_error *err);
/* A communicator over a duplicate of the caller's own communicator; mpi_comm points at an
 * MPI_Comm. MPI must be initialized with MPI_THREAD_MULTIPLE. */
MX_MPI_API MX_MUST_USE mx_status mx_comm_from_mpi(const void *mpi_comm, mx_comm **out, mx_error *err);
/* Finalizes MPI if mx_comm_create_world initialized it (after the last communicator's release). */
MX_MPI_API void mx_comm_finalize_mpi(void);

#ifdef __cplusplus
}
#endif

#endif /* MIXRT_DIST_H */
