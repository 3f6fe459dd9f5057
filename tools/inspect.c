/* Model summary for `mixrt inspect` and `mixrt demo`: what a user needs to know before running a
 * model: its inputs and outputs with symbolic dims, its ops, and how well shapes resolve after
 * inference (values with concrete, symbolic and unknown-rank shapes) and folding. */
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "graph/ir.h"
#include "tools/cli.h"
#include "tools/fuse_log.h"
#include "tools/inspect.h"

bool mx_cli_parse_binding(const char *text, mx_symbol_binding *out, char *name_buf, size_t name_cap) {
  const char *eq = strchr(text, '=');
  if (!eq || eq == text || (size_t)(eq - text) >= name_cap) return false;
  memcpy(name_buf, text, (size_t)(eq - text));
  name_buf[eq - text] = '\0';
  int64_t v;
  if (!mx_cli_parse_int(eq + 1, &v) || v < 0) return false;
  out->name = name_buf;
  out->value = v;
  return true;
}

typedef struct op_count {
  const char *op;
  size_t n;
} op_count;

static int cmp_count(const void *a, const void *b) {
  const op_count *x = a, *y = b;
  if (x->n != y->n) return x->n < y->n ? 1 : -1;
  return strcmp(x->op, y->op);
}

/* Op histogram of the live nodes (malloc'd array, sorted by count then name). */
static size_t histogram(const mx_graph *g, op_count **out) {
  op_count *h = calloc(g->n_nodes ? g->n_nodes : 1, sizeof *h);
  size_t n = 0;
  if (!h) return 0;
  for (size_t i = 0; i < g->n_nodes; i++) {
    const mx_node *nd = &g->nodes[i];
    if (nd->flags & MX_NODE_DEAD) continue;
    size_t k = 0;
    while (k < n && strcmp(h[k].op, nd->op_type) != 0) k++;
    if (k == n) h[n++].op = nd->op_type;
    h[k].n++;
  }
  qsort(h, n, sizeof *h, cmp_count);
  *out = h;
  return n;
}

void mx_cli_print_io(FILE *out, const mx_graph *g, const mx_value_id *ids, size_t n, bool json) {
  for (size_t i = 0; i < n; i++) {
    const mx_value *v = &g->values[ids[i]];
    char shape[512];
    mx_shape_format(g->syms, &v->shape, shape, sizeof shape);
    if (json) {
      fprintf(out, "%s{\"name\": ", i ? ", " : "");
      mx__json_string(out, v->name);
      fprintf(out, ", \"dtype\": \"%s\", \"shape\": ", mx_dtype_name(v->dtype));
      mx__json_string(out, shape);
      fputc('}', out);
    } else {
      fprintf(out, "  %-24s %-9s %s\n", v->name, mx_dtype_name(v->dtype), shape);
    }
  }
}

