/* ImageDecoder's TIFF path through libtiff: the first directory only, read from memory through
 * client procedures, decoded by TIFFReadRGBAImageOriented (which handles every photometric
 * interpretation, compression and bit depth libtiff knows) into a 4-byte-per-pixel raster in
 * the caller's scratch, then packed down to RGB. libtiff's messages go to a handler that keeps
 * quiet: errors come back as return values. */
#include <stdio.h> /* SEEK_SET */
#include <string.h>
#include <tiffio.h>

#include "graph/ops/image_codec_impl.h"

typedef struct tiff_mem {
  const uint8_t *data;
  size_t len, pos;
} tiff_mem;

static tmsize_t tiff_read(thandle_t h, void *buf, tmsize_t n) {
  tiff_mem *m = (tiff_mem *)h;
  if (n < 0) return -1;
  size_t left = m->len - m->pos, take = (size_t)n < left ? (size_t)n : left;
  memcpy(buf, m->data + m->pos, take);
  m->pos += take;
  return (tmsize_t)take;
}

static tmsize_t tiff_write(thandle_t h, void *buf, tmsize_t n) {
  (void)h;
  (void)buf;
  (void)n;
  return -1; /* read only */
}

static toff_t tiff_seek(thandle_t h, toff_t off, int whence) {
  tiff_mem *m = (tiff_mem *)h;
  if (whence == SEEK_SET) {
    if (off > m->len) return (toff_t)-1;
    m->pos = (size_t)off;
    return m->pos;
  }
  /* Relative seeks carry a signed offset in the unsigned toff_t. */
  int64_t base = (int64_t)(whence == SEEK_CUR ? m->pos : m->len), delta = (int64_t)off;
  if (delta < -base || delta > (int64_t)m->len - base) return (toff_t)-1;
  m->pos = (size_t)(base + delta);
  return m->pos;
}

static int tiff_close(thandle_t h) {
  (void)h;
  return 0;
}

static toff_t tiff_size(thandle_t h) { return ((tiff_mem *)h)->len; }

static int tiff_map(thandle_t h, void **base, toff_t *size) {
  (void)h;
  (void)base;
  (void)size;
  return 0; /* no mapping: libtiff reads through tiff_read */
}

static void tiff_unmap(thandle_t h, void *base, toff_t size) {
  (void)h;
  (void)base;
  (void)size;
}

static int tiff_quiet(TIFF *tif, void *user, const char *module, const char *fmt, va_list ap) {
  (void)tif;
  (void)user;
  (void)module;
  (void)fmt;
  (void)ap;
  return 1; /* handled: libtiff prints nothing */
}

static TIFF *tiff_open(tiff_mem *m) {
  TIFFOpenOptions *opts = TIFFOpenOptionsAlloc();
  if (!opts) return NULL;
  TIFFOpenOptionsSetErrorHandlerExtR(opts, tiff_quiet, NULL);
  TIFFOpenOptionsSetWarningHandlerExtR(opts, tiff_quiet, NULL);
  /* A corrupt header must not make libtiff reserve more than an accepted image could need. */
  TIFFOpenOptionsSetMaxSingleMemAlloc(opts, (tmsize_t)(MX_IMAGE_MAX_PIXELS * 4));
  TIFF *tif = TIFFClientOpenExt("ImageDecoder input", "rm", (thandle_t)m, tiff_read, tiff_write, tiff_seek,
                                tiff_close, tiff_size, tiff_map, tiff_unmap, opts);
  TIFFOpenOptionsFree(opts);
  return tif;
}

static const char *tiff_size_of(TIFF *tif, mx_image_info *info) {
  uint32_t w = 0, h = 0;
  if (!TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &w) || !TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &h))
    return "TIFF: the first directory has no image size";
  info->width = w;
  info->height = h;
  return NULL;
}

const char *mx__tiff_probe(const uint8_t *data, size_t len, mx_image_info *info) {
  tiff_mem m = {data, len, 0};
  TIFF *tif = tiff_open(&m);
  if (!tif) return "TIFF: corrupt or truncated header";
  const char *why = tiff_size_of(tif, info);
  TIFFClose(tif);
  return why;
}

const char *mx__tiff_decode(const uint8_t *data, size_t len, const mx_image_info *info, uint8_t *rgb,
                            uint8_t *scratch) {
  tiff_mem m = {data, len, 0};
  TIFF *tif = tiff_open(&m);
  if (!tif) return "TIFF: corrupt or truncated header";
  mx_image_info got;
  const char *why = tiff_size_of(tif, &got);
  if (!why && (got.height != info->height || got.width != info->width))
    why = "TIFF: the image size differs from the header read before";
  uint32_t *raster = (uint32_t *)(void *)scratch;
  if (!why && !TIFFReadRGBAImageOriented(tif, (uint32_t)info->width, (uint32_t)info->height, raster,
                                         ORIENTATION_TOPLEFT, 1))
    why = "TIFF: corrupt or truncated data (libtiff refused it)";
  TIFFClose(tif);
  if (why) return why;
  /* Pack ABGR words into RGB bytes, front to back: pixel i's 3 bytes never reach past the
   * start of pixel i's word, so rgb may be the scratch itself. */
  const size_t pixels = (size_t)info->height * (size_t)info->width;
  for (size_t i = 0; i < pixels; i++) {
    uint32_t px = raster[i];
    rgb[i * 3] = (uint8_t)TIFFGetR(px);
    rgb[i * 3 + 1] = (uint8_t)TIFFGetG(px);
    rgb[i * 3 + 2] = (uint8_t)TIFFGetB(px);
  }
  return NULL;
}
