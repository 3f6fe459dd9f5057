/* The HAL interface shared with the executors and kernels (module-shared, not public).
 *
 * Device work is a function pointer plus an argument block. Launching copies the block (small
 * blocks into the stream's preallocated queue slot, without allocation), so the caller may reuse
 * its buffer as soon as the call returns. The function runs on the device side (a worker
 * thread of the CPU device, the calling thread of the inline device) and returns MX_OK or a
 * failure status, which marks its stream failed until mx_stream_reset.
 *
 * HAL models are the "task sink": a chain of tasks over one or more internal streams, built
 * once (create -> add_task / add_event_record / add_event_wait -> build_end) and run with one
 * host call, mx__hal_model_execute, whatever the task count. A task's argument block contains
 * device addresses described by slots (alloc_id, offset): at byte arg_offset of the block sits a
 * `void *` that must equal base[alloc_id] + offset, where base is the model's base table.
 * mx__hal_model_update_bases records new bases on the host; the next execution's first
 * device-side step applies them. In MX_HAL_MODEL_PATCH mode that step rewrites exactly the
 * slots of the ids whose base changed (per-id slot lists, so its cost follows the changed
 * slots, not the model size); in MX_HAL_MODEL_INDIRECT mode every task writes its slots from
 * the base table just before it runs, with no patch step. */
#ifndef MIXRT_HAL_HAL_H
#define MIXRT_HAL_HAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mixrt/hal.h"

/* Version of the device interface (the backend table in hal/hal_impl.h). New entries are only
 * appended; a backend built for an older version leaves the newer ones NULL. Version 2 added
 * call_named (names in failure reports). */
#define MX_HAL_API_VERSION 2u

/* Device work: runs with a pointer to the HAL's copy of the argument block (16-byte aligned,
 * valid during the call; the function may modify it) and its size. Returning anything but
 * MX_OK fails the stream (sticky) and names this command or model task. */
typedef mx_status (*mx_hal_fn)(void *args, size_t size);

/* Argument blocks up to this size fit one queue slot. Larger blocks take several consecutive
 * slots and are still launched without allocation up to a quarter of the stream's queue
 * (ring_slots / 4 slots of 256 bytes: about 64 KiB by default); beyond that they are copied to
 * the heap (a slower path that may fail with MX_ERR_OUT_OF_MEMORY). */
#define MX_HAL_INLINE_ARGS 208u

/* Queues a kernel on stream s. args (size bytes, may be NULL when size is 0) is copied before
 * the call returns. Counts as a launch and as a kernel for fault injection. */
MX_MUST_USE mx_status mx__hal_launch(mx_stream *s, mx_hal_fn fn, const void *args, size_t size);

/* mx__hal_launch with a name for failure reports: when this command fails on the device (the
 * kernel's status or an injected fault) the stream's error reads "command N (kernel 'NAME')
 * failed: ...", and a stream that waits for it through an event repeats that message. `name`
 * is borrowed and must stay valid until the command has run (an op name owned by a plan, say);
 * NULL launches unnamed. */
MX_MUST_USE mx_status mx__hal_launch_named(mx_stream *s, mx_hal_fn fn, const void *args, size_t size,
                                           const char *name);

/* mx_device_copy_async with the name of what is copied for failure reports ("command N
 * (asynchronous copy of B bytes of 'NAME') failed: ..."); same lifetime rule as above. */
MX_MUST_USE mx_status mx__hal_copy_async_named(mx_stream *s, void *dst, const void *src, size_t n,
                                               mx_copy_kind kind, const char *name);

/* Queues a host function on stream s, run in stream order like a kernel (same copy rules).
 * Host callbacks are not counted by launch/kernel fault injection. */
MX_MUST_USE mx_status mx__hal_host_callback(mx_stream *s, mx_hal_fn fn, const void *args, size_t size);

/* Whether checking mode is on for the device (MIXRT_DEVICE_CHECK or options). */
bool mx__hal_device_checking(const mx_device *dev);

/* Whether the device's memory is host memory its kernels read in place (the CPU and inline
 * backends): host buffers registered with mx_device_register_buffer (a mapped .mxm's weights)
 * can then serve as device buffers without a copy. */
bool mx__hal_device_host_memory(const mx_device *dev);

/* A read-only copy of n host bytes on dev (64-byte aligned): a block shared with every holder of
 * equal bytes when shared (mx_device_shared_acquire), else the caller's own (mx_device_upload);
 * mx__hal_copy_release frees it the same way. Executors keep their pre-packed weights so. */
MX_MUST_USE mx_status mx__hal_copy_keep(mx_device *dev, bool shared, const void *host, size_t n, void **block);
void mx__hal_copy_release(mx_device *dev, bool shared, void *block);

/* --- HAL models ----------------------------------------------------------------------------- */

typedef struct mx_hal_model mx_hal_model;

typedef enum mx_hal_model_mode {
  MX_HAL_MODEL_PATCH = 0,   /* first device-side step patches the slots of changed ids */
  MX_HAL_MODEL_INDIRECT = 1 /* tasks resolve base[id] + offset when they run */
} mx_hal_model_mode;

