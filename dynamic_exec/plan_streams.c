/* Stream assignment and cross-stream events of a dynamic plan.
 *
 * Streams: list scheduling with unit op costs. Each device op starts on the stream where it
 * could start earliest (its producers done, the stream free); ties go to a stream whose last op
 * is one of its producers (a chain continues where it is), then to the lowest index. So a chain
 * stays on one stream and independent branches spread over up to max_streams.
 *
 * Events: vector clocks. Each stream knows, for every other stream, the position up to which it
 * is already ordered after it (through earlier waits, transitively). A dependency on an op of
 * another stream costs a wait only when it lies beyond that knowledge; waiting merges the
 * producer's clock. The host also orders streams: a data-dependent op's shape sync, and the
 * read-back before a host op reads device data, wait for a stream on the host, so every op
 * launched afterwards is ordered after that stream's clock without any event. Producers
 * processed newest first, so one wait often covers the others. What remains is the transitive
 * reduction of the cross-stream edges (per stream pair and position). */
#include <stdlib.h>
#include <string.h>

#include "dynamic_exec/dynamic_exec_impl.h"

typedef struct sched {
  uint32_t S;        /* streams available */
  uint32_t *vc;      /* n_ops * S: vector clock of each device op after it */
  uint32_t *known;   /* S * S: known[s*S + t] = position of t that s is ordered after */
  uint32_t *host;    /* S: positions the host has waited for */
  uint32_t *spos;    /* S: ops placed on each stream */
  uint32_t *pos;     /* n_ops: position of a device op on its stream (1-based) */
  uint64_t *finish;  /* n_ops: estimated finish time (unit costs) */
  uint64_t *free_at; /* S: time each stream becomes free */
  uint32_t *tail;    /* S: last op placed on each stream, or NONE */
  uint32_t *deps;    /* scratch: producer ops of one op */
} sched;

static void merge(uint32_t *dst, const uint32_t *src, uint32_t n) {
  for (uint32_t k = 0; k < n; k++)
    if (src[k] > dst[k]) dst[k] = src[k];
}

static int cmp_desc(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? 1 : x > y ? -1 : 0;
}

/* Distinct device producers of op i's inputs, newest first. */
static uint32_t producers(const mx_dyn_plan *p, const mx__dyn_op *op, uint32_t *deps) {
  uint32_t n = 0;
  for (uint32_t j = 0; j < op->n_in; j++) {
    mx_value_id v = op->nd->inputs[j];
    if (v == MX_NO_VALUE) continue;
    uint32_t src = p->vals[v].src_op;
    if (src == MX__DYN_NONE) continue;
    bool seen = false;
    for (uint32_t k = 0; k < n && !seen; k++) seen = deps[k] == src;
    if (!seen) deps[n++] = src;
  }
  qsort(deps, n, sizeof *deps, cmp_desc);
  return n;
}

static uint32_t pick_stream(const mx_dyn_plan *p, sched *s, const uint32_t *deps, uint32_t n_deps) {
  uint64_t ready = 0;
  for (uint32_t k = 0; k < n_deps; k++)
    if (s->finish[deps[k]] > ready) ready = s->finish[deps[k]];
  uint32_t best = 0;
  uint64_t best_start = UINT64_MAX;
  bool best_chain = false;
  for (uint32_t t = 0; t < s->S; t++) {
    uint64_t start = ready > s->free_at[t] ? ready : s->free_at[t];
    bool chain = false;
    for (uint32_t k = 0; k < n_deps && !chain; k++) chain = s->tail[t] == deps[k];
    if (start < best_start || (start == best_start && chain && !best_chain)) {
      best = t;
      best_start = start;
      best_chain = chain;
    }
  }
  (void)p;
  return best;
}

/* The host waits for the stream that produced v (read-back): record it in the host clock. */
static void host_reads(const mx_dyn_plan *p, sched *s, mx_value_id v) {
  uint32_t src = p->vals[v].src_op;
  if (src == MX__DYN_NONE) return;
  uint32_t t = p->ops[src].stream;
  merge(s->host, &s->known[t * s->S], s->S);
}

