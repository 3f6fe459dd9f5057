/* `mixrt bench models` on a one-model zoo of its own (the ONNX node test test_relu, on random
 * inputs: the manifest case names none), one round of one step: the JSON parses and holds the
 * fields the results table is made from; a runner not asked for is null with the reason; a mock
 * PyTorch peer (a shell script speaking the runner protocol, given as --python) gives the
 * figures and ratios; the markdown table; --layers on a Conv whose weights are a graph input
 * (a row with the reason it is not timed); a missing zoo says how to export it; bad options are
 * usage errors; --cases picks a case by name. Nothing here looks at timings. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "support/cli_run.h"
#include "support/json_check.h"

static char out[1 << 17];
static char zoo[1024], mock[1100];

/* <build>/tests/bench_models/: manifest.json naming test_relu, and mock_peer.sh. */
static void make_zoo(void) {
  mxt_make_work_dir("bench_models");
  snprintf(zoo, sizeof zoo, "%s/tests/bench_models", MIXRT_BINARY_DIR);
  char path[1200];
  snprintf(path, sizeof path, "%s/manifest.json", zoo);
  FILE *f = fopen(path, "w");
  cr_assert(f, "cannot write %s", path);
  fprintf(f,
          "{\"opset\": 17, \"models\": [{\"name\": \"relu\", \"model\": \"%s/test_relu/model.onnx\", "
          "\"cases\": [{\"name\": \"random\", \"symbols\": {}}, {\"name\": \"again\", \"symbols\": {}}]},\n"
          " {\"name\": \"conv\", \"model\": \"%s/test_basic_conv_with_padding/model.onnx\", "
          "\"cases\": [{\"name\": \"random\", \"symbols\": {}}]}]}\n",
          MIXRT_ONNX_NODE_DIR_DEFAULT, MIXRT_ONNX_NODE_DIR_DEFAULT);
  fclose(f);
  /* Answers every request with ok, and `run NAME N` with N times of 1 ms. */
  snprintf(mock, sizeof mock, "%s/mock_peer.sh", zoo);
  f = fopen(mock, "w");
  cr_assert(f, "cannot write %s", mock);
  fprintf(f,
          "#!/bin/sh\n"
          "echo 'ready mock 0'\n"
          "while read cmd name arg rest; do\n"
          "  case \"$cmd\" in\n"
          "    quit) exit 0 ;;\n"
          "    run) line=ok; i=0; while [ $i -lt $arg ]; do line=\"$line 1000000\"; i=$((i+1)); done;"
          " echo \"$line\" ;;\n"
          "    *) echo ok ;;\n"
          "  esac\n"
          "done\n");
  fclose(f);
  chmod(mock, 0755);
}

static int run(const char *fmt, const char *a, const char *b) {
  char args[4096];
  snprintf(args, sizeof args, fmt, a, b);
  int rc = mxt_cli_run_stdout(out, sizeof out, args);
  cr_assert_geq(rc, 0, "%s", out);
  return rc;
}

static void expect_keys(const char *const *keys, size_t n) {
  for (size_t k = 0; k < n; k++) {
    char quoted[128];
    snprintf(quoted, sizeof quoted, "\"%s\":", keys[k]);
    cr_assert(strstr(out, quoted), "key %s missing:\n%s", keys[k], out);
  }
}

#define QUICK "bench models --zoo %s --models relu --rounds 1 --steps 1 --warmup 0 --threads 1,2"

Test(bench_models, mixrt_runners_print_the_expected_json) {
  make_zoo();
  cr_assert_eq(run(QUICK " --runners hybrid,dynamic", zoo, ""), 0, "%s", out);
  char why[256];
  cr_assert(mxt_json_valid(out, why, sizeof why), "not JSON (%s):\n%s", why, out);
  const char *keys[] = {"benchmark",
                        "command",
                        "zoo",
                        "settings",
                        "threads",
                        "rounds",
                        "steps",
                        "warmup",
                        "runners",
                        "hybrid",
                        "dynamic",
                        "ort",
                        "torch",
                        "available",
                        "version",
                        "reason",
                        "models",
                        "name",
                        "case",
                        "model",
                        "error",
                        "results",
                        "latency_ms",
                        "median",
                        "p10",
                        "p90",
                        "samples",
                        "errors",
                        "ratio_hybrid_ort",
                        "ratio_hybrid_torch",
                        "ratio_dynamic_ort",
                        "ratio_hybrid_dynamic",
                        "speedup_last_over_first_threads"};
  expect_keys(keys, sizeof keys / sizeof *keys);
  cr_assert(strstr(out, "\"benchmark\": \"models\""), "%s", out);
  cr_assert(strstr(out, "\"name\": \"relu\""), "%s", out);
  cr_assert(strstr(out, "\"ort\": {\"available\": false"), "%s", out);
  cr_assert(strstr(out, "not asked for (--runners)"), "%s", out);
  /* Both thread counts measured the hybrid and the all-dynamic runner. */
  cr_assert_eq(mxt_count(out, "\"hybrid\": {\"median\":"), 2, "%s", out);
  cr_assert_eq(mxt_count(out, "\"dynamic\": {\"median\":"), 2, "%s", out);
  /* ONNX Runtime and PyTorch have null latencies at both thread counts. */
  cr_assert_eq(mxt_count(out, "\"ort\": null, \"torch\": null},\n"), 2, "%s", out);
}

