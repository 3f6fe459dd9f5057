/* Asynchronous runs (mx_session_run_async): a step is enqueued on the device and its completion
 * is reported later on a libuv loop. A completion thread waits for each step's event in order
 * (an event, unlike a host callback, also reports a stream that failed), then wakes the loop
 * with uv_async_send; the loop thread calls the user's callbacks. */
#ifndef MIXRT_V2RUNTIME_ASYNC_H
#define MIXRT_V2RUNTIME_ASYNC_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "mixrt/hal.h"
#include "mixrt/session.h"

/* Steps that may be in flight at once; one more waits for the oldest to complete. */
#define MX_ASYNC_DEPTH 256u

typedef struct mx_async_step {
  mx_event *event;   /* recorded after the step's work (owned by the ring) */
  mx_stream *stream; /* the step's stream (borrowed) */
  mx_run_callback cb;
  void *user;
  mx_status status; /* filled by the completion thread */
  char message[MX_ERROR_MESSAGE_MAX];
} mx_async_step;

typedef struct mx_async {
  bool started;       /* threads and handles are up */
  uv_loop_t *loop;    /* the loop callbacks run on (the caller's or own_loop) */
  uv_loop_t own_loop; /* internal loop (when the caller gave none) */
  bool own;           /* the loop is internal and runs on loop_thread */
  uv_async_t wake;    /* completion thread -> loop */
  pthread_t loop_thread;
  pthread_t done_thread; /* waits for events in order */
  pthread_mutex_t lock;
  pthread_cond_t changed; /* any counter moved */
  mx_async_step ring[MX_ASYNC_DEPTH];
  uint64_t submitted; /* steps enqueued */
  uint64_t completed; /* steps whose event the completion thread saw */
  uint64_t delivered; /* steps whose callback returned */
  bool stop;          /* threads must exit */
  bool device_failed; /* a step failed on the device: reset streams before the next */
} mx_async;

struct mx_session;

/* Starts the threads (and the internal loop) on first use. */
MX_MUST_USE mx_status mx__async_start(struct mx_session *s);
/* Claims a ring slot for the step about to be enqueued (waits while the ring is full). */
mx_async_step *mx__async_slot(struct mx_session *s);
/* Publishes the slot after the step's work is queued (records its event on its stream). */
MX_MUST_USE mx_status mx__async_submit(struct mx_session *s, mx_async_step *slot);
/* Waits until every submitted step completed (and, with the internal loop, was delivered). */
void mx__async_wait(struct mx_session *s);
/* Stops the threads and frees the events. */
void mx__async_stop(struct mx_session *s);

#endif /* MIXRT_V2RUNTIME_ASYNC_H */
