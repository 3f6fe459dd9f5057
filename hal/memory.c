/* Device memory: tracked allocations, copies, memsets and checking-mode range validation.
 *
 * Device memory is host RAM obtained per allocation with posix_memalign. Every live allocation
 * (and every buffer registered by an adapter) is a node of a treap ordered by address, so
 * freeing validates the pointer and checking mode can find the allocation that contains any
 * address in O(log n). The memory limit is enforced by reserving the bytes before the host
 * allocation happens, so concurrent allocations never overshoot it. Large allocations are
 * aligned to a huge page and advised as such (mx_device_options.huge_pages): a decode step
 * reads every weight once, and with 4 KiB pages that read can miss the TLB on every page (the
 * weights of a small llama span thousands of pages, beyond the TLB). Allocation and free are
 * not on the per-step hot path (executors cache device memory above the HAL), so one mutex
 * guards the tree and the statistics. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/record.h"
#include "hal/hal_impl.h"

struct mx__mem_node {
  uintptr_t start; /* first byte */
  size_t size;     /* bytes requested (0 allowed) */
  uint64_t prio;   /* treap priority (max-heap) */
  bool external;   /* registered buffer: not owned, not counted */
  bool shared;     /* a shared block: freed only through mx_device_shared_release */
  mx__mem_node *left, *right;
};

/* --- treap ------------------------------------------------------------------------------------ */

static mx__mem_node *treap_merge(mx__mem_node *a, mx__mem_node *b) {
  /* every key of a is below every key of b */
  if (!a) return b;
  if (!b) return a;
  if (a->prio > b->prio) {
    a->right = treap_merge(a->right, b);
    return a;
  }
  b->left = treap_merge(a, b->left);
  return b;
}

static mx__mem_node *treap_insert(mx__mem_node *root, mx__mem_node *n) {
  if (!root) return n;
  if (n->start < root->start) {
    root->left = treap_insert(root->left, n);
    if (root->left->prio > root->prio) {
      mx__mem_node *l = root->left;
      root->left = l->right;
      l->right = root;
      return l;
    }
  } else {
    root->right = treap_insert(root->right, n);
    if (root->right->prio > root->prio) {
      mx__mem_node *r = root->right;
      root->right = r->left;
      r->left = root;
      return r;
    }
  }
  return root;
}

/* Removes the node starting at `start` from the tree; *out receives it (NULL if absent). */
static mx__mem_node *treap_erase(mx__mem_node *root, uintptr_t start, mx__mem_node **out) {
  if (!root) return NULL;
  if (start < root->start) {
    root->left = treap_erase(root->left, start, out);
  } else if (start > root->start) {
    root->right = treap_erase(root->right, start, out);
  } else {
    *out = root;
    return treap_merge(root->left, root->right);
  }
  return root;
}

/* Node with the greatest start <= addr, or NULL. */
static mx__mem_node *treap_floor(mx__mem_node *n, uintptr_t addr) {
  mx__mem_node *best = NULL;
  while (n) {
    if (n->start <= addr) {
      best = n;
      n = n->right;
    } else {
      n = n->left;
    }
  }
  return best;
}

/* Node with the smallest start > addr, or NULL. */
static mx__mem_node *treap_above(mx__mem_node *n, uintptr_t addr) {
  mx__mem_node *best = NULL;
  while (n) {
    if (n->start > addr) {
      best = n;
      n = n->left;
    } else {
      n = n->right;
    }
  }
  return best;
}

static uint64_t next_prio(mx_device *dev) {
  /* xorshift64*: any decent spread keeps the treap balanced in expectation */
  uint64_t x = dev->mem_rng;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  dev->mem_rng = x;
  return x * 0x2545F4914F6CDD1Dull;
}

static void treap_free_all(mx__mem_node *n) {
  while (n) {
    treap_free_all(n->left);
    mx__mem_node *right = n->right;
    if (!n->external) free((void *)n->start);
    free(n);
    n = right;
  }
}

/* --- internal helpers ------------------------------------------------------------------------- */

void mx__mem_lock(mx_device *dev) { pthread_mutex_lock(&dev->mem_lock); }
void mx__mem_unlock(mx_device *dev) { pthread_mutex_unlock(&dev->mem_lock); }

