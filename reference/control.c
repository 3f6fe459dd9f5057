/* The reference interpreter's control flow and containers: If, Loop, Scan and SequenceMap run
 * their subgraphs recursively (mx__reference_run_graph, in a frame chained to the node's so the
 * bodies read captured outer values), and the sequence and optional ops work on the
 * mx_value_list values of mixrt/sequence.h. None of these has a CPU kernel.
 *
 * Loop stops after the trip count M when one is given; a Loop whose only exit is its condition
 * is stopped after mx_reference_loop_limit() iterations with an error naming the node. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "graph/ops/control_params.h"
#include "kernels/kutil.h"
#include "mixrt/sequence.h"
#include "reference/reference.h"

#define DEFAULT_LOOP_LIMIT ((int64_t)1 << 24)
static int64_t loop_limit; /* 0: not read yet */

static _Thread_local const mx__ref_limits *thread_limits; /* set by sessions around a run */

const mx__ref_limits *mx__reference_set_limits(const mx__ref_limits *l) {
  const mx__ref_limits *prev = thread_limits;
  thread_limits = l;
  return prev;
}

int64_t mx_reference_loop_limit(int64_t max_iterations) {
  if (loop_limit == 0) {
    const char *env = getenv("MIXRT_LOOP_MAX_ITERATIONS");
    long long v = env ? atoll(env) : 0;
    loop_limit = v > 0 ? (int64_t)v : DEFAULT_LOOP_LIMIT;
  }
  int64_t prev = loop_limit;
  if (max_iterations > 0) loop_limit = max_iterations;
  return prev;
}

const char *mx__reference_kind_name(mx_value_kind kind) {
  switch (kind) {
    case MX_KIND_SEQUENCE: return "sequence";
    case MX_KIND_OPTIONAL: return "optional";
    case MX_KIND_OPTIONAL_SEQUENCE: return "optional sequence";
    default: return "tensor";
  }
}

bool mx__reference_is_control(const mx_graph *g, const mx_node *nd, const mx_tensor *const *inputs) {
  (void)g;
  if (nd->def && (nd->def->flags & (MX_OP_SUBGRAPH | MX_OP_ANY_KIND))) return true;
  /* Other ops that carry subgraphs (FlexAttention's score_mod / prob_mod) run here too. */
  for (uint32_t a = 0; a < nd->n_attrs; a++)
    if (nd->attrs[a].type == MX_ATTR_GRAPH) return true;
  for (uint32_t i = 0; i < nd->n_inputs; i++)
    if (inputs[i] && mx_value_is_list(inputs[i])) return true;
  return false;
}

/* --- helpers ---------------------------------------------------------------------------------- */

typedef struct cx {
  const mx__ref_frame *f;
  const mx_node *nd;
  mx_error *err;
} cx;

static mx_status oom(cx *c) {
  return mx__node_fail(c->err, c->nd, MX_ERR_OUT_OF_MEMORY, "out of host memory");
}

mx_status mx__reference_new_tensor(mx_error *err, const mx_node *nd, mx_dtype dt, int32_t rank,
                                   const int64_t *dims, mx_tensor *t) {
  memset(t, 0, sizeof *t);
  t->dtype = dt;
  t->rank = rank;
  for (int32_t k = 0; k < rank; k++) t->dims[k] = dims[k];
  size_t nb;
  if (!mx_tensor_nbytes(t, &nb))
    return mx__node_fail(err, nd, MX_ERR_LIMIT, "a result of type %s is too large", mx_dtype_name(dt));
  t->data = mx__host_alloc(nb);
  if (!t->data) return mx__node_fail(err, nd, MX_ERR_OUT_OF_MEMORY, "out of host memory");
  return MX_OK;
}

static mx_status new_tensor(cx *c, mx_dtype dt, int32_t rank, const int64_t *dims, mx_tensor *t) {
  return mx__reference_new_tensor(c->err, c->nd, dt, rank, dims, t);
}

static mx_status scalar_int(cx *c, const mx_tensor *t, const char *what, int64_t *v) {
  int64_t n;
  if (!t || mx_value_is_list(t) || !mx_tensor_numel(t, &n) || n != 1 || !mx_dtype_is_integer(t->dtype))
    return mx__node_fail(c->err, c->nd, MX_ERR_SHAPE, "%s must be one integer", what);
  *v = mx__kget_i64(t->data, t->dtype, 0);
  return MX_OK;
}

static mx_status scalar_bool(cx *c, const mx_tensor *t, const char *what, bool *v) {
  int64_t n;
  if (!t || mx_value_is_list(t) || !mx_tensor_numel(t, &n) || n != 1 || t->dtype != MX_BOOL)
    return mx__node_fail(c->err, c->nd, MX_ERR_SHAPE, "%s must be one bool", what);
  *v = *(const uint8_t *)t->data != 0;
  return MX_OK;
}

static mx_status copy_value(cx *c, const mx_tensor *src, mx_tensor *dst) {
  mx_status st = mx_value_copy(src, dst);
  if (st != MX_OK)
    return st == MX_ERR_OUT_OF_MEMORY ? oom(c) : mx__node_fail(c->err, c->nd, st, "cannot copy a value");
  return MX_OK;
}

static void release_all(mx_tensor *t, size_t n) {
  for (size_t i = 0; i < n; i++) mx_tensor_release(&t[i]);
}

/* Bytes of the dims of t before `axis` (outer count) and from `axis + 1` on (inner bytes). */
static void split_at(const mx_tensor *t, int32_t axis, int64_t *outer, size_t *inner) {
  *outer = 1;
  *inner = mx_dtype_size(t->dtype);
  for (int32_t k = 0; k < axis; k++) *outer *= t->dims[k];
  for (int32_t k = axis + 1; k < t->rank; k++) *inner *= (size_t)t->dims[k];
}

/* out = x[..., start:start+len, ...] along axis (rank kept, or the axis dropped when len is 1
 * and drop is set). */
