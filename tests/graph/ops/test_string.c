/* Inference tests of the string, ml and training groups (graph/ops/string.c, ml.c, training.c):
 * string outputs keep symbolic shapes (StringSplit and StringNormalizer give fresh symbols for
 * the widths only the data decides), Equal takes strings, the ai.onnx.ml and training ops keep
 * their inputs' shapes, and bad dtypes, shapes and attributes are refused naming the cause. */
#include <criterion/criterion.h>
#include <string.h>

#include "graph/ir.h"
#include "graph/ops/op.h"
#include "graph/ops/ops_support.h"
#include "mixrt/graph.h"
#include "mixrt/onnx.h"
#include "mixrt/reference.h"
#include "mixrt/tensor.h"

static void setup(void) { mxt_ops_setup("string"); }

TestSuite(string_infer, .init = setup, .fini = mxt_ops_teardown);

/* A node of (domain, op) with n_out outputs written to outs; the status of adding it. */
static mx_status node(const char *domain, const char *type, const mx_value_id *in, size_t n,
                      const mx_attr *attrs, size_t na, mx_value_id *outs, size_t n_out) {
  mx_node_desc d = {.op_type = type,
                    .domain = domain,
                    .inputs = in,
                    .n_inputs = n,
                    .attrs = attrs,
                    .n_attrs = na,
                    .n_outputs = n_out};
  return mx_graph_add_node(G, &d, outs);
}

/* The node is refused when added or when inferred, with needle in the message. */
static void refused(const char *domain, const char *type, const mx_value_id *in, size_t n,
                    const mx_attr *attrs, size_t na, size_t n_out, const char *needle) {
  mx_value_id outs[8];
  mx_status st = node(domain, type, in, n, attrs, na, outs, n_out);
  if (st == MX_OK) st = mx_graph_infer(G);
  cr_assert_neq(st, MX_OK, "%s was accepted", type);
  cr_assert(strstr(mx_graph_last_error(G), needle), "message: %s", mx_graph_last_error(G));
}

/* --- string ops ------------------------------------------------------------------------------- */

Test(string_infer, concat_broadcasts_symbolic_shapes) {
  mx_value_id in[2] = {input("a", MX_STRING, SHAPE(S("n"), 1)), input("b", MX_STRING, SHAPE(3))};
  mx_value_id y = op("StringConcat", in, 2, NULL, 0);
  infer_ok();
  expect_shape(y, MX_STRING, SHAPE(S("n"), 3));
}

Test(string_infer, concat_refuses_numbers) {
  mx_value_id in[2] = {input("a", MX_STRING, SHAPE(2)), input("b", MX_FLOAT32, SHAPE(2))};
  op("StringConcat", in, 2, NULL, 0);
  infer_fails(MX_ERR_DTYPE, "string");
}

Test(string_infer, split_adds_a_symbolic_width_and_counts) {
  mx_value_id x = input("x", MX_STRING, SHAPE(S("n"), 2)), outs[2];
  mx_attr a = mx_attr_string("delimiter", ",");
  cr_assert_eq(node(NULL, "StringSplit", &x, 1, &a, 1, outs, 2), MX_OK, "%s", mx_graph_last_error(G));
  infer_ok();
  mx_shape y = shape_of(outs[0]);
  cr_assert_eq(y.rank, 3);
  cr_assert_eq(y.dims[0], S("n"));
  cr_assert_eq(y.dims[1], C(2));
  cr_assert(!mx_dim_is_concrete(y.dims[2]), "the width is only known from the data");
  expect_shape(outs[1], MX_INT64, SHAPE(S("n"), 2));
}

Test(string_infer, split_refuses_a_negative_maxsplit) {
  mx_value_id x = input("x", MX_STRING, SHAPE(2));
  mx_attr a = mx_attr_int("maxsplit", -2);
  refused(NULL, "StringSplit", &x, 1, &a, 1, 2, "maxsplit");
}

Test(string_infer, normalizer_takes_c_or_1_by_c) {
  mx_value_id x = input("x", MX_STRING, SHAPE(1, 4));
  mx_attr a[2] = {mx_attr_string("case_change_action", "LOWER"), mx_attr_string("locale", "en_US")};
  mx_value_id y = op("StringNormalizer", &x, 1, a, 2);
  infer_ok();
  mx_shape s = shape_of(y);
  cr_assert_eq(s.rank, 2);
  cr_assert_eq(s.dims[0], C(1));
  cr_assert_eq(mx_graph_value_dtype(G, y), MX_STRING);
}

