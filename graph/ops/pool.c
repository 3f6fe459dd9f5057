/* Op definitions of the pooling group: MaxPool (opsets 1-22, optional Indices output,
 * dilations, ceil_mode, storage_order, int8/uint8 from 12), AveragePool (count_include_pad,
 * ceil_mode, dilations from 19), LpPool, GlobalAveragePool, GlobalMaxPool, GlobalLpPool and
 * MaxUnpool (optional output_shape input).
 *
 * The window attributes and output sizes are shared with the convolutions (conv.c), so pooled
 * sizes stay symbolic expressions of the input's dims. */
#include <string.h>

#include "graph/ops/conv_params.h"
#include "graph/ops/groups.h"
#include "graph/ops/op.h"

static mx_status pool_dtype(mx_infer_ctx *ctx, bool allow_8bit) {
  mx_dtype dt = ctx->in[0].dtype;
  if (mx_dtype_is_float(dt) || (allow_8bit && (dt == MX_INT8 || dt == MX_UINT8))) return MX_OK;
  return mx__infer_fail(ctx, MX_ERR_DTYPE,
                        "input 0 has dtype %s; it must be float16, bfloat16, float32, float64%s",
                        mx_dtype_name(dt), allow_8bit ? ", int8 or uint8" : "");
}

/* Checks X's rank (at least 3: N, C and spatial dims) and copies N and C into y. */
static mx_status pool_start(mx_infer_ctx *ctx, mx_shape *y, int32_t *spatial) {
  const mx_shape *x = &ctx->in[0].shape;
  memset(y, 0, sizeof *y);
  *spatial = -1;
  if (x->rank == MX_RANK_UNKNOWN) {
    y->rank = MX_RANK_UNKNOWN;
    return MX_OK;
  }
  if (x->rank < 3)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "input has rank %d; pooling needs [N, C, spatial...]",
                          (int)x->rank);
  *spatial = x->rank - 2;
  y->rank = x->rank;
  y->dims[0] = x->dims[0];
  y->dims[1] = x->dims[1];
  return MX_OK;
}

/* --- MaxPool / AveragePool / LpPool ------------------------------------------------------------- */

static const mx_attr_spec maxpool_attrs[] = {
    {.name = "auto_pad", .type = MX_ATTR_STRING, .def_s = "NOTSET"},
    {.name = "ceil_mode", .type = MX_ATTR_INT, .def_i = 0},
    {.name = "dilations", .type = MX_ATTR_INTS},
    {.name = "kernel_shape", .type = MX_ATTR_INTS, .required = true},
    {.name = "pads", .type = MX_ATTR_INTS},
    {.name = "storage_order", .type = MX_ATTR_INT, .def_i = 0},
    {.name = "strides", .type = MX_ATTR_INTS},
    {0},
};

static const mx_attr_spec avgpool_attrs[] = {
    {.name = "auto_pad", .type = MX_ATTR_STRING, .def_s = "NOTSET"},
    {.name = "ceil_mode", .type = MX_ATTR_INT, .def_i = 0},
    {.name = "count_include_pad", .type = MX_ATTR_INT, .def_i = 0},
    {.name = "dilations", .type = MX_ATTR_INTS},
    {.name = "kernel_shape", .type = MX_ATTR_INTS, .required = true},
    {.name = "pads", .type = MX_ATTR_INTS},
    {.name = "strides", .type = MX_ATTR_INTS},
    {0},
};

/* p is an INT (opset 2 on). */
static const mx_attr_spec lppool_attrs[] = {
    {.name = "auto_pad", .type = MX_ATTR_STRING, .def_s = "NOTSET"},
    {.name = "ceil_mode", .type = MX_ATTR_INT, .def_i = 0},
    {.name = "dilations", .type = MX_ATTR_INTS},
    {.name = "kernel_shape", .type = MX_ATTR_INTS, .required = true},
    {.name = "p", .type = MX_ATTR_INT, .def_i = 2},
    {.name = "pads", .type = MX_ATTR_INTS},
    {.name = "strides", .type = MX_ATTR_INTS},
    {0},
};

static mx_status windowed_parse(const mx_parse_ctx *pc, mx_conv_params *p, int32_t op) {
  mx_status st = mx__conv_parse_window(pc, p, op);
  if (st != MX_OK) return st;
  if (p->n_kernel == 0) return mx__parse_fail(pc, "attribute 'kernel_shape' is required");
  return MX_OK;
}
static mx_status maxpool_parse(const mx_parse_ctx *pc, void *params) {
  return windowed_parse(pc, params, MX_CONVOP_MAX_POOL);
}
static mx_status avgpool_parse(const mx_parse_ctx *pc, void *params) {
  return windowed_parse(pc, params, MX_CONVOP_AVERAGE_POOL);
}
static mx_status lppool_parse(const mx_parse_ctx *pc, void *params) {
  return windowed_parse(pc, params, MX_CONVOP_LP_POOL);
}

