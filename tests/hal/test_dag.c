/* Randomized DAGs of device work over 1-8 streams, synchronized with events, checked against a
 * sequential reference.
 *
 * Each step reads two cells of a small device array and writes one (a kernel, a host callback,
 * an asynchronous copy or a memset), on a random stream. Before a step, its stream waits for
 * the events of every earlier step on another stream it conflicts with (read-after-write,
 * write-after-read, write-after-write), so any schedule the device picks must give the
 * sequential result. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "support_hal.h"

enum { CELLS = 24, MAX_STREAMS = 8 };

typedef struct step {
  int kind; /* 0 kernel, 1 host callback, 2 copy, 3 memset */
  int stream;
  int dst, a, b;
  int64_t mul, add;
} step;

static void reference(const step *steps, int n, int64_t *cells) {
  for (int i = 0; i < n; i++) {
    const step *s = &steps[i];
    switch (s->kind) {
      case 0:
      case 1: cells[s->dst] = axpb_ref(cells[s->a], cells[s->b], s->mul, s->add); break;
      case 2: cells[s->dst] = cells[s->a]; break;
      default: memset(&cells[s->dst], (int)(s->add & 0xff), sizeof cells[0]); break;
    }
  }
}

static void run_dag(const hal_config *cfg, uint64_t seed, int n_steps) {
  uint64_t rng = seed;
  int n_streams = 1 + (int)(hal_rand(&rng) % MAX_STREAMS);
  step *steps = calloc((size_t)n_steps, sizeof *steps);
  for (int i = 0; i < n_steps; i++) {
    step *s = &steps[i];
    s->kind = (int)(hal_rand(&rng) % 8);
    s->kind = s->kind < 4 ? 0 : s->kind < 6 ? 1 : s->kind == 6 ? 2 : 3;
    s->stream = (int)(hal_rand(&rng) % (uint64_t)n_streams);
    s->dst = (int)(hal_rand(&rng) % CELLS);
    s->a = (int)(hal_rand(&rng) % CELLS);
    s->b = (int)(hal_rand(&rng) % CELLS);
    if (s->kind == 2 && s->a == s->dst) s->a = (s->a + 1) % CELLS;
    s->mul = (int64_t)(hal_rand(&rng) % 7) - 3;
    s->add = (int64_t)(hal_rand(&rng) % 1000);
  }
  int64_t init[CELLS], expect[CELLS], got[CELLS];
  for (int i = 0; i < CELLS; i++) init[i] = expect[i] = (int64_t)(hal_rand(&rng) % 100);
  reference(steps, n_steps, expect);

  mx_device *dev = hal_device(cfg, NULL);
  mx_stream *streams[MAX_STREAMS];
  for (int i = 0; i < n_streams; i++) cr_assert_eq(mx_stream_create(dev, i % 3, &streams[i]), MX_OK);
  mx_event **events = calloc((size_t)n_steps, sizeof *events);
  for (int i = 0; i < n_steps; i++) cr_assert_eq(mx_event_create(dev, &events[i]), MX_OK);
  int64_t *cells;
  cr_assert_eq(mx_device_alloc(dev, sizeof init, 0, (void **)&cells), MX_OK);
  cr_assert_eq(mx_device_copy(dev, cells, init, sizeof init, MX_COPY_H2D), MX_OK);

  int last_writer[CELLS];
  int *readers[CELLS]; /* steps that read the cell since its last write */
  int n_readers[CELLS];
  for (int c = 0; c < CELLS; c++) {
    last_writer[c] = -1;
    readers[c] = calloc((size_t)n_steps, sizeof(int));
    n_readers[c] = 0;
  }
  int waits = 0;
  int *deps = calloc((size_t)n_steps + 3, sizeof *deps);
  for (int i = 0; i < n_steps; i++) {
    const step *s = &steps[i];
    mx_stream *st = streams[s->stream];
    int nd = 0;
    bool reads_a = s->kind != 3, reads_b = s->kind <= 1;
    if (reads_a) deps[nd++] = last_writer[s->a];
    if (reads_b) deps[nd++] = last_writer[s->b];
    deps[nd++] = last_writer[s->dst];
    for (int r = 0; r < n_readers[s->dst]; r++) deps[nd++] = readers[s->dst][r];
    for (int d = 0; d < nd; d++) {
      int j = deps[d];
      if (j < 0 || steps[j].stream == s->stream) continue;
      cr_assert_eq(mx_stream_wait_event(st, events[j]), MX_OK);
      waits++;
    }
    switch (s->kind) {
      case 0:
      case 1: {
        axpb_args a = {&cells[s->dst], &cells[s->a], &cells[s->b], s->mul, s->add};
        mx_status rc = s->kind == 0 ? mx__hal_launch(st, k_axpb, &a, sizeof a)
                                    : mx__hal_host_callback(st, k_axpb, &a, sizeof a);
        cr_assert_eq(rc, MX_OK);
        break;
      }
      case 2:
        cr_assert_eq(mx_device_copy_async(st, &cells[s->dst], &cells[s->a], sizeof cells[0], MX_COPY_D2D),
                     MX_OK);
        break;
      default:
        cr_assert_eq(mx_device_memset_async(st, &cells[s->dst], (int)(s->add & 0xff), sizeof cells[0]),
                     MX_OK);
        break;
    }
    cr_assert_eq(mx_event_record(events[i], st), MX_OK);
    if (reads_a) readers[s->a][n_readers[s->a]++] = i;
    if (reads_b) readers[s->b][n_readers[s->b]++] = i;
    last_writer[s->dst] = i;
    n_readers[s->dst] = 0;
  }
  for (int i = 0; i < n_streams; i++)
    cr_assert_eq(mx_stream_synchronize(streams[i]), MX_OK, "%s seed %llu", cfg->name,
                 (unsigned long long)seed);
  cr_assert_eq(mx_device_copy(dev, got, cells, sizeof got, MX_COPY_D2H), MX_OK);
  for (int c = 0; c < CELLS; c++)
    cr_assert_eq(got[c], expect[c],
                 "%s seed %llu (%d streams, %d waits): cell %d is %lld, "
                 "expected %lld",
                 cfg->name, (unsigned long long)seed, n_streams, waits, c, (long long)got[c],
                 (long long)expect[c]);

  free(deps);
  for (int c = 0; c < CELLS; c++) free(readers[c]);
  for (int i = 0; i < n_steps; i++) mx_event_destroy(events[i]);
  free(events);
  cr_assert_eq(mx_device_free(dev, cells), MX_OK);
  for (int i = 0; i < n_streams; i++) mx_stream_destroy(streams[i]);
  mx_device_destroy(dev);
  free(steps);
}

Test(hal_dag, random_dags_all_devices) {
  for (int c = 0; c < hal_n_configs; c++) {
    for (uint64_t seed = 1; seed <= 12; seed++) run_dag(&hal_configs[c], seed * 7919 + (uint64_t)c, 300);
  }
  hal_check_leaks();
}

Test(hal_dag, long_dags) {
  for (int c = 0; c < hal_n_configs; c++) run_dag(&hal_configs[c], 424242 + (uint64_t)c, 3000);
  hal_check_leaks();
}