Test(string_infer, normalizer_refuses_2_by_c) {
  mx_value_id x = input("x", MX_STRING, SHAPE(2, 4));
  op("StringNormalizer", &x, 1, NULL, 0);
  infer_fails(MX_ERR_SHAPE, "[1, C]");
}

Test(string_infer, normalizer_refuses_an_unknown_case_action) {
  mx_value_id x = input("x", MX_STRING, SHAPE(4));
  mx_attr a = mx_attr_string("case_change_action", "TITLE");
  refused(NULL, "StringNormalizer", &x, 1, &a, 1, 1, "case_change_action");
}

Test(string_infer, regex_gives_bools_of_the_input_shape) {
  mx_value_id x = input("x", MX_STRING, SHAPE(S("n"), 3));
  mx_attr a = mx_attr_string("pattern", "(\\W|^)[\\w.\\-]{0,25}@(yahoo|gmail)\\.com(\\W|$)");
  mx_value_id y = op("RegexFullMatch", &x, 1, &a, 1);
  infer_ok();
  expect_shape(y, MX_BOOL, SHAPE(S("n"), 3));
}

Test(string_infer, regex_refuses_lookarounds_and_bad_patterns) {
  mx_value_id x = input("x", MX_STRING, SHAPE(2));
  mx_attr a = mx_attr_string("pattern", "a(?=b)");
  refused(NULL, "RegexFullMatch", &x, 1, &a, 1, 1, "pattern");
  mx_attr b = mx_attr_string("pattern", "a(b");
  refused(NULL, "RegexFullMatch", &x, 1, &b, 1, 1, "pattern");
}

Test(string_infer, equal_takes_strings) {
  mx_value_id in[2] = {input("a", MX_STRING, SHAPE(S("n"), 2)), input("b", MX_STRING, SHAPE(2))};
  mx_value_id y = op("Equal", in, 2, NULL, 0);
  infer_ok();
  expect_shape(y, MX_BOOL, SHAPE(S("n"), 2));
}

/* --- runs through the reference interpreter ---------------------------------------------------- */

/* A 1-D string tensor over caller-owned strings. */
static mx_tensor strings_1d(const char **strs, int64_t n) {
  mx_tensor t = {.dtype = MX_STRING, .rank = 1, .dims = {n}, .data = (void *)strs, .placement = MX_HOST};
  return t;
}

/* Marks outs as G's outputs, infers, runs G on in and fills results (released by the caller). */
static void run(const mx_tensor *in, size_t n_in, const mx_value_id *outs, mx_tensor *results, size_t n_out) {
  for (size_t i = 0; i < n_out; i++) cr_assert_eq(mx_graph_add_output(G, outs[i]), MX_OK);
  infer_ok();
  mx_error err = {0};
  memset(results, 0, n_out * sizeof *results);
  cr_assert_eq(mx_reference_run(G, in, n_in, results, n_out, &err), MX_OK, "%s", err.message);
}

static const char *str_at(const mx_tensor *t, int64_t i) {
  const char *s = ((char *const *)t->data)[i];
  return s ? s : "";
}

Test(string_infer, split_runs_with_padding_and_counts) {
  const char *xs[] = {"a,b,,c", "d", ""};
  mx_value_id x = input("x", MX_STRING, SHAPE(3)), outs[2];
  mx_attr a = mx_attr_string("delimiter", ",");
  cr_assert_eq(node(NULL, "StringSplit", &x, 1, &a, 1, outs, 2), MX_OK, "%s", mx_graph_last_error(G));
  mx_tensor in = strings_1d(xs, 3), res[2];
  run(&in, 1, outs, res, 2);
  cr_assert_eq(res[0].rank, 2);
  cr_assert_eq(res[0].dims[1], 4);
  static const char *const want[] = {"a", "b", "", "c", "d", "", "", "", "", "", "", ""};
  for (int i = 0; i < 12; i++) cr_assert_str_eq(str_at(&res[0], i), want[i], "element %d", i);
  static const int64_t counts[] = {4, 1, 1};
  for (int i = 0; i < 3; i++) cr_assert_eq(((int64_t *)res[1].data)[i], counts[i]);
  mx_tensor_release(&res[0]);
  mx_tensor_release(&res[1]);
}

Test(string_infer, normalizer_runs_to_one_empty_string_when_all_are_stopwords) {
  const char *xs[] = {"Monday", "monday"};
  static const char *const stop[] = {"monday"};
  mx_value_id x = input("x", MX_STRING, SHAPE(2));
  mx_attr a[2] = {{.name = "stopwords", .type = MX_ATTR_STRINGS, .strings = stop, .count = 1},
                  mx_attr_string("case_change_action", "UPPER")};
  mx_value_id y = op("StringNormalizer", &x, 1, a, 2);
  mx_tensor in = strings_1d(xs, 2), res;
  run(&in, 1, &y, &res, 1);
  cr_assert_eq(res.rank, 1);
  cr_assert_eq(res.dims[0], 1);
  cr_assert_str_eq(str_at(&res, 0), "");
  mx_tensor_release(&res);
}

