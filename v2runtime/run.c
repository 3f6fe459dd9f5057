/* Running steps: mx_session_run matches the caller's inputs and outputs to the model's, runs
 * the Main execution graph, waits for the device, and on any failure puts everything back as it
 * was (dynamic steps aborted, step buffers freed, streams reset, outputs it allocated released)
 * so the next step starts clean. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/grow.h"
#include "mixrt/reference.h"
#include "reference/reference.h"
#include "v2runtime/kernels_control.h"
#include "v2runtime/session_impl.h"
#include "v2runtime/spec.h"

#define enter mx__session_enter
#define leave mx__session_leave

/* Sizes the step's per-io arrays for the loaded program. */
static mx_status prepare_step(mx_session *s) {
  const mx_graph *root = s->prog->root;
  size_t need = root->n_inputs > root->n_outputs ? root->n_inputs : root->n_outputs;
  size_t n_syms = mx_symtab_symbol_count(root->syms);
  mx_step *st = &s->step;
  if (need > s->cap_io || !st->bindings) {
    size_t cap = need > 8 ? need : 8;
    const mx_tensor **in = realloc(st->inputs, cap * sizeof *in);
    if (in) st->inputs = in;
    mx_tensor **ob = realloc(st->out_by_graph, cap * sizeof *ob);
    if (ob) st->out_by_graph = ob;
    bool *ao = realloc(st->alloc_output, cap * sizeof *ao);
    if (ao) st->alloc_output = ao;
    bool *so = realloc(st->skip_output, cap * sizeof *so);
    if (so) st->skip_output = so;
    mx_tensor *bo = realloc(st->blank_output, cap * sizeof *bo);
    if (bo) st->blank_output = bo;
    if (!in || !ob || !ao || !so || !bo)
      return mx__fail(&s->err, MX_ERR_OUT_OF_MEMORY, "out of host memory starting a step");
    s->cap_io = cap;
  }
  int64_t *b = realloc(st->bindings, (n_syms ? n_syms : 1) * sizeof *b);
  if (!b) return mx__fail(&s->err, MX_ERR_OUT_OF_MEMORY, "out of host memory starting a step");
  st->bindings = b;
  for (size_t i = 0; i < n_syms; i++) b[i] = INT64_MIN;
  return MX_OK;
}

/* Maps caller tensors to model inputs or outputs: by name when every one has a name, else by
 * position. With `subset`, fewer named tensors may be given: the slots of the others stay NULL. */
static mx_status match(mx_session *s, const mx_value_id *ids, size_t n_model, mx_tensor *given,
                       size_t n_given, const char *what, bool subset, void **slots) {
  const mx_graph *root = s->prog->root;
  if (n_given && !given) return mx__fail(&s->err, MX_ERR_INVALID_ARGUMENT, "%ss is NULL", what);
  bool named = n_given > 0;
  for (size_t i = 0; i < n_given; i++) named = named && given[i].name;
  if (n_given != n_model && !(subset && named && n_given < n_model))
    return mx__fail(&s->err, MX_ERR_INVALID_ARGUMENT, "the model has %zu %ss, %zu given%s", n_model, what,
                    n_given, subset && n_given < n_model ? " (a subset must be given by name)" : "");
  for (size_t i = 0; i < n_model; i++) slots[i] = named ? NULL : &given[i];
  if (!named) return MX_OK;
  for (size_t i = 0; i < n_given; i++) {
    /* Callers usually pass tensors in the model's order: try that position first (the same
     * pointer when the names come from the model itself). */
    const char *own = i < n_model ? root->values[ids[i]].name : NULL;
    size_t k = own && (own == given[i].name || strcmp(own, given[i].name) == 0) ? i : n_model;
    if (k == n_model)
      for (k = 0; k < n_model && strcmp(root->values[ids[k]].name, given[i].name) != 0;) k++;
    if (k == n_model)
      return mx__fail(&s->err, MX_ERR_NOT_FOUND, "the model has no %s named '%s'", what, given[i].name);
    if (slots[k])
      return mx__fail(&s->err, MX_ERR_INVALID_ARGUMENT, "%s '%s' is given twice", what, given[i].name);
    slots[k] = &given[i];
  }
  return MX_OK;
}

