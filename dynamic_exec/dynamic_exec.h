/* The dynamic executor: op-by-op execution of an unknown-shape subgraph on device streams
 * (module-shared; the V2 runtime lowers UNKNOWN partitions onto the per-op steps below).
 *
 * A plan is built once per inferred graph (a whole model or the body of a partition call): op
 * order, the kernel of each op (dtypes are static even when shapes are not), the stream of each
 * op and the cross-stream events left after transitive reduction, the last consumer of every
 * value, and every op's output dims as expressions of the graph's symbols. Ops whose output
 * shape cannot be written that way run full inference at run time; data-dependent ops
 * (NonZero) get their upper bound, then bind a fresh symbol once the kernel has run; small
 * integer shape arithmetic runs on the host (or is evaluated from its symbolic value), and
 * ops that only move bytes (Reshape, Squeeze, Identity, ...) alias their input.
 *
 * An executor binds a plan to a device, a caching allocator and streams, and runs steps:
 *
 *   mx_dyn_options o; mx__dyn_options_init(&o); o.max_streams = 2;
 *   mx_dyn_plan *plan;    mx__dyn_plan_create(g, &o, &plan, &err);
 *   mx_dyn_exec *ex;      mx__dyn_exec_create(dev, plan, NULL, NULL, 0, &ex, &err);
 *   mx_tensor in[1] = {x}, out[1] = {{.placement = MX_HOST}};   // data NULL: allocate
 *   if (mx__dyn_exec_run(ex, in, 1, out, 1, NULL) != MX_OK) puts(mx__dyn_exec_last_error(ex));
 *   mx_tensor_release(&out[0]);
 *   mx__dyn_exec_destroy(ex); mx__dyn_plan_destroy(plan);
 *
 * A step first binds the symbols from the actual input shapes (checking every input against
 * its declared shape), then per op: evaluate the output shape from its expressions (skipped
 * when none of the symbols it depends on changed since the previous step), allocate outputs,
 * launch asynchronously on the op's stream with a kernel task block cached by the concrete
 * shapes, and free every value right after its last consumer's launch (stream-ordered through
 * the allocator: no synchronization). A failing step frees everything it allocated, resets the
 * streams it used and leaves the executor ready for the next step. */
#ifndef MIXRT_DYNAMIC_EXEC_DYNAMIC_EXEC_H
#define MIXRT_DYNAMIC_EXEC_DYNAMIC_EXEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hal/caching_allocator.h"
#include "mixrt/graph.h"
#include "mixrt/hal.h"
#include "mixrt/tensor.h"

/* Most streams a plan spreads over. */
#define MX_DYN_MAX_STREAMS 16

struct mx_node;
typedef struct mx_dyn_plan mx_dyn_plan;
typedef struct mx_dyn_exec mx_dyn_exec;

typedef struct mx_dyn_options {
  uint32_t max_streams;  /* independent branches spread over up to this many streams (1..16;
                             0 = 1) */
  bool host_ops;         /* run small integer shape arithmetic on the host (default true) */
  bool eval_ops;         /* compute host values from their symbolic values, without running
                             their kernels, when every element is formable (default true) */
  bool alias_ops;        /* let byte-moving ops (Reshape, Squeeze, ...) share their input's
                             buffer instead of copying (default true) */
  uint32_t meta_entries; /* launch-metadata entries cached per op (1..16; 0 = 4) */
  bool share_constants;  /* executors take their constants' device block as a shared block
                             (mx_device_shared_acquire): executors of plans with equal constants
                             on one device hold one copy (default false: a block of their own) */
  /* Runs a control node (a node holding subgraphs: If, Loop, Scan, or the call wrapping one,
   * partitioner/part_control.c) as one host op: ins[0..n_in) are host tensors (NULL data for an
   * omitted input), outs[0..n_out) receive host tensors whose data the executor then owns
   * (64-byte aligned, released with free()). On failure nothing is left in outs and err names
   * the node. NULL (the default): plans refuse nodes with subgraphs. */
  mx_status (*control_run)(void *user, const struct mx_node *nd, const mx_tensor *ins, size_t n_in,
                           mx_tensor *outs, size_t n_out, mx_error *err);
  void *control_user;
} mx_dyn_options;

