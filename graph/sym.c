/* The symbolic-integer engine behind mx_dim: the symbol table, the hash-consed pools of atoms,
 * monomials and expressions, and canonical arithmetic over them (add, multiply, exact and floor
 * division, modulo, min, max, substitution, comparison). See graph/sym_impl.h for the canonical
 * form. Every result is either exact or MX_DIM_UNKNOWN: coefficient overflow, an unknown operand
 * or a failed allocation degrade to "unknown", never to a wrong expression.
 *
 * Arithmetic works on scratch term lists (sym_poly) that live on the caller's stack for small
 * expressions, and only the final result is interned, so intermediate values of one operation
 * do not pile up in the table. Evaluation and printing live in graph/sym_read.c. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "graph/sym_impl.h"

/* A power beyond this cannot be evaluated without overflow unless the base is 0 or +-1, so
 * refusing it loses nothing and keeps degree sums far from uint32 overflow. */
#define SYM_MAX_POWER (1u << 20)
/* Step budget of exact polynomial long division; past it the quotient is left as FLOORDIV. */
#define SYM_DIV_MAX_STEPS 4096
/* Scratch term lists hold this many terms before they move to the heap. */
#define SYM_POLY_INLINE 8
/* Monomial merges hold this many factors before they move to the heap. */
#define SYM_FACTORS_INLINE 16
/* Names a fresh symbol gets when the caller gives no hint. */
#define SYM_FRESH_DEFAULT_HINT "sym"

#define SYM_SEED_ATOM 0x61746f6d5f5f5f5full
#define SYM_SEED_MONO 0x6d6f6e6f5f5f5f5full
#define SYM_SEED_EXPR 0x657870725f5f5f5full

/* --- allocation ------------------------------------------------------------------------------ */

void mx__symtab_fail_alloc_after(mx_symtab *t, size_t n) {
  if (t) t->fail_countdown = n;
}

/* Consults the test hook before a real allocation; false means "pretend malloc failed". */
static bool alloc_allowed(mx_symtab *t) {
  if (t->fail_countdown == 0) return true;
  return --t->fail_countdown != 0;
}

/* Records the sticky out-of-memory status and returns it for propagation. */
static mx_status out_of_memory(mx_symtab *t) {
  t->status = MX_ERR_OUT_OF_MEMORY;
  return MX_ERR_OUT_OF_MEMORY;
}

/* mx__grow through the test hook; on failure the table's status becomes sticky. */
static bool table_grow(mx_symtab *t, void **arr, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return true;
  if (alloc_allowed(t) && mx__grow(arr, cap, need, elem)) return true;
  out_of_memory(t);
  return false;
}
#define TABLE_GROW(t, arr, cap, need) table_grow((t), (void **)&(arr), &(cap), (need), sizeof *(arr))

/* --- id sets --------------------------------------------------------------------------------- */

typedef uint64_t (*id_hash_fn)(const mx_symtab *t, uint32_t id);

static uint64_t atom_hash_of(const mx_symtab *t, uint32_t id) { return t->atoms[id].hash; }
static uint64_t mono_hash_of(const mx_symtab *t, uint32_t id) { return t->monos[id].hash; }
static uint64_t expr_hash_of(const mx_symtab *t, uint32_t id) { return t->exprs[id].hash; }

/* Places id in a map known to have a free slot and not to hold it yet. */
static void idmap_place(mx__sym_idmap *m, uint64_t hash, uint32_t id) {
  size_t mask = m->cap - 1;
  size_t j = (size_t)hash & mask;
  while (m->slots[j]) j = (j + 1) & mask;
  m->slots[j] = id + 1;
  m->count++;
}

/* Makes room for one more id, keeping the load factor at or below 3/4. */
static bool idmap_reserve(mx_symtab *t, mx__sym_idmap *m, id_hash_fn hash_of) {
  if ((m->count + 1) * 4 <= m->cap * 3) return true;
  size_t new_cap = m->cap ? m->cap * 2 : 64;
  uint32_t *new_slots = NULL;
  if (new_cap > SIZE_MAX / sizeof *new_slots || !alloc_allowed(t)) goto fail;
  new_slots = calloc(new_cap, sizeof *new_slots);
  if (!new_slots) goto fail;
  mx__sym_idmap grown = {new_slots, new_cap, 0};
  for (size_t j = 0; j < m->cap; j++) {
    if (m->slots[j]) idmap_place(&grown, hash_of(t, m->slots[j] - 1), m->slots[j] - 1);
  }
  free(m->slots);
  *m = grown;
  return true;
fail:
  out_of_memory(t);
  return false;
}

/* --- atoms ----------------------------------------------------------------------------------- */

static uint64_t dim_mask(const mx_symtab *t, mx_dim d) {
  const mx__sym_expr *e = mx__sym_expr_of(t, d);
  return e ? e->mask : 0;
}

static uint64_t atom_key_hash(uint32_t kind, mx_dim lhs, mx_dim rhs) {
  uint64_t h = mx__hash_mix(SYM_SEED_ATOM, kind);
  h = mx__hash_mix(h, (uint64_t)lhs);
  return mx__hash_mix(h, (uint64_t)rhs);
}

/* The id of atom (kind, lhs, rhs), created on first use. Operands must be canonical. */
static mx_status intern_atom(mx_symtab *t, uint32_t kind, mx_dim lhs, mx_dim rhs, uint32_t *out) {
  uint64_t hash = atom_key_hash(kind, lhs, rhs);
  if (t->atom_map.cap) {
    size_t mask = t->atom_map.cap - 1;
    for (size_t j = (size_t)hash & mask; t->atom_map.slots[j]; j = (j + 1) & mask) {
      uint32_t id = t->atom_map.slots[j] - 1;
      const mx__sym_atom *a = &t->atoms[id];
      if (a->hash == hash && a->kind == kind && a->lhs == lhs && a->rhs == rhs) {
        *out = id;
        return MX_OK;
      }
    }
  }
  if (t->atom_count >= UINT32_MAX - 1) return out_of_memory(t);
  if (!TABLE_GROW(t, t->atoms, t->atom_cap, t->atom_count + 1)) return MX_ERR_OUT_OF_MEMORY;
  if (!idmap_reserve(t, &t->atom_map, atom_hash_of)) return MX_ERR_OUT_OF_MEMORY;
  uint32_t id = (uint32_t)t->atom_count++;
  mx__sym_atom *a = &t->atoms[id];
  a->hash = hash;
  a->kind = kind;
  a->lhs = lhs;
  a->rhs = rhs;
  if (kind == MX__SYM_ATOM_SYMBOL) {
    a->order = (uint64_t)lhs;
    a->mask = 1ull << ((uint64_t)lhs & 63);
  } else {
    a->order = (1ull << 32) + id;
    a->mask = dim_mask(t, lhs) | dim_mask(t, rhs);
  }
  idmap_place(&t->atom_map, hash, id);
  *out = id;
  return MX_OK;
}

