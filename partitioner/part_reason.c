/* Reasons as text, and `explain`: why a node is in its cluster, followed back to what caused
 * it. A symbolic dim is traced to the graph inputs whose declared dims use its symbols, or to
 * the node whose data-dependent size created the symbol (fresh symbols are named
 * "<node>.<what>", possibly with a "_N" suffix). An unknown dim or rank is traced up the
 * producers to the graph input or the node that introduced it. An absorbed node names the
 * directly connected unknown pair and their own reasons. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "partitioner/partitioner_impl.h"

/* snprintf-style accumulation into a caller buffer. */
typedef struct text {
  char *buf;
  size_t cap;
  size_t len; /* length the full text needs */
} text;

static void put(text *t, const char *fmt, ...) MX_PRINTF(2, 3);
static void put(text *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  size_t room = t->len < t->cap ? t->cap - t->len : 0;
  int n = vsnprintf(room ? t->buf + t->len : NULL, room, fmt, ap);
  va_end(ap);
  if (n > 0) t->len += (size_t)n;
}

static const char *value_name(const mx_partition *p, mx_value_id v) {
  return v == MX_NO_VALUE ? "?" : p->g->values[v].name;
}

/* "input 0 'x'" / "output 1 'y'". */
static void put_tensor(text *t, const mx_partition *p, const mx_partition_reason *r) {
  put(t, "%s %d '%s'", r->is_output ? "output" : "input", r->slot, value_name(p, r->value));
}

static void put_sv(text *t, const mx_partition *p, mx_value_id v) {
  const mx_value *val = &p->g->values[v];
  put(t, "[");
  for (int32_t i = 0; i < val->sv_len && i < 8; i++) {
    char d[96];
    mx_sym_format(p->g->syms, val->sv[i], d, sizeof d);
    put(t, "%s%s", i ? ", " : "", d);
  }
  put(t, "%s]", val->sv_len > 8 ? ", ..." : "");
}

static void reason_line(text *t, const mx_partition *p, mx_node_id n) {
  const mx_graph *g = p->g;
  const mx_partition_reason *r = &p->reason[n];
  switch (r->kind) {
    case MX_PART_KNOWN: put(t, "all input and output shapes are concrete"); break;
    case MX_PART_SYMBOLIC_DIM: {
      char d[128];
      mx_sym_format(g->syms, g->values[r->value].shape.dims[r->dim], d, sizeof d);
      put_tensor(t, p, r);
      put(t, " dim %d is symbolic: %s", r->dim, d);
      break;
    }
    case MX_PART_UNKNOWN_DIM:
      put_tensor(t, p, r);
      put(t, " dim %d is unknown", r->dim);
      break;
    case MX_PART_UNKNOWN_RANK:
      put_tensor(t, p, r);
      put(t, " has an unknown rank");
      break;
    case MX_PART_DATA_DEPENDENT:
      put(t, "op %s has a data-dependent output shape", g->nodes[n].op_type);
      if (r->value != MX_NO_VALUE) {
        char s[256];
        mx__part_shape_text(p, r->value, s, sizeof s);
        put(t, " (output 0 '%s' is %s)", value_name(p, r->value), s);
      }
      break;
    case MX_PART_VALUE_DEPENDENT:
      put(t, "reads ");
      put_tensor(t, p, r);
      put(t, " by value, and that value is not known at compile time");
      if (g->values[r->value].sv_len >= 0) {
        put(t, ": ");
        put_sv(t, p, r->value);
      }
      break;
    case MX_PART_HOST_PLACEMENT:
      put(t, "shape arithmetic on the host: ");
      put_tensor(t, p, r);
      put(t, " = ");
      put_sv(t, p, r->value);
      put(t, " is known only at run time");
      break;
    case MX_PART_FORCED: put(t, "forced unknown by option (force_unknown)"); break;
    case MX_PART_CONTROL_FLOW: {
      const mx_node *cn = mx__part_control_node(&g->nodes[n]);
      put(t, "control flow: %s '%s' runs its subgraphs as one op on the host", cn ? cn->op_type : "?",
          cn ? cn->name : "?");
      /* Each body is compiled as a program of its own unless it moves sequences, optionals or
       * strings (part_control_body.c): say which one falls back to the interpreter. */
      const char *fallback = NULL;
      char why[160];
      for (uint32_t a = 0; cn && a < cn->n_attrs && !fallback; a++)
        if (cn->attrs[a].type == MX_ATTR_GRAPH && cn->attrs[a].graph &&
            !mx__part_body_compilable(cn->attrs[a].graph, why, sizeof why))
          fallback = cn->attrs[a].name;
      if (fallback)
        put(t, "; %s runs through the reference interpreter (%s)", fallback, why);
      else
        put(t, ", each body compiled as a program of its own");
      break;
    }
    case MX_PART_ALL_DYNAMIC:
      put(t, "static_min_ops is %lld: the whole graph runs dynamically", (long long)r->limit);
      break;
    case MX_PART_ABSORBED:
      put(t,
          "shapes are concrete, but it lies on a path between the directly connected unknown nodes "
          "'%s' -> '%s'",
          r->from == MX_NO_NODE ? "?" : g->nodes[r->from].name,
          r->to == MX_NO_NODE ? "?" : g->nodes[r->to].name);
      break;
    case MX_PART_SMALL_CLUSTER:
      put(t, "shapes are concrete, but its known %s had %lld op%s, fewer than static_min_ops %lld",
          p->stable ? "run" : "cluster", (long long)r->cluster_ops, r->cluster_ops == 1 ? "" : "s",
          (long long)r->limit);
      break;
    case MX_PART_CONSTANT: {
      uint32_t c = p->cluster_of_node[n];
      if (c != MX__PART_NONE && p->clusters[c].type == MX_CLUSTER_INPUT)
        put(t, "constant kept in the root: read by several clusters or a graph output");
      else
        put(t, "constant moved into cluster %u, its only reader", c);
      break;
    }
  }
}

