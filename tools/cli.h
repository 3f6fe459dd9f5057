/* Shared pieces of the `mixrt` command-line program: the command table, option helpers and
 * exit codes (0 ok, 1 runtime error, 2 usage error). Each command lives in its own cmd_*.c. */
#ifndef MIXRT_TOOLS_CLI_H
#define MIXRT_TOOLS_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

enum { MX_EXIT_OK = 0, MX_EXIT_RUNTIME = 1, MX_EXIT_USAGE = 2 };

typedef struct mx_cli_command {
  const char *name;                  /* word after `mixrt` */
  const char *summary;               /* one line for `mixrt --help` */
  int (*run)(int argc, char **argv); /* argv[0] is the command name */
  void (*help)(FILE *out);           /* full help text */
} mx_cli_command;

/* True when arg is -h or --help. */
bool mx_cli_is_help(const char *arg);
/* Prints "mixrt <cmd>: <message>" to stderr and returns MX_EXIT_USAGE. */
int mx_cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints "mixrt <cmd>: <message>" to stderr and returns MX_EXIT_RUNTIME. */
int mx_cli_runtime_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Parses a whole decimal int64; false when the text is not one. */
bool mx_cli_parse_int(const char *text, int64_t *out);
/* Takes the value of option argv[*i] (advancing *i); NULL (after a usage message) if missing. */
const char *mx_cli_option_value(const char *cmd, int argc, char **argv, int *i);

#endif /* MIXRT_TOOLS_CLI_H */
