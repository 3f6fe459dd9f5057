/* The per-operator summary of `mixrt conformance --by-op` (see conformance_by_op.h). */
#include "tools/conformance_by_op.h"

#include <stdlib.h>
#include <string.h>

#include "graph/ir.h"
#include "mixrt/onnx.h"

typedef struct op_row {
  char *op;         /* "Add", "ai.onnx.ml:LabelEncoder" */
  size_t counts[3]; /* by mx_conf_outcome */
  size_t last_test; /* serial of the last test counted here (0: none) */
} op_row;

typedef struct manifest_line {
  char *test;
  char *ops; /* '+'-joined */
} manifest_line;

struct mx_conf_by_op {
  char *dir;
  manifest_line *manifest;
  size_t n_manifest;
  op_row *rows;
  size_t n_rows, cap_rows;
  size_t test_serial; /* counts mx_conf_by_op_add calls: a test counts each op once */
};

static void read_manifest(mx_conf_by_op *t) {
  char path[4096];
  snprintf(path, sizeof path, "%s/MANIFEST.tsv", t->dir);
  FILE *f = fopen(path, "r");
  if (!f) return;
  char line[4096];
  size_t cap = 0;
  while (fgets(line, sizeof line, f)) {
    char *tab = strchr(line, '\t');
    if (!tab || strncmp(line, "test_", 5) != 0) continue; /* the header and anything unexpected */
    *tab = '\0';
    char *ops = tab + 1, *end = strchr(ops, '\t');
    if (end) *end = '\0';
    if (t->n_manifest == cap) {
      size_t ncap = cap ? cap * 2 : 256;
      manifest_line *nm = realloc(t->manifest, ncap * sizeof *nm);
      if (!nm) break;
      t->manifest = nm;
      cap = ncap;
    }
    manifest_line *m = &t->manifest[t->n_manifest];
    m->test = strdup(line);
    m->ops = strdup(ops);
    if (!m->test || !m->ops) {
      free(m->test);
      free(m->ops);
      break;
    }
    t->n_manifest++;
  }
  fclose(f);
}

mx_conf_by_op *mx_conf_by_op_create(const char *dir) {
  mx_conf_by_op *t = calloc(1, sizeof *t);
  if (!t || !(t->dir = strdup(dir))) {
    free(t);
    return NULL;
  }
  read_manifest(t);
  return t;
}

void mx_conf_by_op_destroy(mx_conf_by_op *t) {
  if (!t) return;
  for (size_t i = 0; i < t->n_manifest; i++) {
    free(t->manifest[i].test);
    free(t->manifest[i].ops);
  }
  for (size_t i = 0; i < t->n_rows; i++) free(t->rows[i].op);
  free(t->manifest);
  free(t->rows);
  free(t->dir);
  free(t);
}

static void count(mx_conf_by_op *t, const char *op, size_t len, mx_conf_outcome outcome) {
  for (size_t i = 0; i < t->n_rows; i++)
    if (strlen(t->rows[i].op) == len && strncmp(t->rows[i].op, op, len) == 0) {
      if (t->rows[i].last_test != t->test_serial) t->rows[i].counts[outcome]++;
      t->rows[i].last_test = t->test_serial;
      return;
    }
  if (t->n_rows == t->cap_rows) {
    size_t ncap = t->cap_rows ? t->cap_rows * 2 : 128;
    op_row *nr = realloc(t->rows, ncap * sizeof *nr);
    if (!nr) return;
    t->rows = nr;
    t->cap_rows = ncap;
  }
  op_row *r = &t->rows[t->n_rows];
  memset(r, 0, sizeof *r);
  if (!(r->op = strndup(op, len))) return;
  r->counts[outcome] = 1;
  r->last_test = t->test_serial;
  t->n_rows++;
}

/* Counts every op of g and its subgraphs (count() takes each op once per test). */
static void count_graph(mx_conf_by_op *t, const mx_graph *g, mx_conf_outcome outcome) {
  for (size_t i = 0; i < g->n_nodes; i++) {
    const mx_node *nd = &g->nodes[i];
    char key[256];
    snprintf(key, sizeof key, "%s%s%s", nd->domain, *nd->domain ? ":" : "", nd->op_type);
    count(t, key, strlen(key), outcome);
  }
  for (size_t i = 0; i < g->n_subgraphs; i++) count_graph(t, g->subgraphs[i], outcome);
}

void mx_conf_by_op_add(mx_conf_by_op *t, const char *name, mx_conf_outcome outcome) {
  if (!t) return;
  t->test_serial++;
  for (size_t i = 0; i < t->n_manifest; i++) {
    if (strcmp(t->manifest[i].test, name) != 0) continue;
    for (const char *op = t->manifest[i].ops; *op;) {
      size_t len = strcspn(op, "+");
      count(t, op, len, outcome);
      op += len + (op[len] == '+');
    }
    return;
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/%s/model.onnx", t->dir, name);
  mx_graph *g = NULL;
  if (mx_onnx_load_file(path, &g, NULL) != MX_OK) {
    count(t, "(model does not import)", strlen("(model does not import)"), outcome);
    return;
  }
  count_graph(t, g, outcome);
  mx_graph_destroy(g);
}

static int by_op(const void *a, const void *b) {
  return strcmp(((const op_row *)a)->op, ((const op_row *)b)->op);
}

void mx_conf_by_op_print(const mx_conf_by_op *t, FILE *out) {
  if (!t) return;
  qsort(t->rows, t->n_rows, sizeof *t->rows, by_op);
  fprintf(out, "%-40s %6s %7s %7s %8s\n", "operator", "tests", "passed", "failed", "skipped");
  for (size_t i = 0; i < t->n_rows; i++) {
    const op_row *r = &t->rows[i];
    size_t n = r->counts[0] + r->counts[1] + r->counts[2];
    fprintf(out, "%-40s %6zu %7zu %7zu %8zu\n", r->op, n, r->counts[MX_CONF_PASSED],
            r->counts[MX_CONF_FAILED], r->counts[MX_CONF_SKIPPED]);
  }
}
