/* Op definitions of the LLM building blocks group: SwiGLU (opset 28), LinearAttention and
 * CausalConvWithState (opset 27) and FlexAttention (domain ai.onnx.preview, version 1).
 *
 * LinearAttention takes packed [batch, seq, heads * size] inputs and keeps a recurrent state
 * [batch, kv_heads, d_k, d_v]; CausalConvWithState keeps the last kernel - 1 positions of each
 * channel. Both give the new state as their second output, so decode graphs feed it back. The
 * batch and sequence dims stay symbolic. FlexAttention's score_mod / prob_mod subgraphs do not
 * change its output shape; graph inference infers them against the [B, H, L, S] scores
 * (mx__flex_infer_mods, called from graph/passes/infer.c), and a node carrying them runs in the
 * reference interpreter (reference/flex.c), since kernels run no subgraph. */
#include <string.h>

#include "graph/ir.h"
#include "graph/ops/groups.h"
#include "graph/ops/llm_params.h"
#include "graph/ops/op.h"
#include "graph/passes/passes.h"

static mx_status need_float(mx_infer_ctx *ctx, uint32_t i, const char *op) {
  if (mx_dtype_is_float(ctx->in[i].dtype)) return MX_OK;
  return mx__infer_fail(ctx, MX_ERR_DTYPE,
                        "input %u has dtype %s; %s takes float16, bfloat16, float32 or float64", i,
                        mx_dtype_name(ctx->in[i].dtype), op);
}

/* Fails unless input i (when present and ranked) has rank r. */
static mx_status need_rank(mx_infer_ctx *ctx, uint32_t i, int32_t r, const char *what) {
  if (!mx__in_present(ctx, i)) return MX_OK;
  int32_t have = ctx->in[i].shape.rank;
  if (have == MX_RANK_UNKNOWN || have == r) return MX_OK;
  return mx__infer_fail(ctx, MX_ERR_SHAPE, "input %u (%s) has rank %d, not %d", i, what, (int)have, (int)r);
}

/* Dim d of input i, or unknown when the input is absent or unranked. */
static mx_dim in_dim(const mx_infer_ctx *ctx, uint32_t i, int32_t d) {
  if (!mx__in_present(ctx, i) || ctx->in[i].shape.rank == MX_RANK_UNKNOWN || d >= ctx->in[i].shape.rank)
    return MX_DIM_UNKNOWN;
  return ctx->in[i].shape.dims[d];
}

/* hidden / heads, failing when a concrete hidden size does not divide. */
static mx_status per_head(mx_infer_ctx *ctx, mx_dim hidden, int32_t heads, const char *what, mx_dim *out) {
  *out = MX_DIM_UNKNOWN;
  if (mx_dim_is_unknown(hidden)) return MX_OK;
  if (mx_dim_is_concrete(hidden) && hidden % heads != 0)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "%s size %lld is not a multiple of %d heads", what,
                          (long long)hidden, (int)heads);
  *out = mx_sym_div(ctx->syms, hidden, mx_sym_const(ctx->syms, heads));
  return MX_OK;
}

/* --- SwiGLU ------------------------------------------------------------------------------------- */

static const mx_attr_spec swiglu_attrs[] = {
    {.name = "alpha", .type = MX_ATTR_FLOAT, .def_f = 1.0f},
    {0},
};

static mx_status swiglu_parse(const mx_parse_ctx *pc, void *params) {
  mx_swiglu_params *p = params;
  memset(p, 0, sizeof *p);
  p->alpha = mx__parse_float(pc, "alpha");
  return MX_OK;
}

static mx_status swiglu_infer(mx_infer_ctx *ctx) {
  mx_status st = need_float(ctx, 0, "SwiGLU");
  if (st == MX_OK) st = mx__infer_same_dtype(ctx, 1, 0);
  if (st != MX_OK) return st;
  ctx->out[0].dtype = ctx->in[0].dtype;
  return mx__broadcast_shapes(ctx, &ctx->in[0].shape, &ctx->in[1].shape, &ctx->out[0].shape);
}

static const mx_op_def op_swiglu = {
    .name = "SwiGLU",
    .min_inputs = 2,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .flags = MX_OP_ELEMENTWISE,
    .attrs = swiglu_attrs,
    .params_size = sizeof(mx_swiglu_params),
    .parse = swiglu_parse,
    .infer = swiglu_infer,
};

/* --- LinearAttention ---------------------------------------------------------------------------- */

enum { LA_Q, LA_K, LA_V, LA_PAST, LA_DECAY, LA_BETA };

