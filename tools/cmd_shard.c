/* `mixrt shard`: splits a transformer model for N-way tensor parallelism (graph/passes/shard.h)
 * and writes one ONNX file per rank plus a manifest naming each collective and why it is there. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "graph/passes/shard.h"
#include "mixrt/onnx.h"
#include "tools/commands.h"

void mx_cmd_shard_help(FILE *out) {
  fprintf(out,
          "usage: mixrt shard MODEL.onnx --tp N -o DIR [--passes P] [--quiet]\n\n"
          "Rewrites MODEL for N-way tensor parallelism after folding and the rewrite rules: attention\n"
          "heads split (Q/K/V weight columns, o_proj rows), the MLP split column then row, one\n"
          "AllReduce (domain mixrt) after each row-split MatMul, each Attention's KV cache inputs and\n"
          "outputs holding the rank's kv-heads, an embedding Gather split by vocabulary (masked rows +\n"
          "AllReduce) and an LM head split by vocabulary (AllGather of the logits). Writes\n"
          "DIR/rank0.onnx .. DIR/rank<N-1>.onnx and DIR/manifest.json, and prints each collective of\n"
          "rank 0 with the reason it is there. A graph it cannot shard is refused naming the node.\n\n"
          "options:\n"
          "  --tp N       number of ranks (1-1024)\n"
          "  -o DIR       output folder (created if missing)\n"
          "  --passes P   rewrite rules before sharding: none, default (default), all or RULE,-RULE,...\n"
          "  --quiet      print nothing but errors\n\n"
          "exit codes: 0 written, 1 the model cannot be loaded, sharded or written, 2 usage error\n");
}

/* One rank's graph: loaded, folded and fused as sessions do, then sharded. */
static int shard_rank(const char *model, const char *passes, int tp, int rank, mx_graph **out,
                      mx__shard_report *rep) {
  mx_error err = {0};
  mx_graph *g = NULL;
  if (mx_onnx_load_file(model, &g, &err) != MX_OK) return mx_cli_runtime_error("shard", "%s", err.message);
  mx_fuse_report fuse;
  if (mx_graph_optimize(g, NULL) != MX_OK || mx_graph_fuse(g, passes, &fuse) != MX_OK ||
      mx_graph_optimize(g, NULL) != MX_OK) {
    int rc = mx_cli_runtime_error("shard", "%s", mx_graph_last_error(g));
    mx_graph_destroy(g);
    return rc;
  }
  if (mx__shard_graph(g, tp, rank, rep, &err) != MX_OK) {
    int rc = mx_cli_runtime_error("shard", "rank %d of %d: %s", rank, tp, err.message);
    mx_graph_destroy(g);
    return rc;
  }
  *out = g;
  return MX_EXIT_OK;
}

static void json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\')
      fprintf(f, "\\%c", *s);
    else if ((unsigned char)*s < 0x20)
      fprintf(f, "\\u%04x", (unsigned char)*s);
    else
      fputc(*s, f);
  }
  fputc('"', f);
}

