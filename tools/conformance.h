/* The ONNX node-test runner behind `mixrt conformance`: walks a folder in the onnx backend
 * node-test layout, runs each model with an executor and compares with the expected outputs by
 * the onnx rules. The executor is a callback so every mixrt execution path can be checked on
 * the same data. */
#ifndef MIXRT_TOOLS_CONFORMANCE_H
#define MIXRT_TOOLS_CONFORMANCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "mixrt/graph.h"
#include "mixrt/tensor.h"

/* Runs graph g on inputs; fills outputs (host tensors the runner releases). */
typedef mx_status (*mx_conf_run_fn)(void *user, mx_graph *g, const mx_tensor *inputs, size_t n_inputs,
                                    mx_tensor *outputs, size_t n_outputs, mx_error *err);

typedef struct mx_conf_options {
  const char *dir;       /* folder of test_* folders */
  const char *filter;    /* run only tests whose name contains this (NULL: all) */
  const char *gaps_file; /* KNOWN_GAPS.md: tests listed there are skipped with its reason */
  double rtol, atol;     /* comparison tolerances */
  bool quiet;            /* omit PASS lines (FAIL and SKIP always print) */
  bool by_op;            /* print the per-operator summary before the totals line */
  mx_conf_run_fn run;    /* the executor under test */
  void *run_user;
  const char *run_name; /* "reference", ... (for messages) */
} mx_conf_options;

typedef struct mx_conf_totals {
  size_t passed, failed, skipped;
} mx_conf_totals;

/* Runs every test; prints one line per test and the totals line to out. Returns MX_OK when the
 * folder could be read (whatever the test results), else an error with a message on stderr. */
MX_MUST_USE mx_status mx_conformance_run(const mx_conf_options *opt, FILE *out, mx_conf_totals *totals);

#endif /* MIXRT_TOOLS_CONFORMANCE_H */
