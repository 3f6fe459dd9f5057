/* Shape specialization at run time (spec.h): which dynamic calls can be specialized, the
 * wrapped Main kernels of those calls, the per-call LRU cache guarded by the values of the
 * call's symbols, the churn fallback, declared gears and the counters. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/grow.h"
#include "partitioner/partitioner.h"
#include "v2runtime/exe_registry.h"
#include "v2runtime/spec.h"

#define STEP(run) ((mx_step *)(run)->user)
#define ATTR(n)   ((const mx_kattr *)(n)->attr)

/* The registry's own functions of the kernels a specializable call's Main nodes run. */
#define MAX_KERNELS 256
static mx_exe_fn original[MAX_KERNELS];
static int k_bind = -1, k_end = -1;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void find_originals(void) {
  uint16_t n = mx__exe_kernel_count();
  for (uint16_t i = 0; i < n && i < MAX_KERNELS; i++) original[i] = mx__exe_kernel_at(i)->fn;
  k_bind = mx__exe_kernel_find("BindSymbols");
  k_end = mx__exe_kernel_find("DynStepEnd");
}

static bool is_per_op(const char *name) {
  static const char *const names[] = {"InferShape", "Launch", "HostCompute", "SyncOutputShape", "FreeMemory"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strcmp(names[i], name) == 0) return true;
  return false;
}

/* --- running a specialization ----------------------------------------------------------------- */

/* Runs a split specialization for call c this step. */
static mx_status run_split(mx_exe_run *run, mx_rt_call *c, mx_spec_entry *e) {
  mx_step *step = STEP(run);
  mx_status st = mx__call_wait_producers(run, c);
  if (st == MX_OK)
    st = mx__spec_split_run(step->s, step->s->prog, c, mx__call_stream(step, c), e->split,
                            &step->s->prog->spec->count.launches, run->err);
  if (st == MX_OK) st = mx__call_record_done(run, c);
  return st;
}

/* Runs entry e for call c this step: waits for producers on other streams, takes the outputs'
 * buffers, refreshes the addresses and executes the sunk model (one call). */
static mx_status run_entry(mx_exe_run *run, mx_rt_call *c, mx_spec_entry *e) {
  if (e->split) return run_split(run, c, e);
  mx_step *step = STEP(run);
  mx_session *s = step->s;
  mx_program *p = s->prog;
  mx_stream *cs = mx__call_stream(step, c);
  mx_status st = mx__call_wait_producers(run, c);
  if (st != MX_OK) return st;
  for (uint32_t j = 0; j < c->n_out; j++) {
    mx_rt_value *rv = &p->values[c->out_values[j]];
    mx_static_io io;
    mx__static_model_output(e->model, j, &io);
    if (rv->owned) continue; /* a value the call gives twice: already taken */
    memset(&rv->t, 0, sizeof rv->t);
    rv->t.dtype = io.dtype;
    rv->t.rank = io.rank;
    memcpy(rv->t.dims, io.dims, sizeof io.dims);
    rv->t.placement = MX_DEVICE;
    rv->t.name = p->root->values[c->out_values[j]].name;
    mx_tensor *zc = mx__zero_copy_target(step, rv, io.dtype, io.rank, io.dims);
    if (zc) {
      rv->t.data = zc->data;
      continue;
    }
    st = mx__caching_alloc(s->alloc, (size_t)io.nbytes, cs, &rv->t.data, run->err);
    if (st != MX_OK) {
      mx__error_prefix(run->err, "output '%s' of specialized partition '%s': ", rv->t.name, c->name);
      return st;
    }
    rv->owned = rv->t.data != NULL;
  }
  for (uint32_t k = 0; k < c->n_in; k++) c->args_in[k] = p->values[c->in_values[k]].t;
  for (uint32_t j = 0; j < c->n_out; j++) c->args_out[j] = p->values[c->out_values[j]].t;
  st = mx__static_model_update_args(e->model, c->args_in, c->n_in, c->args_out, c->n_out);
  if (st == MX_OK) {
    uint32_t slice = UINT32_MAX;
    if (s->trace.on) {
      char label[80];
      snprintf(label, sizeof label, "specialized %s", c->name);
      slice = mx__trace_device_begin(s, cs, 1 + c->stream, label);
    }
    st = mx__static_model_execute(e->model, cs);
    mx__trace_device_end(s, cs, slice);
  }
  if (st != MX_OK)
    return mx__fail(run->err, st, "specialized partition '%s': %s", c->name,
                    mx__static_model_last_error(e->model));
  st = mx__call_record_done(run, c);
  if (st != MX_OK) return st;
  s->last.static_executes++;
  return MX_OK;
}

