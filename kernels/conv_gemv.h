/* The float32 Conv of a 1x1 map through 1x1 taps (kernels/conv_gemv.c): a matrix-vector
 * product per image, as in a squeeze-and-excitation block, called by kernels/conv_fast.c. */
#ifndef MIXRT_KERNELS_CONV_GEMV_H
#define MIXRT_KERNELS_CONV_GEMV_H

#include <stdbool.h>

#include "kernels/conv_impl.h"

/* Whether the Conv j reads one image position per output position and has one of each (1x1
 * taps on a 1x1 map, no padding) in a single group: y = W x per image. */
bool mx__kconv_gemv_applies(const mx_kconv_f32 *j);
/* Runs such a Conv on the calling thread (its work is a few hundred thousand multiply-adds at
 * most, less than a handoff to the pool costs); needs no scratch. */
void mx__kconv_gemv_run(const mx_kconv_f32 *j);

#endif /* MIXRT_KERNELS_CONV_GEMV_H */