static mx_status windowed_infer(mx_infer_ctx *ctx) {
  const mx_conv_params *p = ctx->params;
  mx_status st = pool_dtype(ctx, p->op == MX_CONVOP_MAX_POOL);
  if (st != MX_OK) return st;
  mx_shape y;
  int32_t spatial;
  if ((st = pool_start(ctx, &y, &spatial)) != MX_OK) return st;
  if (spatial > 0) {
    if ((st = mx__conv_check_spatial(ctx, p, spatial)) != MX_OK) return st;
    if (p->n_kernel != spatial)
      return mx__infer_fail(ctx, MX_ERR_SHAPE, "attribute 'kernel_shape' has %d entries for %d spatial dims",
                            (int)p->n_kernel, (int)spatial);
    for (int32_t i = 0; i < spatial; i++) {
      mx_dim in = ctx->in[0].shape.dims[2 + i];
      y.dims[2 + i] = mx__conv_out_dim(ctx, p, i, in, p->kernel_shape[i]);
      int64_t v;
      if (mx_dim_is_expr(y.dims[2 + i]) && mx_sym_const_value(ctx->syms, y.dims[2 + i], &v) && v < 0)
        return mx__infer_fail(ctx, MX_ERR_SHAPE, "spatial dim %d of size %lld is smaller than the window",
                              (int)i, (long long)in);
    }
  }
  ctx->out[0].dtype = ctx->in[0].dtype;
  ctx->out[0].shape = y;
  if (ctx->n_out > 1 && ctx->out[1].present) {
    ctx->out[1].dtype = MX_INT64;
    ctx->out[1].shape = y;
  }
  return MX_OK;
}

static const mx_op_def op_maxpool = {
    .name = "MaxPool",
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 2,
    .attrs = maxpool_attrs,
    .params_size = sizeof(mx_conv_params),
    .parse = maxpool_parse,
    .infer = windowed_infer,
};

static const mx_op_def op_avgpool = {
    .name = "AveragePool",
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = avgpool_attrs,
    .params_size = sizeof(mx_conv_params),
    .parse = avgpool_parse,
    .infer = windowed_infer,
};

static const mx_op_def op_lppool = {
    .name = "LpPool",
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = lppool_attrs,
    .params_size = sizeof(mx_conv_params),
    .parse = lppool_parse,
    .infer = windowed_infer,
};

/* --- GlobalAveragePool / GlobalMaxPool / GlobalLpPool ------------------------------------------- */

static const mx_attr_spec global_lppool_attrs[] = {
    {.name = "p", .type = MX_ATTR_INT, .def_i = 2},
    {0},
};
static const mx_attr_spec no_attrs[] = {{0}};

static mx_status global_avg_parse(const mx_parse_ctx *pc, void *params) {
  return mx__conv_parse_window(pc, params, MX_CONVOP_GLOBAL_AVERAGE_POOL);
}
static mx_status global_max_parse(const mx_parse_ctx *pc, void *params) {
  return mx__conv_parse_window(pc, params, MX_CONVOP_GLOBAL_MAX_POOL);
}
static mx_status global_lp_parse(const mx_parse_ctx *pc, void *params) {
  return mx__conv_parse_window(pc, params, MX_CONVOP_GLOBAL_LP_POOL);
}

static mx_status global_infer(mx_infer_ctx *ctx) {
  mx_status st = pool_dtype(ctx, false);
  if (st != MX_OK) return st;
  mx_shape y;
  int32_t spatial;
  if ((st = pool_start(ctx, &y, &spatial)) != MX_OK) return st;
  for (int32_t i = 0; i < spatial; i++) y.dims[2 + i] = 1;
  ctx->out[0].dtype = ctx->in[0].dtype;
  ctx->out[0].shape = y;
  return MX_OK;
}

static const mx_op_def op_global_avgpool = {
    .name = "GlobalAveragePool",
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = no_attrs,
    .params_size = sizeof(mx_conv_params),
    .parse = global_avg_parse,
    .infer = global_infer,
};

static const mx_op_def op_global_maxpool = {
    .name = "GlobalMaxPool",
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = no_attrs,
    .params_size = sizeof(mx_conv_params),
    .parse = global_max_parse,
    .infer = global_infer,
};

