/* Strided element copy (the core of Slice, Expand and similar layout kernels) and Transpose.
 *
 * Both first simplify the view: size-1 axes are dropped and neighbouring axes that are
 * contiguous in the input are merged, so most copies become a few long rows. Rows with input
 * stride 1 are copied with memcpy, stride 0 rows are fills, other strides use a typed loop per
 * element size. Transpose whose innermost output axis is not innermost in the input swaps the
 * two innermost axes through small tiles, so both reads and writes stay within cache lines;
 * one that only moves size-1 axes is a single memcpy. */
#include <string.h>

#include "graph/ops/shape_params.h"
#include "kernels/shape_impl.h"

/* Drops size-1 axes and merges axes contiguous in the input. Returns the new rank; dims and
 * strides are rewritten in place. Returns -1 when some dim is 0 (nothing to copy). */
static int32_t simplify(int32_t rank, int64_t *dims, int64_t *strides) {
  int32_t r = 0;
  for (int32_t k = 0; k < rank; k++) {
    if (dims[k] == 0) return -1;
    if (dims[k] == 1) continue;
    if (r > 0 && strides[r - 1] == strides[k] * dims[k]) {
      dims[r - 1] *= dims[k];
      strides[r - 1] = strides[k];
      continue;
    }
    dims[r] = dims[k];
    strides[r] = strides[k];
    r++;
  }
  return r;
}

/* One row of n elements with input stride s (elements). */
static void copy_row(unsigned char *restrict out, const unsigned char *restrict in, size_t es, int64_t n,
                     int64_t s) {
  if (s == 1) {
    memcpy(out, in, (size_t)n * es);
    return;
  }
  switch (es) {
#define ROW_CASE(size, T)                              \
  case size: {                                         \
    T *restrict o = (T *)(void *)out;                  \
    const T *restrict i = (const T *)(const void *)in; \
    if (s == 0) {                                      \
      T v = i[0];                                      \
      for (int64_t k = 0; k < n; k++) o[k] = v;        \
    } else {                                           \
      for (int64_t k = 0; k < n; k++) o[k] = i[k * s]; \
    }                                                  \
    return;                                            \
  }
    ROW_CASE(1, uint8_t)
    ROW_CASE(2, uint16_t)
    ROW_CASE(4, uint32_t)
    ROW_CASE(8, uint64_t)
#undef ROW_CASE
    default:
      for (int64_t k = 0; k < n; k++)
        memcpy(out + (size_t)k * es, in + (ptrdiff_t)(k * s) * (ptrdiff_t)es, es);
  }
}

void mx__kcopy_strided(void *out, const void *in, size_t es, int32_t rank, const int64_t *dims,
                       const int64_t *in_strides) {
  int64_t d[MX_MAX_RANK], s[MX_MAX_RANK];
  memcpy(d, dims, (size_t)rank * sizeof *d);
  memcpy(s, in_strides, (size_t)rank * sizeof *s);
  int32_t r = simplify(rank, d, s);
  if (r < 0) return;
  unsigned char *o = out;
  const unsigned char *i = in;
  if (r == 0) {
    memcpy(o, i, es);
    return;
  }
  int64_t n = d[r - 1], step = s[r - 1];
  int64_t coord[MX_MAX_RANK] = {0};
  ptrdiff_t off = 0; /* input offset of the current row, in elements */
  for (;;) {
    copy_row(o, i + off * (ptrdiff_t)es, es, n, step);
    o += (size_t)n * es;
    int32_t k = r - 2;
    for (; k >= 0; k--) {
      off += s[k];
      if (++coord[k] < d[k]) break;
      off -= s[k] * d[k];
      coord[k] = 0;
    }
    if (k < 0) return;
  }
}

/* --- Transpose -------------------------------------------------------------------------------- */

/* Tile of the 2-D transpose: TILE_J elements along the input's contiguous axis by TILE_L input
 * rows. Few rows per tile keep power-of-two row strides from evicting each other in L1. */
#define TILE_J 64
#define TILE_L 8

/* Transposes a [nj, nl] block: out[j*out_sj + l] = in[j + l*in_sl]. */
#define TILE_FN(T)                                                                                   \
  static void tile_##T(T *restrict out, const T *restrict in, int64_t nj, int64_t nl, int64_t in_sl, \
                       int64_t out_sj) {                                                             \
    for (int64_t j0 = 0; j0 < nj; j0 += TILE_J) {                                                    \
      int64_t je = j0 + TILE_J < nj ? j0 + TILE_J : nj;                                              \
      for (int64_t l0 = 0; l0 < nl; l0 += TILE_L) {                                                  \
        int64_t le = l0 + TILE_L < nl ? l0 + TILE_L : nl;                                            \
        for (int64_t j = j0; j < je; j++)                                                            \
          for (int64_t l = l0; l < le; l++) out[j * out_sj + l] = in[j + l * in_sl];                 \
      }                                                                                              \
    }                                                                                                \
  }
