/* `mixrt compile MODEL.onnx -o M.mxm`: compiles a fully static model (every symbol bound with
 * --shape) into a static plan, prints its memory-plan report and writes it as an .mxm file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/ir.h"
#include "mixrt/onnx.h"
#include "static_exec/static_exec.h"
#include "tools/commands.h"
#include "tools/inspect.h"

#define MAX_ITEMS 64

void mx_cmd_compile_help(FILE *out) {
  fprintf(
      out,
      "usage: mixrt compile MODEL.onnx [--shape SYM=VAL ...] [--streams N] [--frozen INDEX ...]\n"
      "                     [--indirect] [--external-fm] [--external-weights] -o M.mxm\n\n"
      "Compiles a fully static model into a static plan and writes it as an .mxm file that\n"
      "`mixrt run M.mxm` executes. Every symbolic input dim must be bound with --shape; the\n"
      "model is then inferred, constant-folded and compiled: a schedule (critical path first),\n"
      "up to N streams with events between them, the feature-map memory plan and one task per\n"
      "op. The memory-plan report is printed (docs/static.md explains it).\n\n"
      "options:\n"
      "  --shape SYM=VAL        bind a symbolic dim (e.g. --shape batch=1)\n"
      "  --streams N            internal streams independent branches may use (default 1)\n"
      "  --frozen INDEX         graph input INDEX never changes address after the first step\n"
      "  --indirect             HAL INDIRECT mode (tasks read the base table) instead of PATCH\n"
      "  --external-fm          the caller supplies the feature-map arena at each step\n"
      "  --external-weights     write the weights to M.mxm.weights next to the .mxm\n"
      "  -o FILE                the .mxm file to write (required)\n\n"
      "exit codes: 0 ok, 1 the model cannot be loaded, is not fully static or cannot be\n"
      "compiled or written, 2 usage error\n");
}

/* Lists the symbols that inputs still use; returns false when there are none. */
static bool report_unbound(const mx_graph *g) {
  size_t n_syms = mx_symtab_symbol_count(g->syms);
  bool any = false;
  for (size_t s = 0; s <= n_syms; s++) {
    /* s == n_syms stands for dims that are unknown rather than symbolic */
    char users[512] = "";
    size_t len = 0;
    for (size_t i = 0; i < g->n_inputs; i++) {
      const mx_value *v = &g->values[g->inputs[i]];
      bool uses = v->shape.rank < 0 && s == n_syms;
      for (int32_t k = 0; !uses && k < v->shape.rank; k++) {
        mx_dim d = v->shape.dims[k];
        if (mx_dim_is_concrete(d)) continue;
        if (mx_dim_is_unknown(d)) {
          uses = s == n_syms;
          continue;
        }
        uint32_t idx[16];
        size_t m = mx_sym_symbols_of(g->syms, d, idx, 16);
        for (size_t j = 0; j < m && j < 16; j++) uses = uses || idx[j] == s;
      }
      if (uses && len < sizeof users)
        len +=
            (size_t)snprintf(users + len, sizeof users - len, "%s'%s'", len ? ", " : "", v->name);
    }
    if (!len) continue;
    if (!any) fprintf(stderr, "mixrt compile: the model is not fully static:\n");
    any = true;
    if (s == n_syms)
      fprintf(stderr, "  unknown dims or ranks (no symbol to bind) in input(s) %s\n", users);
    else
      fprintf(stderr, "  unbound symbol '%s' used by input(s) %s\n",
              mx_symtab_symbol_name(g->syms, s), users);
  }
  if (any) fprintf(stderr, "bind every symbol with --shape SYM=VALUE\n");
  return any;
}

