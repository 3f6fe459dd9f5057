/* MaxPool rows of 3 taps at stride 2 (ResNet's 3x3/2 MaxPool) with AVX-512 lanes
 * (kernels/pool_lanes.c): the same taps in the same order as the plain loop in kernels/pool.c,
 * so NaNs and ties come out the same. */
#ifndef MIXRT_KERNELS_POOL_LANES_H
#define MIXRT_KERNELS_POOL_LANES_H

#include <stdbool.h>
#include <stdint.h>

/* Whether the CPU runs mx__kpool_max3_s2. */
bool mx__kpool_lanes(void);

/* For o in [0, n): y[o] = the maximum of x[2o], x[2o+1], x[2o+2], taken tap by tap as
 * `v > y ? v : y` starting from y[o] itself, or from x[2o] when `first`. Reads x[0 .. 2n]. */
void mx__kpool_max3_s2(float *y, const float *x, int64_t n, bool first);

#endif /* MIXRT_KERNELS_POOL_LANES_H */
