/* Records the library fills are written at the caller's size (docs/abi.md, "Records the library
 * fills"): a caller built against an older, smaller layout gets only its bytes, one built
 * against a newer, larger layout gets zeros past the fields this library knows, and nothing is
 * ever written past the size the caller passed. */
#include <criterion/criterion.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "support_hal.h"

#define SENTINEL 0xA5
#define ROOM     256 /* bytes behind every record, which must stay SENTINEL */

static unsigned char buffer[4096 + ROOM];

static void prepare(void) { memset(buffer, SENTINEL, sizeof buffer); }

static bool untouched(size_t from, size_t to) {
  for (size_t i = from; i < to; i++)
    if (buffer[i] != SENTINEL) return false;
  return true;
}

static bool zero(size_t from, size_t to) {
  for (size_t i = from; i < to; i++)
    if (buffer[i] != 0) return false;
  return true;
}

Test(hal_record_sizes, memory_stats) {
  mx_device *dev = hal_device(&hal_configs[0], NULL);
  void *p = NULL;
  cr_assert_eq(mx_device_alloc(dev, 1000, 0, &p), MX_OK);
  mx_device_memory_stats own;
  mx_device_memory_stats_get(dev, &own); /* the inline wrapper: this header's size */
  cr_expect_geq(own.bytes_in_use, 1000);
  cr_expect_eq(own.live, 1);

  size_t older = offsetof(mx_device_memory_stats, shared_blocks); /* a layout before sharing */
  prepare();
  mx_device_memory_stats_get_sized(dev, (mx_device_memory_stats *)buffer, older);
  cr_expect_eq(memcmp(buffer, &own, older), 0);
  cr_expect(untouched(older, sizeof buffer), "wrote past an older caller's record");

  size_t newer = sizeof own + 64; /* a layout with eight more counters */
  prepare();
  mx_device_memory_stats_get_sized(dev, (mx_device_memory_stats *)buffer, newer);
  cr_expect_eq(memcmp(buffer, &own, sizeof own), 0);
  cr_expect(zero(sizeof own, newer), "a newer caller's unknown counters are not zero");
  cr_expect(untouched(newer, sizeof buffer));

  prepare();
  mx_device_memory_stats_get_sized(dev, (mx_device_memory_stats *)buffer, 0);
  cr_expect(untouched(0, sizeof buffer), "size 0 wrote something");
  mx_device_free(dev, p);
  mx_device_destroy(dev);
}

Test(hal_record_sizes, device_info) {
  mx_device *dev = hal_device(&hal_configs[0], NULL);
  mx_device_info own;
  mx_device_get_info(dev, &own);
  cr_expect_eq(own.kind, hal_configs[0].kind);
  size_t older = offsetof(mx_device_info, processing_units);
  prepare();
  mx_device_get_info_sized(dev, (mx_device_info *)buffer, older);
  cr_expect_eq(memcmp(buffer, &own, older), 0);
  cr_expect(untouched(older, sizeof buffer));
  prepare();
  mx_device_get_info_sized(dev, (mx_device_info *)buffer, 4096);
  cr_expect_eq(memcmp(buffer, &own, offsetof(mx_device_info, fault_nth)), 0);
  cr_expect(zero(sizeof own, 4096));
  cr_expect(untouched(4096, sizeof buffer));
  mx_device_destroy(dev);
}

Test(hal_record_sizes, stream_error) {
  mx_device *dev = hal_device(&hal_configs[0], NULL);
  mx_stream *s = NULL;
  cr_assert_eq(mx_stream_create(dev, 0, &s), MX_OK);
  mx_stream_error own;
  cr_expect_eq(mx_stream_get_error(s, &own), MX_OK);
  cr_expect_eq(own.model_task, -1);
  size_t older = offsetof(mx_stream_error, model_task);
  prepare();
  cr_expect_eq(mx_stream_get_error_sized(s, (mx_stream_error *)buffer, older), MX_OK);
  cr_expect_eq(memcmp(buffer, &own, older), 0);
  cr_expect(untouched(older, sizeof buffer));
  prepare();
  size_t newer = sizeof own + 32;
  cr_expect_eq(mx_stream_get_error_sized(s, (mx_stream_error *)buffer, newer), MX_OK);
  cr_expect_eq(((mx_stream_error *)buffer)->model_task, -1);
  cr_expect(zero(sizeof own, newer));
  cr_expect(untouched(newer, sizeof buffer));
  prepare();
  cr_expect_eq(mx_stream_get_error_sized(s, (mx_stream_error *)buffer, 0), MX_ERR_INVALID_ARGUMENT);
  cr_expect(untouched(0, sizeof buffer));
  mx_stream_destroy(s);
  mx_device_destroy(dev);
}
