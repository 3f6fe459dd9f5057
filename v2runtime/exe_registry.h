/* The exe-graph kernel registry: name -> run function (+ flags, optional trace printer).
 * `mixrt kernels` lists it. Kernels are referred to by their index in this table; the index of a
 * name is stable within one build, and serialized execution graphs store names, not indices. */
#ifndef MIXRT_V2RUNTIME_EXE_REGISTRY_H
#define MIXRT_V2RUNTIME_EXE_REGISTRY_H

#include <stddef.h>

#include "v2runtime/exe_graph.h"

/* Writes a one-line description of what node n did in this run (for traces); may be NULL. */
typedef void (*mx_exe_trace_fn)(const mx_exe_run *run, const mx_exe_node *n, char *buf, size_t cap);

typedef struct mx_exe_kernel_def {
  const char *name; /* e.g. "StaticModelExecute" */
  mx_exe_fn fn;
  uint16_t flags;        /* MX_EXE_* */
  mx_exe_trace_fn trace; /* optional */
  const char *summary;   /* one line for `mixrt kernels` */
} mx_exe_kernel_def;

/* Kernel groups, one per file. */
typedef struct mx_exe_kernel_group {
  const mx_exe_kernel_def *defs;
  size_t n;
} mx_exe_kernel_group;

extern const mx_exe_kernel_group mx__exe_kernels_basic;
extern const mx_exe_kernel_group mx__exe_kernels_model;

uint16_t mx__exe_kernel_count(void);
const mx_exe_kernel_def *mx__exe_kernel_at(uint16_t index);
/* Index of the kernel called `name`, or -1. */
int mx__exe_kernel_find(const char *name);

#endif /* MIXRT_V2RUNTIME_EXE_REGISTRY_H */
