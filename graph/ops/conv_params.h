/* Params struct of the convolution and pooling ops (Conv, ConvTranspose, ConvInteger,
 * QLinearConv, DeformConv, Col2Im, MaxPool, AveragePool, LpPool, the Global*Pool ops and
 * MaxUnpool), as their CPU kernels read it, plus the spatial-geometry helpers their op
 * definitions share (graph/ops/conv.c implements them, graph/ops/pool.c uses them too).
 *
 * One struct serves the whole family: every op has the same window attributes (kernel_shape,
 * strides, dilations, pads, auto_pad) and only a few flags of its own. Lists the node did not
 * give stay zero-length (n_* == 0); the kernels then use the defaults (stride 1, dilation 1,
 * pad 0, kernel size from the weights). Plain old data without pointers: .mxm files store it
 * byte for byte. */
#ifndef MIXRT_GRAPH_OPS_CONV_PARAMS_H
#define MIXRT_GRAPH_OPS_CONV_PARAMS_H

#include <stdint.h>

#include "mixrt/shape.h"
#include "mixrt/status.h"

/* Spatial dims the family's attributes can describe (an input has rank 2 + spatial). */
#define MX_CONV_MAX_SPATIAL 6

/* auto_pad values. */
enum {
  MX_AUTO_PAD_NOTSET = 0, /* explicit pads (or none) */
  MX_AUTO_PAD_SAME_UPPER = 1,
  MX_AUTO_PAD_SAME_LOWER = 2,
  MX_AUTO_PAD_VALID = 3
};

/* Which op of the family a params struct belongs to (inference and kernels branch on it). */
enum {
  MX_CONVOP_CONV = 0,
  MX_CONVOP_CONV_TRANSPOSE,
  MX_CONVOP_CONV_INTEGER,
  MX_CONVOP_QLINEAR_CONV,
  MX_CONVOP_DEFORM_CONV,
  MX_CONVOP_COL2IM,
  MX_CONVOP_MAX_POOL,
  MX_CONVOP_AVERAGE_POOL,
  MX_CONVOP_LP_POOL,
  MX_CONVOP_GLOBAL_AVERAGE_POOL,
  MX_CONVOP_GLOBAL_MAX_POOL,
  MX_CONVOP_GLOBAL_LP_POOL,
  MX_CONVOP_MAX_UNPOOL
};

typedef struct mx_conv_params {
  int32_t op;                /* MX_CONVOP_* */
  int32_t auto_pad;          /* MX_AUTO_PAD_* */
  int64_t group;             /* Conv family: channel groups (>= 1) */
  int64_t offset_group;      /* DeformConv: offset groups (>= 1) */
  int32_t ceil_mode;         /* pools: round the output size up */
  int32_t count_include_pad; /* AveragePool: padding counts in the divisor */
  int32_t storage_order;     /* MaxPool: 1 = Indices in column-major spatial order */
  float p;                   /* LpPool / GlobalLpPool exponent */
  int32_t n_kernel;          /* entries of kernel_shape (0: from the weights) */
  int32_t n_strides;         /* 0: all 1 */
  int32_t n_dilations;       /* 0: all 1 */
  int32_t n_pads;            /* 0: all 0; else 2 * spatial (begins, then ends) */
  int32_t n_output_padding;  /* ConvTranspose: 0: all 0 */
  int32_t n_output_shape;    /* ConvTranspose: 0: computed from the pads */
  int64_t kernel_shape[MX_CONV_MAX_SPATIAL];
  int64_t strides[MX_CONV_MAX_SPATIAL];
  int64_t dilations[MX_CONV_MAX_SPATIAL];
  int64_t pads[2 * MX_CONV_MAX_SPATIAL];
  int64_t output_padding[MX_CONV_MAX_SPATIAL];
  int64_t output_shape[MX_CONV_MAX_SPATIAL + 2]; /* spatial only, or N, C and spatial */
  /* Conv only: an activation the kernel applies to Y (MX_CONV_ACT_*), set by the fusion pass
   * through the mixrt-internal attributes mixrt_activation / _alpha / _beta. */
  int32_t fused_act;
  float act_alpha;      /* Clip: min; HardSigmoid: alpha */
  float act_beta;       /* Clip: max; HardSigmoid: beta */
  int32_t act_reserved; /* 0: keeps the struct free of padding */
} mx_conv_params;

/* Activations a Conv kernel applies to its output (mx_conv_params.fused_act). */
enum {
  MX_CONV_ACT_NONE = 0,
  MX_CONV_ACT_RELU,
  MX_CONV_ACT_CLIP,
  MX_CONV_ACT_HARD_SIGMOID,
  MX_CONV_ACT_HARD_SWISH,
  MX_CONV_ACT_SIGMOID,
  MX_CONV_ACT_SILU
};

/* --- shared by the op definitions (graph/ops/conv.c) ------------------------------------------ */

struct mx_parse_ctx;
struct mx_infer_ctx;
struct mx_op_def;

/* Parses the window attributes every op of the family may carry (kernel_shape, strides,
 * dilations, pads, auto_pad, ceil_mode, ...; those the op's schema lacks read as absent) and
 * checks their values and lengths against each other. op is MX_CONVOP_*. */
MX_MUST_USE mx_status mx__conv_parse_window(const struct mx_parse_ctx *pc, mx_conv_params *p, int32_t op);

/* Checks the window attribute lengths against `spatial` dims of an input and fails naming the
 * attribute when they disagree. */
MX_MUST_USE mx_status mx__conv_check_spatial(struct mx_infer_ctx *ctx, const mx_conv_params *p,
                                             int32_t spatial);

/* Output size of spatial dim i of a forward window (Conv, pools) over input size `in` with
 * kernel size k, as a possibly symbolic expression of in: floor (or ceil for ceil_mode) of
 * (in + pads - dilation*(k-1) - 1)/stride + 1, or ceil(in/stride) for SAME_*, or the VALID
 * form. */
mx_dim mx__conv_out_dim(struct mx_infer_ctx *ctx, const mx_conv_params *p, int32_t i, mx_dim in, mx_dim k);

#endif /* MIXRT_GRAPH_OPS_CONV_PARAMS_H */