/* --- monomials ------------------------------------------------------------------------------- */

/* Factor list being assembled; stays on the stack for short monomials. */
typedef struct sym_factors {
  mx__sym_factor *items; /* `local` or heap */
  size_t count;
  mx__sym_factor local[SYM_FACTORS_INLINE];
} sym_factors;

static mx_status factors_init(mx_symtab *t, sym_factors *f, size_t cap) {
  f->items = f->local;
  f->count = 0;
  if (cap <= SYM_FACTORS_INLINE) return MX_OK;
  if (cap > SIZE_MAX / sizeof *f->items || !alloc_allowed(t)) return out_of_memory(t);
  f->items = malloc(cap * sizeof *f->items);
  if (!f->items) {
    f->items = f->local;
    return out_of_memory(t);
  }
  return MX_OK;
}

static void factors_free(sym_factors *f) {
  if (f->items != f->local) free(f->items);
  f->items = f->local;
  f->count = 0;
}

/* The id of the monomial with factors f[0..n) (sorted by atom order, powers >= 1), created on
 * first use. f must not point into t->factors, which may move. */
static mx_status intern_mono(mx_symtab *t, const mx__sym_factor *f, size_t n, uint32_t *out) {
  uint64_t hash = mx__hash_mix(SYM_SEED_MONO, n);
  uint64_t degree = 0, mask = 0;
  for (size_t i = 0; i < n; i++) {
    hash = mx__hash_mix(hash, ((uint64_t)f[i].atom << 32) | f[i].power);
    degree += f[i].power;
    mask |= t->atoms[f[i].atom].mask;
  }
  if (degree > SYM_MAX_POWER) return MX_ERR_LIMIT;
  if (t->mono_map.cap) {
    size_t slot_mask = t->mono_map.cap - 1;
    for (size_t j = (size_t)hash & slot_mask; t->mono_map.slots[j]; j = (j + 1) & slot_mask) {
      uint32_t id = t->mono_map.slots[j] - 1;
      const mx__sym_mono *m = &t->monos[id];
      if (m->hash == hash && m->factor_count == n &&
          (n == 0 || memcmp(t->factors + m->first_factor, f, n * sizeof *f) == 0)) {
        *out = id;
        return MX_OK;
      }
    }
  }
  if (t->mono_count >= UINT32_MAX - 1 || t->factor_count + n >= UINT32_MAX) return out_of_memory(t);
  if (!TABLE_GROW(t, t->factors, t->factor_cap, t->factor_count + n)) return MX_ERR_OUT_OF_MEMORY;
  if (!TABLE_GROW(t, t->monos, t->mono_cap, t->mono_count + 1)) return MX_ERR_OUT_OF_MEMORY;
  if (!idmap_reserve(t, &t->mono_map, mono_hash_of)) return MX_ERR_OUT_OF_MEMORY;
  uint32_t id = (uint32_t)t->mono_count++;
  mx__sym_mono *m = &t->monos[id];
  m->hash = hash;
  m->mask = mask;
  m->first_factor = (uint32_t)t->factor_count;
  m->factor_count = (uint32_t)n;
  m->degree = (uint32_t)degree;
  if (n) memcpy(t->factors + t->factor_count, f, n * sizeof *f);
  t->factor_count += n;
  idmap_place(&t->mono_map, hash, id);
  *out = id;
  return MX_OK;
}

/* The monomial atom^power. */
static mx_status atom_mono(mx_symtab *t, uint32_t atom, uint32_t power, uint32_t *out) {
  mx__sym_factor f = {atom, power};
  return intern_mono(t, &f, 1, out);
}

/* Graded lexicographic order: negative when monomial a sorts before b (see sym_impl.h). */
static int mono_cmp(const mx_symtab *t, uint32_t a, uint32_t b) {
  if (a == b) return 0;
  const mx__sym_mono *ma = &t->monos[a], *mb = &t->monos[b];
  if (ma->degree != mb->degree) return ma->degree > mb->degree ? -1 : 1;
  const mx__sym_factor *fa = t->factors + ma->first_factor;
  const mx__sym_factor *fb = t->factors + mb->first_factor;
  size_t n = ma->factor_count < mb->factor_count ? ma->factor_count : mb->factor_count;
  for (size_t i = 0; i < n; i++) {
    if (fa[i].atom != fb[i].atom) {
      return t->atoms[fa[i].atom].order < t->atoms[fb[i].atom].order ? -1 : 1;
    }
    if (fa[i].power != fb[i].power) return fa[i].power > fb[i].power ? -1 : 1;
  }
  /* Equal degree and equal factors means equal monomials, which interning made one id. */
  return a < b ? -1 : 1;
}

/* out = a * b. */
static mx_status mono_mul(mx_symtab *t, uint32_t a, uint32_t b, uint32_t *out) {
  if (a == MX__SYM_MONO_UNIT || b == MX__SYM_MONO_UNIT) {
    *out = a == MX__SYM_MONO_UNIT ? b : a;
    return MX_OK;
  }
  mx__sym_mono ma = t->monos[a], mb = t->monos[b];
  sym_factors merged;
  mx_status st = factors_init(t, &merged, (size_t)ma.factor_count + mb.factor_count);
  if (st != MX_OK) return st;
  const mx__sym_factor *fa = t->factors + ma.first_factor;
  const mx__sym_factor *fb = t->factors + mb.first_factor;
  size_t i = 0, j = 0;
  while (i < ma.factor_count || j < mb.factor_count) {
    if (j == mb.factor_count ||
        (i < ma.factor_count && t->atoms[fa[i].atom].order < t->atoms[fb[j].atom].order)) {
      merged.items[merged.count++] = fa[i++];
    } else if (i == ma.factor_count || fa[i].atom != fb[j].atom) {
      merged.items[merged.count++] = fb[j++];
    } else {
      uint64_t power = (uint64_t)fa[i].power + fb[j].power;
      if (power > SYM_MAX_POWER) {
        st = MX_ERR_LIMIT;
        goto free_merged;
      }
      merged.items[merged.count++] = (mx__sym_factor){fa[i].atom, (uint32_t)power};
      i++;
      j++;
    }
  }
  st = intern_mono(t, merged.items, merged.count, out);
free_merged:
  factors_free(&merged);
  return st;
}

