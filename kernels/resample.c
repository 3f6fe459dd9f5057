/* CPU kernels of Pad, CenterCropPad, DepthToSpace and SpaceToDepth, and the group's array
 * (Resize and Upsample are in resample_resize.c, GridSample, AffineGrid and RoiAlign in
 * resample_grid.c, NonMaxSuppression in resample_nms.c).
 *
 * Pad and CenterCropPad share one routine: every output axis gets a table mapping each output
 * index to an input index (or -1 for the constant), built once per call in the workspace, and
 * rows are then filled with one memcpy for the part that lies inside the input. Negative pads
 * crop. DepthToSpace and SpaceToDepth are a 6-D strided copy. All four only move elements, so
 * they take every dtype, the one-byte narrow ones (float8, int4, ...) included. */
#include <string.h>

#include "graph/ops/resample_params.h"
#include "kernels/groups.h"
#include "kernels/kutil.h"
#include "kernels/shape_impl.h"

extern const mx_kernel_def mx__kernel_resize, mx__kernel_upsample;
extern const mx_kernel_def mx__kernel_grid_sample, mx__kernel_affine_grid, mx__kernel_roi_align;
extern const mx_kernel_def mx__kernel_nms;

/* --- the padding core ------------------------------------------------------------------------- */

/* Input index read by output index o of an axis of n input elements padded by `begin` in
 * front, or -1 for the constant. */
static int64_t pad_source(int64_t o, int64_t begin, int64_t n, int32_t mode) {
  int64_t j = o - begin;
  if (j >= 0 && j < n) return j;
  switch (mode) {
    case MX_PAD_EDGE: return j < 0 ? 0 : n - 1;
    case MX_PAD_WRAP: {
      int64_t m = j % n;
      return m < 0 ? m + n : m;
    }
    case MX_PAD_REFLECT: {
      if (n == 1) return 0;
      int64_t period = 2 * (n - 1), m = j % period;
      if (m < 0) m += period;
      return m >= n ? period - m : m;
    }
    default: return -1;
  }
}

/* Workspace of the padding core: one int64 per output index of every axis. */
static size_t pad_core_workspace(const mx_kernel_call *call) {
  const mx_ktensor *out = &call->t[call->n_in];
  size_t n = 0;
  for (int32_t d = 0; d < out->rank; d++) n += (size_t)out->dims[d];
  return (n + 1) * sizeof(int64_t);
}

/* Fills out from in padded by begin[d] in front of every axis (the end pads follow from the
 * output dims), with mode and the constant element cval (es bytes). */
static mx_status pad_core(mx_kernel_call *call, const mx_ktensor *in, mx_ktensor *out, const int64_t *begin,
                          int32_t mode, const unsigned char *cval) {
  int32_t r = in->rank;
  size_t es = mx_dtype_size(in->dtype);
  if (call->workspace_size < pad_core_workspace(call)) {
    call->why = "Pad: workspace too small";
    return MX_ERR_KERNEL;
  }
  int64_t total = mx__ktensor_numel(out);
  if (total == 0) return MX_OK;
  if (mode != MX_PAD_CONSTANT && mx__ktensor_numel(in) == 0) {
    call->why = "Pad: reflect, edge and wrap cannot pad an empty input";
    return MX_ERR_KERNEL;
  }
  if (r == 0) {
    memcpy(out->data, in->data, es);
    return MX_OK;
  }
  /* Index tables, one per axis. */
  int64_t *maps[MX_MAX_RANK], *next = call->workspace;
  for (int32_t d = 0; d < r; d++) {
    maps[d] = next;
    for (int64_t o = 0; o < out->dims[d]; o++) next[o] = pad_source(o, begin[d], in->dims[d], mode);
    next += out->dims[d];
  }
  int64_t istride[MX_MAX_RANK], s = 1;
  for (int32_t d = r - 1; d >= 0; d--) {
    istride[d] = s;
    s *= in->dims[d];
  }
  int64_t cols = out->dims[r - 1], rows = total / cols;
  /* The run of the last axis that copies input elements in order. */
  int64_t lo = begin[r - 1] > 0 ? begin[r - 1] : 0, hi = begin[r - 1] + in->dims[r - 1];
  if (hi > cols) hi = cols;
  if (hi < lo) hi = lo;
  const int64_t *last = maps[r - 1];
  const unsigned char *src = in->data;
  unsigned char *dst = out->data;
  int64_t coord[MX_MAX_RANK] = {0};
  for (int64_t row = 0; row < rows; row++, dst += (size_t)cols * es) {
    int64_t base = 0;
    bool inside = true;
    for (int32_t d = 0; d < r - 1; d++) {
      int64_t m = maps[d][coord[d]];
      if (m < 0) inside = false;
      base += m * istride[d];
    }
    if (!inside) {
      for (int64_t c = 0; c < cols; c++) memcpy(dst + (size_t)c * es, cval, es);
    } else {
      const unsigned char *srow = src + (size_t)base * es;
      for (int64_t c = 0; c < lo; c++)
        memcpy(dst + (size_t)c * es, last[c] < 0 ? cval : srow + (size_t)last[c] * es, es);
      if (hi > lo)
        memcpy(dst + (size_t)lo * es, srow + (size_t)(lo - begin[r - 1]) * es, (size_t)(hi - lo) * es);
      for (int64_t c = hi; c < cols; c++)
        memcpy(dst + (size_t)c * es, last[c] < 0 ? cval : srow + (size_t)last[c] * es, es);
    }
    for (int32_t d = r - 2; d >= 0; d--) {
      if (++coord[d] < out->dims[d]) break;
      coord[d] = 0;
    }
  }
  return MX_OK;
}

