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

mx_status mx__program_save_mxm(mx_session *s, const char *path, bool external_weights, mx_error *err) {
  mx_program *p = s->prog;
  mx_status st;
  mx__mxm_weights *w = NULL;
  void *onnx = NULL;
  size_t onnx_size = 0;
  packed_graph pg[3];
  memset(pg, 0, sizeof pg);
  /* Declared gears go after the calls' plans, named "<call>@<binding>" (v2runtime/spec.h). */
  mx_static_plan **gears = NULL;
  size_t n_gears = 0;
  st = mx__spec_gear_plans(s, p, &gears, &n_gears, err);
  if (st != MX_OK) return st;
  const mx_static_plan **plans = calloc(p->n_calls + n_gears + 1, sizeof *plans);
  protobuf_c_boolean *unknown = calloc(p->n_calls ? p->n_calls : 1, sizeof *unknown);
  if (!plans || !unknown) goto oom;
  size_t n_plans = 0;
  for (size_t c = 0; c < p->n_calls; c++) {
    unknown[c] = p->calls[c].unknown;
    if (!p->calls[c].unknown) plans[n_plans++] = p->calls[c].plan;
  }
  for (size_t g = 0; g < n_gears; g++) plans[n_plans++] = gears[g];
  /* The weights section holds the static plans' weights; the root graph's constants (the call
   * bodies' included) refer to them where they are the same bytes, and are added otherwise. */
  st = mx__mxm_weights_begin(plans, n_plans, &w, err);
  if (st == MX_OK) st = mx__onnx_save_memory_refs(p->root, weights_ref, w, &onnx, &onnx_size, err);
  if (st != MX_OK) goto done;
  if (!pack_graph(&p->init, &pg[0]) || !pack_graph(&p->main, &pg[1]) || !pack_graph(&p->deinit, &pg[2]))
    goto oom;
  Mxm__Runtime rt = MXM__RUNTIME__INIT;
  rt.version = RUNTIME_VERSION;
  rt.root_onnx.data = onnx;
  rt.root_onnx.len = onnx_size;
  rt.n_call_unknown = p->n_calls;
  rt.call_unknown = unknown;
  rt.init = &pg[0].msg;
  rt.main = &pg[1].msg;
  rt.deinit = &pg[2].msg;
  rt.n_slots = p->n_slots;
  mx_mxm_save_options so = {.external_weights = external_weights};
  /* The record is packed straight into the file: the root's ONNX bytes are its only copy. */
  st = mx__mxm_save_with_runtime(plans, n_plans, &rt.base, w, path, &so, err);
  goto done;
oom:
  st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory writing '%s'", path);
done:
  for (int i = 0; i < 3; i++) packed_release(&pg[i]);
  mx__mxm_weights_free(w);
  free(onnx);
  free(unknown);
  free(plans);
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

mx_status mx__program_load_mxm(mx_session *s, const char *path, mx_program **out, mx_error *err) {
  *out = NULL;
  mx_static_plan **plans = NULL;
  size_t n_plans = 0, rt_size = 0, used_plans = 0;
  void *rt_bytes = NULL;
  Mxm__Runtime *rt = NULL;
  mx_program *p = NULL;
  mx__mxm_mapping *sec_map = NULL;
  const unsigned char *sec = NULL;
  uint64_t sec_size = 0;
  mx_status st =
      mx__mxm_load_mapped(path, &plans, &n_plans, &rt_bytes, &rt_size, &sec_map, &sec, &sec_size, err);
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
  st = mx__onnx_load_memory_borrow(onnx, onnx_len, sec, sec_size, &p->root, err);
  p->weights_map = sec_map;
  sec_map = NULL;
  /* The imported root holds its own copy of the constants: the record (onnx points into it)
   * can go now. */
  free(rt_bytes);
  rt_bytes = NULL;
  onnx = NULL;
  if (st == MX_OK && mx_graph_infer(p->root) != MX_OK)
    st = mx__fail(err, MX_ERR_MALFORMED, "%s", mx_graph_last_error(p->root));
  if (st == MX_OK) st = mx__program_calls(p, err);
  if (st == MX_OK && p->n_calls != rt->n_call_unknown)
    st = mx__fail(err, MX_ERR_MALFORMED, "%zu partition calls in the root graph, %zu recorded", p->n_calls,
                  rt->n_call_unknown);
  for (size_t c = 0; c < p->n_calls && st == MX_OK; c++) {
    mx_rt_call *call = &p->calls[c];
    call->unknown = rt->call_unknown[c];
    if (!call->unknown) {
      if (used_plans == n_plans || strcmp(mx__static_plan_name(plans[used_plans]), call->name) != 0) {
        st = mx__fail(err, MX_ERR_MALFORMED, "no static plan for partition call '%s'", call->name);
        break;
      }
      call->plan = plans[used_plans];
      plans[used_plans++] = NULL;
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
  size_t n_gears = 0; /* declared gears' plans follow the calls' (v2runtime/spec.h) */
  while (used_plans + n_gears < n_plans && mx__spec_is_gear_plan(plans[used_plans + n_gears])) n_gears++;
  if (st == MX_OK && used_plans + n_gears != n_plans)
    st = mx__fail(err, MX_ERR_MALFORMED, "%zu static plans are not used by any partition call",
                  n_plans - used_plans - n_gears);
  if (st == MX_OK) st = mx__program_finish(p, err);
  if (st == MX_OK) {
    p->n_slots = rt->n_slots;
    p->slots = calloc(p->n_slots ? p->n_slots : 1, sizeof *p->slots);
    if (!p->slots) st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory loading '%s'", path);
  }
  uint32_t *made = NULL;
  if (st == MX_OK && !(made = calloc(p->n_calls + p->n_values + 1, sizeof *made)))
    st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory loading '%s'", path);
  mx__progress_stage("load: execution graphs");
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
  if (st != MX_OK) {
    mx__error_prefix(err, "'%s': ", path);
    if (st != MX_ERR_OUT_OF_MEMORY && st != MX_ERR_IO) st = MX_ERR_MALFORMED;
    if (err) err->status = st;
    goto done;
  }
  st = mx__spec_stash_plans(p, plans + used_plans, n_gears, err);
  if (st != MX_OK) goto done;
  *out = p;
  p = NULL;
done:
  if (p) mx__spec_release(s, p);
  mx__mxm_mapping_release(sec_map);
  mx__program_free(p);
  if (rt) mxm__runtime__free_unpacked(rt, NULL);
  free(rt_bytes);
  for (size_t i = 0; i < n_plans; i++) mx__static_plan_destroy(plans[i]);
  free(plans);
  return st;
}
