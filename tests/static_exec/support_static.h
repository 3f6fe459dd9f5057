/* Helpers of the static-executor tests: devices, running a plan on host tensors through device
 * buffers, bit-exact comparison with the reference interpreter, random inputs and random graphs. */
#ifndef MIXRT_TESTS_STATIC_EXEC_SUPPORT_STATIC_H
#define MIXRT_TESTS_STATIC_EXEC_SUPPORT_STATIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hal/hal.h"
#include "mixrt/graph.h"
#include "mixrt/reference.h"
#include "static_exec/static_exec.h"

/* A device of the given kind with checking mode on (faults off, environment ignored). */
mx_device *st_device(mx_device_kind kind, bool check);

/* Runs model m once on host inputs: copies them into device buffers, passes device outputs,
 * executes on s, synchronizes and copies the outputs back into host tensors allocated here
 * (outputs[j], release with mx_tensor_release). Returns the first failing status and puts the
 * message into why. */
mx_status st_run_device(mx_static_model *m, mx_stream *s, const mx_tensor *inputs, mx_tensor *outputs,
                        char *why, size_t why_size);

/* Same with host tensors (staged by the model). */
mx_status st_run_host(mx_static_model *m, mx_stream *s, const mx_tensor *inputs, mx_tensor *outputs,
                      char *why, size_t why_size);

/* True when the two tensors have the same dtype, dims and bytes; else false with a reason. */
bool st_same_bits(const mx_tensor *a, const mx_tensor *b, char *why, size_t why_size);

/* Seeded random host inputs for every graph input of g (concrete shapes required). */
mx_status st_random_inputs(const mx_graph *g, uint64_t seed, mx_tensor *inputs);

/* Compiles g with opt, loads it on dev (load options lo may be NULL), runs it once through
 * device buffers and compares with the reference interpreter, bit for bit. Returns false with a
 * reason when anything fails or differs. */
bool st_check_against_reference(mx_graph *g, const mx_static_options *opt, const mx_static_load_options *lo,
                                mx_device *dev, uint64_t seed, char *why, size_t why_size);

/* A random graph of about n_ops float32 ops (elementwise, MatMul, Transpose, Reshape, Softmax
 * over values of a few shapes), with graph outputs that include repeats, an input and a
 * constant when `corner_outputs`. Inferred; *out owned by the caller. */
mx_status st_random_graph(uint64_t seed, int n_ops, bool corner_outputs, mx_graph **out);

/* Checks the memory plan of p independently of the planner: happens-before from stream order
 * and events, then every pair of buffers overlapping in memory must be ordered; the arena is at
 * least the lower bound and every buffer lies inside it. */
bool st_check_memory_plan(const mx_static_plan *p, char *why, size_t why_size);

#endif /* MIXRT_TESTS_STATIC_EXEC_SUPPORT_STATIC_H */
