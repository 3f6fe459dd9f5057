/* CPU kernels of the collective ops (graph/ops/collective.c): AllReduce, AllGather,
 * ReduceScatter, Broadcast, Send and Recv of domain "mixrt".
 *
 * A kernel runs where any kernel runs (a task of a static model's chain, a launch of a dynamic
 * partition, a node of the reference interpreter), on the stream's thread, in stream order: it
 * starts the exchange through the process's active communicator (kernels/collective_comm.h,
 * whose MPI implementation uses MPI's non-blocking calls) and waits for it with the
 * communicator's timeout. A model made for one rank needs no communicator: the four
 * collectives are then identities.
 *
 * float16 and bfloat16 travel as float32 (MPI has no 16-bit float sum), rounded once at the end.
 * An exchange along an axis other than the outermost packs the blocks of each rank together in
 * the workspace first (and unpacks after), since MPI exchanges contiguous blocks. */
#include <string.h>

#include "common/fail_cause.h"
#include "graph/ops/collective_params.h"
#include "kernels/collective_comm.h"
#include "kernels/groups.h"
#include "kernels/kutil.h"

static bool is_half(mx_dtype dt) { return dt == MX_FLOAT16 || dt == MX_BFLOAT16; }

/* Element type an exchange runs in (float32 for the 16-bit floats). */
static mx_dtype wire_dtype(mx_dtype dt) { return is_half(dt) ? MX_FLOAT32 : dt; }

/* The communicator for a node made for world_size ranks (a reference the caller releases), or
 * NULL with call->why set. */
static mx_comm *comm_for(mx_kernel_call *call, const mx_collective_params *p) {
  mx_comm *c = mx__comm_active();
  if (!c) {
    call->why = mx__fail_cause_set(
        "the model was cut for world_size %lld but the session has no communicator "
        "(mx_session_set_comm)",
        (long long)p->world_size);
    return NULL;
  }
  if (c->size != p->world_size) {
    call->why = mx__fail_cause_set("the model was cut for world_size %lld but the communicator has %d ranks",
                                   (long long)p->world_size, (int)c->size);
    mx_comm_release(c);
    return NULL;
  }
  return c;
}

/* Splits x's dims around axis: outer = product before it, inner = product from it on. */
static void split_at(const mx_ktensor *x, int64_t axis, int64_t *outer, int64_t *inner) {
  int32_t a = (int32_t)(axis < 0 ? axis + x->rank : axis);
  *outer = 1;
  *inner = 1;
  for (int32_t i = 0; i < x->rank; i++) {
    if (i < a)
      *outer *= x->dims[i];
    else
      *inner *= x->dims[i];
  }
}

static size_t nbytes(const mx_ktensor *t) { return (size_t)mx__ktensor_numel(t) * mx_dtype_size(t->dtype); }

/* An identity for one rank: y = x. */
static mx_status copy_through(mx_kernel_call *call) {
  mx_ktensor *x = mx__kin(call, 0), *y = mx__kout(call, 0);
  if (x->data != y->data) mx__kcopy(y->data, x->data, nbytes(x));
  return MX_OK;
}

/* --- AllReduce ---------------------------------------------------------------------------------- */

static size_t allreduce_workspace(const mx_kernel_call *call) {
  const mx_ktensor *x = &call->t[0];
  return is_half(x->dtype) ? (size_t)mx__ktensor_numel(x) * sizeof(float) : 0;
}

static mx_status allreduce_run(mx_kernel_call *call) {
  const mx_collective_params *p = call->params;
  if (p->world_size == 1) return copy_through(call);
  mx_comm *c = comm_for(call, p);
  if (!c) return MX_ERR_KERNEL;
  mx_ktensor *x = mx__kin(call, 0), *y = mx__kout(call, 0);
  int64_t n = mx__ktensor_numel(x);
  mx_status st = MX_OK;
  if (n > 0 && is_half(x->dtype)) {
    float *w = call->workspace;
    mx__khalf_to_f32(x->data, x->dtype, w, n);
    st = c->ops->allreduce(c, w, w, (size_t)n, MX_FLOAT32, p->reduce, &call->why);
    if (st == MX_OK) mx__kf32_to_half(w, y->dtype, y->data, n);
  } else if (n > 0) {
    st = c->ops->allreduce(c, x->data, y->data, (size_t)n, x->dtype, p->reduce, &call->why);
  }
  mx_comm_release(c);
  return st;
}

