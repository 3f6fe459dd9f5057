/* Persistent state of a binding: inputs that are the next step's value of an output (a KV cache),
 * kept on the session's device between steps.
 *
 * Each state has two device buffers with room for `capacity` rows along its growing axis. The
 * rows held lie at the front of the current buffer in the model's own layout (contiguous), so
 * the step reads them as an ordinary input; the step's output is written straight into the other
 * buffer (a caller device buffer: zero copy), which then becomes current. Nothing is allocated
 * and nothing crosses to the host while the rows fit; past the capacity every state grows
 * together, x2. Truncation keeps the first rows: back to the rows before the last step it is a
 * swap (the other buffer still holds them: rejecting a speculated token, or repeating a step),
 * else a copy per outer block into the other buffer when rows are not outermost.
 *
 * The append path (state_append.c says which states take it; mx_binding_set_state_append turns
 * it off): one buffer per state, padded to the capacity along the axis, so each outer block
 * (a key/value head) keeps its rows in place as it grows. The state's input and output both
 * point into it: the step's kernels read the rows through strides and the producer of the
 * state's next value writes only the new rows after them. Nothing is copied per step, the
 * buffer's address changes only when it grows, and a truncate only forgets rows. */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "v2runtime/binding_impl.h"

#define ERR(b)           (&(b)->s->err)
#define DEFAULT_CAPACITY 256

static const mx_value *input_value(const mx_binding *b, size_t i) {
  return &b->prog->root->values[b->prog->root->inputs[i]];
}

static const mx_value *output_value(const mx_binding *b, size_t j) {
  return &b->prog->root->values[b->prog->root->outputs[j]];
}

