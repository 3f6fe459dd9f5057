/* Kernel tests of the shape group (kernels/shape*.c): Shape/Size, the byte copies
 * (Reshape, Identity, Dropout with its mask), Transpose against a naive loop for every element
 * size and for shapes that exercise the tiled path, Concat/Split, Expand/Tile broadcasting,
 * Constant/ConstantOfShape and Range, with rank-0, zero-size and negative-axis edge cases and
 * the errors kernels report for inconsistent calls. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/half.h"
#include "graph/ops/shape_params.h"
#include "kernels/kernel.h"
#include "kernels/kernels_support.h"

#define NDIMS(...) ((int32_t)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))

TestSuite(shape_kernels);

/* --- Shape, Size, copies ---------------------------------------------------------------------- */

Test(shape_kernels, shape_with_start_end_and_size) {
  float x[24];
  int64_t out[4] = {0}, n = 0;
  mx_shape_params p = {.start = 1, .end = -1, .has_end = 1};
  mx_kernel_call *c = kc_new(1, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 4, DIMS(2, 3, 1, 4), x);
  kc_set(c, 1, MX_INT64, 1, DIMS(2), out);
  cr_assert_eq(kc_run("Shape", c), MX_OK);
  expect_i64(out, DIMS(3, 1), 2);
  kc_set(c, 1, MX_INT64, 1, DIMS(3), out);
  cr_assert_eq(kc_run("Shape", c), MX_ERR_KERNEL, "wrong output length must be reported");
  cr_assert(c->why);
  free(c);

  c = kc_new(1, 1, NULL);
  kc_set(c, 0, MX_BOOL, 3, DIMS(2, 3, 4), x);
  kc_set(c, 1, MX_INT64, 0, NULL, &n);
  cr_assert_eq(kc_run("Size", c), MX_OK);
  cr_assert_eq(n, 24);
  kc_set(c, 0, MX_FLOAT16, 0, NULL, x);
  cr_assert_eq(kc_run("Size", c), MX_OK);
  cr_assert_eq(n, 1, "a scalar has one element");
  free(c);
}

Test(shape_kernels, reshape_copies_and_skips_aliased_outputs) {
  int16_t in[6] = {1, 2, 3, 4, 5, 6}, out[6] = {0};
  mx_kernel_call *c = kc_new(2, 1, &(mx_reshape_params){0});
  kc_set(c, 0, MX_INT16, 2, DIMS(2, 3), in);
  kc_set(c, 1, MX_INT64, 1, DIMS(2), NULL);
  kc_set(c, 2, MX_INT16, 2, DIMS(3, 2), out);
  cr_assert_eq(kc_run("Reshape", c), MX_OK);
  cr_assert_eq(memcmp(in, out, sizeof in), 0);
  kc_set(c, 2, MX_INT16, 2, DIMS(3, 2), in); /* executor aliased the output */
  cr_assert_eq(kc_run("Reshape", c), MX_OK);
  cr_assert_eq(in[5], 6);
  kc_set(c, 2, MX_INT16, 1, DIMS(5), out);
  cr_assert_eq(kc_run("Reshape", c), MX_ERR_KERNEL);
  free(c);
}

Test(shape_kernels, identity_squeeze_unsqueeze_flatten_copy_every_dtype) {
  static const char *const ops[] = {"Identity", "Squeeze", "Unsqueeze", "Flatten"};
  static const mx_dtype dts[] = {MX_FLOAT32, MX_FLOAT16, MX_BFLOAT16, MX_FLOAT64, MX_INT8,
                                 MX_UINT8,   MX_INT16,   MX_INT32,    MX_INT64,   MX_BOOL};
  uint64_t in[4] = {0x0102030405060708ull, 0x1112131415161718ull, 0x2122232425262728ull,
                    0x3132333435363738ull};
  mx_axes_params ap = {0};
  mx_flatten_params fp = {.axis = 1};
  for (size_t o = 0; o < 4; o++)
    for (size_t d = 0; d < 10; d++) {
      uint64_t out[4] = {0};
      const void *params = o == 3 ? (const void *)&fp : o == 0 ? NULL : (const void *)&ap;
      mx_kernel_call *c = kc_new(1, 1, params);
      kc_set(c, 0, dts[d], 2, DIMS(1, 2), in);
      kc_set(c, 1, dts[d], 2, DIMS(2, 1), out);
      cr_assert_eq(kc_run(ops[o], c), MX_OK, "%s %s", ops[o], mx_dtype_name(dts[d]));
      size_t bytes = 2 * mx_dtype_size(dts[d]);
      cr_assert_eq(memcmp(in, out, bytes), 0, "%s %s", ops[o], mx_dtype_name(dts[d]));
      cr_assert_eq(((unsigned char *)out)[bytes], 0, "wrote past the end");
      free(c);
    }
}

