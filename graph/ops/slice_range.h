/* Slice's index rule, in one place for the two sides that must agree on it: shape inference
 * (graph/ops/index_slice.c, on concrete dims) and the CPU kernel (kernels/index_slice.c,
 * which checks the output dims against it).
 *
 * ONNX semantics: negative starts and ends count from the end; with a positive step both clamp
 * to [0, d], with a negative step the start clamps to [0, d - 1] and the end to [-1, d - 1]
 * (so a slice can run down to index 0). INT64_MIN as a step walks as INT64_MAX would. */
#ifndef MIXRT_GRAPH_OPS_SLICE_RANGE_H
#define MIXRT_GRAPH_OPS_SLICE_RANGE_H

#include <stdint.h>

/* The first index and the length of the slice start:end:step (step != 0) of an axis of size d. */
static inline void mx__slice_range(int64_t d, int64_t s, int64_t e, int64_t step, int64_t *first,
                                   int64_t *len) {
  if (s < 0) s += d;
  if (e < 0) e += d;
  if (step > 0) {
    s = s < 0 ? 0 : s > d ? d : s;
    e = e < 0 ? 0 : e > d ? d : e;
    *first = s;
    *len = e > s ? (e - s - 1) / step + 1 : 0;
    return;
  }
  int64_t mag = step == INT64_MIN ? INT64_MAX : -step;
  if (d == 0) {
    *first = 0;
    *len = 0;
    return;
  }
  s = s < 0 ? 0 : s > d - 1 ? d - 1 : s;
  e = e < -1 ? -1 : e > d - 1 ? d - 1 : e;
  *first = s;
  *len = s > e ? (s - e - 1) / mag + 1 : 0;
}

#endif /* MIXRT_GRAPH_OPS_SLICE_RANGE_H */
