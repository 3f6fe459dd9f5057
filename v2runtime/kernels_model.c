/* The exe-graph kernels of a session: what the lowering of a partitioned root graph is made of.
 *
 * Init:   UploadConstant, StaticModelCreate, DynExecCreate
 * Main:   FeedInput; for a KNOWN call StaticAllocOutputs, StaticModelUpdateArgs,
 *         StaticModelExecute; for an UNKNOWN call BindSymbols, then per op InferShape (+ output
 *         allocation), Launch, SyncOutputShape (data-dependent ops), FreeMemory, then
 *         DynStepEnd; FreeValue guarders after the last reader of a root value; OutputDeliver
 * DeInit: StaticModelDestroy, DynExecDestroy, FreeConstant
 * Each kernel finds its call, op or value through its attribute (mx_kattr) and the session
 * through run->user (the step). */
#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "v2runtime/exe_registry.h"
#include "v2runtime/session_impl.h"

#define STEP(run) ((mx_step *)(run)->user)
#define ATTR(n)   ((const mx_kattr *)(n)->attr)

static mx_rt_call *call_of(mx_exe_run *run, const mx_exe_node *n) {
  return &STEP(run)->s->prog->calls[ATTR(n)->call];
}

mx_status mx__call_wait_producers(mx_exe_run *run, const mx_rt_call *c) {
  mx_step *step = STEP(run);
  const mx_program *p = step->s->prog;
  for (uint32_t w = 0; w < c->n_waits; w++) {
    mx_status st = mx_stream_wait_event(mx__call_stream(step, c), p->calls[c->waits[w]].done);
    if (st != MX_OK)
      return mx__fail(run->err, st, "partition '%s': cannot wait for partition '%s'", c->name,
                      p->calls[c->waits[w]].name);
  }
  return MX_OK;
}

mx_status mx__call_record_done(mx_exe_run *run, const mx_rt_call *c) {
  if (!c->done) return MX_OK;
  mx_status st = mx_event_record(c->done, mx__call_stream(STEP(run), c));
  return st == MX_OK ? MX_OK : mx__fail(run->err, st, "partition '%s': cannot record its event", c->name);
}

/* The stream a root value is produced on this step (the step stream for inputs and constants). */
static mx_stream *value_stream(const mx_step *step, const mx_rt_value *rv) {
  return rv->producer >= 0 ? mx__call_stream(step, &step->s->prog->calls[rv->producer]) : step->stream;
}

/* --- Init / DeInit -------------------------------------------------------------------------- */

static mx_status k_upload_constant(mx_exe_run *run, const mx_exe_node *n) {
  mx_session *s = STEP(run)->s;
  mx_program *p = s->prog;
  uint32_t r = ATTR(n)->value;
  const mx_tensor *c = p->root->values[r].data;
  mx_rt_value *rv = &p->values[r];
  if (rv->constant)
    return mx__fail(run->err, MX_ERR_INTERNAL, "constant '%s' is uploaded twice", p->root->values[r].name);
  size_t nbytes = 0;
  mx_tensor_nbytes(c, &nbytes);
  void *dev = NULL;
  mx_status st = s->opts.private_weights ? mx_device_upload(s->dev, c->data, nbytes, 64, &dev)
                                         : mx_device_shared_acquire(s->dev, c->data, nbytes, 64, &dev);
  if (st != MX_OK) {
    /* The reader places a constant that a rewrite rule made (its name is not the model's). */
    const mx_value *cv = &p->root->values[r];
    if (cv->n_consumers)
      return mx__fail(run->err, st, "constant '%s' (read by '%s'): cannot upload %zu bytes: %s", cv->name,
                      p->root->nodes[cv->consumers[0]].name, nbytes, mx_device_last_error(s->dev));
    return mx__fail(run->err, st, "constant '%s': cannot upload %zu bytes: %s", cv->name, nbytes,
                    mx_device_last_error(s->dev));
  }
  rv->t = *c;
  rv->t.data = dev;
  rv->t.placement = MX_DEVICE;
  rv->t.name = p->root->values[r].name;
  rv->constant = true;
  return MX_OK;
}

