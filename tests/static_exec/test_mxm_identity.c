/* The .mxm loader checks the file it mapped, not whatever the path names by the time of the
 * check: the mapping keeps its file open and the weights checksum reads through that, so a file
 * renamed over the path between mapping and checking changes nothing; loading leaves no file
 * open behind it, whether it succeeds or is refused. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mxm_block.h"
#include "static_exec/mxm_info.h"
#include "static_exec/static_exec_impl.h"

#define BYTES ((size_t)3 << 20)

static char *temp_path(const char *leaf) {
  char *p = malloc(512);
  cr_assert(p);
  snprintf(p, 512, "%s/mixrt_ident_%d_%s", P_tmpdir, (int)getpid(), leaf);
  return p;
}

/* n bytes of a sequence that depends on seed. */
static unsigned char *pattern(size_t n, uint64_t seed) {
  unsigned char *p = malloc(n);
  cr_assert(p);
  uint64_t x = seed;
  for (size_t i = 0; i < n; i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    p[i] = (unsigned char)(x >> 56);
  }
  return p;
}

static void write_all(const char *path, const unsigned char *d, size_t n) {
  FILE *f = fopen(path, "wb");
  cr_assert(f);
  cr_assert_eq(fwrite(d, 1, n, f), n);
  cr_assert_eq(fclose(f), 0);
}

/* Open file descriptors of this process. */
static int open_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  cr_assert(d);
  int n = 0;
  while (readdir(d)) n++;
  closedir(d);
  return n;
}

Test(mxm_identity, check_reads_the_mapped_file_after_another_is_renamed_over_it) {
  char *path = temp_path("weights.bin"), *other = temp_path("other.bin");
  unsigned char *a = pattern(BYTES, 1), *b = pattern(BYTES, 2);
  write_all(path, a, BYTES);
  write_all(other, b, BYTES);
  unsigned char *d;
  size_t n;
  int fd;
  mx_error err;
  cr_assert_eq(mx__mxm_map_file_fd(path, &d, &n, &fd, &err), MX_OK, "%s", err.message);
  cr_assert_eq(n, BYTES);
  cr_assert_geq(fd, 0);
  /* Same size, other bytes, now under the mapped file's name. */
  cr_assert_eq(rename(other, path), 0);
  uint64_t want = mx__mxm_section_checksum(MX__MXM_SUM_CHUNKED, a, BYTES, NULL);
  uint64_t through_fd = 0;
  cr_assert(mx__mxm_section_checksum_fd(MX__MXM_SUM_CHUNKED, fd, 0, BYTES, NULL, &through_fd));
  cr_assert_eq(through_fd, want, "the check read the file now at the path, not the one mapped");
  cr_assert_eq(mx__mxm_section_checksum(MX__MXM_SUM_CHUNKED, d, n, NULL), want);
  cr_assert_neq(mx__mxm_section_checksum(MX__MXM_SUM_CHUNKED, b, BYTES, NULL), want);
  cr_assert_eq(memcmp(d, a, BYTES), 0);
  close(fd);
  mx__mxm_unmap(d, n);
  remove(path);
  free(a);
  free(b);
  free(path);
  free(other);
}

Test(mxm_identity, refused_maps_keep_no_file_open) {
  char *missing = temp_path("missing.bin");
  unsigned char *d = (unsigned char *)"x";
  size_t n = 7;
  int fd = 123;
  mx_error err;
  int before = open_fds();
  cr_assert_eq(mx__mxm_map_file_fd(missing, &d, &n, &fd, &err), MX_ERR_IO);
  cr_assert_eq(fd, -1);
  cr_assert_null(d);
  cr_assert_eq(n, 0);
  cr_assert(strstr(err.message, missing), "%s", err.message);
  /* A directory is not a regular file: refused after the open, which must be closed again. */
  cr_assert_eq(mx__mxm_map_file_fd(P_tmpdir, &d, &n, &fd, &err), MX_ERR_IO);
  cr_assert_eq(fd, -1);
  cr_assert_eq(open_fds(), before);
  free(missing);
}


/* Flips the last byte of a file (in its weights). */
static void damage_last_byte(const char *path) {
  FILE *f = fopen(path, "r+b");
  cr_assert(f);
  cr_assert_eq(fseek(f, -1, SEEK_END), 0);
  int c = fgetc(f);
  cr_assert_neq(c, EOF);
  cr_assert_eq(fseek(f, -1, SEEK_END), 0);
  cr_assert_neq(fputc(c ^ 1, f), EOF);
  cr_assert_eq(fclose(f), 0);
}

Test(mxm_identity, loads_and_refusals_keep_no_file_open) {
  char *inl = temp_path("inline.mxm"), *ext = temp_path("external.mxm");
  char wpath[600];
  snprintf(wpath, sizeof wpath, "%s.weights", ext);
  st_save_small_block(inl, false);
  st_save_small_block(ext, true);
  int before = open_fds();
  mx_static_plan *q = NULL;
  mx_error err;
  for (int k = 0; k < 2; k++) {
    const char *path = k ? ext : inl;
    cr_assert_eq(mx__mxm_load(path, &q, &err), MX_OK, "%s", err.message);
    mx__static_plan_destroy(q);
    cr_assert_eq(open_fds(), before, "%s", path);
  }
  /* Damaged weights: refused by the checksum read through the kept file, which is closed. */
  damage_last_byte(inl);
  damage_last_byte(wpath);
  for (int k = 0; k < 2; k++) {
    const char *path = k ? ext : inl;
    cr_assert_eq(mx__mxm_load(path, &q, &err), MX_ERR_MALFORMED, "%s", path);
    cr_assert(strstr(err.message, "checksum"), "%s", err.message);
    cr_assert_eq(open_fds(), before, "%s", path);
  }
  remove(inl);
  remove(ext);
  remove(wpath);
  free(inl);
  free(ext);
}
