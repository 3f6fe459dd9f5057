/* ImageDecoder's PNG path through libpng: every colour type and depth becomes 8-bit RGB the
 * way PIL reads it (16-bit samples keep their high byte, palettes and gray expand, alpha is
 * dropped), read row by row straight into the output; interlaced images take one sweep over
 * the rows per pass, libpng merging each pass into the rows already there.
 *
 * libpng reports errors by longjmp to the setjmp in run_guarded; what the error path needs
 * lives in the png_job struct, so nothing is clobbered by the jump. Input comes from memory
 * through a read callback that fails cleanly at the end of the data. */
#include <png.h>
#include <string.h>

#include "graph/ops/image_codec_impl.h"

typedef struct png_job {
  png_structp png;
  png_infop info;
  const char *why; /* set by the error hook */
  const uint8_t *data;
  size_t len, pos;
  const mx_image_info *want; /* decode only */
  uint8_t *rgb;              /* decode only; NULL: read the header only */
  mx_image_info *probe_out;  /* probe only */
} png_job;

static void png_read_mem(png_structp png, png_bytep out, size_t n) {
  png_job *job = png_get_io_ptr(png);
  if (n > job->len - job->pos) {
    job->why = "PNG: truncated data";
    png_longjmp(png, 1);
  }
  memcpy(out, job->data + job->pos, n);
  job->pos += n;
}

static void png_on_error(png_structp png, png_const_charp msg) {
  (void)msg;
  png_job *job = png_get_error_ptr(png);
  if (!job->why) job->why = "PNG: corrupt data (libpng refused it)";
  png_longjmp(png, 1);
}

static void png_on_warning(png_structp png, png_const_charp msg) {
  (void)png;
  (void)msg;
}

static const char *png_body(png_job *job) {
  png_structp png = job->png;
  png_infop info = job->info;
  png_set_read_fn(png, job, png_read_mem);
  png_read_info(png, info);
  png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
  if (!job->rgb) {
    job->probe_out->width = w;
    job->probe_out->height = h;
    return NULL;
  }
  if ((int64_t)h != job->want->height || (int64_t)w != job->want->width)
    return "PNG: the image size differs from the header read before";
  int color = png_get_color_type(png, info);
  int depth = png_get_bit_depth(png, info);
  if (depth == 16) png_set_strip_16(png);
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png);
  /* Palette expansion also turns a tRNS chunk into alpha: strip that too. */
  if ((color & PNG_COLOR_MASK_ALPHA) || png_get_valid(png, info, PNG_INFO_tRNS)) png_set_strip_alpha(png);
  int passes = png_set_interlace_handling(png);
  png_read_update_info(png, info);
  if (png_get_rowbytes(png, info) != (size_t)w * 3) return "PNG: libpng gave an unexpected row layout";
  for (int p = 0; p < passes; p++)
    for (png_uint_32 y = 0; y < h; y++) png_read_row(png, job->rgb + (size_t)y * w * 3, NULL);
  png_read_end(png, NULL);
  return NULL;
}

static const char *run_guarded(png_job *job) {
  job->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, job, png_on_error, png_on_warning);
  if (!job->png) return "PNG: libpng could not start (out of memory)";
  job->info = png_create_info_struct(job->png);
  if (!job->info) {
    png_destroy_read_struct(&job->png, NULL, NULL);
    return "PNG: libpng could not start (out of memory)";
  }
  if (setjmp(png_jmpbuf(job->png))) {
    png_destroy_read_struct(&job->png, &job->info, NULL);
    return job->why ? job->why : "PNG: corrupt data (libpng refused it)";
  }
  const char *why = png_body(job);
  png_destroy_read_struct(&job->png, &job->info, NULL);
  return why;
}

const char *mx__png_probe(const uint8_t *data, size_t len, mx_image_info *info) {
  png_job job;
  memset(&job, 0, sizeof job);
  job.data = data;
  job.len = len;
  job.probe_out = info;
  return run_guarded(&job);
}

const char *mx__png_decode(const uint8_t *data, size_t len, const mx_image_info *info, uint8_t *rgb) {
  png_job job;
  memset(&job, 0, sizeof job);
  job.data = data;
  job.len = len;
  job.want = info;
  job.rgb = rgb;
  return run_guarded(&job);
}
