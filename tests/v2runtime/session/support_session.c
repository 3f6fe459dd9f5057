/* Helpers of the session tests: sessions with the options the tests vary, seeded inputs, and the
 * exact comparison of a session's outputs with the reference interpreter's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "v2runtime/session/session_support.h"

static uint64_t rng_next(uint64_t *s) {
  uint64_t x = *s;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *s = x;
}

mx_status mxs_random_tensor(mx_dtype dt, int32_t rank, const int64_t *dims, uint64_t seed, mx_tensor *t) {
  mx_status st = mx_tensor_alloc(dt, rank, dims, t);
  if (st != MX_OK) return st;
  int64_t n;
  mx_tensor_numel(t, &n);
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  for (int64_t i = 0; i < n; i++) {
    uint64_t r = rng_next(&s);
    switch (dt) {
      case MX_FLOAT32:
        ((float *)t->data)[i] = (float)((double)(r >> 11) / (double)(1ull << 53) * 2.0 - 1.0);
        break;
      case MX_INT64: ((int64_t *)t->data)[i] = (int64_t)(r % 7); break;
      case MX_INT32: ((int32_t *)t->data)[i] = (int32_t)(r % 7); break;
      case MX_BOOL: ((uint8_t *)t->data)[i] = (uint8_t)(r >> 63); break;
      default: memset(t->data, 0, 1); break;
    }
  }
  return MX_OK;
}

bool mxs_same(const mx_tensor *a, const mx_tensor *b, char *why, size_t cap) {
  return mx_tensor_allclose(a, b, 0.0, 0.0, why, cap);
}

mx_session *mxs_new_session(uint32_t streams, mx_executor_kind ex, int64_t static_min_ops) {
  mx_session_options o;
  mx_session_options_init(&o);
  o.streams = streams;
  o.executor = ex;
  o.static_min_ops = static_min_ops;
  mx_session *s;
  mx_error err;
  cr_assert_eq(mx_session_create(&o, &s, &err), MX_OK, "%s", err.message);
  return s;
}
