/* Private structures of the dynamic executor (never included outside dynamic_exec/).
 *
 * The plan (plan.c, plan_streams.c) is immutable once built and indexed two ways: ops in plan
 * order (mx__dyn_op) and values by graph value id (mx__dyn_pval). An executor (exec.c) keeps
 * the run-time state of the same values (mx__dyn_val) and ops (mx__dyn_opstate) plus the
 * step's symbol values. The per-step work is split by purpose: bind.c (inputs and symbols),
 * shapes.c (output dims), host_ops.c (host kernels, evaluated values, read-backs and uploads),
 * launch.c (task blocks, launches, data-dependent shapes, kernel failures), exec.c (step
 * begin/end, freeing, abort, lifetime). */
#ifndef MIXRT_DYNAMIC_EXEC_DYNAMIC_EXEC_IMPL_H
#define MIXRT_DYNAMIC_EXEC_DYNAMIC_EXEC_IMPL_H

#include <stdatomic.h>

#include "common/error.h"
#include "dynamic_exec/dynamic_exec.h"
#include "graph/passes/passes.h"
#include "hal/hal.h"
#include "kernels/kernel.h"
#include "kernels/prepack.h"

#define MX__DYN_NONE UINT32_MAX

/* --- plan ------------------------------------------------------------------------------------- */

/* One output dim (or one element of a symbolic value) in the form run time evaluates. */
typedef enum mx__dyn_dim_kind {
  MX__DYN_DIM_NONE = 0,  /* not formable: unknown, or uses a symbol nothing binds before */
  MX__DYN_DIM_CONST = 1, /* v is the value */
  MX__DYN_DIM_SYM = 2,   /* v is the symbol index */
  MX__DYN_DIM_EXPR = 3,  /* v is the mx_dim expression (mx_sym_eval) */
  MX__DYN_DIM_BIND = 4   /* not formable before the op; exactly symbol v, which the actual
                            value binds once the op ran (data-dependent / inferred / host) */
} mx__dyn_dim_kind;

typedef struct mx__dyn_dimx {
  int64_t v;    /* see mx__dyn_dim_kind */
  uint8_t kind; /* mx__dyn_dim_kind */
} mx__dyn_dimx;

/* True when run time can evaluate d before its op runs. */
static inline bool mx__dyn_dim_formable(const mx__dyn_dimx *d) {
  return d->kind == MX__DYN_DIM_CONST || d->kind == MX__DYN_DIM_SYM || d->kind == MX__DYN_DIM_EXPR;
}

typedef enum mx__dyn_op_kind {
  MX__DYN_OP_DEVICE = 0, /* kernel launched on a stream */
  MX__DYN_OP_HOST = 1,   /* kernel run on the host thread on host tensors */
  MX__DYN_OP_EVAL = 2,   /* host outputs computed from their symbolic values */
  MX__DYN_OP_ALIAS = 3,  /* output 0 shares input 0's buffer; nothing runs */
  MX__DYN_OP_SKIP = 4    /* nothing at run time reads its outputs */
} mx__dyn_op_kind;

/* Op flags. */
enum {
  MX__DYN_INFER = 1u << 0,      /* output shapes need run-time inference */
  MX__DYN_DATA_DEP = 1u << 1,   /* data-dependent: upper bound, then sync and bind */
  MX__DYN_SHAPE_ONLY = 1u << 2, /* host op reading only input 0's shape */
  MX__DYN_CONTROL = 1u << 3     /* host op running subgraphs (mx_dyn_options.control_run): its
                                   output shapes are known once it ran */
};

/* Where a value's data is produced. */
typedef enum mx__dyn_home {
  MX__DYN_HOME_NONE = 0,   /* dead or produced by a skipped op */
  MX__DYN_HOME_INPUT = 1,  /* graph input: host or device, the caller decides per step */
  MX__DYN_HOME_CONST = 2,  /* constant: host data in the graph, device copy made at create */
  MX__DYN_HOME_DEVICE = 3, /* written by a device op (or an alias of such a value) */
  MX__DYN_HOME_HOST = 4    /* written on the host (host/eval op, or an alias of one) */
} mx__dyn_home;

