/* Element-type template of the convolution cores, included by kernels/conv.c once per type
 * with CT (the element type: float or double), CT_FN(name) (the name with a type suffix) and
 * CT_GEMM (cblas_sgemm or cblas_dgemm) defined.
 *
 * im2col lays the image patches a group of channels needs out as a [channels*taps, positions]
 * matrix, so a convolution becomes one GEMM of the group's weights [out, channels*taps] by it;
 * col2im is the transpose (scatter-add of such a matrix into an image), which ConvTranspose and
 * Col2Im use. Rows run along the contiguous width: for stride 1 a row is one memcpy between
 * two zero-filled margins. */

/* Positions ow in [0, n) whose image column ow*s + off falls inside [0, width): [*lo, *hi). */
static inline void CT_FN(valid_range)(int64_t n, int64_t s, int64_t off, int64_t width, int64_t *lo, int64_t *hi) {
  int64_t a = off >= 0 ? 0 : (-off + s - 1) / s;
  int64_t b = width - off <= 0 ? 0 : (width - off + s - 1) / s;
  if (b > n) b = n;
  if (a > b) a = b;
  *lo = a;
  *hi = b;
}

static void CT_FN(im2col)(const CT *x, int64_t channels, const mx_kwin *w, CT *col) {
  const int64_t P = w->grid_size, rowlen = w->grid[2];
  for (int64_t c = 0; c < channels; c++) {
    const CT *xc = x + c * w->img_size;
    for (int64_t kd = 0; kd < w->k[0]; kd++)
      for (int64_t kh = 0; kh < w->k[1]; kh++)
        for (int64_t kw = 0; kw < w->k[2]; kw++) {
          CT *row = col + (((c * w->k[0] + kd) * w->k[1] + kh) * w->k[2] + kw) * P;
          int64_t off = kw * w->d[2] - w->pb[2], lo, hi;
          CT_FN(valid_range)(rowlen, w->s[2], off, w->img[2], &lo, &hi);
          for (int64_t od = 0; od < w->grid[0]; od++) {
            int64_t id = od * w->s[0] - w->pb[0] + kd * w->d[0];
            for (int64_t oh = 0; oh < w->grid[1]; oh++, row += rowlen) {
              int64_t ih = oh * w->s[1] - w->pb[1] + kh * w->d[1];
              if (id < 0 || id >= w->img[0] || ih < 0 || ih >= w->img[1] || lo >= hi) {
                memset(row, 0, (size_t)rowlen * sizeof(CT));
                continue;
              }
              const CT *xr = xc + (id * w->img[1] + ih) * w->img[2];
              for (int64_t ow = 0; ow < lo; ow++) row[ow] = 0;
              if (w->s[2] == 1) {
                memcpy(row + lo, xr + lo + off, (size_t)(hi - lo) * sizeof(CT));
              } else {
                const int64_t s = w->s[2];
                for (int64_t ow = lo; ow < hi; ow++) row[ow] = xr[ow * s + off];
              }
              for (int64_t ow = hi; ow < rowlen; ow++) row[ow] = 0;
            }
          }
        }
  }
}

/* img += the patches of col (same layout as im2col's output). */
static void CT_FN(col2im_add)(const CT *col, int64_t channels, const mx_kwin *w, CT *img) {
  const int64_t P = w->grid_size, rowlen = w->grid[2];
  for (int64_t c = 0; c < channels; c++) {
    CT *ic = img + c * w->img_size;
    for (int64_t kd = 0; kd < w->k[0]; kd++)
      for (int64_t kh = 0; kh < w->k[1]; kh++)
        for (int64_t kw = 0; kw < w->k[2]; kw++) {
          const CT *row = col + (((c * w->k[0] + kd) * w->k[1] + kh) * w->k[2] + kw) * P;
          int64_t off = kw * w->d[2] - w->pb[2], lo, hi;
          CT_FN(valid_range)(rowlen, w->s[2], off, w->img[2], &lo, &hi);
          for (int64_t od = 0; od < w->grid[0]; od++) {
            int64_t id = od * w->s[0] - w->pb[0] + kd * w->d[0];
            for (int64_t oh = 0; oh < w->grid[1]; oh++, row += rowlen) {
              int64_t ih = oh * w->s[1] - w->pb[1] + kh * w->d[1];
              if (id < 0 || id >= w->img[0] || ih < 0 || ih >= w->img[1]) continue;
              CT *ir = ic + (id * w->img[1] + ih) * w->img[2];
              const int64_t s = w->s[2];
              for (int64_t ow = lo; ow < hi; ow++) ir[ow * s + off] += row[ow];
            }
          }
        }
  }
}

