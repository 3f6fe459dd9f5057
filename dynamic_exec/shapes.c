/* Output shapes of one op at run time: evaluated from the plan's expressions against the
 * step's symbol values (no allocation; skipped when no symbol the op depends on changed since
 * the previous step), the upper bound of a data-dependent op, or full run-time inference with
 * the executor's scratch symbol table where no expression could be formed (value inputs
 * produced on the device are read back first; an op whose input shapes and values equal those
 * of its last inference keeps its output shapes). Eval ops also get their values here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dynamic_exec/dynamic_exec_impl.h"

/* Run-time inference creates constants in the scratch table; renew it after this many calls so
 * it does not grow without bound over a long run. */
#define SCRATCH_RENEW 1024

mx_status mx__dyn_eval_dimx(const mx_dyn_exec *e, const mx__dyn_dimx *d, int64_t *out) {
  switch (d->kind) {
    case MX__DYN_DIM_CONST: *out = d->v; return MX_OK;
    case MX__DYN_DIM_SYM: *out = e->sym_val[d->v]; return *out == INT64_MIN ? MX_ERR_NOT_FOUND : MX_OK;
    case MX__DYN_DIM_EXPR: return mx_sym_eval(e->g->syms, (mx_dim)d->v, e->sym_val, e->plan->n_syms, out);
    default: return MX_ERR_NOT_FOUND;
  }
}

static bool set_shape(mx__dyn_val *rv, uint32_t esize, int32_t rank, const int64_t *dims) {
  rv->rank = rank;
  size_t nb = esize;
  for (int32_t d = 0; d < rank; d++) {
    if (dims[d] < 0 || __builtin_mul_overflow(nb, (size_t)dims[d], &nb)) return false;
    rv->dims[d] = dims[d];
  }
  for (int32_t d = rank; d < MX_MAX_RANK; d++) rv->dims[d] = 0;
  rv->nbytes = nb;
  return true;
}

mx_status mx__dyn_fill_infos(mx_dyn_exec *e, size_t i, bool values) {
  const mx__dyn_op *op = &e->plan->ops[i];
  const mx_node *nd = op->nd;
  uint64_t vi = values ? nd->def->value_inputs : 0;
  for (uint32_t j = 0; j < op->n_in; j++) {
    mx_value_info *info = &e->infos[j];
    memset(info, 0, sizeof *info);
    info->sv_len = -1;
    mx_value_id v = nd->inputs[j];
    if (v == MX_NO_VALUE) continue;
    const mx__dyn_val *rv = &e->vals[v];
    const mx__dyn_pval *pv = &e->plan->vals[v];
    info->present = true;
    info->dtype = pv->dtype;
    info->shape.rank = rv->rank;
    memcpy(info->shape.dims, rv->dims, sizeof info->shape.dims);
    if (j >= 64 || !((vi >> j) & 1)) continue;
    if (rv->nbytes && !rv->host) {
      mx_status st = mx__dyn_readback(e, v);
      if (st != MX_OK) return st;
    }
    mx_tensor *t = &e->info_data[j];
    memset(t, 0, sizeof *t);
    t->dtype = pv->dtype;
    t->rank = rv->rank;
    memcpy(t->dims, rv->dims, sizeof t->dims);
    t->data = rv->host;
    t->placement = MX_HOST;
    info->data = t;
    size_t n = rv->nbytes / (pv->esize ? pv->esize : 1);
    if ((pv->dtype != MX_INT64 && pv->dtype != MX_INT32) || n > MX_SV_MAX) continue;
    mx_dim *sv = e->info_sv + (size_t)j * MX_SV_MAX;
    for (size_t k = 0; k < n; k++) {
      int64_t x = pv->dtype == MX_INT64 ? ((const int64_t *)rv->host)[k] : ((const int32_t *)rv->host)[k];
      sv[k] = mx_sym_const(e->scratch, x);
    }
    info->sv = sv;
    info->sv_len = (int32_t)n;
  }
  return MX_OK;
}

