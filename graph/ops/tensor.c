/* Op definitions of the tensor construction and scatter group: OneHot, Compress, Unique,
 * Scatter, ScatterElements, EyeLike, ReverseSequence, TensorScatter, and the group's array.
 *
 * OneHot's new axis has the value of depth (a fresh symbol when depth is unknown). Compress and
 * Unique are data-dependent: the selected/unique count is a fresh symbol at compile time (one
 * symbol shared by Unique's Y, indices and counts), bounded by the input's size; Compress
 * computes it exactly when the condition is a known constant. */
#include <string.h>

#include "graph/ops/groups.h"
#include "graph/ops/index_params.h"
#include "graph/ops/shape_impl.h"
#include "graph/ops/tensor_params.h"

static const mx_attr_spec axis_opt_attrs[] = {
    {.name = "axis", .type = MX_ATTR_INT},
    {.name = "sorted", .type = MX_ATTR_INT, .def_i = 1},
    {0},
};

/* Checks an axis against rank r; *out gets it normalized. */
static mx_status want_axis(mx_infer_ctx *ctx, int64_t axis, int32_t r, int32_t *out) {
  if (mx__norm_axis(axis, r, out)) return MX_OK;
  return mx__infer_fail(ctx, MX_ERR_SHAPE, "attribute axis: %lld is out of range for rank %d",
                        (long long)axis, (int)r);
}

/* --- OneHot ----------------------------------------------------------------------------------- */

static const mx_attr_spec onehot_attrs[] = {
    {.name = "axis", .type = MX_ATTR_INT, .def_i = -1},
    {0},
};

static mx_status onehot_parse(const mx_parse_ctx *pc, void *params) {
  mx_onehot_params *p = params;
  memset(p, 0, sizeof *p);
  p->axis = mx__parse_int(pc, "axis");
  return MX_OK;
}

static mx_status onehot_infer(mx_infer_ctx *ctx) {
  const mx_onehot_params *p = ctx->params;
  const mx_value_info *ind = &ctx->in[0], *depth = &ctx->in[1], *vals = &ctx->in[2];
  mx_value_info *o = &ctx->out[0];
  o->dtype = vals->dtype;
  if (ind->dtype == MX_BOOL || depth->dtype == MX_BOOL)
    return mx__infer_fail(ctx, MX_ERR_DTYPE, "indices and depth must be numeric");
  if (depth->shape.rank > 1 ||
      (depth->shape.rank == 1 && mx_dim_is_concrete(depth->shape.dims[0]) && depth->shape.dims[0] != 1))
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "depth must be a scalar or have one element");
  if (vals->shape.rank != MX_RANK_UNKNOWN &&
      (vals->shape.rank != 1 || (mx_dim_is_concrete(vals->shape.dims[0]) && vals->shape.dims[0] != 2)))
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "values must be [off_value, on_value]");
  int32_t r = ind->shape.rank;
  if (r == MX_RANK_UNKNOWN) return MX_OK;
  if (r + 1 > MX_MAX_RANK)
    return mx__infer_fail(ctx, MX_ERR_LIMIT, "output rank %d exceeds %d", (int)(r + 1), MX_MAX_RANK);
  int32_t axis;
  mx_status st = want_axis(ctx, p->axis, r + 1, &axis);
  if (st != MX_OK) return st;
  mx_dim d;
  mx_dim sv[1];
  int32_t n;
  double f;
  if (mx__shp_values(ctx, 1, sv, 1, &n) && n == 1 && !mx_dim_is_unknown(sv[0])) {
    st = mx__shp_dim_of_value(ctx, sv[0], &d, "depth");
    if (st != MX_OK) return st;
  } else if (mx__shp_scalar_f64(ctx, 1, &f)) {
    if (!(f >= 0.0)) return mx__infer_fail(ctx, MX_ERR_SHAPE, "depth %g is negative", f);
    d = (mx_dim)f;
  } else {
    d = mx__infer_fresh(ctx, "depth");
  }
  o->shape.rank = r + 1;
  for (int32_t k = 0, j = 0; k <= r; k++) o->shape.dims[k] = k == axis ? d : ind->shape.dims[j++];
  return MX_OK;
}

