/* Tests of the elementwise broadcast planning (kernels/elementwise_bcast.c): the direct
 * plans for the common shapes (same shape, a single element, a row over the trailing dims) and
 * the general planner must give what a naive numpy-style index mapping gives, for every pair
 * of input shapes from a list that mixes both kinds (leading 1s, missing dims, column and
 * middle broadcasts, two different suffixes), for binary Add and Sub (operand order
 * matters), three-input Where and Sum, and float16 operands (the converting row adapter).
 * Shapes that do not broadcast fail with MX_ERR_KERNEL on either path. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "common/half.h"
#include "kernels/kernel.h"
#include "kernels/kernels_support.h"

typedef struct shape {
  int32_t rank;
  int64_t dims[4];
} shape;

/* Input shapes, all broadcastable to [2,3,4]. */
static const shape k_shapes[] = {
    {0, {0}},       {1, {1}},       {1, {4}},       {2, {3, 4}},       {2, {1, 4}},
    {3, {2, 3, 4}}, {3, {1, 1, 4}}, {3, {2, 1, 4}}, {2, {3, 1}},       {3, {2, 3, 1}},
    {3, {1, 3, 4}}, {3, {1, 1, 1}}, {3, {2, 1, 1}}, {4, {1, 2, 3, 4}}, {4, {1, 1, 3, 4}},
};
enum { N_SHAPES = sizeof k_shapes / sizeof k_shapes[0], OUT_N = 24 };

/* Element of an input of shape s that output element i of [2,3,4] reads (numpy rules). */
static int64_t src_index(const shape *s, int64_t i) {
  int64_t c[3] = {i / 12, (i / 4) % 3, i % 4}, off = 0, st = 1;
  for (int32_t k = s->rank - 1; k >= 0; k--) {
    int32_t ok = 3 - s->rank + k;
    int64_t coord = ok >= 0 ? c[ok] : 0;
    off += (s->dims[k] == 1 ? 0 : coord) * st;
    st *= s->dims[k];
  }
  return off;
}

static void fill(float *v, int n, float base) {
  for (int i = 0; i < n; i++) v[i] = base + (float)i * 0.5f;
}

Test(ew_plans, binary_every_shape_pair_matches_naive_broadcast) {
  float a[OUT_N], b[OUT_N], o[OUT_N];
  fill(a, OUT_N, 1.0f);
  fill(b, OUT_N, 100.0f);
  const char *ops[2] = {"Add", "Sub"};
  for (int op = 0; op < 2; op++)
    for (int i = 0; i < N_SHAPES; i++)
      for (int j = 0; j < N_SHAPES; j++) {
        const shape *sa = &k_shapes[i], *sb = &k_shapes[j];
        /* The output is [2,3,4] (rank 4 [1,2,3,4] when an input has rank 4). */
        bool r4 = sa->rank == 4 || sb->rank == 4;
        mx_kernel_call *c = kc_new(2, 1, NULL);
        kc_set(c, 0, MX_FLOAT32, sa->rank, sa->dims, a);
        kc_set(c, 1, MX_FLOAT32, sb->rank, sb->dims, b);
        kc_set(c, 2, MX_FLOAT32, r4 ? 4 : 3, r4 ? DIMS(1, 2, 3, 4) : DIMS(2, 3, 4), o);
        memset(o, 0xff, sizeof o);
        cr_assert_eq(kc_run_with(ops[op], c, NULL), MX_OK, "%s shapes %d, %d", ops[op], i, j);
        for (int64_t e = 0; e < OUT_N; e++) {
          float x = a[src_index(sa, e)], y = b[src_index(sb, e)];
          float want = op == 0 ? x + y : x - y;
          cr_assert_eq(o[e], want, "%s shapes %d, %d element %lld", ops[op], i, j, (long long)e);
        }
        free(c);
      }
}

Test(ew_plans, where_and_sum_three_inputs) {
  uint8_t cond[OUT_N];
  float x[OUT_N], y[OUT_N], z[OUT_N], o[OUT_N];
  for (int i = 0; i < OUT_N; i++) cond[i] = (uint8_t)((i * 7) % 3 == 0);
  fill(x, OUT_N, 1.0f);
  fill(y, OUT_N, -50.0f);
  fill(z, OUT_N, 1000.0f);
  /* A handful of triples: all fast kinds, a shared suffix, mixed suffixes, column broadcasts. */
  const int triples[][3] = {{5, 5, 5}, {5, 0, 2}, {2, 5, 1},  {4, 2, 5},
                            {3, 2, 5}, {8, 5, 2}, {9, 12, 3}, {6, 7, 0}};
  for (size_t t = 0; t < sizeof triples / sizeof triples[0]; t++) {
    const shape *s0 = &k_shapes[triples[t][0]], *s1 = &k_shapes[triples[t][1]],
                *s2 = &k_shapes[triples[t][2]];
    mx_kernel_call *c = kc_new(3, 1, NULL);
    kc_set(c, 0, MX_BOOL, s0->rank, s0->dims, cond);
    kc_set(c, 1, MX_FLOAT32, s1->rank, s1->dims, x);
    kc_set(c, 2, MX_FLOAT32, s2->rank, s2->dims, y);
    kc_set(c, 3, MX_FLOAT32, 3, DIMS(2, 3, 4), o);
    cr_assert_eq(kc_run_with("Where", c, NULL), MX_OK);
    for (int64_t e = 0; e < OUT_N; e++) {
      float want = cond[src_index(s0, e)] ? x[src_index(s1, e)] : y[src_index(s2, e)];
      cr_assert_eq(o[e], want, "Where triple %zu element %lld", t, (long long)e);
    }
    kc_set(c, 0, MX_FLOAT32, s0->rank, s0->dims, z);
    kc_set(c, 3, MX_FLOAT32, 3, DIMS(2, 3, 4), o);
    /* Sum accumulates in the output: z + x first, then + y. */
    cr_assert_eq(kc_run_with("Sum", c, NULL), MX_OK);
    for (int64_t e = 0; e < OUT_N; e++) {
      float want = z[src_index(s0, e)] + x[src_index(s1, e)];
      want = want + y[src_index(s2, e)];
      cr_assert_eq(o[e], want, "Sum triple %zu element %lld", t, (long long)e);
    }
    free(c);
  }
}