static mx_status k_free_constant(mx_exe_run *run, const mx_exe_node *n) {
  mx_session *s = STEP(run)->s;
  mx_rt_value *rv = &s->prog->values[ATTR(n)->value];
  if (rv->constant && rv->t.data && s->opts.private_weights)
    mx_device_free(s->dev, rv->t.data);
  else if (rv->constant && rv->t.data)
    mx_device_shared_release(s->dev, rv->t.data);
  rv->t.data = NULL;
  rv->constant = false;
  return MX_OK;
}

static mx_status k_static_create(mx_exe_run *run, const mx_exe_node *n) {
  mx_session *s = STEP(run)->s;
  mx_rt_call *c = call_of(run, n);
  /* Init makes each handle once (lowering and the .mxm loader see to it); a second make would
   * lose the first. */
  if (c->model) return mx__fail(run->err, MX_ERR_INTERNAL, "static model of '%s' is created twice", c->name);
  mx_static_load_options lo;
  mx__static_load_options_init(&lo);
  lo.share_weights = !s->opts.private_weights;
  mx_status st = mx__static_model_create(s->dev, c->plan, &lo, &c->model, run->err);
  if (st != MX_OK) mx__error_prefix(run->err, "static model of '%s': ", c->name);
  return st;
}

static mx_status k_static_destroy(mx_exe_run *run, const mx_exe_node *n) {
  mx_rt_call *c = call_of(run, n);
  mx__static_model_destroy(c->model);
  c->model = NULL;
  return MX_OK;
}

static mx_status k_dyn_create(mx_exe_run *run, const mx_exe_node *n) {
  mx_session *s = STEP(run)->s;
  mx_rt_call *c = call_of(run, n);
  if (c->dexec)
    return mx__fail(run->err, MX_ERR_INTERNAL, "dynamic partition '%s' is created twice", c->name);
  mx_status st =
      mx__dyn_exec_create(s->dev, c->dplan, s->alloc, s->streams, s->n_streams, &c->dexec, run->err);
  if (st != MX_OK) mx__error_prefix(run->err, "dynamic partition '%s': ", c->name);
  return st;
}

static mx_status k_dyn_destroy(mx_exe_run *run, const mx_exe_node *n) {
  mx_rt_call *c = call_of(run, n);
  mx__dyn_exec_destroy(c->dexec);
  c->dexec = NULL;
  return MX_OK;
}

/* --- feeding inputs ------------------------------------------------------------------------- */

