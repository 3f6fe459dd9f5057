/* Blocking primitives of the HAL: Linux futexes and the spin-then-park wait of host threads.
 *
 * Host threads never spin without bound: a wait spins for the device's spin time (cheap when
 * the device is about to finish; after the first MX__SPIN_PURE_NS each round also yields the
 * processor, so on a machine with more runnable threads than cores the thread being waited for
 * can run), then parks. Parking uses a waiter slot that names the counter and the target, so
 * the device side issues a wake-up system call only when a waiter's condition is met, not on
 * every completion (see mx__waitq in hal_impl.h). */
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/clock.h"
#include "hal/hal_impl.h"

void mx__futex_wait(_Atomic uint32_t *word, uint32_t expected) {
  /* Returns on a wake, a changed word (EAGAIN) or a signal; callers re-check. */
  syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

void mx__futex_wake(_Atomic uint32_t *word, int count) {
  syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, count, NULL, NULL, 0);
}

void mx__waitq_notify(mx__waitq *q, const _Atomic uint64_t *word, uint64_t value) {
  if (atomic_load(&q->armed) != 0) {
    for (int i = 0; i < MX__WAIT_SLOTS; i++) {
      mx__waiter *w = &q->slot[i];
      if (atomic_load(&w->state) != 2 || atomic_load(&w->word) != (uintptr_t)word ||
          value < atomic_load(&w->target))
        continue;
      /* A slot re-armed meanwhile for another wait may be woken spuriously; it re-checks. */
      uint32_t armed = 2;
      if (!atomic_compare_exchange_strong(&w->state, &armed, 3)) continue;
      atomic_fetch_add(&w->futex, 1);
      mx__futex_wake(&w->futex, 1);
    }
  }
  if (atomic_load(&q->bcast_waiters) != 0) {
    atomic_fetch_add(&q->bcast, 1);
    mx__futex_wake(&q->bcast, INT_MAX);
  }
}

/* Parks on the broadcast word (every slot taken). */
static void park_broadcast(mx__waitq *q, _Atomic uint64_t *word, uint64_t target) {
  atomic_fetch_add(&q->bcast_waiters, 1);
  for (;;) {
    uint32_t seen = atomic_load(&q->bcast);
    if (atomic_load(word) >= target) break;
    mx__futex_wait(&q->bcast, seen);
  }
  atomic_fetch_sub(&q->bcast_waiters, 1);
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
  mx__waiter *w = NULL;
  for (int i = 0; i < MX__WAIT_SLOTS && !w; i++) {
    uint32_t free_state = 0;
    if (atomic_compare_exchange_strong(&q->slot[i].state, &free_state, 1)) w = &q->slot[i];
  }
  if (!w) {
    park_broadcast(q, word, target);
    return;
  }
  atomic_store(&w->word, (uintptr_t)word);
  atomic_store(&w->target, target);
  atomic_fetch_add(&q->armed, 1);
  for (;;) {
    uint32_t seen = atomic_load(&w->futex);
    atomic_store(&w->state, 2);
    if (atomic_load(word) >= target) break;
    mx__futex_wait(&w->futex, seen);
  }
  atomic_fetch_sub(&q->armed, 1);
  atomic_store(&w->state, 0);
}
