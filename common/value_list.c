/* Sequence and optional run-time values (mixrt/sequence.h): creation, insertion, deep copy and
 * release of the mx_value_list behind an mx_tensor of dtype MX_DTYPE_SEQUENCE / _OPTIONAL. */
#include <stdlib.h>
#include <string.h>

#include "common/string_tensor.h"
#include "common/value_list.h"
#include "mixrt/sequence.h"

mx_value_kind mx_value_kind_of(const mx_tensor *t) {
  const mx_value_list *l = mx_value_list_of(t);
  return l ? l->kind : MX_KIND_TENSOR;
}

void mx__value_list_free(void *list) {
  mx_value_list *l = list;
  if (!l) return;
  for (size_t i = 0; i < l->count; i++) mx_tensor_release(&l->items[i]);
  free(l->items);
  free(l);
}

mx_status mx_value_list_new(mx_value_kind kind, mx_dtype elem_dtype, mx_tensor *out) {
  if (!out || kind == MX_KIND_TENSOR) return MX_ERR_INVALID_ARGUMENT;
  mx_value_list *l = calloc(1, sizeof *l);
  if (!l) return MX_ERR_OUT_OF_MEMORY;
  l->kind = kind;
  l->elem_dtype = elem_dtype;
  memset(out, 0, sizeof *out);
  out->dtype = kind == MX_KIND_SEQUENCE ? MX_DTYPE_SEQUENCE : MX_DTYPE_OPTIONAL;
  out->rank = 0;
  out->placement = MX_HOST;
  out->data = l;
  return MX_OK;
}

mx_status mx_value_list_insert(mx_tensor *value, size_t pos, mx_tensor *item) {
  mx_value_list *l = mx_value_list_of(value);
  if (!l || !item || pos > l->count) return MX_ERR_INVALID_ARGUMENT;
  if (l->kind != MX_KIND_SEQUENCE && l->count >= 1) return MX_ERR_INVALID_ARGUMENT;
  if (l->count == l->cap) {
    size_t ncap = l->cap ? l->cap * 2 : 4;
    mx_tensor *ni = realloc(l->items, ncap * sizeof *ni);
    if (!ni) return MX_ERR_OUT_OF_MEMORY;
    l->items = ni;
    l->cap = ncap;
  }
  memmove(&l->items[pos + 1], &l->items[pos], (l->count - pos) * sizeof *l->items);
  l->items[pos] = *item;
  l->items[pos].name = NULL;
  l->count++;
  memset(item, 0, sizeof *item);
  return MX_OK;
}

mx_status mx_value_copy(const mx_tensor *src, mx_tensor *dst) {
  if (!src || !dst) return MX_ERR_INVALID_ARGUMENT;
  const mx_value_list *l = mx_value_list_of(src);
  if (!l) {
    size_t nbytes = 0;
    if (!mx_tensor_nbytes(src, &nbytes)) return MX_ERR_INVALID_ARGUMENT;
    *dst = *src;
    dst->name = NULL;
    dst->placement = MX_HOST;
    dst->data = malloc(nbytes ? nbytes : 1);
    if (!dst->data) return MX_ERR_OUT_OF_MEMORY;
    if (src->dtype == MX_STRING) { /* deep: the copy owns strings of its own */
      memset(dst->data, 0, nbytes);
      mx_status st = mx__strings_copy(dst->data, src->data, nbytes / sizeof(char *));
      if (st != MX_OK) {
        free(dst->data);
        dst->data = NULL;
      }
      return st;
    }
    if (nbytes) memcpy(dst->data, src->data, nbytes);
    return MX_OK;
  }
  mx_status st = mx_value_list_new(l->kind, l->elem_dtype, dst);
  if (st != MX_OK) return st;
  for (size_t i = 0; i < l->count; i++) {
    mx_tensor item;
    st = mx_value_copy(&l->items[i], &item);
    if (st == MX_OK) st = mx_value_list_insert(dst, i, &item);
    if (st != MX_OK) {
      mx_tensor_release(&item);
      mx_tensor_release(dst);
      return st;
    }
  }
  return MX_OK;
}
