/* Fuzzing regressions: every input a fuzz target ever crashed on is kept in
 * tests/reliability/data/fuzz/<target>/ (one file per finding, named after the bug) and runs
 * here through the same harness as under libFuzzer (fuzz/harness.c), with this build's
 * sanitizers; it must neither crash nor leak. The well-formed session_run seeds also run, which
 * checks the harness's decoding and its "the session still runs the good step" property outside
 * the fuzzer. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "support/onnx_node.h"

/* Runs every file of data/fuzz/<target>/ through the target; returns how many ran. */
static size_t replay_dir(const mxf_target *t) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/fuzz/%s", MIXRT_RELIABILITY_DATA_DIR, t->name);
  DIR *d = opendir(dir);
  if (!d) return 0;
  size_t ran = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    unsigned char *data;
    size_t size;
    cr_assert(mxt_onnx_node_read_file(path, &data, &size), "cannot read %s", path);
    cr_log_info("%s: %s (%zu bytes)", t->name, e->d_name, size);
    t->fn(data, size);
    free(data);
    ran++;
  }
  closedir(d);
  return ran;
}

Test(fuzz_regressions, every_kept_input) {
  size_t total = 0;
  for (const mxf_target *t = mxf_targets; t->name; t++) total += replay_dir(t);
  mxf_release();
  cr_assert_gt(total, 0, "no kept input found under %s/fuzz", MIXRT_RELIABILITY_DATA_DIR);
}

Test(fuzz_regressions, well_formed_session_steps) {
  static const uint8_t syms[][2] = {{0, 0}, {1, 0}, {4, 0}, {2, 3}, {1, 5}};
  for (unsigned m = 0; m < MXF_RUN_MODELS; m++) {
    for (size_t k = 0; k < sizeof syms / sizeof syms[0]; k++) {
      uint8_t buf[8192];
      size_t n = mxf_session_run_seed(m, syms[k], 2, 10 * m + k, buf, sizeof buf);
      cr_assert_gt(n, 0, "model %u: no seed", m);
      mxf_session_run(buf, n);
    }
  }
  mxf_release();
}

Test(fuzz_regressions, empty_and_tiny_inputs) {
  static const uint8_t bytes[] = {0xff, 0x00, 0x7f, 0x80, 0x4d};
  for (const mxf_target *t = mxf_targets; t->name; t++) {
    t->fn(bytes, 0);
    for (size_t n = 1; n <= sizeof bytes; n++) t->fn(bytes, n);
  }
  mxf_release();
}
