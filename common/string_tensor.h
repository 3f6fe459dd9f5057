/* String tensors (MX_STRING, see mixrt/dtype.h): the data is an array of numel `char *`, each
 * NUL-terminated and malloc'd, owned by the tensor. These helpers free, copy and compare them
 * for the code paths that take strings (tensor release, the reference interpreter). */
#ifndef MIXRT_COMMON_STRING_TENSOR_H
#define MIXRT_COMMON_STRING_TENSOR_H

#include <stdbool.h>
#include <stddef.h>

#include "mixrt/tensor.h"

/* Frees each of the n strings of a string array (NULL entries are skipped) and sets them to NULL;
 * the array itself stays. NULL is a no-op. */
void mx__strings_free(char **strs, size_t n);
/* The string at index i of an array ("" for a NULL entry). */
static inline const char *mx__string_at(const void *data, size_t i) {
  const char *s = ((char *const *)data)[i];
  return s ? s : "";
}
/* Fills dst[0..n) with malloc'd copies of src[0..n) (dst's entries must be NULL: nothing there is
 * freed). On failure every dst entry is NULL and MX_ERR_OUT_OF_MEMORY is returned. */
MX_MUST_USE mx_status mx__strings_copy(char **dst, const void *src, size_t n);
/* Stores in dst[i] a malloc'd copy of the first len bytes of s (NUL-terminated). dst[i] is not
 * read: kernels write fresh output arrays, whose entries start NULL. */
MX_MUST_USE mx_status mx__string_set(char **dst, size_t i, const char *s, size_t len);

#endif /* MIXRT_COMMON_STRING_TENSOR_H */
