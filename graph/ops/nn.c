/* Op definitions of the nn group: Softmax and LogSoftmax (2-D coercion before opset 13, a
 * single axis from 13), LayerNormalization (opset 17, optional Mean/InvStdDev outputs),
 * RMSNormalization (opset 23), Attention (opsets 23 and 24: 3-D or 4-D inputs, grouped-query
 * heads, past/present KV cache, masks, softcap, qk_matmul_output modes, nonpad_kv_seqlen) and
 * RotaryEmbedding (opset 23).
 *
 * Attention's inference is where decode graphs get their dynamic dim: present_key/value and
 * qk_matmul_output have past_sequence_length + kv_sequence_length rows, kept as a symbolic sum
 * (`past + 1` for one decode step over a symbolic cache length). */
#include <stdio.h>
#include <string.h>

#include "graph/ops/groups.h"
#include "graph/ops/nn_params.h"
#include "graph/ops/op.h"

static mx_status need_float(mx_infer_ctx *ctx, uint32_t i, const char *op) {
  if (mx_dtype_is_float(ctx->in[i].dtype)) return MX_OK;
  return mx__infer_fail(ctx, MX_ERR_DTYPE,
                        "input %u has dtype %s; %s takes float16, bfloat16, float32 or float64", i,
                        mx_dtype_name(ctx->in[i].dtype), op);
}

/* --- Softmax / LogSoftmax ----------------------------------------------------------------------- */

static const mx_attr_spec softmax_attrs[] = {
    {.name = "axis", .type = MX_ATTR_INT, .def_i = -1},
    {0},
};

static mx_status softmax_parse_common(const mx_parse_ctx *pc, void *params, int log) {
  mx_softmax_params *p = params;
  memset(p, 0, sizeof *p);
  p->flatten = pc->opset < 13;
  /* The default axis is 1 before opset 13 and -1 from 13 on. */
  p->axis = mx__parse_attr(pc, "axis") ? mx__parse_int(pc, "axis") : (p->flatten ? 1 : -1);
  p->log = log;
  return MX_OK;
}
static mx_status softmax_parse(const mx_parse_ctx *pc, void *params) {
  return softmax_parse_common(pc, params, 0);
}
static mx_status logsoftmax_parse(const mx_parse_ctx *pc, void *params) {
  return softmax_parse_common(pc, params, 1);
}

static mx_status softmax_infer(mx_infer_ctx *ctx) {
  const mx_softmax_params *p = ctx->params;
  mx_status st = need_float(ctx, 0, p->log ? "LogSoftmax" : "Softmax");
  if (st != MX_OK) return st;
  const mx_shape *s = &ctx->in[0].shape;
  int32_t axis;
  if (s->rank != MX_RANK_UNKNOWN) {
    if (!mx__norm_axis(p->axis, s->rank, &axis))
      return mx__infer_fail(ctx, MX_ERR_SHAPE, "axis %lld is out of range for rank %d", (long long)p->axis,
                            (int)s->rank);
  }
  ctx->out[0].dtype = ctx->in[0].dtype;
  ctx->out[0].shape = *s;
  return MX_OK;
}

static const mx_op_def op_softmax = {
    .name = "Softmax",
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = softmax_attrs,
    .params_size = sizeof(mx_softmax_params),
    .parse = softmax_parse,
    .infer = softmax_infer,
};

static const mx_op_def op_logsoftmax = {
    .name = "LogSoftmax",
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = softmax_attrs,
    .params_size = sizeof(mx_softmax_params),
    .parse = logsoftmax_parse,
    .infer = softmax_infer,
};

/* --- LayerNormalization / RMSNormalization ------------------------------------------------------ */

static const mx_attr_spec norm_attrs[] = {
    {.name = "axis", .type = MX_ATTR_INT, .def_i = -1},
    {.name = "epsilon", .type = MX_ATTR_FLOAT, .def_f = 1e-5f},
    {.name = "stash_type", .type = MX_ATTR_INT, .def_i = 1},
    {0},
};

