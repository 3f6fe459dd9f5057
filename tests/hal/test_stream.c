/* Streams and events on every device configuration: in-stream ordering, argument copies
 * (inline and heap blocks), host callbacks, full queues, events across streams, sticky errors
 * and reset, and destroying streams and devices with work in flight. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "support_hal.h"

Test(hal_stream, in_stream_order) {
  for (int c = 0; c < hal_n_configs; c++) {
    const hal_config *cfg = &hal_configs[c];
    mx_device *dev = hal_device(cfg, NULL);
    mx_stream *s;
    cr_assert_eq(mx_stream_create(dev, 0, &s), MX_OK);
    enum { N = 5000 };
    int64_t *log = calloc(N, sizeof *log);
    int64_t pos = 0;
    for (int i = 0; i < N; i++) {
      append_args a = {log, &pos, i};
      /* kernels and host callbacks interleave in one order */
      mx_status st = (i % 3 == 0) ? mx__hal_host_callback(s, k_append, &a, sizeof a)
                                  : mx__hal_launch(s, k_append, &a, sizeof a);
      cr_assert_eq(st, MX_OK);
      a.value = -1; /* the HAL copied the block: changing ours must not matter */
    }
    cr_assert_eq(mx_stream_synchronize(s), MX_OK, "%s", cfg->name);
    cr_assert_eq(pos, N, "%s", cfg->name);
    for (int i = 0; i < N; i++)
      cr_assert_eq(log[i], i, "%s: log[%d] = %lld", cfg->name, i, (long long)log[i]);
    cr_assert_eq(mx_stream_query(s), MX_OK);
    free(log);
    mx_stream_destroy(s);
    mx_device_destroy(dev);
  }
  hal_check_leaks();
}

Test(hal_stream, large_argument_blocks) {
  for (int c = 0; c < hal_n_configs; c++) {
    const hal_config *cfg = &hal_configs[c];
    mx_device *dev = hal_device(cfg, NULL);
    mx_stream *s;
    cr_assert_eq(mx_stream_create(dev, 0, &s), MX_OK);
    /* one slot, two slots, the multi-slot limits of the 8- and 1024-slot queues, the heap */
    size_t sizes[] = {8, 9, MX_HAL_INLINE_ARGS, MX_HAL_INLINE_ARGS + 1, 464, 465, 1000, 65488, 65489, 70000};
    enum { NS = sizeof sizes / sizeof sizes[0] };
    int64_t results[NS] = {0};
    int64_t expect[NS] = {0};
    for (int i = 0; i < NS; i++) {
      unsigned char *block = malloc(sizes[i]);
      int64_t *dst = &results[i];
      memcpy(block, &dst, sizeof dst);
      for (size_t k = sizeof dst; k < sizes[i]; k++) {
        block[k] = (unsigned char)(k * 7 + (size_t)i);
        expect[i] += block[k];
      }
      cr_assert_eq(mx__hal_launch(s, k_sum_bytes, block, sizes[i]), MX_OK);
      memset(block, 0xff, sizes[i]); /* reused at once */
      free(block);
    }
    cr_assert_eq(mx_stream_synchronize(s), MX_OK);
    for (int i = 0; i < NS; i++) cr_assert_eq(results[i], expect[i], "%s: size %zu", cfg->name, sizes[i]);
    mx_stream_destroy(s);
    mx_device_destroy(dev);
  }
  hal_check_leaks();
}

/* Argument blocks of random sizes through small queues: multi-slot commands, skipped array
 * tails and full queues, every block checked. */
