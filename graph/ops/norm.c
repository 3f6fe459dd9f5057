/* Op definitions of the normalizations group: BatchNormalization (opsets 1-15: inference and
 * training mode with the running (and before opset 14 saved) statistics, opset 15's separate
 * scale/statistics types, spatial=0 before opset 9),
 * InstanceNormalization, GroupNormalization (opset 18: one scale/bias per group; opset 21: per
 * channel, stash_type), LRN, LpNormalization and MeanVarianceNormalization.
 *
 * All keep X's shape (symbolic dims stay symbolic); the work of inference is refusing what the
 * kernels could not run: per-channel tensors of the wrong length, num_groups not dividing the
 * channels, p other than 1 or 2, axes out of range. */
#include <stdio.h>
#include <string.h>

#include "graph/ops/groups.h"
#include "graph/ops/norm_params.h"
#include "graph/ops/op.h"

static mx_status need_float(mx_infer_ctx *ctx, uint32_t i, const char *op) {
  if (mx_dtype_is_float(ctx->in[i].dtype)) return MX_OK;
  return mx__infer_fail(ctx, MX_ERR_DTYPE,
                        "input %u has dtype %s; %s takes float16, bfloat16, float32 or float64", i,
                        mx_dtype_name(ctx->in[i].dtype), op);
}

/* Fails unless X (input 0) has at least min_rank dims (an unknown rank passes). */
static mx_status need_rank(mx_infer_ctx *ctx, int32_t min_rank, const char *op) {
  int32_t r = ctx->in[0].shape.rank;
  if (r == MX_RANK_UNKNOWN || r >= min_rank) return MX_OK;
  return mx__infer_fail(ctx, MX_ERR_SHAPE, "input 0 has rank %d; %s needs (N x C x ...) input of rank >= %d",
                        (int)r, op, (int)min_rank);
}

/* Fails unless input i is 1-D with `want` elements (when both are known). `what` names the
 * input and `count` what the length must equal (e.g. "the channels of X"). */
static mx_status need_vector(mx_infer_ctx *ctx, uint32_t i, mx_dim want, const char *what,
                             const char *count) {
  const mx_shape *s = &ctx->in[i].shape;
  if (s->rank == MX_RANK_UNKNOWN) return MX_OK;
  if (s->rank != 1)
    return mx__infer_fail(ctx, MX_ERR_SHAPE,
                          "input %u (%s) has rank %d; it must be 1-D with one value per %s", i, what,
                          (int)s->rank, count);
  char msg[96];
  snprintf(msg, sizeof msg, "input %u (%s) length against %s", i, what, count);
  return mx__check_same_dim(ctx, s->dims[0], want, msg);
}

/* The channel dim of X, or unknown. */
static mx_dim channels(const mx_infer_ctx *ctx) {
  const mx_shape *s = &ctx->in[0].shape;
  return s->rank != MX_RANK_UNKNOWN && s->rank >= 2 ? s->dims[1] : MX_DIM_UNKNOWN;
}

static void same_as_x(mx_infer_ctx *ctx) {
  ctx->out[0].dtype = ctx->in[0].dtype;
  ctx->out[0].shape = ctx->in[0].shape;
}

/* --- BatchNormalization ------------------------------------------------------------------------- */

static const mx_attr_spec batchnorm_attrs[] = {
    {.name = "epsilon", .type = MX_ATTR_FLOAT, .def_f = 1e-5f},
    {.name = "momentum", .type = MX_ATTR_FLOAT, .def_f = 0.9f},
    {.name = "training_mode", .type = MX_ATTR_INT, .def_i = 0}, /* opset 14 on */
    {.name = "spatial", .type = MX_ATTR_INT, .def_i = 1},       /* opsets 1-8 */
    {.name = "is_test", .type = MX_ATTR_INT, .def_i = 0},       /* opsets 1-6 */
    {.name = "consumed_inputs", .type = MX_ATTR_INTS},          /* opsets 1-5, legacy */
    {0},
};

