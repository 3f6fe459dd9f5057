/* Validation of plans that come from outside the process (.mxm files): nothing in them is
 * trusted. Every count, index, size and offset is checked against the plan's own tables (alloc
 * ids against the allocation table, tensor ranges inside their region, events recorded once and
 * before their waits, workspaces inside the FM arena), and every kernel task is re-derived: its
 * attributes are checked against the op's schema and parsed again (the params bytes must come
 * out identical), inference is run again on the stored input shapes (the stored output dtypes
 * and dims must come out identical), the CPU kernel is looked up again and its workspace must
 * fit the stored slice, and no output or workspace shares bytes with another tensor of its
 * task (but for in-place elementwise outputs). On several streams, tasks sharing bytes must be
 * ordered by events (check_order.c). A plan that passes is exactly what compile could have
 * produced for some graph, so the kernels never see params or shapes their op's rules would
 * reject, nor overlapping ranges, and the streams never race. */
#include <stdlib.h>
#include <string.h>

#include "graph/ops/op.h"
#include "static_exec/static_exec_impl.h"

#define BAD(...) mx__fail(err, MX_ERR_MALFORMED, __VA_ARGS__)

static mx_status check_tensor(const mx_static_plan *p, uint32_t ti, uint32_t i, bool output,
                              const mx__ptensor *t, mx_error *err) {
  const mx__ptask *pt = &p->tasks[ti];
  if (t->dtype == MX_DTYPE_UNDEFINED) {
    if (output || pt->kind != MX__TASK_KERNEL || t->alloc != MX__NO_ALLOC)
      return BAD("task %u ('%s') tensor %u: no dtype", ti, pt->name, i);
    return MX_OK;
  }
  if (!mx_dtype_is_supported((int)t->dtype))
    return BAD("task %u ('%s') tensor %u: unknown dtype %d", ti, pt->name, i, (int)t->dtype);
  uint64_t nb;
  if (!mx__dims_nbytes(t->dtype, t->rank, t->dims, &nb) || nb != t->nbytes)
    return BAD("task %u ('%s') tensor %u: invalid rank, dims or size", ti, pt->name, i);
  /* A stored value is the whole tensor's value: one entry per element. */
  if (t->n_values > MX_SV_MAX || (t->n_values >= 0 && !t->values) ||
      (t->n_values >= 0 && (uint64_t)t->n_values * mx_dtype_size(t->dtype) != nb))
    return BAD("task %u ('%s') tensor %u: invalid stored value", ti, pt->name, i);
  if (t->alloc == MX__NO_ALLOC) {
    if (nb)
      return BAD("task %u ('%s') tensor %u: %llu bytes without an address", ti, pt->name, i,
                 (unsigned long long)nb);
    return MX_OK;
  }
  if (!nb) return BAD("task %u ('%s') tensor %u: an address for an empty tensor", ti, pt->name, i);
  if (t->alloc >= mx__plan_ids(p))
    return BAD("task %u ('%s') tensor %u: alloc id %u out of range (%u entries)", ti, pt->name, i, t->alloc,
               mx__plan_ids(p));
  uint64_t region = mx__plan_id_size(p, t->alloc);
  if (t->offset > region || nb > region - t->offset)
    return BAD("task %u ('%s') tensor %u: bytes %llu..%llu outside its %llu-byte region", ti, pt->name, i,
               (unsigned long long)t->offset, (unsigned long long)(t->offset + nb),
               (unsigned long long)region);
  if (t->offset % mx_dtype_size(t->dtype))
    return BAD("task %u ('%s') tensor %u: offset %llu is not aligned to its element size", ti, pt->name, i,
               (unsigned long long)t->offset);
  mx_static_alloc_kind kind = mx__plan_id_kind(p, t->alloc, NULL);
  if (output && (kind == MX_STATIC_WEIGHT || kind == MX_STATIC_INPUT))
    return BAD("task %u ('%s') output %u: writes the read-only %s region", ti, pt->name, i,
               mx__static_alloc_kind_name(kind));
  return MX_OK;
}

static mx_status check_io(const mx__pio *io, uint32_t n, const char *what, mx_error *err) {
  for (uint32_t i = 0; i < n; i++) {
    uint64_t nb;
    if (!io[i].name) return BAD("%s %u: no name", what, i);
    if (!mx_dtype_is_supported((int)io[i].dtype) ||
        !mx__dims_nbytes(io[i].dtype, io[i].rank, io[i].dims, &nb) || nb != io[i].nbytes)
      return BAD("%s %u ('%s'): invalid dtype, rank, dims or size", what, i, io[i].name);
  }
  return MX_OK;
}