Test(shape_kernels, dropout_passes_data_and_sets_the_mask) {
  float in[3] = {1.5f, NAN, -INFINITY}, out[3];
  uint8_t mask[3] = {0};
  mx_dropout_params p = {.ratio = 0.5f};
  mx_kernel_call *c = kc_new(1, 2, &p);
  kc_set(c, 0, MX_FLOAT32, 1, DIMS(3), in);
  kc_set(c, 1, MX_FLOAT32, 1, DIMS(3), out);
  kc_set(c, 2, MX_BOOL, 1, DIMS(3), mask);
  cr_assert_eq(kc_run("Dropout", c), MX_OK);
  expect_f32_same(out, in, 3);
  for (int i = 0; i < 3; i++) cr_assert_eq(mask[i], 1);
  free(c);
}

/* --- Transpose -------------------------------------------------------------------------------- */

/* Naive transpose of a row-major tensor of element size es. */
static void naive_transpose(const unsigned char *in, unsigned char *out, size_t es, int32_t r,
                            const int64_t *dims, const int64_t *perm) {
  int64_t st[MX_MAX_RANK], od[MX_MAX_RANK], coord[MX_MAX_RANK] = {0}, n = 1, s = 1;
  for (int32_t k = r - 1; k >= 0; k--) {
    st[k] = s;
    s *= dims[k];
  }
  for (int32_t k = 0; k < r; k++) {
    od[k] = dims[perm[k]];
    n *= od[k];
  }
  for (int64_t e = 0; e < n; e++) {
    int64_t off = 0;
    for (int32_t k = 0; k < r; k++) off += coord[k] * st[perm[k]];
    memcpy(out + e * es, in + off * es, es);
    for (int32_t k = r - 1; k >= 0; k--) {
      if (++coord[k] < od[k]) break;
      coord[k] = 0;
    }
  }
}

static void check_transpose(mx_dtype dt, int32_t r, const int64_t *dims, const int64_t *perm) {
  size_t es = mx_dtype_size(dt);
  int64_t n = 1, od[MX_MAX_RANK];
  for (int32_t k = 0; k < r; k++) n *= dims[k];
  for (int32_t k = 0; k < r; k++) od[k] = dims[perm[k]];
  unsigned char *in = malloc(n * es + 1), *got = malloc(n * es + 1), *want = malloc(n * es + 1);
  for (int64_t i = 0; i < (int64_t)(n * es); i++) in[i] = (unsigned char)(i * 7 + i / 251);
  naive_transpose(in, want, es, r, dims, perm);
  mx_transpose_params p = {.n_perm = r, .has_perm = 1};
  memcpy(p.perm, perm, (size_t)r * sizeof *perm);
  mx_kernel_call *c = kc_new(1, 1, &p);
  kc_set(c, 0, dt, r, dims, in);
  kc_set(c, 1, dt, r, od, got);
  got[n * es] = 0xAB;
  cr_assert_eq(kc_run("Transpose", c), MX_OK);
  cr_assert_eq(memcmp(got, want, n * es), 0, "%s rank %d perm[last] %lld", mx_dtype_name(dt), (int)r,
               (long long)perm[r - 1]);
  cr_assert_eq(got[n * es], 0xAB, "wrote past the end");
  free(c);
  free(in);
  free(got);
  free(want);
}

