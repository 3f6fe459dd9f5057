/* HAL models: results equal launching the tasks one by one (and the sequential reference) over
 * several internal streams, in PATCH and INDIRECT modes; incremental refresh patches exactly
 * the slots of changed ids; reuse across executes and streams; failures name the task;
 * checking mode catches bad slots; build-time validation. */
#include <criterion/criterion.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "support_hal.h"

enum { NB = 4, MC = 16 };

typedef struct mtask {
  int stream;
  int dst_id, dst_cell, a_id, a_cell, b_id, b_cell;
  int64_t mul, add;
} mtask;

static const mx_hal_model_mode modes[] = {MX_HAL_MODEL_PATCH, MX_HAL_MODEL_INDIRECT};

static void gen_program(uint64_t seed, int n, int n_streams, mtask *t) {
  uint64_t rng = seed;
  for (int i = 0; i < n; i++) {
    t[i].stream = (int)(hal_rand(&rng) % (uint64_t)n_streams);
    t[i].dst_id = (int)(hal_rand(&rng) % NB);
    t[i].dst_cell = (int)(hal_rand(&rng) % MC);
    t[i].a_id = (int)(hal_rand(&rng) % NB);
    t[i].a_cell = (int)(hal_rand(&rng) % MC);
    t[i].b_id = (int)(hal_rand(&rng) % NB);
    t[i].b_cell = (int)(hal_rand(&rng) % MC);
    t[i].mul = (int64_t)(hal_rand(&rng) % 5) - 2;
    t[i].add = (int64_t)(hal_rand(&rng) % 100);
  }
}

/* cells are indexed by alloc id (ids never alias: bases are distinct buffers). */
static void ref_run(const mtask *t, int n, int64_t cells[NB][MC]) {
  for (int i = 0; i < n; i++)
    cells[t[i].dst_id][t[i].dst_cell] =
        axpb_ref(cells[t[i].a_id][t[i].a_cell], cells[t[i].b_id][t[i].b_cell], t[i].mul, t[i].add);
}

static mx_hal_model *build_model(mx_device *dev, const mtask *t, int n, int n_streams,
                                 mx_hal_model_mode mode) {
  mx_hal_model_desc d = {
      .n_streams = (uint32_t)n_streams, .n_events = (uint32_t)n, .n_ids = NB, .mode = mode};
  mx_hal_model *m = NULL;
  mx_error err;
  cr_assert_eq(mx__hal_model_create(dev, &d, &m, &err), MX_OK, "%s", err.message);
  int last_writer[NB][MC];
  int *readers[NB][MC];
  int n_readers[NB][MC];
  for (int b = 0; b < NB; b++)
    for (int c = 0; c < MC; c++) {
      last_writer[b][c] = -1;
      readers[b][c] = calloc((size_t)n, sizeof(int));
      n_readers[b][c] = 0;
    }
  int *deps = calloc((size_t)n + 3, sizeof *deps);
  for (int i = 0; i < n; i++) {
    const mtask *k = &t[i];
    int nd = 0;
    deps[nd++] = last_writer[k->a_id][k->a_cell];
    deps[nd++] = last_writer[k->b_id][k->b_cell];
    deps[nd++] = last_writer[k->dst_id][k->dst_cell];
    for (int r = 0; r < n_readers[k->dst_id][k->dst_cell]; r++)
      deps[nd++] = readers[k->dst_id][k->dst_cell][r];
    for (int q = 0; q < nd; q++) {
      if (deps[q] >= 0 && t[deps[q]].stream != k->stream)
        cr_assert_eq(mx__hal_model_add_event_wait(m, (uint32_t)k->stream, (uint32_t)deps[q]), MX_OK, "%s",
                     mx__hal_model_last_error(m));
    }
    axpb_args a = {NULL, NULL, NULL, k->mul, k->add};
    mx_hal_slot slots[3] = {
        {offsetof(axpb_args, dst), (uint32_t)k->dst_id, (uint64_t)k->dst_cell * 8},
        {offsetof(axpb_args, a), (uint32_t)k->a_id, (uint64_t)k->a_cell * 8},
        {offsetof(axpb_args, b), (uint32_t)k->b_id, (uint64_t)k->b_cell * 8},
    };
    mx_hal_task task = {k_axpb, &a, sizeof a, slots, 3};
    uint32_t idx = 99;
    cr_assert_eq(mx__hal_model_add_task(m, (uint32_t)k->stream, &task, &idx), MX_OK, "%s",
                 mx__hal_model_last_error(m));
    cr_assert_eq(idx, (uint32_t)i);
    cr_assert_eq(mx__hal_model_add_event_record(m, (uint32_t)k->stream, (uint32_t)i), MX_OK);
    readers[k->a_id][k->a_cell][n_readers[k->a_id][k->a_cell]++] = i;
    readers[k->b_id][k->b_cell][n_readers[k->b_id][k->b_cell]++] = i;
    last_writer[k->dst_id][k->dst_cell] = i;
    n_readers[k->dst_id][k->dst_cell] = 0;
  }
  free(deps);
  for (int b = 0; b < NB; b++)
    for (int c = 0; c < MC; c++) free(readers[b][c]);
  cr_assert_eq(mx__hal_model_build_end(m), MX_OK, "%s", mx__hal_model_last_error(m));
  return m;
}