/* out = a / d when d divides a; MX_ERR_LIMIT when it does not. */
static mx_status mono_div(mx_symtab *t, uint32_t a, uint32_t d, uint32_t *out) {
  if (d == MX__SYM_MONO_UNIT || a == d) {
    *out = d == MX__SYM_MONO_UNIT ? a : MX__SYM_MONO_UNIT;
    return MX_OK;
  }
  mx__sym_mono ma = t->monos[a], md = t->monos[d];
  if (md.factor_count > ma.factor_count || md.degree > ma.degree) return MX_ERR_LIMIT;
  sym_factors rest;
  mx_status st = factors_init(t, &rest, ma.factor_count);
  if (st != MX_OK) return st;
  const mx__sym_factor *fa = t->factors + ma.first_factor;
  const mx__sym_factor *fd = t->factors + md.first_factor;
  size_t j = 0;
  for (size_t i = 0; i < ma.factor_count; i++) {
    if (j < md.factor_count && fa[i].atom == fd[j].atom) {
      if (fa[i].power < fd[j].power) break;
      if (fa[i].power > fd[j].power) {
        rest.items[rest.count++] = (mx__sym_factor){fa[i].atom, fa[i].power - fd[j].power};
      }
      j++;
    } else {
      rest.items[rest.count++] = fa[i];
    }
  }
  /* Every factor of d must have been matched (factor lists share one order). */
  st = j == md.factor_count ? intern_mono(t, rest.items, rest.count, out) : MX_ERR_LIMIT;
  factors_free(&rest);
  return st;
}

/* --- scratch polynomials --------------------------------------------------------------------- */

typedef struct sym_term {
  int64_t coef;  /* never 0 */
  uint32_t mono; /* monomial id */
} sym_term;

/* A term list being computed: sorted by mono_cmp, monomials distinct, coefficients non-zero.
 * Never copied by value (items may point at `local`). */
typedef struct sym_poly {
  sym_term *items; /* `local` or heap */
  size_t count;
  size_t cap; /* capacity of items */
  sym_term local[SYM_POLY_INLINE];
} sym_poly;

static void poly_init(sym_poly *p) {
  p->items = p->local;
  p->count = 0;
  p->cap = SYM_POLY_INLINE;
}

static void poly_free(sym_poly *p) {
  if (p->items != p->local) free(p->items);
  poly_init(p);
}

static mx_status poly_reserve(mx_symtab *t, sym_poly *p, size_t need) {
  if (need <= p->cap) return MX_OK;
  size_t new_cap = p->cap * 2;
  while (new_cap < need) {
    if (new_cap > SIZE_MAX / 2) return out_of_memory(t);
    new_cap *= 2;
  }
  if (new_cap > SIZE_MAX / sizeof *p->items || !alloc_allowed(t)) return out_of_memory(t);
  sym_term *grown;
  if (p->items == p->local) {
    grown = malloc(new_cap * sizeof *grown);
    if (grown) memcpy(grown, p->local, p->count * sizeof *grown);
  } else {
    grown = realloc(p->items, new_cap * sizeof *grown);
  }
  if (!grown) return out_of_memory(t);
  p->items = grown;
  p->cap = new_cap;
  return MX_OK;
}

static mx_status poly_push(mx_symtab *t, sym_poly *p, int64_t coef, uint32_t mono) {
  mx_status st = poly_reserve(t, p, p->count + 1);
  if (st != MX_OK) return st;
  p->items[p->count++] = (sym_term){coef, mono};
  return MX_OK;
}

static mx_status poly_copy(mx_symtab *t, sym_poly *dst, const sym_poly *src) {
  mx_status st = poly_reserve(t, dst, src->count);
  if (st != MX_OK) return st;
  if (src->count) memcpy(dst->items, src->items, src->count * sizeof *src->items);
  dst->count = src->count;
  return MX_OK;
}

/* p = the constant c. */
static mx_status poly_set_const(mx_symtab *t, sym_poly *p, int64_t c) {
  p->count = 0;
  return c ? poly_push(t, p, c, MX__SYM_MONO_UNIT) : MX_OK;
}

/* p = the terms of d. MX_ERR_LIMIT when d is unknown or not an expression of t. */
static mx_status poly_load(mx_symtab *t, mx_dim d, sym_poly *p) {
  if (d >= 0) return poly_set_const(t, p, d);
  const mx__sym_expr *e = mx__sym_expr_of(t, d);
  p->count = 0;
  if (!e) return MX_ERR_LIMIT;
  size_t first = e->first_term, n = e->term_count;
  mx_status st = poly_reserve(t, p, n);
  if (st != MX_OK) return st;
  for (size_t i = 0; i < n; i++) {
    p->items[i] = (sym_term){t->term_coef[first + i], t->term_mono[first + i]};
  }
  p->count = n;
  return MX_OK;
}

/* out = a + b (out distinct from both). */
static mx_status poly_add(mx_symtab *t, const sym_poly *a, const sym_poly *b, sym_poly *out) {
  out->count = 0;
  mx_status st = poly_reserve(t, out, a->count + b->count);
  if (st != MX_OK) return st;
  size_t i = 0, j = 0;
  while (i < a->count || j < b->count) {
    int order = i == a->count ? 1 : j == b->count ? -1 : mono_cmp(t, a->items[i].mono, b->items[j].mono);
    if (order < 0) {
      out->items[out->count++] = a->items[i++];
    } else if (order > 0) {
      out->items[out->count++] = b->items[j++];
    } else {
      int64_t sum;
      if (__builtin_add_overflow(a->items[i].coef, b->items[j].coef, &sum)) return MX_ERR_LIMIT;
      if (sum) out->items[out->count++] = (sym_term){sum, a->items[i].mono};
      i++;
      j++;
    }
  }
  return MX_OK;
}

