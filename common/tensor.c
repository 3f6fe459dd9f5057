/* Plain tensor helpers: element counts with overflow checks, owned host allocations (a string
 * tensor's strings included). */
#include <stdlib.h>
#include <string.h>

#include "common/string_tensor.h"
#include "common/value_list.h"
#include "mixrt/sequence.h"
#include "mixrt/tensor.h"

bool mx_tensor_numel(const mx_tensor *t, int64_t *numel) {
  if (!t || t->rank < 0 || t->rank > MX_MAX_RANK) return false;
  int64_t n = 1;
  for (int32_t i = 0; i < t->rank; i++) {
    if (t->dims[i] < 0) return false;
    if (t->dims[i] && n > INT64_MAX / t->dims[i]) return false;
    n *= t->dims[i];
  }
  if (numel) *numel = n;
  return true;
}

bool mx_tensor_nbytes(const mx_tensor *t, size_t *nbytes) {
  int64_t n;
  size_t es = t ? mx_dtype_size(t->dtype) : 0;
  if (!es || !mx_tensor_numel(t, &n)) return false;
  if ((uint64_t)n > SIZE_MAX / es) return false;
  if (nbytes) *nbytes = (size_t)n * es;
  return true;
}

mx_status mx_tensor_alloc(mx_dtype dtype, int32_t rank, const int64_t *dims, mx_tensor *t) {
  if (!t || rank < 0 || rank > MX_MAX_RANK || (rank > 0 && !dims) || !mx_dtype_size(dtype))
    return MX_ERR_INVALID_ARGUMENT;
  mx_tensor nt;
  memset(&nt, 0, sizeof nt);
  nt.dtype = dtype;
  nt.rank = rank;
  for (int32_t i = 0; i < rank; i++) nt.dims[i] = dims[i];
  size_t nbytes;
  if (!mx_tensor_nbytes(&nt, &nbytes)) return MX_ERR_LIMIT;
  nt.data = calloc(1, nbytes ? nbytes : 1);
  if (!nt.data) return MX_ERR_OUT_OF_MEMORY;
  nt.placement = MX_HOST;
  *t = nt;
  return MX_OK;
}

void mx_tensor_release(mx_tensor *t) {
  if (!t) return;
  if (mx_value_is_list(t)) {
    mx__value_list_free(t->data); /* a sequence or optional */
  } else {
    int64_t n;
    if (t->dtype == MX_STRING && t->data && mx_tensor_numel(t, &n)) mx__strings_free(t->data, (size_t)n);
    free(t->data);
  }
  memset(t, 0, sizeof *t);
}