/* Uploads init[] into the buffers as seen through `assign` (id -> buffer). */
static void upload(mx_device *dev, int64_t *bufs[NB], const int assign[NB], int64_t init[NB][MC]) {
  for (int id = 0; id < NB; id++)
    cr_assert_eq(mx_device_copy(dev, bufs[assign[id]], init[id], sizeof init[id], MX_COPY_H2D), MX_OK);
}

static void download(mx_device *dev, int64_t *bufs[NB], const int assign[NB], int64_t out[NB][MC]) {
  for (int id = 0; id < NB; id++)
    cr_assert_eq(mx_device_copy(dev, out[id], bufs[assign[id]], sizeof out[id], MX_COPY_D2H), MX_OK);
}

static void set_bases(mx_hal_model *m, int64_t *bufs[NB], const int assign[NB]) {
  uint32_t ids[NB];
  void *addrs[NB];
  for (int id = 0; id < NB; id++) {
    ids[id] = (uint32_t)id;
    addrs[id] = bufs[assign[id]];
  }
  cr_assert_eq(mx__hal_model_update_bases(m, ids, addrs, NB), MX_OK);
}

Test(hal_model, matches_one_by_one_and_reference) {
  for (int c = 0; c < hal_n_configs; c++) {
    const hal_config *cfg = &hal_configs[c];
    for (int md = 0; md < 2; md++) {
      for (uint64_t seed = 1; seed <= 4; seed++) {
        enum { N = 200 };
        mtask prog[N];
        int n_streams = 1 + (int)((seed + (uint64_t)c) % 4);
        gen_program(seed * 31 + (uint64_t)md, N, n_streams, prog);
        mx_device *dev = hal_device(cfg, NULL);
        mx_stream *s;
        cr_assert_eq(mx_stream_create(dev, 0, &s), MX_OK);
        int64_t *bufs[NB];
        for (int b = 0; b < NB; b++)
          cr_assert_eq(mx_device_alloc(dev, MC * sizeof(int64_t), 0, (void **)&bufs[b]), MX_OK);
        mx_hal_model *m = build_model(dev, prog, N, n_streams, modes[md]);

        int64_t init[NB][MC], expect[NB][MC], got[NB][MC], one[NB][MC];
        int assigns[3][NB] = {{0, 1, 2, 3}, {3, 2, 1, 0}, {1, 0, 3, 2}};
        for (int round = 0; round < 3; round++) {
          const int *assign = assigns[round];
          uint64_t rng = seed * 1000 + (uint64_t)round;
          for (int b = 0; b < NB; b++)
            for (int k = 0; k < MC; k++) init[b][k] = expect[b][k] = (int64_t)(hal_rand(&rng) % 50);
          /* one by one, on one stream, with resolved pointers */
          upload(dev, bufs, assign, init);
          for (int i = 0; i < N; i++) {
            const mtask *k = &prog[i];
            axpb_args a = {bufs[assign[k->dst_id]] + k->dst_cell, bufs[assign[k->a_id]] + k->a_cell,
                           bufs[assign[k->b_id]] + k->b_cell, k->mul, k->add};
            cr_assert_eq(mx__hal_launch(s, k_axpb, &a, sizeof a), MX_OK);
          }
          cr_assert_eq(mx_stream_synchronize(s), MX_OK);
          download(dev, bufs, assign, one);
          /* the model, twice per round (reuse without new bases in between) */
          upload(dev, bufs, assign, init);
          set_bases(m, bufs, assign);
          cr_assert_eq(mx__hal_model_execute(m, s), MX_OK, "%s", mx__hal_model_last_error(m));
          cr_assert_eq(mx__hal_model_execute(m, s), MX_OK);
          cr_assert_eq(mx_stream_synchronize(s), MX_OK, "%s", cfg->name);
          download(dev, bufs, assign, got);
          ref_run(prog, N, expect);
          for (int b = 0; b < NB; b++)
            for (int k = 0; k < MC; k++)
              cr_assert_eq(one[b][k], expect[b][k], "%s: one-by-one differs", cfg->name);
          ref_run(prog, N, expect);
          for (int b = 0; b < NB; b++)
            for (int k = 0; k < MC; k++)
              cr_assert_eq(got[b][k], expect[b][k],
                           "%s mode %d seed %llu round %d (%d streams): id %d cell %d = %lld, "
                           "expected %lld",
                           cfg->name, md, (unsigned long long)seed, round, n_streams, b, k,
                           (long long)got[b][k], (long long)expect[b][k]);
        }
        mx_hal_model_stats st;
        mx__hal_model_stats_get(m, &st);
        cr_assert_eq(st.executions, 6);
        cr_assert_eq(st.tasks, N);
        cr_assert_eq(st.slots, 3 * N);
        cr_assert_eq(st.streams, (uint32_t)n_streams);
        mx__hal_model_destroy(m);
        for (int b = 0; b < NB; b++) cr_assert_eq(mx_device_free(dev, bufs[b]), MX_OK);
        mx_stream_destroy(s);
        mx_device_destroy(dev);
      }
    }
  }
  hal_check_leaks();
}

