/* Test helper for the ONNX backend node-test data: locating the folder, listing its test
 * cases and loading their tensor files (see onnx_node.h). Plain C over the mixrt library; no
 * Criterion calls, because every test executable links this file. */
#include "support/onnx_node.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/file.h"
#include "mixrt/onnx.h"
#include "mixrt/sequence.h"

#ifndef MIXRT_ONNX_NODE_DIR_DEFAULT
#define MIXRT_ONNX_NODE_DIR_DEFAULT "tests/data/onnx-node"
#endif

static bool is_dir(const char *p) {
  struct stat sb;
  return p && stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static bool is_file(const char *p) {
  struct stat sb;
  return p && stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* malloc'd "a/b" (or "a/b/c" when c is not NULL). */
static char *join(const char *a, const char *b, const char *c) {
  size_t n = strlen(a) + strlen(b) + (c ? strlen(c) + 1 : 0) + 2;
  char *p = malloc(n);
  if (!p) return NULL;
  if (c)
    snprintf(p, n, "%s/%s/%s", a, b, c);
  else
    snprintf(p, n, "%s/%s", a, b);
  return p;
}

const char *mxt_onnx_node_dir(void) {
  const char *env = getenv("MIXRT_ONNX_NODE_DIR");
  const char *dir = env && *env ? env : MIXRT_ONNX_NODE_DIR_DEFAULT;
  if (is_dir(dir)) return dir;
  fprintf(stderr,
          "\n"
          "**********************************************************************\n"
          "*** ONNX NODE-TEST DATA NOT FOUND: '%s'\n"
          "*** (from %s)\n"
          "*** Tests that need it are SKIPPED. Set MIXRT_ONNX_NODE_DIR to the\n"
          "*** onnx-node folder to run them.\n"
          "**********************************************************************\n\n",
          dir, env && *env ? "MIXRT_ONNX_NODE_DIR" : "the build default");
  return NULL;
}

/* Number of consecutive <prefix>_<i>.pb files in dir, from 0. */
static size_t count_pb(const char *dir, const char *prefix) {
  size_t n = 0;
  for (;;) {
    char leaf[64];
    snprintf(leaf, sizeof leaf, "%s_%zu.pb", prefix, n);
    char *p = join(dir, "test_data_set_0", leaf);
    bool ok = is_file(p);
    free(p);
    if (!ok) return n;
    n++;
  }
}

#ifndef MIXRT_KNOWN_GAPS_FILE
#define MIXRT_KNOWN_GAPS_FILE "tests/conformance/KNOWN_GAPS.md"
#endif

bool mxt_onnx_node_is_known_gap(const char *name) {
  static unsigned char *gaps; /* the file, read once; never freed (test processes are short) */
  static bool loaded;
  if (!loaded) {
    size_t size;
    /* MIXRT_KNOWN_GAPS_FILE in the environment names another list (a freshly regenerated one
     * tried before it replaces the committed file). */
    const char *env = getenv("MIXRT_KNOWN_GAPS_FILE");
    const char *file = env && *env ? env : MIXRT_KNOWN_GAPS_FILE;
    if (!mxt_onnx_node_read_file(file, &gaps, &size)) gaps = NULL;
    loaded = true;
  }
  if (!gaps || !name) return false;
  /* Lines of the form "- `test_name`: reason". */
  char key[300];
  snprintf(key, sizeof key, "- `%s`:", name);
  for (const char *line = (const char *)gaps; line && *line;) {
    if (strncmp(line, key, strlen(key)) == 0) return true;
    line = strchr(line, '\n');
    if (line) line++;
  }
  return false;
}

static int by_name(const void *a, const void *b) {
  return strcmp(((const mxt_onnx_case *)a)->name, ((const mxt_onnx_case *)b)->name);
}

size_t mxt_onnx_node_cases(const char *root, mxt_onnx_case **cases) {
  *cases = NULL;
  DIR *d = opendir(root);
  if (!d) return 0;
  mxt_onnx_case *v = NULL;
  size_t n = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.' || mxt_onnx_node_is_known_gap(e->d_name)) continue;
    char *dir = join(root, e->d_name, NULL);
    char *model = dir ? join(dir, "model.onnx", NULL) : NULL;
    if (!dir || !model || !is_file(model)) {
      free(dir);
      free(model);
      continue;
    }
    if (n == cap) {
      size_t ncap = cap ? cap * 2 : 64;
      mxt_onnx_case *nv = realloc(v, ncap * sizeof *nv);
      if (!nv) {
        free(dir);
        free(model);
        break;
      }
      v = nv;
      cap = ncap;
    }
    mxt_onnx_case *c = &v[n++];
    c->name = strdup(e->d_name);
    c->dir = dir;
    c->model = model;
    c->n_inputs = count_pb(dir, "input");
    c->n_outputs = count_pb(dir, "output");
  }
  closedir(d);
  if (n) qsort(v, n, sizeof *v, by_name);
  *cases = v;
  return n;
}

void mxt_onnx_node_cases_free(mxt_onnx_case *cases, size_t n) {
  if (!cases) return;
  for (size_t i = 0; i < n; i++) {
    free(cases[i].name);
    free(cases[i].dir);
    free(cases[i].model);
  }
  free(cases);
}

char *mxt_onnx_node_pb_path(const mxt_onnx_case *c, bool output, size_t i) {
  char leaf[64];
  snprintf(leaf, sizeof leaf, "%s_%zu.pb", output ? "output" : "input", i);
  return join(c->dir, "test_data_set_0", leaf);
}

/* What input or output i of the case's model holds: a sequence or optional file is read as
 * such (the bytes alone do not tell it from a TensorProto). Output kinds come from inference;
 * the model is read again for each file, which the small test models make cheap. */
static mx_value_kind case_value_kind(const mxt_onnx_case *c, bool output, size_t i) {
  mx_graph *g = NULL;
  mx_error err;
  mx_value_kind kind = MX_KIND_TENSOR;
  if (mx_onnx_load_file(c->model, &g, &err) != MX_OK) return kind;
  if (!output && i < mx_graph_input_count(g)) kind = mx_graph_value_kind(g, mx_graph_input(g, i));
  if (output && i < mx_graph_output_count(g) && mx_graph_infer(g) == MX_OK)
    kind = mx_graph_value_kind(g, mx_graph_output(g, i));
  mx_graph_destroy(g);
  return kind;
}

mx_status mxt_onnx_node_load_pb(const mxt_onnx_case *c, bool output, size_t i, mx_tensor *t, char **name,
                                mx_error *err) {
  char *p = mxt_onnx_node_pb_path(c, output, i);
  if (!p) return MX_ERR_OUT_OF_MEMORY;
  mx_value_kind kind = case_value_kind(c, output, i);
  mx_status st =
      kind == MX_KIND_TENSOR ? mx_tensor_load_pb(p, t, name, err) : mx_value_load_pb(p, kind, t, err);
  if (st == MX_OK && name && kind != MX_KIND_TENSOR) *name = NULL;
  free(p);
  return st;
}

bool mxt_onnx_node_read_file(const char *path, unsigned char **data, size_t *size) {
  mx_error err;
  return mx__read_file(path, SIZE_MAX / 2, data, size, &err) == MX_OK;
}
