/* Hand-made hostile ONNX inputs: each must give the right status and a message naming the
 * tensor, node, input or name at fault, and never a crash or a leak. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "graph/ir.h"
#include "graph/onnx/onnx_build.h"
#include "mixrt/onnx.h"

#define FLOAT ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT
#define INT64 ONNX__TENSOR_PROTO__DATA_TYPE__INT64

/* Packs and loads m from memory (base_dir may be NULL); returns the status, *g the graph. */
static mx_status load(mxb *b, Onnx__ModelProto *m, const char *base_dir, mx_graph **g, mx_error *err) {
  size_t size;
  uint8_t *bytes = mxb_pack(b, m, &size);
  mx_status st = mx_onnx_load_memory(bytes, size, base_dir, g, err);
  if (st != MX_OK) {
    cr_assert_null(*g);
    cr_assert_eq(err->status, st);
  }
  return st;
}

/* Expects the load of m to fail with `want` and a message containing every `needles` entry. */
static void expect_failure(mxb *b, Onnx__ModelProto *m, const char *base_dir, mx_status want,
                           const char *const *needles, size_t n_needles) {
  mx_graph *g = NULL;
  mx_error err;
  mx_status st = load(b, m, base_dir, &g, &err);
  cr_assert_eq(st, want, "expected %s, got %s: %s", mx_status_name(want), mx_status_name(st),
               st == MX_OK ? "(loaded)" : err.message);
  for (size_t i = 0; i < n_needles; i++)
    cr_expect(strstr(err.message, needles[i]) != NULL, "message '%s' does not mention '%s'", err.message,
              needles[i]);
  mx_graph_destroy(g);
}

#define EXPECT_FAILURE(b, m, dir, want, ...)                                  \
  expect_failure((b), (m), (dir), (want), (const char *const[]){__VA_ARGS__}, \
                 sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *))

/* y = Add(x, w) over a float [2, 3] input and initializer w. */
static Onnx__ModelProto *add_model(mxb *b, Onnx__TensorProto *w) {
  Onnx__ModelProto *m = mxb_model(b, 17);
  mxb_input(b, m->graph, "x", FLOAT, "2,3");
  mxb_initializer(b, m->graph, w);
  mxb_node(b, m->graph, "Add", "add", "x,w", "y");
  mxb_output(b, m->graph, "y", FLOAT, "2,3");
  return m;
}

Test(onnx_hostile, raw_data_shorter_than_dims) {
  mxb b = {0};
  float data[5] = {0};
  Onnx__ModelProto *m = add_model(&b, mxb_tensor(&b, "w", FLOAT, "2,3", data, sizeof data));
  EXPECT_FAILURE(&b, m, NULL, MX_ERR_MALFORMED, "initializer 'w'", "20 bytes", "24");
  mxb_free(&b);
}

Test(onnx_hostile, raw_data_longer_than_dims) {
  mxb b = {0};
  float data[7] = {0};
  Onnx__ModelProto *m = add_model(&b, mxb_tensor(&b, "w", FLOAT, "2,3", data, sizeof data));
  EXPECT_FAILURE(&b, m, NULL, MX_ERR_MALFORMED, "initializer 'w'");
  mxb_free(&b);
}

Test(onnx_hostile, dims_whose_element_count_overflows) {
  mxb b = {0};
  Onnx__ModelProto *m = add_model(&b, mxb_tensor(&b, "w", FLOAT, "4294967296,4294967296", NULL, 0));
  EXPECT_FAILURE(&b, m, NULL, MX_ERR_LIMIT, "initializer 'w'", "64 bits");
  mxb_free(&b);
}

Test(onnx_hostile, dims_whose_byte_size_overflows) {
  mxb b = {0};
  Onnx__ModelProto *m = add_model(&b, mxb_tensor(&b, "w", FLOAT, "4611686018427387904", NULL, 0));
  EXPECT_FAILURE(&b, m, NULL, MX_ERR_LIMIT, "initializer 'w'");
  mxb_free(&b);
}

Test(onnx_hostile, huge_dims_without_data) {
  mxb b = {0};
  Onnx__ModelProto *m = add_model(&b, mxb_tensor(&b, "w", FLOAT, "1000000,1000000", NULL, 0));
  EXPECT_FAILURE(&b, m, NULL, MX_ERR_MALFORMED, "initializer 'w'", "no data");
  mxb_free(&b);
}

