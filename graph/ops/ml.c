/* Op definitions of the ml group: the ai.onnx.ml ops LabelEncoder (opsets 1-4: keys and values
 * as strings, int64s, floats or tensors), Binarizer and ArrayFeatureExtractor (1), TreeEnsemble (5,
 * post transforms but PROBIT), and the
 * default-domain TfIdfVectorizer (9, integer or string pools). */
#include <stdio.h>
#include <string.h>

#include "common/string_tensor.h"
#include "graph/ops/groups.h"
#include "graph/ops/ml_params.h"
#include "graph/ops/op.h"

/* --- Binarizer -------------------------------------------------------------------------------- */

static const mx_attr_spec binarizer_attrs[] = {
    {.name = "threshold", .type = MX_ATTR_FLOAT},
    {0},
};

static mx_status binarizer_parse(const mx_parse_ctx *pc, void *params) {
  mx_binarizer_params *p = params;
  memset(p, 0, sizeof *p);
  p->threshold = mx__parse_float(pc, "threshold");
  return MX_OK;
}

static bool numeric(mx_dtype d) {
  return d == MX_FLOAT32 || d == MX_FLOAT64 || d == MX_INT32 || d == MX_INT64;
}

static mx_status binarizer_infer(mx_infer_ctx *ctx) {
  if (!numeric(ctx->in[0].dtype))
    return mx__infer_fail(ctx, MX_ERR_DTYPE,
                          "input 0 has dtype %s; Binarizer takes float, double, int32 or int64",
                          mx_dtype_name(ctx->in[0].dtype));
  ctx->out[0].dtype = ctx->in[0].dtype;
  ctx->out[0].shape = ctx->in[0].shape;
  return MX_OK;
}

static const mx_op_def op_binarizer = {
    .name = "Binarizer",
    .domain = "ai.onnx.ml",
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .flags = MX_OP_ELEMENTWISE,
    .attrs = binarizer_attrs,
    .params_size = sizeof(mx_binarizer_params),
    .parse = binarizer_parse,
    .infer = binarizer_infer,
};

/* --- ArrayFeatureExtractor -------------------------------------------------------------------- */

static const mx_attr_spec no_attrs[] = {{0}};

/* Y = X[..., indices]: X's leading dims (1 for a 1-D X) and the number of indices. */
static mx_status afe_infer(mx_infer_ctx *ctx) {
  const mx_value_info *x = &ctx->in[0], *y = &ctx->in[1];
  if (!numeric(x->dtype) && x->dtype != MX_STRING)
    return mx__infer_fail(ctx, MX_ERR_DTYPE,
                          "input 0 has dtype %s; ArrayFeatureExtractor takes float, double, "
                          "int32, int64 or string",
                          mx_dtype_name(x->dtype));
  if (y->dtype != MX_INT64)
    return mx__infer_fail(ctx, MX_ERR_DTYPE, "input 1 (indices) has dtype %s; it must be int64",
                          mx_dtype_name(y->dtype));
  if (x->shape.rank == 0)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "input 0 is a scalar; ArrayFeatureExtractor needs at least 1-D");
  ctx->out[0].dtype = x->dtype;
  mx_shape *o = &ctx->out[0].shape;
  o->rank = x->shape.rank;
  if (x->shape.rank == MX_RANK_UNKNOWN) return MX_OK;
  mx_dim count = mx__shape_numel(ctx->syms, &y->shape);
  if (x->shape.rank == 1) {
    o->rank = 2;
    o->dims[0] = 1;
    o->dims[1] = count;
    return MX_OK;
  }
  for (int32_t d = 0; d < x->shape.rank - 1; d++) o->dims[d] = x->shape.dims[d];
  o->dims[x->shape.rank - 1] = count;
  return MX_OK;
}

static const mx_op_def op_afe = {
    .name = "ArrayFeatureExtractor",
    .domain = "ai.onnx.ml",
    .min_inputs = 2,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = no_attrs,
    .infer = afe_infer,
};

/* --- LabelEncoder ----------------------------------------------------------------------------- */

