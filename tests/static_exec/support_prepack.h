/* A small CNN head with constant weights for the pre-packed weights tests of the static and
 * dynamic executors (kernels/prepack.h): x [N, 16, 14, 14] -> Conv 3x3 (32) -> Relu -> Conv 3x3
 * stride 2 (48, a 7x7 map: narrow products) -> Flatten -> MatMul [2352, 40] -> Gemm (B [24, 40]
 * transposed, C [24]) -> y [N, 24]. Header-only (static functions): both suites include it. */
#ifndef MIXRT_TESTS_STATIC_EXEC_SUPPORT_PREPACK_H
#define MIXRT_TESTS_STATIC_EXEC_SUPPORT_PREPACK_H

#include <criterion/criterion.h>
#include <stdlib.h>

#include "mixrt/graph.h"
#include "mixrt/shape.h"

/* The weights are seeded uniform values in [-0.1, 0.1); the 4 Conv / MatMul / Gemm weights are
 * the constants the executors pre-pack. */
static inline mx_value_id pp_const(mx_graph *g, const char *name, int32_t rank, const int64_t *dims,
                                   uint64_t *rng) {
  mx_tensor t = {.dtype = MX_FLOAT32, .rank = rank};
  int64_t n = 1;
  for (int32_t i = 0; i < rank; i++) n *= t.dims[i] = dims[i];
  float *v = malloc((size_t)n * sizeof *v);
  for (int64_t i = 0; i < n; i++) {
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    v[i] = (float)((double)(*rng >> 11) / (double)(1ull << 53)) * 0.2f - 0.1f;
  }
  t.data = v;
  mx_value_id id;
  cr_assert_eq(mx_graph_add_constant(g, name, &t, &id), MX_OK, "%s", mx_graph_last_error(g));
  free(v);
  return id;
}

static inline mx_value_id pp_op(mx_graph *g, const char *op, const mx_value_id *in, size_t n, const mx_attr *a,
                                size_t na) {
  mx_value_id out;
  cr_assert_eq(mx_graph_add_op(g, op, in, n, a, na, &out), MX_OK, "%s: %s", op, mx_graph_last_error(g));
  return out;
}

/* The graph with batch `batch` (<= 0: a symbolic batch "N"), weights from `seed`; inferred. */
static inline mx_graph *pp_cnn(int64_t batch, uint64_t seed) {
  mx_graph *g;
  cr_assert_eq(mx_graph_create("prepack_cnn", &g), MX_OK);
  uint64_t rng = seed * 0x9E3779B97F4A7C15ull + 1;
  mx_shape s = {4, {batch > 0 ? batch : mx_sym_named(mx_graph_symtab(g), "N"), 16, 14, 14}};
  mx_value_id x;
  cr_assert_eq(mx_graph_add_input(g, "x", MX_FLOAT32, &s, &x), MX_OK);
  const int64_t pads[4] = {1, 1, 1, 1}, s2[2] = {2, 2};
  mx_attr a1[] = {mx_attr_ints("pads", pads, 4)};
  mx_attr a2[] = {mx_attr_ints("pads", pads, 4), mx_attr_ints("strides", s2, 2)};
  mx_value_id w1 = pp_const(g, "w1", 4, (int64_t[]){32, 16, 3, 3}, &rng);
  mx_value_id b1 = pp_const(g, "b1", 1, (int64_t[]){32}, &rng);
  mx_value_id h = pp_op(g, "Conv", (mx_value_id[]){x, w1, b1}, 3, a1, 1);
  h = pp_op(g, "Relu", &h, 1, NULL, 0);
  mx_value_id w2 = pp_const(g, "w2", 4, (int64_t[]){48, 32, 3, 3}, &rng);
  h = pp_op(g, "Conv", (mx_value_id[]){h, w2}, 2, a2, 2);
  mx_attr fa[] = {mx_attr_int("axis", 1)};
  h = pp_op(g, "Flatten", &h, 1, fa, 1);
  mx_value_id w3 = pp_const(g, "w3", 2, (int64_t[]){48 * 49, 40}, &rng);
  h = pp_op(g, "MatMul", (mx_value_id[]){h, w3}, 2, NULL, 0);
  mx_value_id w4 = pp_const(g, "w4", 2, (int64_t[]){24, 40}, &rng);
  mx_value_id c4 = pp_const(g, "c4", 1, (int64_t[]){24}, &rng);
  mx_attr ga[] = {mx_attr_int("transB", 1)};
  mx_value_id y = pp_op(g, "Gemm", (mx_value_id[]){h, w4, c4}, 3, ga, 1);
  cr_assert_eq(mx_graph_add_output(g, y), MX_OK);
  cr_assert_eq(mx_graph_infer(g), MX_OK, "%s", mx_graph_last_error(g));
  return g;
}

#endif /* MIXRT_TESTS_STATIC_EXEC_SUPPORT_PREPACK_H */
