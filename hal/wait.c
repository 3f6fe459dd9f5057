/* Blocking primitives of the HAL: Linux futexes and a spin-then-park wait for host threads.
 *
 * Host threads never spin without bound: a wait spins for the device's spin time (cheap when
 * the device is about to finish) and then parks on a futex word that device-side progress
 * bumps. After the first MX__SPIN_PURE_NS of spinning, each round also yields the processor,
 * so on a machine with more runnable threads than cores the thread being waited for can run. The
 * protocol is an eventcount: the waiter registers, re-reads the condition and parks only if the
 * word did not move; the notifier publishes progress with a sequentially consistent store, then
 * reads the waiter count, so one of the two always sees the other. */
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/clock.h"
#include "hal/hal-impl.h"

void mx__futex_wait(_Atomic uint32_t *word, uint32_t expected) {
  /* Returns on a wake, a changed word (EAGAIN) or a signal; callers re-check. */
  syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

void mx__futex_wake(_Atomic uint32_t *word, int count) {
  syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, count, NULL, NULL, 0);
}

void mx__waitq_notify(mx__waitq *q) {
  if (atomic_load(&q->waiters) == 0) return;
  atomic_fetch_add(&q->word, 1);
  mx__futex_wake(&q->word, INT_MAX);
}

void mx__waitq_wait_ge(mx__waitq *q, _Atomic uint64_t *word, uint64_t target, int64_t spin_ns) {
  if (atomic_load(word) >= target) return;
  if (spin_ns > 0) {
    uint64_t start = mx__now_ns();
    for (unsigned i = 1;; i++) {
      mx__cpu_relax();
      if (atomic_load(word) >= target) return;
      if ((i & 63) != 0) continue;
      uint64_t spent = mx__now_ns() - start;
      if (spent >= (uint64_t)spin_ns) break;
      if (spent >= MX__SPIN_PURE_NS) sched_yield();
    }
  }
  atomic_fetch_add(&q->waiters, 1);
  for (;;) {
    uint32_t seen = atomic_load(&q->word);
    if (atomic_load(word) >= target) break;
    mx__futex_wait(&q->word, seen);
  }
  atomic_fetch_sub(&q->waiters, 1);
}
