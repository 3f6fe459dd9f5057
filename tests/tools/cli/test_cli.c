/* The `mixrt` program as users meet it: help texts, exit codes (0 ok, 1 runtime, 2 usage), and
 * inspect/run/demo on the exported-transformer-style encoder written to an ONNX fixture file. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "mixrt/models.h"
#include "mixrt/onnx.h"
#include "mixrt/reference.h"
#include "support/cli_run.h"

#define WORK_DIR MIXRT_BINARY_DIR "/tests/cli-work"

/* Runs `mixrt <args>`; returns the exit code, output in buf. */
static int run(char *buf, size_t cap, const char *args) {
  int rc = mxt_cli_run(buf, cap, args);
  cr_assert_geq(rc, 0, "%s", buf);
  return rc;
}

/* Writes the encoder fixture to WORK_DIR/<name>.onnx and returns its path. */
static const char *write_fixture(const char *name) {
  static char path[512];
  mxt_make_work_dir("cli-work");
  snprintf(path, sizeof path, "%s/%s.onnx", WORK_DIR, name);
  mx_graph *g;
  mx_error err;
  cr_assert_eq(mx_model_encoder(NULL, &g, &err), MX_OK, "%s", err.message);
  cr_assert_eq(mx_onnx_save_file(g, path, &err), MX_OK, "%s", err.message);
  mx_graph_destroy(g);
  return path;
}

static char out[1 << 16];

Test(cli, help_lists_commands) {
  cr_assert_eq(run(out, sizeof out, "--help"), 0);
  const char *cmds[] = {"info", "inspect", "run", "conformance", "demo"};
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
    cr_assert(strstr(out, cmds[i]), "%s missing:\n%s", cmds[i], out);
  cr_assert_eq(run(out, sizeof out, "inspect --help"), 0);
  cr_assert(strstr(out, "usage: mixrt inspect"), "%s", out);
  cr_assert_eq(run(out, sizeof out, "run --help"), 0);
  cr_assert(strstr(out, "--output-dir"), "%s", out);
}

Test(cli, usage_errors_exit_2) {
  cr_assert_eq(run(out, sizeof out, ""), 2);
  cr_assert_eq(run(out, sizeof out, "frobnicate"), 2);
  cr_assert(strstr(out, "unknown command 'frobnicate'"), "%s", out);
  cr_assert_eq(run(out, sizeof out, "inspect"), 2);
  cr_assert_eq(run(out, sizeof out, "inspect a.onnx --bogus"), 2);
  cr_assert(strstr(out, "--bogus"), "%s", out);
  cr_assert_eq(run(out, sizeof out, "inspect a.onnx --shape seq"), 2);
  cr_assert_eq(run(out, sizeof out, "run a.onnx --steps 0"), 2);
}

Test(cli, runtime_errors_exit_1_and_name_the_file) {
  cr_assert_eq(run(out, sizeof out, "inspect /nonexistent/model.onnx"), 1);
  cr_assert(strstr(out, "/nonexistent/model.onnx"), "%s", out);
  mxt_make_work_dir("cli-work");
  FILE *f = fopen(WORK_DIR "/garbage.onnx", "wb");
  cr_assert_not_null(f);
  fputs("this is not a protobuf \xff\xff\xff\xff", f);
  fclose(f);
  cr_assert_eq(run(out, sizeof out, "inspect " WORK_DIR "/garbage.onnx"), 1);
  cr_assert(strstr(out, "garbage.onnx"), "%s", out);
}

Test(cli, info_reports_topology) {
  cr_assert_eq(run(out, sizeof out, "info"), 0);
  cr_assert(strstr(out, "topology:") && strstr(out, "core"), "%s", out);
  cr_assert(strstr(out, "memory:     transparent huge pages "), "%s", out);
  cr_assert_eq(run(out, sizeof out, "info --json"), 0);
  cr_assert(strstr(out, "\"numa_nodes\""), "%s", out);
  cr_assert(strstr(out, "\"transparent_huge_pages\": \""), "%s", out);
}

/* Issue "Done when": inspect on the exported-transformer fixture reports 0 unknown-rank values. */
Test(cli, inspect_fixture_has_no_unknown_rank) {
  const char *path = write_fixture("encoder_inspect");
  char args[1024];
  snprintf(args, sizeof args, "inspect %s", path);
  cr_assert_eq(run(out, sizeof out, args), 0, "%s", out);
  cr_assert(strstr(out, ", 0 unknown-rank"), "%s", out);
  cr_assert(strstr(out, "x                        float32   [batch, seq, 64]"), "%s", out);
  cr_assert(strstr(out, "y                        float32   [batch, seq, 64]"), "%s", out);
  snprintf(args, sizeof args, "inspect %s --json", path);
  cr_assert_eq(run(out, sizeof out, args), 0, "%s", out);
  cr_assert(strstr(out, "\"unknown_rank\": 0"), "%s", out);
  /* Binding both symbols folds the shape arithmetic away and leaves nothing symbolic. */
  snprintf(args, sizeof args, "inspect %s --shape batch=2 --shape seq=8", path);
  cr_assert_eq(run(out, sizeof out, args), 0, "%s", out);
  cr_assert(strstr(out, " 0 symbolic, 0 unknown-rank"), "%s", out);
  cr_assert_null(strstr(out, "folded 0 nodes"), "%s", out);
  snprintf(args, sizeof args, "inspect %s --shape nosuch=2", path);
  cr_assert_eq(run(out, sizeof out, args), 1, "%s", out);
  cr_assert(strstr(out, "nosuch"), "%s", out);
}

