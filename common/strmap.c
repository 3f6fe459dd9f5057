/* Open-addressing string map (see strmap.h). Linear probing, backward-shift deletion. */
#include "common/strmap.h"

#include <stdlib.h>
#include <string.h>

uint64_t mx__hash_bytes(const void *p, size_t n, uint64_t seed) {
  const unsigned char *b = p;
  uint64_t h = 0xcbf29ce484222325ull ^ seed;
  for (size_t i = 0; i < n; i++) {
    h ^= b[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

static uint64_t hash_str(const char *s) { return mx__hash_bytes(s, strlen(s), 0); }

void mx__strmap_init(mx_strmap *m) { memset(m, 0, sizeof *m); }

void mx__strmap_free(mx_strmap *m) {
  free(m->keys);
  free(m->vals);
  memset(m, 0, sizeof *m);
}

static bool grow(mx_strmap *m) {
  size_t ncap = m->cap ? m->cap * 2 : 16;
  const char **nk = calloc(ncap, sizeof *nk);
  uint32_t *nv = calloc(ncap, sizeof *nv);
  if (!nk || !nv) {
    free(nk);
    free(nv);
    return false;
  }
  for (size_t i = 0; i < m->cap; i++) {
    if (!m->keys[i]) continue;
    size_t j = hash_str(m->keys[i]) & (ncap - 1);
    while (nk[j]) j = (j + 1) & (ncap - 1);
    nk[j] = m->keys[i];
    nv[j] = m->vals[i];
  }
  free(m->keys);
  free(m->vals);
  m->keys = nk;
  m->vals = nv;
  m->cap = ncap;
  return true;
}

bool mx__strmap_put(mx_strmap *m, const char *key, uint32_t val) {
  if ((m->count + 1) * 4 > m->cap * 3 && !grow(m)) return false;
  size_t j = hash_str(key) & (m->cap - 1);
  while (m->keys[j]) {
    if (strcmp(m->keys[j], key) == 0) {
      m->vals[j] = val;
      return true;
    }
    j = (j + 1) & (m->cap - 1);
  }
  m->keys[j] = key;
  m->vals[j] = val;
  m->count++;
  return true;
}

bool mx__strmap_get(const mx_strmap *m, const char *key, uint32_t *val) {
  if (!m->cap || !key) return false;
  size_t j = hash_str(key) & (m->cap - 1);
  while (m->keys[j]) {
    if (strcmp(m->keys[j], key) == 0) {
      if (val) *val = m->vals[j];
      return true;
    }
    j = (j + 1) & (m->cap - 1);
  }
  return false;
}

void mx__strmap_del(mx_strmap *m, const char *key) {
  if (!m->cap) return;
  size_t mask = m->cap - 1;
  size_t j = hash_str(key) & mask;
  while (m->keys[j] && strcmp(m->keys[j], key) != 0) j = (j + 1) & mask;
  if (!m->keys[j]) return;
  m->keys[j] = NULL;
  m->count--;
  /* Backward-shift the cluster that follows so lookups never stop early. */
  size_t k = (j + 1) & mask;
  while (m->keys[k]) {
    size_t home = hash_str(m->keys[k]) & mask;
    bool move = (j <= k) ? (home <= j || home > k) : (home <= j && home > k);
    if (move) {
      m->keys[j] = m->keys[k];
      m->vals[j] = m->vals[k];
      m->keys[k] = NULL;
      j = k;
    }
    k = (k + 1) & mask;
  }
}
