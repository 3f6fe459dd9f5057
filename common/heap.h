/* Binary min-heaps of integer keys, for the Kahn sweeps that order graphs: the ready item with
 * the smallest key leaves first, so a graph whose ids are already in a valid order keeps that
 * order, and every sort is deterministic. One implementation serves every width:
 *
 *   mx__heap_u32_push / mx__heap_u32_pop  uint32_t keys (node ids, group indices)
 *   mx__heap_u64_push / mx__heap_u64_pop  uint64_t keys: a 32-bit sort key packed above a 32-bit
 *                                         id, ((uint64_t)key << 32 | id), for orders by a key
 *                                         other than the id itself (priority, first position)
 *
 * The heap is the caller's array h[0 .. *n): the caller allocates it with room for every item
 * that can be in it at once and keeps the count *n (0 to start). push adds x; pop removes and
 * returns the smallest item and must not be called with *n == 0. Neither allocates. */
#ifndef MIXRT_COMMON_HEAP_H
#define MIXRT_COMMON_HEAP_H

#include <stddef.h>
#include <stdint.h>

#define MX__HEAP_DEFINE(name, T)                         \
  static inline void name##_push(T *h, size_t *n, T x) { \
    size_t i = (*n)++;                                   \
    while (i > 0) {                                      \
      size_t up = (i - 1) / 2;                           \
      if (h[up] <= x) break;                             \
      h[i] = h[up];                                      \
      i = up;                                            \
    }                                                    \
    h[i] = x;                                            \
  }                                                      \
                                                         \
  static inline T name##_pop(T *h, size_t *n) {          \
    T top = h[0], last = h[--(*n)];                      \
    size_t i = 0;                                        \
    for (;;) {                                           \
      size_t c = 2 * i + 1;                              \
      if (c >= *n) break;                                \
      if (c + 1 < *n && h[c + 1] < h[c]) c++;            \
      if (last <= h[c]) break;                           \
      h[i] = h[c];                                       \
      i = c;                                             \
    }                                                    \
    if (*n) h[i] = last;                                 \
    return top;                                          \
  }

MX__HEAP_DEFINE(mx__heap_u32, uint32_t)
MX__HEAP_DEFINE(mx__heap_u64, uint64_t)

#undef MX__HEAP_DEFINE

#endif /* MIXRT_COMMON_HEAP_H */
