/* Op definitions of the elementwise ops that do not fit the unary/binary/variadic mould:
 * Cast (any supported dtype to any other; integer values carried through for shape
 * arithmetic), CastLike (Cast to input 1's dtype), BitCast (same bits, another dtype), Clip (bounds as attributes before opset 11, as optional scalar inputs from 11),
 * Where (three-way broadcasting; picks symbolic values when the condition is known) and
 * Gelu (opset 20, exact or tanh approximation). */
#include <float.h>
#include <string.h>

#include "graph/ops/elementwise_impl.h"
#include "graph/ops/elementwise_params.h"

/* --- Cast --------------------------------------------------------------------------------- */

static const mx_attr_spec cast_attrs[] = {
    {"to", MX_ATTR_INT, true, 0, 0.0f, NULL},
    {"saturate", MX_ATTR_INT, false, 1, 0.0f, NULL},      /* opset 19: float8 targets only */
    {"round_mode", MX_ATTR_STRING, false, 0, 0.0f, "up"}, /* opset 25: float8e8m0 only */
    {NULL, MX_ATTR_UNDEFINED, false, 0, 0.0f, NULL},
};

static mx_status parse_cast(const mx_parse_ctx *pc, void *params) {
  mx_cast_params *p = params;
  memset(p, 0, sizeof *p);
  int64_t to = mx__parse_int(pc, "to");
  if (to <= 0 || to > 64 || !mx_dtype_is_supported((int)to))
    return mx__fail(pc->err, MX_ERR_UNSUPPORTED,
                    "node '%s' (Cast): target type %lld is not supported by mixrt",
                    pc->node_name ? pc->node_name : "?", (long long)to);
  char mode[16];
  mx_status st = mx__parse_string(pc, "round_mode", mode, sizeof mode);
  if (st != MX_OK) return st;
  if (strcmp(mode, "up") != 0 && strcmp(mode, "down") != 0 && strcmp(mode, "nearest") != 0)
    return mx__parse_fail(pc, "attribute 'round_mode' must be up, down or nearest, not '%s'", mode);
  p->to = (int32_t)to;
  p->saturate = mx__parse_int(pc, "saturate") != 0;
  p->round_mode = strcmp(mode, "down") == 0 ? 1 : strcmp(mode, "nearest") == 0 ? 2 : 0;
  return MX_OK;
}

static mx_status infer_cast(mx_infer_ctx *ctx) {
  const mx_cast_params *p = ctx->params;
  mx_status st = mx__ew_check_dtype(ctx, 0, MX__EW_ALL | MX__EW_NARROW);
  if (st != MX_OK) return st;
  mx_dtype to = (mx_dtype)p->to;
  ctx->out[0].dtype = to;
  ctx->out[0].shape = ctx->in[0].shape;
  /* Integer values survive integer casts; a bool target needs decided values. */
  const mx_value_info *in = &ctx->in[0];
  if (!mx__sv_dtype(in->dtype) || !mx__sv_dtype(to) || !in->sv || in->sv_len < 0) return MX_OK;
  if (mx__sv_numel(&in->shape) != in->sv_len) return MX_OK;
  mx_dim *sv = mx__infer_out_sv(ctx, 0);
  for (int32_t k = 0; k < in->sv_len; k++) {
    mx_dim d = in->sv[k];
    int64_t v;
    if (to == MX_BOOL && !mx_sym_const_value(ctx->syms, d, &v)) d = MX_DIM_UNKNOWN;
    sv[k] = d == MX_DIM_UNKNOWN ? d : mx__sv_fit(ctx->syms, d, to);
  }
  ctx->out[0].sv = sv;
  ctx->out[0].sv_len = in->sv_len;
  return MX_OK;
}

const mx_op_def mx__op_cast = {
    .name = "Cast",
    .domain = "",
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .flags = MX_OP_ELEMENTWISE | MX_OP_HOST_PREFERRED,
    .attrs = cast_attrs,
    .params_size = sizeof(mx_cast_params),
    .parse = parse_cast,
    .infer = infer_cast,
};

/* --- CastLike and BitCast ------------------------------------------------------------------ */

/* CastLike (opset 15): Cast to the dtype of input 1 (whose values are not read). Its params are
 * Cast's with `to` 0, as the target comes from input 1. */
static const mx_attr_spec castlike_attrs[] = {
    {"saturate", MX_ATTR_INT, false, 1, 0.0f, NULL},      /* opset 19: float8 targets only */
    {"round_mode", MX_ATTR_STRING, false, 0, 0.0f, "up"}, /* opset 25: float8e8m0 only */
    {NULL, MX_ATTR_UNDEFINED, false, 0, 0.0f, NULL},
};

