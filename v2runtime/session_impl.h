/* Private state of sessions and of the program a session runs (v2runtime only).
 *
 * A program is what compiling a model produces: the optimized source graph (it owns the symbol
 * table), the partitioned root graph, one entry per partition call (a static plan and model for
 * a KNOWN call, a dynamic plan and executor for an UNKNOWN one), the run-time record of every
 * root value, and the three execution graphs over one table of value slots. */
#ifndef MIXRT_V2RUNTIME_SESSION_IMPL_H
#define MIXRT_V2RUNTIME_SESSION_IMPL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/clock.h"
#include "dynamic_exec/dynamic_exec.h"
#include "graph/ir.h"
#include "mixrt/session.h"
#include "static_exec/static_exec.h"
#include "v2runtime/async.h"
#include "v2runtime/exe_graph.h"
#include "v2runtime/trace.h"

/* One value of the root graph during a step. */
typedef struct mx_rt_value {
  mx_tensor t;             /* dtype, rank, dims, data and placement this step */
  bool owned;              /* data is an allocator block the runtime frees after its last use */
  bool constant;           /* a shared constant uploaded at load (freed at unload) */
  int32_t producer;        /* the call producing it, or -1 (graph input, constant) */
  int32_t graph_output;    /* first graph output index it is, or -1 */
  void *home;              /* a device buffer of its own for the program's life (static
                                outputs of single-stream programs: a stable address, so no
                                allocation and no refresh per step), or NULL */
  uint32_t reader_streams; /* bit per step stream that reads it (calls and outputs) */
} mx_rt_value;

/* Most streams a step spreads partitions over (bit masks of stream indices are 32 bits). */
#define MX_STEP_MAX_STREAMS 16

/* One partition call of the root graph. */
typedef struct mx_rt_call {
  mx_node_id node;  /* the call node in the root */
  const char *name; /* its name (borrowed from the root) */
  bool unknown;     /* UNKNOWN: dynamic executor; KNOWN: static model */
  uint32_t n_in, n_out;
  mx_value_id *in_values;  /* root value of each call input (malloc'd) */
  mx_value_id *out_values; /* root value of each call output (malloc'd) */
  mx_tensor *args_in;      /* per-step argument arrays handed to the executor (malloc'd) */
  mx_tensor *args_out;
  mx_static_plan *plan;   /* KNOWN: compiled plan (owned) */
  mx_static_model *model; /* KNOWN: loaded model (owned; created by Init) */
  mx_dyn_plan *dplan;     /* UNKNOWN: plan (owned) */
  mx_dyn_exec *dexec;     /* UNKNOWN: executor (owned; created by Init) */
  bool in_step;           /* UNKNOWN: a step began and has not ended */
  uint32_t stream;        /* step stream index it runs on (0: the step's own stream) */
  uint32_t *waits;        /* calls on other streams whose outputs it reads (malloc'd) */
  uint32_t n_waits;
  mx_event *done; /* recorded on its stream when its work is queued (owned; made at
                                 install, only when the program uses several streams) */
} mx_rt_call;

typedef struct mx_program {
  mx_graph *source;  /* the optimized model (owns the symbol table) */
  mx_graph *root;    /* the partitioned root graph (owned) */
  mx_rt_call *calls; /* partition calls in root order (malloc'd) */
  size_t n_calls;
  mx_rt_value *values; /* by root value id (malloc'd, root->n_values entries) */
  size_t n_values;
  mx_exe_graph init, main, deinit;
  mx_exe_value *slots; /* exe value table shared by the three graphs (malloc'd) */
  uint32_t n_slots;
  bool initialized;           /* Init ran successfully (DeInit must run) */
  uint32_t used_streams;      /* bit per step stream the calls use (bit 0 always) */
  int32_t *input_dim_sym;     /* graph input i, dim k: the symbol it binds, or -1 (concrete, an
                                 expression, unknown); n_inputs * MX_MAX_RANK (malloc'd) */
  int64_t *sym_min, *sym_max; /* declared range of each symbol (INT64_MIN..INT64_MAX when none)
                                 (malloc'd, one per symbol of the root's table) */
  size_t n_syms;              /* symbols when the feeds were prepared */
  char **input_shapes;        /* printed shape of each graph input (malloc'd strings) */
  char **output_shapes;
  size_t static_calls, dynamic_calls;
  bool interpreted;                    /* holds sequences or optionals: root runs on the host through
                                 the reference interpreter, whole (no calls, empty exe graphs) */
  char interpreted_why[MX_ERROR_MESSAGE_MAX]; /* the node or input that made it so, for errors */
  struct mx_mem_limits *limits;        /* what a step may take and the tensors to size (limits.c) */
  struct mx_spec_state *spec;          /* shape specialization of dynamic calls (spec.c), or NULL */
  struct mx__control_bodies *bodies;   /* control-node bodies compiled into programs of their own
                                          (kernels_control_body.c), or NULL */
  struct mx__mxm_mapping *weights_map; /* the mapped .mxm weights section the root's constants
                                          lie in (held; a program loaded from a file), or NULL */
} mx_program;