static mx_status k_feed_input(mx_exe_run *run, const mx_exe_node *n) {
  uint64_t t0 = mx__ticks();
  mx_step *step = STEP(run);
  mx_program *p = step->s->prog;
  uint32_t i = ATTR(n)->op, r = ATTR(n)->value;
  const mx_value *decl = &p->root->values[r];
  const mx_tensor *t = step->inputs[i];
  mx_symtab *syms = p->root->syms;
  if (t->dtype != decl->dtype)
    return mx__fail(run->err, MX_ERR_DTYPE, "input '%s': dtype %s given, %s expected", decl->name,
                    mx_dtype_name(t->dtype), mx_dtype_name(decl->dtype));
  size_t nbytes;
  if (t->rank < 0 || t->rank > MX_MAX_RANK || !mx_tensor_nbytes(t, &nbytes))
    return mx__fail(run->err, MX_ERR_SHAPE, "input '%s': invalid or overflowing dims", decl->name);
  if (nbytes && !t->data)
    return mx__fail(run->err, MX_ERR_INVALID_ARGUMENT, "input '%s': data is NULL", decl->name);
  if (decl->shape.rank != MX_RANK_UNKNOWN) {
    if (t->rank != decl->shape.rank)
      return mx__fail(run->err, MX_ERR_SHAPE, "input '%s': rank %d given, %d expected", decl->name,
                      (int)t->rank, (int)decl->shape.rank);
    for (int32_t k = 0; k < t->rank; k++) {
      mx_dim d = decl->shape.dims[k];
      if (mx_dim_is_concrete(d)) {
        if (d != t->dims[k])
          return mx__fail(run->err, MX_ERR_SHAPE, "input '%s': dim %d is %lld, %lld expected", decl->name,
                          (int)k, (long long)t->dims[k], (long long)d);
        continue;
      }
      int32_t sym = p->input_dim_sym[(size_t)i * MX_MAX_RANK + (size_t)k];
      if (sym < 0) continue; /* an expression: the partitions that read it check it */
      int64_t *b = &step->bindings[sym];
      if (*b != INT64_MIN && *b != t->dims[k])
        return mx__fail(run->err, MX_ERR_SHAPE, "input '%s': dim %d is %lld, but symbol '%s' is already %lld",
                        decl->name, (int)k, (long long)t->dims[k], mx_symtab_symbol_name(syms, (size_t)sym),
                        (long long)*b);
      *b = t->dims[k];
      if (t->dims[k] < p->sym_min[sym] || t->dims[k] > p->sym_max[sym])
        return mx__fail(run->err, MX_ERR_SHAPE,
                        "input '%s': dim %d is %lld, outside the declared range of '%s' [%lld, %lld]",
                        decl->name, (int)k, (long long)t->dims[k], mx_symtab_symbol_name(syms, (size_t)sym),
                        (long long)p->sym_min[sym], (long long)p->sym_max[sym]);
    }
  }
  mx_rt_value *rv = &p->values[r];
  rv->t = *t;
  rv->t.name = decl->name;
  rv->owned = false;
  step->host_ticks += mx__ticks() - t0;
  return MX_OK;
}

/* --- KNOWN calls ---------------------------------------------------------------------------- */

mx_tensor *mx__zero_copy_target(mx_step *step, const mx_rt_value *rv, mx_dtype dtype, int32_t rank,
                                const int64_t *dims) {
  if (rv->graph_output < 0) return NULL;
  mx_tensor *o = step->out_by_graph[rv->graph_output];
  if (!o->data || o->placement != MX_DEVICE || o->dtype != dtype || o->rank != rank) return NULL;
  for (int32_t d = 0; d < rank; d++)
    if (o->dims[d] != dims[d]) return NULL;
  return o;
}

static mx_status k_static_alloc(mx_exe_run *run, const mx_exe_node *n) {
  mx_step *step = STEP(run);
  mx_session *s = step->s;
  mx_program *p = s->prog;
  mx_rt_call *c = call_of(run, n);
  for (uint32_t j = 0; j < c->n_out; j++) {
    mx_rt_value *rv = &p->values[c->out_values[j]];
    mx_static_io io;
    if (!rv->home) {
      /* Multi-stream programs: the description is set here, the buffer comes from the
       * allocator. (Single-stream programs set it once, with the home buffer.) */
      mx__static_model_output(c->model, j, &io);
      memset(&rv->t, 0, sizeof rv->t);
      rv->t.dtype = io.dtype;
      rv->t.rank = io.rank;
      memcpy(rv->t.dims, io.dims, sizeof io.dims);
      rv->t.placement = MX_DEVICE;
      rv->t.name = p->root->values[c->out_values[j]].name;
    }
    mx_tensor *zc = mx__zero_copy_target(step, rv, rv->t.dtype, rv->t.rank, rv->t.dims);
    if (zc || rv->home) {
      rv->t.data = zc ? zc->data : rv->home;
      rv->owned = false;
      continue;
    }
    mx_status st =
        mx__caching_alloc(s->alloc, (size_t)io.nbytes, mx__call_stream(step, c), &rv->t.data, run->err);
    if (st != MX_OK) {
      mx__error_prefix(run->err, "output '%s' of static partition '%s': ", rv->t.name, c->name);
      return st;
    }
    rv->owned = rv->t.data != NULL;
  }
  return MX_OK;
}