static mx_status slice_range(cx *c, const mx_tensor *x, int32_t axis, int64_t start, int64_t len, bool drop,
                             mx_tensor *out) {
  int64_t dims[MX_MAX_RANK];
  int32_t r = 0;
  for (int32_t k = 0; k < x->rank; k++) {
    if (k == axis && drop) continue;
    dims[r++] = k == axis ? len : x->dims[k];
  }
  mx_status st = new_tensor(c, x->dtype, r, dims, out);
  if (st != MX_OK) return st;
  int64_t outer;
  size_t inner;
  split_at(x, axis, &outer, &inner);
  for (int64_t o = 0; o < outer; o++)
    memcpy((char *)out->data + (size_t)(o * len) * inner,
           (const char *)x->data + (size_t)(o * x->dims[axis] + start) * inner, (size_t)len * inner);
  return MX_OK;
}

/* Stacks n tensors of one shape along a new dim at `axis`. */
static mx_status stack(cx *c, const mx_tensor *items, size_t n, int32_t axis, mx_tensor *out) {
  const mx_tensor *a = &items[0];
  if (a->rank + 1 > MX_MAX_RANK)
    return mx__node_fail(c->err, c->nd, MX_ERR_UNSUPPORTED, "stacked result has too high a rank");
  for (size_t i = 1; i < n; i++) {
    bool same = items[i].dtype == a->dtype && items[i].rank == a->rank;
    for (int32_t k = 0; same && k < a->rank; k++) same = items[i].dims[k] == a->dims[k];
    if (!same)
      return mx__node_fail(c->err, c->nd, MX_ERR_SHAPE,
                           "item %zu to stack differs in type or shape from item 0", i);
  }
  int64_t dims[MX_MAX_RANK];
  for (int32_t k = 0, j = 0; k <= a->rank; k++) dims[k] = k == axis ? (int64_t)n : a->dims[j++];
  mx_status st = new_tensor(c, a->dtype, a->rank + 1, dims, out);
  if (st != MX_OK) return st;
  int64_t outer = 1;
  size_t inner = mx_dtype_size(a->dtype);
  for (int32_t k = 0; k < axis; k++) outer *= a->dims[k];
  for (int32_t k = axis; k < a->rank; k++) inner *= (size_t)a->dims[k];
  for (int64_t o = 0; o < outer; o++)
    for (size_t j = 0; j < n; j++)
      memcpy((char *)out->data + ((size_t)o * n + j) * inner, (const char *)items[j].data + (size_t)o * inner,
             inner);
  return MX_OK;
}

/* Concatenates n tensors along an existing axis. */
static mx_status concat(cx *c, const mx_tensor *items, size_t n, int32_t axis, mx_tensor *out) {
  const mx_tensor *a = &items[0];
  int64_t total = 0;
  for (size_t i = 0; i < n; i++) {
    bool same = items[i].dtype == a->dtype && items[i].rank == a->rank;
    for (int32_t k = 0; same && k < a->rank; k++) same = k == axis || items[i].dims[k] == a->dims[k];
    if (!same)
      return mx__node_fail(c->err, c->nd, MX_ERR_SHAPE,
                           "item %zu to concatenate differs from item 0 off the axis", i);
    total += items[i].dims[axis];
  }
  int64_t dims[MX_MAX_RANK];
  for (int32_t k = 0; k < a->rank; k++) dims[k] = k == axis ? total : a->dims[k];
  mx_status st = new_tensor(c, a->dtype, a->rank, dims, out);
  if (st != MX_OK) return st;
  int64_t outer;
  size_t inner;
  split_at(a, axis, &outer, &inner);
  char *dst = out->data;
  for (int64_t o = 0; o < outer; o++)
    for (size_t i = 0; i < n; i++) {
      size_t chunk = (size_t)items[i].dims[axis] * inner;
      memcpy(dst, (const char *)items[i].data + (size_t)o * chunk, chunk);
      dst += chunk;
    }
  return MX_OK;
}

/* A growable array of owned values. */
typedef struct vec {
  mx_tensor *v;
  size_t n, cap;
} vec;

static mx_status vec_push(cx *c, vec *a, mx_tensor *t) {
  if (a->n == a->cap) {
    size_t nc = a->cap ? a->cap * 2 : 8;
    mx_tensor *nv = realloc(a->v, nc * sizeof *nv);
    if (!nv) return oom(c);
    a->v = nv;
    a->cap = nc;
  }
  a->v[a->n++] = *t;
  memset(t, 0, sizeof *t);
  return MX_OK;
}

static void vec_free(vec *a) {
  release_all(a->v, a->n);
  free(a->v);
  memset(a, 0, sizeof *a);
}

static mx_graph *body_of(const mx_node *nd, const char *name) {
  const mx_attr *a = mx__node_attr(nd, name);
  return a && a->type == MX_ATTR_GRAPH ? a->graph : NULL;
}

/* Runs a body; with lent non-NULL, outputs that give back one of ins unchanged are borrowed
 * (lent[i] true: outs[i] is that input's tensor, see mx__reference_run_body). Outputs with data
 * set are buffers offered for the result (mx__ref_limits.run_body); with copied non-NULL,
 * copied[i] says whether output i's bytes were copied rather than written in place there. */
static mx_status run_body_lending(cx *c, mx_graph *body, const char *what, const mx_tensor *ins, size_t n_in,
                                  mx_tensor *outs, bool *lent, bool *copied) {
  if (body->n_inputs != n_in)
    return mx__node_fail(c->err, c->nd, MX_ERR_INVALID_GRAPH, "%s has %zu inputs, %zu given", what,
                         body->n_inputs, n_in);
  const mx__ref_limits *lim = thread_limits;
  bool handled = false;
  mx_status st = MX_OK;
  if (copied) memset(copied, 0, body->n_outputs * sizeof *copied);
  if (lim && lim->run_body)
    st = lim->run_body(lim->body_user, c->nd, body, c->f, ins, n_in, outs, body->n_outputs, copied, &handled,
                       c->err);
  if (handled && lent) memset(lent, 0, body->n_outputs * sizeof *lent); /* outputs of its own */
  if (!handled) {
    /* The interpreter makes outputs of its own: the offered buffers stay with their caller. */
    memset(outs, 0, body->n_outputs * sizeof *outs);
    st = mx__reference_run_body(body, c->f, ins, n_in, outs, body->n_outputs, lent, c->err);
  }
  if (st != MX_OK && c->err && strncmp(c->err->message, "node '", 6) != 0)
    mx__error_prefix(c->err, "node '%s' (%s): %s: ", c->nd->name, c->nd->op_type, what);
  else if (st != MX_OK)
    mx__error_prefix(c->err, "node '%s' (%s) %s: ", c->nd->name, c->nd->op_type, what);
  return st;
}

