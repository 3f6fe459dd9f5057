/* Building the inputs of a run from the command line: .npy files by name, or seeded random
 * tensors whose shapes come from the declared input shapes and --shape bindings. */
#ifndef MIXRT_TOOLS_RUN_INPUTS_H
#define MIXRT_TOOLS_RUN_INPUTS_H

#include <stdint.h>

#include "mixrt/graph.h"
#include "mixrt/session.h"
#include "tools/inspect.h"

typedef struct mx_named_file {
  const char *name; /* graph input name (borrowed) */
  const char *path; /* .npy file (borrowed) */
} mx_named_file;

/* Fills inputs[0..graph inputs) (host tensors the caller releases) from files, or randomly
 * (seeded) for inputs without a file when `random` is set. Errors go to stderr prefixed with cmd;
 * returns an exit code. */
int mx_cli_make_inputs(const char *cmd, mx_graph *g, const mx_named_file *files, size_t n_files, bool random,
                       uint64_t seed, const mx_symbol_binding *bindings, size_t n_bindings,
                       mx_tensor *inputs);

/* Before the random inputs are made: refuses (an exit code, the message on stderr) inputs whose
 * step would exceed the session's memory limit (mx_session_check_memory), so a huge --shape
 * value fails at once instead of filling memory. MX_EXIT_OK when s is NULL or random unset. */
int mx_cli_check_input_memory(const char *cmd, mx_session *s, mx_graph *g, const mx_named_file *files,
                              size_t n_files, bool random, const mx_symbol_binding *bindings,
                              size_t n_bindings);

/* Prints "name dtype [dims] values..." (the first few values) for a tensor. */
void mx_cli_print_tensor(FILE *out, const char *name, const mx_tensor *t);

#endif /* MIXRT_TOOLS_RUN_INPUTS_H */
