/* `mixrt bench llm` on quick settings: it runs, prints one JSON document that parses, with the
 * keys the results table is made from; without ONNX Runtime (--no-ort) the peer's figures are
 * null and the reason is given; hybrid and all-dynamic equal the reference interpreter bit for
 * bit; bad options are usage errors. When bench/peers has onnxruntime-node installed and node is
 * on PATH, one run with the peer checks its figures are present and its logits agree. Nothing
 * here looks at timings. */
#include <criterion/criterion.h>
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support/cli_run.h"
#include "support/json_check.h"

#define QUICK \
  "bench llm --configs tiny --past 16 --rounds 2 --min-time 0 --steps 3 --warmup 1 --identity-runs 10"

static char out[1 << 18];

/* Runs `mixrt <args>`, stdout only (stderr is left alone); returns the exit code. */
static int run(const char *args) {
  int rc = mxt_cli_run_stdout(out, sizeof out, args);
  cr_assert_geq(rc, 0, "%s", out);
  return rc;
}

static bool json_ok(const char *text) { return mxt_json_valid(text, NULL, 0); }

static void expect_keys(const char *const *keys, size_t n) {
  for (size_t k = 0; k < n; k++) {
    char quoted[128];
    snprintf(quoted, sizeof quoted, "\"%s\":", keys[k]);
    cr_assert(strstr(out, quoted), "key %s missing:\n%s", keys[k], out);
  }
}

Test(validator, accepts_and_rejects) {
  cr_assert(json_ok("{\"a\": [1, -2.5e3, true, null, \"x\\n\"], \"b\": {}}"));
  cr_assert(!json_ok("{\"a\": 1,}"));
  cr_assert(!json_ok("{\"a\": nan}"));
  cr_assert(!json_ok("{\"a\": 01}"));
  cr_assert(!json_ok("[1] 2"));
}

Test(bench_llm, no_ort_prints_the_expected_json) {
  cr_assert_eq(run(QUICK " --no-ort"), 0, "%s", out);
  cr_assert(json_ok(out), "not JSON:\n%s", out);
  const char *keys[] = {"benchmark",
                        "command",
                        "machine",
                        "mixrt",
                        "device",
                        "io",
                        "method",
                        "mode",
                        "ort",
                        "available",
                        "reason",
                        "identity_call_us",
                        "results",
                        "config",
                        "points",
                        "past",
                        "step_us",
                        "hybrid",
                        "dynamic",
                        "reference",
                        "median",
                        "p10",
                        "p90",
                        "samples",
                        "ratio_hybrid_ort",
                        "ratio_hybrid_dynamic",
                        "hybrid_equals_reference",
                        "dynamic_equals_reference",
                        "diff_to_ort",
                        "hybrid_per_step",
                        "dynamic_per_step",
                        "targets",
                        "met"};
  expect_keys(keys, sizeof keys / sizeof keys[0]);
  cr_assert(strstr(out, "\"benchmark\": \"llm\""), "%s", out);
  cr_assert(strstr(out, "\"available\": false, \"reason\": \"--no-ort was given\""), "%s", out);
  cr_assert(strstr(out, "\"ort\": null"), "the ONNX Runtime column is null:\n%s", out);
  cr_assert(strstr(out, "\"ratio_hybrid_ort\": null"), "%s", out);
  cr_assert(strstr(out, "\"diff_to_ort\": null"), "%s", out);
  cr_assert(strstr(out, "\"hybrid_equals_reference\": true"), "%s", out);
  cr_assert(strstr(out, "\"dynamic_equals_reference\": true"), "%s", out);
  cr_assert(strstr(out, "\"config\": \"tiny\""), "%s", out);
  cr_assert(!strstr(out, "\"config\": \"small\""), "only the configurations asked for:\n%s", out);
  cr_assert(strstr(out, "\"samples\": 6"), "2 rounds of 3 steps:\n%s", out);
  /* Per-step counters count the untimed block steps too, and divide by them. The KV cache is
   * session state appended in place, so each layer's Attention reads its padded buffer as one
   * dynamic launch (a static model would read the rows as packed); everything else of the tiny
   * llama's two layers runs in its three static models. */
  cr_assert(strstr(out, "\"hybrid_per_step\": {\"static_executes\": 3.00, \"dynamic_launches\": 2.00"), "%s",
            out);
  /* The all-dynamic session runs no static model, and launches every op the hybrid's static
   * models hold as tasks. */
  cr_assert(strstr(out, "\"dynamic_per_step\": {\"static_executes\": 0.00, \"dynamic_launches\": "), "%s",
            out);
  cr_assert(!strstr(out, "\"dynamic_per_step\": {\"static_executes\": 0.00, \"dynamic_launches\": 2.00"),
            "%s", out);
  const char *pairs[] = {"rounds_compared", "hybrid_faster", "rounds",
                         "median_ratio",    "sign_test_p",   "block_warmup"};
  expect_keys(pairs, sizeof pairs / sizeof pairs[0]);
  cr_assert(strstr(out, "\"dynamic\": {\"hybrid_faster\": "), "%s", out);
  cr_assert(strstr(out, "\"rounds\": 2, \"median_ratio\": "), "%s", out);
  cr_assert(strstr(out, "\"ort\": null}"), "no ONNX Runtime blocks to compare with:\n%s", out);
}