/* Value flags. */
enum {
  MX__DYN_V_OUTPUT = 1u << 0,    /* a graph output */
  MX__DYN_V_DEV_READ = 1u << 1,  /* a device op reads its data */
  MX__DYN_V_HOST_READ = 1u << 2, /* a host kernel or run-time inference reads its data */
  MX__DYN_V_FORMABLE = 1u << 3   /* rank known and every dim formable */
};

typedef struct mx__dyn_pval {
  uint8_t home;  /* mx__dyn_home */
  uint8_t flags; /* MX__DYN_V_* */
  int8_t rank;   /* inferred rank, -1 when unknown */
  mx_dtype dtype;
  uint32_t esize;                 /* bytes per element */
  mx__dyn_dimx dims[MX_MAX_RANK]; /* inferred dims as run time evaluates them */
  uint32_t producer;              /* plan op index, or MX__DYN_NONE */
  uint32_t last_op;               /* plan op index of the last consumer; MX__DYN_NONE: freed right
                              after the producer (never for outputs) */
  uint32_t input_index;           /* position among the graph inputs, or MX__DYN_NONE */
  uint32_t src_op;                /* device op whose launch writes the data (through aliases), or NONE */
  int32_t upload_event;           /* host-home value read on several streams: event index, else -1 */
  uint32_t sv_first;              /* eval and host outputs: first entry in plan->svx (sv_len entries) */
  int32_t sv_len;                 /* eval and host outputs: elements of the symbolic value, else -1 */
  uint32_t host_cap;              /* host-home values: bytes of the persistent host buffer */
} mx__dyn_pval;

typedef struct mx__dyn_op {
  mx_node_id node;
  const mx_node *nd;           /* borrowed from the graph */
  const mx_kernel_def *kernel; /* device and host ops; NULL otherwise */
  uint8_t kind;                /* mx__dyn_op_kind */
  uint8_t stream;              /* plan stream of a device op */
  uint16_t flags;              /* MX__DYN_INFER | MX__DYN_DATA_DEP | MX__DYN_SHAPE_ONLY */
  uint32_t n_in, n_out;
  int32_t event;               /* event recorded after its launch, or -1 */
  uint32_t wait_first, n_wait; /* events to wait for before its launch: plan->waits[...] */
  uint32_t free_first, n_free; /* values released after it: plan->frees[...] */
  uint64_t sym_mask;           /* symbols its output dims (and values) depend on (bit 63:
                                     any symbol with index >= 63) */
  uint32_t block_size;         /* bytes of one launch-metadata entry */
} mx__dyn_op;

struct mx_dyn_plan {
  mx_graph *g; /* borrowed */
  mx_dyn_options opt;
  mx__dyn_op *ops; /* n_ops, plan order (owned) */
  size_t n_ops;
  mx__dyn_pval *vals; /* by graph value id, g->n_values entries (owned) */
  size_t n_values;
  uint32_t *waits;      /* event indices (owned) */
  uint32_t *frees;      /* value ids (owned) */
  mx__dyn_dimx *svx;    /* symbolic values of eval outputs (owned) */
  size_t n_syms;        /* symbols of the graph's table when the plan was built */
  uint32_t *input_syms; /* per graph input dim: symbol index bound there, or NONE;
                                     n_inputs * MX_MAX_RANK entries (owned) */
  uint32_t *late_syms;  /* symbols bound during a step (by ops), n_late (owned) */
  size_t n_late;
  uint32_t n_streams; /* plan streams used (>= 1) */
  uint32_t n_events;  /* op events + upload events */
  uint32_t max_io;    /* most tensors of one op */
  mx_dyn_plan_info info;
};

/* Builds stream assignment, events and waits (plan_streams.c). */
MX_MUST_USE mx_status mx__dyn_plan_streams(mx_dyn_plan *p, mx_error *err);

/* Bytes of a tensor of esize-byte elements with dims[0..rank) (rank within 0..MX_MAX_RANK):
 * false for a negative dim or when the element count overflows int64 or the size size_t (the
 * limits of mx_tensor_nbytes, without its dtype lookup and divisions). */