static const mx_op_def onehot_def = {
    .name = "OneHot",
    .min_inputs = 3,
    .max_inputs = 3,
    .min_outputs = 1,
    .max_outputs = 1,
    .value_inputs = 1u << 1,
    .attrs = onehot_attrs,
    .params_size = sizeof(mx_onehot_params),
    .parse = onehot_parse,
    .infer = onehot_infer,
};

/* --- Compress --------------------------------------------------------------------------------- */

static mx_status axis_opt_parse(const mx_parse_ctx *pc, void *params) {
  mx_axis_opt_params *p = params;
  memset(p, 0, sizeof *p);
  p->has_axis = mx__parse_attr(pc, "axis") != NULL;
  p->axis = mx__parse_int(pc, "axis");
  int64_t s = mx__parse_int(pc, "sorted");
  if (s != 0 && s != 1) return mx__parse_fail(pc, "attribute sorted must be 0 or 1, not %lld", (long long)s);
  p->sorted = (int32_t)s;
  return MX_OK;
}

static const mx_attr_spec compress_attrs[] = {
    {.name = "axis", .type = MX_ATTR_INT},
    {0},
};

/* The count of true elements of the condition when it is known, and its length. */
static bool compress_count(const mx_infer_ctx *ctx, int64_t *count) {
  const mx_tensor *t = ctx->in[1].data;
  int64_t n;
  if (!t || t->dtype != MX_BOOL || !mx_tensor_numel(t, &n) || (n > 0 && !t->data)) return false;
  *count = 0;
  for (int64_t k = 0; k < n; k++) *count += ((const uint8_t *)t->data)[k] != 0;
  return true;
}

/* Output size along the selected axis (or of the flattened input) given the selectable n. */
static mx_status compress_shape(mx_infer_ctx *ctx, bool bound, mx_shape *out) {
  const mx_axis_opt_params *p = ctx->params;
  const mx_shape *s = &ctx->in[0].shape, *cs = &ctx->in[1].shape;
  if (cs->rank != MX_RANK_UNKNOWN && cs->rank != 1)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "condition must be 1-D, not rank %d", (int)cs->rank);
  memset(out, 0, sizeof *out);
  out->rank = MX_RANK_UNKNOWN;
  int32_t axis = 0;
  if (p->has_axis) {
    if (s->rank == MX_RANK_UNKNOWN) return MX_OK;
    mx_status st = want_axis(ctx, p->axis, s->rank, &axis);
    if (st != MX_OK) return st;
    *out = *s;
  } else {
    out->rank = 1;
  }
  mx_dim avail = p->has_axis ? s->dims[axis] : mx__shape_numel(ctx->syms, s);
  mx_dim len = cs->rank == 1 ? cs->dims[0] : MX_DIM_UNKNOWN;
  int64_t count;
  mx_dim d;
  if (bound) {
    if (!mx_dim_is_concrete(avail) || !mx_dim_is_concrete(len))
      return mx__infer_fail(ctx, MX_ERR_SHAPE, "Compress's upper bound needs concrete shapes");
    d = avail < len ? avail : len;
  } else if (compress_count(ctx, &count)) {
    d = count;
  } else if (mx_dim_is_concrete(len) && len == 0) {
    d = 0;
  } else {
    d = mx__infer_fresh(ctx, "compress");
  }
  out->dims[p->has_axis ? axis : 0] = d;
  return MX_OK;
}

static mx_status compress_infer(mx_infer_ctx *ctx) {
  ctx->out[0].dtype = ctx->in[0].dtype;
  if (ctx->in[1].dtype != MX_BOOL)
    return mx__infer_fail(ctx, MX_ERR_DTYPE, "condition must be bool, not %s",
                          mx_dtype_name(ctx->in[1].dtype));
  return compress_shape(ctx, false, &ctx->out[0].shape);
}

