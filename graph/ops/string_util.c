/* String op helpers shared by definitions and kernels: stopword tests and the RE2 -> POSIX
 * extended regex translation of RegexFullMatch (see graph/ops/string_impl.h). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/string_tensor.h"
#include "graph/ops/string_impl.h"

static bool ascii_case_equal(const char *a, const char *b) {
  for (; *a && *b; a++, b++)
    if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) return false;
  return *a == *b;
}

bool mx__string_is_stopword(const mx_string_normalizer_params *p, const char *s) {
  const char *w = p->stopwords;
  for (int32_t i = 0; i < p->n_stopwords; i++, w += strlen(w) + 1)
    if (p->case_sensitive ? strcmp(w, s) == 0 : ascii_case_equal(w, s)) return true;
  return false;
}

int64_t mx__string_normalizer_kept(const mx_string_normalizer_params *p, const void *data, int64_t n) {
  int64_t kept = 0;
  for (int64_t i = 0; i < n; i++) kept += !mx__string_is_stopword(p, mx__string_at(data, (size_t)i));
  return kept;
}

/* Appends text to the translation buffer; false when it does not fit. */
static bool put(char *out, size_t cap, size_t *len, const char *text) {
  size_t n = strlen(text);
  if (*len + n + 1 > cap) return false;
  memcpy(out + *len, text, n + 1);
  *len += n;
  return true;
}

/* Translates one bracket expression starting at p[*i] == '['; *i ends past its ']'. Escapes become
 * literal characters or POSIX classes; '-' taken literally goes last, ']' first. */
static bool translate_bracket(const char *p, size_t *i, char *out, size_t cap, size_t *len, char *why,
                              size_t why_size) {
  char body[512];
  size_t bl = 0;
  bool negate = false, dash = false, close = false;
  size_t k = *i + 1;
  if (p[k] == '^') negate = true, k++;
  for (bool first = true; p[k]; first = false) {
    if (p[k] == ']' && !first) break;
    char one[2] = {p[k], 0};
    const char *piece = one;
    if (p[k] == '\\' && p[k + 1]) {
      char e = p[k + 1];
      k += 2;
      if (e == 'd')
        piece = "[:digit:]";
      else if (e == 's')
        piece = "[:space:]";
      else if (e == 'w')
        piece = "[:alnum:]_";
      else if (e == 'D' || e == 'S' || e == 'W') {
        snprintf(why, why_size, "\\%c inside brackets", e);
        return false;
      } else if (e == 'n')
        piece = "\n";
      else if (e == 't')
        piece = "\t";
      else if (e == '-') {
        dash = true;
        continue;
      } else if (e == ']') {
        close = true;
        continue;
      } else {
        one[0] = e;
      }
    } else if (p[k] == '[' && p[k + 1] == ':') { /* a POSIX class [:name:] as is */
      const char *end = strstr(p + k + 2, ":]");
      if (!end) {
        snprintf(why, why_size, "unterminated [: class");
        return false;
      }
      size_t n = (size_t)(end + 2 - (p + k));
      if (bl + n + 1 > sizeof body) break;
      memcpy(body + bl, p + k, n);
      bl += n;
      k += n;
      continue;
    } else {
      k++;
    }
    size_t n = strlen(piece);
    if (bl + n + 1 > sizeof body) {
      snprintf(why, why_size, "bracket expression too long");
      return false;
    }
    memcpy(body + bl, piece, n);
    bl += n;
  }
  if (p[k] != ']') {
    snprintf(why, why_size, "unterminated [");
    return false;
  }
  body[bl] = '\0';
  *i = k + 1;
  bool ok = put(out, cap, len, negate ? "[^" : "[") && (!close || put(out, cap, len, "]")) &&
            put(out, cap, len, body) && (!dash || put(out, cap, len, "-")) && put(out, cap, len, "]");
  if (!ok) snprintf(why, why_size, "pattern too long");
  return ok;
}

static bool translate(const char *p, char *out, size_t cap, char *why, size_t why_size) {
  size_t len = 0;
  out[0] = '\0';
  if (!put(out, cap, &len, "^(")) return false;
  for (size_t i = 0; p[i];) {
    char c = p[i];
    const char *piece = NULL;
    char one[3] = {c, 0, 0};
    if (c == '[') {
      if (!translate_bracket(p, &i, out, cap, &len, why, why_size)) return false;
      continue;
    }
    if (c == '(' && p[i + 1] == '?') {
      if (p[i + 2] != ':') {
        snprintf(why, why_size, "(?%c groups are not supported", p[i + 2]);
        return false;
      }
      piece = "(";
      i += 3;
    } else if ((c == '*' || c == '+' || c == '?' || c == '}') && p[i + 1] == '?') {
      snprintf(why, why_size, "lazy quantifiers are not supported");
      return false;
    } else if (c == '\\' && p[i + 1]) {
      char e = p[i + 1];
      i += 2;
      if (e == 'd')
        piece = "[[:digit:]]";
      else if (e == 'D')
        piece = "[^[:digit:]]";
      else if (e == 's')
        piece = "[[:space:]]";
      else if (e == 'S')
        piece = "[^[:space:]]";
      else if (e == 'n')
        piece = "\n";
      else if (e == 't')
        piece = "\t";
      else if (e == 'w' || e == 'W' || e == 'b' || e == 'B' || e == '<' || e == '>' ||
               !isalnum((unsigned char)e)) {
        one[0] = '\\';
        one[1] = e;
        piece = one;
      } else {
        snprintf(why, why_size, "escape \\%c is not supported", e);
        return false;
      }
    } else {
      piece = one;
      i++;
    }
    if (!put(out, cap, &len, piece)) {
      snprintf(why, why_size, "pattern too long");
      return false;
    }
  }
  if (!put(out, cap, &len, ")$")) {
    snprintf(why, why_size, "pattern too long");
    return false;
  }
  return true;
}

bool mx__regex_compile(const char *pattern, regex_t *re, char *why, size_t why_size) {
  char posix[4096];
  if (!translate(pattern, posix, sizeof posix, why, why_size)) return false;
  int rc = regcomp(re, posix, REG_EXTENDED | REG_NOSUB);
  if (rc != 0) {
    regerror(rc, re, why, why_size);
    return false;
  }
  return true;
}

bool mx__regex_check(const char *pattern, char *why, size_t why_size) {
  regex_t re;
  if (!mx__regex_compile(pattern, &re, why, why_size)) return false;
  regfree(&re);
  return true;
}