static mx_status batchnorm_parse(const mx_parse_ctx *pc, void *params) {
  mx_batchnorm_params *p = params;
  memset(p, 0, sizeof *p);
  p->epsilon = mx__parse_float(pc, "epsilon");
  p->momentum = mx__parse_float(pc, "momentum");
  if (!(p->epsilon >= 0.0f)) return mx__parse_fail(pc, "epsilon %g is negative", (double)p->epsilon);
  if (pc->opset >= 14) {
    int64_t tm = mx__parse_int(pc, "training_mode");
    if (tm != 0 && tm != 1) return mx__parse_fail(pc, "training_mode %lld is not 0 or 1", (long long)tm);
    p->training_mode = (int32_t)tm;
    if (!tm && pc->n_outputs > 1)
      return mx__parse_fail(
          pc, "%u outputs with training_mode 0; running_mean and running_var need training_mode 1",
          pc->n_outputs);
    if (pc->n_outputs > 3)
      return mx__parse_fail(pc, "%u outputs; from opset 14 BatchNormalization has at most 3", pc->n_outputs);
  } else {
    /* Before opset 14 the outputs say the mode: Y alone is inference; Y, mean, var (and
     * saved_mean, saved_var) training, unless is_test (opsets 1-6) says otherwise. */
    bool is_test = pc->opset < 7 && mx__parse_int(pc, "is_test") != 0;
    p->training_mode = pc->n_outputs > 1 && !is_test;
  }
  int64_t spatial = pc->opset < 9 ? mx__parse_int(pc, "spatial") : 1;
  if (spatial != 0 && spatial != 1)
    return mx__parse_fail(pc, "spatial %lld is not 0 or 1", (long long)spatial);
  p->spatial = (int32_t)spatial;
  if (!spatial && p->training_mode)
    return mx__fail(pc->err, MX_ERR_UNSUPPORTED, "spatial 0 is only supported in inference mode");
  return MX_OK;
}

static mx_status batchnorm_infer(mx_infer_ctx *ctx) {
  const mx_batchnorm_params *p = ctx->params;
  static const char *const names[] = {"X", "scale", "B", "input_mean", "input_var"};
  mx_status st = need_rank(ctx, 2, "BatchNormalization");
  for (uint32_t i = 0; i < 5 && st == MX_OK; i++) st = need_float(ctx, i, "BatchNormalization");
  /* Opset 14 lets the statistics have their own type, opset 15 also scale and bias. */
  if (st == MX_OK) st = mx__infer_same_dtype(ctx, 2, ctx->opset >= 15 ? 1 : 0);
  if (st == MX_OK && ctx->opset < 15) st = mx__infer_same_dtype(ctx, 1, 0);
  if (st == MX_OK) st = mx__infer_same_dtype(ctx, 4, ctx->opset >= 14 ? 3 : 0);
  if (st == MX_OK && ctx->opset < 14) st = mx__infer_same_dtype(ctx, 3, 0);
  const mx_shape *x = &ctx->in[0].shape;
  for (uint32_t i = 1; i < 5 && st == MX_OK; i++) {
    if (p->spatial) {
      st = need_vector(ctx, i, channels(ctx), names[i], "channel of X");
      continue;
    }
    /* spatial 0: one value per element of a sample, the dims of X after N. */
    const mx_shape *s = &ctx->in[i].shape;
    if (x->rank == MX_RANK_UNKNOWN || s->rank == MX_RANK_UNKNOWN) continue;
    if (s->rank != x->rank - 1)
      return mx__infer_fail(ctx, MX_ERR_SHAPE,
                            "input %u (%s) has rank %d; with spatial 0 it must have X's dims after N", i,
                            names[i], (int)s->rank);
    for (int32_t d = 0; d < s->rank && st == MX_OK; d++)
      st = mx__check_same_dim(ctx, s->dims[d], x->dims[d + 1], names[i]);
  }
  if (st != MX_OK) return st;
  same_as_x(ctx);
  for (uint32_t i = 1; i < ctx->n_out; i++) {
    ctx->out[i].dtype = ctx->in[3].dtype;
    ctx->out[i].shape = ctx->in[3].shape;
  }
  return MX_OK;
}

static const mx_op_def op_batchnorm = {
    .name = "BatchNormalization",
    .min_inputs = 5,
    .max_inputs = 5,
    .min_outputs = 1,
    .max_outputs = 5,
    .attrs = batchnorm_attrs,
    .params_size = sizeof(mx_batchnorm_params),
    .parse = batchnorm_parse,
    .infer = batchnorm_infer,
};

/* --- InstanceNormalization / GroupNormalization -------------------------------------------------- */

static const mx_attr_spec instancenorm_attrs[] = {
    {.name = "epsilon", .type = MX_ATTR_FLOAT, .def_f = 1e-5f},
    {.name = "consumed_inputs", .type = MX_ATTR_INTS}, /* opset 1, legacy */
    {0},
};

static mx_status instancenorm_parse(const mx_parse_ctx *pc, void *params) {
  mx_groupnorm_params *p = params;
  memset(p, 0, sizeof *p);
  p->epsilon = mx__parse_float(pc, "epsilon");
  if (!(p->epsilon >= 0.0f)) return mx__parse_fail(pc, "epsilon %g is negative", (double)p->epsilon);
  p->stash_type = MX_FLOAT32;
  return MX_OK;
}