Test(onnx_hostile, negative_dim) {
  mxb b = {0};
  Onnx__ModelProto *m = add_model(&b, mxb_tensor(&b, "w", FLOAT, "2,-3", NULL, 0));
  EXPECT_FAILURE(&b, m, NULL, MX_ERR_MALFORMED, "initializer 'w'", "negative");
  mxb_free(&b);
}

Test(onnx_hostile, tensor_rank_above_eight) {
  mxb b = {0};
  float one = 1;
  Onnx__ModelProto *m = add_model(&b, mxb_tensor(&b, "w", FLOAT, "1,1,1,1,1,1,1,1,1", &one, sizeof one));
  EXPECT_FAILURE(&b, m, NULL, MX_ERR_UNSUPPORTED, "initializer 'w'", "rank 9");
  mxb_free(&b);
}

Test(onnx_hostile, input_rank_above_eight) {
  mxb b = {0};
  Onnx__ModelProto *m = mxb_model(&b, 17);
  mxb_input(&b, m->graph, "x", FLOAT, "1,2,3,4,5,6,7,8,9");
  mxb_node(&b, m->graph, "Relu", "r", "x", "y");
  mxb_output(&b, m->graph, "y", FLOAT, NULL);
  EXPECT_FAILURE(&b, m, NULL, MX_ERR_UNSUPPORTED, "input 'x'", "rank 9");
  mxb_free(&b);
}

Test(onnx_hostile, node_consuming_an_undefined_name) {
  mxb b = {0};
  Onnx__ModelProto *m = mxb_model(&b, 17);
  mxb_input(&b, m->graph, "x", FLOAT, "2");
  mxb_node(&b, m->graph, "Add", "adder", "x,ghost", "y");
  mxb_output(&b, m->graph, "y", FLOAT, NULL);
  EXPECT_FAILURE(&b, m, NULL, MX_ERR_INVALID_GRAPH, "'adder'", "'ghost'");
  mxb_free(&b);
}

Test(onnx_hostile, two_nodes_forming_a_cycle) {
  mxb b = {0};
  Onnx__ModelProto *m = mxb_model(&b, 17);
  mxb_input(&b, m->graph, "x", FLOAT, "2");
  mxb_node(&b, m->graph, "Add", "first", "x,b", "a");
  mxb_node(&b, m->graph, "Relu", "second", "a", "b");
  mxb_output(&b, m->graph, "b", FLOAT, NULL);
  EXPECT_FAILURE(&b, m, NULL, MX_ERR_INVALID_GRAPH, "cycle", "'first'", "'second'");
  mxb_free(&b);
}

Test(onnx_hostile, cycle_behind_other_nodes) {
  mxb b = {0};
  Onnx__ModelProto *m = mxb_model(&b, 17);
  mxb_input(&b, m->graph, "x", FLOAT, "2");
  mxb_node(&b, m->graph, "Relu", "downstream", "c", "d"); /* waits for the cycle, not on it */
  mxb_node(&b, m->graph, "Add", "p", "x,r", "q");
  mxb_node(&b, m->graph, "Neg", "r_node", "q", "r");
  mxb_node(&b, m->graph, "Neg", "c_node", "r", "c");
  mxb_output(&b, m->graph, "d", FLOAT, NULL);
  mx_graph *g = NULL;
  mx_error err;
  cr_assert_eq(load(&b, m, NULL, &g, &err), MX_ERR_INVALID_GRAPH);
  cr_expect(strstr(err.message, "cycle"), "%s", err.message);
  cr_expect(!strstr(err.message, "downstream"), "names a node that is not on the cycle: %s", err.message);
  mxb_free(&b);
}

Test(onnx_hostile, node_using_its_own_output) {
  mxb b = {0};
  Onnx__ModelProto *m = mxb_model(&b, 17);
  mxb_input(&b, m->graph, "x", FLOAT, "2");
  mxb_node(&b, m->graph, "Add", "loop", "x,y", "y");
  mxb_output(&b, m->graph, "y", FLOAT, NULL);
  EXPECT_FAILURE(&b, m, NULL, MX_ERR_INVALID_GRAPH, "'loop'", "'y'");
  mxb_free(&b);
}

