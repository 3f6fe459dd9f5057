/* Communicators over Open MPI (libmixrt_mpi): mx_comm_create_world, mx_comm_from_mpi and the
 * exchange functions collective kernels call (kernels/collective_comm.h).
 *
 * Each communicator works on a duplicate of the MPI communicator it was made from, so mixrt's
 * messages never match the program's own, and keeps a second duplicate for the roll call below.
 * Every exchange is an MPI non-blocking call (MPI_Iallreduce, MPI_Iallgather,
 * MPI_Ireduce_scatter_block, MPI_Ibcast, MPI_Isend, MPI_Irecv) polled with MPI_Test until it
 * completes or the communicator's timeout passes; polling sleeps a little between tests, since
 * ranks share cores with each other in oversubscribed runs.
 *
 * When an exchange times out the rank does not know which peer is missing (a collective
 * completes for all or none). It then holds a roll call: it sends a token to every other rank
 * on the second communicator and waits a short while for theirs. Ranks that time out in the
 * same exchange answer each other; the ranks whose token never comes are the ones named in the
 * error (they exited, crashed or are stuck elsewhere). After a failure the communicator is
 * broken: the ranks no longer agree on which exchange comes next, so later ones fail at once.
 * MPI errors are returned (MPI_ERRORS_RETURN), never fatal. Exchanges of one communicator are
 * serialized by a mutex: MPI needs every rank to issue collectives in the same order. */
#include <limits.h>
#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/fail_cause.h"
#include "graph/ops/collective_params.h"
#include "kernels/collective_comm.h"

typedef struct mpi_comm_impl {
  MPI_Comm comm; /* duplicate for the exchanges */
  MPI_Comm roll; /* duplicate for the roll call after a timeout */
  pthread_mutex_t lock;
} mpi_comm_impl;

static bool we_initialized; /* mx_comm_create_world called MPI_Init_thread */

#define ROLL_TAG 7

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Between two polls of a request waited on for waited_ns. Open MPI moves a non-blocking
 * collective forward only inside MPI_Test, so any sleep is added to the exchange whole: a
 * decode step's exchanges of a few KiB finish within microseconds when polled back to back
 * (a 50 us sleep after a few polls made each one cost 300-480 us). So: back to back for the
 * first 200 us; then yield the core on every poll (ranks oversubscribed on fewer cores must let
 * the peer run) up to 50 ms; past that, a long wait (a slow or dead peer), sleep 1 ms. */
static void pause_briefly(uint64_t waited_ns) {
  if (waited_ns < 200000) return;
  if (waited_ns < 50000000) {
    sched_yield();
    return;
  }
  struct timespec ts = {0, 1000000};
  nanosleep(&ts, NULL);
}

static const char *mpi_text(int code, char *buf) {
  int len = 0;
  if (MPI_Error_string(code, buf, &len) != MPI_SUCCESS)
    snprintf(buf, MPI_MAX_ERROR_STRING, "MPI error %d", code);
  return buf;
}

