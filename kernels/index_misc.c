/* CPU kernels of Trilu, TopK and NonZero.
 *
 * Trilu copies or zeroes whole row segments (zero bytes are zero in every dtype). TopK sorts
 * each slice along its axis in the workspace by (value, index) so equal values keep ascending
 * index order, as the ONNX tests expect; NaN ranks after every number. NonZero counts, then
 * writes the coordinates of the non-zero elements into its output (sized by the op's upper
 * bound [rank, numel]) and sets the output's actual dims to [rank, count]. */
#include <stdlib.h>
#include <string.h>

#include "graph/ops/index_params.h"
#include "kernels/kutil.h"
#include "kernels/shape_impl.h"

/* --- Trilu ------------------------------------------------------------------------------------ */

static mx_status trilu_run(mx_kernel_call *call) {
  const mx_trilu_params *p = call->params;
  const mx_ktensor *in = mx__kin(call, 0);
  mx_ktensor *out = mx__kout(call, 0);
  int32_t r = in->rank;
  if (r < 2 || mx__ktensor_numel(out) != mx__ktensor_numel(in)) {
    call->why = "Trilu: input must have rank >= 2";
    return MX_ERR_KERNEL;
  }
  int64_t k = 0;
  if (call->n_in > 1 && mx__kin(call, 1)->data) {
    const mx_ktensor *tk = mx__kin(call, 1);
    if (tk->dtype != MX_INT64 || mx__ktensor_numel(tk) != 1) {
      call->why = "Trilu: k must be one int64";
      return MX_ERR_KERNEL;
    }
    k = *(const int64_t *)tk->data;
  }
  int64_t rows = in->dims[r - 2], cols = in->dims[r - 1], per_mat = rows * cols;
  if (per_mat == 0) return MX_OK;
  int64_t mats = mx__ktensor_numel(in) / per_mat;
  size_t es = mx_dtype_size(in->dtype), row = (size_t)cols * es;
  const unsigned char *src = in->data;
  unsigned char *dst = out->data;
  for (int64_t m = 0; m < mats; m++) {
    for (int64_t i = 0; i < rows; i++, src += row, dst += row) {
      /* Upper keeps columns j >= i + k; lower keeps j <= i + k. */
      int64_t edge = p->upper ? i + k : i + k + 1;
      if (edge > cols) edge = cols;
      if (edge < 0) edge = 0;
      size_t cut = (size_t)edge * es;
      if (p->upper) {
        memset(dst, 0, cut);
        if (dst != src) memcpy(dst + cut, src + cut, row - cut);
      } else {
        if (dst != src) memcpy(dst, src, cut);
        memset(dst + cut, 0, row - cut);
      }
    }
  }
  return MX_OK;
}

const mx_kernel_def mx__kernel_trilu = {.op = "Trilu", .dtypes = MX_KDT_ALL, .key = 0, .run = trilu_run};

/* --- TopK ------------------------------------------------------------------------------------- */

/* One element of the slice being sorted. */
typedef struct topk_item {
  union {
    double f;  /* float keys (16-bit floats widened) */
    int64_t i; /* integer keys */
  } key;
  int64_t index; /* position along the axis */
} topk_item;

/* Orders for largest (descending) and smallest (ascending); ties by ascending index. */
static int cmp_f_desc(const void *pa, const void *pb) {
  const topk_item *a = pa, *b = pb;
  bool na = a->key.f != a->key.f, nb = b->key.f != b->key.f;
  if (na != nb) return na ? 1 : -1;
  if (!na && a->key.f != b->key.f) return a->key.f > b->key.f ? -1 : 1;
  return (a->index > b->index) - (a->index < b->index);
}
static int cmp_f_asc(const void *pa, const void *pb) {
  const topk_item *a = pa, *b = pb;
  bool na = a->key.f != a->key.f, nb = b->key.f != b->key.f;
  if (na != nb) return na ? 1 : -1;
  if (!na && a->key.f != b->key.f) return a->key.f < b->key.f ? -1 : 1;
  return (a->index > b->index) - (a->index < b->index);
}
static int cmp_i_desc(const void *pa, const void *pb) {
  const topk_item *a = pa, *b = pb;
  if (a->key.i != b->key.i) return a->key.i > b->key.i ? -1 : 1;
  return (a->index > b->index) - (a->index < b->index);
}
static int cmp_i_asc(const void *pa, const void *pb) {
  const topk_item *a = pa, *b = pb;
  if (a->key.i != b->key.i) return a->key.i < b->key.i ? -1 : 1;
  return (a->index > b->index) - (a->index < b->index);
}

static bool topk_axis(const mx_kernel_call *call, int32_t *axis) {
  const mx_topk_params *p = call->params;
  return mx__knorm_axis(p->axis, call->t[0].rank, axis);
}

static size_t topk_workspace(const mx_kernel_call *call) {
  int32_t axis;
  if (!topk_axis(call, &axis)) return 0;
  return (size_t)call->t[0].dims[axis] * sizeof(topk_item);
}