/* *dst = value */
typedef struct store_args {
  int64_t *dst;
  int64_t value;
} store_args;

static mx_status k_store(void *args, size_t size) {
  store_args *a = args;
  if (size != sizeof *a) return MX_ERR_INVALID_ARGUMENT;
  *a->dst = a->value;
  return MX_OK;
}

Test(hal_model, refresh_patches_exactly_changed_slots) {
  enum { IDS = 8, CELLS_PER = 8 };
  for (int c = 0; c < hal_n_configs; c++) {
    const hal_config *cfg = &hal_configs[c];
    for (int md = 0; md < 2; md++) {
      bool patch = modes[md] == MX_HAL_MODEL_PATCH;
      mx_device *dev = hal_device(cfg, NULL);
      mx_stream *s;
      cr_assert_eq(mx_stream_create(dev, 0, &s), MX_OK);
      mx_hal_model_desc d = {.n_streams = 2, .n_events = 0, .n_ids = IDS, .mode = modes[md]};
      mx_hal_model *m;
      cr_assert_eq(mx__hal_model_create(dev, &d, &m, NULL), MX_OK);
      /* id i is used by i + 1 slots: tasks writing cells 0..i of its buffer */
      for (int i = 0; i < IDS; i++) {
        for (int j = 0; j <= i; j++) {
          store_args a = {NULL, i * 100 + j};
          mx_hal_slot sl = {offsetof(store_args, dst), (uint32_t)i, (uint64_t)j * 8};
          mx_hal_task t = {k_store, &a, sizeof a, &sl, 1};
          cr_assert_eq(mx__hal_model_add_task(m, (uint32_t)(j & 1), &t, NULL), MX_OK);
        }
      }
      cr_assert_eq(mx__hal_model_build_end(m), MX_OK);
      int64_t *buf[2][IDS];
      for (int g = 0; g < 2; g++)
        for (int i = 0; i < IDS; i++) {
          cr_assert_eq(mx_device_alloc(dev, CELLS_PER * 8, 0, (void **)&buf[g][i]), MX_OK);
          cr_assert_eq(mx_device_memset(dev, buf[g][i], 0, CELLS_PER * 8), MX_OK);
        }
      uint32_t ids[IDS];
      void *addrs[IDS];
      for (int i = 0; i < IDS; i++) {
        ids[i] = (uint32_t)i;
        addrs[i] = buf[0][i];
      }
      cr_assert_eq(mx__hal_model_update_bases(m, ids, addrs, IDS), MX_OK);
      cr_assert_eq(mx__hal_model_execute(m, s), MX_OK);
      cr_assert_eq(mx_stream_synchronize(s), MX_OK);
      mx_hal_model_stats st;
      mx__hal_model_stats_get(m, &st);
      cr_assert_eq(st.last_refreshed_ids, IDS);
      cr_assert_eq(st.last_patched_slots, patch ? (uint64_t)IDS * (IDS + 1) / 2 : 0);

      /* change ids 1, 4, 6 (twice for 4: counted once) */
      uint32_t ch[] = {1, 4, 6, 4};
      void *na[] = {buf[1][1], buf[0][4], buf[1][6], buf[1][4]};
      cr_assert_eq(mx__hal_model_update_bases(m, ch, na, 4), MX_OK);
      cr_assert_eq(mx__hal_model_execute(m, s), MX_OK);
      cr_assert_eq(mx_stream_synchronize(s), MX_OK);
      mx__hal_model_stats_get(m, &st);
      cr_assert_eq(st.last_refreshed_ids, 3, "%s", cfg->name);
      cr_assert_eq(st.last_patched_slots, patch ? 2u + 5u + 7u : 0u, "%s: %llu", cfg->name,
                   (unsigned long long)st.last_patched_slots);
      for (int i = 0; i < IDS; i++) {
        bool moved = i == 1 || i == 4 || i == 6;
        int64_t *b = moved ? buf[1][i] : buf[0][i];
        for (int j = 0; j <= i; j++) cr_assert_eq(b[j], i * 100 + j, "%s id %d", cfg->name, i);
      }

      /* same addresses again, and a change that goes back to the device's value: no patch */
      void *same[] = {buf[1][1], buf[0][6], buf[1][6]};
      uint32_t sid[] = {1, 6, 6};
      cr_assert_eq(mx__hal_model_update_bases(m, sid, same, 3), MX_OK);
      cr_assert_eq(mx__hal_model_execute(m, s), MX_OK);
      cr_assert_eq(mx_stream_synchronize(s), MX_OK);
      mx__hal_model_stats_get(m, &st);
      cr_assert_eq(st.last_refreshed_ids, 0);
      cr_assert_eq(st.last_patched_slots, 0);
      cr_assert_eq(st.patched_slots, patch ? 36u + 14u : 0u);
      cr_assert_eq(st.executions, 3);

      mx__hal_model_destroy(m);
      mx_stream_destroy(s);
      mx_device_destroy(dev);
    }
  }
  hal_check_leaks();
}

