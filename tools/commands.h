/* The table of `mixrt` commands. Adding a command: write cmd_<name>.c defining its run and help
 * functions, declare them here, and add a row to commands.c. */
#ifndef MIXRT_TOOLS_COMMANDS_H
#define MIXRT_TOOLS_COMMANDS_H

#include "tools/cli.h"

extern const mx_cli_command mx_cli_commands[]; /* terminated by a row with name NULL */

int mx_cmd_info(int argc, char **argv);
void mx_cmd_info_help(FILE *out);
int mx_cmd_inspect(int argc, char **argv);
void mx_cmd_inspect_help(FILE *out);
int mx_cmd_run(int argc, char **argv);
void mx_cmd_run_help(FILE *out);
int mx_cmd_kernels(int argc, char **argv);
void mx_cmd_kernels_help(FILE *out);
int mx_cmd_bench(int argc, char **argv);
void mx_cmd_bench_help(FILE *out);
int mx_cmd_demo(int argc, char **argv);
void mx_cmd_demo_help(FILE *out);
int mx_cmd_conformance(int argc, char **argv);
void mx_cmd_conformance_help(FILE *out);
int mx_cmd_compile(int argc, char **argv);
void mx_cmd_compile_help(FILE *out);
int mx_cmd_partition(int argc, char **argv);
void mx_cmd_partition_help(FILE *out);
int mx_cmd_gen(int argc, char **argv);
void mx_cmd_gen_help(FILE *out);
int mx_cmd_shard(int argc, char **argv);
void mx_cmd_shard_help(FILE *out);

#endif /* MIXRT_TOOLS_COMMANDS_H */
