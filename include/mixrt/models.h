/* Built-in model generators: graphs in the shapes mixrt is made for, with seeded random weights
 * (nothing is downloaded). Each builds an mx_graph with the builder API; mx_onnx_save_file
 * writes it as an ONNX file any runtime can read. */
#ifndef MIXRT_MODELS_H
#define MIXRT_MODELS_H

#include <stdint.h>

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
  int64_t hidden;    /* model width (default 64) */
  int64_t heads;     /* attention heads; must divide hidden (default 4) */
  int64_t layers;    /* encoder layers (default 1) */
  int64_t max_pos;   /* rows of the position-embedding table: the largest seq (default 128) */
  uint64_t seed;     /* weight seed (default 1) */
} mx_encoder_config;

/* Fills cfg with the defaults above. */
void mx_encoder_config_default(mx_encoder_config *cfg);

/* Builds the encoder (not yet inferred). *out receives ownership (mx_graph_destroy); on failure
 * it is NULL and err (may be NULL) says why. */
mx_status mx_model_encoder(const mx_encoder_config *cfg, mx_graph **out, mx_error *err);

#ifdef __cplusplus
}
#endif
#endif /* MIXRT_MODELS_H */
