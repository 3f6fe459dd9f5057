/* Static execution of the public ONNX conformance models: every model whose shapes are all
 * concrete after inference (and whose ops are not data-dependent) is compiled, written to an
 * .mxm image and read back (which re-checks every task), loaded on the CPU device in checking
 * mode and run on the test's inputs; the outputs must equal the reference interpreter's bit for
 * bit. The other models are skipped and counted, and so are those with control flow or
 * sequence / optional values or string tensors: the static executor runs none
 * (support/control_rule.h). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/ir.h"
#include "graph/ops/op.h"
#include "mixrt/onnx.h"
#include "support/control_rule.h"
#include "support/onnx_node.h"
#include "support_static.h"

/* Whether every value a node touches has a concrete shape and no op is data-dependent. */
static bool is_static(const mx_graph *g, char *why, size_t cap) {
  for (size_t n = 0; n < g->n_nodes; n++) {
    const mx_node *nd = &g->nodes[n];
    if (nd->flags & MX_NODE_DEAD) continue;
    if (nd->def && (nd->def->flags & MX_OP_DATA_DEPENDENT)) {
      snprintf(why, cap, "data-dependent op %s", nd->op_type);
      return false;
    }
    for (uint32_t i = 0; i < nd->n_inputs + nd->n_outputs; i++) {
      mx_value_id v = i < nd->n_inputs ? nd->inputs[i] : nd->outputs[i - nd->n_inputs];
      if (v == MX_NO_VALUE) continue;
      const mx_shape *s = &g->values[v].shape;
      bool ok = s->rank >= 0;
      for (int32_t k = 0; ok && k < s->rank; k++) ok = mx_dim_is_concrete(s->dims[k]);
      if (!ok) {
        snprintf(why, cap, "value '%s' has a non-concrete shape", g->values[v].name);
        return false;
      }
    }
  }
  return true;
}

typedef struct counts {
  int run, skipped_shape, skipped_inputs, skipped_control, skipped_strings;
} counts;

