/* Params structs of the LLM building blocks: SwiGLU, LinearAttention, FlexAttention
 * (ai.onnx.preview) and CausalConvWithState, as their CPU kernels read them.
 *
 * Plain old data without pointers: .mxm files store these structs byte for byte. */
#ifndef MIXRT_GRAPH_OPS_LLM_PARAMS_H
#define MIXRT_GRAPH_OPS_LLM_PARAMS_H

#include <stdint.h>

typedef struct mx_swiglu_params {
  float alpha;      /* y = a * sigmoid(alpha * a) * b */
  int32_t reserved; /* always 0 */
} mx_swiglu_params;

/* LinearAttention's update_rule attribute. */
enum { MX_LINATT_LINEAR = 0, MX_LINATT_GATED = 1, MX_LINATT_DELTA = 2, MX_LINATT_GATED_DELTA = 3 };

typedef struct mx_linear_attention_params {
  int32_t q_num_heads;
  int32_t kv_num_heads;
  int32_t update_rule; /* MX_LINATT_* */
  float scale;         /* 0: 1 / sqrt(d_k) */
} mx_linear_attention_params;

typedef struct mx_flex_attention_params {
  int32_t has_scale; /* 0: scale = 1 / sqrt(head_size) */
  float scale;
  int32_t softmax_precision; /* ONNX dtype code, 0 when absent */
  int32_t mods;              /* MX_FLEX_SCORE_MOD | MX_FLEX_PROB_MOD: the subgraphs the node has */
} mx_flex_attention_params;

/* FlexAttention's subgraph attributes (run by the reference interpreter, not by kernels). */
enum { MX_FLEX_SCORE_MOD = 1, MX_FLEX_PROB_MOD = 2 };

typedef struct mx_causal_conv_params {
  int32_t silu;     /* 1: the output goes through x * sigmoid(x) */
  int32_t reserved; /* always 0 */
} mx_causal_conv_params;

#endif /* MIXRT_GRAPH_OPS_LLM_PARAMS_H */
