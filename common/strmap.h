/* A string -> uint32 hash map with open addressing.
 *
 * Keys are borrowed: the owner keeps them alive (graphs keep names in their arena). Used for
 * name lookups (values, nodes, symbols) where a linear search would make import quadratic. */
#ifndef MIXRT_COMMON_STRMAP_H
#define MIXRT_COMMON_STRMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct mx_strmap {
  const char **keys; /* slot -> key (NULL when empty); borrowed strings */
  uint32_t *vals;    /* slot -> value */
  size_t cap;        /* slots, a power of two (0 before the first insert) */
  size_t count;      /* occupied slots */
} mx_strmap;

void mx__strmap_init(mx_strmap *m);
void mx__strmap_free(mx_strmap *m);
/* Inserts or replaces key -> val. Returns false when out of memory (the map is unchanged). */
bool mx__strmap_put(mx_strmap *m, const char *key, uint32_t val);
/* Looks up key; true with *val set when present. */
bool mx__strmap_get(const mx_strmap *m, const char *key, uint32_t *val);
/* Removes key if present. */
void mx__strmap_del(mx_strmap *m, const char *key);

/* 64-bit FNV-1a of a byte string. */
uint64_t mx__hash_bytes(const void *p, size_t n, uint64_t seed);
/* Mixes a 64-bit value into a hash. */
static inline uint64_t mx__hash_mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h *= 0xff51afd7ed558ccdull;
  return h ^ (h >> 33);
}

#endif /* MIXRT_COMMON_STRMAP_H */