void mx__program_abort_step(mx_session *s, mx_step *step) {
  mx_program *p = s->prog;
  for (size_t c = 0; c < p->n_calls; c++) {
    if (!p->calls[c].in_step) continue;
    mx__dyn_step_abort(p->calls[c].dexec);
    p->calls[c].in_step = false;
  }
  /* Nothing of the failed step may still run before its buffers go back. */
  for (uint32_t i = 0; i < s->n_streams; i++) mx_stream_reset(s->streams[i]);
  if (step->stream) mx_stream_reset(step->stream);
  for (size_t r = 0; r < p->n_values; r++) {
    mx_rt_value *rv = &p->values[r];
    if (!rv->owned) continue;
    mx__caching_free(s->alloc, rv->t.data, NULL, NULL);
    rv->owned = false;
    rv->t.data = NULL;
  }
  for (size_t k = 0; k < p->root->n_outputs; k++) {
    if (!step->alloc_output[k]) continue;
    mx_tensor *o = step->out_by_graph[k];
    if (o->placement == MX_DEVICE) {
      /* A device output the session allocated for the caller. */
      mx_device_free(s->dev, o->data);
      o->data = NULL;
    } else {
      mx_tensor_release(o);
    }
    step->alloc_output[k] = false;
  }
}

/* Explains a device-side failure found when waiting for the step. */
static mx_status device_failure(mx_session *s, mx_stream *stream, mx_status st) {
  mx_stream_error e;
  mx_stream_get_error(stream, &e);
  return mx__fail(&s->err, st, "the step failed on the device: %s",
                  e.message[0] ? e.message : mx_status_string(st));
}

static void account(mx_session *s, const mx_step *step, uint64_t step_ns) {
  mx_program *p = s->prog;
  mx_session_stats *l = &s->last;
  uint64_t execs = l->static_executes, control_runs = l->control_runs, iterations = l->loop_iterations;
  uint64_t body_runs = l->body_runs, body_execs = l->body_static_executes;
  uint64_t rebinds = l->loop_carry_rebinds, carry_copies = l->loop_carry_copies;
  memset(l, 0, sizeof *l);
  l->steps = 1;
  l->step_ns = step_ns;
  l->static_executes = execs;
  l->control_runs = control_runs;
  l->loop_iterations = iterations;
  l->body_runs = body_runs;
  l->body_static_executes = body_execs;
  l->loop_carry_rebinds = rebinds;
  l->loop_carry_copies = carry_copies;
  /* Ticks to nanoseconds, by the ratio of both clocks since the session was created. */
  double ns_per_tick = mx__tick_clock_ratio(&s->clock);
  l->dynamic_ns = (uint64_t)((double)step->dynamic_ticks * ns_per_tick);
  l->host_ns = (uint64_t)((double)step->host_ticks * ns_per_tick);
  l->kernels_run = step->kernels;
  for (size_t c = 0; c < p->n_calls; c++) {
    mx_rt_call *call = &p->calls[c];
    if (call->model) {
      mx_static_model_stats ms;
      mx__static_model_stats_get(call->model, &ms);
      l->static_ns += ms.hal.last_exec_ns;
      l->refreshed_entries += ms.last_refreshed;
    }
  }
  mx_caching_stats cs;
  mx__caching_stats_get(s->alloc, &cs);
  l->device_allocations = cs.device_allocs - s->total.device_allocations;
  l->allocator_hits = cs.hits - s->total.allocator_hits;
  l->allocator_misses = cs.misses - s->total.allocator_misses;
  l->bytes_in_use = cs.bytes_in_use;
  l->bytes_cached = cs.bytes_cached;
  l->peak_bytes = cs.peak_in_use;
  uint64_t launches = 0, copies = 0; /* the executors count since their creation */
  for (size_t c = 0; c < p->n_calls; c++)
    if (p->calls[c].dexec) {
      mx_dyn_exec_stats ds;
      mx__dyn_exec_stats_get(p->calls[c].dexec, &ds);
      launches += ds.launches;
      copies += ds.output_copies;
    }
  mx_session_stats *t = &s->total;
  l->dynamic_launches = launches - t->dynamic_launches;
  l->output_copies = copies - t->output_copies;
  t->steps += 1;
  t->step_ns += l->step_ns;
  t->static_ns += l->static_ns;
  t->dynamic_ns += l->dynamic_ns;
  t->host_ns += l->host_ns;
  t->static_executes += l->static_executes;
  t->control_runs += l->control_runs;
  t->loop_iterations += l->loop_iterations;
  t->body_runs += l->body_runs;
  t->body_static_executes += l->body_static_executes;
  t->loop_carry_rebinds += l->loop_carry_rebinds;
  t->loop_carry_copies += l->loop_carry_copies;
  t->refreshed_entries += l->refreshed_entries;
  t->kernels_run += l->kernels_run;
  t->device_allocations = cs.device_allocs;
  t->allocator_hits = cs.hits;
  t->allocator_misses = cs.misses;
  t->bytes_in_use = cs.bytes_in_use;
  t->bytes_cached = cs.bytes_cached;
  t->peak_bytes = cs.peak_in_use;
  t->dynamic_launches = launches;
  t->output_copies = copies;
  mx__spec_account(s, l, t);
}