/* The roll call after a timeout: lists in `missing` the ranks that did not answer within wait_ms. */
static void roll_call(mx_comm *c, int64_t wait_ms, char *missing, size_t cap) {
  mpi_comm_impl *m = c->impl;
  int32_t n = c->size, me = c->rank;
  MPI_Request *reqs = calloc((size_t)n * 2, sizeof *reqs);
  int *tokens = calloc((size_t)n * 2, sizeof *tokens);
  missing[0] = '\0';
  if (!reqs || !tokens) {
    snprintf(missing, cap, "unknown (out of memory for the roll call)");
    free(reqs);
    free(tokens);
    return;
  }
  for (int32_t r = 0; r < n; r++) {
    reqs[r] = reqs[n + r] = MPI_REQUEST_NULL;
    if (r == me) continue;
    tokens[r] = me;
    MPI_Isend(&tokens[r], 1, MPI_INT, r, ROLL_TAG, m->roll, &reqs[r]);
    MPI_Irecv(&tokens[n + r], 1, MPI_INT, r, ROLL_TAG, m->roll, &reqs[n + r]);
  }
  int64_t end = now_ms() + wait_ms;
  uint64_t roll_start = now_ns();
  while (now_ms() < end) {
    int all = 0;
    MPI_Testall(n, reqs + n, &all, MPI_STATUSES_IGNORE);
    if (all) break;
    pause_briefly(now_ns() - roll_start);
  }
  size_t used = 0;
  for (int32_t r = 0; r < n; r++) {
    if (r == me || reqs[n + r] == MPI_REQUEST_NULL) continue;
    int done = 0;
    MPI_Test(&reqs[n + r], &done, MPI_STATUS_IGNORE);
    if (done) continue;
    if (used < cap) used += (size_t)snprintf(missing + used, cap - used, "%s%d", used ? ", " : "", (int)r);
  }
  if (!missing[0]) snprintf(missing, cap, "none (every rank answered the roll call)");
  /* The requests of absent ranks stay posted: the communicator is broken and never reused. */
  free(reqs);
  free(tokens);
}

/* Waits for req within the timeout. peer >= 0: the one rank this exchange depends on. */
static mx_status wait_for(mx_comm *c, MPI_Request *req, const char *what, size_t bytes, int32_t peer,
                          const char **why) {
  int64_t timeout = mx_comm_timeout_ms(c), start = now_ms();
  uint64_t start_ns = now_ns();
  char text[MPI_MAX_ERROR_STRING];
  for (;;) {
    int done = 0;
    int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
      atomic_store(&c->broken, true);
      *why = mx__fail_cause_set("rank %d: %s of %zu bytes failed in MPI: %s", (int)c->rank, what, bytes,
                                mpi_text(rc, text));
      return MX_ERR_KERNEL;
    }
    if (done) {
      atomic_fetch_add(&c->exchanges, 1);
      atomic_fetch_add(&c->bytes, bytes);
      atomic_fetch_add(&c->ns, now_ns() - start_ns);
      return MX_OK;
    }
    if (now_ms() - start > timeout) break;
    pause_briefly(now_ns() - start_ns);
  }
  atomic_store(&c->broken, true);
  if (peer >= 0) {
    *why = mx__fail_cause_set("rank %d: %s of %zu bytes timed out after %.1f s waiting for peer rank %d",
                              (int)c->rank, what, bytes, (double)timeout / 1000.0, (int)peer);
    return MX_ERR_KERNEL;
  }
  char missing[96];
  roll_call(c, timeout < 2000 ? timeout : 2000, missing, sizeof missing);
  *why = mx__fail_cause_set("rank %d: %s of %zu bytes timed out after %.1f s; no answer from peer rank(s) %s",
                            (int)c->rank, what, bytes, (double)timeout / 1000.0, missing);
  return MX_ERR_KERNEL;
}

/* Common start of an exchange of `count` MPI elements: a broken communicator fails at once, as
 * does a count MPI's int cannot hold; else the lock is taken. */
static mx_status begin(mx_comm *c, const char *what, size_t count, const char **why) {
  if (count > (size_t)INT_MAX) {
    *why = mx__fail_cause_set("rank %d: %s of %zu elements is more than one MPI call moves (%d)",
                              (int)c->rank, what, count, INT_MAX);
    return MX_ERR_KERNEL;
  }
  if (atomic_load(&c->broken)) {
    *why = mx__fail_cause_set("rank %d: %s not started: an earlier exchange of this communicator failed",
                              (int)c->rank, what);
    return MX_ERR_KERNEL;
  }
  pthread_mutex_lock(&((mpi_comm_impl *)c->impl)->lock);
  return MX_OK;
}

