/* ONNX import (and, later, export) of mixrt graphs.
 *
 * Import reads a ModelProto: opset imports, graph inputs (dim_value, dim_param -> symbols,
 * missing dims -> unknown), outputs, initializers (raw_data, typed fields, external data files
 * relative to the model), Constant nodes (turned into constants), attributes of every kind and
 * nested graphs (kept as subgraphs). Truncated, corrupt or hostile files return a status and a
 * message; they never crash and never leak. */
#ifndef MIXRT_ONNX_H
#define MIXRT_ONNX_H

#include <stddef.h>

#include "mixrt/api.h"
#include "mixrt/graph.h"
#include "mixrt/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Loads an ONNX model file. *out receives a new graph (mx_graph_destroy) on success; on failure
 * *out is NULL and err (may be NULL) says what is wrong and where. */
MX_API MX_MUST_USE mx_status mx_onnx_load_file(const char *path, mx_graph **out, mx_error *err);

/* Loads an ONNX model from memory. `base_dir` locates external-data files (NULL: none allowed). */
MX_API MX_MUST_USE mx_status mx_onnx_load_memory(const void *data, size_t size, const char *base_dir,
                                                 mx_graph **out, mx_error *err);

/* Writes g as an ONNX model (nodes in topological order, constants as initializers with raw
 * data, inputs/outputs with dtypes and shapes: symbols as dim_param). *data receives a malloc'd
 * buffer the caller frees with free(). */
MX_API MX_MUST_USE mx_status mx_onnx_save_memory(mx_graph *g, void **data, size_t *size, mx_error *err);
/* Same, written to a file. */
MX_API MX_MUST_USE mx_status mx_onnx_save_file(mx_graph *g, const char *path, mx_error *err);

#ifdef __cplusplus
}
#endif
#endif /* MIXRT_ONNX_H */
