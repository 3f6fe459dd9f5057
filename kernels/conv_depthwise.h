/* The depthwise float32 Conv core (kernels/conv_depthwise.c), called by the Conv dispatcher of
 * kernels/conv_fast.c for 1-D and 2-D Convs with one input channel per output channel. */
#ifndef MIXRT_KERNELS_CONV_DEPTHWISE_H
#define MIXRT_KERNELS_CONV_DEPTHWISE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/conv_impl.h"

/* Whether the depthwise core computes a Conv of this window with cg input channels per group. */
bool mx__kconv_dw_applies(const mx_kwin *w, int64_t cg);
/* Scratch floats each thread of a depthwise Conv needs. */
size_t mx__kconv_dw_slot_floats(const mx_kwin *w);
/* Runs the depthwise Conv j on up to `slots` threads, each with mx__kconv_dw_slot_floats(w)
 * floats of scratch at scratch + slot * that. */
void mx__kconv_dw_run(const mx_kconv_f32 *j, float *scratch, int32_t slots);

#endif /* MIXRT_KERNELS_CONV_DEPTHWISE_H */
