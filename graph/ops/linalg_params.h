/* Params structs of the linear-algebra ops (MatMul has none): Gemm's scalars and transposes,
 * and Einsum's equation, parsed once into label lists the CPU kernel reads directly.
 *
 * Plain old data without pointers: .mxm files store these structs byte for byte. */
#ifndef MIXRT_GRAPH_OPS_LINALG_PARAMS_H
#define MIXRT_GRAPH_OPS_LINALG_PARAMS_H

#include <stdint.h>

typedef struct mx_gemm_params {
  float alpha;      /* scale of op(A) * op(B) */
  float beta;       /* scale of C */
  int32_t trans_a;  /* 1: use A^T */
  int32_t trans_b;  /* 1: use B^T */
} mx_gemm_params;

/* Einsum limits: operands, labels per term (an ellipsis counts as one entry), equation text. */
#define MX_EINSUM_MAX_OPERANDS 8
#define MX_EINSUM_MAX_TERM 16
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