/* p = -p. */
static mx_status poly_negate(sym_poly *p) {
  for (size_t i = 0; i < p->count; i++) {
    if (p->items[i].coef == INT64_MIN) return MX_ERR_LIMIT;
    p->items[i].coef = -p->items[i].coef;
  }
  return MX_OK;
}

/* out = a * (coef * mono), coef != 0. Order is kept because the monomial order is compatible
 * with multiplication. */
static mx_status poly_mul_term(mx_symtab *t, const sym_poly *a, int64_t coef, uint32_t mono, sym_poly *out) {
  out->count = 0;
  mx_status st = poly_reserve(t, out, a->count);
  if (st != MX_OK) return st;
  for (size_t i = 0; i < a->count; i++) {
    sym_term term;
    if (__builtin_mul_overflow(a->items[i].coef, coef, &term.coef)) return MX_ERR_LIMIT;
    st = mono_mul(t, a->items[i].mono, mono, &term.mono);
    if (st != MX_OK) return st;
    out->items[out->count++] = term;
  }
  return MX_OK;
}

/* out = a * b (out distinct from both): the sum of b times each term of a, merged in order. */
static mx_status poly_mul(mx_symtab *t, const sym_poly *a, const sym_poly *b, sym_poly *out) {
  if (a->count > b->count) {
    const sym_poly *swap = a;
    a = b;
    b = swap;
  }
  sym_poly partial, sum;
  poly_init(&partial);
  poly_init(&sum);
  mx_status st = MX_OK;
  out->count = 0;
  for (size_t i = 0; i < a->count; i++) {
    st = poly_mul_term(t, b, a->items[i].coef, a->items[i].mono, &partial);
    if (st != MX_OK) goto done;
    st = poly_add(t, out, &partial, &sum);
    if (st != MX_OK) goto done;
    st = poly_copy(t, out, &sum);
    if (st != MX_OK) goto done;
  }
done:
  poly_free(&sum);
  poly_free(&partial);
  return st;
}

/* acc = acc * factor, using `scratch` as the product buffer. */
static mx_status poly_mul_into(mx_symtab *t, sym_poly *acc, const sym_poly *factor, sym_poly *scratch) {
  mx_status st = poly_mul(t, acc, factor, scratch);
  return st == MX_OK ? poly_copy(t, acc, scratch) : st;
}

/* acc = acc + addend, using `scratch` as the sum buffer. */
static mx_status poly_add_into(mx_symtab *t, sym_poly *acc, const sym_poly *addend, sym_poly *scratch) {
  mx_status st = poly_add(t, acc, addend, scratch);
  return st == MX_OK ? poly_copy(t, acc, scratch) : st;
}

/* True when p is a constant; its value goes to *value. */
static bool poly_const_value(const sym_poly *p, int64_t *value) {
  if (p->count == 0) {
    *value = 0;
    return true;
  }
  if (p->count == 1 && p->items[0].mono == MX__SYM_MONO_UNIT) {
    *value = p->items[0].coef;
    return true;
  }
  return false;
}

/* --- expressions ----------------------------------------------------------------------------- */

/* The canonical dim of p: a plain number for a non-negative constant, else the interned
 * expression (created on first use). */
static mx_status poly_intern(mx_symtab *t, const sym_poly *p, mx_dim *out) {
  int64_t value;
  if (poly_const_value(p, &value) && value >= 0) {
    *out = value;
    return MX_OK;
  }
  uint64_t hash = mx__hash_mix(SYM_SEED_EXPR, p->count);
  uint64_t mask = 0;
  for (size_t i = 0; i < p->count; i++) {
    hash = mx__hash_mix(hash, (uint64_t)p->items[i].coef);
    hash = mx__hash_mix(hash, p->items[i].mono);
    mask |= t->monos[p->items[i].mono].mask;
  }
  if (t->expr_map.cap) {
    size_t slot_mask = t->expr_map.cap - 1;
    for (size_t j = (size_t)hash & slot_mask; t->expr_map.slots[j]; j = (j + 1) & slot_mask) {
      uint32_t id = t->expr_map.slots[j] - 1;
      const mx__sym_expr *e = &t->exprs[id];
      if (e->hash != hash || e->term_count != p->count) continue;
      size_t k = 0;
      while (k < p->count && t->term_coef[e->first_term + k] == p->items[k].coef &&
             t->term_mono[e->first_term + k] == p->items[k].mono) {
        k++;
      }
      if (k == p->count) {
        *out = mx__sym_expr_dim(id);
        return MX_OK;
      }
    }
  }
  size_t need = t->term_count + p->count;
  if (t->expr_count >= UINT32_MAX - 1 || need >= UINT32_MAX) return out_of_memory(t);
  if (!TABLE_GROW(t, t->term_coef, t->term_coef_cap, need)) return MX_ERR_OUT_OF_MEMORY;
  if (!TABLE_GROW(t, t->term_mono, t->term_mono_cap, need)) return MX_ERR_OUT_OF_MEMORY;
  if (!TABLE_GROW(t, t->exprs, t->expr_cap, t->expr_count + 1)) return MX_ERR_OUT_OF_MEMORY;
  if (!idmap_reserve(t, &t->expr_map, expr_hash_of)) return MX_ERR_OUT_OF_MEMORY;
  uint32_t id = (uint32_t)t->expr_count++;
  mx__sym_expr *e = &t->exprs[id];
  e->hash = hash;
  e->mask = mask;
  e->first_term = (uint32_t)t->term_count;
  e->term_count = (uint32_t)p->count;
  for (size_t i = 0; i < p->count; i++) {
    t->term_coef[t->term_count + i] = p->items[i].coef;
    t->term_mono[t->term_count + i] = p->items[i].mono;
  }
  t->term_count = need;
  idmap_place(&t->expr_map, hash, id);
  *out = mx__sym_expr_dim(id);
  return MX_OK;
}

/* The dim that is exactly the atom. */
static mx_status atom_dim(mx_symtab *t, uint32_t atom, mx_dim *out) {
  sym_poly p;
  poly_init(&p);
  uint32_t mono;
  mx_status st = atom_mono(t, atom, 1, &mono);
  if (st != MX_OK) goto done;
  st = poly_push(t, &p, 1, mono);
  if (st != MX_OK) goto done;
  st = poly_intern(t, &p, out);
done:
  poly_free(&p);
  return st;
}