static const mx_attr_spec groupnorm_attrs[] = {
    {.name = "epsilon", .type = MX_ATTR_FLOAT, .def_f = 1e-5f},
    {.name = "num_groups", .type = MX_ATTR_INT, .required = true},
    {.name = "stash_type", .type = MX_ATTR_INT, .def_i = 1}, /* opset 21 on */
    {0},
};

static mx_status groupnorm_parse(const mx_parse_ctx *pc, void *params) {
  mx_groupnorm_params *p = params;
  memset(p, 0, sizeof *p);
  p->epsilon = mx__parse_float(pc, "epsilon");
  if (!(p->epsilon >= 0.0f)) return mx__parse_fail(pc, "epsilon %g is negative", (double)p->epsilon);
  int64_t g = mx__parse_int(pc, "num_groups");
  if (g < 1 || g > INT32_MAX) return mx__parse_fail(pc, "num_groups %lld must be positive", (long long)g);
  p->num_groups = (int32_t)g;
  p->per_group_affine = pc->opset < 21;
  int64_t stash = mx__parse_int(pc, "stash_type");
  if (stash != MX_FLOAT32 && stash != MX_FLOAT64 && stash != MX_BFLOAT16 && stash != MX_FLOAT16)
    return mx__parse_fail(pc, "stash_type %lld is not a floating-point dtype", (long long)stash);
  p->stash_type = (int32_t)stash;
  return MX_OK;
}

static mx_status groupnorm_infer(mx_infer_ctx *ctx) {
  const mx_groupnorm_params *p = ctx->params;
  const char *op = p->num_groups ? "GroupNormalization" : "InstanceNormalization";
  mx_status st = need_float(ctx, 0, op);
  if (st == MX_OK) st = need_rank(ctx, 2, op);
  if (st == MX_OK) st = mx__infer_same_dtype(ctx, 1, 0);
  if (st == MX_OK) st = mx__infer_same_dtype(ctx, 2, 0);
  if (st != MX_OK) return st;
  mx_dim c = channels(ctx);
  if (p->num_groups && mx_dim_is_concrete(c) && c % p->num_groups != 0)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "num_groups %d does not divide the %lld channels of X",
                          (int)p->num_groups, (long long)c);
  bool per_group = p->num_groups && p->per_group_affine;
  mx_dim want = per_group ? mx_sym_const(ctx->syms, p->num_groups) : c;
  const char *count = per_group ? "group (num_groups, opset 18)" : "channel of X";
  st = need_vector(ctx, 1, want, "scale", count);
  if (st == MX_OK) st = need_vector(ctx, 2, want, p->num_groups ? "bias" : "B", count);
  if (st != MX_OK) return st;
  same_as_x(ctx);
  return MX_OK;
}

static const mx_op_def op_instancenorm = {
    .name = "InstanceNormalization",
    .min_inputs = 3,
    .max_inputs = 3,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = instancenorm_attrs,
    .params_size = sizeof(mx_groupnorm_params),
    .parse = instancenorm_parse,
    .infer = groupnorm_infer,
};

static const mx_op_def op_groupnorm = {
    .name = "GroupNormalization",
    .min_inputs = 3,
    .max_inputs = 3,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = groupnorm_attrs,
    .params_size = sizeof(mx_groupnorm_params),
    .parse = groupnorm_parse,
    .infer = groupnorm_infer,
};

/* --- LRN ------------------------------------------------------------------------------------------ */

static const mx_attr_spec lrn_attrs[] = {
    {.name = "alpha", .type = MX_ATTR_FLOAT, .def_f = 1e-4f},
    {.name = "beta", .type = MX_ATTR_FLOAT, .def_f = 0.75f},
    {.name = "bias", .type = MX_ATTR_FLOAT, .def_f = 1.0f},
    {.name = "size", .type = MX_ATTR_INT, .required = true},
    {0},
};

static mx_status lrn_parse(const mx_parse_ctx *pc, void *params) {
  mx_lrn_params *p = params;
  memset(p, 0, sizeof *p);
  p->alpha = mx__parse_float(pc, "alpha");
  p->beta = mx__parse_float(pc, "beta");
  p->bias = mx__parse_float(pc, "bias");
  int64_t size = mx__parse_int(pc, "size");
  if (size < 1 || size > INT32_MAX) return mx__parse_fail(pc, "size %lld must be positive", (long long)size);
  p->size = (int32_t)size;
  return MX_OK;
}

