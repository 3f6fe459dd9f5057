/* Op definitions of the random numbers group: RandomUniform, RandomNormal (shape and dtype
 * from attributes), RandomUniformLike, RandomNormalLike and Bernoulli (the input's shape; the
 * dtype attribute or the input's dtype) and Multinomial ([batch, sample_size] int32/int64).
 *
 * The seed attribute fixes the numbers; without it a node still draws the same numbers on
 * every run: its seed is a hash of the node name, so results repeat and differ between nodes. */
#include <string.h>

#include "graph/ops/groups.h"
#include "graph/ops/op.h"
#include "graph/ops/random_params.h"

static const mx_attr_spec uniform_attrs[] = {
    {.name = "dtype", .type = MX_ATTR_INT, .def_i = MX_FLOAT32},
    {.name = "high", .type = MX_ATTR_FLOAT, .def_f = 1.0f},
    {.name = "low", .type = MX_ATTR_FLOAT, .def_f = 0.0f},
    {.name = "seed", .type = MX_ATTR_FLOAT},
    {.name = "shape", .type = MX_ATTR_INTS},
    {0},
};

static const mx_attr_spec normal_attrs[] = {
    {.name = "dtype", .type = MX_ATTR_INT, .def_i = MX_FLOAT32},
    {.name = "mean", .type = MX_ATTR_FLOAT, .def_f = 0.0f},
    {.name = "scale", .type = MX_ATTR_FLOAT, .def_f = 1.0f},
    {.name = "seed", .type = MX_ATTR_FLOAT},
    {.name = "shape", .type = MX_ATTR_INTS},
    {0},
};

/* The *Like ops take the shape from their input. */
static const mx_attr_spec uniform_like_attrs[] = {
    {.name = "dtype", .type = MX_ATTR_INT, .def_i = 0},
    {.name = "high", .type = MX_ATTR_FLOAT, .def_f = 1.0f},
    {.name = "low", .type = MX_ATTR_FLOAT, .def_f = 0.0f},
    {.name = "seed", .type = MX_ATTR_FLOAT},
    {0},
};

static const mx_attr_spec normal_like_attrs[] = {
    {.name = "dtype", .type = MX_ATTR_INT, .def_i = 0},
    {.name = "mean", .type = MX_ATTR_FLOAT, .def_f = 0.0f},
    {.name = "scale", .type = MX_ATTR_FLOAT, .def_f = 1.0f},
    {.name = "seed", .type = MX_ATTR_FLOAT},
    {0},
};

static const mx_attr_spec bernoulli_attrs[] = {
    {.name = "dtype", .type = MX_ATTR_INT, .def_i = 0},
    {.name = "seed", .type = MX_ATTR_FLOAT},
    {0},
};

static const mx_attr_spec multinomial_attrs[] = {
    {.name = "dtype", .type = MX_ATTR_INT, .def_i = MX_INT32},
    {.name = "sample_size", .type = MX_ATTR_INT, .def_i = 1},
    {.name = "seed", .type = MX_ATTR_FLOAT},
    {0},
};

/* FNV-1a of the node name, mixed so that similar names give unrelated seeds. */
static uint64_t name_seed(const char *name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const char *c = name ? name : ""; *c; c++) h = (h ^ (uint8_t)*c) * 0x100000001b3ull;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  return h ^ (h >> 33);
}

static bool float_dtype(int64_t dt) {
  return dt == MX_FLOAT32 || dt == MX_FLOAT64 || dt == MX_FLOAT16 || dt == MX_BFLOAT16;
}

static mx_status random_parse(const mx_parse_ctx *pc, void *params, int32_t kind, bool like) {
  mx_random_params *p = params;
  memset(p, 0, sizeof *p);
  p->kind = kind;
  const mx_attr *seed = mx__parse_attr(pc, "seed");
  if (seed && seed->type == MX_ATTR_FLOAT) {
    uint32_t bits;
    memcpy(&bits, &seed->f, sizeof bits);
    p->seed = 0x9e3779b97f4a7c15ull * ((uint64_t)bits + 1);
  } else {
    p->seed = name_seed(pc->node_name);
  }
  bool has_dtype = mx__parse_attr(pc, "dtype") != NULL;
  int64_t dt = mx__parse_int(pc, "dtype");
  if (kind == MX_RANDOM_UNIFORM || kind == MX_RANDOM_NORMAL) {
    p->a = mx__parse_float(pc, kind == MX_RANDOM_UNIFORM ? "low" : "mean");
    p->b = mx__parse_float(pc, kind == MX_RANDOM_UNIFORM ? "high" : "scale");
    if (like && !has_dtype) dt = 0;
    if (dt != 0 && !float_dtype(dt))
      return mx__parse_fail(pc, "dtype %lld is not a floating-point type", (long long)dt);
    if (!like) {
      const mx_attr *shape = mx__parse_attr(pc, "shape");
      if (!shape || shape->type != MX_ATTR_INTS) return mx__parse_fail(pc, "the shape attribute is required");
      size_t n;
      mx_status st = mx__parse_ints(pc, "shape", p->shape, MX_MAX_RANK, &n);
      if (st != MX_OK) return st;
      for (size_t i = 0; i < n; i++)
        if (p->shape[i] < 0) return mx__parse_fail(pc, "shape entry %zu is %lld", i, (long long)p->shape[i]);
      p->rank = (int32_t)n;
    }
  } else if (kind == MX_RANDOM_BERNOULLI) {
    if (has_dtype && !float_dtype(dt) && dt != MX_BOOL && dt != MX_INT8 && dt != MX_UINT8 && dt != MX_INT16 &&
        dt != MX_INT32 && dt != MX_INT64)
      return mx__parse_fail(pc, "dtype %lld is not a numeric or bool type", (long long)dt);
  } else {
    if (dt != MX_INT32 && dt != MX_INT64)
      return mx__parse_fail(pc, "dtype %lld is not int32 or int64", (long long)dt);
    int64_t n = mx__parse_int(pc, "sample_size");
    if (n < 1 || n > INT32_MAX) return mx__parse_fail(pc, "sample_size %lld is not positive", (long long)n);
    p->sample_size = (int32_t)n;
  }
  p->dtype = (int32_t)dt;
  return MX_OK;
}

