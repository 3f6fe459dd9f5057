/* Helpers the string ops share with their kernels (graph/ops/string_util.c): StringNormalizer's
 * stopword filter and case change, and RegexFullMatch's pattern translation. */
#ifndef MIXRT_GRAPH_OPS_STRING_IMPL_H
#define MIXRT_GRAPH_OPS_STRING_IMPL_H

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "graph/ops/string_params.h"

/* Whether s is one of p's stopwords (ASCII case folded unless p->case_sensitive). */
bool mx__string_is_stopword(const mx_string_normalizer_params *p, const char *s);
/* How many of the n strings of data (char *) are not stopwords. */
int64_t mx__string_normalizer_kept(const mx_string_normalizer_params *p, const void *data, int64_t n);

/* RegexFullMatch takes RE2 patterns and runs them with POSIX extended regexes (glibc's regcomp):
 * the translation anchors the pattern at both ends, turns (?: into (, and turns the classes \d
 * \s \w (\D \S \W outside brackets) and escaped punctuation inside brackets into their POSIX
 * forms; \b \B \w \W \< \> keep glibc's meaning outside brackets. Lookarounds, lazy quantifiers
 * and inline flags are refused. Compiles into re (regfree it) or returns false with a reason. */
bool mx__regex_compile(const char *pattern, regex_t *re, char *why, size_t why_size);
/* Compiles and frees: whether the pattern is one mx__regex_compile takes. */
bool mx__regex_check(const char *pattern, char *why, size_t why_size);

#endif /* MIXRT_GRAPH_OPS_STRING_IMPL_H */