mx_status mx_binding_add_state(mx_binding *b, const char *input, const char *output, int32_t axis,
                               int64_t capacity) {
  if (!b) return MX_ERR_INVALID_ARGUMENT;
  if (b->s->prog != b->prog)
    return mx__fail(ERR(b), MX_ERR_INVALID_ARGUMENT, "the binding was made for a model no longer loaded");
  int64_t i = mx_binding_input_index(b, input), j = mx_binding_output_index(b, output);
  if (i < 0)
    return mx__fail(ERR(b), MX_ERR_NOT_FOUND, "state: the model has no input named '%s'",
                    input ? input : "(NULL)");
  if (j < 0)
    return mx__fail(ERR(b), MX_ERR_NOT_FOUND, "state: the model has no output named '%s'",
                    output ? output : "(NULL)");
  if (capacity < 0)
    return mx__fail(ERR(b), MX_ERR_INVALID_ARGUMENT, "state '%s': capacity %lld is negative", input,
                    (long long)capacity);
  if (b->in_state[i] >= 0 || b->out[j].kind == MX_BIND_OUT_STATE)
    return mx__fail(ERR(b), MX_ERR_INVALID_ARGUMENT, "state '%s' <- '%s': %s is already a state", input,
                    output, b->in_state[i] >= 0 ? "the input" : "the output");
  if (b->length > 0)
    return mx__fail(ERR(b), MX_ERR_INVALID_ARGUMENT,
                    "state '%s': states are declared before the first step or after mx_binding_reset", input);
  const mx_value *vi = input_value(b, (size_t)i), *vo = output_value(b, (size_t)j);
  if (vi->dtype != vo->dtype)
    return mx__fail(ERR(b), MX_ERR_DTYPE, "state '%s' <- '%s': dtypes %s and %s differ", input, output,
                    mx_dtype_name(vi->dtype), mx_dtype_name(vo->dtype));
  if (vi->shape.rank < 0 || vi->shape.rank != vo->shape.rank)
    return mx__fail(ERR(b), MX_ERR_SHAPE, "state '%s' <- '%s': ranks %d and %d differ (or are unknown)",
                    input, output, (int)vi->shape.rank, (int)vo->shape.rank);
  if (axis == MX_BINDING_AXIS_AUTO) {
    int32_t differ = 0;
    for (int32_t k = 0; k < vi->shape.rank; k++)
      if (vi->shape.dims[k] != vo->shape.dims[k]) axis = k, differ++;
    if (differ != 1)
      return mx__fail(ERR(b), MX_ERR_SHAPE, "state '%s' <- '%s': %d dims differ, one growing axis is needed",
                      input, output, (int)differ);
  }
  if (axis < 0) axis += vi->shape.rank;
  if (axis < 0 || axis >= vi->shape.rank)
    return mx__fail(ERR(b), MX_ERR_INVALID_ARGUMENT, "state '%s': axis %d is out of range for rank %d", input,
                    (int)axis, (int)vi->shape.rank);
  for (int32_t k = 0; k < vi->shape.rank; k++)
    if (k != axis && vi->shape.dims[k] != vo->shape.dims[k])
      return mx__fail(ERR(b), MX_ERR_SHAPE, "state '%s' <- '%s': dim %d differs, and only axis %d may grow",
                      input, output, (int)k, (int)axis);
  if (b->n_states == b->cap_states) {
    size_t cap = b->cap_states ? 2 * b->cap_states : 8;
    mx_bind_state *ns = realloc(b->states, cap * sizeof *ns);
    if (!ns) return mx__fail_oom(ERR(b), "a state");
    b->states = ns;
    b->cap_states = cap;
  }
  mx_bind_state *x = &b->states[b->n_states];
  memset(x, 0, sizeof *x);
  x->in = (uint32_t)i;
  x->out = (uint32_t)j;
  x->axis = axis;
  x->view.dtype = vi->dtype;
  x->view.rank = vi->shape.rank;
  x->view.placement = MX_DEVICE;
  x->view.name = vi->name;
  for (int32_t k = 0; k < vi->shape.rank; k++) /* empty until the first step sizes it */
    x->view.dims[k] = k != axis && mx_dim_is_concrete(vi->shape.dims[k]) ? vi->shape.dims[k] : 0;
  if (capacity > b->want_capacity) b->want_capacity = capacity;
  /* The state takes over the input and the output from whatever was bound there. */
  mx_bind_out *o = &b->out[j];
  if (o->kind == MX_BIND_OUT_ALLOC)
    MX_IGNORE_STATUS(mx_binding_unbind_output(b, output)); /* bound: cannot fail */
  memset(o, 0, sizeof *o);
  o->kind = MX_BIND_OUT_STATE;
  b->in_bound[i] = false;
  b->in_state[i] = (int32_t)b->n_states++;
  return MX_OK;
}

/* The output name input `name` pairs with by one rule ("past_key_values" -> "present",
 * "past" -> "present" at the front), written into out; false when the rule does not apply. */
static bool paired_name(const char *name, const char *from, const char *to, char *out, size_t size) {
  size_t nf = strlen(from);
  if (strncmp(name, from, nf) != 0) return false;
  size_t need = strlen(to) + strlen(name + nf) + 1;
  if (need > size) return false;
  strcpy(out, to);
  strcat(out, name + nf);
  return true;
}

mx_status mx_binding_pair_states(mx_binding *b, int32_t axis, int64_t capacity, size_t *n_pairs) {
  if (n_pairs) *n_pairs = 0;
  if (!b) return MX_ERR_INVALID_ARGUMENT;
  static const char *const rules[][2] = {{"past_key_values", "present"}, {"past", "present"}};
  char name[512];
  for (size_t i = 0; i < b->n_in; i++) {
    if (b->in_state[i] >= 0) continue;
    const char *in = input_value(b, i)->name;
    for (size_t r = 0; r < sizeof rules / sizeof rules[0]; r++) {
      if (!paired_name(in, rules[r][0], rules[r][1], name, sizeof name)) continue;
      int64_t j = mx_binding_output_index(b, name);
      if (j < 0 || b->out[j].kind == MX_BIND_OUT_STATE) continue;
      mx_status st = mx_binding_add_state(b, in, name, axis, capacity);
      if (st != MX_OK) return st;
      if (n_pairs) (*n_pairs)++;
      break;
    }
  }
  return MX_OK;
}

