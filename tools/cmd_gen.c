/* `mixrt gen`: writes one of the built-in models (include/mixrt/models.h) as an ONNX file.
 *
 * The model is built with seeded random weights, inferred (so the file declares the dtypes and
 * shapes of its outputs too), saved with mx_onnx_save_file, and summarized in one line: node
 * count, inputs with their symbolic dims, weight bytes. Each option applies to some of the
 * models; giving one to a model that does not take it is a usage error, as is a configuration
 * the generator refuses. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/progress.h"
#include "graph/ir.h"
#include "graph/onnx/onnx_refs.h"
#include "mixrt/models.h"
#include "mixrt/onnx.h"
#include "tools/commands.h"

enum { M_LLAMA = 1, M_MOE = 2, M_ENCODER = 4 };

enum {
  O_LAYERS,
  O_HIDDEN,
  O_HEADS,
  O_KV_HEADS,
  O_HEAD_DIM,
  O_FFN,
  O_VOCAB,
  O_MAX_POS,
  O_EXPERTS,
  O_TOP_K,
  O_SEED,
  O_COUNT
};

/* One numeric option. */
typedef struct gen_option {
  const char *flag; /* "--layers" */
  unsigned models;  /* M_* bits of the models that take it */
  int64_t min;      /* smallest accepted value */
} gen_option;

static const gen_option options[O_COUNT] = {
    [O_LAYERS] = {"--layers", M_LLAMA | M_ENCODER, 1},
    [O_HIDDEN] = {"--hidden", M_LLAMA | M_MOE | M_ENCODER, 1},
    [O_HEADS] = {"--heads", M_LLAMA | M_ENCODER, 1},
    [O_KV_HEADS] = {"--kv-heads", M_LLAMA, 1},
    [O_HEAD_DIM] = {"--head-dim", M_LLAMA, 0},
    [O_FFN] = {"--ffn", M_LLAMA | M_MOE, 1},
    [O_VOCAB] = {"--vocab", M_LLAMA, 1},
    [O_MAX_POS] = {"--max-pos", M_LLAMA | M_ENCODER, 1},
    [O_EXPERTS] = {"--experts", M_MOE, 1},
    [O_TOP_K] = {"--top-k", M_MOE, 1},
    [O_SEED] = {"--seed", M_LLAMA | M_MOE | M_ENCODER, 0},
};

