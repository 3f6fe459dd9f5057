/* Kernel tests of the index group (kernels/index*.c): Gather (embedding rows, inner
 * axes, negative and out-of-range indices, int32 indices, 16-bit and 1-byte dtypes),
 * GatherElements, GatherND with batch dims, ScatterND with every reduction (float16 rounding
 * once), Slice with negative steps and INT64 limits on both the input and attribute paths,
 * Trilu, TopK (ties in index order, NaN, integers) and NonZero's actual-shape write-back. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/half.h"
#include "graph/ops/index_params.h"
#include "kernels/kernel.h"
#include "kernels/kernels_support.h"

TestSuite(index_kernels);

/* --- Gather ----------------------------------------------------------------------------------- */

Test(index_kernels, gather_embedding_rows_with_negative_indices) {
  enum { V = 5, D = 3 };
  float table[V * D], out[4 * D];
  for (int i = 0; i < V * D; i++) table[i] = (float)i;
  int64_t ids[4] = {4, 0, -1, 2};
  mx_gather_params p = {.axis = 0};
  mx_kernel_call *c = kc_new(2, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 2, DIMS(V, D), table);
  kc_set(c, 1, MX_INT64, 2, DIMS(2, 2), ids);
  kc_set(c, 2, MX_FLOAT32, 3, DIMS(2, 2, D), out);
  cr_assert_eq(kc_run("Gather", c), MX_OK);
  expect_f32_same(out, (float[]){12, 13, 14, 0, 1, 2, 12, 13, 14, 6, 7, 8}, 4 * D);
  ids[1] = 5;
  cr_assert_eq(kc_run("Gather", c), MX_ERR_KERNEL);
  cr_assert(c->why && strstr(c->why, "range"));
  ids[1] = -6;
  cr_assert_eq(kc_run("Gather", c), MX_ERR_KERNEL);
  free(c);
}

Test(index_kernels, gather_inner_axis_int32_indices_and_small_dtypes) {
  uint16_t data[6] = {10, 11, 12, 13, 14, 15}, out[4];
  int32_t idx[2] = {2, -3};
  mx_gather_params p = {.axis = -1};
  mx_kernel_call *c = kc_new(2, 1, &p);
  kc_set(c, 0, MX_BFLOAT16, 2, DIMS(2, 3), data);
  kc_set(c, 1, MX_INT32, 1, DIMS(2), idx);
  kc_set(c, 2, MX_BFLOAT16, 2, DIMS(2, 2), out);
  cr_assert_eq(kc_run("Gather", c), MX_OK);
  cr_assert(out[0] == 12 && out[1] == 10 && out[2] == 15 && out[3] == 13);

  int8_t d8[6] = {1, 2, 3, 4, 5, 6}, o8[3];
  int64_t scalar = 1;
  p.axis = 0;
  kc_set(c, 0, MX_INT8, 2, DIMS(2, 3), d8);
  kc_set(c, 1, MX_INT64, 0, NULL, &scalar);
  kc_set(c, 2, MX_INT8, 1, DIMS(3), o8);
  cr_assert_eq(kc_run("Gather", c), MX_OK);
  cr_assert(o8[0] == 4 && o8[1] == 5 && o8[2] == 6);

  /* empty indices: nothing to do */
  kc_set(c, 1, MX_INT64, 1, DIMS(0), NULL);
  kc_set(c, 2, MX_INT8, 2, DIMS(0, 3), NULL);
  cr_assert_eq(kc_run("Gather", c), MX_OK);
  free(c);
}