bool mx_binding_input_is_state(const mx_binding *b, size_t index) {
  return b && index < b->n_in && b->in_state[index] >= 0;
}

size_t mx_binding_state_count(const mx_binding *b) { return b ? b->n_states : 0; }
int64_t mx_binding_state_length(const mx_binding *b) { return b ? b->length : 0; }
int64_t mx_binding_state_capacity(const mx_binding *b) {
  if (!b) return 0;
  if (b->capacity) return b->capacity;
  return b->want_capacity ? b->want_capacity : DEFAULT_CAPACITY;
}

void mx__binding_states_free(mx_binding *b) {
  free(b->pads);
  b->pads = NULL;
  b->n_pads = 0;
  for (size_t k = 0; k < b->n_states; k++)
    for (int h = 0; h < 2; h++) {
      if (b->states[k].buf[h]) mx_device_free(b->s->dev, b->states[k].buf[h]);
      b->states[k].buf[h] = NULL;
    }
}

/* Bytes of `rows` rows of state x (outer blocks of rows x inner elements). */
static size_t rows_bytes(const mx_bind_state *x, int64_t rows) {
  return (size_t)x->outer * (size_t)rows * (size_t)x->inner * mx_dtype_size(x->view.dtype);
}

/* Copies the first `keep` of `held` rows of every outer block from src to dst, packed for `keep`
 * rows (one copy when the rows are outermost). */
static mx_status copy_rows(mx_binding *b, const mx_bind_state *x, void *dst, const void *src, int64_t held,
                           int64_t keep) {
  size_t es = mx_dtype_size(x->view.dtype), row = (size_t)x->inner * es;
  if (keep == 0) return MX_OK;
  if (x->outer == 1 || keep == held)
    return mx_device_copy(b->s->dev, dst, src, (size_t)x->outer * (size_t)keep * row, MX_COPY_D2D);
  for (int64_t o = 0; o < x->outer; o++) {
    mx_status st =
        mx_device_copy(b->s->dev, (char *)dst + (size_t)o * (size_t)keep * row,
                       (const char *)src + (size_t)o * (size_t)held * row, (size_t)keep * row, MX_COPY_D2D);
    if (st != MX_OK) return st;
  }
  return MX_OK;
}

/* Copies `held` rows of every outer block of state x from src (blocks of src_pitch rows) to dst
 * (blocks of dst_pitch rows): one copy per outer block, or one in all when the pitches agree. */
static mx_status copy_pitched(mx_binding *b, const mx_bind_state *x, void *dst, int64_t dst_pitch,
                              const void *src, int64_t src_pitch, int64_t held, mx_copy_kind kind) {
  size_t row = (size_t)x->inner * mx_dtype_size(x->view.dtype);
  if (held == 0) return MX_OK;
  if (x->outer == 1 || (dst_pitch == held && src_pitch == held))
    return mx_device_copy(b->s->dev, dst, src, (size_t)x->outer * (size_t)held * row, kind);
  for (int64_t o = 0; o < x->outer; o++) {
    mx_status st =
        mx_device_copy(b->s->dev, (char *)dst + (size_t)o * (size_t)dst_pitch * row,
                       (const char *)src + (size_t)o * (size_t)src_pitch * row, (size_t)held * row, kind);
    if (st != MX_OK) return st;
  }
  return MX_OK;
}

/* Gives state x buffers of `rows` rows, keeping the rows it holds. A state not sized yet (its
 * dims come with its first step or load) keeps none. */
