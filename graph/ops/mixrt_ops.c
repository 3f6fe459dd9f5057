/* Ops of mixrt's own domain "mixrt".
 *
 * PartitionedCall: runs a subgraph (GRAPH attribute "body") as one node of a partitioned root
 * graph; INT attribute "unknown" says whether the cluster is KNOWN (0) or UNKNOWN (1), INTS
 * attribute "const_inputs" lists the inputs fed by shared constants. Input i of the call is
 * input i of the body, output k of the call is output k of the body.
 *
 * Inference maps the call's inputs onto the body's inputs and the body's inferred outputs onto
 * the call's outputs. At compile time the body keeps the result (its inputs take the call's
 * shapes and symbolic values and the body is inferred in place, so binding a symbol on the root
 * reaches every body). At run time (concrete shapes, scratch symbol table) nothing is written:
 * the body is inferred on local copies. */
#include <stdlib.h>
#include <string.h>

#include "graph/ops/groups.h"
#include "graph/passes/passes.h"

/* Params of a call. `body` is the one pointer in a params struct: it is borrowed from the
 * node's own "body" attribute and lives as long as the node; code that hashes or serializes
 * params must write the attributes of a PartitionedCall instead of these bytes. */
typedef struct mx_partitioned_call_params {
  const mx_graph *body; /* the node's subgraph (borrowed) */
  int64_t unknown;      /* 0 KNOWN, 1 UNKNOWN */
} mx_partitioned_call_params;

static const mx_attr_spec call_attrs[] = {
    {.name = "body", .type = MX_ATTR_GRAPH, .required = true},
    {.name = "unknown", .type = MX_ATTR_INT, .def_i = 0},
    {.name = "const_inputs", .type = MX_ATTR_INTS},
    {0},
};

static mx_status call_parse(const mx_parse_ctx *pc, void *params) {
  mx_partitioned_call_params *p = params;
  const mx_attr *body = mx__parse_attr(pc, "body");
  if (!body || !body->graph) return mx__parse_fail(pc, "attribute 'body' holds no graph");
  p->body = body->graph;
  p->unknown = mx__parse_int(pc, "unknown");
  if (p->unknown != 0 && p->unknown != 1)
    return mx__parse_fail(pc, "attribute 'unknown' must be 0 or 1, not %lld", (long long)p->unknown);
  const mx_attr *ci = mx__parse_attr(pc, "const_inputs");
  for (size_t i = 0; ci && i < ci->count; i++)
    if (ci->ints[i] < 0 || ci->ints[i] >= (int64_t)pc->n_inputs)
      return mx__parse_fail(pc, "const_inputs names input %lld of %u", (long long)ci->ints[i], pc->n_inputs);
  if (pc->n_inputs != p->body->n_inputs || pc->n_outputs != p->body->n_outputs)
    return mx__parse_fail(pc, "the call has %u inputs and %u outputs, its body '%s' %zu and %zu",
                          pc->n_inputs, pc->n_outputs, p->body->name, p->body->n_inputs, p->body->n_outputs);
  return MX_OK;
}

static mx_status check_inputs(mx_infer_ctx *ctx, const mx_graph *body) {
  for (uint32_t i = 0; i < ctx->n_in; i++) {
    const mx_value *bv = &body->values[body->inputs[i]];
    if (!ctx->in[i].present)
      return mx__infer_fail(ctx, MX_ERR_INVALID_GRAPH, "input %u ('%s' in body '%s') is missing", i, bv->name,
                            body->name);
    if (bv->dtype != MX_DTYPE_UNDEFINED && ctx->in[i].dtype != bv->dtype)
      return mx__infer_fail(ctx, MX_ERR_DTYPE, "input %u is %s but body '%s' declares '%s' as %s", i,
                            mx_dtype_name(ctx->in[i].dtype), body->name, bv->name, mx_dtype_name(bv->dtype));
  }
  return MX_OK;
}

