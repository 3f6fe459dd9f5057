/* Building a dynamic plan: op order and kinds, kernels looked up once by dtype, output dims as
 * expressions of the symbols bound before each op, what each value is needed for, last uses,
 * and the per-op release lists. Streams and events are plan_streams.c's. */
#include <stdlib.h>
#include <string.h>

#include "dynamic_exec/dynamic_exec_impl.h"

void mx__dyn_options_init(mx_dyn_options *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->max_streams = 1;
  o->host_ops = true;
  o->eval_ops = true;
  o->alias_ops = true;
  o->meta_entries = 4;
}

/* Scratch state of one plan build. */
typedef struct builder {
  mx_dyn_plan *p;
  mx_graph *g;
  const mx_symtab *syms;
  bool *bindable;    /* per symbol: bound from inputs or by an earlier op (owned) */
  bool *input_bound; /* per symbol: bound by a graph input dim (owned) */
  uint32_t *sym_buf; /* scratch for mx_sym_symbols_of (owned) */
  size_t sym_cap;
  mx__dyn_dimx *svx; /* growing array of eval values (moved to the plan) */
  size_t n_svx, cap_svx;
  mx_error *err;
} builder;

/* Converts one inferred dim (or sv element) into its run-time form; adds its symbols to *mask. */
static mx__dyn_dimx to_dimx(builder *b, mx_dim d, uint64_t *mask) {
  mx__dyn_dimx x = {0, MX__DYN_DIM_NONE};
  int64_t c;
  if (mx_dim_is_concrete(d)) {
    x.kind = MX__DYN_DIM_CONST;
    x.v = d;
    return x;
  }
  if (mx_dim_is_unknown(d)) return x;
  if (mx_sym_const_value(b->syms, d, &c)) {
    x.kind = MX__DYN_DIM_CONST;
    x.v = c;
    return x;
  }
  int64_t s = mx_sym_symbol_index(b->syms, d);
  if (s >= 0) {
    if ((size_t)s >= b->p->n_syms) return x;
    if (!b->bindable[s]) {
      x.kind = MX__DYN_DIM_BIND;
      x.v = s;
      return x;
    }
    x.kind = MX__DYN_DIM_SYM;
    x.v = s;
    *mask |= mx__dyn_sym_bit((size_t)s);
    return x;
  }
  size_t n = mx_sym_symbols_of(b->syms, d, b->sym_buf, b->sym_cap);
  if (n > b->sym_cap) return x; /* more symbols than the table has: not formable */
  uint64_t m = 0;
  for (size_t k = 0; k < n; k++) {
    if (b->sym_buf[k] >= b->p->n_syms || !b->bindable[b->sym_buf[k]]) return x;
    m |= mx__dyn_sym_bit(b->sym_buf[k]);
  }
  *mask |= m;
  x.kind = MX__DYN_DIM_EXPR;
  x.v = d;
  return x;
}

/* Marks the symbols that are exactly dims (or sv elements) of v as bound from here on. */
static void bind_exact(builder *b, const mx_dim *dims, int32_t n) {
  for (int32_t k = 0; k < n; k++) {
    int64_t s = mx_sym_symbol_index(b->syms, dims[k]);
    if (s >= 0 && (size_t)s < b->p->n_syms) b->bindable[s] = true;
  }
}

static bool int_dtype(mx_dtype dt) { return dt == MX_INT64 || dt == MX_INT32; }

/* A small integer tensor host code may compute on: known value, or concrete and tiny. */
static bool small_int(const mx_value *val) {
  if (val->sv_len >= 0) return true;
  if (!(mx_dtype_is_integer(val->dtype) || val->dtype == MX_BOOL) || val->shape.rank < 0) return false;
  int64_t n = 1;
  for (int32_t k = 0; k < val->shape.rank; k++) {
    if (!mx_dim_is_concrete(val->shape.dims[k])) return false;
    n *= val->shape.dims[k];
    if (n > MX_SV_MAX) return false;
  }
  return true;
}

