/* Test fixture: one encoder layer in the style of an exported transformer, built with the
 * builder API by mixrt's encoder generator (mx_model_encoder, include/mixrt/models.h).
 *
 * Every Reshape target comes from shape arithmetic on the input's symbolic batch and sequence
 * dims (Shape -> Gather -> Unsqueeze -> Concat, and Shape -> Slice -> Concat on the way back),
 * the position ids come from Range(0, seq, 1) on a Gather of the shape, and the attention mask
 * is a ConstantOfShape expanded to the score shape. After mx_graph_infer no value has an
 * unknown rank and the output is [batch, seq, HIDDEN]. Compiled into every test executable
 * (tests/support/), so it depends only on the mixrt library; `mixrt inspect`'s test writes the
 * same graph to an ONNX file. */
#ifndef MIXRT_TESTS_SUPPORT_TRANSFORMER_FIXTURE_H
#define MIXRT_TESTS_SUPPORT_TRANSFORMER_FIXTURE_H

#include "mixrt/graph.h"

#define MXT_TRANSFORMER_HIDDEN   64  /* model width: the last dim of input and output */
#define MXT_TRANSFORMER_HEADS    4   /* attention heads */
#define MXT_TRANSFORMER_HEAD_DIM 16  /* HIDDEN / HEADS */
#define MXT_TRANSFORMER_MAX_POS  128 /* rows of the position-embedding table */

/* Names of the graph's input (float32 [batch, seq, HIDDEN]), its output (same shape) and the
 * two symbols of the input shape. */
#define MXT_TRANSFORMER_INPUT  "x"
#define MXT_TRANSFORMER_OUTPUT "y"
#define MXT_TRANSFORMER_BATCH  "batch"
#define MXT_TRANSFORMER_SEQ    "seq"

/* Builds the graph (not yet inferred) into a new graph named "encoder_layer"; *out receives
 * ownership (mx_graph_destroy). Weights are small deterministic constants. On failure *out is
 * NULL and the status says why. */
mx_status mxt_transformer_build(mx_graph **out);

#endif /* MIXRT_TESTS_SUPPORT_TRANSFORMER_FIXTURE_H */
