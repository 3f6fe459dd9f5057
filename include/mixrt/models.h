/* Built-in model generators: graphs in the shapes mixrt is made for, with seeded random weights
 * (nothing is downloaded). Each builds an mx_graph with the builder API; mx_onnx_save_file
 * writes it as an ONNX file any runtime can read. */
#ifndef MIXRT_MODELS_H
#define MIXRT_MODELS_H

#include <stdbool.h>
#include <stdint.h>

#include "mixrt/api.h"
#include "mixrt/graph.h"
#include "mixrt/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An encoder in the style of exported transformers: every Reshape target comes from Shape
 * arithmetic on the input's symbolic `batch` and `seq` dims (Shape -> Gather -> Unsqueeze ->
 * Concat), position ids come from Range(0, seq), the attention mask from ConstantOfShape and
 * Expand. Input "x" float32 [batch, seq, hidden], output "y" of the same shape. */
typedef struct mx_encoder_config {
  int64_t hidden;  /* model width (default 64) */
  int64_t heads;   /* attention heads; must divide hidden (default 4) */
  int64_t layers;  /* encoder layers (default 1) */
  int64_t max_pos; /* rows of the position-embedding table: the largest seq (default 128) */
  uint64_t seed;   /* weight seed (default 1) */
} mx_encoder_config;

/* Fills cfg with the defaults above. */
MX_API void mx_encoder_config_default(mx_encoder_config *cfg);

/* Builds the encoder (not yet inferred). *out receives ownership (mx_graph_destroy); on failure
 * it is NULL and err (may be NULL) says why. */
MX_API MX_MUST_USE mx_status mx_model_encoder(const mx_encoder_config *cfg, mx_graph **out, mx_error *err);

/* A Llama-style decoder, one DECODE STEP: batch 1, one new token at position past_len.
 *
 * Inputs: "input_ids" int64 [1, 1]; per layer i "past_key_<i>" and "past_value_<i>" float32
 * [1, kv_heads, past_len, head_dim], all with the one symbol `past_len`.
 * Outputs: "logits" float32 [1, 1, vocab]; per layer "present_key_<i>", "present_value_<i>"
 * [1, kv_heads, past_len + 1, head_dim] (the past rows followed by the new token's row).
 * Body: embedding Gather; per layer RMSNormalization, Q/K/V MatMuls reshaped and transposed to
 * [1, heads, 1, head_dim] ([1, kv_heads, 1, head_dim] for K and V), RotaryEmbedding at position
 * ids computed from Shape(past_key_0)[2] (the way exporters write it), Attention (opset 23,
 * grouped-query when kv_heads < heads) over the cache, output projection and residual,
 * RMSNormalization, SiLU MLP (gate * Sigmoid(gate) * up, then down) and residual; final
 * RMSNormalization and the lm_head MatMul. Only the attention over the cache has a symbolic
 * dim; every other value's shape is concrete after mx_graph_infer. */
typedef struct mx_llama_config {
  int64_t layers;   /* decoder layers (default 2) */
  int64_t hidden;   /* model width (default 64) */
  int64_t heads;    /* query heads (default 4) */
  int64_t kv_heads; /* key/value heads; must divide heads (default 2: grouped-query) */
  int64_t head_dim; /* size of one head, even; 0: hidden / heads, which must divide (default 0) */
  int64_t ffn;      /* MLP width (default 172) */
  int64_t vocab;    /* vocabulary size (default 128) */
  int64_t max_pos;  /* rows of the rotary cos/sin tables: positions 0 .. max_pos - 1 (default 2048) */
  uint64_t seed;    /* weight seed (default 1) */
} mx_llama_config;

/* Fills cfg with the defaults above. */
MX_API void mx_llama_config_default(mx_llama_config *cfg);

/* Fills cfg with a named size: "tiny" (the defaults: 2 layers, hidden 64, 4 heads, 2 key/value
 * heads, ffn 172, vocab 128; 0.53 MiB of weights) or "small" (4 layers, hidden 256, 4 heads and
 * 4 key/value heads of 64, ffn 688, vocab 1000; 14.5 MiB), the sizes `mixrt demo` and
 * `mixrt bench llm` run. False (cfg holds the defaults) for any other name. */
MX_API bool mx_llama_config_preset(mx_llama_config *cfg, const char *name);

/* Builds the decode step (not yet inferred). cfg NULL: the defaults. *out receives ownership
 * (mx_graph_destroy); on failure it is NULL and err (may be NULL) says why. A bad config (a zero
 * or oversized field, heads not a multiple of kv_heads, an odd head_dim) is
 * MX_ERR_INVALID_ARGUMENT naming the field. */
MX_API MX_MUST_USE mx_status mx_model_llama(const mx_llama_config *cfg, mx_graph **out, mx_error *err);
/* The same decode step (inputs, outputs, weights, results) written with primitive ops the way
 * torch.onnx.export writes a Hugging Face Llama: RMSNorm as Pow / ReduceMean / Add / Sqrt /
 * Reciprocal / Mul, rotary as Slice / Neg / Concat / Mul / Add over Gather-ed tables, attention
 * as Concat (cache) / Expand (grouped heads) / MatMul / Mul / Softmax / MatMul (models/llama_exported.c).
 * mixrt's rewrite rules (mx_graph_fuse) bring it back to the fused form. */
MX_API MX_MUST_USE mx_status mx_model_llama_exported(const mx_llama_config *cfg, mx_graph **out,
                                                     mx_error *err);

/* A mixture-of-experts block with data-dependent routing over a symbolic token count.
 *
 * Input "x" float32 [tokens, hidden]; output "y" float32 [tokens, hidden].
 * Router MatMul -> TopK (top_k of the experts per token) -> Softmax over the selected values.
 * Per expert e: Equal(topk_indices, e) as float, ReduceMax over k -> NonZero -> the token rows
 * routed to e (Squeeze) and their ScatterND indices (Transpose); Gather of those rows of x ->
 * MatMul, Relu, MatMul -> scaled by the row's router probability for e (ReduceSum of the
 * probabilities where the index is e, gathered per row) -> ScatterND with reduction "add" into
 * the output, which starts as zeros of Shape(x). An expert may receive no token: its tensors are
 * then empty. */
typedef struct mx_moe_config {
  int64_t hidden;  /* model width (default 64) */
  int64_t ffn;     /* width of each expert's MLP (default 128) */
  int64_t experts; /* number of experts (default 4) */
  int64_t top_k;   /* experts per token, 1 .. experts (default 2) */
  uint64_t seed;   /* weight seed (default 1) */
} mx_moe_config;

/* Fills cfg with the defaults above. */
MX_API void mx_moe_config_default(mx_moe_config *cfg);

/* Builds the block (not yet inferred). cfg NULL: the defaults. *out receives ownership
 * (mx_graph_destroy); on failure it is NULL and err (may be NULL) says why (a bad config is
 * MX_ERR_INVALID_ARGUMENT naming the field). */
MX_API MX_MUST_USE mx_status mx_model_moe(const mx_moe_config *cfg, mx_graph **out, mx_error *err);

#ifdef __cplusplus
}
#endif
#endif /* MIXRT_MODELS_H */