static const mx_attr_spec linatt_attrs[] = {
    {.name = "chunk_size", .type = MX_ATTR_INT, .def_i = 64},
    {.name = "kv_num_heads", .type = MX_ATTR_INT, .required = true},
    {.name = "q_num_heads", .type = MX_ATTR_INT, .required = true},
    {.name = "scale", .type = MX_ATTR_FLOAT, .def_f = 0.0f},
    {.name = "update_rule", .type = MX_ATTR_STRING, .def_s = "gated_delta"},
    {0},
};

static mx_status linatt_parse(const mx_parse_ctx *pc, void *params) {
  mx_linear_attention_params *p = params;
  memset(p, 0, sizeof *p);
  int64_t qh = mx__parse_int(pc, "q_num_heads"), kvh = mx__parse_int(pc, "kv_num_heads");
  if (qh <= 0 || kvh <= 0 || qh > INT32_MAX || kvh > INT32_MAX || qh % kvh != 0)
    return mx__parse_fail(pc, "q_num_heads %lld must be a positive multiple of kv_num_heads %lld",
                          (long long)qh, (long long)kvh);
  p->q_num_heads = (int32_t)qh;
  p->kv_num_heads = (int32_t)kvh;
  p->scale = mx__parse_float(pc, "scale");
  char rule[32];
  mx_status st = mx__parse_string(pc, "update_rule", rule, sizeof rule);
  if (st != MX_OK) return st;
  static const char *const rules[] = {"linear", "gated", "delta", "gated_delta"};
  p->update_rule = -1;
  for (int32_t i = 0; i < 4; i++)
    if (strcmp(rule, rules[i]) == 0) p->update_rule = i;
  if (p->update_rule < 0)
    return mx__parse_fail(pc, "update_rule '%s' is not linear, gated, delta or gated_delta", rule);
  bool gated = p->update_rule == MX_LINATT_GATED || p->update_rule == MX_LINATT_GATED_DELTA;
  bool delta = p->update_rule == MX_LINATT_DELTA || p->update_rule == MX_LINATT_GATED_DELTA;
  if (gated && pc->n_inputs <= LA_DECAY)
    return mx__parse_fail(pc, "update_rule '%s' needs input 4 (decay)", rule);
  if (delta && pc->n_inputs <= LA_BETA)
    return mx__parse_fail(pc, "update_rule '%s' needs input 5 (beta)", rule);
  return MX_OK;
}

