/* Monotonic time in nanoseconds, for statistics and benchmarks; and a cheaper tick counter for
 * per-step statistics taken many times a step (the x86 time-stamp counter, invariant on the
 * machines mixrt targets; elsewhere the same nanoseconds), converted to nanoseconds with a
 * ratio the caller measures against mx__now_ns over a long interval. */
#ifndef MIXRT_COMMON_CLOCK_H
#define MIXRT_COMMON_CLOCK_H

#include <stdatomic.h>
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

/* Converts ticks to nanoseconds by the ratio of both clocks since the converter was started,
 * measured again only when 2^26 ticks (tens of ms) have passed since the last measure: the
 * per-step statistics convert several times a step, and a clock_gettime each time would cost
 * more than the tick reads save. Threads may share one; racing re-measures agree closely. */
typedef struct mx__tick_clock {
  uint64_t tick0, ns0;        /* both clocks at mx__tick_clock_start */
  _Atomic uint64_t cal_ticks; /* mx__ticks at the last measure (0: none yet) */
  _Atomic double ns_per_tick; /* the ratio then */
} mx__tick_clock;

static inline void mx__tick_clock_start(mx__tick_clock *c) {
  c->tick0 = mx__ticks();
  c->ns0 = mx__now_ns();
  atomic_store_explicit(&c->cal_ticks, 0, memory_order_relaxed);
  atomic_store_explicit(&c->ns_per_tick, 1.0, memory_order_relaxed);
}

static inline double mx__tick_clock_ratio(mx__tick_clock *c) {
  uint64_t now = mx__ticks(), cal = atomic_load_explicit(&c->cal_ticks, memory_order_relaxed);
  if (cal && now - cal < ((uint64_t)1 << 26))
    return atomic_load_explicit(&c->ns_per_tick, memory_order_relaxed);
  uint64_t ns = mx__now_ns();
  double r = now > c->tick0 && ns > c->ns0 ? (double)(ns - c->ns0) / (double)(now - c->tick0) : 1.0;
  atomic_store_explicit(&c->ns_per_tick, r, memory_order_relaxed);
  atomic_store_explicit(&c->cal_ticks, now, memory_order_relaxed);
  return r;
}

#endif /* MIXRT_COMMON_CLOCK_H */