mx_status mx__dyn_bind_outputs(mx_dyn_exec *e, size_t i) {
  const mx__dyn_op *op = &e->plan->ops[i];
  for (uint32_t k = 0; k < op->n_out; k++) {
    mx_value_id v = op->nd->outputs[k];
    const mx__dyn_pval *pv = &e->plan->vals[v];
    const mx__dyn_val *rv = &e->vals[v];
    if (pv->home == MX__DYN_HOME_NONE || pv->rank != rv->rank) continue;
    for (int32_t d = 0; d < rv->rank; d++) {
      const mx__dyn_dimx *x = &pv->dims[d];
      if (x->kind == MX__DYN_DIM_CONST && x->v != rv->dims[d])
        return mx__dyn_fail(e, MX_ERR_SHAPE, "node '%s' (%s): output %u dim %d is %lld, %lld expected",
                            op->nd->name, op->nd->op_type, k, (int)d, (long long)rv->dims[d],
                            (long long)x->v);
      if (x->kind != MX__DYN_DIM_SYM && x->kind != MX__DYN_DIM_BIND) continue;
      if (!mx__dyn_bind_symbol(e, (uint32_t)x->v, rv->dims[d]))
        return mx__dyn_fail(e, MX_ERR_SHAPE,
                            "node '%s' (%s): output %u dim %d is %lld, but symbol '%s' is already "
                            "%lld",
                            op->nd->name, op->nd->op_type, k, (int)d, (long long)rv->dims[d],
                            mx_symtab_symbol_name(e->g->syms, (size_t)x->v), (long long)e->sym_val[x->v]);
    }
  }
  return MX_OK;
}

/* Bytes of op i's inference key: every input's rank and dims, and the bytes of the value
 * inputs read back for inference (e->infos must be filled). */
static size_t infer_key_size(const mx_dyn_exec *e, const mx__dyn_op *op) {
  size_t n = 0;
  for (uint32_t j = 0; j < op->n_in; j++) {
    const mx_value_info *in = &e->infos[j];
    n += sizeof(int32_t) + (in->present ? (size_t)in->shape.rank * sizeof(int64_t) : 0);
    if (in->data) n += sizeof(uint64_t) + e->vals[op->nd->inputs[j]].nbytes;
  }
  return n;
}

/* Compares len bytes of the key at *at with p (compare), or writes them; advances *at. */
static bool key_part(unsigned char *key, size_t *at, const void *p, size_t len, bool compare) {
  bool same = !compare || memcmp(key + *at, p, len) == 0;
  if (!compare) memcpy(key + *at, p, len);
  *at += len;
  return same;
}

/* Writes the key into key (compare = false) or compares it with key (compare = true). */
static bool infer_key(const mx_dyn_exec *e, const mx__dyn_op *op, unsigned char *key, bool compare) {
  size_t at = 0;
  for (uint32_t j = 0; j < op->n_in; j++) {
    const mx_value_info *in = &e->infos[j];
    int32_t rank = in->present ? in->shape.rank : -1;
    if (!key_part(key, &at, &rank, sizeof rank, compare)) return false;
    if (rank > 0 && !key_part(key, &at, in->shape.dims, (size_t)rank * sizeof(int64_t), compare))
      return false;
    if (!in->data) continue;
    uint64_t nb = e->vals[op->nd->inputs[j]].nbytes;
    if (!key_part(key, &at, &nb, sizeof nb, compare)) return false;
    if (nb && !key_part(key, &at, in->data->data, nb, compare)) return false;
  }
  return true;
}

