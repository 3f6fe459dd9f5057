/* Split specializations (spec.h): when some of a partition's symbols churn (past_len in a
 * decode loop), the partition is specialized on the others only. Its body is cut into runs,
 * consecutive in a topological order that keeps ops of one kind together: ops whose shapes
 * involve a churned symbol form dynamic runs (a dynamic plan over a copy of those ops with the
 * other symbols bound), every other run becomes a static model compiled for the binding. A step
 * runs the runs in order on the call's stream, passing values between them through the
 * session's allocator. Attention over a growing cache stays dynamic; the projections and the MLP
 * around it run as static models.
 *
 * States appended in place (state_append.c) are padded values of the call: every op reading
 * their rows or writing their next value joins the dynamic runs whatever the symbols do, and
 * those runs get the padding as strides and write the next value into the state's buffer, as
 * the call's own dynamic executor does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "partitioner/partitioner.h"
#include "v2runtime/spec.h"

typedef struct spec_run {
  bool dynamic;
  mx_graph *g;            /* the run's graph (owned; a dynamic plan borrows it) */
  mx_static_model *model; /* static run (owned) */
  mx_dyn_plan *dplan;     /* dynamic run (owned) */
  mx_dyn_exec *dexec;     /* (owned) */
  uint32_t n_in, n_out;
  mx_value_id *in, *out; /* body values it reads / gives (malloc'd) */
  bool *as_const;        /* by input: made a constant of the run (a shape value the binding
                               gives), so not fed (malloc'd) */
  mx_tensor *args_in, *args_out;
  bool *in_place; /* by output: written into a padded state's buffer this step (malloc'd) */
  size_t n_ops;   /* body ops in it */
} spec_run;

struct mx_spec_split {
  spec_run *runs;
  uint32_t n_runs;
  size_t n_values;    /* body values */
  mx_tensor *vals;    /* by body value: this step's tensor (malloc'd) */
  bool *owned;        /*   an allocator block the split frees */
  uint32_t *last_run; /*   last run reading it; UINT32_MAX: a call output (handed over) */
  size_t static_ops, dynamic_ops;
};

void mx__spec_split_destroy(mx_spec_split *sp) {
  if (!sp) return;
  for (uint32_t r = 0; r < sp->n_runs; r++) {
    spec_run *x = &sp->runs[r];
    mx__static_model_destroy(x->model);
    mx__dyn_exec_destroy(x->dexec);
    mx__dyn_plan_destroy(x->dplan);
    mx_graph_destroy(x->g);
    free(x->in);
    free(x->out);
    free(x->as_const);
    free(x->args_in);
    free(x->args_out);
    free(x->in_place);
  }
  free(sp->runs);
  free(sp->vals);
  free(sp->owned);
  free(sp->last_run);
  free(sp);
}

void mx__spec_split_ops(const mx_spec_split *sp, size_t *static_ops, size_t *dynamic_ops,
                        uint32_t *static_runs, uint32_t *dynamic_runs) {
  *static_ops = sp->static_ops;
  *dynamic_ops = sp->dynamic_ops;
  *static_runs = *dynamic_runs = 0;
  for (uint32_t r = 0; r < sp->n_runs; r++) {
    if (sp->runs[r].dynamic)
      ++*dynamic_runs;
    else
      ++*static_runs;
  }
}

/* True when dim d uses a symbol whose bit is set in `churned` (bits index syms[]). */
static bool uses(const mx_symtab *t, mx_dim d, const uint32_t *syms, uint32_t n_syms, uint32_t churned) {
  if (!mx_dim_is_expr(d)) return false;
  uint32_t idx[16];
  size_t k = mx_sym_symbols_of(t, d, idx, 16);
  for (size_t i = 0; i < k && i < 16; i++)
    for (uint32_t q = 0; q < n_syms; q++)
      if ((churned >> q & 1u) && syms[q] == idx[i]) return true;
  return false;
}