static const mx_attr_spec label_attrs[] = {
    {.name = "keys_strings", .type = MX_ATTR_STRINGS},
    {.name = "keys_int64s", .type = MX_ATTR_INTS},
    {.name = "keys_floats", .type = MX_ATTR_FLOATS},
    {.name = "keys_tensor", .type = MX_ATTR_TENSOR},
    {.name = "values_strings", .type = MX_ATTR_STRINGS},
    {.name = "values_int64s", .type = MX_ATTR_INTS},
    {.name = "values_floats", .type = MX_ATTR_FLOATS},
    {.name = "values_tensor", .type = MX_ATTR_TENSOR},
    {.name = "default_string", .type = MX_ATTR_STRING, .def_s = "_Unused"},
    {.name = "default_int64", .type = MX_ATTR_INT, .def_i = -1},
    {.name = "default_float", .type = MX_ATTR_FLOAT, .def_f = -0.0f},
    {.name = "default_tensor", .type = MX_ATTR_TENSOR},
    {0},
};

/* Element i of a numeric attribute tensor as double (integers also exactly as int64 in *iv);
 * false for an element type LabelEncoder tables do not take. */
/* v truncated to int64; 0 for NaN and values int64 cannot hold (converting those is undefined). */
static int64_t int_part(double v) { return v > -9.2e18 && v < 9.2e18 ? (int64_t)v : 0; }

static bool tensor_num(const mx_tensor *t, size_t i, double *fv, int64_t *iv) {
  const void *d = t->data;
  switch (t->dtype) {
    case MX_FLOAT32:
      *fv = ((const float *)d)[i];
      *iv = int_part(*fv);
      return true;
    case MX_FLOAT64:
      *fv = ((const double *)d)[i];
      *iv = int_part(*fv);
      return true;
    case MX_INT8: *iv = ((const int8_t *)d)[i]; break;
    case MX_INT16: *iv = ((const int16_t *)d)[i]; break;
    case MX_INT32: *iv = ((const int32_t *)d)[i]; break;
    case MX_INT64: *iv = ((const int64_t *)d)[i]; break;
    case MX_UINT8: *iv = ((const uint8_t *)d)[i]; break;
    case MX_UINT16: *iv = ((const uint16_t *)d)[i]; break;
    case MX_UINT32: *iv = ((const uint32_t *)d)[i]; break;
    case MX_UINT64: *iv = (int64_t)((const uint64_t *)d)[i]; break;
    default: return false;
  }
  *fv = (double)*iv;
  return true;
}

/* Stores element i of a table given as strings, ints, floats or a tensor; false when a string is
 * too long or a tensor element has a type tables do not take. */
static bool label_set(mx_label *l, mx_dtype dt, const mx_attr *a, size_t i) {
  memset(l, 0, sizeof *l);
  if (a->type == MX_ATTR_TENSOR) {
    const mx_tensor *t = a->tensor;
    if (dt == MX_STRING) {
      const char *s = mx__string_at(t->data, i);
      if (strlen(s) >= sizeof l->s) return false;
      strcpy(l->s, s);
      return true;
    }
    return tensor_num(t, i, &l->f, &l->i);
  }
  if (a->type == MX_ATTR_STRINGS) {
    if (strlen(a->strings[i]) >= sizeof l->s) return false;
    strcpy(l->s, a->strings[i]);
  } else if (a->type == MX_ATTR_INTS) {
    l->i = a->ints[i];
  } else {
    l->f = a->floats[i];
  }
  return true;
}

/* Element types a LabelEncoder table may have. */
static bool label_dtype(mx_dtype d) {
  return d == MX_STRING || d == MX_FLOAT32 || d == MX_FLOAT64 || mx_dtype_is_integer(d);
}