static mx_status k_static_update_args(mx_exe_run *run, const mx_exe_node *n) {
  mx_program *p = STEP(run)->s->prog;
  mx_rt_call *c = call_of(run, n);
  for (uint32_t k = 0; k < c->n_in; k++) c->args_in[k] = p->values[c->in_values[k]].t;
  for (uint32_t j = 0; j < c->n_out; j++) c->args_out[j] = p->values[c->out_values[j]].t;
  mx_status st = mx__static_model_update_args(c->model, c->args_in, c->n_in, c->args_out, c->n_out);
  if (st != MX_OK)
    return mx__fail(run->err, st, "static partition '%s': %s", c->name,
                    mx__static_model_last_error(c->model));
  return MX_OK;
}

/* Trace lane of a session stream (1 + its index; 1 for a caller's stream). */
static uint32_t lane_of(const mx_session *s, const mx_stream *stream) {
  for (uint32_t i = 0; i < s->n_streams; i++)
    if (s->streams[i] == stream) return 1 + i;
  return 1;
}

static mx_status k_static_execute(mx_exe_run *run, const mx_exe_node *n) {
  mx_step *step = STEP(run);
  mx_session *s = step->s;
  mx_rt_call *c = call_of(run, n);
  mx_stream *cs = mx__call_stream(step, c);
  mx_status st = mx__call_wait_producers(run, c);
  if (st != MX_OK) return st;
  uint32_t slice = UINT32_MAX;
  if (s->trace.on) {
    char label[80];
    snprintf(label, sizeof label, "static %s", c->name);
    slice = mx__trace_device_begin(s, cs, lane_of(s, cs), label);
  }
  st = mx__static_model_execute(c->model, cs);
  mx__trace_device_end(s, cs, slice);
  if (st == MX_OK) st = mx__call_record_done(run, c);
  if (st != MX_OK)
    return mx__fail(run->err, st, "static partition '%s': %s", c->name,
                    mx__static_model_last_error(c->model));
  step->s->last.static_executes++;
  return MX_OK;
}

/* --- UNKNOWN calls -------------------------------------------------------------------------- */

static mx_status dyn_fail(mx_exe_run *run, mx_rt_call *c, mx_status st) {
  return mx__fail(run->err, st, "%s", mx__dyn_exec_last_error(c->dexec));
}

static mx_status k_bind_symbols(mx_exe_run *run, const mx_exe_node *n) {
  mx_step *step = STEP(run);
  mx_program *p = step->s->prog;
  mx_rt_call *c = call_of(run, n);
  step->dynamic_ticks -= mx__ticks();
  for (uint32_t k = 0; k < c->n_in; k++) c->args_in[k] = p->values[c->in_values[k]].t;
  mx_status st = mx__call_wait_producers(run, c);
  if (st != MX_OK) return st;
  c->in_step = true;
  st = mx__dyn_step_begin(c->dexec, c->args_in, c->n_in, mx__call_stream(step, c));
  /* States on the append path: their rows lie in buffers padded along the growing axis. */
  for (size_t q = 0; q < step->n_pads && st == MX_OK; q++)
    for (uint32_t k = 0; k < c->n_in && st == MX_OK && !step->pads[q].output; k++)
      if (c->in_values[k] == step->pads[q].value)
        st = mx__dyn_set_input_pitch(c->dexec, c->args_in[k].name, step->pads[q].axis, step->pads[q].rows);
  /* The ops producing graph outputs write straight into the caller's device buffers (the same
   * ones DynStepEnd passes: the value's first graph output): no copy at the end of the step. A
   * state's output on the append path goes into its state's buffer, after the rows held. */
  for (uint32_t j = 0; j < c->n_out && st == MX_OK; j++) {
    const mx_rt_value *rv = &p->values[c->out_values[j]];
    const mx_tensor *o = rv->graph_output >= 0 ? step->out_by_graph[rv->graph_output] : NULL;
    const mx_step_pad *pad = NULL;
    for (size_t q = 0; q < step->n_pads && !pad; q++)
      if (step->pads[q].output && step->pads[q].value == c->out_values[j]) pad = &step->pads[q];
    if (pad && o)
      st = mx__dyn_bind_output_append(c->dexec, j, o, pad->axis, pad->rows);
    else if (o && o->data && o->placement == MX_DEVICE)
      st = mx__dyn_bind_output(c->dexec, j, o);
  }
  return st == MX_OK ? MX_OK : dyn_fail(run, c, st);
}

