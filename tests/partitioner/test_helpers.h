/* Helpers shared by the partitioner tests: building small graphs with named nodes (each
 * node's single output value carries the node's name), partitioning them, describing the result
 * as a compact string ("K:a,b|U:c" lists the KNOWN and UNKNOWN clusters in root order with their
 * nodes in topological order) and checking the partitioned root graph. */
#ifndef MIXRT_TESTS_PARTITIONER_HELPERS_H
#define MIXRT_TESTS_PARTITIONER_HELPERS_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/ir.h"
#include "mixrt/graph.h"
#include "mixrt/partition.h"
#include "partitioner/partitioner.h"

static inline mx_graph *pt_graph(const char *name) {
  mx_graph *g = NULL;
  cr_assert_eq(mx_graph_create(name, &g), MX_OK);
  return g;
}

static inline mx_value_id pt_input(mx_graph *g, const char *name, mx_dtype dt, int32_t rank,
                                   const mx_dim *dims) {
  mx_shape s = {.rank = rank};
  for (int32_t i = 0; i < rank; i++) s.dims[i] = dims[i];
  mx_value_id v;
  cr_assert_eq(mx_graph_add_input(g, name, dt, &s, &v), MX_OK, "%s", mx_graph_last_error(g));
  return v;
}

/* A single-output node called `name` whose output value is also called `name`. */
static inline mx_value_id pt_op(mx_graph *g, const char *op, const char *name, const mx_value_id *in,
                                size_t n_in, const mx_attr *attrs, size_t n_attrs) {
  const char *outs[1] = {name};
  mx_node_desc d = {.op_type = op,
                    .name = name,
                    .inputs = in,
                    .n_inputs = n_in,
                    .attrs = attrs,
                    .n_attrs = n_attrs,
                    .output_names = outs,
                    .n_outputs = 1};
  mx_value_id y;
  cr_assert_eq(mx_graph_add_node(g, &d, &y), MX_OK, "%s", mx_graph_last_error(g));
  return y;
}

static inline mx_value_id pt_op1(mx_graph *g, const char *op, const char *name, mx_value_id a) {
  return pt_op(g, op, name, &a, 1, NULL, 0);
}

static inline mx_value_id pt_op2(mx_graph *g, const char *op, const char *name, mx_value_id a,
                                 mx_value_id b) {
  mx_value_id in[2] = {a, b};
  return pt_op(g, op, name, in, 2, NULL, 0);
}

/* A float32 constant of the given dims filled with `fill`. */
static inline mx_value_id pt_const(mx_graph *g, const char *name, int32_t rank, const int64_t *dims,
                                   float fill) {
  mx_tensor t = {.dtype = MX_FLOAT32, .rank = rank};
  size_t n = 1;
  for (int32_t i = 0; i < rank; i++) {
    t.dims[i] = dims[i];
    n *= (size_t)dims[i];
  }
  float *data = malloc((n ? n : 1) * sizeof *data);
  cr_assert_not_null(data);
  for (size_t i = 0; i < n; i++) data[i] = fill;
  t.data = data;
  mx_value_id v;
  cr_assert_eq(mx_graph_add_constant(g, name, &t, &v), MX_OK, "%s", mx_graph_last_error(g));
  free(data);
  return v;
}

/* A 1-D int64 constant. */
static inline mx_value_id pt_const_i64(mx_graph *g, const char *name, size_t n, const int64_t *vals) {
  mx_tensor t = {.dtype = MX_INT64, .rank = 1, .dims = {(int64_t)n}, .data = (void *)vals};
  mx_value_id v;
  cr_assert_eq(mx_graph_add_constant(g, name, &t, &v), MX_OK, "%s", mx_graph_last_error(g));
  return v;
}

static inline void pt_infer(mx_graph *g) {
  cr_assert_eq(mx_graph_infer(g), MX_OK, "%s", mx_graph_last_error(g));
}

static inline mx_partition *pt_partition(const mx_graph *g, int64_t limit, bool stable,
                                         const char *const *forced, size_t n_forced) {
  mx_partition_options o;
  mx_partition_options_init(&o);
  o.static_min_ops = limit;
  o.stable = stable;
  o.force_unknown = forced;
  o.n_force_unknown = n_forced;
  mx_partition *p = NULL;
  mx_error err = {0};
  cr_assert_eq(mx_partition_create(g, &o, &p, &err), MX_OK, "%s", err.message);
  return p;
}

/* "K:a,b|U:c": the KNOWN and UNKNOWN clusters in root order. */
static inline void pt_describe(const mx_partition *p, const mx_graph *g, char *buf, size_t cap) {
  size_t len = 0;
  buf[0] = '\0';
  for (size_t id = 0; id < mx_partition_cluster_count(p); id++) {
    mx_partition_cluster_info ci;
    cr_assert(mx_partition_cluster(p, id, &ci));
    if (ci.type != MX_CLUSTER_KNOWN && ci.type != MX_CLUSTER_UNKNOWN) continue;
    len += (size_t)snprintf(buf + len, len < cap ? cap - len : 0, "%s%s:", len ? "|" : "",
                            ci.type == MX_CLUSTER_KNOWN ? "K" : "U");
    for (size_t k = 0; k < ci.n_nodes; k++) {
      mx_node_id n = mx_partition_cluster_node(p, id, k);
      len += (size_t)snprintf(buf + len, len < cap ? cap - len : 0, "%s%s", k ? "," : "", g->nodes[n].name);
    }
  }
  cr_assert_lt(len, cap, "description truncated");
}

