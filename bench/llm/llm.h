/* `mixrt bench llm`: decode-step latency of the Llama-style decode model for mixrt's systems and
 * ONNX Runtime (what it measures and how: bench/llm/measure.c). The command-line program
 * (tools/cmd_bench.c) dispatches to these two entry points; the rest of bench/llm/ is internal
 * (bench/llm/llm_impl.h). */
#ifndef MIXRT_BENCH_LLM_LLM_H
#define MIXRT_BENCH_LLM_LLM_H

#include <stdio.h>

/* `mixrt bench llm [...]` (argv[0] is "llm"): prints one JSON document on stdout and returns
 * the exit code (0 measured, 1 runtime error, 2 usage error). */
int mx_bench_llm(int argc, char **argv);
/* Prints the help of `mixrt bench llm`. */
void mx_bench_llm_help(FILE *out);

#endif /* MIXRT_BENCH_LLM_LLM_H */