/* The one table attribute of a kind ("keys" / "values"): its attribute, dtype and length. */
static mx_status label_table(const mx_parse_ctx *pc, const char *kind, const mx_attr **out, mx_dtype *dt,
                             size_t *n) {
  static const char *const suffix[] = {"strings", "int64s", "floats", "tensor"};
  static const mx_dtype dts[] = {MX_STRING, MX_INT64, MX_FLOAT32, MX_DTYPE_UNDEFINED};
  *out = NULL;
  for (int k = 0; k < 4; k++) {
    char name[32];
    snprintf(name, sizeof name, "%s_%s", kind, suffix[k]);
    const mx_attr *a = mx__parse_attr(pc, name);
    if (!a) continue;
    if (*out) return mx__parse_fail(pc, "more than one %s_* attribute", kind);
    *out = a;
    if (a->type == MX_ATTR_TENSOR) {
      int64_t numel = 0;
      if (!a->tensor || !label_dtype(a->tensor->dtype) || !mx_tensor_numel(a->tensor, &numel))
        return mx__parse_fail(pc, "%s is not a valid tensor", name);
      *dt = a->tensor->dtype;
      *n = (size_t)numel;
    } else {
      *dt = dts[k];
      *n = a->count;
    }
  }
  if (!*out)
    return mx__parse_fail(pc, "no %s_strings, %s_int64s, %s_floats or %s_tensor attribute", kind, kind, kind,
                          kind);
  return MX_OK;
}

static mx_status label_parse(const mx_parse_ctx *pc, void *params) {
  mx_label_encoder_params *p = params;
  memset(p, 0, sizeof *p);
  const mx_attr *ka, *va;
  mx_dtype kd, vd;
  size_t nk, nv;
  mx_status st = label_table(pc, "keys", &ka, &kd, &nk);
  if (st == MX_OK) st = label_table(pc, "values", &va, &vd, &nv);
  if (st != MX_OK) return st;
  if (nk != nv) return mx__parse_fail(pc, "%zu keys but %zu values", nk, nv);
  if (nk > MX_LABEL_MAX) return mx__parse_fail(pc, "%zu keys; mixrt takes up to %d", nk, MX_LABEL_MAX);
  p->key_dtype = kd;
  p->value_dtype = vd;
  p->n = (int32_t)nk;
  for (size_t i = 0; i < nk; i++)
    if (!label_set(&p->keys[i], kd, ka, i) || !label_set(&p->values[i], vd, va, i))
      return mx__parse_fail(pc, "key or value %zu is longer than %d bytes", i, MX_LABEL_STR - 1);
  const mx_attr *dt = mx__parse_attr(pc, "default_tensor");
  if (dt) {
    int64_t one = 0;
    if (!dt->tensor || dt->tensor->dtype != vd || !mx_tensor_numel(dt->tensor, &one) || one != 1)
      return mx__parse_fail(pc, "default_tensor must hold one value of the values' dtype");
    if (!label_set(&p->def, vd, dt, 0)) return mx__parse_fail(pc, "default_tensor is too long");
  } else if (vd == MX_STRING) {
    if (mx__parse_string(pc, "default_string", p->def.s, sizeof p->def.s) != MX_OK)
      return mx__parse_fail(pc, "default_string is longer than %d bytes", MX_LABEL_STR - 1);
  } else if (mx_dtype_is_float(vd)) {
    p->def.f = mx__parse_float(pc, "default_float");
  } else {
    p->def.i = mx__parse_int(pc, "default_int64");
  }
  return MX_OK;
}

static mx_status label_infer(mx_infer_ctx *ctx) {
  const mx_label_encoder_params *p = ctx->params;
  if (ctx->in[0].dtype != (mx_dtype)p->key_dtype)
    return mx__infer_fail(ctx, MX_ERR_DTYPE, "input 0 has dtype %s, but the keys are %s",
                          mx_dtype_name(ctx->in[0].dtype), mx_dtype_name((mx_dtype)p->key_dtype));
  ctx->out[0].dtype = (mx_dtype)p->value_dtype;
  ctx->out[0].shape = ctx->in[0].shape;
  return MX_OK;
}

static const mx_op_def op_label_encoder = {
    .name = "LabelEncoder",
    .domain = "ai.onnx.ml",
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = label_attrs,
    .params_size = sizeof(mx_label_encoder_params),
    .parse = label_parse,
    .infer = label_infer,
};

/* --- TfIdfVectorizer -------------------------------------------------------------------------- */

static const mx_attr_spec tfidf_attrs[] = {
    {.name = "max_gram_length", .type = MX_ATTR_INT, .required = true},
    {.name = "max_skip_count", .type = MX_ATTR_INT, .required = true},
    {.name = "min_gram_length", .type = MX_ATTR_INT, .required = true},
    {.name = "mode", .type = MX_ATTR_STRING, .required = true},
    {.name = "ngram_counts", .type = MX_ATTR_INTS, .required = true},
    {.name = "ngram_indexes", .type = MX_ATTR_INTS, .required = true},
    {.name = "pool_int64s", .type = MX_ATTR_INTS},
    {.name = "pool_strings", .type = MX_ATTR_STRINGS},
    {.name = "weights", .type = MX_ATTR_FLOATS},
    {0},
};

