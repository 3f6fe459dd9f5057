/* Declared gears stored in .mxm files: a session saved with gears writes their static plans,
 * and a session restoring the file loads them into its specialization cache without compiling
 * (with or without the gears among its own options); with specialization off it ignores them. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mixrt/graph.h"
#include "v2runtime/session/session_support.h"

static mx_value_id op(mx_graph *g, const char *type, const mx_value_id *in, size_t n) {
  mx_value_id y;
  cr_assert_eq(mx_graph_add_op(g, type, in, n, NULL, 0, &y), MX_OK, "%s", mx_graph_last_error(g));
  return y;
}

/* x [a, 8] -> MatMul w -> Relu -> Add bias -> Tanh -> Sigmoid: one dynamic partition over a. */
static mx_graph *model(void) {
  mx_graph *g;
  cr_assert_eq(mx_graph_create("spec_mxm", &g), MX_OK);
  mx_shape sx = {.rank = 2, .dims = {mx_sym_named(mx_graph_symtab(g), "a"), 8}};
  mx_value_id x, w, b;
  cr_assert_eq(mx_graph_add_input(g, "x", MX_FLOAT32, &sx, &x), MX_OK);
  mx_tensor t;
  cr_assert_eq(mxs_random_tensor(MX_FLOAT32, 2, (int64_t[]){8, 8}, 1, &t), MX_OK);
  cr_assert_eq(mx_graph_add_constant(g, "w", &t, &w), MX_OK);
  mx_tensor_release(&t);
  cr_assert_eq(mxs_random_tensor(MX_FLOAT32, 1, (int64_t[]){8}, 2, &t), MX_OK);
  cr_assert_eq(mx_graph_add_constant(g, "bias", &t, &b), MX_OK);
  mx_tensor_release(&t);
  mx_value_id h = op(g, "MatMul", (mx_value_id[]){x, w}, 2);
  h = op(g, "Relu", &h, 1);
  h = op(g, "Add", (mx_value_id[]){h, b}, 2);
  h = op(g, "Tanh", &h, 1);
  h = op(g, "Sigmoid", &h, 1);
  cr_assert_eq(mx_graph_add_output(g, h), MX_OK);
  return g;
}

static mx_session *open_session(uint32_t cache, const char *const *gears, size_t n_gears) {
  mx_session_options o;
  mx_session_options_init(&o);
  o.device_options.fault_from_env = false;
  o.spec_cache_size = cache;
  o.gears = gears;
  o.n_gears = n_gears;
  mx_session *s;
  mx_error err;
  cr_assert_eq(mx_session_create(&o, &s, &err), MX_OK, "%s", err.message);
  return s;
}

static mx_session_stats totals(const mx_session *s) {
  mx_session_stats t;
  cr_assert_eq(mx_session_get_stats(s, NULL, &t), MX_OK);
  return t;
}

/* One step with a = va, checked against the reference interpreter. */
static void step(mx_session *s, int64_t va) {
  mx_tensor in, got = {0}, want = {0};
  cr_assert_eq(mxs_random_tensor(MX_FLOAT32, 2, (int64_t[]){va, 8}, 100 + (uint64_t)va, &in), MX_OK);
  cr_assert_eq(mx_session_run(s, &in, 1, &got, 1), MX_OK, "%s", mx_session_last_error(s));
  mx_graph *ref = model();
  mx_error err;
  cr_assert_eq(mx_reference_run(ref, &in, 1, &want, 1, &err), MX_OK, "%s", err.message);
  char why[256];
  cr_assert(mx_tensor_allclose(&got, &want, 1e-5, 1e-6, why, sizeof why), "a=%lld: %s", (long long)va, why);
  mx_graph_destroy(ref);
  mx_tensor_release(&in);
  mx_tensor_release(&got);
  mx_tensor_release(&want);
}

