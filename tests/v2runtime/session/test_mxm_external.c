/* Partitioned models' .mxm files with external weights: the pair renamed and moved to another
 * directory loads into a new session and decodes exactly as the session that saved it; a
 * weights file cut short, or another model's, is refused at load with a message naming the .mxm
 * and the weights file, and the session keeps no half-loaded model. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mixrt/models.h"
#include "v2runtime/session/session_support.h"

static void make_dir(char *dir, size_t cap) {
  snprintf(dir, cap, "%s/mixrt_mxmx_%d_XXXXXX", P_tmpdir, (int)getpid());
  cr_assert(mkdtemp(dir));
}

static void remove_dir(const char *dir) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0);
}

/* Decodes a few steps on both sessions and expects the same outputs bit for bit. */
static void same_steps(mx_session *a, mx_session *b, const mx_llama_config *cfg) {
  size_t n = mx_session_input_count(a);
  cr_assert_eq(n, mx_session_input_count(b));
  cr_assert_leq(n, 16);
  mx_tensor in[16] = {{0}};
  int64_t hd = cfg->hidden / cfg->heads;
  cr_assert_eq(mx_tensor_alloc(MX_INT64, 2, (int64_t[]){1, 1}, &in[0]), MX_OK);
  for (size_t i = 1; i < n; i++)
    cr_assert_eq(mx_tensor_alloc(MX_FLOAT32, 4, (int64_t[]){1, cfg->kv_heads, 0, hd}, &in[i]), MX_OK);
  for (int k = 0; k < 3; k++) {
    ((int64_t *)in[0].data)[0] = (k * 5 + 1) % cfg->vocab;
    mx_tensor oa[16] = {{0}}, ob[16] = {{0}};
    cr_assert_eq(mx_session_run(a, in, n, oa, n), MX_OK, "%s", mx_session_last_error(a));
    cr_assert_eq(mx_session_run(b, in, n, ob, n), MX_OK, "%s", mx_session_last_error(b));
    for (size_t i = 0; i < n; i++) {
      char why[256];
      cr_assert(mxs_same(&ob[i], &oa[i], why, sizeof why), "step %d output %zu: %s", k, i, why);
    }
    for (size_t i = 1; i < n; i++) {
      mx_tensor_release(&in[i]);
      in[i] = oa[i];
      in[i].name = NULL;
      mx_tensor_release(&ob[i]);
    }
    mx_tensor_release(&oa[0]);
    mx_tensor_release(&ob[0]);
  }
  for (size_t i = 0; i < n; i++) mx_tensor_release(&in[i]);
}

/* A session with the default llama loaded, saved with external weights to DIR/a.mxm. */
static mx_session *saved_llama(const char *dir, mx_llama_config *cfg, char *path, size_t cap) {
  mx_llama_config_default(cfg);
  mx_graph *g;
  mx_error err;
  cr_assert_eq(mx_model_llama(cfg, &g, &err), MX_OK);
  mx_session *a = mxs_new_session(1, MX_EXECUTOR_SEQUENTIAL, 4);
  cr_assert_eq(mx_session_load_graph(a, g), MX_OK, "%s", mx_session_last_error(a));
  snprintf(path, cap, "%s/a.mxm", dir);
  mx_session_save_options so = {.external_weights = true};
  cr_assert_eq(mx_session_save(a, path, &so), MX_OK, "%s", mx_session_last_error(a));
  char wpath[300];
  snprintf(wpath, sizeof wpath, "%s.weights", path);
  cr_assert_eq(access(wpath, R_OK), 0, "no weights file was written");
  return a;
}

Test(mxm_external, renamed_and_moved_pair_loads_and_decodes_the_same) {
  char d1[128], d2[128], path[300], wpath[300], to[300], wto[300];
  make_dir(d1, sizeof d1);
  make_dir(d2, sizeof d2);
  mx_llama_config cfg;
  mx_session *a = saved_llama(d1, &cfg, path, sizeof path);
  snprintf(wpath, sizeof wpath, "%s.weights", path);
  snprintf(to, sizeof to, "%s/step.mxm", d2);
  snprintf(wto, sizeof wto, "%s/step.mxm.weights", d2);
  cr_assert_eq(rename(path, to), 0);
  cr_assert_eq(rename(wpath, wto), 0);
  mx_session *b = mxs_new_session(1, MX_EXECUTOR_SEQUENTIAL, 4);
  cr_assert_eq(mx_session_load_file(b, to), MX_OK, "%s", mx_session_last_error(b));
  same_steps(a, b, &cfg);
  mx_session_destroy(b);
  mx_session_destroy(a);
  remove_dir(d1);
  remove_dir(d2);
}

Test(mxm_external, wrong_weights_file_is_refused_naming_both_files) {
  char dir[128], path[300], wpath[300];
  make_dir(dir, sizeof dir);
  mx_llama_config cfg;
  mx_session *a = saved_llama(dir, &cfg, path, sizeof path);
  snprintf(wpath, sizeof wpath, "%s.weights", path);
  FILE *f = fopen(wpath, "r+b");
  cr_assert(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  /* Another model's weights of the same size: every byte different. */
  unsigned char *junk = malloc((size_t)n);
  cr_assert(junk);
  memset(junk, 0x5a, (size_t)n);
  fseek(f, 0, SEEK_SET);
  cr_assert_eq(fwrite(junk, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  free(junk);
  mx_session *b = mxs_new_session(1, MX_EXECUTOR_SEQUENTIAL, 4);
  cr_assert_neq(mx_session_load_file(b, path), MX_OK);
  const char *why = mx_session_last_error(b);
  cr_assert(strstr(why, wpath) && strstr(why, "checksum"), "%s", why);
  /* Cut short: refused by size, not read past the end. */
  cr_assert_eq(truncate(wpath, n / 3), 0);
  cr_assert_neq(mx_session_load_file(b, path), MX_OK);
  why = mx_session_last_error(b);
  cr_assert(strstr(why, wpath) && strstr(why, "bytes"), "%s", why);
  cr_assert_eq(mx_session_input_count(b), 0, "no model stays half loaded");
  mx_session_destroy(b);
  mx_session_destroy(a);
  remove_dir(dir);
}
