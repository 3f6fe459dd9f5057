/* Control ops of the dynamic executor: a node holding subgraphs (If, Loop, Scan, or the call
 * that wraps one, partitioner/part_control.c) runs as one host op. Its inputs are read back to
 * the host, the plan's control_run hook (v2runtime/kernels_control.c) runs the subgraphs, and
 * the results become the outputs' host buffers without a copy; the symbols that are exactly
 * output dims are bound then, so the ops after it see concrete shapes. */
#include <stdlib.h>
#include <string.h>

#include "dynamic_exec/dynamic_exec_impl.h"

/* Most inputs and outputs kept on the stack; more take the heap. */
#define LOCAL_IO 16

static void release_outputs(mx_tensor *outs, size_t n) {
  for (size_t k = 0; k < n; k++) {
    free(outs[k].data);
    outs[k].data = NULL;
  }
}

/* Takes result t as the host data of output k of op (no copy). */
static mx_status take_output(mx_dyn_exec *e, const mx__dyn_op *op, uint32_t k, mx_tensor *t) {
  mx_value_id v = op->nd->outputs[k];
  const mx__dyn_pval *pv = &e->plan->vals[v];
  mx__dyn_val *rv = &e->vals[v];
  const char *name = e->g->values[v].name;
  if (t->dtype != pv->dtype)
    return mx__dyn_fail(e, MX_ERR_DTYPE, "node '%s' (%s): output %u ('%s') is %s, %s expected", op->nd->name,
                        op->nd->op_type, k, name, mx_dtype_name(t->dtype), mx_dtype_name(pv->dtype));
  if (t->rank < 0 || t->rank > MX_MAX_RANK || (pv->rank >= 0 && t->rank != pv->rank))
    return mx__dyn_fail(e, MX_ERR_SHAPE, "node '%s' (%s): output %u ('%s') has rank %d, %d expected",
                        op->nd->name, op->nd->op_type, k, name, (int)t->rank, (int)pv->rank);
  size_t nbytes;
  if (!mx__dyn_dims_bytes(t->dims, t->rank, pv->esize, &nbytes))
    return mx__dyn_fail(e, MX_ERR_SHAPE, "node '%s' (%s): output %u ('%s') has invalid dims", op->nd->name,
                        op->nd->op_type, k, name);
  if (t->data) {
    free(rv->host_buf);
    rv->host_buf = t->data;
    rv->host_cap = nbytes;
    t->data = NULL;
  } else if (mx__dyn_host_reserve(rv, 64) != MX_OK) {
    return mx__dyn_fail(e, MX_ERR_OUT_OF_MEMORY, "node '%s': out of host memory", op->nd->name);
  }
  rv->rank = t->rank;
  memcpy(rv->dims, t->dims, (size_t)t->rank * sizeof *rv->dims);
  rv->nbytes = nbytes;
  mx__dyn_val_set_host(e, rv, rv->host_buf);
  return MX_OK;
}

mx_status mx__dyn_run_control(mx_dyn_exec *e, size_t i) {
  const mx__dyn_op *op = &e->plan->ops[i];
  const mx_node *nd = op->nd;
  mx_tensor ins_local[LOCAL_IO], outs_local[LOCAL_IO];
  mx_tensor *ins = op->n_in <= LOCAL_IO ? ins_local : calloc(op->n_in, sizeof *ins);
  mx_tensor *outs = op->n_out <= LOCAL_IO ? outs_local : calloc(op->n_out, sizeof *outs);
  mx_status st = MX_OK;
  if (!ins || !outs) {
    st = mx__dyn_fail(e, MX_ERR_OUT_OF_MEMORY, "node '%s': out of host memory", nd->name);
    goto done;
  }
  memset(ins, 0, op->n_in * sizeof *ins);
  memset(outs, 0, op->n_out * sizeof *outs);
  for (uint32_t j = 0; j < op->n_in && st == MX_OK; j++) {
    mx_value_id v = nd->inputs[j];
    ins[j].placement = MX_HOST;
    if (v == MX_NO_VALUE) continue;
    st = mx__dyn_readback(e, v);
    if (st != MX_OK) break;
    const mx__dyn_val *rv = &e->vals[v];
    ins[j].dtype = e->plan->vals[v].dtype;
    ins[j].rank = rv->rank;
    memcpy(ins[j].dims, rv->dims, (size_t)(rv->rank > 0 ? rv->rank : 0) * sizeof *rv->dims);
    ins[j].data = rv->host;
  }
  if (st != MX_OK) goto done;
  mx_error err;
  mx_error_clear(&err);
  st = e->plan->opt.control_run(e->plan->opt.control_user, nd, ins, op->n_in, outs, op->n_out, &err);
  e->stats.host_runs++;
  if (st != MX_OK) {
    st = mx__dyn_fail(e, st, "%s", err.message[0] ? err.message : mx_status_string(st));
    goto done;
  }
  for (uint32_t k = 0; k < op->n_out && st == MX_OK; k++) st = take_output(e, op, k, &outs[k]);
  release_outputs(outs, op->n_out);
  if (st == MX_OK) st = mx__dyn_bind_outputs(e, i);
done:
  if (ins != ins_local) free(ins);
  if (outs != outs_local) free(outs);
  return st;
}