/* --min-time: rounds past --rounds until the point has taken that long, ending on a whole cycle of
 * orders (6 rounds for three systems); decode mode ignores it. */
Test(bench_llm, min_time_adds_whole_cycles_of_rounds) {
  cr_assert_eq(run("bench llm --configs tiny --past 16 --rounds 1 --min-time 0.05 --steps 2 --warmup 0 "
                   "--identity-runs 5 --no-ort"),
               0, "%s", out);
  cr_assert(json_ok(out), "not JSON:\n%s", out);
  cr_assert(strstr(out, "\"min_time_s\": 0.05"), "%s", out);
  const char *at = strstr(out, "\"past_range\": [16, 16], \"rounds\": ");
  cr_assert(at, "%s", out);
  long rounds = strtol(at + strlen("\"past_range\": [16, 16], \"rounds\": "), NULL, 10);
  cr_assert(rounds >= 6 && rounds % 6 == 0, "rounds %ld: whole cycles of 6 orders\n%s", rounds, out);
  char want[64];
  snprintf(want, sizeof want, "\"samples\": %ld}", rounds * 2);
  cr_assert(strstr(out, want), "2 steps a round:\n%s", out);
  cr_assert_eq(run("bench llm --configs tiny --past 16 --rounds 1 --min-time 5 --steps 2 --warmup 0 "
                   "--identity-runs 5 --no-ort --mode decode --systems hybrid"),
               0, "%s", out);
  cr_assert(strstr(out, "\"rounds\": 1, \"step_us\""), "decode mode runs exactly --rounds:\n%s", out);
  cr_assert(strstr(out, "\"min_time_s\": 0,"), "%s", out);
}

Test(bench_llm, block_warmup_option) {
  cr_assert_eq(run(QUICK " --no-ort --mode decode --block-warmup 0 --systems hybrid"), 0, "%s", out);
  cr_assert(strstr(out, "\"block_warmup\": 0"), "%s", out);
  cr_assert(strstr(out, "\"past_range\": [16, 21]"), "2 rounds of 3 timed steps only:\n%s", out);
  cr_assert_eq(run(QUICK " --no-ort --block-warmup -1"), 2, "%s", out);
}

/* Writes an empty file at path (its folder must exist). */
static void touch(const char *path) {
  FILE *f = fopen(path, "w");
  cr_assert(f, "cannot create %s", path);
  fclose(f);
}

/* A peers folder of its own, so each reason is reached whatever bench/peers holds on this
 * machine: a runner script, and (when installed is true) what looks like an installed package. */