Test(hal_stream, mixed_argument_sizes_through_small_queues) {
  for (int c = 0; c < hal_n_configs; c++) {
    const hal_config *cfg = &hal_configs[c];
    mx_device_options o = hal_options(cfg);
    o.ring_slots = 16;
    mx_device *dev = hal_device(cfg, &o);
    mx_stream *s;
    cr_assert_eq(mx_stream_create(dev, 0, &s), MX_OK);
    enum { N = 3000 };
    int64_t *results = calloc(N, sizeof *results);
    int64_t *expect = calloc(N, sizeof *expect);
    unsigned char *block = malloc(2000);
    uint64_t rng = 11;
    for (int i = 0; i < N; i++) {
      size_t size = 8 + (size_t)(hal_rand(&rng) % 1200);
      int64_t *dst = &results[i];
      memcpy(block, &dst, sizeof dst);
      for (size_t k = sizeof dst; k < size; k++) {
        block[k] = (unsigned char)hal_rand(&rng);
        expect[i] += block[k];
      }
      cr_assert_eq(mx__hal_launch(s, k_sum_bytes, block, size), MX_OK);
    }
    cr_assert_eq(mx_stream_synchronize(s), MX_OK);
    for (int i = 0; i < N; i++) cr_assert_eq(results[i], expect[i], "%s: launch %d", cfg->name, i);
    free(block);
    free(results);
    free(expect);
    mx_stream_destroy(s);
    mx_device_destroy(dev);
  }
  hal_check_leaks();
}

/* Several host threads submit to one shared stream and to their own streams at once: every
 * command runs once, and each thread's commands keep their order. */
typedef struct submitter {
  mx_stream *shared, *own;
  int id;
  int64_t *log; /* shared stream's log (written on the device side, in stream order) */
  int64_t *pos;
  int64_t own_log[1000];
  int64_t own_pos;
} submitter;

static void *submit_thread(void *arg) {
  submitter *t = arg;
  for (int i = 0; i < 1000; i++) {
    append_args a = {t->log, t->pos, (int64_t)t->id * 1000000 + i};
    cr_assert_eq(mx__hal_launch(t->shared, k_append, &a, sizeof a), MX_OK);
    append_args b = {t->own_log, &t->own_pos, i};
    cr_assert_eq(mx__hal_launch(t->own, k_append, &b, sizeof b), MX_OK);
  }
  cr_assert_eq(mx_stream_synchronize(t->own), MX_OK);
  return NULL;
}

Test(hal_stream, concurrent_submitters) {
  for (int c = 0; c < hal_n_configs; c++) {
    const hal_config *cfg = &hal_configs[c];
    mx_device *dev = hal_device(cfg, NULL);
    mx_stream *shared;
    cr_assert_eq(mx_stream_create(dev, 0, &shared), MX_OK);
    enum { T = 4 };
    submitter *subs = calloc(T, sizeof *subs);
    int64_t *log = calloc(T * 1000, sizeof *log);
    int64_t pos = 0;
    pthread_t th[T];
    for (int i = 0; i < T; i++) {
      subs[i].shared = shared;
      subs[i].id = i;
      subs[i].log = log;
      subs[i].pos = &pos;
      cr_assert_eq(mx_stream_create(dev, 0, &subs[i].own), MX_OK);
      cr_assert_eq(pthread_create(&th[i], NULL, submit_thread, &subs[i]), 0);
    }
    for (int i = 0; i < T; i++) pthread_join(th[i], NULL);
    cr_assert_eq(mx_stream_synchronize(shared), MX_OK);
    cr_assert_eq(pos, T * 1000, "%s", cfg->name);
    int64_t next[T] = {0};
    for (int k = 0; k < T * 1000; k++) {
      int id = (int)(log[k] / 1000000);
      cr_assert_eq(log[k] % 1000000, next[id], "%s: thread %d out of order", cfg->name, id);
      next[id]++;
    }
    for (int i = 0; i < T; i++) {
      cr_assert_eq(subs[i].own_pos, 1000);
      for (int k = 0; k < 1000; k++) cr_assert_eq(subs[i].own_log[k], k);
      mx_stream_destroy(subs[i].own);
    }
    free(subs);
    free(log);
    mx_stream_destroy(shared);
    mx_device_destroy(dev);
  }
  hal_check_leaks();
}

/* More host threads wait at once than the device has waiter slots: the extra ones share the
 * broadcast path, and every wait returns once its own stream is done. */
typedef struct sync_job {
  mx_stream *s;
  atomic_int *flag;
  mx_status st;
} sync_job;

