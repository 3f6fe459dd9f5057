/* String tensor element helpers: freeing, deep copies and single-element stores. */
#include <stdlib.h>
#include <string.h>

#include "common/string_tensor.h"

void mx__strings_free(char **strs, size_t n) {
  if (!strs) return;
  for (size_t i = 0; i < n; i++) {
    free(strs[i]);
    strs[i] = NULL;
  }
}

mx_status mx__string_set(char **dst, size_t i, const char *s, size_t len) {
  char *c = malloc(len + 1);
  if (!c) return MX_ERR_OUT_OF_MEMORY;
  if (len) memcpy(c, s, len);
  c[len] = '\0';
  dst[i] = c;
  return MX_OK;
}

mx_status mx__strings_copy(char **dst, const void *src, size_t n) {
  for (size_t i = 0; i < n; i++) {
    const char *s = mx__string_at(src, i);
    if (mx__string_set(dst, i, s, strlen(s)) != MX_OK) {
      mx__strings_free(dst, n);
      return MX_ERR_OUT_OF_MEMORY;
    }
  }
  return MX_OK;
}