static inline bool mx__dyn_dims_bytes(const int64_t *dims, int32_t rank, size_t esize, size_t *out) {
  int64_t n = 1;
  for (int32_t d = 0; d < rank; d++)
    if (dims[d] < 0 || __builtin_mul_overflow(n, dims[d], &n)) return false;
  return !__builtin_mul_overflow((size_t)n, esize, out);
}

/* Symbol mask bit of symbol index s. */
static inline uint64_t mx__dyn_sym_bit(size_t s) { return 1ull << (s < 63 ? s : 63); }

/* --- executor --------------------------------------------------------------------------------- */

/* Run-time state of one value. */
typedef struct mx__dyn_val {
  void *dev;     /* device data this step, or NULL */
  void *host;    /* host data this step, or NULL */
  size_t nbytes; /* bytes of the current shape */
  int64_t dims[MX_MAX_RANK];
  int32_t rank;
  uint32_t buf; /* value owning the device block `dev` points into, NONE: borrowed */
  /* Owner fields (this value allocated `block`): */
  void *block;        /* allocator block, NULL when none */
  uint32_t refs;      /* live values sharing the block */
  uint32_t use_mask;  /* executor streams that used the block */
  int8_t last_stream; /* executor stream of the last use (-1: none / host only) */
  /* */
  int8_t ready_stream;  /* device data is complete in this stream's order; -1: caller */
  int8_t upload_stream; /* stream that uploaded host data this step, -1: none */
  bool live;            /* holds this step's data */
  bool pinned;          /* constants: live for the executor's lifetime, never released */
  uint64_t live_step;   /* the step whose data a live value holds (mx_dyn_exec.step) */
  void *host_buf;       /* persistent host buffer (owned), host_cap bytes */
  size_t host_cap;
  uint32_t bound_out; /* graph output whose caller buffer (mx_dyn_exec.out_bind) its
                              producer writes this step, NONE: none */
  int32_t pad_axis;   /* with pad_rows: the axis the data is padded along */
  int64_t pad_rows;   /* 0: contiguous; else this step's data lies in a buffer of pad_rows rows
                       along pad_axis (a session state's capacity: mx__dyn_set_input_pitch,
                       mx__dyn_bind_output_append), and the kernels get its strides */
} mx__dyn_val;

/* Run-time state of one op. */
typedef struct mx__dyn_opstate {
  unsigned char *meta;      /* meta_entries launch blocks of op->block_size bytes (owned) */
  uint8_t n_meta;           /* filled entries */
  uint8_t last_meta;        /* entry used last */
  uint8_t next_victim;      /* entry to refill next */
  bool shapes_valid;        /* output dims of the previous step are still in the value states */
  bool prepack_retry;       /* its constant's pre-pack ran out of memory: the next launch retries */
  int64_t *shape_out;       /* data-dependent ops: n_out shape records (owned) */
  unsigned char *infer_key; /* inferred ops: input shapes and values of the last inference
                               (owned), infer_key_len bytes of infer_key_cap */
  size_t infer_key_len, infer_key_cap;
} mx__dyn_opstate;

/* Last op finished on one stream (step << 32 | op), on its own cache line: written by that
 * stream's device side after every kernel, read by the host only after a failure. */
typedef struct mx__dyn_done {
  _Alignas(64) _Atomic uint64_t v;
} mx__dyn_done;

/* First failure of a launched kernel, written on the device side. Cache-line aligned so the
 * device side never shares a line with the host's per-op fields. */
typedef struct mx__dyn_failrec {
  _Alignas(64) _Atomic uint32_t op; /* failing op, MX__DYN_NONE when none */
  _Atomic(const char *) why;        /* the kernel's static explanation, or NULL */
  mx__dyn_done done[MX_DYN_MAX_STREAMS];
} mx__dyn_failrec;

/* Header in front of every kernel task block the executor launches. */
typedef struct mx__dyn_launch_hdr {
  mx__dyn_failrec *fail; /* the executor's failure record */
  uint32_t op;           /* plan op index */
  uint16_t stream;       /* executor stream index */
  uint16_t step;         /* low bits of the step number */
} mx__dyn_launch_hdr;