/* True when the op's only needed output is output 0. */
static bool only_first_output_used(const mx_graph *g, const mx_node *nd) {
  for (uint32_t k = 1; k < nd->n_outputs; k++) {
    const mx_value *o = &g->values[nd->outputs[k]];
    if (o->n_consumers || (o->flags & MX_VALUE_OUTPUT)) return false;
  }
  return true;
}

static mx_status find_kernel(builder *b, mx__dyn_op *op) {
  const mx_node *nd = op->nd;
  uint32_t nt = op->n_in + op->n_out;
  mx_kernel_call *call = calloc(1, mx__kernel_call_size(nt ? nt : 1));
  if (!call) return mx__fail_oom(b->err, "kernel lookup");
  call->n_in = (uint16_t)op->n_in;
  call->n_out = (uint16_t)op->n_out;
  for (uint32_t i = 0; i < op->n_in; i++)
    if (nd->inputs[i] != MX_NO_VALUE) call->t[i].dtype = b->g->values[nd->inputs[i]].dtype;
  for (uint32_t k = 0; k < op->n_out; k++) call->t[op->n_in + k].dtype = b->g->values[nd->outputs[k]].dtype;
  op->kernel = mx__kernel_find(nd->domain, nd->op_type, call);
  mx_dtype key = op->n_in ? call->t[0].dtype : (op->n_out ? call->t[op->n_in].dtype : MX_DTYPE_UNDEFINED);
  free(call);
  if (!op->kernel)
    return mx__fail(b->err, MX_ERR_UNSUPPORTED, "node '%s' (%s): no CPU kernel for this op with dtype %s",
                    nd->name, nd->op_type, mx_dtype_name(key));
  return MX_OK;
}

/* Host ops: shape-only ops, and host-preferred ops on small integer tensors. */
static bool host_eligible(builder *b, const mx_node *nd) {
  const mx_op_def *def = nd->def;
  if (!b->p->opt.host_ops || (def->flags & MX_OP_DATA_DEPENDENT)) return false;
  if (!(def->flags & (MX_OP_SHAPE_ONLY | MX_OP_HOST_PREFERRED))) return false;
  for (uint32_t k = 0; k < nd->n_outputs; k++) {
    const mx_value *o = &b->g->values[nd->outputs[k]];
    if (!int_dtype(o->dtype) || (o->sv_len < 0 && !(def->flags & MX_OP_SHAPE_ONLY))) return false;
  }
  for (uint32_t i = 0; i < nd->n_inputs; i++) {
    if (nd->inputs[i] == MX_NO_VALUE || (i == 0 && (def->flags & MX_OP_SHAPE_ONLY))) continue;
    if (!small_int(&b->g->values[nd->inputs[i]])) return false;
  }
  return true;
}

/* Outputs all have fully formable symbolic values of their whole length: eval op. */
static bool eval_eligible(builder *b, const mx_node *nd) {
  for (uint32_t k = 0; k < nd->n_outputs; k++) {
    const mx_value *o = &b->g->values[nd->outputs[k]];
    if (o->sv_len < 0 || o->shape.rank < 0) return false;
    int64_t n = 1;
    for (int32_t d = 0; d < o->shape.rank; d++) {
      if (!mx_dim_is_concrete(o->shape.dims[d])) return false;
      n *= o->shape.dims[d];
    }
    if (n != o->sv_len) return false;
    uint64_t m = 0;
    for (int32_t j = 0; j < o->sv_len; j++) {
      mx__dyn_dimx x = to_dimx(b, o->sv[j], &m);
      if (!mx__dyn_dim_formable(&x)) return false;
    }
  }
  return true;
}

static mx_status add_svx(builder *b, mx__dyn_pval *pv, const mx_value *o, uint64_t *mask) {
  if (b->n_svx + (size_t)o->sv_len > b->cap_svx) {
    size_t ncap = b->cap_svx ? b->cap_svx * 2 : 64;
    while (ncap < b->n_svx + (size_t)o->sv_len) ncap *= 2;
    mx__dyn_dimx *n = realloc(b->svx, ncap * sizeof *n);
    if (!n) return mx__fail_oom(b->err, "plan values");
    b->svx = n;
    b->cap_svx = ncap;
  }
  pv->sv_first = (uint32_t)b->n_svx;
  pv->sv_len = o->sv_len;
  for (int32_t j = 0; j < o->sv_len; j++) b->svx[b->n_svx++] = to_dimx(b, o->sv[j], mask);
  return MX_OK;
}

