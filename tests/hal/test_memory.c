/* Device memory: allocation statistics, alignment, the memory limit (MX_ERR_DEVICE_OOM),
 * invalid frees, registered buffers, synchronous and stream-ordered copies, memsets and frees,
 * and checking mode on copy ranges. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "support_hal.h"

Test(hal_memory, alloc_free_stats_alignment) {
  for (int c = 0; c < hal_n_configs; c++) {
    mx_device *dev = hal_device(&hal_configs[c], NULL);
    void *p[5];
    size_t sizes[5] = {1, 100, 4096, 0, 1 << 20};
    size_t aligns[5] = {0, 8, 4096, 16, 256};
    uint64_t total = 0;
    for (int i = 0; i < 5; i++) {
      cr_assert_eq(mx_device_alloc(dev, sizes[i], aligns[i], &p[i]), MX_OK);
      cr_assert_not_null(p[i]);
      size_t al = aligns[i] ? aligns[i] : 64;
      cr_assert_eq((uintptr_t)p[i] % al, 0);
      total += sizes[i];
    }
    mx_device_memory_stats st;
    mx_device_memory_stats_get(dev, &st);
    cr_assert_eq(st.bytes_in_use, total);
    cr_assert_eq(st.peak_bytes, total);
    cr_assert_eq(st.allocations, 5);
    cr_assert_eq(st.live, 5);
    cr_assert_eq(mx_device_free(dev, p[4]), MX_OK);
    mx_device_memory_stats_get(dev, &st);
    cr_assert_eq(st.bytes_in_use, total - (1 << 20));
    cr_assert_eq(st.peak_bytes, total);
    mx_device_memory_reset_peak(dev);
    mx_device_memory_stats_get(dev, &st);
    cr_assert_eq(st.peak_bytes, st.bytes_in_use);
    cr_assert_eq(mx_device_free(dev, p[4]), MX_ERR_INVALID_ARGUMENT, "double free");
    cr_assert(strstr(mx_device_last_error(dev), "not a live device allocation"));
    int local;
    cr_assert_eq(mx_device_free(dev, &local), MX_ERR_INVALID_ARGUMENT);
    cr_assert_eq(mx_device_free(dev, NULL), MX_OK);
    void *q;
    cr_assert_eq(mx_device_alloc(dev, 8, 3, &q), MX_ERR_INVALID_ARGUMENT);
    cr_assert_null(q);
    for (int i = 0; i < 4; i++) cr_assert_eq(mx_device_free(dev, p[i]), MX_OK);
    mx_device_memory_stats_get(dev, &st);
    cr_assert_eq(st.bytes_in_use, 0);
    cr_assert_eq(st.live, 0);
    cr_assert_eq(st.frees, 5);
    mx_device_destroy(dev);
  }
  hal_check_leaks();
}

Test(hal_memory, memory_limit_gives_device_oom) {
  for (int c = 0; c < hal_n_configs; c++) {
    mx_device_options o = hal_options(&hal_configs[c]);
    o.memory_limit = 1000;
    mx_device *dev = hal_device(&hal_configs[c], &o);
    void *a, *b, *d;
    cr_assert_eq(mx_device_alloc(dev, 600, 0, &a), MX_OK);
    cr_assert_eq(mx_device_alloc(dev, 500, 0, &b), MX_ERR_DEVICE_OOM);
    cr_assert_null(b);
    cr_assert(strstr(mx_device_last_error(dev),
                     "device memory limit exceeded: 500 bytes requested, "
                     "600 of 1000 bytes in use"),
              "%s", mx_device_last_error(dev));
    cr_assert_eq(mx_device_alloc(dev, 400, 0, &b), MX_OK, "exactly at the limit");
    cr_assert_eq(mx_device_alloc(dev, 1, 0, &d), MX_ERR_DEVICE_OOM);
    cr_assert_eq(mx_device_alloc(dev, SIZE_MAX, 0, &d), MX_ERR_DEVICE_OOM);
    cr_assert_eq(mx_device_free(dev, a), MX_OK);
    cr_assert_eq(mx_device_alloc(dev, 600, 0, &a), MX_OK);
    mx_device_memory_stats st;
    mx_device_memory_stats_get(dev, &st);
    cr_assert_eq(st.bytes_in_use, 1000);
    cr_assert_eq(st.limit_bytes, 1000);
    mx_device_destroy(dev); /* frees a and b */
  }
  hal_check_leaks();
}

