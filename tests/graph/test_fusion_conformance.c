/* The ONNX backend node tests (tests/data/onnx-node) with every rewrite rule on: each model the
 * reference interpreter passes unfused (its outputs within rtol 1e-3 / atol 1e-7 of the expected
 * files, the conformance rule) must still pass after mx_graph_optimize + mx_graph_fuse("all").
 * The expanded function tests (LayerNormalization, Gelu, Softmax, ... written in primitive ops)
 * are where the rules hit; the totals go to stderr. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/ir.h"
#include "mixrt/graph.h"
#include "mixrt/onnx.h"
#include "mixrt/reference.h"
#include "support/onnx_node.h"

#define MAX_IO 32

/* Runs the model of case c (fused when `fuse`) and compares with the expected outputs. Returns
 * 1 when it matches, 0 when not (why says how), -1 when it cannot run at all. *hits receives
 * the rule hits. */
static int run_case(const mxt_onnx_case *c, bool fuse, size_t *hits, char *why, size_t cap) {
  mx_graph *g = NULL;
  mx_error err;
  *hits = 0;
  if (c->n_inputs > MAX_IO || c->n_outputs > MAX_IO || mx_onnx_load_file(c->model, &g, &err) != MX_OK)
    return -1;
  int rc = -1;
  mx_tensor ins[MAX_IO], outs[MAX_IO], exp[MAX_IO];
  size_t ni = 0, ne = 0;
  bool ran = false;
  if (fuse) {
    mx_fuse_report r;
    if (mx_graph_optimize(g, NULL) != MX_OK || mx_graph_fuse(g, "all", &r) != MX_OK) {
      snprintf(why, cap, "fuse failed: %s", mx_graph_last_error(g));
      rc = 0;
      goto done;
    }
    for (size_t k = 0; k < r.n_rules; k++) *hits += r.rules[k].hits;
  }
  for (; ni < c->n_inputs; ni++) {
    char *name = NULL;
    if (mxt_onnx_node_load_pb(c, false, ni, &ins[ni], &name, &err) != MX_OK) goto done;
    ins[ni].name = NULL; /* by position */
    free(name);
  }
  for (; ne < c->n_outputs; ne++) {
    char *name = NULL;
    if (mxt_onnx_node_load_pb(c, true, ne, &exp[ne], &name, &err) != MX_OK) goto done;
    free(name);
  }
  if (mx_graph_output_count(g) != c->n_outputs || mx_graph_input_count(g) != c->n_inputs) goto done;
  if (mx_reference_run(g, ins, ni, outs, c->n_outputs, &err) != MX_OK) {
    snprintf(why, cap, "run failed: %s", err.message);
    rc = fuse ? 0 : -1;
    goto done;
  }
  ran = true;
  rc = 1;
  for (size_t k = 0; k < c->n_outputs && rc == 1; k++)
    if (!mx_tensor_allclose(&outs[k], &exp[k], 1e-3, 1e-7, why, cap)) rc = 0;
done:
  if (ran)
    for (size_t k = 0; k < c->n_outputs; k++) mx_tensor_release(&outs[k]);
  for (size_t k = 0; k < ni; k++) mx_tensor_release(&ins[k]);
  for (size_t k = 0; k < ne; k++) mx_tensor_release(&exp[k]);
  mx_graph_destroy(g);
  return rc;
}

Test(fusion_conformance, passing_models_still_pass_with_every_rule, .timeout = 1800) {
  const char *root = mxt_onnx_node_dir();
  if (!root) cr_skip_test("ONNX node-test data not found");
  mxt_onnx_case *cases;
  size_t n = mxt_onnx_node_cases(root, &cases);
  cr_assert_gt(n, 0);
  size_t passing = 0, rewritten = 0, broken = 0;
  for (size_t i = 0; i < n; i++) {
    char why[512] = "";
    size_t hits;
    if (run_case(&cases[i], false, &hits, why, sizeof why) != 1) continue;
    passing++;
    int rc = run_case(&cases[i], true, &hits, why, sizeof why);
    if (hits) rewritten++;
    if (rc != 1) {
      broken++;
      cr_expect_fail("%s: passes unfused, fails with the rewrite rules (%zu hits): %s", cases[i].name, hits,
                     why);
    }
  }
  fprintf(stderr, "fusion conformance: %zu models pass unfused, %zu rewritten by the rules, %zu broken\n",
          passing, rewritten, broken);
  mxt_onnx_node_cases_free(cases, n);
}
