/* Shape specialization, the partitioner's side: which symbols are bound by input shapes and
 * which by data, and which UNKNOWN clusters can become static models once their symbols have
 * values ("specializable" clusters, docs/partition.md).
 *
 * A symbol is bound by an input shape when it is a whole dim of a graph input (`seq` in
 * [1, seq]): its value is known as soon as the inputs are fed. Every other symbol (NonZero's
 * count, a routing size, a fresh symbol inference made up) is bound by data: its value is known
 * only once an op has run. A cluster is specializable when none of its ops is data-dependent,
 * every shape it touches has a known rank and no unknown dim, and every symbol in those shapes
 * (and in the symbolic values of the small integer tensors it reads) is bound by an input
 * shape. Substituting those symbols' values then makes every shape concrete.
 *
 * The same analysis runs on a partition's clusters (dumps) and on a partition call's body at
 * load (v2runtime/spec*.c), so restored .mxm files need no stored flag. */
#ifndef MIXRT_PARTITIONER_SPEC_H
#define MIXRT_PARTITIONER_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "graph/ir.h"

/* Most symbols a specializable cluster may depend on (more: it stays dynamic). */
#define MX_SPEC_MAX_SYMS 8

typedef enum mx_spec_sym_kind {
  MX_SPEC_SYM_UNUSED = 0, /* appears in no graph input dim nor in the analyzed shapes */
  MX_SPEC_SYM_INPUT = 1,  /* a whole dim of a graph input */
  MX_SPEC_SYM_DATA = 2    /* bound only when an op has run (data-dependent) */
} mx_spec_sym_kind;

/* "input", "data" or "unused". */
const char *mx__spec_sym_kind_name(mx_spec_sym_kind k);

/* Kind of every symbol of g's table: kinds[i] for symbol i, i < n (n = the table's count when
 * the caller sized the array). Symbols that are whole dims of g's inputs are INPUT; every other
 * symbol used by a live value's shape or symbolic value is DATA. */
void mx__spec_symbol_kinds(const mx_graph *g, uint8_t *kinds, size_t n);

/* What the analysis of a set of nodes found. */
typedef struct mx_spec_info {
  bool specializable;
  uint32_t n_syms; /* symbols it depends on (ascending table indices) */
  uint32_t syms[MX_SPEC_MAX_SYMS];
  const char *why;     /* not specializable: static text ("a data-dependent op") */
  mx_node_id why_node; /*   the node at fault (of the analyzed graph), or MX_NO_NODE */
  int64_t why_sym;     /*   the symbol at fault, or -1 */
} mx_spec_info;

/* Analyzes nodes[0..n_nodes) of g (every live node when nodes is NULL). kinds comes from
 * mx__spec_symbol_kinds over the graph whose inputs bind the symbols (the root), n_kinds its
 * length; g must use the same symbol table. */
void mx__spec_analyze(const mx_graph *g, const mx_node_id *nodes, size_t n_nodes, const uint8_t *kinds,
                      size_t n_kinds, mx_spec_info *out);

#endif /* MIXRT_PARTITIONER_SPEC_H */
