/* The table of `mixrt` commands, in the order `mixrt --help` lists them. */
#include "tools/commands.h"

const mx_cli_command mx_cli_commands[] = {
    {"info", "build configuration, library versions and the machine's topology", mx_cmd_info,
     mx_cmd_info_help},
    {"inspect", "a model's inputs, outputs, ops and inferred shapes", mx_cmd_inspect, mx_cmd_inspect_help},
    {"run", "run a model (hybrid runtime) on .npy or random inputs: outputs, latency, time split", mx_cmd_run,
     mx_cmd_run_help},
    {"conformance", "run the ONNX node tests through the reference interpreter", mx_cmd_conformance,
     mx_cmd_conformance_help},
    {"partition", "split a model into KNOWN and UNKNOWN clusters and show why (text, DOT, JSON)",
     mx_cmd_partition, mx_cmd_partition_help},
    {"gen", "write a built-in model (llama decode step, mixture of experts, encoder) as ONNX", mx_cmd_gen,
     mx_cmd_gen_help},
    {"kernels", "the execution graph's exe kernels (with --ops: op definitions, op kernels)", mx_cmd_kernels,
     mx_cmd_kernels_help},
    {"bench",
     "benchmarks printing JSON (scheduler: executors; llm: decode step against peers; models: the zoo "
     "against ONNX Runtime and PyTorch)",
     mx_cmd_bench, mx_cmd_bench_help},
    {"compile", "compile any model into an .mxm file (partitioned, static models planned, lowered)",
     mx_cmd_compile, mx_cmd_compile_help},
    {"demo", "the main job on a built-in model", mx_cmd_demo, mx_cmd_demo_help},
    {"shard", "split a transformer for N-way tensor parallelism: one ONNX file per rank and a manifest",
     mx_cmd_shard, mx_cmd_shard_help},
    {NULL, NULL, NULL, NULL},
};
