/* Lowering a planned program into its execution graphs (GE's lowering, done once at compile).
 *
 * Value slots: slot r (r < number of root values) stands for "root value r is ready this step";
 * further slots are per-call handles (static model / dynamic executor, written by Init) and the
 * tokens that order a call's kernels. Priorities keep calls in root order and put every free
 * right after the last reader of its value, so the sequential executor (a loop over the priority
 * order) releases memory as early as the topological ones. */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/grow.h"
#include "v2runtime/exe_registry.h"
#include "v2runtime/session_impl.h"

typedef struct lowering {
  mx_program *p;
  mx_exe_builder *init, *main, *deinit;
  uint32_t next_slot;
  uint32_t **readers; /* per root value: main-graph nodes that read it (malloc'd arrays) */
  size_t *n_readers, *cap_readers;
  uint32_t *reader_prio; /* per root value: largest priority among its readers */
  mx_error *err;
} lowering;

static int kernel_id(const char *name) {
  int k = mx__exe_kernel_find(name);
  return k;
}

static mx_status add(lowering *L, mx_exe_builder *b, const char *kernel, const uint32_t *in, size_t n_in,
                     const uint32_t *out, size_t n_out, mx_kattr attr, uint32_t prio, uint32_t *node) {
  int k = kernel_id(kernel);
  if (k < 0) return mx__fail(L->err, MX_ERR_INTERNAL, "lowering: kernel %s is not registered", kernel);
  if (n_in > UINT16_MAX || n_out > UINT16_MAX)
    return mx__fail(L->err, MX_ERR_LIMIT, "lowering: a %s node with %zu inputs and %zu outputs", kernel, n_in,
                    n_out);
  mx_status st = mx__exe_builder_add(b, (uint16_t)k, in, (uint16_t)n_in, out, (uint16_t)n_out, &attr,
                                     sizeof attr, prio, node);
  if (st != MX_OK) return mx__fail(L->err, st, "lowering: out of host memory");
  return MX_OK;
}

static mx_status note_reader(lowering *L, mx_value_id r, uint32_t node, uint32_t prio) {
  if (!MX_GROW(L->readers[r], L->cap_readers[r], L->n_readers[r] + 1))
    return mx__fail(L->err, MX_ERR_OUT_OF_MEMORY, "lowering: out of host memory");
  L->readers[r][L->n_readers[r]++] = node;
  if (prio > L->reader_prio[r]) L->reader_prio[r] = prio;
  return MX_OK;
}

static mx_kattr attr_of(uint32_t call, uint32_t op, uint32_t value) {
  mx_kattr a = {call, op, value, 0};
  return a;
}

static mx_status lower_static_call(lowering *L, uint32_t ci, uint32_t handle, uint32_t prio) {
  mx_rt_call *c = &L->p->calls[ci];
  uint32_t alloc_tok = L->next_slot++, args_tok = L->next_slot++;
  uint32_t *in = malloc((2 + (size_t)c->n_in) * sizeof *in);
  if (!in) return mx__fail(L->err, MX_ERR_OUT_OF_MEMORY, "lowering: out of host memory");
  mx_status st = add(L, L->main, "StaticAllocOutputs", &handle, 1, &alloc_tok, 1, attr_of(ci, 0, UINT32_MAX),
                     prio, NULL);
  in[0] = handle;
  in[1] = alloc_tok;
  for (uint32_t k = 0; k < c->n_in; k++) in[2 + k] = c->in_values[k];
  if (st == MX_OK)
    st = add(L, L->main, "StaticModelUpdateArgs", in, 2 + (size_t)c->n_in, &args_tok, 1,
             attr_of(ci, 0, UINT32_MAX), prio + 1, NULL);
  uint32_t exec_node = 0;
  uint32_t ein[2] = {handle, args_tok};
  if (st == MX_OK)
    st = add(L, L->main, "StaticModelExecute", ein, 2, c->out_values, c->n_out, attr_of(ci, 0, UINT32_MAX),
             prio + 2, &exec_node);
  for (uint32_t k = 0; k < c->n_in && st == MX_OK; k++)
    st = note_reader(L, c->in_values[k], exec_node, prio + 2);
  free(in);
  return st;
}