static mx_status linatt_infer(mx_infer_ctx *ctx) {
  const mx_linear_attention_params *p = ctx->params;
  bool gated = p->update_rule == MX_LINATT_GATED || p->update_rule == MX_LINATT_GATED_DELTA;
  bool delta = p->update_rule == MX_LINATT_DELTA || p->update_rule == MX_LINATT_GATED_DELTA;
  mx_status st = need_float(ctx, LA_Q, "LinearAttention");
  if (st == MX_OK) st = mx__infer_same_dtype(ctx, LA_K, LA_Q);
  if (st == MX_OK) st = mx__infer_same_dtype(ctx, LA_V, LA_Q);
  if (st == MX_OK && mx__in_present(ctx, LA_DECAY)) st = mx__infer_same_dtype(ctx, LA_DECAY, LA_Q);
  if (st == MX_OK && mx__in_present(ctx, LA_BETA)) st = mx__infer_same_dtype(ctx, LA_BETA, LA_Q);
  if (st == MX_OK && mx__in_present(ctx, LA_PAST)) st = need_float(ctx, LA_PAST, "LinearAttention");
  if (st != MX_OK) return st;
  if (gated && !mx__in_present(ctx, LA_DECAY))
    return mx__infer_fail(ctx, MX_ERR_INVALID_GRAPH, "the gated update rules need input 4 (decay)");
  if (delta && !mx__in_present(ctx, LA_BETA))
    return mx__infer_fail(ctx, MX_ERR_INVALID_GRAPH, "the delta update rules need input 5 (beta)");
  static const char *const names[] = {"query", "key", "value", "past_state", "decay", "beta"};
  for (uint32_t i = 0; i < 6; i++)
    if ((st = need_rank(ctx, i, i == LA_PAST ? 4 : 3, names[i])) != MX_OK) return st;
  mx_dim b = in_dim(ctx, LA_Q, 0), t = in_dim(ctx, LA_Q, 1), dk, dv, dk_from_k;
  if ((st = per_head(ctx, in_dim(ctx, LA_Q, 2), p->q_num_heads, "query hidden", &dk)) != MX_OK) return st;
  if ((st = per_head(ctx, in_dim(ctx, LA_K, 2), p->kv_num_heads, "key hidden", &dk_from_k)) != MX_OK)
    return st;
  if ((st = per_head(ctx, in_dim(ctx, LA_V, 2), p->kv_num_heads, "value hidden", &dv)) != MX_OK) return st;
  if ((st = mx__check_same_dim(ctx, dk, dk_from_k, "LinearAttention head size of query and key")) != MX_OK)
    return st;
  if (mx_dim_is_unknown(dk)) dk = dk_from_k;
  for (uint32_t i = LA_K; i <= LA_BETA; i++) {
    if (i == LA_PAST) continue;
    if ((st = mx__check_same_dim(ctx, in_dim(ctx, i, 0), b, "LinearAttention batch")) != MX_OK) return st;
    if ((st = mx__check_same_dim(ctx, in_dim(ctx, i, 1), t, "LinearAttention sequence length")) != MX_OK)
      return st;
  }
  if (mx__in_present(ctx, LA_PAST)) {
    mx_dim want[4] = {b, p->kv_num_heads, dk, dv};
    for (int32_t d = 0; d < 4; d++)
      if ((st = mx__check_same_dim(ctx, in_dim(ctx, LA_PAST, d), want[d], "LinearAttention past_state")) !=
          MX_OK)
        return st;
  }
  mx_dim decay_last = in_dim(ctx, LA_DECAY, 2);
  if (mx_dim_is_concrete(decay_last) && decay_last != p->kv_num_heads && mx_dim_is_concrete(dk) &&
      decay_last != p->kv_num_heads * dk)
    return mx__infer_fail(ctx, MX_ERR_SHAPE,
                          "decay has %lld values per step; it needs kv_num_heads or kv_num_heads * d_k",
                          (long long)decay_last);
  mx_dim beta_last = in_dim(ctx, LA_BETA, 2);
  if (mx_dim_is_concrete(beta_last) && beta_last != 1 && beta_last != p->kv_num_heads)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "beta has %lld values per step; it needs 1 or kv_num_heads",
                          (long long)beta_last);
  mx_dtype dt = ctx->in[LA_Q].dtype;
  ctx->out[0].dtype = dt;
  ctx->out[0].shape.rank = 3;
  ctx->out[0].shape.dims[0] = b;
  ctx->out[0].shape.dims[1] = t;
  ctx->out[0].shape.dims[2] = mx_dim_is_unknown(dv) ? dv : mx_sym_mul(ctx->syms, dv, p->q_num_heads);
  if (ctx->n_out > 1) {
    ctx->out[1].dtype = mx__in_present(ctx, LA_PAST) ? ctx->in[LA_PAST].dtype : dt;
    ctx->out[1].shape.rank = 4;
    ctx->out[1].shape.dims[0] = b;
    ctx->out[1].shape.dims[1] = p->kv_num_heads;
    ctx->out[1].shape.dims[2] = dk;
    ctx->out[1].shape.dims[3] = dv;
  }
  return MX_OK;
}

static const mx_op_def op_linatt = {
    .name = "LinearAttention",
    .min_inputs = 3,
    .max_inputs = 6,
    .min_outputs = 1,
    .max_outputs = 2,
    .attrs = linatt_attrs,
    .params_size = sizeof(mx_linear_attention_params),
    .parse = linatt_parse,
    .infer = linatt_infer,
};

/* --- FlexAttention (ai.onnx.preview) ------------------------------------------------------------ */

static const mx_attr_spec flex_attrs[] = {
    {.name = "prob_mod", .type = MX_ATTR_GRAPH},
    {.name = "scale", .type = MX_ATTR_FLOAT, .def_f = 0.0f},
    {.name = "score_mod", .type = MX_ATTR_GRAPH},
    {.name = "softmax_precision", .type = MX_ATTR_INT, .def_i = 0},
    {0},
};

static mx_status flex_parse(const mx_parse_ctx *pc, void *params) {
  mx_flex_attention_params *p = params;
  memset(p, 0, sizeof *p);
  /* The mods are subgraphs: the reference interpreter runs them (reference/flex.c). */
  p->mods = (mx__parse_attr(pc, "score_mod") ? MX_FLEX_SCORE_MOD : 0) |
            (mx__parse_attr(pc, "prob_mod") ? MX_FLEX_PROB_MOD : 0);
  p->has_scale = mx__parse_attr(pc, "scale") != NULL;
  p->scale = mx__parse_float(pc, "scale");
  int64_t prec = mx__parse_int(pc, "softmax_precision");
  if (prec != 0 && !mx_dtype_is_float((mx_dtype)prec))
    return mx__parse_fail(pc, "softmax_precision %lld is not a floating-point dtype", (long long)prec);
  p->softmax_precision = (int32_t)prec;
  return MX_OK;
}