static const char *fake_peers(const char *name, bool installed) {
  static char dir[1024];
  char path[1200];
  mxt_make_work_dir(name);
  snprintf(dir, sizeof dir, "%s/tests/%s", MIXRT_BINARY_DIR, name);
  snprintf(path, sizeof path, "%s/ort_runner.js", dir);
  touch(path);
  if (installed) {
    const char *parts[] = {"/node_modules", "/node_modules/onnxruntime-node"};
    for (size_t k = 0; k < 2; k++) {
      snprintf(path, sizeof path, "%s%s", dir, parts[k]);
      mkdir(path, 0755);
    }
    snprintf(path, sizeof path, "%s/node_modules/onnxruntime-node/package.json", dir);
    touch(path);
  }
  return dir;
}

Test(bench_llm, without_node_the_peer_is_null_with_the_reason) {
  char args[2048];
  snprintf(args, sizeof args, QUICK " --peers %s --node /nonexistent/node 2>/dev/null",
           fake_peers("bench_llm_peers_installed", true));
  cr_assert_eq(run(args), 0, "%s", out);
  cr_assert(json_ok(out), "not JSON:\n%s", out);
  cr_assert(strstr(out, "\"available\": false, \"reason\": \"/nonexistent/node did not start"), "%s", out);
  cr_assert(strstr(out, "\"ort\": null"), "%s", out);
  cr_assert(strstr(out, "\"hybrid_equals_reference\": true"), "the run goes on without the peer:\n%s", out);
}

Test(bench_llm, without_the_package_or_the_runner_the_reason_says_which) {
  char args[2048];
  snprintf(args, sizeof args, QUICK " --peers %s", fake_peers("bench_llm_peers_empty", false));
  cr_assert_eq(run(args), 0, "%s", out);
  cr_assert(json_ok(out), "not JSON:\n%s", out);
  cr_assert(strstr(out, "onnxruntime-node is not installed in"), "%s", out);
  cr_assert(strstr(out, "(run make bench-deps)"), "%s", out);
  cr_assert_eq(run(QUICK " --peers /nonexistent/peers"), 0, "%s", out);
  cr_assert(strstr(out, "ort_runner.js not found"), "%s", out);
  cr_assert(strstr(out, "\"ort\": null"), "%s", out);
}

Test(bench_llm, decode_mode_host_io_and_systems) {
  cr_assert_eq(run(QUICK " --no-ort --mode decode --io host --systems hybrid,reference"), 0, "%s", out);
  cr_assert(json_ok(out), "not JSON:\n%s", out);
  cr_assert(strstr(out, "\"mode\": \"decode\""), "%s", out);
  cr_assert(strstr(out, "\"io\": \"host\""), "%s", out);
  cr_assert(strstr(out, "\"past_range\": [16, 31]"),
            "2 rounds of 5 untimed and 3 timed steps from past 16 (the warm-up restarts):\n%s", out);
  cr_assert(strstr(out, "\"dynamic\": null"), "%s", out);
  cr_assert(strstr(out, "\"hybrid_equals_reference\": true"), "%s", out);
}

Test(bench_llm, cpu_device_two_past_lengths) {
  cr_assert_eq(run("bench llm --configs tiny --past 0,3 --rounds 1 --min-time 0 --steps 2 --warmup 0 "
                   "--identity-runs 5 --no-ort "
                   "--device cpu --streams 2"),
               0, "%s", out);
  cr_assert(json_ok(out), "not JSON:\n%s", out);
  cr_assert(strstr(out, "\"device\": \"cpu\", \"streams\": 2"), "%s", out);
  cr_assert(strstr(out, "\"past\": 0,"), "%s", out);
  cr_assert(strstr(out, "\"past\": 3,"), "%s", out);
}

static int count(const char *text, const char *what) {
  int n = 0;
  for (const char *p = strstr(text, what); p; p = strstr(p + 1, what)) n++;
  return n;
}

/* --processes: the measurement runs in fresh processes, whose documents are kept whole, and the
 * figures are summed up across them. */
