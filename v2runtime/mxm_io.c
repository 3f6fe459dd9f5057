/* .mxm files of partitioned models: the static plans of the KNOWN calls (static_exec's container)
 * plus a runtime record — the partitioned root graph as ONNX (call bodies inside, symbolic dims
 * in mixrt's expression form) and the three lowered execution graphs — so a load repeats no
 * compile work: no folding, no partitioning, no static compile, no lowering. Dynamic plans are
 * rebuilt from the call bodies (they hold no compiled state beyond the graph).
 *
 * Nothing in a file is trusted: every kernel name, value slot and attribute index of the
 * execution graphs is checked against the restored program before Init runs, and the Main graph
 * as a whole (mxm_main_check.c: every step kernel once, in an order the kernels can run in). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/grow.h"
#include "common/progress.h"
#include "graph/onnx/onnx_refs.h"
#include "mixrt/onnx.h"
#include "partitioner/partitioner.h"
#include "proto/mixrt_model.pb-c.h"
#include "static_exec/mxm_info.h"
#include "v2runtime/exe_registry.h"
#include "v2runtime/kernels_control.h"
#include "v2runtime/session_impl.h"
#include "v2runtime/spec.h"

#define RUNTIME_VERSION 1u
#define MAX_SLOTS       (1u << 26)

/* --- save ----------------------------------------------------------------------------------- */

typedef struct packed_graph {
  Mxm__ExeGraph msg;
  Mxm__ExeNode *nodes; /* n_nodes (malloc'd) */
  Mxm__ExeNode **ptrs; /* (malloc'd) */
  uint32_t *inputs;    /* all nodes' inputs, then outputs (malloc'd, point into io) */
  uint32_t *from, *to; /* edges (malloc'd) */
} packed_graph;

static void packed_release(packed_graph *pg) {
  free(pg->nodes);
  free(pg->ptrs);
  free(pg->from);
  free(pg->to);
}

static bool pack_graph(const mx_exe_graph *g, packed_graph *pg) {
  memset(pg, 0, sizeof *pg);
  mxm__exe_graph__init(&pg->msg);
  uint32_t n = g->n_nodes, n_edges = g->succ_start ? g->succ_start[n] : 0;
  pg->nodes = calloc(n ? n : 1, sizeof *pg->nodes);
  pg->ptrs = calloc(n ? n : 1, sizeof *pg->ptrs);
  pg->from = malloc((n_edges ? n_edges : 1) * sizeof *pg->from);
  pg->to = malloc((n_edges ? n_edges : 1) * sizeof *pg->to);
  if (!pg->nodes || !pg->ptrs || !pg->from || !pg->to) return false;
  for (uint32_t i = 0; i < n; i++) {
    const mx_exe_node *nd = &g->nodes[i];
    Mxm__ExeNode *m = &pg->nodes[i];
    mxm__exe_node__init(m);
    m->kernel = (char *)mx__exe_kernel_at(nd->kernel)->name;
    m->n_inputs = nd->n_in;
    m->inputs = (uint32_t *)nd->io;
    m->n_outputs = nd->n_out;
    m->outputs = (uint32_t *)nd->io + nd->n_in;
    m->attr.data = (uint8_t *)nd->attr;
    m->attr.len = nd->attr ? nd->attr_size : 0;
    m->priority = nd->priority;
    pg->ptrs[i] = m;
    for (uint32_t e = g->succ_start[i]; e < g->succ_start[i + 1]; e++) {
      pg->from[e] = i;
      pg->to[e] = g->succ[e];
    }
  }
  pg->msg.n_nodes = n;
  pg->msg.nodes = pg->ptrs;
  pg->msg.n_edge_from = pg->msg.n_edge_to = n_edges;
  pg->msg.edge_from = pg->from;
  pg->msg.edge_to = pg->to;
  return true;
}

/* The root graph's floating-point constants go out as references into the file's weights
 * section. Integer constants (shapes, indices: what inference reads) stay in the graph, so the
 * graph can be described without the weights (`mixrt inspect` of an .mxm whose weights file is
 * elsewhere). */
static bool weights_ref(void *ctx, const mx_tensor *t, size_t nbytes, uint64_t *offset) {
  return mx_dtype_is_float(t->dtype) && mx__mxm_weights_ref(ctx, t->data, nbytes, offset);
}

