/* ImageDecoder's codec dispatcher: the format from the leading bytes, the size limits, and the
 * two formats that need no decoder state of their own: WebP (libwebp's one-call API) and binary
 * PNM (P5 gray / P6 RGB), read by hand. The other formats live in image_codec_<format>.c. */
#include <stdbool.h>
#include <string.h>
#include <webp/decode.h>

#include "graph/ops/image_codec.h"
#include "graph/ops/image_codec_impl.h"

mx_image_format mx__image_sniff(const uint8_t *d, size_t len) {
  static const uint8_t png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  static const uint8_t jp2_sig[12] = {0, 0, 0, 12, 'j', 'P', ' ', ' ', '\r', '\n', 0x87, '\n'};
  if (len >= 3 && d[0] == 0xff && d[1] == 0xd8 && d[2] == 0xff) return MX_IMAGE_JPEG;
  if (len >= 8 && memcmp(d, png_sig, 8) == 0) return MX_IMAGE_PNG;
  /* Classic TIFF (42) and BigTIFF (43), in either byte order. */
  if (len >= 4 && ((d[0] == 'I' && d[1] == 'I' && (d[2] == 42 || d[2] == 43) && d[3] == 0) ||
                   (d[0] == 'M' && d[1] == 'M' && d[2] == 0 && (d[3] == 42 || d[3] == 43))))
    return MX_IMAGE_TIFF;
  if (len >= 12 && memcmp(d, "RIFF", 4) == 0 && memcmp(d + 8, "WEBP", 4) == 0) return MX_IMAGE_WEBP;
  if (len >= 12 && memcmp(d, jp2_sig, 12) == 0) return MX_IMAGE_JP2;
  if (len >= 4 && d[0] == 0xff && d[1] == 0x4f && d[2] == 0xff && d[3] == 0x51) return MX_IMAGE_J2K;
  if (len >= 2 && d[0] == 'P' && (d[1] == '5' || d[1] == '6')) return MX_IMAGE_PNM;
  return MX_IMAGE_UNKNOWN;
}

const char *mx__image_check_size(int64_t height, int64_t width) {
  if (height <= 0 || width <= 0) return "the header gives an empty image size";
  if (height > MX_IMAGE_MAX_SIDE || width > MX_IMAGE_MAX_SIDE)
    return "the header gives an image side above 65535 pixels";
  if (height * width > MX_IMAGE_MAX_PIXELS) return "the header gives an image above 2^28 pixels";
  return NULL;
}

size_t mx__image_scratch_size(int64_t height, int64_t width) {
  if (mx__image_check_size(height, width)) return 0;
  return (size_t)height * (size_t)width * 4;
}

/* --- WebP --------------------------------------------------------------------------------------- */

static const char *webp_probe(const uint8_t *data, size_t len, mx_image_info *info) {
  int w = 0, h = 0;
  if (!WebPGetInfo(data, len, &w, &h)) return "WebP: corrupt or truncated header";
  info->width = w;
  info->height = h;
  return NULL;
}

static const char *webp_decode(const uint8_t *data, size_t len, const mx_image_info *info, uint8_t *rgb) {
  size_t row = (size_t)info->width * 3;
  if (!WebPDecodeRGBInto(data, len, rgb, row * (size_t)info->height, (int)row))
    return "WebP: corrupt or truncated data (libwebp refused it)";
  return NULL;
}

/* --- PNM (binary P5 / P6) -------------------------------------------------------------------------- */

typedef struct pnm_header {
  int channels;    /* 1 for P5, 3 for P6 */
  int64_t maxval;  /* 1 .. 65535; above 255 samples take two bytes, big-endian */
  size_t data_off; /* first sample byte */
} pnm_header;

/* Next decimal field after whitespace and '#' comments; false at the end or on a non-digit. */
static bool pnm_field(const uint8_t *d, size_t len, size_t *pos, int64_t *value) {
  size_t p = *pos;
  for (;;) {
    while (p < len &&
           (d[p] == ' ' || d[p] == '\t' || d[p] == '\n' || d[p] == '\r' || d[p] == '\v' || d[p] == '\f'))
      p++;
    if (p < len && d[p] == '#') {
      while (p < len && d[p] != '\n' && d[p] != '\r') p++;
      continue;
    }
    break;
  }
  if (p >= len || d[p] < '0' || d[p] > '9') return false;
  int64_t v = 0;
  while (p < len && d[p] >= '0' && d[p] <= '9') {
    v = v * 10 + (d[p] - '0');
    if (v > ((int64_t)1 << 40)) return false; /* far above any accepted size */
    p++;
  }
  *value = v;
  *pos = p;
  return true;
}

