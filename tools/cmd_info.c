/* `mixrt info`: build configuration, library versions and the machine's topology (hwloc). */
#include <cblas.h>
#include <hwloc.h>
#include <protobuf-c/protobuf-c.h>
#include <string.h>
#include <uv.h>

#include "graph/ops/op.h"
#include "kernels/kernel.h"
#include "tools/commands.h"
#include "tools/sysmem.h"

/* OpenBLAS's configuration string (declared here: not every cblas.h declares it). */
char *openblas_get_config(void);

void mx_cmd_info_help(FILE *out) {
  fprintf(out,
          "usage: mixrt info [--json]\n\n"
          "Prints mixrt's version and build configuration (build type, compiler, sanitizer), the\n"
          "versions of the libraries it uses (libuv, protobuf-c, hwloc, OpenBLAS, concurrencykit),\n"
          "the number of op definitions and CPU kernels, and the machine's topology as hwloc\n"
          "sees it: packages, cores, hardware threads and NUMA nodes, and the system's transparent\n"
          "huge-page mode (mixrt advises huge pages for its large device blocks; \"never\" turns\n"
          "that off, \"madvise\" and \"always\" honour it).\n\n"
          "options:\n  --json    the same as one JSON object\n");
}

static int count_type(hwloc_topology_t topo, hwloc_obj_type_t type) {
  int n = hwloc_get_nbobjs_by_type(topo, type);
  return n < 0 ? 0 : n;
}

int mx_cmd_info(int argc, char **argv) {
  bool json = false;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0)
      json = true;
    else
      return mx_cli_usage_error("info", "unknown option '%s'", argv[i]);
  }
  hwloc_topology_t topo;
  int packages = 0, cores = 0, pus = 0, numa = 0;
  bool have_topo = hwloc_topology_init(&topo) == 0;
  if (have_topo && hwloc_topology_load(topo) == 0) {
    packages = count_type(topo, HWLOC_OBJ_PACKAGE);
    cores = count_type(topo, HWLOC_OBJ_CORE);
    pus = count_type(topo, HWLOC_OBJ_PU);
    numa = count_type(topo, HWLOC_OBJ_NUMANODE);
  }
  if (have_topo) hwloc_topology_destroy(topo);
  unsigned hv = hwloc_get_api_version();
  char hwloc_ver[32];
  snprintf(hwloc_ver, sizeof hwloc_ver, "%u.%u.%u", hv >> 16, (hv >> 8) & 0xff, hv & 0xff);
  const char *blas = openblas_get_config();
  const char *san = MIXRT_SANITIZER[0] ? MIXRT_SANITIZER : "none";
  char thp[32];
  mx_cli_thp_mode(thp, sizeof thp);
  if (json) {
    printf(
        "{\"version\": \"%s\", \"build_type\": \"%s\", \"compiler\": \"%s\", \"sanitizer\": \"%s\", "
        "\"libuv\": \"%s\", \"protobuf_c\": \"%s\", \"hwloc\": \"%s\", \"openblas\": \"%s\", "
        "\"concurrencykit\": \"system package (no version API)\", \"op_definitions\": %zu, "
        "\"cpu_kernels\": %zu, \"topology\": {\"packages\": %d, \"cores\": %d, \"pus\": %d, "
        "\"numa_nodes\": %d}, \"transparent_huge_pages\": \"%s\"}\n",
        MIXRT_VERSION_STRING, MIXRT_BUILD_TYPE, MIXRT_COMPILER, san, uv_version_string(),
        protobuf_c_version(), hwloc_ver, blas ? blas : "?", mx__op_count(), mx__kernel_count(), packages,
        cores, pus, numa, thp);
    return MX_EXIT_OK;
  }
  printf("mixrt %s\n", MIXRT_VERSION_STRING);
  printf("build:      %s, %s, sanitizer %s\n", MIXRT_BUILD_TYPE, MIXRT_COMPILER, san);
  printf("libraries:  libuv %s, protobuf-c %s, hwloc %s, concurrencykit (system package)\n",
         uv_version_string(), protobuf_c_version(), hwloc_ver);
  printf("blas:       %s\n", blas ? blas : "?");
  printf("ops:        %zu op definitions, %zu CPU kernels\n", mx__op_count(), mx__kernel_count());
  printf("topology:   %d package(s), %d core(s), %d hardware thread(s), %d NUMA node(s)\n", packages, cores,
         pus, numa);
  printf("memory:     transparent huge pages %s\n", thp);
  return MX_EXIT_OK;
}
