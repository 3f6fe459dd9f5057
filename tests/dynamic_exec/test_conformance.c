/* Every public ONNX node-test model run through the dynamic executor: outputs equal the
 * reference interpreter's and match the expected test data. Each model runs in three
 * configurations, two steps each (the second reuses what the first computed):
 *   - as written (concrete shapes), CPU device, 2 streams;
 *   - with every graph-input dim turned into a symbol before inference (symbolic output
 *     expressions, run-time inference where shapes depend on input values, host evaluation of
 *     shape arithmetic), inline device;
 *   - the symbolic variant again on the CPU device with 4 streams, host kernels instead of
 *     evaluated values and copies instead of aliases.
 * A model with control flow or sequence / optional values (support/control_rule.h) that the
 * executor refuses (plan, create or run error) is counted as skipped, with the refusal printed;
 * a wrong result is a failure for every model. A model holding a string tensor is skipped: strings
 * are host only, the executors refuse them by design. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/ir.h"
#include "mixrt/onnx.h"
#include "mixrt/reference.h"
#include "support/control_rule.h"
#include "support/onnx_node.h"
#include "support_dyn.h"

#define MAX_IO 64

/* Plan statistics over all models (printed as a report). */
static mx_dyn_plan_info totals;

typedef struct conf_case {
  mx_tensor in[MAX_IO], expected[MAX_IO], ref[MAX_IO];
  size_t n_in, n_out;
} conf_case;

static void release_case(conf_case *c) {
  for (size_t i = 0; i < MAX_IO; i++) {
    mx_tensor_release(&c->in[i]);
    mx_tensor_release(&c->expected[i]);
    mx_tensor_release(&c->ref[i]);
  }
}

/* Replaces every concrete dim of every graph input by a fresh symbol. */
static void symbolize_inputs(mx_graph *g) {
  mx_symtab *t = mx_graph_symtab(g);
  for (size_t i = 0; i < g->n_inputs; i++) {
    mx_value *v = &g->values[g->inputs[i]];
    for (int32_t d = 0; d < v->shape.rank; d++) {
      char name[64];
      snprintf(name, sizeof name, "in%zu_d%d", i, (int)d);
      v->shape.dims[d] = mx_sym_named(t, name);
    }
  }
}

/* Whether g (or a subgraph) draws random numbers: the Random* ops, Bernoulli, Multinomial, and
 * Dropout given a training_mode input (its mask). Their values cannot equal another generator's,
 * so, as in `mixrt conformance`, such outputs are checked against the expected data on element
 * type and shape only (the reference, which draws the same numbers, is still matched bit for bit). */
static bool draws_random_numbers(const mx_graph *g) {
  static const char *const random_ops[] = {"RandomUniform",    "RandomNormal", "RandomUniformLike",
                                           "RandomNormalLike", "Bernoulli",    "Multinomial"};
  for (size_t i = 0; i < g->n_nodes; i++) {
    const mx_node *nd = &g->nodes[i];
    if (*nd->domain) continue;
    for (size_t k = 0; k < sizeof random_ops / sizeof random_ops[0]; k++)
      if (strcmp(nd->op_type, random_ops[k]) == 0) return true;
    if (strcmp(nd->op_type, "Dropout") == 0 && nd->n_inputs >= 3 && nd->inputs[2] != MX_NO_VALUE) return true;
  }
  for (size_t i = 0; i < g->n_subgraphs; i++)
    if (draws_random_numbers(g->subgraphs[i])) return true;
  return false;
}

/* Element type and shape of a against e (the comparison of random outputs). */
static bool same_type_and_shape(const mx_tensor *a, const mx_tensor *e, char *why, size_t cap) {
  bool same = a->dtype == e->dtype && a->rank == e->rank;
  for (int32_t d = 0; same && d < a->rank; d++) same = a->dims[d] == e->dims[d];
  if (!same) snprintf(why, cap, "element type or shape differs from the expected one");
  return same;
}

/* What run_dynamic found. */
enum { RUN_OK = 0, RUN_WRONG = 1, RUN_REFUSED = 2 };