/* Copies what the body knows about value v into call output k. */
static void set_output(mx_infer_ctx *ctx, uint32_t k, mx_dtype dtype, const mx_shape *shape, const mx_dim *sv,
                       int32_t sv_len) {
  mx_value_info *o = &ctx->out[k];
  o->dtype = dtype;
  o->shape = *shape;
  o->sv_len = -1;
  if (sv && sv_len >= 0 && sv_len <= MX_SV_MAX) {
    memcpy(mx__infer_out_sv(ctx, k), sv, (size_t)sv_len * sizeof *sv);
    o->sv_len = sv_len;
  }
}

/* Compile time: the body's inputs take the call's inputs, then the body is inferred in place. */
static mx_status infer_in_place(mx_infer_ctx *ctx, mx_graph *body) {
  if (body->syms != ctx->syms)
    return mx__infer_fail(ctx, MX_ERR_INVALID_GRAPH, "body '%s' does not share the graph's symbol table",
                          body->name);
  for (uint32_t i = 0; i < ctx->n_in; i++) {
    mx_value *bv = &body->values[body->inputs[i]];
    const mx_value_info *in = &ctx->in[i];
    bv->dtype = in->dtype;
    bv->shape = in->shape;
    bv->sv = NULL;
    bv->sv_len = -1;
    if (in->sv && in->sv_len >= 0) {
      bv->sv = mx__arena_memdup(&body->arena, in->sv, (size_t)in->sv_len * sizeof *in->sv, 8);
      if (!bv->sv)
        return mx__infer_fail(ctx, MX_ERR_OUT_OF_MEMORY, "out of memory setting the inputs of '%s'",
                              body->name);
      bv->sv_len = in->sv_len;
    }
  }
  mx_status st = mx_graph_infer(body);
  if (st != MX_OK) return mx__infer_fail(ctx, st, "body '%s': %s", body->name, mx_graph_last_error(body));
  for (uint32_t k = 0; k < ctx->n_out; k++) {
    const mx_value *bv = &body->values[body->outputs[k]];
    set_output(ctx, k, bv->dtype, &bv->shape, bv->sv, bv->sv_len);
  }
  return MX_OK;
}

/* Local value records of a body inferred at run time: info[v] for every value, its sv (if
 * any) in sv[v * MX_SV_MAX ..). */
typedef struct scratch_values {
  mx_value_info *info; /* n_values records */
  mx_dim *sv;          /* MX_SV_MAX entries per value */
} scratch_values;

static void scratch_get(void *user, mx_value_id v, mx_value_info *info) {
  const scratch_values *s = user;
  *info = s->info[v];
}

static mx_status scratch_put(void *user, mx_value_id v, const mx_value_info *out) {
  scratch_values *s = user;
  s->info[v] = *out;
  s->info[v].sv = NULL;
  if (out->sv && out->sv_len >= 0) {
    memcpy(s->sv + (size_t)v * MX_SV_MAX, out->sv, (size_t)out->sv_len * sizeof *s->sv);
    s->info[v].sv = s->sv + (size_t)v * MX_SV_MAX;
  }
  return MX_OK;
}

/* Run time: infers the body on local value records (nothing in the body changes). Nodes are
 * visited in a topological order computed here (first ready, first visited). */
