/* Fault injection: every injection point (alloc, copy, launch, kernel; synchronous and stream
 * paths, plain launches and models) returns an error, leaks nothing (device statistics here,
 * host memory under ASan), and the device works again after a stream reset. Also the
 * MIXRT_FAULT / MIXRT_DEVICE_CHECK environment variables. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "support_hal.h"

static mx_device *fault_device(const hal_config *cfg, mx_fault_point p, uint64_t nth) {
  mx_device_options o = hal_options(cfg);
  o.fault_nth[p] = nth;
  return hal_device(cfg, &o);
}

static void assert_no_device_memory(mx_device *dev, const char *what) {
  mx_device_memory_stats st;
  mx_device_memory_stats_get(dev, &st);
  cr_assert_eq(st.bytes_in_use, 0, "%s: %llu bytes still in use", what, (unsigned long long)st.bytes_in_use);
  cr_assert_eq(st.live, 0, "%s", what);
}

Test(hal_fault, alloc) {
  for (int c = 0; c < hal_n_configs; c++) {
    mx_device *dev = fault_device(&hal_configs[c], MX_FAULT_ALLOC, 3);
    void *p[4];
    cr_assert_eq(mx_device_alloc(dev, 64, 0, &p[0]), MX_OK);
    cr_assert_eq(mx_device_alloc(dev, 64, 0, &p[1]), MX_OK);
    cr_assert_eq(mx_device_alloc(dev, 64, 0, &p[2]), MX_ERR_DEVICE_OOM);
    cr_assert_null(p[2]);
    cr_assert(strstr(mx_device_last_error(dev), "injected fault (alloc:3)"));
    cr_assert_eq(mx_device_alloc(dev, 64, 0, &p[3]), MX_OK, "only the Nth fails");
    mx_device_memory_stats st;
    mx_device_memory_stats_get(dev, &st);
    cr_assert_eq(st.allocations, 3);
    cr_assert_eq(st.bytes_in_use, 192);
    cr_assert_eq(mx_device_free(dev, p[0]), MX_OK);
    cr_assert_eq(mx_device_free(dev, p[1]), MX_OK);
    cr_assert_eq(mx_device_free(dev, p[3]), MX_OK);
    assert_no_device_memory(dev, hal_configs[c].name);
    mx_device_destroy(dev);
  }
  hal_check_leaks();
}

Test(hal_fault, copy_sync_and_async) {
  for (int c = 0; c < hal_n_configs; c++) {
    const hal_config *cfg = &hal_configs[c];
    /* synchronous: the call fails */
    mx_device *dev = fault_device(cfg, MX_FAULT_COPY, 2);
    char h[64] = "abc", back[64] = {0};
    void *d;
    cr_assert_eq(mx_device_alloc(dev, 64, 0, &d), MX_OK);
    cr_assert_eq(mx_device_copy(dev, d, h, 64, MX_COPY_H2D), MX_OK);
    cr_assert_eq(mx_device_copy(dev, back, d, 64, MX_COPY_D2H), MX_ERR_DEVICE);
    cr_assert(strstr(mx_device_last_error(dev), "injected fault (copy:2)"));
    cr_assert_eq(back[0], 0, "the failed copy did not copy");
    cr_assert_eq(mx_device_copy(dev, back, d, 64, MX_COPY_D2H), MX_OK);
    cr_assert_str_eq(back, "abc");
    cr_assert_eq(mx_device_free(dev, d), MX_OK);
    assert_no_device_memory(dev, cfg->name);
    mx_device_destroy(dev);

    /* asynchronous: the stream fails, later work is skipped, reset recovers */
    dev = fault_device(cfg, MX_FAULT_COPY, 2);
    mx_stream *s;
    cr_assert_eq(mx_stream_create(dev, 0, &s), MX_OK);
    cr_assert_eq(mx_device_alloc(dev, 64, 0, &d), MX_OK);
    memset(back, 0, sizeof back);
    cr_assert_eq(mx_device_copy_async(s, d, h, 64, MX_COPY_H2D), MX_OK);
    cr_assert_eq(mx_device_copy_async(s, back, d, 64, MX_COPY_D2H), MX_OK);
    cr_assert_eq(mx_device_memset_async(s, d, 0, 64), MX_OK); /* skipped */
    cr_assert_eq(mx_stream_synchronize(s), MX_ERR_DEVICE, "%s", cfg->name);
    mx_stream_error e;
    cr_assert_eq(mx_stream_get_error(s, &e), MX_ERR_DEVICE);
    cr_assert_eq(e.command, 2);
    cr_assert(strstr(e.message, "injected fault (copy:2)"), "%s", e.message);
    cr_assert_eq(back[0], 0);
    cr_assert_eq(mx_stream_query(s), MX_ERR_DEVICE);
    cr_assert_eq(mx_stream_reset(s), MX_ERR_DEVICE);
    cr_assert_eq(mx_stream_query(s), MX_OK);
    cr_assert_eq(mx_device_copy_async(s, back, d, 64, MX_COPY_D2H), MX_OK);
    cr_assert_eq(mx_stream_synchronize(s), MX_OK);
    cr_assert_str_eq(back, "abc", "the skipped memset did not run; the device works again");
    cr_assert_eq(mx_device_free_async(s, d), MX_OK);
    cr_assert_eq(mx_stream_synchronize(s), MX_OK);
    assert_no_device_memory(dev, cfg->name);
    mx_stream_destroy(s);
    mx_device_destroy(dev);
  }
  hal_check_leaks();
}

