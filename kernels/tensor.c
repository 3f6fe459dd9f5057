/* CPU kernels of the tensor construction and scatter group: OneHot, Compress, Unique, Scatter,
 * ScatterElements, EyeLike, ReverseSequence and TensorScatter, and the group's array.
 *
 * Element moves copy bytes, so every dtype is exact (Compress, ReverseSequence and TensorScatter
 * also take the one-byte narrow types). Compress and Unique are data-dependent:
 * their output buffers have the op's upper bound and the kernels write the actual dims. Unique
 * sorts element (or slice) positions with a stable merge sort in the workspace, so equal
 * entries keep ascending positions and the first of a run is the first occurrence. The
 * scatter reductions compute floats in double and integers in int64. */
#include <string.h>

#include "graph/ops/index_params.h"
#include "graph/ops/tensor_params.h"
#include "kernels/groups.h"
#include "kernels/kutil.h"
#include "kernels/shape_impl.h"

/* --- OneHot ----------------------------------------------------------------------------------- */

static mx_status onehot_run(mx_kernel_call *call) {
  const mx_onehot_params *p = call->params;
  const mx_ktensor *ind = mx__kin(call, 0), *vals = mx__kin(call, 2);
  mx_ktensor *out = mx__kout(call, 0);
  int32_t axis;
  if (!mx__knorm_axis(p->axis, ind->rank + 1, &axis) || out->rank != ind->rank + 1 ||
      mx__ktensor_numel(vals) != 2 || vals->dtype != out->dtype) {
    call->why = "OneHot: bad axis, values or output";
    return MX_ERR_KERNEL;
  }
  size_t es = mx_dtype_size(out->dtype);
  const unsigned char *off = vals->data, *on = off + es;
  int64_t depth = out->dims[axis], outer = mx__kspan(ind, 0, axis), inner = mx__kspan(ind, axis, ind->rank);
  unsigned char *dst = out->data;
  int64_t total = outer * depth * inner;
  for (int64_t e = 0; e < total; e++) memcpy(dst + (size_t)e * es, off, es);
  bool is_float = mx_dtype_is_float(ind->dtype);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      int64_t at = o * inner + i, k;
      if (is_float) {
        double v = mx__kget_f64(ind->data, ind->dtype, at);
        if (v != (double)(int64_t)v) continue; /* a fractional index matches no position */
        k = (int64_t)v;
      } else {
        k = mx__kget_i64(ind->data, ind->dtype, at);
      }
      if (k < 0) k += depth;
      if (k < 0 || k >= depth) continue;
      memcpy(dst + (size_t)((o * depth + k) * inner + i) * es, on, es);
    }
  return MX_OK;
}

static const mx_kernel_def onehot_kernel = {
    .op = "OneHot", .dtypes = MX_KDT_ALL, .key = 0, .run = onehot_run};

/* --- Compress --------------------------------------------------------------------------------- */

static mx_status compress_run(mx_kernel_call *call) {
  const mx_axis_opt_params *p = call->params;
  const mx_ktensor *in = mx__kin(call, 0), *cond = mx__kin(call, 1);
  mx_ktensor *out = mx__kout(call, 0);
  int32_t axis = 0;
  if ((p->has_axis && !mx__knorm_axis(p->axis, in->rank, &axis)) || cond->dtype != MX_BOOL ||
      out->dtype != in->dtype) {
    call->why = "Compress: bad axis or condition";
    return MX_ERR_KERNEL;
  }
  int64_t outer = p->has_axis ? mx__kspan(in, 0, axis) : 1;
  int64_t n = p->has_axis ? in->dims[axis] : mx__ktensor_numel(in);
  int64_t inner = p->has_axis ? mx__kspan(in, axis + 1, in->rank) : 1;
  int64_t len = mx__ktensor_numel(cond), count = 0;
  const uint8_t *c = cond->data;
  for (int64_t j = 0; j < n && j < len; j++) count += c[j] != 0;
  /* The buffer holds the upper bound along the axis: check it, then write the compact result. */
  int64_t cap =
      p->has_axis ? (out->rank == in->rank ? out->dims[axis] : -1) : (out->rank == 1 ? out->dims[0] : -1);
  if (cap < count) {
    call->why = "Compress: output buffer is smaller than the selection";
    return MX_ERR_KERNEL;
  }
  size_t es = mx_dtype_size(in->dtype), row = (size_t)inner * es;
  const unsigned char *src = in->data;
  unsigned char *dst = out->data;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < n && j < len; j++)
      if (c[j]) {
        memcpy(dst, src + (size_t)(o * n + j) * row, row);
        dst += row;
      }
  if (p->has_axis) {
    int64_t dims[MX_MAX_RANK];
    memcpy(dims, in->dims, sizeof dims);
    dims[axis] = count;
    mx__ktensor_set_dims(out, in->rank, dims);
  } else {
    mx__ktensor_set_dims(out, 1, &count);
  }
  return MX_OK;
}

