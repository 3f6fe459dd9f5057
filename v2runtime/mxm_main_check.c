/* The Main graph of a loaded .mxm file, checked as a whole before a step runs it.
 *
 * mxm_io.c checks each node alone: its kernel exists, its slots are in range, its attribute names
 * a call, op, input, output or value of the restored program, and the kernel belongs in Main.
 * The kernels trust more than that. They find their call through the attribute and their data
 * through the per-value records, so the graph's edges are all that orders them, and a kernel
 * that never runs leaves its values as the previous step (or nothing) left them. A file whose
 * Main graph executes a static partition before the one producing its input, or frees a value
 * before its last reader, would compute on stale or released memory that the allocator still
 * owns: no sanitizer sees it, the results are just wrong.
 *
 * So this checks, against the program:
 *   - roles: every step kernel of every call, dynamic op, graph input and graph output is in
 *     Main exactly once; a dynamic op runs with Launch when it is a device op and HostCompute
 *     when it is a host op, and has a SyncOutputShape exactly when it is data-dependent; every
 *     value a call produces has exactly one FreeValue, and no other value has one;
 *   - order: each of the precedences below holds in the graph (a path of data or ordering
 *     edges, so that every executor, sequential or not, keeps it):
 *       the producer of a value (its FeedInput, StaticModelExecute or DynStepEnd) precedes
 *         every call reading it (StaticModelUpdateArgs, BindSymbols), OutputDeliver of it and
 *         FreeValue of it;
 *       a static call: StaticAllocOutputs, StaticModelUpdateArgs, StaticModelExecute;
 *       a dynamic call: BindSymbols, then per op InferShape, Launch or HostCompute,
 *         SyncOutputShape when there is one, FreeMemory, then DynStepEnd;
 *       every last reader of a value (StaticModelExecute or DynStepEnd of a call reading it,
 *         OutputDeliver of it) precedes its FreeValue.
 *
 * Lowering writes every precedence as a direct edge, so the check first looks at the source's
 * successors. Only what is not direct (a hand-written file may order through other nodes) takes
 * the general test: reachability from 64 sources at a time, one pass over the topological order
 * per 64 sources. */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "v2runtime/exe_registry.h"
#include "v2runtime/session_impl.h"

#define NONE UINT32_MAX

/* The Main kernels, in the order of the role table below. */
enum {
  K_FEED,
  K_DELIVER,
  K_FREE_VALUE,
  K_ALLOC,
  K_ARGS,
  K_EXECUTE,
  K_BIND,
  K_END,
  K_INFER,
  K_LAUNCH,
  K_HOST,
  K_SYNC,
  K_FREE_MEMORY,
  K_COUNT
};

static const char *const kernel_names[K_COUNT] = {
    "FeedInput",          "OutputDeliver",   "FreeValue",  "StaticAllocOutputs", "StaticModelUpdateArgs",
    "StaticModelExecute", "BindSymbols",     "DynStepEnd", "InferShape",         "Launch",
    "HostCompute",        "SyncOutputShape", "FreeMemory"};

/* Where each role's node is (NONE until found). */
typedef struct roles {
  uint32_t *feed;       /* by graph input */
  uint32_t *deliver;    /* by graph output */
  uint32_t *free_value; /* by root value */
  uint32_t *call;       /* by call, 3 each: static Alloc, Args, Execute; dynamic Bind, End, unused */
  uint32_t *op;         /* by global op index (op_base[call] + op), 4 each: Infer, Launch or
                          HostCompute, Sync, FreeMemory */
  size_t *op_base;      /* by call: index of its first op in `op`; [n_calls] = total */
  uint32_t *producer;   /* by root value: the call producing it, or NONE */
  uint32_t *input_of;   /* by root value: the graph input it is, or NONE */
} roles;

/* Why a precedence is needed (for the message). */
typedef enum need_kind {
  NEED_CHAIN, /* steps of one call */
  NEED_READY, /* `before` makes `value` ready, `after` uses it */
  NEED_READ   /* `before` is a last reader of `value`, `after` frees it */
} need_kind;

/* One precedence: node `before` must reach node `after`. */
typedef struct need {
  uint32_t before, after;
  uint32_t value; /* the root value it is about, or NONE (NEED_CHAIN) */
  need_kind kind;
  uint32_t source; /* `before`'s index among the sources of the general test */
} need;

