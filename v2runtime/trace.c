/* Session traces in Chrome's trace-event JSON (see trace.h). Host slices are appended by the
 * executors' node hook; device slices are reserved on the host and timed by two host callbacks
 * queued on the stream around the work, so their times are when the stream really ran it. */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/grow.h"
#include "common/json.h"
#include "hal/hal.h"
#include "v2runtime/exe_registry.h"
#include "v2runtime/session_impl.h"
#include "v2runtime/trace.h"

void mx__trace_release(mx_trace *t) {
  free(t->host);
  free(t->device);
  t->host = NULL;
  t->device = NULL;
  t->n_host = t->cap_host = 0;
  atomic_store(&t->n_device, 0);
  t->on = false;
}

mx_status mx__trace_begin(mx_session *s) {
  mx_trace *t = &s->trace;
  mx__trace_release(t);
  t->device = calloc(MX_TRACE_DEVICE_MAX, sizeof *t->device);
  if (!t->device) return mx__fail(&s->err, MX_ERR_OUT_OF_MEMORY, "out of host memory starting a trace");
  t->dropped = 0;
  t->lanes = 1 + s->n_streams;
  t->on = true;
  return MX_OK;
}

/* A label for node `index` of the Main graph: kernel name, call and op. */
static void node_label(const mx_session *s, uint32_t index, char *buf, size_t cap) {
  const mx_exe_node *nd = &s->prog->main.nodes[index];
  const mx_exe_kernel_def *kd = mx__exe_kernel_at(nd->kernel);
  const mx_kattr *a = nd->attr;
  const char *what = "";
  char opname[96] = "";
  if (a && a->call != UINT32_MAX && a->call < s->prog->n_calls) {
    const mx_rt_call *c = &s->prog->calls[a->call];
    what = c->name;
    if (c->unknown && c->dplan && a->op < mx__dyn_op_count(c->dplan)) {
      const mx_graph *body = NULL;
      const mx_node *call = &s->prog->root->nodes[c->node];
      for (uint32_t k = 0; k < call->n_attrs && !body; k++)
        if (call->attrs[k].type == MX_ATTR_GRAPH) body = call->attrs[k].graph;
      mx_node_id nid = mx__dyn_op_node(c->dplan, a->op);
      if (body && nid < body->n_nodes) snprintf(opname, sizeof opname, " %s", body->nodes[nid].name);
    }
  } else if (a && a->value != UINT32_MAX && a->value < s->prog->n_values) {
    what = s->prog->root->values[a->value].name;
  }
  snprintf(buf, cap, "%s %s%s", kd ? kd->name : "?", what, opname);
}

void mx__trace_node(mx_exe_run *run, uint32_t node, uint64_t start_ns, uint64_t end_ns) {
  mx_step *step = run->user;
  mx_session *s = step->s;
  mx_trace *t = &s->trace;
  pthread_mutex_lock(&t->lock);
  if (MX_GROW(t->host, t->cap_host, t->n_host + 1)) {
    mx_trace_slice *sl = &t->host[t->n_host++];
    sl->start_ns = start_ns;
    sl->end_ns = end_ns;
    sl->lane = 0;
    sl->kernel = s->prog->main.nodes[node].kernel;
    node_label(s, node, sl->label, sizeof sl->label);
  } else {
    t->dropped++;
  }
  pthread_mutex_unlock(&t->lock);
}

/* Host callback: stores the time into the word whose address the argument block holds. */
static mx_status stamp(void *args, size_t size) {
  (void)size;
  uint64_t *where;
  memcpy(&where, args, sizeof where);
  *where = mx__now_ns();
  return MX_OK;
}

uint32_t mx__trace_device_begin(mx_session *s, mx_stream *stream, uint32_t lane, const char *label) {
  mx_trace *t = &s->trace;
  if (!t->on) return UINT32_MAX;
  uint32_t i = atomic_fetch_add(&t->n_device, 1);
  if (i >= MX_TRACE_DEVICE_MAX) {
    t->dropped++;
    return UINT32_MAX;
  }
  mx_trace_slice *sl = &t->device[i];
  sl->lane = lane;
  sl->kernel = UINT16_MAX;
  snprintf(sl->label, sizeof sl->label, "%s", label);
  uint64_t *where = &sl->start_ns;
  /* A stamp that cannot be queued leaves the time 0: the trace writer leaves such a slice out. */
  MX_IGNORE_STATUS(mx__hal_host_callback(stream, stamp, &where, sizeof where));
  return i;
}