int mx_cmd_compile(int argc, char **argv) {
  const char *model = NULL, *out_path = NULL;
  mx_symbol_binding bindings[MAX_ITEMS];
  char names[MAX_ITEMS][128];
  uint32_t frozen[MAX_ITEMS];
  size_t nb = 0, nf = 0;
  mx_static_options o;
  mx_static_options_init(&o);
  mx_mxm_save_options so = {0};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--shape") == 0) {
      const char *v = mx_cli_option_value("compile", argc, argv, &i);
      if (!v) return MX_EXIT_USAGE;
      if (nb == MAX_ITEMS || !mx_cli_parse_binding(v, &bindings[nb], names[nb], sizeof names[nb]))
        return mx_cli_usage_error("compile", "--shape needs SYMBOL=VALUE with VALUE >= 0, not '%s'",
                                  v);
      nb++;
    } else if (strcmp(a, "--streams") == 0 || strcmp(a, "--frozen") == 0) {
      const char *v = mx_cli_option_value("compile", argc, argv, &i);
      int64_t x;
      if (!v) return MX_EXIT_USAGE;
      bool streams = a[2] == 's';
      if (!mx_cli_parse_int(v, &x) || x < (streams ? 1 : 0) ||
          x > (streams ? (int64_t)MX_STATIC_MAX_STREAMS : 65535))
        return mx_cli_usage_error("compile", "%s needs a number%s, not '%s'", a,
                                  streams ? " from 1 to 64" : " (an input index)", v);
      if (streams) {
        o.max_streams = (uint32_t)x;
      } else {
        if (nf == MAX_ITEMS)
          return mx_cli_usage_error("compile", "at most %d --frozen options", MAX_ITEMS);
        frozen[nf++] = (uint32_t)x;
      }
    } else if (strcmp(a, "--indirect") == 0) {
      o.mode = MX_HAL_MODEL_INDIRECT;
    } else if (strcmp(a, "--external-fm") == 0) {
      o.fm_external = true;
    } else if (strcmp(a, "--external-weights") == 0) {
      so.external_weights = true;
    } else if (strcmp(a, "-o") == 0) {
      if (!(out_path = mx_cli_option_value("compile", argc, argv, &i))) return MX_EXIT_USAGE;
    } else if (a[0] == '-') {
      return mx_cli_usage_error("compile", "unknown option '%s'", a);
    } else if (!model) {
      model = a;
    } else {
      return mx_cli_usage_error("compile", "only one MODEL may be given");
    }
  }
  if (!model) return mx_cli_usage_error("compile", "MODEL.onnx is required");
  if (!out_path) return mx_cli_usage_error("compile", "-o M.mxm is required");
  o.frozen_inputs = frozen;
  o.n_frozen = nf;

  int rc = MX_EXIT_RUNTIME;
  mx_error err = {0};
  mx_graph *g = NULL;
  mx_static_plan *p = NULL;
  if (mx_onnx_load_file(model, &g, &err) != MX_OK) {
    rc = mx_cli_runtime_error("compile", "%s", err.message);
    goto done;
  }
  for (size_t i = 0; i < nb; i++) {
    if (mx_graph_bind_symbol(g, bindings[i].name, bindings[i].value) != MX_OK) {
      rc = mx_cli_runtime_error("compile", "--shape %s=%lld: %s", bindings[i].name,
                                (long long)bindings[i].value, mx_graph_last_error(g));
      goto done;
    }
  }
  if (report_unbound(g)) goto done;
  if (mx_graph_optimize(g, NULL) != MX_OK) {
    rc = mx_cli_runtime_error("compile", "%s", mx_graph_last_error(g));
    goto done;
  }
  if (mx_static_compile(g, &o, &p, &err) != MX_OK) {
    rc = mx_cli_runtime_error("compile", "%s", err.message);
    goto done;
  }
  mx_static_plan_print_report(p, stdout);
  if (mx_mxm_save(p, out_path, &so, &err) != MX_OK) {
    rc = mx_cli_runtime_error("compile", "%s", err.message);
    goto done;
  }
  printf("wrote %s%s%s\n", out_path, so.external_weights ? " and " : "",
         so.external_weights ? "its .weights file" : "");
  rc = MX_EXIT_OK;
done:
  mx_static_plan_destroy(p);
  mx_graph_destroy(g);
  return rc;
}
