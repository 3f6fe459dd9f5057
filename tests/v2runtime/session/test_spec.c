/* Shape specialization in sessions: a dynamic partition whose dims depend only on input-shape
 * symbols runs a static model compiled for each binding it meets; guards, LRU eviction, churn
 * fallback, declared gears, a data-dependent partition never specialized, results equal to the
 * reference interpreter, and a fault during an on-the-fly compile. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hal/hal_impl.h"
#include "mixrt/graph.h"
#include "v2runtime/session/session_support.h"

static mx_value_id op(mx_graph *g, const char *type, const mx_value_id *in, size_t n, const mx_attr *a,
                      size_t na) {
  mx_value_id y;
  cr_assert_eq(mx_graph_add_op(g, type, in, n, a, na, &y), MX_OK, "%s", mx_graph_last_error(g));
  return y;
}

static mx_value_id constant(mx_graph *g, const char *name, int32_t rank, const int64_t *dims, uint64_t seed) {
  mx_tensor t;
  cr_assert_eq(mxs_random_tensor(MX_FLOAT32, rank, dims, seed, &t), MX_OK);
  mx_value_id v;
  cr_assert_eq(mx_graph_add_constant(g, name, &t, &v), MX_OK, "%s", mx_graph_last_error(g));
  mx_tensor_release(&t);
  return v;
}

/* x [a, 8] -> MatMul W -> Relu -> Add bias -> Tanh -> Neg; y [b, 8] -> Transpose; MatMul ->
 * Sigmoid -> Mul. With two_symbols false, y is absent and the output is [a, 8]. */
static mx_graph *model(bool two_symbols) {
  mx_graph *g;
  cr_assert_eq(mx_graph_create("spec", &g), MX_OK);
  mx_symtab *t = mx_graph_symtab(g);
  mx_shape sx = {.rank = 2, .dims = {mx_sym_named(t, "a"), 8}};
  mx_value_id x, y = MX_NO_VALUE;
  cr_assert_eq(mx_graph_add_input(g, "x", MX_FLOAT32, &sx, &x), MX_OK);
  if (two_symbols) {
    mx_shape sy = {.rank = 2, .dims = {mx_sym_named(t, "b"), 8}};
    cr_assert_eq(mx_graph_add_input(g, "y", MX_FLOAT32, &sy, &y), MX_OK);
  }
  mx_value_id w = constant(g, "w", 2, (int64_t[]){8, 8}, 1), bias = constant(g, "bias", 1, (int64_t[]){8}, 2);
  mx_value_id h = op(g, "MatMul", (mx_value_id[]){x, w}, 2, NULL, 0);
  h = op(g, "Relu", &h, 1, NULL, 0);
  h = op(g, "Add", (mx_value_id[]){h, bias}, 2, NULL, 0);
  h = op(g, "Tanh", &h, 1, NULL, 0);
  h = op(g, "Neg", &h, 1, NULL, 0);
  if (two_symbols) {
    mx_value_id yt = op(g, "Transpose", &y, 1, NULL, 0);
    h = op(g, "MatMul", (mx_value_id[]){h, yt}, 2, NULL, 0);
  }
  h = op(g, "Sigmoid", &h, 1, NULL, 0);
  h = op(g, "Mul", (mx_value_id[]){h, h}, 2, NULL, 0);
  cr_assert_eq(mx_graph_add_output(g, h), MX_OK);
  return g;
}

typedef struct fixture {
  mx_session *s;
  mx_graph *ref;
  bool two;
} fixture;

static fixture open_model(bool two, uint32_t cache, uint32_t churn, const char *const *gears,
                          size_t n_gears) {
  mx_session_options o;
  mx_session_options_init(&o);
  o.device_options.fault_from_env = false;
  o.spec_cache_size = cache;
  o.spec_churn_limit = churn;
  o.gears = gears;
  o.n_gears = n_gears;
  fixture f = {.two = two};
  mx_error err;
  cr_assert_eq(mx_session_create(&o, &f.s, &err), MX_OK, "%s", err.message);
  cr_assert_eq(mx_session_load_graph(f.s, model(two)), MX_OK, "%s", mx_session_last_error(f.s));
  f.ref = model(two);
  return f;
}

static void close_model(fixture *f) {
  mx_graph_destroy(f->ref);
  mx_session_destroy(f->s);
}

