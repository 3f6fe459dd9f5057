/* ONNX import of every model of the ONNX backend node tests (tests/data/onnx-node).
 *
 * Every model must import. Every tensor file must load, and its name, element type and shape
 * must match what the model declares for the graph input or output it belongs to (as
 * imported for inputs, as written in the model for outputs, whose types import does not
 * keep), wherever the declared dims are concrete; a sequence or optional file (no name, no single
 * element type) only has to load. The op types without a definition in
 * graph/ops are listed on stderr (a report, not a failure). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/ir.h"
#include "graph/ops/op.h"
#include "mixrt/onnx.h"
#include "onnx/onnx.pb-c.h"
#include "support/onnx_node.h"

/* Loads the cases or skips the test when the data folder is missing. */
static size_t load_cases(mxt_onnx_case **cases) {
  const char *root = mxt_onnx_node_dir();
  if (!root) cr_skip_test("ONNX node-test data not found");
  size_t n = mxt_onnx_node_cases(root, cases);
  cr_assert_gt(n, 0, "no test folders under %s", root);
  return n;
}

/* Checks a loaded tensor against a declared element type and (possibly partial) shape. */
static void expect_matches(const char *where, const mx_tensor *t, mx_dtype dtype, const mx_shape *shape) {
  cr_expect_eq(t->dtype, dtype, "%s: tensor file has %s, model declares %s", where, mx_dtype_name(t->dtype),
               mx_dtype_name(dtype));
  if (shape->rank == MX_RANK_UNKNOWN) return;
  cr_expect_eq(t->rank, shape->rank, "%s: tensor file has rank %d, model declares %d", where, (int)t->rank,
               (int)shape->rank);
  if (t->rank != shape->rank) return;
  for (int32_t d = 0; d < shape->rank; d++)
    if (mx_dim_is_concrete(shape->dims[d]))
      cr_expect_eq(t->dims[d], shape->dims[d], "%s: dim %d is %lld, model declares %lld", where, (int)d,
                   (long long)t->dims[d], (long long)shape->dims[d]);
}

/* The declared type of a graph output, read from the model file itself (concrete dims only;
 * everything else unknown). False when the model declares no tensor type. */
static bool declared_output(const Onnx__GraphProto *gp, size_t i, mx_dtype *dtype, mx_shape *shape) {
  shape->rank = MX_RANK_UNKNOWN;
  if (i >= gp->n_output) return false;
  const Onnx__TypeProto *tp = gp->output[i]->type;
  if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type) return false;
  *dtype = (mx_dtype)tp->tensor_type->elem_type;
  const Onnx__TensorShapeProto *sp = tp->tensor_type->shape;
  if (!sp || sp->n_dim > MX_MAX_RANK) return true;
  shape->rank = (int32_t)sp->n_dim;
  for (size_t d = 0; d < sp->n_dim; d++)
    shape->dims[d] = sp->dim[d]->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE
                         ? sp->dim[d]->dim_value
                         : MX_DIM_UNKNOWN;
  return true;
}