int mx_cli_inspect_graph(const char *cmd, mx_graph *g, const char *passes, const mx_symbol_binding *bindings,
                         size_t n_bindings, bool json, FILE *out) {
  op_count *hist = NULL;
  size_t n_hist = histogram(g, &hist);
  size_t nodes_before = g->n_live_nodes;
  for (size_t i = 0; i < n_bindings; i++) {
    if (mx_graph_bind_symbol(g, bindings[i].name, bindings[i].value) != MX_OK) {
      free(hist);
      return mx_cli_runtime_error(cmd, "--shape %s=%lld: %s", bindings[i].name, (long long)bindings[i].value,
                                  mx_graph_last_error(g));
    }
  }
  mx_optimize_report rep;
  mx_status st = mx_graph_optimize(g, &rep);
  mx_fuse_report fuse;
  if (st == MX_OK) st = mx_graph_fuse(g, passes, &fuse);
  if (st == MX_OK) st = mx_graph_optimize(g, NULL);
  if (st != MX_OK) {
    free(hist);
    return mx_cli_runtime_error(cmd, "%s", mx_graph_last_error(g));
  }
  size_t concrete = 0, symbolic = 0, unknown_rank = 0, unknown_dims = 0;
  for (size_t i = 0; i < g->n_values; i++) {
    const mx_value *v = &g->values[i];
    if (v->flags & MX_VALUE_DEAD) continue;
    if (v->shape.rank == MX_RANK_UNKNOWN) {
      unknown_rank++;
      continue;
    }
    bool all = true;
    for (int32_t k = 0; k < v->shape.rank; k++) {
      if (!mx_dim_is_concrete(v->shape.dims[k])) all = false;
      if (mx_dim_is_unknown(v->shape.dims[k])) unknown_dims++;
    }
    if (all)
      concrete++;
    else
      symbolic++;
  }
  int64_t opset = mx_graph_opset(g, "");
  if (json) {
    fprintf(out, "{\"graph\": ");
    mx__json_string(out, g->name);
    fprintf(out, ", \"opset\": %lld, \"inputs\": [", (long long)opset);
    mx_cli_print_io(out, g, g->inputs, g->n_inputs, true);
    fprintf(out, "], \"outputs\": [");
    mx_cli_print_io(out, g, g->outputs, g->n_outputs, true);
    fprintf(out, "], \"nodes\": %zu, \"ops\": {", nodes_before);
    for (size_t i = 0; i < n_hist; i++) {
      fprintf(out, "%s", i ? ", " : "");
      mx__json_string(out, hist[i].op);
      fprintf(out, ": %zu", hist[i].n);
    }
    fprintf(out,
            "}, \"values\": {\"concrete\": %zu, \"symbolic\": %zu, \"unknown_rank\": %zu, \"unknown_dims\": "
            "%zu}, "
            "\"stage2\": ",
            concrete, symbolic, unknown_rank, unknown_dims);
    mx_cli_print_fuse_report_json(out, &fuse);
    fprintf(out, ", \"symbols\": [");
    size_t ns = mx_symtab_symbol_count(g->syms);
    for (size_t i = 0; i < ns; i++) {
      fprintf(out, "%s", i ? ", " : "");
      mx__json_string(out, mx_symtab_symbol_name(g->syms, i));
    }
    fprintf(
        out,
        "], \"folded_nodes\": %zu, \"removed_nodes\": %zu, \"removed_values\": %zu, \"nodes_after\": %zu}\n",
        rep.folded_nodes, rep.removed_nodes, rep.removed_values, g->n_live_nodes);
    free(hist);
    return MX_EXIT_OK;
  }
  fprintf(out, "graph '%s', opset %lld, %zu nodes\n", g->name, (long long)opset, nodes_before);
  fprintf(out, "inputs:\n");
  mx_cli_print_io(out, g, g->inputs, g->n_inputs, false);
  fprintf(out, "outputs (inferred):\n");
  mx_cli_print_io(out, g, g->outputs, g->n_outputs, false);
  fprintf(out, "ops:");
  for (size_t i = 0; i < n_hist; i++) fprintf(out, "%s %s x%zu", i ? "," : "", hist[i].op, hist[i].n);
  fprintf(out, "\n");
  size_t ns = mx_symtab_symbol_count(g->syms);
  fprintf(out, "symbols:");
  for (size_t i = 0; i < ns; i++) fprintf(out, "%s %s", i ? "," : "", mx_symtab_symbol_name(g->syms, i));
  fprintf(out, "%s\n", ns ? "" : " none");
  fprintf(out, "values: %zu concrete, %zu symbolic, %zu unknown-rank\n", concrete, symbolic, unknown_rank);
  fprintf(out, "passes: folded %zu nodes, removed %zu nodes and %zu values; %zu nodes remain\n",
          rep.folded_nodes, rep.removed_nodes, rep.removed_values, g->n_live_nodes);
  mx_cli_print_fuse_report(out, &fuse);
  free(hist);
  return MX_EXIT_OK;
}
