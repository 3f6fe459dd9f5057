/* Shared helpers of the dynamic executor tests: devices, small graph builders, deterministic
 * data, and the comparison of dynamic runs with the reference interpreter. */
#ifndef MIXRT_TESTS_DYNAMIC_EXEC_SUPPORT_DYN_H
#define MIXRT_TESTS_DYNAMIC_EXEC_SUPPORT_DYN_H

#include <stdbool.h>
#include <stdint.h>

#include "dynamic_exec/dynamic_exec.h"
#include "mixrt/graph.h"
#include "mixrt/hal.h"
#include "mixrt/models.h"

/* A CPU or inline device with checking mode on (or as given) and faults off. Asserts. */
mx_device *dyn_device(mx_device_kind kind, bool check);
/* Same, with options (faults, memory limit) taken from o. */
mx_device *dyn_device_opts(const mx_device_options *o);

/* Builder shorthands (assert on failure). */
mx_value_id dyn_input(mx_graph *g, const char *name, mx_dtype dt, int32_t rank, const mx_dim *dims);
mx_value_id dyn_op(mx_graph *g, const char *op, const mx_value_id *in, size_t n, const mx_attr *attrs,
                   size_t n_attrs);
/* The default encoder layer (mx_model_encoder), inferred; *cfg receives its config. Asserts. */
mx_graph *dyn_default_encoder(mx_encoder_config *cfg);
/* A float32 constant of the given dims with values in [-scale, scale) from seed. */
mx_value_id dyn_weights(mx_graph *g, const char *name, int32_t rank, const int64_t *dims, float scale,
                        uint64_t seed);
mx_value_id dyn_ints(mx_graph *g, const char *name, const int64_t *v, int64_t n);
mx_value_id dyn_scalar_i64(mx_graph *g, const char *name, int64_t v);

/* A host tensor with deterministic values in [-1, 1) (floats) or [0, 8) (ints). Release with
 * mx_tensor_release. */
mx_tensor dyn_random(mx_dtype dt, int32_t rank, const int64_t *dims, uint64_t seed);

/* Runs the reference interpreter on the same inputs and compares every output of `got`
 * (host tensors) with it. Returns the number of mismatching outputs (messages on stderr). */
int dyn_compare_reference(mx_graph *g, const mx_tensor *inputs, size_t n_in, const mx_tensor *got,
                          size_t n_out, double rtol, double atol, const char *what);

/* Plans g (inferred first if needed) with max_streams, runs every input set of steps[] in
 * order on one executor with host outputs and compares each with the reference. Returns the
 * number of mismatches; asserts on errors. */
int dyn_run_steps(mx_graph *g, mx_device *dev, uint32_t max_streams, const mx_tensor *steps, size_t n_in,
                  size_t n_steps, double rtol, double atol, const char *what);

/* Copies a host tensor to a new device tensor from the executor's allocator. */
mx_tensor dyn_to_device(mx_dyn_exec *e, const mx_tensor *host);
/* Copies a device tensor back to a new host tensor (synchronous). */
mx_tensor dyn_to_host(mx_device *dev, const mx_tensor *t);

/* Deterministic generator (splitmix64). */
uint64_t dyn_rand(uint64_t *state);

/* In AddressSanitizer builds: fails the test if host memory leaked so far. */
void dyn_check_leaks(void);

#endif /* MIXRT_TESTS_DYNAMIC_EXEC_SUPPORT_DYN_H */
