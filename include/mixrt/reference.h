/* The reference interpreter: runs a whole graph op by op on the host, in topological order,
 * with plain allocations, resolving every shape from the actual input shapes and values. No
 * partitioning, no streams. It is the oracle that static, dynamic and hybrid execution are
 * checked against, so it is kept simple and obviously correct rather than fast. */
#ifndef MIXRT_REFERENCE_H
#define MIXRT_REFERENCE_H

#include <stddef.h>
#include <stdint.h>

#include "mixrt/api.h"
#include "mixrt/graph.h"
#include "mixrt/status.h"
#include "mixrt/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Runs graph g once.
 * - inputs[0..n_inputs): host tensors for the graph inputs, by position, or by name when every
 *   given tensor has a name. Every graph input must be given; dtypes must match and concrete
 *   declared dims must be respected; a symbol bound to two different values is an error naming
 *   the input and dim.
 * - outputs[0..n_outputs): receive host tensors whose data the caller owns (mx_tensor_release
 *   each); n_outputs must equal the graph's output count.
 * The graph is validated and inferred first if needed (which caches op params on it). On
 * failure, err (may be NULL) names the input or node at fault and no output is left allocated. */
MX_API MX_MUST_USE mx_status mx_reference_run(mx_graph *g, const mx_tensor *inputs, size_t n_inputs,
                                              mx_tensor *outputs, size_t n_outputs, mx_error *err);

/* Most iterations a Loop whose only exit is its condition may run before the interpreter stops
 * it with an error naming the node (default 16777216; also read from the environment variable
 * MIXRT_LOOP_MAX_ITERATIONS). A Loop with a trip count M runs M at most regardless. Returns the
 * previous limit; a value <= 0 only reads it. */
MX_API int64_t mx_reference_loop_limit(int64_t max_iterations);

/* Compares two tensors by the ONNX test rules: same dtype and shape; floats within
 * |a - e| <= atol + rtol * |e|, NaN equal to NaN, infinities equal by sign; integers and bools
 * exactly. Returns true when they match; otherwise false with a reason in why (may be NULL). */
MX_API bool mx_tensor_allclose(const mx_tensor *actual, const mx_tensor *expected, double rtol, double atol,
                               char *why, size_t why_size);

#ifdef __cplusplus
}
#endif
#endif /* MIXRT_REFERENCE_H */