/* --- the cache -------------------------------------------------------------------------------- */

static void say(mx_session *s, mx_log_level level, const char *line) {
  if (s->opts.log) s->opts.log(s->opts.log_user, level, line);
}

/* Frees an entry's model; the device must have finished with it. */
static void drop_entry(mx_session *s, mx_spec_entry *e) {
  if (s->async.started) mx__async_wait(s);
  for (uint32_t i = 0; i < s->n_streams; i++)
    MX_IGNORE_STATUS(mx_stream_synchronize(s->streams[i])); /* the wait */
  mx__static_model_destroy(e->model);
  mx__spec_split_destroy(e->split);
  e->model = NULL;
  e->split = NULL;
}

static uint32_t full_mask(const mx_spec_call *sc) {
  return sc->n_syms >= 32 ? UINT32_MAX : (1u << sc->n_syms) - 1;
}

/* The entry whose guarded symbols all have the values `vals` gives; a whole static model before
 * a split one. */
static mx_spec_entry *find_entry(mx_spec_call *sc, const int64_t *vals) {
  mx_spec_entry *split = NULL;
  for (uint32_t i = 0; i < sc->n_entries; i++) {
    mx_spec_entry *e = &sc->entries[i];
    bool same = true;
    for (uint32_t k = 0; k < sc->n_syms && same; k++) same = !(e->mask >> k & 1u) || e->values[k] == vals[k];
    if (!same) continue;
    if (e->mask == full_mask(sc)) return e;
    if (!split) split = e;
  }
  return split;
}

/* Marks a compile on the trace's host lane ("specialize partition_7 seq=1 past_len=7"). */
static void trace_compile(mx_session *s, const mx_rt_call *c, const mx_spec_call *sc, const int64_t *vals,
                          uint32_t mask, uint64_t start_ns, uint64_t end_ns) {
  mx_trace *t = &s->trace;
  if (!t->on) return;
  char label[sizeof t->host[0].label];
  int w = snprintf(label, sizeof label, "specialize %s", c->name);
  for (uint32_t k = 0; k < sc->n_syms && w > 0 && (size_t)w < sizeof label; k++)
    if (mask >> k & 1u)
      w += snprintf(label + w, sizeof label - (size_t)w, " %s=%lld",
                    mx_symtab_symbol_name(s->prog->root->syms, sc->syms[k]), (long long)vals[k]);
  pthread_mutex_lock(&t->lock);
  if (MX_GROW(t->host, t->cap_host, t->n_host + 1)) {
    mx_trace_slice *sl = &t->host[t->n_host++];
    sl->start_ns = start_ns;
    sl->end_ns = end_ns;
    sl->lane = 0;
    sl->kernel = UINT16_MAX;
    memcpy(sl->label, label, sizeof sl->label);
  } else {
    t->dropped++;
  }
  pthread_mutex_unlock(&t->lock);
}

static mx_spec_entry *insert_entry(mx_session *s, mx_program *p, uint32_t ci, const int64_t *vals,
                                   uint32_t mask, mx_static_model *model, mx_spec_split *split,
                                   bool declared);

/* Compiles call c for vals and puts it in the cache (evicting the least recently used entry,
 * declared gears last). NULL with *permanent false: a fault, the step fails. */
