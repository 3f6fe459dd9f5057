/* Malformed files built from the conformance data: every model (and the first input and output
 * tensor file of every case) is truncated at several offsets and has bytes changed at seeded
 * random positions. Each load must either fail with a status and a message, or give a graph
 * that is structurally sound (valid value ids, no cycle) and is then destroyed. Run under
 * ASan/UBSan this also proves that no such load crashes, reads out of bounds or leaks. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/ir.h"
#include "mixrt/onnx.h"
#include "support/onnx_node.h"

#define N_TRUNCATIONS 10   /* offsets per file, including 0 and size - 1 */
#define N_MODEL_FLIPS 64   /* mutated copies per model */
#define N_PB_FLIPS 16      /* mutated copies per tensor file */

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
      cr_assert(mx__value_valid(g, nd->outputs[k]), "%s: node '%s' has an invalid output", what,
                nd->name);
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

/* Loads a model from an exactly-sized heap copy (so ASan sees any read past the end). */
static void load_model_bytes(const char *what, const uint8_t *bytes, size_t size,
                             const char *base_dir, size_t *ok, size_t *failed) {
  uint8_t *copy = malloc(size ? size : 1);
  cr_assert_not_null(copy);
  if (size) memcpy(copy, bytes, size);
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
    cr_assert_eq(err.status, st, "%s", what);
    cr_assert_neq(err.message[0], '\0', "%s: %s without a message", what, mx_status_name(st));
    (*failed)++;
  }
  free(copy);
}

static void load_tensor_bytes(const char *what, const uint8_t *bytes, size_t size, size_t *ok,
                              size_t *failed) {
  uint8_t *copy = malloc(size ? size : 1);
  cr_assert_not_null(copy);
  if (size) memcpy(copy, bytes, size);
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
    cr_assert_eq(err.status, st, "%s", what);
    cr_assert_neq(err.message[0], '\0', "%s: %s without a message", what, mx_status_name(st));
    (*failed)++;
  }
  free(copy);
}

Test(onnx_malformed, truncated_models, .timeout = 120) {
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

Test(onnx_malformed, mutated_models, .timeout = 120) {
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

Test(onnx_malformed, truncated_and_mutated_tensor_files, .timeout = 120) {
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
