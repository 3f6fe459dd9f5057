/* .mxm files with external weights: the weights file is found next to the .mxm (under the
 * .mxm's own name + ".weights", else the name recorded at save), so a pair renamed or moved
 * together loads, and so does an .mxm renamed alone; a weights file of the wrong size, with a
 * wrong checksum, cut short or missing is refused with a message naming both files; and
 * mx__mxm_read_info describes a file without loading its weights. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mxm_block.h"
#include "static_exec/mxm_info.h"
#include "static_exec/static_exec_impl.h"

/* A fresh directory under the temporary directory (static buffer). */
static const char *temp_dir(void) {
  static char dir[128];
  snprintf(dir, sizeof dir, "%s/mixrt_mxmw_%d_XXXXXX", P_tmpdir, (int)getpid());
  cr_assert(mkdtemp(dir));
  return dir;
}

/* Compiles a small block and saves it with external weights to DIR/LEAF. */
static mx_static_plan *save_external(const char *dir, const char *leaf, char *path, size_t cap) {
  mx_static_plan *p = st_small_block_plan();
  snprintf(path, cap, "%s/%s", dir, leaf);
  mx_error err;
  mx_mxm_save_options so = {.external_weights = true};
  cr_assert_eq(mx__mxm_save(p, path, &so, &err), MX_OK, "%s", err.message);
  return p;
}

static void move(const char *from, const char *to) {
  cr_assert_eq(rename(from, to), 0, "%s -> %s", from, to);
}

static void expect_loads(const char *path, const mx_static_plan *like) {
  mx_static_plan *q = NULL;
  mx_error err;
  cr_assert_eq(mx__mxm_load(path, &q, &err), MX_OK, "%s", err.message);
  mx_static_report a, b;
  mx__static_plan_report(like, &a);
  mx__static_plan_report(q, &b);
  cr_assert_eq(a.weight_bytes, b.weight_bytes);
  cr_assert_eq(a.tasks, b.tasks);
  mx__static_plan_destroy(q);
}

static void cleanup(const char *dir) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0);
}

Test(static_mxm_weights, pair_renamed_and_moved_together_loads) {
  const char *d1 = temp_dir();
  char dir1[128], path[300], wpath[300], to[300], wto[300];
  snprintf(dir1, sizeof dir1, "%s", d1);
  mx_static_plan *p = save_external(dir1, "a.mxm", path, sizeof path);
  snprintf(wpath, sizeof wpath, "%s.weights", path);
  const char *dir2 = temp_dir();
  snprintf(to, sizeof to, "%s/renamed.mxm", dir2);
  snprintf(wto, sizeof wto, "%s/renamed.mxm.weights", dir2);
  move(path, to);
  move(wpath, wto);
  expect_loads(to, p);
  mx__static_plan_destroy(p);
  cleanup(dir1);
  cleanup(dir2);
}

Test(static_mxm_weights, mxm_renamed_alone_finds_the_recorded_name) {
  char dir[128], path[300], to[300];
  snprintf(dir, sizeof dir, "%s", temp_dir());
  mx_static_plan *p = save_external(dir, "a.mxm", path, sizeof path);
  snprintf(to, sizeof to, "%s/other.mxm", dir);
  move(path, to);
  expect_loads(to, p);
  mx__static_plan_destroy(p);
  cleanup(dir);
}

/* Replaces the weights file next to path with n bytes of `fill`, or with the first n bytes of
 * the old one (fill < 0). */
static void rewrite_weights(const char *path, size_t n, int fill) {
  char wpath[300];
  snprintf(wpath, sizeof wpath, "%s.weights", path);
  unsigned char *buf = calloc(n ? n : 1, 1);
  cr_assert(buf);
  if (fill < 0) {
    FILE *f = fopen(wpath, "rb");
    cr_assert(f);
    cr_assert_eq(fread(buf, 1, n, f), n);
    fclose(f);
  } else {
    memset(buf, fill, n);
  }
  FILE *f = fopen(wpath, "wb");
  cr_assert(f);
  cr_assert_eq(fwrite(buf, 1, n, f), n);
  fclose(f);
  free(buf);
}

