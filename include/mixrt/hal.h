/* mixrt devices: creation options, device memory, streams and events.
 *
 * A device runs work asynchronously on streams (in-order queues). Memory allocated from a
 * device is "device memory": on the CPU device it is host RAM, but only copies and kernels may
 * touch it, so code written against this header keeps working on a real accelerator. Events
 * mark a point in a stream; another stream can wait for that point without blocking the host.
 *
 * Errors. Host calls return an mx_status at once; a call that fails leaves a message that the
 * same thread reads with mx_device_last_error. Work that fails on the device (a kernel, an asynchronous copy, an
 * injected fault) marks its stream failed: the error is sticky, every later command on that
 * stream is skipped, mx_stream_synchronize / mx_stream_query report it (mx_stream_get_error
 * names the failing command), and mx_stream_reset clears it.
 *
 * Thread safety: all calls may be made from any host thread. Submissions to one stream from
 * several threads are serialized (their relative order is the order the calls acquire the
 * stream). Destroying an object while another thread still uses it is a programmer error.
 *
 * Environment (read at mx_device_create when the options leave the setting to it):
 *   MIXRT_DEVICE_CHECK=1   checking mode: every model task argument address and every copy
 *                          range is validated against the live allocations.
 *   MIXRT_FAULT=POINT:N[,POINT:N...]  fault injection, POINT one of alloc, copy, launch, kernel:
 *                          the Nth operation of that kind fails (see docs/hal.md). */
#ifndef MIXRT_HAL_H
#define MIXRT_HAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mixrt/api.h"
#include "mixrt/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mx_device mx_device; /* a device: memory, streams, events */
typedef struct mx_stream mx_stream; /* an in-order queue of device work */
typedef struct mx_event mx_event;   /* a point in a stream, waitable from other streams */

typedef enum mx_device_kind {
  MX_DEVICE_CPU = 0,   /* each stream is served by a worker thread */
  MX_DEVICE_INLINE = 1 /* work runs synchronously in the calling thread (same semantics) */
} mx_device_kind;

/* How CPU-device worker threads are bound to processors (hwloc). */
typedef enum mx_pinning {
  MX_PIN_AUTO = 0,    /* chosen from the topology: scatter (compact with several NUMA nodes;
                         none on a single processing unit), starting away from the processing
                         unit of the thread that creates the device */
  MX_PIN_NONE = 1,    /* no binding; the OS schedules workers */
  MX_PIN_COMPACT = 2, /* worker i on processing unit i (neighbours share caches) */
  MX_PIN_SCATTER = 3  /* workers spread over packages and cores before reusing SMT siblings */
} mx_pinning;

typedef enum mx_device_check {
  MX_CHECK_FROM_ENV = 0, /* MIXRT_DEVICE_CHECK decides (unset or 0: off, 1: on) */
  MX_CHECK_OFF = 1,
  MX_CHECK_ON = 2
} mx_device_check;

/* Fault-injection points. Counting starts at 1 for the first operation of the kind. */
typedef enum mx_fault_point {
  MX_FAULT_ALLOC = 0,  /* mx_device_alloc: returns MX_ERR_DEVICE_OOM */
  MX_FAULT_COPY = 1,   /* copies and memsets: a synchronous one returns MX_ERR_DEVICE, an
                          asynchronous one fails its stream with MX_ERR_DEVICE */
  MX_FAULT_LAUNCH = 2, /* kernel launches and model executes: the call returns MX_ERR_DEVICE,
                          nothing runs, and the stream is failed at that point of its order */
  MX_FAULT_KERNEL = 3, /* kernel runs on the device (also tasks inside models): the kernel is
                          not run and its stream fails with MX_ERR_KERNEL */
  MX_FAULT_POINT_COUNT
} mx_fault_point;

/* 2 added skip_kernels, 3 huge_pages; version 1 and 2 records (without them) are still
 * accepted and get the defaults of the fields they lack. */
#define MX_DEVICE_OPTIONS_VERSION 3u