/* Creates an empty file from a mkstemp template (rewritten in place with the file's name). */
static void make_temp_file(char *path_template) {
  int fd = mkstemp(path_template);
  cr_assert_geq(fd, 0, "cannot create a file from %s", path_template);
  close(fd);
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

Test(bench_llm, processes_sum_up_fresh_runs) {
  char table[] = "/tmp/mixrt-test-processes-XXXXXX";
  make_temp_file(table);
  char args[512];
  snprintf(args, sizeof args, QUICK " --past 16,32 --no-ort --processes 3 --table %s", table);
  cr_assert_eq(run(args), 0, "%s", out);
  cr_assert(json_ok(out), "not JSON:\n%s", out);
  /* --table: one table, each figure the median of the processes' figures (the hybrid's median
   * step at past 16 checked against the three processes' medians in the JSON). */
  const char *list = strstr(out, "\"step_us_median_per_process\": {\"hybrid\": [");
  cr_assert(list, "%s", out);
  double v[3];
  cr_assert_eq(sscanf(strchr(list, '[') + 1, "%lf, %lf, %lf", &v[0], &v[1], &v[2]), 3, "%s", list);
  qsort(v, 3, sizeof v[0], cmp_d);
  FILE *f = fopen(table, "r");
  cr_assert(f);
  char line[1024];
  bool said = false;
  double past = 0, hybrid = 0;
  int rows = 0;
  while (fgets(line, sizeof line, f)) {
    said |= strstr(line, "# each figure: its median over 3 processes") != NULL;
    if (line[0] != '#' && line[0] != '\n' && rows++ == 0)
      cr_assert_eq(sscanf(line, "%lf %lf", &past, &hybrid), 2, "%s", line);
  }
  fclose(f);
  unlink(table);
  cr_assert(said, "the table says its figures are medians over the processes");
  cr_assert_eq(rows, 2, "one row per past length");
  cr_assert_eq(past, 16.0);
  cr_assert(hybrid > 0.999 * v[1] - 0.001 && hybrid < 1.001 * v[1] + 0.001, "table %.3f, processes %g %g %g",
            hybrid, v[0], v[1], v[2]);
  cr_assert_eq(count(out, "--table"), 1, "only the summary was called with --table:\n%s", out);
  cr_assert(strstr(out, "\"processes\": 3"), "%s", out);
  cr_assert_eq(count(out, "\"benchmark\": \"llm\""), 4, "the summary and 3 runs:\n%s", out);
  cr_assert_eq(count(out, "--results /tmp/mixrt-bench-processes-"), 3, "each run says how it was called:\n%s",
               out);
  cr_assert_eq(count(out, "\"per_process\": ["), 2, "one ratio list per point (no ort):\n%s", out);
  cr_assert(strstr(out, "\"rounds_compared_pooled\": {\"dynamic\": {\"hybrid_faster\": "), "%s", out);
  cr_assert(strstr(out, "\"rounds\": 6, \"sign_test_p\""), "2 rounds in each of 3 processes:\n%s", out);
  cr_assert(strstr(out, "\"hybrid_and_dynamic_equal_reference_in_every_process\": true"), "%s", out);
  cr_assert(strstr(out, "\"target\": \"tiny: hybrid / dynamic < 1 (median over processes)\""), "%s", out);
  cr_assert(strstr(out, "\"worst_single_process\": "), "%s", out);
  cr_assert(strstr(out, "\"why_null\": \"--no-ort was given\""), "%s", out);
  cr_assert(strstr(out, "\"beyond_control\": null"), "no control was run:\n%s", out);
  cr_assert(strstr(out, "\"dynamic_against_control\": null"), "%s", out);
  /* A process that fails fails the whole, naming it. */
  cr_assert_eq(run(QUICK " --no-ort --processes 2 --work-dir /proc/no/such/dir 2>&1"), 1, "%s", out);
  cr_assert(strstr(out, "process 1 failed (exit status 1)"), "%s", out);
  cr_assert_eq(run(QUICK " --processes 0 2>/dev/null"), 2);
  cr_assert_eq(run(QUICK " --processes 101 2>/dev/null"), 2);
  cr_assert_eq(run(QUICK " --processes 2 --results /tmp/x.bin 2>/dev/null"), 2);
}

/* control: a second hybrid session in the same rounds, off unless asked for; its ratio is the
 * machine's own spread. The data file keeps the plot's columns first and adds control's last. */
Test(bench_llm, control_session_is_compared_like_the_others) {
  cr_assert_eq(run(QUICK " --no-ort"), 0, "%s", out);
  cr_assert(strstr(out, "\"ratio_hybrid_control\": null"), "off by default:\n%s", out);
  char table[] = "/tmp/mixrt-test-control-XXXXXX";
  make_temp_file(table);
  char args[512];
  snprintf(args, sizeof args, QUICK " --no-ort --systems hybrid,dynamic,control --table %s", table);
  cr_assert_eq(run(args), 0, "%s", out);
  cr_assert(json_ok(out), "not JSON:\n%s", out);
  cr_assert(!strstr(out, "\"ratio_hybrid_control\": null"), "%s", out);
  cr_assert(strstr(out, "\"control\": {\"hybrid_faster\": "), "%s", out);
  cr_assert(strstr(out, "\"control\": {\"median\": "), "%s", out);
  FILE *f = fopen(table, "r");
  cr_assert(f);
  char line[1024], header[1024] = "";
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "# past", 6) == 0) snprintf(header, sizeof header, "%s", line);
  fclose(f);
  unlink(table);
  cr_assert(strstr(header, "reference_p90 ort_median ort_p10 ort_p90 control_median control_p10 control_p90"),
            "%s", header);
  cr_assert_eq(run(QUICK " --no-ort --systems hybrid,control --processes 2"), 0, "%s", out);
  cr_assert_eq(count(out, "\"ratio_hybrid_control\": {\"median\": "), 1, "%s", out);
  /* With a control, the processes' ratios to it are tested against their ratios to dynamic;
   * 2 processes are too few for the test, which says so with null. */
  cr_assert(
      strstr(out, "\"beyond_control\": [\n    {\"config\": \"tiny\", \"points_shown\": 0, \"points\": 1"),
      "%s", out);
  cr_assert_eq(run(QUICK " --skip-kernels --systems hybrid,dynamic,control"), 0, "%s", out);
}

