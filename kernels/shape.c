/* CPU kernels of the shape group: Shape, Size, the byte-copy ops (Reshape, Flatten, Squeeze,
 * Unsqueeze, Identity, Dropout), Concat, Split, Expand, Tile, Constant, ConstantOfShape and
 * Range, plus the group's exported array (Transpose lives in shape_copy.c).
 *
 * Layout kernels are dtype-agnostic: they move elements by size, so one definition covers every
 * dtype, the one-byte narrow types (float8, int4, ...) included. Output shapes were resolved by
 * run-time inference, so Reshape-like ops are a single memcpy (none when the executor aliased output and input), Split takes its sizes from
 * the output dims, and Concat/Split copy one contiguous chunk per input per outer index. */
#include <string.h>

#include "graph/ops/shape_params.h"
#include "kernels/groups.h"
#include "kernels/kutil.h"
#include "kernels/shape_impl.h"

/* --- Shape, Size ------------------------------------------------------------------------------ */

static int64_t clamp_dim_index(int64_t v, int64_t rank) {
  if (v < 0) v += rank;
  return v < 0 ? 0 : v > rank ? rank : v;
}

static mx_status shape_run(mx_kernel_call *call) {
  const mx_shape_params *p = call->params;
  const mx_ktensor *in = mx__kin(call, 0);
  mx_ktensor *out = mx__kout(call, 0);
  int64_t start = p ? clamp_dim_index(p->start, in->rank) : 0;
  int64_t end = p && p->has_end ? clamp_dim_index(p->end, in->rank) : in->rank;
  int64_t n = end > start ? end - start : 0;
  if (out->dtype != MX_INT64 || out->rank != 1 || out->dims[0] != n) {
    call->why = "Shape: output is not int64 of the expected length";
    return MX_ERR_KERNEL;
  }
  int64_t *o = out->data;
  for (int64_t k = 0; k < n; k++) o[k] = in->dims[start + k];
  return MX_OK;
}

static mx_status size_run(mx_kernel_call *call) {
  mx_ktensor *out = mx__kout(call, 0);
  if (out->dtype != MX_INT64) {
    call->why = "Size: output must be int64";
    return MX_ERR_KERNEL;
  }
  *(int64_t *)out->data = mx__ktensor_numel(mx__kin(call, 0));
  return MX_OK;
}

static const mx_kernel_def k_shape = {
    .op = "Shape", .dtypes = MX_KDT_ALL | MX_KDT_NARROW, .key = 0, .run = shape_run};
static const mx_kernel_def k_size = {
    .op = "Size", .dtypes = MX_KDT_ALL | MX_KDT_NARROW, .key = 0, .run = size_run};

/* --- byte copies ------------------------------------------------------------------------------ */

/* Output 0 gets the bytes of input 0 (same element count). */
static mx_status copy_run(mx_kernel_call *call) {
  const mx_ktensor *in = mx__kin(call, 0);
  mx_ktensor *out = mx__kout(call, 0);
  int64_t n = mx__ktensor_numel(in);
  if (n != mx__ktensor_numel(out) || in->dtype != out->dtype) {
    call->why = "output and input differ in element count or dtype";
    return MX_ERR_KERNEL;
  }
  if (n && !mx__ksame(out, in)) memcpy(out->data, in->data, (size_t)n * mx_dtype_size(in->dtype));
  return MX_OK;
}

static const mx_kernel_def k_reshape = {
    .op = "Reshape", .dtypes = MX_KDT_ALL | MX_KDT_NARROW, .key = 0, .run = copy_run};
static const mx_kernel_def k_flatten = {
    .op = "Flatten", .dtypes = MX_KDT_ALL | MX_KDT_NARROW, .key = 0, .run = copy_run};
static const mx_kernel_def k_squeeze = {
    .op = "Squeeze", .dtypes = MX_KDT_ALL | MX_KDT_NARROW, .key = 0, .run = copy_run};
static const mx_kernel_def k_unsqueeze = {
    .op = "Unsqueeze", .dtypes = MX_KDT_ALL | MX_KDT_NARROW, .key = 0, .run = copy_run};
static const mx_kernel_def k_identity = {
    .op = "Identity", .dtypes = MX_KDT_ALL | MX_KDT_NARROW, .key = 0, .run = copy_run};

