/* `mixrt conformance [DIR]`: runs the ONNX node tests through the reference interpreter. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "mixrt/reference.h"
#include "tools/commands.h"
#include "tools/conformance.h"

#ifndef MIXRT_ONNX_NODE_DIR_DEFAULT
#define MIXRT_ONNX_NODE_DIR_DEFAULT "tests/data/onnx-node"
#endif

void mx_cmd_conformance_help(FILE *out) {
  fprintf(out,
          "usage: mixrt conformance [DIR] [options]\n\n"
          "Runs every test folder of the ONNX backend node-test layout in DIR (model.onnx,\n"
          "test_data_set_0/input_i.pb, output_i.pb) through the reference interpreter and compares\n"
          "the outputs by the onnx rules: same count, exact shape and dtype, floats within\n"
          "|a - e| <= atol + rtol * |e| (NaN equals NaN, infinities by sign), integers and bools exact.\n"
          "Prints one line per test (PASS / FAIL / SKIP with the reason) and a last line\n"
          "'N passed, N failed, N skipped'.\n\n"
          "DIR defaults to $MIXRT_ONNX_NODE_DIR, else %s.\n\n"
          "options:\n"
          "  --filter TEXT     run only tests whose folder name contains TEXT\n"
          "  --gaps FILE       skip the tests listed in FILE ('- `test_name`: reason' lines)\n"
          "  --rtol X          relative tolerance (default 1e-3)\n"
          "  --atol X          absolute tolerance (default 1e-7)\n"
          "  --quiet           do not print PASS lines\n"
          "  --by-op           before the last line, a table: each operator with the number of tests\n"
          "                    that use it, passed, failed and skipped\n"
          "  --skip-missing    exit 77 (ctest's skip code) with a loud message when DIR is absent\n\n"
          "exit codes: 0 all ran tests passed, 1 a test failed or DIR unreadable, 2 usage error,\n"
          "77 DIR absent with --skip-missing\n",
          MIXRT_ONNX_NODE_DIR_DEFAULT);
}

static mx_status run_reference(void *user, mx_graph *g, const mx_tensor *inputs, size_t n_inputs,
                               mx_tensor *outputs, size_t n_outputs, mx_error *err) {
  (void)user;
  return mx_reference_run(g, inputs, n_inputs, outputs, n_outputs, err);
}

static bool parse_double(const char *s, double *out) {
  char *end;
  if (!s || !*s) return false;
  *out = strtod(s, &end);
  return *end == '\0' && *out >= 0;
}

int mx_cmd_conformance(int argc, char **argv) {
  mx_conf_options opt = {.rtol = 1e-3, .atol = 1e-7, .run = run_reference, .run_name = "reference"};
  bool skip_missing = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--filter") == 0) {
      if (!(opt.filter = mx_cli_option_value("conformance", argc, argv, &i))) return MX_EXIT_USAGE;
    } else if (strcmp(a, "--gaps") == 0) {
      if (!(opt.gaps_file = mx_cli_option_value("conformance", argc, argv, &i))) return MX_EXIT_USAGE;
    } else if (strcmp(a, "--rtol") == 0 || strcmp(a, "--atol") == 0) {
      const char *v = mx_cli_option_value("conformance", argc, argv, &i);
      if (!v) return MX_EXIT_USAGE;
      if (!parse_double(v, a[2] == 'r' ? &opt.rtol : &opt.atol))
        return mx_cli_usage_error("conformance", "%s needs a non-negative number, not '%s'", a, v);
    } else if (strcmp(a, "--quiet") == 0) {
      opt.quiet = true;
    } else if (strcmp(a, "--by-op") == 0) {
      opt.by_op = true;
    } else if (strcmp(a, "--skip-missing") == 0) {
      skip_missing = true;
    } else if (a[0] == '-') {
      return mx_cli_usage_error("conformance", "unknown option '%s'", a);
    } else if (!opt.dir) {
      opt.dir = a;
    } else {
      return mx_cli_usage_error("conformance", "only one DIR may be given");
    }
  }
  if (!opt.dir) opt.dir = getenv("MIXRT_ONNX_NODE_DIR");
  if (!opt.dir || !*opt.dir) opt.dir = MIXRT_ONNX_NODE_DIR_DEFAULT;
  struct stat sb;
  if (stat(opt.dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
    if (skip_missing) {
      fprintf(stderr,
              "\n*** SKIPPED: ONNX conformance data not found at '%s'. ***\n"
              "*** Set MIXRT_ONNX_NODE_DIR to the onnx-node folder to run the conformance tests. ***\n\n",
              opt.dir);
      return 77;
    }
    return mx_cli_runtime_error("conformance", "'%s' is not a readable folder", opt.dir);
  }
  mx_conf_totals t;
  if (mx_conformance_run(&opt, stdout, &t) != MX_OK) return MX_EXIT_RUNTIME;
  return t.failed ? MX_EXIT_RUNTIME : MX_EXIT_OK;
}