/* Fills *o with the defaults: one stream, host ops, evaluation and aliasing on, 4 cache
 * entries. */
void mx__dyn_options_init(mx_dyn_options *o);

/* --- plans ------------------------------------------------------------------------------------ */

/* Builds the plan of g, which must be inferred (mx_graph_infer) and must not change while the
 * plan exists (the plan borrows it: op params, constants, symbol table). opt may be NULL
 * (defaults). On success *out is owned by the caller (mx__dyn_plan_destroy); on failure it is
 * NULL and err (optional) names the node at fault (an op without a CPU kernel for its dtypes,
 * an op with subgraphs, a graph that is not inferred). */
MX_MUST_USE mx_status mx__dyn_plan_create(mx_graph *g, const mx_dyn_options *opt, mx_dyn_plan **out,
                                          mx_error *err);

/* Frees a plan. Executors created from it must be destroyed first. NULL is a no-op. */
void mx__dyn_plan_destroy(mx_dyn_plan *p);

typedef struct mx_dyn_plan_info {
  size_t ops;                /* graph nodes in the plan */
  size_t device_ops;         /* launched on a stream */
  size_t host_ops;           /* run by a kernel on the host thread */
  size_t eval_ops;           /* host values computed from their symbolic values (no kernel) */
  size_t alias_ops;          /* share their input's buffer */
  size_t skipped_ops;        /* nothing at run time needs their outputs */
  size_t infer_ops;          /* need full inference at run time */
  size_t data_dependent_ops; /* synchronize their stream to read the output shape */
  uint32_t streams;          /* streams used */
  size_t cross_edges;        /* producer -> consumer edges between different streams */
  size_t events;             /* cross-stream waits left after transitive reduction */
} mx_dyn_plan_info;

/* Fills *info (caller-owned). */
void mx__dyn_plan_info_get(const mx_dyn_plan *p, mx_dyn_plan_info *info);

/* --- executors -------------------------------------------------------------------------------- */

/* Creates an executor of `plan` (borrowed: it must outlive the executor) on dev.
 * - alloc: a caching allocator over dev shared with others (borrowed), or NULL: the executor
 *   creates its own (mx__dyn_exec_allocator).
 * - streams[0..n_streams): streams of dev the executor runs on (borrowed); plan stream k uses
 *   streams[k % n_streams]. NULL / 0: the executor creates the streams the plan uses.
 * Constants read by device ops are uploaded here (synchronously). On failure *out is NULL and
 * err (optional) says why. */
MX_MUST_USE mx_status mx__dyn_exec_create(mx_device *dev, const mx_dyn_plan *plan,
                                          mx_caching_allocator *alloc, mx_stream *const *streams,
                                          size_t n_streams, mx_dyn_exec **out, mx_error *err);

/* Waits for the executor's work, returns its memory (and, when it owns them, destroys its
 * allocator and streams). NULL is a no-op. */
void mx__dyn_exec_destroy(mx_dyn_exec *e);

/* Runs one step.
 * - inputs[0..n_inputs): one tensor per graph input, by position, or by name when every tensor
 *   has a name. Data may be on the device (placement MX_DEVICE: memory of the executor's
 *   device, ready when caller_stream reaches the current point) or on the host (copied
 *   asynchronously: host data must stay valid until caller_stream reaches the end of the step;
 *   mx__dyn_exec_run synchronizes before returning whenever an output is placed on the host).
 * - outputs[0..n_outputs): one per graph output. With data set, the caller's buffer (placement
 *   says where) receives the result; its dtype, rank and dims must equal the result's. A device
 *   buffer is written in place by the op producing the output when mx__dyn_bind_output accepts
 *   it (no copy), otherwise the result is copied into it. With
 *   data NULL the executor allocates it and the caller owns it: placement MX_HOST gives host
 *   memory (mx_tensor_release), MX_DEVICE a block of mx__dyn_exec_allocator(e) (give it back
 *   with mx__caching_free on the stream of its last use). dtype, rank, dims and name are filled
 *   in either way. Empty results have data NULL.
 * - caller_stream: device outputs are ready when it reaches the end of the step; NULL means the
 *   executor's first stream.
 * On failure (message in mx__dyn_exec_last_error naming the input, dim or node) every output is
 * left empty, everything the step allocated is freed and the executor's streams (and the caller
 * stream, if the step failed it) are reset. */
