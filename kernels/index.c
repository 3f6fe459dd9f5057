/* CPU kernels of the index group: Gather, GatherElements, GatherND, ScatterND, and the group's
 * exported array (Slice lives in index_slice.c; Trilu, TopK and NonZero in index_misc.c).
 *
 * The gathers move elements by size, so one definition covers every dtype. Gather copies one
 * contiguous block per (outer index, index) pair with memcpy — an embedding lookup on axis 0 of
 * a 2-D table is one memcpy per row. Negative indices count from the end; an index out of range
 * fails the kernel with MX_ERR_KERNEL. ScatterND's reductions compute in the element type
 * (16-bit floats through float32, rounded once). */
#include <string.h>

#include "common/fail_cause.h"
#include "graph/ops/index_params.h"
#include "kernels/groups.h"
#include "kernels/kutil.h"
#include "kernels/shape_impl.h"

/* Resolves a possibly negative index against size n; false when out of range. */
static inline bool fix_index(int64_t *i, int64_t n) {
  if (*i < 0) *i += n;
  return *i >= 0 && *i < n;
}

static bool is_index_dtype(mx_dtype dt) { return dt == MX_INT32 || dt == MX_INT64; }

/* --- Gather ----------------------------------------------------------------------------------- */

static mx_status gather_run(mx_kernel_call *call) {
  const mx_gather_params *p = call->params;
  const mx_ktensor *data = mx__kin(call, 0), *ind = mx__kin(call, 1);
  mx_ktensor *out = mx__kout(call, 0);
  int32_t axis;
  if (!is_index_dtype(ind->dtype) || !mx__knorm_axis(p->axis, data->rank, &axis)) {
    call->why = "Gather: bad indices dtype or axis";
    return MX_ERR_KERNEL;
  }
  size_t es = mx_dtype_size(data->dtype);
  int64_t outer = mx__kspan(data, 0, axis), n = data->dims[axis];
  int64_t inner = mx__kspan(data, axis + 1, data->rank);
  int64_t m = mx__ktensor_numel(ind);
  if (mx__ktensor_numel(out) != outer * m * inner) {
    call->why = "Gather: output size does not match";
    return MX_ERR_KERNEL;
  }
  if (outer * m * inner == 0) return MX_OK;
  size_t block = (size_t)inner * es;
  const unsigned char *src = data->data;
  unsigned char *dst = out->data;
  for (int64_t j = 0; j < m; j++) {
    int64_t i = mx__kindex_at(ind, j);
    if (!fix_index(&i, n)) {
      call->why = mx__fail_cause_set(
          "Gather: index %lld at position %lld of the indices is out of range [%lld, %lld) "
          "of data axis %d",
          (long long)mx__kindex_at(ind, j), (long long)j, (long long)-n, (long long)n, (int)axis);
      return MX_ERR_KERNEL;
    }
  }
  for (int64_t q = 0; q < outer; q++) {
    const unsigned char *base = src + (size_t)(q * n) * block;
    if (inner == 1 && es == 4) {
      /* Single 4-byte elements (float32 / int32 values gathered one by one). */
      uint32_t *o = (uint32_t *)(void *)dst;
      const uint32_t *b = (const uint32_t *)(const void *)base;
      for (int64_t j = 0; j < m; j++) {
        int64_t i = mx__kindex_at(ind, j);
        o[j] = b[i < 0 ? i + n : i];
      }
    } else if (inner == 1 && es == 8) {
      uint64_t *o = (uint64_t *)(void *)dst;
      const uint64_t *b = (const uint64_t *)(const void *)base;
      for (int64_t j = 0; j < m; j++) {
        int64_t i = mx__kindex_at(ind, j);
        o[j] = b[i < 0 ? i + n : i];
      }
    } else {
      for (int64_t j = 0; j < m; j++) {
        int64_t i = mx__kindex_at(ind, j);
        memcpy(dst + (size_t)j * block, base + (size_t)(i < 0 ? i + n : i) * block, block);
      }
    }
    dst += (size_t)m * block;
  }
  return MX_OK;
}

static const mx_kernel_def k_gather = {
    .op = "Gather", .dtypes = MX_KDT_ALL | MX_KDT_NARROW, .key = 0, .run = gather_run};