/* Schema check of a task's attributes (like graph inference does for nodes). */
static mx_status check_attrs(const mx__ptask *pt, uint32_t ti, const mx_op_def *def, mx_error *err) {
  for (uint32_t i = 0; i < pt->n_attrs; i++) {
    const mx_attr *a = &pt->attrs[i];
    const mx_attr_spec *s = def->attrs;
    while (s && s->name && strcmp(s->name, a->name) != 0) s++;
    if (!s || !s->name) return BAD("task %u ('%s'): unknown attribute '%s'", ti, pt->name, a->name);
    if (s->type != a->type || a->type == MX_ATTR_GRAPH)
      return BAD("task %u ('%s'): attribute '%s' has the wrong type", ti, pt->name, a->name);
    for (uint32_t j = 0; j < i; j++)
      if (strcmp(pt->attrs[j].name, a->name) == 0)
        return BAD("task %u ('%s'): attribute '%s' given twice", ti, pt->name, a->name);
  }
  for (const mx_attr_spec *s = def->attrs; s && s->name; s++) {
    if (!s->required) continue;
    bool found = false;
    for (uint32_t i = 0; i < pt->n_attrs && !found; i++) found = strcmp(pt->attrs[i].name, s->name) == 0;
    if (!found) return BAD("task %u ('%s'): required attribute '%s' is missing", ti, pt->name, s->name);
  }
  return MX_OK;
}

/* Input info for re-inference: shapes, constant data from the weights, stored values. */
static void input_info(const mx_static_plan *p, mx_symtab *syms, const mx__ptensor *t, mx_value_info *info,
                       mx_tensor *data, mx_dim *sv) {
  memset(info, 0, sizeof *info);
  info->sv_len = -1;
  if (t->dtype == MX_DTYPE_UNDEFINED) return;
  info->present = true;
  info->dtype = t->dtype;
  info->shape.rank = t->rank;
  for (int32_t k = 0; k < t->rank; k++) info->shape.dims[k] = t->dims[k];
  if (t->alloc == MX__ID_WEIGHT) {
    memset(data, 0, sizeof *data);
    data->dtype = t->dtype;
    data->rank = t->rank;
    memcpy(data->dims, t->dims, sizeof data->dims);
    data->data = p->weights + t->offset;
    info->data = data;
    uint64_t n = t->nbytes / mx_dtype_size(t->dtype);
    if ((t->dtype == MX_INT64 || t->dtype == MX_INT32) && n <= MX_SV_MAX) {
      for (uint64_t k = 0; k < n; k++) {
        int64_t v;
        if (t->dtype == MX_INT64)
          memcpy(&v, (const char *)data->data + 8 * k, 8);
        else {
          int32_t v32;
          memcpy(&v32, (const char *)data->data + 4 * k, 4);
          v = v32;
        }
        sv[k] = mx_sym_const(syms, v);
      }
      info->sv = sv;
      info->sv_len = (int32_t)n;
    }
  } else if (t->n_values >= 0) {
    for (int32_t k = 0; k < t->n_values; k++) sv[k] = mx_sym_const(syms, t->values[k]);
    info->sv = sv;
    info->sv_len = t->n_values;
  }
}

/* Re-derives a kernel task: schema, parse, inference, kernel, workspace. */
/* True when tensors a and b (both with addresses) share bytes; *same when they are the very same
 * range. */
static bool overlaps(const mx__ptensor *a, const mx__ptensor *b, bool *same) {
  *same = a->alloc == b->alloc && a->offset == b->offset && a->nbytes == b->nbytes;
  return a->alloc == b->alloc && a->offset < b->offset + b->nbytes && b->offset < a->offset + a->nbytes;
}

/* A kernel's outputs are written while its inputs are read: an output may share bytes with no
 * other tensor of the task, except output 0 of an elementwise op lying exactly over an input
 * (in place), and the workspace may share bytes with none. Kernels copy and compute on the
 * assumption that ranges do not overlap (memcpy, restrict), so a plan that breaks it is refused
 * here rather than left to produce undefined behaviour. */