MX_MUST_USE mx_status mx__dyn_exec_run(mx_dyn_exec *e, const mx_tensor *inputs, size_t n_inputs,
                                       mx_tensor *outputs, size_t n_outputs, mx_stream *caller_stream);

/* Message of the last failure ("" if none). Owned by the executor, valid until the next call. */
const char *mx__dyn_exec_last_error(const mx_dyn_exec *e);

/* Constants the executor keeps pre-packed for its kernels (kernels/prepack.h): blocks and bytes. */
void mx__dyn_exec_prepacked(const mx_dyn_exec *e, uint32_t *blocks, uint64_t *bytes);

/* The allocator the executor allocates from (borrowed). */
mx_caching_allocator *mx__dyn_exec_allocator(mx_dyn_exec *e);

/* Executor stream k (borrowed), or NULL when k is out of range. */
mx_stream *mx__dyn_exec_stream(mx_dyn_exec *e, size_t k);

typedef struct mx_dyn_exec_stats {
  uint64_t steps;            /* steps started */
  uint64_t failed_steps;     /* steps that failed */
  uint64_t launches;         /* kernels launched on streams */
  uint64_t host_runs;        /* kernels run on the host thread */
  uint64_t shape_evals;      /* ops whose output dims were evaluated from expressions */
  uint64_t shape_reuses;     /* ops whose output dims were kept (no symbol they use changed) */
  uint64_t inferences;       /* run-time inference calls */
  uint64_t meta_hits;        /* launches whose task block matched cached shapes */
  uint64_t meta_misses;      /* task blocks filled for new shapes */
  uint64_t shape_syncs;      /* stream synchronizations for data-dependent output shapes */
  uint64_t readbacks;        /* device -> host copies of values host code needed */
  uint64_t uploads;          /* host -> device copies of inputs and host values */
  uint64_t event_waits;      /* cross-stream waits queued */
  uint64_t output_copies;    /* graph outputs copied into a buffer the caller gave (data set) at
                               the end of a step, instead of being written there in place */
  uint64_t outputs_in_place; /* graph outputs an op wrote straight into the caller's buffer
                               (mx__dyn_bind_output): no copy */
} mx_dyn_exec_stats;

/* Fills *st (caller-owned). */
void mx__dyn_exec_stats_get(const mx_dyn_exec *e, mx_dyn_exec_stats *st);

/* --- per-op steps (what mx__dyn_exec_run is made of; the V2 runtime calls them directly) ------ *
 * A step is: mx__dyn_step_begin, optionally mx__dyn_bind_output per graph output, then for
 * every op i in 0..mx__dyn_op_count(): prepare, launch, sync_shape when mx__dyn_op_needs_sync,
 * free_after; then mx__dyn_step_end. Any
 * failure must be followed by mx__dyn_step_abort. Failures leave their message on the
 * executor. */

/* Ops in plan order. */
size_t mx__dyn_op_count(const mx_dyn_plan *p);
/* The graph node of op i. */
mx_node_id mx__dyn_op_node(const mx_dyn_plan *p, size_t i);
/* Plan stream op i is launched on (mx__dyn_exec_stream gives the stream), or -1 when it does not
 * run on a stream (host ops, evaluated values, aliases). */
