/* Reads the host's transparent-huge-page mode and this process's huge-page backing (see
 * tools/sysmem.h). */
#include "tools/sysmem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *mx_cli_thp_mode(char *buf, size_t cap) {
  snprintf(buf, cap, "unknown");
  FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
  if (!f) return buf;
  char line[256];
  if (fgets(line, sizeof line, f)) {
    /* The selected mode is the bracketed one: "always [madvise] never". */
    char *open = strchr(line, '['), *close = open ? strchr(open, ']') : NULL;
    if (open && close && close > open + 1) snprintf(buf, cap, "%.*s", (int)(close - open - 1), open + 1);
  }
  fclose(f);
  return buf;
}

int64_t mx_cli_anon_huge_kib(void) {
  FILE *f = fopen("/proc/self/smaps_rollup", "r");
  if (!f) return -1;
  char line[256];
  int64_t kib = -1;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "AnonHugePages:", 14) == 0) {
      kib = strtoll(line + 14, NULL, 10);
      break;
    }
  fclose(f);
  return kib;
}
