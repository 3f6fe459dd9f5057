/* Sessions: load a model once, run it every step.
 *
 * A session compiles a model into mixrt's hybrid form: the graph is inferred and folded, split
 * by the partitioner into KNOWN clusters (each compiled into a static model whose tasks are sunk
 * to the device once and run with one call per step, refreshing only the addresses that changed)
 * and UNKNOWN clusters (run op by op with run-time shapes), and lowered into an execution graph
 * of small kernels (Init at load, Main every step, DeInit at unload). A .mxm file stores all of
 * it, so loading one repeats no compile work.
 *
 * Typical decode loop:
 *
 *   mx_session_options o; mx_session_options_init(&o);
 *   mx_session *s; mx_error err;
 *   if (mx_session_create(&o, &s, &err) != MX_OK) { puts(err.message); return; }
 *   if (mx_session_load_file(s, "llama.onnx") != MX_OK) puts(mx_session_last_error(s));
 *   mx_tensor in[5] = {...}, out[5] = {{0}};     // out[i].data == NULL: the session allocates
 *   mx_session_run(s, in, 5, out, 5);
 *   ... mx_tensor_release(&out[i]) ...
 *   mx_session_destroy(s);
 *
 * Every failure returns a status and leaves a message naming the input, node or file at fault
 * (mx_session_last_error); the session stays usable. One session may be used by one thread at a
 * time: a call made while another thread is inside the session returns MX_ERR_BUSY. Different
 * sessions are independent and may run on different threads at once. */
#ifndef MIXRT_SESSION_H
#define MIXRT_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mixrt/api.h"
#include "mixrt/graph.h"
#include "mixrt/hal.h"
#include "mixrt/log.h"
#include "mixrt/status.h"
#include "mixrt/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mx_session mx_session;

typedef enum mx_executor_kind {
  MX_EXECUTOR_SEQUENTIAL = 0,  /* a precomputed priority order: the default */
  MX_EXECUTOR_TOPOLOGICAL = 1, /* a ready queue over indegrees */
  MX_EXECUTOR_MULTI_THREAD = 2 /* a pool of pinned workers, lock-free ready queue */
} mx_executor_kind;

/* The range a symbolic dim takes at run time (for planning; values outside are an error). */
typedef struct mx_symbol_range {
  const char *name;
  int64_t min, max;
} mx_symbol_range;

/* The layout of mx_session_options this header describes (docs/abi.md): 1, the fields below.
 * mx_session_create refuses a record whose version it does not know. */
#define MX_SESSION_OPTIONS_VERSION \
  4u /* 2 added spec_cache_size, spec_churn_limit, gears;
                                          3 added intra_op_threads;
                                          4 added max_loop_iterations */

typedef struct mx_session_options {
  uint32_t version;                 /* MX_SESSION_OPTIONS_VERSION; set by mx_session_options_init */
  mx_device *device;                /* a device to run on (borrowed, must outlive the session);
                                       NULL: the session creates one from device_options */
  mx_device_options device_options; /* used when device is NULL */
  uint32_t streams;                 /* streams for static models and dynamic ops (>= 1; default 1) */
  mx_executor_kind executor;        /* default MX_EXECUTOR_SEQUENTIAL */
  uint32_t executor_threads;        /* multi-thread executor pool size (0: one per core) */
  int64_t static_min_ops;           /* partitioner: smaller known clusters run dynamically;
                                       0 keeps every known cluster; -1 runs everything dynamically
                                       (default 4) */
  bool stable_partition;            /* partitioner stable mode */
  const char *const *frozen_inputs; /* inputs whose address never changes after the first step */
  size_t n_frozen_inputs;
  const mx_symbol_range *symbol_ranges; /* declared ranges of symbolic dims */
  size_t n_symbol_ranges;
  mx_log_fn log; /* compile and load messages (NULL: none) */
  void *log_user;
  void *uv_loop;         /* a uv_loop_t* on which async completions are delivered
                                       (borrowed); NULL: an internal loop thread */
  bool private_weights;  /* false (default): the weights (static models' weight
                                       blocks, the dynamic partitions' constants, the execution
                                       graph's shared constants) are shared blocks of the device
                                       (mx_device_shared_acquire), so sessions of one model on
                                       one device hold one copy; true: this session uploads
                                       copies of its own */
  const char *passes;    /* Stage 2 rewrite rules (mx_graph_fuse): NULL or "default",
                                       "none", "all" or a comma-separated rule list (copied) */
  uint64_t memory_limit; /* bytes a step's tensors may take (0: the physical memory
                                       available when the model is loaded); the device's own
                                       memory_limit caps it too. A step over it is refused before
                                       anything is allocated (MX_ERR_DEVICE_OOM) */
  /* Version 2. Shape specialization (docs/partition.md): a dynamic partition whose dims depend
   * only on symbols of input shapes gets a static model per binding of those symbols it meets. */
  uint32_t spec_cache_size;  /* specializations kept per partition, least recently used
                                       evicted (default 8; 0: never specialize) */
  uint32_t spec_churn_limit; /* new values of one symbol a partition compiles for before
                                       it stays dynamic for that symbol (default 4; 0: no limit) */
  const char *const *gears;  /* declared specializations compiled at load, each
                                       "name=value[,name=value...]" ("seq=1") (copied) */
  size_t n_gears;
  /* Version 3. */
  uint32_t intra_op_threads; /* threads the CPU kernels split one large op (Conv) across:
                                       a process-wide pool, sized when a session is created
                                       (default 1: every kernel runs on the thread that launches
                                       it; 0 leaves the pool as it is) */
  /* Version 4. */
  int64_t max_loop_iterations; /* a Loop whose only exit is its condition (no trip count)
                                       stops after this many iterations and the run fails
                                       (MX_ERR_LIMIT, naming the node) (default 1 << 24;
                                       0 takes the default) */
} mx_session_options;