/* --no-huge-pages reaches mixrt's device, and the JSON records which memory was used. */
Test(bench_llm, huge_pages_are_on_record) {
  cr_assert_eq(run(QUICK " --no-ort"), 0, "%s", out);
  cr_assert(strstr(out, "\"huge_pages\": true"), "%s", out);
  /* What the system did with the advice is on record too (its values depend on the host). */
  cr_assert(strstr(out, "\"transparent_huge_pages\": \""), "%s", out);
  cr_assert(strstr(out, "\"anon_huge_pages_kib\": "), "%s", out);
  cr_assert_eq(run(QUICK " --no-ort --no-huge-pages"), 0, "%s", out);
  cr_assert(json_ok(out), "not JSON:\n%s", out);
  cr_assert(strstr(out, "\"huge_pages\": false"), "%s", out);
  cr_assert(strstr(out, "\"hybrid_equals_reference\": true"), "%s", out);
}

/* --skip-kernels: only the two mixrt sessions run (the reference and ONNX Runtime are dropped when
 * --systems is not given), nothing is compared, and the JSON says what the times mean. */
Test(bench_llm, skip_kernels_measures_mixrt_alone) {
  cr_assert_eq(run(QUICK " --skip-kernels"), 0, "%s", out);
  cr_assert(json_ok(out), "not JSON:\n%s", out);
  cr_assert(strstr(out, "\"kernels\": \"skipped: the device runs no kernel"), "%s", out);
  cr_assert(strstr(out, "\"reason\": \"--skip-kernels: mixrt's own cost only\""), "%s", out);
  cr_assert(strstr(out, "\"reference\": null"), "%s", out);
  cr_assert(strstr(out, "\"hybrid_equals_reference\": null"),
            "outputs are not computed, so not compared:\n%s", out);
  cr_assert(strstr(out, "\"ratio_hybrid_dynamic\": "), "%s", out);
  cr_assert(!strstr(out, "\"ratio_hybrid_dynamic\": null"), "%s", out);
  cr_assert(strstr(out, "tiny: hybrid / dynamic < 1 (kernels skipped: mixrt's own cost)"), "%s", out);
  /* The sessions do the same work per step as with kernels. */
  cr_assert(strstr(out, "\"hybrid_per_step\": {\"static_executes\": 3.00, \"dynamic_launches\": 2.00"), "%s",
            out);
  /* With the copying states the Attention partitions read packed caches, so they run as static
   * models specialized for the fixed past length: no dynamic launch is left. */
  cr_assert_eq(run(QUICK " --skip-kernels --state-copy"), 0, "%s", out);
  cr_assert(strstr(out, "\"hybrid_per_step\": {\"static_executes\": 6.00, \"dynamic_launches\": 0.00"), "%s",
            out);
  cr_assert_eq(run(QUICK " --skip-kernels --systems hybrid,reference 2>/dev/null"), 2);
  cr_assert_eq(run(QUICK " --skip-kernels --mode decode 2>/dev/null"), 2);
}

