/* The static executor (module-shared): compiling a known-shape graph into a static plan, loading
 * a plan onto a device as a sunk HAL model, and running it with one call per step.
 *
 * Compile (mx__static_compile) turns an inferred graph whose every value has a concrete shape
 * into an mx_static_plan: a host-side, serializable description without device pointers. It
 * holds the schedule (tasks in execution order), the internal stream of every task and the
 * events between streams, the feature-map (FM) memory plan, the weights, and one task per op
 * (kernel identity, parsed params, tensor dtypes and dims, argument slots as (alloc_id, offset)
 * and the task's workspace slice).
 *
 * Every address a task uses belongs to one entry of the allocation table (docs/static.md):
 *   alloc id 0          WEIGHT     constants, uploaded once at create
 *   alloc id 1          FM         the planned feature-map arena (workspaces inside it): owned
 *                                  by the model, or supplied per step (update_workspaces)
 *   alloc id 2 + i      INPUT i    the caller's buffer of graph input i (zero copy)
 *   alloc id 2 + n_in + j  OUTPUT j   the caller's buffer of graph output j (zero copy)
 *
 * Load (mx__static_model_create, the V2 runtime's StaticModelCreate) uploads the weights,
 * allocates (or waits for) the FM arena, sinks every task into one HAL model and keeps only what
 * running needs. A step is then mx__static_model_update_args (+ update_workspaces when the
 * caller owns the FM) and mx__static_model_execute: address refresh touches only the allocation
 * entries whose base moved.
 *
 * .mxm files (mx__mxm_save / mx__mxm_load) store plans; see docs/static.md for the layout.
 *
 * Thread safety: a plan is immutable after compile/load and may be read from several threads.
 * One model must be driven by one thread at a time. */
#ifndef MIXRT_STATIC_EXEC_STATIC_EXEC_H
#define MIXRT_STATIC_EXEC_STATIC_EXEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hal/hal.h"
#include "mixrt/graph.h"
#include "mixrt/status.h"
#include "mixrt/tensor.h"

typedef struct mx_static_plan mx_static_plan;   /* compiled plan (host only, immutable) */
typedef struct mx_static_model mx_static_model; /* a plan loaded onto a device */

/* Most internal streams a plan may use. */
#define MX_STATIC_MAX_STREAMS 64u

/* Allocation-table entry kinds (design §5). */
typedef enum mx_static_alloc_kind {
  MX_STATIC_WEIGHT = 0, /* constants; fixed after create */
  MX_STATIC_FM = 1,     /* feature-map arena (workspaces live inside it) */
  MX_STATIC_INPUT = 2,  /* a caller's input buffer */
  MX_STATIC_OUTPUT = 3  /* a caller's output buffer */
} mx_static_alloc_kind;

/* "WEIGHT", "FM", "INPUT", "OUTPUT". */
const char *mx__static_alloc_kind_name(mx_static_alloc_kind k);

/* --- compile ---------------------------------------------------------------------------------- */

#define MX_STATIC_OPTIONS_VERSION 1u

typedef struct mx_static_options {
  uint32_t version;              /* MX_STATIC_OPTIONS_VERSION (set by mx__static_options_init) */
  uint32_t max_streams;          /* internal streams the plan may use, 1..MX_STATIC_MAX_STREAMS
                                    (0 = 1). Independent branches go to different streams. */
  const uint32_t *frozen_inputs; /* graph input indices whose address never changes after the
                                    first step (borrowed during the call); e.g. the positions a
                                    partition call lists in its "const_inputs" attribute */
  size_t n_frozen;
  bool fm_external;       /* the caller supplies the FM arena per step
                             (mx__static_model_update_workspaces) instead of the model
                             owning one */
  mx_hal_model_mode mode; /* HAL model mode: MX_HAL_MODEL_PATCH (default) or INDIRECT */
  const char *name;       /* plan name (copied); NULL = the graph's name */
} mx_static_options;

/* Fills *o with the defaults: one stream, nothing frozen, model-owned FM, PATCH mode. */
void mx__static_options_init(mx_static_options *o);

/* Compiles g. g must be inferred (mx_graph_infer, usually after mx_graph_optimize): every value
 * a node reads or writes has a known dtype and concrete shape and no op is data-dependent;
 * otherwise the call fails naming the value or node. g is only read (op params are parsed and
 * cached on it if they were not yet) and is not referenced by the plan. opt may be NULL
 * (defaults). On success *out receives a plan the caller owns (mx__static_plan_destroy); on
 * failure *out is NULL and err (may be NULL) says why. */