#define MX__DYN_HDR_SIZE ((uint32_t)sizeof(mx__dyn_launch_hdr))

struct mx_dyn_exec {
  mx_device *dev;              /* borrowed */
  const mx_dyn_plan *plan;     /* borrowed */
  const mx_graph *g;           /* plan->g */
  mx_caching_allocator *alloc; /* owned when own_alloc */
  bool own_alloc;
  mx_stream *streams[MX_DYN_MAX_STREAMS];     /* by plan stream */
  uint32_t n_streams;                         /* plan->n_streams */
  mx_stream *own_streams[MX_DYN_MAX_STREAMS]; /* streams the executor created (owned) */
  uint32_t n_own_streams;
  mx_event **events;                            /* plan->n_events (owned) */
  mx_event *start_event;                        /* caller -> streams at step start (owned) */
  mx_event *end_events[MX_DYN_MAX_STREAMS];     /* streams -> caller at step end (owned) */
  mx_event *h2d_events[MX_DYN_MAX_STREAMS + 1]; /* last upload from executor host memory per
                                     stream ([MX_DYN_MAX_STREAMS]: the caller stream) (owned) */
  uint32_t h2d_pending;                         /* bit k: h2d_events[k] must be recorded at the step end and
                                     waited for before the next step rewrites the host buffers */

  mx__dyn_val *vals;     /* by value id (owned) */
  bool any_pad;          /* a value was ever padded (pad_rows): launch blocks compare strides */
  void *const_block;     /* device copies of the constants kernels read, one block
                                     (owned, mx_device_alloc, or held from
                                     mx_device_shared_acquire when const_shared); NULL when
                                     there are none */
  bool const_shared;     /* const_block is a shared block of the device */
  mx_kprepack_cache prepacks; /* constants of Conv / MatMul / Gemm ops packed for their kernels
                                 at the first launch of each layout (host-memory devices),
                                 freed with the executor */
  bool prepack_ok;            /* pre-packing is on and the device is host memory */
  mx_status prepack_error;    /* a device failure keeping a pre-packed block other than running
                                 out of memory (which is absorbed and retried): the launch fails */
  mx__dyn_opstate *ops;  /* by plan op (owned) */
  int64_t *sym_val;      /* this step's symbol values, INT64_MIN unbound (owned) */
  int64_t *sym_prev;     /* values of the previous step (change detection) (owned) */
  uint64_t changed;      /* symbol bits whose value differs from the previous step */
  mx_symtab *scratch;    /* run-time inference table (owned; renewed now and then) */
  uint32_t scratch_uses; /* inferences since the table was created */
  mx_value_info *infos;  /* max_io scratch infos for inference (owned) */
  mx_dim *info_sv;       /* max_io * MX_SV_MAX (owned) */
  mx_tensor *info_data;  /* max_io host tensors for infos (owned) */

  void *host_ws; /* host kernels' workspace (owned), host_ws_cap bytes */
  size_t host_ws_cap;
  bool *out_alloc;        /* per graph output: allocated by this step's delivery (owned) */
  uint32_t *in_pos;       /* per graph input: the caller's tensor that matched it by
                                     name last step (its position; tried first) (owned) */
  uint8_t *in_exprs;      /* per graph input: 1 when a declared dim is an expression to
                                     check once the symbols are bound (owned) */
  mx_tensor *out_bind;    /* per graph output: the caller's buffer bound this step
                                     (mx__dyn_bind_output; data borrowed, NULL: none) (owned) */
  size_t *out_bind_bytes; /* per graph output: bytes of out_bind's buffer */
  uint32_t n_out_bound;   /* entries of out_bind with data set */
  uint32_t *bound_syms;   /* symbols reset at every step start (owned), n_bound */
  size_t n_bound;
  uint32_t cur_op;       /* op being prepared or launched (failure messages) */
  mx_stream *caller;     /* this step's caller stream (borrowed) */
  uint64_t step;         /* step counter */
  uint32_t used_streams; /* bit per executor stream the step queued work on */
  bool in_step;          /* between begin and end/abort */
  mx__dyn_failrec fail;  /* device-side failure record */
  _Alignas(64) mx_dyn_exec_stats stats;
  mx_error err; /* last failure */
};