static mx_status compress_upper_bound(mx_infer_ctx *ctx, uint32_t index, mx_shape *bound) {
  if (index != 0) return mx__infer_fail(ctx, MX_ERR_SHAPE, "Compress has one output");
  return compress_shape(ctx, true, bound);
}

static const mx_op_def compress_def = {
    .name = "Compress",
    .min_inputs = 2,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .flags = MX_OP_DATA_DEPENDENT,
    .value_inputs = 1u << 1,
    .attrs = compress_attrs,
    .params_size = sizeof(mx_axis_opt_params),
    .parse = axis_opt_parse,
    .infer = compress_infer,
    .upper_bound = compress_upper_bound,
};

/* --- Unique ----------------------------------------------------------------------------------- */

/* Shapes of Unique's outputs with u unique entries. */
static mx_status unique_shapes(mx_infer_ctx *ctx, mx_dim u, mx_shape *shapes) {
  const mx_axis_opt_params *p = ctx->params;
  const mx_shape *s = &ctx->in[0].shape;
  for (uint32_t k = 0; k < 4; k++) {
    memset(&shapes[k], 0, sizeof shapes[k]);
    shapes[k].rank = 1;
    shapes[k].dims[0] = u;
  }
  if (!p->has_axis) {
    shapes[2].dims[0] = mx__shape_numel(ctx->syms, s);
    return MX_OK;
  }
  if (s->rank == MX_RANK_UNKNOWN) {
    shapes[0].rank = MX_RANK_UNKNOWN;
    shapes[2].dims[0] = MX_DIM_UNKNOWN;
    return MX_OK;
  }
  int32_t axis;
  mx_status st = want_axis(ctx, p->axis, s->rank, &axis);
  if (st != MX_OK) return st;
  shapes[0] = *s;
  shapes[0].dims[axis] = u;
  shapes[2].dims[0] = s->dims[axis];
  return MX_OK;
}

static mx_status unique_infer(mx_infer_ctx *ctx) {
  const mx_axis_opt_params *p = ctx->params;
  const mx_shape *s = &ctx->in[0].shape;
  mx_dim u;
  int64_t n;
  int32_t axis = 0;
  if (p->has_axis && s->rank != MX_RANK_UNKNOWN) {
    mx_status st = want_axis(ctx, p->axis, s->rank, &axis);
    if (st != MX_OK) return st;
    if (s->rank == 0) return mx__infer_fail(ctx, MX_ERR_SHAPE, "attribute axis: a scalar has no axis");
  }
  bool empty = p->has_axis ? (s->rank != MX_RANK_UNKNOWN && s->dims[axis] == 0)
                           : (mx__shp_concrete_numel(s, &n) && n == 0);
  u = empty ? 0 : mx__infer_fresh(ctx, "unique");
  mx_shape shapes[4];
  mx_status st = unique_shapes(ctx, u, shapes);
  if (st != MX_OK) return st;
  for (uint32_t k = 0; k < ctx->n_out; k++) {
    ctx->out[k].dtype = k == 0 ? ctx->in[0].dtype : MX_INT64;
    ctx->out[k].shape = shapes[k];
  }
  return MX_OK;
}

static mx_status unique_upper_bound(mx_infer_ctx *ctx, uint32_t index, mx_shape *bound) {
  const mx_axis_opt_params *p = ctx->params;
  const mx_shape *s = &ctx->in[0].shape;
  int64_t n, dims[MX_MAX_RANK];
  int32_t axis = 0;
  if (index >= 4 || !mx__shp_concrete(s, dims) || !mx__shp_concrete_numel(s, &n) ||
      (p->has_axis && !mx__norm_axis(p->axis, s->rank, &axis)))
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "Unique's upper bound needs a concrete input shape");
  mx_shape shapes[4];
  mx_status st = unique_shapes(ctx, p->has_axis ? dims[axis] : n, shapes);
  if (st == MX_OK) *bound = shapes[index];
  return st;
}

