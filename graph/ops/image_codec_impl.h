/* Internal interface between the ImageDecoder codec dispatcher (image_codec.c) and the files
 * that wrap one codec library each: image_codec_jpeg.c (libjpeg), image_codec_png.c (libpng),
 * image_codec_tiff.c (libtiff) and image_codec_jp2.c (openjpeg). Each probe fills height and
 * width; each decode writes height * width * 3 RGB bytes and checks that the size it decodes is
 * the size the probe gave. All return NULL on success, else static text naming the cause. */
#ifndef MIXRT_GRAPH_OPS_IMAGE_CODEC_IMPL_H
#define MIXRT_GRAPH_OPS_IMAGE_CODEC_IMPL_H

#include <stdbool.h>

#include "graph/ops/image_codec.h"

const char *mx__jpeg_probe(const uint8_t *data, size_t len, mx_image_info *info);
const char *mx__jpeg_decode(const uint8_t *data, size_t len, const mx_image_info *info, uint8_t *rgb);
const char *mx__png_probe(const uint8_t *data, size_t len, mx_image_info *info);
const char *mx__png_decode(const uint8_t *data, size_t len, const mx_image_info *info, uint8_t *rgb);
const char *mx__tiff_probe(const uint8_t *data, size_t len, mx_image_info *info);
/* scratch: 4 bytes per pixel (libtiff's RGBA raster); may be the same memory as rgb. */
const char *mx__tiff_decode(const uint8_t *data, size_t len, const mx_image_info *info, uint8_t *rgb,
                            uint8_t *scratch);
/* info->format tells JP2 from a bare codestream. */
const char *mx__jp2_probe(const uint8_t *data, size_t len, mx_image_info *info);
const char *mx__jp2_decode(const uint8_t *data, size_t len, const mx_image_info *info, uint8_t *rgb);

/* NULL when a height x width image is within MX_IMAGE_MAX_SIDE / MX_IMAGE_MAX_PIXELS. */
const char *mx__image_check_size(int64_t height, int64_t width);

#endif /* MIXRT_GRAPH_OPS_IMAGE_CODEC_IMPL_H */