typedef struct checker {
  const mx_program *p;
  const mx_exe_graph *g;
  int kid[K_COUNT]; /* registry index of each kernel, -1 when not registered */
  roles r;
  need *needs;
  size_t n_needs, cap_needs;
  mx_error *err;
  char where[2][160]; /* descriptions of two nodes, for messages */
} checker;

static const mx_kattr *attr_of(const mx_exe_node *n) { return (const mx_kattr *)n->attr; }

static const char *value_name(const checker *C, uint32_t v) {
  const char *name = C->p->root->values[v].name;
  return name ? name : "?";
}

/* The row of node n's kernel in kernel_names, or -1. */
static int kernel_kind(const checker *C, const mx_exe_node *n) {
  for (int j = 0; j < K_COUNT; j++)
    if ((int)n->kernel == C->kid[j]) return j;
  return -1;
}

/* Describes node i ("StaticModelExecute of partition 'x'") into C->where[slot]. Only the
 * attribute fields its kernel uses are read: mxm_io.c checked those, not the others. */
static const char *describe(checker *C, uint32_t i, int slot) {
  const mx_exe_node *n = &C->g->nodes[i];
  const mx_kattr *a = attr_of(n);
  const char *kernel = mx__exe_kernel_at(n->kernel)->name;
  char *out = C->where[slot];
  size_t cap = sizeof C->where[slot];
  int k = kernel_kind(C, n);
  if (k >= K_INFER)
    snprintf(out, cap, "%s of op %u of partition '%s'", kernel, a->op, C->p->calls[a->call].name);
  else if (k >= K_ALLOC)
    snprintf(out, cap, "%s of partition '%s'", kernel, C->p->calls[a->call].name);
  else if (k >= 0)
    snprintf(out, cap, "%s of '%s'", kernel, value_name(C, a->value));
  else
    snprintf(out, cap, "%s (node %u)", kernel, i);
  return out;
}

/* Records node i in *slot, refusing a second node for the same role. */
static mx_status take(checker *C, uint32_t *slot, uint32_t i) {
  if (*slot != NONE)
    return mx__fail(C->err, MX_ERR_MALFORMED, "the Main graph runs %s twice (nodes %u and %u)",
                    describe(C, i, 0), *slot, i);
  *slot = i;
  return MX_OK;
}

static mx_status place(checker *C, uint32_t i) {
  const mx_program *p = C->p;
  const mx_exe_node *n = &C->g->nodes[i];
  const mx_kattr *a = attr_of(n);
  int k = kernel_kind(C, n);
  switch (k) {
    case K_FEED: return take(C, &C->r.feed[a->op], i);
    case K_DELIVER: return take(C, &C->r.deliver[a->op], i);
    case K_FREE_VALUE:
      if (C->r.producer[a->value] == NONE)
        return mx__fail(C->err, MX_ERR_MALFORMED, "the Main graph runs %s, a value no partition produces",
                        describe(C, i, 0));
      return take(C, &C->r.free_value[a->value], i);
    case K_ALLOC:
    case K_ARGS:
    case K_EXECUTE: return take(C, &C->r.call[3 * (size_t)a->call + (size_t)(k - K_ALLOC)], i);
    case K_BIND:
    case K_END: return take(C, &C->r.call[3 * (size_t)a->call + (size_t)(k - K_BIND)], i);
    case K_INFER:
    case K_LAUNCH:
    case K_HOST:
    case K_SYNC:
    case K_FREE_MEMORY: {
      const mx_rt_call *c = &p->calls[a->call];
      bool device = mx__dyn_op_stream(c->dplan, a->op) >= 0;
      if ((k == K_LAUNCH && !device) || (k == K_HOST && device))
        return mx__fail(C->err, MX_ERR_MALFORMED, "the Main graph runs %s, which is a %s op",
                        describe(C, i, 0), device ? "device" : "host");
      if (k == K_SYNC && !mx__dyn_op_needs_sync(c->dplan, a->op))
        return mx__fail(C->err, MX_ERR_MALFORMED, "the Main graph runs %s, which is not data-dependent",
                        describe(C, i, 0));
      size_t part = k == K_INFER ? 0 : k == K_SYNC ? 2 : k == K_FREE_MEMORY ? 3 : 1;
      return take(C, &C->r.op[4 * (C->r.op_base[a->call] + a->op) + part], i);
    }
    default:
      /* mxm_io.c lets only Main kernels into Main: one missing from this table is an error here. */
      return mx__fail(C->err, MX_ERR_INTERNAL, "the Main graph runs %s, which this check does not know",
                      describe(C, i, 0));
  }
}