static void *sync_thread(void *arg) {
  sync_job *j = arg;
  j->st = mx_stream_synchronize(j->s);
  if (atomic_load(j->flag) != 1) j->st = MX_ERR_INTERNAL; /* returned before the work ran */
  return NULL;
}

Test(hal_stream, many_parked_host_waiters) {
  const hal_config *cfg = &hal_configs[2]; /* parks at once */
  mx_device *dev = hal_device(cfg, NULL);
  enum { T = 12 };
  mx_stream *s[T];
  atomic_int flags[T];
  sync_job jobs[T];
  pthread_t th[T];
  for (int i = 0; i < T; i++) {
    cr_assert_eq(mx_stream_create(dev, 0, &s[i]), MX_OK);
    atomic_init(&flags[i], 0);
    sleep_args a = {&flags[i], (int64_t)(5 + i) * 1000 * 1000};
    cr_assert_eq(mx__hal_launch(s[i], k_sleep_flag, &a, sizeof a), MX_OK);
    jobs[i] = (sync_job){s[i], &flags[i], MX_ERR_BUSY};
  }
  for (int i = 0; i < T; i++) cr_assert_eq(pthread_create(&th[i], NULL, sync_thread, &jobs[i]), 0);
  for (int i = 0; i < T; i++) {
    pthread_join(th[i], NULL);
    cr_assert_eq(jobs[i].st, MX_OK, "waiter %d", i);
    mx_stream_destroy(s[i]);
  }
  mx_device_destroy(dev);
  hal_check_leaks();
}

Test(hal_stream, bad_arguments) {
  mx_device *dev = hal_device(&hal_configs[0], NULL);
  mx_stream *s;
  cr_assert_eq(mx_stream_create(dev, 0, &s), MX_OK);
  cr_assert_eq(mx__hal_launch(s, NULL, NULL, 0), MX_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(mx_device_last_error(dev), "NULL function"));
  cr_assert_eq(mx__hal_launch(s, k_noop, NULL, 16), MX_ERR_INVALID_ARGUMENT);
  cr_assert_eq(mx__hal_launch(NULL, k_noop, NULL, 0), MX_ERR_INVALID_ARGUMENT);
  cr_assert_eq(mx__hal_launch(s, k_noop, NULL, 0), MX_OK);
  cr_assert_eq(mx_stream_create(dev, 0, NULL), MX_ERR_INVALID_ARGUMENT);
  cr_assert_eq(mx_stream_synchronize(s), MX_OK);
  mx_stream_destroy(NULL);
  mx_event_destroy(NULL);
  mx_device_destroy(NULL);
  mx_device_options o;
  mx_device_options_init(&o);
  o.ring_slots = 6;
  mx_device *bad = NULL;
  mx_error err;
  cr_assert_eq(mx_device_create(&o, &bad, &err), MX_ERR_INVALID_ARGUMENT);
  cr_assert_null(bad);
  cr_assert(strstr(err.message, "power of two"));
  mx_stream_destroy(s);
  mx_device_destroy(dev);
  hal_check_leaks();
}

/* Two streams ping-pong through events; each step appends to one shared log. */
Test(hal_stream, events_order_two_streams) {
  for (int c = 0; c < hal_n_configs; c++) {
    const hal_config *cfg = &hal_configs[c];
    mx_device *dev = hal_device(cfg, NULL);
    mx_stream *s[2];
    mx_event *e[2];
    for (int i = 0; i < 2; i++) {
      cr_assert_eq(mx_stream_create(dev, i, &s[i]), MX_OK);
      cr_assert_eq(mx_event_create(dev, &e[i]), MX_OK);
    }
    cr_assert_eq(mx_event_query(e[0]), MX_OK, "never recorded counts as reached");
    enum { N = 400 };
    int64_t *log = calloc(N, sizeof *log);
    int64_t pos = 0;
    for (int i = 0; i < N; i++) {
      int me = i & 1;
      if (i > 0) cr_assert_eq(mx_stream_wait_event(s[me], e[!me]), MX_OK);
      append_args a = {log, &pos, i};
      cr_assert_eq(mx__hal_launch(s[me], k_append, &a, sizeof a), MX_OK);
      cr_assert_eq(mx_event_record(e[me], s[me]), MX_OK);
    }
    cr_assert_eq(mx_event_synchronize(e[(N - 1) & 1]), MX_OK);
    cr_assert_eq(pos, N, "%s", cfg->name);
    for (int i = 0; i < N; i++) cr_assert_eq(log[i], i, "%s", cfg->name);
    for (int i = 0; i < 2; i++) {
      cr_assert_eq(mx_stream_synchronize(s[i]), MX_OK);
      mx_event_destroy(e[i]);
      mx_stream_destroy(s[i]);
    }
    free(log);
    mx_device_destroy(dev);
  }
  hal_check_leaks();
}