/* Runs g dynamically (two steps) with options o and compares with the reference and the
 * expected data. Returns RUN_REFUSED when the plan, executor or a step failed, RUN_WRONG on a
 * mismatch or leaked device memory (message on stderr), RUN_OK on success. */
static int run_dynamic(mx_graph *g, mx_device *dev, const mx_dyn_options *o, conf_case *c, const char *what) {
  mx_dyn_plan *plan;
  mx_dyn_exec *e;
  mx_error err;
  if (mx__dyn_plan_create(g, o, &plan, &err) != MX_OK) {
    fprintf(stderr, "%s: plan: %s\n", what, err.message);
    return RUN_REFUSED;
  }
  mx_dyn_plan_info info;
  mx__dyn_plan_info_get(plan, &info);
  totals.ops += info.ops;
  totals.device_ops += info.device_ops;
  totals.host_ops += info.host_ops;
  totals.eval_ops += info.eval_ops;
  totals.alias_ops += info.alias_ops;
  totals.infer_ops += info.infer_ops;
  totals.data_dependent_ops += info.data_dependent_ops;
  if (mx__dyn_exec_create(dev, plan, NULL, NULL, 0, &e, &err) != MX_OK) {
    fprintf(stderr, "%s: executor: %s\n", what, err.message);
    mx__dyn_plan_destroy(plan);
    return RUN_REFUSED;
  }
  int bad = 0;
  bool random = draws_random_numbers(g);
  for (int step = 0; step < 2 && !bad; step++) {
    mx_tensor out[MAX_IO];
    memset(out, 0, sizeof out);
    if (mx__dyn_exec_run(e, c->in, c->n_in, out, c->n_out, NULL) != MX_OK) {
      fprintf(stderr, "%s: run: %s\n", what, mx__dyn_exec_last_error(e));
      bad = RUN_REFUSED;
      break;
    }
    for (size_t i = 0; i < c->n_out; i++) {
      char why[300];
      if (!mx_tensor_allclose(&out[i], &c->ref[i], 0.0, 0.0, why, sizeof why)) {
        fprintf(stderr, "%s: output %zu differs from the reference: %s\n", what, i, why);
        bad = RUN_WRONG;
      } else if (random ? !same_type_and_shape(&out[i], &c->expected[i], why, sizeof why)
                        : !mx_tensor_allclose(&out[i], &c->expected[i], 1e-3, 1e-7, why, sizeof why)) {
        fprintf(stderr, "%s: output %zu differs from the expected data: %s\n", what, i, why);
        bad = RUN_WRONG;
      }
      mx_tensor_release(&out[i]);
    }
  }
  mx_caching_stats cs;
  mx__caching_stats_get(mx__dyn_exec_allocator(e), &cs);
  if (cs.bytes_in_use) {
    fprintf(stderr, "%s: %llu device bytes still in use\n", what, (unsigned long long)cs.bytes_in_use);
    bad = RUN_WRONG;
  }
  mx__dyn_exec_destroy(e);
  mx__dyn_plan_destroy(plan);
  return bad;
}

/* Counts one run_dynamic result: a refusal of a model the control rule covers is skipped. */
static void count_run(int r, bool control, size_t *failed, size_t *skipped) {
  if (r == RUN_REFUSED && control)
    (*skipped)++;
  else if (r != RUN_OK)
    (*failed)++;
}

