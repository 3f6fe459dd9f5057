/* `mixrt`: the command-line front end. Dispatches to one command per file (cmd_*.c) and prints
 * the overall help. Exit codes: 0 ok, 1 runtime error, 2 usage error. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli.h"
#include "tools/commands.h"

bool mx_cli_is_help(const char *arg) { return arg && (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0); }

int mx_cli_usage_error(const char *cmd, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "mixrt %s: ", cmd);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n(see 'mixrt %s --help')\n", cmd);
  return MX_EXIT_USAGE;
}

int mx_cli_runtime_error(const char *cmd, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "mixrt %s: ", cmd);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  return MX_EXIT_RUNTIME;
}

bool mx_cli_parse_int(const char *text, int64_t *out) {
  if (!text || !*text) return false;
  char *end;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (errno || *end) return false;
  *out = v;
  return true;
}

const char *mx_cli_option_value(const char *cmd, int argc, char **argv, int *i) {
  if (*i + 1 >= argc) {
    mx_cli_usage_error(cmd, "option %s needs a value", argv[*i]);
    return NULL;
  }
  return argv[++*i];
}

static void print_help(FILE *out) {
  fprintf(out,
          "mixrt %s: a runtime for ML graphs whose shapes are partly static and partly dynamic\n\n"
          "usage: mixrt <command> [options]\n\ncommands:\n",
          MIXRT_VERSION_STRING);
  for (size_t i = 0; mx_cli_commands[i].name; i++)
    fprintf(out, "  %-12s %s\n", mx_cli_commands[i].name, mx_cli_commands[i].summary);
  fprintf(out,
          "\n'mixrt <command> --help' describes a command.\n"
          "exit codes: 0 ok, 1 runtime error, 2 usage error\n");
}

int main(int argc, char **argv) {
  if (argc < 2) {
    print_help(stderr);
    return MX_EXIT_USAGE;
  }
  if (mx_cli_is_help(argv[1]) || strcmp(argv[1], "help") == 0) {
    if (argc > 2 && strcmp(argv[1], "help") == 0) {
      for (size_t i = 0; mx_cli_commands[i].name; i++)
        if (strcmp(mx_cli_commands[i].name, argv[2]) == 0) {
          mx_cli_commands[i].help(stdout);
          return MX_EXIT_OK;
        }
    }
    print_help(stdout);
    return MX_EXIT_OK;
  }
  if (strcmp(argv[1], "--version") == 0) {
    printf("mixrt %s\n", MIXRT_VERSION_STRING);
    return MX_EXIT_OK;
  }
  for (size_t i = 0; mx_cli_commands[i].name; i++) {
    const mx_cli_command *c = &mx_cli_commands[i];
    if (strcmp(c->name, argv[1]) != 0) continue;
    for (int k = 2; k < argc; k++) {
      if (strcmp(argv[k], "--") == 0) break;
      if (mx_cli_is_help(argv[k])) {
        c->help(stdout);
        return MX_EXIT_OK;
      }
    }
    return c->run(argc - 1, argv + 1);
  }
  fprintf(stderr, "mixrt: unknown command '%s'\n\n", argv[1]);
  print_help(stderr);
  return MX_EXIT_USAGE;
}
