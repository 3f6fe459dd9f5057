/* The Winograd core's tile transforms 16 tiles at a time, one per AVX-512 lane
 * (kernels/conv_winograd_lanes.c): the same points, bit for bit, as the plain transforms of
 * kernels/conv_winograd.c, which remain for CPUs without AVX-512 and for the GEMM's AVX2 copy. */
#ifndef MIXRT_KERNELS_CONV_WINOGRAD_LANES_H
#define MIXRT_KERNELS_CONV_WINOGRAD_LANES_H

#include <stdbool.h>
#include <stdint.h>

/* Whether the lane transforms run: an AVX-512 CPU with the GEMM's AVX-512 copy in use. */
bool mx__kwino_lanes(void);

/* The whole input transform of one channel's tile-row segment, read in place: xc is the
 * channel's h x w image, the segment's tiles read image rows ih0 .. ih0+5 and columns x0 ..
 * x0 + tw*4+1 (zero outside the image); tile tc's point (k, l) goes to
 * v[(k*6+l)*vstride + the panel offset of tile t0 + tc], as conv_winograd.c's band copy and
 * input_tile_row put it. */
void mx__kwino_input_segment(const float *xc, int64_t h, int64_t w, int64_t ih0, int64_t x0, int64_t tw, float *v,
                             int64_t vstride, int64_t c, int64_t ch, int64_t t0);

/* The whole output transform of one output channel's tile row: mo[p * mstride + tc] is point p
 * of tile tc; the 4 output rows (tw*4 floats, ld apart) go to out. */
void mx__kwino_output_rows(const float *mo, int64_t mstride, int64_t tw, float *out, int64_t ld);

#endif /* MIXRT_KERNELS_CONV_WINOGRAD_LANES_H */