typedef struct mx_device_options {
  uint32_t version; /* MX_DEVICE_OPTIONS_VERSION; set by mx_device_options_init */
  mx_device_kind kind;
  uint32_t max_workers; /* CPU device: cap on worker threads; 0 = one worker per stream.
                           With a cap, each new stream joins the least loaded worker. */
  mx_pinning pinning;
  uint64_t memory_limit; /* bytes of device memory that may be allocated at once; 0 = no
                            limit. Exceeding it gives MX_ERR_DEVICE_OOM. On the CPU and inline
                            devices, weights read where they already are (an .mxm file's
                            mapping, a loaded graph's large constants) take no allocation and
                            do not count. */
  mx_device_check check;
  bool fault_from_env;                      /* when every fault_nth is 0, read MIXRT_FAULT (default true) */
  uint64_t fault_nth[MX_FAULT_POINT_COUNT]; /* 0 = off; N = the Nth operation fails (once) */
  uint32_t ring_slots; /* CPU device: commands each stream queue holds (power of two >= 4);
                          0 = 1024. A full queue blocks the submitting thread. */
  int64_t spin_ns;     /* how long an idle worker or a waiting host thread spins before it
                          parks, in ns; < 0 = default (20000); 0 = park at once */
  bool skip_kernels;   /* benchmarking only: kernel launches and model tasks do everything but
                          run the kernel (argument copies, stream order, events, statistics);
                          copies, memsets and host callbacks still run. Results are garbage
                          (and host code that reads them back may fail): it measures what a
                          runtime spends around the kernels. Default false. (Version 2.) */
  bool huge_pages;     /* CPU devices: allocations of at least MX_DEVICE_HUGE_PAGE_MIN bytes
                          are aligned to and rounded up to MX_DEVICE_HUGE_PAGE bytes and
                          advised to the kernel as transparent huge pages (Linux
                          madvise(MADV_HUGEPAGE)), so reading a large weight block walks one
                          page table entry per 2 MiB instead of per 4 KiB. The host may use up
                          to 2 MiB more per such allocation than requested (bytes_in_use and the
                          memory limit count the requested size). Advice only: where the
                          system's transparent huge pages are off, nothing changes.
                          Default true. (Version 3.) */
} mx_device_options;

/* Huge-page backing (mx_device_options.huge_pages): the page size, and the smallest
 * allocation that gets it. Rounding wastes a quarter of a page at that size, and at most one
 * page per block above it (nearly all of one for a block just over a page). */
#define MX_DEVICE_HUGE_PAGE     ((size_t)2 << 20)
#define MX_DEVICE_HUGE_PAGE_MIN ((size_t)3 << 19)

/* Fills *o with the defaults: CPU device, one worker per stream, automatic pinning, no memory
 * limit, checking and faults from the environment, huge pages for large allocations. */
MX_API void mx_device_options_init(mx_device_options *o);

/* Creates a device. `o` may be NULL (defaults); it is only read during the call. On success
 * *out receives a device the caller owns (mx_device_destroy). On failure *out is NULL and
 * err (optional) says why: a bad option, or a malformed MIXRT_FAULT / MIXRT_DEVICE_CHECK. */
MX_API MX_MUST_USE mx_status mx_device_create(const mx_device_options *o, mx_device **out, mx_error *err);

/* Destroys a device and everything still created from it: waits for the work queued on its
 * streams, then frees its models, streams, events and device allocations. Handles to them
 * become invalid. NULL is a no-op. */
MX_API void mx_device_destroy(mx_device *dev);

/* Message of the last host call that failed on this device in the calling thread; "" if none
 * (messages are kept per thread, as errno is: threads that share a device never see each
 * other's). The string belongs to the thread and is valid until its next failing call. */
MX_API const char *mx_device_last_error(const mx_device *dev);

typedef struct mx_device_info {
  mx_device_kind kind;
  mx_pinning pinning;                       /* the resolved policy (never MX_PIN_AUTO) */
  uint32_t processing_units;                /* hwloc PUs the process may run on */
  uint32_t max_workers;                     /* as created (0 = one worker per stream) */
  uint32_t workers;                         /* worker threads running now */
  uint32_t pinned_workers;                  /* workers whose binding succeeded (since creation) */
  uint32_t ring_slots;                      /* commands per stream queue */
  int64_t spin_ns;                          /* resolved spin time before parking */
  bool check;                               /* checking mode is on */
  uint64_t fault_nth[MX_FAULT_POINT_COUNT]; /* resolved fault-injection settings */
} mx_device_info;

/* Fills *info (caller-owned): `record_size` bytes, the caller's sizeof(mx_device_info), its
 * own fields first and zeros past them (docs/abi.md). */
MX_API void mx_device_get_info_sized(const mx_device *dev, mx_device_info *info, size_t record_size);
/* mx_device_get_info_sized with the size of the record this header declares. */
static inline void mx_device_get_info(const mx_device *dev, mx_device_info *info) {
  mx_device_get_info_sized(dev, info, sizeof(mx_device_info));
}