static mx_status topk_run(mx_kernel_call *call) {
  const mx_topk_params *p = call->params;
  const mx_ktensor *x = mx__kin(call, 0);
  mx_ktensor *vals = mx__kout(call, 0), *idx = mx__kout(call, 1);
  int32_t axis;
  if (!topk_axis(call, &axis) || vals->rank != x->rank || idx->rank != x->rank || idx->dtype != MX_INT64 ||
      vals->dtype != x->dtype) {
    call->why = "TopK: bad axis or outputs";
    return MX_ERR_KERNEL;
  }
  int64_t n = x->dims[axis], k = vals->dims[axis];
  if (k > n || idx->dims[axis] != k || call->workspace_size < (size_t)n * sizeof(topk_item)) {
    call->why = "TopK: K exceeds the axis size";
    return MX_ERR_KERNEL;
  }
  if (call->n_in > 1 && mx__kin(call, 1)->data) {
    const mx_ktensor *tk = mx__kin(call, 1);
    if (tk->dtype != MX_INT64 || mx__ktensor_numel(tk) != 1 || *(const int64_t *)tk->data != k) {
      call->why = "TopK: K input does not match the output size";
      return MX_ERR_KERNEL;
    }
  }
  int64_t outer = mx__kspan(x, 0, axis), inner = mx__kspan(x, axis + 1, x->rank);
  if (outer * inner * k == 0) return MX_OK;
  bool is_float = mx_dtype_is_float(x->dtype);
  int (*cmp)(const void *, const void *) =
      is_float ? (p->largest ? cmp_f_desc : cmp_f_asc) : (p->largest ? cmp_i_desc : cmp_i_asc);
  size_t es = mx_dtype_size(x->dtype);
  topk_item *items = call->workspace;
  const unsigned char *src = x->data;
  unsigned char *vdst = vals->data;
  int64_t *idst = idx->data;
  for (int64_t o = 0; o < outer; o++) {
    for (int64_t i = 0; i < inner; i++) {
      int64_t base = o * n * inner + i;
      for (int64_t j = 0; j < n; j++) {
        int64_t e = base + j * inner;
        if (x->dtype == MX_FLOAT32)
          items[j].key.f = ((const float *)x->data)[e];
        else if (is_float)
          items[j].key.f = mx__kget_f64(x->data, x->dtype, e);
        else if (x->dtype == MX_UINT64) /* flipping the top bit orders uint64 as int64 */
          items[j].key.i = (int64_t)(((const uint64_t *)x->data)[e] ^ (UINT64_C(1) << 63));
        else
          items[j].key.i = mx__kget_i64(x->data, x->dtype, e);
        items[j].index = j;
      }
      qsort(items, (size_t)n, sizeof *items, cmp);
      int64_t obase = o * k * inner + i;
      for (int64_t j = 0; j < k; j++) {
        int64_t e = obase + j * inner;
        memcpy(vdst + (size_t)e * es, src + (size_t)(base + items[j].index * inner) * es, es);
        idst[e] = items[j].index;
      }
    }
  }
  return MX_OK;
}

const mx_kernel_def mx__kernel_topk_float = {
    .op = "TopK", .dtypes = MX_KDT_FLOATS, .key = 0, .run = topk_run, .workspace = topk_workspace};
const mx_kernel_def mx__kernel_topk_int = {
    .op = "TopK", .dtypes = MX_KDT_INTS, .key = 0, .run = topk_run, .workspace = topk_workspace};

/* --- NonZero ---------------------------------------------------------------------------------- */

/* True when element i is not zero (floats by value: -0 is zero, NaN is not). */
static inline bool nonzero_at(const void *p, mx_dtype dt, size_t es, int64_t i) {
  switch (dt) {
    case MX_FLOAT32: return ((const float *)p)[i] != 0.0f;
    case MX_FLOAT64: return ((const double *)p)[i] != 0.0;
    case MX_FLOAT16:
    case MX_BFLOAT16: return (((const uint16_t *)p)[i] & 0x7fffu) != 0;
    default: {
      const unsigned char *b = (const unsigned char *)p + (size_t)i * es;
      for (size_t k = 0; k < es; k++)
        if (b[k]) return true;
      return false;
    }
  }
}

static mx_status nonzero_run(mx_kernel_call *call) {
  const mx_ktensor *in = mx__kin(call, 0);
  mx_ktensor *out = mx__kout(call, 0);
  int32_t r = in->rank == 0 ? 1 : in->rank;
  int64_t total = mx__ktensor_numel(in), count = 0;
  size_t es = mx_dtype_size(in->dtype);
  for (int64_t i = 0; i < total; i++) count += nonzero_at(in->data, in->dtype, es, i);
  /* The buffer holds the upper bound [rank, numel]. */
  if (out->dtype != MX_INT64 || out->rank != 2 || out->dims[0] != r || out->dims[1] < count) {
    call->why = "NonZero: output buffer is smaller than [rank, count]";
    return MX_ERR_KERNEL;
  }
  int64_t *o = out->data;
  int64_t coord[MX_MAX_RANK] = {0}, j = 0;
  for (int64_t i = 0; i < total; i++) {
    if (nonzero_at(in->data, in->dtype, es, i)) {
      for (int32_t d = 0; d < r; d++) o[d * count + j] = in->rank == 0 ? 0 : coord[d];
      j++;
    }
    for (int32_t d = in->rank - 1; d >= 0; d--) {
      if (++coord[d] < in->dims[d]) break;
      coord[d] = 0;
    }
  }
  mx__ktensor_set_dims(out, 2, (int64_t[]){r, count});
  return MX_OK;
}

const mx_kernel_def mx__kernel_nonzero = {
    .op = "NonZero", .dtypes = MX_KDT_ALL, .key = 0, .run = nonzero_run};
