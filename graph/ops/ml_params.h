/* Params of the ai.onnx.ml ops and TfIdfVectorizer (graph/ops/ml.c, kernels/ml.c): plain old
 * data with fixed capacities (a node whose tables do not fit is refused when it is parsed). */
#ifndef MIXRT_GRAPH_OPS_ML_PARAMS_H
#define MIXRT_GRAPH_OPS_ML_PARAMS_H

#include <stdint.h>

typedef struct mx_binarizer_params {
  float threshold;
} mx_binarizer_params;

#define MX_LABEL_MAX 128 /* LabelEncoder entries */
#define MX_LABEL_STR 48  /* bytes of one string key or value, NUL included */

/* One key, value or default of LabelEncoder: by the table's dtype, s (MX_STRING), i (integers)
 * or f (floats). */
typedef struct mx_label {
  int64_t i;
  double f;
  char s[MX_LABEL_STR];
} mx_label;

typedef struct mx_label_encoder_params {
  int32_t key_dtype;   /* mx_dtype of the keys (and the input) */
  int32_t value_dtype; /* mx_dtype of the values (and the output) */
  int32_t n;
  int32_t reserved; /* always 0 */
  mx_label def;     /* the value of a missing key */
  mx_label keys[MX_LABEL_MAX];
  mx_label values[MX_LABEL_MAX];
} mx_label_encoder_params;

#define MX_TFIDF_POOL_MAX  512  /* pool entries */
#define MX_TFIDF_GRAMS_MAX 16   /* n-gram lengths */
#define MX_TFIDF_POOL_TEXT 8192 /* bytes of pool_strings, NULs included */

enum { MX_TFIDF_TF = 0, MX_TFIDF_IDF = 1, MX_TFIDF_TFIDF = 2 };

typedef struct mx_tfidf_params {
  int32_t mode; /* MX_TFIDF_* */
  int32_t min_gram, max_gram, max_skip;
  int32_t n_counts, n_pool, n_indexes, n_weights;
  int32_t n_out;                      /* output width: the largest ngram index + 1 */
  int32_t strings;                    /* the pool is pool_strings (string input), not pool */
  int64_t counts[MX_TFIDF_GRAMS_MAX]; /* start in pool of the (k+1)-grams */
  int64_t indexes[MX_TFIDF_POOL_MAX]; /* output column of each n-gram, in pool order */
  int64_t pool[MX_TFIDF_POOL_MAX];
  float weights[MX_TFIDF_POOL_MAX];
  int32_t pool_at[MX_TFIDF_POOL_MAX]; /* strings: offset of entry i in pool_text */
  char pool_text[MX_TFIDF_POOL_TEXT]; /* strings: the entries, each NUL-terminated */
} mx_tfidf_params;

#define MX_TREE_MAX 256 /* nodes, leaves, roots and set members of a TreeEnsemble */

enum { MX_TREE_AVERAGE = 0, MX_TREE_SUM = 1, MX_TREE_MIN = 2, MX_TREE_MAX_AGG = 3 };
enum {
  MX_TREE_LEQ = 0,
  MX_TREE_LT = 1,
  MX_TREE_GTE = 2,
  MX_TREE_GT = 3,
  MX_TREE_EQ = 4,
  MX_TREE_NEQ = 5,
  MX_TREE_MEMBER = 6
};
enum { MX_POST_NONE = 0, MX_POST_SOFTMAX = 1, MX_POST_LOGISTIC = 2, MX_POST_SOFTMAX_ZERO = 3 };

/* TreeEnsemble (ai.onnx.ml 5): node i tests X[feature[i]] against split[i] (or, for MEMBER, the
 * set members[member_start[i] .. + member_count[i])), then goes to true_id / false_id, a node
 * index or, when the *_leaf flag is set, a leaf index. */
typedef struct mx_tree_params {
  int32_t aggregate, post_transform, n_targets, n_roots, n_nodes, n_leaves, n_members, reserved;
  int32_t roots[MX_TREE_MAX];
  int32_t feature[MX_TREE_MAX], true_id[MX_TREE_MAX], false_id[MX_TREE_MAX];
  int32_t member_start[MX_TREE_MAX], member_count[MX_TREE_MAX];
  uint8_t mode[MX_TREE_MAX], true_leaf[MX_TREE_MAX], false_leaf[MX_TREE_MAX], missing_true[MX_TREE_MAX];
  double split[MX_TREE_MAX];
  int32_t leaf_target[MX_TREE_MAX];
  double leaf_weight[MX_TREE_MAX];
  double members[MX_TREE_MAX];
} mx_tree_params;

#endif /* MIXRT_GRAPH_OPS_ML_PARAMS_H */
