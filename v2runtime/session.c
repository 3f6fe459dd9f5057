/* The session API (include/mixrt/session.h): options, lifetime, loading (compile + Init), model
 * description and statistics. Running a step is in run.c. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/record.h"
#include "kernels/threads.h"
#include "mixrt/dist.h"
#include "mixrt/onnx.h"
#include "mixrt/session.h"
#include "v2runtime/kernels_control.h"
#include "v2runtime/session_impl.h"
#include "v2runtime/spec.h"

void mx_session_options_init(mx_session_options *o) {
  memset(o, 0, sizeof *o);
  o->version = MX_SESSION_OPTIONS_VERSION;
  mx_device_options_init(&o->device_options);
  o->streams = 1;
  o->executor = MX_EXECUTOR_SEQUENTIAL;
  o->static_min_ops = 4;
  o->spec_cache_size = MX_SPEC_DEFAULT_CACHE;
  o->spec_churn_limit = MX_SPEC_DEFAULT_CHURN;
  o->intra_op_threads = 1;
  o->max_loop_iterations = MX_SESSION_DEFAULT_LOOP_ITERATIONS;
}

/* The session whose last call on this thread was refused as busy. A refused call must not touch
 * the session's own error record (the thread inside is using it), so its message lives here. */
static _Thread_local const mx_session *refused_here;
static const char busy_message[] = "the session is in use by another thread (one caller at a time)";

mx_status mx__session_enter(mx_session *s) {
  int expected = 0;
  if (!atomic_compare_exchange_strong(&s->busy, &expected, 1)) {
    refused_here = s;
    return MX_ERR_BUSY;
  }
  refused_here = NULL;
  return MX_OK;
}

void mx__session_leave(mx_session *s) { atomic_store(&s->busy, 0); }

#define enter mx__session_enter
#define leave mx__session_leave

static void free_option_copies(mx_session *s) {
  for (size_t i = 0; s->frozen_names && i < s->opts.n_frozen_inputs; i++) free(s->frozen_names[i]);
  free(s->frozen_names);
  for (size_t i = 0; s->ranges && i < s->opts.n_symbol_ranges; i++) free((char *)s->ranges[i].name);
  free(s->ranges);
  for (size_t i = 0; s->gears && i < s->opts.n_gears; i++) free(s->gears[i]);
  free(s->gears);
  s->gears = NULL;
  free(s->passes);
  s->passes = NULL;
}

static mx_status copy_options(mx_session *s, const mx_session_options *o, mx_error *err) {
  s->opts = *o;
  s->opts.frozen_inputs = NULL;
  s->opts.symbol_ranges = NULL;
  s->opts.passes = NULL;
  s->opts.gears = NULL;
  if (o->passes && !(s->passes = strdup(o->passes))) goto oom;
  if (o->n_gears) {
    if (!o->gears) return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "gears is NULL");
    s->gears = calloc(o->n_gears, sizeof *s->gears);
    if (!s->gears) goto oom;
    for (size_t i = 0; i < o->n_gears; i++)
      if (!o->gears[i] || !(s->gears[i] = strdup(o->gears[i]))) goto oom;
  }
  if (o->n_frozen_inputs) {
    if (!o->frozen_inputs) return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "frozen_inputs is NULL");
    s->frozen_names = calloc(o->n_frozen_inputs, sizeof *s->frozen_names);
    if (!s->frozen_names) goto oom;
    for (size_t i = 0; i < o->n_frozen_inputs; i++)
      if (!o->frozen_inputs[i] || !(s->frozen_names[i] = strdup(o->frozen_inputs[i]))) goto oom;
  }
  if (o->n_symbol_ranges) {
    if (!o->symbol_ranges) return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "symbol_ranges is NULL");
    s->ranges = calloc(o->n_symbol_ranges, sizeof *s->ranges);
    if (!s->ranges) goto oom;
    for (size_t i = 0; i < o->n_symbol_ranges; i++) {
      const mx_symbol_range *r = &o->symbol_ranges[i];
      if (!r->name || r->min < 0 || r->max < r->min)
        return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "symbol range %zu: needs a name and 0 <= min <= max",
                        i);
      s->ranges[i] = *r;
      if (!(s->ranges[i].name = strdup(r->name))) goto oom;
    }
  }
  return MX_OK;
