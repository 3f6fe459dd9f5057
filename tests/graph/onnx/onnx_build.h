/* Test helper for tests/graph/onnx: builds ONNX ModelProtos by hand with protobuf-c, for import
 * tests of features and of hostile files that the conformance data does not contain.
 *
 * Every message and string comes from an mxb builder and is freed with it (mxb_free), so a
 * test builds a model, packs it (mxb_pack) and loads the bytes without tracking ownership.
 * Shapes are given as text: "batch,3,?" is a dim_param, a dim_value and a dim without either;
 * NULL means no shape at all. Name lists are comma-separated and keep empty entries
 * ("a,,c" has an omitted second input). Allocation failures abort the test process. */
#ifndef MIXRT_TESTS_ONNX_BUILD_H
#define MIXRT_TESTS_ONNX_BUILD_H

#include <stddef.h>
#include <stdint.h>

#include "onnx/onnx.pb-c.h"

/* Every allocation of the models built so far. */
typedef struct mxb {
  void **allocs; /* malloc'd blocks to free */
  size_t n, cap;
} mxb;

void mxb_free(mxb *b);
void *mxb_alloc(mxb *b, size_t size); /* zeroed */
char *mxb_str(mxb *b, const char *s);

/* A model with IR version 8 importing the default domain at `opset`, holding an empty graph
 * called "main" (m->graph). */
Onnx__ModelProto *mxb_model(mxb *b, int64_t opset);
/* An empty graph called `name` (for subgraph attributes). */
Onnx__GraphProto *mxb_graph(mxb *b, const char *name);

/* Adds an opset import to the model. */
void mxb_opset(mxb *b, Onnx__ModelProto *m, const char *domain, int64_t version);
/* Adds a graph input / output of element type `elem` (0: no type at all) and shape `dims`. */
Onnx__ValueInfoProto *mxb_input(mxb *b, Onnx__GraphProto *g, const char *name, int elem, const char *dims);
Onnx__ValueInfoProto *mxb_output(mxb *b, Onnx__GraphProto *g, const char *name, int elem, const char *dims);
/* Adds a node; inputs and outputs are comma-separated lists (NULL: none). */
Onnx__NodeProto *mxb_node(mxb *b, Onnx__GraphProto *g, const char *op, const char *name, const char *inputs,
                          const char *outputs);

/* Adds attributes to a node. */
Onnx__AttributeProto *mxb_attr(mxb *b, Onnx__NodeProto *n, const char *name,
                               Onnx__AttributeProto__AttributeType type);
void mxb_attr_int(mxb *b, Onnx__NodeProto *n, const char *name, int64_t v);
void mxb_attr_float(mxb *b, Onnx__NodeProto *n, const char *name, float v);
void mxb_attr_string(mxb *b, Onnx__NodeProto *n, const char *name, const char *v);
void mxb_attr_ints(mxb *b, Onnx__NodeProto *n, const char *name, const int64_t *v, size_t count);
void mxb_attr_floats(mxb *b, Onnx__NodeProto *n, const char *name, const float *v, size_t count);
void mxb_attr_strings(mxb *b, Onnx__NodeProto *n, const char *name, const char *const *v, size_t count);
void mxb_attr_tensor(mxb *b, Onnx__NodeProto *n, const char *name, Onnx__TensorProto *t);
void mxb_attr_graph(mxb *b, Onnx__NodeProto *n, const char *name, Onnx__GraphProto *g);

/* A tensor of element type `elem` with comma-separated concrete dims ("" or NULL: a scalar)
 * and, when raw is not NULL, raw_data of raw_len bytes. */
Onnx__TensorProto *mxb_tensor(mxb *b, const char *name, int elem, const char *dims, const void *raw,
                              size_t raw_len);
/* Adds a tensor as an initializer of g. */
void mxb_initializer(mxb *b, Onnx__GraphProto *g, Onnx__TensorProto *t);
/* Adds an external_data key/value entry to t (and marks its data location EXTERNAL). */
void mxb_external(mxb *b, Onnx__TensorProto *t, const char *key, const char *value);

/* Serializes a model / tensor; the bytes belong to the builder. */
uint8_t *mxb_pack(mxb *b, const Onnx__ModelProto *m, size_t *size);
uint8_t *mxb_pack_tensor(mxb *b, const Onnx__TensorProto *t, size_t *size);

/* Writes bytes to a file; returns 0 on success. */
int mxb_write_file(const char *path, const void *data, size_t size);

#endif /* MIXRT_TESTS_ONNX_BUILD_H */