static mx_status norm_parse(const mx_parse_ctx *pc, void *params) {
  mx_norm_params *p = params;
  memset(p, 0, sizeof *p);
  p->axis = mx__parse_int(pc, "axis");
  p->epsilon = mx__parse_float(pc, "epsilon");
  int64_t stash = mx__parse_int(pc, "stash_type");
  if (stash != MX_FLOAT32 && stash != MX_FLOAT64 && stash != MX_BFLOAT16 && stash != MX_FLOAT16)
    return mx__parse_fail(pc, "stash_type %lld is not a floating-point dtype", (long long)stash);
  p->stash_type = (int32_t)stash;
  return MX_OK;
}

/* Checks the normalization axis against X's rank; *axis gets the normalized value. */
static mx_status norm_axis(mx_infer_ctx *ctx, int32_t *axis) {
  const mx_norm_params *p = ctx->params;
  const mx_shape *s = &ctx->in[0].shape;
  *axis = 0;
  if (s->rank == MX_RANK_UNKNOWN) return MX_OK;
  if (!mx__norm_axis(p->axis, s->rank, axis))
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "axis %lld is out of range for rank %d", (long long)p->axis,
                          (int)s->rank);
  return MX_OK;
}

static mx_status layernorm_infer(mx_infer_ctx *ctx) {
  const mx_norm_params *p = ctx->params;
  mx_status st = need_float(ctx, 0, "LayerNormalization");
  if (st == MX_OK) st = mx__infer_same_dtype(ctx, 1, 0);
  if (st == MX_OK && mx__in_present(ctx, 2)) st = mx__infer_same_dtype(ctx, 2, 0);
  int32_t axis;
  if (st == MX_OK) st = norm_axis(ctx, &axis);
  if (st != MX_OK) return st;
  const mx_shape *s = &ctx->in[0].shape;
  ctx->out[0].dtype = ctx->in[0].dtype;
  ctx->out[0].shape = *s;
  for (uint32_t i = 1; i < ctx->n_out; i++) {
    ctx->out[i].dtype = (mx_dtype)p->stash_type;
    ctx->out[i].shape = *s;
    for (int32_t d = axis; s->rank != MX_RANK_UNKNOWN && d < s->rank; d++) ctx->out[i].shape.dims[d] = 1;
  }
  return MX_OK;
}

static const mx_op_def op_layernorm = {
    .name = "LayerNormalization",
    .min_inputs = 2,
    .max_inputs = 3,
    .min_outputs = 1,
    .max_outputs = 3,
    .attrs = norm_attrs,
    .params_size = sizeof(mx_norm_params),
    .parse = norm_parse,
    .infer = layernorm_infer,
};

static mx_status rmsnorm_infer(mx_infer_ctx *ctx) {
  mx_status st = need_float(ctx, 0, "RMSNormalization");
  if (st == MX_OK) st = need_float(ctx, 1, "RMSNormalization");
  int32_t axis;
  if (st == MX_OK) st = norm_axis(ctx, &axis);
  if (st != MX_OK) return st;
  /* Y has the scale's element type (V in the ONNX schema). */
  ctx->out[0].dtype = ctx->in[1].dtype;
  ctx->out[0].shape = ctx->in[0].shape;
  return MX_OK;
}

static const mx_op_def op_rmsnorm = {
    .name = "RMSNormalization",
    .min_inputs = 2,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = norm_attrs,
    .params_size = sizeof(mx_norm_params),
    .parse = norm_parse,
    .infer = rmsnorm_infer,
};

/* --- Attention ---------------------------------------------------------------------------------- */

static const mx_attr_spec attention_attrs[] = {
    {.name = "is_causal", .type = MX_ATTR_INT, .def_i = 0},
    {.name = "kv_num_heads", .type = MX_ATTR_INT, .def_i = 0},
    {.name = "q_num_heads", .type = MX_ATTR_INT, .def_i = 0},
    {.name = "qk_matmul_output_mode", .type = MX_ATTR_INT, .def_i = 0},
    {.name = "scale", .type = MX_ATTR_FLOAT, .def_f = 0.0f},
    {.name = "softcap", .type = MX_ATTR_FLOAT, .def_f = 0.0f},
    {.name = "softmax_precision", .type = MX_ATTR_INT, .def_i = 0},
    {0},
};