MX_MUST_USE mx_status mx__static_compile(mx_graph *g, const mx_static_options *opt, mx_static_plan **out,
                                         mx_error *err);

/* Frees a plan. Models created from it do not reference it. NULL is a no-op. */
void mx__static_plan_destroy(mx_static_plan *p);

/* Memory and task figures of a plan. */
typedef struct mx_static_report {
  uint64_t fm_bytes;        /* FM arena size (bytes, multiple of 64) */
  uint64_t lower_bound;     /* largest total of simultaneously live FM bytes (a lower bound on
                               any arena for this schedule) */
  uint64_t no_reuse;        /* total of every FM buffer (what an arena without reuse needs) */
  uint64_t weight_bytes;    /* weight region, 64-byte aligned entries */
  uint64_t workspace_bytes; /* total of the kernels' workspace slices (inside FM) */
  uint32_t tasks;           /* tasks in the schedule */
  uint32_t kernel_tasks;    /* of which kernels */
  uint32_t copy_tasks;      /* of which explicit copies (outputs that are inputs, constants or
                               repeated values) */
  uint32_t streams;         /* internal streams used */
  uint32_t events;          /* internal events (each recorded once) */
  uint32_t cross_edges;     /* data edges between tasks of different streams */
  uint32_t waits;           /* event waits kept after removing the redundant ones */
  uint32_t buffers;         /* FM buffers planned (workspaces included) */
  uint32_t in_place;        /* elementwise outputs placed over a dying input */
  uint32_t aliases;         /* alias ops (Reshape, Squeeze, ...) run as no task */
  uint32_t inputs, outputs; /* graph inputs / outputs */
  const char *placement;    /* the placement order that gave the smallest arena (static text) */
} mx_static_report;

/* Fills *r (caller-owned). */
void mx__static_plan_report(const mx_static_plan *p, mx_static_report *r);

/* Prints the memory-plan report (tasks, streams, events, FM arena against its lower bound and
 * the no-reuse total, weights, inputs and outputs) as text. */
void mx__static_plan_print_report(const mx_static_plan *p, FILE *out);

/* The plan's name (borrowed from p). */
const char *mx__static_plan_name(const mx_static_plan *p);

/* One graph input or output of a plan or model. */
typedef struct mx_static_io {
  const char *name; /* borrowed from the plan / model */
  mx_dtype dtype;
  int32_t rank;
  int64_t dims[MX_MAX_RANK];
  uint64_t nbytes;
  bool frozen; /* inputs: declared frozen */
} mx_static_io;

size_t mx__static_plan_input_count(const mx_static_plan *p);
size_t mx__static_plan_output_count(const mx_static_plan *p);
/* False when index is out of range. */
bool mx__static_plan_input(const mx_static_plan *p, size_t index, mx_static_io *out);
bool mx__static_plan_output(const mx_static_plan *p, size_t index, mx_static_io *out);

/* Read access to the schedule and the memory plan (for tests, dumps and tools). */
typedef struct mx_static_task_info {
  const char *name;      /* node name, or "copy:<output>" (borrowed) */
  const char *op;        /* op type, or "Copy" (borrowed) */
  bool copy;             /* an explicit copy task */
  uint32_t stream;       /* internal stream */
  const uint32_t *waits; /* events waited on before the task (borrowed) */
  uint32_t n_waits;
  const uint32_t *records; /* events recorded right after the task (borrowed) */
  uint32_t n_records;
} mx_static_task_info;

typedef struct mx_static_buffer_info {
  uint64_t offset;       /* in the FM arena (bytes) */
  uint64_t size;         /* bytes, multiple of 64 */
  const uint32_t *users; /* tasks that read or write it, ascending (borrowed) */
  uint32_t n_users;
  bool workspace;   /* a kernel's workspace slice (one user) */
  const char *name; /* the value it holds first, or the task of a workspace */
} mx_static_buffer_info;

size_t mx__static_plan_task_count(const mx_static_plan *p);
bool mx__static_plan_task(const mx_static_plan *p, size_t index, mx_static_task_info *out);
size_t mx__static_plan_buffer_count(const mx_static_plan *p);
bool mx__static_plan_buffer(const mx_static_plan *p, size_t index, mx_static_buffer_info *out);

