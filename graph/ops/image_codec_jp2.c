/* ImageDecoder's JPEG 2000 path through openjpeg: JP2 files and bare codestreams, read from
 * memory through stream callbacks. openjpeg gives one int32 plane per component; they become
 * RGB bytes as PIL makes them: signed samples are offset to unsigned, precisions other than 8
 * are shifted to 8 bits, one (gray) or two (gray + alpha) components are replicated, a fourth
 * (alpha) is dropped. Subsampled components and YCC / CMYK colour spaces are refused. */
#include <openjpeg.h>
#include <string.h>

#include "graph/ops/image_codec_impl.h"

typedef struct jp2_mem {
  const uint8_t *data;
  size_t len, pos;
} jp2_mem;

static OPJ_SIZE_T jp2_read(void *buf, OPJ_SIZE_T n, void *user) {
  jp2_mem *m = user;
  size_t left = m->len - m->pos;
  if (left == 0) return (OPJ_SIZE_T)-1; /* end of stream */
  size_t take = n < left ? n : left;
  memcpy(buf, m->data + m->pos, take);
  m->pos += take;
  return take;
}

static OPJ_OFF_T jp2_skip(OPJ_OFF_T n, void *user) {
  jp2_mem *m = user;
  if (n < 0 || (uint64_t)n > m->len - m->pos) return -1;
  m->pos += (size_t)n;
  return n;
}

static OPJ_BOOL jp2_seek(OPJ_OFF_T n, void *user) {
  jp2_mem *m = user;
  if (n < 0 || (uint64_t)n > m->len) return OPJ_FALSE;
  m->pos = (size_t)n;
  return OPJ_TRUE;
}

static void jp2_quiet(const char *msg, void *user) {
  (void)msg;
  (void)user;
}

typedef struct jp2_job {
  jp2_mem mem;
  opj_stream_t *stream;
  opj_codec_t *codec;
  opj_image_t *image;
} jp2_job;

static void jp2_close(jp2_job *j) {
  if (j->image) opj_image_destroy(j->image);
  if (j->codec) opj_destroy_codec(j->codec);
  if (j->stream) opj_stream_destroy(j->stream);
}

/* Opens the stream and reads the main header; on success j->image holds the header's image. */
static const char *jp2_open(jp2_job *j, const uint8_t *data, size_t len, mx_image_format format) {
  memset(j, 0, sizeof *j);
  j->mem = (jp2_mem){data, len, 0};
  j->stream = opj_stream_create(OPJ_J2K_STREAM_CHUNK_SIZE, OPJ_TRUE);
  j->codec = opj_create_decompress(format == MX_IMAGE_JP2 ? OPJ_CODEC_JP2 : OPJ_CODEC_J2K);
  if (!j->stream || !j->codec) return "JPEG 2000: openjpeg could not start (out of memory)";
  opj_stream_set_read_function(j->stream, jp2_read);
  opj_stream_set_skip_function(j->stream, jp2_skip);
  opj_stream_set_seek_function(j->stream, jp2_seek);
  opj_stream_set_user_data(j->stream, &j->mem, NULL);
  opj_stream_set_user_data_length(j->stream, len);
  opj_set_info_handler(j->codec, jp2_quiet, NULL);
  opj_set_warning_handler(j->codec, jp2_quiet, NULL);
  opj_set_error_handler(j->codec, jp2_quiet, NULL);
  opj_dparameters_t params;
  opj_set_default_decoder_parameters(&params);
  if (!opj_setup_decoder(j->codec, &params) || !opj_read_header(j->stream, j->codec, &j->image) || !j->image)
    return "JPEG 2000: corrupt or truncated header";
  if (j->image->x1 <= j->image->x0 || j->image->y1 <= j->image->y0) return "JPEG 2000: empty image area";
  return NULL;
}

const char *mx__jp2_probe(const uint8_t *data, size_t len, mx_image_info *info) {
  jp2_job j;
  const char *why = jp2_open(&j, data, len, info->format);
  if (!why) {
    info->width = (int64_t)j.image->x1 - j.image->x0;
    info->height = (int64_t)j.image->y1 - j.image->y0;
  }
  jp2_close(&j);
  return why;
}

/* One sample of component c as an 8-bit value. */
static uint8_t jp2_sample8(const opj_image_comp_t *c, size_t i) {
  int64_t v = c->data[i];
  if (c->sgnd) v += (int64_t)1 << (c->prec - 1);
  if (v < 0) return 0; /* out-of-range sample: clamp before shifting */
  if (c->prec > 8)
    v >>= c->prec - 8;
  else if (c->prec < 8)
    v <<= 8 - c->prec;
  return (uint8_t)(v > 255 ? 255 : v);
}

static const char *jp2_planes_to_rgb(const opj_image_t *im, const mx_image_info *info, uint8_t *rgb) {
  if (im->numcomps < 1 || im->numcomps > 4) return "JPEG 2000: only 1 to 4 components are supported";
  if (im->color_space == OPJ_CLRSPC_SYCC || im->color_space == OPJ_CLRSPC_EYCC ||
      im->color_space == OPJ_CLRSPC_CMYK)
    return "JPEG 2000: YCC and CMYK colour spaces are not supported";
  for (uint32_t k = 0; k < im->numcomps; k++) {
    const opj_image_comp_t *c = &im->comps[k];
    if (!c->data) return "JPEG 2000: a component was not decoded";
    if (c->dx != 1 || c->dy != 1) return "JPEG 2000: subsampled components are not supported";
    if ((int64_t)c->w != info->width || (int64_t)c->h != info->height)
      return "JPEG 2000: a component's size differs from the image size";
    if (c->prec < 1 || c->prec > 31) return "JPEG 2000: component precision outside 1..31 bits";
  }
  const bool gray = im->numcomps < 3;
  const size_t pixels = (size_t)info->height * (size_t)info->width;
  for (size_t i = 0; i < pixels; i++)
    for (int ch = 0; ch < 3; ch++) rgb[i * 3 + (size_t)ch] = jp2_sample8(&im->comps[gray ? 0 : ch], i);
  return NULL;
}

const char *mx__jp2_decode(const uint8_t *data, size_t len, const mx_image_info *info, uint8_t *rgb) {
  jp2_job j;
  const char *why = jp2_open(&j, data, len, info->format);
  if (!why && ((int64_t)j.image->x1 - j.image->x0 != info->width ||
               (int64_t)j.image->y1 - j.image->y0 != info->height))
    why = "JPEG 2000: the image size differs from the header read before";
  if (!why && (!opj_decode(j.codec, j.stream, j.image) || !opj_end_decompress(j.codec, j.stream)))
    why = "JPEG 2000: corrupt or truncated data (openjpeg refused it)";
  if (!why) why = jp2_planes_to_rgb(j.image, info, rgb);
  jp2_close(&j);
  return why;
}
