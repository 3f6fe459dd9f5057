/* Op definitions of the quantization group: QuantizeLinear and DequantizeLinear (opsets 10-25:
 * per-tensor, per-axis from 13, blocked from 21; integer targets int8/uint8/int16/uint16/int4/
 * uint4/int2/uint2, float8 and float4e2m1 targets; output_dtype and precision attributes),
 * DynamicQuantizeLinear (opset 11), MatMulInteger (opset 10) and QLinearMatMul (opsets 10, 21).
 *
 * Shapes follow the input; the scale and zero point are checked against the input here, so a
 * kernel can index them without re-validating. */
#include <string.h>

#include "graph/ops/groups.h"
#include "graph/ops/op.h"
#include "graph/ops/quant_params.h"

#define DT(dt) (1u << (unsigned)(dt))
/* Element types a quantized tensor may have. */
#define Q_TYPES                                                                                             \
  (DT(MX_INT8) | DT(MX_UINT8) | DT(MX_INT16) | DT(MX_UINT16) | DT(MX_INT4) | DT(MX_UINT4) | DT(MX_INT2) |   \
   DT(MX_UINT2) | DT(MX_FLOAT8E4M3FN) | DT(MX_FLOAT8E4M3FNUZ) | DT(MX_FLOAT8E5M2) | DT(MX_FLOAT8E5M2FNUZ) | \
   DT(MX_FLOAT4E2M1))
/* Floating-point types of real values and scales. */
#define F_TYPES (DT(MX_FLOAT32) | DT(MX_FLOAT16) | DT(MX_BFLOAT16) | DT(MX_FLOAT64))

static bool in_set(mx_dtype dt, uint32_t set) { return (unsigned)dt < 32 && (set & DT(dt)); }

static mx_status dtype_fail(mx_infer_ctx *ctx, uint32_t i, const char *what) {
  return mx__infer_fail(ctx, MX_ERR_DTYPE, "input %u has dtype %s; %s", i, mx_dtype_name(ctx->in[i].dtype),
                        what);
}

/* --- QuantizeLinear / DequantizeLinear ------------------------------------------------------- */

static const mx_attr_spec quant_attrs[] = {
    {"axis", MX_ATTR_INT, false, 1, 0.0f, NULL},         {"block_size", MX_ATTR_INT, false, 0, 0.0f, NULL},
    {"output_dtype", MX_ATTR_INT, false, 0, 0.0f, NULL}, {"saturate", MX_ATTR_INT, false, 1, 0.0f, NULL},
    {"precision", MX_ATTR_INT, false, 0, 0.0f, NULL},    {NULL, MX_ATTR_UNDEFINED, false, 0, 0.0f, NULL},
};

static mx_status parse_quant(const mx_parse_ctx *pc, void *params) {
  mx_quant_params *p = params;
  memset(p, 0, sizeof *p);
  int64_t axis = mx__parse_int(pc, "axis"), block = mx__parse_int(pc, "block_size");
  int64_t out = mx__parse_int(pc, "output_dtype"), prec = mx__parse_int(pc, "precision");
  if (axis < -MX_MAX_RANK || axis >= MX_MAX_RANK)
    return mx__parse_fail(pc, "attribute 'axis' = %lld is out of range", (long long)axis);
  if (block < 0 || block > INT32_MAX)
    return mx__parse_fail(pc, "attribute 'block_size' = %lld must be >= 0", (long long)block);
  if (out != 0 && (out < 0 || out > 64 || !mx_dtype_is_supported((int)out)))
    return mx__parse_fail(pc, "attribute 'output_dtype' = %lld is not an element type mixrt has",
                          (long long)out);
  if (prec != 0 && (prec < 0 || prec > 64 || !in_set((mx_dtype)prec, F_TYPES)))
    return mx__parse_fail(pc, "attribute 'precision' = %lld is not a floating-point type", (long long)prec);
  p->axis = (int32_t)axis;
  p->block_size = (int32_t)block;
  p->output_dtype = (int32_t)out;
  p->saturate = mx__parse_int(pc, "saturate") != 0;
  p->precision = (int32_t)prec;
  return MX_OK;
}

/* True when a shape provably holds one element (a scalar, or dims all 1). */
static bool is_single(const mx_shape *s) {
  if (s->rank == MX_RANK_UNKNOWN) return false;
  for (int32_t k = 0; k < s->rank; k++)
    if (!mx_dim_is_concrete(s->dims[k]) || s->dims[k] != 1) return false;
  return true;
}

/* Checks the scale (input s) and the optional zero point (input zp) against input x: per
 * tensor, per axis or blocked, as the params say. */
