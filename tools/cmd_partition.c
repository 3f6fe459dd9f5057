/* `mixrt partition MODEL.onnx`: how the dynamic-shape partitioner splits a model into KNOWN
 * and UNKNOWN clusters, as a text, DOT or JSON dump, or the reason for one node. For an .mxm
 * file, the partition recorded in it at compile (text or JSON). */
#include <stdio.h>
#include <string.h>

#include "common/json.h"
#include "graph/passes/shard.h"
#include "mixrt/onnx.h"
#include "mixrt/partition.h"
#include "partitioner/partitioner.h"
#include "static_exec/mxm_info.h"
#include "tools/commands.h"
#include "tools/fuse_log.h"
#include "tools/inspect.h"

#define MAX_BINDINGS 64
#define MAX_FORCED   256

/* A note per collective of a sharded model (mixrt shard): which split it undoes. */
static void print_collectives(const mx_graph *g, FILE *out) {
  bool first = true;
  for (mx_node_id n = 0; n < g->n_nodes; n++) {
    char why[512];
    if ((g->nodes[n].flags & MX_NODE_DEAD) || !mx__shard_explain(g, n, why, sizeof why)) continue;
    if (first) fprintf(out, "collectives (tensor-parallel shard):\n");
    first = false;
    fprintf(out, "  %s '%s': %s\n", g->nodes[n].op_type, g->nodes[n].name, why);
  }
}

void mx_cmd_partition_help(FILE *out) {
  fprintf(out,
          "usage: mixrt partition MODEL.onnx [--shape SYM=VAL ...] [--static-min-ops N] [--stable]\n"
          "                       [--force-unknown NODE ...] [--format text|dot|json] [-o FILE]\n"
          "                       [--explain NODE]\n\n"
          "Imports an ONNX model, binds the given symbols, runs shape inference, constant folding and\n"
          "dead-node removal, then partitions the graph into KNOWN clusters (every shape concrete:\n"
          "compiled into static models) and UNKNOWN clusters (run op by op with run-time shapes), and\n"
          "prints the result. docs/partition.md explains how to read it.\n\n"
          "options:\n"
          "  --shape SYM=VAL        bind a symbolic dim (e.g. --shape batch=1) before inference\n"
          "  --static-min-ops N     known clusters with fewer than N ops become unknown (default %d;\n"
          "                         0 keeps every known cluster; -1 makes the whole graph dynamic)\n"
          "  --stable               stable mode: clusters are runs of the topological order\n"
          "  --force-unknown NODE   mark NODE unknown whatever its shapes (repeatable)\n"
          "  --format FMT           text (default): one line per cluster and the totals;\n"
          "                         dot: Graphviz, clusters as colored boxes (render with `dot "
          "-Tsvg`);\n"
          "                         json: clusters, nodes with their reasons, totals\n"
          "  -o FILE                write to FILE instead of standard output\n"
          "  --passes P             rewrite rules before partitioning: none, default (default), all or\n"
          "                         RULE,-RULE,... (--passes list names them); their log goes to stderr\n"
          "  --explain NODE         print why NODE (or a graph input or constant) is in its cluster,\n"
          "                         traced back to the graph input or op that caused it, instead of\n"
          "                         the dump (not combined with --format)\n\n"
          "An .mxm file (told apart by content) is not partitioned again: its recorded partition\n"
          "calls are printed (text or json; no options that change the partition, no --explain).\n\n"
          "exit codes: 0 ok, 1 the model cannot be loaded, inferred or partitioned (or NODE does not\n"
          "exist), 2 usage error\n",
          MX_PARTITION_DEFAULT_STATIC_MIN_OPS);
}

typedef enum { FMT_TEXT, FMT_DOT, FMT_JSON } dump_format;