/* One step with a = va (and b = vb); checks the result against the reference interpreter. */
static mx_status step(fixture *f, int64_t va, int64_t vb, bool check) {
  mx_tensor in[2];
  cr_assert_eq(mxs_random_tensor(MX_FLOAT32, 2, (int64_t[]){va, 8}, 100 + (uint64_t)va, &in[0]), MX_OK);
  if (f->two)
    cr_assert_eq(mxs_random_tensor(MX_FLOAT32, 2, (int64_t[]){vb, 8}, 200 + (uint64_t)vb, &in[1]), MX_OK);
  size_t n = f->two ? 2 : 1;
  mx_tensor got = {0}, want = {0};
  mx_status st = mx_session_run(f->s, in, n, &got, 1);
  if (st == MX_OK && check) {
    mx_error err;
    cr_assert_eq(mx_reference_run(f->ref, in, n, &want, 1, &err), MX_OK, "%s", err.message);
    cr_assert_eq(got.rank, 2);
    cr_assert_eq(got.dims[0], va);
    cr_assert_eq(got.dims[1], f->two ? vb : 8);
    char why[256];
    cr_assert(mx_tensor_allclose(&got, &want, 1e-5, 1e-6, why, sizeof why), "a=%lld b=%lld: %s",
              (long long)va, (long long)vb, why);
    mx_tensor_release(&want);
  }
  mx_tensor_release(&got);
  for (size_t i = 0; i < n; i++) mx_tensor_release(&in[i]);
  return st;
}

static mx_session_stats totals(const fixture *f) {
  mx_session_stats t;
  cr_assert_eq(mx_session_get_stats(f->s, NULL, &t), MX_OK);
  return t;
}

Test(session_spec, hits_after_one_compile_and_equal_results) {
  fixture f = open_model(false, 8, 4, NULL, 0);
  for (int i = 0; i < 4; i++) cr_assert_eq(step(&f, 3, 0, true), MX_OK, "%s", mx_session_last_error(f.s));
  mx_session_stats t = totals(&f), last;
  cr_assert_eq(mx_session_get_stats(f.s, &last, NULL), MX_OK);
  cr_assert_eq(t.spec_compiles, 1);
  cr_assert_eq(t.spec_misses, 1);
  cr_assert_eq(t.spec_hits, 3);
  cr_assert_eq(last.spec_hits, 1);
  cr_assert_eq(last.dynamic_launches, 0, "a specialized step launches no dynamic op");
  cr_assert_geq(last.static_executes, 1);
  close_model(&f);
}

/* A binding that differs in one symbol never reuses the model of another. */
Test(session_spec, guard_on_every_symbol) {
  fixture f = open_model(true, 8, 0, NULL, 0);
  const int64_t pairs[][2] = {{2, 3}, {2, 4}, {3, 3}, {2, 3}, {3, 4}, {2, 4}, {3, 3}};
  for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
    cr_assert_eq(step(&f, pairs[i][0], pairs[i][1], true), MX_OK, "%s", mx_session_last_error(f.s));
  mx_session_stats t = totals(&f);
  cr_assert_eq(t.spec_compiles, 4, "(2,3) (2,4) (3,3) (3,4)");
  cr_assert_eq(t.spec_hits, 3);
  close_model(&f);
}

Test(session_spec, lru_eviction) {
  fixture f = open_model(false, 2, 0, NULL, 0);
  cr_assert_eq(step(&f, 1, 0, true), MX_OK);
  cr_assert_eq(step(&f, 2, 0, true), MX_OK);
  cr_assert_eq(step(&f, 1, 0, true), MX_OK); /* 1 is now the most recent */
  cr_assert_eq(step(&f, 3, 0, true), MX_OK); /* evicts 2 */
  mx_session_stats t = totals(&f);
  cr_assert_eq(t.spec_evictions, 1);
  cr_assert_eq(t.spec_compiles, 3);
  cr_assert_eq(step(&f, 1, 0, true), MX_OK); /* still cached */
  cr_assert_eq(totals(&f).spec_compiles, 3);
  cr_assert_eq(step(&f, 2, 0, true), MX_OK); /* compiled again */
  t = totals(&f);
  cr_assert_eq(t.spec_compiles, 4);
  cr_assert_eq(t.spec_evictions, 2);
  close_model(&f);
}

static int churn_logs;
static void count_log(void *user, mx_log_level level, const char *msg) {
  (void)user;
  (void)level;
  if (strstr(msg, "stays dynamic for symbol 'a'")) churn_logs++;
}