static const mx_kernel_def compress_kernel = {
    .op = "Compress", .dtypes = MX_KDT_ALL | MX_KDT_NARROW, .key = 0, .run = compress_run};

/* --- Unique ----------------------------------------------------------------------------------- */

/* The input seen as n entries (elements, or slices along the axis), each `outer` runs of
 * `inner` elements. */
typedef struct uq_view {
  const void *data;
  mx_dtype dtype;
  bool is_float;
  int64_t outer, n, inner;
} uq_view;

/* Compares entries a and b lexicographically (numpy's order for slices). */
static int uq_cmp(const uq_view *v, int64_t a, int64_t b) {
  for (int64_t o = 0; o < v->outer; o++)
    for (int64_t i = 0; i < v->inner; i++) {
      int64_t ea = (o * v->n + a) * v->inner + i, eb = (o * v->n + b) * v->inner + i;
      if (v->is_float) {
        double x = mx__kget_f64(v->data, v->dtype, ea), y = mx__kget_f64(v->data, v->dtype, eb);
        bool nx = x != x, ny = y != y;
        /* NaNs are equal to each other and sort after every number (numpy's equal_nan). */
        if (nx || ny) {
          if (nx != ny) return nx ? 1 : -1;
          continue;
        }
        if (x != y) return x < y ? -1 : 1;
      } else {
        int64_t x = mx__kget_i64(v->data, v->dtype, ea), y = mx__kget_i64(v->data, v->dtype, eb);
        if (x != y) return x < y ? -1 : 1;
      }
    }
  return 0;
}

/* Stable bottom-up merge sort of idx[0..n) by entry (keys NULL) or by keys[idx] ascending. */
static void uq_sort(const uq_view *v, const int64_t *keys, int64_t *idx, int64_t *tmp, int64_t n) {
  for (int64_t width = 1; width < n; width *= 2) {
    for (int64_t lo = 0; lo < n; lo += 2 * width) {
      int64_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
      int64_t i = lo, j = mid, k = lo;
      while (i < mid && j < hi) {
        int c = keys ? (keys[idx[j]] < keys[idx[i]] ? 1 : 0) : uq_cmp(v, idx[j], idx[i]) < 0;
        tmp[k++] = c ? idx[j++] : idx[i++];
      }
      while (i < mid) tmp[k++] = idx[i++];
      while (j < hi) tmp[k++] = idx[j++];
    }
    memcpy(idx, tmp, (size_t)n * sizeof *idx);
  }
}

static int64_t uq_entries(const mx_kernel_call *call) {
  const mx_axis_opt_params *p = call->params;
  const mx_ktensor *x = &call->t[0];
  int32_t axis;
  if (!p->has_axis) return mx__ktensor_numel(x);
  return mx__knorm_axis(p->axis, x->rank, &axis) ? x->dims[axis] : 0;
}

static size_t unique_workspace(const mx_kernel_call *call) {
  /* order, merge scratch, group of each entry, first index and count of each group, rank. */
  return (size_t)(uq_entries(call) * 6 + 1) * sizeof(int64_t);
}