static mx_status flex_infer(mx_infer_ctx *ctx) {
  mx_status st = need_float(ctx, 0, "FlexAttention");
  if (st == MX_OK) st = mx__infer_same_dtype(ctx, 1, 0);
  if (st == MX_OK) st = mx__infer_same_dtype(ctx, 2, 0);
  static const char *const names[] = {"Q", "K", "V"};
  for (uint32_t i = 0; i < 3 && st == MX_OK; i++) st = need_rank(ctx, i, 4, names[i]);
  if (st != MX_OK) return st;
  mx_dim hq = in_dim(ctx, 0, 1), hkv = in_dim(ctx, 1, 1);
  if ((st = mx__check_same_dim(ctx, in_dim(ctx, 0, 3), in_dim(ctx, 1, 3),
                               "FlexAttention head size of Q and K")) != MX_OK)
    return st;
  if ((st = mx__check_same_dim(ctx, in_dim(ctx, 1, 2), in_dim(ctx, 2, 2),
                               "FlexAttention sequence length of K and V")) != MX_OK)
    return st;
  if ((st = mx__check_same_dim(ctx, hkv, in_dim(ctx, 2, 1), "FlexAttention head count of K and V")) != MX_OK)
    return st;
  if (mx_dim_is_concrete(hq) && mx_dim_is_concrete(hkv) && (hkv == 0 || hq % hkv != 0))
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "%lld query heads are not a multiple of %lld key/value heads",
                          (long long)hq, (long long)hkv);
  ctx->out[0].dtype = ctx->in[0].dtype;
  mx_shape *y = &ctx->out[0].shape;
  y->rank = 4;
  y->dims[0] = in_dim(ctx, 0, 0);
  y->dims[1] = hq;
  y->dims[2] = in_dim(ctx, 0, 2);
  y->dims[3] = in_dim(ctx, 2, 3);
  return MX_OK;
}

mx_status mx__flex_infer_mods(const mx_graph *g, mx_node_id nid, mx_symtab *syms, const mx_value_info *in,
                              mx_error *err) {
  const mx_node *nd = &g->nodes[nid];
  static const char *const mods[] = {"score_mod", "prob_mod"};
  const mx_dim unknown = MX_DIM_UNKNOWN;
  /* The scores: [batch, q heads, q length] of Q, kv length of K; in Q's element type. */
  const mx_dim b = in[0].shape.rank == 4 ? in[0].shape.dims[0] : unknown;
  const mx_dim h = in[0].shape.rank == 4 ? in[0].shape.dims[1] : unknown;
  const mx_dim l = in[0].shape.rank == 4 ? in[0].shape.dims[2] : unknown;
  const mx_dim s = nd->n_inputs > 1 && in[1].shape.rank == 4 ? in[1].shape.dims[2] : unknown;
  const mx_dim extent[4] = {b, h, l, s};
  mx_dtype dtypes[5];
  mx_shape shapes[5];
  memset(shapes, 0, sizeof shapes);
  dtypes[0] = in[0].dtype;
  shapes[0].rank = 4;
  for (int k = 0; k < 4; k++) shapes[0].dims[k] = extent[k];
  /* The five-input form's index tensors broadcast against the scores: [B,1,1,1] ... [1,1,1,S]. */
  for (int i = 1; i < 5; i++) {
    dtypes[i] = MX_INT64;
    shapes[i].rank = 4;
    for (int k = 0; k < 4; k++) shapes[i].dims[k] = k == i - 1 ? extent[k] : 1;
  }
  for (int m = 0; m < 2; m++) {
    const mx_attr *a = mx__node_attr(nd, mods[m]);
    if (!a || a->type != MX_ATTR_GRAPH || !a->graph) continue;
    if (a->graph->n_inputs != 1 && a->graph->n_inputs != 5)
      return mx__node_fail(err, nd, MX_ERR_INVALID_GRAPH,
                           "attribute %s: the subgraph has %zu inputs; it takes 1 (the scores) or 5 (score, "
                           "batch, head, q_idx, kv_idx)",
                           mods[m], a->graph->n_inputs);
    if (a->graph->n_outputs != 1)
      return mx__node_fail(err, nd, MX_ERR_INVALID_GRAPH, "attribute %s: the subgraph has %zu outputs, not 1",
                           mods[m], a->graph->n_outputs);
    mx_status st = mx__subgraph_infer_as(g, nid, syms, a->graph, mods[m], dtypes, shapes, err);
    if (st != MX_OK) return st;
  }
  return MX_OK;
}

