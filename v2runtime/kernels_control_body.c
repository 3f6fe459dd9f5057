/* Control-node bodies run as programs of their own (see kernels_control.h).
 *
 * The first time a session's control op runs a body (an If branch, a Loop or Scan body), the
 * body is copied into a root graph of its own (its captures become inputs after its own,
 * partitioner/part_control_body.c) and loaded into a child session sharing the parent's device
 * and options: the root's pipeline partitions it into KNOWN / UNKNOWN clusters, a fixed-shape
 * body becomes a static model compiled once, a body with dynamic parts runs them through the
 * child's dynamic executor, and a control node nested in the body becomes a child's control op
 * in turn (its bodies children of the child). Each later run (every Loop or Scan iteration)
 * feeds the child the iteration's tensors: the static model stays sunk and only its addresses
 * are refreshed.
 *
 * The child's device works in host memory, so unless it checks device accesses its static
 * models and dynamic ops read the parent's tensors in place (fed as device tensors: no staging
 * copy) and write a Loop's or Scan's carried value straight into the buffer the interpreter
 * offers for it (the value's other buffer, reference/control.c), as a caller's device output:
 * no copy between iterations. An offered buffer is declined (the child allocates the result and
 * the interpreter adopts it, its bytes copied once out of the child) where the body's declared
 * output shape is not that buffer's: it may change from iteration to iteration.
 *
 * A body holding sequences, optionals or strings, or one whose copy does not compile, stays
 * with the interpreter (the reason goes to the session's log once). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/grow.h"
#include "mixrt/sequence.h"
#include "partitioner/partitioner.h"
#include "reference/reference.h"
#include "v2runtime/kernels_control.h"
#include "v2runtime/session_impl.h"

/* One body met by the session's control ops. */
typedef struct body_entry {
  const mx_graph *body;    /* the original body (owned by its node in the program's root) */
  mx_session *child;       /* its program, or NULL: it stays with the interpreter */
  char **captures;         /* names of the child's inputs after the body's own (malloc'd) */
  size_t n_in, n_captures; /* the body's own inputs, its captures */
  char why[160];           /* why it stays with the interpreter */
  bool in_place;           /* the child's device reads and writes host tensors as its own: it
                              does not check device accesses (see the top of the file) */
} body_entry;

struct mx__control_bodies {
  body_entry **v; /* each entry a block of its own: pointers stay valid as the table grows */
  size_t n, cap;
};

/* Guards every program's table of bodies. Held for lookups and appends only: compiling a body
 * loads a child session, whose own bodies are compiled then (nested control nodes). */
static pthread_mutex_t bodies_lock = PTHREAD_MUTEX_INITIALIZER;

/* Bodies compiled from their graphs in this process (a restored .mxm compiles none). */
static _Atomic uint64_t body_compiles;

uint64_t mx__control_body_compiles(void) { return atomic_load(&body_compiles); }

static void entry_free(body_entry *e) {
  mx_session_destroy(e->child);
  for (size_t i = 0; i < e->n_captures; i++) free(e->captures[i]);
  free(e->captures);
}

void mx__control_bodies_free(struct mx__control_bodies *b) {
  if (!b) return;
  for (size_t i = 0; i < b->n; i++) {
    entry_free(b->v[i]);
    free(b->v[i]);
  }
  free(b->v);
  free(b);
}

/* The options of a body's child session: the parent's, on a host-memory device, without what
 * names the parent's own inputs and symbols. */
static mx_session_options child_options(const mx_session *s) {
  mx_session_options o = s->opts;
  mx__control_body_device(s, &o); /* the calling thread's inline device on a CPU device */
  o.frozen_inputs = NULL;
  o.n_frozen_inputs = 0;
  o.symbol_ranges = NULL;
  o.n_symbol_ranges = 0;
  o.gears = NULL;
  o.n_gears = 0;
  o.passes = s->passes;
  o.intra_op_threads = 0; /* the process-wide pool stays as the parent sized it */
  o.log = NULL;
  o.uv_loop = NULL;
  return o;
}