/* True when d is a non-negative number or an expression of t. */
static bool dim_valid(const mx_symtab *t, mx_dim d) { return d >= 0 || mx__sym_expr_of(t, d) != NULL; }

/* The dim of the opaque operation atom kind(lhs, rhs); unknown on failure. */
static mx_dim op_atom_dim(mx_symtab *t, uint32_t kind, mx_dim lhs, mx_dim rhs) {
  uint32_t atom;
  mx_dim result = MX_DIM_UNKNOWN;
  if (!dim_valid(t, lhs) || !dim_valid(t, rhs)) return MX_DIM_UNKNOWN;
  if (intern_atom(t, kind, lhs, rhs, &atom) != MX_OK) return MX_DIM_UNKNOWN;
  if (atom_dim(t, atom, &result) != MX_OK) return MX_DIM_UNKNOWN;
  return result;
}

/* --- table lifetime -------------------------------------------------------------------------- */

mx_status mx_symtab_create(mx_symtab **out) {
  if (!out) return MX_ERR_INVALID_ARGUMENT;
  *out = NULL;
  mx_symtab *t = calloc(1, sizeof *t);
  if (!t) return MX_ERR_OUT_OF_MEMORY;
  mx__arena_init(&t->names, 4096);
  mx__strmap_init(&t->symbol_by_name);
  mx__strmap_init(&t->fresh_next);
  uint32_t unit;
  if (intern_mono(t, NULL, 0, &unit) != MX_OK) goto fail_table;
  *out = t;
  return MX_OK;
fail_table:
  mx_symtab_destroy(t);
  return MX_ERR_OUT_OF_MEMORY;
}

void mx_symtab_destroy(mx_symtab *t) {
  if (!t) return;
  free(t->atoms);
  free(t->atom_map.slots);
  free(t->factors);
  free(t->monos);
  free(t->mono_map.slots);
  free(t->term_coef);
  free(t->term_mono);
  free(t->exprs);
  free(t->expr_map.slots);
  free(t->symbols);
  mx__strmap_free(&t->symbol_by_name);
  mx__strmap_free(&t->fresh_next);
  mx__arena_release(&t->names);
  free(t);
}

mx_status mx_symtab_status(const mx_symtab *t) { return t ? t->status : MX_ERR_INVALID_ARGUMENT; }

/* --- symbols --------------------------------------------------------------------------------- */

static char *names_strdup(mx_symtab *t, const char *s) {
  char *copy = alloc_allowed(t) ? mx__arena_strdup(&t->names, s) : NULL;
  if (!copy) out_of_memory(t);
  return copy;
}

/* Appends a new symbol called `name` (not yet in the table). */
static mx_dim symbol_create(mx_symtab *t, const char *name) {
  size_t index = t->symbol_count;
  mx_dim dim = MX_DIM_UNKNOWN;
  if (index >= UINT32_MAX - 1) return MX_DIM_UNKNOWN;
  if (!TABLE_GROW(t, t->symbols, t->symbol_cap, index + 1)) return MX_DIM_UNKNOWN;
  char *copy = names_strdup(t, name);
  if (!copy) return MX_DIM_UNKNOWN;
  /* A failure below leaves the atom SYMBOL(index) and its expression interned but unused; the
   * next attempt for this index finds and reuses them. The name copy stays in the arena. */
  uint32_t atom;
  if (intern_atom(t, MX__SYM_ATOM_SYMBOL, (mx_dim)index, 0, &atom) != MX_OK) return MX_DIM_UNKNOWN;
  if (atom_dim(t, atom, &dim) != MX_OK) return MX_DIM_UNKNOWN;
  if (!alloc_allowed(t) || !mx__strmap_put(&t->symbol_by_name, copy, (uint32_t)index)) {
    out_of_memory(t);
    return MX_DIM_UNKNOWN;
  }
  t->symbols[index] = (mx__sym_symbol){copy, atom, dim};
  t->symbol_count++;
  return dim;
}

mx_dim mx_sym_named(mx_symtab *t, const char *name) {
  if (!t || !name || !*name) return MX_DIM_UNKNOWN;
  uint32_t index;
  if (mx__strmap_get(&t->symbol_by_name, name, &index)) return t->symbols[index].dim;
  return symbol_create(t, name);
}

mx_dim mx_sym_fresh(mx_symtab *t, const char *hint) {
  if (!t) return MX_DIM_UNKNOWN;
  if (!hint || !*hint) hint = SYM_FRESH_DEFAULT_HINT;
  if (!mx__strmap_get(&t->symbol_by_name, hint, NULL)) return symbol_create(t, hint);

  mx_dim result = MX_DIM_UNKNOWN;
  size_t len = strlen(hint) + 16; /* "_" + up to 10 digits + NUL, with room to spare */
  const char *key = hint;         /* key of `hint` in fresh_next */
  uint32_t next = 1;              /* suffix to try first */
  char *name = NULL;
  if (!alloc_allowed(t) || !(name = malloc(len))) {
    out_of_memory(t);
    goto done;
  }
  /* Resume after the last suffix handed out for this hint, so n fresh symbols cost O(n). */
  bool hint_known = mx__strmap_get(&t->fresh_next, hint, &next);
  for (;;) {
    snprintf(name, len, "%s_%" PRIu32, hint, next);
    if (!mx__strmap_get(&t->symbol_by_name, name, NULL)) break;
    if (next == UINT32_MAX) goto free_name; /* every suffix taken: give up, nothing is wrong */
    next++;
  }
  if (!hint_known) {
    key = names_strdup(t, hint);
    if (!key) goto free_name;
  }
  /* For a known hint, strmap keeps its stored key and only updates the value. The counter is
   * stored before the symbol is made so a failure leaves at worst an unused suffix. */
  uint32_t resume = next < UINT32_MAX ? next + 1 : next;
  if (!alloc_allowed(t) || !mx__strmap_put(&t->fresh_next, key, resume)) {
    out_of_memory(t);
    goto free_name;
  }
  result = symbol_create(t, name);
free_name:
  free(name);
done:
  return result;
}

mx_dim mx_sym_lookup(const mx_symtab *t, const char *name) {
  uint32_t index;
  if (!t || !name || !mx__strmap_get(&t->symbol_by_name, name, &index)) return MX_DIM_UNKNOWN;
  return t->symbols[index].dim;
}