static mx_status lrn_infer(mx_infer_ctx *ctx) {
  mx_status st = need_float(ctx, 0, "LRN");
  if (st == MX_OK) st = need_rank(ctx, 2, "LRN");
  if (st != MX_OK) return st;
  same_as_x(ctx);
  return MX_OK;
}

static const mx_op_def op_lrn = {
    .name = "LRN",
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = lrn_attrs,
    .params_size = sizeof(mx_lrn_params),
    .parse = lrn_parse,
    .infer = lrn_infer,
};

/* --- LpNormalization ------------------------------------------------------------------------------ */

static const mx_attr_spec lpnorm_attrs[] = {
    {.name = "axis", .type = MX_ATTR_INT, .def_i = -1},
    {.name = "p", .type = MX_ATTR_INT, .def_i = 2},
    {0},
};

static mx_status lpnorm_parse(const mx_parse_ctx *pc, void *params) {
  mx_lpnorm_params *p = params;
  memset(p, 0, sizeof *p);
  p->axis = mx__parse_int(pc, "axis");
  int64_t pv = mx__parse_int(pc, "p");
  if (pv != 1 && pv != 2) return mx__parse_fail(pc, "p %lld is not 1 or 2", (long long)pv);
  p->p = (int32_t)pv;
  return MX_OK;
}

static mx_status lpnorm_infer(mx_infer_ctx *ctx) {
  const mx_lpnorm_params *p = ctx->params;
  mx_status st = need_float(ctx, 0, "LpNormalization");
  if (st != MX_OK) return st;
  const mx_shape *s = &ctx->in[0].shape;
  int32_t axis;
  if (s->rank != MX_RANK_UNKNOWN && !mx__norm_axis(p->axis, s->rank, &axis))
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "axis %lld is out of range for rank %d", (long long)p->axis,
                          (int)s->rank);
  same_as_x(ctx);
  return MX_OK;
}

static const mx_op_def op_lpnorm = {
    .name = "LpNormalization",
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = lpnorm_attrs,
    .params_size = sizeof(mx_lpnorm_params),
    .parse = lpnorm_parse,
    .infer = lpnorm_infer,
};

/* --- MeanVarianceNormalization -------------------------------------------------------------------- */

static const mx_attr_spec mvn_attrs[] = {
    {.name = "axes", .type = MX_ATTR_INTS}, /* default [0, 2, 3] */
    {0},
};

static mx_status mvn_parse(const mx_parse_ctx *pc, void *params) {
  mx_mvn_params *p = params;
  memset(p, 0, sizeof *p);
  if (!mx__parse_attr(pc, "axes")) {
    p->axes[0] = 0, p->axes[1] = 2, p->axes[2] = 3;
    p->n_axes = 3;
    return MX_OK;
  }
  size_t n;
  mx_status st = mx__parse_ints(pc, "axes", p->axes, MX_MAX_RANK, &n);
  if (st != MX_OK) return st;
  if (n == 0) return mx__parse_fail(pc, "axes is empty");
  p->n_axes = (int32_t)n;
  return MX_OK;
}

static mx_status mvn_infer(mx_infer_ctx *ctx) {
  const mx_mvn_params *p = ctx->params;
  mx_status st = need_float(ctx, 0, "MeanVarianceNormalization");
  if (st != MX_OK) return st;
  const mx_shape *s = &ctx->in[0].shape;
  if (s->rank != MX_RANK_UNKNOWN) {
    uint32_t seen = 0;
    for (int32_t k = 0; k < p->n_axes; k++) {
      int32_t a;
      if (!mx__norm_axis(p->axes[k], s->rank, &a))
        return mx__infer_fail(ctx, MX_ERR_SHAPE, "axes entry %lld is out of range for rank %d",
                              (long long)p->axes[k], (int)s->rank);
      if (seen & (1u << a)) return mx__infer_fail(ctx, MX_ERR_SHAPE, "axes names axis %d twice", (int)a);
      seen |= 1u << a;
    }
  }
  same_as_x(ctx);
  return MX_OK;
}

static const mx_op_def op_mvn = {
    .name = "MeanVarianceNormalization",
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = mvn_attrs,
    .params_size = sizeof(mx_mvn_params),
    .parse = mvn_parse,
    .infer = mvn_infer,
};

const mx_op_def *const mx__ops_norm[] = {
    &op_batchnorm, &op_instancenorm, &op_groupnorm, &op_lrn, &op_lpnorm, &op_mvn, NULL,
};