/* A stream waiting for an event does not block the host, and query reports busy meanwhile. */
Test(hal_stream, wait_does_not_block_host) {
  const hal_config *cfg = &hal_configs[0];
  mx_device *dev = hal_device(cfg, NULL);
  mx_stream *a, *b;
  mx_event *e;
  cr_assert_eq(mx_stream_create(dev, 0, &a), MX_OK);
  cr_assert_eq(mx_stream_create(dev, 0, &b), MX_OK);
  cr_assert_eq(mx_event_create(dev, &e), MX_OK);
  atomic_int flag = 0, flag2 = 0;
  sleep_args sl = {&flag, 50 * 1000 * 1000};
  cr_assert_eq(mx__hal_launch(a, k_sleep_flag, &sl, sizeof sl), MX_OK);
  cr_assert_eq(mx_event_record(e, a), MX_OK);
  cr_assert_eq(mx_stream_wait_event(b, e), MX_OK);
  sleep_args sl2 = {&flag2, 0};
  cr_assert_eq(mx__hal_launch(b, k_sleep_flag, &sl2, sizeof sl2), MX_OK);
  /* The host got here while a still sleeps (50 ms); b cannot have run its kernel yet. */
  cr_assert_eq(atomic_load(&flag2), 0);
  cr_assert_eq(mx_stream_query(b), MX_ERR_BUSY);
  cr_assert_eq(mx_event_query(e), MX_ERR_BUSY);
  cr_assert_eq(mx_stream_synchronize(b), MX_OK);
  cr_assert_eq(atomic_load(&flag), 1);
  cr_assert_eq(atomic_load(&flag2), 1);
  cr_assert_eq(mx_event_query(e), MX_OK);
  mx_event_destroy(e);
  mx_stream_destroy(a);
  mx_stream_destroy(b);
  mx_device_destroy(dev);
  hal_check_leaks();
}

