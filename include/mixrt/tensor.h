/* Plain tensors: the way callers hand data to mixrt and get it back.
 *
 * An mx_tensor describes row-major, contiguous data; it does not own it unless it was filled by
 * a mixrt function documented to allocate (then mx_tensor_release frees it).
 *
 * A string tensor (MX_STRING, host only) holds numel `char *` in data, each a NUL-terminated
 * UTF-8 string (NULL reads as ""). When mixrt allocated the tensor, each string is a malloc of
 * its own that mx_tensor_release frees with the array; a caller handing strings in keeps them. */
#ifndef MIXRT_TENSOR_H
#define MIXRT_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mixrt/api.h"
#include "mixrt/dtype.h"
#include "mixrt/shape.h"
#include "mixrt/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where a tensor's data lives. */
typedef enum mx_placement {
  MX_HOST = 0,  /* ordinary host memory */
  MX_DEVICE = 1 /* memory allocated from a mixrt device */
} mx_placement;

typedef struct mx_tensor {
  mx_dtype dtype;
  int32_t rank;              /* 0..MX_MAX_RANK; 0 is a scalar */
  int64_t dims[MX_MAX_RANK]; /* concrete, >= 0; entries beyond rank are ignored */
  void *data;                /* row-major contiguous; may be NULL when the tensor is empty */
  mx_placement placement;    /* where data lives */
  const char *name;          /* optional: the graph input/output it belongs to (borrowed) */
} mx_tensor;

/* Number of elements (1 for a scalar). Returns false on int64 overflow or a negative dim. */
MX_API bool mx_tensor_numel(const mx_tensor *t, int64_t *numel);
/* Size of the data in bytes. Returns false on overflow, an invalid dim or an unknown dtype. */
MX_API bool mx_tensor_nbytes(const mx_tensor *t, size_t *nbytes);

/* Fills *t with a new host tensor of the given type and dims whose zeroed data the caller owns
 * (free it with mx_tensor_release; a string tensor starts with NULL entries, read as ""). Fails with MX_ERR_LIMIT when the size overflows and
 * MX_ERR_OUT_OF_MEMORY when allocation fails. */
MX_API MX_MUST_USE mx_status mx_tensor_alloc(mx_dtype dtype, int32_t rank, const int64_t *dims, mx_tensor *t);
/* Frees data allocated by mixrt for a host tensor and clears the record. NULL is a no-op. */
MX_API void mx_tensor_release(mx_tensor *t);

/* Loads one serialized onnx.TensorProto file (the .pb files of the ONNX node tests).
 * On success *t holds a host tensor whose data the caller owns (mx_tensor_release); its name
 * is NULL. If name_out is not NULL it receives a malloc'd copy of the TensorProto's name (free()).
 * Malformed files give MX_ERR_MALFORMED with the reason in err. */
MX_API MX_MUST_USE mx_status mx_tensor_load_pb(const char *path, mx_tensor *t, char **name_out,
                                               mx_error *err);
/* Same, from memory. */
MX_API MX_MUST_USE mx_status mx_tensor_parse_pb(const void *data, size_t size, mx_tensor *t, char **name_out,
                                                mx_error *err);

/* Loads a NumPy .npy file (format 1.0-3.0, little-endian, C order) into a host tensor the caller
 * owns (mx_tensor_release). Element types: <f4 <f2 <f8 |i1 |u1 <i2 <i4 <i8 |b1, and <u2 read as
 * bfloat16 bit patterns (NumPy has no bfloat16). Errors name the file. */
MX_API MX_MUST_USE mx_status mx_tensor_load_npy(const char *path, mx_tensor *t, mx_error *err);
/* Writes a host tensor as a .npy file (bfloat16 is written as <u2 bit patterns; strings are
 * refused). */
MX_API MX_MUST_USE mx_status mx_tensor_save_npy(const char *path, const mx_tensor *t, mx_error *err);

#ifdef __cplusplus
}
#endif
#endif /* MIXRT_TENSOR_H */
