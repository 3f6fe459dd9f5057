/* The caching device allocator (see caching_allocator.h for the contract).
 *
 * Layout. Every device block has a host-side header (ca_block) found from its address through
 * an open-addressing hash table. Each stream the allocator has seen has a pool: per-class bins
 * of the blocks last freed on that stream (doubly linked, newest at the head), an epoch
 * counter, and a small ring of fence events. A free stamps the block with its pool's current
 * epoch; recording a fence closes the epoch, and once the fence is reached every block freed
 * in an earlier epoch is known to be past its last use (`safe_below`). Same-stream reuse needs
 * none of this; taking a block from another stream's bins does. Pool 0 stands for "no stream"
 * and its blocks are always safe. */
#include "hal/caching_allocator.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"

#define N_CLASSES  224 /* 256 bytes, then 4 classes per power of two up to 2^64 */
#define FENCE_RING 4   /* outstanding fences per pool; more are coalesced into the newest */
#define MAX_PEND   4   /* other-stream fences a cached block can wait for */
#define SCAN_LIMIT 8   /* blocks examined per bin before giving up on it */
#define N_POOLS    (MX_CACHING_MAX_STREAMS + 1)

typedef struct ca_block {
  void *ptr;                     /* device address (the hash key) */
  size_t size;                   /* class size in bytes (what the device allocation holds) */
  size_t requested;              /* live: bytes asked for */
  struct ca_block *prev, *next;  /* cached: neighbours in the bin list */
  uint64_t use_mask;             /* live: pools (bit i = pool i) recorded as also using it */
  uint64_t epoch;                /* cached: epoch of its pool at the free */
  uint64_t pend_cover[MAX_PEND]; /* cached: fence covers of other pools it waits for */
  uint8_t pend_pool[MAX_PEND];   /*   ... and those pools */
  uint8_t n_pend;
  uint8_t pool; /* live: pool it was allocated for; cached: pool holding it */
  bool live;    /* handed out */
  uint16_t cls; /* size class index */
} ca_block;

typedef struct ca_fence {
  mx_event *ev;   /* recorded on the pool's stream */
  uint64_t cover; /* reached => blocks with epoch < cover are safe */
} ca_fence;

typedef struct ca_pool {
  mx_stream *stream;           /* the stream (NULL for pool 0 and free slots) */
  bool used;                   /* slot in use (pool 0 always) */
  uint64_t epoch;              /* current epoch: frees are stamped with it */
  bool unfenced;               /* blocks were freed in the current epoch */
  uint64_t safe_below;         /* blocks freed in epochs below this are past their last use */
  ca_fence fences[FENCE_RING]; /* outstanding fences, oldest at fence_head */
  uint32_t fence_head, n_fences;
  mx_event *events[FENCE_RING]; /* owned, created on first use */
  ca_block *head[N_CLASSES];    /* bins: most recently freed first */
  ca_block *tail[N_CLASSES];
} ca_pool;

struct mx_caching_allocator {
  mx_device *dev;            /* borrowed */
  atomic_bool lock;          /* guards everything below (ca_lock / ca_unlock) */
  ca_pool *pools[N_POOLS];   /* pool 0 = no stream; others created on first use (owned) */
  uint32_t n_slots;          /* pool slots ever used: 1 + the highest slot index taken */
  mx_stream *last_stream;    /* stream of the previous lookup (NULL: none) ... */
  uint32_t last_pool;        /* ... and its pool: the first guess of the next lookup */
  ca_block **map;            /* ptr -> block, open addressing (owned); NULL = empty slot */
  size_t map_cap, map_count; /* slots (power of two), blocks in the table */
  mx_caching_stats st;
};

/* --- the lock ---------------------------------------------------------------------------------- */

/* Critical sections are a few dozen instructions and the usual caller is the only thread using
 * the allocator (one session or executor per thread), so the lock is one atomic exchange when
 * free; a waiter spins briefly, then yields the processor between attempts (a holder may be
 * waiting for a stream in the rare slow paths: out of device memory, trim, forget). */
#define SPIN_TRIES 128

static void ca_lock_wait(mx_caching_allocator *a) {
  for (unsigned n = 0;; n++) {
    if (!atomic_load_explicit(&a->lock, memory_order_relaxed) &&
        !atomic_exchange_explicit(&a->lock, true, memory_order_acquire))
      return;
    if (n < SPIN_TRIES) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    } else {
      sched_yield();
    }
  }
}