mx_partition_reason mx__part_reason(mx_partition_reason_kind kind) {
  mx_partition_reason r;
  memset(&r, 0, sizeof r);
  r.kind = kind;
  r.value = MX_NO_VALUE;
  r.slot = -1;
  r.dim = -1;
  r.from = MX_NO_NODE;
  r.to = MX_NO_NODE;
  return r;
}

size_t mx__part_reason_text(const mx_partition *p, mx_node_id n, char *buf, size_t cap) {
  text t = {buf, buf ? cap : 0, 0};
  if (buf && cap) buf[0] = '\0';
  reason_line(&t, p, n);
  return t.len;
}

/* --- explain -------------------------------------------------------------------------------- */

static void explain_reason_of(FILE *out, const mx_partition *p, mx_node_id n, const char *indent) {
  char line[1024];
  mx__part_reason_text(p, n, line, sizeof line);
  fprintf(out, "%snode '%s' (%s): %s\n", indent, p->g->nodes[n].name, p->g->nodes[n].op_type, line);
}

/* Where symbol `s` comes from: the graph input dims that use it (on one line), or the node
 * whose data-dependent size created it. */
static void explain_symbol(FILE *out, const mx_partition *p, uint32_t s) {
  const mx_graph *g = p->g;
  const char *name = mx_symtab_symbol_name(g->syms, s);
  size_t found = 0;
  for (size_t i = 0; i < g->n_inputs; i++) {
    const mx_value *in = &g->values[g->inputs[i]];
    for (int32_t k = 0; k < in->shape.rank; k++) {
      mx_dim d = in->shape.dims[k];
      if (!mx_dim_is_expr(d)) continue;
      uint32_t idx[16];
      size_t ns = mx_sym_symbols_of(g->syms, d, idx, 16);
      bool uses = false;
      for (size_t j = 0; j < ns && j < 16; j++) uses = uses || idx[j] == s;
      if (!uses) continue;
      if (found == 0) {
        char dt[128];
        mx_sym_format(g->syms, d, dt, sizeof dt);
        fprintf(out, "  symbol '%s' comes from graph input '%s' dim %d (declared %s)", name, in->name, k, dt);
      } else if (found < 4) {
        fprintf(out, "%s '%s' dim %d", found == 1 ? ", also" : ",", in->name, k);
      }
      found++;
    }
  }
  if (found > 4) fprintf(out, ", ... (+%zu)", found - 4);
  if (found) fprintf(out, "\n");
  if (found || !name) return;
  /* A fresh symbol "<node>.<what>[_N]": try each prefix that ends before a '.'. */
  char buf[256];
  snprintf(buf, sizeof buf, "%s", name);
  for (char *dot = strrchr(buf, '.'); dot; dot = strrchr(buf, '.')) {
    *dot = '\0';
    mx_node_id n = mx_graph_find_node(g, buf);
    if (n != MX_NO_NODE) {
      fprintf(out, "  symbol '%s' is a size created at run time by node '%s' (%s)\n", name, g->nodes[n].name,
              g->nodes[n].op_type);
      explain_reason_of(out, p, n, "    ");
      return;
    }
  }
  fprintf(out, "  symbol '%s' is not declared by any graph input (it appeared during inference)\n", name);
}