Test(string_infer, tfidf_counts_string_bigrams_with_skips) {
  const char *xs[] = {"a", "b", "x", "a", "c", "b"};
  static const char *const pool[] = {"a", "b", "a", "c"};
  static const int64_t counts[] = {0, 0}, indexes[] = {0, 1};
  mx_value_id x = input("x", MX_STRING, SHAPE(6));
  mx_attr a[7] = {mx_attr_int("max_gram_length", 2),
                  mx_attr_int("min_gram_length", 2),
                  mx_attr_int("max_skip_count", 1),
                  mx_attr_string("mode", "TF"),
                  mx_attr_ints("ngram_counts", counts, 2),
                  mx_attr_ints("ngram_indexes", indexes, 2),
                  {.name = "pool_strings", .type = MX_ATTR_STRINGS, .strings = pool, .count = 4}};
  mx_value_id y = op("TfIdfVectorizer", &x, 1, a, 7);
  mx_tensor in = strings_1d(xs, 6), res;
  run(&in, 1, &y, &res, 1);
  /* (a, b): adjacent at 0 and skipping one at 3..5; (a, c): adjacent at 3. */
  cr_assert_eq(res.dims[0], 2);
  cr_assert_float_eq(((float *)res.data)[0], 2.0f, 0);
  cr_assert_float_eq(((float *)res.data)[1], 1.0f, 0);
  mx_tensor_release(&res);
}

Test(string_infer, string_constants_survive_onnx_export_and_import) {
  const char *ws[] = {"left", "", "right"};
  mx_tensor w = strings_1d(ws, 3);
  mx_value_id c, x = input("x", MX_STRING, SHAPE(3));
  cr_assert_eq(mx_graph_add_constant(G, "w", &w, &c), MX_OK, "%s", mx_graph_last_error(G));
  mx_value_id in[2] = {x, c};
  mx_value_id y = op("StringConcat", in, 2, NULL, 0);
  cr_assert_eq(mx_graph_add_output(G, y), MX_OK);
  infer_ok();
  void *bytes = NULL;
  size_t size = 0;
  mx_error err = {0};
  cr_assert_eq(mx_onnx_save_memory(G, &bytes, &size, &err), MX_OK, "%s", err.message);
  mx_graph *g2 = NULL;
  cr_assert_eq(mx_onnx_load_memory(bytes, size, NULL, &g2, &err), MX_OK, "%s", err.message);
  free(bytes);
  const char *xs[] = {"a", "b", "c"};
  mx_tensor xin = strings_1d(xs, 3), res;
  memset(&res, 0, sizeof res);
  cr_assert_eq(mx_reference_run(g2, &xin, 1, &res, 1, &err), MX_OK, "%s", err.message);
  static const char *const want[] = {"aleft", "b", "cright"};
  for (int i = 0; i < 3; i++) cr_assert_str_eq(str_at(&res, i), want[i]);
  mx_tensor_release(&res);
  mx_graph_destroy(g2);
}

/* --- ml ops ----------------------------------------------------------------------------------- */

Test(string_infer, label_encoder_maps_strings_to_int64) {
  static const char *const keys[] = {"a", "b"};
  static const int64_t values[] = {1, 2};
  mx_value_id x = input("x", MX_STRING, SHAPE(S("n"))), y;
  mx_attr a[2] = {{.name = "keys_strings", .type = MX_ATTR_STRINGS, .strings = keys, .count = 2},
                  mx_attr_ints("values_int64s", values, 2)};
  cr_assert_eq(node("ai.onnx.ml", "LabelEncoder", &x, 1, a, 2, &y, 1), MX_OK, "%s", mx_graph_last_error(G));
  infer_ok();
  expect_shape(y, MX_INT64, SHAPE(S("n")));
}

Test(string_infer, label_encoder_refuses_unequal_tables) {
  static const char *const keys[] = {"a", "b"};
  static const int64_t values[] = {1};
  mx_value_id x = input("x", MX_STRING, SHAPE(2));
  mx_attr a[2] = {{.name = "keys_strings", .type = MX_ATTR_STRINGS, .strings = keys, .count = 2},
                  mx_attr_ints("values_int64s", values, 1)};
  refused("ai.onnx.ml", "LabelEncoder", &x, 1, a, 2, 1, "values");
}

