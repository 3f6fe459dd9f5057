/* Session tracing (Chrome trace-event JSON, viewable in Perfetto): one lane for the host (every
 * execution-graph kernel as a slice) and one lane per stream (static model executions and
 * dynamic op launches as slices, timed on the device by host callbacks queued around them). */
#ifndef MIXRT_V2RUNTIME_TRACE_H
#define MIXRT_V2RUNTIME_TRACE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "mixrt/hal.h"
#include "v2runtime/exe_graph.h"

/* Device slices a trace can hold (fixed, so host callbacks never see the array move). */
#define MX_TRACE_DEVICE_MAX 65536u

typedef struct mx_trace_slice {
  uint64_t start_ns, end_ns; /* monotonic clock; device slices are written by callbacks */
  uint32_t lane;             /* 0 host, 1 + stream index */
  uint16_t kernel;           /* exe kernel index (host slices) or UINT16_MAX (device slices) */
  char label[80];            /* what ran */
} mx_trace_slice;

typedef struct mx_trace {
  bool on;              /* recording */
  pthread_mutex_t lock; /* host slices may come from several executor threads */
  mx_trace_slice *host; /* growable (malloc'd) */
  size_t n_host, cap_host;
  mx_trace_slice *device;    /* MX_TRACE_DEVICE_MAX entries (malloc'd) */
  _Atomic uint32_t n_device; /* reserved device slices */
  uint64_t dropped;          /* slices that did not fit */
  uint32_t lanes;            /* 1 + streams */
} mx_trace;

struct mx_session;

/* Starts recording on s (resets a previous recording). */
MX_MUST_USE mx_status mx__trace_begin(struct mx_session *s);
/* The executors' per-node hook while recording. */
void mx__trace_node(mx_exe_run *run, uint32_t node, uint64_t start_ns, uint64_t end_ns);
/* Reserves a device slice and queues its start/end callbacks around the work the caller queues
 * between the two calls on stream s. Returns the slice index, or UINT32_MAX (not recorded). */
uint32_t mx__trace_device_begin(struct mx_session *s, mx_stream *stream, uint32_t lane, const char *label);
void mx__trace_device_end(struct mx_session *s, mx_stream *stream, uint32_t slice);
/* Stops recording and writes the JSON file. */
MX_MUST_USE mx_status mx__trace_end(struct mx_session *s, const char *path);
/* Frees the trace buffers. */
void mx__trace_release(mx_trace *t);

#endif /* MIXRT_V2RUNTIME_TRACE_H */