static bool holds_subgraph(const mx_node *nd) {
  for (uint32_t a = 0; a < nd->n_attrs; a++)
    if (nd->attrs[a].type == MX_ATTR_GRAPH) return true;
  return false;
}

/* A control op: a host op whose outputs (dims included) are known once it ran, like a
 * data-dependent op's; the symbols that are exactly output dims are bound then. */
static mx_status plan_control_op(builder *b, size_t i) {
  mx_dyn_plan *p = b->p;
  mx__dyn_op *op = &p->ops[i];
  const mx_node *nd = op->nd;
  op->kind = MX__DYN_OP_HOST;
  op->flags |= MX__DYN_CONTROL;
  for (uint32_t k = 0; k < nd->n_outputs; k++) {
    mx_value_id v = nd->outputs[k];
    const mx_value *o = &b->g->values[v];
    mx__dyn_pval *pv = &p->vals[v];
    pv->producer = (uint32_t)i;
    pv->home = MX__DYN_HOME_HOST;
    uint64_t m = 0;
    for (int32_t d = 0; d < (o->shape.rank > 0 ? o->shape.rank : 0); d++)
      pv->dims[d] = to_dimx(b, o->shape.dims[d], &m);
  }
  for (uint32_t k = 0; k < nd->n_outputs; k++) {
    const mx_value *o = &b->g->values[nd->outputs[k]];
    if (o->shape.rank > 0) bind_exact(b, o->shape.dims, o->shape.rank);
  }
  return MX_OK;
}