static mx_status grow_state(mx_binding *b, mx_bind_state *x, int64_t rows) {
  if (!x->outer || !x->inner) return MX_OK;
  void *nb[2] = {NULL, NULL};
  size_t bytes = rows_bytes(x, rows);
  if (bytes == 0) bytes = 64;
  int64_t held = x->view.dims[x->axis];
  mx_status st = mx_device_alloc(b->s->dev, bytes, 64, &nb[0]);
  if (st == MX_OK && !x->append) st = mx_device_alloc(b->s->dev, bytes, 64, &nb[1]);
  if (st == MX_OK && x->buf[x->cur] && x->append)
    st = copy_pitched(b, x, nb[0], rows, x->buf[0], b->capacity, held, MX_COPY_D2D);
  else if (st == MX_OK && x->buf[x->cur])
    st = copy_rows(b, x, nb[0], x->buf[x->cur], held, held);
  if (st != MX_OK) {
    for (int h = 0; h < 2; h++)
      if (nb[h]) mx_device_free(b->s->dev, nb[h]);
    return mx__fail(ERR(b), MX_ERR_DEVICE_OOM, "state '%s': cannot allocate %d x %zu bytes for %lld rows: %s",
                    x->view.name, x->append ? 1 : 2, bytes, (long long)rows, mx_device_last_error(b->s->dev));
  }
  for (int h = 0; h < 2; h++)
    if (x->buf[h]) mx_device_free(b->s->dev, x->buf[h]);
  x->buf[0] = nb[0];
  x->buf[1] = nb[1];
  x->cur = 0;
  x->bytes = bytes;
  x->view.data = nb[0];
  return MX_OK;
}

/* Gives every state buffers of `rows` rows, keeping the rows held. */
static mx_status grow(mx_binding *b, int64_t rows) {
  for (size_t k = 0; k < b->n_states; k++) {
    mx_status st = grow_state(b, &b->states[k], rows);
    if (st != MX_OK) return st;
  }
  b->capacity = rows;
  b->before = -1;
  return MX_OK;
}

/* The capacity to grow to for `rows` rows: x2 steps from the capacity (or the one asked for). */
static int64_t capacity_for(const mx_binding *b, int64_t rows) {
  int64_t cap = b->capacity ? b->capacity : (b->want_capacity ? b->want_capacity : DEFAULT_CAPACITY);
  while (cap < rows) cap *= 2;
  return cap;
}

/* Works out once, before the first buffers, which states append in place. */
static void decide_append(mx_binding *b) {
  if (b->append_decided || b->s->prog != b->prog) return; /* another model: the step refuses it */
  b->append_decided = true;
  for (size_t k = 0; k < b->n_states; k++)
    b->states[k].append = !b->no_append && mx__state_append_fits(b->s->prog, &b->states[k]);
}

mx_status mx_binding_set_state_append(mx_binding *b, bool on) {
  if (!b) return MX_ERR_INVALID_ARGUMENT;
  if (b->append_decided && b->no_append != !on)
    return mx__fail(ERR(b), MX_ERR_INVALID_ARGUMENT,
                    "state append: set before the first step or state load of the binding");
  b->no_append = !on;
  return MX_OK;
}

size_t mx_binding_state_appended(const mx_binding *b) {
  size_t n = 0;
  for (size_t k = 0; b && b->append_decided && k < b->n_states; k++) n += b->states[k].append;
  return n;
}

