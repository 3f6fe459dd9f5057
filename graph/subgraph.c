/* Subgraphs: the builder calls for GRAPH attributes and outer-scope captures, value kinds, and
 * the inference of nodes whose ops run subgraphs (If, Loop, Scan, SequenceMap).
 *
 * A subgraph reads a value of an enclosing graph through a value flagged MX_VALUE_OUTER that
 * bears the same name. Inferring a subgraph node first copies what the node's graph knows
 * about each captured name onto those values (a name no enclosing graph defines is refused,
 * naming the node), then declares the subgraph's inputs from the node's inputs and infers the
 * subgraph with the graph's own pass. Shapes stay symbolic: If outputs whose branches agree
 * keep their dims and get a fresh symbol per dim that differs; Loop-carried values whose dims
 * change from one iteration to the next get a fresh symbol for those dims (found by inferring
 * the body again until the carried shapes are stable); scan outputs gain the iteration count as
 * their first (Loop) or scan-axis (Scan) dim.
 *
 * At run time (ctx->runtime) nothing is re-inferred: the outputs get the compile-time dtypes and
 * kinds and the shapes come from running the node (reference/control.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "graph/ops/control_params.h"
#include "graph/passes/passes.h"

/* --- builder API ------------------------------------------------------------------------------ */

mx_value_kind mx_graph_value_kind(const mx_graph *g, mx_value_id v) {
  if (!g || v >= g->n_values) return MX_KIND_TENSOR;
  return (mx_value_kind)g->values[v].kind;
}

mx_status mx_graph_set_input_kind(mx_graph *g, mx_value_id v, mx_value_kind kind) {
  if (!g) return MX_ERR_INVALID_ARGUMENT;
  if (!mx__value_valid(g, v) || !(g->values[v].flags & MX_VALUE_INPUT))
    return mx__graph_fail(g, MX_ERR_INVALID_ARGUMENT, "value %u is not an input of graph '%s'", (unsigned)v,
                          g->name);
  if (kind > MX_KIND_OPTIONAL_SEQUENCE)
    return mx__graph_fail(g, MX_ERR_INVALID_ARGUMENT, "input '%s': unknown value kind %d", g->values[v].name,
                          (int)kind);
  g->values[v].kind = (uint8_t)kind;
  return MX_OK;
}

mx_status mx_graph_create_subgraph(mx_graph *g, const char *name, mx_graph **out) {
  if (!g || !out) return MX_ERR_INVALID_ARGUMENT;
  return mx__graph_create_subgraph(g, name && *name ? name : "subgraph", out);
}

/* The value called `name` in g or, failing that, in the nearest enclosing graph; NULL if none. */
static const mx_value *find_in_scope(const mx_graph *g, const char *name) {
  for (; g; g = g->parent) {
    mx_value_id v = mx_graph_find_value(g, name);
    if (v != MX_NO_VALUE && mx__value_valid(g, v)) return &g->values[v];
  }
  return NULL;
}

mx_status mx_graph_add_outer(mx_graph *sub, const char *name, mx_value_id *out) {
  if (!sub || !name || !*name) return MX_ERR_INVALID_ARGUMENT;
  mx_value_id id = mx_graph_find_value(sub, name);
  if (id != MX_NO_VALUE) {
    if (!(sub->values[id].flags & MX_VALUE_OUTER))
      return mx__graph_fail(sub, MX_ERR_INVALID_GRAPH, "graph '%s' already has a value '%s' of its own",
                            sub->name, name);
    if (out) *out = id;
    return MX_OK;
  }
  mx_status st = mx__graph_new_value(sub, name, &id);
  if (st != MX_OK) return st;
  mx_value *v = &sub->values[id];
  v->flags |= MX_VALUE_OUTER;
  const mx_value *o = sub->parent ? find_in_scope(sub->parent, name) : NULL;
  if (o) {
    v->dtype = o->dtype;
    v->shape = o->shape;
    v->kind = o->kind;
  }
  if (out) *out = id;
  return MX_OK;
}

/* --- inference -------------------------------------------------------------------------------- */

typedef struct sg_ctx {
  const mx_graph *g;
  const mx_node *nd;
  mx_symtab *syms;
  mx_error *err;
} sg_ctx;

static mx_graph *body_of(const mx_node *nd, const char *name) {
  const mx_attr *a = mx__node_attr(nd, name);
  return a && a->type == MX_ATTR_GRAPH ? a->graph : NULL;
}

