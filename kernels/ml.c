/* CPU kernels of the ml group: Binarizer, ArrayFeatureExtractor, LabelEncoder, TfIdfVectorizer
 * and TreeEnsemble (trees walked per row, targets accumulated in double). LabelEncoder with string values, like every kernel writing strings, mallocs
 * each output string (string tensors are host only, see kernels/string.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/string_tensor.h"
#include "graph/ops/ml_params.h"
#include "kernels/groups.h"
#include "kernels/kutil.h"

/* --- Binarizer -------------------------------------------------------------------------------- */

static mx_status binarizer_run(mx_kernel_call *call) {
  const mx_binarizer_params *p = call->params;
  const mx_ktensor *x = mx__kin(call, 0);
  mx_ktensor *y = mx__kout(call, 0);
  int64_t n = mx__ktensor_numel(x);
  for (int64_t i = 0; i < n; i++) {
    double v = mx__kget_f64(x->data, x->dtype, i);
    mx__kset_f64(y->data, y->dtype, i, v > (double)p->threshold ? 1.0 : 0.0);
  }
  return MX_OK;
}

/* --- ArrayFeatureExtractor -------------------------------------------------------------------- */

static mx_status afe_run(mx_kernel_call *call) {
  const mx_ktensor *x = mx__kin(call, 0), *ix = mx__kin(call, 1);
  mx_ktensor *y = mx__kout(call, 0);
  int64_t last = x->dims[x->rank - 1], rows = last ? mx__ktensor_numel(x) / last : 0;
  int64_t k = mx__ktensor_numel(ix);
  const int64_t *idx = ix->data;
  size_t es = mx_dtype_size(x->dtype);
  for (int64_t j = 0; j < k; j++)
    if (idx[j] < 0 || idx[j] >= last) {
      call->why = "ArrayFeatureExtractor: an index is outside the last axis";
      return MX_ERR_KERNEL;
    }
  for (int64_t r = 0; r < rows; r++)
    for (int64_t j = 0; j < k; j++) {
      int64_t from = r * last + idx[j], to = r * k + j;
      if (x->dtype == MX_STRING) {
        const char *s = mx__string_at(x->data, (size_t)from);
        if (mx__string_set(y->data, (size_t)to, s, strlen(s)) != MX_OK) {
          call->why = "out of host memory for output strings";
          return MX_ERR_KERNEL;
        }
      } else {
        memcpy((char *)y->data + (size_t)to * es, (const char *)x->data + (size_t)from * es, es);
      }
    }
  return MX_OK;
}

/* --- LabelEncoder ----------------------------------------------------------------------------- */

static bool label_match(const mx_label *key, mx_dtype dt, const void *data, int64_t i) {
  if (dt == MX_STRING) return strcmp(key->s, mx__string_at(data, (size_t)i)) == 0;
  if (mx_dtype_is_float(dt)) {
    double v = mx__kget_f64(data, dt, i);
    return v == key->f || (isnan(v) && isnan(key->f)); /* NaN keys match NaN (opset 4) */
  }
  return mx__kget_i64(data, dt, i) == key->i;
}

static mx_status label_run(mx_kernel_call *call) {
  const mx_label_encoder_params *p = call->params;
  const mx_ktensor *x = mx__kin(call, 0);
  mx_ktensor *y = mx__kout(call, 0);
  mx_dtype kd = (mx_dtype)p->key_dtype, vd = (mx_dtype)p->value_dtype;
  int64_t n = mx__ktensor_numel(x);
  for (int64_t i = 0; i < n; i++) {
    const mx_label *v = &p->def;
    for (int32_t k = 0; k < p->n; k++)
      if (label_match(&p->keys[k], kd, x->data, i)) {
        v = &p->values[k];
        break;
      }
    if (vd == MX_STRING) {
      if (mx__string_set(y->data, (size_t)i, v->s, strlen(v->s)) != MX_OK) {
        call->why = "out of host memory for output strings";
        return MX_ERR_KERNEL;
      }
    } else if (mx_dtype_is_float(vd)) {
      mx__kset_f64(y->data, vd, i, v->f);
    } else {
      mx__kset_i64(y->data, vd, i, v->i);
    }
  }
  return MX_OK;
}

/* --- TfIdfVectorizer -------------------------------------------------------------------------- */