/* Executions on different streams never overlap; bases updated while an execution is in
 * flight apply to the next one only. */
Test(hal_model, executions_serialize_and_updates_apply_next) {
  for (int c = 0; c < hal_n_configs; c++) {
    const hal_config *cfg = &hal_configs[c];
    for (int md = 0; md < 2; md++) {
      mx_device *dev = hal_device(cfg, NULL);
      mx_stream *s1, *s2;
      cr_assert_eq(mx_stream_create(dev, 0, &s1), MX_OK);
      cr_assert_eq(mx_stream_create(dev, 0, &s2), MX_OK);
      enum { N = 300 };
      mtask prog[N];
      gen_program(77 + (uint64_t)md, N, 3, prog);
      mx_hal_model *m = build_model(dev, prog, N, 3, modes[md]);
      int64_t *bufs[2][NB];
      for (int g = 0; g < 2; g++)
        for (int b = 0; b < NB; b++)
          cr_assert_eq(mx_device_alloc(dev, MC * 8, 0, (void **)&bufs[g][b]), MX_OK);
      int64_t init[NB][MC], expect[NB][MC], got[NB][MC];
      uint64_t rng = 5;
      for (int b = 0; b < NB; b++)
        for (int k = 0; k < MC; k++) init[b][k] = expect[b][k] = (int64_t)(hal_rand(&rng) % 50);
      int ident[NB] = {0, 1, 2, 3};
      upload(dev, bufs[0], ident, init);
      upload(dev, bufs[1], ident, init);
      /* slow the first execution down with a sleeping kernel on s1 before it */
      atomic_int flag = 0;
      sleep_args sl = {&flag, 5 * 1000 * 1000};
      cr_assert_eq(mx__hal_launch(s1, k_sleep_flag, &sl, sizeof sl), MX_OK);
      set_bases(m, bufs[0], ident);
      cr_assert_eq(mx__hal_model_execute(m, s1), MX_OK);
      set_bases(m, bufs[1], ident); /* first execution has not started yet on cpu devices */
      cr_assert_eq(mx__hal_model_execute(m, s2), MX_OK);
      cr_assert_eq(mx__hal_model_execute(m, s1), MX_OK);
      cr_assert_eq(mx_stream_synchronize(s1), MX_OK);
      cr_assert_eq(mx_stream_synchronize(s2), MX_OK);
      ref_run(prog, N, expect);
      download(dev, bufs[0], ident, got);
      for (int b = 0; b < NB; b++)
        for (int k = 0; k < MC; k++) cr_assert_eq(got[b][k], expect[b][k], "%s: first execution", cfg->name);
      ref_run(prog, N, expect);
      download(dev, bufs[1], ident, got);
      for (int b = 0; b < NB; b++)
        for (int k = 0; k < MC; k++)
          cr_assert_eq(got[b][k], expect[b][k], "%s: executions 2 and 3", cfg->name);
      mx__hal_model_destroy(m);
      mx_stream_destroy(s1);
      mx_stream_destroy(s2);
      mx_device_destroy(dev);
    }
  }
  hal_check_leaks();
}

