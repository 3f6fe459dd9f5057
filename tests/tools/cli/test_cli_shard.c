/* `mixrt shard` as users meet it: rank files and manifest for the llama, a refused model naming
 * the node (exit 1, no manifest), usage errors (exit 2), the partition dump's collective notes,
 * and a tp 1 shard running through `mixrt run`. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mixrt/models.h"
#include "mixrt/onnx.h"
#include "support/cli_run.h"

#define SHARD_DIR MIXRT_BINARY_DIR "/tests/cli-shard"

static char out[1 << 16];

static int run(const char *fmt, const char *a, const char *b) {
  char args[1024];
  snprintf(args, sizeof args, fmt, a, b);
  int rc = mxt_cli_run(out, sizeof out, args);
  cr_assert_geq(rc, 0, "%s", out);
  return rc;
}

/* The tiny llama as WORK/<name>.onnx: one file per test, since tests run in parallel. */
static const char *llama_file(const char *name) {
  static char path[512];
  mxt_make_work_dir("cli-shard");
  snprintf(path, sizeof path, "%s/%s.onnx", SHARD_DIR, name);
  mx_graph *g;
  mx_error err;
  cr_assert_eq(mx_model_llama(NULL, &g, &err), MX_OK, "%s", err.message);
  cr_assert_eq(mx_onnx_save_file(g, path, &err), MX_OK, "%s", err.message);
  mx_graph_destroy(g);
  return path;
}

static bool exists(const char *dir, const char *file) {
  char p[600];
  snprintf(p, sizeof p, "%s/%s", dir, file);
  return access(p, R_OK) == 0;
}

Test(cli_shard, writes_ranks_and_manifest) {
  if (!mxt_cli_available()) cr_skip_test("mixrt not built");
  const char *model = llama_file("llama_tp2");
  const char *dir = SHARD_DIR "/tp2";
  cr_assert_eq(run("shard %s --tp 2 -o %s", model, dir), 0, "%s", out);
  cr_expect(strstr(out, "AllGather") && strstr(out, "AllReduce"), "%s", out);
  cr_expect(exists(dir, "rank0.onnx") && exists(dir, "rank1.onnx") && exists(dir, "manifest.json"));
  char path[600];
  snprintf(path, sizeof path, "%s/manifest.json", dir);
  FILE *f = fopen(path, "r");
  cr_assert(f);
  size_t n = fread(out, 1, sizeof out - 1, f);
  out[n] = 0;
  fclose(f);
  cr_expect(strstr(out, "\"tp\": 2") && strstr(out, "\"why\""), "%s", out);
  cr_assert_eq(run("partition %s/rank1.onnx%s", dir, ""), 0, "%s", out);
  cr_expect(strstr(out, "collectives (tensor-parallel shard)") && strstr(out, "row-split MatMul"), "%s", out);
}

Test(cli_shard, refusal_names_the_node) {
  if (!mxt_cli_available()) cr_skip_test("mixrt not built");
  const char *model = llama_file("llama_tp3");
  const char *dir = SHARD_DIR "/tp3";
  cr_assert_eq(run("shard %s --tp 3 -o %s", model, dir), 1, "%s", out);
  cr_expect(strstr(out, "l0/attention") && strstr(out, "tp 3"), "%s", out);
  cr_expect(!exists(dir, "manifest.json"), "a refused model leaves no manifest");
}

Test(cli_shard, usage_errors) {
  if (!mxt_cli_available()) cr_skip_test("mixrt not built");
  cr_assert_eq(run("shard %s%s", "m.onnx", " --tp 2"), 2, "%s", out);
  cr_assert_eq(run("shard %s --tp 0 -o %s", "m.onnx", SHARD_DIR), 2, "%s", out);
  cr_assert_eq(run("shard %s --tp 2 -o %s --bogus", "m.onnx", SHARD_DIR), 2, "%s", out);
  cr_assert_eq(run("shard --help%s%s", "", ""), 0, "%s", out);
  cr_expect(strstr(out, "usage: mixrt shard"), "%s", out);
}

/* With one rank the collectives are identities a session runs without a communicator. */
Test(cli_shard, tp1_runs) {
  if (!mxt_cli_available()) cr_skip_test("mixrt not built");
  const char *model = llama_file("llama_tp1");
  const char *dir = SHARD_DIR "/tp1";
  cr_assert_eq(run("shard %s --tp 1 -o %s --quiet", model, dir), 0, "%s", out);
  cr_assert_eq(run("run %s/rank0.onnx --random --shape past_len=3%s", dir, ""), 0, "%s", out);
  cr_expect(strstr(out, "logits"), "%s", out);
}