/* Classifies op i, fills its output values' run-time dims and updates the bindable symbols. */
static mx_status plan_op(builder *b, size_t i) {
  mx_dyn_plan *p = b->p;
  mx_graph *g = b->g;
  mx__dyn_op *op = &p->ops[i];
  const mx_node *nd = op->nd;
  const mx_op_def *def = nd->def;
  const bool dd = (def->flags & MX_OP_DATA_DEPENDENT) != 0;
  mx_status st = MX_OK;
  if (p->opt.control_run && holds_subgraph(nd)) return plan_control_op(b, i);

  bool all_const = nd->n_outputs > 0;
  for (uint32_t k = 0; k < nd->n_outputs; k++)
    all_const = all_const && (g->values[nd->outputs[k]].flags & MX_VALUE_CONST);
  const mx_value *in0 = nd->n_inputs && nd->inputs[0] != MX_NO_VALUE ? &g->values[nd->inputs[0]] : NULL;
  bool alias_ok = p->opt.alias_ops && mx__node_keeps_bytes(g, nd) && !dd && in0 && nd->n_outputs >= 1 &&
                  g->values[nd->outputs[0]].dtype == in0->dtype && only_first_output_used(g, nd);
  bool host_ok = host_eligible(b, nd);

  if (all_const) {
    op->kind = MX__DYN_OP_SKIP;
  } else if (host_ok && p->opt.eval_ops && eval_eligible(b, nd)) {
    op->kind = MX__DYN_OP_EVAL;
  } else if (alias_ok) {
    op->kind = MX__DYN_OP_ALIAS;
  } else if (host_ok) {
    op->kind = MX__DYN_OP_HOST;
    if (def->flags & MX_OP_SHAPE_ONLY) op->flags |= MX__DYN_SHAPE_ONLY;
  } else {
    op->kind = MX__DYN_OP_DEVICE;
    if (dd) op->flags |= MX__DYN_DATA_DEP;
  }
  if (op->kind == MX__DYN_OP_HOST || op->kind == MX__DYN_OP_DEVICE) {
    st = find_kernel(b, op);
    if (st != MX_OK) return st;
  }
  if (dd && !def->upper_bound)
    return mx__fail(b->err, MX_ERR_UNSUPPORTED, "node '%s' (%s): data-dependent op without an upper bound",
                    nd->name, nd->op_type);

  /* Output dims. */
  uint64_t mask = 0;
  for (uint32_t k = 0; k < nd->n_outputs; k++) {
    mx_value_id v = nd->outputs[k];
    const mx_value *o = &g->values[v];
    mx__dyn_pval *pv = &p->vals[v];
    pv->producer = (uint32_t)i;
    if (op->kind == MX__DYN_OP_SKIP) {
      pv->home = MX__DYN_HOME_CONST;
      continue;
    }
    bool formable = o->shape.rank >= 0;
    for (int32_t d = 0; d < (o->shape.rank > 0 ? o->shape.rank : 0); d++) {
      pv->dims[d] = to_dimx(b, o->shape.dims[d], &mask);
      formable = formable && mx__dyn_dim_formable(&pv->dims[d]);
    }
    if (formable) pv->flags |= MX__DYN_V_FORMABLE;
    if (!formable && !dd) op->flags |= MX__DYN_INFER;
    switch (op->kind) {
      case MX__DYN_OP_DEVICE:
        pv->home = MX__DYN_HOME_DEVICE;
        pv->src_op = (uint32_t)i;
        break;
      case MX__DYN_OP_ALIAS:
        pv->home = k == 0 ? p->vals[nd->inputs[0]].home : MX__DYN_HOME_NONE;
        pv->src_op = k == 0 ? p->vals[nd->inputs[0]].src_op : MX__DYN_NONE;
        break;
      default: pv->home = MX__DYN_HOME_HOST; break;
    }
    if (op->kind == MX__DYN_OP_EVAL || (op->kind == MX__DYN_OP_HOST && o->sv_len > 0)) {
      uint64_t m = 0;
      st = add_svx(b, pv, o, op->kind == MX__DYN_OP_EVAL ? &mask : &m);
      if (st != MX_OK) return st;
    }
    if (pv->home == MX__DYN_HOME_HOST && (op->kind == MX__DYN_OP_HOST || op->kind == MX__DYN_OP_EVAL)) {
      int64_t n = o->sv_len >= 0 ? o->sv_len : MX_MAX_RANK;
      pv->host_cap = (uint32_t)(n * (int64_t)pv->esize);
    }
  }
  op->sym_mask = mask;

  /* Symbols bound once this op ran. */
  for (uint32_t k = 0; k < nd->n_outputs; k++) {
    const mx_value *o = &g->values[nd->outputs[k]];
    if ((dd || (op->flags & MX__DYN_INFER)) && o->shape.rank > 0) bind_exact(b, o->shape.dims, o->shape.rank);
    if (op->kind == MX__DYN_OP_HOST && o->sv_len > 0) bind_exact(b, o->sv, o->sv_len);
  }
  return MX_OK;
}

/* Reverse pass: which ops run and what their inputs are read for. */
static void plan_needs(mx_dyn_plan *p) {
  const mx_graph *g = p->g;
  bool *needed = calloc(p->n_values ? p->n_values : 1, sizeof *needed);
  for (size_t k = 0; k < g->n_outputs; k++) {
    if (needed) needed[g->outputs[k]] = true;
    p->vals[g->outputs[k]].flags |= MX__DYN_V_OUTPUT;
  }
  for (size_t i = p->n_ops; i-- > 0;) {
    mx__dyn_op *op = &p->ops[i];
    const mx_node *nd = op->nd;
    if (op->kind == MX__DYN_OP_EVAL || op->kind == MX__DYN_OP_ALIAS) {
      /* Evaluated values and aliases that nothing reads are not produced at all. */
      bool any = !needed;
      for (uint32_t k = 0; k < nd->n_outputs && !any; k++) any = needed[nd->outputs[k]];
      if (!any) op->kind = MX__DYN_OP_SKIP;
      if (op->kind != MX__DYN_OP_ALIAS) continue;
    }
    if (op->kind == MX__DYN_OP_SKIP) continue;
    const bool infer = (op->flags & MX__DYN_INFER) != 0;
    uint64_t value_inputs = infer ? nd->def->value_inputs : 0;
    for (uint32_t j = 0; j < nd->n_inputs; j++) {
      mx_value_id v = nd->inputs[j];
      if (v == MX_NO_VALUE) continue;
      mx__dyn_pval *pv = &p->vals[v];
      /* Everything but a plain alias reads at least the shapes of all its inputs (kernel task
       * blocks, run-time inference, upper bounds), so their producers must run. */
      bool read = op->kind != MX__DYN_OP_ALIAS || infer;
      if (j < 64 && (value_inputs >> j) & 1) {
        pv->flags |= MX__DYN_V_HOST_READ;
        read = true;
      }
      switch (op->kind) {
        case MX__DYN_OP_DEVICE:
          pv->flags |= MX__DYN_V_DEV_READ;
          read = true;
          break;
        case MX__DYN_OP_HOST:
          if (j == 0 && (op->flags & MX__DYN_SHAPE_ONLY)) break;
          pv->flags |= MX__DYN_V_HOST_READ;
          read = true;
          break;
        case MX__DYN_OP_ALIAS:
          if (j == 0) read = true;
          break;
        default: break;
      }
      if (read && needed) needed[v] = true;
    }
  }
  free(needed);
}