/* Collects "domain:op" of every node of g and its subgraphs into a list of distinct names. */
static void collect_ops(const mx_graph *g, char ***ops, size_t *n, size_t *cap) {
  for (size_t i = 0; i < g->n_nodes; i++) {
    const mx_node *nd = &g->nodes[i];
    if (nd->flags & MX_NODE_DEAD) continue;
    if (mx__op_find(nd->domain, nd->op_type)) continue;
    char key[256];
    snprintf(key, sizeof key, "%s%s%s", nd->domain, *nd->domain ? ":" : "", nd->op_type);
    bool seen = false;
    for (size_t k = 0; k < *n && !seen; k++) seen = strcmp((*ops)[k], key) == 0;
    if (seen) continue;
    if (*n == *cap) {
      *cap = *cap ? *cap * 2 : 16;
      *ops = realloc(*ops, *cap * sizeof **ops);
      cr_assert_not_null(*ops);
    }
    (*ops)[(*n)++] = strdup(key);
  }
  for (size_t i = 0; i < g->n_subgraphs; i++) collect_ops(g->subgraphs[i], ops, n, cap);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

Test(onnx_conformance, every_model_imports_and_matches_its_data) {
  mxt_onnx_case *cases;
  size_t n = load_cases(&cases);
  size_t imported = 0, tensors = 0;
  char **missing = NULL;
  size_t n_missing = 0, cap_missing = 0;
  for (size_t c = 0; c < n; c++) {
    const mxt_onnx_case *tc = &cases[c];
    mx_graph *g = NULL;
    mx_error err;
    mx_status st = mx_onnx_load_file(tc->model, &g, &err);
    cr_expect_eq(st, MX_OK, "%s: %s", tc->name, err.message);
    if (st != MX_OK) continue;
    imported++;
    cr_expect_gt(g->ir_version, 0, "%s: no IR version", tc->name);
    cr_expect_gt(mx_graph_opset(g, ""), 0, "%s: no default opset", tc->name);

    /* The model again, for what import does not keep (declared output types). */
    unsigned char *bytes;
    size_t size;
    cr_assert(mxt_onnx_node_read_file(tc->model, &bytes, &size));
    Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, size, bytes);
    cr_assert_not_null(m, "%s: protobuf-c cannot read the model", tc->name);

    cr_expect_eq(mx_graph_input_count(g), tc->n_inputs, "%s: %zu graph inputs, %zu input files", tc->name,
                 mx_graph_input_count(g), tc->n_inputs);
    for (size_t i = 0; i < tc->n_inputs && i < mx_graph_input_count(g); i++) {
      char where[300];
      snprintf(where, sizeof where, "%s input_%zu.pb", tc->name, i);
      mx_tensor t;
      char *name = NULL;
      st = mxt_onnx_node_load_pb(tc, false, i, &t, &name, &err);
      cr_expect_eq(st, MX_OK, "%s: %s", where, err.message);
      if (st != MX_OK) continue;
      tensors++;
      mx_value_id v = mx_graph_input(g, i);
      if (mx_graph_value_kind(g, v) != MX_KIND_TENSOR) {
        mx_tensor_release(&t);
        continue;
      }
      mx_shape shape;
      cr_assert(mx_graph_value_shape(g, v, &shape));
      cr_expect_str_eq(name, mx_graph_value_name(g, v), "%s: tensor '%s' feeds input '%s'", where, name,
                       mx_graph_value_name(g, v));
      expect_matches(where, &t, mx_graph_value_dtype(g, v), &shape);
      free(name);
      mx_tensor_release(&t);
    }

    cr_expect_eq(mx_graph_output_count(g), tc->n_outputs, "%s: %zu graph outputs, %zu output files", tc->name,
                 mx_graph_output_count(g), tc->n_outputs);
    for (size_t i = 0; i < tc->n_outputs && i < mx_graph_output_count(g); i++) {
      char where[300];
      snprintf(where, sizeof where, "%s output_%zu.pb", tc->name, i);
      mx_tensor t;
      char *name = NULL;
      st = mxt_onnx_node_load_pb(tc, true, i, &t, &name, &err);
      cr_expect_eq(st, MX_OK, "%s: %s", where, err.message);
      if (st != MX_OK) continue;
      tensors++;
      mx_dtype dtype;
      mx_shape shape;
      if (declared_output(m->graph, i, &dtype, &shape)) {
        cr_expect_str_eq(name, mx_graph_value_name(g, mx_graph_output(g, i)), "%s: name", where);
        expect_matches(where, &t, dtype, &shape);
      }
      free(name);
      mx_tensor_release(&t);
    }

    collect_ops(g, &missing, &n_missing, &cap_missing);
    onnx__model_proto__free_unpacked(m, NULL);
    free(bytes);
    mx_graph_destroy(g);
  }
  cr_expect_eq(imported, n, "%zu of %zu models imported", imported, n);

  if (n_missing) qsort(missing, n_missing, sizeof *missing, cmp_str);
  fprintf(stderr, "onnx conformance: %zu models imported, %zu tensor files checked\n", imported, tensors);
  fprintf(stderr, "onnx conformance: %zu op types without a definition in graph/ops%s", n_missing,
          n_missing ? ":" : "\n");
  for (size_t i = 0; i < n_missing; i++) {
    fprintf(stderr, " %s%s", missing[i], i + 1 == n_missing ? "\n" : "");
    free(missing[i]);
  }
  free(missing);
  mxt_onnx_node_cases_free(cases, n);
}
