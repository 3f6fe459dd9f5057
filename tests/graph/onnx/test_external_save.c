/* ONNX models saved with their weights as external data (mx__onnx_save_file_external, what
 * `mixrt gen --external-data` writes): the data file lies beside the model under a relative name,
 * large initializers go to it and small ones stay inline, and importing reads them back equal,
 * from wherever the two files are moved together. Large imported initializers are held outside
 * the graph's arena (a store a compiled plan can take over). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "graph/ir.h"
#include "graph/onnx/onnx_refs.h"
#include "mixrt/onnx.h"

enum { BIG_N = 4096 }; /* 16 KiB of float: external */

/* y = x + big + small, with big [BIG_N] and small [4] initializers. */
static mx_graph *build_model(void) {
  mx_graph *g = NULL;
  cr_assert_eq(mx_graph_create("ext", &g), MX_OK);
  cr_assert_eq(mx_graph_set_opset(g, "", 17), MX_OK);
  mx_shape s = {.rank = 1};
  s.dims[0] = mx_sym_const(mx_graph_symtab(g), BIG_N);
  mx_value_id x, big, small, t, y;
  cr_assert_eq(mx_graph_add_input(g, "x", MX_FLOAT32, &s, &x), MX_OK);
  float *bd = malloc(BIG_N * sizeof *bd);
  cr_assert_not_null(bd);
  for (int i = 0; i < BIG_N; i++) bd[i] = (float)i * 0.5f;
  float sd[4] = {1, 2, 3, 4};
  mx_tensor bt = {.dtype = MX_FLOAT32, .rank = 1, .dims = {BIG_N}, .data = bd};
  mx_tensor st = {.dtype = MX_FLOAT32, .rank = 1, .dims = {4}, .data = sd};
  cr_assert_eq(mx_graph_add_constant(g, "big", &bt, &big), MX_OK);
  cr_assert_eq(mx_graph_add_constant(g, "small", &st, &small), MX_OK);
  free(bd);
  mx_value_id in1[2] = {x, big};
  mx_node_desc add1 = {.op_type = "Add", .name = "add1", .inputs = in1, .n_inputs = 2, .n_outputs = 1};
  cr_assert_eq(mx_graph_add_node(g, &add1, &t), MX_OK);
  mx_value_id in2[2] = {t, small};
  mx_node_desc add2 = {.op_type = "Add", .name = "add2", .inputs = in2, .n_inputs = 2, .n_outputs = 1};
  cr_assert_eq(mx_graph_add_node(g, &add2, &y), MX_OK);
  cr_assert_eq(mx_graph_add_output(g, y), MX_OK);
  return g;
}

static long file_size(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0 ? (long)sb.st_size : -1;
}

Test(onnx_external_save, round_trip_beside_the_model_and_moved) {
  char dir[] = "/tmp/mx_ext_XXXXXX";
  cr_assert_not_null(mkdtemp(dir));
  char model[256], data[256], moved_dir[256], moved[256];
  snprintf(model, sizeof model, "%s/m.onnx", dir);
  snprintf(data, sizeof data, "%s/m.onnx.bin", dir);
  mx_graph *g = build_model();
  mx_error err;
  cr_assert_eq(mx__onnx_save_file_external(g, model, 1024, &err), MX_OK, "%s", err.message);
  mx_graph_destroy(g);
  cr_assert_eq(file_size(data), BIG_N * 4, "only the large initializer goes to the data file");
  cr_assert_lt(file_size(model), 1024, "the model keeps no large initializer inline");

  snprintf(moved_dir, sizeof moved_dir, "%s_moved", dir);
  cr_assert_eq(rename(dir, moved_dir), 0);
  snprintf(moved, sizeof moved, "%s/m.onnx", moved_dir);
  mx_graph *h = NULL;
  cr_assert_eq(mx_onnx_load_file(moved, &h, &err), MX_OK, "%s", err.message);
  mx_value_id bv = MX_NO_VALUE, sv = MX_NO_VALUE;
  for (size_t v = 0; v < h->n_values; v++) {
    if (strcmp(h->values[v].name, "big") == 0) bv = (mx_value_id)v;
    if (strcmp(h->values[v].name, "small") == 0) sv = (mx_value_id)v;
  }
  cr_assert_neq(bv, MX_NO_VALUE);
  cr_assert_neq(sv, MX_NO_VALUE);
  const float *b = h->values[bv].data->data;
  for (int i = 0; i < BIG_N; i++) cr_assert_eq(b[i], (float)i * 0.5f, "big[%d]", i);
  cr_assert_eq(((const float *)h->values[sv].data->data)[3], 4.0f);
  cr_assert_not_null(h->values[bv].store, "a large initializer is held outside the arena");
  cr_assert_null(h->values[sv].store, "a small one stays in the arena");
  mx_graph_destroy(h);

  char moved_data[256];
  snprintf(moved_data, sizeof moved_data, "%s/m.onnx.bin", moved_dir);
  unlink(moved_data);
  unlink(moved);
  rmdir(moved_dir);
}
