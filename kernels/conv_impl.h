/* Private declarations shared by the convolution and pooling kernels (kernels/conv*.c,
 * kernels/pool.c): the sliding-window geometry of one node with concrete dims.
 *
 * Every op of the family is computed over three spatial dims: 1-D and 2-D inputs get leading
 * dims of size 1 (a 1-D input of width W is [1, 1, W]), so one set of loops serves 1-D, 2-D
 * and 3-D, and the innermost loop always runs along the contiguous width. */
#ifndef MIXRT_KERNELS_CONV_IMPL_H
#define MIXRT_KERNELS_CONV_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "graph/ops/conv_params.h"
#include "kernels/kernel.h"

/* A window sliding over an image: `grid` positions (the output of a Conv or pool, the input of
 * a ConvTranspose), each reading the image at grid*s - pb + tap*d for every kernel tap. */
typedef struct mx_kwin {
  int32_t spatial;          /* spatial dims of the node (1..3) */
  int64_t img[3];           /* image size per dim (leading 1s) */
  int64_t grid[3];          /* window positions per dim */
  int64_t k[3], s[3], d[3]; /* kernel taps, stride, dilation */
  int64_t pb[3], pe[3];     /* padding before / after the image */
  int64_t img_size, grid_size, k_size;
} mx_kwin;

/* Fills a window from the node's params and concrete sizes: img and grid each hold `spatial`
 * entries, k the kernel taps. Pads follow auto_pad (SAME_* split the padding the grid needs;
 * SAME_UPPER puts the odd one at the end). false when spatial is not 1..3. */
bool mx__kwin_forward(const mx_conv_params *p, int32_t spatial, const int64_t *img, const int64_t *grid,
                      const int64_t *k, mx_kwin *w);

/* Window of a ConvTranspose whose output (the image) has `img` dims and input (the grid) `grid`
 * dims: pads from the attributes, or derived from output_shape / auto_pad as the reference
 * does. */
bool mx__kwin_transpose(const mx_conv_params *p, int32_t spatial, const int64_t *img, const int64_t *grid,
                        const int64_t *k, mx_kwin *w);

/* The float64 cores of kernels/conv.c, for the ops computed in double (ConvInteger,
 * QLinearConv, DeformConv, Col2Im in conv_misc.c). Layouts as in kernels/conv_tmpl.inc. */
void mx__kconv_im2col_f64(const double *x, int64_t channels, const mx_kwin *w, double *col);
void mx__kconv_col2im_add_f64(const double *col, int64_t channels, const mx_kwin *w, double *img);
void mx__kconv_forward_f64(const mx_kwin *w, int64_t n, int64_t c, int64_t m, int64_t group, const double *x,
                           const double *wt, const double *b, double *y, double *col);

/* A float32 Conv for the cores of kernels/conv_fast.c: y = act(conv(x, wt) + b + z), with b
 * (per output channel) and z (a residual of y's shape) optional (NULL). */
typedef struct mx_kconv_f32 {
  const mx_kwin *w;
  int64_t n, c, m, group;
  const float *x, *wt, *b, *z;
  float *y;
  int32_t act;       /* MX_CONV_ACT_* */
  float alpha, beta; /* its parameters (mx_conv_params.act_alpha / act_beta) */
  const float *pre_a; /* wt pre-packed beside the model (kernels/prepack_conv.c) in row panels of
                         pre_mr, all groups, or NULL: read when the plan cuts panels alike */
  int64_t pre_mr;
} mx_kconv_f32;

/* Scratch floats each thread of a Conv needs (the workspace holds one such slot per thread of
 * the pool, mx__kthreads()). */
size_t mx__kconv_f32_slot_floats(const mx_kwin *w, int64_t n, int64_t c, int64_t m, int64_t group,
                                 int32_t slots);
/* Row-panel height a pre-packed copy of the Conv's weights must have for the plan a run makes
 * now (the pool's threads), or 0 when that plan reads no packed weights (depthwise, the
 * matrix-vector path, no own GEMM on this CPU). */
int64_t mx__kconv_f32_pre_mr(const mx_kconv_f32 *j);
/* Runs the Conv on as many threads as the scratch has slots for (up to the pool size). false
 * when the scratch holds no slot, or the channels do not divide into groups. */
bool mx__kconv_f32_run(const mx_kconv_f32 *j, float *scratch, size_t scratch_floats);
/* y[i] = act(y[i] + z[i]) (z may be NULL), for the Conv paths outside conv_fast.c. */
void mx__kconv_epilogue_f32(float *y, const float *z, int64_t n, int32_t act, float a, float b);

/* Kernels defined in conv_misc.c, listed in conv.c's group array. */
extern const mx_kernel_def mx__kernel_conv_integer;
extern const mx_kernel_def mx__kernel_qlinear_conv;
extern const mx_kernel_def mx__kernel_deform_conv;
extern const mx_kernel_def mx__kernel_col2im;

/* Rounds a workspace byte count up to keep the next carved buffer 64-byte aligned. */
static inline size_t mx__kconv_align(size_t n) { return (n + 63) & ~(size_t)63; }

#endif /* MIXRT_KERNELS_CONV_IMPL_H */
