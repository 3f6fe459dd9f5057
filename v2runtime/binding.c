/* Bindings (include/mixrt/binding.h): inputs and outputs bound once by name, then steps run on
 * the records by graph index (mx__session_run_slots), with no name lookup and no allocation
 * while shapes repeat. Outputs the binding allocates are sized ahead of each step from the
 * symbols the inputs bind, so the step writes straight into them; persistent states live in
 * state.c. */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "v2runtime/binding_impl.h"

#define ERR(b) (&(b)->s->err)

/* The model's value for graph input (output = false) or output i. */
static const mx_value *io_value(const mx_binding *b, bool output, size_t i) {
  const mx_graph *root = b->prog->root;
  return &root->values[output ? root->outputs[i] : root->inputs[i]];
}

static int64_t find(const mx_binding *b, bool output, const char *name) {
  if (!b || !name) return -1;
  size_t n = output ? b->n_out : b->n_in;
  for (size_t i = 0; i < n; i++)
    if (strcmp(io_value(b, output, i)->name, name) == 0) return (int64_t)i;
  return -1;
}

int64_t mx_binding_input_index(const mx_binding *b, const char *name) { return find(b, false, name); }
int64_t mx_binding_output_index(const mx_binding *b, const char *name) { return find(b, true, name); }

/* Checks that b is still the session's model; every call that binds starts here. */
static mx_status usable(mx_binding *b) {
  if (!b) return MX_ERR_INVALID_ARGUMENT;
  if (b->s->prog != b->prog)
    return mx__fail(ERR(b), MX_ERR_INVALID_ARGUMENT, "the binding was made for a model no longer loaded");
  return MX_OK;
}

mx_status mx_binding_create(mx_session *s, mx_binding **out) {
  if (!s || !out) return MX_ERR_INVALID_ARGUMENT;
  *out = NULL;
  if (!s->prog) return mx__fail(&s->err, MX_ERR_INVALID_ARGUMENT, "binding: no model is loaded");
  mx_binding *b = calloc(1, sizeof *b);
  if (!b) return mx__fail_oom(&s->err, "a binding");
  b->s = s;
  b->prog = s->prog;
  b->n_in = s->prog->root->n_inputs;
  b->n_out = s->prog->root->n_outputs;
  b->n_syms = mx_symtab_symbol_count(s->prog->root->syms);
  size_t ni = b->n_in ? b->n_in : 1, no = b->n_out ? b->n_out : 1;
  b->in = calloc(ni, sizeof *b->in);
  b->in_bound = calloc(ni, sizeof *b->in_bound);
  b->in_state = malloc(ni * sizeof *b->in_state);
  b->in_slot = calloc(ni, sizeof *b->in_slot);
  b->out = calloc(no, sizeof *b->out);
  b->out_slot = calloc(no, sizeof *b->out_slot);
  b->syms = malloc((b->n_syms ? b->n_syms : 1) * sizeof *b->syms);
  if (!b->in || !b->in_bound || !b->in_state || !b->in_slot || !b->out || !b->out_slot || !b->syms) {
    mx_binding_destroy(b);
    return mx__fail_oom(&s->err, "a binding");
  }
  for (size_t i = 0; i < b->n_in; i++) b->in_state[i] = -1;
  b->before = -1;
  *out = b;
  return MX_OK;
}

/* Gives back an allocated output's buffer (the binding's, or the session's when it made it). */
static void release_alloc(mx_binding *b, mx_bind_out *o) {
  if (o->from_session && o->t.data) {
    mx_tensor held = o->t; /* released through a copy: the record keeps its dtype */
    if (held.placement == MX_DEVICE)
      mx_device_free(b->s->dev, held.data);
    else
      mx_tensor_release(&held);
  }
  o->from_session = false;
  if (o->buf) {
    if (o->where == MX_DEVICE)
      mx_device_free(b->s->dev, o->buf);
    else
      free(o->buf);
  }
  o->buf = NULL;
  o->cap = 0;
  o->t.data = NULL;
}

