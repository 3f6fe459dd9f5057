/* `mixrt compile MODEL.onnx -o M.mxm`: compiles any model into mixrt's hybrid form (static
 * models for the known-shape clusters, dynamic plans for the rest, the lowered execution graph)
 * and writes it as an .mxm file that loads without compiling again. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/progress.h"
#include "graph/ir.h"
#include "mixrt/onnx.h"
#include "mixrt/session.h"
#include "tools/commands.h"
#include "tools/fuse_log.h"
#include "tools/inspect.h"
#include "tools/session_opts.h"
#include "v2runtime/session_impl.h"

#define MAX_ITEMS 64

void mx_cmd_compile_help(FILE *out) {
  fprintf(out,
          "usage: mixrt compile MODEL.onnx [--shape SYM=VAL ...] [--streams K] [--static-min-ops N]\n"
          "                     [--executor seq|topo|mt] [--device cpu|inline] [--frozen NAME ...]\n"
          "                     [--passes P] [--external-weights] [--progress] -o M.mxm\n\n"
          "Compiles a model the way a session does — inference and constant folding, partitioning\n"
          "into KNOWN and UNKNOWN clusters, a static model (schedule, streams, memory plan, tasks)\n"
          "per KNOWN cluster, a dynamic plan per UNKNOWN one, and the lowered execution graph — and\n"
          "writes it as an .mxm file. `mixrt run M.mxm` and mx_session_load_file load it without\n"
          "compiling again. Symbols bound with --shape become concrete (a model with every symbol\n"
          "bound is usually one static model); the others stay dynamic. The memory-plan report of\n"
          "every static model is printed (docs/static.md explains it).\n\n"
          "options:\n"
          "  --shape SYM=VAL         bind a symbolic dim (e.g. --shape batch=1)\n"
          "%s"
          "  --external-weights      write the static models' weights to M.mxm.weights (found next\n"
          "                          to the .mxm at load: rename or move the two files together)\n"
          "  --progress              stage lines with bytes and percentages on stderr even when it\n"
          "                          is not a terminal (on a terminal they are always shown)\n"
          "  -o FILE                 the .mxm file to write (required)\n\n"
          "exit codes: 0 ok, 1 the model cannot be loaded, compiled or written, 2 usage error\n",
          mx_cli_session_opts_help);
}

int mx_cmd_compile(int argc, char **argv) {
  const char *model = NULL, *out_path = NULL;
  mx_symbol_binding bindings[MAX_ITEMS];
  char names[MAX_ITEMS][128];
  size_t nb = 0;
  mx_cli_session_opts so;
  mx_cli_session_opts_init(&so);
  mx_session_save_options save = {0};
  bool progress = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int r = mx_cli_session_option("compile", &so, argc, argv, &i);
    if (r > 1) return r - 100;
    if (r == 1) continue;
    if (strcmp(a, "--shape") == 0) {
      const char *v = mx_cli_option_value("compile", argc, argv, &i);
      if (!v) return MX_EXIT_USAGE;
      if (nb == MAX_ITEMS || !mx_cli_parse_binding(v, &bindings[nb], names[nb], sizeof names[nb]))
        return mx_cli_usage_error("compile", "--shape needs SYMBOL=VALUE with VALUE >= 0, not '%s'", v);
      nb++;
    } else if (strcmp(a, "--external-weights") == 0) {
      save.external_weights = true;
    } else if (strcmp(a, "--progress") == 0) {
      progress = true;
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

  int rc = MX_EXIT_RUNTIME;
  mx_error err = {0};
  mx_graph *g = NULL;
  mx_session *s = NULL;
  mx__progress_enable_for_cli(progress);
  mx__progress_stage("compile: import ONNX");
  if (mx_onnx_load_file(model, &g, &err) != MX_OK) {
    rc = mx_cli_runtime_error("compile", "%s", err.message);
    goto done;
  }
  for (size_t i = 0; i < nb; i++) {
    if (mx_graph_bind_symbol(g, bindings[i].name, bindings[i].value) != MX_OK) {
      rc = mx_graph_last_error(g)[0] && strstr(mx_graph_last_error(g), "has no symbol")
               ? mx_cli_usage_error("compile", "--shape %s: %s", bindings[i].name, mx_graph_last_error(g))
               : mx_cli_runtime_error("compile", "--shape %s=%lld: %s", bindings[i].name,
                                      (long long)bindings[i].value, mx_graph_last_error(g));
      goto done;
    }
  }
  if (mx_session_create(&so.o, &s, &err) != MX_OK) {
    rc = mx_cli_runtime_error("compile", "%s", err.message);
    goto done;
  }
  mx_graph *owned = g;
  g = NULL; /* the session owns it now, also on failure */
  mx__progress_stage("compile: infer, fold, partition, compile static models, lower");
  if (mx_session_load_graph(s, owned) != MX_OK) {
    rc = mx_cli_runtime_error("compile", "%s", mx_session_last_error(s));
    goto done;
  }
  const mx_program *p = s->prog;
  printf("compiled '%s': %zu static and %zu dynamic partitions, %u Main kernels\n", model, p->static_calls,
         p->dynamic_calls, p->main.n_nodes);
  mx_cli_print_fuse_report(stdout, mx_session_fuse_report(s));
  printf("inputs:\n");
  for (size_t i = 0; i < mx_session_input_count(s); i++) {
    mx_io_info info;
    mx_session_input_info(s, i, &info);
    printf("  %-24s %-9s %s\n", info.name, mx_dtype_name(info.dtype), info.shape);
  }
  for (size_t c = 0; c < p->n_calls; c++) {
    if (p->calls[c].unknown) continue;
    printf("static model '%s':\n", p->calls[c].name);
    mx__static_plan_print_report(p->calls[c].plan, stdout);
  }
  mx__progress_stage("compile: save");
  if (mx_session_save(s, out_path, &save) != MX_OK) {
    rc = mx_cli_runtime_error("compile", "%s", mx_session_last_error(s));
    goto done;
  }
  printf("wrote %s%s%s\n", out_path, save.external_weights ? " and " : "",
         save.external_weights ? "its .weights file" : "");
  mx__progress_stage("compile: done");
  rc = MX_EXIT_OK;
done:
  mx_session_destroy(s);
  mx_graph_destroy(g);
  return rc;
}