Test(hal_memory, copies_memsets_and_ordered_free) {
  for (int c = 0; c < hal_n_configs; c++) {
    mx_device *dev = hal_device(&hal_configs[c], NULL);
    mx_stream *s;
    cr_assert_eq(mx_stream_create(dev, 0, &s), MX_OK);
    enum { N = 4096 };
    unsigned char *host = malloc(N), *back = malloc(N);
    for (int i = 0; i < N; i++) host[i] = (unsigned char)(i * 13);
    void *d1, *d2;
    cr_assert_eq(mx_device_alloc(dev, N, 0, &d1), MX_OK);
    cr_assert_eq(mx_device_alloc(dev, N, 0, &d2), MX_OK);
    cr_assert_eq(mx_device_copy(dev, d1, host, N, MX_COPY_H2D), MX_OK);
    cr_assert_eq(mx_device_copy_async(s, d2, d1, N, MX_COPY_D2D), MX_OK);
    cr_assert_eq(mx_device_memset_async(s, d1, 0x5a, N / 2), MX_OK);
    cr_assert_eq(mx_device_copy_async(s, back, d2, N, MX_COPY_D2H), MX_OK);
    cr_assert_eq(mx_device_free_async(s, d2), MX_OK);
    cr_assert_eq(mx_stream_synchronize(s), MX_OK);
    cr_assert_eq(memcmp(back, host, N), 0);
    cr_assert_eq(mx_device_copy(dev, back, d1, N, MX_COPY_D2H), MX_OK);
    for (int i = 0; i < N / 2; i++) cr_assert_eq(back[i], 0x5a);
    cr_assert_eq(memcmp(back + N / 2, host + N / 2, N / 2), 0);
    cr_assert_eq(mx_device_memset(dev, d1, 0, N), MX_OK);
    mx_device_memory_stats st;
    mx_device_memory_stats_get(dev, &st);
    cr_assert_eq(st.live, 1, "the stream-ordered free ran");
    cr_assert_eq(mx_device_free_async(s, d2), MX_ERR_INVALID_ARGUMENT);
    cr_assert_eq(mx_device_copy(dev, d1, host, 16, (mx_copy_kind)7), MX_ERR_INVALID_ARGUMENT);
    cr_assert_eq(mx_device_copy(dev, NULL, host, 16, MX_COPY_H2D), MX_ERR_INVALID_ARGUMENT);
    cr_assert_eq(mx_device_copy(dev, NULL, NULL, 0, MX_COPY_H2D), MX_OK);
    cr_assert_eq(mx_device_free(dev, d1), MX_OK);
    free(host);
    free(back);
    mx_stream_destroy(s);
    mx_device_destroy(dev);
  }
  hal_check_leaks();
}

Test(hal_memory, checking_mode_copy_ranges) {
  for (int c = 0; c < hal_n_configs; c++) {
    mx_device_options o = hal_options(&hal_configs[c]);
    o.check = MX_CHECK_ON;
    mx_device *dev = hal_device(&hal_configs[c], &o);
    mx_stream *s;
    cr_assert_eq(mx_stream_create(dev, 0, &s), MX_OK);
    char host[256] = {0};
    char *d;
    cr_assert_eq(mx_device_alloc(dev, 100, 0, (void **)&d), MX_OK);
    cr_assert_eq(mx_device_copy(dev, d, host, 100, MX_COPY_H2D), MX_OK);
    cr_assert_eq(mx_device_copy(dev, d + 50, host, 50, MX_COPY_H2D), MX_OK);
    cr_assert_eq(mx_device_copy(dev, d + 50, host, 51, MX_COPY_H2D), MX_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(mx_device_last_error(dev), "destination range"), "%s", mx_device_last_error(dev));
    cr_assert(strstr(mx_device_last_error(dev), "100 bytes"), "%s", mx_device_last_error(dev));
    cr_assert_eq(mx_device_copy(dev, host, d + 1, 100, MX_COPY_D2H), MX_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(mx_device_last_error(dev), "source range"));
    cr_assert_eq(mx_device_copy(dev, d, host, 8, MX_COPY_D2D), MX_ERR_INVALID_ARGUMENT,
                 "host source of a D2D copy");
    cr_assert_eq(mx_device_copy_async(s, host, d, 101, MX_COPY_D2H), MX_ERR_INVALID_ARGUMENT);
    cr_assert_eq(mx_device_memset_async(s, d + 90, 0, 11), MX_ERR_INVALID_ARGUMENT);
    cr_assert_eq(mx_device_memset(dev, d, 1, 100), MX_OK);
    /* registered buffers count as device memory for checking */
    cr_assert_eq(mx_device_copy(dev, host, host + 128, 64, MX_COPY_D2D), MX_ERR_INVALID_ARGUMENT);
    cr_assert_eq(mx_device_register_buffer(dev, host, sizeof host), MX_OK);
    cr_assert_eq(mx_device_register_buffer(dev, host + 8, 8), MX_ERR_INVALID_ARGUMENT, "overlap");
    cr_assert_eq(mx_device_copy(dev, host, host + 128, 64, MX_COPY_D2D), MX_OK);
    cr_assert_eq(mx_device_free(dev, host), MX_ERR_INVALID_ARGUMENT, "registered, not owned");
    cr_assert_eq(mx_device_unregister_buffer(dev, host), MX_OK);
    cr_assert_eq(mx_device_unregister_buffer(dev, host), MX_ERR_INVALID_ARGUMENT);
    cr_assert_eq(mx_device_unregister_buffer(dev, d), MX_ERR_INVALID_ARGUMENT, "owned, not registered");
    cr_assert_eq(mx_device_copy_async(s, d, host, 100, MX_COPY_H2D), MX_OK);
    cr_assert_eq(mx_stream_synchronize(s), MX_OK);
    mx_device_memory_stats st;
    mx_device_memory_stats_get(dev, &st);
    cr_assert_eq(st.bytes_in_use, 100, "registered buffers are not counted");
    cr_assert_eq(mx_device_free(dev, d), MX_OK);
    mx_stream_destroy(s);
    mx_device_destroy(dev);
  }
  hal_check_leaks();
}