/* --- load and run ----------------------------------------------------------------------------- */

typedef enum mx_static_fm_mode {
  MX_STATIC_FM_FROM_PLAN = 0, /* as compiled */
  MX_STATIC_FM_OWNED = 1,     /* the model allocates the arena at create */
  MX_STATIC_FM_EXTERNAL = 2   /* the caller supplies it per step (update_workspaces) */
} mx_static_fm_mode;

typedef enum mx_static_mode {
  MX_STATIC_MODE_FROM_PLAN = 0,
  MX_STATIC_MODE_PATCH = 1,   /* HAL PATCH mode */
  MX_STATIC_MODE_INDIRECT = 2 /* HAL INDIRECT mode */
} mx_static_mode;

typedef struct mx_static_load_options {
  mx_static_fm_mode fm;
  mx_static_mode mode;
  const uint32_t *frozen_inputs; /* more frozen inputs, added to the plan's (borrowed) */
  size_t n_frozen;
  bool share_weights; /* the weights as a shared block of the device
                                    (mx_device_shared_acquire): models of equal weights on one
                                    device hold one copy (default false: a copy of its own) */
} mx_static_load_options;

/* Fills *o with "as compiled" settings and no extra frozen input. */
void mx__static_load_options_init(mx_static_load_options *o);

/* StaticModelCreate. Uploads the plan's weights to dev, allocates the FM arena unless it is
 * external, builds the HAL model (one task per plan task, internal streams and events) and
 * frees everything running does not need. plan is only read during the call: the model does
 * not reference it afterwards. opt may be NULL. On success *out receives the model
 * (mx__static_model_destroy); on failure *out is NULL and err (may be NULL) says why. dev must
 * outlive the model. */
MX_MUST_USE mx_status mx__static_model_create(mx_device *dev, const mx_static_plan *plan,
                                              const mx_static_load_options *opt, mx_static_model **out,
                                              mx_error *err);

/* Waits for the model's executions in flight, then frees it and its device memory (weights, an
 * owned FM arena, staging buffers). Staged host copies are queued on the caller's stream after
 * the execution: synchronize that stream before destroying a model that staged host tensors.
 * NULL is a no-op. */
void mx__static_model_destroy(mx_static_model *m);

/* StaticModelUpdateArgs: the tensors of the next step. inputs[0..n_inputs) and
 * outputs[0..n_outputs) are matched by position; their count, dtype and dims must equal the
 * model's (errors name the input or output). MX_DEVICE tensors are used in place (zero copy):
 * their memory must come from the model's device. MX_HOST tensors are staged: inputs are copied
 * into model-owned device buffers by execute, outputs copied back after it; host buffers must
 * stay valid until the execute stream has finished the step. Only the allocation entries whose
 * address changed since the previous step are refreshed; frozen inputs are compared only at the
 * first step. The arrays are borrowed for the call. */
MX_MUST_USE mx_status mx__static_model_update_args(mx_static_model *m, const mx_tensor *inputs,
                                                   size_t n_inputs, const mx_tensor *outputs,
                                                   size_t n_outputs);

/* StaticModelUpdateWorkspaces: the FM arena for the next step (models with an external FM
 * only). fm_base is device memory of at least mx__static_model_fm_size bytes, 64-byte aligned;
 * entries are refreshed only when it moved. */
MX_MUST_USE mx_status mx__static_model_update_workspaces(mx_static_model *m, void *fm_base);

/* StaticModelExecute: queues the step on s (a stream of the model's device): staged input
 * copies, one HAL model execution, staged output copies. Returns at once; synchronize s to
 * wait. update_args must have been called (and update_workspaces for an external FM). */
MX_MUST_USE mx_status mx__static_model_execute(mx_static_model *m, mx_stream *s);

/* StaticModelGetRunAddress: the device address of byte `offset` of the WEIGHT region or of the
 * current FM arena, for other kernels; NULL when offset is outside it (or no FM is set). */
void *mx__static_model_run_address(const mx_static_model *m, mx_static_alloc_kind kind, uint64_t offset);

/* FM arena bytes the model needs (what update_workspaces must supply). */
uint64_t mx__static_model_fm_size(const mx_static_model *m);