static mx_status lower_dynamic_call(lowering *L, uint32_t ci, uint32_t handle, uint32_t prio) {
  mx_rt_call *c = &L->p->calls[ci];
  uint32_t *in = malloc((1 + (size_t)c->n_in) * sizeof *in);
  if (!in) return mx__fail(L->err, MX_ERR_OUT_OF_MEMORY, "lowering: out of host memory");
  in[0] = handle;
  for (uint32_t k = 0; k < c->n_in; k++) in[1 + k] = c->in_values[k];
  uint32_t tok = L->next_slot++;
  mx_status st = add(L, L->main, "BindSymbols", in, 1 + (size_t)c->n_in, &tok, 1, attr_of(ci, 0, UINT32_MAX),
                     prio, NULL);
  free(in);
  size_t n_ops = mx__dyn_op_count(c->dplan);
  for (size_t i = 0; i < n_ops && st == MX_OK; i++) {
    uint32_t prepared = L->next_slot++, launched = L->next_slot++, next = L->next_slot++;
    mx_kattr a = attr_of(ci, (uint32_t)i, UINT32_MAX);
    st = add(L, L->main, "InferShape", &tok, 1, &prepared, 1, a, prio, NULL);
    const char *run_kernel = mx__dyn_op_stream(c->dplan, i) >= 0 ? "Launch" : "HostCompute";
    if (st == MX_OK) st = add(L, L->main, run_kernel, &prepared, 1, &launched, 1, a, prio, NULL);
    if (st == MX_OK && mx__dyn_op_needs_sync(c->dplan, i)) {
      uint32_t synced = L->next_slot++;
      st = add(L, L->main, "SyncOutputShape", &launched, 1, &synced, 1, a, prio, NULL);
      launched = synced;
    }
    if (st == MX_OK) st = add(L, L->main, "FreeMemory", &launched, 1, &next, 1, a, prio, NULL);
    tok = next;
  }
  uint32_t end_node = 0;
  if (st == MX_OK)
    st = add(L, L->main, "DynStepEnd", &tok, 1, c->out_values, c->n_out, attr_of(ci, 0, UINT32_MAX), prio + 1,
             &end_node);
  for (uint32_t k = 0; k < c->n_in && st == MX_OK; k++)
    st = note_reader(L, c->in_values[k], end_node, prio + 1);
  return st;
}

static void lowering_release(lowering *L, size_t n_values) {
  for (size_t r = 0; L->readers && r < n_values; r++) free(L->readers[r]);
  free(L->readers);
  free(L->n_readers);
  free(L->cap_readers);
  free(L->reader_prio);
  mx__exe_builder_destroy(L->init);
  mx__exe_builder_destroy(L->main);
  mx__exe_builder_destroy(L->deinit);
}