/* True when v's dims use a churned symbol, or (with_sv) its symbolic value does. */
static bool value_uses(const mx_graph *g, mx_value_id v, const uint32_t *syms, uint32_t n_syms,
                       uint32_t churned, bool with_sv) {
  const mx_value *val = &g->values[v];
  for (int32_t k = 0; k < val->shape.rank; k++)
    if (uses(g->syms, val->shape.dims[k], syms, n_syms, churned)) return true;
  for (int32_t k = 0; with_sv && val->sv && k < val->sv_len; k++)
    if (uses(g->syms, val->sv[k], syms, n_syms, churned)) return true;
  return false;
}

/* True when node n of body must run dynamically under `churned`: a dim of an input or output
 * uses a churned symbol. By default a value whose *contents* merely depend on one (past_len
 * read by Shape and added to the positions) is fed to a static model like any other tensor;
 * with_sv also counts those, for bodies whose static stretches cannot do without the value's
 * symbolic form (a Reshape whose target it gives). */
static bool node_uses(const mx_graph *body, mx_node_id n, const uint32_t *syms, uint32_t n_syms,
                      uint32_t churned, bool with_sv) {
  const mx_node *nd = &body->nodes[n];
  for (uint32_t k = 0; k < nd->n_inputs; k++)
    if (nd->inputs[k] != MX_NO_VALUE && value_uses(body, nd->inputs[k], syms, n_syms, churned, with_sv))
      return true;
  for (uint32_t k = 0; k < nd->n_outputs; k++)
    if (value_uses(body, nd->outputs[k], syms, n_syms, churned, with_sv)) return true;
  return false;
}

size_t mx__spec_ops_using(const mx_graph *body, const uint32_t *syms, uint32_t n_syms, uint32_t which,
                          size_t *n_live) {
  size_t used = 0, live = 0;
  for (size_t n = 0; n < body->n_nodes; n++) {
    if (body->nodes[n].flags & MX_NODE_DEAD) continue;
    live++;
    if (node_uses(body, (mx_node_id)n, syms, n_syms, which, false)) used++;
  }
  if (n_live) *n_live = live;
  return used;
}

/* True when node n reads or writes one of the call's padded values (a state appended in place). */
static bool touches_padded(const mx_graph *body, mx_node_id n, const mx_spec_call *sc) {
  const mx_node *nd = &body->nodes[n];
  for (uint32_t i = 0; i < sc->n_padded; i++) {
    for (uint32_t k = 0; k < nd->n_inputs; k++)
      if (nd->inputs[k] == sc->padded[i]) return true;
    for (uint32_t k = 0; k < nd->n_outputs; k++)
      if (nd->outputs[k] == sc->padded[i]) return true;
  }
  return false;
}

/* Order of the body's live nodes: topological, continuing with the kind (dynamic or not) of the
 * last node taken while one is ready, so runs are as long as they can be. */
static mx_status order_by_kind(const mx_graph *body, const uint8_t *dyn, mx_node_id *order, size_t *n_order) {
  size_t nn = body->n_nodes;
  uint32_t *indeg = calloc(nn ? nn : 1, sizeof *indeg);
  mx_node_id *ready[2];
  size_t n_ready[2] = {0, 0};
  ready[0] = malloc((nn ? nn : 1) * sizeof **ready);
  ready[1] = malloc((nn ? nn : 1) * sizeof **ready);
  if (!indeg || !ready[0] || !ready[1]) {
    free(indeg);
    free(ready[0]);
    free(ready[1]);
    return MX_ERR_OUT_OF_MEMORY;
  }
  size_t live = 0;
  for (size_t n = 0; n < nn; n++) {
    const mx_node *nd = &body->nodes[n];
    if (nd->flags & MX_NODE_DEAD) continue;
    live++;
    for (uint32_t k = 0; k < nd->n_inputs; k++) {
      mx_value_id v = nd->inputs[k];
      if (v != MX_NO_VALUE && body->values[v].producer != MX_NO_NODE) indeg[n]++;
    }
  }
  for (size_t n = 0; n < nn; n++)
    if (!(body->nodes[n].flags & MX_NODE_DEAD) && !indeg[n]) ready[dyn[n]][n_ready[dyn[n]]++] = (mx_node_id)n;
  size_t done = 0;
  int kind = n_ready[0] ? 0 : 1;
  while (n_ready[0] || n_ready[1]) {
    if (!n_ready[kind]) kind = 1 - kind;
    /* Smallest id first among the ready nodes of the kind (stable across runs). */
    size_t best = 0;
    for (size_t i = 1; i < n_ready[kind]; i++)
      if (ready[kind][i] < ready[kind][best]) best = i;
    mx_node_id n = ready[kind][best];
    ready[kind][best] = ready[kind][--n_ready[kind]];
    order[done++] = n;
    const mx_node *nd = &body->nodes[n];
    for (uint32_t k = 0; k < nd->n_outputs; k++) {
      const mx_value *v = &body->values[nd->outputs[k]];
      for (size_t c = 0; c < v->n_consumers; c++) {
        mx_node_id m = v->consumers[c];
        if (body->nodes[m].flags & MX_NODE_DEAD) continue;
        if (--indeg[m] == 0) ready[dyn[m]][n_ready[dyn[m]]++] = m;
      }
    }
  }
  free(indeg);
  free(ready[0]);
  free(ready[1]);
  *n_order = done;
  return done == live ? MX_OK : MX_ERR_INVALID_GRAPH;
}

