/* Monotonic time in nanoseconds, for statistics and benchmarks. */
#ifndef MIXRT_COMMON_CLOCK_H
#define MIXRT_COMMON_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t mx__now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif /* MIXRT_COMMON_CLOCK_H */
