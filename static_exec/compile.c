/* mx__static_compile: from an inferred known-shape graph to a static plan.
 *
 * 1. Walk the nodes in topological order: every value must have a dtype and a concrete shape
 *    and no op may be data-dependent. Nodes whose outputs are all constants are skipped; alias
 *    ops (Reshape, Squeeze, ..., and a Transpose that moves only dims of size 1) whose output is
 *    not a graph output become no task at all (the output names the bytes of the input); every
 *    other node becomes a kernel task with the CPU
 *    kernel chosen for its dtypes and the workspace that kernel asks for.
 * 2. Locations (design §5): graph inputs are read where the caller put them (INPUT i),
 *    constants from the WEIGHT region, the first occurrence of a graph output produced by a task
 *    is written straight into the caller's buffer (OUTPUT j). Outputs that are a graph input, a
 *    constant or a repeat of an earlier output get an explicit copy task. Everything else lives
 *    in the feature map (FM).
 * 3. Dependencies, schedule (schedule.c), streams and events (streams.c), FM plan (memplan.c).
 * 4. Emission of the plan: tasks in schedule order with their slots as (alloc_id, offset),
 *    params bytes, waits and records; the weights packed with 64-byte alignment. */
#include <stdlib.h>
#include <string.h>

#include "graph/ops/op.h"
#include "graph/passes/passes.h"
#include "static_exec/static_exec_impl.h"

#define WEIGHT_ALIGN 64u

/* Host-side figures of the cost model (estimated device time in ns). */
#define COST_LAUNCH_NS   500.0
#define COST_NS_PER_BYTE 0.125 /* ~8 GB/s */
#define COST_NS_PER_FLOP 0.05  /* ~20 GFLOP/s */

static bool value_concrete(const mx_value *v) {
  if (v->shape.rank < 0 || v->shape.rank > MX_MAX_RANK) return false;
  for (int32_t k = 0; k < v->shape.rank; k++)
    if (!mx_dim_is_concrete(v->shape.dims[k])) return false;
  return true;
}

/* Checks that value v (read or written by node nd) is usable in a static plan. */
static mx_status check_value(mx__compile *c, const mx_node *nd, mx_value_id v, const char *role,
                             uint32_t slot) {
  const mx_value *val = &c->g->values[v];
  char where[300];
  if (nd)
    snprintf(where, sizeof where, "node '%s' (%s) %s %u", nd->name, nd->op_type, role, slot);
  else
    snprintf(where, sizeof where, "%s %u", role, slot);
  if ((val->flags & MX_VALUE_OUTER) && !(val->flags & MX_VALUE_CONST))
    return mx__fail(c->err, MX_ERR_UNSUPPORTED,
                    "%s: value '%s' belongs to an enclosing graph; pass it as a graph input", where,
                    val->name);
  if (!mx_dtype_size(val->dtype))
    return mx__fail(c->err, MX_ERR_SHAPE, "%s: value '%s' has no known dtype (infer the graph first)", where,
                    val->name);
  if (!value_concrete(val)) {
    char buf[256];
    mx_shape_format(c->g->syms, &val->shape, buf, sizeof buf);
    return mx__fail(c->err, MX_ERR_SHAPE,
                    "%s: value '%s' has shape %s, not concrete: a static plan needs every shape "
                    "known (bind the symbols, then infer)",
                    where, val->name, buf);
  }
  uint64_t nb;
  if (!mx__dims_nbytes(val->dtype, val->shape.rank, val->shape.dims, &nb))
    return mx__fail(c->err, MX_ERR_LIMIT, "%s: value '%s' is too large", where, val->name);
  c->vals[v].nbytes = nb;
  return MX_OK;
}

/* A kernel call block for node nd with dtypes and dims set (no data). malloc'd. */
static mx_kernel_call *shape_call(const mx__compile *c, const mx_node *nd) {
  uint32_t ni = nd->n_inputs, no = nd->n_outputs;
  mx_kernel_call *call = calloc(1, mx__kernel_call_size(ni + no));
  if (!call) return NULL;
  call->params = nd->params;
  call->n_in = (uint16_t)ni;
  call->n_out = (uint16_t)no;
  for (uint32_t i = 0; i < ni + no; i++) {
    mx_value_id v = i < ni ? nd->inputs[i] : nd->outputs[i - ni];
    if (v == MX_NO_VALUE) continue;
    const mx_value *val = &c->g->values[v];
    call->t[i].dtype = val->dtype;
    mx__ktensor_set_dims(&call->t[i], val->shape.rank, val->shape.dims);
  }
  return call;
}

