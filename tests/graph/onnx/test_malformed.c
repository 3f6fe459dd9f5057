/* Malformed files built from the conformance data: every model (and the first input and output
 * tensor file of every case) is truncated at several offsets and has bytes changed at seeded
 * random positions. Each load must either fail with a status and a message, or give a graph
 * that is structurally sound (valid value ids, no cycle) and is then destroyed. Run under
 * ASan/UBSan this also proves that no such load crashes, reads out of bounds or leaks.
 * The node tests hold single-node graphs only, so a hand-built model with subgraphs (nested
 * two levels, using outer values), Constant nodes, attributes of every kind, typed and
 * external tensor data, omitted inputs and outputs and repeated node names is truncated at
 * every offset and mutated too. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graph/ir.h"
#include "graph/onnx/onnx_build.h"
#include "mixrt/onnx.h"
#include "support/onnx_node.h"

#define N_TRUNCATIONS 10   /* offsets per file, including 0 and size - 1 */
#define N_MODEL_FLIPS 64   /* mutated copies per model */
#define N_PB_FLIPS    16   /* mutated copies per tensor file */
#define N_RICH_FLIPS  4000 /* mutated copies of the hand-built model with every feature */

static size_t load_cases(mxt_onnx_case **cases) {
  const char *root = mxt_onnx_node_dir();
  if (!root) cr_skip_test("ONNX node-test data not found");
  size_t n = mxt_onnx_node_cases(root, cases);
  cr_assert_gt(n, 0, "no test folders under %s", root);
  return n;
}

/* xorshift64*: a small seeded generator, so every run mutates the same bytes. */
static uint64_t next_rand(uint64_t *s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 2685821657736338717ull;
}

