/* Fault injection end to end through sessions.
 *
 * For a full decode step of the tiny llama and for a mixture-of-experts step, a counting run
 * first finds how many device allocations, copies, launches and kernels the step makes (and
 * loading the model before it), using the device's fault counters with every point armed past
 * reach. Then, for every point and every N from 1 to that count, a new session runs the same
 * sequence with its device armed to fail the Nth operation of that point inside the step (see
 * arm() for why the number is set when the step starts): the step must
 * return an error whose message carries the injected fault and names the op, value, constant
 * or partition it hit; the same step run again on the same session must succeed and equal the
 * reference interpreter bit for bit, and so must the step after it; the device memory held
 * afterwards must equal the counting run's. Faults during loading are swept the same way: the
 * load fails naming what it hit, and loading again on the same session works. Host leaks fail
 * the tests in the AddressSanitizer build (tests/support/support_leak_check.c).
 *
 * Configurations: the inline device (every failure surfaces in the calling thread), the CPU
 * device with two streams and the topological executor (kernel and copy failures surface
 * asynchronously, when the step waits for its streams), and for the llama step also the
 * multi-thread executor (a failure in one worker while others run). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hal/hal_impl.h"
#include "reliability/reliability.h"

/* What a sweep drives: load, the steps before the one under test, the step, the step after. */
typedef struct workload {
  const char *name;
  void *state;
  const mx_graph *names; /* graph whose node and value names messages may quote (borrowed) */
  void (*reset)(void *state);
  mx_status (*load)(void *state, mx_session *s);
  mx_status (*warm)(void *state, mx_session *s, char *why, size_t cap);
  mx_status (*step)(void *state, mx_session *s, unsigned flags, char *why, size_t cap);
  mx_status (*after)(void *state, mx_session *s, char *why, size_t cap);
} workload;

typedef struct config {
  const char *name;
  mx_device_kind kind;
  uint32_t streams;
  mx_executor_kind executor;
} config;

static const config configs[] = {
    {"inline device, 1 stream, sequential", MX_DEVICE_INLINE, 1, MX_EXECUTOR_SEQUENTIAL},
    {"CPU device, 2 streams, topological", MX_DEVICE_CPU, 2, MX_EXECUTOR_TOPOLOGICAL},
    {"CPU device, 2 streams, multi-thread", MX_DEVICE_CPU, 2, MX_EXECUTOR_MULTI_THREAD},
};

static const char *const point_names[MX_FAULT_POINT_COUNT] = {"alloc", "copy", "launch", "kernel"};

/* --- llama workload -------------------------------------------------------------------------- */

static void llama_reset(void *st) { mxr_llama_reset(st); }
static mx_status llama_load(void *st, mx_session *s) { return mxr_llama_load(st, s); }
static mx_status llama_warm(void *st, mx_session *s, char *why, size_t cap) {
  mx_status r = mxr_llama_step(st, s, 3, MXR_CHECK | MXR_ADVANCE, why, cap);
  return r == MX_OK ? mxr_llama_step(st, s, 5, MXR_CHECK | MXR_ADVANCE, why, cap) : r;
}
static mx_status llama_step(void *st, mx_session *s, unsigned flags, char *why, size_t cap) {
  return mxr_llama_step(st, s, 9, flags, why, cap);
}
static mx_status llama_after(void *st, mx_session *s, char *why, size_t cap) {
  return mxr_llama_step(st, s, 11, MXR_CHECK | MXR_ADVANCE, why, cap);
}

/* --- moe workload ---------------------------------------------------------------------------- */

static void moe_reset(void *st) { (void)st; }
static mx_status moe_load(void *st, mx_session *s) { return mxr_moe_load(st, s); }
static mx_status moe_warm(void *st, mx_session *s, char *why, size_t cap) {
  mx_status r = mxr_moe_step(st, s, 5, 1, MXR_CHECK, why, cap);
  return r == MX_OK ? mxr_moe_step(st, s, 3, 2, MXR_CHECK, why, cap) : r;
}
static mx_status moe_step(void *st, mx_session *s, unsigned flags, char *why, size_t cap) {
  return mxr_moe_step(st, s, 7, 3, flags, why, cap);
}
static mx_status moe_after(void *st, mx_session *s, char *why, size_t cap) {
  return mxr_moe_step(st, s, 2, 4, MXR_CHECK, why, cap);
}

/* --- the sweep ------------------------------------------------------------------------------ */