/* Builds and loads run x of the split over nodes[0..n). */
static mx_status build_run(mx_session *s, mx_program *p, const mx_rt_call *c, mx_graph *body, spec_run *x,
                           const mx_node_id *nodes, size_t n, const int64_t *values, size_t n_values,
                           mx_error *err) {
  const mx_symtab *syms = p->root->syms;
  x->as_const = calloc(x->n_in ? x->n_in : 1, sizeof *x->as_const);
  if (!x->as_const) return mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory splitting '%s'", c->name);
  mx_status st = mx__spec_copy_nodes(body, nodes, n, x->in, x->n_in, x->out, x->n_out, syms, values, n_values,
                                     x->dynamic, x->as_const, &x->g, err);
  if (st != MX_OK) return st;
  if (x->dynamic) {
    /* The bound symbols by value; the churned ones stay symbols of the copy. */
    mx_symtab *own = mx_graph_symtab(x->g);
    for (size_t q = 0; q < n_values && st == MX_OK; q++) {
      if (values[q] == INT64_MIN) continue;
      const char *name = mx_symtab_symbol_name(syms, q);
      if (mx_sym_lookup(own, name) == MX_DIM_UNKNOWN) continue;
      st = mx_graph_bind_symbol(x->g, name, values[q]);
      if (st != MX_OK) return mx__fail(err, st, "%s", mx_graph_last_error(x->g));
    }
    st = mx__spec_concretize(x->g, err);
    mx_dyn_options dopt;
    mx__dyn_options_init(&dopt);
    dopt.max_streams = s->n_streams;
    dopt.share_constants = !s->opts.private_weights;
    if (st == MX_OK) st = mx__dyn_plan_create(x->g, &dopt, &x->dplan, err);
    if (st == MX_OK)
      st = mx__dyn_exec_create(s->dev, x->dplan, s->alloc, s->streams, s->n_streams, &x->dexec, err);
    return st;
  }
  st = mx__spec_concretize(x->g, err);
  if (st != MX_OK) return st;
  mx_static_options so;
  mx__static_options_init(&so);
  so.max_streams = s->n_streams;
  so.name = c->name;
  mx_static_plan *plan = NULL;
  st = mx__static_compile(x->g, &so, &plan, err);
  if (st == MX_OK) {
    mx_static_load_options lo;
    mx__static_load_options_init(&lo);
    lo.share_weights = !s->opts.private_weights;
    st = mx__static_model_create(s->dev, plan, &lo, &x->model, err);
  }
  mx__static_plan_destroy(plan);
  mx_graph_destroy(x->g); /* a static model keeps nothing of its graph */
  x->g = NULL;
  return st;
}

