/* Op definitions of the ai.onnx.preview.training optimizers (opset 1): Adagrad, Adam and
 * Momentum. Each takes a learning rate R and a step count T (scalars), then n tensors X, their
 * gradients G and one or two state tensors per X (Adagrad: H; Momentum: V; Adam: V and H), and
 * gives the updated X and states, each with its input's shape. */
#include <string.h>

#include "graph/ops/groups.h"
#include "graph/ops/op.h"
#include "graph/ops/training_params.h"

static const mx_attr_spec adagrad_attrs[] = {
    {.name = "decay_factor", .type = MX_ATTR_FLOAT},
    {.name = "epsilon", .type = MX_ATTR_FLOAT, .def_f = 1e-6f},
    {.name = "norm_coefficient", .type = MX_ATTR_FLOAT},
    {0},
};
static const mx_attr_spec adam_attrs[] = {
    {.name = "alpha", .type = MX_ATTR_FLOAT, .def_f = 0.9f},
    {.name = "beta", .type = MX_ATTR_FLOAT, .def_f = 0.999f},
    {.name = "epsilon", .type = MX_ATTR_FLOAT, .def_f = 1e-6f},
    {.name = "norm_coefficient", .type = MX_ATTR_FLOAT},
    {.name = "norm_coefficient_post", .type = MX_ATTR_FLOAT},
    {0},
};
static const mx_attr_spec momentum_attrs[] = {
    {.name = "alpha", .type = MX_ATTR_FLOAT, .required = true},
    {.name = "beta", .type = MX_ATTR_FLOAT, .required = true},
    {.name = "mode", .type = MX_ATTR_STRING, .required = true},
    {.name = "norm_coefficient", .type = MX_ATTR_FLOAT, .required = true},
    {0},
};

/* Tensors per optimized X: X, G and the states. */
static mx_status parse_groups(const mx_parse_ctx *pc, mx_optimizer_params *p, uint32_t per_x) {
  uint32_t n = pc->n_inputs;
  if (n < 2 + per_x || (n - 2) % per_x != 0)
    return mx__parse_fail(pc, "%u inputs; %s takes R, T and %u tensors per optimized input", n, pc->def->name,
                          per_x);
  p->groups = (int32_t)((n - 2) / per_x);
  if (pc->n_outputs != (uint32_t)p->groups * (per_x - 1))
    return mx__parse_fail(pc, "%u outputs; %d optimized inputs give %u", pc->n_outputs, p->groups,
                          (uint32_t)p->groups * (per_x - 1));
  return MX_OK;
}

static mx_status adagrad_parse(const mx_parse_ctx *pc, void *params) {
  mx_optimizer_params *p = params;
  memset(p, 0, sizeof *p);
  p->decay_factor = mx__parse_float(pc, "decay_factor");
  p->epsilon = mx__parse_float(pc, "epsilon");
  p->norm_coefficient = mx__parse_float(pc, "norm_coefficient");
  return parse_groups(pc, p, 3);
}

static mx_status adam_parse(const mx_parse_ctx *pc, void *params) {
  mx_optimizer_params *p = params;
  memset(p, 0, sizeof *p);
  p->alpha = mx__parse_float(pc, "alpha");
  p->beta = mx__parse_float(pc, "beta");
  p->epsilon = mx__parse_float(pc, "epsilon");
  p->norm_coefficient = mx__parse_float(pc, "norm_coefficient");
  p->norm_coefficient_post = mx__parse_float(pc, "norm_coefficient_post");
  return parse_groups(pc, p, 4);
}

static mx_status momentum_parse(const mx_parse_ctx *pc, void *params) {
  mx_optimizer_params *p = params;
  memset(p, 0, sizeof *p);
  p->alpha = mx__parse_float(pc, "alpha");
  p->beta = mx__parse_float(pc, "beta");
  p->norm_coefficient = mx__parse_float(pc, "norm_coefficient");
  char mode[16];
  if (mx__parse_string(pc, "mode", mode, sizeof mode) != MX_OK ||
      (strcmp(mode, "standard") != 0 && strcmp(mode, "nesterov") != 0))
    return mx__parse_fail(pc, "mode is not 'standard' or 'nesterov'");
  p->nesterov = strcmp(mode, "nesterov") == 0;
  return parse_groups(pc, p, 3);
}

/* R a float scalar, T an int64 scalar; every X, G and state of one dtype (float or double) and
 * each G and state shaped like its X; output k is input 2 + k's shape (X then the states). */