/* Whether child's device takes host tensors as its own: it does not check device accesses
 * against its allocations, and the child's program is compiled (not interpreted). */
static bool takes_host_tensors(mx_session *child) {
  mx_device_info info;
  mx_device_get_info(mx_session_device(child), &info);
  return !info.check && child->prog && !child->prog->interpreted;
}

/* Compiles body into entry e (e->child stays NULL with e->why set when it cannot be). */
static void compile_body(mx_session *s, const mx_node *nd, const mx_graph *body, body_entry *e) {
  e->body = body;
  e->n_in = body->n_inputs;
  if (!mx__part_body_compilable(body, e->why, sizeof e->why)) return;
  mx_error err;
  mx_error_clear(&err);
  mx_graph *g = NULL;
  size_t n_captures = 0;
  mx_status st = mx__part_body_standalone(body, &g, &n_captures, &err);
  if (st == MX_OK) {
    e->captures = calloc(n_captures ? n_captures : 1, sizeof *e->captures);
    if (!e->captures) st = mx__fail(&err, MX_ERR_OUT_OF_MEMORY, "out of host memory");
    for (size_t i = 0; i < n_captures && st == MX_OK; i++) {
      e->captures[i] = strdup(g->values[g->inputs[body->n_inputs + i]].name);
      if (!e->captures[i])
        st = mx__fail(&err, MX_ERR_OUT_OF_MEMORY, "out of host memory");
      else
        e->n_captures = i + 1;
    }
  }
  mx_session_options o = child_options(s);
  mx_session *child = NULL;
  if (st == MX_OK) st = mx_session_create(&o, &child, &err);
  if (st == MX_OK) {
    st = mx_session_load_graph(child, g);
    g = NULL; /* the session took it */
    if (st != MX_OK) mx__fail(&err, st, "%s", mx_session_last_error(child));
  }
  mx_graph_destroy(g);
  if (st == MX_OK) {
    atomic_fetch_add(&body_compiles, 1);
    e->child = child;
    e->in_place = takes_host_tensors(child);
    return;
  }
  mx_session_destroy(child);
  snprintf(e->why, sizeof e->why, "its copy did not compile: %s", err.message);
  if (s->opts.log) {
    char line[MX_ERROR_MESSAGE_MAX + 256];
    snprintf(line, sizeof line, "node '%s' (%s): body '%s' runs through the reference interpreter: %s",
             nd->name, nd->op_type, body->name, e->why);
    s->opts.log(s->opts.log_user, MX_LOG_INFO, line);
  }
}

/* The entry of body in table b (the lock held), or NULL. */
static body_entry *lookup(const struct mx__control_bodies *b, const mx_graph *body) {
  for (size_t i = 0; b && i < b->n; i++)
    if (b->v[i]->body == body) return b->v[i];
  return NULL;
}

/* The entry of body in s's program, compiled on first use (outside the lock); NULL when out of
 * memory. */
static body_entry *find_body(mx_session *s, const mx_node *nd, const mx_graph *body) {
  mx_program *p = s->prog;
  pthread_mutex_lock(&bodies_lock);
  if (!p->bodies) p->bodies = calloc(1, sizeof *p->bodies);
  body_entry *found = lookup(p->bodies, body);
  pthread_mutex_unlock(&bodies_lock);
  if (found || !p->bodies) return found;
  body_entry *e = calloc(1, sizeof *e);
  if (!e) return NULL;
  compile_body(s, nd, body, e);
  pthread_mutex_lock(&bodies_lock);
  struct mx__control_bodies *b = p->bodies;
  found = lookup(b, body); /* another thread may have compiled it meanwhile */
  if (!found && MX_GROW(b->v, b->cap, b->n + 1)) {
    b->v[b->n++] = e;
    found = e;
    e = NULL;
  }
  pthread_mutex_unlock(&bodies_lock);
  if (e) {
    entry_free(e);
    free(e);
  }
  return found;
}