static mx_status check_scale(mx_infer_ctx *ctx, const mx_quant_params *p, uint32_t x, uint32_t s,
                             uint32_t zp) {
  const mx_shape *xs = &ctx->in[x].shape, *ss = &ctx->in[s].shape;
  if (mx__in_present(ctx, zp) && ctx->in[zp].shape.rank != MX_RANK_UNKNOWN && ss->rank != MX_RANK_UNKNOWN &&
      !(is_single(ss) && is_single(&ctx->in[zp].shape))) {
    const mx_shape *zs = &ctx->in[zp].shape;
    if (zs->rank != ss->rank)
      return mx__infer_fail(ctx, MX_ERR_SHAPE,
                            "the zero point (rank %d) and the scale (rank %d) differ in shape", (int)zs->rank,
                            (int)ss->rank);
    for (int32_t k = 0; k < ss->rank; k++) {
      mx_status st = mx__check_same_dim(ctx, zs->dims[k], ss->dims[k], "zero point and scale dim");
      if (st != MX_OK) return st;
    }
  }
  if (xs->rank == MX_RANK_UNKNOWN || ss->rank == MX_RANK_UNKNOWN) return MX_OK;
  if (ss->rank <= 1 && p->block_size == 0 && is_single(ss)) return MX_OK;
  int32_t axis;
  if (!mx__norm_axis(p->axis, xs->rank, &axis))
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "axis %d is out of range for the input's rank %d", (int)p->axis,
                          (int)xs->rank);
  if (p->block_size == 0) {
    if (ss->rank != 1)
      return mx__infer_fail(ctx, MX_ERR_SHAPE,
                            "the scale has rank %d; without block_size it must be a scalar or 1-D",
                            (int)ss->rank);
    return mx__check_same_dim(ctx, ss->dims[0], xs->dims[axis],
                              "per-axis scale length and the input's axis dim");
  }
  if (ss->rank != xs->rank)
    return mx__infer_fail(ctx, MX_ERR_SHAPE,
                          "blocked quantization needs a scale of the input's rank %d, not %d", (int)xs->rank,
                          (int)ss->rank);
  for (int32_t k = 0; k < xs->rank; k++) {
    if (k != axis) {
      mx_status st =
          mx__check_same_dim(ctx, ss->dims[k], xs->dims[k], "blocked scale dim and the input's dim");
      if (st != MX_OK) return st;
    } else if (mx_dim_is_concrete(ss->dims[k]) && mx_dim_is_concrete(xs->dims[k])) {
      int64_t want = (xs->dims[k] + p->block_size - 1) / p->block_size;
      if (ss->dims[k] != want)
        return mx__infer_fail(
            ctx, MX_ERR_SHAPE, "the scale has %lld blocks along axis %d; dim %lld in blocks of %d needs %lld",
            (long long)ss->dims[k], (int)axis, (long long)xs->dims[k], (int)p->block_size, (long long)want);
    }
  }
  return MX_OK;
}

static mx_status infer_quantize(mx_infer_ctx *ctx) {
  const mx_quant_params *p = ctx->params;
  mx_dtype xt = ctx->in[0].dtype, st_ = ctx->in[1].dtype;
  if (!in_set(xt, F_TYPES | DT(MX_INT32)))
    return dtype_fail(ctx, 0, "QuantizeLinear takes a float or int32 input");
  if (!in_set(st_, F_TYPES)) return dtype_fail(ctx, 1, "the scale must be a floating-point type");
  mx_dtype out = p->output_dtype ? (mx_dtype)p->output_dtype : MX_UINT8;
  if (mx__in_present(ctx, 2)) {
    mx_dtype zt = ctx->in[2].dtype;
    if (p->output_dtype && (mx_dtype)p->output_dtype != zt)
      return mx__infer_fail(ctx, MX_ERR_DTYPE, "output_dtype %s differs from the zero point's dtype %s",
                            mx_dtype_name((mx_dtype)p->output_dtype), mx_dtype_name(zt));
    out = zt;
  }
  if (!in_set(out, Q_TYPES))
    return mx__infer_fail(ctx, MX_ERR_DTYPE, "QuantizeLinear cannot produce %s", mx_dtype_name(out));
  mx_status st = check_scale(ctx, p, 0, 1, 2);
  if (st != MX_OK) return st;
  ctx->out[0].dtype = out;
  ctx->out[0].shape = ctx->in[0].shape;
  return MX_OK;
}

