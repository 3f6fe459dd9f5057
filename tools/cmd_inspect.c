/* `mixrt inspect MODEL.onnx|M.mxm`: a model's inputs, outputs, ops and how its shapes resolve;
 * for an .mxm file, what the file holds (format, weights, static plans, partition calls). */
#include <string.h>

#include "common/json.h"
#include "graph/ir.h"
#include "mixrt/onnx.h"
#include "static_exec/mxm_info.h"
#include "tools/commands.h"
#include "tools/fuse_log.h"
#include "tools/inspect.h"

#define MAX_BINDINGS 64

void mx_cmd_inspect_help(FILE *out) {
  fprintf(out,
          "usage: mixrt inspect MODEL.onnx|M.mxm [--shape SYMBOL=VALUE ...] [--json]\n\n"
          "Imports an ONNX model and prints its inputs and outputs with symbolic dims, the opset,\n"
          "an op histogram, and, after shape inference, constant folding and dead-node removal, a\n"
          "line 'values: N concrete, N symbolic, N unknown-rank' and the pass counts.\n"
          "An .mxm file (told apart by content) is described without loading it: its format and\n"
          "size, where its weights are (inline, or the external file and its size), each static\n"
          "plan (tasks, streams, weight and feature-map bytes), the inputs and outputs, and each\n"
          "partition call with its op histogram (--shape and --passes do not apply).\n\n"
          "options:\n"
          "  --shape SYM=VALUE   bind a symbolic dim (e.g. --shape batch=1) before inference\n"
          "  --json              print the same as one JSON object\n"
          "  --passes P          rewrite rules after folding: none, default, all or RULE,-RULE,...\n"
          "                      (--passes list names them); their compile log is printed\n");
}

static double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

static void print_mxm_text(const char *path, const mx__mxm_info *in, FILE *out) {
  fprintf(out, "model: %s (.mxm format %u, %s, %llu bytes)\n", path, in->format_version, in->producer,
          (unsigned long long)in->file_size);
  uint64_t plan_weights = 0;
  for (size_t i = 0; i < in->n_plans; i++) plan_weights += in->plans[i].weight_bytes;
  if (in->weights_file)
    fprintf(out, "static weights: %.2f MiB in the external file '%s' (%llu bytes, next to the .mxm)\n",
            mib(plan_weights), in->weights_file, (unsigned long long)in->weights_size);
  else
    fprintf(out, "static weights: %.2f MiB inline\n", mib(in->inline_weights));
  fprintf(out, "static plans: %zu\n", in->n_plans);
  for (size_t i = 0; i < in->n_plans; i++) {
    const mx__mxm_plan_info *p = &in->plans[i];
    fprintf(
        out, "  %-24s %u tasks, %u streams, %u inputs, %u outputs, weights %.2f MiB, feature maps %.2f MiB\n",
        p->name, p->n_tasks, p->n_streams, p->n_inputs, p->n_outputs, mib(p->weight_bytes), mib(p->fm_bytes));
  }
  if (!in->root) {
    fprintf(out, "no runtime record: static plans only (mx__mxm_save)\n");
    return;
  }
  fprintf(out, "inputs:\n");
  mx_cli_print_io(out, in->root, in->root->inputs, in->root->n_inputs, false);
  fprintf(out, "outputs:\n");
  mx_cli_print_io(out, in->root, in->root->outputs, in->root->n_outputs, false);
  size_t unknown = 0;
  for (size_t c = 0; c < in->n_calls; c++) unknown += in->calls[c].unknown;
  fprintf(out, "partition calls: %zu (%zu static, %zu dynamic)\n", in->n_calls, in->n_calls - unknown,
          unknown);
  for (size_t c = 0; c < in->n_calls; c++) {
    const mx__mxm_call_info *ci = &in->calls[c];
    fprintf(out, "  %-7s %-24s %zu ops: %s\n", ci->unknown ? "UNKNOWN" : "KNOWN", ci->name, ci->n_ops,
            ci->ops);
  }
}

static void print_mxm_json(const char *path, const mx__mxm_info *in, FILE *out) {
  fprintf(out, "{\"model\": ");
  mx__json_string(out, path);
  fprintf(out, ", \"format\": %u, \"producer\": ", in->format_version);
  mx__json_string(out, in->producer);
  fprintf(out, ", \"bytes\": %llu, \"weights_file\": ", (unsigned long long)in->file_size);
  if (in->weights_file)
    mx__json_string(out, in->weights_file);
  else
    fprintf(out, "null");
  fprintf(out, ", \"weights_file_bytes\": %llu, \"inline_weight_bytes\": %llu, \"static_plans\": [",
          (unsigned long long)in->weights_size, (unsigned long long)in->inline_weights);
  for (size_t i = 0; i < in->n_plans; i++) {
    const mx__mxm_plan_info *p = &in->plans[i];
    fprintf(out, "%s{\"name\": ", i ? ", " : "");
    mx__json_string(out, p->name);
    fprintf(out, ", \"tasks\": %u, \"streams\": %u, \"weight_bytes\": %llu, \"fm_bytes\": %llu}", p->n_tasks,
            p->n_streams, (unsigned long long)p->weight_bytes, (unsigned long long)p->fm_bytes);
  }
  fprintf(out, "]");
  if (in->root) {
    fprintf(out, ", \"inputs\": [");
    mx_cli_print_io(out, in->root, in->root->inputs, in->root->n_inputs, true);
    fprintf(out, "], \"outputs\": [");
    mx_cli_print_io(out, in->root, in->root->outputs, in->root->n_outputs, true);
    fprintf(out, "], \"calls\": [");
    for (size_t c = 0; c < in->n_calls; c++) {
      fprintf(out, "%s{\"name\": ", c ? ", " : "");
      mx__json_string(out, in->calls[c].name);
      fprintf(out,
              ", \"type\": \"%s\", \"ops\": %zu, \"histogram\": ", in->calls[c].unknown ? "UNKNOWN" : "KNOWN",
              in->calls[c].n_ops);
      mx__json_string(out, in->calls[c].ops);
      fputc('}', out);
    }
    fprintf(out, "]");
  }
  fprintf(out, "}\n");
}

static int inspect_mxm(const char *path, bool json) {
  mx__mxm_info info;
  mx_error err = {0};
  if (mx__mxm_read_info(path, &info, &err) != MX_OK)
    return mx_cli_runtime_error("inspect", "%s", err.message);
  if (json)
    print_mxm_json(path, &info, stdout);
  else
    print_mxm_text(path, &info, stdout);
  mx__mxm_info_release(&info);
  return MX_EXIT_OK;
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
      if (nb == MAX_BINDINGS)
        return mx_cli_usage_error("inspect", "at most %d --shape options", MAX_BINDINGS);
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
  if (mx__mxm_is_file(model)) {
    if (nb || passes)
      return mx_cli_usage_error("inspect", "--shape and --passes apply to ONNX models, not .mxm files");
    return inspect_mxm(model, json);
  }
  mx_graph *g;
  mx_error err;
  if (mx_onnx_load_file(model, &g, &err) != MX_OK) return mx_cli_runtime_error("inspect", "%s", err.message);
  int rc = mx_cli_inspect_graph("inspect", g, passes, bindings, nb, json, stdout);
  mx_graph_destroy(g);
  return rc;
}