Test(onnx_hostile, value_produced_twice) {
  mxb b = {0};
  Onnx__ModelProto *m = mxb_model(&b, 17);
  mxb_input(&b, m->graph, "x", FLOAT, "2");
  mxb_node(&b, m->graph, "Relu", "one", "x", "y");
  mxb_node(&b, m->graph, "Neg", "two", "x", "y");
  mxb_output(&b, m->graph, "y", FLOAT, NULL);
  EXPECT_FAILURE(&b, m, NULL, MX_ERR_INVALID_GRAPH, "'two'", "'one'", "'y'");
  mxb_free(&b);
}

Test(onnx_hostile, node_output_shadowing_an_input) {
  mxb b = {0};
  Onnx__ModelProto *m = mxb_model(&b, 17);
  mxb_input(&b, m->graph, "x", FLOAT, "2");
  mxb_node(&b, m->graph, "Relu", "r", "x", "x");
  mxb_output(&b, m->graph, "x", FLOAT, NULL);
  EXPECT_FAILURE(&b, m, NULL, MX_ERR_INVALID_GRAPH, "'r'", "'x'");
  mxb_free(&b);
}

Test(onnx_hostile, unsupported_initializer_dtype) {
  mxb b = {0};
  double raw[6] = {0};
  Onnx__ModelProto *m =
      add_model(&b, mxb_tensor(&b, "w", ONNX__TENSOR_PROTO__DATA_TYPE__COMPLEX128, "3", raw, sizeof raw));
  EXPECT_FAILURE(&b, m, NULL, MX_ERR_UNSUPPORTED, "initializer 'w'", "complex128");
  mxb_free(&b);
}

Test(onnx_hostile, string_initializer) {
  mxb b = {0};
  Onnx__ModelProto *m =
      add_model(&b, mxb_tensor(&b, "w", ONNX__TENSOR_PROTO__DATA_TYPE__STRING, "", NULL, 0));
  /* Strings are a mixrt type; a scalar string needs its one value in string_data. */
  EXPECT_FAILURE(&b, m, NULL, MX_ERR_MALFORMED, "initializer 'w'", "string_data");
  mxb_free(&b);
}

Test(onnx_hostile, unsupported_input_dtype) {
  mxb b = {0};
  Onnx__ModelProto *m = mxb_model(&b, 17);
  mxb_input(&b, m->graph, "q", ONNX__TENSOR_PROTO__DATA_TYPE__COMPLEX64, "2");
  mxb_node(&b, m->graph, "Identity", "id", "q", "y");
  mxb_output(&b, m->graph, "y", 0, NULL);
  EXPECT_FAILURE(&b, m, NULL, MX_ERR_UNSUPPORTED, "input 'q'", "complex64");
  mxb_free(&b);
}

Test(onnx_hostile, element_type_out_of_range) {
  mxb b = {0};
  Onnx__ModelProto *m = add_model(&b, mxb_tensor(&b, "w", 12345, "1", "abcd", 4));
  EXPECT_FAILURE(&b, m, NULL, MX_ERR_UNSUPPORTED, "initializer 'w'", "12345");
  mxb_free(&b);
}

Test(onnx_hostile, sequence_input) {
  mxb b = {0};
  Onnx__ModelProto *m = mxb_model(&b, 17);
  Onnx__ValueInfoProto *vi = mxb_input(&b, m->graph, "s", 0, NULL);
  Onnx__TypeProto *tp = mxb_alloc(&b, sizeof *tp);
  onnx__type_proto__init(tp);
  Onnx__TypeProto__Sequence *seq = mxb_alloc(&b, sizeof *seq);
  onnx__type_proto__sequence__init(seq);
  tp->value_case = ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE;
  tp->sequence_type = seq;
  vi->type = tp;
  mxb_node(&b, m->graph, "SequenceLength", "len", "s", "n");
  mxb_output(&b, m->graph, "n", INT64, "");
  EXPECT_FAILURE(&b, m, NULL, MX_ERR_UNSUPPORTED, "input 's'", "sequence");
  mxb_free(&b);
}