/* Explains every symbol a dim uses. */
static void explain_dim(FILE *out, const mx_partition *p, mx_dim d) {
  uint32_t idx[32];
  size_t ns = mx_sym_symbols_of(p->g->syms, d, idx, 32);
  for (size_t j = 0; j < ns && j < 32; j++) explain_symbol(out, p, idx[j]);
}

/* Follows an unknown dim (dim >= 0) or rank (dim < 0) of value v up its producers. */
static void explain_unknown(FILE *out, const mx_partition *p, mx_value_id v, int32_t dim) {
  const mx_graph *g = p->g;
  for (int step = 0; step < 64; step++) {
    const mx_value *val = &g->values[v];
    const char *what = dim >= 0 ? "an unknown dim" : "an unknown rank";
    if (val->flags & MX_VALUE_INPUT) {
      fprintf(out, "  graph input '%s' is declared with %s\n", val->name, what);
      return;
    }
    mx_node_id pr = val->producer;
    if (pr == MX_NO_NODE || !mx__node_valid(g, pr)) {
      fprintf(out, "  value '%s' has %s and no producer\n", val->name, what);
      return;
    }
    const mx_node *nd = &g->nodes[pr];
    /* Continue through the first input of the producer that is unknown in the same way. */
    mx_value_id next = MX_NO_VALUE;
    int32_t next_dim = -1;
    for (uint32_t k = 0; k < nd->n_inputs && next == MX_NO_VALUE; k++) {
      mx_value_id in = nd->inputs[k];
      if (in == MX_NO_VALUE) continue;
      const mx_shape *s = &g->values[in].shape;
      if (s->rank == MX_RANK_UNKNOWN) {
        if (dim < 0) next = in;
        continue;
      }
      for (int32_t j = 0; j < s->rank; j++)
        if (mx_dim_is_unknown(s->dims[j])) {
          next = in;
          next_dim = j;
          break;
        }
    }
    if (next == MX_NO_VALUE) {
      fprintf(out, "  introduced by node '%s' (%s): its inference could not determine the %s of '%s'\n",
              nd->name, nd->op_type, dim >= 0 ? "dim" : "rank", val->name);
      if (p->reason[pr].kind == MX_PART_DATA_DEPENDENT || p->reason[pr].kind == MX_PART_VALUE_DEPENDENT)
        explain_reason_of(out, p, pr, "    ");
      return;
    }
    fprintf(out, "  '%s' comes from node '%s' (%s), whose input '%s' has %s too\n", val->name, nd->name,
            nd->op_type, g->values[next].name, what);
    v = next;
    dim = next_dim;
  }
  fprintf(out, "  (trace stopped after 64 steps)\n");
}

/* Explains a value's symbolic value elements. */
static void explain_sv(FILE *out, const mx_partition *p, mx_value_id v) {
  const mx_value *val = &p->g->values[v];
  if (val->sv_len < 0 || !val->sv) {
    fprintf(out, "  value '%s' is computed at run time\n", val->name);
    if (val->producer != MX_NO_NODE && mx__node_valid(p->g, val->producer))
      explain_reason_of(out, p, val->producer, "    ");
    return;
  }
  for (int32_t i = 0; i < val->sv_len; i++) explain_dim(out, p, val->sv[i]);
}