static inline void ca_lock(mx_caching_allocator *a) {
  if (atomic_exchange_explicit(&a->lock, true, memory_order_acquire)) ca_lock_wait(a);
}

static inline void ca_unlock(mx_caching_allocator *a) {
  atomic_store_explicit(&a->lock, false, memory_order_release);
}

/* --- size classes ----------------------------------------------------------------------------- */

static bool size_class(size_t s, unsigned *cls, size_t *csize) {
  if (s <= 256) {
    *cls = 0;
    *csize = 256;
    return true;
  }
  if (s > (SIZE_MAX >> 2)) return false;
  unsigned k = 63u - (unsigned)__builtin_clzll((unsigned long long)(s - 1)); /* 2^k < s <= 2^(k+1) */
  unsigned sh = k - 2;
  size_t q = (s + ((size_t)1 << sh) - 1) >> sh; /* 5..8 */
  *csize = q << sh;
  *cls = 1 + (k - 8) * 4 + (unsigned)(q - 5);
  return *cls < N_CLASSES;
}

size_t mx__caching_class_size(size_t size) {
  unsigned cls;
  size_t cs;
  if (size == 0 || !size_class(size, &cls, &cs)) return 0;
  return cs;
}

/* --- the address map -------------------------------------------------------------------------- */

static size_t map_hash(const void *p, size_t cap) {
  uint64_t x = (uint64_t)(uintptr_t)p >> 6;
  x *= 0x9E3779B97F4A7C15ull;
  return (size_t)(x >> 20) & (cap - 1);
}

static ca_block *map_find(const mx_caching_allocator *a, const void *p) {
  if (!a->map_cap) return NULL;
  for (size_t i = map_hash(p, a->map_cap);; i = (i + 1) & (a->map_cap - 1)) {
    ca_block *b = a->map[i];
    if (!b) return NULL;
    if (b->ptr == p) return b;
  }
}

static void map_put_raw(ca_block **map, size_t cap, ca_block *b) {
  size_t i = map_hash(b->ptr, cap);
  while (map[i]) i = (i + 1) & (cap - 1);
  map[i] = b;
}

static bool map_insert(mx_caching_allocator *a, ca_block *b) {
  if ((a->map_count + 1) * 2 > a->map_cap) {
    size_t ncap = a->map_cap ? a->map_cap * 2 : 64;
    ca_block **nm = calloc(ncap, sizeof *nm);
    if (!nm) return false;
    for (size_t i = 0; i < a->map_cap; i++)
      if (a->map[i]) map_put_raw(nm, ncap, a->map[i]);
    free(a->map);
    a->map = nm;
    a->map_cap = ncap;
  }
  map_put_raw(a->map, a->map_cap, b);
  a->map_count++;
  return true;
}

/* Removes b, shifting later entries of its probe run back so lookups stay correct. */
static void map_remove(mx_caching_allocator *a, const ca_block *b) {
  size_t mask = a->map_cap - 1, i = map_hash(b->ptr, a->map_cap);
  while (a->map[i] != b) i = (i + 1) & mask;
  a->map[i] = NULL;
  for (size_t j = (i + 1) & mask; a->map[j]; j = (j + 1) & mask) {
    size_t home = map_hash(a->map[j]->ptr, a->map_cap);
    /* Move entry j into the hole when its home is not in (i, j] (cyclically). */
    bool in_range = i <= j ? (home > i && home <= j) : (home > i || home <= j);
    if (!in_range) {
      a->map[i] = a->map[j];
      a->map[j] = NULL;
      i = j;
    }
  }
  a->map_count--;
}

/* --- pools and fences ------------------------------------------------------------------------- */

static ca_pool *pool_new(mx_stream *s) {
  ca_pool *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->stream = s;
  p->used = true;
  p->epoch = 1;
  p->safe_below = 1;
  return p;
}

/* Index of the pool of stream s, creating it; -1 when out of host memory, -2 when every slot
 * is taken. */