/* A step of an interpreted program (control flow, sequences): the reference interpreter runs the
 * root graph on host copies of the inputs; outputs go into the caller's buffers when given (the
 * same dtype and size), else into host tensors the caller then owns. */
static mx_status run_interpreted(mx_session *s, mx_program *p, mx_step *step) {
  const mx_graph *root = p->root;
  size_t ni = root->n_inputs, no = root->n_outputs;
  mx_tensor *ins = calloc(ni ? ni : 1, sizeof *ins), *outs = calloc(no ? no : 1, sizeof *outs);
  mx_status st = MX_OK;
  if (!ins || !outs) {
    st = mx__fail(&s->err, MX_ERR_OUT_OF_MEMORY, "out of host memory starting a step");
    goto done;
  }
  for (size_t i = 0; i < ni; i++) {
    ins[i] = *step->inputs[i];
    ins[i].name = NULL;
    if (ins[i].placement != MX_HOST) {
      st = mx__fail(&s->err, MX_ERR_UNSUPPORTED, "input '%s': a model with control flow takes host inputs",
                    root->values[root->inputs[i]].name);
      goto done;
    }
  }
  /* The root was inferred when compiled: the step runs it without inferring it again (a graph
   * with subgraphs would re-infer every body on every step). */
  st = mx__control_run_graph(s, p->root, ins, ni, outs, no, &s->err);
  if (st != MX_OK) goto done;
  for (size_t k = 0; k < no && st == MX_OK; k++) {
    if (step->skip_output[k]) continue; /* not asked for: released with the rest */
    mx_tensor *o = step->out_by_graph[k];
    const char *name = root->values[root->outputs[k]].name;
    if (!o->data && o->placement == MX_DEVICE) {
      st = mx__fail(&s->err, MX_ERR_UNSUPPORTED,
                    "output '%s': a model with control flow returns host outputs (placement MX_HOST)", name);
    } else if (!o->data) {
      *o = outs[k];
      o->name = name;
      memset(&outs[k], 0, sizeof outs[k]);
      continue;
    }
    size_t have = 0, want = 0;
    if (o->dtype != outs[k].dtype || !mx_tensor_nbytes(o, &have) || !mx_tensor_nbytes(&outs[k], &want) ||
        have != want)
      st = mx__fail(&s->err, MX_ERR_SHAPE, "output '%s': the caller's buffer does not fit the result", name);
    else if (o->placement != MX_HOST)
      st = mx__fail(&s->err, MX_ERR_UNSUPPORTED, "output '%s': a model with control flow writes host buffers",
                    name);
    else {
      memcpy(o->data, outs[k].data, want);
      o->rank = outs[k].rank;
      memcpy(o->dims, outs[k].dims, sizeof o->dims);
    }
  }
done:
  for (size_t k = 0; outs && k < no; k++) mx_tensor_release(&outs[k]);
  free(outs);
  free(ins);
  return st;
}