Test(dyn_conformance, every_model_equals_reference) {
  const char *root = mxt_onnx_node_dir();
  if (!root) cr_skip_test("ONNX node-test data not found");
  mxt_onnx_case *cases;
  size_t n = mxt_onnx_node_cases(root, &cases);
  cr_assert_gt(n, 0);
  mx_device *cpu = dyn_device(MX_DEVICE_CPU, true);
  mx_device *inl = dyn_device(MX_DEVICE_INLINE, true);
  size_t passed = 0, failed = 0, sym_run = 0, sym_failed = 0, sym_skipped = 0, control = 0, strings = 0;
  for (size_t k = 0; k < n; k++) {
    const mxt_onnx_case *tc = &cases[k];
    conf_case *c = calloc(1, sizeof *c);
    cr_assert_not_null(c);
    mx_graph *g = NULL;
    mx_error err;
    cr_assert_eq(mx_onnx_load_file(tc->model, &g, &err), MX_OK, "%s: %s", tc->name, err.message);
    c->n_in = tc->n_inputs;
    c->n_out = tc->n_outputs;
    cr_assert(c->n_in <= MAX_IO && c->n_out <= MAX_IO);
    for (size_t i = 0; i < c->n_in; i++)
      cr_assert_eq(mxt_onnx_node_load_pb(tc, false, i, &c->in[i], NULL, &err), MX_OK, "%s", err.message);
    for (size_t i = 0; i < c->n_out; i++)
      cr_assert_eq(mxt_onnx_node_load_pb(tc, true, i, &c->expected[i], NULL, &err), MX_OK, "%s", err.message);
    cr_assert_eq(mx_reference_run(g, c->in, c->n_in, c->ref, c->n_out, &err), MX_OK, "%s: reference: %s",
                 tc->name, err.message);
    char why[300];
    if (mxt_holds_strings(g, why, sizeof why)) {
      fprintf(stderr, "%s: skipped (%s; strings are host only)\n", tc->name, why);
      strings++;
      mx_graph_destroy(g);
      release_case(c);
      free(c);
      continue;
    }
    bool ctl = mxt_needs_control(g, why, sizeof why);
    mx_dyn_options o;
    mx__dyn_options_init(&o);
    o.max_streams = 2;
    int r = run_dynamic(g, cpu, &o, c, tc->name);
    passed += r == RUN_OK;
    count_run(r, ctl, &failed, &control);
    if (r == RUN_REFUSED && ctl) fprintf(stderr, "%s: skipped (%s)\n", tc->name, why);
    mx_graph_destroy(g);

    /* Symbolic variant: only where inference accepts symbolic input dims. */
    cr_assert_eq(mx_onnx_load_file(tc->model, &g, &err), MX_OK);
    symbolize_inputs(g);
    if (mx_graph_infer(g) == MX_OK) {
      char what[300];
      snprintf(what, sizeof what, "%s (symbolic inputs)", tc->name);
      sym_run++;
      mx__dyn_options_init(&o);
      count_run(run_dynamic(g, inl, &o, c, what), ctl, &sym_failed, &control);
      /* Host kernels instead of evaluation, copies instead of aliases, 4 streams. */
      snprintf(what, sizeof what, "%s (symbolic inputs, host kernels, no aliasing)", tc->name);
      o.eval_ops = false;
      o.alias_ops = false;
      o.max_streams = 4;
      count_run(run_dynamic(g, cpu, &o, c, what), ctl, &sym_failed, &control);
    } else {
      sym_skipped++;
    }
    mx_graph_destroy(g);
    release_case(c);
    free(c);
  }
  fprintf(
      stderr,
      "dynamic conformance: %zu passed, %zu failed; symbolic inputs: %zu run, %zu failed, %zu not "
      "inferable; %zu runs skipped (control flow or sequences refused by the executor); %zu models skipped "
      "(string tensors)\n",
      passed, failed, sym_run, sym_failed, sym_skipped, control, strings);
  fprintf(stderr,
          "dynamic conformance plans: %zu ops: %zu device, %zu host, %zu evaluated, %zu aliased, %zu "
          "inferred at run time, %zu data-dependent\n",
          totals.ops, totals.device_ops, totals.host_ops, totals.eval_ops, totals.alias_ops, totals.infer_ops,
          totals.data_dependent_ops);
  cr_expect_eq(failed, 0, "%zu of %zu models differ", failed, n);
  cr_expect_eq(sym_failed, 0, "%zu of %zu symbolic-input models differ", sym_failed, sym_run);
  mx_device_destroy(cpu);
  mx_device_destroy(inl);
  mxt_onnx_node_cases_free(cases, n);
  dyn_check_leaks();
}