static mx_status finish(mx_comm *c, int rc, MPI_Request *req, const char *what, size_t bytes, int32_t peer,
                        const char **why) {
  mx_status st;
  if (rc != MPI_SUCCESS) {
    char text[MPI_MAX_ERROR_STRING];
    atomic_store(&c->broken, true);
    *why = mx__fail_cause_set("rank %d: %s of %zu bytes could not start: %s", (int)c->rank, what, bytes,
                              mpi_text(rc, text));
    st = MX_ERR_KERNEL;
  } else {
    st = wait_for(c, req, what, bytes, peer, why);
  }
  pthread_mutex_unlock(&((mpi_comm_impl *)c->impl)->lock);
  return st;
}

static MPI_Datatype mpi_type(mx_dtype dt) {
  switch (dt) {
    case MX_FLOAT32: return MPI_FLOAT;
    case MX_FLOAT64: return MPI_DOUBLE;
    case MX_INT32: return MPI_INT32_T;
    case MX_INT64: return MPI_INT64_T;
    default: return MPI_DATATYPE_NULL;
  }
}

static MPI_Op mpi_op(int32_t reduce) { return reduce == MX_COLL_REDUCE_MAX ? MPI_MAX : MPI_SUM; }

static mx_status m_allreduce(mx_comm *c, const void *in, void *out, size_t count, mx_dtype dt, int32_t reduce,
                             const char **why) {
  mx_status st = begin(c, "AllReduce", count, why);
  if (st != MX_OK) return st;
  MPI_Request req = MPI_REQUEST_NULL;
  int rc = MPI_Iallreduce(in == out ? MPI_IN_PLACE : in, out, (int)count, mpi_type(dt), mpi_op(reduce),
                          ((mpi_comm_impl *)c->impl)->comm, &req);
  return finish(c, rc, &req, "AllReduce", count * mx_dtype_size(dt), -1, why);
}

static mx_status m_allgather(mx_comm *c, const void *in, void *out, size_t bytes, const char **why) {
  mx_status st = begin(c, "AllGather", bytes * (size_t)c->size, why);
  if (st != MX_OK) return st;
  MPI_Request req = MPI_REQUEST_NULL;
  int rc = MPI_Iallgather(in, (int)bytes, MPI_BYTE, out, (int)bytes, MPI_BYTE,
                          ((mpi_comm_impl *)c->impl)->comm, &req);
  return finish(c, rc, &req, "AllGather", bytes, -1, why);
}

static mx_status m_reduce_scatter(mx_comm *c, const void *in, void *out, size_t count, mx_dtype dt,
                                  int32_t reduce, const char **why) {
  mx_status st = begin(c, "ReduceScatter", count * (size_t)c->size, why);
  if (st != MX_OK) return st;
  MPI_Request req = MPI_REQUEST_NULL;
  int rc = MPI_Ireduce_scatter_block(in, out, (int)count, mpi_type(dt), mpi_op(reduce),
                                     ((mpi_comm_impl *)c->impl)->comm, &req);
  return finish(c, rc, &req, "ReduceScatter", count * mx_dtype_size(dt) * (size_t)c->size, -1, why);
}

static mx_status m_broadcast(mx_comm *c, void *buf, size_t bytes, int32_t root, const char **why) {
  mx_status st = begin(c, "Broadcast", bytes, why);
  if (st != MX_OK) return st;
  MPI_Request req = MPI_REQUEST_NULL;
  int rc = MPI_Ibcast(buf, (int)bytes, MPI_BYTE, root, ((mpi_comm_impl *)c->impl)->comm, &req);
  /* A non-root rank depends on the root alone. */
  return finish(c, rc, &req, "Broadcast", bytes, root == c->rank ? -1 : root, why);
}

static mx_status m_send(mx_comm *c, const void *buf, size_t bytes, int32_t peer, int32_t tag,
                        const char **why) {
  mx_status st = begin(c, "Send", bytes, why);
  if (st != MX_OK) return st;
  MPI_Request req = MPI_REQUEST_NULL;
  int rc = MPI_Isend(buf, (int)bytes, MPI_BYTE, peer, tag, ((mpi_comm_impl *)c->impl)->comm, &req);
  return finish(c, rc, &req, "Send", bytes, peer, why);
}

