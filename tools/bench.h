/* `mixrt bench` subcommands: each prints one JSON object on stdout. */
#ifndef MIXRT_TOOLS_BENCH_H
#define MIXRT_TOOLS_BENCH_H

#include "tools/cli.h"

/* `mixrt bench scheduler [...]` (argv[0] is "scheduler"). */
int mx_bench_scheduler(int argc, char **argv);

#endif /* MIXRT_TOOLS_BENCH_H */
