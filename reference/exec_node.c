/* Running one node on host tensors: run-time inference of the output shapes from the actual
 * input shapes and values, output allocation (upper bound for data-dependent ops), kernel
 * lookup, scratch, launch, and the actual shape written back by data-dependent kernels.
 * String outputs start as arrays of NULL pointers; their kernels malloc each string, and the
 * output tensor owns them (freed with mx_tensor_release or mx__strings_free). */
#include <stdlib.h>
#include <string.h>

#include "common/string_tensor.h"
#include "kernels/kernel.h"
#include "kernels/kutil.h"
#include "reference/reference.h"

void *mx__host_alloc(size_t nbytes) {
  size_t n = (nbytes + 63) & ~(size_t)63;
  if (n < nbytes) return NULL;
  return aligned_alloc(64, n ? n : 64);
}

void mx__host_free(void *p) { free(p); }

/* Symbolic value of a small integer tensor, from its data. */
static int32_t data_sv(mx_symtab *syms, const mx_tensor *t, mx_dim *sv) {
  int64_t n;
  if ((t->dtype != MX_INT64 && t->dtype != MX_INT32) || !mx_tensor_numel(t, &n) || n > MX_SV_MAX) return -1;
  for (int64_t i = 0; i < n; i++) sv[i] = mx_sym_const(syms, mx__kget_i64(t->data, t->dtype, i));
  return (int32_t)n;
}

static void info_from_tensor(mx_symtab *syms, const mx_tensor *t, mx_value_info *info, mx_dim *sv_store) {
  memset(info, 0, sizeof *info);
  info->sv_len = -1;
  if (!t) return;
  info->present = true;
  info->dtype = t->dtype;
  info->shape.rank = t->rank;
  for (int32_t k = 0; k < t->rank; k++) info->shape.dims[k] = t->dims[k];
  info->data = t;
  info->sv_len = data_sv(syms, t, sv_store);
  info->sv = info->sv_len >= 0 ? sv_store : NULL;
}

static void ktensor_from(mx_ktensor *kt, const mx_tensor *t) {
  memset(kt, 0, sizeof *kt);
  if (!t) return;
  kt->data = t->data;
  kt->dtype = t->dtype;
  mx__ktensor_set_dims(kt, t->rank, t->dims);
}