static mx_status k_infer_shape(mx_exe_run *run, const mx_exe_node *n) {
  mx_rt_call *c = call_of(run, n);
  mx_status st = mx__dyn_op_prepare(c->dexec, ATTR(n)->op);
  return st == MX_OK ? MX_OK : dyn_fail(run, c, st);
}

static mx_status k_launch(mx_exe_run *run, const mx_exe_node *n) {
  mx_session *s = STEP(run)->s;
  mx_rt_call *c = call_of(run, n);
  uint32_t op = ATTR(n)->op, slice = UINT32_MAX;
  int ps = s->trace.on ? mx__dyn_op_stream(c->dplan, op) : -1;
  mx_stream *stream = ps >= 0 ? mx__dyn_exec_stream(c->dexec, (size_t)ps) : NULL;
  if (stream) {
    mx_node_id nid = mx__dyn_op_node(c->dplan, op);
    const mx_graph *body = NULL;
    const mx_node *call = &s->prog->root->nodes[c->node];
    for (uint32_t k = 0; k < call->n_attrs && !body; k++)
      if (call->attrs[k].type == MX_ATTR_GRAPH) body = call->attrs[k].graph;
    char label[80];
    snprintf(label, sizeof label, "%s (%s)", body ? body->nodes[nid].name : "op",
             body ? body->nodes[nid].op_type : "?");
    slice = mx__trace_device_begin(s, stream, lane_of(s, stream), label);
  }
  mx_status st = mx__dyn_op_launch(c->dexec, op);
  if (stream) mx__trace_device_end(s, stream, slice);
  return st == MX_OK ? MX_OK : dyn_fail(run, c, st);
}

/* Host ops (small integer shape arithmetic, values evaluated from their symbolic form, buffer
 * aliases) run in the calling thread: no stream, no launch. */
static mx_status k_host_compute(mx_exe_run *run, const mx_exe_node *n) {
  mx_rt_call *c = call_of(run, n);
  mx_status st = mx__dyn_op_launch(c->dexec, ATTR(n)->op);
  return st == MX_OK ? MX_OK : dyn_fail(run, c, st);
}

static mx_status k_sync_output_shape(mx_exe_run *run, const mx_exe_node *n) {
  mx_rt_call *c = call_of(run, n);
  mx_status st = mx__dyn_op_sync_shape(c->dexec, ATTR(n)->op);
  return st == MX_OK ? MX_OK : dyn_fail(run, c, st);
}

static mx_status k_free_memory(mx_exe_run *run, const mx_exe_node *n) {
  mx_rt_call *c = call_of(run, n);
  mx__dyn_op_free_after(c->dexec, ATTR(n)->op);
  return MX_OK;
}

static mx_status k_dyn_step_end(mx_exe_run *run, const mx_exe_node *n) {
  mx_step *step = STEP(run);
  mx_program *p = step->s->prog;
  mx_rt_call *c = call_of(run, n);
  /* Graph outputs go straight into the caller's device buffers when there are any; the executor
   * checks their dtype and dims against the result. */
  for (uint32_t j = 0; j < c->n_out; j++) {
    mx_tensor *a = &c->args_out[j];
    memset(a, 0, sizeof *a);
    a->placement = MX_DEVICE;
    const mx_rt_value *rv = &p->values[c->out_values[j]];
    mx_tensor *o = rv->graph_output >= 0 ? step->out_by_graph[rv->graph_output] : NULL;
    if (o && o->data && o->placement == MX_DEVICE) *a = *o;
  }
  mx_status st = mx__dyn_step_end(c->dexec, c->args_out, c->n_out);
  if (st != MX_OK) return dyn_fail(run, c, st);
  c->in_step = false;
  st = mx__call_record_done(run, c);
  if (st != MX_OK) return st;
  for (uint32_t j = 0; j < c->n_out; j++) {
    mx_rt_value *rv = &p->values[c->out_values[j]];
    const mx_tensor *o = rv->graph_output >= 0 ? step->out_by_graph[rv->graph_output] : NULL;
    bool caller = o && o->data && o->data == c->args_out[j].data;
    rv->t = c->args_out[j];
    rv->t.name = p->root->values[c->out_values[j]].name;
    rv->owned = !caller && rv->t.data != NULL;
  }
  step->dynamic_ticks += mx__ticks();
  return MX_OK;
}