/* Adds what a child's last step counted to the parent's step (control_runs stays the root's
 * control ops: a control op nested in a body is part of that body's run). Atomically: the
 * multi-thread executor runs two control ops of one step at once (each with its own bodies). */
static void account_child(mx_session *s, const mx_session *child) {
  const mx_session_stats *c = &child->last;
  __atomic_fetch_add(&s->last.body_runs, 1 + c->body_runs, __ATOMIC_RELAXED);
  __atomic_fetch_add(&s->last.body_static_executes, c->static_executes + c->body_static_executes,
                     __ATOMIC_RELAXED);
  __atomic_fetch_add(&s->last.loop_iterations, c->loop_iterations, __ATOMIC_RELAXED);
  __atomic_fetch_add(&s->last.loop_carry_rebinds, c->loop_carry_rebinds, __ATOMIC_RELAXED);
  __atomic_fetch_add(&s->last.loop_carry_copies, c->loop_carry_copies, __ATOMIC_RELAXED);
}

/* Whether body output k of child's program surely has t's dtype and dims: its declared shape is
 * concrete and the same (then an offered buffer can take it as a caller's device output). */
static bool output_fits(const mx_program *cp, size_t k, const mx_tensor *t) {
  const mx_value *v = &cp->root->values[cp->root->outputs[k]];
  if (v->dtype != t->dtype || v->kind != MX_KIND_TENSOR || v->shape.rank != t->rank) return false;
  for (int32_t d = 0; d < t->rank; d++)
    if (!mx_dim_is_concrete(v->shape.dims[d]) || v->shape.dims[d] != t->dims[d]) return false;
  return true;
}

/* Most inputs and outputs kept on the stack; more take the heap. */
#define LOCAL_IO 16

mx_status mx__control_body_run(void *user, const mx_node *nd, mx_graph *body, const mx__ref_frame *f,
                               const mx_tensor *ins, size_t n_in, mx_tensor *outs, size_t n_out, bool *copied,
                               bool *handled, mx_error *err) {
  mx_session *s = user;
  *handled = false;
  if (!s->prog) return MX_OK;
  body_entry *e = find_body(s, nd, body);
  if (!e) return mx__node_fail(err, nd, MX_ERR_OUT_OF_MEMORY, "out of host memory compiling a body");
  if (!e->child) return MX_OK;
  *handled = true;
  size_t n = e->n_in + e->n_captures;
  mx_tensor local[LOCAL_IO];
  mx_tensor *feed = n <= LOCAL_IO ? local : malloc(n * sizeof *feed);
  if (!feed) return mx__node_fail(err, nd, MX_ERR_OUT_OF_MEMORY, "out of host memory running a body");
  mx_status st = MX_OK;
  for (size_t i = 0; i < n && st == MX_OK; i++) {
    const mx_tensor *t = i < n_in ? &ins[i] : mx__reference_frame_lookup(f, e->captures[i - e->n_in]);
    if (!t || mx_value_is_list(t)) {
      st =
          mx__node_fail(err, nd, MX_ERR_INVALID_GRAPH, "body '%s': value '%s' is missing or not a tensor",
                        body->name, i < n_in ? body->values[body->inputs[i]].name : e->captures[i - e->n_in]);
      break;
    }
    feed[i] = *t;
    feed[i].name = NULL;
    if (e->in_place) feed[i].placement = MX_DEVICE; /* read in place, not staged */
  }
  const mx_program *cp = e->child->prog;
  if (st == MX_OK) {
    /* Offered buffers the child surely fills become its device outputs; the rest are declined
     * (a zeroed record: the child allocates a host tensor of its own there). */
    for (size_t k = 0; k < n_out; k++) {
      bool offer = outs[k].data && e->in_place && output_fits(cp, k, &outs[k]);
      if (!offer) memset(&outs[k], 0, sizeof outs[k]);
      outs[k].placement = offer ? MX_DEVICE : MX_HOST;
      outs[k].name = NULL;
    }
    st = mx_session_run(e->child, feed, n, outs, n_out);
    if (st != MX_OK)
      st = mx__node_fail(err, nd, st, "body '%s': %s", body->name, mx_session_last_error(e->child));
    else
      account_child(s, e->child);
    for (size_t k = 0; k < n_out; k++) {
      if (outs[k].placement != MX_DEVICE) {
        if (copied) copied[k] = true; /* copied out of the child into a tensor of its own */
        continue;
      }
      /* Written in place: the value's buffer is the one given (OutputDeliver's own test). A
       * dynamic partition may still have filled it by a copy at the end of its step (its
       * output_copies): then every offered output it produced counts as copied. */
      const mx_rt_value *rv = &cp->values[cp->root->outputs[k]];
      bool dyn_copy = e->child->last.output_copies && rv->producer >= 0 && cp->calls[rv->producer].unknown;
      if (copied) copied[k] = rv->t.data != outs[k].data || dyn_copy;
      outs[k].placement = MX_HOST;
      outs[k].name = NULL;
    }
  }
  if (feed != local) free(feed);
  return st;
}

