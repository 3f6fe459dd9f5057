/* Growable arrays: one helper so every "append to a malloc'd array" doubles the same way and
 * checks overflow the same way. */
#ifndef MIXRT_COMMON_GROW_H
#define MIXRT_COMMON_GROW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* Ensures *ptr (an array of `elem`-byte items with capacity *cap) holds at least `need` items,
 * doubling. New items are not initialised. Returns false when out of memory or on overflow
 * (then *ptr and *cap are unchanged). */
static inline bool mx__grow(void **ptr, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return true;
  size_t ncap = *cap ? *cap : 8;
  while (ncap < need) {
    if (ncap > SIZE_MAX / 2) return false;
    ncap *= 2;
  }
  if (elem && ncap > SIZE_MAX / elem) return false;
  void *p = realloc(*ptr, ncap * elem);
  if (!p) return false;
  *ptr = p;
  *cap = ncap;
  return true;
}

#define MX_GROW(arr, cap, need) mx__grow((void **)&(arr), &(cap), (need), sizeof *(arr))

#endif /* MIXRT_COMMON_GROW_H */