static mx_status attention_parse(const mx_parse_ctx *pc, void *params) {
  mx_attention_params *p = params;
  memset(p, 0, sizeof *p);
  p->is_causal = mx__parse_int(pc, "is_causal") != 0;
  int64_t qh = mx__parse_int(pc, "q_num_heads"), kvh = mx__parse_int(pc, "kv_num_heads");
  int64_t mode = mx__parse_int(pc, "qk_matmul_output_mode");
  if (qh < 0 || kvh < 0 || qh > INT32_MAX || kvh > INT32_MAX)
    return mx__parse_fail(pc, "q_num_heads %lld / kv_num_heads %lld out of range", (long long)qh,
                          (long long)kvh);
  if (mode < 0 || mode > 3)
    return mx__parse_fail(pc, "qk_matmul_output_mode %lld is not 0..3", (long long)mode);
  if (pc->opset < 24 && pc->n_inputs > 6)
    return mx__parse_fail(pc, "input nonpad_kv_seqlen needs opset 24 (the model imports %lld)",
                          (long long)pc->opset);
  p->q_num_heads = (int32_t)qh;
  p->kv_num_heads = (int32_t)kvh;
  p->qk_matmul_output_mode = (int32_t)mode;
  p->has_scale = mx__parse_attr(pc, "scale") != NULL;
  p->scale = mx__parse_float(pc, "scale");
  p->softcap = mx__parse_float(pc, "softcap");
  if (p->softcap < 0.0f) return mx__parse_fail(pc, "softcap %g is negative", (double)p->softcap);
  int64_t prec = mx__parse_int(pc, "softmax_precision");
  if (prec != 0 && !mx_dtype_is_float((mx_dtype)prec))
    return mx__parse_fail(pc, "softmax_precision %lld is not a floating-point dtype", (long long)prec);
  p->softmax_precision = (int32_t)prec;
  return MX_OK;
}

/* dim / heads, exact when it can be decided; fails when a concrete dim does not divide. */
static mx_status split_heads(mx_infer_ctx *ctx, mx_dim hidden, int32_t heads, const char *what, mx_dim *out) {
  if (mx_dim_is_concrete(hidden) && hidden % heads != 0)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "%s hidden size %lld is not a multiple of %d heads", what,
                          (long long)hidden, (int)heads);
  *out = mx_sym_div(ctx->syms, hidden, mx_sym_const(ctx->syms, heads));
  return MX_OK;
}