size_t mx__static_model_input_count(const mx_static_model *m);
size_t mx__static_model_output_count(const mx_static_model *m);
bool mx__static_model_input(const mx_static_model *m, size_t index, mx_static_io *out);
bool mx__static_model_output(const mx_static_model *m, size_t index, mx_static_io *out);

typedef struct mx_static_model_stats {
  uint64_t executions;      /* executes queued */
  uint32_t entries;         /* allocation-table entries (2 + inputs + outputs) */
  uint32_t last_refreshed;  /* entries refreshed for the last execute */
  uint64_t total_refreshed; /* entries refreshed over every execute */
  uint64_t staged_copies;   /* host staging copies queued, in total */
  mx_hal_model_stats hal;   /* the HAL model's figures (slots patched, device times) */
} mx_static_model_stats;

/* Fills *st (caller-owned). Synchronize the stream first for exact HAL figures. */
void mx__static_model_stats_get(const mx_static_model *m, mx_static_model_stats *st);

/* Writes the alloc ids refreshed for the last execute (ascending) into ids[0..cap) and returns
 * how many there were. */
size_t mx__static_model_last_refreshed(const mx_static_model *m, uint32_t *ids, size_t cap);

/* Message of the last failing call on the model; "" if none. Owned by the model. */
const char *mx__static_model_last_error(const mx_static_model *m);

/* Weights the model keeps pre-packed for its kernels (kernels/prepack.h): blocks and bytes. */
void mx__static_model_prepacked(const mx_static_model *m, uint32_t *blocks, uint64_t *bytes);

/* --- .mxm model files ------------------------------------------------------------------------- */

typedef struct mx_mxm_save_options {
  bool external_weights; /* write the weights into "<file>.weights" next to the .mxm */
} mx_mxm_save_options;

/* Writes plans[0..n) into a new .mxm file at path (replaced if it exists). o may be NULL
 * (weights inline). Errors name the file. */
MX_MUST_USE mx_status mx__mxm_save_plans(const mx_static_plan *const *plans, size_t n, const char *path,
                                         const mx_mxm_save_options *o, mx_error *err);
/* mx__mxm_save_plans with one plan. */
MX_MUST_USE mx_status mx__mxm_save(const mx_static_plan *plan, const char *path, const mx_mxm_save_options *o,
                                   mx_error *err);

/* Writes plans[0..n) and an opaque runtime record (runtime_size bytes, may be 0: none) — the V2
 * runtime's description of a partitioned model — into a new .mxm file. */
MX_MUST_USE mx_status mx__mxm_save_model(const mx_static_plan *const *plans, size_t n, const void *runtime,
                                         size_t runtime_size, const char *path, const mx_mxm_save_options *o,
                                         mx_error *err);
/* Reads an .mxm file: its static plans (as mx__mxm_load_plans) and, when runtime is not NULL, a
 * malloc'd copy of its runtime record (*runtime NULL and *runtime_size 0 when there is none). */
MX_MUST_USE mx_status mx__mxm_load_model(const char *path, mx_static_plan ***plans, size_t *n, void **runtime,
                                         size_t *runtime_size, mx_error *err);

/* Reads every static plan of an .mxm file. On success *plans receives a malloc'd array of n
 * plans the caller owns (mx__static_plan_destroy each, then free the array). Truncated, corrupt
 * or inconsistent files fail with MX_ERR_MALFORMED naming the file; files needing a newer
 * reader with MX_ERR_UNSUPPORTED. */
MX_MUST_USE mx_status mx__mxm_load_plans(const char *path, mx_static_plan ***plans, size_t *n, mx_error *err);
/* Reads a file holding exactly one static plan. */
MX_MUST_USE mx_status mx__mxm_load(const char *path, mx_static_plan **out, mx_error *err);

/* In-memory forms (weights always inline). save: *data is malloc'd (free()). load: `label`
 * names the buffer in messages (NULL: "memory"). */
MX_MUST_USE mx_status mx__mxm_save_memory(const mx_static_plan *plan, void **data, size_t *size,
                                          mx_error *err);
MX_MUST_USE mx_status mx__mxm_load_memory(const void *data, size_t size, const char *label,
                                          mx_static_plan **out, mx_error *err);

#endif /* MIXRT_STATIC_EXEC_STATIC_EXEC_H */