/* Fills *o with the defaults. */
MX_API void mx_session_options_init(mx_session_options *o);

/* Creates a session with no model. `o` is read during the call only (strings it points to are
 * copied). On failure *out is NULL and err (may be NULL) says why. */
MX_API MX_MUST_USE mx_status mx_session_create(const mx_session_options *o, mx_session **out, mx_error *err);
/* Waits for runs in flight, unloads the model, frees everything. NULL is a no-op. */
MX_API void mx_session_destroy(mx_session *s);
/* Message of the last failure on this session ("" if none); valid until the next call. */
MX_API const char *mx_session_last_error(const mx_session *s);
/* What Stage 2 (mx_graph_fuse, options.passes) did to the last model compiled from ONNX
 * (all zero for a restored .mxm). Borrowed until the next load. */
MX_API const mx_fuse_report *mx_session_fuse_report(const mx_session *s);

/* --- loading -------------------------------------------------------------------------------- */

/* Loads an ONNX model or a .mxm file (told apart by content) and compiles it (ONNX) or restores
 * it (.mxm). Replaces a model already loaded. */
MX_API MX_MUST_USE mx_status mx_session_load_file(mx_session *s, const char *path);
/* Same, from memory (ONNX external data is not available from memory). */
MX_API MX_MUST_USE mx_status mx_session_load_memory(mx_session *s, const void *data, size_t size);
/* Compiles a graph built with the builder API. The session takes ownership of g, also on
 * failure. */
MX_API MX_MUST_USE mx_status mx_session_load_graph(mx_session *s, mx_graph *g);
/* The layout of mx_session_save_options this header describes (docs/abi.md): 1, the fields
 * below. Version 0 reads as 1, so a record zeroed or set with designated initializers
 * ({.external_weights = true}) is a version 1 record; mx_session_save refuses a newer version. */
#define MX_SESSION_SAVE_OPTIONS_VERSION 1u

typedef struct mx_session_save_options {
  uint32_t version;      /* MX_SESSION_SAVE_OPTIONS_VERSION (mx_session_save_options_init), or 0 */
  bool external_weights; /* write the static models' weights to "<path>.weights" beside the file */
} mx_session_save_options;

/* Fills *o with the defaults (weights inline) and the current version. */
MX_API void mx_session_save_options_init(mx_session_save_options *o);

/* Writes the loaded model as a .mxm file (partitioned root, static plans, execution graphs).
 * `o` may be NULL (weights inline). */
MX_API MX_MUST_USE mx_status mx_session_save(mx_session *s, const char *path,
                                             const mx_session_save_options *o);

/* --- model description ---------------------------------------------------------------------- */

typedef struct mx_io_info {
  const char *name; /* owned by the session */
  mx_dtype dtype;
  int32_t rank;      /* MX_RANK_UNKNOWN if unknown */
  const char *shape; /* printed shape, e.g. "[1, 2, past_len, 16]" (owned by the session) */
} mx_io_info;

MX_API size_t mx_session_input_count(const mx_session *s);
MX_API size_t mx_session_output_count(const mx_session *s);
/* False when index is out of range or no model is loaded. */
MX_API bool mx_session_input_info(const mx_session *s, size_t index, mx_io_info *info);
MX_API bool mx_session_output_info(const mx_session *s, size_t index, mx_io_info *info);