static mx_status run_body(cx *c, mx_graph *body, const char *what, const mx_tensor *ins, size_t n_in,
                          mx_tensor *outs) {
  return run_body_lending(c, body, what, ins, n_in, outs, NULL, NULL);
}

/* --- carried values, double-buffered ----------------------------------------------------------
 * A Loop or Scan state of one shape from iteration to iteration keeps two buffers: the body
 * reads iteration i's value from one and writes its result straight into the other (offered
 * through mx__ref_limits.run_body), which then becomes iteration i + 1's input; the two swap, and
 * no bytes are copied. A body that declines the buffer (it stays with the interpreter, or the
 * value's shape may change from iteration to iteration) gives a tensor of its own, which is
 * adopted as before; that value is offered no buffer again. */
typedef struct carry {
  size_t n;         /* carried values */
  mx_tensor *spare; /* per carried value: its other buffer (none yet: data NULL) */
  bool *offered;    /* per carried value: its spare is offered this iteration */
  bool *declined;   /* per carried value: the body declined it once; no more offers */
  bool *taken;      /* per carried value: its result came back in its spare this iteration */
  bool *copied;     /* per body output: its bytes were copied (run_body_lending) */
  uint64_t rebinds, copies;
} carry;

static mx_status carry_init(cx *c, carry *k, size_t n, size_t n_body_out) {
  memset(k, 0, sizeof *k);
  k->n = n;
  k->spare = calloc(n + 1, sizeof *k->spare);
  k->offered = calloc(n + 1, sizeof *k->offered);
  k->declined = calloc(n + 1, sizeof *k->declined);
  k->taken = calloc(n + 1, sizeof *k->taken);
  k->copied = calloc(n_body_out + 1, sizeof *k->copied);
  return k->spare && k->offered && k->declined && k->taken && k->copied ? MX_OK : oom(c);
}

/* Counts what the loop did with its carried values into the session's statistics and frees k. */
static void carry_free(carry *k) {
  const mx__ref_limits *lim = thread_limits;
  /* Atomic: two Loops of one session step may run at once (multi-thread executor). */
  if (lim && lim->carry_rebinds && k->rebinds)
    __atomic_fetch_add(lim->carry_rebinds, k->rebinds, __ATOMIC_RELAXED);
  if (lim && lim->carry_copies && k->copies)
    __atomic_fetch_add(lim->carry_copies, k->copies, __ATOMIC_RELAXED);
  if (k->spare) release_all(k->spare, k->n);
  free(k->spare);
  free(k->offered);
  free(k->declined);
  free(k->taken);
  free(k->copied);
}

static bool same_layout(const mx_tensor *a, const mx_tensor *b) {
  if (a->dtype != b->dtype || a->rank != b->rank) return false;
  for (int32_t d = 0; d < a->rank; d++)
    if (a->dims[d] != b->dims[d]) return false;
  return true;
}

/* A carried value's own copy (its first buffer): tensors in 64-byte aligned host memory, as
 * their spares are. */
static mx_status carry_own(cx *c, const mx_tensor *src, mx_tensor *dst) {
  size_t nb = 0;
  if (mx_value_is_list(src) || src->dtype == MX_STRING || !mx_tensor_nbytes(src, &nb))
    return copy_value(c, src, dst);
  mx_status st = new_tensor(c, src->dtype, src->rank, src->dims, dst);
  if (st == MX_OK && nb) memcpy(dst->data, src->data, nb);
  return st;
}

/* Offers each carried value's spare (cur[i]: its value now) as body output slot out[i]; with
 * no body runner to take them (the interpreter alone) nothing is offered. */
static mx_status carry_offer(cx *c, carry *k, const mx_tensor *cur, mx_tensor *out) {
  const mx__ref_limits *lim = thread_limits;
  bool runner = lim && lim->run_body;
  memset(k->offered, 0, k->n * sizeof *k->offered);
  memset(k->taken, 0, k->n * sizeof *k->taken);
  for (size_t i = 0; i < k->n; i++) {
    const mx_tensor *t = &cur[i];
    if (!runner || k->declined[i] || mx_value_is_list(t) || t->dtype == MX_STRING) continue;
    if (!k->spare[i].data || !same_layout(&k->spare[i], t)) {
      mx_tensor_release(&k->spare[i]);
      mx_status st = new_tensor(c, t->dtype, t->rank, t->dims, &k->spare[i]);
      if (st != MX_OK) {
        for (size_t j = 0; j < i; j++)
          if (k->offered[j]) memset(&out[j], 0, sizeof out[j]);
        return st;
      }
    }
    out[i] = k->spare[i]; /* a view: the spare stays k's */
    k->offered[i] = true;
  }
  return MX_OK;
}

/* Takes back the offered spares after the body ran with status st (copied: k->copied from the
 * carried values' first output on): a result written into its spare becomes the value (the old
 * buffer the spare); a declined spare is freed. Slots still viewing a spare are cleared. */
static void carry_take(carry *k, mx_status st, mx_tensor *cur, mx_tensor *out, const bool *copied) {
  for (size_t i = 0; i < k->n; i++) {
    if (!k->offered[i]) continue;
    bool back = out[i].data == k->spare[i].data;
    if (st == MX_OK && back) {
      if (copied[i])
        k->copies++;
      else
        k->rebinds++;
      mx_tensor old = cur[i];
      cur[i] = k->spare[i];
      k->spare[i] = old;
      k->taken[i] = true;
    } else if (st == MX_OK) {
      k->declined[i] = true; /* a tensor of the body's own came back: its shape may change */
      mx_tensor_release(&k->spare[i]);
    }
    if (back) memset(&out[i], 0, sizeof out[i]);
  }
}

