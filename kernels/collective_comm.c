/* The implementation-independent part of communicators (kernels/collective_comm.h): reference
 * counts, rank and size, the timeout, and the process's active communicator that collective
 * kernels use. */
#include <pthread.h>
#include <stdlib.h>

#include "kernels/collective_comm.h"

static pthread_mutex_t active_lock = PTHREAD_MUTEX_INITIALIZER;
static mx_comm *active;

/* MIXRT_COMM_TIMEOUT in seconds, or the default. */
static int64_t timeout_from_env(void) {
  const char *s = getenv("MIXRT_COMM_TIMEOUT");
  if (s && *s) {
    char *end;
    double sec = strtod(s, &end);
    if (end != s && sec > 0 && sec < 1e7) return (int64_t)(sec * 1000.0) > 0 ? (int64_t)(sec * 1000.0) : 1;
  }
  return MX_COMM_TIMEOUT_MS_DEFAULT;
}

mx_comm *mx__comm_new(const mx__comm_ops *ops, void *impl, int32_t rank, int32_t size) {
  mx_comm *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->ops = ops;
  c->impl = impl;
  c->rank = rank;
  c->size = size;
  atomic_init(&c->refs, 1);
  atomic_init(&c->timeout_ms, timeout_from_env());
  atomic_init(&c->broken, false);
  atomic_init(&c->exchanges, 0);
  atomic_init(&c->bytes, 0);
  atomic_init(&c->ns, 0);
  return c;
}

void mx__comm_retain(mx_comm *c) {
  if (c) atomic_fetch_add(&c->refs, 1);
}

void mx_comm_release(mx_comm *c) {
  if (!c || atomic_fetch_sub(&c->refs, 1) != 1) return;
  if (c->ops && c->ops->destroy) c->ops->destroy(c);
  free(c);
}

int32_t mx_comm_rank(const mx_comm *c) { return c ? c->rank : -1; }
int32_t mx_comm_size(const mx_comm *c) { return c ? c->size : 0; }

void mx_comm_set_timeout_ms(mx_comm *c, int64_t ms) {
  if (c) atomic_store(&c->timeout_ms, ms < 1 ? 1 : ms);
}

int64_t mx_comm_timeout_ms(const mx_comm *c) { return c ? atomic_load(&c->timeout_ms) : 0; }

void mx_comm_get_stats(const mx_comm *c, uint64_t *exchanges, uint64_t *bytes, uint64_t *ns) {
  if (exchanges) *exchanges = c ? atomic_load(&c->exchanges) : 0;
  if (bytes) *bytes = c ? atomic_load(&c->bytes) : 0;
  if (ns) *ns = c ? atomic_load(&c->ns) : 0;
}

mx_comm *mx__comm_active(void) {
  pthread_mutex_lock(&active_lock);
  mx_comm *c = active;
  mx__comm_retain(c);
  pthread_mutex_unlock(&active_lock);
  return c;
}

void mx__comm_set_active(mx_comm *c) {
  mx__comm_retain(c);
  pthread_mutex_lock(&active_lock);
  mx_comm *old = active;
  active = c;
  pthread_mutex_unlock(&active_lock);
  mx_comm_release(old);
}