static mx_spec_entry *add_entry(mx_session *s, mx_program *p, uint32_t ci, const int64_t *vals, uint32_t mask,
                                bool declared, bool *permanent, mx_error *err) {
  mx_spec_state *ss = p->spec;
  mx_spec_call *sc = &ss->calls[ci];
  mx_rt_call *c = &p->calls[ci];
  size_t n_syms = mx_symtab_symbol_count(p->root->syms);
  int64_t *all = malloc((n_syms ? n_syms : 1) * sizeof *all);
  if (!all) {
    *permanent = false;
    mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory specializing '%s'", c->name);
    return NULL;
  }
  for (size_t k = 0; k < n_syms; k++) all[k] = INT64_MIN;
  for (uint32_t k = 0; k < sc->n_syms; k++)
    if (mask >> k & 1u) all[sc->syms[k]] = vals[k];
  uint64_t t0 = mx__now_ns();
  mx_static_model *model = NULL;
  mx_spec_split *split = NULL;
  /* A call with padded values (states appended in place) gets split ones only, even with every
   * symbol bound: their ops must run dynamically, reading the padding as strides. */
  mx_status st = mask == full_mask(sc) && !sc->n_padded
                     ? mx__spec_compile(s, p, c, all, n_syms, &model, permanent, err)
                     : mx__spec_compile_split(s, p, c, sc->syms, sc->n_syms, full_mask(sc) & ~mask, all,
                                              n_syms, &split, permanent, err);
  free(all);
  uint64_t t1 = mx__now_ns();
  ss->count.compile_ns += t1 - t0;
  trace_compile(s, c, sc, vals, mask, t0, t1);
  if (st != MX_OK) return NULL;
  ss->count.compiles++;
  return insert_entry(s, p, ci, vals, mask, model, split, declared);
}

/* Puts a compiled (or restored) specialization into call ci's cache, evicting the least
 * recently used entry when it is full (declared gears last). */
static mx_spec_entry *insert_entry(mx_session *s, mx_program *p, uint32_t ci, const int64_t *vals,
                                   uint32_t mask, mx_static_model *model, mx_spec_split *split,
                                   bool declared) {
  mx_spec_state *ss = p->spec;
  mx_spec_call *sc = &ss->calls[ci];
  mx_rt_call *c = &p->calls[ci];
  mx_spec_entry *e;
  if (sc->n_entries < sc->cap) {
    e = &sc->entries[sc->n_entries++];
  } else {
    e = NULL;
    for (uint32_t i = 0; i < sc->n_entries; i++) {
      mx_spec_entry *x = &sc->entries[i];
      if (!e || (e->declared && !x->declared) || (e->declared == x->declared && x->last_use < e->last_use))
        e = x;
    }
    drop_entry(s, e);
    ss->count.evictions++;
  }
  memset(e, 0, sizeof *e);
  for (uint32_t k = 0; k < sc->n_syms; k++) e->values[k] = mask >> k & 1u ? vals[k] : INT64_MIN;
  e->mask = mask;
  e->model = model;
  e->split = split;
  if (split && s->opts.log) {
    size_t st_ops = 0, dy_ops = 0;
    uint32_t st_runs = 0, dy_runs = 0;
    mx__spec_split_ops(split, &st_ops, &dy_ops, &st_runs, &dy_runs);
    char line[256];
    snprintf(
        line, sizeof line,
        "partition '%s' specialized without its churning symbols: %zu ops in %u static models, %zu ops in %u "
        "dynamic runs",
        c->name, st_ops, st_runs, dy_ops, dy_runs);
    say(s, MX_LOG_INFO, line);
  }
  e->declared = declared;
  e->last_use = ++ss->clock;
  return e;
}

/* Counts a miss against every symbol whose value no cached entry has; a symbol that has now
 * missed more often than the churn limit allows is left out of later specializations (its ops
 * stay dynamic), said once. True when a symbol churned now. */
static bool churns(mx_session *s, mx_rt_call *c, mx_spec_call *sc, const int64_t *vals) {
  uint32_t limit = s->opts.spec_churn_limit;
  bool over = false;
  for (uint32_t k = 0; k < sc->n_syms; k++) {
    if (sc->churned >> k & 1u) continue;
    bool seen = false;
    for (uint32_t i = 0; i < sc->n_entries && !seen; i++)
      seen = (sc->entries[i].mask >> k & 1u) && sc->entries[i].values[k] == vals[k];
    if (seen) continue;
    sc->misses[k]++;
    bool minor = (sc->minor >> k & 1u) && sc->misses[k] >= 2;
    if (limit && (sc->misses[k] > limit || minor)) {
      over = true;
      sc->churned |= 1u << k;
      char line[320];
      if (minor)
        snprintf(line, sizeof line,
                 "partition '%s' stays dynamic for symbol '%s': it took a second value and few of the "
                 "partition's ops depend on it",
                 c->name, mx_symtab_symbol_name(s->prog->root->syms, sc->syms[k]));
      else
        snprintf(line, sizeof line,
                 "partition '%s' stays dynamic for symbol '%s': %u new values missed its specializations "
                 "(churn limit %u)",
                 c->name, mx_symtab_symbol_name(s->prog->root->syms, sc->syms[k]), sc->misses[k], limit);
      say(s, MX_LOG_INFO, line);
    }
  }
  return over;
}