static const mx_op_def unique_def = {
    .name = "Unique",
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 4,
    .flags = MX_OP_DATA_DEPENDENT,
    .attrs = axis_opt_attrs,
    .params_size = sizeof(mx_axis_opt_params),
    .parse = axis_opt_parse,
    .infer = unique_infer,
    .upper_bound = unique_upper_bound,
};

/* --- Scatter / ScatterElements ---------------------------------------------------------------- */

static const mx_attr_spec scatter_attrs[] = {
    {.name = "axis", .type = MX_ATTR_INT, .def_i = 0},
    {.name = "reduction", .type = MX_ATTR_STRING, .def_s = "none"},
    {0},
};

static mx_status scatter_parse(const mx_parse_ctx *pc, void *params) {
  mx_scatter_elements_params *p = params;
  memset(p, 0, sizeof *p);
  p->axis = mx__parse_int(pc, "axis");
  char red[16];
  mx_status st = mx__parse_string(pc, "reduction", red, sizeof red);
  if (st != MX_OK) return st;
  static const char *const names[] = {"none", "add", "mul", "max", "min"};
  p->reduction = -1;
  for (int32_t k = 0; k < 5; k++)
    if (strcmp(red, names[k]) == 0) p->reduction = k;
  if (p->reduction < 0) return mx__parse_fail(pc, "attribute reduction: unknown value '%s'", red);
  if (p->reduction != MX_SCATTER_NONE && strcmp(pc->def->name, "Scatter") == 0)
    return mx__parse_fail(pc, "attribute reduction: Scatter has none (use ScatterElements)");
  if ((p->reduction == MX_SCATTER_ADD || p->reduction == MX_SCATTER_MUL) && pc->opset < 16)
    return mx__parse_fail(pc, "attribute reduction: '%s' exists from opset 16", red);
  if ((p->reduction == MX_SCATTER_MAX || p->reduction == MX_SCATTER_MIN) && pc->opset < 18)
    return mx__parse_fail(pc, "attribute reduction: '%s' exists from opset 18", red);
  return MX_OK;
}

static mx_status scatter_infer(mx_infer_ctx *ctx) {
  const mx_scatter_elements_params *p = ctx->params;
  const mx_shape *ds = &ctx->in[0].shape, *is = &ctx->in[1].shape, *us = &ctx->in[2].shape;
  ctx->out[0].dtype = ctx->in[0].dtype;
  ctx->out[0].shape = *ds;
  mx_status st = mx__shp_want_index(ctx, 1, "indices");
  if (st == MX_OK) st = mx__infer_same_dtype(ctx, 2, 0);
  if (st != MX_OK) return st;
  int32_t r = ds->rank != MX_RANK_UNKNOWN ? ds->rank : is->rank;
  if (r == MX_RANK_UNKNOWN) return MX_OK;
  if ((ds->rank != MX_RANK_UNKNOWN && is->rank != MX_RANK_UNKNOWN && ds->rank != is->rank) ||
      (us->rank != MX_RANK_UNKNOWN && is->rank != MX_RANK_UNKNOWN && us->rank != is->rank))
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "data, indices and updates must have the same rank");
  int32_t axis;
  if (r == 0) return mx__infer_fail(ctx, MX_ERR_SHAPE, "data must have rank >= 1");
  st = want_axis(ctx, p->axis, r, &axis);
  for (int32_t k = 0; st == MX_OK && is->rank != MX_RANK_UNKNOWN && us->rank != MX_RANK_UNKNOWN && k < r;
       k++) {
    mx_dim d;
    st = mx__shp_merge_dim(ctx, is->dims[k], us->dims[k], &d, "indices and updates");
  }
  return st;
}

static const mx_op_def scatter_def = {
    .name = "Scatter",
    .min_inputs = 3,
    .max_inputs = 3,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = scatter_attrs,
    .params_size = sizeof(mx_scatter_elements_params),
    .parse = scatter_parse,
    .infer = scatter_infer,
};

