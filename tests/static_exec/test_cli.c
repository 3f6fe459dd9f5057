/* `mixrt compile` and `mixrt run M.mxm` as users meet them: a model with unbound symbols is
 * refused with the symbols and the inputs that use them; with --shape it compiles, prints the
 * memory-plan report and writes an .mxm file that `mixrt run` executes with the same outputs as
 * the reference path. Skipped when the program was not built. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "block.h"
#include "mixrt/models.h"
#include "mixrt/onnx.h"
#include "support/cli_run.h"

#define WORK_DIR MIXRT_BINARY_DIR "/tests/static-cli-work"

static char out[1 << 16];

static void need_binary(void) {
  if (!mxt_cli_available()) cr_skip_test("%s was not built", MXT_MIXRT_BIN);
  mxt_make_work_dir("static-cli-work");
}

/* Runs `mixrt <args>`; returns the exit code, output in out. */
static int run(const char *args) {
  int rc = mxt_cli_run(out, sizeof out, args);
  cr_assert_geq(rc, 0, "%s", out);
  return rc;
}

/* The first output line of a `mixrt run` (name, dtype, shape, first values). */
static void first_output(char *line, size_t cap) {
  const char *s = strstr(out, "outputs:\n");
  cr_assert_not_null(s, "%s", out);
  s += strlen("outputs:\n");
  size_t n = strcspn(s, "\n");
  cr_assert_lt(n, cap);
  memcpy(line, s, n);
  line[n] = '\0';
}

Test(static_cli, compile_and_run_encoder) {
  need_binary();
  mx_graph *g;
  mx_error err;
  cr_assert_eq(mx_model_encoder(NULL, &g, &err), MX_OK, "%s", err.message);
  cr_assert_eq(mx_onnx_save_file(g, WORK_DIR "/enc.onnx", &err), MX_OK, "%s", err.message);
  mx_graph_destroy(g);

  /* Unbound symbols stay dynamic: a hybrid model. */
  cr_assert_eq(run("compile " WORK_DIR "/enc.onnx -o " WORK_DIR "/enc_hybrid.mxm"), 0, "%s", out);
  cr_assert(strstr(out, "x                        float32   [batch, seq, 64]"), "%s", out);
  cr_assert_eq(run("run " WORK_DIR "/enc_hybrid.mxm --random --shape batch=2 --shape seq=9"), 0, "%s", out);
  cr_assert(strstr(out, "executor: hybrid"), "%s", out);
  char h[512];
  first_output(h, sizeof h);
  /* Every symbol bound: one static model. */
  cr_assert_eq(
      run("compile " WORK_DIR "/enc.onnx -o " WORK_DIR "/enc.mxm --shape batch=2 --shape seq=9 --streams 2"),
      0, "%s", out);
  cr_assert(strstr(out, "1 static and 0 dynamic partitions"), "%s", out);
  cr_assert(strstr(out, "FM arena") && strstr(out, "lower bound") && strstr(out, "no reuse"), "%s", out);
  cr_assert_eq(run("run " WORK_DIR "/enc.mxm --random --steps 3 --streams 2"), 0, "%s", out);
  cr_assert(strstr(out, "executor: hybrid (1 static and 0 dynamic partitions"), "%s", out);
  char a[512], b[512];
  first_output(a, sizeof a);
  cr_assert_eq(run("run " WORK_DIR "/enc.onnx --random --shape batch=2 --shape seq=9"), 0, "%s", out);
  first_output(b, sizeof b);
  cr_assert_str_eq(a, b);
  cr_assert_str_eq(h, b);
  cr_assert_eq(run("run " WORK_DIR "/enc.mxm --random --shape batch=3"), 2, "%s", out);
  cr_assert(strstr(out, "no symbolic dim called 'batch'"), "%s", out);
  cr_assert_eq(run("compile " WORK_DIR "/enc.onnx -o " WORK_DIR "/x.mxm --shape nosuch=3"), 2, "%s", out);
  cr_assert_eq(run("compile " WORK_DIR "/enc.onnx"), 2, "%s", out);
  cr_assert_eq(run("compile --help"), 0);
  cr_assert(strstr(out, "usage: mixrt compile"), "%s", out);
}

Test(static_cli, external_weights_and_corrupt_file) {
  need_binary();
  mxt_block_config cfg = mxt_block_default();
  mx_graph *g;
  cr_assert_eq(mxt_block_build(&cfg, &g), MX_OK);
  mx_error err;
  cr_assert_eq(mx_onnx_save_file(g, WORK_DIR "/block.onnx", &err), MX_OK, "%s", err.message);
  mx_graph_destroy(g);
  cr_assert_eq(run("compile " WORK_DIR "/block.onnx --external-weights -o " WORK_DIR "/block.mxm"), 0, "%s",
               out);
  struct stat sb;
  cr_assert_eq(stat(WORK_DIR "/block.mxm.weights", &sb), 0);
  cr_assert_eq(run("run " WORK_DIR "/block.mxm --random --output-dir " WORK_DIR), 0, "%s", out);
  /* Cut the file in half: refused, naming it. */
  FILE *f = fopen(WORK_DIR "/block.mxm", "r+b");
  cr_assert(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fclose(f);
  cr_assert_eq(truncate(WORK_DIR "/block.mxm", n / 2), 0);
  cr_assert_eq(run("run " WORK_DIR "/block.mxm --random"), 1, "%s", out);
  cr_assert(strstr(out, "block.mxm") && strstr(out, "truncated"), "%s", out);
}