/* --- GatherElements --------------------------------------------------------------------------- */

static mx_status gather_elements_run(mx_kernel_call *call) {
  const mx_gather_params *p = call->params;
  const mx_ktensor *data = mx__kin(call, 0), *ind = mx__kin(call, 1);
  mx_ktensor *out = mx__kout(call, 0);
  int32_t r = data->rank, axis;
  if (!is_index_dtype(ind->dtype) || ind->rank != r || !mx__knorm_axis(p->axis, r, &axis)) {
    call->why = "GatherElements: bad indices dtype, rank or axis";
    return MX_ERR_KERNEL;
  }
  for (int32_t k = 0; k < r; k++)
    if (k != axis && ind->dims[k] > data->dims[k]) {
      call->why = "GatherElements: indices are larger than data off the axis";
      return MX_ERR_KERNEL;
    }
  int64_t total = mx__ktensor_numel(ind);
  if (total == 0) return MX_OK;
  size_t es = mx_dtype_size(data->dtype);
  int64_t dstride[MX_MAX_RANK], s = 1;
  for (int32_t k = r - 1; k >= 0; k--) {
    dstride[k] = s;
    s *= data->dims[k];
  }
  int64_t coord[MX_MAX_RANK] = {0};
  const unsigned char *src = data->data;
  unsigned char *dst = out->data;
  for (int64_t e = 0; e < total; e++) {
    int64_t i = mx__kindex_at(ind, e);
    if (!fix_index(&i, data->dims[axis])) {
      long long n = (long long)data->dims[axis];
      call->why = mx__fail_cause_set(
          "GatherElements: index %lld at position %lld of the indices is out of range "
          "[%lld, %lld) of data axis %d",
          (long long)mx__kindex_at(ind, e), (long long)e, -n, n, (int)axis);
      return MX_ERR_KERNEL;
    }
    int64_t off = 0;
    for (int32_t k = 0; k < r; k++) off += (k == axis ? i : coord[k]) * dstride[k];
    memcpy(dst + (size_t)e * es, src + (size_t)off * es, es);
    for (int32_t k = r - 1; k >= 0; k--) {
      if (++coord[k] < ind->dims[k]) break;
      coord[k] = 0;
    }
  }
  return MX_OK;
}

static const mx_kernel_def k_gather_elements = {
    .op = "GatherElements", .dtypes = MX_KDT_ALL, .key = 0, .run = gather_elements_run};

/* --- GatherND, ScatterND ---------------------------------------------------------------------- */

/* Where the index tuples of a GatherND/ScatterND point. */
typedef struct nd_plan {
  int64_t batches;              /* product of the batch dims */
  int64_t tuples;               /* index tuples per batch */
  int64_t depth;                /* indices' last dim: how many leading data dims a tuple indexes */
  int64_t slice;                /* elements per gathered slice */
  int64_t batch_stride;         /* data elements per batch */
  int64_t dstride[MX_MAX_RANK]; /* data strides in elements */
  int32_t b;                    /* batch_dims */
} nd_plan;

static bool nd_make_plan(const mx_ktensor *data, const mx_ktensor *ind, int64_t b, nd_plan *p) {
  int32_t r = data->rank, q = ind->rank;
  if (q < 1 || r < 1 || b < 0 || b >= q || b >= r || ind->dtype != MX_INT64) return false;
  p->b = (int32_t)b;
  p->depth = ind->dims[q - 1];
  if (p->depth < 0 || p->depth > r - b) return false;
  for (int32_t k = 0; k < b; k++)
    if (ind->dims[k] != data->dims[k]) return false;
  p->batches = mx__kspan(ind, 0, (int32_t)b);
  p->tuples = mx__kspan(ind, (int32_t)b, q - 1);
  p->slice = mx__kspan(data, (int32_t)(b + p->depth), r);
  p->batch_stride = mx__kspan(data, (int32_t)b, r);
  int64_t s = 1;
  for (int32_t k = r - 1; k >= 0; k--) {
    p->dstride[k] = s;
    s *= data->dims[k];
  }
  return true;
}