/* Copies what the node's graph knows about each name sub captures onto sub's outer values. */
static mx_status bind_outer(sg_ctx *c, mx_graph *sub, const char *attr) {
  for (size_t v = 0; v < sub->n_values; v++) {
    mx_value *val = &sub->values[v];
    if ((val->flags & MX_VALUE_DEAD) || !(val->flags & MX_VALUE_OUTER)) continue;
    const mx_value *o = find_in_scope(c->g, val->name);
    if (!o)
      return mx__node_fail(c->err, c->nd, MX_ERR_INVALID_GRAPH,
                           "%s reads '%s', which no enclosing graph defines", attr, val->name);
    val->dtype = o->dtype;
    val->shape = o->shape;
    val->kind = o->kind;
    val->sv = o->sv;
    val->sv_len = o->sv_len;
  }
  return MX_OK;
}

/* Declares input i of sub as holding what `info` describes. */
static void set_input(mx_graph *sub, size_t i, mx_dtype dtype, mx_value_kind kind, const mx_shape *shape) {
  mx_value *v = &sub->values[sub->inputs[i]];
  v->dtype = dtype;
  v->kind = (uint8_t)kind;
  if (shape)
    v->shape = *shape;
  else
    v->shape.rank = MX_RANK_UNKNOWN;
  v->sv = NULL;
  v->sv_len = -1;
}

/* Infers sub for the node. *shapes_only (may be NULL) tells whether a failure came from
 * inference proper (shapes and types) rather than from the subgraph's structure, attributes or
 * captures. */
static mx_status infer_body_ex(sg_ctx *c, mx_graph *sub, const char *attr, bool *shapes_only) {
  if (shapes_only) *shapes_only = false;
  mx_status st = bind_outer(c, sub, attr);
  if (st != MX_OK) return st;
  mx__graph_invalidate(sub);
  st = mx_graph_validate(sub);
  if (st == MX_OK) {
    st = mx_graph_infer(sub);
    if (st != MX_OK && shapes_only) *shapes_only = true;
  }
  if (st != MX_OK) return mx__node_fail(c->err, c->nd, st, "%s: %s", attr, mx_graph_last_error(sub));
  return MX_OK;
}

static mx_status infer_body(sg_ctx *c, mx_graph *sub, const char *attr) {
  return infer_body_ex(c, sub, attr, NULL);
}

mx_status mx__subgraph_infer_as(const mx_graph *g, mx_node_id nid, mx_symtab *syms, mx_graph *sub,
                                const char *attr, const mx_dtype *dtypes, const mx_shape *shapes,
                                mx_error *err) {
  sg_ctx c = {g, &g->nodes[nid], syms, err};
  for (size_t i = 0; i < sub->n_inputs; i++) set_input(sub, i, dtypes[i], MX_KIND_TENSOR, &shapes[i]);
  return infer_body(&c, sub, attr);
}

static const mx_value *body_out(const mx_graph *sub, size_t i) { return &sub->values[sub->outputs[i]]; }

static mx_dim fresh(sg_ctx *c, const char *what) {
  char hint[200];
  snprintf(hint, sizeof hint, "%.120s.%.60s", c->nd->name, what);
  return mx_sym_fresh(c->syms, hint);
}

/* The shape covering both a and b: equal dims kept, a fresh symbol for each dim that differs,
 * an unknown rank when the ranks differ. *changed: whether the result differs from a. */
static mx_shape join_shapes(sg_ctx *c, const mx_shape *a, const mx_shape *b, const char *what,
                            bool *changed) {
  mx_shape s = *a;
  *changed = false;
  if (a->rank == MX_RANK_UNKNOWN) return s;
  if (b->rank != a->rank) {
    s.rank = MX_RANK_UNKNOWN;
    *changed = true;
    return s;
  }
  for (int32_t k = 0; k < a->rank; k++) {
    if (a->dims[k] == b->dims[k]) continue;
    s.dims[k] = mx_dim_is_unknown(b->dims[k]) ? MX_DIM_UNKNOWN : fresh(c, what);
    *changed = true;
  }
  return s;
}

static void set_out(mx_value_info *o, const mx_value *v) {
  o->present = true;
  o->dtype = v->dtype;
  o->kind = v->kind;
  o->shape = v->shape;
  o->sv_len = -1;
}

/* Whether kinds a and b may stand for one value: equal, or an optional and what it holds. */
static bool kinds_agree(uint8_t a, uint8_t b) {
  if (a == b) return true;
  if (a > b) {
    uint8_t t = a;
    a = b;
    b = t;
  }
  return (a == MX_KIND_TENSOR && b == MX_KIND_OPTIONAL) ||
         (a == MX_KIND_SEQUENCE && b == MX_KIND_OPTIONAL_SEQUENCE);
}

static mx_status check_same_type(sg_ctx *c, const mx_value *a, const mx_value *b, const char *what,
                                 size_t i) {
  if (a->dtype != b->dtype || !kinds_agree(a->kind, b->kind))
    return mx__node_fail(c->err, c->nd, MX_ERR_DTYPE, "%s %zu: %s%s in one place, %s%s in the other", what, i,
                         a->kind == MX_KIND_TENSOR ? "" : "container of ", mx_dtype_name(a->dtype),
                         b->kind == MX_KIND_TENSOR ? "" : "container of ", mx_dtype_name(b->dtype));
  return MX_OK;
}

