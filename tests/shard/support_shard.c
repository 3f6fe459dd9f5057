/* Helpers of the sharding tests (support_shard.h). */
#include "support_shard.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "graph/ir.h"

mx_graph *shard_test_llama(const mx_llama_config *cfg) {
  mx_graph *g = NULL;
  mx_error err = {0};
  if (mx_model_llama(cfg, &g, &err) != MX_OK) return NULL;
  mx_fuse_report fuse;
  if (mx_graph_optimize(g, NULL) != MX_OK || mx_graph_fuse(g, NULL, &fuse) != MX_OK ||
      mx_graph_optimize(g, NULL) != MX_OK) {
    mx_graph_destroy(g);
    return NULL;
  }
  return g;
}

mx_graph *shard_test_rank(const mx_llama_config *cfg, int tp, int rank, mx__shard_report *report,
                          mx_error *err) {
  mx_graph *g = shard_test_llama(cfg);
  if (!g) return NULL;
  if (mx__shard_graph(g, tp, rank, report, err) != MX_OK) {
    mx_graph_destroy(g);
    return NULL;
  }
  return g;
}

size_t shard_test_count(const mx_graph *g, const char *op) {
  size_t n = 0;
  for (size_t i = 0; i < g->n_nodes; i++)
    if (!(g->nodes[i].flags & MX_NODE_DEAD) && strcmp(g->nodes[i].op_type, op) == 0) n++;
  return n;
}

/* --- N ranks in one process ------------------------------------------------------------------------ */

/* Each rank's graph has its collectives cut out: collective k's input became graph output
 * n_out + k, its output graph input n_in + k. Step s runs every rank with the collective values
 * known so far (zeros for the rest), combines the ranks' inputs of collective s by hand; after
 * the last collective, one more run gives the true outputs. Collective k only depends on
 * collectives before it (graph order), so each value is right when it is combined. */
struct shard_sim {
  int tp;
  mx_graph **g;
  size_t n_in, n_out, n_coll;
  int is_gather[64];
  int64_t axis[64];
  mx_tensor vals[64];
};

static mx_status cut_collectives(shard_sim *s, mx_graph *g, size_t *n_coll) {
  const mx_node_id *order;
  size_t n_order;
  mx_status st = mx__graph_topo_order(g, &order, &n_order);
  if (st != MX_OK) return st;
  mx_node_id colls[64];
  size_t n = 0;
  for (size_t i = 0; i < n_order && n < 64; i++)
    if (mx__shard_is_collective(&g->nodes[order[i]])) colls[n++] = order[i];
  for (size_t k = 0; k < n; k++) {
    mx_node *nd = &g->nodes[colls[k]];
    mx_value_id x = nd->inputs[0], y = nd->outputs[0], in;
    s->is_gather[k] = strcmp(nd->op_type, "AllGather") == 0;
    const mx_attr *ax = mx__node_attr(nd, "axis");
    s->axis[k] = ax ? ax->i : 0;
    char name[64];
    snprintf(name, sizeof name, "sim_collective_%zu", k);
    mx_shape shape = g->values[y].shape;
    st = mx_graph_add_input(g, name, g->values[y].dtype, &shape, &in);
    if (st == MX_OK) st = mx__graph_replace_uses(g, y, in);
    if (st != MX_OK) return st;
    mx__graph_remove_node(g, colls[k]);
    st = mx_graph_add_output(g, x);
    if (st != MX_OK) return st;
  }
  mx__graph_invalidate(g);
  *n_coll = n;
  return MX_OK;
}

