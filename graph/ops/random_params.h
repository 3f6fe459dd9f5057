/* Params struct of the random number ops: RandomUniform, RandomNormal, RandomUniformLike,
 * RandomNormalLike, Bernoulli and Multinomial, as their CPU kernels read it.
 *
 * Plain old data without pointers: .mxm files store these structs byte for byte. */
#ifndef MIXRT_GRAPH_OPS_RANDOM_PARAMS_H
#define MIXRT_GRAPH_OPS_RANDOM_PARAMS_H

#include <stdint.h>

#include "mixrt/shape.h"

/* Which distribution a random op draws from. */
enum { MX_RANDOM_UNIFORM = 0, MX_RANDOM_NORMAL = 1, MX_RANDOM_BERNOULLI = 2, MX_RANDOM_MULTINOMIAL = 3 };

typedef struct mx_random_params {
  int32_t kind;        /* MX_RANDOM_* */
  int32_t dtype;       /* ONNX dtype code of the output; 0: the input's dtype */
  uint64_t seed;       /* the seed attribute's bits, or a hash of the node name: every run of
                                a node draws the same numbers */
  float a, b;          /* uniform: low, high; normal: mean, scale */
  int32_t sample_size; /* Multinomial */
  int32_t rank;        /* RandomUniform / RandomNormal: the shape attribute */
  int64_t shape[MX_MAX_RANK];
} mx_random_params;

#endif /* MIXRT_GRAPH_OPS_RANDOM_PARAMS_H */
