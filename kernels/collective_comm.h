/* The communicator behind the collective kernels (the public face is include/mixrt/dist.h).
 *
 * libmixrt knows a communicator only through the table of functions below, so it does not link
 * MPI: the Open MPI implementation lives in dist/ (libmixrt_mpi) and fills the table. Every
 * function starts the exchange and waits for it at most timeout_ms; on failure it formats the
 * cause (naming the peer rank it waited for when it knows one) with mx__fail_cause_set, returns
 * the text through *why, marks the communicator broken (later exchanges fail at once, since
 * the ranks no longer agree on what was sent) and returns MX_ERR_KERNEL. */
#ifndef MIXRT_KERNELS_COLLECTIVE_COMM_H
#define MIXRT_KERNELS_COLLECTIVE_COMM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mixrt/dist.h"
#include "mixrt/dtype.h"

typedef struct mx__comm_ops {
  const char *name; /* "mpi" */
  /* count elements of dt (float32, float64, int32, int64) reduced into out (in == out allowed). */
  mx_status (*allreduce)(mx_comm *c, const void *in, void *out, size_t count, mx_dtype dt, int32_t reduce,
                         const char **why);
  /* bytes from each rank, concatenated by rank into out (size * bytes). */
  mx_status (*allgather)(mx_comm *c, const void *in, void *out, size_t bytes, const char **why);
  /* in holds size blocks of count elements; out gets the reduction of block `rank`. */
  mx_status (*reduce_scatter)(mx_comm *c, const void *in, void *out, size_t count, mx_dtype dt,
                              int32_t reduce, const char **why);
  mx_status (*broadcast)(mx_comm *c, void *buf, size_t bytes, int32_t root, const char **why);
  mx_status (*send)(mx_comm *c, const void *buf, size_t bytes, int32_t peer, int32_t tag, const char **why);
  mx_status (*recv)(mx_comm *c, void *buf, size_t bytes, int32_t peer, int32_t tag, const char **why);
  void (*destroy)(mx_comm *c); /* frees impl */
} mx__comm_ops;

struct mx_comm {
  const mx__comm_ops *ops;
  void *impl; /* the implementation's state */
  int32_t rank, size;
  _Atomic int32_t refs;
  _Atomic int64_t timeout_ms;
  _Atomic bool broken; /* an exchange failed: every later one fails at once */
  /* mx_comm_get_stats: counted by the implementation when an exchange completes */
  _Atomic uint64_t exchanges, bytes, ns;
};

/* A communicator with one reference over ops/impl; timeout from MIXRT_COMM_TIMEOUT or the
 * default. NULL when out of memory. */
mx_comm *mx__comm_new(const mx__comm_ops *ops, void *impl, int32_t rank, int32_t size);
void mx__comm_retain(mx_comm *c);

/* The communicator collective kernels of this process use (set by mx_session_set_comm), with a
 * reference the caller releases; NULL when none was given. */
mx_comm *mx__comm_active(void);
/* Makes c the active communicator (takes a reference of its own; NULL clears). */
void mx__comm_set_active(mx_comm *c);

#endif /* MIXRT_KERNELS_COLLECTIVE_COMM_H */
