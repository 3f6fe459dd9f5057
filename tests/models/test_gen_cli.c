/* `mixrt gen` as users meet it: each model written to a file that mixrt reads back and infers
 * (with the shapes the generators promise), the one-line summary, --help naming every option
 * and the models it applies to, and exit codes 1 (runtime) and 2 (usage). Runs the `mixrt`
 * program of the same build; skipped when it has not been built. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mixrt/onnx.h"
#include "models/models_support.h"
#include "support/cli_run.h"

#define WORK_DIR MIXRT_BINARY_DIR "/tests/models-work"

static char out[1 << 16];

/* Runs `mixrt <args>`; returns the exit code, output in out. */
static int run(const char *args) {
  if (!mxt_cli_available()) cr_skip_test("%s is not built", MXT_MIXRT_BIN);
  mxt_make_work_dir("models-work");
  int rc = mxt_cli_run(out, sizeof out, args);
  cr_assert_geq(rc, 0, "%s", out);
  return rc;
}

/* Loads a written file and infers it; returns the graph. */
static mx_graph *load(const char *path) {
  mx_graph *g;
  mx_error err;
  cr_assert_eq(mx_onnx_load_file(path, &g, &err), MX_OK, "%s", err.message);
  cr_assert_eq(mx_graph_infer(g), MX_OK, "%s", mx_graph_last_error(g));
  return g;
}

Test(gen_cli, llama_file) {
  cr_assert_eq(run("gen llama -o " WORK_DIR "/llama.onnx --layers 3 --kv-heads 1 --seed 9"), 0, "%s", out);
  cr_assert(strstr(out, "wrote " WORK_DIR "/llama.onnx: llama, 81 nodes, 7 inputs"), "%s", out);
  cr_assert(strstr(out, "past_key_0 float32 [1, 1, past_len, 16]"), "%s", out);
  cr_assert(strstr(out, "symbolic dims: past_len, weights"), "%s", out);
  mx_graph *g = load(WORK_DIR "/llama.onnx");
  char buf[128];
  cr_assert_str_eq(mxt_shape_of(g, "logits", buf, sizeof buf), "[1, 1, 128]");
  cr_assert_str_eq(mxt_shape_of(g, "present_value_2", buf, sizeof buf), "[1, 1, past_len + 1, 16]");
  cr_assert_eq(mx_graph_opset(g, ""), 23);
  mx_graph_destroy(g);
}

Test(gen_cli, moe_and_encoder_files) {
  cr_assert_eq(run("gen moe --experts 3 --top-k 1 --hidden 16 --ffn 8 -o " WORK_DIR "/moe.onnx"), 0, "%s",
               out);
  cr_assert(strstr(out, "moe, 50 nodes, 1 input (x float32 [tokens, 16]), 1 output, symbolic dims: tokens"),
            "%s", out);
  mx_graph *g = load(WORK_DIR "/moe.onnx");
  char buf[128];
  cr_assert_str_eq(mxt_shape_of(g, "y", buf, sizeof buf), "[tokens, 16]");
  mx_graph_destroy(g);
  cr_assert_eq(run("gen encoder --layers 2 --hidden 32 --heads 2 --output " WORK_DIR "/enc.onnx"), 0, "%s",
               out);
  cr_assert(strstr(out, "x float32 [batch, seq, 32]"), "%s", out);
  cr_assert(strstr(out, "symbolic dims: batch, seq"), "%s", out);
  g = load(WORK_DIR "/enc.onnx");
  cr_assert_str_eq(mxt_shape_of(g, "y", buf, sizeof buf), "[batch, seq, 32]");
  mx_graph_destroy(g);
}

Test(gen_cli, help) {
  cr_assert_eq(run("--help"), 0);
  cr_assert(strstr(out, "gen "), "%s", out);
  cr_assert_eq(run("gen --help"), 0);
  const char *words[] = {"usage: mixrt gen llama|moe|encoder -o FILE.onnx",
                         "--layers",
                         "--hidden",
                         "--heads",
                         "--kv-heads",
                         "--head-dim",
                         "--ffn",
                         "--vocab",
                         "--max-pos",
                         "--experts",
                         "--top-k",
                         "--seed",
                         "past_len + 1",
                         "[tokens, hidden]",
                         "[batch, seq, hidden]"};
  for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
    cr_assert(strstr(out, words[i]), "%s missing", words[i]);
}

Test(gen_cli, usage_errors_exit_2) {
  cr_assert_eq(run("gen"), 2);
  cr_assert_eq(run("gen llama"), 2, "no -o");
  cr_assert(strstr(out, "-o FILE is required"), "%s", out);
  cr_assert_eq(run("gen gpt -o " WORK_DIR "/x.onnx"), 2);
  cr_assert(strstr(out, "unknown model 'gpt'"), "%s", out);
  cr_assert_eq(run("gen moe --layers 2 -o " WORK_DIR "/x.onnx"), 2);
  cr_assert(strstr(out, "--layers does not apply to the moe model"), "%s", out);
  cr_assert_eq(run("gen encoder --vocab 9 -o " WORK_DIR "/x.onnx"), 2);
  cr_assert_eq(run("gen llama --hidden 0 -o " WORK_DIR "/x.onnx"), 2);
  cr_assert_eq(run("gen llama --bogus 1 -o " WORK_DIR "/x.onnx"), 2);
  cr_assert(strstr(out, "--bogus"), "%s", out);
  cr_assert_eq(run("gen llama --heads 6 --kv-heads 4 -o " WORK_DIR "/x.onnx"), 2);
  cr_assert(strstr(out, "not a multiple of kv_heads"), "%s", out);
  cr_assert_eq(run("gen moe --top-k 9 -o " WORK_DIR "/x.onnx"), 2);
  cr_assert_eq(run("gen llama -o"), 2);
}

Test(gen_cli, unwritable_file_exits_1) {
  cr_assert_eq(run("gen moe -o /nonexistent-dir/x.onnx"), 1);
  cr_assert(strstr(out, "/nonexistent-dir/x.onnx"), "%s", out);
}