/* Runs one case; returns false (with why) on a failure, true when it passed or was skipped. */
static bool run_case(const mxt_onnx_case *c, mx_device *dev, mx_stream *s, int index, counts *k, char *why,
                     size_t cap) {
  mx_error err;
  mx_graph *g = NULL;
  mx_tensor *in = NULL, *ref = NULL, *got = NULL;
  size_t ni = 0, no = 0;
  mx_static_plan *p = NULL, *p2 = NULL;
  mx_static_model *m = NULL;
  void *img = NULL;
  size_t img_size = 0;
  bool ok = false, have_ref = false, have_got = false;
  size_t loaded = 0;
  if (mx_onnx_load_file(c->model, &g, &err) != MX_OK || mx_graph_infer(g) != MX_OK) {
    snprintf(why, cap, "%s: load/infer: %s", c->name, g ? mx_graph_last_error(g) : err.message);
    goto done;
  }
  char reason[256];
  if (mxt_holds_strings(g, reason, sizeof reason)) {
    k->skipped_strings++;
    fprintf(stderr, "skip %s: %s; strings are host only (the interpreter runs them)\n", c->name, reason);
    ok = true;
    goto done;
  }
  if (mxt_needs_control(g, reason, sizeof reason)) {
    k->skipped_control++;
    fprintf(stderr, "skip %s: %s; the static executor runs no control flow or sequences\n", c->name, reason);
    ok = true;
    goto done;
  }
  if (!is_static(g, reason, sizeof reason)) {
    k->skipped_shape++;
    if (getenv("MXT_VERBOSE")) fprintf(stderr, "skip %s: %s\n", c->name, reason);
    ok = true;
    goto done;
  }
  ni = mx_graph_input_count(g);
  no = mx_graph_output_count(g);
  if (c->n_inputs != ni || c->n_outputs != no) {
    k->skipped_inputs++;
    ok = true;
    goto done;
  }
  in = calloc(ni ? ni : 1, sizeof *in);
  ref = calloc(no ? no : 1, sizeof *ref);
  got = calloc(no ? no : 1, sizeof *got);
  for (; loaded < ni; loaded++) {
    char *name = NULL;
    if (mxt_onnx_node_load_pb(c, false, loaded, &in[loaded], &name, &err) != MX_OK) {
      snprintf(why, cap, "%s: input %zu: %s", c->name, loaded, err.message);
      goto done;
    }
    free(name);
    in[loaded].name = NULL;
  }
  if (mx_reference_run(g, in, ni, ref, no, &err) != MX_OK) {
    snprintf(why, cap, "%s: reference: %s", c->name, err.message);
    goto done;
  }
  have_ref = true;
  mx_static_options o;
  mx__static_options_init(&o);
  o.mode = index % 2 ? MX_HAL_MODEL_INDIRECT : MX_HAL_MODEL_PATCH;
  if (mx__static_compile(g, &o, &p, &err) != MX_OK) {
    snprintf(why, cap, "%s: compile: %s", c->name, err.message);
    goto done;
  }
  if (mx__mxm_save_memory(p, &img, &img_size, &err) != MX_OK ||
      mx__mxm_load_memory(img, img_size, c->name, &p2, &err) != MX_OK) {
    snprintf(why, cap, "%s: .mxm round trip: %s", c->name, err.message);
    goto done;
  }
  if (mx__static_model_create(dev, p2, NULL, &m, &err) != MX_OK) {
    snprintf(why, cap, "%s: create: %s", c->name, err.message);
    goto done;
  }
  char w[400];
  mx_status st =
      index % 3 == 0 ? st_run_host(m, s, in, got, w, sizeof w) : st_run_device(m, s, in, got, w, sizeof w);
  if (st != MX_OK) {
    snprintf(why, cap, "%s: run: %s", c->name, w);
    goto done;
  }
  have_got = true;
  for (size_t j = 0; j < no; j++) {
    if (!st_same_bits(&got[j], &ref[j], w, sizeof w)) {
      snprintf(why, cap, "%s: output %zu: %s", c->name, j, w);
      goto done;
    }
  }
  k->run++;
  ok = true;
done:
  for (size_t j = 0; have_got && j < no; j++) mx_tensor_release(&got[j]);
  for (size_t j = 0; have_ref && j < no; j++) mx_tensor_release(&ref[j]);
  for (size_t i = 0; i < loaded; i++) mx_tensor_release(&in[i]);
  mx__static_model_destroy(m);
  mx__static_plan_destroy(p2);
  mx__static_plan_destroy(p);
  free(img);
  free(got);
  free(ref);
  free(in);
  mx_graph_destroy(g);
  return ok;
}

static void run_range(int part, int parts) {
  const char *dir = mxt_onnx_node_dir();
  if (!dir) cr_skip_test("ONNX node-test data not found");
  mxt_onnx_case *cases;
  size_t n = mxt_onnx_node_cases(dir, &cases);
  cr_assert(n > 0, "no cases under %s", dir);
  mx_device *dev = st_device(MX_DEVICE_CPU, true);
  cr_assert(dev);
  mx_stream *s;
  cr_assert_eq(mx_stream_create(dev, 0, &s), MX_OK);
  counts k = {0};
  int failures = 0;
  for (size_t i = (size_t)part; i < n; i += (size_t)parts) {
    char why[1024] = "";
    if (!run_case(&cases[i], dev, s, (int)i, &k, why, sizeof why)) {
      failures++;
      fprintf(stderr, "FAIL %s\n", why);
    }
  }
  fprintf(stderr,
          "static conformance (part %d/%d): %d models run bit-exact against the reference, %d skipped "
          "(control flow or sequence / optional values), %d skipped (string tensors), %d skipped "
          "(shapes not all static after inference or data-dependent ops), %d skipped (input files do "
          "not match the graph)\n",
          part + 1, parts, k.run, k.skipped_control, k.skipped_strings, k.skipped_shape, k.skipped_inputs);
  mx_stream_destroy(s);
  mx_device_destroy(dev);
  mxt_onnx_node_cases_free(cases, n);
  cr_assert_eq(failures, 0, "%d conformance models failed under static execution", failures);
  cr_assert(k.run > 0);
}

Test(static_conformance, first_half) { run_range(0, 2); }
Test(static_conformance, second_half) { run_range(1, 2); }