/* Many allocations in random order keep the address index consistent. */
Test(hal_memory, many_allocations) {
  mx_device_options o = hal_options(&hal_configs[0]);
  o.check = MX_CHECK_ON;
  mx_device *dev = hal_device(&hal_configs[0], &o);
  enum { N = 2000 };
  void **p = calloc(N, sizeof *p);
  uint64_t rng = 3;
  for (int i = 0; i < N; i++) cr_assert_eq(mx_device_alloc(dev, 1 + hal_rand(&rng) % 300, 0, &p[i]), MX_OK);
  for (int i = 0; i < N; i++) {
    int j = (int)(hal_rand(&rng) % N);
    void *t = p[i];
    p[i] = p[j];
    p[j] = t;
  }
  char one = 1;
  for (int i = 0; i < N; i++) {
    cr_assert_eq(mx_device_copy(dev, p[i], &one, 1, MX_COPY_H2D), MX_OK);
    if (i % 2) cr_assert_eq(mx_device_free(dev, p[i]), MX_OK);
  }
  for (int i = 0; i < N; i += 2) cr_assert_eq(mx_device_free(dev, p[i]), MX_OK);
  mx_device_memory_stats st;
  mx_device_memory_stats_get(dev, &st);
  cr_assert_eq(st.live, 0);
  cr_assert_eq(st.bytes_in_use, 0);
  free(p);
  mx_device_destroy(dev);
  hal_check_leaks();
}

/* mx_device_upload: a block holding a copy of the source; a failing copy (an injected fault, a
 * NULL source) leaves nothing allocated and says why. */
Test(hal_memory, upload_allocates_and_copies_or_leaves_nothing) {
  for (int c = 0; c < hal_n_configs; c++) {
    mx_device_options o = hal_options(&hal_configs[c]);
    o.fault_from_env = false;
    o.fault_nth[MX_FAULT_COPY] = 2;
    mx_device *dev = hal_device(&hal_configs[c], &o);
    unsigned char src[300];
    for (size_t i = 0; i < sizeof src; i++) src[i] = (unsigned char)(i * 7 + 1);
    void *p = NULL;
    cr_assert_eq(mx_device_upload(dev, src, sizeof src, 256, &p), MX_OK, "%s", mx_device_last_error(dev));
    cr_assert_eq((uintptr_t)p % 256, 0);
    cr_assert_eq(memcmp(p, src, sizeof src), 0, "the block holds the source");
    mx_device_memory_stats st;
    mx_device_memory_stats_get(dev, &st);
    cr_assert_eq(st.live, 1);
    cr_assert_eq(st.bytes_in_use, sizeof src);
    void *q = (void *)1;
    cr_assert_eq(mx_device_upload(dev, src, sizeof src, 0, &q), MX_ERR_DEVICE,
                 "the second copy is the injected fault");
    cr_assert_null(q);
    cr_assert(strstr(mx_device_last_error(dev), "injected fault"), "%s", mx_device_last_error(dev));
    cr_assert_eq(mx_device_upload(dev, NULL, 8, 0, &q), MX_ERR_INVALID_ARGUMENT);
    cr_assert_null(q);
    cr_assert(strstr(mx_device_last_error(dev), "NULL source"), "%s", mx_device_last_error(dev));
    cr_assert_eq(mx_device_upload(dev, NULL, 0, 0, &q), MX_OK, "nothing to copy");
    cr_assert_not_null(q);
    mx_device_memory_stats_get(dev, &st);
    cr_assert_eq(st.live, 2, "the failed uploads left nothing behind");
    cr_assert_eq(mx_device_free(dev, q), MX_OK);
    cr_assert_eq(mx_device_free(dev, p), MX_OK);
    mx_device_destroy(dev);
  }
  hal_check_leaks();
}
