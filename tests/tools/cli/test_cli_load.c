/* `mixrt run` reads an ONNX model once: the session's load is the only one unless the model as
 * loaded is needed besides (--check runs the reference interpreter on a graph of its own), and
 * the importer hands the decoded weights to the graph without copying them again. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "mixrt/models.h"
#include "mixrt/onnx.h"
#include "support/cli_run.h"

#define WORK_DIR MIXRT_BINARY_DIR "/tests/cli-load"

static char out[1 << 16];

TestSuite(cli_load);

Test(cli_load, run_reads_the_model_once) {
  mxt_make_work_dir("cli-load");
  const char *path = WORK_DIR "/encoder.onnx";
  mx_graph *g;
  mx_error err;
  cr_assert_eq(mx_model_encoder(NULL, &g, &err), MX_OK, "%s", err.message);
  cr_assert_eq(mx_onnx_save_file(g, path, &err), MX_OK, "%s", err.message);
  mx_graph_destroy(g);
  char args[1024];
  snprintf(args, sizeof args, "run %s --random --shape batch=1 --shape seq=5 --steps 1", path);
  cr_assert_eq(mxt_cli_run(out, sizeof out, args), 0, "%s", out);
  cr_expect(strstr(out, "load: 1 ONNX file read by this process"), "%s", out);
  /* The encoder's weights are large constants: decoded once into the blocks the graph keeps. */
  cr_expect(strstr(out, "; 0.0 MiB of constant bytes copied into graphs"), "%s", out);
  snprintf(args, sizeof args, "run %s --random --shape batch=1 --shape seq=5 --steps 1 --check", path);
  cr_assert_eq(mxt_cli_run(out, sizeof out, args), 0, "%s", out);
  cr_expect(strstr(out, "load: 2 ONNX file reads by this process"), "%s", out);
  cr_expect(strstr(out, "check: PASS"), "%s", out);
}