static mx_status if_infer(sg_ctx *c, const mx_value_info *in, mx_value_info *out) {
  mx_graph *th = body_of(c->nd, "then_branch"), *el = body_of(c->nd, "else_branch");
  if (in[0].kind != MX_KIND_TENSOR || in[0].dtype != MX_BOOL)
    return mx__node_fail(c->err, c->nd, MX_ERR_DTYPE, "the condition must be a bool tensor, not %s",
                         mx_dtype_name(in[0].dtype));
  /* A branch whose inference fails on shapes can never run without failing: the other one
   * decides the outputs (expanded functions hold branches for inputs of other ranks). Errors
   * of structure, attributes or captures stay errors. */
  mx_status st = MX_OK, st_th, st_el;
  mx_error first = {0};
  bool soft_th, soft_el;
  st_th = infer_body_ex(c, th, "then_branch", &soft_th);
  if (st_th != MX_OK && c->err) first = *c->err;
  if (st_th != MX_OK && !soft_th) return st_th;
  st_el = infer_body_ex(c, el, "else_branch", &soft_el);
  if (st_el != MX_OK && !soft_el) return st_el;
  if (st_th != MX_OK && st_el != MX_OK) {
    if (c->err) *c->err = first;
    return st_th;
  }
  if (c->err && (st_th != MX_OK || st_el != MX_OK)) mx_error_clear(c->err);
  if (th->n_outputs != c->nd->n_outputs || el->n_outputs != c->nd->n_outputs)
    return mx__node_fail(c->err, c->nd, MX_ERR_INVALID_GRAPH,
                         "then_branch has %zu outputs and else_branch %zu, the node %u", th->n_outputs,
                         el->n_outputs, c->nd->n_outputs);
  int branch = st_th != MX_OK ? 0 : st_el != MX_OK ? 1 : -1; /* 1 then, 0 else, when known */
  if (in[0].data && in[0].data->data) {
    int64_t n;
    if (mx_tensor_numel(in[0].data, &n) && n == 1) branch = *(const uint8_t *)in[0].data->data ? 1 : 0;
  }
  for (uint32_t k = 0; k < c->nd->n_outputs; k++) {
    const mx_value *a = body_out(th, k), *b = body_out(el, k);
    if (branch >= 0) {
      set_out(&out[k], branch ? a : b);
      continue;
    }
    st = check_same_type(c, a, b, "output", k);
    if (st != MX_OK) return st;
    bool changed;
    char what[32];
    snprintf(what, sizeof what, "out%u", k);
    set_out(&out[k], a);
    out[k].shape = join_shapes(c, &a->shape, &b->shape, what, &changed);
  }
  return MX_OK;
}

/* Declares the loop-carried inputs of body (from `first`) and infers it until the carried
 * shapes are stable: each carried output is compared with its input, and dims that differ are
 * widened to fresh symbols. shapes[i] receives the final shape of carried value i. */
static mx_status infer_carried(sg_ctx *c, mx_graph *body, size_t first_in, size_t first_out, size_t n_carried,
                               const mx_value_info *init, mx_shape *shapes) {
  int depth = 0;
  for (const mx_graph *p = body->parent; p; p = p->parent) depth++;
  uint32_t widened[64] = {0}; /* per carried value: dims already made fresh symbols */
  for (size_t i = 0; i < n_carried; i++) {
    shapes[i] = init[i].shape;
    /* Deeply nested bodies start from unknown ranks: one round each, so the rounds of nested
     * loops cannot multiply without bound. */
    if (depth > 4) shapes[i].rank = MX_RANK_UNKNOWN;
    set_input(body, first_in + i, init[i].dtype, (mx_value_kind)init[i].kind, &shapes[i]);
  }
  for (int round = 0;; round++) {
    mx_status st = infer_body(c, body, "body");
    if (st != MX_OK) return st;
    bool any = false;
    for (size_t i = 0; i < n_carried; i++) {
      const mx_value *o = body_out(body, first_out + i);
      const mx_value *inv = &body->values[body->inputs[first_in + i]];
      st = check_same_type(c, inv, o, "loop-carried value", i);
      if (st != MX_OK) return st;
      bool changed;
      char what[32];
      snprintf(what, sizeof what, "carried%zu", i);
      mx_shape s = join_shapes(c, &shapes[i], &o->shape, what, &changed);
      /* A dim widened in an earlier round already stands for any size: it stays as it is. */
      for (int32_t d = 0; changed && s.rank >= 0 && s.rank == shapes[i].rank && d < s.rank; d++)
        if (widened[i] & (1u << d)) s.dims[d] = shapes[i].dims[d];
      if (changed && s.rank >= 0 && s.rank == shapes[i].rank) {
        changed = false;
        for (int32_t d = 0; d < s.rank; d++) {
          if (s.dims[d] != shapes[i].dims[d]) {
            widened[i] |= 1u << d;
            changed = true;
          }
        }
      }
      if (changed) {
        if (round >= 3) s.rank = MX_RANK_UNKNOWN; /* give up on the rank rather than loop */
        shapes[i] = s;
        set_input(body, first_in + i, inv->dtype, (mx_value_kind)inv->kind, &s);
        any = true;
      }
    }
    if (!any) return MX_OK;
  }
}