mx_status mx__dyn_plan_streams(mx_dyn_plan *p, mx_error *err) {
  const uint32_t S = p->opt.max_streams;
  const size_t n = p->n_ops;
  mx_status st = MX_OK;
  sched s = {.S = S};
  s.vc = calloc((n ? n : 1) * S, sizeof *s.vc);
  s.known = calloc((size_t)S * S, sizeof *s.known);
  s.host = calloc(S, sizeof *s.host);
  s.spos = calloc(S, sizeof *s.spos);
  s.pos = calloc(n ? n : 1, sizeof *s.pos);
  s.finish = calloc(n ? n : 1, sizeof *s.finish);
  s.free_at = calloc(S, sizeof *s.free_at);
  s.tail = malloc(S * sizeof *s.tail);
  s.deps = malloc((p->max_io ? p->max_io : 1) * sizeof *s.deps);
  uint32_t *wait_buf = malloc((n ? n : 1) * sizeof *wait_buf); /* waits of one op */
  uint32_t *waits = NULL, *op_of = NULL;                       /* op_of: plan op of each graph node */
  size_t n_waits = 0, cap_waits = 0;
  if (!s.vc || !s.known || !s.host || !s.spos || !s.pos || !s.finish || !s.free_at || !s.tail || !s.deps ||
      !wait_buf) {
    st = mx__fail_oom(err, "plan streams");
    goto done;
  }
  for (uint32_t t = 0; t < S; t++) s.tail[t] = MX__DYN_NONE;

  uint32_t used = 0;
  for (size_t i = 0; i < n; i++) {
    mx__dyn_op *op = &p->ops[i];
    op->wait_first = (uint32_t)n_waits;
    op->n_wait = 0;
    if (op->kind == MX__DYN_OP_HOST || (op->kind != MX__DYN_OP_SKIP && (op->flags & MX__DYN_INFER))) {
      /* Host code reads device values (read-back syncs their producer's stream). */
      uint64_t vi = op->kind == MX__DYN_OP_HOST ? ~0ull : op->nd->def->value_inputs;
      for (uint32_t j = 0; j < op->n_in; j++) {
        if (op->nd->inputs[j] == MX_NO_VALUE || j >= 64 || !((vi >> j) & 1)) continue;
        if (j == 0 && (op->flags & MX__DYN_SHAPE_ONLY)) continue;
        host_reads(p, &s, op->nd->inputs[j]);
      }
    }
    if (op->kind != MX__DYN_OP_DEVICE) continue;
    uint32_t nd = producers(p, op, s.deps);
    uint32_t t = pick_stream(p, &s, s.deps, nd);
    op->stream = (uint8_t)t;
    used |= 1u << t;
    uint32_t *kn = &s.known[t * S];
    merge(kn, s.host, S);
    uint32_t nw = 0;
    for (uint32_t k = 0; k < nd; k++) {
      uint32_t d = s.deps[k];
      uint32_t ds = p->ops[d].stream;
      if (ds == t) continue;
      p->info.cross_edges++;
      if (s.pos[d] <= kn[ds]) continue;
      merge(kn, &s.vc[(size_t)d * S], S);
      if (p->ops[d].event < 0) p->ops[d].event = (int32_t)p->n_events++;
      wait_buf[nw++] = (uint32_t)p->ops[d].event;
    }
    if (nw) {
      if (n_waits + nw > cap_waits) {
        size_t ncap = cap_waits ? cap_waits * 2 : 64;
        while (ncap < n_waits + nw) ncap *= 2;
        uint32_t *nwb = realloc(waits, ncap * sizeof *nwb);
        if (!nwb) {
          st = mx__fail_oom(err, "plan waits");
          goto done;
        }
        waits = nwb;
        cap_waits = ncap;
      }
      memcpy(waits + n_waits, wait_buf, nw * sizeof *wait_buf);
      n_waits += nw;
      op->n_wait = nw;
      p->info.events += nw;
    }
    s.pos[i] = ++s.spos[t];
    kn[t] = s.pos[i];
    memcpy(&s.vc[i * S], kn, S * sizeof *kn);
    uint64_t ready = 0;
    for (uint32_t k = 0; k < nd; k++)
      if (s.finish[s.deps[k]] > ready) ready = s.finish[s.deps[k]];
    uint64_t start = ready > s.free_at[t] ? ready : s.free_at[t];
    s.finish[i] = start + 1;
    s.free_at[t] = s.finish[i];
    s.tail[t] = (uint32_t)i;
    if (op->flags & MX__DYN_DATA_DEP) merge(s.host, kn, S);
  }
  p->n_streams = 1;
  for (uint32_t t = 0; t < S; t++)
    if (used & (1u << t)) p->n_streams = t + 1;
  p->waits = waits;
  waits = NULL;

  /* Host-resident values read by device ops on several streams: one upload, one event. */
  op_of = malloc((p->g->n_nodes ? p->g->n_nodes : 1) * sizeof *op_of);
  if (!op_of) {
    st = mx__fail_oom(err, "plan streams");
    goto done;
  }
  for (size_t k = 0; k < p->g->n_nodes; k++) op_of[k] = MX__DYN_NONE;
  for (size_t i = 0; i < n; i++) op_of[p->ops[i].node] = (uint32_t)i;
  for (size_t v = 0; v < p->n_values; v++) {
    mx__dyn_pval *pv = &p->vals[v];
    if (pv->home == MX__DYN_HOME_NONE || pv->home == MX__DYN_HOME_DEVICE || !(pv->flags & MX__DYN_V_DEV_READ))
      continue;
    uint32_t streams = 0;
    const mx_value *val = &p->g->values[v];
    for (size_t c = 0; c < val->n_consumers; c++) {
      uint32_t i = op_of[val->consumers[c]];
      if (i != MX__DYN_NONE && p->ops[i].kind == MX__DYN_OP_DEVICE) streams |= 1u << p->ops[i].stream;
    }
    if (__builtin_popcount(streams) > 1) pv->upload_event = (int32_t)p->n_events++;
  }

done:
  free(op_of);
  free(waits);
  free(wait_buf);
  free(s.vc);
  free(s.known);
  free(s.host);
  free(s.spos);
  free(s.pos);
  free(s.finish);
  free(s.free_at);
  free(s.tail);
  free(s.deps);
  return st;
}
