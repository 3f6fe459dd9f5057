/* Shapes and symbolic integers.
 *
 * A dimension (mx_dim) is a 64-bit "symbolic integer": a non-negative value is a concrete
 * number, MX_DIM_UNKNOWN (-1) is unknown, and any other negative value names a canonical
 * expression stored in a symbol table (mx_symtab). Expressions are integer polynomials over
 * named symbols (`past_len + 1`, `batch*seq`, `2*seq`), extended with opaque atoms for what a
 * polynomial cannot express (floor division, modulo, min, max). Every expression is kept in one
 * canonical, hash-consed form, so two dims are equal exactly when their mx_dim values are equal.
 * Negative constants (needed for the values of shape tensors, e.g. a Reshape target of -1) are
 * also expressions; use mx_sym_const / mx_sym_const_value rather than comparing with 0.
 *
 * A symbol table belongs to a root graph and is shared by its subgraphs. It is not
 * thread-safe for writing; evaluating expressions (mx_sym_eval) only reads. */
#ifndef MIXRT_SHAPE_H
#define MIXRT_SHAPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mixrt/api.h"
#include "mixrt/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MX_MAX_RANK     8
#define MX_RANK_UNKNOWN (-1)
#define MX_DIM_UNKNOWN  ((mx_dim)-1)

typedef int64_t mx_dim;

/* A possibly symbolic shape. rank is MX_RANK_UNKNOWN or 0..MX_MAX_RANK; dims beyond rank are 0. */
typedef struct mx_shape {
  int32_t rank;
  mx_dim dims[MX_MAX_RANK];
} mx_shape;

static inline bool mx_dim_is_concrete(mx_dim d) { return d >= 0; }
static inline bool mx_dim_is_unknown(mx_dim d) { return d == MX_DIM_UNKNOWN; }
static inline bool mx_dim_is_expr(mx_dim d) { return d <= -2; }

typedef struct mx_symtab mx_symtab;

/* Creates an empty symbol table. *out receives ownership (mx_symtab_destroy). */
MX_API MX_MUST_USE mx_status mx_symtab_create(mx_symtab **out);
/* Frees the table and every expression in it. NULL is a no-op. */
MX_API void mx_symtab_destroy(mx_symtab *t);

/* Sticky status of the table: MX_ERR_OUT_OF_MEMORY once any operation failed to allocate
 * (that operation returned MX_DIM_UNKNOWN, which is never wrong, only less precise). */
MX_API MX_MUST_USE mx_status mx_symtab_status(const mx_symtab *t);

/* --- symbols ---------------------------------------------------------------------------------- */

/* The symbol called `name`, created on first use. Symbols stand for non-negative integers. */
MX_API mx_dim mx_sym_named(mx_symtab *t, const char *name);
/* A new symbol distinct from every other, named `hint` or `hint_N` (N = 1, 2, ...). */
MX_API mx_dim mx_sym_fresh(mx_symtab *t, const char *hint);
/* The existing symbol called `name`, or MX_DIM_UNKNOWN. */
MX_API mx_dim mx_sym_lookup(const mx_symtab *t, const char *name);
/* Number of symbols; symbols are numbered 0..count-1 in creation order. */
MX_API size_t mx_symtab_symbol_count(const mx_symtab *t);
/* Name of symbol `index` (borrowed, lives as long as the table); NULL when out of range. */
MX_API const char *mx_symtab_symbol_name(const mx_symtab *t, size_t index);
/* The dim that is exactly symbol `index`. */
MX_API mx_dim mx_symtab_symbol_dim(const mx_symtab *t, size_t index);
/* Index of the symbol when `d` is exactly one symbol (coefficient 1, no constant), else -1. */
MX_API int64_t mx_sym_symbol_index(const mx_symtab *t, mx_dim d);
/* Writes the indices of the symbols `d` depends on (ascending, each once) into idx[0..cap) and
 * returns how many there are (which may exceed cap). */
