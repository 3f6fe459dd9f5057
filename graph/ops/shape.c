/* Shape group, part 1: the ops that only look at or relabel a shape — Shape, Size, Reshape,
 * Flatten, Squeeze, Unsqueeze, Identity, Dropout — and the group's array of definitions
 * (the layout ops live in shape_layout.c, the value makers in shape_const.c).
 *
 * Shape is where shape arithmetic starts: its output's symbolic value is the input's dims,
 * symbolic ones included. Reshape turns a symbolic target (from Shape/Gather/Concat) back into
 * dims, inferring a -1 entry as numel(input) / product(other dims) with exact symbolic
 * division, so [batch, seq, 768] -> [batch, seq, 12, -1] gives [batch, seq, 12, 64]. The other
 * relabeling ops pass the symbolic value of a small integer tensor through unchanged. */
#include <string.h>

#include "graph/ops/shape_impl.h"
#include "graph/ops/shape_params.h"

/* --- Shape, Size ------------------------------------------------------------------------------ */

static const mx_attr_spec shape_attrs[] = {
    {.name = "start", .type = MX_ATTR_INT, .def_i = 0},
    {.name = "end", .type = MX_ATTR_INT},
    {0},
};

static mx_status shape_parse(const mx_parse_ctx *pc, void *params) {
  mx_shape_params *p = params;
  memset(p, 0, sizeof *p);
  p->start = mx__parse_int(pc, "start");
  const mx_attr *end = mx__parse_attr(pc, "end");
  if (end) {
    p->end = end->i;
    p->has_end = 1;
  }
  return MX_OK;
}

/* Clamps a Shape start/end to [0, rank] after counting a negative one from the end. */
static int64_t shape_clamp(int64_t v, int64_t rank) {
  if (v < 0) v += rank;
  return v < 0 ? 0 : v > rank ? rank : v;
}

static mx_status shape_infer(mx_infer_ctx *ctx) {
  const mx_shape_params *p = ctx->params;
  const mx_shape *in = &ctx->in[0].shape;
  mx_value_info *o = &ctx->out[0];
  o->dtype = MX_INT64;
  o->shape.rank = 1;
  if (in->rank == MX_RANK_UNKNOWN) {
    o->shape.dims[0] = MX_DIM_UNKNOWN;
    return MX_OK;
  }
  int64_t start = shape_clamp(p->start, in->rank);
  int64_t end = p->has_end ? shape_clamp(p->end, in->rank) : in->rank;
  int64_t len = end > start ? end - start : 0;
  o->shape.dims[0] = len;
  mx__shp_set_sv(ctx, 0, in->dims + start, (int32_t)len);
  return MX_OK;
}

static const mx_op_def mx__op_shape = {
    .name = "Shape",
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .flags = MX_OP_SHAPE_ONLY | MX_OP_HOST_PREFERRED,
    .attrs = shape_attrs,
    .params_size = sizeof(mx_shape_params),
    .parse = shape_parse,
    .infer = shape_infer,
};

static mx_status size_infer(mx_infer_ctx *ctx) {
  mx_value_info *o = &ctx->out[0];
  o->dtype = MX_INT64;
  o->shape.rank = 0;
  mx_dim n = mx__shape_numel(ctx->syms, &ctx->in[0].shape);
  if (!mx_dim_is_unknown(n)) mx__shp_set_sv(ctx, 0, &n, 1);
  return MX_OK;
}

static const mx_attr_spec no_attrs[] = {{0}};

static const mx_op_def mx__op_size = {
    .name = "Size",
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .flags = MX_OP_SHAPE_ONLY | MX_OP_HOST_PREFERRED,
    .attrs = no_attrs,
    .infer = size_infer,
};

/* --- Reshape ---------------------------------------------------------------------------------- */

static const mx_attr_spec reshape_attrs[] = {
    {.name = "allowzero", .type = MX_ATTR_INT, .def_i = 0},
    {0},
};

static mx_status reshape_parse(const mx_parse_ctx *pc, void *params) {
  mx_reshape_params *p = params;
  p->allowzero = mx__parse_int(pc, "allowzero");
  if (p->allowzero != 0 && p->allowzero != 1) return mx__parse_fail(pc, "allowzero must be 0 or 1");
  return MX_OK;
}