static mx_status m_recv(mx_comm *c, void *buf, size_t bytes, int32_t peer, int32_t tag, const char **why) {
  mx_status st = begin(c, "Recv", bytes, why);
  if (st != MX_OK) return st;
  MPI_Request req = MPI_REQUEST_NULL;
  int rc = MPI_Irecv(buf, (int)bytes, MPI_BYTE, peer, tag, ((mpi_comm_impl *)c->impl)->comm, &req);
  return finish(c, rc, &req, "Recv", bytes, peer, why);
}

static void m_destroy(mx_comm *c) {
  mpi_comm_impl *m = c->impl;
  if (!m) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  /* A broken communicator has requests in flight: freeing it could wait on a dead rank. */
  if (!finalized && !atomic_load(&c->broken)) {
    MPI_Comm_free(&m->comm);
    MPI_Comm_free(&m->roll);
  }
  pthread_mutex_destroy(&m->lock);
  free(m);
}

static const mx__comm_ops mpi_ops = {
    .name = "mpi",
    .allreduce = m_allreduce,
    .allgather = m_allgather,
    .reduce_scatter = m_reduce_scatter,
    .broadcast = m_broadcast,
    .send = m_send,
    .recv = m_recv,
    .destroy = m_destroy,
};

static mx_status wrap(MPI_Comm base, mx_comm **out, mx_error *err) {
  char text[MPI_MAX_ERROR_STRING];
  mpi_comm_impl *m = calloc(1, sizeof *m);
  if (!m) return mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of memory for a communicator");
  int rc = MPI_Comm_dup(base, &m->comm);
  if (rc == MPI_SUCCESS) {
    rc = MPI_Comm_dup(base, &m->roll);
    if (rc != MPI_SUCCESS) MPI_Comm_free(&m->comm);
  }
  if (rc != MPI_SUCCESS) {
    free(m);
    return mx__fail(err, MX_ERR_DEVICE, "MPI_Comm_dup failed: %s", mpi_text(rc, text));
  }
  MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(m->roll, MPI_ERRORS_RETURN);
  pthread_mutex_init(&m->lock, NULL);
  int rank = 0, size = 1;
  MPI_Comm_rank(m->comm, &rank);
  MPI_Comm_size(m->comm, &size);
  mx_comm *c = mx__comm_new(&mpi_ops, m, rank, size);
  if (!c) {
    MPI_Comm_free(&m->comm);
    MPI_Comm_free(&m->roll);
    pthread_mutex_destroy(&m->lock);
    free(m);
    return mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of memory for a communicator");
  }
  *out = c;
  return MX_OK;
}

mx_status mx_comm_create_world(mx_comm **out, mx_error *err) {
  if (!out) return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  int inited = 0, provided = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
      return mx__fail(err, MX_ERR_DEVICE, "MPI_Init_thread failed");
    we_initialized = true;
  } else {
    MPI_Query_thread(&provided);
  }
  if (provided < MPI_THREAD_MULTIPLE)
    return mx__fail(
        err, MX_ERR_UNSUPPORTED,
        "MPI gives thread level %d, mixrt needs MPI_THREAD_MULTIPLE (kernels run on stream threads)",
        provided);
  return wrap(MPI_COMM_WORLD, out, err);
}

mx_status mx_comm_from_mpi(const void *mpi_comm, mx_comm **out, mx_error *err) {
  if (!out || !mpi_comm)
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "%s is NULL", out ? "mpi_comm" : "out");
  *out = NULL;
  int inited = 0, provided = 0;
  MPI_Initialized(&inited);
  if (!inited) return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "MPI is not initialized");
  MPI_Query_thread(&provided);
  if (provided < MPI_THREAD_MULTIPLE)
    return mx__fail(err, MX_ERR_UNSUPPORTED,
                    "MPI was initialized with thread level %d; mixrt needs MPI_THREAD_MULTIPLE", provided);
  return wrap(*(const MPI_Comm *)mpi_comm, out, err);
}

void mx_comm_finalize_mpi(void) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (we_initialized && !finalized) MPI_Finalize();
  we_initialized = false;
}
