/* Running the `mixrt` program from tests (see cli_run.h). */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/cli_run.h"

bool mxt_cli_available(void) { return access(MXT_MIXRT_BIN, X_OK) == 0; }

static int run(char *buf, size_t cap, const char *args, bool with_stderr) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "%s %s%s", MXT_MIXRT_BIN, args, with_stderr ? " 2>&1" : "");
  FILE *p = popen(cmd, "r");
  if (!p) {
    snprintf(buf, cap, "cannot start %s", cmd);
    return -1;
  }
  size_t n = fread(buf, 1, cap - 1, p);
  buf[n] = '\0';
  /* Drain what did not fit so the program never blocks on a full pipe. */
  char sink[4096];
  while (fread(sink, 1, sizeof sink, p) > 0) {
  }
  int status = pclose(p);
  if (!WIFEXITED(status)) {
    snprintf(buf, cap, "%s did not exit normally (status %d)", cmd, status);
    return -1;
  }
  return WEXITSTATUS(status);
}

int mxt_cli_run(char *buf, size_t cap, const char *args) { return run(buf, cap, args, true); }

int mxt_cli_run_stdout(char *buf, size_t cap, const char *args) { return run(buf, cap, args, false); }

void mxt_make_work_dir(const char *name) {
  char path[1024];
  mkdir(MIXRT_BINARY_DIR "/tests", 0755);
  snprintf(path, sizeof path, "%s/tests/%s", MIXRT_BINARY_DIR, name);
  mkdir(path, 0755);
}
