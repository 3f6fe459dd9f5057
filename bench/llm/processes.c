/* `mixrt bench llm --processes N`: the same measurement in N fresh processes, one after another,
 * summed up across them.
 *
 * Why: on a shared host, where a process's memory lands (its pages in the last-level cache and
 * in the host's memory) is decided once per process, and it moves a memory-bound step by
 * several percent, one system more than another. Within a process, rounds and Williams orders
 * even out the machine's drifts; only more processes even out placement. Each process is this
 * executable run again with the same options and `--results FILE`, its JSON document kept
 * whole in "runs". "across_processes" gives, per point, every process's ratio of medians and
 * their median, how many processes had the hybrid ahead, and the rounds compared pooled over
 * all processes with their sign test; the targets use the median over processes of each
 * point's ratio (the worst point), and say which single process was worst.
 *
 * This file runs the processes and collects what each left behind; processes_report.c sums
 * them up. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/llm/llm_impl.h"
#include "common/file.h"
#include "tools/cli.h"

/* Runs process `index`: this executable with the user's options (without --processes) and
 * --results, its stdout into `json_path`. */
static int run_one(const char *exe, int argc, char **argv, int index, const char *json_path,
                   const char *bin_path) {
  char **cargv = calloc((size_t)argc + 6, sizeof *cargv);
  if (!cargv) return mx_cli_runtime_error(CMD, "out of memory");
  int n = 0;
  cargv[n++] = "mixrt";
  cargv[n++] = "bench";
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--processes") == 0 || strcmp(argv[i], "--table") == 0) {
      i++; /* and its value: the table is written once, from every process's figures */
      continue;
    }
    cargv[n++] = argv[i];
  }
  cargv[n++] = "--results";
  cargv[n++] = (char *)bin_path;
  cargv[n] = NULL;
  int fd = open(json_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    free(cargv);
    return mx_cli_runtime_error(CMD, "cannot create %s: %s", json_path, strerror(errno));
  }
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fd, STDOUT_FILENO);
    close(fd);
    execv(exe, cargv);
    fprintf(stderr, "mixrt " CMD ": cannot run %s: %s\n", exe, strerror(errno));
    _exit(127);
  }
  close(fd);
  free(cargv);
  if (pid < 0) return mx_cli_runtime_error(CMD, "cannot start process %d: %s", index + 1, strerror(errno));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return mx_cli_runtime_error(CMD, "process %d failed (%s %d); its messages are above", index + 1,
                                WIFEXITED(status) ? "exit status" : "signal",
                                WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
  return MX_EXIT_OK;
}

/* Largest document or figures file a process may leave: far above what any run writes. */
#define MAX_PROCESS_FILE ((size_t)1 << 30)

static int load_one(process_run *pr, int index, const char *json_path, const char *bin_path) {
  uint8_t *bin = NULL, *json = NULL;
  size_t size = 0;
  mx_error err;
  llm_results_header h;
  bool ok = mx__read_file(bin_path, MAX_PROCESS_FILE, &bin, &size, &err) == MX_OK &&
            size == sizeof h + sizeof pr->res;
  if (ok) {
    memcpy(&h, bin, sizeof h);
    ok = memcmp(h.magic, "MXBLLM1", 8) == 0 && h.result_size == sizeof(config_result) &&
         h.n_configs == N_CONFIGS;
  }
  if (ok) memcpy(pr->res, bin + sizeof h, sizeof pr->res);
  free(bin);
  if (!ok)
    return mx_cli_runtime_error(CMD, "process %d: its figures in %s are missing or malformed", index + 1,
                                bin_path);
  if (mx__read_file(json_path, MAX_PROCESS_FILE, &json, &size, &err) != MX_OK)
    return mx_cli_runtime_error(CMD, "process %d: %s", index + 1, err.message);
  pr->json = (char *)json; /* NUL-terminated */
  while (size && (pr->json[size - 1] == '\n' || pr->json[size - 1] == ' ')) pr->json[--size] = '\0';
  return MX_EXIT_OK;
}

/* Writes this process's figures for the --processes driver (llm_results_header, then the
 * configurations' results). */
int mx__llm_write_results(const llm_args *a, const config_result *res) {
  FILE *f = fopen(a->results, "wb");
  if (!f) return mx_cli_runtime_error(CMD, "cannot write %s: %s", a->results, strerror(errno));
  llm_results_header h = {.magic = "MXBLLM1", .result_size = sizeof *res, .n_configs = N_CONFIGS};
  bool ok = fwrite(&h, sizeof h, 1, f) == 1 && fwrite(res, sizeof *res, N_CONFIGS, f) == N_CONFIGS;
  if (fclose(f) != 0 || !ok)
    return mx_cli_runtime_error(CMD, "cannot write %s: %s", a->results, strerror(errno));
  return MX_EXIT_OK;
}

int mx__llm_processes(const llm_args *a, int argc, char **argv) {
  char exe[4096];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (len <= 0)
    return mx_cli_runtime_error(CMD, "cannot find this program (/proc/self/exe): %s", strerror(errno));
  exe[len] = '\0';
  char dir[] = "/tmp/mixrt-bench-processes-XXXXXX";
  if (!mkdtemp(dir))
    return mx_cli_runtime_error(CMD, "cannot create a temporary folder: %s", strerror(errno));
  const int n = (int)a->processes;
  process_run *runs = calloc((size_t)n, sizeof *runs);
  double *scratch = malloc((size_t)n * 2 * sizeof *scratch); /* two lists of n */
  int rc = runs && scratch ? MX_EXIT_OK : mx_cli_runtime_error(CMD, "out of memory");
  for (int i = 0; i < n && rc == MX_EXIT_OK; i++) {
    char json_path[128], bin_path[128];
    snprintf(json_path, sizeof json_path, "%s/process-%d.json", dir, i + 1);
    snprintf(bin_path, sizeof bin_path, "%s/process-%d.bin", dir, i + 1);
    fprintf(stderr, "mixrt " CMD ": process %d of %d\n", i + 1, n);
    rc = run_one(exe, argc, argv, i, json_path, bin_path);
    if (rc == MX_EXIT_OK) rc = load_one(&runs[i], i, json_path, bin_path);
  }
  if (rc == MX_EXIT_OK) mx__llm_print_summary(a, argc, argv, runs, n, scratch);
  if (rc == MX_EXIT_OK && a->table) rc = mx__llm_write_median_table(a, runs, n, scratch);
  for (int i = 0; runs && i < n; i++) free(runs[i].json);
  free(runs);
  free(scratch);
  mx__llm_remove_tree(dir);
  return rc;
}