static mx_status compile_split(mx_session *s, mx_program *p, const mx_rt_call *c, const uint32_t *syms,
                               uint32_t n_syms, uint32_t churned, const int64_t *values, size_t n_values,
                               bool with_sv, mx_spec_split **out, bool *permanent, mx_error *err) {
  *out = NULL;
  *permanent = false;
  mx_graph *body = mx__part_call_body(&p->root->nodes[c->node]);
  size_t nn = body->n_nodes, nv = body->n_values;
  uint8_t *dyn = calloc(nn ? nn : 1, 1);
  mx_node_id *order = malloc((nn ? nn : 1) * sizeof *order);
  uint32_t *run_of = malloc((nn ? nn : 1) * sizeof *run_of);
  mx_spec_split *sp = calloc(1, sizeof *sp);
  mx_status st = MX_OK;
  if (!dyn || !order || !run_of || !sp) goto oom;
  sp->n_values = nv;
  sp->vals = calloc(nv ? nv : 1, sizeof *sp->vals);
  sp->owned = calloc(nv ? nv : 1, sizeof *sp->owned);
  sp->last_run = malloc((nv ? nv : 1) * sizeof *sp->last_run);
  if (!sp->vals || !sp->owned || !sp->last_run) goto oom;
  const mx_spec_call *sc = p->spec ? &p->spec->calls[c - p->calls] : NULL;
  for (size_t n = 0; n < nn; n++) {
    if (body->nodes[n].flags & MX_NODE_DEAD) continue;
    dyn[n] = node_uses(body, (mx_node_id)n, syms, n_syms, churned, with_sv) ||
             (sc && touches_padded(body, (mx_node_id)n, sc));
  }
  size_t n_order = 0;
  st = order_by_kind(body, dyn, order, &n_order);
  if (st != MX_OK) {
    st = mx__fail(err, st, "ordering the body of '%s' failed", c->name);
    goto fail;
  }
  /* Runs: maximal stretches of one kind; static stretches smaller than static_min_ops join the
   * dynamic ops around them (a static model that small costs more to launch than it saves). */
  size_t min_ops = s->opts.static_min_ops > 0 ? (size_t)s->opts.static_min_ops : 1;
  for (size_t i = 0; i < n_order;) {
    size_t j = i;
    while (j < n_order && dyn[order[j]] == dyn[order[i]]) j++;
    if (!dyn[order[i]] && j - i < min_ops && !(i == 0 && j == n_order))
      for (size_t q = i; q < j; q++) dyn[order[q]] = 1;
    i = j;
  }
  /* Around padded states a split with nothing static would only repeat the call's own dynamic
   * executor: the call stays dynamic. */
  bool any_static = false;
  for (size_t i = 0; i < n_order && !any_static; i++) any_static = !dyn[order[i]];
  if (sc && sc->n_padded && !any_static) {
    st = mx__fail(err, MX_ERR_UNSUPPORTED, "no op around its appended states can run in a static model");
    *permanent = true;
    goto fail;
  }
  uint32_t n_runs = 0;
  for (size_t i = 0; i < n_order; i++) {
    if (i == 0 || dyn[order[i]] != dyn[order[i - 1]]) n_runs++;
    run_of[order[i]] = n_runs - 1;
  }
  sp->runs = calloc(n_runs ? n_runs : 1, sizeof *sp->runs);
  if (!sp->runs) goto oom;
  sp->n_runs = n_runs;
  /* Each run's inputs (values produced outside it, constants excepted) and outputs (values read
   * by a later run or given by the call). */
  for (size_t v = 0; v < nv; v++) sp->last_run[v] = 0;
  for (size_t i = 0, first = 0; i <= n_order; i++) {
    if (i < n_order && (i == 0 || run_of[order[i]] == run_of[order[i - 1]])) continue;
    uint32_t r = run_of[order[first]];
    spec_run *x = &sp->runs[r];
    x->dynamic = dyn[order[first]];
    x->n_ops = i - first;
    if (x->dynamic)
      sp->dynamic_ops += x->n_ops;
    else
      sp->static_ops += x->n_ops;
    x->in = malloc((nv ? nv : 1) * sizeof *x->in);
    x->out = malloc((nv ? nv : 1) * sizeof *x->out);
    if (!x->in || !x->out) goto oom;
    for (size_t q = first; q < i; q++) {
      const mx_node *nd = &body->nodes[order[q]];
      for (uint32_t k = 0; k < nd->n_inputs; k++) {
        mx_value_id v = nd->inputs[k];
        if (v == MX_NO_VALUE || body->values[v].data) continue;
        mx_node_id pr = body->values[v].producer;
        if (pr != MX_NO_NODE && run_of[pr] == r) continue;
        bool seen = false;
        for (uint32_t e = 0; e < x->n_in && !seen; e++) seen = x->in[e] == v;
        if (!seen) x->in[x->n_in++] = v;
        if (sp->last_run[v] != UINT32_MAX && sp->last_run[v] < r) sp->last_run[v] = r;
      }
      for (uint32_t k = 0; k < nd->n_outputs; k++) {
        mx_value_id v = nd->outputs[k];
        bool needed = false;
        for (size_t u = 0; u < body->values[v].n_consumers && !needed; u++) {
          mx_node_id m = body->values[v].consumers[u];
          needed = !(body->nodes[m].flags & MX_NODE_DEAD) && run_of[m] != r;
        }
        for (size_t o = 0; o < body->n_outputs && !needed; o++) needed = body->outputs[o] == v;
        if (needed) x->out[x->n_out++] = v;
      }
    }
    x->args_in = calloc(x->n_in ? x->n_in : 1, sizeof *x->args_in);
    x->args_out = calloc(x->n_out ? x->n_out : 1, sizeof *x->args_out);
    x->in_place = calloc(x->n_out ? x->n_out : 1, sizeof *x->in_place);
    if (!x->args_in || !x->args_out || !x->in_place) goto oom;
    first = i;
  }
  for (size_t o = 0; o < body->n_outputs; o++) {
    mx_value_id v = body->outputs[o];
    if (body->values[v].data ||
        (body->values[v].producer == MX_NO_NODE && !(body->values[v].flags & MX_VALUE_INPUT))) {
      st = mx__fail(err, MX_ERR_UNSUPPORTED, "output '%s' is a constant of the body", body->values[v].name);
      *permanent = true;
      goto fail;
    }
    sp->last_run[v] = UINT32_MAX;
  }
  /* Build the runs in order (the nodes of run r are the stretch of `order` it covers). */
  for (size_t i = 0, first = 0; i <= n_order && st == MX_OK; i++) {
    if (i < n_order && (i == 0 || run_of[order[i]] == run_of[order[i - 1]])) continue;
    spec_run *x = &sp->runs[run_of[order[first]]];
    st = build_run(s, p, c, body, x, order + first, i - first, values, n_values, err);
    first = i;
  }
  if (st != MX_OK) {
    *permanent = st != MX_ERR_OUT_OF_MEMORY && st != MX_ERR_DEVICE_OOM && st != MX_ERR_DEVICE;
    goto fail;
  }
  free(dyn);
  free(order);
  free(run_of);
  *out = sp;
  return MX_OK;
oom:
  st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory splitting '%s'", c->name);
fail:
  mx__error_prefix(err, "specializing partition '%s' (split): ", c->name);
  free(dyn);
  free(order);
  free(run_of);
  mx__spec_split_destroy(sp);
  return st;
}

