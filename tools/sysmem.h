/* What the host's memory system does for mixrt's huge-page advice (mx_device_options.huge_pages):
 * the system's transparent-huge-page mode, and how much of this process the kernel has backed
 * with huge pages. Linux only; elsewhere both report unavailable. */
#ifndef MIXRT_TOOLS_SYSMEM_H
#define MIXRT_TOOLS_SYSMEM_H

#include <stddef.h>
#include <stdint.h>

/* The selected transparent-huge-page mode ("always", "madvise" or "never") into buf; "unknown"
 * when /sys/kernel/mm/transparent_hugepage/enabled cannot be read. Returns buf. */
const char *mx_cli_thp_mode(char *buf, size_t cap);

/* KiB of this process's anonymous memory backed by huge pages now (AnonHugePages of
 * /proc/self/smaps_rollup), or -1 when it cannot be read. */
int64_t mx_cli_anon_huge_kib(void);

#endif /* MIXRT_TOOLS_SYSMEM_H */