/* A symbol that keeps taking new values stops compiling: said once, then dynamic. */
Test(session_spec, churn_falls_back_to_dynamic) {
  mx_session_options o;
  mx_session_options_init(&o);
  o.spec_churn_limit = 2;
  o.log = count_log;
  churn_logs = 0;
  fixture f = {.two = false};
  mx_error err;
  cr_assert_eq(mx_session_create(&o, &f.s, &err), MX_OK, "%s", err.message);
  cr_assert_eq(mx_session_load_graph(f.s, model(false)), MX_OK, "%s", mx_session_last_error(f.s));
  f.ref = model(false);
  for (int64_t a = 1; a <= 6; a++)
    cr_assert_eq(step(&f, a, 0, true), MX_OK, "%s", mx_session_last_error(f.s));
  mx_session_stats t = totals(&f), last;
  cr_assert_eq(t.spec_compiles, 2, "two new values compiled, the third went dynamic");
  cr_assert_eq(t.spec_fallbacks, 1);
  cr_assert_eq(churn_logs, 1, "said once");
  cr_assert_eq(mx_session_get_stats(f.s, &last, NULL), MX_OK);
  cr_assert_gt(last.dynamic_launches, 0, "a = 6 ran op by op");
  /* A value compiled before the fallback is still served. */
  cr_assert_eq(step(&f, 2, 0, true), MX_OK);
  cr_assert_eq(mx_session_get_stats(f.s, &last, NULL), MX_OK);
  cr_assert_eq(last.spec_hits, 1);
  cr_assert_eq(last.dynamic_launches, 0);
  close_model(&f);
}

Test(session_spec, declared_gears_compile_at_load) {
  const char *gears[] = {"a=1", "a=4"};
  fixture f = open_model(false, 8, 4, gears, 2);
  mx_session_stats t = totals(&f);
  cr_assert_eq(t.spec_compiles, 2, "compiled at load");
  cr_assert_eq(step(&f, 4, 0, true), MX_OK);
  cr_assert_eq(step(&f, 1, 0, true), MX_OK);
  t = totals(&f);
  cr_assert_eq(t.spec_compiles, 2);
  cr_assert_eq(t.spec_hits, 2);
  close_model(&f);
}

Test(session_spec, gear_naming_no_symbol_is_refused) {
  mx_session_options o;
  mx_session_options_init(&o);
  const char *gears[] = {"nope=3"};
  o.gears = gears;
  o.n_gears = 1;
  mx_session *s;
  mx_error err;
  cr_assert_eq(mx_session_create(&o, &s, &err), MX_OK, "%s", err.message);
  cr_assert_eq(mx_session_load_graph(s, model(false)), MX_ERR_NOT_FOUND);
  cr_assert(strstr(mx_session_last_error(s), "no symbol 'nope'"), "%s", mx_session_last_error(s));
  mx_session_destroy(s);
}

Test(session_spec, cache_size_zero_disables) {
  fixture f = open_model(false, 0, 4, NULL, 0);
  cr_assert_eq(step(&f, 3, 0, true), MX_OK);
  cr_assert_eq(step(&f, 3, 0, true), MX_OK);
  mx_session_stats t = totals(&f);
  cr_assert_eq(t.spec_compiles + t.spec_hits + t.spec_misses, 0);
  close_model(&f);
}

/* NonZero's count is bound by data: that partition runs op by op whatever the inputs. */
Test(session_spec, data_dependent_partition_never_specialized) {
  mx_graph *g;
  cr_assert_eq(mx_graph_create("nz", &g), MX_OK);
  mx_shape sx = {.rank = 1, .dims = {mx_sym_named(mx_graph_symtab(g), "n")}};
  mx_value_id x;
  cr_assert_eq(mx_graph_add_input(g, "x", MX_FLOAT32, &sx, &x), MX_OK);
  mx_value_id nz = op(g, "NonZero", &x, 1, NULL, 0);
  mx_value_id t = op(g, "Transpose", &nz, 1, NULL, 0);
  mx_attr to = mx_attr_int("to", MX_FLOAT32);
  mx_value_id y = op(g, "Cast", &t, 1, &to, 1);
  y = op(g, "Neg", &y, 1, NULL, 0);
  cr_assert_eq(mx_graph_add_output(g, y), MX_OK);
  mx_session *s = mxs_new_session(1, MX_EXECUTOR_SEQUENTIAL, 4);
  cr_assert_eq(mx_session_load_graph(s, g), MX_OK, "%s", mx_session_last_error(s));
  for (int i = 0; i < 3; i++) {
    mx_tensor in, out = {0};
    cr_assert_eq(mxs_random_tensor(MX_FLOAT32, 1, (int64_t[]){5}, 7, &in), MX_OK);
    cr_assert_eq(mx_session_run(s, &in, 1, &out, 1), MX_OK, "%s", mx_session_last_error(s));
    mx_tensor_release(&in);
    mx_tensor_release(&out);
  }
  mx_session_stats tot;
  cr_assert_eq(mx_session_get_stats(s, NULL, &tot), MX_OK);
  cr_assert_eq(tot.spec_compiles + tot.spec_misses + tot.spec_hits, 0);
  mx_session_destroy(s);
}