Test(onnx_hostile, bad_negative_input_dim) {
  mxb b = {0};
  Onnx__ModelProto *m = mxb_model(&b, 17);
  mxb_input(&b, m->graph, "x", FLOAT, "2,-7");
  mxb_node(&b, m->graph, "Relu", "r", "x", "y");
  mxb_output(&b, m->graph, "y", FLOAT, NULL);
  EXPECT_FAILURE(&b, m, NULL, MX_ERR_MALFORMED, "input 'x'", "-7");
  mxb_free(&b);
}

Test(onnx_hostile, typed_field_count_mismatch) {
  mxb b = {0};
  Onnx__TensorProto *w = mxb_tensor(&b, "w", FLOAT, "2,3", NULL, 0);
  w->n_float_data = 4;
  w->float_data = mxb_alloc(&b, 4 * sizeof(float));
  Onnx__ModelProto *m = add_model(&b, w);
  EXPECT_FAILURE(&b, m, NULL, MX_ERR_MALFORMED, "initializer 'w'", "float_data", "4 values");
  mxb_free(&b);
}

Test(onnx_hostile, typed_field_of_another_type) {
  mxb b = {0};
  Onnx__TensorProto *w = mxb_tensor(&b, "w", FLOAT, "2", NULL, 0);
  w->n_int64_data = 2;
  w->int64_data = mxb_alloc(&b, 2 * sizeof(int64_t));
  Onnx__ModelProto *m = add_model(&b, w);
  EXPECT_FAILURE(&b, m, NULL, MX_ERR_MALFORMED, "initializer 'w'", "int64_data");
  mxb_free(&b);
}

Test(onnx_hostile, data_in_two_places) {
  mxb b = {0};
  float raw[2] = {1, 2};
  Onnx__TensorProto *w = mxb_tensor(&b, "w", FLOAT, "2", raw, sizeof raw);
  w->n_float_data = 2;
  w->float_data = mxb_alloc(&b, 2 * sizeof(float));
  Onnx__ModelProto *m = add_model(&b, w);
  EXPECT_FAILURE(&b, m, NULL, MX_ERR_MALFORMED, "initializer 'w'", "more than one place");
  mxb_free(&b);
}

Test(onnx_hostile, sparse_attribute) {
  mxb b = {0};
  Onnx__ModelProto *m = mxb_model(&b, 17);
  mxb_input(&b, m->graph, "x", FLOAT, "2");
  Onnx__NodeProto *n = mxb_node(&b, m->graph, "Custom", "odd", "x", "y");
  Onnx__AttributeProto *a = mxb_attr(&b, n, "weights", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSOR);
  Onnx__SparseTensorProto *sp = mxb_alloc(&b, sizeof *sp);
  onnx__sparse_tensor_proto__init(sp);
  a->sparse_tensor = sp;
  mxb_output(&b, m->graph, "y", FLOAT, NULL);
  EXPECT_FAILURE(&b, m, NULL, MX_ERR_UNSUPPORTED, "'odd'", "'weights'", "SPARSE_TENSOR");
  mxb_free(&b);
}

Test(onnx_hostile, type_proto_attribute) {
  mxb b = {0};
  Onnx__ModelProto *m = mxb_model(&b, 17);
  mxb_input(&b, m->graph, "x", FLOAT, "2");
  Onnx__NodeProto *n = mxb_node(&b, m->graph, "Custom", "typed", "x", "y");
  Onnx__AttributeProto *a = mxb_attr(&b, n, "ty", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTO);
  Onnx__TypeProto *tp = mxb_alloc(&b, sizeof *tp);
  onnx__type_proto__init(tp);
  a->tp = tp;
  mxb_output(&b, m->graph, "y", FLOAT, NULL);
  EXPECT_FAILURE(&b, m, NULL, MX_ERR_UNSUPPORTED, "'typed'", "'ty'", "TYPE_PROTO");
  mxb_free(&b);
}