oom:
  return mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory copying session options");
}

mx_status mx_session_create(const mx_session_options *o, mx_session **out, mx_error *err) {
  if (!out) return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  mx_session_options defaults;
  if (!o) {
    mx_session_options_init(&defaults);
    o = &defaults;
  }
  mx_session_options upgraded;
  if (o->version == 1 || o->version == 2 || o->version == 3) {
    /* Version 1 ends before the specialization fields, version 2 before intra_op_threads,
     * version 3 before max_loop_iterations: the missing fields take their defaults. */
    mx_session_options_init(&upgraded);
    memcpy(&upgraded, o,
           o->version == 1   ? offsetof(mx_session_options, spec_cache_size)
           : o->version == 2 ? offsetof(mx_session_options, intra_op_threads)
                             : offsetof(mx_session_options, max_loop_iterations));
    upgraded.version = MX_SESSION_OPTIONS_VERSION;
    o = &upgraded;
  }
  if (o->version != MX_SESSION_OPTIONS_VERSION) /* older layouts get their own case here */
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT,
                    "session options version %u is not %u (fill them with mx_session_options_init)",
                    o->version, MX_SESSION_OPTIONS_VERSION);
  if (o->streams == 0 || o->streams > MX_STEP_MAX_STREAMS)
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "streams must be between 1 and 16, not %u", o->streams);
  if (o->executor > MX_EXECUTOR_MULTI_THREAD)
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "unknown executor %d", (int)o->executor);
  if (o->static_min_ops < -1)
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "static_min_ops must be -1 or more, not %lld",
                    (long long)o->static_min_ops);
  if (o->intra_op_threads > MX_KTHREADS_MAX)
    return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "intra_op_threads must be at most %d, not %u",
                    MX_KTHREADS_MAX, o->intra_op_threads);
  mx_session *s = calloc(1, sizeof *s);
  if (!s) return mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory creating a session");
  if (o->intra_op_threads) mx__kthreads_set((int32_t)o->intra_op_threads);
  s->n_streams = o->streams;
  mx__tick_clock_start(&s->clock);
  pthread_mutex_init(&s->trace.lock, NULL);
  mx_status st = copy_options(s, o, err);
  if (st != MX_OK) goto fail;
  if (o->device) {
    s->dev = o->device;
  } else {
    st = mx_device_create(&o->device_options, &s->dev, err);
    if (st != MX_OK) goto fail;
    s->owns_dev = true;
  }
  s->streams = calloc(s->n_streams, sizeof *s->streams);
  if (!s->streams) {
    st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory creating a session");
    goto fail;
  }
  for (uint32_t i = 0; i < s->n_streams; i++) {
    st = mx_stream_create(s->dev, 0, &s->streams[i]);
    if (st == MX_OK && i > 0) st = mx_event_create(s->dev, &s->join[i]);
    if (st != MX_OK) {
      mx__fail(err, st, "cannot create stream %u: %s", i, mx_device_last_error(s->dev));
      goto fail;
    }
  }
  st = mx__caching_allocator_create(s->dev, &s->alloc, err);
  if (st != MX_OK) goto fail;
  if (o->executor == MX_EXECUTOR_MULTI_THREAD) {
    st = mx__exe_pool_create(o->executor_threads, &s->pool, err);
    if (st != MX_OK) goto fail;
  }
  *out = s;
  return MX_OK;
fail:
  mx_session_destroy(s);
  return st;
}