static void explain_node(FILE *out, mx_partition *p, mx_node_id n) {
  const mx_graph *g = p->g;
  const mx_node *nd = &g->nodes[n];
  uint32_t c = p->cluster_of_node[n];
  const mx__part_cluster *cl = &p->clusters[c];
  fprintf(out, "node '%s' (%s)\n", nd->name, nd->op_type);
  fprintf(out, "  cluster %u: %s, %u op%s", c, mx_cluster_type_name(cl->type), cl->n_nodes,
          cl->n_nodes == 1 ? "" : "s");
  if (cl->n_nodes) fprintf(out, ", ranks %lld..%lld", (long long)cl->min_rank, (long long)cl->max_rank);
  fprintf(out, "\n");
  char line[1024];
  mx__part_reason_text(p, n, line, sizeof line);
  const mx_partition_reason *r = &p->reason[n];
  fprintf(out, "  reason (%s): %s\n", mx_partition_reason_name(r->kind), line);
  switch (r->kind) {
    case MX_PART_SYMBOLIC_DIM: explain_dim(out, p, g->values[r->value].shape.dims[r->dim]); break;
    case MX_PART_UNKNOWN_DIM:
    case MX_PART_UNKNOWN_RANK:
      explain_unknown(out, p, r->value, r->kind == MX_PART_UNKNOWN_DIM ? r->dim : -1);
      break;
    case MX_PART_VALUE_DEPENDENT:
    case MX_PART_HOST_PLACEMENT: explain_sv(out, p, r->value); break;
    case MX_PART_ABSORBED:
      fprintf(out, "  merging '%s' and '%s' without it would make a cycle between clusters\n",
              r->from == MX_NO_NODE ? "?" : g->nodes[r->from].name,
              r->to == MX_NO_NODE ? "?" : g->nodes[r->to].name);
      if (r->from != MX_NO_NODE) explain_reason_of(out, p, r->from, "    ");
      if (r->to != MX_NO_NODE) explain_reason_of(out, p, r->to, "    ");
      break;
    case MX_PART_CONTROL_FLOW:
      if (mx__part_is_control_call(nd)) mx__part_dump_control_text(out, p, nd, 1);
      break;
    case MX_PART_KNOWN:
      if (cl->type == MX_CLUSTER_KNOWN)
        fprintf(out, "  merged with its known neighbours where the direct edge was the only path\n");
      else
        fprintf(out, "  its cluster became unknown by merging\n");
      break;
    default: break;
  }
}

/* Explains a graph input or a constant value. */
static void explain_value(FILE *out, mx_partition *p, mx_value_id v) {
  const mx_graph *g = p->g;
  const mx_value *val = &g->values[v];
  uint32_t c = p->cluster_of_value[v];
  char s[256];
  mx__part_shape_text(p, v, s, sizeof s);
  const char *kind = (val->flags & MX_VALUE_INPUT)   ? "graph input"
                     : (val->flags & MX_VALUE_CONST) ? "constant"
                                                     : "value";
  fprintf(out, "%s '%s' %s %s\n", kind, val->name, mx_dtype_name(val->dtype), s);
  if (c == MX__PART_NONE) {
    fprintf(out, "  not used by the partition\n");
    return;
  }
  const mx__part_cluster *cl = &p->clusters[c];
  fprintf(out, "  cluster %u: %s\n", c, mx_cluster_type_name(cl->type));
  if (cl->type == MX_CLUSTER_INPUT)
    fprintf(out, "  kept in the root and passed read-only to clusters ");
  else if (cl->type == MX_CLUSTER_DATA)
    fprintf(out, "  read by clusters ");
  else if (val->flags & MX_VALUE_CONST)
    fprintf(out, "  moved into the only cluster that reads it; also read by ");
  else
    fprintf(out, "  read outside its cluster by ");
  mx__part_print_ids(out, p->links + cl->first_succ, cl->n_succ);
  fprintf(out, "\n");
  if (val->flags & MX_VALUE_INPUT) {
    for (int32_t k = 0; k < val->shape.rank; k++)
      if (mx_dim_is_expr(val->shape.dims[k])) explain_dim(out, p, val->shape.dims[k]);
  }
}

mx_status mx_partition_explain(mx_partition *p, const char *name, FILE *out) {
  if (!p || !name || !out) return MX_ERR_INVALID_ARGUMENT;
  const mx_graph *g = p->g;
  mx_node_id n = mx_graph_find_node(g, name);
  if (n != MX_NO_NODE && p->cluster_of_node[n] != MX__PART_NONE) {
    explain_node(out, p, n);
    return MX_OK;
  }
  mx_value_id v = mx_graph_find_value(g, name);
  if (v != MX_NO_VALUE) {
    explain_value(out, p, v);
    return MX_OK;
  }
  return mx__part_fail(p, MX_ERR_NOT_FOUND, "explain: graph '%s' has no node or value named '%s'", g->name,
                       name);
}