/* Last consumers and the per-op release lists. */
static mx_status plan_frees(mx_dyn_plan *p, mx_error *err) {
  const mx_graph *g = p->g;
  for (size_t i = 0; i < p->n_ops; i++) {
    const mx__dyn_op *op = &p->ops[i];
    if (op->kind == MX__DYN_OP_SKIP || op->kind == MX__DYN_OP_EVAL) continue;
    for (uint32_t j = 0; j < op->n_in; j++)
      if (op->nd->inputs[j] != MX_NO_VALUE) p->vals[op->nd->inputs[j]].last_op = (uint32_t)i;
  }
  size_t total = 0;
  uint32_t *count = calloc(p->n_ops + 1, sizeof *count);
  if (!count) return mx__fail_oom(err, "plan release lists");
  for (size_t v = 0; v < p->n_values; v++) {
    const mx__dyn_pval *pv = &p->vals[v];
    if (pv->home == MX__DYN_HOME_NONE || (pv->flags & MX__DYN_V_OUTPUT)) continue;
    uint32_t at = pv->last_op != MX__DYN_NONE ? pv->last_op : pv->producer;
    if (at == MX__DYN_NONE || p->ops[at].kind == MX__DYN_OP_SKIP) continue;
    count[at]++;
    total++;
  }
  p->frees = malloc((total ? total : 1) * sizeof *p->frees);
  if (!p->frees) {
    free(count);
    return mx__fail_oom(err, "plan release lists");
  }
  uint32_t acc = 0;
  for (size_t i = 0; i < p->n_ops; i++) {
    p->ops[i].free_first = acc;
    acc += count[i];
    p->ops[i].n_free = 0;
  }
  for (size_t v = 0; v < p->n_values; v++) {
    const mx__dyn_pval *pv = &p->vals[v];
    if (pv->home == MX__DYN_HOME_NONE || (pv->flags & MX__DYN_V_OUTPUT)) continue;
    uint32_t at = pv->last_op != MX__DYN_NONE ? pv->last_op : pv->producer;
    if (at == MX__DYN_NONE || p->ops[at].kind == MX__DYN_OP_SKIP) continue;
    mx__dyn_op *op = &p->ops[at];
    p->frees[op->free_first + op->n_free++] = (uint32_t)v;
  }
  free(count);
  (void)g;
  return MX_OK;
}