static mx_status loop_infer(sg_ctx *c, const mx_value_info *in, mx_value_info *out) {
  mx_graph *body = body_of(c->nd, "body");
  uint32_t ni = c->nd->n_inputs, no = c->nd->n_outputs;
  if (ni < 2)
    return mx__node_fail(c->err, c->nd, MX_ERR_INVALID_GRAPH,
                         "%u inputs given; Loop takes M, cond and the carried values", ni);
  size_t n = ni - 2;
  if (body->n_inputs != 2 + n)
    return mx__node_fail(c->err, c->nd, MX_ERR_INVALID_GRAPH,
                         "the body has %zu inputs; it must have %zu (iteration, condition and %zu carried)",
                         body->n_inputs, 2 + n, n);
  if (body->n_outputs < 1 + n)
    return mx__node_fail(c->err, c->nd, MX_ERR_INVALID_GRAPH,
                         "the body has %zu outputs; it needs at least %zu (condition and %zu carried)",
                         body->n_outputs, 1 + n, n);
  size_t k = body->n_outputs - 1 - n;
  if (no != n + k)
    return mx__node_fail(c->err, c->nd, MX_ERR_INVALID_GRAPH,
                         "the node has %u outputs; its body gives %zu carried and %zu scan outputs", no, n,
                         k);
  if (in[0].present && (in[0].kind != MX_KIND_TENSOR || (in[0].dtype != MX_INT64 && in[0].dtype != MX_INT32)))
    return mx__node_fail(c->err, c->nd, MX_ERR_DTYPE, "input M must be an int64 tensor");
  if (in[1].present && (in[1].kind != MX_KIND_TENSOR || in[1].dtype != MX_BOOL))
    return mx__node_fail(c->err, c->nd, MX_ERR_DTYPE, "input cond must be a bool tensor");
  mx_shape scalar = {.rank = 0};
  set_input(body, 0, MX_INT64, MX_KIND_TENSOR, &scalar);
  set_input(body, 1, MX_BOOL, MX_KIND_TENSOR, &scalar);
  mx_shape shapes[64];
  if (n > 64) return mx__node_fail(c->err, c->nd, MX_ERR_LIMIT, "more than 64 loop-carried values");
  for (size_t i = 0; i < n; i++)
    if (!in[2 + i].present)
      return mx__node_fail(c->err, c->nd, MX_ERR_INVALID_GRAPH, "loop-carried input %zu is missing", i);
  mx_status st = infer_carried(c, body, 2, 1, n, in + 2, shapes);
  if (st != MX_OK) return st;
  const mx_value *bc = body_out(body, 0);
  if (bc->kind != MX_KIND_TENSOR || bc->dtype != MX_BOOL)
    return mx__node_fail(c->err, c->nd, MX_ERR_DTYPE,
                         "the body's first output (the condition) must be bool, not %s",
                         mx_dtype_name(bc->dtype));
  for (size_t i = 0; i < n; i++) {
    set_out(&out[i], body_out(body, 1 + i));
    out[i].shape = shapes[i];
  }
  mx_dim trip = k ? fresh(c, "iterations") : MX_DIM_UNKNOWN;
  for (size_t j = 0; j < k; j++) {
    const mx_value *o = body_out(body, 1 + n + j);
    if (o->kind != MX_KIND_TENSOR)
      return mx__node_fail(c->err, c->nd, MX_ERR_DTYPE, "scan output %zu of the body must be a tensor", j);
    set_out(&out[n + j], o);
    if (o->shape.rank == MX_RANK_UNKNOWN) continue;
    if (o->shape.rank >= MX_MAX_RANK)
      return mx__node_fail(c->err, c->nd, MX_ERR_UNSUPPORTED, "scan output %zu has too high a rank", j);
    out[n + j].shape.rank = o->shape.rank + 1;
    out[n + j].shape.dims[0] = trip;
    for (int32_t d = 0; d < o->shape.rank; d++) out[n + j].shape.dims[d + 1] = o->shape.dims[d];
  }
  return MX_OK;
}

