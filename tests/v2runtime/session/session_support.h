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

/* support_state.c: the default llama's decode loop. Its inputs and outputs: token ids (logits),
 * then the past (present) key and value of its 2 layers. */
enum { MXS_LLAMA_IO = 5 };
/* A session over the default llama (one stream, sequential executor), asserting success. */
mx_session *mxs_llama_session(int64_t static_min_ops);
/* The index of the largest of a float32 tensor's elements (the greedy token). */
int64_t mxs_argmax(const mx_tensor *t);
/* The copying path: host pasts, each step's presents fed back as the next pasts. */
typedef struct mxs_copying {
  mx_tensor in[MXS_LLAMA_IO], out[MXS_LLAMA_IO];
} mxs_copying;
void mxs_copying_init(mxs_copying *c);
void mxs_copying_step(mx_session *s, mxs_copying *c, int64_t token);
void mxs_copying_free(mxs_copying *c);

#endif /* MIXRT_TESTS_SESSION_SUPPORT_H */