bool mx__mem_contains_locked(mx_device *dev, const void *p, size_t n, char *why, size_t why_size) {
  uintptr_t a = (uintptr_t)p;
  mx__mem_node *node = treap_floor(dev->mem_root, a);
  if (node) {
    uintptr_t off = a - node->start;
    bool ok;
    if (n == 0) {
      ok = off < (node->size ? node->size : 1);
    } else {
      ok = off <= node->size && n <= node->size - off;
    }
    if (ok) return true;
  }
  if (why && why_size) {
    mx__mem_node *next = treap_above(dev->mem_root, a);
    if (node && next) {
      snprintf(why, why_size,
               "nearest allocation below is %p (%zu bytes, ends at %p); the next one starts at %p",
               (void *)node->start, node->size, (void *)(node->start + node->size), (void *)next->start);
    } else if (node) {
      snprintf(why, why_size, "nearest allocation below is %p (%zu bytes, ends at %p)", (void *)node->start,
               node->size, (void *)(node->start + node->size));
    } else if (next) {
      snprintf(why, why_size, "no allocation starts at or below it; the next one starts at %p",
               (void *)next->start);
    } else {
      snprintf(why, why_size, "the device has no live allocation around it");
    }
  }
  return false;
}

bool mx__mem_free(mx_device *dev, void *ptr, char *why, size_t why_size) {
  mx__mem_node *node = NULL;
  mx__mem_lock(dev);
  mx__mem_node *found = treap_floor(dev->mem_root, (uintptr_t)ptr);
  if (found && found->start == (uintptr_t)ptr && found->external) {
    mx__mem_unlock(dev);
    snprintf(why, why_size,
             "%p is a registered buffer, not an allocation (use "
             "mx_device_unregister_buffer)",
             ptr);
    return false;
  }
  if (found && found->start == (uintptr_t)ptr && found->shared) {
    mx__mem_unlock(dev);
    snprintf(why, why_size, "%p is a shared block (use mx_device_shared_release)", ptr);
    return false;
  }
  dev->mem_root = treap_erase(dev->mem_root, (uintptr_t)ptr, &node);
  if (!node) {
    mx__mem_unlock(dev);
    snprintf(why, why_size,
             "%p is not a live device allocation (freed twice, or not from "
             "mx_device_alloc)",
             ptr);
    return false;
  }
  dev->mem_in_use -= node->size;
  dev->mem_frees++;
  dev->mem_live--;
  mx__mem_unlock(dev);
  free(ptr);
  free(node);
  return true;
}

bool mx__mem_set_shared(mx_device *dev, void *ptr, bool shared) {
  mx__mem_lock(dev);
  mx__mem_node *found = treap_floor(dev->mem_root, (uintptr_t)ptr);
  bool live = found && found->start == (uintptr_t)ptr && !found->external;
  if (live) found->shared = shared;
  mx__mem_unlock(dev);
  return live;
}

void mx__mem_release_all(mx_device *dev) {
  mx__mem_lock(dev);
  treap_free_all(dev->mem_root);
  dev->mem_root = NULL;
  dev->mem_in_use = 0;
  dev->mem_live = 0;
  mx__mem_unlock(dev);
}

/* --- allocation ------------------------------------------------------------------------------- */