/* Inference-mode Dropout: the data passes through and the optional mask is all true. */
static mx_status dropout_run(mx_kernel_call *call) {
  mx_status st = copy_run(call);
  if (st != MX_OK || call->n_out < 2) return st;
  mx_ktensor *mask = mx__kout(call, 1);
  if (!mask->data) return MX_OK;
  int64_t n = mx__ktensor_numel(mask);
  if (mask->dtype == MX_BOOL || mask->dtype == MX_UINT8) {
    memset(mask->data, 1, (size_t)n);
  } else {
    for (int64_t k = 0; k < n; k++) mx__kset_f64(mask->data, mask->dtype, k, 1.0);
  }
  return MX_OK;
}

static const mx_kernel_def k_dropout = {.op = "Dropout", .dtypes = MX_KDT_ALL, .key = 0, .run = dropout_run};

/* --- Concat, Split ---------------------------------------------------------------------------- */

/* Concat and Split move the same bytes in opposite directions. The whole tensor (Concat's
 * output, Split's input) is [outer, axis, inner]; the parts (Concat's inputs, Split's outputs)
 * share its outer and inner spans, and part i owns a band of every outer row, after the bands
 * of parts 0..i-1. The parts' axis sizes must add up to the whole's. */
typedef struct concat_split_text {
  const char *bad_axis; /* call->why when the axis is out of range */
  const char *bad_part; /* ... when a part's rank, dtype or other dims differ from the whole */
  const char *bad_sum;  /* ... when the parts' axis sizes do not add up */
} concat_split_text;

static const concat_split_text concat_text = {"Concat: axis out of range",
                                              "Concat: an input does not match the output",
                                              "Concat: input sizes do not add up to the output"};
static const concat_split_text split_text = {"Split: axis out of range",
                                             "Split: an output does not match the input",
                                             "Split: output sizes do not add up to the input"};

/* Checks the n parts against whole along `axis` (may be negative), then copies parts into
 * whole (to_whole, Concat) or whole into the parts (Split). */
static mx_status concat_split(mx_kernel_call *call, int64_t axis_attr, mx_ktensor *whole, mx_ktensor *parts,
                              uint32_t n, bool to_whole, const concat_split_text *text) {
  int32_t axis;
  if (!mx__knorm_axis(axis_attr, whole->rank, &axis)) {
    call->why = text->bad_axis;
    return MX_ERR_KERNEL;
  }
  size_t es = mx_dtype_size(whole->dtype);
  int64_t outer = mx__kspan(whole, 0, axis), inner = mx__kspan(whole, axis + 1, whole->rank), total = 0;
  for (uint32_t i = 0; i < n; i++) {
    const mx_ktensor *t = &parts[i];
    if (t->rank != whole->rank || t->dtype != whole->dtype || mx__kspan(t, 0, axis) != outer ||
        mx__kspan(t, axis + 1, t->rank) != inner) {
      call->why = text->bad_part;
      return MX_ERR_KERNEL;
    }
    total += t->dims[axis];
  }
  if (total != whole->dims[axis]) {
    call->why = text->bad_sum;
    return MX_ERR_KERNEL;
  }
  unsigned char *w = whole->data;
  size_t row = (size_t)(whole->dims[axis] * inner) * es;
  size_t at = 0; /* byte offset of the current part's band inside a row of the whole */
  for (uint32_t i = 0; i < n; i++) {
    size_t chunk = (size_t)(parts[i].dims[axis] * inner) * es;
    if (chunk) {
      unsigned char *band = parts[i].data;
      for (int64_t q = 0; q < outer; q++) {
        if (to_whole)
          memcpy(w + (size_t)q * row + at, band + (size_t)q * chunk, chunk);
        else
          memcpy(band + (size_t)q * chunk, w + (size_t)q * row + at, chunk);
      }
    }
    at += chunk;
  }
  return MX_OK;
}

static mx_status concat_run(mx_kernel_call *call) {
  const mx_concat_params *p = call->params;
  return concat_split(call, p->axis, mx__kout(call, 0), mx__kin(call, 0), call->n_in, true, &concat_text);
}

static mx_status split_run(mx_kernel_call *call) {
  const mx_split_params *p = call->params;
  return concat_split(call, p->axis, mx__kin(call, 0), mx__kout(call, 0), call->n_out, false, &split_text);
}

static const mx_kernel_def k_concat = {
    .op = "Concat", .dtypes = MX_KDT_ALL | MX_KDT_NARROW, .key = 0, .run = concat_run};
static const mx_kernel_def k_split = {
    .op = "Split", .dtypes = MX_KDT_ALL | MX_KDT_NARROW, .key = 0, .run = split_run};

/* --- Expand, Tile ----------------------------------------------------------------------------- */

