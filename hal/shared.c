/* Shared read-only device blocks (mx_device_shared_acquire / mx_device_shared_release).
 *
 * Sessions of one model on one device upload the same weights; a block of equal bytes is
 * kept once and counted by holders. Blocks are found by size and a hash of their bytes, and
 * confirmed by comparing every byte, so two different weight sets never share by accident.
 * Device memory is host RAM on every backend of this HAL, so the comparison reads the block
 * in place; a backend with memory of its own would compare through a staging copy.
 *
 * The list is short (a handful of blocks per loaded model) and walked only at load and unload,
 * under share_lock. share_lock is held across the allocation and upload of a new block, so two
 * sessions loading the same model at once still end up with one copy. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hal/hal_impl.h"

struct mx__shared_block {
  void *ptr;        /* the device block (an allocation marked shared) */
  size_t size;      /* bytes of content */
  uint64_t hash;    /* content_hash of those bytes */
  uint64_t holders; /* acquisitions not yet released (>= 1) */
  mx__shared_block *next;
};

/* One step of the content hash: word w into state h. */
static inline uint64_t hash_step(uint64_t h, uint64_t w) {
  h = (h ^ w) * 0x100000001b3u;
  return h ^ (h >> 29);
}

/* A 64-bit hash of n bytes: four independent lanes over 32-byte strides (the multiplies overlap,
 * about 1 ms per 15 MiB of weights at load), folded together, then the last words and bytes. It
 * only narrows the candidates; equality is decided by memcmp. */
static uint64_t content_hash(const void *src, size_t n) {
  const unsigned char *p = src;
  const uint64_t seed = 0x9e3779b97f4a7c15u ^ (uint64_t)n;
  uint64_t lane[4] = {seed, seed + 1, seed + 2, seed + 3};
  size_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int k = 0; k < 4; k++) {
      uint64_t w;
      memcpy(&w, p + i + 8 * k, sizeof w);
      lane[k] = hash_step(lane[k], w);
    }
  uint64_t h = hash_step(hash_step(hash_step(lane[0], lane[1]), lane[2]), lane[3]);
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, sizeof w);
    h = hash_step(h, w);
  }
  for (; i < n; i++) h = (h ^ p[i]) * 0x100000001b3u;
  return h ^ (h >> 32);
}

/* With share_lock held: a block with the bytes of src and an address meeting align, or NULL. */
static mx__shared_block *find_block(mx_device *dev, const void *src, size_t n, size_t align, uint64_t hash) {
  for (mx__shared_block *b = dev->shared; b; b = b->next)
    if (b->size == n && b->hash == hash && ((uintptr_t)b->ptr & (align - 1)) == 0 &&
        (n == 0 || memcmp(b->ptr, src, n) == 0))
      return b;
  return NULL;
}

mx_status mx_device_shared_acquire(mx_device *dev, const void *src, size_t n, size_t align, void **ptr) {
  if (ptr) *ptr = NULL;
  if (!dev || !ptr) return MX_ERR_INVALID_ARGUMENT;
  if (n && !src)
    return mx__device_fail(dev, MX_ERR_INVALID_ARGUMENT,
                           "mx_device_shared_acquire: NULL source with %zu bytes", n);
  if (align == 0) align = 64;
  if (align & (align - 1))
    return mx__device_fail(dev, MX_ERR_INVALID_ARGUMENT,
                           "mx_device_shared_acquire: alignment %zu is not a power of two", align);
  mx__shared_block *rec = malloc(sizeof *rec);
  if (!rec) return mx__device_fail(dev, MX_ERR_OUT_OF_MEMORY, "mx_device_shared_acquire: out of host memory");
  const uint64_t hash = content_hash(src, n);
  pthread_mutex_lock(&dev->share_lock);
  mx__shared_block *b = find_block(dev, src, n, align, hash);
  if (b) {
    b->holders++;
    dev->shared_hits++;
    *ptr = b->ptr;
    pthread_mutex_unlock(&dev->share_lock);
    free(rec);
    return MX_OK;
  }
  void *block = NULL;
  mx_status st = mx_device_upload(dev, src, n, align, &block);
  if (st != MX_OK) {
    pthread_mutex_unlock(&dev->share_lock);
    free(rec);
    return st; /* the allocation or the copy left its message on the device */
  }
  mx__mem_set_shared(dev, block, true);
  *rec = (mx__shared_block){.ptr = block, .size = n, .hash = hash, .holders = 1, .next = dev->shared};
  dev->shared = rec;
  *ptr = block;
  pthread_mutex_unlock(&dev->share_lock);
  return MX_OK;
}

mx_status mx_device_shared_release(mx_device *dev, void *ptr) {
  if (!dev) return MX_ERR_INVALID_ARGUMENT;
  if (!ptr) return MX_OK;
  pthread_mutex_lock(&dev->share_lock);
  mx__shared_block **link = &dev->shared;
  while (*link && (*link)->ptr != ptr) link = &(*link)->next;
  mx__shared_block *b = *link;
  if (!b) {
    pthread_mutex_unlock(&dev->share_lock);
    return mx__device_fail(dev, MX_ERR_INVALID_ARGUMENT,
                           "mx_device_shared_release: %p is not a shared block (released once too often, "
                           "or not from mx_device_shared_acquire)",
                           ptr);
  }
  if (--b->holders == 0) {
    *link = b->next;
    mx__mem_set_shared(dev, ptr, false);
    mx_device_free(dev, ptr);
    free(b);
  }
  pthread_mutex_unlock(&dev->share_lock);
  return MX_OK;
}

void mx__shared_stats(mx_device *dev, uint64_t *blocks, uint64_t *bytes, uint64_t *hits) {
  uint64_t nb = 0, nbytes = 0;
  pthread_mutex_lock(&dev->share_lock);
  for (const mx__shared_block *b = dev->shared; b; b = b->next) {
    nb++;
    nbytes += b->size;
  }
  *hits = dev->shared_hits;
  pthread_mutex_unlock(&dev->share_lock);
  *blocks = nb;
  *bytes = nbytes;
}

void mx__shared_release_all(mx_device *dev) {
  pthread_mutex_lock(&dev->share_lock);
  while (dev->shared) {
    mx__shared_block *next = dev->shared->next;
    free(dev->shared);
    dev->shared = next;
  }
  pthread_mutex_unlock(&dev->share_lock);
}