static const char *pnm_header_read(const uint8_t *d, size_t len, mx_image_info *info, pnm_header *h) {
  size_t pos = 2;
  int64_t w, hh, maxval;
  if (!pnm_field(d, len, &pos, &w) || !pnm_field(d, len, &pos, &hh) || !pnm_field(d, len, &pos, &maxval))
    return "PNM: corrupt or truncated header";
  /* Exactly one whitespace byte separates maxval from the samples. */
  if (pos >= len || !(d[pos] == ' ' || d[pos] == '\t' || d[pos] == '\n' || d[pos] == '\r'))
    return "PNM: corrupt or truncated header";
  if (maxval < 1 || maxval > 65535) return "PNM: maxval is outside 1..65535";
  info->width = w;
  info->height = hh;
  h->channels = d[1] == '5' ? 1 : 3;
  h->maxval = maxval;
  h->data_off = pos + 1;
  return NULL;
}

static const char *pnm_decode(const uint8_t *d, size_t len, const mx_image_info *info, uint8_t *rgb) {
  pnm_header h;
  mx_image_info again;
  const char *why = pnm_header_read(d, len, &again, &h);
  if (why) return why;
  const size_t pixels = (size_t)info->height * (size_t)info->width;
  const size_t bytes_per_sample = h.maxval > 255 ? 2 : 1;
  if ((len - h.data_off) / bytes_per_sample / (size_t)h.channels < pixels) return "PNM: truncated pixel data";
  const uint8_t *src = d + h.data_off;
  for (size_t i = 0; i < pixels; i++) {
    for (int c = 0; c < 3; c++) {
      size_t s = (i * (size_t)h.channels + (size_t)(h.channels == 3 ? c : 0)) * bytes_per_sample;
      int64_t v = bytes_per_sample == 2 ? ((int64_t)src[s] << 8 | src[s + 1]) : src[s];
      if (v > h.maxval) return "PNM: a sample exceeds maxval";
      /* Other depths scale to 0..255, rounding to nearest. */
      rgb[i * 3 + (size_t)c] = (uint8_t)(h.maxval == 255 ? v : (v * 255 + h.maxval / 2) / h.maxval);
    }
  }
  return NULL;
}

/* --- dispatch ----------------------------------------------------------------------------------- */

const char *mx__image_probe(const uint8_t *data, size_t len, mx_image_info *info) {
  memset(info, 0, sizeof *info);
  if (!data || len == 0) return "the encoded image is empty";
  info->format = mx__image_sniff(data, len);
  const char *why;
  pnm_header pnm;
  switch (info->format) {
    case MX_IMAGE_JPEG: why = mx__jpeg_probe(data, len, info); break;
    case MX_IMAGE_PNG: why = mx__png_probe(data, len, info); break;
    case MX_IMAGE_TIFF: why = mx__tiff_probe(data, len, info); break;
    case MX_IMAGE_WEBP: why = webp_probe(data, len, info); break;
    case MX_IMAGE_JP2:
    case MX_IMAGE_J2K: why = mx__jp2_probe(data, len, info); break;
    case MX_IMAGE_PNM: why = pnm_header_read(data, len, info, &pnm); break;
    default: return "the data is no known image format (JPEG, PNG, TIFF, WebP, JPEG 2000, binary PNM)";
  }
  if (why) return why;
  return mx__image_check_size(info->height, info->width);
}

const char *mx__image_decode(const uint8_t *data, size_t len, const mx_image_info *info, uint8_t *rgb,
                             uint8_t *scratch) {
  const char *why = mx__image_check_size(info->height, info->width);
  if (why) return why;
  if (!data || len == 0) return "the encoded image is empty";
  switch (info->format) {
    case MX_IMAGE_JPEG: return mx__jpeg_decode(data, len, info, rgb);
    case MX_IMAGE_PNG: return mx__png_decode(data, len, info, rgb);
    case MX_IMAGE_TIFF: return mx__tiff_decode(data, len, info, rgb, scratch);
    case MX_IMAGE_WEBP: return webp_decode(data, len, info, rgb);
    case MX_IMAGE_JP2:
    case MX_IMAGE_J2K: return mx__jp2_decode(data, len, info, rgb);
    case MX_IMAGE_PNM: return pnm_decode(data, len, info, rgb);
    default: return "the data is no known image format (JPEG, PNG, TIFF, WebP, JPEG 2000, binary PNM)";
  }
}