static mx_status tfidf_parse(const mx_parse_ctx *pc, void *params) {
  mx_tfidf_params *p = params;
  memset(p, 0, sizeof *p);
  int64_t mn = mx__parse_int(pc, "min_gram_length"), mx = mx__parse_int(pc, "max_gram_length");
  int64_t skip = mx__parse_int(pc, "max_skip_count");
  if (mn < 1 || mx < mn || mx > MX_TFIDF_GRAMS_MAX)
    return mx__parse_fail(pc, "gram lengths %lld..%lld must satisfy 1 <= min <= max <= %d", (long long)mn,
                          (long long)mx, MX_TFIDF_GRAMS_MAX);
  if (skip < 0 || skip > 1000000)
    return mx__parse_fail(pc, "max_skip_count %lld is out of range", (long long)skip);
  p->min_gram = (int32_t)mn;
  p->max_gram = (int32_t)mx;
  p->max_skip = (int32_t)skip;
  char mode[16];
  if (mx__parse_string(pc, "mode", mode, sizeof mode) != MX_OK) return mx__parse_fail(pc, "mode is too long");
  if (strcmp(mode, "TF") == 0)
    p->mode = MX_TFIDF_TF;
  else if (strcmp(mode, "IDF") == 0)
    p->mode = MX_TFIDF_IDF;
  else if (strcmp(mode, "TFIDF") == 0)
    p->mode = MX_TFIDF_TFIDF;
  else
    return mx__parse_fail(pc, "mode '%s' is not 'TF', 'IDF' or 'TFIDF'", mode);
  size_t n;
  const mx_attr *ps = mx__parse_attr(pc, "pool_strings");
  if (ps && mx__parse_attr(pc, "pool_int64s"))
    return mx__parse_fail(pc, "both pool_int64s and pool_strings are set");
  if (mx__parse_ints(pc, "ngram_counts", p->counts, MX_TFIDF_GRAMS_MAX, &n) != MX_OK)
    return mx__parse_fail(pc, "ngram_counts has more than %d entries", MX_TFIDF_GRAMS_MAX);
  p->n_counts = (int32_t)n;
  if (ps) {
    if (ps->count > MX_TFIDF_POOL_MAX)
      return mx__parse_fail(pc, "pool_strings has more than %d entries", MX_TFIDF_POOL_MAX);
    size_t used = 0;
    for (size_t i = 0; i < ps->count; i++) {
      size_t len = strlen(ps->strings[i]) + 1;
      if (len > sizeof p->pool_text - used)
        return mx__parse_fail(pc, "pool_strings take more than %d bytes", MX_TFIDF_POOL_TEXT);
      memcpy(p->pool_text + used, ps->strings[i], len);
      p->pool_at[i] = (int32_t)used;
      used += len;
    }
    p->strings = 1;
    p->n_pool = (int32_t)ps->count;
  } else {
    if (mx__parse_ints(pc, "pool_int64s", p->pool, MX_TFIDF_POOL_MAX, &n) != MX_OK)
      return mx__parse_fail(pc, "pool_int64s has more than %d entries", MX_TFIDF_POOL_MAX);
    p->n_pool = (int32_t)n;
  }
  if (mx__parse_ints(pc, "ngram_indexes", p->indexes, MX_TFIDF_POOL_MAX, &n) != MX_OK)
    return mx__parse_fail(pc, "ngram_indexes has more than %d entries", MX_TFIDF_POOL_MAX);
  p->n_indexes = (int32_t)n;
  if (mx__parse_floats(pc, "weights", p->weights, MX_TFIDF_POOL_MAX, &n) != MX_OK)
    return mx__parse_fail(pc, "weights has more than %d entries", MX_TFIDF_POOL_MAX);
  p->n_weights = (int32_t)n;
  /* ngram_counts[k] is where the (k+1)-grams start: non-decreasing, within the pool, and the
   * pool splits into whole n-grams; one output index per n-gram. */
  int64_t grams = 0;
  for (int32_t k = 0; k < p->n_counts; k++) {
    int64_t start = p->counts[k], end = k + 1 < p->n_counts ? p->counts[k + 1] : p->n_pool;
    if (start < 0 || end < start || end > p->n_pool || (end - start) % (k + 1) != 0)
      return mx__parse_fail(pc, "ngram_counts[%d] = %lld does not split the pool into %d-grams", (int)k,
                            (long long)start, (int)k + 1);
    grams += (end - start) / (k + 1);
  }
  if (grams != p->n_indexes)
    return mx__parse_fail(pc, "ngram_indexes has %d entries; the pool holds %lld n-grams", p->n_indexes,
                          (long long)grams);
  if (p->n_weights && p->n_weights != p->n_indexes)
    return mx__parse_fail(pc, "weights has %d entries; ngram_indexes has %d", p->n_weights, p->n_indexes);
  int64_t top = -1;
  for (int32_t i = 0; i < p->n_indexes; i++) {
    if (p->indexes[i] < 0 || p->indexes[i] >= MX_TFIDF_POOL_MAX * 16)
      return mx__parse_fail(pc, "ngram_indexes[%d] = %lld is out of range", (int)i, (long long)p->indexes[i]);
    if (p->indexes[i] > top) top = p->indexes[i];
  }
  p->n_out = (int32_t)(top + 1);
  return MX_OK;
}

