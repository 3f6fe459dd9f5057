/* Concurrency: sessions on many threads, and one session shared by two.
 *
 * - Eight threads, each with its own session (inline device; CPU device with one stream and the
 *   sequential executor; CPU device with two streams and the multi-thread executor, in turn),
 *   run llama decode steps at the same time; every step of every thread equals the reference
 *   interpreter bit for bit.
 * - One session used by two threads at once: sessions are not serialized, they refuse. A call
 *   made while another thread is inside the session returns MX_ERR_BUSY, its
 *   mx_session_last_error (on the refused thread) says the session is in use by another thread,
 *   and the thread inside is unaffected: its call succeeds and its error record is untouched.
 *   Shown deterministically (the thread inside is held in the session's log callback while the
 *   other calls) and under contention (two threads decoding on one session: every call either
 *   ran, correctly, or was refused).
 * The suite is labelled "concurrency", so the ThreadSanitizer build runs it. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "reliability/reliability.h"

enum { THREADS = 8, STEPS = 12 };

typedef struct decoder {
  int index;
  mx_status status; /* first failure, MX_OK when every step matched */
  char why[512];
} decoder;

static void *decode_thread(void *arg) {
  decoder *d = arg;
  mx_device_options o;
  mx_device_options_init(&o);
  o.fault_from_env = false;
  uint32_t streams = 1;
  mx_executor_kind ex = MX_EXECUTOR_SEQUENTIAL;
  switch (d->index % 3) {
    case 0: o.kind = MX_DEVICE_INLINE; break;
    case 1: o.kind = MX_DEVICE_CPU; break;
    default:
      o.kind = MX_DEVICE_CPU;
      streams = 2;
      ex = MX_EXECUTOR_MULTI_THREAD;
      break;
  }
  mxr_llama l;
  d->status = mxr_llama_init(&l, NULL);
  if (d->status != MX_OK) {
    snprintf(d->why, sizeof d->why, "cannot build the model");
    return NULL;
  }
  mx_session *s = mxr_session(&o, streams, ex, d->why, sizeof d->why);
  if (!s) {
    d->status = MX_ERR_INTERNAL;
  } else if ((d->status = mxr_llama_load(&l, s)) != MX_OK) {
    snprintf(d->why, sizeof d->why, "%s", mx_session_last_error(s));
  }
  for (int k = 0; k < STEPS && d->status == MX_OK; k++)
    d->status =
        mxr_llama_step(&l, s, (d->index * 13 + k * 7) % 64, MXR_CHECK | MXR_ADVANCE, d->why, sizeof d->why);
  mx_session_destroy(s);
  mxr_llama_free(&l);
  return NULL;
}

Test(concurrency, eight_threads_eight_sessions_decode) {
  pthread_t t[THREADS];
  decoder d[THREADS];
  for (int i = 0; i < THREADS; i++) {
    d[i] = (decoder){.index = i};
    cr_assert_eq(pthread_create(&t[i], NULL, decode_thread, &d[i]), 0);
  }
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < THREADS; i++)
    cr_assert_eq(d[i].status, MX_OK, "thread %d: %s (%s)", i, mx_status_string(d[i].status), d[i].why);
}

/* --- one session, two threads: deterministic refusal ---------------------------------------- */

typedef struct holder {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int stage; /* 0: loading, 1: the loader is inside the session, 2: the other thread is done */
} holder;

/* The session's log callback: runs inside mx_session_load_graph, i.e. while the loading thread
 * holds the session. Waits there until the other thread has made its calls. */
static void hold_inside(void *user, mx_log_level level, const char *message) {
  (void)level;
  (void)message;
  holder *h = user;
  pthread_mutex_lock(&h->lock);
  if (h->stage == 0) {
    h->stage = 1;
    pthread_cond_broadcast(&h->cond);
    while (h->stage != 2) pthread_cond_wait(&h->cond, &h->lock);
  }
  pthread_mutex_unlock(&h->lock);
}

typedef struct loader_arg {
  mx_session *s;
  const mxr_llama *l;
  mx_status status;
} loader_arg;

static void *load_thread(void *arg) {
  loader_arg *a = arg;
  a->status = mxr_llama_load(a->l, a->s);
  return NULL;
}