/* Runs DeInit and frees the program. */
static void unload(mx_session *s) {
  mx_program *p = s->prog;
  if (!p) return;
  mx__async_wait(s);
  /* Only the wait matters: a failed stream has drained too, and its step reported it. */
  for (uint32_t i = 0; i < s->n_streams; i++) MX_IGNORE_STATUS(mx_stream_synchronize(s->streams[i]));
  mx__spec_release(s, p);
  if (p->initialized && !p->interpreted) {
    mx_error ignored;
    mx_step step = {.s = s};
    mx_exe_run run = {.values = p->slots, .user = &step, .err = &ignored, .failed_node = UINT32_MAX};
    /* DeInit kernels free what Init made and cannot fail half-way. */
    MX_IGNORE_STATUS(mx__exe_run_sequential(&p->deinit, &run));
  }
  for (size_t r = 0; p->values && r < p->n_values; r++)
    if (p->values[r].home) mx_device_free(s->dev, p->values[r].home);
  mx__program_free(p);
  s->prog = NULL;
}

void mx_session_destroy(mx_session *s) {
  if (!s) return;
  mx__async_stop(s);
  unload(s);
  mx__exe_pool_destroy(s->pool);
  mx__exe_topo_scratch_release(&s->topo);
  for (uint32_t i = 0; s->streams && i < s->n_streams; i++) {
    mx__caching_forget_stream(s->alloc, s->streams[i]);
    mx_stream_destroy(s->streams[i]);
  }
  mx__caching_allocator_destroy(s->alloc);
  for (uint32_t i = 0; i < MX_STEP_MAX_STREAMS; i++) mx_event_destroy(s->join[i]);
  free(s->streams);
  free(s->step.inputs);
  free(s->step.out_by_graph);
  free(s->step.alloc_output);
  free(s->step.skip_output);
  free(s->step.blank_output);
  free(s->step.bindings);
  if (s->owns_dev) mx_device_destroy(s->dev);
  mx__trace_release(&s->trace);
  pthread_mutex_destroy(&s->trace.lock);
  free_option_copies(s);
  mx_comm_release(s->comm);
  free(s);
}

const char *mx_session_last_error(const mx_session *s) {
  if (!s) return "";
  return refused_here == s ? busy_message : s->err.message;
}
mx_device *mx_session_device(mx_session *s) { return s ? s->dev : NULL; }

mx_status mx__program_run_graph(mx_session *s, const mx_exe_graph *g, mx_step *step) {
  mx_exe_run run = {.values = s->prog->slots, .user = step, .err = &s->err, .failed_node = UINT32_MAX};
  if (s->trace.on && g == &s->prog->main) run.on_node = mx__trace_node;
  mx_status st;
  switch (s->opts.executor) {
    case MX_EXECUTOR_TOPOLOGICAL: st = mx__exe_run_topological(g, &run, &s->topo); break;
    case MX_EXECUTOR_MULTI_THREAD: st = mx__exe_run_parallel(s->pool, g, &run); break;
    default: st = mx__exe_run_sequential(g, &run); break;
  }
  step->kernels += g->n_nodes;
  if (st != MX_OK && s->err.status == MX_OK)
    mx__fail(&s->err, st, "execution graph node %u failed", run.failed_node);
  return st;
}

mx_status mx__program_make_events(mx_session *s, mx_program *p, mx_error *err) {
  if (p->used_streams == 1) return MX_OK; /* one stream: stream order is enough */
  for (size_t c = 0; c < p->n_calls; c++) {
    if (p->calls[c].done) continue;
    mx_status st = mx_event_create(s->dev, &p->calls[c].done);
    if (st != MX_OK)
      return mx__fail(err, st, "cannot create the event of partition '%s': %s", p->calls[c].name,
                      mx_device_last_error(s->dev));
  }
  return MX_OK;
}

