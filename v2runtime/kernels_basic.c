/* Basic exe-graph kernels that do no device work: Noop (the empty kernel of the scheduler
 * benchmark) and Touch (reads its inputs, fails if one has not been written yet, writes each
 * output as 1 + the largest input: a dependency checker for executor tests). */
#include <stdio.h>

#include "common/error.h"
#include "v2runtime/exe_registry.h"

static mx_status run_noop(mx_exe_run *run, const mx_exe_node *n) {
  (void)run;
  (void)n;
  return MX_OK;
}

static mx_status run_touch(mx_exe_run *run, const mx_exe_node *n) {
  int64_t top = 0;
  for (uint16_t i = 0; i < n->n_in; i++) {
    int64_t v = __atomic_load_n(&run->values[n->io[i]].i, __ATOMIC_ACQUIRE);
    if (v <= 0)
      return mx__fail(run->err, MX_ERR_INTERNAL, "Touch: input value %u read before it was written",
                      n->io[i]);
    if (v > top) top = v;
  }
  for (uint16_t k = 0; k < n->n_out; k++)
    __atomic_store_n(&run->values[n->io[n->n_in + k]].i, top + 1, __ATOMIC_RELEASE);
  return MX_OK;
}

static void trace_touch(const mx_exe_run *run, const mx_exe_node *n, char *buf, size_t cap) {
  snprintf(buf, cap, "%u inputs, %u outputs", n->n_in, n->n_out);
  (void)run;
}

static const mx_exe_kernel_def defs[] = {
    {"Noop", run_noop, 0, NULL, "does nothing (scheduler benchmarks)"},
    {"Touch", run_touch, 0, trace_touch,
     "checks its inputs were written, writes its outputs (executor tests)"},
};

const mx_exe_kernel_group mx__exe_kernels_basic = {defs, sizeof defs / sizeof defs[0]};
