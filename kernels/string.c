/* CPU kernels of the string group: StringConcat, Equal on strings, StringSplit, StringNormalizer,
 * RegexFullMatch.
 *
 * String tensors are host only (mixrt/dtype.h): their kernels run on host data and, unlike every
 * other kernel, malloc the output strings they write (one per element, owned by the output
 * tensor, which starts as NULL pointers). A failed allocation leaves the strings written so far
 * for the caller to free with the tensor. RegexFullMatch compiles its pattern per call
 * (regcomp allocates too). */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "common/string_tensor.h"
#include "graph/ops/groups.h"
#include "graph/ops/string_impl.h"
#include "graph/ops/string_params.h"
#include "graph/ops/string_split.h"
#include "kernels/groups.h"
#include "kernels/kutil.h"

static mx_status oom(mx_kernel_call *call) {
  call->why = "out of host memory for output strings";
  return MX_ERR_KERNEL;
}

/* --- StringConcat ----------------------------------------------------------------------------- */

static mx_status concat_run(mx_kernel_call *call) {
  const mx_ktensor *a = mx__kin(call, 0), *b = mx__kin(call, 1);
  mx_ktensor *y = mx__kout(call, 0);
  int64_t sa[MX_MAX_RANK], sb[MX_MAX_RANK], idx[MX_MAX_RANK] = {0};
  mx__kbroadcast_strides(a, y->rank, sa);
  mx__kbroadcast_strides(b, y->rank, sb);
  int64_t n = mx__ktensor_numel(y);
  char **out = y->data;
  for (int64_t i = 0; i < n; i++) {
    int64_t ia = 0, ib = 0;
    for (int32_t d = 0; d < y->rank; d++) ia += idx[d] * sa[d], ib += idx[d] * sb[d];
    const char *x = mx__string_at(a->data, (size_t)ia), *z = mx__string_at(b->data, (size_t)ib);
    size_t lx = strlen(x), lz = strlen(z);
    char *s = malloc(lx + lz + 1);
    if (!s) return oom(call);
    memcpy(s, x, lx);
    memcpy(s + lx, z, lz + 1);
    out[i] = s;
    for (int32_t d = y->rank - 1; d >= 0; d--) {
      if (++idx[d] < y->dims[d]) break;
      idx[d] = 0;
    }
  }
  return MX_OK;
}

/* --- Equal on strings (the numeric Equal is in kernels/elementwise_binary.c) ------------------- */

static mx_status equal_run(mx_kernel_call *call) {
  const mx_ktensor *a = mx__kin(call, 0), *b = mx__kin(call, 1);
  mx_ktensor *y = mx__kout(call, 0);
  int64_t sa[MX_MAX_RANK], sb[MX_MAX_RANK], idx[MX_MAX_RANK] = {0};
  mx__kbroadcast_strides(a, y->rank, sa);
  mx__kbroadcast_strides(b, y->rank, sb);
  int64_t n = mx__ktensor_numel(y);
  for (int64_t i = 0; i < n; i++) {
    int64_t ia = 0, ib = 0;
    for (int32_t d = 0; d < y->rank; d++) ia += idx[d] * sa[d], ib += idx[d] * sb[d];
    ((uint8_t *)y->data)[i] =
        strcmp(mx__string_at(a->data, (size_t)ia), mx__string_at(b->data, (size_t)ib)) == 0;
    for (int32_t d = y->rank - 1; d >= 0; d--) {
      if (++idx[d] < y->dims[d]) break;
      idx[d] = 0;
    }
  }
  return MX_OK;
}

/* --- StringSplit ------------------------------------------------------------------------------ */

