/* Graph edits of the sharding pass (graph/passes/shard.c): constants cut into a rank's slice,
 * collectives inserted behind a value (which keeps its id, name and readers), and the shapes of
 * the rewritten graph inferred again. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "graph/passes/passes.h"
#include "graph/passes/rewrite.h"
#include "graph/passes/shard_impl.h"

bool mx__shard_is_collective(const mx_node *n) {
  if (strcmp(n->domain, "mixrt") != 0) return false;
  return !strcmp(n->op_type, "AllReduce") || !strcmp(n->op_type, "AllGather") ||
         !strcmp(n->op_type, "ReduceScatter") || !strcmp(n->op_type, "Broadcast");
}

void mx__shard_report_free(mx__shard_report *r) {
  if (!r) return;
  free(r->collectives);
  memset(r, 0, sizeof *r);
}

/* Points input slot(s) of node n reading `from` at `to`. */
mx_status mx__shard_rewire_input(mx__shard_ctx *c, mx_node_id n, mx_value_id from, mx_value_id to) {
  mx_graph *g = c->g;
  for (uint32_t k = 0; k < g->nodes[n].n_inputs; k++) {
    if (g->nodes[n].inputs[k] != from) continue;
    g->nodes[n].inputs[k] = to;
    mx__graph_remove_use(g, from, n);
    mx_status st = mx__graph_add_use(g, to, n);
    if (st != MX_OK) return st;
  }
  mx__graph_invalidate(g);
  return MX_OK;
}

mx_status mx__shard_slice_const(mx__shard_ctx *c, mx_node_id user, mx_value_id v, int32_t axis,
                                int32_t groups, int32_t parts, mx_value_id *out) {
  mx_graph *g = c->g;
  for (size_t i = 0; i < c->n_slices; i++) {
    mx__shard_slice *s = &c->slices[i];
    if (s->orig != v) continue;
    if (s->axis != axis || s->groups != groups || s->parts != parts)
      return mx__fail(c->err, MX_ERR_UNSUPPORTED,
                      "weight '%s' is used twice in incompatible ways: node '%s' splits its axis %d in %d "
                      "part(s), node '%s' its axis %d in %d part(s)",
                      g->values[v].name, g->nodes[s->first_user].name, (int)s->axis,
                      (int)(s->groups * s->parts), g->nodes[user].name, (int)axis, (int)(groups * parts));
    *out = s->result;
    return mx__shard_rewire_input(c, user, v, s->result);
  }
  const mx_tensor *t = g->values[v].data;
  if (!t || axis < 0 || axis >= t->rank)
    return mx__node_fail(c->err, &g->nodes[user], MX_ERR_UNSUPPORTED,
                         "input '%s' is no constant of rank > %d", g->values[v].name, (int)axis);
  int64_t size = t->dims[axis];
  int64_t all_parts = (int64_t)groups * parts;
  if (size % all_parts != 0)
    return mx__node_fail(c->err, &g->nodes[user], MX_ERR_UNSUPPORTED,
                         "weight '%s' has %lld entries on axis %d, not divisible into %lld parts (tp %d)",
                         g->values[v].name, (long long)size, (int)axis, (long long)all_parts, c->tp);
  size_t es = mx_dtype_size(t->dtype);
  if (t->dtype == MX_STRING || es == 0)
    return mx__node_fail(c->err, &g->nodes[user], MX_ERR_UNSUPPORTED,
                         "weight '%s' has no fixed-size elements", g->values[v].name);
  int64_t outer = 1, inner = 1;
  for (int32_t i = 0; i < axis; i++) outer *= t->dims[i];
  for (int32_t i = axis + 1; i < t->rank; i++) inner *= t->dims[i];
  /* The rank's part: rank r of tp holds part r * parts / tp (its own when parts is tp). */
  const int64_t section = size / groups, part = section / parts, index = (int64_t)c->rank * parts / c->tp;
  int64_t dims[MX_MAX_RANK];
  for (int32_t i = 0; i < t->rank; i++) dims[i] = t->dims[i];
  dims[axis] = size / parts;
  size_t bytes = (size_t)(outer * (size / parts) * inner) * es;
  unsigned char *data = malloc(bytes ? bytes : 1);
  if (!data) return mx__fail_oom(c->err, "a weight slice");
  unsigned char *dst = data;
  const unsigned char *src = t->data;
  const size_t run = (size_t)(part * inner) * es;
  for (int64_t o = 0; o < outer; o++)
    for (int32_t gi = 0; gi < groups; gi++) {
      memcpy(dst, src + (size_t)((o * size + gi * section + index * part) * inner) * es, run);
      dst += run;
    }
  char hint[256];
  snprintf(hint, sizeof hint, "%s.tp%d", g->values[v].name, c->rank);
  mx_status st = mx__rw_new_const(g, hint, t->dtype, t->rank, dims, data, out);
  free(data);
  if (st != MX_OK) return mx__fail_err_from_graph(c, st);
  if (c->n_slices == c->cap_slices) {
    size_t cap = c->cap_slices ? c->cap_slices * 2 : 64;
    mx__shard_slice *ns = realloc(c->slices, cap * sizeof *ns);
    if (!ns) return mx__fail_oom(c->err, "the slice list");
    c->slices = ns;
    c->cap_slices = cap;
  }
  c->slices[c->n_slices++] = (mx__shard_slice){v, axis, groups, parts, *out, user};
  c->report->n_weights++;
  return mx__shard_rewire_input(c, user, v, *out);
}

