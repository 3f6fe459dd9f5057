/* Op definitions of the image group: ImageDecoder (opset 20).
 *
 * ImageDecoder turns the bytes of an encoded image (a 1-D uint8 tensor) into a uint8 [H, W, C]
 * tensor, C = 3 for RGB / BGR and 1 for Grayscale. H and W live in the encoded header, so the
 * op reads its input by value: with the bytes at hand (a constant, or any run) inference reads
 * the header through image_codec.c and gives the exact shape; without them H and W are fresh
 * symbols. A corrupt header, an unknown format or an image above the size limits fails there,
 * before the output is allocated. */
#include <string.h>

#include "graph/ops/groups.h"
#include "graph/ops/image_codec.h"
#include "graph/ops/image_params.h"
#include "graph/ops/op.h"

static const mx_attr_spec image_decoder_attrs[] = {
    {.name = "pixel_format", .type = MX_ATTR_STRING, .def_s = "RGB"},
    {0},
};

static mx_status image_decoder_parse(const mx_parse_ctx *pc, void *params) {
  mx_image_decoder_params *p = params;
  memset(p, 0, sizeof *p);
  char fmt[16];
  if (mx__parse_string(pc, "pixel_format", fmt, sizeof fmt) != MX_OK)
    return mx__parse_fail(pc, "attribute pixel_format: must be RGB, BGR or Grayscale");
  if (strcmp(fmt, "RGB") == 0)
    p->pixel_format = MX_PIXEL_RGB;
  else if (strcmp(fmt, "BGR") == 0)
    p->pixel_format = MX_PIXEL_BGR;
  else if (strcmp(fmt, "Grayscale") == 0)
    p->pixel_format = MX_PIXEL_GRAYSCALE;
  else
    return mx__parse_fail(pc, "attribute pixel_format: '%s' is not RGB, BGR or Grayscale", fmt);
  return MX_OK;
}

static mx_status image_decoder_infer(mx_infer_ctx *ctx) {
  const mx_image_decoder_params *p = ctx->params;
  const mx_value_info *in = &ctx->in[0];
  if (in->dtype != MX_UINT8)
    return mx__infer_fail(ctx, MX_ERR_DTYPE,
                          "input 0 (encoded_stream) has dtype %s; ImageDecoder takes uint8",
                          mx_dtype_name(in->dtype));
  if (in->shape.rank != MX_RANK_UNKNOWN && in->shape.rank != 1)
    return mx__infer_fail(ctx, MX_ERR_SHAPE, "input 0 (encoded_stream) has rank %d, not 1",
                          (int)in->shape.rank);
  mx_shape *y = &ctx->out[0].shape;
  ctx->out[0].dtype = MX_UINT8;
  y->rank = 3;
  y->dims[2] = p->pixel_format == MX_PIXEL_GRAYSCALE ? 1 : 3;
  const mx_tensor *t = in->data;
  if (t && t->data && t->dtype == MX_UINT8 && t->rank == 1) {
    mx_image_info info;
    const char *why = mx__image_probe(t->data, (size_t)t->dims[0], &info);
    if (why) return mx__infer_fail(ctx, MX_ERR_KERNEL, "input 0 (encoded_stream): %s", why);
    y->dims[0] = info.height;
    y->dims[1] = info.width;
    return MX_OK;
  }
  y->dims[0] = mx__infer_fresh(ctx, "image_height");
  y->dims[1] = mx__infer_fresh(ctx, "image_width");
  return MX_OK;
}

static const mx_op_def op_image_decoder = {
    .name = "ImageDecoder",
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .value_inputs = 1u, /* the header in the bytes gives the output size */
    .attrs = image_decoder_attrs,
    .params_size = sizeof(mx_image_decoder_params),
    .parse = image_decoder_parse,
    .infer = image_decoder_infer,
};

const mx_op_def *const mx__ops_image[] = {
    &op_image_decoder,
    NULL,
};