static mx_status tfidf_infer(mx_infer_ctx *ctx) {
  const mx_tfidf_params *p = ctx->params;
  const mx_value_info *x = &ctx->in[0];
  if (p->strings ? x->dtype != MX_STRING : x->dtype != MX_INT32 && x->dtype != MX_INT64)
    return mx__infer_fail(ctx, MX_ERR_DTYPE, "input 0 has dtype %s; with %s TfIdfVectorizer takes %s",
                          mx_dtype_name(x->dtype), p->strings ? "pool_strings" : "pool_int64s",
                          p->strings ? "strings" : "int32 or int64");
  if (x->shape.rank != MX_RANK_UNKNOWN && x->shape.rank != 1 && x->shape.rank != 2)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "input 0 has rank %d; TfIdfVectorizer takes [C] or [N, C]",
                          (int)x->shape.rank);
  ctx->out[0].dtype = MX_FLOAT32;
  mx_shape *o = &ctx->out[0].shape;
  o->rank = x->shape.rank;
  if (o->rank == 1) o->dims[0] = p->n_out;
  if (o->rank == 2) o->dims[0] = x->shape.dims[0], o->dims[1] = p->n_out;
  return MX_OK;
}

static const mx_op_def op_tfidf = {
    .name = "TfIdfVectorizer",
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = tfidf_attrs,
    .params_size = sizeof(mx_tfidf_params),
    .parse = tfidf_parse,
    .infer = tfidf_infer,
};

/* --- TreeEnsemble ---------------------------------------------------------------------------- */

static const mx_attr_spec tree_attrs[] = {
    {.name = "aggregate_function", .type = MX_ATTR_INT, .def_i = MX_TREE_SUM},
    {.name = "leaf_targetids", .type = MX_ATTR_INTS, .required = true},
    {.name = "leaf_weights", .type = MX_ATTR_TENSOR, .required = true},
    {.name = "membership_values", .type = MX_ATTR_TENSOR},
    {.name = "n_targets", .type = MX_ATTR_INT, .required = true},
    {.name = "nodes_falseleafs", .type = MX_ATTR_INTS, .required = true},
    {.name = "nodes_falsenodeids", .type = MX_ATTR_INTS, .required = true},
    {.name = "nodes_featureids", .type = MX_ATTR_INTS, .required = true},
    {.name = "nodes_hitrates", .type = MX_ATTR_TENSOR},
    {.name = "nodes_missing_value_tracks_true", .type = MX_ATTR_INTS},
    {.name = "nodes_modes", .type = MX_ATTR_TENSOR, .required = true},
    {.name = "nodes_splits", .type = MX_ATTR_TENSOR, .required = true},
    {.name = "nodes_trueleafs", .type = MX_ATTR_INTS, .required = true},
    {.name = "nodes_truenodeids", .type = MX_ATTR_INTS, .required = true},
    {.name = "post_transform", .type = MX_ATTR_INT},
    {.name = "tree_roots", .type = MX_ATTR_INTS, .required = true},
    {0},
};

