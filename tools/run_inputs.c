/* Inputs for `mixrt run` (see run_inputs.h). Random values: floats uniform in [-1, 1), integers
 * in [0, 10), bools fair coins, from a seeded xorshift generator so runs repeat exactly. */
#include <stdlib.h>
#include <string.h>

#include "common/half.h"
#include "graph/ir.h"
#include "kernels/kutil.h"
#include "tools/cli.h"
#include "tools/run_inputs.h"

static uint64_t next_random(uint64_t *s) {
  uint64_t x = *s;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *s = x;
}

/* Dims of a random input from its declared shape and the --shape bindings. */
static int random_dims(const char *cmd, mx_graph *g, const mx_value *decl, const mx_symbol_binding *bindings,
                       size_t n_bindings, int64_t *dims) {
  if (decl->shape.rank == MX_RANK_UNKNOWN)
    return mx_cli_usage_error(cmd, "input '%s' has an unknown rank: give it with --input %s=FILE.npy",
                              decl->name, decl->name);
  size_t n_syms = mx_symtab_symbol_count(g->syms);
  int64_t values[256];
  for (size_t s = 0; s < n_syms && s < 256; s++) values[s] = INT64_MIN;
  for (size_t b = 0; b < n_bindings; b++) {
    int64_t s = mx_sym_symbol_index(g->syms, mx_sym_lookup(g->syms, bindings[b].name));
    if (s >= 0 && s < 256) values[s] = bindings[b].value;
  }
  for (int32_t k = 0; k < decl->shape.rank; k++) {
    mx_dim d = decl->shape.dims[k];
    if (mx_dim_is_concrete(d)) {
      dims[k] = d;
      continue;
    }
    int64_t v;
    if (mx_dim_is_unknown(d) || mx_sym_eval(g->syms, d, values, n_syms < 256 ? n_syms : 256, &v) != MX_OK ||
        v < 0) {
      char text[128];
      mx_sym_format(g->syms, d, text, sizeof text);
      return mx_cli_usage_error(cmd, "input '%s' dim %d is '%s': bind its symbols with --shape SYMBOL=VALUE",
                                decl->name, (int)k, text);
    }
    dims[k] = v;
  }
  return MX_EXIT_OK;
}

static int random_input(const char *cmd, mx_graph *g, const mx_value *decl, uint64_t *rng,
                        const mx_symbol_binding *bindings, size_t n_bindings, mx_tensor *t) {
  int64_t dims[MX_MAX_RANK];
  int rc = random_dims(cmd, g, decl, bindings, n_bindings, dims);
  if (rc != MX_EXIT_OK) return rc;
  mx_status st = mx_tensor_alloc(decl->dtype, decl->shape.rank, dims, t);
  if (st != MX_OK)
    return mx_cli_runtime_error(cmd, "input '%s': cannot allocate it: %s", decl->name, mx_status_string(st));
  int64_t n;
  mx_tensor_numel(t, &n);
  for (int64_t i = 0; i < n; i++) {
    uint64_t r = next_random(rng);
    if (mx_dtype_is_float(decl->dtype))
      mx__kset_f64(t->data, decl->dtype, i, (double)(r >> 11) / (double)(1ull << 53) * 2.0 - 1.0);
    else if (decl->dtype == MX_BOOL)
      mx__kset_i64(t->data, decl->dtype, i, (int64_t)(r >> 63));
    else
      mx__kset_i64(t->data, decl->dtype, i, (int64_t)(r % 10));
  }
  return MX_EXIT_OK;
}

int mx_cli_make_inputs(const char *cmd, mx_graph *g, const mx_named_file *files, size_t n_files, bool random,
                       uint64_t seed, const mx_symbol_binding *bindings, size_t n_bindings,
                       mx_tensor *inputs) {
  uint64_t rng = seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull;
  for (size_t f = 0; f < n_files; f++) {
    if (mx_graph_find_value(g, files[f].name) == MX_NO_VALUE ||
        !(g->values[mx_graph_find_value(g, files[f].name)].flags & MX_VALUE_INPUT))
      return mx_cli_usage_error(cmd, "--input %s: the model has no input called '%s'", files[f].name,
                                files[f].name);
  }
  for (size_t i = 0; i < g->n_inputs; i++) {
    const mx_value *decl = &g->values[g->inputs[i]];
    const char *path = NULL;
    for (size_t f = 0; f < n_files; f++)
      if (strcmp(files[f].name, decl->name) == 0) path = files[f].path;
    int rc;
    if (path) {
      mx_error err;
      rc = mx_tensor_load_npy(path, &inputs[i], &err) == MX_OK ? MX_EXIT_OK
                                                               : mx_cli_runtime_error(cmd, "%s", err.message);
    } else if (random) {
      rc = random_input(cmd, g, decl, &rng, bindings, n_bindings, &inputs[i]);
    } else {
      rc = mx_cli_usage_error(cmd, "no value for input '%s': give --input %s=FILE.npy or --random",
                              decl->name, decl->name);
    }
    if (rc != MX_EXIT_OK) {
      for (size_t k = 0; k < i; k++) mx_tensor_release(&inputs[k]);
      return rc;
    }
    inputs[i].name = decl->name;
  }
  return MX_EXIT_OK;
}

int mx_cli_check_input_memory(const char *cmd, mx_session *s, mx_graph *g, const mx_named_file *files,
                              size_t n_files, bool random, const mx_symbol_binding *bindings,
                              size_t n_bindings) {
  if (!s || !random) return MX_EXIT_OK;
  mx_tensor *desc = calloc(g->n_inputs ? g->n_inputs : 1, sizeof *desc);
  if (!desc) return mx_cli_runtime_error(cmd, "out of memory");
  int rc = MX_EXIT_OK;
  for (size_t i = 0; i < g->n_inputs && rc == MX_EXIT_OK; i++) {
    const mx_value *decl = &g->values[g->inputs[i]];
    desc[i].name = decl->name;
    desc[i].dtype = decl->dtype;
    desc[i].rank = -1; /* a file's input: its size is not counted */
    bool from_file = false;
    for (size_t f = 0; f < n_files; f++) from_file = from_file || strcmp(files[f].name, decl->name) == 0;
    if (from_file) continue;
    rc = random_dims(cmd, g, decl, bindings, n_bindings, desc[i].dims);
    if (rc == MX_EXIT_OK) desc[i].rank = decl->shape.rank;
  }
  if (rc == MX_EXIT_OK && mx_session_check_memory(s, desc, g->n_inputs) != MX_OK)
    rc = mx_cli_runtime_error(cmd, "%s", mx_session_last_error(s));
  free(desc);
  return rc;
}

void mx_cli_print_tensor(FILE *out, const char *name, const mx_tensor *t) {
  fprintf(out, "  %-24s %-9s [", name ? name : "?", mx_dtype_name(t->dtype));
  for (int32_t k = 0; k < t->rank; k++) fprintf(out, "%s%lld", k ? ", " : "", (long long)t->dims[k]);
  fprintf(out, "]");
  int64_t n = 0;
  mx_tensor_numel(t, &n);
  for (int64_t i = 0; i < n && i < 6; i++) {
    if (mx_dtype_is_float(t->dtype))
      fprintf(out, " %.6g", mx__kget_f64(t->data, t->dtype, i));
    else
      fprintf(out, " %lld", (long long)mx__kget_i64(t->data, t->dtype, i));
  }
  fprintf(out, "%s\n", n > 6 ? " ..." : "");
}