/* A root value whose data lies in a state buffer of `rows` rows along `axis` (more than its
 * dims hold): a state's rows fed to a dynamic call (its kernels read the padded layout), or the
 * output that is the state's next value, which its producer appends in place into the same
 * buffer (v2runtime/state_append.c decides which states qualify). */
typedef struct mx_step_pad {
  mx_value_id value;
  int32_t axis;
  int64_t rows;
  bool output; /* the state's output (appended in place), else its input */
} mx_step_pad;

/* What the kernels of one step see (run->user). */
typedef struct mx_step {
  struct mx_session *s;
  const mx_tensor **inputs; /* by graph input index (borrowed from the caller) */
  mx_tensor *outputs;       /* by graph output index: the caller's records, filled in place */
  mx_tensor **out_by_graph; /* by graph output index: the caller's record (index mapping) */
  bool *alloc_output;       /* by graph output index: the session allocates it for the caller */
  bool *skip_output;        /* by graph output index: not asked for (a subset named): still
                                 computed, never delivered */
  mx_tensor *blank_output;  /* by graph output index: the record out_by_graph points at when
                                 skipped (zeroed, data NULL) */
  mx_stream *stream;        /* the stream the step is ordered on (step stream 0) */
  mx_stream *streams[MX_STEP_MAX_STREAMS]; /* step stream k: 0 the step's own, k > 0 session
                                              stream k */
  int64_t *bindings;                       /* symbol values seen this step (INT64_MIN: unbound) */
  uint64_t dynamic_ticks;                  /* host time inside dynamic partitions this step (mx__ticks) */
  uint64_t host_ticks;                     /* host time in feed and output kernels this step (mx__ticks) */
  uint64_t kernels;                        /* exe kernels run */
  const mx_step_pad *pads;                 /* padded state values this step (bound runs), or NULL */
  size_t n_pads;
} mx_step;

/* The stream partition call c runs on in this step. */
static inline mx_stream *mx__call_stream(const mx_step *step, const mx_rt_call *c) {
  return step->streams[c->stream];
}
/* Orders call c's stream after the calls on other streams whose outputs it reads (run->user is
 * the step). */
mx_status mx__call_wait_producers(mx_exe_run *run, const mx_rt_call *c);
/* Marks the end of call c's work on its stream, for the calls on other streams that read it. */
mx_status mx__call_record_done(mx_exe_run *run, const mx_rt_call *c);
/* The caller's device output record that root value rv can be written into directly (same dtype
 * and dims), or NULL. */
mx_tensor *mx__zero_copy_target(mx_step *step, const mx_rt_value *rv, mx_dtype dtype, int32_t rank,
                                const int64_t *dims);

struct mx_session {
  mx_session_options opts; /* copy; strings below are owned copies */
  char **frozen_names;     /* owned copies of opts.frozen_inputs */
  char *passes;            /* owned copy of opts.passes, or NULL */
  mx_fuse_report fuse;     /* what Stage 2 did to the loaded model */
  mx_symbol_range *ranges; /* owned copies of opts.symbol_ranges (names owned too) */
  char **gears;            /* owned copies of opts.gears */
  mx_device *dev;
  bool owns_dev;
  mx_stream **streams; /* session streams (owned), opts.streams of them */
  uint32_t n_streams;
  mx_caching_allocator *alloc; /* every device buffer of steps (owned) */
  mx_exe_pool *pool;           /* multi-thread executor (owned), or NULL */
  mx_exe_topo_scratch topo;    /* topological executor scratch */
  mx_program *prog;            /* loaded model, or NULL */
  _Atomic int busy;            /* a thread is inside the session */
  _Atomic bool cancel;         /* mx_session_cancel: the run in progress stops (reset per run) */
  mx_error err;                /* last failure */
  mx_step step;                /* the step in progress */
  size_t cap_io;               /* capacity of the step's per-io arrays */
  mx_session_stats last, total;
  mx__tick_clock clock;                /* converts the statistics' ticks to ns */
  mx_trace trace;                      /* recording state (mx_session_trace_begin/end) */
  mx_async async;                      /* asynchronous runs */
  mx_event *join[MX_STEP_MAX_STREAMS]; /* per step stream k > 0: joins it back into stream 0 at
                                          the end of a step (owned) */
  struct mx_comm *comm;                /* mx_session_set_comm (a reference), or NULL */
};

/* Claims the session for the calling thread; MX_ERR_BUSY (and nothing written to the session)
 * when another thread is inside. */
MX_MUST_USE mx_status mx__session_enter(struct mx_session *s);
void mx__session_leave(struct mx_session *s);

/* --- compile and lower (compile.c, lower.c) ------------------------------------------------- */

/* Compiles g (ownership taken, also on failure) into a program for session s. */
MX_MUST_USE mx_status mx__program_compile(struct mx_session *s, mx_graph *g, mx_program **out, mx_error *err);
/* Fills p->calls from the root graph's partition calls (topological order), without plans. */
MX_MUST_USE mx_status mx__program_calls(mx_program *p, mx_error *err);
/* Sizes the per-value records and prints the io shapes once the calls are planned. */
MX_MUST_USE mx_status mx__program_finish(mx_program *p, mx_error *err);
/* Constant folding and dead-node removal to a fixed point (at most 16 rounds), re-inferring
 * after each round that changed g. */
