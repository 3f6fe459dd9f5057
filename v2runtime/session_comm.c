/* mx_session_set_comm (include/mixrt/dist.h): gives a loaded session its communicator.
 *
 * Before the communicator is taken, the model is checked against it: every collective node
 * (and those of subgraphs, partition bodies included) must have been cut for the
 * communicator's size, and every rank must have loaded the same model. The second check
 * exchanges a hash of the model's signature (its collectives in order and its inputs and
 * outputs, see signature_hash) with an AllGather, so a rank that loaded another model, another
 * shard count or a shard of another cut makes every rank refuse, naming the ranks that differ. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "graph/ops/collective_params.h"
#include "graph/ops/op.h"
#include "kernels/collective_comm.h"
#include "v2runtime/session_impl.h"

static uint64_t mix_bytes(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

static uint64_t mix_str(uint64_t h, const char *s) { return mix_bytes(h, s ? s : "", s ? strlen(s) + 1 : 1); }

/* The signature hash of g and its subgraphs: what the ranks must agree on for their exchanges
 * to match. That is every collective node in graph order (op type, name, parsed attributes, the
 * dtype and concrete dims of its input and output) and the graph's inputs and outputs (names and
 * dtypes). The rest may differ between the shards of one model (sliced weights, a residual
 * only rank 0 adds), so it is not hashed. */
static uint64_t signature_hash(const mx_graph *g, uint64_t h);

static uint64_t mix_value(uint64_t h, const mx_graph *g, mx_value_id v) {
  if (v == MX_NO_VALUE) return mix_bytes(h, "-", 1);
  const mx_value *val = &g->values[v];
  h = mix_bytes(h, &val->dtype, sizeof val->dtype);
  h = mix_bytes(h, &val->shape.rank, sizeof val->shape.rank);
  for (int32_t d = 0; d < val->shape.rank && d < MX_MAX_RANK; d++)
    if (mx_dim_is_concrete(val->shape.dims[d]))
      h = mix_bytes(h, &val->shape.dims[d], sizeof val->shape.dims[d]);
  return h;
}

static uint64_t signature_hash(const mx_graph *g, uint64_t h) {
  for (size_t i = 0; i < g->n_inputs; i++) {
    h = mix_str(h, g->values[g->inputs[i]].name);
    h = mix_bytes(h, &g->values[g->inputs[i]].dtype, sizeof(mx_dtype));
  }
  for (size_t i = 0; i < g->n_outputs; i++) {
    h = mix_str(h, g->values[g->outputs[i]].name);
    h = mix_bytes(h, &g->values[g->outputs[i]].dtype, sizeof(mx_dtype));
  }
  for (size_t n = 0; n < g->n_nodes; n++) {
    const mx_node *nd = &g->nodes[n];
    if ((nd->flags & MX_NODE_DEAD) || !nd->def || !(nd->def->flags & MX_OP_COMMUNICATES)) continue;
    h = mix_str(h, nd->op_type);
    h = mix_str(h, nd->name);
    /* Send and Recv name their peer, which differs by rank; the collectives' params are equal. */
    if (nd->params && strcmp(nd->op_type, "Send") != 0 && strcmp(nd->op_type, "Recv") != 0)
      h = mix_bytes(h, nd->params, nd->def->params_size);
    if (nd->n_inputs) h = mix_value(h, g, nd->inputs[0]);
    if (nd->n_outputs) h = mix_value(h, g, nd->outputs[0]);
  }
  for (size_t i = 0; i < g->n_subgraphs; i++) h = signature_hash(g->subgraphs[i], h);
  return h;
}

/* Fails naming the first collective node of g (or its subgraphs) cut for another size, or, when
 * the session could run two collectives at once (more than one stream, or the multi-thread
 * executor), the first collective: MPI pairs collectives by their order on each rank, and
 * concurrent launches may start them in different orders on different ranks. */