const char *mx__control_body_status(mx_session *s, const mx_graph *body, mx_session **child) {
  *child = NULL;
  if (!s->prog || !s->prog->bodies) return NULL;
  const char *why = NULL;
  pthread_mutex_lock(&bodies_lock);
  for (size_t i = 0; i < s->prog->bodies->n; i++)
    if (s->prog->bodies->v[i]->body == body) {
      *child = s->prog->bodies->v[i]->child;
      why = s->prog->bodies->v[i]->why;
    }
  pthread_mutex_unlock(&bodies_lock);
  return why;
}

/* Visits the bodies of control node cn (graph attributes in order), counting them in *ordinal. */
static mx_status visit_node(const mx_node *cn, mx__control_body_visit visit, void *ctx, size_t *ordinal) {
  mx_status st = MX_OK;
  for (uint32_t a = 0; cn && a < cn->n_attrs && st == MX_OK; a++)
    if (cn->attrs[a].type == MX_ATTR_GRAPH && cn->attrs[a].graph)
      st = visit(ctx, cn, cn->attrs[a].graph, (*ordinal)++);
  return st;
}

mx_status mx__control_bodies_each(const mx_program *p, mx__control_body_visit visit, void *ctx) {
  if (!p || p->interpreted) return MX_OK;
  size_t ordinal = 0;
  mx_status st = MX_OK;
  for (size_t c = 0; c < p->n_calls && st == MX_OK; c++) {
    const mx_node *call = &p->root->nodes[p->calls[c].node];
    if (!p->calls[c].unknown) continue;
    if (mx__part_is_control_call(call)) {
      st = visit_node(mx__part_control_node(call), visit, ctx, &ordinal);
      continue;
    }
    /* A control call merged into an UNKNOWN cluster with other dynamic ops. */
    const mx_graph *cb = mx__part_call_body(call);
    for (size_t n = 0; cb && n < cb->n_nodes && st == MX_OK; n++)
      if (!(cb->nodes[n].flags & MX_NODE_DEAD) && mx__part_is_control_call(&cb->nodes[n]))
        st = visit_node(mx__part_control_node(&cb->nodes[n]), visit, ctx, &ordinal);
  }
  return st;
}

static mx_status prepare_body(void *ctx, const mx_node *nd, const mx_graph *body, size_t ordinal) {
  (void)ordinal;
  (void)find_body(ctx, nd, body);
  return MX_OK;
}

void mx__control_bodies_prepare(mx_session *s) {
  MX_IGNORE_STATUS(mx__control_bodies_each(s->prog, prepare_body, s));
}

mx_session *mx__control_body_child(const mx_program *p, const mx_graph *body) {
  pthread_mutex_lock(&bodies_lock);
  body_entry *e = lookup(p->bodies, body);
  mx_session *child = e ? e->child : NULL;
  pthread_mutex_unlock(&bodies_lock);
  return child;
}

