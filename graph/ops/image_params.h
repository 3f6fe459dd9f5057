/* Params struct of the image group (ImageDecoder), as its CPU kernel reads it.
 *
 * Plain old data without pointers: .mxm files store these structs byte for byte. */
#ifndef MIXRT_GRAPH_OPS_IMAGE_PARAMS_H
#define MIXRT_GRAPH_OPS_IMAGE_PARAMS_H

#include <stdint.h>

/* ImageDecoder's pixel_format attribute. */
enum { MX_PIXEL_RGB = 0, MX_PIXEL_BGR = 1, MX_PIXEL_GRAYSCALE = 2 };

typedef struct mx_image_decoder_params {
  int32_t pixel_format; /* MX_PIXEL_*: output channels 3, 3 (reversed) or 1 */
  int32_t reserved;     /* always 0 */
} mx_image_decoder_params;

#endif /* MIXRT_GRAPH_OPS_IMAGE_PARAMS_H */
