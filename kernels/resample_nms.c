/* CPU kernel of NonMaxSuppression (opsets 10-11).
 *
 * Per batch and class: the boxes scoring above score_threshold (all of them when it is not
 * given) are sorted by score, highest first and equal scores by box index, and taken greedily
 * unless their IoU with an already kept box of the class exceeds iou_threshold, up to
 * max_output_boxes_per_class (0 or absent: none). Box arithmetic runs in float32 as the ONNX
 * definition does for float32 boxes (so thresholds at the boundary decide the same way). The
 * output buffer holds the upper bound [batches * classes * boxes, 3]; the kernel writes the
 * rows it selected and sets the output's actual dims. */
#include <stdlib.h>
#include <string.h>

#include "graph/ops/resample_params.h"
#include "kernels/kutil.h"

typedef struct nms_cand {
  float score;
  int64_t index;
} nms_cand;

/* Highest score first; equal scores by ascending box index. */
static int nms_cmp(const void *pa, const void *pb) {
  const nms_cand *a = pa, *b = pb;
  if (a->score != b->score) return a->score > b->score ? -1 : 1;
  return (a->index > b->index) - (a->index < b->index);
}

/* The box as [x_min, y_min, x_max, y_max]. */
static void nms_corners(const float *v, bool center, float *c) {
  if (center) {
    float hw = v[2] / 2.0f, hh = v[3] / 2.0f;
    c[0] = v[0] - hw;
    c[2] = v[0] + hw;
    c[1] = v[1] - hh;
    c[3] = v[1] + hh;
    return;
  }
  /* [y1, x1, y2, x2], either corner order. */
  c[0] = v[1] < v[3] ? v[1] : v[3];
  c[2] = v[1] < v[3] ? v[3] : v[1];
  c[1] = v[0] < v[2] ? v[0] : v[2];
  c[3] = v[0] < v[2] ? v[2] : v[0];
}

/* True when box a suppresses box b: their IoU exceeds the threshold. */
static bool nms_suppress(const float *a, const float *b, float iou_threshold) {
  float ix0 = a[0] > b[0] ? a[0] : b[0], ix1 = a[2] < b[2] ? a[2] : b[2];
  if (ix1 <= ix0) return false;
  float iy0 = a[1] > b[1] ? a[1] : b[1], iy1 = a[3] < b[3] ? a[3] : b[3];
  if (iy1 <= iy0) return false;
  float inter = (ix1 - ix0) * (iy1 - iy0);
  float area_a = (a[2] - a[0]) * (a[3] - a[1]), area_b = (b[2] - b[0]) * (b[3] - b[1]);
  float uni = area_a + area_b - inter;
  if (inter <= 0.0f || area_a <= 0.0f || area_b <= 0.0f || uni <= 0.0f) return false;
  return inter / uni > iou_threshold;
}

static size_t nms_workspace(const mx_kernel_call *call) {
  const mx_ktensor *boxes = &call->t[0];
  int64_t n = boxes->rank == 3 ? boxes->dims[1] : 0;
  /* Candidates, kept indices and every box's corners. */
  return (size_t)n * (sizeof(nms_cand) + sizeof(int64_t) + 4 * sizeof(float)) + 64;
}

/* The first element of optional input i as double, or def when absent or empty. */
static double nms_scalar(const mx_kernel_call *call, uint32_t i, double def) {
  if (i >= call->n_in || !call->t[i].data || mx__ktensor_numel(&call->t[i]) < 1) return def;
  return mx__kget_f64(call->t[i].data, call->t[i].dtype, 0);
}

static mx_status nms_run(mx_kernel_call *call) {
  const mx_nms_params *p = call->params;
  const mx_ktensor *boxes = mx__kin(call, 0), *scores = mx__kin(call, 1);
  mx_ktensor *out = mx__kout(call, 0);
  if (boxes->rank != 3 || boxes->dims[2] != 4 || scores->rank != 3 || scores->dims[0] != boxes->dims[0] ||
      scores->dims[2] != boxes->dims[1] || out->dtype != MX_INT64 || out->rank != 2 || out->dims[1] != 3) {
    call->why = "NonMaxSuppression: boxes must be [B, N, 4] and scores [B, C, N]";
    return MX_ERR_KERNEL;
  }
  int64_t nb = boxes->dims[0], nc = scores->dims[1], n = boxes->dims[1];
  if (call->workspace_size < nms_workspace(call)) {
    call->why = "NonMaxSuppression: workspace too small";
    return MX_ERR_KERNEL;
  }
  int64_t max_out = 0;
  if (call->n_in > 2 && call->t[2].data && mx__ktensor_numel(&call->t[2]) >= 1)
    max_out = mx__kget_i64(call->t[2].data, call->t[2].dtype, 0);
  if (max_out < 0) max_out = 0;
  float iou = (float)nms_scalar(call, 3, 0.0);
  bool has_score_thr = call->n_in > 4 && call->t[4].data && mx__ktensor_numel(&call->t[4]) >= 1;
  float score_thr = (float)nms_scalar(call, 4, 0.0);
  nms_cand *cand = call->workspace;
  int64_t *kept = (int64_t *)(cand + n);
  float *corners = (float *)(kept + n);
  int64_t *o = out->data, rows = 0, cap = out->dims[0];
  for (int64_t b = 0; b < nb; b++) {
    for (int64_t i = 0; i < n; i++) {
      float v[4];
      for (int32_t k = 0; k < 4; k++)
        v[k] = (float)mx__kget_f64(boxes->data, boxes->dtype, (b * n + i) * 4 + k);
      nms_corners(v, p->center_point_box != 0, corners + i * 4);
    }
    for (int64_t c = 0; c < nc; c++) {
      int64_t m = 0;
      for (int64_t i = 0; i < n; i++) {
        float s = (float)mx__kget_f64(scores->data, scores->dtype, (b * nc + c) * n + i);
        if (has_score_thr && !(s > score_thr)) continue;
        cand[m].score = s;
        cand[m].index = i;
        m++;
      }
      qsort(cand, (size_t)m, sizeof *cand, nms_cmp);
      int64_t nk = 0;
      for (int64_t j = 0; j < m && nk < max_out; j++) {
        const float *box = corners + cand[j].index * 4;
        bool keep = true;
        for (int64_t q = 0; q < nk && keep; q++) keep = !nms_suppress(box, corners + kept[q] * 4, iou);
        if (!keep) continue;
        kept[nk++] = cand[j].index;
        if (rows >= cap) {
          call->why = "NonMaxSuppression: output buffer is smaller than the selection";
          return MX_ERR_KERNEL;
        }
        o[rows * 3 + 0] = b;
        o[rows * 3 + 1] = c;
        o[rows * 3 + 2] = cand[j].index;
        rows++;
      }
    }
  }
  mx__ktensor_set_dims(out, 2, (int64_t[]){rows, 3});
  return MX_OK;
}

const mx_kernel_def mx__kernel_nms = {
    .op = "NonMaxSuppression", .dtypes = MX_KDT_FLOATS, .key = 0, .run = nms_run, .workspace = nms_workspace};