mx_status mx__program_prepare_feeds(mx_session *s, mx_program *p, mx_error *err) {
  const mx_graph *root = p->root;
  p->n_syms = mx_symtab_symbol_count(root->syms);
  free(p->input_dim_sym);
  free(p->sym_min);
  free(p->sym_max);
  p->input_dim_sym = malloc((root->n_inputs ? root->n_inputs : 1) * MX_MAX_RANK * sizeof *p->input_dim_sym);
  p->sym_min = malloc((p->n_syms ? p->n_syms : 1) * sizeof *p->sym_min);
  p->sym_max = malloc((p->n_syms ? p->n_syms : 1) * sizeof *p->sym_max);
  if (!p->input_dim_sym || !p->sym_min || !p->sym_max)
    return mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory preparing the model's inputs");
  for (size_t i = 0; i < root->n_inputs; i++) {
    const mx_value *v = &root->values[root->inputs[i]];
    for (int32_t k = 0; k < MX_MAX_RANK; k++) {
      int64_t sym = k < v->shape.rank && mx_dim_is_expr(v->shape.dims[k])
                        ? mx_sym_symbol_index(root->syms, v->shape.dims[k])
                        : -1;
      p->input_dim_sym[i * MX_MAX_RANK + (size_t)k] = (int32_t)sym;
    }
  }
  for (size_t q = 0; q < p->n_syms; q++) {
    p->sym_min[q] = INT64_MIN;
    p->sym_max[q] = INT64_MAX;
  }
  for (size_t q = 0; q < s->opts.n_symbol_ranges; q++) {
    int64_t sym = mx_sym_symbol_index(root->syms, mx_sym_lookup(root->syms, s->ranges[q].name));
    if (sym < 0 || (size_t)sym >= p->n_syms) continue; /* a range of a symbol the model lacks */
    p->sym_min[sym] = s->ranges[q].min;
    p->sym_max[sym] = s->ranges[q].max;
  }
  return MX_OK;
}

mx_status mx__program_make_homes(mx_session *s, mx_program *p, mx_error *err) {
  /* On one stream, the next step's producer is queued after this step's readers: a fixed buffer
   * is safe. With several streams, buffers come from the caching allocator, which tracks the
   * readers of other streams. */
  if (p->used_streams != 1) return MX_OK;
  for (size_t c = 0; c < p->n_calls; c++) {
    const mx_rt_call *call = &p->calls[c];
    if (call->unknown) continue;
    for (uint32_t j = 0; j < call->n_out; j++) {
      mx_rt_value *rv = &p->values[call->out_values[j]];
      mx_static_io io;
      if (rv->home || !mx__static_plan_output(call->plan, j, &io)) continue;
      /* The description never changes: StaticAllocOutputs only sets the data pointer. */
      memset(&rv->t, 0, sizeof rv->t);
      rv->t.dtype = io.dtype;
      rv->t.rank = io.rank;
      memcpy(rv->t.dims, io.dims, sizeof io.dims);
      rv->t.placement = MX_DEVICE;
      rv->t.name = p->root->values[call->out_values[j]].name;
      mx_status st = mx_device_alloc(s->dev, io.nbytes ? (size_t)io.nbytes : 1, 64, &rv->home);
      if (st != MX_OK)
        return mx__fail(err, st, "output '%s' of static partition '%s': cannot allocate %llu bytes: %s",
                        p->root->values[call->out_values[j]].name, call->name, (unsigned long long)io.nbytes,
                        mx_device_last_error(s->dev));
    }
  }
  return MX_OK;
}

