/* Every public ONNX conformance model through the session (hybrid execution) equals the
 * reference interpreter bit for bit, for every executor and 1, 2 and 4 streams, with the
 * default partitioning (single-op models run dynamically) and with static_min_ops 0 (every
 * known cluster becomes a static model). Where a Stage 2 rule replaced primitive ops by a fused
 * op that computes differently (any rule but the exact ones of exact_rule), the outputs are
 * compared with the node tests' tolerances instead (rtol 1e-3, atol 1e-7). Models holding a
 * string tensor are skipped and counted: strings are host only and sessions refuse them by design
 * (support/control_rule.h). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mixrt/onnx.h"
#include "support/control_rule.h"
#include "support/onnx_node.h"
#include "v2runtime/session/session_support.h"

enum { MAX_IO = 32 };

/* Rewrite rules that only remove or merge ops, so the outputs keep every bit. */
static bool exact_rule(const char *name) {
  static const char *const exact[] = {"identity", "transpose_pair", "reshape_chain", "cse"};
  for (size_t i = 0; i < sizeof exact / sizeof *exact; i++)
    if (strcmp(name, exact[i]) == 0) return true;
  return false;
}

/* True when the last load's Stage 2 applied a rule that changes how outputs are computed. */
static bool fused_numerics(const mx_session *s) {
  const mx_fuse_report *r = mx_session_fuse_report(s);
  for (size_t i = 0; r && i < r->n_rules; i++)
    if (r->rules[i].hits && !exact_rule(r->rules[i].name)) return true;
  return false;
}

/* What run_case found. */
enum { CASE_PASSED, CASE_FAILED, CASE_SKIPPED };

/* Runs one case through session s; CASE_FAILED or CASE_SKIPPED come with why. */
static int run_case(mx_session *s, const mxt_onnx_case *c, char *why, size_t cap) {
  mx_tensor in[MAX_IO], got[MAX_IO], want[MAX_IO];
  memset(in, 0, sizeof in);
  memset(got, 0, sizeof got);
  memset(want, 0, sizeof want);
  mx_error err;
  mx_graph *g = NULL;
  int result = CASE_FAILED;
  size_t n_out = 0;
  if (c->n_inputs > MAX_IO) {
    snprintf(why, cap, "%zu inputs (at most %d)", c->n_inputs, MAX_IO);
    return CASE_FAILED;
  }
  if (mx_onnx_load_file(c->model, &g, &err) != MX_OK) {
    snprintf(why, cap, "import: %s", err.message);
    return CASE_FAILED;
  }
  if (mxt_holds_strings(g, why, cap)) {
    mx_graph_destroy(g);
    return CASE_SKIPPED;
  }
  for (size_t i = 0; i < c->n_inputs; i++)
    if (mxt_onnx_node_load_pb(c, false, i, &in[i], NULL, &err) != MX_OK) {
      snprintf(why, cap, "input %zu: %s", i, err.message);
      goto done;
    }
  if (mx_session_load_file(s, c->model) != MX_OK) {
    snprintf(why, cap, "load: %s", mx_session_last_error(s));
    goto done;
  }
  n_out = mx_session_output_count(s);
  if (n_out > MAX_IO) {
    snprintf(why, cap, "%zu outputs (at most %d)", n_out, MAX_IO);
    n_out = 0;
    goto done;
  }
  if (mx_session_run(s, in, c->n_inputs, got, n_out) != MX_OK) {
    snprintf(why, cap, "run: %s", mx_session_last_error(s));
    goto done;
  }
  if (mx_reference_run(g, in, c->n_inputs, want, n_out, &err) != MX_OK) {
    snprintf(why, cap, "reference: %s", err.message);
    goto done;
  }
  bool fused = fused_numerics(s);
  for (size_t k = 0; k < n_out; k++) {
    char w[256];
    bool same = fused ? mx_tensor_allclose(&got[k], &want[k], 1e-3, 1e-7, w, sizeof w)
                      : mxs_same(&got[k], &want[k], w, sizeof w);
    if (!same) {
      snprintf(why, cap, "output %zu: %s", k, w);
      goto done;
    }
  }
  result = CASE_PASSED;
done:
  mx_graph_destroy(g);
  for (size_t k = 0; k < MAX_IO; k++) {
    mx_tensor_release(&in[k]);
    mx_tensor_release(&got[k]);
    mx_tensor_release(&want[k]);
  }
  return result;
}

