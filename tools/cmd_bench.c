/* `mixrt bench SUITE`: benchmarks users run on their own machine, printing JSON. */
#include <string.h>

#include "bench/llm/llm.h"
#include "tools/bench.h"
#include "tools/cmd_bench_models.h"
#include "tools/commands.h"

void mx_cmd_bench_help(FILE *out) {
  fprintf(out,
          "usage: mixrt bench scheduler [--graph chain|wide|layered|random] [--nodes N] [--repeat N]\n"
          "                             [--executor sequential|topological|multi-thread] [--threads N]\n"
          "       mixrt bench llm [options]   (mixrt bench llm --help lists them)\n"
          "       mixrt bench models [options]   (below)\n\n"
          "scheduler: builds execution graphs of empty kernels (default 10000 nodes) shaped as a chain,\n"
          "  one node fanning out to all others (wide), layers of 16 nodes reading two nodes of the\n"
          "  layer before (layered), or a random DAG (3 inputs per node), runs each with every executor\n"
          "  (default: all shapes, all executors; --repeat runs each, default 21) and prints the median\n"
          "  nanoseconds per kernel as JSON. --threads sizes the multi-thread pool (default: one per\n"
          "  core).\n\n");
  mx_bench_llm_help(out);
  fprintf(out, "\n");
  mx_cmd_bench_models_help(out);
}

int mx_cmd_bench(int argc, char **argv) {
  if (argc < 2) return mx_cli_usage_error("bench", "which benchmark? (scheduler, llm or models)");
  if (strcmp(argv[1], "scheduler") == 0) return mx_bench_scheduler(argc - 1, argv + 1);
  if (strcmp(argv[1], "llm") == 0) return mx_bench_llm(argc - 1, argv + 1);
  if (strcmp(argv[1], "models") == 0) return mx_cmd_bench_models(argc - 1, argv + 1);
  return mx_cli_usage_error("bench", "unknown benchmark '%s' (scheduler, llm or models)", argv[1]);
}