void mx__trace_device_end(mx_session *s, mx_stream *stream, uint32_t slice) {
  if (slice == UINT32_MAX) return;
  uint64_t *where = &s->trace.device[slice].end_ns;
  MX_IGNORE_STATUS(mx__hal_host_callback(stream, stamp, &where, sizeof where));
}

static void slice_event(FILE *f, const mx_trace_slice *sl, uint64_t origin, bool *first) {
  if (!sl->start_ns || sl->end_ns < sl->start_ns) return; /* a device slice that never ran */
  fprintf(f, "%s\n{\"ph\": \"X\", \"pid\": 1, \"tid\": %u, \"ts\": %.3f, \"dur\": %.3f, \"name\": ",
          *first ? "" : ",", sl->lane, (double)(sl->start_ns - origin) / 1e3,
          (double)(sl->end_ns - sl->start_ns) / 1e3);
  mx__json_string(f, sl->label);
  fprintf(f, ", \"cat\": \"%s\"}", sl->lane == 0 ? "host" : "device");
  *first = false;
}

mx_status mx__trace_end(mx_session *s, const char *path) {
  mx_trace *t = &s->trace;
  if (!t->on)
    return mx__fail(&s->err, MX_ERR_INVALID_ARGUMENT, "no trace is being recorded (mx_session_trace_begin)");
  t->on = false;
  for (uint32_t i = 0; i < s->n_streams; i++)
    MX_IGNORE_STATUS(mx_stream_synchronize(s->streams[i])); /* the wait */
  FILE *f = fopen(path, "w");
  if (!f) {
    mx_status st = mx__fail(&s->err, MX_ERR_IO, "%s: %s", path, strerror(errno));
    mx__trace_release(t);
    return st;
  }
  uint32_t n_dev = atomic_load(&t->n_device);
  if (n_dev > MX_TRACE_DEVICE_MAX) n_dev = MX_TRACE_DEVICE_MAX;
  uint64_t origin = UINT64_MAX;
  for (size_t i = 0; i < t->n_host; i++)
    if (t->host[i].start_ns < origin) origin = t->host[i].start_ns;
  for (uint32_t i = 0; i < n_dev; i++)
    if (t->device[i].start_ns && t->device[i].start_ns < origin) origin = t->device[i].start_ns;
  if (origin == UINT64_MAX) origin = 0;
  fprintf(
      f,
      "{\"displayTimeUnit\": \"ns\", \"otherData\": {\"producer\": \"mixrt\", \"dropped_slices\": %llu},\n"
      "\"traceEvents\": [",
      (unsigned long long)t->dropped);
  bool first = true;
  for (uint32_t lane = 0; lane < t->lanes; lane++) {
    fprintf(f,
            "%s\n{\"ph\": \"M\", \"pid\": 1, \"tid\": %u, \"name\": \"thread_name\", \"args\": {\"name\": ",
            first ? "" : ",", lane);
    char name[32];
    if (lane == 0)
      snprintf(name, sizeof name, "host");
    else
      snprintf(name, sizeof name, "stream %u", lane - 1);
    mx__json_string(f, name);
    fprintf(f, "}}");
    first = false;
  }
  fprintf(
      f,
      ",\n{\"ph\": \"M\", \"pid\": 1, \"name\": \"process_name\", \"args\": {\"name\": \"mixrt session\"}}");
  for (size_t i = 0; i < t->n_host; i++) slice_event(f, &t->host[i], origin, &first);
  for (uint32_t i = 0; i < n_dev; i++) slice_event(f, &t->device[i], origin, &first);
  fprintf(f, "\n]}\n");
  bool ok = !ferror(f);
  if (fclose(f) != 0) ok = false;
  mx__trace_release(t);
  if (!ok) return mx__fail(&s->err, MX_ERR_IO, "%s: write failed", path);
  return MX_OK;
}