/* Element offset in data of index tuple t (counted over all batches); -1 when out of range. */
static int64_t nd_offset(const nd_plan *p, const mx_ktensor *data, const mx_ktensor *ind, int64_t t) {
  int64_t batch = t / (p->tuples ? p->tuples : 1);
  int64_t off = batch * p->batch_stride;
  const int64_t *idx = (const int64_t *)ind->data + t * p->depth;
  for (int64_t k = 0; k < p->depth; k++) {
    int64_t i = idx[k];
    int32_t axis = (int32_t)(p->b + k);
    if (!fix_index(&i, data->dims[axis])) return -1;
    off += i * p->dstride[axis];
  }
  return off;
}

static mx_status gathernd_run(mx_kernel_call *call) {
  const mx_gathernd_params *prm = call->params;
  const mx_ktensor *data = mx__kin(call, 0), *ind = mx__kin(call, 1);
  mx_ktensor *out = mx__kout(call, 0);
  nd_plan p;
  if (!nd_make_plan(data, ind, prm->batch_dims, &p)) {
    call->why = "GatherND: indices do not fit the data";
    return MX_ERR_KERNEL;
  }
  int64_t n = p.batches * p.tuples;
  if (mx__ktensor_numel(out) != n * p.slice) {
    call->why = "GatherND: output size does not match";
    return MX_ERR_KERNEL;
  }
  size_t es = mx_dtype_size(data->dtype), block = (size_t)p.slice * es;
  const unsigned char *src = data->data;
  unsigned char *dst = out->data;
  for (int64_t t = 0; t < n && block; t++) {
    int64_t off = nd_offset(&p, data, ind, t);
    if (off < 0) {
      call->why = mx__fail_cause_set("GatherND: index tuple %lld is out of the data's range", (long long)t);
      return MX_ERR_KERNEL;
    }
    memcpy(dst + (size_t)t * block, src + (size_t)off * es, block);
  }
  return MX_OK;
}

static const mx_kernel_def k_gathernd = {
    .op = "GatherND", .dtypes = MX_KDT_ALL, .key = 0, .run = gathernd_run};

/* dst[k] = reduce(dst[k], src[k]) for k < n, in the element type T. */
#define SCATTER_FN(name, T)                                               \
  static void name(void *pd, const void *ps, int64_t n, int32_t red) {    \
    T *restrict d = pd;                                                   \
    const T *restrict s = ps;                                             \
    switch (red) {                                                        \
      case MX_SCATTER_ADD:                                                \
        for (int64_t k = 0; k < n; k++) d[k] = (T)(d[k] + s[k]);          \
        break;                                                            \
      case MX_SCATTER_MUL:                                                \
        for (int64_t k = 0; k < n; k++) d[k] = (T)(d[k] * s[k]);          \
        break;                                                            \
      case MX_SCATTER_MAX:                                                \
        for (int64_t k = 0; k < n; k++) d[k] = s[k] > d[k] ? s[k] : d[k]; \
        break;                                                            \
      case MX_SCATTER_MIN:                                                \
        for (int64_t k = 0; k < n; k++) d[k] = s[k] < d[k] ? s[k] : d[k]; \
        break;                                                            \
      default: memcpy(d, s, (size_t)n * sizeof(T)); break;                \
    }                                                                     \
  }
SCATTER_FN(scatter_f32, float)
SCATTER_FN(scatter_f64, double)
SCATTER_FN(scatter_i8, int8_t)
SCATTER_FN(scatter_u8, uint8_t)
SCATTER_FN(scatter_i16, int16_t)
SCATTER_FN(scatter_i32, int32_t)
#undef SCATTER_FN

/* int64 add and mul wrap (computed unsigned) instead of overflowing. */
static void scatter_i64(void *pd, const void *ps, int64_t n, int32_t red) {
  int64_t *restrict d = pd;
  const int64_t *restrict s = ps;
  for (int64_t k = 0; k < n; k++) {
    switch (red) {
      case MX_SCATTER_ADD: d[k] = (int64_t)((uint64_t)d[k] + (uint64_t)s[k]); break;
      case MX_SCATTER_MUL: d[k] = (int64_t)((uint64_t)d[k] * (uint64_t)s[k]); break;
      case MX_SCATTER_MAX: d[k] = s[k] > d[k] ? s[k] : d[k]; break;
      case MX_SCATTER_MIN: d[k] = s[k] < d[k] ? s[k] : d[k]; break;
      default: d[k] = s[k]; break;
    }
  }
}

