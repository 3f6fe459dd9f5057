/* Parsing symbolic integers from text: the inverse of mx_sym_format, so shapes written into ONNX
 * files as dim_param text ("past_len + 1", "2*seq", "floor((2*s + 1) / 2)", "(s mod 3)",
 * "min(a, b)", "s^2") come back as the same expressions.
 *
 * Grammar (the printed form):
 *   sum     := product ((" + " | " - ") product)*
 *   product := ["-"] factor ("*" factor)*
 *   factor  := primary ["^" integer]
 *   primary := integer | name | "(" sum ")" | "(" sum " mod " sum ")"
 *            | "floor(" sum " / " sum ")" | "ceil(" sum " / " sum ")"
 *            | "min(" sum ", " sum ")" | "max(" sum ", " sum ")"
 * A name is a run of characters other than spaces and ( ) , * ^ that does not start with a
 * digit, '-' or '+', so node-style names ("attn/Shape.n") parse as one symbol. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "mixrt/shape.h"

typedef struct parser {
  mx_symtab *t;
  const char *s;
  size_t i;
  int depth;
  bool failed;
} parser;

static mx_dim parse_sum(parser *p);

static bool eat(parser *p, const char *tok) {
  size_t n = strlen(tok);
  if (strncmp(p->s + p->i, tok, n) != 0) return false;
  p->i += n;
  return true;
}

static mx_dim fail(parser *p) {
  p->failed = true;
  return MX_DIM_UNKNOWN;
}

static bool is_name_char(char c) {
  return c && c != ' ' && c != '(' && c != ')' && c != ',' && c != '*' && c != '^';
}

static mx_dim parse_integer(parser *p) {
  int64_t v = 0;
  if (!isdigit((unsigned char)p->s[p->i])) return fail(p);
  while (isdigit((unsigned char)p->s[p->i])) {
    int d = p->s[p->i++] - '0';
    if (v > (INT64_MAX - d) / 10) return fail(p);
    v = v * 10 + d;
  }
  return mx_sym_const(p->t, v);
}

/* "<name>(" a sep b ")" with the given separator. */
static bool parse_pair(parser *p, const char *sep, mx_dim *a, mx_dim *b) {
  *a = parse_sum(p);
  if (p->failed || !eat(p, sep)) return false;
  *b = parse_sum(p);
  return !p->failed && eat(p, ")");
}

static mx_dim parse_primary(parser *p) {
  if (++p->depth > 64) return fail(p);
  mx_dim r, a, b;
  char c = p->s[p->i];
  if (isdigit((unsigned char)c)) {
    r = parse_integer(p);
  } else if (eat(p, "floor(")) {
    r = parse_pair(p, " / ", &a, &b) ? mx_sym_floordiv(p->t, a, b) : fail(p);
  } else if (eat(p, "ceil(")) {
    r = parse_pair(p, " / ", &a, &b) ? mx_sym_ceildiv(p->t, a, b) : fail(p);
  } else if (eat(p, "min(")) {
    r = parse_pair(p, ", ", &a, &b) ? mx_sym_min(p->t, a, b) : fail(p);
  } else if (eat(p, "max(")) {
    r = parse_pair(p, ", ", &a, &b) ? mx_sym_max(p->t, a, b) : fail(p);
  } else if (eat(p, "(")) {
    a = parse_sum(p);
    if (p->failed) return MX_DIM_UNKNOWN;
    if (eat(p, " mod ")) {
      b = parse_sum(p);
      r = !p->failed && eat(p, ")") ? mx_sym_mod(p->t, a, b) : fail(p);
    } else {
      r = eat(p, ")") ? a : fail(p);
    }
  } else if (c && c != '-' && c != '+' && is_name_char(c)) {
    size_t start = p->i;
    while (is_name_char(p->s[p->i])) p->i++;
    char name[256];
    size_t n = p->i - start;
    if (n >= sizeof name) return fail(p);
    memcpy(name, p->s + start, n);
    name[n] = '\0';
    r = mx_sym_named(p->t, name);
  } else {
    r = fail(p);
  }
  p->depth--;
  return r;
}

static mx_dim parse_factor(parser *p) {
  mx_dim base = parse_primary(p);
  if (p->failed || !eat(p, "^")) return base;
  mx_dim e = parse_integer(p);
  int64_t power;
  if (p->failed || !mx_sym_const_value(p->t, e, &power) || power < 1 || power > 64) return fail(p);
  mx_dim r = base;
  for (int64_t k = 1; k < power; k++) r = mx_sym_mul(p->t, r, base);
  return r;
}

static mx_dim parse_product(parser *p) {
  bool neg = eat(p, "-");
  mx_dim r = parse_factor(p);
  while (!p->failed && eat(p, "*")) r = mx_sym_mul(p->t, r, parse_factor(p));
  return neg ? mx_sym_neg(p->t, r) : r;
}

static mx_dim parse_sum(parser *p) {
  mx_dim r = parse_product(p);
  while (!p->failed) {
    if (eat(p, " + "))
      r = mx_sym_add(p->t, r, parse_product(p));
    else if (eat(p, " - "))
      r = mx_sym_sub(p->t, r, parse_product(p));
    else
      break;
  }
  return r;
}

static bool parse_into(mx_symtab *t, const char *text, mx_dim *out) {
  parser p = {t, text, 0, 0, false};
  mx_dim d = parse_sum(&p);
  if (p.failed || text[p.i] != '\0' || d == MX_DIM_UNKNOWN) return false;
  *out = d;
  return true;
}

mx_status mx_sym_parse(mx_symtab *t, const char *text, mx_dim *out) {
  if (!t || !text || !out) return MX_ERR_INVALID_ARGUMENT;
  /* Check the text in a scratch table first, so a malformed text adds no symbol to t. */
  mx_symtab *scratch;
  if (mx_symtab_create(&scratch) != MX_OK) return MX_ERR_OUT_OF_MEMORY;
  mx_dim probe;
  bool ok = parse_into(scratch, text, &probe);
  mx_symtab_destroy(scratch);
  if (!ok || !parse_into(t, text, out)) return MX_ERR_MALFORMED;
  return MX_OK;
}
