/* Shared read-only blocks (mx_device_shared_acquire / mx_device_shared_release): equal bytes
 * share one block however they are reached, anything else (one byte, a prefix, a hash
 * collision, an alignment the block does not meet) gets its own; the statistics count a block
 * once; mx_device_free refuses a shared block; failures (bad arguments, the memory limit,
 * injected faults) hold nothing; concurrent holders see one block; and a device destroyed with
 * blocks still held leaks nothing (host memory under ASan). */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "support_hal.h"

/* The device kinds every test runs on: a CPU device (one worker per stream) and an inline one. */
static const hal_config *kind_config(int k) {
  const char *name = k == 0 ? "cpu" : "inline";
  for (int c = 0; c < hal_n_configs; c++)
    if (strcmp(hal_configs[c].name, name) == 0) return &hal_configs[c];
  cr_assert_fail("no HAL test configuration named %s", name);
  return NULL;
}
enum { N_KINDS = 2 };

static mx_device_memory_stats stats(mx_device *dev) {
  mx_device_memory_stats st;
  memset(&st, 0xff, sizeof st);
  mx_device_memory_stats_get(dev, &st);
  return st;
}

/* n bytes from a deterministic generator; the caller frees. */
static unsigned char *random_bytes(size_t n, uint64_t seed) {
  unsigned char *p = malloc(n ? n : 1);
  cr_assert_not_null(p);
  uint64_t s = seed;
  for (size_t i = 0; i < n; i += 8) {
    uint64_t w = hal_rand(&s);
    memcpy(p + i, &w, n - i < 8 ? n - i : 8);
  }
  return p;
}

static unsigned char *dup_bytes(const unsigned char *src, size_t n) {
  unsigned char *p = malloc(n ? n : 1);
  cr_assert_not_null(p);
  memcpy(p, src, n);
  return p;
}

/* The device block at d holds exactly the n bytes of src (read back with a D2H copy). */
static void assert_holds(mx_device *dev, const void *d, const void *src, size_t n, const char *what) {
  unsigned char *back = malloc(n ? n : 1);
  cr_assert_not_null(back);
  memset(back, 0, n);
  cr_assert_eq(mx_device_copy(dev, back, d, n, MX_COPY_D2H), MX_OK, "%s: %s", what,
               mx_device_last_error(dev));
  cr_assert_eq(memcmp(back, src, n), 0, "%s: the block does not hold the source bytes", what);
  free(back);
}

static void assert_nothing_held(mx_device *dev, const char *what) {
  mx_device_memory_stats st = stats(dev);
  cr_assert_eq(st.shared_blocks, 0, "%s: %llu shared blocks", what, (unsigned long long)st.shared_blocks);
  cr_assert_eq(st.shared_bytes, 0, "%s", what);
  cr_assert_eq(st.live, 0, "%s: %llu live allocations", what, (unsigned long long)st.live);
  cr_assert_eq(st.bytes_in_use, 0, "%s: %llu bytes in use", what, (unsigned long long)st.bytes_in_use);
}

Test(hal_shared_blocks, equal_bytes_share_one_block_counted_once) {
  enum { N = 4096 };
  for (int k = 0; k < N_KINDS; k++) {
    const hal_config *cfg = kind_config(k);
    for (int check = 0; check < 2; check++) { /* the upload also passes checking mode */
      mx_device_options o = hal_options(cfg);
      o.check = check ? MX_CHECK_ON : MX_CHECK_OFF;
      mx_device *dev = hal_device(cfg, &o);
      unsigned char *src = random_bytes(N, 1);
      unsigned char *same = dup_bytes(src, N); /* equal bytes at another host address */
      mx_device_memory_stats st0 = stats(dev);
      cr_assert_eq(st0.shared_blocks, 0);
      cr_assert_eq(st0.shared_hits, 0);

      void *a = NULL, *b = NULL;
      cr_assert_eq(mx_device_shared_acquire(dev, src, N, 0, &a), MX_OK, "%s", mx_device_last_error(dev));
      cr_assert_not_null(a);
      cr_assert_eq((uintptr_t)a % 64, 0, "align 0 means 64: %p", a);
      cr_assert_eq(mx_device_shared_acquire(dev, same, N, 0, &b), MX_OK, "%s", mx_device_last_error(dev));
      cr_assert_eq(b, a, "%s: equal bytes got two blocks", cfg->name);
      assert_holds(dev, a, src, N, cfg->name);

      mx_device_memory_stats st = stats(dev);
      cr_assert_eq(st.shared_blocks, 1, "%s", cfg->name);
      cr_assert_eq(st.shared_bytes, N);
      cr_assert_eq(st.shared_hits, 1);
      cr_assert_eq(st.bytes_in_use, st0.bytes_in_use + N, "the block counts once");
      cr_assert_eq(st.live, st0.live + 1);
      cr_assert_eq(st.allocations, st0.allocations + 1, "one allocation for two holders");

      /* The first release leaves the block to the other holder. */
      cr_assert_eq(mx_device_shared_release(dev, a), MX_OK);
      st = stats(dev);
      cr_assert_eq(st.shared_blocks, 1);
      cr_assert_eq(st.live, st0.live + 1);
      cr_assert_eq(st.frees, st0.frees);
      assert_holds(dev, b, src, N, "after one release");
      /* The last one frees it. */
      cr_assert_eq(mx_device_shared_release(dev, b), MX_OK);
      st = stats(dev);
      cr_assert_eq(st.shared_blocks, 0);
      cr_assert_eq(st.shared_bytes, 0);
      cr_assert_eq(st.bytes_in_use, st0.bytes_in_use);
      cr_assert_eq(st.live, st0.live);
      cr_assert_eq(st.frees, st0.frees + 1);
      cr_assert_eq(st.shared_hits, 1, "hits count since creation");

      /* Gone: the next acquisition allocates and uploads again. */
      void *c = NULL;
      cr_assert_eq(mx_device_shared_acquire(dev, same, N, 0, &c), MX_OK);
      assert_holds(dev, c, src, N, "re-acquired");
      st = stats(dev);
      cr_assert_eq(st.allocations, st0.allocations + 2);
      cr_assert_eq(st.shared_hits, 1);
      cr_assert_eq(mx_device_shared_release(dev, c), MX_OK);
      assert_nothing_held(dev, cfg->name);
      free(src);
      free(same);
      mx_device_destroy(dev);
    }
  }
  hal_check_leaks();
}