static mx_status unique_run(mx_kernel_call *call) {
  const mx_axis_opt_params *p = call->params;
  const mx_ktensor *x = mx__kin(call, 0);
  int32_t axis = 0;
  if ((p->has_axis && !mx__knorm_axis(p->axis, x->rank, &axis)) ||
      call->workspace_size < unique_workspace(call)) {
    call->why = "Unique: bad axis";
    return MX_ERR_KERNEL;
  }
  uq_view v = {.data = x->data, .dtype = x->dtype, .is_float = mx_dtype_is_float(x->dtype)};
  v.outer = p->has_axis ? mx__kspan(x, 0, axis) : 1;
  v.n = uq_entries(call);
  v.inner = p->has_axis ? mx__kspan(x, axis + 1, x->rank) : 1;
  int64_t n = v.n;
  int64_t *order = call->workspace, *tmp = order + n, *group = tmp + n, *first = group + n,
          *count = first + n, *rank = count + n;
  for (int64_t i = 0; i < n; i++) order[i] = i;
  uq_sort(&v, NULL, order, tmp, n);
  int64_t u = 0;
  for (int64_t k = 0; k < n; k++) {
    if (k == 0 || uq_cmp(&v, order[k - 1], order[k]) != 0) {
      first[u] = order[k];
      count[u] = 0;
      u++;
    }
    group[order[k]] = u - 1;
    count[u - 1]++;
  }
  /* Output position of each group: sorted order, or by first occurrence. */
  int64_t *pos_of = tmp; /* group -> output position */
  if (p->sorted) {
    for (int64_t g = 0; g < u; g++) pos_of[g] = g;
  } else {
    for (int64_t g = 0; g < u; g++) rank[g] = g;
    uq_sort(&v, first, rank, order, u); /* order is free now: scratch */
    for (int64_t k = 0; k < u; k++) pos_of[rank[k]] = k;
  }
  mx_ktensor *y = mx__kout(call, 0);
  size_t es = mx_dtype_size(x->dtype), row = (size_t)v.inner * es;
  int64_t ycap = p->has_axis ? (y->rank == x->rank ? y->dims[axis] : -1) : (y->rank == 1 ? y->dims[0] : -1);
  if (ycap < u || y->dtype != x->dtype) {
    call->why = "Unique: output buffer is smaller than the unique count";
    return MX_ERR_KERNEL;
  }
  const unsigned char *src = x->data;
  unsigned char *dst = y->data;
  for (int64_t g = 0; g < u; g++)
    for (int64_t o = 0; o < v.outer; o++)
      memcpy(dst + (size_t)(o * u + pos_of[g]) * row, src + (size_t)(o * n + first[g]) * row, row);
  if (p->has_axis) {
    int64_t dims[MX_MAX_RANK];
    memcpy(dims, x->dims, sizeof dims);
    dims[axis] = u;
    mx__ktensor_set_dims(y, x->rank, dims);
  } else {
    mx__ktensor_set_dims(y, 1, &u);
  }
  for (uint32_t k = 1; k < call->n_out; k++) {
    mx_ktensor *t = mx__kout(call, k);
    if (!t->data && mx__ktensor_numel(t) > 0) continue;
    int64_t want = k == 2 ? n : u;
    if (t->dtype != MX_INT64 || t->rank != 1 || t->dims[0] < want) {
      call->why = "Unique: index outputs must be int64 and large enough";
      return MX_ERR_KERNEL;
    }
    int64_t *o = t->data;
    if (k == 1)
      for (int64_t g = 0; g < u; g++) o[pos_of[g]] = first[g];
    else if (k == 2)
      for (int64_t i = 0; i < n; i++) o[i] = pos_of[group[i]];
    else
      for (int64_t g = 0; g < u; g++) o[pos_of[g]] = count[g];
    mx__ktensor_set_dims(t, 1, &want);
  }
  return MX_OK;
}

static const mx_kernel_def unique_kernel = {
    .op = "Unique", .dtypes = MX_KDT_ALL, .key = 0, .run = unique_run, .workspace = unique_workspace};

/* --- Scatter / ScatterElements ---------------------------------------------------------------- */

/* Combines update element u into element d of dst (same dtype dt) by the reduction. */
static void scatter_combine(void *dst, int64_t d, const void *upd, int64_t u, mx_dtype dt, size_t es,
                            int32_t red) {
  if (red == MX_SCATTER_NONE) {
    memcpy((unsigned char *)dst + (size_t)d * es, (const unsigned char *)upd + (size_t)u * es, es);
    return;
  }
  if (mx_dtype_is_float(dt)) {
    double a = mx__kget_f64(dst, dt, d), b = mx__kget_f64(upd, dt, u), r;
    switch (red) {
      case MX_SCATTER_ADD: r = a + b; break;
      case MX_SCATTER_MUL: r = a * b; break;
      case MX_SCATTER_MAX: r = a > b ? a : b; break;
      default: r = a < b ? a : b; break;
    }
    mx__kset_f64(dst, dt, d, r);
  } else {
    int64_t a = mx__kget_i64(dst, dt, d), b = mx__kget_i64(upd, dt, u), r;
    switch (red) {
      case MX_SCATTER_ADD: r = (int64_t)((uint64_t)a + (uint64_t)b); break;
      case MX_SCATTER_MUL: r = (int64_t)((uint64_t)a * (uint64_t)b); break;
      case MX_SCATTER_MAX: r = a > b ? a : b; break;
      default: r = a < b ? a : b; break;
    }
    mx__kset_i64(dst, dt, d, r);
  }
}

