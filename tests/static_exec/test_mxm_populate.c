/* Filling the page tables of a loaded .mxm's weights ahead of the first step
 * (static_exec/mxm_populate.c): populating inside the load maps every page of the section, the
 * background thread stops when asked and is joined with the mapping (a model freed, a load
 * refused), and MIXRT_MXM_POPULATE picks the mode. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mxm_block.h"
#include "static_exec/mxm_info.h"
#include "static_exec/static_exec_impl.h"

#define BYTES ((size_t)40 << 20)

static char *temp_path(const char *leaf) {
  char *p = malloc(512);
  cr_assert(p);
  snprintf(p, 512, "%s/mixrt_populate_%d_%s", P_tmpdir, (int)getpid(), leaf);
  return p;
}

static void write_zeros(const char *path, size_t n) {
  FILE *f = fopen(path, "wb");
  cr_assert(f);
  cr_assert_eq(fseek(f, (long)n - 1, SEEK_SET), 0);
  cr_assert_neq(fputc(1, f), EOF);
  cr_assert_eq(fclose(f), 0);
}

static int count_entries(const char *dir) {
  DIR *d = opendir(dir);
  cr_assert(d);
  int n = 0;
  while (readdir(d)) n++;
  closedir(d);
  return n;
}

static int threads(void) { return count_entries("/proc/self/task"); }

/* Kilobytes of the mapping starting at addr that are mapped in this process (smaps "Rss"). */
static long mapped_kb(const void *addr) {
  FILE *f = fopen("/proc/self/smaps", "r");
  cr_assert(f);
  char line[512];
  bool in_it = false;
  long kb = -1;
  while (fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    char perms[8];
    if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3) { /* a mapping's first line */
      in_it = lo == (unsigned long)(uintptr_t)addr;
      continue;
    }
    if (in_it && sscanf(line, "Rss: %ld kB", &kb) == 1) break;
  }
  fclose(f);
  return kb;
}

Test(mxm_populate, load_mode_maps_every_page_of_the_section) {
  char *path = temp_path("section.bin");
  write_zeros(path, BYTES);
  unsigned char *d;
  size_t n;
  mx_error err;
  cr_assert_eq(mx__mxm_map_file(path, &d, &n, &err), MX_OK, "%s", err.message);
  cr_assert_lt(mapped_kb(d), (long)(BYTES >> 10) / 2, "a fresh mapping is not populated");
  cr_assert_null(mx__mxm_populate_start(d, n, MX__MXM_POPULATE_LOAD));
  cr_assert_eq(mapped_kb(d), (long)(BYTES >> 10));
  mx__mxm_unmap(d, n);
  remove(path);
  free(path);
}

Test(mxm_populate, background_thread_stops_and_is_joined) {
  char *path = temp_path("background.bin");
  write_zeros(path, BYTES);
  unsigned char *d;
  size_t n;
  mx_error err;
  cr_assert_eq(mx__mxm_map_file(path, &d, &n, &err), MX_OK, "%s", err.message);
  int before = threads();
  for (int k = 0; k < 20; k++) { /* stopped at once, and after it may have finished */
    mx__mxm_populater *p = mx__mxm_populate_start(d, n, MX__MXM_POPULATE_BACKGROUND);
    cr_assert_not_null(p);
    if (k % 2) usleep(2000);
    mx__mxm_populate_stop(p);
    cr_assert_eq(threads(), before);
  }
  cr_assert_null(mx__mxm_populate_start(d, n, MX__MXM_POPULATE_OFF));
  cr_assert_null(mx__mxm_populate_start(d + 1, n - 1, MX__MXM_POPULATE_BACKGROUND), "not page-aligned");
  mx__mxm_populate_stop(NULL);
  mx__mxm_unmap(d, n);
  remove(path);
  free(path);
}

Test(mxm_populate, mode_from_environment) {
  unsetenv("MIXRT_MXM_POPULATE");
  cr_assert_eq(mx__mxm_populate_mode_from_env(), MX__MXM_POPULATE_BACKGROUND);
  setenv("MIXRT_MXM_POPULATE", "load", 1);
  cr_assert_eq(mx__mxm_populate_mode_from_env(), MX__MXM_POPULATE_LOAD);
  setenv("MIXRT_MXM_POPULATE", "off", 1);
  cr_assert_eq(mx__mxm_populate_mode_from_env(), MX__MXM_POPULATE_OFF);
  setenv("MIXRT_MXM_POPULATE", "background", 1);
  cr_assert_eq(mx__mxm_populate_mode_from_env(), MX__MXM_POPULATE_BACKGROUND);
  unsetenv("MIXRT_MXM_POPULATE");
}


Test(mxm_populate, every_mode_loads_and_leaves_no_thread) {
  char *inl = temp_path("inline.mxm"), *ext = temp_path("external.mxm");
  char wpath[600];
  snprintf(wpath, sizeof wpath, "%s.weights", ext);
  st_save_small_block(inl, false);
  st_save_small_block(ext, true);
  int before = threads();
  const char *modes[] = {"background", "load", "off"};
  for (int m = 0; m < 3; m++) {
    setenv("MIXRT_MXM_POPULATE", modes[m], 1);
    for (int k = 0; k < 2; k++) {
      const char *path = k ? ext : inl;
      mx_static_plan *q = NULL;
      mx_error err;
      cr_assert_eq(mx__mxm_load(path, &q, &err), MX_OK, "%s: %s", modes[m], err.message);
      mx__static_plan_destroy(q);
      cr_assert_eq(threads(), before, "%s %s", modes[m], path);
    }
  }
  /* Damaged weights are refused before any thread starts. */
  setenv("MIXRT_MXM_POPULATE", "background", 1);
  FILE *f = fopen(inl, "r+b");
  cr_assert(f);
  cr_assert_eq(fseek(f, -1, SEEK_END), 0);
  int c = fgetc(f);
  cr_assert_eq(fseek(f, -1, SEEK_END), 0);
  cr_assert_neq(fputc(c ^ 1, f), EOF);
  cr_assert_eq(fclose(f), 0);
  mx_static_plan *q = NULL;
  mx_error err;
  cr_assert_eq(mx__mxm_load(inl, &q, &err), MX_ERR_MALFORMED);
  cr_assert_eq(threads(), before);
  unsetenv("MIXRT_MXM_POPULATE");
  remove(inl);
  remove(ext);
  remove(wpath);
  free(inl);
  free(ext);
}