static const mx_op_def scatter_elements_def = {
    .name = "ScatterElements",
    .min_inputs = 3,
    .max_inputs = 3,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = scatter_attrs,
    .params_size = sizeof(mx_scatter_elements_params),
    .parse = scatter_parse,
    .infer = scatter_infer,
};

/* --- EyeLike ---------------------------------------------------------------------------------- */

static const mx_attr_spec eyelike_attrs[] = {
    {.name = "dtype", .type = MX_ATTR_INT},
    {.name = "k", .type = MX_ATTR_INT, .def_i = 0},
    {0},
};

static mx_status eyelike_parse(const mx_parse_ctx *pc, void *params) {
  mx_eyelike_params *p = params;
  memset(p, 0, sizeof *p);
  p->k = mx__parse_int(pc, "k");
  if (mx__parse_attr(pc, "dtype")) {
    int64_t dt = mx__parse_int(pc, "dtype");
    if (dt <= 0 || dt > 64 || !mx_dtype_is_supported((int)dt))
      return mx__parse_fail(pc, "attribute dtype: %lld is not a supported element type", (long long)dt);
    p->dtype = (int32_t)dt;
  }
  return MX_OK;
}

static mx_status eyelike_infer(mx_infer_ctx *ctx) {
  const mx_eyelike_params *p = ctx->params;
  const mx_shape *s = &ctx->in[0].shape;
  ctx->out[0].dtype = p->dtype ? (mx_dtype)p->dtype : ctx->in[0].dtype;
  ctx->out[0].shape = *s;
  if (s->rank != MX_RANK_UNKNOWN && s->rank != 2)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "input must be 2-D, not rank %d", (int)s->rank);
  return MX_OK;
}

static const mx_op_def eyelike_def = {
    .name = "EyeLike",
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .flags = MX_OP_SHAPE_ONLY,
    .attrs = eyelike_attrs,
    .params_size = sizeof(mx_eyelike_params),
    .parse = eyelike_parse,
    .infer = eyelike_infer,
};

/* --- ReverseSequence -------------------------------------------------------------------------- */

static const mx_attr_spec reverse_sequence_attrs[] = {
    {.name = "batch_axis", .type = MX_ATTR_INT, .def_i = 1},
    {.name = "time_axis", .type = MX_ATTR_INT, .def_i = 0},
    {0},
};

static mx_status reverse_sequence_parse(const mx_parse_ctx *pc, void *params) {
  mx_reverse_sequence_params *p = params;
  memset(p, 0, sizeof *p);
  p->batch_axis = mx__parse_int(pc, "batch_axis");
  p->time_axis = mx__parse_int(pc, "time_axis");
  if ((p->batch_axis != 0 && p->batch_axis != 1) || (p->time_axis != 0 && p->time_axis != 1) ||
      p->batch_axis == p->time_axis)
    return mx__parse_fail(pc, "attributes batch_axis %lld and time_axis %lld must be 0 and 1 in some order",
                          (long long)p->batch_axis, (long long)p->time_axis);
  return MX_OK;
}

static mx_status reverse_sequence_infer(mx_infer_ctx *ctx) {
  const mx_reverse_sequence_params *p = ctx->params;
  const mx_shape *s = &ctx->in[0].shape, *ls = &ctx->in[1].shape;
  ctx->out[0].dtype = ctx->in[0].dtype;
  ctx->out[0].shape = *s;
  mx_status st = mx__shp_want_dtype(ctx, 1, MX_INT64, "sequence_lens");
  if (st != MX_OK) return st;
  if (s->rank != MX_RANK_UNKNOWN && s->rank < 2)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "input must have rank >= 2, not %d", (int)s->rank);
  if (ls->rank != MX_RANK_UNKNOWN && ls->rank != 1)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "sequence_lens must be 1-D, not rank %d", (int)ls->rank);
  if (s->rank != MX_RANK_UNKNOWN && ls->rank == 1) {
    mx_dim d;
    return mx__shp_merge_dim(ctx, s->dims[p->batch_axis], ls->dims[0], &d,
                             "batch of input and sequence_lens");
  }
  return MX_OK;
}

