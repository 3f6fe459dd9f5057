/* mx_session_set_comm (include/mixrt/dist.h): gives a loaded session its communicator.
 *
 * Before the communicator is taken, the model is checked against it: every collective node
 * (and those of subgraphs, partition bodies included) must have been cut for the
 * communicator's size, and every rank must have loaded the same model. The second check
 * exchanges a hash of the model's structure (op types, parsed attributes, output dtypes and
 * shapes; not the constants' bytes, which differ between the shards of one model) with an
 * AllGather, so a rank that loaded another model, or another shard count, makes every rank
 * refuse, naming the ranks that differ. */
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

/* The structure hash of g and its subgraphs. */
static uint64_t structure_hash(const mx_graph *g, uint64_t h) {
  h = mix_bytes(h, &g->n_inputs, sizeof g->n_inputs);
  h = mix_bytes(h, &g->n_outputs, sizeof g->n_outputs);
  for (size_t n = 0; n < g->n_nodes; n++) {
    const mx_node *nd = &g->nodes[n];
    if (nd->flags & MX_NODE_DEAD) continue;
    h = mix_str(h, nd->op_type);
    h = mix_str(h, nd->domain);
    h = mix_bytes(h, &nd->n_inputs, sizeof nd->n_inputs);
    /* Params of ops with subgraphs hold a pointer: their subgraphs are hashed instead. */
    if (nd->def && nd->params && !(nd->def->flags & MX_OP_SUBGRAPH) &&
        strcmp(nd->op_type, "PartitionedCall") != 0)
      h = mix_bytes(h, nd->params, nd->def->params_size);
    for (uint32_t k = 0; k < nd->n_outputs; k++) {
      const mx_value *v = &g->values[nd->outputs[k]];
      h = mix_bytes(h, &v->dtype, sizeof v->dtype);
      h = mix_bytes(h, &v->shape.rank, sizeof v->shape.rank);
      for (int32_t d = 0; d < v->shape.rank && d < MX_MAX_RANK; d++)
        if (mx_dim_is_concrete(v->shape.dims[d]))
          h = mix_bytes(h, &v->shape.dims[d], sizeof v->shape.dims[d]);
    }
  }
  for (size_t i = 0; i < g->n_subgraphs; i++) h = structure_hash(g->subgraphs[i], h);
  return h;
}

/* Fails naming the first collective node of g (or its subgraphs) cut for another size. */
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
                  "the ranks loaded different models: the structure of the model differs from rank 0's on "
                  "rank(s) %s (this is rank %d)",
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
      st == MX_OK ? structure_hash(g, 0xcbf29ce484222325ull) : (uint64_t)(0x5eed0000u + (unsigned)c->rank);
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
