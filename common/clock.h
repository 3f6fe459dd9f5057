/* Monotonic time in nanoseconds, for statistics and benchmarks; and a cheaper tick counter for
 * per-step statistics taken many times a step (the x86 time-stamp counter, invariant on the
 * machines mixrt targets; elsewhere the same nanoseconds), converted to nanoseconds with a
 * ratio the caller measures against mx__now_ns over a long interval. */
#ifndef MIXRT_COMMON_CLOCK_H
#define MIXRT_COMMON_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t mx__now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t mx__ticks(void) {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_ia32_rdtsc();
#else
  return mx__now_ns();
#endif
}

/* Nanoseconds per tick: the ratio of both clocks since (tick0, ns0), read together earlier
 * (1 when no time has passed on either). */
static inline double mx__ns_per_tick(uint64_t tick0, uint64_t ns0) {
  uint64_t ticks = mx__ticks(), ns = mx__now_ns();
  return ticks > tick0 && ns > ns0 ? (double)(ns - ns0) / (double)(ticks - tick0) : 1.0;
}

#endif /* MIXRT_COMMON_CLOCK_H */