Test(shape_kernels, transpose_matches_naive_for_every_element_size) {
  static const mx_dtype dts[] = {MX_INT8, MX_FLOAT16, MX_FLOAT32, MX_FLOAT64};
  for (size_t d = 0; d < 4; d++) {
    check_transpose(dts[d], 2, DIMS(67, 45), DIMS(1, 0));            /* tiled, ragged edges */
    check_transpose(dts[d], 4, DIMS(2, 5, 3, 16), DIMS(0, 2, 1, 3)); /* inner rows stay contiguous */
    check_transpose(dts[d], 4, DIMS(2, 5, 3, 16), DIMS(0, 2, 3, 1)); /* keys layout */
    check_transpose(dts[d], 3, DIMS(4, 1, 33), DIMS(2, 1, 0));       /* size-1 axis */
    check_transpose(dts[d], 5, DIMS(2, 3, 2, 3, 2), DIMS(4, 0, 3, 1, 2));
  }
}

/* Permutations that only move size-1 axes are a plain copy; ones that reorder longer axes among
 * size-1 axes are not. Both against the naive loop. */
Test(shape_kernels, transpose_moving_size1_axes) {
  static const mx_dtype dts[] = {MX_INT8, MX_FLOAT32, MX_FLOAT64};
  for (size_t d = 0; d < 3; d++) {
    check_transpose(dts[d], 4, DIMS(1, 1, 4, 16), DIMS(0, 2, 1, 3)); /* decode-step heads */
    check_transpose(dts[d], 4, DIMS(1, 4, 1, 16), DIMS(0, 2, 1, 3)); /* and back */
    check_transpose(dts[d], 3, DIMS(5, 1, 7), DIMS(1, 0, 2));
    check_transpose(dts[d], 3, DIMS(1, 1, 1), DIMS(2, 0, 1));
    check_transpose(dts[d], 4, DIMS(1, 3, 1, 5), DIMS(2, 3, 0, 1)); /* reorders 3 and 5: not a copy */
    check_transpose(dts[d], 4, DIMS(3, 1, 1, 5), DIMS(3, 1, 2, 0)); /* reorders 3 and 5: not a copy */
  }
  /* Zero-size: nothing written. */
  float in[1] = {1}, out[1] = {42};
  mx_transpose_params p = {.perm = {1, 0, 2}, .n_perm = 3, .has_perm = 1};
  mx_kernel_call *c = kc_new(1, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 3, DIMS(1, 0, 3), in);
  kc_set(c, 1, MX_FLOAT32, 3, DIMS(0, 1, 3), out);
  cr_assert_eq(kc_run("Transpose", c), MX_OK);
  cr_assert_eq(out[0], 42);
  free(c);
}

Test(shape_kernels, transpose_default_reverses_and_handles_edges) {
  float in[6] = {1, 2, 3, 4, 5, 6}, out[7] = {0};
  mx_transpose_params p = {0};
  mx_kernel_call *c = kc_new(1, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 2, DIMS(2, 3), in);
  kc_set(c, 1, MX_FLOAT32, 2, DIMS(3, 2), out);
  cr_assert_eq(kc_run("Transpose", c), MX_OK);
  expect_f32_same(out, (float[]){1, 4, 2, 5, 3, 6}, 6);
  /* zero-size: nothing written */
  out[0] = 42;
  kc_set(c, 0, MX_FLOAT32, 2, DIMS(0, 3), in);
  kc_set(c, 1, MX_FLOAT32, 2, DIMS(3, 0), out);
  cr_assert_eq(kc_run("Transpose", c), MX_OK);
  cr_assert_eq(out[0], 42);
  /* rank 0 */
  kc_set(c, 0, MX_FLOAT32, 0, NULL, in);
  kc_set(c, 1, MX_FLOAT32, 0, NULL, out);
  cr_assert_eq(kc_run("Transpose", c), MX_OK);
  cr_assert_eq(out[0], 1);
  free(c);
}

/* --- Concat, Split ---------------------------------------------------------------------------- */