Test(hal_shared_blocks, sharing_is_per_device) {
  enum { N = 1000 };
  unsigned char *src = random_bytes(N, 2);
  mx_device *d1 = hal_device(kind_config(0), NULL);
  mx_device *d2 = hal_device(kind_config(1), NULL);
  void *a, *b;
  cr_assert_eq(mx_device_shared_acquire(d1, src, N, 0, &a), MX_OK);
  cr_assert_eq(mx_device_shared_acquire(d2, src, N, 0, &b), MX_OK);
  cr_assert_neq(a, b);
  cr_assert_eq(stats(d1).shared_hits, 0);
  cr_assert_eq(stats(d2).shared_hits, 0);
  cr_assert_eq(stats(d2).live, 1);
  /* A block of one device is not a shared block of the other. */
  cr_assert_eq(mx_device_shared_release(d2, a), MX_ERR_INVALID_ARGUMENT);
  cr_assert_eq(stats(d1).shared_blocks, 1);
  cr_assert_eq(mx_device_shared_release(d1, a), MX_OK);
  cr_assert_eq(mx_device_shared_release(d2, b), MX_OK);
  assert_nothing_held(d1, "d1");
  assert_nothing_held(d2, "d2");
  free(src);
  mx_device_destroy(d1);
  mx_device_destroy(d2);
  hal_check_leaks();
}

Test(hal_shared_blocks, one_different_byte_gives_another_block) {
  enum { N = 4096 };
  for (int k = 0; k < N_KINDS; k++) {
    const hal_config *cfg = kind_config(k);
    mx_device *dev = hal_device(cfg, NULL);
    /* Sizes with and without a tail shorter than the hash's 8-byte words. */
    const size_t sizes[] = {N, N - 3, 7};
    for (int si = 0; si < 3; si++) {
      size_t n = sizes[si];
      for (int where = 0; where < 2; where++) { /* the last byte, then the first */
        unsigned char *x = random_bytes(n, 3 + si);
        unsigned char *y = dup_bytes(x, n);
        size_t at = where == 0 ? n - 1 : 0;
        y[at] ^= 0x01;
        void *px, *py;
        cr_assert_eq(mx_device_shared_acquire(dev, x, n, 0, &px), MX_OK);
        cr_assert_eq(mx_device_shared_acquire(dev, y, n, 0, &py), MX_OK);
        cr_assert_neq(px, py, "%s: %zu bytes differing at byte %zu share a block", cfg->name, n, at);
        assert_holds(dev, px, x, n, "first");
        assert_holds(dev, py, y, n, "second");
        mx_device_memory_stats st = stats(dev);
        cr_assert_eq(st.shared_blocks, 2);
        cr_assert_eq(st.shared_bytes, 2 * n);
        cr_assert_eq(st.shared_hits, 0);
        cr_assert_eq(st.bytes_in_use, 2 * n);
        cr_assert_eq(mx_device_shared_release(dev, px), MX_OK);
        cr_assert_eq(mx_device_shared_release(dev, py), MX_OK);
        assert_nothing_held(dev, cfg->name);
        free(x);
        free(y);
      }
    }
    mx_device_destroy(dev);
  }
  hal_check_leaks();
}

/* A copy of the content hash of hal/shared.c, to build two different inputs with the same hash:
 * the blocks must still not be shared (equality is decided by comparing the bytes). Should the
 * hash change, the pair no longer collides and the test only checks what the test above does. */
static uint64_t shared_hash_step(uint64_t h, uint64_t w) {
  h = (h ^ w) * 0x100000001b3u;
  return h ^ (h >> 29);
}

/* The state before the first word of an input shorter than 32 bytes: the four untouched lanes
 * folded together. */
static uint64_t shared_hash_start(uint64_t n) {
  const uint64_t seed = 0x9e3779b97f4a7c15u ^ n;
  return shared_hash_step(shared_hash_step(shared_hash_step(seed, seed + 1), seed + 2), seed + 3);
}