static mx_status reshape_infer(mx_infer_ctx *ctx) {
  const mx_reshape_params *p = ctx->params;
  mx_status st = mx__shp_want_dtype(ctx, 1, MX_INT64, "shape");
  if (st != MX_OK) return st;
  const mx_shape *in = &ctx->in[0].shape;
  mx_value_info *o = &ctx->out[0];
  mx__shp_pass_values(ctx, 0, 0);

  mx_dim target[MX_MAX_RANK];
  int32_t n;
  if (!mx__shp_values(ctx, 1, target, MX_MAX_RANK, &n)) {
    int32_t rank;
    st = mx__shp_rank_of_length(ctx, 1, &rank);
    if (st != MX_OK) return st;
    o->shape.rank = rank;
    for (int32_t k = 0; k < rank; k++) o->shape.dims[k] = mx__infer_fresh(ctx, "reshape");
    return MX_OK;
  }

  int32_t infer_at = -1;
  bool has_zero = false;
  mx_dim known = 1; /* product of the output dims other than the -1 one */
  o->shape.rank = n;
  for (int32_t k = 0; k < n; k++) {
    int64_t v;
    mx_dim d;
    if (mx_sym_const_value(ctx->syms, target[k], &v)) {
      if (v < -1) return mx__infer_fail(ctx, MX_ERR_SHAPE, "target dim %d is %lld", (int)k, (long long)v);
      if (v == -1) {
        if (infer_at >= 0) return mx__infer_fail(ctx, MX_ERR_SHAPE, "target has more than one -1");
        infer_at = k;
        continue;
      }
      if (v == 0 && !p->allowzero) {
        if (in->rank != MX_RANK_UNKNOWN && k >= in->rank)
          return mx__infer_fail(ctx, MX_ERR_SHAPE, "target dim %d is 0 (copy) but the input has rank %d",
                                (int)k, (int)in->rank);
        d = in->rank == MX_RANK_UNKNOWN ? MX_DIM_UNKNOWN : in->dims[k];
      } else {
        d = (mx_dim)v;
        has_zero |= v == 0;
      }
    } else {
      d = target[k]; /* a symbolic size, or unknown */
    }
    o->shape.dims[k] = d;
    known = mx_sym_mul(ctx->syms, known, d);
  }
  if (has_zero && infer_at >= 0)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "allowzero target has both 0 and -1");

  mx_dim numel = mx__shape_numel(ctx->syms, in);
  if (infer_at >= 0) {
    mx_dim d = MX_DIM_UNKNOWN;
    if (mx_dim_is_concrete(numel) && mx_dim_is_concrete(known)) {
      if (known == 0) {
        if (numel != 0)
          return mx__infer_fail(ctx, MX_ERR_SHAPE,
                                "cannot reshape %lld elements: the other dims multiply to 0",
                                (long long)numel);
        /* 0 elements and a 0 among the other dims: -1 is not determined; ONNX rejects it. */
        return mx__infer_fail(ctx, MX_ERR_SHAPE, "-1 is ambiguous when the other dims multiply to 0");
      }
      if (numel % known != 0)
        return mx__infer_fail(ctx, MX_ERR_SHAPE, "cannot reshape %lld elements into groups of %lld",
                              (long long)numel, (long long)known);
      d = numel / known;
    } else if (!mx_dim_is_unknown(numel) && !mx_dim_is_unknown(known) && known != 0) {
      d = mx_sym_div(ctx->syms, numel, known);
    }
    o->shape.dims[infer_at] = d;
  } else if (mx_dim_is_concrete(numel) && mx_dim_is_concrete(known) && numel != known) {
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "cannot reshape %lld elements into %lld", (long long)numel,
                          (long long)known);
  }
  return MX_OK;
}

static const mx_op_def mx__op_reshape = {
    .name = "Reshape",
    .min_inputs = 2,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .flags = MX_OP_ALIAS,
    .value_inputs = 1u << 1,
    .attrs = reshape_attrs,
    .params_size = sizeof(mx_reshape_params),
    .parse = reshape_parse,
    .infer = reshape_infer,
};

