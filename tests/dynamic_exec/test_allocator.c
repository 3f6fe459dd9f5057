/* The caching device allocator: size classes, same-stream reuse at once, cross-stream reuse only
 * after the freeing stream (and every stream recorded as a user) is past the free, statistics,
 * trim, out-of-memory recovery, forgotten streams, bad frees; a randomized stress over several
 * streams in checking mode whose blocks carry patterns verified in stream order (a block handed
 * out while still in use would be overwritten before its verification); a steady state
 * without device allocations; and several threads sharing one allocator. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "hal/hal.h"
#include "support_dyn.h"

/* --- device-side helpers ---------------------------------------------------------------------- */

/* Blocks its stream until *open is set. */
typedef struct gate_args {
  atomic_int *open;
} gate_args;

static mx_status k_gate(void *args, size_t size) {
  (void)size;
  gate_args *a = args;
  while (!atomic_load(a->open)) {
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
  return MX_OK;
}

/* Checks that every byte of [p, p + n) is `byte` (after an optional pause). */
typedef struct verify_args {
  const unsigned char *p;
  size_t n;
  int byte;
  int pause_us;
  atomic_int *failures;
} verify_args;

static mx_status k_verify(void *args, size_t size) {
  (void)size;
  verify_args *a = args;
  if (a->pause_us) {
    struct timespec ts = {0, (long)a->pause_us * 1000};
    nanosleep(&ts, NULL);
  }
  for (size_t i = 0; i < a->n; i++) {
    if (a->p[i] != (unsigned char)a->byte) {
      atomic_fetch_add(a->failures, 1);
      break;
    }
  }
  return MX_OK;
}

static mx_caching_allocator *new_alloc(mx_device *dev) {
  mx_caching_allocator *a;
  mx_error err;
  cr_assert_eq(mx__caching_allocator_create(dev, &a, &err), MX_OK, "%s", err.message);
  return a;
}

static mx_caching_stats stats(mx_caching_allocator *a) {
  mx_caching_stats st;
  mx__caching_stats_get(a, &st);
  return st;
}

/* --- basics ----------------------------------------------------------------------------------- */

Test(dyn_allocator, size_classes) {
  cr_expect_eq(mx__caching_class_size(0), 0);
  cr_expect_eq(mx__caching_class_size(1), 256);
  cr_expect_eq(mx__caching_class_size(256), 256);
  cr_expect_eq(mx__caching_class_size(257), 320);
  cr_expect_eq(mx__caching_class_size(512), 512);
  cr_expect_eq(mx__caching_class_size(513), 640);
  cr_expect_eq(mx__caching_class_size(1000), 1024);
  cr_expect_eq(mx__caching_class_size(1025), 1280);
  cr_expect_eq(mx__caching_class_size(3 << 20), 3 << 20);
  for (size_t s = 1; s < (1u << 22); s = s * 3 + 1) {
    size_t c = mx__caching_class_size(s);
    cr_expect(c >= s && c <= s + s / 4 + 256, "class %zu for %zu", c, s);
  }
}

Test(dyn_allocator, same_stream_reuse_and_stats) {
  mx_device *dev = dyn_device(MX_DEVICE_CPU, true);
  mx_stream *s;
  cr_assert_eq(mx_stream_create(dev, 0, &s), MX_OK);
  mx_caching_allocator *a = new_alloc(dev);
  void *p, *q, *z;
  cr_assert_eq(mx__caching_alloc(a, 0, s, &z, NULL), MX_OK);
  cr_expect_null(z);
  cr_assert_eq(mx__caching_alloc(a, 1000, s, &p, NULL), MX_OK);
  cr_assert_not_null(p);
  cr_expect_eq((uintptr_t)p % MX_CACHING_ALIGN, 0);
  mx_caching_stats st = stats(a);
  cr_expect_eq(st.bytes_in_use, 1024);
  cr_expect_eq(st.bytes_requested, 1000);
  cr_expect_eq(st.misses, 1);
  cr_expect_eq(st.device_allocs, 1);
  cr_assert_eq(mx_device_memset_async(s, p, 7, 1000), MX_OK);
  cr_assert_eq(mx__caching_free(a, p, s, NULL), MX_OK);
  st = stats(a);
  cr_expect_eq(st.bytes_in_use, 0);
  cr_expect_eq(st.bytes_cached, 1024);
  cr_expect_eq(st.peak_in_use, 1024);
  /* Same class on the same stream: the cached block at once, no device allocation. */
  cr_assert_eq(mx__caching_alloc(a, 900, s, &q, NULL), MX_OK);
  cr_expect_eq(q, p);
  st = stats(a);
  cr_expect_eq(st.hits, 1);
  cr_expect_eq(st.device_allocs, 1);
  cr_expect_eq(st.bytes_cached, 0);
  /* Bad frees. */
  mx_error err;
  char local;
  cr_expect_eq(mx__caching_free(a, &local, s, &err), MX_ERR_INVALID_ARGUMENT);
  cr_expect(strstr(err.message, "not a live block"));
  cr_assert_eq(mx__caching_free(a, q, s, NULL), MX_OK);
  cr_expect_eq(mx__caching_free(a, q, s, NULL), MX_ERR_INVALID_ARGUMENT, "double free");
  cr_expect_eq(mx__caching_free(a, NULL, s, NULL), MX_OK);
  mx__caching_reset_peak(a);
  cr_expect_eq(stats(a).peak_in_use, 0);
  cr_assert_eq(mx_stream_synchronize(s), MX_OK);
  mx__caching_allocator_destroy(a);
  mx__caching_allocator_destroy(NULL);
  mx_device_memory_stats ds;
  mx_device_memory_stats_get(dev, &ds);
  cr_expect_eq(ds.live, 0, "destroy returns every block");
  mx_stream_destroy(s);
  mx_device_destroy(dev);
  dyn_check_leaks();
}

/* A block freed on a busy stream is not taken by another stream until that stream is past the
 * free; then it is. */
Test(dyn_allocator, cross_stream_waits_for_the_free) {
  mx_device *dev = dyn_device(MX_DEVICE_CPU, true);
  mx_stream *s, *t;
  cr_assert_eq(mx_stream_create(dev, 0, &s), MX_OK);
  cr_assert_eq(mx_stream_create(dev, 0, &t), MX_OK);
  mx_caching_allocator *a = new_alloc(dev);
  atomic_int open = 0;
  gate_args ga = {&open};
  void *p, *q, *r;
  cr_assert_eq(mx__caching_alloc(a, 4096, s, &p, NULL), MX_OK);
  cr_assert_eq(mx__hal_launch(s, k_gate, &ga, sizeof ga), MX_OK);
  cr_assert_eq(mx_device_memset_async(s, p, 1, 4096), MX_OK);
  cr_assert_eq(mx__caching_free(a, p, s, NULL), MX_OK);
  cr_assert_eq(mx__caching_alloc(a, 4096, t, &q, NULL), MX_OK);
  cr_expect_neq(q, p, "stream s is not past the free yet");
  cr_expect_eq(stats(a).device_allocs, 2);
  atomic_store(&open, 1);
  cr_assert_eq(mx_stream_synchronize(s), MX_OK);
  cr_assert_eq(mx__caching_alloc(a, 4096, t, &r, NULL), MX_OK);
  cr_expect_eq(r, p, "stream s is past the free now");
  mx_caching_stats st = stats(a);
  cr_expect_eq(st.cross_stream_hits, 1);
  cr_expect_eq(st.device_allocs, 2);
  cr_expect_geq(st.fences, 1);
  mx__caching_free(a, q, t, NULL);
  mx__caching_free(a, r, t, NULL);
  cr_assert_eq(mx_stream_synchronize(t), MX_OK);
  mx__caching_allocator_destroy(a);
  mx_stream_destroy(s);
  mx_stream_destroy(t);
  mx_device_destroy(dev);
  dyn_check_leaks();
}

/* A block also used on another stream is not reused, even on its own stream, before that
 * stream is past the free. */
Test(dyn_allocator, record_stream_delays_reuse) {
  mx_device *dev = dyn_device(MX_DEVICE_CPU, true);
  mx_stream *s, *t;
  cr_assert_eq(mx_stream_create(dev, 0, &s), MX_OK);
  cr_assert_eq(mx_stream_create(dev, 0, &t), MX_OK);
  mx_caching_allocator *a = new_alloc(dev);
  atomic_int open = 0, failures = 0;
  gate_args ga = {&open};
  void *p, *q, *r;
  cr_assert_eq(mx__caching_alloc(a, 2000, s, &p, NULL), MX_OK);
  cr_assert_eq(mx_device_memset(dev, p, 5, 2000), MX_OK);
  cr_assert_eq(mx__hal_launch(t, k_gate, &ga, sizeof ga), MX_OK);
  verify_args va = {p, 2000, 5, 0, &failures};
  cr_assert_eq(mx__hal_host_callback(t, k_verify, &va, sizeof va), MX_OK);
  cr_assert_eq(mx__caching_record_stream(a, p, t, NULL), MX_OK);
  cr_assert_eq(mx__caching_free(a, p, s, NULL), MX_OK);
  cr_assert_eq(mx__caching_alloc(a, 2000, s, &q, NULL), MX_OK);
  cr_expect_neq(q, p, "stream t still reads the block");
  cr_assert_eq(mx_device_memset_async(s, q, 9, 2000), MX_OK);
  atomic_store(&open, 1);
  cr_assert_eq(mx_stream_synchronize(t), MX_OK);
  cr_expect_eq(atomic_load(&failures), 0);
  cr_assert_eq(mx__caching_alloc(a, 2000, s, &r, NULL), MX_OK);
  cr_expect_eq(r, p);
  mx__caching_free(a, q, s, NULL);
  mx__caching_free(a, r, s, NULL);
  cr_assert_eq(mx_stream_synchronize(s), MX_OK);
  mx__caching_allocator_destroy(a);
  mx_stream_destroy(s);
  mx_stream_destroy(t);
  mx_device_destroy(dev);
  dyn_check_leaks();
}

Test(dyn_allocator, idle_free_trim_forget) {
  mx_device *dev = dyn_device(MX_DEVICE_CPU, true);
  mx_stream *s, *t;
  cr_assert_eq(mx_stream_create(dev, 0, &s), MX_OK);
  cr_assert_eq(mx_stream_create(dev, 0, &t), MX_OK);
  mx_caching_allocator *a = new_alloc(dev);
  void *p[6], *q;
  for (int i = 0; i < 6; i++)
    cr_assert_eq(mx__caching_alloc(a, 300 + 1000 * (size_t)i, s, &p[i], NULL), MX_OK);
  /* Freed with no pending use: any stream may take it at once. */
  cr_assert_eq(mx__caching_free(a, p[0], NULL, NULL), MX_OK);
  cr_assert_eq(mx__caching_alloc(a, 300, t, &q, NULL), MX_OK);
  cr_expect_eq(q, p[0]);
  cr_assert_eq(mx__caching_free(a, q, t, NULL), MX_OK);
  for (int i = 1; i < 6; i++) cr_assert_eq(mx__caching_free(a, p[i], s, NULL), MX_OK);
  mx_caching_stats st = stats(a);
  cr_expect_eq(st.blocks_cached, 6);
  cr_assert_eq(mx__caching_trim(a, NULL), MX_OK);
  st = stats(a);
  cr_expect_eq(st.blocks_cached, 0);
  cr_expect_eq(st.bytes_cached, 0);
  cr_expect_eq(st.device_frees, 6);
  mx_device_memory_stats ds;
  mx_device_memory_stats_get(dev, &ds);
  cr_expect_eq(ds.live, 0);
  /* Forgetting a stream makes its cached blocks everybody's. */
  cr_assert_eq(mx__caching_alloc(a, 5000, t, &q, NULL), MX_OK);
  cr_assert_eq(mx__caching_free(a, q, t, NULL), MX_OK);
  mx__caching_forget_stream(a, t);
  mx_stream_destroy(t);
  void *r;
  cr_assert_eq(mx__caching_alloc(a, 5000, s, &r, NULL), MX_OK);
  cr_expect_eq(r, q);
  cr_expect_eq(stats(a).cross_stream_hits, 2, "the idle block taken by t, then q taken by s");
  mx__caching_free(a, r, s, NULL);
  mx__caching_forget_stream(a, NULL);
  mx__caching_allocator_destroy(a);
  mx_stream_destroy(s);
  mx_device_destroy(dev);
  dyn_check_leaks();
}

/* With a device memory limit, a request that does not fit releases the cache and retries. */
Test(dyn_allocator, out_of_memory_releases_the_cache) {
  mx_device_options o;
  mx_device_options_init(&o);
  o.check = MX_CHECK_ON;
  o.fault_from_env = false;
  o.memory_limit = 64 * 1024;
  mx_device *dev = dyn_device_opts(&o);
  mx_stream *s;
  cr_assert_eq(mx_stream_create(dev, 0, &s), MX_OK);
  mx_caching_allocator *a = new_alloc(dev);
  void *p, *q, *r;
  cr_assert_eq(mx__caching_alloc(a, 40 * 1024, s, &p, NULL), MX_OK);
  cr_assert_eq(mx_device_memset_async(s, p, 1, 40 * 1024), MX_OK);
  cr_assert_eq(mx__caching_free(a, p, s, NULL), MX_OK);
  cr_assert_eq(mx__caching_alloc(a, 48 * 1024, s, &q, NULL), MX_OK);
  mx_caching_stats st = stats(a);
  cr_expect_eq(st.device_frees, 1);
  cr_expect_eq(st.bytes_cached, 0);
  mx_error err;
  cr_expect_eq(mx__caching_alloc(a, 32 * 1024, s, &r, &err), MX_ERR_DEVICE_OOM);
  cr_expect_null(r);
  cr_expect(strstr(err.message, "device allocation"), "%s", err.message);
  mx__caching_free(a, q, s, NULL);
  cr_assert_eq(mx_stream_synchronize(s), MX_OK);
  mx__caching_allocator_destroy(a);
  mx_stream_destroy(s);
  mx_device_destroy(dev);
  dyn_check_leaks();
}

Test(dyn_allocator, stream_limit) {
  mx_device *dev = dyn_device(MX_DEVICE_INLINE, false);
  mx_caching_allocator *a = new_alloc(dev);
  mx_stream *s[MX_CACHING_MAX_STREAMS + 1];
  void *p[MX_CACHING_MAX_STREAMS + 1];
  for (int i = 0; i <= MX_CACHING_MAX_STREAMS; i++) cr_assert_eq(mx_stream_create(dev, 0, &s[i]), MX_OK);
  for (int i = 0; i < MX_CACHING_MAX_STREAMS; i++)
    cr_assert_eq(mx__caching_alloc(a, 64, s[i], &p[i], NULL), MX_OK);
  mx_error err;
  cr_expect_eq(mx__caching_alloc(a, 64, s[MX_CACHING_MAX_STREAMS], &p[MX_CACHING_MAX_STREAMS], &err),
               MX_ERR_LIMIT);
  cr_expect(strstr(err.message, "streams"));
  for (int i = 0; i < MX_CACHING_MAX_STREAMS; i++) cr_assert_eq(mx__caching_free(a, p[i], s[i], NULL), MX_OK);
  mx__caching_forget_stream(a, s[0]);
  cr_expect_eq(mx__caching_alloc(a, 64, s[MX_CACHING_MAX_STREAMS], &p[0], NULL), MX_OK,
               "a forgotten slot is reused");
  cr_assert_eq(mx__caching_free(a, p[0], s[MX_CACHING_MAX_STREAMS], NULL), MX_OK);
  mx__caching_allocator_destroy(a);
  for (int i = 0; i <= MX_CACHING_MAX_STREAMS; i++) mx_stream_destroy(s[i]);
  mx_device_destroy(dev);
  dyn_check_leaks();
}

/* --- randomized stress ------------------------------------------------------------------------ */

#define N_STREAMS 3
#define N_LIVE    24

typedef struct live_block {
  void *p;
  size_t n;
  int byte;       /* pattern it was filled with */
  int stream;     /* stream it was allocated for (and filled on) */
  unsigned users; /* streams that read it */
} live_block;

/* Orders stream `to` after everything queued on `from` so far. */
static void order_after(mx_stream *to, mx_stream *from, mx_event *ev) {
  cr_assert_eq(mx_event_record(ev, from), MX_OK);
  cr_assert_eq(mx_stream_wait_event(to, ev), MX_OK);
}

static void stress(mx_device_kind kind, uint64_t seed, int rounds) {
  mx_device *dev = dyn_device(kind, true);
  mx_stream *s[N_STREAMS];
  mx_event *ev[N_STREAMS];
  for (int i = 0; i < N_STREAMS; i++) {
    cr_assert_eq(mx_stream_create(dev, 0, &s[i]), MX_OK);
    cr_assert_eq(mx_event_create(dev, &ev[i]), MX_OK);
  }
  mx_caching_allocator *a = new_alloc(dev);
  atomic_int failures = 0;
  live_block live[N_LIVE];
  memset(live, 0, sizeof live);
  int next_byte = 1;
  uint64_t rng = seed;
  for (int r = 0; r < rounds; r++) {
    int k = (int)(dyn_rand(&rng) % N_LIVE);
    live_block *b = &live[k];
    int action = (int)(dyn_rand(&rng) % 10);
    if (!b->p) {
      /* Allocate and fill on a random stream. */
      b->stream = (int)(dyn_rand(&rng) % N_STREAMS);
      static const size_t sizes[] = {1, 700, 3000, 6000};
      b->n = sizes[dyn_rand(&rng) % 4] + (size_t)(dyn_rand(&rng) % 64);
      b->byte = next_byte;
      next_byte = next_byte % 250 + 1;
      b->users = 0;
      cr_assert_eq(mx__caching_alloc(a, b->n, s[b->stream], &b->p, NULL), MX_OK);
      cr_assert_eq(mx_device_memset_async(s[b->stream], b->p, b->byte, b->n), MX_OK);
    } else if (action < 6) {
      /* Read it (slowly) on a random stream ordered after the fill. */
      int t = (int)(dyn_rand(&rng) % N_STREAMS);
      if (t != b->stream) {
        order_after(s[t], s[b->stream], ev[b->stream]);
        cr_assert_eq(mx__caching_record_stream(a, b->p, s[t], NULL), MX_OK);
        b->users |= 1u << t;
      }
      verify_args va = {b->p, b->n, b->byte, (int)(dyn_rand(&rng) % 3) * 40, &failures};
      cr_assert_eq(mx__hal_host_callback(s[t], k_verify, &va, sizeof va), MX_OK);
    } else if (action < 9) {
      /* Free it on its stream (the readers on other streams were recorded). */
      cr_assert_eq(mx__caching_free(a, b->p, s[b->stream], NULL), MX_OK);
      b->p = NULL;
    } else if (dyn_rand(&rng) % 8 == 0) {
      cr_assert_eq(mx__caching_trim(a, NULL), MX_OK);
    }
  }
  for (int k = 0; k < N_LIVE; k++)
    if (live[k].p) cr_assert_eq(mx__caching_free(a, live[k].p, s[live[k].stream], NULL), MX_OK);
  for (int i = 0; i < N_STREAMS; i++) cr_assert_eq(mx_stream_synchronize(s[i]), MX_OK, "checking mode");
  cr_expect_eq(atomic_load(&failures), 0, "a block was handed out while still in use");
  mx_caching_stats st = stats(a);
  cr_expect_eq(st.bytes_in_use, 0);
  cr_expect_gt(st.hits, 0);
  cr_expect_gt(st.cross_stream_hits, 0);
  mx__caching_allocator_destroy(a);
  for (int i = 0; i < N_STREAMS; i++) {
    mx_stream_destroy(s[i]);
    mx_event_destroy(ev[i]);
  }
  mx_device_destroy(dev);
}

Test(dyn_allocator, randomized_streams_cpu) {
  for (uint64_t seed = 1; seed <= 4; seed++) stress(MX_DEVICE_CPU, seed, 1500);
  dyn_check_leaks();
}

Test(dyn_allocator, randomized_streams_inline) {
  stress(MX_DEVICE_INLINE, 99, 3000);
  dyn_check_leaks();
}

/* A repeated pattern of allocations over several streams, each step ending with a fence per
 * stream, reaches a steady state without device allocations (even when the streams are still
 * busy with the next step's first work when it allocates). */
Test(dyn_allocator, steady_state_without_device_allocations) {
  mx_device *dev = dyn_device(MX_DEVICE_CPU, true);
  mx_stream *s[N_STREAMS];
  mx_event *ev;
  cr_assert_eq(mx_event_create(dev, &ev), MX_OK);
  for (int i = 0; i < N_STREAMS; i++) cr_assert_eq(mx_stream_create(dev, 0, &s[i]), MX_OK);
  mx_caching_allocator *a = new_alloc(dev);
  uint64_t allocs_after_warmup = 0;
  for (int step = 0; step < 20; step++) {
    void *p[16];
    for (int i = 0; i < 16; i++) {
      int st = i % N_STREAMS;
      cr_assert_eq(mx__caching_alloc(a, 256 + 777 * (size_t)i, s[st], &p[i], NULL), MX_OK);
      cr_assert_eq(mx_device_memset_async(s[st], p[i], i, 256 + 777 * (size_t)i), MX_OK);
      if (i >= 4) {
        /* Consumed on the next stream, freed there. */
        int t = (st + 1) % N_STREAMS;
        order_after(s[t], s[st], ev);
        cr_assert_eq(mx__caching_free(a, p[i - 4], s[(((i - 4) % N_STREAMS) + 1) % N_STREAMS], NULL), MX_OK);
      }
    }
    for (int i = 12; i < 16; i++) cr_assert_eq(mx__caching_free(a, p[i], s[i % N_STREAMS], NULL), MX_OK);
    for (int i = 0; i < N_STREAMS; i++) mx__caching_fence(a, s[i]);
    for (int i = 0; i < N_STREAMS; i++) cr_assert_eq(mx_stream_synchronize(s[i]), MX_OK);
    if (step == 1) allocs_after_warmup = stats(a).device_allocs;
  }
  cr_expect_eq(stats(a).device_allocs, allocs_after_warmup, "no device allocation in steady state");
  mx__caching_allocator_destroy(a);
  for (int i = 0; i < N_STREAMS; i++) mx_stream_destroy(s[i]);
  mx_event_destroy(ev);
  mx_device_destroy(dev);
  dyn_check_leaks();
}

/* --- threads ---------------------------------------------------------------------------------- */

enum { N_THREADS = 4, THREAD_ROUNDS = 2000 };

typedef struct thread_args {
  mx_caching_allocator *a;
  mx_stream *stream; /* the thread's own stream, or NULL */
  unsigned seed;
  int failures;
} thread_args;

/* Allocates, writes, checks and frees blocks of varied sizes; every other round on its stream,
 * in between with no stream (blocks any thread may take at once). A block handed to two threads
 * at a time would show another thread's byte. */
static void *alloc_thread(void *arg) {
  thread_args *t = arg;
  uint64_t rng = t->seed;
  for (int r = 0; r < THREAD_ROUNDS; r++) {
    size_t n = 64 + dyn_rand(&rng) % 4000;
    mx_stream *s = (r & 1) ? t->stream : NULL;
    void *p;
    if (mx__caching_alloc(t->a, n, s, &p, NULL) != MX_OK) {
      t->failures++;
      continue;
    }
    memset(p, (int)t->seed, n);
    for (size_t k = 0; k < n; k += 97) t->failures += ((unsigned char *)p)[k] != (unsigned char)t->seed;
    if (s) t->failures += mx_stream_synchronize(s) != MX_OK;
    t->failures += mx__caching_free(t->a, p, s, NULL) != MX_OK;
    if (r % 64 == 0) mx__caching_fence(t->a, t->stream);
  }
  return NULL;
}

/* Several threads allocating from one allocator at once (run under TSan by the concurrency
 * label): no block is ever shared, and the statistics add up. */
Test(dyn_allocator, threads_share_one_allocator) {
  mx_device *dev = dyn_device(MX_DEVICE_INLINE, false);
  mx_caching_allocator *a = new_alloc(dev);
  pthread_t th[N_THREADS];
  thread_args args[N_THREADS];
  for (int i = 0; i < N_THREADS; i++) {
    args[i] = (thread_args){.a = a, .seed = 1u + (unsigned)i};
    cr_assert_eq(mx_stream_create(dev, 0, &args[i].stream), MX_OK);
  }
  for (int i = 0; i < N_THREADS; i++) cr_assert_eq(pthread_create(&th[i], NULL, alloc_thread, &args[i]), 0);
  for (int i = 0; i < N_THREADS; i++) cr_assert_eq(pthread_join(th[i], NULL), 0);
  for (int i = 0; i < N_THREADS; i++) cr_expect_eq(args[i].failures, 0, "thread %d", i);
  mx_caching_stats st = stats(a);
  cr_expect_eq(st.allocs, (uint64_t)N_THREADS * THREAD_ROUNDS);
  cr_expect_eq(st.bytes_in_use, 0);
  cr_expect_eq(st.blocks_in_use, 0);
  cr_expect_eq(st.hits + st.misses, st.allocs);
  for (int i = 0; i < N_THREADS; i++) {
    mx__caching_forget_stream(a, args[i].stream);
    mx_stream_destroy(args[i].stream);
  }
  mx__caching_allocator_destroy(a);
  mx_device_destroy(dev);
  dyn_check_leaks();
}
