/* Op definitions of the string group (string tensors are host only, see mixrt/dtype.h):
 * StringConcat (opset 20, broadcasting), StringSplit (20), StringNormalizer (10) and
 * RegexFullMatch (20). StringSplit and StringNormalizer have output widths that depend on the
 * strings: symbols before a run, and the widths the data gives at run time. */
#include <string.h>

#include "common/string_tensor.h"
#include "graph/ops/groups.h"
#include "graph/ops/op.h"
#include "graph/ops/string_impl.h"
#include "graph/ops/string_params.h"
#include "graph/ops/string_split.h"

static const mx_attr_spec no_attrs[] = {{0}};

static mx_status need_string(mx_infer_ctx *ctx, uint32_t i, const char *op) {
  if (ctx->in[i].dtype != MX_STRING)
    return mx__infer_fail(ctx, MX_ERR_DTYPE, "input %u has dtype %s; %s takes string tensors", i,
                          mx_dtype_name(ctx->in[i].dtype), op);
  return MX_OK;
}

/* Concrete element count of input i's run-time data, or -1 before a run. */
static int64_t runtime_numel(const mx_infer_ctx *ctx, uint32_t i) {
  int64_t n;
  const mx_tensor *t = ctx->in[i].data;
  if (!ctx->runtime || !t || !mx_tensor_numel(t, &n)) return -1;
  return n;
}

/* --- StringConcat ----------------------------------------------------------------------------- */

static mx_status concat_infer(mx_infer_ctx *ctx) {
  for (uint32_t i = 0; i < 2; i++) {
    mx_status st = need_string(ctx, i, "StringConcat");
    if (st != MX_OK) return st;
  }
  ctx->out[0].dtype = MX_STRING;
  return mx__broadcast_shapes(ctx, &ctx->in[0].shape, &ctx->in[1].shape, &ctx->out[0].shape);
}

static const mx_op_def op_string_concat = {
    .name = "StringConcat",
    .min_inputs = 2,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = no_attrs,
    .infer = concat_infer,
};

/* --- StringSplit ------------------------------------------------------------------------------ */

static const mx_attr_spec split_attrs[] = {
    {.name = "delimiter", .type = MX_ATTR_STRING},
    {.name = "maxsplit", .type = MX_ATTR_INT, .def_i = -1},
    {0},
};

static mx_status split_parse(const mx_parse_ctx *pc, void *params) {
  mx_string_split_params *p = params;
  memset(p, 0, sizeof *p);
  if (mx__parse_string(pc, "delimiter", p->delimiter, sizeof p->delimiter) != MX_OK)
    return mx__parse_fail(pc, "delimiter is longer than %d bytes", MX_STRING_ATTR_MAX - 1);
  p->maxsplit = mx__parse_int(pc, "maxsplit");
  if (mx__parse_attr(pc, "maxsplit") && p->maxsplit < 0)
    return mx__parse_fail(pc, "maxsplit is %lld; it must be >= 0", (long long)p->maxsplit);
  return MX_OK;
}

/* The widest split of the run-time data, or -1 before a run. */
static int64_t split_width(const mx_infer_ctx *ctx) {
  const mx_string_split_params *p = ctx->params;
  int64_t n = runtime_numel(ctx, 0), w = 0;
  if (n < 0) return -1;
  for (int64_t i = 0; i < n; i++) {
    int64_t c = mx__split_count(mx__string_at(ctx->in[0].data->data, (size_t)i), p->delimiter, p->maxsplit);
    if (c > w) w = c;
  }
  return w;
}

static mx_status split_infer(mx_infer_ctx *ctx) {
  mx_status st = need_string(ctx, 0, "StringSplit");
  if (st != MX_OK) return st;
  const mx_shape *x = &ctx->in[0].shape;
  if (x->rank >= MX_MAX_RANK)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "input 0 has rank %d; StringSplit adds a dim (at most %d)",
                          (int)x->rank, MX_MAX_RANK);
  ctx->out[0].dtype = MX_STRING;
  ctx->out[0].shape = *x;
  if (x->rank != MX_RANK_UNKNOWN) {
    int64_t w = split_width(ctx);
    ctx->out[0].shape.rank = x->rank + 1;
    ctx->out[0].shape.dims[x->rank] = w >= 0 ? w : mx__infer_fresh(ctx, "substrings");
  }
  if (ctx->n_out > 1) {
    ctx->out[1].dtype = MX_INT64;
    ctx->out[1].shape = *x;
  }
  return MX_OK;
}

static mx_status split_upper_bound(mx_infer_ctx *ctx, uint32_t index, mx_shape *bound) {
  mx_status st = split_infer(ctx);
  if (st != MX_OK) return st;
  *bound = ctx->out[index].shape;
  return MX_OK;
}

static const mx_op_def op_string_split = {
    .name = "StringSplit",
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 2,
    .max_outputs = 2,
    .flags = MX_OP_DATA_DEPENDENT,
    .value_inputs = 1u << 0,
    .attrs = split_attrs,
    .params_size = sizeof(mx_string_split_params),
    .parse = split_parse,
    .infer = split_infer,
    .upper_bound = split_upper_bound,
};

