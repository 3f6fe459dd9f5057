/* ONNX node-test runner (see conformance.h). Each test folder holds model.onnx and
 * test_data_set_0/{input,output}_i.pb, matched by position with the graph's inputs/outputs. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "graph/ir.h"
#include "mixrt/onnx.h"
#include "mixrt/reference.h"
#include "mixrt/sequence.h"
#include "tools/conformance.h"
#include "tools/conformance_by_op.h"

#define MAX_IO 64

typedef struct gap {
  char name[128];
  char reason[256];
} gap;

/* Reads "- `test_name`: reason" lines of a known-gaps file. */
static size_t load_gaps(const char *path, gap **out) {
  *out = NULL;
  if (!path) return 0;
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  size_t n = 0, cap = 0;
  gap *gs = NULL;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "- `", 3) != 0) continue;
    char *name = line + 3, *end = strchr(name, '`');
    if (!end) continue;
    *end = '\0';
    char *reason = end + 1;
    while (*reason == ':' || *reason == ' ' || *reason == '-') reason++;
    reason[strcspn(reason, "\n")] = '\0';
    if (n == cap) {
      size_t ncap = cap ? cap * 2 : 16;
      gap *ng = realloc(gs, ncap * sizeof *ng);
      if (!ng) break;
      gs = ng;
      cap = ncap;
    }
    snprintf(gs[n].name, sizeof gs[n].name, "%s", name);
    snprintf(gs[n].reason, sizeof gs[n].reason, "%s", reason);
    n++;
  }
  fclose(f);
  *out = gs;
  return n;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Result of one test: 0 pass, 1 fail, 2 skip; message in why. */
/* Whether g (or a subgraph) draws random numbers: the Random* ops, Bernoulli, Multinomial, and
 * Dropout given a training_mode input (its mask). Their values cannot equal another generator's,
 * so, as upstream's runner does, such a test compares its outputs on element type and shape only. */
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
  if (a->dtype != e->dtype) {
    snprintf(why, cap, "element type %s, expected %s", mx_dtype_name(a->dtype), mx_dtype_name(e->dtype));
    return false;
  }
  bool same = a->rank == e->rank;
  for (int32_t d = 0; same && d < a->rank; d++) same = a->dims[d] == e->dims[d];
  if (!same)
    snprintf(why, cap, "shape differs from the expected one (rank %d, expected %d)", (int)a->rank,
             (int)e->rank);
  return same;
}

static int run_one(const mx_conf_options *opt, const char *test_dir, char *why, size_t why_size) {
  char path[4096];
  mx_error err = {0};
  mx_graph *g = NULL;
  mx_tensor inputs[MAX_IO], outputs[MAX_IO], expected[MAX_IO];
  size_t n_in = 0, n_out = 0, n_exp = 0;
  int result = 1;
  memset(inputs, 0, sizeof inputs);
  memset(outputs, 0, sizeof outputs);
  memset(expected, 0, sizeof expected);

  snprintf(path, sizeof path, "%s/model.onnx", test_dir);
  if (mx_onnx_load_file(path, &g, &err) != MX_OK) {
    snprintf(why, why_size, "import: %s", err.message);
    goto done;
  }
  n_in = mx_graph_input_count(g);
  n_out = mx_graph_output_count(g);
  if (n_in > MAX_IO || n_out > MAX_IO) {
    snprintf(why, why_size, "too many inputs or outputs");
    goto done;
  }
  for (size_t i = 0; i < n_in; i++) {
    snprintf(path, sizeof path, "%s/test_data_set_0/input_%zu.pb", test_dir, i);
    if (mx_value_load_pb(path, mx_graph_value_kind(g, mx_graph_input(g, i)), &inputs[i], &err) != MX_OK) {
      snprintf(why, why_size, "input %zu: %s", i, err.message);
      goto done;
    }
  }
  /* Output kinds (tensor, sequence, optional) come from inference; a graph that does not infer
   * fails in the run below with the reason. */
  MX_IGNORE_STATUS(mx_graph_infer(g));
  for (;; n_exp++) {
    snprintf(path, sizeof path, "%s/test_data_set_0/output_%zu.pb", test_dir, n_exp);
    FILE *probe = fopen(path, "rb");
    if (!probe) break;
    fclose(probe);
    mx_value_kind kind = n_exp < n_out ? mx_graph_value_kind(g, mx_graph_output(g, n_exp)) : MX_KIND_TENSOR;
    if (n_exp == MAX_IO || mx_value_load_pb(path, kind, &expected[n_exp], &err) != MX_OK) {
      snprintf(why, why_size, "expected output %zu: %s", n_exp, err.message);
      goto done;
    }
  }
  if (n_exp != n_out) {
    snprintf(why, why_size, "the model has %zu outputs but the test data has %zu", n_out, n_exp);
    goto done;
  }
  if (opt->run(opt->run_user, g, inputs, n_in, outputs, n_out, &err) != MX_OK) {
    snprintf(why, why_size, "%s: %s", opt->run_name, err.message);
    goto done;
  }
  bool random = draws_random_numbers(g);
  for (size_t i = 0; i < n_out; i++) {
    char detail[300];
    bool ok =
        random ? same_type_and_shape(&outputs[i], &expected[i], detail, sizeof detail)
               : mx_tensor_allclose(&outputs[i], &expected[i], opt->rtol, opt->atol, detail, sizeof detail);
    if (!ok) {
      snprintf(why, why_size, "output %zu ('%s'): %s", i, mx_graph_value_name(g, mx_graph_output(g, i)),
               detail);
      goto done;
    }
  }
  result = 0;
done:
  for (size_t i = 0; i < MAX_IO; i++) {
    mx_tensor_release(&inputs[i]);
    mx_tensor_release(&outputs[i]);
    mx_tensor_release(&expected[i]);
  }
  mx_graph_destroy(g);
  return result;
}

