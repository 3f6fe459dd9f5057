/* Exe-graph kernel registry (see exe_registry.h): the groups concatenated into one table on
 * first use (pthread_once), looked up by name when graphs are built or loaded. */
#include <pthread.h>
#include <string.h>

#include "v2runtime/exe_registry.h"

static const mx_exe_kernel_group *const groups[] = {
    &mx__exe_kernels_basic,
    &mx__exe_kernels_model,
};

#define MAX_KERNELS 256
static const mx_exe_kernel_def *table[MAX_KERNELS];
static uint16_t n_table;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void build(void) {
  for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++)
    for (size_t k = 0; k < groups[g]->n && n_table < MAX_KERNELS; k++) table[n_table++] = &groups[g]->defs[k];
}

uint16_t mx__exe_kernel_count(void) {
  pthread_once(&once, build);
  return n_table;
}

const mx_exe_kernel_def *mx__exe_kernel_at(uint16_t index) {
  pthread_once(&once, build);
  return index < n_table ? table[index] : NULL;
}

int mx__exe_kernel_find(const char *name) {
  pthread_once(&once, build);
  for (uint16_t i = 0; i < n_table; i++)
    if (strcmp(table[i]->name, name) == 0) return i;
  return -1;
}