Test(hal_stream, sticky_error_and_reset) {
  for (int c = 0; c < hal_n_configs; c++) {
    const hal_config *cfg = &hal_configs[c];
    mx_device *dev = hal_device(cfg, NULL);
    mx_stream *s, *t;
    mx_event *e;
    cr_assert_eq(mx_stream_create(dev, 0, &s), MX_OK);
    cr_assert_eq(mx_stream_create(dev, 0, &t), MX_OK);
    cr_assert_eq(mx_event_create(dev, &e), MX_OK);
    int64_t log[8] = {0};
    int64_t pos = 0;
    append_args a = {log, &pos, 1};
    cr_assert_eq(mx__hal_launch(s, k_append, &a, sizeof a), MX_OK);
    mx_status bad = MX_ERR_KERNEL;
    cr_assert_eq(mx__hal_launch(s, k_status, &bad, sizeof bad), MX_OK);
    a.value = 2;
    cr_assert_eq(mx__hal_launch(s, k_append, &a, sizeof a), MX_OK); /* skipped */
    cr_assert_eq(mx_event_record(e, s), MX_OK);
    /* t waits for an event after the failure: the failure propagates to t. */
    cr_assert_eq(mx_stream_wait_event(t, e), MX_OK);
    a.value = 3;
    cr_assert_eq(mx__hal_launch(t, k_append, &a, sizeof a), MX_OK); /* skipped as well */
    cr_assert_eq(mx_stream_synchronize(s), MX_ERR_KERNEL, "%s", cfg->name);
    cr_assert_eq(mx_stream_synchronize(t), MX_ERR_KERNEL, "%s", cfg->name);
    cr_assert_eq(mx_event_query(e), MX_ERR_KERNEL);
    cr_assert_eq(mx_stream_query(s), MX_ERR_KERNEL);
    mx_stream_error info;
    cr_assert_eq(mx_stream_get_error(s, &info), MX_ERR_KERNEL);
    cr_assert_eq(info.command, 2, "%s: failing command %llu", cfg->name, (unsigned long long)info.command);
    cr_assert_eq(info.model_task, -1);
    cr_assert(strstr(info.message, "command 2 (kernel) failed"), "%s", info.message);
    cr_assert_eq(mx_stream_get_error(t, &info), MX_ERR_KERNEL);
    cr_assert(strstr(info.message, "failed at its command 2"), "%s", info.message);
    cr_assert_eq(pos, 1);
    cr_assert_eq(mx_stream_reset(s), MX_ERR_KERNEL);
    cr_assert_eq(mx_stream_reset(t), MX_ERR_KERNEL);
    cr_assert_eq(mx_stream_get_error(s, &info), MX_OK);
    a.value = 4;
    cr_assert_eq(mx__hal_launch(s, k_append, &a, sizeof a), MX_OK);
    cr_assert_eq(mx_stream_synchronize(s), MX_OK);
    cr_assert_eq(mx_event_record(e, s), MX_OK);
    cr_assert_eq(mx_stream_wait_event(t, e), MX_OK);
    a.value = 5;
    cr_assert_eq(mx__hal_launch(t, k_append, &a, sizeof a), MX_OK);
    cr_assert_eq(mx_stream_synchronize(t), MX_OK);
    cr_assert_eq(pos, 3);
    cr_assert_eq(log[1], 4);
    cr_assert_eq(log[2], 5);
    mx_event_destroy(e);
    mx_stream_destroy(s);
    mx_stream_destroy(t);
    mx_device_destroy(dev);
  }
  hal_check_leaks();
}

/* Destroying a stream waits for its queued work; destroying the device with streams, events,
 * models and allocations still alive waits and frees everything (ASan checks the leaks). */
Test(hal_stream, destroy_with_work_in_flight) {
  for (int c = 0; c < hal_n_configs; c++) {
    const hal_config *cfg = &hal_configs[c];
    mx_device *dev = hal_device(cfg, NULL);
    mx_stream *s;
    cr_assert_eq(mx_stream_create(dev, 0, &s), MX_OK);
    enum { N = 6 };
    atomic_int flags[N];
    for (int i = 0; i < N; i++) {
      atomic_init(&flags[i], 0);
      sleep_args a = {&flags[i], 2 * 1000 * 1000};
      cr_assert_eq(mx__hal_launch(s, k_sleep_flag, &a, sizeof a), MX_OK);
    }
    mx_stream_destroy(s);
    for (int i = 0; i < N; i++) cr_assert_eq(atomic_load(&flags[i]), 1, "%s: kernel %d", cfg->name, i);

    /* Device destroy with everything still alive. */
    mx_stream *s2;
    mx_event *e;
    void *buf;
    cr_assert_eq(mx_stream_create(dev, 0, &s2), MX_OK);
    cr_assert_eq(mx_event_create(dev, &e), MX_OK);
    cr_assert_eq(mx_device_alloc(dev, 4096, 0, &buf), MX_OK);
    mx_hal_model_desc d = {.n_streams = 2, .n_events = 1, .n_ids = 1};
    mx_hal_model *m;
    cr_assert_eq(mx__hal_model_create(dev, &d, &m, NULL), MX_OK);
    atomic_int mflag = 0;
    sleep_args ma = {&mflag, 3 * 1000 * 1000};
    mx_hal_task t = {k_sleep_flag, &ma, sizeof ma, NULL, 0};
    cr_assert_eq(mx__hal_model_add_task(m, 1, &t, NULL), MX_OK);
    cr_assert_eq(mx__hal_model_build_end(m), MX_OK);
    cr_assert_eq(mx__hal_model_execute(m, s2), MX_OK);
    atomic_int last = 0;
    sleep_args la = {&last, 2 * 1000 * 1000};
    cr_assert_eq(mx__hal_launch(s2, k_sleep_flag, &la, sizeof la), MX_OK);
    cr_assert_eq(mx_event_record(e, s2), MX_OK);
    mx_device_destroy(dev);
    cr_assert_eq(atomic_load(&mflag), 1, "%s", cfg->name);
    cr_assert_eq(atomic_load(&last), 1, "%s", cfg->name);
  }
  hal_check_leaks();
}