/* Removes dim `axis` of s (rank known). */
static mx_shape drop_dim(const mx_shape *s, int32_t axis) {
  mx_shape r = *s;
  for (int32_t d = axis; d + 1 < s->rank; d++) r.dims[d] = s->dims[d + 1];
  r.rank--;
  return r;
}

/* Inserts dim `v` at `axis` of s (rank known, below MX_MAX_RANK). */
static mx_shape insert_dim(const mx_shape *s, int32_t axis, mx_dim v) {
  mx_shape r = *s;
  r.rank++;
  for (int32_t d = r.rank - 1; d > axis; d--) r.dims[d] = s->dims[d - 1];
  r.dims[axis] = v;
  return r;
}

static mx_status scan_infer(sg_ctx *c, const mx_value_info *in, mx_value_info *out) {
  mx_graph *body = body_of(c->nd, "body");
  const mx_scan_params *p = c->nd->params;
  const bool v8 = c->nd->opset < 9;
  uint32_t first = v8 ? 1 : 0; /* opset 8: sequence_lens comes first */
  uint32_t ni = c->nd->n_inputs, no = c->nd->n_outputs;
  if (ni < first + p->num_scan_inputs)
    return mx__node_fail(c->err, c->nd, MX_ERR_INVALID_GRAPH, "%u inputs for %lld scan inputs", ni,
                         (long long)p->num_scan_inputs);
  size_t m = (size_t)p->num_scan_inputs, n = ni - first - m;
  if (m > MX_SCAN_MAX || n > 64)
    return mx__node_fail(c->err, c->nd, MX_ERR_LIMIT, "too many scan inputs or states");
  if (body->n_inputs != n + m)
    return mx__node_fail(c->err, c->nd, MX_ERR_INVALID_GRAPH,
                         "the body has %zu inputs; it must have %zu (%zu states and %zu scan inputs)",
                         body->n_inputs, n + m, n, m);
  if (body->n_outputs < n || no != body->n_outputs)
    return mx__node_fail(
        c->err, c->nd, MX_ERR_INVALID_GRAPH,
        "the body has %zu outputs and the node %u; both must be the %zu states and the scan outputs",
        body->n_outputs, no, n);
  size_t k = no - n;
  if ((size_t)p->n_out_axis > 0 && (size_t)p->n_out_axis != k)
    return mx__node_fail(c->err, c->nd, MX_ERR_INVALID_GRAPH,
                         "attribute 'scan_output_axes' has %d entries for %zu scan outputs",
                         (int)p->n_out_axis, k);
  if (k > MX_SCAN_MAX) return mx__node_fail(c->err, c->nd, MX_ERR_LIMIT, "too many scan outputs");
  mx_dim trip = MX_DIM_UNKNOWN, batch = MX_DIM_UNKNOWN;
  for (size_t i = 0; i < m; i++) {
    const mx_value_info *x = &in[first + n + i];
    if (x->kind != MX_KIND_TENSOR)
      return mx__node_fail(c->err, c->nd, MX_ERR_DTYPE, "scan input %zu must be a tensor", i);
    mx_shape s = x->shape;
    if (s.rank != MX_RANK_UNKNOWN) {
      int32_t axis = 0;
      int64_t a = v8 ? 1 : (p->n_in_axis ? p->in_axis[i] : 0);
      if (!mx__norm_axis(a, s.rank, &axis) || (v8 && s.rank < 2))
        return mx__node_fail(c->err, c->nd, MX_ERR_INVALID_GRAPH,
                             "scan axis %lld of scan input %zu is out of range for rank %d", (long long)a, i,
                             (int)s.rank);
      if (i == 0) trip = s.dims[axis];
      s = drop_dim(&s, axis);
      if (v8) {
        if (i == 0) batch = s.dims[0];
        s = drop_dim(&s, 0);
      }
    }
    set_input(body, n + i, x->dtype, MX_KIND_TENSOR, &s);
  }
  mx_value_info states[64];
  mx_shape shapes[64];
  for (size_t i = 0; i < n; i++) {
    states[i] = in[first + i];
    if (v8 && states[i].shape.rank > 0) states[i].shape = drop_dim(&states[i].shape, 0);
  }
  mx_status st = infer_carried(c, body, 0, 0, n, states, shapes);
  if (st != MX_OK) return st;
  for (size_t i = 0; i < n; i++) {
    set_out(&out[i], body_out(body, i));
    out[i].shape = v8 && shapes[i].rank >= 0 ? insert_dim(&shapes[i], 0, batch) : shapes[i];
  }
  for (size_t j = 0; j < k; j++) {
    const mx_value *o = body_out(body, n + j);
    set_out(&out[n + j], o);
    if (o->shape.rank == MX_RANK_UNKNOWN) continue;
    if (o->shape.rank + (v8 ? 2 : 1) > MX_MAX_RANK)
      return mx__node_fail(c->err, c->nd, MX_ERR_UNSUPPORTED, "scan output %zu has too high a rank", j);
    int32_t axis = 0;
    int64_t a = v8 ? 0 : (p->n_out_axis ? p->out_axis[j] : 0);
    if (!mx__norm_axis(a, o->shape.rank + 1, &axis))
      return mx__node_fail(c->err, c->nd, MX_ERR_INVALID_GRAPH,
                           "scan axis %lld of scan output %zu is out of range for rank %d", (long long)a, j,
                           (int)o->shape.rank + 1);
    out[n + j].shape = insert_dim(&o->shape, axis, trip);
    if (v8) out[n + j].shape = insert_dim(&out[n + j].shape, 0, batch);
  }
  return MX_OK;
}

