/* `mixrt kernels`: the execution-graph kernel registry (what Init/Main/DeInit graphs are made
 * of), and with --ops the op definitions and the CPU kernels behind them. */
#include <string.h>

#include "graph/ops/op.h"
#include "kernels/kernel.h"
#include "tools/commands.h"
#include "v2runtime/exe_registry.h"

void mx_cmd_kernels_help(FILE *out) {
  fprintf(out,
          "usage: mixrt kernels [--ops]\n\n"
          "Lists the execution-graph kernels (name, whether the multi-thread executor runs it\n"
          "serially, what it does). With --ops, lists every op definition instead, with the dtypes\n"
          "its CPU kernels accept.\n");
}

static void dtype_list(uint32_t mask, char *buf, size_t cap) {
  size_t n = 0;
  buf[0] = '\0';
  for (int code = 1; code <= MX_DTYPE_MAX_CODE; code++)
    if (mx_dtype_is_supported(code) && (mask & MX_KDT(code)))
      n += (size_t)snprintf(buf + n, n < cap ? cap - n : 0, "%s%s", n ? " " : "",
                            mx_dtype_name((mx_dtype)code));
}

int mx_cmd_kernels(int argc, char **argv) {
  bool ops = false;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--ops") == 0)
      ops = true;
    else
      return mx_cli_usage_error("kernels", "unknown option '%s'", argv[i]);
  }
  if (!ops) {
    uint16_t n = mx__exe_kernel_count();
    printf("%u execution-graph kernels:\n", n);
    for (uint16_t i = 0; i < n; i++) {
      const mx_exe_kernel_def *k = mx__exe_kernel_at(i);
      printf("  %-22s %-7s %s\n", k->name, (k->flags & MX_EXE_SERIAL) ? "serial" : "", k->summary);
    }
    return MX_EXIT_OK;
  }
  size_t n = mx__op_count();
  printf("%zu op definitions:\n", n);
  for (size_t i = 0; i < n; i++) {
    const mx_op_def *d = mx__op_at(i);
    uint32_t mask = 0;
    for (size_t k = 0; k < mx__kernel_count(); k++) {
      const mx_kernel_def *kd = mx__kernel_at(k);
      if (strcmp(kd->op, d->name) == 0) mask |= kd->dtypes;
    }
    char dts[512];
    dtype_list(mask, dts, sizeof dts);
    printf("  %-22s %-6s %s\n", d->name, d->domain && d->domain[0] ? d->domain : "",
           mask ? dts : "(no CPU kernel)");
  }
  return MX_EXIT_OK;
}
