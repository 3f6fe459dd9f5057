/* Read-only queries over a symbol table: evaluating an expression for given symbol values,
 * printing expressions and shapes, and listing the symbols an expression depends on.
 *
 * These run on the dynamic executor's per-step path and from concurrent readers, so they never
 * write to the table and never allocate: they walk the stored term, monomial and atom pools
 * directly (recursing only into the operands of FLOORDIV / MOD / MIN / MAX atoms). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "graph/sym_impl.h"

/* --- evaluation ------------------------------------------------------------------------------ */

static mx_status eval_dim(const mx_symtab *t, mx_dim d, const int64_t *values, size_t n_values, int64_t *out);

/* base^power with overflow detection (power >= 1). Squares only while bits remain, so an
 * overflowing square always means an overflowing result. */
static mx_status checked_pow(int64_t base, uint32_t power, int64_t *out) {
  int64_t result = 1;
  for (;;) {
    if ((power & 1) && __builtin_mul_overflow(result, base, &result)) return MX_ERR_LIMIT;
    power >>= 1;
    if (!power) break;
    if (__builtin_mul_overflow(base, base, &base)) return MX_ERR_LIMIT;
  }
  *out = result;
  return MX_OK;
}

static mx_status eval_atom(const mx_symtab *t, uint32_t atom_id, const int64_t *values, size_t n_values,
                           int64_t *out) {
  const mx__sym_atom *atom = &t->atoms[atom_id];
  if (atom->kind == MX__SYM_ATOM_SYMBOL) {
    size_t index = (size_t)atom->lhs;
    if (!values || index >= n_values || values[index] == INT64_MIN) return MX_ERR_NOT_FOUND;
    *out = values[index];
    return MX_OK;
  }
  int64_t lhs, rhs;
  mx_status st = eval_dim(t, atom->lhs, values, n_values, &lhs);
  if (st != MX_OK) return st;
  st = eval_dim(t, atom->rhs, values, n_values, &rhs);
  if (st != MX_OK) return st;
  switch (atom->kind) {
    case MX__SYM_ATOM_FLOORDIV:
      if (rhs == 0 || (lhs == INT64_MIN && rhs == -1)) return MX_ERR_LIMIT;
      *out = mx__sym_floor_div(lhs, rhs);
      return MX_OK;
    case MX__SYM_ATOM_MOD:
      if (rhs == 0) return MX_ERR_LIMIT;
      *out = mx__sym_floor_mod(lhs, rhs);
      return MX_OK;
    case MX__SYM_ATOM_MIN: *out = lhs < rhs ? lhs : rhs; return MX_OK;
    case MX__SYM_ATOM_MAX: *out = lhs > rhs ? lhs : rhs; return MX_OK;
    default: return MX_ERR_INTERNAL;
  }
}

/* Sums the terms in stored order. An overflowing term does not stop the walk: a later zero
 * factor still makes the term 0, and an unbound symbol anywhere still reports
 * MX_ERR_NOT_FOUND, so the answer does not depend on which term overflowed first. */
static mx_status eval_dim(const mx_symtab *t, mx_dim d, const int64_t *values, size_t n_values,
                          int64_t *out) {
  if (d >= 0) {
    *out = d;
    return MX_OK;
  }
  const mx__sym_expr *e = mx__sym_expr_of(t, d);
  if (!e) return MX_ERR_NOT_FOUND;
  const int64_t *coefs = t->term_coef + e->first_term;
  const uint32_t *monos = t->term_mono + e->first_term;
  int64_t sum = 0;
  bool over_limit = false; /* some term overflowed or divided by zero */
  for (uint32_t i = 0; i < e->term_count; i++) {
    const mx__sym_mono *mono = &t->monos[monos[i]];
    const mx__sym_factor *factors = t->factors + mono->first_factor;
    int64_t product = coefs[i];
    bool has_zero = false, product_overflow = false;
    for (uint32_t j = 0; j < mono->factor_count; j++) {
      int64_t value, power;
      mx_status st = eval_atom(t, factors[j].atom, values, n_values, &value);
      if (st == MX_ERR_LIMIT) {
        over_limit = true; /* a failed atom is an error even when multiplied by 0 */
        continue;
      }
      if (st != MX_OK) return st;
      if (value == 0) has_zero = true;
      if (product_overflow || checked_pow(value, factors[j].power, &power) != MX_OK ||
          __builtin_mul_overflow(product, power, &product)) {
        product_overflow = true;
      }
    }
    if (has_zero) continue;
    if (product_overflow || __builtin_add_overflow(sum, product, &sum)) over_limit = true;
  }
  if (over_limit) return MX_ERR_LIMIT;
  *out = sum;
  return MX_OK;
}

