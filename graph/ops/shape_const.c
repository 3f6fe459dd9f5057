/* Shape group, part 3: ops that make values — Constant, ConstantOfShape, Range.
 *
 * Constant carries its value inline in its params (ONNX import turns Constant nodes into graph
 * constants, so only builder-made nodes take this path). ConstantOfShape's output shape is the
 * symbolic value of its input. Range's length max(ceil((limit - start) / delta), 0) is concrete
 * for concrete inputs and symbolic (ceildiv) when the inputs are known expressions and delta a
 * constant, as in Range(0, seq, 1) for position ids; its values are kept when short. */
#include <math.h>
#include <string.h>

#include "graph/ops/shape_impl.h"
#include "graph/ops/shape_params.h"

/* --- Constant --------------------------------------------------------------------------------- */

static const mx_attr_spec constant_attrs[] = {
    {.name = "value", .type = MX_ATTR_TENSOR},          {.name = "value_float", .type = MX_ATTR_FLOAT},
    {.name = "value_floats", .type = MX_ATTR_FLOATS},   {.name = "value_int", .type = MX_ATTR_INT},
    {.name = "value_ints", .type = MX_ATTR_INTS},       {.name = "value_string", .type = MX_ATTR_STRING},
    {.name = "value_strings", .type = MX_ATTR_STRINGS}, {0},
};

/* Copies n bytes of element data into the params, failing when they do not fit inline. */
static mx_status constant_store(const mx_parse_ctx *pc, mx_constant_params *p, const void *data, size_t n) {
  if (n > sizeof p->data.bytes)
    return mx__fail(pc->err, MX_ERR_LIMIT,
                    "Constant value of %zu bytes exceeds the %zu bytes a Constant node may hold inline "
                    "(make it a graph constant instead)",
                    n, sizeof p->data.bytes);
  if (n) memcpy(p->data.bytes, data, n);
  p->nbytes = n;
  return MX_OK;
}

static mx_status constant_parse(const mx_parse_ctx *pc, void *params) {
  mx_constant_params *p = params;
  memset(p, 0, sizeof *p);
  const mx_attr *given = NULL;
  for (const mx_attr_spec *s = constant_attrs; s->name; s++) {
    const mx_attr *a = mx__parse_attr(pc, s->name);
    if (!a) continue;
    if (given)
      return mx__parse_fail(pc, "both '%s' and '%s' are given; exactly one value attribute is allowed",
                            given->name, a->name);
    given = a;
  }
  if (!given) return mx__parse_fail(pc, "no value attribute");
  switch (given->type) {
    case MX_ATTR_TENSOR: {
      const mx_tensor *t = given->tensor;
      size_t nbytes;
      if (!t || !mx_dtype_size(t->dtype) || t->rank < 0 || t->rank > MX_MAX_RANK ||
          !mx_tensor_nbytes(t, &nbytes))
        return mx__parse_fail(pc, "value is not a valid tensor");
      p->dtype = t->dtype;
      p->rank = t->rank;
      for (int32_t k = 0; k < t->rank; k++) p->dims[k] = t->dims[k];
      if (nbytes && !t->data) return mx__parse_fail(pc, "value has no data");
      return constant_store(pc, p, t->data, nbytes);
    }
    case MX_ATTR_FLOAT: p->dtype = MX_FLOAT32; return constant_store(pc, p, &given->f, sizeof given->f);
    case MX_ATTR_INT: p->dtype = MX_INT64; return constant_store(pc, p, &given->i, sizeof given->i);
    case MX_ATTR_FLOATS:
      p->dtype = MX_FLOAT32;
      p->rank = 1;
      p->dims[0] = (int64_t)given->count;
      return constant_store(pc, p, given->floats, given->count * sizeof *given->floats);
    case MX_ATTR_INTS:
      p->dtype = MX_INT64;
      p->rank = 1;
      p->dims[0] = (int64_t)given->count;
      return constant_store(pc, p, given->ints, given->count * sizeof *given->ints);
    default:
      return mx__fail(pc->err, MX_ERR_UNSUPPORTED, "string constants ('%s') are not supported", given->name);
  }
}