static mx_status expand_run(mx_kernel_call *call) {
  const mx_ktensor *in = mx__kin(call, 0);
  mx_ktensor *out = mx__kout(call, 0);
  if (out->rank < in->rank) {
    call->why = "Expand: output rank is below the input rank";
    return MX_ERR_KERNEL;
  }
  int32_t off = out->rank - in->rank;
  for (int32_t k = 0; k < in->rank; k++)
    if (in->dims[k] != 1 && in->dims[k] != out->dims[k + off]) {
      call->why = "Expand: input does not broadcast to the output";
      return MX_ERR_KERNEL;
    }
  int64_t strides[MX_MAX_RANK];
  mx__kbroadcast_strides(in, out->rank, strides);
  mx__kcopy_strided(out->data, in->data, mx_dtype_size(in->dtype), out->rank, out->dims, strides);
  return MX_OK;
}

static mx_status tile_run(mx_kernel_call *call) {
  const mx_ktensor *in = mx__kin(call, 0);
  mx_ktensor *out = mx__kout(call, 0);
  int32_t r = in->rank;
  if (out->rank != r) {
    call->why = "Tile: output rank differs from the input rank";
    return MX_ERR_KERNEL;
  }
  for (int32_t k = 0; k < r; k++)
    if ((in->dims[k] == 0 && out->dims[k] != 0) || (in->dims[k] && out->dims[k] % in->dims[k] != 0)) {
      call->why = "Tile: output dims are not multiples of the input dims";
      return MX_ERR_KERNEL;
    }
  size_t es = mx_dtype_size(in->dtype);
  if (mx__ktensor_numel(out) == 0) return MX_OK;
  if (r == 0) {
    memcpy(out->data, in->data, es);
    return MX_OK;
  }
  /* Each output row repeats one input row; outer output coordinates map to input ones mod dims. */
  int64_t in_strides[MX_MAX_RANK], stride = 1;
  for (int32_t k = r - 1; k >= 0; k--) {
    in_strides[k] = stride;
    stride *= in->dims[k];
  }
  int64_t n_in = in->dims[r - 1], n_out = out->dims[r - 1];
  size_t row = (size_t)n_in * es;
  int64_t coord[MX_MAX_RANK] = {0};
  unsigned char *o = out->data;
  const unsigned char *src = in->data;
  for (;;) {
    int64_t off = 0;
    for (int32_t k = 0; k < r - 1; k++) off += (coord[k] % in->dims[k]) * in_strides[k];
    for (int64_t q = 0; q < n_out; q += n_in, o += row) memcpy(o, src + (size_t)off * es, row);
    int32_t k = r - 2;
    for (; k >= 0; k--) {
      if (++coord[k] < out->dims[k]) break;
      coord[k] = 0;
    }
    if (k < 0) return MX_OK;
  }
}

static const mx_kernel_def k_expand = {
    .op = "Expand", .dtypes = MX_KDT_ALL | MX_KDT_NARROW, .key = 0, .run = expand_run};
static const mx_kernel_def k_tile = {
    .op = "Tile", .dtypes = MX_KDT_ALL | MX_KDT_NARROW, .key = 0, .run = tile_run};

/* --- Constant, ConstantOfShape ---------------------------------------------------------------- */

static mx_status constant_run(mx_kernel_call *call) {
  const mx_constant_params *p = call->params;
  mx_ktensor *out = mx__kout(call, 0);
  size_t n = (size_t)mx__ktensor_numel(out) * mx_dtype_size(out->dtype);
  if (out->dtype != (mx_dtype)p->dtype || n != p->nbytes) {
    call->why = "Constant: output does not match the value";
    return MX_ERR_KERNEL;
  }
  if (n) memcpy(out->data, p->data.bytes, n);
  return MX_OK;
}

static mx_status constant_of_shape_run(mx_kernel_call *call) {
  const mx_constant_of_shape_params *p = call->params;
  mx_ktensor *out = mx__kout(call, 0);
  int64_t n = mx__ktensor_numel(out);
  if (out->dtype != (mx_dtype)p->dtype) {
    call->why = "ConstantOfShape: output dtype differs from the value's";
    return MX_ERR_KERNEL;
  }
  switch (mx_dtype_size(out->dtype)) {
#define FILL_CASE(size, T)                    \
  case size: {                                \
    T v, *restrict o = out->data;             \
    memcpy(&v, p->value.bytes, sizeof v);     \
    for (int64_t k = 0; k < n; k++) o[k] = v; \
    return MX_OK;                             \
  }
    FILL_CASE(1, uint8_t)
    FILL_CASE(2, uint16_t)
    FILL_CASE(4, uint32_t)
    FILL_CASE(8, uint64_t)
#undef FILL_CASE
    default: call->why = "ConstantOfShape: unsupported element size"; return MX_ERR_UNSUPPORTED;
  }
}