/* --- the call's own dynamic executor ----------------------------------------------------------- */

/* While specializations serve a partition its dynamic executor is not needed: releasing it
 * gives back its constants (for a CNN, a second copy of the weights). It is made again the
 * first time a step runs the partition op by op. */
static void release_dexec(mx_session *s, mx_spec_state *ss, mx_rt_call *c) {
  if (!c->dexec) return;
  mx_dyn_exec_stats ds;
  mx__dyn_exec_stats_get(c->dexec, &ds);
  ss->count.retired_launches += ds.launches;
  ss->count.retired_copies += ds.output_copies;
  if (s->async.started) mx__async_wait(s);
  mx__dyn_exec_destroy(c->dexec);
  c->dexec = NULL;
}

/* The original BindSymbols of call c, its dynamic executor made again when it was released. */
static mx_status run_dynamic(mx_exe_run *run, const mx_exe_node *n, mx_rt_call *c) {
  mx_session *s = STEP(run)->s;
  if (!c->dexec) {
    mx_status st =
        mx__dyn_exec_create(s->dev, c->dplan, s->alloc, s->streams, s->n_streams, &c->dexec, run->err);
    if (st != MX_OK) {
      mx__error_prefix(run->err, "dynamic partition '%s': ", c->name);
      return st;
    }
  }
  return original[n->kernel](run, n);
}

/* --- the wrapped kernels ---------------------------------------------------------------------- */

static mx_status w_bind(mx_exe_run *run, const mx_exe_node *n) {
  mx_step *step = STEP(run);
  mx_session *s = step->s;
  mx_program *p = s->prog;
  uint32_t ci = ATTR(n)->call;
  mx_spec_state *ss = p->spec;
  mx_spec_call *sc = &ss->calls[ci];
  sc->active = false;
  int64_t vals[MX_SPEC_MAX_SYMS];
  for (uint32_t k = 0; k < sc->n_syms; k++) {
    vals[k] = step->bindings[sc->syms[k]];
    if (vals[k] == INT64_MIN) return run_dynamic(run, n, &p->calls[ci]); /* not bound by the inputs */
  }
  mx_spec_entry *e = find_entry(sc, vals);
  if (e) {
    ss->count.hits++;
  } else {
    ss->count.misses++;
    /* A step that fails leaves the churn state as it found it (the next one starts clean). */
    uint32_t saved_misses[MX_SPEC_MAX_SYMS], saved_churned = sc->churned;
    uint64_t saved_fallbacks = ss->count.fallbacks;
    memcpy(saved_misses, sc->misses, sizeof saved_misses);
    if (!sc->disabled && churns(s, &p->calls[ci], sc, vals)) {
      ss->count.fallbacks++;
      if (sc->churned == full_mask(sc)) sc->disabled = true; /* nothing left to specialize on */
    }
    if (sc->disabled) return run_dynamic(run, n, &p->calls[ci]);
    bool permanent = false;
    mx_error cerr = {0};
    e = add_entry(s, p, ci, vals, full_mask(sc) & ~sc->churned, false, &permanent, &cerr);
    if (!e && !permanent) {
      memcpy(sc->misses, saved_misses, sizeof saved_misses);
      sc->churned = saved_churned;
      ss->count.fallbacks = saved_fallbacks;
      return mx__fail(run->err, cerr.status, "%s", cerr.message);
    }
    if (!e) {
      sc->disabled = true;
      ss->count.fallbacks++;
      char line[MX_ERROR_MESSAGE_MAX + 96];
      snprintf(line, sizeof line, "partition '%s' stays dynamic: %s", p->calls[ci].name, cerr.message);
      /* Around appended states (only the Attention in the partition) that is expected. */
      say(s, sc->n_padded ? MX_LOG_INFO : MX_LOG_WARN, line);
      return run_dynamic(run, n, &p->calls[ci]);
    }
  }
  e->last_use = ++ss->clock;
  mx_status st = run_entry(run, &p->calls[ci], e);
  if (st == MX_OK) sc->active = true;
  if (st == MX_OK && !sc->disabled) release_dexec(s, ss, &p->calls[ci]);
  return st;
}