/* --- StringNormalizer ------------------------------------------------------------------------- */

static const mx_attr_spec normalizer_attrs[] = {
    {.name = "case_change_action", .type = MX_ATTR_STRING, .def_s = "NONE"},
    {.name = "is_case_sensitive", .type = MX_ATTR_INT},
    {.name = "locale", .type = MX_ATTR_STRING},
    {.name = "stopwords", .type = MX_ATTR_STRINGS},
    {0},
};

static mx_status normalizer_parse(const mx_parse_ctx *pc, void *params) {
  mx_string_normalizer_params *p = params;
  memset(p, 0, sizeof *p);
  char action[16];
  if (mx__parse_string(pc, "case_change_action", action, sizeof action) != MX_OK)
    return mx__parse_fail(pc, "case_change_action is not 'LOWER', 'UPPER' or 'NONE'");
  if (strcmp(action, "LOWER") == 0)
    p->case_change = MX_CASE_LOWER;
  else if (strcmp(action, "UPPER") == 0)
    p->case_change = MX_CASE_UPPER;
  else if (strcmp(action, "NONE") == 0)
    p->case_change = MX_CASE_NONE;
  else
    return mx__parse_fail(pc, "case_change_action '%s' is not 'LOWER', 'UPPER' or 'NONE'", action);
  p->case_sensitive = mx__parse_int(pc, "is_case_sensitive") != 0;
  const mx_attr *sw = mx__parse_attr(pc, "stopwords");
  size_t used = 0;
  for (size_t i = 0; sw && i < sw->count; i++) {
    size_t n = strlen(sw->strings[i]) + 1;
    if (n > sizeof p->stopwords - used)
      return mx__parse_fail(pc, "stopwords take more than %d bytes", MX_STOPWORDS_BYTES);
    memcpy(p->stopwords + used, sw->strings[i], n);
    used += n;
    p->n_stopwords++;
  }
  return MX_OK;
}

static mx_status normalizer_infer(mx_infer_ctx *ctx) {
  mx_status st = need_string(ctx, 0, "StringNormalizer");
  if (st != MX_OK) return st;
  const mx_shape *x = &ctx->in[0].shape;
  if (x->rank != MX_RANK_UNKNOWN && x->rank != 1 && !(x->rank == 2 && x->dims[0] == 1))
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "input 0 has rank %d; StringNormalizer takes [C] or [1, C]",
                          (int)x->rank);
  ctx->out[0].dtype = MX_STRING;
  ctx->out[0].shape = *x;
  if (x->rank == MX_RANK_UNKNOWN) return MX_OK;
  int64_t n = runtime_numel(ctx, 0);
  mx_dim kept;
  if (n >= 0) {
    kept = mx__string_normalizer_kept(ctx->params, ctx->in[0].data->data, n);
    if (kept == 0) kept = 1; /* everything filtered: one empty string */
  } else {
    kept = mx__infer_fresh(ctx, "kept");
  }
  ctx->out[0].shape.dims[x->rank - 1] = kept;
  return MX_OK;
}

static mx_status normalizer_upper_bound(mx_infer_ctx *ctx, uint32_t index, mx_shape *bound) {
  mx_status st = normalizer_infer(ctx);
  if (st != MX_OK) return st;
  *bound = ctx->out[index].shape;
  return MX_OK;
}

static const mx_op_def op_string_normalizer = {
    .name = "StringNormalizer",
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .flags = MX_OP_DATA_DEPENDENT,
    .value_inputs = 1u << 0,
    .attrs = normalizer_attrs,
    .params_size = sizeof(mx_string_normalizer_params),
    .parse = normalizer_parse,
    .infer = normalizer_infer,
    .upper_bound = normalizer_upper_bound,
};

/* --- RegexFullMatch --------------------------------------------------------------------------- */

static const mx_attr_spec regex_attrs[] = {
    {.name = "pattern", .type = MX_ATTR_STRING, .required = true},
    {0},
};

static mx_status regex_parse(const mx_parse_ctx *pc, void *params) {
  mx_regex_params *p = params;
  memset(p, 0, sizeof *p);
  if (mx__parse_string(pc, "pattern", p->pattern, sizeof p->pattern) != MX_OK)
    return mx__parse_fail(pc, "pattern is longer than %zu bytes", sizeof p->pattern - 1);
  char why[128];
  if (!mx__regex_check(p->pattern, why, sizeof why))
    return mx__parse_fail(pc, "pattern '%s' is not supported: %s", p->pattern, why);
  return MX_OK;
}

static mx_status regex_infer(mx_infer_ctx *ctx) {
  mx_status st = need_string(ctx, 0, "RegexFullMatch");
  if (st != MX_OK) return st;
  ctx->out[0].dtype = MX_BOOL;
  ctx->out[0].shape = ctx->in[0].shape;
  return MX_OK;
}

static const mx_op_def op_regex_full_match = {
    .name = "RegexFullMatch",
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = regex_attrs,
    .params_size = sizeof(mx_regex_params),
    .parse = regex_parse,
    .infer = regex_infer,
};

const mx_op_def *const mx__ops_string[] = {
    &op_string_concat, &op_string_split, &op_string_normalizer, &op_regex_full_match, NULL,
};