static int pool_index(mx_caching_allocator *a, mx_stream *s) {
  if (!s) return 0;
  if (s == a->last_stream) return (int)a->last_pool;
  int free_slot = -1;
  for (int i = 1; i < N_POOLS; i++) {
    ca_pool *p = a->pools[i];
    if (p && p->used && p->stream == s) {
      a->last_stream = s;
      a->last_pool = (uint32_t)i;
      return i;
    }
    if (free_slot < 0 && (!p || !p->used)) free_slot = i;
    if (i >= (int)a->n_slots && free_slot >= 0) break; /* no pool beyond the slots used */
  }
  if (free_slot < 0) return -2;
  if (!a->pools[free_slot]) {
    a->pools[free_slot] = pool_new(s);
    if (!a->pools[free_slot]) return -1;
  } else {
    ca_pool *p = a->pools[free_slot];
    p->stream = s;
    p->used = true;
  }
  if ((uint32_t)free_slot >= a->n_slots) a->n_slots = (uint32_t)free_slot + 1;
  a->last_stream = s;
  a->last_pool = (uint32_t)free_slot;
  return free_slot;
}

/* Index of the pool of stream s (not NULL) if the allocator has seen it, else -1. */
static int pool_find(mx_caching_allocator *a, mx_stream *s) {
  if (s == a->last_stream) return (int)a->last_pool;
  for (uint32_t i = 1; i < a->n_slots; i++)
    if (a->pools[i] && a->pools[i]->used && a->pools[i]->stream == s) return (int)i;
  return -1;
}

/* Advances safe_below over the fences already reached. */
static void fence_poll(ca_pool *p) {
  while (p->n_fences) {
    ca_fence *f = &p->fences[p->fence_head];
    /* Anything but BUSY means the stream's counter passed the point (a failed stream skips its
     * later commands, which then touch no memory). */
    if (mx_event_query(f->ev) == MX_ERR_BUSY) break;
    if (f->cover > p->safe_below) p->safe_below = f->cover;
    p->fence_head = (p->fence_head + 1) % FENCE_RING;
    p->n_fences--;
  }
}

/* Records a fence closing the current epoch; returns its cover (0 when no event could be
 * created or recorded: the caller then treats the blocks as unsafe). */
static uint64_t fence_record(mx_caching_allocator *a, ca_pool *p) {
  uint64_t cover = p->epoch + 1;
  ca_fence *f;
  if (p->n_fences == FENCE_RING) {
    f = &p->fences[(p->fence_head + FENCE_RING - 1) % FENCE_RING]; /* coalesce into the newest */
  } else {
    uint32_t slot = (p->fence_head + p->n_fences) % FENCE_RING;
    if (!p->events[slot] && mx_event_create(a->dev, &p->events[slot]) != MX_OK) return 0;
    f = &p->fences[slot];
    f->ev = p->events[slot];
    p->n_fences++;
  }
  if (mx_event_record(f->ev, p->stream) != MX_OK) {
    /* Without a recorded fence the coverage cannot be claimed: wait for the stream instead. A
     * synchronize drains the stream even when it failed, and the failure belongs to its step:
     * here and below only the wait matters. */
    MX_IGNORE_STATUS(mx_stream_synchronize(p->stream));
    p->safe_below = cover;
  }
  f->cover = cover;
  p->epoch++;
  p->unfenced = false;
  a->st.fences++;
  return cover;
}

/* True when a block of pool p freed in `epoch` is past its last use on p's stream. */
static bool epoch_safe(mx_caching_allocator *a, ca_pool *p, uint64_t epoch, bool may_record) {
  if (!p->stream || epoch < p->safe_below) return true;
  fence_poll(p);
  if (epoch < p->safe_below) return true;
  bool covered = p->n_fences && p->fences[(p->fence_head + p->n_fences - 1) % FENCE_RING].cover > epoch;
  if (covered || !may_record) return false;
  if (!fence_record(a, p)) return false;
  fence_poll(p);
  return epoch < p->safe_below;
}

/* True when the other-stream fences a cached block waits for are all reached. */
static bool pend_done(mx_caching_allocator *a, ca_block *b) {
  while (b->n_pend) {
    uint8_t k = b->n_pend - 1;
    ca_pool *q = a->pools[b->pend_pool[k]];
    if (q->stream && b->pend_cover[k] > q->safe_below) {
      fence_poll(q);
      if (b->pend_cover[k] > q->safe_below) return false;
    }
    b->n_pend--;
  }
  return true;
}