/* --- Pad -------------------------------------------------------------------------------------- */

static mx_status pad_run(mx_kernel_call *call) {
  const mx_pad_params *p = call->params;
  const mx_ktensor *in = mx__kin(call, 0);
  mx_ktensor *out = mx__kout(call, 0);
  int32_t r = in->rank;
  size_t es = mx_dtype_size(in->dtype);
  int64_t pads[2 * MX_MAX_RANK];
  int32_t axes[MX_MAX_RANK], na = r;
  for (int32_t d = 0; d < r; d++) axes[d] = d;
  int64_t np;
  if (p->from_attrs) {
    np = p->n_pads;
    memcpy(pads, p->pads, sizeof pads);
  } else {
    const mx_ktensor *tp = mx__kin(call, 1);
    np = mx__ktensor_numel(tp);
    if (tp->dtype != MX_INT64 || np > 2 * MX_MAX_RANK) {
      call->why = "Pad: pads must be int64 with two values per axis";
      return MX_ERR_KERNEL;
    }
    for (int64_t k = 0; k < np; k++) pads[k] = ((const int64_t *)tp->data)[k];
    if (call->n_in > 3 && mx__kin(call, 3)->data) {
      const mx_ktensor *ta = mx__kin(call, 3);
      int64_t n = mx__ktensor_numel(ta);
      if (n > r || (ta->dtype != MX_INT64 && ta->dtype != MX_INT32)) {
        call->why = "Pad: bad axes";
        return MX_ERR_KERNEL;
      }
      for (int64_t k = 0; k < n; k++)
        if (!mx__knorm_axis(mx__kindex_at(ta, k), r, &axes[k])) {
          call->why = "Pad: an axis is out of range";
          return MX_ERR_KERNEL;
        }
      na = (int32_t)n;
    }
  }
  if (np != 2 * na) {
    call->why = "Pad: pads must have two values per padded axis";
    return MX_ERR_KERNEL;
  }
  int64_t begin[MX_MAX_RANK] = {0}, end[MX_MAX_RANK] = {0};
  for (int32_t k = 0; k < na; k++) {
    begin[axes[k]] = pads[k];
    end[axes[k]] = pads[k + na];
  }
  if (out->rank != r || out->dtype != in->dtype) {
    call->why = "Pad: output must have the input's rank and dtype";
    return MX_ERR_KERNEL;
  }
  for (int32_t d = 0; d < r; d++)
    if (out->dims[d] != in->dims[d] + begin[d] + end[d]) {
      call->why = "Pad: output dims do not match the pads";
      return MX_ERR_KERNEL;
    }
  unsigned char cval[16] = {0};
  if (p->from_attrs) {
    mx__kset_f64(cval, in->dtype, 0, p->value);
  } else if (call->n_in > 2 && mx__kin(call, 2)->data && mx__ktensor_numel(mx__kin(call, 2)) >= 1) {
    if (mx__kin(call, 2)->dtype != in->dtype) {
      call->why = "Pad: constant_value must have the input's dtype";
      return MX_ERR_KERNEL;
    }
    memcpy(cval, mx__kin(call, 2)->data, es);
  }
  return pad_core(call, in, out, begin, p->mode, cval);
}

static const mx_kernel_def pad_kernel = {.op = "Pad",
                                         .dtypes = MX_KDT_ALL | MX_KDT_NARROW,
                                         .key = 0,
                                         .run = pad_run,
                                         .workspace = pad_core_workspace};

/* --- CenterCropPad ---------------------------------------------------------------------------- */