Test(onnx_hostile, function_attribute_reference_outside_a_function) {
  mxb b = {0};
  Onnx__ModelProto *m = mxb_model(&b, 17);
  mxb_input(&b, m->graph, "x", FLOAT, "2");
  Onnx__NodeProto *n = mxb_node(&b, m->graph, "LeakyRelu", "lr", "x", "y");
  Onnx__AttributeProto *a = mxb_attr(&b, n, "alpha", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
  a->ref_attr_name = mxb_str(&b, "slope");
  mxb_output(&b, m->graph, "y", FLOAT, NULL);
  EXPECT_FAILURE(&b, m, NULL, MX_ERR_INVALID_GRAPH, "'lr'", "'alpha'", "'slope'");
  mxb_free(&b);
}

Test(onnx_hostile, string_constant) {
  mxb b = {0};
  Onnx__ModelProto *m = mxb_model(&b, 17);
  Onnx__NodeProto *n = mxb_node(&b, m->graph, "Constant", "words", NULL, "c");
  mxb_attr_string(&b, n, "value_string", "hello");
  mxb_output(&b, m->graph, "c", 0, NULL);
  EXPECT_FAILURE(&b, m, NULL, MX_ERR_UNSUPPORTED, "'words'", "value_string");
  mxb_free(&b);
}

Test(onnx_hostile, sparse_constant) {
  mxb b = {0};
  Onnx__ModelProto *m = mxb_model(&b, 17);
  Onnx__NodeProto *n = mxb_node(&b, m->graph, "Constant", "sparse", NULL, "c");
  Onnx__AttributeProto *a =
      mxb_attr(&b, n, "sparse_value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSOR);
  Onnx__SparseTensorProto *sp = mxb_alloc(&b, sizeof *sp);
  onnx__sparse_tensor_proto__init(sp);
  a->sparse_tensor = sp;
  mxb_output(&b, m->graph, "c", 0, NULL);
  EXPECT_FAILURE(&b, m, NULL, MX_ERR_UNSUPPORTED, "'sparse'", "sparse_value");
  mxb_free(&b);
}

Test(onnx_hostile, string_attribute_with_nul_byte) {
  mxb b = {0};
  Onnx__ModelProto *m = mxb_model(&b, 17);
  mxb_input(&b, m->graph, "x", FLOAT, "2");
  Onnx__NodeProto *n = mxb_node(&b, m->graph, "Custom", "nul", "x", "y");
  mxb_attr_string(&b, n, "mode", "abc");
  n->attribute[0]->s.data[1] = '\0';
  mxb_output(&b, m->graph, "y", FLOAT, NULL);
  EXPECT_FAILURE(&b, m, NULL, MX_ERR_UNSUPPORTED, "'nul'", "'mode'", "NUL");
  mxb_free(&b);
}

Test(onnx_hostile, subgraph_using_an_undefined_outer_name) {
  mxb b = {0};
  Onnx__ModelProto *m = mxb_model(&b, 17);
  mxb_input(&b, m->graph, "cond", ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, "");
  Onnx__GraphProto *then_g = mxb_graph(&b, "then");
  mxb_node(&b, then_g, "Identity", "t", "phantom", "t_out");
  mxb_output(&b, then_g, "t_out", FLOAT, NULL);
  Onnx__GraphProto *else_g = mxb_graph(&b, "else");
  mxb_node(&b, else_g, "Identity", "e", "cond", "e_out");
  mxb_output(&b, else_g, "e_out", FLOAT, NULL);
  Onnx__NodeProto *n = mxb_node(&b, m->graph, "If", "branch", "cond", "y");
  mxb_attr_graph(&b, n, "then_branch", then_g);
  mxb_attr_graph(&b, n, "else_branch", else_g);
  mxb_output(&b, m->graph, "y", FLOAT, NULL);
  EXPECT_FAILURE(&b, m, NULL, MX_ERR_INVALID_GRAPH, "'branch'", "'phantom'");
  mxb_free(&b);
}

Test(onnx_hostile, graph_output_naming_nothing) {
  mxb b = {0};
  Onnx__ModelProto *m = mxb_model(&b, 17);
  mxb_input(&b, m->graph, "x", FLOAT, "2");
  mxb_output(&b, m->graph, "nowhere", FLOAT, NULL);
  EXPECT_FAILURE(&b, m, NULL, MX_ERR_INVALID_GRAPH, "'nowhere'");
  mxb_free(&b);
}

Test(onnx_hostile, duplicate_initializer) {
  mxb b = {0};
  float v = 1;
  Onnx__ModelProto *m = add_model(&b, mxb_tensor(&b, "w", FLOAT, "", &v, sizeof v));
  mxb_initializer(&b, m->graph, mxb_tensor(&b, "w", FLOAT, "", &v, sizeof v));
  EXPECT_FAILURE(&b, m, NULL, MX_ERR_INVALID_GRAPH, "'w'", "twice");
  mxb_free(&b);
}

Test(onnx_hostile, opset_without_version) {
  mxb b = {0};
  Onnx__ModelProto *m = mxb_model(&b, 17);
  mxb_opset(&b, m, "com.example", 0);
  EXPECT_FAILURE(&b, m, NULL, MX_ERR_MALFORMED, "com.example");
  mxb_free(&b);
}

Test(onnx_hostile, model_without_graph) {
  mxb b = {0};
  Onnx__ModelProto *m = mxb_model(&b, 17);
  m->graph = NULL;
  EXPECT_FAILURE(&b, m, NULL, MX_ERR_MALFORMED, "no graph");
  mxb_free(&b);
}

Test(onnx_hostile, garbage_bytes) {
  static const uint8_t junk[] = {0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01, 0x02};
  mx_graph *g = NULL;
  mx_error err;
  cr_assert_eq(mx_onnx_load_memory(junk, sizeof junk, NULL, &g, &err), MX_ERR_MALFORMED);
  cr_assert_null(g);
  cr_expect(strstr(err.message, "byte"), "%s", err.message);
  static const uint8_t group[] = {0x0b, 0x0c};
  cr_assert_eq(mx_onnx_load_memory(group, sizeof group, NULL, &g, &err), MX_ERR_MALFORMED);
  cr_assert_eq(mx_onnx_load_memory("", 0, NULL, &g, &err), MX_ERR_MALFORMED);
  cr_expect(strstr(err.message, "no graph"), "%s", err.message);
}

Test(onnx_hostile, wrong_wire_type_for_a_known_field) {
  /* ModelProto field 7 (graph) is a message; here it is a varint. */
  static const uint8_t bytes[] = {0x08, 0x08, 0x38, 0x05};
  mx_graph *g = NULL;
  mx_error err;
  mx_status st = mx_onnx_load_memory(bytes, sizeof bytes, NULL, &g, &err);
  cr_assert_eq(st, MX_ERR_MALFORMED, "%s", err.message);
  cr_assert_null(g);
}

/* Writes `levels` nested GraphProto attributes as raw protobuf bytes:
 * model{ graph{ node{ attribute{ g: graph{ node{ ... } } } } } }. Built inside-out, from the
 * end of a buffer towards its start, so each level costs a few bytes and no copying. */
static uint8_t *nested_model(size_t levels, size_t *size) {
  size_t cap = levels * 16 + 64, pos = cap;
  uint8_t *buf = malloc(cap);
  cr_assert_not_null(buf);
  for (size_t i = 0; i <= levels; i++) {
    static const uint8_t tags[3] = {0x32, 0x2a, 0x0a}; /* attribute.g, node.attribute, graph.node */
    for (int k = 0; k < (i == levels ? 1 : 3); k++) {
      uint8_t tag = i == levels ? 0x3a : tags[k]; /* the outermost: ModelProto.graph */
      uint8_t varint[10];
      size_t len = cap - pos, nv = 0;
      do {
        varint[nv++] = (uint8_t)((len & 0x7f) | (len > 0x7f ? 0x80 : 0));
        len >>= 7;
      } while (len);
      pos -= nv;
      memcpy(buf + pos, varint, nv);
      buf[--pos] = tag;
    }
  }
  *size = cap - pos;
  uint8_t *out = malloc(*size);
  cr_assert_not_null(out);
  memcpy(out, buf + pos, *size);
  free(buf);
  return out;
}

Test(onnx_hostile, deeply_nested_subgraphs_do_not_exhaust_the_stack) {
  size_t size;
  uint8_t *bytes = nested_model(200000, &size);
  mx_graph *g = NULL;
  mx_error err;
  mx_status st = mx_onnx_load_memory(bytes, size, NULL, &g, &err);
  cr_assert_eq(st, MX_ERR_LIMIT, "%s: %s", mx_status_name(st), err.message);
  cr_expect(strstr(err.message, "levels deep"), "%s", err.message);
  cr_assert_null(g);
  free(bytes);
}

Test(onnx_hostile, nesting_within_the_limits_still_loads_or_fails_cleanly) {
  size_t size;
  uint8_t *bytes = nested_model(20, &size);
  mx_graph *g = NULL;
  mx_error err;
  mx_status st = mx_onnx_load_memory(bytes, size, NULL, &g, &err);
  /* Nodes without an op type: a clean MX_ERR_MALFORMED naming the node. */
  cr_assert_eq(st, MX_ERR_MALFORMED, "%s: %s", mx_status_name(st), err.message);
  cr_expect(strstr(err.message, "op_type"), "%s", err.message);
  free(bytes);
}

/* --- external data ---------------------------------------------------------------------------- */

/* A fresh temporary directory (malloc'd path). */
static char *temp_dir(void) {
  char *t = strdup("/tmp/mixrt-onnx-XXXXXX");
  cr_assert_not_null(mkdtemp(t), "mkdtemp: %s", strerror(errno));
  return t;
}

static char *path_in(const char *dir, const char *leaf) {
  size_t n = strlen(dir) + strlen(leaf) + 2;
  char *p = malloc(n);
  snprintf(p, n, "%s/%s", dir, leaf);
  return p;
}

/* A model whose initializer w (float [2, 3]) lives in external file `location`. */
static Onnx__ModelProto *external_model(mxb *b, const char *location, const char *offset,
                                        const char *length) {
  Onnx__TensorProto *w = mxb_tensor(b, "w", FLOAT, "2,3", NULL, 0);
  mxb_external(b, w, "location", location);
  if (offset) mxb_external(b, w, "offset", offset);
  if (length) mxb_external(b, w, "length", length);
  return add_model(b, w);
}

Test(onnx_hostile, external_data_escaping_the_directory) {
  mxb b = {0};
  char *dir = temp_dir();
  char *sub = path_in(dir, "model");
  cr_assert_eq(mkdir(sub, 0700), 0);
  float w[6] = {1, 2, 3, 4, 5, 6};
  char *outside = path_in(dir, "secret.bin");
  cr_assert_eq(mxb_write_file(outside, w, sizeof w), 0);

  EXPECT_FAILURE(&b, external_model(&b, "../secret.bin", NULL, NULL), sub, MX_ERR_MALFORMED,
                 "initializer 'w'", "../secret.bin");
  EXPECT_FAILURE(&b, external_model(&b, "a/../../secret.bin", NULL, NULL), sub, MX_ERR_MALFORMED,
                 "initializer 'w'");
  EXPECT_FAILURE(&b, external_model(&b, outside, NULL, NULL), sub, MX_ERR_MALFORMED, "initializer 'w'",
                 "absolute");
  /* A symbolic link inside the directory that points outside it. */
  char *link = path_in(sub, "link.bin");
  cr_assert_eq(symlink(outside, link), 0);
  EXPECT_FAILURE(&b, external_model(&b, "link.bin", NULL, NULL), sub, MX_ERR_MALFORMED, "initializer 'w'",
                 "outside");
  /* From memory without a base directory, external data is refused. */
  EXPECT_FAILURE(&b, external_model(&b, "w.bin", NULL, NULL), NULL, MX_ERR_INVALID_ARGUMENT,
                 "initializer 'w'", "w.bin");
  unlink(link);
  unlink(outside);
  rmdir(sub);
  rmdir(dir);
  free(link);
  free(outside);
  free(sub);
  free(dir);
  mxb_free(&b);
}

Test(onnx_hostile, external_data_sizes_are_checked) {
  mxb b = {0};
  char *dir = temp_dir();
  float w[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  char *file = path_in(dir, "w.bin");
  cr_assert_eq(mxb_write_file(file, w, sizeof w), 0); /* 32 bytes; the tensor needs 24 */

  /* Whole file (no length): 32 bytes for a 24-byte tensor. */
  EXPECT_FAILURE(&b, external_model(&b, "w.bin", NULL, NULL), dir, MX_ERR_MALFORMED, "initializer 'w'", "32");
  EXPECT_FAILURE(&b, external_model(&b, "w.bin", "0", "20"), dir, MX_ERR_MALFORMED, "initializer 'w'",
                 "length 20");
  EXPECT_FAILURE(&b, external_model(&b, "w.bin", "16", "24"), dir, MX_ERR_MALFORMED, "initializer 'w'",
                 "past the end");
  EXPECT_FAILURE(&b, external_model(&b, "w.bin", "64", "24"), dir, MX_ERR_MALFORMED, "initializer 'w'",
                 "offset 64");
  EXPECT_FAILURE(&b, external_model(&b, "w.bin", "-4", "24"), dir, MX_ERR_MALFORMED, "initializer 'w'",
                 "offset");
  EXPECT_FAILURE(&b, external_model(&b, "w.bin", "99999999999999999999999", "24"), dir, MX_ERR_MALFORMED,
                 "initializer 'w'");
  EXPECT_FAILURE(&b, external_model(&b, "missing.bin", NULL, NULL), dir, MX_ERR_IO, "initializer 'w'",
                 "missing.bin", "No such file");
  EXPECT_FAILURE(&b, external_model(&b, "", NULL, NULL), dir, MX_ERR_MALFORMED, "initializer 'w'",
                 "location");

  /* The right region loads. */
  mx_graph *g = NULL;
  mx_error err;
  cr_assert_eq(load(&b, external_model(&b, "w.bin", "8", "24"), dir, &g, &err), MX_OK, "%s", err.message);
  const mx_tensor *t = mx_graph_value_constant(g, mx_graph_find_value(g, "w"));
  cr_assert_not_null(t);
  cr_expect_eq(((const float *)t->data)[0], 3.0f);
  cr_expect_eq(((const float *)t->data)[5], 8.0f);
  mx_graph_destroy(g);
  unlink(file);
  rmdir(dir);
  free(file);
  free(dir);
  mxb_free(&b);
}

Test(onnx_hostile, external_data_in_a_fifo_does_not_hang) {
  mxb b = {0};
  char *dir = temp_dir();
  char *fifo = path_in(dir, "pipe.bin");
  cr_assert_eq(mkfifo(fifo, 0600), 0, "mkfifo: %s", strerror(errno));
  EXPECT_FAILURE(&b, external_model(&b, "pipe.bin", NULL, NULL), dir, MX_ERR_IO, "initializer 'w'",
                 "not a regular file");
  unlink(fifo);
  rmdir(dir);
  free(fifo);
  free(dir);
  mxb_free(&b);
}

/* --- files -------------------------------------------------------------------------------------- */

Test(onnx_hostile, missing_file_is_an_io_error_naming_the_path) {
  mx_graph *g = NULL;
  mx_error err;
  cr_assert_eq(mx_onnx_load_file("/nonexistent/dir/model.onnx", &g, &err), MX_ERR_IO);
  cr_assert_null(g);
  cr_expect(strstr(err.message, "/nonexistent/dir/model.onnx"), "%s", err.message);
  cr_expect(strstr(err.message, strerror(ENOENT)), "%s", err.message);
  mx_tensor t;
  cr_assert_eq(mx_tensor_load_pb("/nonexistent/x.pb", &t, NULL, &err), MX_ERR_IO);
  cr_expect(strstr(err.message, "/nonexistent/x.pb"), "%s", err.message);
  cr_assert_eq(mx_onnx_load_file("/tmp", &g, &err), MX_ERR_IO, "%s", err.message);
  cr_expect(strstr(err.message, "/tmp"), "%s", err.message);
}

Test(onnx_hostile, errors_in_a_file_name_the_file) {
  mxb b = {0};
  char *dir = temp_dir();
  char *file = path_in(dir, "bad.onnx");
  float data[5] = {0};
  size_t size;
  uint8_t *bytes = mxb_pack(&b, add_model(&b, mxb_tensor(&b, "w", FLOAT, "2,3", data, sizeof data)), &size);
  cr_assert_eq(mxb_write_file(file, bytes, size), 0);
  mx_graph *g = NULL;
  mx_error err;
  cr_assert_eq(mx_onnx_load_file(file, &g, &err), MX_ERR_MALFORMED);
  cr_expect(strstr(err.message, file) == err.message, "%s", err.message);
  cr_expect(strstr(err.message, "initializer 'w'"), "%s", err.message);
  /* A NULL error record is allowed. */
  cr_assert_eq(mx_onnx_load_file(file, &g, NULL), MX_ERR_MALFORMED);
  cr_assert_null(g);
  unlink(file);
  rmdir(dir);
  free(file);
  free(dir);
  mxb_free(&b);
}