static mx_status constant_infer(mx_infer_ctx *ctx) {
  const mx_constant_params *p = ctx->params;
  mx_value_info *o = &ctx->out[0];
  o->dtype = (mx_dtype)p->dtype;
  o->shape.rank = p->rank;
  int64_t n = 1;
  for (int32_t k = 0; k < p->rank; k++) {
    o->shape.dims[k] = p->dims[k];
    n *= p->dims[k];
  }
  if ((o->dtype == MX_INT64 || o->dtype == MX_INT32) && n <= MX_SV_MAX) {
    mx_dim *sv = mx__infer_out_sv(ctx, 0);
    for (int64_t k = 0; k < n; k++) {
      int64_t v;
      if (o->dtype == MX_INT64) {
        memcpy(&v, p->data.bytes + k * 8, 8);
      } else {
        int32_t v32;
        memcpy(&v32, p->data.bytes + k * 4, 4);
        v = v32;
      }
      sv[k] = mx_sym_const(ctx->syms, v);
    }
    o->sv = sv;
    o->sv_len = (int32_t)n;
  }
  return MX_OK;
}

const mx_op_def mx__op_constant = {
    .name = "Constant",
    .min_inputs = 0,
    .max_inputs = 0,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = constant_attrs,
    .params_size = sizeof(mx_constant_params),
    .parse = constant_parse,
    .infer = constant_infer,
};

/* --- ConstantOfShape -------------------------------------------------------------------------- */

static const mx_attr_spec constant_of_shape_attrs[] = {
    {.name = "value", .type = MX_ATTR_TENSOR},
    {0},
};

static mx_status constant_of_shape_parse(const mx_parse_ctx *pc, void *params) {
  mx_constant_of_shape_params *p = params;
  memset(p, 0, sizeof *p);
  p->dtype = MX_FLOAT32;
  const mx_attr *a = mx__parse_attr(pc, "value");
  if (!a) return MX_OK;
  const mx_tensor *t = a->tensor;
  int64_t n;
  if (!t || !mx_dtype_size(t->dtype) || !mx_tensor_numel(t, &n) || n != 1 || !t->data)
    return mx__parse_fail(pc, "value must be a tensor of one element");
  p->dtype = t->dtype;
  memcpy(p->value.bytes, t->data, mx_dtype_size(t->dtype));
  return MX_OK;
}

static mx_status constant_of_shape_infer(mx_infer_ctx *ctx) {
  const mx_constant_of_shape_params *p = ctx->params;
  mx_value_info *o = &ctx->out[0];
  o->dtype = (mx_dtype)p->dtype;
  mx_status st = mx__shp_want_dtype(ctx, 0, MX_INT64, "shape");
  if (st != MX_OK) return st;
  st = mx__shp_target_shape(ctx, 0, &o->shape, true, "dim");
  if (st != MX_OK) return st;
  int64_t n;
  bool int_like = o->dtype == MX_INT64 || o->dtype == MX_INT32 || o->dtype == MX_BOOL;
  if (int_like && mx__shp_concrete_numel(&o->shape, &n) && n <= MX_SV_MAX) {
    int64_t v;
    if (o->dtype == MX_INT64) {
      memcpy(&v, p->value.bytes, 8);
    } else if (o->dtype == MX_INT32) {
      int32_t v32;
      memcpy(&v32, p->value.bytes, 4);
      v = v32;
    } else {
      v = p->value.bytes[0] != 0;
    }
    mx_dim *sv = mx__infer_out_sv(ctx, 0);
    mx_dim c = mx_sym_const(ctx->syms, v);
    for (int64_t k = 0; k < n; k++) sv[k] = c;
    o->sv = sv;
    o->sv_len = (int32_t)n;
  }
  return MX_OK;
}

const mx_op_def mx__op_constant_of_shape = {
    .name = "ConstantOfShape",
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .flags = MX_OP_HOST_PREFERRED,
    .value_inputs = 1u << 0,
    .attrs = constant_of_shape_attrs,
    .params_size = sizeof(mx_constant_of_shape_params),
    .parse = constant_of_shape_parse,
    .infer = constant_of_shape_infer,
};

/* --- Range ------------------------------------------------------------------------------------ */

static const mx_attr_spec no_attrs[] = {{0}};

/* The one element of integer input i as a symbolic integer (a constant or an expression). */
static bool range_int_value(mx_infer_ctx *ctx, uint32_t i, mx_dim *out) {
  mx_dim v[1];
  int32_t n;
  if (!mx__shp_values(ctx, i, v, 1, &n) || n != 1 || mx_dim_is_unknown(v[0])) return false;
  *out = v[0];
  return true;
}