/* Estimated device time of a kernel: launch + bytes moved + multiply-adds of contractions. */
static double kernel_cost(const mx__compile *c, const mx_node *nd) {
  double bytes = 0;
  for (uint32_t i = 0; i < nd->n_inputs; i++)
    if (nd->inputs[i] != MX_NO_VALUE) bytes += (double)c->vals[nd->inputs[i]].nbytes;
  for (uint32_t i = 0; i < nd->n_outputs; i++) bytes += (double)c->vals[nd->outputs[i]].nbytes;
  double flops = 0;
  if ((strcmp(nd->op_type, "MatMul") == 0 || strcmp(nd->op_type, "Gemm") == 0 ||
       strcmp(nd->op_type, "Attention") == 0 || strcmp(nd->op_type, "Einsum") == 0) &&
      nd->n_inputs >= 1 && nd->inputs[0] != MX_NO_VALUE) {
    const mx_value *a = &c->g->values[nd->inputs[0]], *y = &c->g->values[nd->outputs[0]];
    double out_n = 1;
    for (int32_t k = 0; k < y->shape.rank; k++) out_n *= (double)y->shape.dims[k];
    double kdim = a->shape.rank > 0 ? (double)a->shape.dims[a->shape.rank - 1] : 1;
    flops = 2.0 * out_n * kdim;
  }
  return COST_LAUNCH_NS + bytes * COST_NS_PER_BYTE + flops * COST_NS_PER_FLOP;
}

/* Appends a task; returns its index. */
static uint32_t add_task(mx__compile *c, const mx__ctask *t) {
  uint32_t i = c->n_tasks++;
  c->tasks[i] = *t;
  c->tasks[i].event = MX__NONE;
  return i;
}

/* Step 1: tasks for the nodes, aliases, value locations. */
static mx_status build_tasks(mx__compile *c, const mx_node_id *order, size_t n_order) {
  mx_graph *g = c->g;
  mx_status st = MX_OK;
  for (size_t i = 0; i < g->n_inputs; i++) {
    mx_value_id v = g->inputs[i];
    st = check_value(c, NULL, v, "graph input", (uint32_t)i);
    if (st != MX_OK) return st;
    c->vals[v].loc = MX__LOC_INPUT;
    c->vals[v].index = (uint32_t)i;
  }
  for (size_t v = 0; v < g->n_values; v++) {
    const mx_value *val = &g->values[v];
    if ((val->flags & MX_VALUE_DEAD) || (val->flags & MX_VALUE_INPUT)) continue;
    if ((val->flags & MX_VALUE_CONST) && val->data) c->vals[v].loc = MX__LOC_WEIGHT;
  }
  for (size_t k = 0; k < n_order; k++) {
    mx_node_id nid = order[k];
    mx_node *nd = &g->nodes[nid];
    bool all_const = nd->n_outputs > 0;
    for (uint32_t o = 0; o < nd->n_outputs; o++)
      all_const = all_const && c->vals[nd->outputs[o]].loc == MX__LOC_WEIGHT;
    if (all_const) continue;
    st = mx__node_prepare(g, nid, c->err);
    if (st != MX_OK) return st;
    if (nd->def->flags & MX_OP_DATA_DEPENDENT)
      return mx__fail(c->err, MX_ERR_UNSUPPORTED,
                      "node '%s' (%s) is data-dependent: its output shape is known only after it "
                      "ran, so it cannot be part of a static plan",
                      nd->name, nd->op_type);
    for (uint32_t i = 0; i < nd->n_inputs; i++) {
      if (nd->inputs[i] == MX_NO_VALUE) continue;
      st = check_value(c, nd, nd->inputs[i], "input", i);
      if (st != MX_OK) return st;
      if (c->vals[nd->inputs[i]].loc == MX__LOC_NONE && c->vals[nd->inputs[i]].producer == MX__NONE)
        return mx__fail(c->err, MX_ERR_INVALID_GRAPH,
                        "node '%s' (%s) input %u: value '%s' is neither a graph input, a constant "
                        "nor produced by a node",
                        nd->name, nd->op_type, i, g->values[nd->inputs[i]].name);
    }
    for (uint32_t o = 0; o < nd->n_outputs; o++) {
      st = check_value(c, nd, nd->outputs[o], "output", o);
      if (st != MX_OK) return st;
    }
    mx_value_id out0 = nd->n_outputs ? nd->outputs[0] : MX_NO_VALUE;
    mx_value_id in0 = nd->n_inputs ? nd->inputs[0] : MX_NO_VALUE;
    if (mx__node_keeps_bytes(g, nd) && nd->n_outputs == 1 && in0 != MX_NO_VALUE &&
        !(g->values[out0].flags & MX_VALUE_OUTPUT) && g->values[out0].dtype == g->values[in0].dtype &&
        c->vals[out0].nbytes == c->vals[in0].nbytes) {
      mx__cval *ov = &c->vals[out0];
      const mx__cval *iv = &c->vals[in0];
      ov->root = iv->root;
      ov->producer = iv->producer;
      ov->loc = c->vals[iv->root].loc;
      c->aliases++;
      continue;
    }
    mx_kernel_call *call = shape_call(c, nd);
    if (!call) return mx__fail_oom(c->err, "kernel lookup");
    const mx_kernel_def *kd = mx__kernel_find(nd->domain, nd->op_type, call);
    size_t ws = kd && kd->workspace ? kd->workspace(call) : 0;
    free(call);
    if (!kd) {
      mx_dtype dt = nd->n_inputs && nd->inputs[0] != MX_NO_VALUE ? g->values[nd->inputs[0]].dtype
                                                                 : g->values[out0].dtype;
      return mx__fail(c->err, MX_ERR_UNSUPPORTED, "node '%s' (%s): no CPU kernel for dtype %s", nd->name,
                      nd->op_type, mx_dtype_name(dt));
    }
    mx__ctask t = {.kind = MX__TASK_KERNEL, .node = nid, .kd = kd, .ws_size = ws, .copy_src = MX_NO_VALUE};
    t.cost = kernel_cost(c, nd);
    uint32_t ti = add_task(c, &t);
    for (uint32_t o = 0; o < nd->n_outputs; o++) {
      mx__cval *ov = &c->vals[nd->outputs[o]];
      ov->producer = ti;
      ov->loc = MX__LOC_FM;
    }
  }
  return MX_OK;
}