Test(hal_shared_blocks, a_hash_collision_does_not_share) {
  /* Two 16-byte inputs: different first words, second words chosen so that the hash states
   * meet after the second word. */
  const uint64_t h0 = shared_hash_start(16);
  uint64_t x[2] = {0x0123456789abcdefu, 0x1111111111111111u};
  uint64_t y[2] = {0xfedcba9876543210u, 0};
  y[1] = x[1] ^ shared_hash_step(h0, x[0]) ^ shared_hash_step(h0, y[0]);
  cr_assert_eq(shared_hash_step(shared_hash_step(h0, x[0]), x[1]),
               shared_hash_step(shared_hash_step(h0, y[0]), y[1]), "the pair collides");
  for (int k = 0; k < N_KINDS; k++) {
    const hal_config *cfg = kind_config(k);
    mx_device *dev = hal_device(cfg, NULL);
    void *px, *py;
    cr_assert_eq(mx_device_shared_acquire(dev, x, sizeof x, 0, &px), MX_OK);
    cr_assert_eq(mx_device_shared_acquire(dev, y, sizeof y, 0, &py), MX_OK);
    cr_assert_neq(px, py, "%s: different bytes with equal hashes share a block", cfg->name);
    assert_holds(dev, px, x, sizeof x, "x");
    assert_holds(dev, py, y, sizeof y, "y");
    cr_assert_eq(stats(dev).shared_hits, 0);
    cr_assert_eq(mx_device_shared_release(dev, px), MX_OK);
    cr_assert_eq(mx_device_shared_release(dev, py), MX_OK);
    assert_nothing_held(dev, cfg->name);
    mx_device_destroy(dev);
  }
  hal_check_leaks();
}

Test(hal_shared_blocks, a_prefix_is_another_block) {
  enum { N = 4096 };
  for (int k = 0; k < N_KINDS; k++) {
    const hal_config *cfg = kind_config(k);
    mx_device *dev = hal_device(cfg, NULL);
    unsigned char *src = random_bytes(N, 5);
    /* Longer first, then shorter, and the other way round. */
    const size_t pairs[2][2] = {{N, N / 2}, {N - 1, N}};
    for (int p = 0; p < 2; p++) {
      size_t n1 = pairs[p][0], n2 = pairs[p][1];
      void *a, *b;
      cr_assert_eq(mx_device_shared_acquire(dev, src, n1, 0, &a), MX_OK);
      cr_assert_eq(mx_device_shared_acquire(dev, src, n2, 0, &b), MX_OK);
      cr_assert_neq(a, b, "%s: %zu and %zu bytes of one source share a block", cfg->name, n1, n2);
      assert_holds(dev, a, src, n1, "first");
      assert_holds(dev, b, src, n2, "second");
      mx_device_memory_stats st = stats(dev);
      cr_assert_eq(st.shared_blocks, 2);
      cr_assert_eq(st.shared_bytes, n1 + n2);
      cr_assert_eq(st.bytes_in_use, n1 + n2);
      cr_assert_eq(st.shared_hits, 0);
      cr_assert_eq(mx_device_shared_release(dev, a), MX_OK);
      cr_assert_eq(mx_device_shared_release(dev, b), MX_OK);
      assert_nothing_held(dev, cfg->name);
    }
    free(src);
    mx_device_destroy(dev);
  }
  hal_check_leaks();
}

