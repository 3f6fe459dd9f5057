/* A square 2-D float32 Conv with bias and residual run through mx__kconv_f32_run on a chosen number
 * of intra-op threads, and its double reference: the runner and oracle of the kernel tests of
 * the Conv's thread splits (test_conv_threads_bands.c, test_conv_threads_shared.c). */
#ifndef MIXRT_TESTS_KERNELS_CONV_SQUARE_SUPPORT_H
#define MIXRT_TESTS_KERNELS_CONV_SQUARE_SUPPORT_H

#include <stdbool.h>
#include <stdint.h>

/* batch, channels in, map (h x h), channels out, kernel (k x k), stride, pad (all four sides);
 * optionally the map's width when it is not h (w) and the dilation when it is not 1 (d). */
typedef struct cs_case {
  int64_t n, c, h, m, k, s, pad, w, d;
} cs_case;

/* The input map's width (w, or h when w is 0), output rows (cs_out_size) and columns
 * (cs_out_width). */
int64_t cs_in_width(const cs_case *t);
int64_t cs_out_size(const cs_case *t);
int64_t cs_out_width(const cs_case *t);

/* y = the Conv with activation `act` (MX_CONV_ACT_*) through mx__kconv_f32_run with a workspace of
 * `threads` slots (`tight`: one slot only, no room for a shared block); every output is checked
 * written (y starts as NaN). Leaves the pool at 1 thread. */
void cs_run(const cs_case *t, int32_t threads, bool tight, int32_t act, const float *x, const float *w,
            const float *b, const float *z, float *y);

/* Output (in, m, i, jj) in double, with bias, residual and `act` (Relu or Sigmoid). */
double cs_reference_at(const cs_case *t, int32_t act, const float *x, const float *w, const float *b,
                       const float *z, int64_t in, int64_t m, int64_t i, int64_t jj);

#endif