Test(bench_models, a_mock_peer_gives_figures_and_ratios) {
  make_zoo();
  cr_assert_eq(run(QUICK " --runners hybrid,torch --python %s", zoo, mock), 0, "%s", out);
  cr_assert(mxt_json_valid(out, NULL, 0), "not JSON:\n%s", out);
  cr_assert(strstr(out, "\"torch\": {\"available\": true, \"version\": \"mock 0\""), "%s", out);
  cr_assert_eq(mxt_count(out, "\"torch\": {\"median\": 1.0000"), 2, "%s", out);
  cr_assert_eq(mxt_count(out, "\"ratio_hybrid_torch\": null"), 0, "%s", out);
  cr_assert_eq(mxt_count(out, "\"ratio_hybrid_ort\": null"), 2, "%s", out);
}

Test(bench_models, table_and_json_file) {
  make_zoo();
  char json[1200];
  snprintf(json, sizeof json, "%s/out.json", zoo);
  remove(json);
  cr_assert_eq(run(QUICK " --runners hybrid --table --json %s", zoo, json), 0, "%s", out);
  cr_assert(strstr(out, "| model | case | threads |"), "%s", out);
  cr_assert(strstr(out, "| relu | random | 1 |"), "%s", out);
  cr_assert(strstr(out, "| relu | random | 2 |"), "%s", out);
  char *text = mxt_read_text(json);
  cr_assert(text, "no %s", json);
  cr_assert(mxt_json_valid(text, NULL, 0), "not JSON:\n%s", text);
  free(text);
}

Test(bench_models, cases_pick_a_named_case) {
  make_zoo();
  cr_assert_eq(run(QUICK " --runners hybrid --table --cases again", zoo, ""), 0, "%s", out);
  cr_assert(strstr(out, "| relu | again | 1 |"), "%s", out);
  char args[2048];
  snprintf(args, sizeof args, QUICK " --runners hybrid --cases nope", zoo);
  cr_assert_eq(mxt_cli_run(out, sizeof out, args), 2, "%s", out);
  cr_assert(strstr(out, "no model run has a case called 'nope'"), "%s", out);
}

Test(bench_models, layers_table) {
  make_zoo();
  cr_assert_eq(
      run("bench models --zoo %s --models conv --layers --threads 1 --rounds 1 --steps 1%s", zoo, ""), 0,
      "%s", out);
  cr_assert(strstr(out, "## conv (random)"), "%s", out);
  cr_assert(strstr(out, "sgemm 1024^3 peak"), "%s", out);
  cr_assert(strstr(out, "| # | Conv | out CxHxW | kernel | group | GFLOP | ms | GFLOP/s | of peak |"), "%s",
            out);
  cr_assert(strstr(out, "| 1 |") && strstr(out, "weights are not a float32 constant"), "%s", out);
}

Test(bench_models, missing_zoo_and_bad_options) {
  make_zoo();
  cr_assert_eq(mxt_cli_run(out, sizeof out, "bench models --zoo /nonexistent/zoo"), 1, "%s", out);
  cr_assert(strstr(out, "bench/zoo/export.py"), "%s", out);
  cr_assert_eq(run(QUICK " --models nope", zoo, ""), 2, "%s", out);
  cr_assert_eq(run(QUICK " --runners hybrid,tflite", zoo, ""), 2, "%s", out);
  cr_assert_eq(mxt_cli_run(out, sizeof out, "bench models --threads 0"), 2, "%s", out);
  cr_assert_eq(mxt_cli_run(out, sizeof out, "bench models --rounds x"), 2, "%s", out);
  cr_assert_eq(mxt_cli_run(out, sizeof out, "bench models --help"), 0, "%s", out);
  cr_assert(strstr(out, "usage: mixrt bench models"), "%s", out);
}