Test(hal_shared_blocks, a_block_is_only_reused_where_it_meets_the_alignment) {
  enum { N = 256, A = 4096 };
  for (int k = 0; k < N_KINDS; k++) {
    const hal_config *cfg = kind_config(k);
    mx_device *dev = hal_device(cfg, NULL);
    bool saw_misaligned = false;
    /* Plain blocks of the same size held across the rounds, so each round's block lands at a new
     * address (a freed block is otherwise handed out again, and some allocators, TSan's among
     * them, happen to place it on a 4096-byte boundary every time). */
    void *spacer[18 - 10] = {NULL};
    for (uint64_t seed = 10; seed < 18; seed++) {
      cr_assert_eq(mx_device_alloc(dev, N, 64, &spacer[seed - 10]), MX_OK);
      unsigned char *src = random_bytes(N, seed);
      const uint64_t hits0 = stats(dev).shared_hits;
      void *p64, *p4k, *again16, *again4k;
      cr_assert_eq(mx_device_shared_acquire(dev, src, N, 64, &p64), MX_OK);
      cr_assert_eq((uintptr_t)p64 % 64, 0);
      cr_assert_eq(mx_device_shared_acquire(dev, src, N, A, &p4k), MX_OK, "%s", mx_device_last_error(dev));
      cr_assert_eq((uintptr_t)p4k % A, 0, "%s: asked for %d-byte alignment, got %p", cfg->name, A, p4k);
      assert_holds(dev, p4k, src, N, "aligned block");
      mx_device_memory_stats st = stats(dev);
      if ((uintptr_t)p64 % A == 0) {
        cr_assert_eq(p4k, p64, "the block meets the alignment by chance: shared");
        cr_assert_eq(st.shared_blocks, 1);
        cr_assert_eq(st.shared_hits, hits0 + 1);
      } else {
        saw_misaligned = true;
        cr_assert_neq(p4k, p64, "%s: a block at %p served a %d-byte alignment", cfg->name, p64, A);
        cr_assert_eq(st.shared_blocks, 2);
        cr_assert_eq(st.shared_hits, hits0);
      }
      /* A weaker alignment is met by either block; a 4096 one only by an aligned block. */
      cr_assert_eq(mx_device_shared_acquire(dev, src, N, 16, &again16), MX_OK);
      cr_assert(again16 == p64 || again16 == p4k, "%p is neither %p nor %p", again16, p64, p4k);
      cr_assert_eq(mx_device_shared_acquire(dev, src, N, A, &again4k), MX_OK);
      cr_assert_eq(again4k, p4k);
      cr_assert_eq(stats(dev).shared_blocks, st.shared_blocks, "both served by existing blocks");
      cr_assert_eq(stats(dev).shared_hits, st.shared_hits + 2);
      cr_assert_eq(mx_device_shared_release(dev, p64), MX_OK);
      cr_assert_eq(mx_device_shared_release(dev, p4k), MX_OK);
      cr_assert_eq(mx_device_shared_release(dev, again16), MX_OK);
      cr_assert_eq(mx_device_shared_release(dev, again4k), MX_OK);
      cr_assert_eq(stats(dev).shared_blocks, 0, "%s", cfg->name); /* the spacers stay live */
      cr_assert_eq(stats(dev).shared_bytes, 0, "%s", cfg->name);
      free(src);
    }
    cr_assert(saw_misaligned, "%s: every 64-aligned block happened to be 4096-aligned", cfg->name);
    for (size_t i = 0; i < sizeof spacer / sizeof spacer[0]; i++)
      cr_assert_eq(mx_device_free(dev, spacer[i]), MX_OK);

    /* A block acquired with a large alignment serves smaller ones. */
    unsigned char *src = random_bytes(N, 99);
    uint64_t hits0 = stats(dev).shared_hits;
    void *big, *small;
    cr_assert_eq(mx_device_shared_acquire(dev, src, N, A, &big), MX_OK);
    cr_assert_eq((uintptr_t)big % A, 0);
    cr_assert_eq(mx_device_shared_acquire(dev, src, N, 64, &small), MX_OK);
    cr_assert_eq(small, big);
    cr_assert_eq(stats(dev).shared_hits, hits0 + 1);

    /* Not a power of two: refused before any lookup, even with an equal block held. */
    void *bad = (void *)1;
    cr_assert_eq(mx_device_shared_acquire(dev, src, N, 48, &bad), MX_ERR_INVALID_ARGUMENT);
    cr_assert_null(bad);
    cr_assert(strstr(mx_device_last_error(dev), "alignment"), "%s", mx_device_last_error(dev));
    cr_assert_eq(mx_device_shared_acquire(dev, src, N, 3, &bad), MX_ERR_INVALID_ARGUMENT);
    cr_assert_null(bad);
    mx_device_memory_stats st = stats(dev);
    cr_assert_eq(st.shared_blocks, 1);
    cr_assert_eq(st.shared_hits, hits0 + 1, "a refused call is no hit");
    cr_assert_eq(mx_device_shared_release(dev, big), MX_OK);
    cr_assert_eq(mx_device_shared_release(dev, small), MX_OK);
    assert_nothing_held(dev, cfg->name);
    free(src);
    mx_device_destroy(dev);
  }
  hal_check_leaks();
}

Test(hal_shared_blocks, empty_blocks_and_bad_arguments) {
  for (int k = 0; k < N_KINDS; k++) {
    const hal_config *cfg = kind_config(k);
    mx_device *dev = hal_device(cfg, NULL);
    unsigned char src[32] = {1, 2, 3};

    /* Zero bytes: a real (non-NULL) block, from any source, NULL included; zero bytes are all
     * equal. */
    void *e1 = NULL, *e2 = NULL;
    cr_assert_eq(mx_device_shared_acquire(dev, src, 0, 0, &e1), MX_OK, "%s", mx_device_last_error(dev));
    cr_assert_not_null(e1);
    cr_assert_eq(mx_device_shared_acquire(dev, NULL, 0, 0, &e2), MX_OK, "%s", mx_device_last_error(dev));
    cr_assert_eq(e2, e1);
    cr_assert_eq(stats(dev).shared_blocks, 1);
    cr_assert_eq(stats(dev).live, 1);
    cr_assert_eq(mx_device_shared_release(dev, e1), MX_OK);
    cr_assert_eq(mx_device_shared_release(dev, e2), MX_OK);
    cr_assert_eq(stats(dev).shared_blocks, 0);
    cr_assert_eq(stats(dev).live, 0);
    cr_assert_eq(mx_device_shared_release(dev, e1), MX_ERR_INVALID_ARGUMENT, "released twice");

    /* NULL source with bytes to read. */
    void *p = (void *)1;
    cr_assert_eq(mx_device_shared_acquire(dev, NULL, 16, 0, &p), MX_ERR_INVALID_ARGUMENT);
    cr_assert_null(p);
    cr_assert(strstr(mx_device_last_error(dev), "NULL"), "%s", mx_device_last_error(dev));
    /* NULL device, NULL result. */
    p = (void *)1;
    cr_assert_eq(mx_device_shared_acquire(NULL, src, sizeof src, 0, &p), MX_ERR_INVALID_ARGUMENT);
    cr_assert_null(p);
    cr_assert_eq(mx_device_shared_acquire(dev, src, sizeof src, 0, NULL), MX_ERR_INVALID_ARGUMENT);
    cr_assert_eq(mx_device_shared_release(NULL, src), MX_ERR_INVALID_ARGUMENT);
    assert_nothing_held(dev, cfg->name);
    cr_assert_eq(stats(dev).allocations, 1, "only the empty block was allocated");
    mx_device_destroy(dev);
  }
  hal_check_leaks();
}

