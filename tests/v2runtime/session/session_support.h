/* Helpers of the session tests (see support_session.c). */
#ifndef MIXRT_TESTS_SESSION_SUPPORT_H
#define MIXRT_TESTS_SESSION_SUPPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "mixrt/reference.h"
#include "mixrt/session.h"

/* A host tensor of the given dims with seeded values (floats in [-1, 1), ints in [0, 7)). */
mx_status mxs_random_tensor(mx_dtype dt, int32_t rank, const int64_t *dims, uint64_t seed, mx_tensor *t);
/* A new session (asserts success) with the given streams, executor and static_min_ops. */
mx_session *mxs_new_session(uint32_t streams, mx_executor_kind ex, int64_t static_min_ops);
/* Bit-exact comparison (same kernels run in the session and in the reference interpreter). */
bool mxs_same(const mx_tensor *a, const mx_tensor *b, char *why, size_t cap);

#endif /* MIXRT_TESTS_SESSION_SUPPORT_H */