/* Step 2: graph outputs are zero copy when a task writes them, else copied. */
static mx_status place_outputs(mx__compile *c) {
  mx_graph *g = c->g;
  for (size_t j = 0; j < g->n_outputs; j++) {
    mx_value_id v = g->outputs[j];
    if (!mx__value_valid(g, v))
      return mx__fail(c->err, MX_ERR_INVALID_GRAPH, "graph output %zu is not a live value", j);
    mx_status st = check_value(c, NULL, v, "graph output", (uint32_t)j);
    if (st != MX_OK) return st;
    mx__cval *cv = &c->vals[v];
    if (cv->loc == MX__LOC_FM && cv->root == v && cv->producer != MX__NONE) {
      cv->loc = MX__LOC_OUTPUT;
      cv->index = (uint32_t)j;
      continue;
    }
    if (cv->loc == MX__LOC_NONE)
      return mx__fail(c->err, MX_ERR_INVALID_GRAPH,
                      "graph output %zu ('%s') is neither a graph input, a constant nor produced "
                      "by a node",
                      j, g->values[v].name);
    if (cv->nbytes == 0) continue; /* an empty output: nothing to copy */
    mx__ctask t = {.kind = MX__TASK_COPY, .node = MX_NO_NODE, .copy_src = v, .copy_out = (uint32_t)j};
    t.cost = COST_LAUNCH_NS + 2.0 * (double)cv->nbytes * COST_NS_PER_BYTE;
    add_task(c, &t);
  }
  return MX_OK;
}

static mx_status add_pred(mx__compile *c, uint32_t t, uint32_t p) {
  mx__ctask *task = &c->tasks[t];
  if (p == MX__NONE || p == t) return MX_OK;
  for (uint32_t k = 0; k < task->n_preds; k++)
    if (task->preds[k] == p) return MX_OK;
  task->preds[task->n_preds++] = p;
  c->tasks[p].n_succs++;
  return MX_OK;
}