Test(hal_shared_blocks, free_and_free_async_refuse_a_shared_block) {
  enum { N = 2048 };
  for (int k = 0; k < N_KINDS; k++) {
    const hal_config *cfg = kind_config(k);
    mx_device *dev = hal_device(cfg, NULL);
    mx_stream *s;
    cr_assert_eq(mx_stream_create(dev, 0, &s), MX_OK);
    unsigned char *src = random_bytes(N, 20);
    void *p;
    cr_assert_eq(mx_device_shared_acquire(dev, src, N, 0, &p), MX_OK);

    cr_assert_eq(mx_device_free(dev, p), MX_ERR_INVALID_ARGUMENT, "%s", cfg->name);
    cr_assert(strstr(mx_device_last_error(dev), "shared"), "%s", mx_device_last_error(dev));
    mx_device_memory_stats st = stats(dev);
    cr_assert_eq(st.live, 1);
    cr_assert_eq(st.frees, 0);
    cr_assert_eq(st.shared_blocks, 1);
    assert_holds(dev, p, src, N, "after mx_device_free was refused");

    cr_assert_eq(mx_device_free_async(s, p), MX_ERR_INVALID_ARGUMENT, "%s", cfg->name);
    cr_assert(strstr(mx_device_last_error(dev), "shared"), "%s", mx_device_last_error(dev));
    cr_assert_eq(mx_stream_synchronize(s), MX_OK, "the refused free was not queued, nor failed the stream");
    st = stats(dev);
    cr_assert_eq(st.live, 1);
    cr_assert_eq(st.frees, 0);
    assert_holds(dev, p, src, N, "after mx_device_free_async was refused");

    /* Still held exactly once: one release frees it, a second is refused. */
    cr_assert_eq(mx_device_shared_release(dev, p), MX_OK);
    assert_nothing_held(dev, cfg->name);
    cr_assert_eq(stats(dev).frees, 1);
    free(src);
    mx_stream_destroy(s);
    mx_device_destroy(dev);
  }
  hal_check_leaks();
}

Test(hal_shared_blocks, release_refuses_what_is_not_held) {
  enum { N = 512 };
  for (int k = 0; k < N_KINDS; k++) {
    const hal_config *cfg = kind_config(k);
    mx_device *dev = hal_device(cfg, NULL);
    unsigned char *src = random_bytes(N, 30);

    cr_assert_eq(mx_device_shared_release(dev, NULL), MX_OK);

    /* A plain allocation is not a shared block, and a refused release leaves it allocated. */
    void *plain;
    cr_assert_eq(mx_device_alloc(dev, N, 0, &plain), MX_OK);
    cr_assert_eq(mx_device_shared_release(dev, plain), MX_ERR_INVALID_ARGUMENT, "%s", cfg->name);
    cr_assert(strstr(mx_device_last_error(dev), "not a shared block"), "%s", mx_device_last_error(dev));
    cr_assert_eq(stats(dev).live, 1);
    cr_assert_eq(mx_device_free(dev, plain), MX_OK);

    /* Inside a block is not the block; releasing twice is once too often. */
    unsigned char *p;
    cr_assert_eq(mx_device_shared_acquire(dev, src, N, 0, (void **)&p), MX_OK);
    cr_assert_eq(mx_device_shared_release(dev, p + 1), MX_ERR_INVALID_ARGUMENT);
    cr_assert_eq(stats(dev).shared_blocks, 1);
    cr_assert_eq(mx_device_shared_release(dev, p), MX_OK);
    cr_assert_eq(mx_device_shared_release(dev, p), MX_ERR_INVALID_ARGUMENT, "double release");
    cr_assert(strstr(mx_device_last_error(dev), "not a shared block"), "%s", mx_device_last_error(dev));
    assert_nothing_held(dev, cfg->name);

    /* Two holders: exactly two releases succeed. */
    void *a, *b;
    cr_assert_eq(mx_device_shared_acquire(dev, src, N, 0, &a), MX_OK);
    cr_assert_eq(mx_device_shared_acquire(dev, src, N, 0, &b), MX_OK);
    cr_assert_eq(mx_device_shared_release(dev, a), MX_OK);
    cr_assert_eq(mx_device_shared_release(dev, b), MX_OK);
    cr_assert_eq(mx_device_shared_release(dev, a), MX_ERR_INVALID_ARGUMENT);
    assert_nothing_held(dev, cfg->name);

    /* The last release unmarks the memory: a plain allocation that gets the address back is
     * freed normally. */
    void *q;
    cr_assert_eq(mx_device_alloc(dev, N, 0, &q), MX_OK);
    cr_assert_eq(mx_device_free(dev, q), MX_OK, "%s", mx_device_last_error(dev));
    assert_nothing_held(dev, cfg->name);
    free(src);
    mx_device_destroy(dev);
  }
  hal_check_leaks();
}