static mx_status parse_castlike(const mx_parse_ctx *pc, void *params) {
  mx_cast_params *p = params;
  memset(p, 0, sizeof *p);
  char mode[16];
  mx_status st = mx__parse_string(pc, "round_mode", mode, sizeof mode);
  if (st != MX_OK) return st;
  if (strcmp(mode, "up") != 0 && strcmp(mode, "down") != 0 && strcmp(mode, "nearest") != 0)
    return mx__parse_fail(pc, "attribute 'round_mode' must be up, down or nearest, not '%s'", mode);
  p->saturate = mx__parse_int(pc, "saturate") != 0;
  p->round_mode = strcmp(mode, "down") == 0 ? 1 : strcmp(mode, "nearest") == 0 ? 2 : 0;
  return MX_OK;
}

static mx_status infer_castlike(mx_infer_ctx *ctx) {
  mx_status st = mx__ew_check_dtype(ctx, 0, MX__EW_ALL | MX__EW_NARROW);
  if (st == MX_OK) st = mx__ew_check_dtype(ctx, 1, MX__EW_ALL | MX__EW_NARROW);
  if (st != MX_OK) return st;
  ctx->out[0].dtype = ctx->in[1].dtype;
  ctx->out[0].shape = ctx->in[0].shape;
  return MX_OK;
}

const mx_op_def mx__op_castlike = {
    .name = "CastLike",
    .domain = "",
    .min_inputs = 2,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .flags = MX_OP_ELEMENTWISE | MX_OP_HOST_PREFERRED,
    .attrs = castlike_attrs,
    .params_size = sizeof(mx_cast_params),
    .parse = parse_castlike,
    .infer = infer_castlike,
};

/* BitCast (opset 26): the same bits read as another dtype of the same width; same shape. */
static const mx_attr_spec bitcast_attrs[] = {
    {"to", MX_ATTR_INT, true, 0, 0.0f, NULL},
    {NULL, MX_ATTR_UNDEFINED, false, 0, 0.0f, NULL},
};

static mx_status parse_bitcast(const mx_parse_ctx *pc, void *params) {
  mx_cast_params *p = params;
  memset(p, 0, sizeof *p);
  int64_t to = mx__parse_int(pc, "to");
  if (to <= 0 || to > 64 || !mx_dtype_is_supported((int)to))
    return mx__fail(pc->err, MX_ERR_UNSUPPORTED,
                    "node '%s' (BitCast): target type %lld is not supported by mixrt",
                    pc->node_name ? pc->node_name : "?", (long long)to);
  p->to = (int32_t)to;
  return MX_OK;
}

static mx_status infer_bitcast(mx_infer_ctx *ctx) {
  const mx_cast_params *p = ctx->params;
  mx_status st = mx__ew_check_dtype(ctx, 0, MX__EW_ALL | MX__EW_NARROW);
  if (st != MX_OK) return st;
  mx_dtype to = (mx_dtype)p->to;
  if (mx_dtype_bits(to) != mx_dtype_bits(ctx->in[0].dtype))
    return mx__infer_fail(ctx, MX_ERR_DTYPE,
                          "BitCast from %s (%d bits) to %s (%d bits): the widths must match",
                          mx_dtype_name(ctx->in[0].dtype), mx_dtype_bits(ctx->in[0].dtype), mx_dtype_name(to),
                          mx_dtype_bits(to));
  ctx->out[0].dtype = to;
  ctx->out[0].shape = ctx->in[0].shape;
  return MX_OK;
}

const mx_op_def mx__op_bitcast = {
    .name = "BitCast",
    .domain = "",
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .flags = MX_OP_ELEMENTWISE,
    .attrs = bitcast_attrs,
    .params_size = sizeof(mx_cast_params),
    .parse = parse_bitcast,
    .infer = infer_bitcast,
};

/* --- Clip --------------------------------------------------------------------------------- */

static const mx_attr_spec clip_attrs[] = {
    {"min", MX_ATTR_FLOAT, false, 0, -FLT_MAX, NULL}, /* before opset 11 */
    {"max", MX_ATTR_FLOAT, false, 0, FLT_MAX, NULL},  /* before opset 11 */
    {"consumed_inputs", MX_ATTR_INTS, false, 0, 0.0f, NULL},
    {NULL, MX_ATTR_UNDEFINED, false, 0, 0.0f, NULL},
};

static mx_status parse_clip(const mx_parse_ctx *pc, void *params) {
  mx_clip_params *p = params;
  memset(p, 0, sizeof *p);
  p->from_attrs = pc->opset < 11;
  p->min = mx__parse_float(pc, "min");
  p->max = mx__parse_float(pc, "max");
  if (p->from_attrs && pc->n_inputs > 1)
    return mx__parse_fail(pc, "Clip before opset 11 takes its bounds as attributes, not inputs");
  return MX_OK;
}