mx_status mx__program_lower(mx_session *s, mx_program *p, mx_error *err) {
  (void)s;
  const mx_graph *root = p->root;
  const size_t nv = root->n_values;
  lowering L = {.p = p, .err = err, .next_slot = (uint32_t)nv};
  mx_status st = MX_OK;
  uint32_t *handles = calloc(p->n_calls ? p->n_calls : 1, sizeof *handles);
  L.readers = calloc(nv ? nv : 1, sizeof *L.readers);
  L.n_readers = calloc(nv ? nv : 1, sizeof *L.n_readers);
  L.cap_readers = calloc(nv ? nv : 1, sizeof *L.cap_readers);
  L.reader_prio = calloc(nv ? nv : 1, sizeof *L.reader_prio);
  if (!handles || !L.readers || !L.n_readers || !L.cap_readers || !L.reader_prio ||
      mx__exe_builder_create(&L.init) != MX_OK || mx__exe_builder_create(&L.main) != MX_OK ||
      mx__exe_builder_create(&L.deinit) != MX_OK) {
    st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "lowering: out of host memory");
    goto done;
  }

  /* Init: shared constants, then one handle per call. DeInit mirrors it. */
  for (size_t r = 0; r < nv && st == MX_OK; r++) {
    const mx_value *v = &root->values[r];
    if ((v->flags & (MX_VALUE_DEAD | MX_VALUE_INPUT)) || !(v->flags & MX_VALUE_CONST)) continue;
    uint32_t slot = (uint32_t)r;
    st = add(&L, L.init, "UploadConstant", NULL, 0, &slot, 1, attr_of(UINT32_MAX, 0, (uint32_t)r), 0, NULL);
    if (st == MX_OK)
      st = add(&L, L.deinit, "FreeConstant", NULL, 0, NULL, 0, attr_of(UINT32_MAX, 0, (uint32_t)r), 1, NULL);
  }
  for (size_t c = 0; c < p->n_calls && st == MX_OK; c++) {
    handles[c] = L.next_slot++;
    bool dyn = p->calls[c].unknown;
    st = add(&L, L.init, dyn ? "DynExecCreate" : "StaticModelCreate", NULL, 0, &handles[c], 1,
             attr_of((uint32_t)c, 0, UINT32_MAX), 1 + (uint32_t)c, NULL);
    if (st == MX_OK)
      st = add(&L, L.deinit, dyn ? "DynExecDestroy" : "StaticModelDestroy", &handles[c], 1, NULL, 0,
               attr_of((uint32_t)c, 0, UINT32_MAX), 0, NULL);
  }

  /* Main: feeds, calls in root order, outputs, frees. */
  for (size_t i = 0; i < root->n_inputs && st == MX_OK; i++) {
    uint32_t slot = root->inputs[i];
    st = add(&L, L.main, "FeedInput", NULL, 0, &slot, 1, attr_of(UINT32_MAX, (uint32_t)i, root->inputs[i]), 0,
             NULL);
  }
  for (size_t c = 0; c < p->n_calls && st == MX_OK; c++) {
    uint32_t prio = 8 * (uint32_t)(c + 1);
    st = p->calls[c].unknown ? lower_dynamic_call(&L, (uint32_t)c, handles[c], prio)
                             : lower_static_call(&L, (uint32_t)c, handles[c], prio);
  }
  uint32_t out_prio = 8 * (uint32_t)(p->n_calls + 1);
  for (size_t k = 0; k < root->n_outputs && st == MX_OK; k++) {
    uint32_t r = root->outputs[k], done_slot = L.next_slot++, node;
    st = add(&L, L.main, "OutputDeliver", &r, 1, &done_slot, 1, attr_of(UINT32_MAX, (uint32_t)k, r), out_prio,
             &node);
    if (st == MX_OK) st = note_reader(&L, r, node, out_prio);
  }
  /* FreeValue guarders: after every reader of a value produced by a call. */
  for (size_t c = 0; c < p->n_calls && st == MX_OK; c++) {
    const mx_rt_call *call = &p->calls[c];
    for (uint32_t j = 0; j < call->n_out && st == MX_OK; j++) {
      mx_value_id r = call->out_values[j];
      bool seen = false;
      for (uint32_t q = 0; q < j; q++) seen = seen || call->out_values[q] == r;
      if (seen) continue;
      uint32_t freed = L.next_slot++, fnode;
      st = add(&L, L.main, "FreeValue", &r, 1, &freed, 1, attr_of(UINT32_MAX, 0, r), L.reader_prio[r] + 1,
               &fnode);
      for (size_t q = 0; q < L.n_readers[r] && st == MX_OK; q++)
        if (mx__exe_builder_edge(L.main, L.readers[r][q], fnode) != MX_OK)
          st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "lowering: out of host memory");
    }
  }
  if (st != MX_OK) goto done;
  st = mx__exe_builder_finish(L.init, &p->init, err);
  if (st == MX_OK) st = mx__exe_builder_finish(L.main, &p->main, err);
  if (st == MX_OK) st = mx__exe_builder_finish(L.deinit, &p->deinit, err);
  if (st != MX_OK) goto done;
  p->n_slots = L.next_slot;
  p->slots = calloc(p->n_slots ? p->n_slots : 1, sizeof *p->slots);
  if (!p->slots) st = mx__fail(err, MX_ERR_OUT_OF_MEMORY, "lowering: out of host memory");