Test(hal_shared_blocks, memory_limit) {
  enum { N = 4096 };
  for (int k = 0; k < N_KINDS; k++) {
    const hal_config *cfg = kind_config(k);
    unsigned char *src = random_bytes(N, 40);
    unsigned char *other = random_bytes(N, 41);

    /* A limit below the block: refused, nothing held. */
    mx_device_options o = hal_options(cfg);
    o.memory_limit = N / 4;
    mx_device *dev = hal_device(cfg, &o);
    void *p = (void *)1;
    cr_assert_eq(mx_device_shared_acquire(dev, src, N, 0, &p), MX_ERR_DEVICE_OOM, "%s", cfg->name);
    cr_assert_null(p);
    cr_assert(strstr(mx_device_last_error(dev), "memory limit"), "%s", mx_device_last_error(dev));
    assert_nothing_held(dev, cfg->name);
    cr_assert_eq(stats(dev).allocations, 0);
    /* and the failure left no record that a later call could match */
    cr_assert_eq(mx_device_shared_acquire(dev, src, N, 0, &p), MX_ERR_DEVICE_OOM);
    cr_assert_eq(stats(dev).shared_hits, 0);
    mx_device_destroy(dev);

    /* Room for one block: a second holder allocates nothing, so the limit does not stop it. */
    o.memory_limit = N + 100;
    dev = hal_device(cfg, &o);
    void *a, *b, *c, *plain;
    cr_assert_eq(mx_device_shared_acquire(dev, src, N, 0, &a), MX_OK);
    cr_assert_eq(mx_device_alloc(dev, 200, 0, &plain), MX_ERR_DEVICE_OOM, "the limit is reached");
    cr_assert_eq(mx_device_shared_acquire(dev, src, N, 0, &b), MX_OK, "%s: %s", cfg->name,
                 mx_device_last_error(dev));
    cr_assert_eq(b, a);
    cr_assert_eq(mx_device_shared_acquire(dev, other, N, 0, &c), MX_ERR_DEVICE_OOM, "new bytes need room");
    cr_assert_null(c);
    mx_device_memory_stats st = stats(dev);
    cr_assert_eq(st.bytes_in_use, N);
    cr_assert_eq(st.shared_blocks, 1);
    cr_assert_eq(st.shared_hits, 1);
    cr_assert_eq(st.live, 1);
    cr_assert_eq(mx_device_shared_release(dev, a), MX_OK);
    cr_assert_eq(mx_device_shared_release(dev, b), MX_OK);
    assert_nothing_held(dev, cfg->name);
    /* Released, the room is back. */
    cr_assert_eq(mx_device_shared_acquire(dev, other, N, 0, &c), MX_OK);
    cr_assert_eq(mx_device_shared_release(dev, c), MX_OK);
    free(src);
    free(other);
    mx_device_destroy(dev);
  }
  hal_check_leaks();
}

static mx_device *fault_device(const hal_config *cfg, mx_fault_point point, uint64_t nth) {
  mx_device_options o = hal_options(cfg);
  o.fault_nth[point] = nth;
  return hal_device(cfg, &o);
}

Test(hal_shared_blocks, injected_faults_hold_nothing) {
  enum { N = 4096 };
  for (int k = 0; k < N_KINDS; k++) {
    const hal_config *cfg = kind_config(k);
    unsigned char *src = random_bytes(N, 50);
    unsigned char *other = random_bytes(N, 51);

    /* The allocation fails. */
    mx_device *dev = fault_device(cfg, MX_FAULT_ALLOC, 1);
    void *p = (void *)1;
    cr_assert_eq(mx_device_shared_acquire(dev, src, N, 0, &p), MX_ERR_DEVICE_OOM, "%s", cfg->name);
    cr_assert_null(p);
    cr_assert(strstr(mx_device_last_error(dev), "injected fault (alloc:1)"), "%s", mx_device_last_error(dev));
    assert_nothing_held(dev, cfg->name);
    cr_assert_eq(mx_device_shared_acquire(dev, src, N, 0, &p), MX_OK, "the fault fires once");
    assert_holds(dev, p, src, N, "after an alloc fault");
    cr_assert_eq(stats(dev).shared_hits, 0);
    cr_assert_eq(mx_device_shared_release(dev, p), MX_OK);
    assert_nothing_held(dev, cfg->name);
    mx_device_destroy(dev);

    /* The upload fails: the fresh allocation is given back. */
    dev = fault_device(cfg, MX_FAULT_COPY, 1);
    p = (void *)1;
    cr_assert_eq(mx_device_shared_acquire(dev, src, N, 0, &p), MX_ERR_DEVICE, "%s", cfg->name);
    cr_assert_null(p);
    cr_assert(strstr(mx_device_last_error(dev), "injected fault (copy:1)"), "%s", mx_device_last_error(dev));
    assert_nothing_held(dev, cfg->name);
    mx_device_memory_stats st = stats(dev);
    cr_assert_eq(st.allocations, 1);
    cr_assert_eq(st.frees, 1);
    /* No record of the failed block remains: the retry uploads the bytes again. */
    cr_assert_eq(mx_device_shared_acquire(dev, src, N, 0, &p), MX_OK);
    assert_holds(dev, p, src, N, "after a copy fault");
    cr_assert_eq(stats(dev).shared_hits, 0);
    cr_assert_eq(mx_device_shared_release(dev, p), MX_OK);
    assert_nothing_held(dev, cfg->name);
    mx_device_destroy(dev);

    /* A second holder neither allocates nor uploads: the second alloc / copy is the next new
     * block's. */
    for (int point = 0; point < 2; point++) {
      dev = fault_device(cfg, point == 0 ? MX_FAULT_ALLOC : MX_FAULT_COPY, 2);
      void *a, *b, *c = (void *)1;
      cr_assert_eq(mx_device_shared_acquire(dev, src, N, 0, &a), MX_OK);
      cr_assert_eq(mx_device_shared_acquire(dev, src, N, 0, &b), MX_OK, "%s: %s", cfg->name,
                   mx_device_last_error(dev));
      cr_assert_eq(b, a);
      cr_assert_eq(mx_device_shared_acquire(dev, other, N, 0, &c),
                   point == 0 ? MX_ERR_DEVICE_OOM : MX_ERR_DEVICE);
      cr_assert_null(c);
      st = stats(dev);
      cr_assert_eq(st.shared_blocks, 1);
      cr_assert_eq(st.live, 1);
      cr_assert_eq(st.bytes_in_use, N);
      assert_holds(dev, a, src, N, "the held block after a failed acquisition");
      cr_assert_eq(mx_device_shared_release(dev, a), MX_OK);
      cr_assert_eq(mx_device_shared_release(dev, b), MX_OK);
      assert_nothing_held(dev, cfg->name);
      mx_device_destroy(dev);
    }
    free(src);
    free(other);
  }
  hal_check_leaks();
}