void mx_binding_destroy(mx_binding *b) {
  if (!b) return;
  for (size_t j = 0; b->out && j < b->n_out; j++)
    if (b->out[j].kind == MX_BIND_OUT_ALLOC) release_alloc(b, &b->out[j]);
  mx__binding_states_free(b);
  free(b->states);
  free(b->in);
  free(b->in_bound);
  free(b->in_state);
  free(b->in_slot);
  free(b->out);
  free(b->out_slot);
  free(b->syms);
  free(b);
}

/* Checks a record against the model's declaration of input/output `i`. */
static mx_status check_record(mx_binding *b, bool output, size_t i, const mx_tensor *t) {
  const mx_value *v = io_value(b, output, i);
  const char *what = output ? "output" : "input";
  if (!t)
    return mx__fail(ERR(b), MX_ERR_INVALID_ARGUMENT, "binding %s '%s': the tensor is NULL", what, v->name);
  if (t->dtype != v->dtype)
    return mx__fail(ERR(b), MX_ERR_DTYPE, "binding %s '%s': dtype %s given, the model's is %s", what, v->name,
                    mx_dtype_name(t->dtype), mx_dtype_name(v->dtype));
  if (t->rank < 0 || t->rank > MX_MAX_RANK || (v->shape.rank != MX_RANK_UNKNOWN && t->rank != v->shape.rank))
    return mx__fail(ERR(b), MX_ERR_SHAPE, "binding %s '%s': rank %d given, the model's is %d", what, v->name,
                    (int)t->rank, (int)v->shape.rank);
  if (t->placement != MX_HOST && t->placement != MX_DEVICE)
    return mx__fail(ERR(b), MX_ERR_INVALID_ARGUMENT, "binding %s '%s': unknown placement %d", what, v->name,
                    (int)t->placement);
  return MX_OK;
}

mx_status mx_binding_set_input(mx_binding *b, size_t index, const mx_tensor *t) {
  mx_status st = usable(b);
  if (st != MX_OK) return st;
  if (index >= b->n_in)
    return mx__fail(ERR(b), MX_ERR_INVALID_ARGUMENT, "binding input %zu: the model has %zu inputs", index,
                    b->n_in);
  if (b->in_state[index] >= 0)
    return mx__fail(ERR(b), MX_ERR_INVALID_ARGUMENT, "binding input '%s': it is a state, fed by the binding",
                    io_value(b, false, index)->name);
  st = check_record(b, false, index, t);
  if (st != MX_OK) return st;
  b->in[index] = *t;
  b->in[index].name = io_value(b, false, index)->name;
  b->in_bound[index] = true;
  return MX_OK;
}

mx_status mx_binding_bind_input(mx_binding *b, const char *name, const mx_tensor *t) {
  mx_status st = usable(b);
  if (st != MX_OK) return st;
  int64_t i = find(b, false, name);
  if (i < 0)
    return mx__fail(ERR(b), MX_ERR_NOT_FOUND, "binding: the model has no input named '%s'",
                    name ? name : "(NULL)");
  return mx_binding_set_input(b, (size_t)i, t);
}

/* Output `name`'s index, failing with a message naming it. */
static mx_status output_named(mx_binding *b, const char *name, size_t *j) {
  mx_status st = usable(b);
  if (st != MX_OK) return st;
  int64_t k = find(b, true, name);
  if (k < 0)
    return mx__fail(ERR(b), MX_ERR_NOT_FOUND, "binding: the model has no output named '%s'",
                    name ? name : "(NULL)");
  if (b->out[k].kind == MX_BIND_OUT_STATE)
    return mx__fail(ERR(b), MX_ERR_INVALID_ARGUMENT,
                    "binding output '%s': it is a state, kept by the binding", name);
  *j = (size_t)k;
  return MX_OK;
}

