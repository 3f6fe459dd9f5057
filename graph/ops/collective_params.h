/* Params of the collective ops of domain "mixrt" (graph/ops/collective.c): AllReduce,
 * AllGather, ReduceScatter, Broadcast, Send, Recv. One plain-old-data struct serves all six
 * (fields an op does not take stay 0); kernels/collective.c reads it. */
#ifndef MIXRT_GRAPH_OPS_COLLECTIVE_PARAMS_H
#define MIXRT_GRAPH_OPS_COLLECTIVE_PARAMS_H

#include <stdint.h>

#include "mixrt/shape.h"

/* Which collective a node is (the kernels share one params struct). */
enum {
  MX_COLL_ALLREDUCE = 1,
  MX_COLL_ALLGATHER = 2,
  MX_COLL_REDUCESCATTER = 3,
  MX_COLL_BROADCAST = 4,
  MX_COLL_SEND = 5,
  MX_COLL_RECV = 6
};

/* Reduction of AllReduce and ReduceScatter (attribute `reduce`). */
enum { MX_COLL_REDUCE_SUM = 0, MX_COLL_REDUCE_MAX = 1 };

typedef struct mx_collective_params {
  int64_t world_size;         /* ranks the model was made for (>= 1) */
  int64_t axis;               /* AllGather / ReduceScatter: as given (may be negative) */
  int64_t root;               /* Broadcast: the rank whose x every rank gets */
  int64_t peer;               /* Send / Recv: the other rank */
  int64_t tag;                /* Send / Recv: message tag (>= 0) */
  int64_t shape[MX_MAX_RANK]; /* Recv: the dims it receives */
  int32_t rank;               /* Recv: entries of shape */
  int32_t dtype;              /* Recv: mx_dtype it receives */
  int32_t kind;               /* MX_COLL_* */
  int32_t reduce;             /* MX_COLL_REDUCE_* */
} mx_collective_params;

#endif /* MIXRT_GRAPH_OPS_COLLECTIVE_PARAMS_H */