static mx_status scatter_run(mx_kernel_call *call) {
  const mx_scatter_elements_params *p = call->params;
  const mx_ktensor *data = mx__kin(call, 0), *ind = mx__kin(call, 1), *upd = mx__kin(call, 2);
  mx_ktensor *out = mx__kout(call, 0);
  int32_t r = data->rank, axis;
  if (r == 0 || !mx__knorm_axis(p->axis, r, &axis) || ind->rank != r || upd->rank != r ||
      upd->dtype != data->dtype || out->dtype != data->dtype ||
      mx__ktensor_numel(out) != mx__ktensor_numel(data)) {
    call->why = "ScatterElements: data, indices and updates disagree";
    return MX_ERR_KERNEL;
  }
  for (int32_t d = 0; d < r; d++)
    if (ind->dims[d] != upd->dims[d]) {
      call->why = "ScatterElements: indices and updates must have the same shape";
      return MX_ERR_KERNEL;
    }
  size_t es = mx_dtype_size(data->dtype);
  if (!mx__ksame(out, data)) mx__kcopy(out->data, data->data, (size_t)mx__ktensor_numel(data) * es);
  int64_t total = mx__ktensor_numel(ind);
  int64_t dstride[MX_MAX_RANK], s = 1;
  for (int32_t d = r - 1; d >= 0; d--) {
    dstride[d] = s;
    s *= data->dims[d];
  }
  int64_t c[MX_MAX_RANK] = {0};
  for (int64_t e = 0; e < total; e++) {
    int64_t k = mx__kindex_at(ind, e), n = data->dims[axis];
    if (k < -n || k >= n) {
      call->why = "ScatterElements: an index is out of range";
      return MX_ERR_KERNEL;
    }
    if (k < 0) k += n;
    int64_t off = 0;
    for (int32_t d = 0; d < r; d++) {
      if (d != axis && c[d] >= data->dims[d]) {
        call->why = "ScatterElements: indices exceed the data's shape";
        return MX_ERR_KERNEL;
      }
      off += (d == axis ? k : c[d]) * dstride[d];
    }
    scatter_combine(out->data, off, upd->data, e, data->dtype, es, p->reduction);
    for (int32_t d = r - 1; d >= 0; d--) {
      if (++c[d] < ind->dims[d]) break;
      c[d] = 0;
    }
  }
  return MX_OK;
}

static const mx_kernel_def scatter_kernel = {
    .op = "Scatter", .dtypes = MX_KDT_ALL, .key = 0, .run = scatter_run};
static const mx_kernel_def scatter_elements_kernel = {
    .op = "ScatterElements", .dtypes = MX_KDT_ALL, .key = 0, .run = scatter_run};

/* --- EyeLike ---------------------------------------------------------------------------------- */

static mx_status eyelike_run(mx_kernel_call *call) {
  const mx_eyelike_params *p = call->params;
  mx_ktensor *out = mx__kout(call, 0);
  if (out->rank != 2) {
    call->why = "EyeLike: output must be 2-D";
    return MX_ERR_KERNEL;
  }
  int64_t rows = out->dims[0], cols = out->dims[1];
  mx__kzero(out->data, (size_t)(rows * cols) * mx_dtype_size(out->dtype));
  for (int64_t i = 0; i < rows; i++) {
    int64_t j = i + p->k;
    if (j >= 0 && j < cols) mx__kset_i64(out->data, out->dtype, i * cols + j, 1);
  }
  return MX_OK;
}

static const mx_kernel_def eyelike_kernel = {
    .op = "EyeLike", .dtypes = MX_KDT_ALL, .key = -1, .run = eyelike_run};

/* --- ReverseSequence -------------------------------------------------------------------------- */