Test(hal_shared_blocks, large_blocks_are_shared_on_huge_pages) {
  const size_t n = 3u << 20; /* >= MX_DEVICE_HUGE_PAGE_MIN, rounded to two huge pages on the host */
  cr_assert_geq(n, MX_DEVICE_HUGE_PAGE_MIN);
  unsigned char *src = random_bytes(n, 60);
  unsigned char *same = dup_bytes(src, n);
  for (int k = 0; k < N_KINDS; k++) {
    const hal_config *cfg = kind_config(k);
    mx_device_options o = hal_options(cfg);
    o.huge_pages = true;
    mx_device *dev = hal_device(cfg, &o);
    void *a, *b;
    cr_assert_eq(mx_device_shared_acquire(dev, src, n, 64, &a), MX_OK, "%s", mx_device_last_error(dev));
    cr_assert_eq((uintptr_t)a & (MX_DEVICE_HUGE_PAGE - 1), 0, "%s: %p is not on a huge page", cfg->name, a);
    cr_assert_eq(mx_device_shared_acquire(dev, same, n, 4096, &b), MX_OK);
    cr_assert_eq(b, a);
    assert_holds(dev, a, src, n, cfg->name);
    mx_device_memory_stats st = stats(dev);
    cr_assert_eq(st.bytes_in_use, n, "the requested size, once");
    cr_assert_eq(st.shared_bytes, n);
    cr_assert_eq(st.shared_blocks, 1);
    cr_assert_eq(st.shared_hits, 1);
    cr_assert_eq(mx_device_shared_release(dev, a), MX_OK);
    cr_assert_eq(mx_device_shared_release(dev, b), MX_OK);
    assert_nothing_held(dev, cfg->name);
    mx_device_destroy(dev);
  }
  free(src);
  free(same);
  hal_check_leaks();
}

/* --- threads ---------------------------------------------------------------------------------- */

enum { T_THREADS = 4, T_ROUNDS = 100, T_SIZE = 1 << 20 };

typedef struct thread_ctx {
  mx_device *dev;
  const unsigned char *src; /* this thread's own copy of the content */
  void *expect;             /* phase 1: the block every acquisition must return */
  void *got;                /* phase 2: what this thread acquired */
  pthread_barrier_t *barrier;
  atomic_int *failures;
} thread_ctx;

/* Phase 1: acquire and release the content T_ROUNDS times while the main thread holds it. */
static void *repeat_holder(void *arg) {
  thread_ctx *t = arg;
  for (int r = 0; r < T_ROUNDS; r++) {
    void *p = NULL;
    if (mx_device_shared_acquire(t->dev, t->src, T_SIZE, 0, &p) != MX_OK || p != t->expect)
      atomic_fetch_add(t->failures, 1);
    else if (((const unsigned char *)p)[T_SIZE - 1] != t->src[T_SIZE - 1] ||
             ((const unsigned char *)p)[r] != t->src[r])
      atomic_fetch_add(t->failures, 1);
    if (p && mx_device_shared_release(t->dev, p) != MX_OK) atomic_fetch_add(t->failures, 1);
  }
  return NULL;
}

/* Phase 2: all threads acquire at once (nobody holds the content yet), hold it while the main
 * thread looks at the statistics, then release. */