static mx_status uniform_parse(const mx_parse_ctx *pc, void *p) {
  return random_parse(pc, p, MX_RANDOM_UNIFORM, false);
}
static mx_status normal_parse(const mx_parse_ctx *pc, void *p) {
  return random_parse(pc, p, MX_RANDOM_NORMAL, false);
}
static mx_status uniform_like_parse(const mx_parse_ctx *pc, void *p) {
  return random_parse(pc, p, MX_RANDOM_UNIFORM, true);
}
static mx_status normal_like_parse(const mx_parse_ctx *pc, void *p) {
  return random_parse(pc, p, MX_RANDOM_NORMAL, true);
}
static mx_status bernoulli_parse(const mx_parse_ctx *pc, void *p) {
  return random_parse(pc, p, MX_RANDOM_BERNOULLI, true);
}
static mx_status multinomial_parse(const mx_parse_ctx *pc, void *p) {
  return random_parse(pc, p, MX_RANDOM_MULTINOMIAL, true);
}

static mx_status random_infer(mx_infer_ctx *ctx) {
  const mx_random_params *p = ctx->params;
  if (ctx->n_in == 0) {
    ctx->out[0].dtype = (mx_dtype)p->dtype;
    ctx->out[0].shape.rank = p->rank;
    for (int32_t d = 0; d < p->rank; d++) ctx->out[0].shape.dims[d] = p->shape[d];
    return MX_OK;
  }
  mx_dtype in = ctx->in[0].dtype;
  if (p->kind == MX_RANDOM_BERNOULLI && !mx_dtype_is_float(in))
    return mx__infer_fail(ctx, MX_ERR_DTYPE,
                          "input 0 has dtype %s; Bernoulli takes floating-point probabilities",
                          mx_dtype_name(in));
  ctx->out[0].dtype = p->dtype ? (mx_dtype)p->dtype : in;
  ctx->out[0].shape = ctx->in[0].shape;
  if (p->kind == MX_RANDOM_UNIFORM || p->kind == MX_RANDOM_NORMAL) {
    if (!mx_dtype_is_float(ctx->out[0].dtype))
      return mx__infer_fail(ctx, MX_ERR_DTYPE,
                            "the output dtype would be %s; set dtype to a floating-point type",
                            mx_dtype_name(ctx->out[0].dtype));
  }
  return MX_OK;
}

static mx_status multinomial_infer(mx_infer_ctx *ctx) {
  const mx_random_params *p = ctx->params;
  if (!mx_dtype_is_float(ctx->in[0].dtype))
    return mx__infer_fail(ctx, MX_ERR_DTYPE,
                          "input 0 has dtype %s; Multinomial takes floating-point log-probabilities",
                          mx_dtype_name(ctx->in[0].dtype));
  const mx_shape *x = &ctx->in[0].shape;
  if (x->rank != MX_RANK_UNKNOWN && x->rank != 2)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "input 0 has rank %d; Multinomial takes [batch, classes]",
                          (int)x->rank);
  ctx->out[0].dtype = (mx_dtype)p->dtype;
  ctx->out[0].shape.rank = 2;
  ctx->out[0].shape.dims[0] = x->rank == 2 ? x->dims[0] : MX_DIM_UNKNOWN;
  ctx->out[0].shape.dims[1] = p->sample_size;
  return MX_OK;
}

#define RANDOM_OP(VAR, NAME, NIN, ATTRS, PARSE, INFER) \
  static const mx_op_def VAR = {                       \
      .name = NAME,                                    \
      .min_inputs = NIN,                               \
      .max_inputs = NIN,                               \
      .min_outputs = 1,                                \
      .max_outputs = 1,                                \
      .attrs = ATTRS,                                  \
      .params_size = sizeof(mx_random_params),         \
      .parse = PARSE,                                  \
      .infer = INFER,                                  \
  }
RANDOM_OP(op_uniform, "RandomUniform", 0, uniform_attrs, uniform_parse, random_infer);
RANDOM_OP(op_normal, "RandomNormal", 0, normal_attrs, normal_parse, random_infer);
RANDOM_OP(op_uniform_like, "RandomUniformLike", 1, uniform_like_attrs, uniform_like_parse, random_infer);
RANDOM_OP(op_normal_like, "RandomNormalLike", 1, normal_like_attrs, normal_like_parse, random_infer);
RANDOM_OP(op_bernoulli, "Bernoulli", 1, bernoulli_attrs, bernoulli_parse, random_infer);
RANDOM_OP(op_multinomial, "Multinomial", 1, multinomial_attrs, multinomial_parse, multinomial_infer);

const mx_op_def *const mx__ops_random[] = {
    &op_uniform, &op_normal, &op_uniform_like, &op_normal_like, &op_bernoulli, &op_multinomial, NULL,
};