mx_status mx__program_fold(mx_graph *g);
/* Input positions of call c that never change address (shared constants, and graph inputs the
 * caller declared frozen), written to out (room for c->n_in); returns how many. */
size_t mx__call_frozen_positions(const struct mx_session *s, const mx_program *p, const mx_rt_call *c,
                                 uint32_t *out);
/* Makes p (owned, built for s: a restored body's program) the session's program and runs its
 * Init, as a load does; on failure p is freed. */
MX_MUST_USE mx_status mx__session_install(struct mx_session *s, mx_program *p);
/* Restores a program from an .mxm file (static plans + runtime record; see mxm_io.c). */
MX_MUST_USE mx_status mx__program_load_mxm(struct mx_session *s, const char *path, mx_program **out,
                                           mx_error *err);
/* Checks a restored Main graph against the program: every step kernel of every call, op, input,
 * output and produced value once, ordered so each finds its inputs ready and no value is freed
 * before its last reader (mxm_main_check.c). MX_ERR_MALFORMED names the nodes at fault. */
MX_MUST_USE mx_status mx__program_check_main(const mx_program *p, const mx_exe_graph *g, mx_error *err);
/* Writes the loaded program as an .mxm file. */
MX_MUST_USE mx_status mx__program_save_mxm(struct mx_session *s, const char *path, bool external_weights,
                                           mx_error *err);
/* Builds the Init/Main/DeInit graphs of a program whose calls are planned. */
MX_MUST_USE mx_status mx__program_lower(struct mx_session *s, mx_program *p, mx_error *err);
/* Frees a program (runs nothing: DeInit must have run). NULL is a no-op. */
void mx__program_free(mx_program *p);

/* Assigns every call a step stream (chains stay on one stream, independent branches spread)
 * and works out the cross-stream waits, value producers and reader streams (lower.c). */
MX_MUST_USE mx_status mx__program_assign_streams(struct mx_session *s, mx_program *p, mx_error *err);
/* Resolves what FeedInput checks once: the symbol each input dim binds, each symbol's declared
 * range (session.c). */
MX_MUST_USE mx_status mx__program_prepare_feeds(struct mx_session *s, mx_program *p, mx_error *err);
/* Gives static outputs of single-stream programs a device buffer for the program's life
 * (session.c; freed at unload). */
MX_MUST_USE mx_status mx__program_make_homes(struct mx_session *s, mx_program *p, mx_error *err);
/* Creates the per-call events the stream assignment needs (session.c; freed with the program). */
MX_MUST_USE mx_status mx__program_make_events(struct mx_session *s, mx_program *p, mx_error *err);

/* --- memory limits of a step (limits.c) ------------------------------------------------------ */

/* Bytes of physical memory available now (MemAvailable), 0 when unknown. */
uint64_t mx__available_memory(void);
/* Works out the step's memory limit and the symbolic tensor descriptions to size each step. */
MX_MUST_USE mx_status mx__program_prepare_limits(struct mx_session *s, mx_program *p, mx_error *err);
void mx__mem_limits_free(struct mx_mem_limits *limits);
/* The program's memory limit in bytes (0: none or not prepared). */
uint64_t mx__program_memory_limit(const mx_program *p);
/* Refuses (MX_ERR_DEVICE_OOM, the value and its size named) a step on these inputs (by graph
 * input index; only dtypes and dims are read) whose tensors would exceed the limit. */
MX_MUST_USE mx_status mx__step_check_memory(struct mx_session *s, mx_program *p,
                                            const mx_tensor *const *inputs);

/* A step's inputs and outputs already matched to the graph's (a binding's records): by graph
 * input index and by graph output index (NULL: that output is not asked for). */
typedef struct mx_bound_slots {
  const mx_program *prog;         /* the program they were matched for */
  const mx_tensor *const *inputs; /* root->n_inputs entries */
  mx_tensor *const *outputs;      /* root->n_outputs entries */
  const struct mx_step_pad *pads; /* padded state values (binding states appended in place) */
  size_t n_pads;
} mx_bound_slots;

/* mx_session_run without name matching (run.c). */
MX_MUST_USE mx_status mx__session_run_slots(struct mx_session *s, const mx_bound_slots *bound);

/* Runs one of the program's graphs with the session's executor. */
MX_MUST_USE mx_status mx__program_run_graph(struct mx_session *s, const mx_exe_graph *g, mx_step *step);

/* Cleans up after a failed step: aborts dynamic steps, frees the step's blocks. */
void mx__program_abort_step(struct mx_session *s, mx_step *step);

/* Kernel attributes (constant bytes of exe nodes). */
typedef struct mx_kattr {
  uint32_t call;  /* call index, or UINT32_MAX */
  uint32_t op;    /* dynamic op index within the call, or graph io index */
  uint32_t value; /* root value id, or UINT32_MAX */
  uint32_t extra;
} mx_kattr;

#endif /* MIXRT_V2RUNTIME_SESSION_IMPL_H */