/* Saves a session that declared gears a=3 and a=5 into a temporary .mxm (path returned). */
static void save_with_gears(char *path) {
  const char *gears[] = {"a=3", "a=5"};
  mx_session *s = open_session(8, gears, 2);
  cr_assert_eq(mx_session_load_graph(s, model()), MX_OK, "%s", mx_session_last_error(s));
  cr_assert_eq(totals(s).spec_compiles, 2, "both gears compiled at load");
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  close(fd);
  cr_assert_eq(mx_session_save(s, path, NULL), MX_OK, "%s", mx_session_last_error(s));
  mx_session_destroy(s);
}

Test(session_spec_mxm, restored_gears_are_not_compiled_again) {
  char path[] = "/tmp/mixrt-spec-mxm-XXXXXX";
  save_with_gears(path);
  mx_session *s = open_session(8, NULL, 0);
  cr_assert_eq(mx_session_load_file(s, path), MX_OK, "%s", mx_session_last_error(s));
  remove(path);
  cr_assert_eq(totals(s).spec_compiles, 0, "the gears came from the file");
  step(s, 3);
  step(s, 5);
  mx_session_stats t = totals(s), last;
  cr_assert_eq(t.spec_compiles, 0);
  cr_assert_eq(t.spec_hits, 2);
  cr_assert_eq(mx_session_get_stats(s, &last, NULL), MX_OK);
  cr_assert_eq(last.dynamic_launches, 0, "a restored gear runs as one static model");
  step(s, 4); /* a binding the file did not hold compiles as usual */
  cr_assert_eq(totals(s).spec_compiles, 1);
  mx_session_destroy(s);
}

Test(session_spec_mxm, gears_of_the_options_and_of_the_file_compile_once) {
  char path[] = "/tmp/mixrt-spec-mxm-XXXXXX";
  save_with_gears(path);
  const char *gears[] = {"a=3", "a=7"};
  mx_session *s = open_session(8, gears, 2);
  cr_assert_eq(mx_session_load_file(s, path), MX_OK, "%s", mx_session_last_error(s));
  remove(path);
  cr_assert_eq(totals(s).spec_compiles, 1, "only a=7, which the file did not hold");
  step(s, 3);
  step(s, 5);
  step(s, 7);
  cr_assert_eq(totals(s).spec_hits, 3);
  cr_assert_eq(totals(s).spec_compiles, 1);
  mx_session_destroy(s);
}

Test(session_spec_mxm, specialization_off_ignores_stored_gears) {
  char path[] = "/tmp/mixrt-spec-mxm-XXXXXX";
  save_with_gears(path);
  mx_session *s = open_session(0, NULL, 0);
  cr_assert_eq(mx_session_load_file(s, path), MX_OK, "%s", mx_session_last_error(s));
  remove(path);
  step(s, 3);
  mx_session_stats t = totals(s);
  cr_assert_eq(t.spec_hits, 0);
  cr_assert_gt(t.dynamic_launches, 0);
  mx_session_destroy(s);
}

/* Saved again, a restored session's gears (loaded, not compiled) are written again. */
Test(session_spec_mxm, restored_gears_survive_a_second_save) {
  char path[] = "/tmp/mixrt-spec-mxm-XXXXXX", again[] = "/tmp/mixrt-spec-mxm-XXXXXX";
  save_with_gears(path);
  mx_session *s = open_session(8, NULL, 0);
  cr_assert_eq(mx_session_load_file(s, path), MX_OK, "%s", mx_session_last_error(s));
  remove(path);
  int fd = mkstemp(again);
  cr_assert_geq(fd, 0);
  close(fd);
  cr_assert_eq(mx_session_save(s, again, NULL), MX_OK, "%s", mx_session_last_error(s));
  mx_session_destroy(s);
  s = open_session(8, NULL, 0);
  cr_assert_eq(mx_session_load_file(s, again), MX_OK, "%s", mx_session_last_error(s));
  remove(again);
  step(s, 5);
  cr_assert_eq(totals(s).spec_compiles, 0);
  cr_assert_eq(totals(s).spec_hits, 1);
  mx_session_destroy(s);
}