typedef struct mx_device_memory_stats {
  uint64_t bytes_in_use;  /* bytes of live allocations (registered buffers not counted) */
  uint64_t peak_bytes;    /* maximum of bytes_in_use since creation or the last peak reset */
  uint64_t limit_bytes;   /* memory_limit of the device (0 = none) */
  uint64_t allocations;   /* successful mx_device_alloc calls since creation */
  uint64_t frees;         /* successful frees (synchronous and stream-ordered) since creation */
  uint64_t live;          /* allocations not yet freed */
  uint64_t shared_blocks; /* live shared blocks (mx_device_shared_acquire), counted in live too */
  uint64_t shared_bytes;  /* their bytes, counted once in bytes_in_use however many hold them */
  uint64_t shared_hits;   /* acquisitions since creation served by an existing block: the
                             allocations and uploads sharing saved */
} mx_device_memory_stats;

/* Fills *st (caller-owned): `record_size` bytes, the caller's sizeof(mx_device_memory_stats),
 * its own fields first and zeros past them (docs/abi.md). */
MX_API void mx_device_memory_stats_get_sized(const mx_device *dev, mx_device_memory_stats *st,
                                             size_t record_size);
/* mx_device_memory_stats_get_sized with the size of the record this header declares. */
static inline void mx_device_memory_stats_get(const mx_device *dev, mx_device_memory_stats *st) {
  mx_device_memory_stats_get_sized(dev, st, sizeof(mx_device_memory_stats));
}
/* Sets peak_bytes to the current bytes_in_use. */
MX_API void mx_device_memory_reset_peak(mx_device *dev);

/* --- device memory ---------------------------------------------------------------------------- */

/* Allocates `size` bytes of device memory aligned to `align` (a power of two; 0 = 64). The
 * memory is uninitialised and owned by the caller until mx_device_free. Fails with
 * MX_ERR_DEVICE_OOM when the memory limit would be exceeded, when `size` is more than the
 * device's memory (on the CPU devices: the host's physical memory) or when the host is out of
 * memory. */
MX_API MX_MUST_USE mx_status mx_device_alloc(mx_device *dev, size_t size, size_t align, void **ptr);

/* mx_device_alloc of n bytes, then mx_device_copy of the n bytes at host address src into them:
 * a block holding a copy of src. On failure nothing stays allocated and the device's last error
 * says which step failed. */
MX_API MX_MUST_USE mx_status mx_device_upload(mx_device *dev, const void *src, size_t n, size_t align,
                                              void **ptr);

/* Frees device memory from mx_device_alloc at once. Work still queued that uses it is the
 * caller's responsibility (use mx_device_free_async to free in stream order). NULL is a no-op.
 * A pointer that is not a live allocation gives MX_ERR_INVALID_ARGUMENT. */
MX_API mx_status mx_device_free(mx_device *dev, void *ptr);

/* Frees device memory when the stream reaches this point (after the work queued before it). */
MX_API mx_status mx_device_free_async(mx_stream *s, void *ptr);

/* Declares caller-owned memory [ptr, ptr + size) as usable device memory (for example buffers
 * an adapter allocated itself). The device never frees it; it counts as a live allocation for
 * checking mode, not for statistics or the memory limit. */
MX_API MX_MUST_USE mx_status mx_device_register_buffer(mx_device *dev, void *ptr, size_t size);
/* Removes a registration made by mx_device_register_buffer. */
MX_API MX_MUST_USE mx_status mx_device_unregister_buffer(mx_device *dev, void *ptr);

typedef enum mx_copy_kind {
  MX_COPY_H2D = 0, /* host memory to device memory */
  MX_COPY_D2H = 1, /* device memory to host memory */
  MX_COPY_D2D = 2  /* device memory to device memory */
} mx_copy_kind;

/* Copies n bytes now, in the calling thread, without ordering against any stream. The buffers
 * are borrowed for the call. In checking mode the device side(s) must lie inside one live
 * allocation, else MX_ERR_INVALID_ARGUMENT. */
MX_API MX_MUST_USE mx_status mx_device_copy(mx_device *dev, void *dst, const void *src, size_t n,
                                            mx_copy_kind kind);

/* Queues a copy of n bytes on stream s. Both buffers must stay valid until the stream reaches
 * the copy (host buffers included: nothing is staged). */
MX_API MX_MUST_USE mx_status mx_device_copy_async(mx_stream *s, void *dst, const void *src, size_t n,
                                                  mx_copy_kind kind);

/* --- shared read-only blocks ------------------------------------------------------------------- */

/* Device memory holding the n bytes at host address src, shared by every holder of equal bytes
 * on this device: weights of several sessions of one model take one copy. The first call
 * allocates a block (as mx_device_alloc with `align`) and uploads the bytes; a later call whose
 * bytes are equal (compared in full, not only by hash) and whose alignment the block meets gets
 * the same block, and the block counts one more holder. Holders only read the block. Each
 * successful call is balanced by one mx_device_shared_release; mx_device_free and
 * mx_device_free_async refuse a shared block. Fails like mx_device_alloc and mx_device_copy
 * (nothing held then). */
