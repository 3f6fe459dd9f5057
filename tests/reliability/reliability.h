/* Helpers of the reliability tests (support_reliability.c): a Llama decode loop driven through a
 * session with its KV cache carried between steps, a mixture-of-experts step, both checked
 * bit for bit against the reference interpreter, and sessions created with given device
 * options. Plain C over the public API; no Criterion calls. */
#ifndef MIXRT_TESTS_RELIABILITY_H
#define MIXRT_TESTS_RELIABILITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mixrt/models.h"
#include "mixrt/reference.h"
#include "mixrt/session.h"

enum { MXR_MAX_IO = 64 };

/* A decode loop of the tiny llama (mx_llama_config defaults) over one session. */
typedef struct mxr_llama {
  mx_llama_config cfg;
  mx_graph *ref; /* the model again, for the reference interpreter (owned) */
  size_t n_io;   /* model inputs (= outputs): input_ids + 2 per layer */
  int64_t head_dim;
  int64_t past_len;           /* rows in the cache now */
  mx_tensor past[MXR_MAX_IO]; /* past_key_i / past_value_i at index 1 + 2i / 2 + 2i (owned) */
} mxr_llama;

/* Step flags. */
enum {
  MXR_CHECK = 1,  /* compare every output with the reference interpreter, bit for bit */
  MXR_ADVANCE = 2 /* the presents become the next step's past (else the cache is unchanged) */
};

/* Prepares the loop (reference graph, empty cache). cfg NULL: the tiny defaults. */
mx_status mxr_llama_init(mxr_llama *l, const mx_llama_config *cfg);
void mxr_llama_free(mxr_llama *l);
/* Empties the cache (past_len 0). */
void mxr_llama_reset(mxr_llama *l);
/* Builds the model and loads it into s. */
mx_status mxr_llama_load(const mxr_llama *l, mx_session *s);
/* One decode step of `token` at the current past_len. A failing run returns its status with the
 * session's message in why; a result that differs from the reference returns MX_ERR_INTERNAL
 * with the difference in why. Nothing is left allocated either way. */
mx_status mxr_llama_step(mxr_llama *l, mx_session *s, int64_t token, unsigned flags, char *why, size_t cap);

/* The mixture-of-experts block (mx_moe_config defaults). */
typedef struct mxr_moe {
  mx_moe_config cfg;
  mx_graph *ref; /* for the reference interpreter (owned) */
} mxr_moe;

mx_status mxr_moe_init(mxr_moe *m);
void mxr_moe_free(mxr_moe *m);
mx_status mxr_moe_load(const mxr_moe *m, mx_session *s);
/* One step on `tokens` rows drawn from `seed`; results like mxr_llama_step. */
mx_status mxr_moe_step(mxr_moe *m, mx_session *s, int64_t tokens, uint64_t seed, unsigned flags, char *why,
                       size_t cap);

/* A session on a device created from *dev (NULL: defaults) with `streams` streams and executor
 * ex. NULL with the reason in why on failure. */
mx_session *mxr_session(const mx_device_options *dev, uint32_t streams, mx_executor_kind ex, char *why,
                        size_t cap);

/* A host tensor of dims with seeded values (floats in [-1, 1), int64 in [0, 7)). */
mx_status mxr_random_tensor(mx_dtype dt, int32_t rank, const int64_t *dims, uint64_t seed, mx_tensor *t);

#endif /* MIXRT_TESTS_RELIABILITY_H */