static mx_status check_world_size(mx_session *s, const mx_graph *g, int32_t size) {
  for (size_t n = 0; n < g->n_nodes; n++) {
    const mx_node *nd = &g->nodes[n];
    if ((nd->flags & MX_NODE_DEAD) || !nd->def || !(nd->def->flags & MX_OP_COMMUNICATES) || !nd->params)
      continue;
    const mx_collective_params *p = nd->params;
    if (p->world_size != size)
      return mx__fail(&s->err, MX_ERR_INVALID_GRAPH,
                      "node '%s' (%s) was cut for world_size %lld, but the communicator has %d ranks",
                      nd->name, nd->op_type, (long long)p->world_size, (int)size);
    if (size > 1 && (s->opts.streams > 1 || s->opts.executor == MX_EXECUTOR_MULTI_THREAD))
      return mx__fail(
          &s->err, MX_ERR_UNSUPPORTED,
          "node '%s' (%s): collectives run on one stream with a single-thread executor (the session "
          "has %u streams and the %s executor), so every rank starts them in the same order",
          nd->name, nd->op_type, s->opts.streams,
          s->opts.executor == MX_EXECUTOR_MULTI_THREAD ? "multi-thread" : "single-thread");
  }
  for (size_t i = 0; i < g->n_subgraphs; i++) {
    mx_status st = check_world_size(s, g->subgraphs[i], size);
    if (st != MX_OK) return st;
  }
  return MX_OK;
}

/* Exchanges the hash; fails naming the ranks whose model differs from rank 0's. */
static mx_status check_same_model(mx_session *s, mx_comm *c, uint64_t hash) {
  uint64_t *all = calloc((size_t)c->size, sizeof *all);
  if (!all) return mx__fail(&s->err, MX_ERR_OUT_OF_MEMORY, "out of memory exchanging model hashes");
  const char *why = NULL;
  mx_status st = c->ops->allgather(c, &hash, all, sizeof hash, &why);
  if (st != MX_OK) {
    free(all);
    return mx__fail(&s->err, st, "exchanging the model hash with the other ranks: %s", why ? why : "failed");
  }
  char list[200] = "";
  size_t used = 0;
  int32_t differ = 0;
  for (int32_t r = 1; r < c->size; r++) {
    if (all[r] == all[0]) continue;
    differ++;
    if (used < sizeof list - 16)
      used += (size_t)snprintf(list + used, sizeof list - used, "%s%d", differ > 1 ? ", " : "", (int)r);
  }
  free(all);
  if (!differ) return MX_OK;
  return mx__fail(&s->err, MX_ERR_INVALID_GRAPH,
                  "the ranks loaded different models: the collectives or the inputs and outputs differ from "
                  "rank 0's on rank(s) %s (this is rank %d)",
                  list, (int)c->rank);
}

mx_status mx_session_set_comm(mx_session *s, mx_comm *c) {
  if (!s) return MX_ERR_INVALID_ARGUMENT;
  mx_status st = mx__session_enter(s);
  if (st != MX_OK) return st;
  mx_error_clear(&s->err);
  if (!c)
    st = mx__fail(&s->err, MX_ERR_INVALID_ARGUMENT, "communicator is NULL");
  else if (!s->prog)
    st = mx__fail(&s->err, MX_ERR_INVALID_ARGUMENT, "load a model before giving the session a communicator");
  const mx_graph *g = st == MX_OK ? (s->prog->source ? s->prog->source : s->prog->root) : NULL;
  if (st == MX_OK) st = check_world_size(s, g, c->size);
  /* Every rank exchanges its hash even when its own check failed, so no rank waits alone:
   * a failed rank sends a hash nobody else has. */
  uint64_t hash =
      st == MX_OK ? signature_hash(g, 0xcbf29ce484222325ull) : (uint64_t)(0x5eed0000u + (unsigned)c->rank);
  if (c && s->prog && c->size > 1) {
    mx_error keep = s->err;
    mx_status xst = check_same_model(s, c, hash);
    if (st != MX_OK)
      s->err = keep; /* the local cause says more than the exchange */
    else
      st = xst;
  }
  if (st == MX_OK) {
    mx__comm_retain(c);
    mx_comm_release(s->comm);
    s->comm = c;
    mx__comm_set_active(c);
  }
  mx__session_leave(s);
  return st;
}
