/* Private pieces of the static executor shared by its files: the plan records (what a .mxm file
 * stores) and the compile context that schedule.c, streams.c and memplan.c work on. */
#ifndef MIXRT_STATIC_EXEC_STATIC_EXEC_IMPL_H
#define MIXRT_STATIC_EXEC_STATIC_EXEC_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/arena.h"
#include "common/error.h"
#include "graph/ir.h"
#include "kernels/kernel.h"
#include "static_exec/static_exec.h"

#define MX__NO_ALLOC UINT32_MAX /* a tensor without data (empty or omitted) */
#define MX__NONE     UINT32_MAX /* no task / event / index */

/* Fixed alloc ids (then INPUT i = MX__ID_INPUT0 + i, OUTPUT j = MX__ID_INPUT0 + n_in + j). */
#define MX__ID_WEIGHT 0u
#define MX__ID_FM     1u
#define MX__ID_INPUT0 2u

/* Limits that loaded plans are checked against. */
#define MX__MAX_TASKS        (1u << 24)
#define MX__MAX_TASK_TENSORS 4096u
#define MX__MAX_IO           (1u << 16)
#define MX__MAX_PARAMS_BYTES (1u << 20)

/* --- plan records ----------------------------------------------------------------------------- */

typedef enum mx__task_kind { MX__TASK_KERNEL = 0, MX__TASK_COPY = 1 } mx__task_kind;

typedef struct mx__ptensor {
  mx_dtype dtype; /* MX_DTYPE_UNDEFINED for an omitted optional input */
  int32_t rank;
  int64_t dims[MX_MAX_RANK]; /* concrete */
  uint64_t nbytes;           /* bytes of the data (from dtype and dims) */
  uint32_t alloc;            /* alloc id of the data, MX__NO_ALLOC when there is none */
  uint64_t offset;           /* bytes from the entry's base */
  int32_t n_values;          /* -1, or the count of values[]: the concrete value of a small
                                integer input that shapes the outputs (lets a loader re-run
                                inference); plan arena */
  int64_t *values;
} mx__ptensor;

typedef struct mx__ptask {
  mx__task_kind kind;
  const char *name;   /* node name or "copy:<output>"; plan arena */
  const char *op;     /* op type ("Copy" for copies); plan arena */
  const char *domain; /* "" for the default ONNX domain; plan arena */
  int64_t opset;      /* version of the op's domain (re-inference at load) */
  int32_t key_dtype;  /* dtype of the tensor that chose the kernel (information) */
  void *params;       /* parsed params bytes (plan arena), NULL when params_size is 0 */
  uint32_t params_size;
  mx_attr *attrs; /* the node's attributes (plan arena deep copies): a loader parses
                     them again and requires the same params bytes */
  uint32_t n_attrs;
  uint32_t n_in, n_out; /* copies: 1 and 1 (t[0] source, t[1] destination) */
  mx__ptensor *t;       /* n_in + n_out records; plan arena */
  uint64_t ws_offset;   /* workspace slice in FM (bytes, 64-aligned) */
  uint64_t ws_size;     /* 0: none */
  uint32_t stream;      /* internal stream */
  uint32_t *waits;      /* events to wait for before the task; plan arena */
  uint32_t n_waits;
  uint32_t *records; /* events recorded after the task; plan arena */
  uint32_t n_records;
} mx__ptask;

typedef struct mx__pio {
  const char *name; /* plan arena */
  mx_dtype dtype;
  int32_t rank;
  int64_t dims[MX_MAX_RANK];
  uint64_t nbytes;
  bool frozen;
} mx__pio;

typedef struct mx__pbuf {
  uint64_t offset, size; /* bytes in FM */
  uint32_t *users;       /* ascending task indices; plan arena */
  uint32_t n_users;
  bool workspace;
  const char *name; /* plan arena */
} mx__pbuf;