mx_status mx_device_alloc(mx_device *dev, size_t size, size_t align, void **ptr) {
  if (ptr) *ptr = NULL;
  if (!dev || !ptr) return MX_ERR_INVALID_ARGUMENT;
  if (align == 0) align = 64;
  if (align & (align - 1))
    return mx__device_fail(dev, MX_ERR_INVALID_ARGUMENT,
                           "mx_device_alloc: alignment %zu is not a power of two", align);
  if (align < sizeof(void *)) align = sizeof(void *);
  if (mx__fault_hit(dev, MX_FAULT_ALLOC))
    return mx__device_fail(dev, MX_ERR_DEVICE_OOM,
                           "mx_device_alloc: allocation of %zu bytes failed: injected fault "
                           "(alloc:%" PRIu64 ")",
                           size, dev->fault_nth[MX_FAULT_ALLOC]);

  /* Refused before asking the host: an absurd size (a corrupt or hostile shape) must not reach
   * the host allocator, which may grant it lazily and fail only when the memory is touched. */
  uint64_t cap = dev->mem_capacity, lim = dev->opt.memory_limit;
  if (size > cap && (!lim || lim >= cap)) /* a smaller limit refuses it below, and says so */
    return mx__device_fail(dev, MX_ERR_DEVICE_OOM,
                           "mx_device_alloc: %zu bytes requested, more than the device has (%" PRIu64
                           " bytes of host memory)",
                           size, dev->mem_capacity);

  mx_status st = MX_OK;
  void *block = NULL;
  mx__mem_node *node = malloc(sizeof *node);
  if (!node) {
    st = mx__device_fail(dev, MX_ERR_OUT_OF_MEMORY, "mx_device_alloc: out of host memory");
    goto fail;
  }
  /* Reserve the bytes first so concurrent allocations respect the limit. */
  mx__mem_lock(dev);
  uint64_t limit = dev->opt.memory_limit;
  if (limit && (size > limit || dev->mem_in_use > limit - size)) {
    uint64_t in_use = dev->mem_in_use;
    mx__mem_unlock(dev);
    st = mx__device_fail(dev, MX_ERR_DEVICE_OOM,
                         "device memory limit exceeded: %zu bytes requested, %" PRIu64 " of %" PRIu64
                         " bytes in use",
                         size, in_use, limit);
    goto free_node;
  }
  dev->mem_in_use += size;
  if (dev->mem_in_use > dev->mem_peak) dev->mem_peak = dev->mem_in_use;
  mx__mem_unlock(dev);

  /* The host block: huge-page backed when large, rounded up to whole huge pages (a huge page
   * can only back a range the block covers entirely). */
  size_t host_size = size ? size : 1;
  bool huge =
      dev->opt.huge_pages && size >= MX_DEVICE_HUGE_PAGE_MIN && size <= SIZE_MAX - MX_DEVICE_HUGE_PAGE;
  if (huge) {
    if (align < MX_DEVICE_HUGE_PAGE) align = MX_DEVICE_HUGE_PAGE;
    host_size = (size + MX_DEVICE_HUGE_PAGE - 1) & ~(MX_DEVICE_HUGE_PAGE - 1);
  }
  if (posix_memalign(&block, align, host_size) != 0) {
    st = mx__device_fail(dev, MX_ERR_DEVICE_OOM, "mx_device_alloc: the host could not provide %zu bytes",
                         size);
    goto unreserve;
  }
#ifdef MADV_HUGEPAGE
  /* Advice: where transparent huge pages are off or unsupported it fails, and 4 KiB pages do. */
  if (huge) (void)madvise(block, host_size, MADV_HUGEPAGE);
#endif
  node->start = (uintptr_t)block;
  node->size = size;
  node->external = false;
  node->shared = false;
  node->left = node->right = NULL;
  mx__mem_lock(dev);
  node->prio = next_prio(dev);
  dev->mem_root = treap_insert(dev->mem_root, node);
  dev->mem_allocs++;
  dev->mem_live++;
  mx__mem_unlock(dev);
  *ptr = block;
  return MX_OK;

unreserve:
  mx__mem_lock(dev);
  dev->mem_in_use -= size;
  mx__mem_unlock(dev);
free_node:
  free(node);
fail:
  return st;
}

mx_status mx_device_upload(mx_device *dev, const void *src, size_t n, size_t align, void **ptr) {
  mx_status st = mx_device_alloc(dev, n, align, ptr);
  if (st != MX_OK || n == 0) return st;
  st = mx_device_copy(dev, *ptr, src, n, MX_COPY_H2D);
  if (st != MX_OK) {
    mx_device_free(dev, *ptr);
    *ptr = NULL;
  }
  return st;
}

mx_status mx_device_free(mx_device *dev, void *ptr) {
  if (!dev) return MX_ERR_INVALID_ARGUMENT;
  if (!ptr) return MX_OK;
  char why[256];
  if (!mx__mem_free(dev, ptr, why, sizeof why))
    return mx__device_fail(dev, MX_ERR_INVALID_ARGUMENT, "mx_device_free: %s", why);
  return MX_OK;
}

mx_status mx_device_register_buffer(mx_device *dev, void *ptr, size_t size) {
  if (!dev) return MX_ERR_INVALID_ARGUMENT;
  if (!ptr) return mx__device_fail(dev, MX_ERR_INVALID_ARGUMENT, "mx_device_register_buffer: NULL buffer");
  mx__mem_node *node = malloc(sizeof *node);
  if (!node)
    return mx__device_fail(dev, MX_ERR_OUT_OF_MEMORY, "mx_device_register_buffer: out of host memory");
  uintptr_t a = (uintptr_t)ptr;
  mx__mem_lock(dev);
  mx__mem_node *below = treap_floor(dev->mem_root, a);
  mx__mem_node *above = treap_above(dev->mem_root, a);
  bool overlap =
      (below && (below->start == a || a - below->start < below->size)) || (above && above->start - a < size);
  if (overlap) {
    mx__mem_unlock(dev);
    free(node);
    return mx__device_fail(dev, MX_ERR_INVALID_ARGUMENT,
                           "mx_device_register_buffer: [%p, +%zu) overlaps a live allocation or "
                           "registered buffer",
                           ptr, size);
  }
  node->start = a;
  node->size = size;
  node->external = true;
  node->shared = false;
  node->left = node->right = NULL;
  node->prio = next_prio(dev);
  dev->mem_root = treap_insert(dev->mem_root, node);
  mx__mem_unlock(dev);
  return MX_OK;
}

