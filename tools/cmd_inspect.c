/* `mixrt inspect MODEL.onnx`: a model's inputs, outputs, ops and how its shapes resolve. */
#include <string.h>

#include "mixrt/onnx.h"
#include "tools/commands.h"
#include "tools/fuse_log.h"
#include "tools/inspect.h"

#define MAX_BINDINGS 64

void mx_cmd_inspect_help(FILE *out) {
  fprintf(out,
          "usage: mixrt inspect MODEL.onnx [--shape SYMBOL=VALUE ...] [--json]\n\n"
          "Imports an ONNX model and prints its inputs and outputs with symbolic dims, the opset,\n"
          "an op histogram, and, after shape inference, constant folding and dead-node removal, a\n"
          "line 'values: N concrete, N symbolic, N unknown-rank' and the pass counts.\n\n"
          "options:\n"
          "  --shape SYM=VALUE   bind a symbolic dim (e.g. --shape batch=1) before inference\n"
          "  --json              print the same as one JSON object\n"
          "  --passes P          rewrite rules after folding: none, default, all or RULE,-RULE,...\n"
          "                      (--passes list names them); their compile log is printed\n");
}

int mx_cmd_inspect(int argc, char **argv) {
  const char *model = NULL;
  bool json = false;
  const char *passes = NULL;
  mx_symbol_binding bindings[MAX_BINDINGS];
  char names[MAX_BINDINGS][128];
  size_t nb = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0) {
      json = true;
    } else if (strcmp(argv[i], "--passes") == 0) {
      passes = mx_cli_option_value("inspect", argc, argv, &i);
      if (!passes) return MX_EXIT_USAGE;
      int rc = mx_cli_check_passes("inspect", passes);
      if (rc) return rc;
    } else if (strcmp(argv[i], "--shape") == 0) {
      const char *v = mx_cli_option_value("inspect", argc, argv, &i);
      if (!v) return MX_EXIT_USAGE;
      if (nb == MAX_BINDINGS) return mx_cli_usage_error("inspect", "at most %d --shape options", MAX_BINDINGS);
      if (!mx_cli_parse_binding(v, &bindings[nb], names[nb], sizeof names[nb]))
        return mx_cli_usage_error("inspect", "--shape needs SYMBOL=VALUE with VALUE >= 0, not '%s'", v);
      nb++;
    } else if (argv[i][0] == '-') {
      return mx_cli_usage_error("inspect", "unknown option '%s'", argv[i]);
    } else if (!model) {
      model = argv[i];
    } else {
      return mx_cli_usage_error("inspect", "only one MODEL may be given");
    }
  }
  if (!model) return mx_cli_usage_error("inspect", "MODEL.onnx is required");
  mx_graph *g;
  mx_error err;
  if (mx_onnx_load_file(model, &g, &err) != MX_OK) return mx_cli_runtime_error("inspect", "%s", err.message);
  int rc = mx_cli_inspect_graph("inspect", g, passes, bindings, nb, json, stdout);
  mx_graph_destroy(g);
  return rc;
}
