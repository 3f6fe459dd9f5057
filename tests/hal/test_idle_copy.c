/* Small copies and memsets on an idle CPU-device stream run in the submitting thread: they are
 * done when the call returns, an event recorded after them is complete at once, and stream
 * order still holds when work is queued before them (then they wait for it on the worker), on
 * every device configuration. */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "support_hal.h"

Test(idle_copy, a_small_copy_on_an_idle_stream_is_done_on_return) {
  for (int c = 0; c < hal_n_configs; c++) {
    mx_device *dev = hal_device(&hal_configs[c], NULL);
    mx_stream *s;
    mx_event *ev;
    cr_assert_eq(mx_stream_create(dev, 0, &s), MX_OK);
    cr_assert_eq(mx_event_create(dev, &ev), MX_OK);
    int64_t *src, *dst;
    cr_assert_eq(mx_device_alloc(dev, 64 * sizeof *src, 64, (void **)&src), MX_OK);
    cr_assert_eq(mx_device_alloc(dev, 64 * sizeof *dst, 64, (void **)&dst), MX_OK);
    for (int i = 0; i < 64; i++) src[i] = 3 * i + 1;
    cr_assert_eq(mx_stream_synchronize(s), MX_OK);
    cr_assert_eq(mx_device_copy_async(s, dst, src, 64 * sizeof *src, MX_COPY_D2D), MX_OK);
    cr_assert_eq(mx_event_record(ev, s), MX_OK);
    if (hal_configs[c].kind == MX_DEVICE_CPU) {
      /* Nothing was queued before it: no worker was involved. */
      for (int i = 0; i < 64; i++) cr_assert_eq(dst[i], 3 * i + 1, "%s: element %d", hal_configs[c].name, i);
    }
    cr_assert_eq(mx_event_synchronize(ev), MX_OK);
    cr_assert_eq(mx_device_memset_async(s, dst, 0, 64 * sizeof *dst), MX_OK);
    cr_assert_eq(mx_stream_synchronize(s), MX_OK);
    for (int i = 0; i < 64; i++) cr_assert_eq(dst[i], 0, "%s: element %d", hal_configs[c].name, i);
    mx_device_free(dev, src);
    mx_device_free(dev, dst);
    mx_event_destroy(ev);
    mx_stream_destroy(s);
    mx_device_destroy(dev);
  }
  hal_check_leaks();
}

/* Writes *dst = value after sleeping: a command still running when the copy is submitted. */
typedef struct late_write {
  int64_t *dst;
  int64_t value;
  int64_t ns;
} late_write;

static mx_status k_late_write(void *args, size_t size) {
  (void)size;
  late_write *a = args;
  struct timespec ts = {.tv_sec = a->ns / 1000000000, .tv_nsec = a->ns % 1000000000};
  nanosleep(&ts, NULL);
  *a->dst = a->value;
  return MX_OK;
}

Test(idle_copy, a_copy_behind_queued_work_keeps_stream_order) {
  for (int c = 0; c < hal_n_configs; c++) {
    mx_device *dev = hal_device(&hal_configs[c], NULL);
    mx_stream *s;
    cr_assert_eq(mx_stream_create(dev, 0, &s), MX_OK);
    int64_t *a, *b;
    cr_assert_eq(mx_device_alloc(dev, sizeof *a, 64, (void **)&a), MX_OK);
    cr_assert_eq(mx_device_alloc(dev, sizeof *b, 64, (void **)&b), MX_OK);
    *a = 0;
    *b = -1;
    for (int64_t round = 1; round <= 3; round++) {
      late_write w = {.dst = a, .value = 100 + round, .ns = 5 * 1000 * 1000};
      cr_assert_eq(mx__hal_launch(s, k_late_write, &w, sizeof w), MX_OK);
      /* Queued behind the sleeping kernel: it must copy the value the kernel writes. */
      cr_assert_eq(mx_device_copy_async(s, b, a, sizeof *a, MX_COPY_D2D), MX_OK);
      cr_assert_eq(mx_stream_synchronize(s), MX_OK);
      cr_assert_eq(*b, 100 + round, "%s round %lld: %lld", hal_configs[c].name, (long long)round,
                   (long long)*b);
      /* The stream is idle again: the next copy runs in this thread, after all of the above. */
      *a = 7 * round;
      cr_assert_eq(mx_device_copy_async(s, b, a, sizeof *a, MX_COPY_D2D), MX_OK);
      cr_assert_eq(mx_stream_synchronize(s), MX_OK);
      cr_assert_eq(*b, 7 * round);
    }
    mx_device_free(dev, a);
    mx_device_free(dev, b);
    mx_stream_destroy(s);
    mx_device_destroy(dev);
  }
  hal_check_leaks();
}