void mx_cmd_gen_help(FILE *out) {
  mx_llama_config l;
  mx_moe_config m;
  mx_encoder_config e;
  mx_llama_config_default(&l);
  mx_moe_config_default(&m);
  mx_encoder_config_default(&e);
  fprintf(out,
          "usage: mixrt gen llama|moe|encoder -o FILE.onnx [options]\n\n"
          "Writes a built-in model with seeded random weights (nothing is downloaded) as an ONNX file\n"
          "(opset 23) that mixrt and other ONNX runtimes can run, then prints one line: the node\n"
          "count, the inputs with their symbolic dims, and the bytes of weights.\n\n"
          "models:\n"
          "  llama    Llama-style decode step, batch 1, one new token: input_ids int64 [1, 1] and per\n"
          "           layer past_key_<i>, past_value_<i> float32 [1, kv_heads, past_len, head_dim];\n"
          "           outputs logits [1, 1, vocab] and present_key_<i>, present_value_<i>\n"
          "           [1, kv_heads, past_len + 1, head_dim]. RMSNorm, rotary embedding at position\n"
          "           past_len, grouped-query Attention over the cache, SiLU MLP.\n"
          "  moe      mixture-of-experts block: x float32 [tokens, hidden] -> y [tokens, hidden];\n"
          "           TopK routing, per-expert NonZero/Gather, expert MLPs on a data-dependent\n"
          "           number of rows, ScatterND combine.\n"
          "  encoder  exported-transformer-style encoder: x float32 [batch, seq, hidden] -> y of the\n"
          "           same shape; every Reshape target comes from Shape arithmetic.\n\n"
          "options (the models that take each, with their defaults):\n"
          "  -o, --output FILE  the ONNX file to write (required)\n"
          "  --external-data  weights as ONNX external data in FILE.bin beside FILE (always when\n"
          "                 they pass 1.5 GB: one protobuf message stops at 2 GB)\n"
          "  --progress     stage lines on stderr (build, infer, write) even when stderr is not a\n"
          "                 terminal (on a terminal they are always shown)\n"
          "  --style S      llama: builtin (fused RMSNormalization, RotaryEmbedding, Attention ops)\n"
          "                 or exported (the same model in primitive ops, as torch.onnx.export\n"
          "                 writes it; the rewrite rules fuse it back)\n"
          "  --layers N     llama (%lld), encoder (%lld)\n"
          "  --hidden N     llama (%lld), moe (%lld), encoder (%lld): model width\n"
          "  --heads N      llama (%lld), encoder (%lld): attention (query) heads; for the encoder\n"
          "                 they must divide --hidden\n"
          "  --kv-heads N   llama (%lld): key/value heads; must divide --heads\n"
          "  --head-dim N   llama (%lld): size of one head, even; 0 means hidden / heads (heads must\n"
          "                 then divide hidden)\n"
          "  --ffn N        llama (%lld), moe (%lld): MLP width (per expert for moe)\n"
          "  --vocab N      llama (%lld)\n"
          "  --max-pos N    llama (%lld): rows of the rotary tables (past_len up to max-pos - 1);\n"
          "                 encoder (%lld): rows of the position embedding (largest seq)\n"
          "  --experts N    moe (%lld)\n"
          "  --top-k N      moe (%lld): experts per token, at most --experts\n"
          "  --seed N       all (%llu): weight seed\n\n"
          "Giving an option to a model that does not take it is a usage error.\n"
          "exit codes: 0 written, 1 runtime error (e.g. the file cannot be written), 2 usage error\n"
          "(unknown or inapplicable option, bad value, configuration the model refuses)\n",
          (long long)l.layers, (long long)e.layers, (long long)l.hidden, (long long)m.hidden,
          (long long)e.hidden, (long long)l.heads, (long long)e.heads, (long long)l.kv_heads,
          (long long)l.head_dim, (long long)l.ffn, (long long)m.ffn, (long long)l.vocab, (long long)l.max_pos,
          (long long)e.max_pos, (long long)m.experts, (long long)m.top_k, (unsigned long long)l.seed);
}

/* The user's choices. */
typedef struct gen_args {
  unsigned model;         /* one M_* bit */
  const char *model_name; /* as given (borrowed from argv) */
  const char *path;       /* -o FILE (borrowed from argv) */
  int64_t val[O_COUNT];   /* option values */
  bool given[O_COUNT];    /* which options were on the command line */
  bool exported;          /* --style exported: llama with primitive ops, as exporters write it */
  bool progress;          /* --progress: stage lines on stderr even when it is not a terminal */
  bool external;          /* --external-data: weights in FILE.onnx.bin beside the model */
} gen_args;