/* An INTS attribute of exactly n entries (n < 0: any count up to MX_TREE_MAX) into out. */
static mx_status tree_ints(const mx_parse_ctx *pc, const char *name, int64_t n, int32_t *out,
                           int32_t *count) {
  const mx_attr *a = mx__parse_attr(pc, name);
  size_t got = a ? a->count : 0;
  if (n >= 0 && (int64_t)got != n && !(got == 0 && strcmp(name, "nodes_missing_value_tracks_true") == 0))
    return mx__parse_fail(pc, "%s has %zu entries; %lld expected", name, got, (long long)n);
  if (got > MX_TREE_MAX)
    return mx__parse_fail(pc, "%s has %zu entries; mixrt takes up to %d", name, got, MX_TREE_MAX);
  for (size_t i = 0; i < got; i++) {
    if (a->ints[i] < INT32_MIN || a->ints[i] > INT32_MAX)
      return mx__parse_fail(pc, "%s[%zu] is out of range", name, i);
    out[i] = (int32_t)a->ints[i];
  }
  if (count) *count = (int32_t)got;
  return MX_OK;
}

/* A numeric TENSOR attribute as doubles (n < 0: any count up to MX_TREE_MAX). */
static mx_status tree_values(const mx_parse_ctx *pc, const char *name, int64_t n, double *out,
                             int32_t *count) {
  const mx_attr *a = mx__parse_attr(pc, name);
  int64_t got = 0;
  if (a && (!a->tensor || !mx_tensor_numel(a->tensor, &got)))
    return mx__parse_fail(pc, "%s is not a valid tensor", name);
  if ((n >= 0 && got != n) || got > MX_TREE_MAX)
    return mx__parse_fail(pc, "%s has %lld values; %s", name, (long long)got,
                          n >= 0 ? "one per node or leaf expected" : "mixrt takes up to 256");
  for (int64_t i = 0; i < got; i++) {
    const mx_tensor *t = a->tensor;
    int64_t iv;
    if (t->dtype == MX_FLOAT16 || t->dtype == MX_BFLOAT16 || !tensor_num(t, (size_t)i, &out[i], &iv))
      return mx__parse_fail(pc, "%s has dtype %s; float, double or integers expected", name,
                            mx_dtype_name(t->dtype));
  }
  if (count) *count = (int32_t)got;
  return MX_OK;
}