static mx_status infer_dequantize(mx_infer_ctx *ctx) {
  const mx_quant_params *p = ctx->params;
  mx_dtype xt = ctx->in[0].dtype, sc = ctx->in[1].dtype;
  if (!in_set(xt, Q_TYPES | DT(MX_INT32)))
    return dtype_fail(ctx, 0, "DequantizeLinear takes a quantized input");
  if (!in_set(sc, F_TYPES)) return dtype_fail(ctx, 1, "the scale must be a floating-point type");
  if (mx__in_present(ctx, 2) && ctx->in[2].dtype != xt)
    return mx__infer_fail(ctx, MX_ERR_DTYPE, "the zero point has dtype %s but the input has %s",
                          mx_dtype_name(ctx->in[2].dtype), mx_dtype_name(xt));
  mx_dtype out = p->output_dtype ? (mx_dtype)p->output_dtype : sc;
  if (!in_set(out, F_TYPES))
    return mx__infer_fail(ctx, MX_ERR_DTYPE, "DequantizeLinear cannot produce %s", mx_dtype_name(out));
  mx_status st = check_scale(ctx, p, 0, 1, 2);
  if (st != MX_OK) return st;
  ctx->out[0].dtype = out;
  ctx->out[0].shape = ctx->in[0].shape;
  return MX_OK;
}

static const mx_op_def op_quantize = {
    .name = "QuantizeLinear",
    .domain = "",
    .min_inputs = 2,
    .max_inputs = 3,
    .min_outputs = 1,
    .max_outputs = 1,
    .flags = MX_OP_ELEMENTWISE,
    .attrs = quant_attrs,
    .params_size = sizeof(mx_quant_params),
    .parse = parse_quant,
    .infer = infer_quantize,
};

static const mx_op_def op_dequantize = {
    .name = "DequantizeLinear",
    .domain = "",
    .min_inputs = 2,
    .max_inputs = 3,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = quant_attrs,
    .params_size = sizeof(mx_quant_params),
    .parse = parse_quant,
    .infer = infer_dequantize,
};

/* --- DynamicQuantizeLinear ------------------------------------------------------------------- */

static mx_status infer_dynamic(mx_infer_ctx *ctx) {
  if (ctx->in[0].dtype != MX_FLOAT32) return dtype_fail(ctx, 0, "DynamicQuantizeLinear takes float32");
  ctx->out[0].dtype = MX_UINT8;
  ctx->out[0].shape = ctx->in[0].shape;
  ctx->out[1].dtype = MX_FLOAT32;
  ctx->out[1].shape.rank = 0;
  if (ctx->n_out > 2) {
    ctx->out[2].dtype = MX_UINT8;
    ctx->out[2].shape.rank = 0;
  }
  return MX_OK;
}

static const mx_op_def op_dynamic = {
    .name = "DynamicQuantizeLinear",
    .domain = "",
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 3,
    .max_outputs = 3,
    .infer = infer_dynamic,
};

/* --- MatMulInteger / QLinearMatMul ----------------------------------------------------------- */

/* MatMul's shape rule (numpy matmul: 1-D operands lose their added dim, batch dims broadcast)
 * for inputs a and b into output 0. */
static mx_status matmul_shape(mx_infer_ctx *ctx, uint32_t ia, uint32_t ib) {
  const mx_shape *a = &ctx->in[ia].shape, *b = &ctx->in[ib].shape;
  mx_shape *o = &ctx->out[0].shape;
  if (a->rank == MX_RANK_UNKNOWN || b->rank == MX_RANK_UNKNOWN) {
    o->rank = MX_RANK_UNKNOWN;
    return MX_OK;
  }
  if (a->rank == 0 || b->rank == 0)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "input %u is a scalar; a matrix product needs rank >= 1",
                          a->rank == 0 ? ia : ib);
  mx_dim ka = a->dims[a->rank - 1], kb = b->rank == 1 ? b->dims[0] : b->dims[b->rank - 2];
  mx_status st = mx__check_same_dim(ctx, ka, kb, "contraction dim (last of A, rows of B)");
  if (st != MX_OK) return st;
  mx_shape ba = {0}, bb = {0};
  ba.rank = a->rank > 2 ? a->rank - 2 : 0;
  bb.rank = b->rank > 2 ? b->rank - 2 : 0;
  for (int32_t i = 0; i < ba.rank; i++) ba.dims[i] = a->dims[i];
  for (int32_t i = 0; i < bb.rank; i++) bb.dims[i] = b->dims[i];
  st = mx__broadcast_shapes(ctx, &ba, &bb, o);
  if (st != MX_OK) return st;
  if (a->rank >= 2) o->dims[o->rank++] = a->dims[a->rank - 2];
  if (b->rank >= 2) o->dims[o->rank++] = b->dims[b->rank - 1];
  return MX_OK;
}

/* A zero point or scale of a matrix operand: a scalar, or a vector whose length is the rows of
 * A (`rows` true) or the columns of B. */