/* yo[ow] += sum over the K width taps of wv[kw] * xr[ow*s + off[kw]] for ow in [lo, hi), where
 * every tap is inside the row. Called with constant K and s so that the taps unroll and the loop
 * over ow vectorizes; taps are added in order, as the tap-by-tap loop would. */
static inline void CT_FN(dw_interior)(CT *restrict yo, const CT *restrict xr, const CT *restrict wv,
                                      const int64_t *off, int64_t s, int64_t lo, int64_t hi, int K) {
  for (int64_t ow = lo; ow < hi; ow++) {
    CT a = yo[ow];
    for (int kw = 0; kw < K; kw++) a += wv[kw] * xr[ow * s + off[kw]];
    yo[ow] = a;
  }
}

/* yr[ow] += wv * xr[ow*s + off] for ow in [lo, hi). */
static inline void CT_FN(dw_tap)(CT *restrict yr, const CT *restrict xr, CT wv, int64_t off, int64_t s, int64_t lo,
                                 int64_t hi) {
  if (s == 1) {
    const CT *restrict xo = xr + lo + off;
    CT *restrict yo = yr + lo;
    for (int64_t i = 0; i < hi - lo; i++) yo[i] += wv * xo[i];
  } else {
    for (int64_t ow = lo; ow < hi; ow++) yr[ow] += wv * xr[ow * s + off];
  }
}

/* One output channel of a convolution whose group has a single input channel (depthwise):
 * y (grid_size) += the taps of wk over the image x. Output row by output row, so a row stays in
 * L1 while every tap row adds to it. For 3- and 5-wide kernels the columns where every tap is
 * inside the image take all taps in one pass; the edge columns, and other widths, go tap by
 * tap. Either way each output adds its taps in the same order. */
MX_KHOT static void CT_FN(conv_single_channel)(const CT *restrict x, const CT *restrict wk, const mx_kwin *w,
                                               CT *restrict y) {
  const int64_t rowlen = w->grid[2], s = w->s[2], kws = w->k[2];
  /* The valid output columns of each width tap do not depend on the row: worked out once. */
  enum { HOISTED = 32 };
  int64_t tap_lo[HOISTED], tap_hi[HOISTED], tap_off[HOISTED];
  int64_t in_lo = 0, in_hi = rowlen; /* columns where every tap is valid */
  for (int64_t kw = 0; kw < kws && kw < HOISTED; kw++) {
    tap_off[kw] = kw * w->d[2] - w->pb[2];
    CT_FN(valid_range)(rowlen, s, tap_off[kw], w->img[2], &tap_lo[kw], &tap_hi[kw]);
    in_lo = tap_lo[kw] > in_lo ? tap_lo[kw] : in_lo;
    in_hi = tap_hi[kw] < in_hi ? tap_hi[kw] : in_hi;
  }
  const bool fused = (kws == 3 || kws == 5) && (s == 1 || s == 2) && in_lo < in_hi;
  for (int64_t od = 0; od < w->grid[0]; od++)
    for (int64_t oh = 0; oh < w->grid[1]; oh++) {
      CT *restrict yr = y + (od * w->grid[1] + oh) * rowlen;
      for (int64_t kd = 0; kd < w->k[0]; kd++) {
        int64_t id = od * w->s[0] - w->pb[0] + kd * w->d[0];
        if (id < 0 || id >= w->img[0]) continue;
        for (int64_t kh = 0; kh < w->k[1]; kh++) {
          int64_t ih = oh * w->s[1] - w->pb[1] + kh * w->d[1];
          if (ih < 0 || ih >= w->img[1]) continue;
          const CT *restrict xr = x + (id * w->img[1] + ih) * w->img[2];
          const CT *restrict wr = wk + (kd * w->k[1] + kh) * w->k[2];
          if (fused) {
            for (int64_t kw = 0; kw < kws; kw++) {
              int64_t lo = tap_lo[kw], hi = tap_hi[kw];
              CT_FN(dw_tap)(yr, xr, wr[kw], tap_off[kw], s, lo, hi < in_lo ? hi : in_lo);
            }
            if (kws == 3 && s == 1) CT_FN(dw_interior)(yr, xr, wr, tap_off, 1, in_lo, in_hi, 3);
            if (kws == 3 && s == 2) CT_FN(dw_interior)(yr, xr, wr, tap_off, 2, in_lo, in_hi, 3);
            if (kws == 5 && s == 1) CT_FN(dw_interior)(yr, xr, wr, tap_off, 1, in_lo, in_hi, 5);
            if (kws == 5 && s == 2) CT_FN(dw_interior)(yr, xr, wr, tap_off, 2, in_lo, in_hi, 5);
            for (int64_t kw = 0; kw < kws; kw++) {
              int64_t lo = tap_lo[kw], hi = tap_hi[kw];
              CT_FN(dw_tap)(yr, xr, wr[kw], tap_off[kw], s, lo > in_hi ? lo : in_hi, hi);
            }
            continue;
          }
          for (int64_t kw = 0; kw < kws; kw++) {
            int64_t off = kw * w->d[2] - w->pb[2], lo, hi;
            if (kw < HOISTED)
              lo = tap_lo[kw], hi = tap_hi[kw];
            else
              CT_FN(valid_range)(rowlen, s, off, w->img[2], &lo, &hi);
            CT_FN(dw_tap)(yr, xr, wr[kw], off, s, lo, hi);
          }
        }
      }
    }
}