/* Step 3a: producer -> consumer edges (distinct) and their reverse lists. */
static mx_status build_edges(mx__compile *c) {
  for (uint32_t t = 0; t < c->n_tasks; t++) {
    mx__ctask *task = &c->tasks[t];
    uint32_t cap = task->kind == MX__TASK_COPY ? 1 : c->g->nodes[task->node].n_inputs;
    task->preds = mx__arena_array(&c->arena, cap ? cap : 1, sizeof *task->preds, 4);
    if (!task->preds) return mx__fail_oom(c->err, "task edges");
    if (task->kind == MX__TASK_COPY) {
      add_pred(c, t, c->vals[task->copy_src].producer);
      continue;
    }
    const mx_node *nd = &c->g->nodes[task->node];
    for (uint32_t i = 0; i < nd->n_inputs; i++)
      if (nd->inputs[i] != MX_NO_VALUE) add_pred(c, t, c->vals[nd->inputs[i]].producer);
  }
  for (uint32_t t = 0; t < c->n_tasks; t++) {
    mx__ctask *task = &c->tasks[t];
    task->succs = mx__arena_array(&c->arena, task->n_succs ? task->n_succs : 1, sizeof *task->succs, 4);
    if (!task->succs) return mx__fail_oom(c->err, "task edges");
    task->n_succs = 0;
  }
  for (uint32_t t = 0; t < c->n_tasks; t++) {
    const mx__ctask *task = &c->tasks[t];
    for (uint32_t k = 0; k < task->n_preds; k++) {
      mx__ctask *p = &c->tasks[task->preds[k]];
      p->succs[p->n_succs++] = t;
    }
  }
  return MX_OK;
}

/* Where value v's data is: alloc id and offset (MX__NO_ALLOC for no data). */
static void locate(mx__compile *c, mx_value_id v, uint32_t *alloc, uint64_t *offset) {
  *alloc = MX__NO_ALLOC;
  *offset = 0;
  if (v == MX_NO_VALUE || c->vals[v].nbytes == 0) return;
  mx_value_id r = c->vals[v].root;
  const mx__cval *rv = &c->vals[r];
  switch (rv->loc) {
    case MX__LOC_INPUT: *alloc = MX__ID_INPUT0 + rv->index; break;
    case MX__LOC_WEIGHT:
      *alloc = MX__ID_WEIGHT;
      *offset = rv->weight_offset;
      break;
    case MX__LOC_OUTPUT: *alloc = MX__ID_INPUT0 + (uint32_t)c->g->n_inputs + rv->index; break;
    case MX__LOC_FM: {
      uint32_t b = c->vals[mx__group_of(c, r)].buffer;
      if (b == MX__NONE) return;
      *alloc = MX__ID_FM;
      *offset = c->bufs[b].offset;
      break;
    }
    case MX__LOC_NONE: break;
  }
}

/* Step 4a: offsets of the constants the tasks read, in schedule order. */
static mx_status place_weights(mx__compile *c, uint64_t *total) {
  uint64_t off = 0;
  size_t nv = c->g->n_values ? c->g->n_values : 1;
  bool *seen = calloc(nv, 1);
  c->wvals = calloc(nv, sizeof *c->wvals);
  if (!seen || !c->wvals) {
    free(seen);
    return mx__fail_oom(c->err, "weight layout");
  }
  for (uint32_t pos = 0; pos < c->n_tasks; pos++) {
    const mx__ctask *t = &c->tasks[c->order[pos]];
    uint32_t n = t->kind == MX__TASK_COPY ? 1 : c->g->nodes[t->node].n_inputs;
    for (uint32_t i = 0; i < n; i++) {
      mx_value_id v = t->kind == MX__TASK_COPY ? t->copy_src : c->g->nodes[t->node].inputs[i];
      if (v == MX_NO_VALUE) continue;
      mx_value_id r = c->vals[v].root;
      if (c->vals[r].loc != MX__LOC_WEIGHT || seen[r] || c->vals[r].nbytes == 0) continue;
      const mx_tensor *data = c->g->values[r].data;
      size_t have = 0;
      if (!data || !data->data || !mx_tensor_nbytes(data, &have) || have != c->vals[r].nbytes) {
        free(seen);
        return mx__fail(c->err, MX_ERR_INVALID_GRAPH,
                        "constant '%s': its data does not match its inferred shape", c->g->values[r].name);
      }
      seen[r] = true;
      c->wvals[c->n_wvals++] = r;
      c->vals[r].weight_offset = off;
      uint64_t sz = (c->vals[r].nbytes + WEIGHT_ALIGN - 1) & ~(uint64_t)(WEIGHT_ALIGN - 1);
      if (sz < c->vals[r].nbytes || off + sz < off) {
        free(seen);
        return mx__fail(c->err, MX_ERR_LIMIT, "the weights exceed the address space");
      }
      off += sz;
    }
  }
  free(seen);
  *total = off;
  return MX_OK;
}