typedef struct mx_hal_model_desc {
  uint32_t n_streams; /* internal streams (>= 1); stream 0 runs on the execute stream */
  uint32_t n_events;  /* internal events between internal streams */
  uint32_t n_ids;     /* size of the base table: alloc ids are 0 .. n_ids-1 */
  mx_hal_model_mode mode;
  const char *name; /* for failure reports ("model 'NAME' task 3 ..."; copied); NULL: none */
} mx_hal_model_desc;

/* One device address inside a task's argument block. */
typedef struct mx_hal_slot {
  uint32_t arg_offset; /* byte offset of a `void *` in the argument block (any alignment) */
  uint32_t alloc_id;   /* entry of the base table */
  uint64_t offset;     /* bytes added to the base */
} mx_hal_slot;

typedef struct mx_hal_task {
  mx_hal_fn fn;
  const void *args;         /* argument block, copied by add_task (borrowed during the call) */
  uint32_t args_size;       /* bytes */
  const mx_hal_slot *slots; /* copied by add_task (borrowed); may be NULL when n_slots is 0 */
  uint32_t n_slots;
} mx_hal_task;

typedef struct mx_hal_model_stats {
  uint32_t tasks;              /* tasks added */
  uint32_t slots;              /* slots over all tasks */
  uint32_t streams;            /* internal streams */
  uint64_t executions;         /* executions finished on the device */
  uint64_t patched_slots;      /* slots rewritten by patch steps, in total */
  uint64_t last_patched_slots; /* slots rewritten by the last finished execution */
  uint64_t refreshed_ids;      /* ids whose base changed, applied by patch steps, in total */
  uint64_t last_refreshed_ids; /* same, last finished execution */
  uint64_t last_patch_ns;      /* device time of the last first step (patch + checks), ns */
  uint64_t last_exec_ns;       /* device time of the last execution, first step to join, ns */
} mx_hal_model_stats;

/* Creates an empty model on dev. On success *out is owned by the caller
 * (mx__hal_model_destroy); on failure err (optional) says why. */
MX_MUST_USE mx_status mx__hal_model_create(mx_device *dev, const mx_hal_model_desc *desc, mx_hal_model **out,
                                           mx_error *err);

/* Appends a task to internal stream `stream`. The task's argument block and slots are copied.
 * If task_index is not NULL it receives the task's index (add order, from 0), which is how
 * failures and checking mode name tasks (with the model's name when it has one). */
MX_MUST_USE mx_status mx__hal_model_add_task(mx_hal_model *m, uint32_t stream, const mx_hal_task *task,
                                             uint32_t *task_index);
/* The same with a name for failure reports ("model 'M' task 3 'NAME' (internal stream 0) failed:
 * ..."); `name` is copied (NULL: none). */
MX_MUST_USE mx_status mx__hal_model_add_task_named(mx_hal_model *m, uint32_t stream, const mx_hal_task *task,
                                                   const char *name, uint32_t *task_index);

/* Appends "record internal event `event`" to internal stream `stream`. Each event is recorded
 * once per model. */
MX_MUST_USE mx_status mx__hal_model_add_event_record(mx_hal_model *m, uint32_t stream, uint32_t event);

/* Appends "wait for internal event `event`" to internal stream `stream`; the event must have
 * been recorded earlier in add order (so a model can never deadlock). */
MX_MUST_USE mx_status mx__hal_model_add_event_wait(mx_hal_model *m, uint32_t stream, uint32_t event);

/* Finishes building: builds the per-id slot lists and the device side (CPU: a private stream
 * per extra internal stream). No task can be added afterwards. */
MX_MUST_USE mx_status mx__hal_model_build_end(mx_hal_model *m);

/* Records new bases: base[ids[i]] = addrs[i] (arrays borrowed for the call). Allowed at any
 * time after create, also while executions are in flight: they apply from the next execute
 * on. Ids whose address does not change are ignored. */
MX_MUST_USE mx_status mx__hal_model_update_bases(mx_hal_model *m, const uint32_t *ids, void *const *addrs,
                                                 size_t n);

/* Runs the whole model once on stream s, after the work already queued on s and after the
 * model's previous execution (on any stream); later work on s runs after it. One host call,
 * no allocation. Task failures fail s (sticky) and name the task. */
MX_MUST_USE mx_status mx__hal_model_execute(mx_hal_model *m, mx_stream *s);

/* Fills *st (caller-owned). Per-execution figures are those of the last execution that
 * finished on the device; synchronize the stream first for exact values. */
void mx__hal_model_stats_get(const mx_hal_model *m, mx_hal_model_stats *st);

/* Message of the last failing host call on the model; "" if none. Owned by the model. */
const char *mx__hal_model_last_error(const mx_hal_model *m);

/* Waits for the model's executions in flight, then frees it. NULL is a no-op. */
void mx__hal_model_destroy(mx_hal_model *m);

#endif /* MIXRT_HAL_HAL_H */
