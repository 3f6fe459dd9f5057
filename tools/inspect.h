/* Printing a model summary (shared by `mixrt inspect` and `mixrt demo`). */
#ifndef MIXRT_TOOLS_INSPECT_H
#define MIXRT_TOOLS_INSPECT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "mixrt/graph.h"

typedef struct mx_symbol_binding {
  const char *name; /* symbol name (borrowed from argv) */
  int64_t value;
} mx_symbol_binding;

/* Parses "NAME=VALUE" (VALUE a non-negative integer); false on bad text. */
bool mx_cli_parse_binding(const char *text, mx_symbol_binding *out, char *name_buf, size_t name_cap);

/* Prints the values ids of g (its inputs or outputs): name, dtype and shape, one per line, or as
 * comma-separated JSON objects. */
void mx_cli_print_io(FILE *out, const mx_graph *g, const mx_value_id *ids, size_t n, bool json);
/* Prints the summary of g (already imported): inputs, outputs, opset, op histogram; binds the
 * given symbols; runs inference, folding and dead-node removal; prints the value counts and
 * pass figures. `json` selects one JSON object instead of text. Returns an exit code. */
int mx_cli_inspect_graph(const char *cmd, mx_graph *g, const char *passes, const mx_symbol_binding *bindings,
                         size_t n_bindings, bool json, FILE *out);

#endif /* MIXRT_TOOLS_INSPECT_H */