int mx_cmd_shard(int argc, char **argv) {
  const char *model = NULL, *dir = NULL, *passes = NULL;
  int64_t tp = 0;
  bool quiet = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--tp") == 0) {
      const char *v = mx_cli_option_value("shard", argc, argv, &i);
      if (!v) return MX_EXIT_USAGE;
      if (!mx_cli_parse_int(v, &tp) || tp < 1 || tp > 1024)
        return mx_cli_usage_error("shard", "--tp wants a number of ranks from 1 to 1024, not '%s'", v);
    } else if (strcmp(a, "-o") == 0) {
      dir = mx_cli_option_value("shard", argc, argv, &i);
      if (!dir) return MX_EXIT_USAGE;
    } else if (strcmp(a, "--passes") == 0) {
      passes = mx_cli_option_value("shard", argc, argv, &i);
      if (!passes) return MX_EXIT_USAGE;
    } else if (strcmp(a, "--quiet") == 0) {
      quiet = true;
    } else if (a[0] == '-') {
      return mx_cli_usage_error("shard", "unknown option '%s'", a);
    } else if (!model) {
      model = a;
    } else {
      return mx_cli_usage_error("shard", "one model only ('%s' is extra)", a);
    }
  }
  if (!model || !tp || !dir)
    return mx_cli_usage_error("shard", "usage: mixrt shard MODEL.onnx --tp N -o DIR");
  if (mkdir(dir, 0777) != 0 && errno != EEXIST)
    return mx_cli_runtime_error("shard", "cannot create '%s': %s", dir, strerror(errno));
  char path[4096];
  /* The manifest is kept in memory and written only once every rank is: a refused model leaves
   * no manifest behind. */
  char *man_text = NULL;
  size_t man_len = 0;
  FILE *man = open_memstream(&man_text, &man_len);
  if (!man) return mx_cli_runtime_error("shard", "out of memory");
  fprintf(man, "{\"model\": ");
  json_string(man, model);
  fprintf(man, ", \"tp\": %lld, \"ranks\": [", (long long)tp);
  int rc = MX_EXIT_OK;
  for (int r = 0; r < (int)tp && rc == MX_EXIT_OK; r++) {
    mx_graph *g = NULL;
    mx__shard_report rep;
    rc = shard_rank(model, passes, (int)tp, r, &g, &rep);
    if (rc != MX_EXIT_OK) break;
    char file[64];
    snprintf(file, sizeof file, "rank%d.onnx", r);
    snprintf(path, sizeof path, "%s/%s", dir, file);
    mx_error err = {0};
    if (mx_onnx_save_file(g, path, &err) != MX_OK) {
      rc = mx_cli_runtime_error("shard", "writing '%s': %s", path, err.message);
    } else {
      fprintf(man, "%s\n  {\"rank\": %d, \"file\": ", r ? "," : "", r);
      json_string(man, file);
      fprintf(
          man,
          ", \"attention_blocks\": %zu, \"mlp_blocks\": %zu, \"vocab_splits\": %zu, \"weights_sliced\": %zu, "
          "\"state_values\": %zu, \"collectives\": [",
          rep.n_attention, rep.n_mlp, rep.n_vocab, rep.n_weights, rep.n_states);
      for (size_t i = 0; i < rep.n_collectives; i++) {
        fprintf(man, "%s{\"node\": ", i ? ", " : "");
        json_string(man, rep.collectives[i].node);
        fprintf(man, ", \"op\": ");
        json_string(man, rep.collectives[i].op);
        fprintf(man, ", \"why\": ");
        json_string(man, rep.collectives[i].why);
        fputc('}', man);
      }
      fprintf(man, "]}");
      if (r == 0 && !quiet) {
        printf(
            "%s: tp %lld, %zu attention block(s), %zu MLP block(s), %zu vocabulary split(s), %zu weights "
            "sliced, %zu state input/output(s) per rank\n",
            model, (long long)tp, rep.n_attention, rep.n_mlp, rep.n_vocab, rep.n_weights, rep.n_states);
        for (size_t i = 0; i < rep.n_collectives; i++)
          printf("  %-10s %-40s %s\n", rep.collectives[i].op, rep.collectives[i].node,
                 rep.collectives[i].why);
      }
      if (!quiet) printf("wrote %s\n", path);
    }
    mx__shard_report_free(&rep);
    mx_graph_destroy(g);
  }
  fprintf(man, "\n]}\n");
  if (fclose(man) != 0 && rc == MX_EXIT_OK) rc = mx_cli_runtime_error("shard", "out of memory");
  if (rc == MX_EXIT_OK) {
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    FILE *f = fopen(path, "w");
    if (!f || fwrite(man_text, 1, man_len, f) != man_len || fclose(f) != 0)
      rc = mx_cli_runtime_error("shard", "cannot write '%s': %s", path, strerror(errno));
    else if (!quiet)
      printf("wrote %s\n", path);
  }
  free(man_text);
  return rc;
}