/* The static plans of a file: the root's calls', its gears', then the compiled bodies', depth
 * first (each body's own calls' plans, then its bodies'): the order the loader takes them in. */
typedef struct plan_list {
  const mx_static_plan **v;
  size_t n, cap;
} plan_list;

static bool add_call_plans(const mx_program *p, plan_list *l) {
  for (size_t c = 0; c < p->n_calls; c++)
    if (!p->calls[c].unknown) {
      if (!MX_GROW(l->v, l->cap, l->n + 1)) return false;
      l->v[l->n++] = p->calls[c].plan;
    }
  return true;
}

typedef struct body_walk {
  const mx_program *p;
  plan_list *l;
} body_walk;

static mx_status add_body_plans(const mx_program *p, plan_list *l);

static mx_status collect_body_plans(void *ctx, const mx_node *nd, const mx_graph *body, size_t ordinal) {
  (void)nd;
  (void)ordinal;
  body_walk *bw = ctx;
  const mx_session *child = mx__control_body_child(bw->p, body);
  if (!child || !child->prog) return MX_OK;
  if (!add_call_plans(child->prog, bw->l)) return MX_ERR_OUT_OF_MEMORY;
  return add_body_plans(child->prog, bw->l);
}

static mx_status add_body_plans(const mx_program *p, plan_list *l) {
  body_walk bw = {.p = p, .l = l};
  return mx__control_bodies_each(p, collect_body_plans, &bw);
}

/* A program's runtime record as messages, its compiled bodies' records inside. */
typedef struct packed_program {
  Mxm__Runtime rt;
  packed_graph pg[3];
  protobuf_c_boolean *unknown;
  void *onnx;
  Mxm__Body **bodies; /* each a block holding its message and the body's packed program */
  size_t n_bodies, cap_bodies;
} packed_program;

typedef struct packed_body {
  Mxm__Body msg;
  packed_program prog;
} packed_body;

static void packed_program_release(packed_program *pp) {
  for (int i = 0; i < 3; i++) packed_release(&pp->pg[i]);
  free(pp->unknown);
  free(pp->onnx);
  for (size_t b = 0; b < pp->n_bodies; b++) {
    packed_body *pb = (packed_body *)pp->bodies[b]; /* msg is its first member */
    packed_program_release(&pb->prog);
    free(pb);
  }
  free(pp->bodies);
}

static mx_status pack_program(const mx_program *p, mx__mxm_weights *w, packed_program *pp, mx_error *err);

typedef struct pack_walk {
  const mx_program *p;
  mx__mxm_weights *w;
  packed_program *pp;
  mx_error *err;
} pack_walk;

