/* Op definitions of the elementwise group: unary math and logic, binary arithmetic, comparisons
 * and logic with numpy broadcasting, and the variadic Sum/Max/Min/Mean. Cast, Clip, Where and
 * Gelu live in elementwise_misc.c; the symbolic-value arithmetic in elementwise_sv.c.
 *
 * Every op here is described by an ew_spec (accepted dtypes, bool output, symbolic-value op)
 * and one of three shared inference functions; a macro stamps out the mx_op_def. Dtype sets
 * are the union over the opsets mixrt accepts (e.g. Add takes int8 from opset 14 on; older
 * models simply never use it). Before opset 7, binary ops had "legacy" broadcasting with an
 * explicit axis; mx_binary_params records it and inference applies it. */
#include <string.h>

#include "graph/ops/elementwise_impl.h"
#include "graph/ops/elementwise_params.h"
#include "graph/ops/groups.h"

/* What distinguishes one elementwise op from another for inference. */
typedef struct ew_spec {
  uint32_t types;  /* dtypes input 0 (and every input that must match it) may have */
  uint32_t types1; /* Pow: dtypes input 1 may have independently of input 0; 0: must match */
  bool out_bool;   /* output is bool (comparisons) instead of input 0's dtype */
  mx__sv_op sv;    /* symbolic-value operation, MX__SV_NONE for float math */
} ew_spec;

/* --- schemas and parsing ------------------------------------------------------------------ */

/* Opset 1-5 ops carried a 'consumed_inputs' hint; it has no effect. */
static const mx_attr_spec unary_attrs[] = {
    {"consumed_inputs", MX_ATTR_INTS, false, 0, 0.0f, NULL},
    {NULL, MX_ATTR_UNDEFINED, false, 0, 0.0f, NULL},
};

/* Binary ops before opset 7: 'broadcast' (0/1) and the 'axis' B aligns with. */
static const mx_attr_spec binary_attrs[] = {
    {"broadcast", MX_ATTR_INT, false, 0, 0.0f, NULL},
    {"axis", MX_ATTR_INT, false, 0, 0.0f, NULL},
    {"consumed_inputs", MX_ATTR_INTS, false, 0, 0.0f, NULL},
    {NULL, MX_ATTR_UNDEFINED, false, 0, 0.0f, NULL},
};

static const mx_attr_spec mod_attrs[] = {
    {"fmod", MX_ATTR_INT, false, 0, 0.0f, NULL},
    {NULL, MX_ATTR_UNDEFINED, false, 0, 0.0f, NULL},
};

static mx_status parse_binary(const mx_parse_ctx *pc, void *params) {
  mx_binary_params *p = params;
  memset(p, 0, sizeof *p);
  if (pc->opset >= 7 || mx__parse_int(pc, "broadcast") == 0 || !mx__parse_attr(pc, "axis")) return MX_OK;
  int64_t axis = mx__parse_int(pc, "axis");
  if (axis < -MX_MAX_RANK || axis >= MX_MAX_RANK)
    return mx__parse_fail(pc, "attribute 'axis' = %lld is out of range", (long long)axis);
  p->legacy = 1;
  p->axis = (int32_t)axis;
  return MX_OK;
}

static mx_status parse_mod(const mx_parse_ctx *pc, void *params) {
  mx_mod_params *p = params;
  memset(p, 0, sizeof *p);
  int64_t f = mx__parse_int(pc, "fmod");
  if (f != 0 && f != 1) return mx__parse_fail(pc, "attribute 'fmod' must be 0 or 1, not %lld", (long long)f);
  p->fmod = (int32_t)f;
  return MX_OK;
}

/* --- inference ---------------------------------------------------------------------------- */

static mx_status infer_unary(mx_infer_ctx *ctx, const ew_spec *s) {
  mx_status st = mx__ew_check_dtype(ctx, 0, s->types);
  if (st != MX_OK) return st;
  ctx->out[0].dtype = s->out_bool ? MX_BOOL : ctx->in[0].dtype;
  ctx->out[0].shape = ctx->in[0].shape;
  mx__sv_elementwise(ctx, s->sv, 1);
  return MX_OK;
}

/* B's shape as legacy broadcasting sees it: aligned with A at `axis`, padded with trailing 1s. */
static mx_status legacy_shape(mx_infer_ctx *ctx, const mx_binary_params *p, const mx_shape *a, mx_shape *b) {
  if (!p || !p->legacy || a->rank < 0 || b->rank < 0) return MX_OK;
  int32_t axis;
  if (!mx__norm_axis(p->axis, a->rank, &axis) || axis + b->rank > a->rank)
    return mx__infer_fail(ctx, MX_ERR_SHAPE,
                          "legacy broadcast axis %d does not fit input 1 (rank %d) into input 0 (rank %d)",
                          (int)p->axis, (int)b->rank, (int)a->rank);
  for (int32_t k = b->rank; k < a->rank - axis; k++) b->dims[k] = 1;
  b->rank = a->rank - axis;
  return MX_OK;
}

