/* Kernel tests of the resampling and tensor groups (kernels/resample*.c, kernels/tensor.c) for
 * what the upstream node tests leave out: Pad's reflect/wrap beyond one period, negative pads
 * and integer constants; DepthToSpace's CRD mode and the SpaceToDepth round trip; Resize on
 * integer data and the opset-10 / Upsample sampling; GridSample reflection; Unique along an
 * axis in first-occurrence order and with NaNs as one value; ScatterElements reductions on
 * integers; Compress on the flattened input; EyeLike below the diagonal; TensorScatter
 * wrapping around the cache. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph/ops/index_params.h"
#include "graph/ops/resample_params.h"
#include "graph/ops/tensor_params.h"
#include "kernels/kernel.h"
#include "kernels/kernels_support.h"

TestSuite(resample_kernels);

/* --- Pad -------------------------------------------------------------------------------------- */

/* Pads a 1-D int32 row of n values with (b, e) in mode; out gets n + b + e values. */
static mx_status pad_1d(const int32_t *in, int64_t n, int64_t b, int64_t e, int32_t mode, int32_t *out) {
  mx_pad_params p = {.mode = mode};
  int64_t pads[2] = {b, e};
  mx_kernel_call *c = kc_new(2, 1, &p);
  kc_set(c, 0, MX_INT32, 1, DIMS(n), (void *)in);
  kc_set(c, 1, MX_INT64, 1, DIMS(2), pads);
  kc_set(c, 2, MX_INT32, 1, DIMS(n + b + e), out);
  mx_status st = kc_run("Pad", c);
  free(c);
  return st;
}

Test(resample_kernels, pad_reflect_and_wrap_beyond_one_period) {
  const int32_t in[3] = {1, 2, 3};
  int32_t out[11];
  cr_assert_eq(pad_1d(in, 3, 5, 3, MX_PAD_REFLECT, out), MX_OK);
  expect_i64(
      (int64_t[]){out[0], out[1], out[2], out[3], out[4], out[5], out[6], out[7], out[8], out[9], out[10]},
      (int64_t[]){2, 1, 2, 3, 2, 1, 2, 3, 2, 1, 2}, 11);
  cr_assert_eq(pad_1d(in, 3, 4, 4, MX_PAD_WRAP, out), MX_OK);
  expect_i64(
      (int64_t[]){out[0], out[1], out[2], out[3], out[4], out[5], out[6], out[7], out[8], out[9], out[10]},
      (int64_t[]){3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1}, 11);
  cr_assert_eq(pad_1d(in, 3, 2, 1, MX_PAD_EDGE, out), MX_OK);
  expect_i64((int64_t[]){out[0], out[1], out[2], out[3], out[4], out[5]}, (int64_t[]){1, 1, 1, 2, 3, 3}, 6);
}

