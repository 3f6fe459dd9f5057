/* Bump allocator (see arena.h). */
#include "common/arena.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct mx_arena_chunk {
  mx_arena_chunk *next; /* older chunk */
  size_t size;          /* usable bytes in data */
  size_t used;          /* bytes handed out from data */
  _Alignas(64) unsigned char data[];
};

void mx__arena_init(mx_arena *a, size_t chunk_size) {
  a->head = NULL;
  a->chunk_size = chunk_size ? chunk_size : 64 * 1024;
  a->total = 0;
}

void mx__arena_release(mx_arena *a) {
  mx_arena_chunk *c = a->head;
  while (c) {
    mx_arena_chunk *next = c->next;
    free(c);
    c = next;
  }
  a->head = NULL;
  a->total = 0;
}

void *mx__arena_alloc(mx_arena *a, size_t size, size_t align) {
  if (align == 0) align = 1;
  mx_arena_chunk *c = a->head;
  if (c) {
    size_t at = (c->used + align - 1) & ~(align - 1);
    if (at <= c->size && size <= c->size - at) {
      c->used = at + size;
      memset(c->data + at, 0, size);
      return c->data + at;
    }
  }
  if (size > SIZE_MAX - 128 - sizeof(mx_arena_chunk)) return NULL;
  size_t want = size + align > a->chunk_size ? size + align : a->chunk_size;
  mx_arena_chunk *n = malloc(sizeof *n + want);
  if (!n) return NULL;
  n->size = want;
  n->used = 0;
  a->total += sizeof *n + want;
  /* A big one-off chunk goes behind the head so the head's free tail stays usable. */
  if (c && want > a->chunk_size && c->size - c->used > 256) {
    n->next = c->next;
    c->next = n;
  } else {
    n->next = c;
    a->head = n;
  }
  size_t at = 0; /* data is 64-byte aligned */
  n->used = at + size;
  memset(n->data, 0, size);
  return n->data;
}

void *mx__arena_array(mx_arena *a, size_t n, size_t size, size_t align) {
  if (size && n > SIZE_MAX / size) return NULL;
  return mx__arena_alloc(a, n * size, align);
}

char *mx__arena_strdup(mx_arena *a, const char *s) {
  if (!s) return NULL;
  size_t n = strlen(s);
  char *d = mx__arena_alloc(a, n + 1, 1);
  if (d) memcpy(d, s, n + 1);
  return d;
}

void *mx__arena_memdup(mx_arena *a, const void *p, size_t n, size_t align) {
  void *d = mx__arena_alloc(a, n ? n : 1, align);
  if (d && n) memcpy(d, p, n);
  return d;
}

char *mx__arena_printf(mx_arena *a, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) return NULL;
  char *d = mx__arena_alloc(a, (size_t)n + 1, 1);
  if (!d) return NULL;
  va_start(ap, fmt);
  vsnprintf(d, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return d;
}