mx_status mx_device_unregister_buffer(mx_device *dev, void *ptr) {
  if (!dev) return MX_ERR_INVALID_ARGUMENT;
  mx__mem_node *node = NULL;
  mx__mem_lock(dev);
  mx__mem_node *found = treap_floor(dev->mem_root, (uintptr_t)ptr);
  if (found && found->start == (uintptr_t)ptr && found->external)
    dev->mem_root = treap_erase(dev->mem_root, (uintptr_t)ptr, &node);
  mx__mem_unlock(dev);
  if (!node)
    return mx__device_fail(dev, MX_ERR_INVALID_ARGUMENT,
                           "mx_device_unregister_buffer: %p is not a registered buffer", ptr);
  free(node);
  return MX_OK;
}

void mx_device_memory_stats_get_sized(const mx_device *dev, mx_device_memory_stats *out, size_t record_size) {
  if (!dev || !out || record_size == 0) return;
  mx_device *d = (mx_device *)dev; /* locking does not change the device's state */
  mx_device_memory_stats st;
  memset(&st, 0, sizeof st);
  mx__mem_lock(d);
  st.bytes_in_use = d->mem_in_use;
  st.peak_bytes = d->mem_peak;
  st.limit_bytes = d->opt.memory_limit;
  st.allocations = d->mem_allocs;
  st.frees = d->mem_frees;
  st.live = d->mem_live;
  mx__mem_unlock(d);
  mx__shared_stats(d, &st.shared_blocks, &st.shared_bytes, &st.shared_hits);
  mx__record_fill(out, record_size, &st, sizeof st); /* the caller's size (docs/abi.md) */
}

void mx_device_memory_reset_peak(mx_device *dev) {
  if (!dev) return;
  mx__mem_lock(dev);
  dev->mem_peak = dev->mem_in_use;
  mx__mem_unlock(dev);
}

/* --- copies ----------------------------------------------------------------------------------- */

static const char *const copy_names[] = {"H2D", "D2H", "D2D"};

/* Validates the device side(s) of a copy in checking mode. */
static mx_status check_copy(mx_device *dev, const char *fn, void *dst, const void *src, size_t n,
                            mx_copy_kind kind) {
  char why[256];
  mx_status st = MX_OK;
  mx__mem_lock(dev);
  if (kind != MX_COPY_H2D && !mx__mem_contains_locked(dev, src, n, why, sizeof why)) {
    mx__mem_unlock(dev);
    st = mx__device_fail(dev, MX_ERR_INVALID_ARGUMENT,
                         "%s (%s): source range [%p, +%zu bytes) is not inside a live device "
                         "allocation: %s",
                         fn, copy_names[kind], src, n, why);
    goto out;
  }
  if (kind != MX_COPY_D2H && !mx__mem_contains_locked(dev, dst, n, why, sizeof why)) {
    mx__mem_unlock(dev);
    st = mx__device_fail(dev, MX_ERR_INVALID_ARGUMENT,
                         "%s (%s): destination range [%p, +%zu bytes) is not inside a live "
                         "device allocation: %s",
                         fn, copy_names[kind], dst, n, why);
    goto out;
  }
  mx__mem_unlock(dev);
out:
  return st;
}

static mx_status check_copy_args(mx_device *dev, const char *fn, void *dst, const void *src, size_t n,
                                 mx_copy_kind kind) {
  if ((unsigned)kind > MX_COPY_D2D)
    return mx__device_fail(dev, MX_ERR_INVALID_ARGUMENT, "%s: unknown copy kind %d", fn, (int)kind);
  if (n && (!dst || !src))
    return mx__device_fail(dev, MX_ERR_INVALID_ARGUMENT, "%s: NULL %s with %zu bytes to copy", fn,
                           dst ? "source" : "destination", n);
  if (n && dev->check) return check_copy(dev, fn, dst, src, n, kind);
  return MX_OK;
}