struct mx_static_plan {
  mx_arena arena; /* every string and array of the plan except the weights */
  const char *name;
  uint32_t n_streams; /* internal streams (>= 1) */
  uint32_t n_events;
  mx_hal_model_mode mode;
  bool fm_external;
  bool trusted; /* made by mx__static_compile (loaded plans are checked first) */
  uint32_t n_inputs, n_outputs;
  mx__pio *inputs, *outputs;
  uint32_t n_tasks;
  mx__ptask *tasks; /* in schedule order */
  uint32_t n_buffers;
  mx__pbuf *buffers;
  uint64_t fm_bytes, lower_bound, no_reuse;
  uint32_t cross_edges; /* cross-stream data edges before event reduction */
  uint32_t in_place, aliases;
  const char *placement; /* static text or plan arena */
  uint8_t *weights;      /* weight_bytes bytes, 64-byte aligned (malloc'd, or inside weights_map), or NULL */
  uint64_t weight_bytes;
  struct mx__mxm_mapping *weights_map; /* the mapped .mxm (or weights file) the weights lie in
                                          (held), NULL when they are malloc'd */
};

/* A mapped .mxm or weights file shared by the plans whose weights lie in it (static_exec/mxm.c):
 * unmapped when the last holder releases it. */
typedef struct mx__mxm_mapping mx__mxm_mapping;
mx__mxm_mapping *mx__mxm_mapping_retain(mx__mxm_mapping *m);
void mx__mxm_mapping_release(mx__mxm_mapping *m);
/* A holder of a heap block (aligned_alloc, taken over; one holder): compiled plans keep their
 * weights in one, so the static models of a host-memory device use them in place, as they do a
 * mapped file's, instead of each holding a copy. NULL when out of memory. */
mx__mxm_mapping *mx__mxm_mapping_wrap_heap(void *data, size_t size);

/* A new empty plan (arena ready), or NULL when out of memory. */
mx_static_plan *mx__plan_new(void);
/* Number of allocation-table entries of a plan. */
static inline uint32_t mx__plan_ids(const mx_static_plan *p) {
  return MX__ID_INPUT0 + p->n_inputs + p->n_outputs;
}
/* Kind and index (input / output number) of alloc id `id`. */
mx_static_alloc_kind mx__plan_id_kind(const mx_static_plan *p, uint32_t id, uint32_t *index);
/* Size in bytes of the region behind alloc id `id`. */
uint64_t mx__plan_id_size(const mx_static_plan *p, uint32_t id);
/* Fills the public description of a plan (or model) input or output; returns true. out->name
 * borrows io->name. */
bool mx__pio_info(const mx__pio *io, mx_static_io *out);

/* Deep-copies attributes into a plan's arena (GRAPH attributes are refused). */
MX_MUST_USE mx_status mx__plan_copy_attrs(mx_static_plan *p, const mx_attr *src, uint32_t n, mx_attr **out,
                                          mx_error *err);

/* Checks a plan that came from outside (a file): every index, size and offset, the kernels and
 * their params (inference re-run on the stored shapes), that bytes are written before they are
 * read, and on several streams that events order every two tasks sharing bytes
 * (mx__plan_check_order). Errors are MX_ERR_MALFORMED
 * naming the task or field. */
MX_MUST_USE mx_status mx__plan_check(const mx_static_plan *p, mx_error *err);

/* The ordering part of mx__plan_check (check_order.c), for a plan whose tasks, ranges and
 * events it already passed: a task reads bytes of the FM arena or an output only after an
 * earlier task wrote them, and two tasks on different streams using the same such bytes, one
 * writing, must be ordered by a chain of events. */
MX_MUST_USE mx_status mx__plan_check_order(const mx_static_plan *p, mx_error *err);

/* Bytes of a tensor with these dtype and dims; false on overflow, a bad dtype or dim. */
bool mx__dims_nbytes(mx_dtype dtype, int32_t rank, const int64_t *dims, uint64_t *out);

/* Argument block of a copy task (the HAL function is mx__static_copy_fn). */
typedef struct mx__copy_args {
  void *dst;
  const void *src;
  uint64_t n;
} mx__copy_args;
MX_MUST_USE mx_status mx__static_copy_fn(void *args, size_t size);

/* 64-bit checksum of a byte range (format-stable: documented in docs/static.md). */
uint64_t mx__mxm_checksum(const void *data, size_t n);

/* --- compile context -------------------------------------------------------------------------- */