mx_status mx_binding_read_output(mx_binding *b, size_t index, const mx_tensor *dst) {
  if (!b) return MX_ERR_INVALID_ARGUMENT;
  const mx_tensor *o = mx_binding_output(b, index);
  if (!o)
    return mx__fail(ERR(b), MX_ERR_INVALID_ARGUMENT, "read output %zu: out of range or not bound", index);
  const mx_bind_state *x = NULL;
  for (size_t k = 0; k < b->n_states && !x; k++)
    if (b->states[k].out == index) x = &b->states[k];
  size_t nbytes = 0;
  if (!dst || !mx_tensor_nbytes(dst, &nbytes) || dst->dtype != o->dtype || dst->rank != o->rank ||
      memcmp(dst->dims, o->dims, (size_t)o->rank * sizeof *dst->dims) != 0 || (nbytes && !dst->data))
    return mx__fail(ERR(b), MX_ERR_SHAPE,
                    "read output '%s': the tensor must have the output's dtype and dims",
                    output_value(b, index)->name);
  if (!nbytes) return MX_OK;
  if (!o->data)
    return mx__fail(ERR(b), MX_ERR_INVALID_ARGUMENT, "read output '%s': no step wrote it yet",
                    output_value(b, index)->name);
  if (o->placement == MX_HOST && dst->placement == MX_HOST) {
    memcpy(dst->data, o->data, nbytes);
    return MX_OK;
  }
  mx_copy_kind kind =
      o->placement == MX_DEVICE ? (dst->placement == MX_DEVICE ? MX_COPY_D2D : MX_COPY_D2H) : MX_COPY_H2D;
  mx_status st;
  if (x && x->append && o->data == x->buf[0])
    st = copy_pitched(b, x, dst->data, b->length, o->data, b->capacity, b->length, kind);
  else
    st = mx_device_copy(b->s->dev, dst->data, o->data, nbytes, kind);
  if (st != MX_OK)
    return mx__fail(ERR(b), st, "read output '%s': %s", output_value(b, index)->name,
                    mx_device_last_error(b->s->dev));
  return MX_OK;
}

mx_status mx_binding_load_state(mx_binding *b, size_t index, const mx_tensor *t) {
  if (!b) return MX_ERR_INVALID_ARGUMENT;
  decide_append(b);
  if (index >= b->n_in || b->in_state[index] < 0)
    return mx__fail(ERR(b), MX_ERR_INVALID_ARGUMENT, "load state: input %zu is not a state", index);
  mx_bind_state *x = &b->states[b->in_state[index]];
  if (!t)
    return mx__fail(ERR(b), MX_ERR_INVALID_ARGUMENT, "load state '%s': the tensor is NULL", x->view.name);
  if (t->dtype != x->view.dtype || t->rank != x->view.rank)
    return mx__fail(ERR(b), MX_ERR_SHAPE,
                    "load state '%s': %s of rank %d given, the model's is %s of rank %d", x->view.name,
                    mx_dtype_name(t->dtype), (int)t->rank, mx_dtype_name(x->view.dtype), (int)x->view.rank);
  const mx_value *v = input_value(b, index);
  int64_t outer = 1, inner = 1, rows = t->dims[x->axis];
  for (int32_t d = 0; d < t->rank; d++) {
    if (t->dims[d] < 0 ||
        (d != x->axis && mx_dim_is_concrete(v->shape.dims[d]) && v->shape.dims[d] != t->dims[d]))
      return mx__fail(ERR(b), MX_ERR_SHAPE, "load state '%s': dim %d is %lld, the model's is %lld",
                      x->view.name, (int)d, (long long)t->dims[d], (long long)v->shape.dims[d]);
    if (d < x->axis) outer *= t->dims[d];
    if (d > x->axis) inner *= t->dims[d];
  }
  size_t nbytes = 0;
  if (!mx_tensor_nbytes(t, &nbytes) || (nbytes && !t->data))
    return mx__fail(ERR(b), MX_ERR_INVALID_ARGUMENT, "load state '%s': invalid dims or data NULL",
                    x->view.name);
  /* Nothing this state held is kept; other dims may differ from before. */
  if (x->buf[0] && (outer != x->outer || inner != x->inner)) {
    for (int h = 0; h < 2; h++) mx_device_free(b->s->dev, x->buf[h]);
    x->buf[0] = x->buf[1] = NULL;
  }
  x->outer = outer;
  x->inner = inner;
  x->view.dims[x->axis] = 0;
  int64_t cap = capacity_for(b, rows);
  mx_status st = MX_OK;
  if (cap > b->capacity && b->capacity)
    st = grow(b, cap); /* every state, keeping their rows */
  else if (!x->buf[0])
    st = grow_state(b, x, cap);
  if (st != MX_OK) return st;
  b->capacity = cap;
  mx_copy_kind kind = t->placement == MX_DEVICE ? MX_COPY_D2D : MX_COPY_H2D;
  if (!nbytes)
    st = MX_OK;
  else if (x->append)
    st = copy_pitched(b, x, x->buf[0], b->capacity, t->data, rows, rows, kind);
  else
    st = mx_device_copy(b->s->dev, x->buf[x->cur], t->data, nbytes, kind);
  if (st != MX_OK)
    return mx__fail(ERR(b), st, "load state '%s': %s", x->view.name, mx_device_last_error(b->s->dev));
  memcpy(x->view.dims, t->dims, sizeof x->view.dims);
  x->view.data = x->buf[x->cur];
  b->length = rows;
  b->before = -1;
  return MX_OK;
}