static mx_status w_op(mx_exe_run *run, const mx_exe_node *n) {
  const mx_spec_call *sc = &STEP(run)->s->prog->spec->calls[ATTR(n)->call];
  return sc->active ? MX_OK : original[n->kernel](run, n);
}

static mx_status w_end(mx_exe_run *run, const mx_exe_node *n) {
  mx_spec_call *sc = &STEP(run)->s->prog->spec->calls[ATTR(n)->call];
  if (!sc->active) return original[n->kernel](run, n);
  sc->active = false; /* the outputs were handed over when the specialization ran */
  return MX_OK;
}

/* --- declared gears --------------------------------------------------------------------------- */

/* Parses "seq=1" or "batch=2,seq=128" into values by symbol (INT64_MIN: not given). */
static mx_status parse_gear(const mx_program *p, const char *gear, int64_t *all, size_t n_syms,
                            mx_error *err) {
  for (size_t k = 0; k < n_syms; k++) all[k] = INT64_MIN;
  const char *at = gear;
  while (at && *at) {
    const char *eq = strchr(at, '='), *comma = strchr(at, ',');
    if (!comma) comma = at + strlen(at);
    if (!eq || eq > comma || eq == at)
      return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "gear '%s': expected name=value[,name=value...]", gear);
    char name[128];
    size_t len = (size_t)(eq - at);
    if (len >= sizeof name)
      return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "gear '%s': symbol name too long", gear);
    memcpy(name, at, len);
    name[len] = '\0';
    char *end = NULL;
    long long v = strtoll(eq + 1, &end, 10);
    if (end != comma || v < 0)
      return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "gear '%s': the value of '%s' is not a size", gear, name);
    int64_t sym = mx_sym_symbol_index(p->root->syms, mx_sym_lookup(p->root->syms, name));
    if (sym < 0 || (size_t)sym >= n_syms)
      return mx__fail(err, MX_ERR_NOT_FOUND, "gear '%s': the model has no symbol '%s'", gear, name);
    all[sym] = v;
    at = *comma ? comma + 1 : comma;
  }
  return MX_OK;
}

static mx_status compile_gears(mx_session *s, mx_program *p, mx_error *err) {
  size_t n_syms = mx_symtab_symbol_count(p->root->syms);
  int64_t *all = malloc((n_syms ? n_syms : 1) * sizeof *all);
  if (!all) return mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory compiling gears");
  mx_status st = MX_OK;
  for (size_t gi = 0; gi < s->opts.n_gears && st == MX_OK; gi++) {
    st = parse_gear(p, s->gears[gi], all, n_syms, err);
    size_t used = 0;
    for (size_t ci = 0; ci < p->spec->n_calls && st == MX_OK; ci++) {
      mx_spec_call *sc = &p->spec->calls[ci];
      if (!sc->specializable || sc->disabled) continue;
      /* A gear binding some of the partition's symbols gives a split specialization: the ops
       * over the others stay dynamic. */
      int64_t vals[MX_SPEC_MAX_SYMS];
      uint32_t mask = 0;
      for (uint32_t k = 0; k < sc->n_syms; k++)
        if ((vals[k] = all[sc->syms[k]]) != INT64_MIN) mask |= 1u << k;
      if (!mask) continue;
      bool exists = false;
      for (uint32_t i = 0; i < sc->n_entries && !exists; i++) {
        const mx_spec_entry *x = &sc->entries[i];
        exists = x->mask == mask;
        for (uint32_t k = 0; k < sc->n_syms && exists; k++)
          exists = !(mask >> k & 1u) || x->values[k] == vals[k];
      }
      if (exists) continue;
      bool permanent = false;
      if (add_entry(s, p, (uint32_t)ci, vals, mask, true, &permanent, err)) {
        used++;
      } else if (permanent) {
        sc->disabled = true;
        char line[MX_ERROR_MESSAGE_MAX + 96];
        snprintf(line, sizeof line, "partition '%s' stays dynamic: %s", p->calls[ci].name, err->message);
        say(s, MX_LOG_WARN, line);
        mx_error_clear(err);
      } else {
        st = err->status;
      }
    }
    if (st == MX_OK) {
      char line[256];
      snprintf(line, sizeof line, "gear '%s': %zu partition%s specialized at load", s->gears[gi], used,
               used == 1 ? "" : "s");
      say(s, MX_LOG_INFO, line);
    }
  }
  free(all);
  return st;
}