/* One step, synchronous or asynchronous (the caller's stream, callback and user data). With
 * `bound` (a binding's records, already matched by graph index: mx__session_run_slots) no names
 * are looked up. */
static mx_status run_step(mx_session *s, const mx_tensor *inputs, size_t n_inputs, mx_tensor *outputs,
                          size_t n_outputs, bool async, mx_stream *stream, mx_run_callback cb, void *user,
                          const mx_bound_slots *bound) {
  if (!s) return MX_ERR_INVALID_ARGUMENT;
  mx_status st = enter(s);
  if (st != MX_OK) return st;
  uint64_t t0 = mx__now_ns();
  mx_error_clear(&s->err);
  atomic_store(&s->cancel, false); /* mx_session_cancel stops the run in progress only */
  s->last.control_runs = 0;        /* counted by the control kernel (kernels_control.c) */
  s->last.loop_iterations = 0;
  s->last.body_runs = 0; /* counted by the compiled bodies (kernels_control_body.c) */
  s->last.body_static_executes = 0;
  s->last.loop_carry_rebinds = 0;
  s->last.loop_carry_copies = 0;
  mx_program *p = s->prog;
  mx_step *step = &s->step;
  step->pads = NULL;
  step->n_pads = 0;
  if (!p) {
    st = mx__fail(&s->err, MX_ERR_INVALID_ARGUMENT, "no model is loaded");
    goto out;
  }
  if (stream && mx_stream_device(stream) != s->dev) {
    st = mx__fail(&s->err, MX_ERR_INVALID_ARGUMENT, "the stream given belongs to another device");
    goto out;
  }
  if (s->async.started && s->async.device_failed) {
    /* An earlier asynchronous step failed on the device: its streams skip work until reset. */
    mx__async_wait(s);
    for (uint32_t i = 0; i < s->n_streams; i++) mx_stream_reset(s->streams[i]);
    if (stream) mx_stream_reset(stream);
    s->async.device_failed = false;
  }
  st = prepare_step(s);
  if (st != MX_OK) goto out;
  if (bound && bound->prog != p) {
    st = mx__fail(&s->err, MX_ERR_INVALID_ARGUMENT, "the binding was made for a model no longer loaded");
    goto out;
  } else if (bound) {
    step->pads = bound->pads;
    step->n_pads = bound->n_pads;
    memcpy(step->inputs, bound->inputs, p->root->n_inputs * sizeof *step->inputs);
    memcpy(step->out_by_graph, bound->outputs, p->root->n_outputs * sizeof *step->out_by_graph);
  } else {
    st = match(s, p->root->inputs, p->root->n_inputs, (mx_tensor *)inputs, n_inputs, "input", false,
               (void **)step->inputs);
    if (st == MX_OK)
      st = match(s, p->root->outputs, p->root->n_outputs, outputs, n_outputs, "output", true,
                 (void **)step->out_by_graph);
  }
  /* Sizes known from the inputs are checked before anything is allocated. */
  if (st == MX_OK) st = mx__step_check_memory(s, p, step->inputs);
  if (st != MX_OK) goto out;
  for (size_t k = 0; k < p->root->n_outputs; k++) {
    step->alloc_output[k] = false;
    /* An output not asked for: its producers still run, nothing is delivered. */
    step->skip_output[k] = step->out_by_graph[k] == NULL;
    if (step->skip_output[k]) {
      memset(&step->blank_output[k], 0, sizeof step->blank_output[k]);
      step->out_by_graph[k] = &step->blank_output[k];
      continue;
    }
    mx_tensor *o = step->out_by_graph[k];
    const char *name = p->root->values[p->root->outputs[k]].name;
    if (o->data && (o->rank < 0 || o->rank > MX_MAX_RANK)) {
      st = mx__fail(&s->err, MX_ERR_INVALID_ARGUMENT, "output '%s': rank %d is out of range", name,
                    (int)o->rank);
      goto out;
    }
    if (async && !o->data) {
      st = mx__fail(&s->err, MX_ERR_INVALID_ARGUMENT,
                    "output '%s': asynchronous runs write into caller buffers (set data, dtype and dims)",
                    name);
      goto out;
    }
  }
  if (p->interpreted) {
    st = async ? mx__fail(&s->err, MX_ERR_UNSUPPORTED,
                          "the model runs whole through the reference interpreter (%s), which has no "
                          "asynchronous runs",
                          p->interpreted_why)
               : run_interpreted(s, p, step);
    if (st == MX_OK) account(s, step, mx__now_ns() - t0);
    goto out;
  }
  mx_async_step *slot = NULL;
  if (async) {
    st = mx__async_start(s);
    if (st != MX_OK) goto out;
    slot = mx__async_slot(s);
  }
  step->s = s;
  step->outputs = outputs;
  step->stream = stream ? stream : s->streams[0];
  step->streams[0] = step->stream;
  for (uint32_t k = 1; k < MX_STEP_MAX_STREAMS; k++)
    step->streams[k] = k < s->n_streams ? s->streams[k] : NULL;
  step->dynamic_ticks = 0;
  step->host_ticks = 0;
  step->kernels = 0;
  s->last.static_executes = 0;
  st = mx__program_run_graph(s, &p->main, step);
  /* Join the partitions' streams back into the step's stream. */
  for (uint32_t k = 1; k < MX_STEP_MAX_STREAMS && st == MX_OK; k++) {
    if (!(p->used_streams >> k & 1u)) continue;
    st = mx_event_record(s->join[k], step->streams[k]);
    if (st == MX_OK) st = mx_stream_wait_event(step->stream, s->join[k]);
    if (st != MX_OK) mx__fail(&s->err, st, "cannot join stream %u into the step's stream", k);
  }
  if (st == MX_OK && !async) {
    mx_status dev = mx_stream_synchronize(step->stream);
    if (dev != MX_OK) st = device_failure(s, step->stream, dev);
  }
  if (st == MX_OK && async) {
    slot->stream = step->stream;
    slot->cb = cb;
    slot->user = user;
    st = mx__async_submit(s, slot);
  }
  if (st != MX_OK) {
    mx__program_abort_step(s, step);
    goto out;
  }
  mx__caching_fence(s->alloc, step->stream);
  account(s, step, mx__now_ns() - t0);
out:
  leave(s);
  return st;
}

mx_status mx_session_run(mx_session *s, const mx_tensor *inputs, size_t n_inputs, mx_tensor *outputs,
                         size_t n_outputs) {
  return run_step(s, inputs, n_inputs, outputs, n_outputs, false, NULL, NULL, NULL, NULL);
}

mx_status mx__session_run_slots(mx_session *s, const mx_bound_slots *bound) {
  return run_step(s, NULL, 0, NULL, 0, false, NULL, NULL, NULL, bound);
}

mx_status mx_session_run_async(mx_session *s, const mx_tensor *inputs, size_t n_inputs, mx_tensor *outputs,
                               size_t n_outputs, mx_stream *stream, mx_run_callback callback, void *user) {
  return run_step(s, inputs, n_inputs, outputs, n_outputs, true, stream, callback, user, NULL);
}

mx_status mx_session_synchronize(mx_session *s) {
  if (!s) return MX_ERR_INVALID_ARGUMENT;
  mx_status st = enter(s);
  if (st != MX_OK) return st;
  mx__async_wait(s);
  leave(s);
  return MX_OK;
}