Test(hal_fault, launch) {
  for (int c = 0; c < hal_n_configs; c++) {
    const hal_config *cfg = &hal_configs[c];
    mx_device *dev = fault_device(cfg, MX_FAULT_LAUNCH, 3);
    mx_stream *s;
    cr_assert_eq(mx_stream_create(dev, 0, &s), MX_OK);
    int64_t log[16];
    int64_t pos = 0;
    for (int i = 1; i <= 4; i++) {
      append_args a = {log, &pos, i};
      mx_status st = mx__hal_launch(s, k_append, &a, sizeof a);
      cr_assert_eq(st, i == 3 ? MX_ERR_DEVICE : MX_OK, "%s: launch %d", cfg->name, i);
    }
    cr_assert(strstr(mx_device_last_error(dev), "injected fault (launch:3)"));
    cr_assert_eq(mx_stream_synchronize(s), MX_ERR_DEVICE);
    mx_stream_error e;
    mx_stream_get_error(s, &e);
    cr_assert_eq(e.command, 3, "%s: the failure sits at the launch's place in the order", cfg->name);
    cr_assert_eq(pos, 2, "launch 4 was skipped");
    cr_assert_eq(mx_stream_reset(s), MX_ERR_DEVICE);
    append_args a = {log, &pos, 5};
    cr_assert_eq(mx__hal_launch(s, k_append, &a, sizeof a), MX_OK);
    cr_assert_eq(mx_stream_synchronize(s), MX_OK);
    cr_assert_eq(pos, 3);
    cr_assert_eq(log[2], 5);
    mx_stream_destroy(s);
    mx_device_destroy(dev);
  }
  hal_check_leaks();
}

Test(hal_fault, launch_of_model_execute) {
  for (int c = 0; c < hal_n_configs; c++) {
    const hal_config *cfg = &hal_configs[c];
    mx_device *dev = fault_device(cfg, MX_FAULT_LAUNCH, 2);
    mx_stream *s;
    cr_assert_eq(mx_stream_create(dev, 0, &s), MX_OK);
    mx_hal_model_desc d = {.n_streams = 2, .n_ids = 1};
    mx_hal_model *m;
    cr_assert_eq(mx__hal_model_create(dev, &d, &m, NULL), MX_OK);
    int64_t log[16];
    int64_t pos = 0;
    append_args a = {log, &pos, 7};
    mx_hal_task t = {k_append, &a, sizeof a, NULL, 0};
    cr_assert_eq(mx__hal_model_add_task(m, 1, &t, NULL), MX_OK);
    cr_assert_eq(mx__hal_model_build_end(m), MX_OK);
    cr_assert_eq(mx__hal_model_execute(m, s), MX_OK);
    cr_assert_eq(mx__hal_model_execute(m, s), MX_ERR_DEVICE);
    cr_assert(strstr(mx__hal_model_last_error(m), "injected fault (launch:2)"), "%s",
              mx__hal_model_last_error(m));
    cr_assert_eq(mx_stream_synchronize(s), MX_ERR_DEVICE);
    cr_assert_eq(pos, 1);
    cr_assert_eq(mx_stream_reset(s), MX_ERR_DEVICE);
    cr_assert_eq(mx__hal_model_execute(m, s), MX_OK);
    cr_assert_eq(mx_stream_synchronize(s), MX_OK);
    cr_assert_eq(pos, 2);
    mx_hal_model_stats st;
    mx__hal_model_stats_get(m, &st);
    cr_assert_eq(st.executions, 2);
    mx__hal_model_destroy(m);
    mx_stream_destroy(s);
    mx_device_destroy(dev);
  }
  hal_check_leaks();
}