mx_status mx__binding_states_prepare(mx_binding *b) {
  if (!b->n_states) return MX_OK;
  decide_append(b);
  const mx_symtab *syms = b->prog->root->syms;
  /* The inputs first: rows held along the axis, the other dims from the bound inputs' symbols. */
  for (size_t k = 0; k < b->n_states; k++) {
    mx_bind_state *x = &b->states[k];
    const mx_value *v = input_value(b, x->in);
    if (x->view.dims[x->axis] != b->length)
      return mx__fail(ERR(b), MX_ERR_SHAPE,
                      "state '%s' holds %lld rows, the others %lld (load every state alike)", v->name,
                      (long long)x->view.dims[x->axis], (long long)b->length);
    int64_t outer = 1, inner = 1;
    for (int32_t d = 0; d < x->view.rank; d++) {
      int64_t n = d == x->axis ? b->length : v->shape.dims[d];
      if (d != x->axis && !mx_dim_is_concrete(n) &&
          (mx_sym_eval(syms, v->shape.dims[d], b->syms, b->n_syms, &n) != MX_OK || n < 0))
        return mx__fail(
            ERR(b), MX_ERR_SHAPE,
            "state '%s': dim %d is not known before the step (bind the input that gives its symbol)", v->name,
            (int)d);
      x->view.dims[d] = n;
      if (d < x->axis) outer *= n;
      if (d > x->axis) inner *= n;
    }
    if (x->buf[0] && (outer != x->outer || inner != x->inner)) {
      if (b->length > 0)
        return mx__fail(
            ERR(b), MX_ERR_SHAPE,
            "state '%s': dims other than axis %d changed while it holds rows (mx_binding_reset first)",
            v->name, (int)x->axis);
      for (int h = 0; h < 2; h++) mx_device_free(b->s->dev, x->buf[h]);
      x->buf[0] = x->buf[1] = NULL; /* reallocated below */
    }
    x->outer = outer;
    x->inner = inner;
    mx_status st = mx__binding_bind_symbols(b, x->in, &x->view);
    if (st != MX_OK) return st;
  }
  /* Then the outputs: the step's rows decide whether the buffers must grow. */
  int64_t rows = -1;
  for (size_t k = 0; k < b->n_states; k++) {
    mx_bind_state *x = &b->states[k];
    mx_tensor *o = &b->out[x->out].t;
    memset(o, 0, sizeof *o);
    if (!mx__binding_output_dims(b, x->out, &o->rank, o->dims))
      return mx__fail(ERR(b), MX_ERR_SHAPE,
                      "state '%s' <- '%s': the output's shape is not known before the step", x->view.name,
                      output_value(b, x->out)->name);
    if (rows >= 0 && o->dims[x->axis] != rows)
      return mx__fail(ERR(b), MX_ERR_SHAPE, "state '%s': %lld rows after this step, the other states %lld",
                      x->view.name, (long long)o->dims[x->axis], (long long)rows);
    rows = o->dims[x->axis];
  }
  if (rows > b->capacity || !b->capacity) {
    mx_status st = grow(b, capacity_for(b, rows));
    if (st != MX_OK) return st;
  }
  for (size_t k = 0; k < b->n_states; k++) {
    if (b->states[k].buf[0]) continue;
    mx_status st = grow_state(b, &b->states[k], b->capacity);
    if (st != MX_OK) return st;
  }
  if (!b->pads) {
    b->pads = calloc(2 * b->n_states, sizeof *b->pads);
    if (!b->pads) return mx__fail_oom(ERR(b), "the states' padded values");
  }
  b->n_pads = 0;
  for (size_t k = 0; k < b->n_states; k++) {
    mx_bind_state *x = &b->states[k];
    mx_tensor *o = &b->out[x->out].t;
    x->view.data = x->buf[x->cur];
    o->dtype = x->view.dtype;
    o->data = x->append ? x->buf[0] : x->buf[x->cur ^ 1];
    o->placement = MX_DEVICE;
    o->name = output_value(b, x->out)->name;
    b->in_slot[x->in] = &x->view;
    if (!x->append) continue;
    mx_step_pad in = {b->prog->root->inputs[x->in], x->axis, b->capacity, false};
    mx_step_pad out = {b->prog->root->outputs[x->out], x->axis, b->capacity, true};
    b->pads[b->n_pads++] = in;
    b->pads[b->n_pads++] = out;
  }
  return MX_OK;
}

