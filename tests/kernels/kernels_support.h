/* Shared helpers of the CPU kernel tests (tests/kernels/test_*.c): building an mx_kernel_call
 * block by hand (tensors given as dtype, dims and a caller-owned buffer), finding and running
 * the kernel the registry picks for it with a workspace of the size the kernel asks for, and
 * comparing outputs element by element.
 *
 * Comparisons come in the two Criterion flavours: expect_* report every differing element and
 * let the test go on; assert_* stop the test at the first. */
#ifndef MIXRT_TESTS_KERNELS_SUPPORT_H
#define MIXRT_TESTS_KERNELS_SUPPORT_H

#include <stdint.h>

#include "kernels/kernel.h"

/* A zeroed call block for n_in inputs and n_out outputs with the given params (not copied; may
 * be NULL). malloc'd: the test frees it. Fails the test when out of memory. */
mx_kernel_call *kc_new(uint16_t n_in, uint16_t n_out, const void *params);

/* Sets tensor i of c (inputs first, then outputs); data stays the caller's. */
void kc_set(mx_kernel_call *c, uint32_t i, mx_dtype dt, int32_t rank, const int64_t *dims, void *data);

/* Finds the kernel of `op` (default domain) for c's dtypes, failing the test when there is none,
 * clears c->why, gives the kernel a fresh 64-byte-aligned workspace of the size it asks for
 * (freed afterwards; c->workspace is NULL again on return) and runs it. Returns its status. */
mx_status kc_run(const char *op, mx_kernel_call *c);
/* kc_run with c->params set to params first. */
mx_status kc_run_with(const char *op, mx_kernel_call *c, const void *params);

#define DIMS(...) ((const int64_t[]){__VA_ARGS__})

/* The next uniform float in [-1, 1) of the linear congruential sequence at *seed (each suite keeps
 * its own seed, so its values do not depend on which other tests ran). */
float ks_rnd(uint32_t *seed);
/* n (at least one) floats of ks_rnd, malloc'd: the test frees them. Fails the test when out of
 * memory. */
float *ks_rnd_buf(uint32_t *seed, int64_t n);

/* got[i] == want[i] for i < n (non-fatal). */
void expect_i64(const int64_t *got, const int64_t *want, int64_t n);
/* got[i] equals want[i] exactly, or both are NaN (non-fatal). */
void expect_f32_same(const float *got, const float *want, int64_t n);
/* |got[i] - want[i]| <= tol * (1 + |want[i]|), or both are NaN (non-fatal). */
void expect_f32_near(const float *got, const float *want, int64_t n, float tol);
/* |got[i] - want[i]| <= tol * (1 + |want[i]|); a NaN or infinite want must be matched exactly
 * (fatal at the first miss). */
void assert_f32_near(const float *got, const float *want, int n, float tol);

#endif /* MIXRT_TESTS_KERNELS_SUPPORT_H */