/* A device fault while a specialization is built fails that step with a message; the next step
 * with the same binding compiles again and succeeds. */
Test(session_spec, fault_during_compile_fails_the_step_cleanly) {
  fixture f = open_model(false, 8, 4, NULL, 0);
  cr_assert_eq(step(&f, 2, 0, true), MX_OK);
  mx_device *dev = mx_session_device(f.s);
  dev->fault_nth[MX_FAULT_ALLOC] = atomic_load(&dev->fault_count[MX_FAULT_ALLOC]) + 1;
  cr_assert_neq(step(&f, 5, 0, false), MX_OK, "the armed allocation fails the step");
  cr_assert_neq(mx_session_last_error(f.s)[0], '\0');
  dev->fault_nth[MX_FAULT_ALLOC] = 0;
  cr_assert_eq(step(&f, 5, 0, true), MX_OK, "%s", mx_session_last_error(f.s));
  cr_assert_eq(step(&f, 2, 0, true), MX_OK, "%s", mx_session_last_error(f.s));
  mx_session_stats t = totals(&f);
  cr_assert_eq(t.spec_compiles, 2);
  cr_assert_eq(t.spec_fallbacks, 0, "a fault is not a reason to stop specializing");
  close_model(&f);
}

/* Sessions created with version 1 options (before the specialization fields) get defaults. */
Test(session_spec, version_1_options_get_the_defaults) {
  mx_session_options o;
  mx_session_options_init(&o);
  o.version = 1;
  o.spec_cache_size = 12345; /* beyond a version 1 record: must not be read */
  mx_session *s;
  mx_error err;
  cr_assert_eq(mx_session_create(&o, &s, &err), MX_OK, "%s", err.message);
  cr_assert_eq(mx_session_load_graph(s, model(false)), MX_OK);
  mx_session_destroy(s);
}

/* A symbol that churns is left out: the ops over it stay dynamic, the others run as a static
 * model specialized on the remaining symbols (a split specialization). */
Test(session_spec, churned_symbol_splits_the_partition) {
  fixture f = open_model(true, 8, 2, NULL, 0);
  cr_assert_eq(step(&f, 2, 3, true), MX_OK, "%s", mx_session_last_error(f.s));
  cr_assert_eq(step(&f, 2, 4, true), MX_OK, "%s", mx_session_last_error(f.s));
  cr_assert_eq(step(&f, 2, 5, true), MX_OK, "%s", mx_session_last_error(f.s)); /* b churns: split on a = 2 */
  mx_session_stats t = totals(&f), last;
  cr_assert_eq(t.spec_compiles, 3);
  cr_assert_eq(t.spec_fallbacks, 1);
  for (int64_t b = 6; b < 12; b++)
    cr_assert_eq(step(&f, 2, b, true), MX_OK, "%s", mx_session_last_error(f.s));
  t = totals(&f);
  cr_assert_eq(t.spec_compiles, 3, "every new b is served by the split specialization");
  cr_assert_eq(mx_session_get_stats(f.s, &last, NULL), MX_OK);
  cr_assert_eq(last.spec_hits, 1);
  cr_assert_geq(last.static_executes, 1, "the ops over a alone run as a static model");
  cr_assert_eq(step(&f, 2, 4, true), MX_OK); /* still served by its whole specialization */
  cr_assert_eq(step(&f, 3, 7, true), MX_OK, "%s", mx_session_last_error(f.s)); /* a new a: another split */
  cr_assert_eq(step(&f, 3, 9, true), MX_OK, "%s", mx_session_last_error(f.s));
  t = totals(&f);
  cr_assert_eq(t.spec_compiles, 4);
  close_model(&f);
}