mx_status mx_binding_bind_output(mx_binding *b, const char *name, const mx_tensor *t) {
  size_t j;
  mx_status st = output_named(b, name, &j);
  if (st == MX_OK) st = check_record(b, true, j, t);
  if (st == MX_OK && !t->data)
    st = mx__fail(
        ERR(b), MX_ERR_INVALID_ARGUMENT,
        "binding output '%s': data is NULL (mx_binding_bind_output_alloc lets the session allocate)", name);
  if (st != MX_OK) return st;
  mx_bind_out *o = &b->out[j];
  if (o->kind == MX_BIND_OUT_ALLOC) release_alloc(b, o);
  o->kind = MX_BIND_OUT_CALLER;
  o->t = *t;
  o->t.name = io_value(b, true, j)->name;
  return MX_OK;
}

mx_status mx_binding_bind_output_alloc(mx_binding *b, const char *name, mx_placement where) {
  size_t j;
  mx_status st = output_named(b, name, &j);
  if (st != MX_OK) return st;
  if (where != MX_HOST && where != MX_DEVICE)
    return mx__fail(ERR(b), MX_ERR_INVALID_ARGUMENT, "binding output '%s': unknown placement %d", name,
                    (int)where);
  mx_bind_out *o = &b->out[j];
  if (o->kind == MX_BIND_OUT_ALLOC) release_alloc(b, o);
  memset(o, 0, sizeof *o);
  o->kind = MX_BIND_OUT_ALLOC;
  o->where = where;
  o->t.dtype = io_value(b, true, j)->dtype;
  o->t.placement = where;
  o->t.name = io_value(b, true, j)->name;
  return MX_OK;
}

mx_status mx_binding_unbind_output(mx_binding *b, const char *name) {
  size_t j;
  mx_status st = output_named(b, name, &j);
  if (st != MX_OK) return st;
  if (b->out[j].kind == MX_BIND_OUT_ALLOC) release_alloc(b, &b->out[j]);
  memset(&b->out[j], 0, sizeof b->out[j]);
  return MX_OK;
}

const mx_tensor *mx_binding_output(const mx_binding *b, size_t index) {
  if (!b || index >= b->n_out) return NULL;
  const mx_bind_out *o = &b->out[index];
  if (o->kind == MX_BIND_OUT_STATE) {
    for (size_t k = 0; k < b->n_states; k++)
      if (b->states[k].out == index) return &b->states[k].view;
    return NULL;
  }
  return o->kind == MX_BIND_OUT_NONE ? NULL : &o->t;
}

/* --- a step ------------------------------------------------------------------------------------ */

mx_status mx__binding_bind_symbols(mx_binding *b, size_t i, const mx_tensor *t) {
  const mx_program *p = b->prog;
  for (int32_t k = 0; k < t->rank && k < MX_MAX_RANK; k++) {
    int32_t sym = p->input_dim_sym ? p->input_dim_sym[i * MX_MAX_RANK + (size_t)k] : -1;
    if (sym < 0 || (size_t)sym >= b->n_syms) continue;
    int64_t *v = &b->syms[sym];
    if (*v != INT64_MIN && *v != t->dims[k])
      return mx__fail(ERR(b), MX_ERR_SHAPE, "input '%s': dim %d is %lld, but symbol '%s' is already %lld",
                      io_value(b, false, i)->name, (int)k, (long long)t->dims[k],
                      mx_symtab_symbol_name(p->root->syms, (size_t)sym), (long long)*v);
    *v = t->dims[k];
  }
  return MX_OK;
}

