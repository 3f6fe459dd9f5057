/* The Winograd core's tile transforms 16 tiles at a time, one per AVX-512 lane
 * (kernels/conv_winograd_lanes.c): the same points, bit for bit, as the plain transforms of
 * kernels/conv_winograd.c, which remain for CPUs without AVX-512 and for the GEMM's AVX2 copy. */
#ifndef MIXRT_KERNELS_CONV_WINOGRAD_LANES_H
#define MIXRT_KERNELS_CONV_WINOGRAD_LANES_H

#include <stdbool.h>
#include <stdint.h>

/* Whether the lane transforms run: an AVX-512 CPU with the GEMM's AVX-512 copy in use. */
bool mx__kwino_lanes(void);

/* The input transform's second half for one channel's tile row: t1 holds B^T d of the six image
 * rows (6 rows of tw*4+2 floats, ld apart); tile tc's point (k, l) goes to
 * v[(k*6+l)*vstride + its panel offset], as in conv_winograd.c's input_tile_row. */
void mx__kwino_input_columns(const float *t1, int64_t ld, int64_t tw, float *v, int64_t vstride, int64_t c,
                             int64_t ch, int64_t t0);

/* The whole output transform of one output channel's tile row: mo[p * mstride + tc] is point p
 * of tile tc; the 4 output rows (tw*4 floats, ld apart) go to out. */
void mx__kwino_output_rows(const float *mo, int64_t mstride, int64_t tw, float *out, int64_t ld);

#endif /* MIXRT_KERNELS_CONV_WINOGRAD_LANES_H */