Test(index_kernels, gather_elements_onnx_examples) {
  float data[4] = {1, 2, 3, 4}, out[4];
  int64_t idx[4] = {0, 0, 1, 0};
  mx_gather_params p = {.axis = 1};
  mx_kernel_call *c = kc_new(2, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 2, DIMS(2, 2), data);
  kc_set(c, 1, MX_INT64, 2, DIMS(2, 2), idx);
  kc_set(c, 2, MX_FLOAT32, 2, DIMS(2, 2), out);
  cr_assert_eq(kc_run("GatherElements", c), MX_OK);
  expect_f32_same(out, (float[]){1, 1, 4, 3}, 4);

  float d2[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, o2[6];
  int32_t i2[6] = {-1, -2, 0, -2, 0, 0};
  p.axis = 0;
  kc_set(c, 0, MX_FLOAT32, 2, DIMS(3, 3), d2);
  kc_set(c, 1, MX_INT32, 2, DIMS(2, 3), i2);
  kc_set(c, 2, MX_FLOAT32, 2, DIMS(2, 3), o2);
  cr_assert_eq(kc_run("GatherElements", c), MX_OK);
  expect_f32_same(o2, (float[]){7, 5, 3, 4, 2, 3}, 6);
  i2[0] = 3;
  cr_assert_eq(kc_run("GatherElements", c), MX_ERR_KERNEL);
  free(c);
}

Test(index_kernels, gathernd_with_and_without_batch_dims) {
  int32_t data[8] = {0, 1, 2, 3, 4, 5, 6, 7}, out[4];
  int64_t idx[4] = {0, 1, 1, 0};
  mx_gathernd_params p = {.batch_dims = 0};
  mx_kernel_call *c = kc_new(2, 1, &p);
  kc_set(c, 0, MX_INT32, 3, DIMS(2, 2, 2), data);
  kc_set(c, 1, MX_INT64, 2, DIMS(2, 2), idx);
  kc_set(c, 2, MX_INT32, 2, DIMS(2, 2), out);
  cr_assert_eq(kc_run("GatherND", c), MX_OK);
  cr_assert(out[0] == 2 && out[1] == 3 && out[2] == 4 && out[3] == 5);

  int64_t bidx[2] = {1, 0};
  p.batch_dims = 1;
  kc_set(c, 1, MX_INT64, 2, DIMS(2, 1), bidx);
  cr_assert_eq(kc_run("GatherND", c), MX_OK);
  cr_assert(out[0] == 2 && out[1] == 3 && out[2] == 4 && out[3] == 5);
  bidx[0] = 2;
  cr_assert_eq(kc_run("GatherND", c), MX_ERR_KERNEL);
  free(c);
}

/* --- ScatterND -------------------------------------------------------------------------------- */

Test(index_kernels, scatternd_reductions) {
  float data[8] = {1, 2, 3, 4, 5, 6, 7, 8}, upd[2] = {10, 0.5f}, out[8];
  int64_t idx[2] = {4, -1}; /* -1 is element 7 */
  static const float want[5][8] = {
      {1, 2, 3, 4, 10, 6, 7, 0.5f}, {1, 2, 3, 4, 15, 6, 7, 8.5f}, {1, 2, 3, 4, 50, 6, 7, 4},
      {1, 2, 3, 4, 10, 6, 7, 8},    {1, 2, 3, 4, 5, 6, 7, 0.5f},
  };
  for (int32_t red = 0; red < 5; red++) {
    mx_scatternd_params p = {.reduction = red};
    mx_kernel_call *c = kc_new(3, 1, &p);
    kc_set(c, 0, MX_FLOAT32, 1, DIMS(8), data);
    kc_set(c, 1, MX_INT64, 2, DIMS(2, 1), idx);
    kc_set(c, 2, MX_FLOAT32, 1, DIMS(2), upd);
    kc_set(c, 3, MX_FLOAT32, 1, DIMS(8), out);
    cr_assert_eq(kc_run("ScatterND", c), MX_OK);
    expect_f32_same(out, want[red], 8);
    free(c);
  }
}

Test(index_kernels, scatternd_slices_float16_and_int64) {
  uint16_t data[4], upd[2], out[4];
  for (int i = 0; i < 4; i++) data[i] = mx__f32_to_f16(1.0f);
  upd[0] = mx__f32_to_f16(0.0004f); /* 1 + 0.0004 rounds back to 1 in float16 */
  upd[1] = mx__f32_to_f16(0.5f);
  int64_t idx[1] = {1};
  mx_scatternd_params p = {.reduction = MX_SCATTER_ADD};
  mx_kernel_call *c = kc_new(3, 1, &p);
  kc_set(c, 0, MX_FLOAT16, 2, DIMS(2, 2), data);
  kc_set(c, 1, MX_INT64, 2, DIMS(1, 1), idx);
  kc_set(c, 2, MX_FLOAT16, 2, DIMS(1, 2), upd);
  kc_set(c, 3, MX_FLOAT16, 2, DIMS(2, 2), out);
  cr_assert_eq(kc_run("ScatterND", c), MX_OK);
  cr_assert_eq(out[0], data[0]);
  cr_assert_eq(out[2], mx__f32_to_f16(1.0f));
  cr_assert_eq(out[3], mx__f32_to_f16(1.5f));
  free(c);

  int64_t d64[3] = {INT64_MAX, 2, 3}, u64[1] = {1}, o64[3], i64[1] = {0};
  c = kc_new(3, 1, &p);
  kc_set(c, 0, MX_INT64, 1, DIMS(3), d64);
  kc_set(c, 1, MX_INT64, 2, DIMS(1, 1), i64);
  kc_set(c, 2, MX_INT64, 1, DIMS(1), u64);
  kc_set(c, 3, MX_INT64, 1, DIMS(3), o64);
  cr_assert_eq(kc_run("ScatterND", c), MX_OK);
  cr_assert_eq(o64[0], INT64_MIN, "wraps like numpy");
  i64[0] = 3;
  cr_assert_eq(kc_run("ScatterND", c), MX_ERR_KERNEL);
  free(c);
}

/* --- Slice ------------------------------------------------------------------------------------ */

static float grid[20]; /* 4 x 5, value = 10*row + col */

static void fill_grid(void) {
  for (int r = 0; r < 4; r++)
    for (int k = 0; k < 5; k++) grid[r * 5 + k] = (float)(10 * r + k);
}

Test(index_kernels, slice_inputs_with_negative_steps_and_limits) {
  fill_grid();
  int64_t starts[2] = {-1, INT64_MAX}, ends[2] = {INT64_MIN, 0}, axes[2] = {0, -1}, steps[2] = {-2, -2};
  float out[4];
  mx_slice_params p = {0};
  mx_kernel_call *c = kc_new(5, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 2, DIMS(4, 5), grid);
  kc_set(c, 1, MX_INT64, 1, DIMS(2), starts);
  kc_set(c, 2, MX_INT64, 1, DIMS(2), ends);
  kc_set(c, 3, MX_INT64, 1, DIMS(2), axes);
  kc_set(c, 4, MX_INT64, 1, DIMS(2), steps);
  kc_set(c, 5, MX_FLOAT32, 2, DIMS(2, 2), out);
  cr_assert_eq(kc_run("Slice", c), MX_OK);
  /* rows 3, 1; columns 4, 2 (end 0 is exclusive) */
  expect_f32_same(out, (float[]){34, 32, 14, 12}, 4);
  kc_set(c, 5, MX_FLOAT32, 2, DIMS(2, 3), out);
  cr_assert_eq(kc_run("Slice", c), MX_ERR_KERNEL, "output dims must match");
  free(c);
}

Test(index_kernels, slice_default_axes_int32_and_empty) {
  fill_grid();
  int32_t starts[1] = {1}, ends[1] = {1000};
  float out[15];
  mx_slice_params p = {0};
  mx_kernel_call *c = kc_new(3, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 2, DIMS(4, 5), grid);
  kc_set(c, 1, MX_INT32, 1, DIMS(1), starts);
  kc_set(c, 2, MX_INT32, 1, DIMS(1), ends);
  kc_set(c, 3, MX_FLOAT32, 2, DIMS(3, 5), out);
  cr_assert_eq(kc_run("Slice", c), MX_OK);
  for (int i = 0; i < 15; i++) cr_assert_eq(out[i], grid[5 + i]);
  starts[0] = 1000;
  kc_set(c, 3, MX_FLOAT32, 2, DIMS(0, 5), out);
  cr_assert_eq(kc_run("Slice", c), MX_OK, "start beyond the end gives an empty slice");
  free(c);
}

Test(index_kernels, slice_attribute_form) {
  fill_grid();
  mx_slice_params p = {
      .starts = {1, 0}, .ends = {-1, 3}, .axes = {1, 0}, .n = 2, .from_attrs = 1, .has_axes = 1};
  float out[9];
  mx_kernel_call *c = kc_new(1, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 2, DIMS(4, 5), grid);
  kc_set(c, 1, MX_FLOAT32, 2, DIMS(3, 3), out);
  cr_assert_eq(kc_run("Slice", c), MX_OK);
  expect_f32_same(out, (float[]){1, 2, 3, 11, 12, 13, 21, 22, 23}, 9);
  free(c);
}

/* --- Trilu ------------------------------------------------------------------------------------ */

Test(index_kernels, trilu_upper_and_lower_with_k) {
  int64_t in[12], out[12], k = -1;
  for (int i = 0; i < 12; i++) in[i] = i + 1;
  mx_trilu_params up = {.upper = 1}, lo = {.upper = 0};
  mx_kernel_call *c = kc_new(2, 1, &up);
  kc_set(c, 0, MX_INT64, 2, DIMS(3, 4), in);
  kc_set(c, 1, MX_INT64, 0, NULL, &k);
  kc_set(c, 2, MX_INT64, 2, DIMS(3, 4), out);
  cr_assert_eq(kc_run("Trilu", c), MX_OK);
  expect_i64(out, DIMS(1, 2, 3, 4, 5, 6, 7, 8, 0, 10, 11, 12), 12);
  c->params = &lo;
  k = 1;
  cr_assert_eq(kc_run("Trilu", c), MX_OK);
  expect_i64(out, DIMS(1, 2, 0, 0, 5, 6, 7, 0, 9, 10, 11, 12), 12);
  k = -5;
  cr_assert_eq(kc_run("Trilu", c), MX_OK);
  expect_i64(out, DIMS(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), 12);
  free(c);

  float f[8] = {1, 2, 3, 4, 5, 6, 7, 8}, fo[8];
  c = kc_new(1, 1, &up);
  kc_set(c, 0, MX_FLOAT32, 3, DIMS(2, 2, 2), f);
  kc_set(c, 1, MX_FLOAT32, 3, DIMS(2, 2, 2), fo);
  cr_assert_eq(kc_run("Trilu", c), MX_OK);
  expect_f32_same(fo, (float[]){1, 2, 0, 4, 5, 6, 0, 8}, 8);
  free(c);
}

/* --- TopK ------------------------------------------------------------------------------------- */

Test(index_kernels, topk_largest_keeps_index_order_for_ties) {
  float x[8] = {3, 1, 3, 2, NAN, 0, 5, 5};
  float v[6];
  int64_t i[6], k = 3;
  mx_topk_params p = {.axis = -1, .largest = 1, .sorted = 1};
  mx_kernel_call *c = kc_new(2, 2, &p);
  kc_set(c, 0, MX_FLOAT32, 2, DIMS(2, 4), x);
  kc_set(c, 1, MX_INT64, 1, DIMS(1), &k);
  kc_set(c, 2, MX_FLOAT32, 2, DIMS(2, 3), v);
  kc_set(c, 3, MX_INT64, 2, DIMS(2, 3), i);
  cr_assert_eq(kc_run("TopK", c), MX_OK);
  expect_f32_same(v, (float[]){3, 3, 2, 5, 5, 0}, 6);
  expect_i64(i, DIMS(0, 2, 3, 2, 3, 1), 6);
  p.largest = 0;
  cr_assert_eq(kc_run("TopK", c), MX_OK);
  expect_f32_same(v, (float[]){1, 2, 3, 0, 5, 5}, 6);
  expect_i64(i, DIMS(1, 3, 0, 1, 2, 3), 6);
  k = 2;
  cr_assert_eq(kc_run("TopK", c), MX_ERR_KERNEL, "K input must match the outputs");
  free(c);
}

Test(index_kernels, topk_integers_on_axis_0) {
  int64_t x[6] = {0, 8, 8, 0, 8, 1}, v[4], i[4], k = 2;
  mx_topk_params p = {.axis = 0, .largest = 1, .sorted = 1};
  mx_kernel_call *c = kc_new(2, 2, &p);
  kc_set(c, 0, MX_INT64, 2, DIMS(3, 2), x);
  kc_set(c, 1, MX_INT64, 1, DIMS(1), &k);
  kc_set(c, 2, MX_INT64, 2, DIMS(2, 2), v);
  kc_set(c, 3, MX_INT64, 2, DIMS(2, 2), i);
  cr_assert_eq(kc_run("TopK", c), MX_OK);
  expect_i64(v, DIMS(8, 8, 8, 1), 4);
  expect_i64(i, DIMS(1, 0, 2, 2), 4);
  free(c);
}

/* --- NonZero ---------------------------------------------------------------------------------- */

Test(index_kernels, nonzero_writes_its_actual_shape) {
  uint8_t b[4] = {1, 0, 1, 1};
  int64_t out[2 * 4];
  mx_kernel_call *c = kc_new(1, 1, NULL);
  kc_set(c, 0, MX_BOOL, 2, DIMS(2, 2), b);
  kc_set(c, 1, MX_INT64, 2, DIMS(2, 4), out); /* upper bound [rank, numel] */
  cr_assert_eq(kc_run("NonZero", c), MX_OK);
  cr_assert_eq(c->t[1].rank, 2);
  cr_assert_eq(c->t[1].dims[0], 2);
  cr_assert_eq(c->t[1].dims[1], 3);
  expect_i64(out, DIMS(0, 1, 1, 0, 0, 1), 6);
  free(c);

  float f[5] = {-0.0f, NAN, 0.0f, -INFINITY, 2.0f};
  int64_t fo[5];
  c = kc_new(1, 1, NULL);
  kc_set(c, 0, MX_FLOAT32, 1, DIMS(5), f);
  kc_set(c, 1, MX_INT64, 2, DIMS(1, 5), fo);
  cr_assert_eq(kc_run("NonZero", c), MX_OK);
  cr_assert_eq(c->t[1].dims[1], 3);
  expect_i64(fo, DIMS(1, 3, 4), 3);

  float z[3] = {0, 0, 0};
  kc_set(c, 0, MX_FLOAT32, 1, DIMS(3), z);
  kc_set(c, 1, MX_INT64, 2, DIMS(1, 3), fo);
  cr_assert_eq(kc_run("NonZero", c), MX_OK);
  cr_assert_eq(c->t[1].dims[1], 0);

  float s = 3;
  kc_set(c, 0, MX_FLOAT32, 0, NULL, &s);
  kc_set(c, 1, MX_INT64, 2, DIMS(1, 1), fo);
  cr_assert_eq(kc_run("NonZero", c), MX_OK);
  cr_assert(c->t[1].dims[0] == 1 && c->t[1].dims[1] == 1 && fo[0] == 0);
  free(c);
}