/* Fills a plan tensor for value v (MX_NO_VALUE: an omitted input). */
static mx_status emit_tensor(mx__compile *c, mx_static_plan *p, mx_value_id v, bool store_values,
                             mx__ptensor *t) {
  memset(t, 0, sizeof *t);
  t->alloc = MX__NO_ALLOC;
  t->n_values = -1;
  if (v == MX_NO_VALUE) return MX_OK;
  const mx_value *val = &c->g->values[v];
  t->dtype = val->dtype;
  t->rank = val->shape.rank;
  for (int32_t k = 0; k < t->rank; k++) t->dims[k] = val->shape.dims[k];
  t->nbytes = c->vals[v].nbytes;
  locate(c, v, &t->alloc, &t->offset);
  if (!store_values || t->alloc == MX__ID_WEIGHT || val->sv_len < 0 || !val->sv || val->sv_len > MX_SV_MAX ||
      (val->dtype != MX_INT64 && val->dtype != MX_INT32))
    return MX_OK;
  int64_t *vals = mx__arena_array(&p->arena, val->sv_len ? (size_t)val->sv_len : 1, sizeof *vals, 8);
  if (!vals) return mx__fail_oom(c->err, "plan tensor values");
  for (int32_t k = 0; k < val->sv_len; k++)
    if (!mx_sym_const_value(c->g->syms, val->sv[k], &vals[k])) return MX_OK;
  t->values = vals;
  t->n_values = val->sv_len;
  return MX_OK;
}

