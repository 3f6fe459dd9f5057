/* Params structs of the linear-algebra ops: what the fusion pass folded into a MatMul
 * (transposed operands, a bias, an activation), Gemm's scalars and transposes, and Einsum's
 * equation, parsed once into label lists the CPU kernel reads directly.
 *
 * Plain old data without pointers: .mxm files store these structs byte for byte. */
#ifndef MIXRT_GRAPH_OPS_LINALG_PARAMS_H
#define MIXRT_GRAPH_OPS_LINALG_PARAMS_H

#include <stdint.h>

/* MatMul: all zero for an ONNX MatMul. The fusion pass (graph/passes/fuse_matmul.c) sets them
 * through the mixrt-internal attributes mixrt_trans_a / mixrt_trans_b (an operand's last two
 * axes are read transposed), mixrt_bias (a third input, a vector along the last axis of Y, is
 * added to the product) and mixrt_activation (applied last, MX_MATMUL_ACT_*). */
typedef struct mx_matmul_params {
  int32_t trans_a;   /* 1: A's last two axes swapped */
  int32_t trans_b;   /* 1: B's last two axes swapped */
  int32_t has_bias;  /* 1: input 2 is added along Y's last axis */
  int32_t fused_act; /* MX_MATMUL_ACT_* */
} mx_matmul_params;

/* Activations a MatMul kernel applies to its output (mx_matmul_params.fused_act). */
enum {
  MX_MATMUL_ACT_NONE = 0,
  MX_MATMUL_ACT_RELU,
  MX_MATMUL_ACT_GELU,      /* 0.5 x (1 + erf(x / sqrt 2)) */
  MX_MATMUL_ACT_GELU_TANH, /* Gelu with approximate = "tanh" */
  MX_MATMUL_ACT_SILU,      /* x * sigmoid(x) */
  MX_MATMUL_ACT_SIGMOID,
  MX_MATMUL_ACT_TANH
};

typedef struct mx_gemm_params {
  float alpha;     /* scale of op(A) * op(B) */
  float beta;      /* scale of C */
  int32_t trans_a; /* 1: use A^T */
  int32_t trans_b; /* 1: use B^T */
  /* An activation the kernel applies last (MX_MATMUL_ACT_*), set by the fusion pass through the
   * mixrt-internal attribute mixrt_activation; 0 for an ONNX Gemm. */
  int32_t fused_act;
  int32_t act_reserved; /* 0: keeps the struct free of padding */
} mx_gemm_params;

/* Einsum limits: operands, labels per term (an ellipsis counts as one entry), equation text. */
#define MX_EINSUM_MAX_OPERANDS 8
#define MX_EINSUM_MAX_TERM     16
#define MX_EINSUM_MAX_EQUATION 256
/* Label code of "..." inside a term; letters are stored as their ASCII codes. */
#define MX_EINSUM_ELLIPSIS 127

typedef struct mx_einsum_params {
  int32_t n_operands;                                       /* terms left of "->" */
  int32_t term_len[MX_EINSUM_MAX_OPERANDS];                 /* entries of each input term */
  int8_t terms[MX_EINSUM_MAX_OPERANDS][MX_EINSUM_MAX_TERM]; /* label codes per input term */
  int32_t out_len;                                          /* entries of the output term */
  int8_t out[MX_EINSUM_MAX_TERM + 1];                       /* output label codes (explicit, or
                                                               derived for implicit mode) */
  int8_t out_has_ellipsis;                                  /* the output keeps the "..." dims */
  char equation[MX_EINSUM_MAX_EQUATION];                    /* the attribute, for messages */
} mx_einsum_params;

#endif /* MIXRT_GRAPH_OPS_LINALG_PARAMS_H */