static mx_status infer_scratch(mx_infer_ctx *ctx, const mx_graph *body) {
  size_t nv = body->n_values, nn = body->n_nodes;
  mx_status st = MX_OK;
  mx_value_info *info = calloc(nv ? nv : 1, sizeof *info);
  mx_dim *sv = malloc((nv ? nv : 1) * MX_SV_MAX * sizeof *sv); /* MX_SV_MAX per value */
  uint32_t *indeg = calloc(nn ? nn : 1, sizeof *indeg);
  mx_node_id *queue = malloc((nn ? nn : 1) * sizeof *queue);
  if (!info || !sv || !indeg || !queue) goto oom;
  for (size_t v = 0; v < nv; v++) {
    mx__value_info_of(body, (mx_value_id)v, &info[v]);
    if (info[v].sv) {
      memcpy(sv + v * MX_SV_MAX, info[v].sv, (size_t)info[v].sv_len * sizeof *sv);
      info[v].sv = sv + v * MX_SV_MAX;
    }
  }
  for (uint32_t i = 0; i < ctx->n_in; i++) {
    mx_value_id v = body->inputs[i];
    info[v] = ctx->in[i];
    info[v].sv = NULL;
    if (ctx->in[i].sv && ctx->in[i].sv_len >= 0 && ctx->in[i].sv_len <= MX_SV_MAX) {
      memcpy(sv + (size_t)v * MX_SV_MAX, ctx->in[i].sv, (size_t)ctx->in[i].sv_len * sizeof *sv);
      info[v].sv = sv + (size_t)v * MX_SV_MAX;
    } else {
      info[v].sv_len = -1;
    }
  }
  size_t qn = 0;
  for (size_t n = 0; n < nn; n++) {
    const mx_node *nd = &body->nodes[n];
    if (nd->flags & MX_NODE_DEAD) continue;
    for (uint32_t k = 0; k < nd->n_inputs; k++) {
      mx_value_id v = nd->inputs[k];
      if (v == MX_NO_VALUE) continue;
      mx_node_id pr = body->values[v].producer;
      if (pr != MX_NO_NODE && !(body->nodes[pr].flags & MX_NODE_DEAD)) indeg[n]++;
    }
    if (indeg[n] == 0) queue[qn++] = (mx_node_id)n;
  }
  for (size_t qh = 0; qh < qn; qh++) {
    const mx_node *nd = &body->nodes[queue[qh]];
    for (uint32_t k = 0; k < nd->n_outputs; k++) {
      const mx_value *val = &body->values[nd->outputs[k]];
      for (size_t c = 0; c < val->n_consumers; c++) {
        mx_node_id cn = val->consumers[c];
        if (!(body->nodes[cn].flags & MX_NODE_DEAD) && --indeg[cn] == 0) queue[qn++] = cn;
      }
    }
  }
  scratch_values values = {info, sv};
  mx__infer_io io = {scratch_get, scratch_put, &values};
  st = mx__graph_infer_nodes(body, queue, qn, ctx->syms, true, &io, "body", ctx->err);
  if (st != MX_OK) goto done;
  for (uint32_t k = 0; k < ctx->n_out; k++) {
    const mx_value_info *o = &info[body->outputs[k]];
    set_output(ctx, k, o->dtype, &o->shape, o->sv, o->sv_len);
  }
  goto done;
oom:
  st = mx__infer_fail(ctx, MX_ERR_OUT_OF_MEMORY, "out of memory inferring body '%s'", body->name);
done:
  free(info);
  free(sv);
  free(indeg);
  free(queue);
  return st;
}

static mx_status call_infer(mx_infer_ctx *ctx) {
  const mx_partitioned_call_params *p = ctx->params;
  const mx_graph *body = p->body;
  if (ctx->n_in != body->n_inputs || ctx->n_out != body->n_outputs)
    return mx__infer_fail(ctx, MX_ERR_INVALID_GRAPH,
                          "the call has %u inputs and %u outputs, its body '%s' %zu and %zu", ctx->n_in,
                          ctx->n_out, body->name, body->n_inputs, body->n_outputs);
  mx_status st = check_inputs(ctx, body);
  if (st != MX_OK) return st;
  /* Compile-time inference writes the inferred shapes into the body the node owns. */
  return ctx->runtime ? infer_scratch(ctx, body) : infer_in_place(ctx, (mx_graph *)body);
}

static const mx_op_def op_partitioned_call = {
    .name = "PartitionedCall",
    .domain = "mixrt",
    .min_inputs = 0,
    .max_inputs = MX_VARIADIC,
    .min_outputs = 0,
    .max_outputs = MX_VARIADIC,
    .attrs = call_attrs,
    .params_size = sizeof(mx_partitioned_call_params),
    .parse = call_parse,
    .infer = call_infer,
};

const mx_op_def *const mx__ops_mixrt[] = {&op_partitioned_call, NULL};
