/* Encoded-image probing and decoding for ImageDecoder: the container format from the leading
 * bytes, the image size from the header, and the pixels as 8-bit RGB.
 *
 * JPEG, PNG, TIFF, WebP and JPEG 2000 go through the Debian codec libraries (libjpeg-turbo,
 * libpng, libtiff, libwebp, openjpeg), the same ones PIL wraps, so pixels match the ONNX
 * reference; binary PNM (P5/P6) is read by hand. Both inference (the output shape needs the
 * header) and the kernel (the pixels) use this file. Every failure is a static text naming
 * the cause; sizes are checked before anything is decoded, so a header claiming a huge image
 * is refused without touching memory. */
#ifndef MIXRT_GRAPH_OPS_IMAGE_CODEC_H
#define MIXRT_GRAPH_OPS_IMAGE_CODEC_H

#include <stddef.h>
#include <stdint.h>

/* Largest side and largest pixel count accepted (a 16384 x 16384 image is 768 MiB as RGB). */
#define MX_IMAGE_MAX_SIDE   65535
#define MX_IMAGE_MAX_PIXELS ((int64_t)1 << 28)

typedef enum mx_image_format {
  MX_IMAGE_UNKNOWN = 0,
  MX_IMAGE_JPEG,
  MX_IMAGE_PNG,
  MX_IMAGE_TIFF,
  MX_IMAGE_WEBP,
  MX_IMAGE_JP2, /* JPEG 2000 in its JP2 box container */
  MX_IMAGE_J2K, /* a bare JPEG 2000 codestream */
  MX_IMAGE_PNM, /* binary P5 (gray) or P6 (RGB) */
} mx_image_format;

typedef struct mx_image_info {
  mx_image_format format;
  int64_t height, width;
} mx_image_info;

/* The format of `len` encoded bytes (MX_IMAGE_UNKNOWN when no known signature matches). */
mx_image_format mx__image_sniff(const uint8_t *data, size_t len);

/* Reads the header: format and size. Returns NULL on success, else why it failed. */
const char *mx__image_probe(const uint8_t *data, size_t len, mx_image_info *info);

/* Bytes of scratch mx__image_decode needs for an image of that size (4 per pixel). */
size_t mx__image_scratch_size(int64_t height, int64_t width);

/* Decodes the image `info` describes (from mx__image_probe of the same bytes) into rgb:
 * height * width * 3 bytes, row-major, R G B. scratch holds mx__image_scratch_size bytes and
 * may be the same memory as rgb. Returns NULL on success, else why it failed. The codec
 * libraries keep their own decoder state on the heap while they run. */
const char *mx__image_decode(const uint8_t *data, size_t len, const mx_image_info *info, uint8_t *rgb,
                             uint8_t *scratch);

#endif /* MIXRT_GRAPH_OPS_IMAGE_CODEC_H */
