/* `mixrt inspect MODEL.onnx|M.mxm`: a model's inputs, outputs, ops and how its shapes resolve;
 * for an .mxm file, what the file holds (format, weights, static plans, partition calls, and the
 * control bodies stored compiled, nested under their control nodes). */
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
          "partition call with its op histogram, then the control bodies stored compiled, nested\n"
          "under their If/Loop/Scan node (each with its static plans and its own bodies)\n"
          "(--shape and --passes do not apply).\n\n"
          "options:\n"
          "  --shape SYM=VALUE   bind a symbolic dim (e.g. --shape batch=1) before inference\n"
          "  --json              print the same as one JSON object\n"
          "  --passes P          rewrite rules after folding: none, default, all or RULE,-RULE,...\n"
          "                      (--passes list names them); their compile log is printed\n");
}

static double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

static void print_plan_text(const mx__mxm_plan_info *p, int indent, FILE *out) {
  fprintf(out,
          "%*s%-24s %u tasks, %u streams, %u inputs, %u outputs, weights %.2f MiB, feature maps %.2f MiB\n",
          indent, "", p->name, p->n_tasks, p->n_streams, p->n_inputs, p->n_outputs, mib(p->weight_bytes),
          mib(p->fm_bytes));
}

/* The stored bodies, each under the control node holding it: in depth-first order a body's
 * nested bodies follow it, so its depth is its indentation. */
static void print_bodies_text(const mx__mxm_info *in, FILE *out) {
  if (!in->n_bodies) return;
  fprintf(out, "control bodies stored compiled: %zu\n", in->n_bodies);
  for (size_t b = 0; b < in->n_bodies; b++) {
    const mx__mxm_body_info *bi = &in->bodies[b];
    int indent = 2 * (int)bi->depth;
    fprintf(
        out,
        "%*s%s '%s' %s '%s': %zu static plan%s, %zu partition call%s (%zu static, %zu dynamic), %zu ops\n",
        indent, "", bi->op, bi->node, *bi->attr ? bi->attr : "body", bi->name, bi->n_plans,
        bi->n_plans == 1 ? "" : "s", bi->n_calls, bi->n_calls == 1 ? "" : "s", bi->n_calls - bi->n_unknown,
        bi->n_unknown, bi->n_ops);
    for (size_t i = 0; i < bi->n_plans; i++) print_plan_text(&in->plans[bi->first_plan + i], indent + 2, out);
  }
}

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
  if (in->n_root_plans == in->n_plans)
    fprintf(out, "static plans: %zu\n", in->n_plans);
  else
    fprintf(out, "static plans: %zu (%zu of the root, %zu in control bodies, listed under them)\n",
            in->n_plans, in->n_root_plans, in->n_plans - in->n_root_plans);
  for (size_t i = 0; i < in->n_root_plans; i++) print_plan_text(&in->plans[i], 2, out);
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
  print_bodies_text(in, out);
}

static void print_plans_json(const mx__mxm_info *in, size_t first, size_t n, FILE *out) {
  fprintf(out, "[");
  for (size_t i = 0; i < n; i++) {
    const mx__mxm_plan_info *p = &in->plans[first + i];
    fprintf(out, "%s{\"name\": ", i ? ", " : "");
    mx__json_string(out, p->name);
    fprintf(out, ", \"tasks\": %u, \"streams\": %u, \"weight_bytes\": %llu, \"fm_bytes\": %llu}", p->n_tasks,
            p->n_streams, (unsigned long long)p->weight_bytes, (unsigned long long)p->fm_bytes);
  }
  fprintf(out, "]");
}

/* The bodies held by the control nodes of parent's program (-1: the root), each with its own. */
static void print_bodies_json(const mx__mxm_info *in, int parent, FILE *out) {
  fprintf(out, "[");
  bool first = true;
  for (size_t b = 0; b < in->n_bodies; b++) {
    const mx__mxm_body_info *bi = &in->bodies[b];
    if (bi->parent != parent) continue;
    fprintf(out, "%s{\"node\": ", first ? "" : ", ");
    first = false;
    mx__json_string(out, bi->node);
    fprintf(out, ", \"op\": ");
    mx__json_string(out, bi->op);
    fprintf(out, ", \"attribute\": ");
    mx__json_string(out, bi->attr);
    fprintf(out, ", \"body\": ");
    mx__json_string(out, bi->name);
    fprintf(out, ", \"depth\": %u, \"calls\": %zu, \"unknown_calls\": %zu, \"ops\": %zu, \"static_plans\": ",
            bi->depth, bi->n_calls, bi->n_unknown, bi->n_ops);
    print_plans_json(in, bi->first_plan, bi->n_plans, out);
    fprintf(out, ", \"bodies\": ");
    print_bodies_json(in, (int)b, out);
    fputc('}', out);
  }
  fprintf(out, "]");
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
  /* static_plans: the root's; the bodies' are under "bodies", nested as their control nodes. */
  fprintf(out,
          ", \"weights_file_bytes\": %llu, \"inline_weight_bytes\": %llu, \"static_plans_total\": %zu, "
          "\"static_plans\": ",
          (unsigned long long)in->weights_size, (unsigned long long)in->inline_weights, in->n_plans);
  print_plans_json(in, 0, in->n_root_plans, out);
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
    fprintf(out, "], \"bodies\": ");
    print_bodies_json(in, -1, out);
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
