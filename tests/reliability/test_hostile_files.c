/* Hostile files around .mxm models: a weights side file replaced by a FIFO (nobody writes to
 * it) must make loading fail at once, not block forever, both for static-plan files
 * (mx__mxm_load) and for session files (mx_session_load_file). A watchdog alarm turns a hang
 * into a failed test instead of waiting for the suite's time limit. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "reliability/reliability.h"
#include "static_exec/static_exec.h"

/* A fresh directory under TMPDIR (malloc'd). */
static char *temp_dir(void) {
  const char *tmp = getenv("TMPDIR");
  char *dir = malloc(512);
  cr_assert_not_null(dir);
  snprintf(dir, 512, "%s/mixrt-hostile-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  cr_assert_not_null(mkdtemp(dir));
  return dir;
}

/* Replaces `path` by a FIFO. */
static void make_fifo(const char *path) {
  cr_assert_eq(unlink(path), 0, "no file at %s", path);
  cr_assert_eq(mkfifo(path, 0600), 0);
}

Test(hostile_files, static_plan_weights_in_a_fifo) {
  alarm(60);
  mx_llama_config cfg;
  mx_llama_config_default(&cfg);
  cfg.layers = 1;
  mx_graph *g;
  cr_assert_eq(mx_model_llama(&cfg, &g, NULL), MX_OK);
  cr_assert_eq(mx_graph_bind_symbol(g, "past_len", 2), MX_OK);
  cr_assert_eq(mx_graph_optimize(g, NULL), MX_OK, "%s", mx_graph_last_error(g));
  mx_static_plan *plan;
  mx_error err;
  cr_assert_eq(mx__static_compile(g, NULL, &plan, &err), MX_OK, "%s", err.message);
  char *dir = temp_dir();
  char path[600], weights[620];
  snprintf(path, sizeof path, "%s/plan.mxm", dir);
  snprintf(weights, sizeof weights, "%s.weights", path);
  mx_mxm_save_options so = {.external_weights = true};
  cr_assert_eq(mx__mxm_save(plan, path, &so, &err), MX_OK, "%s", err.message);
  mx_static_plan *back = NULL;
  cr_assert_eq(mx__mxm_load(path, &back, &err), MX_OK, "the intact file loads: %s", err.message);
  mx__static_plan_destroy(back);
  make_fifo(weights);
  back = NULL;
  mx_status st = mx__mxm_load(path, &back, &err);
  cr_assert_neq(st, MX_OK);
  cr_assert_null(back);
  cr_assert(strstr(err.message, "plan.mxm.weights"), "the message names the file: %s", err.message);
  unlink(weights);
  unlink(path);
  rmdir(dir);
  free(dir);
  mx__static_plan_destroy(plan);
  mx_graph_destroy(g);
  alarm(0);
}

Test(hostile_files, session_weights_in_a_fifo) {
  alarm(60);
  mx_session_options o;
  mx_session_options_init(&o);
  o.device_options.kind = MX_DEVICE_INLINE;
  mx_session *s;
  mx_error err;
  cr_assert_eq(mx_session_create(&o, &s, &err), MX_OK, "%s", err.message);
  mxr_llama l;
  cr_assert_eq(mxr_llama_init(&l, NULL), MX_OK);
  cr_assert_eq(mxr_llama_load(&l, s), MX_OK, "%s", mx_session_last_error(s));
  char *dir = temp_dir();
  char path[600], weights[620];
  snprintf(path, sizeof path, "%s/llama.mxm", dir);
  snprintf(weights, sizeof weights, "%s.weights", path);
  mx_session_save_options so = {.external_weights = true};
  cr_assert_eq(mx_session_save(s, path, &so), MX_OK, "%s", mx_session_last_error(s));
  make_fifo(weights);
  cr_assert_neq(mx_session_load_file(s, path), MX_OK);
  cr_assert(strstr(mx_session_last_error(s), "llama.mxm.weights"), "%s", mx_session_last_error(s));
  /* The session still loads a model and runs it. */
  cr_assert_eq(mxr_llama_load(&l, s), MX_OK, "%s", mx_session_last_error(s));
  char why[512];
  cr_assert_eq(mxr_llama_step(&l, s, 4, MXR_CHECK | MXR_ADVANCE, why, sizeof why), MX_OK, "%s", why);
  unlink(weights);
  unlink(path);
  rmdir(dir);
  free(dir);
  mxr_llama_free(&l);
  mx_session_destroy(s);
  alarm(0);
}