done:
  lowering_release(&L, nv);
  free(handles);
  return st;
}

mx_status mx__program_assign_streams(mx_session *s, mx_program *p, mx_error *err) {
  uint32_t n = s->n_streams < MX_STEP_MAX_STREAMS ? s->n_streams : MX_STEP_MAX_STREAMS;
  int64_t tail[MX_STEP_MAX_STREAMS];      /* last call placed on each stream, -1: none yet */
  uint64_t last_use[MX_STEP_MAX_STREAMS]; /* when a call was last placed on it */
  for (uint32_t k = 0; k < MX_STEP_MAX_STREAMS; k++) {
    tail[k] = -1;
    last_use[k] = 0;
  }
  for (size_t r = 0; r < p->n_values; r++) {
    p->values[r].producer = -1;
    p->values[r].reader_streams = 0;
    p->values[r].graph_output = -1;
  }
  for (size_t k = p->root->n_outputs; k-- > 0;) p->values[p->root->outputs[k]].graph_output = (int32_t)k;
  for (size_t c = 0; c < p->n_calls; c++)
    for (uint32_t j = 0; j < p->calls[c].n_out; j++)
      p->values[p->calls[c].out_values[j]].producer = (int32_t)c;
  p->used_streams = 1;
  uint64_t clock = 0;
  for (size_t c = 0; c < p->n_calls; c++) {
    mx_rt_call *call = &p->calls[c];
    int64_t chosen = -1;
    /* Continue a producer's chain when this call is the next thing on its stream. */
    for (uint32_t k = 0; k < call->n_in && chosen < 0; k++) {
      int32_t prod = p->values[call->in_values[k]].producer;
      if (prod >= 0 && tail[p->calls[prod].stream] == prod) chosen = p->calls[prod].stream;
    }
    /* Otherwise a fresh stream, else the one used longest ago. */
    for (uint32_t k = 0; k < n && chosen < 0; k++)
      if (tail[k] < 0) chosen = k;
    if (chosen < 0) {
      chosen = 0;
      for (uint32_t k = 1; k < n; k++)
        if (last_use[k] < last_use[chosen]) chosen = k;
    }
    call->stream = (uint32_t)chosen;
    tail[chosen] = (int64_t)c;
    last_use[chosen] = ++clock;
    p->used_streams |= 1u << chosen;
    free(call->waits);
    call->waits = NULL;
    call->n_waits = 0;
    for (uint32_t k = 0; k < call->n_in; k++) {
      mx_rt_value *v = &p->values[call->in_values[k]];
      v->reader_streams |= 1u << chosen;
      if (v->producer < 0 || p->calls[v->producer].stream == call->stream) continue;
      bool seen = false;
      for (uint32_t w = 0; w < call->n_waits; w++) seen = seen || call->waits[w] == (uint32_t)v->producer;
      if (seen) continue;
      uint32_t *nw = realloc(call->waits, (call->n_waits + 1) * sizeof *nw);
      if (!nw) return mx__fail(err, MX_ERR_OUT_OF_MEMORY, "out of host memory assigning streams");
      call->waits = nw;
      call->waits[call->n_waits++] = (uint32_t)v->producer;
    }
  }
  /* Outputs are delivered on their producer's stream (the step stream for inputs and constants). */
  for (size_t k = 0; k < p->root->n_outputs; k++) {
    mx_rt_value *v = &p->values[p->root->outputs[k]];
    v->reader_streams |= 1u << (v->producer >= 0 ? p->calls[v->producer].stream : 0);
  }
  return MX_OK;
}