/* Makes p the session's program and runs its Init. */
static mx_status install(mx_session *s, mx_program *p) {
  mx_status st;
  s->prog = p;
  st = mx__program_assign_streams(s, p, &s->err);
  if (st == MX_OK) st = mx__program_make_events(s, p, &s->err);
  if (st == MX_OK) st = mx__program_make_homes(s, p, &s->err);
  if (st == MX_OK) st = mx__program_prepare_feeds(s, p, &s->err);
  if (st == MX_OK) st = mx__program_prepare_limits(s, p, &s->err);
  if (st != MX_OK) {
    mx_error keep = s->err;
    unload(s);
    s->err = keep;
    return st;
  }
  mx_step step = {.s = s, .stream = s->streams[0]};
  st = p->interpreted ? MX_OK : mx__program_run_graph(s, &p->init, &step);
  if (st != MX_OK) {
    /* Undo what Init made: DeInit tolerates missing handles. */
    p->initialized = true;
    mx_error keep = s->err;
    unload(s);
    s->err = keep;
    return st;
  }
  p->initialized = true;
  mx__control_bodies_prepare(s); /* control bodies compiled at load (kernels_control_body.c) */
  /* Step figures restart with the model; the allocator's counters run for the session's life. */
  mx_session_stats keep = s->total;
  memset(&s->last, 0, sizeof s->last);
  memset(&s->total, 0, sizeof s->total);
  s->total.device_allocations = keep.device_allocations;
  s->total.allocator_hits = keep.allocator_hits;
  s->total.allocator_misses = keep.allocator_misses;
  /* Specializations: which dynamic partitions can have them, and the declared gears. */
  st = mx__spec_install(s, p, &s->err);
  if (st != MX_OK) {
    mx_error keep_err = s->err;
    unload(s);
    s->err = keep_err;
    return st;
  }
  mx_session_stats at_load = {0};
  mx__spec_account(s, &at_load, &s->total); /* gears compiled at load count in the totals */
  if (s->opts.log) {
    char line[256];
    snprintf(line, sizeof line, "loaded: %zu static and %zu dynamic partitions, %u + %u + %u kernels",
             p->static_calls, p->dynamic_calls, p->init.n_nodes, p->main.n_nodes, p->deinit.n_nodes);
    s->opts.log(s->opts.log_user, MX_LOG_INFO, line);
  }
  return MX_OK;
}

mx_status mx__session_install(mx_session *s, mx_program *p) {
  unload(s);
  mx_error_clear(&s->err);
  return install(s, p);
}

/* Compiles g (owned) and runs Init. */
static mx_status load_graph(mx_session *s, mx_graph *g) {
  unload(s);
  mx_error_clear(&s->err);
  mx_program *p;
  mx_status st = mx__program_compile(s, g, &p, &s->err);
  if (st != MX_OK) return st;
  return install(s, p);
}

/* True when the file starts like an .mxm file. */
static bool is_mxm(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return false;
  char magic[8];
  bool yes = fread(magic, 1, 8, f) == 8 && memcmp(magic, "MIXRTMXM", 8) == 0;
  fclose(f);
  return yes;
}

mx_status mx_session_load_graph(mx_session *s, mx_graph *g) {
  if (!s) {
    mx_graph_destroy(g);
    return MX_ERR_INVALID_ARGUMENT;
  }
  mx_status st = enter(s);
  if (st != MX_OK) {
    mx_graph_destroy(g);
    return st;
  }
  if (!g)
    st = mx__fail(&s->err, MX_ERR_INVALID_ARGUMENT, "graph is NULL");
  else
    st = load_graph(s, g);
  leave(s);
  return st;
}

mx_status mx_session_load_file(mx_session *s, const char *path) {
  if (!s) return MX_ERR_INVALID_ARGUMENT;
  mx_status st = enter(s);
  if (st != MX_OK) return st;
  mx_graph *g = NULL;
  if (!path) {
    st = mx__fail(&s->err, MX_ERR_INVALID_ARGUMENT, "path is NULL");
  } else if (is_mxm(path)) {
    unload(s);
    mx_error_clear(&s->err);
    mx_program *p;
    st = mx__program_load_mxm(s, path, &p, &s->err);
    if (st == MX_OK) st = install(s, p);
  } else {
    st = mx_onnx_load_file(path, &g, &s->err);
    if (st == MX_OK) st = load_graph(s, g);
  }
  leave(s);
  return st;
}

void mx_session_save_options_init(mx_session_save_options *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->version = MX_SESSION_SAVE_OPTIONS_VERSION;
}