static mx_status reverse_sequence_run(mx_kernel_call *call) {
  const mx_reverse_sequence_params *p = call->params;
  const mx_ktensor *in = mx__kin(call, 0), *lens = mx__kin(call, 1);
  mx_ktensor *out = mx__kout(call, 0);
  if (in->rank < 2 || out->dtype != in->dtype || mx__ktensor_numel(lens) != in->dims[p->batch_axis]) {
    call->why = "ReverseSequence: sequence_lens must have one value per batch";
    return MX_ERR_KERNEL;
  }
  int64_t nb = in->dims[p->batch_axis], nt = in->dims[p->time_axis], inner = mx__kspan(in, 2, in->rank);
  size_t es = mx_dtype_size(in->dtype), row = (size_t)inner * es;
  const unsigned char *src = in->data;
  unsigned char *dst = out->data;
  for (int64_t b = 0; b < nb; b++) {
    int64_t len = mx__kindex_at(lens, b);
    if (len < 0 || len > nt) {
      call->why = "ReverseSequence: a sequence length is out of range";
      return MX_ERR_KERNEL;
    }
    for (int64_t t = 0; t < nt; t++) {
      int64_t from = t < len ? len - 1 - t : t;
      int64_t at_to = p->time_axis == 0 ? t * nb + b : b * nt + t;
      int64_t at_from = p->time_axis == 0 ? from * nb + b : b * nt + from;
      memcpy(dst + (size_t)at_to * row, src + (size_t)at_from * row, row);
    }
  }
  return MX_OK;
}

static const mx_kernel_def reverse_sequence_kernel = {
    .op = "ReverseSequence", .dtypes = MX_KDT_ALL | MX_KDT_NARROW, .key = 0, .run = reverse_sequence_run};

/* --- TensorScatter ---------------------------------------------------------------------------- */

static mx_status tensor_scatter_run(mx_kernel_call *call) {
  const mx_tensor_scatter_params *p = call->params;
  const mx_ktensor *cache = mx__kin(call, 0), *upd = mx__kin(call, 1);
  const mx_ktensor *wi = call->n_in > 2 && mx__kin(call, 2)->data ? mx__kin(call, 2) : NULL;
  mx_ktensor *out = mx__kout(call, 0);
  int32_t r = cache->rank, axis;
  if (!mx__knorm_axis(p->axis, r, &axis) || axis == 0 || upd->rank != r || upd->dtype != cache->dtype ||
      out->dtype != cache->dtype) {
    call->why = "TensorScatter: bad axis or update";
    return MX_ERR_KERNEL;
  }
  for (int32_t d = 0; d < r; d++)
    if (d != axis && upd->dims[d] != cache->dims[d]) {
      call->why = "TensorScatter: update and past_cache differ off the sequence axis";
      return MX_ERR_KERNEL;
    }
  int64_t nb = cache->dims[0], max_len = cache->dims[axis], seq = upd->dims[axis];
  if (wi && mx__ktensor_numel(wi) != nb) {
    call->why = "TensorScatter: write_indices must have one value per batch";
    return MX_ERR_KERNEL;
  }
  size_t es = mx_dtype_size(cache->dtype);
  if (!mx__ksame(out, cache)) mx__kcopy(out->data, cache->data, (size_t)mx__ktensor_numel(cache) * es);
  int64_t prefix = mx__kspan(cache, 0, axis), per_batch = prefix / (nb ? nb : 1);
  size_t row = (size_t)mx__kspan(cache, axis + 1, r) * es;
  const unsigned char *src = upd->data;
  unsigned char *dst = out->data;
  for (int64_t q = 0; q < prefix; q++) {
    int64_t b = q / per_batch, start = wi ? mx__kindex_at(wi, b) : 0;
    for (int64_t s = 0; s < seq; s++) {
      int64_t at = start + s;
      if (p->circular) at = ((at % max_len) + max_len) % max_len;
      if (at < 0 || at >= max_len) {
        call->why = "TensorScatter: a write position is outside the cache";
        return MX_ERR_KERNEL;
      }
      memcpy(dst + (size_t)(q * max_len + at) * row, src + (size_t)(q * seq + s) * row, row);
    }
  }
  return MX_OK;
}

static const mx_kernel_def tensor_scatter_kernel = {
    .op = "TensorScatter", .dtypes = MX_KDT_ALL | MX_KDT_NARROW, .key = 0, .run = tensor_scatter_run};

/* --- the group -------------------------------------------------------------------------------- */

const mx_kernel_def *const mx__kernels_tensor[] = {
    &onehot_kernel,           &compress_kernel,         &unique_kernel,
    &scatter_kernel,          &scatter_elements_kernel, &eyelike_kernel,
    &reverse_sequence_kernel, &tensor_scatter_kernel,   NULL,
};