/* An empty scan output: [0] followed by the body output's compile-time dims (unknown ones 0). */
static mx_status empty_scan_output(cx *c, const mx_value *body_out, int32_t axis, mx_tensor *out) {
  int64_t dims[MX_MAX_RANK];
  int32_t r = body_out->shape.rank < 0 ? 0 : body_out->shape.rank;
  if (r + 1 > MX_MAX_RANK) r = MX_MAX_RANK - 1;
  for (int32_t k = 0, j = 0; k <= r; k++) {
    if (k == axis) {
      dims[k] = 0;
      continue;
    }
    mx_dim d = body_out->shape.dims[j++];
    dims[k] = mx_dim_is_concrete(d) ? d : 0;
  }
  return new_tensor(c, body_out->dtype, r + 1, dims, out);
}

/* --- If, Loop, Scan, SequenceMap ------------------------------------------------------------- */

static mx_status run_if(cx *c, const mx_tensor *const *ins, mx_tensor *outs) {
  bool cond = false;
  mx_status st = scalar_bool(c, ins[0], "the condition", &cond);
  if (st != MX_OK) return st;
  mx_graph *b = body_of(c->nd, cond ? "then_branch" : "else_branch");
  if (b->n_outputs != c->nd->n_outputs)
    return mx__node_fail(c->err, c->nd, MX_ERR_INVALID_GRAPH, "the branch has %zu outputs, the node %u",
                         b->n_outputs, c->nd->n_outputs);
  return run_body(c, b, cond ? "then_branch" : "else_branch", NULL, 0, outs);
}

static mx_status run_loop(cx *c, const mx_tensor *const *ins, mx_tensor *outs) {
  mx_graph *body = body_of(c->nd, "body");
  uint32_t ni = c->nd->n_inputs, no = c->nd->n_outputs;
  size_t n = ni - 2, k = no - n;
  int64_t max_trip = INT64_MAX;
  bool cond = true, has_m = ins[0] != NULL;
  mx_status st = MX_OK;
  if (has_m && (st = scalar_int(c, ins[0], "M", &max_trip)) != MX_OK) return st;
  if (ins[1] && (st = scalar_bool(c, ins[1], "cond", &cond)) != MX_OK) return st;
  const mx__ref_limits *lim = thread_limits;
  const int64_t limit = lim && lim->max_iterations > 0 ? lim->max_iterations : mx_reference_loop_limit(0);
  mx_tensor *bin = calloc(2 + n, sizeof *bin), *bout = calloc(body->n_outputs + 1, sizeof *bout);
  vec *scans = calloc(k + 1, sizeof *scans);
  bool *lent = calloc(body->n_outputs + 1, sizeof *lent);
  int64_t iter = 0;
  uint8_t cond_byte = 0;
  carry cv;
  mx_status cst = carry_init(c, &cv, n, body->n_outputs);
  if (!bin || !bout || !scans || !lent || cst != MX_OK) {
    st = oom(c);
    goto done;
  }
  for (size_t i = 0; i < n; i++)
    if ((st = carry_own(c, ins[2 + i], &bin[2 + i])) != MX_OK) goto done;
  bin[0].dtype = MX_INT64;
  bin[0].data = &iter;
  bin[1].dtype = MX_BOOL;
  bin[1].data = &cond_byte;
  for (; iter < max_trip && cond; iter++) {
    if (!has_m && iter >= limit) {
      st = mx__node_fail(
          c->err, c->nd, MX_ERR_LIMIT,
          "stopped after %lld iterations: its only exit is its condition, which stayed true "
          "(%s raise the limit)",
          (long long)iter,
          lim && lim->raise_hint ? lim->raise_hint : "MIXRT_LOOP_MAX_ITERATIONS or mx_reference_loop_limit");
      goto done;
    }
    if (lim && lim->cancel && atomic_load_explicit(lim->cancel, memory_order_relaxed)) {
      st = mx__node_fail(c->err, c->nd, MX_ERR_CANCELLED, "cancelled after %lld iterations", (long long)iter);
      goto done;
    }
    cond_byte = cond;
    /* Atomic: two Loops of one session step may run at once (multi-thread executor). */
    if (lim && lim->iterations) __atomic_fetch_add(lim->iterations, 1, __ATOMIC_RELAXED);
    if ((st = carry_offer(c, &cv, bin + 2, bout + 1)) != MX_OK) goto done;
    st = run_body_lending(c, body, "body", bin, 2 + n, bout, lent, cv.copied);
    /* Outputs the body gave back from its inputs: a carried value passed through in its own slot
     * stays where it is (no copy per iteration); any other one is copied now, before bin
     * changes below. */
    for (size_t o = 1; o < body->n_outputs && st == MX_OK; o++) {
      if (!lent[o] || (o <= n && body->outputs[o] == body->inputs[o + 1])) continue;
      mx_tensor own;
      mx_status lst = copy_value(c, &bout[o], &own);
      lent[o] = false;
      cv.copied[o] = true;
      if (lst == MX_OK) {
        bout[o] = own;
      } else {
        memset(&bout[o], 0, sizeof bout[o]);
        st = lst;
      }
    }
    /* Results written into their carried value's other buffer swap in. */
    carry_take(&cv, st, bin + 2, bout + 1, cv.copied + 1);
    if (st != MX_OK) goto done;
    if (st == MX_OK) st = scalar_bool(c, &bout[0], "the body's condition output", &cond);
    if (lent[0])
      memset(&bout[0], 0, sizeof bout[0]);
    else
      mx_tensor_release(&bout[0]);
    for (size_t i = 0; i < n; i++) {
      if (cv.taken[i]) continue; /* swapped in above */
      if (lent[1 + i]) {         /* passed through: bin[2 + i] already holds it */
        memset(&bout[1 + i], 0, sizeof bout[1 + i]);
        cv.rebinds++;
        continue;
      }
      if (st != MX_OK) continue; /* released with bout below */
      if (cv.copied[1 + i])
        cv.copies++;
      else
        cv.rebinds++;
      mx_tensor_release(&bin[2 + i]);
      bin[2 + i] = bout[1 + i];
      memset(&bout[1 + i], 0, sizeof bout[1 + i]);
    }
    for (size_t j = 0; j < k && st == MX_OK; j++) st = vec_push(c, &scans[j], &bout[1 + n + j]);
    if (st != MX_OK) goto done;
  }
  for (size_t i = 0; i < n; i++) {
    outs[i] = bin[2 + i];
    memset(&bin[2 + i], 0, sizeof bin[2 + i]);
  }
  for (size_t j = 0; j < k; j++) {
    st = scans[j].n ? stack(c, scans[j].v, scans[j].n, 0, &outs[n + j])
                    : empty_scan_output(c, &body->values[body->outputs[1 + n + j]], 0, &outs[n + j]);
    if (st != MX_OK) {
      release_all(outs, n + j);
      goto done;
    }
  }
done:
  if (bin) release_all(bin + 2, n);
  if (bout) release_all(bout, body->n_outputs);
  for (size_t j = 0; scans && j < k; j++) vec_free(&scans[j]);
  carry_free(&cv);
  free(lent);
  free(scans);
  free(bout);
  free(bin);
  return st;
}

