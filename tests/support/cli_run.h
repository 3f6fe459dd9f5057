/* Test helper: running the `mixrt` program of the same build, the way users meet it. Plain C,
 * no Criterion (compiled into every test executable). */
#ifndef MIXRT_TESTS_SUPPORT_CLI_RUN_H
#define MIXRT_TESTS_SUPPORT_CLI_RUN_H

#include <stdbool.h>
#include <stddef.h>

/* The program: <build>/tools/mixrt. */
#define MXT_MIXRT_BIN MIXRT_BINARY_DIR "/tools/mixrt"

/* True when the program has been built. */
bool mxt_cli_available(void);

/* Runs `mixrt <args>` through the shell with stderr folded into stdout. The output goes to
 * buf (NUL-terminated, truncated to cap - 1 bytes). Returns the exit code, or -1 when the
 * program could not be started or did not exit normally (buf then says why). */
int mxt_cli_run(char *buf, size_t cap, const char *args);
/* The same, capturing stdout only (stderr goes to the test's own stderr). */
int mxt_cli_run_stdout(char *buf, size_t cap, const char *args);

/* Creates <build>/tests and <build>/tests/<name> if missing. */
void mxt_make_work_dir(const char *name);

#endif /* MIXRT_TESTS_SUPPORT_CLI_RUN_H */