Test(resample_kernels, pad_negative_pads_crop_and_constant_input) {
  /* [2, 4] -> crop one column at the front, add two rows of 7 at the end. */
  int8_t in[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[4 * 3], value = 7;
  int64_t pads[4] = {0, -1, 2, 0};
  mx_pad_params p = {.mode = MX_PAD_CONSTANT};
  mx_kernel_call *c = kc_new(3, 1, &p);
  kc_set(c, 0, MX_INT8, 2, DIMS(2, 4), in);
  kc_set(c, 1, MX_INT64, 1, DIMS(4), pads);
  kc_set(c, 2, MX_INT8, 0, NULL, &value);
  kc_set(c, 3, MX_INT8, 2, DIMS(4, 3), out);
  cr_assert_eq(kc_run("Pad", c), MX_OK);
  int8_t want[12] = {2, 3, 4, 6, 7, 8, 7, 7, 7, 7, 7, 7};
  cr_assert_arr_eq(out, want, sizeof want);
  free(c);
}

/* --- DepthToSpace / SpaceToDepth -------------------------------------------------------------- */

Test(resample_kernels, depth_to_space_crd_and_dcr) {
  /* [1, 4, 1, 1] with blocksize 2: DCR takes channel (i*2 + j) for block (i, j), CRD too when
   * there is one output channel; with 8 channels the two orders differ. */
  float in[8], out[8];
  for (int i = 0; i < 8; i++) in[i] = (float)i;
  mx_depth_space_params p = {.blocksize = 2, .crd = 1};
  mx_kernel_call *c = kc_new(1, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 4, DIMS(1, 8, 1, 1), in);
  kc_set(c, 1, MX_FLOAT32, 4, DIMS(1, 2, 2, 2), out);
  cr_assert_eq(kc_run("DepthToSpace", c), MX_OK);
  expect_f32_same(out, (float[]){0, 1, 2, 3, 4, 5, 6, 7}, 8);
  p.crd = 0;
  cr_assert_eq(kc_run("DepthToSpace", c), MX_OK);
  expect_f32_same(out, (float[]){0, 2, 4, 6, 1, 3, 5, 7}, 8);
  free(c);
}

Test(resample_kernels, space_to_depth_then_depth_to_space_is_the_identity) {
  enum { N = 2, C = 3, H = 4, W = 6, B = 2 };
  float x[N * C * H * W], mid[N * C * H * W], back[N * C * H * W];
  for (int i = 0; i < N * C * H * W; i++) x[i] = (float)i;
  mx_depth_space_params p = {.blocksize = B};
  mx_kernel_call *c = kc_new(1, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 4, DIMS(N, C, H, W), x);
  kc_set(c, 1, MX_FLOAT32, 4, DIMS(N, C * B * B, H / B, W / B), mid);
  cr_assert_eq(kc_run("SpaceToDepth", c), MX_OK);
  kc_set(c, 0, MX_FLOAT32, 4, DIMS(N, C * B * B, H / B, W / B), mid);
  kc_set(c, 1, MX_FLOAT32, 4, DIMS(N, C, H, W), back);
  cr_assert_eq(kc_run("DepthToSpace", c), MX_OK);
  expect_f32_same(back, x, N * C * H * W);
  free(c);
}

/* --- Resize / Upsample ------------------------------------------------------------------------ */

Test(resample_kernels, resize_nearest_on_uint8_copies_elements) {
  uint8_t in[4] = {10, 20, 250, 40}, out[8];
  float scales[2] = {1.0f, 2.0f};
  mx_resize_params p = {.mode = MX_RESIZE_NEAREST,
                        .coord = MX_COORD_ASYMMETRIC,
                        .nearest = MX_NEAREST_FLOOR,
                        .roi_input = 1,
                        .scales_input = 2,
                        .sizes_input = 3};
  mx_kernel_call *c = kc_new(3, 1, &p);
  kc_set(c, 0, MX_UINT8, 2, DIMS(2, 2), in);
  kc_set(c, 2, MX_FLOAT32, 1, DIMS(2), scales);
  kc_set(c, 3, MX_UINT8, 2, DIMS(2, 4), out);
  cr_assert_eq(kc_run("Resize", c), MX_OK);
  uint8_t want[8] = {10, 10, 20, 20, 250, 250, 40, 40};
  cr_assert_arr_eq(out, want, sizeof want);
  free(c);
}

Test(resample_kernels, upsample_linear_samples_at_x_over_scale) {
  /* Upsample: asymmetric coordinates, the last sample clamps to the edge. */
  float in[3] = {0.0f, 4.0f, 8.0f}, out[6];
  mx_resize_params p = {.mode = MX_RESIZE_LINEAR,
                        .coord = MX_COORD_ASYMMETRIC,
                        .nearest = MX_NEAREST_FLOOR,
                        .roi_input = -1,
                        .scales_input = -1,
                        .sizes_input = -1,
                        .n_attr_scales = 1,
                        .attr_scales = {2.0f}};
  mx_kernel_call *c = kc_new(1, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 1, DIMS(3), in);
  kc_set(c, 1, MX_FLOAT32, 1, DIMS(6), out);
  cr_assert_eq(kc_run("Upsample", c), MX_OK);
  expect_f32_near(out, (float[]){0, 2, 4, 6, 8, 8}, 6, 1e-6f);
  free(c);
}

/* --- GridSample ------------------------------------------------------------------------------- */

Test(resample_kernels, grid_sample_reflection_mirrors_outside_points) {
  /* A 1x1x1x3 row sampled at x = -1.5, 0 and 1.5 (normalized, align_corners=1): -1.5 is one
   * half-width left of the first pixel and reflects onto 0.5 pixels right of it; with zeros
   * padding the outside neighbour of a sample counts as 0. */
  float in[3] = {0.0f, 10.0f, 20.0f}, grid[6] = {-1.5f, 0.0f, 0.0f, 0.0f, 1.5f, 0.0f}, out[3];
  mx_grid_sample_params p = {.mode = MX_RESIZE_LINEAR, .padding = MX_GRID_REFLECTION, .align_corners = 1};
  mx_kernel_call *c = kc_new(2, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 4, DIMS(1, 1, 1, 3), in);
  kc_set(c, 1, MX_FLOAT32, 4, DIMS(1, 1, 3, 2), grid);
  kc_set(c, 2, MX_FLOAT32, 4, DIMS(1, 1, 1, 3), out);
  cr_assert_eq(kc_run("GridSample", c), MX_OK);
  expect_f32_near(out, (float[]){5.0f, 10.0f, 15.0f}, 3, 1e-6f);
  p.padding = MX_GRID_ZEROS;
  cr_assert_eq(kc_run("GridSample", c), MX_OK);
  expect_f32_near(out, (float[]){0.0f, 10.0f, 10.0f}, 3, 1e-6f);
  free(c);
}

/* --- tensor group ----------------------------------------------------------------------------- */

Test(resample_kernels, unique_along_an_axis_in_first_occurrence_order) {
  /* Columns of [[2, 1, 2, 1], [5, 3, 5, 4]]: (2,5) (1,3) (2,5) (1,4). */
  int64_t x[8] = {2, 1, 2, 1, 5, 3, 5, 4}, y[8] = {0}, idx[4], inv[4], cnt[4];
  mx_axis_opt_params p = {.axis = 1, .has_axis = 1, .sorted = 0};
  mx_kernel_call *c = kc_new(1, 4, &p);
  kc_set(c, 0, MX_INT64, 2, DIMS(2, 4), x);
  kc_set(c, 1, MX_INT64, 2, DIMS(2, 4), y);
  kc_set(c, 2, MX_INT64, 1, DIMS(4), idx);
  kc_set(c, 3, MX_INT64, 1, DIMS(4), inv);
  kc_set(c, 4, MX_INT64, 1, DIMS(4), cnt);
  cr_assert_eq(kc_run("Unique", c), MX_OK);
  cr_assert_eq(c->t[1].dims[1], 3);
  expect_i64(y, (int64_t[]){2, 1, 1, 5, 3, 4}, 6);
  expect_i64(idx, (int64_t[]){0, 1, 3}, 3);
  expect_i64(inv, (int64_t[]){0, 1, 0, 2}, 4);
  expect_i64(cnt, (int64_t[]){2, 1, 1}, 3);
  p.sorted = 1;
  kc_set(c, 1, MX_INT64, 2, DIMS(2, 4), y);
  cr_assert_eq(kc_run("Unique", c), MX_OK);
  expect_i64(y, (int64_t[]){1, 1, 2, 3, 4, 5}, 6);
  expect_i64(inv, (int64_t[]){2, 0, 2, 1}, 4);
  free(c);
}

Test(resample_kernels, unique_puts_equal_nans_last) {
  float x[5] = {NAN, 1.0f, NAN, 0.0f, 1.0f}, y[5];
  int64_t idx[5], inv[5], cnt[5];
  mx_axis_opt_params p = {.sorted = 1};
  mx_kernel_call *c = kc_new(1, 4, &p);
  kc_set(c, 0, MX_FLOAT32, 1, DIMS(5), x);
  kc_set(c, 1, MX_FLOAT32, 1, DIMS(5), y);
  kc_set(c, 2, MX_INT64, 1, DIMS(5), idx);
  kc_set(c, 3, MX_INT64, 1, DIMS(5), inv);
  kc_set(c, 4, MX_INT64, 1, DIMS(5), cnt);
  cr_assert_eq(kc_run("Unique", c), MX_OK);
  cr_assert_eq(c->t[1].dims[0], 3);
  expect_f32_same(y, (float[]){0.0f, 1.0f, NAN}, 3);
  expect_i64(idx, (int64_t[]){3, 1, 0}, 3);
  expect_i64(inv, (int64_t[]){2, 1, 2, 0, 1}, 5);
  expect_i64(cnt, (int64_t[]){1, 2, 2}, 3);
  free(c);
}

Test(resample_kernels, scatter_elements_integer_reductions) {
  int32_t data[4] = {1, 2, 3, 4}, upd[3] = {10, 20, 30}, out[4];
  int64_t ind[3] = {1, -3, 3};
  mx_scatter_elements_params p = {.axis = 0, .reduction = MX_SCATTER_ADD};
  mx_kernel_call *c = kc_new(3, 1, &p);
  kc_set(c, 0, MX_INT32, 1, DIMS(4), data);
  kc_set(c, 1, MX_INT64, 1, DIMS(3), ind);
  kc_set(c, 2, MX_INT32, 1, DIMS(3), upd);
  kc_set(c, 3, MX_INT32, 1, DIMS(4), out);
  cr_assert_eq(kc_run("ScatterElements", c), MX_OK);
  expect_i64((int64_t[]){out[0], out[1], out[2], out[3]}, (int64_t[]){1, 32, 3, 34}, 4);
  p.reduction = MX_SCATTER_MIN;
  cr_assert_eq(kc_run("ScatterElements", c), MX_OK);
  expect_i64((int64_t[]){out[0], out[1], out[2], out[3]}, (int64_t[]){1, 2, 3, 4}, 4);
  ind[0] = 4;
  cr_assert_eq(kc_run("ScatterElements", c), MX_ERR_KERNEL);
  free(c);
}

Test(resample_kernels, compress_flattened_writes_the_count) {
  float x[6] = {1, 2, 3, 4, 5, 6}, out[4];
  uint8_t cond[4] = {0, 1, 1, 0};
  mx_axis_opt_params p = {0};
  mx_kernel_call *c = kc_new(2, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 2, DIMS(2, 3), x);
  kc_set(c, 1, MX_BOOL, 1, DIMS(4), cond);
  kc_set(c, 2, MX_FLOAT32, 1, DIMS(4), out);
  cr_assert_eq(kc_run("Compress", c), MX_OK);
  cr_assert_eq(c->t[2].dims[0], 2);
  expect_f32_same(out, (float[]){2, 3}, 2);
  free(c);
}

Test(resample_kernels, eyelike_below_the_diagonal) {
  int64_t x[6] = {0};
  uint8_t out[6];
  mx_eyelike_params p = {.k = -1, .dtype = MX_BOOL};
  mx_kernel_call *c = kc_new(1, 1, &p);
  kc_set(c, 0, MX_INT64, 2, DIMS(3, 2), x);
  kc_set(c, 1, MX_BOOL, 2, DIMS(3, 2), out);
  cr_assert_eq(kc_run("EyeLike", c), MX_OK);
  uint8_t want[6] = {0, 0, 1, 0, 0, 1};
  cr_assert_arr_eq(out, want, sizeof want);
  free(c);
}

Test(resample_kernels, tensor_scatter_circular_wraps_around_the_cache) {
  /* Cache [2, 4, 1], update [2, 2, 1], write positions 3 and 1. */
  float cache[8] = {0, 0, 0, 0, 0, 0, 0, 0}, upd[4] = {1, 2, 3, 4}, out[8];
  int64_t wi[2] = {3, 1};
  mx_tensor_scatter_params p = {.axis = -2, .circular = 1};
  mx_kernel_call *c = kc_new(3, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 3, DIMS(2, 4, 1), cache);
  kc_set(c, 1, MX_FLOAT32, 3, DIMS(2, 2, 1), upd);
  kc_set(c, 2, MX_INT64, 1, DIMS(2), wi);
  kc_set(c, 3, MX_FLOAT32, 3, DIMS(2, 4, 1), out);
  cr_assert_eq(kc_run("TensorScatter", c), MX_OK);
  expect_f32_same(out, (float[]){2, 0, 0, 1, 0, 3, 4, 0}, 8);
  p.circular = 0;
  cr_assert_eq(kc_run("TensorScatter", c), MX_ERR_KERNEL);
  free(c);
}
