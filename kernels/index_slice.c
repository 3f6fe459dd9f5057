/* CPU kernel of Slice.
 *
 * Starts, ends, axes and steps come from the params (opsets before 10) or from the int32/int64
 * input tensors; each sliced axis resolves to a first index and a step with the ONNX clamping
 * rules (the same ones inference uses), checked against the output dims. The copy itself is a
 * strided view: rows with step 1 are memcpy'd, negative and larger steps walk element by
 * element. Works for every dtype by element size. */
#include <string.h>

#include "graph/ops/index_params.h"
#include "graph/ops/slice_range.h"
#include "kernels/shape_impl.h"

/* Element k of an optional 1-D index input, or `def` when it is absent. */
static int64_t arg_at(const mx_ktensor *t, int64_t k, int64_t def) {
  return t && t->data ? mx__kindex_at(t, k) : def;
}

static mx_status slice_run(mx_kernel_call *call) {
  const mx_slice_params *p = call->params;
  const mx_ktensor *in = mx__kin(call, 0);
  mx_ktensor *out = mx__kout(call, 0);
  int32_t r = in->rank;
  const mx_ktensor *ts = NULL, *te = NULL, *ta = NULL, *tt = NULL;
  int64_t n;
  if (p->from_attrs) {
    n = p->n;
  } else {
    if (call->n_in < 3) {
      call->why = "Slice: starts and ends are missing";
      return MX_ERR_KERNEL;
    }
    ts = mx__kin(call, 1);
    te = mx__kin(call, 2);
    ta = call->n_in > 3 && mx__kin(call, 3)->data ? mx__kin(call, 3) : NULL;
    tt = call->n_in > 4 && mx__kin(call, 4)->data ? mx__kin(call, 4) : NULL;
    n = mx__ktensor_numel(ts);
    bool bad = (ts->dtype != MX_INT32 && ts->dtype != MX_INT64) || te->dtype != ts->dtype ||
               mx__ktensor_numel(te) != n || (n && (!ts->data || !te->data)) ||
               (ta && (ta->dtype != ts->dtype || mx__ktensor_numel(ta) != n)) ||
               (tt && (tt->dtype != ts->dtype || mx__ktensor_numel(tt) != n));
    if (bad) {
      call->why = "Slice: starts/ends/axes/steps disagree in dtype or length";
      return MX_ERR_KERNEL;
    }
  }
  if (n > r || out->rank != r) {
    call->why = "Slice: more slice entries than input axes";
    return MX_ERR_KERNEL;
  }

  int64_t first[MX_MAX_RANK] = {0}, step[MX_MAX_RANK], len[MX_MAX_RANK];
  for (int32_t k = 0; k < r; k++) {
    step[k] = 1;
    len[k] = in->dims[k];
  }
  uint32_t seen = 0;
  for (int64_t k = 0; k < n; k++) {
    int64_t axis = p->from_attrs ? (p->has_axes ? p->axes[k] : k) : arg_at(ta, k, k);
    int64_t s = p->from_attrs ? p->starts[k] : mx__kindex_at(ts, k);
    int64_t e = p->from_attrs ? p->ends[k] : mx__kindex_at(te, k);
    int64_t st = p->from_attrs ? 1 : arg_at(tt, k, 1);
    if (axis < 0) axis += r;
    if (axis < 0 || axis >= r || (seen & (1u << axis)) || st == 0) {
      call->why = "Slice: bad axis or zero step";
      return MX_ERR_KERNEL;
    }
    seen |= 1u << axis;
    mx__slice_range(in->dims[axis], s, e, st, &first[axis], &len[axis]);
    step[axis] = st;
  }
  int64_t strides[MX_MAX_RANK], stride = 1, base = 0;
  for (int32_t k = r - 1; k >= 0; k--) {
    if (len[k] != out->dims[k]) {
      call->why = "Slice: output dims do not match the slice";
      return MX_ERR_KERNEL;
    }
    base += first[k] * stride;
    strides[k] = step[k] * stride;
    stride *= in->dims[k];
  }
  size_t es = mx_dtype_size(in->dtype);
  if (mx__ktensor_numel(out) == 0) return MX_OK;
  mx__kcopy_strided(out->data, (const unsigned char *)in->data + (size_t)base * es, es, r, out->dims,
                    strides);
  return MX_OK;
}

const mx_kernel_def mx__kernel_slice = {
    .op = "Slice", .dtypes = MX_KDT_ALL | MX_KDT_NARROW, .key = 0, .run = slice_run};