static mx_status emit_io(mx__compile *c, mx_static_plan *p, mx_value_id v, const char *name, mx__pio *io) {
  const mx_value *val = &c->g->values[v];
  io->name = mx__arena_strdup(&p->arena, name);
  if (!io->name) return mx__fail_oom(c->err, "plan names");
  io->dtype = val->dtype;
  io->rank = val->shape.rank;
  for (int32_t k = 0; k < io->rank; k++) io->dims[k] = val->shape.dims[k];
  io->nbytes = c->vals[v].nbytes;
  return MX_OK;
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

/* The plan's name, counts and figures from the compile, and its record arrays (allocated). */
static mx_status emit_header(mx__compile *c, const mx_static_options *o, mx_static_plan *p) {
  const mx_graph *g = c->g;
  p->name = mx__arena_strdup(&p->arena, o->name ? o->name : (g->name ? g->name : "static"));
  p->n_streams = c->n_streams;
  p->n_events = c->n_events;
  p->mode = o->mode;
  p->fm_external = o->fm_external;
  p->trusted = true;
  p->n_inputs = (uint32_t)g->n_inputs;
  p->n_outputs = (uint32_t)g->n_outputs;
  p->fm_bytes = c->fm_bytes;
  p->lower_bound = c->lower_bound;
  p->no_reuse = c->no_reuse;
  p->cross_edges = c->cross_edges;
  p->in_place = c->in_place;
  p->aliases = c->aliases;
  p->placement = c->placement;
  p->inputs = mx__arena_array(&p->arena, p->n_inputs ? p->n_inputs : 1, sizeof *p->inputs, 8);
  p->outputs = mx__arena_array(&p->arena, p->n_outputs ? p->n_outputs : 1, sizeof *p->outputs, 8);
  p->tasks = mx__arena_array(&p->arena, c->n_tasks ? c->n_tasks : 1, sizeof *p->tasks, 8);
  p->buffers = mx__arena_array(&p->arena, c->n_bufs ? c->n_bufs : 1, sizeof *p->buffers, 8);
  if (!p->name || !p->inputs || !p->outputs || !p->tasks || !p->buffers)
    return mx__fail_oom(c->err, "plan records");
  return MX_OK;
}

/* The graph's inputs (the frozen ones marked) and outputs. */
static mx_status emit_ios(mx__compile *c, const mx_static_options *o, mx_static_plan *p) {
  const mx_graph *g = c->g;
  for (uint32_t i = 0; i < p->n_inputs; i++) {
    mx_status st = emit_io(c, p, g->inputs[i], g->values[g->inputs[i]].name, &p->inputs[i]);
    if (st != MX_OK) return st;
  }
  for (size_t k = 0; k < o->n_frozen; k++) p->inputs[o->frozen_inputs[k]].frozen = true;
  for (uint32_t j = 0; j < p->n_outputs; j++) {
    mx_status st = emit_io(c, p, g->outputs[j], g->values[g->outputs[j]].name, &p->outputs[j]);
    if (st != MX_OK) return st;
  }
  return MX_OK;
}

/* A task's stream, kind, the events it waits for and the one it records. */
static mx_status emit_task_sync(mx__compile *c, const mx__ctask *ct, mx_static_plan *p, mx__ptask *pt) {
  pt->stream = ct->stream;
  pt->kind = ct->kind;
  if (ct->n_waits) {
    pt->waits = mx__arena_memdup(&p->arena, ct->waits, ct->n_waits * sizeof *ct->waits, 4);
    if (!pt->waits) return mx__fail_oom(c->err, "plan events");
    pt->n_waits = ct->n_waits;
  }
  if (ct->event != MX__NONE) {
    pt->records = mx__arena_memdup(&p->arena, &ct->event, sizeof ct->event, 4);
    if (!pt->records) return mx__fail_oom(c->err, "plan events");
    pt->n_records = 1;
  }
  return MX_OK;
}

/* A copy task: its source tensor into graph output copy_out. */
static mx_status emit_copy_task(mx__compile *c, const mx__ctask *ct, mx_static_plan *p, mx__ptask *pt) {
  const char *oname = c->g->values[c->g->outputs[ct->copy_out]].name;
  pt->name = mx__arena_printf(&p->arena, "copy:%s", oname);
  pt->op = "Copy";
  pt->domain = "";
  pt->n_in = 1;
  pt->n_out = 1;
  pt->t = mx__arena_array(&p->arena, 2, sizeof *pt->t, 8);
  if (!pt->name || !pt->t) return mx__fail_oom(c->err, "plan tasks");
  mx_status st = emit_tensor(c, p, ct->copy_src, false, &pt->t[0]);
  if (st != MX_OK) return st;
  pt->t[1] = pt->t[0];
  pt->t[1].alloc = MX__ID_INPUT0 + p->n_inputs + ct->copy_out;
  pt->t[1].offset = 0;
  return MX_OK;
}

/* A kernel task: its node's names, attributes, params, tensors, key dtype and workspace size. */
static mx_status emit_node_task(mx__compile *c, const mx__ctask *ct, mx_static_plan *p, mx__ptask *pt) {
  const mx_node *nd = &c->g->nodes[ct->node];
  pt->name = mx__arena_strdup(&p->arena, nd->name);
  pt->op = mx__arena_strdup(&p->arena, nd->op_type);
  pt->domain = mx__arena_strdup(&p->arena, nd->domain ? nd->domain : "");
  pt->opset = nd->opset;
  pt->n_in = nd->n_inputs;
  pt->n_out = nd->n_outputs;
  pt->t = mx__arena_array(&p->arena, (size_t)pt->n_in + pt->n_out + 1, sizeof *pt->t, 8);
  if (!pt->name || !pt->op || !pt->domain || !pt->t) return mx__fail_oom(c->err, "plan tasks");
  mx_status st = mx__plan_copy_attrs(p, nd->attrs, nd->n_attrs, &pt->attrs, c->err);
  if (st != MX_OK) {
    mx__error_prefix(c->err, "node '%s' (%s): ", nd->name, nd->op_type);
    return st;
  }
  pt->n_attrs = nd->n_attrs;
  if (nd->def->params_size) {
    pt->params = mx__arena_memdup(&p->arena, nd->params, nd->def->params_size, 16);
    if (!pt->params) return mx__fail_oom(c->err, "plan params");
    pt->params_size = (uint32_t)nd->def->params_size;
  }
  for (uint32_t i = 0; i < pt->n_in; i++) {
    st = emit_tensor(c, p, nd->inputs[i], true, &pt->t[i]);
    if (st != MX_OK) return st;
  }
  for (uint32_t k = 0; k < pt->n_out; k++) {
    st = emit_tensor(c, p, nd->outputs[k], false, &pt->t[pt->n_in + k]);
    if (st != MX_OK) return st;
  }
  int key = ct->kd->key;
  uint32_t kidx = key >= 0 ? (uint32_t)key : pt->n_in + (uint32_t)(-1 - key);
  pt->key_dtype = kidx < pt->n_in + pt->n_out ? (int32_t)pt->t[kidx].dtype : 0;
  pt->ws_size = ct->ws_size;
  return MX_OK;
}

/* The tasks in their plan order. */
static mx_status emit_tasks(mx__compile *c, mx_static_plan *p) {
  p->n_tasks = c->n_tasks;
  for (uint32_t pos = 0; pos < c->n_tasks; pos++) {
    const mx__ctask *ct = &c->tasks[c->order[pos]];
    mx__ptask *pt = &p->tasks[pos];
    mx_status st = emit_task_sync(c, ct, p, pt);
    if (st != MX_OK) return st;
    st = ct->kind == MX__TASK_COPY ? emit_copy_task(c, ct, p, pt) : emit_node_task(c, ct, p, pt);
    if (st != MX_OK) return st;
  }
  return MX_OK;
}

/* Buffers: users as plan positions, workspaces into their tasks. */
static mx_status emit_buffers(mx__compile *c, mx_static_plan *p) {
  const mx_graph *g = c->g;
  p->n_buffers = c->n_bufs;
  for (uint32_t b = 0; b < c->n_bufs; b++) {
    const mx__cbuf *cb = &c->bufs[b];
    mx__pbuf *pb = &p->buffers[b];
    pb->offset = cb->offset;
    pb->size = cb->size;
    pb->workspace = cb->workspace;
    pb->users = mx__arena_array(&p->arena, cb->n_users ? cb->n_users : 1, sizeof *pb->users, 4);
    if (!pb->users) return mx__fail_oom(c->err, "plan buffers");
    for (uint32_t k = 0; k < cb->n_users; k++) pb->users[k] = c->tasks[cb->users[k]].pos;
    qsort(pb->users, cb->n_users, sizeof *pb->users, cmp_u32);
    pb->n_users = cb->n_users;
    if (cb->workspace) {
      const mx__ctask *ct = &c->tasks[cb->task];
      p->tasks[ct->pos].ws_offset = cb->offset;
      pb->name = mx__arena_printf(&p->arena, "workspace:%s", g->nodes[ct->node].name);
    } else {
      pb->name = mx__arena_strdup(&p->arena, g->values[cb->value].name);
    }
    if (!pb->name) return mx__fail_oom(c->err, "plan buffers");
  }
  return MX_OK;
}

static void release_mapping(void *m) { mx__mxm_mapping_release(m); }

/* The weights, copied into one 64-byte aligned block at their offsets. The block is held through
 * a mapping holder: a model on a host-memory device registers it and computes on it in place.
 * A large graph constant then lies in the block (the graph's copy released): one copy of each. */
static mx_status emit_weights(mx__compile *c, mx_static_plan *p) {
  if (!p->weight_bytes) return MX_OK;
  size_t sz = (size_t)p->weight_bytes;
  uint8_t *block = aligned_alloc(64, (sz + 63) & ~(size_t)63);
  if (!block) return mx__fail_oom(c->err, "plan weights");
  if (!(p->weights_map = mx__mxm_mapping_wrap_heap(block, sz))) {
    free(block);
    return mx__fail_oom(c->err, "plan weights");
  }
  p->weights = block;
  memset(p->weights, 0, sz);
  for (uint32_t k = 0; k < c->n_wvals; k++) {
    const mx__cval *cv = &c->vals[c->wvals[k]];
    memcpy(p->weights + cv->weight_offset, c->g->values[c->wvals[k]].data->data, (size_t)cv->nbytes);
    mx__mxm_mapping *ref = mx__mxm_mapping_retain(p->weights_map);
    if (!mx__graph_const_rehome(c->g, c->wvals[k], p->weights + cv->weight_offset, (size_t)cv->nbytes,
                                ref, release_mapping))
      mx__mxm_mapping_release(ref);
  }
  return MX_OK;
}

/* Step 4b: the plan records. */
static mx_status emit_plan(mx__compile *c, const mx_static_options *o, mx_static_plan *p) {
  mx_status st = place_weights(c, &p->weight_bytes);
  if (st == MX_OK) st = emit_header(c, o, p);
  if (st == MX_OK) st = emit_ios(c, o, p);
  if (st == MX_OK) st = emit_tasks(c, p);
  if (st == MX_OK) st = emit_buffers(c, p);
  if (st == MX_OK) st = emit_weights(c, p);
  return st;
}

static mx_status check_options(const mx_graph *g, const mx_static_options *o, mx_error *err) {
  if (o->version != MX_STATIC_OPTIONS_VERSION)
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT,
                    "mx__static_compile: options version %u (expected %u): use "
                    "mx__static_options_init",
                    o->version, MX_STATIC_OPTIONS_VERSION);
  if (o->max_streams > MX_STATIC_MAX_STREAMS)
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "mx__static_compile: max_streams %u (1..%u)",
                    o->max_streams, MX_STATIC_MAX_STREAMS);
  if ((unsigned)o->mode > MX_HAL_MODEL_INDIRECT)
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "mx__static_compile: unknown HAL model mode %d",
                    (int)o->mode);
  if (o->n_frozen && !o->frozen_inputs)
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "mx__static_compile: frozen_inputs is NULL");
  for (size_t k = 0; k < o->n_frozen; k++)
    if (o->frozen_inputs[k] >= g->n_inputs)
      return mx__fail(err, MX_ERR_INVALID_ARGUMENT,
                      "mx__static_compile: frozen input %u does not exist (graph '%s' has %zu "
                      "inputs)",
                      o->frozen_inputs[k], g->name, g->n_inputs);
  if (g->n_inputs + g->n_outputs > MX__MAX_IO)
    return mx__fail(err, MX_ERR_LIMIT, "graph '%s': too many inputs and outputs", g->name);
  return MX_OK;
}

