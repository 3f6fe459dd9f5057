/* Static plans as objects: creation and destruction, the allocation table's layout, read
 * accessors for inputs, outputs, tasks and buffers, and the memory-plan report. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "static_exec/static_exec_impl.h"

const char *mx__static_alloc_kind_name(mx_static_alloc_kind k) {
  switch (k) {
    case MX_STATIC_WEIGHT: return "WEIGHT";
    case MX_STATIC_FM: return "FM";
    case MX_STATIC_INPUT: return "INPUT";
    case MX_STATIC_OUTPUT: return "OUTPUT";
  }
  return "?";
}

void mx__static_options_init(mx_static_options *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->version = MX_STATIC_OPTIONS_VERSION;
  o->max_streams = 1;
  o->mode = MX_HAL_MODEL_PATCH;
}

mx_static_plan *mx__plan_new(void) {
  mx_static_plan *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  mx__arena_init(&p->arena, 16 * 1024);
  p->n_streams = 1;
  p->placement = "";
  p->name = "";
  return p;
}

void mx__static_plan_destroy(mx_static_plan *p) {
  if (!p) return;
  if (p->weights_map)
    mx__mxm_mapping_release(p->weights_map);
  else
    free(p->weights);
  mx__arena_release(&p->arena);
  free(p);
}

bool mx__dims_nbytes(mx_dtype dtype, int32_t rank, const int64_t *dims, uint64_t *out) {
  size_t es = mx_dtype_size(dtype);
  if (!es || rank < 0 || rank > MX_MAX_RANK) return false;
  uint64_t n = es;
  for (int32_t k = 0; k < rank; k++) {
    if (dims[k] < 0) return false;
    if (dims[k] && n > UINT64_MAX / (uint64_t)dims[k]) return false;
    n *= (uint64_t)dims[k];
  }
  if (n > (uint64_t)INT64_MAX) return false;
  *out = n;
  return true;
}

mx_static_alloc_kind mx__plan_id_kind(const mx_static_plan *p, uint32_t id, uint32_t *index) {
  if (index) *index = 0;
  if (id == MX__ID_WEIGHT) return MX_STATIC_WEIGHT;
  if (id == MX__ID_FM) return MX_STATIC_FM;
  if (id - MX__ID_INPUT0 < p->n_inputs) {
    if (index) *index = id - MX__ID_INPUT0;
    return MX_STATIC_INPUT;
  }
  if (index) *index = id - MX__ID_INPUT0 - p->n_inputs;
  return MX_STATIC_OUTPUT;
}

uint64_t mx__plan_id_size(const mx_static_plan *p, uint32_t id) {
  uint32_t idx;
  if (id >= mx__plan_ids(p)) return 0;
  switch (mx__plan_id_kind(p, id, &idx)) {
    case MX_STATIC_WEIGHT: return p->weight_bytes;
    case MX_STATIC_FM: return p->fm_bytes;
    case MX_STATIC_INPUT: return p->inputs[idx].nbytes;
    case MX_STATIC_OUTPUT: return p->outputs[idx].nbytes;
  }
  return 0;
}

mx_status mx__plan_copy_attrs(mx_static_plan *p, const mx_attr *src, uint32_t n, mx_attr **out,
                              mx_error *err) {
  *out = NULL;
  if (!n) return MX_OK;
  mx_attr *a = mx__arena_array(&p->arena, n, sizeof *a, 8);
  if (!a) return mx__fail_oom(err, "plan attributes");
  for (uint32_t i = 0; i < n; i++) {
    const mx_attr *s = &src[i];
    mx_attr *d = &a[i];
    memset(d, 0, sizeof *d);
    d->name = mx__arena_strdup(&p->arena, s->name ? s->name : "");
    d->type = s->type;
    d->i = s->i;
    d->f = s->f;
    d->count = s->count;
    if (!d->name) return mx__fail_oom(err, "plan attributes");
    switch (s->type) {
      case MX_ATTR_STRING:
        d->s = mx__arena_strdup(&p->arena, s->s ? s->s : "");
        if (!d->s) return mx__fail_oom(err, "plan attributes");
        break;
      case MX_ATTR_INTS:
        d->ints = mx__arena_memdup(&p->arena, s->ints, s->count * sizeof *s->ints, 8);
        if (!d->ints) return mx__fail_oom(err, "plan attributes");
        break;
      case MX_ATTR_FLOATS:
        d->floats = mx__arena_memdup(&p->arena, s->floats, s->count * sizeof *s->floats, 8);
        if (!d->floats) return mx__fail_oom(err, "plan attributes");
        break;
      case MX_ATTR_STRINGS: {
        const char **strs = mx__arena_array(&p->arena, s->count ? s->count : 1, sizeof *strs, 8);
        if (!strs) return mx__fail_oom(err, "plan attributes");
        for (size_t k = 0; k < s->count; k++) {
          strs[k] = mx__arena_strdup(&p->arena, s->strings[k] ? s->strings[k] : "");
          if (!strs[k]) return mx__fail_oom(err, "plan attributes");
        }
        d->strings = strs;
        break;
      }
      case MX_ATTR_TENSOR: {
        size_t nb = 0;
        if (!s->tensor || !mx_tensor_nbytes(s->tensor, &nb))
          return mx__fail(err, MX_ERR_INVALID_GRAPH, "attribute '%s': invalid tensor", d->name);
        mx_tensor *t = mx__arena_alloc(&p->arena, sizeof *t, 8);
        if (!t) return mx__fail_oom(err, "plan attributes");
        *t = *s->tensor;
        t->name = NULL;
        t->placement = MX_HOST;
        t->data = mx__arena_memdup(&p->arena, s->tensor->data, nb, 16);
        if (!t->data) return mx__fail_oom(err, "plan attributes");
        d->tensor = t;
        break;
      }
      case MX_ATTR_GRAPH:
        return mx__fail(err, MX_ERR_UNSUPPORTED,
                        "attribute '%s' holds a subgraph: a static plan cannot store it", d->name);
      default: break;
    }
  }
  *out = a;
  return MX_OK;
}

const char *mx__static_plan_name(const mx_static_plan *p) { return p ? p->name : ""; }

void mx__static_plan_report(const mx_static_plan *p, mx_static_report *r) {
  if (!r) return;
  memset(r, 0, sizeof *r);
  if (!p) return;
  r->fm_bytes = p->fm_bytes;
  r->lower_bound = p->lower_bound;
  r->no_reuse = p->no_reuse;
  r->weight_bytes = p->weight_bytes;
  r->tasks = p->n_tasks;
  for (uint32_t t = 0; t < p->n_tasks; t++) {
    const mx__ptask *k = &p->tasks[t];
    if (k->kind == MX__TASK_COPY)
      r->copy_tasks++;
    else
      r->kernel_tasks++;
    r->workspace_bytes += k->ws_size;
    r->waits += k->n_waits;
  }
  r->streams = p->n_streams;
  r->events = p->n_events;
  r->cross_edges = p->cross_edges;
  r->buffers = p->n_buffers;
  r->in_place = p->in_place;
  r->aliases = p->aliases;
  r->inputs = p->n_inputs;
  r->outputs = p->n_outputs;
  r->placement = p->placement;
}

static void print_io(FILE *out, const char *what, const mx__pio *io) {
  fprintf(out, "  %-6s %-24s %-9s [", what, io->name, mx_dtype_name(io->dtype));
  for (int32_t k = 0; k < io->rank; k++) fprintf(out, "%s%" PRId64, k ? ", " : "", io->dims[k]);
  fprintf(out, "] %" PRIu64 " bytes%s\n", io->nbytes, io->frozen ? " (frozen)" : "");
}

void mx__static_plan_print_report(const mx_static_plan *p, FILE *out) {
  if (!p || !out) return;
  mx_static_report r;
  mx__static_plan_report(p, &r);
  fprintf(out, "static plan '%s': %u tasks (%u kernels, %u copies), %u aliases run as no task\n", p->name,
          r.tasks, r.kernel_tasks, r.copy_tasks, r.aliases);
  fprintf(out, "  streams: %u; events: %u (%u cross-stream edges, %u waits kept)\n", r.streams, r.events,
          r.cross_edges, r.waits);
  fprintf(out, "  weights: %" PRIu64 " bytes\n", r.weight_bytes);
  fprintf(out,
          "  FM arena: %" PRIu64 " bytes (%u buffers, %u in place, workspaces %" PRIu64
          " bytes; placement order: %s)\n",
          r.fm_bytes, r.buffers, r.in_place, r.workspace_bytes, r.placement);
  if (r.lower_bound)
    fprintf(out, "  lower bound: %" PRIu64 " bytes (arena / bound = %.3f)\n", r.lower_bound,
            (double)r.fm_bytes / (double)r.lower_bound);
  else
    fprintf(out, "  lower bound: 0 bytes\n");
  if (r.no_reuse)
    fprintf(out, "  no reuse: %" PRIu64 " bytes (saving %.1f%%)\n", r.no_reuse,
            100.0 * (1.0 - (double)r.fm_bytes / (double)r.no_reuse));
  else
    fprintf(out, "  no reuse: 0 bytes\n");
  for (uint32_t i = 0; i < p->n_inputs; i++) print_io(out, "input", &p->inputs[i]);
  for (uint32_t i = 0; i < p->n_outputs; i++) print_io(out, "output", &p->outputs[i]);
}

bool mx__pio_info(const mx__pio *io, mx_static_io *out) {
  memset(out, 0, sizeof *out);
  out->name = io->name;
  out->dtype = io->dtype;
  out->rank = io->rank;
  memcpy(out->dims, io->dims, sizeof out->dims);
  out->nbytes = io->nbytes;
  out->frozen = io->frozen;
  return true;
}

size_t mx__static_plan_input_count(const mx_static_plan *p) { return p ? p->n_inputs : 0; }
size_t mx__static_plan_output_count(const mx_static_plan *p) { return p ? p->n_outputs : 0; }

bool mx__static_plan_input(const mx_static_plan *p, size_t index, mx_static_io *out) {
  if (!p || !out || index >= p->n_inputs) return false;
  return mx__pio_info(&p->inputs[index], out);
}

bool mx__static_plan_output(const mx_static_plan *p, size_t index, mx_static_io *out) {
  if (!p || !out || index >= p->n_outputs) return false;
  return mx__pio_info(&p->outputs[index], out);
}

size_t mx__static_plan_task_count(const mx_static_plan *p) { return p ? p->n_tasks : 0; }

bool mx__static_plan_task(const mx_static_plan *p, size_t index, mx_static_task_info *out) {
  if (!p || !out || index >= p->n_tasks) return false;
  const mx__ptask *t = &p->tasks[index];
  memset(out, 0, sizeof *out);
  out->name = t->name;
  out->op = t->op;
  out->copy = t->kind == MX__TASK_COPY;
  out->stream = t->stream;
  out->waits = t->waits;
  out->n_waits = t->n_waits;
  out->records = t->records;
  out->n_records = t->n_records;
  return true;
}

size_t mx__static_plan_buffer_count(const mx_static_plan *p) { return p ? p->n_buffers : 0; }

bool mx__static_plan_buffer(const mx_static_plan *p, size_t index, mx_static_buffer_info *out) {
  if (!p || !out || index >= p->n_buffers) return false;
  const mx__pbuf *b = &p->buffers[index];
  memset(out, 0, sizeof *out);
  out->offset = b->offset;
  out->size = b->size;
  out->users = b->users;
  out->n_users = b->n_users;
  out->workspace = b->workspace;
  out->name = b->name;
  return true;
}
