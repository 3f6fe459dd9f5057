/* The CPU kernel interface.
 *
 * A kernel receives resolved tensors (data pointer, dtype, concrete dims and strides) and the
 * op's parsed params struct (from graph/ops/<group>-params.h), plus a scratch workspace whose
 * size it declared up front through its workspace function. It never allocates on its own and
 * never reads the graph IR.
 *
 * An mx_kernel_call is self-contained (the tensors follow the header in one block, no interior
 * pointers), so the HAL can copy it at launch and a static model can keep it in its task list
 * with the data pointers patched in place: the data field of tensor i lives at byte offset
 * mx__kernel_call_data_offset(i) of the block.
 *
 * Data-dependent ops (NonZero) get output buffers sized by the op's upper bound and write the
 * actual output dims into their output tensors (rank and dims), where the caller reads them. */
#ifndef MIXRT_KERNELS_KERNEL_H
#define MIXRT_KERNELS_KERNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "mixrt/dtype.h"
#include "mixrt/shape.h"
#include "mixrt/status.h"

typedef struct mx_ktensor {
  void *data;     /* NULL for an omitted optional input or an empty tensor */
  mx_dtype dtype; /* MX_DTYPE_UNDEFINED for an omitted optional input */
  int32_t rank;
  int64_t dims[MX_MAX_RANK];    /* concrete */
  int64_t strides[MX_MAX_RANK]; /* in elements; row-major contiguous (see mx__ktensor_set_dims) */
} mx_ktensor;

typedef struct mx_kernel_call {
  const void *params; /* the op's params struct (borrowed), NULL if it has none */
  void *workspace;    /* scratch of workspace_size bytes, 64-byte aligned */
  size_t workspace_size;
  const char *why; /* set by a failing kernel: static text saying what went wrong */
  const void *prepacked; /* the pre-packed form of a constant input (mx_kernel_def.prepack) that
                            the executor keeps beside the weights, or NULL: the kernel checks it
                            belongs to this call (kernels/prepack.h) and else packs as usual */
  uint16_t n_in;   /* inputs, including omitted optional ones */
  uint16_t n_out;
  uint32_t reserved; /* keeps t[] 8-byte aligned; always 0 */
  mx_ktensor t[];    /* n_in inputs then n_out outputs */
} mx_kernel_call;

typedef mx_status (*mx_kernel_fn)(mx_kernel_call *call);
/* Scratch bytes the kernel needs for the shapes in call (data pointers are not valid yet). */
typedef size_t (*mx_kernel_workspace_fn)(const mx_kernel_call *call);

/* A kernel's layout of a pre-packed constant input: four numbers the kernel picks (its kind,
 * dims, panel height...), compared whole. Equal layouts of equal bytes are equal blocks. */
typedef struct mx_kernel_prepack_layout {
  int64_t v[4];
} mx_kernel_prepack_layout;

/* The pre-packed form of a kernel's constant input (weights; kernels/prepack.h lists the kernels
 * that have one and which input) for the shapes of call, whose data pointer is valid for that
 * input only: its bytes (0: nothing to pre-pack for these shapes) and its layout; with dst (that
 * many bytes, 64-byte aligned), also writes it. An executor packs once per constant and layout,
 * keeps the block as long as the constant's bytes and passes it in mx_kernel_call.prepacked; the
 * kernel then reads it instead of packing the weights on every run, with the same bits. */
typedef size_t (*mx_kernel_prepack_fn)(const mx_kernel_call *call, void *dst, mx_kernel_prepack_layout *layout);

typedef struct mx_kernel_def {
  const char *op;     /* op type (default ONNX domain unless domain is set) */
  const char *domain; /* NULL or "" for the default domain */
  uint32_t dtypes;    /* MX_KDT(dtype) bits the deciding tensor may have */
  int8_t key;         /* deciding tensor: input index >= 0, or -1 - k for output k */
  mx_kernel_fn run;
  mx_kernel_workspace_fn workspace; /* NULL: no scratch */
} mx_kernel_def;

#define MX_KDT(dt)    (1u << (unsigned)(dt))
#define MX_KDT_FLOATS (MX_KDT(MX_FLOAT32) | MX_KDT(MX_FLOAT16) | MX_KDT(MX_BFLOAT16) | MX_KDT(MX_FLOAT64))
#define MX_KDT_SINTS  (MX_KDT(MX_INT8) | MX_KDT(MX_INT16) | MX_KDT(MX_INT32) | MX_KDT(MX_INT64))
#define MX_KDT_UINTS  (MX_KDT(MX_UINT8) | MX_KDT(MX_UINT16) | MX_KDT(MX_UINT32) | MX_KDT(MX_UINT64))
#define MX_KDT_INTS   (MX_KDT_SINTS | MX_KDT_UINTS)
#define MX_KDT_ALL    (MX_KDT_FLOATS | MX_KDT_INTS | MX_KDT(MX_BOOL))
/* The one-byte narrow types (8/4-bit floats, 4/2-bit integers held one per byte): kernels that
 * only move bytes or convert (Cast, quantization) add these to their masks. */
