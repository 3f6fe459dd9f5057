/* Devices created with skip_kernels (benchmarking mixrt's own cost): launches and model tasks
 * keep their order, argument copies and events but run no kernel; copies and host callbacks
 * still run. An options record of version 1 (without the field) is still accepted. */
#include <criterion/criterion.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "support_hal.h"

Test(hal_skip, kernels_and_model_tasks_do_not_run_copies_and_callbacks_do) {
  for (int c = 0; c < hal_n_configs; c++) {
    const hal_config *cfg = &hal_configs[c];
    mx_device_options o = hal_options(cfg);
    o.skip_kernels = true;
    mx_device *dev = hal_device(cfg, &o);
    mx_stream *s;
    cr_assert_eq(mx_stream_create(dev, 0, &s), MX_OK);
    int64_t log[8] = {0}, pos = 0;
    for (int i = 0; i < 6; i++) {
      append_args a = {log, &pos, 100 + i};
      mx_status st = i % 3 == 2 ? mx__hal_host_callback(s, k_append, &a, sizeof a)
                                : mx__hal_launch(s, k_append, &a, sizeof a);
      cr_assert_eq(st, MX_OK, "%s", cfg->name);
    }
    /* A copy between device buffers runs, in order with the rest. */
    int64_t *src, *dst;
    cr_assert_eq(mx_device_alloc(dev, 64, 64, (void **)&src), MX_OK);
    cr_assert_eq(mx_device_alloc(dev, 64, 64, (void **)&dst), MX_OK);
    int64_t ones[8] = {1, 1, 1, 1, 1, 1, 1, 1}, back[8];
    cr_assert_eq(mx_device_copy(dev, src, ones, sizeof ones, MX_COPY_H2D), MX_OK);
    cr_assert_eq(mx_device_memset(dev, dst, 0, 64), MX_OK);
    cr_assert_eq(mx_device_copy_async(s, dst, src, 64, MX_COPY_D2D), MX_OK);
    /* A model of one task writing 7 into dst[0]: executed, but its kernel does not run. */
    mx_hal_model_desc d = {.n_streams = 1, .n_ids = 1, .mode = MX_HAL_MODEL_PATCH};
    mx_hal_model *m;
    mx_error err;
    cr_assert_eq(mx__hal_model_create(dev, &d, &m, &err), MX_OK, "%s", err.message);
    axpb_args args = {NULL, NULL, NULL, 0, 7};
    mx_hal_slot slots[3] = {
        {offsetof(axpb_args, dst), 0, 0}, {offsetof(axpb_args, a), 0, 8}, {offsetof(axpb_args, b), 0, 16}};
    mx_hal_task task = {k_axpb, &args, sizeof args, slots, 3};
    cr_assert_eq(mx__hal_model_add_task(m, 0, &task, NULL), MX_OK, "%s", mx__hal_model_last_error(m));
    cr_assert_eq(mx__hal_model_build_end(m), MX_OK, "%s", mx__hal_model_last_error(m));
    uint32_t id = 0;
    void *base = dst;
    cr_assert_eq(mx__hal_model_update_bases(m, &id, &base, 1), MX_OK);
    cr_assert_eq(mx__hal_model_execute(m, s), MX_OK, "%s", mx__hal_model_last_error(m));
    cr_assert_eq(mx_stream_synchronize(s), MX_OK, "%s", cfg->name);
    cr_assert_eq(pos, 2, "%s: only the two host callbacks ran (pos %lld)", cfg->name, (long long)pos);
    cr_assert(log[0] == 102 && log[1] == 105, "%s: %lld %lld", cfg->name, (long long)log[0],
              (long long)log[1]);
    cr_assert_eq(mx_device_copy(dev, back, dst, sizeof back, MX_COPY_D2H), MX_OK);
    for (int i = 0; i < 8; i++)
      cr_assert_eq(back[i], 1, "%s: the copy ran, the model's kernel did not", cfg->name);
    mx__hal_model_destroy(m);
    mx_device_free(dev, src);
    mx_device_free(dev, dst);
    mx_stream_destroy(s);
    mx_device_destroy(dev);
  }
  hal_check_leaks();
}

Test(hal_skip, version_1_options_are_accepted_without_the_field) {
  mx_device_options o;
  mx_device_options_init(&o);
  o.kind = MX_DEVICE_INLINE;
  o.version = 1;
  o.skip_kernels = true; /* past the end of a version-1 record: not read */
  mx_device *dev;
  mx_error err;
  cr_assert_eq(mx_device_create(&o, &dev, &err), MX_OK, "%s", err.message);
  mx_stream *s;
  cr_assert_eq(mx_stream_create(dev, 0, &s), MX_OK);
  int64_t log[1] = {0}, pos = 0;
  append_args a = {log, &pos, 5};
  cr_assert_eq(mx__hal_launch(s, k_append, &a, sizeof a), MX_OK);
  cr_assert_eq(mx_stream_synchronize(s), MX_OK);
  cr_assert_eq(pos, 1, "the kernel ran");
  mx_stream_destroy(s);
  mx_device_destroy(dev);
  o.version = MX_DEVICE_OPTIONS_VERSION + 1;
  cr_assert_eq(mx_device_create(&o, &dev, &err), MX_ERR_INVALID_ARGUMENT);
  char want[32];
  snprintf(want, sizeof want, "version %u", MX_DEVICE_OPTIONS_VERSION + 1);
  cr_assert(strstr(err.message, want), "%s", err.message);
}