static mx_status split_run(mx_kernel_call *call) {
  const mx_string_split_params *p = call->params;
  const mx_ktensor *x = mx__kin(call, 0);
  mx_ktensor *y = mx__kout(call, 0), *z = mx__kout(call, 1);
  int64_t n = mx__ktensor_numel(x), width = y->rank > 0 ? y->dims[y->rank - 1] : 0;
  char **out = y->data;
  for (int64_t i = 0; i < n; i++) {
    const char *s = mx__string_at(x->data, (size_t)i);
    mx_splitter w = {.s = s, .len = strlen(s)};
    size_t start, len;
    int64_t k = 0;
    while (mx__split_next(&w, p->delimiter, p->maxsplit, &start, &len)) {
      if (k >= width) {
        call->why = "StringSplit: more pieces than the output width";
        return MX_ERR_KERNEL;
      }
      if (mx__string_set(out, (size_t)(i * width + k), s + start, len) != MX_OK) return oom(call);
      k++;
    }
    for (int64_t j = k; j < width; j++) /* padding: empty strings */
      if (mx__string_set(out, (size_t)(i * width + j), "", 0) != MX_OK) return oom(call);
    ((int64_t *)z->data)[i] = k;
  }
  return MX_OK;
}

/* --- StringNormalizer ------------------------------------------------------------------------- */

static mx_status normalizer_run(mx_kernel_call *call) {
  const mx_string_normalizer_params *p = call->params;
  const mx_ktensor *x = mx__kin(call, 0);
  mx_ktensor *y = mx__kout(call, 0);
  int64_t n = mx__ktensor_numel(x), cap = mx__ktensor_numel(y), k = 0;
  char **out = y->data;
  for (int64_t i = 0; i < n; i++) {
    const char *s = mx__string_at(x->data, (size_t)i);
    if (mx__string_is_stopword(p, s)) continue;
    if (k >= cap) {
      call->why = "StringNormalizer: more strings kept than the output holds";
      return MX_ERR_KERNEL;
    }
    if (mx__string_set(out, (size_t)k, s, strlen(s)) != MX_OK) return oom(call);
    for (char *c = out[k]; *c; c++) /* ASCII letters only: other UTF-8 bytes stay */
      if (p->case_change == MX_CASE_LOWER)
        *c = (char)tolower((unsigned char)*c);
      else if (p->case_change == MX_CASE_UPPER)
        *c = (char)toupper((unsigned char)*c);
    k++;
  }
  for (; k < cap; k++) /* everything filtered: one empty string */
    if (mx__string_set(out, (size_t)k, "", 0) != MX_OK) return oom(call);
  return MX_OK;
}

/* --- RegexFullMatch --------------------------------------------------------------------------- */

static mx_status regex_run(mx_kernel_call *call) {
  const mx_regex_params *p = call->params;
  const mx_ktensor *x = mx__kin(call, 0);
  mx_ktensor *y = mx__kout(call, 0);
  regex_t re;
  char why[128];
  if (!mx__regex_compile(p->pattern, &re, why, sizeof why)) {
    call->why = "RegexFullMatch: the pattern does not compile";
    return MX_ERR_KERNEL;
  }
  int64_t n = mx__ktensor_numel(x);
  for (int64_t i = 0; i < n; i++)
    ((uint8_t *)y->data)[i] = regexec(&re, mx__string_at(x->data, (size_t)i), 0, NULL, 0) == 0;
  regfree(&re);
  return MX_OK;
}

static const mx_kernel_def k_concat = {
    .op = "StringConcat", .dtypes = MX_KDT(MX_STRING), .key = 0, .run = concat_run};
static const mx_kernel_def k_equal = {.op = "Equal", .dtypes = MX_KDT(MX_STRING), .key = 0, .run = equal_run};
static const mx_kernel_def k_split = {
    .op = "StringSplit", .dtypes = MX_KDT(MX_STRING), .key = 0, .run = split_run};
static const mx_kernel_def k_normalizer = {
    .op = "StringNormalizer", .dtypes = MX_KDT(MX_STRING), .key = 0, .run = normalizer_run};
static const mx_kernel_def k_regex = {
    .op = "RegexFullMatch", .dtypes = MX_KDT(MX_STRING), .key = 0, .run = regex_run};

const mx_kernel_def *const mx__kernels_string[] = {
    &k_concat, &k_equal, &k_split, &k_normalizer, &k_regex, NULL,
};