static const mx_op_def op_global_lppool = {
    .name = "GlobalLpPool",
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = global_lppool_attrs,
    .params_size = sizeof(mx_conv_params),
    .parse = global_lp_parse,
    .infer = global_infer,
};

/* --- MaxUnpool ---------------------------------------------------------------------------------- */

static const mx_attr_spec maxunpool_attrs[] = {
    {.name = "kernel_shape", .type = MX_ATTR_INTS, .required = true},
    {.name = "pads", .type = MX_ATTR_INTS},
    {.name = "strides", .type = MX_ATTR_INTS},
    {0},
};

static mx_status maxunpool_parse(const mx_parse_ctx *pc, void *params) {
  return windowed_parse(pc, params, MX_CONVOP_MAX_UNPOOL);
}

/* Inputs: X, I (int64 flat indices into Y, as MaxPool's Indices), output_shape (optional). */
static mx_status maxunpool_infer(mx_infer_ctx *ctx) {
  const mx_conv_params *p = ctx->params;
  mx_status st = pool_dtype(ctx, false);
  if (st != MX_OK) return st;
  if (ctx->in[1].dtype != MX_INT64)
    return mx__infer_fail(ctx, MX_ERR_DTYPE, "input 1 (I) has dtype %s; it must be int64",
                          mx_dtype_name(ctx->in[1].dtype));
  if (mx__in_present(ctx, 2) && ctx->in[2].dtype != MX_INT64)
    return mx__infer_fail(ctx, MX_ERR_DTYPE, "input 2 (output_shape) has dtype %s; it must be int64",
                          mx_dtype_name(ctx->in[2].dtype));
  if ((st = mx__check_same_dim(ctx, ctx->in[0].shape.rank, ctx->in[1].shape.rank, "rank of X and I")) !=
      MX_OK)
    return st;
  mx_shape y;
  int32_t spatial;
  if ((st = pool_start(ctx, &y, &spatial)) != MX_OK) return st;
  ctx->out[0].dtype = ctx->in[0].dtype;
  if (spatial > 0) {
    if ((st = mx__conv_check_spatial(ctx, p, spatial)) != MX_OK) return st;
    if (p->n_kernel != spatial)
      return mx__infer_fail(ctx, MX_ERR_SHAPE, "attribute 'kernel_shape' has %d entries for %d spatial dims",
                            (int)p->n_kernel, (int)spatial);
  }
  if (mx__in_present(ctx, 2)) {
    int32_t n = -1;
    const mx_dim *v = mx__in_values(ctx, 2, &n);
    if (v && spatial > 0 && n != spatial + 2)
      return mx__infer_fail(ctx, MX_ERR_SHAPE, "output_shape has %d entries for an input of rank %d", (int)n,
                            (int)(spatial + 2));
    if (v) {
      y.rank = n;
      for (int32_t i = 0; i < n; i++) y.dims[i] = v[i];
    } else if (spatial > 0) {
      for (int32_t i = 0; i < spatial; i++) y.dims[2 + i] = mx__infer_fresh(ctx, "unpooled");
    }
    ctx->out[0].shape = y;
    return MX_OK;
  }
  mx_symtab *t = ctx->syms;
  for (int32_t i = 0; i < spatial; i++) {
    /* (in - 1) * stride + kernel - pads */
    mx_dim in = ctx->in[0].shape.dims[2 + i];
    int64_t s = p->n_strides ? p->strides[i] : 1;
    int64_t pads = p->n_pads ? p->pads[i] + p->pads[spatial + i] : 0;
    mx_dim o = mx_sym_add(t, mx_sym_mul(t, mx_sym_sub(t, in, 1), mx_sym_const(t, s)),
                          mx_sym_const(t, p->kernel_shape[i] - pads));
    y.dims[2 + i] = mx_dim_is_unknown(in) ? MX_DIM_UNKNOWN : o;
  }
  ctx->out[0].shape = y;
  return MX_OK;
}

static const mx_op_def op_maxunpool = {
    .name = "MaxUnpool",
    .min_inputs = 2,
    .max_inputs = 3,
    .min_outputs = 1,
    .max_outputs = 1,
    .value_inputs = 1u << 2,
    .attrs = maxunpool_attrs,
    .params_size = sizeof(mx_conv_params),
    .parse = maxunpool_parse,
    .infer = maxunpool_infer,
};

const mx_op_def *const mx__ops_pool[] = {
    &op_maxpool,        &op_avgpool,       &op_lppool,    &op_global_avgpool,
    &op_global_maxpool, &op_global_lppool, &op_maxunpool, NULL,
};
