/* Op definitions of the losses group: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss
 * (opsets 12-22). Both take (N x C x d1 ... dk) scores, (N x d1 ... dk) integer targets and an
 * optional per-class weight (C); the loss has the target's shape with reduction "none", else it
 * is a scalar. SoftmaxCrossEntropyLoss may also give the log-probabilities (X's shape). */
#include <string.h>

#include "graph/ops/groups.h"
#include "graph/ops/norm_params.h"
#include "graph/ops/op.h"

static const mx_attr_spec loss_attrs[] = {
    {.name = "reduction", .type = MX_ATTR_STRING, .def_s = "mean"},
    {.name = "ignore_index", .type = MX_ATTR_INT},
    {0},
};

static mx_status loss_parse(const mx_parse_ctx *pc, void *params) {
  mx_loss_params *p = params;
  memset(p, 0, sizeof *p);
  char red[16];
  mx_status st = mx__parse_string(pc, "reduction", red, sizeof red);
  if (st != MX_OK) return st;
  if (strcmp(red, "none") == 0)
    p->reduction = MX_LOSS_NONE;
  else if (strcmp(red, "sum") == 0)
    p->reduction = MX_LOSS_SUM;
  else if (strcmp(red, "mean") == 0)
    p->reduction = MX_LOSS_MEAN;
  else
    return mx__parse_fail(pc, "reduction '%s' is not 'none', 'sum' or 'mean'", red);
  /* Whether the attribute is there matters, not only its value: no class is ignored without it. */
  p->has_ignore_index = mx__parse_attr(pc, "ignore_index") != NULL;
  p->ignore_index = p->has_ignore_index ? mx__parse_int(pc, "ignore_index") : 0;
  return MX_OK;
}

/* The checks and the loss output shared by both ops; `op` names the op in messages. */
static mx_status loss_infer_common(mx_infer_ctx *ctx, const char *op) {
  const mx_loss_params *p = ctx->params;
  const mx_value_info *x = &ctx->in[0], *t = &ctx->in[1];
  if (!mx_dtype_is_float(x->dtype))
    return mx__infer_fail(ctx, MX_ERR_DTYPE,
                          "input 0 has dtype %s; %s takes float16, bfloat16, float32 or float64",
                          mx_dtype_name(x->dtype), op);
  if (t->dtype != MX_INT32 && t->dtype != MX_INT64)
    return mx__infer_fail(ctx, MX_ERR_DTYPE, "input 1 (target) has dtype %s; it must be int32 or int64",
                          mx_dtype_name(t->dtype));
  if (mx__in_present(ctx, 2)) {
    mx_status st = mx__infer_same_dtype(ctx, 2, 0);
    if (st != MX_OK) return st;
  }
  const mx_shape *xs = &x->shape, *ts = &t->shape;
  if (xs->rank != MX_RANK_UNKNOWN && xs->rank < 2)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "input 0 has rank %d; %s needs (N x C x ...) input",
                          (int)xs->rank, op);
  if (xs->rank != MX_RANK_UNKNOWN && ts->rank != MX_RANK_UNKNOWN && ts->rank != xs->rank - 1)
    return mx__infer_fail(ctx, MX_ERR_SHAPE,
                          "input 1 (target) has rank %d; it must have rank %d (input 0's dims without C)",
                          (int)ts->rank, (int)xs->rank - 1);
  /* The target's dims are X's without C; the better known of each pair goes to the output. */
  mx_shape loss = *ts;
  if (ts->rank == MX_RANK_UNKNOWN && xs->rank != MX_RANK_UNKNOWN) {
    loss.rank = xs->rank - 1;
    for (int32_t d = 0; d < loss.rank; d++) loss.dims[d] = MX_DIM_UNKNOWN;
  }
  if (xs->rank != MX_RANK_UNKNOWN) {
    for (int32_t d = 0; d < loss.rank; d++) {
      mx_dim xd = xs->dims[d == 0 ? 0 : d + 1];
      mx_status st = mx__check_same_dim(ctx, loss.dims[d], xd, "target dim against input 0");
      if (st != MX_OK) return st;
      if (mx_dim_is_unknown(loss.dims[d]) || (!mx_dim_is_concrete(loss.dims[d]) && mx_dim_is_concrete(xd)))
        loss.dims[d] = xd;
    }
  }
  if (mx__in_present(ctx, 2)) {
    const mx_shape *ws = &ctx->in[2].shape;
    if (ws->rank != MX_RANK_UNKNOWN) {
      if (ws->rank != 1)
        return mx__infer_fail(ctx, MX_ERR_SHAPE,
                              "input 2 (weight) has rank %d; it must be 1-D with one value per class",
                              (int)ws->rank);
      if (xs->rank != MX_RANK_UNKNOWN) {
        mx_status st = mx__check_same_dim(ctx, ws->dims[0], xs->dims[1],
                                          "input 2 (weight) length against the classes C");
        if (st != MX_OK) return st;
      }
    }
  }
  ctx->out[0].dtype = x->dtype;
  if (p->reduction == MX_LOSS_NONE)
    ctx->out[0].shape = loss;
  else
    ctx->out[0].shape.rank = 0;
  return MX_OK;
}

static mx_status nllloss_infer(mx_infer_ctx *ctx) {
  return loss_infer_common(ctx, "NegativeLogLikelihoodLoss");
}

static mx_status sce_infer(mx_infer_ctx *ctx) {
  mx_status st = loss_infer_common(ctx, "SoftmaxCrossEntropyLoss");
  if (st != MX_OK) return st;
  if (ctx->n_out > 1) {
    ctx->out[1].dtype = ctx->in[0].dtype;
    ctx->out[1].shape = ctx->in[0].shape;
  }
  return MX_OK;
}

static const mx_op_def op_nllloss = {
    .name = "NegativeLogLikelihoodLoss",
    .min_inputs = 2,
    .max_inputs = 3,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = loss_attrs,
    .params_size = sizeof(mx_loss_params),
    .parse = loss_parse,
    .infer = nllloss_infer,
};

static const mx_op_def op_sce = {
    .name = "SoftmaxCrossEntropyLoss",
    .min_inputs = 2,
    .max_inputs = 3,
    .min_outputs = 1,
    .max_outputs = 2,
    .attrs = loss_attrs,
    .params_size = sizeof(mx_loss_params),
    .parse = loss_parse,
    .infer = sce_infer,
};

const mx_op_def *const mx__ops_loss[] = {
    &op_nllloss,
    &op_sce,
    NULL,
};