/* The node that makes value v ready in a step: its FeedInput, its producer's StaticModelExecute
 * or DynStepEnd, or NONE for a constant (Init uploads it). */
static uint32_t producer_node(const checker *C, uint32_t v) {
  if (C->r.input_of[v] != NONE) return C->r.feed[C->r.input_of[v]];
  uint32_t c = C->r.producer[v];
  if (c == NONE) return NONE;
  return C->r.call[3 * (size_t)c + (C->p->calls[c].unknown ? 1 : 2)];
}

static mx_status add_need(checker *C, uint32_t before, uint32_t after, need_kind kind, uint32_t value) {
  if (before == NONE) return MX_OK;
  if (C->n_needs == C->cap_needs) {
    size_t cap = C->cap_needs ? 2 * C->cap_needs : 256;
    need *nn = realloc(C->needs, cap * sizeof *nn);
    if (!nn) return mx__fail_oom(C->err, "checking the Main graph");
    C->needs = nn;
    C->cap_needs = cap;
  }
  C->needs[C->n_needs++] = (need){before, after, value, kind, NONE};
  return MX_OK;
}

/* Every role is filled; then the precedences, in the order the messages are most useful. */
static mx_status collect_needs(checker *C) {
  const mx_program *p = C->p;
  const mx_graph *root = p->root;
  mx_status st = MX_OK;
  for (size_t i = 0; i < root->n_inputs && st == MX_OK; i++)
    if (C->r.feed[i] == NONE)
      st = mx__fail(C->err, MX_ERR_MALFORMED, "the Main graph never feeds input '%s'",
                    value_name(C, root->inputs[i]));
  for (size_t c = 0; c < p->n_calls && st == MX_OK; c++) {
    const mx_rt_call *call = &p->calls[c];
    const uint32_t *cr = &C->r.call[3 * c];
    int n_roles = call->unknown ? 2 : 3;
    for (int j = 0; j < n_roles && st == MX_OK; j++)
      if (cr[j] == NONE)
        st = mx__fail(C->err, MX_ERR_MALFORMED, "the Main graph never runs %s of partition '%s'",
                      kernel_names[(call->unknown ? K_BIND : K_ALLOC) + j], call->name);
    if (st != MX_OK || !call->unknown) continue;
    size_t n_ops = mx__dyn_op_count(call->dplan);
    for (size_t i = 0; i < n_ops && st == MX_OK; i++) {
      const uint32_t *o = &C->r.op[4 * (C->r.op_base[c] + i)];
      bool device = mx__dyn_op_stream(call->dplan, i) >= 0;
      if (o[0] == NONE || o[1] == NONE || o[3] == NONE ||
          (mx__dyn_op_needs_sync(call->dplan, i) && o[2] == NONE)) {
        int missing = o[0] == NONE   ? K_INFER
                      : o[1] == NONE ? (device ? K_LAUNCH : K_HOST)
                      : o[3] == NONE ? K_FREE_MEMORY
                                     : K_SYNC;
        st = mx__fail(C->err, MX_ERR_MALFORMED, "the Main graph never runs %s of op %zu of partition '%s'",
                      kernel_names[missing], i, call->name);
      }
    }
  }
  for (size_t k = 0; k < root->n_outputs && st == MX_OK; k++)
    if (C->r.deliver[k] == NONE)
      st = mx__fail(C->err, MX_ERR_MALFORMED, "the Main graph never delivers output '%s'",
                    value_name(C, root->outputs[k]));
  for (size_t v = 0; v < p->n_values && st == MX_OK; v++)
    if (C->r.producer[v] != NONE && C->r.free_value[v] == NONE)
      st = mx__fail(C->err, MX_ERR_MALFORMED, "the Main graph never frees '%s'", value_name(C, (uint32_t)v));
  if (st != MX_OK) return st;

  /* A call's own chain, and its inputs' producers before it starts. */
  for (size_t c = 0; c < p->n_calls && st == MX_OK; c++) {
    const mx_rt_call *call = &p->calls[c];
    const uint32_t *cr = &C->r.call[3 * c];
    uint32_t start = call->unknown ? cr[0] : cr[1];
    for (uint32_t k = 0; k < call->n_in && st == MX_OK; k++)
      st = add_need(C, producer_node(C, call->in_values[k]), start, NEED_READY, call->in_values[k]);
    if (!call->unknown) {
      if (st == MX_OK) st = add_need(C, cr[0], cr[1], NEED_CHAIN, NONE);
      if (st == MX_OK) st = add_need(C, cr[1], cr[2], NEED_CHAIN, NONE);
      continue;
    }
    uint32_t prev = cr[0];
    size_t n_ops = mx__dyn_op_count(call->dplan);
    for (size_t i = 0; i < n_ops && st == MX_OK; i++) {
      const uint32_t *o = &C->r.op[4 * (C->r.op_base[c] + i)];
      st = add_need(C, prev, o[0], NEED_CHAIN, NONE);
      if (st == MX_OK) st = add_need(C, o[0], o[1], NEED_CHAIN, NONE);
      uint32_t done = o[1];
      if (st == MX_OK && o[2] != NONE) {
        st = add_need(C, o[1], o[2], NEED_CHAIN, NONE);
        done = o[2];
      }
      if (st == MX_OK) st = add_need(C, done, o[3], NEED_CHAIN, NONE);
      prev = o[3];
    }
    if (st == MX_OK) st = add_need(C, prev, cr[1], NEED_CHAIN, NONE);
  }
  /* Outputs after their producers; frees after producers and last readers. */
  for (size_t k = 0; k < root->n_outputs && st == MX_OK; k++)
    st = add_need(C, producer_node(C, root->outputs[k]), C->r.deliver[k], NEED_READY, root->outputs[k]);
  for (size_t v = 0; v < p->n_values && st == MX_OK; v++)
    if (C->r.free_value[v] != NONE)
      st = add_need(C, producer_node(C, (uint32_t)v), C->r.free_value[v], NEED_READY, (uint32_t)v);
  for (size_t c = 0; c < p->n_calls && st == MX_OK; c++) {
    const mx_rt_call *call = &p->calls[c];
    uint32_t last = C->r.call[3 * c + (call->unknown ? 1 : 2)];
    for (uint32_t k = 0; k < call->n_in && st == MX_OK; k++) {
      uint32_t v = call->in_values[k];
      if (C->r.free_value[v] != NONE) st = add_need(C, last, C->r.free_value[v], NEED_READ, v);
    }
  }
  for (size_t k = 0; k < root->n_outputs && st == MX_OK; k++) {
    uint32_t v = root->outputs[k];
    if (C->r.free_value[v] != NONE) st = add_need(C, C->r.deliver[k], C->r.free_value[v], NEED_READ, v);
  }
  return st;
}