size_t mx_symtab_symbol_count(const mx_symtab *t) { return t ? t->symbol_count : 0; }

const char *mx_symtab_symbol_name(const mx_symtab *t, size_t index) {
  return t && index < t->symbol_count ? t->symbols[index].name : NULL;
}

mx_dim mx_symtab_symbol_dim(const mx_symtab *t, size_t index) {
  return t && index < t->symbol_count ? t->symbols[index].dim : MX_DIM_UNKNOWN;
}

int64_t mx_sym_symbol_index(const mx_symtab *t, mx_dim d) {
  const mx__sym_expr *e = mx__sym_expr_of(t, d);
  if (!e || e->term_count != 1 || t->term_coef[e->first_term] != 1) return -1;
  const mx__sym_mono *m = &t->monos[t->term_mono[e->first_term]];
  if (m->factor_count != 1) return -1;
  mx__sym_factor f = t->factors[m->first_factor];
  const mx__sym_atom *a = &t->atoms[f.atom];
  if (f.power != 1 || a->kind != MX__SYM_ATOM_SYMBOL) return -1;
  return a->lhs;
}

/* --- constants ------------------------------------------------------------------------------- */

mx_dim mx_sym_const(mx_symtab *t, int64_t value) {
  if (value >= 0) return value;
  if (!t) return MX_DIM_UNKNOWN;
  sym_poly p;
  poly_init(&p);
  mx_dim result = MX_DIM_UNKNOWN;
  if (poly_set_const(t, &p, value) != MX_OK) goto done;
  if (poly_intern(t, &p, &result) != MX_OK) result = MX_DIM_UNKNOWN;
done:
  poly_free(&p);
  return result;
}

bool mx_sym_const_value(const mx_symtab *t, mx_dim d, int64_t *value) {
  int64_t v;
  if (d >= 0) {
    v = d;
  } else {
    const mx__sym_expr *e = mx__sym_expr_of(t, d);
    if (!e || e->term_count != 1 || t->term_mono[e->first_term] != MX__SYM_MONO_UNIT) return false;
    v = t->term_coef[e->first_term];
  }
  if (value) *value = v;
  return true;
}

/* --- ring arithmetic ------------------------------------------------------------------------- */

typedef enum sym_ring_op { SYM_OP_ADD, SYM_OP_SUB, SYM_OP_MUL } sym_ring_op;

/* a op b over the polynomial ring, canonical. */
static mx_dim ring_op(mx_symtab *t, mx_dim a, mx_dim b, sym_ring_op op) {
  if (!t || a == MX_DIM_UNKNOWN || b == MX_DIM_UNKNOWN) return MX_DIM_UNKNOWN;
  sym_poly pa, pb, result;
  poly_init(&pa);
  poly_init(&pb);
  poly_init(&result);
  mx_dim out = MX_DIM_UNKNOWN;
  mx_status st = poly_load(t, a, &pa);
  if (st != MX_OK) goto done;
  st = poly_load(t, b, &pb);
  if (st != MX_OK) goto done;
  switch (op) {
    case SYM_OP_SUB:
      st = poly_negate(&pb);
      if (st != MX_OK) goto done;
      /* fall through */
    case SYM_OP_ADD: st = poly_add(t, &pa, &pb, &result); break;
    case SYM_OP_MUL: st = poly_mul(t, &pa, &pb, &result); break;
  }
  if (st != MX_OK) goto done;
  if (poly_intern(t, &result, &out) != MX_OK) out = MX_DIM_UNKNOWN;
done:
  poly_free(&result);
  poly_free(&pb);
  poly_free(&pa);
  return out;
}

mx_dim mx_sym_add(mx_symtab *t, mx_dim a, mx_dim b) {
  if (a >= 0 && b >= 0) {
    int64_t sum;
    return __builtin_add_overflow(a, b, &sum) ? MX_DIM_UNKNOWN : sum;
  }
  return ring_op(t, a, b, SYM_OP_ADD);
}

mx_dim mx_sym_sub(mx_symtab *t, mx_dim a, mx_dim b) {
  if (a >= 0 && b >= 0 && a >= b) return a - b;
  return ring_op(t, a, b, SYM_OP_SUB);
}

mx_dim mx_sym_mul(mx_symtab *t, mx_dim a, mx_dim b) {
  if (a >= 0 && b >= 0) {
    int64_t product;
    return __builtin_mul_overflow(a, b, &product) ? MX_DIM_UNKNOWN : product;
  }
  return ring_op(t, a, b, SYM_OP_MUL);
}

mx_dim mx_sym_neg(mx_symtab *t, mx_dim a) {
  if (a == 0) return 0;
  return ring_op(t, 0, a, SYM_OP_SUB);
}

/* The sign of a - b when that difference is a constant. MX_ERR_LIMIT when it is not (or
 * overflows), MX_ERR_OUT_OF_MEMORY on allocation failure. Interns nothing. */
static mx_status difference_sign(mx_symtab *t, mx_dim a, mx_dim b, int *sign) {
  sym_poly pa, pb, diff;
  poly_init(&pa);
  poly_init(&pb);
  poly_init(&diff);
  int64_t value;
  mx_status st = poly_load(t, a, &pa);
  if (st != MX_OK) goto done;
  st = poly_load(t, b, &pb);
  if (st != MX_OK) goto done;
  st = poly_negate(&pb);
  if (st != MX_OK) goto done;
  st = poly_add(t, &pa, &pb, &diff);
  if (st != MX_OK) goto done;
  if (!poly_const_value(&diff, &value)) {
    st = MX_ERR_LIMIT;
    goto done;
  }
  *sign = (value > 0) - (value < 0);
done:
  poly_free(&diff);
  poly_free(&pb);
  poly_free(&pa);
  return st;
}

/* mx_sym_compare with the reason it could not decide. */
static mx_status compare_dims(mx_symtab *t, mx_dim a, mx_dim b, int *sign) {
  if (a == MX_DIM_UNKNOWN || b == MX_DIM_UNKNOWN) return MX_ERR_LIMIT;
  if (a == b) {
    *sign = 0;
    return MX_OK;
  }
  if (a >= 0 && b >= 0) {
    *sign = a < b ? -1 : 1;
    return MX_OK;
  }
  return t ? difference_sign(t, a, b, sign) : MX_ERR_LIMIT;
}