/* --- bins ------------------------------------------------------------------------------------- */

static void bin_unlink(ca_pool *p, ca_block *b) {
  if (b->prev)
    b->prev->next = b->next;
  else
    p->head[b->cls] = b->next;
  if (b->next)
    b->next->prev = b->prev;
  else
    p->tail[b->cls] = b->prev;
  b->prev = b->next = NULL;
}

static void bin_push(ca_pool *p, ca_block *b) {
  b->prev = NULL;
  b->next = p->head[b->cls];
  if (b->next)
    b->next->prev = b;
  else
    p->tail[b->cls] = b;
  p->head[b->cls] = b;
}

/* A safe cached block of class cls for pool pi, or NULL. *cross says whether it came from
 * another stream's bins. */
static ca_block *find_cached(mx_caching_allocator *a, int pi, unsigned cls, bool *cross) {
  ca_pool *own = a->pools[pi];
  int n = 0;
  for (ca_block *b = own->head[cls]; b && n < SCAN_LIMIT; b = b->next, n++) {
    if (!b->n_pend || pend_done(a, b)) {
      *cross = false;
      return b;
    }
  }
  for (int qi = 0; qi < N_POOLS; qi++) {
    ca_pool *q = a->pools[qi];
    if (qi == pi || !q || !q->used) continue;
    n = 0;
    for (ca_block *b = q->tail[cls]; b && n < SCAN_LIMIT; b = b->prev, n++) {
      /* Oldest first: the most likely to be past its last use. Record at most one fence. */
      if (epoch_safe(a, q, b->epoch, n == 0) && (!b->n_pend || pend_done(a, b))) {
        *cross = true;
        return b;
      }
    }
  }
  return NULL;
}

/* Waits until every cached block is past its last use (fences on every stream, synchronized). */
static void settle_all(mx_caching_allocator *a) {
  for (int i = 1; i < N_POOLS; i++) {
    ca_pool *p = a->pools[i];
    if (!p || !p->used || !p->stream) continue;
    uint64_t cover = fence_record(a, p);
    if (cover) {
      ca_fence *f = &p->fences[(p->fence_head + p->n_fences - 1) % FENCE_RING];
      MX_IGNORE_STATUS(mx_event_synchronize(f->ev));
    } else {
      MX_IGNORE_STATUS(mx_stream_synchronize(p->stream));
    }
    p->safe_below = p->epoch;
    p->n_fences = 0;
  }
}

/* Returns every cached block to the device (after settle_all). */
static void release_cached(mx_caching_allocator *a) {
  for (int i = 0; i < N_POOLS; i++) {
    ca_pool *p = a->pools[i];
    if (!p) continue;
    for (unsigned c = 0; c < N_CLASSES; c++) {
      while (p->head[c]) {
        ca_block *b = p->head[c];
        bin_unlink(p, b);
        map_remove(a, b);
        mx_device_free(a->dev, b->ptr);
        a->st.device_frees++;
        a->st.bytes_cached -= b->size;
        a->st.blocks_cached--;
        free(b);
      }
    }
  }
}

/* --- public ----------------------------------------------------------------------------------- */

mx_status mx__caching_allocator_create(mx_device *dev, mx_caching_allocator **out, mx_error *err) {
  if (out) *out = NULL;
  if (!dev || !out)
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "mx__caching_allocator_create: NULL argument");
  mx_caching_allocator *a = calloc(1, sizeof *a);
  if (!a) goto oom;
  a->pools[0] = pool_new(NULL);
  if (!a->pools[0]) goto free_a;
  atomic_init(&a->lock, false);
  a->n_slots = 1;
  a->dev = dev;
  *out = a;
  return MX_OK;

free_a:
  free(a);
oom:
  return mx__fail_oom(err, "caching allocator");
}

void mx__caching_allocator_destroy(mx_caching_allocator *a) {
  if (!a) return;
  for (size_t i = 0; i < a->map_cap; i++) {
    ca_block *b = a->map[i];
    if (!b) continue;
    mx_device_free(a->dev, b->ptr);
    free(b);
  }
  for (int i = 0; i < N_POOLS; i++) {
    ca_pool *p = a->pools[i];
    if (!p) continue;
    for (int k = 0; k < FENCE_RING; k++) mx_event_destroy(p->events[k]);
    free(p);
  }
  free(a->map);
  free(a);
}