static mx_status tree_parse(const mx_parse_ctx *pc, void *params) {
  mx_tree_params *p = params;
  memset(p, 0, sizeof *p);
  int64_t agg = mx__parse_int(pc, "aggregate_function"), post = mx__parse_int(pc, "post_transform");
  int64_t nt = mx__parse_int(pc, "n_targets");
  if (agg < 0 || agg > 3) return mx__parse_fail(pc, "aggregate_function %lld is not 0..3", (long long)agg);
  if (post < 0 || post > 3)
    return mx__parse_fail(pc, "post_transform %lld is not NONE, SOFTMAX, LOGISTIC or SOFTMAX_ZERO",
                          (long long)post);
  if (nt < 1 || nt > MX_TREE_MAX) return mx__parse_fail(pc, "n_targets %lld is out of range", (long long)nt);
  p->aggregate = (int32_t)agg;
  p->post_transform = (int32_t)post;
  p->n_targets = (int32_t)nt;
  mx_status st = tree_ints(pc, "nodes_featureids", -1, p->feature, &p->n_nodes);
  int32_t tmp[MX_TREE_MAX];
  if (st == MX_OK) st = tree_ints(pc, "nodes_truenodeids", p->n_nodes, p->true_id, NULL);
  if (st == MX_OK) st = tree_ints(pc, "nodes_falsenodeids", p->n_nodes, p->false_id, NULL);
  if (st == MX_OK) st = tree_ints(pc, "tree_roots", -1, p->roots, &p->n_roots);
  if (st == MX_OK) st = tree_ints(pc, "leaf_targetids", -1, p->leaf_target, &p->n_leaves);
  if (st == MX_OK) st = tree_values(pc, "leaf_weights", p->n_leaves, p->leaf_weight, NULL);
  if (st == MX_OK) st = tree_values(pc, "nodes_splits", p->n_nodes, p->split, NULL);
  if (st == MX_OK) st = tree_values(pc, "membership_values", -1, p->members, &p->n_members);
  static const char *const flags[] = {"nodes_trueleafs", "nodes_falseleafs",
                                      "nodes_missing_value_tracks_true"};
  uint8_t *dst[] = {p->true_leaf, p->false_leaf, p->missing_true};
  for (int f = 0; f < 3 && st == MX_OK; f++) {
    int32_t got = 0;
    st = tree_ints(pc, flags[f], p->n_nodes, tmp, &got);
    for (int32_t i = 0; i < got; i++) dst[f][i] = tmp[i] != 0;
  }
  double modes[MX_TREE_MAX];
  if (st == MX_OK) st = tree_values(pc, "nodes_modes", p->n_nodes, modes, NULL);
  if (st != MX_OK) return st;
  int32_t member = 0;
  for (int32_t i = 0; i < p->n_nodes; i++) {
    if (modes[i] < 0 || modes[i] > MX_TREE_MEMBER)
      return mx__parse_fail(pc, "nodes_modes[%d] is not 0..6", (int)i);
    p->mode[i] = (uint8_t)modes[i];
    int32_t lim_t = p->true_leaf[i] ? p->n_leaves : p->n_nodes,
            lim_f = p->false_leaf[i] ? p->n_leaves : p->n_nodes;
    if (p->true_id[i] < 0 || p->true_id[i] >= lim_t || p->false_id[i] < 0 || p->false_id[i] >= lim_f)
      return mx__parse_fail(pc, "node %d: a true or false id is outside the nodes or leaves", (int)i);
    if (p->feature[i] < 0) return mx__parse_fail(pc, "nodes_featureids[%d] is negative", (int)i);
    if (p->mode[i] == MX_TREE_MEMBER) { /* the next NaN-delimited run of membership_values */
      p->member_start[i] = member;
      while (member < p->n_members && p->members[member] == p->members[member]) member++;
      p->member_count[i] = member - p->member_start[i];
      member++;
    }
  }
  for (int32_t r = 0; r < p->n_roots; r++)
    if (p->roots[r] < 0 || p->roots[r] >= p->n_nodes)
      return mx__parse_fail(pc, "tree_roots[%d] is not a node", (int)r);
  for (int32_t l = 0; l < p->n_leaves; l++)
    if (p->leaf_target[l] < 0 || p->leaf_target[l] >= p->n_targets)
      return mx__parse_fail(pc, "leaf_targetids[%d] is outside 0..n_targets-1", (int)l);
  return MX_OK;
}

static mx_status tree_infer(mx_infer_ctx *ctx) {
  const mx_tree_params *p = ctx->params;
  const mx_value_info *x = &ctx->in[0];
  if (!mx_dtype_is_float(x->dtype) || x->dtype == MX_BFLOAT16)
    return mx__infer_fail(ctx, MX_ERR_DTYPE,
                          "input 0 has dtype %s; TreeEnsemble takes float16, float or double",
                          mx_dtype_name(x->dtype));
  if (x->shape.rank != MX_RANK_UNKNOWN && x->shape.rank != 2)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "input 0 has rank %d; TreeEnsemble takes [N, F]",
                          (int)x->shape.rank);
  ctx->out[0].dtype = x->dtype;
  ctx->out[0].shape.rank = 2;
  ctx->out[0].shape.dims[0] = x->shape.rank == 2 ? x->shape.dims[0] : MX_DIM_UNKNOWN;
  ctx->out[0].shape.dims[1] = p->n_targets;
  return MX_OK;
}

static const mx_op_def op_tree = {
    .name = "TreeEnsemble",
    .domain = "ai.onnx.ml",
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .attrs = tree_attrs,
    .params_size = sizeof(mx_tree_params),
    .parse = tree_parse,
    .infer = tree_infer,
};

const mx_op_def *const mx__ops_ml[] = {
    &op_binarizer, &op_afe, &op_label_encoder, &op_tfidf, &op_tree, NULL,
};
