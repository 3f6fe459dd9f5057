/* Sequences and optionals as run-time values.
 *
 * Where mixrt passes values as mx_tensor records (the reference interpreter's inputs and
 * outputs, the ONNX test data), a sequence or an optional is an mx_tensor whose dtype is
 * MX_DTYPE_SEQUENCE or MX_DTYPE_OPTIONAL (codes outside ONNX's element types), rank 0, host
 * placement, and whose data points to an mx_value_list that owns its items. A sequence's items
 * are tensors; an optional holds 0 items (empty) or 1 (a tensor or a sequence).
 * mx_tensor_release frees such a value with everything it holds. */
#ifndef MIXRT_SEQUENCE_H
#define MIXRT_SEQUENCE_H

#include <stdbool.h>
#include <stddef.h>

#include "mixrt/api.h"
#include "mixrt/graph.h"
#include "mixrt/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MX_DTYPE_SEQUENCE ((mx_dtype)0x5E0)
#define MX_DTYPE_OPTIONAL ((mx_dtype)0x0F0)

/* The payload of a sequence or optional value. */
typedef struct mx_value_list {
  mx_dtype elem_dtype; /* element type of the tensors held (also when there are none) */
  mx_value_kind kind;  /* MX_KIND_SEQUENCE, MX_KIND_OPTIONAL or MX_KIND_OPTIONAL_SEQUENCE */
  size_t count;        /* items held */
  size_t cap;          /* room in items */
  mx_tensor *items;    /* owned (malloc'd, each item's data malloc'd or a list itself) */
} mx_value_list;

/* True when t is a sequence or an optional rather than a tensor. */
static inline bool mx_value_is_list(const mx_tensor *t) {
  return t && (t->dtype == MX_DTYPE_SEQUENCE || t->dtype == MX_DTYPE_OPTIONAL);
}
/* The list behind a sequence or optional value (NULL for a tensor). */
static inline mx_value_list *mx_value_list_of(const mx_tensor *t) {
  return mx_value_is_list(t) ? (mx_value_list *)t->data : NULL;
}
/* The kind of a run-time value (a tensor's is MX_KIND_TENSOR). */
MX_API mx_value_kind mx_value_kind_of(const mx_tensor *t);

/* Makes *out an empty value of `kind` (sequence, optional or optional sequence) whose tensors
 * have type elem_dtype. */
MX_API MX_MUST_USE mx_status mx_value_list_new(mx_value_kind kind, mx_dtype elem_dtype, mx_tensor *out);
/* Appends *item to the list of `value` at position `pos` (count: at the end); the list takes
 * ownership of the item's data (the record *item is cleared). */
MX_API MX_MUST_USE mx_status mx_value_list_insert(mx_tensor *value, size_t pos, mx_tensor *item);
/* Deep copy of any value (tensor, sequence, optional) into host memory the copy owns. */
MX_API MX_MUST_USE mx_status mx_value_copy(const mx_tensor *src, mx_tensor *dst);

/* Loads a .pb file holding a value of `kind`: a TensorProto, a SequenceProto or an
 * OptionalProto (the ONNX node tests' data files). The caller releases *t. */
MX_API MX_MUST_USE mx_status mx_value_load_pb(const char *path, mx_value_kind kind, mx_tensor *t,
                                              mx_error *err);

#ifdef __cplusplus
}
#endif
#endif /* MIXRT_SEQUENCE_H */