MX_API MX_MUST_USE mx_status mx_device_shared_acquire(mx_device *dev, const void *src, size_t n, size_t align,
                                                      void **ptr);

/* Drops one holder of a block from mx_device_shared_acquire; the last one frees it at once (work
 * still queued that reads it is the caller's responsibility). NULL is a no-op; a pointer that is
 * not a shared block gives MX_ERR_INVALID_ARGUMENT. */
MX_API mx_status mx_device_shared_release(mx_device *dev, void *ptr);

/* Sets n bytes of device memory to (unsigned char)value, now / in stream order. */
MX_API MX_MUST_USE mx_status mx_device_memset(mx_device *dev, void *dst, int value, size_t n);
MX_API MX_MUST_USE mx_status mx_device_memset_async(mx_stream *s, void *dst, int value, size_t n);

/* --- streams -------------------------------------------------------------------------------- */

/* Creates a stream. A higher priority is served first when streams share a worker
 * (max_workers); a negative priority also lowers the OS priority of a dedicated worker. On
 * success *out is owned by the caller (mx_stream_destroy). */
MX_API MX_MUST_USE mx_status mx_stream_create(mx_device *dev, int priority, mx_stream **out);

/* Waits until every command queued on the stream has finished (failed streams skip their
 * commands, so this never waits on failed work), then destroys it. Events recorded on it stay
 * valid (they count as reached). NULL is a no-op. */
MX_API void mx_stream_destroy(mx_stream *s);

/* Waits for every command queued so far; returns the stream's sticky error or MX_OK. */
MX_API MX_MUST_USE mx_status mx_stream_synchronize(mx_stream *s);

/* Non-blocking: the sticky error if the stream failed, else MX_ERR_BUSY while commands are
 * pending, else MX_OK. */
MX_API MX_MUST_USE mx_status mx_stream_query(mx_stream *s);

/* Waits for the queued commands, then clears the sticky error so the stream runs work again.
 * Returns the error that was cleared (MX_OK if there was none). */
MX_API mx_status mx_stream_reset(mx_stream *s);

typedef struct mx_stream_error {
  mx_status status;     /* MX_OK when the stream is healthy */
  uint64_t command;     /* 1-based number of the failing command among the stream's
                           submissions since creation; 0 when healthy */
  int64_t model_task;   /* failing task of a model (add order), -1 when not in a model */
  int32_t model_stream; /* its internal stream, -1 when not in a model */
  char message[MX_ERROR_MESSAGE_MAX];
} mx_stream_error;

/* Copies the sticky error of s into *out (caller-owned): `record_size` bytes, the caller's
 * sizeof(mx_stream_error), the library's fields first and zeros past them (docs/abi.md).
 * Returns the stream's status. */
MX_API mx_status mx_stream_get_error_sized(mx_stream *s, mx_stream_error *out, size_t record_size);
/* mx_stream_get_error_sized with the size of the record this header declares. */
static inline mx_status mx_stream_get_error(mx_stream *s, mx_stream_error *out) {
  return mx_stream_get_error_sized(s, out, sizeof(mx_stream_error));
}

/* The device a stream belongs to (borrowed). */
MX_API mx_device *mx_stream_device(const mx_stream *s);

/* --- events --------------------------------------------------------------------------------- */

/* Creates an event (owned by the caller, mx_event_destroy). An event never recorded counts as
 * reached. */
MX_API MX_MUST_USE mx_status mx_event_create(mx_device *dev, mx_event **out);
/* NULL is a no-op. Waits already queued on streams are unaffected. */
MX_API void mx_event_destroy(mx_event *e);

/* Marks the current end of stream s: the event is reached when everything queued on s so far
 * has finished. Re-recording moves the event; waits queued earlier keep the old point. */
MX_API MX_MUST_USE mx_status mx_event_record(mx_event *e, mx_stream *s);

/* Makes stream s wait (on the device, the host does not block) until event e is reached as
 * recorded now. If the recording stream failed before the event's point, s fails too. */
MX_API MX_MUST_USE mx_status mx_stream_wait_event(mx_stream *s, mx_event *e);

/* Non-blocking: MX_OK when reached, MX_ERR_BUSY when not yet, or the error of the recording
 * stream if it failed before the event's point. */
MX_API MX_MUST_USE mx_status mx_event_query(mx_event *e);

/* Waits until the event is reached; returns like mx_event_query. */
MX_API MX_MUST_USE mx_status mx_event_synchronize(mx_event *e);

#ifdef __cplusplus
}
#endif
#endif /* MIXRT_HAL_H */