static void *racing_holder(void *arg) {
  thread_ctx *t = arg;
  pthread_barrier_wait(t->barrier);
  if (mx_device_shared_acquire(t->dev, t->src, T_SIZE, 0, &t->got) != MX_OK) atomic_fetch_add(t->failures, 1);
  pthread_barrier_wait(t->barrier); /* all hold it */
  pthread_barrier_wait(t->barrier); /* the main thread has checked */
  if (t->got && mx_device_shared_release(t->dev, t->got) != MX_OK) atomic_fetch_add(t->failures, 1);
  return NULL;
}

Test(hal_shared_blocks, concurrent_holders_share_one_block) {
  unsigned char *content = random_bytes(T_SIZE, 70);
  unsigned char *copies[T_THREADS];
  for (int i = 0; i < T_THREADS; i++) copies[i] = dup_bytes(content, T_SIZE);
  for (int k = 0; k < N_KINDS; k++) {
    const hal_config *cfg = kind_config(k);
    mx_device *dev = hal_device(cfg, NULL);
    atomic_int failures = 0;
    pthread_t th[T_THREADS];
    thread_ctx ctx[T_THREADS];

    void *ref;
    cr_assert_eq(mx_device_shared_acquire(dev, content, T_SIZE, 0, &ref), MX_OK);
    for (int i = 0; i < T_THREADS; i++) {
      ctx[i] = (thread_ctx){.dev = dev, .src = copies[i], .expect = ref, .failures = &failures};
      cr_assert_eq(pthread_create(&th[i], NULL, repeat_holder, &ctx[i]), 0);
    }
    for (int i = 0; i < T_THREADS; i++) pthread_join(th[i], NULL);
    cr_assert_eq(atomic_load(&failures), 0, "%s: %d acquisitions did not return the held block", cfg->name,
                 atomic_load(&failures));
    mx_device_memory_stats st = stats(dev);
    cr_assert_eq(st.shared_blocks, 1);
    cr_assert_eq(st.live, 1);
    cr_assert_eq(st.allocations, 1, "one allocation for %d acquisitions", T_THREADS * T_ROUNDS + 1);
    cr_assert_eq(st.shared_hits, T_THREADS * T_ROUNDS);
    assert_holds(dev, ref, content, T_SIZE, cfg->name);
    cr_assert_eq(mx_device_shared_release(dev, ref), MX_OK);
    assert_nothing_held(dev, cfg->name);

    pthread_barrier_t barrier;
    cr_assert_eq(pthread_barrier_init(&barrier, NULL, T_THREADS + 1), 0);
    for (int i = 0; i < T_THREADS; i++) {
      ctx[i] = (thread_ctx){.dev = dev, .src = copies[i], .barrier = &barrier, .failures = &failures};
      cr_assert_eq(pthread_create(&th[i], NULL, racing_holder, &ctx[i]), 0);
    }
    pthread_barrier_wait(&barrier); /* go */
    pthread_barrier_wait(&barrier); /* all hold it */
    st = stats(dev);
    int fails = atomic_load(&failures);
    bool same = true;
    for (int i = 1; i < T_THREADS; i++) same = same && ctx[i].got == ctx[0].got;
    pthread_barrier_wait(&barrier); /* release */
    for (int i = 0; i < T_THREADS; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&barrier);
    cr_assert_eq(fails, 0, "%s", cfg->name);
    cr_assert(same, "%s: racing first acquisitions got different blocks", cfg->name);
    cr_assert_eq(st.shared_blocks, 1, "%s: %llu blocks while all held it", cfg->name,
                 (unsigned long long)st.shared_blocks);
    cr_assert_eq(st.live, 1);
    cr_assert_eq(st.allocations, 2, "the first phase's block and this one");
    cr_assert_eq(atomic_load(&failures), 0);
    assert_nothing_held(dev, cfg->name);
    mx_device_destroy(dev);
  }
  for (int i = 0; i < T_THREADS; i++) free(copies[i]);
  free(content);
  hal_check_leaks();
}

Test(hal_shared_blocks, destroying_the_device_frees_held_blocks) {
  unsigned char *small = random_bytes(1000, 80);
  unsigned char *large = random_bytes(3u << 20, 81);
  for (int k = 0; k < N_KINDS; k++) {
    const hal_config *cfg = kind_config(k);
    mx_device *dev = hal_device(cfg, NULL);
    mx_stream *s;
    cr_assert_eq(mx_stream_create(dev, 0, &s), MX_OK);
    void *a, *b, *c, *e, *plain;
    cr_assert_eq(mx_device_shared_acquire(dev, small, 1000, 0, &a), MX_OK);
    cr_assert_eq(mx_device_shared_acquire(dev, small, 1000, 0, &b), MX_OK);
    cr_assert_eq(mx_device_shared_acquire(dev, large, 3u << 20, 0, &c), MX_OK);
    cr_assert_eq(mx_device_shared_acquire(dev, NULL, 0, 0, &e), MX_OK);
    cr_assert_eq(mx_device_alloc(dev, 100, 0, &plain), MX_OK);
    cr_assert_eq(stats(dev).shared_blocks, 3);
    cr_assert_eq(stats(dev).live, 4);
    mx_device_destroy(dev); /* with a stream and every block still held */
  }
  free(small);
  free(large);
  hal_check_leaks();
}