typedef struct failif_args {
  atomic_int *fail;
} failif_args;

static mx_status k_fail_if(void *args, size_t size) {
  failif_args *a = args;
  if (size != sizeof *a) return MX_ERR_INVALID_ARGUMENT;
  return atomic_load(a->fail) ? MX_ERR_KERNEL : MX_OK;
}

Test(hal_model, task_failure_names_task_and_stream) {
  for (int c = 0; c < hal_n_configs; c++) {
    const hal_config *cfg = &hal_configs[c];
    mx_device *dev = hal_device(cfg, NULL);
    mx_stream *s;
    cr_assert_eq(mx_stream_create(dev, 0, &s), MX_OK);
    mx_hal_model_desc d = {.n_streams = 3, .n_events = 1, .n_ids = 1};
    mx_hal_model *m;
    cr_assert_eq(mx__hal_model_create(dev, &d, &m, NULL), MX_OK);
    atomic_int fail = 1;
    int64_t log[64];
    int64_t pos = 0;
    for (int i = 0; i < 8; i++) {
      if (i == 5) {
        failif_args f = {&fail};
        mx_hal_task t = {k_fail_if, &f, sizeof f, NULL, 0};
        cr_assert_eq(mx__hal_model_add_task(m, 1, &t, NULL), MX_OK);
      } else {
        append_args a = {log, &pos, i};
        mx_hal_task t = {k_append, &a, sizeof a, NULL, 0};
        cr_assert_eq(mx__hal_model_add_task(m, 0, &t, NULL), MX_OK);
      }
    }
    cr_assert_eq(mx__hal_model_add_event_record(m, 1, 0), MX_OK);
    cr_assert_eq(mx__hal_model_add_event_wait(m, 2, 0), MX_OK);
    cr_assert_eq(mx__hal_model_build_end(m), MX_OK);
    cr_assert_eq(mx__hal_model_execute(m, s), MX_OK);
    cr_assert_eq(mx_stream_synchronize(s), MX_ERR_KERNEL, "%s", cfg->name);
    mx_stream_error e;
    cr_assert_eq(mx_stream_get_error(s, &e), MX_ERR_KERNEL);
    cr_assert_eq(e.model_task, 5, "%s", cfg->name);
    cr_assert_eq(e.model_stream, 1);
    cr_assert_eq(e.command, 1);
    cr_assert(strstr(e.message, "model task 5 (internal stream 1) failed"), "%s", e.message);
    /* a model executed on a failed stream is skipped (and does not hang) */
    cr_assert_eq(mx__hal_model_execute(m, s), MX_OK);
    cr_assert_eq(mx_stream_synchronize(s), MX_ERR_KERNEL);
    cr_assert_eq(mx_stream_reset(s), MX_ERR_KERNEL);
    atomic_store(&fail, 0);
    pos = 0;
    cr_assert_eq(mx__hal_model_execute(m, s), MX_OK);
    cr_assert_eq(mx_stream_synchronize(s), MX_OK, "%s", cfg->name);
    cr_assert_eq(pos, 7);
    mx__hal_model_destroy(m);
    mx_stream_destroy(s);
    mx_device_destroy(dev);
  }
  hal_check_leaks();
}