/* One unbatched Scan: n states, m scan inputs (each scanned along axes[i], reversed where
 * in_dir[i]), k scan outputs (stacked along out_axes[j], reversed where out_dir[j]). */
static mx_status scan_core(cx *c, mx_graph *body, size_t n, size_t m, size_t k,
                           const mx_tensor *const *states, const mx_tensor *const *scan_in,
                           const int32_t *axes, const int64_t *in_dir, const int64_t *out_axes,
                           const int64_t *out_dir, mx_tensor *outs) {
  int64_t trip = scan_in[0]->dims[axes[0]];
  for (size_t i = 1; i < m; i++)
    if (scan_in[i]->dims[axes[i]] != trip)
      return mx__node_fail(c->err, c->nd, MX_ERR_SHAPE,
                           "scan input %zu has %lld steps, scan input 0 has %lld", i,
                           (long long)scan_in[i]->dims[axes[i]], (long long)trip);
  mx_status st = MX_OK;
  mx_tensor *bin = calloc(n + m + 1, sizeof *bin), *bout = calloc(n + k + 1, sizeof *bout);
  vec *scans = calloc(k + 1, sizeof *scans);
  carry cv;
  mx_status cst = carry_init(c, &cv, n, n + k);
  if (!bin || !bout || !scans || cst != MX_OK) {
    st = oom(c);
    goto done;
  }
  for (size_t i = 0; i < n; i++)
    if ((st = carry_own(c, states[i], &bin[i])) != MX_OK) goto done;
  for (int64_t t = 0; t < trip; t++) {
    for (size_t i = 0; i < m; i++) {
      int64_t idx = in_dir[i] ? trip - 1 - t : t;
      if ((st = slice_range(c, scan_in[i], axes[i], idx, 1, true, &bin[n + i])) != MX_OK) goto done;
    }
    if ((st = carry_offer(c, &cv, bin, bout)) == MX_OK)
      st = run_body_lending(c, body, "body", bin, n + m, bout, NULL, cv.copied);
    release_all(bin + n, m);
    carry_take(&cv, st, bin, bout, cv.copied);
    if (st != MX_OK) goto done;
    for (size_t i = 0; i < n; i++) {
      if (cv.taken[i]) continue; /* written into its other buffer, swapped in */
      if (cv.copied[i])
        cv.copies++;
      else
        cv.rebinds++;
      mx_tensor_release(&bin[i]);
      bin[i] = bout[i];
      memset(&bout[i], 0, sizeof bout[i]);
    }
    for (size_t j = 0; j < k && st == MX_OK; j++) st = vec_push(c, &scans[j], &bout[n + j]);
    if (st != MX_OK) goto done;
  }
  for (size_t i = 0; i < n; i++) {
    outs[i] = bin[i];
    memset(&bin[i], 0, sizeof bin[i]);
  }
  for (size_t j = 0; j < k; j++) {
    const mx_value *bo = &body->values[body->outputs[n + j]];
    int32_t r = scans[j].n ? scans[j].v[0].rank : (bo->shape.rank < 0 ? 0 : bo->shape.rank);
    int64_t a = out_axes ? out_axes[j] : 0;
    if (a < 0) a += r + 1;
    if (a < 0 || a > r) {
      st = mx__node_fail(c->err, c->nd, MX_ERR_INVALID_GRAPH,
                         "scan axis %lld of scan output %zu is out of range", (long long)a, j);
    } else if (!scans[j].n) {
      st = empty_scan_output(c, bo, (int32_t)a, &outs[n + j]);
    } else {
      if (out_dir && out_dir[j])
        for (size_t x = 0, y = scans[j].n - 1; x < y; x++, y--) {
          mx_tensor tmp = scans[j].v[x];
          scans[j].v[x] = scans[j].v[y];
          scans[j].v[y] = tmp;
        }
      st = stack(c, scans[j].v, scans[j].n, (int32_t)a, &outs[n + j]);
    }
    if (st != MX_OK) {
      release_all(outs, n + j);
      goto done;
    }
  }
done:
  if (bin) release_all(bin, n + m);
  if (bout) release_all(bout, n + k);
  for (size_t j = 0; scans && j < k; j++) vec_free(&scans[j]);
  carry_free(&cv);
  free(scans);
  free(bout);
  free(bin);
  return st;
}