/* Range length when start, limit and delta are known symbolic integers and delta a constant. */
static mx_status range_symbolic_len(mx_infer_ctx *ctx, mx_dim start, mx_dim limit, int64_t delta,
                                    mx_dim *len) {
  mx_symtab *t = ctx->syms;
  int64_t c;
  if (delta == 0) return mx__infer_fail(ctx, MX_ERR_SHAPE, "delta is 0");
  /* ceil((limit - start) / delta) == ceildiv(span, |delta|) with span taken in delta's direction. */
  mx_dim span = delta > 0 ? mx_sym_sub(t, limit, start) : mx_sym_sub(t, start, limit);
  mx_dim step = delta > 0 ? (mx_dim)delta : (mx_dim)(delta == INT64_MIN ? INT64_MAX : -delta);
  if (mx_sym_const_value(t, span, &c)) {
    *len = c <= 0 ? 0 : (mx_dim)(c / step + (c % step != 0));
    return MX_OK;
  }
  mx_dim q = mx_sym_ceildiv(t, span, step);
  /* A span that is one symbol (symbols are sizes, never negative) needs no clamp at 0. */
  *len = mx_sym_symbol_index(t, span) >= 0 ? q : mx_sym_max(t, q, 0);
  return MX_OK;
}

static mx_status range_infer(mx_infer_ctx *ctx) {
  mx_dtype dt = ctx->in[0].dtype;
  mx_value_info *o = &ctx->out[0];
  o->dtype = dt;
  o->shape.rank = 1;
  o->shape.dims[0] = MX_DIM_UNKNOWN;
  /* float16 and bfloat16 joined the type constraints in opset 27. */
  if (dt != MX_FLOAT32 && dt != MX_FLOAT64 && dt != MX_INT16 && dt != MX_INT32 && dt != MX_INT64 &&
      !((dt == MX_FLOAT16 || dt == MX_BFLOAT16) && ctx->opset >= 27))
    return mx__infer_fail(ctx, MX_ERR_DTYPE,
                          "input 0 (start) has dtype %s; Range takes float, double, int16, "
                          "int32 or int64 (and float16, bfloat16 from opset 27)",
                          mx_dtype_name(dt));
  static const char *const roles[] = {"start", "limit", "delta"};
  for (uint32_t i = 0; i < 3; i++) {
    mx_status st = mx__shp_want_dtype(ctx, i, dt, roles[i]);
    if (st != MX_OK) return st;
    const mx_shape *s = &ctx->in[i].shape;
    if (s->rank > 1 || (s->rank == 1 && mx_dim_is_concrete(s->dims[0]) && s->dims[0] != 1))
      return mx__infer_fail(ctx, MX_ERR_SHAPE, "input %u (%s) must be a scalar", i, roles[i]);
  }

  if (mx_dtype_is_float(dt)) {
    double v[3];
    for (uint32_t i = 0; i < 3; i++)
      if (!mx__shp_scalar_f64(ctx, i, &v[i])) {
        o->shape.dims[0] = mx__infer_fresh(ctx, "range");
        return MX_OK;
      }
    if (v[2] == 0.0) return mx__infer_fail(ctx, MX_ERR_SHAPE, "delta is 0");
    double len = ceil((v[1] - v[0]) / v[2]);
    if (!(len < 9.0e18)) return mx__infer_fail(ctx, MX_ERR_LIMIT, "Range would have %g elements", len);
    o->shape.dims[0] = len > 0 ? (mx_dim)len : 0;
    return MX_OK;
  }

  mx_dim start, limit, delta;
  int64_t dv;
  if (!range_int_value(ctx, 0, &start) || !range_int_value(ctx, 1, &limit) ||
      !range_int_value(ctx, 2, &delta) || !mx_sym_const_value(ctx->syms, delta, &dv)) {
    o->shape.dims[0] = mx__infer_fresh(ctx, "range");
    return MX_OK;
  }
  mx_dim len = MX_DIM_UNKNOWN;
  mx_status st = range_symbolic_len(ctx, start, limit, dv, &len);
  if (st != MX_OK) return st;
  o->shape.dims[0] = len;
  if (mx_dim_is_concrete(len) && len <= MX_SV_MAX) {
    mx_dim *sv = mx__infer_out_sv(ctx, 0);
    for (mx_dim k = 0; k < len; k++) sv[k] = mx_sym_add(ctx->syms, start, mx_sym_const(ctx->syms, k * dv));
    o->sv = sv;
    o->sv_len = (int32_t)len;
  }
  return MX_OK;
}

const mx_op_def mx__op_range = {
    .name = "Range",
    .min_inputs = 3,
    .max_inputs = 3,
    .min_outputs = 1,
    .max_outputs = 1,
    .flags = MX_OP_HOST_PREFERRED,
    .value_inputs = 0x7,
    .attrs = no_attrs,
    .infer = range_infer,
};