bool mx__binding_output_dims(mx_binding *b, size_t j, int32_t *rank, int64_t *dims) {
  const mx_value *v = io_value(b, true, j);
  if (v->shape.rank < 0) return false;
  for (int32_t k = 0; k < v->shape.rank; k++) {
    mx_dim d = v->shape.dims[k];
    if (mx_dim_is_concrete(d))
      dims[k] = d; /* most dims: no expression to evaluate */
    else if (mx_sym_eval(b->prog->root->syms, d, b->syms, b->n_syms, &dims[k]) != MX_OK || dims[k] < 0)
      return false;
  }
  *rank = v->shape.rank;
  return true;
}

/* Sizes an allocated output for this step: its own buffer when the shape is known ahead (kept
 * while it fits), else data NULL so the session allocates it. */
static mx_status prepare_alloc(mx_binding *b, size_t j) {
  mx_bind_out *o = &b->out[j];
  if (o->from_session) release_alloc(b, o); /* last step's, made by the session */
  mx_tensor want = o->t;
  if (!mx__binding_output_dims(b, j, &want.rank, want.dims)) {
    o->t.data = NULL;
    o->from_session = true;
    return MX_OK;
  }
  size_t nbytes = 0;
  if (!mx_tensor_nbytes(&want, &nbytes))
    return mx__fail(ERR(b), MX_ERR_SHAPE, "output '%s': its size overflows", o->t.name);
  if (nbytes > o->cap || !o->buf) {
    release_alloc(b, o);
    size_t cap = nbytes ? (nbytes + 63) / 64 * 64 : 64;
    mx_status st = MX_OK;
    if (o->where == MX_DEVICE)
      st = mx_device_alloc(b->s->dev, cap, 64, &o->buf);
    else if (!(o->buf = aligned_alloc(64, cap)))
      st = MX_ERR_OUT_OF_MEMORY;
    if (st != MX_OK)
      return mx__fail(ERR(b), st == MX_ERR_OUT_OF_MEMORY && o->where == MX_HOST ? st : MX_ERR_DEVICE_OOM,
                      "output '%s': cannot allocate %zu bytes", o->t.name, cap);
    o->cap = cap;
  }
  want.data = o->buf;
  o->t = want;
  o->from_session = false;
  return MX_OK;
}

mx_status mx_session_run_binding(mx_session *s, mx_binding *b) {
  if (!s || !b) return MX_ERR_INVALID_ARGUMENT;
  if (b->s != s) return mx__fail(&s->err, MX_ERR_INVALID_ARGUMENT, "the binding belongs to another session");
  mx_status st = usable(b);
  if (st != MX_OK) return st;
  for (size_t q = 0; q < b->n_syms; q++) b->syms[q] = INT64_MIN;
  for (size_t i = 0; i < b->n_in; i++) {
    if (b->in_state[i] >= 0) continue;
    if (!b->in_bound[i])
      return mx__fail(ERR(b), MX_ERR_INVALID_ARGUMENT, "input '%s' is not bound",
                      io_value(b, false, i)->name);
    b->in_slot[i] = &b->in[i];
    st = mx__binding_bind_symbols(b, i, &b->in[i]);
    if (st != MX_OK) return st;
  }
  st = mx__binding_states_prepare(b);
  if (st != MX_OK) return st;
  for (size_t j = 0; j < b->n_out; j++) {
    mx_bind_out *o = &b->out[j];
    if (o->kind == MX_BIND_OUT_ALLOC) st = prepare_alloc(b, j);
    if (st != MX_OK) return st;
    b->out_slot[j] = o->kind == MX_BIND_OUT_NONE ? NULL : &o->t;
  }
  mx_bound_slots slots = {b->prog, b->in_slot, b->out_slot, b->pads, b->n_pads};
  st = mx__session_run_slots(s, &slots);
  if (st != MX_OK) {
    /* A failed step hands back no buffer it allocated: nothing to keep. */
    for (size_t j = 0; j < b->n_out; j++)
      if (b->out[j].kind == MX_BIND_OUT_ALLOC && b->out[j].from_session) b->out[j].t.data = NULL;
    return st;
  }
  mx__binding_states_advance(b);
  return MX_OK;
}