/* `p` is the node's mx_binary_params, NULL for ops without legacy broadcasting (Mod). */
static mx_status infer_binary_sv(mx_infer_ctx *ctx, const ew_spec *s, mx__sv_op sv,
                                 const mx_binary_params *p) {
  mx_status st = mx__ew_check_dtype(ctx, 0, s->types);
  if (st != MX_OK) return st;
  st = s->types1 ? mx__ew_check_dtype(ctx, 1, s->types1) : mx__ew_check_same(ctx, 1, 0);
  if (st != MX_OK) return st;
  mx_shape b = ctx->in[1].shape;
  st = legacy_shape(ctx, p, &ctx->in[0].shape, &b);
  if (st != MX_OK) return st;
  st = mx__broadcast_shapes(ctx, &ctx->in[0].shape, &b, &ctx->out[0].shape);
  if (st != MX_OK) return st;
  ctx->out[0].dtype = s->out_bool ? MX_BOOL : ctx->in[0].dtype;
  /* Legacy broadcasting only ever applied to float math in practice: no values tracked. */
  if (!p || !p->legacy) mx__sv_elementwise(ctx, sv, 2);
  return MX_OK;
}

static mx_status infer_binary(mx_infer_ctx *ctx, const ew_spec *s) {
  return infer_binary_sv(ctx, s, s->sv, ctx->params);
}

static mx_status infer_mod(mx_infer_ctx *ctx, const ew_spec *s) {
  const mx_mod_params *p = ctx->params;
  return infer_binary_sv(ctx, s, p && p->fmod ? MX__SV_FMOD : MX__SV_MOD, NULL);
}

static mx_status infer_variadic(mx_infer_ctx *ctx, const ew_spec *s) {
  mx_status st = mx__ew_check_dtype(ctx, 0, s->types);
  if (st != MX_OK) return st;
  mx_shape acc = ctx->in[0].shape;
  for (uint32_t i = 1; i < ctx->n_in; i++) {
    if (!ctx->in[i].present) return mx__infer_fail(ctx, MX_ERR_INVALID_GRAPH, "input %u is missing", i);
    st = mx__ew_check_same(ctx, i, 0);
    if (st != MX_OK) return st;
    mx_shape next;
    st = mx__broadcast_shapes(ctx, &acc, &ctx->in[i].shape, &next);
    if (st != MX_OK) return st;
    acc = next;
  }
  ctx->out[0].dtype = ctx->in[0].dtype;
  ctx->out[0].shape = acc;
  mx__sv_elementwise(ctx, s->sv, ctx->n_in);
  return MX_OK;
}

/* --- definitions -------------------------------------------------------------------------- */

#define HOST MX_OP_HOST_PREFERRED
#define EW   MX_OP_ELEMENTWISE

/* One op: NAME, inference KIND (unary/binary/mod/variadic), min/max inputs, flags, schema,
 * params struct (or void) and parse function (or NULL), then the ew_spec fields. */
#define EW_OP(NAME, KIND, MIN_IN, MAX_IN, FLAGS, ATTRS, PSIZE, PARSE, TYPES, TYPES1, OUT_BOOL, SV) \
  static const ew_spec spec_##NAME = {TYPES, TYPES1, OUT_BOOL, SV};                                \
  static mx_status infer_##NAME(mx_infer_ctx *ctx) { return infer_##KIND(ctx, &spec_##NAME); }     \
  static const mx_op_def def_##NAME = {.name = #NAME,                                              \
                                       .domain = "",                                               \
                                       .min_inputs = MIN_IN,                                       \
                                       .max_inputs = MAX_IN,                                       \
                                       .min_outputs = 1,                                           \
                                       .max_outputs = 1,                                           \
                                       .flags = (FLAGS),                                           \
                                       .value_inputs = 0,                                          \
                                       .attrs = ATTRS,                                             \
                                       .params_size = PSIZE,                                       \
                                       .parse = PARSE,                                             \
                                       .infer = infer_##NAME,                                      \
                                       .upper_bound = NULL};

#define UNARY(NAME, FLAGS, TYPES, SV) \
  EW_OP(NAME, unary, 1, 1, FLAGS, unary_attrs, 0, NULL, TYPES, 0, false, SV)
