/* Asynchronous runs (see async.h). */
#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "v2runtime/session_impl.h"

static void close_cb(uv_handle_t *h) { (void)h; }

static void deliver(uv_async_t *h) {
  struct mx_session *s = h->data;
  mx_async *a = &s->async;
  for (;;) {
    pthread_mutex_lock(&a->lock);
    if (a->delivered == a->completed) {
      /* Stopping the internal loop: close its only handle from the loop thread itself. */
      bool closing = a->stop && a->own;
      pthread_mutex_unlock(&a->lock);
      if (closing) uv_close((uv_handle_t *)h, close_cb);
      return;
    }
    mx_async_step st = a->ring[a->delivered % MX_ASYNC_DEPTH];
    pthread_mutex_unlock(&a->lock);
    if (st.cb) st.cb(st.user, st.status, st.message);
    pthread_mutex_lock(&a->lock);
    a->delivered++;
    pthread_cond_broadcast(&a->changed);
    pthread_mutex_unlock(&a->lock);
  }
}

/* Waits for each submitted step's event, in order. */
static void *done_main(void *arg) {
  struct mx_session *s = arg;
  mx_async *a = &s->async;
  for (;;) {
    pthread_mutex_lock(&a->lock);
    while (!a->stop && a->completed == a->submitted) pthread_cond_wait(&a->changed, &a->lock);
    if (a->completed == a->submitted) {
      pthread_mutex_unlock(&a->lock);
      break;
    }
    mx_async_step *st = &a->ring[a->completed % MX_ASYNC_DEPTH];
    pthread_mutex_unlock(&a->lock);
    mx_status res = mx_event_synchronize(st->event);
    st->status = res;
    st->message[0] = '\0';
    if (res != MX_OK) {
      mx_stream_error e;
      mx_stream_get_error(st->stream, &e);
      snprintf(st->message, sizeof st->message, "the step failed on the device: %s",
               e.message[0] ? e.message : mx_status_string(res));
    }
    pthread_mutex_lock(&a->lock);
    if (res != MX_OK) a->device_failed = true;
    a->completed++;
    pthread_cond_broadcast(&a->changed);
    pthread_mutex_unlock(&a->lock);
    uv_async_send(&a->wake);
  }
  return NULL;
}

static void *loop_main(void *arg) {
  mx_async *a = arg;
  uv_run(a->loop, UV_RUN_DEFAULT);
  return NULL;
}

mx_status mx__async_start(struct mx_session *s) {
  mx_async *a = &s->async;
  if (a->started) return MX_OK;
  pthread_mutex_init(&a->lock, NULL);
  pthread_cond_init(&a->changed, NULL);
  for (uint32_t i = 0; i < MX_ASYNC_DEPTH; i++) {
    if (mx_event_create(s->dev, &a->ring[i].event) != MX_OK) {
      for (uint32_t k = 0; k < i; k++) mx_event_destroy(a->ring[k].event);
      return mx__fail(&s->err, MX_ERR_DEVICE, "cannot create events for asynchronous runs: %s",
                      mx_device_last_error(s->dev));
    }
  }
  a->own = s->opts.uv_loop == NULL;
  a->loop = a->own ? &a->own_loop : s->opts.uv_loop;
  if (a->own && uv_loop_init(&a->own_loop) != 0) goto fail_events;
  if (uv_async_init(a->loop, &a->wake, deliver) != 0) goto fail_loop;
  a->wake.data = s;
  if (pthread_create(&a->done_thread, NULL, done_main, s) != 0) goto fail_handle;
  if (a->own && pthread_create(&a->loop_thread, NULL, loop_main, a) != 0) {
    pthread_mutex_lock(&a->lock);
    a->stop = true;
    pthread_cond_broadcast(&a->changed);
    pthread_mutex_unlock(&a->lock);
    pthread_join(a->done_thread, NULL);
    goto fail_handle;
  }
  a->started = true;
  return MX_OK;
fail_handle:
  uv_close((uv_handle_t *)&a->wake, close_cb);
  if (a->own) uv_run(a->loop, UV_RUN_NOWAIT);
fail_loop:
  if (a->own) uv_loop_close(&a->own_loop);
fail_events:
  for (uint32_t i = 0; i < MX_ASYNC_DEPTH; i++) mx_event_destroy(a->ring[i].event);
  return mx__fail(&s->err, MX_ERR_INTERNAL, "cannot start the asynchronous-run threads");
}

mx_async_step *mx__async_slot(struct mx_session *s) {
  mx_async *a = &s->async;
  pthread_mutex_lock(&a->lock);
  while (a->submitted - (a->own ? a->delivered : a->completed) >= MX_ASYNC_DEPTH)
    pthread_cond_wait(&a->changed, &a->lock);
  mx_async_step *slot = &a->ring[a->submitted % MX_ASYNC_DEPTH];
  pthread_mutex_unlock(&a->lock);
  return slot;
}

mx_status mx__async_submit(struct mx_session *s, mx_async_step *slot) {
  mx_async *a = &s->async;
  mx_status st = mx_event_record(slot->event, slot->stream);
  if (st != MX_OK) return mx__fail(&s->err, st, "cannot record the step's completion event");
  pthread_mutex_lock(&a->lock);
  a->submitted++;
  pthread_cond_broadcast(&a->changed);
  pthread_mutex_unlock(&a->lock);
  return MX_OK;
}

void mx__async_wait(struct mx_session *s) {
  mx_async *a = &s->async;
  if (!a->started) return;
  pthread_mutex_lock(&a->lock);
  while ((a->own ? a->delivered : a->completed) != a->submitted) pthread_cond_wait(&a->changed, &a->lock);
  pthread_mutex_unlock(&a->lock);
}

void mx__async_stop(struct mx_session *s) {
  mx_async *a = &s->async;
  if (!a->started) return;
  mx__async_wait(s);
  pthread_mutex_lock(&a->lock);
  a->stop = true;
  pthread_cond_broadcast(&a->changed);
  pthread_mutex_unlock(&a->lock);
  pthread_join(a->done_thread, NULL);
  if (a->own) {
    /* The loop thread closes its handle on this wake-up (stop is set), which ends uv_run. */
    uv_async_send(&a->wake);
    pthread_join(a->loop_thread, NULL);
    uv_loop_close(&a->own_loop);
  } else {
    /* A caller's loop: the session is destroyed from that loop's thread (documented). */
    uv_close((uv_handle_t *)&a->wake, close_cb);
  }
  for (uint32_t i = 0; i < MX_ASYNC_DEPTH; i++) mx_event_destroy(a->ring[i].event);
  pthread_mutex_destroy(&a->lock);
  pthread_cond_destroy(&a->changed);
  a->started = false;
}