static mx_status check_graph(mx_graph *g, const mx_node_id *order, size_t n, bool control, mx_error *err) {
  for (size_t i = 0; i < n; i++) {
    const mx_node *nd = &g->nodes[order[i]];
    if (!nd->def)
      return mx__fail(err, MX_ERR_INVALID_ARGUMENT,
                      "graph '%s' is not inferred (node '%s' has no resolved op; "
                      "call mx_graph_infer first)",
                      g->name, nd->name);
    for (uint32_t a = 0; a < nd->n_attrs && !control; a++)
      if (nd->attrs[a].type == MX_ATTR_GRAPH)
        return mx__fail(err, MX_ERR_UNSUPPORTED,
                        "node '%s' (%s): ops with subgraphs are not run by the dynamic "
                        "executor",
                        nd->name, nd->op_type);
    if (nd->n_inputs + nd->n_outputs > UINT16_MAX)
      return mx__fail(err, MX_ERR_LIMIT, "node '%s' (%s): too many inputs and outputs", nd->name,
                      nd->op_type);
    for (uint32_t j = 0; j < nd->n_inputs + nd->n_outputs; j++) {
      mx_value_id v = j < nd->n_inputs ? nd->inputs[j] : nd->outputs[j - nd->n_inputs];
      if (v != MX_NO_VALUE && g->values[v].dtype == MX_STRING) /* data are host pointers (mixrt/dtype.h) */
        return mx__fail(err, MX_ERR_UNSUPPORTED,
                        "node '%s' (%s): value '%s' is a string tensor; strings are host "
                        "only and run through the reference interpreter",
                        nd->name, nd->op_type, g->values[v].name);
    }
    for (uint32_t k = 0; k < nd->n_outputs; k++) {
      const mx_value *o = &g->values[nd->outputs[k]];
      if (!mx_dtype_size(o->dtype))
        return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "graph '%s' is not inferred (value '%s' has no dtype)",
                        g->name, o->name);
    }
    for (uint32_t j = 0; j < nd->n_inputs; j++)
      if (nd->inputs[j] != MX_NO_VALUE && (g->values[nd->inputs[j]].flags & MX_VALUE_OUTER))
        return mx__fail(err, MX_ERR_UNSUPPORTED, "node '%s' (%s): input '%s' refers to an enclosing graph",
                        nd->name, nd->op_type, g->values[nd->inputs[j]].name);
  }
  return MX_OK;
}

/* The caller's options (or the defaults) with zero counts replaced by their defaults, checked
 * against the executor's limits. */
static mx_status resolve_options(const mx_dyn_options *opt, mx_dyn_options *o, mx_error *err) {
  mx__dyn_options_init(o);
  if (opt) *o = *opt;
  if (o->max_streams == 0) o->max_streams = 1;
  if (o->meta_entries == 0) o->meta_entries = 4;
  if (o->max_streams > MX_DYN_MAX_STREAMS)
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "max_streams %u exceeds %d", o->max_streams,
                    MX_DYN_MAX_STREAMS);
  if (o->meta_entries > 16)
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "meta_entries %u exceeds 16", o->meta_entries);
  return MX_OK;
}

/* Every value's plan entry, with the constants' homes and dims (the sources of the plan). */
static void plan_values(builder *b) {
  mx_dyn_plan *p = b->p;
  const mx_graph *g = b->g;
  for (size_t v = 0; v < p->n_values; v++) {
    const mx_value *val = &g->values[v];
    mx__dyn_pval *pv = &p->vals[v];
    pv->producer = pv->last_op = pv->input_index = pv->src_op = MX__DYN_NONE;
    pv->upload_event = -1;
    pv->sv_len = -1;
    pv->dtype = val->dtype;
    pv->esize = (uint32_t)mx_dtype_size(val->dtype);
    pv->rank = (int8_t)(val->shape.rank < 0 ? -1 : val->shape.rank);
    if (val->flags & MX_VALUE_DEAD) continue;
    if ((val->flags & MX_VALUE_CONST) && !(val->flags & MX_VALUE_INPUT) && val->data) {
      pv->home = MX__DYN_HOME_CONST;
      pv->flags |= MX__DYN_V_FORMABLE;
      for (int32_t d = 0; d < val->data->rank; d++)
        pv->dims[d] = (mx__dyn_dimx){val->data->dims[d], MX__DYN_DIM_CONST};
      pv->rank = (int8_t)val->data->rank;
    }
  }
}

/* The graph inputs: their homes, the symbols their dims bind (p->input_syms, b->bindable and a
 * copy in b->input_bound), and their dims in run-time form. */