/* Many streams with priorities on shared and dedicated workers; creation and destruction in
 * any order. */
Test(hal_stream, many_streams_and_priorities) {
  for (int c = 0; c < hal_n_configs; c++) {
    const hal_config *cfg = &hal_configs[c];
    mx_device *dev = hal_device(cfg, NULL);
    enum { N = 12 };
    mx_stream *s[N];
    int64_t logs[N][64];
    int64_t pos[N];
    for (int i = 0; i < N; i++) {
      cr_assert_eq(mx_stream_create(dev, (i % 5) - 2, &s[i]), MX_OK);
      pos[i] = 0;
    }
    mx_device_info info;
    mx_device_get_info(dev, &info);
    if (cfg->kind == MX_DEVICE_CPU) {
      uint32_t expect = cfg->max_workers ? cfg->max_workers : N;
      cr_assert_eq(info.workers, expect, "%s: %u workers", cfg->name, info.workers);
      cr_assert_neq(info.pinning, MX_PIN_AUTO);
    }
    for (int r = 0; r < 64; r++) {
      for (int i = 0; i < N; i++) {
        append_args a = {logs[i], &pos[i], r};
        cr_assert_eq(mx__hal_launch(s[i], k_append, &a, sizeof a), MX_OK);
      }
    }
    for (int i = 0; i < N; i += 2) mx_stream_destroy(s[i]);
    for (int i = 1; i < N; i += 2) {
      cr_assert_eq(mx_stream_synchronize(s[i]), MX_OK);
      mx_stream_destroy(s[i]);
    }
    for (int i = 0; i < N; i++) {
      cr_assert_eq(pos[i], 64);
      for (int r = 0; r < 64; r++) cr_assert_eq(logs[i][r], r);
    }
    mx_device_destroy(dev);
  }
  hal_check_leaks();
}

/* Pinning policies can be requested explicitly; the device reports what it applied. */
Test(hal_stream, pinning_policies) {
  mx_pinning policies[] = {MX_PIN_NONE, MX_PIN_COMPACT, MX_PIN_SCATTER, MX_PIN_AUTO};
  for (int p = 0; p < 4; p++) {
    mx_device_options o = hal_options(&hal_configs[0]);
    o.pinning = policies[p];
    mx_device *dev = hal_device(&hal_configs[0], &o);
    mx_stream *s[3];
    for (int i = 0; i < 3; i++) cr_assert_eq(mx_stream_create(dev, 0, &s[i]), MX_OK);
    for (int i = 0; i < 3; i++) cr_assert_eq(mx__hal_launch(s[i], k_noop, NULL, 0), MX_OK);
    for (int i = 0; i < 3; i++) cr_assert_eq(mx_stream_synchronize(s[i]), MX_OK);
    mx_device_info info;
    mx_device_get_info(dev, &info);
    if (policies[p] != MX_PIN_AUTO) cr_assert_eq(info.pinning, policies[p]);
    if (info.pinning == MX_PIN_NONE) cr_assert_eq(info.pinned_workers, 0);
    cr_assert_geq(info.processing_units, 1);
    for (int i = 0; i < 3; i++) mx_stream_destroy(s[i]);
    mx_device_destroy(dev);
  }
  hal_check_leaks();
}