typedef struct mx__ctask {
  mx__task_kind kind;
  mx_node_id node;         /* kernel tasks: the graph node */
  mx_value_id copy_src;    /* copy tasks: the value copied */
  uint32_t copy_out;       /* copy tasks: the graph output written */
  const mx_kernel_def *kd; /* kernel tasks: the kernel found for the dtypes */
  uint64_t ws_size;        /* kernel workspace bytes */
  double cost;             /* estimated device time, ns */
  double blevel;           /* longest estimated path from the task to the end, ns */
  uint32_t *preds;         /* distinct tasks producing its inputs (ctx arena) */
  uint32_t n_preds;
  uint32_t *succs; /* distinct tasks consuming its outputs (ctx arena) */
  uint32_t n_succs;
  uint32_t pos; /* position in the schedule */
  uint32_t stream;
  uint32_t spos;   /* 1-based position on its stream */
  uint32_t event;  /* event recorded after it, or MX__NONE */
  uint32_t *waits; /* events it waits for (ctx arena) */
  uint32_t n_waits;
} mx__ctask;

typedef enum mx__loc {
  MX__LOC_NONE = 0, /* not used by any task */
  MX__LOC_INPUT = 1,
  MX__LOC_WEIGHT = 2,
  MX__LOC_OUTPUT = 3,
  MX__LOC_FM = 4
} mx__loc;

typedef struct mx__cval {
  mx__loc loc;       /* where the root's bytes live */
  uint32_t index;    /* INPUT / OUTPUT: the graph input / output number */
  mx_value_id root;  /* alias root (itself unless produced by an eliminated alias op) */
  uint32_t producer; /* task writing it (of the root for aliases), or MX__NONE */
  uint64_t nbytes;
  uint32_t group;         /* FM roots: union-find parent (a value id) for in-place sharing */
  uint32_t buffer;        /* FM group roots: buffer index, MX__NONE when empty */
  uint64_t weight_offset; /* WEIGHT roots */
} mx__cval;

typedef struct mx__cbuf {
  uint64_t size;   /* bytes, multiple of 64 */
  uint32_t *users; /* tasks accessing it (ctx malloc'd, grown) */
  uint32_t n_users, cap_users;
  uint32_t lo, hi; /* first / last schedule position of a user */
  uint32_t first;  /* the task at lo (writes it first) */
  uint64_t offset;
  bool workspace;
  mx_value_id value; /* the group root (value buffers) */
  uint32_t task;     /* workspace buffers: their task */
} mx__cbuf;

typedef struct mx__compile {
  mx_graph *g;
  mx_error *err;
  mx_arena arena; /* scratch of the compile (freed at the end) */
  uint32_t max_streams;
  uint32_t n_tasks;
  mx__ctask *tasks;   /* kernels in graph topological order, then copies */
  uint32_t *order;    /* schedule: order[pos] = task */
  mx__cval *vals;     /* per value id */
  uint32_t n_streams; /* streams used */
  uint32_t *vc;       /* vc[t * max_streams + s]: last 1-based position of stream s that
                         is finished before task t starts (vector clock) */
  uint32_t n_events, cross_edges, n_waits;
  mx__cbuf *bufs;
  uint32_t n_bufs;
  uint32_t in_place, aliases;
  uint64_t fm_bytes, lower_bound, no_reuse;
  const char *placement;
  mx_value_id *wvals; /* constants in the WEIGHT region, in layout order (malloc'd) */
  uint32_t n_wvals;
} mx__compile;

/* a happens-before b on the device (stream order and events), a != b. */
static inline bool mx__hb(const mx__compile *c, uint32_t a, uint32_t b) {
  if (a == b) return false;
  const mx__ctask *ta = &c->tasks[a];
  return c->vc[(size_t)b * c->max_streams + ta->stream] >= ta->spos;
}

/* Union-find root of an FM value's in-place group (with path compression). */
static inline uint32_t mx__group_of(mx__compile *c, uint32_t v) {
  uint32_t r = v;
  while (c->vals[r].group != r) r = c->vals[r].group;
  while (c->vals[v].group != r) {
    uint32_t next = c->vals[v].group;
    c->vals[v].group = r;
    v = next;
  }
  return r;
}

/* schedule.c: priority list scheduling (critical path first) into c->order / task pos. */
MX_MUST_USE mx_status mx__static_schedule(mx__compile *c);
/* streams.c: stream per task, then events with the redundant ones removed and the vector
 * clocks that mx__hb reads. */
MX_MUST_USE mx_status mx__static_streams(mx__compile *c);
/* memplan.c: in-place sharing, FM buffers, lower bound and offsets. */
MX_MUST_USE mx_status mx__static_memplan(mx__compile *c);

#endif /* MIXRT_STATIC_EXEC_STATIC_EXEC_IMPL_H */
