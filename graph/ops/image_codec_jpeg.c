/* ImageDecoder's JPEG path through libjpeg-turbo: the header for the size, then the scanlines
 * straight into the RGB output with libjpeg's default (accurate integer) IDCT and fancy
 * upsampling, the settings PIL decodes with.
 *
 * libjpeg reports fatal errors through error_exit, which must not return: it longjmps back to
 * the setjmp in run_guarded. Everything the error path touches lives in the jpeg_job struct
 * (memory, not registers), so nothing is clobbered by the jump. A premature end of data is only
 * a warning to libjpeg (it pads with gray); it is an error here, as it is for PIL. */
#include <setjmp.h>
#include <stdbool.h>
#include <stdio.h> /* before jpeglib.h, which uses FILE */
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>

#include "graph/ops/image_codec_impl.h"

typedef struct jpeg_job {
  struct jpeg_decompress_struct cinfo;
  struct jpeg_error_mgr err;
  jmp_buf jump;
  const char *why; /* set by the error hooks */
  bool truncated;  /* libjpeg warned that the data ended early */
  const uint8_t *data;
  size_t len;
  const mx_image_info *info; /* decode only */
  uint8_t *rgb;              /* decode only; NULL: read the header only */
  mx_image_info *probe_out;  /* probe only */
} jpeg_job;

static void jpeg_error_exit(j_common_ptr cinfo) {
  jpeg_job *job = (jpeg_job *)cinfo->client_data;
  job->why = "JPEG: corrupt data (libjpeg refused it)";
  longjmp(job->jump, 1);
}

/* Warnings (level -1) are counted; the trace messages libjpeg prints by default are dropped. */
static void jpeg_emit_message(j_common_ptr cinfo, int level) {
  jpeg_job *job = (jpeg_job *)cinfo->client_data;
  if (level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF) job->truncated = true;
}

static void jpeg_output_message(j_common_ptr cinfo) { (void)cinfo; }

static const char *jpeg_body(jpeg_job *job) {
  struct jpeg_decompress_struct *ci = &job->cinfo;
  jpeg_mem_src(ci, job->data, (unsigned long)job->len);
  if (jpeg_read_header(ci, TRUE) != JPEG_HEADER_OK) return "JPEG: no image in the data";
  if (!job->rgb) {
    job->probe_out->height = ci->image_height;
    job->probe_out->width = ci->image_width;
    return NULL;
  }
  if ((int64_t)ci->image_height != job->info->height || (int64_t)ci->image_width != job->info->width)
    return "JPEG: the image size differs from the header read before";
  if (ci->jpeg_color_space == JCS_CMYK || ci->jpeg_color_space == JCS_YCCK)
    return "JPEG: CMYK images are not supported";
  ci->out_color_space = JCS_RGB;
  jpeg_start_decompress(ci);
  if (ci->output_components != 3 || (int64_t)ci->output_width != job->info->width ||
      (int64_t)ci->output_height != job->info->height)
    return "JPEG: libjpeg gave an unexpected output layout";
  const size_t row_bytes = (size_t)ci->output_width * 3;
  while (ci->output_scanline < ci->output_height) {
    JSAMPROW row = job->rgb + (size_t)ci->output_scanline * row_bytes;
    if (jpeg_read_scanlines(ci, &row, 1) != 1) return "JPEG: truncated data";
    if (job->truncated) return "JPEG: truncated data";
  }
  jpeg_finish_decompress(ci);
  return job->truncated ? "JPEG: truncated data" : NULL;
}

static const char *run_guarded(jpeg_job *job) {
  job->cinfo.err = jpeg_std_error(&job->err);
  job->err.error_exit = jpeg_error_exit;
  job->err.emit_message = jpeg_emit_message;
  job->err.output_message = jpeg_output_message;
  job->cinfo.client_data = job;
  if (setjmp(job->jump)) {
    jpeg_destroy_decompress(&job->cinfo);
    return job->why;
  }
  jpeg_create_decompress(&job->cinfo);
  const char *why = jpeg_body(job);
  jpeg_destroy_decompress(&job->cinfo);
  return why;
}

const char *mx__jpeg_probe(const uint8_t *data, size_t len, mx_image_info *info) {
  jpeg_job job;
  memset(&job, 0, sizeof job);
  job.data = data;
  job.len = len;
  job.probe_out = info;
  return run_guarded(&job);
}

const char *mx__jpeg_decode(const uint8_t *data, size_t len, const mx_image_info *info, uint8_t *rgb) {
  jpeg_job job;
  memset(&job, 0, sizeof job);
  job.data = data;
  job.len = len;
  job.info = info;
  job.rgb = rgb;
  return run_guarded(&job);
}