TILE_FN(uint8_t)
TILE_FN(uint16_t)
TILE_FN(uint32_t)
TILE_FN(uint64_t)
#undef TILE_FN

static void tile_bytes(unsigned char *out, const unsigned char *in, size_t es, int64_t nj, int64_t nl,
                       int64_t in_sl, int64_t out_sj) {
  switch (es) {
    case 1: tile_uint8_t(out, in, nj, nl, in_sl, out_sj); return;
    case 2: tile_uint16_t((void *)out, (const void *)in, nj, nl, in_sl, out_sj); return;
    case 4: tile_uint32_t((void *)out, (const void *)in, nj, nl, in_sl, out_sj); return;
    case 8: tile_uint64_t((void *)out, (const void *)in, nj, nl, in_sl, out_sj); return;
    default:
      for (int64_t j = 0; j < nj; j++)
        for (int64_t l = 0; l < nl; l++)
          memcpy(out + (size_t)(j * out_sj + l) * es, in + (size_t)(j + l * in_sl) * es, es);
  }
}

static mx_status transpose_run(mx_kernel_call *call) {
  const mx_transpose_params *p = call->params;
  const mx_ktensor *in = mx__kin(call, 0);
  mx_ktensor *out = mx__kout(call, 0);
  int32_t rank = in->rank;
  size_t es = mx_dtype_size(in->dtype);
  if (p && p->has_perm && p->n_perm != rank) {
    call->why = "Transpose: perm length differs from the input rank";
    return MX_ERR_KERNEL;
  }
  /* A permutation that keeps the axes longer than 1 in their order (it only moves size-1 axes,
   * like [1,1,H,D] -> [1,H,1,D] in a decode step) leaves the bytes where they are: one copy. */
  if (p && p->has_perm) {
    int32_t last = -1;
    bool ordered = true;
    for (int32_t k = 0; k < rank && ordered; k++) {
      int64_t a = p->perm[k];
      if (a < 0 || a >= rank)
        ordered = false; /* let the general path deal with it */
      else if (in->dims[a] != 1)
        ordered = a > last, last = (int32_t)a;
    }
    if (ordered) {
      size_t bytes = (size_t)mx__ktensor_numel(in) * es;
      if (bytes && out->data != in->data) memcpy(out->data, in->data, bytes);
      return MX_OK;
    }
  }
  /* Output axis k reads input axis perm[k]. */
  int64_t d[MX_MAX_RANK], s[MX_MAX_RANK], in_strides[MX_MAX_RANK];
  int64_t stride = 1;
  for (int32_t k = rank - 1; k >= 0; k--) {
    in_strides[k] = stride;
    stride *= in->dims[k];
  }
  for (int32_t k = 0; k < rank; k++) {
    int64_t a = p && p->has_perm ? p->perm[k] : rank - 1 - k;
    d[k] = in->dims[a];
    s[k] = in_strides[a];
  }
  int32_t r = simplify(rank, d, s);
  if (r < 0) return MX_OK;
  if (r <= 1 || s[r - 1] == 1) {
    mx__kcopy_strided(out->data, in->data, es, r, d, s);
    return MX_OK;
  }
  /* The input's contiguous axis is output axis j (some j < r - 1: its stride is 1). */
  int32_t j = 0;
  while (j < r && s[j] != 1) j++;
  if (j >= r) {
    /* No unit-stride axis after simplification cannot happen for a dense input. */
    mx__kcopy_strided(out->data, in->data, es, r, d, s);
    return MX_OK;
  }
  int64_t os[MX_MAX_RANK];
  stride = 1;
  for (int32_t k = r - 1; k >= 0; k--) {
    os[k] = stride;
    stride *= d[k];
  }
  /* Odometer over every output axis except j and the last. */
  int32_t outer[MX_MAX_RANK], n_outer = 0;
  for (int32_t k = 0; k < r - 1; k++)
    if (k != j) outer[n_outer++] = k;
  int64_t coord[MX_MAX_RANK] = {0};
  ptrdiff_t in_off = 0, out_off = 0;
  unsigned char *o = out->data;
  const unsigned char *i = in->data;
  for (;;) {
    tile_bytes(o + out_off * (ptrdiff_t)es, i + in_off * (ptrdiff_t)es, es, d[j], d[r - 1], s[r - 1], os[j]);
    int32_t q = n_outer - 1;
    for (; q >= 0; q--) {
      int32_t k = outer[q];
      in_off += s[k];
      out_off += os[k];
      if (++coord[q] < d[k]) break;
      in_off -= s[k] * d[k];
      out_off -= os[k] * d[k];
      coord[q] = 0;
    }
    if (q < 0) return MX_OK;
  }
}

const mx_kernel_def mx__kernel_transpose = {
    .op = "Transpose", .dtypes = MX_KDT_ALL | MX_KDT_NARROW, .key = 0, .run = transpose_run};