/* A gear binding some of a partition's symbols compiles a split specialization at load. */
Test(session_spec, partial_gear_gives_a_split_specialization) {
  const char *gears[] = {"a=2"};
  fixture f = open_model(true, 8, 4, gears, 1);
  cr_assert_eq(totals(&f).spec_compiles, 1);
  for (int64_t b = 1; b < 6; b++) cr_assert_eq(step(&f, 2, b, true), MX_OK, "%s", mx_session_last_error(f.s));
  mx_session_stats t = totals(&f);
  cr_assert_eq(t.spec_compiles, 1);
  cr_assert_eq(t.spec_hits, 5);
  close_model(&f);
}

/* The executors other than the sequential one, and several streams, run specializations too. */
Test(session_spec, multi_stream_multi_thread) {
  mx_session_options o;
  mx_session_options_init(&o);
  o.streams = 2;
  o.executor = MX_EXECUTOR_MULTI_THREAD;
  o.spec_churn_limit = 2;
  fixture f = {.two = true};
  mx_error err;
  cr_assert_eq(mx_session_create(&o, &f.s, &err), MX_OK, "%s", err.message);
  cr_assert_eq(mx_session_load_graph(f.s, model(true)), MX_OK, "%s", mx_session_last_error(f.s));
  f.ref = model(true);
  for (int64_t b = 1; b < 8; b++)
    cr_assert_eq(step(&f, 1 + b % 2, b, true), MX_OK, "%s", mx_session_last_error(f.s));
  close_model(&f);
}

/* A model saved as .mxm and restored specializes the same way (the analysis runs on the
 * restored bodies), declared gears included. */
Test(session_spec, restored_mxm_specializes) {
  fixture f = open_model(true, 8, 2, NULL, 0);
  cr_assert_eq(step(&f, 2, 3, true), MX_OK); /* saved while a specialization serves the partition */
  char path[] = "/tmp/mixrt-spec-XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  close(fd);
  cr_assert_eq(mx_session_save(f.s, path, NULL), MX_OK, "%s", mx_session_last_error(f.s));
  mx_session_destroy(f.s);
  mx_session_options o;
  mx_session_options_init(&o);
  const char *gears[] = {"a=3,b=5"};
  o.gears = gears;
  o.n_gears = 1;
  mx_error err;
  cr_assert_eq(mx_session_create(&o, &f.s, &err), MX_OK, "%s", err.message);
  cr_assert_eq(mx_session_load_file(f.s, path), MX_OK, "%s", mx_session_last_error(f.s));
  remove(path);
  cr_assert_eq(totals(&f).spec_compiles, 1, "the gear compiled at load");
  cr_assert_eq(step(&f, 3, 5, true), MX_OK, "%s", mx_session_last_error(f.s));
  cr_assert_eq(step(&f, 2, 5, true), MX_OK, "%s", mx_session_last_error(f.s));
  mx_session_stats t = totals(&f);
  cr_assert_eq(t.spec_hits, 1);
  cr_assert_eq(t.spec_compiles, 2);
  close_model(&f);
}

/* The Chrome trace marks compiles on the host lane and specialized executions on a stream. */
Test(session_spec, trace_marks_compiles) {
  fixture f = open_model(false, 8, 4, NULL, 0);
  cr_assert_eq(mx_session_trace_begin(f.s), MX_OK);
  cr_assert_eq(step(&f, 3, 0, false), MX_OK);
  cr_assert_eq(step(&f, 3, 0, false), MX_OK);
  char path[] = "/tmp/mixrt-spec-trace-XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  close(fd);
  cr_assert_eq(mx_session_trace_end(f.s, path), MX_OK, "%s", mx_session_last_error(f.s));
  FILE *in = fopen(path, "rb");
  cr_assert_not_null(in);
  char *text = calloc(1, 1 << 20);
  size_t n = fread(text, 1, (1 << 20) - 1, in);
  fclose(in);
  remove(path);
  cr_assert_gt(n, 0);
  cr_assert(strstr(text, "\"specialize partition_"), "no compile slice");
  cr_assert(strstr(text, " a=3\""), "the compile slice names the binding");
  cr_assert(strstr(text, "\"specialized partition_"), "no specialized execution slice");
  free(text);
  close_model(&f);
}