/* --- values and outputs --------------------------------------------------------------------- */

static mx_status k_free_value(mx_exe_run *run, const mx_exe_node *n) {
  mx_step *step = STEP(run);
  mx_session *s = step->s;
  mx_rt_value *rv = &s->prog->values[ATTR(n)->value];
  if (!rv->owned) return MX_OK;
  rv->owned = false;
  mx_stream *home = value_stream(step, rv);
  mx_status st = MX_OK;
  /* Readers on other streams keep the block from reuse until they are past it. */
  for (uint32_t k = 0; k < MX_STEP_MAX_STREAMS && st == MX_OK; k++)
    if ((rv->reader_streams >> k & 1u) && step->streams[k] && step->streams[k] != home)
      st = mx__caching_record_stream(s->alloc, rv->t.data, step->streams[k], run->err);
  if (st == MX_OK) st = mx__caching_free(s->alloc, rv->t.data, home, run->err);
  rv->t.data = NULL;
  return st;
}

static mx_status k_output_deliver(mx_exe_run *run, const mx_exe_node *n) {
  uint64_t t0 = mx__ticks();
  mx_step *step = STEP(run);
  mx_program *p = step->s->prog;
  uint32_t k = ATTR(n)->op;
  const mx_rt_value *rv = &p->values[ATTR(n)->value];
  if (step->skip_output[k]) return MX_OK; /* not asked for */
  mx_tensor *o = step->out_by_graph[k];
  const char *name = p->root->values[ATTR(n)->value].name;
  size_t nbytes = 0;
  mx_tensor_nbytes(&rv->t, &nbytes);
  if (o->data && o->data == rv->t.data) goto done; /* written in place */
  if (o->data) {
    bool same = o->dtype == rv->t.dtype && o->rank == rv->t.rank;
    for (int32_t d = 0; same && d < o->rank; d++) same = o->dims[d] == rv->t.dims[d];
    if (!same) {
      char want[160] = "", got[160] = "";
      for (int32_t d = 0, w = 0; d < rv->t.rank; d++)
        w += snprintf(want + w, sizeof want - (size_t)w, "%s%lld", d ? ", " : "", (long long)rv->t.dims[d]);
      for (int32_t d = 0, w = 0; d < o->rank && o->rank <= MX_MAX_RANK; d++)
        w += snprintf(got + w, sizeof got - (size_t)w, "%s%lld", d ? ", " : "", (long long)o->dims[d]);
      return mx__fail(run->err, MX_ERR_SHAPE,
                      "output '%s': the buffer given is %s [%s], the result is %s [%s]", name,
                      mx_dtype_name(o->dtype), got, mx_dtype_name(rv->t.dtype), want);
    }
  } else if (o->placement == MX_DEVICE) {
    /* A device output of the step's shape, allocated for the caller (mx_device_free). */
    void *buf = NULL;
    mx_status st = mx_device_alloc(step->s->dev, nbytes ? nbytes : 1, 64, &buf);
    if (st != MX_OK)
      return mx__fail(run->err, st, "output '%s': cannot allocate %zu bytes of device memory", name, nbytes);
    o->dtype = rv->t.dtype;
    o->rank = rv->t.rank;
    memcpy(o->dims, rv->t.dims, sizeof o->dims);
    o->data = buf;
    step->alloc_output[k] = true;
  } else {
    mx_status st = mx_tensor_alloc(rv->t.dtype, rv->t.rank, rv->t.dims, o);
    if (st != MX_OK)
      return mx__fail(run->err, st, "output '%s': cannot allocate %zu bytes of host memory", name, nbytes);
    step->alloc_output[k] = true;
  }
  o->name = name;
  if (nbytes) {
    if (rv->t.placement == MX_HOST && o->placement == MX_HOST) {
      /* Host to host: the source is a caller's input (ready now). */
      memcpy(o->data, rv->t.data, nbytes);
    } else {
      mx_copy_kind kind = rv->t.placement == MX_HOST ? MX_COPY_H2D
                          : o->placement == MX_HOST  ? MX_COPY_D2H
                                                     : MX_COPY_D2D;
      mx_status st =
          mx__hal_copy_async_named(value_stream(step, rv), o->data, rv->t.data, nbytes, kind, name);
      if (st != MX_OK) return mx__fail(run->err, st, "output '%s': copy failed", name);
    }
  }
done:
  o->name = name;
  step->host_ticks += mx__ticks() - t0;
  return MX_OK;
}