mx_status mx__fail_err_from_graph(mx__shard_ctx *c, mx_status st) {
  return mx__fail(c->err, st, "%s", mx_graph_last_error(c->g));
}

/* Makes output slot `slot` of node p be value v (whose previous producer, if any, lost it). */
static void produce_into(mx_graph *g, mx_node_id p, uint32_t slot, mx_value_id v) {
  g->nodes[p].outputs[slot] = v;
  g->values[v].producer = p;
  g->values[v].producer_slot = slot;
}

static mx_status note_collective(mx__shard_ctx *c, mx_node_id n, const char *why) {
  mx__shard_report *r = c->report;
  mx__shard_collective *nc = realloc(r->collectives, (r->n_collectives + 1) * sizeof *nc);
  if (!nc) return mx__fail_oom(c->err, "the collective list");
  r->collectives = nc;
  size_t len = strlen(why);
  char *w = mx__arena_alloc(&c->g->arena, len + 1, 1);
  if (!w) return mx__fail_oom(c->err, "a collective note");
  memcpy(w, why, len + 1);
  nc[r->n_collectives++] = (mx__shard_collective){c->g->nodes[n].name, c->g->nodes[n].op_type, w};
  return MX_OK;
}

/* Puts the node writing `fresh` (just added, reading x as its input 0) behind x: x's producer
 * now writes `fresh`, the node reads it and writes x, so x keeps its id, name and readers (a
 * graph output stays one). */
static mx_status splice_after(mx__shard_ctx *c, mx_value_id x, mx_value_id fresh) {
  mx_graph *g = c->g;
  mx_node_id p = g->values[x].producer, n = g->values[fresh].producer;
  uint32_t slot = g->values[x].producer_slot;
  g->values[fresh].dtype = g->values[x].dtype;
  g->values[fresh].shape = g->values[x].shape;
  if (p != MX_NO_NODE) produce_into(g, p, slot, fresh);
  produce_into(g, n, 0, x);
  g->nodes[n].inputs[0] = fresh;
  mx__graph_remove_use(g, x, n);
  mx_status st = mx__graph_add_use(g, fresh, n);
  if (st != MX_OK) return mx__fail_err_from_graph(c, st);
  mx__graph_invalidate(g);
  return mx__shard_grow(c);
}

mx_status mx__shard_collective_after(mx__shard_ctx *c, mx_value_id x, const char *op, const mx_attr *extra,
                                     size_t n_extra, const char *why) {
  mx_graph *g = c->g;
  mx_node_id p = g->values[x].producer;
  char hint[256];
  snprintf(hint, sizeof hint, "%s/%s", p != MX_NO_NODE ? g->nodes[p].name : g->values[x].name, op);
  const char *name = mx__graph_unique_name(g, hint);
  if (!name) return mx__fail_oom(c->err, "a collective's name");
  mx_attr attrs[4];
  size_t na = 0;
  attrs[na++] = mx_attr_int("world_size", c->tp);
  for (size_t i = 0; i < n_extra && na < 4; i++) attrs[na++] = extra[i];
  mx_node_desc d = {.op_type = op,
                    .domain = "mixrt",
                    .name = name,
                    .inputs = &x,
                    .n_inputs = 1,
                    .attrs = attrs,
                    .n_attrs = na,
                    .n_outputs = 1};
  mx_value_id fresh;
  mx_status st = mx_graph_add_node(g, &d, &fresh);
  if (st != MX_OK) return mx__fail_err_from_graph(c, st);
  mx_node_id coll = g->values[fresh].producer;
  st = splice_after(c, x, fresh);
  if (st != MX_OK) return st;
  c->kind[fresh] = c->kind[x];
  c->axis[fresh] = c->axis[x];
  c->parts[fresh] = c->parts[x];
  c->kind[x] = MX__SHARD_REP;
  return note_collective(c, coll, why);
}

mx_status mx__shard_mul_after(mx__shard_ctx *c, mx_value_id x, mx_value_id k) {
  mx_graph *g = c->g;
  mx_value_id fresh;
  mx_status st = mx_graph_add_op(g, "Mul", (mx_value_id[]){x, k}, 2, NULL, 0, &fresh);
  if (st != MX_OK) return mx__fail_err_from_graph(c, st);
  return splice_after(c, x, fresh);
}

mx_status mx__shard_grow(mx__shard_ctx *c) {
  size_t need = c->g->n_values;
  if (need <= c->cap) return MX_OK;
  size_t cap = need * 2;
  uint8_t *k = realloc(c->kind, cap);
  if (!k) return mx__fail_oom(c->err, "the value states");
  c->kind = k;
  int8_t *a = realloc(c->axis, cap);
  if (!a) return mx__fail_oom(c->err, "the value states");
  c->axis = a;
  int16_t *pa = realloc(c->parts, cap * sizeof *pa);
  if (!pa) return mx__fail_oom(c->err, "the value states");
  c->parts = pa;
  memset(c->kind + c->cap, 0, cap - c->cap);
  memset(c->axis + c->cap, 0, cap - c->cap);
  memset(c->parts + c->cap, 0, (cap - c->cap) * sizeof *pa);
  c->cap = cap;
  return MX_OK;
}

mx_status mx__shard_reinfer(mx__shard_ctx *c) {
  mx_graph *g = c->g;
  /* attributes may have changed (heads, split sizes, reshape targets): parse them again */
  for (size_t n = 0; n < g->n_nodes; n++) g->nodes[n].params = NULL;
  mx_status st = mx_graph_infer(g);
  return st == MX_OK ? MX_OK : mx__fail_err_from_graph(c, st);
}
