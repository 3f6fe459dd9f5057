/* Sliding-window geometry of the convolution and pooling kernels: the node's attributes and
 * concrete sizes normalized to three spatial dims, with the padding auto_pad asks for. */
#include <string.h>

#include "kernels/conv_impl.h"

static void win_init(const mx_conv_params *p, int32_t spatial, const int64_t *img, const int64_t *grid,
                     const int64_t *k, mx_kwin *w) {
  memset(w, 0, sizeof *w);
  w->spatial = spatial;
  int32_t lead = 3 - spatial;
  for (int32_t i = 0; i < 3; i++) {
    w->img[i] = w->grid[i] = w->k[i] = w->s[i] = w->d[i] = 1;
    if (i < lead) continue;
    int32_t j = i - lead;
    w->img[i] = img[j];
    w->grid[i] = grid[j];
    w->k[i] = k[j];
    w->s[i] = p->n_strides ? p->strides[j] : 1;
    w->d[i] = p->n_dilations ? p->dilations[j] : 1;
    w->pb[i] = p->n_pads ? p->pads[j] : 0;
    w->pe[i] = p->n_pads ? p->pads[p->n_pads / 2 + j] : 0;
  }
  w->img_size = w->img[0] * w->img[1] * w->img[2];
  w->grid_size = w->grid[0] * w->grid[1] * w->grid[2];
  w->k_size = w->k[0] * w->k[1] * w->k[2];
}

static int64_t floor_half(int64_t v) { return v >= 0 ? v / 2 : -((-v + 1) / 2); }

bool mx__kwin_forward(const mx_conv_params *p, int32_t spatial, const int64_t *img, const int64_t *grid,
                      const int64_t *k, mx_kwin *w) {
  if (spatial < 1 || spatial > 3) return false;
  win_init(p, spatial, img, grid, k, w);
  if (p->auto_pad == MX_AUTO_PAD_NOTSET) return true;
  for (int32_t i = 3 - spatial; i < 3; i++) {
    int64_t total = 0;
    if (p->auto_pad != MX_AUTO_PAD_VALID) {
      total = (w->grid[i] - 1) * w->s[i] + (w->k[i] - 1) * w->d[i] + 1 - w->img[i];
      if (total < 0) total = 0;
    }
    w->pb[i] = p->auto_pad == MX_AUTO_PAD_SAME_LOWER ? total - total / 2 : total / 2;
    w->pe[i] = total - w->pb[i];
  }
  return true;
}

bool mx__kwin_transpose(const mx_conv_params *p, int32_t spatial, const int64_t *img, const int64_t *grid,
                        const int64_t *k, mx_kwin *w) {
  if (spatial < 1 || spatial > 3) return false;
  win_init(p, spatial, img, grid, k, w);
  bool same = p->auto_pad == MX_AUTO_PAD_SAME_UPPER || p->auto_pad == MX_AUTO_PAD_SAME_LOWER;
  if (p->n_pads || !same) return true; /* explicit pads, or none: output_shape only sizes the output */
  for (int32_t i = 3 - spatial; i < 3; i++) {
    int32_t j = i - (3 - spatial);
    int64_t opad = p->n_output_padding ? p->output_padding[j] : 0;
    int64_t total = w->s[i] * (w->grid[i] - 1) + opad + (w->k[i] - 1) * w->d[i] + 1 - w->img[i];
    int64_t half = floor_half(total);
    w->pb[i] = p->auto_pad == MX_AUTO_PAD_SAME_UPPER ? half : total - half;
    w->pe[i] = total - w->pb[i];
  }
  return true;
}