static mx_status attention_infer(mx_infer_ctx *ctx) {
  const mx_attention_params *p = ctx->params;
  mx_status st = need_float(ctx, 0, "Attention");
  if (st == MX_OK) st = mx__infer_same_dtype(ctx, 1, 0);
  if (st == MX_OK) st = mx__infer_same_dtype(ctx, 2, 0);
  if (st == MX_OK && mx__in_present(ctx, 3) && ctx->in[3].dtype != MX_BOOL)
    st = mx__infer_same_dtype(ctx, 3, 0);
  if (st == MX_OK && mx__in_present(ctx, 4)) st = mx__infer_same_dtype(ctx, 4, 0);
  if (st == MX_OK && mx__in_present(ctx, 5)) st = mx__infer_same_dtype(ctx, 5, 0);
  if (st != MX_OK) return st;
  if (mx__in_present(ctx, 4) != mx__in_present(ctx, 5))
    return mx__infer_fail(ctx, MX_ERR_INVALID_GRAPH, "past_key and past_value must be given together");
  if (mx__in_present(ctx, 6) && ctx->in[6].dtype != MX_INT64)
    return mx__infer_fail(ctx, MX_ERR_DTYPE, "input 6 (nonpad_kv_seqlen) has dtype %s, not int64",
                          mx_dtype_name(ctx->in[6].dtype));
  mx_dtype dt = ctx->in[0].dtype;
  for (uint32_t i = 0; i < ctx->n_out; i++) {
    ctx->out[i].dtype = dt;
    ctx->out[i].shape.rank = MX_RANK_UNKNOWN;
  }
  const mx_shape *q = &ctx->in[0].shape, *k = &ctx->in[1].shape, *v = &ctx->in[2].shape;
  int32_t r = q->rank != MX_RANK_UNKNOWN ? q->rank : k->rank != MX_RANK_UNKNOWN ? k->rank : v->rank;
  for (int i = 0; i < 3; i++) {
    int32_t ri = ctx->in[i].shape.rank;
    if (ri != MX_RANK_UNKNOWN && ((ri != 3 && ri != 4) || ri != r))
      return mx__infer_fail(ctx, MX_ERR_SHAPE, "Q, K and V must all be 3-D or all 4-D (input %d has rank %d)",
                            i, (int)ri);
  }
  if (r == 3 && (p->q_num_heads <= 0 || p->kv_num_heads <= 0))
    return mx__infer_fail(ctx, MX_ERR_INVALID_GRAPH,
                          "3-D inputs need the q_num_heads and kv_num_heads attributes");
  mx_dim b = MX_DIM_UNKNOWN, hq = MX_DIM_UNKNOWN, sq = MX_DIM_UNKNOWN, dq = MX_DIM_UNKNOWN;
  mx_dim hkv = MX_DIM_UNKNOWN, skv = MX_DIM_UNKNOWN, dk = MX_DIM_UNKNOWN, dv = MX_DIM_UNKNOWN;
  if (r == 4) {
    if (q->rank == 4) b = q->dims[0], hq = q->dims[1], sq = q->dims[2], dq = q->dims[3];
    if (k->rank == 4) hkv = k->dims[1], skv = k->dims[2], dk = k->dims[3];
    if (v->rank == 4) {
      if (mx_dim_is_unknown(hkv)) hkv = v->dims[1];
      if (mx_dim_is_unknown(skv)) skv = v->dims[2];
      dv = v->dims[3];
    }
  } else if (r == 3) {
    hq = p->q_num_heads;
    hkv = p->kv_num_heads;
    if (q->rank == 3) {
      b = q->dims[0], sq = q->dims[1];
      if ((st = split_heads(ctx, q->dims[2], p->q_num_heads, "Q", &dq)) != MX_OK) return st;
    }
    if (k->rank == 3) {
      skv = k->dims[1];
      if ((st = split_heads(ctx, k->dims[2], p->kv_num_heads, "K", &dk)) != MX_OK) return st;
    }
    if (v->rank == 3) {
      if (mx_dim_is_unknown(skv)) skv = v->dims[1];
      if ((st = split_heads(ctx, v->dims[2], p->kv_num_heads, "V", &dv)) != MX_OK) return st;
    }
  }
  if (mx_dim_is_unknown(b) && k->rank == r && r > 0) b = k->dims[0];
  if ((st = mx__check_same_dim(ctx, dq, dk, "Attention head size of Q and K")) != MX_OK) return st;
  if (r == 4 && k->rank == 4 && v->rank == 4) {
    if ((st = mx__check_same_dim(ctx, k->dims[2], v->dims[2], "Attention sequence length of K and V")) !=
        MX_OK)
      return st;
    if ((st = mx__check_same_dim(ctx, k->dims[1], v->dims[1], "Attention head count of K and V")) != MX_OK)
      return st;
  }
  if (mx_dim_is_concrete(hq) && mx_dim_is_concrete(hkv) && (hkv == 0 || hq % hkv != 0))
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "%lld query heads are not a multiple of %lld key/value heads",
                          (long long)hq, (long long)hkv);
  /* The total key length: past rows (if any) followed by the new ones. */
  mx_dim total = skv;
  if (mx__in_present(ctx, 4)) {
    const mx_shape *pk = &ctx->in[4].shape;
    if (pk->rank != MX_RANK_UNKNOWN && pk->rank != 4)
      return mx__infer_fail(ctx, MX_ERR_SHAPE, "past_key has rank %d; it must be 4-D", (int)pk->rank);
    total = pk->rank == 4 ? mx_sym_add(ctx->syms, pk->dims[2], skv) : MX_DIM_UNKNOWN;
  }
  if (r == MX_RANK_UNKNOWN) {
    for (uint32_t i = 1; i < ctx->n_out; i++) {
      ctx->out[i].shape.rank = 4;
      for (int d = 0; d < 4; d++) ctx->out[i].shape.dims[d] = MX_DIM_UNKNOWN;
      ctx->out[i].shape.dims[2] = total;
    }
    if (ctx->n_out > 3) ctx->out[3].shape.dims[3] = total;
    return MX_OK;
  }
  mx_shape *y = &ctx->out[0].shape;
  if (r == 4) {
    y->rank = 4;
    y->dims[0] = b, y->dims[1] = hq, y->dims[2] = sq, y->dims[3] = dv;
  } else {
    y->rank = 3;
    y->dims[0] = b, y->dims[1] = sq, y->dims[2] = mx_sym_mul(ctx->syms, hq, dv);
  }
  mx_dim per_out[3][4] = {{b, hkv, total, dk}, {b, hkv, total, dv}, {b, hq, sq, total}};
  for (uint32_t i = 1; i < ctx->n_out && i < 4; i++) {
    ctx->out[i].shape.rank = 4;
    for (int d = 0; d < 4; d++) ctx->out[i].shape.dims[d] = per_out[i - 1][d];
  }
  return MX_OK;
}