static mx_status check_overlaps(const mx_static_plan *p, uint32_t ti, bool elementwise, mx_error *err) {
  const mx__ptask *pt = &p->tasks[ti];
  uint32_t nt = pt->n_in + pt->n_out;
  for (uint32_t o = pt->n_in; o < nt; o++) {
    const mx__ptensor *out = &pt->t[o];
    if (out->alloc == MX__NO_ALLOC) continue;
    for (uint32_t i = 0; i < nt; i++) {
      const mx__ptensor *x = &pt->t[i];
      bool same;
      if (i == o || x->alloc == MX__NO_ALLOC || !overlaps(out, x, &same)) continue;
      if (same && elementwise && o == pt->n_in && i < pt->n_in) continue;
      return BAD("task %u ('%s'): output %u shares bytes with %s %u", ti, pt->name, o - pt->n_in,
                 i < pt->n_in ? "input" : "output", i < pt->n_in ? i : i - pt->n_in);
    }
  }
  if (pt->ws_size) {
    mx__ptensor ws = {.alloc = MX__NO_ALLOC, .offset = pt->ws_offset, .nbytes = pt->ws_size};
    for (uint32_t i = 0; i < nt; i++) {
      const mx__ptensor *x = &pt->t[i];
      bool same;
      if (x->alloc == MX__NO_ALLOC || mx__plan_id_kind(p, x->alloc, NULL) != MX_STATIC_FM) continue;
      ws.alloc = x->alloc;
      if (overlaps(&ws, x, &same))
        return BAD("task %u ('%s'): its workspace shares bytes with tensor %u", ti, pt->name, i);
    }
  }
  return MX_OK;
}