/* --- AllGather ---------------------------------------------------------------------------------- */

static size_t allgather_workspace(const mx_kernel_call *call) {
  const mx_collective_params *p = call->params;
  const mx_ktensor *x = &call->t[0];
  int64_t outer, inner;
  split_at(x, p->axis, &outer, &inner);
  return outer > 1 && p->world_size > 1 ? nbytes(x) * (size_t)p->world_size : 0;
}

static mx_status allgather_run(mx_kernel_call *call) {
  const mx_collective_params *p = call->params;
  if (p->world_size == 1) return copy_through(call);
  mx_comm *c = comm_for(call, p);
  if (!c) return MX_ERR_KERNEL;
  mx_ktensor *x = mx__kin(call, 0), *y = mx__kout(call, 0);
  int64_t outer, inner;
  split_at(x, p->axis, &outer, &inner);
  size_t block = nbytes(x), row = (size_t)inner * mx_dtype_size(x->dtype);
  size_t ranks = (size_t)p->world_size;
  mx_status st = MX_OK;
  if (block == 0) {
    /* nothing travels */
  } else if (outer == 1) {
    st = c->ops->allgather(c, x->data, y->data, block, &call->why);
  } else {
    /* Rank r's block lands at ws[r]; row o of it goes to output row o * ranks + r. */
    char *ws = call->workspace;
    st = c->ops->allgather(c, x->data, ws, block, &call->why);
    for (size_t o = 0; st == MX_OK && o < (size_t)outer; o++)
      for (size_t r = 0; r < ranks; r++)
        memcpy((char *)y->data + (o * ranks + r) * row, ws + r * block + o * row, row);
  }
  mx_comm_release(c);
  return st;
}

/* --- ReduceScatter ------------------------------------------------------------------------------ */

/* Workspace: x packed rank by rank in the wire type, then (16-bit floats) the result in float32. */
static size_t reducescatter_workspace(const mx_kernel_call *call) {
  const mx_collective_params *p = call->params;
  const mx_ktensor *x = &call->t[0];
  if (p->world_size == 1) return 0;
  size_t n = (size_t)mx__ktensor_numel(x), wsize = mx_dtype_size(wire_dtype(x->dtype));
  return n * wsize + (is_half(x->dtype) ? n / (size_t)p->world_size * wsize : 0);
}

static mx_status reducescatter_run(mx_kernel_call *call) {
  const mx_collective_params *p = call->params;
  if (p->world_size == 1) return copy_through(call);
  mx_comm *c = comm_for(call, p);
  if (!c) return MX_ERR_KERNEL;
  mx_ktensor *x = mx__kin(call, 0), *y = mx__kout(call, 0);
  int64_t outer, inner;
  split_at(x, p->axis, &outer, &inner);
  size_t ranks = (size_t)p->world_size, chunk = (size_t)inner / ranks; /* elements of one rank per row */
  size_t count = (size_t)outer * chunk;                                /* elements each rank gets */
  mx_dtype wire = wire_dtype(x->dtype);
  size_t esize = mx_dtype_size(x->dtype), wsize = mx_dtype_size(wire);
  char *packed = call->workspace;
  /* Block r of packed holds, row by row, the chunk of every row that rank r receives. */
  for (size_t r = 0; r < ranks && count; r++)
    for (size_t o = 0; o < (size_t)outer; o++) {
      size_t src = o * (size_t)inner + r * chunk, dst = r * count + o * chunk;
      if (is_half(x->dtype))
        mx__khalf_to_f32((const uint16_t *)x->data + src, x->dtype, (float *)packed + dst, (int64_t)chunk);
      else
        memcpy(packed + dst * wsize, (const char *)x->data + src * esize, chunk * esize);
    }
  mx_status st = MX_OK;
  if (count && is_half(x->dtype)) {
    float *res = (float *)(packed + ranks * count * wsize);
    st = c->ops->reduce_scatter(c, packed, res, count, wire, p->reduce, &call->why);
    if (st == MX_OK) mx__kf32_to_half(res, y->dtype, y->data, (int64_t)count);
  } else if (count) {
    st = c->ops->reduce_scatter(c, packed, y->data, count, wire, p->reduce, &call->why);
  }
  mx_comm_release(c);
  return st;
}