Test(shape_kernels, concat_on_inner_and_negative_axes) {
  float a[2] = {1, 2}, b[4] = {3, 4, 5, 6}, out[6];
  mx_concat_params p = {.axis = -1};
  mx_kernel_call *c = kc_new(3, 1, &p);
  kc_set(c, 0, MX_FLOAT32, 2, DIMS(2, 1), a);
  kc_set(c, 1, MX_FLOAT32, 2, DIMS(2, 0), NULL); /* an empty input contributes nothing */
  kc_set(c, 2, MX_FLOAT32, 2, DIMS(2, 2), b);
  kc_set(c, 3, MX_FLOAT32, 2, DIMS(2, 3), out);
  cr_assert_eq(kc_run("Concat", c), MX_OK);
  expect_f32_same(out, (float[]){1, 3, 4, 2, 5, 6}, 6);
  p.axis = 0;
  cr_assert_eq(kc_run("Concat", c), MX_ERR_KERNEL, "axis 0 does not match these shapes");
  free(c);
}

Test(shape_kernels, concat_int64_shape_pieces) {
  int64_t a[1] = {7}, b[2] = {4, 16}, out[3];
  mx_concat_params p = {.axis = 0};
  mx_kernel_call *c = kc_new(2, 1, &p);
  kc_set(c, 0, MX_INT64, 1, DIMS(1), a);
  kc_set(c, 1, MX_INT64, 1, DIMS(2), b);
  kc_set(c, 2, MX_INT64, 1, DIMS(3), out);
  cr_assert_eq(kc_run("Concat", c), MX_OK);
  expect_i64(out, DIMS(7, 4, 16), 3);
  free(c);
}

Test(shape_kernels, split_takes_sizes_from_outputs) {
  int32_t in[6] = {1, 2, 3, 4, 5, 6}, o1[4], o2[2];
  mx_split_params p = {.axis = 1};
  mx_kernel_call *c = kc_new(1, 2, &p);
  kc_set(c, 0, MX_INT32, 2, DIMS(2, 3), in);
  kc_set(c, 1, MX_INT32, 2, DIMS(2, 2), o1);
  kc_set(c, 2, MX_INT32, 2, DIMS(2, 1), o2);
  cr_assert_eq(kc_run("Split", c), MX_OK);
  int32_t w1[] = {1, 2, 4, 5}, w2[] = {3, 6};
  cr_assert_eq(memcmp(o1, w1, sizeof w1), 0);
  cr_assert_eq(memcmp(o2, w2, sizeof w2), 0);
  kc_set(c, 2, MX_INT32, 2, DIMS(2, 2), o2);
  cr_assert_eq(kc_run("Split", c), MX_ERR_KERNEL);
  free(c);
}

/* --- Expand, Tile ----------------------------------------------------------------------------- */

Test(shape_kernels, expand_broadcasts_rows_columns_and_scalars) {
  float in[3] = {1, 2, 3}, out[24];
  mx_kernel_call *c = kc_new(2, 1, NULL);
  kc_set(c, 0, MX_FLOAT32, 2, DIMS(3, 1), in);
  kc_set(c, 1, MX_INT64, 1, DIMS(3), NULL);
  kc_set(c, 2, MX_FLOAT32, 3, DIMS(2, 3, 4), out);
  cr_assert_eq(kc_run("Expand", c), MX_OK);
  for (int b = 0; b < 2; b++)
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 4; j++) cr_assert_eq(out[(b * 3 + i) * 4 + j], in[i]);
  kc_set(c, 0, MX_FLOAT32, 1, DIMS(3), in);
  kc_set(c, 2, MX_FLOAT32, 2, DIMS(2, 3), out);
  cr_assert_eq(kc_run("Expand", c), MX_OK);
  expect_f32_same(out, (float[]){1, 2, 3, 1, 2, 3}, 6);
  kc_set(c, 0, MX_FLOAT32, 0, NULL, in);
  kc_set(c, 2, MX_FLOAT32, 2, DIMS(2, 2), out);
  cr_assert_eq(kc_run("Expand", c), MX_OK);
  expect_f32_same(out, (float[]){1, 1, 1, 1}, 4);
  kc_set(c, 0, MX_FLOAT32, 1, DIMS(3), in);
  kc_set(c, 2, MX_FLOAT32, 1, DIMS(4), out);
  cr_assert_eq(kc_run("Expand", c), MX_ERR_KERNEL);
  free(c);
}