mx_status mx__spec_compile_split(mx_session *s, mx_program *p, const mx_rt_call *c, const uint32_t *syms,
                                 uint32_t n_syms, uint32_t churned, const int64_t *values, size_t n_values,
                                 mx_spec_split **out, bool *permanent, mx_error *err) {
  mx_status st = compile_split(s, p, c, syms, n_syms, churned, values, n_values, false, out, permanent, err);
  if (st == MX_OK || !*permanent) return st;
  /* A static stretch needed a churned value's symbolic form: the ops reading such values join
   * the dynamic runs. */
  mx_error_clear(err);
  return compile_split(s, p, c, syms, n_syms, churned, values, n_values, true, out, permanent, err);
}

/* The step's padding of root value v (the state's input rows, or with output its next value),
 * or NULL. */
static const mx_step_pad *pad_of(const mx_step *step, mx_value_id v, bool output) {
  for (size_t q = 0; q < step->n_pads; q++)
    if (step->pads[q].value == v && step->pads[q].output == output) return &step->pads[q];
  return NULL;
}

/* Root value of call c that body value v is, as an input (output false) or output of the call;
 * MX_NO_VALUE when it is neither. */
static mx_value_id root_value(const mx_graph *body, const mx_rt_call *c, mx_value_id v, bool output,
                              uint32_t *at) {
  uint32_t n = output ? c->n_out : c->n_in;
  for (uint32_t k = 0; k < n; k++) {
    if ((output ? body->outputs[k] : body->inputs[k]) != v) continue;
    *at = k;
    return output ? c->out_values[k] : c->in_values[k];
  }
  return MX_NO_VALUE;
}