/* --- Flatten ---------------------------------------------------------------------------------- */

static const mx_attr_spec flatten_attrs[] = {
    {.name = "axis", .type = MX_ATTR_INT, .def_i = 1},
    {0},
};

static mx_status flatten_parse(const mx_parse_ctx *pc, void *params) {
  mx_flatten_params *p = params;
  p->axis = mx__parse_int(pc, "axis");
  if (pc->opset < 11 && p->axis < 0) return mx__parse_fail(pc, "axis must be >= 0 before opset 11");
  return MX_OK;
}

static mx_status flatten_infer(mx_infer_ctx *ctx) {
  const mx_flatten_params *p = ctx->params;
  const mx_shape *in = &ctx->in[0].shape;
  mx_value_info *o = &ctx->out[0];
  mx__shp_pass_values(ctx, 0, 0);
  o->shape.rank = 2;
  if (in->rank == MX_RANK_UNKNOWN) {
    o->shape.dims[0] = p->axis == 0 ? 1 : MX_DIM_UNKNOWN;
    o->shape.dims[1] = MX_DIM_UNKNOWN;
    return MX_OK;
  }
  int64_t axis = p->axis < 0 ? p->axis + in->rank : p->axis;
  if (axis < 0 || axis > in->rank)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "axis %lld is out of range for rank %d", (long long)p->axis,
                          (int)in->rank);
  mx_dim a = 1, b = 1;
  for (int32_t k = 0; k < in->rank; k++) {
    if (k < axis)
      a = mx_sym_mul(ctx->syms, a, in->dims[k]);
    else
      b = mx_sym_mul(ctx->syms, b, in->dims[k]);
  }
  o->shape.dims[0] = a;
  o->shape.dims[1] = b;
  return MX_OK;
}

static const mx_op_def mx__op_flatten = {
    .name = "Flatten",
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .flags = MX_OP_ALIAS,
    .attrs = flatten_attrs,
    .params_size = sizeof(mx_flatten_params),
    .parse = flatten_parse,
    .infer = flatten_infer,
};

/* --- Squeeze, Unsqueeze ----------------------------------------------------------------------- */

static const mx_attr_spec axes_attrs[] = {
    {.name = "axes", .type = MX_ATTR_INTS},
    {0},
};

static mx_status axes_parse(const mx_parse_ctx *pc, void *params) {
  mx_axes_params *p = params;
  memset(p, 0, sizeof *p);
  size_t n;
  mx_status st = mx__parse_ints(pc, "axes", p->axes, MX_MAX_RANK, &n);
  if (st != MX_OK) return st;
  p->n_axes = (int32_t)n;
  p->has_axes = mx__parse_attr(pc, "axes") != NULL;
  if (p->has_axes && pc->opset >= 13)
    return mx__parse_fail(pc, "axes is an input from opset 13, not an attribute");
  return MX_OK;
}

/* The axes of Squeeze/Unsqueeze: from the attribute before opset 13, else from input 1.
 * *given: axes were specified at all; *known: their values are known. */
static mx_status axes_of(mx_infer_ctx *ctx, int64_t *axes, int32_t *n, bool *given, bool *known) {
  const mx_axes_params *p = ctx->params;
  *given = *known = false;
  *n = 0;
  if (ctx->opset < 13) {
    if (!p->has_axes) return MX_OK;
    memcpy(axes, p->axes, (size_t)p->n_axes * sizeof *axes);
    *n = p->n_axes;
    *given = *known = true;
    return MX_OK;
  }
  if (!mx__in_present(ctx, 1)) return MX_OK;
  mx_status st = mx__shp_want_dtype(ctx, 1, MX_INT64, "axes");
  if (st != MX_OK) return st;
  *given = true;
  *known = mx__shp_ints(ctx, 1, axes, MX_MAX_RANK, n);
  if (!*known) {
    /* The count may still be known from the axes input's length (-1 when not). */
    const mx_shape *s = &ctx->in[1].shape;
    *n = s->rank == 1 && mx_dim_is_concrete(s->dims[0]) && s->dims[0] <= MX_MAX_RANK ? (int32_t)s->dims[0]
                                                                                     : -1;
  }
  return MX_OK;
}