static inline void pt_expect(const mx_partition *p, const mx_graph *g, const char *expected) {
  char got[4096];
  pt_describe(p, g, got, sizeof got);
  cr_assert_str_eq(got, expected, "clusters: got %s, expected %s", got, expected);
}

static inline mx_partition_reason_kind pt_reason(const mx_partition *p, const mx_graph *g, const char *node) {
  mx_partition_node_info info;
  mx_node_id n = mx_graph_find_node(g, node);
  cr_assert_neq(n, MX_NO_NODE, "no node %s", node);
  cr_assert(mx_partition_node(p, n, &info));
  return info.reason.kind;
}

static inline uint32_t pt_cluster_of(const mx_partition *p, const mx_graph *g, const char *node) {
  mx_partition_node_info info;
  mx_node_id n = mx_graph_find_node(g, node);
  cr_assert_neq(n, MX_NO_NODE, "no node %s", node);
  cr_assert(mx_partition_node(p, n, &info));
  return info.cluster;
}

/* Whole dump into a malloc'd string (the caller frees it). */
static inline char *pt_dump(const mx_partition *p, mx_status (*fn)(const mx_partition *, FILE *)) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  cr_assert_not_null(f);
  cr_assert_eq(fn(p, f), MX_OK);
  fclose(f);
  return text;
}

static inline char *pt_explain(mx_partition *p, const char *name) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  cr_assert_not_null(f);
  cr_assert_eq(mx_partition_explain(p, name, f), MX_OK, "%s", mx_partition_last_error(p));
  fclose(f);
  return text;
}

/* Dims equal, or (when fresh symbols are allowed) both non-concrete. */
static inline bool pt_same_shape(const mx_shape *a, const mx_shape *b, bool allow_fresh) {
  if (a->rank != b->rank) return false;
  for (int32_t i = 0; i < a->rank; i++) {
    if (a->dims[i] == b->dims[i]) continue;
    if (!allow_fresh || mx_dim_is_concrete(a->dims[i]) || mx_dim_is_concrete(b->dims[i])) return false;
  }
  return true;
}

/* The root graph and every subgraph infer, and give the original shapes: root outputs, every
 * subgraph value (by name), every call output. With data-dependent ops re-inference creates
 * new fresh symbols, so `allow_fresh` accepts any symbolic dim in place of another. */
static inline void pt_check_roundtrip(mx_partition *p, const mx_graph *g, bool allow_fresh) {
  mx_graph *root = mx_partition_root(p);
  cr_assert_not_null(root);
  /* Each subgraph on its own, with the shapes the partitioner declared. */
  for (size_t id = 0; id < mx_partition_cluster_count(p); id++) {
    mx_partition_cluster_info ci;
    cr_assert(mx_partition_cluster(p, id, &ci));
    if (!ci.body) continue;
    cr_assert_eq(mx_graph_infer(ci.body), MX_OK, "cluster %zu: %s", id, mx_graph_last_error(ci.body));
    for (size_t v = 0; v < ci.body->n_values; v++) {
      const mx_value *bv = &ci.body->values[v];
      if (bv->flags & MX_VALUE_DEAD) continue;
      mx_value_id ov = mx_graph_find_value(g, bv->name);
      cr_assert_neq(ov, MX_NO_VALUE, "subgraph value %s is not in the original", bv->name);
      cr_assert_eq(bv->dtype, g->values[ov].dtype, "dtype of %s", bv->name);
      cr_assert(pt_same_shape(&bv->shape, &g->values[ov].shape, allow_fresh), "shape of %s changed",
                bv->name);
    }
  }
  cr_assert_eq(mx_graph_infer(root), MX_OK, "%s", mx_graph_last_error(root));
  cr_assert_eq(mx_graph_output_count(root), mx_graph_output_count(g));
  for (size_t i = 0; i < mx_graph_output_count(g); i++) {
    mx_shape a, b;
    cr_assert(mx_graph_value_shape(root, mx_graph_output(root, i), &a));
    cr_assert(mx_graph_value_shape(g, mx_graph_output(g, i), &b));
    cr_assert(pt_same_shape(&a, &b, allow_fresh), "output %zu shape changed", i);
    cr_assert_eq(mx_graph_value_dtype(root, mx_graph_output(root, i)),
                 mx_graph_value_dtype(g, mx_graph_output(g, i)));
    cr_assert_str_eq(mx_graph_value_name(root, mx_graph_output(root, i)),
                     mx_graph_value_name(g, mx_graph_output(g, i)));
  }
  for (size_t v = 0; v < root->n_values; v++) {
    const mx_value *rv = &root->values[v];
    mx_value_id ov = mx_graph_find_value(g, rv->name);
    cr_assert_neq(ov, MX_NO_VALUE, "root value %s is not in the original", rv->name);
    cr_assert(pt_same_shape(&rv->shape, &g->values[ov].shape, allow_fresh), "root shape of %s changed",
              rv->name);
  }
}

/* Root nodes appear in topological order (every input produced by an earlier node). */
static inline void pt_check_root_order(mx_partition *p) {
  mx_graph *root = mx_partition_root(p);
  for (size_t n = 0; n < root->n_nodes; n++) {
    const mx_node *nd = &root->nodes[n];
    for (uint32_t k = 0; k < nd->n_inputs; k++) {
      mx_value_id v = nd->inputs[k];
      if (v == MX_NO_VALUE) continue;
      mx_node_id pr = root->values[v].producer;
      cr_assert(pr == MX_NO_NODE || pr < n, "root node %s reads a value produced later", nd->name);
    }
  }
}

#endif /* MIXRT_TESTS_PARTITIONER_HELPERS_H */
