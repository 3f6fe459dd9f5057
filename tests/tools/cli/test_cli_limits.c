/* `mixrt run` refuses a symbolic dim too large for memory before it makes any input: the
 * message names the value, its size and the limit, and the program exits 1 at once instead of
 * filling memory until the system kills it. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "mixrt/models.h"
#include "mixrt/onnx.h"
#include "mixrt/session.h"
#include "support/cli_run.h"

#define WORK_DIR MIXRT_BINARY_DIR "/tests/cli-work"

static char out[1 << 14];

/* Writes the default llama decode step to WORK_DIR/limits-llama.onnx; returns the path. */
static const char *write_llama(void) {
  static char path[512];
  mxt_make_work_dir("cli-work");
  snprintf(path, sizeof path, "%s/limits-llama.onnx", WORK_DIR);
  mx_llama_config cfg;
  mx_llama_config_default(&cfg);
  mx_graph *g;
  mx_error err;
  cr_assert_eq(mx_model_llama(&cfg, &g, &err), MX_OK, "%s", err.message);
  cr_assert_eq(mx_onnx_save_file(g, path, &err), MX_OK, "%s", err.message);
  mx_graph_destroy(g);
  return path;
}

/* The memory limit a default session on this machine gets for the model. */
static uint64_t default_limit(const char *path) {
  mx_session *s;
  mx_error err;
  cr_assert_eq(mx_session_create(NULL, &s, &err), MX_OK, "%s", err.message);
  cr_assert_eq(mx_session_load_file(s, path), MX_OK, "%s", mx_session_last_error(s));
  uint64_t limit = mx_session_memory_limit(s);
  mx_session_destroy(s);
  return limit;
}

Test(cli_limits, huge_shape_refused_at_once) {
  if (!mxt_cli_available()) cr_skip_test("the mixrt program is not built");
  const char *path = write_llama();
  /* 4 pasts of 11.9 GiB and 4 presents as large. */
  if (default_limit(path) > 90ull << 30) cr_skip_test("more than 90 GiB of memory available");
  char args[700];
  snprintf(args, sizeof args, "run %s --random --shape past_len=100000000", path);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int rc = mxt_cli_run(out, sizeof out, args);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
  cr_assert_eq(rc, 1, "%s", out);
  cr_assert(strstr(out, "with past_len = 100000000"), "%s", out);
  cr_assert(strstr(out, "more than the available physical memory"), "%s", out);
  cr_assert(strstr(out, "output 'present_key_0' [1, 2, past_len + 1, 16] float32, 11.9 GiB"), "%s", out);
  cr_assert_lt(secs, 5.0, "took %.2f s", secs); /* the load included; the refusal itself is instant */
  /* A value beyond any memory is named with its own size. */
  snprintf(args, sizeof args, "run %s --random --shape past_len=1000000000000000", path);
  cr_assert_eq(mxt_cli_run(out, sizeof out, args), 1, "%s", out);
  cr_assert(strstr(out, "value 'past_key_0' [1, 2, past_len, 16] float32 would take 113.7 PiB"), "%s", out);
  /* Shapes that fit run as before. */
  snprintf(args, sizeof args, "run %s --random --shape past_len=64", path);
  cr_assert_eq(mxt_cli_run(out, sizeof out, args), 0, "%s", out);
}