Test(hal_model, checking_mode_catches_bad_slots) {
  for (int c = 0; c < hal_n_configs; c++) {
    const hal_config *cfg = &hal_configs[c];
    for (int md = 0; md < 2; md++) {
      mx_device_options o = hal_options(cfg);
      o.check = MX_CHECK_ON;
      mx_device *dev = hal_device(cfg, &o);
      cr_assert(mx__hal_device_checking(dev));
      mx_stream *s;
      cr_assert_eq(mx_stream_create(dev, 0, &s), MX_OK);
      int64_t *buf;
      cr_assert_eq(mx_device_alloc(dev, 4 * 8, 0, (void **)&buf), MX_OK);
      mx_hal_model_desc d = {.n_streams = 1, .n_ids = 2, .mode = modes[md]};
      mx_hal_model *m;
      cr_assert_eq(mx__hal_model_create(dev, &d, &m, NULL), MX_OK);
      store_args a = {NULL, 7};
      mx_hal_slot good = {0, 0, 3 * 8};
      mx_hal_slot bad = {0, 0, 4 * 8}; /* one past the end of the 4-cell buffer */
      mx_hal_task t0 = {k_store, &a, sizeof a, &good, 1};
      mx_hal_task t1 = {k_store, &a, sizeof a, &bad, 1};
      cr_assert_eq(mx__hal_model_add_task(m, 0, &t0, NULL), MX_OK);
      cr_assert_eq(mx__hal_model_add_task(m, 0, &t1, NULL), MX_OK);
      cr_assert_eq(mx__hal_model_build_end(m), MX_OK);
      uint32_t id = 0;
      void *addr = buf;
      cr_assert_eq(mx__hal_model_update_bases(m, &id, &addr, 1), MX_OK);
      cr_assert_eq(mx__hal_model_execute(m, s), MX_OK);
      cr_assert_eq(mx_stream_synchronize(s), MX_ERR_INVALID_ARGUMENT, "%s", cfg->name);
      mx_stream_error e;
      mx_stream_get_error(s, &e);
      cr_assert_eq(e.model_task, 1);
      cr_assert(strstr(e.message, "model task 1 (internal stream 0) slot 0"), "%s", e.message);
      cr_assert(strstr(e.message, "not inside a live device allocation"), "%s", e.message);
      cr_assert_eq(mx_stream_reset(s), MX_ERR_INVALID_ARGUMENT);
      mx__hal_model_destroy(m);

      /* an id whose base was never set */
      cr_assert_eq(mx__hal_model_create(dev, &d, &m, NULL), MX_OK);
      mx_hal_slot unset = {0, 1, 0};
      mx_hal_task t2 = {k_store, &a, sizeof a, &unset, 1};
      cr_assert_eq(mx__hal_model_add_task(m, 0, &t2, NULL), MX_OK);
      cr_assert_eq(mx__hal_model_build_end(m), MX_OK);
      cr_assert_eq(mx__hal_model_execute(m, s), MX_OK);
      cr_assert_eq(mx_stream_synchronize(s), MX_ERR_INVALID_ARGUMENT);
      mx_stream_get_error(s, &e);
      cr_assert(strstr(e.message, "alloc id 1 has no base address"), "%s", e.message);
      mx__hal_model_destroy(m);
      cr_assert_eq(mx_device_free(dev, buf), MX_OK);
      mx_stream_destroy(s);
      mx_device_destroy(dev);
    }
  }
  hal_check_leaks();
}

