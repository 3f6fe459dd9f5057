/* Private layout of the symbolic-integer table (mx_symtab), shared by graph/sym.c (building
 * and canonicalizing expressions) and graph/sym_read.c (evaluation, printing and queries that
 * only read the table).
 *
 * Canonical form. An expression is an integer polynomial: a list of terms sorted by monomial,
 * each term a non-zero int64 coefficient times a monomial. A monomial is a list of factors
 * (atom, power >= 1) sorted by atom order. An atom is a named symbol or an opaque operation
 * FLOORDIV / MOD / MIN / MAX over two canonical operands (mx_dim values). Atoms, monomials and
 * expressions are each interned in their own hash-consed pool, so structural equality is id
 * equality at every level, and an expression's mx_dim is -2 - (its pool index).
 *
 * Orders. Atoms are ordered by `order`: symbols by symbol index, then operation atoms by
 * creation. Monomials are in graded lexicographic order: higher total degree first, then the
 * monomial with the larger power of the first atom where they differ. That order is compatible
 * with multiplication (u before v implies u*m before v*m), which lets products and exact
 * divisions keep term lists sorted without re-sorting.
 *
 * Storage is a handful of malloc'd arrays indexed by uint32 ids (ids never move, so expression
 * ids are stable for the table's lifetime) plus an arena for symbol names. */
#ifndef MIXRT_GRAPH_SYM_IMPL_H
#define MIXRT_GRAPH_SYM_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/arena.h"
#include "common/strmap.h"
#include "mixrt/shape.h"

typedef enum mx__sym_atom_kind {
  MX__SYM_ATOM_SYMBOL,   /* a named symbol; lhs is its index */
  MX__SYM_ATOM_FLOORDIV, /* floor(lhs / rhs) */
  MX__SYM_ATOM_MOD,      /* lhs mod rhs, sign of rhs */
  MX__SYM_ATOM_MIN,      /* min(lhs, rhs); operands in canonical order */
  MX__SYM_ATOM_MAX       /* max(lhs, rhs); operands in canonical order */
} mx__sym_atom_kind;

/* Monomial 0 is the empty product (the monomial of constant terms). */
#define MX__SYM_MONO_UNIT 0u

typedef struct mx__sym_atom {
  uint64_t hash;  /* hash of (kind, lhs, rhs), kept for probing and rehashing */
  uint64_t order; /* sort key inside monomials: symbol index, or 2^32 + atom id */
  uint64_t mask;  /* bit (i % 64) set for every symbol i the atom depends on */
  mx_dim lhs;     /* SYMBOL: symbol index; operations: first operand */
  mx_dim rhs;     /* operations: second operand; SYMBOL: 0 */
  uint32_t kind;  /* mx__sym_atom_kind */
} mx__sym_atom;

typedef struct mx__sym_factor {
  uint32_t atom;  /* atom id */
  uint32_t power; /* >= 1 */
} mx__sym_factor;

typedef struct mx__sym_mono {
  uint64_t hash;         /* hash of the factor list */
  uint64_t mask;         /* union of the factors' atom masks */
  uint32_t first_factor; /* index into mx_symtab.factors */
  uint32_t factor_count; /* 0 only for MX__SYM_MONO_UNIT */
  uint32_t degree;       /* sum of powers */
} mx__sym_mono;

typedef struct mx__sym_expr {
  uint64_t hash;       /* hash of the term list */
  uint64_t mask;       /* union of the terms' monomial masks */
  uint32_t first_term; /* index into mx_symtab.term_coef / term_mono */
  uint32_t term_count; /* >= 1 (zero is the plain dim 0, never interned) */
} mx__sym_expr;

/* Open-addressing set of ids (linear probing); equality is decided by the owner's pool. */
typedef struct mx__sym_idmap {
  uint32_t *slots; /* id + 1, 0 for an empty slot */
  size_t cap;      /* slots, a power of two (0 before the first insert) */
  size_t count;    /* occupied slots */
} mx__sym_idmap;

typedef struct mx__sym_symbol {
  const char *name; /* in mx_symtab.names */
  uint32_t atom;    /* the symbol's atom id */
  mx_dim dim;       /* the expression that is exactly this symbol */
} mx__sym_symbol;

struct mx_symtab {
  mx_status status; /* sticky: MX_ERR_OUT_OF_MEMORY after any failed allocation */

  mx__sym_atom *atoms;
  size_t atom_count, atom_cap;
  mx__sym_idmap atom_map;

  mx__sym_factor *factors; /* factor lists of every monomial, back to back */
  size_t factor_count, factor_cap;
  mx__sym_mono *monos;
  size_t mono_count, mono_cap;
  mx__sym_idmap mono_map;

  int64_t *term_coef;  /* term lists of every expression, back to back (parallel */
  uint32_t *term_mono; /* arrays keep a term at 12 bytes) */
  size_t term_count, term_coef_cap, term_mono_cap;
  mx__sym_expr *exprs;
  size_t expr_count, expr_cap;
  mx__sym_idmap expr_map;

  mx__sym_symbol *symbols; /* by symbol index (creation order) */
  size_t symbol_count, symbol_cap;
  mx_strmap symbol_by_name; /* name -> symbol index; keys live in `names` */
  mx_strmap fresh_next;     /* fresh-symbol hint -> next suffix to try; keys in `names` */
  mx_arena names;           /* symbol names and hints */

  size_t fail_countdown; /* test hook: 0 = off; else the countdown-th allocation fails */
};

/* The pool index of an expression dim (d <= -2). */
static inline size_t mx__sym_expr_index(mx_dim d) { return (size_t)(-(d + 2)); }
/* The dim of expression pool index i. */
static inline mx_dim mx__sym_expr_dim(size_t i) { return -(mx_dim)i - 2; }

/* The expression record of d, or NULL when d is not an expression of t. */
static inline const mx__sym_expr *mx__sym_expr_of(const mx_symtab *t, mx_dim d) {
  if (!t || d > -2) return NULL;
  size_t i = mx__sym_expr_index(d);
  return i < t->expr_count ? &t->exprs[i] : NULL;
}

/* floor(a / b) as Python's //. Requires b != 0 and not (a == INT64_MIN and b == -1). */
static inline int64_t mx__sym_floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1;
  return q;
}

/* a mod b with the sign of b, as Python's %. Requires b != 0. */
static inline int64_t mx__sym_floor_mod(int64_t a, int64_t b) {
  if (b == -1) return 0; /* INT64_MIN % -1 is undefined in C; the answer is always 0 */
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

/* Test hook: makes the n-th allocation attempt from now fail (n >= 1), once; 0 disarms. Lets
 * tests drive every out-of-memory path without interposing malloc. */
void mx__symtab_fail_alloc_after(mx_symtab *t, size_t n);

#endif /* MIXRT_GRAPH_SYM_IMPL_H */
