/* A strict recursive-descent JSON syntax checker for tests (see json_check.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/file.h"
#include "support/json_check.h"

typedef struct cursor {
  const char *s;
  size_t i;
  int depth;
  const char *err;
} cursor;

static void ws(cursor *c) {
  while (c->s[c->i] == ' ' || c->s[c->i] == '\t' || c->s[c->i] == '\n' || c->s[c->i] == '\r') c->i++;
}

static bool value(cursor *c);

static bool string(cursor *c) {
  if (c->s[c->i] != '"') return c->err = "expected a string", false;
  c->i++;
  for (;;) {
    unsigned char ch = (unsigned char)c->s[c->i];
    if (ch == '\0') return c->err = "unterminated string", false;
    if (ch < 0x20) return c->err = "control character in a string", false;
    c->i++;
    if (ch == '"') return true;
    if (ch != '\\') continue;
    char e = c->s[c->i++];
    if (e == 'u') {
      for (int k = 0; k < 4; k++, c->i++)
        if (!strchr("0123456789abcdefABCDEF", c->s[c->i]) || !c->s[c->i])
          return c->err = "bad \\u escape", false;
    } else if (!e || !strchr("\"\\/bfnrt", e)) {
      return c->err = "bad escape", false;
    }
  }
}

static bool number(cursor *c) {
  size_t start = c->i;
  if (c->s[c->i] == '-') c->i++;
  if (c->s[c->i] == '0')
    c->i++;
  else if (c->s[c->i] >= '1' && c->s[c->i] <= '9')
    while (c->s[c->i] >= '0' && c->s[c->i] <= '9') c->i++;
  else
    return c->err = "bad number", false;
  if (c->s[c->i] == '.') {
    c->i++;
    if (!(c->s[c->i] >= '0' && c->s[c->i] <= '9')) return c->err = "bad fraction", false;
    while (c->s[c->i] >= '0' && c->s[c->i] <= '9') c->i++;
  }
  if (c->s[c->i] == 'e' || c->s[c->i] == 'E') {
    c->i++;
    if (c->s[c->i] == '+' || c->s[c->i] == '-') c->i++;
    if (!(c->s[c->i] >= '0' && c->s[c->i] <= '9')) return c->err = "bad exponent", false;
    while (c->s[c->i] >= '0' && c->s[c->i] <= '9') c->i++;
  }
  return c->i > start;
}

static bool literal(cursor *c, const char *word) {
  size_t n = strlen(word);
  if (strncmp(c->s + c->i, word, n) != 0) return c->err = "unexpected character", false;
  c->i += n;
  return true;
}

static bool container(cursor *c, char open, char close) {
  if (++c->depth > 256) return c->err = "nested too deeply", false;
  c->i++; /* open */
  ws(c);
  if (c->s[c->i] == close) {
    c->i++;
    c->depth--;
    return true;
  }
  for (;;) {
    ws(c);
    if (open == '{') {
      if (!string(c)) return false;
      ws(c);
      if (c->s[c->i] != ':') return c->err = "expected ':'", false;
      c->i++;
      ws(c);
    }
    if (!value(c)) return false;
    ws(c);
    if (c->s[c->i] == ',') {
      c->i++;
      continue;
    }
    if (c->s[c->i] == close) {
      c->i++;
      c->depth--;
      return true;
    }
    return c->err = open == '{' ? "expected ',' or '}'" : "expected ',' or ']'", false;
  }
}

static bool value(cursor *c) {
  ws(c);
  switch (c->s[c->i]) {
    case '{': return container(c, '{', '}');
    case '[': return container(c, '[', ']');
    case '"': return string(c);
    case 't': return literal(c, "true");
    case 'f': return literal(c, "false");
    case 'n': return literal(c, "null");
    default: return number(c);
  }
}

bool mxt_json_valid(const char *text, char *why, size_t cap) {
  cursor c = {text, 0, 0, NULL};
  bool ok = value(&c);
  if (ok) {
    ws(&c);
    if (c.s[c.i]) {
      ok = false;
      c.err = "text after the value";
    }
  }
  if (!ok && why && cap) snprintf(why, cap, "offset %zu: %s", c.i, c.err ? c.err : "invalid");
  return ok;
}

char *mxt_read_text(const char *path) {
  uint8_t *data = NULL;
  size_t size = 0;
  mx_error err;
  return mx__read_file(path, SIZE_MAX / 2, &data, &size, &err) == MX_OK ? (char *)data : NULL;
}

size_t mxt_count(const char *haystack, const char *needle) {
  size_t n = 0, len = strlen(needle);
  if (!len) return 0;
  for (const char *p = strstr(haystack, needle); p; p = strstr(p + len, needle)) n++;
  return n;
}
