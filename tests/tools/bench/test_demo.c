/* `mixrt demo` as `make demo` runs it: the greedy decode loop on the built-in Llama-style
 * decoder finishes, prints its progress, latency, time split and counters, and its check
 * against the reference interpreter passes; options pick the size, device, streams, executor
 * and partitioning; bad options are usage errors (exit 2). Nothing here looks at timings. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "support/cli_run.h"

#define PASS_LINE "check: first 4 steps equal the reference interpreter: PASS"

static char out[1 << 17];

/* Runs `mixrt <args>` with stderr folded into stdout; returns the exit code, output in out. */
static int run(const char *args) {
  int rc = mxt_cli_run(out, sizeof out, args);
  cr_assert_geq(rc, 0, "%s", out);
  return rc;
}

Test(demo, eight_steps_pass_the_check) {
  cr_assert_eq(run("demo --steps 8"), 0, "%s", out);
  cr_assert(strstr(out, PASS_LINE), "%s", out);
  cr_assert(strstr(out, "== partition"), "%s", out);
  cr_assert(strstr(out, "static "), "the summary lists static models:\n%s", out);
  cr_assert(strstr(out, "dynamic "), "and dynamic clusters:\n%s", out);
  cr_assert(strstr(out, "why: "), "with the reason:\n%s", out);
  cr_assert(strstr(out, "step   8/8"), "a progress line every 8 steps:\n%s", out);
  const char *want[] = {"step latency: median",
                        "p90",
                        "tokens/s",
                        "static models",
                        "dynamic ops",
                        "host kernels",
                        "static executes",
                        "refreshed allocation-table entries",
                        "allocator:"};
  for (size_t k = 0; k < sizeof want / sizeof want[0]; k++)
    cr_assert(strstr(out, want[k]), "'%s' missing:\n%s", want[k], out);
}

Test(demo, tiny_size_with_progress_lines) {
  cr_assert_eq(run("demo --size tiny --steps 17"), 0, "%s", out);
  cr_assert(strstr(out, "step   8/17"), "%s", out);
  cr_assert(strstr(out, "step  16/17"), "%s", out);
  cr_assert(strstr(out, "step  17/17"), "the last step is reported too:\n%s", out);
  cr_assert(strstr(out, "hidden 64"), "%s", out);
  cr_assert(strstr(out, PASS_LINE), "%s", out);
}

Test(demo, fewer_steps_than_the_check) {
  cr_assert_eq(run("demo --size tiny --steps 2"), 0, "%s", out);
  cr_assert(strstr(out, "check: first 2 steps equal the reference interpreter: PASS"), "%s", out);
}

Test(demo, cpu_device_streams_and_executors) {
  cr_assert_eq(run("demo --size tiny --steps 5 --device cpu --streams 2 --executor topological"), 0, "%s",
               out);
  cr_assert(strstr(out, "cpu device, 2 streams, topological executor"), "%s", out);
  cr_assert(strstr(out, PASS_LINE), "%s", out);
  cr_assert_eq(run("demo --size tiny --steps 5 --executor multi-thread"), 0, "%s", out);
  cr_assert(strstr(out, PASS_LINE), "%s", out);
}

Test(demo, all_dynamic_and_explicit_sizes) {
  cr_assert_eq(run("demo --size tiny --steps 4 --static-min-ops -1"), 0, "%s", out);
  cr_assert(strstr(out, PASS_LINE), "%s", out);
  cr_assert(strstr(out, "0 ops in 0 static models"), "%s", out);
  cr_assert_eq(
      run("demo --steps 4 --layers 1 --hidden 32 --heads 2 --kv-heads 1 --head-dim 16 --ffn 48 --vocab 50"),
      0, "%s", out);
  cr_assert(strstr(out, "1 layers, hidden 32, 2 heads (1 key/value heads, head dim 16), ffn 48, vocab 50"),
            "%s", out);
  cr_assert(strstr(out, PASS_LINE), "%s", out);
}

Test(demo, usage_errors_exit_2) {
  cr_assert_eq(run("demo --steps 0"), 2, "%s", out);
  cr_assert_eq(run("demo --size huge"), 2, "%s", out);
  cr_assert(strstr(out, "huge"), "%s", out);
  cr_assert_eq(run("demo --bogus"), 2, "%s", out);
  cr_assert_eq(run("demo --device gpu"), 2, "%s", out);
  cr_assert_eq(run("demo --steps"), 2, "%s", out);
  cr_assert_eq(run("demo --heads 3"), 2, "a configuration the generator refuses:\n%s", out);
  cr_assert_eq(run("demo --token 99999"), 2, "%s", out);
  cr_assert_eq(run("demo --help"), 0, "%s", out);
  cr_assert(strstr(out, "usage: mixrt demo"), "%s", out);
  cr_assert(strstr(out, "--steps N"), "%s", out);
}