Test(concurrency, a_second_thread_is_refused_with_busy) {
  holder h = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
  mx_session_options o;
  mx_session_options_init(&o);
  o.device_options.kind = MX_DEVICE_CPU;
  o.device_options.fault_from_env = false;
  o.log = hold_inside;
  o.log_user = &h;
  mx_session *s;
  mx_error err;
  cr_assert_eq(mx_session_create(&o, &s, &err), MX_OK, "%s", err.message);
  mxr_llama l;
  cr_assert_eq(mxr_llama_init(&l, NULL), MX_OK);
  loader_arg a = {s, &l, MX_ERR_INTERNAL};
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, load_thread, &a), 0);
  pthread_mutex_lock(&h.lock);
  while (h.stage != 1) pthread_cond_wait(&h.cond, &h.lock);
  pthread_mutex_unlock(&h.lock);

  /* The loader is inside: every call from here is refused, and says why. */
  char why[256];
  cr_assert_eq(mxr_llama_step(&l, s, 1, 0, why, sizeof why), MX_ERR_BUSY);
  cr_assert(strstr(why, "in use by another thread"), "%s", why);
  cr_assert_eq(mx_session_load_graph(s, NULL), MX_ERR_BUSY);
  cr_assert_eq(mx_session_synchronize(s), MX_ERR_BUSY);
  cr_assert_eq(mx_session_trace_begin(s), MX_ERR_BUSY);
  cr_assert(strstr(mx_session_last_error(s), "in use by another thread"), "%s", mx_session_last_error(s));

  pthread_mutex_lock(&h.lock);
  h.stage = 2;
  pthread_cond_broadcast(&h.cond);
  pthread_mutex_unlock(&h.lock);
  pthread_join(t, NULL);
  cr_assert_eq(a.status, MX_OK, "the thread inside was disturbed: %s", mx_session_last_error(s));

  /* Now free: this thread's calls run, and its last error is its own again. */
  mxr_llama_reset(&l);
  for (int k = 0; k < 3; k++)
    cr_assert_eq(mxr_llama_step(&l, s, 5 + k, MXR_CHECK | MXR_ADVANCE, why, sizeof why), MX_OK, "%s", why);
  cr_assert_str_eq(mx_session_last_error(s), "");
  mx_session_destroy(s);
  mxr_llama_free(&l);
}

/* --- one session, two threads: contention ---------------------------------------------------- */

typedef struct contender {
  mx_session *s;
  int index;
  int ran, refused; /* calls that ran (each checked against the reference), calls refused */
  mx_status status; /* first unexpected outcome */
  char why[512];
} contender;

static void *contend(void *arg) {
  contender *c = arg;
  mxr_llama l;
  if (mxr_llama_init(&l, NULL) != MX_OK) {
    c->status = MX_ERR_INTERNAL;
    return NULL;
  }
  /* Ten steps each, retrying refused calls (after a yield: a refusal takes no time). */
  for (int k = 0; c->ran < 10 && c->status == MX_OK; k++) {
    if (l.past_len >= 6) mxr_llama_reset(&l);
    mx_status st =
        mxr_llama_step(&l, c->s, (c->index * 31 + k) % 64, MXR_CHECK | MXR_ADVANCE, c->why, sizeof c->why);
    if (st == MX_OK) {
      c->ran++;
    } else if (st == MX_ERR_BUSY && strstr(c->why, "in use by another thread")) {
      c->refused++;
      sched_yield();
    } else {
      c->status = st;
    }
  }
  mxr_llama_free(&l);
  return NULL;
}

Test(concurrency, two_threads_on_one_session_run_or_are_refused) {
  mx_device_options o;
  mx_device_options_init(&o);
  o.kind = MX_DEVICE_CPU;
  o.fault_from_env = false;
  char why[256];
  mx_session *s = mxr_session(&o, 2, MX_EXECUTOR_TOPOLOGICAL, why, sizeof why);
  cr_assert_not_null(s, "%s", why);
  mxr_llama l;
  cr_assert_eq(mxr_llama_init(&l, NULL), MX_OK);
  cr_assert_eq(mxr_llama_load(&l, s), MX_OK, "%s", mx_session_last_error(s));
  mxr_llama_free(&l);
  contender c[2] = {{.s = s, .index = 0}, {.s = s, .index = 1}};
  pthread_t t[2];
  for (int i = 0; i < 2; i++) cr_assert_eq(pthread_create(&t[i], NULL, contend, &c[i]), 0);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < 2; i++) {
    cr_assert_eq(c[i].status, MX_OK, "thread %d: %s (%s)", i, mx_status_string(c[i].status), c[i].why);
    cr_assert_eq(c[i].ran, 10);
  }
  cr_log_info("two threads, one session: %d + %d steps ran, %d + %d refused", c[0].ran, c[1].ran,
              c[0].refused, c[1].refused);
  mx_session_destroy(s);
}