#define BINARY(NAME, FLAGS, TYPES, TYPES1, OUT_BOOL, SV)                                                \
  EW_OP(NAME, binary, 2, 2, FLAGS, binary_attrs, sizeof(mx_binary_params), parse_binary, TYPES, TYPES1, \
        OUT_BOOL, SV)
#define VARIADIC(NAME, FLAGS, TYPES, SV) \
  EW_OP(NAME, variadic, 1, MX_VARIADIC, FLAGS, unary_attrs, 0, NULL, TYPES, 0, false, SV)

#define FLT MX__EW_FLOATS
#define NUM MX__EW_NUMERIC

UNARY(Abs, EW | HOST, NUM, MX__SV_ABS)
UNARY(Neg, EW | HOST, FLT | MX__EW_SINTS, MX__SV_NEG)
UNARY(Exp, EW, FLT, MX__SV_NONE)
UNARY(Log, EW, FLT, MX__SV_NONE)
UNARY(Sqrt, EW, FLT, MX__SV_NONE)
UNARY(Sin, EW, FLT, MX__SV_NONE)
UNARY(Cos, EW, FLT, MX__SV_NONE)
UNARY(Tanh, EW, FLT, MX__SV_NONE)
UNARY(Sigmoid, EW, FLT, MX__SV_NONE)
UNARY(Relu, EW, FLT | MX__EW_SINTS, MX__SV_NONE)
UNARY(Erf, EW, NUM, MX__SV_NONE)
UNARY(Floor, EW, FLT, MX__SV_NONE)
UNARY(Ceil, EW, FLT, MX__SV_NONE)
UNARY(Reciprocal, EW, FLT, MX__SV_NONE)
UNARY(Sign, EW, NUM, MX__SV_NONE)
UNARY(Not, EW | HOST, MX__EW_BOOL, MX__SV_NOT)

BINARY(Add, EW | HOST, NUM, 0, false, MX__SV_ADD)
BINARY(Sub, EW | HOST, NUM, 0, false, MX__SV_SUB)
BINARY(Mul, EW | HOST, NUM, 0, false, MX__SV_MUL)
BINARY(Div, EW | HOST, NUM, 0, false, MX__SV_DIV)
BINARY(Pow, EW, FLT | MX__EW_DT(MX_INT32) | MX__EW_DT(MX_INT64), NUM, false, MX__SV_NONE)
BINARY(And, EW | HOST, MX__EW_BOOL, 0, true, MX__SV_AND)
BINARY(Or, EW | HOST, MX__EW_BOOL, 0, true, MX__SV_OR)
BINARY(Xor, EW | HOST, MX__EW_BOOL, 0, true, MX__SV_XOR)
BINARY(Equal, EW | HOST, MX__EW_ALL | MX__EW_DT(MX_STRING), 0, true,
       MX__SV_EQ) /* strings: kernels/string.c */
BINARY(Less, EW | HOST, NUM, 0, true, MX__SV_LT)
BINARY(LessOrEqual, EW | HOST, NUM, 0, true, MX__SV_LE)
BINARY(Greater, EW | HOST, NUM, 0, true, MX__SV_GT)
BINARY(GreaterOrEqual, EW | HOST, NUM, 0, true, MX__SV_GE)
EW_OP(Mod, mod, 2, 2, EW | HOST, mod_attrs, sizeof(mx_mod_params), parse_mod, NUM, 0, false, MX__SV_MOD)

VARIADIC(Sum, EW, FLT, MX__SV_NONE)
VARIADIC(Mean, EW, FLT, MX__SV_NONE)
VARIADIC(Max, EW | HOST, NUM, MX__SV_MAX)
VARIADIC(Min, EW | HOST, NUM, MX__SV_MIN)

const mx_op_def *const mx__ops_elementwise[] = {
    &def_Abs,        &def_Neg,        &def_Exp,      &def_Log,         &def_Sqrt,    &def_Sin,
    &def_Cos,        &def_Tanh,       &def_Sigmoid,  &def_Relu,        &def_Erf,     &def_Floor,
    &def_Ceil,       &def_Reciprocal, &def_Sign,     &def_Not,         &def_Add,     &def_Sub,
    &def_Mul,        &def_Div,        &def_Pow,      &def_Mod,         &def_And,     &def_Or,
    &def_Xor,        &def_Equal,      &def_Less,     &def_LessOrEqual, &def_Greater, &def_GreaterOrEqual,
    &def_Sum,        &def_Mean,       &def_Max,      &def_Min,         &mx__op_cast, &mx__op_castlike,
    &mx__op_bitcast, &mx__op_clip,    &mx__op_where, &mx__op_gelu,     NULL,
};