mx_status mx_sym_eval(const mx_symtab *t, mx_dim d, const int64_t *values, size_t n_values, int64_t *out) {
  if (!out) return MX_ERR_INVALID_ARGUMENT;
  return eval_dim(t, d, values, n_values, out);
}

/* --- symbols an expression uses -------------------------------------------------------------- */

/* Lowers *best to the smallest symbol index in d that is greater than `above` (-1: any). */
static void smallest_symbol_above(const mx_symtab *t, mx_dim d, int64_t above, int64_t *best) {
  const mx__sym_expr *e = mx__sym_expr_of(t, d);
  if (!e) return;
  for (uint32_t i = 0; i < e->term_count; i++) {
    const mx__sym_mono *mono = &t->monos[t->term_mono[e->first_term + i]];
    for (uint32_t j = 0; j < mono->factor_count; j++) {
      const mx__sym_atom *atom = &t->atoms[t->factors[mono->first_factor + j].atom];
      if (atom->kind != MX__SYM_ATOM_SYMBOL) {
        smallest_symbol_above(t, atom->lhs, above, best);
        smallest_symbol_above(t, atom->rhs, above, best);
      } else if (atom->lhs > above && (*best < 0 || atom->lhs < *best)) {
        *best = atom->lhs;
      }
    }
  }
}

size_t mx_sym_symbols_of(const mx_symtab *t, mx_dim d, uint32_t *idx, size_t cap) {
  /* Ascending selection, one walk per symbol found: expressions use a handful of symbols, and
   * this needs neither scratch memory nor writes to the table. */
  size_t count = 0;
  int64_t last = -1;
  for (;;) {
    int64_t next = -1;
    smallest_symbol_above(t, d, last, &next);
    if (next < 0) break;
    if (idx && count < cap) idx[count] = (uint32_t)next;
    count++;
    last = next;
  }
  return count;
}

/* --- printing -------------------------------------------------------------------------------- */

/* snprintf-style output: text past the buffer is counted but not stored. */
typedef struct sym_writer {
  char *buf;
  size_t cap; /* bytes of buf, including the terminating NUL */
  size_t len; /* bytes the full text needs so far, without the NUL */
} sym_writer;

static void put_bytes(sym_writer *w, const char *s, size_t n) {
  if (w->cap && w->len < w->cap - 1) {
    size_t room = w->cap - 1 - w->len;
    memcpy(w->buf + w->len, s, n < room ? n : room);
  }
  w->len += n;
}

static void put_str(sym_writer *w, const char *s) { put_bytes(w, s, strlen(s)); }

static void put_u64(sym_writer *w, uint64_t v) {
  char digits[24];
  int n = snprintf(digits, sizeof digits, "%" PRIu64, v);
  put_bytes(w, digits, (size_t)n);
}

static void put_finish(sym_writer *w) {
  if (w->cap) w->buf[w->len < w->cap ? w->len : w->cap - 1] = '\0';
}

static void put_dim(sym_writer *w, const mx_symtab *t, mx_dim d);

/* True when d prints as one unit: a non-negative number, unknown, or a single atom. */
static bool prints_as_primary(const mx_symtab *t, mx_dim d) {
  const mx__sym_expr *e = mx__sym_expr_of(t, d);
  if (!e) return true;
  if (e->term_count != 1 || t->term_coef[e->first_term] != 1) return false;
  const mx__sym_mono *mono = &t->monos[t->term_mono[e->first_term]];
  return mono->factor_count == 1 && t->factors[mono->first_factor].power == 1;
}

/* True when d is a sum of several terms (needs parentheses as an operand of "/" or "mod"). */
static bool prints_as_sum(const mx_symtab *t, mx_dim d) {
  const mx__sym_expr *e = mx__sym_expr_of(t, d);
  return e && e->term_count > 1;
}