/* Index in ngram_indexes of the n-gram of x read at (start, start + step, ...), or -1. */
static int64_t tfidf_find(const mx_tfidf_params *p, const mx_ktensor *x, int64_t base, int64_t start,
                          int64_t step, int32_t n) {
  if (n > p->n_counts) return -1;
  int64_t from = p->counts[n - 1], to = n < p->n_counts ? p->counts[n] : p->n_pool;
  int64_t first = 0; /* n-grams before this length */
  for (int32_t k = 0; k + 1 < n; k++) {
    int64_t e = k + 1 < p->n_counts ? p->counts[k + 1] : p->n_pool;
    first += (e - p->counts[k]) / (k + 1);
  }
  for (int64_t g = from, gi = first; g + n <= to; g += n, gi++) {
    int32_t j = 0;
    if (p->strings)
      while (j < n && strcmp(p->pool_text + p->pool_at[g + j],
                             mx__string_at(x->data, (size_t)(base + start + j * step))) == 0)
        j++;
    else
      while (j < n && p->pool[g + j] == mx__kget_i64(x->data, x->dtype, base + start + j * step)) j++;
    if (j == n) return gi;
  }
  return -1;
}

static mx_status tfidf_run(mx_kernel_call *call) {
  const mx_tfidf_params *p = call->params;
  const mx_ktensor *x = mx__kin(call, 0);
  mx_ktensor *y = mx__kout(call, 0);
  int64_t rows = x->rank == 2 ? x->dims[0] : 1, c = x->rank == 2 ? x->dims[1] : x->dims[0];
  float *out = y->data;
  memset(out, 0, (size_t)mx__ktensor_numel(y) * sizeof(float));
  for (int64_t r = 0; r < rows; r++) {
    float *row = out + r * p->n_out;
    int32_t min_gram = p->min_gram;
    /* Every skip distance gathers the n-grams starting at each position; unigrams (unaffected
     * by the skip) are counted with the first distance only. */
    for (int64_t step = 1; step <= (int64_t)p->max_skip + 1; step++) {
      for (int64_t s = 0; s < c; s++) {
        if (s + step * (min_gram - 1) >= c) break;
        for (int32_t n = 1; n <= p->max_gram && s + step * (n - 1) < c; n++) {
          if (n < min_gram) continue;
          int64_t gi = tfidf_find(p, x, r * c, s, step, n);
          if (gi >= 0) row[p->indexes[gi]] += 1.0f;
        }
      }
      if (min_gram == 1) min_gram = 2;
      if (min_gram > p->max_gram) break;
    }
    for (int32_t i = 0; i < p->n_indexes; i++) {
      float *v = &row[p->indexes[i]];
      float w = p->n_weights ? p->weights[i] : 1.0f;
      if (p->mode == MX_TFIDF_IDF)
        *v = *v > 0 ? w : 0;
      else if (p->mode == MX_TFIDF_TFIDF)
        *v *= w;
    }
  }
  return MX_OK;
}

/* --- TreeEnsemble ---------------------------------------------------------------------------- */

static bool tree_goes_true(const mx_tree_params *p, int32_t i, double v) {
  if (isnan(v) && p->missing_true[i]) return true;
  switch (p->mode[i]) {
    case MX_TREE_LEQ: return v <= p->split[i];
    case MX_TREE_LT: return v < p->split[i];
    case MX_TREE_GTE: return v >= p->split[i];
    case MX_TREE_GT: return v > p->split[i];
    case MX_TREE_EQ: return v == p->split[i];
    case MX_TREE_NEQ: return v != p->split[i];
    default:
      for (int32_t k = 0; k < p->member_count[i]; k++)
        if (p->members[p->member_start[i] + k] == v) return true;
      return false;
  }
}

/* The leaf tree r reaches for row x, or -1 when the walk loops or reads past the row. */
static int32_t tree_leaf(const mx_tree_params *p, int32_t r, const mx_ktensor *x, int64_t row, int64_t f) {
  int32_t node = p->roots[r];
  for (int32_t steps = 0; steps <= p->n_nodes; steps++) {
    if (p->feature[node] >= f) return -1;
    double v = mx__kget_f64(x->data, x->dtype, row * f + p->feature[node]);
    bool t = tree_goes_true(p, node, v);
    int32_t next = t ? p->true_id[node] : p->false_id[node];
    if (t ? p->true_leaf[node] : p->false_leaf[node]) return next;
    node = next;
  }
  return -1;
}