/* The partition recorded in an .mxm file. */
static int partition_mxm(const char *path, dump_format fmt, FILE *out) {
  mx__mxm_info in;
  mx_error err = {0};
  if (mx__mxm_read_info(path, &in, &err) != MX_OK)
    return mx_cli_runtime_error("partition", "%s", err.message);
  if (!in.root) {
    mx__mxm_info_release(&in);
    return mx_cli_runtime_error("partition", "'%s' holds static plans only, no partitioned model", path);
  }
  size_t unknown = 0, ops_known = 0, ops_unknown = 0;
  for (size_t c = 0; c < in.n_calls; c++) {
    unknown += in.calls[c].unknown;
    *(in.calls[c].unknown ? &ops_unknown : &ops_known) += in.calls[c].n_ops;
  }
  if (fmt == FMT_JSON) {
    fprintf(out, "{\"model\": ");
    mx__json_string(out, path);
    fprintf(out, ", \"calls\": [");
    for (size_t c = 0; c < in.n_calls; c++) {
      const mx__mxm_call_info *ci = &in.calls[c];
      fprintf(out, "%s{\"name\": ", c ? ", " : "");
      mx__json_string(out, ci->name);
      fprintf(out, ", \"type\": \"%s\", \"ops\": %zu, \"inputs\": %u, \"outputs\": %u, \"histogram\": ",
              ci->unknown ? "UNKNOWN" : "KNOWN", ci->n_ops, ci->n_inputs, ci->n_outputs);
      mx__json_string(out, ci->ops);
      fputc('}', out);
    }
    fprintf(out, "], \"known\": %zu, \"unknown\": %zu, \"known_ops\": %zu, \"unknown_ops\": %zu}\n",
            in.n_calls - unknown, unknown, ops_known, ops_unknown);
  } else {
    fprintf(out, "partition recorded in %s:\n", path);
    for (size_t c = 0; c < in.n_calls; c++) {
      const mx__mxm_call_info *ci = &in.calls[c];
      fprintf(out, "  %-7s %-24s %4zu ops, %u inputs, %u outputs: %s\n", ci->unknown ? "UNKNOWN" : "KNOWN",
              ci->name, ci->n_ops, ci->n_inputs, ci->n_outputs, ci->ops);
    }
    fprintf(out, "totals: %zu KNOWN clusters (%zu ops), %zu UNKNOWN clusters (%zu ops)\n",
            in.n_calls - unknown, ops_known, unknown, ops_unknown);
  }
  mx__mxm_info_release(&in);
  return MX_EXIT_OK;
}