static mx_status run_scan(cx *c, const mx_tensor *const *ins, mx_tensor *outs) {
  mx_graph *body = body_of(c->nd, "body");
  const mx_scan_params *p = c->nd->params;
  const bool v8 = c->nd->opset < 9;
  const uint32_t first = v8 ? 1 : 0;
  size_t m = (size_t)p->num_scan_inputs, n = c->nd->n_inputs - first - m, k = c->nd->n_outputs - n;
  int32_t axes[MX_SCAN_MAX];
  int64_t zeros[MX_SCAN_MAX] = {0};
  const mx_tensor *const *states = ins + first, *const *scan_in = ins + first + n;
  for (size_t i = 0; i < m; i++) {
    if (!scan_in[i] || mx_value_is_list(scan_in[i]))
      return mx__node_fail(c->err, c->nd, MX_ERR_INVALID_GRAPH, "scan input %zu must be a tensor", i);
    int64_t a = v8 ? 0 : (p->n_in_axis ? p->in_axis[i] : 0);
    int32_t r = scan_in[i]->rank - (v8 ? 1 : 0);
    if (a < 0) a += r;
    if (a < 0 || a >= r)
      return mx__node_fail(
          c->err, c->nd, MX_ERR_INVALID_GRAPH, "scan axis %lld of scan input %zu is out of range for rank %d",
          (long long)(v8 ? 1 : (p->n_in_axis ? p->in_axis[i] : 0)), i, (int)scan_in[i]->rank);
    axes[i] = (int32_t)a;
  }
  const int64_t *in_dir = p->n_in_dir ? p->in_dir : zeros;
  if (!v8)
    return scan_core(c, body, n, m, k, states, scan_in, axes, in_dir, p->n_out_axis ? p->out_axis : NULL,
                     p->n_out_dir ? p->out_dir : NULL, outs);
  /* Opset 8: every input has a leading batch dim; run each batch entry and stack the results. */
  if (ins[0])
    return mx__node_fail(c->err, c->nd, MX_ERR_UNSUPPORTED, "input 'sequence_lens' is not supported");
  int64_t batch = scan_in[0]->dims[0];
  mx_status st = MX_OK;
  mx_tensor *slices = calloc(n + m + 1, sizeof *slices), *res = calloc(n + k + 1, sizeof *res);
  vec *per = calloc(n + k + 1, sizeof *per);
  const mx_tensor **ptrs = calloc(n + m + 1, sizeof *ptrs);
  if (!slices || !res || !per || !ptrs) {
    st = oom(c);
    goto done;
  }
  for (int64_t b = 0; b < batch; b++) {
    for (size_t i = 0; i < n + m; i++) {
      const mx_tensor *x = i < n ? states[i] : scan_in[i - n];
      if ((st = slice_range(c, x, 0, b, 1, true, &slices[i])) != MX_OK) goto done;
      ptrs[i] = &slices[i];
    }
    st = scan_core(c, body, n, m, k, ptrs, ptrs + n, axes, in_dir, NULL, NULL, res);
    release_all(slices, n + m);
    if (st != MX_OK) goto done;
    for (size_t j = 0; j < n + k && st == MX_OK; j++) st = vec_push(c, &per[j], &res[j]);
    if (st != MX_OK) goto done;
  }
  for (size_t j = 0; j < n + k; j++) {
    if (batch == 0)
      st = mx__node_fail(c->err, c->nd, MX_ERR_UNSUPPORTED, "an empty batch");
    else
      st = stack(c, per[j].v, per[j].n, 0, &outs[j]);
    if (st != MX_OK) {
      release_all(outs, j);
      goto done;
    }
  }
done:
  if (slices) release_all(slices, n + m);
  if (res) release_all(res, n + k);
  for (size_t j = 0; per && j < n + k; j++) vec_free(&per[j]);
  free(ptrs);
  free(per);
  free(res);
  free(slices);
  return st;
}

static mx_status run_sequence_map(cx *c, const mx_tensor *const *ins, mx_tensor *outs) {
  mx_graph *body = body_of(c->nd, "body");
  uint32_t ni = c->nd->n_inputs, no = c->nd->n_outputs;
  const mx_value_list *l0 = mx_value_list_of(ins[0]);
  if (!l0 || l0->kind != MX_KIND_SEQUENCE)
    return mx__node_fail(c->err, c->nd, MX_ERR_INVALID_GRAPH, "input 0 must be a sequence");
  for (uint32_t i = 1; i < ni; i++) {
    const mx_value_list *l = mx_value_list_of(ins[i]);
    if (l && l->count != l0->count)
      return mx__node_fail(c->err, c->nd, MX_ERR_SHAPE, "input %u holds %zu tensors, input 0 %zu", i,
                           l->count, l0->count);
  }
  mx_status st = MX_OK;
  mx_tensor *bin = calloc(ni + 1, sizeof *bin), *bout = calloc(no + 1, sizeof *bout);
  if (!bin || !bout) {
    st = oom(c);
    goto done;
  }
  for (uint32_t k = 0; k < no; k++) {
    const mx_value *bo = &c->f->g->values[c->nd->outputs[k]];
    if ((st = mx_value_list_new(MX_KIND_SEQUENCE, bo->dtype, &outs[k])) != MX_OK) {
      st = oom(c);
      release_all(outs, k);
      goto done;
    }
  }
  for (size_t e = 0; e < l0->count; e++) {
    for (uint32_t i = 0; i < ni; i++) {
      const mx_value_list *l = mx_value_list_of(ins[i]);
      bin[i] = l ? l->items[e] : *ins[i]; /* borrowed */
    }
    st = run_body(c, body, "body", bin, ni, bout);
    if (st != MX_OK) break;
    for (uint32_t k = 0; k < no && st == MX_OK; k++) {
      mx_value_list *ol = mx_value_list_of(&outs[k]);
      if (mx_value_list_insert(&outs[k], ol->count, &bout[k]) != MX_OK) st = oom(c);
    }
    release_all(bout, no);
    if (st != MX_OK) break;
  }
  if (st != MX_OK) release_all(outs, no);
done:
  free(bout);
  free(bin);
  return st;
}

/* --- sequences and optionals ------------------------------------------------------------------ */