Test(hal_fault, kernel_plain_and_in_model) {
  for (int c = 0; c < hal_n_configs; c++) {
    const hal_config *cfg = &hal_configs[c];
    mx_device *dev = fault_device(cfg, MX_FAULT_KERNEL, 2);
    mx_stream *s;
    cr_assert_eq(mx_stream_create(dev, 0, &s), MX_OK);
    int64_t log[64];
    int64_t pos = 0;
    append_args a = {log, &pos, 1};
    cr_assert_eq(mx__hal_host_callback(s, k_append, &a, sizeof a), MX_OK); /* not a kernel */
    cr_assert_eq(mx__hal_launch(s, k_append, &a, sizeof a), MX_OK);        /* kernel 1 */
    cr_assert_eq(mx__hal_launch(s, k_append, &a, sizeof a), MX_OK);        /* kernel 2 fails */
    cr_assert_eq(mx__hal_launch(s, k_append, &a, sizeof a), MX_OK);        /* skipped */
    cr_assert_eq(mx_stream_synchronize(s), MX_ERR_KERNEL, "%s", cfg->name);
    mx_stream_error e;
    mx_stream_get_error(s, &e);
    cr_assert_eq(e.command, 3);
    cr_assert(strstr(e.message, "injected fault (kernel:2)"), "%s", e.message);
    cr_assert_eq(pos, 2);
    cr_assert_eq(mx_stream_reset(s), MX_ERR_KERNEL);
    mx_device_destroy(dev);

    /* inside a model: the 4th kernel run is model task 3 */
    for (int mode = 0; mode < 2; mode++) {
      dev = fault_device(cfg, MX_FAULT_KERNEL, 4);
      cr_assert_eq(mx_stream_create(dev, 0, &s), MX_OK);
      mx_hal_model_desc d = {.n_streams = 1, .n_ids = 1, .mode = (mx_hal_model_mode)mode};
      mx_hal_model *m;
      cr_assert_eq(mx__hal_model_create(dev, &d, &m, NULL), MX_OK);
      pos = 0;
      for (int i = 0; i < 6; i++) {
        append_args b = {log, &pos, i};
        mx_hal_task t = {k_append, &b, sizeof b, NULL, 0};
        cr_assert_eq(mx__hal_model_add_task(m, 0, &t, NULL), MX_OK);
      }
      cr_assert_eq(mx__hal_model_build_end(m), MX_OK);
      cr_assert_eq(mx__hal_model_execute(m, s), MX_OK);
      cr_assert_eq(mx_stream_synchronize(s), MX_ERR_KERNEL);
      mx_stream_get_error(s, &e);
      cr_assert_eq(e.model_task, 3, "%s", cfg->name);
      cr_assert_eq(e.model_stream, 0);
      cr_assert(strstr(e.message, "model task 3 (internal stream 0) failed: injected fault"), "%s",
                e.message);
      cr_assert_eq(pos, 3, "tasks after the failing one are skipped");
      cr_assert_eq(mx_stream_reset(s), MX_ERR_KERNEL);
      pos = 0;
      cr_assert_eq(mx__hal_model_execute(m, s), MX_OK);
      cr_assert_eq(mx_stream_synchronize(s), MX_OK);
      cr_assert_eq(pos, 6);
      mx__hal_model_destroy(m);
      mx_stream_destroy(s);
      mx_device_destroy(dev);
    }
  }
  hal_check_leaks();
}

/* Every point, at every N over a fixed workload: each run fails exactly once somewhere, the
 * error surfaces, and after reset + cleanup no device memory is left. */
static void workload(mx_device *dev, mx_stream *s, int *failures) {
  void *d[3] = {NULL, NULL, NULL};
  char h[128] = "payload";
  char back[128];
  for (int i = 0; i < 3; i++) {
    if (mx_device_alloc(dev, 128, 0, &d[i]) != MX_OK) (*failures)++;
  }
  for (int i = 0; i < 3; i++) {
    if (!d[i]) continue;
    if (mx_device_copy(dev, d[i], h, sizeof h, MX_COPY_H2D) != MX_OK) (*failures)++;
    if (mx_device_copy_async(s, back, d[i], sizeof back, MX_COPY_D2H) != MX_OK) (*failures)++;
    if (mx__hal_launch(s, k_noop, NULL, 0) != MX_OK) (*failures)++;
  }
  if (mx_stream_synchronize(s) != MX_OK) {
    (*failures)++;
    mx_stream_reset(s);
  }
  for (int i = 0; i < 3; i++) {
    if (d[i]) cr_assert_eq(mx_device_free_async(s, d[i]), MX_OK);
  }
  cr_assert_eq(mx_stream_synchronize(s), MX_OK);
}