Test(cli, run_writes_outputs_equal_to_the_library) {
  const char *path = write_fixture("encoder_run");
  char args[1024];
  snprintf(args, sizeof args, "run %s --random", path);
  cr_assert_eq(run(out, sizeof out, args), 2, "%s", out);
  cr_assert(strstr(out, "--shape"), "%s", out);
  snprintf(args, sizeof args,
           "run %s --random --seed 3 --shape batch=1 --shape seq=5 --steps 2 --output-dir %s", path,
           WORK_DIR);
  cr_assert_eq(run(out, sizeof out, args), 0, "%s", out);
  cr_assert(strstr(out, "y                        float32   [1, 5, 64]"), "%s", out);
  cr_assert(strstr(out, "median"), "%s", out);
  mx_tensor y;
  mx_error err;
  cr_assert_eq(mx_tensor_load_npy(WORK_DIR "/y.npy", &y, &err), MX_OK, "%s", err.message);
  cr_assert_eq(y.rank, 3);
  cr_assert_eq(y.dims[1], 5);
  /* Feed the same output back as an input file: run accepts .npy inputs by name. */
  cr_assert_eq(mx_tensor_save_npy(WORK_DIR "/x.npy", &y, &err), MX_OK, "%s", err.message);
  snprintf(args, sizeof args, "run %s --input x=%s/x.npy", path, WORK_DIR);
  cr_assert_eq(run(out, sizeof out, args), 0, "%s", out);
  snprintf(args, sizeof args, "run %s --input nosuch=%s/x.npy", path, WORK_DIR);
  cr_assert_eq(run(out, sizeof out, args), 2, "%s", out);
  mx_tensor_release(&y);
}

Test(cli, demo_runs_and_checks_itself) {
  cr_assert_eq(run(out, sizeof out, "demo --steps 8"), 0, "%s", out);
  cr_assert(strstr(out, "equal the reference interpreter: PASS"), "%s", out);
}

Test(cli, run_hybrid_with_check_trace_and_options) {
  const char *path = write_fixture("encoder_hybrid");
  char args[1024];
  snprintf(
      args, sizeof args,
      "run %s --random --shape batch=2 --shape seq=7 --steps 3 --check --trace %s/trace.json --streams 2 "
      "--executor topo",
      path, WORK_DIR);
  cr_assert_eq(run(out, sizeof out, args), 0, "%s", out);
  cr_assert(strstr(out, "executor: hybrid ("), "%s", out);
  cr_assert(strstr(out, "topological, 2 streams"), "%s", out);
  cr_assert(strstr(out, "check: PASS"), "%s", out);
  cr_assert(strstr(out, "time split over 3 steps"), "%s", out);
  struct stat sb;
  cr_assert_eq(stat(WORK_DIR "/trace.json", &sb), 0);
  cr_assert_gt(sb.st_size, 100);
  snprintf(args, sizeof args,
           "run %s --random --shape batch=1 --shape seq=3 --static-min-ops -1 --device inline --check", path);
  cr_assert_eq(run(out, sizeof out, args), 0, "%s", out);
  cr_assert(strstr(out, "0 static and 1 dynamic partitions"), "%s", out);
  cr_assert_eq(run(out, sizeof out, "run x.onnx --executor nope"), 2, "%s", out);
  cr_assert_eq(run(out, sizeof out, "run x.mxm --check"), 2, "%s", out);
}

/* --skip-kernels: the same partitions and per-step work, no outputs computed or printed; the
 * options that need outputs are usage errors. */
Test(cli, run_skip_kernels_reports_the_work_without_outputs) {
  const char *path = write_fixture("encoder_skip");
  char args[1024];
  snprintf(args, sizeof args, "run %s --random --shape batch=2 --shape seq=7 --steps 3 --skip-kernels", path);
  cr_assert_eq(run(out, sizeof out, args), 0, "%s", out);
  cr_assert(strstr(out, "outputs: not computed (--skip-kernels"), "%s", out);
  cr_assert(!strstr(out, "float32   ["), "no output values are printed:\n%s", out);
  cr_assert(strstr(out, ", kernels skipped); steps: 3"), "%s", out);
  cr_assert(strstr(out, "per step: "), "%s", out);
  const char *bad[] = {"--check", "--reference", "--output-dir " WORK_DIR};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    snprintf(args, sizeof args, "run %s --random --shape batch=2 --shape seq=7 --skip-kernels %s", path,
             bad[i]);
    cr_assert_eq(run(out, sizeof out, args), 2, "%s: %s", bad[i], out);
    cr_assert(strstr(out, "--skip-kernels computes no output"), "%s", out);
  }
}

