/* Params structs of the string ops (graph/ops/string.c, kernels/string.c): plain old data, the
 * string attributes held in fixed buffers (a node whose strings do not fit is refused). */
#ifndef MIXRT_GRAPH_OPS_STRING_PARAMS_H
#define MIXRT_GRAPH_OPS_STRING_PARAMS_H

#include <stdint.h>

#define MX_STRING_ATTR_MAX 256  /* bytes of a delimiter or pattern, NUL included */
#define MX_STOPWORDS_BYTES 4096 /* every stopword, each NUL-terminated, one after the other */

typedef struct mx_string_split_params {
  char delimiter[MX_STRING_ATTR_MAX]; /* "" splits at runs of whitespace */
  int64_t maxsplit;                   /* -1: no limit */
} mx_string_split_params;

enum { MX_CASE_NONE = 0, MX_CASE_LOWER = 1, MX_CASE_UPPER = 2 };

typedef struct mx_string_normalizer_params {
  int32_t case_change;    /* MX_CASE_* */
  int32_t case_sensitive; /* stopwords compare exactly (1) or ignoring ASCII case (0) */
  int32_t n_stopwords;
  int32_t reserved;                   /* always 0 */
  char stopwords[MX_STOPWORDS_BYTES]; /* n_stopwords NUL-terminated words */
} mx_string_normalizer_params;

typedef struct mx_regex_params {
  char pattern[MX_STRING_ATTR_MAX * 4]; /* the RE2 pattern as given */
} mx_regex_params;

#endif /* MIXRT_GRAPH_OPS_STRING_PARAMS_H */
