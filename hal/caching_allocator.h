/* The caching device allocator: stream-ordered device memory without device allocations in
 * steady state (module-shared; the dynamic executor and the V2 runtime allocate every device
 * buffer through it).
 *
 * Requests are rounded up to size classes (256 bytes, then four classes per power of two, so at
 * most 25% is wasted) and served from per-class bins. A block is handed out for use on a
 * stream and given back with mx__caching_free on the stream of its last use, without waiting:
 * the free is stream-ordered. The block then sits in that stream's bins:
 *   - the same stream may reuse it at once (its later work runs after the last use);
 *   - another stream may take it only once an event recorded on the freeing stream after the
 *     free has been reached (the allocator records such "fences" itself, lazily, and only
 *     queries them: it never waits on the host while allocating);
 *   - a block also used on other streams (mx__caching_record_stream) is reusable anywhere only
 *     after fences recorded on each of those streams at its free are reached.
 * Only when no cached block of the class is safe does the allocator allocate from the device
 * (a miss). If that fails, it waits for the streams holding cached blocks, releases every
 * cached block and tries once more.
 *
 * Streams are identified by pointer; NULL stands for "no device work pending" (memory used
 * only by synchronous calls): blocks freed with NULL are reusable by any stream at once. At
 * most MX_CACHING_MAX_STREAMS distinct streams may be in use at a time; before destroying a
 * stream the allocator has seen, call mx__caching_forget_stream.
 *
 * Thread safety: every function may be called from any thread (one internal lock, held for a
 * few dozen instructions on the usual paths). */
#ifndef MIXRT_HAL_CACHING_ALLOCATOR_H
#define MIXRT_HAL_CACHING_ALLOCATOR_H

#include <stddef.h>
#include <stdint.h>

#include "mixrt/hal.h"
#include "mixrt/status.h"

/* Distinct non-NULL streams the allocator tracks at once. */
#define MX_CACHING_MAX_STREAMS 63

/* Alignment of every block, in bytes. */
#define MX_CACHING_ALIGN 64u

typedef struct mx_caching_allocator mx_caching_allocator;

typedef struct mx_caching_stats {
  uint64_t bytes_in_use;      /* class bytes of blocks handed out and not freed */
  uint64_t bytes_requested;   /* bytes the live allocations asked for (<= bytes_in_use) */
  uint64_t bytes_cached;      /* class bytes of freed blocks kept for reuse */
  uint64_t peak_in_use;       /* maximum of bytes_in_use since creation or the last reset */
  uint64_t blocks_in_use;     /* live allocations */
  uint64_t blocks_cached;     /* freed blocks kept for reuse */
  uint64_t allocs;            /* successful mx__caching_alloc calls with a non-zero size */
  uint64_t hits;              /* of those, served from the cache */
  uint64_t cross_stream_hits; /* hits that took a block last used on another stream */
  uint64_t misses;            /* served by a device allocation */
  uint64_t device_allocs;     /* successful mx_device_alloc calls */
  uint64_t device_frees;      /* blocks returned to the device (trim, OOM recovery, destroy) */
  uint64_t fences;            /* events recorded to prove streams past a block's last use */
} mx_caching_stats;

/* Creates an allocator over dev (borrowed: it must outlive the allocator). On success *out is
 * owned by the caller (mx__caching_allocator_destroy); on failure *out is NULL and err
 * (optional) says why. */
MX_MUST_USE mx_status mx__caching_allocator_create(mx_device *dev, mx_caching_allocator **out, mx_error *err);

/* Returns every block (live and cached) to the device and frees the allocator. Work still
 * queued that uses its memory must have finished (synchronize the streams first). NULL is a
 * no-op. */
void mx__caching_allocator_destroy(mx_caching_allocator *a);

/* The device the allocator serves (borrowed). */
mx_device *mx__caching_allocator_device(const mx_caching_allocator *a);

/* Allocates `size` bytes (MX_CACHING_ALIGN-aligned) for use on `stream` (NULL: synchronous
 * use). The memory is uninitialised and owned by the caller until mx__caching_free. A size of 0
 * gives *ptr = NULL and MX_OK. Fails with MX_ERR_DEVICE_OOM (message in err, optional) when
 * the device has no room even after releasing the cache, MX_ERR_LIMIT when more than
 * MX_CACHING_MAX_STREAMS streams are in use. */
MX_MUST_USE mx_status mx__caching_alloc(mx_caching_allocator *a, size_t size, mx_stream *stream, void **ptr,
                                        mx_error *err);

/* Declares that work queued on `stream` (so far or later, until the free) also uses ptr, a live
 * block: its free will not let the block be reused before that stream is past the free point.
 * Not needed for the stream passed to mx__caching_free. ptr NULL is a no-op. */
MX_MUST_USE mx_status mx__caching_record_stream(mx_caching_allocator *a, void *ptr, mx_stream *stream,
                                                mx_error *err);

/* Gives ptr back, its last use being the work queued on `stream` so far (NULL: no pending
 * use). Never waits. ptr NULL is a no-op; a pointer that is not a live block of this allocator
 * gives MX_ERR_INVALID_ARGUMENT. */
mx_status mx__caching_free(mx_caching_allocator *a, void *ptr, mx_stream *stream, mx_error *err);

/* Records a fence on `stream` covering the blocks freed there so far (nothing when there are
 * none since the last fence). Never waits. Call it at natural boundaries (the end of a step):
 * blocks freed on the stream then become reusable on other streams as soon as the stream gets
 * there, instead of only after a fence recorded lazily behind whatever work was queued later.
 * NULL and unknown streams are a no-op. */
void mx__caching_fence(mx_caching_allocator *a, mx_stream *stream);

/* Returns every cached block to the device, after waiting until the streams that last used
 * them are past those uses. Live blocks are untouched. */
MX_MUST_USE mx_status mx__caching_trim(mx_caching_allocator *a, mx_error *err);

/* Forgets a stream before it is destroyed: waits for its queued work and makes its cached
 * blocks available to every stream. Unknown streams and NULL are a no-op. */
void mx__caching_forget_stream(mx_caching_allocator *a, mx_stream *stream);

/* Fills *st (caller-owned). */
void mx__caching_stats_get(mx_caching_allocator *a, mx_caching_stats *st);

/* Sets peak_in_use to the current bytes_in_use. */
void mx__caching_reset_peak(mx_caching_allocator *a);

/* The class size a request of `size` bytes occupies (0 for 0). */
size_t mx__caching_class_size(size_t size);

#endif /* MIXRT_HAL_CACHING_ALLOCATOR_H */