int mx_cmd_partition(int argc, char **argv) {
  const char *model = NULL, *out_path = NULL, *explain = NULL;
  mx_partition_options o;
  mx_partition_options_init(&o);
  dump_format fmt = FMT_TEXT;
  bool fmt_given = false;
  mx_symbol_binding bindings[MAX_BINDINGS];
  char names[MAX_BINDINGS][128];
  size_t nb = 0;
  const char *forced[MAX_FORCED];
  size_t nf = 0;
  const char *passes = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--stable") == 0) {
      o.stable = true;
    } else if (strcmp(a, "--passes") == 0) {
      passes = mx_cli_option_value("partition", argc, argv, &i);
      if (!passes) return MX_EXIT_USAGE;
      int prc = mx_cli_check_passes("partition", passes);
      if (prc) return prc;
    } else if (strcmp(a, "--shape") == 0) {
      const char *v = mx_cli_option_value("partition", argc, argv, &i);
      if (!v) return MX_EXIT_USAGE;
      if (nb == MAX_BINDINGS)
        return mx_cli_usage_error("partition", "at most %d --shape options", MAX_BINDINGS);
      if (!mx_cli_parse_binding(v, &bindings[nb], names[nb], sizeof names[nb]))
        return mx_cli_usage_error("partition", "--shape needs SYMBOL=VALUE with VALUE >= 0, not '%s'", v);
      nb++;
    } else if (strcmp(a, "--static-min-ops") == 0) {
      const char *v = mx_cli_option_value("partition", argc, argv, &i);
      if (!v) return MX_EXIT_USAGE;
      if (!mx_cli_parse_int(v, &o.static_min_ops) || o.static_min_ops < -1)
        return mx_cli_usage_error("partition", "--static-min-ops needs an integer >= -1, not '%s'", v);
    } else if (strcmp(a, "--force-unknown") == 0) {
      const char *v = mx_cli_option_value("partition", argc, argv, &i);
      if (!v) return MX_EXIT_USAGE;
      if (nf == MAX_FORCED)
        return mx_cli_usage_error("partition", "at most %d --force-unknown options", MAX_FORCED);
      forced[nf++] = v;
    } else if (strcmp(a, "--format") == 0) {
      const char *v = mx_cli_option_value("partition", argc, argv, &i);
      if (!v) return MX_EXIT_USAGE;
      if (strcmp(v, "text") == 0)
        fmt = FMT_TEXT;
      else if (strcmp(v, "dot") == 0)
        fmt = FMT_DOT;
      else if (strcmp(v, "json") == 0)
        fmt = FMT_JSON;
      else
        return mx_cli_usage_error("partition", "--format must be text, dot or json, not '%s'", v);
      fmt_given = true;
    } else if (strcmp(a, "-o") == 0) {
      out_path = mx_cli_option_value("partition", argc, argv, &i);
      if (!out_path) return MX_EXIT_USAGE;
    } else if (strcmp(a, "--explain") == 0) {
      explain = mx_cli_option_value("partition", argc, argv, &i);
      if (!explain) return MX_EXIT_USAGE;
    } else if (a[0] == '-') {
      return mx_cli_usage_error("partition", "unknown option '%s'", a);
    } else if (!model) {
      model = a;
    } else {
      return mx_cli_usage_error("partition", "only one MODEL may be given");
    }
  }
  if (!model) return mx_cli_usage_error("partition", "MODEL.onnx is required");
  if (explain && fmt_given)
    return mx_cli_usage_error("partition", "--explain prints text; do not combine it with --format");
  o.force_unknown = forced;
  o.n_force_unknown = nf;
  if (mx__mxm_is_file(model)) {
    if (nb || nf || explain || passes || fmt == FMT_DOT || o.stable ||
        o.static_min_ops != MX_PARTITION_DEFAULT_STATIC_MIN_OPS)
      return mx_cli_usage_error("partition",
                                "an .mxm file holds the partition made at compile: only --format text|json "
                                "and -o apply");
    FILE *mout = out_path ? fopen(out_path, "w") : stdout;
    if (!mout) return mx_cli_runtime_error("partition", "cannot write '%s'", out_path);
    int mrc = partition_mxm(model, fmt, mout);
    if (mout != stdout && fclose(mout) != 0 && mrc == MX_EXIT_OK)
      mrc = mx_cli_runtime_error("partition", "writing '%s' failed", out_path);
    return mrc;
  }

  int rc = MX_EXIT_OK;
  mx_graph *g = NULL;
  mx_partition *p = NULL;
  FILE *out = stdout;
  mx_error err = {0};
  if (mx_onnx_load_file(model, &g, &err) != MX_OK) {
    rc = mx_cli_runtime_error("partition", "%s", err.message);
    goto done;
  }
  for (size_t i = 0; i < nb; i++) {
    if (mx_graph_bind_symbol(g, bindings[i].name, bindings[i].value) != MX_OK) {
      rc = mx_cli_runtime_error("partition", "--shape %s=%lld: %s", bindings[i].name,
                                (long long)bindings[i].value, mx_graph_last_error(g));
      goto done;
    }
  }
  mx_fuse_report fuse;
  if (mx_graph_optimize(g, NULL) != MX_OK || mx_graph_fuse(g, passes, &fuse) != MX_OK ||
      mx_graph_optimize(g, NULL) != MX_OK) {
    rc = mx_cli_runtime_error("partition", "%s", mx_graph_last_error(g));
    goto done;
  }
  mx_cli_print_fuse_report(stderr, &fuse);
  /* Control nodes become calls of their own, as sessions compile them. */
  if (mx__part_wrap_control(g, NULL, &err) != MX_OK || mx_partition_create(g, &o, &p, &err) != MX_OK) {
    rc = mx_cli_runtime_error("partition", "%s", err.message);
    goto done;
  }
  if (out_path) {
    out = fopen(out_path, "w");
    if (!out) {
      out = stdout;
      rc = mx_cli_runtime_error("partition", "cannot write '%s'", out_path);
      goto done;
    }
  }
  mx_status st;
  if (explain)
    st = mx_partition_explain(p, explain, out);
  else if (fmt == FMT_DOT)
    st = mx_partition_dump_dot(p, out);
  else if (fmt == FMT_JSON)
    st = mx_partition_dump_json(p, out);
  else
    st = mx_partition_dump_text(p, out);
  if (st == MX_OK && !explain && fmt != FMT_DOT && fmt != FMT_JSON) print_collectives(g, out);
  if (st == MX_ERR_NOT_FOUND)
    rc = mx_cli_runtime_error("partition", "%s", mx_partition_last_error(p));
  else if (st != MX_OK)
    rc = mx_cli_runtime_error("partition", "writing %s failed", out_path ? out_path : "the output");
done:
  if (out != stdout && fclose(out) != 0 && rc == MX_EXIT_OK)
    rc = mx_cli_runtime_error("partition", "writing '%s' failed", out_path);
  mx_partition_destroy(p);
  mx_graph_destroy(g);
  return rc;
}
