/* The piece walk of StringSplit, shared by its inference (the output width comes from the data
 * at run time) and its kernel. Python str.split semantics: a non-empty delimiter splits at each
 * occurrence (consecutive ones give empty pieces, "" gives one empty piece); no delimiter splits
 * at runs of whitespace and ignores leading ones ("" gives no piece). At most maxsplit splits
 * (-1: no limit); the rest of the string is the last piece. */
#ifndef MIXRT_GRAPH_OPS_STRING_SPLIT_H
#define MIXRT_GRAPH_OPS_STRING_SPLIT_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

typedef struct mx_splitter {
  const char *s;
  size_t len, pos;
  int64_t splits; /* splits made so far */
  bool finished;
} mx_splitter;

static inline bool mx__split_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* The next piece [*start, *start + *n) of the walk, or false at the end. */
static inline bool mx__split_next(mx_splitter *w, const char *delim, int64_t maxsplit, size_t *start,
                                  size_t *n) {
  if (w->finished) return false;
  size_t dl = strlen(delim);
  bool last = maxsplit >= 0 && w->splits >= maxsplit;
  if (dl == 0) {
    while (w->pos < w->len && mx__split_space(w->s[w->pos])) w->pos++;
    if (w->pos >= w->len) return (w->finished = true, false);
    size_t e = w->pos;
    if (last)
      e = w->len;
    else
      while (e < w->len && !mx__split_space(w->s[e])) e++;
    *start = w->pos;
    *n = e - w->pos;
    w->pos = e;
    w->splits++;
    if (last) w->finished = true;
    return true;
  }
  const char *hit = NULL;
  if (!last)
    for (size_t i = w->pos; i + dl <= w->len && !hit; i++)
      if (memcmp(w->s + i, delim, dl) == 0) hit = w->s + i;
  *start = w->pos;
  if (!hit) {
    *n = w->len - w->pos;
    w->finished = true;
    return true;
  }
  *n = (size_t)(hit - w->s) - w->pos;
  w->pos = (size_t)(hit - w->s) + dl;
  w->splits++;
  return true;
}

/* Number of pieces of s. */
static inline int64_t mx__split_count(const char *s, const char *delim, int64_t maxsplit) {
  mx_splitter w = {.s = s, .len = strlen(s)};
  size_t a, b;
  int64_t n = 0;
  while (mx__split_next(&w, delim, maxsplit, &a, &b)) n++;
  return n;
}

#endif /* MIXRT_GRAPH_OPS_STRING_SPLIT_H */