/* One step of dynamic run x (its inputs in x->args_in[0..n_fed)): the per-op steps of its
 * executor, with the padded states of the step read through their strides and their next
 * values appended in place into the states' buffers (x->args_out[j] is then that buffer). */
static mx_status run_dynamic(mx_session *s, mx_program *p, const mx_rt_call *c, spec_run *x, uint32_t n_fed,
                             mx_stream *stream, bool *in_place) {
  const mx_step *step = &s->step;
  mx_graph *body = mx__part_call_body(&p->root->nodes[c->node]);
  mx_status st = mx__dyn_step_begin(x->dexec, x->args_in, n_fed, stream);
  for (uint32_t k = 0; k < x->n_in && st == MX_OK && step->n_pads; k++) {
    uint32_t at = 0;
    mx_value_id rv = root_value(body, c, x->in[k], false, &at);
    const mx_step_pad *pad = rv == MX_NO_VALUE || x->as_const[k] ? NULL : pad_of(step, rv, false);
    if (pad) st = mx__dyn_set_input_pitch(x->dexec, body->values[x->in[k]].name, pad->axis, pad->rows);
  }
  for (uint32_t j = 0; j < x->n_out && st == MX_OK; j++) {
    in_place[j] = false;
    uint32_t at = 0;
    mx_value_id rv = step->n_pads ? root_value(body, c, x->out[j], true, &at) : MX_NO_VALUE;
    const mx_step_pad *pad = rv == MX_NO_VALUE ? NULL : pad_of(step, rv, true);
    int64_t go = pad ? p->values[rv].graph_output : -1;
    const mx_tensor *o = go >= 0 ? step->out_by_graph[go] : NULL;
    if (!pad || !o) continue;
    st = mx__dyn_bind_output_append(x->dexec, j, o, pad->axis, pad->rows);
    if (st == MX_OK) {
      x->args_out[j] = *o; /* step_end checks the dims and makes no copy */
      in_place[j] = true;
    }
  }
  size_t n_ops = mx__dyn_op_count(x->dplan);
  for (size_t i = 0; i < n_ops && st == MX_OK; i++) {
    st = mx__dyn_op_prepare(x->dexec, i);
    if (st == MX_OK) st = mx__dyn_op_launch(x->dexec, i);
    if (st == MX_OK && mx__dyn_op_needs_sync(x->dplan, i)) st = mx__dyn_op_sync_shape(x->dexec, i);
    if (st == MX_OK) mx__dyn_op_free_after(x->dexec, i);
  }
  if (st == MX_OK) st = mx__dyn_step_end(x->dexec, x->args_out, x->n_out);
  if (st != MX_OK) mx__dyn_step_abort(x->dexec);
  return st;
}

/* Gives back what a failed or finished step of the split still holds. */
static void release_values(mx_session *s, mx_spec_split *sp, mx_stream *stream) {
  for (size_t v = 0; v < sp->n_values; v++) {
    if (sp->owned[v]) mx__caching_free(s->alloc, sp->vals[v].data, stream, NULL);
    sp->owned[v] = false;
  }
}