static mx_status check_kernel(const mx_static_plan *p, uint32_t ti, mx_symtab *syms, mx_error *err) {
  const mx__ptask *pt = &p->tasks[ti];
  const mx_op_def *def = mx__op_find(pt->domain, pt->op);
  if (!def) return BAD("task %u ('%s'): unknown op '%s'", ti, pt->name, pt->op);
  if (pt->n_in < def->min_inputs || (def->max_inputs != MX_VARIADIC && pt->n_in > def->max_inputs) ||
      pt->n_out < def->min_outputs || pt->n_out > def->max_outputs)
    return BAD("task %u ('%s'): %u inputs / %u outputs do not fit op %s", ti, pt->name, pt->n_in, pt->n_out,
               pt->op);
  if (def->flags & MX_OP_DATA_DEPENDENT)
    return BAD("task %u ('%s'): op %s is data-dependent", ti, pt->name, pt->op);
  if (pt->params_size != def->params_size || (pt->params_size && !pt->params))
    return BAD("task %u ('%s'): %u params bytes, op %s has %zu", ti, pt->name, pt->params_size, pt->op,
               def->params_size);
  for (uint32_t i = 0; i < def->min_inputs; i++)
    if (pt->t[i].dtype == MX_DTYPE_UNDEFINED)
      return BAD("task %u ('%s'): required input %u is missing", ti, pt->name, i);
  mx_status st = check_attrs(pt, ti, def, err);
  if (st != MX_OK) return st;

  uint32_t ni = pt->n_in, no = pt->n_out;
  void *params = def->params_size ? calloc(1, def->params_size) : NULL;
  mx_value_info *in = calloc(ni ? ni : 1, sizeof *in);
  mx_value_info *out = calloc(no ? no : 1, sizeof *out);
  mx_tensor *data = calloc(ni ? ni : 1, sizeof *data);
  mx_dim *in_sv = calloc((size_t)(ni ? ni : 1) * MX_SV_MAX, sizeof *in_sv);
  mx_dim *out_sv = calloc((size_t)(no ? no : 1) * MX_SV_MAX, sizeof *out_sv);
  mx_kernel_call *call = calloc(1, mx__kernel_call_size(ni + no));
  if ((def->params_size && !params) || !in || !out || !data || !in_sv || !out_sv || !call) {
    st = mx__fail_oom(err, "plan check");
    goto free_scratch;
  }
  mx_error perr;
  mx_error_clear(&perr);
  if (def->params_size) {
    mx_parse_ctx pc = {def, pt->attrs, pt->n_attrs, pt->opset, ni, no, pt->name, &perr};
    if (def->parse(&pc, params) != MX_OK) {
      st = BAD("task %u ('%s'): its attributes do not parse: %s", ti, pt->name, perr.message);
      goto free_scratch;
    }
    if (memcmp(params, pt->params, def->params_size) != 0) {
      st = BAD("task %u ('%s'): the params bytes differ from its parsed attributes", ti, pt->name);
      goto free_scratch;
    }
  }
  for (uint32_t i = 0; i < ni; i++)
    input_info(p, syms, &pt->t[i], &in[i], &data[i], in_sv + (size_t)i * MX_SV_MAX);
  for (uint32_t k = 0; k < no; k++) {
    out[k].present = true;
    out[k].shape.rank = MX_RANK_UNKNOWN;
    out[k].sv = out_sv + (size_t)k * MX_SV_MAX;
    out[k].sv_len = -1;
  }
  mx_infer_ctx ctx = {.syms = syms,
                      .params = pt->params,
                      .opset = pt->opset,
                      .node_name = pt->name,
                      .n_in = ni,
                      .n_out = no,
                      .in = in,
                      .out = out,
                      .out_sv = out_sv,
                      .runtime = true,
                      .err = &perr};
  if (def->infer(&ctx) != MX_OK) {
    st = BAD("task %u ('%s'): inference rejects its shapes: %s", ti, pt->name, perr.message);
    goto free_scratch;
  }
  for (uint32_t k = 0; k < no; k++) {
    const mx__ptensor *t = &pt->t[ni + k];
    bool same = out[k].dtype == t->dtype && out[k].shape.rank == t->rank;
    for (int32_t d = 0; same && d < t->rank; d++) same = out[k].shape.dims[d] == t->dims[d];
    if (!same) {
      st = BAD("task %u ('%s'): output %u dtype or shape differs from what inference gives", ti, pt->name, k);
      goto free_scratch;
    }
  }
  call->params = pt->params;
  call->n_in = (uint16_t)ni;
  call->n_out = (uint16_t)no;
  for (uint32_t i = 0; i < ni + no; i++) {
    call->t[i].dtype = pt->t[i].dtype;
    mx__ktensor_set_dims(&call->t[i], pt->t[i].dtype == MX_DTYPE_UNDEFINED ? 0 : pt->t[i].rank,
                         pt->t[i].dims);
  }
  const mx_kernel_def *kd = mx__kernel_find(pt->domain, pt->op, call);
  if (!kd) {
    st = BAD("task %u ('%s'): no CPU kernel for op %s with these dtypes", ti, pt->name, pt->op);
    goto free_scratch;
  }
  size_t need = kd->workspace ? kd->workspace(call) : 0;
  if (need > pt->ws_size) {
    /* a plan written by an older mixrt whose kernel needed less scratch for the same shapes */
    st = BAD("task %u ('%s'): workspace of %llu bytes, the kernel needs %zu (a plan compiled by an "
             "older mixrt: compile the model again)",
             ti, pt->name, (unsigned long long)pt->ws_size, need);
    goto free_scratch;
  }
  st = check_overlaps(p, ti, (def->flags & MX_OP_ELEMENTWISE) != 0, err);

free_scratch:
  free(call);
  free(out_sv);
  free(in_sv);
  free(data);
  free(out);
  free(in);
  free(params);
  return st;
}