static mx_status tree_run(mx_kernel_call *call) {
  const mx_tree_params *p = call->params;
  const mx_ktensor *x = mx__kin(call, 0);
  mx_ktensor *y = mx__kout(call, 0);
  int64_t n = x->dims[0], f = x->dims[1], nt = p->n_targets;
  double *acc = call->workspace;
  for (int64_t row = 0; row < n; row++) {
    double init = p->aggregate == MX_TREE_MIN ? INFINITY : p->aggregate == MX_TREE_MAX_AGG ? -INFINITY : 0.0;
    for (int64_t t = 0; t < nt; t++) acc[t] = init;
    for (int32_t r = 0; r < p->n_roots; r++) {
      int32_t leaf = tree_leaf(p, r, x, row, f);
      if (leaf < 0) {
        call->why = "TreeEnsemble: a tree loops or reads a feature past the input's columns";
        return MX_ERR_KERNEL;
      }
      double w = p->leaf_weight[leaf], *a = &acc[p->leaf_target[leaf]];
      if (p->aggregate == MX_TREE_MIN)
        *a = w < *a ? w : *a;
      else if (p->aggregate == MX_TREE_MAX_AGG)
        *a = w > *a ? w : *a;
      else
        *a += w;
    }
    if (p->aggregate == MX_TREE_AVERAGE && p->n_roots)
      for (int64_t t = 0; t < nt; t++) acc[t] /= p->n_roots;
    if (p->post_transform == MX_POST_LOGISTIC) {
      for (int64_t t = 0; t < nt; t++) acc[t] = 1.0 / (1.0 + exp(-acc[t]));
    } else if (p->post_transform == MX_POST_SOFTMAX || p->post_transform == MX_POST_SOFTMAX_ZERO) {
      double m = -INFINITY, sum = 0;
      for (int64_t t = 0; t < nt; t++) m = acc[t] > m ? acc[t] : m;
      for (int64_t t = 0; t < nt; t++) {
        bool zero = p->post_transform == MX_POST_SOFTMAX_ZERO && acc[t] == 0.0;
        acc[t] = zero ? 0.0 : exp(acc[t] - m);
        sum += acc[t];
      }
      for (int64_t t = 0; t < nt; t++) acc[t] = sum > 0 ? acc[t] / sum : 0.0;
    }
    for (int64_t t = 0; t < nt; t++) mx__kset_f64(y->data, y->dtype, row * nt + t, acc[t]);
  }
  return MX_OK;
}

static size_t tree_workspace(const mx_kernel_call *call) {
  const mx_tree_params *p = call->params;
  return (size_t)p->n_targets * sizeof(double);
}

static const mx_kernel_def k_binarizer = {
    .op = "Binarizer",
    .domain = "ai.onnx.ml",
    .dtypes = MX_KDT(MX_FLOAT32) | MX_KDT(MX_FLOAT64) | MX_KDT(MX_INT32) | MX_KDT(MX_INT64),
    .key = 0,
    .run = binarizer_run};
static const mx_kernel_def k_afe = {.op = "ArrayFeatureExtractor",
                                    .domain = "ai.onnx.ml",
                                    .dtypes = MX_KDT(MX_FLOAT32) | MX_KDT(MX_FLOAT64) | MX_KDT(MX_INT32) |
                                              MX_KDT(MX_INT64) | MX_KDT(MX_STRING),
                                    .key = 0,
                                    .run = afe_run};
static const mx_kernel_def k_label = {.op = "LabelEncoder",
                                      .domain = "ai.onnx.ml",
                                      .dtypes = MX_KDT_ALL | MX_KDT(MX_STRING),
                                      .key = 0,
                                      .run = label_run};
static const mx_kernel_def k_tfidf = {.op = "TfIdfVectorizer",
                                      .dtypes = MX_KDT(MX_INT32) | MX_KDT(MX_INT64) | MX_KDT(MX_STRING),
                                      .key = 0,
                                      .run = tfidf_run};

static const mx_kernel_def k_tree = {.op = "TreeEnsemble",
                                     .domain = "ai.onnx.ml",
                                     .dtypes = MX_KDT(MX_FLOAT32) | MX_KDT(MX_FLOAT64) | MX_KDT(MX_FLOAT16),
                                     .key = 0,
                                     .run = tree_run,
                                     .workspace = tree_workspace};

const mx_kernel_def *const mx__kernels_ml[] = {
    &k_binarizer, &k_afe, &k_label, &k_tfidf, &k_tree, NULL,
};