static mx_status run_inference(mx_dyn_exec *e, size_t i) {
  const mx__dyn_op *op = &e->plan->ops[i];
  mx__dyn_opstate *os = &e->ops[i];
  const mx_node *nd = op->nd;
  size_t nio = e->plan->max_io ? e->plan->max_io : 1;
  mx_value_info *out = e->infos + nio;
  mx_dim *out_sv = e->info_sv + nio * MX_SV_MAX;
  mx_status st = mx__dyn_fill_infos(e, i, true);
  if (st != MX_OK) return st;
  /* Same input shapes and values as the last inference: its output shapes still hold. */
  size_t key_len = infer_key_size(e, op);
  if (os->shapes_valid && key_len == os->infer_key_len && infer_key(e, op, os->infer_key, true)) {
    e->stats.shape_reuses++;
    return mx__dyn_bind_outputs(e, i);
  }
  if (++e->scratch_uses > SCRATCH_RENEW) {
    mx_symtab *fresh;
    if (mx_symtab_create(&fresh) == MX_OK) {
      mx_symtab_destroy(e->scratch);
      e->scratch = fresh;
      e->scratch_uses = 0;
      st = mx__dyn_fill_infos(e, i, true); /* the sv constants lived in the old table */
      if (st != MX_OK) return st;
    }
  }
  os->shapes_valid = false;
  e->stats.inferences++;
  e->err.status = MX_OK;
  e->err.message[0] = '\0';
  st = mx__node_infer(e->g, op->node, e->scratch, e->infos, out, out_sv, true, &e->err);
  if (st != MX_OK) return st;
  for (uint32_t k = 0; k < op->n_out; k++) {
    mx_value_id v = nd->outputs[k];
    const mx__dyn_pval *pv = &e->plan->vals[v];
    if (pv->home == MX__DYN_HOME_NONE) continue;
    const mx_shape *s = &out[k].shape;
    bool concrete = s->rank >= 0;
    for (int32_t d = 0; concrete && d < s->rank; d++) concrete = mx_dim_is_concrete(s->dims[d]);
    if (!concrete || !set_shape(&e->vals[v], pv->esize, s->rank, s->dims)) {
      char buf[256];
      mx_shape_format(e->scratch, s, buf, sizeof buf);
      return mx__dyn_fail(e, MX_ERR_SHAPE,
                          "node '%s' (%s): output %u has no valid concrete shape at run time (%s)", nd->name,
                          nd->op_type, k, buf);
    }
  }
  st = mx__dyn_bind_outputs(e, i);
  if (st != MX_OK) return st;
  if (key_len > os->infer_key_cap) {
    unsigned char *k = realloc(os->infer_key, key_len);
    if (!k) return MX_OK; /* no key: the next step infers again */
    os->infer_key = k;
    os->infer_key_cap = key_len;
  }
  infer_key(e, op, os->infer_key, false);
  os->infer_key_len = key_len;
  os->shapes_valid = true;
  return MX_OK;
}

static mx_status upper_bound(mx_dyn_exec *e, size_t i) {
  const mx__dyn_op *op = &e->plan->ops[i];
  const mx_node *nd = op->nd;
  size_t nio = e->plan->max_io ? e->plan->max_io : 1;
  mx_value_info *out = e->infos + nio;
  mx_status st = mx__dyn_fill_infos(e, i, false);
  if (st != MX_OK) return st;
  for (uint32_t k = 0; k < op->n_out; k++) {
    memset(&out[k], 0, sizeof out[k]);
    out[k].present = true;
    out[k].sv_len = -1;
  }
  e->err.status = MX_OK;
  e->err.message[0] = '\0';
  mx_infer_ctx ctx = {.syms = e->scratch,
                      .params = nd->params,
                      .opset = nd->opset,
                      .node_name = nd->name,
                      .n_in = op->n_in,
                      .n_out = op->n_out,
                      .in = e->infos,
                      .out = out,
                      .out_sv = e->info_sv + nio * MX_SV_MAX,
                      .runtime = true,
                      .err = &e->err};
  for (uint32_t k = 0; k < op->n_out; k++) {
    mx_value_id v = nd->outputs[k];
    mx_shape b;
    memset(&b, 0, sizeof b);
    st = nd->def->upper_bound(&ctx, k, &b);
    if (st != MX_OK) {
      if (e->err.status == MX_OK) mx__dyn_fail(e, st, "no upper bound for output %u", k);
      mx__error_prefix(&e->err, "node '%s' (%s): ", nd->name, nd->op_type);
      return st;
    }
    bool concrete = b.rank >= 0;
    for (int32_t d = 0; concrete && d < b.rank; d++) concrete = mx_dim_is_concrete(b.dims[d]);
    if (!concrete || !set_shape(&e->vals[v], e->plan->vals[v].esize, b.rank, b.dims))
      return mx__dyn_fail(e, MX_ERR_SHAPE, "node '%s' (%s): the upper bound of output %u is not concrete",
                          nd->name, nd->op_type, k);
  }
  return MX_OK;
}

