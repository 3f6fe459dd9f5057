/* Huge-page backing of large device allocations (mx_device_options.huge_pages): where it
 * applies, how the bytes are counted, and that checking mode still sees the requested size,
 * not the rounded host block. Whether the kernel grants the huge pages is its decision (the
 * allocation only advises it), so the tests check what mixrt controls: the alignment and the
 * accounting. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "support_hal.h"

static mx_device *make_device(bool huge, uint32_t version, mx_device_check check) {
  mx_device_options o;
  mx_device_options_init(&o);
  o.kind = MX_DEVICE_INLINE;
  o.huge_pages = huge;
  o.check = check;
  o.version = version;
  mx_device *dev = NULL;
  mx_error err;
  cr_assert_eq(mx_device_create(&o, &dev, &err), MX_OK, "%s", err.message);
  return dev;
}

static bool huge_aligned(const void *p) { return ((uintptr_t)p & (MX_DEVICE_HUGE_PAGE - 1)) == 0; }

Test(hal_huge_pages, large_allocations_start_on_a_huge_page_and_count_what_was_asked) {
  mx_device *dev = make_device(true, MX_DEVICE_OPTIONS_VERSION, MX_CHECK_OFF);
  const size_t sizes[] = {MX_DEVICE_HUGE_PAGE_MIN, MX_DEVICE_HUGE_PAGE, MX_DEVICE_HUGE_PAGE + 64,
                          5 * MX_DEVICE_HUGE_PAGE - 4096};
  void *p[4];
  size_t total = 0;
  for (int i = 0; i < 4; i++) {
    cr_assert_eq(mx_device_alloc(dev, sizes[i], 64, &p[i]), MX_OK, "%s", mx_device_last_error(dev));
    cr_assert(huge_aligned(p[i]), "allocation of %zu bytes at %p", sizes[i], p[i]);
    memset(p[i], 0x5a, sizes[i]); /* every requested byte is usable */
    total += sizes[i];
  }
  mx_device_memory_stats st;
  mx_device_memory_stats_get(dev, &st);
  cr_assert_eq(st.bytes_in_use, total, "bytes_in_use %llu, requested %zu",
               (unsigned long long)st.bytes_in_use, total);
  for (int i = 0; i < 4; i++) cr_assert_eq(mx_device_free(dev, p[i]), MX_OK);
  mx_device_memory_stats_get(dev, &st);
  cr_assert_eq(st.bytes_in_use, 0);
  cr_assert_eq(st.live, 0);
  mx_device_destroy(dev);
  hal_check_leaks();
}

Test(hal_huge_pages, a_larger_alignment_than_a_huge_page_is_kept) {
  mx_device *dev = make_device(true, MX_DEVICE_OPTIONS_VERSION, MX_CHECK_OFF);
  void *p;
  cr_assert_eq(mx_device_alloc(dev, 3 * MX_DEVICE_HUGE_PAGE, 4 * MX_DEVICE_HUGE_PAGE, &p), MX_OK);
  cr_assert_eq((uintptr_t)p & (4 * MX_DEVICE_HUGE_PAGE - 1), 0, "%p", p);
  cr_assert_eq(mx_device_free(dev, p), MX_OK);
  mx_device_destroy(dev);
}

Test(hal_huge_pages, the_memory_limit_counts_requested_bytes_not_the_rounded_block) {
  mx_device_options o;
  mx_device_options_init(&o);
  o.kind = MX_DEVICE_INLINE;
  o.memory_limit = 2 * (MX_DEVICE_HUGE_PAGE + 64); /* two rounded blocks would need 4 huge pages */
  mx_device *dev;
  mx_error err;
  cr_assert_eq(mx_device_create(&o, &dev, &err), MX_OK, "%s", err.message);
  void *a, *b, *c;
  cr_assert_eq(mx_device_alloc(dev, MX_DEVICE_HUGE_PAGE + 64, 64, &a), MX_OK);
  cr_assert_eq(mx_device_alloc(dev, MX_DEVICE_HUGE_PAGE + 64, 64, &b), MX_OK);
  cr_assert_eq(mx_device_alloc(dev, 64, 64, &c), MX_ERR_DEVICE_OOM);
  cr_assert(strstr(mx_device_last_error(dev), "memory limit"), "%s", mx_device_last_error(dev));
  cr_assert_eq(mx_device_free(dev, a), MX_OK);
  cr_assert_eq(mx_device_free(dev, b), MX_OK);
  mx_device_destroy(dev);
  hal_check_leaks();
}

Test(hal_huge_pages, checking_mode_refuses_the_rounded_tail) {
  mx_device *dev = make_device(true, MX_DEVICE_OPTIONS_VERSION, MX_CHECK_ON);
  const size_t size = MX_DEVICE_HUGE_PAGE + 4096;
  char *p;
  cr_assert_eq(mx_device_alloc(dev, size, 64, (void **)&p), MX_OK);
  char byte = 1;
  cr_assert_eq(mx_device_copy(dev, p + size - 1, &byte, 1, MX_COPY_H2D), MX_OK);
  /* The host block runs on to the next huge page, but those bytes were never asked for. */
  cr_assert_eq(mx_device_copy(dev, p + size, &byte, 1, MX_COPY_H2D), MX_ERR_INVALID_ARGUMENT);
  cr_assert_eq(mx_device_free(dev, p), MX_OK);
  mx_device_destroy(dev);
  hal_check_leaks();
}

Test(hal_huge_pages, off_or_small_allocations_keep_the_asked_alignment) {
  /* With the option off, or below the threshold, the block is an ordinary one: it works, and
   * its alignment is the one asked for (it may be more by chance, so only usability and the
   * asked alignment are checked). */
  for (int huge = 0; huge < 2; huge++) {
    mx_device *dev = make_device(huge, MX_DEVICE_OPTIONS_VERSION, MX_CHECK_OFF);
    size_t size = huge ? MX_DEVICE_HUGE_PAGE_MIN - 64 : 4 * MX_DEVICE_HUGE_PAGE;
    void *p;
    cr_assert_eq(mx_device_alloc(dev, size, 128, &p), MX_OK);
    cr_assert_eq((uintptr_t)p & 127, 0);
    memset(p, 1, size);
    cr_assert_eq(mx_device_free(dev, p), MX_OK);
    mx_device_destroy(dev);
  }
  hal_check_leaks();
}

Test(hal_huge_pages, version_2_records_get_huge_pages_by_default) {
  /* A version-2 record ends before huge_pages: whatever lies past it is not read. */
  mx_device *dev = make_device(false, 2, MX_CHECK_OFF);
  mx_device_info info;
  mx_device_get_info(dev, &info);
  cr_assert_eq(info.kind, MX_DEVICE_INLINE);
  void *p;
  cr_assert_eq(mx_device_alloc(dev, 2 * MX_DEVICE_HUGE_PAGE, 64, &p), MX_OK);
  cr_assert(huge_aligned(p), "%p", p);
  cr_assert_eq(mx_device_free(dev, p), MX_OK);
  mx_device_destroy(dev);
  hal_check_leaks();
}