/* The limits a loader enforces (task count, tensors and params bytes per task), checked here so
 * that every compiled plan can be saved and loaded again. */
static mx_status check_limits(const mx__compile *c) {
  if (c->n_tasks > MX__MAX_TASKS)
    return mx__fail(c->err, MX_ERR_LIMIT, "graph '%s': %u tasks (limit %u)", c->g->name, c->n_tasks,
                    MX__MAX_TASKS);
  for (uint32_t t = 0; t < c->n_tasks; t++) {
    if (c->tasks[t].kind != MX__TASK_KERNEL) continue;
    const mx_node *nd = &c->g->nodes[c->tasks[t].node];
    if (nd->n_inputs + nd->n_outputs > MX__MAX_TASK_TENSORS || (nd->def->params_size > MX__MAX_PARAMS_BYTES))
      return mx__fail(c->err, MX_ERR_LIMIT, "node '%s' (%s): too many tensors or params", nd->name,
                      nd->op_type);
  }
  return MX_OK;
}

mx_status mx__static_compile(mx_graph *g, const mx_static_options *opt, mx_static_plan **out, mx_error *err) {
  if (out) *out = NULL;
  if (!g || !out) return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "mx__static_compile: NULL argument");
  mx_static_options o;
  mx__static_options_init(&o);
  if (opt) o = *opt;
  if (o.max_streams == 0) o.max_streams = 1;
  mx_status st = check_options(g, &o, err);
  if (st != MX_OK) return st;

  const mx_node_id *order;
  size_t n_order;
  st = mx__graph_topo_order(g, &order, &n_order);
  if (st != MX_OK) return mx__fail(err, st, "%s", mx_graph_last_error(g));

  mx__compile c;
  memset(&c, 0, sizeof c);
  c.g = g;
  c.err = err;
  c.max_streams = o.max_streams;
  mx__arena_init(&c.arena, 64 * 1024);
  mx_static_plan *p = NULL;
  size_t nv = g->n_values ? g->n_values : 1;
  c.vals = calloc(nv, sizeof *c.vals);
  c.tasks = calloc(n_order + g->n_outputs + 1, sizeof *c.tasks);
  if (!c.vals || !c.tasks) {
    st = mx__fail_oom(err, "compile tables");
    goto free_compile;
  }
  for (size_t v = 0; v < g->n_values; v++) {
    c.vals[v].root = (mx_value_id)v;
    c.vals[v].group = (uint32_t)v;
    c.vals[v].producer = MX__NONE;
    c.vals[v].buffer = MX__NONE;
  }
  st = build_tasks(&c, order, n_order);
  if (st == MX_OK) st = place_outputs(&c);
  if (st == MX_OK) st = check_limits(&c);
  if (st == MX_OK) st = build_edges(&c);
  if (st == MX_OK) st = mx__static_schedule(&c);
  if (st == MX_OK) st = mx__static_streams(&c);
  if (st == MX_OK) st = mx__static_memplan(&c);
  if (st != MX_OK) goto free_compile;
  p = mx__plan_new();
  if (!p) {
    st = mx__fail_oom(err, "plan");
    goto free_compile;
  }
  st = emit_plan(&c, &o, p);
  if (st != MX_OK) goto free_plan;
  *out = p;
  p = NULL;
  goto free_compile;

free_plan:
  mx__static_plan_destroy(p);
free_compile:
  for (uint32_t b = 0; c.bufs && b < c.n_bufs; b++) free(c.bufs[b].users);
  free(c.bufs);
  free(c.wvals);
  free(c.vc);
  free(c.order);
  free(c.tasks);
  free(c.vals);
  mx__arena_release(&c.arena);
  return st;
}