static mx_status check_vec(mx_infer_ctx *ctx, uint32_t i, uint32_t m, bool rows) {
  if (!mx__in_present(ctx, i)) return MX_OK;
  const mx_shape *s = &ctx->in[i].shape, *ms = &ctx->in[m].shape;
  if (s->rank == MX_RANK_UNKNOWN || s->rank == 0) return MX_OK;
  if (s->rank == 1 && mx_dim_is_concrete(s->dims[0]) && s->dims[0] == 1) return MX_OK;
  if (s->rank != 1 || ms->rank == MX_RANK_UNKNOWN) {
    if (s->rank != 1)
      return mx__infer_fail(ctx, MX_ERR_SHAPE, "input %u must be a scalar or 1-D, not rank %d", i,
                            (int)s->rank);
    return MX_OK;
  }
  if (ms->rank < 2)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "input %u is per-%s but input %u is 1-D", i,
                          rows ? "row" : "column", m);
  mx_dim want = rows ? ms->dims[ms->rank - 2] : ms->dims[ms->rank - 1];
  return mx__check_same_dim(ctx, s->dims[0], want,
                            rows ? "per-row vector and A's rows" : "per-column vector and B's columns");
}

static mx_status infer_matmulinteger(mx_infer_ctx *ctx) {
  for (uint32_t i = 0; i < 2; i++)
    if (!in_set(ctx->in[i].dtype, DT(MX_INT8) | DT(MX_UINT8)))
      return dtype_fail(ctx, i, "MatMulInteger takes int8 or uint8");
  for (uint32_t i = 2; i < 4; i++)
    if (mx__in_present(ctx, i) && ctx->in[i].dtype != ctx->in[i - 2].dtype)
      return dtype_fail(ctx, i, "a zero point must have its matrix's dtype");
  mx_status st = check_vec(ctx, 2, 0, true);
  if (st == MX_OK) st = check_vec(ctx, 3, 1, false);
  if (st != MX_OK) return st;
  ctx->out[0].dtype = MX_INT32;
  return matmul_shape(ctx, 0, 1);
}

static const mx_op_def op_matmulinteger = {
    .name = "MatMulInteger",
    .domain = "",
    .min_inputs = 2,
    .max_inputs = 4,
    .min_outputs = 1,
    .max_outputs = 1,
    .infer = infer_matmulinteger,
};

/* Inputs: a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point. */
static mx_status infer_qlinearmatmul(mx_infer_ctx *ctx) {
  static const uint32_t mats[2] = {0, 3};
  for (int k = 0; k < 2; k++) {
    uint32_t m = mats[k];
    if (!in_set(ctx->in[m].dtype, DT(MX_INT8) | DT(MX_UINT8)))
      return dtype_fail(ctx, m, "QLinearMatMul takes int8 or uint8 matrices");
    if (!in_set(ctx->in[m + 1].dtype, F_TYPES))
      return dtype_fail(ctx, m + 1, "a scale must be a floating-point type");
    if (ctx->in[m + 2].dtype != ctx->in[m].dtype)
      return dtype_fail(ctx, m + 2, "a zero point must have its matrix's dtype");
  }
  if (!in_set(ctx->in[6].dtype, F_TYPES)) return dtype_fail(ctx, 6, "a scale must be a floating-point type");
  if (!in_set(ctx->in[7].dtype, DT(MX_INT8) | DT(MX_UINT8)))
    return dtype_fail(ctx, 7, "the output zero point must be int8 or uint8");
  mx_status st = check_vec(ctx, 1, 0, true);
  if (st == MX_OK) st = check_vec(ctx, 2, 0, true);
  if (st == MX_OK) st = check_vec(ctx, 4, 3, false);
  if (st == MX_OK) st = check_vec(ctx, 5, 3, false);
  if (st != MX_OK) return st;
  for (uint32_t i = 6; i < 8; i++) {
    const mx_shape *s = &ctx->in[i].shape;
    if (s->rank > 1 || (s->rank == 1 && mx_dim_is_concrete(s->dims[0]) && s->dims[0] != 1))
      return mx__infer_fail(ctx, MX_ERR_SHAPE, "input %u (the output's scale or zero point) must be a scalar",
                            i);
  }
  ctx->out[0].dtype = ctx->in[7].dtype;
  return matmul_shape(ctx, 0, 3);
}

static const mx_op_def op_qlinearmatmul = {
    .name = "QLinearMatMul",
    .domain = "",
    .min_inputs = 8,
    .max_inputs = 8,
    .min_outputs = 1,
    .max_outputs = 1,
    .infer = infer_qlinearmatmul,
};

const mx_op_def *const mx__ops_quant[] = {
    &op_quantize, &op_dequantize, &op_dynamic, &op_matmulinteger, &op_qlinearmatmul, NULL,
};
