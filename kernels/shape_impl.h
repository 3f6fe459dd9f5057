/* Private helpers of the shape and index kernel files (shape*.c, index*.c): the strided element
 * copy most layout kernels reduce to, axis and dim-span arithmetic, reading index tensors, and
 * the kernel definitions that live in secondary files but are listed in the groups' exported
 * arrays. */
#ifndef MIXRT_KERNELS_SHAPE_IMPL_H
#define MIXRT_KERNELS_SHAPE_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/kernel.h"

/* Copies a strided view of `in` into contiguous `out`: output element c (coordinates over
 * dims[0..rank)) is input element sum_k c[k] * in_strides[k] (strides in elements, may be 0
 * or negative). es is the element size in bytes. Axes that are contiguous in the input are
 * merged and inner rows with stride 1 go through memcpy. Empty views copy nothing. */
void mx__kcopy_strided(void *out, const void *in, size_t es, int32_t rank, const int64_t *dims,
                       const int64_t *in_strides);

/* Normalizes a possibly negative axis against rank; false when out of range. */
static inline bool mx__knorm_axis(int64_t axis, int32_t rank, int32_t *out) {
  if (axis < -(int64_t)rank || axis >= (int64_t)rank) return false;
  *out = (int32_t)(axis < 0 ? axis + rank : axis);
  return true;
}

/* Product of t's dims [from, to) (1 when empty). */
static inline int64_t mx__kspan(const mx_ktensor *t, int32_t from, int32_t to) {
  int64_t n = 1;
  for (int32_t k = from; k < to; k++) n *= t->dims[k];
  return n;
}

/* Element i of an int32/int64 index tensor. */
static inline int64_t mx__kindex_at(const mx_ktensor *t, int64_t i) {
  return t->dtype == MX_INT32 ? ((const int32_t *)t->data)[i] : ((const int64_t *)t->data)[i];
}

/* True when out and in name the same bytes (an aliased Reshape/Identity needs no copy). */
static inline int mx__ksame(const mx_ktensor *out, const mx_ktensor *in) { return out->data == in->data; }

/* Kernels living in secondary files. */
extern const mx_kernel_def mx__kernel_transpose;
extern const mx_kernel_def mx__kernel_slice;
extern const mx_kernel_def mx__kernel_trilu, mx__kernel_nonzero;
extern const mx_kernel_def mx__kernel_topk_float, mx__kernel_topk_int;

#endif /* MIXRT_KERNELS_SHAPE_IMPL_H */