static void counts(mx_session *s, uint64_t out[MX_FAULT_POINT_COUNT]) {
  mx_device *dev = mx_session_device(s);
  for (int p = 0; p < MX_FAULT_POINT_COUNT; p++) out[p] = atomic_load(&dev->fault_count[p]);
}

/* Arms point p to fail the nth operation from now on. The device was created with p armed past
 * reach, so it has counted every operation of p since; the streams are idle here, and the step's
 * submissions order this write before the device side reads it. Arming at the step (rather than
 * an absolute number at creation) keeps the sweep exact where the operations before the step
 * vary from run to run: with two streams on the CPU device, whether the allocator reuses a block
 * freed on the other stream depends on timing. */
static void arm(mx_session *s, int p, uint64_t nth) {
  mx_device *dev = mx_session_device(s);
  dev->fault_nth[p] = atomic_load(&dev->fault_count[p]) + nth;
}

static mx_session *faulty_session(const config *c, int point, uint64_t nth) {
  mx_device_options o;
  mx_device_options_init(&o);
  o.kind = c->kind;
  o.fault_from_env = false;
  for (int p = 0; p < MX_FAULT_POINT_COUNT; p++) o.fault_nth[p] = point < 0 || p == point ? nth : 0;
  char why[256];
  mx_session *s = mxr_session(&o, c->streams, c->executor, why, sizeof why);
  cr_assert_not_null(s, "%s", why);
  return s;
}

/* True when a quoted name in msg is a node or value of g or a partition call. */
static bool quotes_a_name(const char *msg, const mx_graph *g) {
  const char *p = strchr(msg, '\'');
  while (p) {
    const char *q = strchr(p + 1, '\'');
    if (!q) return false;
    char name[160];
    size_t n = (size_t)(q - p - 1);
    if (n < sizeof name) {
      memcpy(name, p + 1, n);
      name[n] = '\0';
      if (mx_graph_find_node(g, name) != MX_NO_NODE || mx_graph_find_value(g, name) != MX_NO_VALUE ||
          strncmp(name, "partition_", 10) == 0)
        return true;
    }
    p = strchr(q + 1, '\'');
  }
  return false;
}

static void check_message(const workload *w, const config *c, const char *phase, int point, uint64_t n,
                          const char *msg) {
  if (getenv("MIXRT_FAULT_SURVEY")) {
    fprintf(stderr, "%s | %s | %s %s:%llu | %s | %s\n", w->name, c->name, phase, point_names[point],
            (unsigned long long)n, quotes_a_name(msg, w->names) ? "named" : "UNNAMED", msg);
    return;
  }
  cr_assert(strstr(msg, "injected fault"), "%s, %s, %s, %s:%llu: the message does not carry the fault: %s",
            w->name, c->name, phase, point_names[point], (unsigned long long)n, msg);
  cr_assert(quotes_a_name(msg, w->names),
            "%s, %s, %s, %s:%llu: the message names no op, value or partition: %s", w->name, c->name, phase,
            point_names[point], (unsigned long long)n, msg);
}

typedef struct sweep_totals {
  uint64_t load[MX_FAULT_POINT_COUNT]; /* operations while loading */
  uint64_t step[MX_FAULT_POINT_COUNT]; /* operations of the step under test */
  uint64_t faults;                     /* faults injected and handled */
  uint64_t absorbed;                   /* of which the runtime recovered from (step succeeded) */
  uint64_t not_reached;                /* the step made fewer operations of the point this time */
} sweep_totals;

/* warm: run the workload's steps before the step under test (a warm allocator cache); cold: the
 * step under test is the first after loading, so allocation faults cannot be absorbed. */