/* One dim of an input or output, structured (mx_io_info.shape is the same, printed). */
typedef enum mx_io_dim_kind {
  MX_IO_DIM_CONCRETE = 0, /* a fixed size: value */
  MX_IO_DIM_SYMBOLIC = 1, /* an expression of the model's symbols ("past_len + 1"): evaluate it
                             with mx_session_output_shape / mx_session_output_shape_for */
  MX_IO_DIM_UNKNOWN = 2   /* known only when the model runs (data-dependent) */
} mx_io_dim_kind;

typedef struct mx_io_dim {
  mx_io_dim_kind kind;
  int64_t value;       /* CONCRETE: the size; else -1 */
  uint32_t n_symbols;  /* SYMBOLIC: how many symbols the expression uses */
  char expression[96]; /* printed: "16", "past_len + 1", "?" (cut to fit) */
} mx_io_dim;

/* Dim k of input (output = false) or output `index`; false when out of range, the rank is
 * unknown or no model is loaded. */
MX_API bool mx_session_io_dim(const mx_session *s, bool output, size_t index, int32_t k, mx_io_dim *dim);
/* The model's symbols (symbolic dims), numbered 0 .. count - 1; NULL when out of range. */
MX_API size_t mx_session_symbol_count(const mx_session *s);
MX_API const char *mx_session_symbol_name(const mx_session *s, size_t index);
/* The concrete shape output `index` has in a step on these inputs (only names, ranks and dims
 * are read; data may be NULL), without running anything: *rank and dims[0 .. *rank). Fails
 * naming the dim when it is known only at run time or a symbol it uses is not given. */
MX_API MX_MUST_USE mx_status mx_session_output_shape(mx_session *s, const mx_tensor *inputs, size_t n_inputs,
                                                     size_t index, int32_t *rank, int64_t *dims);
/* The same from symbol values by name ({"past_len"}, {511}). */
MX_API MX_MUST_USE mx_status mx_session_output_shape_for(mx_session *s, const char *const *symbols,
                                                         const int64_t *values, size_t n_symbols,
                                                         size_t index, int32_t *rank, int64_t *dims);

/* --- running -------------------------------------------------------------------------------- */

/* Runs one step.
 * inputs: one tensor per model input, by position, or by name when every given tensor has a
 *   name; host (MX_HOST) or device memory (MX_DEVICE, allocated from the session's device).
 * outputs: one per model output, by position (or by name likewise); by name, any subset of the
 *   outputs (the others are still computed, but neither copied nor returned). An entry whose
 *   data is NULL receives a host tensor the caller owns (mx_tensor_release), or with placement
 *   MX_DEVICE a device buffer of the step's shape the caller frees (mx_device_free on the
 *   session's device). An entry with data is a caller buffer (host or device) whose dtype and
 *   dims must equal the actual output's; device buffers are written in place (zero copy). */
MX_API MX_MUST_USE mx_status mx_session_run(mx_session *s, const mx_tensor *inputs, size_t n_inputs,
                                            mx_tensor *outputs, size_t n_outputs);

/* Called once per asynchronous run when it has completed on the device (status MX_OK) or
 * failed (message names the cause; valid during the call). */
typedef void (*mx_run_callback)(void *user, mx_status status, const char *message);

/* Enqueues one step and returns without waiting for the device. Every output must be a caller
 * buffer (data set); inputs and outputs must stay valid until the callback. `stream` is the
 * caller's stream (NULL: the session's own), on which the step is ordered after earlier work. The
 * callback runs on the session's libuv loop (mx_session_options.uv_loop, or an internal loop
 * thread). */
MX_API MX_MUST_USE mx_status mx_session_run_async(mx_session *s, const mx_tensor *inputs, size_t n_inputs,
                                                  mx_tensor *outputs, size_t n_outputs, mx_stream *stream,
                                                  mx_run_callback callback, void *user);
/* Waits until every asynchronous run has completed and its callback has returned. */
MX_API MX_MUST_USE mx_status mx_session_synchronize(mx_session *s);

/* Checks, allocating nothing, that a step on inputs of these dtypes and dims (data is not read
 * and may be NULL; by position, or by name when every one is named) stays within the memory
 * limit: every tensor the inputs' symbols size, and the inputs with all outputs together.
 * MX_ERR_DEVICE_OOM names the value and its size. mx_session_run makes the same check. */
MX_API MX_MUST_USE mx_status mx_session_check_memory(mx_session *s, const mx_tensor *inputs, size_t n_inputs);
/* The bytes a step may take (memory_limit option, else the available physical memory when the
 * model was loaded, capped by the device's memory_limit); 0 when no model is loaded. */
MX_API uint64_t mx_session_memory_limit(const mx_session *s);

/* The session's device (borrowed), e.g. to allocate device buffers for inputs and outputs. */
MX_API mx_device *mx_session_device(mx_session *s);

