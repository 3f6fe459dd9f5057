/* `mixrt bench llm`, the command: parses the options, hands --processes to its driver, or sets
 * up the work folder, the ONNX Runtime peer and the device, measures the Identity probe and every
 * configuration, and reports (the JSON document, --table, --results). */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench/llm/llm.h"
#include "bench/llm/llm_impl.h"
#include "tools/cli.h"

int mx_bench_llm(int argc, char **argv) {
  llm_args a;
  int rc = mx__llm_parse_args(argc, argv, &a);
  if (rc != MX_EXIT_OK) return rc;
  if (a.processes > 1) return mx__llm_processes(&a, argc, argv);
  signal(SIGPIPE, SIG_IGN); /* a dead peer shows as a failed write, not a killed benchmark */
  char tmp[] = "/tmp/mixrt-bench-llm-XXXXXX";
  const char *dir = a.work_dir;
  if (dir) {
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
      return mx_cli_runtime_error(CMD, "cannot create %s: %s", dir, strerror(errno));
  } else if (!(dir = mkdtemp(tmp))) {
    return mx_cli_runtime_error(CMD, "cannot create a temporary folder: %s", strerror(errno));
  }
  double load[1] = {NAN};
  if (getloadavg(load, 1) != 1) load[0] = NAN;
  peer p = {.pid = -1};
  const char *no_ort = mx__llm_no_ort_reason(&a);
  if (no_ort)
    snprintf(p.reason, sizeof p.reason, "%s", no_ort);
  else
    mx__llm_peer_start(&a, &p);
  config_result res[N_CONFIGS];
  memset(res, 0, sizeof res);
  timing id_ort = {0}, id_mixrt = {0};
  mx_device_options dopt;
  mx_device_options_init(&dopt);
  dopt.kind = a.device;
  dopt.skip_kernels = a.skip_kernels;
  dopt.huge_pages = !a.no_huge_pages;
  mx_device *dev = NULL;
  mx_error err;
  if (mx_device_create(&dopt, &dev, &err) != MX_OK) {
    rc = mx_cli_runtime_error(CMD, "%s", err.message);
    goto stop_peer;
  }
  rc = mx__llm_measure_identity(&a, &p, dev, dir, &id_ort, &id_mixrt);
  for (int c = 0; c < N_CONFIGS && rc == MX_EXIT_OK; c++)
    if (a.configs[c]) rc = mx__llm_measure_config(&a, &p, dev, dir, c, &res[c]);
  if (rc == MX_EXIT_OK) mx__llm_print_json(&a, argc, argv, &p, load[0], &id_ort, &id_mixrt, res);
  if (rc == MX_EXIT_OK && a.table) rc = mx__llm_write_table(&a, res, 1);
  if (rc == MX_EXIT_OK && a.results) rc = mx__llm_write_results(&a, res);
  mx_device_destroy(dev);
stop_peer:
  mx__llm_peer_stop(&p);
  if (!a.work_dir) mx__llm_remove_tree(dir);
  return rc;
}
