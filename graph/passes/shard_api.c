/* mx_graph_shard: the public entry of the tensor-parallel sharding pass (graph/passes/shard.h),
 * preparing the graph the way a session's compile does before it (optimize, fuse, optimize), so
 * a program sharding in memory gets the graph `mixrt shard` writes for the same rank. */
#include "graph/passes/shard.h"

mx_status mx_graph_shard(mx_graph *g, int32_t tp, int32_t rank) {
  if (!g) return MX_ERR_INVALID_ARGUMENT;
  if (tp < 1 || rank < 0 || rank >= tp)
    return mx__graph_fail(g, MX_ERR_INVALID_ARGUMENT,
                          "mx_graph_shard: rank %d of %d: want tp >= 1 and 0 <= rank < tp", (int)rank,
                          (int)tp);
  mx_status st = mx_graph_optimize(g, NULL);
  if (st == MX_OK) st = mx_graph_fuse(g, NULL, NULL);
  if (st == MX_OK) st = mx_graph_optimize(g, NULL);
  if (st != MX_OK) return st;
  mx_error err = {0};
  st = mx__shard_graph(g, (int)tp, (int)rank, NULL, &err);
  if (st != MX_OK) return mx__graph_fail_err(g, &err);
  return MX_OK;
}
