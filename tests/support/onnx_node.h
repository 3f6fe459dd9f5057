/* Test helper: the ONNX backend node-test data (tests/data/onnx-node).
 *
 * Finds the data folder (environment variable MIXRT_ONNX_NODE_DIR, else the build's default
 * MIXRT_ONNX_NODE_DIR_DEFAULT), lists its test folders and loads their tensor files. When the
 * folder is missing, mxt_onnx_node_dir prints a loud message on stderr and returns NULL; the
 * calling test then skips (cr_skip_test). Compiled into every test executable, so it uses
 * only the mixrt library and plain C (no Criterion). */
#ifndef MIXRT_TESTS_SUPPORT_ONNX_NODE_H
#define MIXRT_TESTS_SUPPORT_ONNX_NODE_H

#include <stdbool.h>
#include <stddef.h>

#include "mixrt/status.h"
#include "mixrt/tensor.h"

/* One test folder. */
typedef struct mxt_onnx_case {
  char *name;       /* folder name, e.g. "test_abs" (malloc'd) */
  char *dir;        /* folder path (malloc'd) */
  char *model;      /* path of its model.onnx (malloc'd) */
  size_t n_inputs;  /* input_<i>.pb files in test_data_set_0, numbered from 0 */
  size_t n_outputs; /* output_<i>.pb files in test_data_set_0 */
} mxt_onnx_case;

/* The data folder, or NULL after printing a loud "not found, tests skipped" message. The
 * string is static or from getenv; do not free it. */
const char *mxt_onnx_node_dir(void);

/* True when tests/conformance/KNOWN_GAPS.md lists the test (a "- `name`: reason" line): a
 * test mixrt cannot pass yet, for the reason given there. */
bool mxt_onnx_node_is_known_gap(const char *name);

/* Lists the test folders under root (those holding a model.onnx and not listed as known gaps,
 * which every suite leaves out alike), sorted by name, into a
 * malloc'd array (*cases; free with mxt_onnx_node_cases_free). Returns the count; 0 with
 * *cases NULL when root cannot be read. */
size_t mxt_onnx_node_cases(const char *root, mxt_onnx_case **cases);
void mxt_onnx_node_cases_free(mxt_onnx_case *cases, size_t n);

/* Path of test_data_set_0/input_<i>.pb (output false) or output_<i>.pb (output true);
 * malloc'd, NULL when out of memory. */
char *mxt_onnx_node_pb_path(const mxt_onnx_case *c, bool output, size_t i);

/* Loads one tensor file of a case with mx_tensor_load_pb (see mixrt/tensor.h for ownership). */
mx_status mxt_onnx_node_load_pb(const mxt_onnx_case *c, bool output, size_t i, mx_tensor *t, char **name,
                                mx_error *err);

/* Reads a whole file into a malloc'd buffer (*data, at least 1 byte). False on any error. */
bool mxt_onnx_node_read_file(const char *path, unsigned char **data, size_t *size);

#endif /* MIXRT_TESTS_SUPPORT_ONNX_NODE_H */
