/* Shared helpers of the HAL tests: device configurations every test runs on, and small kernels
 * whose effects are easy to check. */
#ifndef MIXRT_TESTS_HAL_SUPPORT_HAL_H
#define MIXRT_TESTS_HAL_SUPPORT_HAL_H

#include <stdatomic.h>
#include <stdint.h>

#include "hal/hal.h"

/* A device configuration under test. */
typedef struct hal_config {
  const char *name;
  mx_device_kind kind;
  uint32_t max_workers; /* 0 = one worker per stream */
  uint32_t ring_slots;  /* 0 = default; small values exercise the full-queue path */
  int64_t spin_ns;      /* -1 = default */
} hal_config;

/* cpu (one worker per stream), cpu with 2 shared workers and tiny queues, cpu that parks at
 * once, inline. */
extern const hal_config hal_configs[];
extern const int hal_n_configs;

/* Creates a device for cfg with checking and faults off unless set in `extra` (may be NULL:
 * then only cfg applies). Asserts success. */
mx_device *hal_device(const hal_config *cfg, const mx_device_options *extra);

/* Options initialised for cfg (checking off, faults off, environment ignored). */
mx_device_options hal_options(const hal_config *cfg);

/* --- kernels ---------------------------------------------------------------------------------- */

/* log[(*pos)++] = value */
typedef struct append_args {
  int64_t *log;
  int64_t *pos;
  int64_t value;
} append_args;
mx_status k_append(void *args, size_t size);

/* *dst = mul * *a + *b + add (wrapping); the DAG and model tests' operation. */
typedef struct axpb_args {
  int64_t *dst;
  const int64_t *a;
  const int64_t *b;
  int64_t mul;
  int64_t add;
} axpb_args;
mx_status k_axpb(void *args, size_t size);
int64_t axpb_ref(int64_t a, int64_t b, int64_t mul, int64_t add);

/* Returns the status stored in its argument block. */
mx_status k_status(void *args, size_t size);

/* Sleeps `ns` nanoseconds, then sets *flag to 1. */
typedef struct sleep_args {
  atomic_int *flag;
  int64_t ns;
} sleep_args;
mx_status k_sleep_flag(void *args, size_t size);

/* Sums all bytes of the argument block into *(int64_t *)block (first 8 bytes = destination). */
mx_status k_sum_bytes(void *args, size_t size);

/* Does nothing. */
mx_status k_noop(void *args, size_t size);

/* Called at the end of every test, once all its objects are destroyed: in AddressSanitizer
 * builds, runs a leak check in the test's process and fails the test if any host memory leaked
 * (the runner ends test processes without the exit-time check). A no-op in other builds. */
void hal_check_leaks(void);

/* Deterministic generator (splitmix64). */
uint64_t hal_rand(uint64_t *state);

#endif /* MIXRT_TESTS_HAL_SUPPORT_HAL_H */