static const mx_op_def op_flex = {
    .name = "FlexAttention",
    .domain = "ai.onnx.preview",
    .min_inputs = 3,
    .max_inputs = 3,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = flex_attrs,
    .params_size = sizeof(mx_flex_attention_params),
    .parse = flex_parse,
    .infer = flex_infer,
};

/* --- CausalConvWithState ------------------------------------------------------------------------ */

static const mx_attr_spec causal_conv_attrs[] = {
    {.name = "activation", .type = MX_ATTR_STRING, .def_s = "none"},
    {0},
};

static mx_status causal_conv_parse(const mx_parse_ctx *pc, void *params) {
  mx_causal_conv_params *p = params;
  memset(p, 0, sizeof *p);
  char act[16];
  mx_status st = mx__parse_string(pc, "activation", act, sizeof act);
  if (st != MX_OK) return st;
  if (strcmp(act, "silu") == 0 || strcmp(act, "swish") == 0)
    p->silu = 1;
  else if (strcmp(act, "none") != 0)
    return mx__parse_fail(pc, "activation '%s' is not silu, swish or none", act);
  return MX_OK;
}

static mx_status causal_conv_infer(mx_infer_ctx *ctx) {
  mx_status st = need_float(ctx, 0, "CausalConvWithState");
  if (st == MX_OK) st = mx__infer_same_dtype(ctx, 1, 0);
  if (st == MX_OK && mx__in_present(ctx, 2)) st = mx__infer_same_dtype(ctx, 2, 0);
  if (st == MX_OK && mx__in_present(ctx, 3)) st = mx__infer_same_dtype(ctx, 3, 0);
  if (st == MX_OK) st = need_rank(ctx, 0, 3, "input");
  if (st == MX_OK) st = need_rank(ctx, 1, 3, "weight");
  if (st == MX_OK) st = need_rank(ctx, 2, 1, "bias");
  if (st == MX_OK) st = need_rank(ctx, 3, 3, "past_state");
  if (st != MX_OK) return st;
  mx_dim b = in_dim(ctx, 0, 0), c = in_dim(ctx, 0, 1), k = in_dim(ctx, 1, 2);
  mx_dim state_len = mx_dim_is_unknown(k) ? MX_DIM_UNKNOWN : mx_sym_sub(ctx->syms, k, 1);
  if ((st = mx__check_same_dim(ctx, in_dim(ctx, 1, 0), c, "CausalConvWithState weight channels")) != MX_OK)
    return st;
  mx_dim mid = in_dim(ctx, 1, 1);
  if (mx_dim_is_concrete(mid) && mid != 1)
    return mx__infer_fail(ctx, MX_ERR_SHAPE,
                          "weight is [%lld, %lld, k]; a depthwise kernel is [channels, 1, k]",
                          (long long)in_dim(ctx, 1, 0), (long long)mid);
  if (mx_dim_is_concrete(k) && k < 1) return mx__infer_fail(ctx, MX_ERR_SHAPE, "the kernel size is 0");
  if ((st = mx__check_same_dim(ctx, in_dim(ctx, 2, 0), c, "CausalConvWithState bias channels")) != MX_OK)
    return st;
  mx_dim want_state[3] = {b, c, state_len};
  for (int32_t d = 0; d < 3 && mx__in_present(ctx, 3); d++)
    if ((st = mx__check_same_dim(ctx, in_dim(ctx, 3, d), want_state[d], "CausalConvWithState past_state")) !=
        MX_OK)
      return st;
  ctx->out[0].dtype = ctx->in[0].dtype;
  ctx->out[0].shape = ctx->in[0].shape;
  if (ctx->n_out > 1) {
    ctx->out[1].dtype = ctx->in[0].dtype;
    ctx->out[1].shape.rank = 3;
    for (int32_t d = 0; d < 3; d++) ctx->out[1].shape.dims[d] = want_state[d];
  }
  return MX_OK;
}

static const mx_op_def op_causal_conv = {
    .name = "CausalConvWithState",
    .min_inputs = 2,
    .max_inputs = 4,
    .min_outputs = 1,
    .max_outputs = 2,
    .attrs = causal_conv_attrs,
    .params_size = sizeof(mx_causal_conv_params),
    .parse = causal_conv_parse,
    .infer = causal_conv_infer,
};

const mx_op_def *const mx__ops_llm[] = {
    &op_swiglu, &op_linatt, &op_flex, &op_causal_conv, NULL,
};