static uint64_t weights_size(const char *path) {
  char wpath[300];
  snprintf(wpath, sizeof wpath, "%s.weights", path);
  FILE *f = fopen(wpath, "rb");
  cr_assert(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fclose(f);
  return (uint64_t)n;
}

/* Loading path fails with `want`, and the message names the .mxm and its weights file. */
static void expect_refused(const char *path, mx_status want, const char *words) {
  mx_static_plan *q = NULL;
  mx_error err;
  cr_assert_eq(mx__mxm_load(path, &q, &err), want, "%s", err.message);
  cr_assert_null(q);
  char wpath[300];
  snprintf(wpath, sizeof wpath, "%s.weights", path);
  cr_assert(strstr(err.message, wpath), "%s", err.message);
  cr_assert(strstr(err.message, path), "%s", err.message);
  cr_assert(strstr(err.message, words), "'%s' not in: %s", words, err.message);
}

Test(static_mxm_weights, wrong_size_is_refused_naming_both_files) {
  char dir[128], path[300];
  snprintf(dir, sizeof dir, "%s", temp_dir());
  mx_static_plan *p = save_external(dir, "m.mxm", path, sizeof path);
  rewrite_weights(path, (size_t)weights_size(path) + 64, 0);
  expect_refused(path, MX_ERR_MALFORMED, "bytes");
  mx__static_plan_destroy(p);
  cleanup(dir);
}

Test(static_mxm_weights, wrong_checksum_is_refused_naming_both_files) {
  char dir[128], path[300];
  snprintf(dir, sizeof dir, "%s", temp_dir());
  mx_static_plan *p = save_external(dir, "m.mxm", path, sizeof path);
  rewrite_weights(path, (size_t)weights_size(path), 0x3c);
  expect_refused(path, MX_ERR_MALFORMED, "checksum");
  mx__static_plan_destroy(p);
  cleanup(dir);
}

Test(static_mxm_weights, truncated_weights_are_refused_not_crashed) {
  char dir[128], path[300];
  snprintf(dir, sizeof dir, "%s", temp_dir());
  mx_static_plan *p = save_external(dir, "m.mxm", path, sizeof path);
  uint64_t n = weights_size(path);
  size_t cuts[] = {(size_t)n - 1, (size_t)n / 2, 63, 1, 0}; /* each cut from the previous one */
  for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
    rewrite_weights(path, cuts[i], -1);
    expect_refused(path, MX_ERR_MALFORMED, "bytes");
  }
  mx__static_plan_destroy(p);
  cleanup(dir);
}

Test(static_mxm_weights, missing_weights_name_both_places_looked) {
  char dir[128], path[300], wpath[300];
  snprintf(dir, sizeof dir, "%s", temp_dir());
  mx_static_plan *p = save_external(dir, "m.mxm", path, sizeof path);
  snprintf(wpath, sizeof wpath, "%s.weights", path);
  cr_assert_eq(remove(wpath), 0);
  expect_refused(path, MX_ERR_IO, "missing");
  mx__static_plan_destroy(p);
  cleanup(dir);
}

Test(static_mxm_weights, info_describes_without_loading) {
  char dir[128], path[300], wpath[300];
  snprintf(dir, sizeof dir, "%s", temp_dir());
  mx_static_plan *p = save_external(dir, "m.mxm", path, sizeof path);
  /* The description does not need the weights file. */
  snprintf(wpath, sizeof wpath, "%s.weights", path);
  cr_assert_eq(remove(wpath), 0);
  cr_assert(mx__mxm_is_file(path));
  mx__mxm_info in;
  mx_error err;
  cr_assert_eq(mx__mxm_read_info(path, &in, &err), MX_OK, "%s", err.message);
  cr_assert_eq(in.n_plans, 1);
  cr_assert_str_eq(in.weights_file, "m.mxm.weights");
  mx_static_report r;
  mx__static_plan_report(p, &r);
  cr_assert_eq(in.plans[0].weight_bytes, r.weight_bytes);
  cr_assert_eq(in.plans[0].n_tasks, r.tasks);
  cr_assert_null(in.root); /* static plans only: no runtime record */
  mx__mxm_info_release(&in);
  /* A truncated file is an error naming it. */
  FILE *f = fopen(path, "r+b");
  cr_assert(f);
  cr_assert_eq(ftruncate(fileno(f), 40), 0);
  fclose(f);
  cr_assert_eq(mx__mxm_read_info(path, &in, &err), MX_ERR_MALFORMED);
  cr_assert(strstr(err.message, path), "%s", err.message);
  mx__static_plan_destroy(p);
  cleanup(dir);
}