mx_status mx_device_copy(mx_device *dev, void *dst, const void *src, size_t n, mx_copy_kind kind) {
  if (!dev) return MX_ERR_INVALID_ARGUMENT;
  mx_status st = check_copy_args(dev, "mx_device_copy", dst, src, n, kind);
  if (st != MX_OK) return st;
  if (mx__fault_hit(dev, MX_FAULT_COPY))
    return mx__device_fail(dev, MX_ERR_DEVICE,
                           "mx_device_copy (%s) of %zu bytes failed: injected fault (copy:%" PRIu64 ")",
                           copy_names[kind], n, dev->fault_nth[MX_FAULT_COPY]);
  if (n) memmove(dst, src, n);
  return MX_OK;
}

mx_status mx__hal_copy_async_named(mx_stream *s, void *dst, const void *src, size_t n, mx_copy_kind kind,
                                   const char *name) {
  if (!s) return MX_ERR_INVALID_ARGUMENT;
  mx_device *dev = s->dev;
  mx_status st = check_copy_args(dev, "mx_device_copy_async", dst, src, n, kind);
  if (st != MX_OK) return st;
  mx__op op = {.kind = MX__OP_COPY, .dst = dst, .src = src, .n = n, .name = name};
  op.inject = mx__fault_hit(dev, MX_FAULT_COPY);
  return dev->ops->submit(s, &op);
}

mx_status mx_device_copy_async(mx_stream *s, void *dst, const void *src, size_t n, mx_copy_kind kind) {
  return mx__hal_copy_async_named(s, dst, src, n, kind, NULL);
}

static mx_status check_memset_args(mx_device *dev, const char *fn, void *dst, size_t n) {
  if (n && !dst) return mx__device_fail(dev, MX_ERR_INVALID_ARGUMENT, "%s: NULL destination", fn);
  if (n && dev->check) {
    char why[256];
    mx__mem_lock(dev);
    bool ok = mx__mem_contains_locked(dev, dst, n, why, sizeof why);
    mx__mem_unlock(dev);
    if (!ok)
      return mx__device_fail(dev, MX_ERR_INVALID_ARGUMENT,
                             "%s: range [%p, +%zu bytes) is not inside a live device allocation: %s", fn, dst,
                             n, why);
  }
  return MX_OK;
}

mx_status mx_device_memset(mx_device *dev, void *dst, int value, size_t n) {
  if (!dev) return MX_ERR_INVALID_ARGUMENT;
  mx_status st = check_memset_args(dev, "mx_device_memset", dst, n);
  if (st != MX_OK) return st;
  if (mx__fault_hit(dev, MX_FAULT_COPY))
    return mx__device_fail(dev, MX_ERR_DEVICE,
                           "mx_device_memset of %zu bytes failed: injected fault (copy:%" PRIu64 ")", n,
                           dev->fault_nth[MX_FAULT_COPY]);
  if (n) memset(dst, value, n);
  return MX_OK;
}

mx_status mx_device_memset_async(mx_stream *s, void *dst, int value, size_t n) {
  if (!s) return MX_ERR_INVALID_ARGUMENT;
  mx_device *dev = s->dev;
  mx_status st = check_memset_args(dev, "mx_device_memset_async", dst, n);
  if (st != MX_OK) return st;
  mx__op op = {.kind = MX__OP_MEMSET, .dst = dst, .n = n, .value = value};
  op.inject = mx__fault_hit(dev, MX_FAULT_COPY);
  return dev->ops->submit(s, &op);
}

mx_status mx_device_free_async(mx_stream *s, void *ptr) {
  if (!s) return MX_ERR_INVALID_ARGUMENT;
  mx_device *dev = s->dev;
  if (!ptr) return MX_OK;
  mx__mem_lock(dev);
  mx__mem_node *node = treap_floor(dev->mem_root, (uintptr_t)ptr);
  bool live = node && node->start == (uintptr_t)ptr && !node->external;
  bool shared = live && node->shared;
  mx__mem_unlock(dev);
  if (!live)
    return mx__device_fail(dev, MX_ERR_INVALID_ARGUMENT,
                           "mx_device_free_async: %p is not a live device allocation", ptr);
  if (shared)
    return mx__device_fail(dev, MX_ERR_INVALID_ARGUMENT,
                           "mx_device_free_async: %p is a shared block (use mx_device_shared_release)", ptr);
  mx__op op = {.kind = MX__OP_FREE, .dst = ptr};
  return dev->ops->submit(s, &op);
}