/* --- declared gears in .mxm files ------------------------------------------------------------- */

/* "<call>@<symbol>=<value>,..." for entry e of call ci. False when it does not fit. */
static bool gear_plan_name(const mx_program *p, uint32_t ci, const mx_spec_entry *e, char *name, size_t cap) {
  const mx_spec_call *sc = &p->spec->calls[ci];
  int w = snprintf(name, cap, "%s@", p->calls[ci].name);
  for (uint32_t k = 0; k < sc->n_syms && w > 0 && (size_t)w < cap; k++)
    w += snprintf(name + w, cap - (size_t)w, "%s%s=%lld", k ? "," : "",
                  mx_symtab_symbol_name(p->root->syms, sc->syms[k]), (long long)e->values[k]);
  return w > 0 && (size_t)w < cap;
}

bool mx__spec_is_gear_plan(const mx_static_plan *plan) {
  return plan && strchr(mx__static_plan_name(plan), '@') != NULL;
}

mx_status mx__spec_gear_plans(mx_session *s, mx_program *p, mx_static_plan ***plans, size_t *n_plans,
                              mx_error *err) {
  *plans = NULL;
  *n_plans = 0;
  mx_spec_state *ss = p->spec;
  if (!ss || !ss->calls) return MX_OK;
  size_t cap = 0, n_syms = mx_symtab_symbol_count(p->root->syms);
  for (size_t ci = 0; ci < ss->n_calls; ci++) cap += ss->calls[ci].n_entries;
  if (!cap) return MX_OK;
  mx_static_plan **out = calloc(cap, sizeof *out);
  int64_t *all = malloc((n_syms ? n_syms : 1) * sizeof *all);
  mx_status st = out && all ? MX_OK : mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory saving gears");
  size_t n = 0;
  for (size_t ci = 0; ci < ss->n_calls && st == MX_OK; ci++) {
    const mx_spec_call *sc = &ss->calls[ci];
    for (uint32_t i = 0; i < sc->n_entries && st == MX_OK; i++) {
      const mx_spec_entry *e = &sc->entries[i];
      /* Whole static models of declared gears only: a split one holds dynamic runs. */
      if (!e->declared || !e->model || e->mask != full_mask(sc)) continue;
      char name[256];
      if (!gear_plan_name(p, (uint32_t)ci, e, name, sizeof name)) continue;
      for (size_t k = 0; k < n_syms; k++) all[k] = INT64_MIN;
      for (uint32_t k = 0; k < sc->n_syms; k++) all[sc->syms[k]] = e->values[k];
      bool permanent = false;
      st = mx__spec_plan(s, p, &p->calls[ci], all, n_syms, name, &out[n], &permanent, err);
      if (st == MX_OK) n++;
    }
  }
  free(all);
  if (st != MX_OK) {
    for (size_t i = 0; i < n; i++) mx__static_plan_destroy(out[i]);
    free(out);
    return st;
  }
  *plans = out;
  *n_plans = n;
  return MX_OK;
}

mx_status mx__spec_stash_plans(mx_program *p, mx_static_plan **plans, size_t n_plans, mx_error *err) {
  if (!n_plans) return MX_OK;
  if (!p->spec && !(p->spec = calloc(1, sizeof *p->spec)))
    return mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory loading gears");
  mx_spec_state *ss = p->spec;
  mx_static_plan **grown = realloc(ss->stored, (ss->n_stored + n_plans) * sizeof *grown);
  if (!grown) return mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory loading gears");
  ss->stored = grown;
  for (size_t i = 0; i < n_plans; i++) {
    ss->stored[ss->n_stored++] = plans[i];
    plans[i] = NULL;
  }
  return MX_OK;
}