static const mx_exe_kernel_def defs[] = {
    {"UploadConstant", k_upload_constant, 0, NULL, "Init: copies a shared constant to the device"},
    {"FreeConstant", k_free_constant, 0, NULL, "DeInit: frees a shared constant"},
    {"StaticModelCreate", k_static_create, 0, NULL,
     "Init: loads a static plan (weights, FM arena, sunk tasks)"},
    {"StaticModelDestroy", k_static_destroy, 0, NULL, "DeInit: unloads a static model"},
    {"DynExecCreate", k_dyn_create, 0, NULL,
     "Init: binds a dynamic plan to the device, allocator and streams"},
    {"DynExecDestroy", k_dyn_destroy, 0, NULL, "DeInit: frees a dynamic executor"},
    {"FeedInput", k_feed_input, MX_EXE_SERIAL, NULL,
     "checks a caller's input against the model and binds its symbols"},
    {"StaticAllocOutputs", k_static_alloc, MX_EXE_SERIAL, NULL,
     "allocates a static model's outputs (or takes the caller's buffers: zero copy)"},
    {"StaticModelUpdateArgs", k_static_update_args, 0, NULL,
     "gives a static model this step's addresses; refreshes only the entries that moved"},
    {"StaticModelExecute", k_static_execute, MX_EXE_SERIAL, NULL, "runs a sunk static model: one call"},
    {"BindSymbols", k_bind_symbols, MX_EXE_SERIAL, NULL,
     "starts a dynamic partition's step: checks inputs, binds symbols"},
    {"InferShape", k_infer_shape, MX_EXE_SERIAL, NULL, "a dynamic op's output shapes and buffers"},
    {"Launch", k_launch, MX_EXE_SERIAL, NULL, "queues a dynamic op on its stream"},
    {"HostCompute", k_host_compute, MX_EXE_SERIAL, NULL,
     "runs a host op of a dynamic partition (shape arithmetic, evaluated values, aliases)"},
    {"SyncOutputShape", k_sync_output_shape, MX_EXE_SERIAL, NULL,
     "reads a data-dependent op's actual output shape"},
    {"FreeMemory", k_free_memory, MX_EXE_SERIAL, NULL, "frees the values whose last reader was this op"},
    {"DynStepEnd", k_dyn_step_end, MX_EXE_SERIAL, NULL,
     "ends a dynamic partition's step, hands over its outputs"},
    {"FreeValue", k_free_value, MX_EXE_SERIAL, NULL,
     "frees a root value after its last reader (stream-ordered)"},
    {"OutputDeliver", k_output_deliver, MX_EXE_SERIAL, NULL,
     "writes a result into the caller's output (nothing when written in place)"},
};

const mx_exe_kernel_group mx__exe_kernels_model = {defs, sizeof defs / sizeof defs[0]};