/* bind.c */
MX_MUST_USE mx_status mx__dyn_bind_inputs(mx_dyn_exec *e, const mx_tensor *inputs, size_t n);
/* Binds symbol s to value for this step (recording whether it changed since the previous step);
 * false when it is already bound to another value this step (the caller reports it). */
bool mx__dyn_bind_symbol(mx_dyn_exec *e, uint32_t s, int64_t value);

/* shapes.c */
MX_MUST_USE mx_status mx__dyn_eval_dimx(const mx_dyn_exec *e, const mx__dyn_dimx *d, int64_t *out);
MX_MUST_USE mx_status mx__dyn_shapes(mx_dyn_exec *e, size_t i);
/* Binds the symbols that are exactly output dims of op i in the graph to their actual values and
 * checks the concrete ones. */
MX_MUST_USE mx_status mx__dyn_bind_outputs(mx_dyn_exec *e, size_t i);
/* Fills e->infos for op i from the current input states (reading back value inputs). */
MX_MUST_USE mx_status mx__dyn_fill_infos(mx_dyn_exec *e, size_t i, bool values);

/* host_ops.c */
MX_MUST_USE mx_status mx__dyn_readback(mx_dyn_exec *e, mx_value_id v);
MX_MUST_USE mx_status mx__dyn_upload(mx_dyn_exec *e, mx_value_id v, uint32_t stream);
MX_MUST_USE mx_status mx__dyn_run_host(mx_dyn_exec *e, size_t i);
MX_MUST_USE mx_status mx__dyn_host_reserve(mx__dyn_val *rv, size_t nbytes);
/* control_op.c: runs control op i (MX__DYN_CONTROL) through the plan's control_run. */
MX_MUST_USE mx_status mx__dyn_run_control(mx_dyn_exec *e, size_t i);

/* launch.c */
/* The cached launch block of op i matching the current shapes (filled on a miss). */
unsigned char *mx__dyn_meta(mx_dyn_exec *e, size_t i);
MX_MUST_USE mx_status mx__dyn_launch_device(mx_dyn_exec *e, size_t i);
/* After a stream failed: names the failing node in e->err (status st). */
mx_status mx__dyn_kernel_failure(mx_dyn_exec *e, mx_status st);

/* exec.c */
mx_status mx__dyn_fail(mx_dyn_exec *e, mx_status st, const char *fmt, ...) MX_PRINTF(3, 4);
/* Element strides of rv's data this step: row-major over its dims, the padded axis counting
 * pad_rows (pitch.c). */
void mx__dyn_val_strides(const mx__dyn_val *rv, int64_t *strides);
/* Allocates a device block for value v on executor stream s (NULL stream when s < 0). */
MX_MUST_USE mx_status mx__dyn_alloc_value(mx_dyn_exec *e, mx_value_id v, size_t nbytes, int s);
/* Marks v's device block as used on stream s. */
static inline void mx__dyn_mark_use(mx_dyn_exec *e, mx_value_id v, uint32_t s) {
  uint32_t b = e->vals[v].buf;
  if (b == MX__DYN_NONE) return;
  mx__dyn_val *o = &e->vals[b];
  o->use_mask |= 1u << s;
  o->last_stream = (int8_t)s;
}
/* Marks rv written this step with its data at host (or nowhere yet: NULL), no device copy and no
 * stream to wait for: the state of every host-computed output. */
static inline void mx__dyn_val_set_host(mx_dyn_exec *e, mx__dyn_val *rv, void *host) {
  rv->host = host;
  rv->dev = NULL;
  rv->buf = MX__DYN_NONE;
  rv->live = true;
  rv->live_step = e->step;
  rv->ready_stream = -1;
  rv->upload_stream = -1;
}

#endif /* MIXRT_DYNAMIC_EXEC_DYNAMIC_EXEC_IMPL_H */
