/* Tensor comparison by the ONNX backend-test rules (mx_tensor_allclose): exact dtype and shape,
 * |a - e| <= atol + rtol * |e| for floats with NaN == NaN and same-sign infinities, exact
 * equality for integers, bools and strings. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/string_tensor.h"
#include "kernels/kutil.h"
#include "mixrt/reference.h"
#include "mixrt/sequence.h"

static void say(char *why, size_t n, const char *fmt, long long a, long long b) {
  if (why && n) snprintf(why, n, fmt, a, b);
}

/* Sequences and optionals: the same kind and count, then item by item. */
static bool lists_close(const mx_tensor *a, const mx_tensor *e, double rtol, double atol, char *why,
                        size_t why_size) {
  const mx_value_list *la = mx_value_list_of(a), *le = mx_value_list_of(e);
  mx_value_kind ka = mx_value_kind_of(a), ke = mx_value_kind_of(e);
  /* An optional sequence and a sequence are one kind for comparison (files do not tell them apart). */
  bool seq_a = ka == MX_KIND_SEQUENCE || ka == MX_KIND_OPTIONAL_SEQUENCE;
  bool seq_e = ke == MX_KIND_SEQUENCE || ke == MX_KIND_OPTIONAL_SEQUENCE;
  if (!la || !le || (seq_a != seq_e && ka != MX_KIND_OPTIONAL && ke != MX_KIND_OPTIONAL)) {
    if (why && why_size)
      snprintf(why, why_size, "a %s, expected a %s",
               seq_a ? "sequence"
               : la  ? "optional"
                     : "tensor",
               seq_e ? "sequence"
               : le  ? "optional"
                     : "tensor");
    return false;
  }
  if (la->count != le->count) {
    say(why, why_size, "%lld items, expected %lld", (long long)la->count, (long long)le->count);
    return false;
  }
  for (size_t i = 0; i < la->count; i++) {
    char inner[200] = "";
    if (!mx_tensor_allclose(&la->items[i], &le->items[i], rtol, atol, inner, sizeof inner)) {
      if (why && why_size) snprintf(why, why_size, "item %zu: %s", i, inner);
      return false;
    }
  }
  return true;
}

bool mx_tensor_allclose(const mx_tensor *a, const mx_tensor *e, double rtol, double atol, char *why,
                        size_t why_size) {
  if (why && why_size) why[0] = '\0';
  if (mx_value_is_list(a) || mx_value_is_list(e)) return lists_close(a, e, rtol, atol, why, why_size);
  if (a->dtype != e->dtype) {
    if (why && why_size)
      snprintf(why, why_size, "dtype %s, expected %s", mx_dtype_name(a->dtype), mx_dtype_name(e->dtype));
    return false;
  }
  if (a->rank != e->rank) {
    say(why, why_size, "rank %lld, expected %lld", a->rank, e->rank);
    return false;
  }
  for (int32_t i = 0; i < a->rank; i++) {
    if (a->dims[i] != e->dims[i]) {
      if (why && why_size)
        snprintf(why, why_size, "dim %d is %lld, expected %lld", (int)i, (long long)a->dims[i],
                 (long long)e->dims[i]);
      return false;
    }
  }
  int64_t n;
  if (!mx_tensor_numel(e, &n)) {
    if (why && why_size) snprintf(why, why_size, "invalid dims");
    return false;
  }
  if (e->dtype == MX_STRING) {
    for (int64_t i = 0; i < n; i++) {
      const char *x = mx__string_at(a->data, (size_t)i), *y = mx__string_at(e->data, (size_t)i);
      if (strcmp(x, y) != 0) {
        if (why && why_size)
          snprintf(why, why_size, "element %lld is \"%.60s\", expected \"%.60s\"", (long long)i, x, y);
        return false;
      }
    }
    return true;
  }
  bool is_float = mx_dtype_is_float(e->dtype) || mx_dtype_is_narrow_float(e->dtype);
  for (int64_t i = 0; i < n; i++) {
    if (!is_float) {
      int64_t x = mx__kget_i64(a->data, a->dtype, i), y = mx__kget_i64(e->data, e->dtype, i);
      if (x != y) {
        if (why && why_size)
          snprintf(why, why_size, "element %lld is %lld, expected %lld", (long long)i, (long long)x,
                   (long long)y);
        return false;
      }
      continue;
    }
    double x = mx__kget_f64(a->data, a->dtype, i), y = mx__kget_f64(e->data, e->dtype, i);
    bool ok;
    if (isnan(y))
      ok = isnan(x);
    else if (isinf(y))
      ok = isinf(x) && signbit(x) == signbit(y);
    else
      ok = !isnan(x) && !isinf(x) && fabs(x - y) <= atol + rtol * fabs(y);
    if (!ok) {
      if (why && why_size)
        snprintf(why, why_size, "element %lld is %.9g, expected %.9g (|diff| %.3g > %.3g)", (long long)i, x,
                 y, fabs(x - y), atol + rtol * fabs(y));
      return false;
    }
  }
  return true;
}
