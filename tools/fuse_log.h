/* The Stage 2 compile log (mx_fuse_report) as text or JSON, and the --passes option of the
 * commands that compile or import models (run, compile, partition, inspect). */
#ifndef MIXRT_TOOLS_FUSE_LOG_H
#define MIXRT_TOOLS_FUSE_LOG_H

#include <stdbool.h>
#include <stdio.h>

#include "mixrt/graph.h"

/* Checks a --passes value (none, default, all, RULE, -RULE, comma-separated; "list" prints the
 * rules and is refused as a value). Returns 0 when valid, else a usage exit code after saying why. */
int mx_cli_check_passes(const char *cmd, const char *passes);

/* Prints the rules and what they do ("--passes list"). */
void mx_cli_print_rules(FILE *out);

/* Text: one line per rule that ran ("fuse: RULE xN"), the op counts before and after and the
 * op types whose counts changed. */
void mx_cli_print_fuse_report(FILE *out, const mx_fuse_report *r);
/* The same as one JSON object (no newline). */
void mx_cli_print_fuse_report_json(FILE *out, const mx_fuse_report *r);

#endif /* MIXRT_TOOLS_FUSE_LOG_H */