Test(hal_model, build_validation) {
  mx_device *dev = hal_device(&hal_configs[0], NULL);
  mx_hal_model_desc d = {.n_streams = 2, .n_events = 2, .n_ids = 2};
  mx_hal_model *m;
  mx_error err;
  mx_hal_model_desc bad = {.n_streams = 0};
  cr_assert_eq(mx__hal_model_create(dev, &bad, &m, &err), MX_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(err.message, "internal streams"));
  cr_assert_eq(mx__hal_model_create(dev, &d, &m, NULL), MX_OK);
  store_args a = {NULL, 1};
  mx_hal_slot sl = {12, 0, 0};
  mx_hal_task t = {k_store, &a, sizeof a, &sl, 1};
  cr_assert_eq(mx__hal_model_add_task(m, 0, &t, NULL), MX_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(mx__hal_model_last_error(m), "does not fit"), "%s", mx__hal_model_last_error(m));
  sl.arg_offset = 0;
  sl.alloc_id = 2;
  cr_assert_eq(mx__hal_model_add_task(m, 0, &t, NULL), MX_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(mx__hal_model_last_error(m), "alloc id 2 out of range"));
  sl.alloc_id = 0;
  cr_assert_eq(mx__hal_model_add_task(m, 2, &t, NULL), MX_ERR_INVALID_ARGUMENT);
  cr_assert_eq(mx__hal_model_add_event_wait(m, 1, 0), MX_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(mx__hal_model_last_error(m), "before it is recorded"));
  cr_assert_eq(mx__hal_model_add_event_record(m, 0, 0), MX_OK);
  cr_assert_eq(mx__hal_model_add_event_record(m, 1, 0), MX_ERR_INVALID_ARGUMENT);
  cr_assert_eq(mx__hal_model_add_event_wait(m, 1, 0), MX_OK);
  cr_assert_eq(mx__hal_model_add_task(m, 1, &t, NULL), MX_OK);
  uint32_t id = 5;
  void *p = NULL;
  cr_assert_eq(mx__hal_model_update_bases(m, &id, &p, 1), MX_ERR_INVALID_ARGUMENT);
  mx_stream *s;
  cr_assert_eq(mx_stream_create(dev, 0, &s), MX_OK);
  cr_assert_eq(mx__hal_model_execute(m, s), MX_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(mx__hal_model_last_error(m), "not built"));
  cr_assert_eq(mx__hal_model_build_end(m), MX_OK);
  cr_assert_eq(mx__hal_model_add_task(m, 0, &t, NULL), MX_ERR_INVALID_ARGUMENT);
  cr_assert_eq(mx__hal_model_build_end(m), MX_ERR_INVALID_ARGUMENT);
  mx__hal_model_destroy(m);
  mx__hal_model_destroy(NULL);
  mx_stream_destroy(s);
  mx_device_destroy(dev);
  hal_check_leaks();
}

/* A long single-stream chain (the shape of the benchmark) with many executes. */
Test(hal_model, long_chain_many_executes) {
  for (int c = 0; c < hal_n_configs; c++) {
    mx_device *dev = hal_device(&hal_configs[c], NULL);
    mx_stream *s;
    cr_assert_eq(mx_stream_create(dev, 0, &s), MX_OK);
    mx_hal_model_desc d = {.n_streams = 1, .n_ids = 1};
    mx_hal_model *m;
    cr_assert_eq(mx__hal_model_create(dev, &d, &m, NULL), MX_OK);
    enum { N = 5000, E = 50 };
    int64_t *log = calloc((size_t)N * E, sizeof *log);
    int64_t pos = 0;
    for (int i = 0; i < N; i++) {
      append_args a = {log, &pos, i};
      mx_hal_task t = {k_append, &a, sizeof a, NULL, 0};
      cr_assert_eq(mx__hal_model_add_task(m, 0, &t, NULL), MX_OK);
    }
    cr_assert_eq(mx__hal_model_build_end(m), MX_OK);
    for (int e = 0; e < E; e++) cr_assert_eq(mx__hal_model_execute(m, s), MX_OK);
    cr_assert_eq(mx_stream_synchronize(s), MX_OK);
    cr_assert_eq(pos, (int64_t)N * E);
    for (int64_t i = 0; i < (int64_t)N * E; i++) cr_assert_eq(log[i], i % N);
    free(log);
    mx__hal_model_destroy(m);
    mx_stream_destroy(s);
    mx_device_destroy(dev);
  }
  hal_check_leaks();
}