static const mx_op_def op_attention = {
    .name = "Attention",
    .min_inputs = 3,
    .max_inputs = 7,
    .min_outputs = 1,
    .max_outputs = 4,
    .attrs = attention_attrs,
    .params_size = sizeof(mx_attention_params),
    .parse = attention_parse,
    .infer = attention_infer,
};

/* --- RotaryEmbedding ---------------------------------------------------------------------------- */

static const mx_attr_spec rotary_attrs[] = {
    {.name = "interleaved", .type = MX_ATTR_INT, .def_i = 0},
    {.name = "num_heads", .type = MX_ATTR_INT, .def_i = 0},
    {.name = "rotary_embedding_dim", .type = MX_ATTR_INT, .def_i = 0},
    {0},
};

static mx_status rotary_parse(const mx_parse_ctx *pc, void *params) {
  mx_rotary_params *p = params;
  memset(p, 0, sizeof *p);
  p->interleaved = mx__parse_int(pc, "interleaved") != 0;
  int64_t nh = mx__parse_int(pc, "num_heads"), rd = mx__parse_int(pc, "rotary_embedding_dim");
  if (nh < 0 || nh > INT32_MAX) return mx__parse_fail(pc, "num_heads %lld is out of range", (long long)nh);
  if (rd < 0 || rd > INT32_MAX || rd % 2 != 0)
    return mx__parse_fail(pc, "rotary_embedding_dim %lld must be a non-negative even number", (long long)rd);
  p->num_heads = (int32_t)nh;
  p->rotary_embedding_dim = (int32_t)rd;
  return MX_OK;
}

static mx_status rotary_infer(mx_infer_ctx *ctx) {
  const mx_rotary_params *p = ctx->params;
  mx_dtype dt = ctx->in[0].dtype;
  if (dt != MX_FLOAT32 && dt != MX_FLOAT16 && dt != MX_BFLOAT16)
    return mx__infer_fail(ctx, MX_ERR_DTYPE,
                          "input 0 has dtype %s; RotaryEmbedding takes float32, float16 or bfloat16",
                          mx_dtype_name(dt));
  mx_status st = mx__infer_same_dtype(ctx, 1, 0);
  if (st == MX_OK) st = mx__infer_same_dtype(ctx, 2, 0);
  if (st != MX_OK) return st;
  if (mx__in_present(ctx, 3) && ctx->in[3].dtype != MX_INT64)
    return mx__infer_fail(ctx, MX_ERR_DTYPE, "input 3 (position_ids) has dtype %s, not int64",
                          mx_dtype_name(ctx->in[3].dtype));
  const mx_shape *x = &ctx->in[0].shape;
  if (x->rank != MX_RANK_UNKNOWN && x->rank != 3 && x->rank != 4)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "input 0 has rank %d; RotaryEmbedding takes 3-D or 4-D input",
                          (int)x->rank);
  if (x->rank == 3 && p->num_heads == 0)
    return mx__infer_fail(ctx, MX_ERR_INVALID_GRAPH, "3-D input needs the num_heads attribute");
  if (x->rank == 3 && mx_dim_is_concrete(x->dims[2]) && x->dims[2] % p->num_heads != 0)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "hidden size %lld is not a multiple of num_heads %d",
                          (long long)x->dims[2], (int)p->num_heads);
  ctx->out[0].dtype = dt;
  ctx->out[0].shape = *x;
  return MX_OK;
}

static const mx_op_def op_rotary = {
    .name = "RotaryEmbedding",
    .min_inputs = 3,
    .max_inputs = 4,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = rotary_attrs,
    .params_size = sizeof(mx_rotary_params),
    .parse = rotary_parse,
    .infer = rotary_infer,
};

const mx_op_def *const mx__ops_nn[] = {
    &op_softmax, &op_logsoftmax, &op_layernorm, &op_rmsnorm, &op_attention, &op_rotary, NULL,
};