static const mx_value_list *need_seq(cx *c, const mx_tensor *t, uint32_t i) {
  const mx_value_list *l = mx_value_list_of(t);
  if (!l || l->kind != MX_KIND_SEQUENCE) {
    mx__node_fail(c->err, c->nd, MX_ERR_INVALID_GRAPH, "input %u must be a sequence", i);
    return NULL;
  }
  return l;
}

/* Reads an optional position input against `count` (insert: count itself is allowed). */
static mx_status position(cx *c, const mx_tensor *t, size_t count, bool insert, int64_t def, int64_t *pos) {
  int64_t p = def;
  if (t) {
    mx_status st = scalar_int(c, t, "the position", &p);
    if (st != MX_OK) return st;
    if (p < 0) p += (int64_t)count;
  }
  if (p < 0 || p > (int64_t)count - (insert ? 0 : 1))
    return mx__node_fail(c->err, c->nd, MX_ERR_INVALID_GRAPH,
                         "position %lld is out of range for a sequence of %zu",
                         (long long)(t ? mx__kget_i64(t->data, t->dtype, 0) : def), count);
  *pos = p;
  return MX_OK;
}

static mx_status seq_insert_copy(cx *c, mx_tensor *seq, size_t pos, const mx_tensor *item) {
  mx_tensor cp;
  mx_status st = copy_value(c, item, &cp);
  if (st != MX_OK) return st;
  if (mx_value_list_insert(seq, pos, &cp) != MX_OK) {
    mx_tensor_release(&cp);
    return oom(c);
  }
  return MX_OK;
}

static mx_status run_split_to_sequence(cx *c, const mx_tensor *const *ins, mx_tensor *out) {
  const mx_seq_params *p = c->nd->params;
  const mx_tensor *x = ins[0];
  int64_t axis = p->axis < 0 ? p->axis + x->rank : p->axis;
  if (axis < 0 || axis >= x->rank)
    return mx__node_fail(c->err, c->nd, MX_ERR_INVALID_GRAPH,
                         "attribute 'axis' %lld is out of range for rank %d", (long long)p->axis,
                         (int)x->rank);
  int64_t dim = x->dims[axis];
  int64_t lens[4096];
  size_t n = 0;
  bool drop = false;
  const mx_tensor *sp = c->nd->n_inputs > 1 ? ins[1] : NULL;
  if (!sp) {
    if (dim > 4096) return mx__node_fail(c->err, c->nd, MX_ERR_LIMIT, "more than 4096 pieces");
    for (int64_t i = 0; i < dim; i++) lens[n++] = 1;
    drop = !p->keepdims;
  } else {
    int64_t cnt;
    mx_tensor_numel(sp, &cnt);
    if (sp->rank == 0) {
      int64_t s = mx__kget_i64(sp->data, sp->dtype, 0);
      if (s <= 0)
        return mx__node_fail(c->err, c->nd, MX_ERR_INVALID_GRAPH, "split size %lld must be positive",
                             (long long)s);
      for (int64_t off = 0; off < dim; off += s) {
        if (n == 4096) return mx__node_fail(c->err, c->nd, MX_ERR_LIMIT, "more than 4096 pieces");
        lens[n++] = off + s <= dim ? s : dim - off;
      }
    } else {
      if (cnt > 4096) return mx__node_fail(c->err, c->nd, MX_ERR_LIMIT, "more than 4096 pieces");
      int64_t sum = 0;
      for (int64_t i = 0; i < cnt; i++) {
        lens[n] = mx__kget_i64(sp->data, sp->dtype, i);
        if (lens[n] < 0)
          return mx__node_fail(c->err, c->nd, MX_ERR_INVALID_GRAPH, "split length %lld is negative",
                               (long long)lens[n]);
        sum += lens[n++];
      }
      if (sum != dim)
        return mx__node_fail(c->err, c->nd, MX_ERR_SHAPE,
                             "split lengths add up to %lld but the axis has %lld", (long long)sum,
                             (long long)dim);
    }
  }
  mx_status st = mx_value_list_new(MX_KIND_SEQUENCE, x->dtype, out);
  if (st != MX_OK) return oom(c);
  int64_t off = 0;
  for (size_t i = 0; i < n; i++) {
    mx_tensor piece;
    st = slice_range(c, x, (int32_t)axis, off, lens[i], drop, &piece);
    if (st == MX_OK && mx_value_list_insert(out, i, &piece) != MX_OK) {
      mx_tensor_release(&piece);
      st = oom(c);
    }
    if (st != MX_OK) {
      mx_tensor_release(out);
      return st;
    }
    off += lens[i];
  }
  return MX_OK;
}

static mx_status run_concat_from_sequence(cx *c, const mx_tensor *const *ins, mx_tensor *out) {
  const mx_seq_params *p = c->nd->params;
  const mx_value_list *l = need_seq(c, ins[0], 0);
  if (!l) return c->err ? c->err->status : MX_ERR_INVALID_GRAPH;
  if (!l->count) return mx__node_fail(c->err, c->nd, MX_ERR_INVALID_GRAPH, "the sequence is empty");
  int32_t r = l->items[0].rank + (p->new_axis ? 1 : 0);
  int64_t axis = p->axis < 0 ? p->axis + r : p->axis;
  if (axis < 0 || axis >= r)
    return mx__node_fail(c->err, c->nd, MX_ERR_INVALID_GRAPH,
                         "attribute 'axis' %lld is out of range for rank %d", (long long)p->axis, (int)r);
  return p->new_axis ? stack(c, l->items, l->count, (int32_t)axis, out)
                     : concat(c, l->items, l->count, (int32_t)axis, out);
}

