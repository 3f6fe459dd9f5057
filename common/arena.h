/* A bump allocator: many small allocations freed all at once.
 *
 * Graphs keep their names, attributes, shapes and constant data in one arena, so destroying a
 * graph is one walk over a handful of chunks and nothing can leak piecemeal. Allocations are
 * never freed individually; a chunk larger than the default is made for big requests. */
#ifndef MIXRT_COMMON_ARENA_H
#define MIXRT_COMMON_ARENA_H

#include <stddef.h>

typedef struct mx_arena_chunk mx_arena_chunk;

typedef struct mx_arena {
  mx_arena_chunk *head; /* newest chunk; allocations come from its free tail */
  size_t chunk_size;    /* default bytes per new chunk */
  size_t total;         /* bytes obtained from malloc, for statistics */
} mx_arena;

/* Prepares an empty arena (no memory is taken until the first allocation). */
void mx__arena_init(mx_arena *a, size_t chunk_size);
/* Frees every chunk; the arena may be reused after mx__arena_init. */
void mx__arena_release(mx_arena *a);
/* `size` bytes aligned to `align` (a power of two <= 64), zeroed; NULL when out of memory. */
void *mx__arena_alloc(mx_arena *a, size_t size, size_t align);
/* Zeroed array of n elements of `size` bytes; NULL on overflow or out of memory. */
void *mx__arena_array(mx_arena *a, size_t n, size_t size, size_t align);
/* Copy of a NUL-terminated string (NULL gives NULL). */
char *mx__arena_strdup(mx_arena *a, const char *s);
/* Copy of n bytes (n == 0 gives a valid non-NULL pointer). */
void *mx__arena_memdup(mx_arena *a, const void *p, size_t n, size_t align);
/* printf into the arena. */
char *mx__arena_printf(mx_arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif /* MIXRT_COMMON_ARENA_H */