Test(string_infer, array_feature_extractor_shapes) {
  mx_value_id in[2] = {input("x", MX_FLOAT32, SHAPE(S("n"), 5)), input("i", MX_INT64, SHAPE(3))}, y;
  cr_assert_eq(node("ai.onnx.ml", "ArrayFeatureExtractor", in, 2, NULL, 0, &y, 1), MX_OK, "%s",
               mx_graph_last_error(G));
  infer_ok();
  expect_shape(y, MX_FLOAT32, SHAPE(S("n"), 3));
}

Test(string_infer, tfidf_output_width_is_the_largest_index_plus_one) {
  static const int64_t counts[] = {0, 4}, indexes[] = {0, 1, 2, 3, 4, 5, 6},
                       pool[] = {2, 3, 5, 4, 5, 6, 7, 8, 6, 7};
  mx_value_id x = input("x", MX_INT32, SHAPE(S("n"), 6));
  mx_attr a[7] = {mx_attr_int("max_gram_length", 2),       mx_attr_int("min_gram_length", 2),
                  mx_attr_int("max_skip_count", 0),        mx_attr_string("mode", "TF"),
                  mx_attr_ints("ngram_counts", counts, 2), mx_attr_ints("ngram_indexes", indexes, 7),
                  mx_attr_ints("pool_int64s", pool, 10)};
  mx_value_id y = op("TfIdfVectorizer", &x, 1, a, 7);
  infer_ok();
  expect_shape(y, MX_FLOAT32, SHAPE(S("n"), 7));
}

Test(string_infer, tfidf_refuses_a_pool_that_does_not_split_into_ngrams) {
  static const int64_t counts[] = {0, 4}, indexes[] = {0, 1, 2, 3, 4, 5}, pool[] = {2, 3, 5, 4, 5, 6, 7};
  mx_value_id x = input("x", MX_INT32, SHAPE(6));
  mx_attr a[7] = {mx_attr_int("max_gram_length", 2),       mx_attr_int("min_gram_length", 2),
                  mx_attr_int("max_skip_count", 0),        mx_attr_string("mode", "TF"),
                  mx_attr_ints("ngram_counts", counts, 2), mx_attr_ints("ngram_indexes", indexes, 6),
                  mx_attr_ints("pool_int64s", pool, 7)};
  refused(NULL, "TfIdfVectorizer", &x, 1, a, 7, 1, "ngram_counts");
}

/* --- training ops ----------------------------------------------------------------------------- */

Test(string_infer, adam_outputs_follow_x_and_states) {
  mx_value_id in[6] = {input("r", MX_FLOAT32, SHAPE()),          input("t", MX_INT64, SHAPE()),
                       input("x", MX_FLOAT32, SHAPE(S("n"), 2)), input("g", MX_FLOAT32, SHAPE(S("n"), 2)),
                       input("v", MX_FLOAT32, SHAPE(S("n"), 2)), input("h", MX_FLOAT32, SHAPE(S("n"), 2))};
  mx_value_id outs[3];
  cr_assert_eq(node("ai.onnx.preview.training", "Adam", in, 6, NULL, 0, outs, 3), MX_OK, "%s",
               mx_graph_last_error(G));
  infer_ok();
  for (int i = 0; i < 3; i++) expect_shape(outs[i], MX_FLOAT32, SHAPE(S("n"), 2));
}

Test(string_infer, momentum_refuses_a_gradient_of_another_shape) {
  mx_value_id in[5] = {input("r", MX_FLOAT32, SHAPE()), input("t", MX_INT64, SHAPE()),
                       input("x", MX_FLOAT32, SHAPE(3)), input("g", MX_FLOAT32, SHAPE(4)),
                       input("v", MX_FLOAT32, SHAPE(3))};
  mx_attr a[4] = {mx_attr_float("alpha", 0.9f), mx_attr_float("beta", 0.1f),
                  mx_attr_string("mode", "standard"), mx_attr_float("norm_coefficient", 0.0f)};
  refused("ai.onnx.preview.training", "Momentum", in, 5, a, 4, 2, "dim");
}

Test(string_infer, adagrad_refuses_a_wrong_input_count) {
  mx_value_id in[4] = {input("r", MX_FLOAT32, SHAPE()), input("t", MX_INT64, SHAPE()),
                       input("x", MX_FLOAT32, SHAPE(3)), input("g", MX_FLOAT32, SHAPE(3))};
  refused("ai.onnx.preview.training", "Adagrad", in, 4, NULL, 0, 2, "inputs");
}
