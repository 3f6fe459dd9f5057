/* Command-line options shared by the commands that create a session (run, compile): executor,
 * streams, partitioning, device, frozen inputs. */
#ifndef MIXRT_TOOLS_SESSION_OPTS_H
#define MIXRT_TOOLS_SESSION_OPTS_H

#include <stdbool.h>

#include "mixrt/session.h"

#define MX_CLI_MAX_FROZEN 64

typedef struct mx_cli_session_opts {
  mx_session_options o;                  /* filled as options are parsed */
  const char *frozen[MX_CLI_MAX_FROZEN]; /* --frozen NAME (borrowed from argv) */
} mx_cli_session_opts;

/* Defaults (one stream, sequential executor, CPU device, static_min_ops 4). */
void mx_cli_session_opts_init(mx_cli_session_opts *so);

/* If argv[*i] is a session option, consumes it (and its value) and returns 1; returns 0 when it
 * is not one, and MX_EXIT_USAGE + 100 after printing a usage error. */
int mx_cli_session_option(const char *cmd, mx_cli_session_opts *so, int argc, char **argv, int *i);

/* The help lines of these options. */
extern const char mx_cli_session_opts_help[];

#endif /* MIXRT_TOOLS_SESSION_OPTS_H */
