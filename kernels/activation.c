/* CPU kernels of the activations and the remaining math group: Elu, Selu, Celu, LeakyRelu, PRelu, HardSigmoid, HardSwish, ThresholdedRelu, Softplus, Softsign, Shrink, Mish, Swish, Hardmax, inverse trig and hyperbolic functions, Round, IsNaN, IsInf, BitShift, Bitwise*, Det, CumProd, ReduceLogSum. */
#include "kernels/groups.h"

const mx_kernel_def *const mx__kernels_activation[] = {
    NULL,
};