static void sweep(const workload *w, const config *c, bool warm, sweep_totals *tot) {
  char why[512];
  memset(tot, 0, sizeof *tot);
  /* Counting run: every point armed beyond reach counts without failing. */
  mx_session *s = faulty_session(c, -1, UINT64_MAX);
  uint64_t c0[MX_FAULT_POINT_COUNT], c1[MX_FAULT_POINT_COUNT], c2[MX_FAULT_POINT_COUNT];
  w->reset(w->state);
  cr_assert_eq(w->load(w->state, s), MX_OK, "%s", mx_session_last_error(s));
  counts(s, c0);
  if (warm) cr_assert_eq(w->warm(w->state, s, why, sizeof why), MX_OK, "%s: %s", w->name, why);
  counts(s, c1);
  cr_assert_eq(w->step(w->state, s, MXR_CHECK | MXR_ADVANCE, why, sizeof why), MX_OK, "%s: %s", w->name, why);
  counts(s, c2);
  cr_assert_eq(w->after(w->state, s, why, sizeof why), MX_OK, "%s: %s", w->name, why);
  mx_device_memory_stats clean;
  mx_device_memory_stats_get(mx_session_device(s), &clean);
  mx_session_stats clean_ss;
  cr_assert_eq(mx_session_get_stats(s, NULL, &clean_ss), MX_OK);
  mx_session_destroy(s);
  for (int p = 0; p < MX_FAULT_POINT_COUNT; p++) {
    tot->load[p] = c0[p];
    tot->step[p] = c2[p] - c1[p];
  }
  cr_assert_gt(tot->step[MX_FAULT_ALLOC] + tot->step[MX_FAULT_COPY] + tot->step[MX_FAULT_LAUNCH] +
                   tot->step[MX_FAULT_KERNEL],
               0, "the step makes no device operation");

  /* Faults inside the step under test. */
  for (int p = 0; p < MX_FAULT_POINT_COUNT; p++) {
    for (uint64_t n = 1; n <= tot->step[p]; n++) {
      s = faulty_session(c, p, UINT64_MAX);
      w->reset(w->state);
      cr_assert_eq(w->load(w->state, s), MX_OK, "%s, %s: %s", w->name, c->name, mx_session_last_error(s));
      if (warm)
        cr_assert_eq(w->warm(w->state, s, why, sizeof why), MX_OK,
                     "%s, %s, %s:%llu: a step before failed: %s", w->name, c->name, point_names[p],
                     (unsigned long long)n, why);
      uint64_t before[MX_FAULT_POINT_COUNT];
      counts(s, before);
      arm(s, p, n);
      /* Checked against the reference too: an allocation fault the allocator absorbs (it
       * releases its cache and retries) gives a step that succeeds, and must be right. */
      mx_status st = w->step(w->state, s, MXR_CHECK, why, sizeof why);
      cr_assert_neq(st, MX_ERR_INTERNAL, "%s, %s, %s:%llu: wrong result: %s", w->name, c->name,
                    point_names[p], (unsigned long long)n, why);
      uint64_t seen[MX_FAULT_POINT_COUNT];
      counts(s, seen);
      if (seen[p] < before[p] + n) {
        /* Fewer operations of p than in the counting run (possible with two streams: see arm). */
        tot->not_reached++;
        mx_session_destroy(s);
        continue;
      }
      if (st == MX_OK) {
        cr_assert_eq(p, MX_FAULT_ALLOC, "%s, %s: fault %s:%llu of the step went unnoticed", w->name, c->name,
                     point_names[p], (unsigned long long)n);
        tot->absorbed++;
      } else {
        check_message(w, c, "step", p, n, why);
      }
      st = w->step(w->state, s, MXR_CHECK | MXR_ADVANCE, why, sizeof why);
      cr_assert_eq(st, MX_OK, "%s, %s, %s:%llu: the step again after the fault: %s", w->name, c->name,
                   point_names[p], (unsigned long long)n, why);
      st = w->after(w->state, s, why, sizeof why);
      cr_assert_eq(st, MX_OK, "%s, %s, %s:%llu: the step after: %s", w->name, c->name, point_names[p],
                   (unsigned long long)n, why);
      /* Device memory: the allocator holds no block outside its cache after the steps, and
       * everything outside the cache (weights, constants, arenas) is what the run without the
       * fault holds. The cache itself may differ (an absorbed fault empties it; with two
       * streams a block may be cached for another stream). */
      mx_device_memory_stats ms;
      mx_device_memory_stats_get(mx_session_device(s), &ms);
      mx_session_stats ss;
      cr_assert_eq(mx_session_get_stats(s, NULL, &ss), MX_OK);
      cr_assert_eq(ss.bytes_in_use, clean_ss.bytes_in_use,
                   "%s, %s, %s:%llu: %llu bytes of allocator blocks in use", w->name, c->name, point_names[p],
                   (unsigned long long)n, (unsigned long long)ss.bytes_in_use);
      cr_assert_eq(
          ms.bytes_in_use - ss.bytes_cached, clean.bytes_in_use - clean_ss.bytes_cached,
          "%s, %s, %s:%llu: %llu device bytes held outside the allocator's cache, %llu without the fault",
          w->name, c->name, point_names[p], (unsigned long long)n,
          (unsigned long long)(ms.bytes_in_use - ss.bytes_cached),
          (unsigned long long)(clean.bytes_in_use - clean_ss.bytes_cached));
      mx_session_destroy(s);
      tot->faults++;
    }
  }

  /* Faults while loading: the load fails, a second load on the same session works. */
  for (int p = 0; p < MX_FAULT_POINT_COUNT; p++) {
    for (uint64_t n = 1; n <= tot->load[p]; n++) {
      s = faulty_session(c, p, n);
      w->reset(w->state);
      mx_status st = w->load(w->state, s);
      cr_assert_neq(st, MX_OK, "%s, %s: fault %s:%llu while loading went unnoticed", w->name, c->name,
                    point_names[p], (unsigned long long)n);
      check_message(w, c, "load", p, n, mx_session_last_error(s));
      cr_assert_eq(w->load(w->state, s), MX_OK, "%s, %s, %s:%llu: loading again: %s", w->name, c->name,
                   point_names[p], (unsigned long long)n, mx_session_last_error(s));
      cr_assert_eq(w->warm(w->state, s, why, sizeof why), MX_OK,
                   "%s, %s, %s:%llu: steps after loading again: %s", w->name, c->name, point_names[p],
                   (unsigned long long)n, why);
      mx_session_destroy(s);
      tot->faults++;
    }
  }
}

