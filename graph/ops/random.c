/* Op definitions of the random numbers group: RandomUniform, RandomNormal, RandomUniformLike, RandomNormalLike, Bernoulli, Multinomial. */
#include "graph/ops/groups.h"

const mx_op_def *const mx__ops_random[] = {
    NULL,
};
