/* ONNX export and import whose initializers live in a weights section instead of the model
 * (the .mxm file format: static_exec/mxm.c, v2runtime/mxm_io.c): export writes them as external
 * data at a pseudo location naming the section, import reads them from the section in memory. */
#ifndef MIXRT_GRAPH_ONNX_ONNX_REFS_H
#define MIXRT_GRAPH_ONNX_ONNX_REFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mixrt/api.h"
#include "mixrt/graph.h"
#include "mixrt/status.h"
#include "mixrt/tensor.h"

/* The external-data location naming the weights section of an .mxm file (not a file name). */
#define MX__ONNX_BLOB_LOCATION "mxm:weights"

/* Whether an initializer goes out as a reference into a weights section: true with *offset set
 * to where its nbytes bytes are (or will be) in that section. */
typedef bool (*mx__onnx_ref_fn)(void *ctx, const mx_tensor *t, size_t nbytes, uint64_t *offset);

/* mx_onnx_save_memory where every initializer `ref` accepts is written as external data at
 * MX__ONNX_BLOB_LOCATION (no copy of its bytes in the model). */
MX_MUST_USE mx_status mx__onnx_save_memory_refs(mx_graph *g, mx__onnx_ref_fn ref, void *ctx, void **data,
                                                size_t *size, mx_error *err);

/* mx_onnx_load_memory whose external data lies in blob (blob_size bytes; no files). */
MX_MUST_USE mx_status mx__onnx_load_memory_blob(const void *data, size_t size, const void *blob,
                                                uint64_t blob_size, mx_graph **out, mx_error *err);

/* mx__onnx_load_memory_blob whose floating-point initializers in blob are not copied: the graph's
 * constants point into blob, which must outlive the graph unchanged. */
MX_MUST_USE mx_status mx__onnx_load_memory_borrow(const void *data, size_t size, const void *blob,
                                                  uint64_t blob_size, mx_graph **out, mx_error *err);

/* Saves g as an ONNX model at path with its initializers of min_bytes and more as external data in
 * "<path>.bin" (location relative to the model's folder), written tensor by tensor. */
MX_MUST_USE mx_status mx__onnx_save_file_external(mx_graph *g, const char *path, size_t min_bytes, mx_error *err);

#endif /* MIXRT_GRAPH_ONNX_ONNX_REFS_H */
