/* CPU kernels of the random numbers group: RandomUniform, RandomNormal, RandomUniformLike, RandomNormalLike, Bernoulli, Multinomial. */
#include "kernels/groups.h"

const mx_kernel_def *const mx__kernels_random[] = {
    NULL,
};
