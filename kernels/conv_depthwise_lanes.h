/* The channels-in-lanes path of the depthwise float32 Conv (kernels/conv_depthwise_lanes.c):
 * 16 channels at a time, each vector lane one channel, for 2-D Convs on small maps. Called by
 * kernels/conv_depthwise.c. */
#ifndef MIXRT_KERNELS_CONV_DEPTHWISE_LANES_H
#define MIXRT_KERNELS_CONV_DEPTHWISE_LANES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/conv_impl.h"

/* Channels per group of the lanes path (one vector). */
#define MX_KDWL_LANES 16

/* Scratch floats one thread of the lanes path needs for a window, or 0 when its geometry does not
 * suit the path (not 2-D, or a padded image too large to stay in cache). */
size_t mx__kdwl_slot_floats(const mx_kwin *w);
/* Whether the lanes path computes Conv j (geometry as above, no residual, an activation it
 * applies in lanes: none, Relu, Clip, HardSigmoid, HardSwish). */
bool mx__kdwl_applies(const mx_kconv_f32 *j);
/* Output channels oc0 .. oc0 + 15 (those below j->m) of image `in`, with mx__kdwl_slot_floats
 * floats of scratch at slot; clear: the slot's padded image has not been zeroed yet in this run. */
void mx__kdwl_group(const mx_kconv_f32 *j, int64_t in, int64_t oc0, float *slot, bool clear);

#endif /* MIXRT_KERNELS_CONV_DEPTHWISE_LANES_H */