static mx_status plan_inputs(builder *b) {
  mx_dyn_plan *p = b->p;
  const mx_graph *g = b->g;
  for (size_t i = 0; i < g->n_inputs; i++) {
    mx_value_id v = g->inputs[i];
    const mx_value *val = &g->values[v];
    mx__dyn_pval *pv = &p->vals[v];
    pv->home = MX__DYN_HOME_INPUT;
    pv->input_index = (uint32_t)i;
    for (int32_t d = 0; d < MX_MAX_RANK; d++) {
      uint32_t s = MX__DYN_NONE;
      if (d < val->shape.rank) {
        int64_t si = mx_sym_symbol_index(g->syms, val->shape.dims[d]);
        if (si >= 0 && (size_t)si < p->n_syms) {
          s = (uint32_t)si;
          b->bindable[si] = true;
        }
      }
      p->input_syms[i * MX_MAX_RANK + (size_t)d] = s;
    }
  }
  b->input_bound = malloc(b->sym_cap * sizeof *b->input_bound);
  if (!b->input_bound) return mx__fail_oom(b->err, "plan");
  memcpy(b->input_bound, b->bindable, b->sym_cap * sizeof *b->input_bound);
  for (size_t i = 0; i < g->n_inputs; i++) {
    mx_value_id v = g->inputs[i];
    const mx_value *val = &g->values[v];
    mx__dyn_pval *pv = &p->vals[v];
    uint64_t m = 0;
    bool formable = val->shape.rank >= 0;
    for (int32_t d = 0; d < (val->shape.rank > 0 ? val->shape.rank : 0); d++) {
      pv->dims[d] = to_dimx(b, val->shape.dims[d], &m);
      formable = formable && mx__dyn_dim_formable(&pv->dims[d]);
    }
    if (formable) pv->flags |= MX__DYN_V_FORMABLE;
  }
  return MX_OK;
}

/* The ops in topological order, each planned by plan_op. */
static mx_status plan_ops(builder *b, const mx_node_id *order, size_t n_order) {
  mx_dyn_plan *p = b->p;
  for (size_t i = 0; i < n_order; i++) {
    mx__dyn_op *op = &p->ops[i];
    op->node = order[i];
    op->nd = &b->g->nodes[order[i]];
    op->n_in = op->nd->n_inputs;
    op->n_out = op->nd->n_outputs;
    op->event = -1;
    uint32_t nt = op->n_in + op->n_out;
    if (nt > p->max_io) p->max_io = nt;
    op->block_size = (uint32_t)((MX__DYN_HDR_SIZE + mx__kernel_task_size(nt) + 15) & ~(size_t)15);
    mx_status st = plan_op(b, i);
    if (st != MX_OK) return st;
  }
  return MX_OK;
}

/* Symbols bound by ops during a step (reset at every step start). */
static mx_status plan_late_syms(builder *b) {
  mx_dyn_plan *p = b->p;
  size_t n_late = 0;
  for (size_t s = 0; s < p->n_syms; s++) n_late += b->bindable[s] && !b->input_bound[s];
  p->late_syms = malloc((n_late ? n_late : 1) * sizeof *p->late_syms);
  if (!p->late_syms) return mx__fail_oom(b->err, "plan");
  for (size_t s = 0; s < p->n_syms; s++)
    if (b->bindable[s] && !b->input_bound[s]) p->late_syms[p->n_late++] = (uint32_t)s;
  return MX_OK;
}

/* The plan's summary counts (mx__dyn_plan_info_get). */
static void plan_info(mx_dyn_plan *p) {
  mx_dyn_plan_info *in = &p->info;
  in->ops = p->n_ops;
  for (size_t i = 0; i < p->n_ops; i++) {
    const mx__dyn_op *op = &p->ops[i];
    in->device_ops += op->kind == MX__DYN_OP_DEVICE;
    in->host_ops += op->kind == MX__DYN_OP_HOST;
    in->eval_ops += op->kind == MX__DYN_OP_EVAL;
    in->alias_ops += op->kind == MX__DYN_OP_ALIAS;
    in->skipped_ops += op->kind == MX__DYN_OP_SKIP;
    in->infer_ops += op->kind != MX__DYN_OP_SKIP && (op->flags & MX__DYN_INFER) != 0;
    in->data_dependent_ops += (op->flags & MX__DYN_DATA_DEP) != 0;
  }
  in->streams = p->n_streams;
}