static int parse_args(int argc, char **argv, gen_args *a) {
  memset(a, 0, sizeof *a);
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (strcmp(arg, "-o") == 0 || strcmp(arg, "--output") == 0) {
      if (!(a->path = mx_cli_option_value("gen", argc, argv, &i))) return MX_EXIT_USAGE;
      continue;
    }
    if (strcmp(arg, "--progress") == 0) {
      a->progress = true;
      continue;
    }
    if (strcmp(arg, "--external-data") == 0) {
      a->external = true;
      continue;
    }
    if (strcmp(arg, "--style") == 0) {
      const char *v = mx_cli_option_value("gen", argc, argv, &i);
      if (!v) return MX_EXIT_USAGE;
      if (strcmp(v, "exported") != 0 && strcmp(v, "builtin") != 0)
        return mx_cli_usage_error("gen", "--style takes builtin or exported, not '%s'", v);
      a->exported = strcmp(v, "exported") == 0;
      continue;
    }
    if (arg[0] == '-') {
      int o = 0;
      while (o < O_COUNT && strcmp(arg, options[o].flag) != 0) o++;
      if (o == O_COUNT) return mx_cli_usage_error("gen", "unknown option '%s'", arg);
      const char *v = mx_cli_option_value("gen", argc, argv, &i);
      if (!v) return MX_EXIT_USAGE;
      if (!mx_cli_parse_int(v, &a->val[o]) || a->val[o] < options[o].min)
        return mx_cli_usage_error("gen", "%s needs a whole number >= %lld, not '%s'", arg,
                                  (long long)options[o].min, v);
      a->given[o] = true;
      continue;
    }
    if (a->model_name)
      return mx_cli_usage_error("gen", "one model only ('%s' and '%s' given)", a->model_name, arg);
    a->model_name = arg;
    if (strcmp(arg, "llama") == 0)
      a->model = M_LLAMA;
    else if (strcmp(arg, "moe") == 0)
      a->model = M_MOE;
    else if (strcmp(arg, "encoder") == 0)
      a->model = M_ENCODER;
    else
      return mx_cli_usage_error("gen", "unknown model '%s' (llama, moe or encoder)", arg);
  }
  if (!a->model_name) return mx_cli_usage_error("gen", "which model? (llama, moe or encoder)");
  if (!a->path) return mx_cli_usage_error("gen", "-o FILE is required");
  if (a->exported && a->model != M_LLAMA)
    return mx_cli_usage_error("gen", "--style exported applies to llama only");
  for (int o = 0; o < O_COUNT; o++)
    if (a->given[o] && !(options[o].models & a->model))
      return mx_cli_usage_error("gen", "%s does not apply to the %s model", options[o].flag, a->model_name);
  return MX_EXIT_OK;
}

/* Sets *field from option o when it was given. */
static void take(const gen_args *a, int o, int64_t *field) {
  if (a->given[o]) *field = a->val[o];
}

/* Builds the chosen model from its defaults and the options given. */
static mx_status build(const gen_args *a, mx_graph **g, mx_error *err) {
  if (a->model == M_LLAMA) {
    mx_llama_config c;
    mx_llama_config_default(&c);
    take(a, O_LAYERS, &c.layers);
    take(a, O_HIDDEN, &c.hidden);
    take(a, O_HEADS, &c.heads);
    take(a, O_KV_HEADS, &c.kv_heads);
    take(a, O_HEAD_DIM, &c.head_dim);
    take(a, O_FFN, &c.ffn);
    take(a, O_VOCAB, &c.vocab);
    take(a, O_MAX_POS, &c.max_pos);
    if (a->given[O_SEED]) c.seed = (uint64_t)a->val[O_SEED];
    return a->exported ? mx_model_llama_exported(&c, g, err) : mx_model_llama(&c, g, err);
  }
  if (a->model == M_MOE) {
    mx_moe_config c;
    mx_moe_config_default(&c);
    take(a, O_HIDDEN, &c.hidden);
    take(a, O_FFN, &c.ffn);
    take(a, O_EXPERTS, &c.experts);
    take(a, O_TOP_K, &c.top_k);
    if (a->given[O_SEED]) c.seed = (uint64_t)a->val[O_SEED];
    return mx_model_moe(&c, g, err);
  }
  mx_encoder_config c;
  mx_encoder_config_default(&c);
  take(a, O_LAYERS, &c.layers);
  take(a, O_HIDDEN, &c.hidden);
  take(a, O_HEADS, &c.heads);
  take(a, O_MAX_POS, &c.max_pos);
  if (a->given[O_SEED]) c.seed = (uint64_t)a->val[O_SEED];
  return mx_model_encoder(&c, g, err);
}

/* Bytes of constant data in g. */
static uint64_t weight_bytes(const mx_graph *g) {
  uint64_t total = 0;
  for (size_t v = 0; v < g->n_values; v++) {
    const mx_value *val = &g->values[v];
    size_t n;
    if ((val->flags & MX_VALUE_CONST) && !(val->flags & MX_VALUE_DEAD) && mx_tensor_nbytes(val->data, &n))
      total += n;
  }
  return total;
}

