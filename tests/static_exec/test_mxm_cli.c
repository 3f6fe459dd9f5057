/* `mixrt inspect` and `mixrt partition` on .mxm files, and the progress lines: a compiled llama
 * is described (format, external weights file, static plans, inputs, partition calls) in text
 * and JSON without its weights file; partition prints the recorded calls and refuses options
 * that would change them; a truncated file is a clean error; stage lines appear on stderr only
 * with --progress (stderr is not a terminal here). Skipped when the program was not built. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support/cli_run.h"

#define WORK_DIR MIXRT_BINARY_DIR "/tests/mxm-cli-work"

static char out[1 << 16];

static void need_binary(void) {
  if (!mxt_cli_available()) cr_skip_test("%s was not built", MXT_MIXRT_BIN);
  mxt_make_work_dir("mxm-cli-work");
}

static int run(const char *args) {
  int rc = mxt_cli_run(out, sizeof out, args);
  cr_assert_geq(rc, 0, "%s", out);
  return rc;
}

/* A small llama compiled with external weights to WORK_DIR/NAME.mxm (each test its own name:
 * tests may run in parallel). */
static void compile_llama(const char *name, bool progress) {
  char args[1024];
  snprintf(args, sizeof args, "gen llama -o %s/%s.onnx", WORK_DIR, name);
  cr_assert_eq(run(args), 0, "%s", out);
  snprintf(args, sizeof args, "compile %s/%s.onnx --external-weights%s -o %s/%s.mxm", WORK_DIR, name,
           progress ? " --progress" : "", WORK_DIR, name);
  cr_assert_eq(run(args), 0, "%s", out);
}

Test(mxm_cli, inspect_and_partition_read_mxm_files) {
  need_binary();
  compile_llama("step", false);
  cr_assert_null(strstr(out, "mixrt: ["), "no progress lines unless asked: %s", out);
  /* The description needs neither the weights file nor a compile. */
  cr_assert_eq(rename(WORK_DIR "/step.mxm.weights", WORK_DIR "/moved.weights"), 0);
  cr_assert_eq(run("inspect " WORK_DIR "/step.mxm"), 0, "%s", out);
  cr_assert(strstr(out, ".mxm format 3"), "%s", out);
  cr_assert(strstr(out, "in the external file 'step.mxm.weights'"), "%s", out);
  cr_assert(strstr(out, "static plans: "), "%s", out);
  cr_assert(strstr(out, "past_key_0"), "%s", out);
  cr_assert(strstr(out, "partition calls: "), "%s", out);
  cr_assert(strstr(out, "KNOWN"), "%s", out);
  cr_assert_eq(run("inspect " WORK_DIR "/step.mxm --json"), 0, "%s", out);
  cr_assert(strstr(out, "\"weights_file\": \"step.mxm.weights\""), "%s", out);
  cr_assert(strstr(out, "\"calls\": ["), "%s", out);
  cr_assert_eq(run("partition " WORK_DIR "/step.mxm"), 0, "%s", out);
  cr_assert(strstr(out, "partition recorded in"), "%s", out);
  cr_assert(strstr(out, "totals: "), "%s", out);
  cr_assert_eq(run("partition " WORK_DIR "/step.mxm --format json"), 0, "%s", out);
  cr_assert(strstr(out, "\"known\": "), "%s", out);
  cr_assert_eq(run("partition " WORK_DIR "/step.mxm --explain x"), 2, "%s", out);
  cr_assert_eq(run("inspect " WORK_DIR "/step.mxm --shape past_len=3"), 2, "%s", out);
  /* Running it needs the weights: they are looked for next to the .mxm, under both names. */
  cr_assert_eq(run("run " WORK_DIR "/step.mxm --random --shape past_len=2"), 1, "%s", out);
  cr_assert(strstr(out, "step.mxm.weights"), "%s", out);
  cr_assert_eq(rename(WORK_DIR "/moved.weights", WORK_DIR "/step.mxm.weights"), 0);
  cr_assert_eq(run("run " WORK_DIR "/step.mxm --random --shape past_len=2"), 0, "%s", out);
}

Test(mxm_cli, truncated_mxm_is_a_clean_error) {
  need_binary();
  compile_llama("cut", false);
  cr_assert_eq(truncate(WORK_DIR "/cut.mxm", 100), 0);
  cr_assert_eq(run("inspect " WORK_DIR "/cut.mxm"), 1, "%s", out);
  cr_assert(strstr(out, "truncated"), "%s", out);
  cr_assert_eq(run("partition " WORK_DIR "/cut.mxm"), 1, "%s", out);
  cr_assert_eq(truncate(WORK_DIR "/cut.mxm", 5), 0);
  /* Too short for the magic: taken for an ONNX file, refused as one. */
  cr_assert_eq(run("inspect " WORK_DIR "/cut.mxm"), 1, "%s", out);
}

Test(mxm_cli, progress_lines_when_asked) {
  need_binary();
  compile_llama("prog", true);
  cr_assert(strstr(out, "mixrt: ["), "%s", out);
  cr_assert(strstr(out, "compile: import ONNX"), "%s", out);
  cr_assert(strstr(out, "save: write .mxm"), "%s", out);
  cr_assert(strstr(out, "(100%)"), "%s", out);
  cr_assert_eq(run("run " WORK_DIR "/prog.mxm --random --shape past_len=2 --progress"), 0, "%s", out);
  cr_assert(strstr(out, "load: check weights"), "%s", out);
  cr_assert(strstr(out, "load: done"), "%s", out);
  cr_assert_eq(run("gen llama --progress -o " WORK_DIR "/prog_gen.onnx"), 0, "%s", out);
  cr_assert(strstr(out, "gen: write ONNX"), "%s", out);
}