/* --- Broadcast, Send, Recv ---------------------------------------------------------------------- */

static mx_status broadcast_run(mx_kernel_call *call) {
  const mx_collective_params *p = call->params;
  mx_status st = copy_through(call);
  if (p->world_size == 1) return st;
  mx_comm *c = comm_for(call, p);
  if (!c) return MX_ERR_KERNEL;
  mx_ktensor *y = mx__kout(call, 0);
  if (nbytes(y)) st = c->ops->broadcast(c, y->data, nbytes(y), (int32_t)p->root, &call->why);
  mx_comm_release(c);
  return st;
}

/* Send and Recv always need a communicator: with one rank there is nobody to talk to. */
static mx_comm *peer_comm(mx_kernel_call *call, const mx_collective_params *p) {
  mx_comm *c = comm_for(call, p);
  if (c && p->peer == c->rank) {
    call->why = mx__fail_cause_set("peer %lld is this rank itself", (long long)p->peer);
    mx_comm_release(c);
    return NULL;
  }
  return c;
}

static mx_status send_run(mx_kernel_call *call) {
  const mx_collective_params *p = call->params;
  mx_comm *c = peer_comm(call, p);
  if (!c) return MX_ERR_KERNEL;
  mx_ktensor *x = mx__kin(call, 0);
  mx_status st = c->ops->send(c, x->data, nbytes(x), (int32_t)p->peer, (int32_t)p->tag, &call->why);
  mx_comm_release(c);
  return st;
}

static mx_status recv_run(mx_kernel_call *call) {
  const mx_collective_params *p = call->params;
  mx_comm *c = peer_comm(call, p);
  if (!c) return MX_ERR_KERNEL;
  mx_ktensor *y = mx__kout(call, 0);
  mx_status st = c->ops->recv(c, y->data, nbytes(y), (int32_t)p->peer, (int32_t)p->tag, &call->why);
  mx_comm_release(c);
  return st;
}

#define REDUCIBLE (MX_KDT_FLOATS | MX_KDT(MX_INT32) | MX_KDT(MX_INT64))
#define MOVABLE   (MX_KDT_ALL | MX_KDT_NARROW)

static const mx_kernel_def k_allreduce = {.op = "AllReduce",
                                          .domain = "mixrt",
                                          .dtypes = REDUCIBLE,
                                          .key = 0,
                                          .run = allreduce_run,
                                          .workspace = allreduce_workspace};
static const mx_kernel_def k_allgather = {.op = "AllGather",
                                          .domain = "mixrt",
                                          .dtypes = MOVABLE,
                                          .key = 0,
                                          .run = allgather_run,
                                          .workspace = allgather_workspace};
static const mx_kernel_def k_reducescatter = {.op = "ReduceScatter",
                                              .domain = "mixrt",
                                              .dtypes = REDUCIBLE,
                                              .key = 0,
                                              .run = reducescatter_run,
                                              .workspace = reducescatter_workspace};
static const mx_kernel_def k_broadcast = {
    .op = "Broadcast", .domain = "mixrt", .dtypes = MOVABLE, .key = 0, .run = broadcast_run};
static const mx_kernel_def k_send = {
    .op = "Send", .domain = "mixrt", .dtypes = MOVABLE, .key = 0, .run = send_run};
static const mx_kernel_def k_recv = {
    .op = "Recv", .domain = "mixrt", .dtypes = MOVABLE, .key = -1, .run = recv_run};

const mx_kernel_def *const mx__kernels_collective[] = {
    &k_allreduce, &k_allgather, &k_reducescatter, &k_broadcast, &k_send, &k_recv, NULL,
};