/* 16-bit floats and bool through the generic element accessors (float32 math, rounded once;
 * bool add/max is "or", mul/min is "and"). */
static void scatter_generic(void *pd, const void *ps, int64_t n, int32_t red, mx_dtype dt) {
  for (int64_t k = 0; k < n; k++) {
    float d = (float)mx__kget_f64(pd, dt, k), s = (float)mx__kget_f64(ps, dt, k), r;
    switch (red) {
      case MX_SCATTER_ADD: r = dt == MX_BOOL ? (float)(d != 0 || s != 0) : d + s; break;
      case MX_SCATTER_MUL: r = d * s; break;
      case MX_SCATTER_MAX: r = s > d ? s : d; break;
      case MX_SCATTER_MIN: r = s < d ? s : d; break;
      default: r = s; break;
    }
    mx__kset_f64(pd, dt, k, r);
  }
}

static mx_status scatternd_run(mx_kernel_call *call) {
  const mx_scatternd_params *prm = call->params;
  const mx_ktensor *data = mx__kin(call, 0), *ind = mx__kin(call, 1), *upd = mx__kin(call, 2);
  mx_ktensor *out = mx__kout(call, 0);
  nd_plan p;
  if (!nd_make_plan(data, ind, 0, &p) || upd->dtype != data->dtype) {
    call->why = "ScatterND: indices or updates do not fit the data";
    return MX_ERR_KERNEL;
  }
  int64_t n = p.tuples;
  if (mx__ktensor_numel(upd) != n * p.slice || mx__ktensor_numel(out) != mx__ktensor_numel(data)) {
    call->why = "ScatterND: updates or output size does not match";
    return MX_ERR_KERNEL;
  }
  size_t es = mx_dtype_size(data->dtype), block = (size_t)p.slice * es;
  if (!mx__ksame(out, data) && mx__ktensor_numel(data))
    mx__kcopy(out->data, data->data, (size_t)mx__ktensor_numel(data) * es);
  unsigned char *dst = out->data;
  const unsigned char *src = upd->data;
  for (int64_t t = 0; t < n && block; t++) {
    int64_t off = nd_offset(&p, data, ind, t);
    if (off < 0) {
      call->why = mx__fail_cause_set("ScatterND: index tuple %lld is out of the data's range", (long long)t);
      return MX_ERR_KERNEL;
    }
    void *d = dst + (size_t)off * es;
    const void *s = src + (size_t)t * block;
    int32_t red = prm->reduction;
    switch (data->dtype) {
      case MX_FLOAT32: scatter_f32(d, s, p.slice, red); break;
      case MX_FLOAT64: scatter_f64(d, s, p.slice, red); break;
      case MX_INT8: scatter_i8(d, s, p.slice, red); break;
      case MX_UINT8: scatter_u8(d, s, p.slice, red); break;
      case MX_INT16: scatter_i16(d, s, p.slice, red); break;
      case MX_INT32: scatter_i32(d, s, p.slice, red); break;
      case MX_INT64: scatter_i64(d, s, p.slice, red); break;
      default:
        if (red == MX_SCATTER_NONE)
          memcpy(d, s, block);
        else
          scatter_generic(d, s, p.slice, red, data->dtype);
        break;
    }
  }
  return MX_OK;
}

static const mx_kernel_def k_scatternd = {
    .op = "ScatterND", .dtypes = MX_KDT_ALL, .key = 0, .run = scatternd_run};

/* --- the group -------------------------------------------------------------------------------- */

const mx_kernel_def *const mx__kernels_index[] = {
    &k_gather,         &k_gather_elements,     &k_gathernd,          &k_scatternd,        &mx__kernel_slice,
    &mx__kernel_trilu, &mx__kernel_topk_float, &mx__kernel_topk_int, &mx__kernel_nonzero, NULL,
};