Test(hal_fault, every_point_every_n) {
  for (int c = 0; c < hal_n_configs; c++) {
    const hal_config *cfg = &hal_configs[c];
    /* operations of each point in one workload: alloc 3, copy 3 + 3, launch 3, kernel 3 */
    const uint64_t ops[MX_FAULT_POINT_COUNT] = {3, 6, 3, 3};
    for (int p = 0; p < MX_FAULT_POINT_COUNT; p++) {
      for (uint64_t n = 1; n <= ops[p]; n++) {
        mx_device *dev = fault_device(cfg, (mx_fault_point)p, n);
        mx_stream *s;
        cr_assert_eq(mx_stream_create(dev, 0, &s), MX_OK);
        int failures = 0;
        workload(dev, s, &failures);
        cr_assert_geq(failures, 1, "%s point %d n %llu: no error surfaced", cfg->name, p,
                      (unsigned long long)n);
        failures = 0;
        workload(dev, s, &failures); /* the fault fired once: everything works now */
        cr_assert_eq(failures, 0, "%s point %d n %llu", cfg->name, p, (unsigned long long)n);
        assert_no_device_memory(dev, cfg->name);
        mx_stream_destroy(s);
        mx_device_destroy(dev);
      }
    }
  }
  hal_check_leaks();
}

Test(hal_fault, environment_variables) {
  setenv("MIXRT_FAULT", "launch:2,alloc:5", 1);
  setenv("MIXRT_DEVICE_CHECK", "1", 1);
  mx_device *dev = NULL;
  mx_error err;
  cr_assert_eq(mx_device_create(NULL, &dev, &err), MX_OK, "%s", err.message);
  mx_device_info info;
  mx_device_get_info(dev, &info);
  cr_assert(info.check);
  cr_assert_eq(info.fault_nth[MX_FAULT_LAUNCH], 2);
  cr_assert_eq(info.fault_nth[MX_FAULT_ALLOC], 5);
  cr_assert_eq(info.fault_nth[MX_FAULT_COPY], 0);
  mx_stream *s;
  cr_assert_eq(mx_stream_create(dev, 0, &s), MX_OK);
  cr_assert_eq(mx__hal_launch(s, k_noop, NULL, 0), MX_OK);
  cr_assert_eq(mx__hal_launch(s, k_noop, NULL, 0), MX_ERR_DEVICE);
  cr_assert_eq(mx_stream_reset(s), MX_ERR_DEVICE);
  mx_device_destroy(dev);

  /* explicit options win over the environment */
  mx_device_options o;
  mx_device_options_init(&o);
  o.check = MX_CHECK_OFF;
  o.fault_nth[MX_FAULT_COPY] = 9;
  cr_assert_eq(mx_device_create(&o, &dev, &err), MX_OK);
  mx_device_get_info(dev, &info);
  cr_assert(!info.check);
  cr_assert_eq(info.fault_nth[MX_FAULT_LAUNCH], 0);
  cr_assert_eq(info.fault_nth[MX_FAULT_COPY], 9);
  mx_device_destroy(dev);

  const char *bad[] = {"launch", "launch:0", "lunch:3", "alloc:3,", "copy:x", "kernel:1:2"};
  for (int i = 0; i < 6; i++) {
    setenv("MIXRT_FAULT", bad[i], 1);
    cr_assert_eq(mx_device_create(NULL, &dev, &err), MX_ERR_INVALID_ARGUMENT, "'%s' accepted", bad[i]);
    cr_assert_null(dev);
    cr_assert(strstr(err.message, "MIXRT_FAULT="), "%s", err.message);
  }
  setenv("MIXRT_FAULT", "", 1);
  setenv("MIXRT_DEVICE_CHECK", "yes", 1);
  cr_assert_eq(mx_device_create(NULL, &dev, &err), MX_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(err.message, "MIXRT_DEVICE_CHECK='yes'"), "%s", err.message);
  unsetenv("MIXRT_DEVICE_CHECK");
  unsetenv("MIXRT_FAULT");
  hal_check_leaks();
}