static mx_status check_task(const mx_static_plan *p, uint32_t ti, uint32_t *recorded_by, mx_symtab *syms,
                            mx_error *err) {
  const mx__ptask *pt = &p->tasks[ti];
  if (!pt->name || !pt->op || !pt->domain) return BAD("task %u: missing name or op", ti);
  if (pt->kind != MX__TASK_KERNEL && pt->kind != MX__TASK_COPY)
    return BAD("task %u ('%s'): unknown kind %d", ti, pt->name, (int)pt->kind);
  if (pt->stream >= p->n_streams)
    return BAD("task %u ('%s'): stream %u out of range (%u streams)", ti, pt->name, pt->stream, p->n_streams);
  for (uint32_t k = 0; k < pt->n_waits; k++) {
    uint32_t e = pt->waits[k];
    if (e >= p->n_events || recorded_by[e] == MX__NONE)
      return BAD("task %u ('%s'): waits for event %u, which no earlier task records", ti, pt->name, e);
  }
  for (uint32_t k = 0; k < pt->n_records; k++) {
    uint32_t e = pt->records[k];
    if (e >= p->n_events || recorded_by[e] != MX__NONE)
      return BAD("task %u ('%s'): records event %u, out of range or recorded twice", ti, pt->name, e);
    recorded_by[e] = ti;
  }
  uint32_t nt = pt->n_in + pt->n_out;
  if (nt > MX__MAX_TASK_TENSORS || pt->n_in > MX__MAX_TASK_TENSORS || !pt->t)
    return BAD("task %u ('%s'): %u tensors", ti, pt->name, nt);
  for (uint32_t i = 0; i < nt; i++) {
    mx_status st = check_tensor(p, ti, i, i >= pt->n_in, &pt->t[i], err);
    if (st != MX_OK) return st;
  }
  if (pt->kind == MX__TASK_COPY) {
    if (pt->n_in != 1 || pt->n_out != 1 || pt->t[0].alloc == MX__NO_ALLOC || pt->t[1].alloc == MX__NO_ALLOC ||
        pt->t[0].nbytes != pt->t[1].nbytes || mx__plan_id_kind(p, pt->t[1].alloc, NULL) != MX_STATIC_OUTPUT ||
        pt->ws_size)
      return BAD("task %u ('%s'): a copy needs one source and one OUTPUT destination of equal size", ti,
                 pt->name);
    bool same;
    if (overlaps(&pt->t[0], &pt->t[1], &same))
      return BAD("task %u ('%s'): a copy's source and destination share bytes", ti, pt->name);
    return MX_OK;
  }
  if (pt->ws_size) {
    if (pt->ws_offset % 64 || pt->ws_offset > p->fm_bytes || pt->ws_size > p->fm_bytes - pt->ws_offset)
      return BAD("task %u ('%s'): workspace %llu+%llu outside the %llu-byte FM arena", ti, pt->name,
                 (unsigned long long)pt->ws_offset, (unsigned long long)pt->ws_size,
                 (unsigned long long)p->fm_bytes);
  }
  return check_kernel(p, ti, syms, err);
}

mx_status mx__plan_check(const mx_static_plan *p, mx_error *err) {
  if (!p) return mx__fail(err, MX_ERR_INVALID_ARGUMENT, "NULL plan");
  if (p->n_streams < 1 || p->n_streams > MX_STATIC_MAX_STREAMS)
    return BAD("plan '%s': %u streams (1..%u)", p->name, p->n_streams, MX_STATIC_MAX_STREAMS);
  if ((unsigned)p->mode > MX_HAL_MODEL_INDIRECT) return BAD("plan '%s': unknown HAL mode", p->name);
  if (p->n_tasks > MX__MAX_TASKS || p->n_events > p->n_tasks)
    return BAD("plan '%s': %u tasks, %u events", p->name, p->n_tasks, p->n_events);
  if ((uint64_t)p->n_inputs + p->n_outputs > MX__MAX_IO)
    return BAD("plan '%s': too many inputs and outputs", p->name);
  if (p->weight_bytes && !p->weights) return BAD("plan '%s': weights missing", p->name);
  if (p->fm_bytes % 64) return BAD("plan '%s': FM arena size not a multiple of 64", p->name);
  mx_status st = check_io(p->inputs, p->n_inputs, "input", err);
  if (st == MX_OK) st = check_io(p->outputs, p->n_outputs, "output", err);
  if (st != MX_OK) return st;
  for (uint32_t b = 0; b < p->n_buffers; b++) {
    const mx__pbuf *B = &p->buffers[b];
    if (B->offset > p->fm_bytes || B->size > p->fm_bytes - B->offset)
      return BAD("plan '%s': buffer %u outside the FM arena", p->name, b);
    for (uint32_t k = 0; k < B->n_users; k++)
      if (B->users[k] >= p->n_tasks || (k && B->users[k] <= B->users[k - 1]))
        return BAD("plan '%s': buffer %u has invalid users", p->name, b);
  }
  uint32_t *recorded_by = malloc((p->n_events ? p->n_events : 1) * sizeof *recorded_by);
  mx_symtab *syms = NULL;
  if (!recorded_by || mx_symtab_create(&syms) != MX_OK) {
    free(recorded_by);
    return mx__fail_oom(err, "plan check");
  }
  for (uint32_t e = 0; e < p->n_events; e++) recorded_by[e] = MX__NONE;
  for (uint32_t t = 0; t < p->n_tasks && st == MX_OK; t++) st = check_task(p, t, recorded_by, syms, err);
  for (uint32_t e = 0; st == MX_OK && e < p->n_events; e++)
    if (recorded_by[e] == MX__NONE) st = BAD("plan '%s': event %u is never recorded", p->name, e);
  if (st == MX_OK) st = mx__plan_check_order(p, err);
  mx_symtab_destroy(syms);
  free(recorded_by);
  return st;
}