static void free_stored(mx_spec_state *ss) {
  for (size_t i = 0; i < ss->n_stored; i++) mx__static_plan_destroy(ss->stored[i]);
  free(ss->stored);
  ss->stored = NULL;
  ss->n_stored = 0;
}

/* Loads the gear plans the .mxm held into their calls' caches (declared entries, no compile).
 * A plan that names no specializable call or not all of its symbols is dropped. */
static mx_status load_stored(mx_session *s, mx_program *p, mx_error *err) {
  mx_spec_state *ss = p->spec;
  size_t n_syms = mx_symtab_symbol_count(p->root->syms);
  int64_t *all = malloc((n_syms ? n_syms : 1) * sizeof *all);
  if (!all) return mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory loading gears");
  mx_status st = MX_OK;
  size_t restored = 0;
  for (size_t i = 0; i < ss->n_stored && st == MX_OK; i++) {
    const char *name = mx__static_plan_name(ss->stored[i]), *at = strchr(name, '@');
    size_t ci = 0;
    while (ci < p->n_calls && (strncmp(p->calls[ci].name, name, (size_t)(at - name)) != 0 ||
                               p->calls[ci].name[at - name] != '\0'))
      ci++;
    if (ci == p->n_calls || !ss->calls[ci].specializable) continue;
    mx_error perr = {0};
    if (parse_gear(p, at + 1, all, n_syms, &perr) != MX_OK) continue;
    mx_spec_call *sc = &ss->calls[ci];
    int64_t vals[MX_SPEC_MAX_SYMS];
    bool whole = true;
    for (uint32_t k = 0; k < sc->n_syms; k++) whole = whole && (vals[k] = all[sc->syms[k]]) != INT64_MIN;
    if (!whole || find_entry(sc, vals)) continue;
    mx_static_load_options lo;
    mx__static_load_options_init(&lo);
    lo.share_weights = !s->opts.private_weights;
    mx_static_model *model = NULL;
    st = mx__static_model_create(s->dev, ss->stored[i], &lo, &model, err);
    if (st != MX_OK) break;
    if (!insert_entry(s, p, (uint32_t)ci, vals, full_mask(sc), model, NULL, true)) {
      mx__static_model_destroy(model);
      st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory loading gears");
      break;
    }
    restored++;
    char line[320];
    snprintf(line, sizeof line, "gear '%s' of partition '%s' restored from the file", at + 1,
             p->calls[ci].name);
    say(s, MX_LOG_INFO, line);
  }
  free(all);
  free_stored(ss); /* loaded or dropped: the models keep nothing of the plans */
  (void)restored;
  return st;
}

/* --- install / release / account -------------------------------------------------------------- */

/* A symbol is minor when at most a quarter of the body's ops have dims over it while another
 * symbol is not: leaving it out of the specializations keeps most of the body static, so
 * compiling models for its values first gains little (the decode loop's past_len). */
static void mark_minor(const mx_graph *body, mx_spec_call *sc) {
  sc->minor = 0;
  if (sc->n_syms < 2) return;
  for (uint32_t k = 0; k < sc->n_syms; k++) {
    size_t live = 0, used = mx__spec_ops_using(body, sc->syms, sc->n_syms, 1u << k, &live);
    if (live && 4 * used <= live) sc->minor |= 1u << k;
  }
  if (sc->minor == full_mask(sc)) sc->minor = 0;
}