mx_status mx__reference_exec_node(mx_graph *g, mx_node_id nid, mx_symtab *scratch,
                                  const mx_tensor *const *inputs, mx_tensor *outputs, mx_error *err) {
  const mx_node *nd = &g->nodes[nid];
  const uint32_t ni = nd->n_inputs, no = nd->n_outputs;
  mx_status st = MX_OK;
  mx_value_info *in = calloc(ni ? ni : 1, sizeof *in);
  mx_dim *in_sv = malloc((ni ? ni : 1) * MX_SV_MAX * sizeof *in_sv);
  mx_value_info *out = calloc(no ? no : 1, sizeof *out);
  mx_dim *out_sv = malloc((no ? no : 1) * MX_SV_MAX * sizeof *out_sv);
  mx_kernel_call *call = calloc(1, mx__kernel_call_size(ni + no));
  void *ws = NULL;
  if (!in || !in_sv || !out || !out_sv || !call) {
    st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "node '%s': out of host memory", nd->name);
    goto free_scratch;
  }
  memset(outputs, 0, no * sizeof *outputs);
  for (uint32_t i = 0; i < ni; i++)
    info_from_tensor(scratch, inputs[i], &in[i], in_sv + (size_t)i * MX_SV_MAX);

  st = mx__node_infer(g, nid, scratch, in, out, out_sv, true, err);
  if (st != MX_OK) goto free_scratch;
  const bool data_dependent = (nd->def->flags & MX_OP_DATA_DEPENDENT) != 0;
  mx_infer_ctx bound_ctx = {.syms = scratch,
                            .params = nd->params,
                            .opset = nd->opset,
                            .node_name = nd->name,
                            .n_in = ni,
                            .n_out = no,
                            .in = in,
                            .out = out,
                            .out_sv = out_sv,
                            .runtime = true,
                            .err = err};

  /* Allocate every output: the inferred shape, or the upper bound of a data-dependent op. */
  for (uint32_t k = 0; k < no; k++) {
    mx_tensor *o = &outputs[k];
    mx_shape shape = out[k].shape;
    bool concrete = shape.rank >= 0;
    for (int32_t d = 0; concrete && d < shape.rank; d++) concrete = mx_dim_is_concrete(shape.dims[d]);
    if (!concrete && data_dependent && nd->def->upper_bound) {
      st = nd->def->upper_bound(&bound_ctx, k, &shape);
      if (st != MX_OK) {
        mx__error_prefix(err, "node '%s' (%s): ", nd->name, nd->op_type);
        goto free_outputs;
      }
      concrete = shape.rank >= 0;
      for (int32_t d = 0; concrete && d < shape.rank; d++) concrete = mx_dim_is_concrete(shape.dims[d]);
    }
    if (!concrete) {
      char buf[256];
      mx_shape_format(scratch, &out[k].shape, buf, sizeof buf);
      st = mx__fail(err, MX_ERR_SHAPE, "node '%s' (%s): output %u has no concrete shape at run time (%s)",
                    nd->name, nd->op_type, k, buf);
      goto free_outputs;
    }
    o->dtype = out[k].dtype;
    o->rank = shape.rank;
    for (int32_t d = 0; d < shape.rank; d++) o->dims[d] = shape.dims[d];
    size_t nbytes;
    if (!mx_tensor_nbytes(o, &nbytes)) {
      st = mx__fail(err, MX_ERR_LIMIT, "node '%s' (%s): output %u is too large", nd->name, nd->op_type, k);
      goto free_outputs;
    }
    o->data = mx__host_alloc(nbytes);
    if (o->data && o->dtype == MX_STRING) memset(o->data, 0, nbytes); /* no strings yet */
    if (!o->data) {
      st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "node '%s' (%s): out of host memory for output %u (%zu bytes)",
                    nd->name, nd->op_type, k, nbytes);
      goto free_outputs;
    }
  }

  call->params = nd->params;
  call->n_in = (uint16_t)ni;
  call->n_out = (uint16_t)no;
  for (uint32_t i = 0; i < ni; i++) ktensor_from(&call->t[i], inputs[i]);
  for (uint32_t k = 0; k < no; k++) ktensor_from(&call->t[ni + k], &outputs[k]);
  const mx_kernel_def *kd = mx__kernel_find(nd->domain, nd->op_type, call);
  if (!kd) {
    int key_dt = ni ? (int)call->t[0].dtype : 0;
    st = mx__fail(err, MX_ERR_UNSUPPORTED, "node '%s' (%s): no CPU kernel for this op with dtype %s",
                  nd->name, nd->op_type, mx_dtype_name((mx_dtype)key_dt));
    goto free_outputs;
  }
  size_t ws_size = kd->workspace ? kd->workspace(call) : 0;
  if (ws_size) {
    ws = mx__host_alloc(ws_size);
    if (!ws) {
      st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "node '%s' (%s): out of host memory for %zu bytes of scratch",
                    nd->name, nd->op_type, ws_size);
      goto free_outputs;
    }
  }
  call->workspace = ws;
  call->workspace_size = ws_size;
  st = kd->run(call);
  if (st != MX_OK) {
    mx__fail(err, st, "node '%s' (%s): kernel failed: %s", nd->name, nd->op_type,
             call->why ? call->why : mx_status_string(st));
    goto free_outputs;
  }
  for (uint32_t k = 0; k < no; k++) {
    const mx_ktensor *kt = &call->t[ni + k];
    if (data_dependent) {
      outputs[k].rank = kt->rank;
      for (int32_t d = 0; d < kt->rank; d++) outputs[k].dims[d] = kt->dims[d];
    }
  }
  goto free_scratch;

free_outputs:
  for (uint32_t k = 0; k < no; k++) {
    int64_t n;
    if (outputs[k].dtype == MX_STRING && outputs[k].data && mx_tensor_numel(&outputs[k], &n))
      mx__strings_free(outputs[k].data, (size_t)n);
    mx__host_free(outputs[k].data);
    memset(&outputs[k], 0, sizeof outputs[k]);
  }
free_scratch:
  mx__host_free(ws);
  free(call);
  free(out_sv);
  free(out);
  free(in_sv);
  free(in);
  return st;
}

mx_status mx__reference_fold_eval(void *user, mx_graph *g, mx_node_id nid, mx_tensor *outs) {
  (void)user;
  const mx_node *nd = &g->nodes[nid];
  if (!nd->def || (nd->def->flags & MX_OP_DATA_DEPENDENT)) return MX_ERR_UNSUPPORTED;
  const mx_tensor *ins[64];
  if (nd->n_inputs > 64 || nd->n_outputs > 64) return MX_ERR_UNSUPPORTED;
  /* Folded values are freed as plain blocks: string outputs (strings of their own) stay runtime. */
  for (uint32_t k = 0; k < nd->n_outputs; k++)
    if (nd->outputs[k] != MX_NO_VALUE && g->values[nd->outputs[k]].dtype == MX_STRING)
      return MX_ERR_UNSUPPORTED;
  for (uint32_t i = 0; i < nd->n_inputs; i++)
    ins[i] = nd->inputs[i] == MX_NO_VALUE ? NULL : g->values[nd->inputs[i]].data;
  mx_symtab *scratch;
  if (mx_symtab_create(&scratch) != MX_OK) return MX_ERR_OUT_OF_MEMORY;
  /* mx__host_alloc memory may be released with free(), as the folding pass does. */
  mx_status st = mx__reference_exec_node(g, nid, scratch, ins, outs, NULL);
  mx_symtab_destroy(scratch);
  if (st != MX_OK) return MX_ERR_UNSUPPORTED; /* leave the node for run time to report */
  return st;
}