static mx_status sequence_map_infer(sg_ctx *c, const mx_value_info *in, mx_value_info *out) {
  mx_graph *body = body_of(c->nd, "body");
  uint32_t ni = c->nd->n_inputs, no = c->nd->n_outputs;
  if (body->n_inputs != ni || body->n_outputs != no)
    return mx__node_fail(c->err, c->nd, MX_ERR_INVALID_GRAPH,
                         "the body has %zu inputs and %zu outputs; the node %u and %u", body->n_inputs,
                         body->n_outputs, ni, no);
  if (in[0].kind != MX_KIND_SEQUENCE)
    return mx__node_fail(c->err, c->nd, MX_ERR_DTYPE, "input 0 must be a sequence");
  for (uint32_t i = 0; i < ni; i++) {
    if (in[i].kind != MX_KIND_TENSOR && in[i].kind != MX_KIND_SEQUENCE)
      return mx__node_fail(c->err, c->nd, MX_ERR_DTYPE, "input %u must be a tensor or a sequence", i);
    set_input(body, i, in[i].dtype, MX_KIND_TENSOR, &in[i].shape);
  }
  mx_status st = infer_body(c, body, "body");
  if (st != MX_OK) return st;
  for (uint32_t k = 0; k < no; k++) {
    const mx_value *o = body_out(body, k);
    if (o->kind != MX_KIND_TENSOR)
      return mx__node_fail(c->err, c->nd, MX_ERR_DTYPE, "body output %u must be a tensor", k);
    set_out(&out[k], o);
    out[k].kind = MX_KIND_SEQUENCE;
    out[k].shape.rank = MX_RANK_UNKNOWN; /* elements may differ in shape */
  }
  return MX_OK;
}

mx_status mx__subgraph_node_infer(const mx_graph *g, mx_node_id nid, mx_symtab *syms, const mx_value_info *in,
                                  mx_value_info *out, mx_dim *out_sv, bool runtime, mx_error *err) {
  (void)out_sv;
  const mx_node *nd = &g->nodes[nid];
  sg_ctx c = {g, nd, syms, err};
  for (uint32_t i = 0; i < nd->n_attrs; i++)
    if (nd->attrs[i].type == MX_ATTR_GRAPH && !nd->attrs[i].graph)
      return mx__node_fail(c.err, c.nd, MX_ERR_INVALID_GRAPH, "attribute '%s' holds no graph",
                           nd->attrs[i].name);
  if (runtime) {
    /* The shapes come from running the node: keep what compile time found. */
    for (uint32_t k = 0; k < nd->n_outputs; k++) {
      const mx_value *v = &g->values[nd->outputs[k]];
      out[k].dtype = v->dtype;
      out[k].kind = v->kind;
      out[k].shape.rank = MX_RANK_UNKNOWN;
    }
    return MX_OK;
  }
  const char *op = nd->def->name;
  mx_status st;
  if (strcmp(op, "If") == 0)
    st = if_infer(&c, in, out);
  else if (strcmp(op, "Loop") == 0)
    st = loop_infer(&c, in, out);
  else if (strcmp(op, "Scan") == 0)
    st = scan_infer(&c, in, out);
  else if (strcmp(op, "SequenceMap") == 0)
    st = sequence_map_infer(&c, in, out);
  else
    st = mx__node_fail(c.err, c.nd, MX_ERR_INTERNAL, "no subgraph inference for this op");
  if (st != MX_OK) return st;
  for (uint32_t k = 0; k < nd->n_outputs; k++) {
    out[k].sv = NULL;
    out[k].sv_len = -1;
    if (!mx_dtype_size(out[k].dtype))
      return mx__node_fail(c.err, c.nd, MX_ERR_INVALID_GRAPH, "output %u has no known element type", k);
  }
  return MX_OK;
}

/* --- captures and folding --------------------------------------------------------------------- */

