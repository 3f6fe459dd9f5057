/* `mixrt run M.mxm`: running a compiled static model (.mxm) on the CPU device, with the same
 * inputs, output printing and latency report as the reference path of `mixrt run`. */
#ifndef MIXRT_TOOLS_RUN_MXM_H
#define MIXRT_TOOLS_RUN_MXM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tools/run_inputs.h"

/* What `mixrt run` parsed from its command line (everything borrowed). */
typedef struct mx_run_mxm_args {
  const char *model;          /* the .mxm file */
  const mx_named_file *files; /* --input NAME=FILE.npy */
  size_t n_files;
  bool random;         /* --random */
  uint64_t seed;       /* --seed */
  int64_t steps;       /* --steps (>= 1) */
  const char *out_dir; /* --output-dir or NULL */
  size_t n_bindings;   /* --shape options given (refused: shapes are fixed) */
} mx_run_mxm_args;

/* True when path names an .mxm file (by its extension). */
bool mx_cli_is_mxm(const char *path);

/* Runs the .mxm model; returns an exit code (errors printed to stderr). */
int mx_cli_run_mxm(const mx_run_mxm_args *a);

#endif /* MIXRT_TOOLS_RUN_MXM_H */