mx_device *mx__caching_allocator_device(const mx_caching_allocator *a) { return a ? a->dev : NULL; }

static mx_status pool_error(int pi, mx_error *err) {
  if (pi == -2)
    return mx__fail(err, MX_ERR_LIMIT,
                    "caching allocator: more than %d streams in use (forget streams "
                    "before destroying them)",
                    MX_CACHING_MAX_STREAMS);
  return mx__fail_oom(err, "caching allocator stream pool");
}

mx_status mx__caching_alloc(mx_caching_allocator *a, size_t size, mx_stream *stream, void **ptr,
                            mx_error *err) {
  if (!a || !ptr) return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "mx__caching_alloc: NULL argument");
  *ptr = NULL;
  if (size == 0) return MX_OK;
  unsigned cls;
  size_t csize;
  if (!size_class(size, &cls, &csize))
    return mx__fail(err, MX_ERR_LIMIT, "caching allocator: %zu bytes is too large", size);
  mx_status st = MX_OK;
  ca_lock(a);
  int pi = pool_index(a, stream);
  if (pi < 0) {
    st = pool_error(pi, err);
    goto unlock;
  }
  bool cross = false;
  ca_block *b = find_cached(a, pi, cls, &cross);
  if (b) {
    bin_unlink(a->pools[b->pool], b);
    a->st.bytes_cached -= b->size;
    a->st.blocks_cached--;
    a->st.hits++;
    if (cross) a->st.cross_stream_hits++;
  } else {
    b = calloc(1, sizeof *b);
    if (!b) {
      st = mx__fail_oom(err, "caching allocator block header");
      goto unlock;
    }
    st = mx_device_alloc(a->dev, csize, MX_CACHING_ALIGN, &b->ptr);
    if (st == MX_ERR_DEVICE_OOM && a->st.blocks_cached) {
      settle_all(a);
      release_cached(a);
      st = mx_device_alloc(a->dev, csize, MX_CACHING_ALIGN, &b->ptr);
    }
    if (st != MX_OK) {
      st = mx__fail(err, st, "caching allocator: device allocation of %zu bytes failed: %s", csize,
                    mx_device_last_error(a->dev));
      free(b);
      goto unlock;
    }
    b->size = csize;
    b->cls = (uint16_t)cls;
    if (!map_insert(a, b)) {
      mx_device_free(a->dev, b->ptr);
      free(b);
      st = mx__fail_oom(err, "caching allocator address map");
      goto unlock;
    }
    a->st.device_allocs++;
    a->st.misses++;
  }
  b->live = true;
  b->pool = (uint8_t)pi;
  b->use_mask = 0;
  b->n_pend = 0;
  b->requested = size;
  a->st.allocs++;
  a->st.bytes_in_use += b->size;
  a->st.bytes_requested += size;
  a->st.blocks_in_use++;
  if (a->st.bytes_in_use > a->st.peak_in_use) a->st.peak_in_use = a->st.bytes_in_use;
  *ptr = b->ptr;
unlock:
  ca_unlock(a);
  return st;
}

mx_status mx__caching_record_stream(mx_caching_allocator *a, void *ptr, mx_stream *stream, mx_error *err) {
  if (!a) return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "mx__caching_record_stream: NULL allocator");
  if (!ptr || !stream) return MX_OK;
  mx_status st = MX_OK;
  ca_lock(a);
  ca_block *b = map_find(a, ptr);
  int pi = pool_index(a, stream);
  if (!b || !b->live) {
    st = mx__fail(err, MX_ERR_INVALID_ARGUMENT, "mx__caching_record_stream: %p is not a live block", ptr);
  } else if (pi < 0) {
    st = pool_error(pi, err);
  } else {
    b->use_mask |= 1ull << pi;
  }
  ca_unlock(a);
  return st;
}