/* Values of an eval op's outputs, from their symbolic values. */
static mx_status eval_values(mx_dyn_exec *e, size_t i) {
  const mx__dyn_op *op = &e->plan->ops[i];
  for (uint32_t k = 0; k < op->n_out; k++) {
    mx_value_id v = op->nd->outputs[k];
    const mx__dyn_pval *pv = &e->plan->vals[v];
    mx__dyn_val *rv = &e->vals[v];
    const mx__dyn_dimx *sv = e->plan->svx + pv->sv_first;
    for (int32_t j = 0; j < pv->sv_len; j++) {
      int64_t x;
      if (mx__dyn_eval_dimx(e, &sv[j], &x) != MX_OK)
        return mx__dyn_fail(e, MX_ERR_INTERNAL, "node '%s' (%s): element %d of output %u cannot be evaluated",
                            op->nd->name, op->nd->op_type, (int)j, k);
      if (pv->dtype == MX_INT64)
        ((int64_t *)rv->host_buf)[j] = x;
      else
        ((int32_t *)rv->host_buf)[j] = (int32_t)x;
    }
  }
  return MX_OK;
}

mx_status mx__dyn_shapes(mx_dyn_exec *e, size_t i) {
  const mx__dyn_op *op = &e->plan->ops[i];
  mx__dyn_opstate *os = &e->ops[i];
  if (op->flags & MX__DYN_DATA_DEP) return upper_bound(e, i);
  if (op->flags & MX__DYN_INFER) return run_inference(e, i);
  if (os->shapes_valid && !(e->changed & op->sym_mask)) {
    e->stats.shape_reuses++;
    return MX_OK;
  }
  for (uint32_t k = 0; k < op->n_out; k++) {
    mx_value_id v = op->nd->outputs[k];
    const mx__dyn_pval *pv = &e->plan->vals[v];
    if (pv->home == MX__DYN_HOME_NONE) continue;
    int64_t dims[MX_MAX_RANK];
    for (int32_t d = 0; d < pv->rank; d++) {
      if (mx__dyn_eval_dimx(e, &pv->dims[d], &dims[d]) != MX_OK) {
        /* A symbol the plan expected to be bound is not (an input dim given only as an
         * expression): infer instead. */
        if (op->kind == MX__DYN_OP_EVAL)
          return mx__dyn_fail(e, MX_ERR_SHAPE, "node '%s' (%s): output %u dim %d cannot be evaluated",
                              op->nd->name, op->nd->op_type, k, (int)d);
        return run_inference(e, i);
      }
    }
    if (!set_shape(&e->vals[v], pv->esize, pv->rank, dims)) {
      char expr[128] = "?";
      for (int32_t d = 0; d < pv->rank; d++)
        if (dims[d] < 0 && pv->dims[d].kind == MX__DYN_DIM_EXPR)
          mx_sym_format(e->g->syms, (mx_dim)pv->dims[d].v, expr, sizeof expr);
      return mx__dyn_fail(e, MX_ERR_SHAPE,
                          "node '%s' (%s): output %u has an invalid shape at run time (%s < 0 or "
                          "too large)",
                          op->nd->name, op->nd->op_type, k, expr);
    }
  }
  if (op->kind == MX__DYN_OP_EVAL) {
    mx_status st = eval_values(e, i);
    if (st != MX_OK) return st;
  }
  os->shapes_valid = true;
  e->stats.shape_evals++;
  return MX_OK;
}
