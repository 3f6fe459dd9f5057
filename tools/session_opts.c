/* Session options on the command line (see session_opts.h). */
#include <string.h>

#include "tools/cli.h"
#include "tools/fuse_log.h"
#include "tools/session_opts.h"

const char mx_cli_session_opts_help[] =
    "  --executor seq|topo|mt  execution-graph executor: sequential priority order (default),\n"
    "                          topological ready queue, or multi-thread worker pool\n"
    "  --streams K             streams for static models and dynamic ops (default 1)\n"
    "  --static-min-ops N      known clusters with fewer ops run dynamically (default 4; 0 keeps\n"
    "                          every known cluster static; -1 runs everything dynamically)\n"
    "  --device cpu|inline     the CPU device (worker thread per stream, default) or the inline\n"
    "                          device (work runs in the calling thread)\n"
    "  --frozen NAME           graph input NAME never changes address after the first step\n"
    "  --passes P              rewrite rules (fusion): none, default (default), all or\n"
    "                          RULE,-RULE,... (--passes list names them)\n"
    "  --gear SYM=V[,SYM=V]    a specialization compiled at load for the dynamic partitions whose\n"
    "                          symbols it binds (repeatable: --gear seq=1 --gear seq=128)\n"
    "  --spec-cache N          specializations kept per dynamic partition (default 8; 0: none)\n"
    "  --spec-churn N          new values of one symbol a partition compiles for before it stays\n"
    "                          dynamic for it (default 4; 0: no limit)\n"
    "  --threads N             intra-op threads: large kernels (Conv, MatMul, Gemm) split across\n"
    "                          N threads (default 1)\n";

/* The --gear values (one command line per process). */
#define MAX_GEARS 32
static const char *gears[MAX_GEARS];

void mx_cli_session_opts_init(mx_cli_session_opts *so) {
  memset(so, 0, sizeof *so);
  mx_session_options_init(&so->o);
  so->o.frozen_inputs = so->frozen;
}

int mx_cli_session_option(const char *cmd, mx_cli_session_opts *so, int argc, char **argv, int *i) {
  const char *a = argv[*i];
  if (strcmp(a, "--executor") == 0) {
    const char *v = mx_cli_option_value(cmd, argc, argv, i);
    if (!v) return MX_EXIT_USAGE + 100;
    if (strcmp(v, "seq") == 0 || strcmp(v, "sequential") == 0)
      so->o.executor = MX_EXECUTOR_SEQUENTIAL;
    else if (strcmp(v, "topo") == 0 || strcmp(v, "topological") == 0)
      so->o.executor = MX_EXECUTOR_TOPOLOGICAL;
    else if (strcmp(v, "mt") == 0 || strcmp(v, "multi-thread") == 0)
      so->o.executor = MX_EXECUTOR_MULTI_THREAD;
    else
      return mx_cli_usage_error(cmd, "--executor takes seq, topo or mt, not '%s'", v) + 100;
    return 1;
  }
  if (strcmp(a, "--device") == 0) {
    const char *v = mx_cli_option_value(cmd, argc, argv, i);
    if (!v) return MX_EXIT_USAGE + 100;
    if (strcmp(v, "cpu") == 0)
      so->o.device_options.kind = MX_DEVICE_CPU;
    else if (strcmp(v, "inline") == 0)
      so->o.device_options.kind = MX_DEVICE_INLINE;
    else
      return mx_cli_usage_error(cmd, "--device takes cpu or inline, not '%s'", v) + 100;
    return 1;
  }
  if (strcmp(a, "--streams") == 0 || strcmp(a, "--static-min-ops") == 0) {
    const char *v = mx_cli_option_value(cmd, argc, argv, i);
    int64_t x;
    if (!v) return MX_EXIT_USAGE + 100;
    bool streams = a[3] == 't' && a[4] == 'r';
    if (!mx_cli_parse_int(v, &x) || (streams ? (x < 1 || x > 16) : (x < -1 || x > 1000000)))
      return mx_cli_usage_error(cmd, "%s needs %s, not '%s'", a,
                                streams ? "a number from 1 to 16" : "-1 or more", v) +
             100;
    if (streams)
      so->o.streams = (uint32_t)x;
    else
      so->o.static_min_ops = x;
    return 1;
  }
  if (strcmp(a, "--passes") == 0) {
    const char *v = mx_cli_option_value(cmd, argc, argv, i);
    if (!v) return MX_EXIT_USAGE + 100;
    int rc = mx_cli_check_passes(cmd, v);
    if (rc) return rc + 100;
    so->o.passes = v;
    return 1;
  }
  if (strcmp(a, "--gear") == 0) {
    const char *v = mx_cli_option_value(cmd, argc, argv, i);
    if (!v) return MX_EXIT_USAGE + 100;
    if (!strchr(v, '='))
      return mx_cli_usage_error(cmd, "--gear needs SYMBOL=VALUE[,SYMBOL=VALUE...], not '%s'", v) + 100;
    if (so->o.n_gears == MAX_GEARS)
      return mx_cli_usage_error(cmd, "at most %d --gear options", MAX_GEARS) + 100;
    gears[so->o.n_gears++] = v;
    so->o.gears = gears;
    return 1;
  }
  if (strcmp(a, "--threads") == 0) {
    const char *v = mx_cli_option_value(cmd, argc, argv, i);
    int64_t x;
    if (!v) return MX_EXIT_USAGE + 100;
    if (!mx_cli_parse_int(v, &x) || x < 1 || x > 64)
      return mx_cli_usage_error(cmd, "--threads needs a number from 1 to 64, not '%s'", v) + 100;
    so->o.intra_op_threads = (uint32_t)x;
    return 1;
  }
  if (strcmp(a, "--spec-cache") == 0 || strcmp(a, "--spec-churn") == 0) {
    const char *v = mx_cli_option_value(cmd, argc, argv, i);
    int64_t x;
    if (!v) return MX_EXIT_USAGE + 100;
    if (!mx_cli_parse_int(v, &x) || x < 0 || x > 1000000)
      return mx_cli_usage_error(cmd, "%s needs a number from 0 to 1000000, not '%s'", a, v) + 100;
    if (strcmp(a, "--spec-cache") == 0)
      so->o.spec_cache_size = (uint32_t)x;
    else
      so->o.spec_churn_limit = (uint32_t)x;
    return 1;
  }
  if (strcmp(a, "--frozen") == 0) {
    const char *v = mx_cli_option_value(cmd, argc, argv, i);
    if (!v) return MX_EXIT_USAGE + 100;
    if (so->o.n_frozen_inputs == MX_CLI_MAX_FROZEN)
      return mx_cli_usage_error(cmd, "at most %d --frozen options", MX_CLI_MAX_FROZEN) + 100;
    so->frozen[so->o.n_frozen_inputs++] = v;
    return 1;
  }
  return 0;
}
