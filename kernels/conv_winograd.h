/* The Winograd F(4x4, 3x3) core of the float32 Conv (kernels/conv_winograd.c): 2-D, 3x3 taps,
 * stride 1, dilation 1, one group, any pads. Each 6x6 input tile is transformed once, the 36
 * transform points become 36 products (output channels x input channels) x (input channels x
 * tiles) through the own packed GEMM (kernels/gemm_f32.h), and the output transform writes the
 * 4x4 outputs of a tile with the bias, residual and activation fused. 36 multiplies per 16
 * outputs and input channel instead of 144: a quarter of the direct Conv's.
 *
 * The weights' transform (36 x M x C floats) is made once at load (a pre-packed block, layout
 * MX_KPREPACK_CONV_WINO, kernels/prepack_conv.c) or, without one, into the workspace per run.
 * Every output's arithmetic is fixed by its tile, never by the split among threads, so any
 * thread count gives the same bits. */
#ifndef MIXRT_KERNELS_CONV_WINOGRAD_H
#define MIXRT_KERNELS_CONV_WINOGRAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/conv_impl.h"
#include "kernels/kernel.h"

/* Transform points of a tile (6 x 6). */
#define MX_KWINO_POINTS 36

/* Whether the core can run this Conv (shape, one group, an own GEMM copy on this CPU). */
bool mx__kconv_wino_applies(const mx_kwin *w, int64_t c, int64_t m, int64_t group);
/* Whether a Conv of this shape takes the core: it applies, MIXRT_WINOGRAD is not 0 in the
 * environment, and the shape is one where it measured faster than im2col + GEMM. Depends on
 * the shape only (never on the thread count), so a pre-packed block and a run agree. */
bool mx__kconv_wino_chosen(const mx_kwin *w, int64_t n, int64_t c, int64_t m, int64_t group);

/* Workspace floats a run needs on up to `slots` threads (the weights' transform included), 0
 * when the core does not apply (whether or not it is chosen). */
size_t mx__kconv_wino_ws_floats(const mx_kwin *w, int64_t n, int64_t c, int64_t m, int64_t group,
                                int32_t slots);

/* Floats of the transformed weights of an M x C x 3 x 3 Conv. */
static inline size_t mx__kconv_wino_u_floats(int64_t m, int64_t c) {
  return (size_t)MX_KWINO_POINTS * (size_t)m * (size_t)c;
}
/* Output channels [m0, m1) of wt (M x C x 3 x 3) transformed into u: point p's M x C matrix
 * (row-major) at u + p * M * C. */
void mx__kconv_wino_transform_weights(const float *wt, int64_t m, int64_t c, int64_t m0, int64_t m1, float *u);

/* Row-panel height of the transformed weights the products read (the GEMM's register tile). */
int64_t mx__kconv_wino_mr(void);
/* Floats of the transformed weights in those panels (a pre-packed block's data). */
size_t mx__kconv_wino_packed_floats(int64_t m, int64_t c);
/* Rows [r0, r0 + rows) (r0 a multiple of mr) of the plain transform u (as above) packed into up
 * in row panels of mr, point after point. */
void mx__kconv_wino_pack_weights(const float *u, int64_t m, int64_t c, int64_t mr, int64_t r0, int64_t rows,
                                 float *up);

/* Runs the Conv (j->group 1); u_pre: its weights transformed ahead and packed
 * (mx__kconv_wino_pack_weights with mx__kconv_wino_mr(); NULL: done into the scratch). false when the scratch holds too little (the caller takes another path). */
bool mx__kconv_wino_run(const mx_kconv_f32 *j, const float *u_pre, float *scratch, size_t scratch_floats);

/* The transformed weights a pre-packed block of call holds for input 1 (data wt), or NULL. */
const float *mx__kconv_wino_prepacked(const mx_kernel_call *call, const float *wt);

#endif /* MIXRT_KERNELS_CONV_WINOGRAD_H */