MX_API size_t mx_sym_symbols_of(const mx_symtab *t, mx_dim d, uint32_t *idx, size_t cap);

/* --- constants -------------------------------------------------------------------------------- */

/* The symbolic integer of a constant (any sign). */
MX_API mx_dim mx_sym_const(mx_symtab *t, int64_t value);
/* True when `d` is a constant; its value goes to *value (may be NULL). */
MX_API bool mx_sym_const_value(const mx_symtab *t, mx_dim d, int64_t *value);

/* --- arithmetic (canonical results; an unknown operand gives MX_DIM_UNKNOWN) ----------------- */

MX_API mx_dim mx_sym_add(mx_symtab *t, mx_dim a, mx_dim b);
MX_API mx_dim mx_sym_sub(mx_symtab *t, mx_dim a, mx_dim b);
MX_API mx_dim mx_sym_mul(mx_symtab *t, mx_dim a, mx_dim b);
MX_API mx_dim mx_sym_neg(mx_symtab *t, mx_dim a);
/* a / b when the division is exact (b a non-zero constant dividing every coefficient, or a
 * monomial dividing every term: batch*seq / seq == batch); otherwise floor(a / b). */
MX_API mx_dim mx_sym_div(mx_symtab *t, mx_dim a, mx_dim b);
/* floor(a / b) (rounds toward negative infinity, like Python's //). */
MX_API mx_dim mx_sym_floordiv(mx_symtab *t, mx_dim a, mx_dim b);
/* ceil(a / b). */
MX_API mx_dim mx_sym_ceildiv(mx_symtab *t, mx_dim a, mx_dim b);
/* a mod b with the sign of b (Python's %). */
MX_API mx_dim mx_sym_mod(mx_symtab *t, mx_dim a, mx_dim b);
MX_API mx_dim mx_sym_min(mx_symtab *t, mx_dim a, mx_dim b);
MX_API mx_dim mx_sym_max(mx_symtab *t, mx_dim a, mx_dim b);

/* Decides a <=> b when a - b is a constant: true with *sign in {-1, 0, 1}; else false. */
MX_API bool mx_sym_compare(mx_symtab *t, mx_dim a, mx_dim b, int *sign);

/* Replaces symbol `index` by `value` everywhere in `d` and returns the canonical result. */
MX_API mx_dim mx_sym_substitute(mx_symtab *t, mx_dim d, size_t index, mx_dim value);

/* --- evaluation and printing ------------------------------------------------------------------ */

/* Value of `d` given the value of every symbol (values[i] for symbol i; n_values entries).
 * Fails with MX_ERR_NOT_FOUND when `d` is unknown or uses a symbol at or beyond n_values or
 * whose value is INT64_MIN (unbound), MX_ERR_LIMIT on overflow or division by zero. */
MX_API MX_MUST_USE mx_status mx_sym_eval(const mx_symtab *t, mx_dim d, const int64_t *values, size_t n_values,
                                         int64_t *out);

/* Prints `d` ("2*seq + 2", "batch*seq", "floor(seq / 2)", "?" for unknown) into buf
 * (always NUL-terminated when n > 0). Returns the length the full text needs. */
MX_API size_t mx_sym_format(const mx_symtab *t, mx_dim d, char *buf, size_t n);

/* Parses text in the form mx_sym_format prints ("past_len + 1", "2*seq", "floor(s / 2)",
 * "(s mod 3)", "min(a, b)", "s^2", "-1"); names become symbols of t (created on first use).
 * MX_ERR_MALFORMED when the text is not such an expression (t may have gained symbols). */
MX_API MX_MUST_USE mx_status mx_sym_parse(mx_symtab *t, const char *text, mx_dim *out);

/* Prints a shape as "[batch, seq, 768]" ("[*]" for an unknown rank). Returns the needed length. */
MX_API size_t mx_shape_format(const mx_symtab *t, const mx_shape *s, char *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif /* MIXRT_SHAPE_H */