/* Sanitizer builds split the models between the executors: the sequential configurations run
 * models 0, 3, 6, ..., the topological ones 1, 4, 7, ... and the multi-thread ones 2, 5, 8, ...,
 * each with both partitionings, so every model still runs once under the sanitizer with its
 * default partitioning and once all static, and every executor still sees every kind of op. Six
 * passes over all ~1500 models took 2 minutes of the ASan stage and 3 of the TSan stage; the
 * Release tree runs every model in every configuration. */
static bool model_in_this_run(mx_executor_kind ex, size_t c) {
#ifdef MIXRT_SANITIZED
  int share = ex == MX_EXECUTOR_SEQUENTIAL ? 0 : ex == MX_EXECUTOR_TOPOLOGICAL ? 1 : 2;
  return c % 3 == (size_t)share;
#else
  (void)ex;
  (void)c;
  return true;
#endif
}

static void run_all(mx_executor_kind ex, uint32_t streams, int64_t static_min_ops) {
  const char *dir = mxt_onnx_node_dir();
  if (!dir) cr_skip_test("ONNX conformance data not found");
  mxt_onnx_case *cases;
  size_t n = mxt_onnx_node_cases(dir, &cases);
  cr_assert_gt(n, 0);
  mx_session_options o;
  mx_session_options_init(&o);
  o.executor = ex;
  o.streams = streams;
  o.static_min_ops = static_min_ops;
  mx_session *s;
  mx_error err;
  cr_assert_eq(mx_session_create(&o, &s, &err), MX_OK, "%s", err.message);
  size_t failed = 0, skipped = 0, run = 0;
  for (size_t c = 0; c < n; c++) {
    if (!model_in_this_run(ex, c)) continue;
    run++;
    char why[600];
    int r = run_case(s, &cases[c], why, sizeof why);
    if (r == CASE_SKIPPED) {
      if (streams == 1 && static_min_ops)
        fprintf(stderr, "skip %s: %s; strings are host only\n", cases[c].name, why);
      skipped++;
    } else if (r == CASE_FAILED) {
      fprintf(stderr, "FAIL %s: %s\n", cases[c].name, why);
      failed++;
    }
  }
  fprintf(stderr,
          "session conformance (executor %d, %u streams, static_min_ops %lld): %zu passed, %zu failed, %zu "
          "skipped (string tensors)\n",
          (int)ex, streams, (long long)static_min_ops, run - failed - skipped, failed, skipped);
  mx_session_destroy(s);
  mxt_onnx_node_cases_free(cases, n);
  cr_assert_gt(run, 0);
  cr_assert_eq(failed, 0, "%zu of %zu models failed through the session", failed, run);
}

Test(conformance, sequential_1_stream) { run_all(MX_EXECUTOR_SEQUENTIAL, 1, 4); }
Test(conformance, topological_2_streams) { run_all(MX_EXECUTOR_TOPOLOGICAL, 2, 4); }
Test(conformance, multi_thread_4_streams) { run_all(MX_EXECUTOR_MULTI_THREAD, 4, 4); }
Test(conformance, sequential_1_stream_all_static) { run_all(MX_EXECUTOR_SEQUENTIAL, 1, 0); }
Test(conformance, topological_2_streams_all_static) { run_all(MX_EXECUTOR_TOPOLOGICAL, 2, 0); }
Test(conformance, multi_thread_4_streams_all_static) { run_all(MX_EXECUTOR_MULTI_THREAD, 4, 0); }