static mx_status infer_clip(mx_infer_ctx *ctx) {
  mx_status st = mx__ew_check_dtype(ctx, 0, MX__EW_NUMERIC);
  if (st != MX_OK) return st;
  for (uint32_t i = 1; i < 3; i++) {
    if (!mx__in_present(ctx, i)) continue;
    st = mx__ew_check_same(ctx, i, 0);
    if (st != MX_OK) return st;
    int64_t n = mx__sv_numel(&ctx->in[i].shape);
    if (n >= 0 && n != 1)
      return mx__infer_fail(ctx, MX_ERR_SHAPE, "input %u (%s bound) must be a scalar", i,
                            i == 1 ? "min" : "max");
  }
  ctx->out[0].dtype = ctx->in[0].dtype;
  ctx->out[0].shape = ctx->in[0].shape;
  return MX_OK;
}

const mx_op_def mx__op_clip = {
    .name = "Clip",
    .domain = "",
    .min_inputs = 1,
    .max_inputs = 3,
    .min_outputs = 1,
    .max_outputs = 1,
    .flags = MX_OP_ELEMENTWISE,
    .attrs = clip_attrs,
    .params_size = sizeof(mx_clip_params),
    .parse = parse_clip,
    .infer = infer_clip,
};

/* --- Where -------------------------------------------------------------------------------- */

/* Output sv: the condition's values must all be decided; each element comes from X or Y. */
static void where_sv(mx_infer_ctx *ctx) {
  mx_value_info *out = &ctx->out[0];
  const mx_value_info *c = &ctx->in[0];
  if (!mx__sv_dtype(out->dtype) || !c->sv || c->sv_len < 0 || mx__sv_numel(&c->shape) != c->sv_len) return;
  int64_t n = mx__sv_numel(&out->shape);
  if (n < 0 || n > MX_SV_MAX) return;
  mx_dim *sv = mx__infer_out_sv(ctx, 0);
  for (int64_t o = 0; o < n; o++) {
    int64_t cv;
    if (!mx_sym_const_value(ctx->syms, c->sv[mx__sv_bcast_index(&out->shape, &c->shape, o)], &cv)) return;
    const mx_value_info *src = &ctx->in[cv ? 1 : 2];
    if (!src->sv || src->sv_len < 0 || mx__sv_numel(&src->shape) != src->sv_len) return;
    sv[o] = src->sv[mx__sv_bcast_index(&out->shape, &src->shape, o)];
  }
  out->sv = sv;
  out->sv_len = (int32_t)n;
}

static mx_status infer_where(mx_infer_ctx *ctx) {
  mx_status st = mx__ew_check_dtype(ctx, 0, MX__EW_BOOL);
  if (st == MX_OK) st = mx__ew_check_dtype(ctx, 1, MX__EW_ALL);
  if (st == MX_OK) st = mx__ew_check_same(ctx, 2, 1);
  if (st != MX_OK) return st;
  mx_shape xy;
  st = mx__broadcast_shapes(ctx, &ctx->in[1].shape, &ctx->in[2].shape, &xy);
  if (st == MX_OK) st = mx__broadcast_shapes(ctx, &ctx->in[0].shape, &xy, &ctx->out[0].shape);
  if (st != MX_OK) return st;
  ctx->out[0].dtype = ctx->in[1].dtype;
  where_sv(ctx);
  return MX_OK;
}

const mx_op_def mx__op_where = {
    .name = "Where",
    .domain = "",
    .min_inputs = 3,
    .max_inputs = 3,
    .min_outputs = 1,
    .max_outputs = 1,
    .flags = MX_OP_ELEMENTWISE | MX_OP_HOST_PREFERRED,
    .attrs = NULL,
    .params_size = 0,
    .parse = NULL,
    .infer = infer_where,
};

/* --- Gelu --------------------------------------------------------------------------------- */

static const mx_attr_spec gelu_attrs[] = {
    {"approximate", MX_ATTR_STRING, false, 0, 0.0f, "none"},
    {NULL, MX_ATTR_UNDEFINED, false, 0, 0.0f, NULL},
};

static mx_status parse_gelu(const mx_parse_ctx *pc, void *params) {
  mx_gelu_params *p = params;
  memset(p, 0, sizeof *p);
  char mode[16];
  mx_status st = mx__parse_string(pc, "approximate", mode, sizeof mode);
  if (st != MX_OK) return st;
  if (strcmp(mode, "tanh") == 0)
    p->tanh_approx = 1;
  else if (strcmp(mode, "none") != 0)
    return mx__parse_fail(pc, "attribute 'approximate' must be none or tanh, not '%s'", mode);
  return MX_OK;
}

static mx_status infer_gelu(mx_infer_ctx *ctx) {
  mx_status st = mx__ew_check_dtype(ctx, 0, MX__EW_FLOATS);
  if (st != MX_OK) return st;
  ctx->out[0].dtype = ctx->in[0].dtype;
  ctx->out[0].shape = ctx->in[0].shape;
  return MX_OK;
}

const mx_op_def mx__op_gelu = {
    .name = "Gelu",
    .domain = "",
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .flags = MX_OP_ELEMENTWISE,
    .attrs = gelu_attrs,
    .params_size = sizeof(mx_gelu_params),
    .parse = parse_gelu,
    .infer = infer_gelu,
};
