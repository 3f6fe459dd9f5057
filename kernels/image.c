/* CPU kernel of the image group: ImageDecoder.
 *
 * The output was sized by inference from the encoded header (graph/ops/image.c); the kernel
 * reads the header again, checks that it still gives the output's size, and decodes through
 * graph/ops/image_codec.c. RGB decodes straight into the output; BGR swaps each pixel's ends
 * in place; Grayscale decodes RGB into the workspace and reduces it with PIL's "L" conversion,
 * ITU-R 601-2 luma in 16-bit fixed point with rounding: L = (19595 R + 38470 G + 7471 B +
 * 2^15) >> 16. The workspace (4 bytes per pixel) also holds libtiff's RGBA raster. */
#include <string.h>

#include "graph/ops/image_codec.h"
#include "graph/ops/image_params.h"
#include "kernels/groups.h"
#include "kernels/kutil.h"

static size_t image_decoder_workspace(const mx_kernel_call *call) {
  const mx_ktensor *y = &call->t[call->n_in];
  if (y->rank != 3) return 0;
  return mx__image_scratch_size(y->dims[0], y->dims[1]);
}

static mx_status image_decoder_run(mx_kernel_call *call) {
  const mx_image_decoder_params *p = call->params;
  const mx_ktensor *x = &call->t[0];
  mx_ktensor *y = &call->t[call->n_in];
  const int64_t channels = p->pixel_format == MX_PIXEL_GRAYSCALE ? 1 : 3;
  if (x->dtype != MX_UINT8 || x->rank != 1 || y->dtype != MX_UINT8 || y->rank != 3 ||
      y->dims[2] != channels) {
    call->why = "ImageDecoder: input must be 1-D uint8 and output [H, W, C] uint8";
    return MX_ERR_KERNEL;
  }
  mx_image_info info;
  const char *why = mx__image_probe(x->data, (size_t)x->dims[0], &info);
  if (!why && (info.height != y->dims[0] || info.width != y->dims[1]))
    why = "ImageDecoder: the output's size differs from the image size in the header";
  const size_t scratch = mx__image_scratch_size(info.height, info.width);
  if (!why && (!call->workspace || call->workspace_size < scratch)) why = "ImageDecoder: workspace too small";
  uint8_t *out = y->data, *ws = call->workspace;
  if (!why) why = mx__image_decode(x->data, (size_t)x->dims[0], &info, channels == 1 ? ws : out, ws);
  if (why) {
    call->why = why;
    return MX_ERR_KERNEL;
  }
  const size_t pixels = (size_t)info.height * (size_t)info.width;
  if (p->pixel_format == MX_PIXEL_BGR) {
    for (size_t i = 0; i < pixels; i++) {
      uint8_t r = out[i * 3];
      out[i * 3] = out[i * 3 + 2];
      out[i * 3 + 2] = r;
    }
  } else if (p->pixel_format == MX_PIXEL_GRAYSCALE) {
    for (size_t i = 0; i < pixels; i++) {
      const uint8_t *px = ws + i * 3;
      out[i] = (uint8_t)((19595u * px[0] + 38470u * px[1] + 7471u * px[2] + 0x8000u) >> 16);
    }
  }
  return MX_OK;
}

static const mx_kernel_def k_image_decoder = {.op = "ImageDecoder",
                                              .dtypes = MX_KDT(MX_UINT8),
                                              .key = 0,
                                              .run = image_decoder_run,
                                              .workspace = image_decoder_workspace};

const mx_kernel_def *const mx__kernels_image[] = {
    &k_image_decoder,
    NULL,
};