shard_sim *shard_sim_create(mx_graph **ranks, int tp) {
  shard_sim *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->tp = tp;
  s->g = calloc((size_t)tp, sizeof *s->g);
  if (!s->g) {
    free(s);
    return NULL;
  }
  s->n_in = mx_graph_input_count(ranks[0]);
  s->n_out = mx_graph_output_count(ranks[0]);
  bool ok = true;
  for (int r = 0; r < tp; r++) {
    s->g[r] = ranks[r];
    size_t n = 0;
    if (cut_collectives(s, ranks[r], &n) != MX_OK || (r && n != s->n_coll)) ok = false;
    s->n_coll = n;
  }
  for (size_t k = 0; ok && k < s->n_coll; k++) {
    mx_graph *g = s->g[0];
    mx_value_id v = mx_graph_input(g, s->n_in + k);
    mx_shape sh;
    if (!mx_graph_value_shape(g, v, &sh)) ok = false;
    int64_t dims[MX_MAX_RANK];
    for (int32_t i = 0; ok && i < sh.rank; i++) {
      if (sh.dims[i] < 0) ok = false;
      dims[i] = sh.dims[i];
    }
    size_t bytes = 0;
    if (!ok || mx_tensor_alloc(mx_graph_value_dtype(g, v), sh.rank, dims, &s->vals[k]) != MX_OK ||
        !mx_tensor_nbytes(&s->vals[k], &bytes)) {
      ok = false;
      break;
    }
    memset(s->vals[k].data, 0, bytes);
  }
  if (!ok) {
    shard_sim_destroy(s);
    return NULL;
  }
  return s;
}

void shard_sim_destroy(shard_sim *s) {
  if (!s) return;
  for (int r = 0; r < s->tp; r++) mx_graph_destroy(s->g[r]);
  for (size_t k = 0; k < s->n_coll; k++) mx_tensor_release(&s->vals[k]);
  free(s->g);
  free(s);
}

/* Combines the ranks' inputs parts[0..tp) of collective k into s->vals[k]. */
static void combine(shard_sim *s, size_t k, const mx_tensor *parts) {
  mx_tensor *dst = &s->vals[k];
  float *d = dst->data;
  int64_t n = 0;
  (void)mx_tensor_numel(dst, &n);
  if (!s->is_gather[k]) {
    for (int64_t i = 0; i < n; i++) {
      double sum = 0;
      for (int r = 0; r < s->tp; r++) sum += ((const float *)parts[r].data)[i];
      d[i] = (float)sum;
    }
    return;
  }
  int64_t axis = s->axis[k] < 0 ? s->axis[k] + dst->rank : s->axis[k];
  int64_t outer = 1, chunk = 1;
  for (int64_t i = 0; i < axis; i++) outer *= dst->dims[i];
  for (int64_t i = axis; i < dst->rank; i++) chunk *= parts[0].dims[i];
  for (int64_t o = 0; o < outer; o++)
    for (int r = 0; r < s->tp; r++)
      memcpy(d + (o * s->tp + r) * chunk, (const float *)parts[r].data + o * chunk,
             (size_t)chunk * sizeof *d);
}

mx_status shard_sim_run(shard_sim *s, mx_tensor *const *inputs, size_t n_in, mx_tensor **outputs,
                        size_t n_out, mx_error *err) {
  if (n_in != s->n_in || n_out != s->n_out) return MX_ERR_INVALID_ARGUMENT;
  size_t total_in = s->n_in + s->n_coll, total_out = s->n_out + s->n_coll;
  mx_tensor *in = calloc(total_in, sizeof *in), *out = calloc(total_out * (size_t)s->tp, sizeof *out);
  mx_tensor *parts = calloc((size_t)s->tp, sizeof *parts);
  mx_status st = (in && out && parts) ? MX_OK : MX_ERR_OUT_OF_MEMORY;
  for (size_t stage = 0; stage <= s->n_coll && st == MX_OK; stage++) {
    for (int r = 0; r < s->tp && st == MX_OK; r++) {
      memcpy(in, inputs[r], s->n_in * sizeof *in);
      for (size_t k = 0; k < s->n_coll; k++) in[s->n_in + k] = s->vals[k];
      st = mx_reference_run(s->g[r], in, total_in, out + (size_t)r * total_out, total_out, err);
    }
    if (st != MX_OK) break;
    if (stage < s->n_coll) {
      for (int r = 0; r < s->tp; r++) parts[r] = out[(size_t)r * total_out + s->n_out + stage];
      combine(s, stage, parts);
    }
    for (int r = 0; r < s->tp; r++)
      for (size_t k = 0; k < total_out; k++) {
        mx_tensor *t = &out[(size_t)r * total_out + k];
        if (stage == s->n_coll && k < s->n_out)
          outputs[r][k] = *t;
        else
          mx_tensor_release(t);
      }
  }
  free(in);
  free(out);
  free(parts);
  return st;
}

