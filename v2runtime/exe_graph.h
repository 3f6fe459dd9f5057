/* The execution graph (GE's "V2" exe graph, done as flat tables).
 *
 * A program is three graphs of small kernels — Init (once at load), Main (every step), DeInit (at
 * unload) — over one shared table of value slots, so what Init creates (static models, streams)
 * Main reads without copying. A value slot is 8 bytes: scalars and handles live in it inline;
 * anything larger is a pointer to memory owned by the program or the run.
 *
 * A node is a kernel invocation: its function, its input value ids then output value ids (one
 * flat array per graph), optional constant attribute bytes, and a priority. Successors are one
 * compact CSR array; initial indegrees and a precomputed priority order make the sequential
 * executor a plain loop and the topological ones cheap to reset per run. */
#ifndef MIXRT_V2RUNTIME_EXE_GRAPH_H
#define MIXRT_V2RUNTIME_EXE_GRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mixrt/status.h"

typedef union mx_exe_value {
  int64_t i;
  uint64_t u;
  double f;
  void *p;
} mx_exe_value;

typedef struct mx_exe_run mx_exe_run;
typedef struct mx_exe_node mx_exe_node;

/* A kernel: reads run->values at node->io[0 .. n_in), writes run->values at
 * node->io[n_in .. n_in + n_out). Returns MX_OK or a failure with a message in run->err. */
typedef mx_status (*mx_exe_fn)(mx_exe_run *run, const mx_exe_node *node);

/* Kernel flags. */
enum {
  /* Under the multi-thread executor, kernels with this flag run one at a time (they touch state
   * shared across nodes, e.g. an allocator or a stream's submission order). */
  MX_EXE_SERIAL = 1u << 0
};

struct mx_exe_node {
  mx_exe_fn fn;       /* the kernel */
  const uint32_t *io; /* value ids: n_in inputs, then n_out outputs (points into the graph) */
  const void *attr;   /* constant attribute bytes (8-byte aligned) or NULL */
  uint32_t attr_size; /* bytes at attr */
  uint16_t n_in, n_out;
  uint16_t kernel;   /* index in the kernel registry (names, traces, serialization) */
  uint16_t flags;    /* MX_EXE_* of the kernel */
  uint32_t priority; /* among ready nodes, smaller first */
};

typedef struct mx_exe_graph {
  mx_exe_node *nodes; /* n_nodes entries (owned) */
  uint32_t n_nodes;
  uint32_t *io; /* every node's value ids (owned) */
  size_t n_io;
  unsigned char *attr_data; /* every node's attribute bytes (owned) */
  size_t attr_size;
  uint32_t *succ_start; /* n_nodes + 1 entries: successors of i are succ[succ_start[i] ..) */
  uint32_t *succ;       /* (owned) */
  uint32_t *indegree;   /* initial indegree of each node (owned) */
  uint32_t *order;      /* a topological order by (priority, id) (owned) */
} mx_exe_graph;

/* Called after every node when tracing (start and end in ns of the monotonic clock). Under the
 * multi-thread executor it may be called from several threads at once. */
typedef void (*mx_exe_node_hook)(mx_exe_run *run, uint32_t node, uint64_t start_ns, uint64_t end_ns);

/* Per-run state every kernel sees. */
struct mx_exe_run {
  mx_exe_value *values;     /* the program's value table */
  void *user;               /* the caller's step state (a session step) */
  mx_error *err;            /* where a failing kernel explains itself */
  uint32_t failed_node;     /* index of the first failing node, or UINT32_MAX */
  mx_exe_node_hook on_node; /* tracing hook, or NULL (the executors then time nothing) */
};

/* Runs one node, timing it for the hook when one is set. */
static inline mx_status mx__exe_call(mx_exe_run *run, const mx_exe_node *nd, uint32_t index);

/* --- building ------------------------------------------------------------------------------- */

typedef struct mx_exe_builder mx_exe_builder;

MX_MUST_USE mx_status mx__exe_builder_create(mx_exe_builder **out);
void mx__exe_builder_destroy(mx_exe_builder *b);
/* Adds a node running registry kernel `kernel` with the given value ids and a copy of the
 * attribute bytes (may be NULL/0). Returns the node index in *node (may be NULL). */
MX_MUST_USE mx_status mx__exe_builder_add(mx_exe_builder *b, uint16_t kernel, const uint32_t *in,
                                          uint16_t n_in, const uint32_t *out, uint16_t n_out,
                                          const void *attr, uint32_t attr_size, uint32_t priority,
                                          uint32_t *node);
/* Adds an ordering edge from -> to (besides the data edges derived from value ids). */
MX_MUST_USE mx_status mx__exe_builder_edge(mx_exe_builder *b, uint32_t from, uint32_t to);
/* Number of nodes added so far. */
uint32_t mx__exe_builder_count(const mx_exe_builder *b);
/* Finishes: derives data edges (the node writing a value precedes every node reading it, within
 * this graph), merges ordering edges, computes indegrees and the priority order, resolves kernel
 * functions. Fails with MX_ERR_INVALID_GRAPH on a cycle or a value written twice. The builder
 * may be destroyed afterwards. */
MX_MUST_USE mx_status mx__exe_builder_finish(mx_exe_builder *b, mx_exe_graph *g, mx_error *err);

/* Frees what a graph owns (the struct itself is the caller's). */
void mx__exe_graph_release(mx_exe_graph *g);

/* --- executors ------------------------------------------------------------------------------ */

/* Runs every node in g->order. Stops at the first failure. */
MX_MUST_USE mx_status mx__exe_run_sequential(const mx_exe_graph *g, mx_exe_run *run);

/* Scratch for the topological executor (reusable across runs of one graph; not thread-safe). */
typedef struct mx_exe_topo_scratch {
  uint32_t *indegree; /* working copy (n_nodes) */
  uint32_t *queue;    /* ready ring (n_nodes) */
  uint32_t n;         /* capacity */
} mx_exe_topo_scratch;

/* Runs g with a ready queue and working indegrees (nodes become ready when their predecessors
 * finished). Same results as the sequential executor. */
MX_MUST_USE mx_status mx__exe_run_topological(const mx_exe_graph *g, mx_exe_run *run,
                                              mx_exe_topo_scratch *scratch);
void mx__exe_topo_scratch_release(mx_exe_topo_scratch *s);

/* A pool of worker threads for the multi-thread executor (pinned with hwloc when possible). */
typedef struct mx_exe_pool mx_exe_pool;

/* Creates a pool of `threads` workers (0: one per core minus the caller's). */
MX_MUST_USE mx_status mx__exe_pool_create(uint32_t threads, mx_exe_pool **out, mx_error *err);
void mx__exe_pool_destroy(mx_exe_pool *p);
uint32_t mx__exe_pool_threads(const mx_exe_pool *p);
/* Runs g on the pool (the calling thread takes part): atomic indegrees and a lock-free ready
 * queue; MX_EXE_SERIAL kernels run under one lock. One run at a time per pool. */
MX_MUST_USE mx_status mx__exe_run_parallel(mx_exe_pool *p, const mx_exe_graph *g, mx_exe_run *run);

#include "common/clock.h"

static inline mx_status mx__exe_call(mx_exe_run *run, const mx_exe_node *nd, uint32_t index) {
  if (!run->on_node) return nd->fn(run, nd);
  uint64_t t0 = mx__now_ns();
  mx_status st = nd->fn(run, nd);
  run->on_node(run, index, t0, mx__now_ns());
  return st;
}

#endif /* MIXRT_V2RUNTIME_EXE_GRAPH_H */
