/* Device error messages are kept per thread: a host call that fails on one thread leaves its
 * message for that thread only, so sessions that share a device never read (or overwrite) each
 * other's messages; another device's failure does not show either. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "support_hal.h"

typedef struct fail_job {
  mx_device *dev;
  pthread_barrier_t *failed;  /* both threads have made their call */
  pthread_barrier_t *checked; /* both threads have read their message */
  bool fail;                  /* this thread's call fails (a double free) */
  char seen[MX_ERROR_MESSAGE_MAX];
} fail_job;

static void *fail_or_not(void *arg) {
  fail_job *j = arg;
  int local;
  if (j->fail) (void)mx_device_free(j->dev, &local); /* not a device allocation */
  pthread_barrier_wait(j->failed);
  snprintf(j->seen, sizeof j->seen, "%s", mx_device_last_error(j->dev));
  pthread_barrier_wait(j->checked);
  return NULL;
}

Test(hal_last_error, messages_are_per_thread) {
  for (int c = 0; c < hal_n_configs; c++) {
    mx_device *dev = hal_device(&hal_configs[c], NULL);
    pthread_barrier_t failed, checked;
    pthread_barrier_init(&failed, NULL, 2);
    pthread_barrier_init(&checked, NULL, 2);
    fail_job a = {dev, &failed, &checked, true, ""}, b = {dev, &failed, &checked, false, ""};
    pthread_t ta, tb;
    cr_assert_eq(pthread_create(&ta, NULL, fail_or_not, &a), 0);
    cr_assert_eq(pthread_create(&tb, NULL, fail_or_not, &b), 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    cr_expect(strstr(a.seen, "not a live device allocation"), "failing thread read '%s'", a.seen);
    cr_expect_str_empty(b.seen, "the other thread read '%s'", b.seen);
    cr_expect_str_empty(mx_device_last_error(dev), "the main thread read '%s'", mx_device_last_error(dev));
    pthread_barrier_destroy(&failed);
    pthread_barrier_destroy(&checked);
    mx_device_destroy(dev);
  }
}

Test(hal_last_error, another_devices_failure_does_not_show) {
  mx_device *d1 = hal_device(&hal_configs[0], NULL);
  mx_device *d2 = hal_device(&hal_configs[0], NULL);
  int local;
  cr_assert_neq(mx_device_free(d1, &local), MX_OK);
  cr_expect(strstr(mx_device_last_error(d1), "not a live device allocation"));
  cr_expect_str_empty(mx_device_last_error(d2));
  cr_expect_str_empty(mx_device_last_error(NULL));
  mx_device_destroy(d1);
  mx_device_destroy(d2);
}
