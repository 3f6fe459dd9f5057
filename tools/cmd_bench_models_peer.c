/* The runner processes of `mixrt bench models`: started with pipes on their stdin and stdout,
 * asked one request line at a time, each answered by one reply line (`ok ...` or
 * `err MESSAGE`). The same protocol drives bench/peers/ort_runner.js (ONNX Runtime),
 * bench/peers/torch_runner.py (PyTorch eager) and `mixrt bench models --serve` (mixrt). */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tools/cmd_bench_models.h"

void mx__bm_peer_stop(mx_bm_peer *p) {
  if (p->to) {
    fputs("quit\n", p->to);
    fclose(p->to);
  }
  if (p->from) fclose(p->from);
  if (p->pid > 0) waitpid(p->pid, NULL, 0);
  free(p->line);
  p->to = p->from = NULL;
  p->line = NULL;
  p->line_cap = 0;
  p->pid = -1;
}

void mx__bm_peer_start(mx_bm_peer *p, char *const argv[]) {
  int in[2] = {-1, -1}, out[2] = {-1, -1}; /* pipe ends not yet handed to a FILE or the child */
  memset(p, 0, sizeof *p);
  p->pid = -1;
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) {
    snprintf(p->reason, sizeof p->reason, "pipe: %s", strerror(errno));
    goto fail;
  }
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(in[0], STDIN_FILENO);
    dup2(out[1], STDOUT_FILENO);
    execvp(argv[0], argv);
    /* The parent reads this as the reason the runner did not start. */
    printf("err cannot run %s: %s\n", argv[0], strerror(errno));
    fflush(stdout);
    _exit(127);
  }
  if (pid < 0) {
    snprintf(p->reason, sizeof p->reason, "fork: %s", strerror(errno));
    goto fail;
  }
  p->pid = pid;
  close(in[0]);
  close(out[1]);
  in[0] = out[1] = -1;
  p->to = fdopen(in[1], "w");
  if (p->to) in[1] = -1;
  p->from = p->to ? fdopen(out[0], "r") : NULL;
  if (p->from) out[0] = -1;
  if (!p->to || !p->from) {
    snprintf(p->reason, sizeof p->reason, "fdopen: %s", strerror(errno));
    goto fail;
  }
  ssize_t got = getline(&p->line, &p->line_cap, p->from);
  if (got < 0 || strncmp(p->line, "ready ", 6) != 0) {
    if (got < 0 && p->line) p->line[0] = '\0';
    if (p->line) p->line[strcspn(p->line, "\r\n")] = '\0';
    const char *said = p->line && strncmp(p->line, "err ", 4) == 0 ? p->line + 4 : p->line;
    snprintf(p->reason, sizeof p->reason, "%s did not start%s%s", argv[0], said && *said ? ": " : "",
             said ? said : "");
    goto fail;
  }
  p->line[strcspn(p->line, "\r\n")] = '\0';
  snprintf(p->version, sizeof p->version, "%s", p->line + 6);
  return;
fail:
  /* Raw pipe ends first, so a started child sees end-of-file and exits before it is waited for. */
  for (int k = 0; k < 2; k++) {
    if (in[k] >= 0) close(in[k]);
    if (out[k] >= 0) close(out[k]);
  }
  char reason[sizeof p->reason];
  memcpy(reason, p->reason, sizeof reason);
  mx__bm_peer_stop(p);
  memcpy(p->reason, reason, sizeof reason);
}

bool mx__bm_peer_call(mx_bm_peer *p, const char *fmt, ...) {
  if (p->pid < 0 || !p->to) return false;
  va_list ap;
  va_start(ap, fmt);
  int w = vfprintf(p->to, fmt, ap);
  va_end(ap);
  if (w < 0 || fputc('\n', p->to) == EOF || fflush(p->to) != 0 ||
      getline(&p->line, &p->line_cap, p->from) < 0) {
    free(p->line);
    p->line = strdup("err the runner process stopped answering");
    p->line_cap = p->line ? strlen(p->line) + 1 : 0;
    return false;
  }
  p->line[strcspn(p->line, "\r\n")] = '\0';
  return strncmp(p->line, "ok", 2) == 0 && (p->line[2] == '\0' || p->line[2] == ' ');
}

const char *mx__bm_peer_rest(const mx_bm_peer *p) {
  const char *sp = p->line ? strchr(p->line, ' ') : NULL;
  return sp ? sp + 1 : "";
}