Test(ew_plans, float16_bias_row_and_scalar) {
  uint16_t a[OUT_N], b[4], s, o[OUT_N];
  for (int i = 0; i < OUT_N; i++) a[i] = mx__f32_to_f16((float)i * 0.25f);
  for (int i = 0; i < 4; i++) b[i] = mx__f32_to_f16((float)(i + 1) * 8.0f);
  s = mx__f32_to_f16(-2.0f);
  mx_kernel_call *c = kc_new(2, 1, NULL);
  kc_set(c, 0, MX_FLOAT16, 3, DIMS(2, 3, 4), a);
  kc_set(c, 1, MX_FLOAT16, 1, DIMS(4), b);
  kc_set(c, 2, MX_FLOAT16, 3, DIMS(2, 3, 4), o);
  cr_assert_eq(kc_run_with("Mul", c, NULL), MX_OK);
  for (int i = 0; i < OUT_N; i++)
    cr_assert_eq(o[i], mx__f32_to_f16(mx__f16_to_f32(a[i]) * mx__f16_to_f32(b[i % 4])), "element %d", i);
  kc_set(c, 1, MX_FLOAT16, 0, NULL, &s);
  cr_assert_eq(kc_run_with("Add", c, NULL), MX_OK);
  for (int i = 0; i < OUT_N; i++)
    cr_assert_eq(o[i], mx__f32_to_f16(mx__f16_to_f32(a[i]) - 2.0f), "element %d", i);
  free(c);
}

Test(ew_plans, shapes_that_do_not_broadcast_fail) {
  float a[OUT_N] = {0}, b[OUT_N] = {0}, o[OUT_N];
  const shape bad[] = {{1, {3}},       {2, {2, 4}},       {1, {5}}, {2, {4, 4}},
                       {3, {2, 3, 5}}, {4, {2, 2, 3, 4}}, {1, {0}}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    mx_kernel_call *c = kc_new(2, 1, NULL);
    kc_set(c, 0, MX_FLOAT32, 3, DIMS(2, 3, 4), a);
    kc_set(c, 1, MX_FLOAT32, bad[i].rank, bad[i].dims, b);
    kc_set(c, 2, MX_FLOAT32, 3, DIMS(2, 3, 4), o);
    cr_expect_eq(kc_run_with("Add", c, NULL), MX_ERR_KERNEL, "shape %zu", i);
    /* Either operand position. */
    kc_set(c, 0, MX_FLOAT32, bad[i].rank, bad[i].dims, b);
    kc_set(c, 1, MX_FLOAT32, 3, DIMS(2, 3, 4), a);
    cr_expect_eq(kc_run_with("Add", c, NULL), MX_ERR_KERNEL, "shape %zu (left)", i);
    free(c);
  }
}

Test(ew_plans, rank0_output_and_size1_dims) {
  float a = 3.0f, b = 4.0f, o = 0.0f;
  mx_kernel_call *c = kc_new(2, 1, NULL);
  kc_set(c, 0, MX_FLOAT32, 0, NULL, &a);
  kc_set(c, 1, MX_FLOAT32, 0, NULL, &b);
  kc_set(c, 2, MX_FLOAT32, 0, NULL, &o);
  cr_assert_eq(kc_run_with("Mul", c, NULL), MX_OK);
  cr_assert_eq(o, 12.0f);
  /* [3,1] + [1] -> [3,1]: same shape up to size-1 dims. */
  float x[3] = {1, 2, 3}, y[3];
  kc_set(c, 0, MX_FLOAT32, 2, DIMS(3, 1), x);
  kc_set(c, 1, MX_FLOAT32, 1, DIMS(1), &b);
  kc_set(c, 2, MX_FLOAT32, 2, DIMS(3, 1), y);
  cr_assert_eq(kc_run_with("Add", c, NULL), MX_OK);
  for (int i = 0; i < 3; i++) cr_assert_eq(y[i], x[i] + 4.0f);
  /* [1,3] (row) against [3,1] (column) -> [3,3] takes the general planner. */
  float z[9];
  kc_set(c, 0, MX_FLOAT32, 2, DIMS(1, 3), x);
  kc_set(c, 1, MX_FLOAT32, 2, DIMS(3, 1), x);
  kc_set(c, 2, MX_FLOAT32, 2, DIMS(3, 3), z);
  cr_assert_eq(kc_run_with("Mul", c, NULL), MX_OK);
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) cr_assert_eq(z[i * 3 + j], x[j] * x[i]);
  free(c);
}