Test(shape_kernels, tile_repeats_on_every_axis) {
  uint8_t in[4] = {1, 2, 3, 4}, out[24];
  mx_kernel_call *c = kc_new(2, 1, NULL);
  kc_set(c, 0, MX_UINT8, 2, DIMS(2, 2), in);
  kc_set(c, 1, MX_INT64, 1, DIMS(2), NULL);
  kc_set(c, 2, MX_UINT8, 2, DIMS(4, 6), out);
  cr_assert_eq(kc_run("Tile", c), MX_OK);
  uint8_t want[24] = {1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4, 1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4};
  cr_assert_eq(memcmp(out, want, 24), 0);
  kc_set(c, 2, MX_UINT8, 2, DIMS(4, 5), out);
  cr_assert_eq(kc_run("Tile", c), MX_ERR_KERNEL);
  free(c);
}

/* --- Constant, ConstantOfShape, Range --------------------------------------------------------- */

Test(shape_kernels, constant_and_constant_of_shape) {
  mx_constant_params *cp = calloc(1, sizeof *cp);
  cp->dtype = MX_INT32;
  cp->rank = 1;
  cp->dims[0] = 3;
  int32_t vals[3] = {5, -6, 7}, out[4] = {0};
  memcpy(cp->data.bytes, vals, sizeof vals);
  cp->nbytes = sizeof vals;
  mx_kernel_call *c = kc_new(0, 1, cp);
  kc_set(c, 0, MX_INT32, 1, DIMS(3), out);
  cr_assert_eq(kc_run("Constant", c), MX_OK);
  cr_assert_eq(memcmp(out, vals, sizeof vals), 0);
  free(c);
  free(cp);

  mx_constant_of_shape_params p = {.dtype = MX_FLOAT16};
  uint16_t h = mx__f32_to_f16(0.1f), hout[6];
  memcpy(p.value.bytes, &h, 2);
  c = kc_new(1, 1, &p);
  kc_set(c, 0, MX_INT64, 1, DIMS(2), NULL);
  kc_set(c, 1, MX_FLOAT16, 2, DIMS(2, 3), hout);
  cr_assert_eq(kc_run("ConstantOfShape", c), MX_OK);
  for (int i = 0; i < 6; i++) cr_assert_eq(hout[i], h);
  kc_set(c, 1, MX_FLOAT16, 2, DIMS(0, 3), NULL);
  cr_assert_eq(kc_run("ConstantOfShape", c), MX_OK, "zero-size output");
  free(c);
}

Test(shape_kernels, range_float_and_integer) {
  float fs = 1, fl = 5, fd = 2, fo[2];
  mx_kernel_call *c = kc_new(3, 1, NULL);
  kc_set(c, 0, MX_FLOAT32, 0, NULL, &fs);
  kc_set(c, 1, MX_FLOAT32, 0, NULL, &fl);
  kc_set(c, 2, MX_FLOAT32, 0, NULL, &fd);
  kc_set(c, 3, MX_FLOAT32, 1, DIMS(2), fo);
  cr_assert_eq(kc_run("Range", c), MX_OK);
  expect_f32_same(fo, (float[]){1, 3}, 2);
  int32_t is = 10, il = 4, id = -3, io[2];
  kc_set(c, 0, MX_INT32, 0, NULL, &is);
  kc_set(c, 1, MX_INT32, 0, NULL, &il);
  kc_set(c, 2, MX_INT32, 0, NULL, &id);
  kc_set(c, 3, MX_INT32, 1, DIMS(2), io);
  cr_assert_eq(kc_run("Range", c), MX_OK);
  cr_assert(io[0] == 10 && io[1] == 7);
  int16_t ss = -2, sl = 2, sd = 1, so[4];
  kc_set(c, 0, MX_INT16, 0, NULL, &ss);
  kc_set(c, 1, MX_INT16, 0, NULL, &sl);
  kc_set(c, 2, MX_INT16, 0, NULL, &sd);
  kc_set(c, 3, MX_INT16, 1, DIMS(4), so);
  cr_assert_eq(kc_run("Range", c), MX_OK);
  cr_assert(so[0] == -2 && so[3] == 1);
  kc_set(c, 3, MX_INT32, 1, DIMS(4), io);
  cr_assert_eq(kc_run("Range", c), MX_ERR_KERNEL, "mixed dtypes");
  free(c);
}
