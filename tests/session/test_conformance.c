/* Every public ONNX conformance model through the session (hybrid execution) equals the
 * reference interpreter bit for bit, for every executor and 1, 2 and 4 streams, with the
 * default partitioning (single-op models run dynamically) and with static_min_ops 0 (every
 * known cluster becomes a static model). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mixrt/onnx.h"
#include "session/session_support.h"
#include "support/onnx_node.h"

enum { MAX_IO = 32 };

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
  size_t checked = 0;
  for (size_t c = 0; c < n; c++) {
    mx_tensor in[MAX_IO], got[MAX_IO], want[MAX_IO];
    memset(in, 0, sizeof in);
    memset(got, 0, sizeof got);
    memset(want, 0, sizeof want);
    cr_assert_leq(cases[c].n_inputs, MAX_IO);
    for (size_t i = 0; i < cases[c].n_inputs; i++)
      cr_assert_eq(mxt_onnx_node_load_pb(&cases[c], false, i, &in[i], NULL, &err), MX_OK, "%s", err.message);
    cr_assert_eq(mx_session_load_file(s, cases[c].model), MX_OK, "%s: %s", cases[c].name, mx_session_last_error(s));
    size_t n_out = mx_session_output_count(s);
    cr_assert_leq(n_out, MAX_IO);
    cr_assert_eq(mx_session_run(s, in, cases[c].n_inputs, got, n_out), MX_OK, "%s: %s", cases[c].name,
                 mx_session_last_error(s));
    mx_graph *g;
    cr_assert_eq(mx_onnx_load_file(cases[c].model, &g, &err), MX_OK);
    cr_assert_eq(mx_reference_run(g, in, cases[c].n_inputs, want, n_out, &err), MX_OK, "%s: %s", cases[c].name,
                 err.message);
    for (size_t k = 0; k < n_out; k++) {
      char why[256];
      cr_assert(mxs_same(&got[k], &want[k], why, sizeof why), "%s output %zu: %s", cases[c].name, k, why);
    }
    mx_graph_destroy(g);
    for (size_t k = 0; k < MAX_IO; k++) {
      mx_tensor_release(&in[k]);
      mx_tensor_release(&got[k]);
      mx_tensor_release(&want[k]);
    }
    checked++;
  }
  cr_assert_eq(checked, n);
  mx_session_destroy(s);
  mxt_onnx_node_cases_free(cases, n);
}

Test(conformance, sequential_1_stream) { run_all(MX_EXECUTOR_SEQUENTIAL, 1, 4); }
Test(conformance, topological_2_streams) { run_all(MX_EXECUTOR_TOPOLOGICAL, 2, 4); }
Test(conformance, multi_thread_4_streams) { run_all(MX_EXECUTOR_MULTI_THREAD, 4, 4); }
Test(conformance, sequential_1_stream_all_static) { run_all(MX_EXECUTOR_SEQUENTIAL, 1, 0); }
Test(conformance, topological_2_streams_all_static) { run_all(MX_EXECUTOR_TOPOLOGICAL, 2, 0); }
Test(conformance, multi_thread_4_streams_all_static) { run_all(MX_EXECUTOR_MULTI_THREAD, 4, 0); }