static bool direct(const mx_exe_graph *g, uint32_t from, uint32_t to) {
  for (uint32_t e = g->succ_start[from]; e < g->succ_start[from + 1]; e++)
    if (g->succ[e] == to) return true;
  return false;
}

static mx_status refuse(checker *C, const need *nd) {
  const char *b = describe(C, nd->before, 0), *a = describe(C, nd->after, 1);
  if (nd->kind == NEED_READY)
    return mx__fail(C->err, MX_ERR_MALFORMED,
                    "the Main graph does not order %s after %s ('%s' must be ready first)", a, b,
                    value_name(C, nd->value));
  if (nd->kind == NEED_READ)
    return mx__fail(C->err, MX_ERR_MALFORMED, "the Main graph does not order %s after %s, which reads '%s'",
                    a, b, value_name(C, nd->value));
  return mx__fail(C->err, MX_ERR_MALFORMED, "the Main graph does not order %s after %s", a, b);
}

static int by_source(const void *x, const void *y) {
  uint32_t a = ((const need *)x)->source, b = ((const need *)y)->source;
  return (a > b) - (a < b);
}

/* The precedences no direct edge gives: reachability, 64 sources per pass. */
static mx_status check_paths(checker *C, need *rest, size_t n_rest) {
  const mx_exe_graph *g = C->g;
  uint32_t *source_of = malloc((size_t)g->n_nodes * sizeof *source_of);
  uint64_t *mask = malloc((size_t)g->n_nodes * sizeof *mask);
  if (!source_of || !mask) {
    free(source_of);
    free(mask);
    return mx__fail_oom(C->err, "checking the Main graph");
  }
  for (uint32_t i = 0; i < g->n_nodes; i++) source_of[i] = NONE;
  uint32_t n_sources = 0;
  for (size_t j = 0; j < n_rest; j++) {
    if (source_of[rest[j].before] == NONE) source_of[rest[j].before] = n_sources++;
    rest[j].source = source_of[rest[j].before];
  }
  qsort(rest, n_rest, sizeof *rest, by_source);
  mx_status st = MX_OK;
  for (size_t j = 0; j < n_rest && st == MX_OK;) {
    uint32_t first = rest[j].source / 64 * 64;
    memset(mask, 0, (size_t)g->n_nodes * sizeof *mask);
    for (uint32_t i = 0; i < g->n_nodes; i++)
      if (source_of[i] != NONE && source_of[i] - first < 64) mask[i] = 1ull << (source_of[i] - first);
    for (uint32_t t = 0; t < g->n_nodes; t++) {
      uint32_t i = g->order[t];
      if (!mask[i]) continue;
      for (uint32_t e = g->succ_start[i]; e < g->succ_start[i + 1]; e++) mask[g->succ[e]] |= mask[i];
    }
    for (; j < n_rest && rest[j].source - first < 64 && st == MX_OK; j++)
      if (!(mask[rest[j].after] >> (rest[j].source - first) & 1u)) st = refuse(C, &rest[j]);
  }
  free(source_of);
  free(mask);
  return st;
}