mx_status mx__dyn_plan_create(mx_graph *g, const mx_dyn_options *opt, mx_dyn_plan **out, mx_error *err) {
  if (out) *out = NULL;
  if (!g || !out) return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "mx__dyn_plan_create: NULL argument");
  mx_dyn_options o;
  mx_status st = resolve_options(opt, &o, err);
  if (st != MX_OK) return st;

  const mx_node_id *order;
  size_t n_order;
  st = mx__graph_topo_order(g, &order, &n_order);
  if (st != MX_OK) return mx__fail(err, st, "%s", mx_graph_last_error(g));
  st = check_graph(g, order, n_order, o.control_run != NULL, err);
  if (st != MX_OK) return st;

  builder b = {.g = g, .syms = g->syms, .err = err};
  mx_dyn_plan *p = calloc(1, sizeof *p);
  if (!p) return mx__fail_oom(err, "plan");
  b.p = p;
  p->g = g;
  p->opt = o;
  p->n_ops = n_order;
  p->n_values = g->n_values;
  p->n_syms = mx_symtab_symbol_count(g->syms);
  b.sym_cap = p->n_syms ? p->n_syms : 1;
  p->ops = calloc(n_order ? n_order : 1, sizeof *p->ops);
  p->vals = calloc(p->n_values ? p->n_values : 1, sizeof *p->vals);
  p->input_syms = malloc((g->n_inputs ? g->n_inputs : 1) * MX_MAX_RANK * sizeof *p->input_syms);
  b.bindable = calloc(b.sym_cap, sizeof *b.bindable);
  b.sym_buf = malloc(b.sym_cap * sizeof *b.sym_buf);
  if (!p->ops || !p->vals || !p->input_syms || !b.bindable || !b.sym_buf) {
    st = mx__fail_oom(err, "plan");
    goto free_scratch;
  }

  plan_values(&b); /* sources first */
  if ((st = plan_inputs(&b)) != MX_OK || (st = plan_ops(&b, order, n_order)) != MX_OK ||
      (st = plan_late_syms(&b)) != MX_OK)
    goto free_scratch;
  plan_needs(p);
  st = plan_frees(p, err);
  if (st != MX_OK) goto free_scratch;
  st = mx__dyn_plan_streams(p, err);
  if (st != MX_OK) goto free_scratch;
  p->svx = b.svx;
  b.svx = NULL;
  plan_info(p);
  *out = p;
  p = NULL;
  st = MX_OK;

free_scratch:
  mx__dyn_plan_destroy(p);
  free(b.svx);
  free(b.input_bound);
  free(b.bindable);
  free(b.sym_buf);
  return st;
}

void mx__dyn_plan_destroy(mx_dyn_plan *p) {
  if (!p) return;
  free(p->ops);
  free(p->vals);
  free(p->waits);
  free(p->frees);
  free(p->svx);
  free(p->input_syms);
  free(p->late_syms);
  free(p);
}

void mx__dyn_plan_info_get(const mx_dyn_plan *p, mx_dyn_plan_info *info) {
  if (!p || !info) return;
  *info = p->info;
}

size_t mx__dyn_op_count(const mx_dyn_plan *p) { return p->n_ops; }

mx_node_id mx__dyn_op_node(const mx_dyn_plan *p, size_t i) { return p->ops[i].node; }

bool mx__dyn_op_needs_sync(const mx_dyn_plan *p, size_t i) {
  return p->ops[i].kind == MX__DYN_OP_DEVICE && (p->ops[i].flags & MX__DYN_DATA_DEP);
}

int mx__dyn_op_stream(const mx_dyn_plan *p, size_t i) {
  return p->ops[i].kind == MX__DYN_OP_DEVICE ? (int)p->ops[i].stream : -1;
}