bool mx_sym_compare(mx_symtab *t, mx_dim a, mx_dim b, int *sign) {
  int s;
  if (compare_dims(t, a, b, &s) != MX_OK) return false;
  if (sign) *sign = s;
  return true;
}

/* --- division -------------------------------------------------------------------------------- */

/* coef / divisor when exact (divisor != 0). */
static bool coef_div_exact(int64_t coef, int64_t divisor, int64_t *quotient) {
  if (divisor == -1) {
    if (coef == INT64_MIN) return false;
    *quotient = -coef;
    return true;
  }
  if (coef % divisor != 0) return false;
  *quotient = coef / divisor;
  return true;
}

/* q = a / b when b divides a exactly as polynomials over the integers; MX_ERR_LIMIT when it
 * does not, or when deciding would overflow or exceed the step budget. b is non-zero. */
static mx_status poly_div_exact(mx_symtab *t, const sym_poly *a, const sym_poly *b, sym_poly *q) {
  sym_poly rest, step, next;
  poly_init(&rest);
  poly_init(&step);
  poly_init(&next);
  mx_status st = MX_OK;
  q->count = 0;
  if (b->count == 0) {
    st = MX_ERR_LIMIT;
    goto done;
  }
  int64_t lead_coef = b->items[0].coef;
  uint32_t lead_mono = b->items[0].mono;

  if (b->count == 1) {
    /* Dividing by one term maps each term on its own and keeps the order (the monomial order
     * is compatible with multiplication, hence with exact division too). */
    st = poly_reserve(t, q, a->count);
    for (size_t i = 0; st == MX_OK && i < a->count; i++) {
      sym_term term;
      if (!coef_div_exact(a->items[i].coef, lead_coef, &term.coef)) {
        st = MX_ERR_LIMIT;
      } else {
        st = mono_div(t, a->items[i].mono, lead_mono, &term.mono);
        if (st == MX_OK) q->items[q->count++] = term;
      }
    }
    goto done;
  }

  /* Long division: cancel the leading term of the rest with a multiple of b. If b divides
   * the rest, b's leading term divides the rest's, so failing to divide proves inexactness.
   * Each step strictly lowers the rest's leading monomial, so quotient terms come out in
   * canonical order. */
  st = poly_copy(t, &rest, a);
  for (size_t steps = 0; st == MX_OK && rest.count > 0; steps++) {
    int64_t coef;
    uint32_t mono;
    if (steps == SYM_DIV_MAX_STEPS || !coef_div_exact(rest.items[0].coef, lead_coef, &coef) ||
        coef == INT64_MIN) {
      st = MX_ERR_LIMIT;
      break;
    }
    st = mono_div(t, rest.items[0].mono, lead_mono, &mono);
    if (st != MX_OK) break;
    st = poly_push(t, q, coef, mono);
    if (st != MX_OK) break;
    st = poly_mul_term(t, b, -coef, mono, &step);
    if (st != MX_OK) break;
    st = poly_add(t, &rest, &step, &next);
    if (st != MX_OK) break;
    st = poly_copy(t, &rest, &next);
  }
done:
  poly_free(&next);
  poly_free(&step);
  poly_free(&rest);
  return st;
}

/* *out = a / b when the division is exact. MX_ERR_LIMIT when it is not; b is non-zero. */
static mx_status dim_div_exact(mx_symtab *t, mx_dim a, mx_dim b, mx_dim *out) {
  sym_poly pa, pb, quotient;
  poly_init(&pa);
  poly_init(&pb);
  poly_init(&quotient);
  mx_status st = poly_load(t, a, &pa);
  if (st != MX_OK) goto done;
  st = poly_load(t, b, &pb);
  if (st != MX_OK) goto done;
  st = poly_div_exact(t, &pa, &pb, &quotient);
  if (st != MX_OK) goto done;
  st = poly_intern(t, &quotient, out);
done:
  poly_free(&quotient);
  poly_free(&pb);
  poly_free(&pa);
  return st;
}

/* Shared front of floordiv and mod: rejects unknown or invalid operands and division by zero,
 * and reads constant operands. False when the answer is MX_DIM_UNKNOWN. */
static bool division_operands(mx_symtab *t, mx_dim a, mx_dim b, int64_t *av, bool *a_const, int64_t *bv,
                              bool *b_const) {
  if (!t || !dim_valid(t, a) || !dim_valid(t, b)) return false;
  *a_const = mx_sym_const_value(t, a, av);
  *b_const = mx_sym_const_value(t, b, bv);
  return !(*b_const && *bv == 0);
}

mx_dim mx_sym_floordiv(mx_symtab *t, mx_dim a, mx_dim b) {
  if (a >= 0 && b > 0) return a / b;
  int64_t av = 0, bv = 0;
  bool a_const, b_const;
  if (!division_operands(t, a, b, &av, &a_const, &bv, &b_const)) return MX_DIM_UNKNOWN;
  if (a_const && b_const) {
    if (av == INT64_MIN && bv == -1) return MX_DIM_UNKNOWN;
    return mx_sym_const(t, mx__sym_floor_div(av, bv));
  }
  if (a_const && av == 0) return 0;
  mx_dim quotient;
  mx_status st = dim_div_exact(t, a, b, &quotient);
  if (st == MX_OK) return quotient;
  if (st == MX_ERR_OUT_OF_MEMORY) return MX_DIM_UNKNOWN;
  return op_atom_dim(t, MX__SYM_ATOM_FLOORDIV, a, b);
}

mx_dim mx_sym_div(mx_symtab *t, mx_dim a, mx_dim b) {
  /* An exact quotient is also the floor quotient, so one rule serves both. */
  return mx_sym_floordiv(t, a, b);
}

mx_dim mx_sym_ceildiv(mx_symtab *t, mx_dim a, mx_dim b) {
  if (a >= 0 && b > 0) return a / b + (a % b != 0);
  return mx_sym_neg(t, mx_sym_floordiv(t, mx_sym_neg(t, a), b));
}

mx_dim mx_sym_mod(mx_symtab *t, mx_dim a, mx_dim b) {
  if (a >= 0 && b > 0) return a % b;
  int64_t av = 0, bv = 0;
  bool a_const, b_const;
  if (!division_operands(t, a, b, &av, &a_const, &bv, &b_const)) return MX_DIM_UNKNOWN;
  if (a_const && b_const) return mx_sym_const(t, mx__sym_floor_mod(av, bv));
  if (a_const && av == 0) return 0;
  mx_dim quotient;
  mx_status st = dim_div_exact(t, a, b, &quotient);
  if (st == MX_OK) return 0;
  if (st == MX_ERR_OUT_OF_MEMORY) return MX_DIM_UNKNOWN;
  return op_atom_dim(t, MX__SYM_ATOM_MOD, a, b);
}

