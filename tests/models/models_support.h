/* Helpers shared by the model-generator tests: seeded random inputs, reference runs, and a
 * structural comparison of two graphs (used by the ONNX round-trip tests). */
#ifndef MIXRT_TESTS_MODELS_SUPPORT_H
#define MIXRT_TESTS_MODELS_SUPPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mixrt/graph.h"
#include "mixrt/tensor.h"

/* A host float32 tensor of the given dims with values in [-1, 1) from *rng (data malloc'd:
 * mx_tensor_release). Fails the test on allocation failure. */
mx_tensor mxt_random_f32(int32_t rank, const int64_t *dims, uint64_t *rng);

/* Runs the reference interpreter on g; fails the test (with the error) when it does. */
void mxt_run(mx_graph *g, const mx_tensor *in, size_t n_in, mx_tensor *out, size_t n_out);

/* Frees n tensors filled by mixrt or mxt_random_f32. */
void mxt_release_all(mx_tensor *t, size_t n);

/* Checks a generator's refusal of a bad config: status MX_ERR_INVALID_ARGUMENT, no graph
 * (g as the generator left it), err set and its message naming `word` (the bad field). */
void mxt_expect_bad_config(mx_status st, const mx_graph *g, const mx_error *err, const char *word);

/* The shape of value `name` in g printed with mx_shape_format (into buf). Fails the test when g
 * has no such value. */
const char *mxt_shape_of(mx_graph *g, const char *name, char *buf, size_t cap);

/* Compares two inferred graphs: inputs and outputs (names, dtypes, printed shapes), nodes in
 * topological order (op type, domain, name, input and output names, attributes), constants
 * (name, dtype, dims, bytes). Returns true when identical; otherwise false with the first
 * difference in why. */
bool mxt_graphs_identical(mx_graph *a, mx_graph *b, char *why, size_t why_cap);

/* True when two tensors have the same dtype, dims and bytes. */
bool mxt_tensors_identical(const mx_tensor *a, const mx_tensor *b);

#endif /* MIXRT_TESTS_MODELS_SUPPORT_H */