static void put_operand(sym_writer *w, const mx_symtab *t, mx_dim d, bool parenthesize) {
  if (parenthesize) put_bytes(w, "(", 1);
  put_dim(w, t, d);
  if (parenthesize) put_bytes(w, ")", 1);
}

static void put_atom(sym_writer *w, const mx_symtab *t, uint32_t atom_id) {
  const mx__sym_atom *atom = &t->atoms[atom_id];
  switch (atom->kind) {
    case MX__SYM_ATOM_SYMBOL:
      /* The atom of a symbol whose creation ran out of memory has no name to print. */
      put_str(w, (size_t)atom->lhs < t->symbol_count ? t->symbols[atom->lhs].name : "?");
      return;
    case MX__SYM_ATOM_FLOORDIV:
      put_str(w, "floor(");
      put_operand(w, t, atom->lhs, prints_as_sum(t, atom->lhs));
      put_str(w, " / ");
      put_operand(w, t, atom->rhs, !prints_as_primary(t, atom->rhs));
      put_str(w, ")");
      return;
    case MX__SYM_ATOM_MOD:
      put_str(w, "(");
      put_operand(w, t, atom->lhs, prints_as_sum(t, atom->lhs));
      put_str(w, " mod ");
      put_operand(w, t, atom->rhs, !prints_as_primary(t, atom->rhs));
      put_str(w, ")");
      return;
    default:
      put_str(w, atom->kind == MX__SYM_ATOM_MIN ? "min(" : "max(");
      put_dim(w, t, atom->lhs);
      put_str(w, ", ");
      put_dim(w, t, atom->rhs);
      put_str(w, ")");
      return;
  }
}

static void put_mono(sym_writer *w, const mx_symtab *t, const mx__sym_mono *mono) {
  for (uint32_t j = 0; j < mono->factor_count; j++) {
    mx__sym_factor f = t->factors[mono->first_factor + j];
    if (j) put_bytes(w, "*", 1);
    put_atom(w, t, f.atom);
    if (f.power > 1) {
      put_bytes(w, "^", 1);
      put_u64(w, f.power);
    }
  }
}

/* Terms in stored (canonical) order: "2*seq + 2", "a^2 - b^2", "-s + 3". */
static void put_dim(sym_writer *w, const mx_symtab *t, mx_dim d) {
  if (d >= 0) {
    put_u64(w, (uint64_t)d);
    return;
  }
  const mx__sym_expr *e = mx__sym_expr_of(t, d);
  if (!e) {
    put_bytes(w, "?", 1);
    return;
  }
  for (uint32_t i = 0; i < e->term_count; i++) {
    int64_t coef = t->term_coef[e->first_term + i];
    const mx__sym_mono *mono = &t->monos[t->term_mono[e->first_term + i]];
    uint64_t magnitude = coef < 0 ? (uint64_t)0 - (uint64_t)coef : (uint64_t)coef;
    if (i == 0) {
      if (coef < 0) put_bytes(w, "-", 1);
    } else {
      put_str(w, coef < 0 ? " - " : " + ");
    }
    if (mono->factor_count == 0) {
      put_u64(w, magnitude);
      continue;
    }
    if (magnitude != 1) {
      put_u64(w, magnitude);
      put_bytes(w, "*", 1);
    }
    put_mono(w, t, mono);
  }
}

size_t mx_sym_format(const mx_symtab *t, mx_dim d, char *buf, size_t n) {
  sym_writer w = {buf, buf ? n : 0, 0};
  put_dim(&w, t, d);
  put_finish(&w);
  return w.len;
}

size_t mx_shape_format(const mx_symtab *t, const mx_shape *s, char *buf, size_t n) {
  sym_writer w = {buf, buf ? n : 0, 0};
  if (!s || s->rank < 0 || s->rank > MX_MAX_RANK) {
    put_str(&w, "[*]");
  } else {
    put_bytes(&w, "[", 1);
    for (int32_t i = 0; i < s->rank; i++) {
      if (i) put_str(&w, ", ");
      put_dim(&w, t, s->dims[i]);
    }
    put_bytes(&w, "]", 1);
  }
  put_finish(&w);
  return w.len;
}