mx_status mx_conformance_run(const mx_conf_options *opt, FILE *out, mx_conf_totals *totals) {
  memset(totals, 0, sizeof *totals);
  DIR *d = opendir(opt->dir);
  if (!d) {
    fprintf(stderr, "mixrt conformance: cannot open '%s'\n", opt->dir);
    return MX_ERR_IO;
  }
  char **names = NULL;
  size_t n = 0, cap = 0;
  struct dirent *e;
  mx_status st = MX_OK;
  while ((e = readdir(d))) {
    if (strncmp(e->d_name, "test_", 5) != 0) continue;
    if (opt->filter && !strstr(e->d_name, opt->filter)) continue;
    if (n == cap) {
      size_t ncap = cap ? cap * 2 : 64;
      char **nn = realloc(names, ncap * sizeof *nn);
      if (!nn) {
        st = MX_ERR_OUT_OF_MEMORY;
        goto done;
      }
      names = nn;
      cap = ncap;
    }
    names[n] = strdup(e->d_name);
    if (!names[n]) {
      st = MX_ERR_OUT_OF_MEMORY;
      goto done;
    }
    n++;
  }
  qsort(names, n, sizeof *names, cmp_str);
  gap *gaps;
  size_t n_gaps = load_gaps(opt->gaps_file, &gaps);
  mx_conf_by_op *tally = opt->by_op ? mx_conf_by_op_create(opt->dir) : NULL;
  for (size_t i = 0; i < n; i++) {
    const char *skip = NULL;
    for (size_t k = 0; k < n_gaps && !skip; k++)
      if (strcmp(gaps[k].name, names[i]) == 0) skip = gaps[k].reason;
    if (skip) {
      fprintf(out, "SKIP %s (%s)\n", names[i], skip);
      totals->skipped++;
      mx_conf_by_op_add(tally, names[i], MX_CONF_SKIPPED);
      continue;
    }
    char test_dir[4096], why[1024] = "";
    snprintf(test_dir, sizeof test_dir, "%s/%s", opt->dir, names[i]);
    int r = run_one(opt, test_dir, why, sizeof why);
    mx_conf_by_op_add(tally, names[i], r == 0 ? MX_CONF_PASSED : MX_CONF_FAILED);
    if (r == 0) {
      totals->passed++;
      if (!opt->quiet) fprintf(out, "PASS %s\n", names[i]);
    } else {
      totals->failed++;
      fprintf(out, "FAIL %s: %s\n", names[i], why);
    }
    fflush(out);
  }
  free(gaps);
  mx_conf_by_op_print(tally, out);
  mx_conf_by_op_destroy(tally);
  fprintf(out, "%zu passed, %zu failed, %zu skipped\n", totals->passed, totals->failed, totals->skipped);
done:
  for (size_t i = 0; i < n; i++) free(names[i]);
  free(names);
  closedir(d);
  return st;
}