static mx_status run_sequence_op(cx *c, const char *op, const mx_tensor *const *ins, mx_tensor *outs) {
  const mx_node *nd = c->nd;
  const mx_value *ov = &c->f->g->values[nd->outputs[0]];
  mx_status st;
  if (strcmp(op, "SequenceConstruct") == 0) {
    if (mx_value_list_new(MX_KIND_SEQUENCE, ins[0]->dtype, &outs[0]) != MX_OK) return oom(c);
    for (uint32_t i = 0; i < nd->n_inputs; i++) {
      if (ins[i]->dtype != ins[0]->dtype)
        st = mx__node_fail(c->err, c->nd, MX_ERR_DTYPE, "input %u differs in type from input 0", i);
      else
        st = seq_insert_copy(c, &outs[0], i, ins[i]);
      if (st != MX_OK) {
        mx_tensor_release(&outs[0]);
        return st;
      }
    }
    return MX_OK;
  }
  if (strcmp(op, "SequenceEmpty") == 0)
    return mx_value_list_new(MX_KIND_SEQUENCE, ov->dtype, &outs[0]) == MX_OK ? MX_OK : oom(c);
  if (strcmp(op, "SequenceInsert") == 0 || strcmp(op, "SequenceErase") == 0) {
    const mx_value_list *l = need_seq(c, ins[0], 0);
    if (!l) return c->err ? c->err->status : MX_ERR_INVALID_GRAPH;
    bool ins_op = op[8] == 'I';
    int64_t pos;
    const mx_tensor *pt = nd->n_inputs > (ins_op ? 2u : 1u) ? ins[ins_op ? 2 : 1] : NULL;
    st = position(c, pt, l->count, ins_op, ins_op ? (int64_t)l->count : (int64_t)l->count - 1, &pos);
    if (st != MX_OK) return st;
    if ((st = copy_value(c, ins[0], &outs[0])) != MX_OK) return st;
    if (ins_op) {
      st = seq_insert_copy(c, &outs[0], (size_t)pos, ins[1]);
      if (st != MX_OK) mx_tensor_release(&outs[0]);
      return st;
    }
    mx_value_list *ol = mx_value_list_of(&outs[0]);
    mx_tensor_release(&ol->items[pos]);
    memmove(&ol->items[pos], &ol->items[pos + 1], (ol->count - (size_t)pos - 1) * sizeof *ol->items);
    ol->count--;
    return MX_OK;
  }
  if (strcmp(op, "SequenceAt") == 0) {
    const mx_value_list *l = need_seq(c, ins[0], 0);
    if (!l) return c->err ? c->err->status : MX_ERR_INVALID_GRAPH;
    int64_t pos;
    if ((st = position(c, ins[1], l->count, false, 0, &pos)) != MX_OK) return st;
    return copy_value(c, &l->items[pos], &outs[0]);
  }
  if (strcmp(op, "SequenceLength") == 0) {
    const mx_value_list *l = need_seq(c, ins[0], 0);
    if (!l) return c->err ? c->err->status : MX_ERR_INVALID_GRAPH;
    if ((st = new_tensor(c, MX_INT64, 0, NULL, &outs[0])) != MX_OK) return st;
    *(int64_t *)outs[0].data = (int64_t)l->count;
    return MX_OK;
  }
  if (strcmp(op, "SplitToSequence") == 0) return run_split_to_sequence(c, ins, &outs[0]);
  if (strcmp(op, "ConcatFromSequence") == 0) return run_concat_from_sequence(c, ins, &outs[0]);
  if (strcmp(op, "Optional") == 0) {
    const mx_tensor *x = nd->n_inputs ? ins[0] : NULL;
    if (mx_value_list_new((mx_value_kind)ov->kind, ov->dtype, &outs[0]) != MX_OK) return oom(c);
    if (x && (st = seq_insert_copy(c, &outs[0], 0, x)) != MX_OK) {
      mx_tensor_release(&outs[0]);
      return st;
    }
    return MX_OK;
  }
  if (strcmp(op, "OptionalHasElement") == 0) {
    const mx_tensor *x = nd->n_inputs ? ins[0] : NULL;
    const mx_value_list *l = mx_value_list_of(x);
    bool has = x && (!l || l->kind == MX_KIND_SEQUENCE || l->count > 0);
    if ((st = new_tensor(c, MX_BOOL, 0, NULL, &outs[0])) != MX_OK) return st;
    *(uint8_t *)outs[0].data = has;
    return MX_OK;
  }
  if (strcmp(op, "OptionalGetElement") == 0) {
    const mx_value_list *l = mx_value_list_of(ins[0]);
    if (l && l->kind != MX_KIND_SEQUENCE) {
      if (!l->count) return mx__node_fail(c->err, c->nd, MX_ERR_INVALID_GRAPH, "the optional input is empty");
      return copy_value(c, &l->items[0], &outs[0]);
    }
    return copy_value(c, ins[0], &outs[0]);
  }
  return mx__node_fail(c->err, c->nd, MX_ERR_UNSUPPORTED, "no reference implementation for this op");
}

mx_status mx__reference_exec_control(const mx__ref_frame *f, mx_node_id nid, const mx_tensor *const *ins,
                                     mx_tensor *outs, mx_error *err) {
  const mx_node *nd = &f->g->nodes[nid];
  cx c = {f, nd, err};
  memset(outs, 0, nd->n_outputs * sizeof *outs);
  const char *op = nd->def ? nd->def->name : nd->op_type;
  if (strcmp(op, "If") == 0) return run_if(&c, ins, outs);
  if (strcmp(op, "Loop") == 0) return run_loop(&c, ins, outs);
  if (strcmp(op, "Scan") == 0) return run_scan(&c, ins, outs);
  if (strcmp(op, "SequenceMap") == 0) return run_sequence_map(&c, ins, outs);
  if (strcmp(op, "FlexAttention") == 0) return mx__reference_flex_attention(f, nid, ins, outs, err);
  if (nd->def && (nd->def->flags & MX_OP_ANY_KIND)) return run_sequence_op(&c, op, ins, outs);
  if (strcmp(op, "Identity") == 0 && nd->n_outputs == 1) return copy_value(&c, ins[0], &outs[0]);
  return mx__node_fail(c.err, c.nd, MX_ERR_UNSUPPORTED,
                       "this op takes tensors only, but an input is a sequence or optional");
}