/* Normalizes axes against rank, rejecting out-of-range and repeated ones; mask gets a bit per axis. */
static mx_status norm_axes(mx_infer_ctx *ctx, const int64_t *axes, int32_t n, int32_t rank, uint32_t *mask) {
  *mask = 0;
  for (int32_t k = 0; k < n; k++) {
    int32_t a;
    if (!mx__norm_axis(axes[k], rank, &a))
      return mx__infer_fail(ctx, MX_ERR_SHAPE, "axis %lld is out of range for rank %d", (long long)axes[k],
                            (int)rank);
    if (*mask & (1u << a))
      return mx__infer_fail(ctx, MX_ERR_SHAPE, "axis %lld is repeated", (long long)axes[k]);
    *mask |= 1u << a;
  }
  return MX_OK;
}

static mx_status squeeze_infer(mx_infer_ctx *ctx) {
  const mx_shape *in = &ctx->in[0].shape;
  mx_value_info *o = &ctx->out[0];
  mx__shp_pass_values(ctx, 0, 0);
  int64_t axes[MX_MAX_RANK];
  int32_t n;
  bool given, known;
  mx_status st = axes_of(ctx, axes, &n, &given, &known);
  if (st != MX_OK) return st;
  if (in->rank == MX_RANK_UNKNOWN) return MX_OK;
  uint32_t mask = 0;
  if (given && !known) {
    /* How many axes go is known from the axes input's length, not which. */
    if (n >= 0 && n <= in->rank) {
      o->shape.rank = in->rank - n;
      for (int32_t k = 0; k < o->shape.rank; k++) o->shape.dims[k] = MX_DIM_UNKNOWN;
    }
    return MX_OK;
  }
  if (given) {
    st = norm_axes(ctx, axes, n, in->rank, &mask);
    if (st != MX_OK) return st;
    for (int32_t k = 0; k < in->rank; k++) {
      if (!(mask & (1u << k))) continue;
      mx_dim d = in->dims[k];
      if (mx_dim_is_concrete(d) && d != 1)
        return mx__infer_fail(ctx, MX_ERR_SHAPE, "cannot squeeze axis %d of size %lld", (int)k, (long long)d);
    }
  } else {
    /* All dims of size 1 go; a dim that may be 1 at run time leaves the rank unknown. */
    for (int32_t k = 0; k < in->rank; k++) {
      if (!mx_dim_is_concrete(in->dims[k])) return MX_OK;
      if (in->dims[k] == 1) mask |= 1u << k;
    }
  }
  int32_t r = 0;
  for (int32_t k = 0; k < in->rank; k++)
    if (!(mask & (1u << k))) o->shape.dims[r++] = in->dims[k];
  o->shape.rank = r;
  return MX_OK;
}

static const mx_op_def mx__op_squeeze = {
    .name = "Squeeze",
    .min_inputs = 1,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .flags = MX_OP_ALIAS | MX_OP_HOST_PREFERRED,
    .value_inputs = 1u << 1,
    .attrs = axes_attrs,
    .params_size = sizeof(mx_axes_params),
    .parse = axes_parse,
    .infer = squeeze_infer,
};

static mx_status unsqueeze_infer(mx_infer_ctx *ctx) {
  const mx_shape *in = &ctx->in[0].shape;
  mx_value_info *o = &ctx->out[0];
  mx__shp_pass_values(ctx, 0, 0);
  int64_t axes[MX_MAX_RANK];
  int32_t n;
  bool given, known;
  mx_status st = axes_of(ctx, axes, &n, &given, &known);
  if (st != MX_OK) return st;
  if (!given) return mx__infer_fail(ctx, MX_ERR_INVALID_GRAPH, "axes are required");
  if (in->rank == MX_RANK_UNKNOWN || n < 0) return MX_OK;
  int32_t rank = in->rank + n;
  if (rank > MX_MAX_RANK)
    return mx__infer_fail(ctx, MX_ERR_LIMIT, "output rank %d exceeds %d", (int)rank, MX_MAX_RANK);
  o->shape.rank = rank;
  if (!known) {
    for (int32_t k = 0; k < rank; k++) o->shape.dims[k] = MX_DIM_UNKNOWN;
    return MX_OK;
  }
  uint32_t mask;
  st = norm_axes(ctx, axes, n, rank, &mask);
  if (st != MX_OK) return st;
  int32_t src = 0;
  for (int32_t k = 0; k < rank; k++) o->shape.dims[k] = (mask & (1u << k)) ? 1 : in->dims[src++];
  return MX_OK;
}