static const mx_kernel_def k_constant = {
    .op = "Constant", .dtypes = MX_KDT_ALL, .key = -1, .run = constant_run};
static const mx_kernel_def k_constant_of_shape = {
    .op = "ConstantOfShape", .dtypes = MX_KDT_ALL, .key = -1, .run = constant_of_shape_run};

/* --- Range ------------------------------------------------------------------------------------ */

#define RANGE_FN(name, T, ACC)                                            \
  static void name(void *po, const void *ps, const void *pd, int64_t n) { \
    T *restrict o = po;                                                   \
    ACC start = (ACC) * (const T *)ps, delta = (ACC) * (const T *)pd;     \
    for (int64_t k = 0; k < n; k++) o[k] = (T)(start + (ACC)k * delta);   \
  }
RANGE_FN(range_f32, float, double)
RANGE_FN(range_f64, double, double)
#undef RANGE_FN

/* float16 / bfloat16: each element computed in float32 from start and delta, rounded once. */
static void range_f16(void *po, const void *ps, const void *pd, int64_t n, bool bf16) {
  uint16_t *restrict o = po;
  uint16_t s = *(const uint16_t *)ps, d = *(const uint16_t *)pd;
  float start = bf16 ? mx__bf16_to_f32(s) : mx__f16_to_f32(s),
        delta = bf16 ? mx__bf16_to_f32(d) : mx__f16_to_f32(d);
  for (int64_t k = 0; k < n; k++) {
    float v = start + (float)k * delta;
    o[k] = bf16 ? mx__f32_to_bf16(v) : mx__f32_to_f16(v);
  }
}

/* Integer ranges wrap like the C types they are stored in (computed in unsigned 64 bits). */
#define RANGE_INT_FN(name, T)                                                                          \
  static void name(void *po, const void *ps, const void *pd, int64_t n) {                              \
    T *restrict o = po;                                                                                \
    uint64_t start = (uint64_t)(int64_t) * (const T *)ps, delta = (uint64_t)(int64_t) * (const T *)pd; \
    for (int64_t k = 0; k < n; k++) o[k] = (T)(start + (uint64_t)k * delta);                           \
  }
RANGE_INT_FN(range_i16, int16_t)
RANGE_INT_FN(range_i32, int32_t)
RANGE_INT_FN(range_i64, int64_t)
#undef RANGE_INT_FN

static mx_status range_run(mx_kernel_call *call) {
  const mx_ktensor *s = mx__kin(call, 0), *l = mx__kin(call, 1), *d = mx__kin(call, 2);
  mx_ktensor *out = mx__kout(call, 0);
  mx_dtype dt = s->dtype;
  if (l->dtype != dt || d->dtype != dt || out->dtype != dt || out->rank != 1) {
    call->why = "Range: inputs and output must share one dtype, output 1-D";
    return MX_ERR_KERNEL;
  }
  int64_t n = out->dims[0];
  switch (dt) {
    case MX_FLOAT32: range_f32(out->data, s->data, d->data, n); break;
    case MX_FLOAT64: range_f64(out->data, s->data, d->data, n); break;
    case MX_FLOAT16: range_f16(out->data, s->data, d->data, n, false); break;
    case MX_BFLOAT16: range_f16(out->data, s->data, d->data, n, true); break;
    case MX_INT16: range_i16(out->data, s->data, d->data, n); break;
    case MX_INT32: range_i32(out->data, s->data, d->data, n); break;
    case MX_INT64: range_i64(out->data, s->data, d->data, n); break;
    default: call->why = "Range: unsupported dtype"; return MX_ERR_UNSUPPORTED;
  }
  return MX_OK;
}

static const mx_kernel_def k_range = {.op = "Range",
                                      .dtypes = MX_KDT(MX_FLOAT32) | MX_KDT(MX_FLOAT64) | MX_KDT(MX_FLOAT16) |
                                                MX_KDT(MX_BFLOAT16) | MX_KDT(MX_INT16) | MX_KDT(MX_INT32) |
                                                MX_KDT(MX_INT64),
                                      .key = 0,
                                      .run = range_run};

/* --- the group -------------------------------------------------------------------------------- */

const mx_kernel_def *const mx__kernels_shape[] = {
    &k_shape,    &k_size,     &k_reshape,
    &k_flatten,  &k_squeeze,  &k_unsqueeze,
    &k_identity, &k_dropout,  &mx__kernel_transpose,
    &k_concat,   &k_split,    &k_expand,
    &k_tile,     &k_constant, &k_constant_of_shape,
    &k_range,    NULL,
};