mx_status mx__program_check_main(const mx_program *p, const mx_exe_graph *g, mx_error *err) {
  checker C;
  memset(&C, 0, sizeof C);
  C.p = p;
  C.g = g;
  C.err = err;
  for (int k = 0; k < K_COUNT; k++) C.kid[k] = mx__exe_kernel_find(kernel_names[k]);
  const mx_graph *root = p->root;
  size_t n_ops = 0;
  C.r.op_base = malloc((p->n_calls + 1) * sizeof *C.r.op_base);
  if (C.r.op_base)
    for (size_t c = 0; c < p->n_calls; c++) {
      C.r.op_base[c] = n_ops;
      if (p->calls[c].unknown) n_ops += mx__dyn_op_count(p->calls[c].dplan);
    }
  C.r.feed = malloc((root->n_inputs + 1) * sizeof *C.r.feed);
  C.r.deliver = malloc((root->n_outputs + 1) * sizeof *C.r.deliver);
  C.r.free_value = malloc((p->n_values + 1) * sizeof *C.r.free_value);
  C.r.producer = malloc((p->n_values + 1) * sizeof *C.r.producer);
  C.r.input_of = malloc((p->n_values + 1) * sizeof *C.r.input_of);
  C.r.call = malloc((3 * p->n_calls + 1) * sizeof *C.r.call);
  C.r.op = malloc((4 * n_ops + 1) * sizeof *C.r.op);
  mx_status st = MX_OK;
  if (!C.r.op_base || !C.r.feed || !C.r.deliver || !C.r.free_value || !C.r.producer || !C.r.input_of ||
      !C.r.call || !C.r.op) {
    st = mx__fail_oom(err, "checking the Main graph");
    goto done;
  }
  C.r.op_base[p->n_calls] = n_ops;
  memset(C.r.feed, 0xff, root->n_inputs * sizeof *C.r.feed);
  memset(C.r.deliver, 0xff, root->n_outputs * sizeof *C.r.deliver);
  memset(C.r.free_value, 0xff, p->n_values * sizeof *C.r.free_value);
  memset(C.r.producer, 0xff, p->n_values * sizeof *C.r.producer);
  memset(C.r.input_of, 0xff, p->n_values * sizeof *C.r.input_of);
  memset(C.r.call, 0xff, 3 * p->n_calls * sizeof *C.r.call);
  memset(C.r.op, 0xff, 4 * n_ops * sizeof *C.r.op);
  for (size_t c = 0; c < p->n_calls; c++)
    for (uint32_t j = 0; j < p->calls[c].n_out; j++) C.r.producer[p->calls[c].out_values[j]] = (uint32_t)c;
  for (size_t i = 0; i < root->n_inputs; i++) C.r.input_of[root->inputs[i]] = (uint32_t)i;

  for (uint32_t i = 0; i < g->n_nodes && st == MX_OK; i++) st = place(&C, i);
  if (st == MX_OK) st = collect_needs(&C);
  /* Direct edges first (all of them, for a graph lowering wrote); the rest by paths. */
  size_t n_rest = 0;
  for (size_t j = 0; j < C.n_needs && st == MX_OK; j++)
    if (!direct(g, C.needs[j].before, C.needs[j].after)) C.needs[n_rest++] = C.needs[j];
  if (st == MX_OK && n_rest) st = check_paths(&C, C.needs, n_rest);
done:
  free(C.needs);
  free(C.r.op_base);
  free(C.r.feed);
  free(C.r.deliver);
  free(C.r.free_value);
  free(C.r.producer);
  free(C.r.input_of);
  free(C.r.call);
  free(C.r.op);
  return st;
}