/* Marks in keep[] every value of g that sub (or a subgraph nested in it) reads by name. */
static void mark_captured(const mx_graph *g, const mx_graph *sub, uint8_t *keep) {
  for (size_t v = 0; v < sub->n_values; v++) {
    if ((sub->values[v].flags & (MX_VALUE_DEAD | MX_VALUE_OUTER)) != MX_VALUE_OUTER) continue;
    mx_value_id id = mx_graph_find_value(g, sub->values[v].name);
    if (id != MX_NO_VALUE) keep[id] = 1;
  }
  for (size_t i = 0; i < sub->n_subgraphs; i++) mark_captured(g, sub->subgraphs[i], keep);
}

uint8_t *mx__graph_captured(const mx_graph *g) {
  uint8_t *keep = calloc(g->n_values ? g->n_values : 1, 1);
  if (!keep) return NULL;
  for (size_t n = 0; n < g->n_nodes; n++) { /* subgraphs of live nodes only */
    const mx_node *nd = &g->nodes[n];
    if (nd->flags & MX_NODE_DEAD) continue;
    for (uint32_t a = 0; a < nd->n_attrs; a++)
      if (nd->attrs[a].type == MX_ATTR_GRAPH && nd->attrs[a].graph)
        mark_captured(g, nd->attrs[a].graph, keep);
  }
  return keep;
}

/* Walks the captures of sub (and of the subgraphs nested in it) whose producers are live nodes
 * of g other than owner: counts them per producer in first[p + 1] (to == NULL), or writes owner
 * at to[fill[p]++]. */
static void capture_walk(const mx_graph *g, const mx_graph *sub, mx_node_id owner, uint32_t *first,
                         mx_node_id *to, uint32_t *fill) {
  for (size_t v = 0; v < sub->n_values; v++) {
    if ((sub->values[v].flags & (MX_VALUE_DEAD | MX_VALUE_OUTER)) != MX_VALUE_OUTER) continue;
    mx_value_id id = mx_graph_find_value(g, sub->values[v].name);
    if (id == MX_NO_VALUE) continue;
    mx_node_id p = g->values[id].producer;
    if (p == MX_NO_NODE || p == owner || (g->nodes[p].flags & MX_NODE_DEAD)) continue;
    if (to)
      to[fill[p]++] = owner;
    else
      first[p + 1]++;
  }
  for (size_t i = 0; i < sub->n_subgraphs; i++) capture_walk(g, sub->subgraphs[i], owner, first, to, fill);
}

bool mx__graph_capture_edges(const mx_graph *g, uint32_t **first_out, mx_node_id **to_out) {
  size_t nn = g->n_nodes;
  uint32_t *first = calloc(nn + 1, sizeof *first), *fill = malloc((nn ? nn : 1) * sizeof *fill);
  mx_node_id *to = NULL;
  bool ok = first && fill;
  for (int pass = 0; pass < 2 && ok; pass++) {
    if (pass == 1) {
      for (size_t p = 0; p < nn; p++) first[p + 1] += first[p];
      memcpy(fill, first, (nn ? nn : 1) * sizeof *fill);
      to = malloc((first[nn] ? first[nn] : 1) * sizeof *to);
      if (!(ok = to != NULL)) break;
    }
    for (size_t n = 0; n < nn; n++) {
      const mx_node *nd = &g->nodes[n];
      if (nd->flags & MX_NODE_DEAD) continue;
      for (uint32_t a = 0; a < nd->n_attrs; a++)
        if (nd->attrs[a].type == MX_ATTR_GRAPH && nd->attrs[a].graph)
          capture_walk(g, nd->attrs[a].graph, (mx_node_id)n, first, pass ? to : NULL, fill);
    }
  }
  free(fill);
  if (!ok) {
    free(first);
    free(to);
    return false;
  }
  *first_out = first;
  *to_out = to;
  return true;
}

/* True when no node of sub holds a subgraph (inlining then needs no renaming inside one). */
static bool flat(const mx_graph *sub) {
  for (size_t n = 0; n < sub->n_nodes; n++) {
    const mx_node *nd = &sub->nodes[n];
    if (nd->flags & MX_NODE_DEAD) continue;
    for (uint32_t a = 0; a < nd->n_attrs; a++)
      if (nd->attrs[a].type == MX_ATTR_GRAPH) return false;
  }
  return true;
}

/* Replaces If node nid of g by the nodes of `branch`: constants and node outputs get fresh names
 * in g, captured names map to g's values, and the If's outputs are redirected. */