static mx_status pack_body(void *ctx, const mx_node *nd, const mx_graph *body, size_t ordinal) {
  pack_walk *pw = ctx;
  const mx_session *child = mx__control_body_child(pw->p, body);
  if (!child || !child->prog) return MX_OK; /* the interpreter runs it: nothing compiled to store */
  packed_body *pb = calloc(1, sizeof *pb);
  if (!pb || !MX_GROW(pw->pp->bodies, pw->pp->cap_bodies, pw->pp->n_bodies + 1)) {
    free(pb);
    return mx__fail(pw->err, MX_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  pw->pp->bodies[pw->pp->n_bodies++] = &pb->msg;
  mxm__body__init(&pb->msg);
  pb->msg.ordinal = (uint32_t)ordinal;
  pb->msg.name = (char *)body->name;
  pb->msg.node = (char *)nd->name;
  pb->msg.runtime = &pb->prog.rt;
  mx_status st = pack_program(child->prog, pw->w, &pb->prog, pw->err);
  if (st != MX_OK) mx__error_prefix(pw->err, "body '%s' of node '%s': ", body->name, nd->name);
  return st;
}

/* Fills pp with p's record: root graph (constants as references into w), execution graphs,
 * compiled bodies. */
static mx_status pack_program(const mx_program *p, mx__mxm_weights *w, packed_program *pp, mx_error *err) {
  size_t onnx_size = 0;
  mxm__runtime__init(&pp->rt);
  pp->unknown = calloc(p->n_calls ? p->n_calls : 1, sizeof *pp->unknown);
  if (!pp->unknown) return mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory");
  for (size_t c = 0; c < p->n_calls; c++) pp->unknown[c] = p->calls[c].unknown;
  mx_status st = mx__onnx_save_memory_refs(p->root, weights_ref, w, &pp->onnx, &onnx_size, err);
  if (st != MX_OK) return st;
  if (!pack_graph(&p->init, &pp->pg[0]) || !pack_graph(&p->main, &pp->pg[1]) ||
      !pack_graph(&p->deinit, &pp->pg[2]))
    return mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory");
  pp->rt.version = RUNTIME_VERSION;
  pp->rt.root_onnx.data = pp->onnx;
  pp->rt.root_onnx.len = onnx_size;
  pp->rt.n_call_unknown = p->n_calls;
  pp->rt.call_unknown = pp->unknown;
  pp->rt.init = &pp->pg[0].msg;
  pp->rt.main = &pp->pg[1].msg;
  pp->rt.deinit = &pp->pg[2].msg;
  pp->rt.n_slots = p->n_slots;
  pack_walk pw = {.p = p, .w = w, .pp = pp, .err = err};
  st = mx__control_bodies_each(p, pack_body, &pw);
  pp->rt.n_bodies = pp->n_bodies;
  pp->rt.bodies = pp->bodies;
  return st;
}

mx_status mx__program_save_mxm(mx_session *s, const char *path, bool external_weights, mx_error *err) {
  mx_program *p = s->prog;
  mx_status st;
  mx__mxm_weights *w = NULL;
  packed_program pp;
  memset(&pp, 0, sizeof pp);
  plan_list l = {0};
  /* Declared gears go after the calls' plans, named "<call>@<binding>" (v2runtime/spec.h). */
  mx_static_plan **gears = NULL;
  size_t n_gears = 0;
  st = mx__spec_gear_plans(s, p, &gears, &n_gears, err);
  if (st != MX_OK) return st;
  if (!add_call_plans(p, &l)) goto oom;
  for (size_t g = 0; g < n_gears; g++) {
    if (!MX_GROW(l.v, l.cap, l.n + 1)) goto oom;
    l.v[l.n++] = gears[g];
  }
  st = add_body_plans(p, &l);
  if (st == MX_ERR_OUT_OF_MEMORY) goto oom;
  /* The weights section holds the static plans' weights (the bodies' too); the root graphs'
   * constants (the call bodies' included) refer to them where they are the same bytes, and are
   * added otherwise. */
  if (st == MX_OK) st = mx__mxm_weights_begin(l.v, l.n, &w, err);
  if (st == MX_OK) st = pack_program(p, w, &pp, err);
  if (st != MX_OK) goto done;
  mx_mxm_save_options so = {.external_weights = external_weights};
  /* The record is packed straight into the file: the root's ONNX bytes are its only copy. */
  st = mx__mxm_save_with_runtime(l.v, l.n, &pp.rt.base, w, path, &so, err);
  goto done;
oom:
  st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory writing '%s'", path);
done:
  packed_program_release(&pp);
  mx__mxm_weights_free(w);
  free(l.v);
  for (size_t g = 0; g < n_gears; g++) mx__static_plan_destroy(gears[g]);
  free(gears);
  return st;
}

/* --- load ----------------------------------------------------------------------------------- */

/* Reads a base-128 varint at *pos of d[0, n); false when it runs past the end or past 10 bytes. */
static bool get_varint(const uint8_t *d, size_t n, size_t *pos, uint64_t *v) {
  *v = 0;
  for (unsigned shift = 0; shift < 70 && *pos < n; shift += 7) {
    uint8_t b = d[(*pos)++];
    *v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}

/* The Runtime field holding the root graph's ONNX bytes (proto/mixrt_model.proto). */
#define RUNTIME_ROOT_ONNX_FIELD 2u

/* Splits a packed Runtime record into its root_onnx bytes (*onnx, a slice of d: the last such
 * field, as protobuf reads it) and a malloc'd copy of every other field (*rest), so the record
 * can be unpacked without copying the ONNX bytes, the largest part of it. False when the
 * framing is malformed (or out of memory: *rest NULL with a true framing is reported by the
 * caller as such). */
static bool split_root_onnx(const uint8_t *d, size_t n, const uint8_t **onnx, size_t *onnx_len,
                            uint8_t **rest, size_t *rest_len) {
  *onnx = NULL;
  *onnx_len = 0;
  *rest_len = 0;
  *rest = malloc(n ? n : 1);
  if (!*rest) return true;
  size_t pos = 0;
  while (pos < n) {
    size_t start = pos;
    uint64_t key, len;
    if (!get_varint(d, n, &pos, &key)) return false;
    switch (key & 7) {
      case 0:
        if (!get_varint(d, n, &pos, &len)) return false;
        break;
      case 1:
        if (n - pos < 8) return false;
        pos += 8;
        break;
      case 5:
        if (n - pos < 4) return false;
        pos += 4;
        break;
      case 2:
        if (!get_varint(d, n, &pos, &len) || len > n - pos) return false;
        if ((key >> 3) == RUNTIME_ROOT_ONNX_FIELD) {
          *onnx = d + pos;
          *onnx_len = (size_t)len;
          pos += (size_t)len;
          continue; /* left out of *rest */
        }
        pos += (size_t)len;
        break;
      default: return false;
    }
    memcpy(*rest + *rest_len, d + start, pos - start);
    *rest_len += pos - start;
  }
  return true;
}

typedef enum kernel_use {
  USE_NONE,      /* not allowed in a session program */
  USE_CONSTANT,  /* value: a shared constant */
  USE_VALUE,     /* value: any root value */
  USE_INPUT,     /* op: graph input index, value: that input */
  USE_OUTPUT,    /* op: graph output index, value: that output */
  USE_STATIC,    /* call: a KNOWN call */
  USE_DYNAMIC,   /* call: an UNKNOWN call */
  USE_DYNAMIC_OP /* call: an UNKNOWN call, op: one of its ops */
} kernel_use;

/* The graphs a kernel may appear in. Handles and constants are made only by Init and released
 * only by DeInit: a file that creates in Main, or destroys in Init or Main, would leak or leave
 * Main a released handle. */
enum { IN_INIT = 1, IN_MAIN = 2, IN_DEINIT = 4 };

/* What a kernel makes once per target in Init (a call's handle, a constant's upload). */
typedef enum kernel_makes { MAKES_NOTHING, MAKES_CONSTANT, MAKES_HANDLE } kernel_makes;

static const struct {
  const char *name;
  kernel_use use;
  unsigned graphs; /* IN_* bits */
  kernel_makes makes;
} kernel_uses[] = {
    {"UploadConstant", USE_CONSTANT, IN_INIT, MAKES_CONSTANT},
    {"FreeConstant", USE_CONSTANT, IN_DEINIT, MAKES_NOTHING},
    {"StaticModelCreate", USE_STATIC, IN_INIT, MAKES_HANDLE},
    {"StaticModelDestroy", USE_STATIC, IN_DEINIT, MAKES_NOTHING},
    {"DynExecCreate", USE_DYNAMIC, IN_INIT, MAKES_HANDLE},
    {"DynExecDestroy", USE_DYNAMIC, IN_DEINIT, MAKES_NOTHING},
    {"FreeValue", USE_VALUE, IN_MAIN, MAKES_NOTHING},
    {"FeedInput", USE_INPUT, IN_MAIN, MAKES_NOTHING},
    {"OutputDeliver", USE_OUTPUT, IN_MAIN, MAKES_NOTHING},
    {"StaticAllocOutputs", USE_STATIC, IN_MAIN, MAKES_NOTHING},
    {"StaticModelUpdateArgs", USE_STATIC, IN_MAIN, MAKES_NOTHING},
    {"StaticModelExecute", USE_STATIC, IN_MAIN, MAKES_NOTHING},
    {"BindSymbols", USE_DYNAMIC, IN_MAIN, MAKES_NOTHING},
    {"DynStepEnd", USE_DYNAMIC, IN_MAIN, MAKES_NOTHING},
    {"InferShape", USE_DYNAMIC_OP, IN_MAIN, MAKES_NOTHING},
    {"Launch", USE_DYNAMIC_OP, IN_MAIN, MAKES_NOTHING},
    {"HostCompute", USE_DYNAMIC_OP, IN_MAIN, MAKES_NOTHING},
    {"SyncOutputShape", USE_DYNAMIC_OP, IN_MAIN, MAKES_NOTHING},
    {"FreeMemory", USE_DYNAMIC_OP, IN_MAIN, MAKES_NOTHING},
};

/* The table row of a kernel, or -1 when it has no place in a session program. */
static int kernel_row(const char *kernel) {
  for (size_t i = 0; i < sizeof kernel_uses / sizeof kernel_uses[0]; i++)
    if (strcmp(kernel_uses[i].name, kernel) == 0) return (int)i;
  return -1;
}

/* Checks that a node's attribute refers to what its kernel expects in this program. */
static bool attr_ok(const mx_program *p, int row, const mx_kattr *a) {
  kernel_use use = row >= 0 ? kernel_uses[row].use : USE_NONE;
  const mx_graph *root = p->root;
  switch (use) {
    case USE_CONSTANT:
      return a->value < p->n_values && (root->values[a->value].flags & MX_VALUE_CONST) &&
             !(root->values[a->value].flags & MX_VALUE_DEAD);
    case USE_VALUE: return a->value < p->n_values;
    case USE_INPUT: return a->op < root->n_inputs && a->value == root->inputs[a->op];
    case USE_OUTPUT: return a->op < root->n_outputs && a->value == root->outputs[a->op];
    case USE_STATIC: return a->call < p->n_calls && !p->calls[a->call].unknown;
    case USE_DYNAMIC: return a->call < p->n_calls && p->calls[a->call].unknown;
    case USE_DYNAMIC_OP:
      return a->call < p->n_calls && p->calls[a->call].unknown &&
             a->op < mx__dyn_op_count(p->calls[a->call].dplan);
    case USE_NONE: break;
  }
  return false;
}

/* Unpacks one execution graph (graph is IN_INIT, IN_MAIN or IN_DEINIT). made[] counts, per call
 * then per root value, the handles and constant uploads the graph makes (Init only). */
static mx_status unpack_graph(const mx_program *p, const Mxm__ExeGraph *m, const char *which, unsigned graph,
                              uint32_t *made, mx_exe_graph *g, mx_error *err) {
  if (!m) return mx__fail(err, MX_ERR_MALFORMED, "the %s graph is missing", which);
  mx_exe_builder *b;
  if (mx__exe_builder_create(&b) != MX_OK) return mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory");
  mx_status st = MX_OK;
  for (size_t i = 0; i < m->n_nodes && st == MX_OK; i++) {
    const Mxm__ExeNode *nd = m->nodes[i];
    int k = nd->kernel ? mx__exe_kernel_find(nd->kernel) : -1;
    if (k < 0) {
      st = mx__fail(err, MX_ERR_MALFORMED, "%s graph node %zu: unknown kernel '%s'", which, i,
                    nd->kernel ? nd->kernel : "");
      break;
    }
    if (nd->n_inputs > UINT16_MAX || nd->n_outputs > UINT16_MAX || nd->attr.len != sizeof(mx_kattr)) {
      st = mx__fail(err, MX_ERR_MALFORMED, "%s graph node %zu (%s): bad arity or attribute size", which, i,
                    nd->kernel);
      break;
    }
    for (size_t j = 0; j < nd->n_inputs && st == MX_OK; j++)
      if (nd->inputs[j] >= p->n_slots)
        st = mx__fail(err, MX_ERR_MALFORMED, "%s graph node %zu: slot out of range", which, i);
    for (size_t j = 0; j < nd->n_outputs && st == MX_OK; j++)
      if (nd->outputs[j] >= p->n_slots)
        st = mx__fail(err, MX_ERR_MALFORMED, "%s graph node %zu: slot out of range", which, i);
    mx_kattr a;
    memcpy(&a, nd->attr.data, sizeof a);
    int row = kernel_row(nd->kernel);
    if (st == MX_OK && !attr_ok(p, row, &a))
      st = mx__fail(err, MX_ERR_MALFORMED, "%s graph node %zu (%s): its attribute does not fit the model",
                    which, i, nd->kernel);
    if (st == MX_OK && !(kernel_uses[row].graphs & graph))
      st = mx__fail(err, MX_ERR_MALFORMED, "%s graph node %zu (%s): this kernel has no place in the %s graph",
                    which, i, nd->kernel, which);
    if (st == MX_OK && kernel_uses[row].makes != MAKES_NOTHING) {
      size_t at = kernel_uses[row].makes == MAKES_HANDLE ? a.call : p->n_calls + a.value;
      if (made[at]++)
        st = mx__fail(err, MX_ERR_MALFORMED, "%s graph node %zu (%s): made a second time for the same %s",
                      which, i, nd->kernel,
                      kernel_uses[row].makes == MAKES_HANDLE ? "partition call" : "constant");
    }
    if (st == MX_OK)
      st = mx__exe_builder_add(b, (uint16_t)k, nd->inputs, (uint16_t)nd->n_inputs, nd->outputs,
                               (uint16_t)nd->n_outputs, &a, sizeof a, nd->priority, NULL);
  }
  if (st == MX_OK && m->n_edge_from != m->n_edge_to)
    st = mx__fail(err, MX_ERR_MALFORMED, "%s graph: edge lists differ in length", which);
  for (size_t e = 0; e < m->n_edge_from && st == MX_OK; e++)
    if (mx__exe_builder_edge(b, m->edge_from[e], m->edge_to[e]) != MX_OK)
      st = mx__fail(err, MX_ERR_MALFORMED, "%s graph: edge %zu is out of range", which, e);
  if (st == MX_OK) {
    st = mx__exe_builder_finish(b, g, err);
    if (st != MX_OK) st = MX_ERR_MALFORMED;
  }
  mx__exe_builder_destroy(b);
  return st;
}

/* What restoring a file's programs shares: its static plans (taken in order: a cursor) and its
 * weights section. */
typedef struct load_state {
  mx_static_plan **plans;
  size_t n_plans, used;
  const unsigned char *sec;
  uint64_t sec_size;
} load_state;

static mx_status restore_bodies(mx_session *s, load_state *ls, const Mxm__Runtime *rt, mx_program *p,
                                mx_error *err);

/* Builds program p (its root graph imported) for session s from record rt: calls (static plans
 * taken from ls in order), value slots, the three execution graphs, all checked against the
 * program. Gears (root only: gears true) and compiled bodies are left to the caller. */
static mx_status restore_program(mx_session *s, load_state *ls, const Mxm__Runtime *rt, mx_program *p,
                                 mx_error *err) {
  mx_status st = MX_OK;
  if (rt->version != RUNTIME_VERSION || rt->n_slots > MAX_SLOTS)
    return mx__fail(err, MX_ERR_MALFORMED, "corrupt or unknown runtime record");
  if (mx_graph_infer(p->root) != MX_OK) return mx__fail(err, MX_ERR_MALFORMED, "%s", mx_graph_last_error(p->root));
  st = mx__program_calls(p, err);
  if (st == MX_OK && p->n_calls != rt->n_call_unknown)
    st = mx__fail(err, MX_ERR_MALFORMED, "%zu partition calls in the root graph, %zu recorded", p->n_calls,
                  rt->n_call_unknown);
  for (size_t c = 0; c < p->n_calls && st == MX_OK; c++) {
    mx_rt_call *call = &p->calls[c];
    call->unknown = rt->call_unknown[c];
    if (!call->unknown) {
      if (ls->used == ls->n_plans || strcmp(mx__static_plan_name(ls->plans[ls->used]), call->name) != 0) {
        st = mx__fail(err, MX_ERR_MALFORMED, "no static plan for partition call '%s'", call->name);
        break;
      }
      call->plan = ls->plans[ls->used];
      ls->plans[ls->used++] = NULL;
    } else {
      mx_dyn_options dopt;
      mx__dyn_options_init(&dopt);
      dopt.max_streams = s->n_streams;
      dopt.share_constants = !s->opts.private_weights;
      dopt.control_run = mx__control_run; /* wrapped control nodes, as compiled */
      dopt.control_user = s;
      st = mx__dyn_plan_create(mx__part_call_body(&p->root->nodes[call->node]), &dopt, &call->dplan, err);
    }
  }
  if (st == MX_OK) st = mx__program_finish(p, err);
  if (st == MX_OK) {
    p->n_slots = rt->n_slots;
    p->slots = calloc(p->n_slots ? p->n_slots : 1, sizeof *p->slots);
    if (!p->slots) st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  uint32_t *made = NULL;
  if (st == MX_OK && !(made = calloc(p->n_calls + p->n_values + 1, sizeof *made)))
    st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory");
  if (st == MX_OK) st = unpack_graph(p, rt->init, "Init", IN_INIT, made, &p->init, err);
  /* Init makes every partition call's handle and uploads every live constant of the root (as
   * lowering does): Main's kernels rely on them. */
  for (size_t c = 0; c < p->n_calls && st == MX_OK; c++)
    if (!made[c])
      st = mx__fail(err, MX_ERR_MALFORMED, "the Init graph does not create the %s of partition call '%s'",
                    p->calls[c].unknown ? "dynamic executor" : "static model", p->calls[c].name);
  for (size_t r = 0; r < p->n_values && st == MX_OK; r++) {
    const mx_value *v = &p->root->values[r];
    bool live_constant = (v->flags & MX_VALUE_CONST) && !(v->flags & (MX_VALUE_DEAD | MX_VALUE_INPUT));
    if (live_constant && !made[p->n_calls + r])
      st = mx__fail(err, MX_ERR_MALFORMED, "the Init graph does not upload constant '%s'", v->name);
  }
  if (st == MX_OK) st = unpack_graph(p, rt->main, "Main", IN_MAIN, made, &p->main, err);
  if (st == MX_OK) st = mx__program_check_main(p, &p->main, err);
  if (st == MX_OK) st = unpack_graph(p, rt->deinit, "DeInit", IN_DEINIT, made, &p->deinit, err);
  free(made);
  return st;
}

/* Restoring one stored body: the file's state and the body's record. */
typedef struct body_load {
  load_state *ls;
  const Mxm__Runtime *rt;
} body_load;

/* mx__control_body_build: the body's program for its child session, from its record. */
static mx_status build_body(void *ctx, mx_session *child, mx_program **out, mx_error *err) {
  body_load *bl = ctx;
  *out = NULL;
  mx_program *p = calloc(1, sizeof *p);
  if (!p) return mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory");
  /* Its constants stay in the file's mapped section, which the root program holds for longer
   * than its bodies (they are freed first). */
  mx_status st = mx__onnx_load_memory_borrow(bl->rt->root_onnx.data, bl->rt->root_onnx.len, bl->ls->sec,
                                             bl->ls->sec_size, &p->root, err);
  if (st == MX_OK) st = restore_program(child, bl->ls, bl->rt, p, err);
  if (st == MX_OK) st = restore_bodies(child, bl->ls, bl->rt, p, err);
  if (st != MX_OK) {
    mx__program_free(p);
    return st;
  }
  *out = p;
  return MX_OK;
}

typedef struct bodies_load {
  mx_session *s;
  load_state *ls;
  const Mxm__Runtime *rt;
  mx_program *p;
  size_t restored;
  mx_error *err;
} bodies_load;

static mx_status restore_body(void *ctx, const mx_node *nd, const mx_graph *body, size_t ordinal) {
  bodies_load *bl = ctx;
  const Mxm__Body *m = NULL;
  for (size_t i = 0; i < bl->rt->n_bodies && !m; i++)
    if (bl->rt->bodies[i]->ordinal == ordinal) m = bl->rt->bodies[i];
  if (!m) return MX_OK; /* not stored compiled: the interpreter runs it, or it compiles at install */
  if (!m->runtime || !m->name || !m->node || strcmp(m->name, body->name) != 0 || strcmp(m->node, nd->name) != 0)
    return mx__fail(bl->err, MX_ERR_MALFORMED, "stored body %zu ('%s' of node '%s') is not body '%s' of node '%s'",
                    ordinal, m->name ? m->name : "", m->node ? m->node : "", body->name, nd->name);
  bl->restored++;
  body_load one = {.ls = bl->ls, .rt = m->runtime};
  return mx__control_body_restore(bl->s, bl->p, nd, body, build_body, &one, bl->err);
}

/* Restores the compiled bodies rt records for program p of session s (not installed yet), each
 * into a child session of its own, so installing p compiles none of them. */
static mx_status restore_bodies(mx_session *s, load_state *ls, const Mxm__Runtime *rt, mx_program *p,
                                mx_error *err) {
  for (size_t i = 0; i < rt->n_bodies; i++)
    for (size_t j = 0; j < i; j++)
      if (rt->bodies[i]->ordinal == rt->bodies[j]->ordinal)
        return mx__fail(err, MX_ERR_MALFORMED, "body %u is stored twice", rt->bodies[i]->ordinal);
  bodies_load bl = {.s = s, .ls = ls, .rt = rt, .p = p, .err = err};
  mx_status st = mx__control_bodies_each(p, restore_body, &bl);
  if (st == MX_OK && bl.restored != rt->n_bodies)
    st = mx__fail(err, MX_ERR_MALFORMED, "%zu stored bodies belong to no control node of the model",
                  rt->n_bodies - bl.restored);
  return st;
}

mx_status mx__program_load_mxm(mx_session *s, const char *path, mx_program **out, mx_error *err) {
  *out = NULL;
  load_state ls = {0};
  size_t rt_size = 0;
  void *rt_bytes = NULL;
  Mxm__Runtime *rt = NULL;
  mx_program *p = NULL;
  mx__mxm_mapping *sec_map = NULL;
  mx_status st = mx__mxm_load_mapped(path, &ls.plans, &ls.n_plans, &rt_bytes, &rt_size, &sec_map, &ls.sec,
                                     &ls.sec_size, err);
  if (st != MX_OK) return st;
  if (!rt_bytes) {
    st = mx__fail(err, MX_ERR_UNSUPPORTED,
                  "'%s' holds static plans only, no partitioned model: write it with `mixrt compile` or "
                  "mx_session_save to run it in a session",
                  path);
    goto done;
  }
  const uint8_t *onnx = NULL;
  size_t onnx_len = 0, rest_len = 0;
  uint8_t *rest = NULL;
  if (!split_root_onnx(rt_bytes, rt_size, &onnx, &onnx_len, &rest, &rest_len)) {
    free(rest);
    st = mx__fail(err, MX_ERR_MALFORMED, "'%s': corrupt runtime record", path);
    goto done;
  }
  if (!rest) {
    st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory loading '%s'", path);
    goto done;
  }
  rt = mxm__runtime__unpack(NULL, rest_len, rest);
  free(rest);
  if (!rt || rt->version != RUNTIME_VERSION || rt->n_slots > MAX_SLOTS) {
    st = mx__fail(err, MX_ERR_MALFORMED, "'%s': corrupt or unknown runtime record", path);
    goto done;
  }
  p = calloc(1, sizeof *p);
  if (!p) {
    st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory loading '%s'", path);
    goto done;
  }
  mx__progress_stage("load: root graph and dynamic plans");
  /* The root's floating-point constants stay in the mapped section (not copied): the program
   * holds the mapping, as the static plans do theirs. */
  st = mx__onnx_load_memory_borrow(onnx, onnx_len, ls.sec, ls.sec_size, &p->root, err);
  p->weights_map = sec_map;
  sec_map = NULL;
  /* The imported root holds its own copy of the constants: the record (onnx points into it)
   * can go now. */
  free(rt_bytes);
  rt_bytes = NULL;
  onnx = NULL;
  mx__progress_stage("load: execution graphs");
  if (st == MX_OK) st = restore_program(s, &ls, rt, p, err);
  /* Declared gears' plans follow the root calls' (v2runtime/spec.h), the bodies' come last. */
  size_t first_gear = ls.used, n_gears = 0;
  while (st == MX_OK && ls.used < ls.n_plans && mx__spec_is_gear_plan(ls.plans[ls.used])) {
    ls.used++;
    n_gears++;
  }
  if (st == MX_OK) st = restore_bodies(s, &ls, rt, p, err);
  if (st == MX_OK && ls.used != ls.n_plans)
    st = mx__fail(err, MX_ERR_MALFORMED, "%zu static plans are not used by any partition call",
                  ls.n_plans - ls.used);
  if (st != MX_OK) {
    mx__error_prefix(err, "'%s': ", path);
    if (st != MX_ERR_OUT_OF_MEMORY && st != MX_ERR_IO) st = MX_ERR_MALFORMED;
    if (err) err->status = st;
    goto done;
  }
  st = mx__spec_stash_plans(p, ls.plans + first_gear, n_gears, err);
  if (st != MX_OK) goto done;
  *out = p;
  p = NULL;
done:
  if (p) mx__spec_release(s, p);
  mx__mxm_mapping_release(sec_map);
  mx__program_free(p);
  if (rt) mxm__runtime__free_unpacked(rt, NULL);
  free(rt_bytes);
  for (size_t i = 0; i < ls.n_plans; i++) mx__static_plan_destroy(ls.plans[i]);
  free(ls.plans);
  return st;
}