static mx_status optimizer_infer(mx_infer_ctx *ctx) {
  const mx_optimizer_params *p = ctx->params;
  const mx_value_info *r = &ctx->in[0], *t = &ctx->in[1];
  if (r->dtype != MX_FLOAT32 && r->dtype != MX_FLOAT64)
    return mx__infer_fail(ctx, MX_ERR_DTYPE, "input 0 (R) has dtype %s; it must be float32 or float64",
                          mx_dtype_name(r->dtype));
  if (t->dtype != MX_INT64)
    return mx__infer_fail(ctx, MX_ERR_DTYPE, "input 1 (T) has dtype %s; it must be int64",
                          mx_dtype_name(t->dtype));
  for (uint32_t i = 0; i < 2; i++) {
    const mx_shape *s = &ctx->in[i].shape;
    if (s->rank > 1 || (s->rank == 1 && mx_dim_is_concrete(s->dims[0]) && s->dims[0] != 1))
      return mx__infer_fail(ctx, MX_ERR_SHAPE, "input %u (%s) must be a scalar", i, i ? "T" : "R");
  }
  uint32_t n = (uint32_t)p->groups, per_x = (ctx->n_in - 2) / n;
  for (uint32_t i = 2; i < ctx->n_in; i++) {
    const mx_value_info *v = &ctx->in[i];
    if (v->dtype != MX_FLOAT32 && v->dtype != MX_FLOAT64)
      return mx__infer_fail(ctx, MX_ERR_DTYPE,
                            "input %u has dtype %s; the optimized tensors must be float32 or float64", i,
                            mx_dtype_name(v->dtype));
    mx_status st = mx__infer_same_dtype(ctx, i, 2);
    if (st != MX_OK) return st;
    const mx_shape *xs = &ctx->in[2 + (i - 2) % n].shape, *vs = &v->shape;
    if (xs->rank != MX_RANK_UNKNOWN && vs->rank != MX_RANK_UNKNOWN) {
      if (xs->rank != vs->rank)
        return mx__infer_fail(ctx, MX_ERR_SHAPE, "input %u has rank %d; its X (input %u) has rank %d", i,
                              (int)vs->rank, 2 + (i - 2) % n, (int)xs->rank);
      for (int32_t d = 0; d < xs->rank; d++) {
        st = mx__check_same_dim(ctx, vs->dims[d], xs->dims[d], "a gradient or state dim against its X");
        if (st != MX_OK) return st;
      }
    }
  }
  (void)per_x;
  for (uint32_t k = 0; k < ctx->n_out; k++) {
    /* Outputs: X_new (n), then each state kind (n each); inputs skip the gradients. */
    uint32_t src = k < n ? 2 + k : 2 + n + k;
    ctx->out[k].dtype = ctx->in[src].dtype;
    ctx->out[k].shape = ctx->in[src].shape;
  }
  return MX_OK;
}

static const mx_op_def op_adagrad = {
    .name = "Adagrad",
    .domain = "ai.onnx.preview.training",
    .min_inputs = 5,
    .max_inputs = MX_VARIADIC,
    .min_outputs = 2,
    .max_outputs = MX_VARIADIC,
    .attrs = adagrad_attrs,
    .params_size = sizeof(mx_optimizer_params),
    .parse = adagrad_parse,
    .infer = optimizer_infer,
};
static const mx_op_def op_adam = {
    .name = "Adam",
    .domain = "ai.onnx.preview.training",
    .min_inputs = 6,
    .max_inputs = MX_VARIADIC,
    .min_outputs = 3,
    .max_outputs = MX_VARIADIC,
    .attrs = adam_attrs,
    .params_size = sizeof(mx_optimizer_params),
    .parse = adam_parse,
    .infer = optimizer_infer,
};
static const mx_op_def op_momentum = {
    .name = "Momentum",
    .domain = "ai.onnx.preview.training",
    .min_inputs = 5,
    .max_inputs = MX_VARIADIC,
    .min_outputs = 2,
    .max_outputs = MX_VARIADIC,
    .attrs = momentum_attrs,
    .params_size = sizeof(mx_optimizer_params),
    .parse = momentum_parse,
    .infer = optimizer_infer,
};

const mx_op_def *const mx__ops_training[] = {
    &op_adagrad,
    &op_adam,
    &op_momentum,
    NULL,
};