/* Prints the one-line summary: the first few inputs in full, the symbols of all inputs. */
static void print_summary(mx_graph *g, const char *model, const char *path) {
  enum { SHOWN_INPUTS = 3, MAX_SYMS = 16 };
  const size_t n_in = mx_graph_input_count(g);
  char syms[MAX_SYMS][64];
  size_t n_syms = 0;
  printf("wrote %s: %s, %zu nodes, %zu input%s (", path, model, mx_graph_node_count(g), n_in,
         n_in == 1 ? "" : "s");
  for (size_t i = 0; i < n_in; i++) {
    mx_value_id v = mx_graph_input(g, i);
    mx_shape s;
    char text[256];
    mx_graph_value_shape(g, v, &s);
    if (i < SHOWN_INPUTS) {
      mx_shape_format(mx_graph_symtab(g), &s, text, sizeof text);
      printf("%s%s %s %s", i ? ", " : "", mx_graph_value_name(g, v),
             mx_dtype_name(mx_graph_value_dtype(g, v)), text);
    }
    for (int32_t d = 0; d < s.rank; d++) {
      if (!mx_dim_is_expr(s.dims[d])) continue;
      mx_sym_format(mx_graph_symtab(g), s.dims[d], text, sizeof text);
      size_t k = 0;
      while (k < n_syms && strcmp(syms[k], text) != 0) k++;
      if (k == n_syms && n_syms < MAX_SYMS) snprintf(syms[n_syms++], sizeof syms[0], "%s", text);
    }
  }
  if (n_in > SHOWN_INPUTS) printf(", +%zu more", n_in - SHOWN_INPUTS);
  const size_t n_out = mx_graph_output_count(g);
  printf("), %zu output%s, symbolic dims: ", n_out, n_out == 1 ? "" : "s");
  for (size_t k = 0; k < n_syms; k++) printf("%s%s", k ? ", " : "", syms[k]);
  if (!n_syms) printf("none");
  uint64_t wb = weight_bytes(g);
  printf(", weights %llu bytes (%.2f MiB)\n", (unsigned long long)wb, (double)wb / (1024.0 * 1024.0));
}

int mx_cmd_gen(int argc, char **argv) {
  gen_args a;
  int rc = parse_args(argc, argv, &a);
  if (rc != MX_EXIT_OK) return rc;
  mx_error err;
  mx_graph *g = NULL;
  mx__progress_enable_for_cli(a.progress);
  mx__progress_stage("gen: build the model and its weights");
  mx_status st = build(&a, &g, &err);
  if (st == MX_ERR_INVALID_ARGUMENT) return mx_cli_usage_error("gen", "%s", err.message);
  if (st != MX_OK) return mx_cli_runtime_error("gen", "%s", err.message);
  mx__progress_stage("gen: infer");
  if (mx_graph_infer(g) != MX_OK) {
    rc = mx_cli_runtime_error("gen", "inferring the %s model: %s", a.model_name, mx_graph_last_error(g));
    goto destroy_graph;
  }
  mx__progress_stage("gen: write ONNX");
  /* Past ~1.5 GB the weights go out as external data: a protobuf message stops at 2 GB, and the
   * data file is written tensor by tensor instead of packing the whole model in memory. */
  uint64_t weight_bytes = 0;
  for (size_t v = 0; v < g->n_values; v++) {
    size_t nb;
    const mx_tensor *t = g->values[v].data;
    if ((g->values[v].flags & MX_VALUE_CONST) && t && mx_tensor_nbytes(t, &nb)) weight_bytes += nb;
  }
  bool external = a.external || weight_bytes > ((uint64_t)3 << 29);
  if (external ? mx__onnx_save_file_external(g, a.path, 1024, &err) != MX_OK
               : mx_onnx_save_file(g, a.path, &err) != MX_OK) {
    rc = mx_cli_runtime_error("gen", "%s", err.message);
    goto destroy_graph;
  }
  struct stat sb;
  if (mx__progress_enabled() && stat(a.path, &sb) == 0)
    mx__progress_bytes("gen: wrote ONNX", (uint64_t)sb.st_size, (uint64_t)sb.st_size);
  print_summary(g, a.model_name, a.path);
destroy_graph:
  mx_graph_destroy(g);
  return rc;
}