/* --- statistics and tracing ----------------------------------------------------------------- */

typedef struct mx_session_stats {
  uint64_t steps;              /* steps run */
  uint64_t step_ns;            /* host time of the steps (wall clock) */
  uint64_t static_ns;          /* time in static models (device side) */
  uint64_t dynamic_ns;         /* time in dynamic ops (host launch + device wait) */
  uint64_t host_ns;            /* time in host kernels (feeds, host ops, outputs) */
  uint64_t static_executes;    /* static model executions */
  uint64_t dynamic_launches;   /* dynamic op launches */
  uint64_t refreshed_entries;  /* allocation-table entries refreshed in static models */
  uint64_t device_allocations; /* device allocations made by the session's allocator */
  uint64_t allocator_hits;     /* allocations served from the allocator's cache */
  uint64_t allocator_misses;
  uint64_t bytes_in_use;  /* device bytes held now (not summed) */
  uint64_t bytes_cached;  /* of which cached for reuse (not summed) */
  uint64_t peak_bytes;    /* peak device bytes (not summed) */
  uint64_t kernels_run;   /* execution-graph kernels run */
  uint64_t output_copies; /* caller's device output buffers that a dynamic partition filled
                                  by a copy at the end of its step instead of its ops writing them
                                  in place (an input or host value delivered as an output) */
  /* Shape specialization of dynamic partitions. */
  uint64_t spec_hits;       /* steps of a partition served by a specialization */
  uint64_t spec_misses;     /* bindings no specialization held */
  uint64_t spec_compiles;   /* specializations compiled (at load for gears, or on a miss) */
  uint64_t spec_evictions;  /* specializations evicted from a full cache */
  uint64_t spec_compile_ns; /* host time compiling them */
  uint64_t spec_fallbacks;  /* partitions that stopped specializing (churn or a body that
                                  cannot become static), each said once in the log */
  /* Control flow (If, Loop, Scan run as one op of a dynamic partition). */
  uint64_t control_runs;    /* control ops of the root graph run (a control op nested in a body
                               counts as part of that body's run: see body_runs) */
  uint64_t loop_iterations; /* Loop iterations run by them, at any depth */
  /* Control-node bodies (If branches, Loop and Scan bodies) compiled into programs of their own:
   * partitioned like the root, fixed-shape parts as static models. */
  uint64_t body_runs;            /* bodies run that way (one per Loop / Scan iteration, per If) */
  uint64_t body_static_executes; /* static model executions inside them, at any depth */
  /* Loop and Scan carried values (at any depth), per iteration: handed to the next iteration
   * without a copy (the body wrote its result straight into the value's other buffer, or the
   * interpreter's result was adopted), or copied (a result that is an input or a capture given
   * back, or whose shape may change per iteration, copied out of the body's program). */
  uint64_t loop_carry_rebinds;
  uint64_t loop_carry_copies;
} mx_session_stats;

/* Fills *last (the last step) and *total (since the model was loaded; the allocator counters
 * device_allocations, allocator_hits and allocator_misses since the session was created);
 * either may be NULL. `record_size` is the caller's sizeof(mx_session_stats) (docs/abi.md): the
 * library writes that many bytes, its own fields first and zeros past them, so a record of an
 * older or newer mixrt is filled safely. 0 is refused (MX_ERR_INVALID_ARGUMENT). */
MX_API MX_MUST_USE mx_status mx_session_get_stats_sized(const mx_session *s, mx_session_stats *last,
                                                        mx_session_stats *total, size_t record_size);
/* mx_session_get_stats_sized with the size of the record this header declares. */
static inline MX_MUST_USE mx_status mx_session_get_stats(const mx_session *s, mx_session_stats *last,
                                                         mx_session_stats *total) {
  return mx_session_get_stats_sized(s, last, total, sizeof(mx_session_stats));
}

/* Asks the run in progress on s to stop; callable from any thread, also while another thread is
 * inside the session (it never waits and never returns MX_ERR_BUSY). The run fails with
 * MX_ERR_CANCELLED at its next Loop iteration or control-flow op (If, Loop, Scan), naming the
 * node; a run without control flow completes. With no run in progress nothing happens: each run
 * starts uncancelled. */
MX_API void mx_session_cancel(mx_session *s);

/* Starts recording a trace of the following steps (Chrome trace-event format, viewable in
 * Perfetto: one lane per stream and one for the host). */
MX_API MX_MUST_USE mx_status mx_session_trace_begin(mx_session *s);
/* Stops recording and writes the trace to `path` as JSON. */
MX_API MX_MUST_USE mx_status mx_session_trace_end(mx_session *s, const char *path);

#ifdef __cplusplus
}
#endif
#endif /* MIXRT_SESSION_H */