static const mx_op_def mx__op_unsqueeze = {
    .name = "Unsqueeze",
    .min_inputs = 1,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .flags = MX_OP_ALIAS | MX_OP_HOST_PREFERRED,
    .value_inputs = 1u << 1,
    .attrs = axes_attrs,
    .params_size = sizeof(mx_axes_params),
    .parse = axes_parse,
    .infer = unsqueeze_infer,
};

/* --- Identity, Dropout ------------------------------------------------------------------------ */

static mx_status identity_infer(mx_infer_ctx *ctx) {
  mx__shp_pass(ctx, 0, 0);
  return MX_OK;
}

static const mx_op_def mx__op_identity = {
    .name = "Identity",
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .flags = MX_OP_ALIAS,
    .attrs = no_attrs,
    .infer = identity_infer,
};

static const mx_attr_spec dropout_attrs[] = {
    {.name = "ratio", .type = MX_ATTR_FLOAT, .def_f = 0.5f},
    {.name = "seed", .type = MX_ATTR_INT},
    {.name = "is_test", .type = MX_ATTR_INT},
    {.name = "consumed_inputs", .type = MX_ATTR_INTS},
    {0},
};

static mx_status dropout_parse(const mx_parse_ctx *pc, void *params) {
  mx_dropout_params *p = params;
  memset(p, 0, sizeof *p);
  p->ratio = mx__parse_float(pc, "ratio");
  p->seed = mx__parse_int(pc, "seed");
  if (pc->opset >= 12 && mx__parse_attr(pc, "ratio"))
    return mx__parse_fail(pc, "ratio is an input from opset 12, not an attribute");
  if (pc->opset < 12 && pc->n_inputs > 1)
    return mx__parse_fail(pc, "Dropout takes one input before opset 12");
  return MX_OK;
}

static mx_status dropout_infer(mx_infer_ctx *ctx) {
  mx_dtype dt = mx__in_present(ctx, 1) ? ctx->in[1].dtype : MX_FLOAT32;
  if (!mx_dtype_is_float(dt))
    return mx__infer_fail(ctx, MX_ERR_DTYPE, "input 1 (ratio) must be a float type, not %s",
                          mx_dtype_name(dt));
  mx_status st = mx__shp_want_dtype(ctx, 2, MX_BOOL, "training_mode");
  if (st != MX_OK) return st;
  mx__shp_pass(ctx, 0, 0);
  if (ctx->n_out > 1 && ctx->out[1].present) {
    /* The mask is bool from opset 7, of the data type before. */
    ctx->out[1].dtype = ctx->opset >= 7 ? MX_BOOL : ctx->in[0].dtype;
    ctx->out[1].shape = ctx->in[0].shape;
  }
  return MX_OK;
}

static const mx_op_def mx__op_dropout = {
    .name = "Dropout",
    .min_inputs = 1,
    .max_inputs = 3,
    .min_outputs = 1,
    .max_outputs = 2,
    .flags = MX_OP_ALIAS,
    .attrs = dropout_attrs,
    .params_size = sizeof(mx_dropout_params),
    .parse = dropout_parse,
    .infer = dropout_infer,
};

/* --- the group -------------------------------------------------------------------------------- */

const mx_op_def *const mx__ops_shape[] = {
    &mx__op_shape,
    &mx__op_size,
    &mx__op_reshape,
    &mx__op_flatten,
    &mx__op_squeeze,
    &mx__op_unsqueeze,
    &mx__op_transpose,
    &mx__op_concat,
    &mx__op_split,
    &mx__op_expand,
    &mx__op_tile,
    &mx__op_identity,
    &mx__op_dropout,
    &mx__op_constant,
    &mx__op_constant_of_shape,
    &mx__op_range,
    NULL,
};