static int64_t logits_argmax(const mx_tensor *t) {
  int64_t n = 0, best = 0;
  (void)mx_tensor_numel(t, &n);
  const float *d = t->data;
  for (int64_t i = 1; i < n; i++)
    if (d[i] > d[best]) best = i;
  return best;
}

static mx_tensor empty_cache(int64_t heads, int64_t d) {
  mx_tensor t;
  cr_assert_eq(mx_tensor_alloc(MX_FLOAT32, 4, (int64_t[]){1, heads, 0, d}, &t), MX_OK);
  return t;
}

void shard_check_greedy(mx_graph *full, mx_graph **ranks, int tp, const shard_decode_shape *shape, int steps,
                        const char *label) {
  mx_error err = {0};
  shard_sim *sim = shard_sim_create(ranks, tp);
  cr_assert(sim);
  const size_t n_io = 1 + 2 * (size_t)shape->layers;
  cr_assert_leq(n_io, 64);
  cr_assert_leq(tp, 8);
  mx_tensor full_in[64], full_out[64], rank_in[8][64], rank_out[8][64];
  mx_tensor *rin[8], *rout[8];
  for (size_t i = 1; i < n_io; i++) {
    full_in[i] = empty_cache(shape->kv_heads, shape->head_dim);
    for (int r = 0; r < tp; r++) rank_in[r][i] = empty_cache(shape->rank_kv_heads, shape->head_dim);
  }
  for (int r = 0; r < tp; r++) {
    rin[r] = rank_in[r];
    rout[r] = rank_out[r];
  }
  int64_t token = shape->first_token;
  for (int step = 0; step < steps; step++) {
    mx_tensor ids;
    cr_assert_eq(mx_tensor_alloc(MX_INT64, 2, (int64_t[]){1, 1}, &ids), MX_OK);
    *(int64_t *)ids.data = token;
    full_in[0] = ids;
    for (int r = 0; r < tp; r++) rank_in[r][0] = ids;
    cr_assert_eq(mx_reference_run(full, full_in, n_io, full_out, n_io, &err), MX_OK, "%s", err.message);
    cr_assert_eq(shard_sim_run(sim, rin, n_io, rout, n_io, &err), MX_OK, "%s", err.message);
    for (int r = 0; r < tp; r++) {
      char why[256];
      cr_assert(mx_tensor_allclose(&rank_out[r][0], &full_out[0], 1e-3, 1e-4, why, sizeof why),
                "%s, tp %d rank %d step %d logits: %s", label, tp, r, step, why);
    }
    int64_t next = logits_argmax(&full_out[0]);
    cr_assert_eq(logits_argmax(&rank_out[0][0]), next, "%s, tp %d step %d", label, tp, step);
    token = next;
    mx_tensor_release(&ids);
    for (size_t i = 1; i < n_io; i++) {
      mx_tensor_release(&full_in[i]);
      full_in[i] = full_out[i];
      for (int r = 0; r < tp; r++) {
        mx_tensor_release(&rank_in[r][i]);
        rank_in[r][i] = rank_out[r][i];
      }
    }
    mx_tensor_release(&full_out[0]);
    for (int r = 0; r < tp; r++) mx_tensor_release(&rank_out[r][0]);
  }
  for (size_t i = 1; i < n_io; i++) {
    mx_tensor_release(&full_in[i]);
    for (int r = 0; r < tp; r++) mx_tensor_release(&rank_in[r][i]);
  }
  shard_sim_destroy(sim);
  mx_graph_destroy(full);
}