static const mx_op_def reverse_sequence_def = {
    .name = "ReverseSequence",
    .min_inputs = 2,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = reverse_sequence_attrs,
    .params_size = sizeof(mx_reverse_sequence_params),
    .parse = reverse_sequence_parse,
    .infer = reverse_sequence_infer,
};

/* --- TensorScatter ---------------------------------------------------------------------------- */

static const mx_attr_spec tensor_scatter_attrs[] = {
    {.name = "axis", .type = MX_ATTR_INT, .def_i = -2},
    {.name = "mode", .type = MX_ATTR_STRING, .def_s = "linear"},
    {0},
};

static mx_status tensor_scatter_parse(const mx_parse_ctx *pc, void *params) {
  mx_tensor_scatter_params *p = params;
  memset(p, 0, sizeof *p);
  p->axis = mx__parse_int(pc, "axis");
  char mode[16];
  mx_status st = mx__parse_string(pc, "mode", mode, sizeof mode);
  if (st != MX_OK) return st;
  if (strcmp(mode, "circular") == 0)
    p->circular = 1;
  else if (strcmp(mode, "linear") != 0)
    return mx__parse_fail(pc, "attribute mode: unknown value '%s'", mode);
  return MX_OK;
}

static mx_status tensor_scatter_infer(mx_infer_ctx *ctx) {
  const mx_tensor_scatter_params *p = ctx->params;
  const mx_shape *cs = &ctx->in[0].shape, *us = &ctx->in[1].shape;
  ctx->out[0].dtype = ctx->in[0].dtype;
  ctx->out[0].shape = *cs;
  mx_status st = mx__infer_same_dtype(ctx, 1, 0);
  if (st == MX_OK) st = mx__shp_want_dtype(ctx, 2, MX_INT64, "write_indices");
  if (st != MX_OK) return st;
  if (cs->rank == MX_RANK_UNKNOWN) return MX_OK;
  int32_t axis;
  st = want_axis(ctx, p->axis, cs->rank, &axis);
  if (st != MX_OK) return st;
  if (axis == 0)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "attribute axis: the sequence axis cannot be the batch axis 0");
  if (us->rank == MX_RANK_UNKNOWN) return MX_OK;
  if (us->rank != cs->rank)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "update has rank %d but past_cache has rank %d", (int)us->rank,
                          (int)cs->rank);
  for (int32_t k = 0; k < cs->rank; k++) {
    if (k == axis) {
      if (mx_dim_is_concrete(us->dims[k]) && mx_dim_is_concrete(cs->dims[k]) && us->dims[k] > cs->dims[k])
        return mx__infer_fail(ctx, MX_ERR_SHAPE, "update's sequence length %lld exceeds the cache's %lld",
                              (long long)us->dims[k], (long long)cs->dims[k]);
      continue;
    }
    mx_dim d;
    st = mx__shp_merge_dim(ctx, cs->dims[k], us->dims[k], &d, "past_cache and update");
    if (st != MX_OK) return st;
  }
  return MX_OK;
}

static const mx_op_def tensor_scatter_def = {
    .name = "TensorScatter",
    .min_inputs = 2,
    .max_inputs = 3,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = tensor_scatter_attrs,
    .params_size = sizeof(mx_tensor_scatter_params),
    .parse = tensor_scatter_parse,
    .infer = tensor_scatter_infer,
};

/* --- the group -------------------------------------------------------------------------------- */

const mx_op_def *const mx__ops_tensor[] = {
    &onehot_def,  &compress_def,         &unique_def,         &scatter_def, &scatter_elements_def,
    &eyelike_def, &reverse_sequence_def, &tensor_scatter_def, NULL,
};