mx_status mx__spec_split_run(mx_session *s, mx_program *p, mx_rt_call *c, mx_stream *stream,
                             mx_spec_split *sp, uint64_t *launches, mx_error *err) {
  mx_graph *body = mx__part_call_body(&p->root->nodes[c->node]);
  mx_status st = MX_OK;
  for (uint32_t k = 0; k < c->n_in; k++) {
    sp->vals[body->inputs[k]] = p->values[c->in_values[k]].t;
    sp->owned[body->inputs[k]] = false;
  }
  for (uint32_t r = 0; r < sp->n_runs && st == MX_OK; r++) {
    spec_run *x = &sp->runs[r];
    uint32_t n_fed = 0;
    for (uint32_t k = 0; k < x->n_in; k++) {
      if (x->as_const[k]) continue;
      x->args_in[n_fed] = sp->vals[x->in[k]];
      x->args_in[n_fed++].name = NULL; /* by position */
    }
    if (x->dynamic) {
      for (uint32_t j = 0; j < x->n_out; j++) {
        memset(&x->args_out[j], 0, sizeof x->args_out[j]);
        x->args_out[j].placement = MX_DEVICE;
      }
      mx_dyn_exec_stats before, after;
      mx__dyn_exec_stats_get(x->dexec, &before);
      st = run_dynamic(s, p, c, x, n_fed, stream, x->in_place);
      mx__dyn_exec_stats_get(x->dexec, &after);
      *launches += after.launches - before.launches;
      if (st != MX_OK) {
        mx__fail(err, st, "specialized partition '%s': %s", c->name, mx__dyn_exec_last_error(x->dexec));
        break;
      }
    } else {
      /* A static model reads and writes packed rows: a padded state must never reach one (the
       * split keeps its ops dynamic; a split made before the state was padded is refused). */
      for (uint32_t k = 0; k < x->n_in + x->n_out && s->step.n_pads && st == MX_OK; k++) {
        bool output = k >= x->n_in;
        uint32_t at = 0;
        mx_value_id rv = root_value(body, c, output ? x->out[k - x->n_in] : x->in[k], output, &at);
        if (rv != MX_NO_VALUE && pad_of(&s->step, rv, output))
          st = mx__fail(err, MX_ERR_INTERNAL, "specialized partition '%s': padded state '%s' in a static run",
                        c->name, p->root->values[rv].name);
      }
      if (st != MX_OK) break;
      for (uint32_t j = 0; j < x->n_out && st == MX_OK; j++) {
        mx_static_io io;
        mx__static_model_output(x->model, j, &io);
        mx_tensor *t = &x->args_out[j];
        memset(t, 0, sizeof *t);
        t->dtype = io.dtype;
        t->rank = io.rank;
        memcpy(t->dims, io.dims, sizeof io.dims);
        t->placement = MX_DEVICE;
        st = mx__caching_alloc(s->alloc, (size_t)io.nbytes, stream, &t->data, err);
        /* Owned from here, so a failure below gives it back. */
        if (st == MX_OK) {
          sp->vals[x->out[j]] = *t;
          sp->owned[x->out[j]] = t->data != NULL;
        }
      }
      if (st == MX_OK) st = mx__static_model_update_args(x->model, x->args_in, n_fed, x->args_out, x->n_out);
      if (st == MX_OK) st = mx__static_model_execute(x->model, stream);
      if (st != MX_OK) {
        mx__fail(err, st, "specialized partition '%s': %s", c->name, mx__static_model_last_error(x->model));
        break;
      }
      s->last.static_executes++;
    }
    for (uint32_t j = 0; j < x->n_out && x->dynamic; j++) {
      sp->vals[x->out[j]] = x->args_out[j];
      sp->owned[x->out[j]] = x->args_out[j].data != NULL && !x->in_place[j]; /* a state's buffer */
    }
    /* Values whose last reader was this run go back (stream-ordered). */
    for (uint32_t k = 0; k < x->n_in; k++) {
      mx_value_id v = x->in[k];
      if (sp->last_run[v] == r && sp->owned[v]) {
        mx__caching_free(s->alloc, sp->vals[v].data, stream, NULL);
        sp->owned[v] = false;
      }
    }
  }
  if (st != MX_OK) {
    release_values(s, sp, stream);
    return st;
  }
  /* The call's outputs: handed over to the root values (the first of repeated ones owns). */
  for (uint32_t j = 0; j < c->n_out; j++) {
    mx_value_id v = body->outputs[j];
    mx_rt_value *rv = &p->values[c->out_values[j]];
    rv->t = sp->vals[v];
    rv->t.name = p->root->values[c->out_values[j]].name;
    rv->owned = sp->owned[v];
    sp->owned[v] = false;
  }
  release_values(s, sp, stream);
  return MX_OK;
}
