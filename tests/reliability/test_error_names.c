/* Device-side failures name what failed: a named launch, a named asynchronous copy and a named
 * task of a named HAL model carry their names into the stream's error, and a stream that waits
 * for a failed stream through an event repeats the original message (so a session that finds
 * the failure on another stream still says which op it was). On both CPU devices. */
#include <criterion/criterion.h>
#include <string.h>

#include "hal/hal.h"

static mx_status k_ok(void *args, size_t size) {
  (void)args;
  (void)size;
  return MX_OK;
}

static mx_status k_fails(void *args, size_t size) {
  (void)args;
  (void)size;
  return MX_ERR_KERNEL;
}

static mx_device *device(mx_device_kind kind, mx_fault_point p, uint64_t nth) {
  mx_device_options o;
  mx_device_options_init(&o);
  o.kind = kind;
  o.fault_from_env = false;
  if (nth) o.fault_nth[p] = nth;
  mx_device *dev;
  mx_error err;
  cr_assert_eq(mx_device_create(&o, &dev, &err), MX_OK, "%s", err.message);
  return dev;
}

static const mx_device_kind kinds[] = {MX_DEVICE_INLINE, MX_DEVICE_CPU};

static void expect_message(mx_stream *s, const char *want) {
  mx_stream_error e;
  cr_assert_neq(mx_stream_synchronize(s), MX_OK);
  mx_stream_get_error(s, &e);
  cr_assert(strstr(e.message, want), "'%s' not in: %s", want, e.message);
}

Test(error_names, failing_and_faulted_launches) {
  for (size_t k = 0; k < 2; k++) {
    mx_device *dev = device(kinds[k], MX_FAULT_KERNEL, 2);
    mx_stream *s;
    cr_assert_eq(mx_stream_create(dev, 0, &s), MX_OK);
    cr_assert_eq(mx__hal_launch_named(s, k_ok, NULL, 0, "first"), MX_OK);
    cr_assert_eq(mx__hal_launch_named(s, k_ok, NULL, 0, "l0/attention"), MX_OK);
    expect_message(s, "command 2 (kernel 'l0/attention') failed: injected fault (kernel:2)");
    mx_stream_reset(s);
    cr_assert_eq(mx__hal_launch_named(s, k_fails, NULL, 0, "l0/q_proj"), MX_OK);
    expect_message(s, "(kernel 'l0/q_proj') failed");
    mx_stream_reset(s);
    cr_assert_eq(mx__hal_launch(s, k_fails, NULL, 0), MX_OK);
    expect_message(s, "(kernel) failed");
    mx_stream_destroy(s);
    mx_device_destroy(dev);
  }
}

Test(error_names, faulted_copies) {
  for (size_t k = 0; k < 2; k++) {
    mx_device *dev = device(kinds[k], MX_FAULT_COPY, 1);
    mx_stream *s;
    cr_assert_eq(mx_stream_create(dev, 0, &s), MX_OK);
    void *d;
    char h[32] = {0};
    cr_assert_eq(mx_device_alloc(dev, sizeof h, 0, &d), MX_OK);
    cr_assert_eq(mx__hal_copy_async_named(s, d, h, sizeof h, MX_COPY_H2D, "past_key_0"), MX_OK);
    expect_message(s, "(asynchronous copy of 32 bytes of 'past_key_0') failed: injected fault (copy:1)");
    mx_device_free(dev, d);
    mx_stream_destroy(s);
    mx_device_destroy(dev);
  }
}

Test(error_names, named_model_tasks) {
  for (size_t k = 0; k < 2; k++) {
    mx_device *dev = device(kinds[k], MX_FAULT_KERNEL, 2);
    mx_stream *s;
    cr_assert_eq(mx_stream_create(dev, 0, &s), MX_OK);
    mx_hal_model_desc desc = {.n_streams = 1, .n_ids = 1, .name = "partition_3"};
    mx_hal_model *m;
    mx_error err;
    cr_assert_eq(mx__hal_model_create(dev, &desc, &m, &err), MX_OK, "%s", err.message);
    mx_hal_task t = {.fn = k_ok};
    cr_assert_eq(mx__hal_model_add_task_named(m, 0, &t, "l0/k_proj", NULL), MX_OK);
    cr_assert_eq(mx__hal_model_add_task_named(m, 0, &t, "l0/v_proj", NULL), MX_OK);
    cr_assert_eq(mx__hal_model_add_task(m, 0, &t, NULL), MX_OK);
    cr_assert_eq(mx__hal_model_build_end(m), MX_OK);
    cr_assert_eq(mx__hal_model_execute(m, s), MX_OK);
    expect_message(s, "model 'partition_3' task 1 'l0/v_proj' (internal stream 0) failed: injected fault");
    mx__hal_model_destroy(m);
    mx_stream_destroy(s);
    mx_device_destroy(dev);
  }
}

Test(error_names, waits_repeat_the_original_message) {
  for (size_t k = 0; k < 2; k++) {
    mx_device *dev = device(kinds[k], MX_FAULT_KERNEL, 1);
    mx_stream *a, *b;
    mx_event *e;
    cr_assert_eq(mx_stream_create(dev, 0, &a), MX_OK);
    cr_assert_eq(mx_stream_create(dev, 0, &b), MX_OK);
    cr_assert_eq(mx_event_create(dev, &e), MX_OK);
    cr_assert_eq(mx__hal_launch_named(a, k_ok, NULL, 0, "e0/nonzero"), MX_OK);
    cr_assert_eq(mx_event_record(e, a), MX_OK);
    cr_assert_eq(mx_stream_wait_event(b, e), MX_OK);
    expect_message(b,
                   "waited for an event of a stream that failed at its command 1: command 1 (kernel "
                   "'e0/nonzero') failed: injected fault (kernel:1)");
    mx_event_destroy(e);
    mx_stream_destroy(a);
    mx_stream_destroy(b);
    mx_device_destroy(dev);
  }
}