/* Canonical operand order of commutative atoms: expressions by id, then plain numbers. */
static bool operand_before(mx_dim x, mx_dim y) {
  if (x <= -2 && y <= -2) return mx__sym_expr_index(x) < mx__sym_expr_index(y);
  if (x <= -2 || y <= -2) return x <= -2;
  return x < y;
}

static mx_dim min_or_max(mx_symtab *t, mx_dim a, mx_dim b, bool want_max) {
  if (a == MX_DIM_UNKNOWN || b == MX_DIM_UNKNOWN) return MX_DIM_UNKNOWN;
  if (a == b) return a;
  int sign;
  mx_status st = compare_dims(t, a, b, &sign);
  if (st == MX_OK) return (sign > 0) == want_max ? a : b;
  /* Out of memory: an atom here could hide a simplification, so give up instead. */
  if (!t || st == MX_ERR_OUT_OF_MEMORY) return MX_DIM_UNKNOWN;
  uint32_t kind = want_max ? MX__SYM_ATOM_MAX : MX__SYM_ATOM_MIN;
  return operand_before(a, b) ? op_atom_dim(t, kind, a, b) : op_atom_dim(t, kind, b, a);
}

mx_dim mx_sym_min(mx_symtab *t, mx_dim a, mx_dim b) { return min_or_max(t, a, b, false); }

mx_dim mx_sym_max(mx_symtab *t, mx_dim a, mx_dim b) { return min_or_max(t, a, b, true); }

/* --- substitution ---------------------------------------------------------------------------- */

/* kind(lhs, rhs) through the public constructors, so the result is simplified again. */
static mx_dim apply_operation(mx_symtab *t, uint32_t kind, mx_dim lhs, mx_dim rhs) {
  switch (kind) {
    case MX__SYM_ATOM_FLOORDIV: return mx_sym_floordiv(t, lhs, rhs);
    case MX__SYM_ATOM_MOD: return mx_sym_mod(t, lhs, rhs);
    case MX__SYM_ATOM_MIN: return mx_sym_min(t, lhs, rhs);
    case MX__SYM_ATOM_MAX: return mx_sym_max(t, lhs, rhs);
    default: return MX_DIM_UNKNOWN;
  }
}

static mx_dim substitute_dim(mx_symtab *t, mx_dim d, size_t index, mx_dim value);

/* out = atom^power with the substitution applied. */
static mx_status substitute_factor(mx_symtab *t, mx__sym_factor f, size_t index, mx_dim value,
                                   sym_poly *out) {
  mx__sym_atom atom = t->atoms[f.atom]; /* a copy: the pool may move while operands rebuild */
  sym_poly base, scratch;
  poly_init(&base);
  poly_init(&scratch);
  mx_status st = MX_OK;
  uint32_t mono;
  out->count = 0;
  if (!(atom.mask & (1ull << (index & 63)))) {
    /* Untouched atom: keep the factor as it is. */
    st = atom_mono(t, f.atom, f.power, &mono);
    if (st == MX_OK) st = poly_push(t, out, 1, mono);
    goto done;
  }
  if (atom.kind == MX__SYM_ATOM_SYMBOL) {
    st = (size_t)atom.lhs == index ? poly_load(t, value, &base) : atom_mono(t, f.atom, 1, &mono);
    if (st == MX_OK && (size_t)atom.lhs != index) st = poly_push(t, &base, 1, mono);
  } else {
    mx_dim lhs = substitute_dim(t, atom.lhs, index, value);
    mx_dim rhs = substitute_dim(t, atom.rhs, index, value);
    st = poly_load(t, apply_operation(t, atom.kind, lhs, rhs), &base);
  }
  if (st != MX_OK) goto done;
  st = poly_set_const(t, out, 1);
  for (uint32_t i = 0; st == MX_OK && i < f.power; i++) st = poly_mul_into(t, out, &base, &scratch);
done:
  poly_free(&scratch);
  poly_free(&base);
  return st;
}

static mx_dim substitute_dim(mx_symtab *t, mx_dim d, size_t index, mx_dim value) {
  const mx__sym_expr *e = mx__sym_expr_of(t, d);
  if (d >= 0) return d;
  if (!e) return MX_DIM_UNKNOWN;
  if (!(e->mask & (1ull << (index & 63)))) return d;
  /* Indices, not pointers: rebuilding operands interns new entries and may move the pools. */
  size_t first = e->first_term, n_terms = e->term_count;
  sym_poly sum, term, factor, scratch;
  poly_init(&sum);
  poly_init(&term);
  poly_init(&factor);
  poly_init(&scratch);
  mx_dim result = MX_DIM_UNKNOWN;
  mx_status st = MX_OK;
  for (size_t i = 0; st == MX_OK && i < n_terms; i++) {
    uint32_t mono = t->term_mono[first + i];
    st = poly_set_const(t, &term, t->term_coef[first + i]);
    size_t first_factor = t->monos[mono].first_factor, n_factors = t->monos[mono].factor_count;
    for (size_t j = 0; st == MX_OK && j < n_factors; j++) {
      st = substitute_factor(t, t->factors[first_factor + j], index, value, &factor);
      if (st == MX_OK) st = poly_mul_into(t, &term, &factor, &scratch);
    }
    if (st == MX_OK) st = poly_add_into(t, &sum, &term, &scratch);
  }
  if (st == MX_OK && poly_intern(t, &sum, &result) != MX_OK) result = MX_DIM_UNKNOWN;
  poly_free(&scratch);
  poly_free(&factor);
  poly_free(&term);
  poly_free(&sum);
  return result;
}

mx_dim mx_sym_substitute(mx_symtab *t, mx_dim d, size_t index, mx_dim value) {
  if (d >= 0) return d;
  if (!mx__sym_expr_of(t, d)) return MX_DIM_UNKNOWN;
  /* A symbol that does not exist cannot occur in d. */
  if (index >= t->symbol_count) return d;
  return substitute_dim(t, d, index, value);
}