mx_status mx__caching_free(mx_caching_allocator *a, void *ptr, mx_stream *stream, mx_error *err) {
  if (!a) return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "mx__caching_free: NULL allocator");
  if (!ptr) return MX_OK;
  mx_status st = MX_OK;
  ca_lock(a);
  ca_block *b = map_find(a, ptr);
  if (!b || !b->live) {
    st = mx__fail(err, MX_ERR_INVALID_ARGUMENT, "mx__caching_free: %p is not a live block of this allocator",
                  ptr);
    goto unlock;
  }
  int pi = pool_index(a, stream);
  if (pi < 0) {
    /* No slot for the stream: wait for it, then cache the block as idle. */
    if (stream) MX_IGNORE_STATUS(mx_stream_synchronize(stream));
    pi = 0;
  }
  ca_pool *p = a->pools[pi];
  uint64_t extra = b->use_mask & ~(1ull << pi) & ~1ull;
  b->n_pend = 0;
  while (extra) {
    int qi = __builtin_ctzll(extra);
    extra &= extra - 1;
    ca_pool *q = a->pools[qi];
    uint64_t cover = fence_record(a, q);
    if (cover && b->n_pend < MAX_PEND) {
      b->pend_pool[b->n_pend] = (uint8_t)qi;
      b->pend_cover[b->n_pend] = cover;
      b->n_pend++;
    } else {
      MX_IGNORE_STATUS(mx_stream_synchronize(q->stream)); /* rare: more users than pending slots */
    }
  }
  b->live = false;
  b->pool = (uint8_t)pi;
  b->epoch = p->epoch;
  p->unfenced = true;
  bin_push(p, b);
  a->st.bytes_in_use -= b->size;
  a->st.bytes_requested -= b->requested;
  a->st.blocks_in_use--;
  a->st.bytes_cached += b->size;
  a->st.blocks_cached++;
unlock:
  ca_unlock(a);
  return st;
}

void mx__caching_fence(mx_caching_allocator *a, mx_stream *stream) {
  if (!a || !stream) return;
  ca_lock(a);
  int pi = pool_find(a, stream);
  if (pi > 0 && a->pools[pi]->unfenced) fence_record(a, a->pools[pi]);
  ca_unlock(a);
}

mx_status mx__caching_trim(mx_caching_allocator *a, mx_error *err) {
  if (!a) return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "mx__caching_trim: NULL allocator");
  ca_lock(a);
  if (a->st.blocks_cached) {
    settle_all(a);
    release_cached(a);
  }
  ca_unlock(a);
  return MX_OK;
}

void mx__caching_forget_stream(mx_caching_allocator *a, mx_stream *stream) {
  if (!a || !stream) return;
  ca_lock(a);
  int pi = pool_find(a, stream);
  if (pi < 0) goto unlock;
  ca_pool *p = a->pools[pi], *idle = a->pools[0];
  MX_IGNORE_STATUS(mx_stream_synchronize(stream));
  for (unsigned c = 0; c < N_CLASSES; c++) {
    while (p->head[c]) {
      ca_block *b = p->head[c];
      bin_unlink(p, b);
      b->pool = 0;
      b->epoch = 0;
      bin_push(idle, b);
    }
  }
  /* No block may keep referring to the slot: it can be reused by another stream. */
  for (size_t i = 0; i < a->map_cap; i++) {
    ca_block *b = a->map[i];
    if (!b) continue;
    b->use_mask &= ~(1ull << pi);
    if (b->live && b->pool == pi) b->pool = 0;
    uint8_t k = 0;
    for (uint8_t j = 0; j < b->n_pend; j++) {
      if (b->pend_pool[j] == pi) continue;
      b->pend_pool[k] = b->pend_pool[j];
      b->pend_cover[k] = b->pend_cover[j];
      k++;
    }
    b->n_pend = k;
  }
  p->stream = NULL;
  p->used = false;
  p->n_fences = 0;
  p->fence_head = 0;
  p->epoch = 1;
  p->safe_below = 1;
  if (a->last_stream == stream) {
    a->last_stream = NULL;
    a->last_pool = 0;
  }
unlock:
  ca_unlock(a);
}

void mx__caching_stats_get(mx_caching_allocator *a, mx_caching_stats *st) {
  if (!a || !st) return;
  ca_lock(a);
  *st = a->st;
  ca_unlock(a);
}

void mx__caching_reset_peak(mx_caching_allocator *a) {
  if (!a) return;
  ca_lock(a);
  a->st.peak_in_use = a->st.bytes_in_use;
  ca_unlock(a);
}