mx_status mx__control_body_restore(mx_session *s, mx_program *p, const mx_node *nd, const mx_graph *body,
                                   mx__control_body_build build, void *ctx, mx_error *err) {
  body_entry *e = calloc(1, sizeof *e);
  if (!e) return mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory");
  e->body = body;
  e->n_in = body->n_inputs;
  mx_status st = MX_OK;
  if (!mx__part_body_compilable(body, e->why, sizeof e->why))
    st = mx__fail(err, MX_ERR_MALFORMED, "stored compiled, but it cannot be: %s", e->why);
  /* The body's standalone copy (the graph only: nothing compiles) says what it captures; the
   * stored program takes them in its own input order (the order of the body it was compiled
   * from, which an ONNX round trip of the parent may change). */
  mx_graph *g = NULL;
  size_t n_captures = 0;
  if (st == MX_OK) st = mx__part_body_standalone(body, &g, &n_captures, err);
  mx_session_options o = child_options(s);
  mx_session *child = NULL;
  if (st == MX_OK) st = mx_session_create(&o, &child, err);
  mx_program *cp = NULL;
  if (st == MX_OK) st = build(ctx, child, &cp, err);
  if (st == MX_OK && (cp->root->n_inputs != e->n_in + n_captures || cp->root->n_outputs != body->n_outputs))
    st = mx__fail(err, MX_ERR_MALFORMED, "its program has %zu inputs and %zu outputs, the body %zu and %zu",
                  (size_t)cp->root->n_inputs, (size_t)cp->root->n_outputs, e->n_in + n_captures,
                  (size_t)body->n_outputs);
  if (st == MX_OK && !(e->captures = calloc(n_captures ? n_captures : 1, sizeof *e->captures)))
    st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory");
  for (size_t i = 0; i < n_captures && st == MX_OK; i++) {
    const char *name = cp->root->values[cp->root->inputs[e->n_in + i]].name;
    bool captured = false;
    for (size_t k = 0; k < n_captures && !captured; k++)
      captured = strcmp(g->values[g->inputs[body->n_inputs + k]].name, name) == 0;
    if (!captured)
      st = mx__fail(err, MX_ERR_MALFORMED, "its program's input '%s' is not a value the body captures", name);
    else if (!(e->captures[i] = strdup(name)))
      st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory");
    else
      e->n_captures = i + 1;
  }
  mx_graph_destroy(g);
  if (st != MX_OK) {
    mx__program_free(cp);
  } else {
    st = mx__session_install(child, cp);
    if (st != MX_OK) mx__fail(err, st, "%s", mx_session_last_error(child));
  }
  if (st == MX_OK) {
    e->child = child;
    e->in_place = takes_host_tensors(child);
    child = NULL;
    pthread_mutex_lock(&bodies_lock);
    if (!p->bodies) p->bodies = calloc(1, sizeof *p->bodies);
    if (!p->bodies || !MX_GROW(p->bodies->v, p->bodies->cap, p->bodies->n + 1))
      st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory");
    else if (lookup(p->bodies, body))
      st = mx__fail(err, MX_ERR_MALFORMED, "stored twice");
    else {
      p->bodies->v[p->bodies->n++] = e;
      e = NULL;
    }
    pthread_mutex_unlock(&bodies_lock);
  }
  mx_session_destroy(child);
  if (e) {
    entry_free(e);
    free(e);
  }
  if (st != MX_OK) {
    mx__error_prefix(err, "body '%s' of node '%s': ", body->name, nd->name);
    if (err) err->status = st;
  }
  return st;
}

void mx__control_bodies_cancel(mx_session *s) {
  mx_program *p = s->prog;
  if (!p || pthread_mutex_trylock(&bodies_lock) != 0) return;
  size_t n = p->bodies ? p->bodies->n : 0;
  mx_session *local[LOCAL_IO];
  size_t k = 0;
  for (size_t i = 0; i < n && k < LOCAL_IO; i++)
    if (p->bodies->v[i]->child) local[k++] = p->bodies->v[i]->child;
  pthread_mutex_unlock(&bodies_lock);
  /* Children are destroyed only with the program, which the caller's run keeps alive. */
  for (size_t i = 0; i < k; i++) mx_session_cancel(local[i]);
}