Test(bench_llm, usage_errors_exit_2) {
  cr_assert_eq(run("bench llm --configs huge 2>/dev/null"), 2);
  cr_assert_eq(run("bench llm --past x 2>/dev/null"), 2);
  cr_assert_eq(run("bench llm --past 1,2,3,4,5,6,7,8,9 2>/dev/null"), 2);
  cr_assert_eq(run("bench llm --past 20000 2>/dev/null"), 2); /* past the largest rotary table */
  cr_assert_eq(run("bench llm --systems hybrid,gpu 2>/dev/null"), 2);
  cr_assert_eq(run("bench llm --mode sometimes 2>/dev/null"), 2);
  cr_assert_eq(run("bench llm --rounds 0 2>/dev/null"), 2);
  cr_assert_eq(run("bench llm --min-time -1 2>/dev/null"), 2);
  cr_assert_eq(run("bench llm --min-time 1x 2>/dev/null"), 2);
  cr_assert_eq(run("bench llm --bogus 2>/dev/null"), 2);
  cr_assert_eq(run("bench 2>/dev/null"), 2);
  cr_assert_eq(run("bench llm --help"), 0);
  cr_assert(strstr(out, "usage: mixrt bench llm"), "%s", out);
  cr_assert(strstr(out, "--no-ort"), "%s", out);
}

/* True when the ONNX Runtime peer can run here (the package installed, node on PATH). */
static bool peer_installed(void) {
  const char *src = __FILE__; /* <source>/tests/tools/bench/test_bench_llm.c */
  char dir[1024];
  snprintf(dir, sizeof dir, "%s", src);
  for (int k = 0; k < 4; k++) {
    char *slash = strrchr(dir, '/');
    if (!slash) return false;
    *slash = '\0';
  }
  const char *env = getenv("MIXRT_PEERS_DIR");
  char pkg[1200];
  if (env && *env)
    snprintf(pkg, sizeof pkg, "%s/node_modules/onnxruntime-node/package.json", env);
  else
    snprintf(pkg, sizeof pkg, "%s/bench/peers/node_modules/onnxruntime-node/package.json", dir);
  return access(pkg, R_OK) == 0 && system("node --version > /dev/null 2>&1") == 0;
}

Test(bench_llm, with_onnx_runtime_when_installed) {
  if (!peer_installed()) cr_skip_test("onnxruntime-node or node is not installed (make bench-deps)");
  cr_assert_eq(run(QUICK), 0, "%s", out);
  cr_assert(json_ok(out), "not JSON:\n%s", out);
  cr_assert(strstr(out, "\"available\": true"), "%s", out);
  cr_assert(!strstr(out, "\"ort\": null"), "%s", out);
  cr_assert(!strstr(out, "\"diff_to_ort\": null"), "%s", out);
  /* The logits agree with ONNX Runtime's within 1e-4 relative: every logits_rel is 0 or tiny. */
  for (const char *p = strstr(out, "\"logits_rel\": "); p; p = strstr(p + 1, "\"logits_rel\": ")) {
    double v = strtod(p + strlen("\"logits_rel\": "), NULL);
    cr_assert(v <= 1e-4, "logits differ from ONNX Runtime's by %g:\n%s", v, out);
  }
}
