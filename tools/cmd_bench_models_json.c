/* A small JSON reader for `mixrt bench models`: the zoo's manifest.json (written by
 * bench/zoo/export.py) parsed into a tree of values. Strings keep their escapes decoded for the
 * ASCII range; \uXXXX above it becomes '?' (manifest names and paths are ASCII). */
#include <stdlib.h>
#include <string.h>

#include "tools/cmd_bench_models.h"

typedef struct reader {
  const char *s;
  size_t at;
  char *why;
  size_t cap;
  int depth;
} reader;

static bool fail(reader *r, const char *what) {
  if (r->why && r->cap) snprintf(r->why, r->cap, "offset %zu: %s", r->at, what);
  return false;
}

static void skip_space(reader *r) {
  while (r->s[r->at] == ' ' || r->s[r->at] == '\t' || r->s[r->at] == '\n' || r->s[r->at] == '\r') r->at++;
}

static bool parse_value(reader *r, mx_bmj *v);

static bool parse_string(reader *r, char **out) {
  if (r->s[r->at] != '"') return fail(r, "a string was expected");
  r->at++;
  size_t cap = 16, n = 0;
  char *buf = malloc(cap);
  if (!buf) return fail(r, "out of memory");
  for (;;) {
    char c = r->s[r->at];
    if (c == '\0') {
      free(buf);
      return fail(r, "unterminated string");
    }
    r->at++;
    if (c == '"') break;
    if (c == '\\') {
      char e = r->s[r->at++];
      switch (e) {
        case 'n': c = '\n'; break;
        case 't': c = '\t'; break;
        case 'r': c = '\r'; break;
        case 'b': c = '\b'; break;
        case 'f': c = '\f'; break;
        case 'u': {
          unsigned code = 0;
          for (int k = 0; k < 4; k++) {
            char h = r->s[r->at++];
            unsigned d = h >= '0' && h <= '9'   ? (unsigned)(h - '0')
                         : h >= 'a' && h <= 'f' ? (unsigned)(h - 'a' + 10)
                         : h >= 'A' && h <= 'F' ? (unsigned)(h - 'A' + 10)
                                                : 16u;
            if (d == 16) {
              free(buf);
              return fail(r, "bad \\u escape");
            }
            code = code * 16 + d;
          }
          c = code < 128 ? (char)code : '?';
          break;
        }
        case '"':
        case '\\':
        case '/': c = e; break;
        default: free(buf); return fail(r, "bad escape");
      }
    }
    if (n + 2 > cap) {
      char *grown = realloc(buf, cap * 2);
      if (!grown) {
        free(buf);
        return fail(r, "out of memory");
      }
      buf = grown;
      cap *= 2;
    }
    buf[n++] = c;
  }
  buf[n] = '\0';
  *out = buf;
  return true;
}

/* Appends a zeroed entry to an array or object; NULL when out of memory. */
static mx_bmj *grow(mx_bmj *v, bool keyed) {
  mx_bmj *items = realloc(v->items, (v->n + 1) * sizeof *items);
  if (!items) return NULL;
  v->items = items;
  if (keyed) {
    char **keys = realloc(v->keys, (v->n + 1) * sizeof *keys);
    if (!keys) return NULL;
    v->keys = keys;
    v->keys[v->n] = NULL;
  }
  memset(&v->items[v->n], 0, sizeof v->items[v->n]);
  return &v->items[v->n++];
}

static bool parse_container(reader *r, mx_bmj *v, bool object) {
  char close = object ? '}' : ']';
  v->kind = object ? MX_BMJ_OBJECT : MX_BMJ_ARRAY;
  if (++r->depth > 64) return fail(r, "nested too deeply");
  r->at++;
  skip_space(r);
  if (r->s[r->at] == close) {
    r->at++;
    r->depth--;
    return true;
  }
  for (;;) {
    skip_space(r);
    char *key = NULL;
    if (object) {
      if (!parse_string(r, &key)) return false;
      skip_space(r);
      if (r->s[r->at] != ':') {
        free(key);
        return fail(r, "':' was expected");
      }
      r->at++;
    }
    mx_bmj *item = grow(v, object);
    if (!item) {
      free(key);
      return fail(r, "out of memory");
    }
    if (object) v->keys[v->n - 1] = key;
    if (!parse_value(r, item)) return false;
    skip_space(r);
    if (r->s[r->at] == ',') {
      r->at++;
      continue;
    }
    if (r->s[r->at] == close) {
      r->at++;
      r->depth--;
      return true;
    }
    return fail(r, object ? "',' or '}' was expected" : "',' or ']' was expected");
  }
}

static bool parse_value(reader *r, mx_bmj *v) {
  skip_space(r);
  const char *p = r->s + r->at;
  if (*p == '{' || *p == '[') return parse_container(r, v, *p == '{');
  if (*p == '"') {
    v->kind = MX_BMJ_STRING;
    return parse_string(r, &v->text);
  }
  if (strncmp(p, "true", 4) == 0 || strncmp(p, "false", 5) == 0) {
    v->kind = MX_BMJ_BOOL;
    v->number = *p == 't';
    r->at += *p == 't' ? 4 : 5;
    return true;
  }
  if (strncmp(p, "null", 4) == 0) {
    v->kind = MX_BMJ_NULL;
    r->at += 4;
    return true;
  }
  char *end;
  v->number = strtod(p, &end);
  if (end == p) return fail(r, "a value was expected");
  v->kind = MX_BMJ_NUMBER;
  r->at += (size_t)(end - p);
  return true;
}

static void free_inside(mx_bmj *v) {
  for (size_t k = 0; k < v->n; k++) {
    free_inside(&v->items[k]);
    if (v->keys) free(v->keys[k]);
  }
  free(v->items);
  free(v->keys);
  free(v->text);
}

void mx__bmj_free(mx_bmj *v) {
  if (!v) return;
  free_inside(v);
  free(v);
}

mx_bmj *mx__bmj_parse(const char *text, char *why, size_t cap) {
  reader r = {text, 0, why, cap, 0};
  mx_bmj *v = calloc(1, sizeof *v);
  if (!v) return NULL;
  bool ok = parse_value(&r, v);
  if (ok) {
    skip_space(&r);
    if (text[r.at] != '\0') ok = fail(&r, "text after the value");
  }
  if (!ok) {
    mx__bmj_free(v);
    return NULL;
  }
  return v;
}

const mx_bmj *mx__bmj_get(const mx_bmj *v, const char *key) {
  if (!v || v->kind != MX_BMJ_OBJECT) return NULL;
  for (size_t k = 0; k < v->n; k++)
    if (v->keys[k] && strcmp(v->keys[k], key) == 0) return &v->items[k];
  return NULL;
}

const char *mx__bmj_str(const mx_bmj *v, const char *key) {
  const mx_bmj *s = mx__bmj_get(v, key);
  return s && s->kind == MX_BMJ_STRING ? s->text : NULL;
}
