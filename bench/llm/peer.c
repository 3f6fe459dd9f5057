/* The ONNX Runtime peer of `mixrt bench llm`: a persistent Node process (bench/peers/
 * ort_runner.js, package onnxruntime-node installed by `make bench-deps`) spoken to over pipes,
 * one request line and one reply line at a time; tensors go through .npy files in the work
 * folder. Starting it, calling it, reading the times it replies with, and stopping it. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/llm/llm_impl.h"

bool mx__llm_peer_call(peer *p, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int w = vfprintf(p->to, fmt, ap);
  va_end(ap);
  if (w < 0 || fputc('\n', p->to) == EOF || fflush(p->to) != 0 ||
      getline(&p->line, &p->line_cap, p->from) < 0) {
    free(p->line);
    p->line = strdup("err the ONNX Runtime process stopped answering");
    p->line_cap = p->line ? strlen(p->line) + 1 : 0;
    return false;
  }
  p->line[strcspn(p->line, "\r\n")] = '\0';
  return strncmp(p->line, "ok", 2) == 0 && (p->line[2] == '\0' || p->line[2] == ' ');
}

/* Text after the reply's first word ("" when none). */
static const char *reply_rest(const peer *p) {
  const char *sp = p->line ? strchr(p->line, ' ') : NULL;
  return sp ? sp + 1 : "";
}

void mx__llm_peer_stop(peer *p) {
  if (p->to) {
    fputs("quit\n", p->to);
    fclose(p->to);
  }
  if (p->from) fclose(p->from);
  if (p->pid > 0) waitpid(p->pid, NULL, 0);
  free(p->line);
  p->to = p->from = NULL;
  p->line = NULL;
  p->pid = -1;
}

#ifndef MIXRT_PEERS_DIR_DEFAULT
#define MIXRT_PEERS_DIR_DEFAULT "bench/peers"
#endif

/* Finds bench/peers: --peers, $MIXRT_PEERS_DIR, or the source tree's bench/peers (the build
 * records its path). */
static void peers_dir(const llm_args *a, char *buf, size_t cap) {
  const char *env = getenv("MIXRT_PEERS_DIR");
  if (a->peers_dir)
    snprintf(buf, cap, "%s", a->peers_dir);
  else if (env && *env)
    snprintf(buf, cap, "%s", env);
  else
    snprintf(buf, cap, "%s", MIXRT_PEERS_DIR_DEFAULT);
}

void mx__llm_peer_start(const llm_args *a, peer *p) {
  char dir[1024], script[1100], modules[1100];
  int in[2] = {-1, -1}, out[2] = {-1, -1}; /* pipe ends not yet handed to a FILE or the child */
  peers_dir(a, dir, sizeof dir);
  snprintf(script, sizeof script, "%s/ort_runner.js", dir);
  snprintf(modules, sizeof modules, "%s/node_modules/onnxruntime-node/package.json", dir);
  if (access(script, R_OK) != 0) {
    snprintf(p->reason, sizeof p->reason, "%s not found (give --peers DIR)", script);
    return;
  }
  if (access(modules, R_OK) != 0) {
    snprintf(p->reason, sizeof p->reason, "onnxruntime-node is not installed in %s (run make bench-deps)",
             dir);
    return;
  }
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) {
    snprintf(p->reason, sizeof p->reason, "pipe: %s", strerror(errno));
    goto fail;
  }
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(in[0], STDIN_FILENO);
    dup2(out[1], STDOUT_FILENO);
    execlp(a->node, a->node, script, (char *)NULL);
    fprintf(stderr, "mixrt bench llm: cannot run %s: %s\n", a->node, strerror(errno));
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
  if (!(p->to = fdopen(in[1], "w"))) {
    snprintf(p->reason, sizeof p->reason, "fdopen: %s", strerror(errno));
    goto fail;
  }
  in[1] = -1;
  if (!(p->from = fdopen(out[0], "r"))) {
    snprintf(p->reason, sizeof p->reason, "fdopen: %s", strerror(errno));
    goto fail;
  }
  out[0] = -1;
  ssize_t got = getline(&p->line, &p->line_cap, p->from);
  if (got < 0 || strncmp(p->line, "ready ", 6) != 0) {
    if (p->line && got < 0) p->line[0] = '\0'; /* nothing was read: the buffer holds no string */
    if (p->line) p->line[strcspn(p->line, "\r\n")] = '\0';
    snprintf(p->reason, sizeof p->reason, "%s did not start the ONNX Runtime peer%s%s", a->node,
             p->line && *p->line ? ": " : " (is Node.js installed? run make bench-deps)",
             p->line ? p->line : "");
    goto fail;
  }
  if (sscanf(p->line + 6, "%63s %63s", p->version, p->node_version) != 2)
    snprintf(p->version, sizeof p->version, "?");
  return;
fail:
  /* Raw pipe ends first, so a started child sees end-of-file and exits before it is waited for. */
  for (int k = 0; k < 2; k++) {
    if (in[k] >= 0) close(in[k]);
    if (out[k] >= 0) close(out[k]);
  }
  mx__llm_peer_stop(p);
}

bool mx__llm_peer_times(const peer *p, int64_t skip, uint64_t *samples, int64_t n) {
  const char *s = reply_rest(p);
  for (int64_t k = -skip; k < n; k++) {
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s) return false;
    if (k >= 0) samples[k] = v;
    s = end;
  }
  return true;
}