void mx__binding_states_advance(mx_binding *b) {
  b->before = b->length;
  for (size_t k = 0; k < b->n_states; k++) {
    mx_bind_state *x = &b->states[k];
    const mx_tensor *o = &b->out[x->out].t;
    if (!x->append) x->cur ^= 1;
    memcpy(x->view.dims, o->dims, sizeof x->view.dims);
    x->view.data = x->buf[x->cur];
    b->length = o->dims[x->axis];
  }
}

mx_status mx_binding_truncate(mx_binding *b, int64_t length) {
  if (!b) return MX_ERR_INVALID_ARGUMENT;
  if (length < 0 || length > b->length)
    return mx__fail(ERR(b), MX_ERR_INVALID_ARGUMENT, "truncate: %lld rows asked, the states hold %lld",
                    (long long)length, (long long)b->length);
  if (length == b->length) return MX_OK;
  /* Back to the rows before the last step: the other buffers hold them as they were. */
  bool swap = length == b->before && b->before >= 0;
  for (size_t k = 0; k < b->n_states; k++) {
    mx_bind_state *x = &b->states[k];
    if (x->append) {
      /* The rows kept stay where they are; the next step writes over the others. */
    } else if (swap) {
      x->cur ^= 1;
    } else if (x->outer > 1 && length > 0) {
      /* Rows are not outermost: pack the kept rows of each block into the other buffer. */
      mx_status st = copy_rows(b, x, x->buf[x->cur ^ 1], x->buf[x->cur], b->length, length);
      if (st != MX_OK)
        return mx__fail(ERR(b), st, "truncate: state '%s': %s", x->view.name,
                        mx_device_last_error(b->s->dev));
      x->cur ^= 1;
    }
    x->view.dims[x->axis] = length;
    x->view.data = x->buf[x->cur];
  }
  b->length = length;
  b->before = -1;
  return MX_OK;
}

mx_status mx_binding_reset(mx_binding *b) {
  if (!b) return MX_ERR_INVALID_ARGUMENT;
  for (size_t k = 0; k < b->n_states; k++) b->states[k].view.dims[b->states[k].axis] = 0;
  b->length = 0;
  b->before = -1;
  return MX_OK;
}