#define MX_KDT_NARROW                                                                                        \
  (MX_KDT(MX_FLOAT8E4M3FN) | MX_KDT(MX_FLOAT8E4M3FNUZ) | MX_KDT(MX_FLOAT8E5M2) | MX_KDT(MX_FLOAT8E5M2FNUZ) | \
   MX_KDT(MX_FLOAT4E2M1) | MX_KDT(MX_FLOAT8E8M0) | MX_KDT(MX_UINT4) | MX_KDT(MX_INT4) | MX_KDT(MX_UINT2) |   \
   MX_KDT(MX_INT2))

static inline mx_ktensor *mx__kin(mx_kernel_call *c, uint32_t i) { return &c->t[i]; }
static inline mx_ktensor *mx__kout(mx_kernel_call *c, uint32_t i) { return &c->t[c->n_in + i]; }

/* Bytes of a call block with n tensors. */
static inline size_t mx__kernel_call_size(uint32_t n_tensors) {
  return sizeof(mx_kernel_call) + (size_t)n_tensors * sizeof(mx_ktensor);
}
/* Byte offset of tensor i's data pointer inside a call block. */
static inline size_t mx__kernel_call_data_offset(uint32_t i) {
  return sizeof(mx_kernel_call) + (size_t)i * sizeof(mx_ktensor) + offsetof(mx_ktensor, data);
}

/* --- kernels as device work ------------------------------------------------------------------ *
 * A kernel launched through the HAL (mx__hal_launch, or a HAL model task) uses an argument block
 * laid out as an mx_kernel_task header followed by the mx_kernel_call (with its tensors), and
 * mx__kernel_task_run as the HAL function. For a data-dependent op, shape_out points at host
 * memory where the task copies each output's actual rank and dims after the kernel ran
 * (n_out records of 1 + MX_MAX_RANK int64s: rank, then dims), since the kernel only updates
 * the HAL's private copy of the block. */
typedef struct mx_kernel_task {
  mx_kernel_fn run;   /* the kernel */
  int64_t *shape_out; /* data-dependent ops: actual output shapes are copied here; else NULL */
} mx_kernel_task;

#define MX_KERNEL_SHAPE_RECORD (1 + MX_MAX_RANK) /* int64s per output in shape_out */

/* The call inside a task block. */
static inline mx_kernel_call *mx__kernel_task_call(void *block) {
  return (mx_kernel_call *)((char *)block + sizeof(mx_kernel_task));
}
/* Bytes of a task block with n tensors. */
static inline size_t mx__kernel_task_size(uint32_t n_tensors) {
  return sizeof(mx_kernel_task) + mx__kernel_call_size(n_tensors);
}
/* Byte offset of tensor i's data pointer inside a task block. */
static inline size_t mx__kernel_task_data_offset(uint32_t i) {
  return sizeof(mx_kernel_task) + mx__kernel_call_data_offset(i);
}
/* Byte offset of the workspace pointer inside a task block. */
static inline size_t mx__kernel_task_workspace_offset(void) {
  return sizeof(mx_kernel_task) + offsetof(mx_kernel_call, workspace);
}
/* The HAL function (mx_hal_fn signature) that runs a task block. */
MX_MUST_USE mx_status mx__kernel_task_run(void *args, size_t size);

/* Sets rank and dims and fills contiguous row-major strides. */
void mx__ktensor_set_dims(mx_ktensor *t, int32_t rank, const int64_t *dims);
/* Sets a whole tensor of a call block: dtype, data (borrowed), rank, dims and strides. */
void mx__ktensor_set(mx_ktensor *t, mx_dtype dtype, int32_t rank, const int64_t *dims, void *data);
/* A zeroed call block for n_in inputs and n_out outputs over params (borrowed; may be NULL), for
 * code that runs kernels by hand (benchmarks, tests); NULL when out of host memory. free() it. */
mx_kernel_call *mx__kernel_call_new(uint16_t n_in, uint16_t n_out, const void *params);
/* Elements of a tensor (product of dims; 1 for rank 0). */
int64_t mx__ktensor_numel(const mx_ktensor *t);

/* Whole-tensor fill and copy: an empty tensor's data is NULL, and memset/memcpy must not be
 * handed NULL even for zero bytes. */
static inline void mx__kzero(void *dst, size_t nbytes) {
  if (nbytes) memset(dst, 0, nbytes);
}
static inline void mx__kcopy(void *dst, const void *src, size_t nbytes) {
  if (nbytes) memcpy(dst, src, nbytes);
}

/* The kernel for op `op` in `domain` whose deciding tensor in `call` has a supported dtype,
 * or NULL. Dtypes are read from call (data pointers need not be set). */
const mx_kernel_def *mx__kernel_find(const char *domain, const char *op, const mx_kernel_call *call);
/* True when some kernel exists for the op (any dtype). */
bool mx__kernel_exists(const char *domain, const char *op);

/* Every kernel, for listings. */
size_t mx__kernel_count(void);
const mx_kernel_def *mx__kernel_at(size_t index);

#endif /* MIXRT_KERNELS_KERNEL_H */