/* --no-huge-pages: the device's memory in 4 KiB pages only; the outputs are the same bits. */
Test(cli, run_without_huge_pages_says_so_and_computes_the_same) {
  const char *path = write_fixture("encoder_pages");
  char args[1024];
  snprintf(args, sizeof args,
           "run %s --random --shape batch=2 --shape seq=7 --steps 2 --check --no-huge-pages", path);
  cr_assert_eq(run(out, sizeof out, args), 0, "%s", out);
  cr_assert(strstr(out, ", no huge pages); steps: 2"), "%s", out);
  cr_assert(strstr(out, "huge pages: ") && strstr(out, "mixrt asked for none"), "%s", out);
  cr_assert(strstr(out, "check: PASS"), "%s", out);
  snprintf(args, sizeof args, "run %s --random --shape batch=2 --shape seq=7 --steps 2", path);
  cr_assert_eq(run(out, sizeof out, args), 0, "%s", out);
  cr_assert(!strstr(out, "no huge pages"), "huge pages are the default:\n%s", out);
}

/* The device memory line: the encoder's weights are shared blocks, and they are most of it. */
Test(cli, run_reports_device_memory_and_shared_weights) {
  const char *path = write_fixture("encoder_memory");
  char args[1024];
  snprintf(args, sizeof args, "run %s --random --shape batch=2 --shape seq=7 --steps 2", path);
  cr_assert_eq(run(out, sizeof out, args), 0, "%s", out);
  const char *line = strstr(out, "device memory: ");
  cr_assert(line, "%s", out);
  double in_use = 0, peak = 0, weights = 0;
  unsigned long long blocks = 0;
  cr_assert_eq(
      sscanf(line, "device memory: %lf MiB in use (peak %lf MiB); weights %lf MiB in %llu shared block",
             &in_use, &peak, &weights, &blocks),
      4, "%s", line);
  /* On host-memory devices static models compute on their weight blocks in place (no device
   * copy, so no shared device block); what shared blocks there are count in the memory in use. */
  cr_assert(blocks > 0 || weights == 0.0, "%s", line);
  cr_assert_leq(weights, in_use, "%s", line);
  cr_assert_gt(peak, 0.0, "%s", line);
  cr_assert_leq(in_use, peak, "%s", line);
}

Test(cli, compile_any_model_and_run_the_mxm) {
  const char *path = write_fixture("encoder_compile");
  char args[1024];
  snprintf(args, sizeof args, "compile %s -o %s/encoder.mxm", path, WORK_DIR);
  cr_assert_eq(run(out, sizeof out, args), 0, "%s", out);
  cr_assert(strstr(out, "wrote "), "%s", out);
  snprintf(args, sizeof args, "run %s/encoder.mxm --random --shape batch=2 --shape seq=4 --seed 9", WORK_DIR);
  cr_assert_eq(run(out, sizeof out, args), 0, "%s", out);
  char from_mxm[256];
  const char *o = strstr(out, "outputs:\n");
  cr_assert_not_null(o);
  snprintf(from_mxm, sizeof from_mxm, "%.*s", (int)strcspn(o + 9, "\n"), o + 9);
  snprintf(args, sizeof args, "run %s --random --shape batch=2 --shape seq=4 --seed 9 --reference", path);
  cr_assert_eq(run(out, sizeof out, args), 0, "%s", out);
  o = strstr(out, "outputs:\n");
  cr_assert_not_null(o);
  cr_assert_eq(strncmp(o + 9, from_mxm, strlen(from_mxm)), 0, "%s vs %s", from_mxm, o + 9);
}

/* --by-op counts each test under every operator it uses (test_abs uses Abs; the Loop tests count
 * under Loop and the ops of their bodies), and the last line stays the totals. Random operators
 * compare on element type and shape only (test_bernoulli's values are another generator's). */
Test(cli, conformance_by_op_and_random_ops) {
  char args[1024];
  snprintf(args, sizeof args, "conformance %s --filter test_abs --by-op --quiet",
           MIXRT_ONNX_NODE_DIR_DEFAULT);
  cr_assert_eq(run(out, sizeof out, args), 0, "%s", out);
  cr_assert(strstr(out, "operator "), "%s", out);
  cr_assert(strstr(out, "\nAbs "), "%s", out);
  const char *tail = "passed, 0 failed, 0 skipped\n";
  size_t n = strlen(out), t = strlen(tail);
  cr_assert(n > t && strcmp(out + n - t, tail) == 0, "the totals are not the last line: %s", out);
  snprintf(args, sizeof args, "conformance %s --filter test_bernoulli --quiet", MIXRT_ONNX_NODE_DIR_DEFAULT);
  cr_assert_eq(run(out, sizeof out, args), 0, "%s", out);
  cr_assert(strstr(out, "4 passed, 0 failed"), "%s", out);
}