static mx_status center_crop_pad_run(mx_kernel_call *call) {
  const mx_center_crop_pad_params *p = call->params;
  const mx_ktensor *in = mx__kin(call, 0), *shape = mx__kin(call, 1);
  mx_ktensor *out = mx__kout(call, 0);
  int32_t r = in->rank, axes[MX_MAX_RANK], na = p->n_axes ? p->n_axes : r;
  for (int32_t k = 0; k < na; k++)
    if (!mx__knorm_axis(p->n_axes ? p->axes[k] : k, r, &axes[k])) {
      call->why = "CenterCropPad: an axis is out of range";
      return MX_ERR_KERNEL;
    }
  if (mx__ktensor_numel(shape) != na || out->rank != r) {
    call->why = "CenterCropPad: shape must have one value per axis";
    return MX_ERR_KERNEL;
  }
  int64_t begin[MX_MAX_RANK] = {0}, want[MX_MAX_RANK];
  for (int32_t d = 0; d < r; d++) want[d] = in->dims[d];
  for (int32_t k = 0; k < na; k++) {
    int64_t n = in->dims[axes[k]], t = mx__kindex_at(shape, k);
    want[axes[k]] = t;
    /* Crop and pad both put floor(difference / 2) before the data. */
    begin[axes[k]] = t < n ? -((n - t) / 2) : (t - n) / 2;
  }
  for (int32_t d = 0; d < r; d++)
    if (out->dims[d] != want[d]) {
      call->why = "CenterCropPad: output dims do not match shape";
      return MX_ERR_KERNEL;
    }
  unsigned char zero[16] = {0};
  return pad_core(call, in, out, begin, MX_PAD_CONSTANT, zero);
}

static const mx_kernel_def center_crop_pad_kernel = {.op = "CenterCropPad",
                                                     .dtypes = MX_KDT_ALL | MX_KDT_NARROW,
                                                     .key = 0,
                                                     .run = center_crop_pad_run,
                                                     .workspace = pad_core_workspace};

/* --- DepthToSpace / SpaceToDepth -------------------------------------------------------------- */

static mx_status depth_space_run(mx_kernel_call *call, bool to_space) {
  const mx_depth_space_params *p = call->params;
  const mx_ktensor *in = mx__kin(call, 0);
  mx_ktensor *out = mx__kout(call, 0);
  if (in->rank != 4 || out->rank != 4 || out->dtype != in->dtype ||
      mx__ktensor_numel(in) != mx__ktensor_numel(out)) {
    call->why = "DepthToSpace/SpaceToDepth: input and output must be 4-D of the same size";
    return MX_ERR_KERNEL;
  }
  int64_t b = p->blocksize, n = in->dims[0], c = in->dims[1], h = in->dims[2], w = in->dims[3];
  int64_t sn = c * h * w, sc = h * w, sh = w;
  int64_t dims[6], strides[6];
  if (to_space) {
    if (c % (b * b) != 0) {
      call->why = "DepthToSpace: blocksize*blocksize does not divide the channels";
      return MX_ERR_KERNEL;
    }
    int64_t co = c / (b * b);
    /* Output viewed as [N, C/(b*b), H, b, W, b]. */
    int64_t d6[6] = {n, co, h, b, w, b};
    int64_t dcr[6] = {sn, sc, sh, b * co * sc, 1, co * sc};
    int64_t crd[6] = {sn, b * b * sc, sh, b * sc, 1, sc};
    memcpy(dims, d6, sizeof dims);
    memcpy(strides, p->crd ? crd : dcr, sizeof strides);
  } else {
    if (h % b != 0 || w % b != 0) {
      call->why = "SpaceToDepth: blocksize does not divide height and width";
      return MX_ERR_KERNEL;
    }
    /* Output viewed as [N, b, b, C, H/b, W/b]. */
    int64_t d6[6] = {n, b, b, c, h / b, w / b};
    int64_t s6[6] = {sn, sh, 1, sc, b * sh, b};
    memcpy(dims, d6, sizeof dims);
    memcpy(strides, s6, sizeof strides);
  }
  mx__kcopy_strided(out->data, in->data, mx_dtype_size(in->dtype), 6, dims, strides);
  return MX_OK;
}

static mx_status depth_to_space_run(mx_kernel_call *call) { return depth_space_run(call, true); }
static mx_status space_to_depth_run(mx_kernel_call *call) { return depth_space_run(call, false); }

static const mx_kernel_def depth_to_space_kernel = {
    .op = "DepthToSpace", .dtypes = MX_KDT_ALL | MX_KDT_NARROW, .key = 0, .run = depth_to_space_run};
static const mx_kernel_def space_to_depth_kernel = {
    .op = "SpaceToDepth", .dtypes = MX_KDT_ALL | MX_KDT_NARROW, .key = 0, .run = space_to_depth_run};

/* --- the group -------------------------------------------------------------------------------- */

const mx_kernel_def *const mx__kernels_resample[] = {
    &pad_kernel,
    &center_crop_pad_kernel,
    &depth_to_space_kernel,
    &space_to_depth_kernel,
    &mx__kernel_resize,
    &mx__kernel_upsample,
    &mx__kernel_grid_sample,
    &mx__kernel_affine_grid,
    &mx__kernel_roi_align,
    &mx__kernel_nms,
    NULL,
};