mx_status mx_session_save(mx_session *s, const char *path, const mx_session_save_options *o) {
  if (!s) return MX_ERR_INVALID_ARGUMENT;
  mx_status st = enter(s);
  if (st != MX_OK) return st;
  mx_error_clear(&s->err);
  /* Version 0 is a zeroed or designated-initializer record of the first layout (docs/abi.md). */
  if (o && o->version > MX_SESSION_SAVE_OPTIONS_VERSION)
    st = mx__fail(&s->err, MX_ERR_INVALID_ARGUMENT,
                  "save options version %u is not %u (fill them with mx_session_save_options_init)",
                  o->version, MX_SESSION_SAVE_OPTIONS_VERSION);
  else if (!path)
    st = mx__fail(&s->err, MX_ERR_INVALID_ARGUMENT, "path is NULL");
  else if (!s->prog)
    st = mx__fail(&s->err, MX_ERR_INVALID_ARGUMENT, "no model is loaded");
  else if (s->prog->interpreted)
    st = mx__fail(&s->err, MX_ERR_UNSUPPORTED,
                  "the model runs whole through the reference interpreter (%s), which cannot be saved as .mxm",
                  s->prog->interpreted_why);
  else
    st = mx__program_save_mxm(s, path, o && o->external_weights, &s->err);
  leave(s);
  return st;
}

mx_status mx_session_load_memory(mx_session *s, const void *data, size_t size) {
  if (!s) return MX_ERR_INVALID_ARGUMENT;
  mx_status st = enter(s);
  if (st != MX_OK) return st;
  mx_graph *g = NULL;
  if (!data)
    st = mx__fail(&s->err, MX_ERR_INVALID_ARGUMENT, "data is NULL");
  else
    st = mx_onnx_load_memory(data, size, NULL, &g, &s->err);
  if (st == MX_OK) st = load_graph(s, g);
  leave(s);
  return st;
}

size_t mx_session_input_count(const mx_session *s) { return s && s->prog ? s->prog->root->n_inputs : 0; }
size_t mx_session_output_count(const mx_session *s) { return s && s->prog ? s->prog->root->n_outputs : 0; }

static bool io_info(const mx_session *s, size_t index, bool input, mx_io_info *info) {
  if (!s || !s->prog || !info) return false;
  const mx_graph *root = s->prog->root;
  size_t n = input ? root->n_inputs : root->n_outputs;
  if (index >= n) return false;
  const mx_value *v = &root->values[input ? root->inputs[index] : root->outputs[index]];
  info->name = v->name;
  info->dtype = v->dtype;
  info->rank = v->shape.rank;
  info->shape = input ? s->prog->input_shapes[index] : s->prog->output_shapes[index];
  return true;
}

bool mx_session_input_info(const mx_session *s, size_t index, mx_io_info *info) {
  return io_info(s, index, true, info);
}
bool mx_session_output_info(const mx_session *s, size_t index, mx_io_info *info) {
  return io_info(s, index, false, info);
}

mx_status mx_session_get_stats_sized(const mx_session *s, mx_session_stats *last, mx_session_stats *total,
                                     size_t record_size) {
  if (!s || record_size == 0) return MX_ERR_INVALID_ARGUMENT;
  if (last) mx__record_fill(last, record_size, &s->last, sizeof s->last);
  if (total) mx__record_fill(total, record_size, &s->total, sizeof s->total);
  return MX_OK;
}

mx_status mx_session_trace_begin(mx_session *s) {
  if (!s) return MX_ERR_INVALID_ARGUMENT;
  mx_status st = enter(s);
  if (st != MX_OK) return st;
  st = mx__trace_begin(s);
  leave(s);
  return st;
}

mx_status mx_session_trace_end(mx_session *s, const char *path) {
  if (!s) return MX_ERR_INVALID_ARGUMENT;
  mx_status st = enter(s);
  if (st != MX_OK) return st;
  st = path ? mx__trace_end(s, path) : mx__fail(&s->err, MX_ERR_INVALID_ARGUMENT, "trace path is NULL");
  leave(s);
  return st;
}

const mx_fuse_report *mx_session_fuse_report(const mx_session *s) { return s ? &s->fuse : NULL; }
