/* Padded values: a graph input or output whose data lies in a buffer with more rows along one
 * axis than its dims say (a session state kept with room to grow). The kernels see the layout
 * as strides; the producer of a padded output writes into the very buffer its padded input
 * reads (an append: the rows already there stay where they are). */
#include <string.h>

#include "dynamic_exec/dynamic_exec_impl.h"

void mx__dyn_val_strides(const mx__dyn_val *rv, int64_t *strides) {
  int64_t s = 1;
  for (int32_t d = rv->rank - 1; d >= 0; d--) {
    strides[d] = s;
    s *= rv->pad_rows && d == rv->pad_axis ? rv->pad_rows : rv->dims[d];
  }
}

mx_status mx__dyn_set_input_pitch(mx_dyn_exec *e, const char *name, int32_t axis, int64_t rows) {
  if (!e) return MX_ERR_INVALID_ARGUMENT;
  size_t i = 0;
  while (i < e->g->n_inputs && (!name || strcmp(e->g->values[e->g->inputs[i]].name, name) != 0)) i++;
  if (!e->in_step || i == e->g->n_inputs)
    return mx__dyn_fail(e, MX_ERR_INVALID_ARGUMENT, "padding input '%s': outside a step or no such input",
                        name ? name : "(NULL)");
  mx__dyn_val *rv = &e->vals[e->g->inputs[i]];
  if (axis < 0 || axis >= rv->rank || rows < rv->dims[axis] || !rv->dev)
    return mx__dyn_fail(e, MX_ERR_INVALID_ARGUMENT, "input '%s': cannot lie in %lld rows along axis %d",
                        e->g->values[e->g->inputs[i]].name, (long long)rows, (int)axis);
  rv->pad_axis = axis;
  rv->pad_rows = rows;
  e->any_pad = true;
  return MX_OK;
}

mx_status mx__dyn_bind_output_append(mx_dyn_exec *e, size_t k, const mx_tensor *buf, int32_t axis,
                                     int64_t rows) {
  if (!e || !e->in_step || k >= e->g->n_outputs || !buf || !buf->data || buf->placement != MX_DEVICE)
    return e ? mx__dyn_fail(e, MX_ERR_INVALID_ARGUMENT, "appending output %zu: outside a step or no buffer",
                            k)
             : MX_ERR_INVALID_ARGUMENT;
  const mx_graph *g = e->g;
  mx_value_id v = g->outputs[k];
  const mx__dyn_pval *pv = &e->plan->vals[v];
  mx__dyn_val *rv = &e->vals[v];
  const char *name = g->values[v].name;
  if (rv->bound_out != MX__DYN_NONE || pv->home != MX__DYN_HOME_DEVICE || pv->producer == MX__DYN_NONE ||
      buf->dtype != pv->dtype || axis < 0 || axis >= buf->rank || rows < buf->dims[axis])
    return mx__dyn_fail(e, MX_ERR_INVALID_ARGUMENT, "output '%s' cannot be appended in place", name);
  const mx__dyn_op *op = &e->plan->ops[pv->producer];
  if (op->kind != MX__DYN_OP_DEVICE || (op->flags & MX__DYN_DATA_DEP))
    return mx__dyn_fail(e, MX_ERR_INVALID_ARGUMENT, "output '%s': its producer is not a device op", name);
  e->out_bind[k] = *buf;
  e->out_bind_bytes[k] = 0; /* no overlap check against it: the buffer is the state's own */
  e->n_out_bound++;
  rv->bound_out = (uint32_t)k;
  rv->pad_axis = axis;
  rv->pad_rows = rows;
  e->any_pad = true;
  return MX_OK;
}