mx_status mx__spec_install(mx_session *s, mx_program *p, mx_error *err) {
  if (p->interpreted || !s->opts.spec_cache_size || s->opts.static_min_ops < 0) {
    if (p->spec) free_stored(p->spec); /* gears of an .mxm: not used with specialization off */
    return MX_OK;
  }
  pthread_once(&once, find_originals);
  const mx_graph *root = p->root;
  size_t n_kinds = mx_symtab_symbol_count(root->syms);
  uint8_t *kinds = malloc(n_kinds ? n_kinds : 1);
  /* An .mxm's gear plans made the state already. */
  mx_spec_state *ss = p->spec ? p->spec : calloc(1, sizeof *ss);
  if (ss && !ss->calls) ss->calls = calloc(p->n_calls ? p->n_calls : 1, sizeof *ss->calls);
  if (!kinds || !ss || !ss->calls) {
    free(kinds);
    if (ss && ss != p->spec) {
      free(ss->calls);
      free(ss);
    }
    return mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory preparing specialization");
  }
  ss->n_calls = p->n_calls;
  p->spec = ss;
  mx__spec_symbol_kinds(root, kinds, n_kinds);
  size_t n_spec = 0;
  for (size_t ci = 0; ci < p->n_calls; ci++) {
    mx_rt_call *c = &p->calls[ci];
    mx_spec_call *sc = &ss->calls[ci];
    if (!c->unknown) continue;
    mx_graph *body = mx__part_call_body(&root->nodes[c->node]);
    if (!body || body->syms != root->syms) continue;
    mx_spec_info info;
    mx__spec_analyze(body, NULL, 0, kinds, n_kinds, &info);
    if (!info.specializable) continue;
    sc->entries = calloc(s->opts.spec_cache_size, sizeof *sc->entries);
    if (!sc->entries) {
      free(kinds);
      return mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory preparing specialization");
    }
    sc->specializable = true;
    sc->cap = s->opts.spec_cache_size;
    sc->n_syms = info.n_syms;
    memcpy(sc->syms, info.syms, sizeof sc->syms);
    mark_minor(body, sc);
    n_spec++;
  }
  free(kinds);
  if (!n_spec) {
    free_stored(ss);
    return MX_OK;
  }
  /* The wrappers: the call's nodes run their own kernels unless a specialization serves. */
  for (uint32_t i = 0; i < p->main.n_nodes; i++) {
    mx_exe_node *nd = &p->main.nodes[i];
    if (!nd->attr || nd->attr_size < sizeof(mx_kattr)) continue;
    uint32_t ci = ATTR(nd)->call;
    if (ci >= p->n_calls || !ss->calls[ci].specializable) continue;
    if (nd->kernel == k_bind)
      nd->fn = w_bind;
    else if (nd->kernel == k_end)
      nd->fn = w_end;
    else if (is_per_op(mx__exe_kernel_at(nd->kernel)->name))
      nd->fn = w_op;
  }
  if (s->opts.log) {
    char line[160];
    snprintf(line, sizeof line, "%zu dynamic partition%s specializable", n_spec,
             n_spec == 1 ? " is" : "s are");
    say(s, MX_LOG_INFO, line);
  }
  mx_status st = load_stored(s, p, err);
  return st == MX_OK ? compile_gears(s, p, err) : st;
}

void mx__spec_release(mx_session *s, mx_program *p) {
  mx_spec_state *ss = p->spec;
  if (!ss) return;
  for (size_t ci = 0; ci < ss->n_calls; ci++) {
    for (uint32_t i = 0; i < ss->calls[ci].n_entries; i++) {
      mx__static_model_destroy(ss->calls[ci].entries[i].model);
      mx__spec_split_destroy(ss->calls[ci].entries[i].split);
    }
    free(ss->calls[ci].entries);
    free(ss->calls[ci].padded);
  }
  (void)s;
  free_stored(ss);
  free(ss->calls);
  free(ss);
  p->spec = NULL;
}

void mx__spec_account(mx_session *s, mx_session_stats *l, mx_session_stats *t) {
  const mx_spec_state *ss = s->prog ? s->prog->spec : NULL;
  if (!ss) return;
  const mx_spec_counters *c = &ss->count;
  l->spec_hits = c->hits - t->spec_hits;
  l->spec_misses = c->misses - t->spec_misses;
  l->spec_compiles = c->compiles - t->spec_compiles;
  l->spec_evictions = c->evictions - t->spec_evictions;
  l->spec_compile_ns = c->compile_ns - t->spec_compile_ns;
  l->spec_fallbacks = c->fallbacks - t->spec_fallbacks;
  t->spec_hits = c->hits;
  t->spec_misses = c->misses;
  t->spec_compiles = c->compiles;
  t->spec_evictions = c->evictions;
  t->spec_compile_ns = c->compile_ns;
  t->spec_fallbacks = c->fallbacks;
  /* The caller set the total to the calls' executors' launches and the step's to that less the
   * previous total (which held the split runs' launches until then): adding the split runs'
   * cumulative launches to both gives each its share. */
  l->dynamic_launches += c->launches + c->retired_launches;
  t->dynamic_launches += c->launches + c->retired_launches;
  l->output_copies += c->retired_copies;
  t->output_copies += c->retired_copies;
}