/* Whether the window reads the image unchanged (1x1 taps, stride 1, no padding): the image is
 * then its own im2col matrix. */
static bool CT_FN(is_pointwise)(const mx_kwin *w) {
  for (int i = 0; i < 3; i++)
    if (w->k[i] != 1 || w->s[i] != 1 || w->pb[i] != 0 || w->img[i] != w->grid[i]) return false;
  return true;
}

/* Fills each of the m channels of y (p elements each) with its bias, or zero. */
static void CT_FN(fill_bias)(CT *y, const CT *b, int64_t m, int64_t p) {
  for (int64_t j = 0; j < m; j++) {
    CT v = b ? b[j] : (CT)0;
    for (int64_t i = 0; i < p; i++) y[j * p + i] = v;
  }
}

/* Conv: x [n, c, img], wt [m, c/group, taps], b [m] or NULL, y [n, m, grid]; col holds
 * (c/group)*taps*grid elements (unused for pointwise and single-channel groups). */
static void CT_FN(conv_forward)(const mx_kwin *w, int64_t n, int64_t c, int64_t m, int64_t group, const CT *x,
                                const CT *wt, const CT *b, CT *y, CT *col) {
  const int64_t cg = c / group, mg = m / group, kdim = cg * w->k_size, P = w->grid_size;
  const bool pointwise = CT_FN(is_pointwise)(w);
  for (int64_t in = 0; in < n; in++) {
    CT *yn = y + in * m * P;
    CT_FN(fill_bias)(yn, b, m, P);
    for (int64_t g = 0; g < group; g++) {
      const CT *xg = x + (in * c + g * cg) * w->img_size;
      const CT *wg = wt + g * mg * kdim;
      CT *yg = yn + g * mg * P;
      if (cg == 1 && !pointwise) {
        for (int64_t j = 0; j < mg; j++) CT_FN(conv_single_channel)(xg, wg + j * kdim, w, yg + j * P);
        continue;
      }
      const CT *cols = xg;
      if (!pointwise) {
        CT_FN(im2col)(xg, cg, w, col);
        cols = col;
      }
      CT_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)mg, (blasint)P, (blasint)kdim, (CT)1, wg,
              (blasint)kdim, cols, (blasint)P, (CT)1, yg, (blasint)P);
    }
  }
}

/* ConvTranspose: x [n, c, grid], wt [c, m/group, taps], b [m] or NULL, y [n, m, img]; col holds
 * (m/group)*taps*grid elements. */
static void CT_FN(conv_transpose)(const mx_kwin *w, int64_t n, int64_t c, int64_t m, int64_t group, const CT *x,
                                  const CT *wt, const CT *b, CT *y, CT *col) {
  const int64_t cg = c / group, mg = m / group, kdim = mg * w->k_size, P = w->grid_size;
  for (int64_t in = 0; in < n; in++) {
    CT *yn = y + in * m * w->img_size;
    CT_FN(fill_bias)(yn, b, m, w->img_size);
    for (int64_t g = 0; g < group; g++) {
      const CT *xg = x + (in * c + g * cg) * P;
      const CT *wg = wt + g * cg * kdim;
      CT_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, (blasint)kdim, (blasint)P, (blasint)cg, (CT)1, wg,
              (blasint)kdim, xg, (blasint)P, (CT)0, col, (blasint)P);
      CT_FN(col2im_add)(col, mg, w, yn + g * mg * w->img_size);
    }
  }
}