static void report(const workload *w, const config *c, bool warm, const sweep_totals *t) {
  cr_log_info(
      "%s (%s), %s: step = %llu allocs, %llu copies, %llu launches, %llu kernels; load = %llu allocs, "
      "%llu copies, %llu launches, %llu kernels; %llu faults injected, %llu absorbed, %llu not reached",
      w->name, warm ? "warm" : "cold", c->name, (unsigned long long)t->step[0],
      (unsigned long long)t->step[1], (unsigned long long)t->step[2], (unsigned long long)t->step[3],
      (unsigned long long)t->load[0], (unsigned long long)t->load[1], (unsigned long long)t->load[2],
      (unsigned long long)t->load[3], (unsigned long long)t->faults, (unsigned long long)t->absorbed,
      (unsigned long long)t->not_reached);
}

static void llama_sweep(const config *c, bool warm) {
  mxr_llama l;
  cr_assert_eq(mxr_llama_init(&l, NULL), MX_OK);
  workload w = {"llama decode step", &l, l.ref, llama_reset, llama_load, llama_warm, llama_step, llama_after};
  sweep_totals t;
  sweep(&w, c, warm, &t);
  report(&w, c, warm, &t);
  mxr_llama_free(&l);
}

static void moe_sweep(const config *c, bool warm) {
  mxr_moe m;
  cr_assert_eq(mxr_moe_init(&m), MX_OK);
  workload w = {"moe step", &m, m.ref, moe_reset, moe_load, moe_warm, moe_step, moe_after};
  sweep_totals t;
  sweep(&w, c, warm, &t);
  report(&w, c, warm, &t);
  mxr_moe_free(&m);
}

/* The ThreadSanitizer build leaves the inline-device sweeps out: that device runs every operation
 * in the calling thread and surfaces every failure there, so TSan has no hand-off to check in them
 * that the CPU-device sweeps below do not also take; the Release and ASan builds run them. */
#if defined(__SANITIZE_THREAD__)
#define INLINE_SWEEPS_OFF true
#else
#define INLINE_SWEEPS_OFF false
#endif

Test(fault, llama_decode_step_inline_device, .disabled = INLINE_SWEEPS_OFF) {
  llama_sweep(&configs[0], true);
}
Test(fault, llama_decode_step_cpu_device_2_streams) { llama_sweep(&configs[1], true); }
Test(fault, llama_first_step_inline_device, .disabled = INLINE_SWEEPS_OFF) {
  llama_sweep(&configs[0], false);
}
Test(fault, llama_first_step_cpu_device_2_streams) { llama_sweep(&configs[1], false); }
Test(fault, llama_decode_step_multi_thread_executor) { llama_sweep(&configs[2], true); }
Test(fault, moe_step_inline_device, .disabled = INLINE_SWEEPS_OFF) { moe_sweep(&configs[0], true); }
Test(fault, moe_step_cpu_device_2_streams) { moe_sweep(&configs[1], true); }
Test(fault, moe_first_step_inline_device, .disabled = INLINE_SWEEPS_OFF) { moe_sweep(&configs[0], false); }
Test(fault, moe_first_step_cpu_device_2_streams) { moe_sweep(&configs[1], false); }
