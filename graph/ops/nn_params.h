/* Params structs of the nn ops: Softmax/LogSoftmax, LayerNormalization, RMSNormalization,
 * Attention and RotaryEmbedding, as their CPU kernels read them.
 *
 * Plain old data without pointers: .mxm files store these structs byte for byte. */
#ifndef MIXRT_GRAPH_OPS_NN_PARAMS_H
#define MIXRT_GRAPH_OPS_NN_PARAMS_H

#include <stdint.h>

typedef struct mx_softmax_params {
  int64_t axis;    /* as given (may be negative) */
  int32_t flatten; /* opset < 13: the input is coerced to 2-D at axis, softmax over the tail */
  int32_t log;     /* 1 for LogSoftmax */
} mx_softmax_params;

/* LayerNormalization and RMSNormalization. */
typedef struct mx_norm_params {
  int64_t axis; /* first normalized axis, as given (may be negative) */
  float epsilon;
  int32_t stash_type; /* ONNX dtype code of the statistics (1: float32, 11: float64, 16: bfloat16) */
} mx_norm_params;

typedef struct mx_attention_params {
  int32_t is_causal;
  int32_t q_num_heads;           /* 0 when absent (4-D inputs) */
  int32_t kv_num_heads;          /* 0 when absent (4-D inputs) */
  int32_t qk_matmul_output_mode; /* 0 raw QK^T*scale, 1 after softcap, 2 after mask, 3 softmax */
  int32_t has_scale;             /* 0: scale = 1/sqrt(head_size) */
  float scale;
  float softcap;             /* 0: no softcap */
  int32_t softmax_precision; /* ONNX dtype code, 0 when absent */
} mx_attention_params;

typedef struct mx_rotary_params {
  int32_t interleaved;          /* 1: rotate pairs (x0,x1),(x2,x3)...; 0: halves */
  int32_t num_heads;            /* needed for 3-D input; 0 when absent */
  int32_t rotary_embedding_dim; /* 0: the whole head */
} mx_rotary_params;

#endif /* MIXRT_GRAPH_OPS_NN_PARAMS_H */