static mx_status inline_branch(mx_graph *g, mx_node_id nid, const mx_graph *branch) {
  mx_status st = MX_OK;
  mx_value_id *map = malloc((branch->n_values ? branch->n_values : 1) * sizeof *map);
  if (!map) return mx__graph_fail(g, MX_ERR_OUT_OF_MEMORY, "out of memory inlining an If branch");
  for (size_t v = 0; v < branch->n_values; v++) {
    const mx_value *bv = &branch->values[v];
    map[v] = MX_NO_VALUE;
    if (bv->flags & MX_VALUE_DEAD) continue;
    if (bv->flags & MX_VALUE_OUTER) {
      map[v] = mx_graph_find_value(g, bv->name);
      if (map[v] == MX_NO_VALUE) { /* captured from further out: g captures it too */
        st = mx_graph_add_outer(g, bv->name, &map[v]);
        if (st != MX_OK) goto done;
      }
    } else if ((bv->flags & MX_VALUE_CONST) && bv->producer == MX_NO_NODE) {
      const char *nm = mx__graph_unique_name(g, bv->name);
      st = nm ? mx_graph_add_constant(g, nm, bv->data, &map[v]) : MX_ERR_OUT_OF_MEMORY;
      if (st != MX_OK) goto done;
    }
  }
  const mx_node_id *order;
  size_t n_order;
  st = mx__graph_topo_order((mx_graph *)branch, &order, &n_order);
  if (st != MX_OK) goto done;
  for (size_t i = 0; i < n_order; i++) {
    const mx_node *bn = &branch->nodes[order[i]];
    mx_value_id ins[64], outs[64];
    const char *onames[64];
    if (bn->n_inputs > 64 || bn->n_outputs > 64) {
      st = mx__graph_fail(g, MX_ERR_LIMIT, "If branch node '%s' has too many inputs or outputs", bn->name);
      goto done;
    }
    for (uint32_t k = 0; k < bn->n_inputs; k++)
      ins[k] = bn->inputs[k] == MX_NO_VALUE ? MX_NO_VALUE : map[bn->inputs[k]];
    for (uint32_t k = 0; k < bn->n_outputs; k++)
      onames[k] = mx__graph_unique_name(g, branch->values[bn->outputs[k]].name);
    mx_node_desc d = {.op_type = bn->op_type,
                      .domain = bn->domain,
                      .name = mx__graph_unique_name(g, bn->name),
                      .inputs = ins,
                      .n_inputs = bn->n_inputs,
                      .attrs = bn->attrs,
                      .n_attrs = bn->n_attrs,
                      .output_names = onames,
                      .n_outputs = bn->n_outputs};
    st = mx_graph_add_node(g, &d, outs);
    if (st != MX_OK) goto done;
    for (uint32_t k = 0; k < bn->n_outputs; k++) map[bn->outputs[k]] = outs[k];
  }
  const mx_node *nd = &g->nodes[nid];
  for (uint32_t k = 0; k < nd->n_outputs; k++) {
    mx_value_id to = map[branch->outputs[k]];
    if (to == MX_NO_VALUE) {
      st =
          mx__graph_fail(g, MX_ERR_INVALID_GRAPH, "If node '%s': branch output %u has no value", nd->name, k);
      goto done;
    }
    st = mx__graph_replace_uses(g, g->nodes[nid].outputs[k], to);
    if (st != MX_OK) goto done;
  }
  mx__graph_remove_node(g, nid);
done:
  free(map);
  return st;
}

mx_status mx__graph_fold_const_if(mx_graph *g, size_t *folded) {
  for (size_t n = 0; n < g->n_nodes; n++) {
    const mx_node *nd = &g->nodes[n];
    if ((nd->flags & MX_NODE_DEAD) || strcmp(nd->op_type, "If") != 0 || nd->domain[0] || nd->n_inputs != 1)
      continue;
    if (nd->inputs[0] == MX_NO_VALUE) continue;
    const mx_value *c = &g->values[nd->inputs[0]];
    int64_t cnt;
    if (!(c->flags & MX_VALUE_CONST) || !c->data || c->data->dtype != MX_BOOL ||
        !mx_tensor_numel(c->data, &cnt) || cnt != 1)
      continue;
    const mx_graph *branch = body_of(nd, *(const uint8_t *)c->data->data ? "then_branch" : "else_branch");
    if (!branch || !flat(branch) || branch->n_outputs != nd->n_outputs || branch->n_inputs) continue;
    /* A subgraph reading an output by name would find the removed If's value, not the branch's:
     * such an If waits until that reader is gone (folded itself; a later round takes it). */
    uint8_t *captured = g->n_subgraphs ? mx__graph_captured(g) : NULL;
    if (g->n_subgraphs && !captured)
      return mx__graph_fail(g, MX_ERR_OUT_OF_MEMORY, "out of memory folding an If");
    bool read_by_name = false;
    for (uint32_t k = 0; captured && k < g->nodes[n].n_outputs; k++)
      read_by_name |= captured[g->nodes[n].outputs[k]];
    free(captured);
    if (read_by_name) continue;
    mx_status st = inline_branch(g, (mx_node_id)n, branch);
    if (st != MX_OK) return st;
    (*folded)++;
  }
  return MX_OK;
}