int mx__dyn_op_stream(const mx_dyn_plan *p, size_t i);
/* True when op i is data-dependent: mx__dyn_op_sync_shape must follow its launch. */
bool mx__dyn_op_needs_sync(const mx_dyn_plan *p, size_t i);

/* BindSymbols: checks the inputs, binds the symbols, uploads host inputs device ops read and
 * orders the executor's streams after caller_stream (NULL: the first stream). */
MX_MUST_USE mx_status mx__dyn_step_begin(mx_dyn_exec *e, const mx_tensor *inputs, size_t n_inputs,
                                         mx_stream *caller_stream);
/* Zero copy for graph output k: the op producing it this step writes straight into buf->data
 * (device memory of the executor's device, ready when the caller stream reaches the step
 * start, borrowed until the step ends) instead of into an allocator block that step_end would
 * copy from. Call it after mx__dyn_step_begin and before the producing op is prepared, and
 * pass the same buffer to mx__dyn_step_end, which then makes no copy. The binding takes effect
 * only when the output is computed by a device op that is not data-dependent, buf is MX_DEVICE
 * with non-empty data, its dtype equals the output's and its dims equal the output's at
 * prepare time, it overlaps neither a graph input of this step nor another bound buffer, and
 * no other buffer is bound to the same value; otherwise (an input, an alias of an input, a
 * host value, another shape) nothing changes and step_end copies as before. buf NULL, data
 * NULL or a host placement is no binding. A failed step may leave buf partly written. Fails
 * (MX_ERR_INVALID_ARGUMENT) only outside a step or when k is out of range. */
MX_MUST_USE mx_status mx__dyn_bind_output(mx_dyn_exec *e, size_t k, const mx_tensor *buf);
/* Padded state (pitch.c), after mx__dyn_step_begin: graph input `name`'s data lies in a buffer
 * of `rows` rows along `axis` (its dims hold fewer); the kernels reading it get its strides. */
MX_MUST_USE mx_status mx__dyn_set_input_pitch(mx_dyn_exec *e, const char *name, int32_t axis, int64_t rows);
/* Graph output k is written in place into buf (a buffer of `rows` rows along `axis`, which a
 * padded input of the step may share: its producer appends to what is there). Unlike
 * mx__dyn_bind_output the binding must take: it fails when the producer is not a device op. */
MX_MUST_USE mx_status mx__dyn_bind_output_append(mx_dyn_exec *e, size_t k, const mx_tensor *buf, int32_t axis,
                                                 int64_t rows);
/* InferShape + AllocOutputs of op i: output dims (expressions, run-time inference or upper
 * bound) and output buffers. */
MX_MUST_USE mx_status mx__dyn_op_prepare(mx_dyn_exec *e, size_t i);
/* Launch of op i: cross-stream waits, the kernel on its stream (or on the host), the event its
 * consumers on other streams wait for. */
MX_MUST_USE mx_status mx__dyn_op_launch(mx_dyn_exec *e, size_t i);
/* SyncOutputShape of a data-dependent op i: waits for its stream, reads the actual output
 * shape, binds the op's fresh symbol. */
MX_MUST_USE mx_status mx__dyn_op_sync_shape(mx_dyn_exec *e, size_t i);
/* FreeMemory: releases the values whose last consumer is op i (stream-ordered). */
void mx__dyn_op_free_after(mx_dyn_exec *e, size_t i);
/* Releases one value's buffer now (stream-ordered); graph outputs included. */
void mx__dyn_value_free(mx_dyn_exec *e, mx_value_id v);
/* Joins the streams into caller_stream, delivers the outputs (see mx__dyn_exec_run) and releases
 * what the step still holds. */
MX_MUST_USE mx_status mx__dyn_step_end(mx_dyn_exec *e, mx_tensor *outputs, size_t n_outputs);
/* After a failure: drains and resets the streams, frees everything the step allocated. */
void mx__dyn_step_abort(mx_dyn_exec *e);

#endif /* MIXRT_DYNAMIC_EXEC_DYNAMIC_EXEC_H */