static uint64_t seed_of(const char *name) {
  uint64_t h = 1469598103934665603ull;
  for (const char *p = name; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
  return h ? h : 1;
}

/* Truncation offsets: 0, size - 1 and evenly spread ones in between. */
static size_t truncation(size_t size, int k) {
  if (k == 0 || size == 0) return 0;
  if (k == N_TRUNCATIONS - 1) return size - 1;
  return size * (size_t)k / (N_TRUNCATIONS - 1);
}

/* Changes 1 to 3 bytes of buf (size > 0): an xor, 0x00, 0xff or a varint continuation byte. */
static void mutate(uint8_t *buf, size_t size, uint64_t *rng) {
  int count = 1 + (int)(next_rand(rng) % 3);
  for (int i = 0; i < count; i++) {
    size_t at = (size_t)(next_rand(rng) % size);
    switch (next_rand(rng) % 4) {
      case 0: buf[at] ^= (uint8_t)(1 + next_rand(rng) % 255); break;
      case 1: buf[at] = 0x00; break;
      case 2: buf[at] = 0xff; break;
      default: buf[at] = 0x80; break;
    }
  }
}

/* Checks that an imported graph is sound: value ids in range, a topological order exists. */
static void check_graph(const char *what, mx_graph *g) {
  for (size_t i = 0; i < g->n_nodes; i++) {
    const mx_node *nd = &g->nodes[i];
    if (nd->flags & MX_NODE_DEAD) continue;
    for (uint32_t k = 0; k < nd->n_inputs; k++)
      cr_assert(nd->inputs[k] == MX_NO_VALUE || mx__value_valid(g, nd->inputs[k]),
                "%s: node '%s' has an invalid input", what, nd->name);
    for (uint32_t k = 0; k < nd->n_outputs; k++)
      cr_assert(mx__value_valid(g, nd->outputs[k]), "%s: node '%s' has an invalid output", what, nd->name);
  }
  for (size_t i = 0; i < mx_graph_output_count(g); i++)
    cr_assert(mx__value_valid(g, mx_graph_output(g, i)), "%s: invalid graph output", what);
  const mx_node_id *order;
  size_t n;
  cr_assert_eq(mx__graph_topo_order(g, &order, &n), MX_OK, "%s: imported graph: %s", what,
               mx_graph_last_error(g));
  cr_assert_eq(n, mx_graph_node_count(g), "%s", what);
  for (size_t i = 0; i < g->n_subgraphs; i++) check_graph(what, g->subgraphs[i]);
}

/* An exactly-sized heap copy of bytes (so ASan sees any read past the end); free it. */
static uint8_t *exact_copy(const uint8_t *bytes, size_t size) {
  uint8_t *copy = malloc(size ? size : 1);
  cr_assert_not_null(copy);
  if (size) memcpy(copy, bytes, size);
  return copy;
}

/* A failed load must say so in err too, with a message. */
static void expect_clean_failure(const char *what, mx_status st, const mx_error *err) {
  cr_assert_eq(err->status, st, "%s", what);
  cr_assert_neq(err->message[0], '\0', "%s: %s without a message", what, mx_status_name(st));
}

/* Loads a model from an exactly-sized heap copy. */
static void load_model_bytes(const char *what, const uint8_t *bytes, size_t size, const char *base_dir,
                             size_t *ok, size_t *failed) {
  uint8_t *copy = exact_copy(bytes, size);
  mx_graph *g = NULL;
  mx_error err;
  mx_status st = mx_onnx_load_memory(copy, size, base_dir, &g, &err);
  if (st == MX_OK) {
    cr_assert_not_null(g, "%s", what);
    check_graph(what, g);
    mx_graph_destroy(g);
    (*ok)++;
  } else {
    cr_assert_null(g, "%s: failed load left a graph", what);
    expect_clean_failure(what, st, &err);
    (*failed)++;
  }
  free(copy);
}

/* Parses a tensor file from an exactly-sized heap copy. */
static void load_tensor_bytes(const char *what, const uint8_t *bytes, size_t size, size_t *ok,
                              size_t *failed) {
  uint8_t *copy = exact_copy(bytes, size);
  mx_tensor t;
  char *name = NULL;
  mx_error err;
  mx_status st = mx_tensor_parse_pb(copy, size, &t, &name, &err);
  if (st == MX_OK) {
    cr_assert_not_null(name, "%s", what);
    cr_assert_not_null(t.data, "%s", what);
    size_t nbytes;
    cr_assert(mx_tensor_nbytes(&t, &nbytes), "%s", what);
    free(name);
    mx_tensor_release(&t);
    (*ok)++;
  } else {
    cr_assert_null(name, "%s", what);
    expect_clean_failure(what, st, &err);
    (*failed)++;
  }
  free(copy);
}

Test(onnx_malformed, truncated_models) {
  mxt_onnx_case *cases;
  size_t n = load_cases(&cases), ok = 0, failed = 0;
  for (size_t c = 0; c < n; c++) {
    unsigned char *bytes;
    size_t size;
    cr_assert(mxt_onnx_node_read_file(cases[c].model, &bytes, &size), "%s", cases[c].model);
    for (int k = 0; k < N_TRUNCATIONS; k++) {
      char what[300];
      size_t at = truncation(size, k);
      snprintf(what, sizeof what, "%s truncated to %zu of %zu bytes", cases[c].name, at, size);
      load_model_bytes(what, bytes, at, cases[c].dir, &ok, &failed);
    }
    free(bytes);
  }
  fprintf(stderr, "truncated models: %zu loads failed cleanly, %zu gave valid graphs\n", failed, ok);
  cr_expect_gt(failed, 0);
  mxt_onnx_node_cases_free(cases, n);
}

Test(onnx_malformed, mutated_models) {
  mxt_onnx_case *cases;
  size_t n = load_cases(&cases), ok = 0, failed = 0;
  for (size_t c = 0; c < n; c++) {
    unsigned char *bytes;
    size_t size;
    cr_assert(mxt_onnx_node_read_file(cases[c].model, &bytes, &size), "%s", cases[c].model);
    uint8_t *work = malloc(size ? size : 1);
    cr_assert_not_null(work);
    uint64_t rng = seed_of(cases[c].name);
    for (int k = 0; k < N_MODEL_FLIPS && size; k++) {
      char what[300];
      memcpy(work, bytes, size);
      mutate(work, size, &rng);
      snprintf(what, sizeof what, "%s mutation %d", cases[c].name, k);
      load_model_bytes(what, work, size, cases[c].dir, &ok, &failed);
    }
    free(work);
    free(bytes);
  }
  fprintf(stderr, "mutated models: %zu loads failed cleanly, %zu gave valid graphs\n", failed, ok);
  cr_expect_gt(failed, 0);
  cr_expect_gt(ok, 0);
  mxt_onnx_node_cases_free(cases, n);
}

Test(onnx_malformed, truncated_and_mutated_tensor_files) {
  mxt_onnx_case *cases;
  size_t n = load_cases(&cases), ok = 0, failed = 0;
  for (size_t c = 0; c < n; c++) {
    for (int out = 0; out < 2; out++) {
      if ((out ? cases[c].n_outputs : cases[c].n_inputs) == 0) continue;
      char *path = mxt_onnx_node_pb_path(&cases[c], out, 0);
      unsigned char *bytes;
      size_t size;
      cr_assert(mxt_onnx_node_read_file(path, &bytes, &size), "%s", path);
      uint64_t rng = seed_of(path);
      for (int k = 0; k < N_TRUNCATIONS; k++) {
        char what[400];
        size_t at = truncation(size, k);
        snprintf(what, sizeof what, "%s truncated to %zu bytes", path, at);
        load_tensor_bytes(what, bytes, at, &ok, &failed);
      }
      uint8_t *work = malloc(size ? size : 1);
      cr_assert_not_null(work);
      for (int k = 0; k < N_PB_FLIPS && size; k++) {
        char what[400];
        memcpy(work, bytes, size);
        mutate(work, size, &rng);
        snprintf(what, sizeof what, "%s mutation %d", path, k);
        load_tensor_bytes(what, work, size, &ok, &failed);
      }
      free(work);
      free(bytes);
      free(path);
    }
  }
  fprintf(stderr, "tensor files: %zu loads failed cleanly, %zu gave tensors\n", failed, ok);
  cr_expect_gt(failed, 0);
  mxt_onnx_node_cases_free(cases, n);
}

/* A small model that uses every feature import has; its external data lives in `dir`. */
static uint8_t *rich_model(mxb *b, const char *dir, size_t *size) {
  enum { F32 = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, I64 = ONNX__TENSOR_PROTO__DATA_TYPE__INT64 };
  Onnx__ModelProto *m = mxb_model(b, 17);
  mxb_opset(b, m, "com.example", 1);
  mxb_input(b, m->graph, "cond", ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, "");
  mxb_input(b, m->graph, "x", F32, "batch,?,4");
  mxb_input(b, m->graph, "w", F32, "4");
  mxb_initializer(b, m->graph, mxb_tensor(b, "w", F32, "4", (float[]){1, 2, 3, 4}, 16));
  Onnx__TensorProto *typed = mxb_tensor(b, "typed", ONNX__TENSOR_PROTO__DATA_TYPE__INT8, "2", NULL, 0);
  typed->n_int32_data = 2;
  typed->int32_data = mxb_alloc(b, 2 * sizeof(int32_t));
  mxb_initializer(b, m->graph, typed);
  Onnx__TensorProto *ext = mxb_tensor(b, "ext", F32, "2", NULL, 0);
  mxb_external(b, ext, "location", "w.bin");
  mxb_external(b, ext, "offset", "4");
  mxb_external(b, ext, "length", "8");
  mxb_initializer(b, m->graph, ext);
  Onnx__GraphProto *then_g = mxb_graph(b, "then_body");
  mxb_node(b, then_g, "Add", "t_add", "x,late", "t_out");
  mxb_output(b, then_g, "t_out", F32, NULL);
  Onnx__GraphProto *inner = mxb_graph(b, "inner");
  mxb_node(b, inner, "Neg", "i_neg", "x", "i_out");
  mxb_output(b, inner, "i_out", F32, NULL);
  Onnx__GraphProto *else_g = mxb_graph(b, "");
  Onnx__NodeProto *n = mxb_node(b, else_g, "If", "e_if", "cond", "e_out");
  mxb_attr_graph(b, n, "then_branch", inner);
  mxb_attr_graph(b, n, "else_branch", inner);
  mxb_output(b, else_g, "e_out", F32, NULL);
  mxb_output(b, else_g, "w", F32, NULL);
  n = mxb_node(b, m->graph, "If", "branch", "cond", "y,w_out");
  mxb_attr_graph(b, n, "then_branch", then_g);
  mxb_attr_graph(b, n, "else_branch", else_g);
  mxb_node(b, m->graph, "Relu", "late_node", "x", "late");
  n = mxb_node(b, m->graph, "Constant", "c1", NULL, "cf");
  mxb_attr_floats(b, n, "value_floats", (float[]){1, 2}, 2);
  n = mxb_node(b, m->graph, "Constant", "", NULL, "");
  mxb_attr_tensor(b, n, "value", mxb_tensor(b, "v", I64, "1", (int64_t[]){3}, 8));
  n = mxb_node(b, m->graph, "Custom", "", "y,,cf", "z,,q");
  n->domain = mxb_str(b, "com.example");
  mxb_attr_int(b, n, "i", 3);
  mxb_attr_float(b, n, "f", 1);
  mxb_attr_string(b, n, "s", "abc");
  mxb_attr_ints(b, n, "is", (int64_t[]){1, 2}, 2);
  mxb_attr_floats(b, n, "fs", (float[]){1}, 1);
  mxb_attr_strings(b, n, "ss", (const char *const[]){"a", "b"}, 2);
  mxb_attr_tensor(
      b, n, "t",
      mxb_tensor(b, "tt", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16, "2", (uint16_t[]){0x3c00, 0x4000}, 4));
  mxb_node(b, m->graph, "Neg", "dup", "z", "z2");
  mxb_node(b, m->graph, "Neg", "dup", "z2", "z3");
  mxb_output(b, m->graph, "z3", F32, NULL);
  mxb_output(b, m->graph, "x", F32, NULL);
  mxb_output(b, m->graph, "w", F32, NULL);
  char path[300];
  snprintf(path, sizeof path, "%s/w.bin", dir);
  cr_assert_eq(mxb_write_file(path, (float[]){0, 5, 6}, 12), 0);
  return mxb_pack(b, m, size);
}

Test(onnx_malformed, hand_built_model_with_every_feature) {
  mxb b = {0};
  char dir[] = "/tmp/mixrt-rich-XXXXXX";
  cr_assert_not_null(mkdtemp(dir));
  size_t size, ok = 0, failed = 0;
  uint8_t *bytes = rich_model(&b, dir, &size);
  mx_graph *g = NULL;
  mx_error err;
  cr_assert_eq(mx_onnx_load_memory(bytes, size, dir, &g, &err), MX_OK, "%s", err.message);
  check_graph("hand-built model", g);
  mx_graph_destroy(g);
  for (size_t at = 0; at < size; at++) {
    char what[64];
    snprintf(what, sizeof what, "hand-built model truncated to %zu bytes", at);
    load_model_bytes(what, bytes, at, dir, &ok, &failed);
  }
  uint8_t *work = malloc(size);
  cr_assert_not_null(work);
  uint64_t rng = seed_of("hand-built");
  for (int k = 0; k < N_RICH_FLIPS; k++) {
    char what[64];
    memcpy(work, bytes, size);
    mutate(work, size, &rng);
    snprintf(what, sizeof what, "hand-built model mutation %d", k);
    load_model_bytes(what, work, size, dir, &ok, &failed);
  }
  fprintf(stderr, "hand-built model: %zu loads failed cleanly, %zu gave valid graphs\n", failed, ok);
  cr_expect_gt(ok, 0);
  free(work);
  char path[300];
  snprintf(path, sizeof path, "%s/w.bin", dir);
  unlink(path);
  rmdir(dir);
  mxb_free(&b);
}
