/* Shared helpers of the HAL tests (see support_hal.h). */
#include "support_hal.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const hal_config hal_configs[] = {
    {"cpu", MX_DEVICE_CPU, 0, 0, -1},
    {"cpu-shared-workers", MX_DEVICE_CPU, 2, 8, -1},
    {"cpu-no-spin", MX_DEVICE_CPU, 0, 16, 0},
    {"inline", MX_DEVICE_INLINE, 0, 0, -1},
};
const int hal_n_configs = (int)(sizeof hal_configs / sizeof hal_configs[0]);

mx_device_options hal_options(const hal_config *cfg) {
  mx_device_options o;
  mx_device_options_init(&o);
  o.kind = cfg->kind;
  o.max_workers = cfg->max_workers;
  o.ring_slots = cfg->ring_slots;
  o.spin_ns = cfg->spin_ns;
  o.check = MX_CHECK_OFF;
  o.fault_from_env = false;
  return o;
}

mx_device *hal_device(const hal_config *cfg, const mx_device_options *extra) {
  mx_device_options o = extra ? *extra : hal_options(cfg);
  mx_device *dev = NULL;
  mx_error err;
  mx_error_clear(&err);
  mx_status st = mx_device_create(&o, &dev, &err);
  cr_assert_eq(st, MX_OK, "%s: mx_device_create: %s", cfg->name, err.message);
  return dev;
}

mx_status k_append(void *args, size_t size) {
  append_args *a = args;
  if (size != sizeof *a) return MX_ERR_INVALID_ARGUMENT;
  a->log[(*a->pos)++] = a->value;
  return MX_OK;
}

int64_t axpb_ref(int64_t a, int64_t b, int64_t mul, int64_t add) {
  return (int64_t)((uint64_t)mul * (uint64_t)a + (uint64_t)b + (uint64_t)add);
}

mx_status k_axpb(void *args, size_t size) {
  axpb_args *a = args;
  if (size != sizeof *a) return MX_ERR_INVALID_ARGUMENT;
  *a->dst = axpb_ref(*a->a, *a->b, a->mul, a->add);
  return MX_OK;
}

mx_status k_status(void *args, size_t size) {
  mx_status st;
  if (size != sizeof st) return MX_ERR_INVALID_ARGUMENT;
  memcpy(&st, args, sizeof st);
  return st;
}

mx_status k_sleep_flag(void *args, size_t size) {
  sleep_args *a = args;
  if (size != sizeof *a) return MX_ERR_INVALID_ARGUMENT;
  struct timespec ts = {.tv_sec = a->ns / 1000000000, .tv_nsec = a->ns % 1000000000};
  nanosleep(&ts, NULL);
  atomic_store(a->flag, 1);
  return MX_OK;
}

mx_status k_sum_bytes(void *args, size_t size) {
  int64_t *dst;
  if (size < sizeof dst) return MX_ERR_INVALID_ARGUMENT;
  memcpy(&dst, args, sizeof dst);
  int64_t sum = 0;
  const unsigned char *p = args;
  for (size_t i = sizeof dst; i < size; i++) sum += p[i];
  *dst = sum;
  return MX_OK;
}

mx_status k_noop(void *args, size_t size) {
  (void)args;
  (void)size;
  return MX_OK;
}

uint64_t hal_rand(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Provided by the sanitizer runtime in AddressSanitizer builds; NULL otherwise. */
int __lsan_do_recoverable_leak_check(void) __attribute__((weak));

void hal_check_leaks(void) {
  if (__lsan_do_recoverable_leak_check)
    cr_assert_eq(__lsan_do_recoverable_leak_check(), 0, "host memory leaked (report above)");
}
